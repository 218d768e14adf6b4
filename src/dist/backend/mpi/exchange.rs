//! The halo exchange of a row-partitioned Â: MPI counts, who sends which rows to whom
//! ([`Exchange`]), and one direction of the products over owned + halo slots ([`Side`]).

use std::ops::Range;

use mpi::collective::SystemOperation;
use mpi::datatype::{Equivalence, Partition, PartitionMut};
use mpi::traits::*;
use mpi::Count;

use super::world;
use crate::dist::backend::RowPartition;
use crate::kernels::{Csr, CsrView};
use crate::{Error, Result};

/// Displacements of `counts` (exclusive prefix sums).
pub(super) fn displs(counts: &[Count]) -> Vec<Count> {
    counts
        .iter()
        .scan(0, |acc, &c| {
            let d = *acc;
            *acc += c;
            Some(d)
        })
        .collect()
}

/// Element counts as C ints.
///
/// # Errors
/// [`Error::Distributed`] for a count above 2³¹ − 1.
pub(super) fn c_counts(counts: impl Iterator<Item = usize>) -> Result<Vec<Count>> {
    let counts: Vec<Count> = counts
        .map(|c| {
            Count::try_from(c).map_err(|_| {
                Error::Distributed(format!("a message of {c} elements exceeds MPI's 2³¹ − 1"))
            })
        })
        .collect::<Result<_>>()?;
    // Their displacements (prefix sums) are C ints too.
    let total: i64 = counts.iter().map(|&c| i64::from(c)).sum();
    if total > i64::from(Count::MAX) {
        return Err(Error::Distributed(format!(
            "an exchange of {total} elements exceeds MPI's 2³¹ − 1"
        )));
    }
    Ok(counts)
}

/// Who sends which rows to whom before a product: the halo's rows arrive grouped by owner (in
/// global order); this rank's rows leave grouped by the rank that asked (in its order).
#[derive(Debug, Clone)]
pub(super) struct Exchange {
    /// Halo rows received from each rank.
    pub(super) recv: Vec<usize>,
    /// This rank's rows (local indices) sent to each rank, grouped by rank.
    pub(super) send_rows: Vec<u32>,
    /// Rows sent to each rank.
    pub(super) send: Vec<usize>,
    /// The most rows any rank sends or receives in this exchange: it sets the column blocks
    /// that keep every count a C int, the same on every rank (so every rank makes the same
    /// number of calls).
    pub(super) most: usize,
}

impl Exchange {
    /// Asks each owner for the halo rows it owns, and learns what the others ask of us.
    pub(super) fn setup(halo: &[u32], part: &RowPartition, start: usize) -> Result<Exchange> {
        let p = part.ranks();
        let mut recv = vec![0usize; p];
        for &j in halo {
            recv[part.owner(j as usize)] += 1;
        }
        let comm = world();
        let recv_c = c_counts(recv.iter().copied())?;
        let mut send_c: Vec<Count> = vec![0; p];
        comm.all_to_all_into(&recv_c[..], &mut send_c[..]);
        let total: usize = send_c.iter().map(|&c| c as usize).sum();
        let mut asked = vec![0u32; total];
        {
            let rd = displs(&recv_c);
            let sd = displs(&send_c);
            let out = Partition::new(halo, &recv_c[..], &rd[..]);
            let mut inp = PartitionMut::new(&mut asked[..], &send_c[..], &sd[..]);
            comm.all_to_all_varcount_into(&out, &mut inp);
        }
        let send_rows = asked.iter().map(|&g| g - start as u32).collect();
        let send: Vec<usize> = send_c.iter().map(|&c| c as usize).collect();
        let mine = send.iter().sum::<usize>().max(halo.len()).max(1) as u64;
        let mut most = 0u64;
        comm.all_reduce_into(&mine, &mut most, SystemOperation::max());
        Ok(Exchange {
            recv,
            send_rows,
            send,
            most: most as usize,
        })
    }

    pub(super) fn halo_rows(&self) -> usize {
        self.recv.iter().sum()
    }

    pub(super) fn sent_rows(&self) -> usize {
        self.send.iter().sum()
    }

