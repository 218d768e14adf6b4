//! Property tests of the kernels and of the graph normalisation (STYLE.md §3.7 (b)):
//! parallel == serial bit for bit for any thread count, kernels ≈ their serial oracles for any
//! strides, β = 0 never reads `out`, the adjoint identity, and the normalisation invariants
//! checked against a BTreeSet oracle.

use crate::common;

use std::sync::OnceLock;

use common::{
    assert_close, assert_close_scalar, bitwise_eq_f32, edge_case, power_law_csr, random_csr,
    random_dense, rng, EdgeCase, GraphOracle,
};
use ndarray::{s, Array2, ArrayView2, ArrayViewMut2};
use proptest::prelude::*;
use proptest::sample::select;
use sparse_gcn::graph::{Direction, Graph, Norm, NormAdj};
use sparse_gcn::kernels::gemm::{GEMM_MIN_ROWS, GEMM_TASK_FLOPS};
use sparse_gcn::kernels::spmm::SPMM_TASK_WORK;
use sparse_gcn::kernels::{gemm, reference, spmm, Csr, CsrView};
use sparse_gcn::{Par, Scalar};

// ---------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------

/// Local pools of 1, 2, 3 and 7 threads, built once: results must not depend on the machine.
fn pools() -> &'static [(usize, rayon::ThreadPool)] {
    static POOLS: OnceLock<Vec<(usize, rayon::ThreadPool)>> = OnceLock::new();
    POOLS.get_or_init(|| {
        [1, 2, 3, 7]
            .into_iter()
            .map(|k| (k, sparse_gcn::par::thread_pool(k).expect("thread pool")))
            .collect()
    })
}

/// How a dense operand is laid out in memory (its logical contents are always the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// Row-major, contiguous.
    Standard,
    /// Column-major: `.t()` of a row-major buffer.
    Transposed,
    /// Every other row of a buffer twice as tall (`s![..;2, ..]`); the gaps hold NaN.
    RowStride2,
    /// Every other column of a buffer twice as wide (`s![.., ..;2]`); the gaps hold NaN.
    ColStride2,
    /// Rows in reverse memory order (`s![..;-1, ..]`, a negative stride).
    Reversed,
    /// Columns in reverse memory order (`s![.., ..;-1]`, a negative column stride).
    ColReversed,
}

const LAYOUTS: [Layout; 6] = [
    Layout::Standard,
    Layout::Transposed,
    Layout::RowStride2,
    Layout::ColStride2,
    Layout::Reversed,
    Layout::ColReversed,
];

/// A matrix stored in the given [`Layout`], with NaN in every gap so that a kernel reading
/// outside its view is caught.
struct Laid<F> {
    buf: Array2<F>,
    layout: Layout,
}

impl<F: Scalar> Laid<F> {
    fn new(m: ArrayView2<'_, F>, layout: Layout) -> Self {
        let (r, c) = m.dim();
        let buf = match layout {
            Layout::Standard => m.as_standard_layout().into_owned(),
            Layout::Transposed => m.t().as_standard_layout().into_owned(),
            Layout::RowStride2 => {
                let mut b = Array2::from_elem((2 * r, c), F::nan());
                b.slice_mut(s![..;2, ..]).assign(&m);
                b
            }
            Layout::ColStride2 => {
                let mut b = Array2::from_elem((r, 2 * c), F::nan());
                b.slice_mut(s![.., ..;2]).assign(&m);
                b
            }
            Layout::Reversed => m.slice(s![..;-1, ..]).as_standard_layout().into_owned(),
            Layout::ColReversed => m.slice(s![.., ..;-1]).as_standard_layout().into_owned(),
        };
        let laid = Laid { buf, layout };
        let bits = |v: &F| v.to_f64_lossless().to_bits();
        assert!(
            laid.view().dim() == m.dim() && laid.view().iter().map(bits).eq(m.iter().map(bits))
        );
        laid
    }

    fn view(&self) -> ArrayView2<'_, F> {
        match self.layout {
            Layout::Standard => self.buf.view(),
            Layout::Transposed => self.buf.t(),
            Layout::RowStride2 => self.buf.slice(s![..;2, ..]),
            Layout::ColStride2 => self.buf.slice(s![.., ..;2]),
            Layout::Reversed => self.buf.slice(s![..;-1, ..]),
            Layout::ColReversed => self.buf.slice(s![.., ..;-1]),
        }
    }

    fn view_mut(&mut self) -> ArrayViewMut2<'_, F> {
        match self.layout {
            Layout::Standard => self.buf.view_mut(),
            Layout::Transposed => self.buf.view_mut().reversed_axes(),
            Layout::RowStride2 => self.buf.slice_mut(s![..;2, ..]),
            Layout::ColStride2 => self.buf.slice_mut(s![.., ..;2]),
            Layout::Reversed => self.buf.slice_mut(s![..;-1, ..]),
            Layout::ColReversed => self.buf.slice_mut(s![.., ..;-1]),
        }
    }

    /// The gaps between the view's elements still hold NaN (nothing wrote outside the view).
    fn gaps_untouched(&self) -> bool {
        if self.buf.is_empty() {
            return true;
        }
        match self.layout {
            Layout::RowStride2 => self.buf.slice(s![1..;2, ..]).iter().all(|v| v.is_nan()),
            Layout::ColStride2 => self.buf.slice(s![.., 1..;2]).iter().all(|v| v.is_nan()),
            _ => true,
        }
    }
}

fn max_abs(m: ArrayView2<'_, f64>) -> f64 {
    m.iter().fold(0.0, |acc, v| acc.max(v.abs()))
}

