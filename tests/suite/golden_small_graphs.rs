//! Golden tests on hand-checkable graphs (STYLE.md §3.7 (c)): Â written out as exact fractions,
//! the eigenvector D̃^{1/2}·1 of the symmetric normalisation, duplicate merging and the
//! out-of-range error.

use crate::common;

use common::{assert_close, rng};
use ndarray::Array2;
use rand::RngExt;
use sparse_gcn::graph::{Direction, Graph, Norm, NormAdj};
use sparse_gcn::kernels::spmm;
use sparse_gcn::{Error, Par};

const TOL: f64 = 1e-15;

fn undirected(n: usize, edges: &[(u32, u32)]) -> Graph {
    Graph::try_from_edges(n, edges, Direction::Undirected).unwrap()
}

/// Â as a dense matrix, with `None` for absent entries.
fn entries(adj: &NormAdj<f64>) -> Vec<Vec<Option<f64>>> {
    let n = adj.n_nodes();
    (0..n)
        .map(|i| (0..n).map(|j| adj.a().get(i, j).copied()).collect())
        .collect()
}

/// Checks every entry of Â (present/absent and value to 1e-15) and that nothing is NaN/inf.
#[track_caller]
fn check_entries(adj: &NormAdj<f64>, expected: &[&[Option<f64>]]) {
    let got = entries(adj);
    assert_eq!(got.len(), expected.len());
    for (i, (g_row, e_row)) in got.iter().zip(expected).enumerate() {
        for (j, (g, e)) in g_row.iter().zip(e_row.iter()).enumerate() {
            match (g, e) {
                (Some(g), Some(e)) => assert!(
                    g.is_finite() && (g - e).abs() <= TOL,
                    "Â[{i},{j}] = {g:e}, expected {e:e}"
                ),
                (None, None) => {}
                _ => panic!("Â[{i},{j}]: got {g:?}, expected {e:?}"),
            }
        }
    }
    let nnz = expected
        .iter()
        .flat_map(|r| r.iter())
        .filter(|e| e.is_some())
        .count();
    assert_eq!(adj.nnz(), nnz);
}

#[test]
fn path_p3_symmetric() {
    // 0 – 1 – 2 with self-loops: d̃ = (2, 3, 2).
    // Â_00 = Â_22 = 1/2, Â_11 = 1/3, Â_01 = Â_10 = Â_12 = Â_21 = 1/√(2·3) = 1/√6, Â_02 absent.
    let g = undirected(3, &[(0, 1), (1, 2)]);
    let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
    let h = 0.5;
    let t = 1.0 / 3.0;
    let s6 = 1.0 / 6f64.sqrt();
    check_entries(
        &adj,
        &[
            &[Some(h), Some(s6), None],
            &[Some(s6), Some(t), Some(s6)],
            &[None, Some(s6), Some(h)],
        ],
    );
    assert_eq!(adj.nnz(), 7);
    assert!(adj.is_symmetric());
    assert_eq!(adj.a().get(0, 2), None);
    assert_eq!(adj.a().get(2, 0), None);
}

#[test]
fn star_s4_symmetric() {
    // Centre 0, leaves 1, 2, 3: d̃_0 = 3 + 1 = 4, d̃_k = 1 + 1 = 2.
    // Â_00 = 1/4, Â_0k = Â_k0 = 1/√(4·2) = 1/√8, Â_kk = 1/2, leaf–leaf absent.
    let g = undirected(4, &[(0, 1), (0, 2), (3, 0)]);
    let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
    let c = 1.0 / 8f64.sqrt();
    check_entries(
        &adj,
        &[
            &[Some(0.25), Some(c), Some(c), Some(c)],
            &[Some(c), Some(0.5), None, None],
            &[Some(c), None, Some(0.5), None],
            &[Some(c), None, None, Some(0.5)],
        ],
    );
    assert_eq!(adj.nnz(), 10); // 2·3 edges + 4 self-loops
}

