//! The `sparse-gcn` command line: one file per subcommand, sharing the data options and the
//! progress bar defined here.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use sparse_gcn::data::io::{load as load_any, LoadOptions, RandomSplit, SplitRule};
use sparse_gcn::data::node_features::NodeFeatures;
use sparse_gcn::data::synthetic::Preset;
use sparse_gcn::data::Dataset;
use sparse_gcn::graph::Direction;

use sparse_gcn::{Error, Result};

mod args;
mod convert;
mod dist;
mod embed;
mod eval;
mod generate;
mod info;
mod plan;
mod predict;
mod propagate;
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
    /// Write a checkpoint's class probabilities for every node (`.csv` with the predicted
    /// class, or `.npy`).
    Predict(predict::PredictArgs),
    /// Write one layer's output for every node as an N × width `.npy` array.
    Embed(embed::EmbedArgs),
    /// Generate a synthetic citation-like graph and write it in the OGB raw layout (or, with
    /// `--format store`, as a binary store).
    Generate(generate::GenerateArgs),
    /// Write any dataset `--data` reads (or a preset) as a binary store: a folder of
    /// little-endian arrays with a checksummed JSON header, which `--data DIR` then opens
    /// memory-mapped without parsing.
    Convert(convert::ConvertArgs),
    /// Propagate a store's features out of core within `--memory-limit`: the rows of Â^K X
    /// (SGC) or [X, ÂX, …, Â^K X] (SIGN) that training, validation and test need, written as a
    /// store of those rows to train a linear model or an MLP on.
    Propagate(propagate::PropagateArgs),
    /// Measure this machine's memory bounds (stream triad, random row gather), sgemm, and the
    /// SpMM in a random and in a reordered node order, as fractions of those bounds.
    Roofline(roofline::RooflineArgs),
    /// Plan a run across MPI ranks: for each rank count, the partition's owned and halo rows,
    /// the bytes an epoch exchanges, the messages, and the memory a rank needs.
    Plan(Box<plan::PlanArgs>),
    /// Time MPI's all-to-all between the ranks of `mpirun -np P` (feature `mpi`) for message
    /// sizes up to `--max-bytes` and fit latency α and per-byte time β (what `plan --comm`
    /// reads).
    Commbench(plan::CommbenchArgs),
}

