//! [`DeepGcn`]: deep GCN variants for depth and oversmoothing studies: plain stacks, residual
//! connections, GCNII (initial residual + identity mapping) and jumping knowledge, with optional
//! BatchNorm or PairNorm and activation checkpointing.
//!
//! # Architectures (`n_layers` = L graph convolutions)
//! | variant | stem | hidden layer l | head |
//! |---|---|---|---|
//! | [`Variant::Plain`] | — | H_{l+1} = ReLU(N(GCN(drop(H_l)))) for l < L−1 | logits = GCN(drop(H_{L−1})) |
//! | [`Variant::Residual`] | — | H_{l+1} = ReLU(N(GCN(drop(H_l)))) + skip(H_l), l < L−1 | logits = GCN(drop(H_{L−1})) |
//! | [`Variant::Gcnii`] | H_0 = ReLU(Lin(drop(X))) | H_{l+1} = ReLU(GCNII_l(drop(H_l), H_0)), l < L | logits = Lin(drop(H_L)) |
//! | [`Variant::Jk`] | — | H_{l+1} = ReLU(N(GCN(drop(H_l)))), l < L | logits = Lin(drop(JK(H_1..H_L))) |
//!
//! H_0 = X for the GCN variants; N is the optional normalisation ([`NormKind`]); `drop` is
//! dropout (`input_dropout` on X, `dropout` elsewhere). The residual `skip` is the identity when
//! the widths match and a learned projection X·P otherwise (the first layer, whose input is X).
//!
//! # Parameter groups (for per-group weight decay)
//! 0: the stem (first GCN layer, GCNII's input Linear, the residual projection);
//! 1: the hidden convolutions; 2: the head (last GCN layer or head Linear, JK attention);
//! 3: normalisation parameters. Kipf's weight decay `[5e-4]` decays group 0 only; GCNII's
//! `[5e-4, 0.01, 5e-4]` decays its convolutions by 0.01 and its Linear layers by 5e-4.
//!
//! # Dropout streams and checkpointing
//! A training pass draws one key from the caller's RNG; each layer's dropout mask comes from its
//! own ChaCha8 stream of that key. With `checkpoint = k > 0` only every k-th hidden layer's
//! input is kept during the forward pass; backward recomputes each segment of k layers (same
//! masks, same batch statistics) before going through it, trading one extra forward pass for
//! activation memory O(L/k + k) layers instead of O(L).
//!
//! # Buffers reused across epochs
//! Without checkpointing (`checkpoint = 0`), the trainer's passes ([`Model::train_pass`],
//! [`Model::eval_pass`], [`Model::snapshot_into`]) run on a workspace the model allocates on
//! its first pass and reuses after (freed by [`Model::release_workspace`]), so the epoch loop
//! allocates nothing after its first epoch (`tests/no_alloc.rs`); the results are bit for bit
//! those of the fresh-buffer passes ([`Model::fresh_train_pass`], [`Model::predict`]). With
//! `checkpoint = k > 0` the trainer's passes take fresh buffers, as the workspace would keep
//! every layer's activations. With DropEdge the workspace pass also takes a new Â′ every epoch
//! ([`Model::train_pass_any_adj`]), except when the first convolution aggregates sparse
//! features first (the workspace keeps ÂX̃'s sparsity pattern).

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use ndarray::{Array1, Array2, ArrayView2, ArrayViewMut2, Axis, CowArray, Zip};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::dropout::{dropout_dense, dropout_sparse};
use super::gcn::{choose_order, GcnCache, GcnConv, Input, LayerShape, Order};
use super::gcnii::{GcniiCache, GcniiConv};
use super::jk::{JkCache, JkMode, JkWs, JumpingKnowledge};
use super::linear::Linear;
use super::model::{assign_at, check_widths_and_dropout, input_of};
use super::norm::{BatchNorm, BatchNormCache, NormScratch, PairNorm, PairNormCache};
use super::param::Param;
use super::workspace::{ensure, grow, view, view_mut, InRef, Scratch, SparseBuf};
use super::{Mode, Model};
use crate::graph::{Features, NormAdj};
use crate::kernels::MaskRng;
use crate::kernels::{add_bias, relu_backward_inplace, relu_inplace, spmm};
use crate::{ConfigError, Par, Scalar};

/// The deep architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// A plain GCN stack (Kipf & Welling).
    Plain,
    /// Residual connections around every hidden layer (ResGCN, as in DropEdge's study).
    Residual,
    /// GCNII: initial residual and identity mapping (Chen et al., ICML 2020).
    Gcnii,
    /// Jumping knowledge over every layer's output (Xu et al., ICML 2018), then a Linear head.
    Jk(JkMode),
}

impl Variant {
    /// Every variant, in the order of the depth study.
    pub const ALL: [Variant; 6] = [
        Variant::Plain,
        Variant::Residual,
        Variant::Gcnii,
        Variant::Jk(JkMode::Concat),
        Variant::Jk(JkMode::Max),
        Variant::Jk(JkMode::Attention),
    ];
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Variant::Plain => f.write_str("plain"),
            Variant::Residual => f.write_str("residual"),
            Variant::Gcnii => f.write_str("gcnii"),
            Variant::Jk(m) => write!(f, "jk-{m}"),
        }
    }
}

impl FromStr for Variant {
    type Err = ConfigError;
    /// `plain`, `residual`, `gcnii`, `jk-cat`, `jk-max`, `jk-att`.
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        match s {
            "plain" => Ok(Variant::Plain),
            "residual" | "res" => Ok(Variant::Residual),
            "gcnii" => Ok(Variant::Gcnii),
            _ => s
                .strip_prefix("jk-")
                .and_then(|m| m.parse::<JkMode>().ok())
                .map(Variant::Jk)
                .ok_or_else(|| ConfigError::UnknownName {
                    what: "variant",
                    got: s.to_string(),
                    expected: "plain, residual, gcnii, jk-cat, jk-max, jk-att",
                }),
        }
    }
}

/// Normalisation after each hidden GCN convolution (before ReLU).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum NormKind {
    /// None.
    #[default]
    None,
    /// BatchNorm over nodes.
    Batch,
    /// PairNorm.
    Pair(PairNorm),
}

impl fmt::Display for NormKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NormKind::None => "none",
            NormKind::Batch => "batch",
            NormKind::Pair(_) => "pair",
        })
    }
}

impl FromStr for NormKind {
    type Err = ConfigError;
    /// `none`, `batch`, `pair`.
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        match s {
            "none" => Ok(NormKind::None),
            "batch" | "bn" => Ok(NormKind::Batch),
            "pair" | "pn" => Ok(NormKind::Pair(PairNorm::default())),
            _ => Err(ConfigError::UnknownName {
                what: "normalisation",
                got: s.to_string(),
                expected: "none, batch, pair",
            }),
        }
    }
}

/// The architecture of a [`DeepGcn`].
#[derive(Debug, Clone, PartialEq)]
pub struct DeepConfig {
    /// Input width (set from the data by the trainer).
    pub in_dim: usize,
    /// Hidden width.
    pub hidden_dim: usize,
    /// Output width (classes; set from the data by the trainer).
    pub out_dim: usize,
    /// Graph convolutions (≥ 1; ≥ 2 for `Residual`).
    pub n_layers: usize,
    /// The architecture.
    pub variant: Variant,
    /// Dropout before every convolution or Linear layer but the first.
    pub dropout: f64,
    /// Dropout on the input features.
    pub input_dropout: f64,
    /// Normalisation of hidden GCN layers (not used by `Gcnii`).
    pub norm: NormKind,
    /// Bias in the GCN convolutions (Linear layers always have one).
    pub bias: bool,
    /// Order of the GCN convolutions.
    pub order: Order,
    /// GCNII's α (initial-residual weight).
    pub alpha: f64,
    /// GCNII's λ (β_l = ln(λ/l + 1)).
    pub lambda: f64,
    /// Activation checkpointing: keep every k-th hidden layer's input, recompute the rest in
    /// backward (0: off).
    pub checkpoint: usize,
}

