//! The `sparse-gcn` binary end to end: exit codes, `--json` lines, and `train --save` →
//! `eval --checkpoint` giving the same test accuracy and loss bit for bit (also after a
//! `--reorder`, which the checkpoint records and `eval` applies again).

use std::path::PathBuf;
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sparse-gcn"))
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().unwrap()
}

fn last_json(out: &Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("sparse-gcn-cli-{}-{name}", std::process::id()))
}

#[test]
fn checkpoint_from_train_gives_the_same_test_accuracy_in_eval() {
    let ck = temp_path("model.safetensors");
    let ck_s = ck.to_str().unwrap();
    let out = run(&[
        "train", "--epochs", "30", "--seeds", "2", "--json", "--save", ck_s,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let trained = last_json(&out);
    let out = run(&["eval", "--checkpoint", ck_s, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let evaluated = last_json(&out);
    // Seed 0's model was saved: its test accuracy is reproduced exactly.
    let trained_acc = trained["test_accs"][0]
        .as_f64()
        .expect("train --json has test_accs[0]");
    let evaluated_acc = evaluated["test_acc"]
        .as_f64()
        .expect("eval --json has test_acc");
    assert_eq!(trained_acc.to_bits(), evaluated_acc.to_bits());
    let trained_loss = trained["test_losses"][0]
        .as_f64()
        .expect("train --json has test_losses[0]");
    let evaluated_loss = evaluated["test_loss"]
        .as_f64()
        .expect("eval --json has test_loss");
    assert_eq!(trained_loss.to_bits(), evaluated_loss.to_bits());
    assert_eq!(evaluated["extra"]["seed"], "0");
    std::fs::remove_file(&ck).ok();
}

#[test]
fn checkpoint_of_a_reordered_training_gives_the_same_test_accuracy_in_eval() {
    // `auto` keeps the order of a graph this small: it must record what it applied ("none").
    for (reorder, applied) in [("bfs", "bfs"), ("community", "community"), ("auto", "none")] {
        let ck = temp_path(&format!("reordered-{reorder}.safetensors"));
        let ck_s = ck.to_str().unwrap();
        let out = run(&[
            "train",
            "--epochs",
            "30",
            "--reorder",
            reorder,
            "--json",
            "--save",
            ck_s,
        ]);
        assert!(
            out.status.success(),
            "{reorder}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let trained = last_json(&out);
        assert_eq!(trained["reorder_applied"], applied, "{reorder}");
        let out = run(&["eval", "--checkpoint", ck_s, "--json"]);
        assert!(
            out.status.success(),
            "{reorder}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let evaluated = last_json(&out);
        let trained_acc = trained["test_accs"][0]
            .as_f64()
            .expect("train --json has test_accs[0]");
        let evaluated_acc = evaluated["test_acc"]
            .as_f64()
            .expect("eval --json has test_acc");
        assert_eq!(
            trained_acc.to_bits(),
            evaluated_acc.to_bits(),
            "--reorder {reorder}: train {trained_acc}, eval {evaluated_acc}"
        );
        // The test loss sees every logit's last bit (and the test nodes' summation order).
        let trained_loss = trained["test_losses"][0]
            .as_f64()
            .expect("train --json has test_losses[0]");
        let evaluated_loss = evaluated["test_loss"]
            .as_f64()
            .expect("eval --json has test_loss");
        assert_eq!(
            trained_loss.to_bits(),
            evaluated_loss.to_bits(),
            "--reorder {reorder}: test loss train {trained_loss:?}, eval {evaluated_loss:?}"
        );
        assert_eq!(evaluated["extra"]["reorder"], applied, "{reorder}");
        assert_eq!(evaluated["reorder"], applied, "{reorder}");
        std::fs::remove_file(&ck).ok();
    }
}

#[test]
fn info_json_counts_the_default_graph() {
    let out = run(&["info", "--json"]);
    assert!(out.status.success());
    let j = last_json(&out);
    assert_eq!(j["n_nodes"], 2708);
    assert!(j["edge_homophily"].as_f64().unwrap() > 0.5);
}

#[test]
fn exit_codes_are_two_for_usage_and_one_for_data_errors() {
    let out = run(&["train", "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2));
    let missing = temp_path("no-such-dir");
    let out = run(&["train", "--data", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(stderr.contains("no-such-dir"), "{stderr}");
    // An option value out of range is a usage error naming the flag (tests/suite/cli_user_path.rs
    // has every one).
    let out = run(&["train", "--lr", "-1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--lr"));
    let ck = temp_path("garbage.safetensors");
    std::fs::write(&ck, b"not a checkpoint").unwrap();
    let out = run(&["eval", "--checkpoint", ck.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    std::fs::remove_file(&ck).ok();
}

#[test]
fn every_malformed_data_file_exits_with_one_and_one_line() {
    // Fixtures that are themselves a `--data` argument (edge lists, npz files, odd paths);
    // the OGB, feature and label fixtures are mapped to their errors in tests/suite/io_errors.rs.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/bad");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let standalone = (name.starts_with("el_")
            && !name.starts_with("el_feat")
            && !name.starts_with("el_labels"))
            || name.starts_with("npz_")
            || name == "unknown_format.xyz"
            || name == "dir_instead_of_file.edges";
        if !standalone {
            continue;
        }
        // Structure only, this edge list is valid: its error needs the node count it breaks.
        let extra: &[&str] = if name == "el_id_out_of_range.txt" {
            &["--num-nodes", "5"]
        } else {
            &[]
        };
        let mut args = vec!["info", "--data", path.to_str().unwrap()];
        args.extend(extra);
        let out = run(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{name}: {stderr}");
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
        checked += 1;
    }
    assert!(checked >= 30, "only {checked} fixtures checked");
}

#[test]
fn eval_of_a_checkpoint_without_the_reorder_key_keeps_the_given_order() {
    use sparse_gcn::data::synthetic::Preset;
    use sparse_gcn::graph::{Norm, NormAdj};
    use sparse_gcn::train::{checkpoint, fit_model, FitOptions, StopRule, TrainConfig, TrainData};
    // A checkpoint as `train --save` wrote them before the node order was recorded, of a model
    // trained on the default data in the given order.
    let mut d = Preset::CoraLike.generate(0).unwrap();
    d.features.row_normalize();
    let adj = NormAdj::<f32>::new(&d.graph, Norm::Symmetric);
    let cfg = TrainConfig {
        epochs: 10,
        stop: StopRule::Never,
        ..TrainConfig::default()
    };
    let (trained, mut model) =
        fit_model(&TrainData::of(&adj, &d), &cfg, 0, &FitOptions::default()).unwrap();
    // The model carries its configuration, with the data's widths.
    assert_eq!(model.config().unwrap().in_dim, d.features.n_cols());
    assert_eq!(model.config().unwrap().out_dim, d.n_classes);
    let extra = [("seed", "0"), ("row_normalize", "true"), ("norm", "sym")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let ck = temp_path("no-reorder-key.safetensors");
    checkpoint::save(&ck, &mut model, &extra).unwrap();
    // It records no content hash of its data: the data must be given (issue 37).
    let out = run(&["eval", "--checkpoint", ck.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("records no content hash"));
    let out = run(&[
        "eval",
        "--checkpoint",
        ck.to_str().unwrap(),
        "--preset",
        "cora-like",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let evaluated = last_json(&out);
    assert_eq!(evaluated["reorder"], "none");
    let acc = evaluated["test_acc"]
        .as_f64()
        .expect("eval --json has test_acc");
    let loss = evaluated["test_loss"]
        .as_f64()
        .expect("eval --json has test_loss");
    assert_eq!(acc.to_bits(), trained.test_acc.to_bits());
    assert_eq!(
        loss.to_bits(),
        trained.test_loss.to_bits(),
        "{loss} vs {}",
        trained.test_loss
    );
    std::fs::remove_file(&ck).ok();
}

#[test]
fn commbench_needs_a_job_and_plan_comm_reads_its_timings() {
    // Outside mpirun (or built without `mpi`): one line naming the way, exit 1.
    let out = run(&["commbench"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("mpirun") && stderr.lines().count() == 1,
        "{stderr}"
    );
    let missing = temp_path("no-comm.json");
    let out = run(&[
        "plan",
        "--ranks",
        "1,2",
        "--comm",
        missing.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-comm.json"));
    // One size cannot give both α and β.
    let one = temp_path("comm-one.json");
    std::fs::write(
        &one,
        r#"{"ranks":2,"samples":[{"ranks":2,"bytes_per_peer":8,"seconds":1e-6}]}"#,
    )
    .unwrap();
    let out = run(&["plan", "--ranks", "1,2", "--comm", one.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("α and β"));
    // α = 1 µs, β = 1 ns: recovered, and every rank count gets a modelled epoch.
    let good = temp_path("comm-good.json");
    let sample = |b: u64| {
        format!(
            r#"{{"ranks":2,"bytes_per_peer":{b},"seconds":{}}}"#,
            1e-6 + 1e-9 * b as f64
        )
    };
    std::fs::write(
        &good,
        format!(
            r#"{{"ranks":2,"samples":[{},{},{}]}}"#,
            sample(8),
            sample(4096),
            sample(1 << 20)
        ),
    )
    .unwrap();
    let out = run(&[
        "plan",
        "--ranks",
        "1,2,4",
        "--comm",
        good.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j = last_json(&out);
    let alpha = j["time_model"]["alpha_s"].as_f64().unwrap();
    let beta = j["time_model"]["beta_s_per_byte"].as_f64().unwrap();
    assert!((alpha / 1e-6 - 1.0).abs() < 1e-6 && (beta / 1e-9 - 1.0).abs() < 1e-6);
    let plans = j["plans"].as_array().unwrap();
    assert_eq!(plans.len(), 3);
    assert_eq!(plans[0]["time"]["comm_s"].as_f64(), Some(0.0));
    for p in plans {
        assert!(p["time"]["epoch_s"].as_f64().unwrap() > 0.0);
    }
    for f in [one, good] {
        std::fs::remove_file(f).ok();
    }
}