/// Runs the command line; exit codes: 0 success, 1 data or runtime error (one line on stderr),
/// 2 usage error (clap's).
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // clap's message names no flag: name it.
        Err(e) if e.kind() == clap::error::ErrorKind::InvalidUtf8 => {
            let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
            usage_error(format!(
                "{}: the value is not valid UTF-8 (this option takes text)",
                args::non_utf8_flag(&args)
            ))
        }
        Err(e) => e.exit(),
    };
    // Checks of combinations and of output paths: usage errors (exit 2) before any file is read.
    let usage = match &cli.cmd {
        Cmd::Train(a) => a.check(),
        Cmd::Plan(a) => a.check(),
        Cmd::Info(a) => a.check(),
        Cmd::Roofline(a) => a.check(),
        Cmd::Generate(a) => a.check(),
        Cmd::Convert(a) => a.check(),
        Cmd::Propagate(a) => a.check(),
        _ => Ok(()),
    };
    if let Err(msg) = usage {
        usage_error(msg);
    }
    let res = match cli.cmd {
        Cmd::Train(a) => train::run(*a),
        Cmd::Info(a) => info::run(a),
        Cmd::Eval(a) => eval::run(a),
        Cmd::Predict(a) => predict::run(a),
        Cmd::Embed(a) => embed::run(a),
        Cmd::Generate(a) => generate::run(a),
        Cmd::Convert(a) => convert::run(a),
        Cmd::Propagate(a) => propagate::run(a),
        Cmd::Roofline(a) => roofline::run(a),
        Cmd::Plan(a) => plan::run(*a),
        Cmd::Commbench(a) => plan::commbench(a),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// A usage error unless `path` (given as `flag`) is free for a new store: absent, or an empty
/// folder (a store is never written over other files).
pub(crate) fn check_new_folder(flag: &str, path: &Path) -> std::result::Result<(), String> {
    if path.exists() {
        let empty = std::fs::read_dir(path).is_ok_and(|mut r| r.next().is_none());
        if !path.is_dir() || !empty {
            return Err(format!(
                "{flag} {}: exists and is not an empty folder; a store is written to a new folder",
                path.display()
            ));
        }
    }
    Ok(())
}

/// Exits with a usage error (exit 2, clap's format) saying `msg`, which names the flag.
pub(crate) fn usage_error(msg: impl std::fmt::Display) -> ! {
    Cli::command()
        .error(clap::error::ErrorKind::ValueValidation, msg)
        .exit()
}

/// Where the data comes from: a file or folder, or a synthetic preset built in memory.
#[derive(clap::Args, Clone)]
pub(crate) struct DataArgs {
    /// Dataset: an OGB raw-layout folder, a store (`sparse-gcn convert`), a gnn-benchmark
    /// `.npz`, or an edge list (`.txt`/`.csv`/`.tsv`/`.edges`/`.el`). Without it, the synthetic
    /// `--preset` is built in memory.
    #[arg(long)]
    pub(crate) data: Option<PathBuf>,
    /// Synthetic preset used when `--data` is absent: cora-like, arxiv-like or products-like
    /// [default: cora-like].
    #[arg(long)]
    pub(crate) preset: Option<Preset>,
    /// Seed of the synthetic preset and of `--features random:D` [default: 0].
    #[arg(long)]
    pub(crate) data_seed: Option<u64>,
    /// Split name under DATA/split (default: the only one).
    #[arg(long)]
    pub(crate) split: Option<String>,
    /// Keep edge direction instead of symmetrising.
    #[arg(long)]
    pub(crate) directed: bool,
    /// Node features: `identity` (one-hot node id), `degree` (one-hot degree, PyG's
    /// OneHotDegree), `constant` (one column of ones) or `random:D` (D seeded uniform
    /// columns), built from the graph and replacing any the data has; or a feature file for
    /// an edge list (one row per node), a scipy `.npz` adjacency or a structure-only OGB
    /// folder (without raw/node-feat).
    #[arg(long)]
    pub(crate) features: Option<FeatureArg>,
    /// Label file for an edge list, a scipy `.npz` adjacency or a structure-only OGB folder
    /// (without raw/node-label) (one class id per node; -1 or NaN for an unlabelled node).
    #[arg(long)]
    pub(crate) labels: Option<PathBuf>,
    /// Nodes of an edge list (ids 0 to N−1); without it, the rows of --labels or --features,
    /// else the largest id + 1.
    #[arg(long, value_parser = args::count)]
    pub(crate) num_nodes: Option<usize>,
    /// The random split of an edge list or `.npz` (they carry none), Planetoid style: this many
    /// training nodes per class, then up to 500 validation and 1000 test nodes [default: 20].
    #[arg(long, value_parser = args::count, conflicts_with = "split_sizes")]
    pub(crate) train_per_class: Option<usize>,
    /// The random split of an edge list or `.npz` as fractions of the labelled nodes:
    /// TRAIN,VALID,TEST (e.g. 0.6,0.2,0.2).
    #[arg(long, value_parser = args::fractions)]
    pub(crate) split_sizes: Option<[f64; 3]>,
}

/// `--features`: built from the graph, or a file.
#[derive(Clone, Debug)]
pub(crate) enum FeatureArg {
    Built(NodeFeatures),
    File(PathBuf),
}

impl std::str::FromStr for FeatureArg {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s.starts_with("random:") {
            return s.parse().map(FeatureArg::Built).map_err(|e| e.to_string());
        }
        Ok(match s.parse() {
            Ok(k) => FeatureArg::Built(k),
            Err(_) => FeatureArg::File(PathBuf::from(s)),
        })
    }
}

impl FeatureArg {
    fn file(&self) -> Option<&PathBuf> {
        match self {
            FeatureArg::File(p) => Some(p),
            FeatureArg::Built(_) => None,
        }
    }
}

impl DataArgs {
    /// Records where the data came from in a checkpoint's metadata.
    pub(crate) fn record(&self, extra: &mut BTreeMap<String, String>) {
        let path = |p: &PathBuf| {
            std::fs::canonicalize(p)
                .unwrap_or_else(|_| p.clone())
                .display()
                .to_string()
        };
        match &self.data {
            Some(p) => {
                extra.insert("data".into(), path(p));
            }
            None => {
                extra.insert("preset".into(), self.preset().name().into());
            }
        }
        if self.data.is_none() || self.seeded_features() {
            extra.insert("data_seed".into(), self.seed().to_string());
        }
        if let Some(s) = &self.split {
            extra.insert("split".into(), s.clone());
        }
        match &self.features {
            Some(FeatureArg::File(f)) => {
                extra.insert("features_file".into(), path(f));
            }
            Some(FeatureArg::Built(k)) => {
                extra.insert("features_built".into(), k.to_string());
            }
            None => {}
        }
        if let Some(n) = self.num_nodes {
            extra.insert("num_nodes".into(), n.to_string());
        }
        if let Some(k) = self.train_per_class {
            extra.insert("train_per_class".into(), k.to_string());
        }
        if let Some([a, b, c]) = self.split_sizes {
            extra.insert("split_sizes".into(), format!("{a},{b},{c}"));
        }
        if let Some(l) = &self.labels {
            extra.insert("labels_file".into(), path(l));
        }
    }