impl Default for DeepConfig {
    fn default() -> Self {
        DeepConfig {
            in_dim: 0,
            hidden_dim: 64,
            out_dim: 0,
            n_layers: 2,
            variant: Variant::Plain,
            dropout: 0.5,
            input_dropout: 0.5,
            norm: NormKind::None,
            bias: false,
            order: Order::Auto,
            alpha: 0.1,
            lambda: 0.5,
            checkpoint: 0,
        }
    }
}

impl DeepConfig {
    /// Checks the configuration.
    ///
    /// # Errors
    /// The first rule broken.
    pub fn check(&self) -> Result<(), ConfigError> {
        let min_layers = if self.variant == Variant::Residual {
            2
        } else {
            1
        };
        if self.n_layers < min_layers {
            return Err(ConfigError::NoLayers);
        }
        check_widths_and_dropout(
            [self.in_dim, self.hidden_dim, self.out_dim],
            [self.dropout, self.input_dropout],
        )?;
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
        Ok(())
    }

    /// Number of hidden layers (the layers checkpointing can drop).
    pub fn n_hidden(&self) -> usize {
        match self.variant {
            Variant::Plain | Variant::Residual => self.n_layers - 1,
            Variant::Gcnii | Variant::Jk(_) => self.n_layers,
        }
    }

    /// Builds the model, drawing every weight from `rng` (stem, hidden layers, head).
    ///
    /// # Errors
    /// From [`DeepConfig::check`].
    pub fn init<F: Scalar, R: Rng + ?Sized>(
        &self,
        adj: &NormAdj<F>,
        x: &Features<F>,
        rng: &mut R,
    ) -> Result<DeepGcn<F>, ConfigError> {
        self.check()?;
        let h = self.hidden_dim;
        let sparse_nnz = match x {
            Features::Sparse(s) => Some(s.x().nnz()),
            Features::Dense(_) => None,
        };
        let gcn = |l: usize, din: usize, dout: usize, rng: &mut R| {
            let shape = LayerShape {
                n_nodes: adj.n_nodes(),
                nnz_adj: adj.nnz(),
                in_dim: din,
                out_dim: dout,
                sparse_input_nnz: if l == 0 { sparse_nnz } else { None },
                // ÂX is never cached here (DropEdge changes Â), so no sparse ÂX bound.
                sparse_aggregate_nnz: None,
                first: l == 0,
                aggregate_cached: false,
            };
            GcnConv::new(din, dout, self.bias, choose_order(self.order, &shape), rng)
        };
        let mut m = DeepGcn {
            cfg: self.clone(),
            stem: None,
            convs: Vec::new(),
            gconvs: Vec::new(),
            proj: None,
            norms: Vec::new(),
            jk: None,
            head: None,
            ws: Scratch::default(),
        };
        match self.variant {
            Variant::Plain | Variant::Residual => {
                let dims: Vec<usize> = std::iter::once(self.in_dim)
                    .chain(std::iter::repeat_n(h, self.n_layers - 1))
                    .chain(std::iter::once(self.out_dim))
                    .collect();
                for l in 0..self.n_layers {
                    m.convs.push(gcn(l, dims[l], dims[l + 1], rng));
                }
                if self.variant == Variant::Residual
                    && (self.in_dim != h || matches!(x, Features::Sparse(_)))
                {
                    m.proj = Some(Linear::new(self.in_dim, h, false, rng));
                }
            }
            Variant::Jk(mode) => {
                for l in 0..self.n_layers {
                    let din = if l == 0 { self.in_dim } else { h };
                    m.convs.push(gcn(l, din, h, rng));
                }
                let jk = JumpingKnowledge::new(mode, h, rng);
                let width = jk.out_dim(h, self.n_layers);
                m.jk = Some(jk);
                m.head = Some(Linear::new(width, self.out_dim, true, rng));
            }
            Variant::Gcnii => {
                m.stem = Some(Linear::new(self.in_dim, h, true, rng));
                for l in 0..self.n_layers {
                    m.gconvs
                        .push(GcniiConv::new(h, self.alpha, self.lambda, l + 1, rng));
                }
                m.head = Some(Linear::new(h, self.out_dim, true, rng));
            }
        }
        if self.variant != Variant::Gcnii {
            for _ in 0..self.n_hidden() {
                match self.norm {
                    NormKind::None => {}
                    NormKind::Batch => m.norms.push(NormLayer::Batch(Box::new(BatchNorm::new(h)))),
                    NormKind::Pair(p) => m.norms.push(NormLayer::Pair(p)),
                }
            }
        }
        Ok(m)
    }
}

#[derive(Debug, Clone)]
enum NormLayer<F: Scalar> {
    Batch(Box<BatchNorm<F>>),
    Pair(PairNorm),
}

#[derive(Debug)]
enum NormCache<F: Scalar> {
    Batch(BatchNormCache<F>),
    Pair(PairNormCache<F>),
}

/// A deep GCN (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct DeepGcn<F: Scalar> {
    cfg: DeepConfig,
    /// GCNII's input Linear.
    stem: Option<Linear<F>>,
    /// GCN convolutions (Plain, Residual, Jk).
    convs: Vec<GcnConv<F>>,
    /// GCNII convolutions.
    gconvs: Vec<GcniiConv<F>>,
    /// The residual projection of X (first hidden layer).
    proj: Option<Linear<F>>,
    /// One per hidden GCN layer, when normalised.
    norms: Vec<NormLayer<F>>,
    jk: Option<JumpingKnowledge<F>>,
    /// GCNII's and JK's output Linear.
    head: Option<Linear<F>>,
    /// The buffers of the trainer's passes ([`Model::train_pass`], [`Model::eval_pass`]),
    /// reused from epoch to epoch; empty in a clone.
    ws: Scratch<DeepWs<F>>,
}

/// Everything one hidden layer's backward needs.
#[derive(Debug)]
struct BlockCache<'a, F: Scalar> {
    conv: ConvCache<'a, F>,
    norm: Option<NormCache<F>>,
    /// ReLU output (its sign is the mask).
    act: Array2<F>,
    /// Scaled dropout mask of a dense input, in training.
    mask: Option<Array2<F>>,
    /// The input of the residual projection (X, borrowed), for its backward.
    proj_input: Option<Input<'a, F>>,
}

#[derive(Debug)]
enum ConvCache<'a, F: Scalar> {
    Gcn(GcnCache<'a, F>),
    Gcnii(GcniiCache<F>),
}

#[derive(Debug)]
enum HeadCache<'a, F: Scalar> {
    /// The last GCN layer (Plain, Residual), on `H_{L-1}` (or on X when L = 1).
    Gcn {
        cache: GcnCache<'a, F>,
        mask: Option<Array2<F>>,
    },
    /// A Linear head on drop(JK(..)) or drop(H_L).
    Linear {
        input: Array2<F>,
        mask: Option<Array2<F>>,
        jk: Option<JkCache<F>>,
    },
}

