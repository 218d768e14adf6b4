//! The crate's only `unsafe` code, each piece behind a safe function whose preconditions are
//! asserted at its entry, so that no caller can make it unsound:
//! - [`gemm_block`]: matrixmultiply's `sgemm` / `dgemm` on ndarray views, by [`Scalar::KIND`];
//! - [`gemm_packed`]: the packed GEMM's AVX-512 and AVX2 micro-kernels for the tall and skinny
//!   f32 products, the same bits as matrixmultiply (in `raw/packed.rs`, a child of this module;
//!   its operands, safe, in `kernels::packed`);
//! - [`spmm_rows`]: the serial SpMM row kernel — the AVX2 build chosen at run time, the
//!   unchecked reads of `X` rows in the inner loop, the prefetch hint (the safe splitting is in
//!   [`kernels::spmm`](mod@super::spmm), the block widths and the strided path in
//!   `kernels::spmm_rows`, which imports nothing from here);
//! - [`widest`]: a closure compiled for the widest vector instructions the CPU has, for kernels
//!   whose bits do not depend on them;
//! - [`fma_chains`]: the FMA peak's loop of independent vector FMAs in AVX-512 or AVX2
//!   intrinsics, for `roofline` (a safe `mul_add` loop compiled under [`widest`] becomes
//!   gathers and scatters in LLVM's AVX-512 build);
//! - [`prefetch_slice`] / [`prefetch_at`]: prefetch hints for random reads;
//! - [`copy_streaming`] / [`store_fence`]: a copy with non-temporal stores, for gathers whose
//!   result is larger than the caches;
//! - [`advise_slice`]: huge-page advice (`madvise`) for big buffers;
//! - [`map_readonly`]: a file memory-mapped read-only (the graph store's arrays).
//!
//! Every `unsafe` block carries a `// SAFETY:` comment naming the invariant it relies on and
//! why it holds. The crate denies `unsafe_code` everywhere else (`Cargo.toml`); this module's
//! `#![allow]` covers its children (`raw/packed.rs`, and the tests).
#![allow(unsafe_code)]

use std::any::Any;
use std::mem::size_of;

use ndarray::{ArrayView2, ArrayViewMut2};

use super::spmm_rows::{
    each_row_of_width, prefetch_distance, rows_strided, BlockKernel, Rows, GROUP, NO_PREFETCH_BYTES,
};
use crate::scalar::ScalarKind;
use crate::Scalar;

/// Cache line size assumed by the prefetch loops.
const LINE: usize = 64;

// ---------------------------------------------------------------------------------------------
// GEMM

