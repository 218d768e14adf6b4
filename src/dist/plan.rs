//! Planning a row-partitioned run without running it: for a number of ranks P, what each rank
//! holds, the bytes an epoch exchanges, and the memory a rank needs ([`plan`]).
//!
//! The exchanges of an epoch are read off the model itself: the model is built with the orders
//! the cost model gives on the real graph, and one and two epochs are run on a small stand-in
//! graph with the same widths through [`Trace`], a [`Propagate`] that records every exchange a
//! row-partitioned backend would make (products with their width, sums with their length,
//! dropout spans). Each recorded exchange is then priced under each partition by the model of
//! [`model`](super::model): so the plan holds for every architecture, and for the GCN it is the
//! formula [`gcn_run_bytes`](super::model::gcn_run_bytes) checks against a run.

use std::sync::{Mutex, PoisonError};

use ndarray::{ArrayView2, ArrayViewMut2};
use serde::Serialize;

use super::model::{HaloTotals, WORDS_F32};
use super::RowPartition;
use crate::data::{Features, FeaturesRef, Mask, SparseFeatures, Split};
use crate::graph::propagate::NeighbourFn;
use crate::graph::{Caps, Collective, Direction, Graph, NormAdj, Propagate, Unsupported};
use crate::kernels::CsrView;
use crate::nn::Model;
use crate::train::{build_model, train_model, FitOptions, StopRule, TrainConfig, TrainData};
use crate::{Par, Result};

/// One exchange a row-partitioned backend makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// Â·H (or Âᵀ·G when `transposed`) at `width`: the halo rows of H.
    Product {
        /// Columns of H.
        width: usize,
        /// Âᵀ's halo.
        transposed: bool,
    },
    /// Â·X for sparse X: the halo rows' lengths and entries.
    SparseRows,
    /// The cost model's bound: the halo rows' non-zero counts.
    RowCounts,
    /// An all-reduce of `words` integer words.
    Sum {
        /// Words per rank.
        words: usize,
    },
    /// A dropout mask's global position: one count all-gathered.
    Span,
}

/// A [`Propagate`] over Â held whole that records the exchanges a row-partitioned backend
/// would make for each call (see the [module docs](self)); it is its own [`Collective`], which
/// records every sum (and leaves it as it is: the one "process" holds every term).
#[derive(Debug)]
pub struct Trace<'a> {
    adj: &'a NormAdj<f32>,
    ops: Mutex<Vec<Op>>,
}

impl<'a> Trace<'a> {
    /// A trace over `adj`.
    pub fn new(adj: &'a NormAdj<f32>) -> Self {
        Trace {
            adj,
            ops: Mutex::default(),
        }
    }

    fn push(&self, op: Op) {
        self.ops
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(op);
    }

