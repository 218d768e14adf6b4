//! The plan of a model's buffers for passes of at most `caps` rows, in phases, each a small
//! function over the previous ones' results:
//!
//! 1. [`nodes`]: what each node is in a pass (gradient needed, inputs fixed in training and in
//!    evaluation, what the layer is told of its inputs) and each layer's [`Spec`];
//! 2. [`segments`]: activation checkpointing's recomputed segments;
//! 3. [`events`]: the events of a training pass and when each call happens;
//! 4. [`values`]: the value instances and their intervals, in-place takeovers;
//! 5. [`grads`]: the gradient instances, over-input grants, accumulations;
//! 6. [`calls`]: scratch instances, the saved states' pool, and every call's buffers;
//!
//! with [`intervals`] assigning buffers to instances by interval (best fit). Values, gradients
//! and scratch of `F` share one pool: a value read for the last time by a backward call hosts a
//! gradient written after it. Every size is for `cap` rows and every layer's request grows
//! with the rows, so a pass over fewer rows fits the same buffers.

pub(crate) mod calls;
pub(crate) mod events;
pub(crate) mod grads;
pub(crate) mod intervals;
pub(crate) mod nodes;
pub(crate) mod segments;
pub(crate) mod values;

pub(crate) use calls::{BwdCall, Call};
pub(crate) use events::Ev;

use super::{Checkpointing, Model, Src};
use crate::graph::Caps;
use crate::input::Features;
use crate::nn::layer::{InputDesc, Req, Spec};
use crate::{Error, Result, Scalar};

/// The stack as the phases see it: each node's sources and [`Spec`], the rows planned for
/// each node's output and for the features, and the features' width.
#[derive(Debug)]
pub(crate) struct Stack<'a> {
    pub(crate) inputs: Vec<&'a [Src]>,
    pub(crate) specs: &'a [Spec],
    /// Per node, the rows of its output.
    pub(crate) rows: Vec<usize>,
    /// The rows of X (and X̃).
    pub(crate) x_rows: usize,
    pub(crate) x_cols: usize,
    /// Dense features with dropout: X̃ has a buffer of the pool.
    pub(crate) xd_dense: bool,
}

impl Stack<'_> {
    /// Nodes.
    pub(crate) fn len(&self) -> usize {
        self.inputs.len()
    }

    /// The width of a source.
    pub(crate) fn width(&self, s: Src) -> usize {
        match s {
            Src::X | Src::Xd => self.x_cols,
            Src::Node(j) => self.specs[j].out_dim,
        }
    }

    /// The elements of node `j`'s output (its rows × its width).
    pub(crate) fn size(&self, j: usize) -> usize {
        self.rows[j] * self.specs[j].out_dim
    }
}

/// The level of each node's output in a stack of `top` bipartite blocks (level 0: the
/// features' rows; a layer of one hop ([`Layer::hops`](crate::nn::Layer::hops)) writes the
/// level above its input's, any other layer its input's); the last node must reach level
/// `top` (the seeds). All 0 for a whole graph (`top` = 0).
///
/// # Errors
/// [`ConfigError::Stack`](crate::ConfigError::Stack) for a layer of more than one hop, a
/// layer reading values of two levels, or another number of hops than blocks.
pub(crate) fn levels<F: Scalar>(nodes: &[super::Node<F>], top: usize) -> Result<Vec<usize>> {
    let mut lv: Vec<usize> = Vec::with_capacity(nodes.len());
    if top == 0 {
        return Ok(vec![0; nodes.len()]);
    }
    let bad = |m: String| Err(Error::Config(crate::ConfigError::Stack(m)));
    for (i, nd) in nodes.iter().enumerate() {
        let of = |s: &Src| match s {
            Src::X | Src::Xd => 0,
            Src::Node(j) => lv[*j],
        };
        let input = nd.inputs.first().map_or(0, of);
        let name = nd.layer.name();
        if nd.inputs.iter().any(|s| of(s) != input) {
            return bad(format!(
                "node {i} ({name}) reads values of two levels of the blocks (each level's rows \
                 are another node set): a stack of blocks takes chains of layers"
            ));
        }
        let out = match nd.layer.hops() {
            Some(0) => input,
            Some(1) => input + 1,
            Some(h) => {
                return bad(format!(
                    "node {i} ({name}) propagates {h} times in one layer: a stack of blocks \
                     gives each layer one block"
                ))
            }
            None => {
                return bad(format!(
                    "node {i} ({name}) does not run over bipartite blocks (its layer declares \
                     no hops, Layer::hops)"
                ))
            }
        };
        if out > top {
            return bad(format!(
                "node {i} ({name}) needs a block beyond the {top} the batch has"
            ));
        }
        lv.push(out);
    }
    match lv.last() {
        Some(&l) if l == top => Ok(lv),
        l => bad(format!(
            "the model propagates {} times, the batch has {top} blocks",
            l.copied().unwrap_or(0)
        )),
    }
}

