//! `spmm`: out ← α·A·X + β·out for a CSR `A` and a dense `X`.
//!
//! # How it is fast
//! SpMM on a large graph is bound by the latency of gathering the rows of `X` named by `A`'s
//! column indices (`../shared/LIMITS.md` §3), not by arithmetic; when the gathered rows are in
//! cache (a well-ordered graph), by the instructions per non-zero. The kernel therefore
//! - computes each output row in column blocks whose accumulators fit the 16 vector
//!   registers of AVX2 (64 columns of f32, 32 of f64: eight 256-bit registers), so nothing
//!   spills to the stack; each block loops over the row's non-zeros once, and the gathered
//!   `X` rows stay in L1 from one block to the next. Every block has a compile-time width:
//!   d ∈ {8, 16, 32, 64, 128, 256} is one block or 2–8 equal blocks, other widths are cut into
//!   blocks of 64 (f32 only), 32, 16 and 8 plus one block of the last 1–7 columns (no
//!   runtime-width loop);
//! - reads `X` without bounds checks in the inner loop: the column indices are checked once
//!   per task, before the loop;
//! - prefetches (`_mm_prefetch` on x86-64, nothing elsewhere) the whole `X` row of the
//!   non-zero [`PREFETCH_BYTES`] of gathered data ahead, so several gathers are in flight at
//!   once; only the first column block of a row prefetches;
//! - is compiled twice, for baseline x86-64 (SSE2) and for AVX2, and picks the AVX2 build at
//!   run time when the CPU has it. No FMA: a fused multiply-add rounds once instead of twice
//!   and would change the bits.
//!
//! That fast path needs `X` in standard (row-major, contiguous) layout and `out` with contiguous
//! rows; any other strides take a generic, slower path with the same results.
//!
//! # Summation order
//! Every path computes each output element in the same order, so results are identical bit
//! for bit across paths, column blocks and thread counts:
//! `o ← 0` (β = 0), `o ← out` (β = 1) or `o ← out·β`; then `o ← o + (α·a_ij)·x_jc` for the
//! non-zeros `j` of the row in stored order (a separate multiply and add, never fused).
//!
//! The only `unsafe` here is the prefetch hint, the call of the AVX2 build after the CPU
//! check, and the unchecked reads of `X` rows in the inner loop (after the index check).
#![allow(unsafe_code)]

use std::mem::size_of;

use ndarray::{ArrayView2, ArrayViewMut1, ArrayViewMut2, Axis};

use super::{shape_panic, CsrView};
use crate::{Par, Scalar};

/// A task is split further while it has more than this many multiply-adds (≈ (nnz + rows)·d).
/// Splitting depends on the data only, never on the thread count.
pub const SPMM_TASK_WORK: usize = 1 << 16;

/// How far ahead the fast path prefetches, in bytes of gathered `X` rows: the row of the
/// non-zero `max(1, PREFETCH_BYTES / (d·size_of::<F>()))` positions ahead in the CSR arrays.
pub const PREFETCH_BYTES: usize = 4096;

/// Cache line size assumed by the prefetch loop.
const LINE: usize = 64;

/// out ← α·A·X + β·out, sparse A (CSR, `u32` indices) times dense X.
///
/// Rows of `out` are split into rayon tasks balanced by non-zeros (row-pointer prefix sums);
/// each output row is written by one task in the serial order, so the result is bit-identical
/// for any thread count. β = 0 overwrites `out` without reading it.
///
/// Each element is computed as `o ← β·out` (exactly 0 for β = 0, `out` for β = 1), then
/// `o ← o + (α·a_ij)·x_jc` over the row's non-zeros in stored order, whatever the layout,
/// width or thread count (see the [module docs](self)).
///
/// # Shapes
/// `a: m×k`, `x: k×d`, `out: m×d`. Any strides for `x` and `out`; a row-major contiguous `x`
/// and contiguous rows of `out` take the fast path.
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

impl<F> Rows<'_, F> {
    /// The range of row `i`'s non-zeros in `idx` and `val`.
    #[inline(always)]
    fn range(&self, i: usize) -> (usize, usize) {
        (self.ip[i] - self.off, self.ip[i + 1] - self.off)
    }
}

/// Work of rows `lo..hi` in units of d: non-zeros plus one per row (the write of the row).
#[inline]
fn work(ip: &[usize], lo: usize, hi: usize) -> usize {
    (ip[hi] - ip[lo]) + (hi - lo)
}

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

