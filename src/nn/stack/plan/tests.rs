//! Plans of whole models: the buffers a GCN needs in each order, with and without
//! checkpointing.

use super::Plan;
use crate::data::synthetic::CitationLike;
use crate::graph::{Norm, NormAdj};
use crate::input::Features;
use crate::nn::{Arch, ModelConfig, Order};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The plan of a 3-layer GCN (16 → 32 → 32 → 5, dropout on the input and between layers)
/// in `order` on a citation-like graph of `n` nodes.
fn gcn_plan(n: usize, order: Order) -> Plan {
    gcn_plan_checkpointed(n, order, 0)
}

/// [`gcn_plan`] with `--checkpoint-every k` (0: none).
fn gcn_plan_checkpointed(n: usize, order: Order, k: usize) -> Plan {
    gcn_plan_for(n, order, k, false)
}

/// [`gcn_plan_checkpointed`], for evaluation only with `eval`.
fn gcn_plan_for(n: usize, order: Order, k: usize, eval: bool) -> Plan {
    let d = CitationLike {
        n_nodes: n,
        n_classes: 5,
        ..Default::default()
    }
    .generate(1)
    .unwrap();
    let adj = NormAdj::<f32>::new(&d.graph, Norm::Symmetric);
    let x = Features::dense(ndarray::Array2::from_shape_fn((n, 16), |(i, j)| {
        ((i * 7 + j) % 5) as f32
    }));
    let cfg = ModelConfig {
        in_dim: 16,
        hidden_dim: 32,
        out_dim: 5,
        order,
        dropout: 0.5,
        input_dropout: 0.5,
        checkpoint: k,
        ..ModelConfig::deep(Arch::GCN, 3)
    };
    let mut m = cfg
        .build(&adj, &x, None, &mut ChaCha8Rng::seed_from_u64(0))
        .unwrap();
    m.plan(&[n], &x, eval).expect("a plan")
}

/// Evaluation only, a 3-layer GCN holds two n × hidden buffers (layer-wise inference: a
/// convolution's input and its output; transform-first's H·W in the second while Â·(H·W)
/// goes over H, aggregate-first's Â·H a block at a time), the logits in one of them; no X̃,
/// no gradient, no saved Â·H, and at most one saved-state buffer shared by every call,
/// against five pool buffers and a saved state per call for training.
#[test]
fn an_evaluation_plan_holds_two_layers_values() {
    // (n above a few blocks, so that a block is not the whole of a value.)
    let (n, h) = (40000, 32);
    let block = crate::nn::gcn_conv::LEAN_BLOCK * h;
    for order in [Order::TransformFirst, Order::AggregateFirst] {
        let train = gcn_plan_for(n, order, 0, false);
        let eval = gcn_plan_for(n, order, 0, true);
        let total = |p: &Plan| p.pool_sizes.iter().sum::<usize>();
        assert!(
            total(&eval) <= 2 * n * h + block,
            "{order:?}: {:?}",
            eval.pool_sizes
        );
        assert!(
            eval.saved_sizes.iter().all(|r| r.f == 0),
            "{order:?}: {:?}",
            eval.saved_sizes
        );
        let saved = |p: &Plan| p.saved_sizes.iter().map(|r| r.f).sum::<usize>();
        assert!(
            total(&eval) + saved(&eval) < total(&train) + saved(&train),
            "{order:?}: {:?} {:?} vs {:?} {:?}",
            eval.pool_sizes,
            eval.saved_sizes,
            train.pool_sizes,
            train.saved_sizes
        );
        assert!(
            eval.saved_sizes.len() <= 1,
            "{order:?}: {:?}",
            eval.saved_sizes
        );
        assert_eq!(eval.bwd.len(), train.bwd.len());
        assert!(eval
            .specs
            .iter()
            .zip(&train.specs)
            .all(|(e, t)| e.out_dim == t.out_dim));
        // Transform-first's output goes over its input in the second and last layers (the
        // first reads X, not a buffer of the pool).
        let over: Vec<bool> = eval.fwd.iter().map(|c| c.over_input).collect();
        let convs: Vec<bool> = train.fwd.iter().map(|c| c.over_input).collect();
        assert!(!convs.contains(&true), "training keeps H: {convs:?}");
        assert_eq!(
            over.iter().filter(|&&o| o).count(),
            2 * usize::from(order == Order::TransformFirst),
            "{order:?}: {over:?}"
        );
    }
}

