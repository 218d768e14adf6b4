//! [`ModelConfig`]: every architecture of the engine, and [`ModelConfig::build`], the one place an
//! architecture is turned into the [`Model`] stack's nodes.
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

use rand::Rng;

use super::add::Add;
use super::appnp::AppnpPropagate;
use super::batch_norm::BatchNorm;
use super::dropout::ReluDropout;
use super::gcn_conv::{choose_order, GcnConv, LayerShape, Order};
use super::gcnii::GcniiConv;
use super::jk::{JkMode, JumpingKnowledge};
use super::layer::Layer;
use super::linear::Linear;
use super::pair_norm::{PairNorm, PairNormMode};
use super::sgc::SgcPropagate;
use super::stack::{Checkpointing, MaskStreams, Model, Node, Src, StackOptions, Wiring};
use crate::graph::Propagate;
use crate::input::{Features, FeaturesRef};
use crate::{ConfigError, Scalar};

/// The architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// A plain GCN stack (Kipf & Welling).
    Gcn,
    /// Residual connections around every hidden layer (ResGCN, as in DropEdge's study).
    Residual,
    /// GCNII: initial residual and identity mapping (Chen et al., ICML 2020).
    Gcnii,
    /// Jumping knowledge over every layer's output (Xu et al., ICML 2018), then a Linear head.
    Jk(JkMode),
    /// SGC: Â^K X W (Wu et al., ICML 2019).
    Sgc,
    /// APPNP: an MLP, then personalised-PageRank propagation (Klicpera et al., ICLR 2019).
    Appnp,
}

impl Arch {
    /// Every architecture, in the order of the CLI's `--model` list.
    pub const ALL: [Arch; 8] = [
        Arch::Gcn,
        Arch::Residual,
        Arch::Gcnii,
        Arch::Jk(JkMode::Concat),
        Arch::Jk(JkMode::Max),
        Arch::Jk(JkMode::Attention),
        Arch::Sgc,
        Arch::Appnp,
    ];

    /// The deep variants of the depth study (the first six of [`Arch::ALL`]).
    pub const DEEP: [Arch; 6] = {
        let a = Arch::ALL;
        [a[0], a[1], a[2], a[3], a[4], a[5]]
    };
}

crate::error::names!(Arch, "model", [
    Arch::Gcn => "gcn",
    Arch::Residual => "residual",
    Arch::Gcnii => "gcnii",
    Arch::Jk(JkMode::Concat) => "jk-cat",
    Arch::Jk(JkMode::Max) => "jk-max",
    Arch::Jk(JkMode::Attention) => "jk-att",
    Arch::Sgc => "sgc",
    Arch::Appnp => "appnp",
], aliases [Arch::Gcn => "plain"]);

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

/// The configuration of a [`Model`]. [`ModelConfig::default`] is Kipf & Welling's GCN (2 layers,
/// hidden 16, dropout 0.5 on the input and between layers, no bias as in their
/// `GraphConvolution`, order chosen by the cost model); [`ModelConfig::deep`] gives the deep
/// models' defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// The architecture.
    pub arch: Arch,
    /// Input width (set from the data by the trainer).
    pub in_dim: usize,
    /// Hidden width.
    pub hidden_dim: usize,
    /// Output width (classes; set from the data by the trainer).
    pub out_dim: usize,
    /// Graph convolutions (≥ 1; ≥ 2 for `Residual`; the MLP depth is fixed for SGC and APPNP).
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
    /// GCNII's α (initial-residual weight) and APPNP's α (teleport probability).
    pub alpha: f64,
    /// GCNII's λ (β_l = ln(λ/l + 1)).
    pub lambda: f64,
    /// Propagation steps of SGC (K = 2) and APPNP (K = 10).
    pub k: usize,
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
            arch: Arch::Gcn,
            in_dim: 0,
            hidden_dim: 16,
            out_dim: 0,
            n_layers: 2,
            dropout: 0.5,
            input_dropout: 0.5,
            norm: NormKind::None,
            bias: false,
            order: Order::Auto,
            alpha: 0.1,
            lambda: 0.5,
            k: 2,
            checkpoint: 0,
            drop_edge: 0.0,
            mask_streams: MaskStreams::Shared,
        }
    }
}

impl ModelConfig {
    /// The deep models' defaults for `arch` at `n_layers`: hidden 64, dropout 0.5, GCNII's
    /// α 0.1 and λ 0.5, SGC's K 2, APPNP's K 10, one dropout stream per site.
    pub fn deep(arch: Arch, n_layers: usize) -> Self {
        ModelConfig {
            arch,
            hidden_dim: 64,
            n_layers,
            k: if arch == Arch::Appnp { 10 } else { 2 },
            mask_streams: MaskStreams::PerLayer,
            ..ModelConfig::default()
        }
    }

