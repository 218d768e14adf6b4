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
//!   non-zero `PREFETCH_BYTES` of gathered data ahead, so several gathers are in flight at
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
//! This file holds the checks and the split into tasks; `kernels::spmm_rows` the row level
//! (the CSR rows as the kernels read them, the prefetch distance, the generic strided path, the
//! choice of column-block widths). The serial fast-path row kernel (the AVX2 build chosen at
//! run time, the unchecked reads of `X` rows after a per-task index check, the prefetch hint)
//! is in `kernels::raw`, the crate's only `unsafe` code.

use ndarray::{ArrayView2, ArrayViewMut2, Axis};

pub(crate) use super::spmm_rows::prefetch_distance;
use super::spmm_rows::Rows;
use super::{raw, shape_panic, CsrView};
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
    spmm_tiled(alpha, a, x, beta, out, par, x.ncols());
}

/// [`spmm`] in column tiles: an outer loop over tiles of `tile` columns of `X` and `out` (the
/// last one narrower), each a parallel pass over all rows, so that one tile of every row of
/// `X` (`k·tile` elements) can stay in the last-level cache while the rows are gathered
/// ([`tile_width`] picks `tile` for a cache size). Every output element is computed in the same
/// order as by [`spmm`], so the result is the same bit for bit for any `tile`; `tile ≥ d` is
/// [`spmm`]. The cost: `A`'s indices and values are read once per tile.
///
/// # Panics
/// If the shapes do not agree.
#[track_caller]
pub(crate) fn spmm_tiled<F: Scalar>(
    alpha: F,
    a: CsrView<'_, F>,
    x: ArrayView2<'_, F>,
    beta: F,
    out: ArrayViewMut2<'_, F>,
    par: Par,
    tile: usize,
) {
    let (m, k) = a.shape();
    if !a.is_csr() || x.nrows() != k || out.dim() != (m, x.ncols()) {
        shape_panic("spmm", &[("a", (m, k)), ("x", x.dim()), ("out", out.dim())]);
    }
    let ip = a.indptr();
    let ip = ip.raw_storage();
    let rows = Rows {
        ip,
        off: ip[0],
        idx: a.indices(),
        val: a.data(),
    };
    let _span = super::profile::span(super::profile::Phase::Spmm, || super::profile::Work::Spmm {
        rows: m,
        nnz: a.nnz(),
        d: x.ncols(),
    });
    tiled(alpha, &rows, x, beta, out, m, tile, par);
}

/// The tile width for an SpMM gathering from `k` rows of `d` elements of `elem_bytes` each,
/// for a last-level cache of `cache_bytes`: `d` when all of `X` takes at most half the cache,
/// otherwise the widest of 64, 32, 16 and 8 columns (below `d`) whose tile does, and 8 when
/// even that one does not fit (the column tiles alone cannot bring such a graph into cache).
pub(crate) fn tile_width(k: usize, d: usize, elem_bytes: usize, cache_bytes: usize) -> usize {
    let budget = cache_bytes / 2;
    let bytes = |t: usize| k.saturating_mul(t).saturating_mul(elem_bytes);
    if d <= 8 || bytes(d) <= budget {
        return d.max(1);
    }
    [64, 32, 16]
        .into_iter()
        .find(|&t| t < d && bytes(t) <= budget)
        .unwrap_or(8)
}

