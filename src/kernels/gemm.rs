//! `gemm`: out ← α·A·B + β·out through matrixmultiply, parallel over row blocks of `out`.
//!
//! This file splits `out` into row blocks; the call of matrixmultiply on one block
//! (`sgemm` / `dgemm` by [`Scalar::KIND`]) is in `kernels::raw`, the crate's only `unsafe`
//! code.

use ndarray::{ArrayView2, ArrayViewMut2, Axis};

use super::{raw, shape_panic};
use crate::{Par, Scalar};

/// Blocks of `out` are split in halves while they have more rows than this and more than
/// [`GEMM_TASK_FLOPS`] multiply-adds. The split depends only on the shapes, never on the
/// thread count, so results are bit-identical for any thread count.
pub const GEMM_MIN_ROWS: usize = 256;
/// See [`GEMM_MIN_ROWS`].
pub const GEMM_TASK_FLOPS: usize = 1 << 20;

/// out ← α·A·B + β·out. Any strides: transposes are free (`a.t()`).
///
/// matrixmultiply's own threading stays off; under [`Par::Rayon`] the rows of `out` are split
/// into blocks (halving while a block has more than [`GEMM_MIN_ROWS`] rows and
/// [`GEMM_TASK_FLOPS`] multiply-adds), one single-threaded GEMM per block. β = 0 never reads
/// `out`.
///
/// # Shapes
/// `a: m×k`, `b: k×n`, `out: m×n`.
///
/// # Panics
/// If the shapes do not agree.
///
/// # Complexity
/// O(m·k·n) time, no allocation.
///
/// # Examples
/// ```
/// use ndarray::{array, Array2};
/// use sparse_gcn::{kernels::gemm, Par};
/// let a = array![[1.0f64, 2.0], [3.0, 4.0]];
/// let mut out = Array2::zeros((2, 2));
/// gemm(1.0, a.view(), a.t(), 0.0, out.view_mut(), Par::Seq); // A·Aᵀ
/// assert_eq!(out, array![[5.0, 11.0], [11.0, 25.0]]);
/// ```
#[track_caller]
pub fn gemm<F: Scalar>(
    alpha: F,
    a: ArrayView2<'_, F>,
    b: ArrayView2<'_, F>,
    beta: F,
    out: ArrayViewMut2<'_, F>,
    par: Par,
) {
    let ((m, k), (k2, n)) = (a.dim(), b.dim());
    if k != k2 || out.dim() != (m, n) {
        shape_panic(
            "gemm",
            &[("a", a.dim()), ("b", b.dim()), ("out", out.dim())],
        );
    }
    let _span = super::profile::span(super::profile::Phase::Gemm, || super::profile::Work::Gemm {
        m,
        k,
        n,
    });
    blocks(alpha, a, b, beta, out, par);
}

fn blocks<F: Scalar>(
    alpha: F,
    a: ArrayView2<'_, F>,
    b: ArrayView2<'_, F>,
    beta: F,
    out: ArrayViewMut2<'_, F>,
    par: Par,
) {
    let (m, k) = a.dim();
    let n = b.ncols();
    if m > GEMM_MIN_ROWS && m.saturating_mul(k).saturating_mul(n) > GEMM_TASK_FLOPS {
        let mid = (m / 2).next_multiple_of(8).min(m - 1);
        let (a0, a1) = a.split_at(Axis(0), mid);
        let (o0, o1) = out.split_at(Axis(0), mid);
        par.join(
            || blocks(alpha, a0, b, beta, o0, par),
            || blocks(alpha, a1, b, beta, o1, par),
        );
    } else {
        raw::gemm_block(alpha, a, b, beta, out);
    }
}