    /// The exchanges recorded so far, and a fresh start.
    pub fn take(&self) -> Vec<Op> {
        std::mem::take(&mut *self.ops.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Collective for Trace<'_> {
    fn spans_processes(&self) -> bool {
        true
    }

    fn sum_words(&self, words: &mut [i64]) {
        self.push(Op::Sum { words: words.len() });
    }

    fn global_span(&self, local: usize) -> (usize, usize) {
        self.push(Op::Span);
        (0, local)
    }
}

impl Propagate<f32> for Trace<'_> {
    fn id(&self) -> crate::id::DataId {
        self.adj.id()
    }

    fn shape(&self) -> (usize, usize) {
        Propagate::shape(self.adj)
    }

    fn nnz(&self) -> usize {
        self.adj.nnz()
    }

    fn collective(&self) -> &dyn Collective {
        self
    }

    fn caps(&self) -> Caps {
        // (As the row-partitioned backend: no blocks, no DropEdge drawn here.)
        Caps {
            sparse_product: true,
            neighbours: true,
            ..Caps::default()
        }
    }

    fn with_neighbours(
        &self,
        h: ArrayView2<'_, f32>,
        f: &mut NeighbourFn<'_, f32>,
    ) -> Result<(), Unsupported> {
        // Not an exchange of training: the metrics are outside the plan.
        self.adj.with_neighbours(h, f)
    }

    fn gather_rows(
        &self,
        h: ArrayView2<'_, f32>,
        rows: &[usize],
    ) -> Result<ndarray::Array2<f64>, Unsupported> {
        self.adj.gather_rows(h, rows)
    }

    fn a_times(
        &self,
        alpha: f32,
        x: ArrayView2<'_, f32>,
        beta: f32,
        out: ArrayViewMut2<'_, f32>,
        par: Par,
    ) {
        self.push(Op::Product {
            width: x.ncols(),
            transposed: false,
        });
        self.adj.a_times(alpha, x, beta, out, par);
    }

    fn at_times(
        &self,
        alpha: f32,
        g: ArrayView2<'_, f32>,
        beta: f32,
        out: ArrayViewMut2<'_, f32>,
        par: Par,
    ) {
        self.push(Op::Product {
            width: g.ncols(),
            transposed: true,
        });
        self.adj.at_times(alpha, g, beta, out, par);
    }

    fn a_times_sparse_pattern(
        &self,
        x: CsrView<'_, f32>,
    ) -> Result<SparseFeatures<f32>, Unsupported> {
        self.push(Op::SparseRows);
        self.adj.a_times_sparse_pattern(x)
    }

    fn a_times_sparse(
        &self,
        x: CsrView<'_, f32>,
        out: &mut SparseFeatures<f32>,
        tmp: &mut [f32],
    ) -> Result<(), Unsupported> {
        self.push(Op::SparseRows);
        self.adj.a_times_sparse(x, out, tmp)
    }

    fn row_gather_bound(&self, per_col: &[usize], cap: usize) -> Result<usize, Unsupported> {
        self.push(Op::RowCounts);
        self.push(Op::Sum { words: 1 });
        self.adj.row_gather_bound(per_col, cap)
    }
}

/// What a partition of the real graph exchanges, per op.
#[derive(Debug, Clone, Copy)]
struct Prices {
    ranks: u64,
    halo: HaloTotals,
    /// Σ_r Σ_{j ∈ halo_r} (non-zeros of row j of sparse X).
    halo_x_nnz: u64,
    /// Σ_r neighbours of Â's and Âᵀ's halos (messages of one all-to-all).
    messages_fwd: u64,
    messages_bwd: u64,
}

impl Prices {
    fn bytes(&self, op: Op) -> u64 {
        if self.ranks <= 1 {
            return 0;
        }
        match op {
            Op::Product { width, transposed } => {
                let rows = if transposed {
                    self.halo.bwd
                } else {
                    self.halo.fwd
                };
                4 * width as u64 * rows
            }
            Op::SparseRows => 8 * self.halo.fwd + 8 * self.halo_x_nnz,
            Op::RowCounts => 8 * self.halo.fwd,
            Op::Sum { words } => 8 * words as u64 * self.ranks,
            Op::Span => 8 * self.ranks,
        }
    }

