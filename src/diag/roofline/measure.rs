//! The measurements, each timed by [`Timing`] (a median over `reps` runs after `warmup`): the
//! stream triad ([`stream_triad`]), the random and pattern row gathers ([`random_gather`],
//! [`pattern_gather`]) with and without software prefetch, `kernels::gemm` ([`sgemm`]), and
//! `kernels::spmm` ([`spmm_times_interleaved`], [`spmm_time_csr`]), plus the in-cache pattern that gives the SpMM's floor
//! ([`in_cache_pattern`]). Every input is filled from a seed, in [`BigBuffer`]s.

use std::time::Instant;

use ndarray::Array2;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::Serialize;

use super::machine::{anon_huge_pages_kib, BigBuffer};
use crate::graph::NormAdj;
use crate::kernels::raw::prefetch_slice;
use crate::kernels::NewTrusted;
use crate::kernels::{gemm, spmm_tiled, Csr, CsrView};
use crate::{ConfigError, Par, Result};

/// Output rows per parallel task of the gather benchmark.
pub(super) const GATHER_TASK_ROWS: usize = 512;
/// Elements per parallel task of the triad.
const TRIAD_TASK: usize = 1 << 16;

/// Wall-clock times of the timed repetitions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Timing {
    /// Median seconds.
    pub median_s: f64,
    /// Fastest seconds.
    pub best_s: f64,
    /// Every timed repetition, in order (seconds).
    pub samples_s: Vec<f64>,
}

/// Runs `f` `warmup` times untimed, then `reps` times timed.
pub(super) fn time_reps(warmup: usize, reps: usize, mut f: impl FnMut()) -> Timing {
    for _ in 0..warmup {
        f();
    }
    let samples_s: Vec<f64> = (0..reps.max(1))
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect();
    Timing::of(samples_s)
}

impl Timing {
    /// The median and best of `samples_s` (at least one).
    fn of(samples_s: Vec<f64>) -> Timing {
        assert!(!samples_s.is_empty(), "Timing::of: no samples");
        let mut s = samples_s.clone();
        s.sort_by(f64::total_cmp);
        let median_s = if s.len() % 2 == 1 {
            s[s.len() / 2]
        } else {
            0.5 * (s[s.len() / 2 - 1] + s[s.len() / 2])
        };
        Timing {
            median_s,
            best_s: s[0],
            samples_s,
        }
    }
}

/// The median of `v` (NaN for an empty list), as [`Timing`] takes it.
pub(super) fn median(v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    Timing::of(v).median_s
}

/// GB/s (10⁹ bytes per second).
pub(super) fn gbs(bytes: f64, s: f64) -> f64 {
    bytes / s.max(f64::MIN_POSITIVE) / 1e9
}

/// Deterministic pseudo-random values in [−1, 1) (cheap; they only need to be finite and not
/// all equal).
pub(super) fn fill_values(v: &mut [f32], seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for x in v.iter_mut() {
        *x = (rng.next_u32() >> 8) as f32 / (1u32 << 23) as f32 - 1.0;
    }
}

/// The stream triad result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TriadReport {
    /// Elements per array.
    pub len: usize,
    /// Bytes counted per pass: 3 arrays × len × 4.
    pub bytes: f64,
    /// Times.
    pub timing: Timing,
    /// GB/s at the median time.
    pub gbs: f64,
    /// GB/s at the best time.
    pub gbs_best: f64,
    /// Whether the arrays were advised for huge pages.
    pub huge_pages: bool,
    /// `AnonHugePages` of the process with the arrays live, KiB.
    pub anon_huge_pages_kib: Option<u64>,
}

