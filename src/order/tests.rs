//! Tests of the orders, the cache model and the permutations.

use ndarray::Array2;
use rand::RngExt;

use crate::kernels::Csr;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::cache::*;
use super::community::coarsen::*;
use super::community::sweep::*;
use super::community::*;
use super::*;
use crate::data::synthetic::{CitationLike, FeatureKind};
use crate::graph::permutation::ids;
use crate::graph::{Direction, Norm, NormAdj};
use crate::kernels::spmm;
use crate::Par;

const ALL: [Reorder; 7] = [
    Reorder::None,
    Reorder::Random(7),
    Reorder::Degree,
    Reorder::Rcm,
    Reorder::Bfs,
    Reorder::Community,
    Reorder::Metis,
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
    // Names in any case.
    assert_eq!(
        "Community".parse::<Reorder>().unwrap().to_string(),
        "community"
    );
    for bad in ["", "metis:4", "random:", "random:x", "Communities"] {
        assert!(matches!(
            bad.parse::<Reorder>(),
            Err(ConfigError::UnknownName { .. })
        ));
    }
}

/// Orders read the structure only: their signatures take no labels or features.
#[test]
fn orders_take_no_labels() {
    let _: fn(&Graph, Reorder) -> crate::Result<Permutation> = order;
    let _: fn(&Graph, &CommunityConfig) -> Permutation = community_order;
    let _: fn(&Graph, &CommunityConfig) -> Vec<u32> = label_propagation;
}

