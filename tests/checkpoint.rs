//! Checkpoints: save → load round trips bit for bit, an interrupted save leaves the previous
//! checkpoint intact, and every kind of damaged file gives its typed error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};

use ndarray::Array2;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use sparse_gcn::graph::{synthetic::CitationLike, Dataset, Features, Norm, NormAdj};
use sparse_gcn::metrics::accuracy;
use sparse_gcn::nn::{Gcn, GcnConfig, Mode, Order};
use sparse_gcn::train::checkpoint::{self, Checkpoint};
use sparse_gcn::train::{train_step, TrainConfig};
use sparse_gcn::{Error, Par};

/// A fresh, empty directory for one test.
fn test_dir(name: &str) -> PathBuf {
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

fn config(s: &Setup, n_layers: usize, bias: bool, order: Order) -> GcnConfig {
    GcnConfig {
        in_dim: s.data.features.n_cols(),
        out_dim: s.data.n_classes,
        n_layers,
        bias,
        order,
        ..Default::default()
    }
}

/// A model trained for a few epochs (so biases are non-zero).
fn trained(s: &Setup, cfg: &GcnConfig, seed: u64) -> Gcn<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut model = cfg.init(&s.adj, &s.data.features, &mut rng).unwrap();
    model.prepare(&s.adj, &s.data.features, Par::Seq);
    let mut opt = TrainConfig::default().optimizer::<f32>();
    for _ in 0..10 {
        train_step(
            &mut model,
            opt.as_mut(),
            &s.adj,
            &s.data.features,
            &s.data.labels,
            &s.data.split.train,
            &mut rng,
            Par::Seq,
        );
    }
    model
}

fn logits(s: &Setup, model: &Gcn<f32>, x: &Features<f32>) -> Array2<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    model.forward(&s.adj, x, Mode::Eval, &mut rng, Par::Rayon).0
}

fn bits(a: &Array2<f32>) -> Vec<u32> {
    a.iter().map(|v| v.to_bits()).collect()
}

fn assert_same_params(a: &Gcn<f32>, b: &Gcn<f32>) {
    assert_eq!(a.layers.len(), b.layers.len());
    for (la, lb) in a.layers.iter().zip(&b.layers) {
        assert_eq!(bits(&la.weight.value), bits(&lb.weight.value));
        assert_eq!(
            la.bias.as_ref().map(|p| bits(&p.value)),
            lb.bias.as_ref().map(|p| bits(&p.value))
        );
        assert_eq!(la.order, lb.order);
    }
}

fn extra(dataset: &str, seed: u64) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("dataset".to_string(), dataset.to_string()),
        ("seed".to_string(), seed.to_string()),
        ("row_normalize".to_string(), "true".to_string()),
    ])
}

#[test]
fn round_trip_is_bit_identical() {
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
        let cfg = GcnConfig {
            dropout: 0.3,
            input_dropout: 0.1,
            hidden_dim: 12,
            ..config(&s, n_layers, bias, order)
        };
        let model = trained(&s, &cfg, 7 + i as u64);
        let path = dir.join(format!("m{i}.safetensors"));
        let ex = extra("synthetic", 7 + i as u64);
        checkpoint::save(&path, &model, &cfg, &ex).unwrap();
        let ck: Checkpoint = checkpoint::load(&path).unwrap();
        assert_eq!(ck.config, cfg);
        assert_eq!(ck.extra, ex);
        assert_eq!(ck.orders(), model.orders());
        assert_eq!(ck.model.dropout(), cfg.dropout);
        assert_eq!(ck.model.input_dropout(), cfg.input_dropout);
        assert_same_params(&model, &ck.model);
        // Same logits and test accuracy, bit for bit, with or without the cached ÂX.
        let x = &s.data.features;
        let want = logits(&s, &model, x);
        let got = logits(&s, &ck.model, x);
        assert_eq!(bits(&want), bits(&got));
        let mut prepared = ck.model.clone();
        prepared.prepare(&s.adj, x, Par::Rayon);
        assert_eq!(bits(&want), bits(&logits(&s, &prepared, x)));
        let test = &s.data.split.test;
        assert_eq!(
            accuracy(want.view(), &s.data.labels, test).to_bits(),
            accuracy(got.view(), &s.data.labels, test).to_bits()
        );
        // load_expecting with the same shapes agrees.
        let ck2 = checkpoint::load_expecting(&path, &cfg).unwrap();
        assert_same_params(&model, &ck2.model);
    }
}

