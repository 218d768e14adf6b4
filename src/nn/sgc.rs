//! [`SgcPropagate`]: Y = Â^K·X, the feature propagation of SGC (Wu et al., ICML 2019, "Simplifying
//! Graph Convolutional Networks", <https://arxiv.org/abs/1902.07153>), forward and backward in one
//! file.
//!
//! SGC is logits = Â^K X W + b: this layer followed by a [`Linear`]. The layer has
//! no parameters and draws no mask, so on the model's fixed input ([`Spec::constant`](super::layer::Spec::constant)) the stack
//! computes Â^K X once and keeps it: training then costs one dense product per epoch.
//!
//! Backward (for completeness: the stack never asks for it when the input is the features):
//! dX = (Âᵀ)^K · dY.
//!
//! # Shapes
//! X, Y: n × d (X dense or sparse; Y dense).

use rand::Rng;

use super::arch::{Architecture, Builder, Built, ModelConfig, Uses, MAX_K};
use super::attrs::{Attrs, FromAttrs, Registry};
use super::layer::{view, view_mut, Bwd, Cx, Fwd, InputDesc, Layer, Req, Spec, Value};
use super::linear::Linear;
use super::stack::Src;
use crate::graph::Caps;
use crate::{ConfigError, Result, Scalar};

/// Y = Â^K·X (K ≥ 1) on inputs of width `dim`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SgcPropagate {
    /// Propagation steps K (SGC: 2).
    pub k: usize,
    /// Width d.
    pub dim: usize,
}

impl<F: Scalar> FromAttrs<F> for SgcPropagate {
    /// `k` (at most [`MAX_K`]), `dim`.
    fn from_attrs(a: &Attrs) -> Result<Self, ConfigError> {
        Ok(SgcPropagate {
            k: a.count("k", 0, MAX_K)?,
            dim: a.count("dim", 1, usize::MAX)?,
        })
    }
}

impl<F: Scalar> Layer<F> for SgcPropagate {
    fn name(&self) -> &'static str {
        "sgc_propagate"
    }
    fn hops(&self) -> Option<usize> {
        // (K = 1 runs over one block: Â·X and Âᵀ·G over its rows and sources. K = 0 still
        // multiplies once.)
        Some(self.k.max(1))
    }
    fn spec(&self, inputs: &[InputDesc], n: usize) -> Spec {
        Spec {
            scratch: Req::f(n * self.dim),
            constant: true,
            needs: Caps {
                sparse_product: inputs.first().is_some_and(|i| i.sparse),
                ..Caps::default()
            },
            ..Spec::new(self.dim).reading(self.dim)
        }
    }

    fn forward(&mut self, cx: &mut Cx<'_, F>, io: Fwd<'_, F>) -> Result<()> {
        let (ins, mut out, mut scratch) = (io.ins, io.out, io.scratch);
        let (n, d, par) = (cx.n(), self.dim, cx.par);
        let tmp = scratch.take_f(n * d);
        // Steps alternate between `out` and the scratch, so that the last one writes `out`.
        let mut in_out = self.k % 2 == 1;
        match ins.get(0) {
            Value::Dense(x) => {
                let first = if in_out {
                    out.view_mut()
                } else {
                    view_mut(tmp, (n, d))
                };
                cx.adj.a_times(F::one(), x, F::zero(), first, par);
            }
            Value::Sparse(x, _) => {
                // Â·X once as a sparse product, then dense.
                let mut s = cx.adj.a_times_sparse_pattern(x)?;
                let mut acc = vec![F::zero(); d];
                cx.adj.a_times_sparse(x, &mut s, &mut acc)?;
                let mut first = if in_out {
                    out.view_mut()
                } else {
                    view_mut(tmp, (n, d))
                };
                first.fill(F::zero());
                for (i, row) in s.x().outer_iterator().enumerate() {
                    for (j, &v) in row.iter() {
                        first[[i, j]] = v;
                    }
                }
            }
        }
        for _ in 1..self.k {
            if in_out {
                cx.adj
                    .a_times(F::one(), out.view(), F::zero(), view_mut(tmp, (n, d)), par);
            } else {
                cx.adj
                    .a_times(F::one(), view(tmp, (n, d)), F::zero(), out.view_mut(), par);
            }
            in_out = !in_out;
        }
        Ok(())
    }
    fn backward(&mut self, cx: &mut Cx<'_, F>, io: Bwd<'_, F>) -> Result<()> {
        let (mut scratch, grad) = (io.scratch, io.grad);
        let (dout, mut din) = grad.separate();
        let Some(mut dx) = din.get(0) else {
            return Ok(());
        };
        let (n, d, par) = (cx.n(), self.dim, cx.par);
        let tmp = scratch.take_f(n * d);
        let mut in_dx = self.k % 2 == 1;
        let first = if in_dx {
            dx.view_mut()
        } else {
            view_mut(tmp, (n, d))
        };
        cx.adj.at_times(F::one(), dout, F::zero(), first, par);
        for _ in 1..self.k {
            if in_dx {
                cx.adj
                    .at_times(F::one(), dx.view(), F::zero(), view_mut(tmp, (n, d)), par);
            } else {
                cx.adj
                    .at_times(F::one(), view(tmp, (n, d)), F::zero(), dx.view_mut(), par);
            }
            in_dx = !in_dx;
        }
        Ok(())
    }
    fn attrs(&self) -> Option<Attrs> {
        Some(Attrs::new().with("k", self.k).with("dim", self.dim))
    }

    fn clone_box(&self) -> Box<dyn Layer<F>> {
        Box::new(*self)
    }
}

