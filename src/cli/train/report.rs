//! What `train` prints: the JSON report, the stop rule in words, the history CSV.

use serde_json::json;

use sparse_gcn::sample::{BatchConfig, Clusters, SaintKind};
use sparse_gcn::train::run::Summary;
use sparse_gcn::train::{
    mean_std, median, EpochRecord, OptimizerKind, RunResult, StopRule, TrainConfig,
};

use super::TrainArgs;

/// The timings and parallelism of a run, for its JSON report.
pub(super) struct Times {
    pub(super) threads: usize,
    pub(super) concurrent: usize,
    pub(super) load_s: f64,
    pub(super) reorder_s: f64,
    pub(super) train_s: f64,
    pub(super) step_median: f64,
    /// Of `step_median`'s epochs, the median time building batches (0 for full batch).
    pub(super) sample_median: f64,
    pub(super) epoch_median: f64,
}

/// The JSON object of `train --json` (the last line of stdout), with `extra`'s keys (a run
/// across ranks) added.
pub(super) fn json_report(
    a: &TrainArgs,
    cfg: &TrainConfig,
    d: &Summary,
    runs: &[RunResult],
    t: &Times,
    extra: Option<serde_json::Map<String, serde_json::Value>>,
) -> serde_json::Value {
    let orders: Vec<&str> = runs
        .first()
        .map(|r| r.orders.iter().map(|o| o.name()).collect())
        .unwrap_or_default();
    let tests: Vec<f64> = runs.iter().map(|r| r.test_acc).collect();
    let vals: Vec<f64> = runs.iter().map(|r| r.val_acc).collect();
    let (tm, ts) = mean_std(&tests);
    let (vm, vs) = mean_std(&vals);
    let m = &cfg.model;
    let setting = |key: &str| {
        m.arch
            .settings()
            .into_iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    };
    let mut j = json!({
        "dataset": d.name,
        "model": m.arch.name(),
        "n_nodes": d.n_nodes,
        "n_edges": d.n_edges,
        "nnz": d.nnz,
        "in_dim": d.in_dim,
        "n_classes": d.n_classes,
        // Null where the model has no such part (sgc's layers and hidden width, …).
        "layers": m.arch.uses().layers.is_none().then_some(m.n_layers),
        "hidden": m.arch.uses().hidden.is_none().then_some(m.hidden_dim),
        "k": setting("k").map(|k| k as usize),
        "alpha": setting("alpha"),
        "lambda": setting("lambda"),
        "norm_layer": m.arch.uses().gcn_convs.then(|| m.norm.name()),
        "drop_edge": m.drop_edge,
        "checkpoint_every": m.checkpoint,
        "batch": batch_json(cfg.batch),
        "seeds": runs.len(),
        "threads": t.threads,
        "concurrent_runs": t.concurrent,
        "orders": orders,
        "test_acc_mean": tm,
        "test_acc_std": ts,
        "val_acc_mean": vm,
        "val_acc_std": vs,
        "test_accs": tests,
        "test_losses": runs.iter().map(|r| r.test_loss).collect::<Vec<_>>(),
        "epochs_run": runs.iter().map(|r| r.history.len()).collect::<Vec<_>>(),
        "stop": stop_json(cfg.stop),
        "stopped_early": runs.iter().map(|r| r.history.len() < cfg.epochs).collect::<Vec<_>>(),
        "kept_epoch": runs.iter().map(|r| r.best_epoch + 1).collect::<Vec<_>>(),
        "max_epochs": cfg.epochs,
        "epoch_ms_median": t.step_median,
        "epoch_with_eval_ms_median": t.epoch_median,
        "warmup_epochs": cfg.warmup,
        "row_norm": d.row_normalized,
        "load_s": t.load_s,
        "reorder": a.reorder.to_string(),
        "reorder_applied": d.prepare.reorder.to_string(),
        "reorder_s": t.reorder_s,
        "train_total_s": t.train_s,
        "peak_rss_bytes": crate::cli::peak_rss_bytes(),
    });
    // The hyperparameters in force (the recipe's, and the flags over it).
    let dropout = m.arch.uses().dropout.is_none();
    let optimizer = optimizer_name(cfg.optimizer);
    for (key, v) in [
        ("first_seed", json!(runs.first().map(|r| r.seed))),
        ("recipe", json!(a.recipe_name())),
        ("lr", json!(cfg.lr)),
        ("weight_decay", json!(cfg.weight_decay)),
        ("dropout", json!(dropout.then_some(m.dropout))),
        ("input_dropout", json!(dropout.then_some(m.input_dropout))),
        ("bias", json!(m.bias)),
        ("optimizer", json!(optimizer)),
        ("out_of_core", json!(a.out_of_core)),
    ] {
        j[key] = v;
    }
    if let Some(obj) = j.as_object_mut() {
        // Apart from the macro above, whose nesting is at its limit.
        obj.insert("sample_ms_median".into(), t.sample_median.into());
        obj.extend(batch_sizes_json(runs));
        obj.insert(
            "eval".into(),
            if cfg.eval_batches { "batch" } else { "full" }.into(),
        );
        obj.insert("batches_per_step".into(), cfg.batches_per_step.into());
        if let Some(e) = extra {
            obj.extend(e);
        }
    }
    j
}

