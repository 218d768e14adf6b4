//! Masked softmax cross-entropy: value and gradient from one function.

use ndarray::{Array2, ArrayView2, ArrayViewMut2};

use crate::graph::Sums;
use crate::input::Mask;
use crate::scalar::exact::Accumulator;
use crate::Scalar;

/// L = (1/|M|) Σ_{i∈M} [logsumexp(z_i) − z_{i,y_i}], averaged over the mask's nodes only, and
/// dL/dZ = (softmax(z_i) − e_{y_i}) / |M| on the mask's rows, zero elsewhere.
/// The log-sum-exp subtracts each row's maximum, so large logits cannot overflow.
///
/// # Panics
/// If the mask is empty (callers check masks at the entry point), if `labels.len()` differs
/// from the number of rows, or if a label is ≥ the number of columns.
///
/// # Examples
/// ```
/// use ndarray::array;
/// use sparse_gcn::{data::Mask, nn::loss::softmax_cross_entropy};
/// let z = array![[0.0f64, 0.0], [1000.0, 0.0]];
/// let mask = Mask::try_from_indices(vec![0, 1], 2).unwrap();
/// let (loss, grad) = softmax_cross_entropy(z.view(), &[0, 0], &mask);
/// assert!((loss - std::f64::consts::LN_2 / 2.0).abs() < 1e-12); // (ln 2 + 0) / 2
/// assert!((grad[[0, 0]] + 0.25).abs() < 1e-12);                  // (1/2 − 1) / 2
/// ```
#[track_caller]
pub fn softmax_cross_entropy<F: Scalar>(
    logits: ArrayView2<'_, F>,
    labels: &[u32],
    mask: &Mask,
) -> (F, Array2<F>) {
    let mut grad = Array2::<F>::zeros(logits.dim());
    let loss = masked_ce(logits, labels, mask, Some(grad.view_mut()), None);
    (loss, grad)
}

/// [`softmax_cross_entropy`] writing dL/dZ into `grad` (every entry: zero off the mask) instead
/// of a new array.
///
/// # Panics
/// As [`softmax_cross_entropy`], and if `grad` has not the shape of `logits`.
#[track_caller]
pub fn softmax_cross_entropy_into<F: Scalar>(
    logits: ArrayView2<'_, F>,
    labels: &[u32],
    mask: &Mask,
    grad: ArrayViewMut2<'_, F>,
) -> F {
    assert_eq!(
        grad.dim(),
        logits.dim(),
        "softmax_cross_entropy_into: grad vs logits"
    );
    masked_ce(logits, labels, mask, Some(grad), None)
}

/// [`softmax_cross_entropy_into`] over every process of a row-partitioned run: `logits`,
/// `labels` and `mask` are this process's rows, |M| is the mask's size over every process, and
/// the loss sums every process's terms (through `across`). With one process it is
/// [`softmax_cross_entropy_into`], bit for bit.
///
/// # Panics
/// As [`softmax_cross_entropy_into`], the mask being empty over every process.
#[track_caller]
pub(crate) fn softmax_cross_entropy_across<F: Scalar>(
    logits: ArrayView2<'_, F>,
    labels: &[u32],
    mask: &Mask,
    grad: Option<ArrayViewMut2<'_, F>>,
    across: &Sums<'_, F>,
) -> F {
    // The gradient is zeroed and written (the logits of the mask's rows are read).
    let _span = crate::kernels::profile::span(crate::kernels::profile::Phase::Loss, || {
        crate::kernels::profile::Work::Stream {
            bytes: (2 * logits.len() + mask.len() * logits.ncols()) * std::mem::size_of::<F>(),
        }
    });
    let mut grad = grad;
    if let Some(g) = grad.as_mut() {
        assert_eq!(
            g.dim(),
            logits.dim(),
            "softmax_cross_entropy_across: grad vs logits"
        );
    }
    masked_ce(logits, labels, mask, grad, Some(across))
}

/// `softmax_cross_entropy_across` with the gradient written over the logits: `z` holds the
/// logits on entry and ∂L/∂logits on exit (zero outside the mask's rows). The loss and the
/// gradient are the same bits as `softmax_cross_entropy_across`'s; one n × classes buffer
/// instead of two.
///
/// # Panics
/// As `softmax_cross_entropy_across`.
#[track_caller]
pub fn softmax_cross_entropy_in_place_across<F: Scalar>(
    z: ArrayViewMut2<'_, F>,
    labels: &[u32],
    mask: &Mask,
    across: &Sums<'_, F>,
) -> F {
    in_place_span(z, labels, mask, None, across)
}

