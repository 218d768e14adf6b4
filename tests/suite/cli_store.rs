//! `sparse-gcn convert` and `--data STORE` (issue 40): training and evaluation from a store
//! give the same bits as from the data it was converted from; its options' misuse is a usage
//! error before any data is read.

use std::path::Path;

use super::cli_identity::json;
use super::cli_limits::{expect, run, s, scratch};

/// What a training run reports that does not depend on time, memory or the data's path.
fn bits(j: &serde_json::Value) -> serde_json::Value {
    let mut j = j.clone();
    let o = j.as_object_mut().unwrap();
    o.retain(|k, _| {
        !(k.contains("_ms") || k.ends_with("_s") || k.contains("rss") || k == "dataset")
    });
    j
}

/// Trains from `data` and from its store (converted first, in each node order), for each
/// model and training order, and compares.
fn same_bits_from_store(data: &Path, dir: &Path, models: &[&str]) {
    let store = dir.join("store");
    let r = run(&["convert", "--data", s(data), "--out", s(&store), "--json"]);
    expect(&r, 0, &[]);
    for (stored, trained) in [("community", "community"), ("rcm", "none"), ("rcm", "auto")] {
        let ordered = dir.join(format!("store-{stored}"));
        if !ordered.exists() {
            let r = run(&[
                "convert",
                "--data",
                s(data),
                "--out",
                s(&ordered),
                "--reorder",
                stored,
                "--json",
            ]);
            expect(&r, 0, &[]);
            assert_eq!(json(&r)["reorder_applied"], stored);
        }
        let from = |d: &Path| {
            let r = run(&[
                "train",
                "--data",
                s(d),
                "--seeds",
                "2",
                "--epochs",
                "20",
                "--reorder",
                trained,
                "--json",
            ]);
            expect(&r, 0, &[]);
            json(&r)
        };
        let (a, b) = (from(data), from(&ordered));
        assert_eq!(
            bits(&a),
            bits(&b),
            "stored {stored}, trained {trained}:\n{a}\n{b}"
        );
        // Trained in the store's order: no time spent ordering.
        if stored == trained {
            assert!(b["reorder_s"].as_f64().unwrap() < 0.01, "{b}");
        }
    }
    for model in models {
        let args = |d: &Path| -> Vec<String> {
            [
                "train",
                "--data",
                s(d),
                "--model",
                model,
                "--seeds",
                "2",
                "--epochs",
                "30",
            ]
            .into_iter()
            .map(String::from)
            .chain(["--json".to_string()])
            .collect()
        };
        let from = |d: &Path| {
            let a = args(d);
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            let r = run(&a);
            expect(&r, 0, &[]);
            json(&r)
        };
        let (a, b) = (from(data), from(&store));
        assert_eq!(bits(&a), bits(&b), "{model}: {a}\n{b}");
    }
    // A checkpoint trained from the text is evaluated from the store: the same data.
    let ck = dir.join("m.safetensors");
    let r = run(&[
        "train",
        "--data",
        s(data),
        "--epochs",
        "10",
        "--save",
        s(&ck),
        "--json",
    ]);
    expect(&r, 0, &[]);
    let trained = json(&r)["test_accs"][0].as_f64().unwrap();
    for st in [&store, &dir.join("store-community")] {
        let r = run(&["eval", "--checkpoint", s(&ck), "--data", s(st), "--json"]);
        expect(&r, 0, &[]);
        assert_eq!(
            json(&r)["test_acc"].as_f64().unwrap().to_bits(),
            trained.to_bits()
        );
    }
    // Trained from an ordered store with --save: the checkpoint knows the input's data.
    let ck2 = dir.join("m2.safetensors");
    let st = dir.join("store-community");
    let r = run(&[
        "train",
        "--data",
        s(&st),
        "--epochs",
        "10",
        "--reorder",
        "community",
        "--save",
        s(&ck2),
        "--json",
    ]);
    expect(&r, 0, &[]);
    let trained = json(&r)["test_accs"][0].as_f64().unwrap();
    let r = run(&["eval", "--checkpoint", s(&ck2), "--data", s(data), "--json"]);
    expect(&r, 0, &[]);
    assert_eq!(
        json(&r)["test_acc"].as_f64().unwrap().to_bits(),
        trained.to_bits()
    );
}