    /// The halo rows of `ext` ((halo + owned) × d: `lo` halo rows, the owned rows, the other
    /// halo rows) ← the owners' rows; this rank's rows are read from `ext` too, `sendbuf` is
    /// reused. Returns the bytes sent.
    pub(super) fn rows<T: Equivalence + Copy + Default>(
        &self,
        ext: &mut [T],
        lo: usize,
        owned: usize,
        d: usize,
        sendbuf: &mut Vec<T>,
    ) -> Result<u64> {
        let comm = world();
        let halo = self.halo_rows();
        let most = self.most;
        // Column blocks whose element counts fit a C int.
        let block = (Count::MAX as usize / most).clamp(1, d.max(1));
        // The ext row of halo row i.
        let row_of = |i: usize| if i < lo { i } else { i + owned };
        let mut tmp: Vec<T> = Vec::new();
        let mut c0 = 0;
        while c0 < d {
            let c1 = (c0 + block).min(d);
            let w = c1 - c0;
            sendbuf.clear();
            for &r in &self.send_rows {
                let r = (lo + r as usize) * d;
                sendbuf.extend_from_slice(&ext[r + c0..r + c1]);
            }
            let sc = c_counts(self.send.iter().map(|&c| c * w))?;
            let rc = c_counts(self.recv.iter().map(|&c| c * w))?;
            let sd = displs(&sc);
            if w == d {
                // Straight into place: owner q's rows start at ext row row_of(first halo row
                // of q) (the owners below this rank fill the rows below its own).
                let mut first = 0;
                let mut rd = Vec::with_capacity(self.recv.len());
                for &c in &self.recv {
                    rd.push(c_counts(std::iter::once(row_of(first) * d))?[0]);
                    first += c;
                }
                let out = Partition::new(&sendbuf[..], &sc[..], &sd[..]);
                let mut inp = PartitionMut::new(&mut *ext, &rc[..], &rd[..]);
                comm.all_to_all_varcount_into(&out, &mut inp);
            } else {
                tmp.clear();
                tmp.resize(halo * w, T::default());
                let rd = displs(&rc);
                {
                    let out = Partition::new(&sendbuf[..], &sc[..], &sd[..]);
                    let mut inp = PartitionMut::new(&mut tmp[..], &rc[..], &rd[..]);
                    comm.all_to_all_varcount_into(&out, &mut inp);
                }
                for (i, row) in tmp.chunks_exact(w).enumerate() {
                    let r = row_of(i) * d;
                    ext[r + c0..r + c1].copy_from_slice(row);
                }
            }
            c0 = c1;
        }
        Ok((self.sent_rows() * d * std::mem::size_of::<T>()) as u64)
    }
}

/// The slot of global column `j` in the extended rows of a rank owning `range` with halo
/// `halo` (sorted), `below` of it under the range: monotone in j, so every row keeps its
/// column order.
pub(super) fn slot(j: u32, range: &Range<usize>, halo: &[u32], below: usize) -> usize {
    let ju = j as usize;
    if range.contains(&ju) {
        below + ju - range.start
    } else {
        let i = halo.partition_point(|&h| h < j);
        if i < below {
            i
        } else {
            i + range.len()
        }
    }
}

/// One direction of the products: this rank's rows of Â (or Âᵀ) over owned + halo slots.
#[derive(Debug, Clone)]
pub(super) struct Side {
    pub(super) a: Csr<f32>,
    pub(super) halo: Vec<u32>,
    /// Halo rows below the owned range.
    pub(super) lo: usize,
    pub(super) ex: Exchange,
}

impl Side {
    /// The side of the rows `range`, given as row pointers (`range.len() + 1`, from any
    /// base) and the rows' global column ids and values (from that base).
    pub(super) fn new(
        ip: &[usize],
        cols: &[u32],
        data: &[f32],
        range: Range<usize>,
        part: &RowPartition,
    ) -> Result<Side> {
        let base = ip[0];
        let mut halo: Vec<u32> = cols
            .iter()
            .copied()
            .filter(|&j| !range.contains(&(j as usize)))
            .collect();
        halo.sort_unstable();
        halo.dedup();
        let below = halo.partition_point(|&h| (h as usize) < range.start);
        let indices: Vec<u32> = cols
            .iter()
            .map(|&j| slot(j, &range, &halo, below) as u32)
            .collect();
        let indptr: Vec<usize> = ip.iter().map(|&p| p - base).collect();
        let a = Csr::new(
            (range.len(), range.len() + halo.len()),
            indptr,
            indices,
            data.to_vec(),
        );
        let ex = Exchange::setup(&halo, part, range.start)?;
        Ok(Side {
            a,
            halo,
            lo: below,
            ex,
        })
    }

    /// The side of the rows `range` of `m` (all of Â's rows, or exactly those of the range
    /// when `first` is `range.start`).
    pub(super) fn of_rows(
        m: CsrView<'_, f32>,
        first: usize,
        range: Range<usize>,
        part: &RowPartition,
    ) -> Result<Side> {
        let ip = m.indptr();
        let ip = &ip.raw_storage()[range.start - first..=range.end - first];
        let (lo, hi) = (ip[0], ip[ip.len() - 1]);
        Side::new(ip, &m.indices()[lo..hi], &m.data()[lo..hi], range, part)
    }
}