#[test]
fn two_isolated_nodes_give_identity() {
    // No edges: each node keeps only its added self-loop, d̃ = 1, Â = I (no 0^-1/2 = inf).
    let g = undirected(2, &[]);
    assert_eq!(g.n_isolated(), 2);
    for norm in [Norm::Symmetric, Norm::Row] {
        let adj = NormAdj::<f64>::new(&g, norm);
        assert_eq!(adj.nnz(), 2);
        assert_eq!(adj.a().data(), &[1.0, 1.0]);
        assert_eq!(adj.a().get(0, 0), Some(&1.0));
        assert_eq!(adj.a().get(1, 1), Some(&1.0));
        assert_eq!(adj.a().get(0, 1), None);
        assert!(adj.a_t().data().iter().all(|v| v.is_finite()));
        // Â·X = X exactly.
        let x = ndarray::array![[1.5, -2.0], [f64::MAX, 3.0]];
        let mut out = Array2::from_elem((2, 2), f64::NAN);
        spmm(1.0, adj.a(), x.view(), 0.0, out.view_mut(), Par::Seq);
        assert_eq!(out, x);
    }
}

#[test]
fn existing_self_loop_is_not_doubled() {
    // 0 – 1 plus a self-loop (0, 0): Ã_00 = 1 (not 2), so d̃_0 = 2 and d̃_1 = 2.
    // Â_00 = 1/2, Â_01 = Â_10 = 1/√(2·2) = 1/2, Â_11 = 1/2.
    let g = undirected(2, &[(0, 1), (0, 0)]);
    assert_eq!(g.stats().self_loops, 1);
    assert_eq!(g.n_edges(), 2);
    let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
    check_entries(&adj, &[&[Some(0.5), Some(0.5)], &[Some(0.5), Some(0.5)]]);
    // The loop given twice (and as (0,0) once more after the edge) is still one entry.
    let g2 = undirected(2, &[(0, 0), (0, 1), (0, 0)]);
    let adj2 = NormAdj::<f64>::new(&g2, Norm::Symmetric);
    check_entries(&adj2, &[&[Some(0.5), Some(0.5)], &[Some(0.5), Some(0.5)]]);
    // Row norm: Ã_00 / d̃_0 = 1/2.
    let row = NormAdj::<f64>::new(&g, Norm::Row);
    check_entries(&row, &[&[Some(0.5), Some(0.5)], &[Some(0.5), Some(0.5)]]);
}

#[test]
fn path_p3_row_norm() {
    // Â_row = D̃^-1 Ã with d̃ = (2, 3, 2): rows [1/2, 1/2, 0], [1/3, 1/3, 1/3], [0, 1/2, 1/2].
    let g = undirected(3, &[(0, 1), (1, 2)]);
    let adj = NormAdj::<f64>::new(&g, Norm::Row);
    let (h, t) = (0.5, 1.0 / 3.0);
    check_entries(
        &adj,
        &[
            &[Some(h), Some(h), None],
            &[Some(t), Some(t), Some(t)],
            &[None, Some(h), Some(h)],
        ],
    );
    // Not symmetric, so Âᵀ is stored: columns of Â.
    assert!(!adj.is_symmetric());
    let at = adj.a_t();
    assert_eq!(at.get(0, 1), Some(&t));
    assert_eq!(at.get(1, 0), Some(&h));
    assert_eq!(at.get(2, 1), Some(&t));
    assert_eq!(at.get(2, 0), None);
}

/// Â·u = u for u = D̃^{1/2}·1 (docs/MATH.md §1.1), with d̃_i = degree + 1 unless node i already
/// has a self-loop, computed here from the graph rather than from Â.
#[track_caller]
fn check_eigenvector(g: &Graph) {
    let n = g.n_nodes();
    let adj = NormAdj::<f64>::new(g, Norm::Symmetric);
    let u = Array2::from_shape_fn((n, 1), |(i, _)| {
        let has_loop = g.neighbors(i).contains(&(i as u32));
        ((g.degree(i) + usize::from(!has_loop)) as f64).sqrt()
    });
    let mut au = Array2::from_elem((n, 1), f64::NAN);
    spmm(1.0, adj.a(), u.view(), 0.0, au.view_mut(), Par::Rayon);
    assert_close(au.view(), u.view(), 1e-12, 1e-12);
    // And the row-normalised Â maps 1 to 1.
    let row = NormAdj::<f64>::new(g, Norm::Row);
    let ones = Array2::ones((n, 1));
    let mut r1 = Array2::from_elem((n, 1), f64::NAN);
    spmm(1.0, row.a(), ones.view(), 0.0, r1.view_mut(), Par::Seq);
    assert_close(r1.view(), ones.view(), 1e-12, 0.0);
}

