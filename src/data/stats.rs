//! [`DatasetStats`]: what `sparse-gcn info` prints about a dataset.

use serde::Serialize;

use super::{Dataset, UNLABELLED};

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
    /// Fraction of edges (self-loops excluded, and edges with an unlabelled endpoint) whose
    /// endpoints share a label; `None` without such edges (a structure-only graph).
    pub edge_homophily: Option<f64>,
    /// Nodes with a label.
    pub labelled_nodes: usize,
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
fn mean_clustering(g: &crate::graph::Graph, stride: usize) -> (f64, usize) {
    let n = g.n_nodes();
    let mut mark = vec![usize::MAX; n];
    let (mut sum, mut count) = (0f64, 0usize);
    for i in (0..n).step_by(stride.max(1)) {
        count += 1;
        let nb = g.neighbors(i);
        let k = g.degree_excluding_self(i);
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
    /// Computes the statistics, after checking that their buffers fit in the memory available.
    ///
    /// # Errors
    /// [`crate::Error::TooLarge`].
    ///
    /// # Examples
    /// ```
    /// use sparse_gcn::data::{stats::DatasetStats, synthetic::CitationLike};
    /// let d = CitationLike { n_nodes: 400, ..Default::default() }.generate(1).unwrap();
    /// let s = DatasetStats::compute(&d);
    /// assert_eq!(s.n_nodes, 400);
    /// assert_eq!(s.class_counts.iter().sum::<usize>(), 400);
    /// assert!(s.edge_homophily.unwrap() > 0.5); // the generator's classes are homophilous
    /// assert!(s.clustering > 0.02 && s.clustering_nodes == 400); // its topics close triangles
    /// ```
    pub fn try_compute(d: &Dataset) -> crate::Result<Self> {
        let n = d.graph.n_nodes();
        // The sorted degrees and the clustering's marks: two words a node.
        super::memory::check(super::memory::bytes(n, 16), || {
            format!("the statistics of {} ({n} nodes)", d.name)
        })?;
        Ok(Self::compute(d))
    }

    /// The statistics of `d` (without the memory check of [`DatasetStats::try_compute`]).
    pub fn compute(d: &Dataset) -> Self {
        let g = &d.graph;
        let n = g.n_nodes();
        let mut degrees: Vec<usize> = (0..n).map(|i| g.degree_excluding_self(i)).collect();
        let (mut same, mut total) = (0usize, 0usize);
        for i in 0..n {
            for &j in g.neighbors(i) {
                let j = j as usize;
                let (li, lj) = (d.labels.get(i), d.labels.get(j));
                let unlabelled = |l: Option<&u32>| l.is_none_or(|&l| l == UNLABELLED);
                if j != i && !unlabelled(li) && !unlabelled(lj) {
                    total += 1;
                    same += usize::from(li == lj);
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
            edge_homophily: (total > 0).then(|| same as f64 / total as f64),
            labelled_nodes: d.labels.iter().filter(|&&l| l != UNLABELLED).count(),
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

#[cfg(test)]
mod tests {
    use super::{mean_clustering, DatasetStats};
    use crate::data::{Dataset, Features, Mask, Split};
    use crate::graph::{Direction, Graph};

    fn undirected(n: usize, edges: &[(u32, u32)]) -> Graph {
        Graph::try_from_edges(n, edges, Direction::Undirected).unwrap()
    }

    /// The mean over every node (stride 1); also checks the node count.
    fn mean_cc(g: &Graph) -> f64 {
        let (c, nodes) = mean_clustering(g, 1);
        assert_eq!(nodes, g.n_nodes());
        c
    }

    #[track_caller]
    fn assert_eq_f64(got: f64, want: f64) {
        assert!((got - want).abs() < 1e-15, "got {got}, want {want}");
    }

    #[test]
    fn triangle_and_complete_graph_have_clustering_one() {
        assert_eq_f64(mean_cc(&undirected(3, &[(0, 1), (1, 2), (2, 0)])), 1.0);
        // K4: every node has 3 neighbours, all 3 pairs of which are linked.
        let k4 = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)];
        assert_eq_f64(mean_cc(&undirected(4, &k4)), 1.0);
        // Duplicates and reversed duplicates change nothing.
        assert_eq_f64(
            mean_cc(&undirected(3, &[(0, 1), (1, 0), (1, 2), (2, 0), (0, 2)])),
            1.0,
        );
    }

    #[test]
    fn star_and_path_have_clustering_zero() {
        // Star: the centre's 3 neighbours share no edge (0/3); leaves have degree 1.
        assert_eq_f64(mean_cc(&undirected(4, &[(0, 1), (0, 2), (0, 3)])), 0.0);
        // Path 0–1–2–3: inner nodes have 2 unlinked neighbours, end nodes degree 1.
        assert_eq_f64(mean_cc(&undirected(4, &[(0, 1), (1, 2), (2, 3)])), 0.0);
    }

    #[test]
    fn triangle_with_a_pendant_node() {
        // Triangle 0–1–2 and node 3 hanging off node 0.
        // Node 0: neighbours {1, 2, 3}, 1 of their 3 pairs linked (1–2): C₀ = 1/3.
        // Nodes 1, 2: neighbours {0, 2} / {0, 1}, linked: C = 1.
        // Node 3: one neighbour: C₃ = 0 (degree < 2).
        // Mean = (1/3 + 1 + 1 + 0)/4 = 7/12.
        let g = undirected(4, &[(0, 1), (1, 2), (2, 0), (0, 3)]);
        assert_eq_f64(mean_cc(&g), 7.0 / 12.0);
        // Every second node (0 and 2): (1/3 + 1)/2 = 2/3.
        let (c, nodes) = mean_clustering(&g, 2);
        assert_eq!(nodes, 2);
        assert_eq_f64(c, 2.0 / 3.0);
        // Stride 3: nodes 0 and 3: (1/3 + 0)/2 = 1/6.
        let (c, nodes) = mean_clustering(&g, 3);
        assert_eq!(nodes, 2);
        assert_eq_f64(c, 1.0 / 6.0);
    }

    #[test]
    fn nodes_of_degree_below_two_count_zero_in_the_mean() {
        // networkx's `average_clustering` convention: a node with fewer than two neighbours
        // has C = 0 and is still averaged over. Triangle 0–1–2 plus isolated node 3:
        // (1 + 1 + 1 + 0)/4 = 3/4 (not 1, which leaving node 3 out would give).
        assert_eq_f64(mean_cc(&undirected(4, &[(0, 1), (1, 2), (2, 0)])), 0.75);
        // Self-loops are not neighbours: a self-loop on the isolated node and on a triangle
        // vertex changes nothing (node 3 still has degree 0; node 0 still C = 1).
        let g = undirected(4, &[(0, 1), (1, 2), (2, 0), (3, 3), (0, 0)]);
        assert_eq_f64(mean_cc(&g), 0.75);
        // A node with a self-loop and one neighbour has degree 1: C = 0 (not 1/(1·0)).
        assert_eq_f64(mean_cc(&undirected(2, &[(0, 0), (0, 1)])), 0.0);
        // Only isolated nodes: 0; an empty graph: 0 (no division by zero).
        assert_eq_f64(mean_cc(&undirected(3, &[])), 0.0);
        let (c, nodes) = mean_clustering(&undirected(0, &[]), 1);
        assert_eq!((c, nodes), (0.0, 0));
    }

    #[test]
    fn directed_graphs_use_out_neighbours() {
        // 0→1, 0→2, 1→2: node 0's out-neighbours {1, 2}; of the ordered pairs (1, 2), (2, 1)
        // only 1→2 is stored, so C₀ = 1/(2·1) = 1/2; nodes 1, 2 have out-degree ≤ 1.
        let g = Graph::try_from_edges(3, &[(0, 1), (0, 2), (1, 2)], Direction::Directed).unwrap();
        assert_eq_f64(mean_cc(&g), 0.5 / 3.0);
    }

    #[test]
    fn dataset_stats_report_the_mean_over_every_node() {
        let n = 5;
        // Triangle with a pendant (7/12 over its 4 nodes) plus isolated node 4:
        // (1/3 + 1 + 1 + 0 + 0)/5 = 7/15.
        let graph = undirected(n, &[(0, 1), (1, 2), (2, 0), (0, 3)]);
        let mask = |v: Vec<u32>| Mask::try_from_indices(v, n).unwrap();
        let d = Dataset::try_new(
            "pendant".into(),
            graph,
            Features::dense(ndarray::Array2::zeros((n, 1))),
            vec![0, 1, 0, 1, 0],
            2,
            Split {
                name: "s".into(),
                train: mask(vec![0, 1]),
                valid: mask(vec![2]),
                test: mask(vec![3, 4]),
            },
        )
        .unwrap();
        let s = DatasetStats::compute(&d);
        assert_eq!(s.clustering_nodes, 5);
        assert_eq_f64(s.clustering, 7.0 / 15.0);
        assert_eq!(s.isolated_nodes, 1);
    }
}
