//! [`ModelConfig`]: every architecture of the engine, and [`ModelConfig::build`], the one place a
//! configuration becomes the [`Model`] stack's nodes.
//!
//! # Architectures (`n_layers` = L)
//! | [`Arch`] | nodes | paper |
//! |---|---|---|
//! | `gcn` | [GCN → N → ReLU·drop] × (L−1) → GCN | Kipf & Welling, ICLR 2017 |
//! | `residual` | [GCN → N → ReLU → + skip → drop] × (L−1) → GCN | ResGCN (DropEdge's study) |
//! | `gcnii` | drop → Lin → ReLU = H₀; [drop → GCNII(·, H₀) → ReLU] × L → drop → Lin | Chen et al., ICML 2020 |
//! | `jk-cat`, `jk-max`, `jk-att` | [GCN → N → ReLU (→ drop)] × L → JK → drop → Lin | Xu et al., ICML 2018 |
//! | `sgc` | Â^K X (computed once) → Lin | Wu et al., ICML 2019 |
//! | `appnp` | drop → Lin → ReLU·drop → Lin → K × (Z ← (1−α)ÂZ + αH) | Klicpera et al., ICLR 2019 |
//!
//! N is the optional normalisation ([`NormKind`]); every convolution's input is dropped
//! (`input_dropout` on X, `dropout` elsewhere). The residual skip is the identity when the widths
//! match and a learned projection X·P of the undropped features otherwise.
//!
//! # An architecture is one file and one line
//! Each architecture is a type implementing [`Architecture`], in the file of its layers, holding
//! its own settings (GCNII's α and λ in [`GcniiConfig`], SGC's K in [`SgcConfig`], APPNP's K and
//! α in [`AppnpConfig`]; none for GCN and the residual GCN): its names, which of the common
//! settings apply to it, and how it pushes its nodes into a [`Builder`]. The `architectures!`
//! list below is its one registration line: [`Arch`] (the CLI's `--model` list, checkpoints'
//! `model`) and the dispatch to each type come from it.
//!
//! # Parameter groups (for per-group weight decay)
//! 0: the stem (the first convolution, GCNII's and APPNP's input Linear, SGC's Linear, the
//! residual projection); 1: the hidden convolutions; 2: the head (the last convolution or the
//! head Linear, JK's attention); 3: normalisation parameters. Kipf's weight decay `[5e-4]`
//! decays group 0 only; GCNII's `[5e-4, 0.01, 5e-4]` decays its convolutions by 0.01 and its
//! Linear layers by 5e-4.
//!
//! # Dropout streams
//! The Kipf GCN ([`ModelConfig::default`]) draws its masks in forward order from one stream
//! ([`MaskStreams::Shared`]); the deep configurations ([`ModelConfig::deep`]) give each dropout
//! site its own stream ([`MaskStreams::PerLayer`]): site 0 the input of GCNII's stem, site l + 1
//! the input of hidden block l (the input dropout for l = 0), site L′ + 1 the head's input
//! (L′ hidden blocks).
//!
//! [`GcniiConfig`]: crate::nn::gcnii::GcniiConfig
//! [`SgcConfig`]: crate::nn::sgc::SgcConfig
//! [`AppnpConfig`]: crate::nn::appnp::AppnpConfig

mod builder;

use std::fmt;

use rand::Rng;

pub(crate) use builder::prev_node;
pub use builder::Builder;

use super::attrs::Registry;
use super::gcn_conv::Order;
use super::pair_norm::PairNormMode;
use super::stack::{Checkpointing, MaskStreams, Model, StackOptions, Wiring};
use crate::graph::Propagate;
use crate::input::Features;
use crate::{ConfigError, Scalar};

/// Most graph convolutions (`n_layers`) a configuration takes: the deepest published GCN studies
/// (GCNII, DropEdge) go to 64–128 layers; planning and training time grow with the depth.
pub const MAX_LAYERS: usize = 1024;
/// The widest hidden layer (`hidden_dim`) a configuration takes.
pub const MAX_HIDDEN: usize = 1 << 16;
/// Most propagation steps (SGC's and APPNP's K): SGC uses 2, APPNP 10; each step is one SpMM of
/// every pass.
pub const MAX_K: usize = 1024;

