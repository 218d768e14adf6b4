//! The loaders on valid inputs: `load_ogb` on tiny OGB folders written at run time (valid and
//! malformed) and on the real Planetoid copies when `SPARSE_GCN_DATA` is set; the `.npz` loaders
//! on reference files written by numpy and scipy (`tests/data/npz/`); edge lists; and the format
//! detection of `load`. Malformed inputs of every format are in `tests/suite/io_errors.rs`.

use crate::support;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use flate2::write::GzEncoder;
use flate2::Compression;
use sparse_gcn::data::io::{
    load, load_edge_list, load_npz_benchmark, load_ogb, load_ogb_skeleton, load_scipy_npz,
    EdgeListOptions, LoadOptions, NpzOptions, OgbOptions, RandomSplit, SplitRule,
};
use sparse_gcn::data::Dataset;
use sparse_gcn::graph::Direction;
use sparse_gcn::Error;

/// A dataset folder `<tmp>/sparse-gcn-ogb-<pid>-<k>/tiny`, removed on drop.
struct Fixture {
    root: PathBuf,
    dir: PathBuf,
}

const EDGES: &str = "0,1\n1,2\n2,0\n3,4\n1,0\n";
const FEATS: &str = "1,0,0\n0, 1.5e-3 ,0\n0,0,1\n2.5,0,0\n0,-1,0\n0,0,0\n";
const LABELS: &str = "0\n1\n2\n1\n0\n2\n";

fn gzip(content: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    enc.write_all(content).unwrap();
    enc.finish().unwrap()
}

impl Fixture {
    fn empty() -> Fixture {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let k = COUNTER.fetch_add(1, Ordering::Relaxed);
        let root = std::env::temp_dir().join(format!("sparse-gcn-ogb-{}-{k}", std::process::id()));
        let dir = root.join("tiny");
        fs::create_dir_all(dir.join("raw")).unwrap();
        Fixture { root, dir }
    }

    /// A valid 6-node dataset; `gz(i)` says whether the i-th file is compressed.
    fn valid_with(gz: impl Fn(usize) -> bool) -> Fixture {
        let fx = Fixture::empty();
        let files = [
            ("raw/num-node-list", "6\n"),
            ("raw/num-edge-list", "5\n"),
            ("raw/edge", EDGES),
            ("raw/node-feat", FEATS),
            ("raw/node-label", LABELS),
            ("split/public/train", "0\n1\n"),
            ("split/public/valid", "2\n3\n"),
            ("split/public/test", "4\n5\n"),
        ];
        for (i, (stem, content)) in files.into_iter().enumerate() {
            fx.put(stem, content, gz(i));
        }
        fx
    }

    fn valid(gz: bool) -> Fixture {
        Fixture::valid_with(|_| gz)
    }

    /// Writes `stem.csv.gz` or `stem.csv`, removing the other.
    fn put(&self, stem: &str, content: &str, gz: bool) {
        let (keep, drop) = if gz {
            (".csv.gz", ".csv")
        } else {
            (".csv", ".csv.gz")
        };
        let _ = fs::remove_file(self.dir.join(format!("{stem}{drop}")));
        let bytes = if gz {
            gzip(content.as_bytes())
        } else {
            content.as_bytes().to_vec()
        };
        self.put_bytes(&format!("{stem}{keep}"), &bytes);
    }

    fn put_bytes(&self, rel: &str, bytes: &[u8]) {
        let path = self.dir.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
    }

    fn remove(&self, stem: &str) {
        for ext in [".csv", ".csv.gz"] {
            let _ = fs::remove_file(self.dir.join(format!("{stem}{ext}")));
        }
    }

    fn load(&self) -> sparse_gcn::Result<Dataset> {
        load_ogb(&self.dir, &OgbOptions::default())
    }

