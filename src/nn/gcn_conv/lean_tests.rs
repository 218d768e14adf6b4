//! The lean order: gradients against finite differences (with and without ∂L/∂in over the
//! input, in one block and in several), and bit for bit its forward is AggregateFirst's and its
//! backward TransformFirst's, for any block size and thread count.

use ndarray::Array2;

use super::*;
use crate::data::synthetic::CitationLike;
use crate::graph::{Direction, Graph, Norm, NormAdj};
use crate::testing::harness::{bits, params, random, rng, same_for_any_thread_count, small_adjs};
use crate::testing::harness::{zero_grads, Harness, In};

/// A graph of `n` nodes, undirected and symmetric-normalised, and directed and row-normalised
/// (Âᵀ ≠ Â).
fn adjs<F: Scalar>(n: usize) -> Vec<(&'static str, NormAdj<F>)> {
    let g = CitationLike {
        n_nodes: n,
        ..Default::default()
    }
    .generate(3)
    .unwrap()
    .graph;
    // Each undirected edge once, from its lower end: a directed graph.
    let edges: Vec<(u32, u32)> = (0..n)
        .flat_map(|i| g.neighbors(i).iter().map(move |&j| (i as u32, j)))
        .filter(|&(i, j)| i < j)
        .collect();
    let directed = Graph::try_from_edges(n, &edges, Direction::Directed).unwrap();
    vec![
        ("undirected, symmetric", NormAdj::new(&g, Norm::Symmetric)),
        ("directed, row", NormAdj::new(&directed, Norm::Row)),
    ]
}

/// A layer of `order` with Glorot weights and a random bias, the same for every order.
fn layer<F: Scalar>(a: usize, c: usize, order: Order, block: usize) -> GcnConv<F> {
    let mut r = rng(11);
    let mut l = GcnConv::<F>::new(a, c, true, order, &mut r);
    if let Some(b) = &mut l.bias {
        b.value = random(1, c, &mut r).mapv(F::from_f64_lossy);
    }
    l.set_lean_block(block);
    l
}

#[test]
fn lean_gradients_match_finite_differences() {
    // 200 nodes: a grid of 64 rows, so a block of 64 gives four blocks (the last of 8 rows).
    let mut cases = small_adjs().to_vec();
    cases.extend(adjs::<f64>(200));
    for (name, adj) in &cases {
        let n = adj.n_nodes();
        for block in [64, 8192] {
            // (No dH: the first layer's blocked backward against the kept input.)
            for (over, need) in [(true, true), (false, true), (false, false)] {
                for (a, c) in [(3, 5), (5, 3)] {
                    let mut r = rng(7);
                    let x = random(n, a, &mut r);
                    let g = random(n, c, &mut r);
                    let what = format!("{name}, block {block}, over {over}, dH {need}, {a}→{c}");
                    let h = if over {
                        Harness::new(adj)
                    } else {
                        Harness::new(adj).refuse_over_input()
                    };
                    let mut l = layer::<f64>(a, c, Order::Lean, block);
                    h.grad_check(&mut l, &[In::Dense(x)], &[need], &g, &what);
                }
            }
        }
    }
}

/// Output, weight and bias gradients and ∂L/∂H (empty when not needed) of one forward and
/// backward call.
type Run = (Vec<u64>, Vec<Vec<u64>>, Vec<u64>);

fn run_for(
    l: &mut GcnConv<f32>,
    x: &Array2<f32>,
    g: &Array2<f32>,
    h: Harness<'_, f32>,
    need: bool,
) -> Run {
    zero_grads(l);
    let (out, din) = h.run(l, &[In::Dense(x.clone())], g, &[need]);
    let grads = params(l, true).iter().map(|(_, p)| bits(p)).collect();
    let din = din[0].as_ref().map(bits).unwrap_or_default();
    (bits(&out), grads, din)
}

fn run(l: &mut GcnConv<f32>, x: &Array2<f32>, g: &Array2<f32>, h: Harness<'_, f32>) -> Run {
    run_for(l, x, g, h, true)
}