/// Which of [`ModelConfig`]'s common settings an architecture uses, and why not when it does not
/// (the CLI refuses a flag the model would ignore, with the reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Uses {
    /// Fewest `n_layers` it takes.
    pub min_layers: usize,
    /// Why `n_layers` does not apply (`None`: it counts the model's graph convolutions).
    pub layers: Option<&'static str>,
    /// Why `hidden_dim` does not apply.
    pub hidden: Option<&'static str>,
    /// Why `dropout` and `input_dropout` do not apply.
    pub dropout: Option<&'static str>,
    /// It has GCN convolutions (a bias and an evaluation order to choose, a normalisation after
    /// the hidden ones).
    pub gcn_convs: bool,
}

impl Uses {
    /// Every common setting, at least one layer, GCN convolutions.
    pub const GCN: Uses = Uses {
        min_layers: 1,
        layers: None,
        hidden: None,
        dropout: None,
        gcn_convs: true,
    };
}

/// What an architecture's [`Architecture::build`] returns besides its nodes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Built {
    /// The dropout stream of the input dropout (under [`MaskStreams::PerLayer`]).
    pub input_site: u64,
    /// Nodes whose outputs are the model's layer representations, in order.
    pub taps: Vec<usize>,
    /// The model reads the raw features only (SGC): no input dropout to draw.
    pub no_input_dropout: bool,
}

/// An architecture: its names, its own settings, and how it becomes a stack (see the
/// [module docs](self)).
pub trait Architecture: Copy + PartialEq + fmt::Debug + Send + Sync + 'static {
    /// Its names (the CLI's `--model`, a checkpoint's `model`) with the value each names, in the
    /// order of the CLI's list; a value's name is the first one naming it.
    const NAMES: &'static [(&'static str, Self)];

    /// Other names it is known by.
    const ALIASES: &'static [(&'static str, Self)] = &[];

    /// What it is, in one line, with its paper.
    const SUMMARY: &'static str;

    /// Its own settings (name, value) in a fixed order: what a checkpoint records and `--json`
    /// prints.
    fn settings(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }

    /// Sets setting `key` to `value`: `Ok(false)` when it has no such setting.
    ///
    /// # Errors
    /// A value outside the setting's range.
    fn set(&mut self, _key: &str, _value: f64) -> Result<bool, ConfigError> {
        Ok(false)
    }

    /// Checks its settings.
    ///
    /// # Errors
    /// The first rule broken.
    fn check(&self) -> Result<(), ConfigError> {
        Ok(())
    }

    /// Which common settings it uses.
    fn uses(&self) -> Uses {
        Uses::GCN
    }

    /// Its hidden blocks at `n_layers` (the blocks checkpointing can recompute).
    fn n_hidden(&self, n_layers: usize) -> usize;

    /// Registers the layers it brings, under their names ([`Registry::builtin`]: what a
    /// checkpoint of a hand-built stack can be made of). A layer several architectures use is
    /// registered by the first that brings it ([`Gcn`](crate::nn::gcn_conv::Gcn) for the
    /// convolution, Linear, ReLU/dropout and the normalisations).
    fn register_layers<F: Scalar>(_registry: &mut Registry<F>) {}

    /// Its parameters and statistics for `cfg`, from the configuration alone (before anything
    /// is allocated; an upper bound where the model depends on the data). Saturates.
    fn param_count(&self, cfg: &ModelConfig) -> u64;

    /// Pushes its nodes for `cfg` into `b`, drawing every weight from `rng`.
    fn build<F: Scalar, R: Rng + ?Sized>(
        &self,
        cfg: &ModelConfig,
        b: &mut Builder<'_, F>,
        rng: &mut R,
    ) -> Built;
}

/// The name of `a`: the first of its type's names that names it.
fn name_of<A: Architecture>(a: &A) -> &'static str {
    A::NAMES
        .iter()
        .find(|(_, v)| v == a)
        .or_else(|| A::NAMES.first())
        .map_or("?", |(n, _)| *n)
}

