//! Hand-built stacks (`Model::from_nodes`): their input widths are checked before a pass (a
//! typed error, not a panic in a kernel), and they save and load like an architecture: every
//! layer of the crate in one stack, trained, saved, loaded and run gives the same bits; damaged
//! stack metadata gives typed errors naming the key.

use std::collections::BTreeMap;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use sparse_gcn::data::synthetic::CitationLike;
use sparse_gcn::data::{Dataset, Features};
use sparse_gcn::graph::{Norm, NormAdj};
use sparse_gcn::nn::appnp::AppnpPropagate;
use sparse_gcn::nn::attrs::Registry;
use sparse_gcn::nn::dropout::ReluDropout;
use sparse_gcn::nn::gcnii::GcniiConv;
use sparse_gcn::nn::jk::JumpingKnowledge;
use sparse_gcn::nn::layer::{Bwd, Cx, Fwd, GradMode, InputDesc, Spec};
use sparse_gcn::nn::pair_norm::PairNormMode;
use sparse_gcn::nn::sgc::SgcPropagate;
use sparse_gcn::nn::{
    add::Add, BatchNorm, GcnConv, JkMode, Layer, Linear, MaskStreams, Model, Node, Order, PairNorm,
    Src, StackOptions, Wiring,
};
use sparse_gcn::train::checkpoint::{self, Saved};
use sparse_gcn::train::{train_step, TrainConfig};
use sparse_gcn::{Error, Par};

use super::checkpoint::{dataset_msg, parts, test_dir, write_parts};

fn node(layer: impl Layer<f32> + 'static, inputs: Vec<Src>, site: u64) -> Node<f32> {
    Node {
        layer: Box::new(layer),
        inputs,
        group: 0,
        site,
    }
}

fn data() -> (Dataset, NormAdj<f32>, Features<f32>) {
    let d = CitationLike {
        n_nodes: 120,
        ..Default::default()
    }
    .generate(3)
    .unwrap();
    let adj = NormAdj::<f32>::new(&d.graph, Norm::Symmetric);
    let x = Features::dense(d.features.to_dense());
    (d, adj, x)
}

#[test]
fn a_stack_of_the_wrong_input_width_is_an_error_not_a_panic() {
    let (d, adj, _) = data();
    let f = d.features.n_cols();
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    // Widths that do not chain: the features have f columns, the first layer reads f + 1; the
    // second layer reads 8 where the first writes 16.
    for (w0, w1) in [(f + 1, 16), (f, 8)] {
        let nodes = vec![
            node(Linear::<f32>::new(w0, 16, true, &mut rng), vec![Src::X], 0),
            node(ReluDropout::relu(16), vec![Src::Node(0)], 0),
            node(
                Linear::<f32>::new(w1, 3, true, &mut rng),
                vec![Src::Node(1)],
                0,
            ),
        ];
        let mut model =
            Model::from_nodes(nodes, Wiring::default(), StackOptions::default()).unwrap();
        let got = model.predict(&adj, &d.features, Par::Seq);
        assert!(
            matches!(got, Err(Error::Mismatch { .. })),
            "widths {w0}, {w1}: {got:?}"
        );
    }
}

/// A stack of every layer of the crate (every name `Registry::builtin` knows), wired with
/// skips, several inputs and per-layer dropout streams.
fn every_layer(f: usize, c: usize) -> Model<f32> {
    let mut r = ChaCha8Rng::seed_from_u64(7);
    let h = 8;
    let mut bn = BatchNorm::<f32>::new(h);
    bn.momentum = 0.3;
    let mut pn = PairNorm::new(h);
    pn.scale = 2.0;
    pn.mode = PairNormMode::PnSi;
    let nodes = vec![
        node(
            GcnConv::<f32>::new(f, h, true, Order::AggregateFirst, &mut r),
            vec![Src::Xd],
            0,
        ),
        node(bn, vec![Src::Node(0)], 0),
        node(ReluDropout::new(h, 0.3), vec![Src::Node(1)], 2),
        node(Linear::<f32>::new(f, h, false, &mut r), vec![Src::X], 0),
        node(Add { dim: h }, vec![Src::Node(2), Src::Node(3)], 0),
        node(pn, vec![Src::Node(4)], 0),
        node(ReluDropout::relu(h), vec![Src::Node(5)], 0),
        node(
            GcniiConv::<f32>::new(h, 0.1, 0.5, 2, &mut r),
            vec![Src::Node(6), Src::Node(3)],
            0,
        ),
        node(ReluDropout::dropout(h, 0.2), vec![Src::Node(7)], 3),
        node(
            GcnConv::<f32>::new(h, h, false, Order::Lean, &mut r),
            vec![Src::Node(8)],
            0,
        ),
        node(SgcPropagate { k: 2, dim: h }, vec![Src::Node(9)], 0),
        node(
            JumpingKnowledge::<f32>::new(JkMode::Attention, h, 3, &mut r),
            vec![Src::Node(4), Src::Node(7), Src::Node(10)],
            0,
        ),
        node(
            AppnpPropagate {
                k: 3,
                alpha: 0.2,
                dim: h,
            },
            vec![Src::Node(11)],
            0,
        ),
        node(
            Linear::<f32>::new(h, c, true, &mut r),
            vec![Src::Node(12)],
            0,
        ),
    ];
    let wiring = Wiring {
        input_dropout: 0.25,
        input_site: 1,
        taps: vec![4, 7, 10],
        streams: MaskStreams::PerLayer,
        blocks: vec![0..3, 9..11],
    };
    Model::from_nodes(nodes, wiring, StackOptions::default()).unwrap()
}