/// What passes of at most `caps` rows need, computed once.
#[derive(Debug)]
pub(crate) struct Plan {
    /// Rows planned for at each level (one level for a whole graph; level 0 the features' of
    /// a stack of blocks): every pass has at most this many.
    pub(crate) caps: Vec<usize>,
    /// Per node, the level of its output, and of its inputs.
    pub(crate) level: Vec<usize>,
    pub(crate) in_level: Vec<usize>,
    pub(crate) x_sparse: bool,
    pub(crate) x_cols: usize,
    /// Per node: what the layer was told of each input, and its answer.
    pub(crate) descs: Vec<Vec<InputDesc>>,
    pub(crate) specs: Vec<Spec>,
    /// The operations of Â the layers use.
    pub(crate) needs: Caps,
    pub(crate) events: Vec<Ev>,
    pub(crate) fwd: Vec<Call>,
    pub(crate) rec: Vec<Option<Call>>,
    pub(crate) bwd: Vec<BwdCall>,
    /// The dense X̃ buffer (dense features with input dropout).
    pub(crate) xd_slot: Option<usize>,
    /// The buffer of X̃ drawn again for the reads after the loss ([`Ev::RecInput`]).
    pub(crate) xd_rec_slot: Option<usize>,
    pub(crate) out_slot: usize,
    pub(crate) dlogits_slot: usize,
    /// Whether a node's inputs are all fixed in a training / an evaluation pass.
    pub(crate) fixed_train: Vec<bool>,
    pub(crate) fixed_eval: Vec<bool>,
    /// Index of each mask-drawing node among the sites (Shared streams), +1 for the input.
    pub(crate) site_index: Vec<Option<usize>>,
    pub(crate) n_sites: usize,
    /// Sizes of the pool's buffers (values, gradients, scratch of `F`).
    pub(crate) pool_sizes: Vec<usize>,
    pub(crate) saved_sizes: Vec<Req>,
    /// Scratch of u8 and f64: the largest request.
    pub(crate) scratch: Req,
}

impl Plan {
    /// The dense X̃ buffer of the forward pass, or (`rec`) of the reads after the loss.
    pub(crate) fn xd_slot(&self, rec: bool) -> Option<usize> {
        match self.xd_rec_slot {
            Some(s) if rec => Some(s),
            _ => self.xd_slot,
        }
    }

    /// Whether node `i`'s output is computed once per Â and features.
    pub(crate) fn constant(&self, i: usize) -> bool {
        self.specs[i].constant
    }

    /// Whether a pass of `rows` rows at each level fits the plan.
    pub(crate) fn holds(&self, rows: &[usize]) -> bool {
        rows.len() == self.caps.len() && rows.iter().zip(&self.caps).all(|(r, c)| r <= c)
    }
}

