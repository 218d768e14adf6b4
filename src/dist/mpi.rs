//! Full-batch training across the ranks of an MPI job (feature `mpi`): [`Mpi`], the job, and
//! [`DistAdj`], the row-partitioned [`Propagate`] every layer runs on unchanged.
//!
//! Rank r owns the rows `part.range(r)` of Â, of X, of the labels and of the masks. Its rows
//! of Â are stored with their columns renamed to slots of an extended matrix — its halo rows
//! below its range, its own rows, its halo rows above, all in global order (the halo: the other
//! ranks' rows its rows read) — a renaming that keeps the column order, so every row keeps its
//! non-zeros in their order and each output row of Â·H is computed exactly as in one process.
//! Before each product the halo rows of H are received from their owners with one
//! `MPI_Alltoallv`; Âᵀ·G uses Âᵀ's rows and halo (the same ones when Â is symmetric).
//!
//! Every sum across nodes goes through [`Collective::sum_words`], here an `MPI_Allreduce` of
//! the exact partials' integer words, so it is the same bits for any number of ranks
//! ([`graph::Sums`](crate::graph::Sums)).
//!
//! Traffic is counted as the bytes each rank hands MPI for other ranks while counting is on
//! ([`DistAdj::count`]): an all-to-all its send counts to other ranks, an all-reduce or an
//! all-gather its payload (nothing in a 1-rank job). [`DistAdj::bytes`] is this rank's count.
//!
//! rsmpi's counts are C `int`s: an exchange whose counts exceed 2³¹ − 1 elements is split into
//! column blocks that fit.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::environment::Universe;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::*;
use ndarray::{s, ArrayView2, ArrayViewMut2};

use super::RowPartition;
use crate::graph::dropedge::{keep_threshold, keeps};
use crate::graph::propagate::{blocks, BlockFn, NeighbourFn};
use crate::graph::{
    Caps, Collective, Graph, Norm, NormAdj, NormRows, Propagate, RowSpan, Unsupported,
};
use crate::id::DataId;
use crate::input::SparseFeatures;
use crate::kernels::{spmm, Csr, CsrView};
use crate::{Error, Par, Result};

mod exchange;
mod sample;

use exchange::{c_counts, displs, slot, Side};

/// The MPI job this process is a rank of. MPI is finalised when it is dropped.
pub struct Mpi {
    _universe: Universe,
    rank: usize,
    size: usize,
}

impl std::fmt::Debug for Mpi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mpi")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish()
    }
}

/// Environment variables in which launchers give the job's size.
const SIZE_VARS: [&str; 3] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MPI_LOCALNRANKS"];

