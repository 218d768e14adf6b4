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
use crate::data::{Features, Mask, Split};
use crate::graph::reduce::ReduceScratch;
use crate::graph::{Direction, Graph, NormAdj, Propagate};
use crate::kernels::{Csr, CsrView};
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
/// would make for each call (see the [module docs](self)).
#[derive(Debug)]
pub struct Trace<'a> {
    adj: &'a NormAdj<f32>,
    ops: Mutex<Vec<Op>>,
    reduce: Mutex<ReduceScratch<f32>>,
}

impl<'a> Trace<'a> {
    /// A trace over `adj`.
    pub fn new(adj: &'a NormAdj<f32>) -> Self {
        Trace {
            adj,
            ops: Mutex::default(),
            reduce: Mutex::default(),
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

impl Propagate<f32> for Trace<'_> {
    fn n_rows(&self) -> usize {
        self.adj.n_nodes()
    }

    fn nnz(&self) -> usize {
        self.adj.nnz()
    }

    fn global_span(&self, local: usize) -> (usize, usize) {
        self.push(Op::Span);
        (0, local)
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

    fn a_times_sparse_pattern(&self, x: CsrView<'_, f32>) -> Csr<f32> {
        self.push(Op::SparseRows);
        self.adj.a_times_sparse_pattern(x)
    }

    fn a_times_sparse(
        &self,
        x: CsrView<'_, f32>,
        out: sprs::CsMatViewMutI<'_, f32, u32, usize>,
        tmp: &mut [f32],
    ) {
        self.push(Op::SparseRows);
        self.adj.a_times_sparse(x, out, tmp);
    }

    fn row_gather_bound(&self, per_col: &[usize], cap: usize) -> usize {
        self.push(Op::RowCounts);
        self.push(Op::Sum { words: 1 });
        self.adj.row_gather_bound(per_col, cap)
    }

    fn spans_processes(&self) -> bool {
        true
    }

    fn sum_words(&self, words: &mut [i64]) {
        self.push(Op::Sum { words: words.len() });
    }

    fn reduce_scratch(&self) -> &Mutex<ReduceScratch<f32>> {
        &self.reduce
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
) -> Result<Vec<RankPlan>> {
    let model = build_model(adj, x, n_classes, &cfg.model, 0)?;
    let orders = model.orders();
    let (once, epoch) = trace_epoch(x, n_classes, cfg, &orders)?;
    let mut params = 0usize;
    let mut biggest = 0usize;
    let mut m = model;
    m.visit_params(&mut |_, p| {
        params += p.value.len();
        biggest = biggest.max(p.value.len());
    });
    let x_row_nnz: Option<Vec<usize>> = match x {
        Features::Sparse(s) => {
            let xs = s.x();
            let ip = xs.indptr();
            Some(ip.raw_storage().windows(2).map(|w| w[1] - w[0]).collect())
        }
        Features::Dense(_) => None,
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
            let ws = m.workspace_bytes(owned, x) as u64;
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
        Features::Dense(dense).into_sparse_if(1.0)
    } else {
        Features::Dense(dense)
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
                Features::Dense(d.features.to_dense())
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
            let plans = plan(&adj, &x, d.n_classes, &cfg, &[1, 2, 3]).unwrap();
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
}
