//! The binary graph store (issue 40): a dataset written by `write_store` and opened by
//! `Store::open` is the same dataset, bit for bit, whatever its features' layout; a truncated,
//! mismatched or tampered store is an `Error::Store` naming the array, never a panic nor a
//! wrong dataset.

use std::path::{Path, PathBuf};

use sparse_gcn::data::content::ContentHash;
use sparse_gcn::data::io::{load, LoadOptions};
use sparse_gcn::data::store::{header_crc, write_store, FeatureDtype, Store, HEADER};
use sparse_gcn::data::synthetic::Preset;
use sparse_gcn::data::Dataset;
use sparse_gcn::graph::Direction;
use sparse_gcn::Error;

pub(super) fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sparse-gcn-store-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Cora-like with its features stored sparse (as the CLI loads bag-of-words features).
fn sparse_data() -> Dataset {
    let mut d = Preset::CoraLike.generate(3).unwrap();
    d.features = d.features.into_sparse_if(1.0);
    assert!(d.features.is_sparse());
    d
}

/// Cora-like with its features stored dense.
pub(super) fn dense_data(seed: u64) -> Dataset {
    let mut d = Preset::CoraLike.generate(seed).unwrap();
    d.features = sparse_gcn::data::Features::dense(d.features.to_dense());
    d
}

fn same(a: &Dataset, b: &Dataset) {
    assert_eq!(a.name, b.name);
    assert_eq!(a.graph, b.graph);
    assert_eq!(a.graph.stats(), b.graph.stats());
    assert_eq!(a.features.is_sparse(), b.features.is_sparse());
    assert_eq!(a.features.to_dense(), b.features.to_dense());
    assert_eq!(a.labels, b.labels);
    assert_eq!(a.n_classes, b.n_classes);
    assert_eq!(a.split.name, b.split.name);
    for (x, y) in [
        (&a.split.train, &b.split.train),
        (&a.split.valid, &b.split.valid),
        (&a.split.test, &b.split.test),
    ] {
        assert_eq!(x.indices(), y.indices());
    }
    assert_eq!(ContentHash::of(a), ContentHash::of(b));
}

#[test]
fn a_store_gives_back_its_dataset() {
    let dir = scratch("roundtrip");
    let dense = dense_data(1);
    for (name, d) in [("dense", dense), ("sparse", sparse_data())] {
        let out = dir.join(name);
        let s = write_store(&d, None, &out, FeatureDtype::F32).unwrap();
        assert_eq!(s.header.sparse_features, d.features.is_sparse());
        let store = Store::open(&out).unwrap();
        store.verify().unwrap();
        same(&d, &store.dataset(None).unwrap());
        // Through `load`, as `--data` reads it: the loaders' sparsity rule applies to dense
        // features, as it does to a text folder's.
        let back = load(&out, &LoadOptions::default()).unwrap();
        let mut want = d.clone();
        want.features = want.features.into_sparse_if(0.1);
        same(&want, &back);
        // No partial folder left beside it.
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(names.iter().all(|n| !n.contains("partial")), "{names:?}");
    }
    // A directed graph stays directed; an empty split part is kept empty.
    let mut d = Preset::CoraLike.generate(2).unwrap();
    d.graph = sparse_gcn::graph::Graph::try_from_edges(
        d.graph.n_nodes(),
        &[(0, 1), (1, 2), (2, 2)],
        Direction::Directed,
    )
    .unwrap();
    let out = dir.join("directed");
    write_store(&d, None, &out, FeatureDtype::F32).unwrap();
    let back = Store::open(&out).unwrap().dataset(None).unwrap();
    assert!(back.graph.is_directed());
    same(&d, &back);
}