/// [`softmax_cross_entropy_in_place_across`] with a weight per row instead of 1/|M|:
/// L = Σ_{i∈M} w_i [logsumexp(z_i) − z_{i,y_i}] (summed exactly, rounded once) and
/// dL/dz_i = w_i (softmax(z_i) − e_{y_i}) on the mask's rows, zero elsewhere. GraphSAINT's loss
/// normalisation (`docs/MATH.md` §22). With every w_i = 1/|M| it is the unweighted loss up to
/// the rounding of the products.
///
/// # Panics
/// As [`softmax_cross_entropy_in_place_across`], and if `weights` has not a weight per row.
#[track_caller]
pub fn softmax_cross_entropy_weighted_in_place_across<F: Scalar>(
    z: ArrayViewMut2<'_, F>,
    labels: &[u32],
    mask: &Mask,
    weights: &[F],
    across: &Sums<'_, F>,
) -> F {
    assert_eq!(
        weights.len(),
        z.nrows(),
        "softmax_cross_entropy: weights vs rows"
    );
    in_place_span(z, labels, mask, Some(weights), across)
}

/// [`masked_ce_in_place`] timed as the loss phase: the logits read and the gradient written,
/// the mask's rows (and their weights) read again.
#[track_caller]
fn in_place_span<F: Scalar>(
    z: ArrayViewMut2<'_, F>,
    labels: &[u32],
    mask: &Mask,
    weights: Option<&[F]>,
    across: &Sums<'_, F>,
) -> F {
    let per_row = z.ncols() + usize::from(weights.is_some());
    let _span = crate::kernels::profile::span(crate::kernels::profile::Phase::Loss, || {
        crate::kernels::profile::Work::Stream {
            bytes: (2 * z.len() + mask.len() * per_row) * std::mem::size_of::<F>(),
        }
    });
    masked_ce_in_place(z, labels, mask, weights, Some(across))
}

/// The value of [`softmax_cross_entropy`] alone (bit for bit), without the gradient.
///
/// # Panics
/// As [`softmax_cross_entropy`].
#[track_caller]
pub fn softmax_cross_entropy_loss<F: Scalar>(
    logits: ArrayView2<'_, F>,
    labels: &[u32],
    mask: &Mask,
) -> F {
    masked_ce(logits, labels, mask, None, None)
}

/// Rows per task of [`masked_ce`] for `c` classes (data-determined; the terms are summed
/// exactly, so the loss does not depend on them).
fn loss_rows(c: usize) -> usize {
    crate::kernels::rows::chunk_rows(c)
}

/// |M| over every process, and 1/|M|.
#[track_caller]
fn mask_count<F: Scalar>(mask: &Mask, n: usize, labels: &[u32], across: Option<&Sums<'_, F>>) -> F {
    let mut count = [mask.len() as u64];
    if let Some(p) = across {
        p.sum_counts(&mut count);
    }
    assert!(count[0] > 0, "softmax_cross_entropy: empty mask");
    assert_eq!(labels.len(), n, "softmax_cross_entropy: labels vs rows");
    F::one() / F::from_u64(count[0]).unwrap_or_else(F::one)
}

/// Row `i`'s label (checked against `c` classes) and log-sum-exp (the row's maximum
/// subtracted first).
#[track_caller]
fn label_lse<F: Scalar>(z: ndarray::ArrayView1<'_, F>, labels: &[u32], i: usize) -> (usize, F) {
    let (y, max) = label_max(z, labels, i);
    let sum: F = z.iter().map(|&v| (v - max).exp()).sum();
    (y, max + sum.ln())
}

/// Row `i`'s label (checked against the row's classes) and the row's maximum.
#[track_caller]
fn label_max<F: Scalar>(z: ndarray::ArrayView1<'_, F>, labels: &[u32], i: usize) -> (usize, F) {
    let c = z.len();
    let y = labels[i] as usize;
    assert!(
        y < c,
        "softmax_cross_entropy: label {y} of node {i} ≥ {c} classes"
    );
    (y, z.iter().copied().fold(F::neg_infinity(), F::max))
}

/// Row `i`'s term logsumexp(z) − z_y (as [`label_lse`] gives it), with its gradient written
/// over `z`: softmax(z)·inv_m, minus inv_m at the label. Each exp(z_j − max) is computed once:
/// the row holds them while they are summed, then each is scaled by inv_m / Σ.
#[track_caller]
fn ce_row_in_place<F: Scalar>(
    mut z: ndarray::ArrayViewMut1<'_, F>,
    labels: &[u32],
    i: usize,
    inv_m: F,
) -> F {
    let (y, max) = label_max(z.view(), labels, i);
    let zy = z[y];
    let mut sum = F::zero();
    for v in z.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    let scale = inv_m / sum;
    for v in z.iter_mut() {
        *v *= scale;
    }
    z[y] -= inv_m;
    max + sum.ln() - zy
}

