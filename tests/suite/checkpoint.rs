//! Checkpoints (format v2, any architecture): save → load → build round trips bit for bit for
//! every architecture, the file is standard safetensors with the documented names and metadata,
//! an interrupted save leaves the previous checkpoint intact, and every kind of damaged file
//! gives its typed error.
//!
//! Ported from the v1 format (the Kipf GCN only, tensors `layers.{l}.weight`): tensors are now
//! `nodes.{i}.{layer}.{param}` (biases 1 × out, statistics 1-D), shapes are checked when the
//! model is built on the data (`Checkpoint::build`) rather than at load, and `save` takes the
//! model alone (it carries its configuration, `Model::config`). The old
//! `save_checks_model_against_config` test (a config passed to `save` that contradicts the
//! model) is gone with the argument; `load_expecting` (load against an expected config) became
//! `build` on data of another width and metadata that contradicts the tensors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};

use ndarray::Array2;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use sparse_gcn::data::{synthetic::CitationLike, Dataset, Features};
use sparse_gcn::graph::{Norm, NormAdj};
use sparse_gcn::metrics::accuracy;
use sparse_gcn::nn::pair_norm::PairNormMode;
use sparse_gcn::nn::{Arch, Model, ModelConfig, Named, NormKind, Order};
use sparse_gcn::train::checkpoint::{self, Checkpoint, Saved};
use sparse_gcn::train::{build_model, train_step, TrainConfig};
use sparse_gcn::{Error, Par};

/// A fresh, empty directory for one test.
pub(crate) fn test_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("checkpoint-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

struct Setup {
    data: Dataset,
    adj: NormAdj<f32>,
}

fn setup() -> Setup {
    let mut data = CitationLike {
        n_nodes: 300,
        ..Default::default()
    }
    .generate(1)
    .unwrap();
    data.features.row_normalize();
    let adj = NormAdj::<f32>::new(&data.graph, Norm::Symmetric);
    Setup { data, adj }
}

/// The Kipf GCN of `n_layers` with `bias` and `order`.
fn kipf(n_layers: usize, bias: bool, order: Order) -> ModelConfig {
    ModelConfig {
        n_layers,
        bias,
        order,
        ..Default::default()
    }
}

/// A model of `cfg` on the setup's data trained for a few epochs (so biases, BatchNorm's
/// parameters and running statistics are not at their initial values).
fn trained(s: &Setup, cfg: &ModelConfig, seed: u64) -> Model<f32> {
    let x = &s.data.features;
    let mut model = build_model(&s.adj, x, s.data.n_classes, cfg, seed).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut opt = TrainConfig::default().optimizer::<f32>();
    for _ in 0..10 {
        train_step(
            &mut model,
            opt.as_mut(),
            &s.adj,
            x,
            &s.data.labels,
            &s.data.split.train,
            &mut rng,
            Par::Seq,
        )
        .unwrap();
    }
    model
}

fn logits(s: &Setup, model: &mut Model<f32>, x: &Features<f32>) -> Array2<f32> {
    model.predict(&s.adj, x, Par::Rayon).unwrap()
}

fn bits(a: &Array2<f32>) -> Vec<u32> {
    a.iter().map(|v| v.to_bits()).collect()
}

/// Every named tensor: (name, shape, value bits).
fn named(m: &mut Model<f32>) -> Vec<(String, Vec<usize>, Vec<u32>)> {
    let mut out = Vec::new();
    m.visit_named(&mut |name, t| {
        out.push((
            name.to_string(),
            t.shape(),
            t.values().map(|v| v.to_bits()).collect(),
        ))
    });
    out
}

fn assert_same_params(a: &mut Model<f32>, b: &mut Model<f32>) {
    assert_eq!(named(a), named(b));
    assert_eq!(a.orders(), b.orders());
    assert_eq!(a.config(), b.config());
}

fn extra(dataset: &str, seed: u64) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("dataset".to_string(), dataset.to_string()),
        ("seed".to_string(), seed.to_string()),
        ("row_normalize".to_string(), "true".to_string()),
    ])
}

