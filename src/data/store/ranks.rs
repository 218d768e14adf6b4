//! A store's graph for one rank of a row-partitioned run ([`StoreGraph`]): one checking pass
//! of plain reads learns every node's degree in Ã = A + I, then only the rank's rows are read,
//! through the store's maps.

use std::ops::Range;
use std::path::Path;

use super::Store;
use crate::data::memory;
use crate::graph::{Norm, NormRows};
use crate::{Result, Scalar};

/// A store opened for the ranks of a row-partitioned run: its graph checked in one pass
/// (offsets, ids, order, self-loops, symmetry, checksums; what out-of-core propagation checks
/// first; then the last offset and the degrees) and each node's d̃ held (4 bytes a node); rows
/// are then read from the maps, a rank's own only (every row for Âᵀ's rows), each checked
/// again as it is read.
pub struct StoreGraph {
    store: Store,
    tilde: Vec<u32>,
}

impl StoreGraph {
    /// Opens the store in `dir` and makes the checking pass.
    ///
    /// # Errors
    /// [`Error::TooLarge`](crate::Error::TooLarge) when a degree a node does not fit in the
    /// memory available; [`Error::Store`](crate::Error::Store) naming the array at fault;
    /// [`Error::Io`](crate::Error::Io).
    pub fn open(dir: &Path) -> Result<Self> {
        let store = Store::open(dir)?;
        let n = store.header().n_nodes as usize;
        // d̃ of every node, and the pass's blocks of rows.
        memory::check(memory::bytes(n, 4), || {
            format!("a degree a node of the store {}", dir.display())
        })?;
        let tilde = super::propagate::tilde_degrees(&store)?;
        // What the pass leaves to the checksums: the last offset, and the degrees (as a
        // store read whole checks them).
        let ip = store.u64s("indptr")?;
        let nnz = store.header().arrays["indices"].len;
        if ip.last() != Some(&nnz) {
            let last = ip.last().copied().unwrap_or(0);
            return Err(store.bad(
                "indptr",
                format!("the last offset is {last}, the store holds {nnz} indices"),
            ));
        }
        store.verify_array("degree")?;
        let degree = store.u32s("degree")?;
        if let Some(i) = (0..n).find(|&i| u64::from(degree[i]) != ip[i + 1].saturating_sub(ip[i])) {
            return Err(store.bad(
                "degree",
                format!(
                    "node {i}: {}, but its row stores {} entries",
                    degree[i],
                    ip[i + 1].saturating_sub(ip[i])
                ),
            ));
        }
        Ok(StoreGraph { store, tilde })
    }

