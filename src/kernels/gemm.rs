//! `gemm`: out ← α·A·B + β·out, parallel over row blocks of `out`.
//!
//! Two paths, the same bits:
//! - **packed** (f32, α = 1, at least [`PACKED_MIN_ROWS`] rows, A with contiguous rows, `out`
//!   with contiguous rows, a CPU with AVX-512 F or AVX2 with FMA): the GCN's tall and skinny
//!   products H·W and G·Wᵀ. B (W or Wᵀ, k × n with k and n up to a few thousand) is packed
//!   once per call and shared by every row block; H's rows are read in place by micro-kernels
//!   of 24 AVX-512 or 12 AVX2 accumulators (`kernels::raw::gemm_packed`, the widest the CPU
//!   has, chosen at run time), each element summed exactly as matrixmultiply's
//!   FMA kernels sum it (chunks of 256 over k, each a chain of fused multiply-adds in the
//!   order of k), so a model's bits do not depend on which path ran. A weight gradient's
//!   chunk Hᵀ·G with a narrow G (a class count, at most [`IN_PLACE_MAX_COLS`] columns) runs
//!   the AVX-512 kernels with H and G read in place;
//! - **matrixmultiply** for every other product (f64, α ≠ 1, a wide weight gradient, other
//!   CPUs): `sgemm` / `dgemm` by [`Scalar::KIND`] on each row block.
//!
//! This file splits `out` into row blocks and picks the path; the micro-kernels and the call
//! of matrixmultiply are in `kernels::raw`, the crate's only `unsafe` code.

use ndarray::{ArrayView2, ArrayViewMut2, Axis};

use super::{packed, raw, shape_panic};
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
        blocks(a, n, out, par, &|a, o| {
            raw::gemm_block(alpha, a, b, beta, o)
        });
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
    // Strides as `usize`: none negative on an axis longer than 1 (an axis of length 0 or 1
    // may have any stride, never stepped along: 0 here and in `gemm_packed`).
    let (sa, sb, so) = (
        packed::strides_of(a.dim(), a.strides()),
        packed::strides_of(b.dim(), b.strides()),
        packed::strides_of(out.dim(), out.strides()),
    );
    let (Some(sa), Some(sb), Some(so)) = (sa, sb, so) else {
        return Some(out);
    };
    let isa = packed::Isa::best().filter(|_| packed::is_f32::<F>());
    let Some(isa) = isa else {
        return Some(out);
    };
    if alpha != F::one() || k == 0 || m < PACKED_MIN_ROWS || (n > 1 && so.1 != 1) {
        return Some(out);
    }
    let packed_b;
    let b_op = if k == 1 || sa.1 == 1 {
        let Some(p) = packed::PackedB::new(b) else {
            return Some(out);
        };
        packed_b = p;
        packed::BOperand::Packed(&packed_b)
    } else if (n <= 1 || sb.1 == 1) && n <= IN_PLACE_MAX_COLS && isa == packed::Isa::Avx512 {
        packed::BOperand::Rows(b)
    } else {
        return Some(out);
    };
    let beta = beta.to_f64_lossless() as f32;
    blocks(a, n, out, par, &|a, o| {
        raw::gemm_packed(a, b_op, beta, o, isa)
    });
    None
}

/// The packed path (see the [module docs](self)) takes products of at least this many rows
/// (below it, packing `B` costs more than it saves).
pub const PACKED_MIN_ROWS: usize = 64;

/// The row blocks of every path: `out` (and A's rows) halved while a block has more than
/// [`GEMM_MIN_ROWS`] rows and [`GEMM_TASK_FLOPS`] multiply-adds (`n` columns of B), each leaf
/// block handed to `leaf` — a split of the shapes alone, so the bits never depend on the threads.
fn blocks<F: Scalar>(
    a: ArrayView2<'_, F>,
    n: usize,
    out: ArrayViewMut2<'_, F>,
    par: Par,
    leaf: &(dyn Fn(ArrayView2<'_, F>, ArrayViewMut2<'_, F>) + Sync),
) {
    let (m, k) = a.dim();
    if m > GEMM_MIN_ROWS && m.saturating_mul(k).saturating_mul(n) > GEMM_TASK_FLOPS {
        let mid = (m / 2).next_multiple_of(8).min(m - 1);
        let (a0, a1) = a.split_at(Axis(0), mid);
        let (o0, o1) = out.split_at(Axis(0), mid);
        par.join(
            || blocks(a0, n, o0, par, leaf),
            || blocks(a1, n, o1, par, leaf),
        );
    } else {
        leaf(a, out);
    }
}

