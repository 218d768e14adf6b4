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
//! layer calls run either way; only which buffers live how long differs.
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

use std::ops::Range;

use ndarray::{Array1, ArrayView2, ArrayViewMut2, Zip};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::layer::{view, view_mut, Bufs, Bwd, Cx, Din, Fwd, GradIo, InSlot, InputDesc, Inputs};
use super::layer::{Layer, Req, Saved, Value};
use super::param::Param;
use super::{Mode, ModelConfig, Order};
use crate::graph::{Features, Propagate, SparseFeatures};
use crate::kernels::MaskRng;
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
            ws: None,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The plan.

/// One step of a training pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ev {
    Input,
    Fwd(usize),
    Loss,
    Rec(usize),
    Bwd(usize),
}

/// A forward call (in the forward pass or a recomputation).
#[derive(Debug, Clone)]
struct Call {
    /// The inputs the layer reads (every input but the first for an in-place layer).
    ins: Vec<InSlot>,
    out: usize,
    /// An in-place layer whose input buffer cannot be taken over: copy input 0 first.
    copy_from: Option<InSlot>,
    saved: Option<usize>,
}

/// A backward call.
#[derive(Debug, Clone, Default)]
struct BwdCall {
    run: bool,
    /// The inputs (when the layer keeps them).
    ins: Vec<InSlot>,
    saved: Option<usize>,
    dout: usize,
    /// In-place gradient: whether ∂L/∂in is needed, and the buffer to add it into when it is
    /// not the first contribution (`None`: it stays in `dout`'s buffer, which becomes ∂L/∂in's).
    in_place: Option<(bool, Option<(usize, usize)>)>,
    /// Separate gradients: per input, where the layer writes it.
    din: Vec<Option<(usize, usize)>>,
    /// Accumulations after the call: (from, to, width).
    adds: Vec<(usize, usize, usize)>,
}

/// Interval bookkeeping of one pool.
#[derive(Debug, Default)]
struct Intervals {
    /// Per instance: start, end, size.
    inst: Vec<(usize, usize, usize)>,
    /// Per instance: the instance whose buffer it takes over at its start.
    handoff: Vec<Option<usize>>,
}

impl Intervals {
    fn add(&mut self, start: usize, end: usize, size: usize) -> usize {
        self.inst.push((start, end, size));
        self.handoff.push(None);
        self.inst.len() - 1
    }
    fn extend(&mut self, i: usize, t: usize) {
        self.inst[i].1 = self.inst[i].1.max(t);
    }
    /// Assigns a buffer to every instance (greedy by start time, best fit); returns each
    /// instance's buffer and each buffer's size.
    fn assign(&self) -> (Vec<usize>, Vec<usize>) {
        let mut order: Vec<usize> = (0..self.inst.len()).collect();
        order.sort_by_key(|&i| (self.inst[i].0, i));
        let mut slot_of = vec![usize::MAX; self.inst.len()];
        let mut cap: Vec<usize> = Vec::new();
        let mut busy_until: Vec<usize> = Vec::new();
        for i in order {
            let (start, end, size) = self.inst[i];
            let slot = match self.handoff[i] {
                Some(j) => slot_of[j],
                None => {
                    let free = (0..cap.len()).filter(|&s| busy_until[s] < start);
                    let fit = free
                        .clone()
                        .filter(|&s| cap[s] >= size)
                        .min_by_key(|&s| cap[s]);
                    match fit.or_else(|| free.max_by_key(|&s| cap[s])) {
                        Some(s) => s,
                        None => {
                            cap.push(0);
                            busy_until.push(0);
                            cap.len() - 1
                        }
                    }
                }
            };
            slot_of[i] = slot;
            cap[slot] = cap[slot].max(size);
            busy_until[slot] = busy_until[slot].max(end);
        }
        (slot_of, cap)
    }
}

/// What one pass on `n` rows needs, computed once.
#[derive(Debug)]
struct Plan {
    n: usize,
    x_sparse: bool,
    x_cols: usize,
    events: Vec<Ev>,
    fwd: Vec<Call>,
    rec: Vec<Option<Call>>,
    bwd: Vec<BwdCall>,
    /// The dense X̃ buffer (dense features with input dropout).
    xd_slot: Option<usize>,
    out_slot: usize,
    dlogits_slot: usize,
    /// Node outputs computed once on the fixed input (constant layers).
    constant: Vec<bool>,
    /// Whether a node's inputs are all fixed in a training / an evaluation pass.
    fixed_train: Vec<bool>,
    fixed_eval: Vec<bool>,
    /// Index of each mask-drawing node among the sites (Shared streams), +1 for the input.
    site_index: Vec<Option<usize>>,
    n_sites: usize,
    val_sizes: Vec<usize>,
    saved_sizes: Vec<Req>,
    grad_sizes: Vec<usize>,
    scratch: Req,
}

