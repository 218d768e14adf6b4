//! The sums across nodes of [`Propagate`](super::Propagate)'s default methods: partials over the
//! chunks of the reduction grid ([`grid_rows`](crate::kernels::rows::grid_rows)), formed in the
//! working type (a GEMM over the chunk's rows, column sums in row order, f64 row folds),
//! combined exactly ([`scalar::exact`](crate::scalar::exact)) in this process, exchanged as
//! integer words with the other processes (`sum_words`), and rounded once.
//!
//! A chunk's partial depends only on its rows, and exact combination neither on the order nor on
//! the grouping of the partials, so a sum is the same bits for any number of threads and of ranks
//! as long as every rank's rows start on the grid — which is what a row partition guarantees
//! ([`dist::backend::partition`](crate::dist::backend::partition)). The local run (one rank) is
//! that run with P = 1.
//!
//! Working memory ([`ReduceScratch`]: the accumulators of one result, 13 words each for `f32`,
//! and one chunk's partial) is the caller's ([`SumScratch`](super::SumScratch)) and reused by
//! every call, so an epoch allocates nothing.

use ndarray::{s, ArrayView2, ArrayViewMut1, ArrayViewMut2};
use rayon::prelude::*;

use crate::kernels::raw::widest;
use crate::kernels::{gemm, CsrView};
use crate::scalar::exact::{add_exactly, Accumulator, ExactSum};
use crate::{Par, Scalar};

/// What [`Sums::t_matmul_rows`](super::Sums::t_matmul_rows) hands its rows to: `(first row,
/// rows of H, the same rows of G)`, the first row on the reduction grid.
pub(crate) type RowSink<'s, F> = dyn FnMut(usize, ArrayView2<'_, F>, ArrayView2<'_, F>) + 's;

/// How partial sums' words are added across processes (`None`: one process, nothing to add).
pub(crate) type SumWords<'a> = &'a dyn Fn(&mut [i64]);

/// Elements per task when adding a partial into its accumulators.
const ADD_TASK: usize = 2048;

/// Rows of Xᵀ per task of a sparse chunk partial.
const ROWS_TASK: usize = 128;

/// The reused working memory of the sums across nodes.
#[derive(Debug)]
pub(crate) struct ReduceScratch<F: Scalar> {
    accs: Vec<F::Exact>,
    accs64: Vec<ExactSum>,
    fast: Vec<f64>,
    spilled: Vec<bool>,
    part: Vec<F>,
    words: Vec<i64>,
}

impl<F: Scalar> Default for ReduceScratch<F> {
    fn default() -> Self {
        ReduceScratch {
            accs: Vec::new(),
            accs64: Vec::new(),
            fast: Vec::new(),
            spilled: Vec::new(),
            part: Vec::new(),
            words: Vec::new(),
        }
    }
}

/// `v` cleared and refilled with `len` copies of `x` (no allocation once it has held `len`).
fn refill<T: Clone>(v: &mut Vec<T>, len: usize, x: T) -> &mut [T] {
    v.clear();
    v.resize(len, x);
    v
}

/// [`refill`], with room for `room` elements made first (so that calls whose `len` varies
/// below `room` allocate once).
fn refill_room<T: Clone>(v: &mut Vec<T>, len: usize, room: usize, x: T) -> &mut [T] {
    v.clear();
    v.reserve(room.max(len));
    v.resize(len, x);
    v
}

/// Chunks of the grid whose weight-gradient partials are formed together (in parallel, one GEMM
/// each) and then added into the accumulators in one pass: the accumulators (13 words each for
/// `f32`) are read and written once per group instead of once per chunk. The grouping changes
/// no bit: exact sums do not depend on it.
pub(crate) const T_MATMUL_GROUP: usize = 8;

/// A block of [`Sums`]: its index, and its `f64` parts, flags and accumulators.
type Block<'b, F> = (
    usize,
    (
        (&'b mut [f64], &'b mut [bool]),
        &'b mut [<F as Scalar>::Exact],
    ),
);