/// Declares [`Arch`], one variant per architecture type, and the dispatch to each.
macro_rules! architectures {
    ($($(#[$doc:meta])* $v:ident($t:ty),)*) => {
        /// The architecture, with its own settings (see the [module docs](self)).
        #[derive(Debug, Clone, Copy, PartialEq)]
        pub enum Arch {
            $($(#[$doc])* $v($t),)*
        }

        impl Arch {
            /// Every architecture under each of its names, with its default settings, in the
            /// order of the CLI's `--model` list.
            pub fn all() -> Vec<Arch> {
                let mut v = Vec::new();
                $(v.extend(<$t as Architecture>::NAMES.iter().map(|&(_, a)| Arch::$v(a)));)*
                v
            }

            /// The architecture named `s` (a name or an alias, in any case: `GCN` is `gcn`),
            /// with its default settings.
            pub fn named(s: &str) -> Option<Arch> {
                $(
                    let found = <$t as Architecture>::NAMES
                        .iter()
                        .chain(<$t as Architecture>::ALIASES)
                        .find(|(n, _)| n.eq_ignore_ascii_case(s));
                    if let Some(&(_, a)) = found {
                        return Some(Arch::$v(a));
                    }
                )*
                None
            }

            /// The name the CLI, the JSON output and checkpoints spell.
            pub fn name(&self) -> &'static str {
                match self { $(Arch::$v(a) => name_of(a),)* }
            }

            /// What it is, in one line.
            pub fn summary(&self) -> &'static str {
                match self { $(Arch::$v(_) => <$t as Architecture>::SUMMARY,)* }
            }

            /// Its own settings ([`Architecture::settings`]).
            pub fn settings(&self) -> Vec<(&'static str, f64)> {
                match self { $(Arch::$v(a) => a.settings(),)* }
            }

            /// Sets one of its settings ([`Architecture::set`]).
            ///
            /// # Errors
            /// A value outside the setting's range.
            pub fn set(&mut self, key: &str, value: f64) -> Result<bool, ConfigError> {
                match self { $(Arch::$v(a) => a.set(key, value),)* }
            }

            /// Checks its settings ([`Architecture::check`]).
            ///
            /// # Errors
            /// The first rule broken.
            pub fn check(&self) -> Result<(), ConfigError> {
                match self { $(Arch::$v(a) => a.check(),)* }
            }

            /// Which common settings it uses ([`Architecture::uses`]).
            pub fn uses(&self) -> Uses {
                match self { $(Arch::$v(a) => a.uses(),)* }
            }

            /// Its hidden blocks at `n_layers` ([`Architecture::n_hidden`]).
            pub fn n_hidden(&self, n_layers: usize) -> usize {
                match self { $(Arch::$v(a) => a.n_hidden(n_layers),)* }
            }

            /// Its parameters and statistics for `cfg` ([`Architecture::param_count`]).
            pub fn param_count(&self, cfg: &ModelConfig) -> u64 {
                match self { $(Arch::$v(a) => a.param_count(cfg),)* }
            }

            /// Registers every architecture's layers ([`Architecture::register_layers`]).
            pub(crate) fn register_layers<F: Scalar>(registry: &mut Registry<F>) {
                $(<$t as Architecture>::register_layers(registry);)*
            }

            /// Pushes its nodes ([`Architecture::build`]).
            fn build<F: Scalar, R: Rng + ?Sized>(
                &self,
                cfg: &ModelConfig,
                b: &mut Builder<'_, F>,
                rng: &mut R,
            ) -> Built {
                match self { $(Arch::$v(a) => a.build(cfg, b, rng),)* }
            }
        }
    };
}

architectures! {
    /// A plain GCN stack (Kipf & Welling).
    Gcn(crate::nn::gcn_conv::Gcn),
    /// Residual connections around every hidden layer (ResGCN, as in DropEdge's study).
    Residual(crate::nn::add::Residual),
    /// GCNII: initial residual and identity mapping (Chen et al., ICML 2020).
    Gcnii(crate::nn::gcnii::GcniiConfig),
    /// Jumping knowledge over every layer's output (Xu et al., ICML 2018), then a Linear head.
    Jk(crate::nn::jk::JkMode),
    /// SGC: Â^K X W (Wu et al., ICML 2019).
    Sgc(crate::nn::sgc::SgcConfig),
    /// APPNP: an MLP, then personalised-PageRank propagation (Klicpera et al., ICLR 2019).
    Appnp(crate::nn::appnp::AppnpConfig),
}

impl Arch {
    /// Kipf & Welling's GCN.
    pub const GCN: Arch = Arch::Gcn(crate::nn::gcn_conv::Gcn);
    /// The residual GCN.
    pub const RESIDUAL: Arch = Arch::Residual(crate::nn::add::Residual);
    /// GCNII with the paper's α and λ.
    pub const GCNII: Arch = Arch::Gcnii(crate::nn::gcnii::GcniiConfig::PAPER);
    /// SGC with the paper's K = 2.
    pub const SGC: Arch = Arch::Sgc(crate::nn::sgc::SgcConfig { k: 2 });
    /// APPNP with the paper's K = 10 and α = 0.1.
    pub const APPNP: Arch = Arch::Appnp(crate::nn::appnp::AppnpConfig::PAPER);

    /// The deep variants of the depth study: gcn, residual, gcnii and the three JK models.
    pub fn deep() -> Vec<Arch> {
        Arch::all()
            .into_iter()
            .filter(|a| !matches!(a, Arch::Sgc(_) | Arch::Appnp(_)))
            .collect()
    }

    /// Every name the CLI's `--model` takes, in order.
    pub fn names() -> Vec<&'static str> {
        Arch::all().iter().map(Arch::name).collect()
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Arch {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Arch::named(s).ok_or_else(|| ConfigError::UnknownName {
            what: "model",
            got: s.to_string(),
            expected: Arch::names().join(", "),
        })
    }
}

/// Normalisation after each hidden GCN convolution (before ReLU).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NormKind {
    /// None.
    #[default]
    None,
    /// BatchNorm over nodes.
    Batch,
    /// PairNorm (scale 1) in the given variant: PN, PN-SI or PN-SCS.
    Pair(PairNormMode),
}

crate::error::names!(NormKind, "normalisation", [
    NormKind::None => "none",
    NormKind::Batch => "batch",
    NormKind::Pair(PairNormMode::Pn) => "pair",
    NormKind::Pair(PairNormMode::PnSi) => "pair-si",
    NormKind::Pair(PairNormMode::PnScs) => "pair-scs",
]);

/// The configuration of a [`Model`]: the architecture with its own settings, and the settings
/// every architecture shares. [`ModelConfig::default`] is Kipf & Welling's GCN (2 layers, hidden
/// 16, dropout 0.5 on the input and between layers, no bias as in their `GraphConvolution`,
/// order chosen by the cost model); [`ModelConfig::deep`] gives the deep models' defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// The architecture, with its own settings.
    pub arch: Arch,
    /// Input width (set from the data by the trainer).
    pub in_dim: usize,
    /// Hidden width.
    pub hidden_dim: usize,
    /// Output width (classes; set from the data by the trainer).
    pub out_dim: usize,
    /// Graph convolutions (see [`Uses::min_layers`]; fixed by SGC and APPNP).
    pub n_layers: usize,
    /// Dropout before every convolution or Linear layer but the first.
    pub dropout: f64,
    /// Dropout on the input features.
    pub input_dropout: f64,
    /// Normalisation of hidden GCN layers (GCN, residual and JK only).
    pub norm: NormKind,
    /// Bias in the GCN convolutions (Linear layers always have one).
    pub bias: bool,
    /// Order of the GCN convolutions.
    pub order: Order,
    /// Activation checkpointing: keep every k-th hidden layer's input, recompute the rest in
    /// backward (0: off).
    pub checkpoint: usize,
    /// DropEdge rate of the training passes (0: off). The model needs it to know that Â
    /// changes between training passes.
    pub drop_edge: f64,
    /// How the dropout masks are drawn.
    pub mask_streams: MaskStreams,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            arch: Arch::GCN,
            in_dim: 0,
            hidden_dim: 16,
            out_dim: 0,
            n_layers: 2,
            dropout: 0.5,
            input_dropout: 0.5,
            norm: NormKind::None,
            bias: false,
            order: Order::Auto,
            checkpoint: 0,
            drop_edge: 0.0,
            mask_streams: MaskStreams::Shared,
        }
    }
}

