//! The [`Layer`] trait: what every layer of the [`Model`](super::Model) stack implements, and
//! the types a layer call sees.
//!
//! # A layer declares, the stack decides
//! One pure call, [`Layer::spec`], says everything the stack's planner needs to know of a layer
//! on given inputs ([`InputDesc`]) and n rows: its output width, whether it works in place,
//! how backward hands gradients ([`GradMode`]), whether backward reads its inputs, whether its
//! output is a function of Â and the features alone, whether it draws a dropout mask, what it
//! saves for backward and what temporaries it needs, and which optional operations of Â it
//! uses. The planner decides from these (which buffer holds what, when a gradient is left over
//! the input) and tells each call what it decided through the call's arguments; nothing is set
//! on the layer.
//!
//! # Buffers are the caller's
//! A layer allocates nothing while the model trains. What it saves and its temporaries are
//! [`Req`]s of f32/f64 elements (`f`), bytes (`u8`) and f64 values (`f64`); the stack sizes its
//! buffers once from these requests and hands each call exactly the slices it asked for
//! ([`Bufs`]). This is faer's `*_scratch` → `StackReq` + `MemStack` pattern. What a layer holds
//! across passes is only its parameters and what depends on the data alone (a sparse product's
//! pattern, Â·X of fixed features), keyed on the data's identity ([`InputKey`]).
//!
//! # Values
//! Inputs are [`Value`]s: dense n × d views, or the sparse features (X with its transpose).
//! Outputs are dense, written into the view the stack passes. A layer that works in place
//! ([`Spec::in_place`]) receives its (first) input already in its output buffer.
//!
//! # Gradients
//! Backward **adds** parameter gradients into [`Param::grad`] and **writes** (never adds) the
//! input gradients the stack asks for: the stack accumulates contributions of several consumers
//! itself. See [`GradMode`] and [`GradIo`] for the three ways gradients are handed over.
//!
//! # Reaching Â
//! Only through [`Cx::adj`], a [`Propagate`] (products with Â and Âᵀ), and every sum across
//! nodes (weight and bias gradients, statistics) through [`Cx::sums`]. A layer never reads CSR
//! arrays of Â. Forward and backward return a [`Result`]: an operation the backend lacks is an
//! [`Unsupported`](crate::graph::Unsupported) error (the stack checks [`Spec::needs`] against
//! the backend before a pass, so a layer that declares what it uses never meets one).

use std::fmt;

use ndarray::{Array1, ArrayView2, ArrayViewMut2};
use rand_chacha::ChaCha8Rng;

use super::param::Param;
use super::Mode;
use crate::graph::{Caps, Propagate, Sums};
use crate::id::DataId;
use crate::kernels::{gemm, spmm, CsrView};
use crate::{Par, Result, Scalar};

/// A layer input: dense n × d, or sparse features with their transpose.
#[derive(Debug, Clone, Copy)]
pub enum Value<'a, F> {
    /// Dense n × d (row-major).
    Dense(ArrayView2<'a, F>),
    /// Sparse n × d features X and Xᵀ (d × n), both CSR.
    Sparse(CsrView<'a, F>, CsrView<'a, F>),
}

impl<'a, F: Scalar> Value<'a, F> {
    /// Rows.
    pub fn nrows(&self) -> usize {
        match self {
            Value::Dense(x) => x.nrows(),
            Value::Sparse(x, _) => x.rows(),
        }
    }

    /// Columns.
    pub fn ncols(&self) -> usize {
        match self {
            Value::Dense(x) => x.ncols(),
            Value::Sparse(x, _) => x.cols(),
        }
    }

    /// The dense view.
    ///
    /// # Panics
    /// If the value is sparse (a layer that takes only dense inputs was given the features).
    #[track_caller]
    pub fn dense(&self) -> ArrayView2<'a, F> {
        match self {
            Value::Dense(x) => *x,
            Value::Sparse(..) => panic!("a dense input was expected, got sparse features"),
        }
    }

    /// out ← self·W (row-local: no sum across nodes).
    pub fn times(&self, w: ArrayView2<'_, F>, out: ArrayViewMut2<'_, F>, par: Par) {
        match self {
            Value::Dense(x) => gemm(F::one(), *x, w, F::zero(), out, par),
            Value::Sparse(x, _) => spmm(F::one(), *x, w, F::zero(), out, par),
        }
    }

    /// out ← selfᵀ·G + out, summed over every node through `sums` (a weight gradient).
    pub(crate) fn t_times_acc(
        &self,
        sums: &Sums<'_, F>,
        g: ArrayView2<'_, F>,
        out: ArrayViewMut2<'_, F>,
        par: Par,
    ) {
        match self {
            Value::Dense(x) => sums.t_matmul(F::one(), *x, g, F::one(), out, par),
            Value::Sparse(_, x_t) => sums.t_matmul_sparse(*x_t, g, F::one(), out, par),
        }
    }
}

