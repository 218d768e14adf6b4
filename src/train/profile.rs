//! `roofline --epoch`: one training epoch of a model beside its floor on this machine.
//!
//! The epoch (a [`train_step`](super::train_step): forward, loss, backward, optimiser update;
//! with mini-batches, one such step a batch while the next batch is built beside it; no
//! evaluation) is
//! timed after `warmup` untimed ones, `reps` times, and its median is `epoch_ms`. Then `reps`
//! more epochs run with the kernel profile on ([`kernels::profile`](crate::kernels::profile)):
//! every kernel call records its phase, its work and its time. The diagnostics price those
//! calls at this machine's bounds ([`diag::roofline::floor`](crate::diag::roofline::floor):
//! a GEMM at the sgemm rate of its shape, an SpMM at Â's in-cache floor, an element-wise pass
//! at the triad rate), and `epoch_floor_ms` is their sum over one epoch, with mini-batches plus
//! the bytes of building the epoch's batches at the triad rate ([`sampling_bytes`]: building
//! runs beside the steps, on the same cores, so its floor adds to theirs). This file is the run
//! level of that report (the model built and trained); `diag` measures kernels only.

use std::time::Instant;

use serde::Serialize;

use super::steps::{BatchStats, Steps};
use super::{check_data, median, rng_stream, Batches, FitOptions, TrainConfig, TrainData};
use crate::diag::roofline::{
    fma_peak, load_average, price, CallReport, FloorConfig, FmaPeak, GemmRate, Machine,
    PhaseReport, Profiled, SpmmFloor,
};
use crate::graph::NormAdj;
use crate::kernels::profile::Recording;
use crate::{ConfigError, Result};

/// What `roofline --epoch` runs.
#[derive(Debug, Clone)]
pub struct EpochConfig {
    /// The model and its optimiser (epochs and stop rule are not used).
    pub train: TrainConfig,
    /// Untimed epochs first.
    pub warmup: usize,
    /// Timed epochs, and as many profiled ones.
    pub reps: usize,
    /// Seed of the weights and the dropout masks.
    pub seed: u64,
    /// Elements of each triad array (f32).
    pub triad_len: usize,
    /// Advise huge pages on the triad and SpMM floor buffers.
    pub huge_pages: bool,
}

/// The whole `roofline --epoch` report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EpochReport {
    /// Where it ran.
    pub machine: Machine,
    /// Dataset name.
    pub dataset: String,
    /// Nodes.
    pub n_nodes: usize,
    /// Non-zeros of Â.
    pub nnz: usize,
    /// The model (`--model`).
    pub model: String,
    /// Graph convolutions.
    pub layers: usize,
    /// Hidden width.
    pub hidden: usize,
    /// Trainable parameters.
    pub n_params: usize,
    /// Untimed epochs.
    pub warmup: usize,
    /// Timed (and profiled) epochs.
    pub reps: usize,
    /// Median training epoch, ms (no profiling).
    pub epoch_ms: f64,
    /// Median training epoch with the profile on, ms.
    pub epoch_profiled_ms: f64,
    /// The epoch's floor, ms.
    pub epoch_floor_ms: f64,
    /// `epoch_ms / epoch_floor_ms`.
    pub ratio: f64,
    /// Per phase.
    pub phases: Vec<PhaseReport>,
    /// The calls furthest above their floors (time less floor) in the first profiled epoch,
    /// at most eight, furthest first.
    pub top_calls: Vec<CallReport>,
    /// Triad rate the element-wise floors use, GB/s (best of five).
    pub triad_gbs: f64,
    /// sgemm rates of the GEMM floors.
    pub gemm_rates: Vec<GemmRate>,
    /// In-cache SpMM floors.
    pub spmm_floors: Vec<SpmmFloor>,
    /// Batches an epoch (`None`: full batch).
    pub batches_per_epoch: Option<usize>,
    /// Median time of an epoch's batch building (on another worker, beside the training
    /// steps), ms; 0 for full batch.
    pub sample_ms: f64,
    /// Bytes the first profiled epoch's batches read and wrote at least (see
    /// [`sampling_bytes`]).
    pub sample_bytes: u64,
    /// Those bytes at the triad rate, ms (a part of `epoch_floor_ms`).
    pub sample_floor_ms: f64,
    /// The FMA peak on this pool's threads (and on one).
    pub fma_peak: FmaPeak,
    /// The FMA peak on every thread, GFLOP/s (`fma_peak.gflops`).
    pub fma_peak_gflops: f64,
    /// The epoch's GEMMs (forward, input gradients and weight gradients together) as a
    /// fraction of the FMA peak: their flops over their time, over `fma_peak_gflops`.
    pub gemm_fma_fraction: f64,
    /// The GEMMs' rate, GFLOP/s (their flops over their time, every profiled epoch).
    pub gemm_gflops: f64,
    /// The GEMMs' floating-point operations in the first profiled epoch, GFLOP (what
    /// `epoch_floor_fma_ms` prices at the peak).
    pub gemm_gflop: f64,
    /// Their floor at the sgemm rates, ms: the part of `epoch_floor_ms` that
    /// `epoch_floor_fma_ms` prices at the FMA peak instead (the GEMM calls of every phase).
    pub gemm_floor_ms: f64,
    /// The epoch's floor with its GEMMs at the FMA peak rather than at the sgemm rates, ms.
    pub epoch_floor_fma_ms: f64,
}