#[test]
fn a_store_trains_as_its_source() {
    let dir = scratch("store-bits");
    let folder = dir.join("cora-like");
    expect(
        &run(&["generate", "--seed", "2", "--out", s(&folder)]),
        0,
        &[],
    );
    same_bits_from_store(&folder, &dir, &["gcn", "gcnii", "appnp"]);
    match std::env::var_os("SPARSE_GCN_DATA") {
        Some(root) => {
            let cora = dir.join("cora");
            std::fs::create_dir_all(&cora).unwrap();
            same_bits_from_store(&Path::new(&root).join("cora"), &cora, &["gcn", "sgc"]);
        }
        None => println!("skipped the Cora part: SPARSE_GCN_DATA is not set"),
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn generate_writes_a_store_as_convert_does() {
    let dir = scratch("store-generate");
    let (text, direct, converted) = (dir.join("text"), dir.join("direct"), dir.join("conv"));
    let gen = |out: &Path, more: &[&str]| {
        let mut args = vec!["generate", "--seed", "3", "--out", s(out)];
        args.extend(more);
        expect(&run(&args), 0, &[]);
    };
    gen(&text, &[]);
    gen(&direct, &["--format", "store", "--reorder", "community"]);
    let r = run(&[
        "convert",
        "--data",
        s(&text),
        "--out",
        s(&converted),
        "--reorder",
        "community",
    ]);
    expect(&r, 0, &[]);
    // The same arrays but the name (the preset's, or the folder's) and its checksums.
    for f in [
        "indptr.u64",
        "indices.u32",
        "order.u32",
        "labels.u32",
        "train.u32",
    ] {
        let (a, b) = (direct.join(f), converted.join(f));
        assert_eq!(std::fs::read(a).unwrap(), std::fs::read(b).unwrap(), "{f}");
    }
    // The store's options only with --format store, and never over another dataset.
    let r = run(&["generate", "--out", s(&dir.join("x")), "--reorder", "rcm"]);
    expect(&r, 2, &["--reorder", "--format store"]);
    let r = run(&[
        "generate",
        "--out",
        s(&dir.join("x")),
        "--feature-dtype",
        "f16",
    ]);
    expect(&r, 2, &["--feature-dtype"]);
    let r = run(&[
        "generate",
        "--out",
        s(&text),
        "--format",
        "store",
        "--force",
    ]);
    expect(&r, 2, &["--force"]);
    let r = run(&["generate", "--out", s(&text), "--format", "store"]);
    expect(&r, 2, &["not empty"]);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn convert_refuses_misuse_before_reading() {
    let dir = scratch("store-usage");
    let taken = dir.join("taken");
    std::fs::create_dir_all(&taken).unwrap();
    std::fs::write(taken.join("x"), b"keep").unwrap();
    let r = run(&["convert", "--out", s(&taken)]);
    expect(&r, 2, &["--out", "not an empty folder"]);
    assert_eq!(std::fs::read(taken.join("x")).unwrap(), b"keep");
    let r = run(&[
        "convert",
        "--out",
        s(&dir.join("n")),
        "--feature-dtype",
        "f64",
    ]);
    expect(&r, 2, &["--feature-dtype"]);
    // A preset converts; the store then refuses the options it cannot honour.
    let store = dir.join("preset");
    let r = run(&[
        "convert",
        "--out",
        s(&store),
        "--feature-dtype",
        "f16",
        "--json",
    ]);
    expect(&r, 0, &[]);
    assert_eq!(json(&r)["feature_dtype"], "f16");
    for (flag, value) in [
        ("--num-nodes", "5"),
        ("--train-per-class", "5"),
        ("--labels", "labels.txt"),
        ("--features", "feat.txt"),
    ] {
        let r = run(&["info", "--data", s(&store), flag, value]);
        expect(&r, 2, &[flag, "store"]);
    }
    let r = run(&["info", "--data", s(&store), "--directed"]);
    expect(&r, 1, &["undirected"]);
    let r = run(&["info", "--data", s(&store), "--split", "other"]);
    expect(&r, 1, &["holds split"]);
    // --verify: every checksum, on a store only.
    let r = run(&["info", "--data", s(&store), "--verify"]);
    expect(&r, 0, &["arrays match their checksums"]);
    let r = run(&["info", "--verify"]);
    expect(&r, 2, &["--verify", "not one"]);
    let p = store.join("degree.u32");
    let mut b = std::fs::read(&p).unwrap();
    b[0] ^= 1;
    std::fs::write(&p, &b).unwrap();
    let r = run(&["info", "--data", s(&store), "--verify"]);
    expect(&r, 1, &["array `degree`", "checksum"]);
    // A damaged store: exit 1 naming the array.
    std::fs::write(store.join("labels.u32"), b"").unwrap();
    let r = run(&["train", "--data", s(&store)]);
    expect(&r, 1, &["array `labels`", "truncated"]);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn propagate_out_of_core_gives_the_in_memory_bits_and_trains() {
    let dir = scratch("store-propagate");
    let store = dir.join("store");
    let r = run(&[
        "generate",
        "--preset",
        "arxiv-like",
        "--format",
        "store",
        "--out",
        s(&store),
    ]);
    expect(&r, 0, &[]);
    let prop = |out: &str, more: &[&str]| {
        let o = dir.join(out);
        let mut args = vec!["propagate", "--data", s(&store), "--out", s(&o), "--json"];
        args.extend(more);
        let r = run(&args);
        expect(&r, 0, &[]);
        (o, json(&r))
    };
    // 169,343 nodes of 128 columns, every row kept at 4 hops (347 MB): 550 MiB leaves room for
    // about 70 columns per tile.
    let (ooc, j) = prop("ooc", &["--k", "3", "--sign", "--memory-limit", "550MiB"]);
    assert!(j["tiles"].as_u64().unwrap() > 1, "{j}");
    assert!(j["planned_bytes"].as_u64().unwrap() <= 550 << 20);
    let (mem, j) = prop("mem", &["--k", "3", "--sign", "--in-memory"]);
    assert_eq!(j["tiles"], 1);
    for f in [
        "features.f32",
        "labels.u32",
        "train.u32",
        "valid.u32",
        "test.u32",
    ] {
        let (a, b) = (ooc.join(f), mem.join(f));
        assert!(
            std::fs::read(a).unwrap() == std::fs::read(b).unwrap(),
            "{f}"
        );
    }
    // The rows train as an MLP, and evaluate from its checkpoint.
    let ckpt = dir.join("m.safetensors");
    let r = run(&[
        "train",
        "--data",
        s(&ooc),
        "--model",
        "gcn",
        "--row-norm",
        "off",
        "--epochs",
        "5",
        "--save",
        s(&ckpt),
        "--json",
    ]);
    expect(&r, 0, &[]);
    assert!(json(&r)["test_acc_mean"].as_f64().unwrap() > 0.3);
    let r = run(&["eval", "--data", s(&ooc), "--checkpoint", s(&ckpt)]);
    expect(&r, 0, &[]);
    // Misuse: usage errors before anything is read.
    let r = run(&["propagate", "--data", s(&dir), "--out", s(&dir.join("x"))]);
    expect(&r, 2, &["--data", "not a store"]);
    let r = run(&[
        "propagate",
        "--data",
        s(&store),
        "--out",
        s(&dir.join("x")),
        "--in-memory",
        "--memory-limit",
        "1GiB",
    ]);
    expect(&r, 2, &["--memory-limit", "--in-memory"]);
    let r = run(&[
        "propagate",
        "--data",
        s(&store),
        "--out",
        s(&dir.join("x")),
        "--memory-limit",
        "12XB",
    ]);
    expect(&r, 2, &["--memory-limit"]);
    let r = run(&["propagate", "--data", s(&store), "--out", s(&ooc)]);
    expect(&r, 2, &["--out", "not an empty folder"]);
    // Too little memory for one column per tile: exit 1 naming the limit.
    let r = run(&[
        "propagate",
        "--data",
        s(&store),
        "--out",
        s(&dir.join("x")),
        "--memory-limit",
        "8MiB",
    ]);
    expect(&r, 1, &["--memory-limit", "refused"]);
    assert!(!dir.join("x").exists());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn papers100m_like_is_generated_out_of_core_at_any_scale() {
    let dir = scratch("store-papers");
    // A small scale: out of core (f16 features by default), the preset's shape.
    let st = dir.join("p");
    let r = run(&[
        "generate",
        "--preset",
        "papers100m-like",
        "--scale",
        "0.0005",
        "--format",
        "store",
        "--out",
        s(&st),
        "--json",
    ]);
    expect(&r, 0, &["out of core"]);
    let j = json(&r);
    assert_eq!(j["n_nodes"], 55_530);
    assert_eq!(j["n_edges"], 807_843);
    assert_eq!(j["n_classes"], 172);
    let r = run(&["info", "--data", s(&st), "--verify", "--json"]);
    expect(&r, 0, &["arrays match their checksums"]);
    let h: serde_json::Value =
        serde_json::from_slice(&std::fs::read(st.join("store.json")).unwrap()).unwrap();
    assert_eq!(h["arrays"]["features"]["dtype"], "f16");
    assert_eq!(h["arrays"]["train"]["len"], 604);
    assert_eq!(h["arrays"]["valid"]["len"], 63);
    assert_eq!(h["arrays"]["test"]["len"], 107);
    // The same store as generated in memory, written as text and converted (no reordering,
    // the same dtype).
    let mem = dir.join("mem");
    let r = run(&[
        "generate",
        "--preset",
        "papers100m-like",
        "--scale",
        "0.0005",
        "--out",
        s(&mem),
    ]);
    expect(&r, 0, &[]);
    let conv = dir.join("conv");
    let r = run(&[
        "convert",
        "--data",
        s(&dir.join("mem")),
        "--reorder",
        "none",
        "--feature-dtype",
        "f16",
        "--out",
        s(&conv),
    ]);
    expect(&r, 0, &[]);
    for f in [
        "indptr.u64",
        "indices.u32",
        "degree.u32",
        "features.f16",
        "labels.u32",
        "train.u32",
        "valid.u32",
        "test.u32",
    ] {
        assert!(
            std::fs::read(st.join(f)).unwrap() == std::fs::read(conv.join(f)).unwrap(),
            "{f}"
        );
    }
    // Full size in memory is refused before allocating; misuse is a usage error.
    let r = run(&[
        "generate",
        "--preset",
        "papers100m-like",
        "--out",
        s(&dir.join("x")),
    ]);
    expect(&r, 1, &["refused before allocating"]);
    let r = run(&["train", "--preset", "papers100m-like"]);
    expect(&r, 1, &["refused before allocating"]);
    for bad in ["0", "1.5", "-1", "x"] {
        let r = run(&["generate", "--scale", bad, "--out", s(&dir.join("x"))]);
        expect(&r, 2, &["--scale"]);
    }
    let r = run(&[
        "generate",
        "--preset",
        "papers100m-like",
        "--format",
        "store",
        "--reorder",
        "rcm",
        "--out",
        s(&dir.join("x")),
    ]);
    expect(&r, 2, &["--reorder", "out of core"]);
    assert!(!dir.join("x").exists());
    std::fs::remove_dir_all(&dir).ok();
}