/// Saves `model`, loads the file and builds the model on the setup's data; checks the
/// configuration, the orders, the metadata, the tensor names and shapes, every value and the
/// logits bit for bit (with and without the caches a first evaluation pass fills, and after
/// `release`).
fn round_trip(
    s: &Setup,
    model: &mut Model<f32>,
    path: &Path,
    ex: &BTreeMap<String, String>,
    what: &str,
) {
    checkpoint::save(path, model, ex).unwrap();
    let ck: Checkpoint = checkpoint::load(path).unwrap();
    let Saved::Arch { config, orders } = &ck.saved else {
        panic!("{what}: an architecture's checkpoint reads back as a stack");
    };
    assert_eq!(Some(config), model.config(), "{what}");
    assert_eq!(ck.extra, *ex, "{what}");
    assert_eq!(*orders, model.orders(), "{what}");
    // The file holds exactly the model's tensors, under `nodes.`, with the model's shapes.
    let bytes = std::fs::read(path).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let mut in_file: Vec<(String, Vec<usize>)> = st
        .tensors()
        .into_iter()
        .map(|(n, t)| (n, t.shape().to_vec()))
        .collect();
    in_file.sort();
    let mut want: Vec<(String, Vec<usize>)> = named(model)
        .into_iter()
        .map(|(n, shape, _)| (format!("nodes.{n}"), shape))
        .collect();
    want.sort();
    assert_eq!(in_file, want, "{what}");
    let x = &s.data.features;
    let mut back = ck.build(&s.adj, x).unwrap();
    assert_same_params(model, &mut back);
    let want = logits(s, model, x);
    let got = logits(s, &mut back, x);
    assert_eq!(bits(&want), bits(&got), "{what}");
    // Again, on the caches of the first pass, then after releasing them.
    assert_eq!(bits(&want), bits(&logits(s, &mut back, x)), "{what}");
    back.release();
    assert_eq!(bits(&want), bits(&logits(s, &mut back, x)), "{what}");
    let test = &s.data.split.test;
    assert_eq!(
        accuracy(want.view(), &s.data.labels, test).to_bits(),
        accuracy(got.view(), &s.data.labels, test).to_bits(),
        "{what}"
    );
}

#[test]
fn kipf_round_trip_is_bit_identical() {
    let s = setup();
    let dir = test_dir("round-trip");
    for (i, (n_layers, bias, order)) in [
        (2, false, Order::Auto),
        (2, true, Order::AggregateFirst),
        (3, true, Order::TransformFirst),
        (1, true, Order::Auto),
    ]
    .into_iter()
    .enumerate()
    {
        let cfg = ModelConfig {
            dropout: 0.3,
            input_dropout: 0.1,
            hidden_dim: 12,
            ..kipf(n_layers, bias, order)
        };
        let seed = 7 + i as u64;
        let mut model = trained(&s, &cfg, seed);
        let path = dir.join(format!("m{i}.safetensors"));
        let what = format!("Kipf {n_layers} layers, bias {bias}, {order:?}");
        round_trip(&s, &mut model, &path, &extra("synthetic", seed), &what);
    }
}

#[test]
fn every_architecture_round_trips_bit_for_bit() {
    let s = setup();
    let dir = test_dir("every-arch");
    let mut k = 0;
    for arch in Arch::all() {
        let norms: &[NormKind] = match arch {
            Arch::Gcn(_) | Arch::Residual(_) | Arch::Jk(_) => &[
                NormKind::None,
                NormKind::Batch,
                NormKind::Pair(PairNormMode::Pn),
            ],
            _ => &[NormKind::None],
        };
        for &norm in norms {
            let cfg = ModelConfig {
                hidden_dim: 12,
                norm,
                bias: true,
                // Checkpointing is part of the configuration; it changes no value.
                checkpoint: if norm == NormKind::Batch { 2 } else { 0 },
                ..ModelConfig::deep(arch, 4)
            };
            let mut model = trained(&s, &cfg, 3 + k);
            let path = dir.join(format!("m{k}.safetensors"));
            let what = format!("{arch}, norm {norm}");
            round_trip(&s, &mut model, &path, &extra("synthetic", 3 + k), &what);
            k += 1;
        }
    }
}

