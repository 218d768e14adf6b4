//! Graphs: the raw adjacency [`Graph`], its normalisation [`NormAdj`] (Â, and Âᵀ when it is not
//! symmetric), [`Propagate`] (the only way a layer reaches Â), [`Sums`] (every sum across
//! nodes) and [`Collective`] (every exchange between processes), DropEdge's samples of Â, and
//! node permutations.

pub mod block;
pub mod collective;
pub mod dropedge;
mod induced;
pub(crate) use induced::induced_rows_into;
mod norm_rows;
pub(crate) mod normalize;
pub mod permutation;
pub mod propagate;
pub(crate) mod reduce;
pub mod sums;

pub use block::{BlockAdj, LevelRows};
pub use collective::{Collective, Local};
pub use norm_rows::NormRows;
pub(crate) use normalize::tilde_row;
pub use normalize::{adj_indptr, AdjScratch, Norm, NormAdj};
pub use permutation::Permutation;
pub use propagate::{Caps, Propagate, Unsupported};

pub use sums::{RowSpan, SumScratch, Sums};

use crate::{Error, Result};

/// Whether an edge list is read as undirected (each edge both ways, the default) or directed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Direction {
    /// Each input edge (u, v) gives both u→v and v→u (OGB's `add_inverse_edge`).
    #[default]
    Undirected,
    /// Each input edge (u, v) is kept as given: row u of the adjacency lists v.
    Directed,
}

/// What building a [`Graph`] from an edge list did to its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BuildStats {
    /// Edges in the input list.
    pub input_edges: usize,
    /// Stored adjacency entries removed because they repeated an entry (after symmetrising):
    /// duplicate edges are merged into one entry of weight 1.
    pub duplicates_merged: usize,
    /// Distinct self-loops in the input (kept, with weight 1).
    pub self_loops: usize,
}

/// The raw, unweighted adjacency A of a graph as a CSR pattern (`u32` column indices, sorted
/// and unique within each row).
///
/// Built from an edge list by [`Graph::try_from_edges`]: undirected by default (each edge both
/// ways); duplicate edges merged (an edge given twice, or given as both (u, v) and (v, u), is
/// one entry of weight 1, as PyG's `coalesce` on an unweighted `edge_index`); self-loops kept
/// with weight 1. Every node id is checked against `n_nodes`.
#[derive(Debug, Clone, PartialEq)]
pub struct Graph {
    n_nodes: usize,
    indptr: Vec<usize>,
    indices: Vec<u32>,
    directed: bool,
    stats: BuildStats,
}

impl Graph {
    /// Builds the adjacency of `n_nodes` nodes from an edge list (u, v).
    ///
    /// # Errors
    /// [`Error::NodeOutOfRange`] naming the first id ≥ `n_nodes`; [`Error::Mismatch`] if
    /// `n_nodes` does not fit in `u32`.
    ///
    /// # Complexity
    /// O(n + E·log(max degree)) time, O(n + E) memory (a counting sort, then a sort per row).
    ///
    /// # Examples
    /// ```
    /// use sparse_gcn::graph::{Direction, Graph};
    /// // a triangle given with a duplicate and a reversed copy of edge 0–1
    /// let g = Graph::try_from_edges(3, &[(0, 1), (1, 2), (2, 0), (0, 1), (1, 0)],
    ///                               Direction::Undirected).unwrap();
    /// assert_eq!(g.n_edges(), 3);
    /// assert_eq!(g.neighbors(0), &[1, 2]);
    /// assert!(Graph::try_from_edges(3, &[(0, 3)], Direction::Undirected).is_err());
    /// ```
    pub fn try_from_edges(n_nodes: usize, edges: &[(u32, u32)], dir: Direction) -> Result<Self> {
        Self::try_from_edge_iter(n_nodes, || edges.iter().copied(), dir)
    }

