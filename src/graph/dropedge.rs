//! DropEdge (Rong et al., ICLR 2020, <https://arxiv.org/abs/1907.10903>): a random subgraph
//! each epoch, renormalised.
//!
//! Each edge of A is kept with probability 1 − p, independently, and the kept adjacency A′ is
//! normalised as usual: Â′ = D̃′^-1/2 (A′ + I) D̃′^-1/2 (or D̃′^-1 (A′ + I)), with the degrees
//! D̃′ of the *sampled* graph (the paper's "re-normalisation"). Self-loops are not edges that
//! can be dropped: those of the input are kept and [`NormAdj`] adds the remaining ones, so
//! every node keeps Ã′_ii = 1.
//!
//! - **Undirected graph** (`!graph.is_directed()`): an edge {u, v} is kept or dropped in both
//!   directions together, so A′ (and, with [`Norm::Symmetric`], Â′) stays symmetric.
//! - **Directed graph**: every stored arc u→v is an independent draw (u→v and v→u separately).
//!
//! **Determinism.** [`DropEdge::sample`] draws one `u64` key k from the RNG, then decides each
//! edge by a hash: edge (u, v) (with u ≤ v for an undirected graph) is kept iff
//! ⌊h(k, u, v) / 2¹¹⌋ ≥ ⌈p·2⁵³⌉, where h(k, u, v) = splitmix64(k ⊕ splitmix64(2³²·u + v)).
//! The top 53 bits of h are (up to the quality of splitmix64) uniform on {0, …, 2⁵³ − 1}, so
//! P(keep) = 1 − ⌈p·2⁵³⌉/2⁵³ = 1 − p up to 2⁻⁵³. The subgraph depends only on the RNG state and
//! the graph, never on thread count or iteration order, and the RNG advances by exactly one
//! `u64` per call. [`DropEdge::sample_into`] draws the same key and applies the same rule.
//!
//! **Cost.** Â′ is written straight from the input's CSR, row by row (the kept entries, the
//! self-loop, the sampled degrees = the row lengths of Ã′, then the values), with no kept edge
//! list and no intermediate [`Graph`]: O(n + nnz) time per sample. [`DropEdge::sample_into`]
//! rewrites an existing [`NormAdj`] in place, keeping its buffers' capacity, so a training loop
//! that keeps one Â′ across epochs allocates nothing after its first sample; its memory is one
//! Â′ (plus Â′ᵀ when Â′ is not symmetric) at the size of the largest sample, n values of
//! D̃′^-1/2 and n + 1 cursors. Each undirected edge is hashed once per direction (2 hashes per
//! kept or dropped edge). [`DropEdge::sample_graph`] still builds the kept subgraph itself.

use rand::Rng;

use super::{AdjScratch, Direction, Graph, Norm, NormAdj};
use crate::{ConfigError, Error, Result, Scalar};

/// DropEdge with drop probability `p`: each [`DropEdge::sample`] keeps every edge with
/// probability 1 − p and renormalises.
///
/// Build it with [`DropEdge::new`], which checks p ∈ [0, 1). The field is public, so a value
/// outside that range can still be written directly; [`DropEdge::sample`] then keeps every edge
/// for p ≤ 0 (and for NaN) and drops every non-loop edge for p ≥ 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DropEdge {
    /// Probability of dropping each edge, in [0, 1). 0 keeps the graph unchanged.
    pub p: f64,
}

impl DropEdge {
    /// DropEdge with drop probability `p`.
    ///
    /// # Errors
    /// [`ConfigError::DropoutOutOfRange`] unless 0 ≤ p < 1 (NaN included).
    ///
    /// # Examples
    /// ```
    /// use sparse_gcn::graph::dropedge::DropEdge;
    /// assert_eq!(DropEdge::new(0.2).unwrap().p, 0.2);
    /// assert!(DropEdge::new(1.0).is_err());
    /// ```
    pub fn new(p: f64) -> Result<Self> {
        if (0.0..1.0).contains(&p) {
            Ok(DropEdge { p })
        } else {
            Err(Error::Config(ConfigError::DropoutOutOfRange(p)))
        }
    }

