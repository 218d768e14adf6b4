//! Finite-difference gradient checks (f64) through whole deep models: every variant, with
//! BatchNorm and PairNorm, dropout on (the masks replay from the same RNG state), dense and
//! sparse features; and activation checkpointing giving the same gradients bit for bit.

use ndarray::Array2;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use sparse_gcn::graph::{Direction, Features, Graph, Norm, NormAdj};
use sparse_gcn::nn::{DeepConfig, DeepGcn, JkMode, Model, NormKind, Order, Variant};
use sparse_gcn::testing::{max_rel_err, numerical_grad};
use sparse_gcn::Par;

fn graph() -> Graph {
    let e = [
        (0, 1),
        (1, 2),
        (2, 3),
        (3, 0),
        (3, 4),
        (4, 5),
        (5, 6),
        (6, 4),
        (7, 8),
        (8, 9),
        (9, 7),
        (2, 9),
    ];
    Graph::try_from_edges(11, &e, Direction::Undirected).unwrap()
}

fn features(n: usize, d: usize, sparse: bool, rng: &mut ChaCha8Rng) -> Features<f64> {
    let mut x = Array2::from_shape_simple_fn((n, d), || rng.random_range(-1.0..1.0));
    if sparse {
        x.mapv_inplace(|v: f64| if v.abs() < 0.4 { 0.0 } else { v });
        Features::Dense(x).into_sparse_if(1.0)
    } else {
        Features::Dense(x)
    }
}

fn params(m: &mut DeepGcn<f64>) -> Vec<f64> {
    let mut v = Vec::new();
    m.visit_params(&mut |_, p| v.extend(p.value.iter().copied()));
    v
}

fn grads(m: &mut DeepGcn<f64>) -> Vec<f64> {
    let mut v = Vec::new();
    m.visit_params(&mut |_, p| v.extend(p.grad.iter().copied()));
    v
}

fn set_params(m: &mut DeepGcn<f64>, theta: &[f64]) {
    let mut k = 0;
    m.visit_params(&mut |_, p| {
        for v in p.value.iter_mut() {
            *v = theta[k];
            k += 1;
        }
    });
}

/// L = Σ R ⊙ logits of a training pass whose dropout masks come from `seed`.
fn loss(
    m: &DeepGcn<f64>,
    adj: &NormAdj<f64>,
    x: &Features<f64>,
    r: &Array2<f64>,
    seed: u64,
) -> f64 {
    let mut m = m.clone();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (z, _) = m.forward_train(adj, x, &mut rng, Par::Seq);
    (&z * r).sum()
}

fn analytic(
    m: &mut DeepGcn<f64>,
    adj: &NormAdj<f64>,
    x: &Features<f64>,
    r: &Array2<f64>,
    seed: u64,
) -> Vec<f64> {
    m.zero_grad();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (_, cache) = m.forward_train(adj, x, &mut rng, Par::Seq);
    m.backward(adj, cache, r.clone(), Par::Seq);
    grads(m)
}

fn check(cfg: DeepConfig, sparse: bool) {
    let adj = NormAdj::<f64>::new(&graph(), Norm::Symmetric);
    let n = adj.n_nodes();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let x = features(n, 6, sparse, &mut rng);
    let cfg = DeepConfig {
        in_dim: 6,
        out_dim: 3,
        ..cfg
    };
    let mut m: DeepGcn<f64> = cfg.init(&adj, &x, &mut rng).unwrap();
    if cfg.order != Order::Auto {
        assert!(
            m.orders().iter().all(|&o| o == cfg.order),
            "{:?}",
            m.orders()
        );
    }
    // Non-trivial biases and norm parameters. γ = 1 and β = 0 at init would hide mistakes, and a
    // zero bias puts any node whose inputs are all zero (a zero feature row, everything dropped)
    // exactly on a ReLU kink, where finite differences see half a slope.
    m.visit_params(&mut |_, p| {
        if p.value.nrows() == 1 {
            p.value.mapv_inplace(|_| rng.random_range(0.5..1.5));
        }
    });
    let r = Array2::from_shape_simple_fn((n, 3), || rng.random_range(-1.0..1.0));
    let seed = 17;
    let a = analytic(&mut m, &adj, &x, &r, seed);
    let theta = params(&mut m);
    let num = numerical_grad(
        |t| {
            let mut mm = m.clone();
            set_params(&mut mm, t);
            loss(&mm, &adj, &x, &r, seed)
        },
        &theta,
        1e-6,
    );
    let (err, at) = max_rel_err(&a, &num);
    println!(
        "{} norm={} layers={} order={:?} sparse={sparse}: rel err {err:.3e}",
        cfg.variant, cfg.norm, cfg.n_layers, cfg.order
    );
    assert!(
        err < TOL,
        "{} norm={} layers={} order={:?} sparse={sparse}: rel err {err} at {at} (analytic {}, \
         numerical {})",
        cfg.variant,
        cfg.norm,
        cfg.n_layers,
        cfg.order,
        a[at],
        num[at]
    );
}

/// The pass criterion of `docs/MATH.md` §12.
const TOL: f64 = 1e-6;

fn base(variant: Variant, n_layers: usize, norm: NormKind) -> DeepConfig {
    DeepConfig {
        hidden_dim: 4,
        n_layers,
        variant,
        dropout: 0.3,
        input_dropout: 0.2,
        norm,
        bias: true,
        ..Default::default()
    }
}

