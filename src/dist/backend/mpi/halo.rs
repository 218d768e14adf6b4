//! The exchanges before a product of a [`DistAdj`]: the halo rows of a dense H in column
//! tiles, of a sparse X with their entries, of one value per row, and the rows a metric
//! gathers from every rank.

use std::sync::PoisonError;
use std::time::Instant;

use mpi::datatype::{Partition, PartitionMut};
use mpi::traits::*;
use ndarray::{s, ArrayView2, ArrayViewMut2};

use super::exchange::{c_counts, displs, Side};
use super::{world, DistAdj};
use crate::dist::backend::tile_width;
use crate::graph::propagate::NeighbourFn;
use crate::kernels::{spmm, Csr, CsrView};
use crate::Par;

impl DistAdj {
    /// out ← α·M·X + β·out for this rank's rows M (`m`, over the slots of `side`), after
    /// `side`'s halo exchange.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn product(
        &self,
        side: &Side,
        m: CsrView<'_, f32>,
        alpha: f32,
        x: ArrayView2<'_, f32>,
        beta: f32,
        out: ArrayViewMut2<'_, f32>,
        par: Par,
    ) {
        let (owned, d) = (self.range.len(), x.ncols());
        assert_eq!(
            x.nrows(),
            owned,
            "DistAdj: x has {} of {owned} rows",
            x.nrows()
        );
        let halo = side.halo.len();
        let mut ext = self.ext.lock().unwrap_or_else(PoisonError::into_inner);
        let mut sendbuf = self.sendbuf.lock().unwrap_or_else(PoisonError::into_inner);
        // Column tiles, so that the extended rows never hold much more than X itself: the
        // SpMM computes each element in the same order at any width, so the bits do not
        // depend on the tiling.
        let tile = tile_width(self.share, d);
        let mut out = out;
        let mut c0 = 0;
        loop {
            let c1 = (c0 + tile).min(d);
            let w = c1 - c0;
            ext.clear();
            ext.resize((owned + halo) * w, 0.0);
            let mine = &mut ext[side.lo * w..(side.lo + owned) * w];
            for (dst, row) in mine.chunks_exact_mut(w.max(1)).zip(x.rows()) {
                for (o, &v) in dst.iter_mut().zip(row.iter().skip(c0)) {
                    *o = v;
                }
            }
            let t0 = Instant::now();
            match side.ex.rows(&mut ext, side.lo, owned, w, &mut sendbuf) {
                Ok(b) => self.add_traffic(b, t0),
                Err(e) => panic!("DistAdj: {e}"),
            }
            let Ok(ev) = ArrayView2::from_shape((owned + halo, w), &ext[..]) else {
                unreachable!("DistAdj: the extended rows")
            };
            spmm(alpha, m, ev, beta, out.slice_mut(s![.., c0..c1]), par);
            c0 = c1;
            if c0 >= d {
                break;
            }
        }
    }

    /// This rank's rows of sparse X and its halo rows under one side, as one CSR matrix (owned
    /// rows first, then the halo in global order).
    pub(super) fn extended_sparse(&self, side: &Side, x: CsrView<'_, f32>) -> Csr<f32> {
        let owned = self.range.len();
        let ip = x.indptr();
        let ip = ip.raw_storage();
        let ex = &side.ex;
        let (halo, lo) = (side.halo.len(), side.lo);
        // Row lengths of the extended matrix: the halo's received, this rank's own.
        let mut lens = vec![0u64; owned + halo];
        for i in 0..owned {
            lens[lo + i] = (ip[i + 1] - ip[i]) as u64;
        }
        let mut buf = Vec::new();
        let t0 = Instant::now();
        match ex.rows(&mut lens, lo, owned, 1, &mut buf) {
            Ok(b) => self.add_traffic(b, t0),
            Err(e) => panic!("DistAdj: {e}"),
        }
        let halo_lens: Vec<u64> = (0..halo)
            .map(|i| lens[if i < lo { i } else { i + owned }])
            .collect();
        // The entries, rank by rank, as (index, value) pairs of u32 bits.
        let comm = world();
        let mut send: Vec<u32> = Vec::new();
        let mut send_counts = Vec::with_capacity(ex.send.len());
        let mut at = 0;
        for &c in &ex.send {
            let mut k = 0usize;
            for &r in &ex.send_rows[at..at + c] {
                let r = r as usize;
                for e in ip[r]..ip[r + 1] {
                    send.push(x.indices()[e]);
                    send.push(x.data()[e].to_bits());
                    k += 2;
                }
            }
            send_counts.push(k);
            at += c;
        }
        let mut recv_counts = Vec::with_capacity(ex.recv.len());
        let mut at = 0;
        for &c in &ex.recv {
            recv_counts.push(2 * halo_lens[at..at + c].iter().sum::<u64>() as usize);
            at += c;
        }
        let (sc, rc) = match (
            c_counts(send_counts.iter().copied()),
            c_counts(recv_counts.iter().copied()),
        ) {
            (Ok(s), Ok(r)) => (s, r),
            (Err(e), _) | (_, Err(e)) => panic!("DistAdj: {e}"),
        };
        let mut recv = vec![0u32; recv_counts.iter().sum()];
        let t0 = Instant::now();
        {
            let (sd, rd) = (displs(&sc), displs(&rc));
            let out = Partition::new(&send[..], &sc[..], &sd[..]);
            let mut inp = PartitionMut::new(&mut recv[..], &rc[..], &rd[..]);
            comm.all_to_all_varcount_into(&out, &mut inp);
        }
        self.add_traffic(4 * send.len() as u64, t0);
        // Rows in extended order: the halo below (its first received entries), this rank's,
        // the halo above.
        let below: usize = halo_lens[..lo].iter().sum::<u64>() as usize;
        let mut indptr = Vec::with_capacity(owned + halo + 1);
        let mut indices = Vec::with_capacity(recv.len() / 2 + ip[owned]);
        let mut data = Vec::with_capacity(recv.len() / 2 + ip[owned]);
        let push_recv = |pairs: &[u32], indices: &mut Vec<u32>, data: &mut Vec<f32>| {
            for pair in pairs.chunks_exact(2) {
                indices.push(pair[0]);
                data.push(f32::from_bits(pair[1]));
            }
        };
        indptr.push(0);
        for &l in &lens {
            let last = indptr[indptr.len() - 1];
            indptr.push(last + l as usize);
        }
        push_recv(&recv[..2 * below], &mut indices, &mut data);
        indices.extend_from_slice(&x.indices()[..ip[owned]]);
        data.extend_from_slice(&x.data()[..ip[owned]]);
        push_recv(&recv[2 * below..], &mut indices, &mut data);
        Csr::new((owned + halo, x.cols()), indptr, indices, data)
    }
}

