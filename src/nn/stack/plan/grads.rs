//! The gradient instances of a pass: each node's ∂L/∂out lives from its first contribution (or
//! the loss) to the node's backward call. An in-place backward hands its buffer to its input's
//! gradient when it is the first contribution, or leaves ∂L/∂in over the kept input when the
//! layer can and nothing reads that input after the call; later contributions go through a
//! temporary and an add. ∂L/∂logits is written over the logits.

use super::events::Timeline;
use super::values::Values;
use super::Stack;
use crate::nn::layer::GradMode;
use crate::nn::stack::Src;

/// The gradient side of a plan (instances in the values' [`Intervals`](super::intervals)).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Grads {
    /// Per node: the instance of ∂L/∂out.
    pub(crate) g_inst: Vec<Option<usize>>,
    /// ∂L/∂logits' instance.
    pub(crate) dlogits: usize,
    /// Per in-place node: whether ∂L/∂in is needed, and the instance to add it into when it is
    /// not the first contribution.
    pub(crate) in_place: Vec<Option<(bool, Option<usize>)>>,
    /// Per node: the value instance over which ∂L/∂in is left (granted).
    pub(crate) over: Vec<Option<usize>>,
    /// Per separate-gradient node: per input, the instance its gradient is written into.
    pub(crate) din: Vec<Vec<Option<usize>>>,
    /// Per node: accumulations after its backward call (from, to, width).
    pub(crate) adds: Vec<Vec<(usize, usize, usize)>>,
}

/// The gradient instances of `st` (nodes whose output `need`s a gradient run backward), added
/// to `v`'s intervals; `grant` says whether a [`GradMode::OverInput`] node may be granted.
pub(crate) fn grads(
    st: &Stack<'_>,
    tl: &Timeline,
    v: &mut Values,
    need: &[bool],
    grant: bool,
) -> Grads {
    let n_nodes = st.len();
    let last = n_nodes - 1;
    let mut g = Grads {
        g_inst: vec![None; n_nodes],
        dlogits: 0,
        in_place: vec![None; n_nodes],
        over: vec![None; n_nodes],
        din: vec![Vec::new(); n_nodes],
        adds: vec![Vec::new(); n_nodes],
    };
    let dlogits = v.vals.add(tl.t_loss, tl.t_bwd[last], st.size(last));
    // ∂L/∂logits over the logits (the loss reads nothing else after it).
    if !st.specs[last].constant && v.end(v.fwd_inst[last]) == tl.t_loss {
        v.vals.handoff[dlogits] = Some(v.fwd_inst[last]);
    }
    g.dlogits = dlogits;
    g.g_inst[last] = Some(dlogits);
    for c in (0..n_nodes).rev() {
        if !need[c] {
            continue;
        }
        let dout = g.g_inst[c].unwrap_or_else(|| unreachable!("the gradient of node {c}"));
        let spec = &st.specs[c];
        if spec.grad_in_place() {
            g.in_place[c] = Some(in_place(st, tl, v, &mut g, need, grant, c, dout));
        } else {
            separate(st, tl, v, &mut g, need, c);
        }
    }
    g
}

/// The gradient of an in-place node `c` whose ∂L/∂out is instance `dout`: whether ∂L/∂in is
/// needed, and where to add it.
#[allow(clippy::too_many_arguments)]
fn in_place(
    st: &Stack<'_>,
    tl: &Timeline,
    v: &mut Values,
    g: &mut Grads,
    need: &[bool],
    grant: bool,
    c: usize,
    dout: usize,
) -> (bool, Option<usize>) {
    let src = st.inputs[c][0];
    let Src::Node(u) = src else {
        return (false, None);
    };
    let spec = &st.specs[c];
    // ∂L/∂in over the input: its first contribution, and nothing reads the input after this
    // call.
    let kept = v
        .inst_of(src, c, true)
        .filter(|&k| v.end(k) == tl.t_bwd[c] && !st.specs[u].constant);
    let can = grant && matches!(spec.grad, GradMode::OverInput { .. }) && spec.keeps_input;
    // (∂L/∂in has the input's rows: a block's sources.)
    let in_size = st.size(u);
    match kept {
        Some(k) if can && need[u] && g.g_inst[u].is_none() => {
            let gi = v.vals.add(tl.t_bwd[c], tl.t_bwd[u], in_size);
            v.vals.handoff[gi] = Some(k);
            g.g_inst[u] = Some(gi);
            g.over[c] = Some(k);
            (true, None)
        }
        _ if need[u] => {
            v.vals.inst[dout].2 = v.vals.inst[dout].2.max(in_size);
            match g.g_inst[u] {
                None => {
                    let gi = v.vals.add(tl.t_bwd[c], tl.t_bwd[u], in_size);
                    v.vals.handoff[gi] = Some(dout);
                    g.g_inst[u] = Some(gi);
                    (true, None)
                }
                Some(gi) => (true, Some(gi)),
            }
        }
        _ => (false, None),
    }
}

/// The gradients of a separate-gradient node `c`: the first contribution to an input's
/// gradient is written in place of it, later ones through a temporary and an add.
fn separate(st: &Stack<'_>, tl: &Timeline, v: &mut Values, g: &mut Grads, need: &[bool], c: usize) {
    let mut dins = vec![None; st.inputs[c].len()];
    for (k, src) in st.inputs[c].iter().enumerate() {
        let Src::Node(u) = *src else { continue };
        if !need[u] {
            continue;
        }
        let w = st.specs[u].out_dim;
        match g.g_inst[u] {
            None => {
                let gi = v.vals.add(tl.t_bwd[c], tl.t_bwd[u], st.rows[u] * w);
                g.g_inst[u] = Some(gi);
                dins[k] = Some(gi);
            }
            Some(gi) => {
                let tmp = v.vals.add(tl.t_bwd[c], tl.t_bwd[c], st.rows[u] * w);
                dins[k] = Some(tmp);
                g.adds[c].push((tmp, gi, w));
            }
        }
    }
    g.din[c] = dins;
}
