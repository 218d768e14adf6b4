//! `sparse-gcn generate`: a synthetic citation-like graph in the OGB raw layout.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::json;

use sparse_gcn::data::store::FeatureDtype;
use sparse_gcn::data::synthetic::{FeatureKind, NodeIds, Preset};
use sparse_gcn::data::write::write_ogb;
use sparse_gcn::order::Reorder;
use sparse_gcn::{par::thread_pool, Error, Result};

use super::progress_bar;

#[derive(clap::Args)]
#[command(allow_negative_numbers = true)]
pub(crate) struct GenerateArgs {
    /// cora-like, arxiv-like, products-like or papers100m-like.
    #[arg(long, default_value = "cora-like")]
    preset: Preset,
    /// A smaller graph of the preset's shape: this fraction of its nodes, edges and split, in
    /// (0, 1].
    #[arg(long, default_value_t = 1.0, value_parser = scale)]
    scale: f64,
    /// Generator seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// How the nodes are numbered: `shuffled` (a seeded random permutation) or `topics`
    /// (class by class, topic by topic: contiguous ids hold whole topics, as a partitioner's
    /// order leaves them, so that Cluster-GCN's parts are ranges of rows).
    #[arg(long, default_value = "shuffled")]
    ids: Ids,
    /// Output folder: created, or empty (see --force).
    #[arg(long)]
    pub(crate) out: PathBuf,
    /// Write into a non-empty --out folder: its raw/ and split/ files are replaced, and any
    /// other split folder under split/ is removed (a dataset folder holds one generated
    /// dataset).
    #[arg(long)]
    pub(crate) force: bool,
    /// What to write: `ogb` (the OGB raw layout, text that other tools read) or `store` (the
    /// binary store `convert` writes, which `--data` opens without parsing).
    #[arg(long, default_value = "ogb")]
    format: OutFormat,
    /// With `--format store`: how it holds feature values (as `convert --feature-dtype`)
    /// [default: f16 for papers100m-like, f32 otherwise].
    #[arg(long)]
    feature_dtype: Option<FeatureDtype>,
    /// With `--format store`: the node order it is stored in (as `convert --reorder`) [default:
    /// auto; none for papers100m-like]. With `none`, a preset with dense features is written
    /// out of core (bounded memory, the same store as in memory).
    #[arg(long)]
    reorder: Option<Reorder>,
    /// Worker threads (0: one per CPU; at most 1024).
    #[arg(long, default_value_t = 0, value_parser = super::args::threads)]
    threads: usize,
    /// Print one JSON object as the last line of stdout.
    #[arg(long)]
    json: bool,
}

/// `--ids`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Ids {
    /// A seeded random permutation.
    Shuffled,
    /// Class by class, topic by topic.
    Topics,
}

/// What `generate` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum OutFormat {
    /// The OGB raw layout (`raw/*.csv.gz`, `split/`).
    Ogb,
    /// The binary store (`sparse_gcn::data::store`).
    Store,
}

/// `--scale`: a fraction in (0, 1].
fn scale(s: &str) -> std::result::Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 1.0 => Ok(v),
        _ => Err("a fraction in (0, 1] of the preset's nodes and edges".into()),
    }
}

