//! A seeded synthetic citation-like graph generator: a degree-corrected stochastic block model
//! (DC-SBM) with power-law expected degrees, homophilous classes, and either sparse bag-of-words
//! features drawn from class-dependent word distributions or dense class centroids plus Gaussian
//! noise. It needs no files, so every example, bench and test runs offline; [`super::write`]
//! writes its output in the OGB layout so other tools can read the very same graph.
//!
//! # Model
//! 1. **Classes.** `n_classes` classes with proportions π_k ∝ 1 + k·`class_size_slope`
//!    (GraphWorld's `MakePi`); class sizes are exact (largest remainder), and the labels are
//!    spread over the node ids by a seeded random permutation.
//! 2. **Degree propensities.** θ_i = (1 − U)^(−1/(γ−1)) ≥ 1 (a Pareto law, P(θ) ∝ θ^−γ,
//!    γ = `degree_exponent`), capped at 4·√n. The expected degree of node i is proportional
//!    to θ_i.
//! 3. **Edges.** round(`homophily`·E) of the E edges lie inside a class and the rest between
//!    classes, drawn as two separate sets. Each candidate edge picks u ∝ θ over all nodes; an
//!    intra-class candidate then picks v ∝ θ inside u's class, an inter-class one v ∝ θ inside
//!    another class b ≠ class(u) drawn ∝ Θ_b = Σ_{i∈b} θ_i. So `homophily` is the exact
//!    fraction of edges inside a class. **Topics** nest inside the classes: each class is cut into topics of about
//!    `topic_size` nodes, and each topic has one *partner topic* in another class (drawn
//!    once per topic). With probability `topic_locality` a candidate stays local: an
//!    intra-class v is then drawn uniformly inside u's topic, an inter-class v uniformly inside
//!    the partner topic. Uniform targets (not ∝ θ) close triangles among low-degree papers
//!    too, which is what gives the graph its clustering (the mean local clustering
//!    coefficient that `sparse-gcn info` prints: 0.08 for `cora-like` and 0.14 for
//!    `arxiv-like` (seed 0), against 0.24 for the real Cora and 0.14 for CiteSeer; about 0.04
//!    and 0.03 without topics), and the nested
//!    communities a locality-improving node order finds (see [`crate::order`]).
//!    Self-loops are discarded and duplicates merged, and candidates are drawn in rounds
//!    until the number of *unique* undirected edges reaches the target exactly (a small
//!    overshoot of the last round is removed uniformly at random). Every draw is O(1) (Vose
//!    alias tables, one 64-bit random word each).
//! 4. **Features.** [`FeatureKind::BagOfWords`]: each class owns a random slice of the
//!    vocabulary and each of `words_per_node` words comes from it with probability
//!    `feature_signal`, else uniformly (binary CSR). [`FeatureKind::Dense`]: class centroids
//!    are random directions of length `center_distance`; a node's features are its centroid
//!    plus N(0, `cluster_variance`) noise per coordinate.
//! 5. **Split.** [`SplitKind::Planetoid`] (`train_per_class` per class, then `n_valid` and
//!    `n_test`), split name `"planetoid"`; or [`SplitKind::Random`] (seeded random fractions, as
//!    OGB's sizes but not its time-based order), split name `"random"`.
//!
//! # Reproducibility and parallelism
//! Every random part draws from its own ChaCha8 stream of the seed. Edge candidates are drawn
//! in fixed blocks of 65,536, each with the stream (seed, round, block index), and feature rows
//! in fixed blocks of 1,024 rows, each with the stream (seed, block index); blocks run under
//! rayon and are assembled in block order. The dataset is therefore bit-identical for any thread
//! count and on every machine.
//!
//! # Cost
//! O(n + E + n·in_dim) time; memory proportional to the output (the packed edge keys, 8 bytes
//! per edge, twice during the radix sort, then the `(u32, u32)` list handed to
//! [`Graph::try_from_edges`]). `products-like` (2.4 M nodes, 62 M edges, 100 dense features)
//! builds in memory in about a minute's fraction on 2 cores; see `tests/suite/synthetic.rs`.
//!
//! [`Graph::try_from_edges`]: crate::graph::Graph::try_from_edges
//!
//! # GraphWorld names
//! The parameters follow GraphWorld's SBM generator (`SbmGeneratorWrapper`): `nvertex` =
//! [`CitationLike::n_nodes`], `avg_degree` ≈ [`CitationLike::avg_degree`], `p_to_q_ratio` ↔
//! [`CitationLike::homophily`] (see [`CitationLike::p_to_q_ratio`]), `num_clusters` =
//! [`CitationLike::n_classes`], `cluster_size_slope` = [`CitationLike::class_size_slope`],
//! `power_exponent` = [`CitationLike::degree_exponent`], `feature_dim` =
//! [`CitationLike::n_features`], `feature_center_distance` / `feature_cluster_variance` =
//! [`FeatureKind::Dense`]'s fields. GraphWorld's `min_deg` has no counterpart: the expected
//! degrees are θ_i scaled so that they sum to 2E, so the smallest one follows from the edge
//! count and the exponent.
//!
//! This file holds the generator's parameters ([`CitationLike`], [`FeatureKind`],
//! [`SplitKind`]), the named [`Preset`]s, the parameter checks and [`CitationLike::generate`],
//! plus the layout of the seed's RNG streams and blocks; the sampling is in the submodules:
//! `nodes` (classes, topics, degree propensities, alias tables), `edges` (the DC-SBM edge rounds
//! up to the exact target), `features` (bag-of-words or dense centroids) and `split`.

