//! `GcniiConv`: the GCNII layer (Chen et al., ICML 2020, <https://arxiv.org/abs/2007.02133>),
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
//! # Shapes
//! H, H₀, S, Z, G: n × d; W: d × d (GCNII keeps one width through its convolutions).

use ndarray::{Array2, ArrayView2, ArrayViewMut2, Zip};
use rand::Rng;

use super::param::Param;
use crate::graph::NormAdj;
use crate::kernels::{gemm, spmm};
use crate::{Par, Scalar};

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

/// What [`GcniiConv::backward`] needs: S = (1−α)ÂH + αH₀.
#[derive(Debug)]
pub struct GcniiCache<F> {
    s: Array2<F>,
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

    /// Z = (1−β)S + βSW with S = (1−α)ÂH + αH₀.
    ///
    /// # Panics
    /// If `h` or `h0` is not n × d.
    #[track_caller]
    pub fn forward(
        &self,
        adj: &NormAdj<F>,
        h: ArrayView2<'_, F>,
        h0: ArrayView2<'_, F>,
        par: Par,
    ) -> (Array2<F>, GcniiCache<F>) {
        let n = adj.n_nodes();
        let d = self.dim();
        assert!(
            h.dim() == (n, d) && h0.dim() == (n, d),
            "GcniiConv::forward: H {:?}, H0 {:?}, expected {n}×{d}",
            h.dim(),
            h0.dim()
        );
        let mut s = Array2::zeros((n, d));
        let mut z = Array2::zeros((n, d));
        self.forward_into(adj, h, h0, s.view_mut(), z.view_mut(), par);
        (z, GcniiCache { s })
    }

    /// [`GcniiConv::forward`] into `s` (S, kept for backward) and `z`, both n × d: allocates
    /// nothing.
    #[track_caller]
    pub(crate) fn forward_into(
        &self,
        adj: &NormAdj<F>,
        h: ArrayView2<'_, F>,
        h0: ArrayView2<'_, F>,
        mut s: ArrayViewMut2<'_, F>,
        mut z: ArrayViewMut2<'_, F>,
        par: Par,
    ) {
        let a = F::from_f64_lossy(self.alpha);
        let b = F::from_f64_lossy(self.beta);
        spmm(F::one() - a, adj.a(), h, F::zero(), s.view_mut(), par);
        s.scaled_add(a, &h0);
        Zip::from(&mut z)
            .and(&s)
            .for_each(|o, &v| *o = v * (F::one() - b));
        gemm(
            b,
            s.view(),
            self.weight.value.view(),
            F::one(),
            z.view_mut(),
            par,
        );
    }

    /// The output of [`GcniiConv::forward`] without keeping S.
    pub fn predict(
        &self,
        adj: &NormAdj<F>,
        h: ArrayView2<'_, F>,
        h0: ArrayView2<'_, F>,
        par: Par,
    ) -> Array2<F> {
        self.forward(adj, h, h0, par).0
    }

    /// Adds ∂L/∂W into the weight's gradient, adds α·∂L/∂S into `dh0`, and returns ∂L/∂H.
    ///
    /// # Panics
    /// If `g` or `dh0` is not n × d.
    #[track_caller]
    pub fn backward(
        &mut self,
        adj: &NormAdj<F>,
        cache: GcniiCache<F>,
        g: ArrayView2<'_, F>,
        dh0: &mut Array2<F>,
        par: Par,
    ) -> Array2<F> {
        let n = adj.n_nodes();
        let d = self.dim();
        assert!(
            g.dim() == (n, d) && dh0.dim() == (n, d),
            "GcniiConv::backward: G {:?}, dH0 {:?}, expected {n}×{d}",
            g.dim(),
            dh0.dim()
        );
        let GcniiCache { s } = cache;
        let mut ds = Array2::zeros((n, d));
        let mut dh = Array2::zeros((n, d));
        self.backward_into(
            adj,
            s.view(),
            g,
            dh0.view_mut(),
            ds.view_mut(),
            dh.view_mut(),
            par,
        );
        dh
    }