#[test]
fn eigenvector_sqrt_degree() {
    check_eigenvector(&undirected(3, &[(0, 1), (1, 2)]));
    check_eigenvector(&undirected(4, &[(0, 1), (0, 2), (0, 3)]));
    check_eigenvector(&undirected(2, &[(0, 1), (0, 0)]));
    // A random graph on 60 nodes where nodes 50.. are isolated, with self-loops and duplicates.
    let mut r = rng(42);
    let mut edges: Vec<(u32, u32)> = (0..200)
        .map(|_| (r.random_range(0..50u32), r.random_range(0..50u32)))
        .collect();
    edges.extend([(3, 3), (7, 7), (3, 3), (10, 11), (11, 10)]);
    let g = undirected(60, &edges);
    assert!(g.n_isolated() >= 10);
    assert!(g.stats().self_loops >= 2 && g.stats().duplicates_merged >= 2);
    check_eigenvector(&g);
}

#[test]
fn duplicates_are_merged() {
    // (0,1) twice and (1,0) are one undirected edge; with (1,2) that makes 2 edges.
    // Stored before merging (each non-loop edge both ways): 4 edges · 2 = 8 entries;
    // after: row 0 {1}, row 1 {0, 2}, row 2 {1} = 4 entries, so 4 were merged.
    let g = undirected(3, &[(0, 1), (0, 1), (1, 0), (1, 2)]);
    assert_eq!(g.n_edges(), 2);
    assert_eq!(g.nnz(), 4);
    assert_eq!(g.neighbors(0), &[1]);
    assert_eq!(g.neighbors(1), &[0, 2]);
    assert_eq!(g.neighbors(2), &[1]);
    let st = g.stats();
    assert_eq!(st.input_edges, 4);
    assert_eq!(st.duplicates_merged, 4);
    assert_eq!(st.self_loops, 0);
    // Directed: (0,1) twice is one arc, (1,0) is a different arc: 3 arcs, 1 merged.
    let d =
        Graph::try_from_edges(3, &[(0, 1), (0, 1), (1, 0), (1, 2)], Direction::Directed).unwrap();
    assert_eq!(d.n_edges(), 3);
    assert_eq!(d.stats().duplicates_merged, 1);
    assert_eq!(d.neighbors(1), &[0, 2]);
    assert_eq!(d.neighbors(2), &[] as &[u32]);
}

#[test]
fn out_of_range_node_is_an_error() {
    let r = Graph::try_from_edges(3, &[(0, 1), (5, 1)], Direction::Undirected);
    assert!(
        matches!(
            r,
            Err(Error::NodeOutOfRange {
                index: 5,
                n_nodes: 3
            })
        ),
        "{r:?}"
    );
    let r = Graph::try_from_edges(3, &[(1, 2), (2, 5)], Direction::Directed);
    assert!(
        matches!(
            r,
            Err(Error::NodeOutOfRange {
                index: 5,
                n_nodes: 3
            })
        ),
        "{r:?}"
    );
    // The boundary: id n − 1 is fine, id n is not.
    assert!(Graph::try_from_edges(3, &[(2, 2)], Direction::Undirected).is_ok());
    let r = Graph::try_from_edges(3, &[(3, 0)], Direction::Undirected);
    assert!(
        matches!(
            r,
            Err(Error::NodeOutOfRange {
                index: 3,
                n_nodes: 3
            })
        ),
        "{r:?}"
    );
}

#[test]
fn empty_and_oversized_graphs() {
    // Zero nodes: an empty Â, and SpMM on it is a no-op.
    let g = undirected(0, &[]);
    assert_eq!((g.n_nodes(), g.nnz(), g.n_edges()), (0, 0, 0));
    let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
    assert_eq!((adj.n_nodes(), adj.nnz()), (0, 0));
    let x = Array2::<f64>::zeros((0, 3));
    let mut out = Array2::<f64>::zeros((0, 3));
    spmm(1.0, adj.a(), x.view(), 0.0, out.view_mut(), Par::Rayon);
    // A node count that does not fit in u32 is refused before anything is allocated.
    let r = Graph::try_from_edges(u32::MAX as usize + 1, &[], Direction::Undirected);
    assert!(matches!(r, Err(Error::Mismatch { .. })), "{r:?}");
}

