//! Node feature matrices: dense, or sparse CSR for bag-of-words inputs (~1 % dense).

use ndarray::{Array2, Axis};

use crate::id::DataId;
use crate::kernels::transpose::{transpose_with_pos, CsrArrays};
use crate::kernels::NewTrusted;
use crate::kernels::{Csr, CsrView};
use crate::{Error, Result, Scalar};

/// A sparse feature matrix X (n × in_dim, CSR) with its transpose Xᵀ (CSR), computed once, so
/// both X·W and the weight gradient Xᵀ·G are row-parallel sparse × dense products.
#[derive(Debug, Clone)]
pub struct SparseFeatures<F> {
    x: Csr<F>,
    x_t: Csr<F>,
    /// For each stored entry k of X, its position in Xᵀ's storage.
    t_pos: Vec<usize>,
}

impl<F: Scalar> SparseFeatures<F> {
    /// Wraps a CSR matrix and computes its transpose (a counting sort by column, O(nnz + cols)).
    pub fn new(x: Csr<F>) -> Self {
        let (rows, cols) = x.shape();
        let ip = x.indptr();
        let (t, t_pos) = transpose_with_pos(cols, ip.raw_storage(), x.indices(), Some(x.data()));
        let CsrArrays {
            indptr: t_indptr,
            indices: t_indices,
            data: t_data,
        } = t;
        let x_t = Csr::new_trusted_pub((cols, rows), t_indptr, t_indices, t_data);
        SparseFeatures { x, x_t, t_pos }
    }
    /// X.
    pub fn x(&self) -> CsrView<'_, F> {
        self.x.view()
    }
    /// Xᵀ.
    pub(crate) fn x_t(&self) -> CsrView<'_, F> {
        self.x_t.view()
    }
    /// The stored values of X, to rewrite in place (the pattern stays); call
    /// `SparseFeatures::sync_transpose` afterwards.
    pub fn values_mut(&mut self) -> &mut [F] {
        self.x.data_mut()
    }

    /// X's mutable view (pattern fixed), for a numeric product written into it; call
    /// [`SparseFeatures::sync_transpose`] afterwards.
    pub(crate) fn x_mut(&mut self) -> sprs::CsMatViewMutI<'_, F, u32, usize> {
        self.x.view_mut()
    }

    /// Copies X's values into Xᵀ's storage (after [`SparseFeatures::values_mut`]).
    pub(crate) fn sync_transpose(&mut self) {
        let dst = self.x_t.data_mut();
        for (&v, &p) in self.x.data().iter().zip(&self.t_pos) {
            dst[p] = v;
        }
    }

    /// A copy with the stored values replaced by `values` (same pattern, e.g. after dropout);
    /// Xᵀ's values are permuted to match.
    ///
    /// # Panics
    /// If `values.len() != nnz`.
    pub fn with_values(&self, values: Vec<F>) -> Self {
        assert_eq!(
            values.len(),
            self.x.nnz(),
            "with_values: wrong number of values"
        );
        let mut t_data = vec![F::zero(); values.len()];
        for (k, &v) in values.iter().enumerate() {
            t_data[self.t_pos[k]] = v;
        }
        let x = Csr::new_trusted_pub(
            self.x.shape(),
            self.x.indptr().raw_storage().to_vec(),
            self.x.indices().to_vec(),
            values,
        );
        let x_t = Csr::new_trusted_pub(
            self.x_t.shape(),
            self.x_t.indptr().raw_storage().to_vec(),
            self.x_t.indices().to_vec(),
            t_data,
        );
        SparseFeatures {
            x,
            x_t,
            t_pos: self.t_pos.clone(),
        }
    }
}

/// Node features: dense or sparse, with their identity ([`DataId`]).
///
/// The matrix is reached through [`Features::get`] (a [`FeaturesRef`] to match on); every
/// change goes through a method and gives the features a fresh id, so what a model computed
/// from them (keyed on the id) is never reused for other values. A clone keeps the id.
#[derive(Debug, Clone)]
pub struct Features<F> {
    id: DataId,
    repr: Repr<F>,
}

#[derive(Debug, Clone)]
enum Repr<F> {
    Dense(Array2<F>),
    Sparse(SparseFeatures<F>),
}