/// Buffer sizes a layer asks for: `f` elements of the model's scalar, `u8` bytes, `f64` values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Req {
    /// Scalars (f32 when training, f64 in gradient checks).
    pub f: usize,
    /// Bytes (masks, codes).
    pub u8: usize,
    /// f64 values (statistics).
    pub f64: usize,
}

impl Req {
    /// `f` scalars.
    pub const fn f(n: usize) -> Req {
        Req {
            f: n,
            u8: 0,
            f64: 0,
        }
    }
    /// The element-wise maximum.
    pub fn max(self, o: Req) -> Req {
        Req {
            f: self.f.max(o.f),
            u8: self.u8.max(o.u8),
            f64: self.f64.max(o.f64),
        }
    }
    /// Whether nothing is asked for.
    pub fn is_empty(&self) -> bool {
        *self == Req::default()
    }
}

impl std::ops::Add for Req {
    type Output = Req;
    /// The element-wise sum.
    fn add(self, o: Req) -> Req {
        Req {
            f: self.f + o.f,
            u8: self.u8 + o.u8,
            f64: self.f64 + o.f64,
        }
    }
}

/// Mutable slices of the sizes a [`Req`] asked for; a layer splits them with the `take_*`
/// methods, in the same order in forward and backward.
#[derive(Debug)]
pub struct Bufs<'a, F> {
    /// Scalars.
    pub f: &'a mut [F],
    /// Bytes.
    pub u8: &'a mut [u8],
    /// f64 values.
    pub f64: &'a mut [f64],
}

impl<F> Default for Bufs<'_, F> {
    fn default() -> Self {
        Bufs {
            f: &mut [],
            u8: &mut [],
            f64: &mut [],
        }
    }
}

impl<'a, F> Bufs<'a, F> {
    /// The next `len` scalars.
    ///
    /// # Panics
    /// If fewer are left (the layer's [`Req`] was too small).
    #[track_caller]
    pub fn take_f(&mut self, len: usize) -> &'a mut [F] {
        let (a, b) = std::mem::take(&mut self.f).split_at_mut(len);
        self.f = b;
        a
    }
    /// The next `len` bytes.
    ///
    /// # Panics
    /// If fewer are left.
    #[track_caller]
    pub(crate) fn take_u8(&mut self, len: usize) -> &'a mut [u8] {
        let (a, b) = std::mem::take(&mut self.u8).split_at_mut(len);
        self.u8 = b;
        a
    }
    /// The next `len` f64 values.
    ///
    /// # Panics
    /// If fewer are left.
    #[track_caller]
    pub(crate) fn take_f64(&mut self, len: usize) -> &'a mut [f64] {
        let (a, b) = std::mem::take(&mut self.f64).split_at_mut(len);
        self.f64 = b;
        a
    }
}

/// Shared slices of the sizes a [`Req`] asked for: what forward left for backward.
#[derive(Debug, Default, Clone, Copy)]
pub struct Saved<'a, F> {
    /// Scalars.
    pub f: &'a [F],
    /// Bytes.
    pub u8: &'a [u8],
    /// f64 values.
    pub f64: &'a [f64],
}

impl<'a, F> Saved<'a, F> {
    /// The next `len` scalars.
    ///
    /// # Panics
    /// If fewer are left.
    #[track_caller]
    pub fn take_f(&mut self, len: usize) -> &'a [F] {
        let (a, b) = self.f.split_at(len);
        self.f = b;
        a
    }
    /// The next `len` bytes.
    ///
    /// # Panics
    /// If fewer are left.
    #[track_caller]
    pub(crate) fn take_u8(&mut self, len: usize) -> &'a [u8] {
        let (a, b) = self.u8.split_at(len);
        self.u8 = b;
        a
    }
    /// The next `len` f64 values.
    ///
    /// # Panics
    /// If fewer are left.
    #[track_caller]
    pub(crate) fn take_f64(&mut self, len: usize) -> &'a [f64] {
        let (a, b) = self.f64.split_at(len);
        self.f64 = b;
        a
    }
}