/// What [`DeepGcn`]'s backward needs from a training pass.
#[derive(Debug)]
pub struct DeepCache<'a, F: Scalar> {
    key: u64,
    /// GCNII: the dropped input and H_0 (the ReLU output of the stem).
    stem: Option<(Input<'a, F>, Array2<F>)>,
    /// Per hidden layer; `None` where checkpointing dropped it.
    blocks: Vec<Option<BlockCache<'a, F>>>,
    /// Checkpointing: the input of every k-th hidden layer (index, input).
    saved: Vec<(usize, Input<'a, F>)>,
    /// JK: every hidden layer's output.
    outs: Vec<Array2<F>>,
    head: HeadCache<'a, F>,
}

/// The RNG of dropout slot `slot` of a pass with `key`.
fn slot_rng(key: u64, slot: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(key);
    r.set_stream(slot);
    r
}

/// Dropout of a layer input from its own stream: the dropped input and, for dense input, the mask.
fn drop_input<'a, F: Scalar>(
    h: Input<'a, F>,
    p: f64,
    rng: Option<&mut ChaCha8Rng>,
) -> (Input<'a, F>, Option<Array2<F>>) {
    match rng {
        Some(rng) if p > 0.0 => match h {
            Input::Dense(d) => {
                let (hd, mask) = dropout_dense(d.into_owned(), p, rng);
                (Input::Dense(CowArray::from(hd)), Some(mask))
            }
            Input::Sparse(s) => (Input::Sparse(Cow::Owned(dropout_sparse(&s, p, rng))), None),
        },
        _ => (h, None),
    }
}

fn dense<'a, F: Scalar>(a: Array2<F>) -> Input<'a, F> {
    Input::Dense(CowArray::from(a))
}

impl<F: Scalar> DeepGcn<F> {
    /// The configuration it was built from.
    pub fn config(&self) -> &DeepConfig {
        &self.cfg
    }

    /// Number of trainable scalars.
    pub fn n_params(&self) -> usize {
        let mut n = 0;
        self.clone().visit_params(&mut |_, p| n += p.len());
        n
    }

    fn n_hidden(&self) -> usize {
        self.cfg.n_hidden()
    }

    /// Dropout rate before hidden layer `l` (the input dropout for the first GCN layer).
    fn p_before(&self, l: usize) -> f64 {
        if l == 0 && self.cfg.variant != Variant::Gcnii {
            self.cfg.input_dropout
        } else {
            self.cfg.dropout
        }
    }

    /// Hidden layer `l` on input `h` (X for l = 0 in the GCN variants). `key` set: training
    /// (dropout from stream l + 1, batch statistics); `keep`: return the backward cache.
    #[allow(clippy::type_complexity)]
    fn block_forward<'a>(
        &self,
        l: usize,
        adj: &NormAdj<F>,
        h: Input<'a, F>,
        h0: Option<ArrayView2<'_, F>>,
        key: Option<u64>,
        keep: bool,
        par: Par,
    ) -> (Array2<F>, Option<BlockCache<'a, F>>) {
        let mut rng = key.map(|k| slot_rng(k, l as u64 + 1));
        let mode = if key.is_some() {
            Mode::Train
        } else {
            Mode::Eval
        };
        // Residual skip, computed from the undropped input.
        let mut proj_input = None;
        let skip = if self.cfg.variant == Variant::Residual {
            match (&self.proj, l) {
                (Some(p), 0) => {
                    if keep {
                        proj_input = Some(h.clone());
                    }
                    Some(p.forward(&h, par))
                }
                _ => match &h {
                    Input::Dense(d) => Some(d.to_owned()),
                    Input::Sparse(_) => None,
                },
            }
        } else {
            None
        };
        let (hd, mask) = drop_input(h, self.p_before(l), rng.as_mut());
        let (mut z, conv) = if self.cfg.variant == Variant::Gcnii {
            let Input::Dense(hd) = hd else {
                unreachable!("GCNII hidden layers have dense inputs")
            };
            let h0 = h0.unwrap_or_else(|| unreachable!("GCNII needs H0"));
            let (z, c) = self.gconvs[l].forward(adj, hd.view(), h0, par);
            (z, ConvCache::Gcnii(c))
        } else {
            let (z, c) = self.convs[l].forward(adj, hd, None, par);
            (z, ConvCache::Gcn(c))
        };
        let norm = match self.norms.get(l) {
            None => None,
            Some(NormLayer::Batch(bn)) => {
                let (y, c) = bn.forward(z.view(), mode);
                z = y;
                Some(NormCache::Batch(c))
            }
            Some(NormLayer::Pair(pn)) => {
                let (y, c) = pn.forward(z.view());
                z = y;
                Some(NormCache::Pair(c))
            }
        };
        relu_inplace(z.view_mut());
        let act = keep.then(|| z.clone());
        let out = match skip {
            Some(s) => z + &s,
            None => z,
        };
        let cache = act.map(|act| BlockCache {
            conv,
            norm,
            act,
            mask,
            proj_input,
        });
        (out, cache)
    }

    /// Backward through hidden layer `l` from g = ∂L/∂H_{l+1}; returns ∂L/∂H_l (None for l = 0
    /// in the GCN variants, whose input is X). GCNII adds its ∂L/∂H_0 into `dh0`.
    fn block_backward(
        &mut self,
        l: usize,
        adj: &NormAdj<F>,
        cache: BlockCache<'_, F>,
        g: Array2<F>,
        dh0: Option<&mut Array2<F>>,
        par: Par,
    ) -> Option<Array2<F>> {
        let BlockCache {
            conv,
            norm,
            act,
            mask,
            proj_input,
        } = cache;
        let first_gcn = l == 0 && self.cfg.variant != Variant::Gcnii;
        // Residual: the skip's gradient.
        let mut skip_grad = None;
        if self.cfg.variant == Variant::Residual {
            match (&mut self.proj, proj_input) {
                (Some(p), Some(xin)) => {
                    p.backward(&xin, g.view(), false, par);
                }
                _ => {
                    if !first_gcn {
                        skip_grad = Some(g.clone());
                    }
                }
            }
        }
        let mut g = g;
        relu_backward_inplace(g.view_mut(), act.view());
        drop(act);
        match (norm, self.norms.get_mut(l)) {
            (Some(NormCache::Batch(c)), Some(NormLayer::Batch(bn))) => g = bn.backward(c, g.view()),
            (Some(NormCache::Pair(c)), Some(NormLayer::Pair(pn))) => g = pn.backward(c, g.view()),
            _ => {}
        }
        let dh = match conv {
            ConvCache::Gcn(c) => self.convs[l].backward(adj, c, None, g.view(), !first_gcn, par),
            ConvCache::Gcnii(c) => {
                let dh0 = dh0.unwrap_or_else(|| unreachable!("GCNII needs dH0"));
                Some(self.gconvs[l].backward(adj, c, g.view(), dh0, par))
            }
        };
        let mut dh = dh?;
        if let Some(m) = mask {
            dh *= &m;
        }
        if let Some(s) = skip_grad {
            dh += &s;
        }
        Some(dh)
    }

    /// The stem (GCNII): H_0 = ReLU(Lin(drop(X))), with the dropped input kept when training.
    fn stem_forward<'a>(
        &self,
        x: &'a Features<F>,
        key: Option<u64>,
        par: Par,
    ) -> Option<(Input<'a, F>, Array2<F>)> {
        let stem = self.stem.as_ref()?;
        let mut rng = key.map(|k| slot_rng(k, 0));
        let (xd, _) = drop_input(input_of(x), self.cfg.input_dropout, rng.as_mut());
        let mut h0 = stem.forward(&xd, par);
        relu_inplace(h0.view_mut());
        Some((xd, h0))
    }

    /// The head on the last hidden output `h` (and JK over `outs`); training when `key` is set.
    fn head_forward<'a>(
        &self,
        adj: &NormAdj<F>,
        h: Input<'a, F>,
        outs: &[Array2<F>],
        key: Option<u64>,
        par: Par,
    ) -> (Array2<F>, HeadCache<'a, F>) {
        let slot = self.n_hidden() as u64 + 1;
        let mut rng = key.map(|k| slot_rng(k, slot));
        match self.cfg.variant {
            Variant::Plain | Variant::Residual => {
                let l = self.convs.len() - 1;
                let p = self.p_before(l);
                let (hd, mask) = drop_input(h, p, rng.as_mut());
                let (z, cache) = self.convs[l].forward(adj, hd, None, par);
                (z, HeadCache::Gcn { cache, mask })
            }
            Variant::Gcnii | Variant::Jk(_) => {
                let (input, jk) = match &self.jk {
                    Some(jk) => {
                        let views: Vec<_> = outs.iter().map(|o| o.view()).collect();
                        if key.is_some() {
                            let (y, c) = jk.forward(&views);
                            (y, Some(c))
                        } else {
                            (jk.predict(&views), None)
                        }
                    }
                    None => match h {
                        Input::Dense(d) => (d.into_owned(), None),
                        Input::Sparse(_) => unreachable!("the head input is dense"),
                    },
                };
                let (input, mask) = match rng.as_mut() {
                    Some(r) if self.cfg.dropout > 0.0 => {
                        let (a, m) = dropout_dense(input, self.cfg.dropout, r);
                        (a, Some(m))
                    }
                    _ => (input, None),
                };
                let head = self
                    .head
                    .as_ref()
                    .unwrap_or_else(|| unreachable!("a Linear head"));
                let z = head.forward(&Input::Dense(CowArray::from(input.view())), par);
                (z, HeadCache::Linear { input, mask, jk })
            }
        }
    }

    /// Inference, calling `visit(l, H_{l+1})` on each hidden layer's output (eval mode).
    fn run_eval(
        &self,
        adj: &NormAdj<F>,
        x: &Features<F>,
        par: Par,
        visit: &mut dyn FnMut(usize, ArrayView2<'_, F>),
    ) -> Array2<F> {
        let stem = self.stem_forward(x, None, par);
        let h0 = stem.as_ref().map(|(_, h0)| h0.view());
        let mut h: Input<'_, F> = match &stem {
            Some((_, h0)) => Input::Dense(CowArray::from(h0.view())),
            None => input_of(x),
        };
        let jk = self.jk.is_some();
        let mut outs = Vec::new();
        for l in 0..self.n_hidden() {
            let (o, _) = self.block_forward(l, adj, h, h0, None, false, par);
            visit(l, o.view());
            if jk {
                outs.push(o.clone());
            }
            h = dense(o);
        }
        self.head_forward(adj, h, &outs, None, par).0
    }

    /// The hidden representations H_1 … of an evaluation pass (for oversmoothing metrics),
    /// followed by the logits for the Plain and Residual variants (whose last layer is a
    /// graph convolution).
    pub fn representations(&self, adj: &NormAdj<F>, x: &Features<F>, par: Par) -> Vec<Array2<F>> {
        let mut v = Vec::new();
        let logits = self.run_eval(adj, x, par, &mut |_, h| v.push(h.to_owned()));
        if matches!(self.cfg.variant, Variant::Plain | Variant::Residual) {
            v.push(logits);
        }
        v
    }

    fn checkpoint_every(&self) -> usize {
        self.cfg.checkpoint
    }
}

