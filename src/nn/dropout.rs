//! Inverted dropout with an explicit RNG: on dense activations and on the stored values of
//! sparse inputs. Masks are drawn in a fixed order from the caller's RNG stream, so every run
//! replays exactly and the mask never depends on the thread count.

use ndarray::Array2;
use rand::Rng;

use crate::graph::SparseFeatures;
use crate::kernels::dropout_mask;
use crate::Scalar;

/// Returns `(x ⊙ M, M)` with M's entries 0 (probability `p`) or 1/(1−p).
///
/// # Panics
/// If `p ∉ [0, 1)`.
pub fn dropout_dense<F: Scalar, R: Rng + ?Sized>(
    mut x: Array2<F>,
    p: f64,
    rng: &mut R,
) -> (Array2<F>, Array2<F>) {
    let mut mask = Array2::<F>::zeros(x.dim());
    if let Some(m) = mask.as_slice_mut() {
        dropout_mask(rng, p, m);
    }
    x *= &mask;
    (x, mask)
}

/// Dropout on the stored values of a sparse input: the pattern is kept (dropped values become
/// explicit zeros), so Xᵀ's pattern stays valid.
pub fn dropout_sparse<F: Scalar, R: Rng + ?Sized>(
    x: &SparseFeatures<F>,
    p: f64,
    rng: &mut R,
) -> SparseFeatures<F> {
    let vals = x.x().data().to_vec();
    let mut mask = vec![F::zero(); vals.len()];
    dropout_mask(rng, p, &mut mask);
    x.with_values(vals.iter().zip(&mask).map(|(&v, &m)| v * m).collect())
}
