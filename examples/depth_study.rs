//! Depth study: accuracy and oversmoothing of deep GCN variants, depth × variant × seed.
//!
//! ```text
//! cargo run --release --example depth_study                 # the short study, minutes
//! cargo run --release --example depth_study -- --full       # the full grid, hours
//! cargo run --release --example depth_study -- [--data DIR] [--depths 2,8,32]
//!     [--variants gcn,residual,gcnii,jk-cat] [--seeds 2] [--out OUT] [--quick]
//! ```
//!
//! With no flags it runs the short study: depths 2, 8 and 32, the variants gcn, residual,
//! GCNII and JK-cat, 2 seeds, at most 200 epochs with patience 50 — a few minutes on two cores,
//! and enough to see plain GCN collapse with depth while the others hold. `--full` is the full
//! grid: depths 2 to 64, five variants, 5 seeds, each recipe's own epochs and patience. A grid
//! given with `--depths` or `--variants` trains with the recipes' epochs and patience too;
//! `--epochs` and `--patience` override any of them. Without `--data` it runs on the built-in synthetic
//! citation-like graph. Every variant trains with its paper's recipe
//! (`sparse_gcn::train::recipe`); flags override any field for every variant. Flags are named as
//! `sparse-gcn train`'s (`--norm-layer`, `--weight-decay`, `--checkpoint-every`, the model
//! names) and epochs count from 1, as everywhere the crate prints them.
//! `--drop-edge paper,0` runs each variant with its recipe's DropEdge rate and again without.
//! Runs go in parallel (rayon) behind a progress bar.
//!
//! Writes to OUT (default `./depth-study/`, printed at the end):
//! - `depth_study.csv`: one row per variant, depth, DropEdge rate and seed: accuracies, best
//!   epoch, median epoch time, and the last hidden layer's metrics;
//! - `layers.csv`: every layer's metrics (Dirichlet energy, MAD global and over neighbours, mean
//!   cosine similarity, numerical rank of a row sample; `all_zero` for a collapsed output) for
//!   every run, from the evaluated weights;
//! - `summary.md`: mean ± std tables, the command, the machine and the wall time;
//! - `accuracy_vs_depth.svg`, `dirichlet_vs_layer.svg`, `mad_vs_layer.svg`.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use plotters::prelude::*;
use rayon::prelude::*;

use sparse_gcn::data::io::{load, LoadOptions};
use sparse_gcn::data::synthetic::CitationLike;
use sparse_gcn::data::Dataset;
use sparse_gcn::graph::dropedge::DropEdge;
use sparse_gcn::graph::Norm;
use sparse_gcn::metrics::smoothing::{layer_metrics, LayerMetrics};
use sparse_gcn::nn::{Arch, NormKind};
use sparse_gcn::order::Reorder;
use sparse_gcn::train::run::{Prepare, Prepared, RowNorm, Watch};
use sparse_gcn::train::{mean_std, median, recipe, StopRule};
use sparse_gcn::Par;

/// A variant: an architecture, named in the study's tables and plots as `sparse-gcn train
/// --model` names it (`gcn` for the plain GCN stack).
type Variant = Arch;

fn vname(v: Variant) -> &'static str {
    v.name()
}

