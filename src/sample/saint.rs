//! GraphSAINT's samplers (Zeng et al., ICLR 2020): nodes, edges or random walks drawn at
//! random, the subgraph they induce, and the paper's normalisation estimated from subgraphs
//! pre-sampled once.

use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::guide::Guide;
use super::NodeSampler;
use crate::graph::{adj_indptr, tilde_row, Graph};
use crate::{ConfigError, Error, Result};

/// What a GraphSAINT batch draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaintKind {
    /// `batch_size` nodes drawn with replacement, each with probability proportional to its
    /// degree (a uniformly drawn edge's end; PyG's and DGL's node samplers).
    Node,
    /// `batch_size` edges drawn with replacement, edge (u, v) with probability proportional
    /// to 1/deg(u) + 1/deg(v) (the paper's edge sampler; PyG's and DGL's); both ends kept.
    Edge,
    /// `batch_size` roots drawn uniformly, each walking `walk_length` steps to uniformly
    /// drawn neighbours; every node visited kept.
    RandomWalk {
        /// Steps of each walk.
        walk_length: usize,
    },
}

impl SaintKind {
    /// The nodes a batch of `batch_size` draws, repeats included (what it holds before they
    /// are made distinct).
    pub fn draws(self, batch_size: usize) -> usize {
        match self {
            SaintKind::Node => batch_size,
            SaintKind::Edge => batch_size.saturating_mul(2),
            SaintKind::RandomWalk { walk_length } => {
                batch_size.saturating_mul(walk_length.saturating_add(1))
            }
        }
    }
}

/// The most nodes a GraphSAINT batch may draw (repeats included): 2²⁶, 256 MiB of ids.
pub const MAX_DRAWS: usize = 1 << 26;

/// How often each node and each entry of Ã = A + I turned up in the pre-sampled subgraphs:
/// what GraphSAINT's normalisation is estimated from (`docs/MATH.md` §22).
#[derive(Debug, Clone, PartialEq)]
pub struct SaintCounts {
    /// Subgraphs pre-sampled.
    pub(crate) subgraphs: u64,
    /// C_v: subgraphs holding node v.
    pub(crate) node: Vec<u32>,
    /// C_e: subgraphs holding entry e of Ã (in `NormAdj`'s layout of the whole graph).
    pub(crate) entry: Vec<u32>,
    /// Ã's row pointers (`adj_indptr` of the graph): row v's entries and d̃_v.
    pub(crate) ptr: Vec<usize>,
}

impl SaintCounts {
    /// Subgraphs pre-sampled.
    pub fn subgraphs(&self) -> u64 {
        self.subgraphs
    }
    /// C_v for every node.
    pub fn nodes(&self) -> &[u32] {
        &self.node
    }
    /// C_e for every entry of Ã, row by row (self-loops included).
    pub fn entries(&self) -> &[u32] {
        &self.entry
    }
}

/// GraphSAINT's sampler (see the [module docs](super)).
#[derive(Debug, Clone, PartialEq)]
pub struct SaintSampler {
    kind: SaintKind,
    batch_size: usize,
    batches: usize,
    n_nodes: usize,
    nnz: usize,
    /// The edge sampler's cumulative weights over the graph's stored entries.
    cdf: Vec<f64>,
    /// Guides to the row of an entry (over the row pointers) and to the entry of a weight
    /// (over `cdf`): the draws' searches, a bucket deep.
    rows: Guide,
    weights: Guide,
    /// `None` without the normalisation.
    counts: Option<SaintCounts>,
    mean_nodes: f64,
}

/// The RNG of draw `index` of `stream` for `seed`: a batch of an epoch (stream 2³³ + epoch)
/// or a pre-sampled subgraph (stream 3·2³²). Apart from the streams of training and
/// Cluster-GCN's (2³² + epoch).
fn draw_rng(seed: u64, stream: u64, index: usize) -> ChaCha8Rng {
    use rand::SeedableRng;
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(stream);
    r.set_word_pos((index as u128) << 40);
    r
}

