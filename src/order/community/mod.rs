//! Nested label-propagation communities laid out contiguously ([`community_order`]).
//!
//! This file holds the configuration, the nesting (communities of communities, up to
//! [`MAX_LEVELS`]) and the layout of one level; `sweep` is one level of label propagation,
//! `table` the per-thread count table its sweeps and the community graph share, `coarsen` the
//! graph of communities one level up.

use std::collections::VecDeque;

use super::classic::by_degree;
use super::Adj;
use crate::graph::{Graph, Permutation};
use crate::kernels::raw::{prefetch_at, prefetch_slice};

pub(super) mod coarsen;
pub(super) mod sweep;
mod table;

use coarsen::{community_graph, prune_links, LINKS_KEPT};
use sweep::{propagate, LP_AHEAD, LP_SHORT_ROW};

/// Parameters of [`label_propagation`] and [`community_order`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommunityConfig {
    /// Sweeps over all nodes (fewer if no label changes in a sweep). Five by default: more
    /// sweeps left the modelled cache misses of the community order of arxiv-like and
    /// products-like unchanged (the `model` line of `sparse-gcn roofline`) at up to three
    /// times the time, and three left a planted block of the order tests under 80 %
    /// contiguous.
    pub iterations: usize,
    /// Seed of the order in which each sweep visits the nodes.
    pub seed: u64,
    /// Largest community size allowed, in nodes (size-constrained label propagation): a node
    /// never joins a community that already has this many nodes. `None`: no limit. In
    /// [`community_order`] it caps the finest level, and each coarser level allows
    /// 16 times more.
    pub max_size: Option<usize>,
}

/// [`CommunityConfig::max_size`] by default. Unconstrained label propagation can let one
/// community flood most of a graph (on `arxiv-like` with weaker topics it ended with 58
/// communities, one holding most nodes); small capped communities, nested level by level,
/// avoid that.
pub const DEFAULT_MAX_COMMUNITY: usize = 64;

impl Default for CommunityConfig {
    fn default() -> Self {
        CommunityConfig {
            iterations: 5,
            seed: 0,
            max_size: Some(DEFAULT_MAX_COMMUNITY),
        }
    }
}

/// Label propagation (Raghavan, Albert & Kumara 2007) on the graph structure: every node starts
/// in its own community, then each sweep visits the nodes in a seeded random order (one order
/// for all sweeps) and moves each to the most frequent community among its neighbours
/// (self-loops ignored), keeping its own when that is among the most frequent and otherwise
/// breaking the tie by a fixed hash of (community, node, sweep, seed), a reproducible stand-in
/// for the usual random choice (always taking the smallest id lets the low ids flood the
/// graph). With [`CommunityConfig::max_size`], full communities admit no new node. A sweep
/// takes the nodes in blocks whose moves are chosen in parallel from the labels as the block
/// starts and applied in visit order, so the result depends on the graph and the seed only,
/// never on the thread count. A node whose community had the largest count among its
/// neighbours' and none of whose neighbours has moved since is not examined again: it would
/// stay (the result is that of examining every node every sweep). Returns one community id
/// per node, numbered `0..k` by first occurrence.
///
/// # Complexity
/// O(iterations·(n + nnz)) time at most (later sweeps examine only the nodes near a move),
/// O(n) memory besides the graph.
pub fn label_propagation(graph: &Graph, cfg: &CommunityConfig) -> Vec<u32> {
    let adj = Adj::new(graph);
    let cap = cfg.max_size.unwrap_or(usize::MAX);
    propagate(&adj, None, cap, cfg)
}

