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

use super::arch::{prev_node, Architecture, Builder, Built, ModelConfig, Uses};
use super::attrs::{Attrs, FromAttrs, Registry};
use super::dropout::ReluDropout;
use super::layer::{view, view_mut, Bwd, Cx, Fwd, InputDesc, Layer, Req, Spec};
use super::linear::Linear;
use super::param::Param;
use super::stack::Src;
use crate::kernels::gemm;
use crate::{ConfigError, Result, Scalar};

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

impl<F: Scalar> FromAttrs<F> for GcniiConv<F> {
    /// `dim`, `alpha`, `beta` (β_l itself, not λ); zero weight.
    fn from_attrs(a: &Attrs) -> Result<Self, ConfigError> {
        let [d, _] = a.shape(["dim", "dim"])?;
        Ok(GcniiConv {
            weight: Param::zeros(d, d),
            alpha: a.finite("alpha")?,
            beta: a.finite("beta")?,
        })
    }
}

impl<F: Scalar> Layer<F> for GcniiConv<F> {
    fn name(&self) -> &'static str {
        "gcnii_conv"
    }

    fn arity(&self) -> usize {
        2
    }

    fn spec(&self, _inputs: &[InputDesc], n: usize) -> Spec {
        Spec {
            saved: Req::f(n * self.dim()),
            scratch: Req::f(n * self.dim()),
            ..Spec::new(self.dim()).reading(self.dim())
        }
    }

    fn forward(&mut self, cx: &mut Cx<'_, F>, io: Fwd<'_, F>) -> Result<()> {
        let (ins, mut out, mut saved) = (io.ins, io.out, io.saved);
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
        Ok(())
    }

    fn backward(&mut self, cx: &mut Cx<'_, F>, io: Bwd<'_, F>) -> Result<()> {
        let (mut saved, mut scratch, grad) = (io.saved, io.scratch, io.grad);
        let (g, mut din) = grad.separate();
        let (n, d, par) = (cx.n(), self.dim(), cx.par);
        let a = F::from_f64_lossy(self.alpha);
        let b = F::from_f64_lossy(self.beta);
        let s = view(saved.take_f(n * d), (n, d));
        // dW += β SᵀG
        cx.sums
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
        Ok(())
    }

    fn visit_params(&mut self, f: &mut dyn FnMut(&'static str, &mut Param<F>)) {
        f("weight", &mut self.weight);
    }

    fn attrs(&self) -> Option<Attrs> {
        Some(
            Attrs::new()
                .with("dim", self.dim())
                .with("alpha", self.alpha)
                .with("beta", self.beta),
        )
    }

    fn clone_box(&self) -> Box<dyn Layer<F>> {
        Box::new(self.clone())
    }
}

/// GCNII's settings (Chen et al., ICML 2020): the initial-residual weight α and λ of the
/// identity mapping's β_l = ln(λ/l + 1); its [`Architecture`]: drop → Lin → ReLU = H₀;
/// [drop → GCNII(·, H₀) → ReLU] × L → drop → Lin.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GcniiConfig {
    /// α: the weight of the initial residual H₀ (the paper's 0.1).
    pub alpha: f64,
    /// λ of β_l = ln(λ/l + 1) (the paper's 0.5).
    pub lambda: f64,
}

impl GcniiConfig {
    /// The paper's α 0.1 and λ 0.5.
    pub(crate) const PAPER: GcniiConfig = GcniiConfig {
        alpha: 0.1,
        lambda: 0.5,
    };
}

impl Default for GcniiConfig {
    fn default() -> Self {
        GcniiConfig::PAPER
    }
}