    /// Â′ of a random subgraph: keeps each edge of `graph` with probability 1 − p (both
    /// directions of an undirected edge together; each arc of a directed graph on its own),
    /// then normalises the kept graph with `norm` (self-loops added by [`NormAdj::new`]).
    ///
    /// Draws exactly one `u64` from `rng` (see the [module docs](self)); the result depends
    /// only on that draw and `graph`, and equals `NormAdj::new(&self.sample_graph(graph, rng),
    /// norm)` bit for bit. For p = 0 the result equals `NormAdj::new(graph, norm)`.
    ///
    /// # Complexity
    /// O(n + nnz) time; no transient memory besides the returned Â′ (and D̃′^-1/2, n
    /// values). [`DropEdge::sample_into`] reuses the buffers of an earlier Â′ instead.
    ///
    /// # Examples
    /// ```
    /// use rand::SeedableRng;
    /// use sparse_gcn::graph::{dropedge::DropEdge, AdjScratch, Direction, Graph, Norm, NormAdj};
    /// let g = Graph::try_from_edges(4, &[(0, 1), (1, 2), (2, 3)], Direction::Undirected).unwrap();
    /// let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    /// let adj = DropEdge::new(0.5).unwrap().sample::<f32, _>(&g, Norm::Symmetric, &mut rng);
    /// assert!(adj.is_symmetric());
    /// // a path of 3 edges: 4 self-loops plus 2 entries per kept edge
    /// assert!(adj.nnz() >= 4 && adj.nnz() <= 10 && adj.nnz() % 2 == 0);
    /// ```
    pub fn sample<F: Scalar, R: Rng + ?Sized>(
        &self,
        graph: &Graph,
        norm: Norm,
        rng: &mut R,
    ) -> NormAdj<F> {
        let mut out = NormAdj::empty(norm);
        self.sample_into(graph, norm, rng, &mut out, &mut AdjScratch::default());
        out
    }

    /// [`DropEdge::sample`] written into `out`, reusing its buffers: Â′ is built straight from
    /// `graph`'s CSR (each row filtered by the keep rule of the [module docs](self), the
    /// sampled degrees, the self-loops [`NormAdj`] adds, the normalised values, and Â′ᵀ when
    /// Â′ is not symmetric), without building the kept [`Graph`]. `out`'s previous contents
    /// (any size, any normalisation) are overwritten; afterwards `out` is bit for bit what
    /// [`DropEdge::sample`] returns for the same RNG state (same row pointers, indices,
    /// values, symmetric flag and stored transpose). Draws exactly one `u64` from `rng`.
    ///
    /// # Complexity
    /// O(n + nnz) time. No allocation once `out`'s buffers have room for n nodes and
    /// nnz(graph) + n entries (their capacity is kept from call to call; the transpose's
    /// buffers too, while a symmetric Â′ does not use them): start from
    /// `NormAdj::new(graph, norm)` (or a clone of it) or from an earlier sample of `graph`.
    /// Memory: `out`'s Â′ (and Â′ᵀ) at the capacity of the largest sample it has held, plus n
    /// values (D̃′^-1/2) and n + 1 cursors.
    ///
    /// # Examples
    /// ```
    /// use rand::SeedableRng;
    /// use sparse_gcn::graph::{dropedge::DropEdge, AdjScratch, Direction, Graph, Norm, NormAdj};
    /// let g = Graph::try_from_edges(4, &[(0, 1), (1, 2), (2, 3)], Direction::Undirected).unwrap();
    /// let de = DropEdge::new(0.5).unwrap();
    /// let (mut r1, mut r2) = (rand_chacha::ChaCha8Rng::seed_from_u64(0),
    ///                         rand_chacha::ChaCha8Rng::seed_from_u64(0));
    /// let mut out = NormAdj::<f32>::new(&g, Norm::Symmetric); // buffers big enough
    /// let mut scratch = AdjScratch::default();
    /// for _ in 0..3 {
    ///     de.sample_into(&g, Norm::Symmetric, &mut r1, &mut out, &mut scratch);
    ///     let fresh = de.sample::<f32, _>(&g, Norm::Symmetric, &mut r2);
    ///     assert_eq!(out.a(), fresh.a());
    /// }
    /// ```
    pub fn sample_into<F: Scalar, R: Rng + ?Sized>(
        &self,
        graph: &Graph,
        norm: Norm,
        rng: &mut R,
        out: &mut NormAdj<F>,
        scratch: &mut AdjScratch<F>,
    ) {
        let key = rng.next_u64();
        let threshold = keep_threshold(self.p);
        if graph.is_directed() {
            out.assign_filtered(graph, norm, |u, v| keeps(key, u, v, threshold), scratch);
        } else {
            // An undirected edge is decided once, from its lower endpoint (as `kept_subgraph`
            // lists it), for both of its entries.
            let keep = |u: u32, v: u32| keeps(key, u.min(v), u.max(v), threshold);
            out.assign_filtered(graph, norm, keep, scratch);
        }
    }

