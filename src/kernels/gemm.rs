//! `gemm`: out ← α·A·B + β·out, parallel over row blocks of `out`.
//!
//! Two paths, the same bits:
//! - **packed** (f32, α = 1, at least [`PACKED_MIN_ROWS`] rows, A with contiguous rows, `out`
//!   with contiguous rows, a CPU with AVX-512 F): the GCN's tall and skinny products H·W and
//!   G·Wᵀ. B (W or Wᵀ, k × n with k and n up to a few thousand) is packed once per call and
//!   shared by every row block; H's rows are read in place by AVX-512 micro-kernels of 24
//!   accumulators (`kernels::raw::gemm`), each element summed exactly as matrixmultiply's
//!   FMA kernels sum it (chunks of 256 over k, each a chain of fused multiply-adds in the
//!   order of k), so a model's bits do not depend on which path ran. A weight gradient's
//!   chunk Hᵀ·G with a narrow G (a class count, at most [`IN_PLACE_MAX_COLS`] columns) runs
//!   the same kernels with H and G read in place;
//! - **matrixmultiply** for every other product (f64, α ≠ 1, a wide weight gradient, other
//!   CPUs): `sgemm` / `dgemm` by [`Scalar::KIND`] on each row block.
//!
//! This file splits `out` into row blocks and picks the path; the micro-kernels and the call
//! of matrixmultiply are in `kernels::raw`, the crate's only `unsafe` code.

use ndarray::{ArrayView2, ArrayViewMut2, Axis};

use super::{raw, shape_panic};
use crate::{Par, Scalar};

/// Blocks of `out` are split in halves while they have more rows than this and more than
/// [`GEMM_TASK_FLOPS`] multiply-adds. The split depends only on the shapes, never on the
/// thread count, so results are bit-identical for any thread count.
pub const GEMM_MIN_ROWS: usize = 256;
/// See [`GEMM_MIN_ROWS`].
pub const GEMM_TASK_FLOPS: usize = 1 << 20;

/// out ← α·A·B + β·out. Any strides: transposes are free (`a.t()`).
///
/// The packed path or matrixmultiply (see the [module docs](self)); matrixmultiply's own
/// threading stays off. Under [`Par::Rayon`] the rows of `out` are split
/// into blocks (halving while a block has more than [`GEMM_MIN_ROWS`] rows and
/// [`GEMM_TASK_FLOPS`] multiply-adds), one single-threaded GEMM per block. β = 0 never reads
/// `out`.
///
/// # Shapes
/// `a: m×k`, `b: k×n`, `out: m×n`.
///
/// # Panics
/// If the shapes do not agree.
///
/// # Complexity
/// O(m·k·n) time. One allocation a call, of either path's packing buffer (B packed, k·n
/// rounded up to panels of 16, 32 or 48 columns, or matrixmultiply's own).
///
/// # Examples
/// ```
/// use ndarray::{array, Array2};
/// use sparse_gcn::{kernels::gemm, Par};
/// let a = array![[1.0f64, 2.0], [3.0, 4.0]];
/// let mut out = Array2::zeros((2, 2));
/// gemm(1.0, a.view(), a.t(), 0.0, out.view_mut(), Par::Seq); // A·Aᵀ
/// assert_eq!(out, array![[5.0, 11.0], [11.0, 25.0]]);
/// ```
#[track_caller]
pub fn gemm<F: Scalar>(
    alpha: F,
    a: ArrayView2<'_, F>,
    b: ArrayView2<'_, F>,
    beta: F,
    out: ArrayViewMut2<'_, F>,
    par: Par,
) {
    let ((m, k), (k2, n)) = (a.dim(), b.dim());
    if k != k2 || out.dim() != (m, n) {
        shape_panic(
            "gemm",
            &[("a", a.dim()), ("b", b.dim()), ("out", out.dim())],
        );
    }
    let _span = super::profile::span(super::profile::Phase::Gemm, || super::profile::Work::Gemm {
        m,
        k,
        n,
    });
    if let Some(out) = packed(alpha, a, b, beta, out, par) {
        blocks(alpha, a, b, beta, out, par);
    }
}