impl GenerateArgs {
    /// Usage errors (exit 2) before anything is generated: the output folder, and the store's
    /// options without `--format store` (or `--force` with it).
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        if self.format == OutFormat::Ogb {
            let why = "only with --format store";
            if self.feature_dtype.is_some() {
                return Err(format!("--feature-dtype: {why}"));
            }
            if self.reorder.is_some() {
                return Err(format!("--reorder: {why}"));
            }
            return check_out(&self.out, self.force);
        }
        if self.force {
            return Err(
                "--force: a store is written to a new or empty folder, never over \
                        another dataset (--format store)"
                    .into(),
            );
        }
        if self.preset == Preset::Papers100mLike && self.reorder.is_some_and(|r| r != Reorder::None)
        {
            return Err(
                "--reorder: papers100m-like is written out of core in the order it is \
                 generated (--reorder none)"
                    .into(),
            );
        }
        check_out(&self.out, false)
    }
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
        let bar = progress_bar(
            0,
            "{spinner} {msg} [{elapsed_precise}] {bar:30} {pos}/{len}",
        );
        bar.set_message(format!("generating {preset}"));
        let mut params = preset.params_scaled(a.scale)?;
        let mut name = preset.dataset_name(a.scale, a.seed);
        if a.ids == Ids::Topics {
            params.ids = NodeIds::Topics;
            name.push_str("-topic-ids");
        }
        let papers = preset == Preset::Papers100mLike;
        let reorder = a
            .reorder
            .unwrap_or(if papers { Reorder::None } else { Reorder::Auto });
        let dtype = a.feature_dtype.unwrap_or(if papers {
            FeatureDtype::F16
        } else {
            FeatureDtype::F32
        });
        let dense = matches!(params.features, FeatureKind::Dense { .. });
        let t0 = Instant::now();
        if a.format == OutFormat::Store && reorder == Reorder::None && dense {
            // Out of core: the store is written as the graph is drawn.
            let say = |m: String| bar.set_message(m);
            let s = params.write_store(a.seed, &name, &a.out, dtype, &say)?;
            let gen_s = t0.elapsed().as_secs_f64();
            bar.finish_and_clear();
            let h = &s.header;
            let n_edges = h.arrays["indices"].len / 2;
            return report(
                &a,
                Shape {
                    name: &h.name,
                    n_nodes: h.n_nodes as usize,
                    n_edges: n_edges as usize,
                    in_dim: h.n_features as usize,
                    n_classes: h.n_classes as usize,
                },
                gen_s,
                None,
                Some(s.bytes),
            );
        }
        let mut d = params.generate(a.seed)?;
        d.name = name;
        let gen_s = t0.elapsed().as_secs_f64();
        let (name, n_nodes, n_edges, in_dim, n_classes) = (
            d.name.clone(),
            d.graph.n_nodes(),
            d.graph.n_edges(),
            d.features.n_cols(),
            d.n_classes,
        );
        let t1 = Instant::now();
        match a.format {
            OutFormat::Ogb => write_ogb(&d, &a.out, &|stage, done, total| {
                bar.set_message(format!("writing {stage}"));
                bar.set_length(total);
                bar.set_position(done);
            })?,
            OutFormat::Store => {
                bar.set_message(format!("writing {}", a.out.display()));
                super::convert::write_ordered(d, reorder, &a.out, dtype)?;
            }
        }
        let write_s = t1.elapsed().as_secs_f64();
        bar.finish_and_clear();
        report(
            &a,
            Shape {
                name: &name,
                n_nodes,
                n_edges,
                in_dim,
                n_classes,
            },
            gen_s,
            Some(write_s),
            None,
        )
    })
}

/// What `generate` made.
struct Shape<'a> {
    name: &'a str,
    n_nodes: usize,
    n_edges: usize,
    in_dim: usize,
    n_classes: usize,
}

/// Prints what was generated: `write_s` when the data was written after it was generated,
/// `bytes` for a store written out of core (`generate_s` then covers both).
fn report(
    a: &GenerateArgs,
    d: Shape<'_>,
    gen_s: f64,
    write_s: Option<f64>,
    bytes: Option<u64>,
) -> Result<()> {
    let Shape {
        name,
        n_nodes,
        n_edges,
        in_dim,
        n_classes,
    } = d;
    match write_s {
        Some(w) => println!(
            "{name}: {n_nodes} nodes, {n_edges} edges, {in_dim} features, {n_classes} classes; \
             generated in {gen_s:.2} s, written to {} in {w:.2} s",
            a.out.display(),
        ),
        None => println!(
            "{name}: {n_nodes} nodes, {n_edges} edges, {in_dim} features, {n_classes} classes; \
             generated and written out of core to {} ({} bytes) in {gen_s:.2} s",
            a.out.display(),
            bytes.unwrap_or(0),
        ),
    }
    if a.json {
        let j = json!({
            "dataset": name,
            "out": a.out.display().to_string(),
            "format": if a.format == OutFormat::Store { "store" } else { "ogb" },
            "out_of_core": write_s.is_none(),
            "scale": a.scale,
            "ids": if a.ids == Ids::Topics { "topics" } else { "shuffled" },
            "n_nodes": n_nodes,
            "n_edges": n_edges,
            "in_dim": in_dim,
            "n_classes": n_classes,
            "generate_s": gen_s,
            "write_s": write_s,
            "bytes": bytes,
        });
        println!("{j}");
    }
    Ok(())
}
