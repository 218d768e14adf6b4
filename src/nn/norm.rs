//! Normalisation layers over nodes: [`BatchNorm`] and [`PairNorm`], forward and backward in one
//! file. Rows are nodes, columns are features; both layers use statistics over all n rows
//! (full batch).
//!
//! **BatchNorm** (Ioffe & Szegedy, ICML 2015, <https://arxiv.org/abs/1502.03167>), as PyTorch's
//! `BatchNorm1d` after each hidden layer of the OGB arxiv GCN. Per column k, with σ⁻¹_k =
//! 1/√(v_k + ε):
//!
//! - train: μ_k = (1/n) Σ_i x_ik, v_k = (1/n) Σ_i (x_ik − μ_k)² (biased), x̂ = (x − μ)·σ⁻¹,
//!   y = γ ⊙ x̂ + β;
//! - eval: the same with μ, v replaced by the running statistics;
//! - running update (train only, [`BatchNorm::update_running`]): r_μ ← (1 − m)·r_μ + m·μ,
//!   r_v ← (1 − m)·r_v + m·v·n/(n − 1) (unbiased, as PyTorch).
//!
//! Backward, with G = dL/dY, s_g = Gᵀ1 and s_gx = (G ⊙ X̂)ᵀ1: dβ = s_g, dγ = s_gx, and
//!
//! - train: dx_ik = γ_k σ⁻¹_k (g_ik − s_g,k / n − x̂_ik s_gx,k / n);
//! - eval: dx_ik = γ_k σ⁻¹_k g_ik.
//!
//! **PairNorm** (Zhao & Akoglu, ICLR 2020, <https://arxiv.org/abs/1909.12223>), no parameters,
//! scale s, μ = (1/n) Σ_i x_i, c_i = x_i − μ, ε = [`PAIR_NORM_EPS`]:
//!
//! - PN: y_i = s·c_i / √(ε + (1/n) Σ_j ‖c_j‖²);
//! - PN-SI: y_i = s·c_i / √(ε + ‖c_i‖²);
//! - PN-SCS: y_i = s·x_i / √(ε + ‖x_i‖²) − μ (μ is the mean of the *input*, as in the paper's
//!   reference code).
//!
//! The backward formulas are on [`PairNorm::backward`]; the derivations of both layers are in
//! `docs/MATH.md`.
//!
//! **Numerics.** Column and row statistics are accumulated in f64, and every element is
//! computed in f64 and rounded once. Work is split into row chunks whose size depends only on
//! the width d, and partial sums are combined in chunk order, so results are bit-identical for
//! any rayon thread count.
//!
//! # Shapes
//! | | shape |
//! |---|---|
//! | X, Y, G, dX | n × d |
//! | γ, β (and their gradients) | 1 × d |
//! | running mean / variance | d |

use std::ops::Range;

use ndarray::{Array1, Array2, ArrayView1, ArrayView2, ArrayViewMut1, ArrayViewMut2, Axis};
use rayon::prelude::*;

use super::param::Param;
use super::Mode;
use crate::Scalar;

// ---------------------------------------------------------------------------------------------
// Deterministic chunked loops.

/// Elements per task of the chunked loops (rows per chunk = this / d).
const CHUNK_ELEMS: usize = 1 << 14;

/// Rows per chunk: depends on the width only, never on the thread count.
fn chunk_rows(d: usize) -> usize {
    (CHUNK_ELEMS / d.max(1)).max(1)
}

/// Σ over rows i of the contributions that `f(i, acc)` adds into `acc` (length `len`), in f64.
/// Rows are folded in order inside a chunk and the chunks' partial sums are added in order.
fn sum_rows(n: usize, d: usize, len: usize, f: impl Fn(usize, &mut [f64]) + Sync) -> Vec<f64> {
    let mut total = Vec::new();
    sum_rows_into(n, d, len, &mut Vec::new(), &mut total, f);
    total
}

/// [`sum_rows`] into `total` (resized to `len`), with the chunks' partial sums in `parts`:
/// allocates nothing once both have the capacity.
fn sum_rows_into(
    n: usize,
    d: usize,
    len: usize,
    parts: &mut Vec<f64>,
    total: &mut Vec<f64>,
    f: impl Fn(usize, &mut [f64]) + Sync,
) {
    total.clear();
    total.resize(len, 0.0);
    if len == 0 {
        return;
    }
    let step = chunk_rows(d);
    parts.clear();
    parts.resize(n.div_ceil(step) * len, 0.0);
    parts.par_chunks_mut(len).enumerate().for_each(|(c, acc)| {
        let rows: Range<usize> = c * step..((c + 1) * step).min(n);
        for i in rows {
            f(i, acc);
        }
    });
    for p in parts.chunks_exact(len) {
        for (t, &v) in total.iter_mut().zip(p) {
            *t += v;
        }
    }
}

