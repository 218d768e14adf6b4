//! Shared bench fixtures: the size table, seeded graph factories, the node orders of the SpMM
//! benches, the dataset loaders behind environment variables, the multiply-add counts used as
//! criterion throughput, and the one criterion configuration every bench uses
//! (`../shared/STYLE.md` §3.8).
//!
//! Every factory is deterministic: the same constants give the same graph on every machine
//! (`CitationLike` draws from ChaCha8 streams, `Permutation::random` from a seeded ChaCha8).
//!
//! # Environment variables
//! | variable | effect |
//! |---|---|
//! | `SPARSE_GCN_DATA=/dir` | `epoch` adds Cora and CiteSeer from `/dir/cora` and `/dir/citeseer` |
//! | `SPARSE_GCN_BENCH_PRODUCTS=1` | `epoch` adds the `products-like` preset (2.4M nodes; minutes per epoch) |
//! | `SPARSE_GCN_OGB=/path` | `epoch` adds a real dataset from `/path` (any format `data::io::load` reads) |
#![allow(dead_code)] // each bench target uses a different subset

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, SamplingMode};
use ndarray::Array2;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparse_gcn::data::io::{load, LoadOptions};
use sparse_gcn::data::synthetic::{CitationLike, Preset};
use sparse_gcn::data::{Dataset, Features, FeaturesRef};
use sparse_gcn::graph::{Graph, NormAdj};
use sparse_gcn::nn::{ModelConfig, Order};
use sparse_gcn::order::{self, Permutation, Reorder};

// ---- size table -------------------------------------------------------------------------

/// Seed of every synthetic graph and dense operand.
pub const SEED: u64 = 42;
/// Seed of the explicit random node permutation of the SpMM graphs.
pub const PERM_SEED: u64 = 7;
/// Nodes of the synthetic SpMM graphs.
pub const N_NODES: usize = 100_000;
/// Target average degree of the synthetic SpMM graphs (before self-loops are added).
pub const AVG_DEGREE: f64 = 10.0;
/// Dense widths d of X in Â·X.
pub const SPMM_WIDTHS: [usize; 4] = [16, 64, 128, 256];
/// `degree_exponent` that makes `CitationLike`'s expected degrees nearly uniform
/// (θ = (1−u)^(−1/9): mean 1.125, p99 1.67).
pub const UNIFORM_EXPONENT: f64 = 10.0;
/// `degree_exponent` of the power-law graph (heavy tail, hubs up to the generator's cap 4·√n).
pub const POWERLAW_EXPONENT: f64 = 2.2;
/// Hidden width of the OGB GCN baseline (3 layers, hidden 256).
pub const WIDE_HIDDEN: usize = 256;
/// Graphs with more stored entries in Â than this run only the `Auto` order under rayon in
/// `epoch` (a products-size epoch takes minutes).
pub const LARGE_NNZ: usize = 10_000_000;

/// Environment variable naming the folder that holds `cora/` and `citeseer/`.
pub const ENV_DATA: &str = "SPARSE_GCN_DATA";
/// Environment variable that enables the `products-like` cases (`1`, `true` or `yes`).
pub const ENV_PRODUCTS: &str = "SPARSE_GCN_BENCH_PRODUCTS";
/// Environment variable naming a real OGB dataset folder (or any file `data::io::load` reads).
pub const ENV_OGB: &str = "SPARSE_GCN_OGB";

/// The degree distribution of a synthetic graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Degrees {
    /// Nearly uniform expected degrees.
    Uniform,
    /// Power-law expected degrees.
    PowerLaw,
}

impl Degrees {
    /// Both kinds, in bench order.
    pub const ALL: [Degrees; 2] = [Degrees::Uniform, Degrees::PowerLaw];

