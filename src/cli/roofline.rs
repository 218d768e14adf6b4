//! `sparse-gcn roofline`: this machine's bounds beside the SpMM they limit.

use std::path::PathBuf;

use sparse_gcn::data::io::{load as load_any, LoadOptions};
use sparse_gcn::data::synthetic::Preset;
use sparse_gcn::diag::roofline::{self, RooflineConfig};
use sparse_gcn::order::Reorder;
use sparse_gcn::{par::thread_pool, Result};

#[derive(clap::Args)]
pub(crate) struct RooflineArgs {
    /// Synthetic preset used when `--data` is absent: cora-like, arxiv-like or products-like.
    #[arg(long, default_value = "arxiv-like")]
    preset: Preset,
    /// Seed of the synthetic preset.
    #[arg(long, default_value_t = 0)]
    data_seed: u64,
    /// A dataset (OGB raw-layout folder, `.npz`, or edge list) instead of the preset; only its
    /// graph is used.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Feature widths d, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "16,64,128,256")]
    dims: Vec<usize>,
    /// The node order compared with a random one: none, random[:SEED], degree, rcm, bfs or
    /// community (label propagation on the structure only).
    #[arg(long, default_value = "community")]
    reorder: Reorder,
    /// Timed repetitions per measurement (medians are reported).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Untimed warm-up repetitions per measurement.
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Size of each of the three stream-triad arrays, MiB.
    #[arg(long, default_value_t = 256)]
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
    /// Worker threads (0: one per CPU).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Print the report as one JSON object as the last line of stdout.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(a: RooflineArgs) -> Result<()> {
    let pool = thread_pool(a.threads)?;
    pool.install(|| {
        let data = match &a.data {
            Some(path) => load_any(path, &LoadOptions::default())?,
            None => a.preset.generate(a.data_seed)?,
        };
        let cfg = RooflineConfig {
            dims: a.dims.clone(),
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