impl<F: Scalar> Model<F> for DeepGcn<F> {
    type Cache<'a> = DeepCache<'a, F>;

    fn forward_train<'a, R: MaskRng + ?Sized>(
        &mut self,
        adj: &NormAdj<F>,
        x: &'a Features<F>,
        rng: &mut R,
        par: Par,
    ) -> (Array2<F>, DeepCache<'a, F>) {
        let key = rng.next_u64();
        let stem = self.stem_forward(x, Some(key), par);
        let h0 = stem.as_ref().map(|(_, h0)| h0.to_owned());
        let mut h: Input<'a, F> = match &h0 {
            Some(h0) => dense(h0.clone()),
            None => input_of(x),
        };
        let k = self.checkpoint_every();
        let n_hidden = self.n_hidden();
        let mut blocks = Vec::with_capacity(n_hidden);
        let mut saved = Vec::new();
        let mut outs = Vec::new();
        for l in 0..n_hidden {
            let keep = k == 0;
            if k > 0 && l % k == 0 {
                saved.push((l, h.clone()));
            }
            let (o, cache) = self.block_forward(
                l,
                adj,
                h,
                h0.as_ref().map(|a| a.view()),
                Some(key),
                true,
                par,
            );
            // Running statistics are updated once per training pass (never on recompute).
            if let (
                Some(BlockCache {
                    norm: Some(NormCache::Batch(c)),
                    ..
                }),
                Some(NormLayer::Batch(bn)),
            ) = (&cache, self.norms.get_mut(l))
            {
                bn.update_running(c);
            }
            blocks.push(if keep { cache } else { None });
            if self.jk.is_some() {
                outs.push(o.clone());
            }
            h = dense(o);
        }
        let (logits, head) = self.head_forward(adj, h, &outs, Some(key), par);
        (
            logits,
            DeepCache {
                key,
                stem,
                blocks,
                saved,
                outs,
                head,
            },
        )
    }

    fn backward(
        &mut self,
        adj: &NormAdj<F>,
        cache: DeepCache<'_, F>,
        dlogits: Array2<F>,
        par: Par,
    ) {
        let DeepCache {
            key,
            stem,
            mut blocks,
            saved,
            outs,
            head,
        } = cache;
        let n_hidden = self.n_hidden();
        // ∂L/∂(last hidden output), and for JK ∂L/∂H_l of every layer.
        let mut jk_grads: Vec<Array2<F>> = Vec::new();
        let mut g: Option<Array2<F>> = match head {
            HeadCache::Gcn { cache, mask } => {
                let l = self.convs.len() - 1;
                let dh =
                    self.convs[l].backward(adj, cache, None, dlogits.view(), n_hidden > 0, par);
                dh.map(|mut d| {
                    if let Some(m) = mask {
                        d *= &m;
                    }
                    d
                })
            }
            HeadCache::Linear { input, mask, jk } => {
                let head = self
                    .head
                    .as_mut()
                    .unwrap_or_else(|| unreachable!("a Linear head"));
                let inp = Input::Dense(CowArray::from(input.view()));
                let mut d = head
                    .backward(&inp, dlogits.view(), true, par)
                    .unwrap_or_else(|| unreachable!("need_dx"));
                drop(inp);
                drop(input);
                if let Some(m) = mask {
                    d *= &m;
                }
                match (jk, self.jk.as_mut()) {
                    (Some(c), Some(j)) => {
                        let views: Vec<_> = outs.iter().map(|o| o.view()).collect();
                        jk_grads = j.backward(&views, c, d.view());
                        jk_grads.pop()
                    }
                    _ => Some(d),
                }
            }
        };
        drop(outs);
        let h0 = stem.as_ref().map(|(_, h0)| h0.clone());
        let mut dh0 = h0.as_ref().map(|a| Array2::zeros(a.dim()));
        let k = self.checkpoint_every();
        let mut saved = saved;
        for l in (0..n_hidden).rev() {
            if blocks[l].is_none() {
                // Recompute the segment that ends at l from its saved input.
                let (start, input) = saved
                    .pop()
                    .unwrap_or_else(|| unreachable!("a checkpoint before layer {l}"));
                debug_assert!(k > 0 && start <= l);
                let mut hcur = input;
                for j in start..=l {
                    let (o, c) = self.block_forward(
                        j,
                        adj,
                        hcur,
                        h0.as_ref().map(|a| a.view()),
                        Some(key),
                        true,
                        par,
                    );
                    blocks[j] = c;
                    hcur = dense(o);
                }
            }
            let Some(c) = blocks[l].take() else {
                unreachable!("layer {l} was recomputed")
            };
            let Some(gl) = g.take() else { break };
            g = self.block_backward(l, adj, c, gl, dh0.as_mut(), par);
            if let Some(jg) = jk_grads.pop() {
                g = Some(match g {
                    Some(mut a) => {
                        a += &jg;
                        a
                    }
                    None => jg,
                });
            }
        }
        // GCNII stem: ∂L/∂H_0 = g (from layer 0's input) + Σ α·∂L/∂S_l.
        if let (Some((xd, h0v)), Some(stem_lin)) = (stem, self.stem.as_mut()) {
            let mut d = dh0.unwrap_or_else(|| Array2::zeros(h0v.dim()));
            if let Some(gl) = g {
                d += &gl;
            }
            relu_backward_inplace(d.view_mut(), h0v.view());
            stem_lin.backward(&xd, d.view(), false, par);
        }
    }

    fn predict(&self, adj: &NormAdj<F>, x: &Features<F>, par: Par) -> Array2<F> {
        self.run_eval(adj, x, par, &mut |_, _| {})
    }

    /// On the model's reused buffers (no allocation after the first pass) when `checkpoint`
    /// is 0; with checkpointing, [`Model::fresh_train_pass`] (recomputing segments from fresh
    /// buffers, as checkpointing is for keeping fewer activations).
    fn train_pass<R: MaskRng + ?Sized>(
        &mut self,
        adj: &NormAdj<F>,
        x: &Features<F>,
        rng: &mut R,
        par: Par,
        loss: &mut dyn FnMut(ArrayView2<'_, F>, ArrayViewMut2<'_, F>) -> bool,
    ) {
        if !self.uses_workspace() {
            self.fresh_train_pass(adj, x, rng, par, loss);
            return;
        }
        let key = rng.next_u64();
        let mut ws = self.ws.take();
        self.forward_ws(&mut ws, adj, x, Some(key), par);
        // Running statistics are updated once per training pass.
        for (nl, lw) in self.norms.iter_mut().zip(&ws.layers) {
            if let NormLayer::Batch(bn) = nl {
                bn.update_running(&lw.bn);
            }
        }
        let DeepWs { logits, g, .. } = &mut *ws;
        if loss(logits.view(), view_mut(g, logits.dim())) {
            self.backward_ws(&mut ws, adj, x, par);
        }
        self.ws.put(ws);
    }

    /// As [`Gcn`](super::Gcn)'s: not when the first convolution aggregates sparse features
    /// first (ÂX̃'s sparsity pattern, kept in the workspace, is that of Â·X).
    fn train_pass_any_adj(&self, x: &Features<F>) -> bool {
        !x.is_sparse() || self.convs.first().map(|c| c.order) != Some(Order::AggregateFirst)
    }

    fn eval_pass(
        &mut self,
        adj: &NormAdj<F>,
        x: &Features<F>,
        par: Par,
        f: &mut dyn FnMut(ArrayView2<'_, F>),
    ) {
        if !self.uses_workspace() {
            f(self.predict(adj, x, par).view());
            return;
        }
        // The training pass's buffers: evaluation keeps no set of its own.
        let mut ws = self.ws.take();
        self.forward_ws(&mut ws, adj, x, None, par);
        f(ws.logits.view());
        self.ws.put(ws);
    }

    fn release_workspace(&mut self) {
        self.ws = Scratch::default();
    }

    fn snapshot_into(&self, snap: &mut Vec<Array2<F>>) {
        let mut k = 0;
        self.for_each_param(&mut |p| {
            assign_at(snap, k, &p.value);
            k += 1;
        });
        for nl in &self.norms {
            if let NormLayer::Batch(bn) = nl {
                assign_row_at(snap, k, &bn.running_mean);
                assign_row_at(snap, k + 1, &bn.running_var);
                k += 2;
            }
        }
        snap.truncate(k);
    }

    fn visit_params(&mut self, f: &mut dyn FnMut(usize, &mut Param<F>)) {
        if let Some(s) = &mut self.stem {
            s.visit_params(&mut |p| f(0, p));
        }
        if let Some(p) = &mut self.proj {
            p.visit_params(&mut |q| f(0, q));
        }
        let n_convs = self.convs.len();
        let head_is_conv = matches!(self.cfg.variant, Variant::Plain | Variant::Residual);
        for (l, c) in self.convs.iter_mut().enumerate() {
            let group = if l == 0 {
                0
            } else if head_is_conv && l + 1 == n_convs {
                2
            } else {
                1
            };
            c.visit_params(&mut |p| f(group, p));
        }
        for c in &mut self.gconvs {
            c.visit_params(&mut |p| f(1, p));
        }
        for n in &mut self.norms {
            if let NormLayer::Batch(bn) = n {
                bn.visit_params(&mut |p| f(3, p));
            }
        }
        if let Some(j) = &mut self.jk {
            j.visit_params(&mut |p| f(2, p));
        }
        if let Some(h) = &mut self.head {
            h.visit_params(&mut |p| f(2, p));
        }
    }

    fn n_groups(&self) -> usize {
        4
    }

    fn snapshot(&self) -> Vec<Array2<F>> {
        let mut out = Vec::new();
        let mut me = self.clone();
        me.visit_params(&mut |_, p| out.push(p.value.clone()));
        for n in &self.norms {
            if let NormLayer::Batch(bn) = n {
                out.push(bn.running_mean.clone().insert_axis(ndarray::Axis(0)));
                out.push(bn.running_var.clone().insert_axis(ndarray::Axis(0)));
            }
        }
        out
    }

    fn restore(&mut self, snap: &[Array2<F>]) {
        let mut k = 0;
        self.visit_params(&mut |_, p| {
            match snap.get(k) {
                Some(v) if v.dim() == p.value.dim() => p.value.assign(v),
                _ => panic!("DeepGcn::restore: the snapshot comes from another model"),
            }
            k += 1;
        });
        for n in &mut self.norms {
            if let NormLayer::Batch(bn) = n {
                for stat in [&mut bn.running_mean, &mut bn.running_var] {
                    match snap.get(k) {
                        Some(v) if v.len() == stat.len() => stat.assign(&v.row(0)),
                        _ => panic!("DeepGcn::restore: the snapshot comes from another model"),
                    }
                    k += 1;
                }
            }
        }
        assert_eq!(
            k,
            snap.len(),
            "DeepGcn::restore: the snapshot comes from another model"
        );
    }

    fn visit_representations(
        &self,
        adj: &NormAdj<F>,
        x: &Features<F>,
        par: Par,
        f: &mut dyn FnMut(usize, ArrayView2<'_, F>),
    ) {
        let n_hidden = self.n_hidden();
        let logits = self.run_eval(adj, x, par, f);
        if matches!(self.cfg.variant, Variant::Plain | Variant::Residual) {
            f(n_hidden, logits.view());
        }
    }

    fn orders(&self) -> Vec<Order> {
        self.convs.iter().map(|c| c.order).collect()
    }
}

// ---------------------------------------------------------------------------------------------
// The trainer's passes on reused buffers.

/// The buffers of one pass of a [`DeepGcn`] ([`Model::train_pass`], [`Model::eval_pass`]),
/// allocated by the first pass and reused by the next ones (on the same data), so that the
/// epoch loop allocates nothing after its first epoch. Each layer's buffers hold what its
/// backward needs (as the fresh-buffer pass's caches do); the flat buffers are shared scratch,
/// allocated once at the widest layer's size.
#[derive(Debug, Default)]
pub(crate) struct DeepWs<F: Scalar> {
    /// One per hidden layer, then one for the head's input (index `n_hidden`).
    layers: Vec<LayerWs<F>>,
    /// The dropped sparse X̃ (the pattern of X), for the first convolution or GCNII's stem.
    x_sparse: Option<SparseBuf<F>>,
    /// ÂX̃ (or ÂX) of a first convolution that aggregates sparse features first.
    s0_sparse: Option<SparseBuf<F>>,
    /// The dense accumulator of the sparse product ÂX̃ (length in_dim).
    spgemm_tmp: Vec<F>,
    /// GCNII's stem: the dropped dense X̃ and its mask.
    stem_x: Array2<F>,
    stem_mask: Array2<F>,
    /// The last pass dropped the stem's input.
    stem_dropped: bool,
    /// GCNII: H_0 = ReLU(Lin(X̃)) and, in backward, ∂L/∂H_0.
    h0: Array2<F>,
    dh0: Array2<F>,
    /// JK: its pass, its output and ∂L/∂H_l of every hidden layer.
    jk: JkWs<F>,
    jk_out: Array2<F>,
    jk_grads: Vec<Array2<F>>,
    /// The logits, n × out_dim.
    logits: Array2<F>,
    /// Flat scratch: T = H·W of a TransformFirst convolution, Âᵀ·G or G·Wᵀ in backward,
    /// GCNII's ∂L/∂S.
    tmp: Vec<F>,
    /// Flat: a normalised layer's convolution output (forward).
    pre: Vec<F>,
    /// Flat: the residual skip X·P (forward) and the skip's gradient (backward).
    skip: Vec<F>,
    /// Flat gradient buffers: ∂L/∂logits, then each layer's ∂L/∂H, in `g`; `g2` takes the
    /// outputs that cannot be written in place (then the two are swapped).
    g: Vec<F>,
    g2: Vec<F>,
    /// The normalisation layers' statistics.
    norm: NormScratch,
}

/// One layer's buffers (a hidden layer, or the head's input).
#[derive(Debug, Default)]
struct LayerWs<F: Scalar> {
    /// The dropped dense input H̃ = H ⊙ M and the mask M (when `dropped`).
    hd: Array2<F>,
    mask: Array2<F>,
    /// The last pass dropped this layer's input.
    dropped: bool,
    /// S = ÂH̃ of an AggregateFirst convolution on a dense input, or GCNII's S.
    s: Array2<F>,
    /// The ReLU output (hidden layers).
    act: Array2<F>,
    /// Residual: the layer's output ReLU(·) + skip.
    out: Array2<F>,
    /// The normalisation's pass.
    bn: BatchNormCache<F>,
    pn: PairNormCache<F>,
}

/// The features as a borrowed layer input.
fn x_in<F: Scalar>(x: &Features<F>) -> InRef<'_, F> {
    match x {
        Features::Dense(d) => InRef::Dense(d.view()),
        Features::Sparse(s) => InRef::Sparse(s.x(), s.x_t()),
    }
}