    /// The name used in benchmark ids.
    pub fn name(self) -> &'static str {
        match self {
            Degrees::Uniform => "uniform",
            Degrees::PowerLaw => "powerlaw",
        }
    }

    fn exponent(self) -> f64 {
        match self {
            Degrees::Uniform => UNIFORM_EXPONENT,
            Degrees::PowerLaw => POWERLAW_EXPONENT,
        }
    }
}

/// `100000` → `"100k"`, `2708` → `"2708"`, `1000000` → `"1M"` (for benchmark ids).
pub fn short(n: usize) -> String {
    if n >= 1_000_000 && n.is_multiple_of(1_000_000) {
        format!("{}M", n / 1_000_000)
    } else if n >= 1_000 && n.is_multiple_of(1_000) {
        format!("{}k", n / 1_000)
    } else {
        n.to_string()
    }
}

/// The short name of an order in benchmark ids: `agg`, `tf`, `lean`, `auto`.
pub fn order_name(o: Order) -> &'static str {
    match o {
        Order::AggregateFirst => "agg",
        Order::TransformFirst => "tf",
        Order::Lean => "lean",
        Order::Auto => "auto",
    }
}

/// Runs `f`, printing how long it took on stderr.
pub fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let out = f();
    eprintln!("{what}: {:.2} s", t.elapsed().as_secs_f64());
    out
}

// ---- graph factories --------------------------------------------------------------------

/// The generator settings of a synthetic SpMM graph: `n` nodes, average degree `avg_degree`,
/// the degree distribution `kind`; small features (the SpMM benches use only the graph).
pub fn graph_spec(kind: Degrees, n: usize, avg_degree: f64) -> CitationLike {
    CitationLike {
        n_nodes: n,
        n_classes: 10,
        avg_degree,
        degree_exponent: kind.exponent(),
        n_features: 128,
        words_per_node: 4,
        ..CitationLike::default()
    }
}

/// A synthetic graph of [`N_NODES`] nodes and average degree [`AVG_DEGREE`], seeded with
/// [`SEED`].
///
/// # Panics
/// If the generator rejects the settings (it cannot for these constants).
pub fn synthetic_graph(kind: Degrees) -> Dataset {
    graph_spec(kind, N_NODES, AVG_DEGREE)
        .generate(SEED)
        .expect("synthetic graph settings are valid")
}

/// The "random" node order of the SpMM benches: `graph` relabelled by an explicit uniformly
/// random permutation (seed [`PERM_SEED`]). The generator already spreads classes over the ids,
/// but this makes the order independent of how any generator numbers its nodes.
pub fn random_order(graph: &Graph) -> Graph {
    let perm = Permutation::random(graph.n_nodes(), PERM_SEED);
    order::permute_graph(graph, &perm)
}

/// The order the "reordered" SpMM cases use.
pub const REORDER: Reorder = Reorder::Community;

/// **The reordered case's plug-in point**: `graph` relabelled by [`REORDER`]
/// (`graph::order::order`: label-propagation communities laid out contiguously). Returns the
/// order's name for the benchmark id and the relabelled graph. Change [`REORDER`] to bench
/// another order (`Degree`, `Bfs`, `Rcm`).
pub fn reordered(graph: &Graph) -> (String, Graph) {
    let perm = timed(&format!("computing the {REORDER} order"), || {
        order::order(graph, REORDER).expect("the bench's order")
    });
    (REORDER.to_string(), order::permute_graph(graph, &perm))
}

/// Prints how local `graph`'s node order is (mean |i − j| / n, and the fraction of non-zeros
/// within ±1024 ids).
pub fn print_locality(what: &str, graph: &Graph) {
    let l = order::locality(graph, 1024);
    eprintln!(
        "{what}: mean |i-j|/n = {:.4}, fraction within ±{} = {:.3}",
        l.mean_gap, l.window, l.near_fraction
    );
}

