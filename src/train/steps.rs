//! An epoch's training steps: one pass over the whole graph (on a DropEdge sample of it when
//! the model asks for one), or one step per mini-batch of a sampler.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use ndarray::ArrayViewMut2;
use serde::Serialize;

use super::{rng_stream, DropEdgeSource, FitOptions, TrainData};
use crate::data::store::StoreRows;
use crate::data::{Features, Mask};
use crate::graph::dropedge::DropEdge;
use crate::graph::Sums;
use crate::graph::{AdjScratch, Graph, Norm, NormAdj, Propagate};
use crate::metrics::accuracy_across;
use crate::nn::loss::{
    softmax_cross_entropy_in_place_across, softmax_cross_entropy_weighted_in_place_across,
};
use crate::nn::Model;
use crate::optim::Optimizer;
use crate::sample::{Batch, BatchSource, NodeSampler};
use crate::{ConfigError, Error, Par, Result, Scalar};

/// Where mini-batches come from ([`FitOptions::batches`](super::FitOptions::batches)).
#[derive(Clone, Copy)]
pub struct Batches<'g> {
    /// The sampler of each batch's nodes.
    pub sampler: &'g dyn NodeSampler,
    /// The whole graph (each batch's Â is its subgraph's, renormalised by `norm`).
    pub graph: BatchGraph<'g>,
    /// The normalisation of each batch's Â.
    pub norm: Norm,
}

/// The whole graph batches are cut from ([`Batches::graph`]).
#[derive(Debug, Clone, Copy)]
pub enum BatchGraph<'g> {
    /// In memory, with the run's features, labels and split ([`TrainData`]).
    Memory(&'g Graph),
    /// A store's rows read per batch, with its features (row-normalised as they are read when
    /// `row_normalize`), labels and split: Cluster-GCN's sampler only, evaluated over its
    /// batches; the run's [`TrainData`] is then a stand-in
    /// ([`fit_store_seeds`](super::fit_store_seeds)).
    Store {
        /// The store.
        rows: &'g StoreRows,
        /// Whether each feature row is row-normalised as it is read.
        row_normalize: bool,
    },
}

impl<'g> From<&'g Graph> for BatchGraph<'g> {
    fn from(g: &'g Graph) -> Self {
        BatchGraph::Memory(g)
    }
}

impl BatchGraph<'_> {
    /// The whole graph's node count.
    pub fn n_nodes(&self) -> usize {
        match self {
            BatchGraph::Memory(g) => g.n_nodes(),
            BatchGraph::Store { rows, .. } => rows.n_nodes(),
        }
    }
}

impl std::fmt::Debug for Batches<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batches")
            .field("batches", &self.sampler.batches())
            .field("max_nodes", &self.sampler.max_nodes())
            .field("norm", &self.norm)
            .finish_non_exhaustive()
    }
}

/// The sizes of a run's batches: how many, and their nodes and edges (each undirected edge
/// counted once, as [`Graph::n_edges`] counts them; self-loops of the input included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct BatchStats {
    /// Batches an epoch.
    pub batches_per_epoch: usize,
    /// Batches built over the run.
    pub built: u64,
    /// Nodes of every batch built, summed.
    pub nodes_sum: u64,
    /// The most nodes a batch had.
    pub nodes_max: usize,
    /// Edges of every batch built, summed.
    pub edges_sum: u64,
    /// The most edges a batch had.
    pub edges_max: usize,
}

impl BatchStats {
    /// Mean nodes a batch.
    pub fn nodes_mean(&self) -> f64 {
        self.nodes_sum as f64 / self.built.max(1) as f64
    }
    /// Mean edges a batch.
    pub fn edges_mean(&self) -> f64 {
        self.edges_sum as f64 / self.built.max(1) as f64
    }
    /// Counts one more batch of `nodes` nodes and `edges` edges.
    pub(super) fn add(&mut self, nodes: usize, edges: usize) {
        self.built += 1;
        self.nodes_sum += nodes as u64;
        self.edges_sum += edges as u64;
        self.nodes_max = self.nodes_max.max(nodes);
        self.edges_max = self.edges_max.max(edges);
    }
}

