//! `sparse-gcn`: train and evaluate GCNs on large sparse graphs from the command line.

// Library and binary code never unwraps: bad input gets a typed error (tests may unwrap).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Instant;

use clap::{Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use sparse_gcn::graph::io::{load as load_any, LoadOptions};
use sparse_gcn::graph::reorder::{self, Reorder};
use sparse_gcn::graph::stats::DatasetStats;
use sparse_gcn::graph::synthetic::Preset;
use sparse_gcn::graph::write::write_ogb;
use sparse_gcn::graph::{Dataset, Direction, Graph, Norm, NormAdj};
use sparse_gcn::metrics::accuracy;
use sparse_gcn::nn::loss::softmax_cross_entropy_loss;
use sparse_gcn::nn::{ModelConfig, Order};
use sparse_gcn::roofline::{self, RooflineConfig};
use sparse_gcn::train::checkpoint;
use sparse_gcn::train::{fit_seeds, FitOptions, mean_std, median, OptimizerKind, StopRule, TrainConfig};
use sparse_gcn::{par::thread_pool, Par, Result, Scalar};

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
    /// Train a GCN (Kipf & Welling's defaults) and report test accuracy over seeds.
    Train(TrainArgs),
    /// Print a dataset's statistics: nodes, edges, degrees, homophily, classes, split sizes.
    Info(InfoArgs),
    /// Evaluate a checkpoint written by `train --save` on a dataset.
    Eval(EvalArgs),
    /// Generate a synthetic citation-like graph and write it in the OGB raw layout.
    Generate(GenerateArgs),
    /// Measure this machine's memory bounds (stream triad, random row gather), sgemm, and the
    /// SpMM in a random and in a reordered node order, as fractions of those bounds.
    Roofline(RooflineArgs),
}

