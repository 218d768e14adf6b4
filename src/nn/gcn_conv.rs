//! [`GcnConv`]: Z = Â·H·W + 1·bᵀ (Kipf & Welling, ICLR 2017, <https://arxiv.org/abs/1609.02907>),
//! forward and backward in one file, with the cost model that picks its evaluation order.
//!
//! Node-wise: z_i = Σ_{j ∈ N(i) ∪ {i}} Â_ij · Wᵀh_j + b, with Â_ij = 1/√(d̃_i d̃_j).
//!
//! Three evaluation orders ([`Order`]), equal in exact arithmetic:
//! - **AggregateFirst**, (ÂH)W: saves S = ÂH; backward dW = SᵀG, dH = Âᵀ(GWᵀ).
//! - **TransformFirst**, Â(HW): keeps H; backward P = ÂᵀG, dW = HᵀP, dH = PWᵀ.
//! - **Lean**: forward (ÂH)W and backward as TransformFirst's, both in blocks of
//!   [`LEAN_BLOCK`] rows: keeps H and holds no n-row temporary (no S, T = HW or P whole), and
//!   leaves dH over H when the stack grants it ([`Layer::grad_over_input`]). The least memory
//!   (the input, the output or its gradient, and one block), for an SpMM at width in_dim in
//!   forward and out_dim in backward.
//!
//! In both, db = Gᵀ1. The first layer needs no dH; with a sparse input X the products with X
//! use the sparse kernels (X·W and Xᵀ·P, and the sparse Â·X). When the input is the model's fixed
//! input (the raw features on the model's own Â), AggregateFirst computes Â·X once and keeps it
//! (the SGC idea). The derivation is in `docs/MATH.md`.
//!
//! # Shapes
//! | | shape |
//! |---|---|
//! | Â | n × n |
//! | H | n × in_dim |
//! | W | in_dim × out_dim |
//! | b | 1 × out_dim |
//! | Z, G | n × out_dim |

use ndarray::{s, Array2, ArrayView2};
use rand::Rng;

use super::layer::{view, view_mut, Bwd, Cx, Fwd, GradIo, InputDesc, InputKey, Layer, Req, Value};
use super::param::Param;
use crate::graph::Propagate;
use crate::input::SparseFeatures;
use crate::kernels::{add_bias, gemm};
use crate::Scalar;

/// The evaluation order of Â·H·W.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// (ÂH)W: the SpMM runs at width in_dim.
    AggregateFirst,
    /// Â(HW): the SpMM runs at width out_dim.
    TransformFirst,
    /// (ÂH)W in forward, Âᵀ·G first in backward, in row blocks: no n-row temporaries (see
    /// the [module docs](self)). A layer on a sparse input runs TransformFirst instead.
    Lean,
    /// Chosen per layer by [`choose_order`], counting forward and backward work.
    #[default]
    Auto,
}

crate::error::names!(Order, "order", [
    Order::Auto => "auto",
    Order::AggregateFirst => "aggregate-first",
    Order::TransformFirst => "transform-first",
    Order::Lean => "lean",
]);

/// Rows per block of [`Order::Lean`] (a multiple of 1024, so every block starts on the
/// reduction grid of [`Propagate::t_matmul_rows`]).
pub const LEAN_BLOCK: usize = 8192;

/// Relative cost of one SpMM multiply-add against one GEMM multiply-add on the target machine
/// (~2 GFLOP/s against ~60 GFLOP/s, `../shared/LIMITS.md`).
pub const SPMM_COST: f64 = 30.0;

/// What [`choose_order`] needs to know about a layer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayerShape {
    /// Nodes.
    pub n_nodes: usize,
    /// Stored entries of Â.
    pub nnz_adj: usize,
    /// Input width.
    pub in_dim: usize,
    /// Output width.
    pub out_dim: usize,
    /// `Some(nnz(X))` when the input is sparse features.
    pub sparse_input_nnz: Option<usize>,
    /// Upper bound on nnz(ÂX) for a sparse input (Σ_j deg(j)·nnz(x_j)).
    pub sparse_aggregate_nnz: Option<usize>,
    /// First layer: no input gradient is needed.
    pub first: bool,
    /// First layer without input dropout or DropEdge: ÂX is computed once and kept.
    pub aggregate_cached: bool,
}

