//! Neighbour sampling (GraphSAGE, Hamilton et al., NeurIPS 2017; PyG's `NeighborLoader`,
//! DGL's `NeighborSampler`): each batch takes a set of training nodes (the seeds) and, hop by
//! hop outwards, at most `fanout` neighbours of every node reached, giving one bipartite block
//! per layer ([`BlockAdj`]): the last layer's destinations are the seeds, each layer's sources
//! its destinations followed by the neighbours they drew. A batch is a pure function of (seed,
//! epoch, index): the same on any thread or process count (`docs/MATH.md` §23).

use rand::Rng;

use super::cluster::{splitmix, Permutation};
use super::epoch_rng;
use crate::graph::{BlockAdj, Graph};
use crate::input::Mask;
use crate::{Error, Result, Scalar};

/// The position a node drawn for the first time in a hop holds until the hop's new nodes
/// are ordered (never a position: a level holds fewer than 2³² − 1 nodes).
const NEW: u32 = u32::MAX - 1;

/// The most layers (fanouts) of neighbour sampling.
pub const MAX_FANOUTS: usize = 16;

/// The fanouts of neighbour sampling, hop by hop from the seeds (0: every neighbour), at
/// most [`MAX_FANOUTS`] of them: a value type, as the rest of
/// [`BatchConfig`](super::BatchConfig).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fanouts {
    len: usize,
    v: [usize; MAX_FANOUTS],
}

impl Fanouts {
    /// The fanouts `f`, hop by hop from the seeds.
    ///
    /// # Errors
    /// [`ConfigError::OutOfRange`](crate::ConfigError::OutOfRange) for none or more than
    /// [`MAX_FANOUTS`].
    pub fn new(f: &[usize]) -> Result<Self, crate::ConfigError> {
        if f.is_empty() || f.len() > MAX_FANOUTS {
            return Err(crate::ConfigError::OutOfRange {
                name: "fanouts",
                value: f.len() as f64,
                rule: "1 to 16 of them (one a layer)",
            });
        }
        let mut v = [0; MAX_FANOUTS];
        v[..f.len()].copy_from_slice(f);
        Ok(Fanouts { len: f.len(), v })
    }

    /// The fanouts, hop by hop from the seeds.
    pub fn as_slice(&self) -> &[usize] {
        &self.v[..self.len]
    }
}

/// The neighbour sampler: the training nodes in batches of `batch_size` seeds, each with
/// `fanouts` neighbours drawn per hop.
#[derive(Debug, Clone, PartialEq)]
pub struct NeighborSampler {
    /// Neighbours drawn per node, hop by hop from the seeds (`fanouts[0]`: each seed's, the
    /// last layer's block); 0 takes every neighbour.
    fanouts: Vec<usize>,
    /// The training nodes, ascending.
    seeds: Vec<u32>,
    batch_size: usize,
    n_nodes: usize,
}

/// One batch of a [`NeighborSampler`]: per level the nodes (global ids) and per layer its
/// block, rewritten in place from one batch to the next.
#[derive(Debug, Clone)]
pub struct Blocks<F> {
    /// `nodes[l]`: the rows of level l (0: the first layer's sources, the nodes whose
    /// features are read; L: the seeds), each level a prefix of the one before.
    nodes: Vec<Vec<u32>>,
    /// `adj[l]`: layer l's block, `nodes[l + 1].len()` × `nodes[l].len()`.
    adj: Vec<BlockAdj<F>>,
    /// Position of each node in the level being built (`u32::MAX`: not in it).
    pos: Vec<u32>,
    /// The draws of one node, Floyd's picks, and the table that looks them up.
    chosen: Vec<u32>,
    picks: Vec<usize>,
    table: Vec<usize>,
}

impl<F: Scalar> Default for Blocks<F> {
    fn default() -> Self {
        Blocks {
            nodes: Vec::new(),
            adj: Vec::new(),
            pos: Vec::new(),
            chosen: Vec::new(),
            picks: Vec::new(),
            table: Vec::new(),
        }
    }
}

