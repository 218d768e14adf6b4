//! The mean local clustering coefficient that `sparse-gcn info` prints (and the README quotes:
//! 0.24 for Cora, 0.14 for CiteSeer, 0.08 for the `cora-like` preset), against a naive
//! set-based oracle (every pair of neighbours looked up), and on the real Planetoid graphs
//! against networkx's `average_clustering` (the figures below were computed with networkx
//! 3.6.1 on `$SPARSE_GCN_DATA/{cora,citeseer}/raw/edge.csv.gz`, self-loops dropped).
//! The hand-checkable graphs are unit tests in `src/graph/stats.rs`.

use std::collections::BTreeSet;
use std::path::Path;

use sparse_gcn::data::io::{load_ogb, OgbOptions};
use sparse_gcn::data::stats::DatasetStats;
use sparse_gcn::data::synthetic::Preset;
use sparse_gcn::graph::Graph;

/// Watts–Strogatz mean over every node, networkx's convention (degree < 2 counts 0), by
/// checking each unordered pair of neighbours in a set.
fn oracle(g: &Graph) -> f64 {
    let n = g.n_nodes();
    let sets: Vec<BTreeSet<u32>> = (0..n)
        .map(|i| {
            g.neighbors(i)
                .iter()
                .copied()
                .filter(|&j| j as usize != i)
                .collect()
        })
        .collect();
    let mut sum = 0.0;
    for s in &sets {
        let nb: Vec<u32> = s.iter().copied().collect();
        let k = nb.len();
        if k < 2 {
            continue;
        }
        let mut t = 0usize;
        for a in 0..k {
            for b in a + 1..k {
                t += usize::from(sets[nb[a] as usize].contains(&nb[b]));
            }
        }
        sum += 2.0 * t as f64 / (k * (k - 1)) as f64;
    }
    sum / n.max(1) as f64
}

#[test]
fn cora_like_preset_matches_the_oracle_and_the_readme() {
    let d = Preset::CoraLike.generate(0).unwrap();
    let s = DatasetStats::compute(&d);
    assert_eq!(s.clustering_nodes, d.graph.n_nodes());
    let want = oracle(&d.graph);
    assert!(
        (s.clustering - want).abs() < 1e-12,
        "{} vs {want}",
        s.clustering
    );
    // README: "a mean clustering coefficient of 0.08 for `--preset cora-like`".
    assert_eq!(format!("{:.2}", s.clustering), "0.08", "{}", s.clustering);
}

#[test]
fn real_planetoid_clustering_matches_networkx() {
    let Some(root) = std::env::var_os("SPARSE_GCN_DATA") else {
        println!("skipped: SPARSE_GCN_DATA is not set");
        return;
    };
    let root = Path::new(&root);
    // networkx.average_clustering of the undirected simple graph.
    for (name, networkx, readme) in [
        ("cora", 0.240_673_298_501_937_28, "0.24"),
        ("citeseer", 0.141_471_024_426_290_86, "0.14"),
    ] {
        let d = load_ogb(root.join(name), &OgbOptions::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let s = DatasetStats::compute(&d);
        assert_eq!(s.clustering_nodes, d.graph.n_nodes(), "{name}");
        let want = oracle(&d.graph);
        assert!(
            (s.clustering - want).abs() < 1e-12,
            "{name}: {} vs oracle {want}",
            s.clustering
        );
        assert!(
            (s.clustering - networkx).abs() < 1e-12,
            "{name}: {} vs networkx {networkx}",
            s.clustering
        );
        assert_eq!(format!("{:.2}", s.clustering), readme, "{name}");
    }
}