/// Estimated per-epoch cost (forward + backward) of each order, in GEMM multiply-add units:
/// `(aggregate_first, transform_first)`. See `docs/MATH.md`, "Cost model".
pub fn order_costs(s: &LayerShape) -> (f64, f64) {
    let (n, m, a, c) = (
        s.n_nodes as f64,
        s.nnz_adj as f64,
        s.in_dim as f64,
        s.out_dim as f64,
    );
    // Products of the input (or of ÂX) with an a×c matrix.
    let x_prod = match s.sparse_input_nnz {
        Some(nnz) => SPMM_COST * nnz as f64 * c,
        None => n * a * c,
    };
    let s_prod = match s.sparse_aggregate_nnz {
        Some(nnz) => (SPMM_COST * nnz as f64 * c).min(n * a * c),
        None => n * a * c,
    };
    let spmm_in = SPMM_COST * m * a;
    let spmm_out = SPMM_COST * m * c;
    let agg_fwd = if s.aggregate_cached { 0.0 } else { spmm_in } + s_prod;
    let agg_bwd = s_prod + if s.first { 0.0 } else { n * c * a + spmm_in };
    let tr_fwd = x_prod + spmm_out;
    let tr_bwd = spmm_out + x_prod + if s.first { 0.0 } else { n * a * c };
    (agg_fwd + agg_bwd, tr_fwd + tr_bwd)
}

/// Resolves [`Order::Auto`] by [`order_costs`] (ties go to TransformFirst); a fixed order is
/// returned as it is.
pub fn choose_order(order: Order, s: &LayerShape) -> Order {
    match order {
        Order::Auto => {
            let (agg, tr) = order_costs(s);
            if agg < tr {
                Order::AggregateFirst
            } else {
                Order::TransformFirst
            }
        }
        o => o,
    }
}

/// S = Â·X kept by an AggregateFirst layer across passes.
#[derive(Debug, Clone)]
enum Aggregated<F> {
    Dense(Array2<F>),
    Sparse(SparseFeatures<F>),
}

impl<F: Scalar> Aggregated<F> {
    fn value(&self) -> Value<'_, F> {
        match self {
            Aggregated::Dense(s) => Value::Dense(s.view()),
            Aggregated::Sparse(s) => Value::Sparse(s.x(), s.x_t()),
        }
    }
}

/// A graph convolution layer (see the [module docs](self)).
#[derive(Debug)]
pub struct GcnConv<F> {
    /// W: in_dim × out_dim, Glorot-initialised.
    pub weight: Param<F>,
    /// b: 1 × out_dim, zero-initialised (`None` without bias).
    pub bias: Option<Param<F>>,
    /// The resolved order (never `Auto`).
    pub order: Order,
    /// Â·X of the model's fixed input (AggregateFirst), once computed, with the Â and the
    /// features it was computed from.
    fixed: Option<(InputKey, Aggregated<F>)>,
    /// S = Â·X̃ of a sparse input that is not the fixed one, with the Â and features whose
    /// pattern it has (X̃ has X's).
    sparse_s: Option<(InputKey, SparseFeatures<F>)>,
    /// The dense accumulator of the sparse product (length in_dim).
    spgemm_tmp: Vec<F>,
    /// What the stack said about the input ([`Layer::bind`]).
    input: InputDesc,
    /// The largest dense Â·X (in elements) kept for evaluation when training never reads it
    /// (input dropout): a larger one is recomputed into scratch at each evaluation.
    eval_cache_limit: usize,
    /// Whether the stack leaves ∂L/∂in over the kept input ([`Layer::set_grad_over_input`]).
    over_input: bool,
    /// Rows per block of the lean order ([`LEAN_BLOCK`]; smaller in tests).
    lean_block: usize,
}

/// The largest dense Â·X, in bytes, that AggregateFirst keeps across evaluations when training
/// does not read it (with input dropout): 256 MiB. Above it (products-like: 0.98 GB) each
/// evaluation recomputes Â·X (one SpMM of the input's width) into the layer's scratch.
pub const EVAL_CACHE_LIMIT_BYTES: usize = 256 << 20;

impl<F: Scalar> Clone for GcnConv<F> {
    fn clone(&self) -> Self {
        GcnConv {
            weight: self.weight.clone(),
            bias: self.bias.clone(),
            order: self.order,
            fixed: None,
            sparse_s: None,
            spgemm_tmp: Vec::new(),
            input: self.input,
            eval_cache_limit: self.eval_cache_limit,
            over_input: false,
            lean_block: self.lean_block,
        }
    }
}

impl<F: Scalar> PartialEq for GcnConv<F> {
    fn eq(&self, o: &Self) -> bool {
        self.weight == o.weight && self.bias == o.bias && self.order == o.order
    }
}

impl<F: Scalar> GcnConv<F> {
    /// A layer with Glorot weights from `rng`, zero bias, and a resolved `order`
    /// (`Auto` is treated as TransformFirst; resolve it with [`choose_order`] first).
    pub fn new<R: Rng + ?Sized>(
        in_dim: usize,
        out_dim: usize,
        bias: bool,
        order: Order,
        rng: &mut R,
    ) -> Self {
        let weight = Param::glorot(in_dim, out_dim, rng);
        let bias = bias.then(|| Param::zeros(1, out_dim));
        GcnConv::from_params(weight, bias, order)
    }

