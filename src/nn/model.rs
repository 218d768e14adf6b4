//! [`Gcn`]: a stack of [`GcnConv`] layers with ReLU and dropout between them (Kipf & Welling's
//! model; 2 layers by default).

use std::borrow::Cow;

use ndarray::{Array2, CowArray};
use rand::Rng;

use super::dropout::{dropout_dense, dropout_sparse};
use super::gcn::{aggregate, choose_order, GcnCache, GcnConv, Input, LayerShape, Order};
use super::param::Param;
use super::{Mode, Model};
use crate::graph::{Features, NormAdj};
use crate::kernels::{relu_backward_inplace, relu_inplace};
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
}

/// What [`Gcn::backward`] needs from a forward pass.
#[derive(Debug)]
pub struct GcnModelCache<'a, F: Scalar> {
    layers: Vec<GcnCache<'a, F>>,
    /// ReLU outputs of the hidden layers (their sign is the ReLU mask).
    acts: Vec<Array2<F>>,
    /// Dropout masks (scaled) of the hidden layers, in training mode.
    masks: Vec<Option<Array2<F>>>,
    used_cached: bool,
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
    }

    /// Forward pass: returns the logits (n × out_dim) and the cache for [`Gcn::backward`].
    /// In `Mode::Train`, dropout masks are drawn from `rng` in a fixed order (input first).
    ///
    /// # Panics
    /// If `x` does not match the model's input width or `adj`'s node count.
    pub fn forward<'a, R: Rng + ?Sized>(
        &self,
        adj: &NormAdj<F>,
        x: &'a Features<F>,
        mode: Mode,
        rng: &mut R,
        par: Par,
    ) -> (Array2<F>, GcnModelCache<'a, F>) {
        let train = mode == Mode::Train;
        let drop_in = train && self.input_dropout > 0.0;
        let use_cached = self.cached.is_some() && !drop_in;
        let h0: Input<'a, F> = if drop_in {
            match x {
                Features::Dense(d) => {
                    let (h, _) = dropout_dense(d.clone(), self.input_dropout, rng);
                    Input::Dense(CowArray::from(h))
                }
                Features::Sparse(s) => {
                    Input::Sparse(Cow::Owned(dropout_sparse(s, self.input_dropout, rng)))
                }
            }
        } else {
            input_of(x)
        };
        let n_layers = self.layers.len();
        let mut caches = Vec::with_capacity(n_layers);
        let mut acts = Vec::with_capacity(n_layers - 1);
        let mut masks = Vec::with_capacity(n_layers - 1);
        let mut h = h0;
        let mut out = None;
        for (l, layer) in self.layers.iter().enumerate() {
            let agg = if l == 0 && use_cached {
                self.cached.as_ref()
            } else {
                None
            };
            let (mut z, cache) = layer.forward(adj, h, agg, par);
            caches.push(cache);
            if l + 1 == n_layers {
                out = Some(z);
                break;
            }
            relu_inplace(z.view_mut());
            let next = if train && self.dropout > 0.0 {
                let (hd, mask) = dropout_dense(z.clone(), self.dropout, rng);
                masks.push(Some(mask));
                hd
            } else {
                masks.push(None);
                z.clone()
            };
            acts.push(z);
            h = Input::Dense(CowArray::from(next));
        }
        let logits = out.unwrap_or_else(|| Array2::zeros((adj.n_nodes(), 0)));
        (
            logits,
            GcnModelCache {
                layers: caches,
                acts,
                masks,
                used_cached: use_cached,
            },
        )
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
        visit: &mut dyn FnMut(usize, ndarray::ArrayView2<'_, F>),
    ) -> Array2<F> {
        let n_layers = self.layers.len();
        let mut h = input_of(x);
        for (l, layer) in self.layers.iter().enumerate() {
            let agg = if l == 0 { self.cached.as_ref() } else { None };
            let (mut z, _) = layer.forward(adj, h, agg, par);
            if l + 1 == n_layers {
                return z;
            }
            relu_inplace(z.view_mut());
            visit(l, z.view());
            h = Input::Dense(CowArray::from(z));
        }
        Array2::zeros((adj.n_nodes(), 0))
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
        let GcnModelCache {
            layers,
            mut acts,
            mut masks,
            used_cached,
        } = cache;
        let mut g = dlogits;
        for (l, lc) in layers.into_iter().enumerate().rev() {
            let agg = if l == 0 && used_cached {
                self.cached.as_ref()
            } else {
                None
            };
            let dh = self.layers[l].backward(adj, lc, agg, g.view(), l > 0, par);
            let Some(mut dh) = dh else { break };
            if let Some(Some(mask)) = masks.pop() {
                dh *= &mask;
            }
            if let Some(a) = acts.pop() {
                relu_backward_inplace(dh.view_mut(), a.view());
            }
            g = dh;
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

    fn forward_train<'a, R: Rng + ?Sized>(
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

    fn snapshot(&self) -> Vec<Array2<F>> {
        Gcn::snapshot(self)
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

/// The features as a borrowed layer input.
pub fn input_of<F: Scalar>(x: &Features<F>) -> Input<'_, F> {
    match x {
        Features::Dense(d) => Input::Dense(CowArray::from(d.view())),
        Features::Sparse(s) => Input::Sparse(Cow::Borrowed(s)),
    }
}
