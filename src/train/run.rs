//! The training pipeline the CLI, the examples and library users share: prepare a dataset the way
//! `sparse-gcn train` does (node order, feature row normalisation, Â), train every seed, and
//! record in a checkpoint what evaluation needs to prepare the data the same way again.
//!
//! ```
//! use sparse_gcn::data::synthetic::CitationLike;
//! use sparse_gcn::train::run::{Prepare, Prepared};
//! use sparse_gcn::train::TrainConfig;
//! let data = CitationLike { n_nodes: 500, ..Default::default() }.generate(1).unwrap();
//! let p = Prepared::new(data, &Prepare::default()).unwrap();
//! let runs = p.fit_seeds(&TrainConfig::default(), &[0, 1], 0, None, &|_, _| {}).unwrap();
//! assert_eq!(runs.len(), 2);
//! ```

use std::collections::BTreeMap;
use std::time::Instant;

pub use super::summary::Summary;
use super::{
    build_model, fit_model, fit_seeds, Batches, DropEdgeSource, EpochHook, FitOptions, Replicas,
    RunResult, TrainConfig, TrainData,
};
use crate::data::{memory, Dataset, Features};
use crate::graph::{Direction, Graph, Norm, NormAdj, Permutation};
use crate::nn::{Model, ModelConfig};
use crate::order::{self, Reorder};
use crate::sample::{BatchConfig, NodeSampler};
use crate::{ConfigError, Result};

/// What a set of runs reports to and runs across ([`Prepared::fit_seeds_watched`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Watch<'a> {
    /// Called after every epoch of every run with its seed and record.
    pub on_epoch: Option<EpochHook<'a>>,
    /// The processes of a data-parallel run over mini-batches ([`FitOptions::replicas`]).
    pub replicas: Option<Replicas<'a>>,
    /// Ends the runs between epochs when set ([`FitOptions::interrupt`]).
    pub interrupt: Option<&'a std::sync::atomic::AtomicBool>,
}

/// Checks `cfg`'s sizes (`ModelConfig::check_sizes`: layers, hidden width, checkpointing; an
/// architecture's own limits, such as SGC's K, through its `check`), and its input and output
/// widths against the loaders'
/// limits (`MAX_FEATURE_COLS`, `MAX_CLASSES` of `data::io`), so that a size from outside (a flag, a
/// checkpoint's metadata) can neither overflow nor hang the planner.
///
/// # Errors
/// [`ConfigError::OutOfRange`] naming the field and its limit.
pub(crate) fn check_limits(cfg: &ModelConfig) -> Result<(), ConfigError> {
    cfg.arch.check()?;
    cfg.check_sizes()?;
    let limits: [(&'static str, usize, usize, &'static str); 2] = [
        (
            "in_dim",
            cfg.in_dim,
            crate::data::io::MAX_FEATURE_COLS,
            "at most 2^24 (MAX_FEATURE_COLS)",
        ),
        (
            "out_dim",
            cfg.out_dim,
            crate::data::io::MAX_CLASSES,
            "at most 2^20 (MAX_CLASSES)",
        ),
    ];
    for (name, value, max, rule) in limits {
        if value > max {
            return Err(ConfigError::OutOfRange {
                name,
                value: value as f64,
                rule,
            });
        }
    }
    Ok(())
}

/// The number of parameters (and statistics) of the model `cfg` describes, computed from the
/// configuration alone, before anything is allocated; an upper bound where the model depends on
/// the data (the residual projection is counted even when the widths match). Saturates.
pub fn param_count(cfg: &ModelConfig) -> u64 {
    cfg.arch.param_count(cfg)
}