/// The buffers of a model's passes.
#[derive(Debug)]
struct Workspace<F> {
    plan: Plan,
    vals: Vec<Vec<F>>,
    saved_f: Vec<Vec<F>>,
    saved_u8: Vec<Vec<u8>>,
    saved_f64: Vec<Vec<f64>>,
    grads: Vec<Vec<F>>,
    scratch_f: Vec<F>,
    scratch_u8: Vec<u8>,
    scratch_f64: Vec<f64>,
    /// Dropped sparse features (the pattern of X).
    xd_sparse: Option<SparseFeatures<F>>,
    /// Stream positions of the mask sites in the last training pass (Shared streams).
    positions: Vec<u128>,
    /// The pass's key (PerLayer streams).
    key: u64,
    /// Constant outputs computed on the fixed input and the model's own Â.
    const_valid: Vec<bool>,
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
        Model {
            config,
            nodes,
            input_dropout,
            input_site,
            taps,
            streams,
            segments,
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

    /// Frees the buffers of the passes and what the layers computed from the data; call it
    /// before passing other data (other features or another graph).
    pub fn release(&mut self) {
        self.ws = None;
        for node in &mut self.nodes {
            node.layer.release();
        }
    }

    // -----------------------------------------------------------------------------------------
    // Planning.

    fn need_grad(&mut self) -> Vec<bool> {
        let mut need = vec![false; self.nodes.len()];
        for i in 0..self.nodes.len() {
            let mut has = false;
            self.nodes[i].layer.visit_params(&mut |_, _| has = true);
            need[i] = has
                || self.nodes[i]
                    .inputs
                    .iter()
                    .any(|s| matches!(s, Src::Node(j) if need[*j]));
        }
        need
    }

    fn plan(&mut self, n: usize, x: &Features<F>) -> Plan {
        let n_nodes = self.nodes.len();
        let xd_dropped = self.input_dropout > 0.0;
        let x_sparse = x.is_sparse();
        let drop_edge = self.config.drop_edge > 0.0;
        let need = self.need_grad();
        // Which inputs are fixed (the raw features on the model's Â) in each kind of pass.
        let mut fixed_train = vec![false; n_nodes];
        let mut fixed_eval = vec![false; n_nodes];
        let mut out_fixed_train = vec![false; n_nodes];
        let mut out_fixed_eval = vec![false; n_nodes];
        let constant: Vec<bool> = self.nodes.iter().map(|n| n.layer.constant()).collect();
        for i in 0..n_nodes {
            let fixed = |s: &Src, train: bool, out: &[bool]| match s {
                Src::X => true,
                Src::Xd => !train || !xd_dropped,
                Src::Node(j) => out[*j],
            };
            let ins = &self.nodes[i].inputs;
            fixed_train[i] = !drop_edge && ins.iter().all(|s| fixed(s, true, &out_fixed_train));
            fixed_eval[i] = ins.iter().all(|s| fixed(s, false, &out_fixed_eval));
            out_fixed_train[i] = constant[i] && fixed_train[i];
            out_fixed_eval[i] = constant[i] && fixed_eval[i];
        }
        // Bind the layers.
        for i in 0..n_nodes {
            let descs: Vec<InputDesc> = self.nodes[i]
                .inputs
                .iter()
                .map(|s| InputDesc {
                    sparse: x_sparse && matches!(s, Src::X | Src::Xd),
                    fixed_in_training: !drop_edge
                        && match s {
                            Src::X => true,
                            Src::Xd => !xd_dropped,
                            Src::Node(j) => out_fixed_train[*j],
                        },
                })
                .collect();
            self.nodes[i].layer.bind(&descs);
        }
        let width = |s: &Src, nodes: &[Node<F>]| match s {
            Src::X | Src::Xd => x.n_cols(),
            Src::Node(j) => nodes[*j].layer.out_dim(),
        };
        // Events.
        let seg_of: Vec<Option<usize>> = (0..n_nodes)
            .map(|i| self.segments.iter().position(|s| s.contains(&i)))
            .collect();
        let mut events = vec![Ev::Input];
        events.extend((0..n_nodes).map(Ev::Fwd));
        events.push(Ev::Loss);
        let mut i = n_nodes;
        while i > 0 {
            i -= 1;
            if let Some(s) = seg_of[i] {
                if self.segments[s].end == i + 1 {
                    events.extend(self.segments[s].clone().map(Ev::Rec));
                }
            }
            events.push(Ev::Bwd(i));
        }
        let mut t_fwd = vec![0; n_nodes];
        let mut t_rec = vec![usize::MAX; n_nodes];
        let mut t_bwd = vec![0; n_nodes];
        let mut t_loss = 0;
        for (t, e) in events.iter().enumerate() {
            match *e {
                Ev::Fwd(i) => t_fwd[i] = t,
                Ev::Rec(i) => t_rec[i] = t,
                Ev::Bwd(i) => t_bwd[i] = t,
                Ev::Loss => t_loss = t,
                Ev::Input => {}
            }
        }
        let t_end = events.len();
        // Value instances: Fwd of every node (and X̃), Rec of checkpointed nodes.
        let mut vals = Intervals::default();
        let xd_inst = (xd_dropped && !x_sparse).then(|| vals.add(0, 0, n * x.n_cols()));
        let mut fwd_inst = vec![usize::MAX; n_nodes];
        let mut rec_inst = vec![None; n_nodes];
        for i in 0..n_nodes {
            let size = n * self.nodes[i].layer.out_dim();
            fwd_inst[i] = if constant[i] {
                vals.add(0, t_end, size)
            } else {
                vals.add(t_fwd[i], t_fwd[i], size)
            };
        }
        for i in 0..n_nodes {
            if seg_of[i].is_some() && !constant[i] {
                let size = n * self.nodes[i].layer.out_dim();
                rec_inst[i] = Some(vals.add(t_rec[i], t_rec[i], size));
            }
        }
        // The instance consumer `c` reads for `src` at its forward (`rec = false`) or at its
        // recomputation and backward (`rec = true`).
        let inst_of = |src: &Src, c: usize, rec: bool, rec_inst: &[Option<usize>]| match src {
            Src::X => None,
            Src::Xd => xd_inst,
            Src::Node(u) => {
                if rec && seg_of[c].is_some() && seg_of[*u] == seg_of[c] {
                    rec_inst[*u].or(Some(fwd_inst[*u]))
                } else {
                    Some(fwd_inst[*u])
                }
            }
        };
        for c in 0..n_nodes {
            let keeps = self.nodes[c].layer.keeps_input();
            for src in &self.nodes[c].inputs {
                if let Some(k) = inst_of(src, c, false, &rec_inst) {
                    vals.extend(k, t_fwd[c]);
                }
                if seg_of[c].is_some() {
                    if let Some(k) = inst_of(src, c, true, &rec_inst) {
                        vals.extend(k, t_rec[c]);
                    }
                }
                if keeps {
                    if let Some(k) = inst_of(src, c, true, &rec_inst) {
                        vals.extend(k, t_bwd[c]);
                    }
                }
            }
        }
        vals.extend(fwd_inst[n_nodes - 1], t_loss);
        // A stored value (read outside its segment) is recomputed into its own buffer.
        for i in 0..n_nodes {
            if let Some(r) = rec_inst[i] {
                if vals.inst[fwd_inst[i]].1 >= t_rec[i] {
                    let end = vals.inst[r].1;
                    vals.extend(fwd_inst[i], end);
                    vals.inst[r] = (t_rec[i], t_rec[i], 0);
                    rec_inst[i] = None;
                }
            }
        }
        // In place: take over the input's buffer when nothing reads it later.
        let mut takes_over = vec![false; n_nodes];
        let mut takes_over_rec = vec![false; n_nodes];
        for c in 0..n_nodes {
            if !self.nodes[c].layer.in_place() || constant[c] {
                continue;
            }
            let src = self.nodes[c].inputs[0];
            if let Some(k) = inst_of(&src, c, false, &rec_inst) {
                if vals.inst[k].1 == t_fwd[c] && !matches!(src, Src::Node(u) if constant[u]) {
                    vals.handoff[fwd_inst[c]] = Some(k);
                    takes_over[c] = true;
                }
            }
            if let (Some(r), Some(k)) = (rec_inst[c], inst_of(&src, c, true, &rec_inst)) {
                if vals.inst[k].1 == t_rec[c] && !matches!(src, Src::Node(u) if constant[u]) {
                    vals.handoff[r] = Some(k);
                    takes_over_rec[c] = true;
                }
            }
        }
        let (val_slot, val_sizes) = vals.assign();
        let in_slot = |src: &Src, c: usize, rec: bool, rec_inst: &[Option<usize>]| match src {
            Src::X => InSlot::X,
            Src::Xd => InSlot::Xd,
            Src::Node(_) => InSlot::Buf {
                slot: val_slot[inst_of(src, c, rec, rec_inst).unwrap_or_else(|| unreachable!())],
                width: width(src, &self.nodes),
            },
        };
        // Saved instances.
        let mut saved = Intervals::default();
        let mut saved_req: Vec<Req> = Vec::new();
        let mut fwd_saved = vec![None; n_nodes];
        let mut rec_saved = vec![None; n_nodes];
        for i in 0..n_nodes {
            let req = self.nodes[i].layer.saved(n);
            if req.is_empty() {
                continue;
            }
            let end = if seg_of[i].is_some() {
                t_fwd[i]
            } else {
                t_bwd[i]
            };
            fwd_saved[i] = Some(saved.add(t_fwd[i], end, 0));
            saved_req.push(req);
            if seg_of[i].is_some() {
                rec_saved[i] = Some(saved.add(t_rec[i], t_bwd[i], 0));
                saved_req.push(req);
            }
        }
        // Sizes by component: assign with the total as the size, then take maxima per slot.
        for (k, r) in saved_req.iter().enumerate() {
            saved.inst[k].2 = r.f + r.u8 + r.f64;
        }
        let (saved_slot, saved_cap) = saved.assign();
        let mut saved_sizes = vec![Req::default(); saved_cap.len()];
        for (k, r) in saved_req.iter().enumerate() {
            let s = &mut saved_sizes[saved_slot[k]];
            *s = s.max(*r);
        }
        // Calls.
        let call = |c: usize, rec: bool, rec_inst: &[Option<usize>]| {
            let node = &self.nodes[c];
            let in_place = node.layer.in_place() && !constant[c];
            let skip = usize::from(in_place);
            let ins = node.inputs[skip..]
                .iter()
                .map(|s| in_slot(s, c, rec, rec_inst))
                .collect();
            let out_inst = if rec {
                rec_inst[c].unwrap_or(fwd_inst[c])
            } else {
                fwd_inst[c]
            };
            let took = if rec {
                takes_over_rec[c]
            } else {
                takes_over[c]
            };
            Call {
                ins,
                out: val_slot[out_inst],
                copy_from: (in_place && !took).then(|| in_slot(&node.inputs[0], c, rec, rec_inst)),
                saved: if rec { rec_saved[c] } else { fwd_saved[c] }.map(|k| saved_slot[k]),
            }
        };
        let fwd: Vec<Call> = (0..n_nodes).map(|c| call(c, false, &rec_inst)).collect();
        let rec: Vec<Option<Call>> = (0..n_nodes)
            .map(|c| seg_of[c].map(|_| call(c, true, &rec_inst)))
            .collect();
        // Gradient instances: from the first contribution (or the loss) to the producer's
        // backward call. An in-place backward hands its buffer to its input's gradient when it
        // is the first contribution; later contributions go through a temporary and an add.
        let runs = need.clone();
        let mut grads = Intervals::default();
        let mut g_inst: Vec<Option<usize>> = vec![None; n_nodes];
        let last = n_nodes - 1;
        let dlogits = grads.add(t_loss, t_bwd[last], n * self.nodes[last].layer.out_dim());
        g_inst[last] = Some(dlogits);
        // Per node: in-place (needed, add into), separate targets, adds (from, to).
        let mut ip_plan: Vec<Option<(bool, Option<usize>)>> = vec![None; n_nodes];
        let mut din_plan: Vec<Vec<Option<usize>>> = vec![Vec::new(); n_nodes];
        let mut add_plan: Vec<Vec<(usize, usize, usize)>> = vec![Vec::new(); n_nodes];
        for c in (0..n_nodes).rev() {
            if !runs[c] {
                continue;
            }
            let node = &self.nodes[c];
            let dout = g_inst[c].unwrap_or_else(|| unreachable!("the gradient of node {c}"));
            if node.layer.grad_in_place() {
                let src = node.inputs[0];
                let mut plan_ip = (false, None);
                if let Src::Node(u) = src {
                    if need[u] {
                        let in_size = n * self.nodes[u].layer.out_dim();
                        grads.inst[dout].2 = grads.inst[dout].2.max(in_size);
                        match g_inst[u] {
                            None => {
                                let gi = grads.add(t_bwd[c], t_bwd[u], in_size);
                                grads.handoff[gi] = Some(dout);
                                g_inst[u] = Some(gi);
                                plan_ip = (true, None);
                            }
                            Some(gi) => plan_ip = (true, Some(gi)),
                        }
                    }
                }
                ip_plan[c] = Some(plan_ip);
            } else {
                let mut dins = vec![None; node.inputs.len()];
                for (k, src) in node.inputs.iter().enumerate() {
                    let Src::Node(u) = *src else { continue };
                    if !need[u] {
                        continue;
                    }
                    let w = self.nodes[u].layer.out_dim();
                    match g_inst[u] {
                        None => {
                            let gi = grads.add(t_bwd[c], t_bwd[u], n * w);
                            g_inst[u] = Some(gi);
                            dins[k] = Some(gi);
                        }
                        Some(gi) => {
                            let tmp = grads.add(t_bwd[c], t_bwd[c], n * w);
                            dins[k] = Some(tmp);
                            add_plan[c].push((tmp, gi, w));
                        }
                    }
                }
                din_plan[c] = dins;
            }
        }
        // A handed-over buffer must be as large as both ends.
        for i in 0..grads.inst.len() {
            if let Some(j) = grads.handoff[i] {
                let s = grads.inst[i].2.max(grads.inst[j].2);
                grads.inst[i].2 = s;
                grads.inst[j].2 = s;
            }
        }
        let (grad_slot, grad_sizes) = grads.assign();
        let bwd: Vec<BwdCall> = (0..n_nodes)
            .map(|c| {
                let node = &self.nodes[c];
                if !runs[c] {
                    return BwdCall::default();
                }
                let widths: Vec<usize> =
                    node.inputs.iter().map(|s| width(s, &self.nodes)).collect();
                BwdCall {
                    run: true,
                    ins: if node.layer.keeps_input() {
                        node.inputs
                            .iter()
                            .map(|s| in_slot(s, c, true, &rec_inst))
                            .collect()
                    } else {
                        Vec::new()
                    },
                    saved: if seg_of[c].is_some() {
                        rec_saved[c]
                    } else {
                        fwd_saved[c]
                    }
                    .map(|k| saved_slot[k]),
                    dout: g_inst[c].map_or(usize::MAX, |g| grad_slot[g]),
                    in_place: ip_plan[c]
                        .map(|(need_in, add)| (need_in, add.map(|gi| (grad_slot[gi], widths[0])))),
                    din: din_plan[c]
                        .iter()
                        .zip(&widths)
                        .map(|(d, &w)| d.map(|gi| (grad_slot[gi], w)))
                        .collect(),
                    adds: add_plan[c]
                        .iter()
                        .map(|&(from, to, w)| (grad_slot[from], grad_slot[to], w))
                        .collect(),
                }
            })
            .collect();
        // Scratch: the largest request.
        let scratch = self
            .nodes
            .iter()
            .map(|nd| nd.layer.scratch(n))
            .fold(Req::default(), Req::max);
        // Mask sites (Shared streams): the input, then every mask-drawing node.
        let mut n_sites = usize::from(xd_dropped);
        let site_index = self
            .nodes
            .iter()
            .map(|nd| {
                nd.layer.draws_mask().then(|| {
                    n_sites += 1;
                    n_sites - 1
                })
            })
            .collect();
        Plan {
            n,
            x_sparse,
            x_cols: x.n_cols(),
            events,
            out_slot: fwd[n_nodes - 1].out,
            dlogits_slot: grad_slot[dlogits],
            fwd,
            rec,
            bwd,
            xd_slot: xd_inst.map(|k| val_slot[k]),
            constant,
            fixed_train,
            fixed_eval,
            site_index,
            n_sites,
            val_sizes,
            saved_sizes,
            grad_sizes,
            scratch,
        }
    }

    /// The workspace for `n` rows and these features, planned and allocated on first use.
    fn workspace(&mut self, n: usize, x: &Features<F>) -> Box<Workspace<F>> {
        if let Some(ws) = self.ws.take() {
            let p = &ws.plan;
            if p.n == n && p.x_sparse == x.is_sparse() && p.x_cols == x.n_cols() {
                return ws;
            }
        }
        let plan = self.plan(n, x);
        let zeros = |len: usize| vec![F::zero(); len];
        Box::new(Workspace {
            vals: plan.val_sizes.iter().map(|&s| zeros(s)).collect(),
            saved_f: plan.saved_sizes.iter().map(|r| zeros(r.f)).collect(),
            saved_u8: plan.saved_sizes.iter().map(|r| vec![0u8; r.u8]).collect(),
            saved_f64: plan.saved_sizes.iter().map(|r| vec![0f64; r.f64]).collect(),
            grads: plan.grad_sizes.iter().map(|&s| zeros(s)).collect(),
            scratch_f: zeros(plan.scratch.f),
            scratch_u8: vec![0u8; plan.scratch.u8],
            scratch_f64: vec![0f64; plan.scratch.f64],
            xd_sparse: match x {
                Features::Sparse(s) if self.input_dropout > 0.0 => Some(s.clone()),
                _ => None,
            },
            positions: vec![0; plan.n_sites],
            key: 0,
            const_valid: vec![false; self.nodes.len()],
            plan,
        })
    }

    // -----------------------------------------------------------------------------------------
    // Passes.

    /// A training pass: forward (dropout on, masks from `rng`), then `loss(logits, dlogits)`,
    /// which must write ∂L/∂logits into `dlogits` (every entry) and returns whether to go on,
    /// then (if so) backward, which **adds** every parameter's gradient. `adj` may be another
    /// Â than the model's own for each pass (DropEdge's samples; `base_adj = false`), with the
    /// same nodes.
    #[allow(clippy::too_many_arguments)]
    pub fn train_pass(
        &mut self,
        adj: &dyn Propagate<F>,
        base_adj: bool,
        x: &Features<F>,
        rng: &mut ChaCha8Rng,
        par: Par,
        loss: &mut dyn FnMut(ArrayView2<'_, F>, ArrayViewMut2<'_, F>) -> bool,
    ) {
        let mut ws = self.workspace(adj.n_rows(), x);
        if self.streams == MaskStreams::PerLayer {
            ws.key = rng.next_u64();
        }
        self.forward(
            &mut ws,
            adj,
            base_adj,
            x,
            Mode::Train,
            Some(rng),
            par,
            &mut |_, _| {},
        );
        let n = ws.plan.n;
        let c = self.nodes[self.nodes.len() - 1].layer.out_dim();
        let go = {
            let Workspace {
                vals, grads, plan, ..
            } = &mut *ws;
            let logits = view(&vals[plan.out_slot], (n, c));
            loss(logits, view_mut(&mut grads[plan.dlogits_slot], (n, c)))
        };
        if go {
            self.backward(&mut ws, adj, base_adj, x, rng, par);
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
        self.forward(&mut ws, adj, true, x, Mode::Eval, None, par, &mut |_, _| {});
        let n = ws.plan.n;
        let c = self.nodes[self.nodes.len() - 1].layer.out_dim();
        f(view(&ws.vals[ws.plan.out_slot], (n, c)));
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
        self.forward(&mut ws, adj, true, x, Mode::Eval, None, par, f);
        self.ws = Some(ws);
    }

    /// The stream of the mask of `node` (or of the input for `None`) in this pass: under
    /// Shared streams the caller's stream (its position recorded) or, when recomputing, a copy
    /// set to the recorded position; under PerLayer streams the site's stream of the pass's key.
    fn site_rng<'r>(
        &self,
        ws: &mut Workspace<F>,
        node: Option<usize>,
        rec: bool,
        shared: &'r mut ChaCha8Rng,
        local: &'r mut ChaCha8Rng,
    ) -> &'r mut ChaCha8Rng {
        match self.streams {
            MaskStreams::Shared => {
                let idx = match node {
                    None => 0,
                    Some(i) => ws.plan.site_index[i].unwrap_or_else(|| unreachable!("a site")),
                };
                if rec {
                    *local = shared.clone();
                    local.set_word_pos(ws.positions[idx]);
                    local
                } else {
                    ws.positions[idx] = shared.get_word_pos();
                    shared
                }
            }
            MaskStreams::PerLayer => {
                let site = match node {
                    None => self.input_site,
                    Some(i) => self.nodes[i].site,
                };
                *local = ChaCha8Rng::seed_from_u64(ws.key);
                local.set_stream(site);
                local
            }
        }
    }

