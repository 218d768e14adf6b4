//! Training: configuration, the epoch loop with early stopping, per-epoch history, and several
//! seeds at once, for every model of the stack ([`Model`]).

mod blocks;
pub mod checkpoint;
pub mod fits;
pub mod options;
mod out_of_core;
pub mod profile;
pub mod recipe;
pub mod run;
mod stepper;
pub use stepper::{agree, data_parallel_bytes};
mod steps;
mod summary;

pub use out_of_core::{fit_store_seeds, store_summary};
pub use steps::{train_step, BatchGraph, BatchStats, Batches};

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::Serialize;

use crate::data::{Features, Split};
use crate::graph::{Collective, Graph, Norm, Propagate};
use crate::metrics::accuracy_across;
use crate::metrics::smoothing::{layer_metrics, LayerMetrics};
use crate::nn::loss::softmax_cross_entropy_across;
use crate::nn::{Model, ModelConfig, Order};
use crate::optim::{Adam, Optimizer, Sgd};
use crate::sample::BatchConfig;
use crate::{ConfigError, Error, Par, Result, Scalar};

/// When to stop before `epochs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopRule {
    /// Run every epoch.
    Never,
    /// Kipf & Welling's rule: at epoch e > `window`, stop if the validation loss exceeds the
    /// mean of the previous `window` epochs' validation losses. The final weights are kept.
    Kipf {
        /// Window (Kipf: 10).
        window: usize,
    },
    /// Stop after `patience` epochs without a strictly lower validation loss, then restore
    /// the weights of the best epoch.
    Patience {
        /// Epochs to wait.
        patience: usize,
    },
}

/// What [`EarlyStopping::observe`] decided after an epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observation {
    /// Go on.
    Continue,
    /// Go on; this epoch has the lowest validation loss so far (keep its weights).
    Improved,
    /// Stop after this epoch.
    Stop,
}

/// The state of a [`StopRule`] over a run: fed one validation loss per epoch.
#[derive(Debug, Clone)]
pub struct EarlyStopping {
    rule: StopRule,
    val_losses: Vec<f64>,
    best: Option<(usize, f64)>,
}

impl EarlyStopping {
    /// A fresh state.
    pub fn new(rule: StopRule) -> Self {
        Self::with_capacity(rule, 0)
    }

    /// A fresh state with room for `epochs` validation losses (no allocation while observing
    /// that many).
    pub fn with_capacity(rule: StopRule, epochs: usize) -> Self {
        EarlyStopping {
            rule,
            val_losses: Vec::with_capacity(epochs),
            best: None,
        }
    }

    /// Records epoch `epoch`'s validation loss (epochs must come in order from 0) and decides.
    ///
    /// # Examples
    /// ```
    /// use sparse_gcn::train::{EarlyStopping, Observation, StopRule};
    /// let mut s = EarlyStopping::new(StopRule::Patience { patience: 2 });
    /// let seen: Vec<_> = [3.0, 2.0, 2.5, 2.1].iter().enumerate()
    ///     .map(|(e, &l)| s.observe(e, l)).collect();
    /// assert_eq!(seen, [Observation::Improved, Observation::Improved,
    ///                   Observation::Continue, Observation::Stop]);
    /// assert_eq!(s.best_epoch(), Some(1));
    /// ```
    pub fn observe(&mut self, epoch: usize, val_loss: f64) -> Observation {
        self.val_losses.push(val_loss);
        let improved = self.best.is_none_or(|(_, b)| val_loss < b);
        if improved {
            self.best = Some((epoch, val_loss));
        }
        match self.rule {
            StopRule::Never => {}
            StopRule::Kipf { window } => {
                if epoch > window {
                    let prev = &self.val_losses[epoch - window..epoch];
                    let mean = prev.iter().sum::<f64>() / window as f64;
                    if val_loss > mean {
                        return Observation::Stop;
                    }
                }
            }
            StopRule::Patience { patience } => {
                if let Some((b, _)) = self.best {
                    if epoch - b >= patience {
                        return Observation::Stop;
                    }
                }
            }
        }
        if improved {
            Observation::Improved
        } else {
            Observation::Continue
        }
    }

    /// The epoch with the lowest validation loss so far.
    pub fn best_epoch(&self) -> Option<usize> {
        self.best.map(|(e, _)| e)
    }
}

/// The optimiser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptimizerKind {
    /// Adam (0.9, 0.999, 1e-8).
    Adam,
    /// Plain SGD.
    Sgd,
}

