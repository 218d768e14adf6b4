//! [`BlockAdj`]: a bipartite block, the rectangular Â of one layer of a neighbour-sampled
//! mini-batch: n_dst destination rows over n_src source columns, the destinations being the
//! first n_dst sources (DGL's message-flow graph convention), normalised on the block
//! (`docs/MATH.md` §23).

use ndarray::{ArrayView2, ArrayViewMut2};

use super::propagate::{blocks, BlockFn};
use super::{Caps, Propagate, Unsupported};
use crate::id::DataId;
use crate::kernels::transpose::{transpose_into, CsrArrays};
use crate::kernels::{spmm, Csr, CsrView, NewTrusted};
use crate::{Par, Scalar};

/// A rectangular Â (n_dst × n_src) with its transpose, as [`Propagate`] gives it to a layer.
/// A block for evaluation only holds no transpose (its products by Âᵀ, which evaluation never
/// takes, transpose it first: the same bits, an allocation a call).
#[derive(Debug, Clone)]
pub struct BlockAdj<F> {
    id: DataId,
    a: Csr<F>,
    /// Âᵀ (empty when `has_t` is false).
    a_t: Csr<F>,
    has_t: bool,
    /// The storage of the last block's values, transpose and degrees, while the next block's
    /// pattern is being built ([`BlockAdj::take_pattern`]).
    spare: Spare<F>,
}

/// [`BlockAdj`]'s storage between two blocks.
#[derive(Debug, Clone, Default)]
struct Spare<F> {
    data: Vec<F>,
    t: CsrArrays<F>,
    d_out: Vec<usize>,
    s_out: Vec<F>,
    fill: Vec<usize>,
}

/// An empty 0 × 0 CSR.
fn empty<F: Scalar>() -> Csr<F> {
    Csr::new_trusted_pub((0, 0), vec![0], Vec::new(), Vec::new())
}

impl<F: Scalar> BlockAdj<F> {
    /// The block of rows `indptr` over `n_src` columns (`indices` ascending within each row,
    /// below `n_src`), entry (i, j) being d_in(i)^-1/2 · d_out(j)^-1/2: d_in the row's entries,
    /// d_out the column's (DGL's `GraphConv(norm='both')` on a block), each factor computed in
    /// f64 and rounded to `F`, then their product in `F` (as [`NormAdj`](super::NormAdj)
    /// rounds D̃^-1/2: a block of every neighbour of every node is the whole Â, bit for bit).
    ///
    /// # Panics
    /// If `indptr` is not a row pointer of `indices` (non-decreasing, from 0 to its length)
    /// or an index is not below `n_src` (the sampler's own arrays, never user input).
    pub fn normalised(n_src: usize, indptr: Vec<usize>, indices: Vec<u32>) -> Self {
        let mut b = BlockAdj {
            id: DataId::fresh(),
            a: empty(),
            a_t: empty(),
            has_t: false,
            spare: Spare::default(),
        };
        b.set_normalised(n_src, indptr, indices, true);
        b
    }

    /// The storage of this block's row pointers and indices, emptied, for the next block's
    /// pattern ([`BlockAdj::set_normalised`]); the block is empty until then.
    pub(crate) fn take_pattern(&mut self) -> (Vec<usize>, Vec<u32>) {
        let (mut indptr, mut indices, data) =
            std::mem::replace(&mut self.a, empty()).into_raw_storage();
        self.spare.data = data;
        if std::mem::take(&mut self.has_t) {
            let (t_indptr, t_indices, t_data) =
                std::mem::replace(&mut self.a_t, empty()).into_raw_storage();
            self.spare.t = CsrArrays {
                indptr: t_indptr,
                indices: t_indices,
                data: t_data,
            };
        }
        indptr.clear();
        indices.clear();
        (indptr, indices)
    }

