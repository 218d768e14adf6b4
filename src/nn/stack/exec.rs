//! The execution of a pass on the planned buffers: the input dropout, each forward call (the
//! layer's inputs borrowed from the pool, its output buffer taken out while it runs), the
//! recomputation of checkpointed segments, each backward call and the accumulation of input
//! gradients.

use ndarray::{ArrayView2, Zip};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::plan::{Ev, Plan};
use super::{MaskStreams, Model, Node, Src};
use crate::graph::{LevelRows, Propagate, SumScratch};
use crate::id::DataId;
use crate::input::{Features, FeaturesRef, SparseFeatures};
use crate::kernels::elementwise::{dropout_into_at, fill_dropout_mask_at};
use crate::nn::layer::{view, view_mut, Bufs, Bwd, Cx, Din, Fwd, GradIo, InSlot, Inputs};
use crate::nn::layer::{InputDesc, InputKey, Saved, Value};
use crate::nn::Mode;
use crate::{Par, Result, Scalar};

/// The scratch of a layer call: `f` is the pool buffer the plan lends the call (empty
/// between calls), `u8` and `f64` the largest request of any layer.
#[derive(Debug, Default)]
pub(super) struct Scratch<F> {
    pub(super) f: Vec<F>,
    pub(super) u8: Vec<u8>,
    pub(super) f64: Vec<f64>,
}

impl<F> Scratch<F> {
    /// The whole scratch as a layer's [`Bufs`].
    fn bufs(&mut self) -> Bufs<'_, F> {
        Bufs {
            f: &mut self.f,
            u8: &mut self.u8,
            f64: &mut self.f64,
        }
    }
}

/// The buffers of a model's passes.
#[derive(Debug)]
pub(super) struct Workspace<F: Scalar> {
    pub(super) plan: Plan,
    /// Values and gradients (one pool, [`Plan::pool_sizes`]).
    pub(super) pool: Vec<Vec<F>>,
    /// The separate input gradients of the backward call under way, taken out of the pool.
    pub(super) taken: Vec<Vec<F>>,
    pub(super) saved_f: Vec<Vec<F>>,
    pub(super) saved_u8: Vec<Vec<u8>>,
    pub(super) saved_f64: Vec<Vec<f64>>,
    pub(super) scratch: Scratch<F>,
    /// Dropped sparse features (the pattern of X).
    pub(super) xd_sparse: Option<SparseFeatures<F>>,
    /// Stream positions of the mask sites in the last training pass (Shared streams).
    pub(super) positions: Vec<u128>,
    /// The pass's key (PerLayer streams).
    pub(super) key: u64,
    /// Per node: the Â and features its constant output was computed from, if it holds one.
    pub(super) const_key: Vec<Option<InputKey>>,
    /// The features whose pattern `xd_sparse` has.
    pub(super) xd_of: Option<DataId>,
    /// The working memory of the sums across nodes (the layers' and the loss's).
    pub(super) sums: SumScratch<F>,
}

/// The Â each node of a pass reaches ([`Cx::adj`]).
#[derive(Clone, Copy)]
pub(super) enum Graphs<'a, F: Scalar> {
    /// A whole graph's square Â, for every node.
    Whole(&'a dyn Propagate<F>),
    /// A stack of bipartite blocks: `blocks[l]` takes level l's rows to level l + 1's; a
    /// layer of no hops sees `levels[l]`, its level's rows.
    Blocks {
        /// One block a layer, the input layer's first.
        blocks: &'a [&'a dyn Propagate<F>],
        /// Each level's rows (`blocks.len() + 1` of them).
        levels: &'a [LevelRows],
    },
}