#[test]
fn an_ordered_store_reads_back_in_the_input_order() {
    use sparse_gcn::data::io::load_ordered;
    use sparse_gcn::data::store::{OrderInfo, StoredOrder};
    use sparse_gcn::graph::Permutation;
    let dir = scratch("ordered");
    let d = sparse_data();
    let perm = Permutation::random(d.graph.n_nodes(), 7);
    let relabelled = d.clone().relabel(&perm).unwrap();
    let order = StoredOrder {
        info: OrderInfo {
            asked: "random:7".into(),
            applied: "random:7".into(),
        },
        perm: perm.clone(),
    };
    let out = dir.join("s");
    write_store(&relabelled, Some(&order), &out, FeatureDtype::F32).unwrap();
    // `load` gives the input order back; `load_ordered` the stored order, with it.
    same(&d, &load(&out, &LoadOptions::default()).unwrap());
    let (stored, o) = load_ordered(&out, &LoadOptions::default()).unwrap();
    same(&relabelled, &stored);
    assert_eq!(o.unwrap(), order);
    // An order array that is not a permutation (its checksum forged to match).
    let case = dir.join("case");
    with_header(&out, &case, |_| {});
    forge(&case, "order", "order.u32", 0, &[0, 0, 0, 0, 0, 0, 0, 0]);
    let e = load(&case, &LoadOptions::default()).unwrap_err();
    names_array(&e, "order", "");
}

#[test]
fn half_precision_features_round_to_nearest() {
    let dir = scratch("f16");
    for d in [dense_data(1), sparse_data()] {
        let out = dir.join(if d.features.is_sparse() { "s" } else { "d" });
        write_store(&d, None, &out, FeatureDtype::F16).unwrap();
        let back = Store::open(&out).unwrap().dataset(None).unwrap();
        assert_eq!(back.graph, d.graph);
        let (a, b) = (d.features.to_dense(), back.features.to_dense());
        for (&x, &y) in a.iter().zip(b.iter()) {
            assert_eq!(y, half::f16::from_f32(x).to_f32(), "{x} read back as {y}");
        }
        let (file, values) = if d.features.is_sparse() {
            ("feature_values.f16", d.features.nnz())
        } else {
            ("features.f16", d.features.n_rows() * d.features.n_cols())
        };
        let bytes = std::fs::metadata(out.join(file)).unwrap().len();
        assert_eq!(bytes, 2 * values as u64);
    }
}

/// The error of opening and reading the store in `dir`.
fn error_of(dir: &Path) -> Error {
    match Store::open(dir).and_then(|s| s.dataset(None)) {
        Ok(_) => panic!("{} opened", dir.display()),
        Err(e) => e,
    }
}

fn names_array(e: &Error, array: &str, words: &str) {
    match e {
        Error::Store { array: a, msg, .. } => {
            assert_eq!(a, array, "{e}");
            assert!(msg.contains(words), "{e}");
        }
        _ => panic!("not a store error: {e}"),
    }
}

/// A copy of the store `src` in `dst`, with `edit` applied to its header (as JSON).
pub(super) fn with_header(src: &Path, dst: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let _ = std::fs::remove_dir_all(dst);
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
    }
    let mut h: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dst.join(HEADER)).unwrap()).unwrap();
    edit(&mut h);
    // Its own checksum made to match, so that the checks behind it are reached.
    h["header_crc32"] = header_crc(&h).into();
    std::fs::write(dst.join(HEADER), serde_json::to_vec(&h).unwrap()).unwrap();
}

/// Overwrites bytes of `file` at `at` and sets its CRC in the header to match, so that only
/// the contents' own checks can catch it.
pub(super) fn forge(dir: &Path, array: &str, file: &str, at: usize, bytes: &[u8]) {
    let p = dir.join(file);
    let mut b = std::fs::read(&p).unwrap();
    b[at..at + bytes.len()].copy_from_slice(bytes);
    std::fs::write(&p, &b).unwrap();
    let crc = crc32fast::hash(&b);
    let hp = dir.join(HEADER);
    let mut h: serde_json::Value = serde_json::from_slice(&std::fs::read(&hp).unwrap()).unwrap();
    h["arrays"][array]["crc32"] = crc.into();
    h["header_crc32"] = header_crc(&h).into();
    std::fs::write(&hp, serde_json::to_vec(&h).unwrap()).unwrap();
}

