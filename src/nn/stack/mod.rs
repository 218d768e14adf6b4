//! [`Model`]: the one stack that runs every architecture — its forward and backward loop, its
//! activation-checkpointing strategy, and the plan of the buffers it reuses from pass to pass.
//!
//! A model is a list of nodes in forward order, each a [`Layer`] with its inputs (the features
//! X, their dropped copy X̃, or earlier nodes' outputs); the last node's output is the logits.
//! [`ModelConfig::build`](super::ModelConfig::build) is the only place that turns an
//! architecture into such a list.
//!
//! # One loop
//! A training pass runs the nodes' forward calls in order, hands the logits to the loss, then
//! runs their backward calls in reverse order, accumulating the gradient of every value that
//! several nodes read. An evaluation pass runs the forward calls only.
//!
//! # Checkpointing is a strategy of that loop
//! With [`Checkpointing::Every`]`(k)` the hidden blocks are grouped into segments of k; a
//! segment's activations and saved states are not kept from the forward pass. Before the
//! backward calls of a segment, the loop runs the segment's forward calls again (same masks,
//! same batch statistics, running statistics untouched), keeping what backward needs. The same
//! layer calls run either way; only which buffers live how long differs. The dropped input X̃
//! (dense features) is not held through the pass either when a layer reads it in backward (one
//! that keeps its input, or a recomputed one): it is drawn again from the recorded stream just
//! before that read.
//!
//! # Buffers
//! On the first pass the model plans its buffers from what each layer asks for
//! ([`Layer::saved`], [`Layer::scratch`]) and from when each value is written and last read:
//! values, saved states and gradients each live in a pool of buffers assigned by interval
//! (a buffer is reused once its value is dead; an in-place layer takes over its input's
//! buffer when nothing reads that input later). The pools are allocated once and reused by every
//! later pass on the same data, so the epoch loop allocates nothing (`tests/no_alloc.rs`).
//!
//! # Dropout streams
//! [`MaskStreams::Shared`]: every mask of a pass is drawn in forward order from the caller's
//! stream (Kipf & Welling's GCN as this engine has always trained it); a recomputed segment
//! replays its masks from the stream positions recorded in the forward pass.
//! [`MaskStreams::PerLayer`]: the pass draws one key from the caller's stream; each dropout site
//! draws from its own ChaCha8 stream of that key (the deep models).

mod exec;
mod plan;

use exec::Workspace;

use std::ops::Range;

use ndarray::{Array1, ArrayView2, ArrayViewMut2};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::layer::{view, view_mut, Layer};
use super::param::Param;
use super::{Mode, ModelConfig, Order};
use crate::graph::Propagate;
use crate::input::{Features, FeaturesRef};
use crate::{Par, Scalar};

/// A tensor of a model, as [`Model::visit_named`] gives it.
#[derive(Debug)]
pub enum Named<'a, F> {
    /// A trainable parameter (2-D).
    Param(&'a mut Param<F>),
    /// A statistics vector (BatchNorm's running mean or variance).
    Stat(&'a mut Array1<F>),
}

impl<F> Named<'_, F> {
    /// The shape: 2-D for a parameter, 1-D for statistics.
    pub fn shape(&self) -> Vec<usize> {
        match self {
            Named::Param(p) => vec![p.value.nrows(), p.value.ncols()],
            Named::Stat(v) => vec![v.len()],
        }
    }
    /// The values, row-major.
    pub fn values(&self) -> Box<dyn Iterator<Item = &F> + '_> {
        match self {
            Named::Param(p) => Box::new(p.value.iter()),
            Named::Stat(v) => Box::new(v.iter()),
        }
    }
    /// The values to overwrite, row-major.
    pub fn values_mut(&mut self) -> Box<dyn Iterator<Item = &mut F> + '_> {
        match self {
            Named::Param(p) => Box::new(p.value.iter_mut()),
            Named::Stat(v) => Box::new(v.iter_mut()),
        }
    }
}