/// Depth × variant × seed study of deep GCNs (accuracy and oversmoothing metrics).
#[derive(Parser, Debug, Clone)]
#[command(name = "depth_study")]
struct Args {
    /// A dataset folder (OGB raw layout, .npz or edge list); default: the synthetic
    /// citation-like graph.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Nodes of the synthetic graph (default: the generator's default, 2708 as Cora).
    #[arg(long)]
    nodes: Option<usize>,
    /// Seed of the synthetic graph.
    #[arg(long, default_value_t = 0)]
    data_seed: u64,
    /// Depths (graph convolutions), comma-separated [default: 2,8,32; --full: 2,4,8,16,32,64].
    #[arg(long, value_delimiter = ',')]
    depths: Vec<usize>,
    /// Variants (`--model` names): gcn, residual, gcnii, jk-cat, jk-max, jk-att [default: gcn,
    /// residual, gcnii, jk-cat; --full: and jk-max].
    #[arg(long, value_delimiter = ',')]
    variants: Vec<String>,
    /// Seeds per configuration (0, 1, …) [default: 2; --full: 5].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    seeds: Option<u64>,
    /// The full grid (hours here): depths 2 to 64, five variants, 5 seeds, each recipe's own
    /// epochs and patience. Without it: the short study (minutes).
    #[arg(long, conflicts_with = "quick")]
    full: bool,
    /// DropEdge rates, comma-separated; `paper` is each recipe's own rate.
    #[arg(long, value_delimiter = ',', default_value = "paper")]
    drop_edge: Vec<String>,
    /// Output folder.
    #[arg(long, default_value = "depth-study")]
    out: PathBuf,
    /// CI mode: a 1000-node synthetic graph, depths 2,4,8, 2 seeds, 60 epochs.
    #[arg(long)]
    quick: bool,
    /// Hidden width (overrides every recipe).
    #[arg(long)]
    hidden: Option<usize>,
    /// Dropout, input and hidden (overrides).
    #[arg(long)]
    dropout: Option<f64>,
    /// Learning rate (overrides).
    #[arg(long)]
    lr: Option<f64>,
    /// Weight decay (overrides): one value for the first layer (as `train --weight-decay`), or
    /// one per parameter group: stem, hidden, head, norm.
    #[arg(long, value_delimiter = ',')]
    weight_decay: Option<Vec<f64>>,
    /// Maximum epochs (overrides).
    #[arg(long)]
    epochs: Option<usize>,
    /// Patience in epochs (overrides).
    #[arg(long)]
    patience: Option<usize>,
    /// Normalisation after each hidden convolution (as `train --norm-layer`): none, batch,
    /// pair, pair-si or pair-scs (overrides).
    #[arg(long)]
    norm_layer: Option<String>,
    /// GCNII α (overrides).
    #[arg(long)]
    alpha: Option<f64>,
    /// GCNII λ (overrides).
    #[arg(long)]
    lambda: Option<f64>,
    /// Activation checkpointing (as `train --checkpoint-every`): keep every K-th hidden
    /// block's input and recompute the others in backward (0: off).
    #[arg(long, default_value_t = 0)]
    checkpoint_every: usize,
    /// Rows sampled for the numerical rank (0: no rank).
    #[arg(long, default_value_t = 512)]
    rank_sample: usize,
    /// Threads (default: rayon's choice).
    #[arg(long)]
    threads: Option<usize>,
}

/// One run of the grid.
#[derive(Debug, Clone)]
struct Job {
    variant: Variant,
    depth: usize,
    drop_edge: f64,
    seed: u64,
}