impl<'a, F: Scalar> Graphs<'a, F> {
    /// The Â node `i` reaches.
    pub(super) fn of(&self, plan: &Plan, i: usize) -> &'a dyn Propagate<F> {
        match *self {
            Graphs::Whole(a) => a,
            Graphs::Blocks { blocks, levels } => {
                let (l_in, l_out) = (plan.in_level[i], plan.level[i]);
                if l_out > l_in {
                    blocks[l_in]
                } else {
                    &levels[l_out]
                }
            }
        }
    }

    /// The rows of level `l`.
    pub(super) fn rows(&self, l: usize) -> usize {
        match self {
            Graphs::Whole(a) => a.shape().0,
            Graphs::Blocks { levels, .. } => {
                Propagate::<F>::shape(&levels[l.min(levels.len() - 1)]).0
            }
        }
    }

    /// The Â of the features' rows (whose collective places the input dropout's mask).
    pub(super) fn first(&self) -> &'a dyn Propagate<F> {
        match *self {
            Graphs::Whole(a) => a,
            Graphs::Blocks { blocks, .. } => blocks[0],
        }
    }

    /// The Â of the logits' rows (what the loss sums over).
    pub(super) fn last(&self) -> &'a dyn Propagate<F> {
        match *self {
            Graphs::Whole(a) => a,
            Graphs::Blocks { blocks, .. } => blocks[blocks.len() - 1],
        }
    }
}

