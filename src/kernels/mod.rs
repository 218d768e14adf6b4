//! Low-level kernels: the boundary between the math and the memory.
//!
//! Conventions shared by every kernel here (`../shared/STYLE.md` §3.2):
//! 1. BLAS-order signatures, `out ← α·op(A)·op(B) + β·out`, with an explicit [`Par`].
//! 2. **β = 0 overwrites `out` and never reads it**, so NaN left in a reused buffer cannot leak.
//! 3. Kernels allocate nothing; the caller passes `out`. The one exception is `gemm`'s packing
//!    buffer (B packed once a call, or matrixmultiply's own), bounded by the weights' shapes.
//! 4. Shapes are asserted on entry (`#[track_caller]`) with every dimension in the message.
//! 5. One owner of threads: rayon. Each GEMM row block (the packed kernel or matrixmultiply)
//!    runs single-threaded.
//! 6. Work is split at data-determined points (nnz prefix sums, row counts), never by thread
//!    count, so results are **bit-identical for any number of threads**.
//! 7. Transposes are views: pass `x.t()` or a CSR of Âᵀ. The one CSR transpose of the crate
//!    (a counting sort) is [`transpose`](mod@transpose).
//! 8. Every kernel has a serial oracle in [`reference`](mod@reference).
//!
//! [`Par`]: crate::Par

pub mod elementwise;
pub mod gemm;
mod packed;
pub mod profile;
pub(crate) mod raw;
pub mod reference;
pub mod rows;
pub mod spmm;
mod spmm_rows;
pub mod transpose;

pub use elementwise::{
    add_bias, bias_relu, bias_relu_dropout_fold, col_sum, dropout_mask, dropout_relu_backward_code,
    fill_dropout_mask, relu_backward_inplace, relu_inplace, DROP_KEPT, DROP_ZERO, RELU_OFF,
};
pub use gemm::gemm;
pub use spmm::spmm;
pub(crate) use spmm::{spmm_tiled, tile_width};

/// CSR matrix with `u32` column indices and `usize` row pointers: the storage of Â and of sparse
/// feature matrices. Half the index traffic of `usize` indices in the memory-bound SpMM.
pub type Csr<F> = sprs::CsMatI<F, u32, usize>;
/// A borrowed [`Csr`].
pub type CsrView<'a, F> = sprs::CsMatViewI<'a, F, u32, usize>;

/// Constructor for a CSR whose invariants hold by construction (sorted, unique, in-range
/// indices; monotone row pointer): checks them in debug builds only.
pub(crate) trait NewTrusted<F> {
    fn new_trusted_pub(
        shape: (usize, usize),
        indptr: Vec<usize>,
        indices: Vec<u32>,
        data: Vec<F>,
    ) -> Self;
}

impl<F: crate::Scalar> NewTrusted<F> for Csr<F> {
    fn new_trusted_pub(
        shape: (usize, usize),
        indptr: Vec<usize>,
        indices: Vec<u32>,
        data: Vec<F>,
    ) -> Self {
        // `try_new` checks sortedness and bounds in O(nnz); that is cheap next to building the
        // arrays, so it runs in release too. A failure is a bug in this crate.
        match Csr::try_new(shape, indptr, indices, data) {
            Ok(m) => m,
            Err((_, _, _, e)) => panic!("internal CSR construction failed: {e}"),
        }
    }
}

#[cold]
#[inline(never)]
#[track_caller]
pub(crate) fn shape_panic(kernel: &str, dims: &[(&str, (usize, usize))]) -> ! {
    let parts: Vec<String> = dims
        .iter()
        .map(|(n, (r, c))| format!("{n}: {r}×{c}"))
        .collect();
    panic!("{kernel}: shapes do not agree ({})", parts.join(", "));
}
