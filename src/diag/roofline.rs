//! `roofline`: this machine's memory bounds next to the SpMM it limits, measured in one run.
//!
//! Four measurements, each a median over `reps` timed runs after `warmup` untimed ones:
//! - **Stream triad** ([`stream_triad`]): `a ← b + s·c` on three f32 arrays much larger than
//!   the L3 cache, STREAM byte counting (3 × array bytes per pass, no write-allocate).
//! - **Random row gather** ([`random_gather`]): the memory access pattern of SpMM without its
//!   sparse-matrix bookkeeping: an n × d f32 matrix with the same n as the graph (so the same
//!   working set as X), a stream of nnz uniformly random row indices read in order, each group
//!   of ⌊nnz/n⌉ gathered rows summed into one output row. Bytes = gathered rows · d · 4. It
//!   runs with and without a software prefetch of the row [`PREFETCH_BYTES`] ahead (as the
//!   SpMM does) and the faster of the two is the **gather bound**: the best random row gather
//!   rate measured on this machine for rows of d floats. For reference, [`pattern_gather`]
//!   runs the same loop on the random-order Â's own index stream: a power-law graph's hub
//!   rows are gathered often and stay cached, so SpMM can run *above* the uniform bound.
//! - **sgemm** ([`sgemm`]): `kernels::gemm` (matrixmultiply) on an n × k by k × m product.
//! - **SpMM** ([`spmm_time`]): `kernels::spmm` with Â of the graph in a random node order (an
//!   explicit random permutation, whatever order the input had) and in a reordered one
//!   (community order by default, computed from the structure only), for each width d.
//!   Effective rate = (nnz·d·4 gathered bytes + nnz·8 index and value bytes + (n+1)·8
//!   row-pointer bytes + n·d·4 output bytes) / time, reported as a fraction of the gather
//!   bound at the same d and of the triad rate.
//!
//! - **In-cache SpMM** ([`in_cache_pattern`]): the random-order Â with the k-th non-zero of each
//!   row moved to column k, so that every gather reads one of the first rows of X, which stay
//!   in L1/L2: the same row lengths, values, arithmetic and output stream without a cache miss
//!   on X. It is the floor under any node order; random-order time minus this floor is what
//!   the gathers' misses cost.
//!
//! Two more columns explain the SpMM times without timing noise:
//! - **Cache model** ([`order::cache_miss_model`]): per order and width d, the fraction of
//!   the SpMM's row gathers that miss an LRU cache of the last-level cache's size
//!   ([`Machine::l3_bytes`], 32 MiB when the OS does not say) in rows of d floats. It is the
//!   same on every machine, so it compares orders exactly where timings are noisy.
//! - **Class order** ([`RooflineConfig::class_reference`], `--class-order`), a diagnostic
//!   reference: the reordered order, stably sorted by class label, so that every class's rows
//!   are contiguous. It reads the labels, so training may never use it; it tells how much
//!   faster SpMM would be if an order recovered the classes exactly, that is, how much of the
//!   locality a structure-only order leaves on the table.
//!
//! The big dense buffers (triad arrays, X, the output, the gathered matrix) are allocated
//! aligned to 2 MiB and advised with `madvise(MADV_HUGEPAGE)` when
//! [`RooflineConfig::huge_pages`] is set (Linux with THP in `madvise` or `always` mode, and the
//! crate's `hugepages` feature, on by default; without it nothing is advised); the
//! report says whether the advice was accepted and how much anonymous memory the kernel backed
//! with huge pages. Every input is seeded, so two runs measure the same work.

use std::time::Instant;

use ndarray::{Array2, ArrayView2, ArrayViewMut2};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::Serialize;

use crate::graph::normalize::NewTrusted;
use crate::graph::{Graph, Norm, NormAdj};
use crate::kernels::raw::huge;
use crate::kernels::{gemm, spmm, Csr, CsrView};
use crate::order::{self, Locality, Permutation, Reorder};
use crate::{ConfigError, Error, Par, Result};

/// How far ahead the prefetching gather looks, in bytes of gathered rows (as `kernels::spmm`).
pub const PREFETCH_BYTES: usize = crate::kernels::spmm::PREFETCH_BYTES;

/// Output rows per parallel task of the gather benchmark.
const GATHER_TASK_ROWS: usize = 512;
/// Elements per parallel task of the triad.
const TRIAD_TASK: usize = 1 << 16;