/// How a run's epochs train (see the [module docs](self)).
pub(super) enum Steps<'a, F: Scalar> {
    /// The whole graph, with DropEdge drawn here or by the backend.
    Full(Box<Full<'a, F>>),
    /// One step per stack of blocks (neighbour sampling).
    Blocks(Box<super::blocks::BlockSteps<'a, F>>),
    /// One step per batch.
    Batches {
        batches: Batches<'a>,
        src: BatchSource<'a, F>,
        batch: Box<Batch<F>>,
        /// The batch built while `batch` trains.
        next: Box<Batch<F>>,
        seed: u64,
        stepper: Box<super::stepper::Stepper<'a, F>>,
        /// Validation and test nodes, for evaluation over the batches.
        eval: Option<Box<EvalSets>>,
    },
}

/// The nodes evaluation over batches scores ([`FitOptions::eval_batches`]).
pub(super) struct EvalSets {
    valid: Vec<bool>,
    test: Vec<bool>,
}

/// [`Steps::Full`].
pub(super) struct Full<'a, F: Scalar> {
    drop_edge: Option<(DropEdge, DropEdgeSource<'a>)>,
    /// The sample drawn here.
    sampled: Option<NormAdj<F>>,
    scratch: AdjScratch<F>,
    /// The backend's rate, when the backend draws the samples.
    backend_rate: Option<f64>,
    /// DropEdge's stream (2 of the seed).
    edge_rng: ChaCha8Rng,
}

impl<'a, F: Scalar> Steps<'a, F> {
    /// Validation's and test's (loss, accuracy) over the batches of epoch 0 (every node once),
    /// when the run evaluates on batches; `None` otherwise. A batch's loss and correct
    /// predictions over its nodes of each set are summed in batch order and divided by the
    /// set's size.
    ///
    /// # Errors
    /// As [`Batch::fill`] and [`Model::eval_pass`].
    pub(super) fn eval(
        &mut self,
        model: &mut Model<F>,
        par: Par,
    ) -> Result<Option<[(f64, f64); 2]>> {
        if let Steps::Blocks(b) = self {
            return b.eval(model, par);
        }
        let Steps::Batches {
            batches,
            src,
            batch,
            seed,
            eval: Some(sets),
            ..
        } = self
        else {
            return Ok(None);
        };
        // [loss sum, correct, count] per set.
        let mut acc = [[0.0f64; 3]; 2];
        for index in 0..batches.sampler.batches() {
            batch.fill(src, batches.sampler, *seed, 0, index)?;
            // The batch's validation and test rows, then one pass scoring both.
            let nodes = batch.nodes();
            let rows = |member: &[bool]| {
                let rows = (0..nodes.len() as u32).filter(|&r| member[nodes[r as usize] as usize]);
                Mask::try_from_indices(rows.collect(), nodes.len())
            };
            let masks = [rows(&sets.valid)?, rows(&sets.test)?];
            if masks.iter().all(Mask::is_empty) {
                continue;
            }
            model.eval_pass(batch.adj(), batch.x(), par, &mut |logits, sums| {
                for (k, mask) in masks.iter().enumerate() {
                    if mask.is_empty() {
                        continue;
                    }
                    let m = mask.len() as f64;
                    let loss = crate::nn::loss::softmax_cross_entropy_across(
                        logits,
                        batch.labels(),
                        mask,
                        None,
                        &sums,
                    );
                    acc[k][0] += loss.to_f64_lossless() * m;
                    acc[k][1] += (accuracy_across(logits, batch.labels(), mask, &sums) * m).round();
                    acc[k][2] += m;
                }
            })?;
        }
        let mean = |a: [f64; 3]| (a[0] / a[2], a[1] / a[2]);
        Ok(Some([mean(acc[0]), mean(acc[1])]))
    }

    /// The sizes of the batches built so far (`None` for full batch).
    pub(super) fn stats(&self) -> Option<BatchStats> {
        match self {
            Steps::Full(_) => None,
            Steps::Blocks(b) => Some(b.stepper.stats),
            Steps::Batches { stepper, .. } => Some(stepper.stats),
        }
    }

    /// The steps of a run of `model` on `data` with `opts` and `seed`; a model trained on
    /// batches is set to expect a varying Â, its training planned for the largest batch and its
    /// evaluation in a workspace of its own.
    ///
    /// # Errors
    /// [`Error::Config`] for DropEdge without its graph, or with batches; [`Error::Mismatch`]
    /// for a DropEdge or batch graph of other nodes than the data's.
    pub(super) fn new(
        model: &mut Model<F>,
        data: &TrainData<'a, F>,
        opts: &FitOptions<'a>,
        seed: u64,
        per_step: usize,
    ) -> Result<Self> {
        let rate = model.config().map_or(0.0, |c| c.drop_edge);
        let edge_rng = rng_stream(seed, 2);
        if opts.eval_batches && opts.batches.is_none() {
            return Err(Error::Config(ConfigError::OutOfRange {
                name: "eval_batches",
                value: 1.0,
                rule: "only with mini-batches (FitOptions::batches)",
            }));
        }
        let Some(b) = opts.batches else {
            if per_step != 1 || opts.replicas.is_some() {
                return Err(Error::Config(ConfigError::OutOfRange {
                    name: "batches_per_step",
                    value: per_step as f64,
                    rule: "1 without mini-batches (FitOptions::batches), and no replicas",
                }));
            }
            let drop_edge = drop_edge_source(rate, data.adj, opts)?;
            return Ok(Steps::Full(Box::new(Full {
                sampled: drop_edge.map(|(_, s)| NormAdj::<F>::empty(s.norm)),
                drop_edge,
                scratch: AdjScratch::default(),
                backend_rate: (rate > 0.0 && opts.drop_edge.is_none()).then_some(rate),
                edge_rng,
            })));
        };
        if rate > 0.0 {
            return Err(Error::Config(ConfigError::OutOfRange {
                name: "drop_edge",
                value: rate,
                rule: "0 with mini-batches (a batch is already a subgraph)",
            }));
        }
        let total = b.graph.n_nodes();
        if let BatchGraph::Memory(_) = b.graph {
            let whole = data.adj.rows().total;
            if total != whole || data.adj.shape().0 != whole {
                return Err(Error::Mismatch {
                    what: "batch graph nodes vs nodes (mini-batches need the whole graph in one \
                           process)"
                        .into(),
                    expected: whole,
                    got: total,
                });
            }
        } else if !opts.eval_batches || opts.metrics_every > 0 || opts.replicas.is_some() {
            return Err(Error::Config(ConfigError::Unsupported {
                what: "batches read from a store with evaluation on the whole graph, layer \
                       metrics or replicas (a store's run evaluates over its batches, in one \
                       process)",
            }));
        }
        if b.sampler.batches() == 0 {
            return Err(Error::Config(ConfigError::OutOfRange {
                name: "batches",
                value: 0.0,
                rule: "a sampler of at least one batch an epoch",
            }));
        }
        let src = match b.graph {
            BatchGraph::Store {
                rows,
                row_normalize,
            } => {
                let Some(cluster) = b.sampler.cluster() else {
                    return Err(Error::Config(ConfigError::Unsupported {
                        what: "batches read from a store with a sampler other than \
                               Cluster-GCN's (the others draw from the graph in memory)",
                    }));
                };
                BatchSource::from_store(rows, b.norm, row_normalize, cluster)?
            }
            BatchGraph::Memory(g) => {
                if let Some(ns) = b.sampler.blocks() {
                    return Self::blocks(model, data, opts, ns, b, g, (seed, per_step));
                }
                BatchSource::new(g, b.norm, data.x, data.labels, &data.split.train)?
            }
        };
        let eval = if opts.eval_batches {
            if !b.sampler.partitions() {
                return Err(Error::Config(ConfigError::OutOfRange {
                    name: "eval_batches",
                    value: 1.0,
                    rule: "only with a sampler whose batches partition the nodes (Cluster-GCN)",
                }));
            }
            Some(Box::new(EvalSets {
                valid: data.split.valid.to_bool(),
                test: data.split.test.to_bool(),
            }))
        } else {
            None
        };
        let mut options = model.options();
        options.varying_graph = true;
        options.separate_eval = true;
        model.set_options(options);
        // Training planned for the largest batch; evaluation plans its own workspace for the
        // whole graph, forward only.
        model.reserve(b.sampler.max_nodes().clamp(1, total), data.x)?;
        let mut batch = Box::new(Batch::new(b.norm));
        batch.reserve(&src, b.sampler.max_nodes());
        let mut next = Box::new(Batch::new(b.norm));
        next.reserve(&src, b.sampler.max_nodes());
        Ok(Steps::Batches {
            batches: b,
            src,
            batch,
            next,
            seed,
            eval,
            stepper: Box::new(super::stepper::Stepper::new(
                model,
                per_step,
                opts.replicas,
                seed,
                b.sampler.batches(),
            )?),
        })
    }

    /// The steps over the blocks of `ns` (`b`'s sampler): training planned per level for the
    /// largest batch, evaluation (over batches of the validation and test nodes, or on the
    /// whole graph) in a workspace of its own.
    fn blocks(
        model: &mut Model<F>,
        data: &TrainData<'a, F>,
        opts: &FitOptions<'a>,
        ns: &'a crate::sample::NeighborSampler,
        b: Batches<'a>,
        graph: &'a Graph,
        (seed, per_step): (u64, usize),
    ) -> Result<Self> {
        if b.norm != crate::graph::Norm::Symmetric {
            return Err(Error::Config(ConfigError::OutOfRange {
                name: "norm",
                value: 1.0,
                rule: "symmetric with neighbour sampling (each block normalised as DGL's \
                       GraphConv norm='both', docs/MATH.md §23.2)",
            }));
        }
        if data.x.is_sparse() && model.orders().first() == Some(&crate::nn::Order::AggregateFirst) {
            return Err(Error::Config(ConfigError::Unsupported {
                what:
                    "aggregate-first in the first layer on sparse features over neighbour-sampled \
                       blocks (a block has no sparse Â·X; transform-first or auto run there)",
            }));
        }
        let mut options = model.options();
        options.varying_graph = true;
        options.separate_eval = true;
        model.set_options(options);
        let caps = ns.level_caps();
        model.reserve_blocks(&caps, data.x, false)?;
        let eval = if opts.eval_batches {
            let (valid, test) = (data.split.valid.to_bool(), data.split.test.to_bool());
            let nodes: Vec<u32> = (0..valid.len() as u32)
                .filter(|&v| valid[v as usize] || test[v as usize])
                .collect();
            let members = Mask::try_from_indices(nodes, valid.len())?;
            let sampler = ns.with_seeds(&members)?;
            model.reserve_blocks(&sampler.level_caps_over_whole(), data.x, true)?;
            Some(Box::new(super::blocks::EvalBlocks {
                sampler,
                valid,
                test,
            }))
        } else {
            None
        };
        let rows = caps[0];
        let new = || Box::new(super::blocks::BlockBatch::new(data.x.n_cols(), rows));
        Ok(Steps::Blocks(Box::new(super::blocks::BlockSteps {
            sampler: ns,
            graph,
            x: data.x,
            labels: data.labels,
            batch: new(),
            next: new(),
            seed,
            stepper: super::stepper::Stepper::new(
                model,
                per_step,
                opts.replicas,
                seed,
                ns.batches(),
            )?,
            eval,
        })))
    }

    /// The training steps of `epoch`: returns the training loss and accuracy (over the
    /// batches, weighted by their training nodes) and the ms spent building batches.
    ///
    /// # Errors
    /// As [`train_step`]; [`Error::NonFiniteLoss`] when a batch's loss is not finite.
    pub(super) fn epoch(
        &mut self,
        model: &mut Model<F>,
        opt: &mut dyn Optimizer<F>,
        data: &TrainData<'_, F>,
        epoch: usize,
        drop_rng: &mut ChaCha8Rng,
        par: Par,
    ) -> Result<(f64, f64, f64)> {
        match self {
            Steps::Blocks(b) => b.epoch(model, opt, (epoch, drop_rng), par),
            Steps::Full(full) => {
                let Full {
                    drop_edge,
                    sampled,
                    scratch,
                    backend_rate,
                    edge_rng,
                } = &mut **full;
                if let (Some((d, src)), Some(s)) = (drop_edge.as_ref(), sampled.as_mut()) {
                    d.sample_into(src.graph, src.norm, edge_rng, s, scratch);
                }
                // The backend's sample draws its key as `sample_into` does: one u64 of
                // stream 2.
                let backend_sample = match backend_rate {
                    Some(rate) => Some(data.adj.drop_edge_sample(*rate, edge_rng.next_u64())?),
                    None => None,
                };
                let step_adj: &dyn Propagate<F> = match (&backend_sample, sampled.as_ref()) {
                    (Some(b), _) => b.as_ref(),
                    (None, Some(s)) => s,
                    (None, None) => data.adj,
                };
                let x = data.x;
                let train = &data.split.train;
                let (loss, acc) =
                    train_step(model, opt, step_adj, x, data.labels, train, drop_rng, par)?;
                Ok((loss, acc, 0.0))
            }
            Steps::Batches {
                batches,
                src,
                batch,
                next,
                seed,
                stepper,
                ..
            } => {
                let (sampler, seed, src) = (batches.sampler, *seed, &*src);
                let fill =
                    |b: &mut Batch<F>, index: usize| b.fill(src, sampler, seed, epoch, index);
                let slots = (&mut **batch, &mut **next);
                let at = (epoch, drop_rng);
                stepper.epoch(slots, &fill, sampler.batches(), model, opt, at, par)
            }
        }
    }
}

impl<F: Scalar> super::stepper::Slot<F> for Batch<F> {
    fn size(&self) -> (usize, usize) {
        (self.nodes().len(), self.graph().n_edges())
    }

    fn targets(&self) -> (&[u32], &Mask, Option<&[F]>) {
        (self.labels(), self.train(), self.loss_weights())
    }

    fn pass(
        &self,
        model: &mut Model<F>,
        rng: &mut ChaCha8Rng,
        par: Par,
        loss: &mut LossFn<'_, F>,
    ) -> Result<()> {
        model.train_pass(self.adj(), self.x(), rng, par, loss)
    }
}

/// One optimisation step: a training pass of `model` (dropout masks from `rng`, on `adj`: the
/// model's Â or any other of the same rows, e.g. a DropEdge sample), masked cross-entropy over
/// `train`, backward, and an update of every parameter. Returns the training loss (before the
/// update, weight decay not included) and accuracy of that pass.
///
/// # Errors
/// As [`Model::train_pass`].
///
/// # Panics
/// If `train` is empty or the labels do not match the model (check them first, as [`fit`](super::fit)
/// does).
#[allow(clippy::too_many_arguments)]
pub fn train_step<F: Scalar>(
    model: &mut Model<F>,
    opt: &mut dyn Optimizer<F>,
    adj: &dyn Propagate<F>,
    x: &Features<F>,
    labels: &[u32],
    train: &Mask,
    rng: &mut ChaCha8Rng,
    par: Par,
) -> Result<(f64, f64)> {
    train_step_weighted(model, opt, adj, x, labels, train, None, rng, par)
}

/// [`train_step`] with the loss weighted per row (`weights[i]` instead of 1/|M| for row i:
/// GraphSAINT's loss normalisation) when `weights` is given.
#[allow(clippy::too_many_arguments)]
pub(crate) fn train_step_weighted<F: Scalar>(
    model: &mut Model<F>,
    opt: &mut dyn Optimizer<F>,
    adj: &dyn Propagate<F>,
    x: &Features<F>,
    labels: &[u32],
    train: &Mask,
    weights: Option<&[F]>,
    rng: &mut ChaCha8Rng,
    par: Par,
) -> Result<(f64, f64)> {
    let pass =
        &mut |m: &mut Model<F>, loss: &mut LossFn<'_, F>| m.train_pass(adj, x, rng, par, loss);
    step(model, opt, labels, train, weights, pass)
}

/// The loss of a training pass: ∂L/∂logits written over the logits; whether to go on.
pub(super) type LossFn<'a, F> = dyn FnMut(ArrayViewMut2<'_, F>, Sums<'_, F>) -> bool + 'a;

/// A training pass of a model through the loss it is given.
pub(super) type PassFn<'a, F> = dyn FnMut(&mut Model<F>, &mut LossFn<'_, F>) -> Result<()> + 'a;