/// The community order: nested [`label_propagation`] communities, each laid out contiguously.
///
/// Level 0 finds communities of nodes (at most [`CommunityConfig::max_size`] nodes each) and
/// lays each out contiguously. Communities are placed greedily along the community graph,
/// starting from the community of the highest-degree node: after a community, the next one is
/// the unplaced community with the most edges to it (entered at the first node met there);
/// when it has no unplaced neighbour, the oldest queued neighbour of an earlier community;
/// when there is none (a new component), the highest-degree node left. Inside a community the
/// nodes follow a breadth-first search from that entry node (members it cannot reach follow,
/// by id). Strongly linked communities thus sit side by side (e.g. two halves of one planted
/// block).
///
/// Then the same is done one level up, on the community graph (a node per community, an entry
/// per linked pair weighing the edges between them, only each community's 16 heaviest links
/// and the links that are among the 16 heaviest of their other end kept, sizes counted in
/// nodes, a cap 16 times larger), and the level-0 blocks are placed in the order of that
/// level's layout; and so on, up to 6 levels, until a level merges fewer than half of its
/// nodes. Small communities (topics) thus sit inside
/// larger ones (fields), which is what keeps most gathers of an SpMM inside the caches; it is
/// the idea of Rabbit Order (Arai et al., IPDPS 2016) with label propagation in place of
/// modularity merging.
///
/// # Complexity
/// That of [`label_propagation`] plus O(n + nnz), per level; each level's graph is at most as
/// large as the one below.
///
/// # Examples
/// ```
/// use sparse_gcn::graph::{Direction, Graph};
/// use sparse_gcn::order::{{community_order, CommunityConfig}};
/// // two triangles {0, 2, 4} and {1, 3, 5} joined by the edge 4–5
/// let e = [(0, 2), (2, 4), (4, 0), (1, 3), (3, 5), (5, 1), (4, 5)];
/// let g = Graph::try_from_edges(6, &e, Direction::Undirected).unwrap();
/// let p = community_order(&g, &CommunityConfig::default());
/// let mut first: Vec<u32> = p.new_to_old()[..3].to_vec();
/// first.sort();
/// assert!(first == [0, 2, 4] || first == [1, 3, 5]);
/// ```
pub fn community_order(graph: &Graph, cfg: &CommunityConfig) -> Permutation {
    let adj = Adj::new(graph);
    let n = adj.n();
    let cap = cfg.max_size.unwrap_or(usize::MAX);
    let out = nested_order(&adj, &vec![1usize; n], cap, cfg, 0);
    Permutation::from_new_to_old_trusted(out)
}

/// Levels of communities of communities at most.
pub(super) const MAX_LEVELS: usize = 6;

/// The nested community order of `adj` (nodes of sizes `weight`): communities by label
/// propagation, laid out contiguously, the communities themselves in the nested community
/// order of the community graph ([`community_graph`]) without its light links
/// ([`prune_links`]).
pub(super) fn nested_order(
    adj: &Adj<'_>,
    weight: &[usize],
    cap: usize,
    cfg: &CommunityConfig,
    level: usize,
) -> Vec<u32> {
    let n = adj.n();
    let comm = propagate(adj, Some(weight), cap, cfg);
    let m = Members::new(&comm);
    let flat = layout_communities(adj, &comm, &m).into_new_to_old();
    let k = m.k();
    if level + 1 >= MAX_LEVELS || k < 2 || 2 * k > n {
        return flat;
    }
    let cadj = prune_links(community_graph(adj, &comm, &m), LINKS_KEPT);
    let mut csize = vec![0usize; k];
    for (i, &c) in comm.iter().enumerate() {
        csize[c as usize] += weight[i];
    }
    let corder = nested_order(
        &cadj,
        &csize,
        cap.saturating_mul(LEVEL_GROWTH),
        cfg,
        level + 1,
    );
    // Each community's block of `flat`, in the communities' order.
    let mut start = vec![0usize; k + 1];
    for &v in &flat {
        start[comm[v as usize] as usize + 1] += 1;
    }
    for c in 0..k {
        start[c + 1] += start[c];
    }
    let mut pos = vec![0usize; k];
    let mut seen = vec![false; k];
    for (r, &v) in flat.iter().enumerate() {
        let c = comm[v as usize] as usize;
        if !seen[c] {
            seen[c] = true;
            pos[c] = r;
        }
    }
    let mut out = Vec::with_capacity(n);
    for &c in &corder {
        let c = c as usize;
        let len = start[c + 1] - start[c];
        out.extend_from_slice(&flat[pos[c]..pos[c] + len]);
    }
    out
}

/// The members of each community `0..k`, by ascending id (a counting sort): community c's are
/// `members[start[c]..start[c + 1]]`. Computed once per level for the layout and the
/// community graph.
pub(super) struct Members {
    start: Vec<usize>,
    members: Vec<u32>,
}

impl Members {
    pub(super) fn new(comm: &[u32]) -> Self {
        let k = comm.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
        let mut start = vec![0usize; k + 1];
        for &c in comm {
            start[c as usize + 1] += 1;
        }
        for c in 0..k {
            start[c + 1] += start[c];
        }
        let mut members = vec![0u32; comm.len()];
        let mut fill = start.clone();
        for (i, &c) in comm.iter().enumerate() {
            members[fill[c as usize]] = i as u32;
            fill[c as usize] += 1;
        }
        Members { start, members }
    }

    /// The number of communities.
    fn k(&self) -> usize {
        self.start.len() - 1
    }
}

/// Growth of the community size cap from one level to the next.
pub(super) const LEVEL_GROWTH: usize = 16;

