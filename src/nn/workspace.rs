//! Buffers a model keeps from one training epoch to the next, so that the epoch loop allocates
//! nothing after its first epoch (see `docs/BENCHMARKS.md`, "Buffers reused across epochs").
//!
//! - [`Scratch`]: a model's workspace slot; cloning a model gives the clone an empty slot.
//! - [`ensure`]: (re)allocates an array only when its shape changes.
//! - [`SparseBuf`]: a sparse matrix and its transpose whose values are rewritten in place
//!   (dropout on sparse features, and the sparse product ÂX̃).
//! - [`InRef`]: a borrowed layer input, dense or sparse.

use std::fmt;

use ndarray::{Array2, ArrayView2, ArrayViewMut2};

use crate::graph::SparseFeatures;
use crate::kernels::{gemm, spmm, Csr, CsrView};
use crate::{Par, Scalar};

/// A workspace slot: empty until the first pass fills it. `Clone` gives an empty slot (a copy
/// of a model does not copy its buffers) and `Debug` prints only whether it is filled.
pub(crate) struct Scratch<T>(pub(crate) Option<Box<T>>);

impl<T> Default for Scratch<T> {
    fn default() -> Self {
        Scratch(None)
    }
}

impl<T> Clone for Scratch<T> {
    fn clone(&self) -> Self {
        Scratch(None)
    }
}

impl<T> fmt::Debug for Scratch<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Scratch(filled)"
        } else {
            "Scratch(empty)"
        })
    }
}

impl<T: Default> Scratch<T> {
    /// Takes the workspace out of the slot (a fresh one the first time); put it back with
    /// [`Scratch::put`]. Moving the box allocates nothing.
    pub(crate) fn take(&mut self) -> Box<T> {
        self.0.take().unwrap_or_default()
    }
    /// Puts a workspace back.
    pub(crate) fn put(&mut self, ws: Box<T>) {
        self.0 = Some(ws);
    }
}

/// Makes `a` an array of shape `dim`, reallocating only when its shape differs. The contents
/// are left as they are (callers overwrite them, e.g. with β = 0 kernels).
pub(crate) fn ensure<T: Clone + Default>(a: &mut Array2<T>, dim: (usize, usize)) {
    if a.dim() != dim {
        *a = Array2::default((0, 0));
        *a = Array2::default(dim);
    }
}

/// Makes the flat scratch `buf` hold at least `len` elements. It never shrinks, so a buffer
/// shared by arrays of several shapes is allocated once, at its largest size; the old one is
/// freed first (its contents are not kept), so growing never holds both.
pub(crate) fn grow<F: Scalar>(buf: &mut Vec<F>, len: usize) {
    if buf.len() < len {
        *buf = Vec::new();
        *buf = vec![F::zero(); len];
    }
}

/// The first `rows·cols` elements of `buf` as a rows × cols array (row-major).
///
/// # Panics
/// If `buf` is shorter.
#[track_caller]
pub(crate) fn view_mut<F>(buf: &mut [F], (rows, cols): (usize, usize)) -> ArrayViewMut2<'_, F> {
    ArrayViewMut2::from_shape((rows, cols), &mut buf[..rows * cols])
        .unwrap_or_else(|_| unreachable!("a contiguous slice of the right length"))
}

/// The first `rows·cols` elements of `buf` as a rows × cols array (row-major).
///
/// # Panics
/// If `buf` is shorter.
#[track_caller]
pub(crate) fn view<F>(buf: &[F], (rows, cols): (usize, usize)) -> ArrayView2<'_, F> {
    ArrayView2::from_shape((rows, cols), &buf[..rows * cols])
        .unwrap_or_else(|_| unreachable!("a contiguous slice of the right length"))
}

/// A borrowed layer input: dense, or sparse with its transpose.
#[derive(Debug, Clone, Copy)]
pub(crate) enum InRef<'a, F> {
    /// Dense n × in_dim.
    Dense(ArrayView2<'a, F>),
    /// Sparse X and Xᵀ.
    Sparse(CsrView<'a, F>, CsrView<'a, F>),
}

impl<F: Scalar> InRef<'_, F> {
    /// out ← self·W (β = 0).
    pub(crate) fn times(&self, w: ArrayView2<'_, F>, out: ArrayViewMut2<'_, F>, par: Par) {
        match self {
            InRef::Dense(x) => gemm(F::one(), *x, w, F::zero(), out, par),
            InRef::Sparse(x, _) => spmm(F::one(), *x, w, F::zero(), out, par),
        }
    }
    /// out ← selfᵀ·G + out (β = 1).
    pub(crate) fn t_times_acc(&self, g: ArrayView2<'_, F>, out: ArrayViewMut2<'_, F>, par: Par) {
        match self {
            InRef::Dense(x) => gemm(F::one(), x.t(), g, F::one(), out, par),
            InRef::Sparse(_, x_t) => spmm(F::one(), *x_t, g, F::one(), out, par),
        }
    }
}

/// A sparse matrix and its transpose (both CSR, the transpose's rows sorted as
/// [`SparseFeatures::new`] sorts them) whose stored values are rewritten in place; the pattern
/// never changes.
#[derive(Debug, Clone)]
pub(crate) struct SparseBuf<F> {
    x: Csr<F>,
    x_t: Csr<F>,
    /// For each stored entry k of X, its position in Xᵀ's storage.
    t_pos: Vec<usize>,
}

impl<F: Scalar> SparseBuf<F> {
    /// Wraps `x` and builds its transpose by a counting sort over columns (as
    /// [`SparseFeatures::new`]).
    pub(crate) fn new(x: Csr<F>) -> Self {
        let f = SparseFeatures::new(x);
        let x_t = f.x_t().to_owned();
        let x = f.x().to_owned();
        let mut fill: Vec<usize> = x_t.indptr().raw_storage().to_vec();
        let off = x.indptr().raw_storage()[0];
        let mut t_pos = vec![0usize; x.nnz()];
        for (i, r) in x.indptr().raw_storage().windows(2).enumerate() {
            for k in (r[0] - off)..(r[1] - off) {
                let j = x.indices()[k] as usize;
                t_pos[k] = fill[j];
                debug_assert_eq!(x_t.indices()[fill[j]] as usize, i);
                fill[j] += 1;
            }
        }
        SparseBuf { x, x_t, t_pos }
    }

    /// The borrowed input.
    pub(crate) fn as_in(&self) -> InRef<'_, F> {
        InRef::Sparse(self.x.view(), self.x_t.view())
    }

    /// The stored values of X, to rewrite; call [`SparseBuf::sync_transpose`] afterwards.
    pub(crate) fn values_mut(&mut self) -> &mut [F] {
        self.x.data_mut()
    }

    /// X's mutable view (pattern fixed), for a numeric product written into it.
    pub(crate) fn x_mut(&mut self) -> sprs::CsMatViewMutI<'_, F, u32, usize> {
        self.x.view_mut()
    }

    /// Copies X's values into Xᵀ's storage.
    pub(crate) fn sync_transpose(&mut self) {
        let src = self.x.data();
        let dst = self.x_t.data_mut();
        for (&v, &p) in src.iter().zip(&self.t_pos) {
            dst[p] = v;
        }
    }
}
