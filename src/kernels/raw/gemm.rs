//! The packed GEMM for the GCN's tall and skinny products (`kernels::gemm`'s fast path):
//! `out ← A·B + β·out` for f32 `A` with contiguous rows (H or G, up to 10⁸ rows, read in
//! place) and `B` packed once per call into panels of 16, 32 or 48 columns (W or Wᵀ, at most a
//! few MiB, read from L2 by every row block), with AVX-512 micro-kernels of 24 accumulators
//! (24 × 16, 12 × 32 or 8 × 48; chosen at run time, other CPUs take matrixmultiply).
//!
//! # The same bits as matrixmultiply
//! Each element is computed exactly as matrixmultiply's `sgemm` computes it with its FMA
//! kernels, for α = 1 (the only α this path takes): over `k` in chunks of [`KC`] (its `KC`),
//! each chunk a chain of fused multiply-adds `acc ← a_ip·b_pj + acc` from `acc = 0` in the
//! order of `p`; the first chunk stored as `fma(1, acc, β·c)` (`fma(1, acc, 0)` for β = 0,
//! `c` never read), every later one as `fma(1, acc, c)`. Tested bit for bit against
//! matrixmultiply in `raw::tests`. Two differences that compare equal: matrixmultiply's edge
//! tiles (rows or columns past its last full 8 × 8 tile) add `c·β` to `fma(1, acc, 0)`, so
//! where a chunk's `acc` is −0 (an underflowed negative product) and `c·β` is −0 they store +0
//! and this path −0; and when both `acc` and `c·β` are NaN, which payload survives may differ.

use ndarray::{ArrayView2, ArrayViewMut2, ShapeBuilder};

use crate::Scalar;

/// Whether `F` is f32 (its type, not only its `Scalar::KIND`).
fn is_f32<F: Scalar>() -> bool {
    std::any::TypeId::of::<F>() == std::any::TypeId::of::<f32>()
}

/// The chunk of `k` each accumulator runs over before it is added into `out`: matrixmultiply's
/// sgemm `KC` (its default; a build that overrides `MATMUL_SGEMM_KC` would differ in the
/// last bits from this path).
pub(crate) const KC: usize = 256;

/// Sixteen f32 on one cache line: one AVX-512 vector of a packed panel.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub(crate) struct Lane(pub(crate) [f32; 16]);

/// `B` (k × n) packed for [`gemm_packed`]: panels of `16·L` columns (zero past `n`), each `k`
/// rows of `L` lanes one after the other; `L` = 3 for 33–48 columns (one panel, a class count
/// such as 40), 1 for at most 16, 2 otherwise.
#[derive(Debug)]
pub(crate) struct PackedB {
    k: usize,
    n: usize,
    /// Lanes a panel row: `L`.
    l: usize,
    lanes: Vec<Lane>,
}

impl PackedB {
    /// `b` packed, when this CPU runs the packed kernel (AVX-512 F; `None` otherwise). One
    /// allocation of `k·⌈n/16L⌉·16L` floats, aligned to 64 bytes.
    pub(crate) fn new(b: ArrayView2<'_, f32>) -> Option<PackedB> {
        if !available() {
            return None;
        }
        let (k, n) = b.dim();
        let l = lanes_for(n);
        let w = 16 * l;
        let panels = n.div_ceil(w);
        let mut lanes = vec![Lane([0.0; 16]); panels * k * l];
        for (q, panel) in lanes.chunks_exact_mut((l * k).max(1)).enumerate() {
            let cols = (n - q * w).min(w);
            for (p, row) in panel.chunks_exact_mut(l).enumerate() {
                let src = b.row(p);
                match src.as_slice() {
                    // B's rows contiguous (G of a weight gradient, packed every call): copies.
                    Some(src) => {
                        let src = &src[q * w..q * w + cols];
                        for (lane, part) in row.iter_mut().zip(src.chunks(16)) {
                            lane.0[..part.len()].copy_from_slice(part);
                        }
                    }
                    None => {
                        for c in 0..cols {
                            row[c / 16].0[c % 16] = src[q * w + c];
                        }
                    }
                }
            }
        }
        Some(PackedB { k, n, l, lanes })
    }