/// The medians over every run's epochs after `warmup` of the train step, the batch building
/// and the whole epoch, in ms.
pub(super) fn medians(runs: &[RunResult], warmup: usize) -> [f64; 3] {
    let of = |f: fn(&EpochRecord) -> f64| {
        median(
            runs.iter()
                .flat_map(|r| r.history.iter().skip(warmup).map(f))
                .collect(),
        )
    };
    [of(|e| e.train_ms), of(|e| e.sample_ms), of(|e| e.epoch_ms)]
}

/// `1 seed`, `2 seeds`.
pub(crate) fn plural(n: usize, one: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// The progress line of an epoch of a run of at most `max_epochs`: its losses and accuracies,
/// its time (and sampling's), and the time the remaining epochs would take at its pace.
pub(super) fn epoch_line(seed: u64, r: &EpochRecord, max_epochs: usize) -> String {
    let left = max_epochs.saturating_sub(r.epoch + 1) as f64 * r.epoch_ms / 1e3;
    let sampling = if r.sample_ms > 0.0 {
        format!(" (sampling {:.0} ms)", r.sample_ms)
    } else {
        String::new()
    };
    format!(
        "seed {seed} epoch {}/{max_epochs}: train loss {:.4} acc {:.4}, val loss {:.4} acc {:.4}; \
         {:.0} ms{sampling}, at most {left:.0} s to go",
        r.epoch + 1,
        r.train_loss,
        r.train_acc,
        r.val_loss,
        r.val_acc,
        r.epoch_ms,
    )
}

/// A median time in ms, or why there is none (every epoch fell in the warm-up).
pub(super) fn ms_text(ms: f64, epochs: usize, warmup: usize) -> String {
    if ms.is_finite() {
        format!("{ms:.3} ms")
    } else {
        format!(
            "not timed (no epoch after the warm-up: {} run, --warmup {warmup})",
            plural(epochs, "epoch")
        )
    }
}

/// The batches as JSON: `{"kind": "full"}`, or Cluster-GCN's parts, parts a batch, batches an
/// epoch and how the graph was cut.
pub(super) fn batch_json(b: BatchConfig) -> serde_json::Value {
    match b {
        BatchConfig::Full => json!({ "kind": "full" }),
        BatchConfig::Neighbor {
            fanouts,
            batch_size,
        } => json!({
            "kind": "neighbor",
            "fanouts": fanouts.as_slice(),
            "batch_size": batch_size,
        }),
        BatchConfig::Cluster {
            parts,
            per_batch,
            clusters,
            diag_lambda,
        } => json!({
            "kind": "cluster",
            "parts": parts,
            "parts_per_batch": per_batch,
            "diag_lambda": diag_lambda,
            "batches_per_epoch": parts.div_ceil(per_batch),
            "clusters": match clusters {
                Clusters::Metis => "metis",
                Clusters::Community => "community",
                Clusters::Ranges => "ranges",
            },
        }),
        BatchConfig::Saint {
            kind,
            batch_size,
            batches,
            coverage,
        } => {
            let mut v = json!({
                "kind": match kind {
                    SaintKind::Node => "saint-node",
                    SaintKind::Edge => "saint-edge",
                    SaintKind::RandomWalk { .. } => "saint-rw",
                },
                "batch_size": batch_size,
                "saint_coverage": coverage,
            });
            if let SaintKind::RandomWalk { walk_length } = kind {
                v["walk_length"] = json!(walk_length);
            }
            if let Some(b) = batches {
                v["batches_per_epoch"] = json!(b);
            }
            v
        }
    }
}

/// The batches' sizes over every run: `batches_per_epoch`, `batch_nodes` and `batch_edges`
/// (`mean`, `max`); nulls for full batch.
fn batch_sizes_json(runs: &[RunResult]) -> serde_json::Map<String, serde_json::Value> {
    let stats: Vec<_> = runs.iter().filter_map(|r| r.batches).collect();
    let mut m = serde_json::Map::new();
    let Some(first) = stats.first() else {
        for key in ["batches_per_epoch", "batch_nodes", "batch_edges"] {
            m.insert(key.into(), serde_json::Value::Null);
        }
        return m;
    };
    let built: u64 = stats.iter().map(|s| s.built).sum();
    let mean = |sum: u64| sum as f64 / built.max(1) as f64;
    m.insert("batches_per_epoch".into(), first.batches_per_epoch.into());
    m.insert(
        "batch_nodes".into(),
        json!({
            "mean": mean(stats.iter().map(|s| s.nodes_sum).sum()),
            "max": stats.iter().map(|s| s.nodes_max).max(),
        }),
    );
    m.insert(
        "batch_edges".into(),
        json!({
            "mean": mean(stats.iter().map(|s| s.edges_sum).sum()),
            "max": stats.iter().map(|s| s.edges_max).max(),
        }),
    );
    m
}

/// The stop rule as JSON: `{"rule": "kipf", "window": 10}`, as the flags spell it.
pub(super) fn stop_json(rule: StopRule) -> serde_json::Value {
    match rule {
        StopRule::Never => json!({ "rule": "never" }),
        StopRule::Kipf { window } => json!({ "rule": "kipf", "window": window }),
        StopRule::Patience { patience } => json!({ "rule": "patience", "patience": patience }),
    }
}

/// `--optimizer`'s name.
fn optimizer_name(o: OptimizerKind) -> &'static str {
    match o {
        OptimizerKind::Adam => "adam",
        OptimizerKind::Sgd => "sgd",
    }
}