/// Where a node reads an input from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Src {
    /// The features X.
    X,
    /// The features after the input dropout (X itself in evaluation, or without input dropout).
    Xd,
    /// The output of an earlier node.
    Node(usize),
}

/// How a pass draws its dropout masks (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MaskStreams {
    /// Every mask from the caller's stream, in forward order.
    Shared,
    /// One key per pass from the caller's stream; one ChaCha8 stream of that key per site.
    #[default]
    PerLayer,
}

/// Activation checkpointing: a strategy of the stack's loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Checkpointing {
    /// Keep every activation backward needs.
    #[default]
    None,
    /// Keep only the inputs of every k-th hidden block; recompute each segment of k blocks
    /// before its backward calls.
    Every(usize),
}

/// The stack's own options: how it plans its passes, apart from any architecture's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StackOptions {
    /// Â changes from one training pass to the next (DropEdge's samples): the plan keeps
    /// nothing computed from Â across training passes (each training pass computes it, and
    /// evaluation keeps its own). Without it, such a pass is still exact (every cache is
    /// keyed on Â's id), only slower.
    pub varying_graph: bool,
    /// Draw the dropped input again for its reads after the loss instead of holding it
    /// through the pass (part of activation checkpointing).
    pub redraw_input: bool,
}

/// One node of the stack.
#[derive(Debug, Clone)]
pub struct Node<F: Scalar> {
    /// The layer.
    pub layer: Box<dyn Layer<F>>,
    /// Its inputs.
    pub inputs: Vec<Src>,
    /// Weight-decay group of its parameters.
    pub group: usize,
    /// Its dropout stream (under [`MaskStreams::PerLayer`]), if it draws a mask.
    pub site: u64,
}

/// A model: the nodes, the input dropout, and the buffers of its passes (see the
/// [module docs](self)).
#[derive(Debug)]
pub struct Model<F: Scalar> {
    pub(crate) config: ModelConfig,
    pub(crate) nodes: Vec<Node<F>>,
    /// Dropout on X (the value [`Src::Xd`]).
    pub(crate) input_dropout: f64,
    /// The stream of the input dropout (under [`MaskStreams::PerLayer`]).
    pub(crate) input_site: u64,
    /// Nodes whose outputs are the model's layer representations, in order.
    pub(crate) taps: Vec<usize>,
    pub(crate) streams: MaskStreams,
    /// Node ranges recomputed in backward (checkpointed segments).
    pub(crate) segments: Vec<Range<usize>>,
    pub(crate) opts: StackOptions,
    ws: Option<Box<Workspace<F>>>,
}

impl<F: Scalar> Clone for Model<F> {
    /// A copy of the parameters and statistics (not of the buffers).
    fn clone(&self) -> Self {
        Model {
            config: self.config.clone(),
            nodes: self.nodes.clone(),
            input_dropout: self.input_dropout,
            input_site: self.input_site,
            taps: self.taps.clone(),
            streams: self.streams,
            segments: self.segments.clone(),
            opts: self.opts,
            ws: None,
        }
    }
}

impl<F: Scalar> Model<F> {
    /// A model from its nodes (the last one gives the logits). Use
    /// [`ModelConfig::build`](super::ModelConfig::build) unless you assemble your own stack.
    ///
    /// # Panics
    /// If an input names a later node, or a checkpointed segment is out of range.
    pub fn from_nodes(
        config: ModelConfig,
        nodes: Vec<Node<F>>,
        input_dropout: f64,
        input_site: u64,
        taps: Vec<usize>,
        streams: MaskStreams,
        segments: Vec<Range<usize>>,
    ) -> Self {
        for (i, node) in nodes.iter().enumerate() {
            assert_eq!(
                node.inputs.len(),
                node.layer.arity(),
                "node {i} ({}): {} inputs for arity {}",
                node.layer.name(),
                node.inputs.len(),
                node.layer.arity()
            );
            for s in &node.inputs {
                if let Src::Node(j) = s {
                    assert!(*j < i, "node {i} reads node {j}, which comes later");
                }
            }
        }
        for s in &segments {
            assert!(s.end < nodes.len() && s.start < s.end, "bad segment {s:?}");
        }
        let opts = StackOptions {
            varying_graph: config.drop_edge > 0.0,
            redraw_input: config.checkpoint > 0 || !segments.is_empty(),
        };
        Model {
            config,
            nodes,
            input_dropout,
            input_site,
            taps,
            streams,
            segments,
            opts,
            ws: None,
        }
    }