#[test]
fn a_damaged_store_names_the_array() {
    let dir = scratch("damaged");
    let good = dir.join("good");
    write_store(&sparse_data(), None, &good, FeatureDtype::F32).unwrap();
    let case = dir.join("case");
    let copy = |edit: &dyn Fn(&mut serde_json::Value)| with_header(&good, &case, edit);

    // Truncated: the size check at open, before anything is read.
    copy(&|_| {});
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(case.join("indices.u32"))
        .unwrap();
    f.set_len(100).unwrap();
    names_array(&error_of(&case), "indices", "truncated");
    // Tampered: one byte flipped, caught by its checksum (verify and dataset).
    copy(&|_| {});
    let p = case.join("feature_values.f32");
    let mut b = std::fs::read(&p).unwrap();
    b[5] ^= 0x40;
    std::fs::write(&p, b).unwrap();
    names_array(&error_of(&case), "feature_values", "checksum");
    let store = Store::open(&case).unwrap();
    names_array(&store.verify().unwrap_err(), "feature_values", "checksum");
    // The header: another version, another format, not JSON, a missing, extra or renamed
    // array, a wrong dtype or length.
    // A header past 1 MiB is refused before it is parsed, even when it would parse.
    copy(&|_| {});
    let mut text = std::fs::read(case.join(HEADER)).unwrap();
    text.extend(std::iter::repeat_n(b' ', 1 << 20));
    std::fs::write(case.join(HEADER), text).unwrap();
    names_array(&error_of(&case), HEADER, "bytes: not a store header");
    // Exactly 1 MiB is still read.
    copy(&|_| {});
    let mut text = std::fs::read(case.join(HEADER)).unwrap();
    text.resize(1 << 20, b' ');
    std::fs::write(case.join(HEADER), text).unwrap();
    assert!(Store::open(&case).is_ok());
    // Node ids are u32: 2^32 nodes are refused, 2^32 − 1 get as far as the arrays' lengths.
    copy(&|h| h["n_nodes"] = (1u64 << 32).into());
    names_array(&error_of(&case), HEADER, "at most 2^32");
    copy(&|h| h["n_nodes"] = u64::from(u32::MAX).into());
    names_array(&error_of(&case), "indptr", "elements in the header");
    // An edited header whose own checksum was not updated: refused, whatever the edit.
    copy(&|_| {});
    let text = std::fs::read_to_string(case.join(HEADER)).unwrap();
    let flipped = text.replacen("\"directed\":false", "\"directed\":true", 1);
    assert_ne!(text, flipped);
    std::fs::write(case.join(HEADER), flipped).unwrap();
    names_array(&error_of(&case), HEADER, "edited or damaged");
    // Counts past the loaders' limits.
    copy(&|h| h["n_classes"] = (1u64 << 40).into());
    names_array(&error_of(&case), HEADER, "n_classes");
    copy(&|h| h["n_features"] = u64::MAX.into());
    names_array(&error_of(&case), HEADER, "n_features");
    // A FIFO, or a folder, where an array should be: refused, never waited on.
    copy(&|_| {});
    std::fs::remove_file(case.join("labels.u32")).unwrap();
    std::fs::create_dir(case.join("labels.u32")).unwrap();
    names_array(&error_of(&case), "labels", "not a regular file");
    copy(&|h| h["version"] = 2.into());
    names_array(&error_of(&case), HEADER, "version 2");
    copy(&|h| h["format"] = "npz".into());
    names_array(&error_of(&case), HEADER, "format");
    copy(&|_| {});
    std::fs::write(case.join(HEADER), b"{ not json").unwrap();
    names_array(&error_of(&case), HEADER, "not a store header");
    copy(&|h| {
        h["arrays"].as_object_mut().unwrap().remove("labels");
    });
    names_array(&error_of(&case), "labels", "missing");
    copy(&|h| h["arrays"]["extra"] = h["arrays"]["labels"].clone());
    names_array(&error_of(&case), "extra", "not an array");
    copy(&|h| h["arrays"]["labels"]["file"] = "../labels.u32".into());
    names_array(&error_of(&case), "labels", "expected \"labels.u32\"");
    copy(&|h| h["arrays"]["indices"]["dtype"] = "u64".into());
    names_array(&error_of(&case), "indices", "dtype u64");
    copy(&|h| h["arrays"]["feature_values"]["dtype"] = "u32".into());
    names_array(&error_of(&case), "feature_values", "expected f32 or f16");
    copy(&|h| h["arrays"]["degree"]["len"] = 7.into());
    names_array(&error_of(&case), "degree", "elements in the header");
    copy(&|h| h["sparse_features"] = false.into());
    names_array(&error_of(&case), "feature_indices", "not an array");
    copy(&|h| {
        h["sparse_features"] = false.into();
        h["n_nodes"] = u64::from(u32::MAX).into();
        h["n_features"] = (1u64 << 24).into();
    });
    names_array(&error_of(&case), "feature_indices", "not an array");
    // Contents whose checksums were forged to match: the pattern checks catch them.
    copy(&|_| {});
    forge(&case, "indices", "indices.u32", 0, &u32::MAX.to_le_bytes());
    names_array(&error_of(&case), "indptr, indices", "out of range");
    copy(&|_| {});
    forge(&case, "indptr", "indptr.u64", 8, &3u64.to_le_bytes());
    let e = error_of(&case);
    assert!(matches!(e, Error::Store { .. }), "{e}");
    copy(&|_| {});
    forge(&case, "degree", "degree.u32", 4, &99u32.to_le_bytes());
    names_array(&error_of(&case), "degree", "node 1");
    copy(&|_| {});
    let n = Store::open(&good).unwrap().header().n_nodes as u32;
    forge(&case, "train", "train.u32", 0, &n.to_le_bytes());
    names_array(&error_of(&case), "train", "");
    copy(&|_| {});
    forge(
        &case,
        "indptr",
        "indptr.u64",
        8 * n as usize,
        &1u64.to_le_bytes(),
    );
    names_array(&error_of(&case), "indptr", "last offset");
}

