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
//! The model plans its buffers for passes of at most N rows ([`Model::reserve`], or the first
//! pass's rows) from what each layer declares ([`Layer::spec`]) and from when each value is
//! written and last read: values, saved states and gradients each live in a pool of buffers
//! assigned by interval (a buffer is reused once its value is dead; an in-place layer takes
//! over its input's buffer when nothing reads that input later). The pools are allocated once
//! and reused by every later pass of at most N rows, whatever its Â and features, so the epoch
//! loop allocates nothing (`tests/no_alloc.rs`). What the model keeps between passes is keyed
//! on the identity of the Â and features it was computed from.
//!
//! # Dropout streams
//! [`MaskStreams::Shared`]: every mask of a pass is drawn in forward order from the caller's
//! stream (Kipf & Welling's GCN as this engine has always trained it); a recomputed segment
//! replays its masks from the stream positions recorded in the forward pass.
//! [`MaskStreams::PerLayer`]: the pass draws one key from the caller's stream; each dropout site
//! draws from its own ChaCha8 stream of that key (the deep models).

mod blocks;
mod desc;
mod exec;
pub(crate) mod plan;

pub use desc::{NodeDesc, StackDesc};

use exec::{Graphs, Workspace};

use std::ops::Range;

use ndarray::{Array1, ArrayView2, ArrayViewMut2};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::layer::{view, view_mut, Layer};
use super::param::Param;
use super::{Mode, ModelConfig, Order};
use crate::graph::{Propagate, Sums};
use crate::input::{Features, FeaturesRef};
use crate::{ConfigError, Par, Result, Scalar};

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
    /// Â changes from one training pass to the next (DropEdge's samples, mini-batches): the
    /// plan keeps nothing computed from Â across training passes (each training pass computes
    /// it, and evaluation keeps its own). Without it, such a pass is still exact (every cache
    /// is keyed on Â's id), only slower.
    pub varying_graph: bool,
    /// Activation checkpointing of the hidden blocks (with it, the dropped input is also
    /// drawn again for its reads after the loss instead of being held through the pass).
    pub checkpoint: Checkpointing,
    /// Evaluation passes run in a workspace of their own, planned for evaluation only (every
    /// value freed after its last forward read, the calls' saved states sharing buffers): what
    /// mini-batch training sets, training's workspace planned for the largest batch and
    /// evaluation's for the whole graph. The same bits as an evaluation pass in training's
    /// workspace.
    pub separate_eval: bool,
}

/// How a stack's nodes are wired besides their inputs ([`Model::from_nodes`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Wiring {
    /// Dropout on X (the value [`Src::Xd`]).
    pub input_dropout: f64,
    /// The stream of the input dropout (under [`MaskStreams::PerLayer`]).
    pub input_site: u64,
    /// Nodes whose outputs are the model's layer representations, in order.
    pub taps: Vec<usize>,
    /// How a pass draws its dropout masks.
    pub streams: MaskStreams,
    /// The hidden blocks (node ranges): what checkpointing can recompute.
    pub blocks: Vec<Range<usize>>,
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
    /// The configuration it was built from (`None`: a hand-built stack).
    pub(crate) config: Option<ModelConfig>,
    pub(crate) nodes: Vec<Node<F>>,
    /// Dropout on X (the value [`Src::Xd`]).
    pub(crate) input_dropout: f64,
    /// The stream of the input dropout (under [`MaskStreams::PerLayer`]).
    pub(crate) input_site: u64,
    /// Nodes whose outputs are the model's layer representations, in order.
    pub(crate) taps: Vec<usize>,
    pub(crate) streams: MaskStreams,
    /// The hidden blocks: what checkpointing can recompute.
    pub(crate) blocks: Vec<Range<usize>>,
    pub(crate) opts: StackOptions,
    ws: Option<Box<Workspace<F>>>,
    /// Evaluation's workspace under [`StackOptions::separate_eval`].
    eval_ws: Option<Box<Workspace<F>>>,
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
            blocks: self.blocks.clone(),
            opts: self.opts,
            ws: None,
            eval_ws: None,
        }
    }
}

