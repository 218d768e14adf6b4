//! Out-of-core propagation (issue 40): the kept rows of Â^K X and of [X, ÂX, …, Â^K X]
//! computed from a store in column tiles are the in-memory path's, bit for bit, for any
//! `--memory-limit`, normalisation, direction and feature dtype; a store damaged in any array
//! it reads, or whose undirected pattern is not symmetric, is an `Error::Store` naming the
//! array; a limit too small for one column is refused naming what it needs.

use sparse_gcn::data::store::{
    propagate, propagate_in_memory, write_store, FeatureDtype, KeepRows, PropagateOptions,
    Propagated, Store,
};
use sparse_gcn::data::{Dataset, Features, Mask, Split};
use sparse_gcn::graph::{Direction, Graph, Norm};
use sparse_gcn::Error;

use super::store::{dense_data, forge, scratch, with_header};

/// Cora-like's graph and split with its first 40 feature columns, dense (fewer columns keep
/// one-column tiles quick).
fn narrow(seed: u64) -> Dataset {
    let mut d = dense_data(seed);
    let x = d
        .features
        .to_dense()
        .slice(ndarray::s![.., ..40])
        .to_owned();
    d.features = Features::dense(x);
    d
}

fn opts(k: usize, every_hop: bool, norm: Norm, memory_limit: u64) -> PropagateOptions {
    PropagateOptions {
        k,
        every_hop,
        norm,
        row_normalize: None,
        keep: KeepRows::Split,
        memory_limit,
    }
}

fn bits(p: &Propagated) -> Vec<u32> {
    p.x.iter().map(|v| v.to_bits()).collect()
}

/// Propagates the store in `dir` in memory and out of core with limits giving one tile,
/// several, and one column each, and compares.
fn same_bits(dir: &std::path::Path, o: &PropagateOptions) -> usize {
    let store = Store::open(dir).unwrap();
    let reference = propagate_in_memory(&store.dataset(None).unwrap(), o).unwrap();
    let n = store.header().n_nodes as usize;
    let d = store.header().n_features as usize;
    let hops = if o.every_hop { o.k + 1 } else { 1 };
    let fixed = sparse_gcn::data::store::propagate::plan_bytes(n, d, reference.rows.len(), hops, 0);
    let mut tiles_seen = Vec::new();
    for w in [d, d / 3 + 1, 7, 1] {
        let limit = fixed + 8 * (n * w) as u64;
        let p = propagate(
            &store,
            &PropagateOptions {
                memory_limit: limit,
                ..o.clone()
            },
            &|_| {},
        )
        .unwrap();
        assert_eq!(p.tile_cols, d.div_ceil(d.div_ceil(w)), "w {w}");
        assert!(p.planned_bytes <= limit);
        assert_eq!(p.rows, reference.rows);
        assert_eq!(p.row_normalized, reference.row_normalized);
        assert_eq!(bits(&p), bits(&reference), "{o:?}, {} tiles", p.tiles);
        tiles_seen.push(p.tiles);
    }
    assert_eq!(tiles_seen[0], 1);
    assert!(tiles_seen[3] == d);
    reference.rows.len()
}

