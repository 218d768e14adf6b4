//! DropEdge in a row-partitioned run: [`DistAdj::sample`] draws this rank's rows of Â′
//! (and Â′ᵀ) with the keyed rule of one process, and [`DistSample`] runs the products on them
//! over the base's halo.

use ndarray::{ArrayView2, ArrayViewMut2};

use super::exchange::slot;
use super::DistAdj;
use crate::graph::dropedge::{keep_threshold, keeps};
use crate::graph::propagate::{blocks, BlockFn, NeighbourFn};
use crate::graph::{Caps, Collective, Norm, Propagate, RowSpan, Unsupported};
use crate::input::SparseFeatures;
use crate::kernels::{Csr, CsrView};
use crate::Par;

impl DistAdj {
    /// [`Propagate::drop_edge_sample`] of a `DistAdj`.
    pub(super) fn sample(&self, p: f64, key: u64) -> Option<Box<dyn Propagate<f32> + '_>> {
        let g = self.graph_rows.as_ref()?;
        let (ip, nb, norm) = (&g.indptr, &g.neighbours, g.norm);
        let threshold = keep_threshold(p);
        // Whether entry (u, j) of Ã is kept: an undirected edge is decided from its lower
        // endpoint, an arc of a directed graph on its own (as `DropEdge::sample_into`).
        let keep = |u: u32, j: u32| {
            if g.directed {
                keeps(key, u, j, threshold)
            } else {
                keeps(key, u.min(j), u.max(j), threshold)
            }
        };
        let (owned, start) = (self.range.len(), self.range.start);
        let side = &self.fwd;
        // Ã′'s rows as `NormAdj::assign_filtered` lays them out (global ids): the kept
        // neighbours below i, the self-loop, the kept neighbours above i.
        let mut indptr = Vec::with_capacity(owned + 1);
        let mut cols: Vec<u32> = Vec::with_capacity(nb.len() + owned);
        indptr.push(0usize);
        for i in 0..owned {
            let u = (start + i) as u32;
            let row = &nb[ip[i]..ip[i + 1]];
            let pos = row.partition_point(|&j| j < u);
            cols.extend(row[..pos].iter().copied().filter(|&j| keep(u, j)));
            cols.push(u);
            cols.extend(row[pos..].iter().copied().filter(|&j| j != u && keep(u, j)));
            indptr.push(cols.len());
        }
        // Each node's factor from its sampled degree (D̃′^-1/2 or D̃′^-1), the halo's received.
        let factor = |d: usize| match norm {
            Norm::Symmetric => (1.0 / (d as f64).sqrt()) as f32,
            Norm::Row => (1.0 / d as f64) as f32,
        };
        let own_factors: Vec<f32> = (0..owned)
            .map(|i| factor(indptr[i + 1] - indptr[i]))
            .collect();
        let ext = self.exchange_factors(side, &own_factors);
        let lo = side.lo;
        let slots: Vec<u32> = cols
            .iter()
            .map(|&j| slot(j, &self.range, &side.halo, lo) as u32)
            .collect();
        let shape = (owned, owned + side.halo.len());
        let mut data = Vec::with_capacity(cols.len());
        let mut data_t = Vec::new();
        for i in 0..owned {
            let fi = ext[lo + i];
            for &k in &slots[indptr[i]..indptr[i + 1]] {
                match norm {
                    Norm::Symmetric => data.push(fi * ext[k as usize]),
                    Norm::Row => {
                        data.push(fi);
                        // Â′ᵀ's row i of an undirected sample: the same pattern, 1/d̃′_j.
                        data_t.push(ext[k as usize]);
                    }
                }
            }
        }
        let (a_t, t_on_bwd) = if g.directed {
            // Â′ᵀ's row i: the kept entries (j, i) of Âᵀ's row i (over Âᵀ's slots), each with
            // Â′_ji from j's sampled factor, received over Âᵀ's halo.
            let t = self.bwd.as_ref()?;
            let ext_t = self.exchange_factors(t, &own_factors);
            let global = |k: usize| -> u32 {
                if k < t.lo {
                    t.halo[k]
                } else if k < t.lo + owned {
                    (start + k - t.lo) as u32
                } else {
                    t.halo[k - owned]
                }
            };
            let tip = t.a.indptr();
            let tip = tip.raw_storage();
            let mut t_indptr = Vec::with_capacity(owned + 1);
            t_indptr.push(0usize);
            let (mut t_slots, mut t_data) = (Vec::new(), Vec::new());
            for i in 0..owned {
                let u = (start + i) as u32;
                let fi = ext_t[t.lo + i];
                for &k in &t.a.indices()[tip[i]..tip[i + 1]] {
                    let j = global(k as usize);
                    if j == u || keep(j, u) {
                        let fj = ext_t[k as usize];
                        t_slots.push(k);
                        t_data.push(match norm {
                            Norm::Symmetric => fj * fi,
                            Norm::Row => fj,
                        });
                    }
                }
                t_indptr.push(t_slots.len());
            }
            let t_shape = (owned, owned + t.halo.len());
            (Some(Csr::new(t_shape, t_indptr, t_slots, t_data)), true)
        } else {
            let a_t =
                (norm == Norm::Row).then(|| Csr::new(shape, indptr.clone(), slots.clone(), data_t));
            (a_t, false)
        };
        let a = Csr::new(shape, indptr, slots, data);
        Some(Box::new(DistSample {
            id: crate::id::DataId::fresh(),
            base: self,
            a,
            a_t,
            t_on_bwd,
        }))
    }
}