    /// A usage error for a data option given that the data source would not use, naming the
    /// flag and why; made from the path alone (a folder is an OGB dataset, the extension
    /// tells a `.npz` from an edge list), before any data is read.
    pub(crate) fn check_applicable(&self) -> std::result::Result<(), String> {
        let no = |flag: &str, why: &str| Err(format!("{flag}: {why}"));
        let file_features = matches!(self.features, Some(FeatureArg::File(_)));
        let Some(path) = &self.data else {
            let why = "only with --data (an edge list or a .npz file); the synthetic preset has \
                       its own";
            let why_split = "only with --data; the synthetic preset has one split (planetoid)";
            return match () {
                () if self.split.is_some() => no(
                    "--split",
                    "names a split folder of an OGB dataset (--data FOLDER); the synthetic \
                     preset has one split",
                ),
                () if self.directed => no("--directed", "the synthetic presets are undirected"),
                () if self.num_nodes.is_some() => no("--num-nodes", why),
                () if self.train_per_class.is_some() => no("--train-per-class", why_split),
                () if self.split_sizes.is_some() => no("--split-sizes", why_split),
                () if self.labels.is_some() => no("--labels", why),
                () if file_features => no(
                    "--features",
                    "a feature file is only for an edge list or a scipy .npz (--data); the \
                     synthetic preset has its features (or give identity, degree, constant or \
                     random:D)",
                ),
                () => Ok(()),
            };
        };
        if self.preset.is_some() {
            return no(
                "--preset",
                "--data is given (the preset is built only without it)",
            );
        }
        if self.data_seed.is_some() && !self.seeded_features() {
            return no(
                "--data-seed",
                "seeds the synthetic preset and --features random:D; --data is given without \
                 random features",
            );
        }
        if path.is_dir() && path.join(sparse_gcn::data::store::HEADER).is_file() {
            let own = "a store carries its own split (the one it was converted with)";
            let files = "a store carries its own features and labels (convert the data again \
                         with the files); a built kind (identity, degree, constant, random:D) \
                         replaces its features";
            return match () {
                () if self.num_nodes.is_some() => {
                    no("--num-nodes", "a store declares its node count")
                }
                () if self.train_per_class.is_some() => no("--train-per-class", own),
                () if self.split_sizes.is_some() => no("--split-sizes", own),
                () if self.labels.is_some() => no("--labels", files),
                () if file_features => no("--features", files),
                () => Ok(()),
            };
        }
        if path.is_dir() {
            let (own_features, own_labels) = sparse_gcn::data::io::ogb_carries(path);
            let own = "an OGB folder carries its own split (choose one of its split folders \
                       with --split)";
            return match () {
                () if self.num_nodes.is_some() => no(
                    "--num-nodes",
                    "an OGB folder declares its node count (raw/num-node-list)",
                ),
                () if self.train_per_class.is_some() => no("--train-per-class", own),
                () if self.split_sizes.is_some() => no("--split-sizes", own),
                () if self.labels.is_some() && own_labels => no(
                    "--labels",
                    "this OGB folder carries its own labels (raw/node-label); a label file is \
                     for a structure-only folder, an edge list or a scipy .npz",
                ),
                () if file_features && own_features => no(
                    "--features",
                    "this OGB folder carries its own features (raw/node-feat); a built kind \
                     (identity, degree, constant, random:D) replaces them, a feature file is \
                     for a structure-only folder, an edge list or a scipy .npz",
                ),
                () => Ok(()),
            };
        }
        let name = path.to_string_lossy().to_ascii_lowercase();
        if self.split.is_some() {
            return no(
                "--split",
                "only an OGB folder has named splits; an edge list or a .npz file gets a random \
                 split (--train-per-class, --split-sizes)",
            );
        }
        if name.ends_with(".npz") && self.num_nodes.is_some() {
            return no(
                "--num-nodes",
                "a .npz adjacency declares its node count (its shape)",
            );
        }
        Ok(())
    }

