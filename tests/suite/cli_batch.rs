//! `train --batch cluster` from the command line: the batch flags refused where they do not
//! apply (exit 2, naming the flag), a part count the graph cannot take a typed error (exit 1),
//! and the history of a batch-trained run the same to the last digit at 1 and 2 threads.

use super::cli_limits::{expect, run, scratch};

#[test]
fn batch_flags_that_do_not_apply_are_usage_errors() {
    let cases: &[(&[&str], &str)] = &[
        (&["--parts", "20"], "--parts"),
        (&["--parts-per-batch", "2"], "--parts-per-batch"),
        (&["--clusters", "community"], "--clusters"),
        (&["--diag-lambda", "1"], "--diag-lambda"),
        (
            &["--batch", "saint-rw", "--diag-lambda", "1"],
            "--diag-lambda",
        ),
        (
            &["--batch", "cluster", "--diag-lambda", "-1"],
            "--diag-lambda",
        ),
        (
            &["--batch", "cluster", "--diag-lambda", "inf"],
            "--diag-lambda",
        ),
        (&["--batch", "cluster", "--drop-edge", "0.2"], "--drop-edge"),
        (
            &[
                "--batch",
                "cluster",
                "--parts",
                "4",
                "--parts-per-batch",
                "5",
            ],
            "--parts-per-batch",
        ),
        (&["--batch", "cluster", "--parts", "0"], "--parts"),
        (&["--batch-size", "100"], "--batch-size"),
        (
            &["--batch", "cluster", "--batch-size", "100"],
            "--batch-size",
        ),
        (
            &["--batch", "saint-node", "--walk-length", "3"],
            "--walk-length",
        ),
        (&["--batch", "saint-rw", "--parts", "3"], "--parts"),
        (&["--saint-coverage", "10"], "--saint-coverage"),
        (&["--batches-per-epoch", "10"], "--batches-per-epoch"),
        (&["--batches-per-step", "2"], "--batches-per-step"),
        (
            &["--batch", "cluster", "--batches-per-step", "0"],
            "--batches-per-step",
        ),
        (
            &["--batch", "cluster", "--batches-per-step", "99999999"],
            "--batches-per-step",
        ),
        (
            &[
                "--batch",
                "cluster",
                "--norm-layer",
                "batch",
                "--batches-per-step",
                "2",
            ],
            "--batches-per-step",
        ),
        (
            &["--batch", "saint-rw", "--saint-coverage", "-1"],
            "--saint-coverage",
        ),
        (
            &["--batch", "saint-rw", "--saint-coverage", "1e5"],
            "--saint-coverage",
        ),
        (
            &["--batch", "saint-rw", "--walk-length", "0"],
            "--walk-length",
        ),
        (
            &["--batch", "saint-edge", "--batch-size", "0"],
            "--batch-size",
        ),
        (
            &["--batch", "saint-edge", "--batches-per-epoch", "0"],
            "--batches-per-epoch",
        ),
        (
            &["--batch", "saint-rw", "--drop-edge", "0.1"],
            "--drop-edge",
        ),
        (&["--eval", "batch"], "--eval"),
        (&["--batch", "saint-rw", "--eval", "batch"], "--eval"),
        (&["--eval", "sideways"], "--eval"),
        (
            &[
                "--batch",
                "saint-rw",
                "--batch-size",
                "60000000",
                "--walk-length",
                "9",
            ],
            "--batch-size",
        ),
        (&["--fanout", "5,5"], "--fanout"),
        (&["--batch", "cluster", "--fanout", "5,5"], "--fanout"),
        (&["--batch", "neighbor", "--fanout", "5,5,5"], "--fanout"),
        (&["--batch", "neighbor", "--fanout", "5,x"], "--fanout"),
        (&["--batch", "neighbor", "--fanout", "5,-1"], "--fanout"),
        (
            &["--batch", "neighbor", "--batch-size", "0"],
            "--batch-size",
        ),
        (
            &["--batch", "neighbor", "--saint-coverage", "3"],
            "--saint-coverage",
        ),
        (
            &[
                "--batch", "neighbor", "--model", "residual", "--layers", "2",
            ],
            "--model residual",
        ),
        (
            &["--batch", "neighbor", "--model", "appnp"],
            "--model appnp",
        ),
        (
            &["--batch", "neighbor", "--drop-edge", "0.1"],
            "--drop-edge",
        ),
        (&["--batch", "neighbor", "--norm", "row"], "--norm row"),
        (&["--batch", "neighbor", "--layers", "17"], "--layers"),
    ];
    for (args, flag) in cases {
        let mut a = vec!["train", "--epochs", "1"];
        a.extend(*args);
        expect(&run(&a), 2, &[flag]);
    }
    expect(
        &run(&["plan", "--batch", "cluster", "--ranks", "1,2"]),
        2,
        &["--batch"],
    );
    expect(
        &run(&["plan", "--batches-per-step", "2", "--ranks", "1,2"]),
        2,
        &["--batches-per-step"],
    );
}