    /// A layer from given parameters (e.g. a checkpoint's); `Auto` is treated as
    /// TransformFirst.
    pub fn from_params(weight: Param<F>, bias: Option<Param<F>>, order: Order) -> Self {
        let order = if order == Order::Auto {
            Order::TransformFirst
        } else {
            order
        };
        GcnConv {
            weight,
            bias,
            order,
            fixed: None,
            sparse_s: None,
            spgemm_tmp: Vec::new(),
            input: InputDesc::default(),
            eval_cache_limit: EVAL_CACHE_LIMIT_BYTES / std::mem::size_of::<F>(),
            over_input: false,
            lean_block: LEAN_BLOCK,
        }
    }

    /// Sets the largest dense Â·X (in elements) kept across evaluations when training does
    /// not read it (default [`EVAL_CACHE_LIMIT_BYTES`]); results are the same either way.
    pub fn set_eval_cache_limit(&mut self, elements: usize) {
        self.eval_cache_limit = elements;
    }

    /// Sets the rows per block of the lean order (default [`LEAN_BLOCK`]); it must be a
    /// multiple of the reduction grid ([`Propagate::grid_rows`]) of the graphs the layer runs
    /// on. Results are the same bits for any such block.
    pub fn set_lean_block(&mut self, rows: usize) {
        self.lean_block = rows.max(1);
    }

    /// Input width.
    pub fn in_dim(&self) -> usize {
        self.weight.value.nrows()
    }

    /// Output width.
    pub fn out_dim(&self) -> usize {
        self.weight.value.ncols()
    }

    /// S = Â·X into `sparse` (its pattern computed again unless `sparse` holds the pattern of
    /// the same Â and features, `key`).
    fn aggregate_sparse<'s>(
        adj: &dyn Propagate<F>,
        x: Value<'_, F>,
        key: InputKey,
        sparse: &'s mut Option<(InputKey, SparseFeatures<F>)>,
        tmp: &mut Vec<F>,
    ) -> &'s SparseFeatures<F> {
        let Value::Sparse(xs, _) = x else {
            unreachable!("a sparse input")
        };
        if sparse.as_ref().is_none_or(|(k, _)| *k != key) {
            *sparse = Some((key, SparseFeatures::new(adj.a_times_sparse_pattern(xs))));
        }
        let (_, s) = sparse.as_mut().unwrap_or_else(|| unreachable!("set above"));
        tmp.resize(xs.cols(), F::zero());
        adj.a_times_sparse(xs, s.x_mut(), tmp);
        s.sync_transpose();
        s
    }
}

impl<F: Scalar> GcnConv<F> {
    /// out ← (Â·H)·W block by block of `lean_block` rows (one block of Â·H in `scratch`): the
    /// lean order's forward, and aggregate-first's recomputation for evaluation; every row as
    /// the whole products give it.
    fn aggregate_then_transform_blocks(
        &self,
        adj: &dyn Propagate<F>,
        h: ArrayView2<'_, F>,
        mut out: ndarray::ArrayViewMut2<'_, F>,
        mut scratch: super::layer::Bufs<'_, F>,
        par: crate::Par,
    ) {
        let (n, block, w) = (h.nrows(), self.lean_block, self.weight.value.view());
        let s = scratch.take_f(n.min(block) * self.in_dim());
        let f = &mut |rows: std::ops::Range<usize>, s_b: ArrayView2<'_, F>| {
            gemm(
                F::one(),
                s_b,
                w,
                F::zero(),
                out.slice_mut(s![rows, ..]),
                par,
            );
        };
        adj.a_times_blocks(h, block, s, f, par);
    }

    /// [`Order::Lean`]'s backward: per block b of [`LEAN_BLOCK`] rows, P_b = (Âᵀ·G)_b and
    /// dW += H_bᵀ·P_b, then (with ∂L/∂H left over H, [`LeanInput::Over`]) dH_b = P_b·Wᵀ over
    /// H_b. Every row of P and of dH, and dW's exact sum, are those of TransformFirst's backward.
    fn lean_backward(
        &mut self,
        cx: &mut Cx<'_, F>,
        g: ArrayView2<'_, F>,
        mut h: LeanInput<'_, F>,
        mut scratch: super::layer::Bufs<'_, F>,
    ) {
        let (n, par, adj) = (cx.n(), cx.par, cx.adj);
        let (din, dout) = (self.in_dim(), self.out_dim());
        if let Some(b) = &mut self.bias {
            adj.col_sum(g, F::one(), b.grad.row_mut(0), par);
        }
        let block = self.lean_block;
        let p = scratch.take_f(n.min(block) * dout);
        let wt = self.weight.value.t();
        let dw = self.weight.grad.view_mut();
        adj.t_matmul_rows(F::one(), F::one(), dw, par, &mut |sink| {
            let f = &mut |rows: std::ops::Range<usize>, p_b: ArrayView2<'_, F>| {
                let (lo, len) = (rows.start, rows.len());
                match &mut h {
                    LeanInput::Over(h) => {
                        let h_b = &mut h[lo * din..(lo + len) * din];
                        sink(lo, view(h_b, (len, din)), p_b);
                        gemm(F::one(), p_b, wt, F::zero(), view_mut(h_b, (len, din)), par);
                    }
                    LeanInput::Read(h) => sink(lo, h.slice(s![rows, ..]), p_b),
                }
            };
            adj.at_times_blocks(g, block, p, f, par);
        });
    }
}