/// Kipf's preprocessing as the CLI's `--row-norm auto` does it: row-normalise the features
/// when all are non-negative (bag-of-words), leave signed dense features as they are.
pub fn preprocess(mut d: Dataset) -> Dataset {
    if d.features.is_non_negative() {
        d.features.row_normalize();
    }
    d
}

/// A synthetic preset generated with [`SEED`] and preprocessed ([`preprocess`]).
///
/// # Panics
/// If the generator fails (the presets are valid).
pub fn preset(p: Preset) -> Dataset {
    let d = timed(&format!("generating {p}"), || {
        p.generate(SEED).expect("preset settings are valid")
    });
    preprocess(d)
}

/// Whether an opt-in environment variable is set to `1`, `true` or `yes`.
pub fn env_flag(name: &str) -> bool {
    std::env::var(name)
        .map(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes"))
        .unwrap_or(false)
}

/// The `products-like` preset when [`ENV_PRODUCTS`] is set (generation takes 15–50 s and
/// about 1.5 GiB), `None` with a note on stderr otherwise.
pub fn products_like() -> Option<Dataset> {
    if env_flag(ENV_PRODUCTS) {
        Some(preset(Preset::ProductsLike))
    } else {
        eprintln!("skipping products-like: set {ENV_PRODUCTS}=1 to run it");
        None
    }
}

/// Loads any dataset `data::io::load` reads, storing features sparse below 10 % density, and
/// preprocesses it. `None`, with a note on stderr, when it cannot be read.
pub fn load_dataset(path: &Path) -> Option<Dataset> {
    let opts = LoadOptions {
        sparse_features_below: Some(0.1),
        ..LoadOptions::default()
    };
    match timed(&format!("loading {}", path.display()), || load(path, &opts)) {
        Ok(d) => Some(preprocess(d)),
        Err(e) => {
            eprintln!("skipping {}: {e}", path.display());
            None
        }
    }
}

/// `$SPARSE_GCN_DATA`, the folder holding `cora/` and `citeseer/` in the OGB raw layout.
pub fn data_root() -> Option<PathBuf> {
    std::env::var_os(ENV_DATA).map(PathBuf::from)
}

/// Loads a Planetoid dataset (`"cora"`, `"citeseer"`) from `$SPARSE_GCN_DATA/<name>` with
/// sparse, row-normalised features (Kipf & Welling's preprocessing). Returns `None`, with a
/// note on stderr, when the variable is unset or the folder cannot be read.
pub fn planetoid(name: &str) -> Option<Dataset> {
    let Some(root) = data_root() else {
        eprintln!("skipping {name}: {ENV_DATA} is not set");
        return None;
    };
    load_dataset(&root.join(name))
}

/// The real dataset named by `$SPARSE_GCN_OGB` (e.g. an `ogbn-arxiv` folder holding `raw/`),
/// with its name; `None` when the variable is unset or the path cannot be read.
pub fn ogb_from_env() -> Option<(String, Dataset)> {
    let Some(path) = std::env::var_os(ENV_OGB).map(PathBuf::from) else {
        eprintln!("skipping the real OGB dataset: {ENV_OGB} is not set");
        return None;
    };
    let d = load_dataset(&path)?;
    let name = path
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| d.name.clone());
    Some((name, d))
}

/// A seeded dense `rows × cols` matrix with entries uniform in [−1, 1).
pub fn dense(rows: usize, cols: usize, seed: u64) -> Array2<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Array2::from_shape_simple_fn((rows, cols), || rng.random_range(-1.0f32..1.0))
}

// ---- models -----------------------------------------------------------------------------

/// A named model shape of the `epoch` bench.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelShape {
    /// Kipf & Welling: 2 layers, hidden 16, dropout 0.5 on the input and the hidden layer.
    Kipf,
    /// The OGB GCN baseline's shape: 3 layers, hidden 256, dropout 0.5 (as the CLI's
    /// `train --layers 3 --hidden 256`).
    Wide,
}

