//! [`BatchOptions`]: the mini-batch options as a user gives them (the CLI's `--batch` flags,
//! the Python package's keywords), their ranges, the [`BatchConfig`] they make and the checks
//! of options that do not apply to the batches chosen.

use crate::nn::NormKind;
use crate::sample::{BatchConfig, Clusters, Fanouts, SaintKind, MAX_FANOUTS, SAINT_COVERAGE};
use crate::ConfigError;

use super::{Names, OptionError};
use crate::train::TrainConfig;

/// Which batches an epoch trains on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BatchKind {
    /// One training pass over the whole graph an epoch.
    #[default]
    Full,
    /// Cluster-GCN: `parts_per_batch` of the graph's `parts` parts a batch.
    Cluster,
    /// GraphSAINT: `batch_size` nodes drawn a batch (by degree), the subgraph they induce.
    SaintNode,
    /// GraphSAINT: `batch_size` edges drawn a batch, the subgraph their ends induce.
    SaintEdge,
    /// GraphSAINT: `batch_size` random-walk roots of `walk_length` steps a batch.
    SaintRw,
    /// Neighbour sampling: `batch_size` training nodes a batch, `fanout` neighbours drawn per
    /// node and hop, one bipartite block a layer.
    Neighbor,
}

impl BatchKind {
    /// Every kind, in the order of [`BatchKind::name`]'s list.
    pub const ALL: [BatchKind; 6] = [
        BatchKind::Full,
        BatchKind::Cluster,
        BatchKind::SaintNode,
        BatchKind::SaintEdge,
        BatchKind::SaintRw,
        BatchKind::Neighbor,
    ];

    /// The CLI's name: `full`, `cluster`, `saint-node`, `saint-edge`, `saint-rw`, `neighbor`.
    pub fn name(self) -> &'static str {
        match self {
            BatchKind::Full => "full",
            BatchKind::Cluster => "cluster",
            BatchKind::SaintNode => "saint-node",
            BatchKind::SaintEdge => "saint-edge",
            BatchKind::SaintRw => "saint-rw",
            BatchKind::Neighbor => "neighbor",
        }
    }

    /// The kind named `s` (any case; `_` for `-`).
    pub fn named(s: &str) -> Option<BatchKind> {
        let s = s.replace('_', "-");
        Self::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(&s))
    }

    fn is_saint(self) -> bool {
        matches!(
            self,
            BatchKind::SaintNode | BatchKind::SaintEdge | BatchKind::SaintRw
        )
    }
}

/// Where validation and test run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EvalKind {
    /// On the whole graph.
    #[default]
    Full,
    /// Over the batches (Cluster-GCN's parts; neighbour sampling's blocks).
    Batch,
}

/// The mini-batch options as given (`None`: not given, the default). Each field is the CLI
/// flag of the same name (`parts_per_batch` is `--parts-per-batch`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BatchOptions {
    /// The batches (default: full batch).
    pub batch: BatchKind,
    /// Cluster-GCN's parts, at most 2²⁴ (default: 500).
    pub parts: Option<usize>,
    /// Cluster-GCN's parts a batch, at most `parts` (default: 10).
    pub parts_per_batch: Option<usize>,
    /// How Cluster-GCN cuts the graph (default: METIS).
    pub clusters: Option<Clusters>,
    /// Cluster-GCN's diagonal enhancement λ ≥ 0 (default: 0).
    pub diag_lambda: Option<f64>,
    /// GraphSAINT's nodes (8000), edges (4000) or walk roots (3000) a batch; neighbour
    /// sampling's training nodes a batch (1024); at most 2²⁶.
    pub batch_size: Option<usize>,
    /// Neighbours drawn per node and hop, hop by hop from the seeds, one a layer; 0: all
    /// (default: 10 a layer).
    pub fanout: Option<Vec<usize>>,
    /// Steps of each GraphSAINT walk, at most 10,000 (default: 2).
    pub walk_length: Option<usize>,
    /// GraphSAINT's batches an epoch, at most 2²⁴ (default: about the node count drawn).
    pub batches_per_epoch: Option<usize>,
    /// Batches a step, their gradients summed exactly, at most 2¹⁶ (default: 1).
    pub batches_per_step: Option<usize>,
    /// GraphSAINT's normalisation coverage, 0 (none) to 10,000 (default: 400).
    pub saint_coverage: Option<f64>,
    /// Validation and test on the whole graph or over the batches (default: full).
    pub eval: Option<EvalKind>,
}

