//! One full-batch training epoch: forward (training mode, dropout on) + masked softmax
//! cross-entropy + backward + one Adam step, exactly the training step of
//! `sparse_gcn::train::fit`, on a model built once outside the timing loop.
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
use sparse_gcn::nn::loss::softmax_cross_entropy;
use sparse_gcn::nn::{Gcn, GcnConfig, Mode, Order};
use sparse_gcn::optim::{Adam, Optimizer};
use sparse_gcn::train::rng_stream;
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

/// One training step, as in `fit`.
fn step(
    model: &mut Gcn<f32>,
    opt: &mut Adam<f32>,
    adj: &NormAdj<f32>,
    data: &Dataset,
    rng: &mut rand_chacha::ChaCha8Rng,
    par: Par,
) -> f32 {
    model.zero_grad();
    let (logits, cache) = model.forward(adj, &data.features, Mode::Train, rng, par);
    let (loss, dlogits) = softmax_cross_entropy(logits.view(), &data.labels, &data.split.train);
    drop(logits);
    model.backward(adj, cache, dlogits, par);
    let mut index = 0;
    model.visit_params(&mut |group, p| {
        opt.update(index, group, p);
        index += 1;
    });
    opt.finish_step();
    loss
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
                    b.iter(|| black_box(step(&mut model, &mut opt, &adj, data, &mut rng, par)))
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