    /// The kept subgraph A′ itself, before normalisation: what [`DropEdge::sample`] normalises
    /// (same single `u64` draw from `rng`, same edges). Same node count and directedness as
    /// `graph`; input self-loops are kept.
    ///
    /// # Complexity
    /// O(n + nnz) time and transient memory.
    pub fn sample_graph<R: Rng + ?Sized>(&self, graph: &Graph, rng: &mut R) -> Graph {
        let key = rng.next_u64();
        kept_subgraph(graph, key, keep_threshold(self.p))
    }
}

/// ⌈p·2⁵³⌉ as an integer: an edge is kept iff the top 53 bits of its hash are ≥ this.
/// p ≤ 0 or NaN gives 0 (keep all); p ≥ 1 gives ≥ 2⁵³ (drop all).
pub(crate) fn keep_threshold(p: f64) -> u64 {
    // `as` saturates: NaN and negatives become 0.
    (p * (1u64 << 53) as f64).ceil() as u64
}

/// splitmix64's finaliser (Steele, Lea & Flood, 2014): a bijection on u64 with good avalanche.
#[inline]
fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Whether edge (u, v) survives under `key`: top 53 bits of h(key, u, v) ≥ `threshold`.
#[inline]
pub(crate) fn keeps(key: u64, u: u32, v: u32, threshold: u64) -> bool {
    let pair = (u64::from(u) << 32) | u64::from(v);
    (splitmix64(key ^ splitmix64(pair)) >> 11) >= threshold
}