/// Everything a training run needs besides the data. Defaults are Kipf & Welling's:
/// their GCN ([`ModelConfig::default`]), Adam lr 0.01, weight decay 5e-4 on the first layer
/// only (parameter group 0), 200 epochs, their stop rule (window 10); 5 warm-up epochs left out
/// of the timing medians.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainConfig {
    /// The model (its `in_dim` and `out_dim` are set from the data by [`fit`]).
    pub model: ModelConfig,
    /// Learning rate.
    pub lr: f64,
    /// L2 weight decay per parameter group (stem, hidden, head, norm; see [`crate::nn::arch`];
    /// missing groups get 0). Kipf: `[5e-4]`.
    pub weight_decay: Vec<f64>,
    /// Maximum number of epochs.
    pub epochs: usize,
    /// Early stopping.
    pub stop: StopRule,
    /// Optimiser.
    pub optimizer: OptimizerKind,
    /// Epochs excluded from timing medians.
    pub warmup: usize,
    /// Parallelism of the kernels.
    pub par: Par,
    /// Full-batch or mini-batch training (the batches' sampler is built once per run set,
    /// from the prepared graph: see [`run::Prepared::fit_seeds`]).
    pub batch: BatchConfig,
    /// Validation and test over the sampler's batches instead of the whole graph (a
    /// sampler whose batches partition the nodes: Cluster-GCN's), never holding the whole
    /// graph's activations.
    pub eval_batches: bool,
    /// Mini-batches a step: their gradients summed exactly and divided by their count, then
    /// one update (1: a step a batch). Across [`FitOptions::replicas`], a multiple of the
    /// processes; the same bits for any process count dividing it.
    pub batches_per_step: usize,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            model: ModelConfig::default(),
            lr: 0.01,
            weight_decay: vec![5e-4],
            epochs: 200,
            stop: StopRule::Kipf { window: 10 },
            optimizer: OptimizerKind::Adam,
            warmup: 5,
            par: Par::Rayon,
            batch: BatchConfig::Full,
            eval_batches: false,
            batches_per_step: 1,
        }
    }
}

impl TrainConfig {
    /// A fresh optimiser of the configured kind, learning rate and weight decay.
    pub fn optimizer<F: Scalar>(&self) -> Box<dyn Optimizer<F>> {
        match self.optimizer {
            OptimizerKind::Adam => Box::new(Adam::new(self.lr, self.weight_decay.clone())),
            OptimizerKind::Sgd => Box::new(Sgd {
                lr: self.lr,
                weight_decay: self.weight_decay.clone(),
            }),
        }
    }

    /// Checks the optimiser's and the loop's rules.
    ///
    /// # Errors
    /// The first [`ConfigError`].
    pub fn check_optim(&self) -> Result<(), ConfigError> {
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(ConfigError::LearningRateNotPositive(self.lr));
        }
        if let Some(&w) = self
            .weight_decay
            .iter()
            .find(|w| !(w.is_finite() && **w >= 0.0))
        {
            return Err(ConfigError::WeightDecayNegative(w));
        }
        if self.weight_decay.len() > ModelConfig::N_GROUPS {
            return Err(ConfigError::WeightDecayLen {
                got: self.weight_decay.len(),
                layers: ModelConfig::N_GROUPS,
            });
        }
        if self.epochs == 0 {
            return Err(ConfigError::ZeroCount("epochs"));
        }
        if let StopRule::Patience { patience: 0 } | StopRule::Kipf { window: 0 } = self.stop {
            return Err(ConfigError::PatienceZero);
        }
        self.batch.check()
    }

    /// Checks every rule (the model's too).
    ///
    /// # Errors
    /// The first [`ConfigError`].
    pub fn check(&self) -> Result<(), ConfigError> {
        self.model.check()?;
        self.check_optim()
    }
}

/// One epoch of the history.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EpochRecord {
    /// The epoch's index: 0 for the first (the CLI's history, its progress lines and the
    /// Python package's `history_` count from 1: `epoch + 1`).
    pub epoch: usize,
    /// Training loss of the training pass (dropout on), weight decay not included.
    pub train_loss: f64,
    /// Training accuracy of the training pass.
    pub train_acc: f64,
    /// Validation loss (evaluation pass).
    pub val_loss: f64,
    /// Validation accuracy.
    pub val_acc: f64,
    /// Wall time of forward + backward + optimiser step, ms (with mini-batches: every batch's,
    /// and building them).
    pub train_ms: f64,
    /// The time spent building the epoch's batches, ms (0 for full batch): the first before
    /// training, each next one while the one before it trains (on another worker when one is
    /// free), so only part of it adds to `train_ms`.
    pub sample_ms: f64,
    /// Wall time of the whole epoch including the evaluation pass, ms.
    pub epoch_ms: f64,
}

