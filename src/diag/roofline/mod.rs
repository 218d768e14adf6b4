//! `roofline`: this machine's memory bounds next to the SpMM it limits, measured in one run.
//!
//! Four measurements, each a median over `reps` timed runs after `warmup` untimed ones:
//! - **Stream triad** (`stream_triad`): `a ← b + s·c` on three f32 arrays much larger than
//!   the L3 cache, STREAM byte counting (3 × array bytes per pass, no write-allocate).
//! - **Random row gather** (`random_gather`): the memory access pattern of SpMM without its
//!   sparse-matrix bookkeeping: an n × d f32 matrix with the same n as the graph (so the same
//!   working set as X), a stream of nnz uniformly random row indices read in order, each group
//!   of ⌊nnz/n⌉ gathered rows summed into one output row. Bytes = gathered rows · d · 4. It
//!   runs with and without a software prefetch of the row `PREFETCH_BYTES` ahead (16 KiB for
//!   rows of 1 KiB or more, as the SpMM does) and the faster of the two is the **gather bound**: the best random row gather
//!   rate measured on this machine for rows of d floats. For reference, `pattern_gather`
//!   runs the same loop on the random-order Â's own index stream: a power-law graph's hub
//!   rows are gathered often and stay cached, so SpMM can run *above* the uniform bound.
//! - **sgemm** ([`sgemm`]): `kernels::gemm` (the packed path on AVX-512, matrixmultiply
//!   otherwise) on an n × k by k × m product.
//! - **FMA peak** ([`fma_peak`]): independent vector fused multiply-adds in registers, the
//!   widest this CPU has, on one thread and on all; sgemm is reported as a fraction of it.
//! - **SpMM** ([`spmm_times_interleaved`]): `kernels::spmm` with Â of the graph in a random node order (an
//!   explicit random permutation, whatever order the input had) and in a reordered one
//!   (community order by default, computed from the structure only), for each width d.
//!   Effective rate = (nnz·d·4 gathered bytes + nnz·8 index and value bytes + (n+1)·8
//!   row-pointer bytes + n·d·4 output bytes) / time, reported as a fraction of the gather
//!   bound at the same d and of the triad rate.
//!
//! - **Column tiles**: where X is larger than half the cache, the same two SpMMs in column tiles
//!   of `kernels::tile_width` columns (`kernels::spmm_tiled`: one tile of every row of X
//!   fits, at the price of one pass over Â per tile). Whether that pays depends on how much of
//!   the last-level cache the process really gets (on a shared host, often less than the OS
//!   reports).
//! - **In-cache SpMM** (`in_cache_pattern`): the random-order Â with the k-th non-zero of each
//!   row moved to column k, so that every gather reads one of the first rows of X, which stay
//!   in L1/L2: the same row lengths, values, arithmetic and output stream without a cache miss
//!   on X. It is the floor under any node order; random-order time minus this floor is what
//!   the gathers' misses cost.
//!
//! The SpMMs of one width (random, reordered, in-cache, and the class order and column tiles
//! when measured) take turns on one X ([`spmm_times_interleaved`]): each round runs every one
//! of them once, so a host whose speed drifts within the run slows them alike and their
//! ratios are this run's.
//!
//! Two more columns explain the SpMM times without timing noise:
//! - **Cache model** (`order::cache_miss_model`): per order and width d, the fraction of
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
//!
//! This file holds what to measure ([`RooflineConfig`]), the whole run ([`run`]: the random,
//! reordered and class orders built and compared, their locality and cache model, then every
//! measurement at every width) and the report it returns ([`RooflineReport`]); the timed
//! measurements themselves are in `measure`, the machine description and the big buffers in
//! `machine`, the text table in `table`. [`floor`] prices a kernel profile (the calls recorded
//! by [`kernels::profile`] during a run) at these bounds: the
//! training epoch it prices for `roofline --epoch` is run by `train::profile`, above this
//! module, which measures kernels only.

pub mod floor;
mod machine;
mod measure;
mod peak;
mod table;
#[cfg(test)]
mod tests;

use std::time::Instant;

use serde::Serialize;

