//! [`Propagate`]: the only way a layer reaches Â — its products with Â and Âᵀ.
//!
//! Â is an n_dst × n_src operator ([`Propagate::shape`]): a whole graph's Â is square (n × n);
//! a sampled bipartite block (the destination nodes of a mini-batch layer and their sources)
//! is rectangular. A layer never reads Â's CSR arrays; every sum across nodes goes through
//! [`Sums`](super::Sums) and every exchange between processes through the backend's
//! [`Collective`].
//!
//! Five methods are required (identity, shape, non-zeros, Â·X, Âᵀ·G). The others are
//! capabilities ([`Caps`]): a backend that has one says so in [`Propagate::caps`] and
//! implements its methods; the defaults return [`Unsupported`] naming the operation, never a
//! fallback or a panic. A model checks the capabilities its layers need before a pass and
//! refuses a backend that lacks one with that error.
//!
//! The local implementation, [`NormAdj`], is Â held whole in this process; the row-partitioned
//! one is `dist::backend::mpi::DistAdj`. Every product follows the kernels' conventions
//! (`crate::kernels`): β = 0 overwrites `out` without reading it, and results are bit-identical
//! for any thread count.

use ndarray::{ArrayView2, ArrayViewMut2};

use super::collective::{Collective, Local};
use super::sums::RowSpan;
use super::NormAdj;
pub use crate::error::Unsupported;
use crate::id::DataId;
use crate::input::SparseFeatures;
use crate::kernels::{spmm, CsrView};
use crate::{Par, Scalar};

/// What [`Propagate::with_neighbours`] calls: this process's rows of Â over `ext`, `ext`,
/// and the row of `ext` holding own row 0.
pub(crate) type NeighbourFn<'f, F> = dyn FnMut(CsrView<'_, F>, ArrayView2<'_, F>, usize) + 'f;

/// What [`Propagate::a_times_blocks`] calls for each block: `(its rows, those rows of Â·X)`.
pub(crate) type BlockFn<'f, F> = dyn FnMut(std::ops::Range<usize>, ArrayView2<'_, F>) + 'f;

/// The optional operations of a [`Propagate`] backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Caps {
    /// [`Propagate::a_times_blocks`] (the lean order's forward, aggregate-first's recomputed
    /// evaluation).
    pub a_blocks: bool,
    /// [`Propagate::at_times_blocks`] (the lean order's backward).
    pub at_blocks: bool,
    /// [`Propagate::a_times_sparse_pattern`], [`Propagate::a_times_sparse`] and
    /// [`Propagate::row_gather_bound`] (Â·X of sparse features kept sparse).
    pub sparse_product: bool,
    /// [`Propagate::with_neighbours`] and [`Propagate::gather_rows`] (the smoothing metrics).
    pub neighbours: bool,
    /// [`Propagate::drop_edge_sample`] (DropEdge drawn by the backend from its own rows).
    pub drop_edge: bool,
}

impl Caps {
    /// Every capability.
    pub const ALL: Caps = Caps {
        a_blocks: true,
        at_blocks: true,
        sparse_product: true,
        neighbours: true,
        drop_edge: true,
    };

    /// Whether every capability of `need` is among these.
    pub fn covers(self, need: Caps) -> bool {
        (self.a_blocks || !need.a_blocks)
            && (self.at_blocks || !need.at_blocks)
            && (self.sparse_product || !need.sparse_product)
            && (self.neighbours || !need.neighbours)
            && (self.drop_edge || !need.drop_edge)
    }

    /// The union.
    pub(crate) fn union(self, o: Caps) -> Caps {
        Caps {
            a_blocks: self.a_blocks || o.a_blocks,
            at_blocks: self.at_blocks || o.at_blocks,
            sparse_product: self.sparse_product || o.sparse_product,
            neighbours: self.neighbours || o.neighbours,
            drop_edge: self.drop_edge || o.drop_edge,
        }
    }