    fn messages(&self, op: Op) -> u64 {
        match op {
            Op::Product {
                transposed: true, ..
            } => self.messages_bwd,
            Op::Product { .. } | Op::RowCounts => self.messages_fwd,
            Op::SparseRows => 2 * self.messages_fwd,
            Op::Sum { .. } | Op::Span => 0,
        }
    }
}

/// One product of an epoch, priced.
#[derive(Debug, Clone, Serialize)]
pub struct ProductRow {
    /// Columns exchanged.
    pub width: usize,
    /// `"forward"` (Â·H) or `"backward"` (Âᵀ·G).
    pub direction: &'static str,
    /// Products of this width and direction in an epoch.
    pub count: usize,
    /// Their bytes over all ranks, per epoch.
    pub bytes: u64,
}

/// The plan for one number of ranks.
#[derive(Debug, Clone, Serialize)]
pub struct RankPlan {
    /// Ranks.
    pub ranks: usize,
    /// Rows owned: the largest and the mean over ranks.
    pub owned_rows_max: usize,
    /// The mean of the owned rows.
    pub owned_rows_mean: f64,
    /// Non-zeros of Â held: the largest over ranks.
    pub nnz_max: usize,
    /// Their mean.
    pub nnz_mean: f64,
    /// Halo rows of Â: the largest over ranks.
    pub halo_rows_max: usize,
    /// Their mean.
    pub halo_rows_mean: f64,
    /// Neighbour ranks of Â's halo: the most over ranks.
    pub neighbours_max: usize,
    /// Their mean.
    pub neighbours_mean: f64,
    /// Whether some rank's halo is at least its owned rows (1D partitioning has stopped
    /// scaling there).
    pub halo_exceeds_owned: bool,
    /// The products of an epoch (training and validation passes), by width and direction.
    pub products: Vec<ProductRow>,
    /// Bytes of an epoch's products over all ranks.
    pub product_bytes_per_epoch: u64,
    /// Bytes of an epoch's all-reduces and all-gathers over all ranks.
    pub allreduce_bytes_per_epoch: u64,
    /// All bytes of an epoch over all ranks.
    pub bytes_per_epoch: u64,
    /// Point-to-point messages of an epoch's all-to-alls (sender–receiver pairs).
    pub messages_per_epoch: u64,
    /// All-reduce and all-gather calls of an epoch.
    pub collectives_per_epoch: u64,
    /// Bytes a run exchanges once (building the model, the cached Â·X, the final
    /// evaluation) besides its epochs.
    pub bytes_once: u64,
    /// The largest rank's memory: its rows of Â (and Âᵀ), of X, its labels, the model's
    /// workspace for its rows, the halo buffers, the weights with their gradients and Adam
    /// moments, and the exact sums' accumulators.
    pub memory_bytes_max: u64,
    /// GEMM flops of an epoch on the largest rank: `8·owned·Σ|W|` over the weight matrices
    /// (two forward passes, training and evaluation, and the two gradient GEMMs).
    pub gemm_flops_max: u64,
    /// SpMM flops of an epoch on the rank holding the most non-zeros: `2·nnz·width` for
    /// every product of the epoch.
    pub spmm_flops_max: u64,
    /// The modelled epoch: compute and communication, in seconds, when a [`TimeModel`] is
    /// given (`None` otherwise).
    pub time: Option<EpochTime>,
}

/// A modelled epoch ([`TimeModel`]), in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EpochTime {
    /// GEMMs at the measured sgemm rate plus SpMMs at the measured in-cache SpMM rate, on
    /// the largest rank.
    pub compute_s: f64,
    /// Every exchange of the epoch at the fitted α/β, each at its slowest rank.
    pub comm_s: f64,
    /// Their sum (no overlap of compute and communication: the engine overlaps none).
    pub epoch_s: f64,
}

/// What an epoch's time is modelled from: per-message latency and per-byte time of MPI,
/// fitted to measured all-to-alls ([`TimeModel::fit_comm`]), and the compute rates of this
/// machine (the roofline's sgemm and in-cache SpMM).
///
/// An all-to-all costs each rank `α·messages + β·bytes` (it sends one message to each
/// neighbour rank, carrying its halo rows for it); the slowest rank sets the time. An
/// all-reduce of b bytes a rank costs `2·⌈log₂ P⌉·α + 2·b·β` (reduce-scatter and all-gather),
/// an all-gather of one count `⌈log₂ P⌉·α + 8·P·β`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TimeModel {
    /// Seconds per message.
    pub alpha_s: f64,
    /// Seconds per byte.
    pub beta_s_per_byte: f64,
    /// GEMM flops per second.
    pub gemm_flop_s: f64,
    /// SpMM flops per second at the in-cache floor.
    pub spmm_flop_s: f64,
}

/// One measured all-to-all: each of `ranks` ranks sent `bytes_per_peer` bytes to every other
/// rank in `seconds` (the slowest rank's time, a median over repetitions).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct CommSample {
    /// Ranks of the job.
    pub ranks: usize,
    /// Bytes each rank sent to each other rank.
    pub bytes_per_peer: u64,
    /// Seconds.
    pub seconds: f64,
}