/// What the stack knows about one of a layer's inputs when it plans the model's buffers
/// ([`Layer::spec`]); each call sees its node's in [`Cx::inputs`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InputDesc {
    /// The input is the sparse features (or their dropped copy).
    pub sparse: bool,
    /// The input is the model's fixed input in training passes too (the raw features: no input
    /// dropout), so [`Cx::fixed_input`] is set in every pass (and Â is the same in every pass
    /// unless the stack is told it varies).
    pub fixed_in_training: bool,
    /// The stack may ask for this input's gradient (it is not the features).
    pub grad: bool,
    /// The plan has no backward pass (evaluation's own workspace,
    /// [`StackOptions::separate_eval`](crate::nn::StackOptions::separate_eval)): nothing
    /// need be saved, and a layer may choose the leanest of the ways that give the same bits.
    pub forward_only: bool,
    /// The rows of this input when they exceed the output's (a bipartite block's sources, for
    /// a layer of one hop, [`Layer::hops`]); 0 when they are the output's `n`.
    pub src_rows: usize,
}

/// The identities of a pass's Â and features ([`DataId`]s): every cache of a layer or of the
/// stack is keyed on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct InputKey {
    /// [`Propagate::id`] of the pass's Â.
    pub adj: DataId,
    /// [`Features::id`](crate::data::Features::id) of the pass's features.
    pub x: DataId,
}

/// The context of one layer call.
pub struct Cx<'a, F: Scalar> {
    /// Â.
    pub adj: &'a dyn Propagate<F>,
    /// Every sum across nodes.
    pub sums: Sums<'a, F>,
    /// Parallelism of the kernels.
    pub par: Par,
    /// Training (dropout on, batch statistics) or evaluation.
    pub mode: Mode,
    /// The random stream of this layer's dropout mask (training passes of a layer with
    /// [`Spec::draws_mask`]).
    pub rng: Option<&'a mut ChaCha8Rng>,
    /// This forward pass recomputes a checkpointed segment: update nothing that a pass updates
    /// once (BatchNorm's running statistics).
    pub recompute: bool,
    /// The Â and the features of this pass: what a layer keeps between passes is keyed on it.
    pub input: InputKey,
    /// The inputs of this call are a function of `input` alone (the raw features, no
    /// dropout): a layer may keep what it computes from them under `input` and reuse it in a
    /// later call with the same key.
    pub fixed_input: bool,
    /// What the planner knew of each input ([`Layer::spec`]'s `inputs`).
    pub inputs: &'a [InputDesc],
    /// Whether the (first) input needs a gradient, for [`GradMode::InPlace`] layers.
    pub need_din: bool,
}

impl<F: Scalar> Cx<'_, F> {
    /// The number of rows of every node-indexed matrix the layer writes (Â's destination
    /// rows).
    pub fn n(&self) -> usize {
        self.adj.shape().0
    }
    /// The rows of the inputs: Â's source columns (n for a whole graph's square Â; more for
    /// a bipartite block, whose first n sources are its destinations).
    pub fn n_src(&self) -> usize {
        self.adj.shape().1
    }
    /// Whether this is a training pass.
    pub fn train(&self) -> bool {
        self.mode == Mode::Train
    }
}

/// Where one input of a layer call lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InSlot {
    /// The features X.
    X,
    /// The features after the input dropout (X in evaluation).
    Xd,
    /// A dense value in buffer `slot` of the stack's pool, `width` columns.
    Buf {
        /// Pool index.
        slot: usize,
        /// Columns.
        width: usize,
    },
}

/// The inputs of a layer call: [`Inputs::get`] gives input `i` as a [`Value`]. (For an in-place
/// layer, input 0 is in the output buffer and these are inputs 1, 2, ….)
#[derive(Clone, Copy)]
pub struct Inputs<'a, F> {
    pub(crate) pool: &'a [Vec<F>],
    pub(crate) slots: &'a [InSlot],
    pub(crate) n: usize,
    /// X.
    pub(crate) x: Value<'a, F>,
    /// X̃ of this pass (X in evaluation).
    pub(crate) xd: Value<'a, F>,
}

