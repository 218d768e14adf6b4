//! `roofline --epoch`: one training epoch of a model beside its floor on this machine.
//!
//! The epoch (a [`train_step`]: forward, loss, backward, optimiser update; no evaluation) is
//! timed after `warmup` untimed ones, `reps` times, and its median is `epoch_ms`. Then `reps`
//! more epochs run with the kernel profile on ([`kernels::profile`](crate::kernels::profile)): every kernel call
//! records its phase, its work and its time. The floor of each call is
//! - a GEMM's flops at the sgemm rate measured here for its shape (`kernels::gemm` on an
//!   (m × k)·(k × n) product of random values; a product whose inner dimension is its longest,
//!   a weight gradient Hᵀ·G over every node, is priced at the rate of the same flops with that
//!   dimension as the rows, which is how such a product splits across threads);
//! - an SpMM's time at the in-cache floor of Â at its width ([`in_cache_pattern`]: the same
//!   row lengths and values with every gather hitting L1/L2), scaled by its non-zeros plus rows
//!   over Â's (also the weight gradient of sparse features, Xᵀ·G, a sparse product of the same
//!   kind);
//! - an element-wise pass's bytes (read plus written, counted by each kernel) at the triad
//!   rate measured here;
//!
//! and `epoch_floor_ms` is their sum over one epoch. Per phase the report gives the calls, the
//! measured time (median over the profiled epochs of the phase's sum), the floor and their
//! ratio; `other` is the epoch's time outside every recorded call (the layers' own loops, the
//! exact sums' bookkeeping, allocation), whose floor is 0.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Serialize;

use super::measure::{in_cache_pattern, sgemm, spmm_time_csr, stream_triad};
use super::Machine;
use crate::graph::NormAdj;
use crate::kernels::profile::{Phase, Record, Recording, Work};
use crate::train::{
    build_model, check_data, median, rng_stream, train_step, TrainConfig, TrainData,
};
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

/// One phase of the epoch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseReport {
    /// Its name (`gemm`, `spmm`, `weight-grad`, `reduce`, `elementwise`, `loss`,
    /// `optimizer`, `other`).
    pub phase: String,
    /// Recorded calls per epoch.
    pub calls: usize,
    /// Measured time per epoch, ms (median over the profiled epochs).
    pub ms: f64,
    /// Its floor, ms.
    pub floor_ms: f64,
    /// `ms / floor_ms` (`None` for a floor of 0).
    pub ratio: Option<f64>,
}

/// One kernel call of the first profiled epoch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallReport {
    /// Its phase.
    pub phase: String,
    /// Its work: `gemm MxKxN`, `spmm ROWSxD (NNZ nnz)` or `stream BYTES B`.
    pub work: String,
    /// Its time, ms.
    pub ms: f64,
    /// Its floor, ms.
    pub floor_ms: f64,
}

/// A rate the floors were priced at.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GemmRate {
    /// Rows of the measured product.
    pub m: usize,
    /// Its inner dimension.
    pub k: usize,
    /// Its columns.
    pub n: usize,
    /// GFLOP/s measured (best of five).
    pub gflops: f64,
}

/// The in-cache SpMM floor at one width.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpmmFloor {
    /// Width.
    pub d: usize,
    /// In-cache time of Â at this width, ms (best of five).
    pub ms: f64,
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
}