    /// Builds the adjacency of `n_nodes` nodes from edges that `edges()` yields, as
    /// [`Graph::try_from_edges`] does from a slice, without an edge list in memory: `edges` is
    /// called twice (a check and count, then a fill) and must yield the same edges each time (a
    /// second pass with an id out of range, or with more or fewer entries in a row, is refused;
    /// other edges in the same rows are not detected).
    /// Callers whose edges live in other arrays (a CSR pattern, the two rows of an edge index)
    /// read them in place.
    ///
    /// # Errors
    /// As [`Graph::try_from_edges`]; [`Error::Mismatch`] if the second call yields an id out of
    /// range or another count of entries in a row than the first.
    ///
    /// # Examples
    /// ```
    /// use sparse_gcn::graph::{Direction, Graph};
    /// // a CSR pattern read in place: row 0 lists 1 and 2, row 1 lists 2
    /// let (indptr, indices): (&[usize], &[u32]) = (&[0, 2, 3, 3], &[1, 2, 2]);
    /// let edges = || (0..3).flat_map(move |i| {
    ///     indices[indptr[i]..indptr[i + 1]].iter().map(move |&j| (i as u32, j))
    /// });
    /// let g = Graph::try_from_edge_iter(3, edges, Direction::Undirected).unwrap();
    /// assert_eq!(g.neighbors(2), &[0, 1]);
    /// ```
    pub fn try_from_edge_iter<I, F>(n_nodes: usize, edges: F, dir: Direction) -> Result<Self>
    where
        F: Fn() -> I,
        I: Iterator<Item = (u32, u32)>,
    {
        if n_nodes > u32::MAX as usize {
            return Err(Error::Mismatch {
                what: "node count (must fit in u32)".into(),
                expected: u32::MAX as usize,
                got: n_nodes,
            });
        }
        let both = dir == Direction::Undirected;
        // One pass checks the ids and counts each row's entries.
        let mut indptr = vec![0usize; n_nodes + 1];
        let mut input_edges = 0usize;
        for (u, v) in edges() {
            input_edges += 1;
            for id in [u, v] {
                if id as usize >= n_nodes {
                    return Err(Error::NodeOutOfRange {
                        index: id as i64,
                        n_nodes,
                    });
                }
            }
            indptr[u as usize + 1] += 1;
            if both && u != v {
                indptr[v as usize + 1] += 1;
            }
        }
        for i in 0..n_nodes {
            indptr[i + 1] += indptr[i];
        }
        // The second fills them; a pass that yields other edges than the first is refused
        // (never an index out of bounds, never an entry left unfilled).
        let mut fill = indptr.clone();
        let mut indices = vec![0u32; indptr[n_nodes]];
        let mut filled = 0usize;
        let mut place = |row: u32, col: u32| -> bool {
            let r = row as usize;
            if r >= n_nodes || col as usize >= n_nodes || fill[r] >= indptr[r + 1] {
                return false;
            }
            indices[fill[r]] = col;
            fill[r] += 1;
            filled += 1;
            true
        };
        let mut same = true;
        for (u, v) in edges() {
            if !place(u, v) || (both && u != v && !place(v, u)) {
                same = false;
                break;
            }
        }
        if !same || filled != indptr[n_nodes] {
            return Err(Error::Mismatch {
                what: "entries placed by a second pass over the edges (it must yield the first pass's edges)".into(),
                expected: indptr[n_nodes],
                got: filled,
            });
        }
        drop(fill);
        // Sort and deduplicate each row, compacting in place.
        let mut write = 0usize;
        let mut self_loops = 0usize;
        let mut start = 0usize;
        for i in 0..n_nodes {
            let end = indptr[i + 1];
            indices[start..end].sort_unstable();
            let row_begin = write;
            for k in start..end {
                let j = indices[k];
                if write == row_begin || indices[write - 1] != j {
                    indices[write] = j;
                    write += 1;
                    if j as usize == i {
                        self_loops += 1;
                    }
                }
            }
            indptr[i] = row_begin;
            start = end;
        }
        indptr[n_nodes] = write;
        let stored = indices.len();
        indices.truncate(write);
        indices.shrink_to_fit();
        let stats = BuildStats {
            input_edges,
            duplicates_merged: stored - write,
            self_loops,
        };
        Ok(Graph {
            n_nodes,
            indptr,
            indices,
            directed: !both,
            stats,
        })
    }

