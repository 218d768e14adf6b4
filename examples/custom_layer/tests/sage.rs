//! `SageConv` checked from outside sparse-gcn with its harness: central-difference gradients of
//! every parameter and input coordinate (f64) on the harness's small graphs (undirected and
//! symmetric, directed and row-normalised, with an isolated node and a self-loop), the same
//! bits for any thread count, and a model assembled by hand from it that trains, saves and loads
//! (with its one registration line).

use custom_layer::SageConv;
use sparse_gcn::graph::{Norm, NormAdj};
use sparse_gcn::nn::attrs::Registry;
use sparse_gcn::nn::dropout::ReluDropout;
use sparse_gcn::nn::{Layer, Model, Node, Src, StackOptions, Wiring};
use sparse_gcn::testing::harness::{bits, random, rng, same_for_any_thread_count};
use sparse_gcn::testing::{small_adjs, Harness, In};
use sparse_gcn::train::{checkpoint, train_step, TrainConfig};
use sparse_gcn::{Error, Par};

#[test]
fn gradients_match_finite_differences() {
    for (name, adj) in &small_adjs() {
        let n = adj.n_nodes();
        for (a, c) in [(3, 5), (5, 2)] {
            let mut r = rng(1);
            let x = random(n, a, &mut r);
            let g = random(n, c, &mut r);
            let mut layer = SageConv::<f64>::new(a, c, &mut r);
            layer.bias.value = random(1, c, &mut r);
            let what = format!("{name}, {a}→{c}");
            Harness::new(adj).grad_check(&mut layer, &[In::Dense(x)], &[true], &g, &what);
        }
    }
}

#[test]
fn the_same_bits_for_any_thread_count() {
    let d = sparse_gcn::data::synthetic::CitationLike {
        n_nodes: 500,
        ..Default::default()
    }
    .generate(3)
    .unwrap();
    let adj = NormAdj::<f32>::new(&d.graph, Norm::Row);
    let mut r = rng(2);
    let x = random(adj.n_nodes(), 12, &mut r).mapv(|v| v as f32);
    let g = random(adj.n_nodes(), 4, &mut r).mapv(|v| v as f32);
    let layer = SageConv::<f32>::new(12, 4, &mut r);
    same_for_any_thread_count(
        |par| {
            let mut l = layer.clone();
            let h = Harness {
                par,
                ..Harness::new(&adj)
            };
            let (y, din) = h.run(&mut l, &[In::Dense(x.clone())], &g, &[true]);
            let mut out = vec![bits(&y), bits(din[0].as_ref().unwrap())];
            l.visit_params(&mut |_, p| out.push(bits(&p.grad)));
            out
        },
        "SageConv",
    );
}

#[test]
fn a_hand_built_stack_of_it_trains_saves_and_loads() {
    let d = sparse_gcn::data::synthetic::CitationLike {
        n_nodes: 400,
        ..Default::default()
    }
    .generate(4)
    .unwrap();
    let adj = NormAdj::<f32>::new(&d.graph, Norm::Row);
    let x = sparse_gcn::data::Features::dense(d.features.to_dense());
    let mut r = rng(5);
    let (f, h, c) = (x.n_cols(), 16, d.n_classes);
    let nodes = vec![
        Node {
            layer: Box::new(SageConv::<f32>::new(f, h, &mut r)),
            inputs: vec![Src::X],
            group: 0,
            site: 0,
        },
        Node {
            layer: Box::new(ReluDropout::new(h, 0.5)),
            inputs: vec![Src::Node(0)],
            group: 0,
            site: 1,
        },
        Node {
            layer: Box::new(SageConv::<f32>::new(h, c, &mut r)),
            inputs: vec![Src::Node(1)],
            group: 2,
            site: 0,
        },
    ];
    let mut model = Model::from_nodes(nodes, Wiring::default(), StackOptions::default())
        .expect("a valid stack");
    let train = TrainConfig::default();
    let mut opt = train.optimizer::<f32>();
    let mut drop = sparse_gcn::train::rng_stream(0, 1);
    let mut losses = Vec::new();
    for _ in 0..30 {
        let (loss, _) = train_step(
            &mut model,
            opt.as_mut(),
            &adj,
            &x,
            &d.labels,
            &d.split.train,
            &mut drop,
            Par::Rayon,
        )
        .expect("a training step");
        losses.push(loss);
    }
    assert!(losses.iter().all(|l| l.is_finite()));
    assert!(losses[29] < 0.8 * losses[0], "the loss falls: {losses:?}");

    // Saved, then loaded with the layer registered: the same predictions, bit for bit.
    let path = std::env::temp_dir().join(format!("sage-{}.safetensors", std::process::id()));
    checkpoint::save(&path, &mut model, &Default::default()).expect("a save");
    let ck = checkpoint::load(&path).expect("a load");
    std::fs::remove_file(&path).expect("remove the file");
    let unknown = ck
        .build(&adj, &x)
        .expect_err("sage_conv is not a layer of sparse-gcn");
    assert!(
        matches!(&unknown, Error::Dataset { msg, .. } if msg.contains("sage_conv")),
        "{unknown}"
    );
    let registry = Registry::builtin().with::<SageConv<f32>>("sage_conv");
    let mut back = ck.build_with(&adj, &x, &registry).expect("a build");
    let want = model.predict(&adj, &x, Par::Seq).expect("predictions");
    let got = back.predict(&adj, &x, Par::Seq).expect("predictions");
    assert_eq!(bits(&got), bits(&want));
}