#[test]
fn out_of_core_propagation_gives_the_in_memory_bits() {
    let dir = scratch("prop-bits");
    let d = narrow(5);
    for dtype in [FeatureDtype::F32, FeatureDtype::F16] {
        let st = dir.join(format!("{dtype:?}"));
        write_store(&d, None, &st, dtype).unwrap();
        for (k, every_hop, norm) in [
            (1, false, Norm::Symmetric),
            (3, false, Norm::Symmetric),
            (2, true, Norm::Symmetric),
            (2, false, Norm::Row),
        ] {
            let kept = same_bits(&st, &opts(k, every_hop, norm, 0));
            assert_eq!(kept, 1640, "cora-like's split: 140 + 500 + 1000");
        }
        // Row normalisation forced on, and every row kept.
        let o = PropagateOptions {
            row_normalize: Some(true),
            keep: KeepRows::All,
            ..opts(2, true, Norm::Symmetric, 0)
        };
        assert_eq!(same_bits(&st, &o), d.graph.n_nodes());
    }
    // Cora-like's bag-of-words features are non-negative: `auto` row-normalises them.
    let st = dir.join("F32");
    let p = propagate(
        &Store::open(&st).unwrap(),
        &opts(2, false, Norm::Symmetric, 1 << 30),
        &|_| {},
    )
    .unwrap();
    assert!(p.row_normalized);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A directed graph with a self-loop, an isolated node and a node without out-edges, signed
/// dense features and a split leaving nodes out.
fn directed() -> Dataset {
    let n = 300;
    let mut edges = Vec::new();
    for i in 0..n as u32 {
        for s in [1u32, 7, 31] {
            if i % 11 != 3 && i != 150 {
                edges.push((i, (i * s + 5) % n as u32));
            }
        }
    }
    edges.push((9, 9));
    edges.retain(|&(a, b)| a != 150 && b != 150);
    let graph = Graph::try_from_edges(n, &edges, Direction::Directed).unwrap();
    let x = ndarray::Array2::from_shape_fn((n, 13), |(i, j)| ((i * 31 + j * 7) % 17) as f32 - 8.5);
    let labels = (0..n as u32).map(|i| i % 4).collect();
    let ids = |r: std::ops::Range<u32>| Mask::try_from_indices(r.collect(), n).unwrap();
    let split = Split {
        name: "custom".into(),
        train: ids(0..40),
        valid: ids(100..140),
        test: ids(200..260),
    };
    Dataset::try_new(
        "directed".into(),
        graph,
        Features::dense(x),
        labels,
        4,
        split,
    )
    .unwrap()
}

#[test]
fn a_directed_store_propagates_its_rows() {
    let dir = scratch("prop-directed");
    let st = dir.join("s");
    write_store(&directed(), None, &st, FeatureDtype::F32).unwrap();
    for norm in [Norm::Symmetric, Norm::Row] {
        assert_eq!(same_bits(&st, &opts(3, true, norm, 0)), 140);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn store_err(dir: &std::path::Path, o: &PropagateOptions) -> (String, String) {
    match propagate(&Store::open(dir).unwrap(), o, &|_| {}) {
        Err(Error::Store { array, msg, .. }) => (array, msg),
        other => panic!("expected a store error, got {other:?}"),
    }
}

#[test]
fn a_damaged_store_is_refused_naming_the_array() {
    let dir = scratch("prop-damaged");
    let d = narrow(2);
    let st = dir.join("s");
    write_store(&d, None, &st, FeatureDtype::F32).unwrap();
    let o = opts(2, false, Norm::Symmetric, 1 << 30);
    let flip = |name: &str, file: &str, at: usize| {
        let bad = dir.join(name);
        with_header(&st, &bad, |_| {});
        let p = bad.join(file);
        let mut b = std::fs::read(&p).unwrap();
        b[at] ^= 0x10;
        std::fs::write(&p, &b).unwrap();
        bad
    };
    for (array, file) in [
        ("indptr", "indptr.u64"),
        ("indices", "indices.u32"),
        ("features", "features.f32"),
    ] {
        let bad = flip(array, file, 8 * 17 + 1);
        let (got, msg) = store_err(&bad, &o);
        assert_eq!(got, array, "{msg}");
    }
    // Forged with matching checksums: the pattern's own checks.
    let n = d.graph.n_nodes();
    let first = d.graph.neighbors(0).to_vec();
    let cases: [(&str, usize, Vec<u8>); 3] = [
        // A column id past the last node.
        ("ids", 4 * 3, (n as u32 + 5).to_le_bytes().to_vec()),
        // Row 0's first id made larger than its second.
        ("order", 0, (first[1] + 1).to_le_bytes().to_vec()),
        // An entry without its mirror: row 0's last id moved to another node.
        (
            "mirror",
            4 * (first.len() - 1),
            (first[first.len() - 1] + 1).to_le_bytes().to_vec(),
        ),
    ];
    for (name, at, bytes) in &cases {
        let bad = dir.join(format!("forged-{name}"));
        with_header(&st, &bad, |_| {});
        forge(&bad, "indices", "indices.u32", *at, bytes);
        let (array, msg) = store_err(&bad, &o);
        assert_eq!(array, "indices", "{name}: {msg}");
        let want = match *name {
            "ids" => "of 2708",
            "order" => "not strictly increasing",
            _ => "without (j, i)",
        };
        assert!(msg.contains(want), "{name}: {msg}");
    }
    // An offset beyond the entries.
    let bad = dir.join("forged-offset");
    with_header(&st, &bad, |_| {});
    forge(&bad, "indptr", "indptr.u64", 8 * 5, &u64::MAX.to_le_bytes());
    assert_eq!(store_err(&bad, &o).0, "indptr");
    // A directed store's id changed to another in range and in order, its checksum left: only
    // the checksum can tell.
    let dd = directed();
    let dst = dir.join("directed-src");
    write_store(&dd, None, &dst, FeatureDtype::F32).unwrap();
    let (i, k) = (0..dd.graph.n_nodes())
        .find_map(|i| {
            let row = dd.graph.neighbors(i);
            (0..row.len().saturating_sub(1))
                .find(|&k| row[k] + 1 < row[k + 1] && row[k] + 1 != i as u32)
                .map(|k| (i, k))
        })
        .unwrap();
    let at = 4 * (dd.graph.indptr()[i] + k);
    let moved = dir.join("moved");
    with_header(&dst, &moved, |_| {});
    let p = moved.join("indices.u32");
    let mut b = std::fs::read(&p).unwrap();
    b[at..at + 4].copy_from_slice(&(dd.graph.neighbors(i)[k] + 1).to_le_bytes());
    std::fs::write(&p, &b).unwrap();
    let (array, msg) = store_err(&moved, &o);
    assert_eq!(array, "indices");
    assert!(msg.contains("checksum"), "{msg}");
    // A directed pattern declared undirected.
    let lied = dir.join("lied");
    with_header(&dst, &lied, |h| h["directed"] = false.into());
    let (array, msg) = store_err(&lied, &o);
    assert_eq!(array, "indices");
    assert!(msg.contains("without (j, i)"), "{msg}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_limit_below_one_column_is_refused() {
    let dir = scratch("prop-limit");
    let st = dir.join("s");
    write_store(&narrow(1), None, &st, FeatureDtype::F32).unwrap();
    let store = Store::open(&st).unwrap();
    match propagate(&store, &opts(2, false, Norm::Symmetric, 1 << 20), &|_| {}) {
        Err(Error::TooLarge {
            budget,
            needed_bytes,
            ..
        }) => {
            assert_eq!(budget, "--memory-limit");
            assert!(needed_bytes > 1 << 20);
            // What it names is enough.
            let p = propagate(
                &store,
                &opts(2, false, Norm::Symmetric, needed_bytes),
                &|_| {},
            );
            assert_eq!(p.unwrap().tiles, 40, "one column per tile");
        }
        other => panic!("{other:?}"),
    }
    // Sparse features are refused naming them.
    let sp = dir.join("sparse");
    let mut d = dense_data(1);
    d.features = d.features.into_sparse_if(1.0);
    write_store(&d, None, &sp, FeatureDtype::F32).unwrap();
    let (array, _) = store_err(&sp, &opts(2, false, Norm::Symmetric, 1 << 30));
    assert_eq!(array, "features");
    let _ = std::fs::remove_dir_all(&dir);
}
