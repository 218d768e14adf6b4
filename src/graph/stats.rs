//! [`DatasetStats`]: what `sparse-gcn info` prints about a dataset.

use serde::Serialize;

use super::Dataset;

/// Summary statistics of a dataset, computed in O(n + nnz) except
/// [`DatasetStats::clustering`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DatasetStats {
    /// Dataset name.
    pub name: String,
    /// Nodes.
    pub n_nodes: usize,
    /// Undirected edges (self-loops counted once), or arcs for a directed graph.
    pub n_edges: usize,
    /// Whether the graph was read as directed.
    pub directed: bool,
    /// Edge records in the input.
    pub input_edges: usize,
    /// Self-loops in the input (kept with weight 1; normalisation adds the remaining ones).
    pub self_loops: usize,
    /// Adjacency entries merged because they repeated an entry.
    pub duplicates_merged: usize,
    /// Nodes with no neighbour other than themselves.
    pub isolated_nodes: usize,
    /// Smallest degree (neighbours, self-loop excluded).
    pub degree_min: usize,
    /// Median degree.
    pub degree_median: f64,
    /// 99th percentile of the degree (nearest rank).
    pub degree_p99: usize,
    /// Largest degree.
    pub degree_max: usize,
    /// Mean degree.
    pub degree_mean: f64,
    /// Fraction of edges (self-loops excluded) whose endpoints share a label.
    pub edge_homophily: f64,
    /// Mean local clustering coefficient (Watts–Strogatz; a node with fewer than two
    /// neighbours counts 0, as in networkx's `average_clustering`), over the stored neighbour
    /// lists (out-neighbours for a directed graph), self-loops excluded. Averaged over
    /// [`DatasetStats::clustering_nodes`] nodes.
    pub clustering: f64,
    /// Nodes the clustering coefficient averages over: every node up to
    /// [`CLUSTERING_EXACT_NODES`] nodes, else every ⌈n / [`CLUSTERING_SAMPLE`]⌉-th node.
    pub clustering_nodes: usize,
    /// Feature columns.
    pub in_dim: usize,
    /// Stored feature entries.
    pub feature_nnz: usize,
    /// Whether the features are stored sparse.
    pub features_sparse: bool,
    /// Classes.
    pub n_classes: usize,
    /// Nodes per class.
    pub class_counts: Vec<usize>,
    /// Split name.
    pub split: String,
    /// Training nodes.
    pub n_train: usize,
    /// Validation nodes.
    pub n_valid: usize,
    /// Test nodes.
    pub n_test: usize,
}

/// Up to this many nodes the clustering coefficient is averaged over every node.
pub const CLUSTERING_EXACT_NODES: usize = 200_000;
/// Above [`CLUSTERING_EXACT_NODES`], about this many evenly strided nodes are averaged.
pub const CLUSTERING_SAMPLE: usize = 20_000;

/// Mean local clustering coefficient over the nodes `0, stride, 2·stride, …`, and their
/// number. O(Σ over those nodes of the degrees of their neighbours).
fn mean_clustering(g: &super::Graph, stride: usize) -> (f64, usize) {
    let n = g.n_nodes();
    let mut mark = vec![usize::MAX; n];
    let (mut sum, mut count) = (0f64, 0usize);
    for i in (0..n).step_by(stride.max(1)) {
        count += 1;
        let nb = g.neighbors(i);
        let k = nb.iter().filter(|&&j| j as usize != i).count();
        if k < 2 {
            continue;
        }
        for &j in nb {
            mark[j as usize] = i;
        }
        let mut links = 0usize;
        for &j in nb {
            let j = j as usize;
            if j == i {
                continue;
            }
            links += g
                .neighbors(j)
                .iter()
                .filter(|&&l| l as usize != j && l as usize != i && mark[l as usize] == i)
                .count();
        }
        sum += links as f64 / (k * (k - 1)) as f64;
    }
    (sum / count.max(1) as f64, count)
}

impl DatasetStats {
    /// Computes the statistics.
    ///
    /// # Examples
    /// ```
    /// use sparse_gcn::graph::{stats::DatasetStats, synthetic::CitationLike};
    /// let d = CitationLike { n_nodes: 400, ..Default::default() }.generate(1).unwrap();
    /// let s = DatasetStats::compute(&d);
    /// assert_eq!(s.n_nodes, 400);
    /// assert_eq!(s.class_counts.iter().sum::<usize>(), 400);
    /// assert!(s.edge_homophily > 0.5); // the generator's classes are homophilous
    /// assert!(s.clustering > 0.02 && s.clustering_nodes == 400); // its topics close triangles
    /// ```
    pub fn compute(d: &Dataset) -> Self {
        let g = &d.graph;
        let n = g.n_nodes();
        let mut degrees: Vec<usize> = (0..n)
            .map(|i| g.neighbors(i).iter().filter(|&&j| j as usize != i).count())
            .collect();
        let (mut same, mut total) = (0usize, 0usize);
        for i in 0..n {
            for &j in g.neighbors(i) {
                let j = j as usize;
                if j != i {
                    total += 1;
                    same += usize::from(d.labels.get(i) == d.labels.get(j));
                }
            }
        }
        let degree_mean = degrees.iter().sum::<usize>() as f64 / n.max(1) as f64;
        degrees.sort_unstable();
        let at = |q: f64| -> usize {
            if degrees.is_empty() {
                return 0;
            }
            let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
            degrees[rank - 1]
        };
        let degree_median = match n {
            0 => 0.0,
            _ if n % 2 == 1 => degrees[n / 2] as f64,
            _ => (degrees[n / 2 - 1] + degrees[n / 2]) as f64 / 2.0,
        };
        let mut class_counts = vec![0usize; d.n_classes];
        for &l in &d.labels {
            if let Some(c) = class_counts.get_mut(l as usize) {
                *c += 1;
            }
        }
        let stride = if n <= CLUSTERING_EXACT_NODES {
            1
        } else {
            n.div_ceil(CLUSTERING_SAMPLE)
        };
        let (clustering, clustering_nodes) = mean_clustering(g, stride);
        let st = g.stats();
        DatasetStats {
            name: d.name.clone(),
            n_nodes: n,
            n_edges: g.n_edges(),
            directed: g.is_directed(),
            input_edges: st.input_edges,
            self_loops: st.self_loops,
            duplicates_merged: st.duplicates_merged,
            isolated_nodes: g.n_isolated(),
            degree_min: degrees.first().copied().unwrap_or(0),
            degree_median,
            degree_p99: at(0.99),
            degree_max: degrees.last().copied().unwrap_or(0),
            degree_mean,
            edge_homophily: if total == 0 {
                0.0
            } else {
                same as f64 / total as f64
            },
            clustering,
            clustering_nodes,
            in_dim: d.features.n_cols(),
            feature_nnz: d.features.nnz(),
            features_sparse: d.features.is_sparse(),
            n_classes: d.n_classes,
            class_counts,
            split: d.split.name.clone(),
            n_train: d.split.train.len(),
            n_valid: d.split.valid.len(),
            n_test: d.split.test.len(),
        }
    }
}
