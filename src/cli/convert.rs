//! `sparse-gcn convert`: any dataset `--data` reads, or a preset, as a binary store.

use std::path::PathBuf;
use std::time::Instant;

use serde_json::json;

use sparse_gcn::data::store::{write_store, FeatureDtype, OrderInfo, StoreSummary, StoredOrder};
use sparse_gcn::data::Dataset;
use sparse_gcn::order::{reorder_dataset, Reorder};
use sparse_gcn::{par::thread_pool, Result};

use super::{progress_bar, DataArgs};

#[derive(clap::Args)]
pub(crate) struct ConvertArgs {
    #[command(flatten)]
    data: DataArgs,
    /// Output folder: a new one, or an empty one (a store is never written over other files).
    #[arg(long)]
    out: PathBuf,
    /// How the store holds feature values: f32 (as read, the same bits when read back) or f16
    /// (half the bytes, rounded to nearest).
    #[arg(long, default_value = "f32")]
    feature_dtype: FeatureDtype,
    /// Store the nodes in this order (as `train --reorder`; default auto: the community order
    /// where it pays): `train --data DIR` with the same `--reorder` (its default, auto) then
    /// starts without reordering, with the same bits as from the source. `info`, `eval`,
    /// `predict`, `embed` and the Python package read it in the input's order.
    #[arg(long, default_value = "auto")]
    reorder: Reorder,
    /// Worker threads for loading (0: one per CPU; at most 1024).
    #[arg(long, default_value_t = 0, value_parser = super::args::threads)]
    threads: usize,
    /// Print one JSON object as the last line of stdout.
    #[arg(long)]
    json: bool,
}

impl ConvertArgs {
    /// Usage errors (exit 2) before any file is read: data options that do not apply, an
    /// `--out` that exists and is not an empty folder, or that is `--data` itself.
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        self.data.check_applicable()?;
        super::check_new_folder("--out", &self.out)
    }
}

pub(crate) fn run(a: ConvertArgs) -> Result<()> {
    let pool = thread_pool(a.threads)?;
    pool.install(|| {
        let bar = progress_bar(0, "{spinner} {msg} [{elapsed_precise}]");
        bar.set_message("reading the data");
        let t0 = Instant::now();
        let d = a.data.load()?;
        let load_s = t0.elapsed().as_secs_f64();
        bar.set_message(format!("ordering the nodes ({}) and writing", a.reorder));
        let (n_nnz, n_edges) = (d.graph.nnz(), d.graph.n_edges());
        let w = write_ordered(d, a.reorder, &a.out, a.feature_dtype)?;
        let (s, applied, reorder_s, write_s) = (w.summary, w.applied, w.reorder_s, w.write_s);
        bar.finish_and_clear();
        let h = &s.header;
        let dtype = match a.feature_dtype {
            FeatureDtype::F32 => "f32",
            FeatureDtype::F16 => "f16",
        };
        let layout = if h.sparse_features { "sparse" } else { "dense" };
        println!(
            "{}: {} nodes, {} stored adjacency entries, {} features ({layout}, {dtype}), {} \
             classes, split {:?}; read in {load_s:.2} s, nodes ordered ({} → {applied}) in \
             {reorder_s:.2} s, {} bytes written to {} in {write_s:.2} s",
            h.name,
            h.n_nodes,
            n_nnz,
            h.n_features,
            h.n_classes,
            h.split,
            a.reorder,
            s.bytes,
            a.out.display(),
        );
        if a.json {
            let j = json!({
                "dataset": h.name,
                "out": a.out.display().to_string(),
                "n_nodes": h.n_nodes,
                "nnz": n_nnz,
                "n_edges": n_edges,
                "in_dim": h.n_features,
                "n_classes": h.n_classes,
                "feature_dtype": dtype,
                "sparse_features": h.sparse_features,
                "bytes": s.bytes,
                "reorder": a.reorder.to_string(),
                "reorder_applied": applied.to_string(),
                "load_s": load_s,
                "reorder_s": reorder_s,
                "write_s": write_s,
            });
            println!("{j}");
        }
        Ok(())
    })
}

/// What [`write_ordered`] did.
pub(crate) struct Written {
    pub(crate) summary: StoreSummary,
    pub(crate) applied: Reorder,
    pub(crate) reorder_s: f64,
    pub(crate) write_s: f64,
}

/// `d` in the node order `reorder` gives (as training would order it), written as a store with
/// that order (`convert`, `generate --format store`).
pub(crate) fn write_ordered(
    d: Dataset,
    reorder: Reorder,
    out: &std::path::Path,
    dtype: FeatureDtype,
) -> Result<Written> {
    let t = Instant::now();
    let (d, perm, applied) = reorder_dataset(d, reorder, None)?;
    let reorder_s = t.elapsed().as_secs_f64();
    let order = perm.map(|perm| StoredOrder {
        info: OrderInfo {
            asked: reorder.to_string(),
            applied: applied.to_string(),
        },
        perm,
    });
    let t = Instant::now();
    let summary = write_store(&d, order.as_ref(), out, dtype)?;
    Ok(Written {
        summary,
        applied,
        reorder_s,
        write_s: t.elapsed().as_secs_f64(),
    })
}