    /// [`BlockAdj::normalised`] in this block's storage, with a fresh id, its transpose built
    /// when `transpose` (a block for training) and not otherwise (for evaluation): no
    /// allocation once it has held as many rows, sources and entries.
    ///
    /// # Panics
    /// As [`BlockAdj::normalised`].
    pub(crate) fn set_normalised(
        &mut self,
        n_src: usize,
        indptr: Vec<usize>,
        indices: Vec<u32>,
        transpose: bool,
    ) {
        assert!(
            indptr.first() == Some(&0)
                && indptr.last() == Some(&indices.len())
                && indptr.windows(2).all(|w| w[0] <= w[1])
                && indices.iter().all(|&j| (j as usize) < n_src),
            "BlockAdj::normalised: not a CSR of {n_src} columns"
        );
        let inv_sqrt = |d: usize| F::from_f64_lossy(1.0 / (d as f64).sqrt());
        let Spare {
            data,
            t,
            d_out,
            s_out,
            fill,
        } = &mut self.spare;
        d_out.clear();
        d_out.resize(n_src, 0);
        for &j in &indices {
            d_out[j as usize] += 1;
        }
        s_out.clear();
        s_out.extend(d_out.iter().map(|&d| inv_sqrt(d)));
        data.clear();
        for w in indptr.windows(2) {
            let s_in = inv_sqrt(w[1] - w[0]);
            data.extend(
                indices[w[0]..w[1]]
                    .iter()
                    .map(|&j| s_in * s_out[j as usize]),
            );
        }
        let n_dst = indptr.len() - 1;
        if transpose {
            transpose_into(n_src, &indptr, &indices, Some(data), t, fill, None);
            let CsrArrays {
                indptr: t_indptr,
                indices: t_indices,
                data: t_data,
            } = std::mem::take(t);
            self.a_t = Csr::new_trusted_pub((n_src, n_dst), t_indptr, t_indices, t_data);
        }
        self.has_t = transpose;
        let data = std::mem::take(data);
        self.id = DataId::fresh();
        self.a = Csr::new_trusted_pub((n_dst, n_src), indptr, indices, data);
    }

    /// Â.
    pub fn a(&self) -> CsrView<'_, F> {
        self.a.view()
    }

    /// Âᵀ, when the block holds it (`None` for a block built for evaluation).
    pub fn a_t(&self) -> Option<CsrView<'_, F>> {
        self.has_t.then(|| self.a_t.view())
    }

    /// `f` of Âᵀ: the one held, or one built for the call.
    fn with_t<R>(&self, f: impl FnOnce(CsrView<'_, F>) -> R) -> R {
        if self.has_t {
            return f(self.a_t.view());
        }
        let (m, n) = self.a.shape();
        let mut t = CsrArrays::default();
        let a = self.a.view();
        let ip = a.indptr();
        let ip = ip.raw_storage();
        transpose_into(
            n,
            ip,
            a.indices(),
            Some(a.data()),
            &mut t,
            &mut Vec::new(),
            None,
        );
        let t = Csr::new_trusted_pub((n, m), t.indptr, t.indices, t.data);
        f(t.view())
    }
}

impl<F: Scalar> Propagate<F> for BlockAdj<F> {
    fn id(&self) -> DataId {
        self.id
    }

    fn shape(&self) -> (usize, usize) {
        self.a.shape()
    }

    fn nnz(&self) -> usize {
        self.a.nnz()
    }

    fn caps(&self) -> Caps {
        Caps {
            a_blocks: true,
            at_blocks: true,
            ..Caps::default()
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
        self.with_t(|t| spmm(alpha, t, g, beta, out, par));
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
        self.with_t(|t| blocks(t, g, block, buf, f, par));
        Ok(())
    }
}

/// The rows of one level of a stack of blocks, as the layers between two blocks see them
/// ([`Cx::adj`](crate::nn::layer::Cx::adj) of a layer of no hops, [`Layer::hops`](crate::nn::Layer::hops)):
/// an n × n operator with no products, whose sums run over its n rows.
#[derive(Debug, Clone, Copy)]
pub struct LevelRows {
    id: DataId,
    n: usize,
}

impl LevelRows {
    /// Level rows of `n` nodes, with a fresh id.
    pub fn new(n: usize) -> Self {
        LevelRows {
            id: DataId::fresh(),
            n,
        }
    }
}

impl<F: Scalar> Propagate<F> for LevelRows {
    fn id(&self) -> DataId {
        self.id
    }

    fn shape(&self) -> (usize, usize) {
        (self.n, self.n)
    }

    fn nnz(&self) -> usize {
        0
    }

    /// # Panics
    /// Always: a layer that declares no hops (`Some(0)`) does not propagate.
    fn a_times(&self, _: F, _: ArrayView2<'_, F>, _: F, _: ArrayViewMut2<'_, F>, _: Par) {
        panic!("a layer that declares no hops (Layer::hops: Some(0)) propagated over a stack of blocks")
    }

