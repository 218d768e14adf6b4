//! The row level of the SpMM, shared by its safe and its unsafe part: the CSR arrays as the row
//! kernels read them ([`Rows`]), the prefetch distance, the generic strided path, and the choice
//! of compile-time column-block widths for a row ([`BlockKernel`]'s provided methods and
//! [`each_row`]).
//!
//! [`kernels::spmm`](super::spmm()) splits rows into tasks and calls the serial fast-path kernel
//! of `kernels::raw` (the crate's only `unsafe` code), which implements [`BlockKernel`]'s two
//! required methods (a column block of one row, or of [`GROUP`] rows, with unchecked reads of
//! `X`). Both import this file; it imports neither, so the dependency goes one way:
//! `spmm → raw → spmm_rows`.

use std::mem::size_of;

use ndarray::{ArrayView2, ArrayViewMut1, ArrayViewMut2, Axis};

use crate::Scalar;

/// How far ahead the fast path prefetches, in bytes of gathered `X` rows: the row of the
/// non-zero `max(1, PREFETCH_BYTES / (d·size_of::<F>()))` positions ahead in the CSR arrays
/// (rows under [`WIDE_ROW_BYTES`]).
pub(crate) const PREFETCH_BYTES: usize = 4096;

/// Rows of at least this many bytes are prefetched [`PREFETCH_BYTES_WIDE`] ahead instead:
/// at d = 256 (f32) 16 rows ahead ran about 10 % faster than 4 on arxiv-like in the community
/// order (2026-12-05, alternating builds), while at d ≤ 128 a longer distance was no better.
pub(crate) const WIDE_ROW_BYTES: usize = 1024;

/// The prefetch distance of rows of at least [`WIDE_ROW_BYTES`].
pub(crate) const PREFETCH_BYTES_WIDE: usize = 16384;

/// The SpMM kernels prefetch no rows of an `X` of at most this many bytes: it stays in a core's
/// L2 (512 KiB or more on the hosts this targets), where a prefetch only costs.
pub(super) const NO_PREFETCH_BYTES: usize = 256 << 10;

/// Output rows at most this wide (one cache line) are formed [`GROUP`] at a time, their sums
/// interleaved: a row this narrow has too few independent additions per non-zero to hide
/// their latency on its own.
pub(super) const NARROW_ROW_BYTES: usize = 64;

/// Rows interleaved on the narrow path.
pub(super) const GROUP: usize = 4; // `raw`'s `block_rows` names its four accumulators

/// The CSR arrays of `A` as the row kernels read them: row `i`'s non-zeros are
/// `ip[i] - off..ip[i + 1] - off` in `idx` and `val`.
pub(super) struct Rows<'a, F> {
    pub(super) ip: &'a [usize],
    pub(super) off: usize,
    pub(super) idx: &'a [u32],
    pub(super) val: &'a [F],
}

impl<F> Rows<'_, F> {
    /// The range of row `i`'s non-zeros in `idx` and `val`.
    #[inline(always)]
    pub(super) fn range(&self, i: usize) -> (usize, usize) {
        (self.ip[i] - self.off, self.ip[i + 1] - self.off)
    }
}

/// A fast-path row kernel: one column block of compile-time width `C` of one output row, or of
/// [`GROUP`] consecutive rows, over their non-zeros (`kernels::raw` implements the two, with
/// unchecked reads of `X`). The provided methods choose the block widths a row is cut into; they
/// are `#[inline(always)]`, so that they are compiled into the kernel's builds (AVX2 included).
pub(super) trait BlockKernel<F: Scalar> {
    /// α of `out ← α·A·X + β·out`.
    fn alpha(&self) -> F;
    /// β of `out ← α·A·X + β·out`.
    fn beta(&self) -> F;
    /// Width of the tile, the output row's length.
    fn width(&self) -> usize;

    /// Columns `c0..c0 + C` of the output row `o` over the non-zeros `range`. `LD` is the row
    /// length of `X` when known at compile time (0: known at run time only).
    fn block<const C: usize, const LD: usize>(&self, range: (usize, usize), c0: usize, o: &mut [F]);