/// The matrix of [`Features`], borrowed.
#[derive(Debug, Clone, Copy)]
pub enum FeaturesRef<'a, F> {
    /// A dense n × in_dim matrix.
    Dense(&'a Array2<F>),
    /// A sparse CSR matrix with its transpose.
    Sparse(&'a SparseFeatures<F>),
}

/// Whether `nnz` non-zeros among `values` values are at most `max_density` of them (at least
/// one value counted): the rule of [`Features::into_sparse_if`], for a matrix held in parts.
pub(crate) fn sparse_enough(nnz: usize, values: usize, max_density: f64) -> bool {
    (nnz as f64) <= max_density * values.max(1) as f64
}

impl<F> Features<F> {
    /// Dense features (a fresh id).
    pub fn dense(x: Array2<F>) -> Self {
        Features {
            id: DataId::fresh(),
            repr: Repr::Dense(x),
        }
    }

    /// Sparse features (a fresh id).
    pub fn sparse(x: SparseFeatures<F>) -> Self {
        Features {
            id: DataId::fresh(),
            repr: Repr::Sparse(x),
        }
    }

    /// The identity of the values (see [`DataId`]).
    pub fn id(&self) -> DataId {
        self.id
    }

    /// The matrix, to match on.
    pub fn get(&self) -> FeaturesRef<'_, F> {
        match &self.repr {
            Repr::Dense(x) => FeaturesRef::Dense(x),
            Repr::Sparse(s) => FeaturesRef::Sparse(s),
        }
    }

    /// The dense matrix, if stored dense.
    pub fn as_dense(&self) -> Option<&Array2<F>> {
        match &self.repr {
            Repr::Dense(x) => Some(x),
            Repr::Sparse(_) => None,
        }
    }

    /// The sparse matrix, if stored sparse.
    pub(crate) fn as_sparse(&self) -> Option<&SparseFeatures<F>> {
        match &self.repr {
            Repr::Sparse(s) => Some(s),
            Repr::Dense(_) => None,
        }
    }
}

impl<F: Scalar> Features<F> {
    /// Number of rows (nodes).
    pub fn n_rows(&self) -> usize {
        match &self.repr {
            Repr::Dense(x) => x.nrows(),
            Repr::Sparse(s) => s.x.rows(),
        }
    }
    /// Number of columns (`in_dim`).
    pub fn n_cols(&self) -> usize {
        match &self.repr {
            Repr::Dense(x) => x.ncols(),
            Repr::Sparse(s) => s.x.cols(),
        }
    }
    /// Stored entries (n·in_dim when dense).
    pub fn nnz(&self) -> usize {
        match &self.repr {
            Repr::Dense(x) => x.len(),
            Repr::Sparse(s) => s.x.nnz(),
        }
    }
    /// Whether stored sparse.
    pub fn is_sparse(&self) -> bool {
        matches!(self.repr, Repr::Sparse(_))
    }

    /// Overwrites `self` with `rows` × `d` dense values that `fill` appends to the (cleared)
    /// storage of the last dense values, so that refilling allocates nothing once it has held
    /// as many; a fresh id.
    ///
    /// # Errors
    /// `fill`'s; [`crate::Error::Mismatch`] when it did not write `rows · d` values.
    pub(crate) fn assign_dense_with(
        &mut self,
        rows: usize,
        d: usize,
        fill: impl FnOnce(&mut Vec<F>) -> crate::Result<()>,
    ) -> crate::Result<()> {
        let mut v = match std::mem::replace(&mut self.repr, Repr::Dense(Array2::zeros((0, 0)))) {
            Repr::Dense(x) => x.into_raw_vec_and_offset().0,
            Repr::Sparse(_) => Vec::new(),
        };
        v.clear();
        fill(&mut v)?;
        let got = v.len();
        let x = Array2::from_shape_vec((rows, d), v).map_err(|_| crate::Error::Mismatch {
            what: "dense feature values written".into(),
            expected: rows.saturating_mul(d),
            got,
        })?;
        self.repr = Repr::Dense(x);
        self.id = DataId::fresh();
        Ok(())
    }

    /// `Features::select_rows` into `out` (a fresh id): dense rows are gathered into `out`'s
    /// storage when it is dense (no allocation once it has held as many values); sparse
    /// features are built anew.
    pub(crate) fn select_rows_into(&self, rows: &[u32], out: &mut Features<F>) {
        match (&self.repr, &mut out.repr) {
            (Repr::Dense(x), Repr::Dense(o)) => {
                let d = x.ncols();
                let (mut v, _) = std::mem::take(o).into_raw_vec_and_offset();
                crate::kernels::rows::gather_rows_into(x.view(), rows, &mut v);
                *o = Array2::from_shape_vec((rows.len(), d), v)
                    .unwrap_or_else(|_| unreachable!("rows·d elements were written"));
                out.id = DataId::fresh();
            }
            _ => *out = self.select_rows(rows),
        }
    }