/// Refuses, before anything is allocated, `runs` models of `cfg` (its `in_dim`/`out_dim` set)
/// whose parameters with their gradients, the optimiser's two moments and the best epoch's
/// copy (5 values each) would not fit in the memory available.
///
/// # Errors
/// [`crate::Error::TooLarge`] naming the model's sizes; [`crate::Error::Config`] past the
/// limits of `check_limits`.
pub fn check_params_fit(cfg: &ModelConfig, runs: usize) -> Result<()> {
    check_limits(cfg)?;
    let params = param_count(cfg);
    let needed = params
        .saturating_mul(5 * std::mem::size_of::<f32>() as u64)
        .saturating_mul(runs.max(1) as u64);
    memory::check(needed, || {
        format!(
            "{} {} model{} (in {}, hidden {}, out {}, {} layers): {params} parameters, with \
             their gradients, the optimiser's moments and the best epoch's copy",
            if runs > 1 {
                runs.to_string()
            } else {
                "a".into()
            },
            cfg.arch,
            if runs > 1 { "s trained at once" } else { "" },
            cfg.in_dim,
            cfg.hidden_dim,
            cfg.out_dim,
            cfg.n_layers
        )
    })
}

/// The parameters of `model`: its configuration's count, or the stack's own.
pub(crate) fn model_params(model: &mut Model<f32>) -> u64 {
    match model.config() {
        Some(cfg) => param_count(cfg),
        None => model.n_params() as u64,
    }
}

/// Refuses, before training, `runs` models trained at once on `n` rows of `x` when their
/// planned workspaces (and the parameters of [`check_params_fit`]) would not fit in the memory
/// available. `model` is one of them, built (its parameters allocated): its plan gives the
/// workspace (`Model::workspace_bytes`), without allocating it.
///
/// # Errors
/// [`crate::Error::TooLarge`].
pub fn check_run_fits(
    model: &mut Model<f32>,
    n: usize,
    x: &Features<f32>,
    runs: usize,
) -> Result<()> {
    let params = model_params(model);
    let what = match model.config() {
        Some(cfg) => format!(
            "{} model{} (hidden {}, {} layers)",
            cfg.arch,
            if runs > 1 { "s at once" } else { "" },
            cfg.hidden_dim,
            cfg.n_layers
        ),
        None => format!(
            "stack{} of {} nodes",
            if runs > 1 { "s at once" } else { "" },
            model.nodes().len()
        ),
    };
    let out_dim = model.out_dim();
    let workspace = model.workspace_bytes(n, x)? as u64;
    // This model's parameters are allocated already: the others, their gradients, moments and
    // copies are not.
    let per_run = params
        .saturating_mul(5 * 4)
        .saturating_add(workspace)
        .saturating_add(memory::bytes(n, 4 * out_dim));
    let needed = per_run
        .saturating_mul(runs.max(1) as u64)
        .saturating_sub(params.saturating_mul(4));
    memory::check(needed, || {
        format!(
            "training {} {what} on {n} nodes × {} features: the planned workspace ({workspace} \
             bytes a model), the logits and the parameters",
            if runs > 1 {
                runs.to_string()
            } else {
                "a".into()
            },
            x.n_cols()
        )
    })
}

/// Refuses, before inference, evaluating `model` on `n` rows of `x` (its logits returned as
/// a new array) when evaluation's own workspace (planned forward only: layer-wise, about
/// two layers' activations) and the logits would not fit in the memory available. Set
/// [`StackOptions::separate_eval`](crate::nn::StackOptions::separate_eval) on a model that
/// only evaluates, so that its passes run in that workspace.
///
/// # Errors
/// [`crate::Error::TooLarge`].
pub fn check_inference_fits(model: &mut Model<f32>, n: usize, x: &Features<f32>) -> Result<()> {
    let workspace = model.eval_workspace_bytes(n, x)? as u64;
    let out_dim = model.out_dim();
    let needed = workspace.saturating_add(memory::bytes(n, 4 * out_dim));
    memory::check(needed, || {
        format!(
            "evaluating a model on {n} nodes × {} features: the planned evaluation workspace \
             ({workspace} bytes) and the logits",
            x.n_cols()
        )
    })
}