#[test]
fn roofline_takes_the_batch_flags_with_epoch_only() {
    for (args, flag) in [
        (&["roofline", "--batch", "cluster"][..], "--batch"),
        (&["roofline", "--epoch", "--parts", "3"][..], "--parts"),
        (
            &[
                "roofline", "--epoch", "--batch", "neighbor", "--fanout", "2",
            ][..],
            "--fanout",
        ),
    ] {
        expect(&run(args), 2, &[flag]);
    }
}

#[test]
fn roofline_prices_a_batch_epoch_with_its_sampling() {
    for batch in [
        &[
            "--batch",
            "cluster",
            "--parts",
            "20",
            "--parts-per-batch",
            "4",
        ][..],
        &[
            "--batch",
            "neighbor",
            "--fanout",
            "3,5",
            "--batch-size",
            "64",
        ][..],
    ] {
        let mut args = vec![
            "roofline",
            "--preset",
            "cora-like",
            "--epoch",
            "--reps",
            "1",
            "--triad-mib",
            "8",
            "--json",
        ];
        args.extend(batch);
        let r = run(&args);
        expect(&r, 0, &["sampling", r#""sample_bytes":"#]);
        let (start, end) = (r.text.rfind("\n{").unwrap(), r.text.rfind('}').unwrap());
        let j: serde_json::Value = serde_json::from_str(&r.text[start + 1..=end]).unwrap();
        let floor = j["epoch_floor_ms"].as_f64().unwrap();
        let sample = j["sample_floor_ms"].as_f64().unwrap();
        assert!(sample > 0.0 && sample < floor, "{sample} {floor}");
        let phases = j["phases"].as_array().unwrap();
        let sampling = phases.iter().find(|p| p["phase"] == "sampling").unwrap();
        assert_eq!(sampling["floor_ms"].as_f64(), Some(sample));
        // 20 parts, 4 a batch; cora-like's 140 training nodes, 64 a batch.
        let batches = j["batches_per_epoch"].as_u64().unwrap();
        assert_eq!(batches, if batch[1] == "cluster" { 5 } else { 3 });
        // The phases' floors (sampling's included) add up to the epoch's.
        let sum: f64 = phases.iter().map(|p| p["floor_ms"].as_f64().unwrap()).sum();
        assert!((sum - floor).abs() <= 1e-9 * floor, "{sum} {floor}");
    }
}

#[test]
fn the_json_reports_the_batches_and_their_sampling_time() {
    let r = run(&[
        "train",
        "--epochs",
        "8",
        "--warmup",
        "2",
        "--batch",
        "cluster",
        "--parts",
        "20",
        "--parts-per-batch",
        "4",
        "--json",
    ]);
    expect(
        &r,
        0,
        &[
            r#""batch":{"batches_per_epoch":5,"clusters":"metis","diag_lambda":0.0,"kind":"cluster","parts":20,"parts_per_batch":4}"#,
            r#""sample_ms_median":"#,
            r#""batches_per_epoch":5,"#,
            r#""batch_nodes":{"max":"#,
            r#""batch_edges":{"max":"#,
        ],
    );
    // Every node in some batch of each epoch: the mean batch is a fifth of the graph.
    let (start, end) = (r.text.find('{').unwrap(), r.text.rfind('}').unwrap());
    let j: serde_json::Value = serde_json::from_str(&r.text[start..=end]).unwrap();
    let mean = j["batch_nodes"]["mean"].as_f64().unwrap();
    assert!((mean - 2708.0 / 5.0).abs() < 1e-9, "{mean}");
    let max = j["batch_nodes"]["max"].as_u64().unwrap();
    assert!(max as f64 >= mean && max < 2708);
    assert!(j["batch_edges"]["mean"].as_f64().unwrap() > 0.0);
    let full = run(&["train", "--epochs", "8", "--warmup", "2", "--json"]);
    expect(
        &full,
        0,
        &[
            r#""batch":{"kind":"full"}"#,
            r#""sample_ms_median":0.0"#,
            r#""batch_nodes":null"#,
        ],
    );
}

#[test]
fn more_parts_than_nodes_is_a_typed_error() {
    let r = run(&[
        "train", "--epochs", "1", "--batch", "cluster", "--parts", "5000",
    ]);
    expect(&r, 1, &["5000 parts", "2708 nodes"]);
}

/// The history of a run with `batch` flags, at 1 and 2 threads: the same but for the times.
fn replays(name: &str, batch: &[&str]) {
    let dir = scratch(name);
    let mut histories = Vec::new();
    for threads in ["1", "2"] {
        let h = dir.join(format!("h{threads}.csv"));
        let mut args = vec!["train"];
        args.extend(batch);
        args.extend([
            "--epochs",
            "15",
            "--stop",
            "never",
            "--threads",
            threads,
            "--history",
            h.to_str().unwrap(),
        ]);
        let r = run(&args);
        expect(&r, 0, &["test"]);
        let text = std::fs::read_to_string(&h).unwrap();
        // Every column but the wall-clock times.
        let rows: Vec<String> = text
            .lines()
            .map(|l| l.split(',').take(6).collect::<Vec<_>>().join(","))
            .collect();
        assert_eq!(rows.len(), 16);
        histories.push(rows);
    }
    assert_eq!(histories[0], histories[1], "{name}");
}

#[test]
fn a_cluster_run_replays_its_history_at_one_and_two_threads() {
    replays(
        "cluster-history",
        &[
            "--batch",
            "cluster",
            "--parts",
            "30",
            "--parts-per-batch",
            "6",
            "--clusters",
            "community",
        ],
    );
}

#[test]
fn a_cluster_run_evaluated_on_its_batches_replays_its_history_at_one_and_two_threads() {
    replays(
        "cluster-eval-batch-history",
        &[
            "--batch",
            "cluster",
            "--parts",
            "30",
            "--parts-per-batch",
            "6",
            "--clusters",
            "community",
            "--eval",
            "batch",
        ],
    );
}

#[test]
fn a_neighbour_sampled_run_replays_its_history_at_one_and_two_threads() {
    replays(
        "neighbor-history",
        &[
            "--batch",
            "neighbor",
            "--fanout",
            "3,5",
            "--batch-size",
            "40",
        ],
    );
    replays(
        "neighbor-eval-batch-history",
        &[
            "--batch",
            "neighbor",
            "--fanout",
            "0,4",
            "--batch-size",
            "64",
            "--eval",
            "batch",
        ],
    );
}

#[test]
fn every_graphsaint_run_replays_its_history_at_one_and_two_threads() {
    for (name, batch) in [
        (
            "saint-node-history",
            &["--batch", "saint-node", "--batch-size", "400"][..],
        ),
        (
            "saint-edge-history",
            &["--batch", "saint-edge", "--batch-size", "200"][..],
        ),
        (
            "saint-rw-history",
            &[
                "--batch",
                "saint-rw",
                "--batch-size",
                "150",
                "--walk-length",
                "3",
            ][..],
        ),
        (
            "saint-rw-plain-history",
            &[
                "--batch",
                "saint-rw",
                "--batch-size",
                "150",
                "--saint-coverage",
                "0",
            ][..],
        ),
    ] {
        replays(name, batch);
    }
}

#[test]
fn the_json_reports_graphsaint_batches() {
    let r = run(&[
        "train",
        "--epochs",
        "3",
        "--batch",
        "saint-rw",
        "--batch-size",
        "100",
        "--batches-per-epoch",
        "7",
        "--saint-coverage",
        "5",
        "--json",
    ]);
    expect(
        &r,
        0,
        &[
            r#""batch":{"batch_size":100,"batches_per_epoch":7,"kind":"saint-rw","saint_coverage":5.0,"walk_length":2}"#,
        ],
    );
}

/// Cluster-GCN's diagonal enhancement (`--diag-lambda`, the paper's with `--norm row`): in the
/// JSON, another model than without it, and recorded by `--save`, so that `eval` builds the
/// same enhanced Â and reproduces the run's test accuracy and loss to the last bit.
#[test]
fn the_diagonal_enhancement_trains_and_is_recorded_in_the_checkpoint() {
    let dir = scratch("diag-lambda");
    let ck = dir.join("m.safetensors");
    let ck_s = ck.to_str().unwrap();
    let json = |r: &super::cli_limits::Ran| -> serde_json::Value {
        let (start, end) = (r.text.find('{').unwrap(), r.text.rfind('}').unwrap());
        serde_json::from_str(&r.text[start..=end]).unwrap()
    };
    let train = |lambda: &str, save: bool| {
        let mut a = vec![
            "train",
            "--epochs",
            "20",
            "--batch",
            "cluster",
            "--parts",
            "20",
            "--parts-per-batch",
            "4",
            "--clusters",
            "community",
            "--norm",
            "row",
            "--diag-lambda",
            lambda,
            "--json",
        ];
        if save {
            a.extend(["--save", ck_s]);
        }
        let r = run(&a);
        expect(&r, 0, &[&format!(r#""diag_lambda":{lambda}"#)]);
        json(&r)
    };
    let (with, without) = (train("1.0", true), train("0.0", false));
    assert!(with["test_accs"][0].as_f64().unwrap() > 0.5, "{with}");
    assert_ne!(with["test_losses"][0], without["test_losses"][0]);
    let r = run(&["eval", "--checkpoint", ck_s, "--json"]);
    expect(&r, 0, &[]);
    let e = json(&r);
    assert_eq!(e["test_acc"], with["test_accs"][0], "{e}");
    assert_eq!(e["test_loss"], with["test_losses"][0], "{e}");
    let _ = std::fs::remove_dir_all(dir);
}
