//! Training with DropEdge replays bit for bit what it did before `DropEdge::sample_into` and the
//! reused-workspace pass: the whole history (training and validation loss and accuracy of every
//! epoch) and the evaluated weights' validation accuracy, test loss and test accuracy, of `Gcn`
//! (through `train_model`) and of every `DeepGcn` variant with BatchNorm (through `fit_deep`),
//! in both orders, on dense and sparse features, with both normalisations, are compared with
//! those of the old epoch loop, replayed here: each epoch normalises the kept subgraph with
//! `NormAdj::new(&DropEdge::sample_graph(..), ..)` (what `DropEdge::sample` did) and trains
//! through `Model::fresh_train_pass`; evaluation through `Model::predict`.

use sparse_gcn::graph::dropedge::DropEdge;
use sparse_gcn::graph::synthetic::CitationLike;
use sparse_gcn::graph::{Dataset, Features, Norm, NormAdj};
use sparse_gcn::metrics::accuracy;
use sparse_gcn::nn::loss::{softmax_cross_entropy_into, softmax_cross_entropy_loss};
use sparse_gcn::nn::{DeepConfig, GcnConfig, Model, NormKind, Order, Variant};
use sparse_gcn::train::{
    fit_deep, rng_stream, train_model, DropEdgeSource, FitOptions, RunResult, StopRule, TrainConfig,
};
use sparse_gcn::{Par, Scalar};

const P: f64 = 0.3;
const EPOCHS: usize = 6;

fn data() -> (Dataset, NormAdj<f32>) {
    let mut d = CitationLike {
        n_nodes: 400,
        ..Default::default()
    }
    .generate(5)
    .unwrap();
    d.features.row_normalize();
    let adj = NormAdj::new(&d.graph, Norm::Symmetric);
    (d, adj)
}

fn features(d: &Dataset, sparse: bool) -> Features<f32> {
    let x = Features::Dense(d.features.to_dense());
    let x = if sparse { x.into_sparse_if(1.0) } else { x };
    assert_eq!(x.is_sparse(), sparse);
    x
}

/// Every number of a run, as bits: per epoch (train loss, train accuracy, validation loss,
/// validation accuracy), then (best epoch, validation accuracy, test loss, test accuracy).
fn bits(r: &RunResult) -> Vec<[u64; 4]> {
    let mut out: Vec<[u64; 4]> = r
        .history
        .iter()
        .map(|e| [e.train_loss, e.train_acc, e.val_loss, e.val_acc].map(f64::to_bits))
        .collect();
    out.push([
        r.best_epoch as u64,
        r.val_acc.to_bits(),
        r.test_loss.to_bits(),
        r.test_acc.to_bits(),
    ]);
    out
}

/// The epoch loop as it ran before `sample_into` (for `StopRule::Never`): a kept subgraph
/// normalised from scratch and a fresh-buffer training pass every epoch, `Model::predict` for
/// evaluation. Returns what [`bits`] returns.
fn old_loop<M: Model<f32>>(
    model: &mut M,
    d: &Dataset,
    adj: &NormAdj<f32>,
    x: &Features<f32>,
    cfg: &TrainConfig,
    seed: u64,
    norm: Norm,
) -> Vec<[u64; 4]> {
    let par = cfg.par;
    let mut drop_rng = rng_stream(seed, 1);
    let mut edge_rng = rng_stream(seed, 2);
    let mut opt = cfg.optimizer::<f32>();
    let mut out = Vec::new();
    let eval = |model: &M, mask| {
        let logits = model.predict(adj, x, par);
        let loss = softmax_cross_entropy_loss(logits.view(), &d.labels, mask).to_f64_lossless();
        (loss, accuracy(logits.view(), &d.labels, mask))
    };
    for _ in 0..cfg.epochs {
        let kept = DropEdge { p: P }.sample_graph(&d.graph, &mut edge_rng);
        let sampled = NormAdj::<f32>::new(&kept, norm);
        model.zero_grad();
        let mut train = (f64::NAN, 0.0);
        model.fresh_train_pass(&sampled, x, &mut drop_rng, par, &mut |logits, dlogits| {
            let l = softmax_cross_entropy_into(logits, &d.labels, &d.split.train, dlogits)
                .to_f64_lossless();
            train = (l, accuracy(logits, &d.labels, &d.split.train));
            l.is_finite()
        });
        assert!(train.0.is_finite());
        let mut index = 0;
        model.visit_params(&mut |group, p| {
            opt.update(index, group, p);
            index += 1;
        });
        opt.finish_step();
        let (val_loss, val_acc) = eval(model, &d.split.valid);
        out.push([train.0, train.1, val_loss, val_acc].map(f64::to_bits));
    }
    let (_, val_acc) = eval(model, &d.split.valid);
    let (test_loss, test_acc) = eval(model, &d.split.test);
    out.push([
        cfg.epochs as u64 - 1,
        val_acc.to_bits(),
        test_loss.to_bits(),
        test_acc.to_bits(),
    ]);
    out
}

