//! Finite-difference gradient checks through whole models with the real cross-entropy loss
//! (f64, dropout off, away from ReLU kinks). The spec is `docs/MATH.md`.

use ndarray::Array2;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use sparse_gcn::graph::{Direction, Features, Graph, Mask, Norm, NormAdj};
use sparse_gcn::nn::loss::softmax_cross_entropy;
use sparse_gcn::nn::model::input_of;
use sparse_gcn::nn::{Gcn, GcnConfig, Mode, Order};
use sparse_gcn::testing::{max_rel_err, numerical_grad};
use sparse_gcn::Par;

const N: usize = 10;

/// 10 nodes: two communities joined by one edge, a self-loop, an isolated node (9).
fn graph() -> Graph {
    let e = [
        (0, 1),
        (1, 2),
        (2, 0),
        (2, 3),
        (3, 4),
        (4, 5),
        (5, 6),
        (6, 4),
        (7, 7),
        (7, 8),
        (8, 5),
    ];
    Graph::try_from_edges(N, &e, Direction::Undirected).unwrap()
}

fn features(sparse: bool, rng: &mut ChaCha8Rng) -> Features<f64> {
    let mut x = Array2::from_shape_simple_fn((N, 5), || rng.random_range(-1.0..1.0));
    if sparse {
        x.mapv_inplace(|v: f64| if v.abs() < 0.5 { 0.0 } else { v });
        Features::Dense(x).into_sparse_if(1.0)
    } else {
        Features::Dense(x)
    }
}

fn params(model: &mut Gcn<f64>) -> Vec<f64> {
    let mut v = Vec::new();
    model.visit_params(&mut |_, p| v.extend(p.value.iter()));
    v
}

fn set_params(model: &mut Gcn<f64>, theta: &[f64]) {
    let mut k = 0;
    model.visit_params(&mut |_, p| {
        for w in p.value.iter_mut() {
            *w = theta[k];
            k += 1;
        }
    });
}

fn check(order: Order, bias: bool, sparse: bool, layers: usize) {
    let adj = NormAdj::<f64>::new(&graph(), Norm::Symmetric);
    let labels: Vec<u32> = (0..N as u32).map(|i| i % 3).collect();
    let mask = Mask::try_from_indices(vec![0, 2, 3, 5, 7, 9], N).unwrap();
    let cfg = GcnConfig {
        in_dim: 5,
        hidden_dim: 4,
        out_dim: 3,
        n_layers: layers,
        dropout: 0.0,
        input_dropout: 0.0,
        bias,
        order,
    };
    // Draw until no hidden pre-activation lies within 1e-3 of the ReLU kink.
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let (mut model, x) = loop {
        let x = features(sparse, &mut rng);
        let mut model = cfg.init(&adj, &x, &mut rng).unwrap();
        model.visit_params(&mut |_, p| {
            p.value.mapv_inplace(|_| rng.random_range(-1.0..1.0));
        });
        let (z0, _) = model.layers[0].forward(&adj, input_of(&x), None, Par::Seq);
        if layers == 1 || z0.iter().all(|v| v.abs() > 1e-3) {
            break (model, x);
        }
    };
    assert_eq!(model.orders()[0], order);
    model.prepare(&adj, &x, Par::Seq);
    let mut drng = ChaCha8Rng::seed_from_u64(0);
    model.zero_grad();
    let (logits, cache) = model.forward(&adj, &x, Mode::Eval, &mut drng, Par::Seq);
    let (_, dlogits) = softmax_cross_entropy(logits.view(), &labels, &mask);
    model.backward(&adj, cache, dlogits, Par::Seq);
    let mut analytic = Vec::new();
    model.visit_params(&mut |_, p| analytic.extend(p.grad.iter()));
    let theta = params(&mut model);
    let mut probe = model.clone();
    let numerical = numerical_grad(
        |t| {
            set_params(&mut probe, t);
            let (z, _) = probe.forward(&adj, &x, Mode::Eval, &mut drng, Par::Seq);
            softmax_cross_entropy(z.view(), &labels, &mask).0
        },
        &theta,
        1e-6,
    );
    let (err, at) = max_rel_err(&analytic, &numerical);
    assert!(
        err < 1e-6,
        "{order:?} bias={bias} sparse={sparse} layers={layers}: rel err {err} at {at} \
         (analytic {}, numerical {})",
        analytic[at],
        numerical[at]
    );
}

#[test]
fn model_backward_matches_finite_differences() {
    for order in [Order::AggregateFirst, Order::TransformFirst] {
        for bias in [false, true] {
            for sparse in [false, true] {
                check(order, bias, sparse, 2);
            }
        }
        check(order, true, false, 3);
        check(order, true, true, 1);
    }
}

#[test]
fn loss_gradient_matches_finite_differences() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let z = Array2::from_shape_simple_fn((6, 4), || rng.random_range(-3.0..3.0));
    let labels = [0, 1, 2, 3, 0, 1];
    let mask = Mask::try_from_indices(vec![1, 2, 4], 6).unwrap();
    let (_, g) = softmax_cross_entropy(z.view(), &labels, &mask);
    let theta: Vec<f64> = z.iter().copied().collect();
    let numerical = numerical_grad(
        |t| {
            let z = Array2::from_shape_vec((6, 4), t.to_vec()).unwrap();
            softmax_cross_entropy(z.view(), &labels, &mask).0
        },
        &theta,
        1e-6,
    );
    let analytic: Vec<f64> = g.iter().copied().collect();
    let (err, at) = max_rel_err(&analytic, &numerical);
    assert!(err < 1e-7, "rel err {err} at {at}");
    // Rows outside the mask get no gradient; the loss is averaged over the mask only.
    assert!(g.row(0).iter().all(|&v| v == 0.0));
}
