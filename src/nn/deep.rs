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

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use ndarray::{Array2, ArrayView2, CowArray};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::dropout::{dropout_dense, dropout_sparse};
use super::gcn::{choose_order, GcnCache, GcnConv, Input, LayerShape, Order};
use super::gcnii::{GcniiCache, GcniiConv};
use super::jk::{JkCache, JkMode, JumpingKnowledge};
use super::linear::Linear;
use super::model::{check_widths_and_dropout, input_of};
use super::norm::{BatchNorm, BatchNormCache, PairNorm, PairNormCache};
use super::param::Param;
use super::{Mode, Model};
use crate::graph::{Features, NormAdj};
use crate::kernels::MaskRng;
use crate::kernels::{relu_backward_inplace, relu_inplace};
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
