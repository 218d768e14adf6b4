//! `sparse-gcn propagate`: the rows of Â^K X (SGC) or [X, ÂX, …, Â^K X] (SIGN) that training,
//! validation and test need, computed from a store out of core within `--memory-limit`, and
//! written as a store of those rows (no edges) to train a linear model or an MLP on.

use std::path::PathBuf;
use std::time::Instant;

use serde_json::json;

use sparse_gcn::data::store::{
    propagate, propagate_in_memory, write_store, FeatureDtype, KeepRows, PropagateOptions, Store,
    HEADER,
};
use sparse_gcn::data::{Dataset, Mask, Split};
use sparse_gcn::graph::{Direction, Graph, Norm};
use sparse_gcn::{par::thread_pool, Error, Result};

use super::progress_bar;
use super::train::{NormArg, RowNormArg};

#[derive(Clone, Copy, clap::ValueEnum)]
pub(crate) enum RowsArg {
    /// The training, validation and test nodes.
    Split,
    /// Every node.
    All,
}

#[derive(clap::Args)]
pub(crate) struct PropagateArgs {
    /// A store (`sparse-gcn convert` or `generate --format store`), read out of core.
    #[arg(long)]
    data: PathBuf,
    /// Output folder: a new one, or an empty one.
    #[arg(long)]
    out: PathBuf,
    /// Hops K (SGC's K), at most 1024.
    #[arg(long, default_value_t = 2, value_parser = super::args::steps)]
    k: usize,
    /// Keep every hop, [X, ÂX, …, Â^K X] (SIGN, Frasca et al. 2020), not only Â^K X (SGC).
    #[arg(long)]
    sign: bool,
    /// Adjacency normalisation (as `train --norm`).
    #[arg(long, value_enum, default_value_t = NormArg::Sym)]
    norm: NormArg,
    /// Row-normalise the features first (as `train --row-norm`; `auto`: when every feature is
    /// ≥ 0).
    #[arg(long, value_enum, default_value_t = RowNormArg::Auto)]
    row_norm: RowNormArg,
    /// The rows kept: those of the split (training, validation, test) or all.
    #[arg(long, value_enum, default_value_t = RowsArg::Split)]
    rows: RowsArg,
    /// The memory the propagation may use, a size with a unit (`64MiB`, `12GiB`): X is
    /// propagated in column tiles that fit [default: three quarters of the machine's memory].
    #[arg(long, value_parser = super::args::memory_limit)]
    memory_limit: Option<u64>,
    /// Read the store whole and propagate in memory (the path training's SGC takes): the
    /// reference the out-of-core path gives the same bits as.
    #[arg(long)]
    in_memory: bool,
    /// Worker threads (0: one per CPU; at most 1024).
    #[arg(long, default_value_t = 0, value_parser = super::args::threads)]
    threads: usize,
    /// Print one JSON object as the last line of stdout.
    #[arg(long)]
    json: bool,
}

impl PropagateArgs {
    /// Usage errors (exit 2) before any file is read.
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        if !self.data.join(HEADER).is_file() {
            return Err(format!(
                "--data {}: not a store (no {HEADER}); write one with `sparse-gcn convert --data \
                 {} --out STORE`",
                self.data.display(),
                self.data.display()
            ));
        }
        if self.in_memory && self.memory_limit.is_some() {
            return Err("--memory-limit: does not apply with --in-memory".into());
        }
        super::check_new_folder("--out", &self.out)
    }
}

