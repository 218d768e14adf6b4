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
//! builds in memory in about a minute's fraction on 2 cores; see `tests/synthetic.rs`.
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

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use ndarray::Array2;
use rand::{Rng, RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::features::SparseFeatures;
use super::{Dataset, Features, Mask, Split};
use crate::graph::normalize::NewTrusted;
use crate::graph::{Direction, Graph};
use crate::kernels::Csr;
use crate::{ConfigError, Error, Result};

/// How node features are generated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FeatureKind {
    /// Sparse binary bag-of-words (Cora, CiteSeer): [`CitationLike::words_per_node`] words per
    /// node, each from the node's class vocabulary with probability
    /// [`CitationLike::feature_signal`], else uniform over the vocabulary. Stored as
    /// [`Features::Sparse`] with values 1.0.
    BagOfWords,
    /// Dense features (ogbn-arxiv's averaged word embeddings, ogbn-products' PCA'd
    /// bag-of-words): x_i = c_{class(i)} + ε_i, with ε_i ~ N(0, `cluster_variance`·I). Stored
    /// as [`Features::Dense`].
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
}

impl Preset {
    /// Every preset, smallest first.
    pub const ALL: [Preset; 3] = [Preset::CoraLike, Preset::ArxivLike, Preset::ProductsLike];

    /// The preset's name (`"cora-like"`, `"arxiv-like"`, `"products-like"`).
    pub fn name(self) -> &'static str {
        match self {
            Preset::CoraLike => "cora-like",
            Preset::ArxivLike => "arxiv-like",
            Preset::ProductsLike => "products-like",
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
        }
    }

    /// Generates the preset with `seed`; the dataset is named `"<preset>-seed<seed>"`.
    ///
    /// # Errors
    /// From [`CitationLike::generate`] (the presets are valid, so only on allocation-sized
    /// trouble it cannot report otherwise).
    pub fn generate(self, seed: u64) -> Result<Dataset> {
        let mut d = self.params().generate(seed)?;
        d.name = format!("{}-seed{seed}", self.name());
        Ok(d)
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
/// Candidates drawn before giving up on the target count, in multiples of the target.
const MAX_CANDIDATES_PER_EDGE: usize = 64;
/// Draws of another class before an inter-class edge falls back to the source's class.
const MAX_CLASS_TRIES: usize = 64;

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

/// `p` ∈ [0, 1] as a threshold on 53 random bits.
fn to53(p: f64) -> u64 {
    (p * (1u64 << 53) as f64) as u64
}

/// An invalid generator parameter.
fn invalid(name: &str, value: f64, rule: &str) -> Error {
    Error::Dataset {
        path: PathBuf::from("CitationLike"),
        msg: format!("invalid parameter {name} = {value} (must be {rule})"),
    }
}

/// One slot of a Vose alias table: keep the slot with probability `thresh / 2^32`, else take
/// `alias`. Slots that are always kept have `alias` = themselves.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    thresh: u32,
    alias: u32,
}

/// Fills `out` (same length as `w`) with Vose's alias table for the weights `w` (≥ 0, finite):
/// O(n) build, O(1) per sample ([`pick`]). All-zero weights give the uniform law.
fn build_alias(w: &[f64], out: &mut [Slot]) {
    let n = w.len();
    let total: f64 = w.iter().sum();
    let mut prob: Vec<f64> = if total > 0.0 && total.is_finite() {
        w.iter().map(|&x| x * n as f64 / total).collect()
    } else {
        vec![1.0; n]
    };
    let (mut small, mut large): (Vec<u32>, Vec<u32>) = (Vec::new(), Vec::new());
    for (i, &p) in prob.iter().enumerate() {
        if p < 1.0 {
            small.push(i as u32);
        } else {
            large.push(i as u32);
        }
    }
    while let (Some(&s), Some(&l)) = (small.last(), large.last()) {
        small.pop();
        let p = prob[s as usize];
        out[s as usize] = Slot {
            thresh: (p.clamp(0.0, 1.0) * 4_294_967_296.0).min(u32::MAX as f64) as u32,
            alias: l,
        };
        prob[l as usize] -= 1.0 - p;
        if prob[l as usize] < 1.0 {
            large.pop();
            small.push(l);
        }
    }
    // What is left has probability 1 up to rounding.
    for i in small.into_iter().chain(large) {
        out[i as usize] = Slot {
            thresh: u32::MAX,
            alias: i,
        };
    }
}

