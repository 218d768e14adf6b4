//! `sparse-gcn convert` and `--data STORE` (issue 40): training and evaluation from a store
//! give the same bits as from the data it was converted from; its options' misuse is a usage
//! error before any data is read.

use std::path::Path;

use super::cli_limits::{expect, run, s, scratch, Ran};

fn json(r: &Ran) -> serde_json::Value {
    let line = r
        .text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {}", r.text))
}

/// What a training run reports that does not depend on time, memory or the data's path.
fn bits(j: &serde_json::Value) -> serde_json::Value {
    let mut j = j.clone();
    let o = j.as_object_mut().unwrap();
    o.retain(|k, _| {
        !(k.contains("_ms") || k.ends_with("_s") || k.contains("rss") || k == "dataset")
    });
    j
}

/// Trains from `data` and from its store (converted first), for each model, and compares.
fn same_bits_from_store(data: &Path, dir: &Path, models: &[&str]) {
    let store = dir.join("store");
    let r = run(&["convert", "--data", s(data), "--out", s(&store), "--json"]);
    expect(&r, 0, &[]);
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
    let r = run(&[
        "eval",
        "--checkpoint",
        s(&ck),
        "--data",
        s(&store),
        "--json",
    ]);
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
    // A damaged store: exit 1 naming the array.
    std::fs::write(store.join("labels.u32"), b"").unwrap();
    let r = run(&["train", "--data", s(&store)]);
    expect(&r, 1, &["array `labels`", "truncated"]);
    std::fs::remove_dir_all(&dir).ok();
}