    /// The first capability of `need` missing here, as the error a caller returns.
    ///
    /// # Errors
    /// [`Unsupported`] naming it.
    pub fn check(self, need: Caps) -> Result<(), Unsupported> {
        let missing = [
            (
                need.a_blocks && !self.a_blocks,
                "Â·X in row blocks (a_times_blocks)",
            ),
            (
                need.at_blocks && !self.at_blocks,
                "Âᵀ·G in row blocks (at_times_blocks, the lean order's backward)",
            ),
            (
                need.sparse_product && !self.sparse_product,
                "Â·X of sparse features kept sparse",
            ),
            (
                need.neighbours && !self.neighbours,
                "reading neighbours' rows (the smoothing metrics)",
            ),
            (need.drop_edge && !self.drop_edge, "DropEdge samples"),
        ];
        match missing.iter().find(|(m, _)| *m) {
            Some(&(_, op)) => Err(Unsupported { op }),
            None => Ok(()),
        }
    }
}

/// Â as the layers see it: an n_dst × n_src operator, its products, and the capabilities above
/// (see the [module docs](self)).
pub trait Propagate<F: Scalar>: Sync {
    /// The identity of Â's contents ([`DataId`]): what a model computed from Â (and keeps
    /// between passes) is keyed on it. Another Â, or this one rewritten, has another id.
    fn id(&self) -> DataId;

    /// `(n_dst, n_src)`: the rows of Â·X (this process's) and of X.
    fn shape(&self) -> (usize, usize);

    /// Stored non-zeros of Â over every process, for cost models (which must decide the same
    /// on every process).
    fn nnz(&self) -> usize;

    /// Where this process's destination rows sit among the whole graph's nodes (all of them
    /// for a graph held whole): what sums over nodes are formed over and what dropout masks are
    /// keyed by.
    fn rows(&self) -> RowSpan {
        RowSpan::whole(self.shape().0)
    }

    /// The exchanges with the other processes of the run ([`Local`] for one process).
    fn collective(&self) -> &dyn Collective {
        &Local
    }

    /// The optional operations this backend has.
    fn caps(&self) -> Caps {
        Caps::default()
    }

    /// out ← α·Â·X + β·out.
    ///
    /// # Shapes
    /// `x`: n_src × d, `out`: n_dst × d.
    fn a_times(&self, alpha: F, x: ArrayView2<'_, F>, beta: F, out: ArrayViewMut2<'_, F>, par: Par);

    /// out ← α·Âᵀ·G + β·out (the backward of [`Propagate::a_times`]).
    ///
    /// # Shapes
    /// `g`: n_dst × d, `out`: n_src × d.
    fn at_times(
        &self,
        alpha: F,
        g: ArrayView2<'_, F>,
        beta: F,
        out: ArrayViewMut2<'_, F>,
        par: Par,
    );

    /// Â·X block by block without holding all of it: for each block of
    /// `block` rows (the last one shorter; `block` a multiple of 1024, so that every block
    /// starts on the reduction grid), those rows of Â·X into `buf` (at least `block·d` long)
    /// and `f(rows, them)`, blocks in row order ([`Caps::a_blocks`]). Every row is computed as
    /// [`Propagate::a_times`] computes it, so the blocks are the same bits.
    ///
    /// # Errors
    /// [`Unsupported`] when the backend lacks [`Caps::a_blocks`].
    fn a_times_blocks(
        &self,
        _x: ArrayView2<'_, F>,
        _block: usize,
        _buf: &mut [F],
        _f: &mut BlockFn<'_, F>,
        _par: Par,
    ) -> Result<(), Unsupported> {
        Err(Unsupported {
            op: "a_times_blocks",
        })
    }

