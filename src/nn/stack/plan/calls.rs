//! The last phases of a plan: the scratch instances of every call, the saved states' own pool,
//! and each forward, recomputation and backward call with the buffers it reads and writes.

use super::events::Timeline;
use super::grads::Grads;
use super::intervals::Intervals;
use super::values::Values;
use super::Stack;
use crate::nn::layer::{InSlot, Req};
use crate::nn::stack::Src;

/// A forward call (in the forward pass or a recomputation).
#[derive(Debug, Clone)]
pub(crate) struct Call {
    /// The inputs the layer reads (every input but the first for an in-place layer).
    pub(crate) ins: Vec<InSlot>,
    pub(crate) out: usize,
    /// An in-place layer whose input buffer cannot be taken over: copy input 0 first.
    pub(crate) copy_from: Option<InSlot>,
    /// [`Spec::out_over_input`](crate::nn::layer::Spec) granted: input 0 is in `out`'s
    /// buffer (and not in `ins`).
    pub(crate) over_input: bool,
    pub(crate) saved: Option<usize>,
    /// The pool buffer lent to the call as its scratch of `F`.
    pub(crate) scratch: Option<usize>,
}

/// A backward call.
#[derive(Debug, Clone, Default)]
pub(crate) struct BwdCall {
    pub(crate) run: bool,
    /// The inputs (when the layer keeps them).
    pub(crate) ins: Vec<InSlot>,
    pub(crate) saved: Option<usize>,
    /// The pool buffer lent to the call as its scratch of `F`.
    pub(crate) scratch: Option<usize>,
    pub(crate) dout: usize,
    /// In-place gradient: whether ∂L/∂in is needed, and the buffer to add it into when it is
    /// not the first contribution (`None`: it stays in `dout`'s buffer, which becomes ∂L/∂in's).
    pub(crate) in_place: Option<(bool, Option<(usize, usize)>)>,
    /// ∂L/∂in left over the kept first input (granted): that input's buffer, which becomes
    /// ∂L/∂in's.
    pub(crate) over_input: Option<usize>,
    /// Separate gradients: per input, the index into `din_slots` and the width.
    pub(crate) din: Vec<Option<(usize, usize)>>,
    /// The pool buffers of the separate gradients, taken out of the pool during the call.
    pub(crate) din_slots: Vec<usize>,
    /// Accumulations after the call: (from, to, width).
    pub(crate) adds: Vec<(usize, usize, usize)>,
}

/// Per node: the scratch instance of its forward call, its recomputation and its backward call.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scratch {
    pub(crate) fwd: Vec<Option<usize>>,
    pub(crate) rec: Vec<Option<usize>>,
    pub(crate) bwd: Vec<Option<usize>>,
}

/// Scratch of `F`: an instance at each call, so that a buffer dead by then lends it (the value a
/// backward call no longer needs hosts the next call's Âᵀ·G). `reqs[c]` is node c's scratch
/// (with its over-input grant); backward calls of nodes that `run`.
pub(crate) fn scratch(tl: &Timeline, v: &mut Values, reqs: &[Req], run: &[bool]) -> Scratch {
    let n = reqs.len();
    let mut s = Scratch {
        fwd: vec![None; n],
        rec: vec![None; n],
        bwd: vec![None; n],
    };
    for c in 0..n {
        let f = reqs[c].f;
        if f == 0 {
            continue;
        }
        s.fwd[c] = Some(v.vals.add(tl.t_fwd[c], tl.t_fwd[c], f));
        if tl.seg_of[c].is_some() {
            s.rec[c] = Some(v.vals.add(tl.t_rec[c], tl.t_rec[c], f));
        }
        if run[c] {
            s.bwd[c] = Some(v.vals.add(tl.t_bwd[c], tl.t_bwd[c], f));
        }
    }
    s
}

/// The saved states: their own pool, by interval (from the forward call to the backward call,
/// or from the recomputation for a checkpointed node).
#[derive(Debug, Clone, Default)]
pub(crate) struct SavedPlan {
    /// Per node: the saved buffer of its forward call and of its recomputation.
    pub(crate) fwd: Vec<Option<usize>>,
    pub(crate) rec: Vec<Option<usize>>,
    /// Sizes of the saved buffers.
    pub(crate) sizes: Vec<Req>,
}

/// The saved-state plan of nodes saving `reqs[i]`.
pub(crate) fn saved(tl: &Timeline, reqs: &[Req]) -> SavedPlan {
    let n = reqs.len();
    let mut iv = Intervals::default();
    let mut inst_req: Vec<Req> = Vec::new();
    let mut fwd = vec![None; n];
    let mut rec = vec![None; n];
    for i in 0..n {
        let req = reqs[i];
        if req.is_empty() {
            continue;
        }
        let seg = tl.seg_of[i].is_some();
        let end = if seg { tl.t_fwd[i] } else { tl.t_bwd[i] };
        fwd[i] = Some(iv.add(tl.t_fwd[i], end, req.f + req.u8 + req.f64));
        inst_req.push(req);
        if seg {
            rec[i] = Some(iv.add(tl.t_rec[i], tl.t_bwd[i], req.f + req.u8 + req.f64));
            inst_req.push(req);
        }
    }
    // Assigned with the total as the size; each buffer then takes the maxima per component.
    let (slot, cap) = iv.assign();
    let mut sizes = vec![Req::default(); cap.len()];
    for (k, r) in inst_req.iter().enumerate() {
        sizes[slot[k]] = sizes[slot[k]].max(*r);
    }
    SavedPlan {
        fwd: fwd.iter().map(|k| k.map(|k| slot[k])).collect(),
        rec: rec.iter().map(|k| k.map(|k| slot[k])).collect(),
        sizes,
    }
}