/// The exact sum (over every process with `across`) of the tasks' partials, rounded once,
/// times 1/|M|.
fn finish_loss<F: Scalar>(total: F::Exact, inv_m: F, across: Option<&Sums<'_, F>>) -> F {
    let total = match across {
        Some(p) => p.sum_exact(&total),
        None => total.value(),
    };
    F::from_f64_lossy(total) * inv_m
}

fn merge<A: Accumulator>(mut a: A, b: A) -> A {
    a.merge(&b);
    a
}

/// The loss, and the gradient written into `grad` (zero outside the mask's rows): the logits
/// are copied into `grad` and [`masked_ce_in_place`] writes the gradient over them. Without
/// `grad`, the terms alone, in tasks of [`loss_rows`] rows, each summed into its own exact
/// partial; the terms are summed exactly (in any order, over every process with `across`) and
/// rounded once.
#[track_caller]
fn masked_ce<F: Scalar>(
    logits: ArrayView2<'_, F>,
    labels: &[u32],
    mask: &Mask,
    grad: Option<ArrayViewMut2<'_, F>>,
    across: Option<&Sums<'_, F>>,
) -> F {
    use rayon::prelude::*;
    if let Some(mut g) = grad {
        g.assign(&logits);
        return masked_ce_in_place(g, labels, mask, None, across);
    }
    let (n, c) = logits.dim();
    let inv_m = mask_count(mask, n, labels, across);
    let idx = mask.indices();
    // The terms of the mask's rows in lo..hi.
    let rows = |lo: usize, hi: usize| -> F::Exact {
        let a = idx.partition_point(|&k| (k as usize) < lo);
        let b = idx.partition_point(|&k| (k as usize) < hi);
        let mut acc = F::Exact::default();
        for &i in &idx[a..b] {
            let z = logits.row(i as usize);
            let (y, lse) = label_lse(z, labels, i as usize);
            acc.add((lse - z[y]).to_f64_lossless());
        }
        acc
    };
    let step = loss_rows(c);
    let total = (0..n.div_ceil(step))
        .into_par_iter()
        .map(|k| rows(k * step, ((k + 1) * step).min(n)))
        .reduce(F::Exact::default, merge);
    finish_loss(total, inv_m, across)
}

/// The loss, with the gradient written over the logits `z` (zero outside the mask's rows), in
/// tasks of [`loss_rows`] rows (in parallel when `z` is contiguous), each task's terms summed
/// into its own exact partial. With `weights`, row i's term and gradient are scaled by
/// `weights[i]` (the term before it is summed) instead of the sum by 1/|M|.
#[track_caller]
fn masked_ce_in_place<F: Scalar>(
    mut z: ArrayViewMut2<'_, F>,
    labels: &[u32],
    mask: &Mask,
    weights: Option<&[F]>,
    across: Option<&Sums<'_, F>>,
) -> F {
    use rayon::prelude::*;
    let c = z.ncols();
    let inv_m = mask_count(mask, z.nrows(), labels, across);
    let idx = mask.indices();
    // Row i's scale of the gradient and of the term, and the scale of the sum.
    let (scale, total_scale) = match weights {
        Some(w) => (Some(w), F::one()),
        None => (None, inv_m),
    };
    // Rows lo.. of chunk `zc`: each mask row's term, then its gradient over it; other rows 0.
    let rows = |lo: usize, mut zc: ArrayViewMut2<'_, F>| -> F::Exact {
        let mut acc = F::Exact::default();
        let mut next = idx.partition_point(|&k| (k as usize) < lo);
        for (r, mut row) in zc.rows_mut().into_iter().enumerate() {
            let i = lo + r;
            if idx.get(next).is_none_or(|&k| k as usize != i) {
                row.fill(F::zero());
                continue;
            }
            next += 1;
            let term = match scale {
                Some(w) => ce_row_in_place(row.view_mut(), labels, i, w[i]) * w[i],
                None => ce_row_in_place(row.view_mut(), labels, i, inv_m),
            };
            acc.add(term.to_f64_lossless());
        }
        acc
    };
    let step = loss_rows(c);
    let total = match z.as_slice_mut() {
        Some(zs) if c > 0 => zs
            .par_chunks_mut(step * c)
            .enumerate()
            .map(|(k, zc)| {
                let len = zc.len() / c;
                let Ok(v) = ArrayViewMut2::from_shape((len, c), zc) else {
                    unreachable!("a chunk of whole rows")
                };
                rows(k * step, v)
            })
            .reduce(F::Exact::default, merge),
        // A strided buffer (or no classes): the same tasks, one after the other.
        _ => z
            .axis_chunks_iter_mut(ndarray::Axis(0), step)
            .enumerate()
            .map(|(k, v)| rows(k * step, v))
            .fold(F::Exact::default(), merge),
    };
    finish_loss(total, total_scale, across)
}

