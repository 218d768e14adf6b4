//! Nested label-propagation communities laid out contiguously ([`community_order`]).

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};

use super::classic::by_degree;
use super::Adj;
use crate::graph::permutation::ids;
use crate::graph::{Graph, Permutation};
use crate::kernels::raw::{prefetch_at, prefetch_slice};

/// SplitMix64's finaliser: a fixed, well-mixed hash of a 64-bit word.
#[inline]
pub(super) fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The tie-breaking priority of community `l` for node `i` in a sweep (`salt`): a pseudo-random
/// but fixed choice among equally frequent communities, different for each node and sweep,
/// so that no community wins every tie (with "smallest id wins", the low ids flood the graph).
#[inline]
pub(super) fn tie_key(l: u32, i: usize, salt: u64) -> u64 {
    splitmix64(salt ^ (u64::from(l) << 32 | i as u64))
}

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

/// Nodes per block of a label-propagation sweep on a graph of `n` nodes: n/256 within
/// 1..=[`LP_BLOCK_MAX`], from the node count only (never the thread count). A block's moves
/// are chosen in parallel from the labels as the block starts and applied in visit order; one
/// node a block (graphs up to 511 nodes) is the serial asynchronous propagation.
pub(super) fn lp_block(n: usize) -> usize {
    (n / 256).clamp(1, LP_BLOCK_MAX)
}

/// Nodes a thread takes at a time in a sweep's block (their choices are independent).
const LP_CHUNK: usize = 128;

/// Rows up to this long have their entries' labels fetched one node ahead (longer rows keep
/// enough loads in flight by themselves).
const LP_SHORT_ROW: usize = 256;

/// How many nodes ahead a thread fetches the rows it will read.
const LP_AHEAD: usize = 4;

/// The largest block of [`lp_block`].
pub(super) const LP_BLOCK_MAX: usize = 4096;

thread_local! {
    /// Per-thread scratch of [`best_label`]: an open-addressing table of (community, count),
    /// empty slots holding `u32::MAX`, allocated for the largest row seen (each row uses the
    /// first slots, as many as it needs: [`LabelTable::reserve`]), and the slots a call
    /// filled (emptied again before it returns).
    static TABLE: std::cell::RefCell<LabelTable> =
        const { std::cell::RefCell::new(LabelTable { key: Vec::new(), count: Vec::new(), mask: 0, used: Vec::new(), buf: Vec::new() }) };
}

/// The neighbour-community counts of one node (see [`best_label`]).
struct LabelTable {
    key: Vec<u32>,
    count: Vec<u64>,
    /// The slots in use for the current row are `0..=mask` (sized by [`LabelTable::reserve`]
    /// for that row, not the largest row seen, so that a small row's probes stay in L1).
    mask: usize,
    /// The slots filled, in first-met order.
    used: Vec<u32>,
    /// The communities of a row's entries, gathered first in a loop without branches (so
    /// that the random loads overlap), then counted.
    buf: Vec<u32>,
}

impl LabelTable {
    /// Makes room for a row of `len` entries among `labels` community ids: at least twice
    /// min(`len`, `labels`) slots, a power of two.
    fn reserve(&mut self, len: usize, labels: usize) {
        let want = (2 * len.min(labels)).next_power_of_two().max(16);
        if self.key.len() < want {
            self.key = vec![u32::MAX; want];
            self.count = vec![0; want];
        }
        self.mask = want - 1;
    }