/// Draws an index from an alias table with one random word: the high 32 bits choose the slot
/// (multiply-shift), the low 32 bits decide between the slot and its alias.
#[inline]
fn pick(tab: &[Slot], x: u64) -> usize {
    let i = (((x >> 32) * tab.len() as u64) >> 32) as usize;
    let s = tab[i];
    if (x as u32) < s.thresh {
        i
    } else {
        s.alias as usize
    }
}

/// Exact class sizes for proportions ∝ 1 + k·slope (largest remainder, ties to the lower k).
fn class_sizes(n: usize, c: usize, slope: f64) -> Vec<usize> {
    let w: Vec<f64> = (0..c).map(|k| 1.0 + k as f64 * slope).collect();
    let total: f64 = w.iter().sum();
    let exact: Vec<f64> = w.iter().map(|&x| x / total * n as f64).collect();
    let mut sizes: Vec<usize> = exact.iter().map(|&x| x.floor() as usize).collect();
    let assigned: usize = sizes.iter().sum();
    let mut order: Vec<usize> = (0..c).collect();
    order.sort_by(|&a, &b| {
        let (fa, fb) = (exact[a] - exact[a].floor(), exact[b] - exact[b].floor());
        fb.total_cmp(&fa).then(a.cmp(&b))
    });
    for &k in order.iter().take(n.saturating_sub(assigned)) {
        sizes[k] += 1;
    }
    sizes
}

/// The node-level model: nodes are numbered internally class by class (class k owns the
/// internal ids `offsets[k]..offsets[k+1]`), and each class topic by topic (topic t owns
/// `topics[t]..topics[t+1]`); `ext` maps internal ids to the output ids.
struct Nodes {
    offsets: Vec<usize>,
    topics: Vec<usize>,
    /// The topic of each internal id.
    topic_of: Vec<u32>,
    ext: Vec<u32>,
    theta: Vec<f64>,
}

impl Nodes {
    fn new(p: &CitationLike, seed: u64) -> Self {
        let n = p.n_nodes;
        let sizes = class_sizes(n, p.n_classes, p.class_size_slope);
        let mut offsets = Vec::with_capacity(sizes.len() + 1);
        offsets.push(0usize);
        for s in &sizes {
            offsets.push(offsets[offsets.len() - 1] + s);
        }
        // Topics: ⌈s / topic_size⌉ per class, sizes differing by at most one.
        let mut topics = vec![0usize];
        let mut topic_of = vec![0u32; n];
        for k in 0..sizes.len() {
            let (a, s) = (offsets[k], sizes[k]);
            let t = s.div_ceil(p.topic_size.max(1));
            for j in 0..t {
                let (lo, hi) = (a + j * s / t, a + (j + 1) * s / t);
                topic_of[lo..hi].fill((topics.len() - 1) as u32);
                topics.push(hi);
            }
        }
        let mut rng = rng_for(seed, STREAM_NODES);
        let mut ext: Vec<u32> = (0..n as u32).collect();
        for i in (1..n).rev() {
            ext.swap(i, rng.random_range(0..=i));
        }
        let gamma = p.degree_exponent;
        let cap = (n as f64).sqrt() * 4.0;
        let theta = (0..n)
            .map(|_| {
                let u: f64 = rng.random();
                (1.0 - u).powf(-1.0 / (gamma - 1.0)).min(cap)
            })
            .collect();
        Nodes {
            offsets,
            topics,
            topic_of,
            ext,
            theta,
        }
    }

