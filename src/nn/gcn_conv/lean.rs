//! [`Order::Lean`](super::Order::Lean): forward (Â·H)·W and backward as TransformFirst's, both
//! in blocks of [`LEAN_BLOCK`](super::LEAN_BLOCK) rows, so that no n-row temporary is held;
//! dH left over H when the stack grants it. The blocked forward is also aggregate-first's
//! recomputation of Â·X for an evaluation.

use ndarray::{s, ArrayView2, ArrayViewMut2};

use super::GcnConv;
use crate::graph::Propagate;
use crate::kernels::gemm;
use crate::nn::layer::{view, view_mut, Bufs, Cx};
use crate::{Par, Result, Scalar};

/// The kept input of [`Order::Lean`](super::Order::Lean)'s backward: overwritten by ∂L/∂H, or
/// only read (no dH).
pub(super) enum LeanInput<'a, F> {
    Over(&'a mut [F]),
    Read(ArrayView2<'a, F>),
}

impl<F: Scalar> GcnConv<F> {
    /// out ← (Â·H)·W block by block of `lean_block` rows (one block of Â·H in `scratch`), every
    /// row as the whole products give it (without the bias).
    pub(super) fn blocked_forward(
        &self,
        adj: &dyn Propagate<F>,
        h: ArrayView2<'_, F>,
        mut out: ArrayViewMut2<'_, F>,
        mut scratch: Bufs<'_, F>,
        par: Par,
    ) -> Result<()> {
        // (Blocks of Â's rows: the output's.)
        let (n, block, w) = (out.nrows(), self.lean_block, self.weight.value.view());
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
        Ok(adj.a_times_blocks(h, block, s, f, par)?)
    }

    /// The backward in blocks: per block b, P_b = (Âᵀ·G)_b and dW += H_bᵀ·P_b, then (with ∂L/∂H
    /// left over H, [`LeanInput::Over`]) dH_b = P_b·Wᵀ over H_b; and db. Every row of P and of
    /// dH, and dW's exact sum, are those of TransformFirst's backward.
    pub(super) fn lean_backward(
        &mut self,
        cx: &mut Cx<'_, F>,
        g: ArrayView2<'_, F>,
        mut h: LeanInput<'_, F>,
        mut scratch: Bufs<'_, F>,
    ) -> Result<()> {
        // (P and H have Â's source rows: n_src.)
        let (n, par, adj) = (cx.n_src(), cx.par, cx.adj);
        let (din, dout) = (self.in_dim(), self.out_dim());
        if let Some(b) = &mut self.bias {
            cx.sums.col_sum(g, F::one(), b.grad.row_mut(0), par);
        }
        let block = self.lean_block;
        let p = scratch.take_f(n.min(block) * dout);
        let wt = self.weight.value.t();
        let dw = self.weight.grad.view_mut();
        let mut res = Ok(());
        cx.sums
            .t_matmul_rows(F::one(), F::one(), dw, par, &mut |sink| {
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
                res = adj.at_times_blocks(g, block, p, f, par);
            });
        Ok(res?)
    }
}