/// Calls `f(i, out_i)` for every row i of `out`, in parallel over row chunks (without
/// allocating when `out` is in standard layout).
fn for_each_row<F: Scalar>(
    mut out: ArrayViewMut2<'_, F>,
    f: impl Fn(usize, ArrayViewMut1<'_, F>) + Sync,
) {
    let d = out.ncols();
    let step = chunk_rows(d);
    if let (Some(sl), true) = (out.as_slice_mut(), d > 0) {
        sl.par_chunks_mut(step * d)
            .enumerate()
            .for_each(|(c, chunk)| {
                for (r, row) in chunk.chunks_exact_mut(d).enumerate() {
                    f(c * step + r, ArrayViewMut1::from(row));
                }
            });
        return;
    }
    let chunks: Vec<_> = out
        .axis_chunks_iter_mut(Axis(0), step)
        .enumerate()
        .collect();
    chunks.into_par_iter().for_each(|(c, mut chunk)| {
        for (r, row) in chunk.rows_mut().into_iter().enumerate() {
            f(c * step + r, row);
        }
    });
}

/// Calls `f(i, a_i, b_i)` for every row i of two arrays of the same shape, in parallel
/// (without allocating when both are in standard layout).
fn for_each_row2<F: Scalar>(
    mut a: ArrayViewMut2<'_, F>,
    mut b: ArrayViewMut2<'_, F>,
    f: impl Fn(usize, ArrayViewMut1<'_, F>, ArrayViewMut1<'_, F>) + Sync,
) {
    debug_assert_eq!(a.dim(), b.dim());
    let d = a.ncols();
    let step = chunk_rows(d);
    if let (Some(sa), Some(sb), true) = (a.as_slice_mut(), b.as_slice_mut(), d > 0) {
        sa.par_chunks_mut(step * d)
            .zip(sb.par_chunks_mut(step * d))
            .enumerate()
            .for_each(|(c, (ca, cb))| {
                for (r, (ra, rb)) in ca
                    .chunks_exact_mut(d)
                    .zip(cb.chunks_exact_mut(d))
                    .enumerate()
                {
                    f(
                        c * step + r,
                        ArrayViewMut1::from(ra),
                        ArrayViewMut1::from(rb),
                    );
                }
            });
        return;
    }
    let chunks: Vec<_> = a
        .axis_chunks_iter_mut(Axis(0), step)
        .zip(b.axis_chunks_iter_mut(Axis(0), step))
        .enumerate()
        .collect();
    chunks.into_par_iter().for_each(|(c, (mut ca, mut cb))| {
        for (r, (ra, rb)) in ca.rows_mut().into_iter().zip(cb.rows_mut()).enumerate() {
            f(c * step + r, ra, rb);
        }
    });
}

/// `f(i)` for every row i, written in order into `out` (resized to n; each entry computed
/// independently). Allocates nothing once `out` has the capacity.
fn map_rows_into(n: usize, d: usize, out: &mut Vec<f64>, f: impl Fn(usize) -> f64 + Sync + Send) {
    out.clear();
    out.resize(n, 0.0);
    out.par_iter_mut()
        .with_min_len(chunk_rows(d))
        .enumerate()
        .for_each(|(i, o)| *o = f(i));
}

/// Column means in f64 (zeros for an empty input).
fn col_means<F: Scalar>(x: ArrayView2<'_, F>) -> Vec<f64> {
    let mut out = Vec::new();
    col_means_into(x, &mut Vec::new(), &mut out);
    out
}

/// [`col_means`] into `out`, with `parts` as [`sum_rows_into`]'s.
fn col_means_into<F: Scalar>(x: ArrayView2<'_, F>, parts: &mut Vec<f64>, out: &mut Vec<f64>) {
    let (n, d) = x.dim();
    sum_rows_into(n, d, d, parts, out, |i, acc| {
        for (a, &v) in acc.iter_mut().zip(x.row(i)) {
            *a += v.to_f64_lossless();
        }
    });
    let nf = n.max(1) as f64;
    out.iter_mut().for_each(|v| *v /= nf);
}

/// Reusable f64 buffers of the normalisation layers' `_into` passes (statistics and their
/// partial sums), so that a pass allocates nothing once they have grown.
#[derive(Debug, Default, Clone)]
pub(crate) struct NormScratch {
    parts: Vec<f64>,
    a: Vec<f64>,
    b: Vec<f64>,
    c: Vec<f64>,
}

/// `out` ← `v` as f64, reusing its storage.
fn to_f64_into<'a, F: Scalar>(v: impl IntoIterator<Item = &'a F>, out: &mut Vec<f64>) {
    out.clear();
    out.extend(v.into_iter().map(|x| x.to_f64_lossless()));
}

fn to_f64_vec<'a, F: Scalar>(v: impl IntoIterator<Item = &'a F>) -> Vec<f64> {
    v.into_iter().map(|x| x.to_f64_lossless()).collect()
}

// ---------------------------------------------------------------------------------------------
// BatchNorm.

/// Batch normalisation over the nodes (PyTorch's `BatchNorm1d` on an n × d input):
/// y = γ ⊙ (x − μ)/√(v + ε) + β per column, with the batch statistics in [`Mode::Train`] and
/// the running statistics in [`Mode::Eval`].
///
/// `forward` never mutates the layer (it may be recomputed for activation checkpointing); call
/// [`BatchNorm::update_running`] with the train-mode cache once per training step.
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

/// What [`BatchNorm::backward`] needs: X̂ and σ⁻¹ per column; in train mode also the batch
/// statistics (for [`BatchNorm::update_running`]). Its buffers are reused when it is passed
/// again to a forward pass (`BatchNorm::forward_into`).
#[derive(Debug, Clone)]
pub struct BatchNormCache<F> {
    x_hat: Array2<F>,
    inv_std: Vec<f64>,
    /// The batch statistics; meaningful only when `train`.
    batch: BatchStats,
    train: bool,
}

impl<F> Default for BatchNormCache<F> {
    fn default() -> Self {
        BatchNormCache {
            x_hat: Array2::from_shape_vec((0, 0), Vec::new())
                .unwrap_or_else(|_| unreachable!("an empty array")),
            inv_std: Vec::new(),
            batch: BatchStats::default(),
            train: false,
        }
    }
}

/// Batch statistics of a train-mode forward pass.
#[derive(Debug, Clone, Default)]
struct BatchStats {
    mean: Vec<f64>,
    /// Biased (divided by n).
    var: Vec<f64>,
    n: usize,
}

impl<F> BatchNormCache<F> {
    /// The mode of the forward pass that made this cache.
    pub fn mode(&self) -> Mode {
        if self.train {
            Mode::Train
        } else {
            Mode::Eval
        }
    }
    /// The batch mean μ (train mode only).
    pub fn batch_mean(&self) -> Option<&[f64]> {
        self.train.then_some(self.batch.mean.as_slice())
    }
    /// The biased batch variance v = (1/n) Σ (x − μ)² (train mode only).
    pub fn batch_var(&self) -> Option<&[f64]> {
        self.train.then_some(self.batch.var.as_slice())
    }
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

    #[track_caller]
    fn check_width(&self, what: &str, d: usize) {
        assert!(
            self.gamma.value.dim() == (1, d)
                && self.beta.value.dim() == (1, d)
                && self.running_mean.len() == d
                && self.running_var.len() == d,
            "BatchNorm::{what}: input width {d}, gamma {:?}, beta {:?}, running mean {}, \
             running var {}",
            self.gamma.value.dim(),
            self.beta.value.dim(),
            self.running_mean.len(),
            self.running_var.len()
        );
    }

    /// Per-column (μ, σ⁻¹) of the running statistics, into `mean` and `inv_std`.
    fn running_stats_into(&self, mean: &mut Vec<f64>, inv_std: &mut Vec<f64>) {
        to_f64_into(&self.running_mean, mean);
        inv_std.clear();
        inv_std.extend(
            self.running_var
                .iter()
                .map(|v| 1.0 / (v.to_f64_lossless() + self.eps).sqrt()),
        );
    }