/// Adds `parts[j·len + lo + k]` for every partial j (`count` of them) into the block's sum k
/// ([`Sums::add_parts`]; the block starts at sum `lo = b·ADD_TASK`).
#[inline(always)]
fn add_block<F: Scalar>(
    parts: &[F],
    len: usize,
    count: usize,
    (b, ((fast, spilled), accs)): Block<'_, F>,
) {
    let lo = b * ADD_TASK;
    for j in 0..count {
        let p = &parts[j * len + lo..j * len + lo + fast.len()];
        // Whether every addition of this partial into the block is exact (a check without
        // branches, which vectorises); if so, the additions.
        let exact = fast.iter().zip(p).fold(true, |ok, (&a, &v)| {
            ok & add_exactly(a, v.to_f64_lossless()).1
        });
        if exact {
            for (a, &v) in fast.iter_mut().zip(p) {
                *a += v.to_f64_lossless();
            }
            continue;
        }
        for (k, &v) in p.iter().enumerate() {
            let (s, ok) = add_exactly(fast[k], v.to_f64_lossless());
            if ok {
                fast[k] = s;
                continue;
            }
            // The first spill of sum k resets its accumulator; the f64 part moves in.
            if !spilled[k] {
                spilled[k] = true;
                accs[k] = F::Exact::default();
            }
            accs[k].add(std::mem::replace(&mut fast[k], 0.0));
            v.add_to(&mut accs[k]);
        }
    }
}

/// Sums of partials, each an exact sum held in an `f64` while every addition into it is exact,
/// and in an exact accumulator from the first one that would round.
///
/// Sum k is `fast[k]`, plus `accs[k]` where `spilled[k]` (an accumulator is reset when its sum
/// first spills, so `accs` is never cleared as a whole). The `f64` parts are 8 bytes a sum
/// instead of an accumulator's 104 (for `f32`): the partials of a weight gradient are added
/// in a pass over 0.5 MB instead of 6.8 MB. Either way a sum is the same exact number, so its
/// rounding is the same bits.
struct Sums<'a, F: Scalar> {
    fast: &'a mut [f64],
    spilled: &'a mut [bool],
    accs: &'a mut [F::Exact],
}

impl<'a, F: Scalar> Sums<'a, F> {
    /// `len` zero sums in the scratch's buffers (allocated only to grow).
    fn new(
        len: usize,
        fast: &'a mut Vec<f64>,
        spilled: &'a mut Vec<bool>,
        accs: &'a mut Vec<F::Exact>,
    ) -> Self {
        if accs.len() < len {
            accs.resize(len, F::Exact::default());
        }
        Sums {
            fast: refill(fast, len, 0.0),
            spilled: refill(spilled, len, false),
            accs: &mut accs[..len],
        }
    }

    /// Adds `parts[j·len + k]` for every partial j into sum k (`len` sums), in parallel over
    /// blocks of [`ADD_TASK`] sums under [`Par::Rayon`], each block's sums touched once.
    fn add_parts(&mut self, parts: &[F], par: Par) {
        let len = self.fast.len();
        if len == 0 {
            return;
        }
        let count = parts.len() / len;
        // Each block compiled for the widest vectors the CPU has (the same bits on any).
        let add = |blk: Block<'_, F>| {
            widest(
                #[inline(always)]
                || add_block::<F>(parts, len, count, blk),
            )
        };
        let blocks = self
            .fast
            .chunks_mut(ADD_TASK)
            .zip(self.spilled.chunks_mut(ADD_TASK))
            .zip(self.accs.chunks_mut(ADD_TASK));
        match par {
            Par::Seq => blocks.enumerate().for_each(add),
            Par::Rayon => self
                .fast
                .par_chunks_mut(ADD_TASK)
                .zip(self.spilled.par_chunks_mut(ADD_TASK))
                .zip(self.accs.par_chunks_mut(ADD_TASK))
                .enumerate()
                .for_each(add),
        }
    }

    /// The sums — across processes through `sum_words` when given — rounded once: `emit(k, v)`
    /// for each. One process reads a sum that never spilled from its `f64` alone (an exact sum
    /// held in an `f64` is its own rounding; `+ 0.0` gives an accumulator's +0 for zero).
    fn finish(
        self,
        words: &mut Vec<i64>,
        sum_words: Option<SumWords<'_>>,
        mut emit: impl FnMut(usize, f64),
    ) {
        let Sums {
            fast,
            spilled,
            accs,
        } = self;
        if sum_words.is_none() {
            for (k, (&f, &sp)) in fast.iter().zip(spilled.iter()).enumerate() {
                if sp {
                    accs[k].add(f);
                    emit(k, accs[k].take_value());
                } else {
                    emit(k, f + 0.0);
                }
            }
            return;
        }
        // Every sum into its accumulator, whose words are exchanged.
        for ((a, &f), &sp) in accs.iter_mut().zip(fast.iter()).zip(spilled.iter()) {
            if !sp {
                *a = F::Exact::default();
            }
            if f != 0.0 {
                a.add(f);
            }
        }
        finish(accs, words, sum_words, emit);
    }
}