impl<F: Scalar> Blocks<F> {
    /// Layers (blocks).
    pub fn layers(&self) -> usize {
        self.adj.len()
    }
    /// The nodes of level `l` (0: every node whose features the batch reads; `layers()`: the
    /// seeds), global ids; level l + 1 is a prefix of level l.
    ///
    /// # Panics
    /// If `l > layers()`.
    pub fn nodes(&self, l: usize) -> &[u32] {
        &self.nodes[l]
    }
    /// The seeds (ascending): the rows the loss reads.
    pub fn seeds(&self) -> &[u32] {
        &self.nodes[self.adj.len()]
    }
    /// Layer `l`'s block (0: the input layer).
    ///
    /// # Panics
    /// If `l >= layers()`.
    pub fn block(&self, l: usize) -> &BlockAdj<F> {
        &self.adj[l]
    }
}

impl NeighborSampler {
    /// The sampler of `graph`'s training nodes `train`, `batch_size` seeds a batch, drawing
    /// `fanouts[h]` neighbours per node at hop h from the seeds (0: all of them); one layer
    /// per fanout.
    ///
    /// # Errors
    /// [`Error::Config`] for no fanout, a batch size of 0, or a training mask of another node
    /// count than the graph's; [`Error::Partition`] without training nodes.
    pub fn new(graph: &Graph, train: &Mask, fanouts: &[usize], batch_size: usize) -> Result<Self> {
        if fanouts.is_empty() {
            return Err(Error::Config(crate::ConfigError::ZeroCount("fanouts")));
        }
        if batch_size == 0 {
            return Err(Error::Config(crate::ConfigError::ZeroCount("batch_size")));
        }
        if train.n_nodes() != graph.n_nodes() {
            return Err(Error::Mismatch {
                what: "neighbour sampler: the training mask's nodes vs the graph's".into(),
                expected: graph.n_nodes(),
                got: train.n_nodes(),
            });
        }
        if train.is_empty() {
            return Err(Error::Partition(
                "neighbour sampling needs training nodes to seed its batches".into(),
            ));
        }
        Ok(NeighborSampler {
            fanouts: fanouts.to_vec(),
            seeds: train.indices().to_vec(),
            batch_size,
            n_nodes: graph.n_nodes(),
        })
    }

    /// The same fanouts and batch size over the seeds `nodes` (evaluation's batches of the
    /// validation and test nodes).
    ///
    /// # Errors
    /// As [`NeighborSampler::new`].
    pub fn with_seeds(&self, nodes: &Mask) -> Result<Self> {
        if nodes.n_nodes() != self.n_nodes {
            return Err(Error::Mismatch {
                what: "neighbour sampler: the seeds' mask nodes vs the graph's".into(),
                expected: self.n_nodes,
                got: nodes.n_nodes(),
            });
        }
        if nodes.is_empty() {
            return Err(Error::Partition(
                "neighbour sampling needs nodes to seed its batches".into(),
            ));
        }
        Ok(NeighborSampler {
            seeds: nodes.indices().to_vec(),
            ..self.clone()
        })
    }

    /// Batches an epoch: the training nodes over the batch size, rounded up.
    pub fn batches(&self) -> usize {
        self.seeds.len().div_ceil(self.batch_size)
    }

    /// Layers: one block per fanout.
    pub fn layers(&self) -> usize {
        self.fanouts.len()
    }

    /// The most entries of a batch's blocks: each block at most its destinations' cap times
    /// one plus its fanout, and never more than `whole`, the entries of the whole graph's Â
    /// with its self-loops.
    pub fn max_entries(&self, whole: usize) -> usize {
        let caps = self.level_caps();
        let layers = self.fanouts.len();
        self.fanouts
            .iter()
            .enumerate()
            .map(|(hop, &f)| {
                let dst = caps[layers - hop];
                match f {
                    0 => whole,
                    f => dst.saturating_mul(f.saturating_add(1)).min(whole),
                }
            })
            .fold(0usize, usize::saturating_add)
    }

    /// [`NeighborSampler::level_caps`] with level 0 the whole graph's nodes (blocks built by
    /// [`NeighborSampler::blocks_into_over`] with `whole`).
    pub fn level_caps_over_whole(&self) -> Vec<usize> {
        let mut caps = self.level_caps();
        caps[0] = self.n_nodes;
        caps
    }