#[derive(Debug, Clone)]
struct Outcome {
    job: Job,
    test_acc: f64,
    val_acc: f64,
    best_epoch: usize,
    epochs_run: usize,
    /// The run's epoch cap: a run with `epochs_run == max_epochs` was stopped by the cap, not
    /// by its patience.
    max_epochs: usize,
    epoch_ms: f64,
    layers: Vec<LayerMetrics>,
    /// Whether each layer's output is all zeros (collapsed: its cosines, and so its MAD, are
    /// undefined; the metrics' convention gives MAD 1).
    zero: Vec<bool>,
    /// Index in `layers` of the last hidden layer.
    last_hidden: usize,
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// The grid and limits of the study asked for: `--full`, `--quick`, the short default, or the
/// depths and variants given; returns the number of seeds.
fn settle_args(args: &mut Args) -> u64 {
    // The short study's epoch cap and patience apply to its own grid only: a grid asked for
    // with --depths or --variants trains with the recipes' epochs, as --full does.
    let short = !args.full && !args.quick && args.depths.is_empty() && args.variants.is_empty();
    let (depths, variants, seeds): (&[usize], &str, u64) = if args.full {
        (
            &[2, 4, 8, 16, 32, 64],
            "gcn,residual,gcnii,jk-cat,jk-max",
            5,
        )
    } else if args.quick {
        (&[2, 4, 8], "gcn,residual,gcnii,jk-cat,jk-max", 2)
    } else {
        (&[2, 8, 32], "gcn,residual,gcnii,jk-cat", 2)
    };
    if args.depths.is_empty() {
        args.depths = depths.to_vec();
    }
    if args.variants.is_empty() {
        args.variants = variants.split(',').map(String::from).collect();
    }
    let seeds = *args.seeds.get_or_insert(seeds);
    if args.quick {
        args.nodes = Some(args.nodes.unwrap_or(1000));
        args.epochs = Some(args.epochs.unwrap_or(60));
        args.patience = Some(args.patience.unwrap_or(30));
        args.rank_sample = args.rank_sample.min(256);
    } else if short {
        args.epochs = Some(args.epochs.unwrap_or(200));
        args.patience = Some(args.patience.unwrap_or(50));
    }
    seeds
}

/// Every run of the grid (variants × depths × DropEdge rates × seeds), deepest first so that
/// the parallel tail is short.
fn grid(
    args: &Args,
    variants: &[Variant],
    seeds: u64,
) -> Result<Vec<Job>, Box<dyn std::error::Error>> {
    let mut jobs = Vec::new();
    for &variant in variants {
        for &depth in &args.depths {
            let paper = recipe::depth_study(variant, depth).model.drop_edge;
            let mut rates: Vec<f64> = Vec::new();
            for r in &args.drop_edge {
                let p = if r == "paper" { paper } else { r.parse()? };
                DropEdge::new(p)?;
                if !rates.contains(&p) {
                    rates.push(p);
                }
            }
            for p in rates {
                for seed in 0..seeds {
                    jobs.push(Job {
                        variant,
                        depth,
                        drop_edge: p,
                        seed,
                    });
                }
            }
        }
    }
    jobs.sort_by_key(|j| std::cmp::Reverse(j.depth));
    Ok(jobs)
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let t_start = Instant::now();
    let mut args = Args::parse();
    let seeds = settle_args(&mut args);
    if let Some(t) = args.threads {
        rayon::ThreadPoolBuilder::new()
            .num_threads(t)
            .build_global()?;
    }
    let variants: Vec<Variant> = args
        .variants
        .iter()
        .map(|v| v.parse())
        .collect::<Result<_, _>>()?;
    let norm_override: Option<NormKind> = args.norm_layer.as_deref().map(str::parse).transpose()?;
    // The CLI's pipeline: features row-normalised when non-negative, symmetric Â, the graph
    // kept for DropEdge, the given node order.
    let prepared = Prepared::new(
        load_data(&args)?,
        &Prepare {
            reorder: Reorder::None,
            row_norm: RowNorm::Auto,
            norm: Norm::Symmetric,
            keep_graph: true,
            whole_adj: true,
            diag_lambda: 0.0,
        },
    )?;
    let data = &prepared.data;
    eprintln!(
        "{}: {} nodes, {} edges, {} features, {} classes; split {}/{}/{}",
        data.name,
        data.graph.n_nodes(),
        data.graph.n_edges(),
        data.features.n_cols(),
        data.n_classes,
        data.split.train.len(),
        data.split.valid.len(),
        data.split.test.len()
    );

    let jobs = grid(&args, &variants, seeds)?;
    let bar = ProgressBar::new(jobs.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} runs {msg}")?
            .progress_chars("=> "),
    );
    let errors = Mutex::new(Vec::new());
    let mut outcomes: Vec<Outcome> = jobs
        .par_iter()
        .filter_map(|job| {
            let r = run_job(job, &args, norm_override, &prepared);
            bar.inc(1);
            match r {
                Ok(o) => {
                    bar.set_message(format!(
                        "{} L={} de={} seed {}: {:.3}",
                        vname(job.variant),
                        job.depth,
                        job.drop_edge,
                        job.seed,
                        o.test_acc
                    ));
                    Some(o)
                }
                Err(e) => {
                    if let Ok(mut v) = errors.lock() {
                        v.push(format!("{job:?}: {e}"));
                    }
                    None
                }
            }
        })
        .collect();
    bar.finish();
    if let Ok(errs) = errors.lock() {
        if let Some(e) = errs.first() {
            return Err(format!("{} run(s) failed; first: {e}", errs.len()).into());
        }
    }
    outcomes.sort_by(|a, b| {
        let key = |o: &Outcome| {
            (
                variants.iter().position(|v| *v == o.job.variant),
                o.job.depth,
                (o.job.drop_edge * 1e6) as u64,
                o.job.seed,
            )
        };
        key(a).cmp(&key(b))
    });
    fs::create_dir_all(&args.out)?;
    write_csv(&args.out, &outcomes)?;
    let groups = group(&outcomes);
    let wall = t_start.elapsed().as_secs_f64();
    let summary = summary_md(&args, data, &groups, wall);
    fs::write(args.out.join("summary.md"), &summary)?;
    let chance = 1.0 / data.n_classes.max(1) as f64;
    plot_accuracy(&args.out.join("accuracy_vs_depth.svg"), &groups, chance)?;
    let deepest = args.depths.iter().copied().max().unwrap_or(2);
    plot_layers(
        &args.out.join("dirichlet_vs_layer.svg"),
        &groups,
        deepest,
        "Dirichlet energy",
        |m, _| Some(m.dirichlet),
    )?;
    plot_layers(
        &args.out.join("mad_vs_layer.svg"),
        &groups,
        deepest,
        "MAD (global)",
        // An all-zero output's MAD is 1 by the cosine convention: shown as collapsed.
        |m, zero| Some(if zero { 0.0 } else { m.mad_global }),
    )?;
    for svg in [
        "accuracy_vs_depth.svg",
        "dirichlet_vs_layer.svg",
        "mad_vs_layer.svg",
    ] {
        check_tick_labels(&args.out.join(svg))?;
    }
    println!("{summary}");
    let shown = fs::canonicalize(&args.out).unwrap_or_else(|_| args.out.clone());
    println!(
        "wrote depth_study.csv, layers.csv, summary.md and 3 plots to {}",
        shown.display()
    );
    Ok(())
}

