//! An epoch's steps over stacks of bipartite blocks (neighbour sampling,
//! [`NeighborSampler`]): each batch's blocks, the features of its first level's nodes and its
//! seeds' labels, built on another worker while the batch before trains, then one training
//! pass over the blocks ([`Model::train_blocks`]); and evaluation over such batches of the
//! validation and test nodes (`--eval batch`).

use rand_chacha::ChaCha8Rng;

use super::steps::LossFn;
use super::{rng_stream, Batches};
use crate::data::{Features, Mask};
use crate::graph::{Graph, Propagate};
use crate::metrics::accuracy_across;
use crate::nn::Model;
use crate::nn::ModelConfig;
use crate::optim::Optimizer;
use crate::sample::{Blocks, NeighborSampler};
use crate::{Par, Result, Scalar};

/// One batch: its blocks, the features of its first level, its seeds' labels, and the mask of
/// every seed (the rows the loss reads).
pub(super) struct BlockBatch<F: Scalar> {
    blocks: Blocks<F>,
    x: Features<F>,
    labels: Vec<u32>,
    seeds: Mask,
}

impl<F: Scalar> BlockBatch<F> {
    /// An empty batch for features of `cols` columns, with room for `rows` first-level rows.
    pub(super) fn new(cols: usize, rows: usize) -> Self {
        let v = Vec::with_capacity(rows.saturating_mul(cols));
        let x = ndarray::Array2::from_shape_vec((0, cols), v)
            .unwrap_or_else(|_| ndarray::Array2::zeros((0, cols)));
        BlockBatch {
            blocks: Blocks::default(),
            x: Features::dense(x),
            labels: Vec::new(),
            seeds: Mask::default(),
        }
    }

    /// Batch `index` of `epoch` of `sampler` for `seed` on `graph`, with the rows of `x` and
    /// `labels` it reads.
    ///
    /// # Errors
    /// As [`NeighborSampler::blocks_into`].
    #[allow(clippy::too_many_arguments)]
    pub(super) fn fill(
        &mut self,
        sampler: &NeighborSampler,
        graph: &Graph,
        x: &Features<F>,
        labels: &[u32],
        seed: u64,
        epoch: usize,
        index: usize,
    ) -> Result<()> {
        sampler.blocks_into(graph, seed, epoch, index, &mut self.blocks)?;
        x.select_rows_into(self.blocks.nodes(0), &mut self.x);
        let seeds = self.blocks.seeds();
        self.labels.clear();
        self.labels
            .extend(seeds.iter().map(|&v| labels[v as usize]));
        let mut rows = std::mem::take(&mut self.seeds).into_indices();
        rows.clear();
        rows.extend(0..seeds.len() as u32);
        self.seeds = Mask::try_from_indices(rows, seeds.len())?;
        Ok(())
    }

    /// Batch `index` of `epoch` of `sampler` for evaluation: its first block over the whole
    /// graph's nodes ([`NeighborSampler::blocks_into_over`]), so that it reads the whole
    /// features in place, and its seeds' labels.
    ///
    /// # Errors
    /// As [`NeighborSampler::blocks_into_over`].
    fn fill_over_whole(
        &mut self,
        sampler: &NeighborSampler,
        graph: &Graph,
        labels: &[u32],
        seed: u64,
        index: usize,
    ) -> Result<()> {
        sampler.blocks_into_over(graph, seed, 0, index, &mut self.blocks, true)?;
        let seeds = self.blocks.seeds();
        self.labels.clear();
        self.labels
            .extend(seeds.iter().map(|&v| labels[v as usize]));
        Ok(())
    }

    /// The blocks as the model takes them.
    fn refs(&self) -> Vec<&dyn Propagate<F>> {
        (0..self.blocks.layers())
            .map(|l| self.blocks.block(l) as &dyn Propagate<F>)
            .collect()
    }

    /// Nodes read (the first level) and entries of the blocks.
    fn size(&self) -> (usize, usize) {
        let entries = (0..self.blocks.layers())
            .map(|l| self.blocks.block(l).nnz())
            .sum();
        (self.blocks.nodes(0).len(), entries)
    }
}

impl<F: Scalar> super::stepper::Slot<F> for BlockBatch<F> {
    fn size(&self) -> (usize, usize) {
        BlockBatch::size(self)
    }

    fn targets(&self) -> (&[u32], &Mask, Option<&[F]>) {
        (&self.labels, &self.seeds, None)
    }

    fn pass(
        &self,
        model: &mut Model<F>,
        rng: &mut ChaCha8Rng,
        par: Par,
        loss: &mut LossFn<'_, F>,
    ) -> Result<()> {
        model.train_blocks(&self.refs(), &self.x, rng, par, loss)
    }
}

/// The steps of a run over a neighbour sampler.
pub(super) struct BlockSteps<'a, F: Scalar> {
    pub(super) sampler: &'a NeighborSampler,
    pub(super) graph: &'a Graph,
    pub(super) x: &'a Features<F>,
    pub(super) labels: &'a [u32],
    pub(super) batch: Box<BlockBatch<F>>,
    pub(super) next: Box<BlockBatch<F>>,
    pub(super) seed: u64,
    pub(super) stepper: super::stepper::Stepper<'a, F>,
    /// Evaluation over batches: the sampler of the validation and test nodes, and which nodes
    /// are which.
    pub(super) eval: Option<Box<EvalBlocks>>,
}

/// Evaluation over batches of blocks: the sampler of the validation and test nodes, and
/// which nodes are validation's and test's.
pub(super) struct EvalBlocks {
    pub(super) sampler: NeighborSampler,
    pub(super) valid: Vec<bool>,
    pub(super) test: Vec<bool>,
}

