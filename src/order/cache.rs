//! A machine-independent LRU model of the SpMM's gathers ([`cache_miss_model`]) and the
//! locality statistics of an order ([`locality`]).

use crate::graph::permutation::len_check;
use crate::graph::{Graph, Permutation};

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
/// use sparse_gcn::order::cache_miss_model;
/// // A path 0-1-2-3: every row's gathers are near; a 16-row cache holds the whole X.
/// let g = Graph::try_from_edges(4, &[(0, 1), (1, 2), (2, 3)], Direction::Undirected).unwrap();
/// // 4 first touches among 3 + 4 + 3 = 10 gathers (6 off-diagonal, 4 self).
/// assert_eq!(cache_miss_model(&g, 16), 0.4);
/// ```
pub fn cache_miss_model(graph: &Graph, cache_rows: usize) -> f64 {
    cache_miss_model_sampled(graph, None, cache_rows, 1)
}

/// [`cache_miss_model`] (or, with a permutation, [`cache_miss_model_permuted`]) on one set of
/// the cache in every `sample`: the gathers whose row falls in the other sets are not
/// modelled. Each modelled set sees exactly the gathers it would see in the whole cache (a
/// set's contents depend on its own gathers only), and rows go to sets by a hash, so this is
/// the miss rate of an unbiased sample of the gathers, about `sample` times cheaper.
/// `sample` 1 is the whole model.
///
/// # Panics
/// If a permutation's length is not the node count, or `sample` is 0.
#[track_caller]
pub(crate) fn cache_miss_model_sampled(
    graph: &Graph,
    perm: Option<&Permutation>,
    cache_rows: usize,
    sample: usize,
) -> f64 {
    assert!(sample > 0, "cache_miss_model_sampled: sample 0");
    let n = graph.n_nodes();
    let mut m = LruModel::new(n, cache_rows, sample);
    let Some(perm) = perm else {
        for i in 0..n {
            m.row(i, graph.neighbors(i));
        }
        return m.miss_rate();
    };
    len_check("cache_miss_model_permuted", n, perm.len());
    let (q, p) = (perm.new_to_old(), perm.old_to_new());
    let mut row = Vec::new();
    for r in 0..n {
        row.clear();
        row.extend(
            graph
                .neighbors(q[r] as usize)
                .iter()
                .map(|&j| p[j as usize])
                .filter(|&j| m.modelled(j)),
        );
        row.sort_unstable();
        m.row(r, &row);
    }
    m.miss_rate()
}

#[cfg(test)]
/// [`cache_miss_model`] of `permute_graph(graph, perm)`, without building that graph: each
/// row is relabelled and sorted in one reused buffer.
///
/// # Panics
/// If `perm.len() != graph.n_nodes()`.
///
/// # Complexity
/// O((nnz + n)·[`CACHE_MODEL_WAYS`] + Σ deg·log deg) time, O(cache_rows + max degree) memory.
#[track_caller]
pub(crate) fn cache_miss_model_permuted(
    graph: &Graph,
    perm: &Permutation,
    cache_rows: usize,
) -> f64 {
    cache_miss_model_sampled(graph, Some(perm), cache_rows, 1)
}

/// The cache of [`cache_miss_model`]: [`CACHE_MODEL_WAYS`]-way sets of row ids with LRU ages.
pub(super) struct LruModel {
    sets: usize,
    /// One set in `sample` is modelled (those with `set % sample == 0`).
    sample: usize,
    tag: Vec<u32>,
    used: Vec<u64>,
    clock: u64,
    misses: u64,
}

impl LruModel {
    fn new(n: usize, cache_rows: usize, sample: usize) -> Self {
        let ways = CACHE_MODEL_WAYS;
        // A cache of more rows than twice the graph's behaves as an unbounded one here.
        let rows = cache_rows.min(n.saturating_mul(2)).max(ways);
        let sets = rows / ways;
        let kept = sets.div_ceil(sample);
        LruModel {
            sets,
            sample,
            tag: vec![u32::MAX; kept * ways],
            used: vec![0u64; kept * ways],
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

    /// The set of row `j`. Fibonacci hashing: the top 32 bits of j·⌊2⁶⁴/φ⌋, scaled to 0..sets.
    #[inline]
    fn set_of(&self, j: u32) -> usize {
        let h = u64::from(j).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        ((h * self.sets as u64) >> 32) as usize
    }

    /// Whether row `j`'s set is modelled.
    #[inline]
    fn modelled(&self, j: u32) -> bool {
        self.set_of(j).is_multiple_of(self.sample)
    }

    fn touch(&mut self, j: u32) {
        let ways = CACHE_MODEL_WAYS;
        let set = self.set_of(j);
        if !set.is_multiple_of(self.sample) {
            return;
        }
        let set = set / self.sample;
        self.clock += 1;
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