    /// The most rows of each level of a batch (level 0: the nodes whose features it reads;
    /// the last: the seeds): the seeds a batch, then each level at most the one above times
    /// one plus its fanout (every neighbour: the graph's nodes), and never more than the
    /// graph's nodes. What a model plans a stack of blocks for.
    pub fn level_caps(&self) -> Vec<usize> {
        let n = self.n_nodes;
        let mut caps = vec![self.batch_size.min(self.seeds.len())];
        for &f in &self.fanouts {
            let above = caps[caps.len() - 1];
            let cap = if f == 0 {
                n
            } else {
                above.saturating_mul(f.saturating_add(1)).min(n)
            };
            caps.push(cap);
        }
        caps.reverse();
        caps
    }

    /// Writes batch `index` of `epoch` for `seed` of `graph` into `out`.
    ///
    /// # Errors
    /// [`Error::Mismatch`] when `graph` is not the sampler's (its node count) or `index` is
    /// not a batch of the epoch.
    pub fn blocks_into<F: Scalar>(
        &self,
        graph: &Graph,
        seed: u64,
        epoch: usize,
        index: usize,
        out: &mut Blocks<F>,
    ) -> Result<()> {
        self.blocks_into_over(graph, seed, epoch, index, out, false)
    }

    /// [`NeighborSampler::blocks_into`], with the first layer's block over the whole graph's
    /// nodes when `whole` (its columns the sources' node ids, n_src the node count: it reads
    /// the whole features in place, nothing gathered; the same entries and values, each row's
    /// in the order of the node ids), and then for evaluation: no block holds its transpose
    /// ([`BlockAdj::a_t`]). Level 0's nodes are listed either way.
    ///
    /// # Errors
    /// As [`NeighborSampler::blocks_into`].
    pub fn blocks_into_over<F: Scalar>(
        &self,
        graph: &Graph,
        seed: u64,
        epoch: usize,
        index: usize,
        out: &mut Blocks<F>,
        whole: bool,
    ) -> Result<()> {
        super::NodeSampler::check_graph(self, graph)?;
        if index >= NeighborSampler::batches(self) {
            return Err(Error::Mismatch {
                what: "neighbour sampler: a batch index vs the batches of an epoch".into(),
                expected: NeighborSampler::batches(self),
                got: index,
            });
        }
        let key = epoch_rng(seed, epoch).next_u64();
        let layers = self.fanouts.len();
        out.nodes.resize_with(layers + 1, Vec::new);
        let mut seeds = std::mem::take(&mut out.nodes[layers]);
        super::NodeSampler::nodes_into(self, graph, seed, epoch, index, &mut seeds);
        out.nodes[layers] = seeds;
        // This batch's draws: a key of its own (batches independent, as PyG's and DGL's).
        let batch_key = splitmix(key ^ splitmix(index as u64));
        out.pos.resize(self.n_nodes, u32::MAX);
        out.adj.truncate(layers);
        while out.adj.len() < layers {
            out.adj.push(BlockAdj::normalised(0, vec![0], Vec::new()));
        }
        let Blocks {
            nodes,
            adj,
            pos,
            chosen,
            picks,
            table,
        } = out;
        // (Built from the seeds outwards: hop h is layer L − 1 − h's block.)
        for (hop, &fanout) in self.fanouts.iter().enumerate() {
            let level = layers - hop;
            let dst = std::mem::take(&mut nodes[level]);
            let mut src = std::mem::take(&mut nodes[level - 1]);
            src.clear();
            src.extend_from_slice(&dst);
            for (r, &v) in dst.iter().enumerate() {
                pos[v as usize] = r as u32;
            }
            let block = &mut adj[layers - 1 - hop];
            let (mut indptr, mut indices) = block.take_pattern();
            indptr.push(0);
            let (ip, ix) = (graph.indptr(), graph.indices());
            for (r, &v) in dst.iter().enumerate() {
                // The rows drawn from are read at random: their row pointers are fetched
                // `2·AHEAD` rows ahead, their first, middle and last entries `AHEAD` rows
                // ahead (hints; what the draw reads first).
                const AHEAD: usize = 8;
                if let Some(&u) = dst.get(r + 2 * AHEAD) {
                    crate::kernels::raw::prefetch_at(ip, u as usize);
                }
                if let Some(&u) = dst.get(r + AHEAD) {
                    let (a, b) = (ip[u as usize], ip[u as usize + 1]);
                    if b > a {
                        crate::kernels::raw::prefetch_at(ix, a);
                        crate::kernels::raw::prefetch_at(ix, a + (b - a) / 2);
                        crate::kernels::raw::prefetch_at(ix, b - 1);
                    }
                }
                // Each row as node ids for now: its own, then its draws.
                indices.push(v);
                draw(graph, v, fanout, batch_key, hop, chosen, picks, table);
                for &u in chosen.iter() {
                    let p = &mut pos[u as usize];
                    if *p == u32::MAX {
                        *p = NEW;
                        src.push(u);
                    }
                    indices.push(u);
                }
                indptr.push(indices.len());
            }
            // The nodes first drawn in this hop follow the destinations in ascending order of
            // their ids: the rows of X a batch reads are read in the graph's order, and the
            // graph's locality (its node ordering) carries over to the block's columns.
            src[dst.len()..].sort_unstable();
            for (k, &u) in src.iter().enumerate().skip(dst.len()) {
                pos[u as usize] = k as u32;
            }
            let n_src = if whole && hop + 1 == layers {
                // (The first layer's block over node ids.)
                self.n_nodes
            } else {
                for j in indices.iter_mut() {
                    *j = pos[*j as usize];
                }
                src.len()
            };
            for w in indptr.windows(2) {
                indices[w[0]..w[1]].sort_unstable();
            }
            for &u in &src {
                pos[u as usize] = u32::MAX;
            }
            // (Evaluation's blocks take no products by Âᵀ: none is built.)
            block.set_normalised(n_src, indptr, indices, !whole);
            nodes[level] = dst;
            nodes[level - 1] = src;
        }
        Ok(())
    }
}

