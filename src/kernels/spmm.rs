//! `spmm`: out ← α·A·X + β·out for a CSR `A` and a dense `X`.

use ndarray::{ArrayView2, ArrayViewMut2, Axis};

use super::{shape_panic, CsrView};
use crate::{Par, Scalar};

/// A task is split further while it has more than this many multiply-adds (≈ (nnz + rows)·d).
/// Splitting depends on the data only, never on the thread count.
pub const SPMM_TASK_WORK: usize = 1 << 16;

/// out ← α·A·X + β·out, sparse A (CSR, `u32` indices) times dense X.
///
/// Rows of `out` are split into rayon tasks balanced by non-zeros (row-pointer prefix sums);
/// each output row is written by one task in the serial order, so the result is bit-identical
/// for any thread count. β = 0 overwrites `out` without reading it.
///
/// # Shapes
/// `a: m×k`, `x: k×d`, `out: m×d`. Any strides for `x` and `out`; contiguous rows are fastest.
///
/// # Panics
/// If the shapes do not agree.
///
/// # Complexity
/// O(nnz·d) time, no allocation.
///
/// # Examples
/// ```
/// use ndarray::{array, Array2};
/// use sparse_gcn::{kernels::{spmm, Csr}, Par};
/// // A = [[1, 2], [0, 3]]
/// let a = Csr::<f32>::new((2, 2), vec![0, 2, 3], vec![0, 1, 1], vec![1.0, 2.0, 3.0]);
/// let x = array![[1.0f32, 0.0], [0.0, 1.0]];
/// let mut out = Array2::<f32>::from_elem((2, 2), f32::NAN); // never read: β = 0
/// spmm(1.0, a.view(), x.view(), 0.0, out.view_mut(), Par::Rayon);
/// assert_eq!(out, array![[1.0, 2.0], [0.0, 3.0]]);
/// ```
#[track_caller]
pub fn spmm<F: Scalar>(
    alpha: F,
    a: CsrView<'_, F>,
    x: ArrayView2<'_, F>,
    beta: F,
    out: ArrayViewMut2<'_, F>,
    par: Par,
) {
    let (m, k) = a.shape();
    if !a.is_csr() || x.nrows() != k || out.dim() != (m, x.ncols()) {
        shape_panic("spmm", &[("a", (m, k)), ("x", x.dim()), ("out", out.dim())]);
    }
    let ip = a.indptr();
    let ip = ip.raw_storage();
    let off = ip[0];
    let rows = Rows {
        ip,
        off,
        idx: a.indices(),
        val: a.data(),
    };
    let d = x.ncols().max(1);
    split(alpha, &rows, x, beta, out, 0, m, d, par);
}

struct Rows<'a, F> {
    ip: &'a [usize],
    off: usize,
    idx: &'a [u32],
    val: &'a [F],
}

/// Work of rows `lo..hi` in units of d: non-zeros plus one per row (the write of the row).
#[inline]
fn work(ip: &[usize], lo: usize, hi: usize) -> usize {
    (ip[hi] - ip[lo]) + (hi - lo)
}

#[allow(clippy::too_many_arguments)]
fn split<F: Scalar>(
    alpha: F,
    rows: &Rows<'_, F>,
    x: ArrayView2<'_, F>,
    beta: F,
    out: ArrayViewMut2<'_, F>,
    lo: usize,
    hi: usize,
    d: usize,
    par: Par,
) {
    let w = work(rows.ip, lo, hi);
    if par == Par::Seq || hi - lo < 2 || w.saturating_mul(d) <= SPMM_TASK_WORK {
        rows_kernel(alpha, rows, x, beta, out, lo);
        return;
    }
    // The row where (nnz + rows) crosses half of this range's work: a monotone function of r.
    let half = w / 2;
    let mid = lo + (lo..hi).collect_mid(|r| work(rows.ip, lo, r) <= half);
    let mid = mid.clamp(lo + 1, hi - 1);
    let (top, bottom) = out.split_at(Axis(0), mid - lo);
    rayon::join(
        || split(alpha, rows, x, beta, top, lo, mid, d, par),
        || split(alpha, rows, x, beta, bottom, mid, hi, d, par),
    );
}

/// Binary search for the number of leading rows satisfying a monotone predicate, without
/// allocating.
trait CollectMid {
    fn collect_mid(self, pred: impl Fn(usize) -> bool) -> usize;
}
impl CollectMid for std::ops::Range<usize> {
    fn collect_mid(self, pred: impl Fn(usize) -> bool) -> usize {
        let (mut a, mut b) = (self.start, self.end);
        while a < b {
            let m = a + (b - a) / 2;
            if pred(m) {
                a = m + 1;
            } else {
                b = m;
            }
        }
        a - self.start
    }
}

/// The serial kernel on rows `lo..lo + out.nrows()`.
fn rows_kernel<F: Scalar>(
    alpha: F,
    rows: &Rows<'_, F>,
    x: ArrayView2<'_, F>,
    beta: F,
    mut out: ArrayViewMut2<'_, F>,
    lo: usize,
) {
    let d = x.ncols();
    if d == 0 {
        return;
    }
    let Rows { ip, off, idx, val } = *rows;
    let xs = x.as_slice();
    for (r, mut orow) in out.axis_iter_mut(Axis(0)).enumerate() {
        let i = lo + r;
        if beta == F::zero() {
            orow.fill(F::zero());
        } else if beta != F::one() {
            orow.map_inplace(|o| *o *= beta);
        }
        let range = (ip[i] - off)..(ip[i + 1] - off);
        match (orow.as_slice_mut(), xs) {
            (Some(o), Some(xs)) => {
                for (&j, &v) in idx[range.clone()].iter().zip(&val[range]) {
                    let w = alpha * v;
                    let j = j as usize;
                    let xr = &xs[j * d..j * d + d];
                    for (o, &xv) in o.iter_mut().zip(xr) {
                        *o += w * xv;
                    }
                }
            }
            (_, _) => {
                for (&j, &v) in idx[range.clone()].iter().zip(&val[range]) {
                    let w = alpha * v;
                    orow.zip_mut_with(&x.row(j as usize), |o, &xv| *o += w * xv);
                }
            }
        }
    }
}

impl<F: Scalar> Copy for Rows<'_, F> {}
impl<F: Scalar> Clone for Rows<'_, F> {
    fn clone(&self) -> Self {
        *self
    }
}