#[test]
fn file_is_standard_safetensors_with_documented_layout() {
    let s = setup();
    let dir = test_dir("layout");
    let cfg = kipf(2, true, Order::Auto);
    let mut model = trained(&s, &cfg, 1);
    let (in_dim, hidden, out_dim) = (s.data.features.n_cols(), 16, s.data.n_classes);
    let path = dir.join("m.safetensors");
    checkpoint::save(&path, &mut model, &extra("synthetic", 1)).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let mut names = st.names();
    names.sort_unstable();
    // Node 0 is the first convolution, node 1 its ReLU·dropout, node 2 the second convolution.
    assert_eq!(
        names,
        [
            "nodes.0.gcn_conv.bias",
            "nodes.0.gcn_conv.weight",
            "nodes.2.gcn_conv.bias",
            "nodes.2.gcn_conv.weight"
        ]
    );
    let w = st.tensor("nodes.0.gcn_conv.weight").unwrap();
    assert_eq!(w.dtype(), Dtype::F32);
    assert_eq!(w.shape(), [in_dim, hidden]);
    // Row-major, little-endian: element (r, c) sits at r * cols + c.
    let (r, c) = (3, 5);
    let off = 4 * (r * hidden + c);
    let v = f32::from_le_bytes(w.data()[off..off + 4].try_into().unwrap());
    let mut want = None;
    model.visit_named(&mut |name, t| {
        if let ("0.gcn_conv.weight", Named::Param(p)) = (name, t) {
            want = Some(p.value[[r, c]]);
        }
    });
    assert_eq!(v.to_bits(), want.unwrap().to_bits());
    assert_eq!(
        st.tensor("nodes.2.gcn_conv.bias").unwrap().shape(),
        [1, out_dim]
    );
    let (_, header) = SafeTensors::read_metadata(&bytes).unwrap();
    let meta = header.metadata().as_ref().unwrap();
    for (k, v) in [
        ("format", "sparse-gcn"),
        ("version", "2"),
        ("weight_layout", "in_out"),
        ("model", "gcn"),
        ("hidden_dim", "16"),
        ("n_layers", "2"),
        ("dropout", "0.5"),
        ("input_dropout", "0.5"),
        ("norm_layer", "none"),
        ("bias", "true"),
        ("order", "auto"),
        ("checkpoint", "0"),
        ("drop_edge", "0"),
        ("mask_streams", "shared"),
        ("dataset", "synthetic"),
        ("row_normalize", "true"),
    ] {
        assert_eq!(meta.get(k).map(String::as_str), Some(v), "metadata {k}");
    }
    let orders: Vec<&str> = model.orders().into_iter().map(Order::name).collect();
    assert_eq!(orders.len(), 2);
    assert_eq!(meta["orders"], orders.join(","));
    assert_eq!(meta["in_dim"], in_dim.to_string());
    assert_eq!(meta["out_dim"], out_dim.to_string());

    // A deep model: BatchNorm's parameters are 2-D (1 × d), its running statistics 1-D.
    let cfg = ModelConfig {
        hidden_dim: 8,
        norm: NormKind::Batch,
        ..ModelConfig::deep(Arch::RESIDUAL, 3)
    };
    let mut model = trained(&s, &cfg, 2);
    checkpoint::save(&path, &mut model, &BTreeMap::new()).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let (_, header) = SafeTensors::read_metadata(&bytes).unwrap();
    let meta = header.metadata().as_ref().unwrap();
    assert_eq!(meta["model"], "residual");
    assert_eq!(meta["norm_layer"], "batch");
    assert_eq!(meta["mask_streams"], "per-layer");
    let mut stats = 0;
    for (name, t) in st.tensors() {
        let parts: Vec<&str> = name.split('.').collect();
        assert_eq!(parts.len(), 4, "{name}");
        assert_eq!(parts[0], "nodes", "{name}");
        assert!(parts[1].parse::<usize>().is_ok(), "{name}");
        match parts[3] {
            "running_mean" | "running_var" => {
                assert_eq!(parts[2], "batch_norm");
                assert_eq!(t.shape(), [8], "{name}");
                stats += 1;
            }
            "gamma" | "beta" => assert_eq!(t.shape(), [1, 8], "{name}"),
            "weight" | "bias" => assert_eq!(t.shape().len(), 2, "{name}"),
            p => panic!("unexpected parameter {p} in {name}"),
        }
    }
    // Two hidden blocks, one BatchNorm each.
    assert_eq!(stats, 4);
}

