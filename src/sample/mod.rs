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
//! - [`SaintSampler`]: GraphSAINT (Zeng et al., ICLR 2020). Each batch draws nodes, edges or
//!   random walks at random and takes the subgraph they induce; its Â and loss carry the
//!   paper's normalisation, estimated from subgraphs pre-sampled once (`docs/MATH.md` §22).
//!
//! The training loop over batches is [`crate::train::train_model`] with
//! [`crate::train::FitOptions::batches`].

mod batch;
mod cluster;
mod guide;
mod neighbor;
mod saint;

pub use batch::{max_batch_entries, Batch, BatchSource};
pub(crate) use cluster::check_diag_lambda;
pub use cluster::{ClusterSampler, Clusters};
pub use neighbor::{Blocks, Fanouts, NeighborSampler, MAX_FANOUTS};
pub use saint::{SaintCounts, SaintKind, SaintSampler, MAX_DRAWS};

use crate::graph::Graph;
use crate::{ConfigError, Result};

/// Full-batch or mini-batch training, and the sampler's settings.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
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
        /// The diagonal enhancement λ of every Â (0: none; `docs/MATH.md` §21).
        diag_lambda: f64,
    },
    /// GraphSAINT ([`SaintSampler`]).
    Saint {
        /// What a batch draws.
        kind: SaintKind,
        /// Nodes, edges or walk roots a batch.
        batch_size: usize,
        /// Batches an epoch (`None`: about the node count drawn an epoch).
        batches: Option<usize>,
        /// Pre-sampled nodes for the normalisation, in multiples of the node count (0: no
        /// normalisation, each batch renormalised on itself).
        coverage: f64,
    },
    /// Neighbour sampling ([`NeighborSampler`]): `batch_size` training nodes a batch, one
    /// block a layer.
    Neighbor {
        /// Neighbours drawn per node, hop by hop from the seeds (0: all of them).
        fanouts: Fanouts,
        /// Seeds (training nodes) a batch.
        batch_size: usize,
    },
}

/// [`BatchConfig::Saint`]'s default coverage. PyG's example pre-samples 100 times the node
/// count; on arxiv-like 3 × 256 that left the random-walk estimates of the aggregation
/// normalisation noisy enough to cost 7 points of accuracy after 20 epochs (the node sampler's
/// diverged), 400 did not (README, "Mini-batches").
pub const SAINT_COVERAGE: f64 = 400.0;

impl BatchConfig {
    /// Checks the settings (those that need the graph, such as parts ≤ nodes, are checked by
    /// [`BatchConfig::sampler`]).
    ///
    /// # Errors
    /// [`ConfigError::OutOfRange`] naming the setting.
    pub fn check(&self) -> Result<(), ConfigError> {
        if let BatchConfig::Saint {
            kind,
            batch_size,
            batches,
            coverage,
        } = *self
        {
            saint::check_settings(kind, batch_size, batches, coverage)?;
        }
        if let BatchConfig::Neighbor { batch_size: 0, .. } = *self {
            return Err(ConfigError::OutOfRange {
                name: "batch_size",
                value: 0.0,
                rule: "at least 1",
            });
        }
        if let BatchConfig::Cluster {
            parts,
            per_batch,
            diag_lambda,
            ..
        } = *self
        {
            cluster::check_diag_lambda(diag_lambda)?;
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

    /// The sampler of `graph`'s batches (`None` for full batch) training the nodes of
    /// `train`; GraphSAINT's normalisation pre-sampled with `seed`.
    ///
    /// # Errors
    /// As [`ClusterSampler::new`], [`SaintSampler::new`] and [`NeighborSampler::new`].
    pub fn sampler(
        &self,
        graph: &Graph,
        train: &crate::input::Mask,
        seed: u64,
    ) -> Result<Option<Box<dyn NodeSampler>>> {
        Ok(match *self {
            BatchConfig::Full => None,
            BatchConfig::Neighbor {
                fanouts,
                batch_size,
            } => Some(Box::new(NeighborSampler::new(
                graph,
                train,
                fanouts.as_slice(),
                batch_size,
            )?)),
            BatchConfig::Cluster {
                parts,
                per_batch,
                clusters,
                diag_lambda,
            } => Some(Box::new(
                ClusterSampler::new(graph, parts, per_batch, clusters)?
                    .with_diag_lambda(diag_lambda)?,
            )),
            BatchConfig::Saint {
                kind,
                batch_size,
                batches,
                coverage,
            } => Some(Box::new(SaintSampler::new(
                graph, kind, batch_size, batches, coverage, seed,
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
    /// Writes the nodes of batch `index` of `epoch` for `seed` of `graph` (the one the
    /// sampler was built for) into `nodes` (cleared first): distinct node ids, ascending.
    ///
    /// # Panics
    /// If `index >= self.batches()`, or `graph` is not the sampler's
    /// ([`NodeSampler::check_graph`] says).
    fn nodes_into(
        &self,
        graph: &Graph,
        seed: u64,
        epoch: usize,
        index: usize,
        nodes: &mut Vec<u32>,
    );

    /// Whether `graph` is the one this sampler was built for (its node count, and what else
    /// the sampler can check cheaply).
    ///
    /// # Errors
    /// [`crate::Error::Mismatch`] naming the difference.
    fn check_graph(&self, graph: &Graph) -> Result<()>;

    /// Whether every epoch's batches partition the nodes (each node in exactly one batch):
    /// what evaluation over batches needs.
    fn partitions(&self) -> bool {
        false
    }

    /// The diagonal enhancement λ of each batch's Â (Cluster-GCN's; 0: none), which the
    /// evaluation's Â must share.
    fn diag_lambda(&self) -> f64 {
        0.0
    }

    /// GraphSAINT's counts, when the batches take its normalisation ([`SaintSampler`]).
    fn saint(&self) -> Option<&SaintCounts> {
        None
    }

    /// The neighbour sampler, when a batch is a stack of blocks ([`NeighborSampler`]) rather
    /// than the subgraph its nodes induce.
    fn blocks(&self) -> Option<&NeighborSampler> {
        None
    }

    /// The Cluster-GCN sampler, when it is one ([`ClusterSampler`]): the sampler whose batches
    /// need no graph to be drawn, what batches read from a store take.
    fn cluster(&self) -> Option<&ClusterSampler> {
        None
    }
}

/// The RNG stream of an epoch's sampling for `seed`: apart from the streams of training
/// (initialisation, dropout, DropEdge use streams 0 to 2).
pub(crate) fn epoch_rng(seed: u64, epoch: usize) -> rand_chacha::ChaCha8Rng {
    use rand::SeedableRng;
    let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    r.set_stream((1 << 32) + epoch as u64);
    r
}