    /// # Panics
    /// Always, as [`LevelRows::a_times`].
    fn at_times(&self, _: F, _: ArrayView2<'_, F>, _: F, _: ArrayViewMut2<'_, F>, _: Par) {
        panic!("a layer that declares no hops (Layer::hops: Some(0)) propagated over a stack of blocks")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;

    /// A 2 × 4 block: row 0 = {0, 2, 3}, row 1 = {1, 2}; column degrees (1, 1, 2, 1). Its
    /// values are 1/√(d_in·d_out); Â·X and Âᵀ·G are the dense products.
    #[test]
    fn a_block_is_normalised_by_its_own_degrees_and_multiplies_as_dense() {
        let b = BlockAdj::<f64>::normalised(4, vec![0, 3, 5], vec![0, 2, 3, 1, 2]);
        assert_eq!(Propagate::shape(&b), (2, 4));
        let want = [
            [1.0 / 3f64.sqrt(), 0.0, 1.0 / 6f64.sqrt(), 1.0 / 3f64.sqrt()],
            [0.0, 1.0 / 2f64.sqrt(), 1.0 / 4f64.sqrt(), 0.0],
        ];
        let dense = Array2::from_shape_fn((2, 4), |(i, j)| want[i][j]);
        let x = Array2::from_shape_fn((4, 3), |(i, j)| (i * 3 + j) as f64 - 4.0);
        let mut out = Array2::zeros((2, 3));
        b.a_times(1.0, x.view(), 0.0, out.view_mut(), Par::Seq);
        assert!((&out - &dense.dot(&x)).iter().all(|v| v.abs() < 1e-12));
        let g = Array2::from_shape_fn((2, 3), |(i, j)| (i + 2 * j) as f64 + 0.5);
        let mut back = Array2::zeros((4, 3));
        b.at_times(1.0, g.view(), 0.0, back.view_mut(), Par::Rayon);
        assert!((&back - &dense.t().dot(&g)).iter().all(|v| v.abs() < 1e-12));
        let c = BlockAdj::<f64>::normalised(4, vec![0, 3, 5], vec![0, 2, 3, 1, 2]);
        assert_ne!(b.id(), c.id());
        // In row blocks (the lean order's products): the same rows, bit for bit.
        assert!(b.caps().covers(Caps {
            a_blocks: true,
            at_blocks: true,
            ..Caps::default()
        }));
        let mut buf = vec![0.0; 1024 * 3];
        let mut got = Array2::zeros((2, 3));
        b.a_times_blocks(
            x.view(),
            1024,
            &mut buf,
            &mut |rows, v| got.slice_mut(ndarray::s![rows, ..]).assign(&v),
            Par::Seq,
        )
        .unwrap();
        assert_eq!(got, out);
        let mut got_t = Array2::zeros((4, 3));
        b.at_times_blocks(
            g.view(),
            1024,
            &mut buf,
            &mut |rows, v| got_t.slice_mut(ndarray::s![rows, ..]).assign(&v),
            Par::Seq,
        )
        .unwrap();
        assert_eq!(got_t, back);
        // Built for evaluation, without Âᵀ: the same products by it, bit for bit.
        let mut e = BlockAdj::<f64>::normalised(0, vec![0], Vec::new());
        e.set_normalised(4, vec![0, 3, 5], vec![0, 2, 3, 1, 2], false);
        assert!(e.a_t().is_none() && b.a_t().is_some());
        assert_eq!(e.a().data(), b.a().data());
        let mut back_e = Array2::from_elem((4, 3), f64::NAN);
        e.at_times(1.0, g.view(), 0.0, back_e.view_mut(), Par::Rayon);
        assert_eq!(back_e, back);
        let mut got_e = Array2::zeros((4, 3));
        e.at_times_blocks(
            g.view(),
            1024,
            &mut buf,
            &mut |rows, v| got_e.slice_mut(ndarray::s![rows, ..]).assign(&v),
            Par::Seq,
        )
        .unwrap();
        assert_eq!(got_e, back);
        // Built again for training, it holds Âᵀ again.
        let (ip, ix) = e.take_pattern();
        let (mut ip, mut ix) = (ip, ix);
        ip.extend([0, 3, 5]);
        ix.extend([0, 2, 3, 1, 2]);
        e.set_normalised(4, ip, ix, true);
        assert_eq!(e.a_t().unwrap().data(), b.a_t().unwrap().data());
    }
}
