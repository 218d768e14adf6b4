//! The training flags of mini-batches: which batches, the sampler's settings, and the usage
//! errors of flags that do not apply.

#[cfg(feature = "mpi")]
use super::dist;
use clap::ValueEnum;
use sparse_gcn::sample::{BatchConfig, Clusters, Fanouts, SaintKind, MAX_FANOUTS, SAINT_COVERAGE};
use sparse_gcn::train::TrainConfig;
use sparse_gcn::ConfigError;

use super::TrainArgs;

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

impl TrainArgs {
    /// The batches the flags ask for.
    pub(super) fn batch_config(&self, n_layers: usize) -> BatchConfig {
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
    /// run with.
    pub(super) fn check_batch_flags(&self, cfg: &TrainConfig) -> std::result::Result<(), String> {
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
        if self.eval == Some(EvalArg::Batch) && !cluster && !neighbor {
            return Err(
                "--eval batch: only with --batch cluster or neighbor (the GraphSAINT batches do \
                 not partition the nodes, so they would score some nodes twice and others not \
                 at all)"
                    .into(),
            );
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
            if matches!(self.norm, super::NormArg::Row) {
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
            return Ok(());
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
        #[cfg(feature = "mpi")]
        if dist::launched() {
            return Err("--batch: not under mpirun yet (mini-batches need Â held whole)".into());
        }
        Ok(())
    }
}
