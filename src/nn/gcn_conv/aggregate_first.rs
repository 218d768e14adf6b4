//! [`Order::AggregateFirst`](super::Order::AggregateFirst), (Â·H)·W: forward S = Â·H (kept
//! across passes on the fixed input, saved otherwise), Z = S·W; backward dW += Sᵀ·G,
//! dH = Âᵀ·(G·Wᵀ). On a bipartite block, S and G have the n destination rows, H and dH the
//! n_src source rows.

use ndarray::{Array2, ArrayViewMut2};

use super::cache::{aggregate_sparse, Aggregated};
use super::GcnConv;
use crate::kernels::gemm;
use crate::nn::layer::{view, view_mut, Bufs, Cx, InputDesc, Saved, Value};
use crate::{Result, Scalar};

impl<F: Scalar> GcnConv<F> {
    /// out ← (Â·X)·W (without the bias).
    pub(super) fn aggregate_first_forward(
        &mut self,
        cx: &mut Cx<'_, F>,
        x: Value<'_, F>,
        out: ArrayViewMut2<'_, F>,
        mut saved: Bufs<'_, F>,
    ) -> Result<()> {
        let (n, par) = (cx.n(), cx.par);
        let w = self.weight.value.view();
        let s = if cx.fixed_input {
            if self.fixed.is_none() {
                let s = match x {
                    Value::Dense(h) => {
                        let mut s = Array2::zeros((n, h.ncols()));
                        cx.adj.a_times(F::one(), h, F::zero(), s.view_mut(), par);
                        Aggregated::Dense(s)
                    }
                    Value::Sparse(xs, _) => {
                        let mut s = None;
                        let tmp = &mut self.spgemm_tmp;
                        aggregate_sparse(cx.adj, xs, cx.input, &mut s, tmp)?;
                        let Some((_, s)) = s else {
                            unreachable!("set by aggregate_sparse")
                        };
                        Aggregated::Sparse(s)
                    }
                };
                self.fixed = Some((cx.input, s));
            }
            let Some((_, s)) = &self.fixed else {
                unreachable!("set above")
            };
            s.value()
        } else {
            match x {
                Value::Dense(h) => {
                    let dim = (n, self.in_dim());
                    let s = saved.take_f(n * self.in_dim());
                    cx.adj
                        .a_times(F::one(), h, F::zero(), view_mut(s, dim), par);
                    Value::Dense(view(s, dim))
                }
                Value::Sparse(xs, _) => {
                    let (s, tmp) = (&mut self.sparse_s, &mut self.spgemm_tmp);
                    let s = aggregate_sparse(cx.adj, xs, cx.input, s, tmp)?;
                    Value::Sparse(s.x(), s.x_t())
                }
            }
        };
        s.times(w, out, par);
        Ok(())
    }

    /// dW += Sᵀ·G; dH = Âᵀ·(G·Wᵀ) into `grad` (which holds G on entry) when the input needs a
    /// gradient. (The bias gradient is the caller's.)
    pub(super) fn aggregate_first_backward(
        &mut self,
        cx: &mut Cx<'_, F>,
        input: InputDesc,
        grad: &mut [F],
        mut saved: Saved<'_, F>,
        mut scratch: Bufs<'_, F>,
    ) {
        let (n, par) = (cx.n(), cx.par);
        let (din, dout) = (self.in_dim(), self.out_dim());
        let g = view(grad, (n, dout));
        let s = match (&self.fixed, &self.sparse_s) {
            (Some((_, f)), _) if cx.fixed_input => f.value(),
            (_, Some((_, s))) if input.sparse => Value::Sparse(s.x(), s.x_t()),
            _ => Value::Dense(view(saved.take_f(n * din), (n, din))),
        };
        s.t_times_acc(&cx.sums, g, self.weight.grad.view_mut(), par);
        if cx.need_din {
            let tmp = scratch.take_f(n * din);
            let wt = self.weight.value.t();
            gemm(F::one(), g, wt, F::zero(), view_mut(tmp, (n, din)), par);
            let y = view(tmp, (n, din));
            let dh = view_mut(grad, (cx.n_src(), din));
            cx.adj.at_times(F::one(), y, F::zero(), dh, par);
        }
    }
}