fn stray_temp_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".tmp-"))
        .collect()
}

#[test]
fn interrupted_save_leaves_previous_checkpoint_intact() {
    let s = setup();
    let dir = test_dir("interrupted");
    let cfg = kipf(2, true, Order::Auto);
    let mut a = trained(&s, &cfg, 1);
    let mut b = trained(&s, &cfg, 2);
    let path = dir.join("model.safetensors");
    checkpoint::save(&path, &mut a, &extra("a", 1)).unwrap();
    let bytes_a = std::fs::read(&path).unwrap();
    let x = &s.data.features;

    // The write fails half-way (disk full, …).
    let mut written = 0;
    let err = checkpoint::save_with(&path, &mut b, &extra("b", 2), &mut |w, bytes| {
        let half = bytes.len() / 2;
        w.write_all(&bytes[..half])?;
        written = half;
        Err(io::Error::other("simulated failure half-way"))
    })
    .unwrap_err();
    assert!(written > 0);
    match err {
        Error::Io { path: p, source } => {
            assert!(p.to_string_lossy().contains(".tmp-"), "{}", p.display());
            assert_eq!(source.to_string(), "simulated failure half-way");
        }
        e => panic!("expected Error::Io, got {e:?}"),
    }
    assert_eq!(std::fs::read(&path).unwrap(), bytes_a);
    let ck = checkpoint::load(&path).unwrap();
    assert_same_params(&mut a, &mut ck.build(&s.adj, x).unwrap());
    assert_eq!(ck.extra["dataset"], "a");
    assert_eq!(stray_temp_files(&dir), Vec::<PathBuf>::new());

    // The writer panics half-way: the temporary file is still cleaned up.
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = checkpoint::save_with(&path, &mut b, &extra("b", 2), &mut |w, bytes| {
            w.write_all(&bytes[..bytes.len() / 2])?;
            panic!("simulated crash half-way");
        });
    }));
    assert!(res.is_err());
    assert_eq!(std::fs::read(&path).unwrap(), bytes_a);
    assert_eq!(stray_temp_files(&dir), Vec::<PathBuf>::new());

    // A save refused before writing (reserved extra key, non-finite weight) leaves it too.
    let mut bad = extra("b", 2);
    bad.insert("in_dim".into(), "7".into());
    match checkpoint::save(&path, &mut b, &bad) {
        Err(Error::Dataset { msg, .. }) => assert!(msg.contains("`in_dim` is reserved"), "{msg}"),
        r => panic!("expected Error::Dataset, got {r:?}"),
    }
    let mut nan = b.clone();
    nan.visit_named(&mut |name, t| {
        if let ("2.gcn_conv.weight", Named::Param(p)) = (name, t) {
            p.value[[2, 3]] = f32::NAN;
        }
    });
    match checkpoint::save(&path, &mut nan, &extra("b", 2)) {
        Err(Error::NonFiniteValue { what, row, col, .. }) => {
            assert!(what.contains("2.gcn_conv.weight"), "{what}");
            assert_eq!((row, col), (2, 3));
        }
        r => panic!("expected NonFiniteValue, got {r:?}"),
    }
    assert_eq!(std::fs::read(&path).unwrap(), bytes_a);
    assert_eq!(stray_temp_files(&dir), Vec::<PathBuf>::new());

    // A complete save replaces it.
    checkpoint::save(&path, &mut b, &extra("b", 2)).unwrap();
    let ck = checkpoint::load(&path).unwrap();
    assert_same_params(&mut b, &mut ck.build(&s.adj, x).unwrap());
    assert_eq!(ck.extra["dataset"], "b");
    assert_eq!(stray_temp_files(&dir), Vec::<PathBuf>::new());
}

