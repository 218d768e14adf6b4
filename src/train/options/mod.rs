//! [`TrainOptions`]: training's options as a user gives them (the CLI's `train` flags, the
//! Python package's keyword arguments), with their defaults, their ranges, the checks of
//! options that do not fit together and the [`TrainConfig`] they make. One place for both
//! front ends, so that the same options give the same configuration, and so the same bits.

use crate::graph::Norm;
use crate::nn::arch::{MAX_HIDDEN, MAX_K, MAX_LAYERS};
use crate::nn::{Arch, ModelConfig, NormKind, Order};
use crate::order::Reorder;
use crate::sample::BatchConfig;

use super::recipe;
use super::run::{Prepare, RowNorm};
use super::{OptimizerKind, StopRule, TrainConfig};

mod batch;

pub use batch::{BatchKind, BatchOptions, EvalKind};

/// Most seeds of one run.
pub const MAX_SEEDS: usize = 10_000;
/// Most epochs (and patience) of one run.
pub const MAX_EPOCHS: usize = 1_000_000;
/// Most worker threads.
pub const MAX_THREADS: usize = 1024;
/// The largest first seed: seeds are JSON numbers, exact below 2⁵³.
pub const MAX_SEED: u64 = (1 << 53) - 1 - MAX_SEEDS as u64;

/// The hyperparameters a run starts from, before the options given override them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Recipe {
    /// Kipf & Welling's training (hidden 16, dropout 0.5, lr 0.01, weight decay 5e-4 on the
    /// first layer, 200 epochs, Kipf's stop rule) for any model ([`recipe::default`]).
    #[default]
    Default,
    /// The model's published hyperparameters ([`recipe::paper`]).
    Paper,
}

/// The early-stopping rule by name (its window or patience apart: [`TrainOptions::patience`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopKind {
    /// Stop when the validation loss exceeds the mean of the previous window (Kipf).
    Kipf,
    /// Stop after `patience` epochs without a lower validation loss; restore the best weights.
    Patience,
    /// Run every epoch.
    Never,
}

/// Which layers get weight decay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecayScope {
    /// The first layer (the stem) only (Kipf & Welling).
    First,
    /// Every layer but the normalisation layers.
    All,
}

/// How an option is named in a message: as the CLI's flag or as a keyword argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Names {
    /// `--weight-decay`.
    Flags,
    /// `weight_decay`.
    Keywords,
}

impl Names {
    /// `key` (snake case) as this front end names it.
    pub fn of(self, key: &str) -> String {
        match self {
            Names::Flags => format!("--{}", key.replace('_', "-")),
            Names::Keywords => key.to_string(),
        }
    }
}

/// An option out of its range, or options that do not fit together: the option to blame (its
/// key in snake case: `weight_decay`; `None` when the model's rules refuse the options
/// together) and why, naming any other option as `names` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionError {
    /// The option's key.
    pub option: Option<&'static str>,
    /// The value refused, when the message names it.
    pub value: Option<String>,
    /// Why it is refused.
    pub why: String,
}

impl OptionError {
    pub(crate) fn of(option: &'static str, why: String) -> Self {
        OptionError {
            option: Some(option),
            value: None,
            why,
        }
    }

    pub(crate) fn at(option: &'static str, value: impl ToString, why: String) -> Self {
        OptionError {
            option: Some(option),
            value: Some(value.to_string()),
            why,
        }
    }

    /// The message, the option named as `names` says: `--k: sgc has no …`, `--layers 1: …`.
    pub fn message(&self, names: Names) -> String {
        match (self.option, &self.value) {
            (Some(o), Some(v)) => format!("{} {v}: {}", names.of(o), self.why),
            (Some(o), None) => format!("{}: {}", names.of(o), self.why),
            (None, _) => self.why.clone(),
        }
    }
}