#[derive(clap::Args)]
struct RooflineArgs {
    /// Synthetic preset used when `--data` is absent: cora-like, arxiv-like or products-like.
    #[arg(long, default_value = "arxiv-like")]
    preset: String,
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

#[derive(clap::Args)]
struct GenerateArgs {
    /// cora-like, arxiv-like or products-like.
    #[arg(long, default_value = "cora-like")]
    preset: String,
    /// Generator seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Output folder (created; its raw/ and split/ files are replaced atomically).
    #[arg(long)]
    out: PathBuf,
    /// Worker threads (0: one per CPU).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Print one JSON object as the last line of stdout.
    #[arg(long)]
    json: bool,
}

/// Where the data comes from: a file or folder, or a synthetic preset built in memory.
#[derive(clap::Args, Clone)]
struct DataArgs {
    /// Dataset: an OGB raw-layout folder, a gnn-benchmark `.npz`, or an edge list
    /// (`.txt`/`.csv`/`.tsv`/`.edges`/`.el`). Without it, the synthetic `--preset` is built in
    /// memory.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Synthetic preset used when `--data` is absent: cora-like, arxiv-like or products-like.
    #[arg(long, default_value = "cora-like")]
    preset: String,
    /// Seed of the synthetic preset.
    #[arg(long, default_value_t = 0)]
    data_seed: u64,
    /// Split name under DATA/split (default: the only one).
    #[arg(long)]
    split: Option<String>,
    /// Keep edge direction instead of symmetrising.
    #[arg(long)]
    directed: bool,
    /// Feature file for an edge list (one row per node) or a scipy `.npz` adjacency.
    #[arg(long)]
    features: Option<PathBuf>,
    /// Label file for an edge list or a scipy `.npz` adjacency (one class id per node).
    #[arg(long)]
    labels: Option<PathBuf>,
}

impl DataArgs {
    /// Loads the dataset (or generates the preset).
    fn load(&self) -> Result<Dataset> {
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

#[derive(clap::Args)]
struct EvalArgs {
    /// The checkpoint (safetensors) written by `train --save`.
    #[arg(long)]
    checkpoint: PathBuf,
    #[command(flatten)]
    data: DataArgs,
    /// Worker threads (0: one per CPU).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Print one JSON object as the last line of stdout.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct InfoArgs {
    #[command(flatten)]
    data: DataArgs,
    /// Print one JSON object as the last line of stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum OrderArg {
    Auto,
    AggregateFirst,
    TransformFirst,
}

#[derive(Clone, Copy, ValueEnum)]
enum StopArg {
    /// Stop when the validation loss exceeds the mean of the previous 10 epochs (Kipf).
    Kipf,
    /// Stop after --patience epochs without a lower validation loss; restore the best weights.
    Patience,
    /// Run every epoch.
    Never,
}

#[derive(Clone, Copy, ValueEnum)]
enum OptArg {
    Adam,
    Sgd,
}

#[derive(Clone, Copy, ValueEnum)]
enum NormArg {
    /// D^-1/2 (A+I) D^-1/2
    Sym,
    /// D^-1 (A+I)
    Row,
}

#[derive(Clone, Copy, ValueEnum)]
enum RowNormArg {
    /// When every feature is ≥ 0.
    Auto,
    /// Always.
    On,
    /// Never.
    Off,
}

#[derive(Clone, Copy, ValueEnum)]
enum WdScope {
    /// Weight decay on the first layer only (Kipf & Welling).
    First,
    /// Weight decay on every layer.
    All,
}

#[derive(clap::Args)]
#[command(allow_negative_numbers = true)]
struct TrainArgs {
    #[command(flatten)]
    data: DataArgs,
    /// Number of GCN layers.
    #[arg(long, default_value_t = 2)]
    layers: usize,
    /// Hidden width.
    #[arg(long, default_value_t = 16)]
    hidden: usize,
    /// Dropout on the input and between layers.
    #[arg(long, default_value_t = 0.5)]
    dropout: f64,
    /// Learning rate (Adam).
    #[arg(long, default_value_t = 0.01)]
    lr: f64,
    /// L2 weight decay.
    #[arg(long, default_value_t = 5e-4)]
    weight_decay: f64,
    /// Which layers get weight decay.
    #[arg(long, value_enum, default_value_t = WdScope::First)]
    weight_decay_scope: WdScope,
    /// Maximum number of epochs.
    #[arg(long, default_value_t = 200)]
    epochs: usize,
    /// Early-stopping rule.
    #[arg(long, value_enum, default_value_t = StopArg::Kipf)]
    stop: StopArg,
    /// Window (kipf) or patience (patience) of the stop rule.
    #[arg(long, default_value_t = 10)]
    patience: usize,
    /// Evaluation order of Â·H·W.
    #[arg(long, value_enum, default_value_t = OrderArg::Auto)]
    order: OrderArg,
    /// Optimiser.
    #[arg(long, value_enum, default_value_t = OptArg::Adam)]
    optimizer: OptArg,
    /// Adjacency normalisation.
    #[arg(long, value_enum, default_value_t = NormArg::Sym)]
    norm: NormArg,
    /// Give every layer a bias (Kipf & Welling's model has none; PyG's GCNConv has one).
    #[arg(long)]
    bias: bool,
    /// Row-normalise the input features (Kipf's preprocessing): `auto` does it when every
    /// feature is ≥ 0 (bag-of-words), as Kipf & Welling do, and leaves signed dense features
    /// (ogbn-arxiv-like embeddings) as they are.
    #[arg(long, value_enum, default_value_t = RowNormArg::Auto)]
    row_norm: RowNormArg,
    /// Number of seeds (0, 1, …, N−1), trained in parallel.
    #[arg(long, default_value_t = 1)]
    seeds: usize,
    /// Worker threads (0: one per CPU).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Epochs left out of the timing medians.
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// Print one JSON object as the last line of stdout.
    #[arg(long)]
    json: bool,
    /// Save the model trained with the first seed as a safetensors checkpoint at this path
    /// (written atomically: an existing file is replaced only by a complete new one).
    #[arg(long)]
    save: Option<PathBuf>,
    /// Relabel the nodes once after loading, for memory locality: auto, none, random[:SEED],
    /// degree, rcm, bfs or community (label propagation on the graph structure only). `auto`
    /// takes the community order for graphs of more than 65,536 nodes when it cuts the
    /// modelled cache misses of the SpMM by at least 10 %, and keeps the given order otherwise.
    /// Accuracies are the same as without reordering up to floating-point summation order
    /// (each SpMM row sums its neighbours in another order) and, with dropout, up to which
    /// nodes each random dropout mask falls on (masks are drawn in row order); per-node
    /// outputs are returned in the original node order. `--save` records the order applied
    /// (`auto` resolved) as the checkpoint's `reorder` key, and `eval` applies it again.
    #[arg(long, default_value = "auto")]
    reorder: Reorder,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Train(a) => train(a),
        Cmd::Info(a) => info(a),
        Cmd::Eval(a) => eval(a),
        Cmd::Generate(a) => generate(a),
        Cmd::Roofline(a) => roofline(a),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// A progress bar on stderr when it is a terminal, hidden otherwise.
fn progress_bar(len: u64, template: &str) -> ProgressBar {
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

fn generate(a: GenerateArgs) -> Result<()> {
    let preset: Preset = a.preset.parse()?;
    let pool = thread_pool(a.threads)?;
    pool.install(|| {
        let bar = progress_bar(0, "{spinner} {msg} [{elapsed_precise}] {bar:30} {pos}/{len}");
        bar.set_message(format!("generating {preset}"));
        let t0 = Instant::now();
        let d = preset.generate(a.seed)?;
        let gen_s = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        write_ogb(&d, &a.out, &|stage, done, total| {
            bar.set_message(format!("writing {stage}"));
            bar.set_length(total);
            bar.set_position(done);
        })?;
        let write_s = t1.elapsed().as_secs_f64();
        bar.finish_and_clear();
        println!(
            "{}: {} nodes, {} edges, {} features, {} classes; generated in {:.2} s, written to {} in {:.2} s",
            d.name,
            d.graph.n_nodes(),
            d.graph.n_edges(),
            d.features.n_cols(),
            d.n_classes,
            gen_s,
            a.out.display(),
            write_s
        );
        if a.json {
            let j = json!({
                "dataset": d.name,
                "out": a.out.display().to_string(),
                "n_nodes": d.graph.n_nodes(),
                "n_edges": d.graph.n_edges(),
                "in_dim": d.features.n_cols(),
                "n_classes": d.n_classes,
                "generate_s": gen_s,
                "write_s": write_s,
            });
            println!("{j}");
        }
        Ok(())
    })
}

fn info(a: InfoArgs) -> Result<()> {
    let d = a.data.load()?;
    let s = DatasetStats::compute(&d);
    let kind = if s.directed { "directed" } else { "undirected" };
    let storage = if s.features_sparse { "sparse" } else { "dense" };
    println!("dataset            {}", s.name);
    println!("nodes              {}", s.n_nodes);
    println!("edges              {} ({kind})", s.n_edges);
    println!("input edge records {}", s.input_edges);
    println!("self-loops         {} (kept with weight 1)", s.self_loops);
    println!("duplicates merged  {}", s.duplicates_merged);
    println!("isolated nodes     {}", s.isolated_nodes);
    println!(
        "degree             min {} / median {} / p99 {} / max {} (mean {:.2})",
        s.degree_min, s.degree_median, s.degree_p99, s.degree_max, s.degree_mean
    );
    println!("edge homophily     {:.4}", s.edge_homophily);
    let over = if s.clustering_nodes == s.n_nodes {
        "every node".to_string()
    } else {
        format!("{} evenly strided nodes", s.clustering_nodes)
    };
    println!(
        "clustering         {:.4} (mean local coefficient, {over})",
        s.clustering
    );
    println!(
        "features           {} columns, {} stored ({storage})",
        s.in_dim, s.feature_nnz
    );
    println!("classes            {} {:?}", s.n_classes, s.class_counts);
    println!(
        "split {:<12} train {} / valid {} / test {}",
        s.split, s.n_train, s.n_valid, s.n_test
    );
    if a.json {
        println!("{}", serde_json::to_string(&s).unwrap_or_default());
    }
    Ok(())
}

/// Reads a boolean extra of a checkpoint ("true"/"false"), with a default when absent.
fn extra_flag(extra: &BTreeMap<String, String>, key: &str, default: bool) -> bool {
    extra.get(key).map_or(default, |v| v == "true")
}

fn eval(a: EvalArgs) -> Result<()> {
    let pool = thread_pool(a.threads)?;
    pool.install(|| {
        let ck = checkpoint::load(&a.checkpoint)?;
        let mut data_args = a.data.clone();
        data_args.directed |= extra_flag(&ck.extra, "directed", false);
        let mut data = data_args.load()?;
        // The node order training ran in: each SpMM row sums its neighbours in that order, so
        // only the same order reproduces the trained model's logits (and accuracies) bit for
        // bit. Checkpoints without the key were trained in the given order.
        let reorder = match ck.extra.get("reorder") {
            Some(r) => r.parse::<Reorder>()?,
            None => Reorder::None,
        };
        let perm = reorder::order(&data.graph, reorder);
        if !perm.is_identity() {
            data = reorder::apply(&data, &perm)?;
        }
        drop(perm);
        if extra_flag(&ck.extra, "row_normalize", true) {
            data.features.row_normalize();
        }
        let norm = match ck.extra.get("norm").map(String::as_str) {
            Some("row") => Norm::Row,
            _ => Norm::Symmetric,
        };
        let adj = NormAdj::<f32>::new(&data.graph, norm);
        let mut model = ck.build(&adj, &data.features)?;
        let t0 = Instant::now();
        let logits = model.predict(&adj, &data.features, Par::Rayon);
        let infer_ms = t0.elapsed().as_secs_f64() * 1e3;
        let acc = |m| accuracy(logits.view(), &data.labels, m);
        let (train_acc, val_acc, test_acc) = (
            acc(&data.split.train),
            acc(&data.split.valid),
            acc(&data.split.test),
        );
        // As training computes it (the split was validated non-empty, and `load_expecting`
        // checked the classes): equal bit for bit to `train --json`'s `test_losses` entry of
        // the saved seed when the logits are.
        let test_loss = softmax_cross_entropy_loss(logits.view(), &data.labels, &data.split.test)
            .to_f64_lossless();
        println!(
            "checkpoint {} on {}: train {:.4}, val {:.4}, test {:.4} ({:.2} ms inference)",
            a.checkpoint.display(),
            data.name,
            train_acc,
            val_acc,
            test_acc,
            infer_ms
        );
        if a.json {
            let j = json!({
                "checkpoint": a.checkpoint.display().to_string(),
                "dataset": data.name,
                "n_nodes": data.graph.n_nodes(),
                "nnz": adj.nnz(),
                "train_acc": train_acc,
                "val_acc": val_acc,
                "test_acc": test_acc,
                "test_loss": test_loss,
                "infer_ms": infer_ms,
                "reorder": reorder.to_string(),
                "extra": ck.extra,
            });
            println!("{j}");
        }
        Ok(())
    })
}

fn train(a: TrainArgs) -> Result<()> {
    let pool = thread_pool(a.threads)?;
    let threads = pool.current_num_threads();
    pool.install(|| train_in_pool(a, threads))
}

fn train_in_pool(a: TrainArgs, threads: usize) -> Result<()> {
    let t_load = Instant::now();
    let mut data = a.data.load()?;
    // Reorder once; no per-node output is printed or saved, so nothing needs
    // `reorder::unpermute_rows`. Accuracies depend on the order only through the summation
    // order of each SpMM row (and dropout masks): a saved checkpoint records the order applied
    // (`reorder`), and `eval` applies it again.
    let t_reorder = Instant::now();
    let (perm, reordered) = match a.reorder {
        Reorder::Auto => reorder::auto_order(&data.graph),
        r => (reorder::order(&data.graph, r), r),
    };
    if !perm.is_identity() {
        data = reorder::apply(&data, &perm)?;
    }
    drop(perm);
    let reorder_s = t_reorder.elapsed().as_secs_f64();
    let row_norm = match a.row_norm {
        RowNormArg::Auto => data.features.is_non_negative(),
        RowNormArg::On => true,
        RowNormArg::Off => false,
    };
    if row_norm {
        data.features.row_normalize();
    }
    let (norm, norm_name) = match a.norm {
        NormArg::Sym => (Norm::Symmetric, "sym"),
        NormArg::Row => (Norm::Row, "row"),
    };
    let adj = NormAdj::<f32>::new(&data.graph, norm);
    // Training needs only Â: free the raw adjacency (half a GB on products-like).
    let g = std::mem::replace(
        &mut data.graph,
        Graph::try_from_edges(0, &[], Direction::Undirected)?,
    );
    let (g_nodes, g_edges) = (g.n_nodes(), g.n_edges());
    drop(g);
    // Loading and building Â, without the reordering (reported apart as `reorder_s`).
    let load_s = t_load.elapsed().as_secs_f64() - reorder_s;
    let cfg = TrainConfig {
        model: ModelConfig {
            hidden_dim: a.hidden,
            n_layers: a.layers,
            dropout: a.dropout,
            input_dropout: a.dropout,
            bias: a.bias,
            order: match a.order {
                OrderArg::Auto => Order::Auto,
                OrderArg::AggregateFirst => Order::AggregateFirst,
                OrderArg::TransformFirst => Order::TransformFirst,
            },
            ..ModelConfig::default()
        },
        lr: a.lr,
        weight_decay: match a.weight_decay_scope {
            WdScope::First => vec![a.weight_decay],
            WdScope::All => vec![a.weight_decay; 3],
        },
        epochs: a.epochs,
        stop: match a.stop {
            StopArg::Kipf => StopRule::Kipf { window: a.patience },
            StopArg::Patience => StopRule::Patience {
                patience: a.patience,
            },
            StopArg::Never => StopRule::Never,
        },
        optimizer: match a.optimizer {
            OptArg::Adam => OptimizerKind::Adam,
            OptArg::Sgd => OptimizerKind::Sgd,
        },
        warmup: a.warmup,
        par: Par::Rayon,
    };
    println!(
        "dataset {}: {} nodes, {} edges, nnz(Â) {}, {} features ({}), {} classes, split {} {}/{}/{}",
        data.name,
        g_nodes,
        g_edges,
        adj.nnz(),
        data.features.n_cols(),
        if data.features.is_sparse() { "sparse" } else { "dense" },
        data.n_classes,
        data.split.name,
        data.split.train.len(),
        data.split.valid.len(),
        data.split.test.len()
    );
    match (a.reorder, reordered) {
        (Reorder::None, _) => {}
        (Reorder::Auto, Reorder::None) => {
            println!("node order kept (--reorder auto; decided in {reorder_s:.2} s)")
        }
        (Reorder::Auto, r) => println!("reordered the nodes (auto: {r}) in {reorder_s:.2} s"),
        (r, _) => println!("reordered the nodes ({r}) in {reorder_s:.2} s"),
    }
    let seeds: Vec<u64> = (0..a.seeds.max(1) as u64).collect();
    let bar = progress_bar(
        seeds.len() as u64,
        "{spinner} seeds {pos}/{len} [{elapsed_precise}] {msg}",
    );
    let t_train = Instant::now();
    let save_error: Mutex<Option<sparse_gcn::Error>> = Mutex::new(None);
    let on_done = |r: &sparse_gcn::train::RunResult, model: &mut sparse_gcn::nn::Model<f32>| {
        if let (Some(path), true) = (&a.save, r.seed == seeds[0]) {
            let mut extra = BTreeMap::new();
            extra.insert("dataset".to_string(), data.name.clone());
            extra.insert("seed".to_string(), r.seed.to_string());
            extra.insert("row_normalize".to_string(), row_norm.to_string());
            extra.insert("norm".to_string(), norm_name.to_string());
            extra.insert("directed".to_string(), a.data.directed.to_string());
            // What was applied (`auto` resolved), which `eval` parses back.
            extra.insert("reorder".to_string(), reordered.to_string());
            extra.insert("test_acc".to_string(), r.test_acc.to_string());
            if let Err(e) = checkpoint::save(path, model, &extra) {
                if let Ok(mut slot) = save_error.lock() {
                    *slot = Some(e);
                }
            }
        }
        bar.inc(1);
        bar.set_message(format!("seed {} test {:.4}", r.seed, r.test_acc));
    };
    let runs = fit_seeds(
        &adj,
        &data.features,
        &data.labels,
        data.n_classes,
        &data.split,
        &cfg,
        &seeds,
        &FitOptions::default(),
        &on_done,
    )?;
    bar.finish_and_clear();
    if let Some(e) = save_error.lock().ok().and_then(|mut s| s.take()) {
        return Err(e);
    }
    if let Some(path) = &a.save {
        println!("saved the model of seed {} to {}", seeds[0], path.display());
    }
    let train_s = t_train.elapsed().as_secs_f64();
    for r in &runs {
        println!(
            "seed {}: epochs {} (evaluated epoch {}), val {:.4}, test {:.4}, train step {:.3} ms",
            r.seed,
            r.history.len(),
            r.best_epoch,
            r.val_acc,
            r.test_acc,
            r.train_ms_median(a.warmup)
        );
    }
    let tests: Vec<f64> = runs.iter().map(|r| r.test_acc).collect();
    let vals: Vec<f64> = runs.iter().map(|r| r.val_acc).collect();
    let (tm, ts) = mean_std(&tests);
    let (vm, vs) = mean_std(&vals);
    let step_ms: Vec<f64> = runs
        .iter()
        .flat_map(|r| r.history.iter().skip(a.warmup).map(|e| e.train_ms))
        .collect();
    let epoch_ms: Vec<f64> = runs
        .iter()
        .flat_map(|r| r.history.iter().skip(a.warmup).map(|e| e.epoch_ms))
        .collect();
    let concurrent = threads.min(seeds.len());
    println!(
        "test accuracy {:.2} ± {:.2} % over {} seeds (val {:.2} %); train step median {:.3} ms \
         ({} threads, {} runs at a time); total {:.2} s",
        100.0 * tm,
        100.0 * ts,
        seeds.len(),
        100.0 * vm,
        median(step_ms.clone()),
        threads,
        concurrent,
        train_s
    );
    if a.json {
        let orders: Vec<String> = runs
            .first()
            .map(|r| r.orders.iter().map(|o| format!("{o:?}")).collect())
            .unwrap_or_default();
        let j = json!({
            "dataset": data.name,
            "n_nodes": g_nodes,
            "n_edges": g_edges,
            "nnz": adj.nnz(),
            "in_dim": data.features.n_cols(),
            "n_classes": data.n_classes,
            "layers": a.layers,
            "hidden": a.hidden,
            "seeds": seeds.len(),
            "threads": threads,
            "concurrent_runs": concurrent,
            "orders": orders,
            "test_acc_mean": tm,
            "test_acc_std": ts,
            "val_acc_mean": vm,
            "val_acc_std": vs,
            "test_accs": tests,
            "test_losses": runs.iter().map(|r| r.test_loss).collect::<Vec<_>>(),
            "epochs_run": runs.iter().map(|r| r.history.len()).collect::<Vec<_>>(),
            "epoch_ms_median": median(step_ms),
            "epoch_with_eval_ms_median": median(epoch_ms),
            "warmup_epochs": a.warmup,
            "row_norm": row_norm,
            "load_s": load_s,
            "reorder": a.reorder.to_string(),
            "reorder_applied": reordered.to_string(),
            "reorder_s": reorder_s,
            "train_total_s": train_s,
        });
        println!("{j}");
    }
    Ok(())
}

fn roofline(a: RooflineArgs) -> Result<()> {
    let pool = thread_pool(a.threads)?;
    pool.install(|| {
        let data = match &a.data {
            Some(path) => load_any(path, &LoadOptions::default())?,
            None => a.preset.parse::<Preset>()?.generate(a.data_seed)?,
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