mod disk;
mod edges;
mod features;
mod nodes;
mod split;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use self::nodes::Nodes;
use super::{Dataset, Skeleton};
use crate::{ConfigError, Error, Result};

/// How node features are generated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FeatureKind {
    /// Sparse binary bag-of-words (Cora, CiteSeer): [`CitationLike::words_per_node`] words per
    /// node, each from the node's class vocabulary with probability
    /// [`CitationLike::feature_signal`], else uniform over the vocabulary. Stored as
    /// sparse [`Features`] with values 1.0.
    ///
    /// [`Features`]: super::Features
    BagOfWords,
    /// Dense features (ogbn-arxiv's averaged word embeddings, ogbn-products' PCA'd
    /// bag-of-words): x_i = c_{class(i)} + ε_i, with ε_i ~ N(0, `cluster_variance`·I). Stored
    /// as dense [`Features`].
    ///
    /// [`Features`]: super::Features
    Dense {
        /// Length ‖c_k‖ of each class centroid c_k, a uniformly random direction.
        /// GraphWorld's `feature_center_distance` is instead the *variance* v of each centroid
        /// coordinate (c_k ~ N(0, v·I)), which gives ‖c_k‖ ≈ √(feature_dim · v): set
        /// `center_distance = (feature_dim · v).sqrt()` to match it. Two centroids lie about
        /// √2·`center_distance` apart.
        center_distance: f64,
        /// Variance of the per-coordinate Gaussian noise around the centroid (GraphWorld's
        /// `feature_cluster_variance`).
        cluster_variance: f64,
    },
}

/// How the train / validation / test split is drawn (over a seeded random node order).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SplitKind {
    /// Planetoid style (Kipf & Welling): the first [`CitationLike::train_per_class`] nodes of
    /// each class train, the next [`CitationLike::n_valid`] nodes validate and the next
    /// [`CitationLike::n_test`] test (each capped so that validation gets at most half of the
    /// rest). Split name `"planetoid"`.
    Planetoid,
    /// Random fractions, like OGB's split sizes (ogbn-arxiv ≈ 54/18/28 %, ogbn-products ≈
    /// 8/2/90 %; OGB splits by time or sales rank, this split is uniformly random). Train gets
    /// round(n·`train`) nodes, validation round(n·`valid`), test the rest. Split name
    /// `"random"`.
    Random {
        /// Fraction of nodes in the training set.
        train: f64,
        /// Fraction of nodes in the validation set.
        valid: f64,
    },
    /// Random sets of given sizes, the other nodes in none (ogbn-papers100M labels 1.5 M of
    /// its 111 M papers): over the seeded random node order, the first `train` nodes train,
    /// the next `valid` validate and the next `test` test (each capped by what is left). Split
    /// name `"random"`.
    Sizes {
        /// Training nodes.
        train: usize,
        /// Validation nodes.
        valid: usize,
        /// Test nodes.
        test: usize,
    },
}

