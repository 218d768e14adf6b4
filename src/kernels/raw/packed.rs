//! The packed GEMM's micro-kernels (AVX-512 and AVX2), part of the one unsafe module
//! [`kernels::raw`](super): `kernels::packed` holds their operands, `kernels::gemm` picks them.

use ndarray::{ArrayView2, ArrayViewMut2};

use crate::kernels::packed::{is_f32, lanes_for, strides_of, BOperand, Isa, KC};
use crate::Scalar;

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

/// `out ← A·B + β·out` for `a: m × k` (H, or Hᵀ for a weight gradient), `b` packed or in
/// place, `out: m × n`, in the order `kernels::packed` gives. Safe for any arguments; panics
/// unless (asserted): the shapes agree, `k ≥ 1`, `a`'s strides and `out`'s row stride are
/// non-negative and its column stride 1, a `b` in place has a unit column stride and a
/// non-negative row stride, a packed `b`'s lanes cover its panels. Live views make every
/// element the kernel touches in bounds (`out`, a unique borrow, aliases nothing); the columns
/// past `n` are masked on every load of `b` and every load and store of `out`.
pub(crate) fn gemm_packed<F: Scalar>(
    a: ArrayView2<'_, F>,
    b: BOperand<'_, F>,
    beta: f32,
    mut out: ArrayViewMut2<'_, F>,
    isa: Isa,
) {
    let (m, k) = a.dim();
    let (bk, n) = b.dim();
    // Strides as `usize`, an axis of length 0 or 1 taking 0 (never stepped along).
    let (sa, so) = (
        strides_of(a.dim(), a.strides()),
        strides_of(out.dim(), out.strides()),
    );
    let b_ok = match b {
        // Every panel whole: `k` rows of `l` lanes (what `PackedB::new` makes).
        BOperand::Packed(p) => {
            let l = p.lanes_per_row();
            (1..=3).contains(&l) && p.lanes().len() >= n.div_ceil(16 * l) * k * l
        }
        BOperand::Rows(v) => {
            let unit = strides_of(v.dim(), v.strides()).is_some_and(|s| n <= 1 || s.1 == 1);
            unit && isa == Isa::Avx512
        }
    };
    assert!(
        bk == k
            && k >= 1
            && b_ok
            && out.dim() == (m, n)
            && sa.is_some()
            && so.is_some_and(|s| n <= 1 || s.1 == 1)
            && is_f32::<F>()
            && isa.runs(),
        "gemm_packed ({isa:?}): a {:?} (strides {:?}), b {bk}x{n}, out {:?} (strides {:?})",
        a.dim(),
        a.strides(),
        out.dim(),
        out.strides()
    );
    if m == 0 || n == 0 {
        return;
    }
    let ((rsa, csa), (ldc, _)) = (sa.unwrap_or_default(), so.unwrap_or_default());
    // `F` is f32 (asserted): these casts are identities.
    let (pa, pc) = (a.as_ptr().cast::<f32>(), out.as_mut_ptr().cast::<f32>());
    let b = match b {
        BOperand::Packed(b) => {
            let l = b.lanes_per_row();
            let (base, sp, sq) = (b.lanes().as_ptr().cast::<f32>(), 16 * l, 16 * l * k);
            BAddr {
                base,
                sp,
                sq,
                k,
                n,
                l,
            }
        }
        BOperand::Rows(v) => {
            let sp = strides_of(v.dim(), v.strides()).unwrap_or_default().0;
            let (base, l) = (v.as_ptr().cast::<f32>(), lanes_for(n));
            BAddr {
                base,
                sp,
                sq: 16 * l,
                k,
                n,
                l,
            }
        }
    };
    // Chunks of k outermost, so that one chunk of the panels (KC rows of B) stays in L2 while
    // every row block reads it; each element still sums its chunks in order. (Off x86-64,
    // `isa.runs()` is false: asserted above.)
    #[cfg(target_arch = "x86_64")]
    for p0 in (0..k).step_by(KC) {
        let chunk = (p0, (p0 + KC).min(k), if p0 == 0 { beta } else { 1.0 });
        let mut i = 0;
        while i < m {
            let left = m - i;
            // SAFETY: rows `i .. i + r` (r ≤ left, below `m`) of `a` and `out` exist; the
            // strides are the views' own, non-negative (0 on an axis of length 0 or 1, never
            // stepped along), so `pa + i·rsa` and `pc + i·ldc` are the first elements of those
            // rows, and the kernel reads `a` at `r·rsa + p·csa` (r < its R ≤ left, p < k) and
            // `out` at `r·ldc + j` (j < n): elements of the views. The CPU runs `isa`
            // (asserted above); `b` addresses B's elements (p < k, columns below n; a packed
            // B's lanes cover every panel, padding included, checked above) as its `BAddr`
            // says, packed for AVX2 (asserted); the chunk lies in `0..k`.
            let r = unsafe {
                let (ar, cr) = (pa.add(i * rsa), pc.add(i * ldc));
                let a = (ar, rsa, csa);
                match (isa, b.l, left) {
                    (Isa::Avx2, _, 6..) => rows_avx2::<6>(a, b, chunk, cr, ldc),
                    (Isa::Avx2, _, 4..) => rows_avx2::<4>(a, b, chunk, cr, ldc),
                    (Isa::Avx2, _, 2..) => rows_avx2::<2>(a, b, chunk, cr, ldc),
                    (Isa::Avx2, _, _) => rows_avx2::<1>(a, b, chunk, cr, ldc),
                    (_, 1, 24..) => rows_avx512::<24, 1>(a, b, chunk, cr, ldc),
                    (_, 2, 12..) => rows_avx512::<12, 2>(a, b, chunk, cr, ldc),
                    (_, 1, 8..) => rows_avx512::<8, 1>(a, b, chunk, cr, ldc),
                    (_, 2, 8..) => rows_avx512::<8, 2>(a, b, chunk, cr, ldc),
                    (_, _, 8..) => rows_avx512::<8, 3>(a, b, chunk, cr, ldc),
                    (_, 1, 4..) => rows_avx512::<4, 1>(a, b, chunk, cr, ldc),
                    (_, 2, 4..) => rows_avx512::<4, 2>(a, b, chunk, cr, ldc),
                    (_, _, 4..) => rows_avx512::<4, 3>(a, b, chunk, cr, ldc),
                    (_, 1, _) => rows_avx512::<1, 1>(a, b, chunk, cr, ldc),
                    (_, 2, _) => rows_avx512::<1, 2>(a, b, chunk, cr, ldc),
                    _ => rows_avx512::<1, 3>(a, b, chunk, cr, ldc),
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

/// [`rows_avx512`] in AVX2 with FMA, for a packed `b`: the `R × 16` block of each 16-column lane
/// of each panel (two vectors of 8 a row, 2R accumulators), the same sums in the same order.
///
/// # Safety
/// As [`rows_avx512`]'s, with AVX2 and FMA for AVX-512 F, and `b` packed: its panels' rows
/// readable in whole lanes of 16, the padding past `b.n` included.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_avx2<const R: usize>(
    (a, rsa, csa): (*const f32, usize, usize),
    b: BAddr,
    (p0, p1, betap): (usize, usize, f32),
    c: *mut f32,
    ldc: usize,
) -> usize {
    use std::arch::x86_64::{
        __m256, _mm256_cmpgt_epi32, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_maskload_ps,
        _mm256_maskstore_ps, _mm256_mul_ps, _mm256_set1_epi32, _mm256_set1_ps, _mm256_setr_epi32,
        _mm256_setzero_ps, _mm256_storeu_ps,
    };
    let (n, w) = (b.n, 16 * b.l);
    let (one, ab) = (_mm256_set1_ps(1.0), a.wrapping_add(p0 * csa));
    let lane_of = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for col in (0..n.div_ceil(w) * w).step_by(16).filter(|&col| col < n) {
        // Lane `(col % w) / 16` of panel `col / w`.
        let bl = b.base.wrapping_add(col / w * b.sq + col % w);
        let mut acc: [[__m256; 2]; R] = [[_mm256_setzero_ps(); 2]; R];
        for p in p0..p1 {
            // SAFETY: p < k: row p of a packed panel's lane, 16 readable floats (padding
            // included) by the caller's contract.
            let bv = unsafe {
                let row = bl.add(p * b.sp);
                [_mm256_loadu_ps(row), _mm256_loadu_ps(row.add(8))]
            };
            for (r, acc) in acc.iter_mut().enumerate() {
                // SAFETY: r < R and p0 ≤ p < p1: element (r, p) of A, readable by contract.
                let av = _mm256_set1_ps(unsafe { *ab.add(r * rsa + (p - p0) * csa) });
                acc[0] = _mm256_fmadd_ps(av, bv[0], acc[0]);
                acc[1] = _mm256_fmadd_ps(av, bv[1], acc[1]);
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            for (h, &acc) in acc.iter().enumerate() {
                let valid = (n - col).saturating_sub(8 * h).min(8);
                let cr = c.wrapping_add(r * ldc + col + 8 * h);
                let mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(valid as i32), lane_of);
                // SAFETY: the columns `col + 8h + j` for j < `valid` are below `n`: of row r,
                // writable (so readable) by the caller's contract; the masked load and store
                // touch only those, the plain ones all 8 only when `valid` is 8.
                unsafe {
                    let cv = match (betap != 0.0, valid) {
                        (false, _) => _mm256_setzero_ps(),
                        (true, 8) => _mm256_mul_ps(_mm256_loadu_ps(cr), _mm256_set1_ps(betap)),
                        (true, _) => {
                            _mm256_mul_ps(_mm256_maskload_ps(cr, mask), _mm256_set1_ps(betap))
                        }
                    };
                    let v = _mm256_fmadd_ps(one, acc, cv);
                    match valid {
                        8 => _mm256_storeu_ps(cr, v),
                        1.. => _mm256_maskstore_ps(cr, mask, v),
                        0 => {}
                    }
                }
            }
        }
    }
    R
}