/// The bytes building batches of `stats` reads and writes at least: each batch's rows of X
/// read and written (`row_bytes` a row), a row pointer, degree and label a node (16 bytes),
/// and each stored entry of its Â (or blocks) read from the graph and written as an index and
/// a value (12 bytes). A subgraph batch's entries are its edges both ways and its self-loops;
/// a stack of blocks (`blocks`) counts its entries and its first level's nodes.
pub fn sampling_bytes(stats: &BatchStats, row_bytes: u64, blocks: bool) -> u64 {
    let entries = if blocks {
        stats.edges_sum
    } else {
        2 * stats.edges_sum + stats.nodes_sum
    };
    stats.nodes_sum * (2 * row_bytes + 16) + 12 * entries
}

/// Runs `roofline --epoch` on `data` (Â held whole; on the batches of `batches` when given,
/// their epoch's floor adding the bytes of building them at the triad rate, [`sampling_bytes`]);
/// call it inside the rayon pool whose threads should be used.
///
/// # Errors
/// The data's or configuration's errors ([`check_data`], the model's checks); DropEdge is not
/// supported (its sampled Â changes every epoch); a zero `reps`; allocation errors.
pub fn epoch(
    data: &TrainData<'_, f32>,
    local: &NormAdj<f32>,
    name: &str,
    cfg: &EpochConfig,
    batches: Option<Batches<'_>>,
) -> Result<EpochReport> {
    if cfg.reps == 0 {
        return Err(ConfigError::ZeroCount("reps").into());
    }
    if cfg.train.model.drop_edge > 0.0 {
        return Err(ConfigError::Unsupported {
            what: "roofline --epoch with DropEdge (the sampled Â changes every epoch)",
        }
        .into());
    }
    check_data(data)?;
    cfg.train.check_optim()?;
    if local.id() != data.adj.id() {
        return Err(ConfigError::Unsupported {
            what: "roofline --epoch with an Â other than the training data's",
        }
        .into());
    }
    let mut machine = Machine::detect();
    let par = cfg.train.par;
    let opts = FitOptions {
        batches,
        ..FitOptions::default()
    };
    let orders =
        super::blocks::block_orders(&cfg.train.model, batches.as_ref(), data.x.is_sparse());
    let mut model = super::blocks::build_model_ordered(
        data.adj,
        data.x,
        data.n_classes,
        &cfg.train.model,
        cfg.seed,
        orders.as_deref(),
    )?;
    let mut opt = cfg.train.optimizer::<f32>();
    let mut rng = rng_stream(cfg.seed, 1);
    let mut steps = Steps::new(
        &mut model,
        data,
        &opts,
        cfg.seed,
        cfg.train.batches_per_step,
    )?;
    let mut e = 0;
    let mut step = |model: &mut crate::nn::Model<f32>| {
        let t = Instant::now();
        let (_, _, sample_ms) = steps.epoch(model, &mut *opt, data, e, &mut rng, par)?;
        e += 1;
        let built = steps.stats().unwrap_or_default();
        Ok::<_, crate::Error>((t.elapsed().as_secs_f64(), sample_ms, built))
    };
    for _ in 0..cfg.warmup {
        step(&mut model)?;
    }
    let mut built = BatchStats::default();
    let (times, sampled): (Vec<f64>, Vec<f64>) = (0..cfg.reps)
        .map(|_| {
            let (t, s, b) = step(&mut model)?;
            built = b;
            Ok((t, s))
        })
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .unzip();
    let epoch_s = median(times);
    let sample_ms = median(sampled);
    let rec = Recording::start(4096);
    let mut runs: Vec<Profiled> = Vec::with_capacity(cfg.reps);
    let mut first_stats = None;
    for _ in 0..cfg.reps {
        let (seconds, _, after) = step(&mut model)?;
        if first_stats.is_none() {
            first_stats = Some(delta(built, after));
        }
        runs.push(Profiled {
            seconds,
            records: rec.take(),
        });
    }
    drop(rec);
    let profiled_s = median(runs.iter().map(|e| e.seconds).collect());
    let n_params = model.n_params();
    let mut floors = price(
        &runs,
        local.a(),
        &FloorConfig {
            triad_len: cfg.triad_len,
            huge_pages: cfg.huge_pages,
            seed: cfg.seed,
            par,
        },
    )?;
    let x = data.x;
    let row_bytes = match x.is_sparse() {
        true => 8 * (x.nnz() + x.n_rows()) as u64 / x.n_rows().max(1) as u64,
        false => 4 * x.n_cols() as u64,
    };
    let blocks = batches.is_some_and(|b| b.sampler.blocks().is_some());
    let sample_bytes = sampling_bytes(&first_stats.unwrap_or_default(), row_bytes, blocks);
    let sample_floor_s = sample_bytes as f64 / (floors.triad_gbs * 1e9).max(f64::MIN_POSITIVE);
    if let Some(b) = batches {
        floors.floor_s += sample_floor_s;
        floors.phases.push(PhaseReport {
            phase: "sampling".into(),
            calls: b.sampler.batches(),
            ms: sample_ms,
            floor_ms: sample_floor_s * 1e3,
            ratio: (sample_floor_s > 0.0).then(|| sample_ms / (sample_floor_s * 1e3)),
        });
    }
    // The FMA peak: the GEMMs as a fraction of it, and the floor with them at it.
    let peak = fma_peak(par);
    let peak_flops = (peak.gflops * 1e9).max(f64::MIN_POSITIVE);
    let gemm_rate = floors.gemm_rate;
    for g in &mut floors.gemm_rates {
        g.fma_fraction = Some(g.gflops * 1e9 / peak_flops);
    }
    let floor_fma_s = floors.floor_s - floors.gemm_floor_s + floors.gemm_flops / peak_flops;
    machine.load_after = load_average();
    let c = &cfg.train.model;
    Ok(EpochReport {
        machine,
        dataset: name.to_string(),
        n_nodes: local.n_nodes(),
        nnz: data.adj.nnz(),
        model: c.arch.to_string(),
        layers: c.n_layers,
        hidden: c.hidden_dim,
        n_params,
        warmup: cfg.warmup,
        reps: cfg.reps,
        epoch_ms: epoch_s * 1e3,
        epoch_profiled_ms: profiled_s * 1e3,
        epoch_floor_ms: floors.floor_s * 1e3,
        ratio: epoch_s / floors.floor_s.max(f64::MIN_POSITIVE),
        phases: floors.phases,
        top_calls: floors.top_calls,
        triad_gbs: floors.triad_gbs,
        gemm_rates: floors.gemm_rates,
        spmm_floors: floors.spmm_floors,
        batches_per_epoch: batches.map(|b| b.sampler.batches()),
        sample_ms,
        sample_bytes,
        sample_floor_ms: sample_floor_s * 1e3,
        fma_peak_gflops: peak.gflops,
        fma_peak: peak,
        gemm_fma_fraction: gemm_rate / peak_flops,
        gemm_gflops: gemm_rate / 1e9,
        gemm_gflop: floors.gemm_flops / 1e9,
        gemm_floor_ms: floors.gemm_floor_s * 1e3,
        epoch_floor_fma_ms: floor_fma_s * 1e3,
    })
}

