//! A layer that is not part of sparse-gcn, written outside its crate against its public API
//! (the [`Layer`] trait, [`Propagate`] for Â, [`Sums`](sparse_gcn::graph::Sums) for every sum
//! across nodes, caller-owned buffers) and checked by its gradient-check harness
//! (`sparse_gcn::testing`, feature `testing`): see `tests/sage.rs`.
//!
//! It saves and loads in a hand-built stack: [`Layer::attrs`] describes its settings and
//! [`FromAttrs`] builds it from them; a loader knows it through one registration line,
//! `Registry::builtin().with::<SageConv<f32>>("sage_conv")`.
//!
//! [`SageConv`] is GraphSAGE's convolution with Â as the aggregator (Hamilton et al., NeurIPS
//! 2017, "Inductive Representation Learning on Large Graphs"; the mean aggregator when Â is
//! row-normalised): Y = X·W_self + (Â·X)·W_neigh + 1·bᵀ.
//!
//! Backward, with G = ∂L/∂Y and S = Â·X (saved by forward):
//! dW_self = Xᵀ·G, dW_neigh = Sᵀ·G, db = Gᵀ·1, dX = G·W_selfᵀ + Âᵀ·(G·W_neighᵀ).
//!
//! [`Layer`]: sparse_gcn::nn::Layer
//! [`Propagate`]: sparse_gcn::Propagate

use rand::Rng;
use sparse_gcn::kernels::{add_bias, gemm};
use sparse_gcn::nn::attrs::{Attrs, FromAttrs};
use sparse_gcn::nn::layer::{view, view_mut, Bwd, Cx, Fwd, InputDesc, Req, Spec};
use sparse_gcn::nn::{Layer, Param};
use sparse_gcn::{ConfigError, Result, Scalar};

/// Y = X·W_self + (Â·X)·W_neigh + 1·bᵀ on dense inputs (see the [crate docs](crate)).
#[derive(Debug, Clone, PartialEq)]
pub struct SageConv<F> {
    /// W_self: in × out.
    pub w_self: Param<F>,
    /// W_neigh: in × out.
    pub w_neigh: Param<F>,
    /// b: 1 × out.
    pub bias: Param<F>,
}

impl<F: Scalar> SageConv<F> {
    /// Glorot weights from `rng`, zero bias.
    pub fn new<R: Rng + ?Sized>(in_dim: usize, out_dim: usize, rng: &mut R) -> Self {
        SageConv {
            w_self: Param::glorot(in_dim, out_dim, rng),
            w_neigh: Param::glorot(in_dim, out_dim, rng),
            bias: Param::zeros(1, out_dim),
        }
    }

    /// Input width.
    pub fn in_dim(&self) -> usize {
        self.w_self.value.nrows()
    }

    /// Output width.
    pub fn out_dim(&self) -> usize {
        self.w_self.value.ncols()
    }
}

impl<F: Scalar> Layer<F> for SageConv<F> {
    fn name(&self) -> &'static str {
        "sage_conv"
    }

    fn spec(&self, _inputs: &[InputDesc], n: usize) -> Spec {
        Spec {
            // Backward reads X (for dW_self) …
            keeps_input: true,
            // … and S = Â·X (for dW_neigh); G·W_neighᵀ is a temporary.
            saved: Req::f(n * self.in_dim()),
            scratch: Req::f(n * self.in_dim()),
            ..Spec::new(self.out_dim()).reading(self.in_dim())
        }
    }

    fn forward(&mut self, cx: &mut Cx<'_, F>, io: Fwd<'_, F>) -> Result<()> {
        let (ins, mut out, mut saved) = (io.ins, io.out, io.saved);
        let (n, d, par) = (cx.n(), self.in_dim(), cx.par);
        let x = ins.get(0).dense();
        let s = saved.take_f(n * d);
        cx.adj
            .a_times(F::one(), x, F::zero(), view_mut(s, (n, d)), par);
        gemm(
            F::one(),
            x,
            self.w_self.value.view(),
            F::zero(),
            out.view_mut(),
            par,
        );
        let s = view(s, (n, d));
        gemm(
            F::one(),
            s,
            self.w_neigh.value.view(),
            F::one(),
            out.view_mut(),
            par,
        );
        add_bias(out, self.bias.value.row(0), par);
        Ok(())
    }

    fn backward(&mut self, cx: &mut Cx<'_, F>, io: Bwd<'_, F>) -> Result<()> {
        let (ins, mut saved, mut scratch) = (io.ins, io.saved, io.scratch);
        let (g, mut din) = io.grad.separate();
        let (n, d, par) = (cx.n(), self.in_dim(), cx.par);
        let x = ins.get(0).dense();
        let s = view(saved.take_f(n * d), (n, d));
        // Sums over every node go through `cx.sums` (exact, the same bits on any thread count).
        cx.sums
            .t_matmul(F::one(), x, g, F::one(), self.w_self.grad.view_mut(), par);
        cx.sums
            .t_matmul(F::one(), s, g, F::one(), self.w_neigh.grad.view_mut(), par);
        cx.sums.col_sum(g, F::one(), self.bias.grad.row_mut(0), par);
        if let Some(mut dx) = din.get(0) {
            // dX = Âᵀ·(G·W_neighᵀ) + G·W_selfᵀ
            let t = scratch.take_f(n * d);
            gemm(
                F::one(),
                g,
                self.w_neigh.value.t(),
                F::zero(),
                view_mut(t, (n, d)),
                par,
            );
            cx.adj
                .at_times(F::one(), view(t, (n, d)), F::zero(), dx.view_mut(), par);
            gemm(F::one(), g, self.w_self.value.t(), F::one(), dx, par);
        }
        Ok(())
    }

    fn visit_params(&mut self, f: &mut dyn FnMut(&'static str, &mut Param<F>)) {
        f("w_self", &mut self.w_self);
        f("w_neigh", &mut self.w_neigh);
        f("bias", &mut self.bias);
    }

    fn attrs(&self) -> Option<Attrs> {
        // What `from_attrs` needs to build it again: a checkpoint stores these, the
        // parameters as tensors.
        Some(
            Attrs::new()
                .with("in_dim", self.in_dim())
                .with("out_dim", self.out_dim()),
        )
    }

    fn clone_box(&self) -> Box<dyn Layer<F>> {
        Box::new(self.clone())
    }
}

impl<F: Scalar> FromAttrs<F> for SageConv<F> {
    /// `in_dim`, `out_dim`; zero parameters (a checkpoint fills them).
    fn from_attrs(a: &Attrs) -> std::result::Result<Self, ConfigError> {
        // Sizes it allocates from are read with `shape`, which bounds them by what the file
        // holds.
        let [i, o] = a.shape(["in_dim", "out_dim"])?;
        Ok(SageConv {
            w_self: Param::zeros(i, o),
            w_neigh: Param::zeros(i, o),
            bias: Param::zeros(1, o),
        })
    }
}