fn bits(a: &ndarray::Array2<f32>) -> Vec<u32> {
    a.iter().map(|v| v.to_bits()).collect()
}

#[test]
fn a_stack_of_every_layer_saves_and_loads_bit_for_bit() {
    let (d, adj, x) = data();
    let mut model = every_layer(x.n_cols(), d.n_classes);
    let mut names: Vec<&str> = model.nodes().iter().map(|n| n.layer.name()).collect();
    names.sort_unstable();
    names.dedup();
    let registry = Registry::<f32>::builtin();
    assert_eq!(
        names,
        registry.names().collect::<Vec<_>>(),
        "the stack uses every registered layer"
    );
    let train = TrainConfig::default();
    let mut opt = train.optimizer::<f32>();
    let mut rng = sparse_gcn::train::rng_stream(0, 1);
    for _ in 0..3 {
        let (loss, _) = train_step(
            &mut model,
            opt.as_mut(),
            &adj,
            &x,
            &d.labels,
            &d.split.train,
            &mut rng,
            Par::Rayon,
        )
        .unwrap();
        assert!(loss.is_finite());
    }
    // Each layer made again from its settings describes itself the same way.
    for n in model.nodes() {
        let attrs = n.layer.attrs().unwrap();
        let again = registry.make(n.layer.name(), &attrs).unwrap();
        assert_eq!(again.attrs(), Some(attrs), "{}", n.layer.name());
    }

    let dir = test_dir("hand-built");
    let path = dir.join("stack.safetensors");
    let extra = BTreeMap::from([("dataset".to_string(), "synthetic".to_string())]);
    checkpoint::save(&path, &mut model, &extra).unwrap();
    let ck = checkpoint::load(&path).unwrap();
    assert_eq!(ck.extra, extra);
    assert_eq!(ck.config(), None);
    assert_eq!(ck.dims(), (Some(x.n_cols()), d.n_classes));
    let Saved::Stack { desc, .. } = &ck.saved else {
        panic!("a stack reads back as an architecture");
    };
    assert_eq!(*desc, model.describe().unwrap());
    let mut back = ck.build(&adj, &x).unwrap();
    assert_eq!(back.orders(), model.orders());
    assert_eq!(
        bits(&back.predict(&adj, &x, Par::Seq).unwrap()),
        bits(&model.predict(&adj, &x, Par::Seq).unwrap())
    );
    // The same file again from the loaded model, byte for byte.
    let again = dir.join("again.safetensors");
    checkpoint::save(&again, &mut back, &extra).unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        std::fs::read(&again).unwrap()
    );
    // On data of another width: a typed error naming the file.
    let narrow = Features::dense(x.to_dense().slice(ndarray::s![.., 1..]).to_owned());
    assert!(matches!(
        ck.build(&adj, &narrow),
        Err(Error::Mismatch { what, .. }) if what.contains("stack.safetensors")
    ));
}

/// A layer that does not describe its settings.
#[derive(Debug, Clone)]
struct Opaque(usize);

impl Layer<f32> for Opaque {
    fn name(&self) -> &'static str {
        "opaque"
    }
    fn spec(&self, _: &[InputDesc], _: usize) -> Spec {
        Spec {
            in_place: true,
            grad: GradMode::InPlace,
            ..Spec::new(self.0).reading(self.0)
        }
    }
    fn forward(&mut self, _: &mut Cx<'_, f32>, _: Fwd<'_, f32>) -> sparse_gcn::Result<()> {
        Ok(())
    }
    fn backward(&mut self, _: &mut Cx<'_, f32>, _: Bwd<'_, f32>) -> sparse_gcn::Result<()> {
        Ok(())
    }
    fn clone_box(&self) -> Box<dyn Layer<f32>> {
        Box::new(self.clone())
    }
}

