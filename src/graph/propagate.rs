//! [`Propagate`]: the only way a layer reaches Â — its products (Â·X, Âᵀ·G) and the sums across
//! nodes a layer needs (Hᵀ·G, column sums, f64 row sums).
//!
//! A layer never reads Â's CSR arrays and never sums over nodes by itself: it asks its
//! `Propagate`. The local implementation, [`NormAdj`], is Â held whole in this process. A
//! row-partitioned implementation (each process owning a range of rows, exchanging the halo rows
//! before each product and combining the partial sums) overrides these methods and needs no
//! change to any layer.
//!
//! Every method follows the kernels' conventions (`crate::kernels`): β = 0 overwrites `out`
//! without reading it, and results are bit-identical for any thread count.

use ndarray::{ArrayView2, ArrayViewMut1, ArrayViewMut2};

use super::NormAdj;
use crate::kernels::{self, col_sum, gemm, spmm, Csr, CsrView};
use crate::{Par, Scalar};

/// Â as the layers see it: products with Â and Âᵀ, and sums across nodes.
///
/// Row counts: every node-indexed matrix a layer holds has [`Propagate::n_rows`] rows (all
/// nodes locally; a partitioned backend's owned rows).
pub trait Propagate<F: Scalar>: Sync {
    /// Rows of every node-indexed matrix the layers hold (inputs and outputs of the products).
    fn n_rows(&self) -> usize;

    /// Nodes of the whole graph (over every process; [`Propagate::n_rows`] locally): the count
    /// a mean over nodes divides by.
    fn n_nodes(&self) -> usize {
        self.n_rows()
    }

    /// Stored non-zeros of Â (this process's rows), for cost models.
    fn nnz(&self) -> usize;

    /// out ← α·Â·X + β·out.
    ///
    /// # Shapes
    /// `x`, `out`: [`Propagate::n_rows`] × d.
    fn a_times(&self, alpha: F, x: ArrayView2<'_, F>, beta: F, out: ArrayViewMut2<'_, F>, par: Par);

    /// out ← α·Âᵀ·G + β·out (the backward of [`Propagate::a_times`]).
    ///
    /// # Shapes
    /// `g`, `out`: [`Propagate::n_rows`] × d.
    fn at_times(
        &self,
        alpha: F,
        g: ArrayView2<'_, F>,
        beta: F,
        out: ArrayViewMut2<'_, F>,
        par: Par,
    );