/// Dropout of `raw` from `rng` with rate `p` (training, p > 0): a dense input into `hd` with
/// its mask in `mask`, sparse features into the values of `sparse`. Returns whether it
/// dropped. Bit for bit [`drop_input`].
fn drop_into<F: Scalar>(
    raw: InRef<'_, F>,
    x: &Features<F>,
    p: f64,
    rng: Option<&mut ChaCha8Rng>,
    hd: &mut Array2<F>,
    mask: &mut Array2<F>,
    sparse: &mut Option<SparseBuf<F>>,
    par: Par,
) -> bool {
    let Some(rng) = rng.filter(|_| p > 0.0) else {
        return false;
    };
    match (raw, x) {
        (InRef::Dense(h), _) => {
            ensure(mask, h.dim());
            if let Some(m) = mask.as_slice_mut() {
                rng.fill_dropout_mask(p, m, par);
            }
            ensure(hd, h.dim());
            Zip::from(&mut *hd)
                .and(h)
                .and(&*mask)
                .for_each(|o, &v, &m| *o = v * m);
        }
        (InRef::Sparse(..), Features::Sparse(s)) => {
            let buf = sparse.get_or_insert_with(|| SparseBuf::new(s.x().to_owned()));
            let vals = buf.values_mut();
            rng.fill_dropout_mask(p, vals, par);
            for (o, &v) in vals.iter_mut().zip(s.x().data()) {
                *o = v * *o;
            }
            buf.sync_transpose();
        }
        (InRef::Sparse(..), Features::Dense(_)) => unreachable!("a sparse input is X"),
    }
    true
}

