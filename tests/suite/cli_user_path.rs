//! The traps a new user falls into, each as a run of the binary with its exit code and the key
//! words of its message: an edge list without labels, a stray edge id, a split too big for the
//! graph, bad option values (exit 2 before any file is read), `--save` into a missing folder,
//! `generate` into a non-empty one, `eval` without `--data`, unlabelled nodes, structure-only
//! graphs, the stop rule's report, and the outputs (`predict`, `embed`, `--history`).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sparse-gcn"))
        .args(args)
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Asserts the exit code and that the output holds every key word.
fn expect(out: &Output, code: i32, words: &[&str]) {
    let t = text(out);
    assert_eq!(out.status.code(), Some(code), "{t}");
    for w in words {
        assert!(t.contains(w), "missing {w:?} in:\n{t}");
    }
}

fn last_json(out: &Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

/// A fresh scratch folder.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sparse-gcn-path-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(path: &Path, content: &str) -> String {
    std::fs::write(path, content).unwrap();
    path.to_str().unwrap().to_string()
}

fn data_dir() -> Option<PathBuf> {
    match std::env::var_os("SPARSE_GCN_DATA") {
        Some(d) => Some(PathBuf::from(d)),
        None => {
            println!("skipped: SPARSE_GCN_DATA is not set");
            None
        }
    }
}

/// A 12-node graph of two triangles-rich halves, with labels 0/1.
fn small_graph(dir: &Path) -> (String, String) {
    let mut edges = String::new();
    for (a, b) in [
        (0, 1),
        (1, 2),
        (2, 0),
        (2, 3),
        (3, 4),
        (4, 5),
        (5, 3),
        (6, 7),
        (7, 8),
        (8, 6),
        (8, 9),
        (9, 10),
        (10, 11),
        (11, 9),
        (5, 6),
    ] {
        edges.push_str(&format!("{a} {b}\n"));
    }
    let labels: String = (0..12).map(|i| format!("{}\n", i / 6)).collect();
    (
        write(&dir.join("g.txt"), &edges),
        write(&dir.join("g.labels"), &labels),
    )
}

#[test]
fn an_edge_list_without_labels_is_refused_not_trained_to_100_percent() {
    let d = scratch("nolabels");
    let (edges, _) = small_graph(&d);
    let out = run(&["train", "--data", &edges, "--features", "identity"]);
    expect(&out, 1, &["no labels", "--labels"]);
    assert!(!text(&out).contains("100.00"), "{}", text(&out));
    // Without features either, the labels are asked for first; with labels, the features.
    let (_, labels) = small_graph(&d);
    let out = run(&[
        "train",
        "--data",
        &edges,
        "--labels",
        &labels,
        "--split-sizes",
        "0.5,0.25,0.25",
    ]);
    expect(&out, 1, &["no node features", "--features identity"]);
}

#[test]
fn a_stray_edge_id_names_the_file_line_and_id_not_the_label_file() {
    let d = scratch("stray");
    let (_, labels) = small_graph(&d);
    let edges = write(&d.join("stray.txt"), "0 1\n# a comment\n5 99999\n");
    for cmd in ["info", "train"] {
        let out = run(&[cmd, "--data", &edges, "--labels", &labels]);
        expect(
            &out,
            1,
            &[
                "stray.txt:3:",
                "99999",
                "12 nodes",
                "g.labels",
                "--num-nodes",
            ],
        );
    }
    let out = run(&["info", "--data", &edges, "--num-nodes", "50"]);
    expect(&out, 1, &["stray.txt:3:", "99999", "50 nodes"]);
}

#[test]
fn a_random_split_too_big_for_the_graph_names_the_sizes_and_the_flags() {
    let d = scratch("split");
    let (edges, labels) = small_graph(&d);
    let base = [
        "train",
        "--data",
        &edges,
        "--labels",
        &labels,
        "--features",
        "identity",
    ];
    let out = run(&base);
    expect(
        &out,
        1,
        &[
            "12 labelled nodes",
            "20 training nodes per class",
            "--train-per-class",
            "--split-sizes",
        ],
    );
    let mut ok = base.to_vec();
    ok.extend(["--split-sizes", "0.5,0.25,0.25", "--epochs", "5", "--json"]);
    let out = run(&ok);
    expect(&out, 0, &[]);
    assert_eq!(last_json(&out)["n_nodes"], 12);
    let mut ok = base.to_vec();
    ok.extend(["--train-per-class", "2", "--epochs", "5"]);
    expect(&run(&ok), 0, &["split random 4/4/4"]);
}