impl<F: Scalar> Model<F> {
    /// The stream of the mask of `node` (or of the input for `None`) in this pass: under
    /// Shared streams the caller's stream (its position recorded) or, when recomputing, a copy
    /// set to the recorded position; under PerLayer streams the site's stream of the pass's key.
    pub(super) fn site_rng<'r>(
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
    pub(super) fn forward(
        &mut self,
        ws: &mut Workspace<F>,
        g: Graphs<'_, F>,
        x: &Features<F>,
        mode: Mode,
        mut rng: Option<&mut ChaCha8Rng>,
        par: Par,
        visit: &mut dyn FnMut(usize, ArrayView2<'_, F>),
    ) -> Result<()> {
        let train = mode == Mode::Train;
        let mut local = ChaCha8Rng::seed_from_u64(0);
        if train && self.input_dropout > 0.0 {
            let shared = rng
                .as_deref_mut()
                .unwrap_or_else(|| unreachable!("a training RNG"));
            let r = self.site_rng(ws, None, false, shared, &mut local);
            drop_input(ws, x, self.input_dropout, r, g.first(), par, false);
        }
        let mut tap = 0;
        for i in 0..self.nodes.len() {
            let adj = g.of(&ws.plan, i);
            let key = InputKey {
                adj: adj.id(),
                x: x.id(),
            };
            let fixed = if train {
                ws.plan.fixed_train[i]
            } else {
                ws.plan.fixed_eval[i]
            };
            // A constant output is kept for the Â and features it was computed from.
            let constant = ws.plan.constant(i);
            let skip = constant && fixed && ws.const_key[i] == Some(key);
            if !skip {
                if constant {
                    ws.const_key[i] = None;
                }
                let r = match rng.as_deref_mut() {
                    Some(shared) if train && ws.plan.specs[i].draws_mask => {
                        Some(self.site_rng(ws, Some(i), false, shared, &mut local))
                    }
                    _ => None,
                };
                let flags = Flags {
                    mode,
                    key,
                    fixed,
                    recompute: false,
                };
                run_forward(&mut self.nodes[i], i, ws, g, x, flags, r, par)?;
                if constant {
                    ws.const_key[i] = fixed.then_some(key);
                }
            }
            if self.taps.get(tap) == Some(&i) {
                let w = ws.plan.specs[i].out_dim;
                let slot = ws.plan.fwd[i].out;
                visit(tap, view(&ws.pool[slot], (g.rows(ws.plan.level[i]), w)));
                tap += 1;
            }
        }
        Ok(())
    }

    /// The backward calls, with the recomputation of checkpointed segments.
    pub(super) fn backward(
        &mut self,
        ws: &mut Workspace<F>,
        g: Graphs<'_, F>,
        x: &Features<F>,
        rng: &mut ChaCha8Rng,
        par: Par,
    ) -> Result<()> {
        let key = |adj: &dyn Propagate<F>| InputKey {
            adj: adj.id(),
            x: x.id(),
        };
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
                Ev::RecInput => {
                    let r = self.site_rng(ws, None, true, rng, &mut local);
                    drop_input(ws, x, self.input_dropout, r, g.first(), par, true);
                }
                Ev::Rec(i) => {
                    let r = if ws.plan.specs[i].draws_mask {
                        Some(self.site_rng(ws, Some(i), true, rng, &mut local))
                    } else {
                        None
                    };
                    let adj = g.of(&ws.plan, i);
                    let flags = Flags {
                        mode: Mode::Train,
                        key: key(adj),
                        fixed: ws.plan.fixed_train[i],
                        recompute: true,
                    };
                    run_forward(&mut self.nodes[i], i, ws, g, x, flags, r, par)?;
                }
                Ev::Bwd(i) if ws.plan.bwd[i].run => {
                    let flags = Flags {
                        mode: Mode::Train,
                        key: key(g.of(&ws.plan, i)),
                        fixed: ws.plan.fixed_train[i],
                        recompute: false,
                    };
                    run_backward(&mut self.nodes, i, ws, g, x, flags, par)?;
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// The mode flags of a forward call.
#[derive(Debug, Clone, Copy)]
struct Flags {
    mode: Mode,
    key: InputKey,
    fixed: bool,
    recompute: bool,
}

/// X̃ = X ⊙ M into the workspace's X̃ buffer (the one of the reads after the loss when `rec`),
/// with M drawn from `rng` (in element order for dense X, in stored order for sparse X).
fn drop_input<F: Scalar>(
    ws: &mut Workspace<F>,
    x: &Features<F>,
    p: f64,
    rng: &mut ChaCha8Rng,
    adj: &dyn Propagate<F>,
    par: Par,
    rec: bool,
) {
    // Keyed by global position: this process's part of the whole graph's mask.
    match x.get() {
        FeaturesRef::Dense(d) => {
            let slot = ws
                .plan
                .xd_slot(rec)
                .unwrap_or_else(|| unreachable!("X̃'s buffer"));
            let buf = &mut ws.pool[slot][..d.len()];
            let (before, total) = adj.collective().global_span(buf.len());
            if let Some(x) = d.as_slice() {
                dropout_into_at(rng, p, x, buf, before, total, par);
            } else {
                fill_dropout_mask_at(rng, p, buf, before, total, par);
                Zip::from(view_mut(buf, d.dim()))
                    .and(d)
                    .for_each(|o, &v| *o = v * *o);
            }
        }
        FeaturesRef::Sparse(s) => {
            let buf = ws
                .xd_sparse
                .as_mut()
                .unwrap_or_else(|| unreachable!("X̃'s buffer"));
            let vals = buf.values_mut();
            let (before, total) = adj.collective().global_span(vals.len());
            dropout_into_at(rng, p, s.x().data(), vals, before, total, par);
            buf.sync_transpose();
        }
    }
}

/// The features as a value.
fn x_value<F: Scalar>(x: &Features<F>) -> Value<'_, F> {
    match x.get() {
        FeaturesRef::Dense(d) => Value::Dense(d.view()),
        FeaturesRef::Sparse(s) => Value::Sparse(s.x(), s.x_t()),
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
    rec: bool,
) -> Value<'a, F> {
    match (train, plan.xd_slot(rec), xd_sparse) {
        (true, Some(slot), _) => Value::Dense(view(&vals[slot], (x.n_rows(), plan.x_cols))),
        (true, None, Some(s)) => Value::Sparse(s.x(), s.x_t()),
        _ => x_value(x),
    }
}

impl Flags {
    /// The context of a layer call with these flags (`inputs`: what the planner told the
    /// layer of its inputs; sums in `sums`).
    #[allow(clippy::too_many_arguments)]
    fn cx<'a, F: Scalar>(
        self,
        adj: &'a dyn Propagate<F>,
        sums: &'a SumScratch<F>,
        inputs: &'a [InputDesc],
        par: Par,
        rng: Option<&'a mut ChaCha8Rng>,
        need_din: bool,
    ) -> Cx<'a, F> {
        Cx {
            adj,
            sums: sums.sums(adj.collective(), adj.rows()),
            par,
            mode: self.mode,
            rng,
            recompute: self.recompute,
            input: self.key,
            fixed_input: self.fixed,
            inputs,
            need_din,
        }
    }
}

/// The saved-state buffers of pool slot `slot` (empty slices for `None`).
fn saved_bufs<'a, F>(
    f: &'a mut [Vec<F>],
    u8s: &'a mut [Vec<u8>],
    f64s: &'a mut [Vec<f64>],
    slot: Option<usize>,
) -> Bufs<'a, F> {
    match slot {
        Some(s) => Bufs {
            f: &mut f[s][..],
            u8: &mut u8s[s][..],
            f64: &mut f64s[s][..],
        },
        None => Bufs::default(),
    }
}

