//! The plan of a model's buffers: the events of a training pass (forward calls, the loss,
//! recomputations of checkpointed segments, backward calls), when each value, saved state and
//! gradient is written and last read, and the pool buffer each one gets (by interval, best fit;
//! an in-place layer takes over its input's buffer, an in-place backward hands its buffer to its
//! input's gradient). Values and gradients share one pool: a value read for the last time by a
//! backward call hosts a gradient written after it.

use super::{Model, Src};
use crate::input::Features;
use crate::nn::layer::{InSlot, InputDesc, Req};
use crate::nn::Node;
use crate::Scalar;

// ---------------------------------------------------------------------------------------------
// The plan.

/// One step of a training pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ev {
    Input,
    /// X̃ drawn again (checkpointing) before the first backward-time read of it.
    RecInput,
    Fwd(usize),
    Loss,
    Rec(usize),
    Bwd(usize),
}

/// A forward call (in the forward pass or a recomputation).
#[derive(Debug, Clone)]
pub(super) struct Call {
    /// The inputs the layer reads (every input but the first for an in-place layer).
    pub(super) ins: Vec<InSlot>,
    pub(super) out: usize,
    /// An in-place layer whose input buffer cannot be taken over: copy input 0 first.
    pub(super) copy_from: Option<InSlot>,
    pub(super) saved: Option<usize>,
    /// The pool buffer lent to the call as its [`Layer::scratch`](crate::nn::Layer::scratch)
    /// of `F`.
    pub(super) scratch: Option<usize>,
}

/// A backward call.
#[derive(Debug, Clone, Default)]
pub(super) struct BwdCall {
    pub(super) run: bool,
    /// The inputs (when the layer keeps them).
    pub(super) ins: Vec<InSlot>,
    pub(super) saved: Option<usize>,
    /// The pool buffer lent to the call as its scratch of `F`.
    pub(super) scratch: Option<usize>,
    pub(super) dout: usize,
    /// In-place gradient: whether ∂L/∂in is needed, and the buffer to add it into when it is
    /// not the first contribution (`None`: it stays in `dout`'s buffer, which becomes ∂L/∂in's).
    pub(super) in_place: Option<(bool, Option<(usize, usize)>)>,
    /// ∂L/∂in left over the kept first input ([`Layer::grad_over_input`](crate::nn::Layer)
    /// granted): that input's buffer, which becomes ∂L/∂in's.
    pub(super) over_input: Option<usize>,
    /// Separate gradients: per input, the index into `din_slots` and the width.
    pub(super) din: Vec<Option<(usize, usize)>>,
    /// The pool buffers of the separate gradients, taken out of the pool during the call.
    pub(super) din_slots: Vec<usize>,
    /// Accumulations after the call: (from, to, width).
    pub(super) adds: Vec<(usize, usize, usize)>,
}

/// Interval bookkeeping of one pool.
#[derive(Debug, Default)]
pub(super) struct Intervals {
    /// Per instance: start, end, size.
    pub(super) inst: Vec<(usize, usize, usize)>,
    /// Per instance: the instance whose buffer it takes over at its start.
    pub(super) handoff: Vec<Option<usize>>,
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
    /// Assigns a buffer to every instance; returns each instance's buffer and each buffer's
    /// size. A handoff chain is one group (one buffer, the largest member's size); groups go
    /// largest first (then by start) to the smallest buffer at least their size whose intervals
    /// they do not meet (else the largest such buffer, grown; else a new one). Intervals are
    /// closed: an instance read for the last time at event t and one written at t never share.
    fn assign(&self) -> (Vec<usize>, Vec<usize>) {
        let n = self.inst.len();
        let root = |mut i: usize| {
            while let Some(j) = self.handoff[i] {
                i = j;
            }
            i
        };
        let mut members: Vec<Vec<usize>> = vec![Vec::new(); n];
        for i in 0..n {
            members[root(i)].push(i);
        }
        let size = |g: usize| {
            members[g]
                .iter()
                .map(|&i| self.inst[i].2)
                .max()
                .unwrap_or(0)
        };
        let start = |g: usize| {
            members[g]
                .iter()
                .map(|&i| self.inst[i].0)
                .min()
                .unwrap_or(0)
        };
        let mut groups: Vec<usize> = (0..n).filter(|&g| !members[g].is_empty()).collect();
        groups.sort_by_key(|&g| (std::cmp::Reverse(size(g)), start(g), g));
        let meets = |a: (usize, usize, usize), b: (usize, usize, usize)| a.0 <= b.1 && b.0 <= a.1;
        let mut slot_of = vec![usize::MAX; n];
        let mut cap: Vec<usize> = Vec::new();
        let mut held: Vec<Vec<usize>> = Vec::new();
        for g in groups {
            let sz = size(g);
            let free = (0..cap.len()).filter(|&s| {
                members[g]
                    .iter()
                    .all(|&i| held[s].iter().all(|&j| !meets(self.inst[i], self.inst[j])))
            });
            let fit = free
                .clone()
                .filter(|&s| cap[s] >= sz)
                .min_by_key(|&s| (cap[s], s));
            let slot = match fit.or_else(|| free.max_by_key(|&s| (cap[s], std::cmp::Reverse(s)))) {
                Some(s) => s,
                None => {
                    cap.push(0);
                    held.push(Vec::new());
                    cap.len() - 1
                }
            };
            cap[slot] = cap[slot].max(sz);
            for &i in &members[g] {
                slot_of[i] = slot;
                held[slot].push(i);
            }
        }
        (slot_of, cap)
    }
}