#[cfg(test)]
mod tests {
    use ndarray::Array2;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::input::Mask;
    use crate::testing::harness::citation;

    #[test]
    fn the_gradient_over_the_logits_is_the_two_buffer_gradient_bit_for_bit() {
        let (adj, _) = citation();
        let n = adj.n_nodes();
        let scratch = crate::graph::SumScratch::default();
        let sums = scratch.sums(&crate::graph::Local, crate::graph::RowSpan::whole(n));
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let c = 7;
        let z = Array2::from_shape_fn((n, c), |_| rng.random::<f32>() * 8.0 - 4.0);
        let labels: Vec<u32> = (0..n).map(|i| (i * 5 % c) as u32).collect();
        // Every third node, and one chunk boundary's neighbours.
        let mask = Mask::from_bool(&(0..n).map(|i| i % 3 == 0 || i == 1).collect::<Vec<_>>());
        let mut want = Array2::from_elem((n, c), f32::NAN);
        let loss =
            softmax_cross_entropy_across(z.view(), &labels, &mask, Some(want.view_mut()), &sums);
        let mut got = z.clone();
        let loss2 = softmax_cross_entropy_in_place_across(got.view_mut(), &labels, &mask, &sums);
        assert_eq!(loss.to_bits(), loss2.to_bits());
        assert!(
            got.iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "the gradients differ"
        );
        assert!(
            got.row(2).iter().all(|&v| v == 0.0),
            "a row outside the mask is zero"
        );
        // A strided view takes the sequential path: the same bits.
        let mut wide = Array2::from_elem((n, c + 2), 1.0f32);
        wide.slice_mut(ndarray::s![.., ..c]).assign(&z);
        let loss3 = softmax_cross_entropy_in_place_across(
            wide.slice_mut(ndarray::s![.., ..c]),
            &labels,
            &mask,
            &sums,
        );
        assert_eq!(loss.to_bits(), loss3.to_bits());
        assert_eq!(wide.slice(ndarray::s![.., ..c]), got);
    }

    #[test]
    fn the_weighted_loss_scales_each_rows_term_and_gradient_by_its_weight() {
        let n = 40;
        let c = 5;
        let scratch = crate::graph::SumScratch::default();
        let sums = scratch.sums(&crate::graph::Local, crate::graph::RowSpan::whole(n));
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let z = Array2::from_shape_fn((n, c), |_| rng.random::<f64>() * 6.0 - 3.0);
        let labels: Vec<u32> = (0..n).map(|i| (i * 3 % c) as u32).collect();
        let mask = Mask::from_bool(&(0..n).map(|i| i % 4 != 1).collect::<Vec<_>>());
        let weights: Vec<f64> = (0..n).map(|i| 0.01 * (1 + i % 7) as f64).collect();
        let mut g = z.clone();
        let loss = softmax_cross_entropy_weighted_in_place_across(
            g.view_mut(),
            &labels,
            &mask,
            &weights,
            &sums,
        );
        let mut want = 0.0;
        for i in 0..n {
            let row = z.row(i);
            if !mask.indices().contains(&(i as u32)) {
                assert!(g.row(i).iter().all(|&v| v == 0.0));
                continue;
            }
            let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = row.iter().map(|&v| (v - max).exp()).sum();
            let y = labels[i] as usize;
            want += weights[i] * (max + sum.ln() - row[y]);
            for j in 0..c {
                let p = (row[j] - max).exp() / sum - if j == y { 1.0 } else { 0.0 };
                assert!((g[[i, j]] - weights[i] * p).abs() < 1e-15, "row {i}");
            }
        }
        assert!((loss - want).abs() < 1e-13, "{loss} vs {want}");
        // Weights of 1/|M| are the mean.
        let m = mask.len() as f64;
        let mut g2 = z.clone();
        let mean = softmax_cross_entropy_weighted_in_place_across(
            g2.view_mut(),
            &labels,
            &mask,
            &vec![1.0 / m; n],
            &sums,
        );
        let mut g3 = z.clone();
        let plain = softmax_cross_entropy_in_place_across(g3.view_mut(), &labels, &mask, &sums);
        assert!((mean - plain).abs() < 1e-14);
        assert!(g2.iter().zip(&g3).all(|(a, b)| (a - b).abs() < 1e-16));
    }
}