/// Parameters of the citation-like generator (see the [module docs](self) for the model).
/// Defaults give a Cora-sized graph; [`Preset`] gives named configurations.
#[derive(Debug, Clone, PartialEq)]
pub struct CitationLike {
    /// Number of nodes (GraphWorld: `nvertex`).
    pub n_nodes: usize,
    /// Number of classes (topics) (GraphWorld: `num_clusters`).
    pub n_classes: usize,
    /// Target mean degree: the graph gets round(`n_nodes`·`avg_degree`/2) unique undirected
    /// edges, unless [`CitationLike::n_edges`] is set. (GraphWorld's `avg_degree` asks for
    /// `nvertex`·`avg_degree` edges before self-loops and duplicates are removed.)
    pub avg_degree: f64,
    /// Exact number of unique undirected edges (no self-loops; duplicates merged); overrides
    /// `avg_degree` when set. `graph.n_edges()` equals it.
    pub n_edges: Option<usize>,
    /// Fraction of edges inside a class, h ∈ [0, 1]: exactly round(h·E) of the E edges (all of
    /// them with a single class), unless the classes hold fewer intra-class (or inter-class)
    /// pairs than that asks, when the other kind makes up the difference. GraphWorld sets the
    /// ratio r = p/q (`p_to_q_ratio`) of intra- to inter-class edge rates instead; with class
    /// proportions π and S = Σ π_k², h = r·S / (r·S + 1 − S), and for equal classes
    /// h = r / (r + C − 1). See [`CitationLike::p_to_q_ratio`].
    pub homophily: f64,
    /// Exponent γ > 1 of the power-law expected degrees, P(θ) ∝ θ^−γ (GraphWorld:
    /// `power_exponent`). Smaller γ gives heavier hubs; above ~10 degrees are nearly uniform.
    pub degree_exponent: f64,
    /// Class size slope s ≥ 0: class k gets a share ∝ 1 + k·s (GraphWorld:
    /// `cluster_size_slope`; 0 gives equal classes).
    pub class_size_slope: f64,
    /// Feature dimension, `in_dim` (GraphWorld: `feature_dim`); the vocabulary size for
    /// bag-of-words.
    pub n_features: usize,
    /// Sparse bag-of-words or dense centroid features.
    pub features: FeatureKind,
    /// Bag-of-words only: words drawn per node (before duplicates are merged).
    pub words_per_node: usize,
    /// Bag-of-words only: probability that a word comes from the node's class vocabulary
    /// rather than uniformly.
    pub feature_signal: f64,
    /// How the split is drawn.
    pub split: SplitKind,
    /// [`SplitKind::Planetoid`]: training nodes per class (Planetoid: 20).
    pub train_per_class: usize,
    /// [`SplitKind::Planetoid`]: validation nodes.
    pub n_valid: usize,
    /// [`SplitKind::Planetoid`]: test nodes.
    pub n_test: usize,
    /// Nodes per topic (≥ 1): each class is cut into ⌈size/`topic_size`⌉ topics of nearly
    /// equal size, the sub-fields inside a subject area. See [`CitationLike::topic_locality`].
    pub topic_size: usize,
    /// Probability ρ ∈ [0, 1] that a candidate edge stays local to its source's topic: an
    /// intra-class edge then ends inside u's own topic, an inter-class edge inside the one
    /// *partner topic* (in another class) that u's topic cites across classes. 0 gives the plain
    /// DC-SBM. Real citation graphs are clustered (Cora's mean local clustering coefficient is
    /// 0.24, CiteSeer's 0.14; the plain DC-SBM at Cora's size gives 0.04), and this is what
    /// gives them the communities that a locality-improving node order exploits.
    pub topic_locality: f64,
    /// How the nodes are numbered: spread over the ids by a seeded random permutation (the
    /// default, as the module docs say), or in the generator's own order.
    pub ids: NodeIds,
}