/// What to measure.
#[derive(Debug, Clone, PartialEq)]
pub struct RooflineConfig {
    /// Feature widths d of the gather bound and the SpMMs.
    pub dims: Vec<usize>,
    /// Timed repetitions of every measurement (the median is reported).
    pub reps: usize,
    /// Untimed repetitions before them.
    pub warmup: usize,
    /// Elements of each of the three triad arrays (f32). 64 Mi = 256 MiB each.
    pub triad_len: usize,
    /// sgemm shape `(k, m)`: an (n_nodes × k)·(k × m) product; `None` skips it.
    pub gemm: Option<(usize, usize)>,
    /// The order compared with the random one.
    pub reorder: Reorder,
    /// Seed of the random node order, the gather indices and the matrix values.
    pub seed: u64,
    /// Advise huge pages on the big dense buffers (a no-op without the `hugepages` feature).
    pub huge_pages: bool,
    /// Parallelism of every kernel (the thread count is the enclosing rayon pool's).
    pub par: Par,
    /// Also time the class order (a diagnostic that reads the labels; see the
    /// [module docs](self)). [`run`] then needs the labels.
    pub class_reference: bool,
}

impl Default for RooflineConfig {
    fn default() -> Self {
        RooflineConfig {
            dims: vec![16, 64, 128, 256],
            reps: 5,
            warmup: 1,
            triad_len: 64 << 20,
            gemm: Some((128, 256)),
            reorder: Reorder::Community,
            seed: 0,
            huge_pages: true,
            par: Par::Rayon,
            class_reference: false,
        }
    }
}

impl RooflineConfig {
    /// Checks the configuration.
    ///
    /// # Errors
    /// [`ConfigError::ZeroCount`] for no reps or no dims, [`ConfigError::ZeroDim`] for a width
    /// or a triad length of 0.
    pub fn check(&self) -> Result<()> {
        if self.reps == 0 {
            return Err(ConfigError::ZeroCount("reps").into());
        }
        if self.dims.is_empty() {
            return Err(ConfigError::ZeroCount("dims").into());
        }
        if self.dims.contains(&0) {
            return Err(ConfigError::ZeroDim("a feature width in dims").into());
        }
        if self.triad_len == 0 {
            return Err(ConfigError::ZeroDim("triad length").into());
        }
        if let Some((k, m)) = self.gemm {
            if k == 0 || m == 0 {
                return Err(ConfigError::ZeroDim("sgemm width").into());
            }
        }
        Ok(())
    }
}

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
fn time_reps(warmup: usize, reps: usize, mut f: impl FnMut()) -> Timing {
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

/// GB/s (10⁹ bytes per second).
fn gbs(bytes: f64, s: f64) -> f64 {
    bytes / s.max(f64::MIN_POSITIVE) / 1e9
}

/// The machine the numbers come from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Machine {
    /// `model name` from `/proc/cpuinfo` (or `"unknown"`).
    pub cpu_model: String,
    /// Logical CPUs the process may use.
    pub logical_cpus: usize,
    /// Threads of the rayon pool the measurements ran in.
    pub threads: usize,
    /// Transparent huge page mode (`/sys/kernel/mm/transparent_hugepage/enabled`).
    pub thp_mode: String,
    /// `/proc/loadavg`'s 1, 5 and 15 minute load averages before the run.
    pub load_before: String,
    /// The same after the run.
    pub load_after: String,
    /// Size of the last-level (L3) cache of CPU 0, bytes
    /// (`/sys/devices/system/cpu/cpu0/cache/index3/size`), if the OS says.
    pub l3_bytes: Option<u64>,
}