/// [`epoch`] on a prepared dataset, on the batches of `cfg.train.batch` (cut from its kept
/// graph) when they are not full batch, after the checks of a training run (memory, the
/// sampler's settings).
///
/// # Errors
/// As [`epoch`] and [`Prepared::fit`](super::run::Prepared::fit).
pub fn prepared_epoch(
    p: &super::run::Prepared,
    name: &str,
    cfg: &EpochConfig,
) -> Result<EpochReport> {
    let sampler = p.checked_sampler(&cfg.train, 1, 0)?;
    let batches = sampler.as_deref().map(|sampler| Batches {
        sampler,
        graph: (&p.data.graph).into(),
        norm: p.prepare.norm,
    });
    epoch(&p.train_data(), &p.adj, name, cfg, batches)
}

/// The batches built between `before` and `after`.
fn delta(before: BatchStats, after: BatchStats) -> BatchStats {
    BatchStats {
        built: after.built - before.built,
        nodes_sum: after.nodes_sum - before.nodes_sum,
        edges_sum: after.edges_sum - before.edges_sum,
        ..after
    }
}

impl EpochReport {
    /// The report as a text table.
    pub fn table(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let m = &self.machine;
        let _ = writeln!(
            s,
            "machine   {} ({} logical CPUs, {} threads), load {} -> {}",
            m.cpu_model, m.logical_cpus, m.threads, m.load_before, m.load_after
        );
        let _ = writeln!(
            s,
            "dataset   {}: {} nodes, nnz(Â) {}; model {} {} x {} ({} parameters)",
            self.dataset,
            self.n_nodes,
            self.nnz,
            self.model,
            self.layers,
            self.hidden,
            self.n_params
        );
        let rates: Vec<String> = self
            .gemm_rates
            .iter()
            .map(|g| {
                let of_peak = g
                    .fma_fraction
                    .map_or(String::new(), |f| format!(" ({:.0} %)", 100.0 * f));
                format!("{}x{}x{} {:.1}{of_peak}", g.m, g.k, g.n, g.gflops)
            })
            .collect();
        let floors: Vec<String> = self
            .spmm_floors
            .iter()
            .map(|f| format!("d={} {:.2} ms", f.d, f.ms))
            .collect();
        let _ = writeln!(
            s,
            "rates     triad {:.2} GB/s; sgemm GFLOP/s {}; in-cache SpMM {}",
            self.triad_gbs,
            rates.join(", "),
            floors.join(", ")
        );
        let _ = writeln!(
            s,
            "epoch     {:.2} ms (median of {} after {} warm-up; {:.2} ms profiled), floor {:.2} ms: {:.2}x",
            self.epoch_ms,
            self.reps,
            self.warmup,
            self.epoch_profiled_ms,
            self.epoch_floor_ms,
            self.ratio
        );
        let f = &self.fma_peak;
        let _ = writeln!(
            s,
            "fma peak  {:.1} GFLOP/s on {} threads ({:.1} on one; {}, {} floats a vector): the \
             GEMMs ran at {:.1} GFLOP/s, {:.0} % of it; the floor with them at the peak {:.2} ms \
             ({:.2}x)",
            f.gflops,
            f.threads,
            f.gflops_one,
            f.isa,
            f.lanes,
            self.gemm_gflops,
            100.0 * self.gemm_fma_fraction,
            self.epoch_floor_fma_ms,
            self.epoch_ms / self.epoch_floor_fma_ms.max(f64::MIN_POSITIVE)
        );
        let _ = writeln!(
            s,
            "{:>12} | {:>5} | {:>10} | {:>10} | {:>7}",
            "phase", "calls", "ms", "floor ms", "x floor"
        );
        for p in &self.phases {
            let _ = writeln!(
                s,
                "{:>12} | {:>5} | {:>10.2} | {:>10.2} | {:>7}",
                p.phase,
                p.calls,
                p.ms,
                p.floor_ms,
                p.ratio.map_or("-".to_string(), |r| format!("{r:.2}x"))
            );
        }
        let _ = writeln!(s, "furthest above their floors (first profiled epoch):");
        for c in &self.top_calls {
            let _ = writeln!(
                s,
                "  {:>12} {:<36} {:>9.2} ms, floor {:>9.2} ms",
                c.phase, c.work, c.ms, c.floor_ms
            );
        }
        s.push_str(
            "reading the table: each call's floor is its GEMM flops at the sgemm rate for its \
             shape, its SpMM at Â's in-cache floor, or its bytes at the triad rate; `other` is \
             time outside every recorded kernel (floor 0).\n",
        );
        if let Some(b) = self.batches_per_epoch {
            let _ = writeln!(
                s,
                "sampling: {b} batches built beside the steps in {:.2} ms (overlapped), at least \
                 {:.1} MB read and written (rows of X, Â's entries as index and value): floor \
                 {:.2} ms at the triad rate, part of the epoch's floor.",
                self.sample_ms,
                self.sample_bytes as f64 / 1e6,
                self.sample_floor_ms
            );
        }
        s
    }
}
