//! Random byte mutations of valid inputs never make a loader panic: every loader returns `Ok`
//! (a dataset that passes [`Dataset::validate`]) or an `Err`, for ~200 mutated inputs each.
//! A panic is caught with `catch_unwind` and reported with the mutated input.
//!
//! Mutations: flip bits of a byte, insert a byte (biased towards digits, separators, newlines,
//! signs), delete a byte, truncate, duplicate a line; one to four per input.

use crate::support;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use sparse_gcn::data::io::{
    load, load_edge_list, load_npz_benchmark, load_ogb, load_scipy_npz, EdgeListOptions,
    LoadOptions, NpzOptions, OgbOptions, RandomSplit, SplitRule,
};
use sparse_gcn::data::Dataset;
use support::TempDir;

/// A node cap far below the defaults, so that a mutated id or shape cannot make a case
/// allocate much.
const MAX_NODES: usize = 100_000;

#[derive(Debug, Clone)]
enum Mutation {
    Flip { at: usize, mask: u8 },
    Insert { at: usize, byte: u8 },
    Delete { at: usize },
    Truncate { at: usize },
    DuplicateLine { at: usize },
}

fn interesting_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        b'0'..=b'9',
        prop::sample::select(&b",\n \t-+.e#%\r"[..]),
        any::<u8>(),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let at = any::<usize>();
    prop_oneof![
        (at, 1..=255u8).prop_map(|(at, mask)| Mutation::Flip { at, mask }),
        (at, interesting_byte()).prop_map(|(at, byte)| Mutation::Insert { at, byte }),
        at.prop_map(|at| Mutation::Delete { at }),
        at.prop_map(|at| Mutation::Truncate { at }),
        at.prop_map(|at| Mutation::DuplicateLine { at }),
    ]
}

fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    prop::collection::vec(mutation(), 1..=4)
}

/// Mutations that keep the length (so that an `.npy` header still matches its data).
fn flips() -> impl Strategy<Value = Vec<Mutation>> {
    prop::collection::vec(
        (any::<usize>(), 1..=255u8).prop_map(|(at, mask)| Mutation::Flip { at, mask }),
        1..=3,
    )
}

fn apply(bytes: &mut Vec<u8>, muts: &[Mutation]) {
    for m in muts {
        let n = bytes.len();
        match *m {
            Mutation::Flip { at, mask } if n > 0 => bytes[at % n] ^= mask,
            Mutation::Insert { at, byte } => bytes.insert(at % (n + 1), byte),
            Mutation::Delete { at } if n > 0 => {
                bytes.remove(at % n);
            }
            Mutation::Truncate { at } => bytes.truncate(at % (n + 1)),
            Mutation::DuplicateLine { at } if n > 0 => {
                let i = at % n;
                let start = bytes[..i]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |k| k + 1);
                let end = bytes[i..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(n, |k| i + k + 1);
                let line = bytes[start..end].to_vec();
                bytes.splice(end..end, line);
            }
            _ => {}
        }
    }
}

/// Runs `f`, turning a panic into a test failure that shows `input`, and checking that an `Ok`
/// dataset is valid.
fn no_panic(
    what: &str,
    input: &[u8],
    f: impl FnOnce() -> sparse_gcn::Result<Dataset>,
) -> Result<(), TestCaseError> {
    let shown = || {
        format!(
            "{what}: input of {} bytes: b\"{}\"",
            input.len(),
            input.escape_ascii()
        )
    };
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(d)) => {
            if let Err(e) = d.validate() {
                return Err(TestCaseError::fail(format!(
                    "loaded an invalid dataset ({e}); {}",
                    shown()
                )));
            }
            Ok(())
        }
        Ok(Err(_)) => Ok(()),
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(TestCaseError::fail(format!("panicked: {msg}; {}", shown())))
        }
    }
}

fn split() -> RandomSplit {
    RandomSplit {
        rule: SplitRule::Fractions {
            train: 0.5,
            valid: 0.25,
            test: 0.25,
        },
        seed: 1,
    }
}

fn edge_opts() -> EdgeListOptions {
    EdgeListOptions {
        split: split(),
        max_nodes: MAX_NODES,
        ..EdgeListOptions::default()
    }
}

fn npz_opts() -> NpzOptions {
    NpzOptions {
        split: split(),
        max_nodes: MAX_NODES,
        ..NpzOptions::default()
    }
}