/// A good checkpoint's tensors and metadata, to damage and write back.
pub(crate) struct Parts {
    pub(crate) tensors: Vec<(String, Dtype, Vec<usize>, Vec<u8>)>,
    pub(crate) meta: HashMap<String, String>,
}

pub(crate) fn parts(path: &Path) -> Parts {
    let bytes = std::fs::read(path).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let mut tensors: Vec<_> = st
        .tensors()
        .into_iter()
        .map(|(n, t)| (n, t.dtype(), t.shape().to_vec(), t.data().to_vec()))
        .collect();
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    let (_, header) = SafeTensors::read_metadata(&bytes).unwrap();
    Parts {
        tensors,
        meta: header.metadata().clone().unwrap(),
    }
}

pub(crate) fn write_parts(path: &Path, p: &Parts, with_meta: bool) {
    let views: Vec<_> = p
        .tensors
        .iter()
        .map(|(n, d, s, b)| (n.as_str(), TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    let bytes = safetensors::tensor::serialize(views, with_meta.then(|| p.meta.clone())).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn tensor<'p>(p: &'p mut Parts, name: &str) -> &'p mut (String, Dtype, Vec<usize>, Vec<u8>) {
    p.tensors.iter_mut().find(|t| t.0 == name).unwrap()
}

pub(crate) fn dataset_msg<T: std::fmt::Debug>(r: Result<T, Error>) -> String {
    match r {
        Err(Error::Dataset { msg, .. }) => msg,
        r => panic!("expected Error::Dataset, got {r:?}"),
    }
}

#[test]
fn damaged_files_give_typed_errors() {
    let s = setup();
    let dir = test_dir("damaged");
    let cfg = kipf(2, true, Order::Auto);
    let mut model = trained(&s, &cfg, 1);
    let (in_dim, hidden, out_dim) = (s.data.features.n_cols(), 16, s.data.n_classes);
    let good = dir.join("good.safetensors");
    checkpoint::save(&good, &mut model, &extra("synthetic", 1)).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let bad = dir.join("bad.safetensors");
    let x = &s.data.features;
    let load_bad = || checkpoint::load(&bad);
    let build_bad = || checkpoint::load(&bad).unwrap().build(&s.adj, x);

    // Missing file.
    match checkpoint::load(&dir.join("nope.safetensors")) {
        Err(Error::Io { path, .. }) => assert!(path.ends_with("nope.safetensors")),
        r => panic!("expected Error::Io, got {r:?}"),
    }
    // Truncated, empty, garbage header, garbage altogether.
    for damaged in [
        bytes[..bytes.len() / 2].to_vec(),
        bytes[..bytes.len() - 1].to_vec(),
        bytes[..5].to_vec(),
        Vec::new(),
        {
            let mut b = bytes.clone();
            b[8..20].copy_from_slice(b"garbage!{[}]");
            b
        },
        b"this is not a safetensors file at all".to_vec(),
    ] {
        std::fs::write(&bad, &damaged).unwrap();
        let msg = dataset_msg(load_bad());
        assert!(msg.contains("not a valid safetensors file"), "{msg}");
    }

    // Wrong shape in the header (the data matches the declared shape): loads, does not build.
    let mut p = parts(&good);
    let w0 = tensor(&mut p, "nodes.0.gcn_conv.weight");
    w0.2 = vec![in_dim + 1, hidden];
    w0.3.extend(vec![0u8; 4 * hidden]);
    write_parts(&bad, &p, true);
    match build_bad() {
        Err(Error::Mismatch {
            what,
            expected,
            got,
        }) => {
            assert!(what.contains("nodes.0.gcn_conv.weight"), "{what}");
            assert!(what.contains("bad.safetensors"), "{what}");
            assert_eq!((expected, got), (in_dim * hidden, (in_dim + 1) * hidden));
        }
        r => panic!("expected Error::Mismatch, got {r:?}"),
    }
    // A bias stored 1-D (as v1 did): the same number of values, another shape.
    let mut p = parts(&good);
    tensor(&mut p, "nodes.2.gcn_conv.bias").2 = vec![out_dim];
    write_parts(&bad, &p, true);
    match build_bad() {
        Err(Error::Mismatch { what, .. }) => {
            assert!(what.contains("nodes.2.gcn_conv.bias"), "{what}")
        }
        r => panic!("expected Error::Mismatch, got {r:?}"),
    }

    // Missing tensor.
    let mut p = parts(&good);
    p.tensors.retain(|t| t.0 != "nodes.2.gcn_conv.weight");
    write_parts(&bad, &p, true);
    let msg = dataset_msg(build_bad());
    assert!(
        msg.contains("nodes.2.gcn_conv.weight") && msg.contains("missing"),
        "{msg}"
    );

    // Unexpected tensor.
    let mut p = parts(&good);
    p.tensors.push((
        "nodes.3.gcn_conv.weight".into(),
        Dtype::F32,
        vec![1],
        vec![0; 4],
    ));
    write_parts(&bad, &p, true);
    let msg = dataset_msg(build_bad());
    assert!(
        msg.contains("unexpected tensor `nodes.3.gcn_conv.weight`"),
        "{msg}"
    );
    // A v1 name.
    let mut p = parts(&good);
    let w = tensor(&mut p, "nodes.0.gcn_conv.weight");
    w.0 = "layers.0.weight".into();
    write_parts(&bad, &p, true);
    let msg = dataset_msg(build_bad());
    assert!(
        msg.contains("nodes.0.gcn_conv.weight") && msg.contains("missing"),
        "{msg}"
    );

    // Wrong dtype: the same values as F64.
    let mut p = parts(&good);
    let w1 = tensor(&mut p, "nodes.2.gcn_conv.weight");
    w1.1 = Dtype::F64;
    w1.3 =
        w1.3.chunks_exact(4)
            .flat_map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap())).to_le_bytes())
            .collect();
    write_parts(&bad, &p, true);
    let msg = dataset_msg(load_bad());
    assert!(
        msg.contains("nodes.2.gcn_conv.weight") && msg.contains("F64"),
        "{msg}"
    );

    // A non-finite value.
    let mut p = parts(&good);
    let w1 = tensor(&mut p, "nodes.2.gcn_conv.weight");
    let at = 2 * out_dim + 1;
    w1.3[4 * at..4 * at + 4].copy_from_slice(&f32::INFINITY.to_le_bytes());
    write_parts(&bad, &p, true);
    match load_bad() {
        Err(Error::NonFiniteValue {
            what,
            row,
            col,
            value,
        }) => {
            assert!(what.contains("nodes.2.gcn_conv.weight"), "{what}");
            assert_eq!((row, col), (2, 1));
            assert_eq!(value, f64::INFINITY);
        }
        r => panic!("expected Error::NonFiniteValue, got {r:?}"),
    }
}