/// The exact sums of `accs` — across processes through `sum_words` when given — rounded once:
/// `emit(k, v)` for each.
fn finish<A: Accumulator>(
    accs: &mut [A],
    words: &mut Vec<i64>,
    sum_words: Option<SumWords<'_>>,
    mut emit: impl FnMut(usize, f64),
) {
    let Some(sum_words) = sum_words else {
        for (k, a) in accs.iter_mut().enumerate() {
            emit(k, a.take_value());
        }
        return;
    };
    let w = A::WORDS;
    let words = refill(words, accs.len() * w, 0);
    for (a, out) in accs.iter().zip(words.chunks_exact_mut(w)) {
        a.to_words(out);
    }
    sum_words(words);
    for (k, ws) in words.chunks_exact(w).enumerate() {
        emit(k, A::from_words(ws).take_value());
    }
}

/// t ← t + x·g element by element (`t` and `g` of one length; `x·g` rounded, then added, as
/// written: the same bits for every length), with the common widths unrolled at compile time.
#[inline(always)]
fn add_row<F: Scalar>(t: &mut [F], x: F, g: &[F]) {
    debug_assert_eq!(t.len(), g.len());
    match t.len() {
        16 => fixed::<F, 16>(t, x, g),
        32 => fixed::<F, 32>(t, x, g),
        64 => fixed::<F, 64>(t, x, g),
        _ => {
            for (t, &v) in t.iter_mut().zip(g) {
                *t += x * v;
            }
        }
    }
}

/// [`add_row`] at a compile-time width `W` (`t` and `g` hold `W` elements each).
#[inline(always)]
fn fixed<F: Scalar, const W: usize>(t: &mut [F], x: F, g: &[F]) {
    let (Ok(t), Ok(g)) = (<&mut [F; W]>::try_from(t), <&[F; W]>::try_from(g)) else {
        unreachable!("add_row: {W} elements each")
    };
    for k in 0..W {
        t[k] += x * g[k];
    }
}

/// Σ x·G[j, c0 .. c0 + W] over the entries (j, x) in order, from 0: one chunk's partial of a
/// row of Xᵀ·G, each element folded as [`add_row`] folds it (the same bits), `gs` being G's
/// rows (`c` wide).
#[inline(always)]
fn chunk_partial<F: Scalar, const W: usize>(
    idx: &[u32],
    val: &[F],
    gs: &[F],
    c: usize,
    c0: usize,
) -> [F; W] {
    let mut t = [F::zero(); W];
    for (&j, &x) in idx.iter().zip(val) {
        let start = j as usize * c + c0;
        fixed::<F, W>(&mut t, x, &gs[start..start + W]);
    }
    t
}

/// Columns of Xᵀ·G at most this many at a time in [`t_matmul_sparse`] (a block's partial and
/// its sums stay in registers or on the stack).
const BLOCK: usize = 64;

/// The operands of [`t_matmul_sparse`]: the CSR of Xᵀ and G (`c` columns; `g_rows` its rows
/// as one slice when it is row-major), summed over `grid`-row chunks.
struct SparseT<'a, F> {
    indptr: &'a [usize],
    indices: &'a [u32],
    data: &'a [F],
    g: ArrayView2<'a, F>,
    g_rows: Option<&'a [F]>,
    c: usize,
    grid: usize,
}