    /// The error of a load that must fail, checked to mention `needle` (a file name).
    fn load_err(&self, needle: &str) -> Error {
        let err = self.load().expect_err("the load should fail");
        let msg = err.to_string();
        assert!(
            msg.contains(needle),
            "{needle:?} not in the message {msg:?}"
        );
        err
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

fn check_tiny(d: &Dataset) {
    assert_eq!(d.name, "tiny");
    assert_eq!(d.graph.n_nodes(), 6);
    assert_eq!(d.graph.n_edges(), 4, "the duplicate 1,0 is merged");
    assert_eq!(d.graph.neighbors(0), &[1, 2]);
    assert_eq!(d.graph.n_isolated(), 1);
    assert!(!d.features.is_sparse());
    let x = d.features.to_dense();
    let want = ndarray::array![
        [1.0, 0.0, 0.0],
        [0.0, 1.5e-3, 0.0],
        [0.0, 0.0, 1.0],
        [2.5, 0.0, 0.0],
        [0.0, -1.0, 0.0],
        [0.0, 0.0, 0.0f32],
    ];
    assert_eq!(x, want);
    assert_eq!(d.labels, vec![0, 1, 2, 1, 0, 2]);
    assert_eq!(d.n_classes, 3);
    assert_eq!(d.split.name, "public");
    assert_eq!(d.split.train.indices(), &[0, 1]);
    assert_eq!(d.split.valid.indices(), &[2, 3]);
    assert_eq!(d.split.test.indices(), &[4, 5]);
}

#[test]
fn loads_uncompressed_compressed_and_mixed() {
    check_tiny(&Fixture::valid(false).load().unwrap());
    check_tiny(&Fixture::valid(true).load().unwrap());
    check_tiny(&Fixture::valid_with(|i| i % 2 == 0).load().unwrap());
    check_tiny(&Fixture::valid_with(|i| i % 2 == 1).load().unwrap());
}

#[test]
fn prefers_gz_and_tolerates_trailing_empty_lines_and_whitespace() {
    let fx = Fixture::valid(true);
    fx.put_bytes("raw/edge.csv", b"garbage\n");
    fx.put("raw/node-label", " 0 \n1\n 2\n1\r\n0\n2\n\n \n", false);
    check_tiny(&fx.load().unwrap());
}

#[test]
fn direction_and_sparse_features_options() {
    let fx = Fixture::valid(true);
    let opts = OgbOptions {
        split: Some("public".into()),
        direction: Direction::Directed,
        sparse_features_below: Some(0.5),
    };
    let d = load_ogb(&fx.dir, &opts).unwrap();
    assert!(d.graph.is_directed());
    assert_eq!(d.graph.n_edges(), 5);
    assert!(d.features.is_sparse(), "5 of 18 values are non-zero");
    assert_eq!(d.features.nnz(), 5);
    assert_eq!(
        d.features.to_dense(),
        Fixture::valid(false).load().unwrap().features.to_dense()
    );
    let dense = OgbOptions {
        sparse_features_below: Some(0.1),
        ..OgbOptions::default()
    };
    assert!(!load_ogb(&fx.dir, &dense).unwrap().features.is_sparse());
}

#[test]
fn split_selection() {
    let fx = Fixture::valid(false);
    fx.put("split/other/train", "5\n", false);
    fx.put("split/other/valid", "4\n", false);
    fx.put("split/other/test", "0\n", false);
    // two splits and none chosen: an error listing both, sorted
    let err = fx.load_err("other, public");
    assert!(matches!(err, Error::Dataset { .. }), "{err}");
    let opts = OgbOptions {
        split: Some("other".into()),
        ..OgbOptions::default()
    };
    let d = load_ogb(&fx.dir, &opts).unwrap();
    assert_eq!(
        (d.split.name.as_str(), d.split.train.indices()),
        ("other", &[5][..])
    );
    // a name that is not there
    let opts = OgbOptions {
        split: Some("random".into()),
        ..OgbOptions::default()
    };
    let err = load_ogb(&fx.dir, &opts).unwrap_err();
    assert!(matches!(err, Error::Dataset { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("\"random\"") && msg.contains("other, public"),
        "{msg}"
    );
}

#[test]
fn truncated_gzip_is_an_io_error() {
    let fx = Fixture::valid(false);
    let gz = gzip(FEATS.as_bytes());
    fx.remove("raw/node-feat");
    fx.put_bytes("raw/node-feat.csv.gz", &gz[..gz.len() - 12]);
    let err = fx.load_err("node-feat.csv.gz");
    assert!(matches!(&err, Error::Io { path, .. } if path.ends_with("raw/node-feat.csv.gz")));
}

#[test]
fn not_gzip_is_an_io_error() {
    let fx = Fixture::valid(false);
    fx.remove("raw/edge");
    fx.put_bytes("raw/edge.csv.gz", EDGES.as_bytes());
    let err = fx.load_err("edge.csv.gz");
    assert!(matches!(err, Error::Io { .. }), "{err}");
}

/// The skeleton is the dataset without its features, and any rows of those, streamed, are the
/// dataset's rows: what each rank of a distributed run reads.
#[test]
fn skeleton_and_streamed_feature_rows_match_the_whole_load() {
    for gz in [false, true] {
        let fx = Fixture::valid(gz);
        let opts = OgbOptions::default();
        let whole = load_ogb(&fx.dir, &opts).unwrap();
        let (s, file) = load_ogb_skeleton(&fx.dir, &opts).unwrap();
        assert_eq!(s.graph, whole.graph);
        assert_eq!(
            (s.labels.clone(), s.n_classes),
            (whole.labels.clone(), whole.n_classes)
        );
        assert_eq!(s.split.test.indices(), whole.split.test.indices());
        assert_eq!(s.name, whole.name);
        let file = file.unwrap();
        assert_eq!((file.n_nodes, file.width), (6, 3));
        let x = whole.features.to_dense();
        for rows in [vec![0, 1, 2, 3, 4, 5], vec![4, 1], vec![], vec![5, 0, 3]] {
            let got = file.read_rows(&rows).unwrap();
            assert_eq!(got.dim(), (rows.len(), 3));
            for (k, &r) in rows.iter().enumerate() {
                assert_eq!(got.row(k), x.row(r as usize), "gz {gz}, rows {rows:?}");
            }
        }
        assert!(matches!(file.read_rows(&[6]), Err(Error::Dataset { .. })));
        // A bad line is reported whichever rows are kept.
        fx.put(
            "raw/node-feat",
            "1,0,0\n0,1,0\n0,x,1\n0,0,0\n0,0,0\n0,0,0\n",
            gz,
        );
        let err = file.read_rows(&[0]).unwrap_err();
        assert!(matches!(err, Error::Parse { line: 3, .. }), "{err}");
    }
    // A structure-only folder: no feature file.
    let fx = Fixture::valid(false);
    fs::remove_file(fx.dir.join("raw/node-feat.csv")).unwrap();
    let (_, file) = load_ogb_skeleton(&fx.dir, &OgbOptions::default()).unwrap();
    assert!(file.is_none());
}

#[test]
fn non_numeric_feature_is_a_parse_error() {
    let fx = Fixture::valid(true);
    fx.put(
        "raw/node-feat",
        "1,0,0\n0,1,0\n0,x1,1\n2.5,0,0\n0,-1,0\n0,0,0\n",
        true,
    );
    let err = fx.load_err("node-feat.csv.gz");
    assert!(
        matches!(err, Error::Parse { line: 3, ref msg, .. } if msg.contains("x1")),
        "{err}"
    );
}

#[test]
fn non_numeric_edge_is_a_parse_error() {
    let fx = Fixture::valid(false);
    fx.put("raw/edge", "0,1\n1,two\n2,0\n3,4\n1,0\n", false);
    let err = fx.load_err("edge.csv");
    assert!(
        matches!(err, Error::Parse { line: 2, ref msg, .. } if msg.contains("two")),
        "{err}"
    );
}

#[test]
fn edge_with_three_fields_is_a_parse_error() {
    let fx = Fixture::valid(true);
    fx.put("raw/edge", "0,1\n1,2\n2,0,7\n3,4\n1,0\n", true);
    let err = fx.load_err("edge.csv.gz");
    assert!(
        matches!(err, Error::Parse { line: 3, ref msg, .. } if msg.contains("got 3")),
        "{err}"
    );
    fx.put("raw/edge", "0,1\n1\n2,0\n3,4\n1,0\n", true);
    let err = fx.load_err("edge.csv.gz");
    assert!(matches!(err, Error::Parse { line: 2, .. }), "{err}");
}

#[test]
fn feature_row_with_wrong_width_is_a_parse_error() {
    let fx = Fixture::valid(false);
    fx.put(
        "raw/node-feat",
        "1,0,0\n0,1,0\n0,0,1\n2.5,0,0,4\n0,-1,0\n0,0,0\n",
        false,
    );
    let err = fx.load_err("node-feat.csv");
    assert!(
        matches!(err, Error::Parse { line: 4, ref msg, .. } if msg.contains("got 4")),
        "{err}"
    );
    fx.put(
        "raw/node-feat",
        "1,0,0\n0,1\n0,0,1\n2.5,0,0\n0,-1,0\n0,0,0\n",
        false,
    );
    let err = fx.load_err("node-feat.csv");
    assert!(
        matches!(err, Error::Parse { line: 2, ref msg, .. } if msg.contains("got 2")),
        "{err}"
    );
}

#[test]
fn edge_id_out_of_range_is_a_parse_error() {
    let fx = Fixture::valid(true);
    fx.put("raw/edge", "0,1\n1,2\n2,0\n3,4\n1,6\n", true);
    let err = fx.load_err("edge.csv.gz");
    assert!(
        matches!(err, Error::Parse { line: 5, ref msg, .. } if msg.contains("node id 6 out of range for 6 nodes")),
        "{err}"
    );
}

#[test]
fn negative_and_oversized_ids_are_parse_errors() {
    let fx = Fixture::valid(false);
    fx.put("raw/edge", "0,1\n-1,2\n2,0\n3,4\n1,0\n", false);
    let err = fx.load_err("edge.csv");
    assert!(
        matches!(err, Error::Parse { line: 2, ref msg, .. } if msg.contains("-1")),
        "{err}"
    );
    fx.put(
        "raw/edge",
        "0,1\n1,2\n2,0\n3,18446744073709551616\n1,0\n",
        false,
    );
    let err = fx.load_err("edge.csv");
    assert!(matches!(err, Error::Parse { line: 4, .. }), "{err}");
}

#[test]
fn nan_and_inf_features_are_non_finite_errors() {
    let fx = Fixture::valid(true);
    fx.put(
        "raw/node-feat",
        "1,0,0\n0,1,0\n0,0,1\n2.5,NaN,0\n0,-1,0\n0,0,0\n",
        true,
    );
    let err = fx.load_err("node-feat.csv.gz");
    assert!(matches!(err, Error::NonFiniteValue { row: 3, col: 1, value, .. } if value.is_nan()));
    fx.put(
        "raw/node-feat",
        "1,0,0\n0,1,0\n0,0,1\n2.5,0,0\n0,-1,0\n0,0,-inf\n",
        false,
    );
    let err = fx.load_err("node-feat.csv");
    assert!(
        matches!(err, Error::NonFiniteValue { row: 5, col: 2, value, .. } if value == f64::NEG_INFINITY)
    );
    // an overflowing literal is infinite too
    fx.put(
        "raw/node-feat",
        "1e39,0,0\n0,1,0\n0,0,1\n2.5,0,0\n0,-1,0\n0,0,0\n",
        false,
    );
    let err = fx.load_err("node-feat.csv");
    assert!(
        matches!(err, Error::NonFiniteValue { row: 0, col: 0, .. }),
        "{err}"
    );
}

#[test]
fn label_rows_not_n_is_a_mismatch() {
    let fx = Fixture::valid(false);
    fx.put("raw/node-label", "0\n1\n2\n1\n0\n", false);
    let err = fx.load_err("node-label.csv");
    assert!(
        matches!(
            err,
            Error::Mismatch {
                expected: 6,
                got: 5,
                ..
            }
        ),
        "{err}"
    );
    fx.put("raw/node-label", "0\n1\n2\n1\n0\n2\n1\n1\n", true);
    let err = fx.load_err("node-label.csv.gz");
    assert!(
        matches!(
            err,
            Error::Mismatch {
                expected: 6,
                got: 8,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn bad_labels_are_parse_errors() {
    let fx = Fixture::valid(false);
    for (bad, line) in [
        ("0\n1\n-2\n1\n0\n2\n", 3),
        ("0\n1\n2\n1\n0\nx\n", 6),
        ("0\n1\n2\n1.5\n0\n2\n", 4),
        ("0\n1\n2\n1,1\n0\n2\n", 4),
    ] {
        fx.put("raw/node-label", bad, false);
        let err = fx.load_err("node-label.csv");
        assert!(
            matches!(err, Error::Parse { line: l, .. } if l == line),
            "{bad:?}: {err}"
        );
    }
}

#[test]
fn feature_rows_not_n_is_a_mismatch() {
    let fx = Fixture::valid(true);
    fx.put("raw/node-feat", "1,0,0\n0,1,0\n0,0,1\n", true);
    let err = fx.load_err("node-feat.csv.gz");
    assert!(
        matches!(
            err,
            Error::Mismatch {
                expected: 6,
                got: 3,
                ..
            }
        ),
        "{err}"
    );
    fx.put("raw/node-feat", &format!("{FEATS}1,1,1\n"), true);
    let err = fx.load_err("node-feat.csv.gz");
    assert!(
        matches!(
            err,
            Error::Mismatch {
                expected: 6,
                got: 7,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn edge_count_not_num_edge_list_is_a_mismatch() {
    let fx = Fixture::valid(false);
    fx.put("raw/num-edge-list", "7\n", false);
    let err = fx.load_err("edge.csv");
    assert!(
        matches!(
            err,
            Error::Mismatch {
                expected: 7,
                got: 5,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn split_id_out_of_range_is_a_parse_error() {
    let fx = Fixture::valid(true);
    fx.put("split/public/test", "4\n5\n3000\n", true);
    let err = fx.load_err("test.csv.gz");
    assert!(
        matches!(err, Error::Parse { line: 3, ref msg, .. } if msg.contains("3000 out of range")),
        "{err}"
    );
}

#[test]
fn overlapping_split_is_a_dataset_error() {
    let fx = Fixture::valid(false);
    fx.put("split/public/valid", "1\n2\n3\n", false);
    // Split::check names the split, not a file
    let err = fx.load_err("public");
    assert!(
        matches!(err, Error::Dataset { ref msg, .. } if msg.contains("node 1")),
        "{err}"
    );
}

#[test]
fn empty_split_file_is_an_empty_mask() {
    let fx = Fixture::valid(false);
    fx.put("split/public/valid", "", true);
    let err = fx.load_err("valid");
    assert!(
        matches!(err, Error::EmptyMask { ref name, .. } if name == "valid"),
        "{err}"
    );
}

#[test]
fn unlabelled_split_nodes_are_named_and_unlabelled_others_allowed() {
    // -1 and NaN (OGB's convention) mark nodes without a class.
    let fx = Fixture::valid(false);
    let d = fx.load().unwrap();
    let in_split: Vec<bool> = (0..6)
        .map(|i| {
            [&d.split.train, &d.split.valid, &d.split.test]
                .iter()
                .any(|m| m.to_bool()[i])
        })
        .collect();
    let mut labels: Vec<String> = d.labels.iter().map(|l| l.to_string()).collect();
    if let Some(free) = in_split.iter().position(|&s| !s) {
        labels[free] = "NaN".into();
        fx.put("raw/node-label", &(labels.join("\n") + "\n"), false);
        let e = fx.load().unwrap();
        assert_eq!(e.labels[free], sparse_gcn::data::UNLABELLED);
        assert_eq!(e.n_classes, d.n_classes);
    }
    let node = in_split.iter().position(|&s| s).unwrap();
    labels[node] = "-1".into();
    fx.put("raw/node-label", &(labels.join("\n") + "\n"), false);
    let err = fx.load().unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Dataset { .. }), "{err}");
    assert!(
        msg.contains(&format!("node {node} ")) && msg.contains("no label"),
        "{msg}"
    );
}

#[test]
fn structure_only_folders_load_without_features_and_labels() {
    let fx = Fixture::valid(true);
    fx.remove("raw/node-label");
    fx.remove("raw/node-feat");
    let d = fx.load().unwrap();
    assert_eq!(
        (d.graph.n_nodes(), d.features.n_cols(), d.n_classes),
        (6, 0, 0)
    );
    assert!(d.labels.iter().all(|&l| l == sparse_gcn::data::UNLABELLED));
    let err = d.check_trainable().unwrap_err();
    assert!(err.to_string().contains("no labels"), "{err}");
    // without split/ either: the empty split
    fs::remove_dir_all(fx.dir.join("split")).unwrap();
    let d = fx.load().unwrap();
    assert_eq!(d.split.name, "none");
}

#[test]
fn structure_only_folders_take_feature_and_label_files() {
    let fx = Fixture::valid(true);
    fx.remove("raw/node-label");
    fx.remove("raw/node-feat");
    fs::write(fx.dir.join("labels.txt"), LABELS).unwrap();
    fs::write(fx.dir.join("feats.csv"), FEATS).unwrap();
    let opts = LoadOptions {
        labels: Some(fx.dir.join("labels.txt")),
        features: Some(fx.dir.join("feats.csv")),
        sparse_features_below: None,
        ..LoadOptions::default()
    };
    let d = load(&fx.dir, &opts).unwrap();
    let whole = Fixture::valid(true).load().unwrap();
    assert_eq!(d.labels, whole.labels);
    assert_eq!(d.n_classes, 3);
    assert_eq!(d.features.to_dense(), whole.features.to_dense());
    assert_eq!(d.split, whole.split);
    d.check_trainable().unwrap();
    // Labels alone: the folder's (absent) features stay absent.
    let labels_only = LoadOptions {
        features: None,
        ..opts.clone()
    };
    let d = load(&fx.dir, &labels_only).unwrap();
    assert_eq!((d.features.n_cols(), d.n_classes), (0, 3));
    // A label file of another length names it and the folder's node count.
    fs::write(fx.dir.join("labels.txt"), "0\n1\n").unwrap();
    let err = load(&fx.dir, &labels_only).unwrap_err().to_string();
    assert!(
        err.contains("labels.txt") && err.contains("6 nodes"),
        "{err}"
    );
    // A folder with its own labels refuses a label file.
    let own = Fixture::valid(true);
    let err = load(&own.dir, &labels_only).unwrap_err().to_string();
    assert!(err.contains("carries its own"), "{err}");
}

#[test]
fn missing_file_is_an_io_error() {
    let fx = Fixture::valid(true);
    fx.remove("raw/num-node-list");
    let err = fx.load_err("num-node-list.csv");
    assert!(
        matches!(&err, Error::Io { path, source }
            if path.ends_with("raw/num-node-list.csv.gz") && source.kind() == std::io::ErrorKind::NotFound),
        "{err}"
    );
    let fx = Fixture::valid(false);
    fx.remove("split/public/train");
    let err = fx.load_err("train.csv");
    assert!(matches!(err, Error::Io { .. }), "{err}");
}

#[test]
fn missing_folders_are_errors() {
    let fx = Fixture::valid(false);
    fs::remove_dir_all(fx.dir.join("split")).unwrap();
    let err = fx.load_err("split");
    assert!(matches!(err, Error::Dataset { .. }), "{err}");
    let nowhere = fx.dir.join("nowhere");
    let err = load_ogb(&nowhere, &OgbOptions::default()).unwrap_err();
    assert!(
        matches!(err, Error::Io { ref path, .. } if path == &nowhere),
        "{err}"
    );
}

#[test]
fn directory_instead_of_file_is_an_io_error() {
    let fx = Fixture::valid(false);
    fx.remove("raw/edge");
    fs::create_dir_all(fx.dir.join("raw/edge.csv.gz")).unwrap();
    let err = fx.load_err("edge.csv.gz");
    assert!(matches!(err, Error::Io { .. }), "{err}");
}

#[test]
fn empty_line_before_data_is_a_parse_error() {
    let fx = Fixture::valid(true);
    fx.put("raw/edge", "0,1\n1,2\n\n2,0\n3,4\n1,0\n", true);
    let err = fx.load_err("edge.csv.gz");
    assert!(matches!(err, Error::Parse { line: 3, .. }), "{err}");
}

#[test]
fn absurd_node_count_is_rejected_early() {
    let fx = Fixture::valid(false);
    fx.put("raw/num-node-list", "1099511627776\n", false);
    let err = fx.load_err("num-node-list.csv");
    assert!(matches!(err, Error::Dataset { .. }), "{err}");
    // fits u32 but the files disagree: caught before any N-sized allocation
    fx.put("raw/num-node-list", "4000000000\n", false);
    let err = fx.load_err("node-label.csv");
    assert!(
        matches!(
            err,
            Error::Mismatch {
                expected: 4_000_000_000,
                got: 6,
                ..
            }
        ),
        "{err}"
    );
    fx.put("raw/num-node-list", "six\n", false);
    let err = fx.load_err("num-node-list.csv");
    assert!(matches!(err, Error::Parse { line: 1, .. }), "{err}");
}

/// The counts of the real Planetoid copies under `$SPARSE_GCN_DATA` (skipped when unset).
#[test]
fn real_planetoid_counts() {
    let Some(root) = std::env::var_os("SPARSE_GCN_DATA") else {
        println!("skipped: SPARSE_GCN_DATA is not set");
        return;
    };
    let root = Path::new(&root);
    let opts = OgbOptions {
        sparse_features_below: Some(0.1),
        ..OgbOptions::default()
    };
    // (name, nodes, edges, features, classes, train/valid/test, isolated)
    let expected = [
        ("cora", 2708, 5278, 1433, 7, [140, 500, 1000], 0),
        ("citeseer", 3327, 4552, 3703, 6, [120, 500, 1000], 48),
    ];
    for (name, nodes, edges, feats, classes, split, isolated) in expected {
        let d = load_ogb(root.join(name), &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(d.name, name);
        assert_eq!(d.graph.n_nodes(), nodes, "{name} nodes");
        assert_eq!(d.graph.n_edges(), edges, "{name} edges");
        assert_eq!(d.graph.stats().self_loops, 0, "{name} self-loops");
        assert_eq!(d.features.n_rows(), nodes, "{name} feature rows");
        assert_eq!(d.features.n_cols(), feats, "{name} features");
        assert!(
            d.features.is_sparse(),
            "{name}: bag-of-words should be stored sparse"
        );
        assert_eq!(d.labels.len(), nodes, "{name} labels");
        assert_eq!(d.n_classes, classes, "{name} classes");
        let sizes = [d.split.train.len(), d.split.valid.len(), d.split.test.len()];
        assert_eq!(sizes, split, "{name} split");
        assert_eq!(d.graph.n_isolated(), isolated, "{name} isolated nodes");
    }
}

// ---- other formats ------------------------------------------------------------------------

/// The features of the 6-node reference graph (`tests/data/npz/gen.py`).
fn reference_features() -> ndarray::Array2<f32> {
    ndarray::array![
        [1.0, 0.0, 0.0],
        [0.0, 1.5, 0.0],
        [0.0, 0.0, 1.0],
        [2.5, 0.0, 0.0],
        [0.0, -1.0, 0.0],
        [0.0, 0.0, 0.0f32],
    ]
}

fn npz_file(name: &str) -> PathBuf {
    support::data_dir().join("npz").join(name)
}

fn small_split() -> RandomSplit {
    RandomSplit {
        rule: SplitRule::Fractions {
            train: 0.5,
            valid: 0.25,
            test: 0.25,
        },
        seed: 5,
    }
}

fn npz_opts() -> NpzOptions {
    NpzOptions {
        split: small_split(),
        ..NpzOptions::default()
    }
}

/// The reference graph: edges 0-1, 1-2, 2-0, 3-4, node 5 isolated (undirected).
fn check_reference_graph(d: &Dataset) {
    assert_eq!(d.graph.n_nodes(), 6);
    assert_eq!(d.graph.n_edges(), 4);
    assert!(!d.graph.is_directed());
    let nb: Vec<&[u32]> = (0..6).map(|i| d.graph.neighbors(i)).collect();
    assert_eq!(nb, vec![&[1, 2][..], &[0, 2], &[0, 1], &[4], &[3], &[]]);
    let sizes = (d.split.train.len(), d.split.valid.len(), d.split.test.len());
    assert_eq!(sizes, (3, 2, 1), "50/25/25 % of 6, rounded, clipped");
    d.validate().unwrap();
}

#[test]
fn real_numpy_benchmark_files_load() {
    // np.savez_compressed: deflate, zip64 local headers, pickled extras ignored, CSR features
    let d = load_npz_benchmark(npz_file("tiny_benchmark.npz"), &npz_opts()).unwrap();
    assert_eq!(d.name, "tiny_benchmark");
    check_reference_graph(&d);
    assert!(d.features.is_sparse());
    assert_eq!(d.features.nnz(), 5);
    assert_eq!(d.features.to_dense(), reference_features());
    assert_eq!(d.labels, vec![0, 1, 2, 1, 0, 2]);
    assert_eq!(d.n_classes, 3);
    // np.savez: stored, one direction per edge, unsorted, Fortran-order float64 features,
    // big-endian labels
    let e = load_npz_benchmark(npz_file("tiny_benchmark_dense.npz"), &npz_opts()).unwrap();
    check_reference_graph(&e);
    assert!(!e.features.is_sparse());
    assert_eq!(e.features.to_dense(), reference_features());
    assert_eq!(e.labels, d.labels);
    assert_eq!(e.split, d.split, "same seed, same labels: same split");
}

#[test]
fn npz_direction_and_sparse_options() {
    let o = NpzOptions {
        direction: Direction::Directed,
        sparse_features_below: Some(0.5),
        ..npz_opts()
    };
    let d = load_npz_benchmark(npz_file("tiny_benchmark_dense.npz"), &o).unwrap();
    assert!(d.graph.is_directed());
    assert_eq!(d.graph.n_edges(), 4, "arcs 0→2, 0→1, 1→2, 3→4");
    assert_eq!(d.graph.neighbors(0), &[1, 2]);
    assert_eq!(d.graph.neighbors(2), &[] as &[u32]);
    assert!(d.features.is_sparse(), "5 of 18 values are non-zero");
    let o = NpzOptions {
        n_classes: Some(5),
        ..npz_opts()
    };
    let d = load_npz_benchmark(npz_file("tiny_benchmark.npz"), &o).unwrap();
    assert_eq!(d.n_classes, 5);
    let o = NpzOptions {
        n_classes: Some(2),
        ..npz_opts()
    };
    let err = load_npz_benchmark(npz_file("tiny_benchmark.npz"), &o).unwrap_err();
    assert!(
        matches!(
            err,
            Error::LabelOutOfRange {
                node: 2,
                label: 2,
                n_classes: 2
            }
        ),
        "{err}"
    );
}

#[test]
fn real_scipy_files_load() {
    // CSR with unsorted indices and a duplicate; CSC features; .npy labels
    let d = load_scipy_npz(
        npz_file("scipy_adj_csr.npz"),
        Some(&npz_file("scipy_feat_csc.npz")),
        Some(&npz_file("labels.npy")),
        &npz_opts(),
    )
    .unwrap();
    assert_eq!(d.name, "scipy_adj_csr");
    check_reference_graph(&d);
    assert!(d.features.is_sparse());
    assert_eq!(d.features.to_dense(), reference_features());
    assert_eq!(d.labels, vec![0, 1, 2, 1, 0, 2]);
    // COO (stored), dense .npy features, text labels
    let tmp = support::TempDir::new("ogb-loader-scipy");
    let labels = tmp.put("labels.txt", b"# one per line\n0\n1\n2\n1\n0\n2\n");
    let e = load_scipy_npz(
        npz_file("scipy_adj_coo.npz"),
        Some(&npz_file("feat_dense.npy")),
        Some(&labels),
        &npz_opts(),
    )
    .unwrap();
    check_reference_graph(&e);
    assert!(!e.features.is_sparse());
    assert_eq!(e.features.to_dense(), reference_features());
    assert_eq!(e.labels, d.labels);
    // adjacency only: no features, no labels, no split (structure only; training says so)
    let f = load_scipy_npz(npz_file("scipy_adj_csr.npz"), None, None, &npz_opts()).unwrap();
    assert_eq!((f.features.n_rows(), f.features.n_cols()), (6, 0));
    assert_eq!(f.labels, vec![sparse_gcn::data::UNLABELLED; 6]);
    assert_eq!(f.n_classes, 0);
    assert!(f.split.train.is_empty() && f.split.valid.is_empty() && f.split.test.is_empty());
    let e = f.check_trainable().unwrap_err();
    assert!(e.to_string().contains("no labels"), "{e}");
}

#[test]
fn edge_lists_load() {
    let tmp = support::TempDir::new("ogb-loader-el");
    let edges = tmp.put("tiny.edges", support::EDGE_LIST.as_bytes());
    let feats = tmp.put("tiny.feat", support::EDGE_FEATS.as_bytes());
    let labels = tmp.put("tiny.labels", support::EDGE_LABELS.as_bytes());
    let o = EdgeListOptions {
        split: small_split(),
        ..EdgeListOptions::default()
    };
    let d = load_edge_list(&edges, Some(&feats), Some(&labels), &o).unwrap();
    assert_eq!(d.name, "tiny");
    assert_eq!(d.graph.n_nodes(), 6);
    assert_eq!(d.graph.n_edges(), 5);
    assert_eq!(d.graph.neighbors(4), &[3, 5]);
    let mut x = reference_features();
    x[[1, 1]] = 1.5e-3;
    assert_eq!(d.features.to_dense(), x);
    assert_eq!(d.labels, vec![0, 1, 2, 1, 0, 2]);
    // gzipped, through `load`, with the same files
    let gz = tmp.put("tiny.txt.gz", &support::gzip(support::EDGE_LIST.as_bytes()));
    let lo = LoadOptions {
        random_split: small_split(),
        features: Some(feats.clone()),
        labels: Some(labels.clone()),
        ..LoadOptions::default()
    };
    let e = load(&gz, &lo).unwrap();
    assert_eq!(e.graph, d.graph);
    assert_eq!(e.features.to_dense(), x);
    assert_eq!(e.split, d.split);
}

#[test]
fn planetoid_split_by_default() {
    // a ring of 2000 nodes in 7 classes: 20 per class, 500, 1000
    let tmp = support::TempDir::new("ogb-loader-ring");
    let n = 2000;
    let ring: String = (0..n).map(|i| format!("{i} {}\n", (i + 1) % n)).collect();
    let lab: String = (0..n).map(|i| format!("{}\n", i % 7)).collect();
    let edges = tmp.put("ring.txt", ring.as_bytes());
    let labels = tmp.put("ring.labels", lab.as_bytes());
    let d = load_edge_list(&edges, None, Some(&labels), &EdgeListOptions::default()).unwrap();
    let sizes = (d.split.train.len(), d.split.valid.len(), d.split.test.len());
    assert_eq!(sizes, (140, 500, 1000));
    for c in 0..7 {
        let k = d
            .split
            .train
            .indices()
            .iter()
            .filter(|&&i| d.labels[i as usize] == c);
        assert_eq!(k.count(), 20);
    }
    let again = load_edge_list(&edges, None, Some(&labels), &EdgeListOptions::default()).unwrap();
    assert_eq!(again.split, d.split, "seeded");
    let o = EdgeListOptions {
        split: RandomSplit {
            seed: 1,
            ..RandomSplit::default()
        },
        ..EdgeListOptions::default()
    };
    let other = load_edge_list(&edges, None, Some(&labels), &o).unwrap();
    assert_ne!(other.split, d.split);
    // too small for Planetoid: an empty part, named with the options that set the sizes
    let tiny = tmp.put("tiny.txt", support::EDGE_LIST.as_bytes());
    let tiny_labels = tmp.put("tiny.labels", support::EDGE_LABELS.as_bytes());
    let err =
        load_edge_list(&tiny, None, Some(&tiny_labels), &EdgeListOptions::default()).unwrap_err();
    assert!(matches!(err, Error::Dataset { .. }), "{err}");
    assert!(err.to_string().contains("--train-per-class"), "{err}");
    // without labels there is nothing to split
    let bare = load_edge_list(&tiny, None, None, &EdgeListOptions::default()).unwrap();
    assert_eq!(bare.split.name, "none");
}

#[test]
fn load_detects_every_format() {
    let lo = LoadOptions {
        random_split: small_split(),
        ..LoadOptions::default()
    };
    // OGB folder
    let fx = Fixture::valid(true);
    check_tiny(&load(&fx.dir, &lo).unwrap());
    // gnn-benchmark and scipy .npz
    check_reference_graph(&load(&npz_file("tiny_benchmark.npz"), &lo).unwrap());
    let labelled = LoadOptions {
        labels: Some(npz_file("labels.npy")),
        ..lo.clone()
    };
    let s = load(&npz_file("scipy_adj_coo.npz"), &labelled).unwrap();
    check_reference_graph(&s);
    assert_eq!((s.n_classes, s.features.n_cols()), (3, 0));
    // scipy .npz with features and labels
    let with = LoadOptions {
        features: Some(npz_file("feat_dense.npy")),
        labels: Some(npz_file("labels.npy")),
        ..lo.clone()
    };
    let t = load(&npz_file("scipy_adj_csr.npz"), &with).unwrap();
    assert_eq!(t.features.to_dense(), reference_features());
    // feature files for a format that carries its own are an error
    let err = load(&npz_file("tiny_benchmark.npz"), &with).unwrap_err();
    assert!(matches!(err, Error::Dataset { .. }), "{err}");
    let err = load(&fx.dir, &with).unwrap_err();
    assert!(matches!(err, Error::Dataset { .. }), "{err}");
    // edge lists under every extension
    let tmp = support::TempDir::new("ogb-loader-detect");
    for name in ["g.txt", "g.csv", "g.tsv", "g.edges", "g.el", "G.TXT"] {
        let p = tmp.put(name, support::EDGE_LIST.as_bytes());
        let d = load(&p, &lo).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!((d.graph.n_nodes(), d.graph.n_edges()), (6, 5), "{name}");
    }
    // the folder of an OGB dataset's raw files is not a dataset
    let err = load(&fx.dir.join("raw"), &lo).unwrap_err();
    assert!(matches!(err, Error::Dataset { .. }), "{err}");
}
