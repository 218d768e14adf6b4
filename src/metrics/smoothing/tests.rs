//! Tests of the smoothing metrics: brute-force O(n²) oracles (dense cosine and distance
//! matrices, the dense trace and the pairwise form of the Dirichlet energy) against every metric
//! on random graphs, the smooth and degenerate cases, f32 against f64, several blocks, the Jacobi
//! spectrum and the numerical rank of known-rank matrices, and thread-count independence.

use super::rank::jacobi_eigenvalues;
use super::*;
use crate::graph::{Direction, Graph, Norm, NormAdj};
use crate::kernels::spmm;
use crate::Par;
use ndarray::{array, Array2};
use rand::RngExt;

// ---- brute-force O(n²) oracles ----

fn cos_oracle(h: &Array2<f64>, i: usize, j: usize) -> f64 {
    let (a, b) = (h.row(i), h.row(j));
    let (na, nb) = (a.dot(&a).sqrt(), b.dot(&b).sqrt());
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        a.dot(&b) / (na * nb)
    }
}

fn mean_cosine_oracle(h: &Array2<f64>) -> f64 {
    let n = h.nrows();
    let mut s = 0.0;
    for i in 0..n {
        for j in 0..n {
            if i != j {
                s += cos_oracle(h, i, j);
            }
        }
    }
    s / (n * (n - 1)) as f64
}

fn mad_global_oracle(h: &Array2<f64>) -> f64 {
    let n = h.nrows();
    let mut s = 0.0;
    for i in 0..n {
        for j in 0..n {
            if i != j {
                s += 1.0 - cos_oracle(h, i, j);
            }
        }
    }
    s / (n * (n - 1)) as f64
}

/// The paper's MAD with a dense n×n distance matrix and a dense neighbour mask; a
/// distance below 1e-12 counts as zero (the oracle's 1 − cos is not exact).
fn mad_neighbors_oracle(adj: &NormAdj<f64>, h: &Array2<f64>) -> f64 {
    let n = h.nrows();
    let dense = adj.a().to_dense();
    let mut dist = Array2::<f64>::zeros((n, n));
    let mut mask = Array2::<f64>::zeros((n, n));
    for i in 0..n {
        for j in 0..n {
            dist[[i, j]] = (1.0 - cos_oracle(h, i, j)).clamp(0.0, 2.0);
            if i != j && dense[[i, j]] != 0.0 {
                mask[[i, j]] = 1.0;
            }
        }
    }
    let masked = &dist * &mask;
    let mut node = vec![0.0; n];
    for i in 0..n {
        let nz = masked.row(i).iter().filter(|&&x| x > 1e-12).count();
        let s: f64 = masked.row(i).iter().filter(|&&x| x > 1e-12).sum();
        node[i] = if nz > 0 { s / nz as f64 } else { 0.0 };
    }
    let nz = node.iter().filter(|&&x| x > 0.0).count();
    if nz == 0 {
        0.0
    } else {
        node.iter().sum::<f64>() / nz as f64
    }
}

/// tr(Hᵀ(I − Â)H)/n with a dense Â.
fn dirichlet_oracle(adj: &NormAdj<f64>, h: &Array2<f64>) -> f64 {
    let n = h.nrows();
    let a = adj.a().to_dense();
    let l = Array2::<f64>::eye(n) - &a;
    let q = h.t().dot(&l).dot(h);
    q.diag().sum() / n as f64
}

/// ½Σ_ij Ã_ij‖h_i/√d̃_i − h_j/√d̃_j‖²/n from the raw graph.
fn dirichlet_pairwise_oracle(g: &Graph, h: &Array2<f64>) -> f64 {
    let n = g.n_nodes();
    let mut at = Array2::<f64>::eye(n);
    for i in 0..n {
        for &j in g.neighbors(i) {
            at[[i, j as usize]] = 1.0;
        }
    }
    let deg: Vec<f64> = (0..n).map(|i| at.row(i).sum()).collect();
    let mut e = 0.0;
    for i in 0..n {
        for j in 0..n {
            if at[[i, j]] != 0.0 {
                let diff = &h.row(i) / deg[i].sqrt() - &h.row(j) / deg[j].sqrt();
                e += at[[i, j]] * diff.dot(&diff);
            }
        }
    }
    0.5 * e / n as f64
}

