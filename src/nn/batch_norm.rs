//! [`BatchNorm`] over nodes (Ioffe & Szegedy, ICML 2015, <https://arxiv.org/abs/1502.03167>), as
//! PyTorch's `BatchNorm1d` after each hidden layer of the OGB arxiv GCN; forward and backward in
//! one file. Rows are nodes, columns are features; statistics over all n rows (full batch).
//!
//! Per column k, with σ⁻¹_k = 1/√(v_k + ε):
//! - train: μ_k = (1/n) Σ_i x_ik, v_k = (1/n) Σ_i (x_ik − μ_k)² (biased), x̂ = (x − μ)·σ⁻¹,
//!   y = γ ⊙ x̂ + β;
//! - eval: the same with μ, v replaced by the running statistics;
//! - running update (train passes only, not when a checkpointed segment is recomputed):
//!   r_μ ← (1 − m)·r_μ + m·μ, r_v ← (1 − m)·r_v + m·v·n/(n − 1) (unbiased, as PyTorch).
//!
//! Backward, with G = dL/dY, s_g = Gᵀ1 and s_gx = (G ⊙ X̂)ᵀ1: dβ = s_g, dγ = s_gx, and
//! - train: dx_ik = γ_k σ⁻¹_k (g_ik − s_g,k / n − x̂_ik s_gx,k / n);
//! - eval: dx_ik = γ_k σ⁻¹_k g_ik.
//!
//! **Numerics.** Statistics are accumulated in f64 through
//! [`Sums::sum_rows`](crate::graph::Sums::sum_rows) (fixed row chunks, partial sums in
//! chunk order) and every element is computed in f64 and rounded once, so results are
//! bit-identical for any thread count. The derivation is in `docs/MATH.md`.
//!
//! # Shapes
//! X, Y, G, dX: n × d; γ, β: 1 × d; running mean and variance: d.

use ndarray::{Array1, Array2};

use super::attrs::{Attrs, FromAttrs};
use super::layer::{view, view_mut, Bwd, Cx, Fwd, InputDesc, Layer, Req, Spec};
use super::param::Param;
use crate::kernels::rows::{for_each_row, for_each_row2, parts_len};
use crate::{ConfigError, Error, Result, Scalar};

/// Batch normalisation over the nodes: y = γ ⊙ (x − μ)/√(v + ε) + β per column, with the batch
/// statistics in training passes and the running statistics in evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchNorm<F> {
    /// γ: 1 × d, initialised to 1.
    pub gamma: Param<F>,
    /// β: 1 × d, initialised to 0.
    pub beta: Param<F>,
    /// Running mean (length d), initialised to 0; used in eval mode.
    pub running_mean: Array1<F>,
    /// Running unbiased variance (length d), initialised to 1; used in eval mode.
    pub running_var: Array1<F>,
    /// Momentum m of the running statistics, r ← (1 − m)·r + m·batch (default 0.1, PyTorch's).
    pub momentum: f64,
    /// ε added to the variance (default 1e-5, PyTorch's).
    pub eps: f64,
}

impl<F: Scalar> BatchNorm<F> {
    /// A layer of width `dim`: γ = 1, β = 0, running mean 0, running variance 1,
    /// momentum 0.1, ε = 1e-5 (PyTorch's defaults).
    pub fn new(dim: usize) -> Self {
        BatchNorm {
            gamma: Param::new(Array2::ones((1, dim))),
            beta: Param::zeros(1, dim),
            running_mean: Array1::zeros(dim),
            running_var: Array1::ones(dim),
            momentum: 0.1,
            eps: 1e-5,
        }
    }

    /// The width d.
    pub fn dim(&self) -> usize {
        self.gamma.value.ncols()
    }

    /// f64 scratch: the partial sums of 2d values, then 6 vectors of d.
    fn scratch_f64(n: usize, d: usize) -> usize {
        parts_len(n, 2 * d) + 6 * d
    }
}

impl<F: Scalar> FromAttrs<F> for BatchNorm<F> {
    /// `dim`, `momentum` (in [0, 1]), `eps` (> 0); initial parameters and statistics.
    fn from_attrs(a: &Attrs) -> Result<Self, ConfigError> {
        let [d] = a.shape(["dim"])?;
        let momentum = a.finite("momentum")?;
        if !(0.0..=1.0).contains(&momentum) {
            return Err(a.invalid("momentum", "must lie in [0, 1]"));
        }
        let eps = a.finite("eps")?;
        if eps <= 0.0 {
            return Err(a.invalid("eps", "must be > 0"));
        }
        Ok(BatchNorm {
            momentum,
            eps,
            ..BatchNorm::new(d)
        })
    }
}

