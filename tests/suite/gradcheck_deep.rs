//! Finite-difference gradient checks (f64) through whole deep models: every deep architecture
//! (`Arch::deep()`), with BatchNorm and PairNorm, dropout on (the masks replay from the same RNG
//! state), dense and sparse features, each GCN order forced; SGC and APPNP through the whole
//! model as well; and activation checkpointing giving the same gradients bit for bit.
//!
//! Every pass is a training pass of the one stack (`Model::train_pass`) with the loss
//! L = Σ R ⊙ logits: the analytic gradient is its backward (∂L/∂logits = R), each loss value of
//! the finite differences a training pass whose loss callback stops before backward. BatchNorm
//! uses the batch statistics in a training pass, so the passes are deterministic functions of
//! the parameters (the running statistics they update are not read by training passes).

use ndarray::Array2;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use sparse_gcn::data::Features;
use sparse_gcn::graph::{Direction, Graph, Norm, NormAdj};
use sparse_gcn::nn::appnp::AppnpConfig;
use sparse_gcn::nn::sgc::SgcConfig;
use sparse_gcn::nn::{Arch, JkMode, Model, ModelConfig, NormKind, Order};
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
        Features::dense(x).into_sparse_if(1.0)
    } else {
        Features::dense(x)
    }
}

fn params(m: &mut Model<f64>) -> Vec<f64> {
    let mut v = Vec::new();
    m.visit_params(&mut |_, p| v.extend(p.value.iter().copied()));
    v
}

fn grads(m: &mut Model<f64>) -> Vec<f64> {
    let mut v = Vec::new();
    m.visit_params(&mut |_, p| v.extend(p.grad.iter().copied()));
    v
}

fn set_params(m: &mut Model<f64>, theta: &[f64]) {
    let mut k = 0;
    m.visit_params(&mut |_, p| {
        for v in p.value.iter_mut() {
            *v = theta[k];
            k += 1;
        }
    });
}

/// Every parameter's name, in visiting order.
fn param_names(m: &mut Model<f64>) -> Vec<String> {
    let mut v = Vec::new();
    m.visit_named(&mut |name, t| {
        if let sparse_gcn::nn::Named::Param(_) = t {
            v.push(name.to_string());
        }
    });
    v
}

/// L = Σ R ⊙ logits of a training pass whose dropout masks come from `seed` (no backward).
fn loss(
    m: &mut Model<f64>,
    adj: &NormAdj<f64>,
    x: &Features<f64>,
    r: &Array2<f64>,
    seed: u64,
) -> f64 {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut l = f64::NAN;
    m.train_pass(adj, x, &mut rng, Par::Seq, &mut |z, _| {
        l = (&z * r).sum();
        false
    })
    .unwrap();
    l
}

/// ∂L/∂θ of the same training pass.
fn analytic(
    m: &mut Model<f64>,
    adj: &NormAdj<f64>,
    x: &Features<f64>,
    r: &Array2<f64>,
    seed: u64,
) -> Vec<f64> {
    m.zero_grad();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    m.train_pass(adj, x, &mut rng, Par::Seq, &mut |mut dz, _| {
        dz.assign(r);
        true
    })
    .unwrap();
    grads(m)
}