const PRESAMPLE_STREAM: u64 = 3 << 32;

/// The most subgraphs pre-sampled (each draw's RNG starts 2⁴⁰ words after the last, so
/// indices stay below 2²⁴ apart from the counts' u32 range): the estimate stops there, short
/// of the coverage asked for.
const MAX_PRESAMPLED: usize = 1 << 24;

/// Checks GraphSAINT's settings: a batch size of 1 to 2³² − 1 drawing at most [`MAX_DRAWS`]
/// nodes, a batch count of at least 1, a coverage of 0 to 10⁴, walks of 1 to 10⁴ steps. What
/// both [`SaintSampler::new`] and `BatchConfig::check` apply.
///
/// # Errors
/// [`ConfigError::OutOfRange`] naming the setting.
pub(crate) fn check_settings(
    kind: SaintKind,
    batch_size: usize,
    batches: Option<usize>,
    coverage: f64,
) -> std::result::Result<(), ConfigError> {
    let out = |name, value: f64, rule| Err(ConfigError::OutOfRange { name, value, rule });
    if batch_size == 0 || batch_size > u32::MAX as usize {
        return out("batch_size", batch_size as f64, "at least 1, below 2^32");
    }
    if let SaintKind::RandomWalk { walk_length } = kind {
        if walk_length == 0 || walk_length > 10_000 {
            return out(
                "walk_length",
                walk_length as f64,
                "at least 1, at most 10000",
            );
        }
    }
    if kind.draws(batch_size) > MAX_DRAWS {
        return out(
            "batch_size",
            batch_size as f64,
            "at most 2^26 nodes drawn a batch (roots × (walk length + 1), 2 × edges)",
        );
    }
    if batches == Some(0) {
        return out("batches_per_epoch", 0.0, "at least 1");
    }
    if !(coverage.is_finite() && (0.0..=1e4).contains(&coverage)) {
        return out("saint_coverage", coverage, "0 (none) to 10000");
    }
    Ok(())
}

impl SaintSampler {
    /// A sampler of `graph` drawing `batch_size` nodes, edges or walk roots a batch
    /// (`kind`); `batches` a epoch, or (`None`) as many as make an epoch draw about the
    /// graph's node count in all. The normalisation is estimated from subgraphs drawn with
    /// `seed` until they hold `coverage` times the node count in all (PyG's
    /// `sample_coverage`).
    ///
    /// # Errors
    /// [`Error::Partition`] for settings `BatchConfig::check` refuses (the same rules), or a
    /// graph of no nodes.
    pub fn new(
        graph: &Graph,
        kind: SaintKind,
        batch_size: usize,
        batches: Option<usize>,
        coverage: f64,
        seed: u64,
    ) -> Result<Self> {
        let n = graph.n_nodes();
        let bad = |what: String| Err(Error::Partition(what));
        if n == 0 {
            return bad("GraphSAINT on a graph of no nodes".into());
        }
        check_settings(kind, batch_size, batches, coverage)
            .map_err(|e| Error::Partition(format!("GraphSAINT: {e}")))?;
        let cdf = match kind {
            SaintKind::Edge => edge_cdf(graph),
            _ => Vec::new(),
        };
        let ip = graph.indptr();
        let rows = match kind {
            SaintKind::RandomWalk { .. } => Guide::default(),
            _ => Guide::new(ip.len(), |i| ip[i] as f64, graph.nnz() as f64, n),
        };
        let total = cdf.last().copied().unwrap_or(0.0);
        let weights = Guide::new(cdf.len(), |i| cdf[i], total, n);
        let mut s = SaintSampler {
            kind,
            batch_size,
            batches: batches.unwrap_or(1),
            n_nodes: n,
            nnz: graph.nnz(),
            cdf,
            rows,
            weights,
            counts: None,
            mean_nodes: 0.0,
        };
        s.presample(graph, coverage, seed);
        if batches.is_none() {
            s.batches = ((n as f64 / s.mean_nodes).ceil() as usize).max(1);
        }
        Ok(s)
    }