/// SGC's settings (Wu et al., ICML 2019): K, the propagation steps; its [`Architecture`]:
/// Â^K·X (computed once) → Linear.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SgcConfig {
    /// K (the paper's 2).
    pub k: usize,
}

impl Default for SgcConfig {
    fn default() -> Self {
        SgcConfig { k: 2 }
    }
}

impl Architecture for SgcConfig {
    const NAMES: &'static [(&'static str, Self)] = &[("sgc", SgcConfig { k: 2 })];
    const SUMMARY: &'static str = "SGC: Â^K·X·W (Wu et al., ICML 2019)";

    fn settings(&self) -> Vec<(&'static str, f64)> {
        vec![("k", self.k as f64)]
    }

    fn set(&mut self, key: &str, value: f64) -> Result<bool, ConfigError> {
        match key {
            "k" => self.k = count_setting("k", value, 1, MAX_K)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn check(&self) -> Result<(), ConfigError> {
        if self.k == 0 {
            return Err(ConfigError::ZeroCount("k"));
        }
        count_setting("k", self.k as f64, 1, MAX_K).map(|_| ())
    }

    fn uses(&self) -> Uses {
        Uses {
            min_layers: 0,
            layers: Some(
                "sgc has no graph convolutions to count (one Linear layer on Â^K·X); use --k for \
                 its propagation steps",
            ),
            hidden: Some("sgc has no hidden layer (one Linear layer on Â^K·X)"),
            dropout: Some("sgc has no dropout (its Linear layer reads Â^K·X, computed once)"),
            gcn_convs: false,
        }
    }

    fn register_layers<F: Scalar>(r: &mut Registry<F>) {
        r.add::<SgcPropagate>("sgc_propagate");
    }

    fn n_hidden(&self, _n_layers: usize) -> usize {
        0
    }

    fn param_count(&self, cfg: &ModelConfig) -> u64 {
        let (_, lin, _) = cfg.param_parts();
        lin(cfg.in_dim as u64, cfg.out_dim as u64)
    }

    fn build<F: Scalar, R: Rng + ?Sized>(
        &self,
        cfg: &ModelConfig,
        b: &mut Builder<'_, F>,
        rng: &mut R,
    ) -> Built {
        let lin = Linear::<F>::new(cfg.in_dim, cfg.out_dim, true, rng);
        let prop = SgcPropagate {
            k: self.k,
            dim: cfg.in_dim,
        };
        let s = b.push(prop, vec![Src::X], 0, 0);
        let z = b.push(lin, vec![Src::Node(s)], 0, 0);
        // SGC reads the raw features only: no input dropout to draw.
        Built {
            input_site: 1,
            taps: vec![s, z],
            no_input_dropout: true,
        }
    }
}

/// `value` as a count of at most `max` (an integer ≥ `min`), or the error naming `key`.
pub(crate) fn count_setting(
    key: &'static str,
    value: f64,
    min: usize,
    max: usize,
) -> Result<usize, ConfigError> {
    if value.fract() == 0.0 && value >= min as f64 && value <= max as f64 {
        Ok(value as usize)
    } else {
        Err(ConfigError::OutOfRange {
            name: key,
            value,
            rule: if min == 0 {
                "a whole number in [0, 1024] (MAX_K)"
            } else {
                "a whole number in [1, 1024] (MAX_K)"
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use ndarray::Array2;

    use super::*;
    use crate::testing::harness::{random, rng, small_adjs, Harness, In};

    fn close(a: &Array2<f64>, b: &Array2<f64>) -> bool {
        a.dim() == b.dim() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12)
    }

    #[test]
    fn forward_and_backward_are_dense_matrix_powers() {
        // Y = Â^K X and dX = (Âᵀ)^K G, with Â dense; a sparse X gives the same Y.
        for (name, adj) in &small_adjs() {
            let n = adj.n_nodes();
            let a = adj.a().to_dense();
            let mut r = rng(1);
            let mut x = random(n, 3, &mut r);
            x.mapv_inplace(|v| if v.abs() < 0.4 { 0.0 } else { v });
            let g = random(n, 3, &mut r);
            for k in 1..=3 {
                let mut l = SgcPropagate { k, dim: 3 };
                let (mut want_y, mut want_dx) = (x.clone(), g.clone());
                for _ in 0..k {
                    want_y = a.dot(&want_y);
                    want_dx = a.t().dot(&want_dx);
                }
                let h = Harness::new(adj);
                let what = format!("{name}, K = {k}");
                let (y, dx) = h.grad_check(&mut l, &[In::Dense(x.clone())], &[true], &g, &what);
                assert!(close(&y, &want_y), "{what}: {y} vs {want_y}");
                assert!(close(dx[0].as_ref().unwrap(), &want_dx), "{what}: dX");
                let (ys, _) = h.forward(&mut l, &[In::sparse(&x)]);
                assert!(close(&ys, &want_y), "{what}: sparse X");
            }
        }
    }
}
