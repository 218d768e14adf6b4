//! Cluster-GCN on a graph larger than memory: its batches read from a store written in a
//! partition order (the parts ranges of its rows, [`Clusters::Ranges`]), evaluated over the
//! batches, holding only the labels, the split, the model and two batches
//! ([`StoreRows`], [`BatchSource::from_store`](crate::sample::BatchSource::from_store)).

use ndarray::Array2;

use super::fits::{batch_run_bytes, BatchShape};
use super::run::{Prepare, Watch};
use super::summary::Summary;
use super::TrainData;
use super::{rng_stream, train_model, BatchGraph, Batches, FitOptions, RunResult, TrainConfig};
use crate::data::memory;
use crate::data::store::StoreRows;
use crate::graph::NormAdj;
use crate::input::Features;
use crate::nn::{Model, ModelConfig};
use crate::order::Reorder;
use crate::sample::{BatchConfig, ClusterSampler, Clusters, NodeSampler};
use crate::{ConfigError, Error, Result};

/// The order the store holds its nodes in, as asked and applied ([`Reorder::None`] for the
/// input's).
///
/// # Errors
/// [`Error::Store`] for an order name that is not one.
fn stored_order(rows: &StoreRows) -> Result<(Reorder, Reorder)> {
    let Some(info) = &rows.store().header().order else {
        return Ok((Reorder::None, Reorder::None));
    };
    let parse = |name: &str| -> Result<Reorder> {
        name.parse().map_err(|e| Error::Store {
            path: rows.store().dir().to_path_buf(),
            array: crate::data::store::HEADER.into(),
            msg: format!("order {name:?}: {e}"),
        })
    };
    Ok((parse(&info.asked)?, parse(&info.applied)?))
}

/// What a run on `rows` prepared by `prepare` trains on: the summary a run in memory reports
/// (the store's shape; Â's entries counted, not built; the node order the store's own).
///
/// # Errors
/// [`Error::Store`] for a stored order's name that is not one.
pub fn store_summary(rows: &StoreRows, prepare: &Prepare) -> Result<Summary> {
    let h = rows.store().header();
    let n = rows.n_nodes();
    let stored = h.arrays["indices"].len as usize;
    let split = rows.split();
    let (_, applied) = stored_order(rows)?;
    Ok(Summary {
        name: h.name.clone(),
        n_nodes: n,
        // (Undirected: each edge stored twice, each self-loop once.)
        n_edges: if h.directed {
            stored
        } else {
            let loops = (h.self_loops as usize).min(stored);
            (stored - loops) / 2 + loops
        },
        nnz: stored + n - (h.self_loops as usize).min(n),
        in_dim: rows.n_features(),
        sparse_features: false,
        n_classes: rows.n_classes(),
        split_name: split.name.clone(),
        split_sizes: [split.train.len(), split.valid.len(), split.test.len()],
        row_normalized: prepare.row_norm.applies(|| rows.non_negative()),
        prepare: Prepare {
            reorder: applied,
            ..*prepare
        },
        reorder_asked: prepare.reorder,
        reorder_s: 0.0,
        directed: h.directed,
    })
}

/// What the process holds besides what a run's plan counts (its code, thread stacks, the
/// allocator's slack).
const PROCESS_BYTES: u64 = 96 << 20;

