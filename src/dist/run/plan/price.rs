//! Pricing the traced exchanges under one partition of the real graph: the bytes and messages
//! of each exchange ([`Prices`]), an epoch's totals ([`Tally`]), and its modelled time
//! ([`epoch_time`]).

use super::time::{EpochTime, TimeModel};
use super::trace::Op;
use super::ProductRow;
use crate::dist::backend::{RankStats, RowPartition};
use crate::dist::run::model::HaloTotals;

/// What a partition of the real graph exchanges, per op.
#[derive(Debug, Clone, Copy)]
pub(super) struct Prices {
    pub(super) ranks: u64,
    pub(super) halo: HaloTotals,
    /// Σ_r Σ_{j ∈ halo_r} (non-zeros of row j of sparse X).
    pub(super) halo_x_nnz: u64,
    /// Σ_r neighbours of Â's and Âᵀ's halos (messages of one all-to-all).
    pub(super) messages_fwd: u64,
    pub(super) messages_bwd: u64,
}

impl Prices {
    pub(super) fn bytes(&self, op: Op) -> u64 {
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

    pub(super) fn messages(&self, op: Op) -> u64 {
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

impl Prices {
    /// The prices under `part` (`p` ranks), from Â's per-rank stats (`stats`, and Âᵀ's when
    /// they differ) and, for sparse X, the non-zeros of each of its rows (`x_row_nnz`).
    pub(super) fn of(
        part: &RowPartition,
        (ip, ix): (&[usize], &[u32]),
        stats: &[RankStats],
        stats_t: Option<&[RankStats]>,
        x_row_nnz: Option<&[usize]>,
    ) -> Prices {
        let p = part.ranks();
        let halo_sum = |s: &[RankStats]| s.iter().map(|s| s.halo_rows as u64).sum();
        let halo = HaloTotals {
            ranks: p as u64,
            fwd: halo_sum(stats),
            bwd: halo_sum(stats_t.unwrap_or(stats)),
        };
        let halos: Vec<Vec<u32>> = if x_row_nnz.is_some() {
            (0..p).map(|r| part.halo(ip, ix, r)).collect()
        } else {
            Vec::new()
        };
        let halo_x_nnz = x_row_nnz.map_or(0, |nnz| {
            halos
                .iter()
                .flatten()
                .map(|&j| nnz[j as usize] as u64)
                .sum()
        });
        let messages = |s: &[RankStats]| s.iter().map(|s| s.neighbours as u64).sum();
        Prices {
            ranks: p as u64,
            halo,
            halo_x_nnz,
            messages_fwd: messages(stats),
            messages_bwd: messages(stats_t.unwrap_or(stats)),
        }
    }
}

/// An epoch's exchanges priced and added up.
#[derive(Debug, Clone, Default)]
pub(super) struct Tally {
    /// By width and direction.
    pub(super) products: Vec<ProductRow>,
    /// Bytes of the products (and of the sparse rows and row counts).
    pub(super) product_bytes: u64,
    /// Bytes of the all-reduces and all-gathers.
    pub(super) reduce_bytes: u64,
    /// Point-to-point messages of the all-to-alls.
    pub(super) messages: u64,
    /// All-reduce and all-gather calls.
    pub(super) collectives: u64,
}

impl Tally {
    /// The exchanges `epoch` at `prices`.
    pub(super) fn of(epoch: &[Op], prices: &Prices) -> Tally {
        let mut t = Tally::default();
        for &op in epoch {
            let b = prices.bytes(op);
            t.messages += prices.messages(op);
            match op {
                Op::Product { width, transposed } => {
                    t.product_bytes += b;
                    let direction = if transposed { "backward" } else { "forward" };
                    match t
                        .products
                        .iter_mut()
                        .find(|r| r.width == width && r.direction == direction)
                    {
                        Some(r) => {
                            r.count += 1;
                            r.bytes += b;
                        }
                        None => t.products.push(ProductRow {
                            width,
                            direction,
                            count: 1,
                            bytes: b,
                        }),
                    }
                }
                Op::SparseRows | Op::RowCounts => t.product_bytes += b,
                Op::Sum { .. } | Op::Span => {
                    t.reduce_bytes += b;
                    t.collectives += 1;
                }
            }
        }
        t
    }
}

/// The modelled epoch of `epoch` under `t` on `p` ranks: the compute of the largest rank
/// (`gemm_flops`, `spmm_flops`) and every exchange at its slowest rank ([`TimeModel`]).
pub(super) fn epoch_time(
    t: &TimeModel,
    epoch: &[Op],
    prices: &Prices,
    (stats, stats_t): (&[RankStats], Option<&[RankStats]>),
    (gemm_flops, spmm_flops): (u64, u64),
) -> EpochTime {
    let p = prices.ranks as usize;
    let compute_s = gemm_flops as f64 / t.gemm_flop_s + spmm_flops as f64 / t.spmm_flop_s;
    let side = |transposed: bool| stats_t.filter(|_| transposed).unwrap_or(stats);
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
                    t.alpha_s * s.neighbours as f64 + t.beta_s_per_byte * (8 * s.halo_rows) as f64
                })
                .fold(0.0, f64::max),
            // Two exchanges (lengths, then entries); the entries' bytes are spread evenly over
            // the ranks.
            Op::SparseRows => {
                2.0 * t.alpha_s * prices.messages_fwd as f64 / p as f64
                    + t.beta_s_per_byte * prices.bytes(op) as f64 / p as f64
            }
            Op::Sum { words } => 2.0 * log_p * t.alpha_s + t.beta_s_per_byte * (16 * words) as f64,
            Op::Span => log_p * t.alpha_s + t.beta_s_per_byte * (8 * p) as f64,
        })
        .sum();
    EpochTime {
        compute_s,
        comm_s,
        epoch_s: compute_s + comm_s,
    }
}