/// 200 cases per loader; `SPARSE_GCN_FUZZ_CASES=N` for a longer run.
fn config() -> ProptestConfig {
    let cases = std::env::var("SPARSE_GCN_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

/// A valid OGB folder with file `which` mutated; gzipped files when `gz` (mutating the
/// compressed bytes, or the text before compressing when `inside`).
fn ogb_case(gz: bool, which: usize, inside: bool, muts: &[Mutation]) -> Result<(), TestCaseError> {
    let tmp = TempDir::new("io-fuzz-ogb");
    let dir = support::write_ogb(&tmp, |_| gz);
    let (stem, content) = support::OGB_FILES[which % support::OGB_FILES.len()];
    let mut bytes = if gz && !inside {
        support::gzip(content.as_bytes())
    } else {
        content.as_bytes().to_vec()
    };
    apply(&mut bytes, muts);
    let written = if gz && inside {
        support::gzip(&bytes)
    } else {
        bytes.clone()
    };
    support::replace_ogb_file(&dir, stem, &written, gz);
    no_panic(stem, &bytes, || load_ogb(&dir, &OgbOptions::default()))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn ogb_csv(which in 0usize..8, muts in mutations()) {
        ogb_case(false, which, false, &muts)?;
    }

    #[test]
    fn ogb_csv_gz(which in 0usize..8, inside in any::<bool>(), muts in mutations()) {
        ogb_case(true, which, inside, &muts)?;
    }

    #[test]
    fn edge_list(gz in any::<bool>(), muts in mutations()) {
        let tmp = TempDir::new("io-fuzz-el");
        let mut bytes = support::EDGE_LIST.as_bytes().to_vec();
        apply(&mut bytes, &muts);
        let edges = if gz {
            tmp.put("g.txt.gz", &support::gzip(&bytes))
        } else {
            tmp.put("g.txt", &bytes)
        };
        let feats = tmp.put("g.feat", support::EDGE_FEATS.as_bytes());
        let labels = tmp.put("g.labels", support::EDGE_LABELS.as_bytes());
        no_panic("edges", &bytes, || {
            load_edge_list(&edges, Some(&feats), Some(&labels), &edge_opts())
        })?;
        // also through `load`, without features or labels
        let o = LoadOptions { max_nodes: MAX_NODES, random_split: split(), ..LoadOptions::default() };
        no_panic("edges via load", &bytes, || load(&edges, &o))?;
    }

    #[test]
    fn edge_list_features_and_labels(labels_file in any::<bool>(), muts in mutations()) {
        let tmp = TempDir::new("io-fuzz-feat");
        let edges = tmp.put("g.txt", support::EDGE_LIST.as_bytes());
        let (mut feat, mut lab) =
            (support::EDGE_FEATS.as_bytes().to_vec(), support::EDGE_LABELS.as_bytes().to_vec());
        let bytes = if labels_file { &mut lab } else { &mut feat };
        apply(bytes, &muts);
        let shown = bytes.clone();
        let f = tmp.put("g.feat", &feat);
        let l = tmp.put("g.labels", &lab);
        no_panic("features/labels", &shown, || {
            load_edge_list(&edges, Some(&f), Some(&l), &edge_opts())
        })?;
    }

    /// Raw bytes of whole archives: generated (stored) and written by numpy (deflated).
    #[test]
    fn npz_bytes(which in 0usize..5, muts in mutations()) {
        let tmp = TempDir::new("io-fuzz-npz");
        let ref_file = |name: &str| std::fs::read(support::data_dir().join("npz").join(name)).unwrap();
        let (mut bytes, scipy) = match which {
            0 => (support::npz(&support::benchmark_arrays()), false),
            1 => (ref_file("tiny_benchmark.npz"), false),
            2 => (ref_file("tiny_benchmark_dense.npz"), false),
            3 => (ref_file("scipy_adj_csr.npz"), true),
            _ => (ref_file("scipy_adj_coo.npz"), true),
        };
        apply(&mut bytes, &muts);
        let p = tmp.put("g.npz", &bytes);
        if scipy {
            no_panic("scipy npz", &bytes, || load_scipy_npz(&p, None, None, &npz_opts()))?;
        } else {
            no_panic("benchmark npz", &bytes, || load_npz_benchmark(&p, &npz_opts()))?;
        }
        let o = LoadOptions { max_nodes: MAX_NODES, random_split: split(), ..LoadOptions::default() };
        no_panic("npz via load", &bytes, || load(&p, &o))?;
    }

    /// One `.npy` member mutated (half the time by flips only, which keep its length) and the
    /// archive rebuilt with a correct CRC, so the mutation reaches the `.npy` header and the
    /// array checks.
    #[test]
    fn npz_arrays(
        which in 0usize..4,
        member in any::<usize>(),
        muts in prop_oneof![mutations(), flips()],
    ) {
        let tmp = TempDir::new("io-fuzz-npy");
        let mut arrays = match which {
            0 | 1 => support::benchmark_arrays(),
            2 => support::scipy_adj_arrays(),
            _ => support::scipy_feat_arrays(),
        };
        if which == 1 {
            // dense (Fortran-order) features instead of CSR
            arrays.retain(|(k, _)| !k.starts_with("attr_"));
            let x: Vec<u8> = (0..18).flat_map(|i| (i as f64 * 0.5).to_le_bytes()).collect();
            arrays.push(("attr_matrix".into(), support::npy("<f8", &[6, 3], true, &x)));
        }
        let k = member % arrays.len();
        apply(&mut arrays[k].1, &muts);
        let shown = arrays[k].1.clone();
        let p = tmp.put("g.npz", &support::npz(&arrays));
        let adj = support::data_dir().join("npz/scipy_adj_csr.npz");
        let o = npz_opts();
        match which {
            0 | 1 => no_panic("benchmark arrays", &shown, || load_npz_benchmark(&p, &o))?,
            2 => no_panic("scipy arrays", &shown, || load_scipy_npz(&p, None, None, &o))?,
            _ => no_panic("scipy features", &shown, || load_scipy_npz(&adj, Some(&p), None, &o))?,
        }
    }

    /// Standalone `.npy` label and feature files.
    #[test]
    fn npy_files(features in any::<bool>(), muts in mutations()) {
        let tmp = TempDir::new("io-fuzz-npyf");
        let name = if features { "feat_dense.npy" } else { "labels.npy" };
        let mut bytes = std::fs::read(support::data_dir().join("npz").join(name)).unwrap();
        apply(&mut bytes, &muts);
        let p = tmp.put(name, &bytes);
        let adj = support::data_dir().join("npz/scipy_adj_csr.npz");
        let (f, l): (Option<&Path>, Option<&Path>) =
            if features { (Some(&p), None) } else { (None, Some(&p)) };
        no_panic(name, &bytes, || load_scipy_npz(&adj, f, l, &npz_opts()))?;
    }
}
