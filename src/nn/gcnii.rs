//! [`GcniiConv`]: the GCNII layer (Chen et al., ICML 2020, <https://arxiv.org/abs/2007.02133>),
//! initial residual and identity mapping, forward and backward in one file.
//!
//! Z = S·((1−β)·I + β·W) with S = (1−α)·Â·H + α·H₀, i.e. Z = (1−β)·S + β·S·W,
//! and β = β_l = ln(λ/l + 1) for the l-th layer (l counted from 1). The model applies ReLU.
//!
//! Backward from G = ∂L/∂Z (derivation in `docs/MATH.md`, "GCNII"):
//! - ∂L/∂W = β·SᵀG
//! - ∂L/∂S = (1−β)·G + β·G·Wᵀ
//! - ∂L/∂H = (1−α)·Âᵀ·∂L/∂S, ∂L/∂H₀ = α·∂L/∂S
//!
//! Inputs: H (input 0) and H₀ (input 1). Saves S; needs ∂L/∂S as scratch.
//!
//! # Shapes
//! H, H₀, S, Z, G: n × d; W: d × d (GCNII keeps one width through its convolutions).

use ndarray::Zip;
use rand::Rng;

use super::layer::{view, view_mut, Bwd, Cx, Fwd, GradIo, Layer, Req};
use super::param::Param;
use crate::kernels::gemm;
use crate::Scalar;

/// β_l = ln(λ/l + 1), the identity-mapping strength of layer `l` (counted from 1).
///
/// # Examples
/// ```
/// let b = sparse_gcn::nn::gcnii::beta(0.5, 1);
/// assert!((b - 1.5f64.ln()).abs() < 1e-15);
/// ```
pub fn beta(lambda: f64, l: usize) -> f64 {
    (lambda / l.max(1) as f64 + 1.0).ln()
}

/// A GCNII convolution: a d × d weight (Glorot), no bias (as in the paper's code), and its
/// fixed α and β.
#[derive(Debug, Clone, PartialEq)]
pub struct GcniiConv<F> {
    /// W: d × d.
    pub weight: Param<F>,
    /// Initial-residual weight α.
    pub alpha: f64,
    /// Identity-mapping weight β = ln(λ/l + 1).
    pub beta: f64,
}

impl<F: Scalar> GcniiConv<F> {
    /// The `l`-th GCNII layer (from 1) of width `dim`, with β from `lambda`.
    pub fn new<R: Rng + ?Sized>(
        dim: usize,
        alpha: f64,
        lambda: f64,
        l: usize,
        rng: &mut R,
    ) -> Self {
        GcniiConv {
            weight: Param::glorot(dim, dim, rng),
            alpha,
            beta: beta(lambda, l),
        }
    }

    /// Width.
    pub fn dim(&self) -> usize {
        self.weight.value.nrows()
    }
}

impl<F: Scalar> Layer<F> for GcniiConv<F> {
    fn name(&self) -> &'static str {
        "gcnii_conv"
    }

    fn out_dim(&self) -> usize {
        self.dim()
    }

    fn arity(&self) -> usize {
        2
    }

    fn saved(&self, n: usize) -> Req {
        Req::f(n * self.dim())
    }

    fn scratch(&self, n: usize) -> Req {
        Req::f(n * self.dim())
    }

    fn forward(&mut self, cx: &mut Cx<'_, F>, io: Fwd<'_, F>) {
        let Fwd {
            ins,
            mut out,
            mut saved,
            ..
        } = io;
        let (n, d, par) = (cx.n(), self.dim(), cx.par);
        let (h, h0) = (ins.get(0).dense(), ins.get(1).dense());
        assert!(
            h.dim() == (n, d) && h0.dim() == (n, d) && out.dim() == (n, d),
            "GcniiConv::forward: H {:?}, H0 {:?}, out {:?}, expected {n}×{d}",
            h.dim(),
            h0.dim(),
            out.dim()
        );
        let a = F::from_f64_lossy(self.alpha);
        let b = F::from_f64_lossy(self.beta);
        let mut s = view_mut(saved.take_f(n * d), (n, d));
        cx.adj
            .a_times(F::one() - a, h, F::zero(), s.view_mut(), par);
        s.scaled_add(a, &h0);
        Zip::from(&mut out)
            .and(&s)
            .for_each(|o, &v| *o = v * (F::one() - b));
        gemm(b, s.view(), self.weight.value.view(), F::one(), out, par);
    }

    fn backward(&mut self, cx: &mut Cx<'_, F>, io: Bwd<'_, F>) {
        let Bwd {
            mut saved,
            mut scratch,
            grad,
            ..
        } = io;
        let GradIo::Separate { dout: g, mut din } = grad else {
            unreachable!("GCNII's gradient is separate")
        };
        let (n, d, par) = (cx.n(), self.dim(), cx.par);
        let a = F::from_f64_lossy(self.alpha);
        let b = F::from_f64_lossy(self.beta);
        let s = view(saved.take_f(n * d), (n, d));
        // dW += β SᵀG
        cx.adj
            .t_matmul(b, s, g, F::one(), self.weight.grad.view_mut(), par);
        // dS = (1−β)G + β G Wᵀ
        let mut ds = view_mut(scratch.take_f(n * d), (n, d));
        Zip::from(&mut ds)
            .and(&g)
            .for_each(|o, &v| *o = v * (F::one() - b));
        gemm(b, g, self.weight.value.t(), F::one(), ds.view_mut(), par);
        // dH0 = α dS ; dH = (1−α) Âᵀ dS
        if let Some(dh0) = din.get(1) {
            Zip::from(dh0).and(&ds).for_each(|o, &v| *o = a * v);
        }
        if let Some(dh) = din.get(0) {
            cx.adj.at_times(F::one() - a, ds.view(), F::zero(), dh, par);
        }
    }

    fn visit_params(&mut self, f: &mut dyn FnMut(&'static str, &mut Param<F>)) {
        f("weight", &mut self.weight);
    }

    fn clone_box(&self) -> Box<dyn Layer<F>> {
        Box::new(self.clone())
    }
}