/// The serial kernel on rows `lo..lo + out.nrows()`, compiled for AVX2 when the CPU has it
/// (checked at run time, once; the result is cached by `std`). Multiplies and adds stay
/// separate instructions in both builds (Rust never fuses them), so both give the same bits.
fn rows_kernel<F: Scalar>(
    alpha: F,
    rows: &Rows<'_, F>,
    x: ArrayView2<'_, F>,
    beta: F,
    out: ArrayViewMut2<'_, F>,
    lo: usize,
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked just above; that is the only requirement of
        // a `#[target_feature(enable = "avx2")]` function.
        unsafe { rows_kernel_avx2(alpha, rows, x, beta, out, lo) };
        return;
    }
    rows_kernel_any(alpha, rows, x, beta, out, lo);
}

/// [`rows_kernel_any`] compiled with AVX2 (256-bit vectors: half the instructions of the
/// baseline x86-64 build's 128-bit SSE2).
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn rows_kernel_avx2<F: Scalar>(
    alpha: F,
    rows: &Rows<'_, F>,
    x: ArrayView2<'_, F>,
    beta: F,
    out: ArrayViewMut2<'_, F>,
    lo: usize,
) {
    rows_kernel_any(alpha, rows, x, beta, out, lo);
}

/// The serial kernel for any CPU: the fast path when `x` is row-major contiguous (for each row
/// of `out` that is contiguous), the generic strided path otherwise. Inlined into
/// [`rows_kernel`] and its AVX2 build.
#[inline(always)]
fn rows_kernel_any<F: Scalar>(
    alpha: F,
    rows: &Rows<'_, F>,
    x: ArrayView2<'_, F>,
    beta: F,
    out: ArrayViewMut2<'_, F>,
    lo: usize,
) {
    let d = x.ncols();
    if d == 0 || out.nrows() == 0 {
        return;
    }
    let Some(xs) = x.as_slice() else {
        rows_strided(alpha, rows, x, beta, out, lo);
        return;
    };
    // Every column index of the task's non-zeros must name a row of `X`, so that
    // `Fast::block` may read `X` without bounds checks. `CsrView` guarantees it already; this
    // is one cheap pass over the task's indices.
    let (p_lo, p_hi) = (rows.range(lo).0, rows.range(lo + out.nrows() - 1).1);
    let jmax = rows.idx[p_lo..p_hi].iter().fold(0u32, |m, &j| m.max(j));
    assert!(
        p_lo == p_hi || (jmax as usize) < x.nrows(),
        "spmm: column index out of range"
    );
    let k = Fast {
        alpha,
        beta,
        idx: rows.idx,
        val: rows.val,
        xs,
        d,
        dist: prefetch_distance::<F>(d),
    };
    match d {
        8 => each_row::<F, 8>(&k, rows, x, out, lo),
        16 => each_row::<F, 16>(&k, rows, x, out, lo),
        32 => each_row::<F, 32>(&k, rows, x, out, lo),
        64 => each_row::<F, 64>(&k, rows, x, out, lo),
        128 => each_row::<F, 128>(&k, rows, x, out, lo),
        256 => each_row::<F, 256>(&k, rows, x, out, lo),
        _ => each_row::<F, 0>(&k, rows, x, out, lo),
    }
}

/// Non-zeros to look ahead for a gathered row of `d` elements of `F`.
#[inline]
fn prefetch_distance<F>(d: usize) -> usize {
    (PREFETCH_BYTES / (d * size_of::<F>()).max(1)).max(1)
}

/// Every row of `out` (rows `lo..`): [`Fast::row`] of width `W` for the contiguous ones,
/// [`strided_row`] for the others. No closures: everything here is inlined into
/// [`rows_kernel`]'s builds, so the AVX2 build compiles all of it for AVX2.
#[inline(always)]
fn each_row<F: Scalar, const W: usize>(
    k: &Fast<'_, F>,
    rows: &Rows<'_, F>,
    x: ArrayView2<'_, F>,
    mut out: ArrayViewMut2<'_, F>,
    lo: usize,
) {
    let d = out.ncols();
    if let Some(s) = out.as_slice_mut() {
        for (r, o) in s.chunks_exact_mut(d).enumerate() {
            k.row::<W>(rows.range(lo + r), o);
        }
    } else {
        for (r, mut orow) in out.rows_mut().into_iter().enumerate() {
            let (p0, p1) = rows.range(lo + r);
            match orow.as_slice_mut() {
                Some(o) => k.row::<W>((p0, p1), o),
                None => strided_row(k.alpha, rows, x, k.beta, orow, p0, p1),
            }
        }
    }
}