/// Columns `c0 .. c0 + w` of row `f` of Xᵀ·G (`w` ≤ [`BLOCK`]): the row's entries chunk by
/// chunk of the grid, each chunk's partial folded in stored order and handed to `add(partial)`
/// (its `w` values); only chunks where the row has entries. Inlined into its caller, so that
/// under [`widest`](crate::kernels::raw) it is built with the caller's vector instructions.
#[inline(always)]
fn sparse_row_block<F: Scalar>(
    t: &SparseT<'_, F>,
    f: usize,
    c0: usize,
    w: usize,
    mut add: impl FnMut(&[F]),
) {
    let (indices, data, c) = (t.indices, t.data, t.c);
    let (lo, hi) = (t.indptr[f], t.indptr[f + 1]);
    let mut e = lo;
    while e < hi {
        // The row's entries in this chunk of the grid: e .. e1.
        let end = (indices[e] as usize / t.grid + 1) * t.grid;
        let mut e1 = e + 1;
        while e1 < hi && (indices[e1] as usize) < end {
            e1 += 1;
        }
        let (ix, xs) = (&indices[e..e1], &data[e..e1]);
        match (t.g_rows, w) {
            // The common widths at compile time: the partial stays in registers.
            (Some(gs), 16) => add(&chunk_partial::<F, 16>(ix, xs, gs, c, c0)),
            (Some(gs), 32) => add(&chunk_partial::<F, 32>(ix, xs, gs, c, c0)),
            (Some(gs), 64) => add(&chunk_partial::<F, 64>(ix, xs, gs, c, c0)),
            _ => {
                let mut tmp = [F::zero(); BLOCK];
                for (&j, &x) in ix.iter().zip(xs) {
                    let j = j as usize;
                    match t.g_rows {
                        Some(gs) => add_row(&mut tmp[..w], x, &gs[j * c + c0..j * c + c0 + w]),
                        None => {
                            let gr = t.g.row(j);
                            for (k, t) in tmp[..w].iter_mut().enumerate() {
                                *t += x * gr[c0 + k];
                            }
                        }
                    }
                }
                add(&tmp[..w]);
            }
        }
        e = e1;
    }
}

/// out ← α·s + β·out for an exact sum s (β = 0 overwrites).
fn axpby<F: Scalar>(alpha: F, s: f64, beta: F, out: &mut F) {
    let v = alpha * F::from_f64_lossy(s);
    *out = if beta == F::zero() {
        v
    } else {
        v + beta * *out
    };
}

/// out ← α·Hᵀ·G + β·out over the `grid`-row chunks of H's and G's rows.
#[allow(clippy::too_many_arguments)]
#[track_caller]
pub(crate) fn t_matmul<F: Scalar>(
    grid: usize,
    alpha: F,
    h: ArrayView2<'_, F>,
    g: ArrayView2<'_, F>,
    beta: F,
    out: ArrayViewMut2<'_, F>,
    par: Par,
    scratch: &mut ReduceScratch<F>,
    sum_words: Option<SumWords<'_>>,
) {
    let (a, c) = (h.ncols(), g.ncols());
    assert_eq!(out.dim(), (a, c), "t_matmul: out vs {a} × {c}");
    t_matmul_rows(
        grid,
        alpha,
        beta,
        out,
        par,
        scratch,
        sum_words,
        &mut |sink| sink(0, h, g),
    );
}

