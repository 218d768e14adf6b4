//! Node reorderings: relabel a graph's nodes so that neighbours get nearby ids.
//!
//! # Why
//! SpMM (`kernels::spmm`) gathers the rows of X named by Â's column indices. In a random node
//! order almost every gather misses the caches and the TLB (`../shared/LIMITS.md` §3); if the
//! neighbours of the rows processed together have nearby ids, their X rows are reused from
//! the caches instead. A relabelling changes nothing mathematically: a GCN on P·Â·Pᵀ with P·X
//! computes P times the original outputs (up to the floating-point summation order inside each
//! row, see [`permute_graph`]).
//!
//! # Orders ([`Reorder`], computed by [`order`])
//! | name | order | cost |
//! |---|---|---|
//! | `none` | the identity | O(n) |
//! | `random` | a seeded uniformly random permutation (the worst case, for benchmarks) | O(n) |
//! | `degree` | by descending degree (ties by id): hubs first, packed together | O(n) |
//! | `bfs` | breadth-first from the highest-degree node of each component | O(n + nnz) |
//! | `rcm` | reverse Cuthill–McKee from a pseudo-peripheral node of each component | O(n + nnz·log) |
//! | `community` | nested label-propagation communities laid out contiguously ([`community_order`]) | O(levels·iterations·nnz) |
//! | `auto` | `community` if it makes the SpMM's gathers miss a modelled cache clearly less often than the given order, the given order otherwise ([`auto_order`]) | that of `community` plus two [`cache_miss_model`]s |
//!
//! Every order reads the graph structure only (the functions take no labels or features) and
//! is deterministic: the same graph gives the same permutation on every machine and for any
//! thread count. A directed graph is ordered by its symmetrised pattern A + Aᵀ.
//!
//! # Applying and undoing
//! [`apply`] permutes a [`Dataset`] once: graph, features (dense or sparse), labels and split
//! masks. Per-node outputs computed on the reordered dataset (logits, embeddings) come back
//! in the caller's order with [`unpermute_rows`] and [`unpermute_slice`].
//!
//! # Convention
//! A [`Permutation`] maps new ids to old ids and back: after applying it, row `r` holds the
//! node whose old id is `new_to_old()[r]`, and old node `i` sits at row `old_to_new()[i]`.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;

use ndarray::{Array2, ArrayView2};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::features::SparseFeatures;
use super::normalize::NewTrusted;
use super::{Dataset, Features, Graph, Mask, Split};
use crate::kernels::transpose::transpose_pattern;
use crate::kernels::Csr;
use crate::{ConfigError, Error, Result, Scalar};

/// A permutation of `0..n` node ids, stored both ways (`new → old` and `old → new`).
///
/// # Examples
/// ```
/// use sparse_gcn::graph::reorder::Permutation;
/// let p = Permutation::try_from_new_to_old(vec![2, 0, 1]).unwrap();
/// assert_eq!(p.old_to_new(), &[1, 2, 0]);
/// assert_eq!(p.inverse().inverse(), p);
/// assert!(Permutation::try_from_new_to_old(vec![0, 0, 1]).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permutation {
    new_to_old: Vec<u32>,
    old_to_new: Vec<u32>,
}

impl Permutation {
    /// The identity on `n` nodes.
    ///
    /// # Panics
    /// If `n` does not fit in `u32` (no [`Graph`] has that many nodes).
    pub fn identity(n: usize) -> Self {
        let v = ids(n);
        Permutation {
            old_to_new: v.clone(),
            new_to_old: v,
        }
    }

    /// A uniformly random permutation of `n` nodes (Fisher–Yates on a ChaCha8 stream of
    /// `seed`): the same for the same `(n, seed)` on every machine.
    ///
    /// # Panics
    /// If `n` does not fit in `u32`.
    pub fn random(n: usize, seed: u64) -> Self {
        let mut v = ids(n);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        for i in (1..n).rev() {
            v.swap(i, rng.random_range(0..=i));
        }
        Self::from_new_to_old_trusted(v)
    }

    /// The permutation placing old node `new_to_old[r]` at row `r`.
    ///
    /// # Errors
    /// [`Error::NodeOutOfRange`] for an entry ≥ n, [`Error::Mismatch`] for an id given twice
    /// or a length that does not fit in `u32`.
    pub fn try_from_new_to_old(new_to_old: Vec<u32>) -> Result<Self> {
        let old_to_new = invert_checked(&new_to_old)?;
        Ok(Permutation {
            new_to_old,
            old_to_new,
        })
    }

    /// The permutation moving old node `i` to row `old_to_new[i]`.
    ///
    /// # Errors
    /// As [`Permutation::try_from_new_to_old`].
    pub fn try_from_old_to_new(old_to_new: Vec<u32>) -> Result<Self> {
        let new_to_old = invert_checked(&old_to_new)?;
        Ok(Permutation {
            new_to_old,
            old_to_new,
        })
    }

    /// From a `new → old` list this module built itself (a bijection by construction).
    fn from_new_to_old_trusted(new_to_old: Vec<u32>) -> Self {
        let mut old_to_new = vec![0u32; new_to_old.len()];
        for (r, &o) in new_to_old.iter().enumerate() {
            old_to_new[o as usize] = r as u32;
        }
        debug_assert!(invert_checked(&new_to_old).is_ok());
        Permutation {
            new_to_old,
            old_to_new,
        }
    }

    /// The inverse permutation (applying it undoes `self`).
    pub fn inverse(&self) -> Self {
        Permutation {
            new_to_old: self.old_to_new.clone(),
            old_to_new: self.new_to_old.clone(),
        }
    }

    /// `self` followed by `next` (ids of `next` refer to the order `self` produces): applying
    /// the result equals applying `self`, then `next`.
    ///
    /// # Panics
    /// If the lengths differ.
    #[track_caller]
    pub fn then(&self, next: &Permutation) -> Permutation {
        assert_eq!(
            self.len(),
            next.len(),
            "Permutation::then: lengths {} and {} differ",
            self.len(),
            next.len()
        );
        let v = next
            .new_to_old
            .iter()
            .map(|&m| self.new_to_old[m as usize])
            .collect();
        Self::from_new_to_old_trusted(v)
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.new_to_old.len()
    }
    /// Whether it permutes no node.
    pub fn is_empty(&self) -> bool {
        self.new_to_old.is_empty()
    }
    /// `new_to_old()[r]`: the old id of the node at row `r`.
    pub fn new_to_old(&self) -> &[u32] {
        &self.new_to_old
    }
    /// `old_to_new()[i]`: the row of old node `i`.
    pub fn old_to_new(&self) -> &[u32] {
        &self.old_to_new
    }
    /// Whether this is the identity.
    pub fn is_identity(&self) -> bool {
        self.new_to_old
            .iter()
            .enumerate()
            .all(|(r, &o)| r == o as usize)
    }
}

/// `0..n` as `u32`.
fn ids(n: usize) -> Vec<u32> {
    assert!(
        u32::try_from(n).is_ok(),
        "a permutation of {n} nodes does not fit in u32"
    );
    (0..n as u32).collect()
}

/// The inverse of `v`, checking that it is a permutation of `0..v.len()`.
fn invert_checked(v: &[u32]) -> Result<Vec<u32>> {
    let n = v.len();
    if u32::try_from(n).is_err() {
        return Err(Error::Mismatch {
            what: "permutation length (must fit in u32)".into(),
            expected: u32::MAX as usize,
            got: n,
        });
    }
    // n ≤ u32::MAX, so every valid entry is < u32::MAX: the sentinel is free.
    let mut inv = vec![u32::MAX; n];
    for (k, &x) in v.iter().enumerate() {
        let slot = inv.get_mut(x as usize).ok_or(Error::NodeOutOfRange {
            index: i64::from(x),
            n_nodes: n,
        })?;
        if *slot != u32::MAX {
            return Err(Error::Mismatch {
                what: format!("permutation: id {x} given more than once (copies)"),
                expected: 1,
                got: 2,
            });
        }
        *slot = k as u32;
    }
    Ok(inv)
}