impl<'a, F: Scalar> Inputs<'a, F> {
    /// Inputs given as values (layer tests and callers outside the stack).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Input `i`.
    ///
    /// # Panics
    /// If `i` is out of range.
    #[track_caller]
    pub fn get(&self, i: usize) -> Value<'a, F> {
        match self.slots[i] {
            InSlot::X => self.x,
            InSlot::Xd => self.xd,
            InSlot::Buf { slot, width } => Value::Dense(view(&self.pool[slot], (self.n, width))),
        }
    }
}

/// Where backward writes the input gradients of a layer with separate gradients:
/// [`Din::get`] gives the view ∂L/∂in_i is to be written into (overwritten, never added to), or
/// `None` when that input needs no gradient. Take one view at a time.
pub struct Din<'a, F> {
    pub(crate) pool: &'a mut [Vec<F>],
    /// Per input: the pool buffer and the width.
    pub(crate) slots: &'a [Option<(usize, usize)>],
    pub(crate) n: usize,
}

impl<F> Din<'_, F> {
    /// The gradient view of input `i`, if it is needed.
    pub fn get(&mut self, i: usize) -> Option<ArrayViewMut2<'_, F>> {
        let (slot, width) = self.slots.get(i).copied().flatten()?;
        Some(view_mut(&mut self.pool[slot], (self.n, width)))
    }

    /// Whether input `i` needs a gradient.
    pub fn wants(&self, i: usize) -> bool {
        self.slots.get(i).copied().flatten().is_some()
    }
}

/// What a forward call reads and writes.
pub struct Fwd<'a, F> {
    /// The inputs (for an in-place layer: every input but the first, which is in `out`).
    pub ins: Inputs<'a, F>,
    /// The output, n × [`Spec::out_dim`] (for an in-place layer it holds the first input);
    /// empty (no rows) when [`Fwd::over_input`] is granted.
    pub out: ArrayViewMut2<'a, F>,
    /// [`Spec::out_over_input`] granted: one buffer, at least n·max(in, out) long, holding
    /// the first input (n × in_dim, row-major) on entry and the output (n × out_dim) on exit;
    /// the first input is then not in `ins` (as for an in-place layer) and `out` is empty.
    pub over_input: Option<&'a mut [F]>,
    /// What backward will need ([`Spec::saved`]).
    pub saved: Bufs<'a, F>,
    /// Temporaries ([`Spec::scratch`]).
    pub scratch: Bufs<'a, F>,
}

/// Where backward writes the input gradients.
pub enum GradIo<'a, F> {
    /// [`GradMode::InPlace`]: ∂L/∂out (n × out_dim, row-major) on entry, ∂L/∂in
    /// (n × in_dim) on exit, in one buffer at least n·max(in, out) long. Whether ∂L/∂in is
    /// needed is `Cx::need_din`.
    InPlace(&'a mut [F]),
    /// [`GradMode::OverInput`], granted: ∂L/∂out (n × out_dim) in `dout`, which the layer
    /// may overwrite, and the kept first input (n × in_dim) in `input` on entry, ∂L/∂in in
    /// `input` on exit (nothing reads that input after this call). ∂L/∂in is needed.
    OverInput {
        /// ∂L/∂out (n·out_dim long).
        dout: &'a mut [F],
        /// The first input on entry, its gradient on exit (n·in_dim long).
        input: &'a mut [F],
    },
    /// ∂L/∂out, and where each input's gradient goes.
    Separate {
        /// ∂L/∂out.
        dout: ArrayView2<'a, F>,
        /// ∂L/∂in per input.
        din: Din<'a, F>,
    },
}

impl<'a, F> GradIo<'a, F> {
    /// The buffer of an in-place gradient ([`GradMode::InPlace`]).
    ///
    /// # Panics
    /// If the gradient is separate (the layer says it is in place: the stack never does this).
    pub fn in_place(self) -> &'a mut [F] {
        match self {
            GradIo::InPlace(g) => g,
            GradIo::OverInput { .. } | GradIo::Separate { .. } => {
                unreachable!("an in-place layer's gradient is in place")
            }
        }
    }

    /// ∂L/∂out and the input gradients' targets of a layer with separate gradients.
    ///
    /// # Panics
    /// If the gradient is in place (the layer says it is separate: the stack never does this).
    pub fn separate(self) -> (ArrayView2<'a, F>, Din<'a, F>) {
        match self {
            GradIo::Separate { dout, din } => (dout, din),
            GradIo::InPlace(_) | GradIo::OverInput { .. } => {
                unreachable!("a separate layer's gradient is separate")
            }
        }
    }
}

