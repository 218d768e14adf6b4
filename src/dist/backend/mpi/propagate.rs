//! [`DistAdj`] as a [`Propagate`]: the products over this rank's rows after their halo
//! exchange, the capabilities it has, DropEdge's samples.

use std::time::Instant;

use ndarray::{ArrayView2, ArrayViewMut2};

use super::DistAdj;
use crate::graph::propagate::{blocks, BlockFn, NeighbourFn};
use crate::graph::{Caps, Collective, Propagate, RowSpan, Unsupported};
use crate::id::DataId;
use crate::input::SparseFeatures;
use crate::kernels::CsrView;
use crate::Par;

impl Propagate<f32> for DistAdj {
    fn id(&self) -> DataId {
        self.id
    }

    fn shape(&self) -> (usize, usize) {
        (self.range.len(), self.range.len())
    }

    fn nnz(&self) -> usize {
        self.nnz_total
    }

    fn rows(&self) -> RowSpan {
        RowSpan {
            start: self.range.start,
            len: self.range.len(),
            total: self.n_nodes,
        }
    }

    fn collective(&self) -> &dyn Collective {
        self
    }

    fn caps(&self) -> Caps {
        Caps {
            a_blocks: true,
            sparse_product: true,
            neighbours: true,
            drop_edge: self.graph_rows.is_some(),
            ..Caps::default()
        }
    }

    fn a_times(
        &self,
        alpha: f32,
        x: ArrayView2<'_, f32>,
        beta: f32,
        out: ArrayViewMut2<'_, f32>,
        par: Par,
    ) {
        self.product(&self.fwd, self.fwd.a.view(), alpha, x, beta, out, par);
    }

    fn at_times(
        &self,
        alpha: f32,
        g: ArrayView2<'_, f32>,
        beta: f32,
        out: ArrayViewMut2<'_, f32>,
        par: Par,
    ) {
        let side = self.bwd.as_ref().unwrap_or(&self.fwd);
        self.product(side, side.a.view(), alpha, g, beta, out, par);
    }

    fn a_times_blocks(
        &self,
        x: ArrayView2<'_, f32>,
        block: usize,
        buf: &mut [f32],
        f: &mut BlockFn<'_, f32>,
        par: Par,
    ) -> Result<(), Unsupported> {
        // One exchange of the whole halo of `x`, then the blocks of the extended rows.
        self.neighbours_of(self.fwd.a.view(), x, &mut |a, ext, _own| {
            blocks(a, ext, block, buf, f, par);
        });
        Ok(())
    }

    fn a_times_sparse_pattern(
        &self,
        x: CsrView<'_, f32>,
    ) -> Result<SparseFeatures<f32>, Unsupported> {
        let ext = self.extended_sparse(&self.fwd, x);
        Ok(SparseFeatures::new(&self.fwd.a * &ext))
    }

    fn a_times_sparse(
        &self,
        x: CsrView<'_, f32>,
        out: &mut SparseFeatures<f32>,
        tmp: &mut [f32],
    ) -> Result<(), Unsupported> {
        let ext = self.extended_sparse(&self.fwd, x);
        sprs::smmp::numeric(self.fwd.a.view(), ext.view(), out.x_mut(), tmp);
        out.sync_transpose();
        Ok(())
    }

    fn row_gather_bound(&self, per_col: &[usize], cap: usize) -> Result<usize, Unsupported> {
        let (owned, lo) = (self.range.len(), self.fwd.lo);
        let mut ext = vec![0u64; owned + self.fwd.halo.len()];
        for (e, &c) in ext[lo..lo + owned].iter_mut().zip(per_col) {
            *e = c as u64;
        }
        let mut buf = Vec::new();
        let t0 = Instant::now();
        match self.fwd.ex.rows(&mut ext, lo, owned, 1, &mut buf) {
            Ok(b) => self.add_traffic(b, t0),
            Err(e) => panic!("DistAdj: {e}"),
        }
        let local: usize = self
            .fwd
            .a
            .outer_iterator()
            .map(|row| {
                let r: u64 = row.indices().iter().map(|&j| ext[j as usize]).sum();
                (r as usize).min(cap)
            })
            .sum();
        // One word across the ranks (what the communication model counts).
        let mut w = [i64::try_from(local).unwrap_or(i64::MAX)];
        self.sum_words(&mut w);
        Ok(usize::try_from(w[0]).unwrap_or(usize::MAX))
    }

    fn with_neighbours(
        &self,
        h: ArrayView2<'_, f32>,
        f: &mut NeighbourFn<'_, f32>,
    ) -> Result<(), Unsupported> {
        self.neighbours_of(self.fwd.a.view(), h, f);
        Ok(())
    }

    fn gather_rows(
        &self,
        h: ArrayView2<'_, f32>,
        rows: &[usize],
    ) -> Result<ndarray::Array2<f64>, Unsupported> {
        Ok(self.gather_owned(h, rows))
    }

    fn drop_edge_sample(
        &self,
        p: f64,
        key: u64,
    ) -> Result<Box<dyn Propagate<f32> + '_>, Unsupported> {
        self.sample(p, key).ok_or(Unsupported {
            op: "DropEdge on a row-partitioned Â without the graph's rows (DistAdj::with_graph)",
        })
    }
}
