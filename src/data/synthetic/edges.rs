//! The edges of the generator: [`EdgeSampler`], the O(1)-per-candidate DC-SBM sampler with
//! topics (u ∝ θ, then v ∝ θ in u's class or another one, or uniformly in u's topic or its
//! partner topic), drawn in parallel fixed-size blocks of their own RNG streams; the packed keys
//! radix-sorted, merged and deduplicated round after round until the intra- and inter-class
//! targets are met exactly, a last overshoot trimmed uniformly at random; and the [`Graph`].

use rand::{Rng, RngExt};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::nodes::{build_alias, pick, Nodes, Slot};
use super::{
    rng_for, CitationLike, EDGE_BLOCK, STREAM_EDGES, STREAM_PART_SHIFT, STREAM_TOPICS, STREAM_TRIM,
};
use crate::graph::{Direction, Graph};
use crate::{Error, Result};

/// Candidates drawn before giving up on the target count, in multiples of the target.
const MAX_CANDIDATES_PER_EDGE: usize = 64;
/// Draws of another class before an inter-class edge falls back to the source's class.
const MAX_CLASS_TRIES: usize = 64;

/// `p` ∈ [0, 1] as a threshold on 53 random bits.
fn to53(p: f64) -> u64 {
    (p * (1u64 << 53) as f64) as u64
}

/// O(1)-per-edge sampler of the DC-SBM with topics.
pub(super) struct EdgeSampler<'a> {
    nodes: &'a Nodes,
    /// Classes ∝ Θ_k.
    classes: Vec<Slot>,
    /// Per class, nodes ∝ θ (segment k covers `offsets[k]..offsets[k+1]`, local indices).
    members: Vec<Slot>,
    /// Per topic, nodes ∝ θ (segment t covers `topics[t]..topics[t+1]`, local indices).
    topic_members: Vec<Slot>,
    /// Per topic, the partner topic in another class (itself if there is no other class).
    partner: Vec<u32>,
    /// `topic_locality` · 2^53 (0: no draw is made, the plain DC-SBM stream).
    rho53: u64,
    /// Whether two classes have nodes (else every edge stays inside its class).
    pub(super) inter: bool,
    /// Bits of a node id in a packed key.
    bits: u32,
}

impl<'a> EdgeSampler<'a> {
    pub(super) fn new(nodes: &'a Nodes, p: &CitationLike, seed: u64, bits: u32) -> Self {
        let c = nodes.offsets.len() - 1;
        let mut mass = vec![0.0f64; c];
        let mut members = vec![Slot::default(); nodes.theta.len()];
        for k in 0..c {
            let r = nodes.offsets[k]..nodes.offsets[k + 1];
            mass[k] = nodes.theta[r.clone()].iter().sum();
            build_alias(&nodes.theta[r.clone()], &mut members[r]);
        }
        let mut topic_members = vec![Slot::default(); nodes.theta.len()];
        for t in 0..nodes.n_topics() {
            let r = nodes.topics[t]..nodes.topics[t + 1];
            build_alias(&vec![1.0; r.len()], &mut topic_members[r]);
        }
        let mut classes = vec![Slot::default(); c];
        build_alias(&mass, &mut classes);
        let mut s = EdgeSampler {
            nodes,
            classes,
            members,
            topic_members,
            partner: Vec::new(),
            rho53: to53(p.topic_locality),
            inter: mass.iter().filter(|&&m| m > 0.0).count() >= 2,
            bits,
        };
        // Each topic's partner: the topic of a node drawn ∝ θ from another class drawn ∝ Θ.
        let mut rng = rng_for(seed, STREAM_TOPICS);
        s.partner = (0..nodes.n_topics())
            .map(|t| {
                let a = nodes.class_of_topic(t);
                let b = s.other_class(a, &mut rng);
                nodes.topic_of[s.member(b, rng.next_u64())]
            })
            .collect();
        s
    }

    /// A class ≠ `a` drawn ∝ Θ (`a` itself after [`MAX_CLASS_TRIES`] misses, or with one
    /// class).
    #[inline]
    fn other_class(&self, a: usize, rng: &mut ChaCha8Rng) -> usize {
        if self.inter {
            for _ in 0..MAX_CLASS_TRIES {
                let t = pick(&self.classes, rng.next_u64());
                if t != a {
                    return t;
                }
            }
        }
        a
    }

    /// A node of class `k` ∝ θ (internal id).
    #[inline]
    fn member(&self, k: usize, x: u64) -> usize {
        let (a, b) = (self.nodes.offsets[k], self.nodes.offsets[k + 1]);
        a + pick(&self.members[a..b], x)
    }