/// DropEdge's sample of a [`DistAdj`]: this rank's rows of Â′ (and Â′ᵀ for a row-normalised
/// Â) over the base's slots, exchanging the base's halo; everything else is the base's.
struct DistSample<'a> {
    /// A fresh identity: each sample is another Â.
    id: crate::id::DataId,
    base: &'a DistAdj,
    a: Csr<f32>,
    a_t: Option<Csr<f32>>,
    /// Whether `a_t`'s columns are slots of Âᵀ's halo (a directed sample) rather than Â's.
    t_on_bwd: bool,
}

impl Propagate<f32> for DistSample<'_> {
    fn id(&self) -> crate::id::DataId {
        self.id
    }

    fn shape(&self) -> (usize, usize) {
        self.base.shape()
    }

    fn nnz(&self) -> usize {
        self.base.nnz()
    }

    fn rows(&self) -> RowSpan {
        self.base.rows()
    }

    fn collective(&self) -> &dyn Collective {
        self.base
    }

    fn caps(&self) -> Caps {
        Caps {
            drop_edge: false,
            ..self.base.caps()
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
        let b = self.base;
        b.product(&b.fwd, self.a.view(), alpha, x, beta, out, par);
    }

    fn at_times(
        &self,
        alpha: f32,
        g: ArrayView2<'_, f32>,
        beta: f32,
        out: ArrayViewMut2<'_, f32>,
        par: Par,
    ) {
        let b = self.base;
        let m = self.a_t.as_ref().unwrap_or(&self.a);
        let side = match (&b.bwd, self.t_on_bwd) {
            (Some(t), true) => t,
            _ => &b.fwd,
        };
        b.product(side, m.view(), alpha, g, beta, out, par);
    }

    fn a_times_blocks(
        &self,
        x: ArrayView2<'_, f32>,
        block: usize,
        buf: &mut [f32],
        f: &mut BlockFn<'_, f32>,
        par: Par,
    ) -> Result<(), Unsupported> {
        // The sample's columns are slots of Â's halo.
        self.base
            .neighbours_of(self.a.view(), x, &mut |a, ext, _own| {
                blocks(a, ext, block, buf, f, par);
            });
        Ok(())
    }

    fn a_times_sparse_pattern(
        &self,
        x: CsrView<'_, f32>,
    ) -> Result<SparseFeatures<f32>, Unsupported> {
        let ext = self.base.extended_sparse(&self.base.fwd, x);
        Ok(SparseFeatures::new(&self.a * &ext))
    }

    fn a_times_sparse(
        &self,
        x: CsrView<'_, f32>,
        out: &mut SparseFeatures<f32>,
        tmp: &mut [f32],
    ) -> Result<(), Unsupported> {
        let ext = self.base.extended_sparse(&self.base.fwd, x);
        sprs::smmp::numeric(self.a.view(), ext.view(), out.x_mut(), tmp);
        out.sync_transpose();
        Ok(())
    }

    fn row_gather_bound(&self, per_col: &[usize], cap: usize) -> Result<usize, Unsupported> {
        self.base.row_gather_bound(per_col, cap)
    }

    fn with_neighbours(
        &self,
        h: ArrayView2<'_, f32>,
        f: &mut NeighbourFn<'_, f32>,
    ) -> Result<(), Unsupported> {
        // The sample's columns are slots of Â's halo.
        self.base.neighbours_of(self.a.view(), h, f);
        Ok(())
    }

    fn gather_rows(
        &self,
        h: ArrayView2<'_, f32>,
        rows: &[usize],
    ) -> Result<ndarray::Array2<f64>, Unsupported> {
        Ok(self.base.gather_owned(h, rows))
    }
}