    fn n_topics(&self) -> usize {
        self.topics.len() - 1
    }

    /// The class holding topic `t` (topics nest in classes).
    fn class_of_topic(&self, t: usize) -> usize {
        self.offsets.partition_point(|&o| o <= self.topics[t]) - 1
    }

    /// Labels in output order.
    fn labels(&self) -> Vec<u32> {
        let mut labels = vec![0u32; self.ext.len()];
        for k in 0..self.offsets.len() - 1 {
            for i in self.offsets[k]..self.offsets[k + 1] {
                labels[self.ext[i] as usize] = k as u32;
            }
        }
        labels
    }
}

/// O(1)-per-edge sampler of the DC-SBM with topics.
struct EdgeSampler<'a> {
    nodes: &'a Nodes,
    /// Classes ∝ Θ_k.
    classes: Vec<Slot>,
    /// Per class, nodes ∝ θ (segment k covers `offsets[k]..offsets[k+1]`, local indices).
    members: Vec<Slot>,
    /// Per topic, nodes ∝ θ (segment t covers `topics[t]..topics[t+1]`, local indices).
    topic_members: Vec<Slot>,
    /// Per topic, the partner topic in another class (itself if there is no other class).
    partner: Vec<u32>,
    /// `topic_locality` · 2^53 (0: no draw is made, the plain DC-SBM stream).
    rho53: u64,
    /// Whether two classes have nodes (else every edge stays inside its class).
    inter: bool,
    /// Bits of a node id in a packed key.
    bits: u32,
}

impl<'a> EdgeSampler<'a> {
    fn new(nodes: &'a Nodes, p: &CitationLike, seed: u64, bits: u32) -> Self {
        let c = nodes.offsets.len() - 1;
        let mut mass = vec![0.0f64; c];
        let mut members = vec![Slot::default(); nodes.theta.len()];
        for k in 0..c {
            let r = nodes.offsets[k]..nodes.offsets[k + 1];
            mass[k] = nodes.theta[r.clone()].iter().sum();
            build_alias(&nodes.theta[r.clone()], &mut members[r]);
        }
        let mut topic_members = vec![Slot::default(); nodes.theta.len()];
        for t in 0..nodes.n_topics() {
            let r = nodes.topics[t]..nodes.topics[t + 1];
            build_alias(&vec![1.0; r.len()], &mut topic_members[r]);
        }
        let mut classes = vec![Slot::default(); c];
        build_alias(&mass, &mut classes);
        let mut s = EdgeSampler {
            nodes,
            classes,
            members,
            topic_members,
            partner: Vec::new(),
            rho53: to53(p.topic_locality),
            inter: mass.iter().filter(|&&m| m > 0.0).count() >= 2,
            bits,
        };
        // Each topic's partner: the topic of a node drawn ∝ θ from another class drawn ∝ Θ.
        let mut rng = rng_for(seed, STREAM_TOPICS);
        s.partner = (0..nodes.n_topics())
            .map(|t| {
                let a = nodes.class_of_topic(t);
                let b = s.other_class(a, &mut rng);
                nodes.topic_of[s.member(b, rng.next_u64())]
            })
            .collect();
        s
    }

    /// A class ≠ `a` drawn ∝ Θ (`a` itself after [`MAX_CLASS_TRIES`] misses, or with one
    /// class).
    #[inline]
    fn other_class(&self, a: usize, rng: &mut ChaCha8Rng) -> usize {
        if self.inter {
            for _ in 0..MAX_CLASS_TRIES {
                let t = pick(&self.classes, rng.next_u64());
                if t != a {
                    return t;
                }
            }
        }
        a
    }