    /// A node of topic `t` ∝ θ (internal id).
    #[inline]
    fn topic_member(&self, t: usize, x: u64) -> usize {
        let (a, b) = (self.nodes.topics[t], self.nodes.topics[t + 1]);
        a + pick(&self.topic_members[a..b], x)
    }

    /// Draws `out.len()` candidates, inter-class ones if `cross`, else intra-class ones,
    /// writes the packed keys (min << bits | max) of those that are not self-loops to the
    /// front of `out`, and returns their number.
    fn fill(&self, rng: &mut ChaCha8Rng, cross: bool, out: &mut [u64]) -> usize {
        let mut k = 0;
        for _ in 0..out.len() {
            let a = pick(&self.classes, rng.next_u64());
            let u = self.member(a, rng.next_u64());
            let local = self.rho53 > 0 && (rng.next_u64() >> 11) < self.rho53;
            let v = match (cross, local) {
                (false, false) => self.member(a, rng.next_u64()),
                (false, true) => self.topic_member(self.nodes.topic_of[u] as usize, rng.next_u64()),
                (true, false) => {
                    let b = self.other_class(a, rng);
                    if b == a {
                        continue; // no other class found: not an inter-class candidate
                    }
                    self.member(b, rng.next_u64())
                }
                (true, true) => {
                    let t = self.partner[self.nodes.topic_of[u] as usize] as usize;
                    self.topic_member(t, rng.next_u64())
                }
            };
            if u == v {
                continue;
            }
            let (eu, ev) = (self.nodes.ext[u], self.nodes.ext[v]);
            let (lo, hi) = if eu < ev { (eu, ev) } else { (ev, eu) };
            out[k] = (u64::from(lo) << self.bits) | u64::from(hi);
            k += 1;
        }
        k
    }

    /// The candidates of blocks `blocks` of round `round` (inter-class ones if `cross`; the
    /// round draws `attempts` in all, in blocks of [`EDGE_BLOCK`]), in parallel: their packed
    /// keys, self-loops dropped, in block order.
    pub(super) fn candidates(
        &self,
        seed: u64,
        cross: bool,
        round: u64,
        attempts: usize,
        blocks: std::ops::Range<usize>,
    ) -> Vec<u64> {
        let first = blocks.start * EDGE_BLOCK;
        let end = (blocks.end * EDGE_BLOCK).min(attempts);
        let mut buf = vec![0u64; end.saturating_sub(first)];
        let counts: Vec<usize> = buf
            .par_chunks_mut(EDGE_BLOCK)
            .enumerate()
            .map(|(k, chunk)| {
                let b = (blocks.start + k) as u64;
                let part = u64::from(cross) << STREAM_PART_SHIFT;
                let mut rng = rng_for(seed, STREAM_EDGES | part | (round << 40) | b);
                self.fill(&mut rng, cross, chunk)
            })
            .collect();
        let mut w = 0;
        for (k, &c) in counts.iter().enumerate() {
            let start = k * EDGE_BLOCK;
            buf.copy_within(start..start + c, w);
            w += c;
        }
        buf.truncate(w);
        buf
    }
}

/// A set of unique packed keys that grows round by round ([`CitationLike::unique_keys`]): in
/// memory a sorted `Vec<u64>`, out of core `disk::DiskKeys`. Both give the same set, so the
/// rounds (whose sizes follow from its counts) and the trim draw the same edges.
pub(super) trait KeySet {
    /// Unique keys held.
    fn count(&self) -> usize;
    /// Adds the `attempts` candidates of round `round` (inter-class ones if `cross`).
    ///
    /// # Errors
    /// [`Error::Io`] out of core.
    fn add_round(
        &mut self,
        sampler: &EdgeSampler<'_>,
        seed: u64,
        cross: bool,
        round: u64,
        attempts: usize,
    ) -> Result<()>;
    /// Removes the keys at the positions `drop` marks (a bitset over the sorted keys).
    ///
    /// # Errors
    /// [`Error::Io`] out of core.
    fn remove_marked(&mut self, drop: &[u64]) -> Result<()>;
}

impl KeySet for Vec<u64> {
    fn count(&self) -> usize {
        self.len()
    }
    fn add_round(
        &mut self,
        sampler: &EdgeSampler<'_>,
        seed: u64,
        cross: bool,
        round: u64,
        attempts: usize,
    ) -> Result<()> {
        let mut fresh = sampler.candidates(
            seed,
            cross,
            round,
            attempts,
            0..attempts.div_ceil(EDGE_BLOCK),
        );
        radix_sort(&mut fresh, 2 * sampler.bits);
        fresh.dedup();
        merge_unique(self, fresh);
        Ok(())
    }
    fn remove_marked(&mut self, drop: &[u64]) -> Result<()> {
        retain_unmarked(self, drop, 0);
        Ok(())
    }
}

