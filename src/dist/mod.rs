//! Beyond one machine: what a row-partitioned run of the stack needs from the graph, computed
//! without MPI so that it can be planned and tested anywhere.
//!
//! - [`partition`]: contiguous row ranges of a fixed node order, balanced by non-zeros, with
//!   boundaries on a chunk grid that does not depend on the rank count; each rank's halo (the
//!   rows outside its range that its rows of Â read) and its neighbour ranks.
//!
//! The design (`docs/DISTRIBUTED.md` once it lands): a rank owns the rows `range(r)` of Â, X,
//! the labels and the masks, and before each Â·H receives its halo rows of H from their owners
//! (all-to-all-v); Âᵀ·G uses the transposed pattern, the same one when Â is symmetric. The
//! halo sizes below are therefore the rows each exchange carries, at the width the cost model
//! gives that layer's SpMM.

pub mod local;
pub mod model;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod partition;
pub mod plan;

pub use local::{rank_data, RankData};
pub use partition::{RankStats, RowPartition};
