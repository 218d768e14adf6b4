//! The graph of communities one level up: one node per community, its links weighing the edges
//! they stand for ([`community_graph`]), and the pruning of its light links ([`prune_links`]).

use std::borrow::Cow;

use super::super::Adj;
use super::sweep::splitmix64;
use super::table::TABLE;
use super::Members;

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
pub(super) fn community_graph(adj: &Adj<'_>, comm: &[u32], m: &Members) -> Adj<'static> {
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
pub(in crate::order) const LINKS_KEPT: usize = 16;

/// The rank of the link between communities `c` and `d` of weight `w`, heaviest first: the
/// weight, then a fixed hash of the unordered pair, so both ends rank a link alike and no two
/// links of one row tie but by a 32-bit hash collision.
#[inline]
pub(in crate::order) fn link_key(c: u32, d: u32, w: u32) -> u64 {
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
pub(in crate::order) fn prune_links(adj: Adj<'static>, keep: usize) -> Adj<'static> {
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