/// A training pass through the loss it is given (`pass`: over a whole graph, a batch's
/// subgraph or a stack of blocks), masked cross-entropy over `train` (weighted per row by
/// `weights` when given), then an update of every parameter: the training loss and accuracy.
///
/// # Errors
/// As `pass`.
pub(super) fn step<F: Scalar>(
    model: &mut Model<F>,
    opt: &mut dyn Optimizer<F>,
    labels: &[u32],
    train: &Mask,
    weights: Option<&[F]>,
    pass: &mut PassFn<'_, F>,
) -> Result<(f64, f64)> {
    let out = grads(model, labels, train, weights, pass)?;
    if out.0.is_finite() {
        update(model, opt);
    }
    Ok(out)
}

/// The gradients of a training pass through the loss it is given (see [`step`]), written
/// over the model's: the training loss and accuracy.
///
/// # Errors
/// As `pass`.
pub(super) fn grads<F: Scalar>(
    model: &mut Model<F>,
    labels: &[u32],
    train: &Mask,
    weights: Option<&[F]>,
    pass: &mut PassFn<'_, F>,
) -> Result<(f64, f64)> {
    model.zero_grad();
    let mut out = (f64::NAN, 0.0);
    let mut loss = |z: ArrayViewMut2<'_, F>, sums: Sums<'_, F>| {
        // The accuracy first: the gradient is written over the logits.
        let acc = accuracy_across(z.view(), labels, train, &sums);
        let loss = match weights {
            Some(w) => softmax_cross_entropy_weighted_in_place_across(z, labels, train, w, &sums),
            None => softmax_cross_entropy_in_place_across(z, labels, train, &sums),
        }
        .to_f64_lossless();
        out = (loss, acc);
        loss.is_finite()
    };
    pass(model, &mut loss)?;
    Ok(out)
}