    /// A node of class `k` ∝ θ (internal id).
    #[inline]
    fn member(&self, k: usize, x: u64) -> usize {
        let (a, b) = (self.nodes.offsets[k], self.nodes.offsets[k + 1]);
        a + pick(&self.members[a..b], x)
    }

    /// A node of topic `t` ∝ θ (internal id).
    #[inline]
    fn topic_member(&self, t: usize, x: u64) -> usize {
        let (a, b) = (self.nodes.topics[t], self.nodes.topics[t + 1]);
        a + pick(&self.topic_members[a..b], x)
    }

    /// Draws `out.len()` candidates, inter-class ones if `cross`, else intra-class ones,
    /// writes the packed keys (min << bits | max) of those that are not self-loops to the
    /// front of `out`, and returns their number.
    fn fill(&self, rng: &mut ChaCha8Rng, cross: bool, out: &mut [u64]) -> usize {
        let mut k = 0;
        for _ in 0..out.len() {
            let a = pick(&self.classes, rng.next_u64());
            let u = self.member(a, rng.next_u64());
            let local = self.rho53 > 0 && (rng.next_u64() >> 11) < self.rho53;
            let v = match (cross, local) {
                (false, false) => self.member(a, rng.next_u64()),
                (false, true) => self.topic_member(self.nodes.topic_of[u] as usize, rng.next_u64()),
                (true, false) => {
                    let b = self.other_class(a, rng);
                    if b == a {
                        continue; // no other class found: not an inter-class candidate
                    }
                    self.member(b, rng.next_u64())
                }
                (true, true) => {
                    let t = self.partner[self.nodes.topic_of[u] as usize] as usize;
                    self.topic_member(t, rng.next_u64())
                }
            };
            if u == v {
                continue;
            }
            let (eu, ev) = (self.nodes.ext[u], self.nodes.ext[v]);
            let (lo, hi) = if eu < ev { (eu, ev) } else { (ev, eu) };
            out[k] = (u64::from(lo) << self.bits) | u64::from(hi);
            k += 1;
        }
        k
    }

    /// `attempts` candidates (inter-class ones if `cross`) of round `round`, in parallel
    /// fixed-size blocks: sorted, unique packed keys.
    fn round(&self, seed: u64, cross: bool, round: u64, attempts: usize) -> Vec<u64> {
        let mut buf = vec![0u64; attempts];
        let counts: Vec<usize> = buf
            .par_chunks_mut(EDGE_BLOCK)
            .enumerate()
            .map(|(b, chunk)| {
                let part = u64::from(cross) << STREAM_PART_SHIFT;
                let mut rng = rng_for(seed, STREAM_EDGES | part | (round << 40) | b as u64);
                self.fill(&mut rng, cross, chunk)
            })
            .collect();
        let mut w = 0;
        for (b, &c) in counts.iter().enumerate() {
            let start = b * EDGE_BLOCK;
            buf.copy_within(start..start + c, w);
            w += c;
        }
        buf.truncate(w);
        radix_sort(&mut buf, 2 * self.bits);
        buf.dedup();
        buf
    }
}

/// Sorts keys that fit in `bits` bits: LSD radix sort with 11-bit digits (one scratch copy).
fn radix_sort(keys: &mut Vec<u64>, bits: u32) {
    const DIGIT: u32 = 11;
    const BUCKETS: usize = 1 << DIGIT;
    if keys.len() < 2 {
        return;
    }
    let passes = bits.div_ceil(DIGIT).max(1);
    let mut hist = vec![[0usize; BUCKETS]; passes as usize];
    for &k in keys.iter() {
        for (p, h) in hist.iter_mut().enumerate() {
            h[((k >> (p as u32 * DIGIT)) as usize) & (BUCKETS - 1)] += 1;
        }
    }
    let mut src = std::mem::take(keys);
    let mut dst = vec![0u64; src.len()];
    for (p, h) in hist.iter().enumerate() {
        if h.contains(&src.len()) {
            continue; // every key has the same digit here
        }
        let mut pos = [0usize; BUCKETS];
        let mut sum = 0;
        for (b, &c) in h.iter().enumerate() {
            pos[b] = sum;
            sum += c;
        }
        let shift = p as u32 * DIGIT;
        for &k in &src {
            let d = ((k >> shift) as usize) & (BUCKETS - 1);
            dst[pos[d]] = k;
            pos[d] += 1;
        }
        std::mem::swap(&mut src, &mut dst);
    }
    *keys = src;
}