impl<F: Scalar> Model<F> {
    /// The plan for passes of at most `caps[l]` rows at each level l on features like `x`
    /// (`[n]` for a whole graph; level 0 the features' rows of a stack of `caps.len() - 1`
    /// blocks, see [`levels`]); with `eval`, for evaluation passes only (no backward: every
    /// value freed after its last forward read, the saved states of the calls sharing their
    /// buffers, no gradient but ∂L/∂logits over the logits).
    ///
    /// # Errors
    /// [`Error::Mismatch`] when an input's width is not the one its layer reads; as
    /// [`levels`].
    pub(crate) fn plan(&mut self, caps: &[usize], x: &Features<F>, eval: bool) -> Result<Plan> {
        let level = levels(&self.nodes, caps.len().saturating_sub(1))?;
        let in_level: Vec<usize> = self
            .nodes
            .iter()
            .map(|nd| match nd.inputs.first() {
                Some(Src::Node(j)) => level[*j],
                _ => 0,
            })
            .collect();
        let cap_of = |l: usize| caps.get(l).copied().unwrap_or(0);
        let has_params: Vec<bool> = self
            .nodes
            .iter_mut()
            .map(|nd| {
                let mut has = false;
                nd.layer.visit_params(&mut |_, _| has = true);
                has
            })
            .collect();
        let xd_dropped = self.input_dropout > 0.0;
        let x_sparse = x.is_sparse();
        let nodes = &self.nodes;
        let set = nodes::Setting {
            x_sparse,
            xd_dropped,
            varying_graph: self.opts.varying_graph,
            forward_only: eval,
        };
        let inputs: Vec<&[Src]> = nodes.iter().map(|nd| &nd.inputs[..]).collect();
        let d = nodes::describe(&inputs, &has_params, set, &mut |i, descs| {
            // (A layer of one hop: its inputs have the level below's rows.)
            let (rows_in, rows) = (cap_of(in_level[i]), cap_of(level[i]));
            if rows_in > rows {
                let descs: Vec<InputDesc> = descs
                    .iter()
                    .map(|d| InputDesc {
                        src_rows: rows_in,
                        ..*d
                    })
                    .collect();
                nodes[i].layer.spec(&descs, rows)
            } else {
                nodes[i].layer.spec(descs, rows)
            }
        });
        if let Some((i, k, src, want, got)) = nodes::width_mismatch(&inputs, &d.specs, x.n_cols()) {
            let source = match src {
                Src::X | Src::Xd => "the features' columns".to_string(),
                Src::Node(j) => format!("the output width of node {j} ({})", nodes[j].layer.name()),
            };
            return Err(Error::Mismatch {
                what: format!(
                    "input {k} of node {i} ({}): the width the layer reads vs {source}",
                    nodes[i].layer.name()
                ),
                expected: want,
                got,
            });
        }
        let segments = if eval {
            Vec::new()
        } else {
            segments::segments(&self.blocks, self.opts.checkpoint, &d.specs)
        };
        // Under checkpointing, a dense X̃ read after the loss (by a layer that keeps it, or by
        // a recomputed one) is drawn again just before that read, from the same stream
        // positions, rather than held from the forward pass.
        let redraw =
            !eval && self.opts.checkpoint != Checkpointing::None && xd_dropped && !x_sparse;
        let reads_xd = |c: usize| inputs[c].contains(&Src::Xd);
        let late = |e: Ev| match e {
            Ev::Rec(c) => reads_xd(c),
            Ev::Bwd(c) => reads_xd(c) && d.specs[c].keeps_input,
            _ => false,
        };
        let tl = if eval {
            events::eval_timeline(nodes.len())
        } else {
            events::timeline(nodes.len(), &segments, redraw, &late)
        };
        // Which outputs need a gradient: none in evaluation.
        let need = if eval {
            vec![false; nodes.len()]
        } else {
            d.need.clone()
        };
        let st = Stack {
            inputs,
            specs: &d.specs,
            rows: level.iter().map(|&l| cap_of(l)).collect(),
            x_rows: cap_of(0),
            x_cols: x.n_cols(),
            // (Evaluation drops nothing: no X̃ buffer.)
            xd_dense: xd_dropped && !x_sparse && !eval,
        };
        let mut v = values::values(&st, &tl);
        let g = grads::grads(&st, &tl, &mut v, &need, true);
        // Each node's temporaries, with its over-input grant.
        let reqs: Vec<Req> = (0..st.len())
            .map(|c| d.specs[c].scratch_of(g.over[c].is_some()))
            .collect();
        let scr = calls::scratch(&tl, &mut v, &reqs, &need);
        // (A handoff chain's buffer takes its largest member's size in `assign`.)
        let (slot, pool_sizes) = v.vals.assign();
        let saved_reqs: Vec<Req> = d.specs.iter().map(|s| s.saved).collect();
        let saved = calls::saved(&tl, &saved_reqs);
        let parts = calls::Parts {
            st: &st,
            tl: &tl,
            v: &v,
            g: &g,
            scr: &scr,
            saved: &saved,
            slot: &slot,
        };
        let n_nodes = st.len();
        let fwd: Vec<Call> = (0..n_nodes).map(|c| parts.call(c, false)).collect();
        let rec: Vec<Option<Call>> = (0..n_nodes)
            .map(|c| tl.seg_of[c].map(|_| parts.call(c, true)))
            .collect();
        let bwd: Vec<BwdCall> = (0..n_nodes).map(|c| parts.bwd(c, need[c])).collect();
        let scratch = reqs
            .iter()
            .map(|r| Req { f: 0, ..*r })
            .fold(Req::default(), Req::max);
        let (site_index, n_sites) = sites(&d.specs, xd_dropped);
        let needs = d
            .specs
            .iter()
            .fold(Caps::default(), |a, s| a.union(s.needs));
        Ok(Plan {
            caps: caps.to_vec(),
            level,
            in_level,
            x_sparse,
            x_cols: x.n_cols(),
            needs,
            events: tl.events.clone(),
            out_slot: fwd[n_nodes - 1].out,
            dlogits_slot: slot[g.dlogits],
            fwd,
            rec,
            bwd,
            xd_slot: v.xd_inst.map(|k| slot[k]),
            xd_rec_slot: v.xd_rec_inst.map(|k| slot[k]),
            fixed_train: d.fixed_train,
            fixed_eval: d.fixed_eval,
            descs: d.descs,
            site_index,
            n_sites,
            pool_sizes,
            saved_sizes: saved.sizes,
            scratch,
            specs: d.specs,
        })
    }
}

/// Mask sites (Shared streams): the input (when dropped), then every mask-drawing node in
/// order; returns each node's site and their number.
fn sites(specs: &[Spec], xd_dropped: bool) -> (Vec<Option<usize>>, usize) {
    let mut n_sites = usize::from(xd_dropped);
    let index = specs
        .iter()
        .map(|s| {
            s.draws_mask.then(|| {
                n_sites += 1;
                n_sites - 1
            })
        })
        .collect();
    (index, n_sites)
}

#[cfg(test)]
mod tests;
