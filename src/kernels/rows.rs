//! Deterministic row loops: element-wise work over the rows of an n × d array, and f64 sums over
//! rows, split into chunks whose size depends on the width only (never on the thread count), so
//! results are bit-identical for any number of threads, [`Par::Seq`] included.
//!
//! The sums fold the rows of a chunk in order and add the chunks' partial sums in chunk order.
//! They are the local form of a reduction across nodes; layers reach them through
//! [`Propagate::sum_rows`](crate::graph::Propagate::sum_rows), which a row-partitioned backend
//! overrides.

use std::ops::Range;

use ndarray::{ArrayViewMut1, ArrayViewMut2, Axis};
use rayon::prelude::*;

use crate::{Par, Scalar};

/// Elements per task of the chunked loops (rows per chunk = this / d).
pub const CHUNK_ELEMS: usize = 1 << 14;

/// Rows per chunk for width `d`: depends on the width only, never on the thread count.
pub fn chunk_rows(d: usize) -> usize {
    (CHUNK_ELEMS / d.max(1)).max(1)
}

/// Length of the `parts` buffer of [`sum_rows_into`] for n rows of width d and sums of `len`
/// values.
pub fn parts_len(n: usize, d: usize, len: usize) -> usize {
    n.div_ceil(chunk_rows(d)) * len
}

/// `total` (`len` values) ← Σ over rows i < n of what `f(i, acc)` adds into `acc`, in f64, with
/// the chunks' partial sums in `parts` (at least [`parts_len`]`(n, d, len)` long). Rows are folded
/// in order inside a chunk of [`chunk_rows`]`(d)` rows, and the chunks' partial sums are added in
/// order. Allocates nothing.
///
/// # Panics
/// If `parts` is too short.
#[track_caller]
pub fn sum_rows_into(
    n: usize,
    d: usize,
    parts: &mut [f64],
    total: &mut [f64],
    f: &(dyn Fn(usize, &mut [f64]) + Sync),
    par: Par,
) {
    let len = total.len();
    total.fill(0.0);
    if len == 0 {
        return;
    }
    let step = chunk_rows(d);
    let parts = &mut parts[..parts_len(n, d, len)];
    parts.fill(0.0);
    let chunk = |(c, acc): (usize, &mut [f64])| {
        let rows: Range<usize> = c * step..((c + 1) * step).min(n);
        for i in rows {
            f(i, acc);
        }
    };
    match par {
        Par::Seq => parts.chunks_mut(len).enumerate().for_each(chunk),
        Par::Rayon => parts.par_chunks_mut(len).enumerate().for_each(chunk),
    }
    for p in parts.chunks_exact(len) {
        for (t, &v) in total.iter_mut().zip(p) {
            *t += v;
        }
    }
}

/// Calls `f(i, out_i)` for every row i of `out`, over row chunks (in parallel under
/// [`Par::Rayon`]); allocates nothing when `out` is in standard layout.
pub fn for_each_row<F: Scalar>(
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
pub fn for_each_row2<F: Scalar>(
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
pub fn map_rows_into(d: usize, out: &mut [f64], par: Par, f: impl Fn(usize) -> f64 + Sync + Send) {
    match par {
        Par::Seq => out.iter_mut().enumerate().for_each(|(i, o)| *o = f(i)),
        Par::Rayon => out
            .par_iter_mut()
            .with_min_len(chunk_rows(d))
            .enumerate()
            .for_each(|(i, o)| *o = f(i)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_are_independent_of_par_and_fold_chunks_in_order() {
        let n = 3 * chunk_rows(4) + 5;
        let f = |i: usize, acc: &mut [f64]| {
            acc[0] += 1.0 / (i as f64 + 1.0);
            acc[1] += (i as f64).sin();
        };
        let mut p = vec![0.0; parts_len(n, 4, 2)];
        let (mut a, mut b) = ([0.0; 2], [0.0; 2]);
        sum_rows_into(n, 4, &mut p, &mut a, &f, Par::Seq);
        sum_rows_into(n, 4, &mut p, &mut b, &f, Par::Rayon);
        assert_eq!(a, b);
        // The reference: rows folded per chunk, chunks added in order.
        let step = chunk_rows(4);
        let mut want = [0.0f64; 2];
        for c in 0..n.div_ceil(step) {
            let mut part = [0.0f64; 2];
            for i in c * step..((c + 1) * step).min(n) {
                f(i, &mut part);
            }
            want[0] += part[0];
            want[1] += part[1];
        }
        assert_eq!(a, want);
    }
}