    /// What a batch draws.
    pub fn kind(&self) -> SaintKind {
        self.kind
    }

    /// Nodes, edges or roots drawn a batch.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// The counts the normalisation is estimated from (`None` without it).
    pub fn counts(&self) -> Option<&SaintCounts> {
        self.counts.as_ref()
    }

    /// Mean nodes of a pre-sampled subgraph.
    pub fn mean_nodes(&self) -> f64 {
        self.mean_nodes
    }

    /// Draws one batch's nodes with `rng` into `nodes`: distinct, ascending.
    fn draw(&self, graph: &Graph, rng: &mut ChaCha8Rng, nodes: &mut Vec<u32>) {
        let n = graph.n_nodes();
        let ip = graph.indptr();
        let nnz = graph.nnz();
        // The row of stored entry e (`ip.partition_point(|&p| p <= e) - 1`).
        let row_of = |e: usize| {
            (self
                .rows
                .partition_point(ip.len(), |i| ip[i] as f64, e as f64)
                - 1) as u32
        };
        nodes.clear();
        match self.kind {
            SaintKind::Node => {
                for _ in 0..self.batch_size {
                    nodes.push(if nnz == 0 {
                        rng.random_range(0..n) as u32
                    } else {
                        row_of(rng.random_range(0..nnz))
                    });
                }
            }
            SaintKind::Edge => {
                let total = self.cdf.last().copied().unwrap_or(0.0);
                for _ in 0..self.batch_size {
                    if total <= 0.0 {
                        nodes.push(rng.random_range(0..n) as u32);
                        continue;
                    }
                    let r = rng.random::<f64>() * total;
                    let cdf = &self.cdf;
                    let e = self.weights.partition_point(cdf.len(), |i| cdf[i], r);
                    let e = e.min(nnz - 1);
                    nodes.push(row_of(e));
                    nodes.push(graph.indices()[e]);
                }
            }
            SaintKind::RandomWalk { walk_length } => {
                for _ in 0..self.batch_size {
                    let mut v = rng.random_range(0..n);
                    nodes.push(v as u32);
                    for _ in 0..walk_length {
                        let nb = graph.neighbors(v);
                        if !nb.is_empty() {
                            v = nb[rng.random_range(0..nb.len())] as usize;
                        }
                        nodes.push(v as u32);
                    }
                }
            }
        }
        nodes.sort_unstable();
        nodes.dedup();
    }