#[test]
fn a_one_way_graph_is_not_read_as_undirected() {
    let dir = scratch("one-way");
    let mut d = sparse_data();
    d.graph = sparse_gcn::graph::Graph::try_from_edges(
        d.graph.n_nodes(),
        &[(0, 1), (1, 2), (2, 0)],
        Direction::Directed,
    )
    .unwrap();
    let out = dir.join("directed");
    write_store(&d, None, &out, FeatureDtype::F32).unwrap();
    assert!(Store::open(&out).unwrap().dataset(None).is_ok());
    // The header says undirected (its checksum made to match): the pattern is not symmetric.
    let case = dir.join("case");
    with_header(&out, &case, |h| h["directed"] = false.into());
    names_array(&error_of(&case), "indptr, indices", "(0, 1) without (1, 0)");
}

#[test]
fn a_store_is_never_written_over_other_files() {
    let dir = scratch("over");
    let d = Preset::CoraLike.generate(1).unwrap();
    // A file, a non-empty folder: refused and left as they were.
    let file = dir.join("file");
    std::fs::write(&file, b"keep").unwrap();
    assert!(matches!(
        write_store(&d, None, &file, FeatureDtype::F32),
        Err(Error::Dataset { .. })
    ));
    assert_eq!(std::fs::read(&file).unwrap(), b"keep");
    let full = dir.join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("x"), b"keep").unwrap();
    assert!(write_store(&d, None, &full, FeatureDtype::F32).is_err());
    assert_eq!(std::fs::read(full.join("x")).unwrap(), b"keep");
    // An empty folder is filled; a folder whose parent is missing fails without a trace.
    let empty = dir.join("empty");
    std::fs::create_dir(&empty).unwrap();
    write_store(&d, None, &empty, FeatureDtype::F32).unwrap();
    assert!(Store::open(&empty).is_ok());
    let orphan = dir.join("missing").join("store");
    assert!(matches!(
        write_store(&d, None, &orphan, FeatureDtype::F32),
        Err(Error::Io { .. })
    ));
    assert!(!dir.join("missing").exists());
}