/// Forward-error bound for α·A·X + β·out with at most `k` terms per dot product:
/// c·(k + 2)·ε·(|α|·max_i Σ_j |A_ij|·max|X| + |β|·max|out|).
fn error_bound(
    k: usize,
    alpha: f64,
    a_row_abs_max: f64,
    x_max: f64,
    beta: f64,
    out_max: f64,
) -> f64 {
    let out_part = if beta == 0.0 {
        0.0
    } else {
        beta.abs() * out_max
    };
    4.0 * (k + 2) as f64 * f64::EPSILON * (alpha.abs() * a_row_abs_max * x_max + out_part)
}

/// (max_i Σ_j |A_ij|, max row nnz)
fn csr_row_stats(a: CsrView<'_, f64>) -> (f64, usize) {
    a.outer_iterator().fold((0.0, 0), |(s, k), row| {
        (
            s.max(row.data().iter().map(|v| v.abs()).sum()),
            k.max(row.nnz()),
        )
    })
}

/// Awkward sizes: 0, 1, 17, 257 and anything small.
fn awkward() -> impl Strategy<Value = usize> {
    prop_oneof![Just(0usize), Just(1), Just(17), Just(257), 2usize..48]
}

/// Feature widths for spmm: every compile-time width of its fast path (8, 16, 32, 64, 128,
/// 256), widths cut into column blocks (64s, then 32, 16, 8 and a 1–7 tail) and their
/// neighbours.
const SPMM_WIDTHS: [usize; 24] = [
    1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 40, 63, 64, 65, 100, 127, 128, 130, 255, 256, 257,
];

fn spmm_widths() -> impl Strategy<Value = usize> {
    select(SPMM_WIDTHS.to_vec())
}