fn load_data(args: &Args) -> Result<Dataset, Box<dyn std::error::Error>> {
    Ok(match &args.data {
        Some(dir) => load(
            dir,
            &LoadOptions {
                sparse_features_below: Some(0.1),
                ..Default::default()
            },
        )?,
        None => {
            let mut g = CitationLike::default();
            if let Some(n) = args.nodes {
                g.n_nodes = n;
            }
            g.generate(args.data_seed)?
        }
    })
}

fn run_job(
    job: &Job,
    args: &Args,
    norm_override: Option<NormKind>,
    prepared: &Prepared,
) -> Result<Outcome, Box<dyn std::error::Error + Send + Sync>> {
    let mut r = recipe::depth_study(job.variant, job.depth);
    if let Some(h) = args.hidden {
        r.model.hidden_dim = h;
    }
    if let Some(p) = args.dropout {
        r.model.dropout = p;
        r.model.input_dropout = p;
    }
    if let Some(n) = norm_override {
        r.model.norm = n;
    }
    // GCNII's own settings (the other variants have none of these).
    for (key, v) in [("alpha", args.alpha), ("lambda", args.lambda)] {
        if let Some(v) = v {
            r.model.arch.set(key, v)?;
        }
    }
    r.model.checkpoint = args.checkpoint_every;
    r.model.drop_edge = job.drop_edge;
    if let Some(lr) = args.lr {
        r.lr = lr;
    }
    if let Some(wd) = &args.weight_decay {
        r.weight_decay = wd.clone();
    }
    if let Some(e) = args.epochs {
        r.epochs = e;
    }
    if let Some(p) = args.patience {
        r.stop = StopRule::Patience { patience: p };
    }
    r.par = Par::Rayon;
    let (run, mut model) = prepared.fit_watched(&r, job.seed, Watch::default())?;
    let (adj, features) = (&prepared.adj, &prepared.data.features);
    let rank = (args.rank_sample > 0).then_some((args.rank_sample, job.seed));
    let (mut layers, mut zero) = (Vec::new(), Vec::new());
    model.visit_representations(adj, features, Par::Rayon, &mut |_, h| {
        layers.push(layer_metrics(adj, h, rank, Par::Rayon));
        zero.push(h.iter().all(|&v| v == 0.0));
    })?;
    let layers = layers.into_iter().collect::<Result<Vec<_>, _>>()?;
    let last_hidden = match job.variant {
        // The last representation is the logits (a graph convolution's output).
        Arch::Gcn(_) | Arch::Residual(_) => layers.len().saturating_sub(2),
        _ => layers.len().saturating_sub(1),
    };
    Ok(Outcome {
        job: job.clone(),
        test_acc: run.test_acc,
        val_acc: run.val_acc,
        // Counted from 1, as the CLI counts epochs.
        best_epoch: run.best_epoch + 1,
        epochs_run: run.history.len(),
        max_epochs: r.epochs,
        // Warm-up epochs are left out, unless the run is too short to have any others.
        epoch_ms: median(
            run.history
                .iter()
                .skip(if run.history.len() > r.warmup {
                    r.warmup
                } else {
                    0
                })
                .map(|h| h.epoch_ms)
                .collect(),
        ),
        layers,
        zero,
        last_hidden,
    })
}

fn label(v: Variant, de: f64) -> String {
    if de > 0.0 {
        format!("{}+DropEdge {de}", vname(v))
    } else {
        vname(v).to_string()
    }
}

fn opt_rank(r: Option<usize>) -> String {
    r.map_or(String::new(), |r| r.to_string())
}

fn write_csv(out: &Path, outcomes: &[Outcome]) -> std::io::Result<()> {
    let mut runs = String::from(
        "variant,depth,drop_edge,seed,test_acc,val_acc,best_epoch,epochs_run,epoch_ms,\
         last_hidden_layer,dirichlet,mad_global,mad_neighbors,mean_cosine,rank\n",
    );
    let mut layers = String::from(
        "variant,depth,drop_edge,seed,layer,dirichlet,mad_global,mad_neighbors,mean_cosine,rank,\
         all_zero\n",
    );
    for o in outcomes {
        let j = &o.job;
        let m = o.layers.get(o.last_hidden);
        let _ = writeln!(
            runs,
            "{},{},{},{},{:.4},{:.4},{},{},{:.3},{},{},{},{},{},{}",
            vname(j.variant),
            j.depth,
            j.drop_edge,
            j.seed,
            o.test_acc,
            o.val_acc,
            o.best_epoch,
            o.epochs_run,
            o.epoch_ms,
            o.last_hidden + 1,
            m.map_or(f64::NAN, |m| m.dirichlet),
            m.map_or(f64::NAN, |m| m.mad_global),
            m.map_or(f64::NAN, |m| m.mad_neighbors),
            m.map_or(f64::NAN, |m| m.mean_cosine),
            opt_rank(m.and_then(|m| m.rank)),
        );
        for (l, m) in o.layers.iter().enumerate() {
            let _ = writeln!(
                layers,
                "{},{},{},{},{},{},{},{},{},{},{}",
                vname(j.variant),
                j.depth,
                j.drop_edge,
                j.seed,
                l + 1,
                m.dirichlet,
                m.mad_global,
                m.mad_neighbors,
                m.mean_cosine,
                opt_rank(m.rank),
                o.zero.get(l).copied().unwrap_or(false)
            );
        }
    }
    fs::write(out.join("depth_study.csv"), runs)?;
    fs::write(out.join("layers.csv"), layers)
}