#[test]
fn bad_option_values_are_usage_errors_naming_the_flag_before_any_file_is_read() {
    // The data folder does not exist: an error about it (exit 1) would mean it was read first.
    let missing = std::env::temp_dir().join("sparse-gcn-no-such-dataset-7f1c");
    let m = missing.to_str().unwrap();
    for (flag, value, words) in [
        ("--hidden", "0", vec!["--hidden", "at least 1"]),
        ("--dropout", "1.5", vec!["--dropout", "[0, 1)"]),
        ("--layers", "0", vec!["--layers", "at least 1"]),
        ("--epochs", "0", vec!["--epochs", "at least 1"]),
        ("--lr", "-1", vec!["--lr", "> 0"]),
        ("--weight-decay", "-0.001", vec!["--weight-decay", ">= 0"]),
        ("--drop-edge", "1", vec!["--drop-edge", "[0, 1)"]),
        ("--seeds", "0", vec!["--seeds", "at least 1"]),
        ("--patience", "0", vec!["--patience"]),
        ("--preset", "arxiv", vec!["--preset", "arxiv-like"]),
        ("--model", "gat", vec!["--model", "gcnii"]),
        (
            "--split-sizes",
            "0.8,0.2,0.2",
            vec!["--split-sizes", "more than 1"],
        ),
        ("--features", "random:0", vec!["--features", "random:D"]),
    ] {
        let t0 = Instant::now();
        let out = run(&["train", "--data", m, flag, value]);
        let secs = t0.elapsed().as_secs_f64();
        expect(&out, 2, &words);
        assert!(secs < 1.5, "{flag} {value}: {secs} s");
    }
    let out = run(&["train", "--data", m, "--model", "residual", "--layers", "1"]);
    expect(&out, 2, &["--layers 1", "residual", "at least 2"]);
    let out = run(&["generate", "--preset", "tiny", "--out", m]);
    expect(&out, 2, &["--preset"]);
}

#[test]
fn save_into_a_missing_folder_fails_before_training() {
    let missing = std::env::temp_dir().join("sparse-gcn-no-such-folder-91ab/model.safetensors");
    let t0 = Instant::now();
    let out = run(&[
        "train",
        "--epochs",
        "200",
        "--save",
        missing.to_str().unwrap(),
    ]);
    expect(&out, 2, &["--save", "does not exist"]);
    assert!(t0.elapsed().as_secs_f64() < 1.5);
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("dataset"),
        "nothing was loaded"
    );
    let d = scratch("hist");
    let out = run(&["train", "--history", d.join("h.txt").to_str().unwrap()]);
    expect(&out, 2, &["--history", ".csv"]);
}

#[test]
fn generate_refuses_a_non_empty_folder_unless_forced() {
    let d = scratch("gen");
    std::fs::write(d.join("notes.txt"), "mine").unwrap();
    let out_dir = d.to_str().unwrap();
    let out = run(&["generate", "--out", out_dir]);
    expect(&out, 2, &["not empty", "--force"]);
    assert!(!d.join("raw").exists());
    // An old split folder of another name would make the folder ambiguous: --force replaces it.
    std::fs::create_dir_all(d.join("split/old")).unwrap();
    let out = run(&["generate", "--out", out_dir, "--force"]);
    expect(&out, 0, &["2708 nodes"]);
    assert!(!d.join("split/old").exists());
    expect(
        &run(&["info", "--data", out_dir]),
        0,
        &["nodes              2708"],
    );
    let fresh = d.join("fresh");
    expect(
        &run(&["generate", "--out", fresh.to_str().unwrap()]),
        0,
        &[],
    );
}