/// `out ← α·A·B + β·out` in one single-threaded matrixmultiply call (`sgemm` for f32, `dgemm`
/// for f64, chosen by [`Scalar::KIND`]). Any strides. β = 0 never reads `out`.
///
/// Safe for any arguments. Preconditions, asserted: `a: m×k`, `b: k×n`, `out: m×n`, and `F` is
/// the type [`Scalar::KIND`] names. The views being live ndarray views supplies the rest of
/// matrixmultiply's contract (in-bounds pointers and strides; `out`, a unique borrow, aliases
/// neither `a` nor `b`).
///
/// # Panics
/// If the shapes do not agree, or `F::KIND` is not `F`'s type.
#[track_caller]
pub(super) fn gemm_block<F: Scalar>(
    alpha: F,
    a: ArrayView2<'_, F>,
    b: ArrayView2<'_, F>,
    beta: F,
    mut out: ArrayViewMut2<'_, F>,
) {
    let ((m, k), n) = (a.dim(), b.ncols());
    assert!(
        b.nrows() == k && out.dim() == (m, n),
        "gemm: shapes do not agree (a: {m}×{k}, b: {}×{n}, out: {}×{})",
        b.nrows(),
        out.nrows(),
        out.ncols()
    );
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if beta == F::zero() {
            out.fill(F::zero());
        } else {
            out.map_inplace(|o| *o *= beta);
        }
        return;
    }
    let (sa, sb) = (a.strides(), b.strides());
    let so = [out.strides()[0], out.strides()[1]];
    let (pa, pb, pc) = (a.as_ptr(), b.as_ptr(), out.as_mut_ptr());
    // One matrixmultiply routine, `$gemm`, on `$t`, `F`'s type (else a panic).
    macro_rules! call {
        ($gemm:path, $t:ty) => {{
            let (Some(alpha), Some(beta)) = (cast::<F, $t>(alpha), cast::<F, $t>(beta)) else {
                kind_panic::<F>(stringify!($t))
            };
            let (pa, pb, pc) = (pa.cast::<$t>(), pb.cast::<$t>(), pc.cast::<$t>());
            // SAFETY: `F` is `$t` (the downcasts above succeeded), so the pointer casts are
            // identities. `a`, `b` and `out` are live ndarray views, so their pointers and
            // element strides describe in-bounds memory of shapes m×k, k×n and m×n (all
            // non-zero here, asserted to agree above). `out` is a unique mutable borrow, so it
            // cannot alias `a` or `b`; the row blocks handed to parallel tasks come from
            // `split_at`, so they are disjoint. β = 0 makes matrixmultiply overwrite `out`
            // without reading it.
            unsafe {
                $gemm(
                    m, k, n, alpha, pa, sa[0], sa[1], pb, sb[0], sb[1], beta, pc, so[0], so[1],
                )
            }
        }};
    }
    match F::KIND {
        ScalarKind::F32 => call!(matrixmultiply::sgemm, f32),
        ScalarKind::F64 => call!(matrixmultiply::dgemm, f64),
    }
}

/// `x` as a `T` when `F` is `T` (a type check, folded away at compile time), else `None`.
#[inline(always)]
fn cast<F: 'static, T: Copy + 'static>(x: F) -> Option<T> {
    (&x as &dyn Any).downcast_ref::<T>().copied()
}

#[cold]
#[inline(never)]
#[track_caller]
fn kind_panic<F>(kind: &str) -> ! {
    panic!(
        "gemm: Scalar::KIND of {} says {kind}, but the type is not {kind}",
        std::any::type_name::<F>()
    )
}

// ---------------------------------------------------------------------------------------------
// Wider vectors

/// `f()` compiled for the widest vector instructions this CPU has ([`widest_lanes`]): AVX-512
/// (F, DQ, VL and BW: 512-bit vectors with 64-bit multiplies), else AVX2 with FMA, else the
/// baseline build. For kernels whose result does not depend on the instructions: integer
/// arithmetic is exact, and Rust never fuses a float multiply and add (only `mul_add` does, in
/// every build) or reorders a sum, so every build gives the same bits. `f` must be an
/// `#[inline(always)]` closure, so that its body is compiled into the chosen build rather than
/// called from it. (The SpMM keeps its AVX2 build: AVX-512 measured no faster there.)
#[inline(always)]
pub(crate) fn widest<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    match widest_lanes() {
        // SAFETY: `widest_lanes` says 16 only when the CPU has these four AVX-512 subsets, the
        // only requirement of `with_avx512`'s `#[target_feature]`.
        16 => return unsafe { with_avx512(f) },
        // SAFETY: 8 only when it has AVX2 and FMA, `with_avx2`'s requirement.
        8 => return unsafe { with_avx2(f) },
        _ => {}
    }
    f()
}

/// The f32 lanes of the build [`widest`] runs: 16 (AVX-512 F, DQ, VL and BW, with AVX2 and
/// FMA), 8 (AVX2 and FMA) or 4 (the baseline build), checked at run time (`std` caches the answer).
pub(crate) fn widest_lanes() -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx2") && has!("fma") {
            let avx512 = has!("avx512f") && has!("avx512dq") && has!("avx512vl");
            return if avx512 && has!("avx512bw") { 16 } else { 8 };
        }
    }
    4
}

/// `f()` built for AVX-512 (see [`widest`]).
///
/// # Safety
/// The CPU must support AVX-512 F, DQ, VL and BW.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512vl,avx512bw")]
unsafe fn with_avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// `f()` built for AVX2 with FMA (see [`widest`]).
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn with_avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

