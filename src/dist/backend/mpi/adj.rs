//! Building a [`DistAdj`] (from the whole Â or from this rank's rows), what it holds, the
//! traffic it counts, and its sums across ranks ([`Collective`]).

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use mpi::collective::SystemOperation;
use mpi::traits::*;

use super::exchange::Side;
use super::{world, DistAdj, DistStats, GraphRows};
use crate::dist::backend::{own_share, RowPartition};
use crate::graph::{Collective, Graph, Norm, NormAdj, NormRows};
use crate::id::DataId;
use crate::{Error, Result};

/// A partition of the graph's rows.
fn check_rows(part: &RowPartition, n_nodes: usize) -> Result<()> {
    if part.n_rows() != n_nodes {
        return Err(Error::Distributed(format!(
            "a partition of {} rows for a graph of {n_nodes} nodes",
            part.n_rows()
        )));
    }
    Ok(())
}

impl DistAdj {
    /// Rank `rank`'s part of `adj` under `part` (every rank calls it, collectively: the halo
    /// requests are exchanged).
    ///
    /// # Errors
    /// [`Error::Distributed`] when `part` does not cover `adj`'s rows or a count exceeds MPI's.
    pub fn new(adj: &NormAdj<f32>, part: RowPartition, rank: usize) -> Result<DistAdj> {
        check_rows(&part, adj.n_nodes())?;
        let range = part.range(rank);
        let fwd = Side::of_rows(adj.a(), 0, range.clone(), &part)?;
        let bwd = if adj.is_symmetric() {
            None
        } else {
            Some(Side::of_rows(adj.a_t(), 0, range.clone(), &part)?)
        };
        DistAdj::assemble(adj.n_nodes(), adj.nnz(), part, range, fwd, bwd)
    }

    /// Rank `rank`'s part from its own rows of Â (and Âᵀ), built without the whole Â
    /// ([`NormRows::new`] with `part.range(rank)`); collective, as [`DistAdj::new`].
    ///
    /// # Errors
    /// As [`DistAdj::new`], and when `rows` are not the rank's rows.
    pub fn from_rows(rows: &NormRows<f32>, part: RowPartition, rank: usize) -> Result<DistAdj> {
        check_rows(&part, rows.n_nodes())?;
        let range = part.range(rank);
        if rows.range() != range {
            return Err(Error::Distributed(format!(
                "rows {:?} given to rank {rank}, which owns {range:?}",
                rows.range()
            )));
        }
        let first = range.start;
        let fwd = Side::of_rows(rows.a(), first, range.clone(), &part)?;
        let bwd = if rows.is_symmetric() {
            None
        } else {
            Some(Side::of_rows(rows.a_t(), first, range.clone(), &part)?)
        };
        DistAdj::assemble(rows.n_nodes(), rows.nnz_total(), part, range, fwd, bwd)
    }

    fn assemble(
        n_nodes: usize,
        nnz_total: usize,
        part: RowPartition,
        range: Range<usize>,
        fwd: Side,
        bwd: Option<Side>,
    ) -> Result<DistAdj> {
        let owned = range.len();
        let mine = [&fwd, bwd.as_ref().unwrap_or(&fwd)]
            .iter()
            .map(|s| own_share(owned, s.halo.len()))
            .min()
            .unwrap_or(1024);
        let mut share = 0u64;
        world().all_reduce_into(&mine, &mut share, SystemOperation::min());
        Ok(DistAdj {
            id: DataId::fresh(),
            share,
            n_nodes,
            range,
            part,
            nnz_total,
            fwd,
            bwd,
            ext: Mutex::default(),
            sendbuf: Mutex::default(),
            words: Mutex::default(),
            counting: AtomicBool::new(false),
            bytes: AtomicU64::new(0),
            comm_ns: AtomicU64::new(0),
            graph_rows: None,
        })
    }