/// The outcome of one training run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunResult {
    /// The seed.
    pub seed: u64,
    /// One record per epoch run.
    pub history: Vec<EpochRecord>,
    /// The epoch whose weights were evaluated (the last one, or the best under `Patience`).
    pub best_epoch: usize,
    /// Validation accuracy of the evaluated weights.
    pub val_acc: f64,
    /// Test accuracy of the evaluated weights.
    pub test_acc: f64,
    /// Test loss of the evaluated weights.
    pub test_loss: f64,
    /// The order each graph convolution ran in.
    #[serde(skip)]
    pub orders: Vec<Order>,
    /// Per-layer oversmoothing metrics, when [`FitOptions::metrics_every`] asked for them
    /// (the last record of each layer is that of the evaluated weights).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub layer_metrics: Vec<LayerRecord>,
    /// The sizes of the batches, when trained on mini-batches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batches: Option<BatchStats>,
}

impl RunResult {
    /// Median `train_ms` over the epochs after `warmup`.
    pub fn train_ms_median(&self, warmup: usize) -> f64 {
        median(
            self.history
                .iter()
                .skip(warmup)
                .map(|r| r.train_ms)
                .collect(),
        )
    }
}

/// Median (NaN for an empty list).
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// Mean and sample standard deviation (n − 1 in the denominator; 0 for one value), as the PyG
/// measuring stick in `../shared/peers` reports them.
pub fn mean_std(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    if v.len() < 2 {
        return (m, 0.0);
    }
    let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0);
    (m, var.sqrt())
}

/// The RNG of stream `stream` for `seed`: stream 0 initialises weights, stream 1 draws dropout
/// masks, stream 2 DropEdge's samples. ChaCha8 is portable, so a seed replays on every machine.
pub fn rng_stream(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(stream);
    r
}

/// Where DropEdge draws each epoch's training graph from (the rate is the model's
/// [`ModelConfig::drop_edge`]).
#[derive(Debug, Clone, Copy)]
pub struct DropEdgeSource<'g> {
    /// The full graph (Â of the evaluation passes is its normalisation).
    pub graph: &'g Graph,
    /// The normalisation of each sampled subgraph.
    pub norm: Norm,
}

/// Options of a training run beyond [`TrainConfig`].
#[derive(Debug, Clone, Copy, Default)]
pub struct FitOptions<'g> {
    /// The graph DropEdge samples from, needed when the model's `drop_edge` > 0: each training
    /// pass runs on a fresh random subgraph (RNG stream 2 of the seed), renormalised
    /// ([`DropEdge::sample_into`](crate::graph::dropedge::DropEdge::sample_into), into one Â′ kept for the whole run); evaluation passes use the
    /// full Â.
    pub drop_edge: Option<DropEdgeSource<'g>>,
    /// Record every layer's oversmoothing metrics (an evaluation pass) every this many epochs,
    /// and after the last one; 0 records none.
    pub metrics_every: usize,
    /// Rows sampled for the numerical rank in those records (`None`: no rank).
    pub rank_sample: Option<usize>,
    /// Mini-batch training: each epoch takes one optimiser step per batch of the sampler
    /// instead of one pass over the whole graph; validation and test stay full-graph.
    pub batches: Option<Batches<'g>>,
    /// Called after each epoch with the run's seed and the epoch's record (progress).
    pub on_epoch: Option<EpochHook<'g>>,
    /// Validation and test over the batches (see [`TrainConfig::eval_batches`]); needs
    /// `batches` from a sampler whose batches partition the nodes.
    pub eval_batches: bool,
    /// The processes of a data-parallel run over mini-batches (every one holding the whole
    /// data): each trains its share of every step's batches and the steps' gradients are
    /// summed exactly across them ([`TrainConfig::batches_per_step`]); `None`: one process.
    pub replicas: Option<Replicas<'g>>,
    /// Checked after each epoch (after `on_epoch`, which may set it): when set, the run ends
    /// with [`Error::Interrupted`] (Ctrl-C in the Python package).
    pub interrupt: Option<&'g AtomicBool>,
}