/// Lays out the communities `comm` (ids `0..k`) contiguously, see [`community_order`].
pub(super) fn layout_communities(adj: &Adj<'_>, comm: &[u32], m: &Members) -> Permutation {
    let n = adj.n();
    let (k, mstart, members) = (m.k(), &m.start[..], &m.members[..]);
    // `fill[c]` scans community c's members for ones the search did not reach.
    let mut fill = mstart[..k].to_vec();

    // Per node: PLACED once laid out (final), QUEUED once in `frontier` — a node is queued
    // once, at its first meeting, since a later copy of it would be popped after the first,
    // when its community is placed already. One byte for both: one random load per entry.
    const PLACED: u8 = 1;
    const QUEUED: u8 = 2;
    let mut state = vec![0u8; n];
    let mut done = vec![false; k];
    let mut frontier: VecDeque<u32> = VecDeque::new();
    let seeds = by_degree(adj, true);
    let mut next_seed = 0usize;
    let mut out: Vec<u32> = Vec::with_capacity(n);
    // Edges from the current community to each unplaced one, and the first node met there.
    let mut links = vec![0u64; k];
    let mut met = vec![0u32; k];
    let mut touched: Vec<u32> = Vec::new();
    let mut row_comm: Vec<u32> = Vec::new();
    let mut next: Option<u32> = None;
    loop {
        // The entry node of the next community: in the unplaced community most connected to
        // the last one, else the oldest queued neighbour of any placed community, else the
        // highest-degree node left.
        let mut entry = next.take();
        while entry.is_none() {
            let Some(v) = frontier.pop_front() else { break };
            if !done[comm[v as usize] as usize] {
                entry = Some(v);
            }
        }
        if entry.is_none() {
            while next_seed < n && done[comm[seeds[next_seed] as usize] as usize] {
                next_seed += 1;
            }
            entry = seeds.get(next_seed).copied();
        }
        let Some(entry) = entry else { break };
        let c = comm[entry as usize];
        done[c as usize] = true;
        state[entry as usize] |= PLACED;
        out.push(entry);
        let mut head = out.len() - 1;
        loop {
            while head < out.len() {
                let u = out[head] as usize;
                head += 1;
                // The nodes placed ahead are searched next: fetch their rows and what the
                // search reads of their entries (random loads) while this one is searched.
                if let Some(&a) = out.get(head + 2 * LP_AHEAD) {
                    prefetch_at(&adj.ip, a as usize);
                }
                if let Some(&b) = out.get(head + LP_AHEAD) {
                    prefetch_slice(adj.row(b as usize));
                }
                if let Some(&b) = out.get(head) {
                    let row = adj.row(b as usize);
                    if row.len() <= LP_SHORT_ROW {
                        for &v in row {
                            prefetch_at(comm, v as usize);
                            prefetch_at(&state, v as usize);
                        }
                    }
                }
                let ws = adj.row_weights(u);
                let row = adj.row(u);
                // The row's communities first, in a loop without branches (the random loads
                // overlap), then the search over them.
                row_comm.clear();
                row_comm.extend(row.iter().map(|&v| comm[v as usize]));
                for (e, (&v, &cv)) in row.iter().zip(&row_comm).enumerate() {
                    let vu = v as usize;
                    let st = state[vu];
                    if st & PLACED != 0 {
                        continue;
                    }
                    if cv == c {
                        state[vu] = st | PLACED;
                        out.push(v);
                    } else if !done[cv as usize] {
                        if st & QUEUED == 0 {
                            state[vu] = st | QUEUED;
                            frontier.push_back(v);
                        }
                        if links[cv as usize] == 0 {
                            touched.push(cv);
                            met[cv as usize] = v;
                        }
                        links[cv as usize] += ws.map_or(1, |w| u64::from(w[e]));
                    }
                }
            }
            // Members the search did not reach (a community need not be connected).
            let end = mstart[c as usize + 1];
            let f = &mut fill[c as usize];
            while *f < end && state[members[*f] as usize] & PLACED != 0 {
                *f += 1;
            }
            if *f == end {
                break;
            }
            let m = members[*f];
            state[m as usize] |= PLACED;
            out.push(m);
        }
        // The most connected unplaced neighbour community (the first met on ties).
        let mut best: Option<u32> = None;
        for &cv in &touched {
            if best.is_none_or(|b| links[cv as usize] > links[b as usize]) {
                best = Some(cv);
            }
        }
        next = best.map(|b| met[b as usize]);
        for &cv in &touched {
            links[cv as usize] = 0;
        }
        touched.clear();
    }
    Permutation::from_new_to_old_trusted(out)
}