/// Sorts keys that fit in `bits` bits: LSD radix sort with 11-bit digits (one scratch copy).
pub(super) fn radix_sort(keys: &mut Vec<u64>, bits: u32) {
    const DIGIT: u32 = 11;
    const BUCKETS: usize = 1 << DIGIT;
    if keys.len() < 2 {
        return;
    }
    let passes = bits.div_ceil(DIGIT).max(1);
    let mut hist = vec![[0usize; BUCKETS]; passes as usize];
    for &k in keys.iter() {
        for (p, h) in hist.iter_mut().enumerate() {
            h[((k >> (p as u32 * DIGIT)) as usize) & (BUCKETS - 1)] += 1;
        }
    }
    let mut src = std::mem::take(keys);
    let mut dst = vec![0u64; src.len()];
    for (p, h) in hist.iter().enumerate() {
        if h.contains(&src.len()) {
            continue; // every key has the same digit here
        }
        let mut pos = [0usize; BUCKETS];
        let mut sum = 0;
        for (b, &c) in h.iter().enumerate() {
            pos[b] = sum;
            sum += c;
        }
        let shift = p as u32 * DIGIT;
        for &k in &src {
            let d = ((k >> shift) as usize) & (BUCKETS - 1);
            dst[pos[d]] = k;
            pos[d] += 1;
        }
        std::mem::swap(&mut src, &mut dst);
    }
    *keys = src;
}

/// Merges the sorted unique `fresh` into the sorted unique `keys` (in place, from the back)
/// and removes the duplicates between them.
pub(super) fn merge_unique(keys: &mut Vec<u64>, fresh: Vec<u64>) {
    if keys.is_empty() {
        *keys = fresh;
        return;
    }
    let (mut i, mut j) = (keys.len(), fresh.len());
    keys.resize(i + j, 0);
    let mut w = i + j;
    while j > 0 {
        if i > 0 && keys[i - 1] > fresh[j - 1] {
            keys[w - 1] = keys[i - 1];
            i -= 1;
        } else {
            keys[w - 1] = fresh[j - 1];
            j -= 1;
        }
        w -= 1;
    }
    keys.dedup();
}

/// The positions (a bitset over `d` sorted keys) of `d − target` keys chosen uniformly at
/// random (Floyd's subset sampling) from the stream `stream` of `seed`: what a set trimmed to
/// `target` keys loses.
pub(super) fn marked_for_trim(d: usize, target: usize, seed: u64, stream: u64) -> Vec<u64> {
    let mut rng = rng_for(seed, stream);
    let mut drop = vec![0u64; d.div_ceil(64)];
    let mut mark = |i: usize| -> bool {
        let (w, b) = (i / 64, 1u64 << (i % 64));
        let was = drop[w] & b != 0;
        drop[w] |= b;
        was
    };
    for j in target..d {
        let t = rng.random_range(0..=j);
        if mark(t) {
            mark(j);
        }
    }
    drop
}

/// Removes from `keys`, the sorted keys at positions `first..` of a set, those whose position
/// `drop` marks (a bitset over the set).
pub(super) fn retain_unmarked(keys: &mut Vec<u64>, drop: &[u64], first: usize) {
    let mut i = first;
    keys.retain(|_| {
        let keep = drop[i / 64] & (1u64 << (i % 64)) == 0;
        i += 1;
        keep
    });
}

/// Removes `keys.count() - target` keys chosen uniformly at random ([`marked_for_trim`]).
fn trim_to<K: KeySet>(keys: &mut K, target: usize, seed: u64, stream: u64) -> Result<()> {
    let d = keys.count();
    if d <= target {
        return Ok(());
    }
    keys.remove_marked(&marked_for_trim(d, target, seed, stream))
}

impl CitationLike {
    /// Draws candidate edges in rounds until exactly [`CitationLike::target_edges`] unique
    /// ones exist (round(`homophily`·E) of them inside a class), and builds the graph.
    pub(super) fn edges(&self, nodes: &Nodes, seed: u64) -> Result<Graph> {
        let n = self.n_nodes;
        let target = self.target_edges();
        let bits = (usize::BITS - n.saturating_sub(1).leading_zeros()).max(1);
        let sampler = EdgeSampler::new(nodes, self, seed, bits);
        let (mut keys, inter): (Vec<u64>, Vec<u64>) =
            self.edge_sets(&sampler, seed, &mut |_| Ok(Vec::new()))?;
        // Intra- and inter-class pairs are disjoint: the merge loses nothing.
        merge_unique(&mut keys, inter);
        let mask = (1u64 << bits) - 1;
        let edges: Vec<(u32, u32)> = keys
            .iter()
            .map(|&k| ((k >> bits) as u32, (k & mask) as u32))
            .collect();
        drop(keys);
        // Sorted by (min, max), so every row of the CSR is filled in order.
        let graph = Graph::try_from_edges(n, &edges, Direction::Undirected)?;
        if graph.n_edges() != target {
            return Err(Error::Mismatch {
                what: "CitationLike: unique undirected edges built".into(),
                expected: target,
                got: graph.n_edges(),
            });
        }
        Ok(graph)
    }

