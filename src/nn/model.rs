//! [`Gcn`]: a stack of [`GcnConv`] layers with ReLU and dropout between them (Kipf & Welling's
//! model; 2 layers by default).

use std::borrow::Cow;

use ndarray::{Array2, ArrayView2, ArrayViewMut2, CowArray, Zip};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::gcn::{aggregate, choose_order, GcnConv, Input, LayerShape, Order};
use super::param::Param;
use super::workspace::{ensure, grow, view, view_mut, InRef, Scratch, SparseBuf};
use super::{Mode, Model};
use crate::graph::{Features, NormAdj};
use crate::kernels::{
    add_bias, bias_relu, bias_relu_dropout_fold, dropout_relu_backward_code, relu_backward_inplace,
    spmm, MaskRng,
};
use crate::{ConfigError, Par, Scalar};

/// The architecture of a [`Gcn`]. Defaults are Kipf & Welling's (2 layers, hidden 16,
/// dropout 0.5 on the input and between layers, no bias as in their `GraphConvolution`, order
/// chosen by the cost model).
#[derive(Debug, Clone, PartialEq)]
pub struct GcnConfig {
    /// Input width (feature columns).
    pub in_dim: usize,
    /// Hidden width.
    pub hidden_dim: usize,
    /// Output width (classes).
    pub out_dim: usize,
    /// Number of `GcnConv` layers (≥ 1).
    pub n_layers: usize,
    /// Dropout before every layer but the first.
    pub dropout: f64,
    /// Dropout on the input features (Kipf: the same as `dropout`).
    pub input_dropout: f64,
    /// Whether layers have a bias.
    pub bias: bool,
    /// Evaluation order of every layer.
    pub order: Order,
}

impl Default for GcnConfig {
    fn default() -> Self {
        GcnConfig {
            in_dim: 0,
            hidden_dim: 16,
            out_dim: 0,
            n_layers: 2,
            dropout: 0.5,
            input_dropout: 0.5,
            bias: false,
            order: Order::Auto,
        }
    }
}

impl GcnConfig {
    /// Checks the configuration.
    ///
    /// # Errors
    /// The first rule broken.
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.n_layers == 0 {
            return Err(ConfigError::NoLayers);
        }
        check_widths_and_dropout(
            [self.in_dim, self.hidden_dim, self.out_dim],
            [self.dropout, self.input_dropout],
        )
    }

    /// Layer widths: `[in_dim, hidden_dim, …, out_dim]` (n_layers + 1 entries).
    pub fn dims(&self) -> Vec<usize> {
        let mut d = vec![self.in_dim];
        d.extend(std::iter::repeat_n(self.hidden_dim, self.n_layers - 1));
        d.push(self.out_dim);
        d
    }

    /// Builds the model for `adj` and `x`: resolves each layer's order (the cost model sees
    /// the graph and the input's sparsity) and draws Glorot weights from `rng`, layer by layer.
    ///
    /// # Errors
    /// From [`GcnConfig::check`].
    pub fn init<F: Scalar, R: Rng + ?Sized>(
        &self,
        adj: &NormAdj<F>,
        x: &Features<F>,
        rng: &mut R,
    ) -> Result<Gcn<F>, ConfigError> {
        self.check()?;
        let dims = self.dims();
        let (sparse_nnz, agg_nnz) = match x {
            Features::Sparse(s) => {
                let sx = s.x();
                let xi = sx.indptr();
                let per_row: Vec<usize> = (0..sx.rows()).map(|j| xi.nnz_in_outer_sz(j)).collect();
                let mut bound = 0usize;
                for row in adj.a().outer_iterator() {
                    let r: usize = row.indices().iter().map(|&j| per_row[j as usize]).sum();
                    bound += r.min(s.x().cols());
                }
                (Some(s.x().nnz()), Some(bound))
            }
            Features::Dense(_) => (None, None),
        };
        let layers = (0..self.n_layers)
            .map(|l| {
                let first = l == 0;
                let shape = LayerShape {
                    n_nodes: adj.n_nodes(),
                    nnz_adj: adj.nnz(),
                    in_dim: dims[l],
                    out_dim: dims[l + 1],
                    sparse_input_nnz: if first { sparse_nnz } else { None },
                    sparse_aggregate_nnz: if first { agg_nnz } else { None },
                    first,
                    aggregate_cached: first && self.input_dropout == 0.0,
                };
                let order = choose_order(self.order, &shape);
                GcnConv::new(dims[l], dims[l + 1], self.bias, order, rng)
            })
            .collect();
        Ok(Gcn {
            layers,
            dropout: self.dropout,
            input_dropout: self.input_dropout,
            cached: None,
            ws: Scratch::default(),
        })
    }
}

