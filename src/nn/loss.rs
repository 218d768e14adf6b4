//! Masked softmax cross-entropy: value and gradient from one function.

use ndarray::{Array2, ArrayView2, ArrayViewMut2};

use crate::data::Mask;
use crate::graph::Propagate;
use crate::kernels::exact::Accumulator;
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
/// the loss sums every process's terms (through `across`). With the local
/// [`Propagate`] it is [`softmax_cross_entropy_into`], bit for bit.
///
/// # Panics
/// As [`softmax_cross_entropy_into`], the mask being empty over every process.
#[track_caller]
pub fn softmax_cross_entropy_across<F: Scalar>(
    logits: ArrayView2<'_, F>,
    labels: &[u32],
    mask: &Mask,
    grad: Option<ArrayViewMut2<'_, F>>,
    across: &dyn Propagate<F>,
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

/// The loss, and the gradient written into `grad` (zero outside the mask's rows). The terms
/// are summed exactly (in any order, over every process with `across`) and rounded once. Rows
/// are taken in tasks of [`loss_rows`] (in parallel when `grad` is contiguous or absent), each
/// task's terms summed into its own exact partial.
#[track_caller]
fn masked_ce<F: Scalar>(
    logits: ArrayView2<'_, F>,
    labels: &[u32],
    mask: &Mask,
    mut grad: Option<ArrayViewMut2<'_, F>>,
    across: Option<&dyn Propagate<F>>,
) -> F {
    use rayon::prelude::*;
    let mut count = [mask.len() as u64];
    if let Some(p) = across {
        p.sum_counts(&mut count);
    }
    assert!(count[0] > 0, "softmax_cross_entropy: empty mask");
    assert_eq!(
        labels.len(),
        logits.nrows(),
        "softmax_cross_entropy: labels vs rows"
    );
    let (n, c) = logits.dim();
    let inv_m = F::one() / F::from_u64(count[0]).unwrap_or_else(F::one);
    let idx = mask.indices();
    // The terms of the mask's rows in lo..hi, and the gradient of rows lo..hi written into `g`
    // (zero outside the mask) when given.
    let rows = |lo: usize, hi: usize, mut g: Option<ArrayViewMut2<'_, F>>| -> F::Exact {
        if let Some(g) = g.as_mut() {
            g.fill(F::zero());
        }
        let a = idx.partition_point(|&k| (k as usize) < lo);
        let b = idx.partition_point(|&k| (k as usize) < hi);
        let mut acc = F::Exact::default();
        for &i in &idx[a..b] {
            let i = i as usize;
            let y = labels[i] as usize;
            assert!(
                y < c,
                "softmax_cross_entropy: label {y} of node {i} ≥ {c} classes"
            );
            let z = logits.row(i);
            let max = z.iter().copied().fold(F::neg_infinity(), F::max);
            let sum: F = z.iter().map(|&v| (v - max).exp()).sum();
            let lse = max + sum.ln();
            acc.add((lse - z[y]).to_f64_lossless());
            if let Some(g) = g.as_mut() {
                let mut g = g.row_mut(i - lo);
                for k in 0..c {
                    g[k] = (z[k] - lse).exp() * inv_m;
                }
                g[y] -= inv_m;
            }
        }
        acc
    };
    let step = loss_rows(c);
    let merge = |mut a: F::Exact, b: F::Exact| {
        a.merge(&b);
        a
    };
    let total = match grad.as_mut() {
        Some(g) if c > 0 => match g.as_slice_mut() {
            Some(gs) => gs
                .par_chunks_mut(step * c)
                .enumerate()
                .map(|(k, gc)| {
                    let len = gc.len() / c;
                    let Ok(gv) = ArrayViewMut2::from_shape((len, c), gc) else {
                        unreachable!("a chunk of whole rows")
                    };
                    rows(k * step, k * step + len, Some(gv))
                })
                .reduce(F::Exact::default, merge),
            // A strided gradient: the same tasks, one after the other.
            None => g
                .axis_chunks_iter_mut(ndarray::Axis(0), step)
                .enumerate()
                .map(|(k, gv)| rows(k * step, k * step + gv.nrows(), Some(gv)))
                .fold(F::Exact::default(), merge),
        },
        _ => (0..n.div_ceil(step))
            .into_par_iter()
            .map(|k| rows(k * step, ((k + 1) * step).min(n), None))
            .reduce(F::Exact::default, merge),
    };
    let total = match across {
        Some(p) => p.sum_exact(&total),
        None => total.value(),
    };
    F::from_f64_lossy(total) * inv_m
}
