//! Element-wise kernels: bias, column sums, ReLU and its mask, the fused epilogue of a hidden
//! layer with dropout and its backward. The 2-bit codes
//! they keep are in `codes`, the dropout masks in `dropout` (both re-exported here).

use ndarray::{ArrayView1, ArrayView2, ArrayViewMut1, ArrayViewMut2, Axis, Zip};

use super::profile::{span, Phase, Work};
use crate::{Par, Scalar};

mod codes;
mod dropout;

pub use codes::{code_at, code_bytes, DROP_KEPT, DROP_ZERO, RELU_OFF};
pub(crate) use codes::{codes_from, zip_codes, CODES_PER_BYTE};
pub use dropout::{
    dropout_into_at, dropout_mask, fill_dropout_mask, fill_dropout_mask_at, relu_dropout_at,
    MASK_STREAM,
};

/// out ← out + 1·bᵀ (adds `b` to every row).
///
/// # Panics
/// If `out.ncols() != b.len()`.
#[track_caller]
pub fn add_bias<F: Scalar>(out: ArrayViewMut2<'_, F>, b: ArrayView1<'_, F>, par: Par) {
    assert_eq!(
        out.ncols(),
        b.len(),
        "add_bias: out {:?}, b {}",
        out.dim(),
        b.len()
    );
    let _span = span(Phase::Elementwise, || Work::Stream {
        bytes: 2 * out.len() * std::mem::size_of::<F>(),
    });
    super::rows::for_each_row(out, par, |_, mut row| row += &b);
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
    let _span = span(Phase::Reduce, || Work::Stream {
        bytes: g.len() * std::mem::size_of::<F>(),
    });
    if beta == F::zero() {
        out.fill(F::zero());
    } else {
        out.map_inplace(|o| *o *= beta);
    }
    for row in g.axis_iter(Axis(0)) {
        out += &row;
    }
}