    /// Checks rows `range` as read through the maps against what the pass learnt (offsets
    /// inside the indices, ids below the node count and strictly increasing, the degree):
    /// a store rewritten since is an error, not a wrong row or a panic.
    fn check_rows(&self, range: Range<usize>) -> Result<()> {
        use rayon::prelude::*;
        let (ip, idx) = self.arrays()?;
        let n = self.n_nodes();
        let changed = range.into_par_iter().find_first(|&i| {
            let (a, b) = (ip[i] as usize, ip[i + 1] as usize);
            if a > b || b > idx.len() {
                return true;
            }
            let row = &idx[a..b];
            let has_loop = row.binary_search(&(i as u32)).is_ok();
            row.iter().any(|&j| j as usize >= n)
                || row.windows(2).any(|w| w[0] >= w[1])
                || row.len() + usize::from(!has_loop) != self.tilde[i] as usize
        });
        match changed {
            Some(i) => Err(self.store.bad(
                "indices",
                format!("row {i}: the store changed since it was checked"),
            )),
            None => Ok(()),
        }
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Nodes.
    pub fn n_nodes(&self) -> usize {
        self.tilde.len()
    }

    /// Whether the graph is directed.
    pub fn is_directed(&self) -> bool {
        self.store.header().directed
    }

    /// Edges, counted as [`Graph::n_edges`](crate::graph::Graph::n_edges) counts them.
    pub fn n_edges(&self) -> usize {
        let h = self.store.header();
        let stored = h.arrays["indices"].len as usize;
        if h.directed {
            stored
        } else {
            // (Each edge stored twice, each self-loop once; the pass checked the count.)
            let loops = h.self_loops as usize;
            stored.saturating_sub(loops) / 2 + loops
        }
    }

    /// The row pointers of Â (`n + 1` of them), as [`adj_indptr`](crate::graph::adj_indptr)
    /// gives them for the store's graph.
    ///
    /// # Errors
    /// [`Error::TooLarge`](crate::Error::TooLarge) when they do not fit in memory.
    pub fn adj_indptr(&self) -> Result<Vec<usize>> {
        let n = self.n_nodes();
        memory::check(memory::bytes(n + 1, 8), || {
            format!("Â's row pointers ({n} rows)")
        })?;
        let mut ip = Vec::with_capacity(n + 1);
        ip.push(0usize);
        let mut sum = 0usize;
        for &d in &self.tilde {
            sum += d as usize;
            ip.push(sum);
        }
        Ok(ip)
    }

    /// The stored row pointers and neighbour ids (checked by the pass).
    fn arrays(&self) -> Result<(&[u64], &[u32])> {
        Ok((self.store.u64s("indptr")?, self.store.u32s("indices")?))
    }

    /// Rows `range` of Â under `norm` (and of Âᵀ when it is not symmetric: that reads every
    /// row): bit for bit [`NormRows::new`] of the store's graph.
    ///
    /// # Errors
    /// [`Error::TooLarge`](crate::Error::TooLarge) when they do not fit in memory;
    /// [`Error::Mismatch`](crate::Error::Mismatch) for rows beyond the nodes.
    pub fn norm_rows<F: Scalar>(&self, norm: Norm, range: Range<usize>) -> Result<NormRows<F>> {
        let n = self.n_nodes();
        check_range(&range, n)?;
        let entries: usize = self.tilde[range.clone()].iter().map(|&d| d as usize).sum();
        let copies = if !self.is_directed() && norm == Norm::Symmetric {
            1
        } else {
            2
        };
        let bytes = memory::bytes(entries, copies * (4 + std::mem::size_of::<F>()))
            .saturating_add(memory::bytes(n, 4 + std::mem::size_of::<F>()));
        memory::check(bytes, || {
            format!("rows {range:?} of Â ({entries} entries) and a scale a node")
        })?;
        // (Âᵀ's rows read every row of the graph.)
        self.check_rows(match copies {
            1 => range.clone(),
            _ => 0..n,
        })?;
        let (ip, idx) = self.arrays()?;
        let row = |i: usize| &idx[ip[i] as usize..ip[i + 1] as usize];
        Ok(NormRows::from_rows(
            &self.tilde,
            self.is_directed(),
            row,
            norm,
            range,
        ))
    }

    /// Rows `range` of the graph: row pointers from 0 and the neighbours' global ids.
    ///
    /// # Errors
    /// As [`StoreGraph::norm_rows`].
    pub fn rows(&self, range: Range<usize>) -> Result<(Vec<usize>, Vec<u32>)> {
        check_range(&range, self.n_nodes())?;
        self.check_rows(range.clone())?;
        let (ip, idx) = self.arrays()?;
        let (lo, hi) = (ip[range.start] as usize, ip[range.end] as usize);
        memory::check(memory::bytes(hi - lo, 4), || {
            format!("rows {range:?} of the graph ({} entries)", hi - lo)
        })?;
        Ok((
            ip[range.start..=range.end]
                .iter()
                .map(|&p| p as usize - lo)
                .collect(),
            idx[lo..hi].to_vec(),
        ))
    }
}

/// `range` inside `n` nodes, or an error.
fn check_range(range: &Range<usize>, n: usize) -> Result<()> {
    if range.start > range.end || range.end > n {
        return Err(crate::Error::Mismatch {
            what: format!("rows {range:?} vs the store's nodes"),
            expected: n,
            got: range.end,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::store::{write_store, FeatureDtype};
    use crate::data::synthetic::CitationLike;
    use crate::graph::{adj_indptr, Direction, Graph};

    /// The degrees, row pointers, edges and rows of a store are its graph's; rows beyond the
    /// nodes are errors, not panics.
    #[test]
    fn a_store_graph_is_its_graphs_rows_and_refuses_rows_beyond_it() {
        let dir = std::env::temp_dir().join(format!("sparse-gcn-sg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut d = CitationLike {
            n_nodes: 300,
            ..CitationLike::default()
        }
        .generate(3)
        .unwrap();
        // Self-loops on a few nodes.
        let g = &d.graph;
        let arcs: Vec<(u32, u32)> = (0..300u32)
            .flat_map(|i| g.neighbors(i as usize).iter().map(move |&j| (i, j)))
            .chain((0..300u32).step_by(11).map(|i| (i, i)))
            .collect();
        d.graph = Graph::try_from_edges(300, &arcs, Direction::Undirected).unwrap();
        let st = dir.join("s");
        write_store(&d, None, &st, FeatureDtype::F32).unwrap();
        let sg = StoreGraph::open(&st).unwrap();
        let g = &d.graph;
        assert_eq!((sg.n_nodes(), sg.n_edges()), (300, g.n_edges()));
        assert!(!sg.is_directed());
        assert_eq!(sg.adj_indptr().unwrap(), adj_indptr(g));
        let (ip, nb) = sg.rows(40..90).unwrap();
        assert_eq!(nb, &g.indices()[g.indptr()[40]..g.indptr()[90]]);
        assert_eq!(ip.len(), 51);
        assert_eq!(ip[50], nb.len());
        for bad in [0..301, 250..301, 301..301] {
            assert!(sg.rows(bad.clone()).is_err(), "{bad:?}");
            assert!(sg.norm_rows::<f32>(Norm::Symmetric, bad).is_err());
        }
        #[allow(clippy::reversed_empty_ranges)]
        let backwards = 9..3;
        assert!(sg.rows(backwards).is_err());
        assert!(sg.rows(300..300).unwrap().1.is_empty());
        // A damaged degree array is refused, as a store read whole refuses it.
        let path = st.join("degree.u32");
        let mut b = std::fs::read(&path).unwrap();
        b[0] ^= 1;
        std::fs::write(&path, &b).unwrap();
        let e = StoreGraph::open(&st).err().unwrap();
        assert!(e.to_string().contains("degree"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
