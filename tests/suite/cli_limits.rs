//! Issue 37's crashes, aborts and hangs, each through the binary: sizes of 2⁶⁴−1 and depths or
//! step counts that would hang are usage errors naming the flag (exit 2); checkpoints whose
//! metadata declares such sizes are typed errors naming the file and the field (exit 1); sizes
//! that would not fit in memory are refused before allocating, with the estimate; outputs never
//! replace what is not a regular file; identical runs write identical checkpoints.
//!
//! Every run has a time limit: a hang fails the test instead of stalling the suite.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Exit code and stdout + stderr of a run of the binary.
pub(crate) struct Ran {
    pub(crate) code: Option<i32>,
    pub(crate) text: String,
}

/// Runs the binary with `args` and `env`, killed after `limit_s` seconds (the test then fails
/// naming the hang).
pub(crate) fn run_env<S: AsRef<std::ffi::OsStr>>(
    args: &[S],
    env: &[(&str, &str)],
    limit_s: u64,
) -> Ran {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sparse-gcn"));
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let t_out = std::thread::spawn(move || {
        let mut s = Vec::new();
        out.read_to_end(&mut s).ok();
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = Vec::new();
        err.read_to_end(&mut s).ok();
        s
    });
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(limit_s) {
            child.kill().ok();
            child.wait().ok();
            let shown: Vec<String> = args
                .iter()
                .map(|a| a.as_ref().to_string_lossy().into_owned())
                .collect();
            panic!(
                "hangs: `sparse-gcn {}` ran for more than {limit_s} s",
                shown.join(" ")
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&t_out.join().unwrap()),
        String::from_utf8_lossy(&t_err.join().unwrap())
    );
    Ran {
        code: status.code(),
        text,
    }
}

pub(crate) fn run(args: &[&str]) -> Ran {
    run_env(args, &[], 120)
}

/// Asserts the exit code and that the output holds every key word.
pub(crate) fn expect(r: &Ran, code: i32, words: &[&str]) {
    assert_eq!(r.code, Some(code), "{}", r.text);
    for w in words {
        assert!(r.text.contains(w), "missing {w:?} in:\n{}", r.text);
    }
    assert!(!r.text.contains("panicked"), "{}", r.text);
}