impl<F: Scalar> BlockSteps<'_, F> {
    /// The training steps of `epoch` (as `Steps::epoch`).
    ///
    /// # Errors
    /// As [`BlockBatch::fill`] and [`Model::train_blocks`]; [`Error::NonFiniteLoss`].
    pub(super) fn epoch(
        &mut self,
        model: &mut Model<F>,
        opt: &mut dyn Optimizer<F>,
        (epoch, drop_rng): (usize, &mut ChaCha8Rng),
        par: Par,
    ) -> Result<(f64, f64, f64)> {
        if self.eval.is_none() {
            // (Evaluation on the whole graph: its activations are not held while training
            // runs, nor training's while it runs, see `eval`.)
            model.release_eval();
        }
        // (Planned for the largest batch, again after evaluation freed it.)
        let reserved = model.reserve_blocks(&self.sampler.level_caps(), self.x, false);
        self.stepper.agree(reserved)?;
        let (sampler, graph, x, labels, seed) =
            (self.sampler, self.graph, self.x, self.labels, self.seed);
        let fill = |b: &mut BlockBatch<F>, index: usize| {
            b.fill(sampler, graph, x, labels, seed, epoch, index)
        };
        let slots = (&mut *self.batch, &mut *self.next);
        let at = (epoch, drop_rng);
        self.stepper
            .epoch(slots, &fill, sampler.batches(), model, opt, at, par)
    }

    /// Validation's and test's (loss, accuracy) over batches of the validation and test
    /// nodes drawn as training draws them (epoch 0 of the run's seed), when the run evaluates
    /// on batches; `None` otherwise.
    ///
    /// # Errors
    /// As [`BlockBatch::fill`] and [`Model::eval_blocks`].
    pub(super) fn eval(
        &mut self,
        model: &mut Model<F>,
        par: Par,
    ) -> Result<Option<[(f64, f64); 2]>> {
        let Some(ev) = &self.eval else {
            // Evaluation on the whole graph comes next: what only training holds (the two
            // batches' rows of X, training's workspace) is freed rather than held beside the
            // whole graph's activations, and planned again at the next epoch's first batch.
            for b in [&mut self.batch, &mut self.next] {
                **b = BlockBatch::new(self.x.n_cols(), 0);
            }
            model.release_training();
            return Ok(None);
        };
        let EvalBlocks {
            sampler,
            valid,
            test,
        } = &**ev;
        // (Evaluation drops nothing: its first block reads the whole features in place.)
        model.reserve_blocks(&sampler.level_caps_over_whole(), self.x, true)?;
        let mut acc = [[0.0f64; 3]; 2];
        for index in 0..sampler.batches() {
            let b = &mut self.batch;
            b.fill_over_whole(sampler, self.graph, self.labels, self.seed, index)?;
            let seeds = b.blocks.seeds();
            let rows = |member: &[bool]| {
                let rows = (0..seeds.len() as u32).filter(|&r| member[seeds[r as usize] as usize]);
                Mask::try_from_indices(rows.collect(), seeds.len())
            };
            let masks = [rows(valid)?, rows(test)?];
            let refs = b.refs();
            model.eval_blocks(&refs, self.x, par, &mut |logits, sums| {
                for (k, mask) in masks.iter().enumerate() {
                    if mask.is_empty() {
                        continue;
                    }
                    let m = mask.len() as f64;
                    let loss = crate::nn::loss::softmax_cross_entropy_across(
                        logits, &b.labels, mask, None, &sums,
                    );
                    acc[k][0] += loss.to_f64_lossless() * m;
                    acc[k][1] += (accuracy_across(logits, &b.labels, mask, &sums) * m).round();
                    acc[k][2] += m;
                }
            })?;
        }
        let mean = |a: [f64; 3]| (a[0] / a[2].max(1.0), a[1] / a[2].max(1.0));
        Ok(Some([mean(acc[0]), mean(acc[1])]))
    }
}

/// The graph convolutions' orders of the model `cfg` describes as `batches` train it (`None`:
/// the cost model's, on the whole graph). Over stacks of blocks (neighbour sampling) an order
/// left to the cost model is aggregate-first, whose GEMMs run over a block's destinations
/// where transform-first's would run over its sources (far more rows: 137,000 against 45,000
/// in arxiv-like's first layer at fanouts 5,10,15; the whole graph's cost model does not see
/// the blocks); on sparse features (`sparse`) the first layer is transform-first, X·W a
/// sparse product, as a block has no sparse Â·X.
pub(crate) fn block_orders(
    cfg: &ModelConfig,
    batches: Option<&Batches<'_>>,
    sparse: bool,
) -> Option<Vec<crate::nn::Order>> {
    use crate::nn::Order;
    let blocks = batches.is_some_and(|b| b.sampler.blocks().is_some());
    (blocks && cfg.order == Order::Auto).then(|| {
        let mut o = vec![Order::AggregateFirst; cfg.n_layers.max(1)];
        if sparse {
            o[0] = Order::TransformFirst;
        }
        o
    })
}

/// [`build_model`] with the graph convolutions' orders given (`None`: the cost model's).
pub(crate) fn build_model_ordered<F: Scalar>(
    adj: &dyn Propagate<F>,
    x: &Features<F>,
    n_classes: usize,
    cfg: &ModelConfig,
    seed: u64,
    orders: Option<&[crate::nn::Order]>,
) -> Result<Model<F>> {
    let cfg = ModelConfig {
        in_dim: x.n_cols(),
        out_dim: n_classes,
        ..cfg.clone()
    };
    let mut init_rng = rng_stream(seed, 0);
    Ok(cfg.build(adj, x, orders, &mut init_rng)?)
}