    /// A graph from its CSR pattern as [`Graph::indptr`] and [`Graph::indices`] give it (each
    /// row's ids sorted and unique), as a store written from a graph holds it; `stats` is what
    /// the original build reported (its self-loops are counted again here).
    ///
    /// # Errors
    /// [`Error::Mismatch`] naming the first offset or row that breaks the pattern's rules
    /// (offsets from 0, never decreasing, ending at `indices.len()`; ids below `n_nodes`,
    /// strictly increasing within a row; each entry stored both ways unless `directed`);
    /// [`Error::Mismatch`] if `n_nodes` does not fit in `u32` or the self-loops differ from
    /// `stats`.
    pub fn try_from_csr(
        n_nodes: usize,
        indptr: Vec<usize>,
        indices: Vec<u32>,
        directed: bool,
        stats: BuildStats,
    ) -> Result<Self> {
        let bad = |what: String, expected: usize, got: usize| Error::Mismatch {
            what,
            expected,
            got,
        };
        if n_nodes > u32::MAX as usize {
            return Err(bad(
                "node count (must fit in u32)".into(),
                u32::MAX as usize,
                n_nodes,
            ));
        }
        if indptr.len() != n_nodes + 1 {
            return Err(bad(
                "row offsets (nodes + 1)".into(),
                n_nodes + 1,
                indptr.len(),
            ));
        }
        if indptr[0] != 0 {
            return Err(bad("the first row offset".into(), 0, indptr[0]));
        }
        if indptr[n_nodes] != indices.len() {
            return Err(bad(
                "the last row offset (stored entries)".into(),
                indices.len(),
                indptr[n_nodes],
            ));
        }
        // Rows are checked in parallel; the first bad one (in order) is then described.
        let row_ok = |i: usize| {
            let (a, b) = (indptr[i], indptr[i + 1]);
            a <= b
                && b <= indices.len()
                && indices[a..b].iter().all(|&j| (j as usize) < n_nodes)
                && indices[a..b].windows(2).all(|w| w[0] < w[1])
        };
        use rayon::prelude::*;
        let first_bad = (0..n_nodes).into_par_iter().find_first(|&i| !row_ok(i));
        if let Some(i) = first_bad {
            let (a, b) = (indptr[i], indptr[i + 1]);
            if a > b || b > indices.len() {
                return Err(bad(format!("row offset {}", i + 1), a, b));
            }
            let row = &indices[a..b];
            if let Some(k) = row.iter().position(|&j| j as usize >= n_nodes) {
                return Err(Error::NodeOutOfRange {
                    index: row[k] as i64,
                    n_nodes,
                });
            }
            if let Some(k) = row.windows(2).position(|w| w[0] >= w[1]) {
                return Err(bad(
                    format!("row {i}: ids strictly increasing (entry {})", a + k + 1),
                    row[k] as usize + 1,
                    row[k + 1] as usize,
                ));
            }
        }
        let self_loops: usize = (0..n_nodes)
            .into_par_iter()
            .map(|i| {
                let row = &indices[indptr[i]..indptr[i + 1]];
                usize::from(row.binary_search(&(i as u32)).is_ok())
            })
            .sum();
        if self_loops != stats.self_loops {
            return Err(bad("self-loops".into(), stats.self_loops, self_loops));
        }
        // An undirected graph stores each edge both ways: Â's transpose is Â itself.
        let row = |i: usize| &indices[indptr[i]..indptr[i + 1]];
        let one_way = |i: usize| {
            row(i)
                .iter()
                .any(|&j| row(j as usize).binary_search(&(i as u32)).is_err())
        };
        // First a streaming test: the wrapping sums of a mixed hash of every (i, j) and of every
        // (j, i) are equal when each entry is stored both ways (and differ otherwise but with
        // probability about 2^-64); only then the exact search, whose random reads are slow.
        let mixed = pair_hash;
        let sums = |swap: bool| {
            (0..n_nodes)
                .into_par_iter()
                .map(|i| {
                    row(i).iter().fold(0u64, |acc, &j| {
                        let (a, b) = if swap { (j, i as u32) } else { (i as u32, j) };
                        acc.wrapping_add(mixed(a, b))
                    })
                })
                .reduce(|| 0, u64::wrapping_add)
        };
        let first = if directed || sums(false) == sums(true) {
            None
        } else {
            (0..n_nodes).into_par_iter().find_first(|&i| one_way(i))
        };
        if let Some(i) = first {
            let j = row(i)
                .iter()
                .find(|&&j| row(j as usize).binary_search(&(i as u32)).is_err())
                .copied()
                .unwrap_or_default();
            return Err(bad(
                format!("an undirected graph's entry ({i}, {j}) without ({j}, {i})"),
                1,
                0,
            ));
        }
        Ok(Graph {
            n_nodes,
            indptr,
            indices,
            directed,
            stats,
        })
    }

