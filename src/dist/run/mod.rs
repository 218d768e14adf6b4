//! The run-level half of [`dist`](super): what a row-partitioned run needs above the layers
//! and the training loop (it may import `train`, `nn`, `data` and `order`).
//!
//! - [`local`]: a rank's rows of the features, labels and split, and its whole preparation
//!   without the whole Â or X (the node order and the partition chosen as one process would).
//! - [`model`]: the bytes a run exchanges, from the partition's halos and the model's shapes.
//! - [`plan`]: what each rank holds, the bytes and messages an epoch exchanges and the memory
//!   a rank needs, for any rank count, read off the model by tracing its exchanges.
//!
//! Training itself across ranks is `train::fit_model` on a `dist::backend::mpi::DistAdj` (the
//! binary's `train` under `mpirun`): nothing here is specific to MPI, so all of it can be
//! planned and tested anywhere.

pub mod local;
pub mod model;
pub mod plan;

pub use local::{prepare_rank, prepare_rank_store, rank_data, RankData, RankPrepared, RowSource};