impl BatchOptions {
    /// Each option (its key) and whether it was given.
    pub fn given(&self) -> [(&'static str, bool); 12] {
        [
            ("batch", self.batch != BatchKind::Full),
            ("parts", self.parts.is_some()),
            ("parts_per_batch", self.parts_per_batch.is_some()),
            ("clusters", self.clusters.is_some()),
            ("diag_lambda", self.diag_lambda.is_some()),
            ("batch_size", self.batch_size.is_some()),
            ("fanout", self.fanout.is_some()),
            ("walk_length", self.walk_length.is_some()),
            ("batches_per_epoch", self.batches_per_epoch.is_some()),
            ("batches_per_step", self.batches_per_step.is_some()),
            ("saint_coverage", self.saint_coverage.is_some()),
            ("eval", self.eval.is_some()),
        ]
    }

    /// The batches the options ask for, for a model of `n_layers` layers.
    pub fn config(&self, n_layers: usize) -> BatchConfig {
        match self.batch {
            BatchKind::Full => BatchConfig::Full,
            BatchKind::Neighbor => {
                // (A list `check` refuses never reaches training: one fanout then.)
                let f = self.fanout.clone().unwrap_or_else(|| vec![10; n_layers]);
                let one = || Fanouts::new(&[10]).unwrap_or_else(|_| unreachable!("one fanout"));
                BatchConfig::Neighbor {
                    fanouts: Fanouts::new(&f).unwrap_or_else(|_| one()),
                    batch_size: self.batch_size.unwrap_or(1024),
                }
            }
            BatchKind::Cluster => BatchConfig::Cluster {
                parts: self.parts.unwrap_or(500),
                per_batch: self.parts_per_batch.unwrap_or(10),
                clusters: self.clusters.unwrap_or(Clusters::Metis),
                diag_lambda: self.diag_lambda.unwrap_or(0.0),
            },
            BatchKind::SaintNode | BatchKind::SaintEdge | BatchKind::SaintRw => {
                let (kind, size) = match self.batch {
                    BatchKind::SaintNode => (SaintKind::Node, 8000),
                    BatchKind::SaintEdge => (SaintKind::Edge, 4000),
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

    /// Checks every value against its range (what the CLI's parsers check as they read a
    /// flag).
    ///
    /// # Errors
    /// The first option out of its range.
    pub fn check_ranges(&self) -> Result<(), OptionError> {
        let counts = [
            ("parts", self.parts, 1, 1 << 24),
            ("parts_per_batch", self.parts_per_batch, 1, 1 << 24),
            ("batch_size", self.batch_size, 1, 1 << 26),
            ("walk_length", self.walk_length, 1, 10_000),
            ("batches_per_epoch", self.batches_per_epoch, 1, 1 << 24),
            ("batches_per_step", self.batches_per_step, 1, 1 << 16),
        ];
        for (option, v, lo, hi) in counts {
            if let Some(v) = v.filter(|v| !(lo..=hi).contains(v)) {
                return Err(OptionError::of(
                    option,
                    format!("{v} must lie in {lo}..={hi}"),
                ));
            }
        }
        if let Some(f) = self.fanout.iter().flatten().find(|&&f| f > 1 << 20) {
            return Err(OptionError::of(
                "fanout",
                format!("{f} must be at most {} (0 takes every neighbour)", 1 << 20),
            ));
        }
        for (option, v, hi) in [
            ("diag_lambda", self.diag_lambda, f64::INFINITY),
            ("saint_coverage", self.saint_coverage, 1e4),
        ] {
            if let Some(v) = v.filter(|v| !(v.is_finite() && *v >= 0.0 && *v <= hi)) {
                return Err(OptionError::of(
                    option,
                    format!("{v} must be finite, >= 0 and at most {hi}"),
                ));
            }
        }
        Ok(())
    }

    /// An option that does not apply to the batches chosen, or batches with what they cannot
    /// run with: `cfg` (the configuration the options make), Â normalised by rows when
    /// `norm_row`.
    ///
    /// # Errors
    /// The first option to blame, saying why (other options named as `names` says).
    pub fn check(
        &self,
        cfg: &TrainConfig,
        norm_row: bool,
        names: Names,
    ) -> Result<(), OptionError> {
        let n = |key: &str| names.of(key);
        let batch = self.batch;
        if self.eval == Some(EvalKind::Batch)
            && !matches!(batch, BatchKind::Cluster | BatchKind::Neighbor)
        {
            return Err(OptionError::at(
                "eval",
                "batch",
                format!(
                    "only with {} cluster or neighbor (the GraphSAINT batches do not \
                     partition the nodes, so they would score some nodes twice and others not \
                     at all)",
                    n("batch")
                ),
            ));
        }
        self.check_applies(names)?;
        if batch == BatchKind::Neighbor {
            self.check_neighbor(cfg, norm_row, names)?;
        }
        if batch == BatchKind::Full {
            return match self.batches_per_step {
                Some(b) => Err(OptionError::at(
                    "batches_per_step",
                    b,
                    format!(
                        "only with mini-batches ({}; full batch takes one step an epoch)",
                        n("batch")
                    ),
                )),
                None => Ok(()),
            };
        }
        // The library's rules for the batches' settings, each named by its option.
        if let Err(e) = cfg.batch.check() {
            return Err(match e {
                // (The library's setting names are the options' keys.)
                ConfigError::OutOfRange { name, value, rule } => {
                    OptionError::at(name, value, rule.to_string())
                }
                e => OptionError::of("batch", format!("the batch settings: {e}")),
            });
        }
        if cfg.model.drop_edge > 0.0 {
            return Err(OptionError::of(
                "drop_edge",
                format!(
                    "not with mini-batches ({}; a batch is already a subgraph)",
                    n("batch")
                ),
            ));
        }
        let per_step = cfg.batches_per_step;
        if per_step > 1 && cfg.model.norm == NormKind::Batch {
            return Err(OptionError::at(
                "batches_per_step",
                per_step,
                format!(
                    "not with {} batch (its running statistics would follow each \
                     rank's batches)",
                    n("norm_layer")
                ),
            ));
        }
        Ok(())
    }

    /// An option given that only other batches take.
    fn check_applies(&self, names: Names) -> Result<(), OptionError> {
        let batch = self.batch;
        let b = names.of("batch");
        let saint = batch.is_saint();
        let neighbor = batch == BatchKind::Neighbor;
        for (options, applies, what) in [
            (
                &[
                    ("parts", self.parts.is_some()),
                    ("parts_per_batch", self.parts_per_batch.is_some()),
                    ("clusters", self.clusters.is_some()),
                    ("diag_lambda", self.diag_lambda.is_some()),
                ][..],
                batch == BatchKind::Cluster,
                format!("only {b} cluster has parts"),
            ),
            (
                &[("batch_size", self.batch_size.is_some())][..],
                saint || neighbor,
                "only the GraphSAINT batches (saint-node, saint-edge, saint-rw) and neighbor \
                 take it"
                    .to_string(),
            ),
            (
                &[
                    ("batches_per_epoch", self.batches_per_epoch.is_some()),
                    ("saint_coverage", self.saint_coverage.is_some()),
                ][..],
                saint,
                "only the GraphSAINT batches (saint-node, saint-edge, saint-rw) take it"
                    .to_string(),
            ),
            (
                &[("fanout", self.fanout.is_some())][..],
                neighbor,
                format!("only {b} neighbor samples neighbours"),
            ),
            (
                &[("walk_length", self.walk_length.is_some())][..],
                batch == BatchKind::SaintRw,
                format!("only {b} saint-rw walks"),
            ),
        ] {
            if let Some((option, _)) = options.iter().find(|(_, given)| *given && !applies) {
                return Err(OptionError::of(option, what));
            }
        }
        Ok(())
    }

    /// Neighbour sampling's rules: a fanout a layer, symmetric normalisation, a gcn.
    fn check_neighbor(
        &self,
        cfg: &TrainConfig,
        norm_row: bool,
        names: Names,
    ) -> Result<(), OptionError> {
        let layers = cfg.model.n_layers;
        let given = self.fanout.as_deref().map_or(layers, <[usize]>::len);
        if given == 0 || given > MAX_FANOUTS {
            let option = if self.fanout.is_some() {
                "fanout"
            } else {
                "layers"
            };
            return Err(OptionError::of(
                option,
                format!(
                    "{given} fanouts (one a layer); neighbour sampling takes 1 to {MAX_FANOUTS}"
                ),
            ));
        }
        if norm_row {
            return Err(OptionError::at(
                "norm",
                "row",
                "neighbour sampling normalises each block as DGL's GraphConv norm='both' \
                 does (docs/MATH.md §23.2), not by rows"
                    .into(),
            ));
        }
        if given != layers {
            return Err(OptionError::of(
                "fanout",
                format!(
                    "{given} fanouts for a model of {layers} layers (one a layer, hop by hop \
                     from the seeds)"
                ),
            ));
        }
        let arch = cfg.model.arch;
        if !arch.uses().gcn_convs || arch.name() != "gcn" {
            return Err(OptionError::at(
                "batch",
                "neighbor",
                format!(
                    "{} {} does not run over bipartite blocks (only gcn: a chain of \
                     graph convolutions, one block each; the residual, initial-residual and \
                     jumping-knowledge stacks read a layer's input at its output's nodes, SGC \
                     and APPNP propagate several times in one layer)",
                    names.of("model"),
                    arch.name()
                ),
            ));
        }
        Ok(())
    }
}
