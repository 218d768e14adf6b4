//! The node-level model of the generator: exact class sizes (largest remainder), the seeded
//! permutation from internal ids (class by class, topic by topic) to output ids, the topics cut
//! inside each class, the power-law degree propensities θ, and the Vose alias tables every O(1)
//! draw uses (one 64-bit random word each).

use rand::RngExt;

use super::{rng_for, CitationLike, NodeIds, STREAM_NODES};

/// One slot of a Vose alias table: keep the slot with probability `thresh / 2^32`, else take
/// `alias`. Slots that are always kept have `alias` = themselves.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Slot {
    thresh: u32,
    alias: u32,
}

/// Fills `out` (same length as `w`) with Vose's alias table for the weights `w` (≥ 0, finite):
/// O(n) build, O(1) per sample ([`pick`]). All-zero weights give the uniform law.
pub(super) fn build_alias(w: &[f64], out: &mut [Slot]) {
    let n = w.len();
    let total: f64 = w.iter().sum();
    let mut prob: Vec<f64> = if total > 0.0 && total.is_finite() {
        w.iter().map(|&x| x * n as f64 / total).collect()
    } else {
        vec![1.0; n]
    };
    let (mut small, mut large): (Vec<u32>, Vec<u32>) = (Vec::new(), Vec::new());
    for (i, &p) in prob.iter().enumerate() {
        if p < 1.0 {
            small.push(i as u32);
        } else {
            large.push(i as u32);
        }
    }
    while let (Some(&s), Some(&l)) = (small.last(), large.last()) {
        small.pop();
        let p = prob[s as usize];
        out[s as usize] = Slot {
            thresh: (p.clamp(0.0, 1.0) * 4_294_967_296.0).min(u32::MAX as f64) as u32,
            alias: l,
        };
        prob[l as usize] -= 1.0 - p;
        if prob[l as usize] < 1.0 {
            large.pop();
            small.push(l);
        }
    }
    // What is left has probability 1 up to rounding.
    for i in small.into_iter().chain(large) {
        out[i as usize] = Slot {
            thresh: u32::MAX,
            alias: i,
        };
    }
}

/// Draws an index from an alias table with one random word: the high 32 bits choose the slot
/// (multiply-shift), the low 32 bits decide between the slot and its alias.
#[inline]
pub(super) fn pick(tab: &[Slot], x: u64) -> usize {
    let i = (((x >> 32) * tab.len() as u64) >> 32) as usize;
    let s = tab[i];
    if (x as u32) < s.thresh {
        i
    } else {
        s.alias as usize
    }
}

/// Exact class sizes for proportions ∝ 1 + k·slope (largest remainder, ties to the lower k).
fn class_sizes(n: usize, c: usize, slope: f64) -> Vec<usize> {
    let w: Vec<f64> = (0..c).map(|k| 1.0 + k as f64 * slope).collect();
    let total: f64 = w.iter().sum();
    let exact: Vec<f64> = w.iter().map(|&x| x / total * n as f64).collect();
    let mut sizes: Vec<usize> = exact.iter().map(|&x| x.floor() as usize).collect();
    let assigned: usize = sizes.iter().sum();
    let mut order: Vec<usize> = (0..c).collect();
    order.sort_by(|&a, &b| {
        let (fa, fb) = (exact[a] - exact[a].floor(), exact[b] - exact[b].floor());
        fb.total_cmp(&fa).then(a.cmp(&b))
    });
    for &k in order.iter().take(n.saturating_sub(assigned)) {
        sizes[k] += 1;
    }
    sizes
}

/// The node-level model: nodes are numbered internally class by class (class k owns the
/// internal ids `offsets[k]..offsets[k+1]`), and each class topic by topic (topic t owns
/// `topics[t]..topics[t+1]`); `ext` maps internal ids to the output ids.
pub(super) struct Nodes {
    pub(super) offsets: Vec<usize>,
    pub(super) topics: Vec<usize>,
    /// The topic of each internal id.
    pub(super) topic_of: Vec<u32>,
    pub(super) ext: Vec<u32>,
    pub(super) theta: Vec<f64>,
}