    /// Y = γ ⊙ (X − μ)·σ⁻¹ + β with the batch statistics (`Train`, biased variance) or the
    /// running ones (`Eval`). Does not touch the running statistics.
    ///
    /// # Shapes
    /// `x: n × d` → `n × d`.
    ///
    /// # Panics
    /// If `x` has not d columns, or in train mode if it has fewer than 2 rows (the unbiased
    /// variance is undefined; PyTorch raises too).
    ///
    /// # Complexity
    /// Time O(n·d); memory 2·n·d (Y and the cached X̂).
    #[track_caller]
    pub fn forward(&self, x: ArrayView2<'_, F>, mode: Mode) -> (Array2<F>, BatchNormCache<F>) {
        let mut y = Array2::zeros(x.dim());
        let mut cache = BatchNormCache::default();
        self.forward_into(
            x,
            mode,
            y.view_mut(),
            &mut cache,
            &mut NormScratch::default(),
        );
        (y, cache)
    }

    /// [`BatchNorm::forward`] into `y` (n × d) and `cache`, reusing the cache's buffers and
    /// `sc`: allocates nothing once they have held a pass of this shape. Bit for bit
    /// [`BatchNorm::forward`].
    ///
    /// # Panics
    /// As [`BatchNorm::forward`], and if `y` is not n × d.
    #[track_caller]
    pub(crate) fn forward_into(
        &self,
        x: ArrayView2<'_, F>,
        mode: Mode,
        y: ArrayViewMut2<'_, F>,
        cache: &mut BatchNormCache<F>,
        sc: &mut NormScratch,
    ) {
        let (n, d) = x.dim();
        self.check_width("forward", d);
        assert_eq!(y.dim(), (n, d), "BatchNorm::forward: output shape");
        let BatchNormCache {
            x_hat,
            inv_std,
            batch,
            train,
        } = cache;
        let NormScratch {
            parts,
            a: mean_eval,
            b: gamma,
            c: beta,
        } = sc;
        let mean: &[f64] = match mode {
            Mode::Train => {
                assert!(
                    n >= 2,
                    "BatchNorm::forward: train mode needs at least 2 rows, input {n}×{d}"
                );
                col_means_into(x, parts, &mut batch.mean);
                let mean = &batch.mean;
                sum_rows_into(n, d, d, parts, &mut batch.var, |i, acc| {
                    for ((a, &v), &m) in acc.iter_mut().zip(x.row(i)).zip(mean) {
                        let t = v.to_f64_lossless() - m;
                        *a += t * t;
                    }
                });
                batch.var.iter_mut().for_each(|v| *v /= n as f64);
                inv_std.clear();
                inv_std.extend(batch.var.iter().map(|v| 1.0 / (v + self.eps).sqrt()));
                batch.n = n;
                *train = true;
                &batch.mean
            }
            Mode::Eval => {
                self.running_stats_into(mean_eval, inv_std);
                *train = false;
                mean_eval
            }
        };
        to_f64_into(&self.gamma.value, gamma);
        to_f64_into(&self.beta.value, beta);
        if x_hat.dim() != (n, d) {
            *x_hat = Array2::zeros((n, d));
        }
        let inv_std: &[f64] = inv_std;
        let (gamma, beta): (&[f64], &[f64]) = (gamma, beta);
        for_each_row2(x_hat.view_mut(), y, |i, mut xh, mut yr| {
            let xr = x.row(i);
            for k in 0..d {
                let t = (xr[k].to_f64_lossless() - mean[k]) * inv_std[k];
                xh[k] = F::from_f64_lossy(t);
                yr[k] = F::from_f64_lossy(gamma[k] * t + beta[k]);
            }
        });
    }

    /// Updates the running statistics from a train-mode cache, as PyTorch:
    /// r_μ ← (1 − m)·r_μ + m·μ and r_v ← (1 − m)·r_v + m·v·n/(n − 1) (unbiased variance).
    /// Does nothing for an eval-mode cache.
    ///
    /// # Panics
    /// If the cache's width is not d.
    #[track_caller]
    pub fn update_running(&mut self, cache: &BatchNormCache<F>) {
        if !cache.train {
            return;
        }
        let b = &cache.batch;
        let d = b.mean.len();
        self.check_width("update_running", d);
        let m = self.momentum;
        let unbias = b.n as f64 / (b.n as f64 - 1.0);
        for k in 0..d {
            let rm = self.running_mean[k].to_f64_lossless();
            let rv = self.running_var[k].to_f64_lossless();
            self.running_mean[k] = F::from_f64_lossy((1.0 - m) * rm + m * b.mean[k]);
            self.running_var[k] = F::from_f64_lossy((1.0 - m) * rv + m * b.var[k] * unbias);
        }
    }

    /// Eval-mode forward (running statistics) without a cache.
    ///
    /// # Panics
    /// If `x` has not d columns.
    #[track_caller]
    pub fn predict(&self, x: ArrayView2<'_, F>) -> Array2<F> {
        let mut y = x.to_owned();
        self.predict_inplace(y.view_mut());
        y
    }

    /// [`BatchNorm::predict`] in place: x ← γ ⊙ (x − r_μ)/√(r_v + ε) + β.
    ///
    /// # Panics
    /// If `x` has not d columns.
    #[track_caller]
    pub fn predict_inplace(&self, x: ArrayViewMut2<'_, F>) {
        let d = x.ncols();
        self.check_width("predict_inplace", d);
        let (mut mean, mut inv_std) = (Vec::new(), Vec::new());
        self.running_stats_into(&mut mean, &mut inv_std);
        let gamma = to_f64_vec(&self.gamma.value);
        let beta = to_f64_vec(&self.beta.value);
        for_each_row(x, |_, mut row| {
            for k in 0..d {
                let t = (row[k].to_f64_lossless() - mean[k]) * inv_std[k];
                row[k] = F::from_f64_lossy(gamma[k] * t + beta[k]);
            }
        });
    }