/// The subgraph of `graph` whose edges pass [`keeps`], built in O(n + nnz).
///
/// The kept edges are listed in CSR order (rows ascending, columns ascending within a row), an
/// undirected edge once from its lower endpoint. [`Graph::try_from_edges`]'s counting sort
/// then fills every row already sorted (an undirected row i receives its neighbours u < i, in
/// ascending u, before its own u ≥ i), so its per-row sort and deduplication are linear.
fn kept_subgraph(graph: &Graph, key: u64, threshold: u64) -> Graph {
    let n = graph.n_nodes();
    let directed = graph.is_directed();
    let mut edges: Vec<(u32, u32)> = Vec::with_capacity(graph.n_edges());
    for i in 0..n {
        // Node ids fit in u32: `Graph` guarantees n_nodes ≤ u32::MAX.
        let u = i as u32;
        let row = graph.neighbors(i);
        let row = if directed {
            row
        } else {
            &row[row.partition_point(|&v| v < u)..]
        };
        edges.extend(
            row.iter()
                .filter(|&&v| v == u || keeps(key, u, v, threshold))
                .map(|&v| (u, v)),
        );
    }
    let dir = if directed {
        Direction::Directed
    } else {
        Direction::Undirected
    };
    match Graph::try_from_edges(n, &edges, dir) {
        Ok(g) => g,
        // Every id comes from `graph`, so it is < n ≤ u32::MAX: this cannot fail.
        Err(e) => unreachable!("DropEdge: rebuilding a subgraph failed: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn random_graph(n: usize, m: usize, dir: Direction, seed: u64) -> Graph {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut edges: Vec<(u32, u32)> = (0..m)
            .map(|_| (rng.random_range(0..n as u32), rng.random_range(0..n as u32)))
            .collect();
        edges.push((0, 0)); // a self-loop
        Graph::try_from_edges(n, &edges, dir).unwrap()
    }

    fn raw<F: Scalar>(adj: &NormAdj<F>) -> (Vec<usize>, Vec<u32>, Vec<F>) {
        let a = adj.a();
        (
            a.indptr().raw_storage().to_vec(),
            a.indices().to_vec(),
            a.data().to_vec(),
        )
    }

    /// Same nodes, CSR pattern and directedness (the build statistics differ).
    fn same_pattern(a: &Graph, b: &Graph) -> bool {
        a.n_nodes() == b.n_nodes()
            && a.indptr() == b.indptr()
            && a.indices() == b.indices()
            && a.is_directed() == b.is_directed()
    }

    /// Undirected non-loop edges of a graph, as (min, max) pairs.
    fn edge_set(g: &Graph) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        for i in 0..g.n_nodes() {
            for &j in g.neighbors(i) {
                if (i as u32) < j {
                    out.push((i as u32, j));
                }
            }
        }
        out
    }

    /// Everything a `NormAdj` stores, values as bits: Â's CSR, the symmetric flag, Âᵀ's CSR
    /// (when stored), the normalisation.
    type Bits = (
        (Vec<usize>, Vec<u32>, Vec<u64>),
        bool,
        Option<(Vec<usize>, Vec<u32>, Vec<u64>)>,
        Norm,
    );

    fn bits<F: Scalar>(adj: &NormAdj<F>) -> Bits {
        let csr = |a: crate::kernels::CsrView<'_, F>| {
            (
                a.indptr().raw_storage().to_vec(),
                a.indices().to_vec(),
                a.data()
                    .iter()
                    .map(|v| v.to_f64_lossless().to_bits())
                    .collect::<Vec<_>>(),
            )
        };
        (
            csr(adj.a()),
            adj.is_symmetric(),
            (!adj.is_symmetric()).then(|| csr(adj.a_t())),
            adj.norm(),
        )
    }

    /// A random graph on `n` nodes with `m` random edges, some self-loops, and (for small m)
    /// isolated nodes.
    fn graph_with_loops(n: usize, m: usize, dir: Direction, seed: u64) -> Graph {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut edges: Vec<(u32, u32)> = (0..m)
            .map(|_| (rng.random_range(0..n as u32), rng.random_range(0..n as u32)))
            .collect();
        for _ in 0..(n / 7).max(1) {
            let v = rng.random_range(0..n as u32);
            edges.push((v, v));
        }
        Graph::try_from_edges(n, &edges, dir).unwrap()
    }

    /// `sample_into` against what `sample` did before it existed (`NormAdj::new` of the kept
    /// subgraph), with one `out` reused across graphs of several sizes, directions, rates
    /// and normalisations; the RNG streams stay in step.
    fn check_sample_into_matches<F: Scalar>(out: &mut NormAdj<F>, seed: u64) {
        let mut scratch = AdjScratch::default();
        let sizes = [(1, 0), (7, 3), (60, 150), (200, 30), (300, 2000), (45, 400)];
        for (case, &(n, m)) in sizes.iter().enumerate() {
            for dir in [Direction::Undirected, Direction::Directed] {
                let g = graph_with_loops(n, m, dir, seed * 31 + case as u64);
                for p in [0.0, 0.1, 0.5, 0.9, 0.999, 1.0] {
                    for norm in [Norm::Symmetric, Norm::Row] {
                        let de = DropEdge { p };
                        let mut r_old = ChaCha8Rng::seed_from_u64(seed ^ n as u64);
                        let mut r_new = r_old.clone();
                        let mut r_fresh = r_old.clone();
                        for _ in 0..2 {
                            let old = NormAdj::<F>::new(&de.sample_graph(&g, &mut r_old), norm);
                            de.sample_into(&g, norm, &mut r_new, out, &mut scratch);
                            let what = format!("n {n}, m {m}, {dir:?}, p {p}, {norm:?}");
                            assert_eq!(bits(out), bits(&old), "{what}");
                            assert_eq!(
                                bits(&de.sample::<F, _>(&g, norm, &mut r_fresh)),
                                bits(&old),
                                "sample: {what}"
                            );
                        }
                        assert_eq!(r_old.next_u64(), r_new.next_u64());
                    }
                }
            }
        }
    }

    #[test]
    fn sample_into_equals_the_rebuilt_subgraph_bit_for_bit() {
        let mut out32 = NormAdj::<f32>::empty(Norm::Row);
        let mut out64 = NormAdj::<f64>::new(
            &graph_with_loops(500, 3000, Direction::Directed, 1),
            Norm::Symmetric,
        );
        for seed in [1, 2, 3] {
            check_sample_into_matches(&mut out32, seed);
            check_sample_into_matches(&mut out64, seed);
        }
    }

    #[test]
    fn sample_into_keeps_capacity_and_handles_isolated_nodes() {
        // nodes 3 and 4 isolated, node 2 with only a self-loop
        let g = Graph::try_from_edges(5, &[(0, 1), (2, 2)], Direction::Undirected).unwrap();
        let mut out = NormAdj::<f64>::new(&g, Norm::Symmetric);
        let cap = out.a().indices().len();
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut scratch = AdjScratch::default();
        DropEdge { p: 1.0 }.sample_into(&g, Norm::Symmetric, &mut rng, &mut out, &mut scratch);
        // only self-loops left, each Â′_ii = 1
        assert_eq!(out.nnz(), 5);
        assert!(out.a().data().iter().all(|&v| v == 1.0));
        assert!(cap >= out.nnz());
        DropEdge { p: 0.0 }.sample_into(&g, Norm::Symmetric, &mut rng, &mut out, &mut scratch);
        assert_eq!(bits(&out), bits(&NormAdj::<f64>::new(&g, Norm::Symmetric)));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        #[test]
        fn sample_into_matches_sample_prop(
            n in 1usize..80,
            m in 0usize..400,
            directed in proptest::bool::ANY,
            row in proptest::bool::ANY,
            p in 0.0f64..1.0,
            seed in 0u64..1000,
        ) {
            let dir = if directed { Direction::Directed } else { Direction::Undirected };
            let norm = if row { Norm::Row } else { Norm::Symmetric };
            let g = graph_with_loops(n, m, dir, seed);
            let de = DropEdge { p };
            let mut r_old = ChaCha8Rng::seed_from_u64(seed);
            let mut r_new = r_old.clone();
            // an `out` that held a bigger graph with the other normalisation first
            let mut out = NormAdj::<f32>::new(
                &graph_with_loops(n + 10, m + 50, Direction::Directed, seed + 1),
                Norm::Row,
            );
            let mut scratch = AdjScratch::default();
            for _ in 0..3 {
                let old = NormAdj::<f32>::new(&de.sample_graph(&g, &mut r_old), norm);
                de.sample_into(&g, norm, &mut r_new, &mut out, &mut scratch);
                proptest::prop_assert_eq!(bits(&out), bits(&old));
            }
        }
    }

    #[test]
    fn dropedge_new_checks_range() {
        assert!(DropEdge::new(0.0).is_ok());
        assert!(DropEdge::new(0.999).is_ok());
        for p in [1.0, 1.5, -0.1, f64::NAN, f64::INFINITY] {
            match DropEdge::new(p) {
                Err(Error::Config(ConfigError::DropoutOutOfRange(q))) => {
                    assert!(q == p || (q.is_nan() && p.is_nan()))
                }
                other => panic!("p = {p}: expected DropoutOutOfRange, got {other:?}"),
            }
        }
    }

    #[test]
    fn dropedge_p_zero_equals_normadj() {
        for (dir, norm) in [
            (Direction::Undirected, Norm::Symmetric),
            (Direction::Undirected, Norm::Row),
            (Direction::Directed, Norm::Symmetric),
        ] {
            let g = random_graph(50, 120, dir, 1);
            let mut rng = ChaCha8Rng::seed_from_u64(5);
            let sampled = DropEdge::new(0.0)
                .unwrap()
                .sample::<f64, _>(&g, norm, &mut rng);
            let full = NormAdj::<f64>::new(&g, norm);
            assert_eq!(raw(&sampled), raw(&full));
            assert_eq!(sampled.is_symmetric(), full.is_symmetric());
            assert!(same_pattern(
                &DropEdge { p: 0.0 }.sample_graph(&g, &mut rng),
                &g
            ));
        }
    }

    #[test]
    fn dropedge_undirected_sample_is_symmetric_subgraph() {
        let g = random_graph(80, 300, Direction::Undirected, 2);
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let de = DropEdge::new(0.5).unwrap();
        for _ in 0..5 {
            let adj = de.sample::<f64, _>(&g, Norm::Symmetric, &mut rng);
            assert!(adj.is_symmetric());
            let a = adj.a();
            for (v, (i, j)) in a.iter() {
                let (i, j) = (i as usize, j as usize);
                assert_eq!(a.get(j, i), Some(v), "Â not symmetric at ({i}, {j})");
                if i != j {
                    assert!(g.neighbors(i).contains(&(j as u32)), "({i}, {j}) not in A");
                }
                assert!(a.get(i, i).is_some(), "missing self-loop at {i}");
            }
            // Row-normalised: rows sum to 1 on the sampled degrees.
            let row = de.sample::<f64, _>(&g, Norm::Row, &mut rng);
            for r in row.a().outer_iterator() {
                assert!((r.data().iter().sum::<f64>() - 1.0).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn dropedge_kept_fraction_near_one_minus_p() {
        let g = random_graph(5000, 40_000, Direction::Undirected, 3);
        let e = edge_set(&g).len() as f64;
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        for p in [0.1, 0.5, 0.9] {
            let de = DropEdge::new(p).unwrap();
            let adj = de.sample::<f32, _>(&g, Norm::Symmetric, &mut rng);
            // nnz(Â′) = n (self-loops) + 2·kept
            let kept = (adj.nnz() - g.n_nodes()) as f64 / 2.0;
            let sigma = (e * p * (1.0 - p)).sqrt();
            let z = (kept - e * (1.0 - p)) / sigma;
            assert!(z.abs() < 5.0, "p = {p}: kept {kept} of {e}, z = {z}");
        }
    }

    #[test]
    fn dropedge_same_seed_same_sample_different_draws_differ() {
        let g = random_graph(200, 800, Direction::Undirected, 5);
        let de = DropEdge::new(0.3).unwrap();
        let mut r1 = ChaCha8Rng::seed_from_u64(77);
        let mut r2 = ChaCha8Rng::seed_from_u64(77);
        let a1 = de.sample::<f32, _>(&g, Norm::Symmetric, &mut r1);
        let a2 = de.sample::<f32, _>(&g, Norm::Symmetric, &mut r2);
        assert_eq!(raw(&a1), raw(&a2));
        // the next draw from the same stream differs
        let a3 = de.sample::<f32, _>(&g, Norm::Symmetric, &mut r1);
        assert_ne!(raw(&a1).1, raw(&a3).1);
        // and the RNG advanced by exactly one u64 per sample
        let mut r3 = ChaCha8Rng::seed_from_u64(77);
        r3.next_u64();
        r3.next_u64();
        assert_eq!(r1.next_u64(), r3.next_u64());
        // input self-loop kept
        assert!(de.sample_graph(&g, &mut r2).neighbors(0).contains(&0));
    }

    #[test]
    fn dropedge_directed_arcs_are_independent() {
        // every arc present in both directions: u→v and v→u are separate draws
        let n = 400u32;
        let mut edges = Vec::new();
        let mut rng = ChaCha8Rng::seed_from_u64(6);
        for _ in 0..3000 {
            let (u, v) = (rng.random_range(0..n), rng.random_range(0..n));
            if u != v {
                edges.push((u, v));
                edges.push((v, u));
            }
        }
        edges.push((3, 3));
        let g = Graph::try_from_edges(n as usize, &edges, Direction::Directed).unwrap();
        assert!(g.is_directed());
        let de = DropEdge::new(0.5).unwrap();
        let sub = de.sample_graph(&g, &mut rng);
        assert!(sub.is_directed());
        assert!(sub.neighbors(3).contains(&3), "input self-loop kept");
        let (mut pairs, mut one_way) = (0usize, 0usize);
        for u in 0..n as usize {
            for &v in sub.neighbors(u) {
                assert!(g.neighbors(u).contains(&v), "arc {u}→{v} not in the input");
            }
            for &v in g.neighbors(u) {
                if (u as u32) < v {
                    pairs += 1;
                    let a = sub.neighbors(u).contains(&v);
                    let b = sub.neighbors(v as usize).contains(&(u as u32));
                    one_way += usize::from(a != b);
                }
            }
        }
        // P(exactly one direction kept) = 2·p·(1 − p) = 1/2
        let (m, s) = (pairs as f64 * 0.5, (pairs as f64 * 0.25).sqrt());
        assert!(
            (one_way as f64 - m).abs() < 5.0 * s,
            "{one_way} of {pairs} pairs one-way"
        );
        let adj = de.sample::<f64, _>(&g, Norm::Symmetric, &mut rng);
        assert!(!adj.is_symmetric());
        assert_eq!(adj.a_t().to_owned(), adj.a().transpose_view().to_csr());
    }

    #[test]
    fn dropedge_extreme_p_field_values() {
        let g = random_graph(30, 60, Direction::Undirected, 8);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let all = DropEdge { p: 1.0 }.sample_graph(&g, &mut rng);
        // only the input self-loops survive p = 1
        assert_eq!(all.nnz(), g.stats().self_loops);
        assert!((0..30).all(|i| all.neighbors(i).iter().all(|&j| j as usize == i)));
        assert!(same_pattern(
            &DropEdge { p: f64::NAN }.sample_graph(&g, &mut rng),
            &g
        ));
        assert!(same_pattern(
            &DropEdge { p: -1.0 }.sample_graph(&g, &mut rng),
            &g
        ));
    }
}