impl ModelShape {
    /// The name used in benchmark ids.
    pub fn name(self) -> &'static str {
        match self {
            ModelShape::Kipf => "kipf-2x16",
            ModelShape::Wide => "gcn-3x256",
        }
    }

    /// The model configuration for `data` with `order` (Kipf's GCN of this shape: no bias, as
    /// the CLI's default).
    pub fn config(self, data: &Dataset, order: Order) -> ModelConfig {
        let (n_layers, hidden_dim) = match self {
            ModelShape::Kipf => (2, 16),
            ModelShape::Wide => (3, WIDE_HIDDEN),
        };
        ModelConfig {
            in_dim: data.features.n_cols(),
            out_dim: data.n_classes,
            hidden_dim,
            n_layers,
            order,
            ..ModelConfig::default()
        }
    }
}

/// The layer widths of a GCN configuration: `[in_dim, hidden_dim, …, out_dim]`.
pub fn dims(cfg: &ModelConfig) -> Vec<usize> {
    let mut d = vec![cfg.in_dim];
    d.extend(std::iter::repeat_n(cfg.hidden_dim, cfg.n_layers - 1));
    d.push(cfg.out_dim);
    d
}

// ---- multiply-add counts (criterion throughput) ------------------------------------------

/// The input of a GCN layer as far as its work is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputWork {
    /// Dense n × in_dim.
    Dense,
    /// Sparse features.
    Sparse {
        /// Stored entries of X.
        nnz_x: usize,
        /// Multiply-adds of the sparse × sparse product S = Â·X: Σ over Â's entries (i, j)
        /// of nnz(x_j).
        agg_macs: usize,
        /// Stored entries of S = Â·X.
        nnz_s: usize,
    },
}

impl InputWork {
    /// The work description of `input` on `adj`. For a sparse input this computes the pattern
    /// of Â·X once (as AggregateFirst does) to count its entries.
    pub fn of(adj: &NormAdj<f32>, input: &Features<f32>) -> Self {
        match input.get() {
            FeaturesRef::Dense(_) => InputWork::Dense,
            FeaturesRef::Sparse(s) => {
                let x = s.x();
                let ip = x.indptr();
                let per_row: Vec<usize> = (0..x.rows()).map(|j| ip.nnz_in_outer_sz(j)).collect();
                let agg_macs = adj.a().indices().iter().map(|&j| per_row[j as usize]).sum();
                let nnz_s = (&adj.a() * &x).nnz();
                InputWork::Sparse {
                    nnz_x: x.nnz(),
                    agg_macs,
                    nnz_s,
                }
            }
        }
    }
}

/// What one `GcnConv` does, for counting its multiply-adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerWork {
    /// Nodes.
    pub n: usize,
    /// Stored entries of Â (self-loops included).
    pub nnz_adj: usize,
    /// Input width.
    pub in_dim: usize,
    /// Output width.
    pub out_dim: usize,
    /// The input.
    pub input: InputWork,
    /// Whether backward computes dH (every layer but the first).
    pub need_dh: bool,
}

impl LayerWork {
    /// Multiply-adds of the forward pass in `order` (AggregateFirst or TransformFirst): the
    /// products with Â, with X or S = ÂX, and with W. Bias, ReLU and dropout are not counted.
    ///
    /// AggregateFirst: S = Â·H (nnz(Â)·in, or Σ nnz(x_j) for sparse X), then S·W (n·in·out, or
    /// nnz(S)·out). TransformFirst: T = H·W (n·in·out, or nnz(X)·out), then Â·T (nnz(Â)·out).
    pub fn forward_macs(&self, order: Order) -> u64 {
        let (n, m, a, c) = (self.n, self.nnz_adj, self.in_dim, self.out_dim);
        let macs = match (order, self.input) {
            (Order::AggregateFirst, InputWork::Dense) => m * a + n * a * c,
            (
                Order::AggregateFirst,
                InputWork::Sparse {
                    agg_macs, nnz_s, ..
                },
            ) => agg_macs + nnz_s * c,
            (_, InputWork::Dense) => n * a * c + m * c,
            (_, InputWork::Sparse { nnz_x, .. }) => nnz_x * c + m * c,
        };
        macs as u64
    }

