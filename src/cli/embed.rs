//! `sparse-gcn embed`: one layer's output for every node as an N × width `.npy`, in the input's
//! node order (whatever order training applied).

use std::path::PathBuf;

use sparse_gcn::data::write::npy_f32;
use sparse_gcn::train::checkpoint::write_file_atomic;
use sparse_gcn::{par::thread_pool, Error, Par, Result};

use super::eval::{check_finite_output, load_model, Loaded};
use super::{args, DataArgs};

#[derive(clap::Args)]
#[command(allow_negative_numbers = true)]
pub(crate) struct EmbedArgs {
    /// The checkpoint (safetensors) written by `train --save`.
    #[arg(long)]
    checkpoint: PathBuf,
    #[command(flatten)]
    data: DataArgs,
    /// Which layer's output (1 = after the first layer; the last is the logits when the model
    /// ends in a graph convolution).
    #[arg(long, value_parser = args::count)]
    layer: usize,
    /// Output `.npy` file: an N × width f32 array.
    #[arg(long, value_parser = args::NPY)]
    out: PathBuf,
    /// Worker threads (0: one per CPU; at most 1024).
    #[arg(long, default_value_t = 0, value_parser = super::args::threads)]
    threads: usize,
}

pub(crate) fn run(a: EmbedArgs) -> Result<()> {
    let pool = thread_pool(a.threads)?;
    pool.install(|| {
        let Loaded { p, mut model, .. } = load_model(&a.checkpoint, &a.data)?;
        let n_layers = model.n_representations();
        if a.layer > n_layers {
            return Err(Error::Dataset {
                path: a.checkpoint.clone(),
                msg: format!(
                    "--layer {}: the model has {n_layers} layer outputs (1 to {n_layers})",
                    a.layer
                ),
            });
        }
        let mut h = None;
        let mut bad = Ok(());
        let what = format!("layer {}'s output of {}", a.layer, a.checkpoint.display());
        model.visit_representations(&p.adj, &p.data.features, Par::Rayon, &mut |l, x| {
            if l + 1 == a.layer {
                bad = check_finite_output(&p, x, &what);
                h = Some(p.input_order(x));
            }
        })?;
        bad?;
        let h = h.unwrap_or_else(|| unreachable!("layer {} of {n_layers} visited", a.layer));
        write_file_atomic(&a.out, &npy_f32(h.view()))?;
        println!(
            "wrote layer {}'s output ({} × {}) to {}",
            a.layer,
            h.nrows(),
            h.ncols(),
            a.out.display()
        );
        Ok(())
    })
}