    /// Âᵀ·G block by block, as [`Propagate::a_times_blocks`] gives Â·X: each block's rows of
    /// Âᵀ·G, the same bits as [`Propagate::at_times`] ([`Caps::at_blocks`]).
    ///
    /// # Errors
    /// [`Unsupported`] when the backend lacks [`Caps::at_blocks`].
    fn at_times_blocks(
        &self,
        _g: ArrayView2<'_, F>,
        _block: usize,
        _buf: &mut [F],
        _f: &mut BlockFn<'_, F>,
        _par: Par,
    ) -> Result<(), Unsupported> {
        Err(Unsupported {
            op: "at_times_blocks",
        })
    }

    /// Sparse features with the sparsity pattern of Â·X for sparse X (values unspecified), to
    /// be filled by [`Propagate::a_times_sparse`] ([`Caps::sparse_product`]).
    ///
    /// # Errors
    /// [`Unsupported`] when the backend lacks [`Caps::sparse_product`].
    fn a_times_sparse_pattern(&self, _x: CsrView<'_, F>) -> Result<SparseFeatures<F>, Unsupported> {
        Err(Unsupported {
            op: "a_times_sparse_pattern",
        })
    }

    /// out ← Â·X for sparse X (and its transpose), into `out` holding the pattern of
    /// [`Propagate::a_times_sparse_pattern`]; `tmp` is a dense accumulator of X's width
    /// ([`Caps::sparse_product`]).
    ///
    /// # Errors
    /// [`Unsupported`] when the backend lacks [`Caps::sparse_product`].
    fn a_times_sparse(
        &self,
        _x: CsrView<'_, F>,
        _out: &mut SparseFeatures<F>,
        _tmp: &mut [F],
    ) -> Result<(), Unsupported> {
        Err(Unsupported {
            op: "a_times_sparse",
        })
    }

    /// Σ over rows i of min(Σ_{j ∈ row i of Â} `per_col[j]`, `cap`), over every process: an
    /// upper bound on the non-zeros of Â·X when `per_col[j]` is the non-zero count of row j of
    /// X and `cap` its width (the cost model; [`Caps::sparse_product`]).
    ///
    /// # Errors
    /// [`Unsupported`] when the backend lacks [`Caps::sparse_product`].
    fn row_gather_bound(&self, _per_col: &[usize], _cap: usize) -> Result<usize, Unsupported> {
        Err(Unsupported {
            op: "row_gather_bound",
        })
    }

    /// Calls `f` with what reads the neighbours' rows of `h` whole (the smoothing metrics;
    /// [`Caps::neighbours`]): `a`, this process's rows of Â with their columns renamed into
    /// `ext`; `ext`, the rows those columns name (`h` itself when Â is held whole; the owned
    /// rows among the halo rows received from their owners otherwise); and `own`, the row of
    /// `ext` that holds own row 0. Each row of `a` keeps Â's non-zero order. Collective in a
    /// partitioned run.
    ///
    /// # Errors
    /// [`Unsupported`] when the backend lacks [`Caps::neighbours`].
    fn with_neighbours(
        &self,
        _h: ArrayView2<'_, F>,
        _f: &mut NeighbourFn<'_, F>,
    ) -> Result<(), Unsupported> {
        Err(Unsupported {
            op: "with_neighbours",
        })
    }

    /// The rows `rows` (global node ids, increasing, below the node count) of the node-indexed
    /// `h`, as f64, on every process: row k of the result is node `rows[k]`'s (the numerical
    /// rank's sample; [`Caps::neighbours`]). Collective in a partitioned run.
    ///
    /// # Errors
    /// [`Unsupported`] when the backend lacks [`Caps::neighbours`].
    fn gather_rows(
        &self,
        _h: ArrayView2<'_, F>,
        _rows: &[usize],
    ) -> Result<ndarray::Array2<f64>, Unsupported> {
        Err(Unsupported { op: "gather_rows" })
    }