    /// The synthetic preset (`--preset`, cora-like by default).
    pub(crate) fn preset(&self) -> Preset {
        self.preset.unwrap_or(Preset::CoraLike)
    }

    /// The data seed (`--data-seed`, 0 by default).
    pub(crate) fn seed(&self) -> u64 {
        self.data_seed.unwrap_or(0)
    }

    /// Whether the features are drawn from the data seed (`--features random:D`).
    fn seeded_features(&self) -> bool {
        matches!(
            self.features,
            Some(FeatureArg::Built(NodeFeatures::Random { .. }))
        )
    }

    /// The data a checkpoint is evaluated on: without `--data` or `--preset`, what it records
    /// of its training data (the source and every option of its preparation), each option
    /// given here overriding the recorded one; with `--data` or `--preset`, the data as given
    /// here, nothing recorded. The data loaded is then checked against the recorded content
    /// hashes ([`sparse_gcn::train::checkpoint::Checkpoint::check_data`]).
    ///
    /// A checkpoint that records no content hash (written by an older version, or by the
    /// library without them) is refused unless the data is given explicitly (`--data` or
    /// `--preset`); its shapes are then checked against the model's.
    pub(crate) fn for_checkpoint(
        &self,
        ck: &Path,
        extra: &BTreeMap<String, String>,
    ) -> Result<Self> {
        let explicit_source = self.data.is_some() || self.preset.is_some();
        if sparse_gcn::data::content::ContentHash::from_extra(extra).is_none() {
            if !explicit_source {
                return Err(Error::DataMismatch {
                    checkpoint: ck.to_path_buf(),
                    msg: "the checkpoint records no content hash of the data it was trained on \
                          (it was written by an older version, or by the library without \
                          one), so the data cannot be checked: give it with --data or \
                          --preset (its feature width and class count are then checked)"
                        .into(),
                });
            }
            return Ok(self.clone());
        }
        if explicit_source {
            return Ok(self.clone());
        }
        let mut d = Self::recorded(ck, extra)?;
        if self.data_seed.is_some() {
            d.data_seed = self.data_seed;
        }
        if self.features.is_some() {
            d.features = self.features.clone();
            // The recorded seed of random features no longer seeds anything.
            if d.data.is_some() && !d.seeded_features() && self.data_seed.is_none() {
                d.data_seed = None;
            }
        }
        if self.labels.is_some() {
            d.labels = self.labels.clone();
        }
        if self.split.is_some() {
            d.split = self.split.clone();
        }
        d.directed |= self.directed;
        if self.num_nodes.is_some() {
            d.num_nodes = self.num_nodes;
        }
        if self.train_per_class.is_some() || self.split_sizes.is_some() {
            d.train_per_class = self.train_per_class;
            d.split_sizes = self.split_sizes;
        }
        Ok(d)
    }

    /// The data options a checkpoint records (see [`DataArgs::record`]); a recorded file that
    /// is gone is an error saying so.
    fn recorded(ck: &Path, extra: &BTreeMap<String, String>) -> Result<Self> {
        let existing = |key: &str| -> Result<Option<PathBuf>> {
            match extra.get(key) {
                None => Ok(None),
                Some(p) if Path::new(p).exists() => Ok(Some(PathBuf::from(p))),
                Some(p) => Err(Error::Dataset {
                    path: ck.to_path_buf(),
                    msg: format!(
                        "the model was trained on {p}, which does not exist here; give --data \
                         (and --features or --labels files)"
                    ),
                }),
            }
        };
        let number = |key: &str| -> Result<Option<u64>> {
            extra
                .get(key)
                .map(|s| {
                    s.parse().map_err(|_| Error::Dataset {
                        path: ck.to_path_buf(),
                        msg: format!("metadata `{key}` = {s:?} is not a number"),
                    })
                })
                .transpose()
        };
        let features = match (existing("features_file")?, extra.get("features_built")) {
            (Some(f), _) => Some(FeatureArg::File(f)),
            (None, Some(k)) => Some(FeatureArg::Built(k.parse()?)),
            (None, None) => None,
        };
        let split_sizes = match extra.get("split_sizes") {
            Some(s) => Some(args::fractions(s).map_err(|msg| Error::Dataset {
                path: ck.to_path_buf(),
                msg: format!("metadata `split_sizes` = {s:?}: {msg}"),
            })?),
            None => None,
        };
        let count = |key: &str| -> Result<Option<usize>> {
            Ok(number(key)?.map(|v| usize::try_from(v).unwrap_or(usize::MAX)))
        };
        Ok(DataArgs {
            data: existing("data")?,
            preset: extra.get("preset").map(|p| p.parse()).transpose()?,
            data_seed: number("data_seed")?,
            split: extra.get("split").cloned(),
            directed: extra.get("directed").is_some_and(|v| v == "true"),
            features,
            labels: existing("labels_file")?,
            num_nodes: count("num_nodes")?,
            train_per_class: count("train_per_class")?,
            split_sizes,
        })
    }

