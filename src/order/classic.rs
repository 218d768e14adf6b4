//! The simple orders: by degree, breadth-first, reverse Cuthill–McKee.

use super::Adj;
use crate::graph::{Graph, Permutation};

/// Nodes sorted by degree (descending or ascending), ties by ascending id: a counting sort.
pub(super) fn by_degree(adj: &Adj<'_>, descending: bool) -> Vec<u32> {
    let n = adj.n();
    if adj.wt.is_some() {
        // Weighted degrees (a community graph): a stable sort, the same order the counting
        // sort below gives an unweighted graph with repeated entries.
        let deg: Vec<u64> = (0..n).map(|i| adj.weighted_degree(i)).collect();
        let mut out: Vec<u32> = (0..n as u32).collect();
        if descending {
            out.sort_by_key(|&i| std::cmp::Reverse(deg[i as usize]));
        } else {
            out.sort_by_key(|&i| deg[i as usize]);
        }
        return out;
    }
    let max = (0..n).map(|i| adj.degree(i)).max().unwrap_or(0);
    let mut start = vec![0usize; max + 2];
    for i in 0..n {
        let d = adj.degree(i);
        let key = if descending { max - d } else { d };
        start[key + 1] += 1;
    }
    for k in 0..=max {
        start[k + 1] += start[k];
    }
    let mut out = vec![0u32; n];
    for i in 0..n {
        let d = adj.degree(i);
        let key = if descending { max - d } else { d };
        out[start[key]] = i as u32;
        start[key] += 1;
    }
    out
}

/// Breadth-first order: components in the order of their highest-degree node, each searched
/// from it, neighbours in stored (ascending id) order.
pub(super) fn bfs_order(graph: &Graph) -> Permutation {
    let adj = Adj::new(graph);
    let n = adj.n();
    let mut seen = vec![false; n];
    let mut out: Vec<u32> = Vec::with_capacity(n);
    for s in by_degree(&adj, true) {
        if seen[s as usize] {
            continue;
        }
        seen[s as usize] = true;
        out.push(s);
        let mut head = out.len() - 1;
        while head < out.len() {
            let u = out[head] as usize;
            head += 1;
            for &v in adj.row(u) {
                if !seen[v as usize] {
                    seen[v as usize] = true;
                    out.push(v);
                }
            }
        }
    }
    Permutation::from_new_to_old_trusted(out)
}

/// Reverse Cuthill–McKee: per component (in the order of their lowest-degree node), a BFS
/// from a pseudo-peripheral node (George–Liu) visiting neighbours by ascending degree; the
/// whole sequence reversed.
pub(super) fn rcm_order(graph: &Graph) -> Permutation {
    let adj = Adj::new(graph);
    let n = adj.n();
    let mut seen = vec![false; n];
    // Scratch of the pseudo-peripheral search: the BFS stamp of each node.
    let mut stamp = vec![0u32; n];
    let mut epoch = 0u32;
    let mut level: Vec<u32> = Vec::new();
    let mut out: Vec<u32> = Vec::with_capacity(n);
    let mut nbrs: Vec<u32> = Vec::new();
    for s in by_degree(&adj, false) {
        if seen[s as usize] {
            continue;
        }
        let start = pseudo_peripheral(&adj, s, &mut stamp, &mut epoch, &mut level);
        seen[start as usize] = true;
        out.push(start);
        let mut head = out.len() - 1;
        while head < out.len() {
            let u = out[head] as usize;
            head += 1;
            nbrs.clear();
            nbrs.extend(adj.row(u).iter().copied().filter(|&v| !seen[v as usize]));
            nbrs.sort_unstable_by_key(|&v| (adj.degree(v as usize), v));
            nbrs.dedup();
            for &v in &nbrs {
                seen[v as usize] = true;
                out.push(v);
            }
        }
    }
    out.reverse();
    Permutation::from_new_to_old_trusted(out)
}

/// George–Liu: from `s`, repeatedly jump to the lowest-degree node of the last BFS level while
/// the eccentricity grows (at most 8 rounds). `stamp`/`epoch` mark the nodes a BFS reached.
pub(super) fn pseudo_peripheral(
    adj: &Adj<'_>,
    s: u32,
    stamp: &mut [u32],
    epoch: &mut u32,
    queue: &mut Vec<u32>,
) -> u32 {
    let mut best = s;
    let mut best_ecc = None;
    for _ in 0..8 {
        *epoch = epoch.wrapping_add(1);
        if *epoch == 0 {
            stamp.iter_mut().for_each(|x| *x = 0);
            *epoch = 1;
        }
        // BFS from `best`, level by level.
        queue.clear();
        queue.push(best);
        stamp[best as usize] = *epoch;
        let (mut lo, mut ecc) = (0usize, 0usize);
        let mut last = (0usize, 1usize);
        while lo < queue.len() {
            let hi = queue.len();
            last = (lo, hi);
            for k in lo..hi {
                let u = queue[k] as usize;
                for &v in adj.row(u) {
                    if stamp[v as usize] != *epoch {
                        stamp[v as usize] = *epoch;
                        queue.push(v);
                    }
                }
            }
            lo = hi;
            if lo < queue.len() {
                ecc += 1;
            }
        }
        if best_ecc.is_some_and(|e| ecc <= e) {
            break;
        }
        best_ecc = Some(ecc);
        let cand = queue[last.0..last.1]
            .iter()
            .copied()
            .min_by_key(|&v| (adj.degree(v as usize), v))
            .unwrap_or(best);
        if cand == best {
            break;
        }
        best = cand;
    }
    best
}
