//! [`GcnConv`]: Z = Â·H·W + 1·bᵀ (Kipf & Welling, ICLR 2017, <https://arxiv.org/abs/1609.02907>),
//! forward and backward, one file per evaluation order, with the cost model that picks it.
//!
//! Node-wise: z_i = Σ_{j ∈ N(i) ∪ {i}} Â_ij · Wᵀh_j + b, with Â_ij = 1/√(d̃_i d̃_j).
//!
//! Three evaluation orders ([`Order`]), equal in exact arithmetic:
//! - **AggregateFirst**, (ÂH)W (`aggregate_first.rs`): saves S = ÂH; backward dW = SᵀG,
//!   dH = Âᵀ(GWᵀ).
//! - **TransformFirst**, Â(HW) (`transform_first.rs`): keeps H; backward P = ÂᵀG, dW = HᵀP,
//!   dH = PWᵀ.
//! - **Lean** (`lean.rs`): forward (ÂH)W and backward as TransformFirst's, both in blocks of
//!   `LEAN_BLOCK` rows: keeps H and holds no n-row temporary (no S, T = HW or P whole), and
//!   leaves dH over H when the stack grants it ([`GradMode::OverInput`]). The least memory (the
//!   input, the output or its gradient, and one block), for an SpMM at width in_dim in forward
//!   and out_dim in backward. On sparse features it is TransformFirst.
//!
//! In all, db = Gᵀ1. The first layer needs no dH; with a sparse input X the products with X use
//! the sparse kernels (X·W and Xᵀ·P, and the sparse Â·X). When the input is the model's fixed
//! input (the raw features, no dropout), AggregateFirst computes Â·X once per Â and features
//! and keeps it (`cache.rs`, the SGC idea). The order is resolved by the cost model ([`cost`]).
//! The derivation is in `docs/MATH.md`.
//!
//! # Shapes
//! | | shape |
//! |---|---|
//! | Â | n × n |
//! | H | n × in_dim |
//! | W | in_dim × out_dim |
//! | b | 1 × out_dim |
//! | Z, G | n × out_dim |

mod aggregate_first;
pub mod arch;
mod cache;
pub mod cost;
mod lean;
mod transform_first;

use rand::Rng;

use self::cache::{Aggregated, Keyed};
use super::attrs::{Attrs, FromAttrs};
use super::layer::{
    view, view_mut, Bwd, Cx, Fwd, GradIo, GradMode, InputDesc, Layer, Req, Spec, Value,
};
use super::param::Param;
use crate::graph::Caps;
use crate::input::SparseFeatures;
use crate::kernels::add_bias;
use crate::{ConfigError, Result, Scalar};

pub use arch::Gcn;
pub(crate) use cost::{choose_order, LayerShape};

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
    /// Chosen per layer by `choose_order`, counting forward and backward work.
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
/// reduction grid of [`Sums::t_matmul_rows`](crate::graph::Sums::t_matmul_rows)).
pub(crate) const LEAN_BLOCK: usize = 8192;

/// The largest dense Â·X, in bytes, that AggregateFirst keeps across evaluations when training
/// does not read it (with input dropout): 256 MiB. Above it (products-like: 0.98 GB) each
/// evaluation recomputes Â·X (one SpMM of the input's width) into the layer's scratch.
pub const EVAL_CACHE_LIMIT_BYTES: usize = 256 << 20;

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
    fixed: Keyed<Aggregated<F>>,
    /// S = Â·X̃ of a sparse input that is not the fixed one, with the Â and features whose
    /// pattern it has (X̃ has X's).
    sparse_s: Keyed<SparseFeatures<F>>,
    /// The dense accumulator of the sparse product (length in_dim).
    spgemm_tmp: Vec<F>,
    /// The largest dense Â·X (in elements) kept for evaluation when training never reads it
    /// (input dropout): a larger one is recomputed into scratch at each evaluation.
    eval_cache_limit: usize,
    /// Rows per block of the lean order ([`LEAN_BLOCK`]; smaller in tests).
    lean_block: usize,
}