    /// Checks the configuration.
    ///
    /// # Errors
    /// The first rule broken.
    pub fn check(&self) -> Result<(), ConfigError> {
        let min_layers = match self.arch {
            Arch::Residual => 2,
            Arch::Sgc | Arch::Appnp => 0,
            _ => 1,
        };
        if self.n_layers < min_layers {
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
        for p in [self.dropout, self.input_dropout, self.drop_edge] {
            if !(0.0..1.0).contains(&p) {
                return Err(ConfigError::DropoutOutOfRange(p));
            }
        }
        if !(0.0..=1.0).contains(&self.alpha) {
            return Err(ConfigError::OutOfRange {
                name: "alpha",
                value: self.alpha,
                rule: "in [0, 1]",
            });
        }
        if !(self.lambda.is_finite() && self.lambda > 0.0) {
            return Err(ConfigError::OutOfRange {
                name: "lambda",
                value: self.lambda,
                rule: "positive",
            });
        }
        if matches!(self.arch, Arch::Sgc) && self.k == 0 {
            return Err(ConfigError::ZeroCount("k"));
        }
        Ok(())
    }

    /// Number of weight-decay groups of every model (see the [module docs](self)).
    pub const N_GROUPS: usize = 4;

    /// Number of hidden blocks (the blocks checkpointing can drop).
    pub fn n_hidden(&self) -> usize {
        match self.arch {
            Arch::Gcn | Arch::Residual => self.n_layers.saturating_sub(1),
            Arch::Gcnii | Arch::Jk(_) => self.n_layers,
            Arch::Sgc | Arch::Appnp => 0,
        }
    }

    /// Builds the model for `adj` and `x`: resolves each convolution's order (the cost model
    /// sees the graph and the input's sparsity, unless `orders` gives them, e.g. from a
    /// checkpoint) and draws every weight from `rng`.
    ///
    /// # Errors
    /// From [`ModelConfig::check`].
    pub fn build<F: Scalar, R: Rng + ?Sized>(
        &self,
        adj: &dyn Propagate<F>,
        x: &Features<F>,
        orders: Option<&[Order]>,
        rng: &mut R,
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
        let h = self.hidden_dim;
        let (input_site, taps) = match self.arch {
            Arch::Gcn => {
                // Weights drawn layer by layer.
                let dims = self.widths();
                let convs: Vec<GcnConv<F>> = (0..self.n_layers)
                    .map(|l| b.conv(l, dims[l], dims[l + 1], rng))
                    .collect();
                let mut taps = Vec::new();
                let mut prev = Src::Xd;
                let last = self.n_layers - 1;
                for (l, conv) in convs.into_iter().enumerate() {
                    let group = if l == 0 {
                        0
                    } else if l == last {
                        2
                    } else {
                        1
                    };
                    let z = b.push(conv, vec![prev], group, 0);
                    if l == last {
                        taps.push(z);
                        break;
                    }
                    b.begin_block();
                    let z = b.norm(z, h);
                    // ReLU, then the dropout of the next convolution's input (site l + 2).
                    let p = self.dropout;
                    prev = b.elem(ReluDropout::new(h, p), Src::Node(z), l as u64 + 2);
                    b.end_block(l);
                    taps.push(prev_node(prev));
                }
                (1, taps)
            }
            Arch::Residual => {
                let dims = self.widths();
                let convs: Vec<GcnConv<F>> = (0..self.n_layers)
                    .map(|l| b.conv(l, dims[l], dims[l + 1], rng))
                    .collect();
                let proj = (self.in_dim != h || x.is_sparse())
                    .then(|| Linear::<F>::new(self.in_dim, h, false, rng));
                let mut skip = match proj {
                    Some(p) => Src::Node(b.push(p, vec![Src::X], 0, 0)),
                    None => Src::X,
                };
                let mut taps = Vec::new();
                let mut prev = Src::Xd;
                let last = self.n_layers - 1;
                for (l, conv) in convs.into_iter().enumerate() {
                    if l == last {
                        taps.push(b.push(conv, vec![prev], 2, 0));
                        break;
                    }
                    b.begin_block();
                    let z = b.push(conv, vec![prev], if l == 0 { 0 } else { 1 }, 0);
                    let z = b.norm(z, h);
                    let a = b.push(ReluDropout::relu(h), vec![Src::Node(z)], 0, 0);
                    let out = b.push(Add { dim: h }, vec![Src::Node(a), skip], 0, 0);
                    taps.push(out);
                    skip = Src::Node(out);
                    let p = self.dropout;
                    prev = b.elem(ReluDropout::dropout(h, p), skip, l as u64 + 2);
                    b.end_block(l);
                }
                (1, taps)
            }
            Arch::Jk(mode) => {
                let convs: Vec<GcnConv<F>> = (0..self.n_layers)
                    .map(|l| b.conv(l, if l == 0 { self.in_dim } else { h }, h, rng))
                    .collect();
                let mut jk = JumpingKnowledge::<F>::new(mode, h, self.n_layers, rng);
                let width = jk.out_dim();
                let head = Linear::<F>::new(width, self.out_dim, true, rng);
                let mut prev = Src::Xd;
                let mut outs = Vec::new();
                let last = self.n_layers - 1;
                for (l, conv) in convs.into_iter().enumerate() {
                    b.begin_block();
                    let z = b.push(conv, vec![prev], if l == 0 { 0 } else { 1 }, 0);
                    let z = b.norm(z, h);
                    let a = b.push(ReluDropout::relu(h), vec![Src::Node(z)], 0, 0);
                    outs.push(Src::Node(a));
                    if l < last {
                        let p = self.dropout;
                        prev = b.elem(ReluDropout::dropout(h, p), Src::Node(a), l as u64 + 2);
                    }
                    b.end_block(l);
                }
                let taps: Vec<usize> = outs.iter().map(|&s| prev_node(s)).collect();
                jk.n_layers = outs.len();
                let j = b.push(jk, outs, 2, 0);
                let p = self.dropout;
                let nh = self.n_layers as u64;
                let d = b.push(
                    ReluDropout::dropout(width, p),
                    vec![Src::Node(j)],
                    0,
                    nh + 1,
                );
                b.push(head, vec![Src::Node(d)], 2, 0);
                (1, taps)
            }
            Arch::Gcnii => {
                let stem = Linear::<F>::new(self.in_dim, h, true, rng);
                let convs: Vec<GcniiConv<F>> = (0..self.n_layers)
                    .map(|l| GcniiConv::new(h, self.alpha, self.lambda, l + 1, rng))
                    .collect();
                let head = Linear::<F>::new(h, self.out_dim, true, rng);
                let s = b.push(stem, vec![Src::Xd], 0, 0);
                let h0 = b.elem(ReluDropout::relu(h), Src::Node(s), 0);
                let p = self.dropout;
                let mut prev = b.elem(ReluDropout::dropout(h, p), h0, 1);
                let mut taps = Vec::new();
                let nh = self.n_layers as u64;
                for (l, conv) in convs.into_iter().enumerate() {
                    b.begin_block();
                    let z = b.push(conv, vec![prev, h0], 1, 0);
                    // ReLU, then the dropout of the next block's input (or the head's).
                    let site = (l as u64 + 2).min(nh + 1);
                    prev = b.elem(ReluDropout::new(h, p), Src::Node(z), site);
                    taps.push(prev_node(prev));
                    b.end_block(l);
                }
                b.push(head, vec![prev], 2, 0);
                (0, taps)
            }
            Arch::Sgc => {
                let lin = Linear::<F>::new(self.in_dim, self.out_dim, true, rng);
                let k = self.k;
                let s = b.push(
                    SgcPropagate {
                        k,
                        dim: self.in_dim,
                    },
                    vec![Src::X],
                    0,
                    0,
                );
                let z = b.push(lin, vec![Src::Node(s)], 0, 0);
                (1, vec![s, z])
            }
            Arch::Appnp => {
                let l1 = Linear::<F>::new(self.in_dim, h, true, rng);
                let l2 = Linear::<F>::new(h, self.out_dim, true, rng);
                let z1 = b.push(l1, vec![Src::Xd], 0, 0);
                let p = self.dropout;
                let a = b.push(ReluDropout::new(h, p), vec![Src::Node(z1)], 0, 2);
                let z2 = b.push(l2, vec![Src::Node(a)], 2, 0);
                let prop = AppnpPropagate {
                    k: self.k,
                    alpha: self.alpha,
                    dim: self.out_dim,
                };
                let z = b.push(prop, vec![Src::Node(z2)], 0, 0);
                (1, vec![a, z])
            }
        };
        // SGC reads the raw features only: no input dropout to draw.
        let input_dropout = if self.arch == Arch::Sgc {
            0.0
        } else {
            self.input_dropout
        };
        let wiring = Wiring {
            input_dropout,
            input_site,
            taps,
            streams: self.mask_streams,
            blocks: b.blocks,
        };
        Model::from_nodes(self.clone(), b.nodes, wiring, self.stack_options())
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
        }
    }

