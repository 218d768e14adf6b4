//! `sparse-gcn eval`: a checkpoint of any model on a dataset, prepared as training prepared it.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::json;

use sparse_gcn::metrics::accuracy;
use sparse_gcn::nn::loss::softmax_cross_entropy_loss;
use sparse_gcn::nn::Model;
use sparse_gcn::train::checkpoint::{self, Checkpoint};
use sparse_gcn::train::run::{check_inference_fits, Prepare, Prepared};
use sparse_gcn::{par::thread_pool, Error, Par, Result, Scalar};

use super::DataArgs;

#[derive(clap::Args)]
#[command(allow_negative_numbers = true)]
pub(crate) struct EvalArgs {
    /// The checkpoint (safetensors) written by `train --save`.
    #[arg(long)]
    pub(crate) checkpoint: PathBuf,
    #[command(flatten)]
    data: DataArgs,
    /// Worker threads (0: one per CPU; at most 1024).
    #[arg(long, default_value_t = 0, value_parser = super::args::threads)]
    threads: usize,
    /// Print one JSON object as the last line of stdout.
    #[arg(long)]
    json: bool,
}

/// A checkpoint with the data it was trained on, prepared as training prepared it, and its
/// model built.
pub(crate) struct Loaded {
    pub(crate) ck: Checkpoint,
    pub(crate) p: Prepared,
    pub(crate) model: Model<f32>,
}

/// Loads `ck_path` and the data (`data`, or without `--data` the source the checkpoint
/// records), and builds the model.
pub(crate) fn load_model(ck_path: &Path, data: &DataArgs) -> Result<Loaded> {
    let ck = checkpoint::load(ck_path)?;
    let mut data_args = data.for_checkpoint(ck_path, &ck.extra)?;
    // The options given, with the recorded ones: each must apply to the source.
    if let Err(msg) = data_args.check_applicable() {
        super::usage_error(msg);
    }
    data_args.directed |= ck.extra.get("directed").is_some_and(|v| v == "true");
    // The node order, feature normalisation and Â of training: each SpMM row sums its
    // neighbours in the node order, so only the same order reproduces the trained model's
    // logits (and accuracies) bit for bit.
    let prepare = Prepare::from_extra(&ck.extra)?;
    let data = data_args.load()?;
    // The data as loaded is the data of training (its content hashes), and its shapes fit the
    // model, before anything is built.
    ck.check_data(&data)?;
    let p = Prepared::new(data, &prepare)?;
    let mut model = ck.build(&p.adj, &p.data.features)?;
    // Inference only: passes in evaluation's own workspace (layer-wise, no backward).
    let mut opts = model.options();
    opts.separate_eval = true;
    model.set_options(opts);
    check_inference_fits(&mut model, p.n_nodes, &p.data.features)?;
    Ok(Loaded { ck, p, model })
}

/// An [`Error::NonFiniteOutput`] for the first NaN or infinite value of `a` (`what` names the
/// output; the row is a node in the prepared order, reported in the input's order).
pub(crate) fn check_finite_output(
    p: &Prepared,
    a: ndarray::ArrayView2<'_, f32>,
    what: &str,
) -> Result<()> {
    let Some((k, &v)) = a.iter().enumerate().find(|(_, v)| !v.is_finite()) else {
        return Ok(());
    };
    let cols = a.ncols().max(1);
    let (row, col) = (k / cols, k % cols);
    let node = match &p.perm {
        Some(perm) => perm.new_to_old().get(row).map_or(row, |&o| o as usize),
        None => row,
    };
    Err(Error::NonFiniteOutput {
        what: format!(
            "{what} on {} (node {node}, column {col}, counting from 0)",
            p.data.name
        ),
        value: f64::from(v),
    })
}

pub(crate) fn run(a: EvalArgs) -> Result<()> {
    let pool = thread_pool(a.threads)?;
    pool.install(|| {
        let Loaded { ck, p, mut model } = load_model(&a.checkpoint, &a.data)?;
        let d = &p.data;
        d.check_trainable()?;
        let t0 = Instant::now();
        let logits = model.predict(&p.adj, &d.features, Par::Rayon)?;
        let infer_ms = t0.elapsed().as_secs_f64() * 1e3;
        let what = format!("the logits of {}", a.checkpoint.display());
        check_finite_output(&p, logits.view(), &what)?;
        let acc = |m| accuracy(logits.view(), &d.labels, m);
        let (train_acc, val_acc, test_acc) =
            (acc(&d.split.train), acc(&d.split.valid), acc(&d.split.test));
        // As training computes it: equal bit for bit to `train --json`'s `test_losses` entry of
        // the saved seed when the logits are.
        let test_loss =
            softmax_cross_entropy_loss(logits.view(), &d.labels, &d.split.test).to_f64_lossless();
        if !test_loss.is_finite() {
            return Err(Error::NonFiniteOutput {
                what: format!(
                    "the test loss of {} on {} (from finite logits)",
                    a.checkpoint.display(),
                    d.name
                ),
                value: test_loss,
            });
        }
        println!(
            "checkpoint {} ({}) on {}: train {:.4}, val {:.4}, test {:.4} ({:.2} ms inference)",
            a.checkpoint.display(),
            ck.model_name(),
            d.name,
            train_acc,
            val_acc,
            test_acc,
            infer_ms
        );
        if a.json {
            let j = json!({
                "checkpoint": a.checkpoint.display().to_string(),
                "model": ck.config().map_or("stack", |c| c.arch.name()),
                "dataset": d.name,
                "n_nodes": p.n_nodes,
                "nnz": p.adj.nnz(),
                "train_acc": train_acc,
                "val_acc": val_acc,
                "test_acc": test_acc,
                "test_loss": test_loss,
                "infer_ms": infer_ms,
                "reorder": p.prepare.reorder.to_string(),
                "extra": ck.extra,
            });
            println!("{j}");
        }
        Ok(())
    })
}
