//! Planning a row-partitioned run without running it: for a number of ranks P, what each rank
//! holds, the bytes an epoch exchanges, and the memory a rank needs ([`plan`]).
//!
//! The exchanges of an epoch are read off the model itself: the model is built with the orders
//! the cost model gives on the real graph, and one and two epochs are run on a small stand-in
//! graph with the same widths through [`Trace`], a `Propagate` that records every exchange a
//! row-partitioned backend would make (products with their width, sums with their length,
//! dropout spans). Each recorded exchange is then priced under each partition by the model of
//! [`model`](super::model): so the plan holds for every architecture, and for the GCN it is the
//! formula [`gcn_run_bytes`](super::model::gcn_run_bytes) checks against a run.

//!
//! This file holds the plan ([`plan`], [`RankPlan`]) and what a rank holds; `trace` the traced
//! exchanges, `price` their bytes, messages and time under a partition, `time` the time model.

use serde::Serialize;

use crate::data::{Features, FeaturesRef};
use crate::dist::backend::{own_share, tile_width, RankStats, RowPartition};
use crate::dist::run::model::WORDS_F32;
use crate::graph::NormAdj;
use crate::nn::Model;
use crate::train::{build_model, TrainConfig};
use crate::Result;

mod price;
mod time;
mod trace;

use price::{epoch_time, Prices, Tally};
pub use time::{CommSample, EpochTime, TimeModel};
pub use trace::{Op, Trace};

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
    let (once, epoch) = trace::trace_epoch(x, n_classes, cfg, &orders)?;
    let mut run = Run::new(model, adj, x, once, epoch);
    ranks.iter().map(|&p| run.plan_for(p, time)).collect()
}

/// What every rank count's plan reads: the model, its parameters, X's row lengths, and the
/// exchanges traced once and per epoch.
struct Run<'a> {
    model: Model<f32>,
    adj: &'a NormAdj<f32>,
    x: &'a Features<f32>,
    once: Vec<Op>,
    epoch: Vec<Op>,
    /// Parameters, the largest parameter, the weights of matrices (not vectors).
    params: usize,
    biggest: usize,
    weights_2d: usize,
    /// Non-zeros per row of sparse X (`None` for dense X).
    x_row_nnz: Option<Vec<usize>>,
    /// The widest product of an epoch.
    widest: usize,
    /// Â's row pointer.
    ip: Vec<usize>,
}