#[test]
fn eval_predict_and_embed_without_data_use_the_checkpoint_s_source() {
    let d = scratch("source");
    let ck = d.join("m.safetensors");
    let ck_s = ck.to_str().unwrap();
    // A synthetic preset with a non-default seed: eval must rebuild that one.
    let out = run(&[
        "train",
        "--data-seed",
        "3",
        "--epochs",
        "20",
        "--json",
        "--save",
        ck_s,
    ]);
    expect(&out, 0, &["saved the model of seed 0"]);
    let trained = last_json(&out)["test_accs"][0].as_f64().unwrap();
    let out = run(&["eval", "--checkpoint", ck_s, "--json"]);
    expect(&out, 0, &[]);
    assert_eq!(
        last_json(&out)["test_acc"].as_f64().unwrap().to_bits(),
        trained.to_bits()
    );
    // predict: one CSV row per node; embed --layer 1: the hidden layer, N × 16.
    let p = d.join("p.csv");
    expect(
        &run(&[
            "predict",
            "--checkpoint",
            ck_s,
            "--out",
            p.to_str().unwrap(),
        ]),
        0,
        &["2708 nodes"],
    );
    let rows: Vec<String> = BufReader::new(std::fs::File::open(&p).unwrap())
        .lines()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), 2709);
    assert!(rows[0].starts_with("node,predicted,p_0,"), "{}", rows[0]);
    let fields: Vec<f64> = rows[1].split(',').map(|f| f.parse().unwrap()).collect();
    let probs = &fields[2..];
    assert!((probs.iter().sum::<f64>() - 1.0).abs() < 1e-5);
    let argmax = probs
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .unwrap()
        .0;
    assert_eq!(fields[1] as usize, argmax);
    let e = d.join("e.npy");
    expect(
        &run(&[
            "embed",
            "--checkpoint",
            ck_s,
            "--layer",
            "1",
            "--out",
            e.to_str().unwrap(),
        ]),
        0,
        &["2708 × 16"],
    );
    assert_eq!(npy_shape(&e), (2708, 16));
    let out = run(&[
        "embed",
        "--checkpoint",
        ck_s,
        "--layer",
        "3",
        "--out",
        e.to_str().unwrap(),
    ]);
    expect(&out, 1, &["--layer 3", "2 layer outputs"]);
    // A checkpoint whose recorded data folder is gone says so.
    let folder = d.join("data");
    expect(
        &run(&["generate", "--out", folder.to_str().unwrap()]),
        0,
        &[],
    );
    let ck2 = d.join("m2.safetensors");
    let f = folder.to_str().unwrap();
    expect(
        &run(&[
            "train",
            "--data",
            f,
            "--epochs",
            "5",
            "--save",
            ck2.to_str().unwrap(),
        ]),
        0,
        &[],
    );
    std::fs::remove_dir_all(&folder).unwrap();
    let out = run(&["eval", "--checkpoint", ck2.to_str().unwrap()]);
    expect(&out, 1, &["does not exist here", "--data"]);
}

/// The shape in a `.npy` header (version 1.0, `<f4`).
fn npy_shape(path: &Path) -> (usize, usize) {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..8], b"\x93NUMPY\x01\x00");
    let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
    let header = std::str::from_utf8(&b[10..10 + hlen]).unwrap();
    assert!(header.contains("'descr': '<f4'"), "{header}");
    let shape = header
        .split("'shape': (")
        .nth(1)
        .unwrap()
        .split(')')
        .next()
        .unwrap();
    let dims: Vec<usize> = shape
        .split(',')
        .map(|s| s.trim().parse().unwrap())
        .collect();
    assert_eq!(b.len(), 10 + hlen + 4 * dims[0] * dims[1]);
    (dims[0], dims[1])
}

#[test]
fn stop_rules_are_reported_and_deep_models_default_to_patience() {
    // Kipf's 2-layer recipe keeps Kipf's rule; a deeper or other model waits with patience.
    let out = run(&["train", "--epochs", "60", "--json"]);
    expect(&out, 0, &["--stop kipf"]);
    assert_eq!(last_json(&out)["stop"]["rule"], "kipf");
    for model in [vec!["--layers", "4"], vec!["--model", "sgc"]] {
        let mut args = vec!["train", "--epochs", "40", "--json"];
        args.extend(model);
        let out = run(&args);
        expect(&out, 0, &["--stop patience", "kept epoch"]);
        let j = last_json(&out);
        assert_eq!(j["stop"]["rule"], "patience");
        assert_eq!(j["stop"]["patience"], 100);
        assert_eq!(j["stopped_early"][0], false);
        assert!(text(&out).contains("raise --epochs"), "{}", text(&out));
    }
    let out = run(&[
        "train",
        "--layers",
        "4",
        "--stop",
        "patience",
        "--patience",
        "3",
        "--epochs",
        "300",
        "--json",
    ]);
    expect(&out, 0, &["stopped by --stop patience (3)"]);
    let j = last_json(&out);
    assert_eq!(j["stopped_early"][0], true);
    let ran = j["epochs_run"][0].as_u64().unwrap();
    assert_eq!(j["kept_epoch"][0].as_u64().unwrap(), ran - 3);
}