/// The fast path's operands: contiguous row-major `X` (`xs`, `d` columns).
struct Fast<'a, F> {
    alpha: F,
    beta: F,
    idx: &'a [u32],
    val: &'a [F],
    xs: &'a [F],
    d: usize,
    /// Prefetch distance in non-zeros.
    dist: usize,
}

impl<F: Scalar> Fast<'_, F> {
    /// One output row: column blocks of compile-time width `W = d` cut to the register file
    /// ([`Fast::blocks`]), or column blocks of any width d for `W = 0`.
    #[inline(always)]
    fn row<const W: usize>(&self, range: (usize, usize), o: &mut [F]) {
        if W == 0 {
            self.row_blocked(range, o);
        } else if size_of::<F>() <= 4 {
            self.blocks::<W, 64>(range, o);
        } else {
            self.blocks::<W, 32>(range, o);
        }
    }

    /// A row of compile-time width `W` in blocks of `B` columns (`W <= B`, or `W` = 2, 4 or 8
    /// times `B`).
    #[inline(always)]
    fn blocks<const W: usize, const B: usize>(&self, range: (usize, usize), o: &mut [F]) {
        // Separate calls with constant offsets (not a loop): LLVM then keeps every block's
        // accumulators in registers.
        if W <= B {
            self.block::<W, W>(range, 0, o);
        } else {
            self.block::<B, W>(range, 0, o);
            self.block::<B, W>(range, B, o);
            if W > 2 * B {
                self.block::<B, W>(range, 2 * B, o);
                self.block::<B, W>(range, 3 * B, o);
            }
            if W > 4 * B {
                self.block::<B, W>(range, 4 * B, o);
                self.block::<B, W>(range, 5 * B, o);
                self.block::<B, W>(range, 6 * B, o);
                self.block::<B, W>(range, 7 * B, o);
            }
            assert!(W <= 8 * B);
        }
    }

    /// A row of any width d: column blocks of 64 (32 for f64), then at most one each of 32,
    /// 16 and 8, then one block of the remaining 1–7 columns; every block has a compile-time
    /// width.
    #[inline(always)]
    fn row_blocked(&self, range: (usize, usize), o: &mut [F]) {
        let d = self.d;
        let mut c0 = 0;
        if size_of::<F>() <= 4 {
            while d - c0 >= 64 {
                self.block::<64, 0>(range, c0, o);
                c0 += 64;
            }
        }
        while d - c0 >= 32 {
            self.block::<32, 0>(range, c0, o);
            c0 += 32;
        }
        if d - c0 >= 16 {
            self.block::<16, 0>(range, c0, o);
            c0 += 16;
        }
        if d - c0 >= 8 {
            self.block::<8, 0>(range, c0, o);
            c0 += 8;
        }
        match d - c0 {
            0 => {}
            1 => self.block::<1, 0>(range, c0, o),
            2 => self.block::<2, 0>(range, c0, o),
            3 => self.block::<3, 0>(range, c0, o),
            4 => self.block::<4, 0>(range, c0, o),
            5 => self.block::<5, 0>(range, c0, o),
            6 => self.block::<6, 0>(range, c0, o),
            _ => self.block::<7, 0>(range, c0, o),
        }
    }

    /// Columns `c0..c0 + C` of the output row `o` over the non-zeros `p0..p1`, in a C-wide
    /// accumulator that fits the vector registers. `LD` is the row length d of `X` when known
    /// at compile time (0: the runtime `self.d`). Only the first block of a row (`c0 = 0`)
    /// prefetches, whole rows of `X`; later blocks find them in cache.
    ///
    /// Every index of `p0..p1` must be below `xs.len() / ld` (checked in [`rows_kernel_any`]).
    #[inline(always)]
    fn block<const C: usize, const LD: usize>(
        &self,
        (p0, p1): (usize, usize),
        c0: usize,
        o: &mut [F],
    ) {
        let ld = if LD == 0 { self.d } else { LD };
        let (alpha, beta, xs) = (self.alpha, self.beta, self.xs);
        let o = &mut o[c0..c0 + C];
        assert!(c0 + C <= ld);
        let mut acc = [F::zero(); C];
        if beta == F::one() {
            acc.copy_from_slice(o);
        } else if beta != F::zero() {
            for (a, &v) in acc.iter_mut().zip(o.iter()) {
                *a = v * beta;
            }
        }
        let pf_base = xs.as_ptr();
        for (q, (&j, &v)) in self.idx[p0..p1].iter().zip(&self.val[p0..p1]).enumerate() {
            if c0 == 0 {
                if let Some(&jn) = self.idx.get(p0 + q + self.dist) {
                    prefetch_elems(pf_base.wrapping_add(jn as usize * ld), ld);
                }
            }
            let w = alpha * v;
            let start = j as usize * ld + c0;
            // SAFETY: `rows_kernel_any` checked `j < k` for every index of the task, where
            // `k·ld = xs.len()`, and `c0 + C <= ld` is asserted above, so
            // `start + C = j·ld + c0 + C <= (k - 1)·ld + ld = xs.len()`: the C elements from
            // `start` lie inside `xs`. `[F; C]` has the alignment of `F`.
            let xr = unsafe { &*xs.as_ptr().add(start).cast::<[F; C]>() };
            for c in 0..C {
                acc[c] += w * xr[c];
            }
        }
        o.copy_from_slice(&acc);
    }
}

