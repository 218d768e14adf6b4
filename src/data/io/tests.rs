//! Unit tests of the shared text readers, label and feature parsing, and random splits.

use std::fs::File;
use std::io::Write;

use super::*;

/// A scratch file holding `content`, removed on drop.
pub(super) struct Tmp(pub(super) PathBuf);
impl Tmp {
    pub(super) fn new(tag: &str, content: &[u8]) -> Tmp {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let k = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "sparse-gcn-io-unit-{}-{k}-{tag}",
            std::process::id()
        ));
        let mut f = File::create(&path).unwrap();
        f.write_all(content).unwrap();
        Tmp(path)
    }
}
impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn lines(content: &str, syntax: Syntax) -> Result<Vec<(usize, Vec<String>)>> {
    let t = Tmp::new("lines.csv", content.as_bytes());
    let mut r = LineReader::open(&t.0, syntax)?;
    let mut out = Vec::new();
    while let Some(l) = r.next_line()? {
        out.push((l.no, l.fields().map(str::to_string).collect()));
    }
    Ok(out)
}

fn v(s: &[&str]) -> Vec<String> {
    s.iter().map(|x| x.to_string()).collect()
}

#[test]
fn line_reader_trims_and_numbers_lines() {
    let got = lines(" 1 , 2 \r\n3\n\n\n", Syntax::Ogb).unwrap();
    assert_eq!(got, vec![(1, v(&["1 ", " 2"])), (2, v(&["3"]))]);
    assert_eq!(lines("", Syntax::Ogb).unwrap(), vec![]);
    assert_eq!(lines("7", Syntax::Ogb).unwrap(), vec![(1, v(&["7"]))]);
}

#[test]
fn line_reader_rejects_an_empty_line_before_data_in_ogb_files() {
    let err = lines("1\n\n \n2\n", Syntax::Ogb).unwrap_err();
    assert!(matches!(err, Error::Parse { line: 2, .. }), "{err}");
}

#[test]
fn free_syntax_skips_comments_and_blank_lines_and_splits_on_commas_or_space() {
    let got = lines(
        "# header\n\n0 1\n% other\n1\t2 # trailing\n2, 3\n\n",
        Syntax::Free,
    );
    assert_eq!(
        got.unwrap(),
        vec![
            (3, v(&["0", "1"])),
            (5, v(&["1", "2"])),
            (6, v(&["2", " 3"]))
        ]
    );
}

#[test]
fn line_reader_rejects_invalid_utf8() {
    let t = Tmp::new("bin.csv", b"1\n\xff\xfe\n");
    let mut r = LineReader::open(&t.0, Syntax::Free).unwrap();
    assert!(r.next_line().unwrap().is_some());
    let err = r.next_line().err().unwrap();
    assert!(matches!(err, Error::Parse { line: 2, .. }), "{err}");
}