impl DistAdj {
    /// `f(a, ext, lo)` for rows `a` over Â's slots (Â's own rows or a sample's): `ext` holds
    /// `h`'s own rows and Â's whole halo of `h`, received at full width
    /// ([`Propagate::with_neighbours`]).
    pub(super) fn neighbours_of(
        &self,
        a: CsrView<'_, f32>,
        h: ArrayView2<'_, f32>,
        f: &mut NeighbourFn<'_, f32>,
    ) {
        let (owned, d) = (self.range.len(), h.ncols());
        assert_eq!(
            h.nrows(),
            owned,
            "DistAdj: h has {} of {owned} rows",
            h.nrows()
        );
        let side = &self.fwd;
        let lo = side.lo;
        let mut ext = vec![0f32; (owned + side.halo.len()) * d];
        for (i, row) in h.rows().into_iter().enumerate() {
            for (o, &v) in ext[(lo + i) * d..(lo + i + 1) * d].iter_mut().zip(row) {
                *o = v;
            }
        }
        let mut buf = Vec::new();
        let t0 = Instant::now();
        match side.ex.rows(&mut ext, lo, owned, d, &mut buf) {
            Ok(b) => self.add_traffic(b, t0),
            Err(e) => panic!("DistAdj: {e}"),
        }
        drop(buf);
        let rows = owned + side.halo.len();
        match ArrayView2::from_shape((rows, d), &ext[..]) {
            Ok(view) => f(a, view, lo),
            Err(e) => panic!("DistAdj: the extended rows ({e})"),
        }
    }

    /// The extended rows of `side` (width 1) holding `own` (one value per owned row) and the
    /// halo's values, received from their owners.
    pub(super) fn exchange_factors(&self, side: &Side, own: &[f32]) -> Vec<f32> {
        let owned = own.len();
        let mut ext = vec![0f32; owned + side.halo.len()];
        ext[side.lo..side.lo + owned].copy_from_slice(own);
        let mut buf = Vec::new();
        let t0 = Instant::now();
        match side.ex.rows(&mut ext, side.lo, owned, 1, &mut buf) {
            Ok(b) => self.add_traffic(b, t0),
            Err(e) => panic!("DistAdj: {e}"),
        }
        ext
    }

    /// [`Propagate::gather_rows`]: each rank's sampled rows, all-gathered in global order.
    pub(super) fn gather_owned(
        &self,
        h: ArrayView2<'_, f32>,
        rows: &[usize],
    ) -> ndarray::Array2<f64> {
        let d = h.ncols();
        let start = self.range.start;
        let mine: Vec<f32> = rows
            .iter()
            .filter(|&&r| self.range.contains(&r))
            .flat_map(|&r| h.row(r - start).to_vec())
            .collect();
        // Every rank knows every count: the rows are the same on all ranks.
        let counts = match c_counts((0..self.part.ranks()).map(|q| {
            let range = self.part.range(q);
            rows.iter().filter(|&&r| range.contains(&r)).count() * d
        })) {
            Ok(c) => c,
            Err(e) => panic!("DistAdj: {e}"),
        };
        let total: usize = counts.iter().map(|&c| c as usize).sum();
        let mut all = vec![0f32; total];
        let t0 = Instant::now();
        {
            let dd = displs(&counts);
            let mut out = PartitionMut::new(&mut all[..], &counts[..], &dd[..]);
            world().all_gather_varcount_into(&mine[..], &mut out);
        }
        self.add_traffic((4 * mine.len() * (self.part.ranks() - 1)) as u64, t0);
        match ndarray::Array2::from_shape_vec(
            (rows.len(), d),
            all.iter().map(|&v| f64::from(v)).collect(),
        ) {
            Ok(x) => x,
            Err(e) => panic!("DistAdj: the gathered rows ({e})"),
        }
    }
}
