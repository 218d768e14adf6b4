//! The synthetic citation-like generator (`data::synthetic`) and the OGB writer
//! (`data::write`): reproducibility, thread-count independence, exact preset counts, measured
//! homophily, and a write → load round trip.
//!
//! The `#[ignore]`d tests measure the big presets:
//! `cargo test --release --test suite synthetic::products_like -- --ignored --nocapture`
//! (run under `/usr/bin/time -v` for the peak RSS).

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use sparse_gcn::data::io::{load_ogb, OgbOptions};
use sparse_gcn::data::synthetic::{CitationLike, FeatureKind, Preset, SplitKind};
use sparse_gcn::data::write::write_ogb;
use sparse_gcn::data::{Dataset, Features, FeaturesRef};
use sparse_gcn::par::thread_pool;

/// A scratch folder removed on drop.
struct TmpDir(PathBuf);

impl TmpDir {
    fn new(tag: &str) -> TmpDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let k = COUNTER.fetch_add(1, Ordering::Relaxed);
        let p =
            std::env::temp_dir().join(format!("sparse-gcn-synth-{}-{k}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        TmpDir(p)
    }
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn no_progress(_: &str, _: u64, _: u64) {}

/// Whether two feature matrices are equal, storage kind and bits included.
fn same_features(a: &Features<f32>, b: &Features<f32>) -> bool {
    match (a.get(), b.get()) {
        (FeaturesRef::Dense(x), FeaturesRef::Dense(y)) => {
            x.dim() == y.dim()
                && x.iter()
                    .zip(y.iter())
                    .all(|(p, q)| p.to_bits() == q.to_bits())
        }
        (FeaturesRef::Sparse(x), FeaturesRef::Sparse(y)) => {
            let (x, y) = (x.x(), y.x());
            x.shape() == y.shape()
                && x.indptr().raw_storage() == y.indptr().raw_storage()
                && x.indices() == y.indices()
                && x.data() == y.data()
        }
        _ => false,
    }
}

fn same(a: &Dataset, b: &Dataset) -> bool {
    a.graph == b.graph
        && a.labels == b.labels
        && a.n_classes == b.n_classes
        && a.split == b.split
        && same_features(&a.features, &b.features)
}

/// Fraction of edges (self-loops excluded) inside a class.
fn edge_homophily(d: &Dataset) -> f64 {
    let g = &d.graph;
    let (mut same, mut total) = (0usize, 0usize);
    for i in 0..g.n_nodes() {
        for &j in g.neighbors(i) {
            if j as usize != i {
                total += 1;
                same += usize::from(d.labels[i] == d.labels[j as usize]);
            }
        }
    }
    same as f64 / total as f64
}

/// A mid-size dense configuration.
fn dense_mid(n: usize) -> CitationLike {
    CitationLike {
        n_nodes: n,
        n_classes: 10,
        avg_degree: 12.0,
        homophily: 0.7,
        class_size_slope: 0.5,
        n_features: 16,
        features: FeatureKind::Dense {
            center_distance: 2.0,
            cluster_variance: 1.0,
        },
        split: SplitKind::Random {
            train: 0.5,
            valid: 0.2,
        },
        ..CitationLike::default()
    }
}

#[test]
fn same_seed_same_dataset_different_seed_different() {
    for p in [Preset::CoraLike.params(), dense_mid(3000)] {
        let a = p.generate(11).unwrap();
        let b = p.generate(11).unwrap();
        assert!(same(&a, &b), "same seed gave different datasets");
        let c = p.generate(12).unwrap();
        assert!(a.graph != c.graph, "different seeds gave the same graph");
        assert!(a.labels != c.labels);
        assert!(!same_features(&a.features, &c.features));
        assert!(a.split != c.split);
    }
}

#[test]
fn thread_count_does_not_change_the_dataset() {
    // Several edge blocks (65,536 candidates each) and feature blocks (1,024 rows each).
    let bow = CitationLike {
        n_nodes: 40_000,
        avg_degree: 8.0,
        n_classes: 10,
        n_features: 300,
        ..CitationLike::default()
    };
    for p in [dense_mid(40_000), bow] {
        let one = thread_pool(1).unwrap().install(|| p.generate(5).unwrap());
        let two = thread_pool(2).unwrap().install(|| p.generate(5).unwrap());
        let three = thread_pool(3).unwrap().install(|| p.generate(5).unwrap());
        assert!(same(&one, &two), "1 vs 2 threads");
        assert!(same(&one, &three), "1 vs 3 threads");
    }
}

#[test]
fn cora_like_counts_are_exact() {
    let d = Preset::CoraLike.generate(1).unwrap();
    d.validate().unwrap();
    assert_eq!(d.graph.n_nodes(), 2708);
    assert_eq!(d.graph.n_edges(), 5278);
    assert_eq!(d.graph.stats().self_loops, 0);
    assert_eq!(d.features.n_cols(), 1433);
    assert!(d.features.is_sparse());
    assert_eq!(d.n_classes, 7);
    assert_eq!(d.split.name, "planetoid");
    assert_eq!(d.split.train.len(), 140);
    assert_eq!(d.split.valid.len(), 500);
    assert_eq!(d.split.test.len(), 1000);
    assert_eq!(d.name, "cora-like-seed1");
    // The default is Cora-like too, with avg_degree 4.
    let def = CitationLike::default().generate(1).unwrap();
    assert_eq!(def.graph.n_edges(), 5416);
}

#[test]
fn arxiv_like_counts_are_exact() {
    let t = Instant::now();
    let d = Preset::ArxivLike.generate(1).unwrap();
    eprintln!("arxiv-like built in {:.2} s", t.elapsed().as_secs_f64());
    d.validate().unwrap();
    assert_eq!(d.graph.n_nodes(), 169_343);
    assert_eq!(d.graph.n_edges(), 1_166_243);
    assert_eq!(d.graph.stats().self_loops, 0);
    assert_eq!(d.features.n_cols(), 128);
    assert!(!d.features.is_sparse());
    assert_eq!(d.n_classes, 40);
    assert_eq!(d.split.name, "random");
    let n = 169_343f64;
    assert_eq!(d.split.train.len(), (0.54 * n).round() as usize);
    assert_eq!(d.split.valid.len(), (0.18 * n).round() as usize);
    assert_eq!(
        d.split.train.len() + d.split.valid.len() + d.split.test.len(),
        169_343
    );
    let h = edge_homophily(&d);
    assert!((h - 0.65).abs() < 0.03, "homophily {h}");
}

#[test]
fn measured_homophily_is_close_to_the_parameter() {
    for h in [0.2, 0.7, 0.95] {
        let p = CitationLike {
            homophily: h,
            ..dense_mid(20_000)
        };
        let d = p.generate(3).unwrap();
        assert_eq!(d.graph.n_edges(), 120_000);
        let m = edge_homophily(&d);
        assert!((m - h).abs() < 0.03, "homophily {h}: measured {m}");
    }
}

#[test]
fn degrees_follow_a_heavy_tail() {
    let d = dense_mid(20_000).generate(4).unwrap();
    let g = &d.graph;
    let mut deg: Vec<usize> = (0..g.n_nodes()).map(|i| g.degree(i)).collect();
    deg.sort_unstable();
    let median = deg[deg.len() / 2];
    let max = deg[deg.len() - 1];
    assert!(max > 10 * median, "median {median}, max {max}");
}

#[test]
fn bad_parameters_are_errors() {
    let bad = [
        CitationLike {
            homophily: 1.5,
            ..CitationLike::default()
        },
        CitationLike {
            n_nodes: 0,
            ..CitationLike::default()
        },
        CitationLike {
            degree_exponent: 1.0,
            ..CitationLike::default()
        },
        CitationLike {
            n_nodes: 10,
            n_edges: Some(46),
            ..CitationLike::default()
        },
        CitationLike {
            split: SplitKind::Random {
                train: 0.8,
                valid: 0.3,
            },
            ..CitationLike::default()
        },
    ];
    for p in bad {
        assert!(p.generate(0).is_err(), "{p:?}");
    }
    assert!("cora".parse::<Preset>().is_err());
    for p in Preset::ALL {
        assert_eq!(p.name().parse::<Preset>().unwrap(), p);
    }
}

#[test]
fn a_complete_graph_is_reachable() {
    let p = CitationLike {
        n_nodes: 30,
        n_classes: 3,
        n_edges: Some(435),
        n_features: 8,
        train_per_class: 2,
        n_valid: 5,
        n_test: 5,
        ..CitationLike::default()
    };
    assert_eq!(p.generate(0).unwrap().graph.n_edges(), 435);
}

#[test]
fn write_then_load_round_trips() {
    let dense = dense_mid(700);
    let bow = CitationLike {
        n_nodes: 400,
        ..CitationLike::default()
    };
    for (p, sparse) in [(dense, false), (bow, true)] {
        let d = p.generate(9).unwrap();
        let tmp = TmpDir::new("rt");
        write_ogb(&d, &tmp.0, &no_progress).unwrap();
        // No temporary file is left behind.
        for sub in [tmp.0.join("raw"), tmp.0.join("split").join(&d.split.name)] {
            for e in std::fs::read_dir(&sub).unwrap() {
                let name = e.unwrap().file_name().to_string_lossy().into_owned();
                assert!(name.ends_with(".csv.gz"), "{name}");
            }
        }
        let back = load_ogb(&tmp.0, &OgbOptions::default()).unwrap();
        assert_eq!(back.graph.n_nodes(), d.graph.n_nodes());
        assert_eq!(back.graph.n_edges(), d.graph.n_edges());
        assert_eq!(back.graph, d.graph);
        assert_eq!(back.labels, d.labels);
        assert_eq!(back.n_classes, d.n_classes);
        assert_eq!(back.split, d.split);
        if sparse {
            // Loaded dense 0/1, or as the same CSR when asked for sparse storage.
            assert_eq!(back.features.to_dense(), d.features.to_dense());
            let opts = OgbOptions {
                sparse_features_below: Some(0.1),
                ..OgbOptions::default()
            };
            let back = load_ogb(&tmp.0, &opts).unwrap();
            assert!(same_features(&back.features, &d.features));
        } else {
            assert!(same_features(&back.features, &d.features));
        }
    }
}

#[test]
fn write_reports_progress_and_rejects_a_bad_split_name() {
    let mut d = dense_mid(300).generate(1).unwrap();
    let tmp = TmpDir::new("progress");
    let seen = std::cell::RefCell::new(Vec::new());
    write_ogb(&d, &tmp.0, &|stage, done, total| {
        assert!(done <= total);
        seen.borrow_mut().push(stage.to_string());
    })
    .unwrap();
    let seen = seen.into_inner();
    for stage in ["edges", "features", "labels", "split"] {
        assert!(seen.iter().any(|s| s == stage), "{stage} not reported");
    }
    d.split.name = "../x".into();
    assert!(write_ogb(&d, &tmp.0, &no_progress).is_err());
}

/// products-like in memory: time and node/edge counts (peak RSS: run under /usr/bin/time -v).
#[test]
#[ignore = "products-size: about a minute and 2–3 GB; run with --release"]
fn products_like_in_memory() {
    let t = Instant::now();
    let d = Preset::ProductsLike.generate(1).unwrap();
    eprintln!(
        "products-like built in {:.1} s ({} threads)",
        t.elapsed().as_secs_f64(),
        rayon::current_num_threads()
    );
    assert_eq!(d.graph.n_nodes(), 2_449_029);
    assert_eq!(d.graph.n_edges(), 61_859_140);
    assert_eq!(d.features.n_cols(), 100);
}

/// arxiv-like: build, write and load back, with times.
#[test]
#[ignore = "writes ~200 MB of gzip CSV; run with --release"]
fn arxiv_like_write_and_load() {
    let t = Instant::now();
    let d = Preset::ArxivLike.generate(1).unwrap();
    eprintln!("arxiv-like built in {:.2} s", t.elapsed().as_secs_f64());
    let tmp = TmpDir::new("arxiv");
    let t = Instant::now();
    write_ogb(&d, &tmp.0, &no_progress).unwrap();
    eprintln!("arxiv-like written in {:.2} s", t.elapsed().as_secs_f64());
    let t = Instant::now();
    let back = load_ogb(&tmp.0, &OgbOptions::default()).unwrap();
    eprintln!("arxiv-like loaded in {:.2} s", t.elapsed().as_secs_f64());
    assert_eq!(back.graph, d.graph);
    assert!(same_features(&back.features, &d.features));
}