impl<F: Scalar> Clone for GcnConv<F> {
    fn clone(&self) -> Self {
        GcnConv {
            weight: self.weight.clone(),
            bias: self.bias.clone(),
            order: self.order,
            fixed: None,
            sparse_s: None,
            spgemm_tmp: Vec::new(),
            eval_cache_limit: self.eval_cache_limit,
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
    /// (`Auto` is treated as TransformFirst; resolve it with `choose_order` first).
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
    pub(crate) fn from_params(weight: Param<F>, bias: Option<Param<F>>, order: Order) -> Self {
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
            eval_cache_limit: EVAL_CACHE_LIMIT_BYTES / std::mem::size_of::<F>(),
            lean_block: LEAN_BLOCK,
        }
    }

    #[cfg(test)]
    /// Sets the largest dense Â·X (in elements) kept across evaluations when training does
    /// not read it (default [`EVAL_CACHE_LIMIT_BYTES`]); results are the same either way.
    pub(crate) fn set_eval_cache_limit(&mut self, elements: usize) {
        self.eval_cache_limit = elements;
    }

    #[cfg(test)]
    /// Sets the rows per block of the lean order (default [`LEAN_BLOCK`]); it must be a
    /// multiple of the reduction grid ([`Sums::grid_rows`](crate::graph::Sums::grid_rows)) of
    /// the graphs the layer runs on. Results are the same bits for any such block.
    pub(crate) fn set_lean_block(&mut self, rows: usize) {
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

    /// The order this layer runs in on `input`: [`Order::Lean`] on sparse features is
    /// TransformFirst.
    pub(crate) fn order_on(&self, input: InputDesc) -> Order {
        match self.order {
            Order::Lean if input.sparse => Order::TransformFirst,
            Order::Auto => Order::TransformFirst,
            o => o,
        }
    }

    /// Whether an evaluation on the fixed input recomputes Â·X block by block instead of
    /// keeping it (dense S above the eval cache limit, never read by training).
    fn recomputes_in_eval(&self, input: InputDesc, n: usize) -> bool {
        self.order_on(input) == Order::AggregateFirst
            && !input.sparse
            && !input.fixed_in_training
            && n * self.in_dim() > self.eval_cache_limit
    }

    /// Whether a forward call on `input` runs in row blocks, as the lean order's forward, where
    /// its order would compute Â·H whole: aggregate-first in a plan without backward (nothing
    /// saved: the same bits, [`InputDesc::forward_only`]) on a dense input that is not kept
    /// across passes, or on the fixed input too large to keep (`recomputes_in_eval`).
    fn blocked_in_eval(&self, input: InputDesc, n: usize) -> bool {
        self.order_on(input) == Order::AggregateFirst
            && !input.sparse
            && (input.forward_only || self.recomputes_in_eval(input, n))
    }

    /// The scratch of [`Order::Lean`] for `n` rows (and the input's, [`InputDesc::src_rows`]),
    /// with ∂L/∂in over the input or not: a block of Â·H's rows in forward, of P = Âᵀ·G's (the
    /// input's rows) in backward, or P whole.
    fn lean_scratch(&self, input: InputDesc, n: usize, over_input: bool) -> Req {
        let n_src = input.src_rows.max(n);
        let fwd = n.min(self.lean_block) * self.in_dim();
        let whole = input.grad && !over_input;
        let bwd = if whole {
            n_src
        } else {
            n_src.min(self.lean_block)
        } * self.out_dim();
        Req::f(fwd.max(bwd))
    }
}

impl<F: Scalar> FromAttrs<F> for GcnConv<F> {
    /// `in_dim`, `out_dim`, `bias`, `order` (resolved: not `auto`); zero parameters.
    fn from_attrs(a: &Attrs) -> Result<Self, ConfigError> {
        let [i, o] = a.shape(["in_dim", "out_dim"])?;
        let bias: bool = a.get("bias")?;
        let order: Order = a.get("order")?;
        if order == Order::Auto {
            return Err(a.invalid("order", "a resolved order, not auto"));
        }
        Ok(GcnConv::from_params(
            Param::zeros(i, o),
            bias.then(|| Param::zeros(1, o)),
            order,
        ))
    }
}

impl<F: Scalar> Layer<F> for GcnConv<F> {
    fn name(&self) -> &'static str {
        "gcn_conv"
    }

    fn hops(&self) -> Option<usize> {
        Some(1)
    }

    fn spec(&self, inputs: &[InputDesc], n: usize) -> Spec {
        let input = inputs.first().copied().unwrap_or_default();
        let (din, dout) = (self.in_dim(), self.out_dim());
        // (n: the output's rows, Â's destinations; n_src: the input's, its sources.)
        let n_src = input.src_rows.max(n);
        let order = self.order_on(input);
        let mut spec = Spec {
            grad: GradMode::InPlace,
            keeps_input: matches!(order, Order::TransformFirst | Order::Lean),
            needs: Caps {
                sparse_product: order == Order::AggregateFirst && input.sparse,
                a_blocks: order == Order::Lean || self.blocked_in_eval(input, n),
                at_blocks: order == Order::Lean,
                ..Caps::default()
            },
            ..Spec::new(dout).reading(din)
        };
        match order {
            Order::AggregateFirst => {
                // S = ÂH of a dense input that changes from pass to pass (a sparse or fixed S
                // is kept by the layer; none without backward); G·Wᵀ in backward when the
                // input needs a gradient, one block of Â·X for an evaluation that recomputes
                // it.
                if !input.sparse && !input.fixed_in_training && !input.forward_only {
                    spec.saved = Req::f(n * din);
                }
                spec.scratch = Req::f(if input.grad && !input.forward_only {
                    n * din
                } else {
                    n.min(self.lean_block) * din
                });
            }
            Order::Lean => {
                spec.scratch = self.lean_scratch(input, n, false);
                spec.grad = GradMode::OverInput {
                    scratch: self.lean_scratch(input, n, true),
                };
            }
            // T = H·W in forward, P = Âᵀ·G in backward; without backward, Â·T may go over H
            // (H is dead once T is computed): two n-row buffers instead of three.
            Order::TransformFirst | Order::Auto => {
                spec.scratch = Req::f(n_src * dout);
                spec.out_over_input = input.forward_only;
            }
        }
        spec
    }

    fn forward(&mut self, cx: &mut Cx<'_, F>, io: Fwd<'_, F>) -> Result<()> {
        let (ins, mut out, saved, scratch) = (io.ins, io.out, io.saved, io.scratch);
        let (n, n_src, par) = (cx.n(), cx.n_src(), cx.par);
        if let Some(buf) = io.over_input {
            // (Granted only to TransformFirst in a plan without backward.)
            let (din, dout) = (self.in_dim(), self.out_dim());
            assert!(
                buf.len() >= (n_src * din).max(n * dout),
                "GcnConv::forward: the buffer over the input"
            );
            self.transform_first_over_input(cx, buf, scratch);
            if let Some(b) = &self.bias {
                add_bias(view_mut(buf, (n, dout)), b.value.row(0), par);
            }
            return Ok(());
        }
        let x = ins.get(0);
        assert!(
            x.nrows() == n_src && x.ncols() == self.in_dim() && out.dim() == (n, self.out_dim()),
            "GcnConv::forward: input {}×{}, output {:?}, expected {n_src}×{} and {n}×{}",
            x.nrows(),
            x.ncols(),
            out.dim(),
            self.in_dim(),
            self.out_dim()
        );
        let input = cx.inputs.first().copied().unwrap_or_default();
        // (A kept Â·X of other data is dropped when fixed input comes: it names another Â or
        // other features.)
        if cx.fixed_input && self.fixed.as_ref().is_some_and(|(k, _)| *k != cx.input) {
            self.fixed = None;
        }
        // Aggregate-first evaluation on the fixed input, too large to keep, or on any dense
        // input without backward: Â·X block by block, as the lean order's forward (the same
        // bits).
        let recompute = matches!(x, Value::Dense(_))
            && if cx.fixed_input {
                self.fixed.is_none() && self.recomputes_in_eval(input, n)
            } else {
                input.forward_only && self.blocked_in_eval(input, n)
            };
        match self.order_on(input) {
            _ if recompute => {
                self.blocked_forward(cx.adj, x.dense(), out.view_mut(), scratch, par)?
            }
            Order::Lean => self.blocked_forward(cx.adj, x.dense(), out.view_mut(), scratch, par)?,
            Order::AggregateFirst => self.aggregate_first_forward(cx, x, out.view_mut(), saved)?,
            Order::TransformFirst | Order::Auto => {
                self.transform_first_forward(cx, x, out.view_mut(), scratch)
            }
        }
        if let Some(b) = &self.bias {
            add_bias(out, b.value.row(0), par);
        }
        Ok(())
    }

    fn backward(&mut self, cx: &mut Cx<'_, F>, io: Bwd<'_, F>) -> Result<()> {
        let (ins, saved, scratch, grad) = (io.ins, io.saved, io.scratch, io.grad);
        let n = cx.n();
        let (din, dout) = (self.in_dim(), self.out_dim());
        let grad = match grad {
            GradIo::OverInput { dout: g, input } => {
                assert!(
                    g.len() >= n * dout && input.len() >= cx.n_src() * din,
                    "GcnConv::backward: G or H shape"
                );
                let g = view(g, (n, dout));
                return self.lean_backward(cx, g, lean::LeanInput::Over(input), scratch);
            }
            grad => grad.in_place(),
        };
        assert!(grad.len() >= n * dout, "GcnConv::backward: G shape");
        let input = cx.inputs.first().copied().unwrap_or_default();
        let order = self.order_on(input);
        if order == Order::Lean && !cx.need_din {
            // No dH (the first layer): the blocks of P against the kept input.
            let g = view(grad, (n, dout));
            let h = lean::LeanInput::Read(ins.get(0).dense());
            return self.lean_backward(cx, g, h, scratch);
        }
        if let Some(b) = &mut self.bias {
            cx.sums
                .col_sum(view(grad, (n, dout)), F::one(), b.grad.row_mut(0), cx.par);
        }
        match order {
            Order::AggregateFirst => self.aggregate_first_backward(cx, input, grad, saved, scratch),
            // (Lean without dH over H: TransformFirst's backward, the same bits.)
            Order::TransformFirst | Order::Lean | Order::Auto => {
                self.transform_first_backward(cx, ins.get(0), grad, scratch);
            }
        }
        Ok(())
    }

    fn visit_params(&mut self, f: &mut dyn FnMut(&'static str, &mut Param<F>)) {
        f("weight", &mut self.weight);
        if let Some(b) = &mut self.bias {
            f("bias", b);
        }
    }

    fn release(&mut self) {
        self.fixed = None;
        self.sparse_s = None;
    }

    fn attrs(&self) -> Option<Attrs> {
        Some(
            Attrs::new()
                .with("in_dim", self.in_dim())
                .with("out_dim", self.out_dim())
                .with("bias", self.bias.is_some())
                .with("order", self.order),
        )
    }

    fn clone_box(&self) -> Box<dyn Layer<F>> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod lean_tests;