    /// `(k, n)`.
    pub(crate) fn dim(&self) -> (usize, usize) {
        (self.k, self.n)
    }
}

/// The strides of a view for `from_shape_ptr`: an axis of length 0 or 1 gets stride 0 (its
/// stride is never used, and ndarray lets it be anything, a negative value too); `None` when
/// a longer axis has a negative stride.
pub(crate) fn strides_of(dim: (usize, usize), strides: &[isize]) -> Option<(usize, usize)> {
    let s = |len: usize, st: isize| match len {
        0 | 1 => Some(0),
        _ => usize::try_from(st).ok(),
    };
    Some((s(dim.0, strides[0])?, s(dim.1, strides[1])?))
}

/// `a` as f32 when `F` is f32 and its strides are non-negative, an axis of length 0 or 1
/// getting stride 0 (`None` otherwise).
pub(crate) fn view_f32<'a, F: Scalar>(a: ArrayView2<'a, F>) -> Option<ArrayView2<'a, f32>> {
    let st = strides_of(a.dim(), a.strides())?;
    if !is_f32::<F>() {
        return None;
    }
    let shape = a.dim().strides(st);
    // SAFETY: `F` is f32 (the same `TypeId`), so the pointer cast is an identity; the shape is
    // the live view's own, and so are the strides of its axes longer than 1 (non-negative);
    // an axis of length 0 or 1 is never stepped along, so stride 0 there describes the same
    // elements: every element is in bounds, borrowed for `'a`.
    Some(unsafe { ArrayView2::from_shape_ptr(shape, a.as_ptr().cast::<f32>()) })
}

/// `out` as f32, as [`view_f32`].
pub(crate) fn view_mut_f32<'a, F: Scalar>(
    mut out: ArrayViewMut2<'a, F>,
) -> Option<ArrayViewMut2<'a, f32>> {
    let st = strides_of(out.dim(), out.strides())?;
    if !is_f32::<F>() {
        return None;
    }
    let shape = out.dim().strides(st);
    // SAFETY: as in `view_f32`; `out` is a unique borrow for `'a`, moved into the new view
    // (stride 0 only on an axis of length 0 or 1, so no element is reached twice).
    Some(unsafe { ArrayViewMut2::from_shape_ptr(shape, out.as_mut_ptr().cast::<f32>()) })
}

/// Lanes a panel row for `n` columns: 3 for 33–48 (one panel), 1 for at most 16, 2 otherwise.
fn lanes_for(n: usize) -> usize {
    match n {
        0..=16 => 1,
        33..=48 => 3,
        _ => 2,
    }
}

/// The B of [`gemm_packed`]: packed, or read in place from its contiguous rows (a weight
/// gradient's G, a new B every call: packing it would cost as much as the product saves).
#[derive(Debug, Clone, Copy)]
pub(crate) enum BOperand<'a> {
    /// Packed once (W or Wᵀ, read by many row blocks).
    Packed(&'a PackedB),
    /// A k × n view with unit column stride and a non-negative row stride.
    Rows(ArrayView2<'a, f32>),
}

impl BOperand<'_> {
    /// `(k, n)`.
    pub(crate) fn dim(&self) -> (usize, usize) {
        match self {
            BOperand::Packed(b) => b.dim(),
            BOperand::Rows(b) => b.dim(),
        }
    }
}

/// Where the kernel reads B: lane `l` of panel `q`, row `p` at `base + p·sp + q·sq + 16·l`,
/// panels of `16·l` columns, masked past `n`.
#[derive(Clone, Copy)]
struct BAddr {
    base: *const f32,
    sp: usize,
    sq: usize,
    k: usize,
    n: usize,
    l: usize,
}

