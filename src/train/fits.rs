//! What a mini-batch run holds, priced before it allocates: each run's training workspace
//! planned for the largest batch, evaluation's own (forward only, for the whole graph or the
//! largest batch), and the two batches held at once (the one training and the one built
//! ahead).

use super::run::model_params;
use crate::data::{memory, Features};
use crate::nn::Model;
use crate::Result;

/// The rows and entries a mini-batch run's memory depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchShape {
    /// Nodes of the whole graph.
    pub n: usize,
    /// Stored entries of the whole graph's Â (built or not).
    pub nnz: usize,
    /// The most nodes a batch can have.
    pub max_rows: usize,
    /// Evaluation on the whole graph (else over the batches).
    pub eval_full: bool,
    /// The most stored entries of a batch's rows, when known (a store's parts, counted):
    /// priced instead of the rows' share of the whole graph's.
    pub max_entries: Option<usize>,
    /// A stack of blocks a batch (neighbour sampling): the most rows of each level (level 0
    /// the features' rows, `max_rows`), the most entries of its blocks, and the most rows of
    /// each level of evaluation's batches; `None` for a batch's induced subgraph.
    pub blocks: Option<(Vec<usize>, usize, Vec<usize>)>,
}

/// Refuses, once its sampler is built and before training, `runs` models of `model`'s kind
/// trained at once on batches of `shape` when their memory would not fit in the memory
/// available: per run the parameters with their gradients, moments and best copy, training's
/// workspace for `shape.max_rows` rows, evaluation's own workspace (forward only) for the whole
/// graph or the largest batch, and two batches (their rows of `x`, and an Â and Âᵀ of at most
/// the batch's share of the whole graph's entries, as the densest rows could give). `model` is
/// one of them, built.
///
/// # Errors
/// [`crate::Error::TooLarge`].
pub fn check_batch_run_fits(
    model: &mut Model<f32>,
    shape: BatchShape,
    x: &Features<f32>,
    runs: usize,
) -> Result<()> {
    let (needed, what) = batch_run_bytes(model, shape, x, runs)?;
    memory::check(needed, || what)
}

/// What [`check_batch_run_fits`] prices: the bytes, and what they hold (for the refusal).
///
/// # Errors
/// A workspace that cannot be planned.
pub fn batch_run_bytes(
    model: &mut Model<f32>,
    shape: BatchShape,
    x: &Features<f32>,
    runs: usize,
) -> Result<(u64, String)> {
    let BatchShape {
        n,
        nnz,
        max_rows,
        eval_full,
        max_entries,
        blocks,
    } = shape;
    // (Priced under the options the run sets: Â varies from batch to batch, evaluation in a
    // workspace of its own.)
    let mut o = model.options();
    o.varying_graph = true;
    o.separate_eval = true;
    model.set_options(o);
    let params = model_params(model);
    let (train, eval_batch) = match &blocks {
        Some((caps, _, eval_caps)) => (
            model.plan_bytes_levels(caps, x, false)?,
            model.plan_bytes_levels(eval_caps, x, true)?,
        ),
        None => (
            model.workspace_bytes(max_rows, x)?,
            model.eval_workspace_bytes(max_rows, x)?,
        ),
    };
    let train = train as u64;
    let eval = if eval_full {
        model.eval_workspace_bytes(n, x)?
    } else {
        eval_batch
    } as u64;
    // A batch's Â: at most every entry of its rows; bounded by the whole graph's (and a
    // batch's rows of sparse X by their share of X's entries, as for Â).
    let share = |total: usize| -> u64 {
        let per_row = total.div_ceil(n.max(1)).max(1);
        memory::bytes(max_rows, per_row).min(total as u64 + max_rows as u64)
    };
    // (A stack of blocks: its entries, and a position a node of the graph.)
    let adj_entries = match &blocks {
        Some((_, entries, _)) => (*entries as u64).saturating_add(n as u64 / 2),
        None => match max_entries {
            // (Ã's rows: the stored entries and a self-loop a row.)
            Some(e) => (e as u64).saturating_add(max_rows as u64),
            None => share(nnz.saturating_add(n)),
        },
    };
    let x_bytes = match x.as_sparse() {
        Some(s) => share(s.x().nnz()).saturating_mul(2 * 8),
        None => memory::bytes(max_rows, 4 * x.n_cols()),
    };
    let batch = adj_entries
        .saturating_mul(2 * 8)
        .saturating_add(x_bytes)
        .saturating_add(memory::bytes(max_rows, 16));
    let per_run = params
        .saturating_mul(5 * 4)
        .saturating_add(train)
        .saturating_add(eval)
        .saturating_add(batch.saturating_mul(2));
    let needed = per_run
        .saturating_mul(runs.max(1) as u64)
        .saturating_sub(params.saturating_mul(4));
    let what = format!(
        "training {} model{} on batches of at most {max_rows} of {n} nodes × {} features: \
         training's workspace ({train} bytes a model), evaluation's ({eval}), two batches \
         ({batch} bytes each) and the parameters",
        runs.max(1),
        if runs > 1 { "s at once" } else { "" },
        x.n_cols()
    );
    Ok((needed, what))
}