    /// Relabels the rows in place: row `r` becomes the old row `new_to_old[r]` (a
    /// permutation of `0..n`). Dense rows follow the permutation's cycles through one row of
    /// scratch, so a whole second copy of X is never held; sparse rows are gathered anew.
    /// A fresh id.
    ///
    /// # Panics
    /// If `new_to_old` is not a permutation of the rows (the caller's
    /// [`Permutation`](crate::graph::Permutation) guarantees it).
    ///
    /// # Complexity
    /// O(n + stored values).
    pub(crate) fn permute_rows(&mut self, new_to_old: &[u32]) {
        assert_eq!(new_to_old.len(), self.n_rows(), "permute_rows: length");
        self.id = DataId::fresh();
        let x = match &mut self.repr {
            Repr::Dense(x) => x,
            Repr::Sparse(_) => {
                *self = self.select_rows(new_to_old);
                return;
            }
        };
        let d = x.ncols();
        let flat = x
            .as_slice_mut()
            .unwrap_or_else(|| unreachable!("dense features are stored row-major"));
        let mut done = vec![false; new_to_old.len()];
        let mut tmp = vec![F::zero(); d];
        for start in 0..new_to_old.len() {
            if done[start] {
                continue;
            }
            tmp.copy_from_slice(&flat[start * d..(start + 1) * d]);
            let mut r = start;
            loop {
                done[r] = true;
                let src = new_to_old[r] as usize;
                if src == start {
                    flat[r * d..(r + 1) * d].copy_from_slice(&tmp);
                    break;
                }
                flat.copy_within(src * d..(src + 1) * d, r * d);
                r = src;
            }
        }
    }

    /// The rows `rows` (any order, repeats allowed): row k of the result is row `rows[k]`,
    /// stored as `self` is (sparse rows keep their column order; Xᵀ is recomputed).
    ///
    /// # Panics
    /// If a row is out of range.
    ///
    /// # Complexity
    /// O(rows + their entries).
    pub(crate) fn select_rows(&self, rows: &[u32]) -> Features<F> {
        match &self.repr {
            Repr::Dense(x) => Features::dense(crate::kernels::rows::gather_rows(x.view(), rows)),
            Repr::Sparse(s) => {
                let x = s.x();
                let ip = x.indptr();
                let ip = ip.raw_storage();
                let off = ip[0];
                let mut indptr = Vec::with_capacity(rows.len() + 1);
                indptr.push(0usize);
                let mut indices = Vec::new();
                let mut data = Vec::new();
                for &o in rows {
                    let r = (ip[o as usize] - off)..(ip[o as usize + 1] - off);
                    indices.extend_from_slice(&x.indices()[r.clone()]);
                    data.extend_from_slice(&x.data()[r]);
                    indptr.push(indices.len());
                }
                Features::sparse(SparseFeatures::new(Csr::new_trusted_pub(
                    (rows.len(), x.cols()),
                    indptr,
                    indices,
                    data,
                )))
            }
        }
    }