    /// Columns `c0..c0 + C` of [`GROUP`] consecutive output rows (`o`, each [`width`] wide) over
    /// their non-zeros `ranges`, each row's sum in its own stored order, as
    /// [`block`](BlockKernel::block) forms it.
    ///
    /// [`width`]: BlockKernel::width
    fn block_rows<const C: usize, const LD: usize>(
        &self,
        ranges: [(usize, usize); GROUP],
        c0: usize,
        o: &mut [F],
    );

    /// One output row: column blocks of compile-time width `W = d` cut to the register file
    /// ([`BlockKernel::blocks`]), or column blocks of any width d for `W = 0`. `LD` is `X`'s row
    /// length when known at compile time (0: known at run time only).
    #[inline(always)]
    fn row<const W: usize, const LD: usize>(&self, range: (usize, usize), o: &mut [F]) {
        if W == 0 {
            self.row_blocked(range, o);
        } else if size_of::<F>() <= 4 {
            self.blocks::<W, 64, LD>(range, o);
        } else {
            self.blocks::<W, 32, LD>(range, o);
        }
    }

    /// [`GROUP`] consecutive output rows `o` (each `self.width()` ≤ [`NARROW_ROW_BYTES`] wide) over
    /// the non-zeros `ranges`: as [`BlockKernel::row`] on each, with the rows' sums interleaved.
    #[inline(always)]
    fn rows_narrow<const W: usize, const LD: usize>(
        &self,
        ranges: [(usize, usize); GROUP],
        o: &mut [F],
    ) {
        if W != 0 {
            self.block_rows::<W, LD>(ranges, 0, o);
            return;
        }
        let d = self.width();
        let mut c0 = 0;
        if d - c0 >= 16 {
            self.block_rows::<16, 0>(ranges, c0, o);
            c0 += 16;
        }
        if d - c0 >= 8 {
            self.block_rows::<8, 0>(ranges, c0, o);
            c0 += 8;
        }
        match d - c0 {
            0 => {}
            1 => self.block_rows::<1, 0>(ranges, c0, o),
            2 => self.block_rows::<2, 0>(ranges, c0, o),
            3 => self.block_rows::<3, 0>(ranges, c0, o),
            4 => self.block_rows::<4, 0>(ranges, c0, o),
            5 => self.block_rows::<5, 0>(ranges, c0, o),
            6 => self.block_rows::<6, 0>(ranges, c0, o),
            _ => self.block_rows::<7, 0>(ranges, c0, o),
        }
    }

    /// A row of compile-time width `W` in blocks of `B` columns (`W <= B`, or `W` = 2, 4 or 8
    /// times `B`).
    #[inline(always)]
    fn blocks<const W: usize, const B: usize, const LD: usize>(
        &self,
        range: (usize, usize),
        o: &mut [F],
    ) {
        // Separate calls with constant offsets (not a loop): LLVM then keeps every block's
        // accumulators in registers.
        if W <= B {
            self.block::<W, LD>(range, 0, o);
        } else {
            self.block::<B, LD>(range, 0, o);
            self.block::<B, LD>(range, B, o);
            if W > 2 * B {
                self.block::<B, LD>(range, 2 * B, o);
                self.block::<B, LD>(range, 3 * B, o);
            }
            if W > 4 * B {
                self.block::<B, LD>(range, 4 * B, o);
                self.block::<B, LD>(range, 5 * B, o);
                self.block::<B, LD>(range, 6 * B, o);
                self.block::<B, LD>(range, 7 * B, o);
            }
            assert!(W <= 8 * B);
        }
    }

