//! [`Sums`]: every sum across nodes a layer, the loss or a metric needs — weight and bias
//! gradients (Hᵀ·G, Gᵀ·1), f64 statistics, counts and the loss — over this process's rows of
//! the node-indexed matrices, formed as exact partials per chunk of the reduction grid
//! ([`grid_rows`](crate::kernels::rows::grid_rows) of the whole graph's node count), exchanged
//! with the other processes through a [`Collective`] and rounded once (the algorithms are in
//! `graph::reduce`). So a sum is the same bits for any thread and rank count.
//!
//! Its working memory, [`SumScratch`], is the caller's: the model's workspace owns one for its
//! layers and hands it to the loss of its passes; it grows to the largest sum once and is
//! reused, so an epoch allocates nothing.

use std::sync::{Mutex, MutexGuard, PoisonError};

use ndarray::{ArrayView2, ArrayViewMut1, ArrayViewMut2};

use super::collective::Collective;
use super::reduce::{self, ReduceScratch, RowSink, SumWords};
use crate::kernels::profile::{self, Phase, Work};
use crate::kernels::{self, CsrView};
use crate::{Par, Scalar};

/// Where this process's rows sit among the whole graph's nodes: rows `start .. start + len`
/// of `total`. A graph held whole is `0 .. n` of n.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowSpan {
    /// The global index of this process's first row.
    pub start: usize,
    /// This process's rows.
    pub len: usize,
    /// Rows over every process (the count a mean over nodes divides by).
    pub total: usize,
}

impl RowSpan {
    /// All `n` rows in one process.
    pub fn whole(n: usize) -> Self {
        RowSpan {
            start: 0,
            len: n,
            total: n,
        }
    }
}

/// The working memory of [`Sums`] (see the [module docs](self)): empty until the first sum,
/// then as large as the largest one.
#[derive(Debug)]
pub struct SumScratch<F: Scalar>(Mutex<ReduceScratch<F>>);

impl<F: Scalar> Default for SumScratch<F> {
    fn default() -> Self {
        SumScratch(Mutex::default())
    }
}

impl<F: Scalar> SumScratch<F> {
    /// Sums over the rows `rows` exchanged through `collective`, in this working memory.
    pub fn sums<'a>(&'a self, collective: &'a dyn Collective, rows: RowSpan) -> Sums<'a, F> {
        Sums {
            collective,
            rows,
            scratch: &self.0,
        }
    }
}

/// The sums across nodes of one run (see the [module docs](self)): this process's rows
/// ([`RowSpan`]), the [`Collective`] that exchanges their partials, and the working memory.
#[derive(Clone, Copy)]
pub struct Sums<'a, F: Scalar> {
    collective: &'a dyn Collective,
    rows: RowSpan,
    scratch: &'a Mutex<ReduceScratch<F>>,
}

impl<F: Scalar> std::fmt::Debug for Sums<'_, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sums").field("rows", &self.rows).finish()
    }
}

impl<'a, F: Scalar> Sums<'a, F> {
    /// This process's rows.
    pub fn rows(&self) -> RowSpan {
        self.rows
    }

    /// Rows of this process's node-indexed matrices.
    pub fn n_rows(&self) -> usize {
        self.rows.len
    }

    /// Nodes over every process: the count a mean over nodes divides by.
    pub fn n_nodes(&self) -> usize {
        self.rows.total
    }

    /// Rows per chunk of the reduction grid ([`grid_rows`](kernels::rows::grid_rows) of
    /// [`Sums::n_nodes`]): every sum is formed from partials over these chunks.
    pub fn grid_rows(&self) -> usize {
        kernels::rows::grid_rows(self.rows.total)
    }