/// The processes of a data-parallel run ([`FitOptions::replicas`]).
#[derive(Clone, Copy)]
pub struct Replicas<'g>(pub &'g dyn Collective);

impl std::fmt::Debug for Replicas<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (rank, ranks) = self.0.process();
        write!(f, "Replicas({rank} of {ranks})")
    }
}

/// A function called after each epoch ([`FitOptions::on_epoch`]) with the seed and the
/// epoch's record.
#[derive(Clone, Copy)]
pub struct EpochHook<'g>(pub &'g (dyn Fn(u64, &EpochRecord) + Sync));

impl std::fmt::Debug for EpochHook<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EpochHook")
    }
}

/// Oversmoothing metrics of one layer at one epoch.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LayerRecord {
    /// 0-based epoch (after its update).
    pub epoch: usize,
    /// 0-based layer (representation) index.
    pub layer: usize,
    /// The metrics.
    #[serde(flatten)]
    pub metrics: LayerMetrics,
}

/// What a training run reads: Â, the node features, the labels with their number of classes,
/// and the train/valid/test split (PyG's `Data` object, with Â in place of `edge_index`).
#[derive(Clone, Copy)]
pub struct TrainData<'a, F: Scalar> {
    /// Â (held whole, or this process's rows of a row-partitioned run: then `x`, `labels`
    /// and `split` are this process's rows too).
    pub adj: &'a dyn Propagate<F>,
    /// The node features.
    pub x: &'a Features<F>,
    /// One class per node.
    pub labels: &'a [u32],
    /// Number of classes (the model's output width).
    pub n_classes: usize,
    /// The split.
    pub split: &'a Split,
}

impl<F: Scalar> std::fmt::Debug for TrainData<'_, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrainData")
            .field("rows", &self.adj.shape().0)
            .field("nodes", &self.adj.rows().total)
            .field("x", &self.x)
            .field("n_classes", &self.n_classes)
            .finish_non_exhaustive()
    }
}

impl<'a, F: Scalar> TrainData<'a, F> {
    /// The data of a run.
    pub fn new(
        adj: &'a dyn Propagate<F>,
        x: &'a Features<F>,
        labels: &'a [u32],
        n_classes: usize,
        split: &'a Split,
    ) -> Self {
        TrainData {
            adj,
            x,
            labels,
            n_classes,
            split,
        }
    }
}

impl<'a> TrainData<'a, f32> {
    /// A dataset's features, labels and split, with `adj` its Â.
    pub fn of(adj: &'a dyn Propagate<f32>, data: &'a crate::data::Dataset) -> Self {
        TrainData::new(
            adj,
            &data.features,
            &data.labels,
            data.n_classes,
            &data.split,
        )
    }
}

/// Checks that the data fit together: feature rows and labels per node, what
/// [`Dataset::check_trainable`](crate::data::Dataset::check_trainable) asks (two classes,
/// features, a split without an empty part whose nodes are labelled), labels below
/// `n_classes`.
///
/// # Errors
/// [`Error::Mismatch`], [`Error::NotTrainable`], [`Error::EmptyMask`] (from [`Split::check`]),
/// [`Error::Dataset`] (an unlabelled split node), [`Error::LabelOutOfRange`].
pub fn check_data<F: Scalar>(data: &TrainData<'_, F>) -> Result<()> {
    let TrainData {
        adj,
        x,
        labels,
        n_classes,
        split,
    } = *data;
    let n = adj.shape().0;
    for (what, got) in [("feature rows", x.n_rows()), ("labels", labels.len())] {
        if got != n {
            return Err(Error::Mismatch {
                what: format!("{what} vs nodes"),
                expected: n,
                got,
            });
        }
    }
    // A process of a row-partitioned run holds part of the split (perhaps none of a part):
    // the whole dataset is checked before it is partitioned.
    if !adj.collective().spans_processes() {
        crate::data::dataset::check_trainable(
            "the training data",
            x.n_cols(),
            labels,
            n_classes,
            split,
        )?;
    }
    if let Some((node, &l)) = labels
        .iter()
        .enumerate()
        .find(|(_, &l)| l != crate::data::UNLABELLED && l as usize >= n_classes)
    {
        return Err(Error::LabelOutOfRange {
            node,
            label: l as i64,
            n_classes,
        });
    }
    Ok(())
}