impl<F: Scalar> Layer<F> for BatchNorm<F> {
    fn name(&self) -> &'static str {
        "batch_norm"
    }

    fn hops(&self) -> Option<usize> {
        // (Row-wise: on its level's rows over a stack of blocks.)
        Some(0)
    }

    fn spec(&self, _inputs: &[InputDesc], n: usize) -> Spec {
        Spec {
            // X̂ and σ⁻¹.
            saved: Req {
                f: n * self.dim(),
                u8: 0,
                f64: self.dim(),
            },
            scratch: Req {
                f64: Self::scratch_f64(n, self.dim()),
                ..Req::default()
            },
            ..Spec::new(self.dim()).reading(self.dim())
        }
    }

    fn forward(&mut self, cx: &mut Cx<'_, F>, io: Fwd<'_, F>) -> Result<()> {
        let (ins, out, mut saved, mut scratch) = (io.ins, io.out, io.saved, io.scratch);
        let x = ins.get(0).dense();
        let (n, d) = x.dim();
        assert!(
            d == self.dim() && out.dim() == (n, d) && self.running_mean.len() == d,
            "BatchNorm::forward: input {n}×{d}, output {:?}, width {}",
            out.dim(),
            self.dim()
        );
        let par = cx.par;
        let x_hat = view_mut(saved.take_f(n * d), (n, d));
        let inv_std = saved.take_f64(d);
        let parts = scratch.take_f64(parts_len(n, 2 * d));
        let mean = scratch.take_f64(d);
        let var = scratch.take_f64(d);
        let gamma = scratch.take_f64(d);
        let beta = scratch.take_f64(d);
        // Statistics over every node (every process's rows).
        let n_all = cx.sums.n_nodes();
        if cx.train() {
            if n_all < 2 {
                return Err(Error::Mismatch {
                    what: "nodes of a training pass through BatchNorm (its batch statistics \
                           need at least 2)"
                        .into(),
                    expected: 2,
                    got: n_all,
                });
            }
            cx.sums.col_means(x, parts, mean, par);
            let m: &[f64] = mean;
            cx.sums.sum_rows(
                parts,
                var,
                &|i, acc| {
                    for ((a, &v), &mk) in acc.iter_mut().zip(x.row(i)).zip(m) {
                        let t = v.to_f64_lossless() - mk;
                        *a += t * t;
                    }
                },
                par,
            );
            var.iter_mut().for_each(|v| *v /= n_all as f64);
            for (s, v) in inv_std.iter_mut().zip(var.iter()) {
                *s = 1.0 / (v + self.eps).sqrt();
            }
            if !cx.recompute {
                let mo = self.momentum;
                let unbias = n_all as f64 / (n_all as f64 - 1.0);
                for k in 0..d {
                    let rm = self.running_mean[k].to_f64_lossless();
                    let rv = self.running_var[k].to_f64_lossless();
                    self.running_mean[k] = F::from_f64_lossy((1.0 - mo) * rm + mo * mean[k]);
                    self.running_var[k] = F::from_f64_lossy((1.0 - mo) * rv + mo * var[k] * unbias);
                }
            }
        } else {
            for k in 0..d {
                mean[k] = self.running_mean[k].to_f64_lossless();
                inv_std[k] = 1.0 / (self.running_var[k].to_f64_lossless() + self.eps).sqrt();
            }
        }
        for (g, v) in gamma.iter_mut().zip(&self.gamma.value) {
            *g = v.to_f64_lossless();
        }
        for (b, v) in beta.iter_mut().zip(&self.beta.value) {
            *b = v.to_f64_lossless();
        }
        let (mean, inv_std, gamma, beta): (&[f64], &[f64], &[f64], &[f64]) =
            (mean, inv_std, gamma, beta);
        for_each_row2(x_hat, out, par, |i, mut xh, mut yr| {
            let xr = x.row(i);
            for k in 0..d {
                let t = (xr[k].to_f64_lossless() - mean[k]) * inv_std[k];
                xh[k] = F::from_f64_lossy(t);
                yr[k] = F::from_f64_lossy(gamma[k] * t + beta[k]);
            }
        });
        Ok(())
    }

    fn backward(&mut self, cx: &mut Cx<'_, F>, io: Bwd<'_, F>) -> Result<()> {
        let (mut saved, mut scratch, grad) = (io.saved, io.scratch, io.grad);
        let (g, mut din) = grad.separate();
        let (n, d) = g.dim();
        let par = cx.par;
        let x_hat = view(saved.take_f(n * d), (n, d));
        let inv_std = saved.take_f64(d);
        let parts = scratch.take_f64(parts_len(n, 2 * d));
        let sums = scratch.take_f64(2 * d);
        let gs = scratch.take_f64(d);
        cx.sums.sum_rows(
            parts,
            sums,
            &|i, acc| {
                let (sg, sgx) = acc.split_at_mut(d);
                let (gr, xr) = (g.row(i), x_hat.row(i));
                for k in 0..d {
                    let gv = gr[k].to_f64_lossless();
                    sg[k] += gv;
                    sgx[k] += gv * xr[k].to_f64_lossless();
                }
            },
            par,
        );
        let (sg, sgx) = sums.split_at(d);
        for k in 0..d {
            self.beta.grad[[0, k]] += F::from_f64_lossy(sg[k]);
            self.gamma.grad[[0, k]] += F::from_f64_lossy(sgx[k]);
        }
        for ((o, g), s) in gs.iter_mut().zip(&self.gamma.value).zip(inv_std) {
            *o = g.to_f64_lossless() * s;
        }
        let Some(dx) = din.get(0) else {
            return Ok(());
        };
        let gs: &[f64] = gs;
        let train = cx.train();
        let nf = cx.sums.n_nodes() as f64;
        for_each_row(dx, par, |i, mut row| {
            let gr = g.row(i);
            if train {
                let xr = x_hat.row(i);
                for k in 0..d {
                    let t = gr[k].to_f64_lossless()
                        - sg[k] / nf
                        - xr[k].to_f64_lossless() * sgx[k] / nf;
                    row[k] = F::from_f64_lossy(gs[k] * t);
                }
            } else {
                for k in 0..d {
                    row[k] = F::from_f64_lossy(gs[k] * gr[k].to_f64_lossless());
                }
            }
        });
        Ok(())
    }

    fn visit_params(&mut self, f: &mut dyn FnMut(&'static str, &mut Param<F>)) {
        f("gamma", &mut self.gamma);
        f("beta", &mut self.beta);
    }

    fn visit_stats(&mut self, f: &mut dyn FnMut(&'static str, &mut Array1<F>)) {
        f("running_mean", &mut self.running_mean);
        f("running_var", &mut self.running_var);
    }

    fn attrs(&self) -> Option<Attrs> {
        Some(
            Attrs::new()
                .with("dim", self.dim())
                .with("momentum", self.momentum)
                .with("eps", self.eps),
        )
    }

    fn clone_box(&self) -> Box<dyn Layer<F>> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use ndarray::{array, Array1, Array2, Axis};
    use rand::RngExt;

    use super::*;
    use crate::nn::Mode;
    use crate::testing::harness::{bits, citation, isolated, params, random, rng};
    use crate::testing::harness::{same_for_any_thread_count, small_adjs, Harness, In};

    const D: usize = 4;

    /// Random γ (away from 0), β and running statistics (r_v ∈ [0.3, 2]).
    fn layer(d: usize, seed: u64) -> BatchNorm<f64> {
        let mut r = rng(seed);
        let mut bn = BatchNorm::new(d);
        bn.gamma.value = random(1, d, &mut r) * 0.5 + 1.0;
        bn.beta.value = random(1, d, &mut r);
        bn.running_mean = Array1::from_shape_simple_fn(d, || r.random_range(-0.5..0.5));
        bn.running_var = Array1::from_shape_simple_fn(d, || r.random_range(0.3..2.0));
        bn
    }

    #[test]
    fn gradients_match_finite_differences_in_train_and_eval_mode() {
        // Train: through the batch statistics; eval: the running ones (no statistics terms).
        let [(_, adj), _] = &small_adjs();
        let n = adj.n_nodes();
        for mode in [Mode::Train, Mode::Eval] {
            let mut r = rng(11);
            let x = random(n, D, &mut r) * 2.0 + 0.5;
            let g = random(n, D, &mut r);
            let mut bn = layer(D, 12);
            let h = Harness::new(adj).mode(mode);
            let what = format!("BatchNorm {mode:?}");
            h.grad_check(&mut bn, &[In::Dense(x)], &[true], &g, &what);
        }
    }

    #[test]
    fn eval_backward_is_gamma_over_sigma_times_g() {
        let [(_, adj), _] = &small_adjs();
        let n = adj.n_nodes();
        let mut r = rng(3);
        let (x, g) = (random(n, D, &mut r), random(n, D, &mut r));
        let mut bn = layer(D, 4);
        let h = Harness::new(adj).mode(Mode::Eval);
        let (_, din) = h.run(&mut bn, &[In::Dense(x)], &g, &[true]);
        let s = bn.running_var.mapv(|v| 1.0 / (v + bn.eps).sqrt());
        let want = &g * &(&bn.gamma.value.row(0) * &s);
        let got = din[0].as_ref().unwrap();
        assert!((got - &want).iter().all(|v| v.abs() < 1e-14));
    }

    #[test]
    fn running_statistics_follow_pytorch_and_skip_recomputations() {
        // Columns (1, 3, 5) and (2, 6, 10): means 3 and 6, biased variances 8/3 and 32/3,
        // unbiased 4 and 16. r_μ ← 0.9·r_μ + 0.1·μ, r_v ← 0.9·r_v + 0.1·v_unbiased.
        let adj = isolated::<f64>(3);
        let x = [In::Dense(array![[1.0, 2.0], [3.0, 6.0], [5.0, 10.0]])];
        let mut bn = BatchNorm::<f64>::new(2);
        let h = Harness::new(&adj);
        let (y, _) = h.forward(&mut bn, &x);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-14;
        // Golden output: (x − μ)/√(v + ε) (γ = 1, β = 0).
        let s = [
            1.0 / (8.0f64 / 3.0 + 1e-5).sqrt(),
            1.0 / (32.0f64 / 3.0 + 1e-5).sqrt(),
        ];
        for (i, row) in y.rows().into_iter().enumerate() {
            let t = i as f64 * 2.0 - 2.0;
            assert!(
                close(row[0], t * s[0]) && close(row[1], 2.0 * t * s[1]),
                "{y}"
            );
        }
        assert!(close(bn.running_mean[0], 0.3) && close(bn.running_mean[1], 0.6));
        assert!(close(bn.running_var[0], 1.3) && close(bn.running_var[1], 2.5));
        // A second pass: 0.9·0.3 + 0.1·3 = 0.57; 0.9·1.3 + 0.1·4 = 1.57.
        h.forward(&mut bn, &x);
        assert!(close(bn.running_mean[0], 0.57) && close(bn.running_var[0], 1.57));
        // A recomputation (checkpointing) and an evaluation pass change nothing, and the
        // recomputation gives the training pass's output bit for bit.
        let before = bn.clone();
        let rec = Harness {
            recompute: true,
            ..Harness::new(&adj)
        };
        assert_eq!(rec.forward(&mut bn, &x).0, y);
        assert_eq!(bn, before);
        h.clone().mode(Mode::Eval).forward(&mut bn, &x);
        assert_eq!(bn, before);
        // …and a training pass changes them again.
        h.forward(&mut bn, &x);
        assert_ne!(bn.running_mean, before.running_mean);
    }

    #[test]
    fn train_output_has_mean_beta_and_variance_gamma_squared() {
        let adj = isolated::<f64>(50);
        let mut r = rng(5);
        let x = random(50, D, &mut r) * 3.0 + 7.0;
        let mut bn = layer(D, 6);
        let (y, _) = Harness::new(&adj).forward(&mut bn, &[In::Dense(x.clone())]);
        let mean = y.mean_axis(Axis(0)).unwrap();
        let var = y.var_axis(Axis(0), 0.0);
        let xv = x.var_axis(Axis(0), 0.0);
        for k in 0..D {
            let (g, b) = (bn.gamma.value[[0, k]], bn.beta.value[[0, k]]);
            assert!(
                (mean[k] - b).abs() < 1e-12,
                "col {k}: mean {} vs β {b}",
                mean[k]
            );
            let want = g * g * xv[k] / (xv[k] + bn.eps);
            assert!((var[k] - want).abs() < 1e-12 * want.max(1.0), "col {k}");
        }
        // Eval with the running statistics set to the batch ones (biased variance) reproduces
        // the training output.
        bn.running_mean = x.mean_axis(Axis(0)).unwrap();
        bn.running_var = xv;
        let (ye, _) = Harness::new(&adj)
            .mode(Mode::Eval)
            .forward(&mut bn, &[In::Dense(x)]);
        assert!((&ye - &y).iter().all(|d| d.abs() < 1e-12));
    }

    #[test]
    fn a_constant_column_is_finite() {
        let [(_, adj), _] = &small_adjs();
        let n = adj.n_nodes();
        let mut r = rng(8);
        let mut x = random(n, D, &mut r);
        x.column_mut(1).fill(3.25);
        let g = random(n, D, &mut r);
        let mut bn = BatchNorm::<f64>::new(D);
        bn.beta.value[[0, 1]] = 0.5;
        let (y, din) = Harness::new(adj).run(&mut bn, &[In::Dense(x)], &g, &[true]);
        assert!(
            y.column(1).iter().all(|&v| v == 0.5),
            "a constant column gives β"
        );
        assert!(din[0].as_ref().unwrap().iter().all(|v| v.is_finite()));
        assert!(bn.gamma.grad.iter().all(|v| v.is_finite()));
    }

    #[test]
    fn f32_agrees_with_f64() {
        let adj64 = isolated::<f64>(30);
        let adj32 = isolated::<f32>(30);
        let mut r = rng(13);
        let x = random(30, 5, &mut r) * 2.0 + 1.0;
        let g = random(30, 5, &mut r);
        let bn64 = layer(5, 14);
        let bn32 = BatchNorm::<f32> {
            gamma: Param::new(bn64.gamma.value.mapv(|v| v as f32)),
            beta: Param::new(bn64.beta.value.mapv(|v| v as f32)),
            running_mean: bn64.running_mean.mapv(|v| v as f32),
            running_var: bn64.running_var.mapv(|v| v as f32),
            momentum: 0.1,
            eps: 1e-5,
        };
        let close = |a: &Array2<f32>, b: &Array2<f64>| {
            a.iter()
                .zip(b)
                .all(|(&p, &q)| (p as f64 - q).abs() <= 1e-5 * q.abs().max(1.0))
        };
        for mode in [Mode::Train, Mode::Eval] {
            let (mut l64, mut l32) = (bn64.clone(), bn32.clone());
            let x32 = [In::Dense(x.mapv(|v| v as f32))];
            let (y32, d32) =
                Harness::new(&adj32)
                    .mode(mode)
                    .run(&mut l32, &x32, &g.mapv(|v| v as f32), &[true]);
            let (y64, d64) =
                Harness::new(&adj64)
                    .mode(mode)
                    .run(&mut l64, &[In::Dense(x.clone())], &g, &[true]);
            assert!(close(&y32, &y64), "{mode:?}: output");
            assert!(
                close(d32[0].as_ref().unwrap(), d64[0].as_ref().unwrap()),
                "{mode:?}: dX"
            );
            for ((_, a), (_, b)) in params(&mut l32, true).iter().zip(&params(&mut l64, true)) {
                assert!(close(a, b), "{mode:?}: parameter gradients");
            }
        }
    }

    #[test]
    fn bitwise_identical_for_any_thread_count() {
        // d = 64: 256-row chunks, so the sums over the 300 nodes have two partial sums.
        let (adj, _) = citation();
        let n = adj.n_nodes();
        let mut r = rng(17);
        let x = random(n, 64, &mut r).mapv(|v| v as f32);
        let g = random(n, 64, &mut r).mapv(|v| v as f32);
        let base = BatchNorm::<f32>::new(64);
        for mode in [Mode::Train, Mode::Eval] {
            same_for_any_thread_count(
                |par| {
                    let mut bn = base.clone();
                    let h = Harness {
                        par,
                        ..Harness::new(&adj).mode(mode)
                    };
                    let (y, din) = h.run(&mut bn, &[In::Dense(x.clone())], &g, &[true]);
                    let mut out = vec![bits(&y), bits(din[0].as_ref().unwrap())];
                    out.extend(params(&mut bn, true).iter().map(|(_, p)| bits(p)));
                    out.push(bits(&bn.running_mean.clone().insert_axis(Axis(0))));
                    out.push(bits(&bn.running_var.clone().insert_axis(Axis(0))));
                    out
                },
                &format!("BatchNorm {mode:?}"),
            );
        }
    }
}
