//! The stack's reused buffers, its activation checkpointing and its snapshots change nothing,
//! bit for bit, over several training steps: the training logits, every gradient, the
//! parameters and BatchNorm running statistics (`Model::snapshot_into`) and the evaluation
//! logits, for every architecture (`Arch::all()`), without normalisation, with BatchNorm and with
//! PairNorm (PN, and PN-SI / PN-SCS at other scales), on dense and sparse features, in both
//! convolution orders, with dropout on the input and between layers.
//!
//! Each case trains three copies of one model side by side with the same masks:
//! - `reused`: one model whose buffers are planned on the first pass and reused by every later
//!   pass (as the trainer runs it);
//! - `fresh`: a clone (`Model::clone` copies parameters, not buffers) released before every
//!   pass (`Model::release`), so each pass plans and allocates its buffers and caches anew;
//! - `checkpointed`: the same configuration with activation checkpointing (`checkpoint = 2`, or
//!   1 and 3 in the edge cases), which recomputes its segments in backward.
//!
//! Then the last snapshot is restored into a model with other weights (`Model::restore`) and
//! must give the same evaluation logits.
//!
//! What changed with the one-stack redesign: this file compared `DeepGcn`'s "workspace" passes
//! with its separate "fresh-buffer" passes (`fresh_train_pass`, `predict`, `snapshot`), which
//! no longer exist. The same properties are now checked in their new form: reused buffers vs a
//! released clone (fresh buffers), checkpointing k > 0 vs k = 0, and the snapshot type
//! (`Vec<Vec<F>>`) round trip. `ModelConfig` only describes PairNorm's PN with scale 1
//! (`NormKind::Pair(PairNormMode::Pn)`); the PN-SI and PN-SCS cases are stacks assembled by hand from the built
//! model's nodes (`Model::from_nodes`) with the PairNorm layers replaced, which cannot express
//! the configuration's checkpointed segments (`Model` exposes none), so those two run without
//! the `checkpointed` copy.

use ndarray::{ArrayView2, ArrayViewMut2};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use sparse_gcn::data::synthetic::CitationLike;
use sparse_gcn::data::Features;
use sparse_gcn::graph::{Norm, NormAdj};
use sparse_gcn::nn::pair_norm::PairNormMode;
use sparse_gcn::nn::{Arch, Model, ModelConfig, Node, NormKind, Order, PairNorm, Wiring};
use sparse_gcn::Par;

fn bits(a: ArrayView2<'_, f32>) -> Vec<u32> {
    a.iter().map(|v| v.to_bits()).collect()
}

/// Asserts `a == b`, naming the first element that differs (not printing every value).
#[track_caller]
fn same<T: PartialEq>(a: &[T], b: &[T], what: &str) {
    if a != b {
        let first = a.iter().zip(b).position(|(x, y)| x != y);
        panic!(
            "{what}: differ (lengths {} and {}, first difference at {first:?})",
            a.len(),
            b.len()
        );
    }
}

fn grads(m: &mut Model<f32>) -> Vec<Vec<u32>> {
    let mut out = Vec::new();
    m.visit_params(&mut |_, p| out.push(bits(p.grad.view())));
    out
}

fn snap_bits(m: &mut Model<f32>) -> Vec<Vec<u32>> {
    let mut s = Vec::new();
    m.snapshot_into(&mut s);
    s.iter()
        .map(|v| v.iter().map(|x| x.to_bits()).collect())
        .collect()
}

/// `model` with every PairNorm layer replaced by `pn` (its width kept), assembled by hand
/// (no checkpointing, no layer representations).
fn with_pair_norm(model: &Model<f32>, scale: f64, mode: PairNormMode) -> Model<f32> {
    assert_eq!(
        model.config().expect("an architecture's model").checkpoint,
        0,
        "a hand-assembled stack has no checkpointed segments"
    );
    let nodes: Vec<Node<f32>> = model
        .nodes()
        .iter()
        .map(|n| {
            if n.layer.name() == "pair_norm" {
                let dim = n.layer.spec(&[], 1).out_dim;
                Node {
                    layer: Box::new(PairNorm { scale, mode, dim }),
                    ..n.clone()
                }
            } else {
                n.clone()
            }
        })
        .collect();
    let wiring = Wiring {
        taps: Vec::new(),
        ..model.wiring()
    };
    Model::from_nodes(nodes, wiring, model.options()).unwrap()
}

