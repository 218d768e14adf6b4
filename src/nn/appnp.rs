//! [`AppnpPropagate`]: the personalised-PageRank propagation of APPNP (Klicpera et al., ICLR 2019,
//! "Predict then Propagate", <https://arxiv.org/abs/1810.05997>), forward and backward in one
//! file.
//!
//! Z₀ = H, Z_{k+1} = (1−α)·Â·Z_k + α·H for k < K, output Z_K. APPNP is a 2-layer MLP giving H,
//! then this layer (K = 10, α = 0.1 in the paper). No parameters, and nothing kept for backward.
//!
//! Backward from G_K = ∂L/∂Z_K: G_{k−1} = (1−α)·Âᵀ·G_k, and
//! ∂L/∂H = α·(G_K + … + G_1) + G_0, summed in that order. The derivation is in `docs/MATH.md`.
//!
//! # Shapes
//! H, Z_k, G_k: n × c.

use ndarray::Zip;

use rand::Rng;

use super::arch::{Architecture, Builder, Built, ModelConfig, Uses, MAX_K};
use super::attrs::{Attrs, FromAttrs, Registry};
use super::dropout::ReluDropout;
use super::layer::{view, view_mut, Bwd, Cx, Fwd, InputDesc, Layer, Req, Spec};
use super::linear::Linear;
use super::sgc::count_setting;
use super::stack::Src;
use crate::{ConfigError, Result, Scalar};

/// K steps of Z ← (1−α)ÂZ + αH on inputs of width `dim`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AppnpPropagate {
    /// Steps K (APPNP: 10).
    pub k: usize,
    /// Teleport probability α (APPNP: 0.1).
    pub alpha: f64,
    /// Width c.
    pub dim: usize,
}

impl<F: Scalar> FromAttrs<F> for AppnpPropagate {
    /// `k` (at most [`MAX_K`]), `alpha` (in [0, 1]), `dim`.
    fn from_attrs(a: &Attrs) -> Result<Self, ConfigError> {
        let alpha = a.finite("alpha")?;
        if !(0.0..=1.0).contains(&alpha) {
            return Err(a.invalid("alpha", "must lie in [0, 1]"));
        }
        Ok(AppnpPropagate {
            k: a.count("k", 0, MAX_K)?,
            alpha,
            dim: a.count("dim", 1, usize::MAX)?,
        })
    }
}

impl<F: Scalar> Layer<F> for AppnpPropagate {
    fn name(&self) -> &'static str {
        "appnp_propagate"
    }
    fn spec(&self, _inputs: &[InputDesc], n: usize) -> Spec {
        Spec {
            scratch: {
                // Forward: one n × c ping-pong buffer; backward: two.
                Req::f(2 * n * self.dim)
            },
            ..Spec::new(self.dim).reading(self.dim)
        }
    }

    fn forward(&mut self, cx: &mut Cx<'_, F>, io: Fwd<'_, F>) -> Result<()> {
        let (ins, mut out, mut scratch) = (io.ins, io.out, io.scratch);
        let (n, c, par) = (cx.n(), self.dim, cx.par);
        let h = ins.get(0).dense();
        let a = F::from_f64_lossy(self.alpha);
        let tmp = scratch.take_f(n * c);
        if self.k == 0 {
            out.assign(&h);
            return Ok(());
        }
        // Z_k alternates between `out` and the scratch so that Z_K lands in `out`.
        let mut in_out = self.k % 2 == 1;
        {
            let mut z1 = if in_out {
                out.view_mut()
            } else {
                view_mut(tmp, (n, c))
            };
            cx.adj
                .a_times(F::one() - a, h, F::zero(), z1.view_mut(), par);
            z1.scaled_add(a, &h);
        }
        for _ in 1..self.k {
            let (src, mut dst) = if in_out {
                (out.view(), view_mut(tmp, (n, c)))
            } else {
                (view(tmp, (n, c)), out.view_mut())
            };
            cx.adj
                .a_times(F::one() - a, src, F::zero(), dst.view_mut(), par);
            dst.scaled_add(a, &h);
            in_out = !in_out;
        }
        Ok(())
    }
    fn backward(&mut self, cx: &mut Cx<'_, F>, io: Bwd<'_, F>) -> Result<()> {
        let (mut scratch, grad) = (io.scratch, io.grad);
        let (dout, mut din) = grad.separate();
        let Some(mut dh) = din.get(0) else {
            return Ok(());
        };
        let (n, c, par) = (cx.n(), self.dim, cx.par);
        let a = F::from_f64_lossy(self.alpha);
        if self.k == 0 {
            dh.assign(&dout);
            return Ok(());
        }
        let (b0, b1) = (scratch.take_f(n * c), scratch.take_f(n * c));
        let mut bufs = [view_mut(b0, (n, c)), view_mut(b1, (n, c))];
        // dH = α·G_K, then G_{K−1} = (1−α)ÂᵀG_K into bufs[0], …
        Zip::from(&mut dh).and(&dout).for_each(|o, &g| *o = a * g);
        cx.adj
            .at_times(F::one() - a, dout, F::zero(), bufs[0].view_mut(), par);
        let mut cur = 0;
        for _ in 1..self.k {
            // dH += α·G_k ; G_{k−1} = (1−α)Âᵀ·G_k
            Zip::from(&mut dh)
                .and(&bufs[cur])
                .for_each(|o, &g| *o += a * g);
            let (src, dst) = if cur == 0 {
                let [x, y] = &mut bufs;
                (x.view(), y.view_mut())
            } else {
                let [x, y] = &mut bufs;
                (y.view(), x.view_mut())
            };
            cx.adj.at_times(F::one() - a, src, F::zero(), dst, par);
            cur = 1 - cur;
        }
        // dH += G_0.
        Zip::from(&mut dh).and(&bufs[cur]).for_each(|o, &g| *o += g);
        Ok(())
    }
    fn attrs(&self) -> Option<Attrs> {
        Some(
            Attrs::new()
                .with("k", self.k)
                .with("alpha", self.alpha)
                .with("dim", self.dim),
        )
    }

    fn clone_box(&self) -> Box<dyn Layer<F>> {
        Box::new(*self)
    }
}