    /// Checks that every value is finite.
    ///
    /// # Errors
    /// [`Error::NonFiniteValue`] naming the first non-finite entry.
    pub(crate) fn check_finite(&self, what: &str) -> Result<()> {
        let bad = |row: usize, col: usize, v: F| Error::NonFiniteValue {
            what: what.to_string(),
            row,
            col,
            value: v.to_f64_lossless(),
        };
        // A parallel pass over the values first (most data passes): the search for the first
        // bad entry, in order, runs only when one exists.
        let values: Option<&[F]> = match &self.repr {
            Repr::Dense(x) => x.as_slice(),
            Repr::Sparse(s) => Some(s.x.data()),
        };
        if let Some(v) = values {
            use rayon::prelude::*;
            if v.par_chunks(1 << 16)
                .all(|c| c.iter().all(|v| v.is_finite()))
            {
                return Ok(());
            }
        }
        match &self.repr {
            Repr::Dense(x) => {
                for ((r, c), &v) in x.indexed_iter() {
                    if !v.is_finite() {
                        return Err(bad(r, c, v));
                    }
                }
            }
            Repr::Sparse(s) => {
                for (r, row) in s.x.outer_iterator().enumerate() {
                    for (c, &v) in row.iter() {
                        if !v.is_finite() {
                            return Err(bad(r, c, v));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether every stored value is ≥ 0 (bag-of-words, counts, TF-IDF), the inputs row
    /// normalisation is meant for.
    pub fn is_non_negative(&self) -> bool {
        match &self.repr {
            Repr::Dense(x) => x.iter().all(|&v| v >= F::zero()),
            Repr::Sparse(s) => s.x.data().iter().all(|&v| v >= F::zero()),
        }
    }

    /// Scales each row to unit L1 norm, x_i ← x_i / Σ_j |x_ij|: for non-negative features
    /// (bag-of-words) this is Kipf's `preprocess_features` (rows sum to 1); for signed dense
    /// features it stays bounded where a plain row sum could be near zero. An all-zero row stays
    /// zero.
    pub fn row_normalize(&mut self) {
        self.id = DataId::fresh();
        match &mut self.repr {
            Repr::Dense(x) => {
                for mut row in x.axis_iter_mut(Axis(0)) {
                    match row.as_slice_mut() {
                        Some(r) => normalize_row(r),
                        None => {
                            let s: F = row.iter().map(|v| v.abs()).sum();
                            if s != F::zero() {
                                row.map_inplace(|v| *v /= s);
                            }
                        }
                    }
                }
            }
            Repr::Sparse(s) => {
                let mut data = s.x.data().to_vec();
                let ip = s.x.indptr();
                for i in 0..s.x.rows() {
                    let r = ip.outer_inds_sz(i);
                    let sum: F = data[r.clone()].iter().map(|v| v.abs()).sum();
                    if sum != F::zero() {
                        data[r].iter_mut().for_each(|v| *v /= sum);
                    }
                }
                *s = s.with_values(data);
            }
        }
    }

    /// Converts dense features with at most `max_density` non-zeros (a fraction of
    /// `sparse_enough`'s values) to sparse (and leaves
    /// everything else as it is). Bag-of-words inputs are about 1 % dense.
    pub fn into_sparse_if(self, max_density: f64) -> Self {
        let (nnz, values) = (self.count_nonzeros(), self.n_rows() * self.n_cols());
        if sparse_enough(nnz, values, max_density) {
            self.into_sparse()
        } else {
            self
        }
    }

    /// Values ≠ 0 (stored entries ≠ 0 when sparse).
    pub(crate) fn count_nonzeros(&self) -> usize {
        match &self.repr {
            Repr::Dense(x) => x.iter().filter(|v| **v != F::zero()).count(),
            Repr::Sparse(s) => s.x.data().iter().filter(|v| **v != F::zero()).count(),
        }
    }

    /// The features stored sparse (their non-zeros; sparse ones as they are).
    pub(crate) fn into_sparse(self) -> Self {
        match &self.repr {
            Repr::Dense(x) => {
                let (n, f) = x.dim();
                let nnz = x.iter().filter(|v| **v != F::zero()).count();
                let mut indptr = Vec::with_capacity(n + 1);
                let mut indices = Vec::with_capacity(nnz);
                let mut data = Vec::with_capacity(nnz);
                indptr.push(0);
                for row in x.axis_iter(Axis(0)) {
                    for (j, &v) in row.iter().enumerate() {
                        if v != F::zero() {
                            indices.push(j as u32);
                            data.push(v);
                        }
                    }
                    indptr.push(indices.len());
                }
                Features::sparse(SparseFeatures::new(Csr::new_trusted_pub(
                    (n, f),
                    indptr,
                    indices,
                    data,
                )))
            }
            Repr::Sparse(_) => self,
        }
    }

    /// A dense copy (for tests and small inputs).
    pub fn to_dense(&self) -> Array2<F> {
        match &self.repr {
            Repr::Dense(x) => x.clone(),
            Repr::Sparse(s) => s.x.to_dense(),
        }
    }

    /// Converts the values to another scalar type (e.g. f32 → f64 for gradient checks).
    pub fn cast<G: Scalar>(&self) -> Features<G> {
        let c = |v: &F| G::from_f64_lossy(v.to_f64_lossless());
        match &self.repr {
            Repr::Dense(x) => Features::dense(x.map(c)),
            Repr::Sparse(s) => Features::sparse(SparseFeatures::new(Csr::new_trusted_pub(
                s.x.shape(),
                s.x.indptr().raw_storage().to_vec(),
                s.x.indices().to_vec(),
                s.x.data().iter().map(c).collect(),
            ))),
        }
    }
}

/// Row-normalises one dense row as [`Features::row_normalize`] does: x ← x / Σ|x|, the sum
/// taken in order (an all-zero row stays zero).
pub(crate) fn normalize_row<F: Scalar>(row: &mut [F]) {
    let s: F = row.iter().map(|v| v.abs()).sum();
    if s != F::zero() {
        row.iter_mut().for_each(|v| *v /= s);
    }
}