/// How [`CitationLike`] numbers its nodes ([`CitationLike::ids`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NodeIds {
    /// A seeded random permutation spreads classes and topics over the ids.
    #[default]
    Shuffled,
    /// Class by class, topic by topic: contiguous ranges of ids hold whole topics, the order a
    /// graph partitioner would leave the nodes in. The same model and random streams as
    /// [`NodeIds::Shuffled`]: the same classes, topics, degree propensities and candidate
    /// edges under other names (the last round's trim, the features and the split are drawn
    /// over the ids, so they differ).
    Topics,
}

impl Default for CitationLike {
    fn default() -> Self {
        CitationLike {
            n_nodes: 2708,
            n_classes: 7,
            avg_degree: 4.0,
            n_edges: None,
            homophily: 0.8,
            degree_exponent: 2.5,
            class_size_slope: 0.0,
            n_features: 1433,
            features: FeatureKind::BagOfWords,
            words_per_node: 18,
            feature_signal: 0.3,
            split: SplitKind::Planetoid,
            train_per_class: 20,
            n_valid: 500,
            n_test: 1000,
            topic_size: DEFAULT_TOPIC_SIZE,
            topic_locality: DEFAULT_TOPIC_LOCALITY,
            ids: NodeIds::Shuffled,
        }
    }
}

/// [`CitationLike::topic_size`] of every preset.
pub const DEFAULT_TOPIC_SIZE: usize = 16;
/// [`CitationLike::topic_locality`] of every preset.
pub const DEFAULT_TOPIC_LOCALITY: f64 = 0.7;

/// Named generator configurations, sized like the datasets they imitate.
///
/// | preset | nodes | undirected edges | features | classes | homophily | split |
/// |---|---|---|---|---|---|---|
/// | `cora-like` | 2,708 | 5,278 | 1,433 bag-of-words | 7 | 0.8 | Planetoid 20/class, 500, 1000 |
/// | `arxiv-like` | 169,343 | 1,166,243 | 128 dense | 40 | 0.65 | random 54/18/28 % |
/// | `products-like` | 2,449,029 | 61,859,140 | 100 dense | 47 | 0.8 | random 8/2/90 % |
///
/// Every preset has topics of [`DEFAULT_TOPIC_SIZE`] nodes with locality
/// [`DEFAULT_TOPIC_LOCALITY`] (see the [module docs](self)). The node and edge counts, and the
/// number of intra-class edges, are exact. The dense presets' features alone separate the classes
/// only partly (a nearest-centroid rule is right for about half of the arxiv-like nodes), so
/// aggregating over neighbours pays, as on the real graphs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Preset {
    /// Cora-sized: [`CitationLike::default`] with Cora's 5,278 edges.
    CoraLike,
    /// ogbn-arxiv-sized, dense 128-d features, 40 classes.
    ArxivLike,
    /// ogbn-products-sized, dense 100-d features, 47 classes.
    ProductsLike,
    /// ogbn-papers100M-sized: 111,059,956 nodes, 1,615,685,872 edges, dense 128-d features,
    /// 172 classes, 1,207,179 / 125,265 / 214,338 training / validation / test nodes (the
    /// others in no set); arxiv-like's degree law, homophily and classes otherwise. Too large
    /// for memory at full size: [`CitationLike::write_store`] writes it out of core
    /// (`sparse-gcn generate --preset papers100m-like --format store`), and
    /// [`Preset::params_scaled`] gives smaller graphs of its shape.
    Papers100mLike,
}