    /// How `--data` is loaded.
    pub(crate) fn load_options(&self) -> LoadOptions {
        let mut random_split = RandomSplit::default();
        if let Some(k) = self.train_per_class {
            if let SplitRule::PerClass {
                ref mut train_per_class,
                ..
            } = random_split.rule
            {
                *train_per_class = k;
            }
        }
        if let Some([train, valid, test]) = self.split_sizes {
            random_split.rule = SplitRule::Fractions { train, valid, test };
        }
        LoadOptions {
            split: self.split.clone(),
            direction: if self.directed {
                Direction::Directed
            } else {
                Direction::Undirected
            },
            features: self.features.as_ref().and_then(FeatureArg::file).cloned(),
            labels: self.labels.clone(),
            n_nodes: self.num_nodes,
            random_split,
            ..LoadOptions::default()
        }
    }

    /// [`DataArgs::load`] for training: a store converted with `--reorder` is read in the
    /// order it holds, with that order, which training keeps when it asks for the same one
    /// ([`sparse_gcn::order::reorder_dataset`]). Built features (`--features identity`, …) are
    /// built in the input's order, so with them the data comes in the input's order.
    pub(crate) fn load_ordered(&self) -> Result<(Dataset, Option<sparse_gcn::order::Ordered>)> {
        let (Some(path), None) = (&self.data, &self.features) else {
            return Ok((self.load()?, None));
        };
        let (d, stored) = sparse_gcn::data::io::load_ordered(path, &self.load_options())?;
        let Some(o) = stored else {
            return Ok((d, None));
        };
        let kind = |name: &str| -> Result<sparse_gcn::order::Reorder> {
            name.parse().map_err(|e| Error::Store {
                path: path.clone(),
                array: sparse_gcn::data::store::HEADER.into(),
                msg: format!("order {name:?}: {e}"),
            })
        };
        let ordered = sparse_gcn::order::Ordered {
            asked: kind(&o.info.asked)?,
            applied: kind(&o.info.applied)?,
            perm: o.perm,
        };
        Ok((d, Some(ordered)))
    }

    /// Loads the dataset (or generates the preset).
    pub(crate) fn load(&self) -> Result<Dataset> {
        let mut d = match &self.data {
            Some(path) => load_any(path, &self.load_options())?,
            None => self.preset().generate(self.seed())?,
        };
        if let Some(FeatureArg::Built(k)) = self.features {
            d.features = k.build(&d.graph, self.seed())?;
        }
        Ok(d)
    }
}

/// A progress bar on stderr when it is a terminal, hidden otherwise.
/// Whether this process prints: every process of a plain run, rank 0 of an MPI job.
pub(crate) fn prints() -> bool {
    RANK.load(std::sync::atomic::Ordering::Relaxed) == 0
}

/// This process's rank in an MPI job (0 otherwise).
pub(crate) static RANK: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// `println!` on the processes that print ([`prints`]).
macro_rules! say {
    ($($t:tt)*) => {
        if $crate::cli::prints() {
            println!($($t)*)
        }
    };
}
pub(crate) use say;

/// The peak resident set of this process (`VmHWM` of `/proc/self/status`), in bytes; 0 where
/// it cannot be read.
pub(crate) fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                let kb = l.strip_prefix("VmHWM:")?.trim().strip_suffix("kB")?.trim();
                kb.parse::<u64>().ok()
            })
        })
        .map_or(0, |kb| kb * 1024)
}

pub(crate) fn progress_bar(len: u64, template: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() || !prints() {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::new(len);
    b.set_style(
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    b.enable_steady_tick(std::time::Duration::from_millis(200));
    b
}