/// Eigenvalues via Jacobi, sorted descending (test helper).
fn sorted_eigs(a: &Array2<f64>) -> Vec<f64> {
    let m = a.nrows();
    let mut e = jacobi_eigenvalues(a.iter().copied().collect(), m, Par::Rayon);
    e.sort_by(|x, y| y.total_cmp(x));
    e
}

// ---- fixtures ----

/// A random undirected graph on n nodes with an isolated node (n − 1) and a self-loop (0).
fn random_graph(n: usize, m: usize, rng: &mut ChaCha8Rng) -> Graph {
    let mut edges: Vec<(u32, u32)> = (0..m)
        .map(|_| {
            (
                rng.random_range(0..(n - 1) as u32),
                rng.random_range(0..(n - 1) as u32),
            )
        })
        .collect();
    edges.push((0, 0));
    Graph::try_from_edges(n, &edges, Direction::Undirected).unwrap()
}

fn random_h(n: usize, d: usize, rng: &mut ChaCha8Rng) -> Array2<f64> {
    Array2::from_shape_fn((n, d), |_| rng.random_range(-1.0..1.0))
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * (1.0 + b.abs())
}

// ---- Dirichlet energy ----

#[test]
fn dirichlet_matches_trace_and_pairwise_identity() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for trial in 0..20 {
        let n = 3 + trial % 10;
        let g = random_graph(n, 2 * n, &mut rng);
        let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
        let h = random_h(n, 1 + trial % 5, &mut rng);
        let e = dirichlet_energy(&adj, h.view(), Par::Rayon).unwrap();
        assert!(close(e, dirichlet_oracle(&adj, &h), 1e-12));
        assert!(close(e, dirichlet_pairwise_oracle(&g, &h), 1e-12));
        assert!(e >= 0.0);
        // row-normalised Â: still the trace formula
        let adj_r = NormAdj::<f64>::new(&g, Norm::Row);
        assert!(close(
            dirichlet_energy(&adj_r, h.view(), Par::Rayon).unwrap(),
            dirichlet_oracle(&adj_r, &h),
            1e-12
        ));
    }
}

#[test]
fn dirichlet_of_sqrt_degree_signal_is_zero() {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let g = random_graph(12, 20, &mut rng);
    let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
    let c = [0.7, -1.3, 2.0];
    let h = Array2::from_shape_fn((12, 3), |(i, k)| {
        let has_loop = g.neighbors(i).contains(&(i as u32));
        let deg = (g.degree(i) + usize::from(!has_loop)) as f64;
        deg.sqrt() * c[k]
    });
    assert!(dirichlet_energy(&adj, h.view(), Par::Rayon).unwrap().abs() < 1e-13);
    // whereas the constant signal is not in the null space (unless regular)
    let ones = Array2::<f64>::ones((12, 3));
    assert!(dirichlet_energy(&adj, ones.view(), Par::Rayon).unwrap() > 1e-3);
}

#[test]
fn dirichlet_never_increases_under_propagation() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let g = random_graph(40, 80, &mut rng);
    let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
    let mut h = random_h(40, 4, &mut rng);
    let mut prev = dirichlet_energy(&adj, h.view(), Par::Rayon).unwrap();
    for _ in 0..30 {
        let mut next = Array2::<f64>::zeros(h.dim());
        spmm(1.0, adj.a(), h.view(), 0.0, next.view_mut(), Par::Seq);
        h = next;
        let e = dirichlet_energy(&adj, h.view(), Par::Rayon).unwrap();
        assert!(e <= prev + 1e-14, "{e} > {prev}");
        prev = e;
    }
}

#[test]
#[should_panic(expected = "dirichlet_energy")]
fn dirichlet_panics_on_row_mismatch() {
    let g = Graph::try_from_edges(3, &[(0, 1)], Direction::Undirected).unwrap();
    let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
    dirichlet_energy(&adj, Array2::<f64>::zeros((4, 2)).view(), Par::Rayon).unwrap();
}

// ---- cosine metrics ----

