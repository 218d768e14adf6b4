//! The integration tests, one module a file, in one test binary: the library's generic code is
//! compiled and linked once for all of them instead of once a file. Tests that need a process
//! of their own stay apart: `tests/no_alloc.rs` (a counting global allocator),
//! `tests/profile.rs` (the process-wide kernel profile) and `tests/distributed.rs` (under
//! `mpirun`, with the `mpi` feature).

mod common;
#[path = "../data/support.rs"]
mod support;

mod blocks;
mod checkpoint;
#[cfg(feature = "cli")]
mod cli;
#[cfg(feature = "cli")]
mod cli_batch;
#[cfg(feature = "cli")]
mod cli_flags;
#[cfg(feature = "cli")]
mod cli_fuzz;
#[cfg(feature = "cli")]
mod cli_identity;
#[cfg(feature = "cli")]
mod cli_limits;
#[cfg(feature = "cli")]
mod cli_memory;
#[cfg(feature = "cli")]
mod cli_out_of_core;
mod cli_store;
#[cfg(feature = "cli")]
mod cli_user_path;
mod clustering;
mod deep_training;
mod deep_workspace;
mod dropedge_training;
mod fingerprints;
mod golden_small_graphs;
mod gradcheck_deep;
mod gradcheck_model;
mod hand_built;
mod identity;
mod io_errors;
mod io_fuzz;
mod kernels_prop;
#[cfg(feature = "cli")]
mod library_load;
mod minibatch;
mod ogb_loader;
mod optim;
mod planetoid_accuracy;
mod restore_best;
mod store;
mod store_propagate;
mod synthetic;
mod training_smoke;