/// The kept input of [`Order::Lean`]'s backward: overwritten by ∂L/∂H, or only read (no dH).
enum LeanInput<'a, F> {
    Over(&'a mut [F]),
    Read(ArrayView2<'a, F>),
}

impl<F: Scalar> Layer<F> for GcnConv<F> {
    fn name(&self) -> &'static str {
        "gcn_conv"
    }

    fn out_dim(&self) -> usize {
        self.weight.value.ncols()
    }

    fn grad_in_place(&self) -> bool {
        true
    }

    fn keeps_input(&self) -> bool {
        matches!(self.order, Order::TransformFirst | Order::Lean)
    }

    fn grad_over_input(&self) -> bool {
        self.order == Order::Lean
    }

    fn set_grad_over_input(&mut self, granted: bool) {
        self.over_input = granted;
    }

    /// Binds the input; a [`Order::Lean`] layer on sparse features becomes TransformFirst.
    fn bind(&mut self, inputs: &[InputDesc]) {
        self.input = inputs.first().copied().unwrap_or_default();
        if self.order == Order::Lean && self.input.sparse {
            self.order = Order::TransformFirst;
        }
    }

    fn saved(&self, n: usize) -> Req {
        match self.order {
            // S = ÂH of a dense input that changes from pass to pass (a sparse or fixed S is
            // kept by the layer).
            Order::AggregateFirst if !self.input.sparse && !self.input.fixed_in_training => {
                Req::f(n * self.in_dim())
            }
            _ => Req::default(),
        }
    }

    fn scratch(&self, n: usize) -> Req {
        match self.order {
            // G·Wᵀ in backward (when the input needs a gradient), one block of Â·X for an
            // evaluation that recomputes it.
            Order::AggregateFirst if self.input.grad => Req::f(n * self.in_dim()),
            Order::AggregateFirst => Req::f(n.min(self.lean_block) * self.in_dim()),
            // One block of Â·H in forward and of P = Âᵀ·G in backward; with dH not over H,
            // P whole.
            Order::Lean => {
                let block = n.min(self.lean_block);
                let fwd = block * self.in_dim();
                let whole = self.input.grad && !self.over_input;
                let bwd = if whole { n } else { block } * self.out_dim();
                Req::f(fwd.max(bwd))
            }
            // T = H·W in forward, P = Âᵀ·G in backward.
            _ => Req::f(n * self.out_dim()),
        }
    }

    fn forward(&mut self, cx: &mut Cx<'_, F>, io: Fwd<'_, F>) {
        let (ins, mut out, mut saved, mut scratch) = (io.ins, io.out, io.saved, io.scratch);
        let (n, par) = (cx.n(), cx.par);
        let x = ins.get(0);
        assert!(
            x.nrows() == n && x.ncols() == self.in_dim() && out.dim() == (n, self.out_dim()),
            "GcnConv::forward: input {}×{}, output {:?}, expected {n}×{} and {n}×{}",
            x.nrows(),
            x.ncols(),
            out.dim(),
            self.in_dim(),
            self.out_dim()
        );
        let w = self.weight.value.view();
        // Aggregate-first evaluation on the fixed input, too large to keep: Â·X block by block,
        // as the lean order's forward.
        // (A kept Â·X of other data is dropped when fixed input comes: it names another Â or
        // other features.)
        if cx.fixed_input && self.fixed.as_ref().is_some_and(|(k, _)| *k != cx.input) {
            self.fixed = None;
        }
        let recompute = self.order == Order::AggregateFirst
            && cx.fixed_input
            && self.fixed.is_none()
            && !self.input.fixed_in_training
            && matches!(x, Value::Dense(_))
            && n * self.in_dim() > self.eval_cache_limit;
        match self.order {
            _ if recompute || self.order == Order::Lean => {
                let out = out.view_mut();
                self.aggregate_then_transform_blocks(cx.adj, x.dense(), out, scratch, par);
            }
            Order::AggregateFirst => {
                let s = if cx.fixed_input {
                    if self.fixed.is_none() {
                        let s = match x {
                            Value::Dense(h) => {
                                let mut s = Array2::zeros(h.dim());
                                cx.adj.a_times(F::one(), h, F::zero(), s.view_mut(), par);
                                Aggregated::Dense(s)
                            }
                            Value::Sparse(..) => {
                                let mut s = None;
                                let tmp = &mut self.spgemm_tmp;
                                Self::aggregate_sparse(cx.adj, x, cx.input, &mut s, tmp);
                                let (_, s) = s.unwrap_or_else(|| unreachable!("set"));
                                Aggregated::Sparse(s)
                            }
                        };
                        self.fixed = Some((cx.input, s));
                    }
                    let (_, s) = self
                        .fixed
                        .as_ref()
                        .unwrap_or_else(|| unreachable!("set above"));
                    s.value()
                } else {
                    match x {
                        Value::Dense(h) => {
                            let s = saved.take_f(n * self.in_dim());
                            cx.adj
                                .a_times(F::one(), h, F::zero(), view_mut(s, h.dim()), par);
                            Value::Dense(view(s, h.dim()))
                        }
                        Value::Sparse(..) => {
                            let (s, tmp) = (&mut self.sparse_s, &mut self.spgemm_tmp);
                            let s = Self::aggregate_sparse(cx.adj, x, cx.input, s, tmp);
                            Value::Sparse(s.x(), s.x_t())
                        }
                    }
                };
                s.times(w, out.view_mut(), par);
            }
            _ => {
                let t = scratch.take_f(n * self.out_dim());
                let mut t = view_mut(t, (n, self.out_dim()));
                x.times(w, t.view_mut(), par);
                cx.adj
                    .a_times(F::one(), t.view(), F::zero(), out.view_mut(), par);
            }
        }
        if let Some(b) = &self.bias {
            add_bias(out, b.value.row(0), par);
        }
    }

    fn backward(&mut self, cx: &mut Cx<'_, F>, io: Bwd<'_, F>) {
        let (ins, mut saved, mut scratch, grad) = (io.ins, io.saved, io.scratch, io.grad);
        let (n, par) = (cx.n(), cx.par);
        let (din, dout) = (self.in_dim(), self.out_dim());
        let grad = match grad {
            GradIo::OverInput { dout: g, input } => {
                assert!(
                    g.len() >= n * dout && input.len() >= n * din,
                    "GcnConv::backward: G or H shape"
                );
                let g = view(g, (n, dout));
                return self.lean_backward(cx, g, LeanInput::Over(input), scratch);
            }
            grad => grad.in_place(),
        };
        let need_dh = cx.need_din;
        assert!(grad.len() >= n * dout, "GcnConv::backward: G shape");
        let g = view(grad, (n, dout));
        if self.order == Order::Lean && !need_dh {
            // No dH (the first layer): the blocks of P against the kept input.
            return self.lean_backward(cx, g, LeanInput::Read(ins.get(0).dense()), scratch);
        }
        if let Some(b) = &mut self.bias {
            cx.adj.col_sum(g, F::one(), b.grad.row_mut(0), cx.par);
        }
        match self.order {
            Order::AggregateFirst => {
                // dW += Sᵀ·G ; dH = Âᵀ·(G·Wᵀ)
                let s = match (&self.fixed, &self.sparse_s) {
                    (Some((_, f)), _) if cx.fixed_input => f.value(),
                    (_, Some((_, s))) if self.input.sparse => Value::Sparse(s.x(), s.x_t()),
                    _ => Value::Dense(view(saved.take_f(n * din), (n, din))),
                };
                s.t_times_acc(cx.adj, g, self.weight.grad.view_mut(), par);
                if need_dh {
                    let tmp = scratch.take_f(n * din);
                    let wt = self.weight.value.t();
                    gemm(F::one(), g, wt, F::zero(), view_mut(tmp, (n, din)), par);
                    let y = view(tmp, (n, din));
                    cx.adj
                        .at_times(F::one(), y, F::zero(), view_mut(grad, (n, din)), par);
                }
            }
            // (Lean without dH over H: TransformFirst's backward, the same bits.)
            Order::TransformFirst | Order::Lean | Order::Auto => {
                // P = Âᵀ·G ; dW += Hᵀ·P ; dH = P·Wᵀ
                let p = scratch.take_f(n * dout);
                cx.adj
                    .at_times(F::one(), g, F::zero(), view_mut(p, (n, dout)), par);
                let p: ArrayView2<'_, F> = view(p, (n, dout));
                ins.get(0)
                    .t_times_acc(cx.adj, p, self.weight.grad.view_mut(), par);
                if need_dh {
                    let wt = self.weight.value.t();
                    gemm(F::one(), p, wt, F::zero(), view_mut(grad, (n, din)), par);
                }
            }
        }
    }

    fn visit_params(&mut self, f: &mut dyn FnMut(&'static str, &mut Param<F>)) {
        f("weight", &mut self.weight);
        if let Some(b) = &mut self.bias {
            f("bias", b);
        }
    }

    fn order(&self) -> Option<Order> {
        Some(self.order)
    }

    fn release(&mut self) {
        self.fixed = None;
        self.sparse_s = None;
    }

    fn clone_box(&self) -> Box<dyn Layer<F>> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use ndarray::{array, Array2};

    use super::*;
    use crate::graph::{Direction, Graph, Norm, NormAdj};
    use crate::input::FeaturesRef;
    use crate::nn::harness::{bits, citation, params, random, rng, same_for_any_thread_count};
    use crate::nn::harness::{small_adjs, zero_grads, Harness, In};
    use crate::nn::Mode;

    const ORDERS: [Order; 2] = [Order::AggregateFirst, Order::TransformFirst];

    /// A layer with Glorot weights and (if any) a random bias.
    fn layer(a: usize, c: usize, bias: bool, order: Order, seed: u64) -> GcnConv<f64> {
        let mut r = rng(seed);
        let mut l = GcnConv::new(a, c, bias, order, &mut r);
        if let Some(b) = &mut l.bias {
            b.value = random(1, c, &mut r);
        }
        l
    }

    fn close(a: &Array2<f64>, b: &Array2<f64>, what: &str) {
        assert!(
            a.dim() == b.dim() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12),
            "{what}: {a} vs {b}"
        );
    }

    #[test]
    fn dense_input_gradients_match_finite_differences() {
        for (name, adj) in &small_adjs() {
            let n = adj.n_nodes();
            for order in ORDERS {
                for bias in [false, true] {
                    for (a, c) in [(3, 5), (5, 3)] {
                        let mut r = rng(7);
                        let x = random(n, a, &mut r);
                        let g = random(n, c, &mut r);
                        let what = format!("{name}, {order}, bias {bias}, {a}→{c}");
                        let mut l = layer(a, c, bias, order, 1);
                        Harness::new(adj).grad_check(&mut l, &[In::Dense(x)], &[true], &g, &what);
                    }
                }
            }
        }
    }

    #[test]
    fn first_layer_weight_gradients_sparse_or_dense_fixed_or_not() {
        // No input gradient (the model's input): dW and db only, for sparse and dense X, with
        // and without the fixed input (AggregateFirst then keeps S = Â·X across calls); every
        // variant gives the output and gradients of the dense layer to 1e-12.
        for (name, adj) in &small_adjs() {
            let n = adj.n_nodes();
            let mut r = rng(3);
            let mut x = random(n, 6, &mut r);
            x.mapv_inplace(|v| if v.abs() < 0.6 { 0.0 } else { v });
            x.row_mut(4).fill(0.0);
            let g = random(n, 3, &mut r);
            for order in ORDERS {
                for bias in [false, true] {
                    let mut reference = layer(6, 3, bias, order, 2);
                    let (want, _) =
                        Harness::new(adj).run(&mut reference, &[In::Dense(x.clone())], &g, &[true]);
                    let want_grads = params(&mut reference, true);
                    for fixed in [false, true] {
                        for input in [In::Dense(x.clone()), In::sparse(&x)] {
                            let sparse = matches!(input, In::Sparse(_));
                            let what = format!(
                                "{name}, {order}, bias {bias}, fixed {fixed}, sparse {sparse}"
                            );
                            let h = if fixed {
                                Harness::new(adj).fixed()
                            } else {
                                Harness::new(adj)
                            };
                            let mut l = layer(6, 3, bias, order, 2);
                            let (out, _) = h.grad_check(&mut l, &[input], &[false], &g, &what);
                            close(&out, &want, &what);
                            // grad_check ran backward twice.
                            for ((p, got), (_, w)) in params(&mut l, true).iter().zip(&want_grads) {
                                close(got, &(w * 2.0), &format!("{what}: {p}"));
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_fixed_input_cache_is_used_only_on_the_fixed_input() {
        // AggregateFirst keeps Â·X from a fixed-input call: a later fixed call reuses it (here
        // even given other values, which the stack never does), a call on other data (a
        // training pass on dropped features) does not, and `release` forgets it.
        let [_, (_, adj)] = &small_adjs();
        let n = adj.n_nodes();
        let mut r = rng(5);
        let (x1, x2) = (random(n, 4, &mut r), random(n, 4, &mut r));
        let g = random(n, 3, &mut r);
        for sparse in [false, true] {
            let inp = |x: &Array2<f64>| {
                if sparse {
                    In::sparse(x)
                } else {
                    In::Dense(x.clone())
                }
            };
            let base = layer(4, 3, true, Order::AggregateFirst, 4);
            let fresh = |x: &Array2<f64>| {
                let mut l = base.clone();
                let (y, _) = Harness::new(adj).run(&mut l, &[inp(x)], &g, &[false]);
                (y, params(&mut l, true))
            };
            // Fixed in evaluation only (input dropout in training).
            let eval_fixed = Harness {
                fixed_input: true,
                ..Harness::new(adj).mode(Mode::Eval)
            };
            let mut l = base.clone();
            let y1 = eval_fixed.forward(&mut l, &[inp(&x1)]).0;
            assert_eq!(y1, fresh(&x1).0, "sparse {sparse}");
            let (y2, _) = Harness::new(adj).run(&mut l, &[inp(&x2)], &g, &[false]);
            assert_eq!((y2, params(&mut l, true)), fresh(&x2), "sparse {sparse}");
            assert_eq!(
                eval_fixed.forward(&mut l, &[inp(&x2)]).0,
                y1,
                "sparse {sparse}"
            );
            l.release();
            assert_eq!(
                eval_fixed.forward(&mut l, &[inp(&x2)]).0,
                fresh(&x2).0,
                "sparse {sparse}"
            );
        }
    }

    #[test]
    fn above_the_eval_cache_limit_evaluation_recomputes_the_aggregate() {
        // With input dropout (the input fixed in evaluation only) a dense Â·X above the limit
        // is not kept: each evaluation computes it again, with the same bits as a fresh layer.
        let [_, (_, adj)] = &small_adjs();
        let n = adj.n_nodes();
        let mut r = rng(6);
        let (x1, x2) = (random(n, 4, &mut r), random(n, 4, &mut r));
        let eval_fixed = Harness {
            fixed_input: true,
            ..Harness::new(adj).mode(Mode::Eval)
        };
        let base = layer(4, 3, true, Order::AggregateFirst, 4);
        let fresh = |x: &Array2<f64>| {
            eval_fixed
                .forward(&mut base.clone(), &[In::Dense(x.clone())])
                .0
        };
        for limit in [0, n * 4 - 1] {
            let mut l = base.clone();
            l.set_eval_cache_limit(limit);
            assert_eq!(
                eval_fixed.forward(&mut l, &[In::Dense(x1.clone())]).0,
                fresh(&x1)
            );
            assert!(l.fixed.is_none(), "limit {limit}");
            assert_eq!(
                eval_fixed.forward(&mut l, &[In::Dense(x2.clone())]).0,
                fresh(&x2)
            );
        }
        // At the limit it is kept (the second call reuses the first's Â·X).
        let mut l = base.clone();
        l.set_eval_cache_limit(n * 4);
        let y1 = eval_fixed.forward(&mut l, &[In::Dense(x1.clone())]).0;
        assert!(l.fixed.is_some());
        assert_eq!(eval_fixed.forward(&mut l, &[In::Dense(x2.clone())]).0, y1);
    }

    #[test]
    fn a_sparse_input_on_another_adjacency_recomputes_the_pattern() {
        // The sparse S = Â·X̃ keeps its pattern only for the Â it was computed on: after a call on
        // another Â (a DropEdge sample: another pattern), a call on the first Â is still exact.
        let [(_, own), (_, other)] = &small_adjs();
        let n = own.n_nodes();
        let mut r = rng(6);
        let mut x = random(n, 5, &mut r);
        x.mapv_inplace(|v| if v.abs() < 0.5 { 0.0 } else { v });
        let g = random(n, 3, &mut r);
        let base = layer(5, 3, false, Order::AggregateFirst, 8);
        let fresh = |adj: &NormAdj<f64>| {
            let mut l = base.clone();
            let (y, _) = Harness::new(adj).run(&mut l, &[In::sparse(&x)], &g, &[false]);
            (y, params(&mut l, true))
        };
        let sample = Harness::new(other);
        let mut l = base.clone();
        for (k, (h, adj)) in [
            (Harness::new(own), own),
            (sample.clone(), other),
            (Harness::new(own), own),
            (sample, other),
        ]
        .into_iter()
        .enumerate()
        {
            zero_grads(&mut l);
            let (y, _) = h.run(&mut l, &[In::sparse(&x)], &g, &[false]);
            assert_eq!((y, params(&mut l, true)), fresh(adj), "call {k}");
        }
    }

    #[test]
    fn golden_path_graph() {
        // P3 (0–1–2), symmetric: Â·u = u for u = (√2, √3, √2). With W = [2], b = [1]:
        // Z = 2u + 1; for G = 1: dW = Σ_i (Âu)_i = 2√2 + √3, db = 3, dH = 2·Â1 with
        // Â1 = (1/2 + 1/√6, 1/3 + 2/√6, 1/2 + 1/√6).
        let g = Graph::try_from_edges(3, &[(0, 1), (1, 2)], Direction::Undirected).unwrap();
        let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
        let (s2, s3, s6) = (2f64.sqrt(), 3f64.sqrt(), 6f64.sqrt());
        let u = array![[s2], [s3], [s2]];
        for order in ORDERS {
            let mut l = GcnConv::from_params(
                Param::new(array![[2.0]]),
                Some(Param::new(array![[1.0]])),
                order,
            );
            let (z, din) = Harness::new(&adj).run(
                &mut l,
                &[In::Dense(u.clone())],
                &Array2::ones((3, 1)),
                &[true],
            );
            close(&z, &(&u * 2.0 + 1.0), "Z");
            close(&l.weight.grad, &array![[2.0 * s2 + s3]], "dW");
            close(&l.bias.as_ref().unwrap().grad, &array![[3.0]], "db");
            let a1 = array![[0.5 + 1.0 / s6], [1.0 / 3.0 + 2.0 / s6], [0.5 + 1.0 / s6]];
            close(din[0].as_ref().unwrap(), &(a1 * 2.0), "dH");
        }
    }

    #[test]
    fn the_two_orders_agree() {
        for (name, adj) in &small_adjs() {
            let n = adj.n_nodes();
            let mut r = rng(12);
            let (x, g) = (random(n, 4, &mut r), random(n, 6, &mut r));
            let mut res = Vec::new();
            for order in ORDERS {
                let mut l = layer(4, 6, true, order, 13);
                let (z, din) = Harness::new(adj).run(&mut l, &[In::Dense(x.clone())], &g, &[true]);
                res.push((z, din[0].clone().unwrap(), params(&mut l, true)));
            }
            close(&res[0].0, &res[1].0, name);
            close(&res[0].1, &res[1].1, name);
            for ((_, a), (_, b)) in res[0].2.iter().zip(&res[1].2) {
                close(a, b, name);
            }
        }
    }

    #[test]
    fn bitwise_identical_for_any_thread_count() {
        let (adj, feats) = citation();
        let n = adj.n_nodes();
        let FeaturesRef::Sparse(xs) = feats.get() else {
            panic!("bag-of-words features are sparse")
        };
        let mut r = rng(9);
        let h = random(n, 24, &mut r).mapv(|v| v as f32);
        let g = random(n, 10, &mut r).mapv(|v| v as f32);
        for order in ORDERS {
            let hidden = GcnConv::<f32>::new(24, 10, true, order, &mut r);
            let first = GcnConv::<f32>::new(xs.x().cols(), 10, true, order, &mut r);
            same_for_any_thread_count(
                |par| {
                    let mut out = Vec::new();
                    for (l, input, need, fixed) in [
                        (&hidden, In::Dense(h.clone()), true, false),
                        (&first, In::Sparse(xs.clone()), false, false),
                        (&first, In::Sparse(xs.clone()), false, true),
                    ] {
                        let mut l = l.clone();
                        let hs = Harness {
                            par,
                            ..Harness::new(&adj)
                        };
                        let hs = if fixed { hs.fixed() } else { hs };
                        let (z, din) = hs.run(&mut l, &[input], &g, &[need]);
                        out.push(bits(&z));
                        out.extend(din.iter().flatten().map(bits));
                        out.extend(params(&mut l, true).iter().map(|(_, p)| bits(p)));
                    }
                    out
                },
                &format!("GcnConv {order}"),
            );
        }
    }

    #[test]
    fn auto_order_counts_backward_and_caching() {
        let base = LayerShape {
            n_nodes: 1000,
            nnz_adj: 10_000,
            in_dim: 64,
            out_dim: 16,
            sparse_input_nnz: None,
            sparse_aggregate_nnz: None,
            first: false,
            aggregate_cached: false,
        };
        // Narrower output: aggregate at the output width; wider: at the input width.
        assert_eq!(choose_order(Order::Auto, &base), Order::TransformFirst);
        let wide = LayerShape {
            in_dim: 16,
            out_dim: 64,
            ..base
        };
        assert_eq!(choose_order(Order::Auto, &wide), Order::AggregateFirst);
        // A first layer whose ÂX is cached skips the forward SpMM and the input gradient.
        let cached = LayerShape {
            first: true,
            aggregate_cached: true,
            ..base
        };
        assert_eq!(choose_order(Order::Auto, &cached), Order::AggregateFirst);
        assert_eq!(
            choose_order(Order::AggregateFirst, &base),
            Order::AggregateFirst
        );
    }
}

#[cfg(test)]
mod lean_tests;