#[test]
fn messages_have_no_nan_and_use_plurals_and_flag_spellings() {
    let out = run(&["train", "--epochs", "3", "--warmup", "5", "--json"]);
    expect(
        &out,
        0,
        &[
            "not timed",
            "--warmup 5",
            "test accuracy",
            "% with seed 0 (val",
        ],
    );
    // The seed's line and the summary both say why, with the run's own counts.
    let t = text(&out);
    assert_eq!(
        t.matches("(no epoch after the warm-up: 3 epochs run, --warmup 5)")
            .count(),
        2,
        "{t}"
    );
    let human: String = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with('{'))
        .collect();
    assert!(
        !human.contains("NaN") && !human.contains("1 seeds"),
        "{human}"
    );
    let j = last_json(&out);
    assert!(j["epoch_ms_median"].is_null());
    // Without --warmup, a run of fewer than 10 epochs warms up for half of them and is timed;
    // one seed's accuracy has no spread to print; model names in any case.
    let out = run(&["train", "--epochs", "3", "--model", "GCN", "--json"]);
    let t = text(&out);
    assert!(!t.contains("not timed") && !t.contains(" ± "), "{t}");
    let j = last_json(&out);
    assert_eq!(j["warmup_epochs"], 1);
    assert!(j["epoch_ms_median"].as_f64().unwrap() > 0.0);
    assert_eq!(j["model"], "gcn");
    // The hyperparameters in force, in the text and the JSON.
    assert!(
        t.contains(
            "settings  gcn, 2 layers, hidden 16, dropout 0.5 (input 0.5), adam lr 0.01 \
             weight decay 0.0005, at most 3 epochs, stop kipf (window 10) (--recipe default)"
        ),
        "{t}"
    );
    assert_eq!(
        (j["lr"].as_f64(), j["dropout"].as_f64()),
        (Some(0.01), Some(0.5))
    );
    assert_eq!(j["weight_decay"], serde_json::json!([5e-4]));
    assert_eq!(
        (j["optimizer"].as_str(), j["recipe"].as_str()),
        (Some("adam"), Some("default"))
    );
    let out = run(&[
        "train", "--epochs", "2", "--model", "sgc", "--lr", "0.2", "--json",
    ]);
    let j = last_json(&out);
    assert!(
        j["dropout"].is_null() && j["lr"].as_f64() == Some(0.2),
        "{j}"
    );
    let j = last_json(&run(&["train", "--epochs", "30", "--seeds", "4", "--json"]));
    assert_eq!(j["warmup_epochs"], 5);
    // --seed S trains seed S: the same run as the fourth of --seeds 4, bit for bit.
    let one = last_json(&run(&["train", "--epochs", "30", "--seed", "3", "--json"]));
    assert_eq!(
        (one["seeds"].as_u64(), one["first_seed"].as_u64()),
        (Some(1), Some(3))
    );
    assert_eq!(one["test_accs"][0], j["test_accs"][3]);
    assert_eq!(one["test_losses"][0], j["test_losses"][3]);
    assert_ne!(one["test_losses"][0], j["test_losses"][0]);
    for bad in ["x", "-1", "9007199254740991"] {
        expect(&run(&["train", "--seed", bad]), 2, &["--seed"]);
    }
    let out = run(&[
        "train",
        "--epochs",
        "3",
        "--order",
        "transform-first",
        "--json",
    ]);
    assert_eq!(last_json(&out)["orders"][0], "transform-first");
    let out = run(&[
        "train",
        "--epochs",
        "3",
        "--order",
        "aggregate-first",
        "--json",
    ]);
    assert_eq!(last_json(&out)["orders"][0], "aggregate-first");
}

