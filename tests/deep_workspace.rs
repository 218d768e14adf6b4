//! `DeepGcn`'s trainer passes on reused buffers ([`Model::train_pass`], [`Model::eval_pass`],
//! [`Model::snapshot_into`]) give, bit for bit, what the fresh-buffer passes give
//! ([`Model::fresh_train_pass`], [`Model::predict`], [`Model::snapshot`]): the logits, every
//! gradient, the BatchNorm running statistics and the evaluation logits, over several steps,
//! for every variant, with and without BatchNorm and PairNorm (each PairNorm mode), on dense
//! and sparse features, in both convolution orders.

use ndarray::{Array2, ArrayView2, ArrayViewMut2};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use sparse_gcn::graph::synthetic::CitationLike;
use sparse_gcn::graph::{Features, Norm, NormAdj};
use sparse_gcn::nn::norm::{PairNorm, PairNormMode};
use sparse_gcn::nn::{DeepConfig, DeepGcn, Model, NormKind, Order, Variant};
use sparse_gcn::Par;

fn bits(a: ArrayView2<'_, f32>) -> Vec<u32> {
    a.iter().map(|v| v.to_bits()).collect()
}

fn grads(m: &mut DeepGcn<f32>) -> Vec<Vec<u32>> {
    let mut out = Vec::new();
    m.visit_params(&mut |_, p| out.push(bits(p.grad.view())));
    out
}

fn snap_bits(s: &[Array2<f32>]) -> Vec<((usize, usize), Vec<u32>)> {
    s.iter().map(|a| (a.dim(), bits(a.view()))).collect()
}

/// Trains two copies of the model for a few steps, one through the workspace and one through
/// fresh buffers, and asserts that everything agrees bit for bit.
fn check(cfg: &DeepConfig, adj: &NormAdj<f32>, x: &Features<f32>, what: &str) {
    let mut init = ChaCha8Rng::seed_from_u64(11);
    let cfg = DeepConfig {
        in_dim: x.n_cols(),
        out_dim: 5,
        ..cfg.clone()
    };
    let mut a = cfg.init(adj, x, &mut init).unwrap();
    let mut b = a.clone();
    let mut ra = ChaCha8Rng::seed_from_u64(3);
    let mut rb = ra.clone();
    let mut snap = Vec::new();
    for step in 0..3 {
        // The loss gradient: any fixed function of the logits.
        let dloss = |lg: ArrayView2<'_, f32>, mut dl: ArrayViewMut2<'_, f32>| {
            dl.assign(&lg.mapv(|v| (v * 0.7).tanh() * 0.05 + 0.01));
        };
        a.zero_grad();
        b.zero_grad();
        let (mut cap_a, mut cap_b) = (Vec::new(), Vec::new());
        a.train_pass(adj, x, &mut ra, Par::Rayon, &mut |lg, dl| {
            cap_a = bits(lg);
            dloss(lg, dl);
            true
        });
        b.fresh_train_pass(adj, x, &mut rb, Par::Rayon, &mut |lg, dl| {
            cap_b = bits(lg);
            dloss(lg, dl);
            true
        });
        assert!(!cap_a.is_empty(), "{what}: no logits");
        assert_eq!(cap_a, cap_b, "{what}, step {step}: training logits differ");
        assert_eq!(
            grads(&mut a),
            grads(&mut b),
            "{what}, step {step}: gradients differ"
        );
        for m in [&mut a, &mut b] {
            m.visit_params(&mut |_, p| {
                let g = p.grad.clone();
                p.value.scaled_add(-0.5, &g);
            });
        }
        a.snapshot_into(&mut snap);
        assert_eq!(
            snap_bits(&snap),
            snap_bits(&b.snapshot()),
            "{what}, step {step}: snapshots differ"
        );
        let mut ev = Vec::new();
        a.eval_pass(adj, x, Par::Rayon, &mut |lg| ev = bits(lg));
        let want = b.predict(adj, x, Par::Rayon);
        assert_eq!(
            ev,
            bits(want.view()),
            "{what}, step {step}: evaluation logits differ"
        );
    }
    a.release_workspace();
}

#[test]
fn workspace_passes_equal_fresh_passes_bit_for_bit() {
    let mut d = CitationLike {
        n_nodes: 150,
        n_classes: 5,
        ..Default::default()
    }
    .generate(2)
    .unwrap();
    d.features.row_normalize();
    let adj = NormAdj::<f32>::new(&d.graph, Norm::Symmetric);
    let dense = Features::Dense(d.features.to_dense());
    let sparse = Features::Dense(d.features.to_dense()).into_sparse_if(1.0);
    assert!(sparse.is_sparse());
    let norms = [
        NormKind::None,
        NormKind::Batch,
        NormKind::Pair(PairNorm::default()),
        NormKind::Pair(PairNorm {
            scale: 1.5,
            mode: PairNormMode::PnSi,
        }),
        NormKind::Pair(PairNorm {
            scale: 0.8,
            mode: PairNormMode::PnScs,
        }),
    ];
    for variant in Variant::ALL {
        for norm in norms {
            for (fname, x) in [("dense", &dense), ("sparse", &sparse)] {
                for order in [Order::AggregateFirst, Order::TransformFirst] {
                    let cfg = DeepConfig {
                        hidden_dim: 12,
                        n_layers: 3,
                        variant,
                        norm,
                        order,
                        bias: true,
                        dropout: 0.3,
                        input_dropout: 0.4,
                        ..Default::default()
                    };
                    let what = format!("{variant} {norm:?} {fname} {order:?}");
                    check(&cfg, &adj, x, &what);
                }
            }
        }
    }
}

#[test]
fn workspace_edge_cases_equal_fresh_passes() {
    let mut d = CitationLike {
        n_nodes: 120,
        n_classes: 5,
        ..Default::default()
    }
    .generate(7)
    .unwrap();
    d.features.row_normalize();
    let adj = NormAdj::<f32>::new(&d.graph, Norm::Symmetric);
    let dense = Features::Dense(d.features.to_dense());
    let sparse = Features::Dense(d.features.to_dense()).into_sparse_if(1.0);
    for (fname, x) in [("dense", &dense), ("sparse", &sparse)] {
        for variant in Variant::ALL {
            let min = if variant == Variant::Residual { 2 } else { 1 };
            for n_layers in [min, 4] {
                for (dropout, input_dropout) in [(0.0, 0.0), (0.5, 0.0), (0.0, 0.5)] {
                    // Residual with width = in_dim on dense features: the identity skip.
                    let hidden_dim = if variant == Variant::Residual && fname == "dense" {
                        x.n_cols()
                    } else {
                        8
                    };
                    let cfg = DeepConfig {
                        hidden_dim,
                        n_layers,
                        variant,
                        norm: NormKind::Batch,
                        dropout,
                        input_dropout,
                        ..Default::default()
                    };
                    let what =
                        format!("{variant} {fname} L={n_layers} p={dropout}/{input_dropout}");
                    check(&cfg, &adj, x, &what);
                }
            }
        }
    }
}