fn csr_f64_exact_transpose_check(a: CsrView<'_, f64>, a_t: CsrView<'_, f64>) {
    assert_eq!(a.shape(), (a_t.cols(), a_t.rows()));
    assert_eq!(a.nnz(), a_t.nnz());
    for (&v, (i, j)) in a.iter() {
        let (i, j) = (i as usize, j as usize);
        assert_eq!(
            a_t.get(j, i).map(|w| w.to_bits()),
            Some(v.to_bits()),
            "Âᵀ[{j},{i}]"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Parallel == serial, bit for bit
// ---------------------------------------------------------------------------------------------

/// Runs spmm under every pool with `Par::Rayon` and compares with `Par::Seq` bit for bit.
fn check_spmm_par_vs_seq(
    a: &Csr<f32>,
    x: ArrayView2<'_, f32>,
    alpha: f32,
    beta: f32,
    out0: &Array2<f32>,
    out_layout: Layout,
) {
    let mut seq = Laid::new(out0.view(), out_layout);
    spmm(alpha, a.view(), x, beta, seq.view_mut(), Par::Seq);
    for (k, pool) in pools() {
        let mut par = Laid::new(out0.view(), out_layout);
        pool.install(|| spmm(alpha, a.view(), x, beta, par.view_mut(), Par::Rayon));
        assert!(
            bitwise_eq_f32(par.view(), seq.view()),
            "spmm Rayon({k}) != Seq for a {:?} (nnz {}), d = {}, α = {alpha}, β = {beta}",
            a.shape(),
            a.nnz(),
            x.ncols()
        );
        assert!(par.gaps_untouched());
    }
}

/// Runs gemm under every pool with `Par::Rayon` and compares with `Par::Seq` bit for bit.
fn check_gemm_par_vs_seq(
    a: ArrayView2<'_, f32>,
    b: ArrayView2<'_, f32>,
    alpha: f32,
    beta: f32,
    out0: &Array2<f32>,
    out_layout: Layout,
) {
    let mut seq = Laid::new(out0.view(), out_layout);
    gemm(alpha, a, b, beta, seq.view_mut(), Par::Seq);
    for (k, pool) in pools() {
        let mut par = Laid::new(out0.view(), out_layout);
        pool.install(|| gemm(alpha, a, b, beta, par.view_mut(), Par::Rayon));
        assert!(
            bitwise_eq_f32(par.view(), seq.view()),
            "gemm Rayon({k}) != Seq for {:?}·{:?}, α = {alpha}, β = {beta}",
            a.dim(),
            b.dim()
        );
        assert!(par.gaps_untouched());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn spmm_par_equals_seq_bitwise(
        rows in 1usize..700,
        cols in 1usize..300,
        density in 0.0f64..0.3,
        empty_frac in 0.0f64..0.5,
        d in spmm_widths(),
        alpha in select(vec![1.0f32, -0.75, 2.5, 0.0]),
        beta in select(vec![0.0f32, 1.0, 0.5, -2.0]),
        x_layout in select(LAYOUTS.to_vec()),
        out_layout in select(LAYOUTS.to_vec()),
        seed in any::<u64>(),
    ) {
        let mut r = rng(seed);
        let a = random_csr::<f32>(&mut r, rows, cols, density, empty_frac);
        let x = Laid::new(random_dense::<f32>(&mut r, cols, d).view(), x_layout);
        let out0 = random_dense::<f32>(&mut r, rows, d);
        check_spmm_par_vs_seq(&a, x.view(), alpha, beta, &out0, out_layout);
    }

    #[test]
    fn gemm_par_equals_seq_bitwise(
        m in 0usize..3200,
        k in 1usize..80,
        n in 1usize..40,
        alpha in select(vec![1.0f32, -0.75]),
        beta in select(vec![0.0f32, 1.0, 0.5]),
        a_layout in select(LAYOUTS.to_vec()),
        b_layout in select(LAYOUTS.to_vec()),
        out_layout in select(vec![Layout::Standard, Layout::Transposed, Layout::RowStride2]),
        seed in any::<u64>(),
    ) {
        let mut r = rng(seed);
        let a = Laid::new(random_dense::<f32>(&mut r, m, k).view(), a_layout);
        let b = Laid::new(random_dense::<f32>(&mut r, k, n).view(), b_layout);
        let out0 = random_dense::<f32>(&mut r, m, n);
        check_gemm_par_vs_seq(a.view(), b.view(), alpha, beta, &out0, out_layout);
    }
}

/// A 3000-row matrix with power-law row lengths and a hub row of 1500 entries, so the nnz-based
/// split recurses many levels (and must clamp around the hub).
#[test]
fn spmm_par_equals_seq_bitwise_large_power_law() {
    for (seed, d) in [
        (1u64, 16usize),
        (2, 64),
        (3, 16),
        (4, 256),
        (5, 130),
        (6, 40),
        (7, 32),
        (8, 33),
    ] {
        let mut r = rng(seed);
        let a = power_law_csr::<f32>(&mut r, 3000, 3000, 1500);
        let work = (a.nnz() + a.rows()) * d;
        assert!(
            work > 8 * SPMM_TASK_WORK,
            "too little work ({work}) to split"
        );
        assert!(a.outer_iterator().any(|row| row.nnz() == 1500));
        assert!(a.outer_iterator().any(|row| row.nnz() == 0));
        let x = random_dense::<f32>(&mut r, 3000, d);
        let out0 = random_dense::<f32>(&mut r, 3000, d);
        check_spmm_par_vs_seq(&a, x.view(), 1.0, 0.0, &out0, Layout::Standard);
        check_spmm_par_vs_seq(&a, x.view(), -0.5, 0.5, &out0, Layout::Standard);
        let xt = Laid::new(x.view(), Layout::Transposed);
        check_spmm_par_vs_seq(&a, xt.view(), 1.5, 1.0, &out0, Layout::RowStride2);
    }
}

/// GEMM shapes large enough to be split into several row blocks.
#[test]
fn gemm_par_equals_seq_bitwise_large() {
    for (seed, (m, k, n)) in [
        (1u64, (2000usize, 64usize, 16usize)),
        (2, (3001, 48, 33)),
        (3, (5000, 64, 64)),
    ] {
        assert!(m > 2 * GEMM_MIN_ROWS && m * k * n > GEMM_TASK_FLOPS);
        let mut r = rng(seed);
        let a = random_dense::<f32>(&mut r, m, k);
        let b = random_dense::<f32>(&mut r, k, n);
        let out0 = random_dense::<f32>(&mut r, m, n);
        check_gemm_par_vs_seq(a.view(), b.view(), 1.0, 0.0, &out0, Layout::Standard);
        let at = Laid::new(a.view(), Layout::Transposed);
        let bs = Laid::new(b.view(), Layout::RowStride2);
        check_gemm_par_vs_seq(at.view(), bs.view(), -0.5, 0.5, &out0, Layout::Transposed);
    }
}

// ---------------------------------------------------------------------------------------------
// Kernels ≈ their oracles
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn spmm_matches_reference(
        rows in awkward(),
        cols in awkward(),
        d in prop_oneof![Just(0usize), spmm_widths()],
        density in prop_oneof![Just(0.0f64), 0.0f64..0.3, Just(1.0)],
        empty_frac in 0.0f64..0.6,
        alpha in select(vec![1.0f64, -0.75, 2.5, 0.0]),
        beta in select(vec![0.0f64, 1.0, 0.5]),
        x_layout in select(LAYOUTS.to_vec()),
        out_layout in select(LAYOUTS.to_vec()),
        par in select(vec![Par::Seq, Par::Rayon]),
        row_slice in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let mut r = rng(seed);
        let full = random_csr::<f64>(&mut r, rows, cols, density, empty_frac);
        // Optionally a row-slice view, whose row pointer does not start at 0.
        let a = if row_slice { full.slice_outer(rows / 3..rows - rows / 4) } else { full.view() };
        let m = a.rows();
        let x = Laid::new(random_dense::<f64>(&mut r, cols, d).view(), x_layout);
        let out0 = random_dense::<f64>(&mut r, m, d);
        let mut out = Laid::new(out0.view(), out_layout);
        spmm(alpha, a, x.view(), beta, out.view_mut(), par);
        let expected = reference::spmm(alpha, a, x.view(), beta, out0.view());
        let (row_abs, kmax) = csr_row_stats(a);
        let atol = error_bound(kmax, alpha, row_abs, max_abs(x.view()), beta, max_abs(out0.view()));
        assert_close(out.view(), expected.view(), atol, 0.0);
        prop_assert!(out.gaps_untouched());
    }

    #[test]
    fn gemm_matches_reference(
        m in awkward(),
        k in awkward(),
        n in awkward(),
        alpha in select(vec![1.0f64, -0.75, 2.5, 0.0]),
        beta in select(vec![0.0f64, 1.0, 0.5]),
        a_layout in select(LAYOUTS.to_vec()),
        b_layout in select(LAYOUTS.to_vec()),
        out_layout in select(LAYOUTS.to_vec()),
        par in select(vec![Par::Seq, Par::Rayon]),
        seed in any::<u64>(),
    ) {
        let mut r = rng(seed);
        let a = Laid::new(random_dense::<f64>(&mut r, m, k).view(), a_layout);
        let b = Laid::new(random_dense::<f64>(&mut r, k, n).view(), b_layout);
        let out0 = random_dense::<f64>(&mut r, m, n);
        let mut out = Laid::new(out0.view(), out_layout);
        gemm(alpha, a.view(), b.view(), beta, out.view_mut(), par);
        let expected = reference::gemm(alpha, a.view(), b.view(), beta, out0.view());
        let row_abs = a.view().rows().into_iter().fold(0.0f64, |s, row| s.max(row.iter().map(|v| v.abs()).sum()));
        let atol = error_bound(k, alpha, row_abs, max_abs(b.view()), beta, max_abs(out0.view()));
        assert_close(out.view(), expected.view(), atol, 0.0);
        prop_assert!(out.gaps_untouched());
    }

    #[test]
    fn spmm_beta_zero_ignores_nan_in_out(
        rows in awkward(),
        cols in awkward(),
        d in spmm_widths(),
        density in 0.0f64..0.5,
        alpha in select(vec![1.0f64, -0.75, 0.0]),
        out_layout in select(LAYOUTS.to_vec()),
        par in select(vec![Par::Seq, Par::Rayon]),
        seed in any::<u64>(),
    ) {
        let mut r = rng(seed);
        let a = random_csr::<f64>(&mut r, rows, cols, density, 0.3);
        let x = random_dense::<f64>(&mut r, cols, d);
        let nan = Array2::from_elem((rows, d), f64::NAN);
        let mut out = Laid::new(nan.view(), out_layout);
        spmm(alpha, a.view(), x.view(), 0.0, out.view_mut(), par);
        let expected = reference::spmm(alpha, a.view(), x.view(), 0.0, nan.view());
        let (row_abs, kmax) = csr_row_stats(a.view());
        let atol = error_bound(kmax, alpha, row_abs, max_abs(x.view()), 0.0, 0.0);
        assert_close(out.view(), expected.view(), atol, 0.0); // fails on any NaN
        if alpha == 0.0 {
            prop_assert!(out.view().iter().all(|&v| v == 0.0));
        }
    }

    #[test]
    fn gemm_beta_zero_ignores_nan_in_out(
        m in prop_oneof![awkward(), 257usize..700],
        k in prop_oneof![Just(0usize), awkward()],
        n in awkward(),
        alpha in select(vec![1.0f64, -0.75, 0.0]),
        out_layout in select(LAYOUTS.to_vec()),
        par in select(vec![Par::Seq, Par::Rayon]),
        seed in any::<u64>(),
    ) {
        let mut r = rng(seed);
        let a = random_dense::<f64>(&mut r, m, k);
        let b = random_dense::<f64>(&mut r, k, n);
        let nan = Array2::from_elem((m, n), f64::NAN);
        let mut out = Laid::new(nan.view(), out_layout);
        gemm(alpha, a.view(), b.view(), 0.0, out.view_mut(), par);
        let expected = reference::gemm(alpha, a.view(), b.view(), 0.0, nan.view());
        let atol = error_bound(k, alpha, k as f64, 1.0, 0.0, 0.0);
        assert_close(out.view(), expected.view(), atol, 0.0); // fails on any NaN
        if alpha == 0.0 || k == 0 {
            prop_assert!(out.view().iter().all(|&v| v == 0.0));
        }
    }

    /// β = 1: the new `out` is the old `out` plus the product (computed separately with β = 0).
    #[test]
    fn beta_one_accumulates(
        rows in awkward(),
        cols in awkward(),
        d in select(vec![1usize, 3, 16]),
        density in 0.0f64..0.5,
        alpha in select(vec![1.0f64, -0.75]),
        par in select(vec![Par::Seq, Par::Rayon]),
        seed in any::<u64>(),
    ) {
        let mut r = rng(seed);
        let a = random_csr::<f64>(&mut r, rows, cols, density, 0.3);
        let x = random_dense::<f64>(&mut r, cols, d);
        let w = random_dense::<f64>(&mut r, d, 5);
        let out0 = random_dense::<f64>(&mut r, rows, d);
        let out0_g = random_dense::<f64>(&mut r, rows, 5);

        let mut prod = Array2::from_elem((rows, d), f64::NAN);
        spmm(alpha, a.view(), x.view(), 0.0, prod.view_mut(), par);
        let mut acc = out0.clone();
        spmm(alpha, a.view(), x.view(), 1.0, acc.view_mut(), par);
        let (row_abs, kmax) = csr_row_stats(a.view());
        let atol = error_bound(kmax, alpha, row_abs, 1.0, 1.0, 1.0);
        assert_close(acc.view(), (&out0 + &prod).view(), atol, 0.0);

        let mut prod_g = Array2::from_elem((rows, 5), f64::NAN);
        gemm(alpha, out0.view(), w.view(), 0.0, prod_g.view_mut(), par);
        let mut acc_g = out0_g.clone();
        gemm(alpha, out0.view(), w.view(), 1.0, acc_g.view_mut(), par);
        let atol = error_bound(d, alpha, d as f64, 1.0, 1.0, 1.0);
        assert_close(acc_g.view(), (&out0_g + &prod_g).view(), atol, 0.0);
    }
}

// ---------------------------------------------------------------------------------------------
// spmm: one summation order for every width, layout and thread count
// ---------------------------------------------------------------------------------------------

/// spmm's documented per-element order, by plain loops: `o ← 0` (β = 0), `out` (β = 1) or
/// `out·β`, then `o ← o + (α·a_ij)·x_jc` over the row's non-zeros in stored order (separate
/// multiply and add). Every path of the kernel must match it bit for bit.
fn spmm_in_kernel_order<F: Scalar>(
    alpha: F,
    a: CsrView<'_, F>,
    x: ArrayView2<'_, F>,
    beta: F,
    out: ArrayView2<'_, F>,
) -> Array2<F> {
    let d = x.ncols();
    let mut res = Array2::<F>::zeros((a.rows(), d));
    for (i, row) in a.outer_iterator().enumerate() {
        for c in 0..d {
            let mut o = if beta == F::zero() {
                F::zero()
            } else if beta == F::one() {
                out[[i, c]]
            } else {
                out[[i, c]] * beta
            };
            for (j, &v) in row.iter() {
                let w = alpha * v;
                o += w * x[[j, c]];
            }
            res[[i, c]] = o;
        }
    }
    res
}

/// Same shape and the same bits everywhere (f32 or f64).
fn bitwise_eq<F: Scalar>(a: ArrayView2<'_, F>, b: ArrayView2<'_, F>) -> bool {
    let bits = |v: &F| v.to_f64_lossless().to_bits();
    a.dim() == b.dim() && a.iter().map(bits).eq(b.iter().map(bits))
}

/// spmm (under `par`) against [`spmm_in_kernel_order`], bit for bit, with NaN in the gaps of
/// strided layouts left untouched; with β = 0 and α ∈ {0, ±1, ½, 2} also against
/// [`reference::spmm`], whose Σ-then-scale order then gives the same bits.
#[allow(clippy::too_many_arguments)]
fn check_spmm_kernel_order<F: Scalar>(
    a: CsrView<'_, F>,
    x: ArrayView2<'_, F>,
    alpha: F,
    beta: F,
    out0: ArrayView2<'_, F>,
    x_layout: Layout,
    out_layout: Layout,
    par: Par,
) {
    let x = Laid::new(x, x_layout);
    let mut out = Laid::new(out0, out_layout);
    spmm(alpha, a, x.view(), beta, out.view_mut(), par);
    let expected = spmm_in_kernel_order(alpha, a, x.view(), beta, out0);
    assert!(
        bitwise_eq(out.view(), expected.view()),
        "spmm differs from its summation order: {:?} (nnz {}), d = {}, α = {alpha}, β = {beta}, \
         x {x_layout:?}, out {out_layout:?}, {par:?}",
        a.shape(),
        a.nnz(),
        x.view().ncols()
    );
    assert!(out.gaps_untouched());
    let exact_alpha = [0.0, 1.0, -1.0, 0.5, 2.0].contains(&alpha.to_f64_lossless());
    if beta == F::zero() && exact_alpha {
        let oracle = reference::spmm(alpha, a, x.view(), beta, out0);
        assert!(
            bitwise_eq(out.view(), oracle.view()),
            "spmm differs from reference::spmm: d = {}, α = {alpha}",
            x.view().ncols()
        );
    }
}

/// Every width × every layout of X (with row-major out) and of out (with row-major X), for a
/// few α/β: deterministic coverage of each compile-time width, the column-block fallback and
/// the strided path, all in one summation order, for f32 and f64.
#[test]
fn spmm_every_width_and_layout_in_kernel_order() {
    let mut r = rng(11);
    let full32 = random_csr::<f32>(&mut r, 90, 70, 0.15, 0.2);
    let full64 = random_csr::<f64>(&mut r, 90, 70, 0.15, 0.2);
    let combos: Vec<(Layout, Layout)> = LAYOUTS
        .iter()
        .map(|&l| (l, Layout::Standard))
        .chain(LAYOUTS[1..].iter().map(|&l| (Layout::Standard, l)))
        .collect();
    let ab = [(1.0, 0.0), (-0.75, 1.0), (2.5, 0.5), (1.0, -2.0)];
    for d in SPMM_WIDTHS {
        let x32 = random_dense::<f32>(&mut r, 70, d);
        let o32 = random_dense::<f32>(&mut r, 90, d);
        let x64 = random_dense::<f64>(&mut r, 70, d);
        let o64 = random_dense::<f64>(&mut r, 90, d);
        for &(xl, ol) in &combos {
            for (i, &(alpha, beta)) in ab.iter().enumerate() {
                let par = if i % 2 == 0 { Par::Seq } else { Par::Rayon };
                // A row slice (row pointer not starting at 0) for half of the cases.
                let a32 = if i < 2 {
                    full32.view()
                } else {
                    full32.slice_outer(20..80)
                };
                let a64 = if i < 2 {
                    full64.view()
                } else {
                    full64.slice_outer(20..80)
                };
                let (m32, m64) = (a32.rows(), a64.rows());
                check_spmm_kernel_order(
                    a32,
                    x32.view(),
                    alpha as f32,
                    beta as f32,
                    o32.slice(s![..m32, ..]),
                    xl,
                    ol,
                    par,
                );
                check_spmm_kernel_order(
                    a64,
                    x64.view(),
                    alpha,
                    beta,
                    o64.slice(s![..m64, ..]),
                    xl,
                    ol,
                    par,
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// spmm in its summation order for random shapes, widths, layouts, α, β and `Par`; with
    /// exact α and β = 0 also bit-identical to the reference oracle.
    #[test]
    fn spmm_kernel_order_bitwise(
        rows in prop_oneof![awkward(), 200usize..600],
        cols in awkward(),
        d in spmm_widths(),
        density in prop_oneof![Just(0.0f64), 0.0f64..0.3, Just(1.0)],
        empty_frac in 0.0f64..0.6,
        alpha in select(vec![1.0f32, -1.0, 0.5, 2.0, 0.0, -0.75, 2.5]),
        beta in select(vec![0.0f32, 1.0, 0.5, -2.0]),
        x_layout in select(LAYOUTS.to_vec()),
        out_layout in select(LAYOUTS.to_vec()),
        par in select(vec![Par::Seq, Par::Rayon]),
        row_slice in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let mut r = rng(seed);
        let full = random_csr::<f32>(&mut r, rows, cols, density, empty_frac);
        let a = if row_slice { full.slice_outer(rows / 3..rows - rows / 4) } else { full.view() };
        let x = random_dense::<f32>(&mut r, cols, d);
        let out0 = random_dense::<f32>(&mut r, a.rows(), d);
        check_spmm_kernel_order(a, x.view(), alpha, beta, out0.view(), x_layout, out_layout, par);
    }
}

// ---------------------------------------------------------------------------------------------
// Normalised adjacency
// ---------------------------------------------------------------------------------------------

fn direction(undirected: bool) -> Direction {
    if undirected {
        Direction::Undirected
    } else {
        Direction::Directed
    }
}

/// ⟨X, Y⟩ and Σ|X_ij·Y_ij| (the scale of its rounding error).
fn inner(x: ArrayView2<'_, f64>, y: ArrayView2<'_, f64>) -> (f64, f64) {
    x.iter()
        .zip(y.iter())
        .fold((0.0, 0.0), |(s, t), (a, b)| (s + a * b, t + (a * b).abs()))
}

fn norm2(x: ArrayView2<'_, f64>) -> f64 {
    x.iter().map(|v| v * v).sum::<f64>().sqrt()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// ⟨Â·X, Y⟩ = ⟨X, Âᵀ·Y⟩, and `a_t()` is exactly the transpose of `a()`.
    #[test]
    fn adjoint_identity(
        case in edge_case(),
        undirected in any::<bool>(),
        norm in select(vec![Norm::Symmetric, Norm::Row]),
        d in 1usize..5,
        seed in any::<u64>(),
    ) {
        let EdgeCase { n, edges } = case;
        let g = Graph::try_from_edges(n, &edges, direction(undirected)).unwrap();
        let adj = NormAdj::<f64>::new(&g, norm);
        let mut r = rng(seed);
        let x = random_dense::<f64>(&mut r, n, d);
        let y = random_dense::<f64>(&mut r, n, d);
        let mut ax = Array2::zeros((n, d));
        spmm(1.0, adj.a(), x.view(), 0.0, ax.view_mut(), Par::Rayon);
        let mut aty = Array2::zeros((n, d));
        spmm(1.0, adj.a_t(), y.view(), 0.0, aty.view_mut(), Par::Rayon);
        let (lhs, s1) = inner(ax.view(), y.view());
        let (rhs, s2) = inner(x.view(), aty.view());
        let k = (0..n).map(|i| g.degree(i) + 1).max().unwrap_or(1) + n * d;
        assert_close_scalar(lhs, rhs, 4.0 * k as f64 * f64::EPSILON * (s1 + s2), 0.0);
        csr_f64_exact_transpose_check(adj.a(), adj.a_t());
    }

    /// Every entry of Â against Ã_ij / √(d̃_i d̃_j) (or Ã_ij / d̃_i) from the set oracle: the
    /// pattern is A plus every missing diagonal entry, and no self-loop is doubled.
    #[test]
    fn normalisation_matches_oracle(
        case in edge_case(),
        undirected in any::<bool>(),
        norm in select(vec![Norm::Symmetric, Norm::Row]),
    ) {
        let EdgeCase { n, edges } = case;
        let g = Graph::try_from_edges(n, &edges, direction(undirected)).unwrap();
        let oracle = GraphOracle::new(n, &edges, undirected);
        let adj = NormAdj::<f64>::new(&g, norm);
        let a = adj.a();
        prop_assert_eq!(a.shape(), (n, n));
        prop_assert_eq!(adj.n_nodes(), n);
        let expected_nnz: usize = (0..n).map(|i| oracle.deg_tilde(i)).sum();
        prop_assert_eq!(adj.nnz(), expected_nnz);
        if undirected {
            // m = 2·|E without loops| + n
            prop_assert_eq!(adj.nnz(), 2 * (oracle.n_edges - oracle.self_loops) + n);
        }
        for (i, row) in a.outer_iterator().enumerate() {
            let mut pattern = oracle.rows[i].clone();
            pattern.insert(i as u32);
            let cols: Vec<u32> = row.indices().to_vec();
            prop_assert_eq!(&cols, &pattern.into_iter().collect::<Vec<_>>(), "row {}", i);
            prop_assert!(a.get(i, i).is_some(), "diagonal entry {} missing", i);
            for (j, &v) in row.iter() {
                let (di, dj) = (oracle.deg_tilde(i) as f64, oracle.deg_tilde(j) as f64);
                let want = match norm {
                    Norm::Symmetric => 1.0 / (di * dj).sqrt(),
                    Norm::Row => 1.0 / di,
                };
                assert_close_scalar(v, want, 0.0, 4.0 * f64::EPSILON);
            }
        }
    }

    /// Undirected + symmetric norm: Â = Âᵀ entry for entry, and only one matrix is stored.
    #[test]
    fn symmetric_norm_is_symmetric(case in edge_case()) {
        let g = Graph::try_from_edges(case.n, &case.edges, Direction::Undirected).unwrap();
        let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
        prop_assert!(adj.is_symmetric());
        let a = adj.a();
        for (&v, (i, j)) in a.iter() {
            let (i, j) = (i as usize, j as usize);
            prop_assert_eq!(a.get(j, i).map(|w| w.to_bits()), Some(v.to_bits()), "({}, {})", i, j);
        }
    }

    #[test]
    fn row_norm_rows_sum_to_one(case in edge_case(), undirected in any::<bool>()) {
        let g = Graph::try_from_edges(case.n, &case.edges, direction(undirected)).unwrap();
        let adj = NormAdj::<f64>::new(&g, Norm::Row);
        for (i, row) in adj.a().outer_iterator().enumerate() {
            let s: f64 = row.data().iter().sum();
            let tol = (row.nnz() + 1) as f64 * f64::EPSILON;
            prop_assert!((s - 1.0).abs() <= tol, "row {} sums to {}", i, s);
        }
    }

    /// ‖Â·x‖₂ ≤ ‖x‖₂ for symmetric normalisation: on random x, and along a power iteration,
    /// which converges to the eigenvalue of largest modulus (1) and so tests the bound tightly.
    #[test]
    fn symmetric_norm_is_a_contraction(case in edge_case(), seed in any::<u64>()) {
        let n = case.n;
        let g = Graph::try_from_edges(n, &case.edges, Direction::Undirected).unwrap();
        let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
        let mut r = rng(seed);
        let mut x = random_dense::<f64>(&mut r, n, 3);
        let mut y = Array2::zeros((n, 3));
        for step in 0..40 {
            spmm(1.0, adj.a(), x.view(), 0.0, y.view_mut(), Par::Seq);
            for c in 0..3 {
                let (nx, ny) = (norm2(x.slice(s![.., c..c + 1])), norm2(y.slice(s![.., c..c + 1])));
                prop_assert!(ny <= nx * (1.0 + 1e-12), "step {}: ‖Âx‖ = {} > ‖x‖ = {}", step, ny, nx);
            }
            let ny = norm2(y.view());
            if ny == 0.0 {
                break;
            }
            x.assign(&(&y / ny));
        }
    }

    /// `Graph::try_from_edges` against the set oracle: sorted unique neighbours, symmetric
    /// adjacency when undirected, and the build statistics.
    #[test]
    fn graph_build_matches_oracle(case in edge_case(), undirected in any::<bool>()) {
        let EdgeCase { n, edges } = case;
        let g = Graph::try_from_edges(n, &edges, direction(undirected)).unwrap();
        let oracle = GraphOracle::new(n, &edges, undirected);
        prop_assert_eq!(g.n_nodes(), n);
        prop_assert_eq!(g.is_directed(), !undirected);
        for i in 0..n {
            let nb = g.neighbors(i);
            prop_assert!(nb.windows(2).all(|w| w[0] < w[1]), "row {} not sorted/unique: {:?}", i, nb);
            prop_assert_eq!(nb, &oracle.rows[i].iter().copied().collect::<Vec<_>>()[..]);
            prop_assert_eq!(g.degree(i), nb.len());
            if undirected {
                for &j in nb {
                    prop_assert!(g.neighbors(j as usize).binary_search(&(i as u32)).is_ok());
                }
            }
        }
        prop_assert_eq!(g.nnz(), oracle.nnz());
        prop_assert_eq!(g.indptr().len(), n + 1);
        prop_assert_eq!(g.indices().len(), oracle.nnz());
        let st = g.stats();
        prop_assert_eq!(st.input_edges, edges.len());
        prop_assert_eq!(st.duplicates_merged, oracle.stored_before_merge - oracle.nnz());
        prop_assert_eq!(st.self_loops, oracle.self_loops);
        prop_assert_eq!(g.n_edges(), oracle.n_edges);
        let isolated = (0..n).filter(|&i| oracle.rows[i].iter().all(|&j| j as usize == i)).count();
        prop_assert_eq!(g.n_isolated(), isolated);
    }
}

// ---------------------------------------------------------------------------------------------
// Fused ReLU / dropout epilogues == the unfused kernels, bit for bit
// ---------------------------------------------------------------------------------------------

/// The raw bits of a float, for bit-for-bit comparisons that tell +0 from −0 and keep NaN
/// payloads.
trait Bits: Scalar {
    fn bits(self) -> u64;
}
impl Bits for f32 {
    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }
}
impl Bits for f64 {
    fn bits(self) -> u64 {
        self.to_bits()
    }
}

/// `Some(index)` of the first element whose bits differ (or `Some(usize::MAX)` for shapes).
fn first_bit_diff<F: Bits>(a: ArrayView2<'_, F>, b: ArrayView2<'_, F>) -> Option<usize> {
    if a.dim() != b.dim() {
        return Some(usize::MAX);
    }
    a.iter()
        .zip(b.iter())
        .position(|(x, y)| x.bits() != y.bits())
}

/// Values that stress the epilogues: signed zeros, subnormals, ±1, ±∞, NaN, and uniform
/// values in (−2, 2) most of the time.
fn epilogue_value(rng: &mut rand_chacha::ChaCha8Rng) -> f64 {
    use rand::RngExt;
    const SPECIAL: [f64; 10] = [
        0.0,
        -0.0,
        1e-40,
        -1e-40,
        1.0,
        -1.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1e-3,
    ];
    if rng.random_range(0.0..1.0) < 0.2 {
        SPECIAL[rng.random_range(0..SPECIAL.len())]
    } else {
        rng.random_range(-2.0..2.0)
    }
}

/// Counts of the codes seen: [RELU_OFF, DROP_KEPT, DROP_ZERO].
type CodeCounts = [usize; 3];

/// One case of the epilogue comparison for `rows × width` with dropout `p` (`p = 0` also runs
/// the no-dropout epilogue `bias_relu`), values drawn from `seed`. Checks:
/// - `bias_relu` (with and without bias) == `add_bias` → `relu_inplace`, bit for bit;
/// - `bias_relu_dropout_fold` output == `add_bias` → `relu_inplace` → `· mask`, bit for bit;
/// - its code is RELU_OFF exactly where the ReLU output is not positive, else DROP_KEPT or
///   DROP_ZERO as the mask keeps or drops;
/// - `dropout_relu_backward_code` == `relu_backward_inplace` (on the ReLU output) → `· mask`,
///   bit for bit: a dropped unit gives exactly g·0 (−0 for a negative g, NaN for an infinite
///   one), a unit whose ReLU is off gives +0 whatever g is.
fn check_epilogues<F: Bits>(
    rows: usize,
    width: usize,
    p: f64,
    with_bias: bool,
    seed: u64,
) -> CodeCounts {
    use sparse_gcn::kernels::elementwise::{code_at, code_bytes};
    use sparse_gcn::kernels::{
        add_bias, bias_relu, bias_relu_dropout_fold, dropout_mask, dropout_relu_backward_code,
        relu_backward_inplace, relu_inplace, DROP_KEPT, DROP_ZERO, RELU_OFF,
    };
    let mut r = rng(seed);
    let f = F::from_f64_lossy;
    let z0 = Array2::from_shape_simple_fn((rows, width), || f(epilogue_value(&mut r)));
    let b = ndarray::Array1::from_shape_fn(width, |_| f(epilogue_value(&mut r)));
    let g0 = Array2::from_shape_simple_fn((rows, width), || f(epilogue_value(&mut r)));
    let bias = with_bias.then(|| b.view());
    let what = format!(
        "{} rows {rows} width {width} p {p} bias {with_bias} seed {seed}",
        std::any::type_name::<F>()
    );

    // The unfused forward: a = ReLU(z + b).
    let mut a = z0.clone();
    if let Some(b) = bias {
        add_bias(a.view_mut(), b, Par::Seq);
    }
    relu_inplace(a.view_mut(), Par::Rayon);

    let mut fused = z0.clone();
    bias_relu(fused.view_mut(), bias);
    assert_eq!(
        first_bit_diff(fused.view(), a.view()),
        None,
        "bias_relu: {what}"
    );

    let mut mask = vec![F::zero(); rows * width];
    dropout_mask(&mut rng(seed ^ 0x5eed), p, &mut mask);
    let mask = Array2::from_shape_vec((rows, width), mask).unwrap();
    let keep = f(1.0 / (1.0 - p));

    let expected_h = &a * &mask;
    let mut h = z0.clone();
    let mut codes = vec![255u8; code_bytes(rows * width)];
    bias_relu_dropout_fold(h.view_mut(), bias, mask.view(), &mut codes);
    let code: Vec<u8> = (0..rows * width).map(|k| code_at(&codes, k)).collect();
    assert_eq!(
        first_bit_diff(h.view(), expected_h.view()),
        None,
        "fold output: {what}"
    );
    let mut counts = [0usize; 3];
    for ((&c, &av), &m) in code.iter().zip(&a).zip(&mask) {
        // NaN is not positive either: `a > 0` is the test.
        let positive = av > F::zero();
        let expected = if !positive {
            RELU_OFF
        } else if m == F::zero() {
            DROP_ZERO
        } else {
            DROP_KEPT
        };
        assert_eq!(c, expected, "code: {what}");
        counts[usize::from(c)] += 1;
    }

    // The unfused backward: ReLU' from the ReLU output, then the mask.
    let mut expected_g = g0.clone();
    relu_backward_inplace(expected_g.view_mut(), a.view());
    expected_g.zip_mut_with(&mask, |g, &m| *g *= m);
    let mut dz = g0.clone();
    dropout_relu_backward_code(dz.view_mut(), &codes, keep, Par::Rayon);
    assert_eq!(
        first_bit_diff(dz.view(), expected_g.view()),
        None,
        "backward: {what}"
    );
    // Sequentially and on a transposed (non-contiguous) view: the same elements.
    let mut dz_seq = g0.clone();
    dropout_relu_backward_code(dz_seq.view_mut(), &codes, keep, Par::Seq);
    assert_eq!(
        first_bit_diff(dz_seq.view(), dz.view()),
        None,
        "backward Seq: {what}"
    );
    let mut dz_t = g0.t().to_owned();
    let mut dz_tv = dz_t.view_mut().reversed_axes();
    dropout_relu_backward_code(dz_tv.view_mut(), &codes, keep, Par::Rayon);
    assert_eq!(
        first_bit_diff(dz_tv.view(), dz.view()),
        None,
        "backward, strided: {what}"
    );
    // And elementwise from the codes, by the spec.
    for ((&d, &g), &c) in dz.iter().zip(&g0).zip(&code) {
        let want = match c {
            RELU_OFF => F::zero(),
            DROP_KEPT => g * keep,
            _ => g * F::zero(),
        };
        assert_eq!(d.bits(), want.bits(), "backward by code {c}: {what}");
    }
    counts
}

const EPILOGUE_WIDTHS: [usize; 4] = [1, 7, 64, 65];

#[test]
fn fused_epilogues_equal_unfused_kernels_bitwise() {
    for &width in &EPILOGUE_WIDTHS {
        for p in [0.2, 0.5, 0.8] {
            for with_bias in [false, true] {
                let mut total = [0usize; 3];
                for seed in 0..4 {
                    let c32 = check_epilogues::<f32>(40, width, p, with_bias, seed);
                    let c64 = check_epilogues::<f64>(40, width, p, with_bias, seed);
                    for k in 0..3 {
                        total[k] += c32[k] + c64[k];
                    }
                }
                // Every code occurs (so both mask values and the ReLU's both sides are tested).
                assert!(
                    total.iter().all(|&c| c > 0),
                    "width {width} p {p}: {total:?}"
                );
            }
        }
    }
}

#[test]
fn fused_backward_hand_cases() {
    use sparse_gcn::kernels::{dropout_relu_backward_code, DROP_KEPT, DROP_ZERO, RELU_OFF};
    let g = ndarray::arr2(&[[-3.0f64, 3.0, -3.0, 3.0, -0.0, f64::INFINITY, -2.5, f64::NAN]]);
    // Packed four a byte, element k in bits 2k, 2k + 1 of its byte.
    let pack = |c: [u8; 4]| c[0] | c[1] << 2 | c[2] << 4 | c[3] << 6;
    let codes = [
        pack([DROP_ZERO, DROP_ZERO, RELU_OFF, RELU_OFF]),
        pack([DROP_KEPT, RELU_OFF, DROP_KEPT, RELU_OFF]),
    ];
    let mut dz = g.clone();
    dropout_relu_backward_code(dz.view_mut(), &codes, 2.0, Par::Seq);
    let got: Vec<u64> = dz.iter().map(|v| v.to_bits()).collect();
    // Dropped: exactly g·0 (−0 for a negative g); ReLU off: +0 even for −3, ∞ or NaN; kept:
    // g·keep (−0·2 = −0).
    let want: Vec<u64> = [-0.0f64, 0.0, 0.0, 0.0, -0.0, 0.0, -5.0, 0.0]
        .iter()
        .map(|v| v.to_bits())
        .collect();
    assert_eq!(got, want);
    let mut dz = ndarray::arr2(&[[f64::INFINITY]]);
    dropout_relu_backward_code(dz.view_mut(), &[DROP_ZERO], 2.0, Par::Seq);
    assert!(dz[[0, 0]].is_nan(), "∞·0 is NaN, as the unfused g·mask");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// [`check_epilogues`] for random shapes, rates and values.
    #[test]
    fn fused_epilogues_equal_unfused_kernels_bitwise_prop(
        rows in 1usize..12,
        width in prop_oneof![select(EPILOGUE_WIDTHS.to_vec()), 1usize..80],
        p in prop_oneof![Just(0.0), Just(0.5), 0.01f64..0.95],
        with_bias in any::<bool>(),
        seed in any::<u64>(),
    ) {
        check_epilogues::<f32>(rows, width, p, with_bias, seed);
        check_epilogues::<f64>(rows, width, p, with_bias, seed);
    }
}