/// How the PairNorm layers of a case are set.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Pn {
    /// As the configuration builds them.
    Config,
    /// Replaced by hand.
    Custom(f64, PairNormMode),
}

/// Trains the `reused`, `fresh` and (unless `pn` is custom) `checkpointed` copies of the model
/// of `cfg` for a few steps and asserts that everything agrees bit for bit.
fn check(cfg: &ModelConfig, pn: Pn, ck: usize, adj: &NormAdj<f32>, x: &Features<f32>, what: &str) {
    let cfg = ModelConfig {
        in_dim: x.n_cols(),
        out_dim: 5,
        ..cfg.clone()
    };
    let raw_build = |cfg: &ModelConfig, seed: u64| {
        cfg.build(adj, x, None, &mut ChaCha8Rng::seed_from_u64(seed))
            .unwrap()
    };
    let build = |cfg: &ModelConfig, seed: u64| {
        let m = raw_build(cfg, seed);
        match pn {
            Pn::Config => m,
            Pn::Custom(scale, mode) => with_pair_norm(&m, scale, mode),
        }
    };
    let mut reused = build(&cfg, 11);
    let mut fresh = reused.clone();
    let mut checkpointed = (pn == Pn::Config).then(|| {
        let c = ModelConfig {
            checkpoint: ck,
            ..cfg.clone()
        };
        build(&c, 11)
    });
    if let Pn::Custom(..) = pn {
        // The hand-assembled stack is the configured one when PairNorm is PN with scale 1.
        let mut plain = raw_build(&cfg, 11);
        let mut rebuilt = with_pair_norm(&plain, 1.0, PairNormMode::Pn);
        let (a, b) = (
            plain.predict(adj, x, Par::Rayon).unwrap(),
            rebuilt.predict(adj, x, Par::Rayon).unwrap(),
        );
        same(
            &bits(a.view()),
            &bits(b.view()),
            &format!("{what}: the hand-assembled stack"),
        );
    }
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut snap = Vec::new();
    for step in 0..3 {
        // The loss gradient: any fixed function of the logits.
        let dloss = |lg: ArrayView2<'_, f32>, mut dl: ArrayViewMut2<'_, f32>| {
            dl.assign(&lg.mapv(|v| (v * 0.7).tanh() * 0.05 + 0.01));
        };
        let pass = |m: &mut Model<f32>, r: &mut ChaCha8Rng| {
            m.zero_grad();
            let mut cap = Vec::new();
            m.train_pass(adj, x, r, Par::Rayon, &mut |z, _| {
                cap = bits(z.view());
                let lg = z.to_owned();
                dloss(lg.view(), z);
                true
            })
            .unwrap();
            assert!(!cap.is_empty(), "{what}: no logits");
            cap
        };
        // Every copy draws the same masks: each pass starts from the same stream position.
        let mut next = rng.clone();
        let want = pass(&mut reused, &mut next);
        fresh.release();
        let got_fresh = pass(&mut fresh, &mut rng.clone());
        same(
            &want,
            &got_fresh,
            &format!("{what}, step {step}: training logits (fresh buffers)"),
        );
        let want_grads = grads(&mut reused);
        same(
            &want_grads,
            &grads(&mut fresh),
            &format!("{what}, step {step}: gradients (fresh)"),
        );
        if let Some(c) = checkpointed.as_mut() {
            let got = pass(c, &mut rng.clone());
            same(
                &want,
                &got,
                &format!("{what}, step {step}: training logits (checkpointed)"),
            );
            same(
                &want_grads,
                &grads(c),
                &format!("{what}, step {step}: gradients (checkpointed)"),
            );
        }
        rng = next;
        let mut models: Vec<&mut Model<f32>> = vec![&mut reused, &mut fresh];
        if let Some(c) = checkpointed.as_mut() {
            models.push(c);
        }
        for m in models {
            m.visit_params(&mut |_, p| {
                let g = p.grad.clone();
                p.value.scaled_add(-0.5, &g);
            });
        }
        reused.snapshot_into(&mut snap);
        let want_snap = snap_bits(&mut reused);
        same(
            &want_snap,
            &snap_bits(&mut fresh),
            &format!("{what}, step {step}: snapshots (fresh)"),
        );
        let mut ev = Vec::new();
        reused
            .eval_pass(adj, x, Par::Rayon, &mut |lg, _| ev = bits(lg))
            .unwrap();
        fresh.release();
        let got = fresh.predict(adj, x, Par::Rayon).unwrap();
        same(
            &ev,
            &bits(got.view()),
            &format!("{what}, step {step}: evaluation logits (fresh)"),
        );
        if let Some(c) = checkpointed.as_mut() {
            same(
                &want_snap,
                &snap_bits(c),
                &format!("{what}, step {step}: snapshots (checkpointed)"),
            );
            let got = c.predict(adj, x, Par::Rayon).unwrap();
            same(
                &ev,
                &bits(got.view()),
                &format!("{what}, step {step}: evaluation logits (checkpointed)"),
            );
        }
    }
    // The last snapshot restored into a model with other weights gives the same logits.
    let mut other = build(&cfg, 99);
    other.restore(&snap);
    let want = reused.predict(adj, x, Par::Rayon).unwrap();
    let got = other.predict(adj, x, Par::Rayon).unwrap();
    same(
        &bits(want.view()),
        &bits(got.view()),
        &format!("{what}: restored snapshot"),
    );
    reused.release();
}