/// A 3-layer GCN (transform first, dropout on the input and between layers) needs at any
/// event three n × hidden buffers: in forward H₁, the next layer's H·W and its output; in
/// backward the two kept inputs and the gradient, then a dead input hosts Âᵀ·G. The pool
/// holds exactly those three (the first layer's scratch and the logits' fit in them), X̃
/// (kept for the first layer's weight gradient) and the logits: values, gradients and
/// scratch share it. (Planned apart, the gradients took a fourth n × hidden buffer.) The
/// lean order needs two.
#[test]
fn values_gradients_and_scratch_share_one_pool() {
    let (n, h, c) = (60, 32, 5);
    let plan = gcn_plan(n, Order::TransformFirst);
    let mut sizes = plan.pool_sizes.clone();
    sizes.sort_unstable();
    assert_eq!(sizes, vec![n * c, n * 16, n * h, n * h, n * h]);
    assert_eq!(plan.scratch.f, 0, "F scratch is lent from the pool");
    // The lean order: in forward the input and the output, in backward the input, which
    // takes ∂L/∂in, and the gradient: two n × hidden buffers (n above a few blocks, so that
    // a block is not the whole of a value). The first layer keeps X̃ (16 wide) for its
    // weight gradient and saves nothing.
    let n = 40000;
    let plan = gcn_plan(n, Order::Lean);
    let mut sizes = plan.pool_sizes.clone();
    sizes.sort_unstable();
    // (The logits' gradient takes the logits' buffer; one block of scratch.)
    let block = crate::nn::gcn_conv::LEAN_BLOCK * h;
    assert_eq!(sizes, vec![n * c, block, n * 16, n * h, n * h]);
    assert!(
        plan.saved_sizes.iter().all(|r| r.f == 0),
        "no S = Â·X̃ saved"
    );
    let over: Vec<bool> = plan.bwd.iter().map(|b| b.over_input.is_some()).collect();
    assert_eq!(
        over,
        [false, false, true, false, true],
        "dH over H in layers 1 and 2"
    );
}

/// Under checkpointing, X̃ is drawn again just before the first layer's backward instead of
/// being held through the pass: in the lean order it then shares a hidden buffer, and the
/// pool is two n × hidden buffers, the logits and a block.
#[test]
fn checkpointing_draws_the_dropped_input_again_for_backward() {
    use super::Ev;
    let (n, h, c) = (40000, 32, 5);
    let mut plan = gcn_plan_checkpointed(n, Order::Lean, 1);
    let at = plan.events.iter().position(|e| *e == Ev::RecInput);
    let bwd0 = plan.events.iter().position(|e| *e == Ev::Bwd(0));
    assert!(
        at.is_some() && at.map(|t| t + 1) == bwd0,
        "{:?}",
        plan.events
    );
    assert!(plan.xd_rec_slot.is_some() && plan.xd_slot.is_some());
    // (Here the redraw reuses the forward draw's buffer, a hidden value's in between; in
    // general each read takes its own instance's.)
    let mut other = plan.xd_slot.map(|s| s + 100);
    std::mem::swap(&mut other, &mut plan.xd_rec_slot);
    assert_eq!(plan.xd_slot(false), plan.xd_slot);
    assert_eq!(plan.xd_slot(true), plan.xd_rec_slot);
    plan.xd_rec_slot = other;
    let mut sizes = plan.pool_sizes.clone();
    sizes.sort_unstable();
    let block = crate::nn::gcn_conv::LEAN_BLOCK * h;
    assert_eq!(sizes, vec![n * c, block, n * h, n * h]);
    // Not checkpointed: drawn once.
    for order in [Order::Lean, Order::TransformFirst] {
        let plan = gcn_plan_checkpointed(n, order, 0);
        assert!(!plan.events.contains(&Ev::RecInput), "{order:?}");
        assert!(plan.xd_rec_slot.is_none());
        assert_eq!(plan.xd_slot(true), plan.xd_slot, "{order:?}: one X̃ buffer");
    }
}

/// Every layer's requests grow with the rows, so that buffers planned for N rows hold every
/// pass over fewer (for every architecture and normalisation, on dense and sparse input, in
/// every order).
#[test]
fn every_layer_s_requests_grow_with_the_rows() {
    use crate::nn::pair_norm::PairNormMode;
    use crate::nn::NormKind;
    let d = CitationLike {
        n_nodes: 300,
        n_classes: 5,
        ..Default::default()
    }
    .generate(1)
    .unwrap();
    let adj = NormAdj::<f32>::new(&d.graph, Norm::Symmetric);
    let sparse = d.features.clone().into_sparse_if(1.0);
    let dense = Features::dense(d.features.to_dense());
    for arch in Arch::all() {
        for norm in [
            NormKind::None,
            NormKind::Batch,
            NormKind::Pair(PairNormMode::PnSi),
        ] {
            for order in [Order::AggregateFirst, Order::TransformFirst, Order::Lean] {
                for x in [&sparse, &dense] {
                    let cfg = ModelConfig {
                        in_dim: x.n_cols(),
                        out_dim: 5,
                        hidden_dim: 8,
                        order,
                        norm,
                        input_dropout: 0.0,
                        ..ModelConfig::deep(arch, 2)
                    };
                    let mut m = cfg
                        .build(&adj, x, None, &mut ChaCha8Rng::seed_from_u64(0))
                        .unwrap();
                    let plan = m.plan(&[300], x, false).expect("a plan");
                    for (i, node) in m.nodes().iter().enumerate() {
                        let descs = &plan.descs[i];
                        let mut prev = node.layer.spec(descs, 1);
                        for n in (2..20_000).step_by(37) {
                            let s = node.layer.spec(descs, n);
                            for (a, b) in [
                                (prev.saved, s.saved),
                                (prev.scratch, s.scratch),
                                (prev.scratch_of(true), s.scratch_of(true)),
                            ] {
                                assert!(
                                    a.f <= b.f && a.u8 <= b.u8 && a.f64 <= b.f64,
                                    "{arch} {norm} {order}: node {i} ({}) at {n} rows",
                                    node.layer.name()
                                );
                            }
                            prev = s;
                        }
                    }
                }
            }
        }
    }
}
