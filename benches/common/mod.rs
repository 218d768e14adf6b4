//! Shared bench fixtures: the size table, seeded graph factories, the Planetoid loader hook and
//! the one criterion configuration every bench uses (`../shared/STYLE.md` §3.8).
//!
//! Every factory is deterministic: the same constants give the same graph on every machine
//! (`CitationLike` draws from ChaCha8 streams).
#![allow(dead_code)] // each bench target uses a different subset

use std::path::PathBuf;
use std::time::Duration;

use criterion::Criterion;
use ndarray::Array2;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparse_gcn::graph::io::{load_ogb, OgbOptions};
use sparse_gcn::graph::synthetic::CitationLike;
use sparse_gcn::graph::Dataset;

// ---- size table -------------------------------------------------------------------------

/// Seed of every synthetic graph and dense operand.
pub const SEED: u64 = 42;
/// Nodes of the synthetic SpMM graphs.
pub const N_NODES: usize = 100_000;
/// Target average degree of the synthetic SpMM graphs (before self-loops are added).
pub const AVG_DEGREE: f64 = 10.0;
/// Dense widths d of X in Â·X.
pub const SPMM_WIDTHS: [usize; 3] = [16, 64, 128];
/// `degree_exponent` that makes `CitationLike`'s expected degrees nearly uniform
/// (θ = (1−u)^(−1/9): mean 1.125, p99 1.67).
pub const UNIFORM_EXPONENT: f64 = 10.0;
/// `degree_exponent` of the power-law graph (heavy tail, hubs up to the generator's cap 4·√n).
pub const POWERLAW_EXPONENT: f64 = 2.2;

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
    if n >= 1_000_000 && n % 1_000_000 == 0 {
        format!("{}M", n / 1_000_000)
    } else if n >= 1_000 && n % 1_000 == 0 {
        format!("{}k", n / 1_000)
    } else {
        n.to_string()
    }
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

/// The default, Cora-sized `CitationLike` dataset with row-normalised features.
///
/// # Panics
/// If the generator rejects its defaults.
pub fn synthetic_cora() -> Dataset {
    let mut d = CitationLike::default()
        .generate(SEED)
        .expect("default settings are valid");
    d.features.row_normalize();
    d
}

/// A `CitationLike` dataset of `n` nodes (average degree 10, 500 words, 20 per node, 40
/// classes: an arxiv-like size) with row-normalised features.
///
/// # Panics
/// If the generator rejects the settings.
pub fn synthetic_citation(n: usize) -> Dataset {
    let mut d = CitationLike {
        n_nodes: n,
        n_classes: 40,
        avg_degree: AVG_DEGREE,
        n_features: 500,
        words_per_node: 20,
        ..CitationLike::default()
    }
    .generate(SEED)
    .expect("synthetic settings are valid");
    d.features.row_normalize();
    d
}

/// `$SPARSE_GCN_DATA`, the folder holding `cora/` and `citeseer/` in the OGB raw layout.
pub fn data_root() -> Option<PathBuf> {
    std::env::var_os("SPARSE_GCN_DATA").map(PathBuf::from)
}

/// Loads a Planetoid dataset (`"cora"`, `"citeseer"`) from `$SPARSE_GCN_DATA/<name>` with
/// sparse features, row-normalised as Kipf & Welling do. Returns `None`, with a note on
/// stderr, when the variable is unset or the folder cannot be read.
pub fn planetoid(name: &str) -> Option<Dataset> {
    let Some(root) = data_root() else {
        eprintln!("skipping {name}: SPARSE_GCN_DATA is not set");
        return None;
    };
    let opts = OgbOptions {
        sparse_features_below: Some(0.1),
        ..OgbOptions::default()
    };
    match load_ogb(root.join(name), &opts) {
        Ok(mut d) => {
            d.features.row_normalize();
            Some(d)
        }
        Err(e) => {
            eprintln!("skipping {name}: {e}");
            None
        }
    }
}

/// A seeded dense `rows × cols` matrix with entries uniform in [−1, 1).
pub fn dense(rows: usize, cols: usize, seed: u64) -> Array2<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Array2::from_shape_simple_fn((rows, cols), || rng.random_range(-1.0f32..1.0))
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