/// Trains one model per seed of `seeds`, one after the other, on Cluster-GCN's batches read
/// from `rows` (`cfg.batch` a [`BatchConfig::Cluster`] of [`Clusters::Ranges`], evaluated over
/// its batches: `cfg.eval_batches`), reporting to `watch` and `on_done`: the same bits as the
/// same runs on the store's dataset in memory ([`Prepared::fit_seeds_watched`](
/// super::run::Prepared::fit_seeds_watched)), the model's orders chosen by the cost model for
/// the whole graph's shape. `prepare`'s normalisations apply (the store's order is kept:
/// `reorder` must name it as it was asked or applied, or, for a store in the input's order,
/// be `none` (or `auto`, which keeps it: in memory `auto` may reorder a large graph));
/// row normalisation `auto` asks whether every feature is ≥ 0, which opening the store
/// learnt). Features are read dense (in memory, the loader makes features of at most 10 %
/// non-zeros sparse, which rounds differently). The run is planned before it allocates (the
/// per-node arrays, the model's workspaces for the largest batch, two batches) and refused
/// when the plan passes the memory available or `memory_limit`.
///
/// # Errors
/// [`Error::Config`] for another sampler, other clusters, evaluation on the whole graph,
/// DropEdge, replicas, a node order to apply, or a λ that differs from `prepare`'s;
/// [`Error::TooLarge`] when the run would not fit in the memory available or in
/// `memory_limit`; the errors of
/// reading the store ([`Error::Store`], [`Error::Io`]) and of training.
#[allow(clippy::too_many_arguments)]
pub fn fit_store_seeds(
    rows: &StoreRows,
    prepare: &Prepare,
    cfg: &TrainConfig,
    seeds: &[u64],
    memory_limit: Option<u64>,
    watch: Watch<'_>,
    on_done: &(dyn Fn(&RunResult, &mut Model<f32>) + Sync),
) -> Result<Vec<RunResult>> {
    let unsupported = |what: &'static str| Err(Error::Config(ConfigError::Unsupported { what }));
    let BatchConfig::Cluster {
        parts,
        per_batch,
        clusters,
        diag_lambda,
    } = cfg.batch
    else {
        return unsupported(
            "training from a store out of core with a sampler other than Cluster-GCN's",
        );
    };
    if clusters != Clusters::Ranges {
        return unsupported(
            "Cluster-GCN out of core with parts other than ranges of the store's rows (the \
             store is read in its own order: write it in a partition order)",
        );
    }
    if !cfg.eval_batches {
        return unsupported(
            "evaluation on the whole graph out of core (evaluate over the batches)",
        );
    }
    if cfg.model.drop_edge > 0.0 || watch.replicas.is_some() {
        return unsupported("DropEdge or replicas in a run out of core");
    }
    // The store's order is kept: what a run in memory does when asked for the order the
    // store holds (by the name it was asked or applied as), or for none of a store in the
    // input's order. (`auto` of a store in the input's order keeps it too; in memory, `auto`
    // may reorder a graph of more than 65,536 nodes.)
    let (asked, applied) = stored_order(rows)?;
    let r = prepare.reorder;
    let kept = match rows.store().header().order {
        Some(_) => r == asked || r == applied,
        None => matches!(r, Reorder::None | Reorder::Auto),
    };
    if !kept {
        return unsupported(
            "--reorder other than the order the store holds out of core (the store is read \
             in its own order: name it, or none for a store in the input's order)",
        );
    }
    if diag_lambda != prepare.diag_lambda {
        return Err(Error::Config(ConfigError::OutOfRange {
            name: "diag_lambda",
            value: prepare.diag_lambda,
            rule: "the batches' λ (BatchConfig::Cluster's diag_lambda)",
        }));
    }
    let n = rows.n_nodes();
    let d = rows.n_features();
    let summary = store_summary(rows, prepare)?;
    // Beside the labels the store holds (4 bytes a node): the parts' node lists and their cut,
    // the training, validation and test flags, and each batch's node positions (two batches).
    let per_node = memory::bytes(n, 4 + 4 + 4 + 3 + 2 * 4);
    memory::check(per_node, || {
        format!("the parts and batch positions of {n} nodes read out of core")
    })?;
    let sampler = ClusterSampler::ranges(n, parts, per_batch)?.with_diag_lambda(diag_lambda)?;
    // Stand-ins of no rows for the whole Â and X: a store's run reads neither.
    let adj = NormAdj::<f32>::empty(prepare.norm);
    let x = Features::dense(Array2::<f32>::zeros((0, d)));
    let model_cfg = ModelConfig {
        in_dim: d,
        out_dim: rows.n_classes(),
        ..cfg.model.clone()
    };
    let build = |seed: u64| -> Result<Model<f32>> {
        Ok(model_cfg.build_shaped(&adj, &x, (n, summary.nnz), &mut rng_stream(seed, 0))?)
    };
    let mut probe = build(0)?;
    let shape = BatchShape {
        n,
        nnz: summary.nnz,
        max_rows: sampler.max_nodes(),
        eval_full: false,
        max_entries: Some(crate::sample::max_batch_entries(rows, &sampler)?),
        blocks: None,
    };
    let (run, what) = batch_run_bytes(&mut probe, shape, &x, 1)?;
    drop(probe);
    // The process itself (code, thread stacks, the allocator's slack), as propagation counts it.
    let needed = per_node.saturating_add(run).saturating_add(PROCESS_BYTES);
    let what = || format!("{what}; labels, parts and positions of {n} nodes ({per_node} bytes)");
    memory::check(needed, what)?;
    if let Some(limit) = memory_limit.filter(|&l| needed > l) {
        return Err(Error::TooLarge {
            what: what(),
            needed_bytes: needed,
            available_bytes: limit,
            budget: "--memory-limit".into(),
        });
    }
    let split = rows.split();
    let data = TrainData {
        adj: &adj,
        x: &x,
        labels: &[],
        n_classes: rows.n_classes(),
        split,
    };
    let opts = FitOptions {
        batches: Some(Batches {
            sampler: &sampler,
            graph: BatchGraph::Store {
                rows,
                row_normalize: summary.row_normalized,
            },
            norm: prepare.norm,
        }),
        eval_batches: true,
        on_epoch: watch.on_epoch,
        interrupt: watch.interrupt,
        ..FitOptions::default()
    };
    let mut runs = Vec::with_capacity(seeds.len());
    for &seed in seeds {
        let mut model = build(seed)?;
        let r = train_model(&mut model, &data, cfg, seed, &opts)?;
        on_done(&r, &mut model);
        runs.push(r);
    }
    Ok(runs)
}