/// Everything the calls read: the phases' results and the pool's assignment (`slot` per
/// instance).
pub(crate) struct Parts<'a> {
    pub(crate) st: &'a Stack<'a>,
    pub(crate) tl: &'a Timeline,
    pub(crate) v: &'a Values,
    pub(crate) g: &'a Grads,
    pub(crate) scr: &'a Scratch,
    pub(crate) saved: &'a SavedPlan,
    pub(crate) slot: &'a [usize],
}

impl Parts<'_> {
    /// Where node `c` reads `src` (at its forward, or with `rec` at its recomputation and
    /// backward).
    fn in_slot(&self, src: Src, c: usize, rec: bool) -> InSlot {
        match src {
            Src::X => InSlot::X,
            Src::Xd => InSlot::Xd,
            Src::Node(_) => InSlot::Buf {
                slot: self.slot[self
                    .v
                    .inst_of(src, c, rec)
                    .unwrap_or_else(|| unreachable!("a node's output is in the pool"))],
                width: self.st.width(src),
            },
        }
    }

    /// Node `c`'s forward call, or its recomputation (`rec`).
    pub(crate) fn call(&self, c: usize, rec: bool) -> Call {
        let (st, v) = (self.st, self.v);
        let spec = &st.specs[c];
        let in_place = spec.in_place && !spec.constant;
        let (out_inst, took, saved, scratch) = if rec {
            (
                v.rec_inst[c].unwrap_or(v.fwd_inst[c]),
                v.takes_over_rec[c],
                self.saved.rec[c],
                self.scr.rec[c],
            )
        } else {
            (
                v.fwd_inst[c],
                v.takes_over[c],
                self.saved.fwd[c],
                self.scr.fwd[c],
            )
        };
        let over_input = spec.out_over_input && !in_place && took;
        let skip = usize::from(in_place || over_input);
        let ins = st.inputs[c][skip..]
            .iter()
            .map(|&s| self.in_slot(s, c, rec))
            .collect();
        Call {
            ins,
            out: self.slot[out_inst],
            copy_from: (in_place && !took).then(|| self.in_slot(st.inputs[c][0], c, rec)),
            over_input,
            saved,
            scratch: scratch.map(|k| self.slot[k]),
        }
    }

    /// Node `c`'s backward call (`run: false` for a node that does not run backward).
    pub(crate) fn bwd(&self, c: usize, run: bool) -> BwdCall {
        if !run {
            return BwdCall::default();
        }
        let (st, g, slot) = (self.st, self.g, self.slot);
        let inputs = st.inputs[c];
        let widths: Vec<usize> = inputs.iter().map(|&s| st.width(s)).collect();
        let ins = if st.specs[c].keeps_input {
            inputs.iter().map(|&s| self.in_slot(s, c, true)).collect()
        } else {
            Vec::new()
        };
        let saved = if self.tl.seg_of[c].is_some() {
            self.saved.rec[c]
        } else {
            self.saved.fwd[c]
        };
        let mut k = 0;
        let din = g.din[c]
            .iter()
            .zip(&widths)
            .map(|(d, &w)| {
                d.map(|_| {
                    k += 1;
                    (k - 1, w)
                })
            })
            .collect();
        BwdCall {
            run: true,
            ins,
            saved,
            scratch: self.scr.bwd[c].map(|k| slot[k]),
            dout: g.g_inst[c].map_or(usize::MAX, |gi| slot[gi]),
            in_place: g.in_place[c]
                .map(|(need_in, add)| (need_in, add.map(|gi| (slot[gi], widths[0])))),
            over_input: g.over[c].map(|k| slot[k]),
            din,
            din_slots: g.din[c].iter().flatten().map(|&gi| slot[gi]).collect(),
            adds: g.adds[c]
                .iter()
                .map(|&(from, to, w)| (slot[from], slot[to], w))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::stack::plan::events::timeline;

    #[test]
    fn saved_states_share_buffers_by_interval_and_take_each_component_s_maximum() {
        // Three nodes: 0 and 2 save, 1 does not; no segments. Node 0's state lives from its
        // forward (1) to its backward (7), node 2's from 3 to 5: they overlap, two buffers.
        let tl = timeline(3, &[], false, &|_| false);
        let a = Req {
            f: 10,
            u8: 3,
            f64: 0,
        };
        let b = Req {
            f: 2,
            u8: 0,
            f64: 7,
        };
        let s = saved(&tl, &[a, Req::default(), b]);
        assert_eq!(s.rec, [None, None, None]);
        assert!(s.fwd[1].is_none() && s.fwd[0] != s.fwd[2]);
        assert_eq!(s.sizes.len(), 2);
        // Checkpointed node 0 (segment 0..1): a forward state dead at once and a recomputed
        // one; node 2's overlaps the latter only.
        let tl = timeline(3, std::slice::from_ref(&(0..1)), false, &|_| false);
        let s = saved(&tl, &[a, Req::default(), a.max(b)]);
        assert!(s.rec[0].is_some());
        assert_eq!(s.sizes.iter().map(|r| r.f).max(), Some(10));
    }
}
