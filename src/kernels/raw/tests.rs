//! Tests of the unsafe kernels against plain definitions.

use ndarray::{s, Array2};

use super::*;
use crate::kernels::packed::{self, BOperand, BOperand::Packed, Isa};

fn naive(a: ArrayView2<'_, f64>, b: ArrayView2<'_, f64>) -> Array2<f64> {
    Array2::from_shape_fn((a.nrows(), b.ncols()), |(i, j)| {
        (0..a.ncols()).map(|p| a[[i, p]] * b[[p, j]]).sum()
    })
}

/// Both routines, any strides (transposed, reversed, stepped views), k = 0 and empty
/// outputs; β = 0 never reads `out`.
#[test]
fn gemm_block_matches_a_naive_product() {
    let a = Array2::from_shape_fn((5, 4), |(i, j)| (i * 4 + j) as f64 * 0.5 - 3.0);
    let b = Array2::from_shape_fn((8, 3), |(i, j)| (i + 2 * j) as f64 - 4.0);
    let b = b.slice(s![..;2, ..;-1]);
    let want = naive(a.view(), b);
    let mut out = Array2::from_elem((5, 3), f64::NAN);
    gemm_block(1.0, a.view(), b, 0.0, out.view_mut());
    assert_eq!(out, want);
    let mut out32 = Array2::from_elem((3, 5), f32::NAN);
    let (a32, b32) = (a.mapv(|v| v as f32), b.mapv(|v| v as f32));
    gemm_block(1.0, b32.t(), a32.t(), 0.0, out32.view_mut());
    assert_eq!(out32, want.t().mapv(|v| v as f32));
    let mut out = Array2::from_elem((5, 3), 2.0);
    gemm_block(
        1.0,
        a.slice(s![.., ..0]),
        b.slice(s![..0, ..]),
        0.5,
        out.view_mut(),
    );
    assert!(out.iter().all(|&v| v == 1.0));
    gemm_block(
        1.0,
        a.slice(s![.., ..0]),
        b.slice(s![..0, ..]),
        0.0,
        out.view_mut(),
    );
    assert!(out.iter().all(|&v| v == 0.0));
    let mut none = Array2::<f64>::zeros((0, 3));
    gemm_block(1.0, a.slice(s![..0, ..]), b, 0.0, none.view_mut());
}

/// A slice holding whole huge pages is advised (where advice exists) and keeps its values;
/// one inside a single huge page is not.
#[test]
fn advise_slice_advises_whole_huge_pages_only() {
    let mut big: Vec<f32> = (0..(5 << 20) / 4).map(|i| i as f32).collect();
    let advised = advise_slice(&mut big);
    // Advice exists on Linux with the feature and a kernel built with transparent huge
    // pages (which then has this folder).
    let thp = std::path::Path::new("/sys/kernel/mm/transparent_hugepage").is_dir();
    assert_eq!(
        advised,
        cfg!(all(target_os = "linux", feature = "hugepages")) && thp,
        "a 5 MiB slice holds at least one whole 2 MiB page"
    );
    assert!(big.iter().enumerate().all(|(i, &v)| v == i as f32));
    let mut small = vec![1.0f32; 1000];
    assert!(!advise_slice(&mut small));
    assert!(!advise_slice::<f32>(&mut []));
}

#[test]
#[should_panic(expected = "shapes do not agree")]
fn gemm_block_checks_shapes() {
    let a = Array2::<f32>::zeros((2, 3));
    let mut out = Array2::<f32>::zeros((2, 2));
    gemm_block(1.0, a.view(), a.view(), 0.0, out.view_mut());
}

fn rows<'a>(ip: &'a [usize], idx: &'a [u32], val: &'a [f32]) -> Rows<'a, f32> {
    Rows {
        ip,
        off: ip[0],
        idx,
        val,
    }
}

#[test]
fn spmm_rows_computes_the_rows_it_is_given() {
    // Rows 1..3 of [[1, 0], [0, 2], [3, 4]], with an offset row pointer.
    let (ip, idx, val) = ([5, 6, 7, 9], [0, 1, 0, 1], [1.0, 2.0, 3.0, 4.0]);
    let x = ndarray::array![[1.0f32, 10.0], [100.0, 1000.0]];
    let mut out = Array2::from_elem((2, 2), f32::NAN);
    spmm_rows(
        1.0,
        &rows(&ip, &idx, &val),
        x.view(),
        0,
        0.0,
        out.view_mut(),
        1,
    );
    assert_eq!(out, ndarray::array![[200.0, 2000.0], [403.0, 4030.0]]);
}