/// Checks the whole model of `cfg` (in 6, out 3) against central differences; returns the
/// parameter names (in visiting order) for callers that check which parameters were covered.
fn check(cfg: ModelConfig, sparse: bool) -> Vec<String> {
    let adj = NormAdj::<f64>::new(&graph(), Norm::Symmetric);
    let n = adj.n_nodes();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let x = features(n, 6, sparse, &mut rng);
    let cfg = ModelConfig {
        in_dim: 6,
        out_dim: 3,
        ..cfg
    };
    let mut m: Model<f64> = cfg.build(&adj, &x, None, &mut rng).unwrap();
    if cfg.order != Order::Auto {
        // (The lean order leaves the first convolution to the cost model.)
        let skip = usize::from(cfg.order == Order::Lean);
        assert!(
            m.orders().iter().skip(skip).all(|&o| o == cfg.order),
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
    assert_eq!(a.len(), theta.len());
    assert!(a.iter().any(|&g| g != 0.0), "{}: no gradient", cfg.arch);
    let mut probe = m.clone();
    let num = numerical_grad(
        |t| {
            set_params(&mut probe, t);
            loss(&mut probe, &adj, &x, &r, seed)
        },
        &theta,
        1e-6,
    );
    let (err, at) = max_rel_err(&a, &num);
    println!(
        "{} {:?} norm={} layers={} order={:?} sparse={sparse}: rel err {err:.3e}",
        cfg.arch,
        cfg.arch.settings(),
        cfg.norm,
        cfg.n_layers,
        cfg.order
    );
    assert!(
        err < TOL,
        "{} {:?} norm={} layers={} order={:?} sparse={sparse}: rel err {err} at {at} \
         (analytic {}, numerical {})",
        cfg.arch,
        cfg.arch.settings(),
        cfg.norm,
        cfg.n_layers,
        cfg.order,
        a[at],
        num[at]
    );
    param_names(&mut m)
}

/// The pass criterion of `docs/MATH.md` §12.
const TOL: f64 = 1e-6;

fn base(arch: Arch, n_layers: usize, norm: NormKind) -> ModelConfig {
    ModelConfig {
        hidden_dim: 4,
        dropout: 0.3,
        input_dropout: 0.2,
        norm,
        bias: true,
        ..ModelConfig::deep(arch, n_layers)
    }
}

#[test]
fn every_variant_matches_finite_differences() {
    for arch in Arch::deep() {
        for sparse in [false, true] {
            check(base(arch, 3, NormKind::None), sparse);
        }
    }
}

#[test]
fn normalised_variants_match_finite_differences() {
    for norm in ["batch", "pair"] {
        let norm: NormKind = norm.parse().unwrap();
        for arch in [Arch::GCN, Arch::RESIDUAL, Arch::Jk(JkMode::Attention)] {
            check(base(arch, 3, norm), false);
        }
    }
}

#[test]
fn single_layer_and_no_dropout_edge_cases() {
    check(base(Arch::GCN, 1, NormKind::None), true);
    check(base(Arch::GCNII, 1, NormKind::None), false);
    check(base(Arch::RESIDUAL, 2, NormKind::None), true);
    let mut c = base(Arch::Jk(JkMode::Concat), 2, NormKind::None);
    c.dropout = 0.0;
    c.input_dropout = 0.0;
    check(c, false);
}

/// Every variant with each order forced on every GCN convolution (GCNII has none: its
/// convolutions always aggregate, so the order changes nothing there), dense and sparse input,
/// with and without normalisation.
#[test]
fn every_variant_matches_finite_differences_with_each_order_forced() {
    for order in [Order::AggregateFirst, Order::TransformFirst, Order::Lean] {
        for arch in Arch::deep() {
            for sparse in [false, true] {
                check(
                    ModelConfig {
                        order,
                        ..base(arch, 3, NormKind::None)
                    },
                    sparse,
                );
            }
            if !matches!(arch, Arch::Gcnii(_)) {
                for norm in ["batch", "pair"] {
                    for sparse in [false, true] {
                        check(
                            ModelConfig {
                                order,
                                ..base(arch, 3, norm.parse().unwrap())
                            },
                            sparse,
                        );
                    }
                }
            }
        }
        check(
            ModelConfig {
                order,
                ..base(Arch::GCN, 1, NormKind::None)
            },
            true,
        );
        check(
            ModelConfig {
                order,
                ..base(Arch::RESIDUAL, 2, NormKind::None)
            },
            true,
        );
    }
}

/// SGC (logits = Â^K X W + b) through the whole model: the finite differences cover the
/// Linear's weight and bias, its only parameters, for K = 1, 2, 3, dense and sparse X.
#[test]
fn sgc_matches_finite_differences() {
    for k in [1, 2, 3] {
        for sparse in [false, true] {
            let names = check(
                ModelConfig {
                    arch: Arch::Sgc(SgcConfig { k }),
                    ..base(Arch::SGC, 0, NormKind::None)
                },
                sparse,
            );
            assert_eq!(names, ["1.linear.weight", "1.linear.bias"], "k {k}");
        }
    }
}

/// APPNP (an MLP, then K steps of Z ← (1−α)ÂZ + αH) through the whole model with dropout on
/// (input and hidden): the finite differences cover both Linear layers' weights and biases,
/// for K = 3 and 10, dense and sparse X, and for α = 0.1 (the paper's) and 0.5.
#[test]
fn appnp_matches_finite_differences() {
    for k in [3, 10] {
        for sparse in [false, true] {
            for alpha in [0.1, 0.5] {
                let names = check(
                    ModelConfig {
                        arch: Arch::Appnp(AppnpConfig { k, alpha }),
                        ..base(Arch::APPNP, 2, NormKind::None)
                    },
                    sparse,
                );
                assert_eq!(
                    names,
                    [
                        "0.linear.weight",
                        "0.linear.bias",
                        "2.linear.weight",
                        "2.linear.bias"
                    ],
                    "k {k} alpha {alpha}"
                );
            }
        }
    }
}

/// Â as a dense matrix.
fn dense_adj(adj: &NormAdj<f64>) -> Array2<f64> {
    let n = adj.n_nodes();
    let mut a = Array2::zeros((n, n));
    for (i, row) in adj.a().outer_iterator().enumerate() {
        for (j, &v) in row.iter() {
            a[[i, j]] = v;
        }
    }
    a
}

/// The evaluation logits of SGC and APPNP against their definitions, densely: SGC Â^K X W + b;
/// APPNP H = ReLU(X W₁ + b₁) W₂ + b₂, Z₀ = H, Z_{k+1} = (1−α)ÂZ_k + αH, logits Z_K.
#[test]
fn sgc_and_appnp_logits_match_their_definitions() {
    let adj = NormAdj::<f64>::new(&graph(), Norm::Symmetric);
    let a_hat = dense_adj(&adj);
    let n = adj.n_nodes();
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    for sparse in [false, true] {
        let x = features(n, 6, sparse, &mut rng);
        let xd = x.to_dense();
        for (arch, k) in [
            (Arch::SGC, 1),
            (Arch::SGC, 2),
            (Arch::APPNP, 3),
            (Arch::APPNP, 10),
        ] {
            let arch = match arch {
                Arch::Sgc(_) => Arch::Sgc(SgcConfig { k }),
                _ => Arch::Appnp(AppnpConfig { k, alpha: 0.2 }),
            };
            let cfg = ModelConfig {
                in_dim: 6,
                out_dim: 3,
                ..base(arch, 2, NormKind::None)
            };
            let mut m = cfg.build(&adj, &x, None, &mut rng).unwrap();
            m.visit_params(&mut |_, p| p.value.mapv_inplace(|_| rng.random_range(-1.0..1.0)));
            let mut ps: Vec<Array2<f64>> = Vec::new();
            m.visit_params(&mut |_, p| ps.push(p.value.clone()));
            let want = match arch {
                Arch::Sgc(_) => {
                    let mut h = xd.clone();
                    for _ in 0..k {
                        h = a_hat.dot(&h);
                    }
                    h.dot(&ps[0]) + ps[1].row(0)
                }
                _ => {
                    let h1 = (xd.dot(&ps[0]) + ps[1].row(0)).mapv(|v| v.max(0.0));
                    let h = h1.dot(&ps[2]) + ps[3].row(0);
                    let mut z = h.clone();
                    for _ in 0..k {
                        z = a_hat.dot(&z) * (1.0 - 0.2) + &h * 0.2;
                    }
                    z
                }
            };
            let got = m.predict(&adj, &x, Par::Seq).unwrap();
            let dev = got
                .iter()
                .zip(&want)
                .map(|(&a, &b)| (a - b).abs() / 1f64.max(b.abs()))
                .fold(0.0, f64::max);
            assert!(dev < 1e-12, "{arch} k={k} sparse={sparse}: {dev}");
        }
    }
}

#[test]
fn checkpointing_gives_identical_gradients_and_logits() {
    let adj = NormAdj::<f32>::new(&graph(), Norm::Symmetric);
    let n = adj.n_nodes();
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let x = Features::dense(Array2::from_shape_simple_fn((n, 5), || {
        rng.random_range(-1.0f32..1.0)
    }));
    for arch in Arch::deep() {
        for norm in [NormKind::None, NormKind::Batch] {
            let cfg = ModelConfig {
                in_dim: 5,
                out_dim: 3,
                hidden_dim: 6,
                norm,
                ..ModelConfig::deep(arch, 7)
            };
            let mut outs = Vec::new();
            for k in [0, 1, 2, 3, 7] {
                let c = ModelConfig {
                    checkpoint: k,
                    ..cfg.clone()
                };
                let mut m: Model<f32> = c
                    .build(&adj, &x, None, &mut ChaCha8Rng::seed_from_u64(1))
                    .unwrap();
                let mut drop = ChaCha8Rng::seed_from_u64(2);
                let mut z = None;
                m.train_pass(&adj, &x, &mut drop, Par::Rayon, &mut |mut dl, _| {
                    z = Some(dl.to_owned());
                    dl.mapv_inplace(|v| v.sin());
                    true
                })
                .unwrap();
                let mut gr = Vec::new();
                m.visit_params(&mut |_, p| gr.extend(p.grad.iter().copied()));
                let mut snap = Vec::new();
                m.snapshot_into(&mut snap);
                outs.push((z.unwrap(), gr, snap));
            }
            for o in &outs[1..] {
                assert_eq!(o.0, outs[0].0, "{arch} {norm}: logits differ");
                assert_eq!(o.1, outs[0].1, "{arch} {norm}: gradients differ");
                assert_eq!(o.2, outs[0].2, "{arch} {norm}: running statistics differ");
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
    for arch in Arch::all() {
        let cfg = ModelConfig {
            in_dim: 6,
            out_dim: 3,
            ..base(arch, 4, NormKind::Batch)
        };
        let mut m: Model<f64> = cfg.build(&adj, &x, None, &mut rng).unwrap();
        let mut snap = Vec::new();
        m.snapshot_into(&mut snap);
        let before = m.predict(&adj, &x, Par::Seq).unwrap();
        // A training pass moves BatchNorm's running statistics, a fake step moves weights.
        m.train_pass(&adj, &x, &mut rng, Par::Seq, &mut |_, _| false)
            .unwrap();
        m.visit_params(&mut |_, p| p.value.mapv_inplace(|v| v + 0.1));
        assert_ne!(m.predict(&adj, &x, Par::Seq).unwrap(), before);
        m.restore(&snap);
        assert_eq!(m.predict(&adj, &x, Par::Seq).unwrap(), before, "{arch}");
        let mut reps = Vec::new();
        m.visit_representations(&adj, &x, Par::Seq, &mut |l, h| {
            assert_eq!(l, reps.len(), "{arch}");
            reps.push(h.to_owned());
        })
        .unwrap();
        // Every hidden layer's output; SGC: Â^K X and the logits; APPNP: the MLP's hidden layer
        // and the propagated logits.
        let expected = match arch {
            Arch::Sgc(_) | Arch::Appnp(_) => 2,
            _ => 4,
        };
        assert_eq!(reps.len(), expected, "{arch}");
        assert_eq!(m.n_representations(), expected, "{arch}");
        if matches!(
            arch,
            Arch::Gcn(_) | Arch::Residual(_) | Arch::Sgc(_) | Arch::Appnp(_)
        ) {
            assert_eq!(reps[expected - 1], before, "{arch}");
        }
    }
}
