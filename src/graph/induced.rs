//! The subgraph induced by a set of nodes: what a mini-batch of Cluster-GCN or GraphSAINT
//! trains on (every edge among its nodes, none to the rest), rewritten in place so that one
//! [`Graph`] serves every batch.

use super::{BuildStats, Graph};

impl Graph {
    /// An empty graph (0 nodes) of the given direction, to be filled by
    /// [`Graph::induced_into`].
    pub fn empty(directed: bool) -> Self {
        Graph {
            n_nodes: 0,
            indptr: vec![0],
            indices: Vec::new(),
            directed,
            stats: BuildStats::default(),
        }
    }

    /// Makes room in `self` (a graph [`Graph::induced_into`] writes) for subgraphs of up to
    /// `nodes` nodes and `entries` stored entries, so that writing them allocates nothing.
    pub(crate) fn reserve_induced(&mut self, nodes: usize, entries: usize) {
        self.indptr
            .reserve((nodes + 1).saturating_sub(self.indptr.len()));
        self.indices
            .reserve(entries.saturating_sub(self.indices.len()));
    }

    /// Overwrites `out` with the subgraph of `self` induced by `nodes` (distinct ids below
    /// [`Graph::n_nodes`], in the order of the subgraph's nodes: node k of `out` is
    /// `nodes[k]`): row k lists the positions in `nodes` of `nodes[k]`'s neighbours that are in
    /// `nodes`, sorted; self-loops kept; the direction of `self`. `pos` is working memory of
    /// `self.n_nodes()` entries, every one `u32::MAX` on entry and on return.
    ///
    /// With `nodes` sorted, row k is row `nodes[k]` of `self` filtered (the same order of
    /// entries), so that the subgraph does not depend on how `nodes` was assembled.
    ///
    /// # Panics
    /// If a node id is out of range, repeated, or `pos` is shorter than the node count or not
    /// all `u32::MAX` (checked in debug builds).
    ///
    /// # Complexity
    /// O(|nodes| + Σ degree(nodes)) time (a sort per row when `nodes` is not sorted); no
    /// allocation once `out` has held as many nodes and entries.
    pub fn induced_into(&self, nodes: &[u32], pos: &mut [u32], out: &mut Graph) {
        induced_rows_into(
            self.directed,
            nodes,
            |_, v| self.neighbors(v as usize),
            pos,
            out,
        );
    }
}

/// [`Graph::induced_into`] of a graph given by its rows: `row(k, v)` is the stored row of node
/// `v = nodes[k]` (ids below `pos.len()`, ascending), wherever it is held (a store's rows read
/// from disk, [`crate::data::store::StoreRows`]). `directed` is the graph's direction.
///
/// # Panics
/// As [`Graph::induced_into`]; or if a row holds an id of `pos.len()` or more.
pub(crate) fn induced_rows_into<'r>(
    directed: bool,
    nodes: &[u32],
    mut row: impl FnMut(usize, u32) -> &'r [u32],
    pos: &mut [u32],
    out: &mut Graph,
) {
    debug_assert!(pos.iter().all(|&p| p == u32::MAX));
    for (k, &v) in nodes.iter().enumerate() {
        assert_eq!(pos[v as usize], u32::MAX, "induced_into: node {v} repeated");
        pos[v as usize] = k as u32;
    }
    let sorted = nodes.windows(2).all(|w| w[0] < w[1]);
    out.n_nodes = nodes.len();
    out.directed = directed;
    out.indptr.clear();
    out.indptr.push(0);
    out.indices.clear();
    let mut self_loops = 0;
    for (k, &v) in nodes.iter().enumerate() {
        let start = out.indices.len();
        for &j in row(k, v) {
            let p = pos[j as usize];
            if p != u32::MAX {
                out.indices.push(p);
                self_loops += usize::from(j == v);
            }
        }
        if !sorted {
            out.indices[start..].sort_unstable();
        }
        out.indptr.push(out.indices.len());
    }
    for &v in nodes {
        pos[v as usize] = u32::MAX;
    }
    out.stats = BuildStats {
        input_edges: out.indices.len(),
        duplicates_merged: 0,
        self_loops,
    };
}

#[cfg(test)]
mod tests {
    use super::super::Direction;
    use super::*;

    /// The induced subgraph built from the edge list it should have, through `try_from_edges`.
    fn reference(g: &Graph, nodes: &[u32]) -> Graph {
        let mut edges = Vec::new();
        for (k, &v) in nodes.iter().enumerate() {
            for &j in g.neighbors(v as usize) {
                if let Some(p) = nodes.iter().position(|&u| u == j) {
                    edges.push((k as u32, p as u32));
                }
            }
        }
        Graph::try_from_edges(nodes.len(), &edges, Direction::Directed).unwrap()
    }

    #[test]
    fn induced_subgraphs_match_the_edge_lists_they_keep() {
        let edges = [
            (0, 1),
            (1, 2),
            (2, 3),
            (3, 0),
            (1, 1),
            (4, 2),
            (0, 4),
            (3, 5),
        ];
        for dir in [Direction::Undirected, Direction::Directed] {
            let g = Graph::try_from_edges(6, &edges, dir).unwrap();
            let mut pos = vec![u32::MAX; 6];
            let mut out = Graph::empty(false);
            for nodes in [
                &[0u32, 1, 2, 3, 4, 5][..],
                &[1, 2, 4],
                &[4, 1, 0],
                &[5],
                &[],
                &[3, 5, 0, 1],
            ] {
                g.induced_into(nodes, &mut pos, &mut out);
                let want = reference(&g, nodes);
                assert_eq!(out.n_nodes(), nodes.len());
                assert_eq!(out.indptr(), want.indptr(), "{nodes:?}");
                assert_eq!(out.indices(), want.indices(), "{nodes:?}");
                assert_eq!(out.is_directed(), dir == Direction::Directed);
                assert_eq!(out.stats().self_loops, want.stats().self_loops);
                assert!(pos.iter().all(|&p| p == u32::MAX));
            }
        }
    }

    #[test]
    #[should_panic(expected = "repeated")]
    fn a_repeated_node_is_refused() {
        let g = Graph::try_from_edges(3, &[(0, 1)], Direction::Undirected).unwrap();
        let mut pos = vec![u32::MAX; 3];
        g.induced_into(&[1, 1], &mut pos, &mut Graph::empty(false));
    }
}