/// The runs of one (variant, DropEdge rate, depth).
struct Group<'a> {
    variant: Variant,
    drop_edge: f64,
    depth: usize,
    runs: Vec<&'a Outcome>,
}

fn group(outcomes: &[Outcome]) -> Vec<Group<'_>> {
    let mut groups: Vec<Group<'_>> = Vec::new();
    for o in outcomes {
        let j = &o.job;
        match groups
            .iter_mut()
            .find(|g| g.variant == j.variant && g.drop_edge == j.drop_edge && g.depth == j.depth)
        {
            Some(g) => g.runs.push(o),
            None => groups.push(Group {
                variant: j.variant,
                drop_edge: j.drop_edge,
                depth: j.depth,
                runs: vec![o],
            }),
        }
    }
    groups
}

fn stat(g: &Group<'_>, f: impl Fn(&Outcome) -> f64) -> (f64, f64) {
    mean_std(&g.runs.iter().map(|o| f(o)).collect::<Vec<_>>())
}

/// Peak resident set size (`VmHWM` of `/proc/self/status`), bytes.
fn peak_rss() -> Option<u64> {
    let s = fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn machine() -> String {
    let cpu = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    format!(
        "{cpu}, {} hardware threads, {} used",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        rayon::current_num_threads()
    )
}

/// The head of summary.md: the command, the data, the machine, the seeds and the time.
fn summary_head(s: &mut String, args: &Args, data: &Dataset, wall: f64) {
    let cmd: Vec<String> = std::env::args().skip(1).collect();
    let _ = writeln!(s, "# Depth study\n");
    let _ = writeln!(
        s,
        "- command: `cargo run --release --example depth_study{}`",
        if cmd.is_empty() {
            String::new()
        } else {
            format!(" -- {}", cmd.join(" "))
        }
    );
    let _ = writeln!(
        s,
        "- data: {} ({} nodes, {} edges, {} classes; split {}/{}/{})",
        data.name,
        data.graph.n_nodes(),
        data.graph.n_edges(),
        data.n_classes,
        data.split.train.len(),
        data.split.valid.len(),
        data.split.test.len()
    );
    let _ = writeln!(s, "- machine: {}", machine());
    let _ = writeln!(
        s,
        "- seeds: {}; --checkpoint-every {}; wall time {:.0} s; peak RSS (VmHWM) {}\n",
        args.seeds.unwrap_or(0),
        args.checkpoint_every,
        wall,
        peak_rss().map_or("unknown".into(), |b| format!(
            "{:.2} GiB",
            b as f64 / (1u64 << 30) as f64
        ))
    );
}

fn summary_md(args: &Args, data: &Dataset, groups: &[Group<'_>], wall: f64) -> String {
    let mut s = String::new();
    summary_head(&mut s, args, data, wall);
    let mut depths: Vec<usize> = groups.iter().map(|g| g.depth).collect();
    depths.sort_unstable();
    depths.dedup();
    let mut rows: Vec<(Variant, f64)> = Vec::new();
    for g in groups {
        if !rows.contains(&(g.variant, g.drop_edge)) {
            rows.push((g.variant, g.drop_edge));
        }
    }
    let find = |v: Variant, de: f64, d: usize| {
        groups
            .iter()
            .find(|g| g.variant == v && g.drop_edge == de && g.depth == d)
    };
    let header = |s: &mut String, title: &str| {
        let _ = writeln!(s, "## {title}\n");
        let _ = write!(s, "| variant |");
        for d in &depths {
            let _ = write!(s, " depth {d} |");
        }
        let _ = write!(s, "\n|---|");
        for _ in &depths {
            let _ = write!(s, "---|");
        }
        s.push('\n');
    };
    let table = |s: &mut String, title: &str, what: &str, cell: &dyn Fn(&Group<'_>) -> String| {
        header(s, title);
        for &(v, de) in &rows {
            let _ = write!(s, "| {} |", label(v, de));
            for &d in &depths {
                let c = find(v, de, d).map_or(String::new(), cell);
                let _ = write!(s, " {c} |");
            }
            s.push('\n');
        }
        let _ = writeln!(s, "\n{what}\n");
    };
    let capped = groups
        .iter()
        .any(|g| g.runs.iter().any(|o| o.epochs_run >= o.max_epochs));
    table(
        &mut s,
        "Test accuracy, mean ± std over seeds",
        &format!(
            "The test accuracy of each run's best-validation weights. A variant that holds its \
             accuracy as depth grows resists oversmoothing; plain GCN's collapse towards \
             chance is the phenomenon.{}",
            if capped {
                " † marks a cell where at least one run reached the epoch cap before its \
                 patience ran out (it might have improved with more epochs)."
            } else {
                " Every run stopped on its patience, none at the epoch cap."
            }
        ),
        &|g| {
            let (m, sd) = stat(g, |o| o.test_acc);
            let cap = g.runs.iter().any(|o| o.epochs_run >= o.max_epochs);
            format!("{:.3} ± {:.3}{}", m, sd, if cap { " †" } else { "" })
        },
    );
    table(
        &mut s,
        "Dirichlet energy of the last hidden layer (mean over seeds)",
        "How much the last hidden layer's rows still differ across edges (MATH.md): values \
         near 0 mean neighbouring nodes have become indistinguishable (oversmoothed).",
        &|g| {
            let (m, _) = stat(g, |o| {
                o.layers
                    .get(o.last_hidden)
                    .map_or(f64::NAN, |m| m.dirichlet)
            });
            format!("{m:.3e}")
        },
    );
    table(
        &mut s,
        "Dirichlet energy, layer 2 ÷ last layer (mean over seeds)",
        "How many times the energy shrinks from the second layer to the last: 1 for a \
         2-layer model, large when depth smooths the representation away, inf when the last \
         layer's energy is exactly 0.",
        &|g| {
            let (m, _) = stat(g, |o| {
                let e2 = o.layers.get(1).map_or(f64::NAN, |m| m.dirichlet);
                let el = o.layers.last().map_or(f64::NAN, |m| m.dirichlet);
                e2 / el
            });
            format!("{m:.3e}")
        },
    );
    table(
        &mut s,
        "MAD (global) of the last hidden layer",
        "Mean average cosine distance between all pairs of rows (Chen et al. 2020): 0 when every \
         node has the same direction; \"collapsed\" when the layer's output is all zeros in \
         every run (its cosines are undefined; the metric's convention would give 1), the mean \
         over the other runs when only some collapsed.",
        &|g| {
            let live: Vec<&Outcome> = g
                .runs
                .iter()
                .copied()
                .filter(|o| !o.zero.get(o.last_hidden).copied().unwrap_or(false))
                .collect();
            if live.is_empty() {
                return "collapsed".into();
            }
            let vals: Vec<f64> = live
                .iter()
                .map(|o| {
                    o.layers
                        .get(o.last_hidden)
                        .map_or(f64::NAN, |m| m.mad_global)
                })
                .collect();
            let (m, _) = mean_std(&vals);
            if live.len() < g.runs.len() {
                format!("{m:.3} ({} collapsed)", g.runs.len() - live.len())
            } else {
                format!("{m:.3}")
            }
        },
    );
    table(
        &mut s,
        "Median epoch time, ms",
        "Wall time of one epoch (training step and evaluation), warm-up epochs left out; runs \
         share the cores, so these are upper bounds.",
        &|g| {
            let (m, _) = stat(g, |o| o.epoch_ms);
            format!("{m:.1}")
        },
    );
    table(
        &mut s,
        "Best epoch (mean)",
        "The epoch (counting from 1) whose weights were evaluated: the lowest validation loss.",
        &|g| {
            let (m, _) = stat(g, |o| o.best_epoch as f64);
            format!("{m:.0}")
        },
    );
    s
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

fn series_keys(groups: &[Group<'_>]) -> Vec<(Variant, f64)> {
    let mut keys: Vec<(Variant, f64)> = Vec::new();
    for g in groups {
        if !keys.contains(&(g.variant, g.drop_edge)) {
            keys.push((g.variant, g.drop_edge));
        }
    }
    keys
}

/// Canvas of every plot, pixels.
const CANVAS: (u32, u32) = (800, 520);

/// A linear axis over `range` whose ticks are exactly `ticks`: the depths run (on log₂ depth),
/// the decades (on log₁₀ of a metric), the layers. Plotting the logarithm on a linear axis
/// keeps every tick where it is asked for and every label short.
#[derive(Clone)]
struct Ticks {
    range: std::ops::Range<f64>,
    ticks: Vec<f64>,
}

impl Ranged for Ticks {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;
    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let t = (v - self.range.start) / (self.range.end - self.range.start);
        limit.0 + (t * f64::from(limit.1 - limit.0)).round() as i32
    }
    fn key_points<H: plotters::coord::ranged1d::KeyPointHint>(&self, _: H) -> Vec<f64> {
        self.ticks.clone()
    }
    fn range(&self) -> std::ops::Range<f64> {
        self.range.clone()
    }
}

/// `1e-14`, `1e2`: the label of the decade 10^e (e = log₁₀ of the value).
fn decade_label(e: f64) -> String {
    format!("1e{}", e.round() as i64)
}

/// The decades from 10^a to 10^b, every k-th one when there are more than 8.
fn decades(a: i32, b: i32) -> Vec<f64> {
    let step = ((b - a) as usize).div_ceil(8).max(1);
    (a..=b).step_by(step).map(f64::from).collect()
}

fn plot_accuracy(
    path: &Path,
    groups: &[Group<'_>],
    chance: f64,
) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, CANVAS).into_drawing_area();
    root.fill(&WHITE)?;
    // The x axis is log₂(depth), with a tick at each depth run and nowhere else.
    let mut depths: Vec<usize> = groups.iter().map(|g| g.depth).collect();
    depths.sort_unstable();
    depths.dedup();
    let xs: Vec<f64> = depths.iter().map(|&d| (d as f64).log2()).collect();
    let (x0, x1) = (
        xs.first().copied().unwrap_or(1.0) - 0.5,
        xs.last().copied().unwrap_or(1.0) + 0.5,
    );
    let mut chart = ChartBuilder::on(&root)
        .caption("Test accuracy vs depth", ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(45)
        .y_label_area_size(55)
        .build_cartesian_2d(
            Ticks {
                range: x0..x1,
                ticks: xs,
            },
            Ticks {
                range: 0.0..1.0,
                ticks: (0..=10).map(|k| f64::from(k) / 10.0).collect(),
            },
        )?;
    chart
        .configure_mesh()
        .x_desc("graph convolutions (log₂ scale)")
        .y_desc("test accuracy (mean ± std over seeds)")
        .x_label_formatter(&|x| format!("{}", 2f64.powf(*x).round() as u64))
        .y_label_formatter(&|y| format!("{y:.1}"))
        .draw()?;
    // Chance: always predicting one class of C (1/C of a balanced split).
    let grey = RGBColor(120, 120, 120);
    chart
        .draw_series(DashedLineSeries::new(
            [(x0, chance), (x1, chance)],
            6,
            4,
            grey.stroke_width(1),
        ))?
        .label(format!("chance (1/{})", (1.0 / chance).round() as u64))
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], grey.stroke_width(1)));
    for (k, (v, de)) in series_keys(groups).into_iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        let mut pts: Vec<(f64, f64, f64)> = groups
            .iter()
            .filter(|g| g.variant == v && g.drop_edge == de)
            .map(|g| {
                let (m, sd) = stat(g, |o| o.test_acc);
                ((g.depth as f64).log2(), m, sd)
            })
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart
            .draw_series(LineSeries::new(
                pts.iter().map(|p| (p.0, p.1)),
                color.stroke_width(2),
            ))?
            .label(label(v, de))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart.draw_series(pts.iter().map(|p| {
            let (lo, hi) = ((p.1 - p.2).max(0.0), (p.1 + p.2).min(1.0));
            ErrorBar::new_vertical(p.0, lo, p.1, hi, color.stroke_width(1), 8)
        }))?;
        chart.draw_series(
            pts.iter()
                .map(|p| Circle::new((p.0, p.1), 3, color.filled())),
        )?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerLeft)
        .draw()?;
    root.present()?;
    Ok(())
}

