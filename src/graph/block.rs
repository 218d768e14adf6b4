//! [`BlockAdj`]: a bipartite block, the rectangular Â of one layer of a neighbour-sampled
//! mini-batch: n_dst destination rows over n_src source columns, the destinations being the
//! first n_dst sources (DGL's message-flow graph convention), normalised on the block
//! (`docs/MATH.md` §23).

use ndarray::{ArrayView2, ArrayViewMut2};

use super::propagate::{blocks, BlockFn};
use super::{Caps, Propagate, Unsupported};
use crate::id::DataId;
use crate::kernels::transpose::{transpose_with_pos, CsrArrays};
use crate::kernels::{spmm, Csr, CsrView, NewTrusted};
use crate::{Par, Scalar};

/// A rectangular Â (n_dst × n_src) with its transpose, as [`Propagate`] gives it to a layer.
#[derive(Debug, Clone)]
pub struct BlockAdj<F> {
    id: DataId,
    a: Csr<F>,
    a_t: Csr<F>,
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
        assert!(
            indptr.first() == Some(&0)
                && indptr.last() == Some(&indices.len())
                && indptr.windows(2).all(|w| w[0] <= w[1])
                && indices.iter().all(|&j| (j as usize) < n_src),
            "BlockAdj::normalised: not a CSR of {n_src} columns"
        );
        let inv_sqrt = |d: usize| F::from_f64_lossy(1.0 / (d as f64).sqrt());
        let mut d_out = vec![0usize; n_src];
        for &j in &indices {
            d_out[j as usize] += 1;
        }
        let s_out: Vec<F> = d_out.into_iter().map(inv_sqrt).collect();
        let mut data = Vec::with_capacity(indices.len());
        for w in indptr.windows(2) {
            let s_in = inv_sqrt(w[1] - w[0]);
            data.extend(
                indices[w[0]..w[1]]
                    .iter()
                    .map(|&j| s_in * s_out[j as usize]),
            );
        }
        let n_dst = indptr.len() - 1;
        let (t, _) = transpose_with_pos(n_src, &indptr, &indices, Some(&data));
        let CsrArrays {
            indptr: t_indptr,
            indices: t_indices,
            data: t_data,
        } = t;
        BlockAdj {
            id: DataId::fresh(),
            a: Csr::new_trusted_pub((n_dst, n_src), indptr, indices, data),
            a_t: Csr::new_trusted_pub((n_src, n_dst), t_indptr, t_indices, t_data),
        }
    }

    /// Â.
    pub fn a(&self) -> CsrView<'_, F> {
        self.a.view()
    }

    /// Âᵀ.
    pub fn a_t(&self) -> CsrView<'_, F> {
        self.a_t.view()
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
    }
}