/// Which node order to use (see the [module docs](self) for each).
///
/// Parsed from and displayed as `none`, `random` (seed 0) or `random:SEED`, `degree`, `rcm`,
/// `bfs`, `community`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reorder {
    /// Keep the given order.
    #[default]
    None,
    /// A uniformly random permutation with this seed.
    Random(u64),
    /// Descending degree.
    Degree,
    /// Reverse Cuthill–McKee.
    Rcm,
    /// Breadth-first search.
    Bfs,
    /// Label-propagation communities, contiguous ([`CommunityConfig::default`]).
    Community,
    /// [`Reorder::Community`] where it pays, [`Reorder::None`] elsewhere ([`auto_order`]).
    Auto,
}

impl Reorder {
    /// The accepted names, for help texts and error messages.
    pub const NAMES: &'static str = "none, random, random:SEED, degree, rcm, bfs, community, auto";
}

impl fmt::Display for Reorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reorder::None => f.write_str("none"),
            Reorder::Random(0) => f.write_str("random"),
            Reorder::Random(s) => write!(f, "random:{s}"),
            Reorder::Degree => f.write_str("degree"),
            Reorder::Rcm => f.write_str("rcm"),
            Reorder::Bfs => f.write_str("bfs"),
            Reorder::Community => f.write_str("community"),
            Reorder::Auto => f.write_str("auto"),
        }
    }
}

impl FromStr for Reorder {
    type Err = ConfigError;

    /// Parses one of [`Reorder::NAMES`].
    ///
    /// # Errors
    /// [`ConfigError::UnknownName`] for anything else.
    fn from_str(s: &str) -> std::result::Result<Self, ConfigError> {
        if let Some(seed) = s.strip_prefix("random:").and_then(|v| v.parse().ok()) {
            return Ok(Reorder::Random(seed));
        }
        crate::error::parse_name(
            "node order",
            s,
            &[
                ("none", Reorder::None),
                ("random", Reorder::Random(0)),
                ("random:SEED", Reorder::Random(0)),
                ("degree", Reorder::Degree),
                ("rcm", Reorder::Rcm),
                ("bfs", Reorder::Bfs),
                ("community", Reorder::Community),
                ("auto", Reorder::Auto),
            ],
        )
    }
}

/// The permutation `how` gives for `graph` (structure only: no labels, no features).
///
/// # Complexity
/// See the table in the [module docs](self).
///
/// # Examples
/// ```
/// use sparse_gcn::graph::{reorder::{order, Reorder}, Direction, Graph};
/// // a star around node 3
/// let g = Graph::try_from_edges(4, &[(3, 0), (3, 1), (3, 2)], Direction::Undirected).unwrap();
/// assert_eq!(order(&g, Reorder::Degree).new_to_old(), &[3, 0, 1, 2]);
/// assert!(order(&g, Reorder::None).is_identity());
/// ```
pub fn order(graph: &Graph, how: Reorder) -> Permutation {
    let n = graph.n_nodes();
    match how {
        Reorder::None => Permutation::identity(n),
        Reorder::Random(seed) => Permutation::random(n, seed),
        Reorder::Degree => Permutation::from_new_to_old_trusted(by_degree(&Adj::new(graph), true)),
        Reorder::Bfs => bfs_order(graph),
        Reorder::Rcm => rcm_order(graph),
        Reorder::Community => community_order(graph, &CommunityConfig::default()),
        Reorder::Auto => auto_order(graph).0,
    }
}

/// Rows of X in the cache [`auto_order`] models: 32 MiB (a server L3) of rows of 128 f32.
pub const AUTO_CACHE_ROWS: usize = (32 << 20) / (128 * 4);

/// The relative drop in modelled misses for which [`auto_order`] takes the community order.
pub const AUTO_MIN_GAIN: f64 = 0.1;

/// [`Reorder::Auto`]: the community order if it pays, else the identity; also says which.
///
/// A graph of at most [`AUTO_CACHE_ROWS`] nodes keeps its order: X's rows fit in the cache
/// whatever the order (at d ≤ 128). A larger one gets [`community_order`] when that cuts the
/// [`cache_miss_model`] of the SpMM's gathers (a cache of [`AUTO_CACHE_ROWS`] rows) by at least
/// [`AUTO_MIN_GAIN`] of the given order's; a graph without communities, or one already in a
/// good order (as a crawl or a previous reordering may leave it), keeps its order.
///
/// # Complexity
/// O(1) for small graphs; otherwise that of [`community_order`] plus two cache models,
/// O((nnz + n)·[`CACHE_MODEL_WAYS`]).
pub fn auto_order(graph: &Graph) -> (Permutation, Reorder) {
    let n = graph.n_nodes();
    if n <= AUTO_CACHE_ROWS {
        return (Permutation::identity(n), Reorder::None);
    }
    let p = community_order(graph, &CommunityConfig::default());
    let given = cache_miss_model(graph, AUTO_CACHE_ROWS);
    let community = cache_miss_model_permuted(graph, &p, AUTO_CACHE_ROWS);
    if community <= (1.0 - AUTO_MIN_GAIN) * given {
        (p, Reorder::Community)
    } else {
        (Permutation::identity(n), Reorder::None)
    }
}

/// The symmetric neighbour structure the orders walk: the graph's own CSR when undirected
/// (its pattern is symmetric by construction), A + Aᵀ (possibly with repeated entries) when
/// directed. Self-loops are skipped by the users.
struct Adj<'a> {
    ip: Cow<'a, [usize]>,
    idx: Cow<'a, [u32]>,
}

impl<'a> Adj<'a> {
    fn new(graph: &'a Graph) -> Self {
        if !graph.is_directed() {
            return Adj {
                ip: Cow::Borrowed(graph.indptr()),
                idx: Cow::Borrowed(graph.indices()),
            };
        }
        let n = graph.n_nodes();
        let (ip0, idx0) = (graph.indptr(), graph.indices());
        let mut ip = vec![0usize; n + 1];
        for i in 0..n {
            ip[i + 1] += ip0[i + 1] - ip0[i];
            for &j in &idx0[ip0[i]..ip0[i + 1]] {
                ip[j as usize + 1] += 1;
            }
        }
        for i in 0..n {
            ip[i + 1] += ip[i];
        }
        let mut fill = ip.clone();
        let mut idx = vec![0u32; ip[n]];
        for i in 0..n {
            for &j in &idx0[ip0[i]..ip0[i + 1]] {
                idx[fill[i]] = j;
                fill[i] += 1;
                idx[fill[j as usize]] = i as u32;
                fill[j as usize] += 1;
            }
        }
        Adj {
            ip: Cow::Owned(ip),
            idx: Cow::Owned(idx),
        }
    }
    fn n(&self) -> usize {
        self.ip.len() - 1
    }
    #[inline]
    fn row(&self, i: usize) -> &[u32] {
        &self.idx[self.ip[i]..self.ip[i + 1]]
    }
    #[inline]
    fn degree(&self, i: usize) -> usize {
        self.ip[i + 1] - self.ip[i]
    }
}