#[test]
fn file_is_standard_safetensors_with_documented_layout() {
    let s = setup();
    let dir = test_dir("layout");
    let cfg = config(&s, 2, true, Order::Auto);
    let model = trained(&s, &cfg, 1);
    let path = dir.join("m.safetensors");
    checkpoint::save(&path, &model, &cfg, &extra("synthetic", 1)).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let mut names = st.names();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "layers.0.bias",
            "layers.0.weight",
            "layers.1.bias",
            "layers.1.weight"
        ]
    );
    let w = st.tensor("layers.0.weight").unwrap();
    assert_eq!(w.dtype(), Dtype::F32);
    assert_eq!(w.shape(), [cfg.in_dim, cfg.hidden_dim]);
    // Row-major, little-endian: element (r, c) sits at r * cols + c.
    let (r, c) = (3, 5);
    let off = 4 * (r * cfg.hidden_dim + c);
    let v = f32::from_le_bytes(w.data()[off..off + 4].try_into().unwrap());
    assert_eq!(v.to_bits(), model.layers[0].weight.value[[r, c]].to_bits());
    assert_eq!(st.tensor("layers.1.bias").unwrap().shape(), [cfg.out_dim]);
    let (_, header) = SafeTensors::read_metadata(&bytes).unwrap();
    let meta = header.metadata().as_ref().unwrap();
    for (k, v) in [
        ("format", "sparse-gcn"),
        ("version", "1"),
        ("weight_layout", "in_out"),
        ("hidden_dim", "16"),
        ("n_layers", "2"),
        ("dropout", "0.5"),
        ("bias", "true"),
        ("order", "auto"),
        ("dataset", "synthetic"),
        ("row_normalize", "true"),
    ] {
        assert_eq!(meta.get(k).map(String::as_str), Some(v), "metadata {k}");
    }
    let orders: Vec<&str> = model
        .orders()
        .into_iter()
        .map(checkpoint::order_name)
        .collect();
    assert_eq!(meta["orders"], orders.join(","));
    assert_eq!(meta["in_dim"], cfg.in_dim.to_string());
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
    let cfg = config(&s, 2, true, Order::Auto);
    let a = trained(&s, &cfg, 1);
    let b = trained(&s, &cfg, 2);
    let path = dir.join("model.safetensors");
    checkpoint::save(&path, &a, &cfg, &extra("a", 1)).unwrap();
    let bytes_a = std::fs::read(&path).unwrap();

    // The write fails half-way (disk full, …).
    let mut written = 0;
    let err = checkpoint::save_with(&path, &b, &cfg, &extra("b", 2), &mut |w, bytes| {
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
    assert_same_params(&a, &ck.model);
    assert_eq!(ck.extra["dataset"], "a");
    assert_eq!(stray_temp_files(&dir), Vec::<PathBuf>::new());

    // The writer panics half-way: the temporary file is still cleaned up.
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = checkpoint::save_with(&path, &b, &cfg, &extra("b", 2), &mut |w, bytes| {
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
    assert!(matches!(
        checkpoint::save(&path, &b, &cfg, &bad),
        Err(Error::Dataset { .. })
    ));
    let mut nan = b.clone();
    nan.layers[1].weight.value[[2, 3]] = f32::NAN;
    match checkpoint::save(&path, &nan, &cfg, &extra("b", 2)) {
        Err(Error::NonFiniteValue { row, col, .. }) => assert_eq!((row, col), (2, 3)),
        r => panic!("expected NonFiniteValue, got {r:?}"),
    }
    assert_eq!(std::fs::read(&path).unwrap(), bytes_a);

    // A complete save replaces it.
    checkpoint::save(&path, &b, &cfg, &extra("b", 2)).unwrap();
    let ck = checkpoint::load(&path).unwrap();
    assert_same_params(&b, &ck.model);
    assert_eq!(ck.extra["dataset"], "b");
    assert_eq!(stray_temp_files(&dir), Vec::<PathBuf>::new());
}

#[test]
fn save_checks_model_against_config() {
    let s = setup();
    let dir = test_dir("save-checks");
    let cfg = config(&s, 2, false, Order::Auto);
    let model = trained(&s, &cfg, 1);
    let path = dir.join("m.safetensors");
    let three = GcnConfig {
        n_layers: 3,
        ..cfg.clone()
    };
    assert!(matches!(
        checkpoint::save(&path, &model, &three, &BTreeMap::new()),
        Err(Error::Mismatch {
            expected: 3,
            got: 2,
            ..
        })
    ));
    let wider = GcnConfig {
        hidden_dim: 32,
        ..cfg.clone()
    };
    assert!(matches!(
        checkpoint::save(&path, &model, &wider, &BTreeMap::new()),
        Err(Error::Mismatch {
            expected: 32,
            got: 16,
            ..
        })
    ));
    let biased = GcnConfig {
        bias: true,
        ..cfg.clone()
    };
    assert!(matches!(
        checkpoint::save(&path, &model, &biased, &BTreeMap::new()),
        Err(Error::Dataset { .. })
    ));
    assert!(!path.exists());
    assert_eq!(stray_temp_files(&dir), Vec::<PathBuf>::new());
}

/// A good checkpoint's tensors and metadata, to damage and write back.
struct Parts {
    tensors: Vec<(String, Dtype, Vec<usize>, Vec<u8>)>,
    meta: HashMap<String, String>,
}

fn parts(path: &Path) -> Parts {
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

fn write_parts(path: &Path, p: &Parts, with_meta: bool) {
    let views: Vec<_> = p
        .tensors
        .iter()
        .map(|(n, d, s, b)| (n.as_str(), TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    let bytes = safetensors::tensor::serialize(views, with_meta.then(|| p.meta.clone())).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn dataset_msg(r: Result<Checkpoint, Error>) -> String {
    match r {
        Err(Error::Dataset { msg, .. }) => msg,
        r => panic!("expected Error::Dataset, got {r:?}"),
    }
}

#[test]
fn damaged_files_give_typed_errors() {
    let s = setup();
    let dir = test_dir("damaged");
    let cfg = config(&s, 2, true, Order::Auto);
    let model = trained(&s, &cfg, 1);
    let good = dir.join("good.safetensors");
    checkpoint::save(&good, &model, &cfg, &extra("synthetic", 1)).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let bad = dir.join("bad.safetensors");
    let load_bad = || checkpoint::load(&bad);

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

    // Wrong shape in the header (the data matches the declared shape).
    let mut p = parts(&good);
    let w0 = p
        .tensors
        .iter_mut()
        .find(|t| t.0 == "layers.0.weight")
        .unwrap();
    w0.2 = vec![cfg.in_dim + 1, cfg.hidden_dim];
    w0.3.extend(vec![0u8; 4 * cfg.hidden_dim]);
    write_parts(&bad, &p, true);
    match load_bad() {
        Err(Error::Mismatch {
            what,
            expected,
            got,
        }) => {
            assert!(what.contains("layers.0.weight rows"), "{what}");
            assert!(what.contains("bad.safetensors"), "{what}");
            assert_eq!((expected, got), (cfg.in_dim, cfg.in_dim + 1));
        }
        r => panic!("expected Error::Mismatch, got {r:?}"),
    }
    let mut p = parts(&good);
    let b1 = p
        .tensors
        .iter_mut()
        .find(|t| t.0 == "layers.1.bias")
        .unwrap();
    b1.2 = vec![1, cfg.out_dim];
    write_parts(&bad, &p, true);
    assert!(dataset_msg(load_bad()).contains("layers.1.bias"));

    // Missing tensor.
    let mut p = parts(&good);
    p.tensors.retain(|t| t.0 != "layers.1.weight");
    write_parts(&bad, &p, true);
    let msg = dataset_msg(load_bad());
    assert!(
        msg.contains("layers.1.weight") && msg.contains("missing"),
        "{msg}"
    );

    // Unexpected tensor.
    let mut p = parts(&good);
    p.tensors
        .push(("layers.2.weight".into(), Dtype::F32, vec![1], vec![0; 4]));
    write_parts(&bad, &p, true);
    assert!(dataset_msg(load_bad()).contains("unexpected tensor `layers.2.weight`"));

    // Wrong dtype: the same values as F64.
    let mut p = parts(&good);
    let w1 = p
        .tensors
        .iter_mut()
        .find(|t| t.0 == "layers.1.weight")
        .unwrap();
    w1.1 = Dtype::F64;
    w1.3 =
        w1.3.chunks_exact(4)
            .flat_map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap())).to_le_bytes())
            .collect();
    write_parts(&bad, &p, true);
    let msg = dataset_msg(load_bad());
    assert!(
        msg.contains("layers.1.weight") && msg.contains("F64"),
        "{msg}"
    );

    // A non-finite value.
    let mut p = parts(&good);
    let w1 = p
        .tensors
        .iter_mut()
        .find(|t| t.0 == "layers.1.weight")
        .unwrap();
    let at = 2 * cfg.out_dim + 1;
    w1.3[4 * at..4 * at + 4].copy_from_slice(&f32::INFINITY.to_le_bytes());
    write_parts(&bad, &p, true);
    match load_bad() {
        Err(Error::NonFiniteValue {
            what,
            row,
            col,
            value,
        }) => {
            assert!(what.contains("layers.1.weight"), "{what}");
            assert_eq!((row, col), (2, 1));
            assert_eq!(value, f64::INFINITY);
        }
        r => panic!("expected Error::NonFiniteValue, got {r:?}"),
    }

    // No metadata at all.
    write_parts(&bad, &parts(&good), false);
    assert!(dataset_msg(load_bad()).contains("__metadata__"));

    // Bad or missing metadata values: the message names the key and the value.
    for (key, value, expect) in [
        ("dropout", Some("abc"), "`dropout` = `abc`"),
        ("in_dim", Some("-3"), "`in_dim` = `-3`"),
        ("bias", Some("yes"), "`bias` = `yes`"),
        ("order", Some("sideways"), "`order` = `sideways`"),
        (
            "orders",
            Some("auto,transform-first"),
            "`orders` = `auto,transform-first`",
        ),
        ("format", Some("pytorch"), "`format` = `pytorch`"),
        ("version", Some("2"), "`version` = `2`"),
        (
            "weight_layout",
            Some("out_in"),
            "`weight_layout` = `out_in`",
        ),
        ("dropout", Some("1.5"), "dropout must lie in [0, 1)"),
        ("hidden_dim", None, "`hidden_dim` is missing"),
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
    let mut p = parts(&good);
    p.meta.insert("orders".into(), "transform-first".into());
    write_parts(&bad, &p, true);
    assert!(matches!(
        load_bad(),
        Err(Error::Mismatch {
            expected: 2,
            got: 1,
            ..
        })
    ));

    // The good file still loads.
    assert_same_params(&model, &checkpoint::load(&good).unwrap().model);
}

#[test]
fn loading_into_another_config_fails_with_shape_error() {
    let s = setup();
    let dir = test_dir("expecting");
    let cfg = config(&s, 2, false, Order::Auto);
    let model = trained(&s, &cfg, 1);
    let path = dir.join("m.safetensors");
    checkpoint::save(&path, &model, &cfg, &BTreeMap::new()).unwrap();
    let other = GcnConfig {
        in_dim: cfg.in_dim + 10,
        ..cfg.clone()
    };
    match checkpoint::load_expecting(&path, &other) {
        Err(Error::Mismatch {
            what,
            expected,
            got,
        }) => {
            assert!(what.contains("layers.0.weight rows"), "{what}");
            assert_eq!((expected, got), (cfg.in_dim + 10, cfg.in_dim));
        }
        r => panic!("expected Error::Mismatch, got {r:?}"),
    }
    let classes = GcnConfig {
        out_dim: cfg.out_dim - 1,
        ..cfg.clone()
    };
    match checkpoint::load_expecting(&path, &classes) {
        Err(Error::Mismatch { what, .. }) => {
            assert!(what.contains("layers.1.weight cols"), "{what}")
        }
        r => panic!("expected Error::Mismatch, got {r:?}"),
    }
    let biased = GcnConfig {
        bias: true,
        ..cfg.clone()
    };
    assert!(dataset_msg(checkpoint::load_expecting(&path, &biased)).contains("layers.0.bias"));
}