#[test]
fn damaged_metadata_gives_typed_errors() {
    let s = setup();
    let dir = test_dir("damaged-meta");
    let cfg = kipf(2, true, Order::Auto);
    let mut model = trained(&s, &cfg, 1);
    let good = dir.join("good.safetensors");
    checkpoint::save(&good, &mut model, &extra("synthetic", 1)).unwrap();
    let bad = dir.join("bad.safetensors");
    let x = &s.data.features;
    let load_bad = || checkpoint::load(&bad);
    let build_bad = || checkpoint::load(&bad).unwrap().build(&s.adj, x);

    // No metadata at all.
    write_parts(&bad, &parts(&good), false);
    assert!(dataset_msg(load_bad()).contains("__metadata__"));

    // Bad or missing metadata values: the message names the key and the value.
    for (key, value, expect) in [
        ("dropout", Some("abc"), "`dropout` = `abc`"),
        ("in_dim", Some("-3"), "`in_dim` = `-3`"),
        ("bias", Some("yes"), "`bias` = `yes`"),
        (
            "order",
            Some("sideways"),
            "`order`: unknown order 'sideways'",
        ),
        (
            "model",
            Some("transformer"),
            "`model`: unknown model 'transformer'",
        ),
        (
            "norm_layer",
            Some("layer"),
            "`norm_layer`: unknown normalisation 'layer'",
        ),
        ("mask_streams", Some("both"), "`mask_streams` = `both`"),
        (
            "orders",
            Some("auto,transform-first"),
            "`orders` = `auto,transform-first`",
        ),
        ("format", Some("pytorch"), "`format` = `pytorch`"),
        ("version", Some("1"), "`version` = `1`"),
        (
            "weight_layout",
            Some("out_in"),
            "`weight_layout` = `out_in`",
        ),
        ("dropout", Some("1.5"), "dropout must lie in [0, 1)"),
        ("n_layers", Some("0"), "at least one layer"),
        ("hidden_dim", None, "`hidden_dim` is missing"),
        ("mask_streams", None, "`mask_streams` is missing"),
        ("format", None, "`format` is missing"),
    ] {
        let mut p = parts(&good);
        match value {
            Some(v) => p.meta.insert(key.into(), v.into()),
            None => p.meta.remove(key),
        };
        write_parts(&bad, &p, true);
        let msg = dataset_msg(load_bad());
        assert!(msg.contains(expect), "{key}: {msg}");
    }
    // An `orders` list of the wrong length.
    for orders in [
        "transform-first",
        "transform-first,transform-first,aggregate-first",
    ] {
        let mut p = parts(&good);
        p.meta.insert("orders".into(), orders.into());
        write_parts(&bad, &p, true);
        let n = orders.split(',').count();
        assert!(
            matches!(build_bad(), Err(Error::Mismatch { expected: 2, got, .. }) if got == n),
            "orders {orders}"
        );
    }

    // The good file still loads and builds.
    let mut back = checkpoint::load(&good).unwrap().build(&s.adj, x).unwrap();
    assert_same_params(&mut model, &mut back);
}