// ---------------------------------------------------------------------------------------------
// SpMM

/// The serial SpMM kernel on rows `lo..lo + out.nrows()` of `out`, from columns
/// `c_base..c_base + out.ncols()` of `x` (a column tile), built for AVX2 when the CPU has it
/// (Rust never fuses a multiply and add, so both builds give the same bits). Safe for any
/// arguments. Preconditions, asserted here and in [`rows_kernel_any`] (once per task): the
/// tile lies inside `x`'s columns and the rows exist in `rows`; on the fast path (row-major
/// contiguous `x`), every column index of the task's non-zeros names a row of `x` (`CsrView`
/// guarantees it; one cheap pass), which the unchecked reads of [`Fast::add`] rely on.
pub(super) fn spmm_rows<F: Scalar>(
    alpha: F,
    rows: &Rows<'_, F>,
    x: ArrayView2<'_, F>,
    c_base: usize,
    beta: F,
    out: ArrayViewMut2<'_, F>,
    lo: usize,
) {
    assert!(
        c_base + out.ncols() <= x.ncols() && lo + out.nrows() < rows.ip.len(),
        "spmm: rows {lo}..{} of a {}-row CSR into {}x{} from columns {c_base}.. of {}x{}",
        lo + out.nrows(),
        rows.ip.len().saturating_sub(1),
        out.nrows(),
        out.ncols(),
        x.nrows(),
        x.ncols()
    );
    #[cfg(target_arch = "x86_64")]
    if widest_lanes() >= 8 {
        // SAFETY: the CPU has AVX2 and FMA (`widest_lanes` is 8 or 16 only then), checked
        // just above: `with_avx2`'s requirement.
        return unsafe {
            with_avx2(
                #[inline(always)]
                || rows_kernel_any(alpha, rows, x, c_base, beta, out, lo),
            )
        };
    }
    rows_kernel_any(alpha, rows, x, c_base, beta, out, lo);
}

/// The serial kernel for any CPU: the fast path when `x` is row-major contiguous (for each row
/// of `out` that is contiguous), the generic strided path otherwise. Inlined into
/// [`spmm_rows`] and its AVX2 build (256-bit vectors: half the instructions of SSE2).
#[inline(always)]
fn rows_kernel_any<F: Scalar>(
    alpha: F,
    rows: &Rows<'_, F>,
    x: ArrayView2<'_, F>,
    c_base: usize,
    beta: F,
    out: ArrayViewMut2<'_, F>,
    lo: usize,
) {
    let d = out.ncols();
    if d == 0 || out.nrows() == 0 {
        return;
    }
    let ld = x.ncols();
    let Some(xs) = x.as_slice() else {
        let tile = x.slice(ndarray::s![.., c_base..c_base + d]);
        rows_strided(alpha, rows, tile, beta, out, lo);
        return;
    };
    // Every column index of the task's non-zeros must name a row of `X`, so that
    // `Fast::block` may read `X` without bounds checks. `CsrView` guarantees it already; this
    // is one cheap pass over the task's indices. The kernel then reads indices only through
    // `task`, whose arrays are exactly the checked non-zeros (its ranges are rebased to
    // them), so whatever the row pointers say, every index it reads has been checked.
    let (p_lo, p_hi) = (rows.range(lo).0, rows.range(lo + out.nrows() - 1).1);
    let idx = &rows.idx[p_lo..p_hi];
    let jmax = idx.iter().fold(0u32, |m, &j| m.max(j));
    assert!(
        p_lo == p_hi || (jmax as usize) < x.nrows(),
        "spmm: column index out of range"
    );
    let task = Rows {
        ip: rows.ip,
        off: rows.ip[lo],
        idx,
        val: &rows.val[p_lo..p_hi],
    };
    let dist = prefetch_distance::<F>(d);
    let k = Fast {
        alpha,
        beta,
        idx: task.idx,
        val: task.val,
        // No prefetch when all of `X` fits in a core's L2 (a hint that only costs there).
        pf_idx: if size_of_val(xs) <= NO_PREFETCH_BYTES {
            &[]
        } else {
            rows.idx
        },
        pf_ahead: p_lo + dist,
        xs,
        d,
        ld,
        c_base,
    };
    let x = x.slice(ndarray::s![.., c_base..c_base + d]);
    each_row_of_width(&k, &task, x, out, lo, ld == d);
}

