//! Training deep models end to end: every architecture learns with its recipe, runs replay bit
//! for bit on any thread count (with DropEdge, BatchNorm and checkpointing on), per-layer
//! metrics are recorded, and bad configurations get typed errors.
//!
//! Ported to the one-stack API: the recipes are `train::recipe::depth_study` (a `TrainConfig`
//! whose `model` carries the architecture and the DropEdge rate), runs go through `fit_model`.
//! The learning test now covers every architecture (`Arch::all()`: SGC and APPNP too), not only
//! the deep variants.

use sparse_gcn::data::synthetic::CitationLike;
use sparse_gcn::data::Dataset;
use sparse_gcn::graph::{Norm, NormAdj};
use sparse_gcn::nn::{Arch, JkMode, ModelConfig, NormKind};
use sparse_gcn::train::recipe::depth_study;
use sparse_gcn::train::{
    fit_model, DropEdgeSource, FitOptions, RunResult, StopRule, TrainConfig, TrainData,
};
use sparse_gcn::{ConfigError, Error};

fn data() -> Dataset {
    let mut d = CitationLike {
        n_nodes: 500,
        ..Default::default()
    }
    .generate(4)
    .unwrap();
    d.features.row_normalize();
    d
}

/// Trains `cfg` (DropEdge at `cfg.model.drop_edge`, sampled from the dataset's graph) with
/// seed 3.
fn run(
    d: &Dataset,
    adj: &NormAdj<f32>,
    cfg: &TrainConfig,
    metrics_every: usize,
) -> Result<RunResult, Error> {
    let opts = FitOptions {
        drop_edge: (cfg.model.drop_edge > 0.0).then_some(DropEdgeSource {
            graph: &d.graph,
            norm: Norm::Symmetric,
        }),
        metrics_every,
        rank_sample: Some(64),
        ..FitOptions::default()
    };
    fit_model(&TrainData::of(adj, d), cfg, 3, &opts).map(|(r, _)| r)
}

#[test]
fn every_architecture_learns_with_its_recipe() {
    let d = data();
    let adj = NormAdj::<f32>::new(&d.graph, Norm::Symmetric);
    let chance = 1.0 / d.n_classes as f64;
    for arch in Arch::all() {
        let mut cfg = depth_study(arch, 4);
        cfg.epochs = 80;
        cfg.model.hidden_dim = 32;
        let res = run(&d, &adj, &cfg, 0).unwrap();
        assert!(
            res.test_acc > 2.5 * chance,
            "{arch}: test accuracy {} (chance {chance})",
            res.test_acc
        );
        assert!(res.history.iter().all(|h| h.train_loss.is_finite()));
    }
}

#[test]
fn deep_runs_replay_exactly_on_any_thread_count() {
    let d = data();
    let adj = NormAdj::<f32>::new(&d.graph, Norm::Symmetric);
    for (arch, checkpoint) in [
        (Arch::RESIDUAL, 2),
        (Arch::GCNII, 3),
        (Arch::Jk(JkMode::Attention), 0),
    ] {
        let mut cfg = depth_study(arch, 5);
        cfg.epochs = 12;
        cfg.model.hidden_dim = 16;
        cfg.model.checkpoint = checkpoint;
        cfg.model.norm = NormKind::Batch;
        cfg.model.drop_edge = 0.3;
        let results: Vec<RunResult> = [1, 2, 3]
            .iter()
            .map(|&t| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(t)
                    .build()
                    .unwrap()
                    .install(|| run(&d, &adj, &cfg, 4).unwrap())
            })
            .collect();
        for other in &results[1..] {
            let losses = |r: &RunResult| -> Vec<(u64, u64)> {
                r.history
                    .iter()
                    .map(|h| (h.train_loss.to_bits(), h.val_loss.to_bits()))
                    .collect()
            };
            assert_eq!(losses(other), losses(&results[0]), "{arch}");
            assert_eq!(other.test_acc, results[0].test_acc, "{arch}");
            assert_eq!(other.layer_metrics, results[0].layer_metrics, "{arch}");
        }
    }
}

#[test]
fn metrics_are_recorded_per_layer_and_plain_depth_smooths() {
    let d = data();
    let adj = NormAdj::<f32>::new(&d.graph, Norm::Symmetric);
    let mut cfg = depth_study(Arch::GCN, 8);
    cfg.epochs = 30;
    cfg.stop = StopRule::Never;
    assert_eq!(cfg.model.drop_edge, 0.0);
    let res = run(&d, &adj, &cfg, 10).unwrap();
    // Epochs 0, 10, 20 and the evaluated one (29), 8 representations each.
    let epochs: Vec<usize> = res.layer_metrics.iter().map(|m| m.epoch).collect();
    assert_eq!(res.layer_metrics.len(), 4 * 8, "{epochs:?}");
    let last: Vec<_> = res
        .layer_metrics
        .iter()
        .filter(|m| m.epoch == res.best_epoch)
        .collect();
    assert_eq!(last.len(), 8);
    assert!(last.iter().all(|m| m.metrics.rank.is_some()));
    // Eight propagations by Â: the deepest hidden layer is far smoother than the first.
    let e1 = last[0].metrics.dirichlet;
    let e7 = last[6].metrics.dirichlet;
    assert!(e7 < e1, "Dirichlet energy layer 1 {e1}, layer 7 {e7}");
}

#[test]
fn bad_deep_configurations_get_typed_errors() {
    let d = data();
    let adj = NormAdj::<f32>::new(&d.graph, Norm::Symmetric);
    let r = depth_study(Arch::GCNII, 2);
    let with_model = |model: ModelConfig| TrainConfig { model, ..r.clone() };
    let bad_alpha = with_model(ModelConfig {
        arch: Arch::Gcnii(sparse_gcn::nn::gcnii::GcniiConfig {
            alpha: 1.5,
            lambda: 0.5,
        }),
        ..r.model.clone()
    });
    assert!(matches!(
        run(&d, &adj, &bad_alpha, 0),
        Err(Error::Config(ConfigError::OutOfRange { name: "alpha", .. }))
    ));
    let long_wd = TrainConfig {
        weight_decay: vec![0.0; 5],
        ..r.clone()
    };
    assert!(matches!(
        run(&d, &adj, &long_wd, 0),
        Err(Error::Config(ConfigError::WeightDecayLen { .. }))
    ));
    let full_drop_edge = with_model(ModelConfig {
        drop_edge: 1.0,
        ..r.model.clone()
    });
    assert!(matches!(
        run(&d, &adj, &full_drop_edge, 0),
        Err(Error::Config(ConfigError::DropoutOutOfRange(_)))
    ));
    let one_layer_residual = with_model(ModelConfig {
        arch: Arch::RESIDUAL,
        n_layers: 1,
        ..r.model.clone()
    });
    assert!(matches!(
        run(&d, &adj, &one_layer_residual, 0),
        Err(Error::Config(ConfigError::NoLayers))
    ));
    assert!(matches!(
        "jk-sum".parse::<Arch>(),
        Err(ConfigError::UnknownName { .. })
    ));
    assert!("jk-att".parse::<Arch>().is_ok());
    // Names in any case: the architectures and every other named option.
    for (upper, lower) in [("GCN", "gcn"), ("GCNII", "gcnii"), ("JK-Max", "jk-max")] {
        assert_eq!(
            upper.parse::<Arch>().unwrap(),
            lower.parse::<Arch>().unwrap()
        );
    }
    let norm: sparse_gcn::nn::NormKind = "Pair-SI".parse().unwrap();
    assert_eq!(norm.name(), "pair-si");
}
