//! The training flags of mini-batches: which batches, the sampler's settings, and the usage
//! errors of flags that do not apply.

#[cfg(feature = "mpi")]
use super::dist;
use clap::ValueEnum;
use sparse_gcn::sample::{BatchConfig, Clusters, Fanouts, SaintKind, MAX_FANOUTS, SAINT_COVERAGE};
use sparse_gcn::train::TrainConfig;
use sparse_gcn::ConfigError;

use super::{args, TrainArgs};

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
    pub(crate) fn given(&self) -> [(&'static str, bool); 11] {
        [
            ("--batch", self.batch != BatchArg::Full),
            ("--parts", self.parts.is_some()),
            ("--parts-per-batch", self.parts_per_batch.is_some()),
            ("--clusters", self.clusters.is_some()),
            ("--diag-lambda", self.diag_lambda.is_some()),
            ("--batch-size", self.batch_size.is_some()),
            ("--fanout", self.fanout.is_some()),
            ("--walk-length", self.walk_length.is_some()),
            ("--batches-per-epoch", self.batches_per_epoch.is_some()),
            ("--batches-per-step", self.batches_per_step.is_some()),
            ("--saint-coverage", self.saint_coverage.is_some()),
        ]
    }

    /// The batches the flags ask for.
    pub(crate) fn config(&self, n_layers: usize) -> BatchConfig {
        match self.batch {
            BatchArg::Full => BatchConfig::Full,
            BatchArg::Neighbor => {
                // (A list `check_batch_flags` refuses never reaches training: one fanout then.)
                let f = self.fanout.clone().unwrap_or_else(|| vec![10; n_layers]);
                BatchConfig::Neighbor {
                    fanouts: Fanouts::new(&f).unwrap_or_else(|_| {
                        Fanouts::new(&[10]).unwrap_or_else(|_| unreachable!("one fanout"))
                    }),
                    batch_size: self.batch_size.unwrap_or(1024),
                }
            }
            BatchArg::Cluster => BatchConfig::Cluster {
                parts: self.parts.unwrap_or(500),
                per_batch: self.parts_per_batch.unwrap_or(10),
                clusters: match self.clusters.unwrap_or(ClustersArg::Metis) {
                    ClustersArg::Metis => Clusters::Metis,
                    ClustersArg::Community => Clusters::Community,
                },
                diag_lambda: self.diag_lambda.unwrap_or(0.0),
            },
            BatchArg::SaintNode | BatchArg::SaintEdge | BatchArg::SaintRw => {
                let (kind, size) = match self.batch {
                    BatchArg::SaintNode => (SaintKind::Node, 8000),
                    BatchArg::SaintEdge => (SaintKind::Edge, 4000),
                    _ => (
                        SaintKind::RandomWalk {
                            walk_length: self.walk_length.unwrap_or(2),
                        },
                        3000,
                    ),
                };
                BatchConfig::Saint {
                    kind,
                    batch_size: self.batch_size.unwrap_or(size),
                    batches: self.batches_per_epoch,
                    coverage: self.saint_coverage.unwrap_or(SAINT_COVERAGE),
                }
            }
        }
    }

    /// A usage error for a batch flag that does not apply, or batches with what they cannot
    /// run with (`cfg`, Â normalised by rows when `norm_row`).
    pub(crate) fn check(
        &self,
        cfg: &TrainConfig,
        norm_row: bool,
    ) -> std::result::Result<(), String> {
        let saint = matches!(cfg.batch, BatchConfig::Saint { .. });
        let cluster = self.batch == BatchArg::Cluster;
        let neighbor = self.batch == BatchArg::Neighbor;
        for (flags, applies, what) in [
            (
                &[
                    ("--parts", self.parts.is_some()),
                    ("--parts-per-batch", self.parts_per_batch.is_some()),
                    ("--clusters", self.clusters.is_some()),
                    ("--diag-lambda", self.diag_lambda.is_some()),
                ][..],
                cluster,
                "only --batch cluster has parts",
            ),
            (
                &[("--batch-size", self.batch_size.is_some())][..],
                saint || neighbor,
                "only the GraphSAINT batches (saint-node, saint-edge, saint-rw) and neighbor \
                 take it",
            ),
            (
                &[
                    ("--batches-per-epoch", self.batches_per_epoch.is_some()),
                    ("--saint-coverage", self.saint_coverage.is_some()),
                ][..],
                saint,
                "only the GraphSAINT batches (saint-node, saint-edge, saint-rw) take it",
            ),
            (
                &[("--fanout", self.fanout.is_some())][..],
                neighbor,
                "only --batch neighbor samples neighbours",
            ),
            (
                &[("--walk-length", self.walk_length.is_some())][..],
                self.batch == BatchArg::SaintRw,
                "only --batch saint-rw walks",
            ),
        ] {
            if let Some((flag, _)) = flags.iter().find(|(_, given)| *given && !applies) {
                return Err(format!("{flag}: {what}"));
            }
        }
        if neighbor {
            let given = self
                .fanout
                .as_deref()
                .map_or(cfg.model.n_layers, <[usize]>::len);
            if given == 0 || given > MAX_FANOUTS {
                let flag = if self.fanout.is_some() {
                    "--fanout"
                } else {
                    "--layers"
                };
                return Err(format!(
                    "{flag}: {given} fanouts (one a layer); neighbour sampling takes 1 to \
                     {MAX_FANOUTS}"
                ));
            }
            if norm_row {
                return Err(
                    "--norm row: neighbour sampling normalises each block as DGL's GraphConv \
                     norm='both' does (docs/MATH.md §23.2), not by rows"
                        .into(),
                );
            }
            if given != cfg.model.n_layers {
                return Err(format!(
                    "--fanout: {given} fanouts for a model of {} layers (one a layer, hop by \
                     hop from the seeds)",
                    cfg.model.n_layers
                ));
            }
            if !cfg.model.arch.uses().gcn_convs || cfg.model.arch.name() != "gcn" {
                return Err(format!(
                    "--batch neighbor: --model {} does not run over bipartite blocks (only gcn: \
                     a chain of graph convolutions, one block each; the residual, initial-\
                     residual and jumping-knowledge stacks read a layer's input at its output's \
                     nodes, SGC and APPNP propagate several times in one layer)",
                    cfg.model.arch.name()
                ));
            }
        }
        if self.batch == BatchArg::Full {
            return match self.batches_per_step {
                Some(b) => Err(format!(
                    "--batches-per-step {b}: only with mini-batches (--batch; full batch takes \
                     one step an epoch)"
                )),
                None => Ok(()),
            };
        }
        // The library's rules for the batches' settings, each named by its flag.
        if let Err(e) = cfg.batch.check() {
            return Err(match e {
                ConfigError::OutOfRange { name, value, rule } => {
                    format!("--{} {value}: {rule}", name.replace('_', "-"))
                }
                e => format!("the batch settings: {e}"),
            });
        }
        if cfg.model.drop_edge > 0.0 {
            return Err(
                "--drop-edge: not with mini-batches (--batch; a batch is already a subgraph)"
                    .into(),
            );
        }
        let per_step = cfg.batches_per_step;
        if per_step > 1 && cfg.model.norm == sparse_gcn::nn::NormKind::Batch {
            return Err(format!(
                "--batches-per-step {per_step}: not with --norm-layer batch (its running \
                 statistics would follow each rank's batches)"
            ));
        }
        #[cfg(feature = "mpi")]
        if let Some(ranks) = dist::launched_size() {
            if !per_step.is_multiple_of(ranks) {
                return Err(format!(
                    "--batches-per-step {per_step}: not a multiple of the {ranks} ranks (each \
                     rank trains an equal share of a step's batches)"
                ));
            }
        }
        Ok(())
    }
}

impl TrainArgs {
    /// [`BatchArgs::check`], and `--eval batch` where the batches cover every node once.
    pub(super) fn check_batch_flags(&self, cfg: &TrainConfig) -> std::result::Result<(), String> {
        let b = &self.batches;
        if self.eval == Some(EvalArg::Batch)
            && !matches!(b.batch, BatchArg::Cluster | BatchArg::Neighbor)
        {
            return Err(
                "--eval batch: only with --batch cluster or neighbor (the GraphSAINT batches do \
                 not partition the nodes, so they would score some nodes twice and others not \
                 at all)"
                    .into(),
            );
        }
        b.check(cfg, matches!(self.norm, super::NormArg::Row))
    }
}