#[test]
fn lean_is_aggregate_first_forward_and_transform_first_backward_bit_for_bit() {
    // 1,000 nodes: a grid of 128 rows; blocks of 128, 256 and one block.
    for (name, adj) in &adjs::<f32>(1000) {
        let n = adj.n_nodes();
        let mut r = rng(5);
        let x = random(n, 24, &mut r).mapv(|v| v as f32);
        let g = random(n, 16, &mut r).mapv(|v| v as f32);
        let (agg_out, _, _) = run(
            &mut layer(24, 16, Order::AggregateFirst, 8192),
            &x,
            &g,
            Harness::new(adj),
        );
        let (_, tf_grads, tf_din) = run(
            &mut layer(24, 16, Order::TransformFirst, 8192),
            &x,
            &g,
            Harness::new(adj),
        );
        for block in [128, 256, 8192] {
            for over in [true, false] {
                let what = format!("{name}, block {block}, over {over}");
                same_for_any_thread_count(
                    |par| {
                        let h = Harness {
                            par,
                            over_input: over,
                            ..Harness::new(adj)
                        };
                        let got = run(&mut layer(24, 16, Order::Lean, block), &x, &g, h);
                        assert!(
                            got.0 == agg_out,
                            "{what}: the output is not AggregateFirst's"
                        );
                        assert!(
                            got.1 == tf_grads && got.2 == tf_din,
                            "{what}: the gradients are not TransformFirst's"
                        );
                        got
                    },
                    &what,
                );
            }
            // Without dH (the first layer): the weight and bias gradients, in blocks.
            let what = format!("{name}, block {block}, no dH");
            same_for_any_thread_count(
                |par| {
                    let h = Harness {
                        par,
                        ..Harness::new(adj)
                    };
                    let got = run_for(&mut layer(24, 16, Order::Lean, block), &x, &g, h, false);
                    assert!(got.0 == agg_out && got.2.is_empty(), "{what}: the output");
                    assert!(
                        got.1 == tf_grads,
                        "{what}: the gradients are not TransformFirst's"
                    );
                    got
                },
                &what,
            );
        }
    }
}

#[test]
fn lean_asks_for_one_block_of_scratch_when_dh_goes_over_the_input() {
    let l = layer::<f32>(24, 16, Order::Lean, 256);
    let dense = |grad| InputDesc {
        sparse: false,
        fixed_in_training: false,
        grad,
        forward_only: false,
        src_rows: 0,
    };
    let spec = |l: &GcnConv<f32>, d: InputDesc| Layer::<f32>::spec(l, &[d], 1000);
    let s = spec(&l, dense(true));
    assert!(s.keeps_input && s.saved.is_empty());
    assert!(s.needs.a_blocks && s.needs.at_blocks && !s.needs.sparse_product);
    assert_eq!(s.scratch_of(true).f, 256 * 24, "one block with dH over H");
    assert_eq!(
        s.scratch_of(false).f,
        1000 * 16,
        "P whole with dH not over H"
    );
    // No dH (the first layer): one block of P, the larger forward block here.
    assert_eq!(
        spec(&l, dense(false)).scratch.f,
        256 * 24,
        "one block without dH"
    );
    let l = layer::<f32>(16, 24, Order::Lean, 256);
    assert_eq!(
        spec(&l, dense(false)).scratch.f,
        256 * 24,
        "one block of P without dH"
    );
    // On sparse features the lean order is TransformFirst's.
    let sparse = InputDesc {
        sparse: true,
        fixed_in_training: false,
        grad: false,
        forward_only: false,
        src_rows: 0,
    };
    assert_eq!(l.order_on(sparse), Order::TransformFirst);
    let s = spec(&l, sparse);
    assert_eq!(s.grad, GradMode::InPlace);
    assert!(!s.needs.at_blocks && s.keeps_input);
    assert_eq!(s.scratch.f, 1000 * 24, "T = H·W whole");
}
