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

use std::sync::{Mutex, MutexGuard, PoisonError};

use ndarray::{ArrayView2, ArrayViewMut1, ArrayViewMut2};

use super::reduce::{self, ReduceScratch};
use super::NormAdj;
use crate::id::DataId;
use crate::kernels::profile::{self, Phase, Work};
use crate::kernels::{self, spmm, Csr, CsrView};
use crate::{Par, Scalar};

/// What [`Propagate::with_neighbours`] calls: this process's rows of Â over `ext`, `ext`,
/// and the row of `ext` holding own row 0.
pub type NeighbourFn<'f, F> = dyn FnMut(CsrView<'_, F>, ArrayView2<'_, F>, usize) + 'f;

/// What [`Propagate::t_matmul_rows`] hands its rows to: `(first row, rows of H, the same rows of
/// G)`, the first row on the reduction grid ([`Propagate::grid_rows`]).
pub type RowSink<'s, F> = dyn FnMut(usize, ArrayView2<'_, F>, ArrayView2<'_, F>) + 's;

/// What [`Propagate::a_times_blocks`] calls for each block: `(its rows, those rows of Â·X)`.
pub type BlockFn<'f, F> = dyn FnMut(std::ops::Range<usize>, ArrayView2<'_, F>) + 'f;

/// Â as the layers see it: products with Â and Âᵀ, and sums across nodes.
///
/// Row counts: every node-indexed matrix a layer holds has [`Propagate::n_rows`] rows (all
/// nodes locally; a partitioned backend's owned rows).
pub trait Propagate<F: Scalar>: Sync {
    /// The identity of Â's contents ([`DataId`]): what a model computed from Â (and keeps
    /// between passes) is keyed on it. Another Â, or this one rewritten, has another id.
    fn id(&self) -> DataId;

    /// Rows of every node-indexed matrix the layers hold (inputs and outputs of the products).
    fn n_rows(&self) -> usize;

    /// Nodes of the whole graph (over every process; [`Propagate::n_rows`] locally): the count
    /// a mean over nodes divides by.
    fn n_nodes(&self) -> usize {
        self.n_rows()
    }

    /// Stored non-zeros of Â over every process, for cost models (which must decide the same
    /// on every process).
    fn nnz(&self) -> usize;

    /// The global index of this process's first row (0 locally): where its rows sit in the
    /// node order, for what is keyed by global position (dropout masks).
    fn row_offset(&self) -> usize {
        0
    }

    /// For a count `local` of this process's elements of a node-ordered sequence (mask
    /// elements, stored features), the elements of the processes before it and the total over
    /// every process: `(0, local)` locally.
    fn global_span(&self, local: usize) -> (usize, usize) {
        (0, local)
    }

    /// Â held whole in this process, if it is (for what needs the whole graph: DropEdge's
    /// samples from the raw graph).
    fn as_local(&self) -> Option<&NormAdj<F>> {
        None
    }