/// z ← max(z, 0). NaN becomes 0, like every other non-positive value.
pub fn relu_inplace<F: Scalar>(z: ArrayViewMut2<'_, F>, par: Par) {
    let _span = span(Phase::Elementwise, || Work::Stream {
        bytes: 2 * z.len() * std::mem::size_of::<F>(),
    });
    // Branch-free: a select, not a data-dependent jump (the signs of activations are close to
    // random, so a branch mispredicts half the time). `NaN > 0` is false, so NaN maps to 0.
    super::rows::for_each_row(z, par, |_, mut row| {
        row.map_inplace(|v| *v = [F::zero(), *v][usize::from(*v > F::zero())]);
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
    let _span = span(Phase::Elementwise, || Work::Stream {
        bytes: 3 * dz.len() * std::mem::size_of::<F>(),
    });
    // Branch-free select, as in `relu_inplace` (NaN in `a` counts as not positive).
    Zip::from(&mut dz)
        .and(&a)
        .for_each(|g, &v| *g = [F::zero(), *g][usize::from(v > F::zero())]);
}

/// The epilogue of a hidden layer without dropout, one pass over `z`: z ← max(z + 1·bᵀ, 0)
/// (bias optional). Bit-identical to [`add_bias`] then [`relu_inplace`].
///
/// # Panics
/// If `b` does not match `z`'s width.
#[track_caller]
pub fn bias_relu<F: Scalar>(mut z: ArrayViewMut2<'_, F>, b: Option<ArrayView1<'_, F>>) {
    assert!(
        b.is_none_or(|b| b.len() == z.ncols()),
        "bias_relu: z {:?}, b {:?}",
        z.dim(),
        b.map(|b| b.len())
    );
    let _span = span(Phase::Elementwise, || Work::Stream {
        bytes: 2 * z.len() * std::mem::size_of::<F>(),
    });
    let relu = |v: F| [F::zero(), v][usize::from(v > F::zero())];
    match b {
        Some(b) => {
            for mut zr in z.axis_iter_mut(Axis(0)) {
                Zip::from(&mut zr)
                    .and(&b)
                    .for_each(|v, &bk| *v = relu(*v + bk));
            }
        }
        None => z.map_inplace(|v| *v = relu(*v)),
    }
}

/// The epilogue of a hidden layer with dropout, in place, keeping a 2-bit code per element
/// (`CODES_PER_BYTE`) instead of the activation and the mask: h ← ReLU(h + 1·bᵀ) ⊙ mask, and
/// the code of each element (row-major) [`RELU_OFF`] where ReLU(h + b) ≤ 0, else [`DROP_KEPT`]
/// or [`DROP_ZERO`] as the mask keeps or drops the element. `mask` holds inverted-dropout
/// factors (0 or `keep`, as [`dropout_mask`] draws them). The new `h` is bit for bit
/// [`add_bias`], [`relu_inplace`] and the product with the mask run one after the other, and
/// [`dropout_relu_backward_code`] with the codes gives bit for bit `𝟙(a > 0) ⊙ (dh ⊙ mask)` for
/// the ReLU output `a`.
///
/// # Panics
/// If `b` or `mask` do not match `h`'s shape, or `codes` is shorter than
/// [`code_bytes`]`(h.len())`.
#[track_caller]
pub fn bias_relu_dropout_fold<F: Scalar>(
    mut h: ArrayViewMut2<'_, F>,
    b: Option<ArrayView1<'_, F>>,
    mask: ArrayView2<'_, F>,
    codes: &mut [u8],
) {
    let _span = span(Phase::Elementwise, || Work::Stream {
        bytes: h.len() * (3 * std::mem::size_of::<F>()) + code_bytes(h.len()),
    });
    let dim = h.dim();
    assert!(
        b.is_none_or(|b| b.len() == dim.1)
            && mask.dim() == dim
            && codes.len() >= code_bytes(h.len()),
        "bias_relu_dropout_fold: h {dim:?}, b {:?}, mask {:?}, {} code bytes",
        b.map(|b| b.len()),
        mask.dim(),
        codes.len()
    );
    let relu = |v: F| [F::zero(), v][usize::from(v > F::zero())];
    let codes = &mut codes[..code_bytes(h.len())];
    codes.fill(0);
    for (i, (mut hr, mr)) in h
        .axis_iter_mut(Axis(0))
        .zip(mask.axis_iter(Axis(0)))
        .enumerate()
    {
        Zip::indexed(&mut hr).and(&mr).for_each(|j, v, &m| {
            let t = relu(match b {
                Some(b) => *v + b[j],
                None => *v,
            });
            *v = t * m;
            // Branch-free: 0 when t ≤ 0, else 1 (kept) or 2 (dropped).
            let on = u8::from(t > F::zero());
            let k = i * dim.1 + j;
            codes[k / CODES_PER_BYTE] |=
                (on * (1 + u8::from(m == F::zero()))) << (2 * (k % CODES_PER_BYTE));
        });
    }
}

/// The backward of [`bias_relu_dropout_fold`]: dz ← dz·keep where the code (packed,
/// `CODES_PER_BYTE`) is [`DROP_KEPT`], dz·0 where it is [`DROP_ZERO`] and +0 where it is
/// [`RELU_OFF`] — exactly what `[a > 0] ? dz·m : +0` computes from the mask m (0 or `keep`) and
/// the ReLU output a.
///
/// # Panics
/// If `codes` is shorter than [`code_bytes`]`(dz.len())`.
#[track_caller]
pub fn dropout_relu_backward_code<F: Scalar>(
    dz: ArrayViewMut2<'_, F>,
    codes: &[u8],
    keep: F,
    par: Par,
) {
    let _span = span(Phase::Elementwise, || Work::Stream {
        bytes: dz.len() * (2 * std::mem::size_of::<F>()) + code_bytes(dz.len()),
    });
    zip_codes(dz, codes, par, |g, c| {
        // +0 where ReLU is off, g·keep where kept, g·0 where dropped (and for the unused
        // code 3): selects, not a table, so that the loop vectorises.
        let m = if c == DROP_KEPT { keep } else { F::zero() };
        let v = *g * m;
        *g = if c == RELU_OFF { F::zero() } else { v };
    });
}

#[cfg(test)]
mod tests {
    /// `col_sum`: out ← Gᵀ·1 + β·out in row order; β = 0 overwrites (NaN in `out` does not
    /// leak), any other β scales what `out` held.
    #[test]
    fn col_sum_scales_or_overwrites_out() {
        use super::col_sum;
        use ndarray::{arr1, arr2};
        let g = arr2(&[[1.0f64, -2.0, 0.5], [3.0, 4.0, -0.25]]);
        let mut out = arr1(&[f64::NAN, f64::INFINITY, 7.0]);
        col_sum(g.view(), 0.0, out.view_mut());
        assert_eq!(out, arr1(&[4.0, 2.0, 0.25]));
        let mut out = arr1(&[2.0, -4.0, 8.0]);
        col_sum(g.view(), 0.5, out.view_mut());
        assert_eq!(out, arr1(&[5.0, 0.0, 4.25]));
        let mut out = arr1(&[2.0, -4.0, 8.0]);
        col_sum(g.view(), 1.0, out.view_mut());
        assert_eq!(out, arr1(&[6.0, -2.0, 8.25]));
        let mut out = arr1(&[2.0, -4.0, 8.0]);
        col_sum(g.view(), -3.0, out.view_mut());
        assert_eq!(out, arr1(&[-2.0, 14.0, -23.75]));
    }
}
