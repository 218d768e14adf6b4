//! Tests of the roofline: the big buffers, the gather against a plain sum, the timing, the
//! configuration checks, a whole run at tiny sizes (every field filled and consistent, the
//! class order on request), the in-cache pattern and the sysfs cache-size parser.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::machine::{parse_cache_size, BigBuffer};
use super::measure::{fill_values, gather_pass, time_reps, GATHER_TASK_ROWS};
use super::*;
use crate::data::synthetic::CitationLike;
use crate::kernels::Csr;
use crate::Par;

fn tiny() -> RooflineConfig {
    RooflineConfig {
        dims: vec![8, 24],
        reps: 2,
        warmup: 1,
        triad_len: 1 << 12,
        gemm: Some((8, 16)),
        ..RooflineConfig::default()
    }
}

/// A 4 × 4 CSR matrix with an empty row.
fn small_csr() -> Csr<f32> {
    Csr::<f32>::new(
        (4, 4),
        vec![0, 2, 2, 5, 6],
        vec![1, 3, 0, 2, 3, 0],
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
    )
}

#[test]
fn big_buffer_is_aligned_zeroed_and_viewable() {
    for len in [0usize, 1, 1000, (2 << 20) / 4 + 3] {
        let mut b = BigBuffer::zeroed(len, true).unwrap();
        assert_eq!(b.as_slice().len(), len);
        assert!(b.as_slice().iter().all(|&v| v == 0.0));
        assert_eq!(b.as_slice().as_ptr() as usize % 4096, 0);
        let align = if len * 4 >= 2 << 20 { 2 << 20 } else { 4096 };
        assert_eq!(b.as_slice().as_ptr() as usize % align, 0, "{len}");
        b.as_mut_slice().iter_mut().for_each(|v| *v = 1.5);
        assert!(b.as_slice().iter().all(|&v| v == 1.5));
    }
    let b = BigBuffer::zeroed(12, false).unwrap();
    assert!(!b.huge_pages_advised());
    // Without the `hugepages` feature a request is never advised.
    #[cfg(not(feature = "hugepages"))]
    assert!(!BigBuffer::zeroed(2 << 20, true)
        .unwrap()
        .huge_pages_advised());
    assert_eq!(b.view(3, 4).unwrap().dim(), (3, 4));
    assert!(b.view(5, 4).is_err());
}

#[test]
fn gather_sums_the_rows_it_names() {
    // Seq and Rayon, plain and prefetch, const and runtime widths give the same sums.
    for d in [8, 24] {
        let (n, group, out_rows) = (50, 3, 2 * GATHER_TASK_ROWS + 5);
        let mut xs = vec![0f32; n * d];
        fill_values(&mut xs, 3);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let idx: Vec<u32> = (0..out_rows * group)
            .map(|_| rng.next_u32() % n as u32)
            .collect();
        let mut want = vec![0f32; out_rows * d];
        for g in 0..out_rows {
            for p in g * group..(g + 1) * group {
                for c in 0..d {
                    want[g * d + c] += xs[idx[p] as usize * d + c];
                }
            }
        }
        for par in [Par::Seq, Par::Rayon] {
            for pf in [false, true] {
                let mut out = vec![f32::NAN; out_rows * d];
                gather_pass(&xs, &idx, group, d, &mut out, pf, par);
                assert_eq!(out, want, "d {d} {par:?} prefetch {pf}");
            }
        }
    }
}

#[test]
fn median_and_best() {
    let mut k = 0;
    let t = time_reps(2, 3, || {
        k += 1;
    });
    assert_eq!(k, 5);
    assert_eq!(t.samples_s.len(), 3);
    assert!(t.best_s <= t.median_s);
}

#[test]
fn interleaved_spmm_timings_take_turns_and_check_sizes() {
    let a = small_csr();
    let c = in_cache_pattern(a.view());
    let mats = [(a.view(), 8), (c.view(), 8), (a.view(), 3)];
    let (t, _, _) = spmm_times_interleaved(&mats, 8, 1, 3, 7, false, Par::Seq).unwrap();
    assert_eq!(t.len(), 3);
    for t in &t {
        assert_eq!(t.samples_s.len(), 3);
        assert!(t.best_s <= t.median_s && t.samples_s.contains(&t.median_s));
    }
    let (none, _, _) = spmm_times_interleaved(&[], 8, 1, 3, 7, false, Par::Seq).unwrap();
    assert!(none.is_empty());
    let b = Csr::<f32>::new((5, 5), vec![0; 6], vec![], vec![]);
    let mixed = std::panic::catch_unwind(|| {
        spmm_times_interleaved(&[(a.view(), 8), (b.view(), 8)], 8, 0, 1, 7, false, Par::Seq)
    });
    assert!(mixed.is_err());
}

