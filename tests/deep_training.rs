//! Training deep models end to end: every variant learns, runs replay bit for bit on any thread
//! count (with DropEdge, BatchNorm and checkpointing on), per-layer metrics are recorded, and bad
//! configurations get typed errors.

use sparse_gcn::graph::dropedge::DropEdge;
use sparse_gcn::graph::synthetic::CitationLike;
use sparse_gcn::graph::{Dataset, Norm, NormAdj};
use sparse_gcn::nn::{DeepConfig, NormKind, Variant};
use sparse_gcn::train::recipe::Recipe;
use sparse_gcn::train::{fit_deep, DropEdgeSource, FitOptions, RunResult, StopRule, TrainConfig};
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

fn run(
    d: &Dataset,
    adj: &NormAdj<f32>,
    model: &DeepConfig,
    train: &TrainConfig,
    drop_edge: f64,
    metrics_every: usize,
) -> Result<RunResult, Error> {
    let opts = FitOptions {
        drop_edge: (drop_edge > 0.0).then_some(DropEdgeSource {
            graph: &d.graph,
            drop: DropEdge { p: drop_edge },
            norm: Norm::Symmetric,
        }),
        metrics_every,
        rank_sample: Some(64),
    };
    fit_deep(
        adj,
        &d.features,
        &d.labels,
        d.n_classes,
        &d.split,
        model,
        train,
        3,
        &opts,
    )
    .map(|(r, _)| r)
}

#[test]
fn every_variant_learns_with_its_recipe() {
    let d = data();
    let adj = NormAdj::<f32>::new(&d.graph, Norm::Symmetric);
    let chance = 1.0 / d.n_classes as f64;
    for variant in Variant::ALL {
        let mut r = Recipe::paper(variant, 4);
        r.train.epochs = 80;
        r.model.hidden_dim = 32;
        let res = run(&d, &adj, &r.model, &r.train, r.drop_edge, 0).unwrap();
        assert!(
            res.test_acc > 2.5 * chance,
            "{variant}: test accuracy {} (chance {chance})",
            res.test_acc
        );
        assert!(res.history.iter().all(|h| h.train_loss.is_finite()));
    }
}

#[test]
fn deep_runs_replay_exactly_on_any_thread_count() {
    let d = data();
    let adj = NormAdj::<f32>::new(&d.graph, Norm::Symmetric);
    for (variant, checkpoint) in [
        (Variant::Residual, 2),
        (Variant::Gcnii, 3),
        (Variant::Jk(sparse_gcn::nn::JkMode::Attention), 0),
    ] {
        let mut r = Recipe::paper(variant, 5);
        r.train.epochs = 12;
        r.model.hidden_dim = 16;
        r.model.checkpoint = checkpoint;
        r.model.norm = NormKind::Batch;
        let results: Vec<RunResult> = [1, 2, 3]
            .iter()
            .map(|&t| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(t)
                    .build()
                    .unwrap()
                    .install(|| run(&d, &adj, &r.model, &r.train, 0.3, 4).unwrap())
            })
            .collect();
        for other in &results[1..] {
            let losses = |r: &RunResult| -> Vec<(u64, u64)> {
                r.history
                    .iter()
                    .map(|h| (h.train_loss.to_bits(), h.val_loss.to_bits()))
                    .collect()
            };
            assert_eq!(losses(other), losses(&results[0]), "{variant}");
            assert_eq!(other.test_acc, results[0].test_acc, "{variant}");
            assert_eq!(other.layer_metrics, results[0].layer_metrics, "{variant}");
        }
    }
}

#[test]
fn metrics_are_recorded_per_layer_and_plain_depth_smooths() {
    let d = data();
    let adj = NormAdj::<f32>::new(&d.graph, Norm::Symmetric);
    let mut r = Recipe::paper(Variant::Plain, 8);
    r.train.epochs = 30;
    r.train.stop = StopRule::Never;
    let res = run(&d, &adj, &r.model, &r.train, 0.0, 10).unwrap();
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
    let r = Recipe::paper(Variant::Gcnii, 2);
    let bad_alpha = DeepConfig {
        alpha: 1.5,
        ..r.model.clone()
    };
    assert!(matches!(
        run(&d, &adj, &bad_alpha, &r.train, 0.0, 0),
        Err(Error::Config(ConfigError::OutOfRange { name: "alpha", .. }))
    ));
    let long_wd = TrainConfig {
        weight_decay: vec![0.0; 5],
        ..r.train.clone()
    };
    assert!(matches!(
        run(&d, &adj, &r.model, &long_wd, 0.0, 0),
        Err(Error::Config(ConfigError::WeightDecayLen { .. }))
    ));
    assert!(matches!(
        run(&d, &adj, &r.model, &r.train, 1.0, 0),
        Err(Error::Config(ConfigError::DropoutOutOfRange(_)))
    ));
    let one_layer_residual = DeepConfig {
        variant: Variant::Residual,
        n_layers: 1,
        ..r.model.clone()
    };
    assert!(matches!(
        run(&d, &adj, &one_layer_residual, &r.train, 0.0, 0),
        Err(Error::Config(ConfigError::NoLayers))
    ));
    assert!(matches!(
        "jk-sum".parse::<Variant>(),
        Err(ConfigError::UnknownName { .. })
    ));
    assert!("jk-att".parse::<Variant>().is_ok());
}