#[test]
fn every_variant_matches_finite_differences() {
    for variant in Variant::ALL {
        for sparse in [false, true] {
            check(base(variant, 3, NormKind::None), sparse);
        }
    }
}

#[test]
fn normalised_variants_match_finite_differences() {
    for norm in ["batch", "pair"] {
        let norm: NormKind = norm.parse().unwrap();
        for variant in [
            Variant::Plain,
            Variant::Residual,
            Variant::Jk(JkMode::Attention),
        ] {
            check(base(variant, 3, norm), false);
        }
    }
}

#[test]
fn single_layer_and_no_dropout_edge_cases() {
    check(base(Variant::Plain, 1, NormKind::None), true);
    check(base(Variant::Gcnii, 1, NormKind::None), false);
    check(base(Variant::Residual, 2, NormKind::None), true);
    let mut c = base(Variant::Jk(JkMode::Concat), 2, NormKind::None);
    c.dropout = 0.0;
    c.input_dropout = 0.0;
    check(c, false);
}

/// Every variant with each order forced on every GCN convolution (GCNII has none: its
/// convolutions always aggregate, so the order changes nothing there), dense and sparse input,
/// with and without normalisation.
#[test]
fn every_variant_matches_finite_differences_with_each_order_forced() {
    for order in [Order::AggregateFirst, Order::TransformFirst] {
        for variant in Variant::ALL {
            for sparse in [false, true] {
                check(
                    DeepConfig {
                        order,
                        ..base(variant, 3, NormKind::None)
                    },
                    sparse,
                );
            }
            if variant != Variant::Gcnii {
                for norm in ["batch", "pair"] {
                    for sparse in [false, true] {
                        check(
                            DeepConfig {
                                order,
                                ..base(variant, 3, norm.parse().unwrap())
                            },
                            sparse,
                        );
                    }
                }
            }
        }
        check(
            DeepConfig {
                order,
                ..base(Variant::Plain, 1, NormKind::None)
            },
            true,
        );
        check(
            DeepConfig {
                order,
                ..base(Variant::Residual, 2, NormKind::None)
            },
            true,
        );
    }
}

#[test]
fn checkpointing_gives_identical_gradients_and_logits() {
    let adj = NormAdj::<f32>::new(&graph(), Norm::Symmetric);
    let n = adj.n_nodes();
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let x = Features::Dense(Array2::from_shape_simple_fn((n, 5), || {
        rng.random_range(-1.0f32..1.0)
    }));
    for variant in Variant::ALL {
        for norm in [NormKind::None, NormKind::Batch] {
            let cfg = DeepConfig {
                in_dim: 5,
                out_dim: 3,
                hidden_dim: 6,
                n_layers: 7,
                variant,
                norm,
                ..Default::default()
            };
            let mut outs = Vec::new();
            for k in [0, 1, 2, 3, 7] {
                let c = DeepConfig {
                    checkpoint: k,
                    ..cfg.clone()
                };
                let mut m: DeepGcn<f32> =
                    c.init(&adj, &x, &mut ChaCha8Rng::seed_from_u64(1)).unwrap();
                let mut drop = ChaCha8Rng::seed_from_u64(2);
                let (z, cache) = m.forward_train(&adj, &x, &mut drop, Par::Rayon);
                let g = z.mapv(|v| v.sin());
                m.backward(&adj, cache, g, Par::Rayon);
                let mut gr = Vec::new();
                m.visit_params(&mut |_, p| gr.extend(p.grad.iter().copied()));
                let snap = m.snapshot();
                outs.push((z, gr, snap));
            }
            for o in &outs[1..] {
                assert_eq!(o.0, outs[0].0, "{variant} {norm}: logits differ");
                assert_eq!(o.1, outs[0].1, "{variant} {norm}: gradients differ");
                assert_eq!(
                    o.2, outs[0].2,
                    "{variant} {norm}: running statistics differ"
                );
            }
        }
    }
}

#[test]
fn predict_equals_representations_tail_and_snapshot_restores() {
    let adj = NormAdj::<f64>::new(&graph(), Norm::Symmetric);
    let n = adj.n_nodes();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let x = features(n, 6, true, &mut rng);
    for variant in Variant::ALL {
        let cfg = DeepConfig {
            in_dim: 6,
            out_dim: 3,
            ..base(variant, 4, NormKind::Batch)
        };
        let mut m: DeepGcn<f64> = cfg.init(&adj, &x, &mut rng).unwrap();
        let snap = m.snapshot();
        let before = m.predict(&adj, &x, Par::Seq);
        // A training pass moves BatchNorm's running statistics, a fake step moves weights.
        let (_, _) = m.forward_train(&adj, &x, &mut rng, Par::Seq);
        m.visit_params(&mut |_, p| p.value.mapv_inplace(|v| v + 0.1));
        assert_ne!(m.predict(&adj, &x, Par::Seq), before);
        m.restore(&snap);
        assert_eq!(m.predict(&adj, &x, Par::Seq), before, "{variant}");
        let reps = m.representations(&adj, &x, Par::Seq);
        let expected = match variant {
            Variant::Plain | Variant::Residual => 4,
            _ => 4,
        };
        assert_eq!(reps.len(), expected, "{variant}");
        if matches!(variant, Variant::Plain | Variant::Residual) {
            assert_eq!(reps[3], before);
        }
    }
}