    /// The sparsity pattern of Â·X for sparse X (values unspecified), to be filled by
    /// [`Propagate::a_times_sparse`].
    fn a_times_sparse_pattern(&self, x: CsrView<'_, F>) -> Csr<F>;

    /// out ← Â·X for sparse X, into `out` holding the pattern of
    /// [`Propagate::a_times_sparse_pattern`]; `tmp` is a dense accumulator of X's width.
    fn a_times_sparse(
        &self,
        x: CsrView<'_, F>,
        out: sprs::CsMatViewMutI<'_, F, u32, usize>,
        tmp: &mut [F],
    );

    /// Σ over rows i of min(Σ_{j ∈ row i of Â} `per_col[j]`, `cap`): an upper bound on the
    /// non-zeros of Â·X when `per_col[j]` is the non-zero count of row j of X and `cap` its
    /// width (for the cost model).
    fn row_gather_bound(&self, per_col: &[usize], cap: usize) -> usize;

    /// out ← α·Hᵀ·G + β·out, summed over every node (a weight gradient).
    ///
    /// # Shapes
    /// `h`: n × a, `g`: n × c, `out`: a × c.
    fn t_matmul(
        &self,
        alpha: F,
        h: ArrayView2<'_, F>,
        g: ArrayView2<'_, F>,
        beta: F,
        out: ArrayViewMut2<'_, F>,
        par: Par,
    ) {
        gemm(alpha, h.t(), g, beta, out, par);
    }

    /// out ← Xᵀ·G + β·out for sparse X given as the CSR of Xᵀ, summed over every node.
    ///
    /// # Shapes
    /// `x_t`: a × n, `g`: n × c, `out`: a × c.
    fn t_matmul_sparse(
        &self,
        x_t: CsrView<'_, F>,
        g: ArrayView2<'_, F>,
        beta: F,
        out: ArrayViewMut2<'_, F>,
        par: Par,
    ) {
        spmm(F::one(), x_t, g, beta, out, par);
    }

    /// out ← Gᵀ·1 + β·out: the column sums of G over every node (a bias gradient), in row order.
    fn col_sum(&self, g: ArrayView2<'_, F>, beta: F, out: ArrayViewMut1<'_, F>) {
        col_sum(g, beta, out);
    }

    /// `total` ← Σ over every row i < [`Propagate::n_rows`] of what `f(i, acc)` adds into
    /// `acc` (`total.len()` values), in f64, over chunks of
    /// [`chunk_rows`](kernels::rows::chunk_rows)`(d)` rows (`parts`, at least
    /// [`parts_len`](kernels::rows::parts_len) long, holds the chunks' partial sums); see
    /// [`kernels::rows::sum_rows_into`]. Statistics of BatchNorm and PairNorm, and every other
    /// f64 sum across nodes.
    fn sum_rows(
        &self,
        d: usize,
        parts: &mut [f64],
        total: &mut [f64],
        f: &(dyn Fn(usize, &mut [f64]) + Sync),
        par: Par,
    ) {
        kernels::rows::sum_rows_into(self.n_rows(), d, parts, total, f, par);
    }

    /// `out` ← the column means of `x` over every node, in f64 (a sum through
    /// [`Propagate::sum_rows`] divided by [`Propagate::n_nodes`]); `parts` as there.
    fn col_means(&self, x: ArrayView2<'_, F>, parts: &mut [f64], out: &mut [f64], par: Par) {
        let d = x.ncols();
        self.sum_rows(
            d,
            parts,
            out,
            &|i, acc| {
                for (a, &v) in acc.iter_mut().zip(x.row(i)) {
                    *a += v.to_f64_lossless();
                }
            },
            par,
        );
        let nf = self.n_nodes().max(1) as f64;
        out.iter_mut().for_each(|v| *v /= nf);
    }

    /// Sums of f64 values across processes, in place (the loss and accuracy counts). Locally
    /// there is one process: nothing to do.
    fn sum_across(&self, _values: &mut [f64]) {}
}

impl<F: Scalar> Propagate<F> for NormAdj<F> {
    fn n_rows(&self) -> usize {
        self.n_nodes()
    }

    fn nnz(&self) -> usize {
        NormAdj::nnz(self)
    }

    fn a_times(
        &self,
        alpha: F,
        x: ArrayView2<'_, F>,
        beta: F,
        out: ArrayViewMut2<'_, F>,
        par: Par,
    ) {
        spmm(alpha, self.a(), x, beta, out, par);
    }

    fn at_times(
        &self,
        alpha: F,
        g: ArrayView2<'_, F>,
        beta: F,
        out: ArrayViewMut2<'_, F>,
        par: Par,
    ) {
        spmm(alpha, self.a_t(), g, beta, out, par);
    }

    fn a_times_sparse_pattern(&self, x: CsrView<'_, F>) -> Csr<F> {
        &self.a() * &x
    }

    fn row_gather_bound(&self, per_col: &[usize], cap: usize) -> usize {
        self.a()
            .outer_iterator()
            .map(|row| {
                let r: usize = row.indices().iter().map(|&j| per_col[j as usize]).sum();
                r.min(cap)
            })
            .sum()
    }

    fn a_times_sparse(
        &self,
        x: CsrView<'_, F>,
        out: sprs::CsMatViewMutI<'_, F, u32, usize>,
        tmp: &mut [F],
    ) {
        sprs::smmp::numeric(self.a(), x, out, tmp);
    }
}