impl super::NodeSampler for NeighborSampler {
    fn batches(&self) -> usize {
        NeighborSampler::batches(self)
    }

    /// The most nodes whose features a batch reads (level 0's cap).
    fn max_nodes(&self) -> usize {
        self.level_caps()[0]
    }

    /// The batch's seeds (ascending): the nodes its loss reads.
    fn nodes_into(&self, _: &Graph, seed: u64, epoch: usize, index: usize, nodes: &mut Vec<u32>) {
        let key = epoch_rng(seed, epoch).next_u64();
        let t = self.seeds.len();
        let order = Permutation::new(t as u64, key);
        let end = ((index + 1) * self.batch_size).min(t);
        nodes.clear();
        nodes.extend(
            (index * self.batch_size..end).map(|p| self.seeds[order.at(p as u64) as usize]),
        );
        nodes.sort_unstable();
    }

    fn check_graph(&self, graph: &Graph) -> Result<()> {
        if graph.n_nodes() != self.n_nodes {
            return Err(Error::Mismatch {
                what: "neighbour sampler: the graph's nodes vs the sampler's".into(),
                expected: self.n_nodes,
                got: graph.n_nodes(),
            });
        }
        Ok(())
    }

    fn blocks(&self) -> Option<&NeighborSampler> {
        Some(self)
    }
}