/// Stream triad `a ← b + 3·c` on three arrays of `len` f32 (see the [module docs](super)).
///
/// # Errors
/// If the arrays cannot be allocated ([`BigBuffer::zeroed`]).
pub(crate) fn stream_triad(
    len: usize,
    warmup: usize,
    reps: usize,
    huge_pages: bool,
    par: Par,
) -> Result<TriadReport> {
    let mut a = BigBuffer::zeroed(len, huge_pages)?;
    let mut b = BigBuffer::zeroed(len, huge_pages)?;
    let mut c = BigBuffer::zeroed(len, huge_pages)?;
    fill_values(b.as_mut_slice(), 1);
    fill_values(c.as_mut_slice(), 2);
    let advised = a.huge_pages_advised() && b.huge_pages_advised() && c.huge_pages_advised();
    let s = 3.0f32;
    let (bs, cs) = (b.as_slice(), c.as_slice());
    let timing = time_reps(warmup, reps, || {
        let a = a.as_mut_slice();
        match par {
            Par::Seq => triad_block(a, bs, cs, s),
            Par::Rayon => a
                .par_chunks_mut(TRIAD_TASK)
                .zip(bs.par_chunks(TRIAD_TASK))
                .zip(cs.par_chunks(TRIAD_TASK))
                .for_each(|((a, b), c)| triad_block(a, b, c, s)),
        }
        std::hint::black_box(&a[..]);
    });
    let bytes = 3.0 * len as f64 * 4.0;
    Ok(TriadReport {
        len,
        bytes,
        gbs: gbs(bytes, timing.median_s),
        gbs_best: gbs(bytes, timing.best_s),
        timing,
        huge_pages: advised,
        anon_huge_pages_kib: anon_huge_pages_kib(),
    })
}

#[inline]
fn triad_block(a: &mut [f32], b: &[f32], c: &[f32], s: f32) {
    for ((a, &b), &c) in a.iter_mut().zip(b).zip(c) {
        *a = b + s * c;
    }
}

/// The random row gather result at one width d.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GatherReport {
    /// Row width in f32.
    pub d: usize,
    /// Rows of the gathered matrix (the graph's node count).
    pub n_rows: usize,
    /// Rows gathered per pass (≈ nnz of Â).
    pub gathers: usize,
    /// Gathered rows summed into each output row.
    pub group: usize,
    /// Bytes counted per pass: gathers · d · 4.
    pub bytes: f64,
    /// Times without software prefetch.
    pub plain: Timing,
    /// Times with the software prefetch.
    pub prefetch: Timing,
    /// GB/s at the median time, without prefetch.
    pub gbs_plain: f64,
    /// GB/s at the median time, with prefetch.
    pub gbs_prefetch: f64,
    /// The gather bound: the larger of the two.
    pub gbs: f64,
    /// Whether the buffers were advised for huge pages.
    pub huge_pages: bool,
    /// `AnonHugePages` of the process with the buffers live, KiB.
    pub anon_huge_pages_kib: Option<u64>,
}

/// Gathers `gathers` uniformly random rows of an `n_rows × d` f32 matrix, in a random order,
/// summing each `group` of them into one output row (the access pattern of SpMM; see the
/// [module docs](super)). `gathers` is rounded down to a multiple of `group` (at least one
/// group).
///
/// # Errors
/// [`ConfigError::ZeroDim`] if `n_rows`, `d` or `group` is 0; allocation errors.
pub(crate) fn random_gather(
    n_rows: usize,
    d: usize,
    gathers: usize,
    group: usize,
    warmup: usize,
    reps: usize,
    seed: u64,
    huge_pages: bool,
    par: Par,
) -> Result<GatherReport> {
    for (v, name) in [
        (n_rows, "gather rows"),
        (d, "gather width"),
        (group, "gather group"),
    ] {
        if v == 0 {
            return Err(ConfigError::ZeroDim(name).into());
        }
    }
    let n_rows = n_rows.min(u32::MAX as usize);
    let gathers = (gathers / group).max(1) * group;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let idx: Vec<u32> = (0..gathers)
        .map(|_| ((u64::from(rng.next_u32()) * n_rows as u64) >> 32) as u32)
        .collect();
    gather_bench(n_rows, d, &idx, group, warmup, reps, seed, huge_pages, par)
}