    /// Adds `w` to community `l`'s count (`l` is not `u32::MAX`: ids are below the node count).
    #[inline]
    fn add(&mut self, l: u32, w: u64) {
        let mask = self.mask;
        // Fibonacci hashing of the id, then linear probing.
        let mut s = (u64::from(l).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & mask;
        loop {
            let k = self.key[s];
            if k == l {
                self.count[s] += w;
                return;
            }
            if k == u32::MAX {
                self.key[s] = l;
                self.count[s] = w;
                self.used.push(s as u32);
                return;
            }
            s = (s + 1) & mask;
        }
    }

    /// Each counted community and its count, in the order first added; empties the table.
    #[inline]
    fn drain(&mut self, mut f: impl FnMut(u32, u64)) {
        for &u in &self.used {
            let u = u as usize;
            f(self.key[u], self.count[u]);
            self.key[u] = u32::MAX;
        }
        self.used.clear();
    }
}

/// Node i's most frequent admissible neighbour community (see [`label_propagation`]): its own
/// when that is among the most frequent, else the tie broken by [`tie_key`]; communities
/// without room for `w` more (`size + w > cap`) are not admissible. Entries count with their
/// weights ([`Adj::weight`]).
///
/// The result does not depend on the order in which the communities are examined: the own
/// community is the starting best and is displaced only by a strictly larger count; among
/// other communities of the largest admissible count the smallest tie key wins. So the
/// counts live in a small hash table (in L1 for most rows) rather than an array over all
/// communities, and a community's size is looked up only when it would win.
fn best_label(
    adj: &Adj<'_>,
    i: usize,
    label: &[u32],
    size: &[usize],
    w: usize,
    cap: usize,
    salt: u64,
) -> Pick {
    TABLE.with(|t| {
        let t = &mut *t.borrow_mut();
        let row = adj.row(i);
        t.reserve(row.len(), label.len());
        let own = label[i];
        let mut own_c = 0u64;
        let mut buf = std::mem::take(&mut t.buf);
        buf.clear();
        buf.extend(row.iter().map(|&j| label[j as usize]));
        match adj.row_weights(i) {
            None => {
                for (&j, &l) in row.iter().zip(&buf) {
                    if j as usize == i {
                        continue;
                    }
                    if l == own {
                        own_c += 1;
                    } else {
                        t.add(l, 1);
                    }
                }
            }
            Some(wt) => {
                for ((&j, &l), &x) in row.iter().zip(&buf).zip(wt) {
                    if j as usize == i {
                        continue;
                    }
                    if l == own {
                        own_c += u64::from(x);
                    } else {
                        t.add(l, u64::from(x));
                    }
                }
            }
        }
        t.buf = buf;
        let (mut best, mut best_c) = (own, own_c);
        // The tie key of `best` once computed (`best` is not `own`): on the first sweep all
        // counts tie, and each key is computed once.
        let mut best_key: Option<u64> = None;
        let mut max_other = 0u64;
        t.drain(|l, c| {
            max_other = max_other.max(c);
            if c > best_c {
                if size[l as usize] + w <= cap {
                    (best, best_c, best_key) = (l, c, None);
                }
            } else if c == best_c && best != own {
                let key = tie_key(l, i, salt);
                if key < *best_key.get_or_insert_with(|| tie_key(best, i, salt))
                    && size[l as usize] + w <= cap
                {
                    (best, best_key) = (l, Some(key));
                }
            }
        });
        Pick {
            best,
            own_max: own_c >= max_other,
            best_max: best_c >= max_other,
        }
    })
}

/// What [`best_label`] found for a node: the community to join and whether, with the
/// neighbours' communities as they were, the node would stay put whatever the sizes and the
/// tie salt (its community's count is the largest, admissible or not) if it stays
/// (`own_max`) or once it has moved to `best` (`best_max`).
#[derive(Debug, Clone, Copy, Default)]
struct Pick {
    best: u32,
    own_max: bool,
    best_max: bool,
}

/// Label propagation on `adj` (repeated entries count as edge weights); `weight[i]` is node
/// i's size for the cap `cap` (1 each when `None`). Each sweep takes the visit order in blocks
/// of [`lp_block`] nodes: the block's choices are made in parallel from the labels and sizes
/// as the block starts, then applied in visit order (a move into a community that filled up
/// meanwhile is not made). The result depends on the graph and the seed only.
pub(super) fn propagate(
    adj: &Adj<'_>,
    weight: Option<&[usize]>,
    cap: usize,
    cfg: &CommunityConfig,
) -> Vec<u32> {
    use rayon::prelude::*;
    let n = adj.n();
    let mut label = ids(n);
    let mut size = weight.map_or_else(|| vec![1usize; n], <[usize]>::to_vec);
    let cap = cap.max(1);
    let visit = Permutation::random(n, cfg.seed).into_new_to_old();
    let block = lp_block(n);
    let mut choice = vec![None::<Pick>; block];
    // Skipping settled nodes (exact): a node whose community had the largest count among its
    // neighbours' (`settled`) and none of whose neighbours has moved since (`dirty` false)
    // would choose its own community again, whatever the sizes and the salt, so it is not
    // examined (`None`). The adjacency is symmetric: a move makes the mover's neighbours dirty.
    let mut settled = vec![false; n];
    let mut dirty: Vec<AtomicBool> = (0..n).map(|_| AtomicBool::new(true)).collect();
    let mut moved: Vec<u32> = Vec::with_capacity(block);
    for it in 0..cfg.iterations {
        let salt = splitmix64(cfg.seed ^ (it as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut changed = 0usize;
        for nodes in visit.chunks(block) {
            let choice = &mut choice[..nodes.len()];
            let (label_now, size_now) = (&label[..], &size[..]);
            let (settled_now, dirty_now) = (&settled[..], &dirty[..]);
            let dirty_now = |i: usize| dirty_now[i].load(Ordering::Relaxed);
            let examine = |i: usize| dirty_now(i) || !settled_now[i];
            // A chunk's nodes one after the other, fetching ahead what the next ones read
            // (their rows are random loads: the visit order is random).
            let pick = |(cs, ns): (&mut [Option<Pick>], &[u32])| {
                for (k, (c, &i)) in cs.iter_mut().zip(ns).enumerate() {
                    if let Some(&a) = ns.get(k + 2 * LP_AHEAD) {
                        let a = a as usize;
                        prefetch_at(&adj.ip, a);
                        prefetch_at(settled_now, a);
                        prefetch_at(&dirty[..], a);
                        if let Some(w) = weight {
                            prefetch_at(w, a);
                        }
                    }
                    if let Some(&b) = ns.get(k + LP_AHEAD) {
                        if examine(b as usize) {
                            prefetch_slice(adj.row(b as usize));
                        }
                    }
                    if let Some(&b) = ns.get(k + 1) {
                        if adj.degree(b as usize) <= LP_SHORT_ROW && examine(b as usize) {
                            for &j in adj.row(b as usize) {
                                prefetch_at(label_now, j as usize);
                            }
                        }
                    }
                    let i = i as usize;
                    *c = examine(i).then(|| {
                        let w = weight.map_or(1, |w| w[i]);
                        best_label(adj, i, label_now, size_now, w, cap, salt)
                    });
                }
            };
            if nodes.len() > 1 {
                let chunk = nodes.len().div_ceil(32).min(LP_CHUNK);
                choice
                    .par_chunks_mut(chunk)
                    .zip(nodes.par_chunks(chunk))
                    .for_each(pick);
            } else {
                pick((choice, nodes));
            }
            // Every node of the block saw the labels as the block started.
            for &i in nodes {
                *dirty[i as usize].get_mut() = false;
            }
            moved.clear();
            for (pick, &i) in choice.iter().zip(nodes) {
                let Some(pick) = *pick else { continue };
                let i = i as usize;
                let own = label[i];
                let w = weight.map_or(1, |w| w[i]);
                let best = pick.best;
                if best != own && size[best as usize] + w <= cap {
                    size[own as usize] -= w;
                    size[best as usize] += w;
                    label[i] = best;
                    changed += 1;
                    settled[i] = pick.best_max;
                    moved.push(i as u32);
                } else {
                    settled[i] = pick.own_max;
                }
            }
            // The movers' neighbours, in parallel: a set union, the same for any schedule.
            let mark = |&i: &u32| {
                for &j in adj.row(i as usize) {
                    dirty[j as usize].store(true, Ordering::Relaxed);
                }
            };
            if moved.len() > 1 {
                moved.par_iter().for_each(mark);
            } else {
                moved.iter().for_each(mark);
            }
        }
        if changed == 0 {
            break;
        }
    }
    // Renumber 0..k by first occurrence.
    let mut id = vec![u32::MAX; n];
    let mut k = 0u32;
    for l in label.iter_mut() {
        let slot = &mut id[*l as usize];
        if *slot == u32::MAX {
            *slot = k;
            k += 1;
        }
        *l = *slot;
    }
    label
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

/// The community graph of `comm` (ids `0..k`) on `adj`: one node per community, one entry
/// per pair of communities joined by an edge, weighing the edges (their weights) it stands
/// for. Community c's row lists its neighbour communities in the order they are first met
/// going through c's members by ascending id, each member's row in stored order: the order
/// in which a graph with one repeated entry per edge would first list them, so label
/// propagation and the layout see the same graph, only without the repeats. Built in
/// parallel over blocks of communities; the result does not depend on the blocks.
///
/// # Complexity
/// O(n + nnz) time; O(k) scratch per thread besides the output.
fn community_graph(adj: &Adj<'_>, comm: &[u32], m: &Members) -> Adj<'static> {
    use rayon::prelude::*;
    let (k, mstart, members) = (m.k(), &m.start[..], &m.members[..]);
    let block = k.div_ceil(256).max(1);
    let parts: Vec<Rows> = (0..k.div_ceil(block))
        .into_par_iter()
        .map(|b| {
            let cs = b * block..((b + 1) * block).min(k);
            // At most one entry per entry below: reserved (untouched pages cost nothing) so
            // that the rows never move while they grow.
            let most: usize = members[mstart[cs.start]..mstart[cs.end]]
                .iter()
                .map(|&i| adj.degree(i as usize))
                .sum();
            let (mut lens, mut idx, mut wt) = (
                Vec::with_capacity(cs.len()),
                Vec::with_capacity(most),
                Vec::with_capacity(most),
            );
            TABLE.with(|t| {
                let t = &mut *t.borrow_mut();
                for c in cs {
                    let mine = &members[mstart[c]..mstart[c + 1]];
                    let len: usize = mine.iter().map(|&i| adj.degree(i as usize)).sum();
                    t.reserve(len, k);
                    let mut buf = std::mem::take(&mut t.buf);
                    for &i in mine {
                        let i = i as usize;
                        let row = adj.row(i);
                        buf.clear();
                        buf.extend(row.iter().map(|&j| comm[j as usize]));
                        match adj.row_weights(i) {
                            None => {
                                for &cj in &buf {
                                    if cj as usize != c {
                                        t.add(cj, 1);
                                    }
                                }
                            }
                            Some(ws) => {
                                for (&cj, &x) in buf.iter().zip(ws) {
                                    if cj as usize != c {
                                        t.add(cj, u64::from(x));
                                    }
                                }
                            }
                        }
                    }
                    t.buf = buf;
                    // `used` lists the communities in the order they were first met.
                    lens.push(t.used.len());
                    t.drain(|l, count| {
                        idx.push(l);
                        wt.push(u32::try_from(count).unwrap_or(u32::MAX));
                    });
                }
            });
            (lens, idx, wt)
        })
        .collect();
    rows_into_adj(parts)
}

/// Rows built in parallel blocks (each: its rows' lengths, entries and weights), in order.
type Rows = (Vec<usize>, Vec<u32>, Vec<u32>);

/// The blocks of rows `parts`, in order, as one weighted CSR, copied in parallel.
fn rows_into_adj(parts: Vec<Rows>) -> Adj<'static> {
    use rayon::prelude::*;
    let total: usize = parts.iter().map(|p| p.1.len()).sum();
    let rows: usize = parts.iter().map(|p| p.0.len()).sum();
    let mut ip = Vec::with_capacity(rows + 1);
    ip.push(0usize);
    for (lens, _, _) in &parts {
        for &l in lens {
            ip.push(ip[ip.len() - 1] + l);
        }
    }
    let (mut idx, mut wt) = (vec![0u32; total], vec![0u32; total]);
    let mut slots = Vec::with_capacity(parts.len());
    let (mut ri, mut rw): (&mut [u32], &mut [u32]) = (&mut idx, &mut wt);
    for p in &parts {
        let (hi, ti) = ri.split_at_mut(p.1.len());
        let (hw, tw) = rw.split_at_mut(p.1.len());
        slots.push((hi, hw));
        (ri, rw) = (ti, tw);
    }
    slots
        .into_par_iter()
        .zip(parts.into_par_iter())
        .for_each(|((hi, hw), (_, i, w))| {
            hi.copy_from_slice(&i);
            hw.copy_from_slice(&w);
        });
    Adj {
        ip: Cow::Owned(ip),
        idx: Cow::Owned(idx),
        wt: Some(wt),
    }
}

/// Links of a community graph each community keeps on its own account before the graph goes
/// to the next level ([`prune_links`]).
pub(super) const LINKS_KEPT: usize = 16;

/// The rank of the link between communities `c` and `d` of weight `w`, heaviest first: the
/// weight, then a fixed hash of the unordered pair, so both ends rank a link alike and no two
/// links of one row tie but by a 32-bit hash collision.
#[inline]
pub(super) fn link_key(c: u32, d: u32, w: u32) -> u64 {
    let (a, b) = if c < d { (c, d) } else { (d, c) };
    (u64::from(w) << 32) | (splitmix64(u64::from(a) << 32 | u64::from(b)) & 0xFFFF_FFFF)
}

/// The symmetric community graph `adj` with its light links dropped: with θ(c) the
/// `keep`-th largest [`link_key`] of row c (0 when the row has at most `keep` entries), the
/// link c–d stays iff its key is at least min(θ(c), θ(d)), i.e. iff it is among the `keep`
/// heaviest of c's links or of d's. The result is symmetric, every row keeps its `keep`
/// heaviest links at least (all of them when it has no more), and the kept entries keep their
/// order and weights. The upper levels of products-like's community graphs are near-dense
/// (rows of hundreds to thousands of links, most weighing a few edges): label propagation
/// and the layout there follow the heavy links, and their time is the rows' length. Built in
/// parallel over rows; the result does not depend on the threads.
///
/// # Complexity
/// O(nnz) expected time (one selection per row); O(n) and one row's keys per thread scratch.
pub(super) fn prune_links(adj: Adj<'static>, keep: usize) -> Adj<'static> {
    use rayon::prelude::*;
    let n = adj.n();
    let keep = keep.max(1);
    // Community graphs are weighted; an unweighted graph has no light links to tell apart.
    let Some(wt) = adj.wt.as_deref() else {
        return adj;
    };
    if (0..n).all(|c| adj.degree(c) <= keep) {
        return adj;
    }
    let theta: Vec<u64> = (0..n)
        .into_par_iter()
        .map_init(Vec::new, |keys: &mut Vec<u64>, c| {
            if adj.degree(c) <= keep {
                return 0;
            }
            keys.clear();
            let r = adj.ip[c]..adj.ip[c + 1];
            keys.extend(
                adj.idx[r.clone()]
                    .iter()
                    .zip(&wt[r])
                    .map(|(&d, &w)| link_key(c as u32, d, w)),
            );
            *keys.select_nth_unstable_by(keep - 1, |a, b| b.cmp(a)).1
        })
        .collect();
    let block = n.div_ceil(256).max(1);
    let parts: Vec<Rows> = (0..n.div_ceil(block))
        .into_par_iter()
        .map(|b| {
            let cs = b * block..((b + 1) * block).min(n);
            let (mut lens, mut idx, mut w) = (Vec::with_capacity(cs.len()), Vec::new(), Vec::new());
            for c in cs {
                let r = adj.ip[c]..adj.ip[c + 1];
                let before = idx.len();
                for (&d, &x) in adj.idx[r.clone()].iter().zip(&wt[r]) {
                    // θ = 0: a row short enough to keep all its links; no key to compute.
                    let t = theta[c].min(theta[d as usize]);
                    if t == 0 || link_key(c as u32, d, x) >= t {
                        idx.push(d);
                        w.push(x);
                    }
                }
                lens.push(idx.len() - before);
            }
            (lens, idx, w)
        })
        .collect();
    rows_into_adj(parts)
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