#[test]
fn history_csv_has_one_row_per_epoch_of_every_seed() {
    let d = scratch("history");
    let h = d.join("h.csv");
    let out = run(&[
        "train",
        "--epochs",
        "12",
        "--seeds",
        "2",
        "--json",
        "--history",
        h.to_str().unwrap(),
    ]);
    expect(&out, 0, &["wrote the per-epoch history"]);
    let j = last_json(&out);
    let ran: u64 = j["epochs_run"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .sum();
    let csv = std::fs::read_to_string(&h).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("seed,epoch,train_loss,train_acc,val_loss,val_acc,train_ms,epoch_ms")
    );
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len() as u64, ran);
    assert!(
        rows[0].starts_with("0,1,"),
        "epochs count from 1: {}",
        rows[0]
    );
    assert_eq!(
        rows.iter().filter(|r| r.starts_with("1,")).count() as u64,
        j["epochs_run"][1].as_u64().unwrap()
    );
}

#[test]
fn multi_label_and_bad_label_files_name_the_file_and_line() {
    let d = scratch("labels");
    let (edges, _) = small_graph(&d);
    let mut multi: String = (0..12).map(|i| format!("{}\n", i % 2)).collect();
    multi.insert_str(0, "# header\n1 0\n");
    multi.truncate(multi.len() - 2);
    let labels = write(&d.join("multi.labels"), &multi);
    let out = run(&["info", "--data", &edges, "--labels", &labels]);
    expect(&out, 1, &["multi.labels:2:", "multi-label"]);
    let labels = write(
        &d.join("bad.labels"),
        "0\n1\nx\n0\n0\n0\n1\n1\n1\n1\n1\n1\n",
    );
    let out = run(&["info", "--data", &edges, "--labels", &labels]);
    expect(&out, 1, &["bad.labels:3:", "-1 or NaN"]);
}

#[test]
fn unlabelled_nodes_outside_the_split_train_and_inside_it_are_named() {
    let d = scratch("unlabelled");
    let (edges, _) = small_graph(&d);
    // -1 and NaN outside the split: with fractions the split draws only labelled nodes.
    let labels: Vec<String> = (0..12)
        .map(|i| match i {
            0 => "-1".into(),
            7 => "NaN".into(),
            _ => format!("{}", i / 6),
        })
        .collect();
    let l = write(&d.join("u.labels"), &(labels.join("\n") + "\n"));
    let out = run(&[
        "train",
        "--data",
        &edges,
        "--labels",
        &l,
        "--features",
        "degree",
        "--split-sizes",
        "0.4,0.3,0.3",
        "--epochs",
        "5",
        "--json",
    ]);
    expect(&out, 0, &[]);
    let info = run(&[
        "info",
        "--data",
        &edges,
        "--labels",
        &l,
        "--split-sizes",
        "0.4,0.3,0.3",
    ]);
    expect(
        &info,
        0,
        &["2 nodes unlabelled", "train 4 / valid 3 / test 3"],
    );
}

