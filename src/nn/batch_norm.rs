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
//! [`Propagate::sum_rows`](crate::graph::Propagate::sum_rows) (fixed row chunks, partial sums in
//! chunk order) and every element is computed in f64 and rounded once, so results are
//! bit-identical for any thread count. The derivation is in `docs/MATH.md`.
//!
//! # Shapes
//! X, Y, G, dX: n × d; γ, β: 1 × d; running mean and variance: d.

use ndarray::{Array1, Array2};

use super::layer::{view, view_mut, Bwd, Cx, Fwd, GradIo, Layer, Req};
use super::param::Param;
use crate::kernels::rows::{for_each_row, for_each_row2, parts_len};
use crate::Scalar;

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
        parts_len(n, d, 2 * d) + 6 * d
    }
}

impl<F: Scalar> Layer<F> for BatchNorm<F> {
    fn name(&self) -> &'static str {
        "batch_norm"
    }

    fn out_dim(&self) -> usize {
        self.dim()
    }

    fn saved(&self, n: usize) -> Req {
        // X̂ and σ⁻¹.
        Req {
            f: n * self.dim(),
            u8: 0,
            f64: self.dim(),
        }
    }

    fn scratch(&self, n: usize) -> Req {
        Req {
            f64: Self::scratch_f64(n, self.dim()),
            ..Req::default()
        }
    }

    fn forward(&mut self, cx: &mut Cx<'_, F>, io: Fwd<'_, F>) {
        let Fwd {
            ins,
            out,
            mut saved,
            mut scratch,
        } = io;
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
        let parts = scratch.take_f64(parts_len(n, d, 2 * d));
        let mean = scratch.take_f64(d);
        let var = scratch.take_f64(d);
        let gamma = scratch.take_f64(d);
        let beta = scratch.take_f64(d);
        if cx.train() {
            assert!(
                n >= 2,
                "BatchNorm::forward: train mode needs at least 2 rows, input {n}×{d}"
            );
            cx.adj.sum_rows(
                d,
                parts,
                mean,
                &|i, acc| {
                    for (a, &v) in acc.iter_mut().zip(x.row(i)) {
                        *a += v.to_f64_lossless();
                    }
                },
                par,
            );
            let nf = n.max(1) as f64;
            mean.iter_mut().for_each(|v| *v /= nf);
            let m: &[f64] = mean;
            cx.adj.sum_rows(
                d,
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
            var.iter_mut().for_each(|v| *v /= n as f64);
            for (s, v) in inv_std.iter_mut().zip(var.iter()) {
                *s = 1.0 / (v + self.eps).sqrt();
            }
            if !cx.recompute {
                let mo = self.momentum;
                let unbias = n as f64 / (n as f64 - 1.0);
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
    }

    fn backward(&mut self, cx: &mut Cx<'_, F>, io: Bwd<'_, F>) {
        let Bwd {
            mut saved,
            mut scratch,
            grad,
            ..
        } = io;
        let GradIo::Separate { dout: g, mut din } = grad else {
            unreachable!("BatchNorm's gradient is separate")
        };
        let (n, d) = g.dim();
        let par = cx.par;
        let x_hat = view(saved.take_f(n * d), (n, d));
        let inv_std = saved.take_f64(d);
        let parts = scratch.take_f64(parts_len(n, d, 2 * d));
        let sums = scratch.take_f64(2 * d);
        let gs = scratch.take_f64(d);
        cx.adj.sum_rows(
            d,
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
            return;
        };
        let gs: &[f64] = gs;
        let train = cx.train();
        let nf = n as f64;
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
    }

    fn visit_params(&mut self, f: &mut dyn FnMut(&'static str, &mut Param<F>)) {
        f("gamma", &mut self.gamma);
        f("beta", &mut self.beta);
    }

    fn visit_stats(&mut self, f: &mut dyn FnMut(&'static str, &mut Array1<F>)) {
        f("running_mean", &mut self.running_mean);
        f("running_var", &mut self.running_var);
    }

    fn clone_box(&self) -> Box<dyn Layer<F>> {
        Box::new(self.clone())
    }
}