/// A layer's input in a pass: `raw`, or its dropped copy.
fn dropped_in<'s, F: Scalar>(
    raw: InRef<'s, F>,
    dropped: bool,
    hd: &'s Array2<F>,
    sparse: &'s Option<SparseBuf<F>>,
) -> InRef<'s, F> {
    match (dropped, raw) {
        (false, r) => r,
        (true, InRef::Dense(_)) => InRef::Dense(hd.view()),
        (true, InRef::Sparse(..)) => sparse
            .as_ref()
            .unwrap_or_else(|| unreachable!("a dropped sparse input"))
            .as_in(),
    }
}

/// What a convolution's backward needs from its pass on `input`: S = ÂH̃ (AggregateFirst,
/// dense in `s`, sparse in `s_sparse`) or its input (TransformFirst).
fn conv_saved<'s, F: Scalar>(
    conv: &GcnConv<F>,
    input: InRef<'s, F>,
    s: &'s Array2<F>,
    s_sparse: &'s Option<SparseBuf<F>>,
) -> InRef<'s, F> {
    match (conv.order, input) {
        (Order::AggregateFirst, InRef::Dense(_)) => InRef::Dense(s.view()),
        (Order::AggregateFirst, InRef::Sparse(..)) => s_sparse
            .as_ref()
            .unwrap_or_else(|| unreachable!("ÂX̃ of the pass"))
            .as_in(),
        (_, i) => i,
    }
}

/// z ← Â·H·W + 1·bᵀ for `conv` on `input`, keeping S = ÂH in `s` (dense) or `s_sparse`
/// (sparse features) for AggregateFirst. Bit for bit [`GcnConv::forward`]; allocates nothing
/// once the buffers have held a pass on the same data.
#[allow(clippy::too_many_arguments)]
fn conv_forward<F: Scalar>(
    conv: &GcnConv<F>,
    adj: &NormAdj<F>,
    input: InRef<'_, F>,
    s: &mut Array2<F>,
    s_sparse: &mut Option<SparseBuf<F>>,
    spgemm_tmp: &mut Vec<F>,
    tmp: &mut Vec<F>,
    mut z: ArrayViewMut2<'_, F>,
    par: Par,
) {
    if conv.order == Order::AggregateFirst {
        let agg = match input {
            InRef::Dense(h) => {
                ensure(s, h.dim());
                spmm(F::one(), adj.a(), h, F::zero(), s.view_mut(), par);
                InRef::Dense(s.view())
            }
            InRef::Sparse(xs, _) => {
                let buf = s_sparse.get_or_insert_with(|| SparseBuf::new(&adj.a() * &xs));
                spgemm_tmp.resize(xs.cols(), F::zero());
                sprs::smmp::numeric(adj.a(), xs, buf.x_mut(), spgemm_tmp);
                buf.sync_transpose();
                buf.as_in()
            }
        };
        conv.apply(adj, agg, tmp, z.view_mut(), par);
    } else {
        conv.apply(adj, input, tmp, z.view_mut(), par);
    }
    if let Some(b) = &conv.bias {
        add_bias(z, b.value.row(0));
    }
}

impl<F: Scalar> DeepGcn<F> {
    /// Whether the trainer's passes run on the reused workspace (not with checkpointing,
    /// whose point is to keep fewer activations than the workspace holds).
    fn uses_workspace(&self) -> bool {
        self.cfg.checkpoint == 0
    }

    /// Width of the flat buffers: the widest of the hidden width, the output width and the
    /// head's input.
    fn flat_width(&self) -> usize {
        let h = self.cfg.hidden_dim;
        let head_in = self.head.as_ref().map_or(0, |l| l.in_dim());
        h.max(self.cfg.out_dim).max(head_in)
    }

