//! The value instances of a pass and their intervals: X̃ (dense features with dropout, and its
//! redraw), each node's output in forward and, for checkpointed nodes, in its recomputation;
//! each lives until its last reader. An in-place layer (or one whose output may go over its
//! input) takes over its input's buffer when nothing reads that input later.

use super::events::Timeline;
use super::intervals::Intervals;
use super::Stack;
use crate::nn::stack::Src;

/// The value instances (in the pool's [`Intervals`], which the gradients join later).
#[derive(Debug)]
pub(crate) struct Values {
    pub(crate) vals: Intervals,
    pub(crate) xd_inst: Option<usize>,
    pub(crate) xd_rec_inst: Option<usize>,
    pub(crate) fwd_inst: Vec<usize>,
    pub(crate) rec_inst: Vec<Option<usize>>,
    /// Per node: its forward (recomputation) output took over its first input's buffer.
    pub(crate) takes_over: Vec<bool>,
    pub(crate) takes_over_rec: Vec<bool>,
    seg_of: Vec<Option<usize>>,
}

impl Values {
    /// The instance node `c` reads for `src` at its forward (`rec = false`) or at its
    /// recomputation and backward (`rec = true`); `None` for X (not in the pool).
    pub(crate) fn inst_of(&self, src: Src, c: usize, rec: bool) -> Option<usize> {
        match src {
            Src::X => None,
            Src::Xd if rec => self.xd_rec_inst.or(self.xd_inst),
            Src::Xd => self.xd_inst,
            Src::Node(u) => {
                if rec && self.seg_of[c].is_some() && self.seg_of[u] == self.seg_of[c] {
                    self.rec_inst[u].or(Some(self.fwd_inst[u]))
                } else {
                    Some(self.fwd_inst[u])
                }
            }
        }
    }

    /// The end of instance `k`'s interval.
    pub(crate) fn end(&self, k: usize) -> usize {
        self.vals.inst[k].1
    }
}

/// The value instances of `st` on `tl`.
pub(crate) fn values(st: &Stack<'_>, tl: &Timeline) -> Values {
    let n_nodes = st.len();
    let mut vals = Intervals::default();
    let xd_size = st.x_rows * st.x_cols;
    let xd_inst = st.xd_dense.then(|| vals.add(0, 0, xd_size));
    let xd_rec_inst = tl.t_rec_xd.map(|t| vals.add(t, t, xd_size));
    let constant = |i: usize| st.specs[i].constant;
    let fwd_inst: Vec<usize> = (0..n_nodes)
        .map(|i| {
            let size = st.size(i);
            if constant(i) {
                vals.add(0, tl.t_end, size)
            } else {
                vals.add(tl.t_fwd[i], tl.t_fwd[i], size)
            }
        })
        .collect();
    let rec_inst: Vec<Option<usize>> = (0..n_nodes)
        .map(|i| {
            (tl.seg_of[i].is_some() && !constant(i))
                .then(|| vals.add(tl.t_rec[i], tl.t_rec[i], st.size(i)))
        })
        .collect();
    let mut v = Values {
        vals,
        xd_inst,
        xd_rec_inst,
        fwd_inst,
        rec_inst,
        takes_over: vec![false; n_nodes],
        takes_over_rec: vec![false; n_nodes],
        seg_of: tl.seg_of.clone(),
    };
    // Each value lives until its last read: forward, recomputation, or a backward that keeps
    // its inputs.
    for c in 0..n_nodes {
        let keeps = st.specs[c].keeps_input;
        for &src in st.inputs[c] {
            if let Some(k) = v.inst_of(src, c, false) {
                v.vals.extend(k, tl.t_fwd[c]);
            }
            if tl.seg_of[c].is_some() {
                if let Some(k) = v.inst_of(src, c, true) {
                    v.vals.extend(k, tl.t_rec[c]);
                }
            }
            if keeps {
                if let Some(k) = v.inst_of(src, c, true) {
                    v.vals.extend(k, tl.t_bwd[c]);
                }
            }
        }
    }
    v.vals.extend(v.fwd_inst[n_nodes - 1], tl.t_loss);
    // A stored value (read outside its segment) is recomputed into its own buffer.
    for i in 0..n_nodes {
        if let Some(r) = v.rec_inst[i] {
            if v.end(v.fwd_inst[i]) >= tl.t_rec[i] {
                let end = v.end(r);
                v.vals.extend(v.fwd_inst[i], end);
                v.vals.inst[r] = (tl.t_rec[i], tl.t_rec[i], 0);
                v.rec_inst[i] = None;
            }
        }
    }
    take_over_inputs(st, tl, &mut v);
    v
}

/// In place: an output takes over its input's buffer when nothing reads the input later
/// (never a constant node's output, kept for the whole pass); the same for a layer whose
/// output may go over its input ([`Spec::out_over_input`](crate::nn::layer::Spec)), which
/// otherwise runs as an ordinary call (for an in-place layer the input is copied).
fn take_over_inputs(st: &Stack<'_>, tl: &Timeline, v: &mut Values) {
    for c in 0..st.len() {
        let spec = &st.specs[c];
        if !(spec.in_place || spec.out_over_input) || spec.constant {
            continue;
        }
        let src = st.inputs[c][0];
        let from_constant = matches!(src, Src::Node(u) if st.specs[u].constant);
        // (Over the input: only a node's output, a value of every pass.)
        if !spec.in_place && !matches!(src, Src::Node(_)) {
            continue;
        }
        if let Some(k) = v.inst_of(src, c, false) {
            if v.end(k) == tl.t_fwd[c] && !from_constant {
                let f = v.fwd_inst[c];
                v.vals.handoff[f] = Some(k);
                v.takes_over[c] = true;
            }
        }
        if let (Some(r), Some(k)) = (v.rec_inst[c], v.inst_of(src, c, true)) {
            if v.end(k) == tl.t_rec[c] && !from_constant {
                v.vals.handoff[r] = Some(k);
                v.takes_over_rec[c] = true;
            }
        }
    }
}