impl TimeModel {
    /// α and β fitted to `samples` (a rank's messages `P − 1`, its bytes `(P − 1)·bytes per
    /// peer`) by least squares on the relative error, so small and large messages weigh
    /// alike; a coefficient the fit makes negative is dropped (0) and the other refitted.
    ///
    /// # Errors
    /// [`Error::Config`](crate::Error::Config) when fewer than two samples have more than one
    /// rank, a positive time and distinct sizes.
    pub fn fit_comm(samples: &[CommSample]) -> Result<(f64, f64)> {
        let pts: Vec<(f64, f64)> = samples
            .iter()
            .filter(|s| s.ranks > 1 && s.seconds > 0.0 && s.seconds.is_finite())
            .map(|s| {
                let m = (s.ranks - 1) as f64;
                (m / s.seconds, m * s.bytes_per_peer as f64 / s.seconds)
            })
            .collect();
        let ratio = |p: &(f64, f64)| p.1 / p.0; // bytes per message
        if pts.len() < 2 || pts.iter().all(|p| ratio(p) == ratio(&pts[0])) {
            return Err(crate::error::ConfigError::Unsupported {
                what: "fitting α and β to fewer than two all-to-all timings of different sizes \
                       with more than one rank (sparse-gcn commbench under mpirun gives them)",
            }
            .into());
        }
        // Minimise Σ (α·u + β·v − 1)²: the normal equations.
        let (mut uu, mut uv, mut vv, mut u1, mut v1) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for &(u, v) in &pts {
            uu += u * u;
            uv += u * v;
            vv += v * v;
            u1 += u;
            v1 += v;
        }
        let det = uu * vv - uv * uv;
        if det > 0.0 {
            let (a, b) = ((u1 * vv - v1 * uv) / det, (v1 * uu - u1 * uv) / det);
            if a >= 0.0 && b >= 0.0 {
                return Ok((a, b));
            }
        }
        // One coefficient alone: whichever fits better.
        let residual = |a: f64, b: f64| -> f64 {
            pts.iter()
                .map(|&(u, v)| (a * u + b * v - 1.0).powi(2))
                .sum()
        };
        let (alpha_only, beta_only) = (u1 / uu, v1 / vv);
        Ok(if residual(0.0, beta_only) <= residual(alpha_only, 0.0) {
            (0.0, beta_only)
        } else {
            (alpha_only, 0.0)
        })
    }
}