/// A GCN: `GcnConv → ReLU → dropout → … → GcnConv` (logits), with dropout on the input.
#[derive(Debug, Clone)]
pub struct Gcn<F: Scalar> {
    /// The layers, input first.
    pub layers: Vec<GcnConv<F>>,
    dropout: f64,
    input_dropout: f64,
    /// ÂX, kept when the first layer aggregates first: used by every evaluation pass, and by
    /// training passes when the input dropout is 0.
    cached: Option<Input<'static, F>>,
    /// The buffers of the trainer's passes ([`Model::train_pass`], [`Model::eval_pass`]),
    /// reused from epoch to epoch; empty in a clone.
    ws: Scratch<GcnWs<F>>,
}

/// What [`Gcn::backward`] needs from a forward pass: the features and the pass's buffers.
#[derive(Debug)]
pub struct GcnModelCache<'a, F: Scalar> {
    x: &'a Features<F>,
    ws: Box<GcnWs<F>>,
}

/// The buffers of one pass of a [`Gcn`], kept for backward and reused by the next pass.
///
/// Only what backward needs lives from forward to backward: per hidden layer its output H
/// (the next layer's input) and one byte per element folding the ReLU indicator with the
/// dropout mask; S = ÂH of AggregateFirst layers; X̃ when a TransformFirst first layer drops a
/// dense input; the logits. The temporaries (T = H·W, X̃ of an AggregateFirst first layer, the
/// drawn mask, Âᵀ·G or G·Wᵀ) share one flat scratch and the gradients (∂L/∂logits, then each
/// layer's ∂L/∂H, in place) another, each allocated once at the largest layer's size.
/// Evaluation passes use the same buffers. See `docs/BENCHMARKS.md`, "Memory: products-like,
/// 3 layers × 256".
#[derive(Debug, Default)]
pub(crate) struct GcnWs<F: Scalar> {
    /// Dropped dense input X̃, kept for dW when layer 0 is TransformFirst (an AggregateFirst
    /// layer 0 needs only ÂX̃, so it draws X̃ into `tmp`).
    x_dense: Array2<F>,
    /// Dropped sparse input X̃ (the pattern of X).
    x_sparse: Option<SparseBuf<F>>,
    /// First layer, aggregating first from a sparse input without the cached ÂX: ÂX̃.
    s0_sparse: Option<SparseBuf<F>>,
    /// The dense accumulator of the sparse product ÂX̃ (length in_dim).
    spgemm_tmp: Vec<F>,
    layers: Vec<LayerWs<F>>,
    /// The logits (the last layer's output), n × out_dim.
    logits: Array2<F>,
    /// Flat scratch shared by every layer: T = H·W (forward, TransformFirst), X̃ of an
    /// AggregateFirst layer 0, the drawn dropout mask, Âᵀ·G or G·Wᵀ (backward).
    tmp: Vec<F>,
    /// Flat gradient buffer: ∂L/∂logits, then each layer's ∂L/∂H written over it.
    grad: Vec<F>,
    /// The last pass dropped the input.
    drop_in: bool,
    /// The last pass used the cached ÂX.
    used_cached: bool,
    /// The last pass dropped the hidden activations.
    drop_hidden: bool,
}

/// One layer's buffers.
#[derive(Debug, Default)]
struct LayerWs<F> {
    /// S = ÂH (AggregateFirst), n × in.
    s: Array2<F>,
    /// Hidden layers: the output ReLU(Z + b) ⊙ M (the next layer's input), n × out.
    h: Array2<F>,
    /// Hidden layers with dropout: the folded ReLU·dropout code of each element (see
    /// [`bias_relu_dropout_fold`]), n × out.
    code: Array2<u8>,
}