    /// Layer widths of the GCN and residual stacks: `[in_dim, hidden_dim, …, out_dim]`.
    fn widths(&self) -> Vec<usize> {
        let mut d = vec![self.in_dim];
        d.extend(std::iter::repeat_n(self.hidden_dim, self.n_layers - 1));
        d.push(self.out_dim);
        d
    }
}

/// The node of a `Src::Node`.
fn prev_node(s: Src) -> usize {
    match s {
        Src::Node(i) => i,
        _ => unreachable!("a node"),
    }
}

/// Collects nodes and hidden-block ranges while an architecture is assembled.
struct Builder<'a, F: Scalar> {
    cfg: &'a ModelConfig,
    adj: &'a dyn Propagate<F>,
    x: &'a Features<F>,
    orders: Option<&'a [Order]>,
    n_convs: usize,
    nodes: Vec<Node<F>>,
    block_start: usize,
    blocks: Vec<std::ops::Range<usize>>,
}

impl<'a, F: Scalar> Builder<'a, F> {
    fn new(
        cfg: &'a ModelConfig,
        adj: &'a dyn Propagate<F>,
        x: &'a Features<F>,
        orders: Option<&'a [Order]>,
    ) -> Self {
        Builder {
            cfg,
            adj,
            x,
            orders,
            n_convs: 0,
            nodes: Vec::new(),
            block_start: 0,
            blocks: Vec::new(),
        }
    }