impl Preset {
    /// Every preset, smallest first.
    pub const ALL: [Preset; 4] = [
        Preset::CoraLike,
        Preset::ArxivLike,
        Preset::ProductsLike,
        Preset::Papers100mLike,
    ];

    /// The preset's name (`"cora-like"`, `"arxiv-like"`, `"products-like"`).
    pub fn name(self) -> &'static str {
        match self {
            Preset::CoraLike => "cora-like",
            Preset::ArxivLike => "arxiv-like",
            Preset::ProductsLike => "products-like",
            Preset::Papers100mLike => "papers100m-like",
        }
    }

    /// The generator parameters.
    pub fn params(self) -> CitationLike {
        match self {
            Preset::CoraLike => CitationLike {
                n_edges: Some(5278),
                avg_degree: 2.0 * 5278.0 / 2708.0,
                ..CitationLike::default()
            },
            Preset::ArxivLike => CitationLike {
                n_nodes: 169_343,
                n_classes: 40,
                avg_degree: 2.0 * 1_166_243.0 / 169_343.0,
                n_edges: Some(1_166_243),
                homophily: 0.65,
                degree_exponent: 2.5,
                class_size_slope: 0.5,
                n_features: 128,
                features: FeatureKind::Dense {
                    center_distance: 2.0,
                    cluster_variance: 1.0,
                },
                split: SplitKind::Random {
                    train: 0.54,
                    valid: 0.18,
                },
                ..CitationLike::default()
            },
            Preset::ProductsLike => CitationLike {
                n_nodes: 2_449_029,
                n_classes: 47,
                avg_degree: 2.0 * 61_859_140.0 / 2_449_029.0,
                n_edges: Some(61_859_140),
                homophily: 0.8,
                degree_exponent: 2.8,
                class_size_slope: 0.5,
                n_features: 100,
                features: FeatureKind::Dense {
                    center_distance: 2.0,
                    cluster_variance: 1.0,
                },
                split: SplitKind::Random {
                    train: 0.08,
                    valid: 0.02,
                },
                ..CitationLike::default()
            },
            Preset::Papers100mLike => CitationLike {
                n_nodes: 111_059_956,
                n_classes: 172,
                avg_degree: 2.0 * 1_615_685_872.0 / 111_059_956.0,
                n_edges: Some(1_615_685_872),
                split: SplitKind::Sizes {
                    train: 1_207_179,
                    valid: 125_265,
                    test: 214_338,
                },
                ..Preset::ArxivLike.params()
            },
        }
    }

    /// [`Preset::params`] scaled by `scale` ∈ (0, 1]: round(`scale`·n) nodes (at least two
    /// per class), round(`scale`·E) edges and split sizes (training nodes per class,
    /// validation and test nodes; at least one each), the same
    /// degree law, homophily, classes, topics and features — a smaller graph of the same shape.
    /// `scale` 1 is [`Preset::params`].
    ///
    /// # Errors
    /// A `scale` outside (0, 1].
    pub fn params_scaled(self, scale: f64) -> Result<CitationLike> {
        if !(scale > 0.0 && scale <= 1.0) {
            return Err(invalid("scale", scale, "in (0, 1]"));
        }
        let mut p = self.params();
        if scale == 1.0 {
            return Ok(p);
        }
        let by = |v: usize| ((v as f64 * scale).round() as usize).max(1);
        p.n_nodes = by(p.n_nodes).max(2 * p.n_classes);
        p.n_edges = p.n_edges.map(by);
        p.train_per_class = by(p.train_per_class);
        p.n_valid = by(p.n_valid);
        p.n_test = by(p.n_test);
        if let SplitKind::Sizes { train, valid, test } = p.split {
            p.split = SplitKind::Sizes {
                train: by(train),
                valid: by(valid),
                test: by(test),
            };
        }
        Ok(p)
    }

    /// The name [`Preset::generate`] gives its dataset at `scale`: `NAME-seedS`, or
    /// `NAME-xSCALE-seedS` below scale 1.
    pub fn dataset_name(self, scale: f64, seed: u64) -> String {
        if scale == 1.0 {
            format!("{}-seed{seed}", self.name())
        } else {
            format!("{}-x{scale}-seed{seed}", self.name())
        }
    }

    /// Generates the preset with `seed`; the dataset is named `"<preset>-seed<seed>"`.
    ///
    /// # Errors
    /// From [`CitationLike::generate`]: [`Error::TooLarge`] for a preset that does not fit in
    /// the memory available (papers100m-like: see [`CitationLike::write_store`]).
    pub fn generate(self, seed: u64) -> Result<Dataset> {
        let mut d = self.params().generate(seed)?;
        d.name = format!("{}-seed{seed}", self.name());
        Ok(d)
    }

    /// [`Preset::generate`] without the features ([`CitationLike::generate_skeleton`]).
    ///
    /// # Errors
    /// As [`Preset::generate`].
    pub fn generate_skeleton(self, seed: u64) -> Result<Skeleton> {
        let mut s = self.params().generate_skeleton(seed)?;
        s.name = format!("{}-seed{seed}", self.name());
        Ok(s)
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Preset {
    type Err = crate::ConfigError;

    /// Parses `"cora-like"`, `"arxiv-like"` or `"products-like"`.
    ///
    /// # Errors
    /// [`crate::ConfigError::UnknownName`] naming the known presets.
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        let choices: Vec<(&'static str, Preset)> =
            Preset::ALL.into_iter().map(|p| (p.name(), p)).collect();
        crate::error::parse_name("synthetic preset", s, &choices)
    }
}

/// Candidate edges per block (each block has its own RNG stream).
const EDGE_BLOCK: usize = 1 << 16;
/// Feature rows per block (each block has its own RNG stream).
const ROW_BLOCK: usize = 1 << 10;

// ChaCha8 streams of the seed, one per part.
const STREAM_NODES: u64 = 1;
const STREAM_FEATURE_SETUP: u64 = 2;
const STREAM_SPLIT: u64 = 3;
const STREAM_TRIM: u64 = 4;
const STREAM_TOPICS: u64 = 5;
/// Edge block b of round r uses `STREAM_EDGES | part << 56 | r << 40 | b` (part 0 draws the
/// intra-class edges, part 1 the inter-class ones); trimming part p uses `STREAM_TRIM | p << 8`.
const STREAM_EDGES: u64 = 1 << 62;
const STREAM_PART_SHIFT: u32 = 56;
/// Feature row block b uses `STREAM_ROWS | b`.
const STREAM_ROWS: u64 = 2 << 62;

fn rng_for(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(stream);
    r
}

/// An invalid generator parameter.
fn invalid(name: &str, value: f64, rule: &str) -> Error {
    Error::Dataset {
        path: PathBuf::from("CitationLike"),
        msg: format!("invalid parameter {name} = {value} (must be {rule})"),
    }
}

impl CitationLike {
    /// Checks the parameters.
    ///
    /// # Errors
    /// [`Error::Config`] ([`ConfigError::ZeroDim`]) for a zero count; [`Error::Dataset`]
    /// naming a real parameter outside its range (`homophily`, `feature_signal` and the split
    /// fractions in [0, 1], `degree_exponent` > 1, a finite `class_size_slope` ≥ 0, finite
    /// non-negative feature scales, `avg_degree` ≥ 0); [`Error::Mismatch`] if the edge target
    /// exceeds n(n−1)/2 or the node count does not fit in `u32`.
    pub fn check(&self) -> Result<()> {
        if self.n_nodes == 0 {
            return Err(ConfigError::ZeroDim("n_nodes").into());
        }
        if self.n_classes == 0 {
            return Err(ConfigError::ZeroDim("n_classes").into());
        }
        if self.n_features == 0 {
            return Err(ConfigError::ZeroDim("n_features").into());
        }
        if self.n_nodes > u32::MAX as usize {
            return Err(Error::Mismatch {
                what: "CitationLike: n_nodes (must fit in u32)".into(),
                expected: u32::MAX as usize,
                got: self.n_nodes,
            });
        }
        let unit = |name: &str, v: f64| {
            if (0.0..=1.0).contains(&v) {
                Ok(())
            } else {
                Err(invalid(name, v, "in [0, 1]"))
            }
        };
        unit("homophily", self.homophily)?;
        unit("feature_signal", self.feature_signal)?;
        unit("topic_locality", self.topic_locality)?;
        if self.topic_size == 0 {
            return Err(ConfigError::ZeroDim("topic_size").into());
        }
        if !(self.degree_exponent > 1.0 && self.degree_exponent.is_finite()) {
            return Err(invalid(
                "degree_exponent",
                self.degree_exponent,
                "finite and > 1",
            ));
        }
        if !(self.class_size_slope >= 0.0 && self.class_size_slope.is_finite()) {
            return Err(invalid(
                "class_size_slope",
                self.class_size_slope,
                "finite and >= 0",
            ));
        }
        if !(self.avg_degree >= 0.0 && self.avg_degree.is_finite()) {
            return Err(invalid("avg_degree", self.avg_degree, "finite and >= 0"));
        }
        if let FeatureKind::Dense {
            center_distance,
            cluster_variance,
        } = self.features
        {
            for (name, v) in [
                ("center_distance", center_distance),
                ("cluster_variance", cluster_variance),
            ] {
                if !(v >= 0.0 && v.is_finite()) {
                    return Err(invalid(name, v, "finite and >= 0"));
                }
            }
        }
        if let SplitKind::Random { train, valid } = self.split {
            unit("split train fraction", train)?;
            unit("split valid fraction", valid)?;
            unit("split train + valid fraction", train + valid)?;
        }
        let max_edges = self.max_edges();
        if self.target_edges() > max_edges {
            return Err(Error::Mismatch {
                what: format!(
                    "CitationLike: n_edges (at most n(n-1)/2 for {} nodes)",
                    self.n_nodes
                ),
                expected: max_edges,
                got: self.target_edges(),
            });
        }
        Ok(())
    }

    /// Refuses (before anything is allocated) a graph, and its features if `features`, that
    /// would not fit in the memory available: the node tables (about 36 bytes a node), the
    /// edge keys with their sort's scratch and the edge list (about 24 bytes an edge), the CSR
    /// (8 bytes an edge, 8 a node), and dense or bag-of-words features.
    fn check_memory(&self, features: bool) -> Result<()> {
        let (n, e) = (self.n_nodes as u64, self.target_edges() as u64);
        let graph = 44u64.saturating_mul(n).saturating_add(e.saturating_mul(32));
        let x = match self.features {
            FeatureKind::Dense { .. } => n.saturating_mul(self.n_features as u64).saturating_mul(4),
            FeatureKind::BagOfWords => n
                .saturating_mul(self.words_per_node as u64)
                .saturating_mul(8),
        };
        let need = if features {
            graph.saturating_add(x)
        } else {
            graph
        };
        crate::data::memory::check(need, || {
            format!(
                "generating {n} nodes and {e} edges in memory{} (sparse-gcn generate --format \
                 store writes a dense preset out of core)",
                if features {
                    ", with their features"
                } else {
                    ""
                }
            )
        })
    }

    /// n(n−1)/2, the most unique undirected edges without self-loops.
    fn max_edges(&self) -> usize {
        let n = self.n_nodes as u128;
        (n * n.saturating_sub(1) / 2).min(usize::MAX as u128) as usize
    }

    /// The number of unique undirected edges the generator produces: `n_edges`, or
    /// round(`n_nodes`·`avg_degree`/2) capped at n(n−1)/2.
    pub(crate) fn target_edges(&self) -> usize {
        match self.n_edges {
            Some(e) => e,
            None => ((self.n_nodes as f64 * self.avg_degree / 2.0).round() as usize)
                .min(self.max_edges()),
        }
    }

    /// Class proportions π_k ∝ 1 + k·`class_size_slope` (GraphWorld's `MakePi`).
    pub fn class_proportions(&self) -> Vec<f64> {
        let w: Vec<f64> = (0..self.n_classes)
            .map(|k| 1.0 + k as f64 * self.class_size_slope)
            .collect();
        let total: f64 = w.iter().sum();
        w.iter().map(|&x| x / total).collect()
    }

    /// GraphWorld's `p_to_q_ratio` r that gives the same expected fraction of intra-class
    /// edges as `homophily` h, for these class proportions π:
    /// r = h·(1 − S) / ((1 − h)·S) with S = Σ π_k² (for C equal classes, r = h·(C−1)/(1−h)).
    /// Infinite for h = 1; NaN for a single class.
    pub fn p_to_q_ratio(&self) -> f64 {
        let s: f64 = self.class_proportions().iter().map(|p| p * p).sum();
        let h = self.homophily;
        h * (1.0 - s) / ((1.0 - h) * s)
    }

    /// The `homophily` that matches GraphWorld's `p_to_q_ratio` `r` for these class
    /// proportions: h = r·S / (r·S + 1 − S), S = Σ π_k² (the inverse of
    /// [`CitationLike::p_to_q_ratio`]).
    pub fn homophily_for_p_to_q_ratio(&self, r: f64) -> f64 {
        let s: f64 = self.class_proportions().iter().map(|p| p * p).sum();
        r * s / (r * s + 1.0 - s)
    }

    /// Generates the dataset with `seed`. The same parameters and seed give the same dataset
    /// on every machine and for any number of rayon threads (see the [module docs](self)).
    ///
    /// # Errors
    /// From [`CitationLike::check`]; [`Error::Mismatch`] if the edge target cannot be reached
    /// (a target close to the complete graph, or a class structure that allows too few
    /// distinct pairs).
    ///
    /// # Complexity
    /// O(n + E + n·in_dim) time (O(1) per candidate edge), memory proportional to the output.
    ///
    /// # Examples
    /// ```
    /// use sparse_gcn::data::synthetic::CitationLike;
    /// let d = CitationLike { n_nodes: 500, ..Default::default() }.generate(1).unwrap();
    /// assert_eq!(d.graph.n_nodes(), 500);
    /// assert_eq!(d.graph.n_edges(), 1000); // avg_degree 4
    /// assert_eq!(d.split.train.len(), 7 * 20);
    /// ```
    pub fn generate(&self, seed: u64) -> Result<Dataset> {
        self.check()?;
        self.check_memory(true)?;
        let s = self.generate_skeleton(seed)?;
        let features = self.features(&s.labels, seed)?;
        Ok(s.with_features(features))
    }

    /// Everything [`CitationLike::generate`] gives but the features, bit for bit; any rows of
    /// those come from [`CitationLike::features_of`] (what a rank of a distributed run draws).
    ///
    /// # Errors
    /// As [`CitationLike::generate`].
    pub fn generate_skeleton(&self, seed: u64) -> Result<Skeleton> {
        self.check()?;
        self.check_memory(false)?;
        let n = self.n_nodes;
        let c = self.n_classes;
        let nodes = Nodes::new(self, seed);
        let labels = nodes.labels();
        let graph = self.edges(&nodes, seed)?;
        drop(nodes);
        let split = self.draw_split(&labels, seed)?;
        Ok(Skeleton {
            name: format!("citation-like-n{n}-seed{seed}"),
            graph,
            labels,
            n_classes: c,
            split,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p_to_q_ratio_round_trips() {
        let p = CitationLike {
            homophily: 0.65,
            n_classes: 40,
            class_size_slope: 0.5,
            ..Default::default()
        };
        let r = p.p_to_q_ratio();
        assert!((p.homophily_for_p_to_q_ratio(r) - 0.65).abs() < 1e-12);
        let eq = CitationLike {
            homophily: 0.5,
            n_classes: 5,
            ..Default::default()
        };
        assert!((eq.p_to_q_ratio() - 4.0).abs() < 1e-12);
    }
}