/// Whether this CPU runs the packed kernel.
pub(crate) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `out ← A·B + β·out` for `a: m × k` (any non-negative strides: H read in place, or Hᵀ for
/// a weight gradient), `b` packed or in place, `out: m × n` with contiguous rows; in the order
/// of the [module docs](self).
///
/// Safe for any arguments. Preconditions, asserted: the shapes agree, `a`'s strides and
/// `out`'s row stride are non-negative, `out`'s column stride is 1, `k ≥ 1`; a `b` in place has
/// a unit column stride and a non-negative row stride. The views being live ndarray views
/// makes every element the kernel touches in bounds (`out`, a unique borrow, aliases nothing);
/// the packed panels have exactly `k` rows each (`PackedB::new`), and the columns past `n` are
/// masked on every load of `b` and every load and store of `out`.
///
/// # Panics
/// If a precondition does not hold.
pub(crate) fn gemm_packed(
    a: ArrayView2<'_, f32>,
    b: BOperand<'_>,
    beta: f32,
    mut out: ArrayViewMut2<'_, f32>,
) {
    let (m, k) = a.dim();
    let (bk, n) = b.dim();
    let b_ok = match b {
        BOperand::Packed(_) => true,
        BOperand::Rows(v) => v.strides()[0] >= 0 && (n <= 1 || v.strides()[1] == 1),
    };
    assert!(
        bk == k
            && k >= 1
            && b_ok
            && out.dim() == (m, n)
            && a.strides().iter().all(|&s| s >= 0)
            && out.strides()[0] >= 0
            && (n <= 1 || out.strides()[1] == 1)
            && available(),
        "gemm_packed: a {:?} (strides {:?}), b {bk}x{n}, out {:?} (strides {:?})",
        a.dim(),
        a.strides(),
        out.dim(),
        out.strides()
    );
    if m == 0 || n == 0 {
        return;
    }
    let (rsa, csa, ldc) = (
        a.strides()[0] as usize,
        a.strides()[1] as usize,
        out.strides()[0] as usize,
    );
    let (pa, pc) = (a.as_ptr(), out.as_mut_ptr());
    let b = match b {
        BOperand::Packed(b) => BAddr {
            base: b.lanes.as_ptr().cast::<f32>(),
            sp: 16 * b.l,
            sq: 16 * b.l * k,
            k,
            n,
            l: b.l,
        },
        BOperand::Rows(v) => BAddr {
            base: v.as_ptr(),
            sp: v.strides()[0] as usize,
            sq: 16 * lanes_for(n),
            k,
            n,
            l: lanes_for(n),
        },
    };
    // Chunks of k outermost, so that one chunk of the panels (KC rows of B) stays in L2 while
    // every row block reads it; each element still sums its chunks in order.
    for p0 in (0..k).step_by(KC) {
        let chunk = (p0, (p0 + KC).min(k), if p0 == 0 { beta } else { 1.0 });
        let mut i = 0;
        while i < m {
            let left = m - i;
            // SAFETY: rows `i .. i + r` (r ≤ left, below `m`) of `a` and `out` exist; the
            // strides are non-negative, so `pa + i·rsa` and `pc + i·ldc` are the first
            // elements of those rows, and the kernel reads `a` at `r·rsa + p·csa` (r < its
            // R ≤ left, p < k) and `out` at `r·ldc + j` (j < n): elements of the views. The
            // CPU has AVX-512 F (asserted above); `b` addresses B's elements (p < k, columns
            // below n; the packed panels' padding up to 16·l columns) as its `BAddr` says;
            // the chunk lies in `0..k`.
            let r = unsafe {
                let (ar, cr) = (pa.add(i * rsa), pc.add(i * ldc));
                let a = (ar, rsa, csa);
                match (b.l, left) {
                    (1, 24..) => rows_avx512::<24, 1>(a, b, chunk, cr, ldc),
                    (2, 12..) => rows_avx512::<12, 2>(a, b, chunk, cr, ldc),
                    (_, 8..) => match b.l {
                        1 => rows_avx512::<8, 1>(a, b, chunk, cr, ldc),
                        2 => rows_avx512::<8, 2>(a, b, chunk, cr, ldc),
                        _ => rows_avx512::<8, 3>(a, b, chunk, cr, ldc),
                    },
                    (_, 4..) => match b.l {
                        1 => rows_avx512::<4, 1>(a, b, chunk, cr, ldc),
                        2 => rows_avx512::<4, 2>(a, b, chunk, cr, ldc),
                        _ => rows_avx512::<4, 3>(a, b, chunk, cr, ldc),
                    },
                    _ => match b.l {
                        1 => rows_avx512::<1, 1>(a, b, chunk, cr, ldc),
                        2 => rows_avx512::<1, 2>(a, b, chunk, cr, ldc),
                        _ => rows_avx512::<1, 3>(a, b, chunk, cr, ldc),
                    },
                }
            };
            i += r;
        }
    }
}

/// One chunk `(p0, p1, β′)` of k for `R` rows (returns `R`): `out ← A[.., p0..p1]·B[p0..p1, ..]
/// + β′·out` (β′ = β for the first chunk, 1 after): the `R × 16L` block of each panel of `b`
/// (`L` lanes a row).
///
/// # Safety
/// The CPU must support AVX-512 F; `b.l` must be `L`, and `b.base + p·sp + q·sq + j` readable
/// for p < b.k and every column `q·16L + j` below `b.n`; `p0 < p1 ≤ b.k`;
/// `a + r·rsa + p·csa` (r < R, p < b.k) must be readable and `c + r·ldc + j` (j < b.n)
/// writable.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn rows_avx512<const R: usize, const L: usize>(
    (a, rsa, csa): (*const f32, usize, usize),
    b: BAddr,
    (p0, p1, betap): (usize, usize, f32),
    c: *mut f32,
    ldc: usize,
) -> usize {
    use std::arch::x86_64::{
        __m512, _mm512_fmadd_ps, _mm512_mask_storeu_ps, _mm512_maskz_loadu_ps, _mm512_mul_ps,
        _mm512_set1_ps, _mm512_setzero_ps,
    };
    let (n, w) = (b.n, 16 * L);
    debug_assert!(b.l == L && p1 <= b.k);
    let one = _mm512_set1_ps(1.0);
    // Element (r, p) of the chunk at `ab + r·rsa + (p − p0)·csa`.
    let ab = a.wrapping_add(p0 * csa);
    for q in 0..n.div_ceil(w) {
        let cols = (n - q * w).min(w);
        let masks: [u16; L] =
            std::array::from_fn(|l| ((1u32 << cols.saturating_sub(16 * l).min(16)) - 1) as u16);
        let bq = b.base.wrapping_add(q * b.sq);
        let mut acc: [[__m512; L]; R] = [[_mm512_setzero_ps(); L]; R];
        for p in p0..p1 {
            // SAFETY: p < k; the masked loads read only columns below `n` of row p of panel q,
            // readable by the caller's contract; masked-off lanes never fault.
            let bv: [__m512; L] = std::array::from_fn(|l| unsafe {
                _mm512_maskz_loadu_ps(masks[l], bq.wrapping_add(p * b.sp + 16 * l))
            });
            for (r, acc) in acc.iter_mut().enumerate() {
                // SAFETY: r < R and p0 ≤ p < p1: element (r, p) of A, readable by the
                // caller's contract.
                let av = _mm512_set1_ps(unsafe { *ab.add(r * rsa + (p - p0) * csa) });
                for l in 0..L {
                    acc[l] = _mm512_fmadd_ps(av, bv[l], acc[l]);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            for l in 0..L {
                let cr = c.wrapping_add(r * ldc + q * w + 16 * l);
                let cv = if betap != 0.0 {
                    // SAFETY: the masked load touches only columns below `n` of row r
                    // (writable, so readable, by the caller's contract); masked-off lanes
                    // never fault.
                    let v = unsafe { _mm512_maskz_loadu_ps(masks[l], cr) };
                    _mm512_mul_ps(v, _mm512_set1_ps(betap))
                } else {
                    _mm512_setzero_ps()
                };
                // SAFETY: as for the load: only columns below `n` of row r are written.
                unsafe { _mm512_mask_storeu_ps(cr, masks[l], _mm512_fmadd_ps(one, acc[l], cv)) };
            }
        }
    }
    R
}

/// Never called: [`available`] is false off x86-64, and [`gemm_packed`] asserts it.
///
/// # Safety
/// None needed; it panics.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn rows_avx512<const R: usize, const L: usize>(
    _: (*const f32, usize, usize),
    _: BAddr,
    _: (usize, usize, f32),
    _: *mut f32,
    _: usize,
) -> usize {
    unreachable!("gemm_packed without AVX-512")
}