#[test]
fn cosine_metrics_match_brute_force() {
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    for trial in 0..30 {
        let n = 3 + trial % 12;
        let mut h = random_h(n, 1 + trial % 6, &mut rng);
        if trial % 3 == 0 {
            h.row_mut(n / 2).fill(0.0); // a zero row
        }
        if trial % 4 == 0 && n > 3 {
            let r = h.row(0).to_owned();
            h.row_mut(1).assign(&r); // a duplicate row
            h.row_mut(2).assign(&(&r * 3.0)); // a parallel row
        }
        let g = random_graph(n, 2 * n, &mut rng);
        let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
        assert!(close(
            mean_cosine(h.view(), Par::Rayon),
            mean_cosine_oracle(&h),
            1e-12
        ));
        assert!(close(
            mad_global(h.view(), Par::Rayon),
            mad_global_oracle(&h),
            1e-12
        ));
        assert!(close(
            mad_neighbors(&adj, h.view(), Par::Rayon).unwrap(),
            mad_neighbors_oracle(&adj, &h),
            1e-12
        ));
    }
}

#[test]
fn mad_neighbors_directed_graph_matches_brute_force() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let edges: Vec<(u32, u32)> = (0..25)
        .map(|_| (rng.random_range(0..10), rng.random_range(0..10)))
        .collect();
    let g = Graph::try_from_edges(10, &edges, Direction::Directed).unwrap();
    let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
    let h = random_h(10, 3, &mut rng);
    assert!(close(
        mad_neighbors(&adj, h.view(), Par::Rayon).unwrap(),
        mad_neighbors_oracle(&adj, &h),
        1e-12
    ));
    assert!(close(
        dirichlet_energy(&adj, h.view(), Par::Rayon).unwrap(),
        dirichlet_oracle(&adj, &h),
        1e-12
    ));
}

#[test]
fn identical_rows_are_fully_smooth() {
    let g =
        Graph::try_from_edges(5, &[(0, 1), (1, 2), (2, 3), (3, 4)], Direction::Undirected).unwrap();
    let adj = NormAdj::<f32>::new(&g, Norm::Symmetric);
    let h = Array2::from_shape_fn((5, 3), |(_, k)| [0.3f32, -1.7, 0.01][k]);
    assert_eq!(mad_neighbors(&adj, h.view(), Par::Rayon).unwrap(), 0.0); // exact: identical unit rows
    assert!(mad_global(h.view(), Par::Rayon).abs() < 1e-14);
    assert!((mean_cosine(h.view(), Par::Rayon) - 1.0).abs() < 1e-14);
}

#[test]
fn parallel_rows_are_at_zero_distance() {
    // h_1 = 3·h_0 and h_2 = 0.1·h_0 in f64: exact distance 0, rounding far below 256·ε²
    let g = Graph::try_from_edges(3, &[(0, 1), (1, 2)], Direction::Undirected).unwrap();
    let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
    let r = [0.3, -1.1, 2.7, 1e-3];
    let h = Array2::from_shape_fn((3, 4), |(i, k)| [1.0, 3.0, 0.1][i] * r[k]);
    assert_eq!(mad_neighbors(&adj, h.view(), Par::Rayon).unwrap(), 0.0);
}

#[test]
fn zero_rows_have_cosine_zero() {
    // a zero row: cosine 0, distance 1, with every row (itself included)
    let h = array![[1.0f64, 0.0], [0.0, 0.0]];
    assert_eq!(mean_cosine(h.view(), Par::Rayon), 0.0);
    assert_eq!(mad_global(h.view(), Par::Rayon), 1.0);
    let g = Graph::try_from_edges(2, &[(0, 1)], Direction::Undirected).unwrap();
    let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
    assert_eq!(mad_neighbors(&adj, h.view(), Par::Rayon).unwrap(), 1.0);
    let z = Array2::<f64>::zeros((2, 2));
    assert_eq!(mean_cosine(z.view(), Par::Rayon), 0.0);
    assert_eq!(mad_neighbors(&adj, z.view(), Par::Rayon).unwrap(), 1.0);
    assert_eq!(dirichlet_energy(&adj, z.view(), Par::Rayon).unwrap(), 0.0);
}