/// One forward call of node `i` (or its recomputation) into its planned buffers.
#[allow(clippy::too_many_arguments)]
fn run_forward<F: Scalar>(
    node: &mut Node<F>,
    i: usize,
    ws: &mut Workspace<F>,
    g: Graphs<'_, F>,
    x: &Features<F>,
    flags: Flags,
    rng: Option<&mut ChaCha8Rng>,
    par: Par,
) -> Result<()> {
    let plan = &ws.plan;
    let adj = g.of(plan, i);
    let call = if flags.recompute {
        plan.rec[i]
            .as_ref()
            .unwrap_or_else(|| unreachable!("a recomputed node"))
    } else {
        &plan.fwd[i]
    };
    // (The output has its level's rows, the inputs theirs: a block's sources.)
    let (n, n_in, w) = (
        g.rows(plan.level[i]),
        g.rows(plan.in_level[i]),
        plan.specs[i].out_dim,
    );
    let train = flags.mode == Mode::Train;
    // The output buffer leaves the pool while the inputs are borrowed from it, and the
    // call's scratch buffer is lent.
    let mut out_buf = std::mem::take(&mut ws.pool[call.out]);
    if let Some(s) = call.scratch {
        std::mem::swap(&mut ws.scratch.f, &mut ws.pool[s]);
    }
    let vals = &ws.pool;
    // (Only a node that reads X̃ may look at its buffer: another may be reusing it.)
    let reads_xd = node.inputs.contains(&Src::Xd);
    let xd = xd_value(
        plan,
        vals,
        x,
        &ws.xd_sparse,
        train && reads_xd,
        flags.recompute,
    );
    if let Some(src) = call.copy_from {
        let mut out = view_mut(&mut out_buf, (n, w));
        match src {
            InSlot::X => out.assign(&x_value(x).dense()),
            InSlot::Xd => out.assign(&xd.dense()),
            InSlot::Buf { slot, width } => out.assign(&view(&vals[slot], (n, width))),
        }
    }
    let saved = saved_bufs(
        &mut ws.saved_f,
        &mut ws.saved_u8,
        &mut ws.saved_f64,
        call.saved,
    );
    // (Output over the input: the whole buffer, holding the input, and no output view.)
    let (out, over_input) = if call.over_input {
        (view_mut(&mut [], (0, w)), Some(&mut out_buf[..]))
    } else {
        (view_mut(&mut out_buf, (n, w)), None)
    };
    let res = node.layer.forward(
        &mut flags.cx(adj, &ws.sums, &plan.descs[i], par, rng, false),
        Fwd {
            ins: Inputs {
                pool: vals,
                slots: &call.ins,
                n: n_in,
                x: x_value(x),
                xd,
            },
            out,
            over_input,
            saved,
            scratch: ws.scratch.bufs(),
        },
    );
    // (The buffers go back to the pool whatever the call returned.)
    ws.pool[call.out] = out_buf;
    if let Some(s) = call.scratch {
        std::mem::swap(&mut ws.scratch.f, &mut ws.pool[s]);
    }
    res
}