    /// The forward calls (and the input dropout), in training or evaluation mode; `visit` is
    /// called on each representation.
    #[allow(clippy::too_many_arguments)]
    fn forward(
        &mut self,
        ws: &mut Workspace<F>,
        adj: &dyn Propagate<F>,
        base_adj: bool,
        x: &Features<F>,
        mode: Mode,
        mut rng: Option<&mut ChaCha8Rng>,
        par: Par,
        visit: &mut dyn FnMut(usize, ArrayView2<'_, F>),
    ) {
        let train = mode == Mode::Train;
        let mut local = ChaCha8Rng::seed_from_u64(0);
        if train && self.input_dropout > 0.0 {
            let shared = rng
                .as_deref_mut()
                .unwrap_or_else(|| unreachable!("a training RNG"));
            let r = self.site_rng(ws, None, false, shared, &mut local);
            drop_input(ws, x, self.input_dropout, r, par);
        }
        let mut tap = 0;
        for i in 0..self.nodes.len() {
            let fixed = base_adj
                && if train {
                    ws.plan.fixed_train[i]
                } else {
                    ws.plan.fixed_eval[i]
                };
            let skip = ws.plan.constant[i] && fixed && ws.const_valid[i];
            if ws.plan.constant[i] {
                ws.const_valid[i] = fixed;
            }
            if !skip {
                let r = match rng.as_deref_mut() {
                    Some(shared) if train && self.nodes[i].layer.draws_mask() => {
                        Some(self.site_rng(ws, Some(i), false, shared, &mut local))
                    }
                    _ => None,
                };
                let flags = Flags {
                    mode,
                    base_adj,
                    fixed,
                    recompute: false,
                };
                run_forward(&mut self.nodes[i], i, ws, adj, x, flags, r, par);
            }
            if self.taps.get(tap) == Some(&i) {
                let w = self.nodes[i].layer.out_dim();
                let slot = ws.plan.fwd[i].out;
                visit(tap, view(&ws.vals[slot], (ws.plan.n, w)));
                tap += 1;
            }
        }
    }

    /// The backward calls, with the recomputation of checkpointed segments.
    fn backward(
        &mut self,
        ws: &mut Workspace<F>,
        adj: &dyn Propagate<F>,
        base_adj: bool,
        x: &Features<F>,
        rng: &mut ChaCha8Rng,
        par: Par,
    ) {
        let mut local = ChaCha8Rng::seed_from_u64(0);
        let n_events = ws.plan.events.len();
        let loss_at = ws
            .plan
            .events
            .iter()
            .position(|e| *e == Ev::Loss)
            .unwrap_or(n_events);
        for t in loss_at + 1..n_events {
            match ws.plan.events[t] {
                Ev::Rec(i) => {
                    let r = if self.nodes[i].layer.draws_mask() {
                        Some(self.site_rng(ws, Some(i), true, rng, &mut local))
                    } else {
                        None
                    };
                    let flags = Flags {
                        mode: Mode::Train,
                        base_adj,
                        fixed: base_adj && ws.plan.fixed_train[i],
                        recompute: true,
                    };
                    run_forward(&mut self.nodes[i], i, ws, adj, x, flags, r, par);
                }
                Ev::Bwd(i) if ws.plan.bwd[i].run => {
                    let fixed = base_adj && ws.plan.fixed_train[i];
                    run_backward(&mut self.nodes[i], i, ws, adj, base_adj, fixed, x, par);
                }
                _ => {}
            }
        }
    }
}

/// The mode flags of a forward call.
#[derive(Debug, Clone, Copy)]
struct Flags {
    mode: Mode,
    base_adj: bool,
    fixed: bool,
    recompute: bool,
}

/// X̃ = X ⊙ M into the workspace's X̃ buffer, with M drawn from `rng` (in element order for
/// dense X, in stored order for sparse X).
fn drop_input<F: Scalar>(
    ws: &mut Workspace<F>,
    x: &Features<F>,
    p: f64,
    rng: &mut ChaCha8Rng,
    par: Par,
) {
    match x {
        Features::Dense(d) => {
            let slot = ws
                .plan
                .xd_slot
                .unwrap_or_else(|| unreachable!("X̃'s buffer"));
            let buf = &mut ws.vals[slot][..d.len()];
            rng.fill_dropout_mask(p, buf, par);
            Zip::from(view_mut(buf, d.dim()))
                .and(d)
                .for_each(|o, &v| *o = v * *o);
        }
        Features::Sparse(s) => {
            let buf = ws
                .xd_sparse
                .as_mut()
                .unwrap_or_else(|| unreachable!("X̃'s buffer"));
            let vals = buf.values_mut();
            rng.fill_dropout_mask(p, vals, par);
            for (o, &v) in vals.iter_mut().zip(s.x().data()) {
                *o = v * *o;
            }
            buf.sync_transpose();
        }
    }
}

/// The features as a value.
fn x_value<F: Scalar>(x: &Features<F>) -> Value<'_, F> {
    match x {
        Features::Dense(d) => Value::Dense(d.view()),
        Features::Sparse(s) => Value::Sparse(s.x(), s.x_t()),
    }
}