/// Whether to row-normalise the features (Kipf's preprocessing of bag-of-words).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RowNorm {
    /// When every feature is ≥ 0 (bag-of-words), as Kipf & Welling do; signed dense features
    /// (ogbn-arxiv-like embeddings) are left as they are.
    #[default]
    Auto,
    /// Always.
    On,
    /// Never.
    Off,
}

crate::error::names!(RowNorm, "row normalisation", [
    RowNorm::Auto => "auto",
    RowNorm::On => "on",
    RowNorm::Off => "off",
]);

impl RowNorm {
    /// Whether the features are row-normalised, `non_negative` telling whether every value
    /// is ≥ 0 (asked for `auto` only).
    pub fn applies(self, non_negative: impl FnOnce() -> bool) -> bool {
        match self {
            RowNorm::Auto => non_negative(),
            RowNorm::On => true,
            RowNorm::Off => false,
        }
    }
}

/// Bytes of `x` as stored.
pub(crate) fn features_bytes(x: &Features<f32>) -> u64 {
    if x.is_sparse() {
        // X and its transpose: values and indices, and the row pointers.
        memory::bytes(x.nnz(), 2 * (4 + 4)).saturating_add(memory::bytes(x.n_rows(), 16))
    } else {
        memory::bytes(x.n_rows(), 4 * x.n_cols())
    }
}

/// Refuses a preparation whose Â (and Âᵀ, and the degrees) and reordered copy of the graph
/// and features would not fit in the memory available.
fn check_prepare_fits(data: &Dataset) -> Result<()> {
    let g = &data.graph;
    let (n, nnz) = (g.n_nodes(), g.nnz());
    let graph = memory::bytes(n + 1, 8).saturating_add(memory::bytes(nnz, 4));
    // Â and Âᵀ: row pointers, and values and column indices with the self-loops added.
    let adj = memory::bytes(n + 1, 16)
        .saturating_add(memory::bytes(nnz.saturating_add(n), 16))
        .saturating_add(memory::bytes(n, 8));
    let x = features_bytes(&data.features);
    memory::check(adj.saturating_add(graph).saturating_add(x), || {
        format!(
            "preparing {} ({n} nodes, {nnz} adjacency entries, {} × {} features): Â, Âᵀ and a \
             reordered copy of the graph and features",
            data.name,
            data.features.n_rows(),
            data.features.n_cols()
        )
    })
}

/// The node order `reorder` asks for on `graph` (`None` for the given order) and the order
/// it resolved to.
///
/// # Errors
/// As [`order::order`].
pub(crate) fn choose_order(
    graph: &Graph,
    reorder: Reorder,
) -> Result<(Option<Permutation>, Reorder)> {
    let (perm, applied) = match reorder {
        Reorder::Auto => order::auto_order(graph),
        r => (order::order(graph, r)?, r),
    };
    Ok(((!perm.is_identity()).then_some(perm), applied))
}

/// How [`Prepared::new`] prepares a dataset. The default is the CLI's: `--reorder auto`,
/// `--row-norm auto`, `--norm sym`, the raw graph freed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prepare {
    /// Relabel the nodes once for memory locality (see `order::auto_order`).
    pub reorder: Reorder,
    /// Row-normalise the features.
    pub row_norm: RowNorm,
    /// The normalisation of Â.
    pub norm: Norm,
    /// Keep the raw graph after building Â (DropEdge samples from it); otherwise it is freed.
    pub keep_graph: bool,
    /// Build the whole graph's Â. Without it (mini-batch training evaluated over its batches
    /// never reads it: [`TrainConfig::eval_batches`]) [`Prepared::adj`] is the Â of the
    /// graph's nodes without their edges, a stand-in for its shape, and
    /// [`Prepared::check_fits`] refuses any other training; needs `keep_graph`.
    pub whole_adj: bool,
    /// Cluster-GCN's diagonal enhancement λ of the whole graph's Â
    /// ([`NormAdj::enhance_diagonal`]; 0: none): the λ of the batches it evaluates
    /// ([`BatchConfig::Cluster`]'s `diag_lambda`), which [`Prepared::fit`] checks.
    pub diag_lambda: f64,
}