    /// Adds dγ = (G ⊙ X̂)ᵀ1 and dβ = Gᵀ1 into the parameters' gradients and returns dX:
    /// γ σ⁻¹ ⊙ (G − 1·s_gᵀ/n − X̂ ⊙ 1·s_gxᵀ/n) for a train-mode cache (the batch statistics
    /// depend on X), γ σ⁻¹ ⊙ G for an eval-mode cache.
    ///
    /// # Shapes
    /// `g: n × d` → `n × d`.
    ///
    /// # Panics
    /// If `g` has not the shape of the forward input.
    #[track_caller]
    pub fn backward(&mut self, cache: BatchNormCache<F>, g: ArrayView2<'_, F>) -> Array2<F> {
        let mut dx = Array2::zeros(g.dim());
        self.backward_into(&cache, g, dx.view_mut(), &mut NormScratch::default());
        dx
    }

    /// [`BatchNorm::backward`] into `dx` (n × d), with `sc` for the statistics: allocates
    /// nothing once `sc` has held a pass of this shape. Bit for bit [`BatchNorm::backward`].
    ///
    /// # Panics
    /// As [`BatchNorm::backward`], and if `dx` is not n × d.
    #[track_caller]
    pub(crate) fn backward_into(
        &mut self,
        cache: &BatchNormCache<F>,
        g: ArrayView2<'_, F>,
        dx: ArrayViewMut2<'_, F>,
        sc: &mut NormScratch,
    ) {
        let BatchNormCache {
            x_hat,
            inv_std,
            train,
            ..
        } = cache;
        assert_eq!(
            g.dim(),
            x_hat.dim(),
            "BatchNorm::backward: g {:?}, forward input {:?}",
            g.dim(),
            x_hat.dim()
        );
        assert_eq!(dx.dim(), g.dim(), "BatchNorm::backward: dx shape");
        let (n, d) = g.dim();
        self.check_width("backward", d);
        let NormScratch {
            parts,
            a: sums,
            b: gs,
            ..
        } = sc;
        sum_rows_into(n, d, 2 * d, parts, sums, |i, acc| {
            let (sg, sgx) = acc.split_at_mut(d);
            let (gr, xr) = (g.row(i), x_hat.row(i));
            for k in 0..d {
                let gv = gr[k].to_f64_lossless();
                sg[k] += gv;
                sgx[k] += gv * xr[k].to_f64_lossless();
            }
        });
        let (sg, sgx) = sums.split_at(d);
        for k in 0..d {
            self.beta.grad[[0, k]] += F::from_f64_lossy(sg[k]);
            self.gamma.grad[[0, k]] += F::from_f64_lossy(sgx[k]);
        }
        gs.clear();
        gs.extend(
            self.gamma
                .value
                .iter()
                .zip(inv_std)
                .map(|(g, s)| g.to_f64_lossless() * s),
        );
        let gs: &[f64] = gs;
        let train = *train;
        let nf = n as f64;
        for_each_row(dx, |i, mut row| {
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

    /// Calls `f` on each parameter (gamma, then beta).
    pub fn visit_params(&mut self, f: &mut dyn FnMut(&mut Param<F>)) {
        f(&mut self.gamma);
        f(&mut self.beta);
    }
}

// ---------------------------------------------------------------------------------------------
// PairNorm.

/// ε of [`PairNorm`], inside the square roots (PyG's default value; the paper's reference code
/// uses 1e-6).
pub const PAIR_NORM_EPS: f64 = 1e-5;

/// The PairNorm variant (names from the paper's reference code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PairNormMode {
    /// PN: centre, then divide by the root mean squared row norm: y_i = s·c_i/√(ε + mean_j ‖c_j‖²).
    #[default]
    Pn,
    /// PN-SI (scale individually): centre, then y_i = s·c_i/√(ε + ‖c_i‖²).
    PnSi,
    /// PN-SCS (scale and centre simultaneously): y_i = s·x_i/√(ε + ‖x_i‖²) − μ, with μ the
    /// column mean of the input.
    PnScs,
}

/// PairNorm (Zhao & Akoglu, ICLR 2020, <https://arxiv.org/abs/1909.12223>): keeps the total
/// pairwise squared distance of the node representations constant, against over-smoothing.
/// No learnable parameters; train and eval are the same (statistics of the current input).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairNorm {
    /// The scale s (default 1).
    pub scale: f64,
    /// The variant (default [`PairNormMode::Pn`]).
    pub mode: PairNormMode,
}

impl Default for PairNorm {
    fn default() -> Self {
        PairNorm {
            scale: 1.0,
            mode: PairNormMode::Pn,
        }
    }
}

/// What [`PairNorm::backward`] needs: Z = C (the centred input; PN, PN-SI) or X (PN-SCS), and
/// 1/r (one value for PN, one per row otherwise).
#[derive(Debug, Clone)]
pub struct PairNormCache<F> {
    z: Array2<F>,
    inv_r: Vec<f64>,
    mode: PairNormMode,
    scale: f64,
}

impl<F> Default for PairNormCache<F> {
    fn default() -> Self {
        PairNormCache {
            z: Array2::from_shape_vec((0, 0), Vec::new())
                .unwrap_or_else(|_| unreachable!("an empty array")),
            inv_r: Vec::new(),
            mode: PairNormMode::Pn,
            scale: 1.0,
        }
    }
}

/// 1/√(ε + ‖row‖²), in f64.
fn inv_row_norm(sq: f64) -> f64 {
    1.0 / (PAIR_NORM_EPS + sq).sqrt()
}

impl PairNorm {
    /// The PairNorm output of `x` (see [`PairNormMode`]) and the cache for `backward`.
    ///
    /// # Shapes
    /// `x: n × d` → `n × d`.
    ///
    /// # Complexity
    /// Time O(n·d); memory 2·n·d (Y and the cached C or X).
    pub fn forward<F: Scalar>(&self, x: ArrayView2<'_, F>) -> (Array2<F>, PairNormCache<F>) {
        let mut y = Array2::zeros(x.dim());
        let mut cache = PairNormCache::default();
        self.forward_into(x, y.view_mut(), &mut cache, &mut NormScratch::default());
        (y, cache)
    }