/// The same gather with the column indices of `adj` (in their stored order) as the index
/// stream: SpMM's own access pattern without its values and row pointer. Not a bound (its
/// cache reuse depends on the graph) but the rate the SpMM's gathers could reach; groups of
/// ⌊nnz/n⌉ as in [`random_gather`].
///
/// # Errors
/// [`ConfigError::ZeroDim`] if `d` is 0 or `adj` is empty; allocation errors.
pub(crate) fn pattern_gather(
    adj: &NormAdj<f32>,
    d: usize,
    warmup: usize,
    reps: usize,
    seed: u64,
    huge_pages: bool,
    par: Par,
) -> Result<GatherReport> {
    let (n, nnz) = (adj.n_nodes(), adj.nnz());
    if d == 0 || n == 0 || nnz == 0 {
        return Err(ConfigError::ZeroDim("pattern gather size").into());
    }
    let group = ((nnz as f64 / n as f64).round() as usize).clamp(1, nnz);
    let a = adj.a();
    let idx = &a.indices()[..nnz / group * group];
    gather_bench(n, d, idx, group, warmup, reps, seed, huge_pages, par)
}

/// Times [`gather_pass`] with and without prefetch on a fresh `n_rows × d` matrix.
fn gather_bench(
    n_rows: usize,
    d: usize,
    idx: &[u32],
    group: usize,
    warmup: usize,
    reps: usize,
    seed: u64,
    huge_pages: bool,
    par: Par,
) -> Result<GatherReport> {
    let gathers = idx.len();
    let out_rows = gathers / group;
    let mut x = BigBuffer::zeroed(n_rows * d, huge_pages)?;
    fill_values(x.as_mut_slice(), seed ^ 0x5eed);
    let mut out = BigBuffer::zeroed(out_rows * d, huge_pages)?;
    let advised = x.huge_pages_advised() && out.huge_pages_advised();
    let xs = x.as_slice();
    let mut run = |prefetch: bool| {
        time_reps(warmup, reps, || {
            gather_pass(xs, idx, group, d, out.as_mut_slice(), prefetch, par);
            std::hint::black_box(out.as_slice());
        })
    };
    let plain = run(false);
    let prefetch = run(true);
    let bytes = gathers as f64 * d as f64 * 4.0;
    let (gbs_plain, gbs_prefetch) = (gbs(bytes, plain.median_s), gbs(bytes, prefetch.median_s));
    Ok(GatherReport {
        d,
        n_rows,
        gathers,
        group,
        bytes,
        plain,
        prefetch,
        gbs_plain,
        gbs_prefetch,
        gbs: gbs_plain.max(gbs_prefetch),
        huge_pages: advised,
        anon_huge_pages_kib: anon_huge_pages_kib(),
    })
}

/// One pass of the gather: output row g sums rows `idx[g·group..(g+1)·group]` of `xs`.
pub(super) fn gather_pass(
    xs: &[f32],
    idx: &[u32],
    group: usize,
    d: usize,
    out: &mut [f32],
    prefetch: bool,
    par: Par,
) {
    let task = |(t, o): (usize, &mut [f32])| {
        let first = t * GATHER_TASK_ROWS;
        macro_rules! dispatch {
            ($($w:literal),*) => {
                match (d, prefetch) {
                    $(($w, false) => gather_rows::<$w, false>(xs, idx, group, first, o),
                      ($w, true) => gather_rows::<$w, true>(xs, idx, group, first, o),)*
                    _ => gather_rows_any(xs, idx, group, d, first, o, prefetch),
                }
            };
        }
        dispatch!(8, 16, 32, 64, 128, 256)
    };
    let chunk = GATHER_TASK_ROWS * d;
    match par {
        Par::Seq => out.chunks_mut(chunk).enumerate().for_each(task),
        Par::Rayon => out.par_chunks_mut(chunk).enumerate().for_each(task),
    }
}