#[test]
fn load_refuses_what_a_store_cannot_honour() {
    let dir = scratch("options");
    let out = dir.join("s");
    write_store(
        &Preset::CoraLike.generate(1).unwrap(),
        None,
        &out,
        FeatureDtype::F32,
    )
    .unwrap();
    let refused = |o: LoadOptions, word: &str| match load(&out, &o) {
        Err(Error::Dataset { msg, .. }) => assert!(msg.contains(word), "{msg}"),
        r => panic!("{:?}", r.map(|d| d.name)),
    };
    refused(
        LoadOptions {
            labels: Some(dir.join("labels.txt")),
            ..LoadOptions::default()
        },
        "carries its own",
    );
    refused(
        LoadOptions {
            split: Some("other".into()),
            ..LoadOptions::default()
        },
        "holds split",
    );
    refused(
        LoadOptions {
            direction: Direction::Directed,
            ..LoadOptions::default()
        },
        "undirected",
    );
    let h = Store::open(&out).unwrap().header().split.clone();
    let same = load(
        &out,
        &LoadOptions {
            split: Some(h),
            ..LoadOptions::default()
        },
    );
    assert!(same.is_ok());
}

#[test]
fn a_store_without_edges_reads_back() {
    // No edges (a propagated store's): an array of no element has no map to cast.
    let dir = scratch("empty-arrays");
    let mut d = dense_data(4);
    let n = d.graph.n_nodes();
    d.graph = sparse_gcn::graph::Graph::try_from_edges(n, &[], Direction::Undirected).unwrap();
    let st = dir.join("s");
    write_store(&d, None, &st, FeatureDtype::F32).unwrap();
    same(&d, &Store::open(&st).unwrap().dataset(None).unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}

/// What a rank under mpirun reads of a store: the skeleton in the input's order (a store held
/// in another order relabelled back) and any rows of the dense features (f32 or f16), the
/// same as the whole dataset's; a modified feature file is an error naming the array.
#[test]
fn a_skeleton_and_feature_rows_are_the_dataset_s() {
    use sparse_gcn::data::store::{load_skeleton, OrderInfo, StoredOrder};
    use sparse_gcn::graph::Permutation;
    let dir = scratch("skeleton");
    let d = dense_data(4);
    let n = d.graph.n_nodes();
    let perm = Permutation::random(n, 3);
    let order = StoredOrder {
        info: OrderInfo {
            asked: "random:3".into(),
            applied: "random:3".into(),
        },
        perm: perm.clone(),
    };
    let relabelled = d.clone().relabel(&perm).unwrap();
    for (k, (data, o, dtype)) in [
        (&d, None, FeatureDtype::F32),
        (&relabelled, Some(&order), FeatureDtype::F16),
    ]
    .into_iter()
    .enumerate()
    {
        let out = dir.join(format!("s{k}"));
        write_store(data, o, &out, dtype).unwrap();
        let whole = load(&out, &LoadOptions::default()).unwrap();
        let (s, features) = load_skeleton(&out, &LoadOptions::default()).unwrap();
        assert_eq!(s.graph, whole.graph);
        assert_eq!(s.labels, whole.labels);
        assert_eq!(s.split.test.indices(), whole.split.test.indices());
        let ids: Vec<u32> = Permutation::random(n, 9).new_to_old()[..n / 3].to_vec();
        let x = whole.features.to_dense();
        let rows = features.rows(&ids).unwrap();
        for (r, &v) in ids.iter().enumerate() {
            assert_eq!(rows.row(r), x.row(v as usize), "{dtype:?} node {v}");
        }
        assert!(matches!(
            features.rows(&[n as u32]),
            Err(Error::Mismatch { .. })
        ));
    }
    // A feature value changed, its checksum not.
    let out = dir.join("s0");
    let f = out.join("features.f32");
    let mut b = std::fs::read(&f).unwrap();
    b[40] ^= 1;
    std::fs::write(&f, &b).unwrap();
    let e = load_skeleton(&out, &LoadOptions::default()).unwrap_err();
    names_array(&e, "features", "checksum");
}
