//! Deterministic row loops: element-wise work over the rows of an n × d array, split into chunks
//! whose size depends on the width only (never on the thread count), so results are
//! bit-identical for any number of threads, [`Par::Seq`] included; and the per-chunk partial
//! sums over rows on the reduction grid ([`grid_rows`], `chunk_sums`), which
//! [`Sums`](crate::graph::Sums) combines exactly into sums across nodes.

use std::ops::Range;

use ndarray::{ArrayViewMut1, ArrayViewMut2, Axis};
use rayon::prelude::*;

use crate::{Par, Scalar};

/// Elements per task of the chunked loops (rows per chunk = this / d).
pub(crate) const CHUNK_ELEMS: usize = 1 << 14;

/// Rows per chunk for width `d`: depends on the width only, never on the thread count.
pub(crate) fn chunk_rows(d: usize) -> usize {
    (CHUNK_ELEMS / d.max(1)).max(1)
}

/// Rows per chunk of the reduction grid of a graph of `n` nodes: the power of two at or below
/// n/4, within 64..=1024 (so a small graph still has at least four chunks, and every chunk's
/// partial is formed from many rows). It depends on the node count only: never on the thread
/// count or the number of ranks. A row-partitioned run cuts its
/// ranges on this grid, and every sum across nodes is formed from the chunks' partials combined
/// exactly, so it is the same for any number of threads and ranks.
pub fn grid_rows(n: usize) -> usize {
    let q = (n / 4).max(1);
    (1usize << (usize::BITS - 1 - q.leading_zeros())).clamp(64, 1024)
}

/// The most chunks of the grid any m ≤ n rows of a graph of m or more nodes fall in:
/// max(8, ⌈n/1024⌉). (Below 4,096 rows the grid grows with the rows and a range of rows spans
/// at most 8 chunks; above, the grid is 1,024 rows.) Growing with n, so that buffers sized for
/// n rows hold the chunks of every pass over fewer.
pub(crate) fn chunk_bound(n: usize) -> usize {
    n.div_ceil(1024).max(8)
}

/// Length of the `parts` buffer of [`chunk_sums`] for at most n rows of a graph of at least as
/// many nodes and sums of `len` values: [`chunk_bound`]`(n)·len` (it grows with n).
pub(crate) fn parts_len(n: usize, len: usize) -> usize {
    chunk_bound(n) * len
}

/// `parts[c·len .. (c+1)·len]` ← Σ over the rows i of chunk c (rows `c·grid .. (c+1)·grid` of
/// n) of what `f(i, acc)` adds into `acc`, in f64, rows folded in order; chunks in parallel
/// under [`Par::Rayon`]. Returns the number of chunks. Allocates nothing. The chunks' partials
/// are combined exactly by the caller
/// ([`Sums::sum_rows`](crate::graph::Sums::sum_rows)).
///
/// # Panics
/// If `parts` is shorter than `n.div_ceil(grid) · len`, or `grid` is 0.
#[track_caller]
pub(crate) fn chunk_sums(
    n: usize,
    grid: usize,
    parts: &mut [f64],
    len: usize,
    f: &(dyn Fn(usize, &mut [f64]) + Sync),
    par: Par,
) -> usize {
    assert!(grid > 0, "chunk_sums: grid of 0 rows");
    let chunks = n.div_ceil(grid);
    if len == 0 {
        return chunks;
    }
    let parts = &mut parts[..chunks * len];
    parts.fill(0.0);
    let chunk = |(c, acc): (usize, &mut [f64])| {
        let rows: Range<usize> = c * grid..((c + 1) * grid).min(n);
        for i in rows {
            f(i, acc);
        }
    };
    match par {
        Par::Seq => parts.chunks_mut(len).enumerate().for_each(chunk),
        Par::Rayon => parts.par_chunks_mut(len).enumerate().for_each(chunk),
    }
    chunks
}

