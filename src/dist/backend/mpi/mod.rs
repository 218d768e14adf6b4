//! Full-batch training across the ranks of an MPI job (feature `mpi`): [`Mpi`], the job, and
//! [`DistAdj`], the row-partitioned [`Propagate`](crate::graph::Propagate) every layer runs on
//! unchanged.
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
//!
//! This file holds the job and what a `DistAdj` is made of; `adj` builds one, counts its
//! traffic and sums across ranks, `halo` makes the exchanges before its products,
//! `propagate` is its [`Propagate`](crate::graph::Propagate), `sample` its DropEdge samples,
//! and `exchange` the MPI counts and who sends which rows to whom.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Mutex;

use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::environment::Universe;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::*;

use super::RowPartition;
use crate::graph::{Collective, Norm};
use crate::id::DataId;
use crate::{Error, Result};

mod adj;
mod exchange;
mod halo;
mod propagate;
mod sample;

use exchange::{c_counts, displs, Side};

/// The MPI job this process is a rank of. MPI is finalised when it is dropped.
pub struct Mpi {
    _universe: Universe,
    rank: usize,
    size: usize,
    /// The send buffer of [`Collective::sum_words`], kept between calls.
    send: Mutex<Vec<i64>>,
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
            send: Mutex::default(),
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
    fn process(&self) -> (usize, usize) {
        (self.rank, self.size)
    }
    fn sum_words(&self, words: &mut [i64]) {
        let mut send = self
            .send
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        send.clear();
        send.extend_from_slice(words);
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
    /// The smallest own share of the extended rows over ranks and sides
    /// ([`own_share`](super::own_share)), the same on every rank: it sets the column tiles of
    /// every exchange.
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
