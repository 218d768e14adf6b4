//! A seeded synthetic citation-like graph generator: a degree-corrected stochastic block model
//! with power-law expected degrees, homophilous classes and bag-of-words features drawn from
//! class-dependent word distributions. It needs no files, so every example, bench and test
//! runs offline.

use rand::{Rng, RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::features::SparseFeatures;
use super::normalize::NewTrusted;
use super::{Dataset, Direction, Features, Graph, Mask, Split};
use crate::kernels::Csr;
use crate::{ConfigError, Result};

/// Parameters of the citation-like generator. Defaults give a Cora-sized graph.
#[derive(Debug, Clone, PartialEq)]
pub struct CitationLike {
    /// Number of nodes.
    pub n_nodes: usize,
    /// Number of classes (topics).
    pub n_classes: usize,
    /// Target average degree (2·edges / nodes before duplicate merging).
    pub avg_degree: f64,
    /// Probability that an edge is drawn inside its source's class; the other edges go to a
    /// degree-weighted random node of any class.
    pub homophily: f64,
    /// Exponent γ of the power-law expected degrees (P(θ) ∝ θ^-γ, γ > 2).
    pub degree_exponent: f64,
    /// Vocabulary size (`in_dim`).
    pub n_features: usize,
    /// Words drawn per node (before duplicates are merged).
    pub words_per_node: usize,
    /// Probability that a word comes from the node's class vocabulary rather than uniformly.
    pub feature_signal: f64,
    /// Training nodes per class (Planetoid: 20).
    pub train_per_class: usize,
    /// Validation nodes.
    pub n_valid: usize,
    /// Test nodes.
    pub n_test: usize,
}

impl Default for CitationLike {
    fn default() -> Self {
        CitationLike {
            n_nodes: 2708,
            n_classes: 7,
            avg_degree: 4.0,
            homophily: 0.8,
            degree_exponent: 2.5,
            n_features: 1433,
            words_per_node: 18,
            feature_signal: 0.3,
            train_per_class: 20,
            n_valid: 500,
            n_test: 1000,
        }
    }
}

/// Vose's alias table: O(n) build, O(1) per sample.
struct Alias {
    prob: Vec<f64>,
    alias: Vec<u32>,
}

impl Alias {
    fn new(w: &[f64]) -> Self {
        let n = w.len();
        let total: f64 = w.iter().sum();
        let mut prob: Vec<f64> = w.iter().map(|&x| x * n as f64 / total).collect();
        let mut alias = vec![0u32; n];
        let (mut small, mut large): (Vec<u32>, Vec<u32>) = (Vec::new(), Vec::new());
        for (i, &p) in prob.iter().enumerate() {
            if p < 1.0 {
                small.push(i as u32)
            } else {
                large.push(i as u32)
            }
        }
        while let (Some(s), Some(&l)) = (small.pop(), large.last()) {
            alias[s as usize] = l;
            prob[l as usize] -= 1.0 - prob[s as usize];
            if prob[l as usize] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        for i in small.into_iter().chain(large) {
            prob[i as usize] = 1.0;
        }
        Alias { prob, alias }
    }
    #[inline]
    fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> usize {
        let i = rng.random_range(0..self.prob.len());
        if rng.random::<f64>() < self.prob[i] {
            i
        } else {
            self.alias[i] as usize
        }
    }
}

impl CitationLike {
    /// Checks the parameters.
    ///
    /// # Errors
    /// [`ConfigError::ZeroDim`] for a zero count.
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.n_nodes == 0 {
            return Err(ConfigError::ZeroDim("n_nodes"));
        }
        if self.n_classes == 0 {
            return Err(ConfigError::ZeroDim("n_classes"));
        }
        if self.n_features == 0 {
            return Err(ConfigError::ZeroDim("n_features"));
        }
        Ok(())
    }

    /// Generates the dataset with `seed`. The same parameters and seed give the same dataset
    /// on every machine (ChaCha8, one stream per part).
    ///
    /// # Errors
    /// From [`CitationLike::check`].
    ///
    /// # Complexity
    /// O(n + E + n·words) time and memory proportional to the output.
    ///
    /// # Examples
    /// ```
    /// use sparse_gcn::graph::synthetic::CitationLike;
    /// let d = CitationLike { n_nodes: 500, ..Default::default() }.generate(1).unwrap();
    /// assert_eq!(d.graph.n_nodes(), 500);
    /// assert_eq!(d.split.train.len(), 7 * 20);
    /// ```
    pub fn generate(&self, seed: u64) -> Result<Dataset> {
        self.check()?;
        let n = self.n_nodes;
        let c = self.n_classes;
        let rng_for = |stream: u64| {
            let mut r = ChaCha8Rng::seed_from_u64(seed);
            r.set_stream(stream);
            r
        };
        // Labels and power-law weights.
        let mut rng = rng_for(1);
        let labels: Vec<u32> = (0..n).map(|_| rng.random_range(0..c as u32)).collect();
        let gamma = self.degree_exponent.max(2.01);
        let cap = (n as f64).sqrt() * 4.0;
        let theta: Vec<f64> = (0..n)
            .map(|_| {
                let u: f64 = rng.random();
                (1.0 - u).powf(-1.0 / (gamma - 1.0)).min(cap)
            })
            .collect();
        let global = Alias::new(&theta);
        let mut members: Vec<Vec<u32>> = vec![Vec::new(); c];
        for (i, &l) in labels.iter().enumerate() {
            members[l as usize].push(i as u32);
        }
        let per_class: Vec<Option<Alias>> = members
            .iter()
            .map(|m| {
                (!m.is_empty())
                    .then(|| Alias::new(&m.iter().map(|&i| theta[i as usize]).collect::<Vec<_>>()))
            })
            .collect();
        // Edges.
        let mut rng = rng_for(2);
        let n_edges = ((n as f64) * self.avg_degree / 2.0).round() as usize;
        let mut edges = Vec::with_capacity(n_edges);
        while edges.len() < n_edges && n > 1 {
            let u = global.sample(&mut rng);
            let class = labels[u] as usize;
            let v = match (&per_class[class], rng.random::<f64>() < self.homophily) {
                (Some(a), true) => members[class][a.sample(&mut rng)] as usize,
                _ => global.sample(&mut rng),
            };
            if u != v {
                edges.push((u as u32, v as u32));
            }
        }
        let graph = Graph::try_from_edges(n, &edges, Direction::Undirected)?;
        drop(edges);
        // Features: each class owns a random slice of the vocabulary.
        let mut rng = rng_for(3);
        let f = self.n_features;
        let mut vocab: Vec<u32> = (0..f as u32).collect();
        for i in (1..f).rev() {
            vocab.swap(i, rng.random_range(0..=i));
        }
        let topic = (f / c).max(1);
        let mut indptr = Vec::with_capacity(n + 1);
        indptr.push(0usize);
        let mut indices: Vec<u32> = Vec::with_capacity(n * self.words_per_node);
        let mut row = Vec::with_capacity(self.words_per_node);
        for &l in &labels {
            row.clear();
            let base = (l as usize * topic) % f;
            for _ in 0..self.words_per_node {
                let w = if rng.random::<f64>() < self.feature_signal {
                    vocab[(base + rng.random_range(0..topic)) % f]
                } else {
                    rng.random_range(0..f as u32)
                };
                row.push(w);
            }
            row.sort_unstable();
            row.dedup();
            indices.extend_from_slice(&row);
            indptr.push(indices.len());
        }
        let data = vec![1.0f32; indices.len()];
        let x = Csr::new_trusted_pub((n, f), indptr, indices, data);
        let features = Features::Sparse(SparseFeatures::new(x));
        // Split: Planetoid style, in a seeded random node order.
        let mut rng = rng_for(4);
        let mut order: Vec<u32> = (0..n as u32).collect();
        for i in (1..n).rev() {
            order.swap(i, rng.random_range(0..=i));
        }
        let mut per = vec![0usize; c];
        let (mut train, mut rest) = (Vec::new(), Vec::new());
        for &i in &order {
            let l = labels[i as usize] as usize;
            if per[l] < self.train_per_class {
                per[l] += 1;
                train.push(i);
            } else {
                rest.push(i);
            }
        }
        let n_valid = self.n_valid.min(rest.len() / 2);
        let n_test = self.n_test.min(rest.len() - n_valid);
        let valid = rest[..n_valid].to_vec();
        let test = rest[n_valid..n_valid + n_test].to_vec();
        let split = Split {
            name: "random".into(),
            train: Mask::try_from_indices(train, n)?,
            valid: Mask::try_from_indices(valid, n)?,
            test: Mask::try_from_indices(test, n)?,
        };
        let dataset = Dataset {
            name: format!("citation-like-n{n}-seed{seed}"),
            graph,
            features,
            labels,
            n_classes: c,
            split,
        };
        Ok(dataset)
    }
}