    /// A row of any width d: column blocks of 64 (32 for f64), then at most one each of 32,
    /// 16 and 8, then one block of the remaining 1–7 columns; every block has a compile-time
    /// width.
    #[inline(always)]
    fn row_blocked(&self, range: (usize, usize), o: &mut [F]) {
        let d = self.width();
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
}

/// Every row of `out` (rows `lo..`): [`BlockKernel::row`] of width `W` (`X`'s row length `LD`, 0
/// when known at run time only) for the contiguous ones, [`strided_row`] on the tile `x` for the
/// others. No closures: everything here is inlined into `raw::spmm_rows`'s builds, so the AVX2
/// build compiles all of it for AVX2.
#[inline(always)]
pub(super) fn each_row<F: Scalar, K: BlockKernel<F>, const W: usize, const LD: usize>(
    k: &K,
    rows: &Rows<'_, F>,
    x: ArrayView2<'_, F>,
    mut out: ArrayViewMut2<'_, F>,
    lo: usize,
) {
    let d = out.ncols();
    if let Some(s) = out.as_slice_mut() {
        let mut r0 = 0;
        if d * size_of::<F>() <= NARROW_ROW_BYTES {
            // Narrow rows: GROUP rows at a time, their sums interleaved (each row's own order
            // kept), so that one row's chain of dependent additions does not bound the loop.
            let mut groups = s.chunks_exact_mut(GROUP * d);
            for o in &mut groups {
                let ranges: [(usize, usize); GROUP] =
                    std::array::from_fn(|g| rows.range(lo + r0 + g));
                k.rows_narrow::<W, LD>(ranges, o);
                r0 += GROUP;
            }
            for (r, o) in groups.into_remainder().chunks_exact_mut(d).enumerate() {
                k.row::<W, LD>(rows.range(lo + r0 + r), o);
            }
            return;
        }
        for (r, o) in s.chunks_exact_mut(d).enumerate() {
            k.row::<W, LD>(rows.range(lo + r), o);
        }
    } else {
        for (r, mut orow) in out.rows_mut().into_iter().enumerate() {
            let (p0, p1) = rows.range(lo + r);
            match orow.as_slice_mut() {
                Some(o) => k.row::<W, LD>((p0, p1), o),
                None => strided_row(k.alpha(), rows, x, k.beta(), orow, p0, p1),
            }
        }
    }
}

/// [`each_row`] with the block width, and `X`'s row length when `whole` (the tile is all of
/// `X`), fixed at compile time for the widths the GCN takes; both at run time for the others.
#[inline(always)]
pub(super) fn each_row_of_width<F: Scalar, K: BlockKernel<F>>(
    k: &K,
    rows: &Rows<'_, F>,
    x: ArrayView2<'_, F>,
    out: ArrayViewMut2<'_, F>,
    lo: usize,
    whole: bool,
) {
    match (out.ncols(), whole) {
        (8, true) => each_row::<F, K, 8, 8>(k, rows, x, out, lo),
        (16, true) => each_row::<F, K, 16, 16>(k, rows, x, out, lo),
        (32, true) => each_row::<F, K, 32, 32>(k, rows, x, out, lo),
        (64, true) => each_row::<F, K, 64, 64>(k, rows, x, out, lo),
        (128, true) => each_row::<F, K, 128, 128>(k, rows, x, out, lo),
        (256, true) => each_row::<F, K, 256, 256>(k, rows, x, out, lo),
        (8, false) => each_row::<F, K, 8, 0>(k, rows, x, out, lo),
        (16, false) => each_row::<F, K, 16, 0>(k, rows, x, out, lo),
        (32, false) => each_row::<F, K, 32, 0>(k, rows, x, out, lo),
        (64, false) => each_row::<F, K, 64, 0>(k, rows, x, out, lo),
        (128, false) => each_row::<F, K, 128, 0>(k, rows, x, out, lo),
        _ => each_row::<F, K, 0, 0>(k, rows, x, out, lo),
    }
}

/// Non-zeros to look ahead for a gathered row of `d` elements of `F`.
#[inline]
pub(crate) fn prefetch_distance<F>(d: usize) -> usize {
    let row = (d * size_of::<F>()).max(1);
    let ahead = if row >= WIDE_ROW_BYTES {
        PREFETCH_BYTES_WIDE
    } else {
        PREFETCH_BYTES
    };
    (ahead / row).max(1)
}

/// The generic path for any strides of `x` and `out`, in the same summation order.
pub(super) fn rows_strided<F: Scalar>(
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
pub(super) fn strided_row<F: Scalar>(
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