/// Decades shown below the largest value of a per-layer plot: smaller values (and zeros)
/// sit on the floor, drawn hollow.
const LOG_DECADES: i32 = 12;

/// A layer's point of a per-layer plot: (layer, mean, min, max) over seeds.
type LayerPoint = (f64, f64, f64, f64);

/// A per-layer plot of `what` at `depth`, one line per variant: the mean over seeds (log
/// scale), a bar from the smallest to the largest seed's value, values at or below the floor
/// (zeros among them) drawn hollow on it.
fn plot_layers(
    path: &Path,
    groups: &[Group<'_>],
    depth: usize,
    what: &str,
    metric: impl Fn(&LayerMetrics, bool) -> Option<f64>,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut series: Vec<(String, Vec<LayerPoint>)> = Vec::new();
    for (v, de) in series_keys(groups) {
        let Some(g) = groups
            .iter()
            .find(|g| g.variant == v && g.drop_edge == de && g.depth == depth)
        else {
            continue;
        };
        let n_layers = g.runs.iter().map(|o| o.layers.len()).min().unwrap_or(0);
        let pts = (0..n_layers)
            .filter_map(|l| {
                let vals: Vec<f64> = g
                    .runs
                    .iter()
                    .filter_map(|o| metric(&o.layers[l], o.zero.get(l).copied().unwrap_or(false)))
                    .filter(|v| v.is_finite())
                    .collect();
                let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                (!vals.is_empty()).then(|| ((l + 1) as f64, mean_std(&vals).0, lo, hi))
            })
            .collect();
        series.push((label(v, de), pts));
    }
    let hi = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.3))
        .fold(0.0, f64::max);
    let lo = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.2))
        .filter(|&v| v > 0.0)
        .fold(f64::INFINITY, f64::min);
    // log₁₀ of the range, snapped out to whole decades and at most LOG_DECADES deep: every
    // line lies between two labelled ticks, a tick every decade or two.
    let (a, b) = if hi > 0.0 {
        let b = hi.log10().ceil() as i32;
        let a = if lo.is_finite() {
            lo.log10().floor() as i32
        } else {
            b - 1
        };
        let a = a.max(b - LOG_DECADES);
        (a, if b > a { b } else { a + 1 })
    } else {
        (-6, 0)
    };
    let floor = f64::from(a);
    let y = |v: f64| if v > 0.0 { v.log10().max(floor) } else { floor };
    let root = SVGBackend::new(path, CANVAS).into_drawing_area();
    root.fill(&WHITE)?;
    let layer_ticks: Vec<f64> = std::iter::once(1usize)
        .chain((1..).map(|k| 1usize << k).take_while(|&l| l <= depth))
        .map(|l| l as f64)
        .collect();
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{what} per layer, depth {depth}"),
            ("sans-serif", 22),
        )
        .margin(16)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(
            Ticks {
                range: 0.5..depth as f64 + 0.5,
                ticks: layer_ticks,
            },
            Ticks {
                range: floor - 0.3..f64::from(b),
                ticks: decades(a, b),
            },
        )?;
    chart
        .configure_mesh()
        .x_desc("layer")
        .y_desc(format!(
            "{what} (log; mean, bar: min-max over seeds; hollow: <= 1e{a} or collapsed)"
        ))
        .x_label_formatter(&|x| format!("{}", x.round() as u64))
        .y_label_formatter(&|v| {
            if (*v - floor).abs() < 1e-9 {
                format!("<={}", decade_label(*v))
            } else {
                decade_label(*v)
            }
        })
        .draw()?;
    for (k, (name, pts)) in series.into_iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                pts.iter().map(|p| (p.0, y(p.1))),
                color.stroke_width(2),
            ))?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart.draw_series(pts.iter().map(|p| {
            ErrorBar::new_vertical(p.0, y(p.2), y(p.1), y(p.3), color.stroke_width(1), 6)
        }))?;
        chart.draw_series(pts.iter().map(|p| {
            let on_floor = y(p.1) <= floor;
            let style = if on_floor {
                color.stroke_width(1)
            } else {
                color.filled()
            };
            Circle::new((p.0, y(p.1)), 3, style)
        }))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerLeft)
        .draw()?;
    root.present()?;
    Ok(())
}