    /// For a backend that does not hold Â whole: DropEdge's sample of Â with drop
    /// probability `p` and key `key` (the [`DropEdge`](super::dropedge::DropEdge) rule, so the
    /// sample is the one a process holding Â whole draws), as a `Propagate` over the same rows,
    /// or `None` when this backend cannot sample.
    fn drop_edge_sample(&self, _p: f64, _key: u64) -> Option<Box<dyn Propagate<F> + '_>> {
        None
    }

    /// Calls `f` with what reads the neighbours' rows of `h` whole (the smoothing metrics):
    /// `a`, this process's rows of Â with their columns renamed into `ext`; `ext`, the rows
    /// those columns name (`h` itself when Â is held whole; the owned rows among the halo rows
    /// received from their owners otherwise); and `own`, the row of `ext` that holds own row 0
    /// (own row i is `ext` row `own + i`). Each row of `a` keeps Â's non-zero order.
    /// Collective in a partitioned run: the whole halo of `h` is exchanged at once, at its
    /// full width.
    ///
    /// # Shapes
    /// `h`: [`Propagate::n_rows`] × d.
    fn with_neighbours(&self, h: ArrayView2<'_, F>, f: &mut NeighbourFn<'_, F>);

    /// The rows `rows` (global node ids, increasing) of the node-indexed `h`, as f64, on
    /// every process: row k of the result is node `rows[k]`'s (the numerical rank's sample).
    /// Collective in a partitioned run.
    ///
    /// # Panics
    /// If a row is not below [`Propagate::n_nodes`].
    fn gather_rows(&self, h: ArrayView2<'_, F>, rows: &[usize]) -> ndarray::Array2<f64> {
        ndarray::Array2::from_shape_fn((rows.len(), h.ncols()), |(a, k)| {
            h[[rows[a], k]].to_f64_lossless()
        })
    }

    /// out ← α·Â·X + β·out.
    ///
    /// # Shapes
    /// `x`, `out`: [`Propagate::n_rows`] × d.
    fn a_times(&self, alpha: F, x: ArrayView2<'_, F>, beta: F, out: ArrayViewMut2<'_, F>, par: Par);

    /// Â·X block by block without holding all of it: for each block of `block` rows (the
    /// last one shorter; `block` a multiple of 1024, so that every block starts on the
    /// reduction grid), those rows of Â·X into `buf` (at least `block·d` long) and `f(rows,
    /// them)`, blocks in row order. Every row is computed as [`Propagate::a_times`] computes
    /// it, so the blocks are the same bits. One collective call in a partitioned run (through
    /// [`Propagate::with_neighbours`]: the whole halo of `x` at once).
    ///
    /// # Panics
    /// If `block` is 0 or `buf` is too short.
    #[track_caller]
    fn a_times_blocks(
        &self,
        x: ArrayView2<'_, F>,
        block: usize,
        buf: &mut [F],
        f: &mut BlockFn<'_, F>,
        par: Par,
    ) {
        self.with_neighbours(x, &mut |a, ext, _own| blocks(a, ext, block, buf, f, par));
    }

    /// Âᵀ·G block by block, as [`Propagate::a_times_blocks`] gives Â·X: each block's rows of
    /// Âᵀ·G, the same bits as [`Propagate::at_times`]. The default needs Â held whole
    /// ([`Propagate::as_local`]).
    ///
    /// # Panics
    /// If `block` is 0 or `buf` is too short, or this backend does not hold Â whole (the
    /// [`Lean`](crate::nn::Order::Lean) order, the only caller, is refused for such a backend
    /// when the model is built).
    #[track_caller]
    fn at_times_blocks(
        &self,
        g: ArrayView2<'_, F>,
        block: usize,
        buf: &mut [F],
        f: &mut BlockFn<'_, F>,
        par: Par,
    ) {
        let Some(local) = self.as_local() else {
            panic!("at_times_blocks: this backend does not hold Â whole")
        };
        blocks(local.a_t(), g, block, buf, f, par);
    }

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

    /// Σ over rows i of min(Σ_{j ∈ row i of Â} `per_col[j]`, `cap`), over every process: an
    /// upper bound on the non-zeros of Â·X when `per_col[j]` is the non-zero count of row j of
    /// X (this process's rows) and `cap` its width (for the cost model).
    fn row_gather_bound(&self, per_col: &[usize], cap: usize) -> usize;

    /// Rows per chunk of the reduction grid: [`grid_rows`](kernels::rows::grid_rows) of
    /// [`Propagate::n_nodes`]. Every sum across nodes is formed from partials over these chunks
    /// of this process's rows (which start on the grid), combined exactly.
    fn grid_rows(&self) -> usize {
        kernels::rows::grid_rows(self.n_nodes())
    }

    /// Adds `words` element-wise across processes, in place, as integers: the exchange of
    /// exact partial sums ([`Accumulator::to_words`](kernels::exact::Accumulator::to_words)).
    /// Locally there is one process: nothing to do.
    fn sum_words(&self, _words: &mut [i64]) {}

    /// Whether the sums across nodes go through [`Propagate::sum_words`] (a backend over
    /// several processes, or one that records them); locally they are read straight from the
    /// accumulators — the same values.
    fn spans_processes(&self) -> bool {
        false
    }

    /// The reused working memory of the sums across nodes (never locked by
    /// [`Propagate::sum_words`]).
    fn reduce_scratch(&self) -> &Mutex<ReduceScratch<F>>;

    /// out ← α·Hᵀ·G + β·out, summed over every node (a weight gradient): a GEMM per grid chunk,
    /// the chunks' partials combined exactly (the [`reduce`] module).
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
        let _span = profile::span(Phase::WeightGrad, || Work::Gemm {
            m: h.ncols(),
            k: self.n_nodes(),
            n: g.ncols(),
        });
        let sum = |w: &mut [i64]| self.sum_words(w);
        let sum = self
            .spans_processes()
            .then_some(&sum as &dyn Fn(&mut [i64]));
        let mut s = lock(self.reduce_scratch());
        reduce::t_matmul(self.grid_rows(), alpha, h, g, beta, out, par, &mut s, sum);
    }

    /// out ← α·Hᵀ·G + β·out as [`Propagate::t_matmul`] forms it (the same bits), with the rows
    /// of H and G handed over block by block: `fill` calls its sink with each block (first row
    /// on the grid, every row once, in any order), so H need not be held whole (a weight
    /// gradient whose H is recomputed block by block).
    ///
    /// # Panics
    /// If a block starts off the grid or its shapes disagree with `out` (a × c).
    fn t_matmul_rows(
        &self,
        alpha: F,
        beta: F,
        out: ArrayViewMut2<'_, F>,
        par: Par,
        fill: &mut dyn FnMut(&mut RowSink<'_, F>),
    ) {
        // (No span of its own: the products `fill` runs and the chunks' GEMMs record theirs.)
        let sum = |w: &mut [i64]| self.sum_words(w);
        let sum = self
            .spans_processes()
            .then_some(&sum as &dyn Fn(&mut [i64]));
        let mut s = lock(self.reduce_scratch());
        reduce::t_matmul_rows(self.grid_rows(), alpha, beta, out, par, &mut s, sum, fill);
    }

    /// out ← Xᵀ·G + β·out for sparse X given as the CSR of Xᵀ (sorted column indices), summed
    /// over every node as [`Propagate::t_matmul`] is.
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
        let _span = profile::span(Phase::WeightGrad, || Work::Spmm {
            rows: x_t.rows(),
            nnz: x_t.nnz(),
            d: g.ncols(),
        });
        let sum = |w: &mut [i64]| self.sum_words(w);
        let sum = self
            .spans_processes()
            .then_some(&sum as &dyn Fn(&mut [i64]));
        let mut s = lock(self.reduce_scratch());
        reduce::t_matmul_sparse(self.grid_rows(), x_t, g, beta, out, par, &mut s, sum);
    }

    /// out ← Gᵀ·1 + β·out: the column sums of G over every node (a bias gradient), per grid
    /// chunk in row order, the chunks combined exactly.
    fn col_sum(&self, g: ArrayView2<'_, F>, beta: F, out: ArrayViewMut1<'_, F>, par: Par) {
        let _span = profile::span(Phase::Reduce, || Work::Stream {
            bytes: g.len() * std::mem::size_of::<F>(),
        });
        let sum = |w: &mut [i64]| self.sum_words(w);
        let sum = self
            .spans_processes()
            .then_some(&sum as &dyn Fn(&mut [i64]));
        let mut s = lock(self.reduce_scratch());
        reduce::col_sum(self.grid_rows(), g, beta, out, par, &mut s, sum);
    }

    /// `total` ← Σ over every row i < [`Propagate::n_rows`] of what `f(i, acc)` adds into
    /// `acc` (`total.len()` values), in f64: rows folded in order per grid chunk
    /// ([`kernels::rows::chunk_sums`]; `parts`, at least
    /// [`parts_len`](kernels::rows::parts_len)`(n_rows, total.len())` long, holds the chunks'
    /// partials), the chunks combined exactly and rounded once. Statistics of BatchNorm and
    /// PairNorm, and every other f64 sum across nodes.
    fn sum_rows(
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
        let sum = |w: &mut [i64]| self.sum_words(w);
        let sum = self
            .spans_processes()
            .then_some(&sum as &dyn Fn(&mut [i64]));
        let mut s = lock(self.reduce_scratch());
        reduce::combine_f64(parts, chunks, total, &mut s, sum);
    }

    /// `out` ← the column means of `x` over every node, in f64 (a sum through
    /// [`Propagate::sum_rows`] divided by [`Propagate::n_nodes`]); `parts` as there.
    fn col_means(&self, x: ArrayView2<'_, F>, parts: &mut [f64], out: &mut [f64], par: Par) {
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
    fn sum_counts(&self, counts: &mut [u64]) {
        let sum = |w: &mut [i64]| self.sum_words(w);
        let sum = self
            .spans_processes()
            .then_some(&sum as &dyn Fn(&mut [i64]));
        reduce::counts(counts, &mut lock(self.reduce_scratch()), sum);
    }

    /// The exact sum of a partial `acc` (this process's terms) over every process, rounded
    /// once (the loss).
    fn sum_exact(&self, acc: &F::Exact) -> f64 {
        let sum = |w: &mut [i64]| self.sum_words(w);
        let sum = self
            .spans_processes()
            .then_some(&sum as &dyn Fn(&mut [i64]));
        reduce::across(acc, &mut lock(self.reduce_scratch()), sum)
    }
}