/// Plans a run of `cfg` on Â `adj` with features `x` and `n_classes` classes for each rank
/// count of `ranks` (see the [module docs](self)).
///
/// # Errors
/// As [`build_model`] and [`RowPartition::of_graph`].
pub fn plan(
    adj: &NormAdj<f32>,
    x: &Features<f32>,
    n_classes: usize,
    cfg: &TrainConfig,
    ranks: &[usize],
    time: Option<&TimeModel>,
) -> Result<Vec<RankPlan>> {
    let model = build_model(adj, x, n_classes, &cfg.model, 0)?;
    let orders = model.orders();
    let (once, epoch) = trace_epoch(x, n_classes, cfg, &orders)?;
    let mut params = 0usize;
    let mut biggest = 0usize;
    let mut m = model;
    let mut weights_2d = 0usize;
    m.visit_params(&mut |_, p| {
        params += p.value.len();
        biggest = biggest.max(p.value.len());
        if p.value.ncols() > 1 && p.value.nrows() > 1 {
            weights_2d += p.value.len();
        }
    });
    let x_row_nnz: Option<Vec<usize>> = match x.get() {
        FeaturesRef::Sparse(s) => {
            let xs = s.x();
            let ip = xs.indptr();
            Some(ip.raw_storage().windows(2).map(|w| w[1] - w[0]).collect())
        }
        FeaturesRef::Dense(_) => None,
    };
    let widest = epoch
        .iter()
        .filter_map(|op| match op {
            Op::Product { width, .. } => Some(*width),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let a = adj.a();
    let (ip, ix) = (a.indptr().raw_storage().to_vec(), a.indices());
    let mut out = Vec::with_capacity(ranks.len());
    for &p in ranks {
        let part = RowPartition::of_graph(&ip, p)?;
        // Â's and Âᵀ's per-rank stats, each computed once (Âᵀ's only when it differs).
        let stats = part.stats(&ip, ix);
        let stats_t = (!adj.is_symmetric()).then(|| {
            let at = adj.a_t();
            part.stats(at.indptr().raw_storage(), at.indices())
        });
        let halo_sum = |s: &[super::RankStats]| s.iter().map(|s| s.halo_rows as u64).sum();
        let halo = HaloTotals {
            ranks: p as u64,
            fwd: halo_sum(&stats),
            bwd: halo_sum(stats_t.as_deref().unwrap_or(&stats)),
        };
        let halos: Vec<Vec<u32>> = if x_row_nnz.is_some() {
            (0..p).map(|r| part.halo(&ip, ix, r)).collect()
        } else {
            Vec::new()
        };
        let halo_x_nnz = x_row_nnz.as_ref().map_or(0, |nnz| {
            halos
                .iter()
                .flatten()
                .map(|&j| nnz[j as usize] as u64)
                .sum()
        });
        let messages = |s: &[super::RankStats]| s.iter().map(|s| s.neighbours as u64).sum();
        let messages_fwd = messages(&stats);
        let messages_bwd = messages(stats_t.as_deref().unwrap_or(&stats));
        let prices = Prices {
            ranks: p as u64,
            halo,
            halo_x_nnz,
            messages_fwd,
            messages_bwd,
        };
        let mut products: Vec<ProductRow> = Vec::new();
        let (mut prod_bytes, mut red_bytes, mut messages, mut collectives) = (0, 0, 0, 0);
        for &op in &epoch {
            let b = prices.bytes(op);
            messages += prices.messages(op);
            match op {
                Op::Product { width, transposed } => {
                    prod_bytes += b;
                    let direction = if transposed { "backward" } else { "forward" };
                    match products
                        .iter_mut()
                        .find(|r| r.width == width && r.direction == direction)
                    {
                        Some(r) => {
                            r.count += 1;
                            r.bytes += b;
                        }
                        None => products.push(ProductRow {
                            width,
                            direction,
                            count: 1,
                            bytes: b,
                        }),
                    }
                }
                Op::SparseRows | Op::RowCounts => prod_bytes += b,
                Op::Sum { .. } | Op::Span => {
                    red_bytes += b;
                    collectives += 1;
                }
            }
        }
        let bytes_once = once.iter().map(|&op| prices.bytes(op)).sum();
        let mean = |f: &dyn Fn(&super::RankStats) -> usize| {
            stats.iter().map(|s| f(s) as f64).sum::<f64>() / p.max(1) as f64
        };
        let share = stats
            .iter()
            .map(|s| super::own_share(s.owned_rows, s.halo_rows))
            .min()
            .unwrap_or(1024);
        let mut memory_bytes_max = 0u64;
        for (r, s) in stats.iter().enumerate() {
            let owned = s.owned_rows;
            let rows_x = match (&x_row_nnz, x) {
                (Some(nnz), _) => {
                    let range = part.range(r);
                    let e: usize = nnz[range].iter().sum();
                    2 * (8 * e + 8 * (owned + 1))
                }
                (None, x) => 4 * owned * x.n_cols(),
            };
            let a_bytes = 8 * s.nnz + 8 * (owned + 1);
            let a_t_bytes = if adj.is_symmetric() { 0 } else { a_bytes };
            let ws = m.workspace_bytes(owned, x)? as u64;
            // The extended rows and the send buffer of one column tile.
            let tile = super::tile_width(share, widest);
            let halo_buf = 4 * tile * (owned + 2 * s.halo_rows);
            let weights = 16 * params;
            let exact = (8 * WORDS_F32 as usize + 4) * biggest;
            let labels = 4 * owned + 4 * owned;
            let total =
                (rows_x + a_bytes + a_t_bytes + halo_buf + weights + exact + labels) as u64 + ws;
            memory_bytes_max = memory_bytes_max.max(total);
        }
        let owned_max = stats.iter().map(|s| s.owned_rows).max().unwrap_or(0);
        let nnz_max = stats.iter().map(|s| s.nnz).max().unwrap_or(0);
        let gemm_flops_max = 8 * (owned_max * weights_2d) as u64;
        let spmm_flops_max: u64 = epoch
            .iter()
            .map(|op| match op {
                Op::Product { width, .. } => 2 * (nnz_max * width) as u64,
                _ => 0,
            })
            .sum();
        let time = time.map(|t| {
            let compute_s =
                gemm_flops_max as f64 / t.gemm_flop_s + spmm_flops_max as f64 / t.spmm_flop_s;
            let side =
                |transposed: bool| stats_t.as_deref().filter(|_| transposed).unwrap_or(&stats);
            let log_p = (p as f64).log2().ceil();
            let comm_s: f64 = epoch
                .iter()
                .map(|&op| match op {
                    _ if p <= 1 => 0.0,
                    Op::Product { width, transposed } => side(transposed)
                        .iter()
                        .map(|s| {
                            t.alpha_s * s.neighbours as f64
                                + t.beta_s_per_byte * (4 * width * s.halo_rows) as f64
                        })
                        .fold(0.0, f64::max),
                    Op::RowCounts => stats
                        .iter()
                        .map(|s| {
                            t.alpha_s * s.neighbours as f64
                                + t.beta_s_per_byte * (8 * s.halo_rows) as f64
                        })
                        .fold(0.0, f64::max),
                    // Two exchanges (lengths, then entries); the entries' bytes are spread
                    // evenly over the ranks.
                    Op::SparseRows => {
                        2.0 * t.alpha_s * prices.messages_fwd as f64 / p as f64
                            + t.beta_s_per_byte * prices.bytes(op) as f64 / p as f64
                    }
                    Op::Sum { words } => {
                        2.0 * log_p * t.alpha_s + t.beta_s_per_byte * (16 * words) as f64
                    }
                    Op::Span => log_p * t.alpha_s + t.beta_s_per_byte * (8 * p) as f64,
                })
                .sum();
            EpochTime {
                compute_s,
                comm_s,
                epoch_s: compute_s + comm_s,
            }
        });
        out.push(RankPlan {
            ranks: p,
            owned_rows_max: stats.iter().map(|s| s.owned_rows).max().unwrap_or(0),
            owned_rows_mean: mean(&|s| s.owned_rows),
            nnz_max: stats.iter().map(|s| s.nnz).max().unwrap_or(0),
            nnz_mean: mean(&|s| s.nnz),
            halo_rows_max: stats.iter().map(|s| s.halo_rows).max().unwrap_or(0),
            halo_rows_mean: mean(&|s| s.halo_rows),
            neighbours_max: stats.iter().map(|s| s.neighbours).max().unwrap_or(0),
            neighbours_mean: mean(&|s| s.neighbours),
            halo_exceeds_owned: stats
                .iter()
                .any(|s| s.owned_rows > 0 && s.halo_rows >= s.owned_rows),
            products,
            product_bytes_per_epoch: prod_bytes,
            allreduce_bytes_per_epoch: red_bytes,
            bytes_per_epoch: prod_bytes + red_bytes,
            messages_per_epoch: messages,
            collectives_per_epoch: collectives,
            bytes_once,
            memory_bytes_max,
            gemm_flops_max,
            spmm_flops_max,
            time,
        });
    }
    Ok(out)
}

/// The exchanges of a run of `cfg` with `orders`: those made once (building, the cached
/// products, the final evaluation), and those of one epoch; traced on a stand-in graph of 128
/// nodes with X's width and kind.
fn trace_epoch(
    x: &Features<f32>,
    n_classes: usize,
    cfg: &TrainConfig,
    orders: &[crate::nn::Order],
) -> Result<(Vec<Op>, Vec<Op>)> {
    let n = 128usize;
    let edges: Vec<(u32, u32)> = (0..n as u32).map(|i| (i, (i + 1) % n as u32)).collect();
    let graph = Graph::try_from_edges(n, &edges, Direction::Undirected)?;
    let adj = NormAdj::<f32>::new(&graph, crate::graph::Norm::Symmetric);
    let d = x.n_cols();
    let dense = ndarray::Array2::from_shape_fn((n, d), |(i, k)| ((i * 31 + k * 7) % 5) as f32);
    let xs = if x.is_sparse() {
        Features::dense(dense).into_sparse_if(1.0)
    } else {
        Features::dense(dense)
    };
    let labels: Vec<u32> = (0..n).map(|i| (i % n_classes.max(1)) as u32).collect();
    let mask = |r: std::ops::Range<usize>| Mask::try_from_indices(r.map(|i| i as u32).collect(), n);
    let split = Split {
        name: "trace".into(),
        train: mask(0..40)?,
        valid: mask(40..80)?,
        test: mask(80..128)?,
    };
    let run = |epochs: usize| -> Result<Vec<Op>> {
        let trace = Trace::new(&adj);
        let c = TrainConfig {
            epochs,
            stop: StopRule::Never,
            ..cfg.clone()
        };
        let mcfg = crate::nn::ModelConfig {
            in_dim: d,
            out_dim: n_classes,
            ..cfg.model.clone()
        };
        let mut rng = crate::train::rng_stream(0, 0);
        let mut model: Model<f32> = mcfg.build(&trace, &xs, Some(orders), &mut rng)?;
        let data = TrainData::new(&trace, &xs, &labels, n_classes, &split);
        train_model(&mut model, &data, &c, 0, &FitOptions::default())?;
        Ok(trace.take())
    };
    // Two epochs add one epoch's exchanges to one epoch's run (as multisets: pricing does not
    // depend on the order); what is left of the 1-epoch run is made once.
    let count = |ops: Vec<Op>| {
        let mut m = std::collections::BTreeMap::<Op, usize>::new();
        for op in ops {
            *m.entry(op).or_default() += 1;
        }
        m
    };
    let (one, two) = (count(run(1)?), count(run(2)?));
    let mut epoch = Vec::new();
    let mut once = Vec::new();
    for (&op, &c2) in &two {
        let c1 = one.get(&op).copied().unwrap_or(0);
        let per = c2.saturating_sub(c1);
        epoch.extend(std::iter::repeat_n(op, per));
        once.extend(std::iter::repeat_n(op, c1.saturating_sub(per)));
    }
    Ok((once, epoch))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::synthetic::CitationLike;
    use crate::dist::model::{gcn_run_bytes, GcnShape};
    use crate::graph::Norm;
    use crate::nn::{ModelConfig, Order};

    /// The traced plan and the GCN formula are two computations of the same bytes.
    #[test]
    fn the_traced_plan_prices_a_gcn_run_as_the_formula_does() {
        let mut d = CitationLike {
            n_nodes: 600,
            ..Default::default()
        }
        .generate(2)
        .unwrap();
        d.features.row_normalize();
        for (sparse, order, input_dropout) in [
            (true, Order::TransformFirst, 0.5),
            (false, Order::AggregateFirst, 0.5),
            (false, Order::AggregateFirst, 0.0),
            (false, Order::TransformFirst, 0.0),
        ] {
            let x = if sparse {
                d.features.clone().into_sparse_if(1.0)
            } else {
                Features::dense(d.features.to_dense())
            };
            let adj = NormAdj::<f32>::new(&d.graph, crate::graph::Norm::Symmetric);
            let cfg = TrainConfig {
                model: ModelConfig {
                    n_layers: 3,
                    order,
                    input_dropout,
                    bias: true,
                    ..ModelConfig::default()
                },
                ..TrainConfig::default()
            };
            let plans = plan(&adj, &x, d.n_classes, &cfg, &[1, 2, 3], None).unwrap();
            for pl in &plans {
                let part =
                    RowPartition::of_graph(adj.a().indptr().raw_storage(), pl.ranks).unwrap();
                let halo = HaloTotals::of(&adj, &part);
                let shape = GcnShape {
                    dims: vec![x.n_cols(), 16, 16, d.n_classes],
                    orders: vec![order; 3],
                    bias: true,
                    dropout: true,
                    input_dropout: input_dropout > 0.0,
                };
                for epochs in [1, 7] {
                    assert_eq!(
                        pl.bytes_once + epochs * pl.bytes_per_epoch,
                        gcn_run_bytes(&halo, &shape, sparse, epochs),
                        "sparse {sparse}, {order:?}, input dropout {input_dropout}, P = {}",
                        pl.ranks
                    );
                }
                assert_eq!(pl.ranks == 1, pl.bytes_per_epoch == 0);
                assert!(pl.memory_bytes_max > 0);
            }
            assert!(plans[1].memory_bytes_max < plans[0].memory_bytes_max);
        }
    }

    #[test]
    fn the_comm_fit_recovers_alpha_and_beta() {
        let (alpha, beta) = (2e-6, 3e-10);
        let samples: Vec<CommSample> = [2usize, 4]
            .iter()
            .flat_map(|&ranks| {
                [8u64, 4096, 1 << 20].map(|bytes_per_peer| CommSample {
                    ranks,
                    bytes_per_peer,
                    seconds: (ranks - 1) as f64 * (alpha + beta * bytes_per_peer as f64),
                })
            })
            .collect();
        let (a, b) = TimeModel::fit_comm(&samples).unwrap();
        assert!(
            (a / alpha - 1.0).abs() < 1e-9 && (b / beta - 1.0).abs() < 1e-9,
            "{a} {b}"
        );
        // Pure bandwidth: α is 0, not negative.
        let bw: Vec<CommSample> = samples
            .iter()
            .map(|s| CommSample {
                seconds: (s.ranks - 1) as f64 * beta * s.bytes_per_peer as f64,
                ..*s
            })
            .collect();
        let (a, b) = TimeModel::fit_comm(&bw).unwrap();
        assert!(a >= 0.0 && (b / beta - 1.0).abs() < 1e-6, "{a} {b}");
        // Too little to fit: one size, or only 1-rank samples.
        assert!(TimeModel::fit_comm(&samples[..1]).is_err());
        let one: Vec<CommSample> = samples
            .iter()
            .map(|s| CommSample { ranks: 1, ..*s })
            .collect();
        assert!(TimeModel::fit_comm(&one).is_err());
        assert!(TimeModel::fit_comm(&[]).is_err());
    }

    #[test]
    fn the_modelled_epoch_is_compute_plus_the_exchanges_priced() {
        let d = CitationLike {
            n_nodes: 900,
            ..Default::default()
        }
        .generate(2)
        .unwrap();
        let adj = NormAdj::<f32>::new(&d.graph, Norm::Symmetric);
        let cfg = TrainConfig {
            model: ModelConfig {
                hidden_dim: 16,
                n_layers: 2,
                ..ModelConfig::default()
            },
            ..TrainConfig::default()
        };
        let t = TimeModel {
            alpha_s: 1e-5,
            beta_s_per_byte: 1e-9,
            gemm_flop_s: 1e9,
            spmm_flop_s: 1e8,
        };
        let plans = plan(&adj, &d.features, d.n_classes, &cfg, &[1, 2, 4], Some(&t)).unwrap();
        let none = plan(&adj, &d.features, d.n_classes, &cfg, &[1], None).unwrap();
        assert!(none[0].time.is_none());
        for pl in &plans {
            let e = pl.time.unwrap();
            let compute =
                pl.gemm_flops_max as f64 / t.gemm_flop_s + pl.spmm_flops_max as f64 / t.spmm_flop_s;
            assert!((e.compute_s - compute).abs() <= 1e-12 * compute);
            assert!((e.epoch_s - e.compute_s - e.comm_s).abs() < 1e-15);
            assert_eq!(pl.ranks == 1, e.comm_s == 0.0);
            // Every byte of an epoch costs at least β spread over the ranks.
            assert!(e.comm_s >= t.beta_s_per_byte * pl.bytes_per_epoch as f64 / pl.ranks as f64);
        }
        // The weights' GEMMs: 8 flops a weight a row (in 1433 → 16 → 7 here).
        let weights = (d.features.n_cols() * 16 + 16 * d.n_classes) as u64;
        assert_eq!(plans[0].gemm_flops_max, 8 * 900 * weights);
        assert!(plans[2].time.unwrap().compute_s < plans[0].time.unwrap().compute_s);
    }
}