impl<F: Scalar> Model<F> {
    /// A model from its nodes (the last one gives the logits), wired by `wiring`, planned
    /// with `opts`: a stack assembled by hand (it has no [`Model::config`]; it saves and loads
    /// when every layer describes its settings, [`Model::describe`]). Use
    /// [`ModelConfig::build`](super::ModelConfig::build) for an architecture.
    ///
    /// # Errors
    /// [`ConfigError::Stack`] when the stack is empty, a node has another number of inputs than
    /// its layer's arity or reads a later node, a tap or a block is out of range, or the input
    /// dropout is not in [0, 1).
    pub fn from_nodes(
        nodes: Vec<Node<F>>,
        wiring: Wiring,
        opts: StackOptions,
    ) -> std::result::Result<Self, ConfigError> {
        let bad = |msg: String| Err(ConfigError::Stack(msg));
        if nodes.is_empty() {
            return bad("a stack without nodes".into());
        }
        for (i, node) in nodes.iter().enumerate() {
            let arity = node.layer.arity();
            if node.inputs.len() != arity {
                return bad(format!(
                    "node {i} ({}): {} inputs for arity {arity}",
                    node.layer.name(),
                    node.inputs.len()
                ));
            }
            if let Some(j) = node.inputs.iter().find_map(|s| match s {
                Src::Node(j) if *j >= i => Some(*j),
                _ => None,
            }) {
                return bad(format!("node {i} reads node {j}, which comes later"));
            }
        }
        let n = nodes.len();
        if let Some(t) = wiring.taps.iter().find(|&&t| t >= n) {
            return bad(format!("tap {t} of {n} nodes"));
        }
        if let Some(b) = wiring
            .blocks
            .iter()
            .find(|b| b.start >= b.end || b.end >= n)
        {
            return bad(format!(
                "block {b:?} of {n} nodes (the last node is not in a block)"
            ));
        }
        if !(0.0..1.0).contains(&wiring.input_dropout) {
            return Err(ConfigError::DropoutOutOfRange(wiring.input_dropout));
        }
        Ok(Model {
            config: None,
            nodes,
            input_dropout: wiring.input_dropout,
            input_site: wiring.input_site,
            taps: wiring.taps,
            streams: wiring.streams,
            blocks: wiring.blocks,
            opts,
            ws: None,
            eval_ws: None,
        })
    }

    /// The stack's options.
    pub fn options(&self) -> StackOptions {
        self.opts
    }

    /// Sets the stack's options; the next pass plans again for them (a plan depends on them).
    pub fn set_options(&mut self, opts: StackOptions) {
        if opts != self.opts {
            self.opts = opts;
            self.ws = None;
            self.eval_ws = None;
        }
    }

    /// How the nodes are wired besides their inputs (for a stack assembled from this one's
    /// nodes).
    pub fn wiring(&self) -> Wiring {
        Wiring {
            input_dropout: self.input_dropout,
            input_site: self.input_site,
            taps: self.taps.clone(),
            streams: self.streams,
            blocks: self.blocks.clone(),
        }
    }

    /// The configuration the model was built from ([`ModelConfig::build`]); `None` for a
    /// stack assembled by hand ([`Model::from_nodes`]).
    pub fn config(&self) -> Option<&ModelConfig> {
        self.config.as_ref()
    }

    /// The nodes, in forward order.
    pub fn nodes(&self) -> &[Node<F>] {
        &self.nodes
    }

