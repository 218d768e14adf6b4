//! [`Builder`]: what an architecture's [`build`](super::Architecture::build) pushes its nodes
//! into, with the helpers every architecture shares (a graph convolution with its order resolved
//! by the cost model, the normalisation after a hidden convolution, element-wise nodes, hidden
//! blocks).

use rand::Rng;

use super::{ModelConfig, NormKind};
use crate::graph::Propagate;
use crate::input::{Features, FeaturesRef};
use crate::nn::batch_norm::BatchNorm;
use crate::nn::dropout::ReluDropout;
use crate::nn::gcn_conv::{choose_order, GcnConv, LayerShape, Order};
use crate::nn::layer::Layer;
use crate::nn::pair_norm::PairNorm;
use crate::nn::stack::{Node, Src};
use crate::Scalar;

/// The node of a `Src::Node`.
pub(crate) fn prev_node(s: Src) -> usize {
    match s {
        Src::Node(i) => i,
        _ => unreachable!("a node"),
    }
}

/// Collects nodes and hidden-block ranges while an architecture is assembled
/// ([`Architecture::build`](super::Architecture::build)).
pub struct Builder<'a, F: Scalar> {
    cfg: &'a ModelConfig,
    adj: &'a dyn Propagate<F>,
    x: &'a Features<F>,
    orders: Option<&'a [Order]>,
    /// The whole graph's nodes and Â's entries, when `adj` is a stand-in of another size: what
    /// the cost model sees.
    pub(crate) whole: Option<(usize, usize)>,
    n_convs: usize,
    pub(crate) nodes: Vec<Node<F>>,
    block_start: usize,
    pub(crate) blocks: Vec<std::ops::Range<usize>>,
}

impl<'a, F: Scalar> Builder<'a, F> {
    pub(crate) fn new(
        cfg: &'a ModelConfig,
        adj: &'a dyn Propagate<F>,
        x: &'a Features<F>,
        orders: Option<&'a [Order]>,
    ) -> Self {
        Builder {
            cfg,
            adj,
            x,
            orders,
            whole: None,
            n_convs: 0,
            nodes: Vec::new(),
            block_start: 0,
            blocks: Vec::new(),
        }
    }

    /// The model's input features.
    pub fn x(&self) -> &'a Features<F> {
        self.x
    }

    /// Graph convolution `l` (in draw order), its order resolved by the cost model.
    pub fn conv<R: Rng + ?Sized>(
        &mut self,
        l: usize,
        din: usize,
        dout: usize,
        rng: &mut R,
    ) -> GcnConv<F> {
        let first = l == 0;
        let sparse = match self.x.get() {
            FeaturesRef::Sparse(s) if first => Some(s),
            _ => None,
        };
        // Â·X of sparse features kept sparse: an upper bound on its non-zeros, or none when
        // the backend has no sparse product (then aggregate-first is not an option).
        let bound = sparse.map(|s| {
            let xs = s.x();
            let xi = xs.indptr();
            let per_row: Vec<usize> = (0..xs.rows()).map(|j| xi.nnz_in_outer_sz(j)).collect();
            self.adj.row_gather_bound(&per_row, s.x().cols())
        });
        let shape = LayerShape {
            n_nodes: self.whole.map_or(self.adj.rows().total, |w| w.0),
            nnz_adj: self.whole.map_or(self.adj.nnz(), |w| w.1),
            in_dim: din,
            out_dim: dout,
            sparse_input_nnz: sparse
                .map(|s| self.adj.collective().sum(s.x().nnz() as u64) as usize),
            sparse_aggregate_nnz: bound.and_then(|b| b.ok()),
            first,
            aggregate_cached: first && self.cfg.input_dropout == 0.0 && self.cfg.drop_edge == 0.0,
        };
        let order = match self.orders.and_then(|o| o.get(self.n_convs)) {
            Some(&o) => o,
            None if matches!(bound, Some(Err(_))) && self.cfg.order == Order::Auto => {
                Order::TransformFirst
            }
            None => choose_order(self.cfg.order, &shape),
        };
        // The lean order on sparse features is TransformFirst's (and says so).
        let order = if order == Order::Lean && sparse.is_some() {
            Order::TransformFirst
        } else {
            order
        };
        self.n_convs += 1;
        GcnConv::new(din, dout, self.cfg.bias, order, rng)
    }

    /// Pushes a node: `layer` reading `inputs`, its parameters in weight-decay group `group`,
    /// its dropout stream `site` (if it draws a mask); returns its index.
    pub fn push(
        &mut self,
        layer: impl Layer<F> + 'static,
        inputs: Vec<Src>,
        group: usize,
        site: u64,
    ) -> usize {
        self.nodes.push(Node {
            layer: Box::new(layer),
            inputs,
            group,
            site,
        });
        self.nodes.len() - 1
    }

    /// An element-wise node (ReLU and/or dropout with mask stream `site`) on `input`.
    pub fn elem(&mut self, layer: ReluDropout, input: Src, site: u64) -> Src {
        Src::Node(self.push(layer, vec![input], 0, site))
    }

    /// The normalisation after a hidden convolution's output `z` (or `z` itself).
    pub fn norm(&mut self, z: usize, h: usize) -> usize {
        match self.cfg.norm {
            NormKind::None => z,
            NormKind::Batch => self.push(BatchNorm::<F>::new(h), vec![Src::Node(z)], 3, 0),
            NormKind::Pair(mode) => {
                let pn = PairNorm {
                    mode,
                    ..PairNorm::new(h)
                };
                self.push(pn, vec![Src::Node(z)], 3, 0)
            }
        }
    }

    /// Marks the start of a hidden block (the next node pushed is its first).
    pub(crate) fn begin_block(&mut self) {
        self.block_start = self.nodes.len();
    }

    /// Marks the end of hidden block `l`.
    pub(crate) fn end_block(&mut self, l: usize) {
        debug_assert_eq!(self.blocks.len(), l);
        self.blocks.push(self.block_start..self.nodes.len());
    }
}
