//! No flag is silently ignored (issue 37): a flag the chosen model, data source or subcommand
//! would not use is a usage error (exit 2) naming it and why, before any data is read; the
//! flags that do apply still run; `--json` shows null for the parts a model does not have.

use super::cli_limits::{expect, run, s, scratch};

#[test]
fn model_flags_that_do_nothing_are_refused() {
    let cases: &[(&[&str], &str)] = &[
        (&["--model", "sgc", "--layers", "64"], "--layers"),
        (&["--model", "sgc", "--hidden", "64"], "--hidden"),
        (
            &["--model", "sgc", "--checkpoint-every", "3"],
            "--checkpoint-every",
        ),
        (&["--model", "sgc", "--dropout", "0.3"], "--dropout"),
        (&["--model", "sgc", "--norm-layer", "pair"], "--norm-layer"),
        (&["--model", "sgc", "--order", "transform-first"], "--order"),
        (&["--model", "appnp", "--layers", "9"], "--layers"),
        (&["--model", "appnp", "--lambda", "1"], "--lambda"),
        (&["--model", "appnp", "--bias"], "--bias"),
        (
            &["--model", "gcnii", "--norm-layer", "batch"],
            "--norm-layer",
        ),
        (&["--model", "gcnii", "--k", "4"], "--k"),
        (&["--model", "gcnii", "--order", "lean"], "--order"),
        (&["--alpha", "0.2"], "--alpha"),
        (&["--lambda", "0.5"], "--lambda"),
        (&["--k", "3"], "--k"),
        (
            &["--checkpoint-every", "2", "--layers", "4"],
            "--checkpoint-every",
        ),
        (&["--layers", "1", "--norm-layer", "batch"], "--norm-layer"),
        (&["--stop", "never", "--patience", "5"], "--patience"),
        (
            &["--model", "sgc", "--recipe", "paper", "--patience", "5"],
            "--patience",
        ),
        (
            &["--weight-decay", "0", "--weight-decay-scope", "all"],
            "--weight-decay-scope",
        ),
    ];
    for (args, flag) in cases {
        let mut a = vec!["train", "--epochs", "1"];
        a.extend(*args);
        let r = run(&a);
        expect(&r, 2, &[flag]);
    }
}

#[test]
fn model_flags_that_apply_run() {
    for args in [
        &[
            "--model", "gcnii", "--layers", "2", "--alpha", "0.2", "--lambda", "1",
        ][..],
        &[
            "--model", "appnp", "--k", "3", "--alpha", "0.2", "--hidden", "8",
        ],
        &["--model", "sgc", "--k", "3"],
        &[
            "--layers",
            "3",
            "--norm-layer",
            "batch",
            "--checkpoint-every",
            "1",
        ],
        &[
            "--model",
            "residual",
            "--layers",
            "3",
            "--checkpoint-every",
            "1",
            "--bias",
        ],
        &[
            "--model",
            "jk-max",
            "--layers",
            "2",
            "--norm-layer",
            "pair",
            "--order",
            "lean",
        ],
        &[
            "--stop",
            "patience",
            "--patience",
            "5",
            "--drop-edge",
            "0.2",
        ],
    ] {
        let mut a = vec!["train", "--epochs", "2"];
        a.extend(args);
        expect(&run(&a), 0, &["test accuracy"]);
    }
    // --json shows null for the parts a model does not have.
    let r = run(&["train", "--model", "sgc", "--epochs", "2", "--json"]);
    expect(&r, 0, &[]);
    let j: serde_json::Value = serde_json::from_str(r.text.lines().last().unwrap()).unwrap();
    assert!(j["layers"].is_null() && j["hidden"].is_null() && j["norm_layer"].is_null());
    assert_eq!(j["k"], 2);
}

#[test]
fn data_flags_that_do_nothing_are_refused() {
    let dir = scratch("flags-data");
    let ogb = dir.join("ogb");
    expect(&run(&["generate", "--out", s(&ogb)]), 0, &[]);
    let labels = dir.join("l.txt");
    std::fs::write(&labels, "0\n").unwrap();
    let el = dir.join("g.txt");
    std::fs::write(&el, "0 1\n").unwrap();
    let npz = dir.join("missing.npz");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--data", s(&ogb), "--split-sizes", "0.5,0.2,0.2"],
            "--split-sizes",
        ),
        (
            vec!["--data", s(&ogb), "--train-per-class", "5"],
            "--train-per-class",
        ),
        (vec!["--data", s(&ogb), "--num-nodes", "9"], "--num-nodes"),
        (vec!["--data", s(&ogb), "--labels", s(&labels)], "--labels"),
        (
            vec!["--data", s(&ogb), "--features", s(&labels)],
            "--features",
        ),
        (
            vec!["--data", s(&ogb), "--preset", "arxiv-like"],
            "--preset",
        ),
        (vec!["--data", s(&ogb), "--data-seed", "3"], "--data-seed"),
        (vec!["--data", s(&el), "--split", "planetoid"], "--split"),
        (vec!["--data", s(&npz), "--num-nodes", "9"], "--num-nodes"),
        (vec!["--split", "planetoid"], "--split"),
        (vec!["--directed"], "--directed"),
        (vec!["--num-nodes", "9"], "--num-nodes"),
        (vec!["--train-per-class", "5"], "--train-per-class"),
        (vec!["--split-sizes", "0.5,0.2,0.2"], "--split-sizes"),
        (vec!["--labels", s(&labels)], "--labels"),
        (vec!["--features", s(&labels)], "--features"),
    ];
    for cmd in ["train", "info"] {
        for (args, flag) in &cases {
            let mut a = vec![cmd];
            a.extend(args.iter().copied());
            expect(&run(&a), 2, &[flag]);
        }
    }
    // Random features are seeded by --data-seed, on any data.
    let r = run(&[
        "info",
        "--data",
        s(&ogb),
        "--features",
        "random:4",
        "--data-seed",
        "3",
    ]);
    expect(&r, 0, &["nodes"]);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn subcommand_flags_that_do_nothing_are_refused() {
    for (args, flag) in [
        (&["plan", "--save", "x.safetensors"][..], "--save"),
        (&["plan", "--history", "x.csv"], "--history"),
        (&["plan", "--seeds", "3"], "--seeds"),
        (&["plan", "--epochs", "3"], "--epochs"),
        (&["plan", "--lr", "0.1"], "--lr"),
        (
            &["roofline", "--data", "x.txt", "--preset", "cora-like"],
            "--preset",
        ),
        (&["roofline", "--epoch", "--dims", "16"], "--dims"),
        (&["roofline", "--epoch", "--class-order"], "--class-order"),
    ] {
        expect(&run(args), 2, &[flag]);
    }
    // Evaluation: the options given, with what the checkpoint records, must apply.
    let dir = scratch("flags-eval");
    let ck = dir.join("m.safetensors");
    expect(&run(&["train", "--epochs", "2", "--save", s(&ck)]), 0, &[]);
    for (args, flag) in [
        (&["--num-nodes", "9"][..], "--num-nodes"),
        (&["--split", "planetoid"], "--split"),
        (&["--data", "x.txt", "--preset", "cora-like"], "--preset"),
    ] {
        for cmd in ["eval", "predict"] {
            let out = dir.join("p.csv");
            let mut a = vec![cmd, "--checkpoint", s(&ck)];
            if cmd == "predict" {
                a.extend(["--out", s(&out)]);
            }
            a.extend(args);
            expect(&run(&a), 2, &[flag]);
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