    /// [`PairNorm::forward`] into `y` (n × d) and `cache`, reusing the cache's buffers and
    /// `sc`: allocates nothing once they have held a pass of this shape. Bit for bit
    /// [`PairNorm::forward`].
    ///
    /// # Panics
    /// If `y` has not the shape of `x`.
    #[track_caller]
    pub(crate) fn forward_into<F: Scalar>(
        &self,
        x: ArrayView2<'_, F>,
        y: ArrayViewMut2<'_, F>,
        cache: &mut PairNormCache<F>,
        sc: &mut NormScratch,
    ) {
        let (n, d) = x.dim();
        assert_eq!(y.dim(), (n, d), "PairNorm::forward: output shape");
        let s = self.scale;
        let NormScratch {
            parts,
            a: mu,
            b: tot,
            ..
        } = sc;
        col_means_into(x, parts, mu);
        let mu: &[f64] = mu;
        let PairNormCache {
            z,
            inv_r,
            mode,
            scale,
        } = cache;
        *mode = self.mode;
        *scale = s;
        if z.dim() != (n, d) {
            *z = Array2::zeros((n, d));
        }
        match self.mode {
            PairNormMode::Pn | PairNormMode::PnSi => {
                for_each_row(z.view_mut(), |i, mut row| {
                    for (k, (o, &v)) in row.iter_mut().zip(x.row(i)).enumerate() {
                        *o = F::from_f64_lossy(v.to_f64_lossless() - mu[k]);
                    }
                });
                let c = z.view();
                let sq = |i: usize| {
                    c.row(i)
                        .iter()
                        .map(|v| v.to_f64_lossless().powi(2))
                        .sum::<f64>()
                };
                if self.mode == PairNormMode::Pn {
                    sum_rows_into(n, d, 1, parts, tot, |i, acc| acc[0] += sq(i));
                    inv_r.clear();
                    inv_r.push(inv_row_norm(tot[0] / n.max(1) as f64));
                } else {
                    map_rows_into(n, d, inv_r, |i| inv_row_norm(sq(i)));
                }
                let inv_r: &[f64] = inv_r;
                let per_row = self.mode == PairNormMode::PnSi;
                for_each_row(y, |i, mut row| {
                    let f = s * if per_row { inv_r[i] } else { inv_r[0] };
                    for (o, &v) in row.iter_mut().zip(c.row(i)) {
                        *o = F::from_f64_lossy(f * v.to_f64_lossless());
                    }
                });
            }
            PairNormMode::PnScs => {
                map_rows_into(n, d, inv_r, |i| inv_row_norm(sq_norm(x.row(i).iter())));
                let inv_r: &[f64] = inv_r;
                for_each_row(y, |i, mut row| {
                    let f = s * inv_r[i];
                    for (k, (o, &v)) in row.iter_mut().zip(x.row(i)).enumerate() {
                        *o = F::from_f64_lossy(f * v.to_f64_lossless() - mu[k]);
                    }
                });
                z.assign(&x);
            }
        }
    }

    /// The forward output without a cache.
    pub fn predict<F: Scalar>(&self, x: ArrayView2<'_, F>) -> Array2<F> {
        let mut y = x.to_owned();
        self.predict_inplace(y.view_mut());
        y
    }

    /// [`PairNorm::predict`] in place.
    pub fn predict_inplace<F: Scalar>(&self, mut x: ArrayViewMut2<'_, F>) {
        let (n, d) = x.dim();
        let s = self.scale;
        let mu = col_means(x.view());
        match self.mode {
            PairNormMode::Pn => {
                for_each_row(x.view_mut(), |_, mut row| {
                    for (k, v) in row.iter_mut().enumerate() {
                        *v = F::from_f64_lossy(v.to_f64_lossless() - mu[k]);
                    }
                });
                let xv = x.view();
                let total = sum_rows(n, d, 1, |i, acc| acc[0] += sq_norm(xv.row(i).iter()))[0];
                let f = s * inv_row_norm(total / n.max(1) as f64);
                for_each_row(x, |_, mut row| {
                    row.map_inplace(|v| *v = F::from_f64_lossy(f * v.to_f64_lossless()));
                });
            }
            PairNormMode::PnSi => {
                for_each_row(x, |_, mut row| {
                    let centred = |(v, m): (&F, &f64)| v.to_f64_lossless() - m;
                    let sq: f64 = row.iter().zip(&mu).map(|p| centred(p).powi(2)).sum();
                    let f = s * inv_row_norm(sq);
                    for (v, m) in row.iter_mut().zip(&mu) {
                        *v = F::from_f64_lossy(f * centred((v, m)));
                    }
                });
            }
            PairNormMode::PnScs => {
                for_each_row(x, |_, mut row| {
                    let f = s * inv_row_norm(sq_norm(row.iter()));
                    for (k, v) in row.iter_mut().enumerate() {
                        *v = F::from_f64_lossy(f * v.to_f64_lossless() - mu[k]);
                    }
                });
            }
        }
    }

    /// dX from G = dL/dY, with ḡ the column mean of G:
    /// - PN: dX = (s/r)·(G − 1ḡᵀ − a·C), a = ⟨G, C⟩/(n·r²), r = √(ε + (1/n)‖C‖²_F);
    /// - PN-SI: h_i = (s/r_i)·(g_i − (g_i·c_i / r_i²)·c_i), dX = H − 1·h̄ᵀ (h̄ the column mean
    ///   of H);
    /// - PN-SCS: dx_i = (s/r_i)·(g_i − (g_i·x_i / r_i²)·x_i) − ḡ.
    ///
    /// The mode and scale are those of the forward pass that made the cache.
    ///
    /// # Shapes
    /// `g: n × d` → `n × d`.
    ///
    /// # Panics
    /// If `g` has not the shape of the forward input.
    #[track_caller]
    pub fn backward<F: Scalar>(&self, cache: PairNormCache<F>, g: ArrayView2<'_, F>) -> Array2<F> {
        let mut dx = Array2::zeros(g.dim());
        self.backward_into(&cache, g, dx.view_mut(), &mut NormScratch::default());
        dx
    }

