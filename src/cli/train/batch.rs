//! The training flags of mini-batches: which batches, the sampler's settings, and the usage
//! errors of flags that do not apply.

#[cfg(feature = "mpi")]
use super::dist;
use clap::ValueEnum;
use sparse_gcn::sample::{BatchConfig, Clusters};
use sparse_gcn::train::options::{BatchKind, BatchOptions, EvalKind, Names};
use sparse_gcn::train::TrainConfig;

use super::args;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum BatchArg {
    /// One training pass over the whole graph an epoch
    Full,
    /// Cluster-GCN: --parts-per-batch of the graph's --parts parts a batch
    Cluster,
    /// GraphSAINT: --batch-size nodes drawn a batch (by degree), the subgraph they induce
    SaintNode,
    /// GraphSAINT: --batch-size edges drawn a batch, the subgraph their ends induce
    SaintEdge,
    /// GraphSAINT: --batch-size random-walk roots of --walk-length steps a batch
    SaintRw,
    /// Neighbour sampling: --batch-size training nodes a batch, --fanout neighbours drawn per
    /// node and hop, one bipartite block a layer
    Neighbor,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum EvalArg {
    /// On the whole graph
    Full,
    /// Over the batches (Cluster-GCN's parts; neighbour sampling's blocks of the validation
    /// and test nodes)
    Batch,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum ClustersArg {
    /// METIS k-way, balancing the parts' node counts (Cluster-GCN's)
    Metis,
    /// The community order cut into ranges of equal node counts
    Community,
    /// The nodes as numbered (or stored) cut into ranges of equal node counts: for data
    /// already in a partition order
    Ranges,
}

/// The flags of the batches (`train`, `roofline --epoch`).
#[derive(clap::Args, Clone)]
pub(crate) struct BatchArgs {
    /// Training batches: full (one pass over the whole graph an epoch), or a sampler's, one
    /// optimiser step a batch (or --batches-per-step): cluster (Cluster-GCN: the graph cut once
    /// into --parts parts, each epoch --parts-per-batch random parts a batch with every edge
    /// among them, each batch's Â renormalised on it), saint-node, saint-edge, saint-rw
    /// (GraphSAINT) or neighbor (blocks of sampled neighbours); validation and test per --eval.
    #[arg(long, value_enum, default_value_t = BatchArg::Full)]
    pub(crate) batch: BatchArg,
    /// Parts of --batch cluster, at most the nodes [default: 500].
    #[arg(long, value_parser = args::parts)]
    parts: Option<usize>,
    /// Parts a batch of --batch cluster, at most --parts [default: 10].
    #[arg(long, value_parser = args::parts)]
    parts_per_batch: Option<usize>,
    /// How --batch cluster cuts the graph [default: metis].
    #[arg(long, value_enum)]
    clusters: Option<ClustersArg>,
    /// Cluster-GCN's diagonal enhancement λ (--batch cluster): every Â, the batches' and
    /// evaluation's, becomes Â + λ·diag(Â); the paper's with --norm row [default: 0].
    #[arg(long, value_parser = args::non_negative, allow_hyphen_values = true)]
    diag_lambda: Option<f64>,
    /// GraphSAINT's nodes (saint-node) [default: 8000], edges (saint-edge) [default: 4000] or
    /// walk roots (saint-rw) [default: 3000] drawn a batch; neighbour sampling's training nodes
    /// (seeds) a batch [default: 1024].
    #[arg(long, value_parser = args::batch_size)]
    batch_size: Option<usize>,
    /// Neighbours drawn per node at each hop of --batch neighbor, hop by hop from the seeds
    /// (PyG's num_neighbors order; DGL's fanouts list reversed), one a layer, 0: every
    /// neighbour, e.g. 5,10,15 [default: 10 a layer].
    #[arg(long, value_delimiter = ',', value_parser = args::fanout)]
    fanout: Option<Vec<usize>>,
    /// Steps of each walk of --batch saint-rw [default: 2].
    #[arg(long, value_parser = args::walk_length)]
    walk_length: Option<usize>,
    /// GraphSAINT's batches an epoch [default: as many as draw about the node count].
    #[arg(long, value_parser = args::batches)]
    batches_per_epoch: Option<usize>,
    /// Batches a step: their gradients summed exactly, divided by their count, then one
    /// update. Under mpirun (every rank holding the whole data) a multiple of the ranks, each
    /// training its share of a step's batches: the same bits for any rank count dividing it
    /// [default: 1].
    #[arg(long, value_parser = args::batches_per_step)]
    pub(crate) batches_per_step: Option<usize>,
    /// GraphSAINT's normalisation: subgraphs pre-sampled (seed 0) until they hold this many
    /// times the node count; 0: none (each batch's Â renormalised on it, the loss its mean,
    /// as DGL's SAINTSampler trains) [default: 400].
    #[arg(long, value_parser = args::coverage)]
    saint_coverage: Option<f64>,
}

impl BatchArgs {
    /// Each flag, and whether it was given.
    pub(crate) fn given(&self) -> Vec<(String, bool)> {
        self.options(None)
            .given()
            .into_iter()
            .filter(|(k, _)| *k != "eval")
            .map(|(k, g)| (Names::Flags.of(k), g))
            .collect()
    }

    /// The library's batch options the flags give, with `--eval`.
    pub(crate) fn options(&self, eval: Option<EvalArg>) -> BatchOptions {
        BatchOptions {
            batch: match self.batch {
                BatchArg::Full => BatchKind::Full,
                BatchArg::Cluster => BatchKind::Cluster,
                BatchArg::SaintNode => BatchKind::SaintNode,
                BatchArg::SaintEdge => BatchKind::SaintEdge,
                BatchArg::SaintRw => BatchKind::SaintRw,
                BatchArg::Neighbor => BatchKind::Neighbor,
            },
            parts: self.parts,
            parts_per_batch: self.parts_per_batch,
            clusters: self.clusters.map(|c| match c {
                ClustersArg::Metis => Clusters::Metis,
                ClustersArg::Community => Clusters::Community,
                ClustersArg::Ranges => Clusters::Ranges,
            }),
            diag_lambda: self.diag_lambda,
            batch_size: self.batch_size,
            fanout: self.fanout.clone(),
            walk_length: self.walk_length,
            batches_per_epoch: self.batches_per_epoch,
            batches_per_step: self.batches_per_step,
            saint_coverage: self.saint_coverage,
            eval: eval.map(|e| match e {
                EvalArg::Full => EvalKind::Full,
                EvalArg::Batch => EvalKind::Batch,
            }),
        }
    }

    /// The batches the flags ask for.
    pub(crate) fn config(&self, n_layers: usize) -> BatchConfig {
        self.options(None).config(n_layers)
    }

    /// A usage error for a batch flag that does not apply, or batches with what they cannot
    /// run with (`cfg`, Â normalised by rows when `norm_row`).
    pub(crate) fn check(
        &self,
        cfg: &TrainConfig,
        norm_row: bool,
    ) -> std::result::Result<(), String> {
        let b = self.options(None);
        b.check_ranges()
            .and_then(|()| b.check(cfg, norm_row, Names::Flags))
            .map_err(|e| e.message(Names::Flags))
    }
}

/// Under mpirun, a step's batches a multiple of the ranks: a usage error naming
/// `--batches-per-step` otherwise.
#[cfg(feature = "mpi")]
pub(crate) fn check_ranks(cfg: &TrainConfig) -> std::result::Result<(), String> {
    let per_step = cfg.batches_per_step;
    if let Some(ranks) = dist::launched_size() {
        if cfg.batch != BatchConfig::Full && !per_step.is_multiple_of(ranks) {
            return Err(format!(
                "--batches-per-step {per_step}: not a multiple of the {ranks} ranks (each \
                 rank trains an equal share of a step's batches)"
            ));
        }
    }
    Ok(())
}
