//! Cluster-GCN's sampler: the graph cut once into parts, q random parts a batch.

use rand::Rng;

use super::{epoch_rng, NodeSampler};
use crate::graph::Graph;
use crate::order::{community_order, CommunityConfig};
use crate::{Error, Result};

/// How [`ClusterSampler::new`] cuts the graph into parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Clusters {
    /// METIS k-way (feature `metis`), balancing the parts' node counts: Cluster-GCN's choice.
    #[default]
    Metis,
    /// The community order ([`community_order`]) cut into P ranges of equal node counts: no
    /// METIS, O(nnz) memory beside the graph.
    Community,
    /// The nodes as they are numbered cut into P ranges of equal node counts: the parts of a
    /// graph already in a partition order (a store written in one, whose batches are then
    /// read as ranges of rows, [`ClusterSampler::ranges`]).
    Ranges,
}

/// Cluster-GCN's sampler (see the [module docs](super)): P parts, each epoch in an order
/// drawn from the seed and the epoch, q parts a batch (the last batch of an epoch takes what
/// is left).
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterSampler {
    /// Part k's nodes are `members[ptr[k]..ptr[k + 1]]`, ascending.
    ptr: Vec<usize>,
    members: Vec<u32>,
    per_batch: usize,
    max_nodes: usize,
    /// The diagonal enhancement λ of each batch's Â (0: none).
    diag_lambda: f64,
}

impl ClusterSampler {
    /// Cuts `graph` into `parts` parts by `how`, `per_batch` parts a batch.
    ///
    /// # Errors
    /// [`Error::Partition`] for `parts` of 0 or above the node count, `per_batch` of 0 or
    /// above `parts`, METIS's failure, or [`Clusters::Metis`] in a build without it.
    pub fn new(graph: &Graph, parts: usize, per_batch: usize, how: Clusters) -> Result<Self> {
        let n = graph.n_nodes();
        if parts == 0 || parts > n {
            return Err(Error::Partition(format!(
                "{parts} parts of a graph of {n} nodes (at least 1, at most the nodes)"
            )));
        }
        let part_of = match how {
            #[cfg(feature = "metis")]
            Clusters::Metis => crate::order::metis::metis_clusters(graph, parts)?,
            #[cfg(not(feature = "metis"))]
            Clusters::Metis => {
                return Err(Error::Partition(
                    "this build has no METIS (feature `metis`): use the community clusters".into(),
                ))
            }
            Clusters::Ranges => return Self::ranges(n, parts, per_batch),
            Clusters::Community => {
                let perm = community_order(graph, &CommunityConfig::default());
                let mut part_of = vec![0u32; n];
                for (new, &old) in perm.new_to_old().iter().enumerate() {
                    // Range k holds the positions [k·n/P, (k+1)·n/P).
                    part_of[old as usize] = ((new * parts) / n) as u32;
                }
                part_of
            }
        };
        Self::from_parts(&part_of, parts, per_batch)
    }

    /// The nodes `0..n` cut into `parts` ranges of equal node counts (range k holds
    /// `[k·n/P, (k+1)·n/P)`), `per_batch` parts a batch: [`Clusters::Ranges`], without the
    /// graph.
    ///
    /// # Errors
    /// As [`ClusterSampler::new`].
    pub fn ranges(n: usize, parts: usize, per_batch: usize) -> Result<Self> {
        if parts == 0 || parts > n {
            return Err(Error::Partition(format!(
                "{parts} parts of a graph of {n} nodes (at least 1, at most the nodes)"
            )));
        }
        let part_of: Vec<u32> = (0..n)
            .map(|i| ((i as u128 * parts as u128) / n as u128) as u32)
            .collect();
        Self::from_parts(&part_of, parts, per_batch)
    }

    /// A sampler of the parts `part_of` gives (node i in part `part_of[i]`, below `parts`),
    /// `per_batch` parts a batch.
    ///
    /// # Errors
    /// [`Error::Partition`] for a part id ≥ `parts`, or `per_batch` of 0 or above `parts`.
    pub fn from_parts(part_of: &[u32], parts: usize, per_batch: usize) -> Result<Self> {
        if per_batch == 0 || per_batch > parts {
            return Err(Error::Partition(format!(
                "{per_batch} parts a batch of {parts} parts (at least 1, at most the parts)"
            )));
        }
        if let Some((i, &p)) = part_of
            .iter()
            .enumerate()
            .find(|(_, &p)| p as usize >= parts)
        {
            return Err(Error::Partition(format!(
                "node {i} is in part {p} of {parts} parts"
            )));
        }
        let mut ptr = vec![0usize; parts + 1];
        for &p in part_of {
            ptr[p as usize + 1] += 1;
        }
        for k in 0..parts {
            ptr[k + 1] += ptr[k];
        }
        let mut at = ptr.clone();
        let mut members = vec![0u32; part_of.len()];
        for (i, &p) in part_of.iter().enumerate() {
            members[at[p as usize]] = i as u32;
            at[p as usize] += 1;
        }
        let mut sizes: Vec<usize> = ptr.windows(2).map(|w| w[1] - w[0]).collect();
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        let max_nodes = sizes[..per_batch].iter().sum();
        Ok(ClusterSampler {
            ptr,
            members,
            per_batch,
            max_nodes,
            diag_lambda: 0.0,
        })
    }