/// Merges the sorted unique `fresh` into the sorted unique `keys` (in place, from the back)
/// and removes the duplicates between them.
fn merge_unique(keys: &mut Vec<u64>, fresh: Vec<u64>) {
    if keys.is_empty() {
        *keys = fresh;
        return;
    }
    let (mut i, mut j) = (keys.len(), fresh.len());
    keys.resize(i + j, 0);
    let mut w = i + j;
    while j > 0 {
        if i > 0 && keys[i - 1] > fresh[j - 1] {
            keys[w - 1] = keys[i - 1];
            i -= 1;
        } else {
            keys[w - 1] = fresh[j - 1];
            j -= 1;
        }
        w -= 1;
    }
    keys.dedup();
}

/// Removes `keys.len() - target` keys chosen uniformly at random (Floyd's subset sampling).
fn trim_to(keys: &mut Vec<u64>, target: usize, seed: u64, stream: u64) {
    let d = keys.len();
    if d <= target {
        return;
    }
    let mut rng = rng_for(seed, stream);
    let mut drop = vec![0u64; d.div_ceil(64)];
    let mut mark = |i: usize| -> bool {
        let (w, b) = (i / 64, 1u64 << (i % 64));
        let was = drop[w] & b != 0;
        drop[w] |= b;
        was
    };
    for j in target..d {
        let t = rng.random_range(0..=j);
        if mark(t) {
            mark(j);
        }
    }
    let mut i = 0;
    keys.retain(|_| {
        let keep = drop[i / 64] & (1u64 << (i % 64)) == 0;
        i += 1;
        keep
    });
}