#[cfg(test)]
mod tests {
    use ndarray::{s, Array2, Axis};

    use super::*;

    fn filled(rows: usize, cols: usize, salt: usize) -> Array2<f32> {
        Array2::from_shape_fn((rows, cols), |(i, j)| {
            let h = (i * 7919 + j * 104_729 + salt * 1_299_709) % 65_521;
            (h as f32 / 65_521.0 - 0.5) * 2.7
        })
    }

    /// `gemm` (whichever path it picks: packed B, B in place, matrixmultiply) gives
    /// matrixmultiply's bits on one block (`raw::gemm_block`) for α = 1, and the same bits at 1
    /// and 2 threads for any α, for tall
    /// products over row-block splits, transposed and stepped operands, α ≠ 1, narrow and wide
    /// weight-gradient shapes, f64 (which the f32 kernels must never take), and an `out` of one
    /// column whose column stride is negative (any stride is valid on a length-1 axis).
    #[test]
    fn gemm_gives_one_blocks_bits_on_every_path() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let shapes = [
            (64, 3, 40),
            (300, 128, 256),
            (1000, 17, 33),
            (97, 300, 48),
            (2100, 40, 1),
        ];
        for (t, &(m, k, n)) in shapes.iter().enumerate() {
            let a = filled(m, k, t);
            let a_t = a.t().to_owned();
            let b = filled(k, n, t + 10);
            let b_t = b.t().to_owned();
            let operands = [
                (a.view(), b.view()),
                (a.view(), b_t.t()),
                (a_t.t(), b.view()),
                (a_t.t(), b_t.t()),
            ];
            for (u, &(av, bv)) in operands.iter().enumerate() {
                for (alpha, beta) in [(1.0f32, 0.0f32), (1.0, 0.5), (-0.75, 1.0)] {
                    let init = filled(m, n, t + u + 20);
                    let mut want = init.clone();
                    if alpha == 1.0 {
                        raw::gemm_block(alpha, av, bv, beta, want.view_mut());
                    } else {
                        // matrixmultiply's edge tiles round α·acc before adding β·c, its full
                        // tiles fuse them: with α ≠ 1 the bits depend on where the row blocks
                        // split, so the reference is the same split on one thread.
                        gemm(alpha, av, bv, beta, want.view_mut(), Par::Seq);
                    }
                    for par in [Par::Seq, Par::Rayon] {
                        let mut got = init.clone();
                        pool.install(|| gemm(alpha, av, bv, beta, got.view_mut(), par));
                        let same = want
                            .iter()
                            .zip(&got)
                            .all(|(w, g)| w.to_bits() == g.to_bits());
                        assert!(same, "{m}x{k}x{n}, operands {u}, α {alpha}, β {beta}");
                    }
                }
            }
        }
        // f64 (never the f32 kernels): the naive sums of small integers, exact in any order.
        let a = Array2::from_shape_fn((200, 9), |(i, j)| ((i * 3 + j) % 7) as f64 - 3.0);
        let b = Array2::from_shape_fn((9, 20), |(i, j)| ((i + 2 * j) % 5) as f64 - 2.0);
        let mut got = Array2::<f64>::zeros((200, 20));
        gemm(1.0, a.view(), b.view(), 0.0, got.view_mut(), Par::Seq);
        assert_eq!(got, a.dot(&b));
        // One column of `out`, its column axis inverted (stride −1 on a length-1 axis).
        let (a, b) = (filled(128, 8, 1), filled(8, 1, 2));
        let mut want = Array2::<f32>::zeros((128, 1));
        raw::gemm_block(1.0, a.view(), b.view(), 0.0, want.view_mut());
        let mut got = Array2::<f32>::zeros((128, 1));
        got.invert_axis(Axis(1));
        gemm(1.0, a.view(), b.view(), 0.0, got.view_mut(), Par::Seq);
        assert_eq!(got, want);
        let mut got = Array2::<f32>::zeros((128, 3));
        gemm(
            1.0,
            a.view(),
            b.view(),
            0.0,
            got.slice_mut(s![.., 2..;-3]),
            Par::Seq,
        );
        assert_eq!(got.column(2), want.column(0));
    }
}