impl Architecture for GcniiConfig {
    const NAMES: &'static [(&'static str, Self)] = &[("gcnii", GcniiConfig::PAPER)];
    const SUMMARY: &'static str =
        "GCNII: initial residual and identity mapping (Chen et al., ICML 2020)";

    fn settings(&self) -> Vec<(&'static str, f64)> {
        vec![("alpha", self.alpha), ("lambda", self.lambda)]
    }

    fn set(&mut self, key: &str, value: f64) -> Result<bool, ConfigError> {
        match key {
            "alpha" => self.alpha = value,
            "lambda" => self.lambda = value,
            _ => return Ok(false),
        }
        self.check().map(|()| true)
    }

    fn check(&self) -> Result<(), ConfigError> {
        if !(0.0..=1.0).contains(&self.alpha) {
            return Err(ConfigError::OutOfRange {
                name: "alpha",
                value: self.alpha,
                rule: "in [0, 1]",
            });
        }
        if !(self.lambda.is_finite() && self.lambda > 0.0) {
            return Err(ConfigError::OutOfRange {
                name: "lambda",
                value: self.lambda,
                rule: "positive",
            });
        }
        Ok(())
    }

    fn uses(&self) -> Uses {
        Uses {
            gcn_convs: false,
            ..Uses::GCN
        }
    }

    fn register_layers<F: Scalar>(r: &mut Registry<F>) {
        r.add::<GcniiConv<F>>("gcnii_conv");
    }

    fn n_hidden(&self, n_layers: usize) -> usize {
        n_layers
    }

    fn param_count(&self, cfg: &ModelConfig) -> u64 {
        let [i, h, o, l] =
            [cfg.in_dim, cfg.hidden_dim, cfg.out_dim, cfg.n_layers].map(|v| v as u64);
        let (_, lin, _) = cfg.param_parts();
        lin(i, h)
            .saturating_add(l.saturating_mul(h.saturating_mul(h)))
            .saturating_add(lin(h, o))
    }

    fn build<F: Scalar, R: Rng + ?Sized>(
        &self,
        cfg: &ModelConfig,
        b: &mut Builder<'_, F>,
        rng: &mut R,
    ) -> Built {
        let h = cfg.hidden_dim;
        let stem = Linear::<F>::new(cfg.in_dim, h, true, rng);
        let convs: Vec<GcniiConv<F>> = (0..cfg.n_layers)
            .map(|l| GcniiConv::new(h, self.alpha, self.lambda, l + 1, rng))
            .collect();
        let head = Linear::<F>::new(h, cfg.out_dim, true, rng);
        let s = b.push(stem, vec![Src::Xd], 0, 0);
        let h0 = b.elem(ReluDropout::relu(h), Src::Node(s), 0);
        let p = cfg.dropout;
        let mut prev = b.elem(ReluDropout::dropout(h, p), h0, 1);
        let mut taps = Vec::new();
        let nh = cfg.n_layers as u64;
        for (l, conv) in convs.into_iter().enumerate() {
            b.begin_block();
            let z = b.push(conv, vec![prev, h0], 1, 0);
            // ReLU, then the dropout of the next block's input (or the head's).
            let site = (l as u64 + 2).min(nh + 1);
            prev = b.elem(ReluDropout::new(h, p), Src::Node(z), site);
            taps.push(prev_node(prev));
            b.end_block(l);
        }
        b.push(head, vec![prev], 2, 0);
        Built {
            input_site: 0,
            taps,
            no_input_dropout: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use ndarray::{array, Array2};

    use super::*;
    use crate::graph::{Direction, Graph, Norm, NormAdj};
    use crate::testing::harness::{random, rng, small_adjs, Harness, In};

    #[test]
    fn gradients_match_finite_differences() {
        // Both inputs' gradients and dW; then each input's alone (the other's slot empty).
        for (name, adj) in &small_adjs() {
            let (n, d) = (adj.n_nodes(), 4);
            let mut r = rng(11);
            let mut conv = GcniiConv::<f64>::new(d, 0.1, 0.5, 2, &mut r);
            let ins = [
                In::Dense(random(n, d, &mut r)),
                In::Dense(random(n, d, &mut r)),
            ];
            let g = random(n, d, &mut r);
            let h = Harness::new(adj);
            let (_, both) = h.grad_check(&mut conv, &ins, &[true, true], &g, name);
            for k in 0..2 {
                let mut need = [false; 2];
                need[k] = true;
                let (_, one) = h.grad_check(&mut conv, &ins, &need, &g, name);
                assert_eq!(one[k], both[k], "{name}: input {k}");
                assert!(one[1 - k].is_none());
            }
        }
    }

    #[test]
    fn matches_its_definition() {
        // Z = ((1−α)ÂH + αH₀)((1−β)I + βW), with Â dense.
        for (name, adj) in &small_adjs() {
            let n = adj.n_nodes();
            let mut r = rng(2);
            let mut conv = GcniiConv::<f64>::new(3, 0.2, 0.5, 3, &mut r);
            let (h, h0) = (random(n, 3, &mut r), random(n, 3, &mut r));
            let a = adj.a().to_dense();
            let s = a.dot(&h) * 0.8 + &(&h0 * 0.2);
            let b = (0.5f64 / 3.0 + 1.0).ln();
            assert_eq!(conv.beta, b);
            let m = Array2::eye(3) * (1.0 - b) + &(&conv.weight.value * b);
            let want = s.dot(&m);
            let (got, _) = Harness::new(adj).forward(&mut conv, &[In::Dense(h), In::Dense(h0)]);
            assert!((&got - &want).iter().all(|v| v.abs() < 1e-12), "{name}");
        }
    }

    #[test]
    fn golden_path_graph() {
        // P3, symmetric: Â·u = u for u = (√2, √3, √2). With d = 1, W = [2], H = u, H₀ = 0 and
        // α = 1/2: S = u/2, Z = (1−β)S + 2βS = (1 + β)·u/2; for G = 1: dW = β·Σ S = β(2√2 + √3)/2,
        // ∂L/∂S = 1 + β, dH₀ = (1 + β)/2, dH = (1 + β)/2 · Â1.
        let gr = Graph::try_from_edges(3, &[(0, 1), (1, 2)], Direction::Undirected).unwrap();
        let adj = NormAdj::<f64>::new(&gr, Norm::Symmetric);
        let (s2, s3, s6) = (2f64.sqrt(), 3f64.sqrt(), 6f64.sqrt());
        let u = array![[s2], [s3], [s2]];
        let beta = 0.4;
        let mut conv = GcniiConv {
            weight: Param::new(array![[2.0]]),
            alpha: 0.5,
            beta,
        };
        let ins = [In::Dense(u.clone()), In::Dense(Array2::zeros((3, 1)))];
        let (z, din) =
            Harness::new(&adj).run(&mut conv, &ins, &Array2::ones((3, 1)), &[true, true]);
        let close = |a: &Array2<f64>, b: &Array2<f64>| (a - b).iter().all(|v| v.abs() < 1e-12);
        assert!(close(&z, &(&u * ((1.0 + beta) / 2.0))), "{z}");
        assert!(close(
            &conv.weight.grad,
            &array![[beta * (2.0 * s2 + s3) / 2.0]]
        ));
        let a1 = array![[0.5 + 1.0 / s6], [1.0 / 3.0 + 2.0 / s6], [0.5 + 1.0 / s6]];
        assert!(close(
            din[0].as_ref().unwrap(),
            &(a1 * ((1.0 + beta) / 2.0))
        ));
        assert!(close(
            din[1].as_ref().unwrap(),
            &Array2::from_elem((3, 1), (1.0 + beta) / 2.0)
        ));
    }
}