    /// The configuration the model was built from.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The nodes, in forward order.
    pub fn nodes(&self) -> &[Node<F>] {
        &self.nodes
    }

    /// The resolved order of each graph convolution, in forward order.
    pub fn orders(&self) -> Vec<Order> {
        self.nodes.iter().filter_map(|n| n.layer.order()).collect()
    }

    /// Number of layer representations [`Model::visit_representations`] visits.
    pub fn n_representations(&self) -> usize {
        self.taps.len()
    }

    /// Calls `f(group, param)` on every parameter in a fixed order (node by node).
    pub fn visit_params(&mut self, f: &mut dyn FnMut(usize, &mut Param<F>)) {
        for node in &mut self.nodes {
            let g = node.group;
            node.layer.visit_params(&mut |_, p| f(g, p));
        }
    }

    /// Calls `f(name, tensor)` on every parameter, then on every statistics vector, with a name
    /// unique in the model: `{node}.{layer}.{name}`, e.g. `0.gcn_conv.weight`,
    /// `1.batch_norm.running_mean`.
    pub fn visit_named(&mut self, f: &mut dyn FnMut(&str, Named<'_, F>)) {
        for (i, node) in self.nodes.iter_mut().enumerate() {
            let lname = node.layer.name();
            node.layer
                .visit_params(&mut |p, v| f(&format!("{i}.{lname}.{p}"), Named::Param(v)));
        }
        for (i, node) in self.nodes.iter_mut().enumerate() {
            let lname = node.layer.name();
            node.layer
                .visit_stats(&mut |p, v| f(&format!("{i}.{lname}.{p}"), Named::Stat(v)));
        }
    }

    /// Number of trainable scalars.
    pub fn n_params(&mut self) -> usize {
        let mut n = 0;
        self.visit_params(&mut |_, p| n += p.len());
        n
    }

    /// Zeroes every gradient.
    pub fn zero_grad(&mut self) {
        self.visit_params(&mut |_, p| p.zero_grad());
    }

    /// Copies every parameter value and statistics vector into `snap`, reusing its arrays when
    /// the shapes match (no allocation when `snap` holds an earlier snapshot of this model).
    pub fn snapshot_into(&mut self, snap: &mut Vec<Vec<F>>) {
        let mut k = 0;
        let mut put = |v: &mut dyn Iterator<Item = F>, len: usize| {
            if snap.len() <= k {
                snap.push(Vec::with_capacity(len));
            }
            let s = &mut snap[k];
            s.clear();
            s.extend(v);
            k += 1;
        };
        for node in &mut self.nodes {
            node.layer
                .visit_params(&mut |_, p| put(&mut p.value.iter().copied(), p.value.len()));
            node.layer
                .visit_stats(&mut |_, v| put(&mut v.iter().copied(), v.len()));
        }
        snap.truncate(k);
    }

    /// Restores values taken by [`Model::snapshot_into`].
    ///
    /// # Panics
    /// If the snapshot does not come from this model.
    pub fn restore(&mut self, snap: &[Vec<F>]) {
        let mut k = 0;
        let mut get = |dst: &mut dyn Iterator<Item = &mut F>, len: usize| {
            match snap.get(k) {
                Some(s) if s.len() == len => dst.zip(s).for_each(|(d, &v)| *d = v),
                _ => panic!("Model::restore: the snapshot comes from another model"),
            }
            k += 1;
        };
        for node in &mut self.nodes {
            node.layer.visit_params(&mut |_, p| {
                let len = p.value.len();
                get(&mut p.value.iter_mut(), len)
            });
            node.layer.visit_stats(&mut |_, v| {
                let len = v.len();
                get(&mut v.iter_mut(), len)
            });
        }
        assert_eq!(
            k,
            snap.len(),
            "Model::restore: the snapshot comes from another model"
        );
    }

    /// Frees the buffers of the passes and what the layers computed from the data (memory
    /// only: a pass on other data never reuses them, see [`Model::train_pass`]).
    pub fn release(&mut self) {
        self.ws = None;
        for node in &mut self.nodes {
            node.layer.release();
        }
    }

    // -----------------------------------------------------------------------------------------
    // Planning.

    /// The workspace for `n` rows and these features, planned and allocated on first use.
    fn workspace(&mut self, n: usize, x: &Features<F>) -> Box<Workspace<F>> {
        if let Some(mut ws) = self.ws.take() {
            let p = &ws.plan;
            if p.n == n && p.x_sparse == x.is_sparse() && p.x_cols == x.n_cols() {
                // The dropped copy of sparse features has their pattern: other features
                // (another id) need another copy.
                if let (Some(s), true) = (x.as_sparse(), ws.xd_sparse.is_some()) {
                    if ws.xd_of != Some(x.id()) {
                        ws.xd_sparse = Some(s.clone());
                        ws.xd_of = Some(x.id());
                    }
                }
                return ws;
            }
        }
        let plan = self.plan(n, x);
        // Fresh zeroed memory, not yet touched: advised for huge pages before its first write
        // (the n-row buffers an SpMM gathers rows of; nothing on a small graph).
        let zeros = |len: usize| {
            let mut v = vec![F::zero(); len];
            crate::kernels::raw::huge::advise_slice(&mut v);
            v
        };
        Box::new(Workspace {
            pool: plan.pool_sizes.iter().map(|&s| zeros(s)).collect(),
            taken: Vec::new(),
            saved_f: plan.saved_sizes.iter().map(|r| zeros(r.f)).collect(),
            saved_u8: plan.saved_sizes.iter().map(|r| vec![0u8; r.u8]).collect(),
            saved_f64: plan.saved_sizes.iter().map(|r| vec![0f64; r.f64]).collect(),
            scratch: exec::Scratch {
                f: zeros(plan.scratch.f),
                u8: vec![0u8; plan.scratch.u8],
                f64: vec![0f64; plan.scratch.f64],
            },
            xd_sparse: match x.get() {
                FeaturesRef::Sparse(s) if self.input_dropout > 0.0 => Some(s.clone()),
                _ => None,
            },
            xd_of: Some(x.id()),
            positions: vec![0; plan.n_sites],
            key: 0,
            const_key: vec![None; self.nodes.len()],
            plan,
        })
    }

    /// Bytes of the buffers a pass over `n` rows of features like `x` allocates (the planned
    /// workspace: values, saved tensors, gradients, scratch, the dropped copy of sparse X),
    /// without allocating them; for memory planning.
    pub fn workspace_bytes(&mut self, n: usize, x: &Features<F>) -> usize {
        let plan = self.plan(n, x);
        let f = std::mem::size_of::<F>();
        let sum = |v: &[usize]| v.iter().sum::<usize>();
        let saved: usize = plan
            .saved_sizes
            .iter()
            .map(|r| r.f * f + r.u8 + 8 * r.f64)
            .sum();
        let xd = match x.get() {
            FeaturesRef::Sparse(s) if self.input_dropout > 0.0 => s.x().nnz() * 2 * (f + 4),
            _ => 0,
        };
        f * (sum(&plan.pool_sizes) + plan.scratch.f)
            + plan.scratch.u8
            + 8 * plan.scratch.f64
            + saved
            + xd
    }

    // -----------------------------------------------------------------------------------------
    // Passes.

    /// A training pass: forward (dropout on, masks from `rng`), then `loss(z)`, where `z`
    /// holds the logits and must be left holding ∂L/∂logits (every entry; the gradient is
    /// written over the logits, one n × classes buffer for both), returning whether to go on,
    /// then (if so) backward, which **adds** every parameter's gradient.
    ///
    /// Any pass may run on another Â or other features than the last (DropEdge's samples,
    /// another graph): what the model keeps between passes is keyed on their ids
    /// ([`Propagate::id`], [`Features::id`]). A model configured with DropEdge plans for an Â
    /// that changes from one training pass to the next (it keeps nothing computed from it).
    pub fn train_pass(
        &mut self,
        adj: &dyn Propagate<F>,
        x: &Features<F>,
        rng: &mut ChaCha8Rng,
        par: Par,
        loss: &mut dyn FnMut(ArrayViewMut2<'_, F>) -> bool,
    ) {
        let mut ws = self.workspace(adj.n_rows(), x);
        if self.streams == MaskStreams::PerLayer {
            ws.key = rng.next_u64();
        }
        self.forward(&mut ws, adj, x, Mode::Train, Some(rng), par, &mut |_, _| {});
        let n = ws.plan.n;
        let c = self.nodes[self.nodes.len() - 1].layer.out_dim();
        let go = {
            let Workspace { pool, plan, .. } = &mut *ws;
            let mut dlogits = std::mem::take(&mut pool[plan.dlogits_slot]);
            if plan.dlogits_slot != plan.out_slot {
                // (Logits the model keeps, e.g. a constant last layer's: a copy.)
                dlogits[..n * c].copy_from_slice(&pool[plan.out_slot][..n * c]);
            }
            let go = loss(view_mut(&mut dlogits, (n, c)));
            pool[plan.dlogits_slot] = dlogits;
            go
        };
        if go {
            self.backward(&mut ws, adj, x, rng, par);
        }
        self.ws = Some(ws);
    }

    /// An evaluation pass (dropout off, running statistics): calls `f` on the logits.
    pub fn eval_pass(
        &mut self,
        adj: &dyn Propagate<F>,
        x: &Features<F>,
        par: Par,
        f: &mut dyn FnMut(ArrayView2<'_, F>),
    ) {
        let mut ws = self.workspace(adj.n_rows(), x);
        self.forward(&mut ws, adj, x, Mode::Eval, None, par, &mut |_, _| {});
        let n = ws.plan.n;
        let c = self.nodes[self.nodes.len() - 1].layer.out_dim();
        f(view(&ws.pool[ws.plan.out_slot], (n, c)));
        self.ws = Some(ws);
    }

    /// The logits of an evaluation pass, as a new array.
    pub fn predict(
        &mut self,
        adj: &dyn Propagate<F>,
        x: &Features<F>,
        par: Par,
    ) -> ndarray::Array2<F> {
        let mut out = None;
        self.eval_pass(adj, x, par, &mut |z| out = Some(z.to_owned()));
        out.unwrap_or_else(|| unreachable!("eval_pass calls back"))
    }

    /// An evaluation pass calling `f(l, H)` on each layer representation (the hidden layers'
    /// outputs, and the logits when the last layer is a graph convolution), in order.
    pub fn visit_representations(
        &mut self,
        adj: &dyn Propagate<F>,
        x: &Features<F>,
        par: Par,
        f: &mut dyn FnMut(usize, ArrayView2<'_, F>),
    ) {
        let mut ws = self.workspace(adj.n_rows(), x);
        self.forward(&mut ws, adj, x, Mode::Eval, None, par, f);
        self.ws = Some(ws);
    }
}