#[test]
#[should_panic(expected = "column index out of range")]
fn spmm_rows_checks_the_column_indices() {
    let (ip, idx, val) = ([0, 1], [2], [1.0]);
    let x = Array2::<f32>::zeros((2, 8));
    let mut out = Array2::<f32>::zeros((1, 8));
    spmm_rows(
        1.0,
        &rows(&ip, &idx, &val),
        x.view(),
        0,
        0.0,
        out.view_mut(),
        0,
    );
}

/// A decreasing row pointer cannot make a row's range leave the checked non-zeros: the
/// slice of the task's non-zeros is bounds-checked.
#[test]
#[should_panic(expected = "out of range for slice")]
fn spmm_rows_reads_indices_only_from_the_checked_non_zeros() {
    let (ip, idx, val) = ([0, 3, 1], [0, 9, 0], [1.0; 3]);
    let x = Array2::<f32>::zeros((2, 8));
    let mut out = Array2::<f32>::zeros((2, 8));
    spmm_rows(
        1.0,
        &rows(&ip, &idx, &val),
        x.view(),
        0,
        0.0,
        out.view_mut(),
        0,
    );
}

#[test]
#[should_panic(expected = "spmm: rows 1..3")]
fn spmm_rows_checks_the_row_range() {
    let (ip, idx, val) = ([0, 1, 2], [0, 1], [1.0; 2]);
    let x = Array2::<f32>::zeros((2, 8));
    let mut out = Array2::<f32>::zeros((2, 8));
    spmm_rows(
        1.0,
        &rows(&ip, &idx, &val),
        x.view(),
        0,
        0.0,
        out.view_mut(),
        1,
    );
}

/// Deterministic values with many distinct bits (so that a different order of the sums would
/// show in the last bits).
fn filled(rows: usize, cols: usize, salt: u64) -> Array2<f32> {
    let mut state = salt.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    Array2::from_shape_fn((rows, cols), |_| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 3.0
    })
}

/// The packed path gives matrixmultiply's bits: every row tail (1–30 rows, and the 24-, 12-
/// and 8-row kernels), panel widths of 16, 32 and 48 with their masked last columns, k within
/// one chunk of `KC` and over several (matrixmultiply's chunk boundaries), β = 0 (`out` never
/// read: NaN there stays unread), β = 1 and β = 0.5, B transposed and stepped (packed
/// element by element), B with contiguous rows (packed by copies, and read in place), A a
/// sub-view with a row stride past its columns and A transposed, `out` a sub-view of a buffer
/// whose 48 canary columns and canary row must stay untouched (NaN, compared by bits).
#[test]
fn gemm_packed_gives_matrixmultiplys_bits() {
    let isas: Vec<Isa> = [Isa::Avx2, Isa::Avx512]
        .into_iter()
        .filter(|i| i.runs())
        .collect();
    if isas.is_empty() {
        eprintln!("skipped: gemm_packed_gives_matrixmultiplys_bits (no AVX2 with FMA on this CPU)");
        return;
    }
    for &isa in &isas {
        packed_bits(isa);
    }
}