/// The fast path's operands: contiguous row-major `X` (`xs`, `ld` columns), of which the
/// columns `c_base..c_base + d` are read (a tile, or all of them).
struct Fast<'a, F> {
    alpha: F,
    beta: F,
    idx: &'a [u32],
    val: &'a [F],
    xs: &'a [F],
    /// Width of the tile, the output row's length.
    d: usize,
    /// Row length of `X` (`d` when the tile is all of `X`).
    ld: usize,
    /// First column of the tile.
    c_base: usize,
    /// All of `A`'s indices, for the prefetch look-ahead only (a hint: these are never used
    /// to read `X`).
    pf_idx: &'a [u32],
    /// Where the look-ahead of position `p` of `idx` is in `pf_idx`, less `p`: the task's
    /// first non-zero plus the prefetch distance in non-zeros.
    pf_ahead: usize,
}

impl<F: Scalar> BlockKernel<F> for Fast<'_, F> {
    #[inline(always)]
    fn alpha(&self) -> F {
        self.alpha
    }

    #[inline(always)]
    fn beta(&self) -> F {
        self.beta
    }

    #[inline(always)]
    fn width(&self) -> usize {
        self.d
    }

    /// Columns `c0..c0 + C` of the output row `o` (columns `c_base + c0..` of `X`) over the
    /// non-zeros `p0..p1`, in a C-wide accumulator that fits the vector registers. `LD` is the
    /// row length of `X` when known at compile time (0: the runtime `self.ld`). Only the first
    /// block of a row (`c0 = 0`) prefetches; later blocks find the rows in cache.
    #[inline(always)]
    fn block<const C: usize, const LD: usize>(
        &self,
        (p0, p1): (usize, usize),
        c0: usize,
        o: &mut [F],
    ) {
        let ld = if LD == 0 { self.ld } else { LD };
        let col = self.c_base + c0;
        let o = &mut o[c0..c0 + C];
        let mut acc = self.init::<C>(o);
        for (q, (&j, &v)) in self.idx[p0..p1].iter().zip(&self.val[p0..p1]).enumerate() {
            self.add::<C>(&mut acc, (j, v, p0 + q), c0, ld, col);
        }
        o.copy_from_slice(&acc);
    }

    /// Columns `c0..c0 + C` of [`GROUP`] consecutive output rows (`o`, each `self.d` wide) over
    /// their non-zeros `ranges`: [`Fast::block`] on each row, the rows' loops interleaved over
    /// their common length and then each row's rest in turn. Every row's sum is formed in its
    /// own stored order, as [`Fast::block`] forms it: the same bits.
    #[inline(always)]
    fn block_rows<const C: usize, const LD: usize>(
        &self,
        ranges: [(usize, usize); GROUP],
        c0: usize,
        o: &mut [F],
    ) {
        let ld = if LD == 0 { self.ld } else { LD };
        let d = self.d;
        let col = self.c_base + c0;
        assert!(col + C <= ld && o.len() == GROUP * d && c0 + C <= d);
        let init = |g: usize| self.init::<C>(&o[g * d + c0..g * d + c0 + C]);
        // Four named accumulators (never indexed at run time), so that they stay in registers.
        let (mut a0, mut a1, mut a2, mut a3) = (init(0), init(1), init(2), init(3));
        let [r0, r1, r2, r3] = ranges;
        let common = (r0.1 - r0.0)
            .min(r1.1 - r1.0)
            .min(r2.1 - r2.0)
            .min(r3.1 - r3.0);
        for q in 0..common {
            self.step::<C>(&mut a0, r0.0 + q, c0, ld, col);
            self.step::<C>(&mut a1, r1.0 + q, c0, ld, col);
            self.step::<C>(&mut a2, r2.0 + q, c0, ld, col);
            self.step::<C>(&mut a3, r3.0 + q, c0, ld, col);
        }
        // Each row's rest, and its result (written out, not indexed: see above).
        for p in r0.0 + common..r0.1 {
            self.step::<C>(&mut a0, p, c0, ld, col);
        }
        o[c0..c0 + C].copy_from_slice(&a0);
        for p in r1.0 + common..r1.1 {
            self.step::<C>(&mut a1, p, c0, ld, col);
        }
        o[d + c0..d + c0 + C].copy_from_slice(&a1);
        for p in r2.0 + common..r2.1 {
            self.step::<C>(&mut a2, p, c0, ld, col);
        }
        o[2 * d + c0..2 * d + c0 + C].copy_from_slice(&a2);
        for p in r3.0 + common..r3.1 {
            self.step::<C>(&mut a3, p, c0, ld, col);
        }
        o[3 * d + c0..3 * d + c0 + C].copy_from_slice(&a3);
    }
}