impl Default for Prepare {
    fn default() -> Self {
        Prepare {
            reorder: Reorder::Auto,
            row_norm: RowNorm::Auto,
            norm: Norm::Symmetric,
            keep_graph: false,
            whole_adj: true,
            diag_lambda: 0.0,
        }
    }
}

/// A dataset prepared for training: the node order applied, the features normalised, Â built.
#[derive(Debug)]
pub struct Prepared {
    /// The dataset in the applied node order (its graph emptied unless [`Prepare::keep_graph`]).
    pub data: Dataset,
    /// Â (without [`Prepare::whole_adj`], the Â of the nodes alone: see there).
    pub adj: NormAdj<f32>,
    /// Stored entries of the whole graph's Â (built or not).
    pub nnz: usize,
    /// How it was prepared, with `reorder` resolved to the order applied.
    pub prepare: Prepare,
    /// The order asked for (`auto` before resolution).
    pub reorder_asked: Reorder,
    /// Whether the features were row-normalised.
    pub row_normalized: bool,
    /// Nodes and edges of the graph.
    pub n_nodes: usize,
    /// Edges (undirected edges counted once).
    pub n_edges: usize,
    /// Whether the graph is directed.
    pub directed: bool,
    /// Seconds spent choosing and applying the node order.
    pub reorder_s: f64,
    /// The node order applied (`None`: the given order): row `r` of [`Prepared::data`] is the
    /// input's node `perm.new_to_old()[r]`.
    pub perm: Option<crate::graph::Permutation>,
}

impl Prepared {
    /// Prepares `data` as `p` says.
    ///
    /// # Errors
    /// [`crate::Error::TooLarge`] when Â and a reordered copy of the data would not fit in the
    /// memory available; from reordering (a permutation that does not fit the data).
    pub fn new(data: Dataset, p: &Prepare) -> Result<Self> {
        Self::new_ordered(data, None, p)
    }

    /// [`Prepared::new`] on data that may come relabelled already (`given`, a store converted
    /// with `--reorder`): kept in that order when it is the one `p` asks for, else put back in
    /// the input order first ([`order::reorder_dataset`]); the same prepared data either way.
    ///
    /// # Errors
    /// As [`Prepared::new`].
    pub fn new_ordered(
        mut data: Dataset,
        given: Option<order::Ordered>,
        p: &Prepare,
    ) -> Result<Self> {
        if !p.whole_adj && !p.keep_graph {
            return Err(crate::Error::Config(ConfigError::OutOfRange {
                name: "whole_adj",
                value: 0.0,
                rule: "true unless the graph is kept (Prepare::keep_graph)",
            }));
        }
        crate::sample::check_diag_lambda(p.diag_lambda)?;
        check_prepare_fits(&data)?;
        let t = Instant::now();
        let (reordered, perm, applied) = order::reorder_dataset(data, p.reorder, given)?;
        data = reordered;
        let reorder_s = t.elapsed().as_secs_f64();
        let row_normalized = p.row_norm.applies(|| data.features.is_non_negative());
        if row_normalized {
            data.features.row_normalize();
        }
        let (adj, nnz) = if p.whole_adj {
            let mut adj = NormAdj::<f32>::new(&data.graph, p.norm);
            adj.enhance_diagonal(p.diag_lambda as f32);
            let nnz = adj.nnz();
            (adj, nnz)
        } else {
            let n = data.graph.n_nodes();
            let nodes = Graph::try_from_edges(n, &[], Direction::Undirected)?;
            let nnz = crate::graph::adj_indptr(&data.graph)[n];
            (NormAdj::<f32>::new(&nodes, p.norm), nnz)
        };
        let (n_nodes, n_edges, directed) = (
            data.graph.n_nodes(),
            data.graph.n_edges(),
            data.graph.is_directed(),
        );
        if !p.keep_graph {
            // Training needs only Â: free the raw adjacency (half a GB on products-like).
            data.graph = Graph::try_from_edges(0, &[], Direction::Undirected)?;
        }
        Ok(Prepared {
            data,
            adj,
            nnz,
            prepare: Prepare {
                reorder: applied,
                ..*p
            },
            reorder_asked: p.reorder,
            perm,
            row_normalized,
            n_nodes,
            n_edges,
            directed,
            reorder_s,
        })
    }

