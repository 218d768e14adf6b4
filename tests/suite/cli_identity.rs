//! A checkpoint knows its data (issue 37): `train --save` records the content hashes of the
//! graph, features, labels and split as loaded, with every option of their preparation (the
//! feature recipe and its seed); `eval`, `predict` and `embed` refuse other data naming what
//! differs, honour `--preset` and `--data-seed` (then check them), refuse a checkpoint that
//! records no data unless the data is given, refuse a class count that differs from the
//! model's, and refuse non-finite outputs.

use std::collections::BTreeMap;
use std::path::Path;

use sparse_gcn::data::synthetic::Preset;
use sparse_gcn::graph::{Norm, NormAdj};
use sparse_gcn::nn::ModelConfig;
use sparse_gcn::train::checkpoint;
use sparse_gcn::train::run::{Prepare, Prepared};

use super::cli_limits::{expect, run, s, scratch, Ran};

pub(crate) fn json(r: &Ran) -> serde_json::Value {
    let line = r
        .text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {}", r.text))
}

fn train_save(ck: &Path, more: &[&str]) -> serde_json::Value {
    let mut args = vec!["train", "--epochs", "20", "--json", "--save", s(ck)];
    args.extend(more);
    let r = run(&args);
    expect(&r, 0, &[]);
    json(&r)
}

#[test]
fn other_data_is_refused_naming_what_differs() {
    let dir = scratch("id-other");
    let ck = dir.join("model.safetensors");
    train_save(&ck, &[]);
    // --data-seed and --preset are honoured (not ignored), then checked.
    let r = run(&["eval", "--checkpoint", s(&ck), "--data-seed", "3"]);
    expect(
        &r,
        1,
        &[
            s(&ck),
            "not the data the model was trained on",
            "graph",
            "preset cora-like",
        ],
    );
    let r = run(&["eval", "--checkpoint", s(&ck), "--data-seed", "0", "--json"]);
    expect(&r, 0, &[]);
    // The same shapes from another folder: refused.
    let other = dir.join("other");
    expect(
        &run(&["generate", "--seed", "1", "--out", s(&other)]),
        0,
        &[],
    );
    for cmd in ["eval", "predict", "embed"] {
        let out = dir.join("out.npy");
        let mut args = vec![cmd, "--checkpoint", s(&ck), "--data", s(&other)];
        if cmd != "eval" {
            args.extend(["--out", s(&out)]);
        }
        if cmd == "embed" {
            args.extend(["--layer", "1"]);
        }
        expect(&run(&args), 1, &["not the data the model was trained on"]);
        assert!(!out.exists());
    }
    // The real Cora has Cora-like's shapes too.
    if let Some(root) = std::env::var_os("SPARSE_GCN_DATA") {
        let cora = Path::new(&root).join("cora");
        let r = run(&["eval", "--checkpoint", s(&ck), "--data", s(&cora)]);
        expect(&r, 1, &["not the data the model was trained on", "graph"]);
    } else {
        println!("skipped the Cora part: SPARSE_GCN_DATA is not set");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn random_features_are_recorded_with_their_seed() {
    let dir = scratch("id-random");
    let ck = dir.join("model.safetensors");
    let trained = train_save(&ck, &["--features", "random:16", "--data-seed", "5"]);
    let r = run(&["eval", "--checkpoint", s(&ck), "--json"]);
    expect(&r, 0, &[]);
    let evaluated = json(&r);
    let (a, b) = (
        trained["test_accs"][0].as_f64().unwrap(),
        evaluated["test_acc"].as_f64().unwrap(),
    );
    assert_eq!(a.to_bits(), b.to_bits(), "{a} at training, {b} at eval");
    let r = run(&["eval", "--checkpoint", s(&ck), "--data-seed", "6"]);
    expect(&r, 1, &["graph", "features"]);
    let r = run(&["eval", "--checkpoint", s(&ck), "--features", "random:16"]);
    expect(&r, 0, &[]);
    std::fs::remove_dir_all(&dir).ok();
}

/// Saves a Kipf GCN built for the cora-like preset but with `classes` outputs, recording no
/// data (as the library or an older version writes them).
fn save_without_data(path: &Path, classes: usize) {
    let d = Preset::CoraLike.generate(0).unwrap();
    let adj = NormAdj::<f32>::new(&d.graph, Norm::Symmetric);
    let mut model =
        sparse_gcn::train::build_model(&adj, &d.features, classes, &ModelConfig::default(), 0)
            .unwrap();
    let extra = BTreeMap::from([("dataset".to_string(), "somewhere".to_string())]);
    checkpoint::save(path, &mut model, &extra).unwrap();
}

#[test]
fn a_checkpoint_without_its_data_needs_the_data_given() {
    let dir = scratch("id-none");
    let ck = dir.join("model.safetensors");
    save_without_data(&ck, 7);
    let r = run(&["eval", "--checkpoint", s(&ck)]);
    expect(
        &r,
        1,
        &[s(&ck), "records no content hash", "--data or --preset"],
    );
    let r = run(&["eval", "--checkpoint", s(&ck), "--preset", "cora-like"]);
    expect(&r, 0, &["test"]);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_class_count_other_than_the_models_is_a_typed_error() {
    let dir = scratch("id-classes");
    for classes in [5, 9] {
        let ck = dir.join(format!("c{classes}.safetensors"));
        save_without_data(&ck, classes);
        for cmd in ["eval", "predict"] {
            let out = dir.join("p.npy");
            let mut args = vec![cmd, "--checkpoint", s(&ck), "--preset", "cora-like"];
            if cmd == "predict" {
                args.extend(["--out", s(&out)]);
            }
            let r = run(&args);
            expect(&r, 1, &[s(&ck), "classes", &classes.to_string()]);
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn non_finite_outputs_are_errors() {
    let dir = scratch("id-nonfinite");
    let ck = dir.join("model.safetensors");
    train_save(&ck, &[]);
    // The same model with weights of 1e30: finite, but its logits overflow.
    let c = checkpoint::load(&ck).unwrap();
    let p = Prepared::new(
        Preset::CoraLike.generate(0).unwrap(),
        &Prepare::from_extra(&c.extra).unwrap(),
    )
    .unwrap();
    let mut model = c.build(&p.adj, &p.data.features).unwrap();
    model.visit_named(&mut |_, mut t| t.values_mut().for_each(|v| *v = 1e30));
    let huge = dir.join("huge.safetensors");
    checkpoint::save(&huge, &mut model, &c.extra).unwrap();
    let r = run(&["eval", "--checkpoint", s(&huge), "--json"]);
    expect(&r, 1, &["logits", "non-finite"]);
    let out = dir.join("p.csv");
    let r = run(&["predict", "--checkpoint", s(&huge), "--out", s(&out)]);
    expect(&r, 1, &["logits", "non-finite"]);
    assert!(!out.exists());
    std::fs::remove_dir_all(&dir).ok();
}