/// The widest G whose weight-gradient chunk Hᵀ·G the packed path reads in place. Measured on
/// the AMD host of 2026-12-07, 2 threads, 1,024-row chunks of 169,984 × 256 H: for 40 columns
/// 120–128 GFLOP/s in place against matrixmultiply's 95–119; for 256 columns 152–156 against
/// 161–165 (the strided reads of H and G miss L1; matrixmultiply packs both).
pub const IN_PLACE_MAX_COLS: usize = 48;

/// The packed path when it applies (then `None`); `out` handed back otherwise. H·W and G·Wᵀ
/// (A with contiguous rows): W or Wᵀ packed once for every row block. Hᵀ·G (a weight
/// gradient's chunk: A transposed, G with contiguous rows and at most [`IN_PLACE_MAX_COLS`]
/// columns): both read in place, as packing a new G every call would cost what the kernel
/// saves.
fn packed<'o, F: Scalar>(
    alpha: F,
    a: ArrayView2<'_, F>,
    b: ArrayView2<'_, F>,
    beta: F,
    out: ArrayViewMut2<'o, F>,
    par: Par,
) -> Option<ArrayViewMut2<'o, F>> {
    let ((m, k), n) = (a.dim(), b.ncols());
    let out_rows = out.strides()[0] >= 0 && (n <= 1 || out.strides()[1] == 1);
    if alpha != F::one() || k == 0 || m < PACKED_MIN_ROWS || !out_rows || !raw::gemm::available() {
        return Some(out);
    }
    let (Some(a32), Some(b32)) = (raw::gemm::view_f32(a), raw::gemm::view_f32(b)) else {
        return Some(out);
    };
    let a_rows = k == 1 || a32.strides()[1] == 1;
    let b_rows = n <= 1 || b32.strides()[1] == 1;
    let packed_b;
    let b_op = if a_rows {
        let Some(p) = raw::gemm::PackedB::new(b32) else {
            return Some(out);
        };
        packed_b = p;
        raw::gemm::BOperand::Packed(&packed_b)
    } else if b_rows && n <= IN_PLACE_MAX_COLS {
        raw::gemm::BOperand::Rows(b32)
    } else {
        return Some(out);
    };
    let Some(o32) = raw::gemm::view_mut_f32(out) else {
        unreachable!("out is f32 (as a and b are) and its strides are non-negative")
    };
    packed_blocks(a32, b_op, beta.to_f64_lossless() as f32, o32, par);
    None
}

/// The packed path (see the [module docs](self)) takes products of at least this many rows
/// (below it, packing `B` costs more than it saves).
pub const PACKED_MIN_ROWS: usize = 64;

/// [`blocks`] on the packed path: the same split, one B for every block.
fn packed_blocks(
    a: ArrayView2<'_, f32>,
    b: raw::gemm::BOperand<'_>,
    beta: f32,
    out: ArrayViewMut2<'_, f32>,
    par: Par,
) {
    let (m, k) = a.dim();
    let n = b.dim().1;
    if m > GEMM_MIN_ROWS && m.saturating_mul(k).saturating_mul(n) > GEMM_TASK_FLOPS {
        let mid = (m / 2).next_multiple_of(8).min(m - 1);
        let (a0, a1) = a.split_at(Axis(0), mid);
        let (o0, o1) = out.split_at(Axis(0), mid);
        par.join(
            || packed_blocks(a0, b, beta, o0, par),
            || packed_blocks(a1, b, beta, o1, par),
        );
    } else {
        raw::gemm::gemm_packed(a, b, beta, out);
    }
}

fn blocks<F: Scalar>(
    alpha: F,
    a: ArrayView2<'_, F>,
    b: ArrayView2<'_, F>,
    beta: F,
    out: ArrayViewMut2<'_, F>,
    par: Par,
) {
    let (m, k) = a.dim();
    let n = b.ncols();
    if m > GEMM_MIN_ROWS && m.saturating_mul(k).saturating_mul(n) > GEMM_TASK_FLOPS {
        let mid = (m / 2).next_multiple_of(8).min(m - 1);
        let (a0, a1) = a.split_at(Axis(0), mid);
        let (o0, o1) = out.split_at(Axis(0), mid);
        par.join(
            || blocks(alpha, a0, b, beta, o0, par),
            || blocks(alpha, a1, b, beta, o1, par),
        );
    } else {
        raw::gemm_block(alpha, a, b, beta, out);
    }
}
