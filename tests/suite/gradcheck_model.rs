//! Finite-difference gradient checks through whole Kipf GCNs with the real cross-entropy loss
//! (f64, away from ReLU kinks). The spec is `docs/MATH.md`.
//!
//! Every check runs the model's training pass (`Model::train_pass`): the analytic gradient is
//! its backward, and each loss value of the finite differences is a training pass whose loss
//! callback stops before backward. The checks "with dropout off" build the model with dropout
//! 0 (before the one-stack redesign they ran an evaluation-mode forward, then backward); those
//! in training mode replay the same masks in every pass by giving each pass a clone of one
//! ChaCha8 state. The kink checks compute the pre-activations densely from the weights the
//! model reports (`Model::visit_named`) instead of calling a layer of the model.

use ndarray::Array2;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use sparse_gcn::data::{Features, FeaturesRef, Mask};
use sparse_gcn::graph::{Direction, Graph, Norm, NormAdj};
use sparse_gcn::nn::loss::{
    softmax_cross_entropy, softmax_cross_entropy_in_place_across, softmax_cross_entropy_into,
    softmax_cross_entropy_loss,
};
use sparse_gcn::nn::{Model, ModelConfig, Named, Order};
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
        Features::dense(x).into_sparse_if(1.0)
    } else {
        Features::dense(x)
    }
}

fn params(model: &mut Model<f64>) -> Vec<f64> {
    let mut v = Vec::new();
    model.visit_params(&mut |_, p| v.extend(p.value.iter()));
    v
}

fn grads(model: &mut Model<f64>) -> Vec<f64> {
    let mut v = Vec::new();
    model.visit_params(&mut |_, p| v.extend(p.grad.iter()));
    v
}

fn set_params(model: &mut Model<f64>, theta: &[f64]) {
    let mut k = 0;
    model.visit_params(&mut |_, p| {
        for w in p.value.iter_mut() {
            *w = theta[k];
            k += 1;
        }
    });
}

/// Each graph convolution's weight and bias, in forward order (the nodes named `gcn_conv`).
fn convs(model: &mut Model<f64>) -> Vec<(Array2<f64>, Option<Array2<f64>>)> {
    let mut v: Vec<(Array2<f64>, Option<Array2<f64>>)> = Vec::new();
    model.visit_named(&mut |name, t| {
        let Named::Param(p) = t else {
            panic!("{name}: the Kipf GCN has no statistics")
        };
        match name.split('.').collect::<Vec<_>>()[..] {
            [_, "gcn_conv", "weight"] => v.push((p.value.clone(), None)),
            [_, "gcn_conv", "bias"] => v.last_mut().unwrap().1 = Some(p.value.clone()),
            _ => panic!("unexpected tensor {name}"),
        }
    });
    v
}

/// The masked cross-entropy of a training pass with the masks of `state` (a clone of it is
/// consumed); with `backward`, the pass goes on into backward, adding ∂L/∂θ to the gradients.
fn train_loss(
    model: &mut Model<f64>,
    adj: &NormAdj<f64>,
    x: &Features<f64>,
    labels: &[u32],
    mask: &Mask,
    state: &ChaCha8Rng,
    backward: bool,
) -> f64 {
    let mut loss = f64::NAN;
    model
        .train_pass(adj, x, &mut state.clone(), Par::Seq, &mut |z, sums| {
            if backward {
                loss = softmax_cross_entropy_in_place_across(z, labels, mask, &sums);
            } else {
                loss = softmax_cross_entropy_loss(z.view(), labels, mask);
            }
            backward
        })
        .unwrap();
    loss
}

/// The logits of a training pass with the masks of `state` (no backward).
fn train_logits(
    model: &mut Model<f64>,
    adj: &NormAdj<f64>,
    x: &Features<f64>,
    state: &ChaCha8Rng,
) -> Array2<f64> {
    let mut out = None;
    model
        .train_pass(adj, x, &mut state.clone(), Par::Seq, &mut |z, _| {
            out = Some(z.to_owned());
            false
        })
        .unwrap();
    out.unwrap()
}