impl ModelConfig {
    /// The deep models' defaults for `arch` at `n_layers`: hidden 64, dropout 0.5, one dropout
    /// stream per site (the architecture's own settings as given: its defaults from
    /// [`Arch::named`] are GCNII's α 0.1 and λ 0.5, SGC's K 2, APPNP's K 10 and α 0.1).
    pub fn deep(arch: Arch, n_layers: usize) -> Self {
        ModelConfig {
            arch,
            hidden_dim: 64,
            n_layers,
            mask_streams: MaskStreams::PerLayer,
            ..ModelConfig::default()
        }
    }

    /// Checks the configuration.
    ///
    /// # Errors
    /// The first rule broken.
    pub fn check(&self) -> Result<(), ConfigError> {
        self.arch.check()?;
        if self.n_layers < self.arch.uses().min_layers {
            return Err(ConfigError::NoLayers);
        }
        for (name, v) in [
            ("in_dim", self.in_dim),
            ("hidden_dim", self.hidden_dim),
            ("out_dim", self.out_dim),
        ] {
            if v == 0 {
                return Err(ConfigError::ZeroDim(name));
            }
        }
        self.check_sizes()?;
        for p in [self.dropout, self.input_dropout, self.drop_edge] {
            if !(0.0..1.0).contains(&p) {
                return Err(ConfigError::DropoutOutOfRange(p));
            }
        }
        Ok(())
    }

