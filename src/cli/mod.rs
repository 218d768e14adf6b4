//! The `sparse-gcn` command line: one file per subcommand, sharing the data options and the
//! progress bar defined here.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use sparse_gcn::data::io::{load as load_any, LoadOptions};
use sparse_gcn::data::synthetic::Preset;
use sparse_gcn::data::Dataset;
use sparse_gcn::graph::Direction;
use sparse_gcn::Result;

mod eval;
mod generate;
mod info;
mod roofline;
mod train;

#[derive(Parser)]
#[command(
    name = "sparse-gcn",
    version,
    about = "Graph Convolutional Networks on large sparse graphs, on CPUs"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Train a model (Kipf & Welling's GCN by default, or any of `--model`) and report test
    /// accuracy over seeds.
    Train(Box<train::TrainArgs>),
    /// Print a dataset's statistics: nodes, edges, degrees, homophily, classes, split sizes.
    Info(info::InfoArgs),
    /// Evaluate a checkpoint written by `train --save` on a dataset.
    Eval(eval::EvalArgs),
    /// Generate a synthetic citation-like graph and write it in the OGB raw layout.
    Generate(generate::GenerateArgs),
    /// Measure this machine's memory bounds (stream triad, random row gather), sgemm, and the
    /// SpMM in a random and in a reordered node order, as fractions of those bounds.
    Roofline(roofline::RooflineArgs),
}

/// Runs the command line; exit codes: 0 success, 1 data or runtime error (one line on stderr),
/// 2 usage error (clap's).
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Train(a) => train::run(*a),
        Cmd::Info(a) => info::run(a),
        Cmd::Eval(a) => eval::run(a),
        Cmd::Generate(a) => generate::run(a),
        Cmd::Roofline(a) => roofline::run(a),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// Where the data comes from: a file or folder, or a synthetic preset built in memory.
#[derive(clap::Args, Clone)]
pub(crate) struct DataArgs {
    /// Dataset: an OGB raw-layout folder, a gnn-benchmark `.npz`, or an edge list
    /// (`.txt`/`.csv`/`.tsv`/`.edges`/`.el`). Without it, the synthetic `--preset` is built in
    /// memory.
    #[arg(long)]
    pub(crate) data: Option<PathBuf>,
    /// Synthetic preset used when `--data` is absent: cora-like, arxiv-like or products-like.
    #[arg(long, default_value = "cora-like")]
    pub(crate) preset: String,
    /// Seed of the synthetic preset.
    #[arg(long, default_value_t = 0)]
    pub(crate) data_seed: u64,
    /// Split name under DATA/split (default: the only one).
    #[arg(long)]
    pub(crate) split: Option<String>,
    /// Keep edge direction instead of symmetrising.
    #[arg(long)]
    pub(crate) directed: bool,
    /// Feature file for an edge list (one row per node) or a scipy `.npz` adjacency.
    #[arg(long)]
    pub(crate) features: Option<PathBuf>,
    /// Label file for an edge list or a scipy `.npz` adjacency (one class id per node).
    #[arg(long)]
    pub(crate) labels: Option<PathBuf>,
}

impl DataArgs {
    /// Loads the dataset (or generates the preset).
    pub(crate) fn load(&self) -> Result<Dataset> {
        match &self.data {
            Some(path) => {
                let opts = LoadOptions {
                    split: self.split.clone(),
                    direction: if self.directed {
                        Direction::Directed
                    } else {
                        Direction::Undirected
                    },
                    sparse_features_below: Some(0.1),
                    features: self.features.clone(),
                    labels: self.labels.clone(),
                    ..LoadOptions::default()
                };
                load_any(path, &opts)
            }
            None => self.preset.parse::<Preset>()?.generate(self.data_seed),
        }
    }
}

/// A progress bar on stderr when it is a terminal, hidden otherwise.
pub(crate) fn progress_bar(len: u64, template: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::new(len);
    b.set_style(
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    b.enable_steady_tick(std::time::Duration::from_millis(200));
    b
}