/// An update of every parameter of `model` by `opt` from the gradients it holds.
pub(super) fn update<F: Scalar>(model: &mut Model<F>, opt: &mut dyn Optimizer<F>) {
    let mut index = 0;
    model.visit_params(&mut |group, p| {
        opt.update(index, group, p);
        index += 1;
    });
    opt.finish_step();
}

/// DropEdge at `rate` for a run on `adj`: sampled here from the raw graph when `opts` gives it
/// (`Some`), by the backend (which holds its rows of the graph) otherwise (`None`, checked to
/// be possible); `None` without DropEdge.
///
/// # Errors
/// [`Error::Mismatch`] for a graph of other nodes; [`Error::Config`] for a rate out of range
/// or no graph to sample from.
fn drop_edge_source<'g, F: Scalar>(
    rate: f64,
    adj: &dyn Propagate<F>,
    opts: &FitOptions<'g>,
) -> Result<Option<(DropEdge, DropEdgeSource<'g>)>> {
    match (rate > 0.0, &opts.drop_edge) {
        (false, _) => Ok(None),
        (true, Some(src)) => {
            if src.graph.n_nodes() != adj.rows().total {
                return Err(Error::Mismatch {
                    what: "DropEdge graph nodes vs nodes".into(),
                    expected: adj.rows().total,
                    got: src.graph.n_nodes(),
                });
            }
            Ok(Some((DropEdge::new(rate)?, *src)))
        }
        (true, None) if adj.caps().drop_edge => {
            DropEdge::new(rate)?;
            Ok(None)
        }
        (true, None) => Err(Error::Config(ConfigError::OutOfRange {
            name: "drop_edge",
            value: rate,
            rule: "0 unless the graph to sample from is given (FitOptions::drop_edge)",
        })),
    }
}