/// Column tiles of `tile` columns (the last one narrower), each a parallel pass over the rows.
fn tiled<F: Scalar>(
    alpha: F,
    rows: &Rows<'_, F>,
    x: ArrayView2<'_, F>,
    beta: F,
    mut out: ArrayViewMut2<'_, F>,
    m: usize,
    tile: usize,
    par: Par,
) {
    let d = x.ncols();
    let tile = tile.clamp(1, d.max(1));
    let mut c0 = 0;
    loop {
        let c1 = (c0 + tile).min(d);
        let o = out.slice_mut(ndarray::s![.., c0..c1]);
        split(alpha, rows, x, c0, beta, o, 0, m, (c1 - c0).max(1), par);
        c0 = c1;
        if c0 >= d {
            break;
        }
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
    c_base: usize,
    beta: F,
    out: ArrayViewMut2<'_, F>,
    lo: usize,
    hi: usize,
    d: usize,
    par: Par,
) {
    let w = work(rows.ip, lo, hi);
    if par == Par::Seq || hi - lo < 2 || w.saturating_mul(d) <= SPMM_TASK_WORK {
        raw::spmm_rows(alpha, rows, x, c_base, beta, out, lo);
        return;
    }
    // The row where (nnz + rows) crosses half of this range's work: a monotone function of r.
    let half = w / 2;
    let mid = lo + (lo..hi).collect_mid(|r| work(rows.ip, lo, r) <= half);
    let mid = mid.clamp(lo + 1, hi - 1);
    let (top, bottom) = out.split_at(Axis(0), mid - lo);
    rayon::join(
        || split(alpha, rows, x, c_base, beta, top, lo, mid, d, par),
        || split(alpha, rows, x, c_base, beta, bottom, mid, hi, d, par),
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
    fn prefetch_distance_is_about_4_kib_of_rows_or_16_of_wide_ones() {
        assert_eq!(prefetch_distance::<f32>(16), 64);
        assert_eq!(prefetch_distance::<f32>(128), 8);
        assert_eq!(prefetch_distance::<f32>(255), 4);
        assert_eq!(prefetch_distance::<f32>(256), 16);
        assert_eq!(prefetch_distance::<f64>(128), 16);
        assert_eq!(prefetch_distance::<f64>(256), 8);
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
        for d in [
            1, 3, 7, 8, 12, 16, 32, 40, 64, 65, 100, 128, 130, 192, 256, 257,
        ] {
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

    /// Column tiles of any width give the bits of the untiled kernel (f32 and f64, contiguous
    /// and strided `X`, 1 or 2 threads).
    fn tiles_match_untiled<F: Scalar>() {
        let a = random_csr::<F>(300, 257, 11);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        for d in [1, 7, 16, 40, 64, 100, 128, 256] {
            let x = Array2::from_shape_fn((257, d), |(i, c)| {
                F::from_f64_lossy(((i * 37 + c * 53) % 997) as f64 / 83.0 - 6.0)
            });
            let xt = x.t().as_standard_layout().into_owned();
            let out0 = Array2::from_shape_fn((300, d), |(i, c)| {
                F::from_f64_lossy(((i * 13 + c * 7) % 101) as f64 / 9.0 - 5.0)
            });
            for (alpha, beta) in [(1.0, 0.0), (-0.75, 1.0), (0.3, -1.7)] {
                let (alpha, beta) = (F::from_f64_lossy(alpha), F::from_f64_lossy(beta));
                let mut whole = out0.clone();
                spmm(alpha, a.view(), x.view(), beta, whole.view_mut(), Par::Seq);
                for tile in [1, 3, 8, 16, 32, 64, 100, 1000] {
                    for (xv, par) in [(x.view(), Par::Rayon), (xt.t(), Par::Seq)] {
                        let mut t = out0.clone();
                        pool.install(|| {
                            spmm_tiled(alpha, a.view(), xv, beta, t.view_mut(), par, tile)
                        });
                        let same = t.iter().zip(whole.iter()).all(|(u, v)| {
                            u.to_f64_lossless().to_bits() == v.to_f64_lossless().to_bits()
                        });
                        assert!(same, "d = {d}, tile = {tile}, {par:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn tiles_match_untiled_bitwise() {
        tiles_match_untiled::<f32>();
        tiles_match_untiled::<f64>();
    }

    #[test]
    fn tile_width_fits_half_the_cache() {
        // All of X fits: no tiles.
        assert_eq!(tile_width(1000, 128, 4, 1 << 20), 128);
        // 169,343 rows in 32 MiB: 16 MiB / (169,343 · 4 B) = 24 columns → 16.
        assert_eq!(tile_width(169_343, 128, 4, 32 << 20), 16);
        assert_eq!(tile_width(169_343, 256, 4, 128 << 20), 64);
        // Nothing fits: the narrowest tile.
        assert_eq!(tile_width(2_449_029, 256, 4, 32 << 20), 8);
        assert_eq!(tile_width(2_449_029, 4, 4, 32 << 20), 4);
        assert_eq!(tile_width(10, 0, 4, 1 << 20), 1);
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
