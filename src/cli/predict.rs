//! `sparse-gcn predict`: a checkpoint's class probabilities for every node, in the input's
//! node order (whatever order training applied).

use std::fmt::Write as _;
use std::path::PathBuf;

use sparse_gcn::data::write::npy_f32;
use sparse_gcn::metrics::softmax_rows;
use sparse_gcn::train::checkpoint::write_file_atomic;
use sparse_gcn::{par::thread_pool, Par, Result};

use super::eval::{check_finite_output, load_model, Loaded};
use super::{args, DataArgs};

#[derive(clap::Args)]
#[command(allow_negative_numbers = true)]
pub(crate) struct PredictArgs {
    /// The checkpoint (safetensors) written by `train --save`.
    #[arg(long)]
    checkpoint: PathBuf,
    #[command(flatten)]
    data: DataArgs,
    /// Output: `.csv` (node, predicted class, one probability column per class, with a header
    /// line) or `.npy` (the N × classes probabilities, f32).
    #[arg(long, value_parser = args::CSV_OR_NPY)]
    out: PathBuf,
    /// Worker threads (0: one per CPU; at most 1024).
    #[arg(long, default_value_t = 0, value_parser = super::args::threads)]
    threads: usize,
}

pub(crate) fn run(a: PredictArgs) -> Result<()> {
    let pool = thread_pool(a.threads)?;
    pool.install(|| {
        let Loaded { p, mut model, .. } = load_model(&a.checkpoint, &a.data)?;
        let logits = model.predict(&p.adj, &p.data.features, Par::Rayon)?;
        let what = format!("the logits of {}", a.checkpoint.display());
        check_finite_output(&p, logits.view(), &what)?;
        let probs = softmax_rows(p.input_order(logits.view()).view());
        let bytes = if a
            .out
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("npy"))
        {
            npy_f32(probs.view())
        } else {
            let mut s = String::from("node,predicted");
            for c in 0..probs.ncols() {
                let _ = write!(s, ",p_{c}");
            }
            s.push('\n');
            for (node, row) in probs.rows().into_iter().enumerate() {
                let best = sparse_gcn::metrics::argmax(row.iter().copied());
                let _ = write!(s, "{node},{best}");
                for v in row {
                    let _ = write!(s, ",{v}");
                }
                s.push('\n');
            }
            s.into_bytes()
        };
        write_file_atomic(&a.out, &bytes)?;
        println!(
            "wrote the class probabilities of {} nodes ({} classes) to {}",
            probs.nrows(),
            probs.ncols(),
            a.out.display()
        );
        Ok(())
    })
}