    /// Number of nodes.
    pub fn n_nodes(&self) -> usize {
        self.n_nodes
    }
    /// Stored adjacency entries (each undirected edge twice, a self-loop once).
    pub fn nnz(&self) -> usize {
        self.indices.len()
    }
    /// Number of edges: undirected edges (self-loops included) for an undirected graph,
    /// arcs for a directed one.
    pub fn n_edges(&self) -> usize {
        if self.directed {
            self.nnz()
        } else {
            (self.nnz() - self.stats.self_loops) / 2 + self.stats.self_loops
        }
    }
    /// Whether the graph was built as directed.
    pub fn is_directed(&self) -> bool {
        self.directed
    }
    /// The sorted neighbours of node `i` (row `i` of A).
    ///
    /// # Panics
    /// If `i >= n_nodes`.
    pub fn neighbors(&self, i: usize) -> &[u32] {
        &self.indices[self.indptr[i]..self.indptr[i + 1]]
    }
    /// Number of neighbours of `i` (self-loop included if present).
    pub fn degree(&self, i: usize) -> usize {
        self.indptr[i + 1] - self.indptr[i]
    }
    /// Number of neighbours of `i` other than `i` itself (the degree without a self-loop).
    pub(crate) fn degree_excluding_self(&self, i: usize) -> usize {
        let nb = self.neighbors(i);
        nb.len() - usize::from(nb.binary_search(&(i as u32)).is_ok())
    }
    /// Row pointer of the CSR pattern (`n_nodes + 1` entries).
    pub fn indptr(&self) -> &[usize] {
        &self.indptr
    }
    /// Column indices of the CSR pattern.
    pub fn indices(&self) -> &[u32] {
        &self.indices
    }
    /// What the build did to its input.
    pub fn stats(&self) -> BuildStats {
        self.stats
    }
    /// Nodes with no neighbour other than (possibly) themselves.
    pub fn n_isolated(&self) -> usize {
        (0..self.n_nodes)
            .filter(|&i| self.neighbors(i).iter().all(|&j| j as usize == i))
            .count()
    }
}

/// A mixed 64-bit hash of the pair (a, b) (SplitMix64's finaliser of `a << 32 | b`): the
/// wrapping sums of `pair_hash(i, j)` and of `pair_hash(j, i)` over a pattern's entries are
/// equal when every entry is stored both ways, and differ otherwise but with probability about
/// 2^-64 ([`Graph::try_from_csr`]'s streaming symmetry test, and the out-of-core one of
/// [`crate::data::store::propagate`]).
pub(crate) fn pair_hash(a: u32, b: u32) -> u64 {
    let mut z = (u64::from(a) << 32 | u64::from(b)).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
