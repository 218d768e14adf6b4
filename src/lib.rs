//! # sparse-gcn
//!
//! Graph Convolutional Networks (Kipf & Welling, ICLR 2017) on large sparse graphs, on CPUs.
//! Â = D̃^-1/2 (A + I) D̃^-1/2 is never dense: it is a CSR matrix with `u32` indices. Forward and
//! backward run a parallel, bit-reproducible SpMM ([`kernels::spmm()`]) and a GEMM
//! ([`kernels::gemm()`]: our packed AVX-512 kernel or matrixmultiply, under rayon) in either order, (ÂH)W or Â(HW), chosen per
//! layer by a cost model that counts forward and backward work.
//!
//! Every architecture (GCN, residual, GCNII, jumping knowledge, SGC, APPNP) runs on one stack,
//! [`Model`], built from a [`ModelConfig`]; every layer implements [`nn::Layer`], reaches Â
//! only through [`Propagate`] and sums across nodes only through [`graph::Sums`], so the same
//! layers run on Â held whole ([`NormAdj`]) or row-partitioned across the ranks of an MPI job.
//!
//! Modules, lowest first; each imports only modules below it (`docs/ARCHITECTURE.md` has the
//! picture, `tests/layering.rs` checks it):
//! - the leaves [`error`], [`scalar`] (with the exact accumulators of sums) and [`id`], and
//!   [`par`], which imports only `error`;
//! - [`kernels`]: SpMM, GEMM, element-wise kernels, deterministic row loops;
//! - [`input`]: what a model reads, features and masks;
//! - [`graph`]: Â, [`Propagate`], [`graph::Sums`] and [`graph::Collective`];
//! - above `graph`, side by side: [`nn`] → [`optim`]; [`data`] → [`order`] → [`sample`] (the
//!   mini-batch samplers) and [`diag`]; [`metrics`]; and [`dist::backend`], the
//!   row-partitioned Â;
//! - [`train`], above `optim`, `sample`, `metrics` and `diag`;
//! - [`dist::run`], above `train` and `dist::backend`: a rank's data, the communication model and
//!   the planner.
//!
//! The binary (`src/main.rs`, `src/cli/`) may import anything; `testing` (feature `testing`)
//! sits on `nn`. The derivations the gradient checks test are in `docs/MATH.md`.
//!
//! # Quick start
//! ```
//! use sparse_gcn::data::synthetic::CitationLike;
//! use sparse_gcn::{fit, Norm, NormAdj, TrainConfig, TrainData};
//! let mut data = CitationLike { n_nodes: 600, ..Default::default() }.generate(7).unwrap();
//! data.features.row_normalize();
//! let adj = NormAdj::<f32>::new(&data.graph, Norm::Symmetric);
//! let run = fit(&TrainData::of(&adj, &data), &TrainConfig::default(), 0).unwrap();
//! assert!(run.test_acc > 2.0 / data.n_classes as f64); // far above chance (1/7)
//! ```
//!
//! ## Features
//! - `cli` (default): the `sparse-gcn` binary (`src/main.rs`, `src/cli/`) and what only it
//!   uses: clap, indicatif and serde_json. Turns on `hugepages`. The library needs none of
//!   them: `cargo build --lib --no-default-features` builds it without.
//! - `hugepages` (default, through `cli`): libc, for `madvise(MADV_HUGEPAGE)` on the
//!   roofline's big buffers ([`diag::roofline::BigBuffer`]) on Linux. Without it huge pages are
//!   never advised ([`diag::roofline::BigBuffer::huge_pages_advised`] is false); nothing else
//!   changes.
//!
//! A library user who wants neither writes
//! `sparse-gcn = { version = "0.1", default-features = false }` (add
//! `features = ["hugepages"]` to keep the huge-page advice).

// Library and binary code never unwraps: bad input gets a typed error (tests may unwrap).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod data;
pub mod diag;
pub mod dist;
pub mod error;
pub mod graph;
pub mod id;
pub mod input;
pub mod kernels;
pub mod metrics;
pub mod nn;
pub mod optim;
pub mod order;
pub mod par;
pub mod sample;
pub mod scalar;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod train;

pub use data::io::{load, LoadOptions};
pub use data::{Dataset, Features};
pub use error::{ConfigError, Error, Result};
pub use graph::{Graph, Norm, NormAdj, Propagate};
pub use nn::{Arch, Model, ModelConfig};
pub use par::Par;
pub use scalar::Scalar;
pub use train::options::TrainOptions;
pub use train::{fit, TrainConfig, TrainData};

/// The `ndarray` this crate's arrays come from (features, logits, embeddings): the same version
/// as the caller's, without a second dependency to keep in step.
pub use ndarray;

/// The longer documents of `docs/` whose code is compiled and run as doctests.
#[cfg(doctest)]
pub mod docs {
    /// `docs/ADDING_A_LAYER.md`.
    #[doc = include_str!("../docs/ADDING_A_LAYER.md")]
    pub struct AddingALayer;
}
