//! Evaluation metrics.

pub mod smoothing;

use ndarray::ArrayView2;

use crate::graph::Sums;
use crate::input::Mask;
use crate::Scalar;

/// Fraction of the mask's nodes whose arg-max logit (first index on ties) is their label.
/// An empty mask gives 0.
///
/// # Examples
/// ```
/// use ndarray::array;
/// use sparse_gcn::{data::Mask, metrics::accuracy};
/// let z = array![[0.1f32, 0.9], [0.8, 0.2], [0.3, 0.7]];
/// let m = Mask::try_from_indices(vec![0, 1, 2], 3).unwrap();
/// assert_eq!(accuracy(z.view(), &[1, 1, 1], &m), 2.0 / 3.0);
/// ```
pub fn accuracy<F: Scalar>(logits: ArrayView2<'_, F>, labels: &[u32], mask: &Mask) -> f64 {
    if mask.is_empty() {
        return 0.0;
    }
    let correct = mask
        .indices()
        .iter()
        .filter(|&&i| argmax(logits.row(i as usize).iter().copied()) == labels[i as usize] as usize)
        .count();
    correct as f64 / mask.len() as f64
}

/// [`accuracy`] over every process of a row-partitioned run: `logits`, `labels` and `mask` are
/// this process's rows, and the counts are summed across processes (through `across`). Locally
/// it is [`accuracy`].
pub(crate) fn accuracy_across<F: Scalar>(
    logits: ArrayView2<'_, F>,
    labels: &[u32],
    mask: &Mask,
    across: &Sums<'_, F>,
) -> f64 {
    let correct = mask
        .indices()
        .iter()
        .filter(|&&i| argmax(logits.row(i as usize).iter().copied()) == labels[i as usize] as usize)
        .count();
    let mut counts = [correct as u64, mask.len() as u64];
    across.sum_counts(&mut counts);
    if counts[1] == 0 {
        return 0.0;
    }
    counts[0] as f64 / counts[1] as f64
}

/// Row-wise softmax of `logits` (class probabilities), computed in f64 then rounded to f32:
/// `sparse-gcn predict`'s and the Python package's `predict_proba`.
pub fn softmax_rows(logits: ArrayView2<'_, f32>) -> ndarray::Array2<f32> {
    let mut out = ndarray::Array2::zeros(logits.dim());
    for (row, mut o) in logits.rows().into_iter().zip(out.rows_mut()) {
        let m = row
            .iter()
            .fold(f64::NEG_INFINITY, |m, &v| m.max(f64::from(v)));
        let z: f64 = row.iter().map(|&v| (f64::from(v) - m).exp()).sum();
        for (o, &v) in o.iter_mut().zip(row) {
            *o = ((f64::from(v) - m).exp() / z) as f32;
        }
    }
    out
}

/// Index of the largest value (first on ties; NaN never wins).
pub fn argmax<F: Scalar>(row: impl Iterator<Item = F>) -> usize {
    let mut best = (0usize, F::neg_infinity());
    for (k, v) in row.enumerate() {
        if v > best.1 {
            best = (k, v);
        }
    }
    best.0
}