/// X̃ of a pass: the dropped features in a training pass with input dropout (a dense buffer of
/// the pool, or the sparse copy), X otherwise.
fn xd_value<'a, F: Scalar>(
    plan: &Plan,
    vals: &'a [Vec<F>],
    x: &'a Features<F>,
    xd_sparse: &'a Option<SparseFeatures<F>>,
    train: bool,
) -> Value<'a, F> {
    match (train, plan.xd_slot, xd_sparse) {
        (true, Some(slot), _) => Value::Dense(view(&vals[slot], (plan.n, plan.x_cols))),
        (true, None, Some(s)) => Value::Sparse(s.x(), s.x_t()),
        _ => x_value(x),
    }
}

/// One forward call of node `i` (or its recomputation) into its planned buffers.
#[allow(clippy::too_many_arguments)]
fn run_forward<F: Scalar>(
    node: &mut Node<F>,
    i: usize,
    ws: &mut Workspace<F>,
    adj: &dyn Propagate<F>,
    x: &Features<F>,
    flags: Flags,
    rng: Option<&mut ChaCha8Rng>,
    par: Par,
) {
    let Workspace {
        plan,
        vals,
        saved_f,
        saved_u8,
        saved_f64,
        scratch_f,
        scratch_u8,
        scratch_f64,
        xd_sparse,
        ..
    } = ws;
    let call = if flags.recompute {
        plan.rec[i]
            .as_ref()
            .unwrap_or_else(|| unreachable!("a recomputed node"))
    } else {
        &plan.fwd[i]
    };
    let n = plan.n;
    let w = node.layer.out_dim();
    let train = flags.mode == Mode::Train;
    // The output buffer leaves the pool while the inputs are borrowed from it.
    let mut out_buf = std::mem::take(&mut vals[call.out]);
    // (Only a node that reads X̃ may look at its buffer: another may be reusing it.)
    let reads_xd = node.inputs.contains(&Src::Xd);
    let xd = xd_value(plan, vals, x, xd_sparse, train && reads_xd);
    if let Some(src) = call.copy_from {
        let mut out = view_mut(&mut out_buf, (n, w));
        match src {
            InSlot::X => out.assign(&x_value(x).dense()),
            InSlot::Xd => out.assign(&xd.dense()),
            InSlot::Buf { slot, width } => out.assign(&view(&vals[slot], (n, width))),
        }
    }
    let empty = (&mut [][..], &mut [][..], &mut [][..]);
    let saved = match call.saved {
        Some(s) => Bufs {
            f: &mut saved_f[s][..],
            u8: &mut saved_u8[s][..],
            f64: &mut saved_f64[s][..],
        },
        None => Bufs {
            f: empty.0,
            u8: empty.1,
            f64: empty.2,
        },
    };
    let mut cx = Cx {
        adj,
        par,
        mode: flags.mode,
        rng,
        recompute: flags.recompute,
        fixed_input: flags.fixed,
        base_adj: flags.base_adj,
        need_din: false,
    };
    node.layer.forward(
        &mut cx,
        Fwd {
            ins: Inputs {
                pool: vals,
                slots: &call.ins,
                n,
                x: x_value(x),
                xd,
            },
            out: view_mut(&mut out_buf, (n, w)),
            saved,
            scratch: Bufs {
                f: scratch_f,
                u8: scratch_u8,
                f64: scratch_f64,
            },
        },
    );
    vals[call.out] = out_buf;
}