/// Training's options as given (`None`: not given, the recipe's or the default value). Each
/// field is the CLI flag of the same name (`weight_decay` is `--weight-decay`); the default is
/// the CLI's: Kipf's gcn with the default recipe, nodes reordered `auto`.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainOptions {
    /// The model.
    pub model: Arch,
    /// The recipe the other options override.
    pub recipe: Recipe,
    /// Graph convolutions (default: 2; gcnii's paper recipe: 64), at most [`MAX_LAYERS`].
    pub layers: Option<usize>,
    /// Hidden width (default: 16), at most [`MAX_HIDDEN`].
    pub hidden: Option<usize>,
    /// Dropout on the input and between layers, from 0 up to (not including) 1 (default: 0.5).
    pub dropout: Option<f64>,
    /// Learning rate, > 0 (default: 0.01).
    pub lr: Option<f64>,
    /// L2 weight decay, ≥ 0 (default: 5e-4).
    pub weight_decay: Option<f64>,
    /// Which layers get weight decay (default: first).
    pub weight_decay_scope: Option<DecayScope>,
    /// Most epochs, at most [`MAX_EPOCHS`] (default: 200).
    pub epochs: Option<usize>,
    /// Early stopping (default: kipf for Kipf's 2-layer gcn, patience for the others).
    pub stop: Option<StopKind>,
    /// Window (kipf) or patience (patience) of the stop rule [10; 100 for the patience rule
    /// of the deep or non-Kipf models' defaults].
    pub patience: Option<usize>,
    /// Evaluation order of Â·H·W in the GCN convolutions (default: auto).
    pub order: Option<Order>,
    /// Optimiser (default: adam).
    pub optimizer: Option<OptimizerKind>,
    /// Normalisation after each hidden convolution (gcn, residual, jk) (default: none).
    pub norm_layer: Option<NormKind>,
    /// DropEdge rate of the training passes, from 0 up to (not including) 1 (default: 0, off).
    pub drop_edge: Option<f64>,
    /// Keep every K-th hidden block's input and recompute the others in backward (default: 0,
    /// off).
    pub checkpoint_every: Option<usize>,
    /// GCNII's α and APPNP's α, from 0 to 1 (default: 0.1).
    pub alpha: Option<f64>,
    /// GCNII's λ, > 0 (default: 0.5).
    pub lambda: Option<f64>,
    /// Propagation steps of SGC (default: 2) and APPNP (default: 10), at most [`MAX_K`].
    pub k: Option<usize>,
    /// A bias in every graph convolution.
    pub bias: bool,
    /// Epochs left out of the timing medians (default: 5, or half of the epochs when fewer
    /// than 10).
    pub warmup: Option<usize>,
    /// Adjacency normalisation (default: symmetric).
    pub norm: Norm,
    /// Row normalisation of the input features (default: auto).
    pub row_norm: RowNorm,
    /// Relabelling of the nodes after loading (default: auto).
    pub reorder: Reorder,
    /// The batches (default: full batch) and where validation and test run.
    pub batches: BatchOptions,
}

impl Default for TrainOptions {
    fn default() -> Self {
        TrainOptions {
            model: Arch::GCN,
            recipe: Recipe::Default,
            layers: None,
            hidden: None,
            dropout: None,
            lr: None,
            weight_decay: None,
            weight_decay_scope: None,
            epochs: None,
            stop: None,
            patience: None,
            order: None,
            optimizer: None,
            norm_layer: None,
            drop_edge: None,
            checkpoint_every: None,
            alpha: None,
            lambda: None,
            k: None,
            bias: false,
            warmup: None,
            norm: Norm::Symmetric,
            row_norm: RowNorm::Auto,
            reorder: Reorder::Auto,
            batches: BatchOptions::default(),
        }
    }
}

/// The warm-up epochs left out of the timing medians when none is given: 5, or half of the
/// `epochs` when fewer than 10 (so that a short run is timed too).
pub fn default_warmup(epochs: usize) -> usize {
    5.min(epochs / 2)
}