/// Builds the model of `cfg` for the data (its `in_dim`/`out_dim` from `x` and `n_classes`,
/// weights from RNG stream 0 of `seed`).
///
/// # Errors
/// [`Error::Config`] for an invalid configuration.
pub fn build_model<F: Scalar>(
    adj: &dyn Propagate<F>,
    x: &Features<F>,
    n_classes: usize,
    cfg: &ModelConfig,
    seed: u64,
) -> Result<Model<F>> {
    blocks::build_model_ordered(adj, x, n_classes, cfg, seed, None)
}

/// Trains one model with `seed` and evaluates it on the split's test nodes.
///
/// The model's `in_dim`/`out_dim` are taken from the features and `n_classes`.
///
/// # Errors
/// [`Error::Config`] for an invalid configuration, [`Error::EmptyMask`] for an empty split
/// part, [`Error::Mismatch`] for inputs of the wrong size, [`Error::NonFiniteLoss`] when the
/// training loss becomes NaN or infinite.
pub fn fit<F: Scalar>(data: &TrainData<'_, F>, cfg: &TrainConfig, seed: u64) -> Result<RunResult> {
    fit_model(data, cfg, seed, &FitOptions::default()).map(|(r, _)| r)
}

/// [`fit`] with options (DropEdge's graph, metrics), also returning the trained model (with the
/// weights that were evaluated).
///
/// # Errors
/// As [`fit`].
pub fn fit_model<F: Scalar>(
    data: &TrainData<'_, F>,
    cfg: &TrainConfig,
    seed: u64,
    opts: &FitOptions<'_>,
) -> Result<(RunResult, Model<F>)> {
    check_data(data)?;
    cfg.check_optim()?;
    let orders = blocks::block_orders(&cfg.model, opts.batches.as_ref(), data.x.is_sparse());
    let mut model = blocks::build_model_ordered(
        data.adj,
        data.x,
        data.n_classes,
        &cfg.model,
        seed,
        orders.as_deref(),
    )?;
    let run = train_model(&mut model, data, cfg, seed, opts)?;
    Ok((run, model))
}