    /// Checks the sizes a file or a flag could make too large to plan: `n_layers` and
    /// `checkpoint` against [`MAX_LAYERS`], `hidden_dim` against [`MAX_HIDDEN`] (part of
    /// [`ModelConfig::check`]; checkpoints check them before anything else).
    ///
    /// # Errors
    /// [`ConfigError::OutOfRange`] naming the field and its limit.
    pub(crate) fn check_sizes(&self) -> Result<(), ConfigError> {
        for (name, v, max, rule) in [
            (
                "n_layers",
                self.n_layers,
                MAX_LAYERS,
                "at most 1024 (MAX_LAYERS)",
            ),
            (
                "hidden_dim",
                self.hidden_dim,
                MAX_HIDDEN,
                "at most 65536 (MAX_HIDDEN)",
            ),
            (
                "checkpoint",
                self.checkpoint,
                MAX_LAYERS,
                "at most 1024 (MAX_LAYERS)",
            ),
        ] {
            if v > max {
                return Err(ConfigError::OutOfRange {
                    name,
                    value: v as f64,
                    rule,
                });
            }
        }
        Ok(())
    }

    /// Number of weight-decay groups of every model (see the [module docs](self)).
    pub const N_GROUPS: usize = 4;

    /// Number of hidden blocks (the blocks checkpointing can drop).
    pub fn n_hidden(&self) -> usize {
        self.arch.n_hidden(self.n_layers)
    }

    /// The stack options of this configuration: Â varying between training passes under
    /// DropEdge, checkpointing every `checkpoint` hidden blocks.
    pub fn stack_options(&self) -> StackOptions {
        StackOptions {
            varying_graph: self.drop_edge > 0.0,
            checkpoint: match self.checkpoint {
                0 => Checkpointing::None,
                k => Checkpointing::Every(k),
            },
            separate_eval: false,
        }
    }

    /// Builds the model for `adj` and `x`: resolves each convolution's order (the cost model
    /// sees the graph and the input's sparsity, unless `orders` gives them, e.g. from a
    /// checkpoint) and draws every weight from `rng`.
    ///
    /// # Errors
    /// From [`ModelConfig::check`]; the lean order on a backend without products in row
    /// blocks.
    pub fn build<F: Scalar, R: Rng + ?Sized>(
        &self,
        adj: &dyn Propagate<F>,
        x: &Features<F>,
        orders: Option<&[Order]>,
        rng: &mut R,
    ) -> Result<Model<F>, ConfigError> {
        let arch = self.arch;
        self.build_with(adj, x, orders, None, &mut |cfg, b| arch.build(cfg, b, rng))
    }