pub(crate) fn run(a: PropagateArgs) -> Result<()> {
    let pool = thread_pool(a.threads)?;
    pool.install(|| {
        let bar = progress_bar(0, "{spinner} {msg} [{elapsed_precise}]");
        let limit = match a.memory_limit {
            Some(l) => l,
            None => sparse_gcn::data::memory::total().map_or(u64::MAX, |t| t / 4 * 3),
        };
        let opts = PropagateOptions {
            k: a.k,
            every_hop: a.sign,
            norm: match a.norm {
                NormArg::Sym => Norm::Symmetric,
                NormArg::Row => Norm::Row,
            },
            row_normalize: match a.row_norm {
                RowNormArg::Auto => None,
                RowNormArg::On => Some(true),
                RowNormArg::Off => Some(false),
            },
            keep: match a.rows {
                RowsArg::Split => KeepRows::Split,
                RowsArg::All => KeepRows::All,
            },
            memory_limit: limit,
        };
        let t0 = Instant::now();
        let store = Store::open(&a.data)?;
        let h = store.header().clone();
        let p = if a.in_memory {
            bar.set_message("reading the store");
            let d = store.dataset(None)?;
            bar.set_message(format!("propagating {} hops in memory", a.k));
            propagate_in_memory(&d, &opts)?
        } else {
            let say = |m: String| bar.set_message(m);
            propagate(&store, &opts, &say)?
        };
        let propagate_s = t0.elapsed().as_secs_f64();
        bar.set_message("writing");
        let t1 = Instant::now();
        // The kept rows, their labels and split, without edges: arrays copied into a new store
        // only once their checksums match.
        for array in ["labels", "train", "valid", "test"] {
            store.verify_array(array)?;
        }
        let labels_all = store.u32s("labels")?;
        let labels: Vec<u32> = p.rows.iter().map(|&r| labels_all[r as usize]).collect();
        let local = |name: &str| -> Result<Mask> {
            let ids = store.u32s(name)?;
            let pos: Vec<u32> = ids
                .iter()
                .filter_map(|i| p.rows.binary_search(i).ok().map(|k| k as u32))
                .collect();
            Mask::try_from_indices(pos, p.rows.len()).map_err(|e| Error::Store {
                path: a.data.clone(),
                array: name.to_string(),
                msg: e.to_string(),
            })
        };
        let split = Split {
            name: h.split.clone(),
            train: local("train")?,
            valid: local("valid")?,
            test: local("test")?,
        };
        let what = if a.sign { "sign" } else { "sgc" };
        let name = format!("{}+{what}{}", h.name, a.k);
        let graph = Graph::try_from_edges(p.rows.len(), &[], Direction::Undirected)?;
        let width = p.x.ncols();
        let d = Dataset::try_new(
            name.clone(),
            graph,
            sparse_gcn::data::Features::dense(p.x),
            labels,
            h.n_classes as usize,
            split,
        )?;
        let s = write_store(&d, None, &a.out, FeatureDtype::F32)?;
        let write_s = t1.elapsed().as_secs_f64();
        bar.finish_and_clear();
        let mode = if a.in_memory {
            "in memory".to_string()
        } else {
            format!(
                "out of core in {} tile(s) of {} column(s), {} bytes planned within --memory-limit {limit}",
                p.tiles, p.tile_cols, p.planned_bytes
            )
        };
        println!(
            "{name}: {} of {} rows × {width} columns (K = {}, {}{}), propagated {mode} in \
             {propagate_s:.2} s; {} bytes written to {} in {write_s:.2} s. Train on it with \
             `sparse-gcn train --data {} --model {} --row-norm off` (its graph has no edges: Â = I)",
            p.rows.len(),
            h.n_nodes,
            a.k,
            if a.sign { "every hop" } else { "the last hop" },
            if p.row_normalized { ", X row-normalised" } else { "" },
            s.bytes,
            a.out.display(),
            a.out.display(),
            if a.sign { "gcn" } else { "sgc --k 1" },
        );
        if a.json {
            let j = json!({
                "dataset": h.name,
                "out": a.out.display().to_string(),
                "n_nodes": h.n_nodes,
                "rows": d.graph.n_nodes(),
                "columns": width,
                "k": a.k,
                "sign": a.sign,
                "row_normalized": p.row_normalized,
                "in_memory": a.in_memory,
                "memory_limit": (!a.in_memory).then_some(limit),
                "tiles": p.tiles,
                "tile_cols": p.tile_cols,
                "planned_bytes": p.planned_bytes,
                "propagate_s": propagate_s,
                "write_s": write_s,
                "bytes": s.bytes,
            });
            println!("{j}");
        }
        Ok(())
    })
}