/// What one pass on `n` rows needs, computed once.
#[derive(Debug)]
pub(super) struct Plan {
    pub(super) n: usize,
    pub(super) x_sparse: bool,
    pub(super) x_cols: usize,
    pub(super) events: Vec<Ev>,
    pub(super) fwd: Vec<Call>,
    pub(super) rec: Vec<Option<Call>>,
    pub(super) bwd: Vec<BwdCall>,
    /// The dense X̃ buffer (dense features with input dropout).
    pub(super) xd_slot: Option<usize>,
    /// The buffer of X̃ drawn again for the reads after the loss ([`Ev::RecInput`]).
    pub(super) xd_rec_slot: Option<usize>,
    pub(super) out_slot: usize,
    pub(super) dlogits_slot: usize,
    /// Node outputs computed once on the fixed input (constant layers).
    pub(super) constant: Vec<bool>,
    /// Whether a node's inputs are all fixed in a training / an evaluation pass.
    pub(super) fixed_train: Vec<bool>,
    pub(super) fixed_eval: Vec<bool>,
    /// Index of each mask-drawing node among the sites (Shared streams), +1 for the input.
    pub(super) site_index: Vec<Option<usize>>,
    pub(super) n_sites: usize,
    /// Sizes of the pool's buffers (values and gradients).
    pub(super) pool_sizes: Vec<usize>,
    pub(super) saved_sizes: Vec<Req>,
    pub(super) scratch: Req,
}

impl Plan {
    /// The dense X̃ buffer of the forward pass, or (`rec`) of the reads after the loss.
    pub(super) fn xd_slot(&self, rec: bool) -> Option<usize> {
        match self.xd_rec_slot {
            Some(s) if rec => Some(s),
            _ => self.xd_slot,
        }
    }
}

impl<F: Scalar> Model<F> {
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