    /// The sampler with Cluster-GCN's diagonal enhancement λ on each batch's Â
    /// ([`NormAdj::enhance_diagonal`](crate::graph::NormAdj::enhance_diagonal)).
    ///
    /// # Errors
    /// [`ConfigError::OutOfRange`](crate::ConfigError::OutOfRange) for a λ that is negative
    /// or not finite.
    pub fn with_diag_lambda(mut self, lambda: f64) -> Result<Self> {
        check_diag_lambda(lambda)?;
        self.diag_lambda = lambda;
        Ok(self)
    }

    /// Number of parts.
    pub fn parts(&self) -> usize {
        self.ptr.len() - 1
    }

    /// Parts a batch.
    pub fn per_batch(&self) -> usize {
        self.per_batch
    }

    /// The nodes of part `k`, ascending.
    ///
    /// # Panics
    /// If `k >= self.parts()`.
    pub fn part(&self, k: usize) -> &[u32] {
        &self.members[self.ptr[k]..self.ptr[k + 1]]
    }
}

impl NodeSampler for ClusterSampler {
    fn batches(&self) -> usize {
        self.parts().div_ceil(self.per_batch)
    }

    fn max_nodes(&self) -> usize {
        self.max_nodes
    }

    fn partitions(&self) -> bool {
        true
    }

    fn diag_lambda(&self) -> f64 {
        self.diag_lambda
    }

    fn check_graph(&self, graph: &Graph) -> Result<()> {
        if graph.n_nodes() != self.members.len() {
            return Err(Error::Mismatch {
                what: "Cluster-GCN sampler: the graph's nodes vs its parts' nodes".into(),
                expected: self.members.len(),
                got: graph.n_nodes(),
            });
        }
        Ok(())
    }

    fn nodes_into(&self, _: &Graph, seed: u64, epoch: usize, index: usize, nodes: &mut Vec<u32>) {
        self.batch_nodes(seed, epoch, index, nodes);
    }

    fn cluster(&self) -> Option<&ClusterSampler> {
        Some(self)
    }
}

impl ClusterSampler {
    /// Nodes of the graph the parts cover.
    pub fn n_nodes(&self) -> usize {
        self.members.len()
    }

    /// [`NodeSampler::nodes_into`], which needs no graph: the nodes of batch `index` of
    /// `epoch` for `seed`, ascending.
    ///
    /// # Panics
    /// If `index >= self.batches()`.
    pub fn batch_nodes(&self, seed: u64, epoch: usize, index: usize, nodes: &mut Vec<u32>) {
        assert!(
            index < self.batches(),
            "batch {index} of {}",
            self.batches()
        );
        // The epoch's order of parts: a pseudo-random permutation of the part ids keyed by the
        // seed and the epoch, evaluated at this batch's positions only (no storage).
        let perm = Permutation::new(self.parts() as u64, epoch_rng(seed, epoch).next_u64());
        let end = ((index + 1) * self.per_batch).min(self.parts());
        nodes.clear();
        for at in index * self.per_batch..end {
            nodes.extend_from_slice(self.part(perm.at(at as u64) as usize));
        }
        nodes.sort_unstable();
    }
}

/// A pseudo-random permutation of 0..n keyed by a u64: a 4-round Feistel network on the
/// smallest even number of bits covering n, walked until it lands below n (a bijection of
/// 0..n, each position evaluated in O(1) expected steps, nothing stored).
#[derive(Debug, Clone, Copy)]
pub(super) struct Permutation {
    n: u64,
    half: u32,
    key: u64,
}

impl Permutation {
    pub(super) fn new(n: u64, key: u64) -> Self {
        let bits = (64 - n.saturating_sub(1).leading_zeros()).max(2);
        Permutation {
            n,
            half: bits.div_ceil(2),
            key,
        }
    }

    /// The element at position `i` (< n).
    pub(super) fn at(&self, i: u64) -> u64 {
        let mut x = i;
        loop {
            x = self.feistel(x);
            if x < self.n {
                return x;
            }
        }
    }