impl<'a> Run<'a> {
    fn new(
        mut model: Model<f32>,
        adj: &'a NormAdj<f32>,
        x: &'a Features<f32>,
        once: Vec<Op>,
        epoch: Vec<Op>,
    ) -> Run<'a> {
        let mut params = 0usize;
        let mut biggest = 0usize;
        let mut weights_2d = 0usize;
        model.visit_params(&mut |_, p| {
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
        let ip = adj.a().indptr().raw_storage().to_vec();
        Run {
            model,
            adj,
            x,
            once,
            epoch,
            params,
            biggest,
            weights_2d,
            x_row_nnz,
            widest,
            ip,
        }
    }

    /// The plan for `p` ranks.
    fn plan_for(&mut self, p: usize, time: Option<&TimeModel>) -> Result<RankPlan> {
        let (adj, ip) = (self.adj, &self.ip[..]);
        let a = adj.a();
        let ix = a.indices();
        let part = RowPartition::of_graph(ip, p)?;
        // Â's and Âᵀ's per-rank stats, each computed once (Âᵀ's only when it differs).
        let stats = part.stats(ip, ix);
        let stats_t = (!adj.is_symmetric()).then(|| {
            let at = adj.a_t();
            part.stats(at.indptr().raw_storage(), at.indices())
        });
        let prices = Prices::of(
            &part,
            (ip, ix),
            &stats,
            stats_t.as_deref(),
            self.x_row_nnz.as_deref(),
        );
        let tally = Tally::of(&self.epoch, &prices);
        let bytes_once = self.once.iter().map(|&op| prices.bytes(op)).sum();
        let mean = |f: &dyn Fn(&RankStats) -> usize| {
            stats.iter().map(|s| f(s) as f64).sum::<f64>() / p.max(1) as f64
        };
        let max = |f: &dyn Fn(&RankStats) -> usize| stats.iter().map(f).max().unwrap_or(0);
        let memory_bytes_max = self.memory_max(&part, &stats)?;
        let (owned_max, nnz_max) = (max(&|s| s.owned_rows), max(&|s| s.nnz));
        let gemm_flops_max = 8 * (owned_max * self.weights_2d) as u64;
        let spmm_flops_max: u64 = self
            .epoch
            .iter()
            .map(|op| match op {
                Op::Product { width, .. } => 2 * (nnz_max * width) as u64,
                _ => 0,
            })
            .sum();
        let time = time.map(|t| {
            epoch_time(
                t,
                &self.epoch,
                &prices,
                (&stats, stats_t.as_deref()),
                (gemm_flops_max, spmm_flops_max),
            )
        });
        Ok(RankPlan {
            ranks: p,
            owned_rows_max: owned_max,
            owned_rows_mean: mean(&|s| s.owned_rows),
            nnz_max,
            nnz_mean: mean(&|s| s.nnz),
            halo_rows_max: max(&|s| s.halo_rows),
            halo_rows_mean: mean(&|s| s.halo_rows),
            neighbours_max: max(&|s| s.neighbours),
            neighbours_mean: mean(&|s| s.neighbours),
            halo_exceeds_owned: stats
                .iter()
                .any(|s| s.owned_rows > 0 && s.halo_rows >= s.owned_rows),
            products: tally.products,
            product_bytes_per_epoch: tally.product_bytes,
            allreduce_bytes_per_epoch: tally.reduce_bytes,
            bytes_per_epoch: tally.product_bytes + tally.reduce_bytes,
            messages_per_epoch: tally.messages,
            collectives_per_epoch: tally.collectives,
            bytes_once,
            memory_bytes_max,
            gemm_flops_max,
            spmm_flops_max,
            time,
        })
    }

    /// The largest rank's memory under `part` (see [`RankPlan::memory_bytes_max`]).
    fn memory_max(&mut self, part: &RowPartition, stats: &[RankStats]) -> Result<u64> {
        let x = self.x;
        let share = stats
            .iter()
            .map(|s| own_share(s.owned_rows, s.halo_rows))
            .min()
            .unwrap_or(1024);
        let mut memory_bytes_max = 0u64;
        for (r, s) in stats.iter().enumerate() {
            let owned = s.owned_rows;
            let rows_x = match (&self.x_row_nnz, x) {
                (Some(nnz), _) => {
                    let range = part.range(r);
                    let e: usize = nnz[range].iter().sum();
                    2 * (8 * e + 8 * (owned + 1))
                }
                (None, x) => 4 * owned * x.n_cols(),
            };
            let a_bytes = 8 * s.nnz + 8 * (owned + 1);
            let a_t_bytes = if self.adj.is_symmetric() { 0 } else { a_bytes };
            let ws = self.model.workspace_bytes(owned, x)? as u64;
            // The extended rows and the send buffer of one column tile.
            let tile = tile_width(share, self.widest);
            let halo_buf = 4 * tile * (owned + 2 * s.halo_rows);
            let weights = 16 * self.params;
            let exact = (8 * WORDS_F32 as usize + 4) * self.biggest;
            let labels = 4 * owned + 4 * owned;
            let total =
                (rows_x + a_bytes + a_t_bytes + halo_buf + weights + exact + labels) as u64 + ws;
            memory_bytes_max = memory_bytes_max.max(total);
        }
        Ok(memory_bytes_max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::synthetic::CitationLike;
    use crate::dist::run::model::{gcn_run_bytes, GcnShape, HaloTotals};
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
                        // (Traced with no stop rule: the last epoch's evaluation stands.)
                        gcn_run_bytes(&halo, &shape, sparse, epochs, false),
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
