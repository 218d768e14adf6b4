//! Small inputs that declare huge sizes, and runs that would not fit: each refused before the
//! allocation with `Error::TooLarge` (exit 1), naming the cause, the estimate and the memory
//! available. The budget is set with `SPARSE_GCN_MAX_MEMORY`, so that no test allocates more
//! than a few megabytes whatever the machine, and every run has a time limit.

use std::path::Path;

use super::cli_limits::{expect, run_env, s, scratch};
use crate::support::{npy_f32, npy_i32, npy_i64, npy_str, npz};

const BUDGET: (&str, &str) = ("SPARSE_GCN_MAX_MEMORY", "1G");

fn write(path: &Path, content: &str) {
    std::fs::write(path, content).unwrap();
}

/// A `--labels` file of `n` lines, classes 0 and 1.
fn labels(path: &Path, n: usize) {
    let mut t = String::with_capacity(2 * n);
    for i in 0..n {
        t.push_str(if i % 2 == 0 { "0\n" } else { "1\n" });
    }
    write(path, &t);
}

#[test]
fn a_twelve_byte_edge_list_declaring_two_to_the_28_nodes_is_refused() {
    let dir = scratch("mem-edges");
    let big = dir.join("big.txt");
    write(&big, "0 268435455\n");
    assert_eq!(std::fs::metadata(&big).unwrap().len(), 12);
    for cmd in ["info", "train"] {
        let r = run_env(&[cmd, "--data", s(&big)], &[BUDGET], 30);
        expect(
            &r,
            1,
            &["big.txt", "268435456 nodes", "needs about", "available"],
        );
    }
    let small = dir.join("small.txt");
    write(&small, "0 1\n1 2\n");
    let r = run_env(
        &["train", "--data", s(&small), "--num-nodes", "268435456"],
        &[BUDGET],
        30,
    );
    expect(&r, 1, &["268435456 nodes", "needs about"]);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_small_npz_declaring_two_to_the_28_nodes_is_refused() {
    let dir = scratch("mem-npz");
    let p = dir.join("huge.npz");
    let n = 1i64 << 28;
    let arrays = [
        ("row", npy_i32(&[])),
        ("col", npy_i32(&[])),
        ("data", npy_f32(&[])),
        ("format", npy_str("coo")),
        ("shape", npy_i64(&[n, n])),
    ];
    let arrays: Vec<(String, Vec<u8>)> = arrays
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    std::fs::write(&p, npz(&arrays)).unwrap();
    assert!(std::fs::metadata(&p).unwrap().len() < 2000);
    let r = run_env(&["info", "--data", s(&p)], &[BUDGET], 30);
    expect(&r, 1, &["huge.npz", "268435456 nodes", "needs about"]);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn one_typoed_label_is_refused_naming_the_node_and_the_label() {
    let dir = scratch("mem-label");
    let edges = dir.join("ring.txt");
    let mut t = String::new();
    for i in 0..40 {
        t.push_str(&format!("{i} {}\n", (i + 1) % 40));
    }
    write(&edges, &t);
    let lab = dir.join("ring.labels");
    let mut l: Vec<String> = (0..40).map(|i| (i % 4).to_string()).collect();
    l[17] = "1000000".into();
    write(&lab, &(l.join("\n") + "\n"));
    for cmd in ["info", "train"] {
        let r = run_env(&[cmd, "--data", s(&edges), "--labels", s(&lab)], &[], 30);
        expect(
            &r,
            1,
            &["ring.labels", "label 1000000 of node 17", "1000001 classes"],
        );
    }
    // The library says the same.
    let e = sparse_gcn::data::io::load_edge_list(
        &edges,
        None,
        Some(&lab),
        &sparse_gcn::data::io::EdgeListOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("label 1000000 of node 17"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn features_too_wide_are_refused() {
    // Past the most feature columns: a usage error naming the flag.
    let r = run_env(&["train", "--features", "random:100000000"], &[], 30);
    expect(&r, 2, &["--features", "2^24"]);
    // Random features that would not fit: refused before they are drawn.
    let dir = scratch("mem-feat");
    let edges = dir.join("g.txt");
    write(&edges, "0 1\n1 2\n");
    let r = run_env(
        &[
            "info",
            "--data",
            s(&edges),
            "--num-nodes",
            "2000000",
            "--features",
            "random:512",
        ],
        &[BUDGET],
        30,
    );
    expect(
        &r,
        1,
        &[
            "--features random:512 on 2000000 nodes",
            "needs about 3.8 GiB",
        ],
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_model_too_large_for_memory_is_refused_before_it_is_built() {
    // Its parameters: 1433 × 60000 weights (and gradients, moments, the best copy).
    let r = run_env(
        &["train", "--hidden", "60000", "--epochs", "1"],
        &[BUDGET],
        60,
    );
    expect(
        &r,
        1,
        &["gcn model", "hidden 60000", "parameters", "needs about"],
    );
    // Its workspace: 400,000 nodes × 1024 hidden values a buffer, on one feature column.
    let dir = scratch("mem-ws");
    let edges = dir.join("g.txt");
    write(&edges, "0 1\n1 2\n");
    let lab = dir.join("g.labels");
    labels(&lab, 400_000);
    let r = run_env(
        &[
            "train",
            "--data",
            s(&edges),
            "--labels",
            s(&lab),
            "--features",
            "constant",
            "--hidden",
            "1024",
            "--epochs",
            "1",
        ],
        &[BUDGET],
        60,
    );
    expect(&r, 1, &["400000 nodes", "planned workspace", "needs about"]);
    // On batches of a thousand nodes evaluated over the batches, the same model fits: each
    // workspace is planned for the largest batch. Evaluated on the whole graph, evaluation's
    // workspace (two activations of 400,000 × 1024) does not.
    let batched = |eval: &str| {
        run_env(
            &[
                "train",
                "--data",
                s(&edges),
                "--labels",
                s(&lab),
                "--features",
                "constant",
                "--hidden",
                "1024",
                "--epochs",
                "1",
                "--batch",
                "cluster",
                "--clusters",
                "community",
                "--parts",
                "400",
                "--parts-per-batch",
                "1",
                "--eval",
                eval,
            ],
            &[BUDGET],
            120,
        )
    };
    expect(&batched("batch"), 0, &["test accuracy"]);
    expect(
        &batched("full"),
        1,
        &[
            "batches of at most 1000 of 400000 nodes",
            "evaluation's",
            "needs about",
        ],
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn an_invalid_budget_is_an_error_naming_the_variable() {
    let r = run_env(
        &["train", "--epochs", "1"],
        &[("SPARSE_GCN_MAX_MEMORY", "lots")],
        30,
    );
    expect(&r, 1, &["SPARSE_GCN_MAX_MEMORY", "lots"]);
}