    fn feistel(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half) - 1;
        let (mut l, mut r) = (x >> self.half, x & mask);
        for round in 0..4u64 {
            let f = splitmix(self.key ^ splitmix(round.wrapping_mul(0x9E37) ^ r)) & mask;
            (l, r) = (r, l ^ f);
        }
        (l << self.half) | r
    }
}

/// SplitMix64's finaliser.
pub(super) fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Checks a diagonal enhancement λ: finite and at least 0.
///
/// # Errors
/// [`ConfigError::OutOfRange`](crate::ConfigError::OutOfRange) naming `diag_lambda`.
pub(crate) fn check_diag_lambda(lambda: f64) -> std::result::Result<(), crate::ConfigError> {
    if lambda.is_finite() && lambda >= 0.0 {
        Ok(())
    } else {
        Err(crate::ConfigError::OutOfRange {
            name: "diag_lambda",
            value: lambda,
            rule: "finite and at least 0",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Direction;

    fn ring(n: usize) -> Graph {
        let e: Vec<(u32, u32)> = (0..n as u32).map(|i| (i, (i + 1) % n as u32)).collect();
        Graph::try_from_edges(n, &e, Direction::Undirected).unwrap()
    }

    #[test]
    fn every_epoch_covers_every_node_once_in_its_batches() {
        for how in [Clusters::Community, Clusters::Metis] {
            let g = ring(103);
            let s = ClusterSampler::new(&g, 10, 3, how).unwrap();
            assert_eq!(s.batches(), 4);
            for epoch in 0..3 {
                let mut seen = vec![0u32; 103];
                let mut nodes = Vec::new();
                for b in 0..s.batches() {
                    s.nodes_into(&g, 7, epoch, b, &mut nodes);
                    assert!(nodes.windows(2).all(|w| w[0] < w[1]));
                    assert!(nodes.len() <= s.max_nodes());
                    for &v in &nodes {
                        seen[v as usize] += 1;
                    }
                }
                assert!(seen.iter().all(|&c| c == 1), "{how:?} epoch {epoch}");
            }
        }
    }

    #[test]
    fn a_batch_depends_on_seed_epoch_and_index_alone() {
        let g = ring(200);
        let s = ClusterSampler::new(&g, 20, 4, Clusters::Community).unwrap();
        let get = |seed, epoch, b| {
            let mut v = Vec::new();
            s.nodes_into(&g, seed, epoch, b, &mut v);
            v
        };
        // The same batch whatever was drawn before it.
        let later = get(3, 2, 4);
        let _ = get(3, 0, 0);
        assert_eq!(get(3, 2, 4), later);
        // Other epochs and seeds shuffle the parts otherwise.
        assert_ne!(get(3, 1, 0), get(3, 2, 0));
        assert_ne!(get(4, 2, 0), get(3, 2, 0));
    }

    #[test]
    fn the_community_parts_are_contiguous_ranges_of_the_order_of_balanced_size() {
        let s = ClusterSampler::new(&ring(100), 7, 1, Clusters::Community).unwrap();
        let sizes: Vec<usize> = (0..7).map(|k| s.part(k).len()).collect();
        assert_eq!(sizes.iter().sum::<usize>(), 100);
        assert!(sizes.iter().all(|&z| z == 14 || z == 15), "{sizes:?}");
        assert_eq!(s.max_nodes(), 15);
    }

    #[test]
    fn the_keyed_permutation_is_a_bijection_and_varies_with_its_key() {
        for n in [1u64, 2, 3, 7, 64, 100, 1000] {
            let p = Permutation::new(n, 42);
            let mut seen: Vec<u64> = (0..n).map(|i| p.at(i)).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "n {n}");
        }
        let a: Vec<u64> = (0..100).map(|i| Permutation::new(100, 1).at(i)).collect();
        let b: Vec<u64> = (0..100).map(|i| Permutation::new(100, 2).at(i)).collect();
        assert_ne!(a, b);
        assert_ne!(a, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn bad_part_counts_are_typed_errors() {
        let g = ring(10);
        for (parts, q) in [(0, 1), (11, 1), (5, 0), (5, 6)] {
            assert!(matches!(
                ClusterSampler::new(&g, parts, q, Clusters::Community),
                Err(Error::Partition(_))
            ));
        }
        assert!(ClusterSampler::from_parts(&[0, 1, 2], 2, 1).is_err());
        let one = ClusterSampler::new(&g, 1, 1, Clusters::Metis).unwrap();
        assert_eq!(one.part(0).len(), 10);
    }
}