impl TrainOptions {
    /// The training configuration: the recipe, then every option given.
    pub fn config(&self) -> TrainConfig {
        let arch = self.model;
        let mut cfg = match self.recipe {
            Recipe::Paper => {
                let deep = matches!(arch, Arch::Gcnii(_));
                recipe::paper(arch, self.layers.unwrap_or(if deep { 64 } else { 2 }))
            }
            Recipe::Default => recipe::default(arch, self.layers.unwrap_or(2)),
        };
        let m = &mut cfg.model;
        if let Some(l) = self.layers {
            m.n_layers = l;
        }
        if let Some(h) = self.hidden {
            m.hidden_dim = h;
        }
        if let Some(p) = self.dropout {
            m.dropout = p;
            m.input_dropout = p;
        }
        if let Some(n) = self.norm_layer {
            m.norm = n;
        }
        if let Some(p) = self.drop_edge {
            m.drop_edge = p;
        }
        if let Some(k) = self.checkpoint_every {
            m.checkpoint = k;
        }
        // The architecture's own settings (`check` refuses an option the model has no
        // setting for, and a value out of its range).
        for (key, v) in self.settings() {
            if let Some(v) = v {
                let _ = m.arch.set(key, v);
            }
        }
        m.bias |= self.bias;
        m.order = self.order.unwrap_or(Order::Auto);
        if let Some(lr) = self.lr {
            cfg.lr = lr;
        }
        match (self.weight_decay, self.weight_decay_scope) {
            (None, None) => {}
            (wd, scope) => {
                let wd = wd.unwrap_or(5e-4);
                cfg.weight_decay = match scope.unwrap_or(DecayScope::First) {
                    DecayScope::First => vec![wd],
                    DecayScope::All => vec![wd; 3],
                };
            }
        }
        if let Some(e) = self.epochs {
            cfg.epochs = e;
        }
        cfg.stop = match (self.stop, self.patience, cfg.stop) {
            (Some(StopKind::Kipf), p, _) => StopRule::Kipf {
                window: p.unwrap_or(10),
            },
            (Some(StopKind::Patience), p, _) => StopRule::Patience {
                patience: p.unwrap_or(10),
            },
            (Some(StopKind::Never), _, _) => StopRule::Never,
            (None, Some(p), StopRule::Kipf { .. }) => StopRule::Kipf { window: p },
            (None, Some(p), StopRule::Patience { .. }) => StopRule::Patience { patience: p },
            (None, _, rule) => rule,
        };
        cfg.optimizer = self.optimizer.unwrap_or(OptimizerKind::Adam);
        cfg.warmup = self.warmup.unwrap_or(default_warmup(cfg.epochs));
        let b = &self.batches;
        cfg.batch = b.config(cfg.model.n_layers);
        cfg.eval_batches = b.eval == Some(EvalKind::Batch);
        cfg.batches_per_step = b.batches_per_step.unwrap_or(1);
        cfg
    }

    /// How the data is prepared for a run of `cfg` (node order, feature and Â normalisation;
    /// the graph kept for DropEdge and the samplers).
    pub fn prepare(&self, cfg: &TrainConfig) -> Prepare {
        Prepare {
            reorder: self.reorder,
            row_norm: self.row_norm,
            norm: self.norm,
            keep_graph: cfg.model.drop_edge > 0.0 || cfg.batch != BatchConfig::Full,
            // Mini-batches evaluated over their batches never read the whole Â.
            whole_adj: cfg.batch == BatchConfig::Full || !cfg.eval_batches,
            diag_lambda: match cfg.batch {
                BatchConfig::Cluster { diag_lambda, .. } => diag_lambda,
                _ => 0.0,
            },
        }
    }