#[test]
fn config_is_checked() {
    let bad = [
        RooflineConfig { reps: 0, ..tiny() },
        RooflineConfig {
            dims: vec![],
            ..tiny()
        },
        RooflineConfig {
            dims: vec![16, 0],
            ..tiny()
        },
        RooflineConfig {
            triad_len: 0,
            ..tiny()
        },
        RooflineConfig {
            gemm: Some((0, 4)),
            ..tiny()
        },
    ];
    for c in bad {
        assert!(matches!(c.check(), Err(Error::Config(_))), "{c:?}");
    }
    assert!(tiny().check().is_ok());
    assert!(random_gather(0, 8, 10, 2, 0, 1, 0, false, Par::Seq).is_err());
}

/// The whole run at tiny sizes: every field is filled and consistent.
#[test]
fn tiny_run_reports_everything() {
    let d = CitationLike {
        n_nodes: 400,
        n_valid: 50,
        n_test: 100,
        ..Default::default()
    }
    .generate(2)
    .unwrap();
    let rep = run(&d.graph, None, "tiny", &tiny()).unwrap();
    assert_eq!(rep.n_nodes, 400);
    assert_eq!(
        rep.nnz,
        NormAdj::<f32>::new(&d.graph, Norm::Symmetric).nnz()
    );
    assert_eq!(rep.dims.len(), 2);
    assert!(rep.triad.gbs > 0.0 && rep.triad.gbs.is_finite());
    assert!(rep.sgemm.as_ref().unwrap().gflops > 0.0);
    for r in &rep.dims {
        assert!(r.gather.gbs >= r.gather.gbs_plain && r.gather.gbs >= r.gather.gbs_prefetch);
        assert_eq!(r.gather.n_rows, 400);
        for s in [&r.random, &r.reordered] {
            assert!(s.gbs > 0.0 && s.gflops > 0.0);
            assert!((s.frac_gather - s.gbs / r.gather.gbs).abs() < 1e-12);
            assert_eq!(s.timing.samples_s.len(), 2);
        }
        assert_eq!(r.reordered.order, "community");
        assert!(r.speedup > 0.0);
    }
    let json = serde_json::to_string(&rep).unwrap();
    assert!(json.contains("\"frac_gather\""));
    assert!(rep.table().contains("speedup"));
    // The table says what each bound is and why a kernel can pass the gather bound.
    for w in [
        "reading the table",
        "triad",
        "gather",
        "cache",
        "Above 100 %",
        "in-cache",
    ] {
        assert!(rep.table().contains(w), "{w}");
    }
    for r in &rep.dims {
        let m = &r.miss_model;
        assert_eq!(
            m.cache_rows as u64,
            (rep.cache_bytes / (4 * r.d as u64)).max(1)
        );
        assert!(m.class_order.is_none() && r.class_order.is_none());
        // 400 rows fit in any real L3 at these widths: only first touches miss.
        assert!(m.random > 0.0 && m.random == m.reordered, "{m:?}");
    }
    assert!(rep.locality_class.is_none());
    for r in &rep.dims {
        assert_eq!(r.in_cache.order, "in-cache");
        assert!(r.in_cache.gbs > 0.0);
    }

    // The class order: needs the labels, then is reported beside the others.
    let cfg = RooflineConfig {
        class_reference: true,
        ..tiny()
    };
    assert!(matches!(
        run(&d.graph, None, "tiny", &cfg),
        Err(Error::Mismatch { .. })
    ));
    assert!(run(&d.graph, Some(&d.labels[1..]), "tiny", &cfg).is_err());
    let rep = run(&d.graph, Some(&d.labels), "tiny", &cfg).unwrap();
    for r in &rep.dims {
        assert_eq!(r.class_order.as_ref().unwrap().order, "class");
        assert!(r.class_speedup.unwrap() > 0.0);
        assert!(r.miss_model.class_order.unwrap() > 0.0);
    }
    assert!(rep.locality_class.is_some());
    assert!(rep.table().contains("class"));
}

#[test]
fn in_cache_pattern_keeps_row_lengths_and_values() {
    let a = small_csr();
    let c = in_cache_pattern(a.view());
    assert_eq!(c.indptr().raw_storage(), a.indptr().raw_storage());
    assert_eq!(c.indices(), &[0, 1, 0, 1, 2, 0]);
    assert_eq!(c.data(), a.data());
    // A row slice of a bigger matrix (row pointer not starting at 0).
    let s = a.slice_outer(2..4);
    let cs = in_cache_pattern(s);
    assert_eq!(cs.indptr().raw_storage(), &[0, 3, 4]);
    assert_eq!(cs.indices(), &[0, 1, 2, 0]);
}

#[test]
fn cache_sizes_parse() {
    assert_eq!(parse_cache_size("32768K"), Some(32 << 20));
    assert_eq!(parse_cache_size("1M"), Some(1 << 20));
    assert_eq!(parse_cache_size("512"), Some(512));
    assert_eq!(parse_cache_size(""), None);
    assert_eq!(parse_cache_size("xK"), None);
}