impl Nodes {
    pub(super) fn new(p: &CitationLike, seed: u64) -> Self {
        let n = p.n_nodes;
        let sizes = class_sizes(n, p.n_classes, p.class_size_slope);
        let mut offsets = Vec::with_capacity(sizes.len() + 1);
        offsets.push(0usize);
        for s in &sizes {
            offsets.push(offsets[offsets.len() - 1] + s);
        }
        // Topics: ⌈s / topic_size⌉ per class, sizes differing by at most one.
        let mut topics = vec![0usize];
        let mut topic_of = vec![0u32; n];
        for k in 0..sizes.len() {
            let (a, s) = (offsets[k], sizes[k]);
            let t = s.div_ceil(p.topic_size.max(1));
            for j in 0..t {
                let (lo, hi) = (a + j * s / t, a + (j + 1) * s / t);
                topic_of[lo..hi].fill((topics.len() - 1) as u32);
                topics.push(hi);
            }
        }
        let mut rng = rng_for(seed, STREAM_NODES);
        let mut ext: Vec<u32> = (0..n as u32).collect();
        for i in (1..n).rev() {
            ext.swap(i, rng.random_range(0..=i));
        }
        if p.ids == NodeIds::Topics {
            // The same draws (θ follows from the same stream), the internal ids kept.
            for (i, e) in ext.iter_mut().enumerate() {
                *e = i as u32;
            }
        }
        let gamma = p.degree_exponent;
        let cap = (n as f64).sqrt() * 4.0;
        let theta = (0..n)
            .map(|_| {
                let u: f64 = rng.random();
                (1.0 - u).powf(-1.0 / (gamma - 1.0)).min(cap)
            })
            .collect();
        Nodes {
            offsets,
            topics,
            topic_of,
            ext,
            theta,
        }
    }

    pub(super) fn n_topics(&self) -> usize {
        self.topics.len() - 1
    }

    /// The class holding topic `t` (topics nest in classes).
    pub(super) fn class_of_topic(&self, t: usize) -> usize {
        self.offsets.partition_point(|&o| o <= self.topics[t]) - 1
    }

    /// Labels in output order.
    pub(super) fn labels(&self) -> Vec<u32> {
        let mut labels = vec![0u32; self.ext.len()];
        for k in 0..self.offsets.len() - 1 {
            for i in self.offsets[k]..self.offsets[k + 1] {
                labels[self.ext[i] as usize] = k as u32;
            }
        }
        labels
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn alias_matches_weights() {
        let w = [1.0, 0.0, 3.0, 4.0];
        let mut tab = vec![Slot::default(); 4];
        build_alias(&w, &mut tab);
        let mut rng = rng_for(7, 0);
        let mut counts = [0usize; 4];
        let m = 400_000;
        for _ in 0..m {
            counts[pick(&tab, rng.next_u64())] += 1;
        }
        for (i, &c) in counts.iter().enumerate() {
            let p = w[i] / 8.0;
            assert!((c as f64 / m as f64 - p).abs() < 0.005, "{i}: {c}");
        }
    }

    /// Topic ids keep the internal numbering (labels ascending, each topic a range of ids)
    /// and the same draws as shuffled ids; the generated graph has the same size, and most of
    /// its edges join nearby ids.
    #[test]
    fn topic_ids_number_the_nodes_topic_by_topic() {
        let shuffled = CitationLike {
            n_nodes: 5000,
            n_edges: Some(20_000),
            ..CitationLike::default()
        };
        let topics = CitationLike {
            ids: NodeIds::Topics,
            ..shuffled.clone()
        };
        let (a, b) = (Nodes::new(&shuffled, 3), Nodes::new(&topics, 3));
        assert_eq!(b.ext, (0..5000).collect::<Vec<u32>>());
        assert_ne!(a.ext, b.ext);
        assert_eq!((&a.theta, &a.topic_of), (&b.theta, &b.topic_of));
        let labels = b.labels();
        assert!(labels.windows(2).all(|w| w[0] <= w[1]));
        let mut sorted = a.labels();
        sorted.sort_unstable();
        assert_eq!(sorted, labels);
        let (ga, gb) = (
            shuffled.generate(3).unwrap().graph,
            topics.generate(3).unwrap().graph,
        );
        assert_eq!(ga.n_edges(), gb.n_edges());
        // Within 64 ids: an edge inside a topic (16 nodes) always is.
        let near = |g: &crate::graph::Graph| {
            (0..g.n_nodes())
                .map(|i| {
                    g.neighbors(i)
                        .iter()
                        .filter(|&&j| i.abs_diff(j as usize) < 64)
                        .count()
                })
                .sum::<usize>() as f64
                / g.nnz() as f64
        };
        assert!(
            near(&gb) > 0.4 && near(&ga) < 0.05,
            "{} {}",
            near(&gb),
            near(&ga)
        );
    }

    #[test]
    fn class_sizes_are_exact() {
        let s = class_sizes(1000, 7, 0.5);
        assert_eq!(s.iter().sum::<usize>(), 1000);
        assert!(s.windows(2).all(|p| p[0] <= p[1]));
        assert_eq!(class_sizes(10, 3, 0.0), vec![4, 3, 3]);
    }
}