/// out ← α·Hᵀ·G + β·out where `fill` hands the rows of H and G to its sink block by block
/// (each block's first row on the `grid`, blocks in any order, every row once): the partial of
/// every grid chunk is the GEMM over its rows, as in [`t_matmul`], and exact sums do not depend
/// on which block brought a chunk, so the result is [`t_matmul`]'s bit for bit.
///
/// # Panics
/// If a block starts off the grid, or its shapes disagree with `out`.
#[allow(clippy::too_many_arguments)]
#[track_caller]
pub(crate) fn t_matmul_rows<F: Scalar>(
    grid: usize,
    alpha: F,
    beta: F,
    mut out: ArrayViewMut2<'_, F>,
    par: Par,
    scratch: &mut ReduceScratch<F>,
    sum_words: Option<SumWords<'_>>,
    fill: &mut dyn FnMut(&mut RowSink<'_, F>),
) {
    let (a, c) = out.dim();
    let ReduceScratch {
        accs,
        part,
        words,
        fast,
        spilled,
        ..
    } = scratch;
    let mut sums = Sums::<F>::new(a * c, fast, spilled, accs);
    let grid = grid.max(1);
    let mut sink = |first_row: usize, h: ArrayView2<'_, F>, g: ArrayView2<'_, F>| {
        let n = h.nrows();
        assert!(
            h.ncols() == a && g.dim() == (n, c),
            "t_matmul: h is {n} × {}, g {:?}, out {a} × {c}",
            h.ncols(),
            g.dim()
        );
        assert_eq!(
            first_row % grid,
            0,
            "t_matmul: a block at row {first_row}, off the grid of {grid}"
        );
        if a * c == 0 || n == 0 {
            return;
        }
        let group = T_MATMUL_GROUP.min(n.div_ceil(grid)).max(1);
        // (Every partial is overwritten by its GEMM: the buffer only grows, never refilled, so
        // a call in many blocks clears nothing per block. It holds the largest group at once,
        // so that calls over other row counts do not grow it again.)
        if part.len() < T_MATMUL_GROUP * a * c {
            part.resize(T_MATMUL_GROUP * a * c, F::zero());
        }
        // Chunk `start / grid`'s partial, one GEMM over its rows.
        let partial = |start: usize, p: &mut [F]| {
            let rows = start..(start + grid).min(n);
            let Ok(pv) = ArrayViewMut2::from_shape((a, c), p) else {
                unreachable!("t_matmul: a partial of {a} × {c}")
            };
            gemm(
                F::one(),
                h.slice(s![rows.clone(), ..]).t(),
                g.slice(s![rows, ..]),
                F::zero(),
                pv,
                par,
            );
        };
        for first in (0..n).step_by(grid * group) {
            let count = (n - first).div_ceil(grid).min(group);
            let parts = &mut part[..count * a * c];
            match par {
                Par::Seq => parts
                    .chunks_mut(a * c)
                    .enumerate()
                    .for_each(|(j, p)| partial(first + j * grid, p)),
                Par::Rayon => parts
                    .par_chunks_mut(a * c)
                    .enumerate()
                    .for_each(|(j, p)| partial(first + j * grid, p)),
            }
            sums.add_parts(parts, par);
        }
    };
    fill(&mut sink);
    sums.finish(words, sum_words, |k, v| {
        axpby(alpha, v, beta, &mut out[[k / c.max(1), k % c.max(1)]])
    });
}

/// Row `f` of Xᵀ·G into `o` (out ← Xᵀ·G + β·out) in one process: [`sparse_row_block`]'s
/// partials summed in f64, every addition checked for rounding (Knuth's TwoSum); a block where
/// one rounds is summed again in the exact accumulators `acc`. An f64 sum of partials that
/// never rounded is their exact sum, and is its own rounding to f64: the same bits either way.
#[inline(always)]
fn sparse_fast_row<F: Scalar>(
    t: &SparseT<'_, F>,
    acc: &mut [F::Exact; BLOCK],
    (f, o): (usize, &mut [F]),
    beta: F,
) {
    let c = t.c;
    for c0 in (0..c).step_by(BLOCK) {
        let w = BLOCK.min(c - c0);
        let mut fast = [0.0f64; BLOCK];
        let mut all_exact = true;
        sparse_row_block(t, f, c0, w, |part| {
            // A local flag per partial (not the captured one in the loop): the loop then
            // vectorises.
            let mut ok = true;
            for (a, &v) in fast.iter_mut().zip(part) {
                let (s, exact) = add_exactly(*a, v.to_f64_lossless());
                ok &= exact;
                *a = s;
            }
            all_exact &= ok;
        });
        if all_exact {
            for (&v, o) in fast[..w].iter().zip(&mut o[c0..c0 + w]) {
                axpby(F::one(), v + 0.0, beta, o);
            }
            continue;
        }
        acc[..w].fill(F::Exact::default());
        sparse_row_block(t, f, c0, w, |p| add_exact(&mut acc[..w], p));
        for (a, o) in acc[..w].iter_mut().zip(&mut o[c0..c0 + w]) {
            axpby(F::one(), a.take_value(), beta, o);
        }
    }
}

/// A chunk's partial added exactly into `acc` (its zeros skipped).
fn add_exact<F: Scalar>(acc: &mut [F::Exact], part: &[F]) {
    for (acc, &t) in acc.iter_mut().zip(part) {
        if t != F::zero() {
            t.add_to(acc);
        }
    }
}

/// out ← Xᵀ·G + β·out for sparse X given as the CSR of Xᵀ (column indices sorted in each
/// row), over the `grid`-row chunks of G's rows (X's columns).
#[track_caller]
pub(crate) fn t_matmul_sparse<F: Scalar>(
    grid: usize,
    x_t: CsrView<'_, F>,
    g: ArrayView2<'_, F>,
    beta: F,
    mut out: ArrayViewMut2<'_, F>,
    par: Par,
    scratch: &mut ReduceScratch<F>,
    sum_words: Option<SumWords<'_>>,
) {
    let (a, n) = (x_t.rows(), x_t.cols());
    let c = g.ncols();
    assert_eq!(
        g.nrows(),
        n,
        "t_matmul_sparse: xᵀ is {a} × {n}, g has {} rows",
        g.nrows()
    );
    assert_eq!(out.dim(), (a, c), "t_matmul_sparse: out vs {a} × {c}");
    let indptr = x_t.indptr();
    let indptr = indptr.raw_storage();
    let (indices, data) = (x_t.indices(), x_t.data());
    let c1 = c.max(1);
    let grid = grid.max(1);
    let t = SparseT {
        indptr,
        indices,
        data,
        g,
        // G's rows as one slice when it is row-major (the usual case), read without views.
        g_rows: g.as_slice(),
        c,
        grid,
    };
    if let (None, Some(os)) = (sum_words, out.as_slice_mut()) {
        // One process and a row-major `out`: each row's sums are finished as soon as they are
        // formed, in one block of accumulators per task (no n-long array to clear and read
        // back). The same exact sums, rounded once: the same bits as below. Each row is
        // compiled for the widest vectors the CPU has (the same bits on any).
        let row = |acc: &mut [F::Exact; BLOCK], fo: (usize, &mut [F])| {
            widest(
                #[inline(always)]
                || sparse_fast_row(&t, acc, fo, beta),
            )
        };
        let init = || std::array::from_fn(|_| F::Exact::default());
        match par {
            Par::Seq => {
                let mut acc = init();
                os.chunks_mut(c1)
                    .enumerate()
                    .for_each(|fo| row(&mut acc, fo));
            }
            Par::Rayon => os
                .par_chunks_mut(c1)
                .enumerate()
                .with_min_len(ROWS_TASK)
                .for_each_init(init, row),
        }
        return;
    }
    let ReduceScratch { accs, words, .. } = scratch;
    let accs = refill(accs, a * c, F::Exact::default());
    let row = |(f, acc): (usize, &mut [F::Exact])| {
        for c0 in (0..c).step_by(BLOCK) {
            let w = BLOCK.min(c - c0);
            sparse_row_block(&t, f, c0, w, |p| add_exact(&mut acc[c0..c0 + w], p));
        }
    };
    match par {
        Par::Seq => accs.chunks_mut(c1).enumerate().for_each(row),
        Par::Rayon => accs
            .par_chunks_mut(c1)
            .enumerate()
            .with_min_len(ROWS_TASK)
            .for_each(row),
    }
    finish(accs, words, sum_words, |k, v| {
        axpby(F::one(), v, beta, &mut out[[k / c1, k % c1]])
    });
}

/// out ← Gᵀ·1 + β·out: column sums over the `grid`-row chunks of G, each folded in row order.
#[track_caller]
pub(crate) fn col_sum<F: Scalar>(
    grid: usize,
    g: ArrayView2<'_, F>,
    beta: F,
    mut out: ArrayViewMut1<'_, F>,
    par: Par,
    scratch: &mut ReduceScratch<F>,
    sum_words: Option<SumWords<'_>>,
) {
    let (n, c) = g.dim();
    assert_eq!(
        out.len(),
        c,
        "col_sum: out has {} of {c} columns",
        out.len()
    );
    let grid = grid.max(1);
    let chunks = n.div_ceil(grid);
    let ReduceScratch {
        accs,
        part,
        words,
        fast,
        spilled,
        ..
    } = scratch;
    // (Room for the chunks of any row count up to n: a pass over fewer rows does not grow it.)
    let room = crate::kernels::rows::chunk_bound(n) * c;
    let parts = refill_room(part, chunks * c, room, F::zero());
    let g_rows = g.as_slice();
    let fold = |(k, p): (usize, &mut [F])| {
        let rows = k * grid..((k + 1) * grid).min(n);
        match g_rows {
            // Row-major G: its rows as slices (the same additions, vectorised for the widest
            // vectors the CPU has).
            Some(gs) => widest(
                #[inline(always)]
                || {
                    for i in rows {
                        add_row(p, F::one(), &gs[i * c..(i + 1) * c]);
                    }
                },
            ),
            None => {
                for i in rows {
                    for (s, &v) in p.iter_mut().zip(g.row(i)) {
                        *s += v;
                    }
                }
            }
        }
    };
    if c > 0 {
        match par {
            Par::Seq => parts.chunks_mut(c).enumerate().for_each(fold),
            Par::Rayon => parts.par_chunks_mut(c).enumerate().for_each(fold),
        }
    }
    let mut sums = Sums::<F>::new(c, fast, spilled, accs);
    sums.add_parts(&parts[..chunks * c], Par::Seq);
    sums.finish(words, sum_words, |k, v| {
        axpby(F::one(), v, beta, &mut out[k])
    });
}

/// `total` ← the exact sums over chunks of the chunks' f64 partials `parts` (`len` values per
/// chunk, `chunks` of them) and across processes, rounded once.
pub(crate) fn combine_f64<F: Scalar>(
    parts: &[f64],
    chunks: usize,
    total: &mut [f64],
    scratch: &mut ReduceScratch<F>,
    sum_words: Option<SumWords<'_>>,
) {
    let len = total.len();
    let ReduceScratch { accs64, words, .. } = scratch;
    let accs = refill(accs64, len, ExactSum::default());
    if len > 0 {
        for p in parts.chunks_exact(len).take(chunks) {
            for (a, &v) in accs.iter_mut().zip(p) {
                if v != 0.0 {
                    a.add(v);
                }
            }
        }
    }
    finish(accs, words, sum_words, |k, v| total[k] = v);
}

/// The exact sum of `acc` over every process (through `sum_words`), rounded once.
pub(crate) fn across<F: Scalar>(
    acc: &F::Exact,
    scratch: &mut ReduceScratch<F>,
    sum_words: Option<SumWords<'_>>,
) -> f64 {
    let mut v = 0.0;
    let mut one = [acc.clone()];
    finish(&mut one, &mut scratch.words, sum_words, |_, s| v = s);
    v
}

/// `counts` summed over every process (through `sum_words`), in place.
pub(crate) fn counts<F: Scalar>(
    counts: &mut [u64],
    scratch: &mut ReduceScratch<F>,
    sum_words: Option<SumWords<'_>>,
) {
    let Some(sum_words) = sum_words else {
        return;
    };
    let w = refill(&mut scratch.words, counts.len(), 0);
    for (x, &c) in w.iter_mut().zip(counts.iter()) {
        *x = i64::try_from(c).unwrap_or(i64::MAX);
    }
    sum_words(w);
    for (c, &x) in counts.iter_mut().zip(w.iter()) {
        *c = u64::try_from(x).unwrap_or(0);
    }
}

#[cfg(test)]
mod tests;