    /// Graph convolution `l` (in draw order), its order resolved by the cost model.
    fn conv<R: Rng + ?Sized>(
        &mut self,
        l: usize,
        din: usize,
        dout: usize,
        rng: &mut R,
    ) -> GcnConv<F> {
        let first = l == 0;
        let sparse = match self.x.get() {
            FeaturesRef::Sparse(s) if first => Some(s),
            _ => None,
        };
        // Â·X of sparse features kept sparse: an upper bound on its non-zeros, or none when
        // the backend has no sparse product (then aggregate-first is not an option).
        let bound = sparse.map(|s| {
            let xs = s.x();
            let xi = xs.indptr();
            let per_row: Vec<usize> = (0..xs.rows()).map(|j| xi.nnz_in_outer_sz(j)).collect();
            self.adj.row_gather_bound(&per_row, s.x().cols())
        });
        let shape = LayerShape {
            n_nodes: self.adj.rows().total,
            nnz_adj: self.adj.nnz(),
            in_dim: din,
            out_dim: dout,
            sparse_input_nnz: sparse
                .map(|s| self.adj.collective().sum(s.x().nnz() as u64) as usize),
            sparse_aggregate_nnz: bound.and_then(|b| b.ok()),
            first,
            aggregate_cached: first && self.cfg.input_dropout == 0.0 && self.cfg.drop_edge == 0.0,
        };
        let order = match self.orders.and_then(|o| o.get(self.n_convs)) {
            Some(&o) => o,
            None if matches!(bound, Some(Err(_))) && self.cfg.order == Order::Auto => {
                Order::TransformFirst
            }
            None => choose_order(self.cfg.order, &shape),
        };
        // The lean order on sparse features is TransformFirst's (and says so).
        let order = if order == Order::Lean && sparse.is_some() {
            Order::TransformFirst
        } else {
            order
        };
        self.n_convs += 1;
        GcnConv::new(din, dout, self.cfg.bias, order, rng)
    }

    fn push(
        &mut self,
        layer: impl Layer<F> + 'static,
        inputs: Vec<Src>,
        group: usize,
        site: u64,
    ) -> usize {
        self.nodes.push(Node {
            layer: Box::new(layer),
            inputs,
            group,
            site,
        });
        self.nodes.len() - 1
    }

    /// An element-wise node (ReLU and/or dropout with mask stream `site`) on `input`.
    fn elem(&mut self, layer: ReluDropout, input: Src, site: u64) -> Src {
        Src::Node(self.push(layer, vec![input], 0, site))
    }

    /// The normalisation after a hidden convolution's output `z` (or `z` itself).
    fn norm(&mut self, z: usize, h: usize) -> usize {
        match self.cfg.norm {
            NormKind::None => z,
            NormKind::Batch => self.push(BatchNorm::<F>::new(h), vec![Src::Node(z)], 3, 0),
            NormKind::Pair(mode) => {
                let pn = PairNorm {
                    mode,
                    ..PairNorm::new(h)
                };
                self.push(pn, vec![Src::Node(z)], 3, 0)
            }
        }
    }

    /// Marks the start of a hidden block (the next node pushed is its first).
    fn begin_block(&mut self) {
        self.block_start = self.nodes.len();
    }

    /// Marks the end of hidden block `l`.
    fn end_block(&mut self, l: usize) {
        debug_assert_eq!(self.blocks.len(), l);
        self.blocks.push(self.block_start..self.nodes.len());
    }
}
