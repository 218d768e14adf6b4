//! Element-wise kernels: bias, column sums, ReLU and its mask, dropout masks.

use ndarray::{ArrayView1, ArrayView2, ArrayViewMut1, ArrayViewMut2, Axis, Zip};
use rand::RngExt;

use crate::Scalar;

/// out ← out + 1·bᵀ (adds `b` to every row).
///
/// # Panics
/// If `out.ncols() != b.len()`.
#[track_caller]
pub fn add_bias<F: Scalar>(mut out: ArrayViewMut2<'_, F>, b: ArrayView1<'_, F>) {
    assert_eq!(
        out.ncols(),
        b.len(),
        "add_bias: out {:?}, b {}",
        out.dim(),
        b.len()
    );
    for mut row in out.axis_iter_mut(Axis(0)) {
        row += &b;
    }
}

/// out ← Gᵀ·1 + β·out (column sums, in row order: deterministic).
///
/// # Panics
/// If `out.len() != g.ncols()`.
#[track_caller]
pub fn col_sum<F: Scalar>(g: ArrayView2<'_, F>, beta: F, mut out: ArrayViewMut1<'_, F>) {
    assert_eq!(
        out.len(),
        g.ncols(),
        "col_sum: g {:?}, out {}",
        g.dim(),
        out.len()
    );
    if beta == F::zero() {
        out.fill(F::zero());
    } else {
        out.map_inplace(|o| *o *= beta);
    }
    for row in g.axis_iter(Axis(0)) {
        out += &row;
    }
}

/// z ← max(z, 0).
pub fn relu_inplace<F: Scalar>(mut z: ArrayViewMut2<'_, F>) {
    // `max` would keep NaN; this maps NaN to 0 like every other non-positive value.
    z.map_inplace(|v| {
        if *v <= F::zero() || v.is_nan() {
            *v = F::zero();
        }
    });
}

/// dz ← dz ⊙ 𝟙(a > 0), with `a` the ReLU output (ReLU'(0) = 0).
///
/// # Panics
/// If the shapes differ.
#[track_caller]
pub fn relu_backward_inplace<F: Scalar>(mut dz: ArrayViewMut2<'_, F>, a: ArrayView2<'_, F>) {
    assert_eq!(
        dz.dim(),
        a.dim(),
        "relu_backward: dz {:?}, a {:?}",
        dz.dim(),
        a.dim()
    );
    Zip::from(&mut dz).and(&a).for_each(|g, &v| {
        if v <= F::zero() || v.is_nan() {
            *g = F::zero();
        }
    });
}

/// Fills `mask` with inverted-dropout factors: 0 with probability `p`, `1/(1-p)` otherwise.
/// Draws one uniform per element, in order, from `rng` (so the mask depends only on the RNG
/// state, never on threads).
///
/// # Panics
/// If `p` is not in `[0, 1)`.
#[track_caller]
pub fn dropout_mask<F: Scalar, R: rand::Rng + ?Sized>(rng: &mut R, p: f64, mask: &mut [F]) {
    assert!(
        (0.0..1.0).contains(&p),
        "dropout_mask: p = {p} not in [0, 1)"
    );
    let keep = F::from_f64_lossy(1.0 / (1.0 - p));
    for m in mask.iter_mut() {
        let u: f64 = rng.random();
        *m = if u < p { F::zero() } else { keep };
    }
}
