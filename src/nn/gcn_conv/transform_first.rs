//! [`Order::TransformFirst`](super::Order::TransformFirst), Â·(H·W): forward T = H·W,
//! Z = Â·T; backward P = Âᵀ·G, dW += Hᵀ·P, dH = P·Wᵀ. On a bipartite block, T, P, H and dH
//! have the n_src source rows, Z and G the n destination rows.

use ndarray::{ArrayView2, ArrayViewMut2};

use super::GcnConv;
use crate::kernels::gemm;
use crate::nn::layer::{view, view_mut, Bufs, Cx, Value};
use crate::Scalar;

impl<F: Scalar> GcnConv<F> {
    /// out ← Â·(X·W) (without the bias), T = X·W in scratch.
    pub(super) fn transform_first_forward(
        &self,
        cx: &mut Cx<'_, F>,
        x: Value<'_, F>,
        out: ArrayViewMut2<'_, F>,
        mut scratch: Bufs<'_, F>,
    ) {
        let (n_src, par) = (cx.n_src(), cx.par);
        let t = scratch.take_f(n_src * self.out_dim());
        let mut t = view_mut(t, (n_src, self.out_dim()));
        x.times(self.weight.value.view(), t.view_mut(), par);
        cx.adj.a_times(F::one(), t.view(), F::zero(), out, par);
    }

    /// [`transform_first_forward`](Self::transform_first_forward) with the output over the
    /// input (a forward-only pass): `buf` holds H (n × in_dim) on entry, T = H·W goes to
    /// scratch, then Â·T (without the bias) over H. The same bits.
    pub(super) fn transform_first_over_input(
        &self,
        cx: &mut Cx<'_, F>,
        buf: &mut [F],
        mut scratch: Bufs<'_, F>,
    ) {
        let (n, n_src, par) = (cx.n(), cx.n_src(), cx.par);
        let (din, dout) = (self.in_dim(), self.out_dim());
        let t = scratch.take_f(n_src * dout);
        let mut t = view_mut(t, (n_src, dout));
        gemm(
            F::one(),
            view(buf, (n_src, din)),
            self.weight.value.view(),
            F::zero(),
            t.view_mut(),
            par,
        );
        cx.adj
            .a_times(F::one(), t.view(), F::zero(), view_mut(buf, (n, dout)), par);
    }

    /// P = Âᵀ·G in scratch; dW += Hᵀ·P; dH = P·Wᵀ into `grad` (which holds G on entry) when the
    /// input needs a gradient. (The bias gradient is the caller's.)
    pub(super) fn transform_first_backward(
        &mut self,
        cx: &mut Cx<'_, F>,
        h: Value<'_, F>,
        grad: &mut [F],
        mut scratch: Bufs<'_, F>,
    ) {
        let (n, n_src, par) = (cx.n(), cx.n_src(), cx.par);
        let (din, dout) = (self.in_dim(), self.out_dim());
        let g = view(grad, (n, dout));
        let p = scratch.take_f(n_src * dout);
        cx.adj
            .at_times(F::one(), g, F::zero(), view_mut(p, (n_src, dout)), par);
        let p: ArrayView2<'_, F> = view(p, (n_src, dout));
        h.t_times_acc(&cx.sums, p, self.weight.grad.view_mut(), par);
        if cx.need_din {
            let wt = self.weight.value.t();
            gemm(
                F::one(),
                p,
                wt,
                F::zero(),
                view_mut(grad, (n_src, din)),
                par,
            );
        }
    }
}
