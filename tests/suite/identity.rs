//! What a model keeps between passes (the Â·X of a first convolution, the constant outputs of
//! SGC's Â^K·X, the planned buffers) is keyed on the identity of the Â and the features it was
//! computed from, never on the caller remembering `Model::release`.
//!
//! For every architecture: a model run on graph A (its features X_A), then on graph B of the
//! same size (X_B), gives B's fresh-model logits and gradients bit for bit; so does a model run
//! on A with X_A and then with other features on the same Â, and with X_A changed in place
//! (`Features::row_normalize`); and a training pass on another Â than the model was planned for
//! (a sample, without DropEdge in the configuration) is the fresh model's pass on that Â.

use ndarray::ArrayViewMut2;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use sparse_gcn::data::synthetic::CitationLike;
use sparse_gcn::data::{Dataset, Features};
use sparse_gcn::graph::{Norm, NormAdj};
use sparse_gcn::nn::{Arch, Model, ModelConfig, Order};
use sparse_gcn::{Par, Propagate};

fn dataset(seed: u64, n: usize, sparse: bool) -> Dataset {
    let mut d = CitationLike {
        n_nodes: n,
        n_classes: 4,
        n_features: 24,
        ..Default::default()
    }
    .generate(seed)
    .unwrap();
    if !sparse {
        d.features = Features::dense(d.features.to_dense());
    }
    d
}

fn bits(a: ndarray::ArrayView2<'_, f32>) -> Vec<u32> {
    a.iter().map(|v| v.to_bits()).collect()
}

fn grads(m: &mut Model<f32>) -> Vec<Vec<u32>> {
    let mut out = Vec::new();
    m.visit_params(&mut |_, p| out.push(bits(p.grad.view())));
    out
}

/// One training pass (masks from `seed`, the loss a fixed function of the logits) and its
/// gradients, then the evaluation logits.
fn pass(
    m: &mut Model<f32>,
    adj: &dyn Propagate<f32>,
    x: &Features<f32>,
    seed: u64,
) -> (Vec<u32>, Vec<Vec<u32>>, Vec<u32>) {
    m.zero_grad();
    let mut train_logits = Vec::new();
    let mut loss = |mut z: ArrayViewMut2<'_, f32>, _: sparse_gcn::graph::Sums<'_, f32>| {
        train_logits = bits(z.view());
        // dL/dz = z / n (the gradient of a quadratic loss).
        let n = z.nrows() as f32;
        z.mapv_inplace(|v| v / n);
        true
    };
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    m.train_pass(adj, x, &mut rng, Par::Rayon, &mut loss)
        .unwrap();
    let g = grads(m);
    let eval = bits(m.predict(adj, x, Par::Rayon).unwrap().view());
    (train_logits, g, eval)
}

fn configs() -> Vec<(String, ModelConfig)> {
    let mut out = Vec::new();
    for arch in Arch::all() {
        for input_dropout in [0.0, 0.5] {
            for order in [Order::AggregateFirst, Order::TransformFirst] {
                let cfg = ModelConfig {
                    hidden_dim: 8,
                    input_dropout,
                    order,
                    ..ModelConfig::deep(arch, 2)
                };
                out.push((format!("{arch} input dropout {input_dropout} {order}"), cfg));
            }
        }
    }
    out
}

fn build(cfg: &ModelConfig, adj: &NormAdj<f32>, d: &Dataset) -> Model<f32> {
    let cfg = ModelConfig {
        in_dim: d.features.n_cols(),
        out_dim: d.n_classes,
        ..cfg.clone()
    };
    cfg.build(adj, &d.features, None, &mut ChaCha8Rng::seed_from_u64(5))
        .unwrap()
}

