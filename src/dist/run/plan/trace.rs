//! The exchanges of a run read off the model itself: [`Trace`], a [`Propagate`] over Â held
//! whole that records every exchange a row-partitioned backend would make ([`Op`]), and
//! [`trace_epoch`], one and two epochs of the model on a small stand-in graph through it.

use std::sync::{Mutex, PoisonError};

use ndarray::{ArrayView2, ArrayViewMut2};

use crate::data::{Features, Mask, SparseFeatures, Split};
use crate::graph::propagate::NeighbourFn;
use crate::graph::{Caps, Collective, Direction, Graph, NormAdj, Propagate, Unsupported};
use crate::kernels::CsrView;
use crate::nn::Model;
use crate::train::{train_model, FitOptions, StopRule, TrainConfig, TrainData};
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
/// would make for each call (see the [module docs](super)); it is its own [`Collective`], which
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

/// The exchanges of a run of `cfg` with `orders`: those made once (building, the cached
/// products, the final evaluation), and those of one epoch; traced on a stand-in graph of 128
/// nodes with X's width and kind.
pub(super) fn trace_epoch(
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