#[test]
fn mad_neighbors_counts_only_nonzero_distances() {
    // star centre 0 with leaves 1, 2, 3; leaf 1 equals the centre, leaves 2, 3 orthogonal
    let g = Graph::try_from_edges(5, &[(0, 1), (0, 2), (0, 3)], Direction::Undirected).unwrap();
    let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
    let h = array![[1.0, 0.0], [2.0, 0.0], [0.0, 1.0], [0.0, 5.0], [1.0, 1.0]];
    // D̄_0 = (1 + 1)/2 (the zero to leaf 1 not counted), D̄_1 = 0 (not counted),
    // D̄_2 = D̄_3 = 1, node 4 isolated (not counted): MAD = 3/3
    assert_eq!(mad_neighbors(&adj, h.view(), Par::Rayon).unwrap(), 1.0);
    assert!(close(mad_neighbors_oracle(&adj, &h), 1.0, 1e-12));
}

#[test]
fn small_and_empty_inputs() {
    let one = array![[1.0f64, 2.0]];
    assert_eq!(mean_cosine(one.view(), Par::Rayon), 0.0);
    assert_eq!(mad_global(one.view(), Par::Rayon), 0.0);
    let empty = Array2::<f64>::zeros((0, 3));
    assert_eq!(mean_cosine(empty.view(), Par::Rayon), 0.0);
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    assert_eq!(
        numerical_rank(empty.view(), 10, 1e-6, &mut rng, Par::Rayon),
        0
    );
    let g = Graph::try_from_edges(0, &[], Direction::Undirected).unwrap();
    let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
    assert_eq!(
        dirichlet_energy(&adj, empty.view(), Par::Rayon).unwrap(),
        0.0
    );
    assert_eq!(mad_neighbors(&adj, empty.view(), Par::Rayon).unwrap(), 0.0);
}

#[test]
fn f32_input_agrees_with_f64() {
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    let g = random_graph(30, 60, &mut rng);
    let h = random_h(30, 5, &mut rng);
    let h32 = h.mapv(|x| x as f32);
    let h64 = h32.mapv(f64::from);
    let a32 = NormAdj::<f32>::new(&g, Norm::Symmetric);
    let a64 = NormAdj::<f64>::new(&g, Norm::Symmetric);
    let (m32, m64) = (
        layer_metrics(&a32, h32.view(), None, Par::Rayon).unwrap(),
        layer_metrics(&a64, h64.view(), None, Par::Rayon).unwrap(),
    );
    assert!(close(m32.dirichlet, m64.dirichlet, 1e-6));
    assert!(close(m32.mad_neighbors, m64.mad_neighbors, 1e-12));
    assert!(close(m32.mean_cosine, m64.mean_cosine, 1e-12));
}

#[test]
fn large_inputs_span_several_blocks() {
    // Several chunks of the reduction grid (1,024 rows each here) against the brute force.
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let n = 8 * 1024 + 37;
    assert_eq!(crate::kernels::rows::grid_rows(n), 1024);
    let g = random_graph(n, 3 * n, &mut rng);
    let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
    let h = random_h(n, 3, &mut rng).mapv(|x| x + 0.5);
    assert!(close(
        mean_cosine(h.view(), Par::Rayon),
        mean_cosine_oracle(&h),
        1e-10
    ));
    assert!(close(
        dirichlet_energy(&adj, h.view(), Par::Rayon).unwrap(),
        dirichlet_pairwise_oracle(&g, &h),
        1e-10
    ));
    assert!(close(
        mad_neighbors(&adj, h.view(), Par::Rayon).unwrap(),
        mad_neighbors_oracle(&adj, &h),
        1e-10
    ));
}

// ---- numerical rank ----

