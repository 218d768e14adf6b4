//! `--reorder metis`: the nodes grouped by the parts of a METIS recursive bisection (the
//! `metis` crate, which builds METIS from its bundled source), parts in bisection order, each
//! part's nodes in their given order.
//!
//! Recursive bisection numbers its parts so that every aligned run of parts — the first half,
//! each quarter, … — is one side of a bisection: a contiguous row range over whole parts is a
//! subtree of the bisection, cut from the rest by few edges. So a row partition into P
//! contiguous ranges ([`crate::dist::RowPartition`]) of this order has a small halo for every
//! P up to the part count, while the order itself does not depend on P (runs at different P
//! keep the same bits). Node weights are the rows' lengths in Ã = A + I, so parts balance the
//! SpMM's non-zeros, as the row partition does.

use super::{Adj, Permutation};
use crate::graph::Graph;
use crate::{Error, Result};

/// Held by every call into METIS: its random state is global, so calls from two threads at
/// once would not give the partition of either alone.
static METIS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Parts of `metis_order` for `n` nodes: the largest power of two at or below n/1024,
/// within 2..=1024.
pub fn metis_parts(n: usize) -> usize {
    let target = (n / 1024).clamp(2, 1024);
    1 << (usize::BITS - 1 - target.leading_zeros())
}

/// The METIS order of `graph` (see the [module docs](self)): [`metis_parts`] parts of a
/// recursive bisection with a fixed seed, so the same graph always gives the same order.
/// A directed graph is partitioned as undirected (A + Aᵀ); self-loops and repeated entries
/// are left out, as METIS requires.
///
/// # Errors
/// [`Error::Mismatch`] for a graph whose stored entries exceed METIS's 32-bit indices;
/// [`Error::Partition`] when METIS fails (out of memory).
///
/// # Complexity
/// METIS's recursive bisection, about O(nnz · log parts) time; O(n + nnz) memory for its
/// 32-bit copy of the graph.
pub(crate) fn metis_order(graph: &Graph) -> Result<Permutation> {
    let n = graph.n_nodes();
    if n < 4 {
        return Ok(Permutation::identity(n));
    }
    let input = MetisInput::of(graph)?;
    let parts = metis_parts(n);
    let part = input.partition(parts as i32, Method::Recursive)?;
    // Nodes by part, each part's in their given order (a counting sort).
    let mut start = vec![0usize; parts + 1];
    for &p in &part {
        start[p as usize + 1] += 1;
    }
    for k in 0..parts {
        start[k + 1] += start[k];
    }
    let mut new_to_old = vec![0u32; n];
    for (i, &p) in part.iter().enumerate() {
        let at = &mut start[p as usize];
        new_to_old[*at] = i as u32;
        *at += 1;
    }
    Ok(Permutation::from_new_to_old_trusted(new_to_old))
}

/// METIS's 32-bit copy of a graph: undirected (A + Aᵀ), without self-loops or repeated
/// entries, as METIS requires; node weights the rows' lengths in Ã = A + I.
struct MetisInput {
    xadj: Vec<i32>,
    adjncy: Vec<i32>,
    vwgt: Vec<i32>,
}

impl MetisInput {
    /// # Errors
    /// [`Error::Mismatch`] for a graph whose stored entries exceed METIS's 32-bit indices.
    fn of(graph: &Graph) -> Result<Self> {
        let n = graph.n_nodes();
        let adj = Adj::new(graph);
        let too_big = |what: &str, got: usize| Error::Mismatch {
            what: format!("METIS's 32-bit indices: {what}"),
            expected: i32::MAX as usize,
            got,
        };
        let idx32 = |v: usize, what: &str| i32::try_from(v).map_err(|_| too_big(what, v));
        let mut xadj: Vec<i32> = Vec::with_capacity(n + 1);
        xadj.push(0);
        let mut adjncy: Vec<i32> = Vec::with_capacity(adj.ip[n]);
        let mut row: Vec<u32> = Vec::new();
        let tilde = crate::graph::adj_indptr(graph);
        let mut vwgt: Vec<i32> = Vec::with_capacity(n);
        for i in 0..n {
            row.clear();
            row.extend(adj.row(i).iter().copied().filter(|&j| j as usize != i));
            row.sort_unstable();
            row.dedup();
            adjncy.extend(row.iter().map(|&j| j as i32));
            xadj.push(idx32(adjncy.len(), "stored entries")?);
            // Ã's row length: the neighbours and the self-loop (the input's or the added one).
            vwgt.push(idx32(tilde[i + 1] - tilde[i], "a row's length")?);
        }
        Ok(MetisInput { xadj, adjncy, vwgt })
    }

    /// The part of each node: `parts` parts with seed 1, by `how` (recursive bisection with the
    /// node weights, or k-way with unit weights). Calls into METIS take turns: its random
    /// state is global (GKlib's), so two calls at once, from two threads, would draw from one
    /// stream and each get another partition than alone.
    ///
    /// # Errors
    /// [`Error::Partition`] when METIS refuses the input or fails (out of memory).
    fn partition(&self, parts: i32, how: Method) -> Result<Vec<i32>> {
        let mut part = vec![0i32; self.vwgt.len()];
        let _one_at_a_time = METIS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let g = metis::Graph::new(1, parts, &self.xadj, &self.adjncy)
            .map_err(|e| Error::Partition(format!("METIS's input: {e}")))?
            .set_option(metis::option::Seed(1));
        match how {
            Method::Recursive => g.set_vwgt(&self.vwgt).part_recursive(&mut part),
            Method::KWay => g.part_kway(&mut part),
        }
        .map_err(|e| Error::Partition(format!("METIS: {e}")))?;
        Ok(part)
    }
}

/// How [`MetisInput::partition`] cuts.
#[derive(Clone, Copy)]
enum Method {
    /// Recursive bisection, node weights Ã's row lengths (the METIS order).
    Recursive,
    /// k-way, unit node weights (Cluster-GCN's clusters).
    KWay,
}

/// Cluster-GCN's clusters: `parts` parts of a METIS k-way partition of `graph` (a fixed seed,
/// so the same graph always gives the same parts), balancing the parts' node counts as
/// Cluster-GCN and PyG's `ClusterData` do; the part of each node. A directed graph is
/// partitioned as undirected.
///
/// # Errors
/// [`Error::Partition`] for `parts` of 0 or more than the nodes, or when METIS fails (out of
/// memory); [`Error::Mismatch`] beyond METIS's 32-bit indices.
pub(crate) fn metis_clusters(graph: &Graph, parts: usize) -> Result<Vec<u32>> {
    let n = graph.n_nodes();
    if parts == 0 || parts > n {
        return Err(Error::Partition(format!(
            "{parts} parts of a graph of {n} nodes (at least 1, at most the nodes)"
        )));
    }
    if parts == 1 {
        return Ok(vec![0; n]);
    }
    let nparts = i32::try_from(parts)
        .map_err(|_| Error::Partition(format!("{parts} parts: more than METIS counts")))?;
    let part = MetisInput::of(graph)?.partition(nparts, Method::KWay)?;
    Ok(part.into_iter().map(|p| p as u32).collect())
}