#[test]
fn building_on_other_data_or_contradicting_metadata_fails() {
    let s = setup();
    let dir = test_dir("expecting");
    let cfg = kipf(2, false, Order::Auto);
    let mut model = trained(&s, &cfg, 1);
    let (in_dim, hidden, out_dim) = (s.data.features.n_cols(), 16, s.data.n_classes);
    let path = dir.join("m.safetensors");
    checkpoint::save(&path, &mut model, &BTreeMap::new()).unwrap();
    let x = &s.data.features;

    // Data of another input width.
    let wider = Features::dense(Array2::<f32>::zeros((s.adj.n_nodes(), in_dim + 10)));
    match checkpoint::load(&path).unwrap().build(&s.adj, &wider) {
        Err(Error::Mismatch {
            what,
            expected,
            got,
        }) => {
            assert!(what.contains("input width"), "{what}");
            assert_eq!((expected, got), (in_dim, in_dim + 10));
        }
        r => panic!("expected Error::Mismatch, got {r:?}"),
    }

    // Metadata that contradicts the tensors.
    let bad = dir.join("bad.safetensors");
    let with_meta = |key: &str, value: &str| {
        let mut p = parts(&path);
        p.meta.insert(key.into(), value.into());
        write_parts(&bad, &p, true);
        checkpoint::load(&bad).unwrap().build(&s.adj, x)
    };
    match with_meta("out_dim", &(out_dim - 1).to_string()) {
        Err(Error::Mismatch {
            what,
            expected,
            got,
        }) => {
            assert!(what.contains("nodes.2.gcn_conv.weight"), "{what}");
            assert_eq!((expected, got), (hidden * (out_dim - 1), hidden * out_dim));
        }
        r => panic!("expected Error::Mismatch, got {r:?}"),
    }
    match with_meta("hidden_dim", "32") {
        Err(Error::Mismatch { what, .. }) => {
            assert!(what.contains("nodes.0.gcn_conv.weight"), "{what}")
        }
        r => panic!("expected Error::Mismatch, got {r:?}"),
    }
    let msg = dataset_msg(with_meta("bias", "true"));
    assert!(
        msg.contains("nodes.0.gcn_conv.bias") && msg.contains("missing"),
        "{msg}"
    );
    // Another architecture with the same tensors' node layout missing.
    let msg = dataset_msg(with_meta("model", "jk-cat"));
    assert!(msg.contains("missing"), "{msg}");
}