/// Output rows `first..` (as many as `out` holds) at compile-time width `D`.
#[inline(never)]
fn gather_rows<const D: usize, const PF: bool>(
    xs: &[f32],
    idx: &[u32],
    group: usize,
    first: usize,
    out: &mut [f32],
) {
    let dist = crate::kernels::spmm::prefetch_distance::<f32>(D);
    for (g, o) in out.chunks_exact_mut(D).enumerate() {
        let p0 = (first + g) * group;
        let mut acc = [0f32; D];
        for p in p0..p0 + group {
            if PF {
                if let Some(&jn) = idx.get(p + dist) {
                    prefetch_row(xs, jn as usize * D, D);
                }
            }
            let j = idx[p] as usize * D;
            let xr = &xs[j..j + D];
            for c in 0..D {
                acc[c] += xr[c];
            }
        }
        o.copy_from_slice(&acc);
    }
}

/// The same at a runtime width.
fn gather_rows_any(
    xs: &[f32],
    idx: &[u32],
    group: usize,
    d: usize,
    first: usize,
    out: &mut [f32],
    prefetch: bool,
) {
    let dist = crate::kernels::spmm::prefetch_distance::<f32>(d);
    for (g, o) in out.chunks_exact_mut(d).enumerate() {
        let p0 = (first + g) * group;
        o.fill(0.0);
        for p in p0..p0 + group {
            if prefetch {
                if let Some(&jn) = idx.get(p + dist) {
                    prefetch_row(xs, jn as usize * d, d);
                }
            }
            let j = idx[p] as usize * d;
            for (a, &x) in o.iter_mut().zip(&xs[j..j + d]) {
                *a += x;
            }
        }
    }
}

/// The sgemm result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GemmReport {
    /// Rows of A and of the output.
    pub m: usize,
    /// Inner dimension.
    pub k: usize,
    /// Columns of B and of the output.
    pub n: usize,
    /// Times.
    pub timing: Timing,
    /// GFLOP/s (2·m·k·n per product) at the median time.
    pub gflops: f64,
}

/// Times `kernels::gemm` on an (m × k)·(k × n) f32 product.
pub fn sgemm(m: usize, k: usize, n: usize, warmup: usize, reps: usize, par: Par) -> GemmReport {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut val = || (rng.next_u32() >> 8) as f32 / (1u32 << 23) as f32 - 1.0;
    let a = Array2::from_shape_simple_fn((m, k), &mut val);
    let b = Array2::from_shape_simple_fn((k, n), &mut val);
    let mut out = Array2::<f32>::zeros((m, n));
    let timing = time_reps(warmup, reps, || {
        gemm(1.0, a.view(), b.view(), 0.0, out.view_mut(), par);
        std::hint::black_box(&out);
    });
    GemmReport {
        m,
        k,
        n,
        gflops: 2.0 * m as f64 * k as f64 * n as f64 / timing.median_s.max(f64::MIN_POSITIVE) / 1e9,
        timing,
    }
}

/// What [`spmm_time_csr`] measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpmmRun {
    /// Times.
    pub timing: Timing,
    /// Whether X and the output were advised for huge pages.
    pub huge_pages: bool,
    /// `AnonHugePages` of the process with X and the output live, KiB.
    pub anon_huge_pages_kib: Option<u64>,
}

/// Times `out ← A·X` (`kernels::spmm_tiled`, α = 1, β = 0, in column tiles of `tile`; `d`
/// or more: untiled) for a seeded random X of width `d`, in buffers advised for huge pages on
/// request: [`spmm_times_interleaved`] with one matrix (for Â, pass `adj.a()`).
///
/// # Errors
/// Allocation errors.
#[allow(clippy::too_many_arguments)]
pub fn spmm_time_csr(
    a: CsrView<'_, f32>,
    d: usize,
    tile: usize,
    warmup: usize,
    reps: usize,
    seed: u64,
    huge_pages: bool,
    par: Par,
) -> Result<SpmmRun> {
    let (timings, huge_pages, anon_huge_pages_kib) =
        spmm_times_interleaved(&[(a, tile)], d, warmup, reps, seed, huge_pages, par)?;
    let Some(timing) = timings.into_iter().next() else {
        unreachable!("a timing per matrix")
    };
    Ok(SpmmRun {
        timing,
        huge_pages,
        anon_huge_pages_kib,
    })
}