pub(crate) use self::floor::{price, FloorConfig, Profiled};
pub use self::floor::{CallReport, GemmRate, PhaseReport, SpmmFloor};
pub(crate) use self::machine::{load_average, DEFAULT_L3_BYTES};
pub use self::machine::{BigBuffer, Machine};
use self::measure::gbs;
pub(crate) use self::measure::{in_cache_pattern, pattern_gather, random_gather, stream_triad};
pub use self::measure::{
    sgemm, spmm_time_csr, spmm_times_interleaved, GatherReport, GemmReport, SpmmRun, Timing,
    TriadReport,
};
pub use self::peak::{fma_peak, FmaPeak};
use crate::graph::{Graph, Norm, NormAdj};
use crate::order::{self, Locality, Permutation, Reorder};
use crate::{kernels, ConfigError, Error, Par, Result};

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
    /// The gather bound: uniformly random rows (`random_gather`).
    pub gather: GatherReport,
    /// The gather with the random-order Â's own index stream (`pattern_gather`), for
    /// reference: above the bound when hub rows are reused from the caches.
    pub gather_pattern: GatherReport,
    /// SpMM in a random node order.
    pub random: SpmmReport,
    /// SpMM in the reordered node order.
    pub reordered: SpmmReport,
    /// Random-order median time over reordered median time.
    pub speedup: f64,
    /// SpMM of `in_cache_pattern`: the floor without cache misses on X.
    pub in_cache: SpmmReport,
    /// SpMM in the class order (diagnostic; only with [`RooflineConfig::class_reference`]).
    pub class_order: Option<SpmmReport>,
    /// Random-order median time over class-order median time.
    pub class_speedup: Option<f64>,
    /// The cache model at this width.
    pub miss_model: MissModel,
    /// The column tile `kernels::tile_width` picks for this width and the cache size
    /// ([`RooflineReport::cache_bytes`]); `d` when X fits as it is.
    pub tile: usize,
    /// SpMM in the random order in column tiles of `tile` (when `tile < d`).
    pub random_tiled: Option<SpmmReport>,
    /// SpMM in the reordered order in column tiles of `tile` (when `tile < d`).
    pub reordered_tiled: Option<SpmmReport>,
}

/// `order::cache_miss_model` of each order, for a cache of [`RooflineReport::cache_bytes`]
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
    /// `DEFAULT_L3_BYTES`).
    pub cache_bytes: u64,
    /// Stream triad.
    pub triad: TriadReport,
    /// sgemm, if measured.
    pub sgemm: Option<GemmReport>,
    /// The FMA peak, what the sgemm rate is a fraction of.
    pub fma_peak: FmaPeak,
    /// The sgemm rate over the FMA peak on every thread, if measured.
    pub sgemm_fma_fraction: Option<f64>,
    /// Gather bound and SpMMs per width.
    pub dims: Vec<DimReport>,
}

/// The FMA peak, and `sgemm`'s rate as a fraction of it.
fn against_peak(sgemm: Option<&GemmReport>, par: Par) -> (FmaPeak, Option<f64>) {
    let peak = fma_peak(par);
    let f = sgemm.map(|g| g.gflops / peak.gflops.max(f64::MIN_POSITIVE));
    (peak, f)
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
    let (peak, sgemm_fma_fraction) = against_peak(sgemm.as_ref(), par);

    let random_perm = order::order(graph, Reorder::Random(cfg.seed))?;
    let g_random = order::permute_graph(graph, &random_perm);
    let t = Instant::now();
    let perm = order::order(&g_random, cfg.reorder)?;
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
        let tile = kernels::tile_width(n, d, 4, cache_bytes as usize);
        // Every SpMM of this width taking turns on one X (random, reordered, in-cache floor,
        // then the class order and the tiles when measured): their ratios are this run's.
        let mut mats = vec![(a_random.a(), d), (a_reordered.a(), d), (a_cache.view(), d)];
        if let Some(a) = &a_class {
            mats.push((a.a(), d));
        }
        if tile < d {
            mats.push((a_random.a(), tile));
            mats.push((a_reordered.a(), tile));
        }
        let (times, adv, anon) = spmm_times_interleaved(&mats, d, w, r, cfg.seed, huge, par)?;
        advised &= adv;
        note_huge(anon);
        let mut times = times.into_iter();
        let mut next = || {
            times
                .next()
                .unwrap_or_else(|| unreachable!("a timing per matrix"))
        };
        let (t_random, t_reordered, t_cache) = (next(), next(), next());
        let t_class = a_class.as_ref().map(|_| next());
        let (t_random_tiled, t_reordered_tiled) = if tile < d {
            (Some(next()), Some(next()))
        } else {
            (None, None)
        };
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
            tile,
            random_tiled: t_random_tiled.map(|t| mk("random, tiled".into(), t)),
            reordered_tiled: t_reordered_tiled.map(|t| mk(format!("{}, tiled", cfg.reorder), t)),
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
        fma_peak: peak,
        sgemm_fma_fraction,
        dims,
    })
}