fn opts(d: &Dataset, norm: Norm) -> FitOptions<'_> {
    FitOptions {
        drop_edge: Some(DropEdgeSource {
            graph: &d.graph,
            drop: DropEdge { p: P },
            norm,
        }),
        ..Default::default()
    }
}

fn train_cfg(model: GcnConfig) -> TrainConfig {
    TrainConfig {
        model,
        epochs: EPOCHS,
        stop: StopRule::Never,
        par: Par::Rayon,
        ..Default::default()
    }
}

fn gcn_case(sparse: bool) {
    let (d, adj) = data();
    let x = features(&d, sparse);
    for order in [Order::AggregateFirst, Order::TransformFirst] {
        for norm in [Norm::Symmetric, Norm::Row] {
            for input_dropout in [0.5, 0.0] {
                let cfg = train_cfg(GcnConfig {
                    in_dim: x.n_cols(),
                    out_dim: d.n_classes,
                    order,
                    bias: true,
                    n_layers: 3,
                    input_dropout,
                    ..Default::default()
                });
                let seed = 7;
                let init = || cfg.model.init(&adj, &x, &mut rng_stream(seed, 0)).unwrap();
                let mut model = init();
                let r = train_model(
                    &mut model,
                    &adj,
                    &x,
                    &d.labels,
                    &d.split,
                    &cfg,
                    seed,
                    &opts(&d, norm),
                )
                .unwrap();
                assert_eq!(r.history.len(), EPOCHS);
                let want = old_loop(&mut init(), &d, &adj, &x, &cfg, seed, norm);
                assert_eq!(
                    bits(&r),
                    want,
                    "Gcn, sparse {sparse}, {order:?}, {norm:?}, input dropout {input_dropout}"
                );
            }
        }
    }
}

fn deep_case(sparse: bool) {
    let (d, adj) = data();
    let x = features(&d, sparse);
    for order in [Order::AggregateFirst, Order::TransformFirst] {
        for variant in Variant::ALL {
            let model_cfg = DeepConfig {
                in_dim: x.n_cols(),
                out_dim: d.n_classes,
                hidden_dim: 16,
                n_layers: 3,
                variant,
                norm: NormKind::Batch,
                order,
                bias: true,
                ..Default::default()
            };
            let cfg = train_cfg(GcnConfig::default());
            let seed = 3;
            let (r, _) = fit_deep(
                &adj,
                &x,
                &d.labels,
                d.n_classes,
                &d.split,
                &model_cfg,
                &cfg,
                seed,
                &opts(&d, Norm::Symmetric),
            )
            .unwrap();
            assert_eq!(r.history.len(), EPOCHS);
            let mut model = model_cfg.init(&adj, &x, &mut rng_stream(seed, 0)).unwrap();
            let want = old_loop(&mut model, &d, &adj, &x, &cfg, seed, Norm::Symmetric);
            assert_eq!(
                bits(&r),
                want,
                "DeepGcn {variant}, sparse {sparse}, {order:?}"
            );
        }
    }
}

#[test]
fn gcn_dropedge_dense_replays_the_fresh_pass() {
    gcn_case(false);
}

#[test]
fn gcn_dropedge_sparse_replays_the_fresh_pass() {
    gcn_case(true);
}

#[test]
fn deep_dropedge_dense_replays_the_fresh_pass() {
    deep_case(false);
}

#[test]
fn deep_dropedge_sparse_replays_the_fresh_pass() {
    deep_case(true);
}