    /// The exchange across processes.
    pub fn collective(&self) -> &'a dyn Collective {
        self.collective
    }

    /// [`Collective::global_span`].
    pub(crate) fn global_span(&self, local: usize) -> (usize, usize) {
        self.collective.global_span(local)
    }

    /// `f` with the exchange of words when the run spans processes (`None` for one).
    fn with_words<R>(&self, f: impl FnOnce(Option<SumWords<'_>>) -> R) -> R {
        let c = self.collective;
        let sum = |w: &mut [i64]| c.sum_words(w);
        f(c.spans_processes().then_some(&sum as &dyn Fn(&mut [i64])))
    }

    fn lock(&self) -> MutexGuard<'a, ReduceScratch<F>> {
        self.scratch.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// out ← α·Hᵀ·G + β·out, summed over every node (a weight gradient): a GEMM per grid chunk,
    /// the chunks' partials combined exactly.
    ///
    /// # Shapes
    /// `h`: n × a, `g`: n × c, `out`: a × c.
    pub fn t_matmul(
        &self,
        alpha: F,
        h: ArrayView2<'_, F>,
        g: ArrayView2<'_, F>,
        beta: F,
        out: ArrayViewMut2<'_, F>,
        par: Par,
    ) {
        let _span = profile::span(Phase::WeightGrad, || Work::Gemm {
            m: h.ncols(),
            k: self.n_nodes(),
            n: g.ncols(),
        });
        self.with_words(|words| {
            reduce::t_matmul(
                self.grid_rows(),
                alpha,
                h,
                g,
                beta,
                out,
                par,
                &mut self.lock(),
                words,
            )
        })
    }

    /// out ← α·Hᵀ·G + β·out as [`Sums::t_matmul`] forms it (the same bits), with the rows of H
    /// and G handed over block by block: `fill` calls its sink with each block (first row on
    /// the grid, every row once, in any order), so H need not be held whole.
    ///
    /// # Panics
    /// If a block starts off the grid or its shapes disagree with `out` (a × c).
    pub(crate) fn t_matmul_rows(
        &self,
        alpha: F,
        beta: F,
        out: ArrayViewMut2<'_, F>,
        par: Par,
        fill: &mut dyn FnMut(&mut RowSink<'_, F>),
    ) {
        self.with_words(|words| {
            reduce::t_matmul_rows(
                self.grid_rows(),
                alpha,
                beta,
                out,
                par,
                &mut self.lock(),
                words,
                fill,
            )
        })
    }

    /// out ← Xᵀ·G + β·out for sparse X given as the CSR of Xᵀ (sorted column indices), summed
    /// over every node as [`Sums::t_matmul`] is.
    ///
    /// # Shapes
    /// `x_t`: a × n, `g`: n × c, `out`: a × c.
    pub(crate) fn t_matmul_sparse(
        &self,
        x_t: CsrView<'_, F>,
        g: ArrayView2<'_, F>,
        beta: F,
        out: ArrayViewMut2<'_, F>,
        par: Par,
    ) {
        let _span = profile::span(Phase::WeightGrad, || Work::Spmm {
            rows: x_t.rows(),
            nnz: x_t.nnz(),
            d: g.ncols(),
        });
        self.with_words(|words| {
            reduce::t_matmul_sparse(
                self.grid_rows(),
                x_t,
                g,
                beta,
                out,
                par,
                &mut self.lock(),
                words,
            )
        })
    }

    /// out ← Gᵀ·1 + β·out: the column sums of G over every node (a bias gradient), per grid
    /// chunk in row order, the chunks combined exactly.
    pub fn col_sum(&self, g: ArrayView2<'_, F>, beta: F, out: ArrayViewMut1<'_, F>, par: Par) {
        let _span = profile::span(Phase::Reduce, || Work::Stream {
            bytes: g.len() * std::mem::size_of::<F>(),
        });
        self.with_words(|words| {
            reduce::col_sum(self.grid_rows(), g, beta, out, par, &mut self.lock(), words)
        })
    }

    /// `total` ← Σ over every row i < [`Sums::n_rows`] of what `f(i, acc)` adds into `acc`
    /// (`total.len()` values), in f64: rows folded in order per grid chunk
    /// (`kernels::rows::chunk_sums`; `parts`, at least
    /// `parts_len``(n_rows, total.len())` long, holds the chunks'
    /// partials), the chunks combined exactly and rounded once (statistics of BatchNorm and
    /// PairNorm, the smoothing metrics).
    pub fn sum_rows(
        &self,
        parts: &mut [f64],
        total: &mut [f64],
        f: &(dyn Fn(usize, &mut [f64]) + Sync),
        par: Par,
    ) {
        let len = total.len();
        let _span = profile::span(Phase::Reduce, || Work::Stream {
            bytes: self.n_rows() * len * std::mem::size_of::<F>(),
        });
        let chunks = kernels::rows::chunk_sums(self.n_rows(), self.grid_rows(), parts, len, f, par);
        self.with_words(|words| reduce::combine_f64(parts, chunks, total, &mut self.lock(), words))
    }

    /// `out` ← the column means of `x` over every node, in f64 (a sum through
    /// [`Sums::sum_rows`] divided by [`Sums::n_nodes`]); `parts` as there.
    pub(crate) fn col_means(
        &self,
        x: ArrayView2<'_, F>,
        parts: &mut [f64],
        out: &mut [f64],
        par: Par,
    ) {
        self.sum_rows(
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

    /// Sums counts across processes, in place (mask sizes, correct predictions).
    pub(crate) fn sum_counts(&self, counts: &mut [u64]) {
        self.with_words(|words| reduce::counts(counts, &mut self.lock(), words));
    }

    /// The exact sum of a partial `acc` (this process's terms) over every process, rounded
    /// once (the loss).
    pub(crate) fn sum_exact(&self, acc: &F::Exact) -> f64 {
        self.with_words(|words| reduce::across(acc, &mut self.lock(), words))
    }
}