/// The neighbours node `v` draws at hop `hop` into `chosen` (ascending): every neighbour
/// other than `v` itself when it has at most `fanout` of them (or `fanout` is 0), else
/// `fanout` distinct ones, uniformly (Floyd's algorithm), from a SplitMix64 stream keyed by
/// (the batch's key, the hop, v): the same draws whatever the thread that makes them.
#[allow(clippy::too_many_arguments)]
fn draw(
    graph: &Graph,
    v: u32,
    fanout: usize,
    key: u64,
    hop: usize,
    chosen: &mut Vec<u32>,
    picks: &mut Vec<usize>,
    table: &mut Vec<usize>,
) {
    let list = graph.neighbors(v as usize);
    // (The graph's own self-loop is no candidate: every row gets its self-loop.)
    let own = list.binary_search(&v).ok();
    let m = list.len() - usize::from(own.is_some());
    let at = |c: usize| match own {
        Some(s) if c >= s => list[c + 1],
        _ => list[c],
    };
    chosen.clear();
    if fanout == 0 || m <= fanout {
        chosen.extend((0..m).map(at));
        return;
    }
    let mut state = splitmix(key ^ splitmix(((hop as u64) << 40) ^ u64::from(v)));
    let mut uniform = |bound: usize| {
        state = splitmix(state);
        ((u128::from(state) * bound as u128) >> 64) as usize
    };
    // Floyd: for j = m − f … m − 1, t uniform in 0..=j; take t unless taken, else j.
    picks.clear();
    if fanout <= 32 {
        for j in m - fanout..m {
            let t = uniform(j + 1);
            picks.push(if picks.contains(&t) { j } else { t });
        }
    } else {
        // The same picks, "taken" looked up in an open-addressing table of the picks (twice
        // their number, a power of two): O(f) a node where the scan is O(f²).
        let cap = (2 * fanout).next_power_of_two();
        table.clear();
        table.resize(cap, usize::MAX);
        let home = |t: usize| (splitmix(t as u64) as usize) & (cap - 1);
        for j in m - fanout..m {
            let t = uniform(j + 1);
            let mut s = home(t);
            while table[s] != usize::MAX && table[s] != t {
                s = (s + 1) & (cap - 1);
            }
            // (j is never taken before: every earlier pick is below it.)
            let p = if table[s] == t { j } else { t };
            if p == j {
                let mut s = home(j);
                while table[s] != usize::MAX {
                    s = (s + 1) & (cap - 1);
                }
                table[s] = j;
            } else {
                table[s] = t;
            }
            picks.push(p);
        }
    }
    picks.sort_unstable();
    chosen.extend(picks.iter().map(|&p| at(p)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::synthetic::Preset;
    use crate::graph::{Norm, NormAdj, Propagate};

    fn sampler(d: &crate::data::Dataset, fanouts: &[usize], batch: usize) -> NeighborSampler {
        NeighborSampler::new(&d.graph, &d.split.train, fanouts, batch).unwrap()
    }

    /// Every seed is in exactly one batch of an epoch; each level is a prefix of the one
    /// before, followed by its new nodes in ascending order; each row draws at most its fanout of its own neighbours (plus its self-loop);
    /// a batch is the same when drawn again, and differs in another epoch.
    #[test]
    fn batches_cover_the_seeds_and_each_row_draws_its_fanout_of_its_neighbours() {
        let d = Preset::CoraLike.generate(3).unwrap();
        let s = sampler(&d, &[4, 3], 50);
        assert_eq!(s.batches(), d.split.train.len().div_ceil(50));
        let mut b = Blocks::<f32>::default();
        let mut all = Vec::new();
        for index in 0..s.batches() {
            s.blocks_into(&d.graph, 7, 1, index, &mut b).unwrap();
            assert_eq!(b.layers(), 2);
            all.extend_from_slice(b.seeds());
            for l in 0..2 {
                let (dst, src) = (b.nodes(l + 1), b.nodes(l));
                assert_eq!(&src[..dst.len()], dst, "level {} is a prefix", l + 1);
                let new = &src[dst.len()..];
                assert!(new.windows(2).all(|w| w[0] < w[1]), "new nodes ascending");
                assert!(new.iter().all(|u| !dst.contains(u)), "new nodes are new");
                let a = b.block(l).a();
                assert_eq!(a.shape(), (dst.len(), src.len()));
                let fanout = [3, 4][l];
                for (r, row) in a.outer_iterator().enumerate() {
                    let v = dst[r];
                    assert!(row.indices().contains(&(r as u32)), "self-loop");
                    assert!(row.nnz() <= fanout + 1);
                    let nb = d.graph.neighbors(v as usize);
                    let others = nb.iter().filter(|&&u| u != v).count();
                    assert_eq!(row.nnz(), others.min(fanout) + 1);
                    for &j in row.indices() {
                        let u = src[j as usize];
                        assert!(u == v || nb.binary_search(&u).is_ok());
                    }
                }
            }
            let mut again = Blocks::<f32>::default();
            s.blocks_into(&d.graph, 7, 1, index, &mut again).unwrap();
            assert_eq!(again.nodes, b.nodes);
            assert_eq!(again.block(0).a().data(), b.block(0).a().data());
        }
        all.sort_unstable();
        assert_eq!(all, d.split.train.indices());
        let mut other = Blocks::<f32>::default();
        s.blocks_into(&d.graph, 7, 2, 0, &mut other).unwrap();
        s.blocks_into(&d.graph, 7, 1, 0, &mut b).unwrap();
        assert_ne!(other.nodes, b.nodes);
        assert!(s.blocks_into(&d.graph, 7, 1, s.batches(), &mut b).is_err());
    }

    /// Every node a seed, every neighbour drawn (fanout 0), one batch: each block is the whole
    /// graph's symmetric Â, bit for bit (an undirected graph: a column's count is its row's).
    #[test]
    fn full_fanout_over_every_node_is_the_whole_adjacency() {
        let d = Preset::CoraLike.generate(5).unwrap();
        let n = d.graph.n_nodes();
        let every = Mask::from_bool(&vec![true; n]);
        let s = NeighborSampler::new(&d.graph, &every, &[0, 0], n).unwrap();
        let mut b = Blocks::<f32>::default();
        s.blocks_into(&d.graph, 1, 0, 0, &mut b).unwrap();
        let whole = NormAdj::<f32>::new(&d.graph, Norm::Symmetric);
        for l in 0..2 {
            assert_eq!(b.nodes(l), (0..n as u32).collect::<Vec<_>>());
            let (a, w) = (b.block(l).a(), whole.a());
            assert_eq!(a.indptr().raw_storage(), w.indptr().raw_storage());
            assert_eq!(a.indices(), w.indices());
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(a.data()), bits(w.data()));
            assert_eq!(Propagate::nnz(b.block(l)), whole.nnz());
        }
    }

    /// The draws are the ones `docs/MATH.md` §23.1 specifies, recomputed here from its text:
    /// the batch's key from the epoch's, each node's SplitMix64 stream, Floyd's algorithm.
    #[test]
    fn the_draws_follow_the_specification() {
        let d = Preset::CoraLike.generate(3).unwrap();
        let fanouts = [4, 3];
        let s = sampler(&d, &fanouts, 50);
        let mut b = Blocks::<f32>::default();
        let (seed, epoch, index) = (7, 1, 2);
        s.blocks_into(&d.graph, seed, epoch, index, &mut b).unwrap();
        let k = epoch_rng(seed, epoch).next_u64();
        let k_b = splitmix(k ^ splitmix(index as u64));
        let mut checked = 0;
        for hop in 0..2 {
            let layer = 1 - hop;
            let (dst, src) = (b.nodes(layer + 1), b.nodes(layer));
            for (r, row) in b.block(layer).a().outer_iterator().enumerate() {
                let v = dst[r];
                let cands: Vec<u32> = d
                    .graph
                    .neighbors(v as usize)
                    .iter()
                    .copied()
                    .filter(|&u| u != v)
                    .collect();
                let (m, f) = (cands.len(), fanouts[hop]);
                if m <= f {
                    continue;
                }
                let mut x = splitmix(k_b ^ splitmix(((hop as u64) << 40) ^ u64::from(v)));
                let mut taken: Vec<usize> = Vec::new();
                for j in m - f..m {
                    x = splitmix(x);
                    let t = ((u128::from(x) * (j as u128 + 1)) >> 64) as usize;
                    taken.push(if taken.contains(&t) { j } else { t });
                }
                let mut want: Vec<u32> = taken.iter().map(|&c| cands[c]).collect();
                want.sort_unstable();
                let mut got: Vec<u32> = row
                    .indices()
                    .iter()
                    .filter(|&&j| j as usize != r)
                    .map(|&j| src[j as usize])
                    .collect();
                got.sort_unstable();
                assert_eq!(got, want, "hop {hop}, node {v}");
                checked += 1;
            }
        }
        assert!(
            checked > 10,
            "{checked} rows drew fewer than all their neighbours"
        );
    }

    /// Above 32 draws a node, "taken" is looked up in a table instead of scanned: the same
    /// picks as the specification's scan, at fanouts from 33 to all but one of 400 candidates.
    #[test]
    fn large_fanouts_draw_what_the_specification_draws() {
        let leaves = 400u32;
        let edges: Vec<(u32, u32)> = (1..=leaves).map(|u| (0, u)).collect();
        let dir = crate::graph::Direction::Undirected;
        let g = Graph::try_from_edges(leaves as usize + 1, &edges, dir).unwrap();
        let seeds = Mask::try_from_indices(vec![0], leaves as usize + 1).unwrap();
        for f in [33, 64, 200, 399] {
            let s = NeighborSampler::new(&g, &seeds, &[f], 1).unwrap();
            let mut b = Blocks::<f32>::default();
            s.blocks_into(&g, 5, 0, 0, &mut b).unwrap();
            let k_b = splitmix(epoch_rng(5, 0).next_u64() ^ splitmix(0));
            let mut x = splitmix(k_b ^ splitmix(0));
            let m = leaves as usize;
            let mut taken: Vec<usize> = Vec::new();
            for j in m - f..m {
                x = splitmix(x);
                let t = ((u128::from(x) * (j as u128 + 1)) >> 64) as usize;
                taken.push(if taken.contains(&t) { j } else { t });
            }
            let mut want: Vec<u32> = taken.iter().map(|&c| c as u32 + 1).collect();
            want.sort_unstable();
            let (src, row) = (b.nodes(0), b.block(0).a());
            let mut got: Vec<u32> = row.outer_view(0).unwrap().indices()[1..]
                .iter()
                .map(|&j| src[j as usize])
                .collect();
            got.sort_unstable();
            assert_eq!(got, want, "fanout {f}");
        }
    }

    /// A node's own self-loop in the graph is no candidate: its row holds its self-loop once,
    /// with every other neighbour (fanout 0) or the fanout's number of them.
    #[test]
    fn a_self_loop_of_the_graph_is_never_drawn() {
        // Node 5: a self-loop (in the middle of its row) and ten leaves 0..=10 but 5.
        let mut edges: Vec<(u32, u32)> = (0..=10).filter(|&u| u != 5).map(|u| (5, u)).collect();
        edges.push((5, 5));
        let g = Graph::try_from_edges(11, &edges, crate::graph::Direction::Undirected).unwrap();
        assert!(g.neighbors(5).contains(&5));
        let mut seed5 = vec![false; 11];
        seed5[5] = true;
        let seeds = Mask::from_bool(&seed5);
        for (fanout, want) in [(0, 10), (3, 3), (10, 10), (12, 10)] {
            let s = NeighborSampler::new(&g, &seeds, &[fanout], 1).unwrap();
            let mut b = Blocks::<f32>::default();
            for epoch in 0..5 {
                s.blocks_into(&g, 3, epoch, 0, &mut b).unwrap();
                let a = b.block(0).a();
                assert_eq!(a.outer_view(0).unwrap().nnz(), want + 1, "fanout {fanout}");
                assert_eq!(b.nodes(0)[0], 5);
                let mut drawn = b.nodes(0)[1..].to_vec();
                drawn.sort_unstable();
                drawn.dedup();
                assert_eq!(drawn.len(), want, "distinct");
                assert!(drawn.iter().all(|&u| u != 5 && u <= 10));
            }
        }
    }

    #[test]
    fn bad_settings_are_typed_errors() {
        let d = Preset::CoraLike.generate(3).unwrap();
        let t = &d.split.train;
        assert!(NeighborSampler::new(&d.graph, t, &[], 10).is_err());
        assert!(NeighborSampler::new(&d.graph, t, &[5], 0).is_err());
        let none = Mask::from_bool(&vec![false; d.graph.n_nodes()]);
        assert!(NeighborSampler::new(&d.graph, &none, &[5], 10).is_err());
        let small = Graph::try_from_edges(3, &[], crate::graph::Direction::Undirected).unwrap();
        let s = NeighborSampler::new(&d.graph, t, &[5], 10).unwrap();
        let mut b = Blocks::<f32>::default();
        assert!(s.blocks_into(&small, 0, 0, 0, &mut b).is_err());
    }
}