    /// [`PairNorm::backward`] into `dx` (n × d), with `sc` for the statistics: allocates
    /// nothing once `sc` has held a pass of this shape. Bit for bit [`PairNorm::backward`].
    ///
    /// # Panics
    /// As [`PairNorm::backward`], and if `dx` is not n × d.
    #[track_caller]
    pub(crate) fn backward_into<F: Scalar>(
        &self,
        cache: &PairNormCache<F>,
        g: ArrayView2<'_, F>,
        mut dx: ArrayViewMut2<'_, F>,
        sc: &mut NormScratch,
    ) {
        let PairNormCache {
            z,
            inv_r,
            mode,
            scale: s,
        } = cache;
        let s = *s;
        assert_eq!(
            g.dim(),
            z.dim(),
            "PairNorm::backward: g {:?}, forward input {:?}",
            g.dim(),
            z.dim()
        );
        assert_eq!(dx.dim(), g.dim(), "PairNorm::backward: dx shape");
        let (n, d) = g.dim();
        let nf = n.max(1) as f64;
        let NormScratch {
            parts,
            a: sums,
            b: bar,
            ..
        } = sc;
        match mode {
            PairNormMode::Pn => {
                // Column sums of G and ⟨G, C⟩ in one pass.
                sum_rows_into(n, d, d + 1, parts, sums, |i, acc| {
                    let (sg, gc) = acc.split_at_mut(d);
                    for ((a, &gv), &cv) in sg.iter_mut().zip(g.row(i)).zip(z.row(i)) {
                        let gv = gv.to_f64_lossless();
                        *a += gv;
                        gc[0] += gv * cv.to_f64_lossless();
                    }
                });
                bar.clear();
                bar.extend(sums[..d].iter().map(|v| v / nf));
                let gbar: &[f64] = bar;
                let ir = inv_r[0];
                let a = sums[d] * ir * ir / nf;
                let f = s * ir;
                for_each_row(dx, |i, mut row| {
                    let (gr, cr) = (g.row(i), z.row(i));
                    for k in 0..d {
                        let t = gr[k].to_f64_lossless() - gbar[k] - a * cr[k].to_f64_lossless();
                        row[k] = F::from_f64_lossy(f * t);
                    }
                });
            }
            PairNormMode::PnSi => {
                for_each_row(dx.view_mut(), |i, mut row| {
                    row_backward(row.view_mut(), g.row(i), z.row(i), s, inv_r[i], None);
                });
                col_means_into(dx.view(), parts, bar);
                let hbar: &[f64] = bar;
                for_each_row(dx, |_, mut row| {
                    for (v, m) in row.iter_mut().zip(hbar) {
                        *v = F::from_f64_lossy(v.to_f64_lossless() - m);
                    }
                });
            }
            PairNormMode::PnScs => {
                col_means_into(g, parts, bar);
                let gbar: &[f64] = bar;
                for_each_row(dx, |i, row| {
                    row_backward(row, g.row(i), z.row(i), s, inv_r[i], Some(gbar));
                });
            }
        }
    }
}

/// ‖v‖² in f64.
fn sq_norm<'a, F: Scalar>(v: impl Iterator<Item = &'a F>) -> f64 {
    v.map(|x| x.to_f64_lossless().powi(2)).sum()
}

/// out ← (s/r)·(g − (g·z / r²)·z) − shift: the Jacobianᵀ of z ↦ s·z/√(ε + ‖z‖²) applied to g
/// (1/r given as `inv_r`), minus an optional shift.
fn row_backward<F: Scalar>(
    mut out: ArrayViewMut1<'_, F>,
    g: ArrayView1<'_, F>,
    z: ArrayView1<'_, F>,
    s: f64,
    inv_r: f64,
    shift: Option<&[f64]>,
) {
    let dot: f64 = g
        .iter()
        .zip(z.iter())
        .map(|(a, b)| a.to_f64_lossless() * b.to_f64_lossless())
        .sum();
    let a = dot * inv_r * inv_r;
    let f = s * inv_r;
    for k in 0..out.len() {
        let t = f * (g[k].to_f64_lossless() - a * z[k].to_f64_lossless());
        let sh = shift.map_or(0.0, |v| v[k]);
        out[k] = F::from_f64_lossy(t - sh);
    }
}

#[cfg(test)]
mod tests {
    use ndarray::{Array1, Array2, Axis};
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::testing::{max_rel_err, numerical_grad};

    fn random(rows: usize, cols: usize, rng: &mut ChaCha8Rng) -> Array2<f64> {
        Array2::from_shape_simple_fn((rows, cols), || rng.random_range(-1.0..1.0))
    }

    const N: usize = 7;
    const D: usize = 4;

    /// A BatchNorm with γ, β from `theta[..2d]`.
    fn bn_from(
        theta: &[f64],
        d: usize,
        running: Option<(&Array1<f64>, &Array1<f64>)>,
    ) -> BatchNorm<f64> {
        let mut bn = BatchNorm::<f64>::new(d);
        bn.gamma.value = Array2::from_shape_vec((1, d), theta[..d].to_vec()).unwrap();
        bn.beta.value = Array2::from_shape_vec((1, d), theta[d..2 * d].to_vec()).unwrap();
        if let Some((m, v)) = running {
            bn.running_mean = m.clone();
            bn.running_var = v.clone();
        }
        bn
    }

    fn check_batch_norm(mode: Mode) {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let x = random(N, D, &mut rng) * 2.0 + 0.5;
        let r = random(N, D, &mut rng);
        let gamma = random(1, D, &mut rng) + 0.2;
        let beta = random(1, D, &mut rng);
        let rm = Array1::from_shape_simple_fn(D, || rng.random_range(-0.5..0.5));
        let rv = Array1::from_shape_simple_fn(D, || rng.random_range(0.3..2.0));
        let running = Some((&rm, &rv));

        let mut theta: Vec<f64> = gamma.iter().chain(beta.iter()).copied().collect();
        let mut bn = bn_from(&theta, D, running);
        let (_, cache) = bn.forward(x.view(), mode);
        assert_eq!(cache.mode(), mode);
        let dx = bn.backward(cache, r.view());
        let mut analytic: Vec<f64> = bn.gamma.grad.iter().copied().collect();
        analytic.extend(bn.beta.grad.iter());
        analytic.extend(dx.iter());
        theta.extend(x.iter());

        let loss = |t: &[f64]| {
            let bn = bn_from(t, D, running);
            let x = Array2::from_shape_vec((N, D), t[2 * D..].to_vec()).unwrap();
            (&bn.forward(x.view(), mode).0 * &r).sum()
        };
        let numerical = numerical_grad(loss, &theta, 1e-6);
        let (err, at) = max_rel_err(&analytic, &numerical);
        assert!(err < 1e-6, "BatchNorm {mode:?}: rel err {err} at {at}");
    }

    #[test]
    fn batch_norm_train_backward_matches_finite_differences() {
        check_batch_norm(Mode::Train);
    }

    #[test]
    fn batch_norm_eval_backward_matches_finite_differences() {
        check_batch_norm(Mode::Eval);
    }