#[test]
fn a_stack_that_cannot_be_described_is_not_saved() {
    let (d, _, x) = data();
    let mut r = ChaCha8Rng::seed_from_u64(1);
    let f = x.n_cols();
    let nodes = vec![
        node(Opaque(f), vec![Src::X], 0),
        node(
            Linear::<f32>::new(f, d.n_classes, true, &mut r),
            vec![Src::Node(0)],
            0,
        ),
    ];
    let mut model = Model::from_nodes(nodes, Wiring::default(), StackOptions::default()).unwrap();
    let dir = test_dir("hand-built-opaque");
    let path = dir.join("opaque.safetensors");
    std::fs::write(&path, b"old").unwrap();
    let msg = dataset_msg(checkpoint::save(&path, &mut model, &BTreeMap::new()));
    assert!(msg.contains("node 0 (opaque)"), "{msg}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"old",
        "the old file is left"
    );
}

#[test]
fn damaged_stack_metadata_gives_typed_errors() {
    let (d, adj, x) = data();
    let mut model = every_layer(x.n_cols(), d.n_classes);
    let dir = test_dir("hand-built-damaged");
    let good = dir.join("good.safetensors");
    checkpoint::save(&good, &mut model, &BTreeMap::new()).unwrap();
    let bad = dir.join("bad.safetensors");
    let huge = u64::MAX.to_string();
    // (key, value or removed, the message's part) for load, then for build.
    let load_cases: Vec<(&str, Option<&str>, &str)> = vec![
        ("stack.nodes", Some("0"), "`stack.nodes` = `0`"),
        ("stack.nodes", Some(&huge), "a node count"),
        ("stack.3.layer", None, "`stack.3.layer` is missing"),
        ("stack.2.inputs", Some("1,y"), "`stack.2.inputs` = `1,y`"),
        ("stack.2.site", Some("-1"), "`stack.2.site` = `-1`"),
        ("stack.99.attr.dim", Some("4"), "no node 99 of 14"),
        ("stack.taps", Some("1,,x"), "`stack.taps`"),
        ("stack.blocks", Some("3..x"), "`stack.blocks`"),
        ("stack.streams", Some("many"), "`stack.streams` = `many`"),
        ("stack.checkpoint", Some("every:0"), "`stack.checkpoint`"),
        ("stack.out_dim", None, "`stack.out_dim` is missing"),
        ("version", Some("4"), "`version` = `4`"),
        ("model", Some("gcn"), "`model` = `gcn`"),
    ];
    for (key, value, expect) in load_cases {
        let mut p = parts(&good);
        match value {
            Some(v) => p.meta.insert(key.to_string(), v.to_string()),
            None => p.meta.remove(key),
        };
        write_parts(&bad, &p, true);
        let msg = dataset_msg(checkpoint::load(&bad));
        assert!(msg.contains(expect), "{key}: {msg}");
    }
    let build_cases: Vec<(&str, Option<&str>, &str)> = vec![
        ("stack.0.layer", Some("sage_conv"), "unknown layer"),
        ("stack.2.layer", Some("relu"), "make a `relu_dropout` layer"),
        ("stack.0.attr.order", Some("auto"), "`order` = `auto`"),
        ("stack.0.attr.in_dim", None, "`in_dim`"),
        ("stack.2.attr.p", Some("1.5"), "`p` = `1.5`"),
        ("stack.1.attr.eps", Some("NaN"), "`eps`"),
        ("stack.5.attr.mode", Some("pn-xx"), "PairNorm mode"),
        ("stack.11.attr.n_layers", Some("2"), "3 inputs for arity 2"),
        ("stack.10.attr.k", Some("1000000000"), "`k`"),
        ("stack.12.attr.alpha", Some("2"), "`alpha` = `2`"),
        // Sizes the file's tensors cannot fill: refused before allocating.
        (
            "stack.13.attr.in_dim",
            Some("4000000000"),
            "the file's tensors can fill",
        ),
        ("stack.3.attr.out_dim", Some(&huge), "in_dim × out_dim"),
        // A node reading a later one, a tap out of range, a bad input dropout.
        (
            "stack.4.inputs",
            Some("2,9"),
            "reads node 9, which comes later",
        ),
        ("stack.taps", Some("4,99"), "tap 99"),
        ("stack.input_dropout", Some("1"), "dropout"),
    ];
    for (key, value, expect) in build_cases {
        let mut p = parts(&good);
        match value {
            Some(v) => p.meta.insert(key.to_string(), v.to_string()),
            None => p.meta.remove(key),
        };
        write_parts(&bad, &p, true);
        let ck = checkpoint::load(&bad).unwrap_or_else(|e| panic!("{key}: {e}"));
        let msg = dataset_msg(ck.build(&adj, &x));
        assert!(msg.contains(expect), "{key}: {msg}");
    }
    // Widths that do not chain (node 7 reads 8, node 9 writes 16): a mismatch naming the file.
    let mut p = parts(&good);
    p.meta.insert("stack.9.attr.out_dim".into(), "16".into());
    write_parts(&bad, &p, true);
    let got = checkpoint::load(&bad).unwrap().build(&adj, &x);
    assert!(
        matches!(&got, Err(Error::Mismatch { what, .. }) if what.contains("bad.safetensors")),
        "{got:?}"
    );
}
