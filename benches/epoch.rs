//! One full-batch training epoch: forward (training mode, dropout on) + masked softmax
//! cross-entropy + backward + one Adam step, i.e. `sparse_gcn::train::train_step`, the step
//! `fit` runs every epoch, on a model (`nn::Model`, built from `nn::ModelConfig`) built once
//! outside the timing loop; the model plans and allocates its buffers on its first step (in
//! criterion's warm-up) and reuses them. The evaluation pass `fit` adds per epoch is not timed.
//!
//! ```text
//! cargo bench --bench epoch                                            # cora-like + arxiv-like
//! SPARSE_GCN_DATA=/work/shared/datasets cargo bench --bench epoch      # + Cora and CiteSeer
//! SPARSE_GCN_BENCH_PRODUCTS=1 cargo bench --bench epoch -- products    # + products-like
//! SPARSE_GCN_OGB=/data/ogbn-arxiv cargo bench --bench epoch -- ogbn    # + a real OGB folder
//! ```
//!
//! Datasets (each built once, in this order; features row-normalised when non-negative, as the
//! CLI's `--row-norm auto`):
//! - `cora-like`: `Preset::CoraLike` (2,708 nodes, sparse bag-of-words), always;
//! - `cora`, `citeseer`: `$SPARSE_GCN_DATA/{cora,citeseer}` when the variable is set;
//! - `arxiv-like`: `Preset::ArxivLike` (169,343 nodes, 1.17M edges, dense 128-d), always;
//! - `products-like`: `Preset::ProductsLike` (2.45M nodes, 61.9M edges, dense 100-d), only with
//!   `SPARSE_GCN_BENCH_PRODUCTS=1` (generation 15–50 s; an epoch of the 3×256 model takes
//!   minutes and criterion runs at least 11 of them);
//! - `$SPARSE_GCN_OGB`: a real dataset (an OGB folder holding `raw/`, or any file
//!   `data::io::load` reads), named after its last path component, when the variable is set.
//!
//! Models (`common::ModelShape`): `kipf-2x16` (Kipf & Welling: 2 layers, hidden 16, dropout 0.5
//! on the input and the hidden layer, no bias, Adam lr 0.01 with weight decay 5e-4 on the first
//! layer) on every dataset; `gcn-3x256` (the OGB GCN baseline's shape, the CLI's
//! `train --layers 3 --hidden 256`) on arxiv-like, products-like and the OGB dataset.
//!
//! Cases: small graphs (nnz(Â) ≤ `common::LARGE_NNZ` = 10M) run kipf-2x16 in every order
//! (AggregateFirst, TransformFirst, Auto) × (seq, rayon) and gcn-3x256 in the Auto order ×
//! (seq, rayon); larger graphs run both models in the Auto order under rayon only.
//!
//! Throughput (`Elements`) = the multiply-adds of one epoch's forward and backward products
//! (`common::epoch_macs`: SpMM with Â, the products with X or ÂX, the GEMMs with W, for the
//! orders the model resolved); the loss, ReLU, dropout and the Adam update are not counted.
//! GFLOP/s = 2 × the rate.

mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use sparse_gcn::data::synthetic::Preset;
use sparse_gcn::data::Dataset;
use sparse_gcn::graph::{Norm, NormAdj};
use sparse_gcn::nn::Order;
use sparse_gcn::optim::Adam;
use sparse_gcn::train::{rng_stream, train_step};
use sparse_gcn::Par;

use common::ModelShape;

const ALL_ORDERS: [Order; 3] = [Order::AggregateFirst, Order::TransformFirst, Order::Auto];
const BOTH: [(Par, &str); 2] = [(Par::Seq, "seq"), (Par::Rayon, "rayon")];
const RAYON: [(Par, &str); 1] = [(Par::Rayon, "rayon")];

/// The (model, orders) pairs of a dataset: the 3×256 model only on the arxiv-size and larger
/// graphs (`wide`).
fn models(small: bool, wide: bool) -> Vec<(ModelShape, &'static [Order])> {
    let mut v: Vec<(ModelShape, &'static [Order])> = vec![(
        ModelShape::Kipf,
        if small { &ALL_ORDERS } else { &ALL_ORDERS[2..] },
    )];
    if wide {
        v.push((ModelShape::Wide, &ALL_ORDERS[2..]));
    }
    v
}

fn bench_epoch(c: &mut Criterion) {
    // (name, dataset, runs the 3×256 model)
    let mut datasets: Vec<(String, Dataset, bool)> =
        vec![("cora-like".into(), common::preset(Preset::CoraLike), false)];
    for name in ["cora", "citeseer"] {
        if let Some(d) = common::planetoid(name) {
            datasets.push((name.into(), d, false));
        }
    }
    datasets.push(("arxiv-like".into(), common::preset(Preset::ArxivLike), true));
    if let Some(d) = common::products_like() {
        datasets.push(("products-like".into(), d, true));
    }
    if let Some((name, d)) = common::ogb_from_env() {
        datasets.push((name, d, true));
    }

    let mut group = c.benchmark_group("epoch");
    // One epoch takes 2 ms (Cora) to minutes (products-like, 3×256).
    common::slow(&mut group);
    for (name, data, wide) in &datasets {
        let adj = NormAdj::<f32>::new(&data.graph, Norm::Symmetric);
        let n = adj.n_nodes();
        let small = adj.nnz() <= common::LARGE_NNZ;
        let pars: &[(Par, &str)] = if small { &BOTH } else { &RAYON };
        eprintln!(
            "epoch {name}: n = {n}, nnz(Â) = {}, f = {} ({}), nnz(X) = {}, classes {}, train {}",
            adj.nnz(),
            data.features.n_cols(),
            if data.features.is_sparse() {
                "sparse"
            } else {
                "dense"
            },
            data.features.nnz(),
            data.n_classes,
            data.split.train.len()
        );
        for (shape, orders) in models(small, *wide) {
            for &order in orders {
                let cfg = shape.config(data, order);
                for &(par, par_name) in pars {
                    let mut model = cfg
                        .build(&adj, &data.features, None, &mut rng_stream(0, 0))
                        .expect("valid config");
                    let resolved = model.orders();
                    let macs =
                        common::epoch_macs(&adj, &data.features, &common::dims(&cfg), &resolved);
                    if par == pars[0].0 {
                        eprintln!(
                            "epoch {name},{},order={} -> {resolved:?}: {macs} multiply-adds",
                            shape.name(),
                            common::order_name(order),
                        );
                    }
                    group.throughput(Throughput::Elements(macs));
                    let mut opt = Adam::new(0.01, vec![5e-4]);
                    let mut rng = rng_stream(0, 1);
                    let id = format!(
                        "{name},n={},model={},order={},par={par_name}",
                        common::short(n),
                        shape.name(),
                        common::order_name(order)
                    );
                    group.bench_function(BenchmarkId::from_parameter(id), |b| {
                        b.iter(|| {
                            black_box(
                                train_step(
                                    &mut model,
                                    &mut opt,
                                    &adj,
                                    &data.features,
                                    &data.labels,
                                    &data.split.train,
                                    &mut rng,
                                    par,
                                )
                                .unwrap(),
                            )
                        })
                    });
                }
            }
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = bench_epoch
}
criterion_main!(benches);