    /// The intra-class and the inter-class keys of the graph, drawn into sets `new_set` makes
    /// (`false` for the intra-class set, `true` for the inter-class one): exactly
    /// [`CitationLike::target_edges`] unique keys together, round(`homophily`·E) of them inside
    /// a class unless one part cannot be filled, when the other makes up the difference.
    ///
    /// # Errors
    /// [`Error::Mismatch`] when the target cannot be reached; the sets' errors.
    pub(super) fn edge_sets<K: KeySet>(
        &self,
        sampler: &EdgeSampler<'_>,
        seed: u64,
        new_set: &mut dyn FnMut(bool) -> Result<K>,
    ) -> Result<(K, K)> {
        let target = self.target_edges();
        let intra = if sampler.inter {
            (self.homophily * target as f64).round() as usize
        } else {
            target
        };
        // A part that cannot be filled (too few pairs inside, or between, the classes) is
        // made up by the other.
        let mut keys = new_set(false)?;
        self.unique_keys(sampler, seed, false, intra, &mut keys)?;
        let mut inter = new_set(true)?;
        self.unique_keys(sampler, seed, true, target - keys.count(), &mut inter)?;
        if keys.count() + inter.count() < target && keys.count() == intra {
            drop(keys);
            keys = new_set(false)?;
            self.unique_keys(sampler, seed, false, target - inter.count(), &mut keys)?;
        }
        if keys.count() + inter.count() < target {
            return Err(self.unreachable(keys.count() + inter.count()));
        }
        Ok((keys, inter))
    }

    /// Draws `target` unique packed keys of intra-class (`cross` false) or inter-class edges
    /// into the empty `keys`, in rounds; fewer if the candidate budget runs out first.
    fn unique_keys<K: KeySet>(
        &self,
        sampler: &EdgeSampler<'_>,
        seed: u64,
        cross: bool,
        target: usize,
        keys: &mut K,
    ) -> Result<()> {
        // Give up after this many candidates (only a target close to the most the model can
        // reach gets near it).
        let budget = MAX_CANDIDATES_PER_EDGE * target.max(EDGE_BLOCK);
        let (mut spent, mut attempts, mut round) = (0usize, target, 0u64);
        let mut novelty = 1.0f64;
        while keys.count() < target {
            if spent >= budget {
                break;
            }
            let before = keys.count();
            keys.add_round(sampler, seed, cross, round, attempts)?;
            spent += attempts;
            let gained = keys.count() - before;
            if keys.count() >= target {
                break;
            }
            // New unique edges per candidate. The first round averages over a growing set, so
            // the marginal rate at its end is lower: about 2ν − 1 when duplicates are rare.
            novelty = if gained == 0 {
                novelty / 4.0
            } else if round == 0 {
                let avg = gained as f64 / attempts as f64;
                (2.0 * avg - 1.0).max(avg / 4.0)
            } else {
                gained as f64 / attempts as f64
            };
            let deficit = target - keys.count();
            attempts = ((deficit as f64 / novelty).ceil() as usize)
                .saturating_add(16)
                .min(target.max(EDGE_BLOCK))
                .min(budget - spent)
                .max(1);
            round += 1;
        }
        trim_to(keys, target, seed, STREAM_TRIM | u64::from(cross) << 8)
    }

    fn unreachable(&self, got: usize) -> Error {
        Error::Mismatch {
            what: format!(
                "CitationLike: unique edges reached with {MAX_CANDIDATES_PER_EDGE}× the target in candidates \
                 (the target is too close to the most that {} nodes in {} classes with homophily {} allow)",
                self.n_nodes, self.n_classes, self.homophily
            ),
            expected: self.target_edges(),
            got,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn radix_sort_sorts() {
        let mut rng = rng_for(3, 0);
        let mut v: Vec<u64> = (0..50_000).map(|_| rng.next_u64() >> 20).collect();
        let mut w = v.clone();
        radix_sort(&mut v, 44);
        w.sort_unstable();
        assert_eq!(v, w);
    }

    #[test]
    fn merge_and_trim() {
        let mut a = vec![1, 3, 5, 7];
        merge_unique(&mut a, vec![0, 3, 4, 9]);
        assert_eq!(a, vec![0, 1, 3, 4, 5, 7, 9]);
        trim_to(&mut a, 4, 1, STREAM_TRIM).unwrap();
        assert_eq!(a.len(), 4);
        assert!(a.windows(2).all(|p| p[0] < p[1]));
    }
}
