//! `sparse-gcn roofline`: this machine's bounds beside the SpMM they limit.

use std::path::PathBuf;

use sparse_gcn::data::io::{load as load_any, LoadOptions};
use sparse_gcn::data::memory;
use sparse_gcn::data::synthetic::Preset;
use sparse_gcn::data::Dataset;
use sparse_gcn::diag::roofline::{self, RooflineConfig};
use sparse_gcn::nn::{Arch, NormKind};
use sparse_gcn::order::Reorder;
use sparse_gcn::train::profile::{self, EpochConfig};
use sparse_gcn::train::recipe;
use sparse_gcn::train::run::{Prepare, Prepared};
use sparse_gcn::{par::thread_pool, Result};

use super::args;
use super::train::BatchArgs;
use sparse_gcn::sample::BatchConfig;
use sparse_gcn::train::TrainConfig;

#[derive(clap::Args)]
#[command(allow_negative_numbers = true)]
pub(crate) struct RooflineArgs {
    /// Synthetic preset used when `--data` is absent: cora-like, arxiv-like or products-like
    /// [default: arxiv-like].
    #[arg(long)]
    preset: Option<Preset>,
    /// Seed of the synthetic preset [default: 0].
    #[arg(long)]
    data_seed: Option<u64>,
    /// A dataset (OGB raw-layout folder, `.npz`, or edge list) instead of the preset; only its
    /// graph is used.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Feature widths d, comma-separated, each at most 65536 [default: 16,64,128,256].
    #[arg(long, value_delimiter = ',', value_parser = args::hidden)]
    dims: Option<Vec<usize>>,
    /// The node order compared with a random one: none, random[:SEED], degree, rcm, bfs,
    /// community (label propagation on the structure only) or metis (METIS parts).
    #[arg(long, default_value = "community")]
    reorder: Reorder,
    /// Timed repetitions per measurement (medians are reported; at most 1,000,000).
    #[arg(long, default_value_t = 5, value_parser = args::epochs)]
    reps: usize,
    /// Untimed warm-up repetitions per measurement (at most 1,000,000).
    #[arg(long, default_value_t = 1, value_parser = args::epochs_or_zero)]
    warmup: usize,
    /// Size of each of the three stream-triad arrays, MiB (at most 65536).
    #[arg(long, default_value_t = 256, value_parser = args::hidden)]
    triad_mib: usize,
    /// Seed of the random node order and of the benchmark inputs.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Do not advise huge pages (madvise) for the big buffers.
    #[arg(long)]
    no_huge_pages: bool,
    /// Also time the class order: the reordered order sorted by class label. A diagnostic
    /// reference (it reads the labels, so training never uses it).
    #[arg(long)]
    class_order: bool,
    /// Worker threads (0: one per CPU; at most 1024).
    #[arg(long, default_value_t = 0, value_parser = super::args::threads)]
    threads: usize,
    /// Print the report as one JSON object as the last line of stdout.
    #[arg(long)]
    json: bool,
    /// Instead of the SpMM table: one training epoch of the model below on the data (in the
    /// `--reorder` order) beside its floor on this machine, per phase (GEMM, SpMM, weight
    /// gradients, sums, element-wise passes, loss, optimiser, the rest). `--reps` epochs are
    /// timed after `--warmup` (at least 2 here) untimed ones, then as many with the kernel
    /// profile on.
    #[arg(long)]
    epoch: bool,
    /// The model of `--epoch` (as `train --model`).
    #[arg(long, default_value = "gcn", requires = "epoch")]
    model: Arch,
    /// Graph convolutions of `--epoch` (as `train --layers`).
    #[arg(long, default_value_t = 2, value_parser = args::layers, requires = "epoch")]
    layers: usize,
    /// Hidden width of `--epoch` (as `train --hidden`).
    #[arg(long, default_value_t = 16, value_parser = args::hidden, requires = "epoch")]
    hidden: usize,
    /// Dropout of `--epoch` (as `train --dropout`).
    #[arg(long, value_parser = args::rate, requires = "epoch", allow_hyphen_values = true)]
    dropout: Option<f64>,
    /// Normalisation layer of `--epoch` (as `train --norm-layer`).
    #[arg(long, requires = "epoch")]
    norm_layer: Option<NormKind>,
    /// Activation checkpointing of `--epoch` (as `train --checkpoint-every`).
    #[arg(long, value_parser = args::every, requires = "epoch")]
    checkpoint_every: Option<usize>,
    /// The batches of `--epoch` (as `train`'s: `--batch`, `--parts`, `--fanout`, …): an
    /// epoch of one step a batch (or `--batches-per-step`), each batch built beside the step
    /// before, its floor adding the bytes of building them at the triad rate.
    #[command(flatten)]
    batches: BatchArgs,
}