/// Standard normal pairs by the Marsaglia polar form of Box–Muller (no trigonometry); the two
/// uniforms come from the halves of one 64-bit word.
#[inline]
fn gaussian_pair(rng: &mut ChaCha8Rng) -> (f64, f64) {
    const SCALE: f64 = 1.0 / (1u64 << 31) as f64;
    loop {
        let x = rng.next_u64();
        let a = (x >> 32) as f64 * SCALE - 1.0;
        let b = (x as u32) as f64 * SCALE - 1.0;
        let s = a * a + b * b;
        if s < 1.0 && s > 0.0 {
            let m = (-2.0 * s.ln() / s).sqrt();
            return (a * m, b * m);
        }
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

    /// n(n−1)/2, the most unique undirected edges without self-loops.
    fn max_edges(&self) -> usize {
        let n = self.n_nodes as u128;
        (n * n.saturating_sub(1) / 2).min(usize::MAX as u128) as usize
    }

    /// The number of unique undirected edges the generator produces: `n_edges`, or
    /// round(`n_nodes`·`avg_degree`/2) capped at n(n−1)/2.
    pub fn target_edges(&self) -> usize {
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
        let n = self.n_nodes;
        let c = self.n_classes;
        let nodes = Nodes::new(self, seed);
        let labels = nodes.labels();
        let graph = self.edges(&nodes, seed)?;
        drop(nodes);
        let features = match self.features {
            FeatureKind::BagOfWords => self.bag_of_words(&labels, seed),
            FeatureKind::Dense {
                center_distance,
                cluster_variance,
            } => self.dense(&labels, center_distance, cluster_variance, seed)?,
        };
        let split = self.draw_split(&labels, seed)?;
        Ok(Dataset {
            name: format!("citation-like-n{n}-seed{seed}"),
            graph,
            features,
            labels,
            n_classes: c,
            split,
        })
    }

    /// Draws candidate edges in rounds until exactly [`CitationLike::target_edges`] unique
    /// ones exist (round(`homophily`·E) of them inside a class), and builds the graph.
    fn edges(&self, nodes: &Nodes, seed: u64) -> Result<Graph> {
        let n = self.n_nodes;
        let target = self.target_edges();
        let bits = (usize::BITS - n.saturating_sub(1).leading_zeros()).max(1);
        let sampler = EdgeSampler::new(nodes, self, seed, bits);
        let intra = if sampler.inter {
            (self.homophily * target as f64).round() as usize
        } else {
            target
        };
        // A part that cannot be filled (too few pairs inside, or between, the classes) is
        // made up by the other.
        let mut keys = self.unique_keys(&sampler, seed, false, intra);
        let inter = self.unique_keys(&sampler, seed, true, target - keys.len());
        if keys.len() + inter.len() < target && keys.len() == intra {
            keys = self.unique_keys(&sampler, seed, false, target - inter.len());
        }
        if keys.len() + inter.len() < target {
            return Err(self.unreachable(keys.len() + inter.len()));
        }
        // Intra- and inter-class pairs are disjoint: the merge loses nothing.
        merge_unique(&mut keys, inter);
        let mask = (1u64 << bits) - 1;
        let edges: Vec<(u32, u32)> = keys
            .iter()
            .map(|&k| ((k >> bits) as u32, (k & mask) as u32))
            .collect();
        drop(keys);
        // Sorted by (min, max), so every row of the CSR is filled in order.
        let graph = Graph::try_from_edges(n, &edges, Direction::Undirected)?;
        if graph.n_edges() != target {
            return Err(Error::Mismatch {
                what: "CitationLike: unique undirected edges built".into(),
                expected: target,
                got: graph.n_edges(),
            });
        }
        Ok(graph)
    }

    /// `target` unique packed keys of intra-class (`cross` false) or inter-class edges, drawn
    /// in rounds; fewer if the candidate budget runs out first.
    fn unique_keys(
        &self,
        sampler: &EdgeSampler<'_>,
        seed: u64,
        cross: bool,
        target: usize,
    ) -> Vec<u64> {
        let mut keys: Vec<u64> = Vec::new();
        // Give up after this many candidates (only a target close to the most the model can
        // reach gets near it).
        let budget = MAX_CANDIDATES_PER_EDGE * target.max(EDGE_BLOCK);
        let (mut spent, mut attempts, mut round) = (0usize, target, 0u64);
        let mut novelty = 1.0f64;
        while keys.len() < target {
            if spent >= budget {
                break;
            }
            let fresh = sampler.round(seed, cross, round, attempts);
            spent += attempts;
            let before = keys.len();
            merge_unique(&mut keys, fresh);
            let gained = keys.len() - before;
            if keys.len() >= target {
                break;
            }
            // New unique edges per candidate. The first round averages over a growing set, so
            // the marginal rate at its end is lower: about 2ν − 1 when duplicates are rare.
            novelty = if gained == 0 {
                novelty / 4.0
            } else if round == 0 {
                let avg = gained as f64 / attempts as f64;
                (2.0 * avg - 1.0).max(avg / 4.0)
            } else {
                gained as f64 / attempts as f64
            };
            let deficit = target - keys.len();
            attempts = ((deficit as f64 / novelty).ceil() as usize)
                .saturating_add(16)
                .min(target.max(EDGE_BLOCK))
                .min(budget - spent)
                .max(1);
            round += 1;
        }
        trim_to(&mut keys, target, seed, STREAM_TRIM | u64::from(cross) << 8);
        keys
    }

    fn unreachable(&self, got: usize) -> Error {
        Error::Mismatch {
            what: format!(
                "CitationLike: unique edges reached with {MAX_CANDIDATES_PER_EDGE}× the target in candidates \
                 (the target is too close to the most that {} nodes in {} classes with homophily {} allow)",
                self.n_nodes, self.n_classes, self.homophily
            ),
            expected: self.target_edges(),
            got,
        }
    }

    /// Sparse binary bag-of-words: each class owns a random slice of the vocabulary.
    fn bag_of_words(&self, labels: &[u32], seed: u64) -> Features<f32> {
        let n = labels.len();
        let f = self.n_features;
        let mut rng = rng_for(seed, STREAM_FEATURE_SETUP);
        let mut vocab: Vec<u32> = (0..f as u32).collect();
        for i in (1..f).rev() {
            vocab.swap(i, rng.random_range(0..=i));
        }
        let topic = (f / self.n_classes).max(1);
        let words = self.words_per_node;
        let signal = self.feature_signal;
        let blocks: Vec<(Vec<usize>, Vec<u32>)> = labels
            .par_chunks(ROW_BLOCK)
            .enumerate()
            .map(|(b, rows)| {
                let mut rng = rng_for(seed, STREAM_ROWS | b as u64);
                let mut lens = Vec::with_capacity(rows.len());
                let mut indices = Vec::with_capacity(rows.len() * words);
                let mut row = Vec::with_capacity(words);
                for &l in rows {
                    row.clear();
                    let base = (l as usize * topic) % f;
                    for _ in 0..words {
                        let w = if rng.random::<f64>() < signal {
                            vocab[(base + rng.random_range(0..topic)) % f]
                        } else {
                            rng.random_range(0..f as u32)
                        };
                        row.push(w);
                    }
                    row.sort_unstable();
                    row.dedup();
                    indices.extend_from_slice(&row);
                    lens.push(row.len());
                }
                (lens, indices)
            })
            .collect();
        let nnz = blocks.iter().map(|(_, ix)| ix.len()).sum();
        let mut indptr = Vec::with_capacity(n + 1);
        indptr.push(0usize);
        let mut indices: Vec<u32> = Vec::with_capacity(nnz);
        for (lens, ix) in blocks {
            for l in lens {
                indptr.push(indptr[indptr.len() - 1] + l);
            }
            indices.extend_from_slice(&ix);
        }
        let data = vec![1.0f32; indices.len()];
        let x = Csr::new_trusted_pub((n, f), indptr, indices, data);
        Features::Sparse(SparseFeatures::new(x))
    }

    /// Dense features: class centroid (a random direction of length `dist`) plus Gaussian
    /// noise of variance `var`.
    fn dense(&self, labels: &[u32], dist: f64, var: f64, seed: u64) -> Result<Features<f32>> {
        let n = labels.len();
        let f = self.n_features;
        let mut rng = rng_for(seed, STREAM_FEATURE_SETUP);
        let mut centroids = vec![0.0f64; self.n_classes * f];
        for c in centroids.chunks_mut(f) {
            let mut norm2 = 0.0;
            for k in 0..f {
                let (z, _) = gaussian_pair(&mut rng);
                c[k] = z;
                norm2 += z * z;
            }
            let scale = if norm2 > 0.0 {
                dist / norm2.sqrt()
            } else {
                0.0
            };
            c.iter_mut().for_each(|v| *v *= scale);
        }
        let sd = var.sqrt();
        let mut data = vec![0.0f32; n * f];
        data.par_chunks_mut(ROW_BLOCK * f)
            .enumerate()
            .for_each(|(b, block)| {
                let mut rng = rng_for(seed, STREAM_ROWS | b as u64);
                let first = b * ROW_BLOCK;
                for (r, row) in block.chunks_mut(f).enumerate() {
                    let l = labels[first + r] as usize;
                    let centre = &centroids[l * f..(l + 1) * f];
                    let mut k = 0;
                    while k < f {
                        let (z0, z1) = gaussian_pair(&mut rng);
                        row[k] = (centre[k] + sd * z0) as f32;
                        if k + 1 < f {
                            row[k + 1] = (centre[k + 1] + sd * z1) as f32;
                        }
                        k += 2;
                    }
                }
            });
        let x = Array2::from_shape_vec((n, f), data).map_err(|e| Error::Mismatch {
            what: format!("CitationLike: dense feature matrix ({e})"),
            expected: n * f,
            got: n * f,
        })?;
        Ok(Features::Dense(x))
    }

    /// The split over a seeded random node order (see [`SplitKind`]).
    fn draw_split(&self, labels: &[u32], seed: u64) -> Result<Split> {
        let n = labels.len();
        let mut rng = rng_for(seed, STREAM_SPLIT);
        let mut order: Vec<u32> = (0..n as u32).collect();
        for i in (1..n).rev() {
            order.swap(i, rng.random_range(0..=i));
        }
        let (name, train, valid, test) = match self.split {
            SplitKind::Planetoid => {
                let mut per = vec![0usize; self.n_classes];
                let (mut train, mut rest) = (Vec::new(), Vec::new());
                for &i in &order {
                    let l = labels[i as usize] as usize;
                    if per[l] < self.train_per_class {
                        per[l] += 1;
                        train.push(i);
                    } else {
                        rest.push(i);
                    }
                }
                let n_valid = self.n_valid.min(rest.len() / 2);
                let n_test = self.n_test.min(rest.len() - n_valid);
                let valid = rest[..n_valid].to_vec();
                let test = rest[n_valid..n_valid + n_test].to_vec();
                ("planetoid", train, valid, test)
            }
            SplitKind::Random { train, valid } => {
                let n_train = ((n as f64 * train).round() as usize).min(n);
                let n_valid = ((n as f64 * valid).round() as usize).min(n - n_train);
                let test = order.split_off(n_train + n_valid);
                let valid = order.split_off(n_train);
                ("random", order, valid, test)
            }
        };
        Ok(Split {
            name: name.into(),
            train: Mask::try_from_indices(train, n)?,
            valid: Mask::try_from_indices(valid, n)?,
            test: Mask::try_from_indices(test, n)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alias_matches_weights() {
        let w = [1.0, 0.0, 3.0, 4.0];
        let mut tab = vec![Slot::default(); 4];
        build_alias(&w, &mut tab);
        let mut rng = rng_for(7, 0);
        let mut counts = [0usize; 4];
        let m = 400_000;
        for _ in 0..m {
            counts[pick(&tab, rng.next_u64())] += 1;
        }
        for (i, &c) in counts.iter().enumerate() {
            let p = w[i] / 8.0;
            assert!((c as f64 / m as f64 - p).abs() < 0.005, "{i}: {c}");
        }
    }

    #[test]
    fn radix_sort_sorts() {
        let mut rng = rng_for(3, 0);
        let mut v: Vec<u64> = (0..50_000).map(|_| rng.next_u64() >> 20).collect();
        let mut w = v.clone();
        radix_sort(&mut v, 44);
        w.sort_unstable();
        assert_eq!(v, w);
    }

    #[test]
    fn merge_and_trim() {
        let mut a = vec![1, 3, 5, 7];
        merge_unique(&mut a, vec![0, 3, 4, 9]);
        assert_eq!(a, vec![0, 1, 3, 4, 5, 7, 9]);
        trim_to(&mut a, 4, 1, STREAM_TRIM);
        assert_eq!(a.len(), 4);
        assert!(a.windows(2).all(|p| p[0] < p[1]));
    }

    #[test]
    fn class_sizes_are_exact() {
        let s = class_sizes(1000, 7, 0.5);
        assert_eq!(s.iter().sum::<usize>(), 1000);
        assert!(s.windows(2).all(|p| p[0] <= p[1]));
        assert_eq!(class_sizes(10, 3, 0.0), vec![4, 3, 3]);
    }

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