fn data(n_nodes: usize, seed: u64) -> (NormAdj<f32>, Features<f32>, Features<f32>) {
    let mut d = CitationLike {
        n_nodes,
        n_classes: 5,
        ..Default::default()
    }
    .generate(seed)
    .unwrap();
    d.features.row_normalize();
    let adj = NormAdj::<f32>::new(&d.graph, Norm::Symmetric);
    let dense = Features::dense(d.features.to_dense());
    let sparse = Features::dense(d.features.to_dense()).into_sparse_if(1.0);
    assert!(sparse.is_sparse());
    (adj, dense, sparse)
}

#[test]
fn reused_fresh_and_checkpointed_passes_agree_bit_for_bit() {
    let (adj, dense, sparse) = data(150, 2);
    let norms = [
        (NormKind::None, Pn::Config),
        (NormKind::Batch, Pn::Config),
        (NormKind::Pair(PairNormMode::Pn), Pn::Config),
        (
            NormKind::Pair(PairNormMode::Pn),
            Pn::Custom(1.5, PairNormMode::PnSi),
        ),
        (
            NormKind::Pair(PairNormMode::Pn),
            Pn::Custom(0.8, PairNormMode::PnScs),
        ),
    ];
    for arch in Arch::all() {
        for (norm, pn) in norms {
            // Normalisation is a knob of the GCN, residual and JK stacks only.
            let has_norm = matches!(arch, Arch::Gcn(_) | Arch::Residual(_) | Arch::Jk(_));
            if !has_norm && norm != NormKind::None {
                continue;
            }
            for (fname, x) in [("dense", &dense), ("sparse", &sparse)] {
                for order in [Order::AggregateFirst, Order::TransformFirst, Order::Lean] {
                    let cfg = ModelConfig {
                        hidden_dim: 12,
                        norm,
                        order,
                        bias: true,
                        dropout: 0.3,
                        input_dropout: 0.4,
                        ..ModelConfig::deep(arch, 3)
                    };
                    let what = format!("{arch} {norm} {pn:?} {fname} {order:?}");
                    check(&cfg, pn, 2, &adj, x, &what);
                }
            }
        }
    }
}

#[test]
fn edge_cases_agree_bit_for_bit() {
    let (adj, dense, sparse) = data(120, 7);
    for (fname, x) in [("dense", &dense), ("sparse", &sparse)] {
        for arch in Arch::all() {
            let min = if arch == Arch::RESIDUAL { 2 } else { 1 };
            for n_layers in [min, 4] {
                for (dropout, input_dropout) in [(0.0, 0.0), (0.5, 0.0), (0.0, 0.5)] {
                    // Residual with width = in_dim on dense features: the identity skip.
                    let hidden_dim = if arch == Arch::RESIDUAL && fname == "dense" {
                        x.n_cols()
                    } else {
                        8
                    };
                    let cfg = ModelConfig {
                        hidden_dim,
                        norm: NormKind::Batch,
                        dropout,
                        input_dropout,
                        ..ModelConfig::deep(arch, n_layers)
                    };
                    for ck in [1, 3] {
                        let what = format!(
                            "{arch} {fname} L={n_layers} p={dropout}/{input_dropout} checkpoint {ck}"
                        );
                        check(&cfg, Pn::Config, ck, &adj, x, &what);
                    }
                }
            }
        }
    }
}
