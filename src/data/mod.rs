//! Datasets: node features, labels and splits, the loaders (OGB raw layout, gnn-benchmark `.npz`,
//! edge lists), the binary graph store, the synthetic generator, the writer, and dataset
//! statistics.

pub mod content;
pub mod dataset;
pub mod disk;
pub mod io;
pub mod memory;
pub mod node_features;
pub mod split;
pub mod stats;
pub mod store;
pub mod synthetic;
pub mod write;

pub use crate::input::{features, Features, FeaturesRef, SparseFeatures};
pub use dataset::{Dataset, Skeleton, UNLABELLED};
pub use split::{Mask, Split};