    /// [`GcniiConv::backward`] from the S of the forward pass, with ∂L/∂S in the scratch `ds`
    /// and ∂L/∂H written into `dh` (all n × d): allocates nothing.
    #[track_caller]
    pub(crate) fn backward_into(
        &mut self,
        adj: &NormAdj<F>,
        s: ArrayView2<'_, F>,
        g: ArrayView2<'_, F>,
        dh0: ArrayViewMut2<'_, F>,
        mut ds: ArrayViewMut2<'_, F>,
        dh: ArrayViewMut2<'_, F>,
        par: Par,
    ) {
        let a = F::from_f64_lossy(self.alpha);
        let b = F::from_f64_lossy(self.beta);
        // dW += β SᵀG
        gemm(b, s.t(), g, F::one(), self.weight.grad.view_mut(), par);
        // dS = (1−β)G + β G Wᵀ
        Zip::from(&mut ds)
            .and(&g)
            .for_each(|o, &v| *o = v * (F::one() - b));
        gemm(b, g, self.weight.value.t(), F::one(), ds.view_mut(), par);
        // dH0 += α dS ; dH = (1−α) Âᵀ dS
        Zip::from(dh0).and(&ds).for_each(|o, &v| *o += a * v);
        spmm(F::one() - a, adj.a_t(), ds.view(), F::zero(), dh, par);
    }

    /// Calls `f` on the weight.
    pub fn visit_params(&mut self, f: &mut dyn FnMut(&mut Param<F>)) {
        f(&mut self.weight);
    }
}

#[cfg(test)]
mod tests {
    use ndarray::Array2;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::graph::{Direction, Graph, Norm};
    use crate::testing::{max_rel_err, numerical_grad};

    fn random(rows: usize, cols: usize, rng: &mut ChaCha8Rng) -> Array2<f64> {
        Array2::from_shape_simple_fn((rows, cols), || rng.random_range(-1.0..1.0))
    }

    fn graph(dir: Direction) -> Graph {
        let e = [(0, 1), (1, 2), (2, 3), (3, 0), (3, 4), (5, 5), (4, 1)];
        Graph::try_from_edges(7, &e, dir).unwrap()
    }

    #[test]
    fn gcnii_backward_matches_finite_differences() {
        for (dir, norm) in [
            (Direction::Undirected, Norm::Symmetric),
            (Direction::Directed, Norm::Row),
        ] {
            let adj = NormAdj::<f64>::new(&graph(dir), norm);
            let (n, d) = (adj.n_nodes(), 4);
            let mut rng = ChaCha8Rng::seed_from_u64(11);
            let mut conv = GcniiConv::<f64>::new(d, 0.1, 0.5, 2, &mut rng);
            let h = random(n, d, &mut rng);
            let h0 = random(n, d, &mut rng);
            let r = random(n, d, &mut rng);
            let (_, cache) = conv.forward(&adj, h.view(), h0.view(), Par::Seq);
            let mut dh0 = Array2::zeros((n, d));
            let dh = conv.backward(&adj, cache, r.view(), &mut dh0, Par::Seq);
            let mut analytic: Vec<f64> = conv.weight.grad.iter().copied().collect();
            analytic.extend(dh.iter());
            analytic.extend(dh0.iter());
            let mut theta: Vec<f64> = conv.weight.value.iter().copied().collect();
            theta.extend(h.iter());
            theta.extend(h0.iter());
            let (alpha, beta) = (conv.alpha, conv.beta);
            let loss = |t: &[f64]| {
                let w = Array2::from_shape_vec((d, d), t[..d * d].to_vec()).unwrap();
                let h = Array2::from_shape_vec((n, d), t[d * d..d * d + n * d].to_vec()).unwrap();
                let h0 = Array2::from_shape_vec((n, d), t[d * d + n * d..].to_vec()).unwrap();
                let c = GcniiConv {
                    weight: Param::new(w),
                    alpha,
                    beta,
                };
                (&c.predict(&adj, h.view(), h0.view(), Par::Seq) * &r).sum()
            };
            let numerical = numerical_grad(loss, &theta, 1e-6);
            let (err, at) = max_rel_err(&analytic, &numerical);
            assert!(err < 1e-6, "{dir:?}: rel err {err} at {at}");
        }
    }

    #[test]
    fn gcnii_matches_its_definition() {
        // Z = ((1−α)ÂH + αH0)((1−β)I + βW), with Â dense on a tiny graph.
        let adj = NormAdj::<f64>::new(&graph(Direction::Undirected), Norm::Symmetric);
        let n = adj.n_nodes();
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let conv = GcniiConv::<f64>::new(3, 0.2, 0.5, 3, &mut rng);
        let h = random(n, 3, &mut rng);
        let h0 = random(n, 3, &mut rng);
        let a = adj.a().to_dense();
        let s = (a.dot(&h) * 0.8) + &(&h0 * 0.2);
        let b = (0.5f64 / 3.0 + 1.0).ln();
        let m = Array2::eye(3) * (1.0 - b) + &(&conv.weight.value * b);
        let want = s.dot(&m);
        let got = conv.predict(&adj, h.view(), h0.view(), Par::Rayon);
        assert!((&got - &want).iter().all(|v| v.abs() < 1e-12));
    }
}
