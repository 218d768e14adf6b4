//! One level of label propagation: the sweeps over the nodes in parallel blocks, each node's
//! best neighbour community (an open-addressing table per thread), and the tie-breaking hash.

use std::sync::atomic::{AtomicBool, Ordering};

use super::super::Adj;
use super::table::TABLE;
use super::CommunityConfig;
use crate::graph::permutation::ids;
use crate::graph::Permutation;
use crate::kernels::raw::{prefetch_at, prefetch_slice};

/// SplitMix64's finaliser: a fixed, well-mixed hash of a 64-bit word.
#[inline]
pub(in crate::order) fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The tie-breaking priority of community `l` for node `i` in a sweep (`salt`): a pseudo-random
/// but fixed choice among equally frequent communities, different for each node and sweep,
/// so that no community wins every tie (with "smallest id wins", the low ids flood the graph).
#[inline]
pub(in crate::order) fn tie_key(l: u32, i: usize, salt: u64) -> u64 {
    splitmix64(salt ^ (u64::from(l) << 32 | i as u64))
}

/// Nodes per block of a label-propagation sweep on a graph of `n` nodes: n/256 within
/// 1..=[`LP_BLOCK_MAX`], from the node count only (never the thread count). A block's moves
/// are chosen in parallel from the labels as the block starts and applied in visit order; one
/// node a block (graphs up to 511 nodes) is the serial asynchronous propagation.
pub(in crate::order) fn lp_block(n: usize) -> usize {
    (n / 256).clamp(1, LP_BLOCK_MAX)
}

/// Nodes a thread takes at a time in a sweep's block (their choices are independent).
const LP_CHUNK: usize = 128;

/// Rows up to this long have their entries' labels fetched one node ahead (longer rows keep
/// enough loads in flight by themselves).
pub(super) const LP_SHORT_ROW: usize = 256;

/// How many nodes ahead a thread fetches the rows it will read.
pub(super) const LP_AHEAD: usize = 4;

/// The largest block of [`lp_block`].
pub(super) const LP_BLOCK_MAX: usize = 4096;

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