    /// Keeps this rank's rows of `graph` (the raw graph Â was built from, in the same node order),
    /// so that DropEdge can sample
    /// ([`Propagate::drop_edge_sample`](crate::graph::Propagate::drop_edge_sample)).
    #[must_use]
    pub fn with_graph(self, graph: &Graph, norm: Norm) -> Self {
        if graph.n_nodes() != self.n_nodes {
            return self;
        }
        let ip = graph.indptr();
        let (lo, hi) = (ip[self.range.start], ip[self.range.end]);
        let rows = ip[self.range.start..=self.range.end]
            .iter()
            .map(|&p| p - lo)
            .collect();
        let neighbours = graph.indices()[lo..hi].to_vec();
        self.with_graph_rows(rows, neighbours, norm, graph.is_directed())
    }

    /// [`DistAdj::with_graph`] from this rank's rows of the graph alone: row pointers from 0
    /// (`owned + 1` of them) and global neighbour ids
    /// ([`RankPrepared::graph_rows`](crate::dist::RankPrepared::graph_rows)), and whether the
    /// graph is directed (its rows are then the out-neighbours).
    ///
    /// # Panics
    /// If `indptr` does not have one entry per owned row and one more.
    #[must_use]
    pub fn with_graph_rows(
        mut self,
        indptr: Vec<usize>,
        neighbours: Vec<u32>,
        norm: Norm,
        directed: bool,
    ) -> Self {
        assert_eq!(indptr.len(), self.range.len() + 1, "DistAdj: graph rows");
        self.graph_rows = Some(GraphRows {
            indptr,
            neighbours,
            norm,
            directed,
        });
        self
    }

    /// The rows this rank owns.
    pub fn range(&self) -> Range<usize> {
        self.range.clone()
    }

    /// The partition.
    pub fn partition(&self) -> &RowPartition {
        &self.part
    }

    /// What this rank holds and exchanges.
    pub fn stats(&self) -> DistStats {
        let t = self.bwd.as_ref().unwrap_or(&self.fwd);
        DistStats {
            owned_rows: self.range.len(),
            halo_rows: self.fwd.ex.halo_rows(),
            sent_rows: self.fwd.ex.sent_rows(),
            halo_rows_t: t.ex.halo_rows(),
            sent_rows_t: t.ex.sent_rows(),
        }
    }

    /// Starts (or stops) counting the bytes this rank sends.
    pub fn count(&self, on: bool) {
        self.counting.store(on, Ordering::Relaxed);
    }

    /// Bytes this rank sent while counting.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Seconds this rank spent in MPI's exchanges and sums while counting (waiting for the
    /// slowest rank included).
    pub fn comm_seconds(&self) -> f64 {
        self.comm_ns.load(Ordering::Relaxed) as f64 * 1e-9
    }

    /// Counts `b` bytes handed to MPI for other ranks (none exist in a 1-rank job), by a call
    /// started at `t0`.
    pub(super) fn add_traffic(&self, b: u64, t0: Instant) {
        if self.counting.load(Ordering::Relaxed) && self.part.ranks() > 1 {
            self.bytes.fetch_add(b, Ordering::Relaxed);
            let ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.comm_ns.fetch_add(ns, Ordering::Relaxed);
        }
    }
}

impl Collective for DistAdj {
    fn spans_processes(&self) -> bool {
        true
    }

    fn process(&self) -> (usize, usize) {
        let w = world();
        (w.rank() as usize, w.size() as usize)
    }

    fn sum_words(&self, words: &mut [i64]) {
        let mut send = self.words.lock().unwrap_or_else(PoisonError::into_inner);
        send.clear();
        send.extend_from_slice(words);
        let t0 = Instant::now();
        world().all_reduce_into(&send[..], words, SystemOperation::sum());
        self.add_traffic(8 * words.len() as u64, t0);
    }

    fn global_span(&self, local: usize) -> (usize, usize) {
        let p = self.part.ranks();
        let mut all = vec![0u64; p];
        let t0 = Instant::now();
        world().all_gather_into(&(local as u64), &mut all[..]);
        self.add_traffic(8, t0);
        let me = world().rank() as usize;
        let before: u64 = all[..me].iter().sum();
        (before as usize, all.iter().sum::<u64>() as usize)
    }
}
