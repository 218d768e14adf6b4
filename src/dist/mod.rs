//! Beyond one machine: full-batch training across the ranks of an MPI job, with results that
//! are the same bits for any number of ranks (`docs/DISTRIBUTED.md`). Two halves, one on each
//! side of the layers:
//!
//! - [`backend`] (graph level, beside `graph`): the row partition on the reduction grid, the
//!   tiles of a halo exchange, and with the `mpi` feature the job and `DistAdj`, the
//!   row-partitioned `Propagate`. It imports nothing above `graph`.
//! - [`run`] (run level, above `train`): a rank's part of the data and its preparation, the
//!   communication model and the planner (which builds and runs models on a tracing
//!   backend).
//!
//! Everything but `backend::mpi` is computed without MPI, so it can be planned and tested
//! anywhere. The items most callers need are re-exported here.

pub mod backend;
pub mod run;

pub use backend::{RankStats, RowPartition};
pub use run::{prepare_rank, prepare_rank_store, rank_data, RankData, RankPrepared, RowSource};