#[test]
fn jacobi_recovers_known_spectrum() {
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    for m in [1usize, 2, 3, 7, 20] {
        // Q from Gram–Schmidt of a random matrix; A = Q diag(λ) Qᵀ
        let mut q = random_h(m, m, &mut rng);
        for j in 0..m {
            for k in 0..j {
                let proj = q.column(j).dot(&q.column(k));
                let ck = q.column(k).to_owned();
                q.column_mut(j).scaled_add(-proj, &ck);
            }
            let nrm = q.column(j).dot(&q.column(j)).sqrt();
            q.column_mut(j).mapv_inplace(|x| x / nrm);
        }
        let mut lambda: Vec<f64> = (0..m).map(|k| 10.0 - 1.5 * k as f64).collect();
        let a = q
            .dot(&Array2::from_diag(&ndarray::Array1::from(lambda.clone())))
            .dot(&q.t());
        lambda.sort_by(|x, y| y.total_cmp(x));
        let got = sorted_eigs(&a);
        for (g, l) in got.iter().zip(&lambda) {
            assert!(
                (g - l).abs() < 1e-12 * 10.0 * m as f64,
                "m = {m}: {got:?} vs {lambda:?}"
            );
        }
    }
    let e = sorted_eigs(&array![[2.0, 1.0], [1.0, 2.0]]);
    assert!(
        (e[0] - 3.0).abs() < 1e-15 && (e[1] - 1.0).abs() < 1e-15,
        "{e:?}"
    );
    // odd m (a dummy player in the round-robin) and a rank-deficient matrix
    let b = random_h(9, 4, &mut rng);
    let e = sorted_eigs(&b.dot(&b.t()));
    assert!(
        e[3] > 1e-3 && e[4..].iter().all(|x| x.abs() < 1e-13),
        "{e:?}"
    );
    assert_eq!(sorted_eigs(&Array2::<f64>::zeros((3, 3))), vec![0.0; 3]);
}

#[test]
#[ignore = "timing: cargo test --release -- --ignored numerical_rank_d512"]
fn numerical_rank_d512_timing() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let h = low_rank(2000, 512, 100, &mut rng).mapv(|x| x as f32);
    let t = std::time::Instant::now();
    assert_eq!(
        numerical_rank(h.view(), 1000, RANK_REL_TOL, &mut rng, Par::Rayon),
        100
    );
    eprintln!("numerical_rank 1000×512: {:?}", t.elapsed());
}

/// n×d matrix of rank r: U (n×r) · V (r×d).
fn low_rank(n: usize, d: usize, r: usize, rng: &mut ChaCha8Rng) -> Array2<f64> {
    random_h(n, r, rng).dot(&random_h(r, d, rng))
}

#[test]
fn numerical_rank_of_known_rank_matrices() {
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    for (n, d, r) in [(200, 30, 7), (50, 8, 8), (60, 40, 1), (300, 64, 20)] {
        let h = low_rank(n, d, r, &mut rng);
        // all rows (d×d Gram), a sample bigger than d, and a sample smaller than d (s×s Gram)
        for s in [n, 2 * d, d - 1] {
            let want = r.min(s);
            let got = numerical_rank(h.view(), s, 1e-6, &mut rng, Par::Rayon);
            assert_eq!(got, want, "n={n} d={d} r={r} s={s}");
        }
        // in f32, at the layer tolerance
        let h32 = h.mapv(|x| x as f32);
        assert_eq!(
            numerical_rank(h32.view(), n, RANK_REL_TOL, &mut rng, Par::Rayon),
            r
        );
    }
    // full rank and zero
    let h = random_h(100, 12, &mut rng);
    assert_eq!(
        numerical_rank(h.view(), 100, 1e-6, &mut rng, Par::Rayon),
        12
    );
    assert_eq!(
        numerical_rank(
            Array2::<f64>::zeros((5, 4)).view(),
            5,
            1e-6,
            &mut rng,
            Par::Rayon
        ),
        0
    );
}

#[test]
fn numerical_rank_counts_singular_values_above_tolerance() {
    // diagonal singular values 1, 1e-3, 1e-5: rank depends on rel_tol
    let h = array![[1.0f64, 0.0, 0.0], [0.0, 1e-3, 0.0], [0.0, 0.0, 1e-5]];
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    assert_eq!(numerical_rank(h.view(), 3, 1e-6, &mut rng, Par::Rayon), 3);
    assert_eq!(numerical_rank(h.view(), 3, 1e-4, &mut rng, Par::Rayon), 2);
    assert_eq!(numerical_rank(h.view(), 3, 1e-2, &mut rng, Par::Rayon), 1);
}