    fn settings(&self) -> [(&'static str, Option<f64>); 3] {
        [
            ("alpha", self.alpha),
            ("lambda", self.lambda),
            ("k", self.k.map(|k| k as f64)),
        ]
    }

    /// Checks every value against its range (what the CLI's parsers check as they read a
    /// flag; a library or Python caller's values are checked here).
    ///
    /// # Errors
    /// The first option out of its range.
    pub fn check_ranges(&self) -> Result<(), OptionError> {
        let bad = |option, why: String| Err(OptionError::of(option, why));
        let counts = [
            ("layers", self.layers, 1, MAX_LAYERS),
            ("hidden", self.hidden, 1, MAX_HIDDEN),
            ("epochs", self.epochs, 1, MAX_EPOCHS),
            ("patience", self.patience, 1, MAX_EPOCHS),
            ("k", self.k, 1, MAX_K),
            ("warmup", self.warmup, 0, MAX_EPOCHS),
            ("checkpoint_every", self.checkpoint_every, 0, MAX_LAYERS),
        ];
        for (option, v, lo, hi) in counts {
            if let Some(v) = v.filter(|v| !(lo..=hi).contains(v)) {
                return bad(option, format!("{v} must lie in {lo}..={hi}"));
            }
        }
        let reals = [
            ("dropout", self.dropout, "[0, 1)", 0.0, false, 1.0, true),
            ("drop_edge", self.drop_edge, "[0, 1)", 0.0, false, 1.0, true),
            ("alpha", self.alpha, "[0, 1]", 0.0, false, 1.0, false),
            ("lr", self.lr, "> 0", 0.0, true, f64::INFINITY, true),
            ("lambda", self.lambda, "> 0", 0.0, true, f64::INFINITY, true),
            (
                "weight_decay",
                self.weight_decay,
                ">= 0",
                0.0,
                false,
                f64::INFINITY,
                true,
            ),
        ];
        for (option, v, rule, lo, lo_open, hi, hi_open) in reals {
            let Some(v) = v else { continue };
            let above = if lo_open { v > lo } else { v >= lo };
            let below = if hi_open { v < hi } else { v <= hi };
            if !(v.is_finite() && above && below) {
                return bad(option, format!("{v} must be finite and {rule}"));
            }
        }
        Ok(())
    }

    /// Checks the options together, before any data is read: a value out of its range
    /// ([`TrainOptions::check_ranges`]), an option the chosen model would not use (it would be
    /// accepted and echoed while doing nothing), options that contradict each other, a model
    /// that cannot be built.
    ///
    /// # Errors
    /// The first option to blame, saying why (other options named as `names` says).
    pub fn check(&self, names: Names) -> Result<(), OptionError> {
        self.check_ranges()?;
        self.batches.check_ranges()?;
        let cfg = self.config();
        self.batches.check(&cfg, self.norm == Norm::Row, names)?;
        self.check_model_options(&cfg, names)?;
        let m = &cfg.model;
        if m.arch == Arch::RESIDUAL && m.n_layers < 2 {
            return Err(OptionError::at(
                "layers",
                m.n_layers,
                "residual needs at least 2 layers".into(),
            ));
        }
        let placeholder = ModelConfig {
            in_dim: 1,
            out_dim: 2,
            ..m.clone()
        };
        placeholder
            .check()
            .and_then(|()| cfg.check_optim())
            .map_err(|e| OptionError {
                option: None,
                value: None,
                why: format!("the options do not fit together: {e}"),
            })
    }

    /// An option given that the chosen model would not use, saying why.
    fn check_model_options(&self, cfg: &TrainConfig, names: Names) -> Result<(), OptionError> {
        let m = &cfg.model;
        let arch = m.arch;
        let uses = arch.uses();
        let gcn_convs = uses.gcn_convs;
        let no = |option, why: String| Err(OptionError::of(option, why));
        for (option, given, why) in [
            ("layers", self.layers.is_some(), uses.layers),
            ("hidden", self.hidden.is_some(), uses.hidden),
            ("dropout", self.dropout.is_some(), uses.dropout),
        ] {
            if let (true, Some(why)) = (given, why) {
                return no(option, why.into());
            }
        }
        if let Some(n) = self.norm_layer.filter(|&n| n != NormKind::None) {
            if !gcn_convs {
                return no(
                    "norm_layer",
                    format!(
                        "normalisation follows the hidden GCN convolutions of gcn, residual and \
                         jk models; {arch} has none"
                    ),
                );
            }
            if arch == Arch::GCN && m.n_layers < 2 {
                return no(
                    "norm_layer",
                    format!("a 1-layer gcn has no hidden convolution to normalise ({n})"),
                );
            }
        }
        if self.bias && !gcn_convs {
            return no(
                "bias",
                format!(
                    "{arch} has no GCN convolutions to give a bias (its Linear layers always have \
                     one)"
                ),
            );
        }
        if !gcn_convs && !matches!(self.order, None | Some(Order::Auto)) {
            return no(
                "order",
                format!("{arch} has no GCN convolutions whose evaluation order to choose"),
            );
        }
        self.check_settings(arch)?;
        if self.checkpoint_every.is_some_and(|k| k > 0) {
            if m.n_hidden() == 0 {
                return no(
                    "checkpoint_every",
                    format!("this {arch} model has no hidden blocks to recompute"),
                );
            }
            if arch == Arch::GCN && m.norm == NormKind::None {
                return no(
                    "checkpoint_every",
                    format!(
                        "a gcn without {} keeps only ReLU·dropout codes (2 bits a value) between \
                         its convolutions: recomputing them would free nothing ({} lean needs \
                         less memory)",
                        names.of("norm_layer"),
                        names.of("order")
                    ),
                );
            }
        }
        if self.patience.is_some() && cfg.stop == StopRule::Never {
            let stop = names.of("stop");
            return no(
                "patience",
                format!(
                    "the stop rule is never ({stop} never, or the recipe's): it has no window \
                     or patience; give {stop} kipf or {stop} patience"
                ),
            );
        }
        if self.weight_decay_scope.is_some() && self.weight_decay == Some(0.0) {
            return no(
                "weight_decay_scope",
                format!("{} 0 decays nothing", names.of("weight_decay")),
            );
        }
        Ok(())
    }

    /// A setting given (α, λ, K) that the architecture does not have.
    fn check_settings(&self, arch: Arch) -> Result<(), OptionError> {
        let settings: Vec<&str> = arch.settings().into_iter().map(|(k, _)| k).collect();
        for (key, v) in self.settings() {
            if v.is_none() || settings.contains(&key) {
                continue;
            }
            let have = if settings.is_empty() {
                "none".to_string()
            } else {
                settings.join(", ")
            };
            let has_it: Vec<&str> = Arch::all()
                .into_iter()
                .filter(|a| a.settings().iter().any(|(k, _)| *k == key))
                .map(|a| a.name())
                .collect();
            let verb = if has_it.len() == 1 {
                "has one"
            } else {
                "have one"
            };
            return Err(OptionError::of(
                key,
                format!(
                    "{arch} has no setting {key} (its own settings: {have}); {} {verb}",
                    has_it.join(" and ")
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::BatchConfig;

    #[test]
    fn defaults_are_the_recipes() {
        let o = TrainOptions::default();
        let mut want = recipe::default(Arch::GCN, 2);
        want.warmup = 5;
        assert_eq!(o.config(), want);
        let o = TrainOptions {
            model: Arch::named("gcnii").unwrap(),
            recipe: Recipe::Paper,
            ..TrainOptions::default()
        };
        assert_eq!(o.config().model.n_layers, 64);
        assert_eq!(o.config(), {
            let mut c = recipe::paper(o.model, 64);
            c.warmup = default_warmup(c.epochs);
            c
        });
    }

    #[test]
    fn options_override_the_recipe() {
        let o = TrainOptions {
            hidden: Some(64),
            dropout: Some(0.25),
            lr: Some(0.05),
            weight_decay: Some(1e-3),
            weight_decay_scope: Some(DecayScope::All),
            epochs: Some(7),
            stop: Some(StopKind::Patience),
            patience: Some(4),
            optimizer: Some(OptimizerKind::Sgd),
            ..TrainOptions::default()
        };
        let c = o.config();
        assert_eq!(c.model.hidden_dim, 64);
        assert_eq!((c.model.dropout, c.model.input_dropout), (0.25, 0.25));
        assert_eq!(c.lr, 0.05);
        assert_eq!(c.weight_decay, vec![1e-3; 3]);
        assert_eq!(c.epochs, 7);
        assert_eq!(c.warmup, 3);
        assert_eq!(c.stop, StopRule::Patience { patience: 4 });
        assert_eq!(c.optimizer, OptimizerKind::Sgd);
        let k = TrainOptions {
            model: Arch::named("sgc").unwrap(),
            k: Some(3),
            ..TrainOptions::default()
        };
        assert_eq!(k.config().model.arch.settings(), vec![("k", 3.0)]);
    }

    #[test]
    fn batch_options_make_the_batches_and_name_misfits() {
        let cluster = |b: BatchOptions| TrainOptions {
            batches: b,
            ..TrainOptions::default()
        };
        let o = cluster(BatchOptions {
            batch: BatchKind::Cluster,
            parts: Some(20),
            eval: Some(EvalKind::Batch),
            batches_per_step: Some(2),
            ..BatchOptions::default()
        });
        let c = o.config();
        assert!(matches!(
            c.batch,
            BatchConfig::Cluster {
                parts: 20,
                per_batch: 10,
                ..
            }
        ));
        assert!(c.eval_batches && c.batches_per_step == 2);
        assert!(o.prepare(&c).keep_graph && !o.prepare(&c).whole_adj);
        o.check(Names::Keywords).unwrap();
        let n = cluster(BatchOptions {
            batch: BatchKind::named("NEIGHBOR").unwrap(),
            ..BatchOptions::default()
        });
        assert!(matches!(
            n.config().batch,
            BatchConfig::Neighbor {
                batch_size: 1024,
                ..
            }
        ));
        let cases = [
            (
                BatchOptions {
                    parts: Some(3),
                    ..BatchOptions::default()
                },
                "parts",
            ),
            (
                BatchOptions {
                    batch: BatchKind::SaintRw,
                    eval: Some(EvalKind::Batch),
                    ..BatchOptions::default()
                },
                "eval",
            ),
            (
                BatchOptions {
                    batch: BatchKind::Neighbor,
                    fanout: Some(vec![5]),
                    ..BatchOptions::default()
                },
                "fanout",
            ),
            (
                BatchOptions {
                    batch: BatchKind::Cluster,
                    parts: Some(4),
                    parts_per_batch: Some(5),
                    ..BatchOptions::default()
                },
                "parts_per_batch",
            ),
            (
                BatchOptions {
                    batches_per_step: Some(2),
                    ..BatchOptions::default()
                },
                "batches_per_step",
            ),
        ];
        for (b, option) in cases {
            let e = cluster(b).check(Names::Keywords).unwrap_err();
            assert_eq!(e.option, Some(option), "{e:?}");
        }
        let e = cluster(BatchOptions {
            batch: BatchKind::SaintNode,
            eval: Some(EvalKind::Batch),
            ..BatchOptions::default()
        })
        .check(Names::Flags)
        .unwrap_err();
        let msg = e.message(Names::Flags);
        assert!(
            msg.starts_with("--eval batch: only with --batch cluster"),
            "{msg}"
        );
    }

    #[test]
    fn ranges_and_misfits_name_the_option() {
        let cases = [
            (
                TrainOptions {
                    dropout: Some(1.0),
                    ..TrainOptions::default()
                },
                "dropout",
            ),
            (
                TrainOptions {
                    lr: Some(0.0),
                    ..TrainOptions::default()
                },
                "lr",
            ),
            (
                TrainOptions {
                    layers: Some(MAX_LAYERS + 1),
                    ..TrainOptions::default()
                },
                "layers",
            ),
            (
                TrainOptions {
                    k: Some(2),
                    ..TrainOptions::default()
                },
                "k",
            ),
            (
                TrainOptions {
                    weight_decay: Some(0.0),
                    weight_decay_scope: Some(DecayScope::All),
                    ..TrainOptions::default()
                },
                "weight_decay_scope",
            ),
            (
                TrainOptions {
                    stop: Some(StopKind::Never),
                    patience: Some(3),
                    ..TrainOptions::default()
                },
                "patience",
            ),
        ];
        for (o, option) in cases {
            let e = o.check(Names::Keywords).unwrap_err();
            assert_eq!(e.option, Some(option), "{e:?}");
        }
        let e = TrainOptions {
            stop: Some(StopKind::Never),
            patience: Some(3),
            ..TrainOptions::default()
        }
        .check(Names::Flags)
        .unwrap_err();
        assert!(e.message(Names::Flags).starts_with("--patience: "));
        assert!(e.why.contains("--stop kipf"), "{}", e.why);
        assert!(TrainOptions::default().check(Names::Keywords).is_ok());
    }
}
