//! `sparse-gcn train`: every model of the stack, with its default or its paper's recipe, over
//! seeds; `--save` writes the first seed's model.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

use clap::ValueEnum;

use sparse_gcn::data::content::ContentHash;
use sparse_gcn::data::store::StoreRows;
use sparse_gcn::dist::RankPrepared;
use sparse_gcn::graph::Norm;
use sparse_gcn::nn::{Arch, Model, NormKind, Order};
use sparse_gcn::order::Reorder;
use sparse_gcn::sample::{BatchConfig, Clusters};
use sparse_gcn::train::options::{
    BatchKind, DecayScope, EvalKind, Names, Recipe, StopKind, TrainOptions,
};
use sparse_gcn::train::run::{Prepare, Prepared, RowNorm, Watch};
use sparse_gcn::train::{
    checkpoint, mean_std, EpochHook, EpochRecord, OptimizerKind, RunResult, TrainConfig,
};
use sparse_gcn::{par::thread_pool, Result};

use super::{args, dist, progress_bar, say, DataArgs};

mod batch;
mod report;

pub(crate) use batch::{BatchArgs, EvalArg};

use report::{epoch_line, history_csv, json_report, medians, ms_text, Times};
pub(crate) use report::{plural, stop_text};

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum RecipeArg {
    /// The CLI's defaults (Kipf & Welling's training: hidden 16, dropout 0.5, lr 0.01, weight
    /// decay 5e-4 on the first layer, 200 epochs, Kipf's stop rule) for any model.
    Default,
    /// The model's published hyperparameters (`sparse_gcn::train::recipe`).
    Paper,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum OrderArg {
    Auto,
    AggregateFirst,
    TransformFirst,
    /// Aggregate first in forward, transform first in backward, in row blocks: the least
    /// memory (every convolution on dense input; one on sparse features transforms first).
    Lean,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum StopArg {
    /// Stop when the validation loss exceeds the mean of the previous --patience epochs (Kipf).
    Kipf,
    /// Stop after --patience epochs without a lower validation loss; restore the best weights.
    Patience,
    /// Run every epoch.
    Never,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum OptArg {
    Adam,
    Sgd,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum NormArg {
    /// D^-1/2 (A+I) D^-1/2
    Sym,
    /// D^-1 (A+I)
    Row,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum RowNormArg {
    /// When every feature is ≥ 0.
    Auto,
    /// Always.
    On,
    /// Never.
    Off,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum WdScope {
    /// Weight decay on the first layer (the stem) only (Kipf & Welling).
    First,
    /// Weight decay on every layer but the normalisation layers.
    All,
}

#[derive(clap::Args)]
#[command(allow_negative_numbers = true)]
pub(crate) struct TrainArgs {
    #[command(flatten)]
    data: DataArgs,
    /// The model: gcn, residual, gcnii, jk-cat, jk-max, jk-att, sgc or appnp.
    #[arg(long, default_value = "gcn")]
    model: Arch,
    /// default (the CLI's defaults below for every model) or paper (the model's published
    /// hyperparameters; explicit flags override them).
    #[arg(long, value_enum, default_value_t = RecipeArg::Default)]
    recipe: RecipeArg,
    /// Number of graph convolutions, at most 1024 [default: 2; gcnii's paper recipe: 64].
    #[arg(long, value_parser = args::layers)]
    layers: Option<usize>,
    /// Hidden width, at most 65536 [default: 16].
    #[arg(long, value_parser = args::hidden)]
    hidden: Option<usize>,
    /// Dropout on the input and between layers [default: 0.5].
    #[arg(long, value_parser = args::rate, allow_hyphen_values = true)]
    dropout: Option<f64>,
    /// Learning rate [default: 0.01].
    #[arg(long, value_parser = args::positive, allow_hyphen_values = true)]
    lr: Option<f64>,
    /// L2 weight decay [default: 5e-4].
    #[arg(long, value_parser = args::non_negative, allow_hyphen_values = true)]
    weight_decay: Option<f64>,
    /// Which layers get weight decay [default: first].
    #[arg(long, value_enum)]
    weight_decay_scope: Option<WdScope>,
    /// Maximum number of epochs, at most 1,000,000 [default: 200].
    #[arg(long, value_parser = args::epochs)]
    epochs: Option<usize>,
    /// Early-stopping rule [default: kipf for Kipf's 2-layer gcn, patience (100 epochs, best
    /// weights restored) for every other model or depth].
    #[arg(long, value_enum)]
    stop: Option<StopArg>,
    /// Window (kipf) or patience (patience) of the stop rule [default: 10; 100 for patience as
    /// the default of deep or non-Kipf models; at most 1,000,000].
    #[arg(long, value_parser = args::epochs)]
    patience: Option<usize>,
    /// Evaluation order of Â·H·W in the GCN convolutions (gcn, residual, jk) [default: auto].
    #[arg(long, value_enum)]
    order: Option<OrderArg>,
    /// Optimiser [default: adam].
    #[arg(long, value_enum)]
    optimizer: Option<OptArg>,
    /// Adjacency normalisation.
    #[arg(long, value_enum, default_value_t = NormArg::Sym)]
    norm: NormArg,
    /// Normalisation after each hidden convolution (gcn, residual, jk): none, batch, pair
    /// (PairNorm PN), pair-si or pair-scs.
    #[arg(long)]
    norm_layer: Option<NormKind>,
    /// DropEdge rate of the training passes (0: off).
    #[arg(long, value_parser = args::rate, allow_hyphen_values = true)]
    drop_edge: Option<f64>,
    /// Activation checkpointing: keep every K-th hidden block's input and recompute the others
    /// in backward (0: off; at most 1024).
    #[arg(long, value_parser = args::every)]
    checkpoint_every: Option<usize>,
    /// The batches (full batch, or a sampler's).
    #[command(flatten)]
    pub(crate) batches: BatchArgs,
    /// Validation and test: full (the whole graph's Â) or batch (over the batches of
    /// --batch cluster, each on its own subgraph: no activations of the whole graph held)
    /// [default: full].
    #[arg(long, value_enum)]
    eval: Option<EvalArg>,
    /// GCNII's α (initial residual) and APPNP's α (teleport) [default: 0.1].
    #[arg(long, value_parser = args::unit, allow_hyphen_values = true)]
    alpha: Option<f64>,
    /// GCNII's λ [default: 0.5].
    #[arg(long, value_parser = args::positive, allow_hyphen_values = true)]
    lambda: Option<f64>,
    /// Propagation steps of SGC [default: 2] and APPNP [default: 10], at most 1024.
    #[arg(long, value_parser = args::steps)]
    k: Option<usize>,
    /// Give every graph convolution a bias (Kipf & Welling's model has none; PyG's GCNConv has
    /// one).
    #[arg(long)]
    bias: bool,
    /// Row-normalise the input features (Kipf's preprocessing): `auto` does it when every
    /// feature is ≥ 0 (bag-of-words), as Kipf & Welling do, and leaves signed dense features
    /// (ogbn-arxiv-like embeddings) as they are.
    #[arg(long, value_enum, default_value_t = RowNormArg::Auto)]
    row_norm: RowNormArg,
    /// Number of seeds (S, S+1, …, S+N−1, S from --seed), trained in parallel; at most 10,000
    /// [default: 1].
    #[arg(long, value_parser = args::seeds)]
    seeds: Option<usize>,
    /// The first (or only) seed trained [default: 0]: `--seed 3` trains seed 3 alone, as
    /// `--seeds 4` trains it fourth, bit for bit.
    #[arg(long, value_parser = args::seed)]
    seed: Option<u64>,
    /// Worker threads (0: one per CPU; at most 1024).
    #[arg(long, default_value_t = 0, value_parser = args::threads)]
    threads: usize,
    /// Epochs left out of the timing medians [default: 5, or half of the epochs when fewer
    /// than 10].
    #[arg(long, value_parser = args::epochs_or_zero)]
    warmup: Option<usize>,
    /// Print one JSON object as the last line of stdout.
    #[arg(long)]
    json: bool,
    /// Save the model trained with the first seed as a safetensors checkpoint at this path
    /// (written atomically: an existing file is replaced only by a complete new one).
    #[arg(long, value_parser = args::ANY_FILE)]
    save: Option<PathBuf>,
    /// Write the per-epoch history of every seed to this CSV file (seed, epoch (1-based),
    /// train loss and accuracy, validation loss and accuracy, train-step and epoch wall ms).
    #[arg(long, value_parser = args::CSV)]
    history: Option<PathBuf>,
    /// Relabel the nodes once after loading, for memory locality: auto, none, random[:SEED],
    /// degree, rcm, bfs, community (label propagation on the graph structure only) or metis
    /// (the parts of a METIS recursive bisection, contiguous: small halos for the row ranges
    /// of a run under mpirun, whatever the rank count). `auto`
    /// takes the community order for graphs of more than 65,536 nodes when it cuts the
    /// modelled cache misses of the SpMM by at least 10 %, and keeps the given order otherwise.
    /// Accuracies are the same as without reordering up to floating-point summation order
    /// (each SpMM row sums its neighbours in another order) and, with dropout, up to which
    /// nodes each random dropout mask falls on (masks are drawn in row order); a checkpoint
    /// records the order, and `eval` applies it again.
    #[arg(long, default_value = "auto")]
    reorder: Reorder,
    /// Train on Cluster-GCN batches read from the store --data names, out of core: its parts
    /// are ranges of its rows (write the store in a partition order, e.g. `generate --ids
    /// topics`), each batch's rows of the graph and the features read as it is built, so the
    /// memory holds the labels, the split, the model and two batches, whatever the graph's
    /// size. The store is read in its own order (--reorder none, or the order it holds) and its
    /// features dense: the same bits as the same run in memory with --clusters ranges --eval
    /// batch. Needs --batch cluster; --clusters ranges and --eval batch are its defaults.
    #[arg(long)]
    out_of_core: bool,
    /// With --out-of-core: refuse the run, before training allocates, when its plan (the
    /// labels, parts and positions of every node, the model's workspaces for the largest
    /// batch, two batches, the process) passes this size (`64MiB`, `12GiB`; powers of 1024)
    /// [default: the memory available]. The store's checking pass before it holds the labels,
    /// the split and a scale a node.
    #[arg(long, value_parser = args::memory_limit)]
    memory_limit: Option<u64>,
}

impl TrainArgs {
    /// How the data is prepared (node order, feature and Â normalisation).
    pub(crate) fn prepare(&self, cfg: &TrainConfig) -> Prepare {
        self.options().prepare(cfg)
    }

    /// `--seeds` (1 by default).
    pub(crate) fn seeds(&self) -> usize {
        self.seeds.unwrap_or(1)
    }

    /// `--recipe`'s name.
    pub(crate) fn recipe_name(&self) -> &'static str {
        match self.recipe {
            RecipeArg::Default => "default",
            RecipeArg::Paper => "paper",
        }
    }

    /// The data arguments.
    pub(crate) fn data(&self) -> &DataArgs {
        &self.data
    }

    /// Whether `--json` was given.
    pub(crate) fn json(&self) -> bool {
        self.json
    }

    /// The training options the flags give (the library's, shared with the Python package).
    pub(crate) fn options(&self) -> TrainOptions {
        TrainOptions {
            model: self.model,
            recipe: match self.recipe {
                RecipeArg::Default => Recipe::Default,
                RecipeArg::Paper => Recipe::Paper,
            },
            layers: self.layers,
            hidden: self.hidden,
            dropout: self.dropout,
            lr: self.lr,
            weight_decay: self.weight_decay,
            weight_decay_scope: self.weight_decay_scope.map(|s| match s {
                WdScope::First => DecayScope::First,
                WdScope::All => DecayScope::All,
            }),
            epochs: self.epochs,
            stop: self.stop.map(|s| match s {
                StopArg::Kipf => StopKind::Kipf,
                StopArg::Patience => StopKind::Patience,
                StopArg::Never => StopKind::Never,
            }),
            patience: self.patience,
            order: self.order.map(|o| match o {
                OrderArg::Auto => Order::Auto,
                OrderArg::AggregateFirst => Order::AggregateFirst,
                OrderArg::TransformFirst => Order::TransformFirst,
                OrderArg::Lean => Order::Lean,
            }),
            optimizer: self.optimizer.map(|o| match o {
                OptArg::Adam => OptimizerKind::Adam,
                OptArg::Sgd => OptimizerKind::Sgd,
            }),
            norm_layer: self.norm_layer,
            drop_edge: self.drop_edge,
            checkpoint_every: self.checkpoint_every,
            alpha: self.alpha,
            lambda: self.lambda,
            k: self.k,
            bias: self.bias,
            warmup: self.warmup,
            norm: match self.norm {
                NormArg::Sym => Norm::Symmetric,
                NormArg::Row => Norm::Row,
            },
            row_norm: match self.row_norm {
                RowNormArg::Auto => RowNorm::Auto,
                RowNormArg::On => RowNorm::On,
                RowNormArg::Off => RowNorm::Off,
            },
            reorder: self.reorder,
            batches: {
                let mut b = self.batches.options(self.eval);
                if self.out_of_core && b.batch == BatchKind::Cluster {
                    b.clusters = b.clusters.or(Some(Clusters::Ranges));
                    b.eval = b.eval.or(Some(EvalKind::Batch));
                }
                b
            },
        }
    }

    /// The training configuration: the recipe, then every flag given.
    pub(crate) fn config(&self) -> TrainConfig {
        self.options().config()
    }
}

impl TrainArgs {
    /// The checks clap's value parsers cannot make alone (a combination of flags), before any
    /// file is read: a usage error naming the flags.
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        self.data.check_applicable()?;
        if self.out_of_core {
            self.check_out_of_core()?;
        } else if self.memory_limit.is_some() {
            return Err(
                "--memory-limit: only with --out-of-core (a run in memory is planned \
                        against the memory available)"
                    .into(),
            );
        }
        self.options()
            .check(Names::Flags)
            .map_err(|e| e.message(Names::Flags))?;
        #[cfg(feature = "mpi")]
        {
            let cfg = self.config();
            if cfg.model.order == Order::Lean && dist::launched() {
                return Err("--order lean: not under mpirun (it needs Â held whole)".into());
            }
            batch::check_ranks(&cfg)?;
        }
        Ok(())
    }

    /// `--out-of-core`'s requirements: a store, Cluster-GCN's batches as ranges of its rows,
    /// evaluated over them, in one process, in the store's order.
    fn check_out_of_core(&self) -> std::result::Result<(), String> {
        let no = |why: &str| Err(format!("--out-of-core: {why}"));
        let is_store = self
            .data
            .data
            .as_ref()
            .is_some_and(|p| p.join(sparse_gcn::data::store::HEADER).is_file());
        if !is_store {
            return no(
                "--data must name a store (a folder `convert` or `generate --format \
                       store` writes)",
            );
        }
        if self.data.features.is_some() {
            return no("not with --features (the store's own features are read by rows)");
        }
        let o = self.options();
        let b = &o.batches;
        if b.batch != BatchKind::Cluster {
            return no(
                "only with --batch cluster (the other samplers draw from the graph in \
                       memory)",
            );
        }
        if b.clusters != Some(Clusters::Ranges) {
            return no("only with --clusters ranges (the parts are ranges of the store's rows)");
        }
        if b.eval != Some(EvalKind::Batch) {
            return no("only with --eval batch (the whole graph is never in memory)");
        }
        if self.save.is_some() {
            return no(
                "not with --save (a checkpoint records the data's content hashes, which \
                       need the whole data in memory)",
            );
        }
        if self.drop_edge.is_some_and(|r| r > 0.0) {
            return no("not with --drop-edge (a batch is already a subgraph)");
        }
        #[cfg(feature = "mpi")]
        if dist::launched() {
            return no("not under mpirun yet (one process reads the store)");
        }
        Ok(())
    }

    /// The flags of training that `plan` (which traces one epoch of the model and prices it)
    /// would not use: a usage error naming the first given.
    pub(crate) fn check_plan_flags(&self) -> std::result::Result<(), String> {
        let given = [
            ("--save", self.save.is_some()),
            ("--history", self.history.is_some()),
            ("--seeds", self.seeds.is_some()),
            ("--seed", self.seed.is_some()),
            ("--epochs", self.epochs.is_some()),
            ("--stop", self.stop.is_some()),
            ("--patience", self.patience.is_some()),
            ("--lr", self.lr.is_some()),
            ("--weight-decay", self.weight_decay.is_some()),
            ("--weight-decay-scope", self.weight_decay_scope.is_some()),
            ("--optimizer", self.optimizer.is_some()),
            ("--warmup", self.warmup.is_some()),
            ("--eval", self.eval.is_some()),
            ("--out-of-core", self.out_of_core),
            ("--memory-limit", self.memory_limit.is_some()),
        ];
        let given = given
            .iter()
            .map(|&(f, g)| (f.to_string(), g))
            .chain(self.batches.given());
        match given.clone().find(|(_, g)| *g) {
            Some((flag, _)) => Err(format!(
                "{flag}: plan does not train; it traces one epoch of the model on the data and \
                 prices its exchanges and memory for each rank count"
            )),
            None => Ok(()),
        }
    }

    /// Worker threads (`--threads`, 0: one per CPU).
    pub(crate) fn threads(&self) -> usize {
        self.threads
    }
}

pub(crate) fn run(a: TrainArgs) -> Result<()> {
    let pool = thread_pool(a.threads)?;
    let threads = pool.current_num_threads();
    let job = dist::start()?;
    pool.install(|| train_in_pool(a, threads, job.as_ref()))
}

/// Trains every seed on the data `ready` holds: in one process, across the ranks of `job`
/// each holding the whole data (mini-batches), or each its part (full batch).
fn fit_ready(
    ready: Ready<'_>,
    job: Option<&dist::Job>,
    cfg: &TrainConfig,
    seeds: &[u64],
    on_epoch: EpochHook<'_>,
    on_done: &(dyn Fn(&RunResult, &mut Model<f32>) + Sync),
) -> Result<(Vec<RunResult>, Option<dist::Report>)> {
    Ok(match ready {
        Ready::One(p) => match job {
            Some(job) => {
                let on_epoch = Some(on_epoch);
                let (runs, report) = dist::fit_batches(job, &p, cfg, seeds, on_epoch, on_done)?;
                (runs, Some(report))
            }
            None => {
                let watch = Watch {
                    on_epoch: Some(on_epoch),
                    ..Watch::default()
                };
                (
                    p.fit_seeds_watched(cfg, seeds, 0, None, watch, on_done)?,
                    None,
                )
            }
        },
        Ready::Rank(r, job) => {
            let (runs, report) = dist::fit_seeds(job, *r, cfg, seeds, on_done)?;
            (runs, Some(report))
        }
        Ready::Store(rows, prepare, limit) => {
            let watch = Watch {
                on_epoch: Some(on_epoch),
                ..Watch::default()
            };
            let runs = sparse_gcn::train::fit_store_seeds(
                &rows, &prepare, cfg, seeds, limit, watch, on_done,
            )?;
            (runs, None)
        }
    })
}

/// The data a run trains on: prepared whole in one process, or one rank's part of it.
enum Ready<'j> {
    One(Box<Prepared>),
    Rank(Box<RankPrepared>, &'j dist::Job),
    /// A store read out of core (`--out-of-core`), prepared as `Prepare` says.
    Store(Box<StoreRows>, Prepare, Option<u64>),
}

/// The node order applied and the hyperparameters in force, as the run starts.
fn say_prepared(a: &TrainArgs, d: &sparse_gcn::train::run::Summary, cfg: &TrainConfig) {
    let (reorder_s, applied) = (d.reorder_s, d.prepare.reorder);
    match (a.reorder, applied) {
        (Reorder::None, _) => {}
        (Reorder::Auto, Reorder::None) => {
            say!("node order kept (--reorder auto; decided in {reorder_s:.2} s)")
        }
        (Reorder::Auto, r) => say!("reordered the nodes (auto: {r}) in {reorder_s:.2} s"),
        (r, _) => say!("reordered the nodes ({r}) in {reorder_s:.2} s"),
    }
    say!("{}", report::settings_text(a, cfg));
}

/// The data of a single-process run, loaded and prepared, with what a checkpoint records of it
/// (with `--save`: its content hashes in the input's order, for `eval` to check).
fn load_prepared(a: &TrainArgs, prepare: &Prepare) -> Result<(Prepared, Option<ContentHash>)> {
    let (data, given) = a.data.load_ordered()?;
    data.check_trainable()?;
    let content = match (&a.save, &given) {
        (None, _) => None,
        (Some(_), None) => Some(ContentHash::of(&data)),
        (Some(_), Some(o)) => {
            // The hashes are of the input's order: a copy put back in it.
            sparse_gcn::data::memory::check(data.size_bytes(), || {
                format!(
                    "a copy of {} in its input order, to hash for --save",
                    data.name
                )
            })?;
            Some(ContentHash::of(&data.clone().relabel(&o.perm.inverse())?))
        }
    };
    Ok((Prepared::new_ordered(data, given, prepare)?, content))
}

fn train_in_pool(a: TrainArgs, threads: usize, job: Option<&dist::Job>) -> Result<()> {
    let cfg = a.config();
    let t_load = Instant::now();
    let prepare = a.prepare(&cfg);
    let mut content: Option<ContentHash> = None;
    // Mini-batches under mpirun: every rank holds the whole data (data parallel).
    let ranked = job.filter(|_| cfg.batch == BatchConfig::Full);
    let ready = match ranked {
        _ if a.out_of_core => {
            let path = a.data.data.clone().unwrap_or_default();
            // The loading options a store cannot honour (another split, a direction) are
            // refused as the loader refuses them.
            sparse_gcn::data::store::check_options(&path, &a.data.load_options())?;
            Ready::Store(Box::new(StoreRows::open(&path)?), prepare, a.memory_limit)
        }
        None => {
            let one = || load_prepared(&a, &prepare);
            // (Under mpirun every rank loads the whole data: they fail together.)
            let (p, c) = match job {
                Some(job) => dist::agree(job, one())?,
                None => one()?,
            };
            content = c;
            Ready::One(Box::new(p))
        }
        Some(job) => {
            if a.save.is_some() {
                content = dist::content_hash(job, &a.data)?;
            }
            Ready::Rank(Box::new(dist::prepare(job, &a.data, &prepare)?), job)
        }
    };
    let d = match &ready {
        Ready::One(p) => p.summary(),
        Ready::Rank(r, _) => r.summary.clone(),
        Ready::Store(rows, prepare, _) => sparse_gcn::train::store_summary(rows, prepare)?,
    };
    // Loading and building Â, without the reordering (reported apart as `reorder_s`).
    let load_s = t_load.elapsed().as_secs_f64() - d.reorder_s;
    let [n_train, n_valid, n_test] = d.split_sizes;
    say!(
        "dataset {}: {} nodes, {} edges, nnz(Â) {}, {} features ({}), {} classes, split {} {}/{}/{}",
        d.name,
        d.n_nodes,
        d.n_edges,
        d.nnz,
        d.in_dim,
        if d.sparse_features { "sparse" } else { "dense" },
        d.n_classes,
        d.split_name,
        n_train,
        n_valid,
        n_test
    );
    say_prepared(&a, &d, &cfg);
    let first = a.seed.unwrap_or(0);
    let seeds: Vec<u64> = (first..first + a.seeds() as u64).collect();
    let bar = progress_bar(
        seeds.len() as u64,
        "{spinner} seeds {pos}/{len} [{elapsed_precise}] {msg}",
    );
    let t_train = Instant::now();
    let save_error: Mutex<Option<sparse_gcn::Error>> = Mutex::new(None);
    let on_done = |r: &RunResult, model: &mut Model<f32>| {
        if let (Some(path), true) = (&a.save, r.seed == seeds[0] && super::prints()) {
            let mut extra = d.extra();
            a.data.record(&mut extra);
            if let Some(h) = content {
                h.record(&mut extra);
            }
            extra.insert("seed".to_string(), r.seed.to_string());
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
    // A line per epoch above the spinner (a terminal only, as the spinner).
    let max_epochs = cfg.epochs;
    let on_epoch = |seed: u64, r: &EpochRecord| bar.println(epoch_line(seed, r, max_epochs));
    let on_epoch = EpochHook(&on_epoch);
    let (runs, dist_report) = fit_ready(ready, job, &cfg, &seeds, on_epoch, &on_done)?;
    bar.finish_and_clear();
    if let Some(e) = save_error.lock().ok().and_then(|mut s| s.take()) {
        return Err(e);
    }
    if let Some(path) = &a.save {
        say!("saved the model of seed {} to {}", seeds[0], path.display());
    }
    let train_s = t_train.elapsed().as_secs_f64();
    for r in &runs {
        say!(
            "seed {}: {}; val {:.4}, test {:.4}, train step {}",
            r.seed,
            stop_text(cfg.stop, cfg.epochs, r),
            r.val_acc,
            r.test_acc,
            ms_text(r.train_ms_median(cfg.warmup), r.history.len(), cfg.warmup)
        );
    }
    if let (Some(path), true) = (&a.history, super::prints()) {
        checkpoint::write_file_atomic(path, history_csv(&runs).as_bytes())?;
        say!("wrote the per-epoch history to {}", path.display());
    }
    let tests: Vec<f64> = runs.iter().map(|r| r.test_acc).collect();
    let vals: Vec<f64> = runs.iter().map(|r| r.val_acc).collect();
    let (tm, ts) = mean_std(&tests);
    let (vm, _) = mean_std(&vals);
    let [step_median, sample_median, epoch_median] = medians(&runs, cfg.warmup);
    let longest = runs.iter().map(|r| r.history.len()).max().unwrap_or(0);
    // (Under mpirun, and out of core, seeds train one after another.)
    let concurrent = if job.is_some() || a.out_of_core {
        1
    } else {
        threads.min(seeds.len())
    };
    // (One seed's accuracy has no spread to give.)
    let acc = match seeds[..] {
        [one] => format!("{:.2} % with seed {one}", 100.0 * tm),
        _ => format!(
            "{:.2} ± {:.2} % over {}",
            100.0 * tm,
            100.0 * ts,
            plural(seeds.len(), "seed")
        ),
    };
    say!(
        "{}: test accuracy {acc} (val {:.2} %); train step median {} ({}, {} at a time); total \
         {:.2} s",
        cfg.model.arch,
        100.0 * vm,
        ms_text(step_median, longest, cfg.warmup),
        plural(threads, "thread"),
        plural(concurrent, "run"),
        train_s
    );
    if a.json {
        let times = Times {
            threads,
            concurrent,
            load_s,
            reorder_s: d.reorder_s,
            train_s,
            step_median,
            sample_median,
            epoch_median,
        };
        let extra = dist_report.as_ref().map(|r| r.json());
        say!("{}", json_report(&a, &cfg, &d, &runs, &times, extra));
    }
    Ok(())
}