/// Calls `f(i, out_i)` for every row i of `out`, over row chunks (in parallel under
/// [`Par::Rayon`]); allocates nothing when `out` is in standard layout.
pub(crate) fn for_each_row<F: Scalar>(
    mut out: ArrayViewMut2<'_, F>,
    par: Par,
    f: impl Fn(usize, ArrayViewMut1<'_, F>) + Sync,
) {
    let d = out.ncols();
    let step = chunk_rows(d);
    if let (Some(sl), true) = (out.as_slice_mut(), d > 0) {
        let chunk = |(c, chunk): (usize, &mut [F])| {
            for (r, row) in chunk.chunks_exact_mut(d).enumerate() {
                f(c * step + r, ArrayViewMut1::from(row));
            }
        };
        match par {
            Par::Seq => sl.chunks_mut(step * d).enumerate().for_each(chunk),
            Par::Rayon => sl.par_chunks_mut(step * d).enumerate().for_each(chunk),
        }
        return;
    }
    for (i, row) in out.axis_iter_mut(Axis(0)).enumerate() {
        f(i, row);
    }
}

/// Calls `f(i, a_i, b_i)` for every row i of two arrays of the same shape, over row chunks;
/// allocates nothing when both are in standard layout.
pub(crate) fn for_each_row2<F: Scalar>(
    mut a: ArrayViewMut2<'_, F>,
    mut b: ArrayViewMut2<'_, F>,
    par: Par,
    f: impl Fn(usize, ArrayViewMut1<'_, F>, ArrayViewMut1<'_, F>) + Sync,
) {
    assert_eq!(a.dim(), b.dim(), "for_each_row2: shapes differ");
    let d = a.ncols();
    let step = chunk_rows(d);
    if let (Some(sa), Some(sb), true) = (a.as_slice_mut(), b.as_slice_mut(), d > 0) {
        let chunk = |(c, (ca, cb)): (usize, (&mut [F], &mut [F]))| {
            for (r, (ra, rb)) in ca
                .chunks_exact_mut(d)
                .zip(cb.chunks_exact_mut(d))
                .enumerate()
            {
                f(
                    c * step + r,
                    ArrayViewMut1::from(ra),
                    ArrayViewMut1::from(rb),
                );
            }
        };
        match par {
            Par::Seq => sa
                .chunks_mut(step * d)
                .zip(sb.chunks_mut(step * d))
                .enumerate()
                .for_each(chunk),
            Par::Rayon => sa
                .par_chunks_mut(step * d)
                .zip(sb.par_chunks_mut(step * d))
                .enumerate()
                .for_each(chunk),
        }
        return;
    }
    for (i, (ra, rb)) in a
        .axis_iter_mut(Axis(0))
        .zip(b.axis_iter_mut(Axis(0)))
        .enumerate()
    {
        f(i, ra, rb);
    }
}

/// `out[i]` ← `f(i)` for every row i < `out.len()`, each entry computed independently, over
/// chunks of [`chunk_rows`]`(d)` entries.
pub(crate) fn map_rows_into(
    d: usize,
    out: &mut [f64],
    par: Par,
    f: impl Fn(usize) -> f64 + Sync + Send,
) {
    match par {
        Par::Seq => out.iter_mut().enumerate().for_each(|(i, o)| *o = f(i)),
        Par::Rayon => out
            .par_iter_mut()
            .with_min_len(chunk_rows(d))
            .enumerate()
            .for_each(|(i, o)| *o = f(i)),
    }
}

/// Row `k` of the result is row `rows[k]` of `a`.
pub(crate) fn gather_rows<F: Clone + Send + Sync>(
    a: ndarray::ArrayView2<'_, F>,
    rows: &[u32],
) -> ndarray::Array2<F> {
    use rayon::prelude::*;
    let d = a.ncols();
    // Row by row in parallel, each a copy: the result is the serial one.
    let mut v = Vec::with_capacity(rows.len() * d);
    if d > 0 && !rows.is_empty() {
        v.resize(rows.len() * d, a[[0, 0]].clone());
        v.par_chunks_mut(d).zip(rows).for_each(|(out, &r)| {
            out.iter_mut()
                .zip(a.row(r as usize))
                .for_each(|(o, x)| *o = x.clone());
        });
    }
    ndarray::Array2::from_shape_vec((rows.len(), d), v)
        .unwrap_or_else(|_| unreachable!("rows·d elements were written"))
}

/// [`gather_rows`] into `v` (cleared first; no allocation once it has held as many
/// elements), row-major: `v[r·d + c] = a[rows[r], c]`.
pub(crate) fn gather_rows_into<F: Copy + Send + Sync>(
    a: ndarray::ArrayView2<'_, F>,
    rows: &[u32],
    v: &mut Vec<F>,
) {
    use rayon::prelude::*;
    let d = a.ncols();
    if d == 0 || rows.is_empty() {
        v.clear();
        return;
    }
    // Groups of rows in parallel, each row a copy: the result is the serial one. The rows are
    // read at random, so each copy prefetches the row `AHEAD` rows on (a hint); a result
    // larger than `STREAM_BYTES` is written past the caches (it is read much later, by then
    // evicted anyway), which saves reading each line of it before writing it.
    const GROUP: usize = 256;
    const AHEAD: usize = 8;
    const STREAM_BYTES: usize = 16 << 20;
    let stream = rows.len() * d * std::mem::size_of::<F>() > STREAM_BYTES;
    v.clear();
    v.resize(rows.len() * d, a[[0, 0]]);
    let row_of = |r: u32| a.row(r as usize);
    v.par_chunks_mut(GROUP * d)
        .zip(rows.par_chunks(GROUP))
        .for_each(|(out, rows)| {
            for &r in rows.iter().take(AHEAD) {
                if let Some(s) = row_of(r).to_slice() {
                    crate::kernels::raw::prefetch_slice(s);
                }
            }
            for (k, (out, &r)) in out.chunks_mut(d).zip(rows).enumerate() {
                if let Some(s) = rows.get(k + AHEAD).and_then(|&n| row_of(n).to_slice()) {
                    crate::kernels::raw::prefetch_slice(s);
                }
                let row = row_of(r);
                match row.to_slice() {
                    Some(src) if stream => crate::kernels::raw::copy_streaming(src, out),
                    Some(src) => out.copy_from_slice(src),
                    None => out.iter_mut().zip(row).for_each(|(o, &x)| *o = x),
                }
            }
            if stream {
                crate::kernels::raw::store_fence();
            }
        });
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_chunk_bound_covers_every_smaller_row_count_and_grows() {
        let mut prev = 0;
        for n in 1..20_000usize {
            let b = super::chunk_bound(n);
            assert!(b >= prev, "grows at {n}");
            assert!(n.div_ceil(super::grid_rows(n)) <= b, "covers {n}");
            prev = b;
        }
    }

    use super::*;

    #[test]
    fn the_grid_depends_on_the_node_count_only() {
        assert_eq!(grid_rows(0), 64);
        assert_eq!(grid_rows(2708), 512);
        assert_eq!(grid_rows(1023), 128);
        assert_eq!(grid_rows(1024), 256);
        assert_eq!(grid_rows(4096), 1024);
        assert_eq!(grid_rows(169_343), 1024);
        assert_eq!(grid_rows(usize::MAX / 2), 1024);
        // parts_len never undercounts a graph with more nodes than rows held.
        for (n, big) in [(100, 5000), (3000, 200_000), (70_000, 70_000)] {
            assert!(parts_len(n, 3) >= n.div_ceil(grid_rows(big)) * 3);
        }
        assert_eq!(
            parts_len(2708, 2),
            8 * 2,
            "the bound of any row count up to 2,708"
        );
    }

    #[test]
    fn chunk_sums_fold_the_rows_of_each_chunk_in_order_for_any_par() {
        let n = 3 * 64 + 5;
        let f = |i: usize, acc: &mut [f64]| {
            acc[0] += 1.0 / (i as f64 + 1.0);
            acc[1] += (i as f64).sin();
        };
        let mut p = vec![f64::NAN; 8 + parts_len(n, 2)];
        let mut q = p.clone();
        assert_eq!(chunk_sums(n, 64, &mut p, 2, &f, Par::Seq), 4);
        assert_eq!(chunk_sums(n, 64, &mut q, 2, &f, Par::Rayon), 4);
        assert_eq!(p[..8], q[..8]);
        for c in 0..4 {
            let mut part = [0.0f64; 2];
            for i in c * 64..((c + 1) * 64).min(n) {
                f(i, &mut part);
            }
            assert_eq!(p[2 * c..2 * c + 2], part);
        }
        assert!(p[8].is_nan(), "beyond the chunks is left alone");
    }

    #[test]
    fn gathered_rows_are_the_rows_streamed_or_not() {
        // 17 MiB of f32 rows: past the streaming threshold; and a small gather.
        let (n, d) = (40_000usize, 116usize);
        let a = ndarray::Array2::from_shape_fn((n, d), |(i, j)| (i * d + j) as f32);
        for m in [37_000usize, 300, 1, 0] {
            let rows: Vec<u32> = (0..m).map(|k| ((k * 7_919) % n) as u32).collect();
            let mut v = vec![f32::NAN; 5];
            gather_rows_into(a.view(), &rows, &mut v);
            assert_eq!(v.len(), m * d);
            let want = gather_rows(a.view(), &rows);
            assert_eq!(want.as_slice().unwrap(), &v[..], "{m} rows");
        }
    }

    #[test]
    fn a_streaming_copy_is_the_copy_at_every_alignment_and_length() {
        let src: Vec<u8> = (0..200u8).collect();
        for off_s in 0..4 {
            for off_d in 0..17 {
                for len in [0, 1, 15, 16, 17, 31, 32, 33, 100, 150] {
                    let mut dst = [0xAAu8; 200];
                    crate::kernels::raw::copy_streaming(
                        &src[off_s..off_s + len],
                        &mut dst[off_d..off_d + len],
                    );
                    crate::kernels::raw::store_fence();
                    assert_eq!(&dst[off_d..off_d + len], &src[off_s..off_s + len]);
                    assert!(dst[..off_d].iter().all(|&b| b == 0xAA));
                    assert!(dst[off_d + len..].iter().all(|&b| b == 0xAA));
                }
            }
        }
    }
}
