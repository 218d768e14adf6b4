//! Beyond one machine: full-batch training across the ranks of an MPI job, with results that
//! are the same bits for any number of ranks (`docs/DISTRIBUTED.md`).
//!
//! - [`partition`]: contiguous row ranges of a fixed node order, balanced by non-zeros, cut on
//!   the reduction grid ([`grid_rows`](crate::kernels::rows::grid_rows)), which does not
//!   depend on the rank count; each rank's halo and its neighbour ranks.
//! - [`local`]: a rank's rows of the features, labels and split.
//! - `mpi` (feature `mpi`): the job and `DistAdj`, the row-partitioned
//!   [`Propagate`](crate::graph::Propagate) — halo exchange before every product, exact sums
//!   across ranks — that every layer runs on unchanged.
//! - [`model`] and [`plan`]: the bytes a run exchanges and the memory a rank needs, from the
//!   partition and the model alone, for any rank count.
//!
//! Everything but `mpi` is computed without MPI, so it can be planned and tested anywhere.

pub mod local;
pub mod model;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod partition;
pub mod plan;

pub use local::{rank_data, RankData};
pub use partition::{RankStats, RowPartition};