/// The epoch loop for a built [`Model`]: trains with `cfg`'s optimiser and stop rule (dropout
/// from RNG stream 1 of `seed`, DropEdge from stream 2), then evaluates the kept weights. The
/// data must have passed [`check_data`]; `cfg.model` is not used (the model carries its own;
/// DropEdge at its configuration's rate, none for a hand-built stack).
///
/// # Errors
/// [`Error::Config`] for an invalid optimiser setting or DropEdge without its graph,
/// [`Error::NonFiniteLoss`].
pub fn train_model<F: Scalar>(
    model: &mut Model<F>,
    data: &TrainData<'_, F>,
    cfg: &TrainConfig,
    seed: u64,
    opts: &FitOptions<'_>,
) -> Result<RunResult> {
    let TrainData {
        adj,
        x,
        labels,
        split,
        ..
    } = *data;
    cfg.check_optim()?;
    let par = cfg.par;
    let mut drop_rng = rng_stream(seed, 1);
    // Buffers and caches of an earlier run may hold other data.
    model.release();
    let mut opt = cfg.optimizer();
    // DropEdge (one Â′ rewritten every epoch, no allocation after the first) or batches.
    let steps = steps::Steps::new(model, data, opts, seed, cfg.batches_per_step);
    let mut steps = stepper::agree(opts.replicas, steps)?;

    let mut history = Vec::with_capacity(cfg.epochs);
    let mut layer_records = Vec::new();
    // The best epoch's weights, copied into the same buffers at each improvement.
    let mut best: Option<usize> = None;
    let mut best_snap: Vec<Vec<F>> = Vec::new();
    let mut stopper = EarlyStopping::with_capacity(cfg.stop, cfg.epochs);
    let record = |model: &mut Model<F>, epoch: usize, out: &mut Vec<LayerRecord>| {
        let mut res = Ok(());
        model.visit_representations(adj, x, par, &mut |layer, h| match layer_metrics(
            adj,
            h,
            opts.rank_sample.map(|s| (s, seed)),
            par,
        ) {
            Ok(metrics) => out.push(LayerRecord {
                epoch,
                layer,
                metrics,
            }),
            Err(e) => res = Err(e),
        })?;
        Ok::<(), Error>(res?)
    };
    // Validation's and test's (loss, accuracy) of the model as it is: over the batches when
    // the run evaluates on them, one pass over the whole graph otherwise.
    let evaluate = |steps: &mut steps::Steps<'_, F>, model: &mut Model<F>| {
        if let Some(scores) = steps.eval(model, par)? {
            return Ok::<_, Error>(scores);
        }
        let mut scores = [(f64::NAN, 0.0); 2];
        model.eval_pass(adj, x, par, &mut |logits, sums| {
            for (k, mask) in [&split.valid, &split.test].into_iter().enumerate() {
                let loss = softmax_cross_entropy_across(logits, labels, mask, None, &sums);
                scores[k] = (
                    loss.to_f64_lossless(),
                    accuracy_across(logits, labels, mask, &sums),
                );
            }
        })?;
        Ok(scores)
    };
    let mut last = None;
    for epoch in 0..cfg.epochs {
        let t0 = Instant::now();
        let (train_loss, train_acc, sample_ms) =
            steps.epoch(model, opt.as_mut(), data, epoch, &mut drop_rng, par)?;
        if !train_loss.is_finite() {
            return Err(Error::NonFiniteLoss {
                epoch,
                loss: train_loss,
            });
        }
        let train_ms = t0.elapsed().as_secs_f64() * 1e3;
        // Evaluation.
        let scores = evaluate(&mut steps, model)?;
        last = Some(scores);
        let [(val_loss, val_acc), _] = scores;
        let epoch_ms = t0.elapsed().as_secs_f64() * 1e3;
        history.push(EpochRecord {
            epoch,
            train_loss,
            train_acc,
            val_loss,
            val_acc,
            train_ms,
            sample_ms,
            epoch_ms,
        });
        if let (Some(hook), Some(r)) = (opts.on_epoch, history.last()) {
            (hook.0)(seed, r);
        }
        if opts.interrupt.is_some_and(|i| i.load(Ordering::Relaxed)) {
            return Err(Error::Interrupted { epoch: epoch + 1 });
        }
        if opts.metrics_every > 0 && epoch % opts.metrics_every == 0 {
            record(model, epoch, &mut layer_records)?;
        }
        match stopper.observe(epoch, val_loss) {
            Observation::Continue => {}
            Observation::Improved => {
                if matches!(cfg.stop, StopRule::Patience { .. }) {
                    model.snapshot_into(&mut best_snap);
                    best = Some(epoch);
                }
            }
            Observation::Stop => break,
        }
    }
    let mut best_epoch = history.len() - 1;
    if let Some(e) = best {
        model.restore(&best_snap);
        best_epoch = e;
    }
    drop(best_snap);
    if opts.metrics_every > 0 {
        // The evaluated weights' metrics, tagged with the epoch they come from.
        layer_records.retain(|r| r.epoch != best_epoch);
        record(model, best_epoch, &mut layer_records)?;
    }
    // The evaluated weights are the last epoch's unless an earlier epoch's were restored:
    // then its evaluation stands (one pass over the whole graph, or over every evaluation
    // batch, saved).
    let scores = match last.filter(|_| best.is_none_or(|e| e + 1 == history.len())) {
        Some(s) => s,
        None => evaluate(&mut steps, model)?,
    };
    let [(_, val_acc), (test_loss, test_acc)] = scores;
    model.release();
    Ok(RunResult {
        seed,
        history,
        best_epoch,
        val_acc,
        test_acc,
        test_loss,
        orders: model.orders(),
        layer_metrics: layer_records,
        batches: steps.stats(),
    })
}

/// Trains one model per seed, in parallel (rayon tasks over seeds; each run's kernels are
/// bit-identical for any thread count, so every run replays exactly from its seed).
/// `on_done` is called with each run's result and trained model when the run finishes (e.g. to
/// advance a progress bar or save a checkpoint); the model is dropped afterwards.
///
/// # Errors
/// The first error of any run.
pub fn fit_seeds<F: Scalar>(
    data: &TrainData<'_, F>,
    cfg: &TrainConfig,
    seeds: &[u64],
    opts: &FitOptions<'_>,
    on_done: &(dyn Fn(&RunResult, &mut Model<F>) + Sync),
) -> Result<Vec<RunResult>> {
    let run = |&s: &u64| {
        let (r, mut model) = fit_model(data, cfg, s, opts)?;
        on_done(&r, &mut model);
        Ok(r)
    };
    // Across processes, one seed after another (every process makes the same exchanges in
    // the same order).
    match opts.replicas {
        Some(c) if c.0.spans_processes() => seeds.iter().map(run).collect(),
        _ => seeds.par_iter().map(run).collect(),
    }
}