    /// Trains one model per seed (in parallel), recording the layers' oversmoothing metrics every
    /// `metrics_every` epochs (0: none; `rank_sample` rows for the numerical rank). DropEdge (the
    /// model's `drop_edge` > 0) samples from the kept graph. `on_done` sees each run and its
    /// trained model.
    ///
    /// # Errors
    /// As [`fit_seeds`]; a DropEdge model without the graph kept is a configuration error.
    pub fn fit_seeds(
        &self,
        cfg: &TrainConfig,
        seeds: &[u64],
        metrics_every: usize,
        rank_sample: Option<usize>,
        on_done: &(dyn Fn(&RunResult, &mut Model<f32>) + Sync),
    ) -> Result<Vec<RunResult>> {
        let watch = Watch::default();
        self.fit_seeds_watched(cfg, seeds, metrics_every, rank_sample, watch, on_done)
    }

    /// [`Prepared::fit_seeds`] with `watch`: its `on_epoch` (when given) called after every
    /// epoch of every run with its seed and record; across its `replicas` (mini-batches, one
    /// seed after another).
    ///
    /// # Errors
    /// As [`Prepared::fit_seeds`].
    pub fn fit_seeds_watched(
        &self,
        cfg: &TrainConfig,
        seeds: &[u64],
        metrics_every: usize,
        rank_sample: Option<usize>,
        watch: Watch<'_>,
        on_done: &(dyn Fn(&RunResult, &mut Model<f32>) + Sync),
    ) -> Result<Vec<RunResult>> {
        let runs = match watch.replicas {
            Some(_) => 1,
            None => rayon::current_num_threads().min(seeds.len()),
        };
        let sampler = self.checked_sampler(cfg, runs, metrics_every);
        let sampler = super::agree(watch.replicas, sampler)?;
        let mut opts = self.options(cfg, metrics_every, rank_sample, sampler.as_deref());
        (opts.on_epoch, opts.replicas) = (watch.on_epoch, watch.replicas);
        opts.interrupt = watch.interrupt;
        fit_seeds(&self.train_data(), cfg, seeds, &opts, on_done)
    }

    /// Trains one model with `seed`, reporting to `watch` (one process: its `replicas` must
    /// be `None`), and returns it with its run: the same bits as the run of `seed` in
    /// [`Prepared::fit_seeds_watched`] (the CLI's `train --seed`).
    ///
    /// # Errors
    /// As [`Prepared::fit_seeds`]; [`crate::Error::Interrupted`] when `watch.interrupt` is set;
    /// a configuration error for `watch.replicas`.
    pub fn fit_watched(
        &self,
        cfg: &TrainConfig,
        seed: u64,
        watch: Watch<'_>,
    ) -> Result<(RunResult, Model<f32>)> {
        if watch.replicas.is_some() {
            return Err(crate::Error::Config(ConfigError::OutOfRange {
                name: "replicas",
                value: 1.0,
                rule: "none: Prepared::fit_watched trains in one process",
            }));
        }
        let sampler = self.checked_sampler(cfg, 1, 0)?;
        let mut opts = self.options(cfg, 0, None, sampler.as_deref());
        (opts.on_epoch, opts.interrupt) = (watch.on_epoch, watch.interrupt);
        super::fit_model(&self.train_data(), cfg, seed, &opts)
    }