/// Layer 0's input of a pass: X, or X̃ when the input was dropped.
fn first_input<'s, F: Scalar>(
    x: &'s Features<F>,
    drop_in: bool,
    x_dense: &'s Array2<F>,
    x_sparse: &'s Option<SparseBuf<F>>,
) -> InRef<'s, F> {
    match (x, drop_in) {
        (Features::Dense(d), false) => InRef::Dense(d.view()),
        (Features::Sparse(s), false) => InRef::Sparse(s.x(), s.x_t()),
        (Features::Dense(_), true) => InRef::Dense(x_dense.view()),
        (Features::Sparse(_), true) => x_sparse
            .as_ref()
            .unwrap_or_else(|| unreachable!("a dropped sparse input"))
            .as_in(),
    }
}

impl<F: Scalar> Gcn<F> {
    /// A model from existing layers (e.g. loaded from a checkpoint), with the dropout rates it
    /// trains with. The layers' orders must already be resolved (not `Auto`).
    pub fn from_layers(layers: Vec<GcnConv<F>>, dropout: f64, input_dropout: f64) -> Self {
        Gcn {
            layers,
            dropout,
            input_dropout,
            cached: None,
            ws: Scratch::default(),
        }
    }

    /// Dropout between layers.
    pub fn dropout(&self) -> f64 {
        self.dropout
    }

    /// Dropout on the input features.
    pub fn input_dropout(&self) -> f64 {
        self.input_dropout
    }

    /// Computes and keeps ÂX if the first layer aggregates first. Call once before training
    /// (the trainer does); without it every pass recomputes ÂX.
    pub fn prepare(&mut self, adj: &NormAdj<F>, x: &Features<F>, par: Par) {
        self.cached = (self.layers[0].order == Order::AggregateFirst)
            .then(|| aggregate(adj, &input_of(x), par));
        self.ws = Scratch::default();
    }