/// The backward call of node `i` of `nodes`, then the accumulations into its inputs'
/// gradients.
fn run_backward<F: Scalar>(
    nodes: &mut [Node<F>],
    i: usize,
    ws: &mut Workspace<F>,
    g: Graphs<'_, F>,
    x: &Features<F>,
    flags: Flags,
    par: Par,
) -> Result<()> {
    let node = &mut nodes[i];
    let plan = &ws.plan;
    let adj = g.of(plan, i);
    let b = &plan.bwd[i];
    let (n, n_in, out_w) = (
        g.rows(plan.level[i]),
        g.rows(plan.in_level[i]),
        plan.specs[i].out_dim,
    );
    // X̃ is read only by a layer that keeps its inputs (its buffer lives that long).
    let reads_xd = plan.specs[i].keeps_input && node.inputs.contains(&Src::Xd);
    let saved = match b.saved {
        Some(s) => Saved {
            f: &ws.saved_f[s][..],
            u8: &ws.saved_u8[s][..],
            f64: &ws.saved_f64[s][..],
        },
        None => Saved::default(),
    };
    if let Some(s) = b.scratch {
        std::mem::swap(&mut ws.scratch.f, &mut ws.pool[s]);
    }
    let scratch = ws.scratch.bufs();
    let pool = &mut ws.pool;
    let taken = &mut ws.taken;
    let mut dout_buf = std::mem::take(&mut pool[b.dout]);
    // (Over the input: the input leaves the pool; the layer reads it from its gradient's
    // buffer.)
    let mut over_buf = b.over_input.map(|s| std::mem::take(&mut pool[s]));
    taken.extend(b.din_slots.iter().map(|&s| std::mem::take(&mut pool[s])));
    let vals = &*pool;
    let ins = Inputs {
        pool: vals,
        slots: &b.ins,
        n: n_in,
        x: x_value(x),
        xd: xd_value(plan, vals, x, &ws.xd_sparse, reads_xd, true),
    };
    let need_in = b.in_place.is_some_and(|(need, _)| need);
    let grad = match (b.in_place, over_buf.as_mut()) {
        (Some(_), Some(input)) => GradIo::OverInput {
            dout: &mut dout_buf[..],
            input: &mut input[..],
        },
        (Some(_), None) => GradIo::InPlace(&mut dout_buf[..]),
        (None, _) => GradIo::Separate {
            dout: view(&dout_buf, (n, out_w)),
            din: Din {
                pool: taken,
                slots: &b.din,
                n: n_in,
            },
        },
    };
    let res = node.layer.backward(
        &mut flags.cx(adj, &ws.sums, &plan.descs[i], par, None, need_in),
        Bwd {
            ins,
            saved,
            scratch,
            grad,
        },
    );
    // (The buffers go back to the pool whatever the call returned.)
    for (&s, buf) in b.din_slots.iter().zip(taken.drain(..)) {
        pool[s] = buf;
    }
    if let (Some(s), Some(buf)) = (b.over_input, over_buf) {
        pool[s] = buf;
    }
    if let Some((true, Some((to, w)))) = b.in_place {
        add_into(&mut pool[to][..n_in * w], &dout_buf[..n_in * w]);
    }
    for &(from, to, w) in &b.adds {
        let src = std::mem::take(&mut pool[from]);
        add_into(&mut pool[to][..n_in * w], &src[..n_in * w]);
        pool[from] = src;
    }
    pool[b.dout] = dout_buf;
    if let Some(s) = b.scratch {
        std::mem::swap(&mut ws.scratch.f, &mut ws.pool[s]);
    }
    res
}

/// dst ← dst + src, element by element.
fn add_into<F: Scalar>(dst: &mut [F], src: &[F]) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d += s;
    }
}