#[test]
fn numerical_rank_sample_is_reproducible() {
    // 64 rows, each a distinct unit vector e_(i mod 16): a sample of 8 rows has rank
    // #distinct directions drawn, which depends on the sample
    let h = Array2::from_shape_fn((64, 16), |(i, k)| f64::from(u8::from(i % 16 == k)));
    let ranks: Vec<usize> = (0..20)
        .map(|seed| {
            numerical_rank(
                h.view(),
                8,
                1e-6,
                &mut ChaCha8Rng::seed_from_u64(seed),
                Par::Rayon,
            )
        })
        .collect();
    let again: Vec<usize> = (0..20)
        .map(|seed| {
            numerical_rank(
                h.view(),
                8,
                1e-6,
                &mut ChaCha8Rng::seed_from_u64(seed),
                Par::Rayon,
            )
        })
        .collect();
    assert_eq!(ranks, again);
    assert!(ranks.iter().all(|&r| (1..=8).contains(&r)));
}

// ---- layer_metrics / per_layer ----

#[test]
fn per_layer_equals_layer_metrics_for_any_thread_count() {
    let mut rng = ChaCha8Rng::seed_from_u64(10);
    let n = 1500;
    let g = random_graph(n, 4 * n, &mut rng);
    let adj = NormAdj::<f32>::new(&g, Norm::Symmetric);
    let hs: Vec<Array2<f32>> = (0..4)
        .map(|l| random_h(n, 8 + l, &mut rng).mapv(|x| x as f32))
        .collect();
    let views: Vec<ArrayView2<'_, f32>> = hs.iter().map(|h| h.view()).collect();
    let serial: Vec<LayerMetrics> = views
        .iter()
        .map(|h| layer_metrics(&adj, *h, Some((200, 3)), Par::Rayon).unwrap())
        .collect();
    for threads in [1, 3] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let par = pool.install(|| per_layer(&adj, &views, Some((200, 3)), Par::Rayon).unwrap());
        assert_eq!(par, serial, "threads = {threads}");
    }
    for (m, h) in serial.iter().zip(&hs) {
        let h64 = h.mapv(f64::from);
        assert!(close(m.mad_global, 1.0 - m.mean_cosine, 0.0));
        assert!(close(
            m.mean_cosine,
            mean_cosine(h64.view(), Par::Rayon),
            1e-12
        ));
        assert_eq!(m.rank, Some(h.ncols()));
    }
    assert!(serial.iter().all(|m| m.dirichlet > 0.0));
    let json = serde_json::to_string(&serial[0]).unwrap();
    assert!(json.contains("\"mad_neighbors\""));
}

/// The metrics of a matrix alone and through Â held whole are the same sums, bit for bit.
#[test]
fn matrix_and_propagate_forms_agree() {
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let n = 3000;
    let g = random_graph(n, 4 * n, &mut rng);
    let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
    let h = random_h(n, 5, &mut rng);
    assert_eq!(
        mean_cosine(h.view(), Par::Rayon).to_bits(),
        mean_cosine_of(&adj, h.view(), Par::Rayon).to_bits()
    );
    assert_eq!(
        mad_global(h.view(), Par::Rayon).to_bits(),
        mad_global_of(&adj, h.view(), Par::Rayon).to_bits()
    );
    let mut r1 = ChaCha8Rng::seed_from_u64(1);
    let mut r2 = ChaCha8Rng::seed_from_u64(1);
    assert_eq!(
        numerical_rank(h.view(), 100, RANK_REL_TOL, &mut r1, Par::Rayon),
        numerical_rank_of(&adj, h.view(), 100, RANK_REL_TOL, &mut r2, Par::Rayon).unwrap()
    );
    let m = layer_metrics(&adj, h.view(), Some((100, 1)), Par::Seq).unwrap();
    assert_eq!(
        m,
        layer_metrics(&adj, h.view(), Some((100, 1)), Par::Rayon).unwrap()
    );
    assert_eq!(m.mean_cosine, mean_cosine(h.view(), Par::Seq));
}