    /// The resolved order of each graph convolution (each layer with an `order` setting,
    /// [`Layer::attrs`]), in forward order.
    pub fn orders(&self) -> Vec<Order> {
        self.nodes
            .iter()
            .filter_map(|n| n.layer.attrs()?.get::<Order>("order").ok())
            .collect()
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
    pub(crate) fn n_params(&mut self) -> usize {
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

    /// Frees the buffers of training passes (memory only: the next one plans them again),
    /// keeping evaluation's own ([`StackOptions::separate_eval`]).
    pub fn release_training(&mut self) {
        if self.opts.separate_eval {
            self.ws = None;
        }
    }

    /// Frees evaluation's own buffers ([`StackOptions::separate_eval`]; memory only: the next
    /// evaluation plans them again), keeping training's.
    pub fn release_eval(&mut self) {
        self.eval_ws = None;
    }

    /// Frees the buffers of the passes and what the layers computed from the data (memory
    /// only: a pass on other data never reuses them, see [`Model::train_pass`]).
    pub fn release(&mut self) {
        self.ws = None;
        self.eval_ws = None;
        for node in &mut self.nodes {
            node.layer.release();
        }
    }

    // -----------------------------------------------------------------------------------------
    // Planning.

    /// Plans and allocates the buffers of passes of at most `rows` rows on features like `x`
    /// (sparse or dense, of `x`'s width): every later pass of at most that many rows on such
    /// features allocates nothing, whatever its Â and features. A pass over more rows plans
    /// again for them.
    ///
    /// # Errors
    /// [`Error::Mismatch`](crate::Error::Mismatch) when an input's width is not the one its
    /// layer reads ([`Spec::in_dim`](super::Spec::in_dim)).
    pub fn reserve(&mut self, rows: usize, x: &Features<F>) -> Result<()> {
        let ws = self.workspace(&[rows], x, false)?;
        self.ws = Some(ws);
        Ok(())
    }

    /// Plans and allocates the buffers of training passes over stacks of blocks
    /// ([`Model::train_blocks`]) of at most `caps[l]` rows at level l (level 0: the features'
    /// rows, `caps.len() - 1`: the seeds'), and (`eval`) of evaluation passes over such stacks
    /// (in evaluation's own workspace under [`StackOptions::separate_eval`]): every later pass
    /// within them allocates nothing.
    ///
    /// # Errors
    /// As [`Model::reserve`]; [`ConfigError::Stack`] when the stack is not a chain of layers
    /// of at most one hop each with one hop per block ([`Layer::hops`]).
    pub fn reserve_blocks(&mut self, caps: &[usize], x: &Features<F>, eval: bool) -> Result<()> {
        let ws = self.workspace(caps, x, eval)?;
        *self.slot(eval) = Some(ws);
        Ok(())
    }

    /// Whether an evaluation pass (`eval`) runs in evaluation's own workspace
    /// ([`StackOptions::separate_eval`]).
    fn own_eval(&self, eval: bool) -> bool {
        eval && self.opts.separate_eval
    }

    /// Where the workspace of a pass (an evaluation pass: `eval`) is kept.
    fn slot(&mut self, eval: bool) -> &mut Option<Box<Workspace<F>>> {
        if self.own_eval(eval) {
            &mut self.eval_ws
        } else {
            &mut self.ws
        }
    }

    /// The workspace for passes (evaluation passes: `eval`) of `rows` rows at each level
    /// (`[n]` for a whole graph) on these features: the one planned, if it holds them, else
    /// one planned and allocated for them (taken out of its slot).
    fn workspace(
        &mut self,
        rows: &[usize],
        x: &Features<F>,
        eval: bool,
    ) -> Result<Box<Workspace<F>>> {
        if let Some(mut ws) = self.slot(eval).take() {
            let p = &ws.plan;
            if p.holds(rows) && p.x_sparse == x.is_sparse() && p.x_cols == x.n_cols() {
                // The dropped copy of sparse features has their pattern: other features
                // (another id) need another copy.
                if let (Some(s), true) = (x.as_sparse(), ws.xd_sparse.is_some()) {
                    if ws.xd_of != Some(x.id()) {
                        ws.xd_sparse = Some(s.clone());
                        ws.xd_of = Some(x.id());
                    }
                }
                return Ok(ws);
            }
        }
        let plan = self.plan(rows, x, self.own_eval(eval))?;
        // Fresh zeroed memory, not yet touched: advised for huge pages before its first write
        // (the n-row buffers an SpMM gathers rows of; nothing on a small graph).
        let zeros = |len: usize| {
            let mut v = vec![F::zero(); len];
            crate::kernels::raw::advise_slice(&mut v);
            v
        };
        Ok(Box::new(Workspace {
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
            // (Evaluation drops nothing: its own workspace holds no copy to drop into.)
            xd_sparse: match x.get() {
                FeaturesRef::Sparse(s) if self.input_dropout > 0.0 && !self.own_eval(eval) => {
                    Some(s.clone())
                }
                _ => None,
            },
            xd_of: Some(x.id()),
            sums: crate::graph::SumScratch::default(),
            positions: vec![0; plan.n_sites],
            key: 0,
            const_key: vec![None; self.nodes.len()],
            plan,
        }))
    }

    /// Bytes of the buffers a pass over `n` rows of features like `x` allocates (the planned
    /// workspace: values, saved tensors, gradients, scratch, the dropped copy of sparse X),
    /// without allocating them; for memory planning.
    ///
    /// # Errors
    /// As [`Model::reserve`].
    pub(crate) fn workspace_bytes(&mut self, n: usize, x: &Features<F>) -> Result<usize> {
        self.plan_bytes(n, x, false)
    }

    /// [`Model::workspace_bytes`] of evaluation's own workspace
    /// ([`StackOptions::separate_eval`]: planned forward only).
    ///
    /// # Errors
    /// As [`Model::reserve`].
    pub(crate) fn eval_workspace_bytes(&mut self, n: usize, x: &Features<F>) -> Result<usize> {
        self.plan_bytes(n, x, true)
    }

    /// The bytes of a plan for `n` rows (`eval`: forward only).
    fn plan_bytes(&mut self, n: usize, x: &Features<F>, eval: bool) -> Result<usize> {
        self.plan_bytes_levels(&[n], x, eval)
    }

    /// [`Model::workspace_bytes`] (`eval`: of evaluation's own workspace) of passes over
    /// stacks of blocks of at most `caps[l]` rows at level l ([`Model::reserve_blocks`]).
    ///
    /// # Errors
    /// As [`Model::reserve_blocks`].
    pub(crate) fn plan_bytes_levels(
        &mut self,
        caps: &[usize],
        x: &Features<F>,
        eval: bool,
    ) -> Result<usize> {
        let plan = self.plan(caps, x, eval)?;
        let f = std::mem::size_of::<F>();
        let sum = |v: &[usize]| v.iter().sum::<usize>();
        let saved: usize = plan
            .saved_sizes
            .iter()
            .map(|r| r.f * f + r.u8 + 8 * r.f64)
            .sum();
        let xd = match x.get() {
            FeaturesRef::Sparse(s) if self.input_dropout > 0.0 && !eval => {
                s.x().nnz() * 2 * (f + 4)
            }
            _ => 0,
        };
        Ok(f * (sum(&plan.pool_sizes) + plan.scratch.f)
            + plan.scratch.u8
            + 8 * plan.scratch.f64
            + saved
            + xd)
    }

    // -----------------------------------------------------------------------------------------
    // Passes.

    /// The workspace of a pass on `adj` and `x`, after checking that they fit the model: Â
    /// square (a whole graph's; a bipartite block is for a stack of blocks), its rows the
    /// features', and every operation of Â the layers use ([`Spec::needs`]) supported.
    ///
    /// [`Spec::needs`]: crate::nn::layer::Spec::needs
    fn pass_workspace(
        &mut self,
        adj: &dyn Propagate<F>,
        x: &Features<F>,
        eval: bool,
    ) -> Result<Box<Workspace<F>>> {
        let (n, n_src) = adj.shape();
        if n != n_src {
            return Err(crate::Error::Mismatch {
                what: "Â's columns vs its rows (the stack runs on a whole graph's square Â)".into(),
                expected: n,
                got: n_src,
            });
        }
        if x.n_rows() != n {
            return Err(crate::Error::Mismatch {
                what: "feature rows vs Â's rows".into(),
                expected: n,
                got: x.n_rows(),
            });
        }
        let ws = self.workspace(&[n], x, eval)?;
        let checked = adj.caps().check(ws.plan.needs);
        if let Err(e) = checked {
            *self.slot(eval) = Some(ws);
            return Err(e.into());
        }
        Ok(ws)
    }

    /// A training pass: forward (dropout on, masks from `rng`), then `loss(z, sums)`, where
    /// `z` holds the logits and must be left holding ∂L/∂logits (every entry; the gradient is
    /// written over the logits, one n × classes buffer for both) and `sums` sums across nodes
    /// (in the pass's working memory), returning whether to go on, then (if so) backward,
    /// which **adds** every parameter's gradient.
    ///
    /// Any pass may run on another Â or other features than the last (DropEdge's samples,
    /// another graph): what the model keeps between passes is keyed on their ids
    /// ([`Propagate::id`], [`Features::id`]). A model whose [`StackOptions::varying_graph`] is
    /// set plans for an Â that changes from one training pass to the next.
    ///
    /// # Errors
    /// [`Error::Mismatch`](crate::Error::Mismatch) when Â is not square or the features have
    /// other rows, [`Error::Unsupported`](crate::Error::Unsupported) when Â's backend lacks an
    /// operation a layer uses, and what a layer reports.
    pub fn train_pass(
        &mut self,
        adj: &dyn Propagate<F>,
        x: &Features<F>,
        rng: &mut ChaCha8Rng,
        par: Par,
        loss: &mut dyn FnMut(ArrayViewMut2<'_, F>, Sums<'_, F>) -> bool,
    ) -> Result<()> {
        let mut ws = self.pass_workspace(adj, x, false)?;
        if self.streams == MaskStreams::PerLayer {
            ws.key = rng.next_u64();
        }
        let res = self.train_in(&mut ws, Graphs::Whole(adj), x, rng, par, loss);
        self.ws = Some(ws);
        res
    }

    /// The forward pass of an evaluation in `ws`, then `f` on the logits.
    fn eval_in(
        &mut self,
        ws: &mut Workspace<F>,
        g: Graphs<'_, F>,
        x: &Features<F>,
        par: Par,
        f: &mut dyn FnMut(ArrayView2<'_, F>, Sums<'_, F>),
    ) -> Result<()> {
        self.forward(ws, g, x, Mode::Eval, None, par, &mut |_, _| {})?;
        let n = g.rows(ws.plan.caps.len() - 1);
        let c = ws.plan.specs[ws.plan.specs.len() - 1].out_dim;
        let last = g.last();
        let sums = ws.sums.sums(last.collective(), last.rows());
        f(view(&ws.pool[ws.plan.out_slot], (n, c)), sums);
        Ok(())
    }

    /// [`Model::train_pass`] in its workspace.
    fn train_in(
        &mut self,
        ws: &mut Workspace<F>,
        g: Graphs<'_, F>,
        x: &Features<F>,
        rng: &mut ChaCha8Rng,
        par: Par,
        loss: &mut dyn FnMut(ArrayViewMut2<'_, F>, Sums<'_, F>) -> bool,
    ) -> Result<()> {
        self.forward(ws, g, x, Mode::Train, Some(&mut *rng), par, &mut |_, _| {})?;
        let n = g.rows(ws.plan.caps.len() - 1);
        let c = ws.plan.specs[ws.plan.specs.len() - 1].out_dim;
        let last = g.last();
        let go = {
            let Workspace {
                pool, plan, sums, ..
            } = ws;
            let mut dlogits = std::mem::take(&mut pool[plan.dlogits_slot]);
            if plan.dlogits_slot != plan.out_slot {
                // (Logits the model keeps, e.g. a constant last layer's: a copy.)
                dlogits[..n * c].copy_from_slice(&pool[plan.out_slot][..n * c]);
            }
            let sums = sums.sums(last.collective(), last.rows());
            let go = loss(view_mut(&mut dlogits, (n, c)), sums);
            pool[plan.dlogits_slot] = dlogits;
            go
        };
        if go {
            self.backward(ws, g, x, rng, par)?;
        }
        Ok(())
    }

    /// An evaluation pass (dropout off, running statistics): calls `f` on the logits and the
    /// pass's sums across nodes.
    ///
    /// # Errors
    /// As [`Model::train_pass`].
    pub fn eval_pass(
        &mut self,
        adj: &dyn Propagate<F>,
        x: &Features<F>,
        par: Par,
        f: &mut dyn FnMut(ArrayView2<'_, F>, Sums<'_, F>),
    ) -> Result<()> {
        let mut ws = self.pass_workspace(adj, x, true)?;
        let res = self.eval_in(&mut ws, Graphs::Whole(adj), x, par, f);
        *self.slot(true) = Some(ws);
        res
    }

    /// The logits of an evaluation pass, as a new array.
    ///
    /// # Errors
    /// As [`Model::train_pass`].
    pub fn predict(
        &mut self,
        adj: &dyn Propagate<F>,
        x: &Features<F>,
        par: Par,
    ) -> Result<ndarray::Array2<F>> {
        let mut out = None;
        self.eval_pass(adj, x, par, &mut |z, _| out = Some(z.to_owned()))?;
        Ok(out.unwrap_or_else(|| unreachable!("eval_pass calls back")))
    }

    /// An evaluation pass calling `f(l, H)` on each layer representation (the hidden layers'
    /// outputs, and the logits when the last layer is a graph convolution), in order.
    ///
    /// # Errors
    /// As [`Model::train_pass`].
    pub fn visit_representations(
        &mut self,
        adj: &dyn Propagate<F>,
        x: &Features<F>,
        par: Par,
        f: &mut dyn FnMut(usize, ArrayView2<'_, F>),
    ) -> Result<()> {
        let mut ws = self.pass_workspace(adj, x, true)?;
        let res = self.forward(&mut ws, Graphs::Whole(adj), x, Mode::Eval, None, par, f);
        *self.slot(true) = Some(ws);
        res
    }
}