    /// Draws subgraphs (stream [`PRESAMPLE_STREAM`] of `seed`, in rounds drawn in parallel)
    /// until they hold `coverage` × n nodes in all, and counts how often each node and each
    /// entry of Ã turned up. The counts are integers, so they do not depend on the threads.
    /// With a coverage of 0, one round only, for the mean batch size.
    fn presample(&mut self, graph: &Graph, coverage: f64, seed: u64) {
        let n = graph.n_nodes();
        const ROUND: usize = 64;
        if coverage == 0.0 {
            let total: usize = (0..ROUND)
                .into_par_iter()
                .map(|i| {
                    let mut v = Vec::new();
                    self.draw(graph, &mut draw_rng(seed, PRESAMPLE_STREAM, i), &mut v);
                    v.len()
                })
                .sum();
            self.mean_nodes = total as f64 / ROUND as f64;
            return;
        }
        let ptr = adj_indptr(graph);
        let node: Vec<std::sync::atomic::AtomicU32> = (0..n).map(|_| 0.into()).collect();
        let entry: Vec<std::sync::atomic::AtomicU32> = (0..ptr[n]).map(|_| 0.into()).collect();
        let target = coverage * n as f64;
        let (mut drawn, mut total) = (0usize, 0f64);
        while total < target && drawn < MAX_PRESAMPLED {
            let round: Vec<Vec<u32>> = (drawn..drawn + ROUND)
                .into_par_iter()
                .map(|i| {
                    let mut v = Vec::new();
                    self.draw(graph, &mut draw_rng(seed, PRESAMPLE_STREAM, i), &mut v);
                    // The draws, repeats included, held room for more than the distinct nodes.
                    v.shrink_to_fit();
                    v
                })
                .collect();
            // The subgraphs until the target is reached, in order.
            let mut take = 0;
            for v in &round {
                if total >= target {
                    break;
                }
                total += v.len() as f64;
                take += 1;
            }
            drawn += take;
            // Each task marks one subgraph's nodes at a time in its own flags.
            let per_task = take.div_ceil(rayon::current_num_threads()).max(1);
            round[..take].par_chunks(per_task).for_each(|chunk| {
                use std::sync::atomic::Ordering::Relaxed;
                let mut inside = vec![false; n];
                for nodes in chunk {
                    for &v in nodes {
                        inside[v as usize] = true;
                    }
                    for &v in nodes {
                        node[v as usize].fetch_add(1, Relaxed);
                        let row = graph.neighbors(v as usize);
                        for (e, u) in (ptr[v as usize]..).zip(tilde_row(row, v)) {
                            if inside[u as usize] {
                                entry[e].fetch_add(1, Relaxed);
                            }
                        }
                    }
                    for &v in nodes {
                        inside[v as usize] = false;
                    }
                }
            });
        }
        self.mean_nodes = total / drawn as f64;
        self.counts = Some(SaintCounts {
            subgraphs: drawn as u64,
            node: node.into_iter().map(|c| c.into_inner()).collect(),
            entry: entry.into_iter().map(|c| c.into_inner()).collect(),
            ptr,
        });
    }
}

/// The edge sampler's cumulative weights: stored entry (i, j) weighs 1/deg(i) + 1/deg(j)
/// (degrees of at least 1).
fn edge_cdf(graph: &Graph) -> Vec<f64> {
    let inv = |v: usize| 1.0 / graph.degree(v).max(1) as f64;
    let mut acc = 0.0;
    let mut cdf = Vec::with_capacity(graph.nnz());
    for i in 0..graph.n_nodes() {
        for &j in graph.neighbors(i) {
            acc += inv(i) + inv(j as usize);
            cdf.push(acc);
        }
    }
    cdf
}

impl NodeSampler for SaintSampler {
    fn batches(&self) -> usize {
        self.batches
    }

    fn max_nodes(&self) -> usize {
        self.kind.draws(self.batch_size).min(self.n_nodes)
    }

    fn nodes_into(
        &self,
        graph: &Graph,
        seed: u64,
        epoch: usize,
        index: usize,
        nodes: &mut Vec<u32>,
    ) {
        assert!(index < self.batches, "batch {index} of {}", self.batches);
        let stream = (2 << 32) + epoch as u64;
        self.draw(graph, &mut draw_rng(seed, stream, index), nodes);
    }

    fn check_graph(&self, graph: &Graph) -> Result<()> {
        if graph.n_nodes() != self.n_nodes || graph.nnz() != self.nnz {
            return Err(Error::Mismatch {
                what: "GraphSAINT sampler: the graph's nodes (or edges) vs its own".into(),
                expected: self.n_nodes,
                got: graph.n_nodes(),
            });
        }
        Ok(())
    }

    fn saint(&self) -> Option<&SaintCounts> {
        self.counts.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::synthetic::Preset;
    use crate::graph::{Direction, Norm, NormAdj};
    use crate::sample::{Batch, BatchSource};

    /// The pre-sampled subgraphs as batches of one epoch.
    struct Presampled<'a>(&'a SaintSampler);