/// The SpMM `Y ← A·X` timed for several CSR matrices of one shape (each with its column
/// tile) on one X of seeded values, taking turns: `warmup` untimed runs of each, then `reps`
/// rounds in which each runs once, timed. A host whose speed drifts within the run slows every
/// matrix alike, so their ratios are steadier than those of measurements made one after the
/// other. Returns each matrix's timing, in order, with the huge-page report of the shared
/// buffers.
///
/// # Errors
/// Allocation errors.
///
/// # Panics
/// If the matrices differ in shape.
#[allow(clippy::too_many_arguments)]
pub fn spmm_times_interleaved(
    mats: &[(CsrView<'_, f32>, usize)],
    d: usize,
    warmup: usize,
    reps: usize,
    seed: u64,
    huge_pages: bool,
    par: Par,
) -> Result<(Vec<Timing>, bool, Option<u64>)> {
    let Some(&(first, _)) = mats.first() else {
        return Ok((Vec::new(), false, anon_huge_pages_kib()));
    };
    let (m, k) = first.shape();
    assert!(
        mats.iter().all(|(a, _)| a.shape() == (m, k)),
        "spmm_times_interleaved: matrices of different shapes"
    );
    let mut x = BigBuffer::zeroed(k * d, huge_pages)?;
    fill_values(x.as_mut_slice(), seed);
    let mut y = BigBuffer::zeroed(m * d, huge_pages)?;
    let advised = x.huge_pages_advised() && y.huge_pages_advised();
    let xv = x.view(k, d)?;
    let mut yv = y.view_mut(m, d)?;
    let mut run = |&(a, tile): &(CsrView<'_, f32>, usize)| {
        let t = Instant::now();
        spmm_tiled(1.0, a, xv, 0.0, yv.view_mut(), par, tile);
        std::hint::black_box(&yv);
        t.elapsed().as_secs_f64()
    };
    for m in mats {
        for _ in 0..warmup {
            run(m);
        }
    }
    let mut samples = vec![Vec::with_capacity(reps.max(1)); mats.len()];
    for _ in 0..reps.max(1) {
        for (m, s) in mats.iter().zip(&mut samples) {
            s.push(run(m));
        }
    }
    let timings = samples.into_iter().map(Timing::of).collect();
    Ok((timings, advised, anon_huge_pages_kib()))
}

/// The in-cache reference of [`run`](super::run): `a`'s row lengths and values, with the k-th non-zero of
/// every row moved to column k. Every row then gathers the first rows of X, which stay in
/// L1/L2, so the SpMM does all of its work and writes all of its output without a cache
/// miss on X: the floor no node order can go below.
pub(crate) fn in_cache_pattern(a: CsrView<'_, f32>) -> Csr<f32> {
    let ip = a.indptr();
    let ip = ip.raw_storage();
    let off = ip[0];
    let indptr: Vec<usize> = ip.iter().map(|&p| p - off).collect();
    let mut indices = Vec::with_capacity(a.nnz());
    for w in indptr.windows(2) {
        // A row has at most `cols` entries, so 0..len are valid, sorted, distinct columns.
        indices.extend(0..(w[1] - w[0]) as u32);
    }
    Csr::new_trusted_pub(a.shape(), indptr, indices, a.data().to_vec())
}

/// Prefetches the cache lines of `xs[start..start + len]` (a hint; out-of-range parts are
/// clamped away).
#[inline(always)]
fn prefetch_row(xs: &[f32], start: usize, len: usize) {
    let end = (start + len).min(xs.len());
    if start < end {
        prefetch_slice(&xs[start..end]);
    }
}