#[test]
fn edges_read_in_place_build_the_same_graph() {
    // A CSR pattern with a duplicate, a self-loop and an unsorted row, read in place.
    let (indptr, indices): (&[usize], &[u32]) = (&[0, 3, 4, 6, 6], &[2, 1, 2, 0, 3, 2]);
    let csr = || {
        (0..4).flat_map(move |i| {
            indices[indptr[i]..indptr[i + 1]]
                .iter()
                .map(move |&j| (i as u32, j))
        })
    };
    let list: Vec<(u32, u32)> = csr().collect();
    for dir in [Direction::Undirected, Direction::Directed] {
        let a = Graph::try_from_edge_iter(4, csr, dir).unwrap();
        let b = Graph::try_from_edges(4, &list, dir).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.stats().input_edges, 6);
    }
    // An out-of-range id is the same error as from a list.
    let r = Graph::try_from_edge_iter(3, csr, Direction::Undirected);
    assert!(
        matches!(
            r,
            Err(Error::NodeOutOfRange {
                index: 3,
                n_nodes: 3
            })
        ),
        "{r:?}"
    );
    // A source whose second pass yields other edges (more, fewer, or another row) is refused,
    // never an index out of bounds nor an entry left unfilled.
    for second in [
        vec![(0u32, 1u32), (1, 2), (2, 0)],
        vec![(0, 1)],
        vec![(0, 1), (2, 2)],
        vec![(0, 1), (7, 1)],
    ] {
        let calls = std::cell::Cell::new(0);
        let first = vec![(0u32, 1u32), (1, 2)];
        let source = || {
            calls.set(calls.get() + 1);
            if calls.get() == 1 {
                first.clone().into_iter()
            } else {
                second.clone().into_iter()
            }
        };
        for dir in [Direction::Undirected, Direction::Directed] {
            calls.set(0);
            let r = Graph::try_from_edge_iter(3, source, dir);
            assert!(
                matches!(r, Err(Error::Mismatch { .. })),
                "{second:?} {dir:?}: {r:?}"
            );
        }
    }
}

#[test]
fn a_graph_from_its_csr_parts_is_checked() {
    let g = undirected(4, &[(0, 1), (1, 2), (2, 2), (3, 0)]);
    let parts = |g: &Graph| (g.indptr().to_vec(), g.indices().to_vec());
    let (p, i) = parts(&g);
    let back = Graph::try_from_csr(4, p.clone(), i.clone(), false, g.stats()).unwrap();
    assert_eq!(back, g);
    let mismatch = |r: sparse_gcn::Result<Graph>, what: &str| match r {
        Err(Error::Mismatch { what: w, .. }) => assert!(w.contains(what), "{w}"),
        r => panic!("{what}: {r:?}"),
    };
    let st = g.stats();
    mismatch(
        Graph::try_from_csr(u32::MAX as usize + 1, vec![], vec![], false, st),
        "node count",
    );
    mismatch(
        Graph::try_from_csr(3, p.clone(), i.clone(), false, st),
        "row offsets",
    );
    let mut q = p.clone();
    q[0] = 1;
    mismatch(
        Graph::try_from_csr(4, q, i.clone(), false, st),
        "first row offset",
    );
    let mut q = p.clone();
    q[4] -= 1;
    mismatch(
        Graph::try_from_csr(4, q, i.clone(), false, st),
        "last row offset",
    );
    let mut q = p.clone();
    q[2] = q[1] - 1; // row 1 ends before it starts
    mismatch(
        Graph::try_from_csr(4, q, i.clone(), false, st),
        "row offset",
    );
    let mut j = i.clone();
    j.swap(0, 1); // row 0 = [1, 3] → [3, 1]
    mismatch(
        Graph::try_from_csr(4, p.clone(), j, false, st),
        "strictly increasing",
    );
    let mut j = i.clone();
    j[1] = 1; // row 0 = [1, 3] → [1, 1]
    mismatch(
        Graph::try_from_csr(4, p.clone(), j, false, st),
        "strictly increasing",
    );
    let mut j = i.clone();
    j[1] = 4; // the first id out of range: n itself
    assert!(matches!(
        Graph::try_from_csr(4, p.clone(), j, false, st),
        Err(Error::NodeOutOfRange { index: 4, .. })
    ));
    let mut other = st;
    other.self_loops = 0;
    mismatch(
        Graph::try_from_csr(4, p.clone(), i.clone(), false, other),
        "self-loops",
    );
    // One way only: fine directed, refused undirected.
    let d = Graph::try_from_edges(3, &[(0, 1), (1, 2)], Direction::Directed).unwrap();
    let (p, i) = parts(&d);
    assert!(Graph::try_from_csr(3, p.clone(), i.clone(), true, d.stats()).is_ok());
    mismatch(
        Graph::try_from_csr(3, p, i, false, d.stats()),
        "(0, 1) without (1, 0)",
    );
}
