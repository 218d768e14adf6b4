//! Mini-batch samplers: which nodes a batch trains on, as a pure function of (seed, epoch,
//! batch index), so that a batch is the same whatever the thread or process count; and the
//! batch itself ([`Batch`]): the subgraph its nodes induce with its own Â (renormalised on the
//! batch, as Cluster-GCN and GraphSAINT do), its rows of X, its labels and its training nodes,
//! rewritten in place from one batch to the next.
//!
//! - [`ClusterSampler`]: Cluster-GCN (Chiang et al., KDD 2019). The graph is cut once into P
//!   parts (METIS k-way, or the community order's clusters); each epoch shuffles the parts
//!   (from the seed and the epoch alone) and each batch takes q of them with every edge among
//!   them.
//!
//! The training loop over batches is [`crate::train::train_model`] with
//! [`crate::train::FitOptions::batches`].

mod batch;
mod cluster;

pub use batch::{Batch, BatchSource};
pub use cluster::{ClusterSampler, Clusters};

use crate::graph::Graph;
use crate::{ConfigError, Result};

/// Full-batch or mini-batch training, and the sampler's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BatchConfig {
    /// One training pass over the whole graph an epoch.
    #[default]
    Full,
    /// Cluster-GCN ([`ClusterSampler`]): `parts` parts cut by `clusters`, `per_batch` a batch.
    Cluster {
        /// Parts of the graph (P).
        parts: usize,
        /// Parts a batch (q).
        per_batch: usize,
        /// How the graph is cut.
        clusters: Clusters,
    },
}

impl BatchConfig {
    /// Checks the settings (those that need the graph, such as parts ≤ nodes, are checked by
    /// [`BatchConfig::sampler`]).
    ///
    /// # Errors
    /// [`ConfigError::OutOfRange`] naming the setting.
    pub fn check(&self) -> Result<(), ConfigError> {
        if let BatchConfig::Cluster {
            parts, per_batch, ..
        } = *self
        {
            if parts == 0 {
                return Err(ConfigError::OutOfRange {
                    name: "parts",
                    value: 0.0,
                    rule: "at least 1",
                });
            }
            if per_batch == 0 || per_batch > parts {
                return Err(ConfigError::OutOfRange {
                    name: "parts_per_batch",
                    value: per_batch as f64,
                    rule: "at least 1, at most the parts",
                });
            }
        }
        Ok(())
    }

    /// The sampler of `graph`'s batches (`None` for full batch).
    ///
    /// # Errors
    /// As [`ClusterSampler::new`].
    pub fn sampler(&self, graph: &Graph) -> Result<Option<Box<dyn NodeSampler>>> {
        Ok(match *self {
            BatchConfig::Full => None,
            BatchConfig::Cluster {
                parts,
                per_batch,
                clusters,
            } => Some(Box::new(ClusterSampler::new(
                graph, parts, per_batch, clusters,
            )?)),
        })
    }
}

/// A sampler of node sets: batch `index` of `epoch` is a pure function of the seed, the epoch
/// and the index.
pub trait NodeSampler: Send + Sync {
    /// Batches in an epoch.
    fn batches(&self) -> usize;
    /// The most nodes a batch can have (what a model plans its buffers for).
    fn max_nodes(&self) -> usize;
    /// Writes the nodes of batch `index` of `epoch` for `seed` into `nodes` (cleared first):
    /// distinct node ids, ascending.
    ///
    /// # Panics
    /// If `index >= self.batches()`.
    fn nodes_into(&self, seed: u64, epoch: usize, index: usize, nodes: &mut Vec<u32>);
}

/// The RNG stream of an epoch's sampling for `seed`: apart from the streams of training
/// (initialisation, dropout, DropEdge use streams 0 to 2).
pub(crate) fn epoch_rng(seed: u64, epoch: usize) -> rand_chacha::ChaCha8Rng {
    use rand::SeedableRng;
    let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    r.set_stream((1 << 32) + epoch as u64);
    r
}