#[test]
fn a_model_run_on_graph_a_then_graph_b_gives_b_s_fresh_logits() {
    for sparse in [true, false] {
        let (a, b) = (dataset(1, 300, sparse), dataset(2, 300, sparse));
        let adj_a = NormAdj::<f32>::new(&a.graph, Norm::Symmetric);
        let adj_b = NormAdj::<f32>::new(&b.graph, Norm::Symmetric);
        for (what, cfg) in configs() {
            let what = format!("{what}, sparse {sparse}");
            let mut model = build(&cfg, &adj_a, &a);
            // The fresh model: a clone (parameters, no buffers or caches) taken before any pass.
            let mut fresh = model.clone();
            // Evaluation then training on A fills every cache.
            model.predict(&adj_a, &a.features, Par::Rayon).unwrap();
            pass(&mut model, &adj_a, &a.features, 3);
            fresh.restore(&{
                let mut s = Vec::new();
                model.snapshot_into(&mut s);
                s
            });
            // Evaluation first on B (a cached Â·X would be A's), then a training pass.
            let got_eval = bits(
                model
                    .predict(&adj_b, &b.features, Par::Rayon)
                    .unwrap()
                    .view(),
            );
            let want_eval = bits(
                fresh
                    .clone()
                    .predict(&adj_b, &b.features, Par::Rayon)
                    .unwrap()
                    .view(),
            );
            assert!(got_eval == want_eval, "{what}: evaluation logits on B");
            let got = pass(&mut model, &adj_b, &b.features, 4);
            let want = pass(&mut fresh.clone(), &adj_b, &b.features, 4);
            assert!(got == want, "{what}: training pass on B");
        }
    }
}

#[test]
fn other_features_on_the_same_graph_are_not_mistaken_for_the_first() {
    for sparse in [true, false] {
        let a = dataset(1, 300, sparse);
        let other = dataset(9, 300, sparse);
        let adj = NormAdj::<f32>::new(&a.graph, Norm::Symmetric);
        for (what, cfg) in configs() {
            let what = format!("{what}, sparse {sparse}");
            let mut model = build(&cfg, &adj, &a);
            let fresh = model.clone();
            model.predict(&adj, &a.features, Par::Rayon).unwrap();
            // Another feature matrix of the same shape on the same Â.
            let got = bits(
                model
                    .predict(&adj, &other.features, Par::Rayon)
                    .unwrap()
                    .view(),
            );
            let want = bits(
                fresh
                    .clone()
                    .predict(&adj, &other.features, Par::Rayon)
                    .unwrap()
                    .view(),
            );
            assert!(got == want, "{what}: other features");
            // The first features changed in place.
            let mut x = a.features.clone();
            model.predict(&adj, &x, Par::Rayon).unwrap();
            x.row_normalize();
            let got = bits(model.predict(&adj, &x, Par::Rayon).unwrap().view());
            let want = bits(fresh.clone().predict(&adj, &x, Par::Rayon).unwrap().view());
            assert!(got == want, "{what}: features changed in place");
        }
    }
}

#[test]
fn a_training_pass_on_another_adjacency_needs_no_drop_edge_setting() {
    // A model configured without DropEdge, trained on a subgraph's Â (a sampler's batch of
    // the same size): the fresh model's pass on that Â, then its own Â again.
    let a = dataset(1, 300, true);
    let adj = NormAdj::<f32>::new(&a.graph, Norm::Symmetric);
    let sub = {
        let de = sparse_gcn::graph::dropedge::DropEdge::new(0.3).unwrap();
        let mut s = NormAdj::<f32>::empty(Norm::Symmetric);
        let mut scratch = sparse_gcn::graph::AdjScratch::default();
        de.sample_into(
            &a.graph,
            Norm::Symmetric,
            &mut ChaCha8Rng::seed_from_u64(8),
            &mut s,
            &mut scratch,
        );
        s
    };
    for (what, cfg) in configs() {
        let mut model = build(&cfg, &adj, &a);
        let fresh = model.clone();
        pass(&mut model, &adj, &a.features, 1);
        let mut fresh = {
            let mut f = fresh;
            let mut s = Vec::new();
            model.snapshot_into(&mut s);
            f.restore(&s);
            f
        };
        let got = pass(&mut model, &sub, &a.features, 2);
        let want = pass(&mut fresh.clone(), &sub, &a.features, 2);
        assert!(got == want, "{what}: a pass on the sample");
        let got = pass(&mut model, &adj, &a.features, 3);
        let want = pass(&mut fresh, &adj, &a.features, 3);
        assert!(got == want, "{what}: the own Â after the sample");
    }
}