/// What a backward call reads and writes.
pub struct Bwd<'a, F> {
    /// The inputs, when [`Spec::keeps_input`] (otherwise their contents are unspecified).
    pub ins: Inputs<'a, F>,
    /// What forward saved.
    pub saved: Saved<'a, F>,
    /// Temporaries ([`Spec::scratch`]).
    pub scratch: Bufs<'a, F>,
    /// The gradients.
    pub grad: GradIo<'a, F>,
}

/// How a layer's backward hands the input gradients over ([`GradIo`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GradMode {
    /// Each input's gradient into a buffer of its own ([`GradIo::Separate`]).
    Separate,
    /// One buffer, ∂L/∂out on entry and ∂L/∂in on exit ([`GradIo::InPlace`]; one input).
    InPlace,
    /// As [`GradMode::InPlace`], or, when the stack grants it (nothing reads the kept first
    /// input after this backward call, and its gradient starts there), ∂L/∂in left over that
    /// input ([`GradIo::OverInput`]), with `scratch` as the call's temporaries instead of
    /// [`Spec::scratch`].
    OverInput {
        /// Temporaries of a backward call with ∂L/∂in over the input.
        scratch: Req,
    },
}

/// What a layer is on given inputs and rows: everything the planner needs (see the
/// [module docs](self)). Start from [`Spec::new`] and set what differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// Output width.
    pub out_dim: usize,
    /// The width every input must have, when the layer has one ([`Spec::reading`]): the stack
    /// checks it against each input's source before any pass, so a stack whose widths do not
    /// chain is an error ([`Error::Mismatch`](crate::Error::Mismatch)) rather than a shape
    /// panic inside the layer. `None`: the layer takes any width.
    pub in_dim: Option<usize>,
    /// The output is written over the first input (element-wise layers): the stack passes the
    /// input in the output buffer.
    pub in_place: bool,
    /// The output may be written over the first input when nothing reads that input after
    /// this call (a dense value of the pool, e.g. in evaluation): the stack then grants it
    /// with [`Fwd::over_input`], the input in the buffer the output goes to; otherwise the
    /// call is an ordinary one.
    pub out_over_input: bool,
    /// How backward hands the input gradients over.
    pub grad: GradMode,
    /// Backward reads the inputs (then the stack keeps them until then).
    pub keeps_input: bool,
    /// The output depends only on Â and the inputs (no parameters, no random mask): on the
    /// model's fixed input the stack computes it once per Â and features and keeps it.
    pub constant: bool,
    /// A training pass draws a dropout mask from [`Cx::rng`].
    pub draws_mask: bool,
    /// What forward keeps for backward.
    pub saved: Req,
    /// Temporaries of forward and backward.
    pub scratch: Req,
    /// The optional operations of Â the layer uses ([`Caps`]): the stack refuses a backend
    /// without them.
    pub needs: Caps,
}

impl Spec {
    /// A layer of output width `out_dim` that is none of the above: separate gradients,
    /// nothing kept, saved or needed.
    pub const fn new(out_dim: usize) -> Spec {
        Spec {
            out_dim,
            in_dim: None,
            in_place: false,
            out_over_input: false,
            grad: GradMode::Separate,
            keeps_input: false,
            constant: false,
            draws_mask: false,
            saved: Req {
                f: 0,
                u8: 0,
                f64: 0,
            },
            scratch: Req {
                f: 0,
                u8: 0,
                f64: 0,
            },
            needs: Caps {
                a_blocks: false,
                at_blocks: false,
                sparse_product: false,
                neighbours: false,
                drop_edge: false,
            },
        }
    }

    /// This spec, for inputs of width `in_dim` each ([`Spec::in_dim`]).
    #[must_use]
    pub const fn reading(self, in_dim: usize) -> Spec {
        Spec {
            in_dim: Some(in_dim),
            ..self
        }
    }

    /// Whether backward leaves ∂L/∂in in ∂L/∂out's buffer (or over the input).
    pub(crate) fn grad_in_place(&self) -> bool {
        self.grad != GradMode::Separate
    }