impl Machine {
    /// Reads what the OS tells about this machine (Linux files; `"unknown"` elsewhere).
    pub fn detect() -> Self {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let thp_mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .ok()
            .and_then(|s| {
                let a = s.find('[')?;
                let b = s[a..].find(']')?;
                Some(s[a + 1..a + b].to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        Machine {
            cpu_model,
            logical_cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            threads: rayon::current_num_threads(),
            thp_mode,
            load_before: load_average(),
            load_after: String::new(),
            l3_bytes: std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cache/index3/size")
                .ok()
                .and_then(|s| parse_cache_size(s.trim())),
        }
    }
}

/// A sysfs cache size (`"32768K"`, `"1M"`, `"512"`) in bytes.
fn parse_cache_size(s: &str) -> Option<u64> {
    let (num, mult) = match s.as_bytes().last()? {
        b'K' | b'k' => (&s[..s.len() - 1], 1u64 << 10),
        b'M' | b'm' => (&s[..s.len() - 1], 1 << 20),
        b'G' | b'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

/// The cache size [`run`]'s cache model assumes when the OS does not report an L3.
pub const DEFAULT_L3_BYTES: u64 = 32 << 20;

/// The first three fields of `/proc/loadavg` (or `"unknown"`).
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// This process's anonymous memory backed by huge pages (`AnonHugePages` of
/// `/proc/self/smaps_rollup`), in KiB; `None` where the file is missing.
pub fn anon_huge_pages_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    let line = s.lines().find(|l| l.starts_with("AnonHugePages:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// A zero-filled f32 buffer aligned to 2 MiB (4 KiB when smaller), advised for huge pages
/// on request.
pub struct BigBuffer(huge::Buf);

impl BigBuffer {
    /// `len` zeros; with `huge_pages`, `madvise(MADV_HUGEPAGE)` before the first touch (on
    /// Linux with the `hugepages` feature; otherwise the request is ignored).
    ///
    /// # Errors
    /// [`Error::Mismatch`] when `len` f32 do not fit in the address space.
    pub fn zeroed(len: usize, huge_pages: bool) -> Result<Self> {
        huge::Buf::zeroed(len, huge_pages)
            .map(BigBuffer)
            .ok_or_else(|| Error::Mismatch {
                what: "benchmark buffer length (f32 elements that fit in memory)".into(),
                expected: isize::MAX as usize / 4,
                got: len,
            })
    }
    /// Whether the huge-page advice was given and accepted (always false without the
    /// `hugepages` feature or off Linux).
    pub fn huge_pages_advised(&self) -> bool {
        self.0.advised()
    }
    /// The elements.
    pub fn as_slice(&self) -> &[f32] {
        self.0.as_slice()
    }
    /// The elements, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [f32] {
        self.0.as_mut_slice()
    }
    /// A `rows × cols` row-major view.
    ///
    /// # Errors
    /// [`Error::Mismatch`] if `rows·cols` is not the length.
    pub fn view(&self, rows: usize, cols: usize) -> Result<ArrayView2<'_, f32>> {
        let len = self.as_slice().len();
        ArrayView2::from_shape((rows, cols), self.as_slice())
            .map_err(|_| shape_err(len, rows, cols))
    }
    /// A `rows × cols` row-major mutable view.
    ///
    /// # Errors
    /// [`Error::Mismatch`] if `rows·cols` is not the length.
    pub fn view_mut(&mut self, rows: usize, cols: usize) -> Result<ArrayViewMut2<'_, f32>> {
        let len = self.as_slice().len();
        ArrayViewMut2::from_shape((rows, cols), self.as_mut_slice())
            .map_err(|_| shape_err(len, rows, cols))
    }
}

fn shape_err(len: usize, rows: usize, cols: usize) -> Error {
    Error::Mismatch {
        what: format!("benchmark buffer as a {rows}×{cols} matrix"),
        expected: rows.saturating_mul(cols),
        got: len,
    }
}

/// Deterministic pseudo-random values in [−1, 1) (cheap; they only need to be finite and not
/// all equal).
fn fill_values(v: &mut [f32], seed: u64) {
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

/// Stream triad `a ← b + 3·c` on three arrays of `len` f32 (see the [module docs](self)).
///
/// # Errors
/// If the arrays cannot be allocated ([`BigBuffer::zeroed`]).
pub fn stream_triad(
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
/// [module docs](self)). `gathers` is rounded down to a multiple of `group` (at least one
/// group).
///
/// # Errors
/// [`ConfigError::ZeroDim`] if `n_rows`, `d` or `group` is 0; allocation errors.
pub fn random_gather(
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
pub fn pattern_gather(
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
fn gather_pass(
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
    let dist = (PREFETCH_BYTES / (D * 4)).max(1);
    for (g, o) in out.chunks_exact_mut(D).enumerate() {
        let p0 = (first + g) * group;
        let mut acc = [0f32; D];
        for p in p0..p0 + group {
            if PF {
                if let Some(&jn) = idx.get(p + dist) {
                    huge::prefetch_row(xs, jn as usize * D, D);
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
    let dist = (PREFETCH_BYTES / (d * 4)).max(1);
    for (g, o) in out.chunks_exact_mut(d).enumerate() {
        let p0 = (first + g) * group;
        o.fill(0.0);
        for p in p0..p0 + group {
            if prefetch {
                if let Some(&jn) = idx.get(p + dist) {
                    huge::prefetch_row(xs, jn as usize * d, d);
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

/// What [`spmm_time`] measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpmmRun {
    /// Times.
    pub timing: Timing,
    /// Whether X and the output were advised for huge pages.
    pub huge_pages: bool,
    /// `AnonHugePages` of the process with X and the output live, KiB.
    pub anon_huge_pages_kib: Option<u64>,
}

/// Times `out ← Â·X` (`kernels::spmm`, α = 1, β = 0) for a seeded random X of width `d`, in
/// buffers advised for huge pages on request.
///
/// # Errors
/// Allocation errors.
pub fn spmm_time(
    adj: &NormAdj<f32>,
    d: usize,
    warmup: usize,
    reps: usize,
    seed: u64,
    huge_pages: bool,
    par: Par,
) -> Result<SpmmRun> {
    spmm_time_csr(adj.a(), d, warmup, reps, seed, huge_pages, par)
}

/// [`spmm_time`] for any square CSR matrix.
fn spmm_time_csr(
    a: CsrView<'_, f32>,
    d: usize,
    warmup: usize,
    reps: usize,
    seed: u64,
    huge_pages: bool,
    par: Par,
) -> Result<SpmmRun> {
    let n = a.cols();
    let mut x = BigBuffer::zeroed(n * d, huge_pages)?;
    fill_values(x.as_mut_slice(), seed);
    let mut y = BigBuffer::zeroed(n * d, huge_pages)?;
    let advised = x.huge_pages_advised() && y.huge_pages_advised();
    let xv = x.view(n, d)?;
    let mut yv = y.view_mut(n, d)?;
    let timing = time_reps(warmup, reps, || {
        spmm(1.0, a, xv, 0.0, yv.view_mut(), par);
        std::hint::black_box(&yv);
    });
    Ok(SpmmRun {
        timing,
        huge_pages: advised,
        anon_huge_pages_kib: anon_huge_pages_kib(),
    })
}

/// The in-cache reference of [`run`]: `a`'s row lengths and values, with the k-th non-zero of
/// every row moved to column k. Every row then gathers the first rows of X, which stay in
/// L1/L2, so the SpMM does all of its work and writes all of its output without a cache
/// miss on X: the floor no node order can go below.
pub fn in_cache_pattern(a: CsrView<'_, f32>) -> Csr<f32> {
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

/// One SpMM measurement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpmmReport {
    /// The node order (`random`, `community`, …).
    pub order: String,
    /// Times.
    pub timing: Timing,
    /// GFLOP/s (2·nnz·d) at the median time.
    pub gflops: f64,
    /// Bytes counted: nnz·d·4 + nnz·8 + (n+1)·8 + n·d·4.
    pub bytes: f64,
    /// Effective GB/s at the median time.
    pub gbs: f64,
    /// `gbs` over the gather bound at this d.
    pub frac_gather: f64,
    /// `gbs` over the triad rate.
    pub frac_triad: f64,
}

impl SpmmReport {
    fn new(
        order: String,
        timing: Timing,
        n: usize,
        nnz: usize,
        d: usize,
        bound: f64,
        triad: f64,
    ) -> Self {
        let (n, nnz, df) = (n as f64, nnz as f64, d as f64);
        let bytes = nnz * df * 4.0 + nnz * 8.0 + (n + 1.0) * 8.0 + n * df * 4.0;
        let t = timing.median_s.max(f64::MIN_POSITIVE);
        let rate = gbs(bytes, t);
        SpmmReport {
            order,
            gflops: 2.0 * nnz * df / t / 1e9,
            bytes,
            gbs: rate,
            frac_gather: rate / bound,
            frac_triad: rate / triad,
            timing,
        }
    }
}

/// Everything measured at one width d.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DimReport {
    /// Feature width.
    pub d: usize,
    /// The gather bound: uniformly random rows ([`random_gather`]).
    pub gather: GatherReport,
    /// The gather with the random-order Â's own index stream ([`pattern_gather`]), for
    /// reference: above the bound when hub rows are reused from the caches.
    pub gather_pattern: GatherReport,
    /// SpMM in a random node order.
    pub random: SpmmReport,
    /// SpMM in the reordered node order.
    pub reordered: SpmmReport,
    /// Random-order median time over reordered median time.
    pub speedup: f64,
    /// SpMM of [`in_cache_pattern`]: the floor without cache misses on X.
    pub in_cache: SpmmReport,
    /// SpMM in the class order (diagnostic; only with [`RooflineConfig::class_reference`]).
    pub class_order: Option<SpmmReport>,
    /// Random-order median time over class-order median time.
    pub class_speedup: Option<f64>,
    /// The cache model at this width.
    pub miss_model: MissModel,
}

/// [`order::cache_miss_model`] of each order, for a cache of [`RooflineReport::cache_bytes`]
/// holding `cache_rows` rows of d f32.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MissModel {
    /// Rows of X the modelled cache holds.
    pub cache_rows: usize,
    /// Miss fraction in the random order.
    pub random: f64,
    /// Miss fraction in the reordered order.
    pub reordered: f64,
    /// Miss fraction in the class order, if measured.
    pub class_order: Option<f64>,
}

/// The whole roofline run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RooflineReport {
    /// Where it ran.
    pub machine: Machine,
    /// Dataset name.
    pub dataset: String,
    /// Nodes.
    pub n_nodes: usize,
    /// Non-zeros of Â (self-loops included).
    pub nnz: usize,
    /// Timed repetitions per measurement (medians are reported).
    pub reps: usize,
    /// Untimed warm-up repetitions per measurement.
    pub warmup: usize,
    /// Whether huge pages were requested.
    pub huge_pages_requested: bool,
    /// Whether every big buffer's `madvise(MADV_HUGEPAGE)` was accepted.
    pub huge_pages_advised: bool,
    /// The most `AnonHugePages` seen during the run, KiB (`None`: not reported by the OS).
    pub anon_huge_pages_kib_max: Option<u64>,
    /// The order compared with the random one.
    pub reorder: String,
    /// Seconds to compute that order (on the randomly ordered graph).
    pub reorder_s: f64,
    /// Locality of the random order (window: 1 % of the nodes).
    pub locality_random: Locality,
    /// Locality of the reordered order.
    pub locality_reordered: Locality,
    /// Locality of the class order, if measured.
    pub locality_class: Option<Locality>,
    /// Bytes of the cache the miss model assumes ([`Machine::l3_bytes`] or
    /// [`DEFAULT_L3_BYTES`]).
    pub cache_bytes: u64,
    /// Stream triad.
    pub triad: TriadReport,
    /// sgemm, if measured.
    pub sgemm: Option<GemmReport>,
    /// Gather bound and SpMMs per width.
    pub dims: Vec<DimReport>,
}

/// Runs every measurement on `graph` (see the [module docs](self)); call it inside the rayon
/// pool whose threads should be used. `labels` (one per node) are read only for the class
/// order of [`RooflineConfig::class_reference`].
///
/// # Errors
/// An invalid [`RooflineConfig`]; [`Error::Mismatch`] when the class order is requested
/// without one label per node; allocation errors.
pub fn run(
    graph: &Graph,
    labels: Option<&[u32]>,
    name: &str,
    cfg: &RooflineConfig,
) -> Result<RooflineReport> {
    cfg.check()?;
    let labels = match (cfg.class_reference, labels) {
        (false, _) => None,
        (true, Some(l)) if l.len() == graph.n_nodes() => Some(l),
        (true, l) => {
            return Err(Error::Mismatch {
                what: "labels for the class order (one per node)".into(),
                expected: graph.n_nodes(),
                got: l.map_or(0, <[u32]>::len),
            })
        }
    };
    let mut machine = Machine::detect();
    let (w, r, huge, par) = (cfg.warmup, cfg.reps, cfg.huge_pages, cfg.par);
    let mut advised = true;
    let mut huge_kib: Option<u64> = None;
    let mut note_huge = |k: Option<u64>| {
        if let Some(k) = k {
            huge_kib = Some(huge_kib.map_or(k, |m| m.max(k)));
        }
    };

    let triad = stream_triad(cfg.triad_len, w, r, huge, par)?;
    advised &= triad.huge_pages;
    note_huge(triad.anon_huge_pages_kib);
    let n = graph.n_nodes();
    let sgemm = cfg.gemm.map(|(k, m)| sgemm(n.max(1), k, m, w, r, par));

    let random_perm = order::order(graph, Reorder::Random(cfg.seed));
    let g_random = order::permute_graph(graph, &random_perm);
    let t = Instant::now();
    let perm = order::order(&g_random, cfg.reorder);
    let reorder_s = t.elapsed().as_secs_f64();
    let g_reordered = order::permute_graph(&g_random, &perm);
    // The class order: the reordered order stably sorted by label (labels follow the same
    // two permutations as the nodes).
    let g_class = match labels {
        Some(l) => {
            let l = order::permute_slice(&perm, &order::permute_slice(&random_perm, l));
            let mut v: Vec<u32> = (0..n as u32).collect();
            v.sort_by_key(|&r| l[r as usize]);
            Some(order::permute_graph(
                &g_reordered,
                &Permutation::try_from_new_to_old(v)?,
            ))
        }
        None => None,
    };
    let window = (n / 100).max(1);
    let locality_random = order::locality(&g_random, window);
    let locality_reordered = order::locality(&g_reordered, window);
    let locality_class = g_class.as_ref().map(|g| order::locality(g, window));
    let cache_bytes = machine.l3_bytes.unwrap_or(DEFAULT_L3_BYTES);
    let miss_models: Vec<MissModel> = cfg
        .dims
        .iter()
        .map(|&d| {
            let cache_rows = (cache_bytes / (4 * d as u64)).max(1) as usize;
            MissModel {
                cache_rows,
                random: order::cache_miss_model(&g_random, cache_rows),
                reordered: order::cache_miss_model(&g_reordered, cache_rows),
                class_order: g_class
                    .as_ref()
                    .map(|g| order::cache_miss_model(g, cache_rows)),
            }
        })
        .collect();
    let a_random = NormAdj::<f32>::new(&g_random, Norm::Symmetric);
    drop(g_random);
    let a_reordered = NormAdj::<f32>::new(&g_reordered, Norm::Symmetric);
    drop(g_reordered);
    let a_class = g_class.map(|g| NormAdj::<f32>::new(&g, Norm::Symmetric));
    let a_cache = in_cache_pattern(a_random.a());
    let nnz = a_random.nnz();
    let group = ((nnz as f64 / n.max(1) as f64).round() as usize).max(1);

    let mut dims = Vec::with_capacity(cfg.dims.len());
    for (&d, miss_model) in cfg.dims.iter().zip(miss_models) {
        let gather = random_gather(n.max(1), d, nnz, group, w, r, cfg.seed, huge, par)?;
        advised &= gather.huge_pages;
        note_huge(gather.anon_huge_pages_kib);
        let gather_pattern = pattern_gather(&a_random, d, w, r, cfg.seed, huge, par)?;
        let mut spmm_run = |adj: &NormAdj<f32>| -> Result<Timing> {
            let s = spmm_time(adj, d, w, r, cfg.seed, huge, par)?;
            advised &= s.huge_pages;
            note_huge(s.anon_huge_pages_kib);
            Ok(s.timing)
        };
        let t_random = spmm_run(&a_random)?;
        let t_reordered = spmm_run(&a_reordered)?;
        let t_class = a_class.as_ref().map(&mut spmm_run).transpose()?;
        let s = spmm_time_csr(a_cache.view(), d, w, r, cfg.seed, huge, par)?;
        advised &= s.huge_pages;
        note_huge(s.anon_huge_pages_kib);
        let t_cache = s.timing;
        let ratio = |t: &Timing| t_random.median_s / t.median_s.max(f64::MIN_POSITIVE);
        let speedup = ratio(&t_reordered);
        let class_speedup = t_class.as_ref().map(ratio);
        let mk =
            |order: String, t: Timing| SpmmReport::new(order, t, n, nnz, d, gather.gbs, triad.gbs);
        dims.push(DimReport {
            d,
            random: mk("random".into(), t_random),
            reordered: mk(cfg.reorder.to_string(), t_reordered),
            class_order: t_class.map(|t| mk("class".into(), t)),
            in_cache: mk("in-cache".into(), t_cache),
            class_speedup,
            miss_model,
            gather,
            gather_pattern,
            speedup,
        });
    }
    machine.load_after = load_average();
    Ok(RooflineReport {
        machine,
        dataset: name.to_string(),
        n_nodes: n,
        nnz,
        reps: r,
        warmup: w,
        huge_pages_requested: huge,
        huge_pages_advised: huge && advised,
        anon_huge_pages_kib_max: huge_kib,
        reorder: cfg.reorder.to_string(),
        reorder_s,
        locality_random,
        locality_reordered,
        locality_class,
        cache_bytes,
        triad,
        sgemm,
        dims,
    })
}

impl RooflineReport {
    /// A human-readable table of the report.
    pub fn table(&self) -> String {
        use std::fmt::Write as _;
        let m = &self.machine;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "machine   {} ({} logical CPUs, {} threads), THP {}, load {} -> {}",
            m.cpu_model, m.logical_cpus, m.threads, m.thp_mode, m.load_before, m.load_after
        );
        let _ = writeln!(
            s,
            "dataset   {}: {} nodes, nnz(Â) {}; medians of {} reps after {} warm-up",
            self.dataset, self.n_nodes, self.nnz, self.reps, self.warmup
        );
        let _ = writeln!(
            s,
            "huge pages {} (advised: {}, AnonHugePages max {} KiB)",
            if self.huge_pages_requested {
                "requested"
            } else {
                "off"
            },
            self.huge_pages_advised,
            self.anon_huge_pages_kib_max
                .map_or("?".into(), |k| k.to_string())
        );
        let t = &self.triad;
        let _ = writeln!(
            s,
            "triad     {:.2} GB/s (best {:.2}) on 3 x {} MiB",
            t.gbs,
            t.gbs_best,
            (t.len * 4) >> 20
        );
        if let Some(g) = &self.sgemm {
            let _ = writeln!(
                s,
                "sgemm     {:.1} GFLOP/s ({}x{}x{}, {:.1} ms)",
                g.gflops,
                g.m,
                g.k,
                g.n,
                g.timing.median_s * 1e3
            );
        }
        let (lr, lo) = (&self.locality_random, &self.locality_reordered);
        if let Some(lc) = &self.locality_class {
            let _ = writeln!(
                s,
                "class     order (diagnostic, reads the labels): mean |i-j|/n {:.3}, within ±{} rows {:.1}%",
                lc.mean_gap,
                lc.window,
                100.0 * lc.near_fraction
            );
        }
        let _ = writeln!(
            s,
            "model     LRU cache of {} MiB: misses of the SpMM's row gathers, random -> {}{}: {}",
            self.cache_bytes >> 20,
            self.reorder,
            if self.locality_class.is_some() {
                " -> class"
            } else {
                ""
            },
            self.dims
                .iter()
                .map(|r| {
                    let m = &r.miss_model;
                    let c = m
                        .class_order
                        .map_or(String::new(), |c| format!(" -> {:.1}%", 100.0 * c));
                    format!(
                        "d={} {:.1}% -> {:.1}%{}",
                        r.d,
                        100.0 * m.random,
                        100.0 * m.reordered,
                        c
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = writeln!(
            s,
            "order     {} computed in {:.2} s; mean |i-j|/n {:.3} -> {:.3}, within ±{} rows {:.1}% -> {:.1}%\n\
             gather    GB/s of gathered rows: uniformly random indices (the bound: the faster of \
             plain / prefetched), and `pattern`: the random-order Â's own indices",
            self.reorder,
            self.reorder_s,
            lr.mean_gap,
            lo.mean_gap,
            lr.window,
            100.0 * lr.near_fraction,
            100.0 * lo.near_fraction
        );
        let _ = writeln!(
            s,
            "{:>5} | {:>22} | {:>7} | {:>32} | {:>32} | {:>7} | {:>11}{}",
            "d",
            "gather GB/s (plain/pf)",
            "pattern",
            "SpMM random: ms GB/s %gath %tri",
            format!("SpMM {}: ms GB/s %gath %tri", self.reorder),
            "speedup",
            "in-cache ms",
            if self.locality_class.is_some() {
                " | class order: ms speedup"
            } else {
                ""
            }
        );
        for r in &self.dims {
            let g = &r.gather;
            let cell = |x: &SpmmReport| {
                format!(
                    "{:8.2} {:6.2} {:6.0}% {:5.0}%",
                    x.timing.median_s * 1e3,
                    x.gbs,
                    100.0 * x.frac_gather,
                    100.0 * x.frac_triad
                )
            };
            let class = match (&r.class_order, r.class_speedup) {
                (Some(c), Some(x)) => {
                    format!(" | {:>15.2} {:>7.2}x", c.timing.median_s * 1e3, x)
                }
                _ => String::new(),
            };
            let _ = writeln!(
                s,
                "{:>5} | {:>8.2} ({:>5.2}/{:>5.2}) | {:>7.2} | {:>32} | {:>32} | {:>6.2}x | {:>11.2}{}",
                r.d,
                g.gbs,
                g.gbs_plain,
                g.gbs_prefetch,
                r.gather_pattern.gbs,
                cell(&r.random),
                cell(&r.reordered),
                r.speedup,
                r.in_cache.timing.median_s * 1e3,
                class
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::synthetic::CitationLike;

    fn tiny() -> RooflineConfig {
        RooflineConfig {
            dims: vec![8, 24],
            reps: 2,
            warmup: 1,
            triad_len: 1 << 12,
            gemm: Some((8, 16)),
            ..RooflineConfig::default()
        }
    }

    #[test]
    fn big_buffer_is_aligned_zeroed_and_viewable() {
        for len in [0usize, 1, 1000, (2 << 20) / 4 + 3] {
            let mut b = BigBuffer::zeroed(len, true).unwrap();
            assert_eq!(b.as_slice().len(), len);
            assert!(b.as_slice().iter().all(|&v| v == 0.0));
            assert_eq!(b.as_slice().as_ptr() as usize % 4096, 0);
            b.as_mut_slice().iter_mut().for_each(|v| *v = 1.5);
            assert!(b.as_slice().iter().all(|&v| v == 1.5));
        }
        let b = BigBuffer::zeroed(12, false).unwrap();
        assert!(!b.huge_pages_advised());
        // Without the `hugepages` feature a request is never advised.
        #[cfg(not(feature = "hugepages"))]
        assert!(!BigBuffer::zeroed(2 << 20, true)
            .unwrap()
            .huge_pages_advised());
        assert_eq!(b.view(3, 4).unwrap().dim(), (3, 4));
        assert!(b.view(5, 4).is_err());
    }

    #[test]
    fn gather_sums_the_rows_it_names() {
        // Seq and Rayon, plain and prefetch, const and runtime widths give the same sums.
        for d in [8, 24] {
            let (n, group, out_rows) = (50, 3, 2 * GATHER_TASK_ROWS + 5);
            let mut xs = vec![0f32; n * d];
            fill_values(&mut xs, 3);
            let mut rng = ChaCha8Rng::seed_from_u64(1);
            let idx: Vec<u32> = (0..out_rows * group)
                .map(|_| rng.next_u32() % n as u32)
                .collect();
            let mut want = vec![0f32; out_rows * d];
            for g in 0..out_rows {
                for p in g * group..(g + 1) * group {
                    for c in 0..d {
                        want[g * d + c] += xs[idx[p] as usize * d + c];
                    }
                }
            }
            for par in [Par::Seq, Par::Rayon] {
                for pf in [false, true] {
                    let mut out = vec![f32::NAN; out_rows * d];
                    gather_pass(&xs, &idx, group, d, &mut out, pf, par);
                    assert_eq!(out, want, "d {d} {par:?} prefetch {pf}");
                }
            }
        }
    }

    #[test]
    fn median_and_best() {
        let mut k = 0;
        let t = time_reps(2, 3, || {
            k += 1;
        });
        assert_eq!(k, 5);
        assert_eq!(t.samples_s.len(), 3);
        assert!(t.best_s <= t.median_s);
    }

    #[test]
    fn config_is_checked() {
        let bad = [
            RooflineConfig { reps: 0, ..tiny() },
            RooflineConfig {
                dims: vec![],
                ..tiny()
            },
            RooflineConfig {
                dims: vec![16, 0],
                ..tiny()
            },
            RooflineConfig {
                triad_len: 0,
                ..tiny()
            },
            RooflineConfig {
                gemm: Some((0, 4)),
                ..tiny()
            },
        ];
        for c in bad {
            assert!(matches!(c.check(), Err(Error::Config(_))), "{c:?}");
        }
        assert!(tiny().check().is_ok());
        assert!(random_gather(0, 8, 10, 2, 0, 1, 0, false, Par::Seq).is_err());
    }

    /// The whole run at tiny sizes: every field is filled and consistent.
    #[test]
    fn tiny_run_reports_everything() {
        let d = CitationLike {
            n_nodes: 400,
            n_valid: 50,
            n_test: 100,
            ..Default::default()
        }
        .generate(2)
        .unwrap();
        let rep = run(&d.graph, None, "tiny", &tiny()).unwrap();
        assert_eq!(rep.n_nodes, 400);
        assert_eq!(
            rep.nnz,
            NormAdj::<f32>::new(&d.graph, Norm::Symmetric).nnz()
        );
        assert_eq!(rep.dims.len(), 2);
        assert!(rep.triad.gbs > 0.0 && rep.triad.gbs.is_finite());
        assert!(rep.sgemm.as_ref().unwrap().gflops > 0.0);
        for r in &rep.dims {
            assert!(r.gather.gbs >= r.gather.gbs_plain && r.gather.gbs >= r.gather.gbs_prefetch);
            assert_eq!(r.gather.n_rows, 400);
            for s in [&r.random, &r.reordered] {
                assert!(s.gbs > 0.0 && s.gflops > 0.0);
                assert!((s.frac_gather - s.gbs / r.gather.gbs).abs() < 1e-12);
                assert_eq!(s.timing.samples_s.len(), 2);
            }
            assert_eq!(r.reordered.order, "community");
            assert!(r.speedup > 0.0);
        }
        let json = serde_json::to_string(&rep).unwrap();
        assert!(json.contains("\"frac_gather\""));
        assert!(rep.table().contains("speedup"));
        for r in &rep.dims {
            let m = &r.miss_model;
            assert_eq!(
                m.cache_rows as u64,
                (rep.cache_bytes / (4 * r.d as u64)).max(1)
            );
            assert!(m.class_order.is_none() && r.class_order.is_none());
            // 400 rows fit in any real L3 at these widths: only first touches miss.
            assert!(m.random > 0.0 && m.random == m.reordered, "{m:?}");
        }
        assert!(rep.locality_class.is_none());
        for r in &rep.dims {
            assert_eq!(r.in_cache.order, "in-cache");
            assert!(r.in_cache.gbs > 0.0);
        }

        // The class order: needs the labels, then is reported beside the others.
        let cfg = RooflineConfig {
            class_reference: true,
            ..tiny()
        };
        assert!(matches!(
            run(&d.graph, None, "tiny", &cfg),
            Err(Error::Mismatch { .. })
        ));
        assert!(run(&d.graph, Some(&d.labels[1..]), "tiny", &cfg).is_err());
        let rep = run(&d.graph, Some(&d.labels), "tiny", &cfg).unwrap();
        for r in &rep.dims {
            assert_eq!(r.class_order.as_ref().unwrap().order, "class");
            assert!(r.class_speedup.unwrap() > 0.0);
            assert!(r.miss_model.class_order.unwrap() > 0.0);
        }
        assert!(rep.locality_class.is_some());
        assert!(rep.table().contains("class"));
    }

    #[test]
    fn in_cache_pattern_keeps_row_lengths_and_values() {
        let a = Csr::<f32>::new(
            (4, 4),
            vec![0, 2, 2, 5, 6],
            vec![1, 3, 0, 2, 3, 0],
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        );
        let c = in_cache_pattern(a.view());
        assert_eq!(c.indptr().raw_storage(), a.indptr().raw_storage());
        assert_eq!(c.indices(), &[0, 1, 0, 1, 2, 0]);
        assert_eq!(c.data(), a.data());
        // A row slice of a bigger matrix (row pointer not starting at 0).
        let s = a.slice_outer(2..4);
        let cs = in_cache_pattern(s);
        assert_eq!(cs.indptr().raw_storage(), &[0, 3, 4]);
        assert_eq!(cs.indices(), &[0, 1, 2, 0]);
    }

    #[test]
    fn cache_sizes_parse() {
        assert_eq!(parse_cache_size("32768K"), Some(32 << 20));
        assert_eq!(parse_cache_size("1M"), Some(1 << 20));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size(""), None);
        assert_eq!(parse_cache_size("xK"), None);
    }
}