/// For each block of `block` rows of `a` (m × k, the last block shorter): those rows of a·x
/// into `buf` and `f(rows, them)`, in row order. The rows are [`spmm`]'s.
#[track_caller]
fn blocks<F: Scalar>(
    a: CsrView<'_, F>,
    x: ArrayView2<'_, F>,
    block: usize,
    buf: &mut [F],
    f: &mut BlockFn<'_, F>,
    par: Par,
) {
    assert!(block > 0, "a product in blocks of 0 rows");
    let (m, d) = (a.rows(), x.ncols());
    for lo in (0..m).step_by(block) {
        let rows = lo..(lo + block).min(m);
        let len = rows.len();
        let mut out = ArrayViewMut2::from_shape((len, d), &mut buf[..len * d])
            .unwrap_or_else(|_| unreachable!("a block of {len} × {d}"));
        spmm(
            F::one(),
            a.slice_outer(rows.clone()),
            x,
            F::zero(),
            out.view_mut(),
            par,
        );
        f(rows, out.view());
    }
}

/// The scratch of a `Propagate`, also after a panic elsewhere (it holds no invariant).
fn lock<F: Scalar>(m: &Mutex<ReduceScratch<F>>) -> MutexGuard<'_, ReduceScratch<F>> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<F: Scalar> Propagate<F> for NormAdj<F> {
    fn id(&self) -> DataId {
        NormAdj::id(self)
    }

    fn n_rows(&self) -> usize {
        self.n_nodes()
    }

    fn nnz(&self) -> usize {
        NormAdj::nnz(self)
    }

    fn reduce_scratch(&self) -> &Mutex<ReduceScratch<F>> {
        NormAdj::reduce_scratch(self)
    }

    fn as_local(&self) -> Option<&NormAdj<F>> {
        Some(self)
    }

    fn with_neighbours(&self, h: ArrayView2<'_, F>, f: &mut NeighbourFn<'_, F>) {
        f(self.a(), h, 0);
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

#[cfg(test)]
mod tests {
    use ndarray::Array2;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::data::synthetic::CitationLike;
    use crate::graph::{Direction, Graph, Norm};

    #[test]
    fn products_in_row_blocks_are_the_whole_products_rows() {
        let d = CitationLike {
            n_nodes: 700,
            ..Default::default()
        }
        .generate(2)
        .unwrap();
        let n = d.graph.n_nodes();
        let one_way: Vec<(u32, u32)> = (0..n)
            .flat_map(|i| d.graph.neighbors(i).iter().map(move |&j| (i as u32, j)))
            .filter(|&(i, j)| i < j)
            .collect();
        let directed = Graph::try_from_edges(n, &one_way, Direction::Directed).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let x = Array2::from_shape_fn((n, 9), |_| rng.random::<f32>() - 0.5);
        for adj in [
            NormAdj::<f32>::new(&d.graph, Norm::Symmetric),
            NormAdj::<f32>::new(&directed, Norm::Row),
        ] {
            let (mut ax, mut atx) = (Array2::zeros((n, 9)), Array2::zeros((n, 9)));
            adj.a_times(1.0, x.view(), 0.0, ax.view_mut(), Par::Rayon);
            adj.at_times(1.0, x.view(), 0.0, atx.view_mut(), Par::Rayon);
            assert!(
                adj.is_symmetric() || ax != atx,
                "Âᵀ ≠ Â in the directed case"
            );
            for block in [1, 128, 300, 700, 5000] {
                let mut buf = vec![f32::NAN; block.min(n) * 9];
                let (mut got, mut got_t) = (Array2::zeros((n, 9)), Array2::zeros((n, 9)));
                let mut next = 0;
                adj.a_times_blocks(
                    x.view(),
                    block,
                    &mut buf,
                    &mut |rows, b| {
                        assert_eq!(rows.start, next, "blocks in row order");
                        next = rows.end;
                        got.slice_mut(ndarray::s![rows, ..]).assign(&b);
                    },
                    Par::Seq,
                );
                assert_eq!(next, n);
                adj.at_times_blocks(
                    x.view(),
                    block,
                    &mut buf,
                    &mut |rows, b| {
                        got_t.slice_mut(ndarray::s![rows, ..]).assign(&b);
                    },
                    Par::Rayon,
                );
                assert!(got == ax && got_t == atx, "blocks of {block}");
            }
        }
    }
}