fn check(order: Order, bias: bool, sparse: bool, layers: usize) {
    let adj = NormAdj::<f64>::new(&graph(), Norm::Symmetric);
    let a_hat = dense_adj(&adj);
    let labels: Vec<u32> = (0..N as u32).map(|i| i % 3).collect();
    let mask = Mask::try_from_indices(vec![0, 2, 3, 5, 7, 9], N).unwrap();
    let cfg = ModelConfig {
        in_dim: 5,
        hidden_dim: 4,
        out_dim: 3,
        n_layers: layers,
        dropout: 0.0,
        input_dropout: 0.0,
        bias,
        order,
        ..ModelConfig::default()
    };
    // Draw until no hidden pre-activation lies within 1e-3 of the ReLU kink.
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let (mut model, x) = loop {
        let x = features(sparse, &mut rng);
        let mut model = cfg.build(&adj, &x, None, &mut rng).unwrap();
        model.visit_params(&mut |_, p| {
            p.value.mapv_inplace(|_| rng.random_range(-1.0..1.0));
        });
        // The first layer's pre-activation ÂXW₀ (+ b₀), densely.
        let (w0, b0) = convs(&mut model).swap_remove(0);
        let mut z0 = a_hat.dot(&x.to_dense()).dot(&w0);
        if let Some(b) = b0 {
            z0 += &b.row(0);
        }
        if layers == 1 || z0.iter().all(|v| v.abs() > 1e-3) {
            break (model, x);
        }
    };
    assert_eq!(model.orders()[0], order);
    // Dropout 0: no mask is drawn, whatever the state.
    let state = ChaCha8Rng::seed_from_u64(0);
    model.zero_grad();
    train_loss(&mut model, &adj, &x, &labels, &mask, &state, true);
    let analytic = grads(&mut model);
    let theta = params(&mut model);
    let mut probe = model.clone();
    let numerical = numerical_grad(
        |t| {
            set_params(&mut probe, t);
            train_loss(&mut probe, &adj, &x, &labels, &mask, &state, false)
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

// ---------------------------------------------------------------------------------------------
// Training mode: dropout on, masks replayed
// ---------------------------------------------------------------------------------------------

/// Â as a dense matrix (the reference forward below multiplies by it with `dot`).
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

/// The pre-activations of every layer of a training pass, computed densely from the spec
/// (`docs/MATH.md` §5), with the masks drawn from `mask_rng` in the documented order: the
/// input mask (one factor per element of a dense X in row-major order, or one per stored entry
/// of a sparse X in storage order), then one n × c mask per hidden layer, row-major. The last
/// entry is the logits. Also returns the hidden masks.
fn reference_train_forward(
    model: &mut Model<f64>,
    a_hat: &Array2<f64>,
    x: &Features<f64>,
    p_in: f64,
    p: f64,
    mask_rng: &ChaCha8Rng,
) -> (Vec<Array2<f64>>, Vec<Vec<f64>>) {
    use sparse_gcn::kernels::dropout_mask;
    let mut rng = mask_rng.clone();
    let n = a_hat.nrows();
    let x_drop = match x.get() {
        FeaturesRef::Dense(d) => {
            let mut m = vec![0.0; d.len()];
            dropout_mask(&mut rng, p_in, &mut m);
            let m = Array2::from_shape_vec(d.dim(), m).unwrap();
            d * &m
        }
        FeaturesRef::Sparse(s) => {
            let xs = s.x();
            let mut m = vec![0.0; xs.nnz()];
            dropout_mask(&mut rng, p_in, &mut m);
            let mut out = Array2::zeros((xs.rows(), xs.cols()));
            let mut k = 0;
            for (i, row) in xs.outer_iterator().enumerate() {
                for (j, &v) in row.iter() {
                    out[[i, j]] = v * m[k];
                    k += 1;
                }
            }
            assert_eq!(k, m.len());
            out
        }
    };
    let mut h = x_drop;
    let mut zs = Vec::new();
    let mut masks = Vec::new();
    let layers = convs(model);
    let n_layers = layers.len();
    for (l, (w, bias)) in layers.iter().enumerate() {
        let mut z = a_hat.dot(&h).dot(w);
        if let Some(b) = bias {
            z += &b.row(0);
        }
        if l + 1 < n_layers {
            let mut m = vec![0.0; n * z.ncols()];
            dropout_mask(&mut rng, p, &mut m);
            let m2 = Array2::from_shape_vec(z.dim(), m.clone()).unwrap();
            h = z.mapv(|v| v.max(0.0)) * &m2;
            masks.push(m);
        }
        zs.push(z);
    }
    (zs, masks)
}

/// Whole-model gradient check in training mode: input and hidden dropout 0.5, the same masks
/// for every loss evaluation (each evaluation gets a clone of one ChaCha8 state), every
/// parameter coordinate, the order forced on every layer.
fn check_train(order: Order, bias: bool, sparse: bool, layers: usize) {
    let adj = NormAdj::<f64>::new(&graph(), Norm::Symmetric);
    let a_hat = dense_adj(&adj);
    let labels: Vec<u32> = (0..N as u32).map(|i| i % 3).collect();
    let mask = Mask::try_from_indices(vec![0, 2, 3, 5, 7, 9], N).unwrap();
    let (p_in, p) = (0.5, 0.5);
    let cfg = ModelConfig {
        in_dim: 5,
        hidden_dim: 4,
        out_dim: 3,
        n_layers: layers,
        dropout: p,
        input_dropout: p_in,
        bias,
        order,
        ..ModelConfig::default()
    };
    let what = format!("{order:?} bias={bias} sparse={sparse} layers={layers}");
    // Draw features, parameters and the mask stream until no hidden pre-activation of the
    // training pass lies within 1e-3 of the ReLU kink. Exact zeros are allowed: they come
    // from rows whose whole (dropped) neighbourhood input is zero, stay exactly zero under any
    // perturbation of the parameters, and have gradient 0 both ways.
    let mut rng = ChaCha8Rng::seed_from_u64(21);
    let mut attempts = 0;
    let (mut model, x, state) = loop {
        attempts += 1;
        assert!(attempts < 100, "{what}: no smooth draw");
        let x = features(sparse, &mut rng);
        let mut model = cfg.build(&adj, &x, None, &mut rng).unwrap();
        model.visit_params(&mut |_, p| {
            p.value.mapv_inplace(|_| rng.random_range(-1.0..1.0));
        });
        let state = ChaCha8Rng::seed_from_u64(rng.random());
        let (zs, masks) = reference_train_forward(&mut model, &a_hat, &x, p_in, p, &state);
        let smooth = zs[..layers - 1]
            .iter()
            .all(|z| z.iter().all(|&v| v == 0.0 || v.abs() > 1e-3));
        // Both mask values occur in every hidden mask (p = 0.5 over 40 elements).
        let both = masks.iter().all(|m| {
            m.contains(&0.0) && m.contains(&2.0) && m.iter().all(|&v| v == 0.0 || v == 2.0)
        });
        if smooth && both {
            break (model, x, state);
        }
    };
    assert!(model.orders().iter().all(|&o| o == order), "{what}");
    assert_eq!(model.orders().len(), layers, "{what}");

    // The training logits are those of the dense reference with the replayed masks.
    let (ref_z, _) = reference_train_forward(&mut model, &a_hat, &x, p_in, p, &state);
    let logits = train_logits(&mut model, &adj, &x, &state);
    let zl = ref_z.last().unwrap();
    let dev = logits
        .iter()
        .zip(zl)
        .map(|(&a, &b)| (a - b).abs() / 1f64.max(b.abs()))
        .fold(0.0, f64::max);
    assert!(
        dev < 1e-12,
        "{what}: train logits vs dense reference: {dev}"
    );
    // Dropout really acts: the evaluation logits differ.
    let eval = model.predict(&adj, &x, Par::Seq).unwrap();
    assert!(
        eval.iter().zip(&logits).any(|(a, b)| (a - b).abs() > 1e-6),
        "{what}"
    );

    model.zero_grad();
    train_loss(&mut model, &adj, &x, &labels, &mask, &state, true);
    let analytic = grads(&mut model);
    let theta = params(&mut model);
    let mut probe = model.clone();
    let numerical = numerical_grad(
        |t| {
            set_params(&mut probe, t);
            train_loss(&mut probe, &adj, &x, &labels, &mask, &state, false)
        },
        &theta,
        1e-6,
    );
    assert_eq!(analytic.len(), theta.len());
    // Dropout leaves gradient everywhere: some coordinate of every layer is non-zero.
    assert!(analytic.iter().any(|&g| g != 0.0), "{what}");
    let (err, at) = max_rel_err(&analytic, &numerical);
    assert!(
        err < 1e-6,
        "{what}: rel err {err} at {at} (analytic {}, numerical {})",
        analytic[at],
        numerical[at]
    );
}

#[test]
fn model_backward_matches_finite_differences_in_training_mode() {
    for order in [Order::AggregateFirst, Order::TransformFirst] {
        for bias in [false, true] {
            for sparse in [false, true] {
                for layers in [2, 3] {
                    check_train(order, bias, sparse, layers);
                }
            }
        }
    }
}

/// The loss's gradient written into a strided view (every other column of a wider array,
/// NaN-filled) and into a contiguous one: the same bits, zero outside the mask, the same loss
/// and the value of `softmax_cross_entropy_loss`; more rows than one task of the loss.
#[test]
fn loss_gradient_is_the_same_in_any_layout() {
    let (n, c) = (3000, 7);
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let z = Array2::from_shape_simple_fn((n, c), || rng.random_range(-3.0f32..3.0));
    let labels: Vec<u32> = (0..n as u32).map(|i| (i * 5 + 1) % c as u32).collect();
    let mask = Mask::try_from_indices((0..n as u32).filter(|i| i % 3 != 1).collect(), n).unwrap();
    let mut dense = Array2::<f32>::from_elem((n, c), f32::NAN);
    let l1 = softmax_cross_entropy_into(z.view(), &labels, &mask, dense.view_mut());
    let mut wide = Array2::<f32>::from_elem((n, 2 * c), f32::NAN);
    let l2 = softmax_cross_entropy_into(
        z.view(),
        &labels,
        &mask,
        wide.slice_mut(ndarray::s![.., ..;2]),
    );
    assert_eq!(l1.to_bits(), l2.to_bits());
    assert_eq!(
        l1.to_bits(),
        softmax_cross_entropy_loss(z.view(), &labels, &mask).to_bits()
    );
    let strided = wide.slice(ndarray::s![.., ..;2]);
    assert!(dense
        .iter()
        .zip(strided.iter())
        .all(|(a, b)| a.to_bits() == b.to_bits()));
    assert!(wide
        .slice(ndarray::s![.., 1..;2])
        .iter()
        .all(|v| v.is_nan()));
    for i in (1..n).step_by(3) {
        assert!(
            dense.row(i).iter().all(|&v| v == 0.0),
            "row {i} is outside the mask"
        );
    }
    assert!(dense.row(0).iter().any(|&v| v != 0.0));
}