    /// The undropped input of hidden layer `l` (or of the head, `l = n_hidden`) after `prev`.
    fn raw_input<'s>(
        &self,
        x: &'s Features<F>,
        prev: Option<&'s LayerWs<F>>,
        h0: &'s Array2<F>,
    ) -> InRef<'s, F> {
        match prev {
            Some(p) if self.cfg.variant == Variant::Residual => InRef::Dense(p.out.view()),
            Some(p) => InRef::Dense(p.act.view()),
            None if self.cfg.variant == Variant::Gcnii => InRef::Dense(h0.view()),
            None => x_in(x),
        }
    }

    /// The forward pass into `ws`: training (dropout from `key`'s streams, batch statistics)
    /// when `key` is set, evaluation otherwise; the logits are `ws.logits`. Bit for bit the
    /// fresh-buffer pass ([`Model::forward_train`] or [`Model::predict`]); allocates nothing
    /// once `ws` has held a pass on the same data. Running statistics are not updated here.
    fn forward_ws(
        &self,
        ws: &mut DeepWs<F>,
        adj: &NormAdj<F>,
        x: &Features<F>,
        key: Option<u64>,
        par: Par,
    ) {
        let n = adj.n_nodes();
        let h = self.cfg.hidden_dim;
        let nh = self.n_hidden();
        let mode = if key.is_some() {
            Mode::Train
        } else {
            Mode::Eval
        };
        let width = n * self.flat_width();
        let DeepWs {
            layers,
            x_sparse,
            s0_sparse,
            spgemm_tmp,
            stem_x,
            stem_mask,
            stem_dropped,
            h0,
            jk,
            jk_out,
            logits,
            tmp,
            pre,
            skip,
            g,
            g2,
            norm,
            ..
        } = ws;
        for b in [&mut *tmp, &mut *pre, &mut *skip, &mut *g, &mut *g2] {
            grow(b, width);
        }
        if layers.len() != nh + 1 {
            layers.resize_with(nh + 1, LayerWs::default);
        }
        // GCNII's stem: H_0 = ReLU(Lin(drop(X))).
        if let Some(stem) = &self.stem {
            let mut rng = key.map(|k| slot_rng(k, 0));
            *stem_dropped = drop_into(
                x_in(x),
                x,
                self.cfg.input_dropout,
                rng.as_mut(),
                stem_x,
                stem_mask,
                x_sparse,
                par,
            );
            let xin = match (*stem_dropped, x) {
                (false, _) => x_in(x),
                (true, Features::Dense(_)) => InRef::Dense(stem_x.view()),
                (true, Features::Sparse(_)) => x_sparse
                    .as_ref()
                    .unwrap_or_else(|| unreachable!("a dropped sparse input"))
                    .as_in(),
            };
            ensure(h0, (n, h));
            stem.forward_into(xin, h0.view_mut(), par);
            relu_inplace(h0.view_mut());
        }
        let residual = self.cfg.variant == Variant::Residual;
        for l in 0..nh {
            let (done, rest) = layers.split_at_mut(l);
            let cur = &mut rest[0];
            let raw = self.raw_input(x, done.last(), h0);
            let mut rng = key.map(|k| slot_rng(k, l as u64 + 1));
            let p = self.p_before(l);
            cur.dropped = drop_into(
                raw,
                x,
                p,
                rng.as_mut(),
                &mut cur.hd,
                &mut cur.mask,
                x_sparse,
                par,
            );
            // Residual skip, from the undropped input.
            let skip_v = if residual {
                match (&self.proj, l) {
                    (Some(pr), 0) => {
                        pr.forward_into(raw, view_mut(skip, (n, h)), par);
                        Some(view(skip, (n, h)))
                    }
                    _ => match raw {
                        InRef::Dense(d) => Some(d),
                        InRef::Sparse(..) => None,
                    },
                }
            } else {
                None
            };
            let hin = dropped_in(raw, cur.dropped, &cur.hd, x_sparse);
            let normed = self.norms.get(l);
            ensure(&mut cur.act, (n, h));
            let z = match normed {
                Some(_) => view_mut(pre, (n, h)),
                None => cur.act.view_mut(),
            };
            if self.cfg.variant == Variant::Gcnii {
                let InRef::Dense(hin) = hin else {
                    unreachable!("GCNII hidden layers have dense inputs")
                };
                ensure(&mut cur.s, (n, h));
                self.gconvs[l].forward_into(adj, hin, h0.view(), cur.s.view_mut(), z, par);
            } else {
                conv_forward(
                    &self.convs[l],
                    adj,
                    hin,
                    &mut cur.s,
                    s0_sparse,
                    spgemm_tmp,
                    tmp,
                    z,
                    par,
                );
            }
            match normed {
                None => {}
                Some(NormLayer::Batch(bn)) => {
                    bn.forward_into(
                        view(pre, (n, h)),
                        mode,
                        cur.act.view_mut(),
                        &mut cur.bn,
                        norm,
                    );
                }
                Some(NormLayer::Pair(pn)) => {
                    pn.forward_into(view(pre, (n, h)), cur.act.view_mut(), &mut cur.pn, norm);
                }
            }
            relu_inplace(cur.act.view_mut());
            if residual {
                ensure(&mut cur.out, (n, h));
                match skip_v {
                    Some(s) => Zip::from(&mut cur.out)
                        .and(&cur.act)
                        .and(s)
                        .for_each(|o, &a, &s| *o = a + s),
                    None => cur.out.assign(&cur.act),
                }
            }
        }
        // The head.
        let (done, rest) = layers.split_at_mut(nh);
        let cur = &mut rest[0];
        let mut rng = key.map(|k| slot_rng(k, nh as u64 + 1));
        let out_dim = self.cfg.out_dim;
        ensure(logits, (n, out_dim));
        // The head's input (the last hidden output, or JK's combination) and its dropout.
        let (raw, p) = match self.cfg.variant {
            Variant::Plain | Variant::Residual => (
                self.raw_input(x, done.last(), h0),
                self.p_before(self.convs.len() - 1),
            ),
            Variant::Gcnii | Variant::Jk(_) => {
                let raw = match &self.jk {
                    Some(j) => {
                        ensure(jk_out, (n, j.out_dim(h, nh)));
                        let done: &[LayerWs<F>] = done;
                        j.forward_into(
                            nh,
                            move |l| done[l].act.view(),
                            jk_out.view_mut(),
                            jk,
                            key.is_some(),
                        );
                        InRef::Dense(jk_out.view())
                    }
                    None => self.raw_input(x, done.last(), h0),
                };
                (raw, self.cfg.dropout)
            }
        };
        cur.dropped = drop_into(
            raw,
            x,
            p,
            rng.as_mut(),
            &mut cur.hd,
            &mut cur.mask,
            x_sparse,
            par,
        );
        let hin = dropped_in(raw, cur.dropped, &cur.hd, x_sparse);
        match self.cfg.variant {
            Variant::Plain | Variant::Residual => conv_forward(
                &self.convs[self.convs.len() - 1],
                adj,
                hin,
                &mut cur.s,
                s0_sparse,
                spgemm_tmp,
                tmp,
                logits.view_mut(),
                par,
            ),
            Variant::Gcnii | Variant::Jk(_) => {
                let head = self
                    .head
                    .as_ref()
                    .unwrap_or_else(|| unreachable!("a Linear head"));
                head.forward_into(hin, logits.view_mut(), par);
            }
        }
    }

    /// Backward from ∂L/∂logits (in `ws.g`) through the training pass held in `ws` (on the
    /// same `x`): **adds** every parameter's gradient, bit for bit as [`Model::backward`].
    /// Allocates nothing once `ws` has held a backward pass on the same data.
    fn backward_ws(&mut self, ws: &mut DeepWs<F>, adj: &NormAdj<F>, x: &Features<F>, par: Par) {
        let n = adj.n_nodes();
        let h = self.cfg.hidden_dim;
        let nh = self.n_hidden();
        let variant = self.cfg.variant;
        let DeepWs {
            layers,
            x_sparse,
            s0_sparse,
            stem_x,
            stem_dropped,
            h0,
            dh0,
            jk,
            jk_out,
            jk_grads,
            tmp,
            skip,
            g,
            g2,
            norm,
            ..
        } = ws;
        // The head: ∂L/∂(last hidden output) into `g` (n × h).
        let mut has_g = true;
        {
            let (done, rest) = layers.split_at_mut(nh);
            let cur = &rest[0];
            match variant {
                Variant::Plain | Variant::Residual => {
                    let l = self.convs.len() - 1;
                    let raw = self.raw_input(x, done.last(), h0);
                    let hin = dropped_in(raw, cur.dropped, &cur.hd, x_sparse);
                    let saved = conv_saved(&self.convs[l], hin, &cur.s, s0_sparse);
                    has_g = nh > 0;
                    self.convs[l].backward_into(adj, saved, g, has_g, tmp, par);
                    if has_g && cur.dropped {
                        Zip::from(view_mut(g, (n, h)))
                            .and(&cur.mask)
                            .for_each(|d, &m| *d *= m);
                    }
                }
                Variant::Gcnii | Variant::Jk(_) => {
                    let raw = match &self.jk {
                        Some(_) => InRef::Dense(jk_out.view()),
                        None => self.raw_input(x, done.last(), h0),
                    };
                    let hin = dropped_in(raw, cur.dropped, &cur.hd, x_sparse);
                    let head = self
                        .head
                        .as_mut()
                        .unwrap_or_else(|| unreachable!("a Linear head"));
                    let (w_in, w_out) = (head.in_dim(), head.out_dim());
                    head.backward_into(
                        hin,
                        view(g, (n, w_out)),
                        Some(view_mut(g2, (n, w_in))),
                        par,
                    );
                    std::mem::swap(g, g2);
                    if cur.dropped {
                        Zip::from(view_mut(g, (n, w_in)))
                            .and(&cur.mask)
                            .for_each(|d, &m| *d *= m);
                    }
                    if let Some(j) = self.jk.as_mut() {
                        if jk_grads.len() != nh {
                            jk_grads.resize_with(nh, || Array2::zeros((0, 0)));
                        }
                        let done: &[LayerWs<F>] = done;
                        j.backward_into(
                            nh,
                            move |l| done[l].act.view(),
                            jk,
                            view(g, (n, w_in)),
                            jk_grads,
                        );
                        view_mut(g, (n, h)).assign(&jk_grads[nh - 1]);
                    }
                }
            }
        }
        if self.stem.is_some() {
            ensure(dh0, (n, h));
            dh0.fill(F::zero());
        }
        let residual = variant == Variant::Residual;
        for l in (0..nh).rev() {
            if !has_g {
                break;
            }
            let (done, rest) = layers.split_at_mut(l);
            let cur = &rest[0];
            let first_gcn = l == 0 && variant != Variant::Gcnii;
            let raw = self.raw_input(x, done.last(), h0);
            // Residual: the skip's gradient.
            let mut has_skip = false;
            if residual {
                match (&mut self.proj, l) {
                    (Some(p), 0) => p.backward_into(raw, view(g, (n, h)), None, par),
                    _ if !first_gcn => {
                        skip[..n * h].copy_from_slice(&g[..n * h]);
                        has_skip = true;
                    }
                    _ => {}
                }
            }
            relu_backward_inplace(view_mut(g, (n, h)), cur.act.view());
            match self.norms.get_mut(l) {
                None => {}
                Some(NormLayer::Batch(bn)) => {
                    bn.backward_into(&cur.bn, view(g, (n, h)), view_mut(g2, (n, h)), norm);
                    std::mem::swap(g, g2);
                }
                Some(NormLayer::Pair(pn)) => {
                    pn.backward_into(&cur.pn, view(g, (n, h)), view_mut(g2, (n, h)), norm);
                    std::mem::swap(g, g2);
                }
            }
            let hin = dropped_in(raw, cur.dropped, &cur.hd, x_sparse);
            if variant == Variant::Gcnii {
                self.gconvs[l].backward_into(
                    adj,
                    cur.s.view(),
                    view(g, (n, h)),
                    dh0.view_mut(),
                    view_mut(tmp, (n, h)),
                    view_mut(g2, (n, h)),
                    par,
                );
                std::mem::swap(g, g2);
            } else {
                let saved = conv_saved(&self.convs[l], hin, &cur.s, s0_sparse);
                self.convs[l].backward_into(adj, saved, g, !first_gcn, tmp, par);
            }
            if first_gcn {
                has_g = false;
                continue;
            }
            let mut dh = view_mut(g, (n, h));
            if cur.dropped {
                Zip::from(&mut dh).and(&cur.mask).for_each(|d, &m| *d *= m);
            }
            if has_skip {
                Zip::from(&mut dh)
                    .and(view(skip, (n, h)))
                    .for_each(|d, &s| *d += s);
            }
            if l > 0 {
                if let Some(jg) = jk_grads.get(l - 1).filter(|_| self.jk.is_some()) {
                    Zip::from(&mut dh).and(jg).for_each(|d, &v| *d += v);
                }
            }
        }
        // GCNII's stem: ∂L/∂H_0 = g (from layer 0's input) + Σ α·∂L/∂S_l.
        if let Some(stem) = self.stem.as_mut() {
            if has_g {
                Zip::from(&mut *dh0)
                    .and(view(g, (n, h)))
                    .for_each(|d, &v| *d += v);
            }
            relu_backward_inplace(dh0.view_mut(), h0.view());
            let xin = match (*stem_dropped, x) {
                (false, _) => x_in(x),
                (true, Features::Dense(_)) => InRef::Dense(stem_x.view()),
                (true, Features::Sparse(_)) => x_sparse
                    .as_ref()
                    .unwrap_or_else(|| unreachable!("a dropped sparse input"))
                    .as_in(),
            };
            stem.backward_into(xin, dh0.view(), None, par);
        }
    }

    /// Calls `f` on every parameter in [`Model::visit_params`]' order, without mutating.
    fn for_each_param(&self, f: &mut dyn FnMut(&Param<F>)) {
        let mut visit = |p: &Param<F>| f(p);
        let linear = |l: &Linear<F>, f: &mut dyn FnMut(&Param<F>)| {
            f(&l.weight);
            if let Some(b) = &l.bias {
                f(b);
            }
        };
        if let Some(s) = &self.stem {
            linear(s, &mut visit);
        }
        if let Some(p) = &self.proj {
            linear(p, &mut visit);
        }
        for c in &self.convs {
            visit(&c.weight);
            if let Some(b) = &c.bias {
                visit(b);
            }
        }
        for c in &self.gconvs {
            visit(&c.weight);
        }
        for nl in &self.norms {
            if let NormLayer::Batch(bn) = nl {
                visit(&bn.gamma);
                visit(&bn.beta);
            }
        }
        if let Some(a) = self.jk.as_ref().and_then(|j| j.att.as_ref()) {
            visit(a);
        }
        if let Some(hd) = &self.head {
            linear(hd, &mut visit);
        }
    }
}

/// `snap[k]` ← `v` as a 1 × len row, copying into the existing array when its shape matches.
fn assign_row_at<F: Scalar>(snap: &mut Vec<Array2<F>>, k: usize, v: &Array1<F>) {
    match snap.get_mut(k) {
        Some(s) if s.dim() == (1, v.len()) => s.row_mut(0).assign(v),
        Some(s) => *s = v.clone().insert_axis(Axis(0)),
        None => snap.push(v.clone().insert_axis(Axis(0))),
    }
}
