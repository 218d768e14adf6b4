//! One full-batch training epoch: forward (training mode, dropout on) + masked softmax
//! cross-entropy + backward + one Adam step, i.e. `sparse_gcn::train::train_step`, the step
//! `fit` runs every epoch, on a model built (and `prepare`d) once outside the timing loop. The
//! evaluation pass `fit` adds per epoch is not timed.
//!
//! ```text
//! cargo bench --bench epoch
//! SPARSE_GCN_DATA=/work/shared/datasets cargo bench --bench epoch   # adds Cora and CiteSeer
//! ```
//!
//! Cases: every dataset × order (AggregateFirst, TransformFirst, Auto) × (seq, rayon). Kipf &
//! Welling's model: 2 layers, hidden 16, dropout 0.5 on the input and the hidden layer, no bias,
//! Adam lr 0.01 with weight decay 5e-4 on the first layer.

mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode};
use sparse_gcn::graph::{Dataset, Norm, NormAdj};
use sparse_gcn::nn::{GcnConfig, Order};
use sparse_gcn::optim::Adam;
use sparse_gcn::train::{rng_stream, train_step};
use sparse_gcn::Par;

/// Nodes of the larger synthetic case (arxiv-sized node count, sparse bag-of-words input).
const LARGE_N: usize = 100_000;

fn order_name(o: Order) -> &'static str {
    match o {
        Order::AggregateFirst => "agg",
        Order::TransformFirst => "tf",
        Order::Auto => "auto",
    }
}

fn bench_epoch(c: &mut Criterion) {
    let mut datasets: Vec<(String, Dataset)> =
        vec![("synthetic-cora".into(), common::synthetic_cora())];
    for name in ["cora", "citeseer"] {
        if let Some(d) = common::planetoid(name) {
            datasets.push((name.into(), d));
        }
    }
    datasets.push((
        "synthetic-citation".into(),
        common::synthetic_citation(LARGE_N),
    ));

    let mut group = c.benchmark_group("epoch");
    group.sampling_mode(SamplingMode::Flat);
    for (name, data) in &datasets {
        let adj = NormAdj::<f32>::new(&data.graph, Norm::Symmetric);
        let n = adj.n_nodes();
        for order in [Order::AggregateFirst, Order::TransformFirst, Order::Auto] {
            let cfg = GcnConfig {
                in_dim: data.features.n_cols(),
                out_dim: data.n_classes,
                order,
                ..GcnConfig::default()
            };
            for (par, par_name) in [(Par::Seq, "seq"), (Par::Rayon, "rayon")] {
                let mut model = cfg
                    .init(&adj, &data.features, &mut rng_stream(0, 0))
                    .expect("valid config");
                model.prepare(&adj, &data.features, par);
                if par == Par::Seq {
                    eprintln!(
                        "epoch {name}: n = {n}, nnz(Â) = {}, f = {}, nnz(X) = {}, order {} -> {:?}",
                        adj.nnz(),
                        data.features.n_cols(),
                        data.features.nnz(),
                        order_name(order),
                        model.orders()
                    );
                }
                let mut opt = Adam::new(0.01, vec![5e-4]);
                let mut rng = rng_stream(0, 1);
                let id = format!(
                    "{name},n={},order={},par={par_name}",
                    common::short(n),
                    order_name(order)
                );
                group.bench_function(BenchmarkId::from_parameter(id), |b| {
                    b.iter(|| {
                        black_box(train_step(
                            &mut model,
                            &mut opt,
                            &adj,
                            &data.features,
                            &data.labels,
                            &data.split.train,
                            &mut rng,
                            par,
                        ))
                    })
                });
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
