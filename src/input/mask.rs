//! [`Mask`]: a set of nodes (the nodes a loss or an accuracy counts).

use crate::{Error, Result};

/// A set of nodes, kept as sorted unique indices (with a boolean view on demand).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Mask {
    indices: Vec<u32>,
    n_nodes: usize,
}

impl Mask {
    /// A mask from node indices (sorted and deduplicated here).
    ///
    /// # Errors
    /// [`Error::NodeOutOfRange`] for an index ≥ `n_nodes`.
    pub fn try_from_indices(mut indices: Vec<u32>, n_nodes: usize) -> Result<Self> {
        if let Some(&bad) = indices.iter().find(|&&i| i as usize >= n_nodes) {
            return Err(Error::NodeOutOfRange {
                index: bad as i64,
                n_nodes,
            });
        }
        indices.sort_unstable();
        indices.dedup();
        Ok(Mask { indices, n_nodes })
    }
    /// The indices, taken (for a mask rebuilt in the same storage).
    pub(crate) fn into_indices(self) -> Vec<u32> {
        self.indices
    }
    /// A mask from a boolean vector of length `n_nodes`.
    pub fn from_bool(mask: &[bool]) -> Self {
        let indices = (0..mask.len())
            .filter(|&i| mask[i])
            .map(|i| i as u32)
            .collect();
        Mask {
            indices,
            n_nodes: mask.len(),
        }
    }
    /// The boolean vector.
    pub fn to_bool(&self) -> Vec<bool> {
        let mut b = vec![false; self.n_nodes];
        for &i in &self.indices {
            b[i as usize] = true;
        }
        b
    }
    /// Sorted node indices.
    pub fn indices(&self) -> &[u32] {
        &self.indices
    }
    /// Number of selected nodes.
    pub fn len(&self) -> usize {
        self.indices.len()
    }
    /// Whether no node is selected.
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }
    /// Number of nodes of the graph.
    pub fn n_nodes(&self) -> usize {
        self.n_nodes
    }
}