    /// [`ModelConfig::build`] with the cost model seeing a graph of `whole` = (nodes, entries
    /// of Â) rather than `adj`'s, a stand-in of the input's width and kind (a run whose graph
    /// is read batch by batch, never held: the orders of the same run in memory).
    ///
    /// # Errors
    /// As [`ModelConfig::build`].
    pub fn build_shaped<F: Scalar, R: Rng + ?Sized>(
        &self,
        adj: &dyn Propagate<F>,
        x: &Features<F>,
        whole: (usize, usize),
        rng: &mut R,
    ) -> Result<Model<F>, ConfigError> {
        let arch = self.arch;
        self.build_with(adj, x, None, Some(whole), &mut |cfg, b| {
            arch.build(cfg, b, rng)
        })
    }

    /// [`ModelConfig::build`] with the nodes of `arch`, any [`Architecture`] (one of this
    /// crate's, or a crate's own), instead of `self.arch`'s; `self.arch` is what the model
    /// reports as its configuration.
    ///
    /// # Errors
    /// As [`ModelConfig::build`], and `arch`'s [`Architecture::check`].
    pub fn build_arch<A: Architecture, F: Scalar, R: Rng + ?Sized>(
        &self,
        arch: &A,
        adj: &dyn Propagate<F>,
        x: &Features<F>,
        rng: &mut R,
    ) -> Result<Model<F>, ConfigError> {
        arch.check()?;
        self.build_with(adj, x, None, None, &mut |cfg, b| arch.build(cfg, b, rng))
    }

    /// The model whose nodes `push` puts into the builder.
    fn build_with<F: Scalar>(
        &self,
        adj: &dyn Propagate<F>,
        x: &Features<F>,
        orders: Option<&[Order]>,
        whole: Option<(usize, usize)>,
        push: &mut dyn FnMut(&ModelConfig, &mut Builder<'_, F>) -> Built,
    ) -> Result<Model<F>, ConfigError> {
        self.check()?;
        let lean = self.order == Order::Lean || orders.is_some_and(|o| o.contains(&Order::Lean));
        let caps = adj.caps();
        if lean && !(caps.a_blocks && caps.at_blocks) {
            return Err(ConfigError::Unsupported {
                what: "the lean order on a backend without products in row blocks",
            });
        }
        let mut b = Builder::new(self, adj, x, orders);
        b.whole = whole;
        let built = push(self, &mut b);
        let wiring = Wiring {
            input_dropout: if built.no_input_dropout {
                0.0
            } else {
                self.input_dropout
            },
            input_site: built.input_site,
            taps: built.taps,
            streams: self.mask_streams,
            blocks: b.blocks,
        };
        let mut model = Model::from_nodes(b.nodes, wiring, self.stack_options())?;
        model.config = Some(self.clone());
        Ok(model)
    }

    /// Parameter counts of the usual blocks for [`Architecture::param_count`]: `(conv(a, b),
    /// lin(a, b), norm)`: a GCN convolution a → b (with its bias when `bias`), a Linear layer
    /// a → b with its bias, and a hidden normalisation's parameters and statistics.
    pub fn param_parts(&self) -> (impl Fn(u64, u64) -> u64, impl Fn(u64, u64) -> u64, u64) {
        let bias = self.bias;
        let conv =
            move |a: u64, b: u64| a.saturating_mul(b).saturating_add(if bias { b } else { 0 });
        let lin = |a: u64, b: u64| a.saturating_mul(b).saturating_add(b);
        // gamma, beta, running mean and variance.
        let norm = if self.norm == NormKind::Batch {
            (self.hidden_dim as u64).saturating_mul(4)
        } else {
            0
        };
        (conv, lin, norm)
    }

    /// Layer widths of the GCN and residual stacks: `[in_dim, hidden_dim, …, out_dim]`.
    pub(crate) fn widths(&self) -> Vec<usize> {
        let mut d = vec![self.in_dim];
        d.extend(std::iter::repeat_n(self.hidden_dim, self.n_layers - 1));
        d.push(self.out_dim);
        d
    }
}
