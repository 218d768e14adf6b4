//! `roofline --epoch`: one training epoch of a model beside its floor on this machine.
//!
//! The epoch (a [`train_step`]: forward, loss, backward, optimiser update; no evaluation) is
//! timed after `warmup` untimed ones, `reps` times, and its median is `epoch_ms`. Then `reps`
//! more epochs run with the kernel profile on ([`kernels::profile`](crate::kernels::profile)):
//! every kernel call records its phase, its work and its time. The diagnostics price those
//! calls at this machine's bounds ([`diag::roofline::floor`](crate::diag::roofline::floor):
//! a GEMM at the sgemm rate of its shape, an SpMM at Â's in-cache floor, an element-wise pass
//! at the triad rate), and `epoch_floor_ms` is their sum over one epoch. This file is the run
//! level of that report (the model built and trained); `diag` measures kernels only.

use std::time::Instant;

use serde::Serialize;

use super::{build_model, check_data, median, rng_stream, train_step, TrainConfig, TrainData};
use crate::diag::roofline::{
    load_average, price, CallReport, FloorConfig, GemmRate, Machine, PhaseReport, Profiled,
    SpmmFloor,
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
    let mut runs: Vec<Profiled> = Vec::with_capacity(cfg.reps);
    for _ in 0..cfg.reps {
        let seconds = step()?;
        runs.push(Profiled {
            seconds,
            records: rec.take(),
        });
    }
    drop(rec);
    let profiled_s = median(runs.iter().map(|e| e.seconds).collect());
    let n_params = model.n_params();
    let floors = price(
        &runs,
        local.a(),
        &FloorConfig {
            triad_len: cfg.triad_len,
            huge_pages: cfg.huge_pages,
            seed: cfg.seed,
            par,
        },
    )?;
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
    })
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