/// APPNP's settings (Klicpera et al., ICLR 2019): K propagation steps and the teleport
/// probability α; its [`Architecture`]: drop → Lin → ReLU·drop → Lin → K × (Z ← (1−α)ÂZ + αH).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AppnpConfig {
    /// K (the paper's 10).
    pub k: usize,
    /// α, the teleport probability (the paper's 0.1).
    pub alpha: f64,
}

impl AppnpConfig {
    /// The paper's K 10 and α 0.1.
    pub(crate) const PAPER: AppnpConfig = AppnpConfig { k: 10, alpha: 0.1 };
}

impl Default for AppnpConfig {
    fn default() -> Self {
        AppnpConfig::PAPER
    }
}

impl Architecture for AppnpConfig {
    const NAMES: &'static [(&'static str, Self)] = &[("appnp", AppnpConfig::PAPER)];
    const SUMMARY: &'static str =
        "APPNP: an MLP, then personalised-PageRank propagation (Klicpera et al., ICLR 2019)";

    fn settings(&self) -> Vec<(&'static str, f64)> {
        vec![("k", self.k as f64), ("alpha", self.alpha)]
    }

    fn set(&mut self, key: &str, value: f64) -> Result<bool, ConfigError> {
        match key {
            "k" => self.k = count_setting("k", value, 0, MAX_K)?,
            "alpha" => self.alpha = value,
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
        count_setting("k", self.k as f64, 0, MAX_K).map(|_| ())
    }

    fn uses(&self) -> Uses {
        Uses {
            min_layers: 0,
            layers: Some(
                "appnp's MLP has a fixed depth (two Linear layers); use --k for its propagation \
                 steps",
            ),
            gcn_convs: false,
            ..Uses::GCN
        }
    }

    fn register_layers<F: Scalar>(r: &mut Registry<F>) {
        r.add::<AppnpPropagate>("appnp_propagate");
    }

    fn n_hidden(&self, _n_layers: usize) -> usize {
        0
    }

    fn param_count(&self, cfg: &ModelConfig) -> u64 {
        let (_, lin, _) = cfg.param_parts();
        let [i, h, o] = [cfg.in_dim, cfg.hidden_dim, cfg.out_dim].map(|v| v as u64);
        lin(i, h).saturating_add(lin(h, o))
    }

    fn build<F: Scalar, R: Rng + ?Sized>(
        &self,
        cfg: &ModelConfig,
        b: &mut Builder<'_, F>,
        rng: &mut R,
    ) -> Built {
        let h = cfg.hidden_dim;
        let l1 = Linear::<F>::new(cfg.in_dim, h, true, rng);
        let l2 = Linear::<F>::new(h, cfg.out_dim, true, rng);
        let z1 = b.push(l1, vec![Src::Xd], 0, 0);
        let a = b.push(ReluDropout::new(h, cfg.dropout), vec![Src::Node(z1)], 0, 2);
        let z2 = b.push(l2, vec![Src::Node(a)], 2, 0);
        let prop = AppnpPropagate {
            k: self.k,
            alpha: self.alpha,
            dim: cfg.out_dim,
        };
        let z = b.push(prop, vec![Src::Node(z2)], 0, 0);
        Built {
            input_site: 1,
            taps: vec![a, z],
            no_input_dropout: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use ndarray::Array2;

    use super::*;
    use crate::testing::harness::{random, rng, small_adjs, Harness, In};

    #[test]
    fn forward_is_the_recursion_and_gradients_match_finite_differences() {
        // Z₀ = H, Z_{k+1} = (1−α)ÂZ_k + αH with Â dense.
        for (name, adj) in &small_adjs() {
            let n = adj.n_nodes();
            let a = adj.a().to_dense();
            let mut r = rng(2);
            let h = random(n, 3, &mut r);
            let g = random(n, 3, &mut r);
            for k in [0, 1, 2, 5] {
                for alpha in [0.1, 0.3] {
                    let mut want = h.clone();
                    for _ in 0..k {
                        want = a.dot(&want) * (1.0 - alpha) + &(&h * alpha);
                    }
                    let mut l = AppnpPropagate { k, alpha, dim: 3 };
                    let what = format!("{name}, K = {k}, α = {alpha}");
                    let hs = Harness::new(adj);
                    let (z, _) = hs.grad_check(&mut l, &[In::Dense(h.clone())], &[true], &g, &what);
                    let ok = (&z - &want).iter().all(|v| v.abs() < 1e-12);
                    assert!(ok, "{what}: {z} vs {want}");
                }
            }
        }
    }

    #[test]
    fn golden_isolated_nodes_are_fixed_points() {
        // Â = I: Z_k = (1−α)Z_{k−1} + αH = H for every k; dH = G.
        let adj = crate::testing::harness::isolated::<f64>(4);
        let h = random(4, 2, &mut rng(3));
        let g = random(4, 2, &mut rng(4));
        let mut l = AppnpPropagate {
            k: 3,
            alpha: 0.25,
            dim: 2,
        };
        let (z, dh) = Harness::new(&adj).run(&mut l, &[In::Dense(h.clone())], &g, &[true]);
        let close = |a: &Array2<f64>, b: &Array2<f64>| (a - b).iter().all(|v| v.abs() < 1e-15);
        assert!(close(&z, &h));
        assert!(close(dh[0].as_ref().unwrap(), &g));
    }
}
