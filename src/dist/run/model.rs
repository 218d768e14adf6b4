//! The communication model of a row-partitioned run: the bytes every rank hands MPI, from the
//! partition's halos and the model's shapes alone, without running anything.
//!
//! The bytes, as `dist::backend::mpi::DistAdj` (feature `mpi`) counts them (nothing in a 1-rank
//! job):
//! - **a product** Â·H at width w: every halo row is sent once by its owner, so
//!   `4·w·Σ_r halo_r` bytes over all ranks (Âᵀ·G: its own halos, the same for a symmetric Â);
//! - **a sum across nodes** of `len` values: each rank's exact partials, `WORDS_F32` `i64`
//!   words per value, all-reduced: `8·WORDS_F32·len·P`; counts are 1 word per value;
//! - **a dropout mask**: each rank's element count, all-gathered: `8·P`.
//!
//! [`gcn_run_bytes`] adds them up for Kipf & Welling's GCN (the `gcn` architecture without
//! normalisation layers, checkpointing or DropEdge) over a run: per epoch one training pass
//! (forward products of every convolution at its exchanged width — its output width when it
//! transforms first, its input width when it aggregates first — the loss and accuracy, the
//! backward products, the weight and bias gradients) and one validation pass; then the final
//! evaluation (validation and test).

use crate::dist::backend::RowPartition;
use crate::graph::NormAdj;
use crate::nn::Order;
use crate::scalar::exact::Accumulator;
use crate::Scalar;

/// Words of one `f32` value's exact partial.
pub(crate) const WORDS_F32: u64 = <<f32 as Scalar>::Exact as Accumulator>::WORDS as u64;

/// Rows every exchange carries, summed over the ranks of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HaloTotals {
    /// Ranks.
    pub ranks: u64,
    /// Σ_r halo rows of Â (rows received before each Â·H).
    pub fwd: u64,
    /// Σ_r halo rows of Âᵀ (before each Âᵀ·G; `fwd` when Â is symmetric).
    pub bwd: u64,
}

impl HaloTotals {
    /// The halo totals of `adj` under `part`.
    pub fn of(adj: &NormAdj<f32>, part: &RowPartition) -> HaloTotals {
        let sum = |m: crate::kernels::CsrView<'_, f32>| -> u64 {
            part.stats(m.indptr().raw_storage(), m.indices())
                .iter()
                .map(|s| s.halo_rows as u64)
                .sum()
        };
        let fwd = sum(adj.a());
        let bwd = if adj.is_symmetric() {
            fwd
        } else {
            sum(adj.a_t())
        };
        HaloTotals {
            ranks: part.ranks() as u64,
            fwd,
            bwd,
        }
    }
}

/// The shapes of a GCN that the model needs.
#[derive(Debug, Clone, PartialEq)]
pub struct GcnShape {
    /// Widths: input, hidden…, output (`layers + 1` of them).
    pub dims: Vec<usize>,
    /// Each convolution's resolved order.
    pub orders: Vec<Order>,
    /// Biases on the convolutions.
    pub bias: bool,
    /// Dropout after each hidden layer > 0.
    pub dropout: bool,
    /// Dropout on the input features > 0.
    pub input_dropout: bool,
}

impl GcnShape {
    /// The width convolution `l` exchanges.
    pub(crate) fn exchanged_width(&self, l: usize) -> u64 {
        match self.orders[l] {
            Order::AggregateFirst => self.dims[l] as u64,
            _ => self.dims[l + 1] as u64,
        }
    }
}