#[test]
fn features_parse_floats_and_ints() {
    let t = Tmp::new("feat.csv", b"0,1,1.5e-3\n -2 , 0.25,7\n");
    let x = read_features(&t.0, Syntax::Ogb, 2, "nodes").unwrap();
    assert_eq!(x, ndarray::array![[0.0, 1.0, 1.5e-3], [-2.0, 0.25, 7.0]]);
    let t = Tmp::new("feat.txt", b"# x\n0 1\t1.5e-3\n\n-2 0.25 7\n");
    let y = read_features(&t.0, Syntax::Free, 2, "nodes").unwrap();
    assert_eq!(x, y);
    let t = Tmp::new("feat-extra.csv", b"0,1\n0,1\n0,1\n");
    let err = read_features(&t.0, Syntax::Ogb, 2, "nodes").unwrap_err();
    assert!(
        matches!(
            err,
            Error::Mismatch {
                expected: 2,
                got: 3,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn absurd_feature_sizes_fail_before_allocating() {
    let wide = vec!["0"; 300].join(",");
    let t = Tmp::new("feat-wide.csv", wide.as_bytes());
    let err = read_features(&t.0, Syntax::Ogb, 4_000_000_000, "nodes").unwrap_err();
    assert!(matches!(err, Error::Dataset { .. }), "{err}");
}

#[test]
fn labels_check_declared_and_inferred_class_counts() {
    let t = Tmp::new("labels.csv", b"0\n2\n1\n");
    assert_eq!(
        read_labels(&t.0, Syntax::Ogb, 3, "nodes", None).unwrap(),
        vec![0, 2, 1]
    );
    let err = read_labels(&t.0, Syntax::Ogb, 3, "nodes", Some(2)).unwrap_err();
    assert!(
        matches!(
            err,
            Error::LabelOutOfRange {
                node: 1,
                label: 2,
                n_classes: 2
            }
        ),
        "{err}"
    );
    let t = Tmp::new("labels-huge.csv", b"0\n4000000000\n");
    let err = read_labels(&t.0, Syntax::Ogb, 2, "nodes", None).unwrap_err();
    assert!(
        matches!(
            err,
            Error::LabelOutOfRange {
                label: 4_000_000_000,
                ..
            }
        ),
        "{err}"
    );
    // OGB's unlabelled nodes: -1 and NaN (any case), and float class ids as OGB writes them.
    let t = Tmp::new("labels.csv", b"0\nnan\n-1\nNaN\n3.0\n-1.0\n");
    let got = read_labels(&t.0, Syntax::Ogb, 6, "nodes", None).unwrap();
    let u = crate::data::UNLABELLED;
    assert_eq!(got, vec![0, u, u, u, 3, u]);
    assert_eq!(class_count(&got, None), 4, "unlabelled nodes are no class");
    assert_eq!(class_count(&[u, u], None), 0);
    for bad in ["-2", "1.5", "-0.5", "x"] {
        let t = Tmp::new("labels.csv", format!("0\n{bad}\n").as_bytes());
        let err = read_labels(&t.0, Syntax::Ogb, 2, "nodes", None).unwrap_err();
        assert!(matches!(err, Error::Parse { line: 2, .. }), "{bad}: {err}");
        assert!(err.to_string().contains("-1 or NaN"), "{err}");
    }
    let t = Tmp::new("labels.csv", b"0,1\n1\n");
    let err = read_labels(&t.0, Syntax::Ogb, 2, "nodes", None).unwrap_err();
    assert!(matches!(err, Error::Parse { line: 1, .. }), "{err}");
    assert!(err.to_string().contains("multi-label"), "{err}");
}

#[test]
fn random_splits_are_seeded_disjoint_and_sized() {
    let labels: Vec<u32> = (0..100).map(|i| i % 3).collect();
    let p = Path::new("x");
    let rs = RandomSplit {
        rule: SplitRule::PerClass {
            train_per_class: 5,
            n_valid: 30,
            n_test: 1000,
        },
        seed: 7,
    };
    let s = random_split(p, &labels, 3, &rs).unwrap();
    s.check().unwrap();
    assert_eq!((s.train.len(), s.valid.len(), s.test.len()), (15, 30, 55));
    for c in 0..3 {
        let k = s
            .train
            .indices()
            .iter()
            .filter(|&&i| labels[i as usize] == c);
        assert_eq!(k.count(), 5);
    }
    assert_eq!(s, random_split(p, &labels, 3, &rs).unwrap());
    let other = RandomSplit { seed: 8, ..rs };
    assert_ne!(s, random_split(p, &labels, 3, &other).unwrap());
    let fr = RandomSplit {
        rule: SplitRule::Fractions {
            train: 0.6,
            valid: 0.2,
            test: 0.2,
        },
        seed: 1,
    };
    let s = random_split(p, &labels, 3, &fr).unwrap();
    s.check().unwrap();
    assert_eq!((s.train.len(), s.valid.len(), s.test.len()), (60, 20, 20));
    let bad = RandomSplit {
        rule: SplitRule::Fractions {
            train: 0.8,
            valid: 0.2,
            test: 0.2,
        },
        seed: 1,
    };
    assert!(matches!(
        random_split(p, &labels, 3, &bad),
        Err(Error::Dataset { .. })
    ));
    // a tiny graph under Planetoid leaves nothing to validate on: the error says why and
    // which options set the sizes
    let e = random_split(p, &[0, 0, 0], 1, &RandomSplit::default()).unwrap_err();
    let msg = e.to_string();
    for w in [
        "3 labelled nodes",
        "valid part",
        "--train-per-class",
        "--split-sizes",
    ] {
        assert!(msg.contains(w), "{w}: {msg}");
    }
    // unlabelled nodes are in no part; the shuffle is the same with them
    let u = crate::data::UNLABELLED;
    let mut some: Vec<u32> = labels.clone();
    for i in (0..100).step_by(10) {
        some[i] = u;
    }
    let s = random_split(p, &some, 3, &fr).unwrap();
    assert_eq!((s.train.len(), s.valid.len(), s.test.len()), (54, 18, 18));
    for m in [&s.train, &s.valid, &s.test] {
        assert!(m.indices().iter().all(|&i| some[i as usize] != u));
    }
    let none = random_split(p, &[u; 5], 0, &fr).unwrap();
    assert_eq!(none.name, "none");
    assert!(none.train.is_empty() && none.valid.is_empty() && none.test.is_empty());
}

#[test]
fn stems_drop_gz_and_extension() {
    assert_eq!(file_stem(Path::new("/a/cora.txt.gz")), "cora");
    assert_eq!(file_stem(Path::new("b/cora.npz")), "cora");
    assert_eq!(file_stem(Path::new("edges")), "edges");
    assert_eq!(file_stem(Path::new(".hidden")), ".hidden");
}