/// A fresh scratch folder.
pub(crate) fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sparse-gcn-limits-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub(crate) fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Rewrites metadata keys of a safetensors checkpoint (the header's `__metadata__`), keeping
/// the tensors: a checkpoint as a hand-edited or malicious file would be.
pub(crate) fn rewrite_meta(path: &Path, set: &[(&str, &str)]) {
    let bytes = std::fs::read(path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let meta = header["__metadata__"].as_object_mut().unwrap();
    for (k, v) in set {
        meta.insert(k.to_string(), serde_json::Value::String(v.to_string()));
    }
    let mut h = serde_json::to_vec(&header).unwrap();
    while !h.len().is_multiple_of(8) {
        h.push(b' ');
    }
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&h);
    out.extend_from_slice(&bytes[8 + n..]);
    std::fs::write(path, out).unwrap();
}

const MAX: &str = "18446744073709551615";

#[test]
fn sizes_of_two_to_the_64_are_usage_errors_naming_the_flag() {
    for (flag, model) in [
        ("--hidden", "gcn"),
        ("--layers", "gcn"),
        ("--seeds", "gcn"),
        ("--epochs", "gcn"),
        ("--patience", "gcn"),
        ("--threads", "gcn"),
        ("--checkpoint-every", "gcnii"),
        ("--k", "appnp"),
    ] {
        let r = run(&["train", "--model", model, flag, MAX]);
        expect(&r, 2, &[flag, "at most"]);
    }
    let r = run(&["eval", "--checkpoint", "x.safetensors", "--threads", MAX]);
    expect(&r, 2, &["--threads", "at most"]);
}

#[test]
fn depths_and_step_counts_that_would_hang_are_usage_errors() {
    for args in [
        &["train", "--layers", "100000"][..],
        &["train", "--model", "sgc", "--k", "1000000000"],
        &["train", "--model", "appnp", "--k", MAX],
        &["train", "--hidden", "100000000"],
    ] {
        let r = run_env(args, &[], 60);
        expect(&r, 2, &[args[args.len() - 2], "at most"]);
    }
}

#[test]
fn usage_errors_name_the_flag() {
    let r = run(&["train", "--lr", "-inf"]);
    expect(&r, 2, &["--lr", "finite"]);
    let r = run(&["train", "--dropout", "-0.5"]);
    expect(&r, 2, &["--dropout"]);
    let r = run(&["eval", "--checkpoint", "x.safetensors", "--threads", "-1"]);
    expect(&r, 2, &["--threads"]);
    let r = run(&[
        "predict",
        "--checkpoint",
        "x",
        "--out",
        "p.csv",
        "--threads",
        "-1",
    ]);
    expect(&r, 2, &["--threads"]);
}

#[cfg(unix)]
#[test]
fn a_non_utf8_path_is_saved_to_or_named() {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;
    let dir = scratch("utf8");
    let mut name = dir.clone().into_os_string().into_vec();
    name.extend_from_slice(b"/model-\xff.safetensors");
    let save = OsString::from_vec(name);
    let args: Vec<OsString> = ["train", "--epochs", "2", "--save"]
        .iter()
        .map(OsString::from)
        .chain([save.clone()])
        .collect();
    let r = run_env(&args, &[], 120);
    expect(&r, 0, &["saved the model"]);
    assert!(Path::new(&save).is_file());
    // A flag that takes text names itself.
    let split = OsString::from_vec(b"sp\xfflit".to_vec());
    let args = vec![OsString::from("info"), OsString::from("--split"), split];
    let r = run_env(&args, &[], 60);
    expect(&r, 2, &["--split", "UTF-8"]);
    std::fs::remove_dir_all(&dir).ok();
}

/// A FIFO at `path` (and a character device at `dev` when this process may make one).
#[cfg(unix)]
fn special_files(dir: &Path) -> Vec<PathBuf> {
    let fifo = dir.join("fifo.safetensors");
    let ok = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(ok.success());
    let mut v = vec![fifo];
    // Our own null device (never /dev/null: the faulty code would replace it).
    let dev = dir.join("null.csv");
    if Command::new("mknod")
        .arg(&dev)
        .args(["c", "1", "3"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
    {
        v.push(dev);
    }
    let folder = dir.join("folder.npy");
    std::fs::create_dir(&folder).unwrap();
    v.push(folder);
    v
}

#[cfg(unix)]
fn is_special(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| !m.is_file())
}

#[cfg(unix)]
#[test]
fn outputs_never_replace_what_is_not_a_regular_file() {
    let dir = scratch("special");
    let ck = dir.join("model.safetensors");
    let r = run(&["train", "--epochs", "2", "--save", s(&ck)]);
    expect(&r, 0, &[]);
    for p in special_files(&dir) {
        let name = s(&p);
        for (args, flag) in [
            (vec!["train", "--epochs", "1", "--save", name], "--save"),
            (
                vec!["train", "--epochs", "1", "--history", name],
                "--history",
            ),
            (
                vec!["predict", "--checkpoint", s(&ck), "--out", name],
                "--out",
            ),
            (
                vec![
                    "embed",
                    "--checkpoint",
                    s(&ck),
                    "--layer",
                    "1",
                    "--out",
                    name,
                ],
                "--out",
            ),
        ] {
            let r = run(&args);
            assert!(is_special(&p), "{name} replaced by {args:?}");
            // An extension the subcommand does not take is refused before the file kind.
            if r.text.contains("must end in") {
                continue;
            }
            expect(&r, 2, &[flag, "not a regular file"]);
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[cfg(unix)]
#[test]
fn the_atomic_writer_refuses_what_is_not_a_regular_file() {
    use sparse_gcn::train::checkpoint::write_file_atomic;
    let dir = scratch("writer");
    for p in special_files(&dir) {
        let e = write_file_atomic(&p, b"x").unwrap_err();
        assert!(
            matches!(e, sparse_gcn::Error::NotRegularFile { .. }),
            "{}: {e}",
            p.display()
        );
        assert!(is_special(&p));
        // Through a symbolic link too.
        let link = dir.join(format!("link-{}", p.file_name().unwrap().to_string_lossy()));
        std::os::unix::fs::symlink(&p, &link).unwrap();
        assert!(write_file_atomic(&link, b"x").is_err());
        assert!(is_special(&p));
    }
    // A link to a regular file: the file is replaced, the link kept.
    let target = dir.join("target.csv");
    std::fs::write(&target, "old").unwrap();
    let link = dir.join("link.csv");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    write_file_atomic(&link, b"new").unwrap();
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
    // A dangling link is refused.
    let dangling = dir.join("dangling.csv");
    std::os::unix::fs::symlink(dir.join("nothing"), &dangling).unwrap();
    assert!(write_file_atomic(&dangling, b"x").is_err());
    assert!(!dir.join("nothing").exists());
    std::fs::remove_dir_all(&dir).ok();
}

#[cfg(unix)]
#[test]
fn save_through_a_symbolic_link_replaces_its_target() {
    let dir = scratch("link");
    let target = dir.join("target.safetensors");
    std::fs::write(&target, "old").unwrap();
    let link = dir.join("link.safetensors");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let r = run(&["train", "--epochs", "2", "--save", s(&link)]);
    expect(&r, 0, &[]);
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(sparse_gcn::train::checkpoint::load(&target).is_ok());
    let dangling = dir.join("dangling.safetensors");
    std::os::unix::fs::symlink(dir.join("nothing"), &dangling).unwrap();
    let r = run(&["train", "--epochs", "1", "--save", s(&dangling)]);
    expect(&r, 2, &["--save", "symbolic link"]);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn identical_runs_write_identical_checkpoints() {
    let dir = scratch("identical");
    let (a, b) = (dir.join("a.safetensors"), dir.join("b.safetensors"));
    for p in [&a, &b] {
        let r = run(&["train", "--epochs", "3", "--save", s(p)]);
        expect(&r, 0, &[]);
    }
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn checkpoints_declaring_huge_sizes_are_typed_errors_naming_file_and_field() {
    let dir = scratch("ck-sizes");
    let gcn = dir.join("gcn.safetensors");
    let sgc = dir.join("sgc.safetensors");
    expect(&run(&["train", "--epochs", "2", "--save", s(&gcn)]), 0, &[]);
    expect(
        &run(&[
            "train",
            "--model",
            "sgc",
            "--epochs",
            "2",
            "--save",
            s(&sgc),
        ]),
        0,
        &[],
    );
    for (base, key, value) in [
        (&gcn, "hidden_dim", MAX),
        (&gcn, "hidden_dim", "100000000"),
        (&gcn, "out_dim", "100000000"),
        (&gcn, "n_layers", "100000"),
        (&gcn, "in_dim", MAX),
        (&sgc, "k", "1000000000"),
    ] {
        let ck = dir.join(format!("bad-{key}-{value}.safetensors"));
        std::fs::copy(base, &ck).unwrap();
        rewrite_meta(&ck, &[(key, value)]);
        for cmd in ["eval", "predict", "embed"] {
            let out = dir.join("out.npy");
            let mut args = vec![cmd, "--checkpoint", s(&ck)];
            if cmd != "eval" {
                args.extend(["--out", s(&out)]);
            }
            if cmd == "embed" {
                args.extend(["--layer", "1"]);
            }
            let r = run_env(&args, &[], 60);
            expect(&r, 1, &[s(&ck), key]);
        }
    }
    // Within the limits but far more than the file holds: refused before the model is
    // allocated.
    let ck = dir.join("wide.safetensors");
    std::fs::copy(&gcn, &ck).unwrap();
    rewrite_meta(&ck, &[("hidden_dim", "60000")]);
    let r = run_env(&["eval", "--checkpoint", s(&ck)], &[], 60);
    expect(&r, 1, &[s(&ck), "hidden_dim 60000", "parameters"]);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_row_count_conflict_names_where_each_count_came_from() {
    let dir = scratch("rows");
    let edges = dir.join("g.txt");
    std::fs::write(&edges, "0 1\n1 2\n").unwrap();
    let labels = dir.join("g.labels");
    std::fs::write(&labels, "0\n1\n0\n1\n").unwrap();
    let feats = dir.join("g.feat");
    std::fs::write(&feats, "1 0\n0 1\n1 1\n").unwrap();
    let r = run(&[
        "info",
        "--data",
        s(&edges),
        "--labels",
        s(&labels),
        "--features",
        s(&feats),
    ]);
    expect(
        &r,
        1,
        &[
            "g.feat",
            "feature rows vs the 4 rows of the label file",
            "g.labels",
            "--labels",
        ],
    );
    let r = run(&[
        "info",
        "--data",
        s(&edges),
        "--num-nodes",
        "5",
        "--labels",
        s(&labels),
    ]);
    expect(
        &r,
        1,
        &[
            "g.labels",
            "label rows vs the node count given",
            "--num-nodes",
        ],
    );
    std::fs::remove_dir_all(&dir).ok();
}