impl Mpi {
    /// Initialises MPI (calls serialised: the training thread need not be the main thread),
    /// and checks that the world has the size the launcher announced: a binary started by
    /// another MPI's launcher runs as several 1-rank worlds.
    ///
    /// # Errors
    /// [`Error::Distributed`] when MPI is already initialised, gives less than serialised
    /// threading, or the world's size differs from the launcher's.
    pub fn init() -> Result<Mpi> {
        let Some((universe, level)) = mpi::initialize_with_threading(mpi::Threading::Serialized)
        else {
            return Err(Error::Distributed("MPI is already initialised".into()));
        };
        if matches!(level, mpi::Threading::Single | mpi::Threading::Funneled) {
            return Err(Error::Distributed(format!(
                "the MPI library gives {level:?} threading; serialised calls are needed"
            )));
        }
        let world = universe.world();
        let (rank, size) = (world.rank() as usize, world.size() as usize);
        for var in SIZE_VARS {
            if let Ok(v) = std::env::var(var) {
                if v.trim().parse::<usize>().ok() != Some(size) {
                    return Err(Error::Distributed(format!(
                        "the launcher started {v} ranks ({var}) but this MPI world has {size}: \
                         was the binary built against another MPI than the one of mpirun?"
                    )));
                }
            }
        }
        Ok(Mpi {
            _universe: universe,
            rank,
            size,
        })
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The sum of `v` over the ranks (for reports: bytes, peaks).
    pub fn sum_u64(&self, v: u64) -> u64 {
        let mut out = 0u64;
        world().all_reduce_into(&v, &mut out, SystemOperation::sum());
        out
    }

    /// The maximum of `v` over the ranks.
    pub fn max_u64(&self, v: u64) -> u64 {
        let mut out = 0u64;
        world().all_reduce_into(&v, &mut out, SystemOperation::max());
        out
    }

    /// Whether `yes` holds on every rank (a logical AND over the ranks).
    pub fn all(&self, yes: bool) -> bool {
        let mut out = 0u64;
        world().all_reduce_into(&u64::from(yes), &mut out, SystemOperation::min());
        out == 1
    }

    /// Times the exchange a halo product makes: one `MPI_Alltoallv` in which every rank sends
    /// `bytes` bytes to every other rank. Each of `reps` timed repetitions (after `warmup`
    /// untimed ones, every one started after a barrier) counts the slowest rank's time; the
    /// median is returned, the same on every rank (collective).
    ///
    /// # Errors
    /// [`Error::Distributed`] for a message above MPI's 2³¹ − 1 elements.
    pub fn time_all_to_all(&self, bytes: usize, warmup: usize, reps: usize) -> Result<f64> {
        let comm = world();
        let p = self.size;
        let counts = c_counts((0..p).map(|q| if q == self.rank { 0 } else { bytes }))?;
        let d = displs(&counts);
        let total = bytes * p.saturating_sub(1);
        let send: Vec<u8> = (0..total).map(|i| i as u8).collect();
        let mut recv = vec![0u8; total];
        let mut times = Vec::with_capacity(reps);
        for i in 0..warmup + reps.max(1) {
            comm.barrier();
            let t = std::time::Instant::now();
            {
                let out = Partition::new(&send[..], &counts[..], &d[..]);
                let mut inp = PartitionMut::new(&mut recv[..], &counts[..], &d[..]);
                comm.all_to_all_varcount_into(&out, &mut inp);
            }
            let mine = t.elapsed().as_secs_f64();
            let mut slowest = 0.0f64;
            comm.all_reduce_into(&mine, &mut slowest, SystemOperation::max());
            if i >= warmup {
                times.push(slowest);
            }
        }
        times.sort_by(f64::total_cmp);
        Ok(times[times.len() / 2])
    }

    /// Waits for every rank.
    pub fn barrier(&self) {
        world().barrier();
    }
}

/// The job's exchanges while the ranks prepare (not counted as training traffic).
impl Collective for Mpi {
    fn spans_processes(&self) -> bool {
        true
    }
    fn sum_words(&self, words: &mut [i64]) {
        let send = words.to_vec();
        world().all_reduce_into(&send[..], words, SystemOperation::sum());
    }
    fn global_span(&self, local: usize) -> (usize, usize) {
        let mut all = vec![0u64; self.size];
        world().all_gather_into(&(local as u64), &mut all[..]);
        let me = world().rank() as usize;
        let before: u64 = all[..me].iter().sum();
        (before as usize, all.iter().sum::<u64>() as usize)
    }
    fn all(&self, yes: bool) -> bool {
        Mpi::all(self, yes)
    }
    fn sum(&self, v: u64) -> u64 {
        self.sum_u64(v)
    }
}

fn world() -> SimpleCommunicator {
    SimpleCommunicator::world()
}

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

/// Â row-partitioned over the ranks of an MPI job (see the [module docs](self)).
#[derive(Debug)]
pub struct DistAdj {
    /// The identity of this rank's rows of Â (each rank's own: the ranks never compare them).
    id: DataId,
    n_nodes: usize,
    range: Range<usize>,
    part: RowPartition,
    nnz_total: usize,
    fwd: Side,
    /// Âᵀ's rows when Â is not symmetric.
    bwd: Option<Side>,
    ext: Mutex<Vec<f32>>,
    sendbuf: Mutex<Vec<f32>>,
    words: Mutex<Vec<i64>>,
    counting: AtomicBool,
    bytes: AtomicU64,
    comm_ns: AtomicU64,
    /// The smallest own share of the extended rows over ranks and sides (`dist::own_share`),
    /// the same on every rank: it sets the column tiles of every exchange.
    share: u64,
    /// This rank's rows of the raw undirected graph (row pointers from 0, global neighbour
    /// ids) and Â's normalisation, for DropEdge's samples.
    graph_rows: Option<GraphRows>,
}

/// This rank's rows of the raw graph (row pointers from 0, global neighbour ids), Â's
/// normalisation, and whether the graph is directed: what DropEdge samples from.
#[derive(Debug)]
struct GraphRows {
    indptr: Vec<usize>,
    neighbours: Vec<u32>,
    norm: Norm,
    directed: bool,
}

/// What one rank holds and exchanges ([`DistAdj::stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DistStats {
    /// Rows owned.
    pub owned_rows: usize,
    /// Halo rows of Â·H.
    pub halo_rows: usize,
    /// Rows sent before each Â·H.
    pub sent_rows: usize,
    /// Halo rows of Âᵀ·G (the same as `halo_rows` for a symmetric Â).
    pub halo_rows_t: usize,
    /// Rows sent before each Âᵀ·G.
    pub sent_rows_t: usize,
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
            .map(|s| super::own_share(owned, s.halo.len()))
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

    /// Keeps this rank's rows of `graph` (the raw graph Â was built from, in the same node
    /// order), so that DropEdge can sample ([`Propagate::drop_edge_sample`]).
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
    fn add_traffic(&self, b: u64, t0: Instant) {
        if self.counting.load(Ordering::Relaxed) && self.part.ranks() > 1 {
            self.bytes.fetch_add(b, Ordering::Relaxed);
            let ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.comm_ns.fetch_add(ns, Ordering::Relaxed);
        }
    }

    /// out ← α·M·X + β·out for this rank's rows M (`m`, over the slots of `side`), after
    /// `side`'s halo exchange.
    #[allow(clippy::too_many_arguments)]
    fn product(
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
        let tile = super::tile_width(self.share, d);
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
    fn extended_sparse(&self, side: &Side, x: CsrView<'_, f32>) -> Csr<f32> {
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
    fn neighbours_of(
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
    fn exchange_factors(&self, side: &Side, own: &[f32]) -> Vec<f32> {
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
    fn gather_owned(&self, h: ArrayView2<'_, f32>, rows: &[usize]) -> ndarray::Array2<f64> {
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

impl Collective for DistAdj {
    fn spans_processes(&self) -> bool {
        true
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
