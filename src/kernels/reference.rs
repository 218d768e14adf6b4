//! Serial, obviously-correct oracles for every kernel: the definitions the tests compare with.

use ndarray::{Array1, Array2, ArrayView2};

use super::CsrView;
use crate::Scalar;

/// α·A·X + β·out by plain loops over `A`'s non-zeros (β = 0 ignores `out`).
pub fn spmm<F: Scalar>(
    alpha: F,
    a: CsrView<'_, F>,
    x: ArrayView2<'_, F>,
    beta: F,
    out: ArrayView2<'_, F>,
) -> Array2<F> {
    let (m, _) = a.shape();
    let d = x.ncols();
    let mut res = Array2::<F>::zeros((m, d));
    for (i, row) in a.outer_iterator().enumerate() {
        for c in 0..d {
            let mut s = F::zero();
            for (j, &v) in row.iter() {
                s += v * x[[j, c]];
            }
            let prev = if beta == F::zero() {
                F::zero()
            } else {
                beta * out[[i, c]]
            };
            res[[i, c]] = alpha * s + prev;
        }
    }
    res
}

/// α·A·B + β·out by the triple loop (β = 0 ignores `out`).
pub fn gemm<F: Scalar>(
    alpha: F,
    a: ArrayView2<'_, F>,
    b: ArrayView2<'_, F>,
    beta: F,
    out: ArrayView2<'_, F>,
) -> Array2<F> {
    let (m, k) = a.dim();
    let n = b.ncols();
    let mut res = Array2::<F>::zeros((m, n));
    for i in 0..m {
        for j in 0..n {
            let mut s = F::zero();
            for l in 0..k {
                s += a[[i, l]] * b[[l, j]];
            }
            let prev = if beta == F::zero() {
                F::zero()
            } else {
                beta * out[[i, j]]
            };
            res[[i, j]] = alpha * s + prev;
        }
    }
    res
}

/// Column sums.
pub fn col_sum<F: Scalar>(g: ArrayView2<'_, F>) -> Array1<F> {
    let mut s = Array1::zeros(g.ncols());
    for i in 0..g.nrows() {
        for j in 0..g.ncols() {
            s[j] += g[[i, j]];
        }
    }
    s
}
