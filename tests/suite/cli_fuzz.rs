//! Malformed checkpoints and extreme options, through the binary: every run ends within its time
//! limit with exit 0, 1 or 2 and one error line, never a panic, an abort or a hang (issue 37).

use super::cli_limits::{expect, rewrite_meta, run_env, s, scratch, Ran};

fn no_crash(r: &Ran, what: &str) {
    assert!(
        matches!(r.code, Some(0..=2)),
        "{what}: exit {:?}\n{}",
        r.code,
        r.text
    );
    assert!(!r.text.contains("panicked"), "{what}: {}", r.text);
}

#[test]
fn extreme_options_of_plan_and_roofline_are_refused() {
    let r = run_env(&["plan", "--ranks", "18446744073709551615"], &[], 30);
    expect(&r, 2, &["--ranks", "at most"]);
    let r = run_env(&["plan", "--ranks", "3000"], &[], 60);
    expect(&r, 1, &["--ranks", "number of nodes"]);
    let r = run_env(&["plan", "--hidden", "65536", "--layers", "1024"], &[], 60);
    expect(&r, 1, &["parameters", "needs about"]);
    let r = run_env(
        &["roofline", "--preset", "cora-like", "--triad-mib", "65536"],
        &[],
        60,
    );
    expect(&r, 1, &["--triad-mib", "needs about"]);
    let r = run_env(
        &[
            "roofline",
            "--epoch",
            "--preset",
            "cora-like",
            "--hidden",
            "65536",
            "--layers",
            "1024",
        ],
        &[],
        60,
    );
    expect(&r, 1, &["parameters", "needs about"]);
    for args in [
        &["roofline", "--dims", "0"][..],
        &["roofline", "--reps", "18446744073709551615"],
        &["roofline", "--epoch", "--layers", "18446744073709551615"],
    ] {
        expect(&run_env(args, &[], 30), 2, &[args[args.len() - 2]]);
    }
}

#[test]
fn malformed_checkpoints_are_errors() {
    let dir = scratch("fuzz-ck");
    let ck = dir.join("model.safetensors");
    let r = run_env(&["train", "--epochs", "2", "--save", s(&ck)], &[], 120);
    expect(&r, 0, &[]);
    let bytes = std::fs::read(&ck).unwrap();
    let mut cases: Vec<(String, Vec<u8>)> = Vec::new();
    // Truncated anywhere, header length corrupted.
    for cut in [0, 4, 8, 9, 64, bytes.len() / 2, bytes.len() - 1] {
        cases.push((format!("cut at {cut}"), bytes[..cut].to_vec()));
    }
    for len in [0u64, 7, u64::MAX, 1 << 40, bytes.len() as u64] {
        let mut b = bytes.clone();
        b[..8].copy_from_slice(&len.to_le_bytes());
        cases.push((format!("header length {len}"), b));
    }
    for (i, case) in cases.iter().enumerate() {
        let p = dir.join(format!("bytes-{i}.safetensors"));
        std::fs::write(&p, &case.1).unwrap();
        let r = run_env(&["eval", "--checkpoint", s(&p)], &[], 30);
        no_crash(&r, &case.0);
        assert_eq!(r.code, Some(1), "{}: {}", case.0, r.text);
    }
    // Every metadata value replaced by a bad one.
    let keys = [
        "model",
        "in_dim",
        "hidden_dim",
        "out_dim",
        "n_layers",
        "dropout",
        "input_dropout",
        "norm_layer",
        "bias",
        "order",
        "alpha",
        "lambda",
        "k",
        "checkpoint",
        "drop_edge",
        "mask_streams",
        "orders",
        "format",
        "version",
        "weight_layout",
        "reorder",
        "norm",
        "row_normalize",
        "data_hash_graph",
        "preset",
        "data_seed",
        "features_built",
    ];
    let values = [
        "",
        "-1",
        "0",
        "NaN",
        "inf",
        "1e400",
        "18446744073709551615",
        "99999999999999999999999",
        "x,y",
    ];
    for key in keys {
        for value in values {
            let p = dir.join("meta.safetensors");
            std::fs::copy(&ck, &p).unwrap();
            rewrite_meta(&p, &[(key, value)]);
            let r = run_env(&["eval", "--checkpoint", s(&p)], &[], 30);
            no_crash(&r, &format!("{key} = {value:?}"));
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_gzip_bomb_of_edges_is_refused_as_it_grows() {
    let dir = scratch("fuzz-bomb");
    let p = dir.join("bomb.txt.gz");
    let lines = "0 1\n".repeat(1 << 23);
    std::fs::write(&p, crate::support::gzip(lines.as_bytes())).unwrap();
    assert!(std::fs::metadata(&p).unwrap().len() < 1 << 20);
    let r = run_env(
        &["info", "--data", s(&p)],
        &[("SPARSE_GCN_MAX_MEMORY", "40M")],
        60,
    );
    expect(&r, 1, &["bomb.txt.gz", "the edge list past", "needs about"]);
    std::fs::remove_dir_all(&dir).ok();
}