/// [`gemm_packed_gives_matrixmultiplys_bits`] with the kernels of `isa`.
fn packed_bits(isa: Isa) {
    let ns = [1, 8, 16, 17, 31, 32, 33, 40, 48, 49, 64, 100, 256];
    let ks = [1, 3, 40, 256, 257, 600];
    let mut cases = 0;
    for (t, &n) in ns.iter().enumerate() {
        for (u, &k) in ks.iter().enumerate() {
            let m = [1, 5, 8, 11, 12, 23, 24, 30, 61][(t + u) % 9];
            let a_full = filled(m, k + 3, (t * 31 + u) as u64);
            let a = a_full.slice(s![.., 1..k + 1]);
            let b_store = filled(2 * n, k, (t * 7 + u + 100) as u64);
            let b = b_store.slice(s![..;2, ..]).reversed_axes(); // k × n, strided
            let packed = packed::PackedB::new(b).expect("packed kernels available");
            assert_eq!(packed.dim(), (k, n));
            // B with contiguous rows: packed by copies.
            let b_own = b.to_owned();
            let packed_rows = packed::PackedB::new(b_own.view()).expect("packed kernels available");
            for beta in [0.0f32, 1.0, 0.5] {
                // `out` is rows 0..m, columns 0..n of a buffer with 48 canary columns and a
                // canary row past it: a store past row m or column n would show there.
                let mut init = filled(m + 1, n + 48, (t + u + 7) as u64);
                init.row_mut(m).fill(f32::NAN);
                init.slice_mut(s![.., n..]).fill(f32::NAN);
                let mut want = init.clone();
                let mut got = init.clone();
                if beta == 0.0 {
                    got.slice_mut(s![..m, ..n]).fill(f32::NAN);
                }
                gemm_block(1.0, a, b, beta, want.slice_mut(s![..m, ..n]));
                gemm_packed(a, Packed(&packed), beta, got.slice_mut(s![..m, ..n]), isa);
                let mut got_c = init.clone();
                let out_c = got_c.slice_mut(s![..m, ..n]);
                gemm_packed(a, Packed(&packed_rows), beta, out_c, isa);
                assert!(got_c
                    .iter()
                    .zip(&want)
                    .all(|(g, w)| g.to_bits() == w.to_bits()));
                // A transposed (Hᵀ): read in place through its strides.
                let a_t = a.t().to_owned();
                let mut got_t = init.clone();
                gemm_packed(
                    a_t.t(),
                    Packed(&packed),
                    beta,
                    got_t.slice_mut(s![..m, ..n]),
                    isa,
                );
                assert!(got_t
                    .iter()
                    .zip(&want)
                    .all(|(g, w)| g.to_bits() == w.to_bits()));
                // B in place: its rows contiguous (a copy of the strided one), read through
                // masked loads (AVX-512 only).
                let b_rows = b.to_owned();
                let mut got_r = want.clone();
                if isa == Isa::Avx512 {
                    got_r = init.clone();
                    let out_r = got_r.slice_mut(s![..m, ..n]);
                    gemm_packed(a_t.t(), BOperand::Rows(b_rows.view()), beta, out_r, isa);
                }
                assert!(got_r
                    .iter()
                    .zip(&want)
                    .all(|(g, w)| g.to_bits() == w.to_bits()));
                let same = want
                    .iter()
                    .zip(&got)
                    .all(|(w, g)| w.to_bits() == g.to_bits());
                assert!(same, "{isa:?} m {m} k {k} n {n} beta {beta}");
                cases += 1;
            }
        }
    }
    assert_eq!(cases, ns.len() * ks.len() * 3);
}

/// The packed path checks its preconditions: shapes, a negative stride, k = 0, B in place with
/// a column stride other than 1.
#[test]
fn gemm_packed_checks_its_arguments() {
    let Some(isa) = Isa::best() else {
        eprintln!("skipped: gemm_packed_checks_its_arguments (no AVX2 with FMA on this CPU)");
        return;
    };
    let a = filled(4, 3, 1);
    let b = filled(3, 5, 2);
    let packed = packed::PackedB::new(b.view()).expect("packed kernels available");
    let run = |a: ArrayView2<'_, f32>, out: &mut Array2<f32>| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            gemm_packed(a, Packed(&packed), 0.0, out.view_mut(), isa)
        }))
        .is_err()
    };
    assert!(!run(a.view(), &mut Array2::zeros((4, 5))));
    assert!(run(a.view(), &mut Array2::zeros((4, 4))));
    assert!(run(a.slice(s![.., ..2]), &mut Array2::zeros((4, 5))));
    assert!(run(a.slice(s![..;-1, ..]), &mut Array2::zeros((4, 5))));
    let mut out = Array2::zeros((4, 5));
    let reversed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        gemm_packed(
            a.view(),
            Packed(&packed),
            0.0,
            out.slice_mut(s![..;-1, ..]),
            isa,
        )
    }));
    assert!(reversed.is_err());
    let empty = packed::PackedB::new(b.slice(s![..0, ..])).expect("packed kernels available");
    let zero_k = std::panic::catch_unwind(|| {
        gemm_packed(
            a.slice(s![.., ..0]),
            Packed(&empty),
            0.0,
            Array2::zeros((4, 5)).view_mut(),
            isa,
        )
    });
    assert!(zero_k.is_err());
    // B in place with a column stride other than 1.
    let strided = std::panic::catch_unwind(|| {
        gemm_packed(
            a.view(),
            BOperand::Rows(b.slice(s![.., ..;2])),
            0.0,
            Array2::zeros((4, 3)).view_mut(),
            isa,
        )
    });
    assert!(strided.is_err());
    // B in place under AVX2 (no masked loads there), and kernels this CPU does not run.
    for isa in [Isa::Avx2, Isa::Avx512] {
        let in_place = std::panic::catch_unwind(|| {
            let mut out = Array2::zeros((4, 5));
            gemm_packed(a.view(), BOperand::Rows(b.view()), 0.0, out.view_mut(), isa);
            out
        });
        assert_eq!(
            in_place.is_ok(),
            isa == Isa::Avx512 && isa.runs(),
            "{isa:?}"
        );
        let unknown = std::panic::catch_unwind(|| {
            let mut out = Array2::zeros((4, 5));
            gemm_packed(a.view(), Packed(&packed), 0.0, out.view_mut(), isa);
        });
        assert_eq!(unknown.is_ok(), isa.runs(), "{isa:?}");
    }
}