impl RooflineArgs {
    /// Options that the run would not use: usage errors naming the flag.
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        if self.data.is_some() && self.preset.is_some() {
            return Err("--preset: --data is given (the preset is built only without it)".into());
        }
        if self.data.is_some() && self.data_seed.is_some() {
            return Err("--data-seed: seeds the synthetic preset; --data is given".into());
        }
        if self.epoch && self.dims.is_some() {
            return Err("--dims: the SpMM table's widths; --epoch times the model's".into());
        }
        if self.epoch && self.class_order {
            return Err("--class-order: a reference of the SpMM table, not of --epoch".into());
        }
        if let Some((flag, _)) = self.batches.given().iter().find(|(_, g)| *g) {
            if !self.epoch {
                return Err(format!("{flag}: the batches of --epoch (it is not given)"));
            }
        }
        self.batches.check(&self.train_config(), false)
    }
}

impl RooflineArgs {
    /// The training configuration of `--epoch`: the model's recipe and the flags above.
    fn train_config(&self) -> TrainConfig {
        let mut cfg = recipe::default(self.model, self.layers);
        cfg.model.n_layers = self.layers;
        cfg.model.hidden_dim = self.hidden;
        if let Some(p) = self.dropout {
            cfg.model.dropout = p;
            cfg.model.input_dropout = p;
        }
        if let Some(n) = self.norm_layer {
            cfg.model.norm = n;
        }
        if let Some(k) = self.checkpoint_every {
            cfg.model.checkpoint = k;
        }
        cfg.batch = self.batches.config(self.layers);
        cfg.batches_per_step = self.batches.batches_per_step.unwrap_or(1);
        cfg
    }
}

pub(crate) fn run(a: RooflineArgs) -> Result<()> {
    let pool = thread_pool(a.threads)?;
    pool.install(|| {
        let data = match &a.data {
            // `--epoch` loads sparse bag-of-words features as `train` does.
            Some(path) => load_any(
                path,
                &LoadOptions {
                    sparse_features_below: a.epoch.then_some(0.1),
                    ..LoadOptions::default()
                },
            )?,
            None => a
                .preset
                .unwrap_or(Preset::ArxivLike)
                .generate(a.data_seed.unwrap_or(0))?,
        };
        let triad = memory::bytes(a.triad_mib, 3 << 20);
        if a.epoch {
            return run_epoch(&a, data, triad);
        }
        let dims = a.dims.clone().unwrap_or_else(|| vec![16, 64, 128, 256]);
        // The triad's three arrays, and the SpMM's X and outputs at the widest d (a few
        // buffers of n × d).
        let n = data.graph.n_nodes();
        let widest = dims.iter().copied().max().unwrap_or(0);
        let spmm = memory::bytes(n, 4 * 4).saturating_mul(widest as u64);
        memory::check(triad.saturating_add(spmm), || {
            format!(
                "roofline's buffers: three stream-triad arrays of {} MiB (--triad-mib) and the \
                 SpMM's operands of {n} rows × {widest} (--dims)",
                a.triad_mib
            )
        })?;
        let cfg = RooflineConfig {
            dims,
            reps: a.reps,
            warmup: a.warmup,
            triad_len: (a.triad_mib << 20) / 4,
            reorder: a.reorder,
            seed: a.seed,
            huge_pages: !a.no_huge_pages,
            class_reference: a.class_order,
            ..RooflineConfig::default()
        };
        let report = roofline::run(&data.graph, Some(&data.labels), &data.name, &cfg)?;
        print!("{}", report.table());
        if a.json {
            println!("{}", serde_json::to_string(&report).unwrap_or_default());
        }
        Ok(())
    })
}

/// `--epoch`: the model's training epoch beside its floor.
fn run_epoch(a: &RooflineArgs, data: Dataset, triad: u64) -> Result<()> {
    memory::check(triad, || {
        format!(
            "roofline's three stream-triad arrays of {} MiB (--triad-mib)",
            a.triad_mib
        )
    })?;
    let cfg = a.train_config();
    let name = data.name.clone();
    let prepared = Prepared::new(
        data,
        &Prepare {
            reorder: a.reorder,
            keep_graph: cfg.batch != BatchConfig::Full,
            diag_lambda: match cfg.batch {
                BatchConfig::Cluster { diag_lambda, .. } => diag_lambda,
                _ => 0.0,
            },
            ..Prepare::default()
        },
    )?;
    let report = profile::prepared_epoch(
        &prepared,
        &name,
        &EpochConfig {
            train: cfg,
            warmup: a.warmup.max(2),
            reps: a.reps,
            seed: a.seed,
            triad_len: (a.triad_mib << 20) / 4,
            huge_pages: !a.no_huge_pages,
        },
    )?;
    print!("{}", report.table());
    if a.json {
        println!("{}", serde_json::to_string(&report).unwrap_or_default());
    }
    Ok(())
}