    /// `a`'s rows (one per node of the prepared data) in the input's node order.
    pub fn input_order(&self, a: ndarray::ArrayView2<'_, f32>) -> ndarray::Array2<f32> {
        match &self.perm {
            None => a.to_owned(),
            Some(perm) => {
                let mut out = ndarray::Array2::zeros(a.dim());
                for (old, &new) in perm.old_to_new().iter().enumerate() {
                    out.row_mut(old).assign(&a.row(new as usize));
                }
                out
            }
        }
    }

    /// Refuses, before anything is allocated for it, a training of `runs` models of `cfg` at
    /// once that would not fit in the memory available ([`check_params_fit`], then for full
    /// batch [`check_run_fits`] on one model built for the purpose; mini-batches are priced
    /// once their sampler is built, by [`check_batch_run_fits`](super::fits::check_batch_run_fits)
    /// in [`Prepared::fit`] and [`Prepared::fit_seeds`]).
    ///
    /// # Errors
    /// As [`super::check_data`], [`check_params_fit`] and [`check_run_fits`]; a configuration
    /// that cannot be built.
    pub fn check_fits(&self, cfg: &TrainConfig, runs: usize) -> Result<()> {
        if !self.prepare.whole_adj && (cfg.batch == BatchConfig::Full || !cfg.eval_batches) {
            return Err(crate::Error::Config(ConfigError::OutOfRange {
                name: "whole_adj",
                value: 0.0,
                rule: "true unless training on mini-batches evaluated over them \
                       (TrainConfig::eval_batches): the whole Â was not built",
            }));
        }
        super::check_data(&self.train_data())?;
        let x = &self.data.features;
        let model_cfg = ModelConfig {
            in_dim: x.n_cols(),
            out_dim: self.data.n_classes,
            ..cfg.model.clone()
        };
        check_params_fit(&model_cfg, runs)?;
        if cfg.batch != BatchConfig::Full {
            return Ok(());
        }
        let mut model = build_model(&self.adj, x, self.data.n_classes, &cfg.model, 0)?;
        check_run_fits(&mut model, self.adj.n_nodes(), x, runs)
    }

    /// Trains one model with `seed` (see [`Prepared::fit_seeds`]) and returns it with its run.
    ///
    /// # Errors
    /// As [`Prepared::fit_seeds`].
    pub fn fit(
        &self,
        cfg: &TrainConfig,
        seed: u64,
        metrics_every: usize,
        rank_sample: Option<usize>,
    ) -> Result<(RunResult, Model<f32>)> {
        let sampler = self.checked_sampler(cfg, 1, metrics_every)?;
        let opts = self.options(cfg, metrics_every, rank_sample, sampler.as_deref());
        fit_model(&self.train_data(), cfg, seed, &opts)
    }

    /// The checks of a training of `runs` models of `cfg` recording metrics every
    /// `metrics_every` epochs ([`Prepared::check_fits`]; the layers' metrics read the whole Â,
    /// so they need it built), then the sampler of its batches.
    pub(crate) fn checked_sampler(
        &self,
        cfg: &TrainConfig,
        runs: usize,
        metrics_every: usize,
    ) -> Result<Option<Box<dyn NodeSampler>>> {
        self.check_fits(cfg, runs)?;
        // (The whole Â evaluates the batches' model: the same diagonal enhancement.)
        let lambda = match cfg.batch {
            BatchConfig::Cluster { diag_lambda, .. } => diag_lambda,
            _ => 0.0,
        };
        if self.prepare.whole_adj && lambda != self.prepare.diag_lambda {
            return Err(crate::Error::Config(ConfigError::OutOfRange {
                name: "diag_lambda",
                value: lambda,
                rule: "the whole Â's (Prepare::diag_lambda) when it is built",
            }));
        }
        if metrics_every > 0 && !self.prepare.whole_adj {
            return Err(crate::Error::Config(ConfigError::OutOfRange {
                name: "metrics_every",
                value: metrics_every as f64,
                rule: "0 unless the whole Â was built (Prepare::whole_adj)",
            }));
        }
        let sampler = self.sampler(cfg)?;
        if let Some(s) = &sampler {
            let x = &self.data.features;
            let b = Batches {
                sampler: s.as_ref(),
                graph: (&self.data.graph).into(),
                norm: self.prepare.norm,
            };
            let orders = super::blocks::block_orders(&cfg.model, Some(&b), x.is_sparse());
            let mut model = super::blocks::build_model_ordered(
                &self.adj,
                x,
                self.data.n_classes,
                &cfg.model,
                0,
                orders.as_deref(),
            )?;
            let shape = super::fits::BatchShape {
                n: self.n_nodes,
                nnz: self.nnz,
                max_rows: s.max_nodes().min(self.n_nodes),
                eval_full: !cfg.eval_batches,
                max_entries: None,
                blocks: match s.blocks() {
                    Some(b) => Some(self.block_shape(b, cfg.eval_batches)?),
                    None => None,
                },
            };
            super::fits::check_batch_run_fits(&mut model, shape, x, runs)?;
        }
        Ok(sampler)
    }

