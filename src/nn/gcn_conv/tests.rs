//! GcnConv in every order: finite differences, the caches, the orders against each other, bits for any thread count, and the cost model.

use ndarray::{array, Array2};

use super::*;
use crate::graph::{Direction, Graph, Norm, NormAdj};
use crate::input::FeaturesRef;
use crate::nn::Mode;
use crate::testing::harness::{bits, citation, params, random, rng, same_for_any_thread_count};
use crate::testing::harness::{small_adjs, zero_grads, Harness, In};

const ORDERS: [Order; 2] = [Order::AggregateFirst, Order::TransformFirst];

/// A layer with Glorot weights and (if any) a random bias.
fn layer(a: usize, c: usize, bias: bool, order: Order, seed: u64) -> GcnConv<f64> {
    let mut r = rng(seed);
    let mut l = GcnConv::new(a, c, bias, order, &mut r);
    if let Some(b) = &mut l.bias {
        b.value = random(1, c, &mut r);
    }
    l
}

fn close(a: &Array2<f64>, b: &Array2<f64>, what: &str) {
    assert!(
        a.dim() == b.dim() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12),
        "{what}: {a} vs {b}"
    );
}

#[test]
fn dense_input_gradients_match_finite_differences() {
    for (name, adj) in &small_adjs() {
        let n = adj.n_nodes();
        for order in ORDERS {
            for bias in [false, true] {
                for (a, c) in [(3, 5), (5, 3)] {
                    let mut r = rng(7);
                    let x = random(n, a, &mut r);
                    let g = random(n, c, &mut r);
                    let what = format!("{name}, {order}, bias {bias}, {a}→{c}");
                    let mut l = layer(a, c, bias, order, 1);
                    Harness::new(adj).grad_check(&mut l, &[In::Dense(x)], &[true], &g, &what);
                }
            }
        }
    }
}