    /// Forward pass: returns the logits (n × out_dim) and the cache for [`Gcn::backward`].
    /// In `Mode::Train`, dropout masks are drawn from `rng` in a fixed order (input first).
    ///
    /// # Panics
    /// If `x` does not match the model's input width or `adj`'s node count.
    pub fn forward<'a, R: MaskRng + ?Sized>(
        &self,
        adj: &NormAdj<F>,
        x: &'a Features<F>,
        mode: Mode,
        rng: &mut R,
        par: Par,
    ) -> (Array2<F>, GcnModelCache<'a, F>) {
        let mut ws = Box::<GcnWs<F>>::default();
        self.forward_ws(&mut ws, adj, x, mode, Some(rng), par, &mut |_, _| {});
        let logits = std::mem::take(&mut ws.logits);
        (logits, GcnModelCache { x, ws })
    }

    /// Length of the flat scratch `tmp` for a pass: the widest of the temporaries it holds.
    fn tmp_len(&self, n: usize, train: bool, x_in_tmp: bool) -> usize {
        let drop_hidden = train && self.dropout > 0.0;
        let n_layers = self.layers.len();
        let mut w = 0;
        for (l, layer) in self.layers.iter().enumerate() {
            let (din, dout) = (layer.in_dim(), layer.out_dim());
            match layer.order {
                Order::AggregateFirst if train && l > 0 => w = w.max(din),
                Order::AggregateFirst => {}
                _ => w = w.max(dout),
            }
            if drop_hidden && l + 1 < n_layers {
                w = w.max(dout);
            }
            if l == 0 && x_in_tmp {
                w = w.max(din);
            }
        }
        n * w
    }

    /// Length of the flat gradient buffer: ∂L/∂logits and every ∂L/∂H but layer 0's.
    fn grad_len(&self, n: usize) -> usize {
        let last = self.layers.last().map_or(0, |l| l.out_dim());
        let widest_in = self.layers.iter().skip(1).map(|l| l.in_dim()).max();
        n * last.max(widest_in.unwrap_or(0))
    }

    /// The forward pass into `ws`, calling `visit(l, H_{l+1})` on each hidden layer's output
    /// (the ReLU output in evaluation, after dropout in training). The logits are
    /// `ws.logits`. Dropout masks (training) come from `rng`, input first. Allocates nothing
    /// once `ws` has held a pass on the same data.
    #[allow(clippy::too_many_arguments)]
    fn forward_ws<R: MaskRng + ?Sized>(
        &self,
        ws: &mut GcnWs<F>,
        adj: &NormAdj<F>,
        x: &Features<F>,
        mode: Mode,
        mut rng: Option<&mut R>,
        par: Par,
        visit: &mut dyn FnMut(usize, ArrayView2<'_, F>),
    ) {
        let n = adj.n_nodes();
        let train = mode == Mode::Train;
        let drop_in = train && self.input_dropout > 0.0;
        let use_cached = self.cached.is_some() && !drop_in;
        let drop_hidden = train && self.dropout > 0.0;
        // A dropped dense input that only ÂX̃ needs lives in the scratch.
        let x_in_tmp = drop_in
            && matches!(x, Features::Dense(_))
            && self.layers.first().map(|l| l.order) == Some(Order::AggregateFirst);
        ws.drop_in = drop_in;
        ws.used_cached = use_cached;
        ws.drop_hidden = drop_hidden;
        let GcnWs {
            x_dense,
            x_sparse,
            s0_sparse,
            spgemm_tmp,
            layers: lws,
            logits,
            tmp,
            ..
        } = ws;
        let n_layers = self.layers.len();
        if lws.len() != n_layers {
            lws.resize_with(n_layers, LayerWs::default);
        }
        if n_layers == 0 {
            ensure(logits, (n, 0));
            return;
        }
        grow(tmp, self.tmp_len(n, train, x_in_tmp));
        if drop_in {
            let rng = rng
                .as_deref_mut()
                .unwrap_or_else(|| unreachable!("training needs an RNG"));
            let p = self.input_dropout;
            match x {
                Features::Dense(d) if x_in_tmp => {
                    // X̃ = X ⊙ M in the scratch, then S₀ = ÂX̃ (all layer 0 keeps).
                    let m = &mut tmp[..d.len()];
                    rng.fill_dropout_mask(p, m, par);
                    let mut xd = view_mut(tmp, d.dim());
                    Zip::from(&mut xd).and(d).for_each(|o, &v| *o = v * *o);
                    let s0 = &mut lws[0].s;
                    ensure(s0, d.dim());
                    spmm(F::one(), adj.a(), xd.view(), F::zero(), s0.view_mut(), par);
                }
                Features::Dense(d) => {
                    // X̃ = X ⊙ M, with M drawn into X̃'s storage first.
                    ensure(x_dense, d.dim());
                    if let Some(m) = x_dense.as_slice_mut() {
                        rng.fill_dropout_mask(p, m, par);
                    }
                    Zip::from(&mut *x_dense)
                        .and(d)
                        .for_each(|o, &v| *o = v * *o);
                }
                Features::Sparse(s) => {
                    let buf = x_sparse.get_or_insert_with(|| SparseBuf::new(s.x().to_owned()));
                    let vals = buf.values_mut();
                    rng.fill_dropout_mask(p, vals, par);
                    for (o, &v) in vals.iter_mut().zip(s.x().data()) {
                        *o = v * *o;
                    }
                    buf.sync_transpose();
                }
            }
        }
        for (l, layer) in self.layers.iter().enumerate() {
            let (prev, rest) = lws.split_at_mut(l);
            let LayerWs { s: s_buf, h, code } = &mut rest[0];
            let last = l + 1 == n_layers;
            let dim = (n, layer.out_dim());
            let z = if last { &mut *logits } else { &mut *h };
            ensure(z, dim);
            if layer.order == Order::AggregateFirst {
                let s = if l == 0 && use_cached {
                    self.cached
                        .as_ref()
                        .unwrap_or_else(|| unreachable!("the cached ÂX"))
                        .as_in()
                } else if l == 0 && x_in_tmp {
                    InRef::Dense(s_buf.view())
                } else {
                    let input = match prev.last() {
                        None => first_input(x, drop_in, x_dense, x_sparse),
                        Some(p) => InRef::Dense(p.h.view()),
                    };
                    match input {
                        InRef::Dense(hin) => {
                            ensure(s_buf, hin.dim());
                            spmm(F::one(), adj.a(), hin, F::zero(), s_buf.view_mut(), par);
                            InRef::Dense(s_buf.view())
                        }
                        InRef::Sparse(xs, _) => {
                            let buf =
                                s0_sparse.get_or_insert_with(|| SparseBuf::new(&adj.a() * &xs));
                            spgemm_tmp.resize(xs.cols(), F::zero());
                            sprs::smmp::numeric(adj.a(), xs, buf.x_mut(), spgemm_tmp);
                            buf.sync_transpose();
                            buf.as_in()
                        }
                    }
                };
                layer.apply(adj, s, tmp, z.view_mut(), par);
            } else {
                let input = match prev.last() {
                    None => first_input(x, drop_in, x_dense, x_sparse),
                    Some(p) => InRef::Dense(p.h.view()),
                };
                layer.apply(adj, input, tmp, z.view_mut(), par);
            }
            let bias = layer.bias.as_ref().map(|b| b.value.row(0));
            if last {
                if let Some(b) = bias {
                    add_bias(z.view_mut(), b);
                }
                break;
            }
            if drop_hidden {
                let rng = rng
                    .as_deref_mut()
                    .unwrap_or_else(|| unreachable!("training needs an RNG"));
                // The mask is drawn into the scratch (T is dead once Z is formed).
                rng.fill_dropout_mask(self.dropout, &mut tmp[..dim.0 * dim.1], par);
                ensure(code, dim);
                bias_relu_dropout_fold(h.view_mut(), bias, view(tmp, dim), code.view_mut());
            } else {
                bias_relu(h.view_mut(), bias);
            }
            visit(l, h.view());
        }
    }

    /// Inference: the logits of an evaluation pass (no dropout), keeping nothing for backward,
    /// so no activation is copied. Equal, bit for bit, to the logits of
    /// `forward(.., Mode::Eval, ..)`.
    ///
    /// # Panics
    /// As [`Gcn::forward`].
    pub fn predict(&self, adj: &NormAdj<F>, x: &Features<F>, par: Par) -> Array2<F> {
        self.run_eval(adj, x, par, &mut |_, _| {})
    }

    /// The evaluation pass behind [`Gcn::predict`], calling `visit(l, H_{l+1})` on each hidden
    /// layer's ReLU output; returns the logits.
    fn run_eval(
        &self,
        adj: &NormAdj<F>,
        x: &Features<F>,
        par: Par,
        visit: &mut dyn FnMut(usize, ArrayView2<'_, F>),
    ) -> Array2<F> {
        let mut ws = GcnWs::default();
        self.forward_ws(
            &mut ws,
            adj,
            x,
            Mode::Eval,
            None::<&mut ChaCha8Rng>,
            par,
            visit,
        );
        std::mem::take(&mut ws.logits)
    }

    /// Backward pass from dL/dlogits: **adds** every parameter's gradient (zero them first
    /// with [`Gcn::zero_grad`]).
    pub fn backward(
        &mut self,
        adj: &NormAdj<F>,
        cache: GcnModelCache<'_, F>,
        dlogits: Array2<F>,
        par: Par,
    ) {
        let GcnModelCache { x, mut ws } = cache;
        let n = adj.n_nodes();
        let out = self.layers.last().map_or(0, |l| l.out_dim());
        assert_eq!(dlogits.dim(), (n, out), "Gcn::backward: dlogits shape");
        grow(&mut ws.grad, self.grad_len(n));
        view_mut(&mut ws.grad, (n, out)).assign(&dlogits);
        self.backward_ws(&mut ws, adj, x, par);
    }

    /// Backward from ∂L/∂logits (in `ws.grad`, which is [`Gcn::grad_len`] long) through the
    /// pass held in `ws` (on the same `x`). Allocates nothing once `ws` has held a backward
    /// pass on the same data.
    fn backward_ws(&mut self, ws: &mut GcnWs<F>, adj: &NormAdj<F>, x: &Features<F>, par: Par) {
        let GcnWs {
            x_dense,
            x_sparse,
            s0_sparse,
            layers: lws,
            tmp,
            grad,
            drop_in,
            used_cached,
            drop_hidden,
            ..
        } = ws;
        let n = adj.n_nodes();
        let keep = F::from_f64_lossy(1.0 / (1.0 - self.dropout));
        let Gcn { layers, cached, .. } = self;
        for l in (0..layers.len()).rev() {
            let (prev, rest) = lws.split_at_mut(l);
            let cur = &rest[0];
            let saved = match layers[l].order {
                Order::AggregateFirst => match (cached.as_ref(), x) {
                    (Some(c), _) if l == 0 && *used_cached => c.as_in(),
                    (_, Features::Sparse(_)) if l == 0 => s0_sparse
                        .as_ref()
                        .unwrap_or_else(|| unreachable!("ÂX̃ of the pass"))
                        .as_in(),
                    _ => InRef::Dense(cur.s.view()),
                },
                _ => match prev.last() {
                    None => first_input(x, *drop_in, x_dense, x_sparse),
                    Some(p) => InRef::Dense(p.h.view()),
                },
            };
            let need_dh = l > 0;
            layers[l].backward_into(adj, saved, grad, need_dh, tmp, par);
            let Some(p) = prev.last() else { break };
            let dh = view_mut(grad, (n, layers[l].in_dim()));
            if *drop_hidden {
                dropout_relu_backward_code(dh, p.code.view(), keep);
            } else {
                relu_backward_inplace(dh, p.h.view());
            }
        }
    }

    /// Zeroes every gradient.
    pub fn zero_grad(&mut self) {
        self.visit_params(&mut |_, p| p.zero_grad());
    }

    /// Calls `f(layer_index, param)` on every parameter, layer by layer (weight, then bias).
    pub fn visit_params(&mut self, f: &mut dyn FnMut(usize, &mut Param<F>)) {
        for (l, layer) in self.layers.iter_mut().enumerate() {
            layer.visit_params(&mut |p| f(l, p));
        }
    }

    /// Copies of every parameter value (for restoring the best epoch).
    pub fn snapshot(&self) -> Vec<Array2<F>> {
        let mut out = Vec::new();
        for layer in &self.layers {
            out.push(layer.weight.value.clone());
            if let Some(b) = &layer.bias {
                out.push(b.value.clone());
            }
        }
        out
    }

    /// [`Gcn::snapshot`] into `snap`, copying into its arrays when they have the right shapes
    /// (no allocation when `snap` holds an earlier snapshot of this model).
    pub fn snapshot_into(&self, snap: &mut Vec<Array2<F>>) {
        let mut k = 0;
        for layer in &self.layers {
            assign_at(snap, k, &layer.weight.value);
            k += 1;
            if let Some(b) = &layer.bias {
                assign_at(snap, k, &b.value);
                k += 1;
            }
        }
        snap.truncate(k);
    }

    /// Restores values taken by [`Gcn::snapshot`].
    ///
    /// # Panics
    /// If the snapshot does not come from this model.
    pub fn restore(&mut self, snap: &[Array2<F>]) {
        let mut k = 0;
        self.visit_params(&mut |_, p| {
            match snap.get(k) {
                Some(v) if v.dim() == p.value.dim() => p.value.assign(v),
                _ => panic!("Gcn::restore: the snapshot comes from another model"),
            }
            k += 1;
        });
        assert_eq!(
            k,
            snap.len(),
            "Gcn::restore: the snapshot comes from another model"
        );
    }

    /// The resolved order of each layer.
    pub fn orders(&self) -> Vec<Order> {
        self.layers.iter().map(|l| l.order).collect()
    }

    /// Number of trainable scalars.
    pub fn n_params(&self) -> usize {
        self.layers
            .iter()
            .map(|l| l.weight.len() + l.bias.as_ref().map_or(0, |b| b.len()))
            .sum()
    }
}

impl<F: Scalar> Model<F> for Gcn<F> {
    type Cache<'a> = GcnModelCache<'a, F>;

    fn prepare(&mut self, adj: &NormAdj<F>, x: &Features<F>, par: Par) {
        Gcn::prepare(self, adj, x, par);
    }

    fn forward_train<'a, R: MaskRng + ?Sized>(
        &mut self,
        adj: &NormAdj<F>,
        x: &'a Features<F>,
        rng: &mut R,
        par: Par,
    ) -> (Array2<F>, GcnModelCache<'a, F>) {
        self.forward(adj, x, Mode::Train, rng, par)
    }

    fn backward(
        &mut self,
        adj: &NormAdj<F>,
        cache: GcnModelCache<'_, F>,
        dlogits: Array2<F>,
        par: Par,
    ) {
        Gcn::backward(self, adj, cache, dlogits, par);
    }

    fn predict(&self, adj: &NormAdj<F>, x: &Features<F>, par: Par) -> Array2<F> {
        Gcn::predict(self, adj, x, par)
    }

    fn visit_params(&mut self, f: &mut dyn FnMut(usize, &mut Param<F>)) {
        Gcn::visit_params(self, f);
    }

    fn n_groups(&self) -> usize {
        self.layers.len()
    }

    fn train_pass<R: MaskRng + ?Sized>(
        &mut self,
        adj: &NormAdj<F>,
        x: &Features<F>,
        rng: &mut R,
        par: Par,
        loss: &mut dyn FnMut(ArrayView2<'_, F>, ArrayViewMut2<'_, F>) -> bool,
    ) {
        let mut ws = self.ws.take();
        self.forward_ws(&mut ws, adj, x, Mode::Train, Some(rng), par, &mut |_, _| {});
        let n = adj.n_nodes();
        grow(&mut ws.grad, self.grad_len(n));
        let GcnWs { logits, grad, .. } = &mut *ws;
        let go = !self.layers.is_empty() && loss(logits.view(), view_mut(grad, logits.dim()));
        if go {
            self.backward_ws(&mut ws, adj, x, par);
        }
        self.ws.put(ws);
    }

    /// The workspace holds nothing that depends on Â's pattern, except ÂX̃ of a first layer
    /// that aggregates sparse features first (its sparsity pattern is that of Â·X): that
    /// case keeps fresh buffers.
    fn train_pass_any_adj(&self, x: &Features<F>) -> bool {
        !x.is_sparse() || self.layers.first().map(|l| l.order) != Some(Order::AggregateFirst)
    }

    fn eval_pass(
        &mut self,
        adj: &NormAdj<F>,
        x: &Features<F>,
        par: Par,
        f: &mut dyn FnMut(ArrayView2<'_, F>),
    ) {
        // The training pass's buffers: evaluation keeps no set of its own.
        let mut ws = self.ws.take();
        let none = None::<&mut ChaCha8Rng>;
        self.forward_ws(&mut ws, adj, x, Mode::Eval, none, par, &mut |_, _| {});
        f(ws.logits.view());
        self.ws.put(ws);
    }

    fn release_workspace(&mut self) {
        self.ws = Scratch::default();
    }

    fn snapshot(&self) -> Vec<Array2<F>> {
        Gcn::snapshot(self)
    }

    fn snapshot_into(&self, snap: &mut Vec<Array2<F>>) {
        Gcn::snapshot_into(self, snap);
    }

    fn restore(&mut self, snap: &[Array2<F>]) {
        Gcn::restore(self, snap);
    }

    fn visit_representations(
        &self,
        adj: &NormAdj<F>,
        x: &Features<F>,
        par: Par,
        f: &mut dyn FnMut(usize, ndarray::ArrayView2<'_, F>),
    ) {
        let logits = self.run_eval(adj, x, par, f);
        f(self.layers.len() - 1, logits.view());
    }

    fn orders(&self) -> Vec<Order> {
        Gcn::orders(self)
    }
}

/// The rules every model configuration shares: widths `[in, hidden, out]` > 0 and dropout
/// rates in `[0, 1)`.
pub(crate) fn check_widths_and_dropout(
    widths: [usize; 3],
    dropouts: [f64; 2],
) -> Result<(), ConfigError> {
    for (name, v) in ["in_dim", "hidden_dim", "out_dim"].into_iter().zip(widths) {
        if v == 0 {
            return Err(ConfigError::ZeroDim(name));
        }
    }
    match dropouts.into_iter().find(|p| !(0.0..1.0).contains(p)) {
        Some(p) => Err(ConfigError::DropoutOutOfRange(p)),
        None => Ok(()),
    }
}

/// `snap[k] ← v`, copying into the existing array when its shape matches.
pub(crate) fn assign_at<F: Scalar>(snap: &mut Vec<Array2<F>>, k: usize, v: &Array2<F>) {
    match snap.get_mut(k) {
        Some(s) if s.dim() == v.dim() => s.assign(v),
        Some(s) => *s = v.clone(),
        None => snap.push(v.clone()),
    }
}

/// The features as a borrowed layer input.
pub fn input_of<F: Scalar>(x: &Features<F>) -> Input<'_, F> {
    match x {
        Features::Dense(d) => Input::Dense(CowArray::from(d.view())),
        Features::Sparse(s) => Input::Sparse(Cow::Borrowed(s)),
    }
}