    /// The most rows of each level and entries of a batch of `b`'s blocks, the latter also of
    /// evaluation's batches of the validation and test nodes (`eval`), and the most rows of
    /// each level of evaluation's batches (their first block over the whole graph's nodes):
    /// what a neighbour-sampled run is priced for.
    fn block_shape(
        &self,
        b: &crate::sample::NeighborSampler,
        eval: bool,
    ) -> Result<(Vec<usize>, usize, Vec<usize>)> {
        let whole = self.nnz.saturating_add(self.n_nodes);
        let (caps, mut entries) = (b.level_caps(), b.max_entries(whole));
        let mut eval_caps = caps.clone();
        if eval {
            let split = &self.data.split;
            let (valid, test) = (split.valid.to_bool(), split.test.to_bool());
            let nodes = (0..valid.len() as u32).filter(|&v| valid[v as usize] || test[v as usize]);
            let members = crate::data::Mask::try_from_indices(nodes.collect(), valid.len())?;
            let e = b.with_seeds(&members)?;
            eval_caps = e.level_caps_over_whole();
            entries = entries.max(e.max_entries(whole));
        }
        Ok((caps, entries, eval_caps))
    }

    /// The sampler of `cfg`'s mini-batches, cut from the prepared graph (`None` for full
    /// batch); GraphSAINT's normalisation pre-sampled with seed 0.
    ///
    /// # Errors
    /// [`crate::Error::Config`] when the graph was not kept ([`Prepare::keep_graph`]); as
    /// [`crate::sample::BatchConfig::sampler`].
    pub fn sampler(&self, cfg: &TrainConfig) -> Result<Option<Box<dyn NodeSampler>>> {
        if cfg.batch == BatchConfig::Full {
            return Ok(None);
        }
        if self.data.graph.n_nodes() != self.n_nodes {
            return Err(crate::Error::Config(ConfigError::OutOfRange {
                name: "batch",
                value: 1.0,
                rule: "full batch unless the graph is kept (Prepare::keep_graph)",
            }));
        }
        // GraphSAINT's normalisation is pre-sampled with seed 0 whatever the runs' seeds: like
        // the parts, a property of the graph and the sampler, so a run does not depend on the
        // other seeds it is trained with.
        cfg.batch
            .sampler(&self.data.graph, &self.data.split.train, 0)
    }