    #[test]
    fn batch_norm_grads_accumulate() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let x = random(N, D, &mut rng);
        let r = random(N, D, &mut rng);
        let mut bn = BatchNorm::<f64>::new(D);
        for _ in 0..2 {
            let (_, c) = bn.forward(x.view(), Mode::Train);
            bn.backward(c, r.view());
        }
        let once = {
            let mut b = BatchNorm::<f64>::new(D);
            let (_, c) = b.forward(x.view(), Mode::Train);
            b.backward(c, r.view());
            b
        };
        assert_eq!(bn.beta.grad, &once.beta.grad * 2.0);
        assert_eq!(bn.gamma.grad, &once.gamma.grad * 2.0);
        let mut seen = Vec::new();
        bn.visit_params(&mut |p| seen.push(p.value.clone()));
        assert_eq!(seen, vec![bn.gamma.value.clone(), bn.beta.value.clone()]);
    }

    #[test]
    fn batch_norm_train_output_has_mean_beta_and_variance_gamma_squared() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let x = random(50, D, &mut rng) * 3.0 + 7.0;
        let mut bn = BatchNorm::<f64>::new(D);
        bn.gamma.value = random(1, D, &mut rng) + 1.5;
        bn.beta.value = random(1, D, &mut rng);
        let (y, cache) = bn.forward(x.view(), Mode::Train);
        let mean = y.mean_axis(Axis(0)).unwrap();
        let var = y.var_axis(Axis(0), 0.0);
        for k in 0..D {
            let (g, b) = (bn.gamma.value[[0, k]], bn.beta.value[[0, k]]);
            assert!(
                (mean[k] - b).abs() < 1e-12,
                "col {k}: mean {} vs β {b}",
                mean[k]
            );
            let v = cache.batch_var().unwrap()[k];
            // Var(y) = γ²·v/(v + ε).
            let expected = g * g * v / (v + bn.eps);
            assert!((var[k] - expected).abs() < 1e-12 * expected.max(1.0));
            assert!(
                (var[k] - g * g).abs() < 1e-4 * g * g,
                "col {k}: var {} vs γ² {}",
                var[k],
                g * g
            );
        }
        // Eval with the running stats set to the batch stats (biased var) reproduces train.
        bn.running_mean = Array1::from(cache.batch_mean().unwrap().to_vec());
        bn.running_var = Array1::from(cache.batch_var().unwrap().to_vec());
        let ye = bn.predict(x.view());
        assert!((&ye - &y).iter().all(|d| d.abs() < 1e-12));
        let (ye2, _) = bn.forward(x.view(), Mode::Eval);
        assert_eq!(ye, ye2);
    }

    #[test]
    fn batch_norm_running_stats_follow_pytorch() {
        // Columns (1, 3, 5) and (2, 6, 10): means 3 and 6; unbiased variances 4 and 16.
        let x = ndarray::array![[1.0, 2.0], [3.0, 6.0], [5.0, 10.0]];
        let mut bn = BatchNorm::<f64>::new(2);
        let (_, cache) = bn.forward(x.view(), Mode::Train);
        assert_eq!(cache.batch_var().unwrap(), &[8.0 / 3.0, 32.0 / 3.0]);
        bn.update_running(&cache);
        // running_mean = 0.9·0 + 0.1·μ; running_var = 0.9·1 + 0.1·var_unbiased.
        let close = |a: f64, b: f64| (a - b).abs() < 1e-14;
        assert!(close(bn.running_mean[0], 0.3) && close(bn.running_mean[1], 0.6));
        assert!(close(bn.running_var[0], 1.3) && close(bn.running_var[1], 2.5));
        // A second step: 0.9·0.3 + 0.1·3 = 0.57; 0.9·1.3 + 0.1·4 = 1.57.
        bn.update_running(&cache);
        assert!(close(bn.running_mean[0], 0.57) && close(bn.running_var[0], 1.57));
        // An eval cache changes nothing.
        let before = bn.clone();
        let (_, eval_cache) = bn.forward(x.view(), Mode::Eval);
        assert_eq!(eval_cache.mode(), Mode::Eval);
        assert!(eval_cache.batch_mean().is_none());
        bn.update_running(&eval_cache);
        assert_eq!(bn, before);
    }

    #[test]
    fn batch_norm_constant_column_is_finite() {
        let mut rng = ChaCha8Rng::seed_from_u64(8);
        let mut x = random(N, D, &mut rng);
        x.column_mut(1).fill(3.25);
        let r = random(N, D, &mut rng);
        let mut bn = BatchNorm::<f64>::new(D);
        bn.beta.value[[0, 1]] = 0.5;
        let (y, cache) = bn.forward(x.view(), Mode::Train);
        assert!(y.iter().all(|v| v.is_finite()));
        assert!(y.column(1).iter().all(|&v| v == 0.5), "constant column ↦ β");
        let dx = bn.backward(cache, r.view());
        assert!(dx.iter().all(|v| v.is_finite()));
        assert!(bn.gamma.grad.iter().all(|v| v.is_finite()));
        // In f32 as well.
        let bn32 = BatchNorm::<f32>::new(D);
        let (y32, _) = bn32.forward(x.mapv(|v| v as f32).view(), Mode::Train);
        assert!(y32.iter().all(|v| v.is_finite()));
    }

    #[test]
    #[should_panic(expected = "input width 3")]
    fn batch_norm_wrong_width_panics() {
        let bn = BatchNorm::<f64>::new(4);
        let _ = bn.forward(Array2::zeros((5, 3)).view(), Mode::Eval);
    }

    #[test]
    #[should_panic(expected = "at least 2 rows")]
    fn batch_norm_train_single_row_panics() {
        let bn = BatchNorm::<f64>::new(2);
        let _ = bn.forward(Array2::zeros((1, 2)).view(), Mode::Train);
    }

    fn check_pair_norm(mode: PairNormMode) {
        let mut rng = ChaCha8Rng::seed_from_u64(21);
        let x = random(N, D, &mut rng) + 0.3;
        let r = random(N, D, &mut rng);
        let pn = PairNorm { scale: 1.7, mode };
        let (y, cache) = pn.forward(x.view());
        assert_eq!(
            y,
            pn.predict(x.view()),
            "{mode:?}: predict differs from forward"
        );
        let dx = pn.backward(cache, r.view());
        let theta: Vec<f64> = x.iter().copied().collect();
        let loss = |t: &[f64]| {
            let x = Array2::from_shape_vec((N, D), t.to_vec()).unwrap();
            (&pn.forward(x.view()).0 * &r).sum()
        };
        let numerical = numerical_grad(loss, &theta, 1e-6);
        let analytic: Vec<f64> = dx.iter().copied().collect();
        let (err, at) = max_rel_err(&analytic, &numerical);
        assert!(err < 1e-6, "PairNorm {mode:?}: rel err {err} at {at}");
    }

    #[test]
    fn pair_norm_backward_matches_finite_differences() {
        for mode in [PairNormMode::Pn, PairNormMode::PnSi, PairNormMode::PnScs] {
            check_pair_norm(mode);
        }
    }

    #[test]
    fn pair_norm_pn_centres_and_fixes_mean_row_norm() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let x = random(40, 6, &mut rng) * 5.0 + 2.0;
        for s in [1.0, 2.5] {
            let pn = PairNorm {
                scale: s,
                ..Default::default()
            };
            let y = pn.predict(x.view());
            let mean = y.mean_axis(Axis(0)).unwrap();
            assert!(mean.iter().all(|m| m.abs() < 1e-12), "column means {mean}");
            let msq = y.rows().into_iter().map(|r| r.dot(&r)).sum::<f64>() / 40.0;
            assert!(
                (msq - s * s).abs() < 1e-6 * s * s,
                "mean row norm² {msq}, s² {}",
                s * s
            );
        }
        // PN-SI: every row has norm ≈ s.
        let pn = PairNorm {
            scale: 2.0,
            mode: PairNormMode::PnSi,
        };
        let y = pn.predict(x.view());
        for r in y.rows() {
            assert!((r.dot(&r).sqrt() - 2.0).abs() < 1e-5);
        }
    }

    #[test]
    fn pair_norm_degenerate_inputs_are_finite() {
        let mut rng = ChaCha8Rng::seed_from_u64(6);
        let r = random(N, D, &mut rng);
        // Identical rows: C = 0, so PN and PN-SI give 0 (ε keeps r > 0).
        let same = Array2::from_shape_fn((N, D), |(_, k)| k as f64 - 1.0);
        // A zero row for PN-SCS (‖x_i‖ = 0).
        let mut zero_row = random(N, D, &mut rng);
        zero_row.row_mut(2).fill(0.0);
        for mode in [PairNormMode::Pn, PairNormMode::PnSi, PairNormMode::PnScs] {
            let pn = PairNorm { scale: 1.0, mode };
            for x in [&same, &zero_row] {
                let (y, cache) = pn.forward(x.view());
                assert!(y.iter().all(|v| v.is_finite()), "{mode:?}");
                let dx = pn.backward(cache, r.view());
                assert!(dx.iter().all(|v| v.is_finite()), "{mode:?}");
            }
            if mode != PairNormMode::PnScs {
                assert!(pn.predict(same.view()).iter().all(|&v| v == 0.0));
            }
        }
        // Empty input: empty output, no panic.
        let empty = Array2::<f64>::zeros((0, 3));
        let (y, cache) = PairNorm::default().forward(empty.view());
        assert_eq!(y.dim(), (0, 3));
        assert_eq!(
            PairNorm::default().backward(cache, empty.view()).dim(),
            (0, 3)
        );
    }

    #[test]
    fn norms_f32_forward_matches_f64() {
        let mut rng = ChaCha8Rng::seed_from_u64(13);
        let x64 = random(30, 5, &mut rng) * 2.0 + 1.0;
        let x32 = x64.mapv(|v| v as f32);
        let close = |a: &Array2<f32>, b: &Array2<f64>| {
            a.iter()
                .zip(b)
                .all(|(&p, &q)| (p as f64 - q).abs() <= 1e-5 * q.abs().max(1.0))
        };
        let mut bn64 = BatchNorm::<f64>::new(5);
        bn64.gamma.value = random(1, 5, &mut rng) + 1.0;
        bn64.beta.value = random(1, 5, &mut rng);
        bn64.running_mean = Array1::from_shape_simple_fn(5, || rng.random_range(-1.0..1.0));
        let bn32 = BatchNorm::<f32> {
            gamma: Param::new(bn64.gamma.value.mapv(|v| v as f32)),
            beta: Param::new(bn64.beta.value.mapv(|v| v as f32)),
            running_mean: bn64.running_mean.mapv(|v| v as f32),
            running_var: bn64.running_var.mapv(|v| v as f32),
            momentum: 0.1,
            eps: 1e-5,
        };
        for mode in [Mode::Train, Mode::Eval] {
            let (a, _) = bn32.forward(x32.view(), mode);
            let (b, _) = bn64.forward(x64.view(), mode);
            assert!(close(&a, &b), "BatchNorm {mode:?}");
        }
        for mode in [PairNormMode::Pn, PairNormMode::PnSi, PairNormMode::PnScs] {
            let pn = PairNorm { scale: 1.3, mode };
            assert!(
                close(&pn.predict(x32.view()), &pn.predict(x64.view())),
                "{mode:?}"
            );
        }
    }

    #[test]
    fn norms_are_bitwise_independent_of_thread_count() {
        let mut rng = ChaCha8Rng::seed_from_u64(17);
        let x: Array2<f32> =
            Array2::from_shape_simple_fn((10_000, 7), || rng.random_range(-1.0..1.0));
        let g: Array2<f32> =
            Array2::from_shape_simple_fn((10_000, 7), || rng.random_range(-1.0..1.0));
        let run = || {
            let mut bn = BatchNorm::<f32>::new(7);
            let (y, c) = bn.forward(x.view(), Mode::Train);
            bn.update_running(&c);
            let dx = bn.backward(c, g.view());
            let mut out = vec![y, dx, bn.gamma.grad.clone(), bn.beta.grad.clone()];
            for mode in [PairNormMode::Pn, PairNormMode::PnSi, PairNormMode::PnScs] {
                let pn = PairNorm { scale: 1.0, mode };
                let (y, c) = pn.forward(x.view());
                out.push(pn.backward(c, g.view()));
                out.push(y);
            }
            (out, bn.running_var.clone())
        };
        let one = crate::par::thread_pool(1).unwrap().install(run);
        let three = crate::par::thread_pool(3).unwrap().install(run);
        assert!(one == three, "results depend on the thread count");
    }
}