/// One backward call of node `i`, then the accumulations into its inputs' gradients.
#[allow(clippy::too_many_arguments)]
fn run_backward<F: Scalar>(
    node: &mut Node<F>,
    i: usize,
    ws: &mut Workspace<F>,
    adj: &dyn Propagate<F>,
    base_adj: bool,
    fixed: bool,
    x: &Features<F>,
    par: Par,
) {
    let Workspace {
        plan,
        vals,
        saved_f,
        saved_u8,
        saved_f64,
        grads,
        scratch_f,
        scratch_u8,
        scratch_f64,
        xd_sparse,
        ..
    } = ws;
    let b = &plan.bwd[i];
    let n = plan.n;
    let out_w = node.layer.out_dim();
    let ins = Inputs {
        pool: vals,
        slots: &b.ins,
        n,
        x: x_value(x),
        xd: xd_value(plan, vals, x, xd_sparse, node.inputs.contains(&Src::Xd)),
    };
    let saved = match b.saved {
        Some(s) => Saved {
            f: &saved_f[s][..],
            u8: &saved_u8[s][..],
            f64: &saved_f64[s][..],
        },
        None => Saved::default(),
    };
    let scratch = Bufs {
        f: &mut scratch_f[..],
        u8: &mut scratch_u8[..],
        f64: &mut scratch_f64[..],
    };
    let mut dout_buf = std::mem::take(&mut grads[b.dout]);
    match b.in_place {
        Some((need_in, add)) => {
            let mut cx = Cx {
                adj,
                par,
                mode: Mode::Train,
                rng: None,
                recompute: false,
                fixed_input: fixed,
                base_adj,
                need_din: need_in,
            };
            node.layer.backward(
                &mut cx,
                Bwd {
                    ins,
                    saved,
                    scratch,
                    grad: GradIo::InPlace(&mut dout_buf),
                },
            );
            if let (true, Some((to, w))) = (need_in, add) {
                add_into(&mut grads[to][..n * w], &dout_buf[..n * w]);
            }
        }
        None => {
            let mut cx = Cx {
                adj,
                par,
                mode: Mode::Train,
                rng: None,
                recompute: false,
                fixed_input: fixed,
                base_adj,
                need_din: false,
            };
            node.layer.backward(
                &mut cx,
                Bwd {
                    ins,
                    saved,
                    scratch,
                    grad: GradIo::Separate {
                        dout: view(&dout_buf, (n, out_w)),
                        din: Din {
                            pool: grads,
                            slots: &b.din,
                            n,
                        },
                    },
                },
            );
            for &(from, to, w) in &b.adds {
                let src = std::mem::take(&mut grads[from]);
                add_into(&mut grads[to][..n * w], &src[..n * w]);
                grads[from] = src;
            }
        }
    }
    grads[b.dout] = dout_buf;
}

/// dst ← dst + src, element by element.
fn add_into<F: Scalar>(dst: &mut [F], src: &[F]) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = *d + s;
    }
}