    /// DropEdge's sample of Â with drop probability `p` and key `key` (the
    /// [`DropEdge`](super::dropedge::DropEdge) rule, so the sample is the one a process holding
    /// Â whole draws), as a `Propagate` over the same rows ([`Caps::drop_edge`]).
    ///
    /// # Errors
    /// [`Unsupported`] when the backend lacks [`Caps::drop_edge`].
    fn drop_edge_sample(
        &self,
        _p: f64,
        _key: u64,
    ) -> Result<Box<dyn Propagate<F> + '_>, Unsupported> {
        Err(Unsupported {
            op: "drop_edge_sample",
        })
    }
}

/// For each block of `block` rows of `a` (m × k, the last block shorter): those rows of a·x
/// into `buf` and `f(rows, them)`, in row order. The rows are [`spmm`]'s.
///
/// # Panics
/// If `block` is 0 or `buf` is shorter than a block.
#[track_caller]
pub(crate) fn blocks<F: Scalar>(
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

impl<F: Scalar> Propagate<F> for NormAdj<F> {
    fn id(&self) -> DataId {
        NormAdj::id(self)
    }

    fn shape(&self) -> (usize, usize) {
        (self.n_nodes(), self.n_nodes())
    }

    fn nnz(&self) -> usize {
        NormAdj::nnz(self)
    }

    fn caps(&self) -> Caps {
        Caps {
            drop_edge: false,
            ..Caps::ALL
        }
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

    fn a_times_blocks(
        &self,
        x: ArrayView2<'_, F>,
        block: usize,
        buf: &mut [F],
        f: &mut BlockFn<'_, F>,
        par: Par,
    ) -> Result<(), Unsupported> {
        blocks(self.a(), x, block, buf, f, par);
        Ok(())
    }

    fn at_times_blocks(
        &self,
        g: ArrayView2<'_, F>,
        block: usize,
        buf: &mut [F],
        f: &mut BlockFn<'_, F>,
        par: Par,
    ) -> Result<(), Unsupported> {
        blocks(self.a_t(), g, block, buf, f, par);
        Ok(())
    }

    fn a_times_sparse_pattern(&self, x: CsrView<'_, F>) -> Result<SparseFeatures<F>, Unsupported> {
        Ok(SparseFeatures::new(&self.a() * &x))
    }

    fn a_times_sparse(
        &self,
        x: CsrView<'_, F>,
        out: &mut SparseFeatures<F>,
        tmp: &mut [F],
    ) -> Result<(), Unsupported> {
        sprs::smmp::numeric(self.a(), x, out.x_mut(), tmp);
        out.sync_transpose();
        Ok(())
    }

    fn row_gather_bound(&self, per_col: &[usize], cap: usize) -> Result<usize, Unsupported> {
        Ok(self
            .a()
            .outer_iterator()
            .map(|row| {
                let r: usize = row.indices().iter().map(|&j| per_col[j as usize]).sum();
                r.min(cap)
            })
            .sum())
    }

    fn with_neighbours(
        &self,
        h: ArrayView2<'_, F>,
        f: &mut NeighbourFn<'_, F>,
    ) -> Result<(), Unsupported> {
        f(self.a(), h, 0);
        Ok(())
    }

    fn gather_rows(
        &self,
        h: ArrayView2<'_, F>,
        rows: &[usize],
    ) -> Result<ndarray::Array2<f64>, Unsupported> {
        Ok(ndarray::Array2::from_shape_fn(
            (rows.len(), h.ncols()),
            |(a, k)| h[[rows[a], k]].to_f64_lossless(),
        ))
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
                )
                .unwrap();
                assert_eq!(next, n);
                adj.at_times_blocks(
                    x.view(),
                    block,
                    &mut buf,
                    &mut |rows, b| {
                        got_t.slice_mut(ndarray::s![rows, ..]).assign(&b);
                    },
                    Par::Rayon,
                )
                .unwrap();
                assert!(got == ax && got_t == atx, "blocks of {block}");
            }
        }
    }
}