    /// Multiply-adds of the backward pass in `order`.
    ///
    /// AggregateFirst: dW = Sᵀ·G (n·in·out, or nnz(S)·out); with dH: Y = G·Wᵀ (n·out·in) and
    /// dH = Âᵀ·Y (nnz(Â)·in). TransformFirst: P = Âᵀ·G (nnz(Â)·out), dW = Hᵀ·P (n·in·out, or
    /// nnz(X)·out); with dH: P·Wᵀ (n·out·in).
    pub fn backward_macs(&self, order: Order) -> u64 {
        let (n, m, a, c) = (self.n, self.nnz_adj, self.in_dim, self.out_dim);
        let dh = |agg: bool| -> usize {
            match (self.need_dh, agg) {
                (false, _) => 0,
                (true, true) => n * c * a + m * a,
                (true, false) => n * c * a,
            }
        };
        let macs = match (order, self.input) {
            (Order::AggregateFirst, InputWork::Dense) => n * a * c + dh(true),
            (Order::AggregateFirst, InputWork::Sparse { nnz_s, .. }) => nnz_s * c + dh(true),
            (_, InputWork::Dense) => m * c + n * a * c + dh(false),
            (_, InputWork::Sparse { nnz_x, .. }) => m * c + nnz_x * c + dh(false),
        };
        macs as u64
    }
}

/// Multiply-adds of one training epoch of a GCN with layer widths `dims` and resolved
/// `orders` on `adj` with input `x`: the sum over layers of [`LayerWork::forward_macs`] and
/// [`LayerWork::backward_macs`]. Input dropout keeps a sparse X's pattern, so its counts hold
/// in training; the loss, ReLU, dropout and the Adam update are not counted.
pub fn epoch_macs(adj: &NormAdj<f32>, x: &Features<f32>, dims: &[usize], orders: &[Order]) -> u64 {
    let first = InputWork::of(adj, x);
    orders
        .iter()
        .enumerate()
        .map(|(l, &order)| {
            let w = LayerWork {
                n: adj.n_nodes(),
                nnz_adj: adj.nnz(),
                in_dim: dims[l],
                out_dim: dims[l + 1],
                input: if l == 0 { first } else { InputWork::Dense },
                need_dh: l > 0,
            };
            w.forward_macs(order) + w.backward_macs(order)
        })
        .sum()
}

// ---- criterion configuration ------------------------------------------------------------

/// Warm-up time of every benchmark.
pub const WARM_UP: Duration = Duration::from_secs(1);
/// Measurement time of every benchmark.
pub const MEASUREMENT: Duration = Duration::from_secs(3);
/// Samples per benchmark (criterion's minimum).
pub const SAMPLES: usize = 10;

/// The criterion configuration of every bench: 1 s warm-up, 3 s measurement, 10 samples, so
/// `cargo bench` finishes in minutes on a 2-vCPU box. Command-line flags (`--quick`, a filter,
/// `--sample-size`, …) still override it.
pub fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(WARM_UP)
        .measurement_time(MEASUREMENT)
        .sample_size(SAMPLES)
        // The box is noisy (10–40 % spread): do not flag smaller changes.
        .noise_threshold(0.10)
}

/// Settings for a group whose calls take 10 ms to minutes: flat sampling (the same iteration
/// count in every sample, so a slow case runs warm-up + 10 calls rather than criterion's
/// linear ramp of 55) and the minimum of 10 samples.
pub fn slow(group: &mut BenchmarkGroup<'_, WallTime>) {
    group.sampling_mode(SamplingMode::Flat).sample_size(SAMPLES);
}
