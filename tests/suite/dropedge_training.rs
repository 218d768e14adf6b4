//! Training with DropEdge through `train_model` (one Â′ rewritten in place every epoch by
//! `DropEdge::sample_into`, the model's buffers planned once and reused by every pass) replays
//! bit for bit a plain loop that does everything afresh: the whole history (training and
//! validation loss and accuracy of every epoch) and the evaluated weights' validation accuracy,
//! test loss and test accuracy, of the Kipf GCN and of every architecture (`Arch::all()`, with
//! BatchNorm where it applies), in both orders, on dense and sparse features, with both
//! normalisations (Kipf GCN).
//!
//! The reference loop, replayed here: each epoch normalises the kept subgraph with
//! `NormAdj::new(&DropEdge::sample_graph(..), ..)`, drops every buffer and cache of the model
//! (`Model::release`) and runs `Model::train_pass` on the sample and the
//! optimiser step by hand; evaluation through `Model::predict`, again after `release`.
//!
//! What changed with the one-stack redesign: the old reference ran the models' separate
//! "fresh-buffer" pass (`fresh_train_pass`), which no longer exists (there is one pass). The
//! property it protected (reused buffers and the in-place resampled Â′ change nothing) is
//! checked against fresh buffers obtained by releasing the model before every pass. The deep
//! case now covers SGC and APPNP too.

use sparse_gcn::data::synthetic::CitationLike;
use sparse_gcn::data::{Dataset, Features};
use sparse_gcn::graph::dropedge::DropEdge;
use sparse_gcn::graph::{Norm, NormAdj};
use sparse_gcn::metrics::accuracy;
use sparse_gcn::nn::loss::{softmax_cross_entropy_in_place_across, softmax_cross_entropy_loss};
use sparse_gcn::nn::{Arch, Model, ModelConfig, NormKind, Order};
use sparse_gcn::train::{
    build_model, rng_stream, train_model, DropEdgeSource, FitOptions, StopRule, TrainConfig,
    TrainData,
};
use sparse_gcn::{Par, Scalar};

use super::common::run_bits as bits;

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
    let x = Features::dense(d.features.to_dense());
    let x = if sparse { x.into_sparse_if(1.0) } else { x };
    assert_eq!(x.is_sparse(), sparse);
    x
}

/// The reference loop (for `StopRule::Never`): a kept subgraph normalised from scratch, fresh
/// buffers and caches for every pass, `Model::predict` for evaluation. Returns what [`bits`]
/// returns.
#[allow(clippy::too_many_arguments)]
fn reference_loop(
    model: &mut Model<f32>,
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
    let drop_edge = DropEdge::new(P).unwrap();
    let mut opt = cfg.optimizer::<f32>();
    let mut out = Vec::new();
    let eval = |model: &mut Model<f32>, mask| {
        model.release();
        let logits = model.predict(adj, x, par).unwrap();
        let loss = softmax_cross_entropy_loss(logits.view(), &d.labels, mask).to_f64_lossless();
        (loss, accuracy(logits.view(), &d.labels, mask))
    };
    for _ in 0..cfg.epochs {
        let kept = drop_edge.sample_graph(&d.graph, &mut edge_rng);
        let sampled = NormAdj::<f32>::new(&kept, norm);
        model.release();
        model.zero_grad();
        let mut train = (f64::NAN, 0.0);
        model
            .train_pass(&sampled, x, &mut drop_rng, par, &mut |z, sums| {
                let acc = accuracy(z.view(), &d.labels, &d.split.train);
                let l = softmax_cross_entropy_in_place_across(z, &d.labels, &d.split.train, &sums)
                    .to_f64_lossless();
                train = (l, acc);
                l.is_finite()
            })
            .unwrap();
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
            norm,
        }),
        ..Default::default()
    }
}

fn train_cfg(model: ModelConfig) -> TrainConfig {
    TrainConfig {
        model,
        epochs: EPOCHS,
        stop: StopRule::Never,
        par: Par::Rayon,
        ..Default::default()
    }
}

/// Trains `cfg` through `train_model` and through [`reference_loop`] from the same initial
/// weights, and compares every number.
fn check(
    d: &Dataset,
    adj: &NormAdj<f32>,
    x: &Features<f32>,
    cfg: &TrainConfig,
    seed: u64,
    norm: Norm,
    what: &str,
) {
    let init = || build_model(adj, x, d.n_classes, &cfg.model, seed).unwrap();
    let mut model = init();
    let r = train_model(
        &mut model,
        &TrainData::new(adj, x, &d.labels, d.n_classes, &d.split),
        cfg,
        seed,
        &opts(d, norm),
    )
    .unwrap();
    assert_eq!(r.history.len(), EPOCHS, "{what}");
    let want = reference_loop(&mut init(), d, adj, x, cfg, seed, norm);
    assert_eq!(bits(&r), want, "{what}");
}

fn gcn_case(sparse: bool) {
    let (d, adj) = data();
    let x = features(&d, sparse);
    for order in [Order::AggregateFirst, Order::TransformFirst] {
        for norm in [Norm::Symmetric, Norm::Row] {
            for input_dropout in [0.5, 0.0] {
                let cfg = train_cfg(ModelConfig {
                    order,
                    bias: true,
                    n_layers: 3,
                    input_dropout,
                    drop_edge: P,
                    ..Default::default()
                });
                let what = format!(
                    "Kipf GCN, sparse {sparse}, {order:?}, {norm:?}, input dropout {input_dropout}"
                );
                check(&d, &adj, &x, &cfg, 7, norm, &what);
            }
        }
    }
}

fn deep_case(sparse: bool) {
    let (d, adj) = data();
    let x = features(&d, sparse);
    for order in [Order::AggregateFirst, Order::TransformFirst] {
        for arch in Arch::all() {
            let cfg = train_cfg(ModelConfig {
                hidden_dim: 16,
                norm: NormKind::Batch,
                order,
                bias: true,
                drop_edge: P,
                ..ModelConfig::deep(arch, 3)
            });
            let what = format!("{arch}, sparse {sparse}, {order:?}");
            check(&d, &adj, &x, &cfg, 3, Norm::Symmetric, &what);
        }
    }
}

#[test]
fn gcn_dropedge_dense_replays_the_fresh_loop() {
    gcn_case(false);
}

#[test]
fn gcn_dropedge_sparse_replays_the_fresh_loop() {
    gcn_case(true);
}

#[test]
fn deep_dropedge_dense_replays_the_fresh_loop() {
    deep_case(false);
}

#[test]
fn deep_dropedge_sparse_replays_the_fresh_loop() {
    deep_case(true);
}