/// Significant digits of a number as written (`0.0012` → 2, `1.0000000000000002e-14` → 17).
fn significant_digits(s: &str) -> usize {
    let mantissa = s.split(['e', 'E']).next().unwrap_or("");
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let trimmed = digits.trim_start_matches('0');
    if mantissa.contains('.') {
        trimmed.len()
    } else {
        trimmed.trim_end_matches('0').len().max(1)
    }
}

/// Checks a written plot: every numeric text (tick labels) has at most 6 significant digits,
/// and every text starts inside the canvas.
fn check_tick_labels(path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let svg = fs::read_to_string(path)?;
    for piece in svg.split("<text").skip(1) {
        let attr = |name: &str| -> Option<f64> {
            let at = piece.find(&format!(" {name}=\""))? + name.len() + 3;
            piece[at..].split('"').next()?.parse().ok()
        };
        let body = piece
            .split_once('>')
            .and_then(|(_, rest)| rest.split_once("</text>"))
            .map_or("", |(t, _)| t.trim());
        if let (Some(x), Some(y)) = (attr("x"), attr("y")) {
            if !(0.0..=CANVAS.0 as f64).contains(&x) || !(0.0..=CANVAS.1 as f64).contains(&y) {
                return Err(format!(
                    "{}: label {body:?} at ({x}, {y}) is off the canvas",
                    path.display()
                )
                .into());
            }
        }
        if body.parse::<f64>().is_ok() && significant_digits(body) > 6 {
            return Err(format!(
                "{}: tick label {body:?} has more than 6 significant digits",
                path.display()
            )
            .into());
        }
    }
    Ok(())
}