/// Bytes of the run of a GCN with `shape` for `epochs` epochs under `halo` (see the
/// [module docs](self)). With `sparse_input`, building the model also sums the features'
/// non-zeros and the cost model's bound (two counts) after exchanging the halo rows'
/// non-zero counts (8 bytes a row). An aggregate-first first layer on sparse features
/// exchanges sparse rows, which this model does not count.
pub fn gcn_run_bytes(
    halo: &HaloTotals,
    shape: &GcnShape,
    sparse_input: bool,
    epochs: u64,
    final_eval: bool,
) -> u64 {
    if halo.ranks <= 1 {
        return 0;
    }
    let p = halo.ranks;
    let layers = shape.orders.len();
    let reduce = |len: u64| 8 * WORDS_F32 * len * p;
    let counts = |len: u64| 8 * len * p;
    let product = |rows: u64, w: u64| 4 * w * rows;
    // A pass's forward products. An aggregate-first first convolution keeps Â·X of the raw
    // features: evaluation passes always read it, training passes when there is no input
    // dropout; it is exchanged once, by the first pass that reads it.
    let agg0 = shape.orders[0] == Order::AggregateFirst;
    let hidden: u64 = (1..layers)
        .map(|l| product(halo.fwd, shape.exchanged_width(l)))
        .sum();
    let first = product(halo.fwd, shape.exchanged_width(0));
    let train_forward = hidden
        + if !agg0 || shape.input_dropout {
            first
        } else {
            0
        };
    let eval_forward = hidden + if agg0 { 0 } else { first };
    let cached_once = if agg0 { first } else { 0 };
    // Loss: the mask's size and the exact sum; accuracy: correct and size.
    let loss = counts(1) + reduce(1);
    let accuracy = counts(2);
    let build = if sparse_input {
        counts(2) + 8 * halo.fwd
    } else {
        0
    };
    let mut train_pass = loss + accuracy;
    if shape.input_dropout {
        train_pass += counts(1);
    }
    if shape.dropout {
        train_pass += counts(1) * (layers as u64 - 1);
    }
    for l in 0..layers {
        let (din, dout) = (shape.dims[l] as u64, shape.dims[l + 1] as u64);
        train_pass += reduce(din * dout);
        if shape.bias {
            train_pass += reduce(dout);
        }
        let needs_at = l > 0 || shape.orders[l] != Order::AggregateFirst;
        if needs_at {
            train_pass += product(halo.bwd, shape.exchanged_width(l));
        }
    }
    // An evaluation: validation's and test's loss and accuracy from one forward pass.
    let eval = eval_forward + 2 * (loss + accuracy);
    let per_epoch = train_pass + train_forward + eval;
    if epochs == 0 {
        return 0;
    }
    build + epochs * per_epoch + cached_once + if final_eval { eval } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(orders: [Order; 2], input_dropout: bool) -> GcnShape {
        GcnShape {
            dims: vec![10, 4, 3],
            orders: orders.to_vec(),
            bias: true,
            dropout: true,
            input_dropout,
        }
    }

    #[test]
    fn one_rank_sends_nothing_and_bytes_follow_the_formula() {
        let one = HaloTotals {
            ranks: 1,
            fwd: 0,
            bwd: 0,
        };
        let t = [Order::TransformFirst; 2];
        assert_eq!(gcn_run_bytes(&one, &shape(t, true), false, 5, true), 0);
        let h = HaloTotals {
            ranks: 2,
            fwd: 7,
            bwd: 9,
        };
        let (w, c) = (8 * WORDS_F32 * 2, 8 * 2);
        // Per epoch, transform first: forward 4·(4 + 3)·7 twice (train, evaluation), backward
        // 4·(4 + 3)·9; gradients (10·4 + 4 + 4·3 + 3) words; the training loss and accuracy,
        // validation's and test's; two dropout spans.
        let eval = 4 * 7 * 7 + 2 * (c + w + 2 * c);
        let per_epoch =
            4 * 7 * 7 + 4 * 7 * 9 + w * (40 + 4 + 12 + 3) + (c + w + 2 * c) + eval + 2 * c;
        for (final_eval, extra) in [(false, 0), (true, eval)] {
            assert_eq!(
                gcn_run_bytes(&h, &shape(t, true), false, 3, final_eval),
                3 * per_epoch + extra
            );
        }
        // Aggregate first without input dropout: the first layer's product (width 10) once, no
        // backward product for it, one dropout span an epoch.
        let a = [Order::AggregateFirst, Order::TransformFirst];
        let eval = 4 * 3 * 7 + 2 * (c + w + 2 * c);
        let per_epoch = 4 * 3 * 7 + 4 * 3 * 9 + w * (40 + 4 + 12 + 3) + (c + w + 2 * c) + eval + c;
        assert_eq!(
            gcn_run_bytes(&h, &shape(a, false), false, 3, true),
            3 * per_epoch + 4 * 10 * 7 + eval
        );
        // Sparse input: two counts and the halo's non-zero counts at build.
        assert_eq!(
            gcn_run_bytes(&h, &shape(a, false), true, 3, false),
            gcn_run_bytes(&h, &shape(a, false), false, 3, false) + 2 * c + 8 * 7
        );
    }
}