impl<F: Scalar> Fast<'_, F> {
    /// The accumulator of an output block `o`, from `beta`: `o`, `β·o` or zeros.
    #[inline(always)]
    fn init<const C: usize>(&self, o: &[F]) -> [F; C] {
        let mut a = [F::zero(); C];
        if self.beta == F::one() {
            a.copy_from_slice(o);
        } else if self.beta != F::zero() {
            for (a, &v) in a.iter_mut().zip(o) {
                *a = v * self.beta;
            }
        }
        a
    }

    /// Non-zero `p` of the task into the accumulator `a` (see [`Fast::add`]).
    #[inline(always)]
    fn step<const C: usize>(&self, a: &mut [F; C], p: usize, c0: usize, ld: usize, col: usize) {
        self.add::<C>(a, (self.idx[p], self.val[p], p), c0, ld, col);
    }

    /// Non-zero `p` of the task, `(j, v)`, into the accumulator `a` of columns `col..col + C`
    /// of `X` (`X`'s rows `ld` long), the prefetch of the look-ahead with the first block of a
    /// row (`c0 = 0`). `j`, an index of the task, is below `xs.len() / ld` ([`rows_kernel_any`]).
    #[inline(always)]
    fn add<const C: usize>(
        &self,
        a: &mut [F; C],
        (j, v, p): (u32, F, usize),
        c0: usize,
        ld: usize,
        col: usize,
    ) {
        let xs = self.xs;
        if c0 == 0 {
            if let Some(&jn) = self.pf_idx.get(p + self.pf_ahead) {
                let pf_base = xs.as_ptr().wrapping_add(self.c_base);
                prefetch_elems(pf_base.wrapping_add(jn as usize * ld), self.d);
            }
        }
        let w = self.alpha * v;
        let start = j as usize * ld + col;
        assert!(col + C <= ld);
        // SAFETY: `j` is an index of the task's non-zeros (`self.idx`, read by the caller with
        // bounds checks), all checked `j < k` in `rows_kernel_any`, where `k·ld = xs.len()`;
        // `col + C <= ld` is asserted just above (hoisted out of the loop once inlined), so
        // `start + C = j·ld + col + C <= (k - 1)·ld + ld = xs.len()`: the C elements from
        // `start` lie inside `xs`. `[F; C]` has the alignment of `F`.
        let xr = unsafe { &*xs.as_ptr().add(start).cast::<[F; C]>() };
        for c in 0..C {
            a[c] += w * xr[c];
        }
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

/// Prefetches the cache lines of `s` (a hint, for loops whose next loads are random: the
/// label propagation of [`order`](crate::order) fetches the rows it will visit next).
#[inline(always)]
pub(crate) fn prefetch_slice<T>(s: &[T]) {
    prefetch_elems(s.as_ptr(), s.len());
}

/// Prefetches the cache line of `s[i]` (a hint; nothing when `i` is out of range).
#[inline(always)]
pub(crate) fn prefetch_at<T>(s: &[T], i: usize) {
    if let Some(x) = s.get(i) {
        prefetch_line(std::ptr::from_ref(x).cast::<u8>());
    }
}

/// `dst ← src` (equal lengths), the 16-byte-aligned part of `dst` written with non-temporal
/// stores on x86-64 (SSE2, which every x86-64 CPU has): the lines written are not read for
/// ownership first nor kept in the caches, which halves the memory traffic of a copy larger
/// than them. The same bytes as `copy_from_slice`; elsewhere it is `copy_from_slice`. Another
/// thread may read `dst` only after [`store_fence`] on this one.
///
/// # Panics
/// If the lengths differ.
#[inline]
pub(crate) fn copy_streaming<T: Copy>(src: &[T], dst: &mut [T]) {
    assert_eq!(src.len(), dst.len(), "copy_streaming: lengths");
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let bytes = std::mem::size_of_val(dst);
        let d = dst.as_mut_ptr().cast::<u8>();
        let s = src.as_ptr().cast::<u8>();
        let head = (d as usize).wrapping_neg() % 16;
        if bytes < head + 16 {
            dst.copy_from_slice(src);
            return;
        }
        let chunks = (bytes - head) / 16;
        let tail = head + 16 * chunks;
        // SAFETY: `src` and `dst` are distinct slices (one shared, one exclusive borrow) of
        // `bytes` bytes each; every access below is within `0..bytes` of both: the head
        // `0..head`, the chunks `head + 16·c .. head + 16·(c + 1)` for c < chunks (so up to
        // `tail ≤ bytes`) and the tail `tail..bytes`. `d + head` is 16-byte aligned, as
        // `_mm_stream_si128` requires; the loads are unaligned (`_mm_loadu_si128`). Copying
        // the bytes of a `Copy` type between slices of that type is what `copy_from_slice`
        // does. SSE2 is part of the x86-64 baseline.
        unsafe {
            std::ptr::copy_nonoverlapping(s, d, head);
            for c in 0..chunks {
                let o = head + 16 * c;
                let v = _mm_loadu_si128(s.add(o).cast::<__m128i>());
                _mm_stream_si128(d.add(o).cast::<__m128i>(), v);
            }
            std::ptr::copy_nonoverlapping(s.add(tail), d.add(tail), bytes - tail);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    dst.copy_from_slice(src);
}

/// Orders this thread's earlier non-temporal stores ([`copy_streaming`]) before its later
/// stores, so that a thread which synchronises with it afterwards sees them (`sfence`).
#[inline]
pub(crate) fn store_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_sfence` only requires SSE, part of the x86-64 baseline; it has no operands.
    unsafe {
        std::arch::x86_64::_mm_sfence();
    }
}

/// `file` mapped read-only: the binary graph store's arrays (`data::store`).
///
/// A map stays sound while no process truncates or rewrites the file: the store's files are
/// written once, into a folder renamed into place when complete, and never modified by this
/// crate afterwards; another program that rewrites them under a running reader breaks that, the
/// caveat of every memory-mapped reader (memmap2's documentation).
/// `populate` reads every page in now (`MAP_POPULATE`), for a caller about to read it all.
pub(crate) fn map_readonly(file: &std::fs::File, populate: bool) -> std::io::Result<memmap2::Mmap> {
    let mut o = memmap2::MmapOptions::new();
    if populate {
        o.populate();
    }
    // SAFETY: see above — the mapped file is not modified while the map lives; the map is
    // read-only, so this process never writes through it.
    unsafe { o.map(file) }
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

// ---------------------------------------------------------------------------------------------
// Huge pages

/// A transparent huge page on x86-64 Linux.
pub(crate) const HUGE_PAGE: usize = 2 << 20;

/// Advises the whole huge pages inside `s` for transparent huge pages
/// (`madvise(MADV_HUGEPAGE)` on the 2 MiB-aligned part of its memory; nothing when that is
/// empty, or without Linux or the `hugepages` feature). Returns whether a range was advised.
/// Contents are unchanged; pages not yet touched (a fresh `vec![0; n]`) are then backed by
/// huge pages when first written, which saves the random row gathers of an SpMM a TLB miss
/// each (the training workspace's buffers, the roofline's `BigBuffer`).
pub(crate) fn advise_slice<T>(s: &mut [T]) -> bool {
    let start = s.as_mut_ptr().cast::<u8>();
    let (addr, bytes) = (start as usize, std::mem::size_of_val(s));
    let lo = addr.next_multiple_of(HUGE_PAGE);
    let hi = (addr + bytes) / HUGE_PAGE * HUGE_PAGE;
    if hi <= lo {
        return false;
    }
    #[cfg(all(target_os = "linux", feature = "hugepages"))]
    // SAFETY: `[lo, hi)` lies inside `s`, a live allocation borrowed mutably here (`lo ≥ addr`,
    // `hi ≤ addr + bytes`), and starts on a page boundary; MADV_HUGEPAGE only changes how the
    // kernel backs that range, never its contents or validity.
    unsafe {
        let p = start.wrapping_add(lo - addr).cast::<libc::c_void>();
        libc::madvise(p, hi - lo, libc::MADV_HUGEPAGE) == 0
    }
    #[cfg(not(all(target_os = "linux", feature = "hugepages")))]
    false
}

// ---------------------------------------------------------------------------------------------
// The FMA peak

/// `rounds` rounds of `a ← a·b + c` (one fused multiply-add) on `CH` independent vectors, chain
/// k starting from `starts[k]` in every lane, in AVX-512 (16 floats a vector) or else AVX2 with
/// FMA (8), checked at run time; the sum of every lane of every chain, with the vector width.
/// `None` when the CPU has neither (the caller runs a portable loop).
pub(crate) fn fma_chains<const CH: usize>(
    rounds: usize,
    starts: [f32; CH],
    b: f32,
    c: f32,
) -> Option<(f32, usize)> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx512f") {
            // SAFETY: the CPU has AVX-512 F, checked just above: `chains_avx512`'s requirement.
            return Some((unsafe { chains_avx512(rounds, starts, b, c) }, 16));
        }
        if has!("avx2") && has!("fma") {
            // SAFETY: the CPU has AVX2 and FMA, checked just above: `chains_avx2`'s requirement.
            return Some((unsafe { chains_avx2(rounds, starts, b, c) }, 8));
        }
    }
    let _ = (rounds, starts, b, c);
    None
}

/// [`fma_chains`] in AVX-512. # Safety: the CPU must support AVX-512 F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn chains_avx512<const CH: usize>(rounds: usize, starts: [f32; CH], b: f32, c: f32) -> f32 {
    use std::arch::x86_64::{_mm512_add_ps, _mm512_fmadd_ps, _mm512_reduce_add_ps, _mm512_set1_ps};
    let (b, c) = (_mm512_set1_ps(b), _mm512_set1_ps(c));
    let mut acc = starts.map(|x| _mm512_set1_ps(x));
    for _ in 0..rounds {
        for a in &mut acc {
            *a = _mm512_fmadd_ps(*a, b, c);
        }
    }
    _mm512_reduce_add_ps(
        acc.into_iter()
            .fold(_mm512_set1_ps(0.0), |s, a| _mm512_add_ps(s, a)),
    )
}

/// [`fma_chains`] in AVX2 with FMA. # Safety: the CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn chains_avx2<const CH: usize>(rounds: usize, starts: [f32; CH], b: f32, c: f32) -> f32 {
    use std::arch::x86_64::{_mm256_add_ps, _mm256_fmadd_ps, _mm256_set1_ps, _mm256_storeu_ps};
    let (b, c) = (_mm256_set1_ps(b), _mm256_set1_ps(c));
    let mut acc = starts.map(|x| _mm256_set1_ps(x));
    for _ in 0..rounds {
        for a in &mut acc {
            *a = _mm256_fmadd_ps(*a, b, c);
        }
    }
    let s = acc
        .into_iter()
        .fold(_mm256_set1_ps(0.0), |s, a| _mm256_add_ps(s, a));
    let mut out = [0f32; 8];
    // SAFETY: `out` holds 8 writable floats, what an unaligned 256-bit store writes.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), s) };
    out.iter().sum()
}

mod packed;
pub(crate) use packed::gemm_packed;
#[cfg(test)]
mod tests;