/// METIS's random state is global: calls from several threads at once must still each give
/// the partition of a call alone (they race without the lock in `metis_order`).
#[cfg(feature = "metis")]
#[test]
fn metis_from_several_threads_at_once_gives_the_partition_of_one_call() {
    let g = random_graph(300, 900, Direction::Undirected, 1200);
    let alone = order(&g, Reorder::Metis).unwrap();
    std::thread::scope(|s| {
        let runs: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    (0..25)
                        .map(|_| order(&g, Reorder::Metis).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for r in runs {
            for p in r.join().unwrap() {
                assert_eq!(p, alone);
            }
        }
    });
}

#[test]
fn every_order_is_a_deterministic_permutation() {
    for dir in [Direction::Undirected, Direction::Directed] {
        for (n, m) in [(0, 0), (1, 0), (1, 1), (7, 3), (300, 900), (300, 100)] {
            let g = random_graph(n, m, dir, n as u64 + m as u64);
            for how in ALL {
                let p = order(&g, how).unwrap();
                assert_eq!(p.len(), n, "{how}");
                assert!(
                    Permutation::try_from_new_to_old(p.new_to_old().to_vec()).is_ok(),
                    "{how} on n = {n}, m = {m}"
                );
                assert_eq!(order(&g, how).unwrap(), p, "{how} is not deterministic");
            }
        }
    }
}

#[test]
fn permute_graph_matches_relabelled_edges_and_inverts() {
    for dir in [Direction::Undirected, Direction::Directed] {
        let g = random_graph(200, 700, dir, 11);
        for how in ALL {
            let p = order(&g, how).unwrap();
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
            let p = order(&g, how).unwrap();
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
fn planted(blocks: usize, size: usize, k_in: usize, k_out: usize, seed: u64) -> (Graph, Vec<u32>) {
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
        let p = order(&g, Reorder::Community).unwrap();
        let c = contiguity(&p, &block, blocks, size);
        assert!(c.iter().all(|&x| x >= 0.9), "seed {seed}: {c:?}");
    }
    let (g, block) = planted(blocks, size, 12, 2, 3);
    let p = order(&g, Reorder::Community).unwrap();
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
    let comm = permute_graph(&g, &order(&g, Reorder::Community).unwrap());
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
            let p = order(&r, how).unwrap();
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
    assert!(order(&g, Reorder::Auto).unwrap().is_identity());
    // Above the cache: planted blocks in a random order get the community order ...
    let (blocks, size) = (150, 500);
    assert!(blocks * size > AUTO_CACHE_ROWS);
    let (g, block) = planted(blocks, size, 10, 2, 5);
    let (p, how) = auto_order(&g);
    assert_eq!(how, Reorder::Community);
    assert_eq!(p, community_order(&g, &CommunityConfig::default()));
    // The graph auto hands over is the relabelled one, and applying with it is `apply`.
    let (pg, howg, hg) = auto_order_with_graph(&g);
    assert!(pg == p && howg == how);
    let hg = hg.expect("the community order's graph");
    assert_eq!(hg, permute_graph(&g, &p));
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
        let b = bandwidth(&permute_graph(&g, &order(&g, how).unwrap()));
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
        let p = order(&d.graph, Reorder::Community).unwrap();
        let e = apply(&d, &p).unwrap();
        e.validate().unwrap();
        // The same consuming the dataset, with the relabelled graph handed over (as auto
        // does) or not (features relabelled in place, dense or sparse).
        let g = permute_graph(&d.graph, &p);
        for f in [
            apply_owned(d.clone(), &p, Some(g)).unwrap(),
            apply_owned(d.clone(), &p, None).unwrap(),
        ] {
            assert_eq!(f.graph, e.graph);
            assert_eq!(f.labels, e.labels);
            assert_eq!(f.features.to_dense(), e.features.to_dense());
            assert_eq!(f.features.is_sparse(), e.features.is_sparse());
            assert_eq!(f.split.train.indices(), e.split.train.indices());
            assert_eq!(f.split.valid.indices(), e.split.valid.indices());
            assert_eq!(f.split.test.indices(), e.split.test.indices());
        }
        let small = crate::graph::Graph::try_from_edges(3, &[], Direction::Undirected).unwrap();
        assert!(apply_owned(d.clone(), &p, Some(small)).is_err());
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
        if let (Some(a), Some(b)) = (back.features.as_sparse(), d.features.as_sparse()) {
            assert_eq!(a.x_t().to_dense(), b.x_t().to_dense());
        }
    }
}

/// METIS's order cuts a shuffled grid into contiguous row ranges with a small halo, for any
/// rank count up to its parts, where a random order's halo is most of the graph.
#[test]
fn metis_ranges_have_small_halos() {
    let side = 256usize;
    let n = side * side;
    let mut edges = Vec::new();
    for r in 0..side {
        for c in 0..side {
            let i = (r * side + c) as u32;
            if c + 1 < side {
                edges.push((i, i + 1));
            }
            if r + 1 < side {
                edges.push((i, i + side as u32));
            }
        }
    }
    let grid = Graph::try_from_edges(n, &edges, Direction::Undirected).unwrap();
    let shuffled = permute_graph(&grid, &Permutation::random(n, 3));
    assert_eq!(crate::order::metis::metis_parts(n), 64);
    let halo = |g: &Graph, ranks: usize| {
        let ip = crate::graph::adj_indptr(g);
        let a = crate::graph::NormAdj::<f32>::new(g, crate::graph::Norm::Symmetric);
        let part = crate::dist::RowPartition::of_graph(&ip, ranks).unwrap();
        part.stats(&ip, a.a().indices())
            .iter()
            .map(|s| s.halo_rows)
            .max()
            .unwrap()
    };
    let metis = permute_graph(&shuffled, &order(&shuffled, Reorder::Metis).unwrap());
    for ranks in [2, 4, 8] {
        let (m, r) = (halo(&metis, ranks), halo(&shuffled, ranks));
        // A grid's cut is about a side per boundary, plus the rows of the part the reduction
        // grid's cut (1,024 rows) splits; a random order's halo is most of the other rows.
        assert!(m <= n / 16, "P = {ranks}: METIS halo {m}");
        assert!(r > n / 3, "P = {ranks}: random halo {r}");
    }
}

#[test]
fn sampled_cache_model_is_the_whole_model_at_one_and_close_at_eight() {
    let g = random_graph(40_000, 200_000, Direction::Undirected, 3);
    let p = Permutation::random(g.n_nodes(), 2);
    for rows in [512, 4096, 20_000] {
        let whole = cache_miss_model(&g, rows);
        assert_eq!(cache_miss_model_sampled(&g, None, rows, 1), whole);
        let s = cache_miss_model_sampled(&g, None, rows, 8);
        assert!(
            (s - whole).abs() < 0.02 * whole.max(0.05),
            "{rows}: {s} vs {whole}"
        );
        let whole_p = cache_miss_model_permuted(&g, &p, rows);
        assert_eq!(cache_miss_model_sampled(&g, Some(&p), rows, 1), whole_p);
        let s = cache_miss_model_sampled(&g, Some(&p), rows, 8);
        assert!(
            (s - whole_p).abs() < 0.02 * whole_p.max(0.05),
            "{rows}: {s} vs {whole_p}"
        );
    }
}

mod community;
