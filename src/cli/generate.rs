//! `sparse-gcn generate`: a synthetic citation-like graph in the OGB raw layout.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::json;

use sparse_gcn::data::synthetic::Preset;
use sparse_gcn::data::write::write_ogb;
use sparse_gcn::{par::thread_pool, Error, Result};

use super::progress_bar;

#[derive(clap::Args)]
#[command(allow_negative_numbers = true)]
pub(crate) struct GenerateArgs {
    /// cora-like, arxiv-like or products-like.
    #[arg(long, default_value = "cora-like")]
    preset: Preset,
    /// Generator seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Output folder: created, or empty (see --force).
    #[arg(long)]
    pub(crate) out: PathBuf,
    /// Write into a non-empty --out folder: its raw/ and split/ files are replaced, and any
    /// other split folder under split/ is removed (a dataset folder holds one generated
    /// dataset).
    #[arg(long)]
    pub(crate) force: bool,
    /// Worker threads (0: one per CPU; at most 1024).
    #[arg(long, default_value_t = 0, value_parser = super::args::threads)]
    threads: usize,
    /// Print one JSON object as the last line of stdout.
    #[arg(long)]
    json: bool,
}

/// A usage error (exit 2) unless `out` is missing, an empty folder, or `force` is given.
pub(crate) fn check_out(out: &Path, force: bool) -> std::result::Result<(), String> {
    if out.exists() && !out.is_dir() {
        return Err(format!("--out {}: is a file, not a folder", out.display()));
    }
    let non_empty = std::fs::read_dir(out).is_ok_and(|mut r| r.next().is_some());
    if non_empty && !force {
        return Err(format!(
            "--out {}: the folder is not empty; choose a new folder or add --force to replace \
             the dataset in it",
            out.display()
        ));
    }
    Ok(())
}

pub(crate) fn run(a: GenerateArgs) -> Result<()> {
    let preset = a.preset;
    if a.force {
        // Another generator's split folders would make the folder ambiguous to the loaders.
        let split = a.out.join("split");
        if split.is_dir() {
            std::fs::remove_dir_all(&split).map_err(|source| Error::Io {
                path: split.clone(),
                source,
            })?;
        }
    }
    let pool = thread_pool(a.threads)?;
    pool.install(|| {
        let bar = progress_bar(0, "{spinner} {msg} [{elapsed_precise}] {bar:30} {pos}/{len}");
        bar.set_message(format!("generating {preset}"));
        let t0 = Instant::now();
        let d = preset.generate(a.seed)?;
        let gen_s = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        write_ogb(&d, &a.out, &|stage, done, total| {
            bar.set_message(format!("writing {stage}"));
            bar.set_length(total);
            bar.set_position(done);
        })?;
        let write_s = t1.elapsed().as_secs_f64();
        bar.finish_and_clear();
        println!(
            "{}: {} nodes, {} edges, {} features, {} classes; generated in {:.2} s, written to {} in {:.2} s",
            d.name,
            d.graph.n_nodes(),
            d.graph.n_edges(),
            d.features.n_cols(),
            d.n_classes,
            gen_s,
            a.out.display(),
            write_s
        );
        if a.json {
            let j = json!({
                "dataset": d.name,
                "out": a.out.display().to_string(),
                "n_nodes": d.graph.n_nodes(),
                "n_edges": d.graph.n_edges(),
                "in_dim": d.features.n_cols(),
                "n_classes": d.n_classes,
                "generate_s": gen_s,
                "write_s": write_s,
            });
            println!("{j}");
        }
        Ok(())
    })
}