/// Nodes sorted by degree (descending or ascending), ties by ascending id: a counting sort.
fn by_degree(adj: &Adj<'_>, descending: bool) -> Vec<u32> {
    let n = adj.n();
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
fn bfs_order(graph: &Graph) -> Permutation {
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
fn rcm_order(graph: &Graph) -> Permutation {
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
fn pseudo_peripheral(
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

/// SplitMix64's finaliser: a fixed, well-mixed hash of a 64-bit word.
#[inline]
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The tie-breaking priority of community `l` for node `i` in a sweep (`salt`): a pseudo-random
/// but fixed choice among equally frequent communities, different for each node and sweep,
/// so that no community wins every tie (with "smallest id wins", the low ids flood the graph).
#[inline]
fn tie_key(l: u32, i: usize, salt: u64) -> u64 {
    splitmix64(salt ^ (u64::from(l) << 32 | i as u64))
}

/// Parameters of [`label_propagation`] and [`community_order`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommunityConfig {
    /// Sweeps over all nodes (fewer if no label changes in a sweep).
    pub iterations: usize,
    /// Seed of the order in which each sweep visits the nodes.
    pub seed: u64,
    /// Largest community size allowed, in nodes (size-constrained label propagation): a node
    /// never joins a community that already has this many nodes. `None`: no limit. In
    /// [`community_order`] it caps the finest level, and each coarser level allows
    /// 16 times more.
    pub max_size: Option<usize>,
}

/// [`CommunityConfig::max_size`] by default. Unconstrained label propagation can let one
/// community flood most of a graph (on `arxiv-like` with weaker topics it ended with 58
/// communities, one holding most nodes); small capped communities, nested level by level,
/// avoid that.
pub const DEFAULT_MAX_COMMUNITY: usize = 64;

impl Default for CommunityConfig {
    fn default() -> Self {
        CommunityConfig {
            iterations: 20,
            seed: 0,
            max_size: Some(DEFAULT_MAX_COMMUNITY),
        }
    }
}

/// Label propagation (Raghavan, Albert & Kumara 2007) on the graph structure: every node starts
/// in its own community, then each sweep visits the nodes in a seeded random order (one order
/// for all sweeps) and moves each to the most frequent community among its neighbours
/// (self-loops ignored), keeping its own when that is among the most frequent and otherwise
/// breaking the tie by a fixed hash of (community, node, sweep, seed), a reproducible stand-in
/// for the usual random choice (always taking the smallest id lets the low ids flood the
/// graph). With [`CommunityConfig::max_size`], full communities admit no new node. Updates
/// are immediate (asynchronous) and serial, hence deterministic. Returns one community id per
/// node, numbered `0..k` by first occurrence.
///
/// # Complexity
/// O(iterations·(n + nnz)) time, O(n) memory besides the graph.
pub fn label_propagation(graph: &Graph, cfg: &CommunityConfig) -> Vec<u32> {
    let adj = Adj::new(graph);
    let cap = cfg.max_size.unwrap_or(usize::MAX);
    propagate(&adj, None, cap, cfg)
}

/// Label propagation on `adj` (repeated entries count as edge weights); `weight[i]` is node
/// i's size for the cap `cap` (1 each when `None`).
fn propagate(
    adj: &Adj<'_>,
    weight: Option<&[usize]>,
    cap: usize,
    cfg: &CommunityConfig,
) -> Vec<u32> {
    let n = adj.n();
    let mut label = ids(n);
    let mut size = weight.map_or_else(|| vec![1usize; n], <[usize]>::to_vec);
    let cap = cap.max(1);
    let visit = Permutation::random(n, cfg.seed).new_to_old;
    let mut count = vec![0u32; n];
    let mut touched: Vec<u32> = Vec::new();
    for it in 0..cfg.iterations {
        let salt = splitmix64(cfg.seed ^ (it as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut changed = 0usize;
        for &i in &visit {
            let i = i as usize;
            let own = label[i];
            let w = weight.map_or(1, |w| w[i]);
            touched.clear();
            for &j in adj.row(i) {
                if j as usize == i {
                    continue;
                }
                let l = label[j as usize];
                if count[l as usize] == 0 {
                    touched.push(l);
                }
                count[l as usize] += 1;
            }
            // The most frequent admissible community: own, or one with room left.
            let (mut best, mut best_c) = (own, count[own as usize]);
            for &l in &touched {
                let c = count[l as usize];
                if l != own && size[l as usize] + w > cap {
                    continue;
                }
                let wins = c > best_c
                    || (c == best_c && best != own && tie_key(l, i, salt) < tie_key(best, i, salt));
                if wins {
                    best = l;
                    best_c = c;
                }
            }
            for &l in &touched {
                count[l as usize] = 0;
            }
            if best != own {
                size[own as usize] -= w;
                size[best as usize] += w;
                label[i] = best;
                changed += 1;
            }
        }
        if changed == 0 {
            break;
        }
    }
    // Renumber 0..k by first occurrence.
    let mut id = vec![u32::MAX; n];
    let mut k = 0u32;
    for l in label.iter_mut() {
        let slot = &mut id[*l as usize];
        if *slot == u32::MAX {
            *slot = k;
            k += 1;
        }
        *l = *slot;
    }
    label
}

/// The community order: nested [`label_propagation`] communities, each laid out contiguously.
///
/// Level 0 finds communities of nodes (at most [`CommunityConfig::max_size`] nodes each) and
/// lays each out contiguously. Communities are placed greedily along the community graph,
/// starting from the community of the highest-degree node: after a community, the next one is
/// the unplaced community with the most edges to it (entered at the first node met there);
/// when it has no unplaced neighbour, the oldest queued neighbour of an earlier community;
/// when there is none (a new component), the highest-degree node left. Inside a community the
/// nodes follow a breadth-first search from that entry node (members it cannot reach follow,
/// by id). Strongly linked communities thus sit side by side (e.g. two halves of one planted
/// block).
///
/// Then the same is done one level up, on the community graph (a node per community, an entry
/// per edge between two, sizes counted in nodes, a cap 16 times larger), and the level-0
/// blocks are placed in the order of that level's layout; and so on, up to 6 levels, until a
/// level merges fewer than half of its nodes. Small communities (topics) thus sit inside
/// larger ones (fields), which is what keeps most gathers of an SpMM inside the caches; it is
/// the idea of Rabbit Order (Arai et al., IPDPS 2016) with label propagation in place of
/// modularity merging.
///
/// # Complexity
/// That of [`label_propagation`] plus O(n + nnz), per level; each level's graph is at most as
/// large as the one below.
///
/// # Examples
/// ```
/// use sparse_gcn::graph::{reorder::{community_order, CommunityConfig}, Direction, Graph};
/// // two triangles {0, 2, 4} and {1, 3, 5} joined by the edge 4–5
/// let e = [(0, 2), (2, 4), (4, 0), (1, 3), (3, 5), (5, 1), (4, 5)];
/// let g = Graph::try_from_edges(6, &e, Direction::Undirected).unwrap();
/// let p = community_order(&g, &CommunityConfig::default());
/// let mut first: Vec<u32> = p.new_to_old()[..3].to_vec();
/// first.sort();
/// assert!(first == [0, 2, 4] || first == [1, 3, 5]);
/// ```
pub fn community_order(graph: &Graph, cfg: &CommunityConfig) -> Permutation {
    let adj = Adj::new(graph);
    let n = adj.n();
    let cap = cfg.max_size.unwrap_or(usize::MAX);
    let out = nested_order(&adj, &vec![1usize; n], cap, cfg, 0);
    Permutation::from_new_to_old_trusted(out)
}

/// Levels of communities of communities at most.
const MAX_LEVELS: usize = 6;

/// The nested community order of `adj` (nodes of sizes `weight`): communities by label
/// propagation, laid out contiguously, the communities themselves in the nested community
/// order of the community graph (one node per community, one entry per edge between two).
fn nested_order(
    adj: &Adj<'_>,
    weight: &[usize],
    cap: usize,
    cfg: &CommunityConfig,
    level: usize,
) -> Vec<u32> {
    let n = adj.n();
    let comm = propagate(adj, Some(weight), cap, cfg);
    let flat = layout_communities(adj, &comm).new_to_old;
    let k = comm.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
    if level + 1 >= MAX_LEVELS || k < 2 || 2 * k > n {
        return flat;
    }
    // The community graph: an entry per edge between two communities.
    let mut ip = vec![0usize; k + 1];
    for i in 0..n {
        for &j in adj.row(i) {
            if comm[j as usize] != comm[i] {
                ip[comm[i] as usize + 1] += 1;
            }
        }
    }
    for c in 0..k {
        ip[c + 1] += ip[c];
    }
    let mut fill = ip.clone();
    let mut idx = vec![0u32; ip[k]];
    for i in 0..n {
        let ci = comm[i] as usize;
        for &j in adj.row(i) {
            let cj = comm[j as usize];
            if cj as usize != ci {
                idx[fill[ci]] = cj;
                fill[ci] += 1;
            }
        }
    }
    let mut csize = vec![0usize; k];
    for (i, &c) in comm.iter().enumerate() {
        csize[c as usize] += weight[i];
    }
    let cadj = Adj {
        ip: Cow::Owned(ip),
        idx: Cow::Owned(idx),
    };
    let corder = nested_order(
        &cadj,
        &csize,
        cap.saturating_mul(LEVEL_GROWTH),
        cfg,
        level + 1,
    );
    // Each community's block of `flat`, in the communities' order.
    let mut start = vec![0usize; k + 1];
    for &v in &flat {
        start[comm[v as usize] as usize + 1] += 1;
    }
    for c in 0..k {
        start[c + 1] += start[c];
    }
    let mut pos = vec![0usize; k];
    let mut seen = vec![false; k];
    for (r, &v) in flat.iter().enumerate() {
        let c = comm[v as usize] as usize;
        if !seen[c] {
            seen[c] = true;
            pos[c] = r;
        }
    }
    let mut out = Vec::with_capacity(n);
    for &c in &corder {
        let c = c as usize;
        let len = start[c + 1] - start[c];
        out.extend_from_slice(&flat[pos[c]..pos[c] + len]);
    }
    out
}

/// Growth of the community size cap from one level to the next.
const LEVEL_GROWTH: usize = 16;

/// Lays out the communities `comm` (ids `0..k`) contiguously, see [`community_order`].
fn layout_communities(adj: &Adj<'_>, comm: &[u32]) -> Permutation {
    let n = adj.n();
    let k = comm.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
    // Members of each community, by id (counting sort).
    let mut mstart = vec![0usize; k + 1];
    for &c in comm {
        mstart[c as usize + 1] += 1;
    }
    for c in 0..k {
        mstart[c + 1] += mstart[c];
    }
    let mut members = vec![0u32; n];
    let mut fill = mstart.clone();
    for (i, &c) in comm.iter().enumerate() {
        members[fill[c as usize]] = i as u32;
        fill[c as usize] += 1;
    }
    // `fill[c]` now scans community c's members for ones the search did not reach.
    fill.truncate(k);
    fill.copy_from_slice(&mstart[..k]);

    let mut placed = vec![false; n];
    let mut done = vec![false; k];
    let mut frontier: VecDeque<u32> = VecDeque::new();
    let seeds = by_degree(adj, true);
    let mut next_seed = 0usize;
    let mut out: Vec<u32> = Vec::with_capacity(n);
    // Edges from the current community to each unplaced one, and the first node met there.
    let mut links = vec![0u32; k];
    let mut met = vec![0u32; k];
    let mut touched: Vec<u32> = Vec::new();
    let mut next: Option<u32> = None;
    loop {
        // The entry node of the next community: in the unplaced community most connected to
        // the last one, else the oldest queued neighbour of any placed community, else the
        // highest-degree node left.
        let mut entry = next.take();
        while entry.is_none() {
            let Some(v) = frontier.pop_front() else { break };
            if !done[comm[v as usize] as usize] {
                entry = Some(v);
            }
        }
        if entry.is_none() {
            while next_seed < n && done[comm[seeds[next_seed] as usize] as usize] {
                next_seed += 1;
            }
            entry = seeds.get(next_seed).copied();
        }
        let Some(entry) = entry else { break };
        let c = comm[entry as usize];
        done[c as usize] = true;
        placed[entry as usize] = true;
        out.push(entry);
        let mut head = out.len() - 1;
        loop {
            while head < out.len() {
                let u = out[head] as usize;
                head += 1;
                for &v in adj.row(u) {
                    let vu = v as usize;
                    if placed[vu] {
                        continue;
                    }
                    let cv = comm[vu];
                    if cv == c {
                        placed[vu] = true;
                        out.push(v);
                    } else if !done[cv as usize] {
                        frontier.push_back(v);
                        if links[cv as usize] == 0 {
                            touched.push(cv);
                            met[cv as usize] = v;
                        }
                        links[cv as usize] += 1;
                    }
                }
            }
            // Members the search did not reach (a community need not be connected).
            let end = mstart[c as usize + 1];
            let f = &mut fill[c as usize];
            while *f < end && placed[members[*f] as usize] {
                *f += 1;
            }
            if *f == end {
                break;
            }
            let m = members[*f];
            placed[m as usize] = true;
            out.push(m);
        }
        // The most connected unplaced neighbour community (the first met on ties).
        let mut best: Option<u32> = None;
        for &cv in &touched {
            if best.is_none_or(|b| links[cv as usize] > links[b as usize]) {
                best = Some(cv);
            }
        }
        next = best.map(|b| met[b as usize]);
        for &cv in &touched {
            links[cv as usize] = 0;
        }
        touched.clear();
    }
    Permutation::from_new_to_old_trusted(out)
}

/// How local a node order is: statistics of |i − j| over the off-diagonal non-zeros (i, j).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Locality {
    /// Mean |i − j| divided by the number of nodes (about 1/3 for a random order).
    pub mean_gap: f64,
    /// The window `w` of `near_fraction`.
    pub window: usize,
    /// Fraction of the off-diagonal non-zeros with |i − j| ≤ `window`.
    pub near_fraction: f64,
}

/// The [`Locality`] of `graph`'s current node order, with window `window`.
///
/// # Complexity
/// O(nnz).
pub fn locality(graph: &Graph, window: usize) -> Locality {
    let n = graph.n_nodes();
    let (mut sum, mut near, mut m) = (0f64, 0usize, 0usize);
    for i in 0..n {
        for &j in graph.neighbors(i) {
            let gap = i.abs_diff(j as usize);
            if gap == 0 {
                continue;
            }
            sum += gap as f64;
            near += usize::from(gap <= window);
            m += 1;
        }
    }
    let m1 = m.max(1) as f64;
    Locality {
        mean_gap: sum / m1 / n.max(1) as f64,
        window,
        near_fraction: near as f64 / m1,
    }
}

/// Ways of the set-associative cache in [`cache_miss_model`].
pub const CACHE_MODEL_WAYS: usize = 16;

/// A machine-independent measure of how well an order suits SpMM: the fraction of the row
/// gathers of `out ← Â·X` (rows of Â in order; each row gathers its neighbours' rows of X and
/// its own, the self-loop of Â) that miss a cache holding `cache_rows` rows of X.
///
/// The cache is a model, not a simulator of a real CPU: [`CACHE_MODEL_WAYS`]-way set
/// associative with least-recently-used replacement, whole rows as the unit, the set of row j
/// picked by a multiplicative hash of j, one thread. Timings are noisy on a shared machine;
/// this number is the same on every machine, so it compares orders exactly. For a
/// last-level cache of C bytes and rows of d f32, pass `C / (4·d)`.
///
/// # Complexity
/// O((nnz + n)·ways) time, O(min(cache_rows, n)) memory.
///
/// # Examples
/// ```
/// use sparse_gcn::graph::{Direction, Graph};
/// use sparse_gcn::graph::reorder::cache_miss_model;
/// // A path 0-1-2-3: every row's gathers are near; a 16-row cache holds the whole X.
/// let g = Graph::try_from_edges(4, &[(0, 1), (1, 2), (2, 3)], Direction::Undirected).unwrap();
/// // 4 first touches among 3 + 4 + 3 = 10 gathers (6 off-diagonal, 4 self).
/// assert_eq!(cache_miss_model(&g, 16), 0.4);
/// ```
pub fn cache_miss_model(graph: &Graph, cache_rows: usize) -> f64 {
    let mut m = LruModel::new(graph.n_nodes(), cache_rows);
    for i in 0..graph.n_nodes() {
        m.row(i, graph.neighbors(i));
    }
    m.miss_rate()
}

/// [`cache_miss_model`] of `permute_graph(graph, perm)`, without building that graph: each
/// row is relabelled and sorted in one reused buffer.
///
/// # Panics
/// If `perm.len() != graph.n_nodes()`.
///
/// # Complexity
/// O((nnz + n)·[`CACHE_MODEL_WAYS`] + Σ deg·log deg) time, O(cache_rows + max degree) memory.
#[track_caller]
pub fn cache_miss_model_permuted(graph: &Graph, perm: &Permutation, cache_rows: usize) -> f64 {
    let n = graph.n_nodes();
    len_check("cache_miss_model_permuted", n, perm.len());
    let (q, p) = (perm.new_to_old(), perm.old_to_new());
    let mut m = LruModel::new(n, cache_rows);
    let mut row = Vec::new();
    for r in 0..n {
        row.clear();
        row.extend(
            graph
                .neighbors(q[r] as usize)
                .iter()
                .map(|&j| p[j as usize]),
        );
        row.sort_unstable();
        m.row(r, &row);
    }
    m.miss_rate()
}

/// The cache of [`cache_miss_model`]: [`CACHE_MODEL_WAYS`]-way sets of row ids with LRU ages.
struct LruModel {
    sets: usize,
    tag: Vec<u32>,
    used: Vec<u64>,
    clock: u64,
    misses: u64,
}

impl LruModel {
    fn new(n: usize, cache_rows: usize) -> Self {
        let ways = CACHE_MODEL_WAYS;
        // A cache of more rows than twice the graph's behaves as an unbounded one here.
        let rows = cache_rows.min(n.saturating_mul(2)).max(ways);
        let sets = rows / ways;
        LruModel {
            sets,
            tag: vec![u32::MAX; sets * ways],
            used: vec![0u64; sets * ways],
            clock: 0,
            misses: 0,
        }
    }

    /// The gathers of Â's row `i`: the sorted neighbours `row`, with the self-loop in its
    /// sorted place (added when `row` lacks it, as `NormAdj` does).
    fn row(&mut self, i: usize, row: &[u32]) {
        let at = row.partition_point(|&j| (j as usize) < i);
        for &j in &row[..at] {
            self.touch(j);
        }
        if row.get(at).is_none_or(|&j| j as usize != i) {
            self.touch(i as u32);
        }
        for &j in &row[at..] {
            self.touch(j);
        }
    }

    fn touch(&mut self, j: u32) {
        let ways = CACHE_MODEL_WAYS;
        self.clock += 1;
        // Fibonacci hashing: the top 32 bits of j·⌊2⁶⁴/φ⌋, scaled to 0..sets.
        let h = u64::from(j).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        let set = ((h * self.sets as u64) >> 32) as usize;
        let tags = &mut self.tag[set * ways..(set + 1) * ways];
        let ages = &mut self.used[set * ways..(set + 1) * ways];
        if let Some(w) = tags.iter().position(|&t| t == j) {
            ages[w] = self.clock;
            return;
        }
        self.misses += 1;
        // The least recently used way (empty ways have age 0).
        let mut lru = 0;
        for w in 1..ways {
            if ages[w] < ages[lru] {
                lru = w;
            }
        }
        tags[lru] = j;
        ages[lru] = self.clock;
    }

    fn miss_rate(&self) -> f64 {
        self.misses as f64 / self.clock.max(1) as f64
    }
}

/// The graph relabelled by `perm`: node `new_to_old[r]` becomes node `r`. Each new row lists
/// its neighbours sorted by new id (as every [`Graph`] does), so a row's entries are in a
/// different relative order than before, and SpMM on the permuted Â sums each row in a
/// different order: results agree to rounding, not bit for bit.
///
/// # Panics
/// If `perm.len() != graph.n_nodes()`.
///
/// # Complexity
/// O(n + nnz) time (two counting passes; one transpose first for a directed graph), no sort.
#[track_caller]
pub fn permute_graph(graph: &Graph, perm: &Permutation) -> Graph {
    let n = graph.n_nodes();
    len_check("permute_graph", n, perm.len());
    let (q, p) = (perm.new_to_old(), perm.old_to_new());
    let (ip, idx) = (graph.indptr(), graph.indices());
    let mut new_ip = vec![0usize; n + 1];
    for r in 0..n {
        new_ip[r + 1] = new_ip[r] + graph.degree(q[r] as usize);
    }
    // Scanning new column ids c in ascending order and appending c to each row that has it
    // fills every row sorted. The rows having old column j are row j of Aᵀ: A itself when
    // undirected (symmetric pattern), a transpose otherwise.
    let transposed;
    let (tip, tidx): (&[usize], &[u32]) = if graph.is_directed() {
        transposed = transpose_pattern(n, ip, idx);
        (&transposed.0, &transposed.1)
    } else {
        (ip, idx)
    };
    let mut fill = new_ip.clone();
    let mut new_idx = vec![0u32; idx.len()];
    for c in 0..n {
        let oc = q[c] as usize;
        for &i in &tidx[tip[oc]..tip[oc + 1]] {
            let r = p[i as usize] as usize;
            new_idx[fill[r]] = c as u32;
            fill[r] += 1;
        }
    }
    Graph {
        n_nodes: n,
        indptr: new_ip,
        indices: new_idx,
        directed: graph.is_directed(),
        stats: graph.stats(),
    }
}

/// Features with their rows permuted: row `r` is old row `new_to_old[r]` (sparse rows keep
/// their column order; Xᵀ is recomputed).
///
/// # Panics
/// If `perm.len() != features.n_rows()`.
///
/// # Complexity
/// O(n + nnz) (dense: O(n·in_dim)).
#[track_caller]
pub fn permute_features<F: Scalar>(features: &Features<F>, perm: &Permutation) -> Features<F> {
    len_check("permute_features", features.n_rows(), perm.len());
    match features {
        Features::Dense(x) => Features::Dense(permute_rows(perm, x.view())),
        Features::Sparse(s) => {
            let x = s.x();
            let ip = x.indptr();
            let ip = ip.raw_storage();
            let off = ip[0];
            let q = perm.new_to_old();
            let mut indptr = Vec::with_capacity(q.len() + 1);
            indptr.push(0usize);
            let mut indices = Vec::with_capacity(x.nnz());
            let mut data = Vec::with_capacity(x.nnz());
            for &o in q {
                let r = (ip[o as usize] - off)..(ip[o as usize + 1] - off);
                indices.extend_from_slice(&x.indices()[r.clone()]);
                data.extend_from_slice(&x.data()[r]);
                indptr.push(indices.len());
            }
            Features::Sparse(SparseFeatures::new(Csr::new_trusted_pub(
                x.shape(),
                indptr,
                indices,
                data,
            )))
        }
    }
}

/// A mask in the new order.
fn permute_mask(mask: &Mask, perm: &Permutation) -> Mask {
    let p = perm.old_to_new();
    let mut b = vec![false; mask.n_nodes()];
    for &i in mask.indices() {
        b[p[i as usize] as usize] = true;
    }
    Mask::from_bool(&b)
}

/// The dataset relabelled by `perm`: graph, features, labels and split masks (name and class
/// count unchanged). Train on the result, then bring per-node outputs back with
/// [`unpermute_rows`]; accuracies over a mask are the same in either order.
///
/// # Errors
/// [`Error::Mismatch`] if `perm.len()` is not the dataset's node count.
///
/// # Complexity
/// O(n + nnz + feature entries).
pub fn apply(dataset: &Dataset, perm: &Permutation) -> Result<Dataset> {
    let n = dataset.graph.n_nodes();
    if perm.len() != n {
        return Err(Error::Mismatch {
            what: "permutation length vs nodes".into(),
            expected: n,
            got: perm.len(),
        });
    }
    let s = &dataset.split;
    Dataset::try_new(
        dataset.name.clone(),
        permute_graph(&dataset.graph, perm),
        permute_features(&dataset.features, perm),
        permute_slice(perm, &dataset.labels),
        dataset.n_classes,
        Split {
            name: s.name.clone(),
            train: permute_mask(&s.train, perm),
            valid: permute_mask(&s.valid, perm),
            test: permute_mask(&s.test, perm),
        },
    )
}

/// Rows of `a` in the new order: row `r` of the result is row `new_to_old[r]` of `a`.
///
/// # Panics
/// If `a.nrows() != perm.len()`.
#[track_caller]
pub fn permute_rows<F: Clone>(perm: &Permutation, a: ArrayView2<'_, F>) -> Array2<F> {
    len_check("permute_rows", a.nrows(), perm.len());
    gather_rows(a, perm.new_to_old())
}

/// Rows of `a` (in the order `perm` produced) back in the original order: row `i` of the
/// result is row `old_to_new[i]` of `a`. Undoes [`permute_rows`].
///
/// # Panics
/// If `a.nrows() != perm.len()`.
///
/// # Examples
/// ```
/// use ndarray::array;
/// use sparse_gcn::graph::reorder::{permute_rows, unpermute_rows, Permutation};
/// let p = Permutation::random(3, 1);
/// let x = array![[1, 2], [3, 4], [5, 6]];
/// assert_eq!(unpermute_rows(&p, permute_rows(&p, x.view()).view()), x);
/// ```
#[track_caller]
pub fn unpermute_rows<F: Clone>(perm: &Permutation, a: ArrayView2<'_, F>) -> Array2<F> {
    len_check("unpermute_rows", a.nrows(), perm.len());
    gather_rows(a, perm.old_to_new())
}

/// `a` in the new order: element `r` is `a[new_to_old[r]]`.
///
/// # Panics
/// If `a.len() != perm.len()`.
#[track_caller]
pub fn permute_slice<T: Clone>(perm: &Permutation, a: &[T]) -> Vec<T> {
    len_check("permute_slice", a.len(), perm.len());
    perm.new_to_old()
        .iter()
        .map(|&o| a[o as usize].clone())
        .collect()
}

/// `a` (in the order `perm` produced) back in the original order: element `i` is
/// `a[old_to_new[i]]`. Undoes [`permute_slice`].
///
/// # Panics
/// If `a.len() != perm.len()`.
#[track_caller]
pub fn unpermute_slice<T: Clone>(perm: &Permutation, a: &[T]) -> Vec<T> {
    len_check("unpermute_slice", a.len(), perm.len());
    perm.old_to_new()
        .iter()
        .map(|&r| a[r as usize].clone())
        .collect()
}

/// Row `k` of the result is row `rows[k]` of `a`.
fn gather_rows<F: Clone>(a: ArrayView2<'_, F>, rows: &[u32]) -> Array2<F> {
    let d = a.ncols();
    let mut v = Vec::with_capacity(rows.len() * d);
    for &r in rows {
        let row = a.row(r as usize);
        match row.as_slice() {
            Some(s) => v.extend_from_slice(s),
            None => v.extend(row.iter().cloned()),
        }
    }
    Array2::from_shape_vec((rows.len(), d), v)
        .unwrap_or_else(|_| unreachable!("rows·d elements were written"))
}

#[cold]
#[inline(never)]
#[track_caller]
fn len_mismatch(what: &str, rows: usize, perm: usize) -> ! {
    panic!("{what}: {rows} rows but a permutation of {perm} nodes");
}

#[inline]
#[track_caller]
fn len_check(what: &str, rows: usize, perm: usize) {
    if rows != perm {
        len_mismatch(what, rows, perm);
    }
}

#[cfg(test)]
mod tests {
    use ndarray::Array2;
    use rand::RngExt;

    use super::*;
    use crate::graph::synthetic::{CitationLike, FeatureKind};
    use crate::graph::{Direction, Norm, NormAdj};
    use crate::kernels::spmm;
    use crate::Par;

    const ALL: [Reorder; 6] = [
        Reorder::None,
        Reorder::Random(7),
        Reorder::Degree,
        Reorder::Rcm,
        Reorder::Bfs,
        Reorder::Community,
    ];

    /// A random graph with self-loops, duplicates and (for n > m) isolated nodes.
    fn random_graph(n: usize, m: usize, dir: Direction, seed: u64) -> Graph {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let edges: Vec<(u32, u32)> = (0..m)
            .map(|_| (rng.random_range(0..n as u32), rng.random_range(0..n as u32)))
            .collect();
        Graph::try_from_edges(n, &edges, dir).unwrap()
    }

    /// The edge list of `g` relabelled by `perm`, rebuilt through `try_from_edges`.
    fn relabel_by_edges(g: &Graph, perm: &Permutation) -> Graph {
        let p = perm.old_to_new();
        let mut e = Vec::new();
        for i in 0..g.n_nodes() {
            for &j in g.neighbors(i) {
                e.push((p[i], p[j as usize]));
            }
        }
        let dir = if g.is_directed() {
            Direction::Directed
        } else {
            Direction::Undirected
        };
        Graph::try_from_edges(g.n_nodes(), &e, dir).unwrap()
    }

    #[test]
    fn permutation_basics() {
        let id = Permutation::identity(5);
        assert!(id.is_identity());
        assert_eq!(id.inverse(), id);
        let r = Permutation::random(1000, 3);
        assert_eq!(r, Permutation::random(1000, 3));
        assert_ne!(r, Permutation::random(1000, 4));
        assert!(!r.is_identity());
        let mut sorted = r.new_to_old().to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, ids(1000));
        for (i, &x) in r.old_to_new().iter().enumerate() {
            assert_eq!(r.new_to_old()[x as usize] as usize, i);
        }
        assert!(r.then(&r.inverse()).is_identity());
        assert!(r.inverse().then(&r).is_identity());
        let s = Permutation::random(1000, 5);
        let data: Vec<u32> = (0..1000).map(|i| i * 3 + 1).collect();
        assert_eq!(
            permute_slice(&r.then(&s), &data),
            permute_slice(&s, &permute_slice(&r, &data))
        );
        assert_eq!(
            Permutation::try_from_old_to_new(r.old_to_new().to_vec()).unwrap(),
            r
        );
        assert!(Permutation::identity(0).is_empty());
        assert!(Permutation::random(0, 1).is_empty());
    }

    #[test]
    fn invalid_permutations_are_errors() {
        assert!(matches!(
            Permutation::try_from_new_to_old(vec![0, 3, 1]),
            Err(Error::NodeOutOfRange {
                index: 3,
                n_nodes: 3
            })
        ));
        assert!(matches!(
            Permutation::try_from_new_to_old(vec![1, 0, 1]),
            Err(Error::Mismatch { .. })
        ));
        assert!(Permutation::try_from_old_to_new(vec![2, 2, 0]).is_err());
        let d = CitationLike {
            n_nodes: 50,
            n_test: 10,
            n_valid: 10,
            ..Default::default()
        }
        .generate(1)
        .unwrap();
        assert!(matches!(
            apply(&d, &Permutation::identity(49)),
            Err(Error::Mismatch {
                expected: 50,
                got: 49,
                ..
            })
        ));
    }

    #[test]
    fn reorder_names_round_trip() {
        for how in ALL.into_iter().chain([Reorder::Random(0)]) {
            assert_eq!(how.to_string().parse::<Reorder>().unwrap(), how);
        }
        assert_eq!("random".parse::<Reorder>().unwrap(), Reorder::Random(0));
        assert_eq!("random:42".parse::<Reorder>().unwrap(), Reorder::Random(42));
        for bad in ["", "metis", "random:", "random:x", "Community"] {
            assert!(matches!(
                bad.parse::<Reorder>(),
                Err(ConfigError::UnknownName { .. })
            ));
        }
    }

    /// Orders read the structure only: their signatures take no labels or features.
    #[test]
    fn orders_take_no_labels() {
        let _: fn(&Graph, Reorder) -> Permutation = order;
        let _: fn(&Graph, &CommunityConfig) -> Permutation = community_order;
        let _: fn(&Graph, &CommunityConfig) -> Vec<u32> = label_propagation;
    }

    #[test]
    fn every_order_is_a_deterministic_permutation() {
        for dir in [Direction::Undirected, Direction::Directed] {
            for (n, m) in [(0, 0), (1, 0), (1, 1), (7, 3), (300, 900), (300, 100)] {
                let g = random_graph(n, m, dir, n as u64 + m as u64);
                for how in ALL {
                    let p = order(&g, how);
                    assert_eq!(p.len(), n, "{how}");
                    assert!(
                        Permutation::try_from_new_to_old(p.new_to_old().to_vec()).is_ok(),
                        "{how} on n = {n}, m = {m}"
                    );
                    assert_eq!(order(&g, how), p, "{how} is not deterministic");
                }
            }
        }
    }

    #[test]
    fn permute_graph_matches_relabelled_edges_and_inverts() {
        for dir in [Direction::Undirected, Direction::Directed] {
            let g = random_graph(200, 700, dir, 11);
            for how in ALL {
                let p = order(&g, how);
                let h = permute_graph(&g, &p);
                let want = relabel_by_edges(&g, &p);
                assert_eq!(h.indptr(), want.indptr(), "{how} {dir:?}");
                assert_eq!(h.indices(), want.indices(), "{how} {dir:?}");
                assert_eq!(h.n_edges(), g.n_edges());
                assert_eq!(h.stats(), g.stats());
                assert_eq!(permute_graph(&h, &p.inverse()), g);
            }
        }
    }

    #[test]
    fn rows_and_slices_round_trip() {
        let p = Permutation::random(37, 9);
        let x = Array2::from_shape_fn((37, 5), |(i, c)| (i * 10 + c) as i64);
        let px = permute_rows(&p, x.view());
        for r in 0..37 {
            assert_eq!(px.row(r), x.row(p.new_to_old()[r] as usize));
        }
        assert_eq!(unpermute_rows(&p, px.view()), x);
        // a non-contiguous view
        assert_eq!(unpermute_rows(&p, permute_rows(&p, x.t().t()).view()), x);
        let v: Vec<String> = (0..37).map(|i| format!("n{i}")).collect();
        assert_eq!(unpermute_slice(&p, &permute_slice(&p, &v)), v);
        assert_eq!(permute_slice(&p, &unpermute_slice(&p, &v)), v);
    }

    #[test]
    #[should_panic(expected = "unpermute_rows: 4 rows but a permutation of 5 nodes")]
    fn unpermute_rows_checks_the_length() {
        let _ = unpermute_rows(
            &Permutation::identity(5),
            Array2::<f32>::zeros((4, 2)).view(),
        );
    }

    /// The adjacency pattern as a CSR with all values 1 (for exact integer arithmetic).
    fn ones(g: &Graph) -> Csr<f32> {
        let n = g.n_nodes();
        Csr::new(
            (n, n),
            g.indptr().to_vec(),
            g.indices().to_vec(),
            vec![1.0; g.nnz()],
        )
    }

    /// SpMM commutes with relabelling: spmm(P·A·Pᵀ, P·X) = P·spmm(A, X).
    ///
    /// Bitwise when every partial sum is exact (a 0/1 matrix and small integer features), since
    /// the same entries are summed. In general only to rounding: each permuted row lists its
    /// entries sorted by *new* column id, so the row's sum runs in another order. The
    /// tolerance is the standard bound for a reordered sum of k terms, k·ε·Σ|terms|.
    #[test]
    fn spmm_commutes_with_permutation() {
        for dir in [Direction::Undirected, Direction::Directed] {
            let g = random_graph(400, 2000, dir, 5);
            let n = g.n_nodes();
            let mut rng = ChaCha8Rng::seed_from_u64(1);
            let xi = Array2::from_shape_fn((n, 16), |_| rng.random_range(-8i32..=8) as f32);
            let xf = Array2::from_shape_fn((n, 16), |_| rng.random_range(-1.0f32..1.0));
            for how in [Reorder::Random(3), Reorder::Community, Reorder::Rcm] {
                let p = order(&g, how);
                let h = permute_graph(&g, &p);

                // exact: bitwise
                let mut y = Array2::zeros((n, 16));
                spmm(1.0, ones(&g).view(), xi.view(), 0.0, y.view_mut(), Par::Seq);
                let mut yp = Array2::zeros((n, 16));
                let pxi = permute_rows(&p, xi.view());
                spmm(
                    1.0,
                    ones(&h).view(),
                    pxi.view(),
                    0.0,
                    yp.view_mut(),
                    Par::Rayon,
                );
                let back = unpermute_rows(&p, yp.view());
                let bits = |a: &Array2<f32>| a.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&back), bits(&y), "{how} {dir:?}");

                // normalised Â, real features: to rounding
                let a = NormAdj::<f32>::new(&g, Norm::Symmetric);
                let ap = NormAdj::<f32>::new(&h, Norm::Symmetric);
                let mut y = Array2::zeros((n, 16));
                spmm(1.0, a.a(), xf.view(), 0.0, y.view_mut(), Par::Seq);
                let mut yp = Array2::zeros((n, 16));
                let pxf = permute_rows(&p, xf.view());
                spmm(1.0, ap.a(), pxf.view(), 0.0, yp.view_mut(), Par::Seq);
                let back = unpermute_rows(&p, yp.view());
                let aa = a.a();
                for i in 0..n {
                    let row = aa.outer_view(i).unwrap();
                    let k = row.nnz() as f32;
                    for c in 0..16 {
                        let abs: f32 = row.iter().map(|(j, &v)| (v * xf[[j, c]]).abs()).sum();
                        let tol = k * f32::EPSILON * abs;
                        let diff = (back[[i, c]] - y[[i, c]]).abs();
                        assert!(diff <= tol, "{how} {dir:?} ({i}, {c}): {diff} > {tol}");
                    }
                }
            }
        }
    }

    /// A planted partition: `blocks` blocks of `size` nodes, each node with about `k_in`
    /// neighbours inside its block and `k_out` outside, node ids shuffled. Returns the graph
    /// and each node's block.
    fn planted(
        blocks: usize,
        size: usize,
        k_in: usize,
        k_out: usize,
        seed: u64,
    ) -> (Graph, Vec<u32>) {
        let n = blocks * size;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let shuffle = Permutation::random(n, seed + 1);
        let id = |b: usize, k: usize| shuffle.old_to_new()[b * size + k];
        let mut e = Vec::new();
        for b in 0..blocks {
            for k in 0..size {
                for _ in 0..k_in / 2 {
                    e.push((id(b, k), id(b, rng.random_range(0..size))));
                }
                for _ in 0..k_out.div_ceil(2) {
                    let ob = rng.random_range(0..blocks);
                    e.push((id(b, k), id(ob, rng.random_range(0..size))));
                }
            }
        }
        let mut block = vec![0u32; n];
        for b in 0..blocks {
            for k in 0..size {
                block[id(b, k) as usize] = b as u32;
            }
        }
        (
            Graph::try_from_edges(n, &e, Direction::Undirected).unwrap(),
            block,
        )
    }

    /// For each block, the largest share of its nodes inside one window of `size` rows.
    fn contiguity(p: &Permutation, block: &[u32], blocks: usize, size: usize) -> Vec<f64> {
        (0..blocks as u32)
            .map(|b| {
                let mut pos: Vec<usize> = (0..block.len())
                    .filter(|&i| block[i] == b)
                    .map(|i| p.old_to_new()[i] as usize)
                    .collect();
                pos.sort_unstable();
                let mut best = 0;
                let mut lo = 0;
                for hi in 0..pos.len() {
                    while pos[hi] - pos[lo] >= size {
                        lo += 1;
                    }
                    best = best.max(hi - lo + 1);
                }
                best as f64 / size as f64
            })
            .collect()
    }

    #[test]
    fn community_order_makes_planted_blocks_contiguous() {
        let (blocks, size) = (12, 150);
        for seed in [3, 4, 5] {
            let (g, block) = planted(blocks, size, 12, 2, seed);
            let p = order(&g, Reorder::Community);
            let c = contiguity(&p, &block, blocks, size);
            assert!(c.iter().all(|&x| x >= 0.9), "seed {seed}: {c:?}");
        }
        let (g, block) = planted(blocks, size, 12, 2, 3);
        let p = order(&g, Reorder::Community);
        // a random order leaves them scattered
        let r = contiguity(&Permutation::random(blocks * size, 1), &block, blocks, size);
        assert!(r.iter().all(|&x| x < 0.3), "{r:?}");
        let h = permute_graph(&g, &p);
        let (lc, lr) = (
            locality(&h, size),
            locality(
                &permute_graph(&g, &Permutation::random(blocks * size, 1)),
                size,
            ),
        );
        assert!(
            lc.near_fraction > 0.7 && lr.near_fraction < 0.2,
            "{lc:?} {lr:?}"
        );
        assert!(lc.mean_gap < 0.5 * lr.mean_gap, "{lc:?} {lr:?}");
    }

    #[test]
    fn cache_miss_model_counts_compulsory_and_capacity_misses() {
        let (blocks, size) = (12, 150);
        let (g, _) = planted(blocks, size, 12, 2, 3);
        let n = g.n_nodes();
        let gathers: usize = (0..n)
            .map(|i| g.degree(i) + usize::from(!g.neighbors(i).contains(&(i as u32))))
            .sum();
        let gathers = gathers as f64;
        // A cache holding every row misses once per row (the first touch): n misses.
        let all = cache_miss_model(&g, 1 << 16);
        assert!((all - n as f64 / gathers).abs() < 1e-12, "{all}");
        // A cache of one block's rows: the community order keeps most gathers in it, a
        // random order does not.
        let rand = permute_graph(&g, &Permutation::random(n, 1));
        let comm = permute_graph(&g, &order(&g, Reorder::Community));
        let (mr, mc) = (cache_miss_model(&rand, size), cache_miss_model(&comm, size));
        assert!(mc < 0.5 * mr, "community {mc}, random {mr}");
        // A bigger cache never misses more in these orders (LRU is a stack algorithm per set;
        // with hashed sets the counts are monotone here, not in general).
        assert!(cache_miss_model(&rand, 4 * size) <= mr);
        // Deterministic.
        assert_eq!(cache_miss_model(&rand, size), mr);
        // On a permutation, without building the permuted graph: the same number.
        for dir in [Direction::Undirected, Direction::Directed] {
            let r = random_graph(300, 1200, dir, 6);
            for how in ALL {
                let p = order(&r, how);
                assert_eq!(
                    cache_miss_model_permuted(&r, &p, 64),
                    cache_miss_model(&permute_graph(&r, &p), 64),
                    "{how} {dir:?}"
                );
            }
        }
        // Rows spread evenly over the sets: a cache as large as the graph misses (almost)
        // only on first touches, whatever the order.
        let r = random_graph(20_000, 100_000, Direction::Undirected, 4);
        let gathers: usize = (0..r.n_nodes())
            .map(|i| r.degree(i) + usize::from(!r.neighbors(i).contains(&(i as u32))))
            .sum();
        let first = r.n_nodes() as f64 / gathers as f64;
        let m = cache_miss_model(&r, 2 * r.n_nodes());
        assert!(m >= first && m < 1.01 * first, "{m} vs {first}");
        // An empty graph: no gathers, no misses.
        let e = Graph::try_from_edges(0, &[], Direction::Undirected).unwrap();
        assert_eq!(cache_miss_model(&e, 16), 0.0);
    }

    #[test]
    fn auto_order_reorders_only_where_it_pays() {
        // Small: kept, whatever the order.
        let (g, _) = planted(12, 150, 12, 2, 3);
        let (p, how) = auto_order(&g);
        assert!(p.is_identity() && how == Reorder::None);
        assert!(order(&g, Reorder::Auto).is_identity());
        // Above the cache: planted blocks in a random order get the community order ...
        let (blocks, size) = (150, 500);
        assert!(blocks * size > AUTO_CACHE_ROWS);
        let (g, block) = planted(blocks, size, 10, 2, 5);
        let (p, how) = auto_order(&g);
        assert_eq!(how, Reorder::Community);
        assert_eq!(p, community_order(&g, &CommunityConfig::default()));
        let c = contiguity(&p, &block, blocks, size);
        assert!(c.iter().all(|&x| x >= 0.8), "{c:?}");
        // ... and, once in it, keep it.
        let h = permute_graph(&g, &p);
        let (p2, how2) = auto_order(&h);
        assert!(p2.is_identity() && how2 == Reorder::None);
        // A graph without planted communities: the decision is the model's. (Here label
        // propagation still groups neighbourhoods and cuts the modelled misses from 17.6 %
        // to 15.4 %, which is worth it.)
        let r = random_graph(blocks * size, 6 * blocks * size, Direction::Undirected, 9);
        let pc = community_order(&r, &CommunityConfig::default());
        let (given, comm) = (
            cache_miss_model(&r, AUTO_CACHE_ROWS),
            cache_miss_model(&permute_graph(&r, &pc), AUTO_CACHE_ROWS),
        );
        let (p3, how3) = auto_order(&r);
        if comm <= (1.0 - AUTO_MIN_GAIN) * given {
            assert!(how3 == Reorder::Community && p3 == pc);
        } else {
            assert!(how3 == Reorder::None && p3.is_identity());
        }
        assert_eq!("auto".parse::<Reorder>().unwrap(), Reorder::Auto);
        assert_eq!(Reorder::Auto.to_string(), "auto");
    }

    #[test]
    fn community_size_cap_is_respected() {
        let (g, _) = planted(4, 100, 10, 2, 8);
        let cfg = CommunityConfig {
            max_size: Some(30),
            ..CommunityConfig::default()
        };
        let comm = label_propagation(&g, &cfg);
        let mut size = vec![0usize; g.n_nodes()];
        for &c in &comm {
            size[c as usize] += 1;
        }
        assert!(size.iter().all(|&s| s <= 30), "{:?}", size.iter().max());
        assert!(size.iter().filter(|&&s| s > 0).count() >= 400 / 30);
        let p = community_order(&g, &cfg);
        // each community contiguous
        let mut last = vec![usize::MAX; g.n_nodes()];
        for (r, &o) in p.new_to_old().iter().enumerate() {
            let c = comm[o as usize] as usize;
            assert!(
                last[c] == usize::MAX || last[c] == r - 1,
                "community {c} split"
            );
            last[c] = r;
        }
    }

    #[test]
    fn rcm_and_bfs_recover_a_shuffled_grid() {
        let w = 30;
        let mut e = Vec::new();
        for i in 0..w {
            for j in 0..w {
                let v = (i * w + j) as u32;
                if j + 1 < w {
                    e.push((v, v + 1));
                }
                if i + 1 < w {
                    e.push((v, v + w as u32));
                }
            }
        }
        let g = Graph::try_from_edges(w * w, &e, Direction::Undirected).unwrap();
        let g = permute_graph(&g, &Permutation::random(w * w, 2));
        let bandwidth = |g: &Graph| {
            (0..g.n_nodes())
                .flat_map(|i| g.neighbors(i).iter().map(move |&j| i.abs_diff(j as usize)))
                .max()
                .unwrap()
        };
        assert!(bandwidth(&g) > 10 * w);
        for how in [Reorder::Rcm, Reorder::Bfs] {
            let b = bandwidth(&permute_graph(&g, &order(&g, how)));
            assert!(b <= 2 * w + 2, "{how}: bandwidth {b}");
        }
    }

    #[test]
    fn apply_permutes_every_part_and_inverts() {
        let dense = FeatureKind::Dense {
            center_distance: 1.0,
            cluster_variance: 1.0,
        };
        for features in [FeatureKind::BagOfWords, dense] {
            let d = CitationLike {
                n_nodes: 300,
                n_features: 40,
                features,
                n_valid: 50,
                n_test: 100,
                ..Default::default()
            }
            .generate(4)
            .unwrap();
            let p = order(&d.graph, Reorder::Community);
            let e = apply(&d, &p).unwrap();
            e.validate().unwrap();
            let (x, y) = (d.features.to_dense(), e.features.to_dense());
            for i in 0..300 {
                let r = p.old_to_new()[i] as usize;
                assert_eq!(e.labels[r], d.labels[i]);
                assert_eq!(y.row(r), x.row(i));
                assert_eq!(e.graph.degree(r), d.graph.degree(i));
            }
            for (a, b) in [
                (&d.split.train, &e.split.train),
                (&d.split.valid, &e.split.valid),
                (&d.split.test, &e.split.test),
            ] {
                let mut want: Vec<u32> = a
                    .indices()
                    .iter()
                    .map(|&i| p.old_to_new()[i as usize])
                    .collect();
                want.sort_unstable();
                assert_eq!(b.indices(), &want[..]);
            }
            assert_eq!(e.features.is_sparse(), d.features.is_sparse());
            let back = apply(&e, &p.inverse()).unwrap();
            assert_eq!(back.graph, d.graph);
            assert_eq!(back.labels, d.labels);
            assert_eq!(back.split, d.split);
            assert_eq!(back.features.to_dense(), x);
            if let (Features::Sparse(a), Features::Sparse(b)) = (&back.features, &d.features) {
                assert_eq!(a.x_t().to_dense(), b.x_t().to_dense());
            }
        }
    }
}
