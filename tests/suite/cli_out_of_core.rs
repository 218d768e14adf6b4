//! `train --out-of-core` (issue 40): Cluster-GCN's batches read from a store give the bits of
//! the same run in memory; its misuse is a usage error before any data is read, and a damaged
//! store an error naming the array.

use super::cli_identity::json;
use super::cli_limits::{expect, run, s, scratch};

/// What a run reports that does not depend on time or memory.
fn bits(j: &serde_json::Value) -> serde_json::Value {
    let mut j = j.clone();
    let o = j.as_object_mut().unwrap();
    // (Seeds run one after another out of core: `concurrent_runs` differs, as the flag.)
    o.retain(|k, _| {
        !(k.contains("_ms")
            || k.ends_with("_s")
            || k.contains("rss")
            || k == "concurrent_runs"
            || k == "out_of_core")
    });
    j
}

#[test]
fn batches_read_out_of_core_train_as_in_memory() {
    let dir = scratch("ooc");
    let st = dir.join("p");
    let r = run(&[
        "generate",
        "--preset",
        "papers100m-like",
        "--scale",
        "0.0005",
        "--ids",
        "topics",
        "--format",
        "store",
        "--out",
        s(&st),
    ]);
    expect(&r, 0, &[]);
    let base = [
        "train",
        "--data",
        s(&st),
        "--batch",
        "cluster",
        "--clusters",
        "ranges",
        "--eval",
        "batch",
        "--parts",
        "40",
        "--parts-per-batch",
        "6",
        "--epochs",
        "3",
        "--hidden",
        "32",
        "--seeds",
        "2",
        "--json",
    ];
    for extra in [
        &["--reorder", "none"][..],
        &["--norm", "row", "--diag-lambda", "0.5", "--row-norm", "on"][..],
    ] {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let a = run(&args);
        expect(&a, 0, &[]);
        let mut ooc = args.clone();
        ooc.extend(["--out-of-core", "--memory-limit", "2GiB"]);
        let b = run(&ooc);
        expect(&b, 0, &[]);
        let (a, b) = (json(&a), json(&b));
        assert_eq!(bits(&a), bits(&b), "{extra:?}");
        assert!(a["test_acc_mean"].as_f64().unwrap() > 0.02);
    }
    // The run's plan within --memory-limit, or refused before it allocates.
    let mut args: Vec<&str> = base.to_vec();
    args.extend(["--out-of-core", "--memory-limit", "1MiB"]);
    let r = run(&args);
    expect(&r, 1, &["--memory-limit", "refused before allocating"]);
    let r = run(&["train", "--data", s(&st), "--memory-limit", "1GiB"]);
    expect(&r, 2, &["--memory-limit", "--out-of-core"]);
    // Misuse: a usage error naming the flag, before the data is read.
    let text = dir.join("text");
    let r = run(&["generate", "--preset", "cora-like", "--out", s(&text)]);
    expect(&r, 0, &[]);
    let c = ["--batch", "cluster"];
    for (data, extra, words) in [
        (s(&text), &c[..], "must name a store"),
        (s(&st), &["--batch", "saint-rw"][..], "--batch cluster"),
        (s(&st), &[][..], "--batch cluster"),
        (
            s(&st),
            &[c[0], c[1], "--clusters", "metis"][..],
            "--clusters ranges",
        ),
        (s(&st), &[c[0], c[1], "--eval", "full"][..], "--eval batch"),
        (
            s(&st),
            &[c[0], c[1], "--features", "degree"][..],
            "--features",
        ),
        (
            s(&st),
            &[c[0], c[1], "--save", "m.safetensors"][..],
            "--save",
        ),
    ] {
        let mut args = vec!["train", "--out-of-core", "--data", data];
        args.extend_from_slice(extra);
        let r = run(&args);
        expect(&r, 2, &["--out-of-core", words]);
    }
    // What a store cannot honour, as the loader refuses it; another order than the store's.
    for (extra, words) in [
        (&["--split", "planetoid"][..], "split"),
        (&["--directed"][..], "directed"),
        (&["--reorder", "rcm"][..], "--reorder"),
    ] {
        let mut args: Vec<&str> = base.to_vec();
        args.push("--out-of-core");
        args.extend_from_slice(extra);
        let r = run(&args);
        expect(&r, 1, &[words]);
    }
    // A store held in the community order: trained in it (named), out of core as in memory;
    // `none` or `auto` would put the input's order back in memory, which out of core refuses.
    let ord = dir.join("ordered");
    let r = run(&[
        "generate",
        "--preset",
        "arxiv-like",
        "--scale",
        "0.2",
        "--format",
        "store",
        "--reorder",
        "community",
        "--out",
        s(&ord),
    ]);
    expect(&r, 0, &[]);
    let mut args: Vec<&str> = base.to_vec();
    args[2] = s(&ord);
    args.extend(["--reorder", "community"]);
    let a = run(&args);
    expect(&a, 0, &[]);
    args.push("--out-of-core");
    let b = run(&args);
    expect(&b, 0, &[]);
    assert_eq!(bits(&json(&a)), bits(&json(&b)));
    assert_eq!(json(&b)["reorder_applied"], "community");
    for reorder in ["none", "auto"] {
        let mut args: Vec<&str> = base.to_vec();
        args[2] = s(&ord);
        args.extend(["--reorder", reorder, "--out-of-core"]);
        expect(&run(&args), 1, &["--reorder"]);
    }
    // A damaged store: feature values changed, the header not.
    let f = st.join("features.f16");
    let mut b = std::fs::read(&f).unwrap();
    b[1000] ^= 0x55;
    std::fs::write(&f, &b).unwrap();
    let mut args: Vec<&str> = base.to_vec();
    args.push("--out-of-core");
    let r = run(&args);
    expect(&r, 1, &["features", "checksum"]);
    let _ = std::fs::remove_dir_all(&dir);
}