/// Runs `roofline --epoch` on `data` (Â held whole); call it inside the rayon pool whose
/// threads should be used.
///
/// # Errors
/// The data's or configuration's errors ([`check_data`], the model's checks); DropEdge is not
/// supported (its sampled Â changes every epoch); a zero `reps`; allocation errors.
pub fn epoch(
    data: &TrainData<'_, f32>,
    local: &NormAdj<f32>,
    name: &str,
    cfg: &EpochConfig,
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
    let mut model = build_model(data.adj, data.x, data.n_classes, &cfg.train.model, cfg.seed)?;
    let mut opt = cfg.train.optimizer::<f32>();
    let mut rng = rng_stream(cfg.seed, 1);
    let train = &data.split.train;
    let mut step = || {
        let t = Instant::now();
        train_step(
            &mut model,
            &mut *opt,
            data.adj,
            data.x,
            data.labels,
            train,
            &mut rng,
            par,
        )?;
        Ok::<f64, crate::Error>(t.elapsed().as_secs_f64())
    };
    for _ in 0..cfg.warmup {
        step()?;
    }
    let times = (0..cfg.reps)
        .map(|_| step())
        .collect::<Result<Vec<f64>>>()?;
    let epoch_s = median(times);
    let rec = Recording::start(4096);
    let mut epochs: Vec<(f64, Vec<Record>)> = Vec::with_capacity(cfg.reps);
    for _ in 0..cfg.reps {
        let s = step()?;
        epochs.push((s, rec.take()));
    }
    drop(rec);
    let profiled_s = median(epochs.iter().map(|e| e.0).collect());
    let n_params = model.n_params();

    // The rates.
    let triad = stream_triad(cfg.triad_len, 1, 5, cfg.huge_pages, par)?;
    let triad_bps = triad.gbs_best * 1e9;
    let mut gemm_shapes = BTreeMap::new();
    let mut widths = BTreeMap::new();
    for r in &epochs[0].1 {
        match r.work {
            Work::Gemm { m, k, n } => {
                gemm_shapes.entry(priced_shape(m, k, n)).or_insert(0.0);
            }
            Work::Spmm { d, .. } => {
                widths.entry(d).or_insert(0.0);
            }
            Work::Stream { .. } => {}
        }
    }
    for (&(m, k, n), rate) in gemm_shapes.iter_mut() {
        *rate = {
            let g = sgemm(m, k, n, 1, 5, par);
            2.0 * (m * k) as f64 * n as f64 / g.timing.best_s.max(f64::MIN_POSITIVE)
        };
    }
    let a_cache = in_cache_pattern(local.a());
    let unit = (a_cache.nnz() + a_cache.rows()).max(1) as f64;
    for (&d, t) in widths.iter_mut() {
        *t = spmm_time_csr(a_cache.view(), d, d, 1, 5, cfg.seed, cfg.huge_pages, par)?
            .timing
            .best_s;
    }
    drop(a_cache);
    let floor_of = |w: &Work| -> f64 {
        match *w {
            Work::Gemm { m, k, n } => {
                2.0 * (m * k) as f64 * n as f64 / gemm_shapes[&priced_shape(m, k, n)]
            }
            Work::Spmm { rows, nnz, d } => widths[&d] * (nnz + rows) as f64 / unit,
            Work::Stream { bytes } => bytes as f64 / triad_bps,
        }
    };

    let mut phases = Vec::new();
    let mut recorded = vec![0.0; epochs.len()];
    let mut floor_s = 0.0;
    for phase in Phase::ALL {
        let of = |recs: &[Record]| recs.iter().filter(|r| r.phase == phase).count();
        let calls = of(&epochs[0].1);
        if calls == 0 {
            continue;
        }
        let times: Vec<f64> = epochs
            .iter()
            .map(|(_, recs)| {
                recs.iter()
                    .filter(|r| r.phase == phase)
                    .map(|r| r.seconds)
                    .sum()
            })
            .collect();
        for (acc, t) in recorded.iter_mut().zip(&times) {
            *acc += t;
        }
        let floor: f64 = epochs[0]
            .1
            .iter()
            .filter(|r| r.phase == phase)
            .map(|r| floor_of(&r.work))
            .sum();
        floor_s += floor;
        phases.push(phase_report(phase.name(), calls, median(times), floor));
    }
    let other = median(
        epochs
            .iter()
            .zip(&recorded)
            .map(|((s, _), r)| (s - r).max(0.0))
            .collect(),
    );
    phases.push(phase_report("other", 0, other, 0.0));
    let mut top_calls: Vec<CallReport> = epochs[0]
        .1
        .iter()
        .map(|r| CallReport {
            phase: r.phase.name().to_string(),
            work: match r.work {
                Work::Gemm { m, k, n } => format!("gemm {m}x{k}x{n}"),
                Work::Spmm { rows, nnz, d } => format!("spmm {rows}x{d} ({nnz} nnz)"),
                Work::Stream { bytes } => format!("stream {bytes} B"),
            },
            ms: r.seconds * 1e3,
            floor_ms: floor_of(&r.work) * 1e3,
        })
        .collect();
    top_calls.sort_by(|a, b| (b.ms - b.floor_ms).total_cmp(&(a.ms - a.floor_ms)));
    top_calls.truncate(8);
    machine.load_after = super::load_average();
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
        epoch_floor_ms: floor_s * 1e3,
        ratio: epoch_s / floor_s.max(f64::MIN_POSITIVE),
        phases,
        top_calls,
        triad_gbs: triad.gbs_best,
        gemm_rates: gemm_shapes
            .iter()
            .map(|(&(m, k, n), &r)| GemmRate {
                m,
                k,
                n,
                gflops: r / 1e9,
            })
            .collect(),
        spmm_floors: widths
            .iter()
            .map(|(&d, &t)| SpmmFloor { d, ms: t * 1e3 })
            .collect(),
    })
}

/// The shape whose measured sgemm rate prices an (m × k)·(k × n) product: itself, or with the
/// inner dimension as the rows when it is the longer one (a weight gradient over every node).
fn priced_shape(m: usize, k: usize, n: usize) -> (usize, usize, usize) {
    if k > m {
        (k, m, n)
    } else {
        (m, k, n)
    }
}

fn phase_report(name: &str, calls: usize, s: f64, floor: f64) -> PhaseReport {
    PhaseReport {
        phase: name.to_string(),
        calls,
        ms: s * 1e3,
        floor_ms: floor * 1e3,
        ratio: (floor > 0.0).then(|| s / floor),
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
            .map(|g| format!("{}x{}x{} {:.1}", g.m, g.k, g.n, g.gflops))
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
        s
    }
}