    /// What training reads: Â, the features, the labels and the split. Without
    /// [`Prepare::whole_adj`] its Â is a stand-in: train through [`Prepared::fit`] or
    /// [`Prepared::fit_seeds`], which refuse what would read it.
    pub fn train_data(&self) -> TrainData<'_, f32> {
        TrainData::of(&self.adj, &self.data)
    }

    /// The training options of a run with `cfg`: DropEdge's source when the model drops edges,
    /// the batches of `sampler` on the prepared graph.
    fn options<'a>(
        &'a self,
        cfg: &TrainConfig,
        metrics_every: usize,
        rank_sample: Option<usize>,
        sampler: Option<&'a dyn NodeSampler>,
    ) -> FitOptions<'a> {
        let drop_edge =
            (cfg.model.drop_edge > 0.0 && self.prepare.keep_graph).then_some(DropEdgeSource {
                graph: &self.data.graph,
                norm: self.prepare.norm,
            });
        FitOptions {
            drop_edge,
            metrics_every,
            rank_sample,
            batches: sampler.map(|sampler| Batches {
                sampler,
                graph: (&self.data.graph).into(),
                norm: self.prepare.norm,
            }),
            on_epoch: None,
            eval_batches: cfg.eval_batches,
            replicas: None,
            interrupt: None,
        }
    }

    /// The checkpoint metadata evaluation needs to prepare the data the same way
    /// ([`Prepare::from_extra`]): `dataset`, `row_normalize`, `norm`, `directed`, `reorder`.
    pub fn extra(&self) -> BTreeMap<String, String> {
        self.summary().extra()
    }

    /// What was prepared, for reports.
    pub fn summary(&self) -> Summary {
        let d = &self.data;
        Summary {
            name: d.name.clone(),
            n_nodes: self.n_nodes,
            n_edges: self.n_edges,
            nnz: self.nnz,
            in_dim: d.features.n_cols(),
            sparse_features: d.features.is_sparse(),
            n_classes: d.n_classes,
            split_name: d.split.name.clone(),
            split_sizes: [d.split.train.len(), d.split.valid.len(), d.split.test.len()],
            row_normalized: self.row_normalized,
            prepare: self.prepare,
            reorder_asked: self.reorder_asked,
            reorder_s: self.reorder_s,
            directed: self.directed,
        }
    }
}

impl Prepare {
    /// The preparation a checkpoint's metadata records ([`Prepared::extra`]); keys that are
    /// missing take the defaults of checkpoints written before they existed (row
    /// normalisation on, symmetric Â, the given node order).
    ///
    /// # Errors
    /// [`crate::Error::Config`] for an unknown `reorder`.
    pub fn from_extra(extra: &BTreeMap<String, String>) -> Result<Self> {
        let row_norm = match extra.get("row_normalize").map(String::as_str) {
            Some("false") => RowNorm::Off,
            _ => RowNorm::On,
        };
        let norm = match extra.get("norm").map(String::as_str) {
            Some("row") => Norm::Row,
            _ => Norm::Symmetric,
        };
        let reorder = match extra.get("reorder") {
            Some(r) => r.parse::<Reorder>()?,
            None => Reorder::None,
        };
        let diag_lambda = match extra.get("diag_lambda") {
            Some(v) => {
                let bad = || {
                    crate::Error::Config(ConfigError::Attr {
                        key: "diag_lambda".into(),
                        value: v.clone(),
                        msg: "a finite number at least 0".into(),
                    })
                };
                let l: f64 = v.parse().map_err(|_| bad())?;
                crate::sample::check_diag_lambda(l).map_err(|_| bad())?;
                l
            }
            None => 0.0,
        };
        Ok(Prepare {
            reorder,
            row_norm,
            norm,
            keep_graph: false,
            whole_adj: true,
            diag_lambda,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A checkpoint's diagonal enhancement: absent in older checkpoints (none), read back
    /// when recorded, a typed error when it is not a finite λ ≥ 0.
    #[test]
    fn the_recorded_diagonal_enhancement_is_read_back_or_refused() {
        let with = |v: Option<&str>| {
            let mut extra = BTreeMap::new();
            if let Some(v) = v {
                extra.insert("diag_lambda".to_string(), v.to_string());
            }
            Prepare::from_extra(&extra)
        };
        assert_eq!(with(None).unwrap().diag_lambda, 0.0);
        assert_eq!(with(Some("0.5")).unwrap().diag_lambda, 0.5);
        for bad in ["-1", "abc", "inf", "NaN", ""] {
            assert!(
                matches!(with(Some(bad)), Err(crate::Error::Config(_))),
                "{bad}"
            );
        }
    }
}
