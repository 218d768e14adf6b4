//! The events of a training pass, in order: the input dropout, each forward call, the loss,
//! then in reverse each segment's recomputation and each backward call; X̃ drawn again before
//! its first read after the loss when the stack redraws it.

use std::ops::Range;

/// One step of a training pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ev {
    Input,
    /// X̃ drawn again (checkpointing) before the first backward-time read of it.
    RecInput,
    Fwd(usize),
    Loss,
    Rec(usize),
    Bwd(usize),
}

/// The events and when each node's calls happen.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Timeline {
    pub(crate) events: Vec<Ev>,
    /// Per node: the segment it belongs to.
    pub(crate) seg_of: Vec<Option<usize>>,
    pub(crate) t_fwd: Vec<usize>,
    /// `usize::MAX` for a node never recomputed.
    pub(crate) t_rec: Vec<usize>,
    pub(crate) t_bwd: Vec<usize>,
    pub(crate) t_loss: usize,
    pub(crate) t_rec_xd: Option<usize>,
    /// The number of events.
    pub(crate) t_end: usize,
}

/// The timeline of `n_nodes` nodes with checkpointed `segments`; with `redraw`, X̃ is drawn
/// again before the first event after the loss for which `reads_xd_late` holds.
pub(crate) fn timeline(
    n_nodes: usize,
    segments: &[Range<usize>],
    redraw: bool,
    reads_xd_late: &dyn Fn(Ev) -> bool,
) -> Timeline {
    let seg_of: Vec<Option<usize>> = (0..n_nodes)
        .map(|i| segments.iter().position(|s| s.contains(&i)))
        .collect();
    let mut events = vec![Ev::Input];
    events.extend((0..n_nodes).map(Ev::Fwd));
    events.push(Ev::Loss);
    for i in (0..n_nodes).rev() {
        if let Some(s) = seg_of[i] {
            if segments[s].end == i + 1 {
                events.extend(segments[s].clone().map(Ev::Rec));
            }
        }
        events.push(Ev::Bwd(i));
    }
    if redraw {
        if let Some(t) = events.iter().position(|&e| reads_xd_late(e)) {
            events.insert(t, Ev::RecInput);
        }
    }
    let mut tl = Timeline {
        seg_of,
        t_fwd: vec![0; n_nodes],
        t_rec: vec![usize::MAX; n_nodes],
        t_bwd: vec![0; n_nodes],
        t_loss: 0,
        t_rec_xd: None,
        t_end: events.len(),
        events: Vec::new(),
    };
    for (t, e) in events.iter().enumerate() {
        match *e {
            Ev::RecInput => tl.t_rec_xd = Some(t),
            Ev::Fwd(i) => tl.t_fwd[i] = t,
            Ev::Rec(i) => tl.t_rec[i] = t,
            Ev::Bwd(i) => tl.t_bwd[i] = t,
            Ev::Loss => tl.t_loss = t,
            Ev::Input => {}
        }
    }
    tl.events = events;
    tl
}

/// The timeline of an evaluation pass of `n_nodes` nodes: the input, each forward call, the
/// loss (the logits' last read). Nothing runs backward, so each node's "backward" is its
/// forward call: a value lives until its last forward read (the last node's input too, which
/// its output may then go over), a saved state only through its own call.
pub(crate) fn eval_timeline(n_nodes: usize) -> Timeline {
    let mut events = vec![Ev::Input];
    events.extend((0..n_nodes).map(Ev::Fwd));
    events.push(Ev::Loss);
    let t_fwd: Vec<usize> = (1..=n_nodes).collect();
    let t_loss = n_nodes + 1;
    let t_bwd = t_fwd.clone();
    Timeline {
        seg_of: vec![None; n_nodes],
        t_fwd,
        t_rec: vec![usize::MAX; n_nodes],
        t_bwd,
        t_loss,
        t_rec_xd: None,
        t_end: events.len(),
        events,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_is_recomputed_just_before_its_last_node_s_backward() {
        // Nodes 0..4, segment 1..3; X̃ read late by node 0's backward.
        let tl = timeline(4, std::slice::from_ref(&(1..3)), true, &|e| e == Ev::Bwd(0));
        use Ev::*;
        assert_eq!(
            tl.events,
            [
                Input,
                Fwd(0),
                Fwd(1),
                Fwd(2),
                Fwd(3),
                Loss,
                Bwd(3),
                Rec(1),
                Rec(2),
                Bwd(2),
                Bwd(1),
                RecInput,
                Bwd(0)
            ]
        );
        assert_eq!(tl.seg_of, [None, Some(0), Some(0), None]);
        assert_eq!((tl.t_loss, tl.t_rec_xd, tl.t_end), (5, Some(11), 13));
        assert_eq!(tl.t_rec, [usize::MAX, 7, 8, usize::MAX]);
        assert_eq!(tl.t_bwd, [12, 10, 9, 6]);
        // No redraw: no RecInput.
        let tl = timeline(4, std::slice::from_ref(&(1..3)), false, &|e| {
            e == Ev::Bwd(0)
        });
        assert!(!tl.events.contains(&RecInput) && tl.t_rec_xd.is_none());
    }
}
