//! The cost model that picks a convolution's evaluation order ([`Order::Auto`]): forward and
//! backward work of each order in GEMM multiply-add units (`docs/MATH.md`, "Cost model").

use super::Order;

/// Relative cost of one SpMM multiply-add against one GEMM multiply-add on the target machine
/// (~2 GFLOP/s against ~60 GFLOP/s, `../shared/LIMITS.md`).
pub(crate) const SPMM_COST: f64 = 30.0;

/// What [`choose_order`] needs to know about a layer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LayerShape {
    /// Nodes.
    pub n_nodes: usize,
    /// Stored entries of Â.
    pub nnz_adj: usize,
    /// Input width.
    pub in_dim: usize,
    /// Output width.
    pub out_dim: usize,
    /// `Some(nnz(X))` when the input is sparse features.
    pub sparse_input_nnz: Option<usize>,
    /// Upper bound on nnz(ÂX) for a sparse input (Σ_j deg(j)·nnz(x_j)).
    pub sparse_aggregate_nnz: Option<usize>,
    /// First layer: no input gradient is needed.
    pub first: bool,
    /// First layer without input dropout or DropEdge: ÂX is computed once and kept.
    pub aggregate_cached: bool,
}

/// Estimated per-epoch cost (forward + backward) of each order, in GEMM multiply-add units:
/// `(aggregate_first, transform_first)`. See `docs/MATH.md`, "Cost model".
pub(crate) fn order_costs(s: &LayerShape) -> (f64, f64) {
    let (n, m, a, c) = (
        s.n_nodes as f64,
        s.nnz_adj as f64,
        s.in_dim as f64,
        s.out_dim as f64,
    );
    // Products of the input (or of ÂX) with an a×c matrix.
    let x_prod = match s.sparse_input_nnz {
        Some(nnz) => SPMM_COST * nnz as f64 * c,
        None => n * a * c,
    };
    let s_prod = match s.sparse_aggregate_nnz {
        Some(nnz) => (SPMM_COST * nnz as f64 * c).min(n * a * c),
        None => n * a * c,
    };
    let spmm_in = SPMM_COST * m * a;
    let spmm_out = SPMM_COST * m * c;
    let agg_fwd = if s.aggregate_cached { 0.0 } else { spmm_in } + s_prod;
    let agg_bwd = s_prod + if s.first { 0.0 } else { n * c * a + spmm_in };
    let tr_fwd = x_prod + spmm_out;
    let tr_bwd = spmm_out + x_prod + if s.first { 0.0 } else { n * a * c };
    (agg_fwd + agg_bwd, tr_fwd + tr_bwd)
}

/// Resolves [`Order::Auto`] by [`order_costs`] (ties go to TransformFirst); a fixed order is
/// returned as it is.
pub(crate) fn choose_order(order: Order, s: &LayerShape) -> Order {
    match order {
        Order::Auto => {
            let (agg, tr) = order_costs(s);
            if agg < tr {
                Order::AggregateFirst
            } else {
                Order::TransformFirst
            }
        }
        o => o,
    }
}