    impl NodeSampler for Presampled<'_> {
        fn batches(&self) -> usize {
            self.0.counts().map_or(0, |c| c.subgraphs as usize)
        }
        fn max_nodes(&self) -> usize {
            self.0.max_nodes()
        }
        fn nodes_into(&self, g: &Graph, seed: u64, _: usize, index: usize, nodes: &mut Vec<u32>) {
            self.0
                .draw(g, &mut draw_rng(seed, PRESAMPLE_STREAM, index), nodes);
        }
        fn check_graph(&self, g: &Graph) -> Result<()> {
            self.0.check_graph(g)
        }
        fn saint(&self) -> Option<&SaintCounts> {
            self.0.counts()
        }
    }

    /// Over the pre-sampled subgraphs themselves, the estimator is exact: node v's rows of
    /// the batches' Â sum, divided by C_v, to the whole row of Â over the entries seen; and
    /// the batches' loss weights sum to N_s (the loss of every training node, once).
    #[test]
    fn over_the_presampled_subgraphs_the_normalisation_is_exact() {
        let d = Preset::CoraLike.generate(1).unwrap();
        for (kind, size) in [
            (SaintKind::Node, 300),
            (SaintKind::Edge, 150),
            (SaintKind::RandomWalk { walk_length: 2 }, 100),
        ] {
            for norm in [Norm::Symmetric, Norm::Row] {
                let s = SaintSampler::new(&d.graph, kind, size, None, 10.0, 5).unwrap();
                let counts = s.counts().unwrap();
                assert!(counts.subgraphs() > 0);
                let src = BatchSource::new(&d.graph, norm, &d.features, &d.labels, &d.split.train)
                    .unwrap();
                let mut b = Batch::<f32>::new(norm);
                let n = d.graph.n_nodes();
                let mut rows = vec![0f64; n];
                let mut weights = 0f64;
                let p = Presampled(&s);
                for i in 0..p.batches() {
                    b.fill(&src, &p, 5, 0, i).unwrap();
                    for (k, row) in b.adj().a().outer_iterator().enumerate() {
                        rows[b.nodes()[k] as usize] +=
                            row.data().iter().map(|&a| f64::from(a)).sum::<f64>();
                    }
                    let w = b.loss_weights().unwrap();
                    weights += b
                        .train()
                        .indices()
                        .iter()
                        .map(|&k| f64::from(w[k as usize]))
                        .sum::<f64>();
                }
                let full = NormAdj::<f64>::new(&d.graph, norm);
                for (v, row) in full.a().outer_iterator().enumerate() {
                    let c_v = counts.nodes()[v];
                    if c_v == 0 {
                        continue;
                    }
                    let seen: f64 = row
                        .iter()
                        .zip(&counts.entries()[counts.ptr[v]..counts.ptr[v + 1]])
                        .filter(|(_, &c)| c > 0)
                        .map(|((_, &a), _)| a)
                        .sum();
                    let got = rows[v] / f64::from(c_v);
                    assert!(
                        (got - seen).abs() < 1e-5,
                        "{kind:?} {norm:?} node {v}: {got} vs {seen}"
                    );
                }
                let train_seen = d
                    .split
                    .train
                    .indices()
                    .iter()
                    .filter(|&&v| counts.nodes()[v as usize] > 0)
                    .count() as f64;
                let want = counts.subgraphs() as f64 * train_seen / d.split.train.len() as f64;
                assert!(
                    (weights - want).abs() < 1e-5 * want,
                    "{kind:?}: {weights} vs {want}"
                );
            }
        }
    }

    #[test]
    fn the_counts_and_batches_do_not_depend_on_the_threads() {
        let d = Preset::CoraLike.generate(2).unwrap();
        let kind = SaintKind::RandomWalk { walk_length: 3 };
        let build = |threads| {
            crate::par::thread_pool(threads)
                .unwrap()
                .install(|| SaintSampler::new(&d.graph, kind, 64, Some(4), 5.0, 9).unwrap())
        };
        let (one, two) = (build(1), build(2));
        assert_eq!(one, two);
        let mut a = Vec::new();
        let mut b = Vec::new();
        one.nodes_into(&d.graph, 3, 2, 1, &mut a);
        two.nodes_into(&d.graph, 3, 2, 1, &mut b);
        assert_eq!(a, b);
        // Another epoch, batch or seed draws otherwise.
        for (seed, epoch, index) in [(3, 2, 0), (3, 1, 1), (4, 2, 1)] {
            one.nodes_into(&d.graph, seed, epoch, index, &mut b);
            assert_ne!(a, b);
        }
    }

    #[test]
    fn each_kind_draws_what_it_says() {
        // A star (0 in the middle) and an isolated node 6.
        let g = Graph::try_from_edges(
            7,
            &[(0, 1), (0, 2), (0, 3), (0, 4), (0, 5)],
            Direction::Undirected,
        )
        .unwrap();
        let mut nodes = Vec::new();
        // Nodes by degree: the isolated node is never drawn, the centre nearly always.
        let s = SaintSampler::new(&g, SaintKind::Node, 4, Some(50), 1.0, 0).unwrap();
        let mut centre = 0;
        for i in 0..50 {
            s.nodes_into(&g, 1, 0, i, &mut nodes);
            assert!(nodes.windows(2).all(|w| w[0] < w[1]) && nodes.len() <= 4);
            assert!(!nodes.contains(&6));
            centre += usize::from(nodes.contains(&0));
        }
        assert!(centre > 40, "{centre}");
        // Edges: both ends, so the centre every time.
        let s = SaintSampler::new(&g, SaintKind::Edge, 2, Some(20), 1.0, 0).unwrap();
        for i in 0..20 {
            s.nodes_into(&g, 1, 0, i, &mut nodes);
            assert!(
                nodes.contains(&0) && nodes.len() >= 2 && nodes.len() <= 3,
                "{nodes:?}"
            );
        }
        // Walks of 2 steps from a leaf pass through the centre; from the isolated node stay.
        let s = SaintSampler::new(
            &g,
            SaintKind::RandomWalk { walk_length: 2 },
            1,
            Some(30),
            1.0,
            0,
        )
        .unwrap();
        for i in 0..30 {
            s.nodes_into(&g, 1, 0, i, &mut nodes);
            assert!(nodes == [6] || nodes.contains(&0), "{nodes:?}");
            assert!(nodes.len() <= 3);
        }
        assert_eq!(s.max_nodes(), 3);
    }

    #[test]
    fn bad_settings_and_another_graph_are_typed_errors() {
        let d = Preset::CoraLike.generate(2).unwrap();
        let g = &d.graph;
        let rw = SaintKind::RandomWalk { walk_length: 2 };
        for (kind, size, batches, coverage) in [
            (SaintKind::Node, 0, None, 1.0),
            (SaintKind::Node, 5, Some(0), 1.0),
            (SaintKind::Node, 5, None, -1.0),
            (SaintKind::Node, 5, None, f64::NAN),
            (SaintKind::RandomWalk { walk_length: 0 }, 5, None, 1.0),
            (
                SaintKind::RandomWalk {
                    walk_length: 10_000,
                },
                1 << 26,
                None,
                1.0,
            ),
            (SaintKind::Edge, 1 << 28, None, 1.0),
        ] {
            assert!(matches!(
                SaintSampler::new(g, kind, size, batches, coverage, 0),
                Err(Error::Partition(_))
            ));
        }
        let s = SaintSampler::new(g, rw, 10, Some(2), 1.0, 0).unwrap();
        let other = Graph::try_from_edges(5, &[(0, 1)], Direction::Undirected).unwrap();
        assert!(s.check_graph(g).is_ok());
        assert!(matches!(s.check_graph(&other), Err(Error::Mismatch { .. })));
        // Coverage 0: no normalisation, nothing pre-sampled but the batch size's estimate.
        let none = SaintSampler::new(g, rw, 10, None, 0.0, 0).unwrap();
        assert!(none.counts().is_none() && none.saint().is_none());
        assert!(none.batches() > 1 && none.mean_nodes() > 10.0);
        let empty = Graph::try_from_edges(0, &[], Direction::Undirected).unwrap();
        assert!(SaintSampler::new(&empty, rw, 1, None, 1.0, 0).is_err());
    }
}