    pub(super) fn plan(&mut self, n: usize, x: &Features<F>) -> Plan {
        let n_nodes = self.nodes.len();
        let xd_dropped = self.input_dropout > 0.0;
        let x_sparse = x.is_sparse();
        let drop_edge = self.opts.varying_graph;
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
                    grad: matches!(s, Src::Node(j) if need[*j]),
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
        // Under checkpointing, a dense X̃ read after the loss (by a layer that keeps it, or by
        // a recomputed one) is drawn again just before that read, from the same stream
        // positions, rather than held from the forward pass.
        let checkpointing = self.opts.redraw_input;
        let reads_xd_late = |e: &Ev| match *e {
            Ev::Rec(c) => self.nodes[c].inputs.contains(&Src::Xd),
            Ev::Bwd(c) => {
                self.nodes[c].inputs.contains(&Src::Xd) && self.nodes[c].layer.keeps_input()
            }
            _ => false,
        };
        if checkpointing && xd_dropped && !x_sparse {
            if let Some(t) = events.iter().position(reads_xd_late) {
                events.insert(t, Ev::RecInput);
            }
        }
        let mut t_fwd = vec![0; n_nodes];
        let mut t_rec = vec![usize::MAX; n_nodes];
        let mut t_bwd = vec![0; n_nodes];
        let mut t_loss = 0;
        let mut t_rec_xd = None;
        for (t, e) in events.iter().enumerate() {
            match *e {
                Ev::RecInput => t_rec_xd = Some(t),
                Ev::Fwd(i) => t_fwd[i] = t,
                Ev::Rec(i) => t_rec[i] = t,
                Ev::Bwd(i) => t_bwd[i] = t,
                Ev::Loss => t_loss = t,
                Ev::Input => {}
            }
        }
        let t_end = events.len();
        // Value instances: Fwd of every node (and X̃), Rec of checkpointed nodes.
        let mut vals = Intervals::default(); // values, then gradients
        let xd_inst = (xd_dropped && !x_sparse).then(|| vals.add(0, 0, n * x.n_cols()));
        let xd_rec_inst = t_rec_xd.map(|t| vals.add(t, t, n * x.n_cols()));
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
            Src::Xd if rec => xd_rec_inst.or(xd_inst),
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
        // Gradient instances: from the first contribution (or the loss) to the producer's
        // backward call. An in-place backward hands its buffer to its input's gradient when it
        // is the first contribution; later contributions go through a temporary and an add.
        let runs = need.clone();
        let mut g_inst: Vec<Option<usize>> = vec![None; n_nodes];
        let last = n_nodes - 1;
        let dlogits = vals.add(t_loss, t_bwd[last], n * self.nodes[last].layer.out_dim());
        // ∂L/∂logits over the logits (the loss reads nothing else after it).
        if !constant[last] && vals.inst[fwd_inst[last]].1 == t_loss {
            vals.handoff[dlogits] = Some(fwd_inst[last]);
        }
        g_inst[last] = Some(dlogits);
        // Per node: in-place (needed, add into), separate targets, adds (from, to).
        let mut ip_plan: Vec<Option<(bool, Option<usize>)>> = vec![None; n_nodes];
        // Per node: the value instance over which ∂L/∂in is left (grad_over_input granted).
        let mut over_plan: Vec<Option<usize>> = vec![None; n_nodes];
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
                    // ∂L/∂in over the input: its first contribution, and nothing reads the
                    // input after this call.
                    let kept = inst_of(&src, c, true, &rec_inst)
                        .filter(|&k| vals.inst[k].1 == t_bwd[c] && !constant[u]);
                    let over = match kept {
                        Some(_) if need[u] && g_inst[u].is_none() => {
                            node.layer.grad_over_input() && node.layer.keeps_input()
                        }
                        _ => false,
                    };
                    if over {
                        let k = kept.unwrap_or_else(|| unreachable!("checked above"));
                        let in_size = n * self.nodes[u].layer.out_dim();
                        let gi = vals.add(t_bwd[c], t_bwd[u], in_size);
                        vals.handoff[gi] = Some(k);
                        g_inst[u] = Some(gi);
                        over_plan[c] = Some(k);
                        plan_ip = (true, None);
                    } else if need[u] {
                        let in_size = n * self.nodes[u].layer.out_dim();
                        vals.inst[dout].2 = vals.inst[dout].2.max(in_size);
                        match g_inst[u] {
                            None => {
                                let gi = vals.add(t_bwd[c], t_bwd[u], in_size);
                                vals.handoff[gi] = Some(dout);
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
                            let gi = vals.add(t_bwd[c], t_bwd[u], n * w);
                            g_inst[u] = Some(gi);
                            dins[k] = Some(gi);
                        }
                        Some(gi) => {
                            let tmp = vals.add(t_bwd[c], t_bwd[c], n * w);
                            dins[k] = Some(tmp);
                            add_plan[c].push((tmp, gi, w));
                        }
                    }
                }
                din_plan[c] = dins;
            }
        }
        for (c, over) in over_plan.iter().enumerate() {
            self.nodes[c].layer.set_grad_over_input(over.is_some());
        }
        // Scratch of F: an instance at each call, so that a buffer dead by then lends it (the
        // value a backward call no longer needs hosts the next call's Âᵀ·G).
        let mut fwd_scr = vec![None; n_nodes];
        let mut rec_scr = vec![None; n_nodes];
        let mut bwd_scr = vec![None; n_nodes];
        for c in 0..n_nodes {
            let f = self.nodes[c].layer.scratch(n).f;
            if f == 0 {
                continue;
            }
            fwd_scr[c] = Some(vals.add(t_fwd[c], t_fwd[c], f));
            if seg_of[c].is_some() {
                rec_scr[c] = Some(vals.add(t_rec[c], t_rec[c], f));
            }
            if runs[c] {
                bwd_scr[c] = Some(vals.add(t_bwd[c], t_bwd[c], f));
            }
        }
        // (A handoff chain's buffer takes its largest member's size in `assign`.)
        let (slot, pool_sizes) = vals.assign();

        let in_slot = |src: &Src, c: usize, rec: bool, rec_inst: &[Option<usize>]| match src {
            Src::X => InSlot::X,
            Src::Xd => InSlot::Xd,
            Src::Node(_) => InSlot::Buf {
                slot: slot[inst_of(src, c, rec, rec_inst).unwrap_or_else(|| unreachable!())],
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
                out: slot[out_inst],
                copy_from: (in_place && !took).then(|| in_slot(&node.inputs[0], c, rec, rec_inst)),
                saved: if rec { rec_saved[c] } else { fwd_saved[c] }.map(|k| saved_slot[k]),
                scratch: if rec { rec_scr[c] } else { fwd_scr[c] }.map(|k| slot[k]),
            }
        };
        let fwd: Vec<Call> = (0..n_nodes).map(|c| call(c, false, &rec_inst)).collect();
        let rec: Vec<Option<Call>> = (0..n_nodes)
            .map(|c| seg_of[c].map(|_| call(c, true, &rec_inst)))
            .collect();
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
                    scratch: bwd_scr[c].map(|k| slot[k]),
                    dout: g_inst[c].map_or(usize::MAX, |g| slot[g]),
                    in_place: ip_plan[c]
                        .map(|(need_in, add)| (need_in, add.map(|gi| (slot[gi], widths[0])))),
                    over_input: over_plan[c].map(|k| slot[k]),
                    din: din_plan[c]
                        .iter()
                        .zip(&widths)
                        .scan(0, |k, (d, &w)| {
                            Some(d.map(|_| {
                                *k += 1;
                                (*k - 1, w)
                            }))
                        })
                        .collect(),
                    din_slots: din_plan[c].iter().flatten().map(|&gi| slot[gi]).collect(),
                    adds: add_plan[c]
                        .iter()
                        .map(|&(from, to, w)| (slot[from], slot[to], w))
                        .collect(),
                }
            })
            .collect();
        // Scratch of u8 and f64: the largest request (F scratch is in the pool).
        let scratch = self
            .nodes
            .iter()
            .map(|nd| Req {
                f: 0,
                ..nd.layer.scratch(n)
            })
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
            dlogits_slot: slot[dlogits],
            fwd,
            rec,
            bwd,
            xd_slot: xd_inst.map(|k| slot[k]),
            xd_rec_slot: xd_rec_inst.map(|k| slot[k]),
            constant,
            fixed_train,
            fixed_eval,
            site_index,
            n_sites,
            pool_sizes,
            saved_sizes,
            scratch,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::data::synthetic::CitationLike;
    use crate::graph::{Norm, NormAdj};
    use crate::input::Features;
    use crate::nn::{Arch, ModelConfig, Order};
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    /// The plan of a 3-layer GCN (16 → 32 → 32 → 5, dropout on the input and between layers)
    /// in `order` on a citation-like graph of `n` nodes.
    fn gcn_plan(n: usize, order: Order) -> super::Plan {
        gcn_plan_checkpointed(n, order, 0)
    }

    /// [`gcn_plan`] with `--checkpoint-every k` (0: none).
    fn gcn_plan_checkpointed(n: usize, order: Order, k: usize) -> super::Plan {
        let d = CitationLike {
            n_nodes: n,
            n_classes: 5,
            ..Default::default()
        }
        .generate(1)
        .unwrap();
        let adj = NormAdj::<f32>::new(&d.graph, Norm::Symmetric);
        let x = Features::dense(ndarray::Array2::from_shape_fn((n, 16), |(i, j)| {
            ((i * 7 + j) % 5) as f32
        }));
        let cfg = ModelConfig {
            in_dim: 16,
            hidden_dim: 32,
            out_dim: 5,
            order,
            dropout: 0.5,
            input_dropout: 0.5,
            checkpoint: k,
            ..ModelConfig::deep(Arch::Gcn, 3)
        };
        let mut m = cfg
            .build(&adj, &x, None, &mut ChaCha8Rng::seed_from_u64(0))
            .unwrap();
        m.plan(n, &x)
    }

    /// A 3-layer GCN (transform first, dropout on the input and between layers) needs at any
    /// event three n × hidden buffers: in forward H₁, the next layer's H·W and its output; in
    /// backward the two kept inputs and the gradient, then a dead input hosts Âᵀ·G. The pool
    /// holds exactly those three (the first layer's scratch and the logits' fit in them), X̃
    /// (kept for the first layer's weight gradient) and the logits: values, gradients and
    /// scratch share it. (Planned apart, the gradients took a fourth n × hidden buffer.) The
    /// lean order needs two.
    #[test]
    fn values_gradients_and_scratch_share_one_pool() {
        let (n, h, c) = (60, 32, 5);
        let plan = gcn_plan(n, Order::TransformFirst);
        let mut sizes = plan.pool_sizes.clone();
        sizes.sort_unstable();
        assert_eq!(sizes, vec![n * c, n * 16, n * h, n * h, n * h]);
        assert_eq!(plan.scratch.f, 0, "F scratch is lent from the pool");
        // The lean order: in forward the input and the output, in backward the input, which
        // takes ∂L/∂in, and the gradient: two n × hidden buffers (n above a few blocks, so that
        // a block is not the whole of a value). The first layer keeps X̃ (16 wide) for its
        // weight gradient and saves nothing.
        let n = 40000;
        let plan = gcn_plan(n, Order::Lean);
        let mut sizes = plan.pool_sizes.clone();
        sizes.sort_unstable();
        // (The logits' gradient takes the logits' buffer; one block of scratch.)
        let block = crate::nn::gcn_conv::LEAN_BLOCK * h;
        assert_eq!(sizes, vec![n * c, block, n * 16, n * h, n * h]);
        assert!(
            plan.saved_sizes.iter().all(|r| r.f == 0),
            "no S = Â·X̃ saved"
        );
        let over: Vec<bool> = plan.bwd.iter().map(|b| b.over_input.is_some()).collect();
        assert_eq!(
            over,
            [false, false, true, false, true],
            "dH over H in layers 1 and 2"
        );
    }

    /// Under checkpointing, X̃ is drawn again just before the first layer's backward instead of
    /// being held through the pass: in the lean order it then shares a hidden buffer, and the
    /// pool is two n × hidden buffers, the logits and a block.
    #[test]
    fn checkpointing_draws_the_dropped_input_again_for_backward() {
        use super::Ev;
        let (n, h, c) = (40000, 32, 5);
        let mut plan = gcn_plan_checkpointed(n, Order::Lean, 1);
        let at = plan.events.iter().position(|e| *e == Ev::RecInput);
        let bwd0 = plan.events.iter().position(|e| *e == Ev::Bwd(0));
        assert!(
            at.is_some() && at.map(|t| t + 1) == bwd0,
            "{:?}",
            plan.events
        );
        assert!(plan.xd_rec_slot.is_some() && plan.xd_slot.is_some());
        // (Here the redraw reuses the forward draw's buffer, a hidden value's in between; in
        // general each read takes its own instance's.)
        let mut other = plan.xd_slot.map(|s| s + 100);
        std::mem::swap(&mut other, &mut plan.xd_rec_slot);
        assert_eq!(plan.xd_slot(false), plan.xd_slot);
        assert_eq!(plan.xd_slot(true), plan.xd_rec_slot);
        plan.xd_rec_slot = other;
        let mut sizes = plan.pool_sizes.clone();
        sizes.sort_unstable();
        let block = crate::nn::gcn_conv::LEAN_BLOCK * h;
        assert_eq!(sizes, vec![n * c, block, n * h, n * h]);
        // Not checkpointed: drawn once.
        for order in [Order::Lean, Order::TransformFirst] {
            let plan = gcn_plan_checkpointed(n, order, 0);
            assert!(!plan.events.contains(&Ev::RecInput), "{order:?}");
            assert!(plan.xd_rec_slot.is_none());
            assert_eq!(plan.xd_slot(true), plan.xd_slot, "{order:?}: one X̃ buffer");
        }
    }
}