#[test]
fn first_layer_weight_gradients_sparse_or_dense_fixed_or_not() {
    // No input gradient (the model's input): dW and db only, for sparse and dense X, with
    // and without the fixed input (AggregateFirst then keeps S = Â·X across calls); every
    // variant gives the output and gradients of the dense layer to 1e-12.
    for (name, adj) in &small_adjs() {
        let n = adj.n_nodes();
        let mut r = rng(3);
        let mut x = random(n, 6, &mut r);
        x.mapv_inplace(|v| if v.abs() < 0.6 { 0.0 } else { v });
        x.row_mut(4).fill(0.0);
        let g = random(n, 3, &mut r);
        for order in ORDERS {
            for bias in [false, true] {
                let mut reference = layer(6, 3, bias, order, 2);
                let (want, _) =
                    Harness::new(adj).run(&mut reference, &[In::Dense(x.clone())], &g, &[true]);
                let want_grads = params(&mut reference, true);
                for fixed in [false, true] {
                    for input in [In::Dense(x.clone()), In::sparse(&x)] {
                        let sparse = matches!(input, In::Sparse(_));
                        let what =
                            format!("{name}, {order}, bias {bias}, fixed {fixed}, sparse {sparse}");
                        let h = if fixed {
                            Harness::new(adj).fixed()
                        } else {
                            Harness::new(adj)
                        };
                        let mut l = layer(6, 3, bias, order, 2);
                        let (out, _) = h.grad_check(&mut l, &[input], &[false], &g, &what);
                        close(&out, &want, &what);
                        // grad_check ran backward twice.
                        for ((p, got), (_, w)) in params(&mut l, true).iter().zip(&want_grads) {
                            close(got, &(w * 2.0), &format!("{what}: {p}"));
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn the_fixed_input_cache_is_used_only_on_the_fixed_input() {
    // AggregateFirst keeps Â·X from a fixed-input call: a later fixed call reuses it (here
    // even given other values, which the stack never does), a call on other data (a
    // training pass on dropped features) does not, and `release` forgets it.
    let [_, (_, adj)] = &small_adjs();
    let n = adj.n_nodes();
    let mut r = rng(5);
    let (x1, x2) = (random(n, 4, &mut r), random(n, 4, &mut r));
    let g = random(n, 3, &mut r);
    for sparse in [false, true] {
        let inp = |x: &Array2<f64>| {
            if sparse {
                In::sparse(x)
            } else {
                In::Dense(x.clone())
            }
        };
        let base = layer(4, 3, true, Order::AggregateFirst, 4);
        let fresh = |x: &Array2<f64>| {
            let mut l = base.clone();
            let (y, _) = Harness::new(adj).run(&mut l, &[inp(x)], &g, &[false]);
            (y, params(&mut l, true))
        };
        // Fixed in evaluation only (input dropout in training).
        let eval_fixed = Harness {
            fixed_input: true,
            ..Harness::new(adj).mode(Mode::Eval)
        };
        let mut l = base.clone();
        let y1 = eval_fixed.forward(&mut l, &[inp(&x1)]).0;
        assert_eq!(y1, fresh(&x1).0, "sparse {sparse}");
        let (y2, _) = Harness::new(adj).run(&mut l, &[inp(&x2)], &g, &[false]);
        assert_eq!((y2, params(&mut l, true)), fresh(&x2), "sparse {sparse}");
        assert_eq!(
            eval_fixed.forward(&mut l, &[inp(&x2)]).0,
            y1,
            "sparse {sparse}"
        );
        l.release();
        assert_eq!(
            eval_fixed.forward(&mut l, &[inp(&x2)]).0,
            fresh(&x2).0,
            "sparse {sparse}"
        );
    }
}

#[test]
fn above_the_eval_cache_limit_evaluation_recomputes_the_aggregate() {
    // With input dropout (the input fixed in evaluation only) a dense Â·X above the limit
    // is not kept: each evaluation computes it again, with the same bits as a fresh layer.
    let [_, (_, adj)] = &small_adjs();
    let n = adj.n_nodes();
    let mut r = rng(6);
    let (x1, x2) = (random(n, 4, &mut r), random(n, 4, &mut r));
    let eval_fixed = Harness {
        fixed_input: true,
        ..Harness::new(adj).mode(Mode::Eval)
    };
    let base = layer(4, 3, true, Order::AggregateFirst, 4);
    let fresh = |x: &Array2<f64>| {
        eval_fixed
            .forward(&mut base.clone(), &[In::Dense(x.clone())])
            .0
    };
    for limit in [0, n * 4 - 1] {
        let mut l = base.clone();
        l.set_eval_cache_limit(limit);
        assert_eq!(
            eval_fixed.forward(&mut l, &[In::Dense(x1.clone())]).0,
            fresh(&x1)
        );
        assert!(l.fixed.is_none(), "limit {limit}");
        assert_eq!(
            eval_fixed.forward(&mut l, &[In::Dense(x2.clone())]).0,
            fresh(&x2)
        );
    }
    // At the limit it is kept (the second call reuses the first's Â·X).
    let mut l = base.clone();
    l.set_eval_cache_limit(n * 4);
    let y1 = eval_fixed.forward(&mut l, &[In::Dense(x1.clone())]).0;
    assert!(l.fixed.is_some());
    assert_eq!(eval_fixed.forward(&mut l, &[In::Dense(x2.clone())]).0, y1);
}

#[test]
fn a_sparse_input_on_another_adjacency_recomputes_the_pattern() {
    // The sparse S = Â·X̃ keeps its pattern only for the Â it was computed on: after a call on
    // another Â (a DropEdge sample: another pattern), a call on the first Â is still exact.
    let [(_, own), (_, other)] = &small_adjs();
    let n = own.n_nodes();
    let mut r = rng(6);
    let mut x = random(n, 5, &mut r);
    x.mapv_inplace(|v| if v.abs() < 0.5 { 0.0 } else { v });
    let g = random(n, 3, &mut r);
    let base = layer(5, 3, false, Order::AggregateFirst, 8);
    let fresh = |adj: &NormAdj<f64>| {
        let mut l = base.clone();
        let (y, _) = Harness::new(adj).run(&mut l, &[In::sparse(&x)], &g, &[false]);
        (y, params(&mut l, true))
    };
    let sample = Harness::new(other);
    let mut l = base.clone();
    for (k, (h, adj)) in [
        (Harness::new(own), own),
        (sample.clone(), other),
        (Harness::new(own), own),
        (sample, other),
    ]
    .into_iter()
    .enumerate()
    {
        zero_grads(&mut l);
        let (y, _) = h.run(&mut l, &[In::sparse(&x)], &g, &[false]);
        assert_eq!((y, params(&mut l, true)), fresh(adj), "call {k}");
    }
}

#[test]
fn golden_path_graph() {
    // P3 (0–1–2), symmetric: Â·u = u for u = (√2, √3, √2). With W = [2], b = [1]:
    // Z = 2u + 1; for G = 1: dW = Σ_i (Âu)_i = 2√2 + √3, db = 3, dH = 2·Â1 with
    // Â1 = (1/2 + 1/√6, 1/3 + 2/√6, 1/2 + 1/√6).
    let g = Graph::try_from_edges(3, &[(0, 1), (1, 2)], Direction::Undirected).unwrap();
    let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
    let (s2, s3, s6) = (2f64.sqrt(), 3f64.sqrt(), 6f64.sqrt());
    let u = array![[s2], [s3], [s2]];
    for order in ORDERS {
        let mut l = GcnConv::from_params(
            Param::new(array![[2.0]]),
            Some(Param::new(array![[1.0]])),
            order,
        );
        let (z, din) = Harness::new(&adj).run(
            &mut l,
            &[In::Dense(u.clone())],
            &Array2::ones((3, 1)),
            &[true],
        );
        close(&z, &(&u * 2.0 + 1.0), "Z");
        close(&l.weight.grad, &array![[2.0 * s2 + s3]], "dW");
        close(&l.bias.as_ref().unwrap().grad, &array![[3.0]], "db");
        let a1 = array![[0.5 + 1.0 / s6], [1.0 / 3.0 + 2.0 / s6], [0.5 + 1.0 / s6]];
        close(din[0].as_ref().unwrap(), &(a1 * 2.0), "dH");
    }
}

#[test]
fn the_two_orders_agree() {
    for (name, adj) in &small_adjs() {
        let n = adj.n_nodes();
        let mut r = rng(12);
        let (x, g) = (random(n, 4, &mut r), random(n, 6, &mut r));
        let mut res = Vec::new();
        for order in ORDERS {
            let mut l = layer(4, 6, true, order, 13);
            let (z, din) = Harness::new(adj).run(&mut l, &[In::Dense(x.clone())], &g, &[true]);
            res.push((z, din[0].clone().unwrap(), params(&mut l, true)));
        }
        close(&res[0].0, &res[1].0, name);
        close(&res[0].1, &res[1].1, name);
        for ((_, a), (_, b)) in res[0].2.iter().zip(&res[1].2) {
            close(a, b, name);
        }
    }
}

#[test]
fn bitwise_identical_for_any_thread_count() {
    let (adj, feats) = citation();
    let n = adj.n_nodes();
    let FeaturesRef::Sparse(xs) = feats.get() else {
        panic!("bag-of-words features are sparse")
    };
    let mut r = rng(9);
    let h = random(n, 24, &mut r).mapv(|v| v as f32);
    let g = random(n, 10, &mut r).mapv(|v| v as f32);
    for order in ORDERS {
        let hidden = GcnConv::<f32>::new(24, 10, true, order, &mut r);
        let first = GcnConv::<f32>::new(xs.x().cols(), 10, true, order, &mut r);
        same_for_any_thread_count(
            |par| {
                let mut out = Vec::new();
                for (l, input, need, fixed) in [
                    (&hidden, In::Dense(h.clone()), true, false),
                    (&first, In::Sparse(xs.clone()), false, false),
                    (&first, In::Sparse(xs.clone()), false, true),
                ] {
                    let mut l = l.clone();
                    let hs = Harness {
                        par,
                        ..Harness::new(&adj)
                    };
                    let hs = if fixed { hs.fixed() } else { hs };
                    let (z, din) = hs.run(&mut l, &[input], &g, &[need]);
                    out.push(bits(&z));
                    out.extend(din.iter().flatten().map(bits));
                    out.extend(params(&mut l, true).iter().map(|(_, p)| bits(p)));
                }
                out
            },
            &format!("GcnConv {order}"),
        );
    }
}

#[test]
fn auto_order_counts_backward_and_caching() {
    let base = LayerShape {
        n_nodes: 1000,
        nnz_adj: 10_000,
        in_dim: 64,
        out_dim: 16,
        sparse_input_nnz: None,
        sparse_aggregate_nnz: None,
        first: false,
        aggregate_cached: false,
    };
    // Narrower output: aggregate at the output width; wider: at the input width.
    assert_eq!(choose_order(Order::Auto, &base), Order::TransformFirst);
    let wide = LayerShape {
        in_dim: 16,
        out_dim: 64,
        ..base
    };
    assert_eq!(choose_order(Order::Auto, &wide), Order::AggregateFirst);
    // A first layer whose ÂX is cached skips the forward SpMM and the input gradient.
    let cached = LayerShape {
        first: true,
        aggregate_cached: true,
        ..base
    };
    assert_eq!(choose_order(Order::Auto, &cached), Order::AggregateFirst);
    assert_eq!(
        choose_order(Order::AggregateFirst, &base),
        Order::AggregateFirst
    );
}

/// A 5 × 9 bipartite block (the destinations the first five sources), rows of 1 to 4 entries.
fn block() -> crate::graph::BlockAdj<f64> {
    let indptr = vec![0, 3, 4, 7, 9, 13];
    let indices = vec![0, 5, 8, 1, 0, 2, 6, 3, 7, 1, 4, 5, 8];
    crate::graph::BlockAdj::normalised(9, indptr, indices)
}

#[test]
fn on_a_bipartite_block_every_order_matches_finite_differences_and_the_dense_products() {
    let b = block();
    let dense_a = b.a().to_dense();
    for order in [Order::AggregateFirst, Order::TransformFirst, Order::Lean] {
        for (a, c) in [(3, 5), (5, 3)] {
            let mut r = rng(11);
            let x = random(9, a, &mut r);
            let g = random(5, c, &mut r);
            let what = format!("block, {order}, {a}→{c}");
            let mut l = layer(a, c, true, order, 2);
            l.set_lean_block(64);
            let h = Harness::new(&b);
            let (z, din) = h.grad_check(&mut l, &[In::Dense(x.clone())], &[true], &g, &what);
            // Z = Â·X·W + b over the 5 destinations; ∂L/∂X = Âᵀ·G·Wᵀ over the 9 sources.
            let w = l.weight.value.clone();
            let bias = l.bias.as_ref().map(|p| p.value.clone()).unwrap();
            close(&z, &(dense_a.dot(&x).dot(&w) + &bias), &what);
            let dx = din[0].as_ref().unwrap();
            close(dx, &dense_a.t().dot(&g).dot(&w.t()), &what);
            // Without the input's gradient (the first layer): the same weight gradients.
            zero_grads(&mut l);
            h.run(&mut l, &[In::Dense(x.clone())], &g, &[false]);
            let g1 = params(&mut l, true);
            zero_grads(&mut l);
            h.run(&mut l, &[In::Dense(x)], &g, &[true]);
            for ((name, p), (_, q)) in g1.iter().zip(params(&mut l, true)) {
                close(p, &q, &format!("{what}, {name} without dX"));
            }
        }
    }
}