/// Cora with 100 nodes outside the public split labelled -1 and 100 labelled NaN (OGB's
/// convention), in a scratch copy of the folder (links to the other files).
#[test]
fn cora_with_unlabelled_nodes_trains_and_a_split_node_without_label_is_named() {
    let Some(data) = data_dir() else { return };
    // Absolute: the links below resolve from the scratch folder (CI gives a relative path).
    let cora = std::fs::canonicalize(data.join("cora")).unwrap();
    let d = scratch("cora-unlabelled");
    std::fs::create_dir_all(d.join("raw")).unwrap();
    for f in [
        "edge.csv.gz",
        "node-feat.csv.gz",
        "num-node-list.csv.gz",
        "num-edge-list.csv.gz",
    ] {
        std::os::unix::fs::symlink(cora.join("raw").join(f), d.join("raw").join(f)).unwrap();
    }
    std::os::unix::fs::symlink(cora.join("split"), d.join("split")).unwrap();
    let read_gz = |p: PathBuf| -> Vec<String> {
        let f = flate2::read::MultiGzDecoder::new(std::fs::File::open(p).unwrap());
        BufReader::new(f).lines().map(Result::unwrap).collect()
    };
    let mut labels = read_gz(cora.join("raw/node-label.csv.gz"));
    let mut in_split = vec![false; labels.len()];
    let split_dir = std::fs::read_dir(cora.join("split"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    for part in ["train", "valid", "test"] {
        for id in read_gz(split_dir.join(format!("{part}.csv.gz"))) {
            in_split[id.trim().parse::<usize>().unwrap()] = true;
        }
    }
    let outside: Vec<usize> = (0..labels.len())
        .filter(|&i| !in_split[i])
        .take(200)
        .collect();
    assert_eq!(outside.len(), 200);
    for (k, &i) in outside.iter().enumerate() {
        labels[i] = if k % 2 == 0 {
            "-1".into()
        } else {
            "NaN".into()
        };
    }
    let write_labels = |labels: &[String]| {
        let mut f = std::fs::File::create(d.join("raw/node-label.csv")).unwrap();
        for l in labels {
            writeln!(f, "{l}").unwrap();
        }
    };
    write_labels(&labels);
    let dir = d.to_str().unwrap();
    let out = run(&["train", "--data", dir, "--epochs", "50", "--json"]);
    expect(&out, 0, &[]);
    assert!(last_json(&out)["test_acc_mean"].as_f64().unwrap() > 0.6);
    expect(&run(&["info", "--data", dir]), 0, &["200 nodes unlabelled"]);
    // A test node without a label is named.
    let test_node: usize = read_gz(split_dir.join("test.csv.gz"))[0]
        .trim()
        .parse()
        .unwrap();
    labels[test_node] = "NaN".into();
    write_labels(&labels);
    let out = run(&["train", "--data", dir, "--epochs", "5"]);
    expect(
        &out,
        1,
        &[&format!("node {test_node}"), "test part", "no label"],
    );
}

#[test]
fn structure_only_graphs_load_for_info_and_roofline_and_training_asks_for_labels() {
    let Some(data) = data_dir() else { return };
    let hepph = data.join("cit_hepph");
    let h = hepph.to_str().unwrap();
    expect(
        &run(&["info", "--data", h]),
        0,
        &[
            "nodes              34546",
            "no labels",
            "features           none",
        ],
    );
    let out = run(&["train", "--data", h, "--features", "degree"]);
    expect(&out, 1, &["no labels"]);
    // A structure-only folder takes a label file (and a feature file), one row per node.
    let d = scratch("structure-labels");
    let labels = d.join("labels.txt");
    let rows: String = (0..34546).map(|i| format!("{}\n", i % 3)).collect();
    std::fs::write(&labels, rows).unwrap();
    let l = labels.to_str().unwrap();
    let out = run(&[
        "train",
        "--data",
        h,
        "--features",
        "degree",
        "--labels",
        l,
        "--epochs",
        "2",
    ]);
    expect(&out, 0, &["test accuracy"]);
    std::fs::write(&labels, "0\n1\n").unwrap();
    let out = run(&["info", "--data", h, "--labels", l]);
    expect(&out, 1, &["labels.txt", "34546"]);
    // Cora carries its own labels: a label file is a usage error naming the flag.
    let cora = data.join("cora");
    let out = run(&["info", "--data", cora.to_str().unwrap(), "--labels", l]);
    expect(&out, 2, &["--labels", "carries its own labels"]);
    let out = run(&[
        "roofline",
        "--data",
        h,
        "--dims",
        "16",
        "--reps",
        "1",
        "--warmup",
        "0",
        "--triad-mib",
        "8",
    ]);
    expect(&out, 0, &["SpMM"]);
}

/// `predict` after a reordered training run writes rows in the input's node order: its
/// predicted classes, scored against Cora's labels on the test split, give `eval`'s accuracy.
#[test]
fn predictions_of_a_reordered_model_are_in_the_input_order() {
    let Some(data) = data_dir() else { return };
    let cora = data.join("cora");
    let c = cora.to_str().unwrap();
    let d = scratch("reordered-predict");
    let ck = d.join("m.safetensors");
    let ck_s = ck.to_str().unwrap();
    let out = run(&[
        "train",
        "--data",
        c,
        "--reorder",
        "rcm",
        "--epochs",
        "60",
        "--save",
        ck_s,
    ]);
    expect(&out, 0, &["reordered the nodes (rcm)"]);
    let out = run(&["eval", "--checkpoint", ck_s, "--json"]);
    expect(&out, 0, &[]);
    let test_acc = last_json(&out)["test_acc"].as_f64().unwrap();
    let p = d.join("p.csv");
    expect(
        &run(&[
            "predict",
            "--checkpoint",
            ck_s,
            "--out",
            p.to_str().unwrap(),
        ]),
        0,
        &[],
    );
    let read_gz = |p: PathBuf| -> Vec<String> {
        let f = flate2::read::MultiGzDecoder::new(std::fs::File::open(p).unwrap());
        BufReader::new(f).lines().map(Result::unwrap).collect()
    };
    let labels = read_gz(cora.join("raw/node-label.csv.gz"));
    let split_dir = std::fs::read_dir(cora.join("split"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let test: Vec<usize> = read_gz(split_dir.join("test.csv.gz"))
        .iter()
        .map(|s| s.trim().parse().unwrap())
        .collect();
    let rows: Vec<String> = std::fs::read_to_string(&p)
        .unwrap()
        .lines()
        .skip(1)
        .map(String::from)
        .collect();
    assert_eq!(rows.len(), labels.len());
    let mut right = 0;
    for &i in &test {
        let mut f = rows[i].split(',');
        assert_eq!(f.next().unwrap().parse::<usize>().unwrap(), i);
        let predicted = f.next().unwrap();
        right += usize::from(predicted == labels[i].trim());
    }
    assert_eq!(right as f64 / test.len() as f64, test_acc);
}

/// `predict`, `embed` and `--history` for every model of the stack.
#[test]
fn every_model_predicts_embeds_and_writes_its_history() {
    let d = scratch("every-model");
    for model in [
        "gcn", "residual", "gcnii", "jk-cat", "jk-max", "jk-att", "sgc", "appnp",
    ] {
        let ck = d.join(format!("{model}.safetensors"));
        let h = d.join(format!("{model}.csv"));
        let ck_s = ck.to_str().unwrap();
        let mut args = vec![
            "train",
            "--model",
            model,
            "--epochs",
            "3",
            "--save",
            ck_s,
            "--history",
            h.to_str().unwrap(),
        ];
        // SGC and APPNP count propagation steps, not layers (issue 37: refused for them).
        if !matches!(model, "sgc" | "appnp") {
            args.extend(["--layers", "2"]);
        }
        let out = run(&args);
        expect(&out, 0, &["kept"]);
        assert_eq!(
            std::fs::read_to_string(&h).unwrap().lines().count(),
            4,
            "{model}"
        );
        let p = d.join(format!("{model}.npy"));
        expect(
            &run(&[
                "predict",
                "--checkpoint",
                ck_s,
                "--out",
                p.to_str().unwrap(),
            ]),
            0,
            &[],
        );
        assert_eq!(npy_shape(&p), (2708, 7), "{model}");
        let e = d.join(format!("{model}-1.npy"));
        expect(
            &run(&[
                "embed",
                "--checkpoint",
                ck_s,
                "--layer",
                "1",
                "--out",
                e.to_str().unwrap(),
            ]),
            0,
            &[],
        );
        assert_eq!(npy_shape(&e).0, 2708, "{model}");
    }
}

/// Rows and columns in messages count from 1, as editors show lines.
#[test]
fn a_nan_feature_is_reported_at_its_1_based_row_and_column() {
    let d = scratch("nan-feature");
    let (edges, labels) = small_graph(&d);
    let mut rows: Vec<String> = (0..12).map(|i| format!("{i} 1 0")).collect();
    rows[2] = "2 NaN 0".into();
    let f = write(&d.join("f.txt"), &(rows.join("\n") + "\n"));
    let out = run(&[
        "info",
        "--data",
        &edges,
        "--labels",
        &labels,
        "--features",
        &f,
        "--split-sizes",
        "0.5,0.25,0.25",
    ]);
    expect(
        &out,
        1,
        &["f.txt", "NaN", "row 3, column 2 (counting from 1)"],
    );
}

/// `roofline` measures the FMA peak and reports sgemm as a fraction of it.
#[test]
fn roofline_reports_sgemm_against_the_fma_peak() {
    let out = run(&[
        "roofline",
        "--preset",
        "cora-like",
        "--dims",
        "16",
        "--reps",
        "1",
        "--triad-mib",
        "8",
        "--json",
    ]);
    expect(&out, 0, &["fma peak", "of the FMA peak"]);
    let j = last_json(&out);
    let peak = j["fma_peak"]["gflops"].as_f64().unwrap();
    let sgemm = j["sgemm"]["gflops"].as_f64().unwrap();
    let f = j["sgemm_fma_fraction"].as_f64().unwrap();
    assert!(
        peak > 0.0 && (f - sgemm / peak).abs() <= 1e-9 * f,
        "{f} {sgemm} {peak}"
    );
    assert!(["avx512", "avx2", "portable"].contains(&j["fma_peak"]["isa"].as_str().unwrap()));
}

/// `roofline --epoch`: the epoch and its floor per phase, the floors adding up to the epoch's;
/// the model flags need `--epoch` (a usage error naming the flag otherwise).
#[test]
fn roofline_epoch_reports_the_floor_of_every_phase() {
    let out = run(&[
        "roofline",
        "--preset",
        "cora-like",
        "--epoch",
        "--layers",
        "3",
        "--hidden",
        "32",
        "--reps",
        "2",
        "--triad-mib",
        "8",
        "--json",
    ]);
    expect(&out, 0, &["floor", "weight-grad", "other"]);
    let j = last_json(&out);
    let (epoch, floor) = (
        j["epoch_ms"].as_f64().unwrap(),
        j["epoch_floor_ms"].as_f64().unwrap(),
    );
    assert!(epoch > 0.0 && floor > 0.0, "{epoch} {floor}");
    assert!((j["ratio"].as_f64().unwrap() - epoch / floor).abs() < 1e-9 * epoch / floor);
    assert_eq!(j["layers"], 3);
    assert_eq!(j["hidden"], 32);
    let phases = j["phases"].as_array().unwrap();
    let names: Vec<&str> = phases
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    for p in [
        "gemm",
        "spmm",
        "weight-grad",
        "elementwise",
        "loss",
        "optimizer",
        "other",
    ] {
        assert!(names.contains(&p), "{p} missing from {names:?}");
    }
    let floors: f64 = phases.iter().map(|p| p["floor_ms"].as_f64().unwrap()).sum();
    assert!(
        (floors - floor).abs() <= 1e-9 * floor,
        "{floors} vs {floor}"
    );
    // Three convolutions: three weight gradients, one optimiser update per weight.
    let calls = |name: &str| phases.iter().find(|p| p["phase"] == name).unwrap()["calls"].clone();
    assert_eq!(calls("weight-grad"), 3);
    assert_eq!(calls("optimizer"), 3);
    assert!(phases.iter().all(|p| p["ms"].as_f64().unwrap() >= 0.0));
    // The FMA peak, the GEMMs as a fraction of it, and the floor with them at it: the floor
    // less its GEMMs' part at the sgemm rates, plus their flops at the peak.
    let peak = j["fma_peak_gflops"].as_f64().unwrap();
    assert_eq!(j["fma_peak"]["gflops"].as_f64().unwrap(), peak);
    assert!(peak > 0.0 && j["fma_peak"]["gflops_one"].as_f64().unwrap() > 0.0);
    let (frac, rate) = (
        j["gemm_fma_fraction"].as_f64().unwrap(),
        j["gemm_gflops"].as_f64().unwrap(),
    );
    assert!(
        rate > 0.0 && (frac - rate / peak).abs() <= 1e-9 * frac,
        "{frac} {rate} {peak}"
    );
    for g in j["gemm_rates"].as_array().unwrap() {
        let f = g["fma_fraction"].as_f64().unwrap();
        assert!(
            (f - g["gflops"].as_f64().unwrap() / peak).abs() <= 1e-9 * f,
            "{g}"
        );
    }
    let gemm_floor = j["gemm_floor_ms"].as_f64().unwrap();
    assert!(
        gemm_floor > 0.0 && gemm_floor < floor,
        "{gemm_floor} {floor}"
    );
    let rest = floor - gemm_floor;
    let at_peak = j["epoch_floor_fma_ms"].as_f64().unwrap();
    let gemms_at_peak = j["gemm_gflop"].as_f64().unwrap() / peak * 1e3;
    assert!(gemms_at_peak > 0.0, "{j}");
    assert!(
        (at_peak - (rest + gemms_at_peak)).abs() <= 1e-6 * at_peak,
        "{at_peak} vs {rest} + {gemms_at_peak}"
    );
    expect(&out, 0, &["fma peak", "% of it"]);

    let out = run(&["roofline", "--layers", "3"]);
    expect(&out, 2, &["--epoch"]);
}