/// Prefetches the cache lines of `len` elements starting at `p` (a hint: `p` need not point
/// into a live allocation).
#[inline(always)]
fn prefetch_elems<F>(p: *const F, len: usize) {
    let bytes = len * size_of::<F>();
    if bytes == 0 {
        return;
    }
    let p = p.cast::<u8>();
    let mut b = 0;
    while b < bytes {
        prefetch_line(p.wrapping_add(b));
        b += LINE;
    }
    // The last line, when the row does not start on a line boundary.
    prefetch_line(p.wrapping_add(bytes - 1));
}

#[inline(always)]
fn prefetch_line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` only requires the `sse` target feature, which every x86-64 target
    // has. A prefetch is a hint: it never faults and has no effect on program semantics, even
    // for an address outside any allocation.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The generic path for any strides of `x` and `out`, in the same summation order.
fn rows_strided<F: Scalar>(
    alpha: F,
    rows: &Rows<'_, F>,
    x: ArrayView2<'_, F>,
    beta: F,
    mut out: ArrayViewMut2<'_, F>,
    lo: usize,
) {
    for (r, orow) in out.axis_iter_mut(Axis(0)).enumerate() {
        let (p0, p1) = rows.range(lo + r);
        strided_row(alpha, rows, x, beta, orow, p0, p1);
    }
}

/// One row of the generic path: `orow ← β·orow`, then `orow += (α·a_ij)·x_j` for the
/// non-zeros `p0..p1`.
fn strided_row<F: Scalar>(
    alpha: F,
    rows: &Rows<'_, F>,
    x: ArrayView2<'_, F>,
    beta: F,
    mut orow: ArrayViewMut1<'_, F>,
    p0: usize,
    p1: usize,
) {
    if beta == F::zero() {
        orow.fill(F::zero());
    } else if beta != F::one() {
        orow.map_inplace(|o| *o *= beta);
    }
    for (&j, &v) in rows.idx[p0..p1].iter().zip(&rows.val[p0..p1]) {
        let w = alpha * v;
        orow.zip_mut_with(&x.row(j as usize), |o, &xv| *o += w * xv);
    }
}

impl<F: Scalar> Copy for Rows<'_, F> {}
impl<F: Scalar> Clone for Rows<'_, F> {
    fn clone(&self) -> Self {
        *self
    }
}

#[cfg(test)]
mod tests {
    use ndarray::{s, Array2};

    use super::*;
    use crate::kernels::Csr;

    /// A 4×5 CSR with an empty row and a row of all columns.
    fn small() -> Csr<f32> {
        Csr::new(
            (4, 5),
            vec![0, 2, 2, 7, 8],
            vec![1, 4, 0, 1, 2, 3, 4, 2],
            vec![0.5, -1.25, 3.0, 0.1, -0.7, 2.0, 0.3, 1.5],
        )
    }

    fn x(d: usize) -> Array2<f32> {
        Array2::from_shape_fn((5, d), |(i, c)| ((i * 31 + c * 7) % 13) as f32 * 0.37 - 2.0)
    }

    #[test]
    fn prefetch_distance_is_about_4_kib_of_rows() {
        assert_eq!(prefetch_distance::<f32>(16), 64);
        assert_eq!(prefetch_distance::<f32>(256), 4);
        assert_eq!(prefetch_distance::<f64>(256), 2);
        assert_eq!(prefetch_distance::<f32>(100_000), 1);
    }

    /// Fast path (contiguous `out`), per-row fallback (strided columns of `out`) and the
    /// generic path (strided `x`) agree bit for bit for every block shape.
    #[test]
    fn fast_and_strided_paths_agree_bitwise() {
        let a = small();
        for d in [1, 3, 7, 8, 9, 16, 40, 64, 71, 128, 130, 256] {
            let x = x(d);
            let out0 = Array2::from_shape_fn((4, d), |(i, c)| (i + c) as f32 * 0.25 - 1.0);
            for (alpha, beta) in [(1.0f32, 0.0f32), (-0.75, 1.0), (2.5, 0.5)] {
                let mut fast = out0.clone();
                spmm(alpha, a.view(), x.view(), beta, fast.view_mut(), Par::Seq);

                let mut wide = Array2::from_elem((4, 2 * d), f32::NAN);
                wide.slice_mut(s![.., ..;2]).assign(&out0);
                spmm(
                    alpha,
                    a.view(),
                    x.view(),
                    beta,
                    wide.slice_mut(s![.., ..;2]),
                    Par::Seq,
                );

                let xt = x.t().as_standard_layout().into_owned();
                let mut generic = out0.clone();
                spmm(alpha, a.view(), xt.t(), beta, generic.view_mut(), Par::Seq);

                let bits = |m: ndarray::ArrayView2<'_, f32>| -> Vec<u32> {
                    m.iter().map(|v| v.to_bits()).collect()
                };
                assert_eq!(bits(fast.view()), bits(wide.slice(s![.., ..;2])), "d = {d}");
                assert_eq!(bits(fast.view()), bits(generic.view()), "d = {d}");
                assert!(wide.slice(s![.., 1..;2]).iter().all(|v| v.is_nan()));
            }
        }
    }

    /// A seeded random CSR of `m×k` with 0–40 non-zeros per row (some rows empty) and values
    /// of mixed sign and magnitude, so that rounding differs with the summation order.
    fn random_csr<F: Scalar>(m: usize, k: usize, seed: u64) -> Csr<F> {
        let mut s = seed;
        let mut next = move || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 33) as usize
        };
        let (mut ip, mut idx, mut val) = (vec![0], vec![], vec![]);
        for _ in 0..m {
            let nnz = if next() % 5 == 0 { 0 } else { next() % 41 };
            let mut cols: Vec<u32> = (0..nnz).map(|_| (next() % k) as u32).collect();
            cols.sort_unstable();
            cols.dedup();
            for c in cols {
                idx.push(c);
                let v = (next() % 2001) as f64 / 997.0 - 1.0;
                val.push(F::from_f64_lossy(v * 10f64.powi((next() % 7) as i32 - 3)));
            }
            ip.push(idx.len());
        }
        Csr::new((m, k), ip, idx, val)
    }

    /// The register-sized column blocks and the unchecked reads give the same bits as the
    /// generic strided path (the reference summation order) for f32 and f64, every block
    /// shape, α, β and 1 or 2 threads.
    fn blocked_matches_strided<F: Scalar>() {
        let a = random_csr::<F>(300, 257, 7);
        for d in [1, 7, 8, 16, 32, 40, 64, 65, 100, 128, 130, 192, 256, 257] {
            let x = Array2::from_shape_fn((257, d), |(i, c)| {
                F::from_f64_lossy(((i * 131 + c * 71) % 1009) as f64 / 101.0 - 5.0)
            });
            let xt = x.t().as_standard_layout().into_owned();
            let out0 = Array2::from_shape_fn((300, d), |(i, c)| {
                F::from_f64_lossy(((i * 17 + c * 29) % 113) as f64 / 7.0 - 8.0)
            });
            for (alpha, beta) in [(1.0, 0.0), (-0.75, 1.0), (2.5, 0.5), (0.3, -1.7)] {
                let (alpha, beta) = (F::from_f64_lossy(alpha), F::from_f64_lossy(beta));
                let mut generic = out0.clone();
                spmm(alpha, a.view(), xt.t(), beta, generic.view_mut(), Par::Seq);
                for par in [Par::Seq, Par::Rayon] {
                    let mut fast = out0.clone();
                    let pool = rayon::ThreadPoolBuilder::new()
                        .num_threads(2)
                        .build()
                        .unwrap();
                    pool.install(|| spmm(alpha, a.view(), x.view(), beta, fast.view_mut(), par));
                    let same = fast.iter().zip(generic.iter()).all(|(u, v)| {
                        u.to_f64_lossless().to_bits() == v.to_f64_lossless().to_bits()
                    });
                    assert!(same, "d = {d}, {par:?}");
                }
            }
        }
    }

    #[test]
    fn blocked_matches_strided_bitwise_f32() {
        blocked_matches_strided::<f32>();
    }

    #[test]
    fn blocked_matches_strided_bitwise_f64() {
        blocked_matches_strided::<f64>();
    }
}