    /// The temporaries of a backward call, with ∂L/∂in over the input or not.
    pub(crate) fn scratch_of(&self, over_input: bool) -> Req {
        match self.grad {
            GradMode::OverInput { scratch } if over_input => scratch,
            _ => self.scratch,
        }
    }
}

/// A layer of the [`Model`](super::Model) stack: forward and backward side by side, on buffers
/// the caller owns (see the [module docs](self)).
pub trait Layer<F: Scalar>: Send + Sync + fmt::Debug {
    /// A short name (`gcn_conv`, `relu_dropout`, …), for messages and checkpoints.
    fn name(&self) -> &'static str;

    /// Number of inputs (1 unless said otherwise).
    fn arity(&self) -> usize {
        1
    }

    /// How the layer runs over a stack of bipartite blocks
    /// ([`Model::train_blocks`](super::Model::train_blocks)): `Some(0)` for a layer that
    /// reaches [`Cx::adj`] only for sums (it runs on its level's rows, inputs and output
    /// alike), `Some(1)` for one that propagates once and takes a rectangular Â (inputs
    /// [`Cx::n_src`] rows, output [`Cx::n`]: it gets its block), `Some(k)` for k products in
    /// one call (refused: a stack of blocks gives a layer one block); `None` (the default) for
    /// a layer that does not run over blocks, which the stack refuses naming it.
    fn hops(&self) -> Option<usize> {
        None
    }

    /// What the layer is on inputs like `inputs` (one per input) for `n` rows: a pure
    /// function of its arguments and the layer's settings (see the [module docs](self)).
    fn spec(&self, inputs: &[InputDesc], n: usize) -> Spec;

    /// The forward pass.
    ///
    /// # Errors
    /// An operation of Â the backend lacks (not declared in [`Spec::needs`]).
    fn forward(&mut self, cx: &mut Cx<'_, F>, io: Fwd<'_, F>) -> Result<()>;

    /// The backward pass of the last forward pass of this layer (in training mode).
    ///
    /// # Errors
    /// As [`Layer::forward`].
    fn backward(&mut self, cx: &mut Cx<'_, F>, io: Bwd<'_, F>) -> Result<()>;

    /// Calls `f(name, param)` on each trainable parameter, in a fixed order (`weight`, `bias`,
    /// `gamma`, `beta`, `att`).
    fn visit_params(&mut self, _f: &mut dyn FnMut(&'static str, &mut Param<F>)) {}

    /// Calls `f(name, vector)` on each non-trainable state vector a trained model carries
    /// (BatchNorm's `running_mean` and `running_var`), in a fixed order.
    fn visit_stats(&mut self, _f: &mut dyn FnMut(&'static str, &mut Array1<F>)) {}

    /// Every setting its constructor takes, as text ([`Attrs`](super::attrs::Attrs)): what a
    /// checkpoint of a hand-built stack records to build it again
    /// ([`FromAttrs`](super::attrs::FromAttrs)). A graph convolution's `order` setting is its
    /// resolved evaluation order ([`Model::orders`](super::Model::orders)). `None` (the
    /// default): the layer cannot be saved, and saving a stack with it is an error.
    fn attrs(&self) -> Option<super::attrs::Attrs> {
        None
    }

    /// Frees what the layer computed from the data (memory only: what it keeps is keyed on the
    /// data's identity and never reused for other data).
    fn release(&mut self) {}

    /// A boxed copy (without the data-dependent caches).
    fn clone_box(&self) -> Box<dyn Layer<F>>;
}

impl<F: Scalar> Clone for Box<dyn Layer<F>> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

/// The first `rows·cols` elements of `buf` as a rows × cols array (row-major).
///
/// # Panics
/// If `buf` is shorter.
#[track_caller]
pub fn view_mut<F>(buf: &mut [F], (rows, cols): (usize, usize)) -> ArrayViewMut2<'_, F> {
    ArrayViewMut2::from_shape((rows, cols), &mut buf[..rows * cols])
        .unwrap_or_else(|_| unreachable!("a contiguous slice of the right length"))
}

/// The first `rows·cols` elements of `buf` as a rows × cols array (row-major).
///
/// # Panics
/// If `buf` is shorter.
#[track_caller]
pub fn view<F>(buf: &[F], (rows, cols): (usize, usize)) -> ArrayView2<'_, F> {
    ArrayView2::from_shape((rows, cols), &buf[..rows * cols])
        .unwrap_or_else(|_| unreachable!("a contiguous slice of the right length"))
}