/// The hyperparameters in force, as one line: the model and its settings, the optimiser, the
/// epochs and stop rule, the recipe they came from (the flags override it).
pub(super) fn settings_text(a: &TrainArgs, cfg: &TrainConfig) -> String {
    let m = &cfg.model;
    let uses = m.arch.uses();
    let mut parts = vec![m.arch.name().to_string()];
    if uses.layers.is_none() {
        parts.push(format!("{} layers", m.n_layers));
    }
    if uses.hidden.is_none() {
        parts.push(format!("hidden {}", m.hidden_dim));
    }
    parts.extend(m.arch.settings().iter().map(|(k, v)| format!("{k} {v}")));
    if uses.dropout.is_none() {
        parts.push(format!("dropout {} (input {})", m.dropout, m.input_dropout));
    }
    let wd: Vec<String> = cfg.weight_decay.iter().map(|w| format!("{w}")).collect();
    let optimizer = optimizer_name(cfg.optimizer);
    // (Per parameter group when they differ: the stem, the hidden layers, the head, the norms.)
    let groups = ["stem", "hidden", "head", "norm"];
    let wd = match wd.len() {
        1 => wd.join(""),
        k => format!("{} ({})", wd.join("/"), groups[..k.min(4)].join("/")),
    };
    parts.push(format!("{optimizer} lr {} weight decay {wd}", cfg.lr));
    let stop = match cfg.stop {
        StopRule::Never => "never".to_string(),
        StopRule::Kipf { window } => format!("kipf (window {window})"),
        StopRule::Patience { patience } => format!("patience ({patience})"),
    };
    parts.push(format!("at most {} epochs, stop {stop}", cfg.epochs));
    format!(
        "settings  {} (--recipe {})",
        parts.join(", "),
        a.recipe_name()
    )
}

/// Which rule ended a run, after which epoch (1-based), and whose weights it kept.
pub(crate) fn stop_text(rule: StopRule, max_epochs: usize, r: &RunResult) -> String {
    let ran = r.history.len();
    let kept = r.best_epoch + 1;
    let early = ran < max_epochs;
    match rule {
        StopRule::Never => format!(
            "ran all {} (--stop never), kept the last",
            plural(ran, "epoch")
        ),
        StopRule::Kipf { window } if early => format!(
            "stopped by --stop kipf (window {window}) after epoch {ran} of {max_epochs}, kept \
             that epoch's weights"
        ),
        StopRule::Kipf { window } => format!(
            "ran all {} (--stop kipf, window {window}, did not fire), kept the last",
            plural(ran, "epoch")
        ),
        StopRule::Patience { patience } if early => format!(
            "stopped by --stop patience ({patience}) after epoch {ran} of {max_epochs}, kept \
             epoch {kept} (lowest validation loss)"
        ),
        StopRule::Patience { patience } => format!(
            "reached the epoch cap {max_epochs} (--stop patience {patience} not exhausted; \
             raise --epochs), kept epoch {kept} (lowest validation loss)"
        ),
    }
}

/// The per-epoch history of every run as CSV, epochs 1-based.
pub(super) fn history_csv(runs: &[RunResult]) -> String {
    let mut s =
        String::from("seed,epoch,train_loss,train_acc,val_loss,val_acc,train_ms,epoch_ms\n");
    for r in runs {
        for e in &r.history {
            s.push_str(&format!(
                "{},{},{},{},{},{},{:.4},{:.4}\n",
                r.seed,
                e.epoch + 1,
                e.train_loss,
                e.train_acc,
                e.val_loss,
                e.val_acc,
                e.train_ms,
                e.epoch_ms
            ));
        }
    }
    s
}
