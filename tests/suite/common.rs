//! Shared helpers for the integration tests: a proptest strategy for messy edge lists, random
//! CSR and dense matrices from a seeded `ChaCha8Rng`, a BTreeSet oracle for graph building and
//! an `assert_close` in the |a − b| ≤ atol + rtol·|b| form that fails on NaN.
//!
//! Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::collections::BTreeSet;

use ndarray::{Array2, ArrayView2};
use proptest::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparse_gcn::kernels::Csr;
use sparse_gcn::Scalar;

/// A seeded, portable RNG.
pub fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// An edge list on `n` nodes, as the strategy produces it.
#[derive(Debug, Clone)]
pub struct EdgeCase {
    /// Number of nodes (1..64).
    pub n: usize,
    /// The edges, with self-loops, duplicates and reversed duplicates mixed in.
    pub edges: Vec<(u32, u32)>,
}

/// Random edge lists with `n` in 1..64 and densities from near-empty to near-complete. Each case
/// deliberately includes (when the draw allows) isolated nodes (a random ~15 % of the nodes
/// touch no edge), self-loops, exact duplicates (u, v) twice and reversed duplicates (u, v) +
/// (v, u), in shuffled order.
pub fn edge_case() -> impl Strategy<Value = EdgeCase> {
    (1usize..64, 0usize..4)
        .prop_flat_map(|(n, density)| {
            let max_edges = match density {
                0 => n / 2 + 1,
                1 => 2 * n,
                2 => 6 * n,
                _ => n * n / 2 + 1,
            };
            let id = 0..n as u32;
            (
                Just(n),
                proptest::collection::vec((id.clone(), id.clone()), 0..=max_edges),
                proptest::collection::vec(proptest::bool::weighted(0.15), n),
                proptest::collection::vec(id, 0..=n / 4 + 1),
                proptest::collection::vec(
                    (any::<proptest::sample::Index>(), any::<bool>()),
                    0..=n / 2 + 2,
                ),
            )
        })
        .prop_map(|(n, mut edges, isolated, loops, dups)| {
            edges.extend(loops.iter().map(|&i| (i, i)));
            if !edges.is_empty() {
                for (ix, reversed) in dups {
                    let (u, v) = edges[ix.index(edges.len())];
                    edges.push(if reversed { (v, u) } else { (u, v) });
                }
            }
            edges.retain(|&(u, v)| !isolated[u as usize] && !isolated[v as usize]);
            (n, edges)
        })
        .prop_flat_map(|(n, edges)| (Just(n), Just(edges).prop_shuffle()))
        .prop_map(|(n, edges)| EdgeCase { n, edges })
}

/// The adjacency an edge list should produce, by the obvious sets: row `i` holds `j` iff (i, j)
/// is listed (or (j, i), when undirected).
#[derive(Debug, Clone)]
pub struct GraphOracle {
    /// Sorted unique neighbours of each node.
    pub rows: Vec<BTreeSet<u32>>,
    /// Entries stored before merging duplicates: one per edge, two per undirected non-loop edge.
    pub stored_before_merge: usize,
    /// Distinct self-loops in the input.
    pub self_loops: usize,
    /// Distinct edges: unordered pairs (self-loops once) when undirected, ordered pairs else.
    pub n_edges: usize,
}

impl GraphOracle {
    /// Builds the oracle for `n` nodes.
    pub fn new(n: usize, edges: &[(u32, u32)], undirected: bool) -> Self {
        let mut rows = vec![BTreeSet::new(); n];
        let mut stored = 0;
        let mut loops = BTreeSet::new();
        let mut distinct = BTreeSet::new();
        for &(u, v) in edges {
            rows[u as usize].insert(v);
            stored += 1;
            if undirected && u != v {
                rows[v as usize].insert(u);
                stored += 1;
            }
            if u == v {
                loops.insert(u);
            }
            distinct.insert(if undirected {
                (u.min(v), u.max(v))
            } else {
                (u, v)
            });
        }
        GraphOracle {
            rows,
            stored_before_merge: stored,
            self_loops: loops.len(),
            n_edges: distinct.len(),
        }
    }

    /// Stored entries after merging.
    pub fn nnz(&self) -> usize {
        self.rows.iter().map(BTreeSet::len).sum()
    }

    /// d̃_i: row length of Ã = A + I_R (a self-loop is never doubled).
    pub fn deg_tilde(&self, i: usize) -> usize {
        self.rows[i].len() + usize::from(!self.rows[i].contains(&(i as u32)))
    }
}

/// A random `rows × cols` CSR with values uniform in [−1, 1). Each row is empty with
/// probability `empty_frac`, otherwise it holds a uniform number of distinct sorted columns in
/// `1..=max(1, density·cols·2)` (capped at `cols`).
pub fn random_csr<F: Scalar>(
    rng: &mut ChaCha8Rng,
    rows: usize,
    cols: usize,
    density: f64,
    empty_frac: f64,
) -> Csr<F> {
    let max_len = ((density * cols as f64 * 2.0).round() as usize).clamp(1, cols.max(1));
    let lens: Vec<usize> = (0..rows)
        .map(|_| {
            if cols == 0 || rng.random::<f64>() < empty_frac {
                0
            } else {
                rng.random_range(1..=max_len).min(cols)
            }
        })
        .collect();
    csr_with_row_lengths(rng, cols, &lens)
}

/// A random `rows × cols` CSR with power-law-ish row lengths (most rows short, a few long, some
/// empty) plus one hub row (row `rows / 3`) with `hub_len` entries.
pub fn power_law_csr<F: Scalar>(
    rng: &mut ChaCha8Rng,
    rows: usize,
    cols: usize,
    hub_len: usize,
) -> Csr<F> {
    let mut lens: Vec<usize> = (0..rows)
        .map(|_| {
            let u: f64 = rng.random::<f64>();
            if u < 0.1 {
                0
            } else {
                // 4 × Pareto with exponent 1.5 (mean ≈ 12), capped.
                let len = (4.0 / (1.0 - u).powf(1.0 / 1.5)).floor() as usize;
                len.clamp(1, cols.min(400))
            }
        })
        .collect();
    if rows > 0 {
        lens[rows / 3] = hub_len.min(cols);
    }
    csr_with_row_lengths(rng, cols, &lens)
}

/// A CSR with the given row lengths, distinct sorted random columns and values in [−1, 1).
pub fn csr_with_row_lengths<F: Scalar>(
    rng: &mut ChaCha8Rng,
    cols: usize,
    lens: &[usize],
) -> Csr<F> {
    let mut indptr = Vec::with_capacity(lens.len() + 1);
    indptr.push(0usize);
    let mut indices = Vec::new();
    let mut data = Vec::new();
    for &len in lens {
        let mut row: Vec<u32> = rand::seq::index::sample(rng, cols, len)
            .into_iter()
            .map(|j| j as u32)
            .collect();
        row.sort_unstable();
        for j in row {
            indices.push(j);
            data.push(F::from_f64_lossy(rng.random::<f64>() * 2.0 - 1.0));
        }
        indptr.push(indices.len());
    }
    Csr::new((lens.len(), cols), indptr, indices, data)
}

/// A dense `rows × cols` matrix with entries uniform in [−1, 1).
pub fn random_dense<F: Scalar>(rng: &mut ChaCha8Rng, rows: usize, cols: usize) -> Array2<F> {
    Array2::from_shape_simple_fn((rows, cols), || {
        F::from_f64_lossy(rng.random::<f64>() * 2.0 - 1.0)
    })
}

/// Whether two arrays agree bit for bit (same shape, same `to_bits` everywhere).
pub fn bitwise_eq_f32(a: ArrayView2<'_, f32>, b: ArrayView2<'_, f32>) -> bool {
    a.dim() == b.dim()
        && a.iter()
            .zip(b.iter())
            .all(|(x, y)| x.to_bits() == y.to_bits())
}

/// Panics unless `a` and `b` have the same shape and |a − b| ≤ atol + rtol·|b| everywhere.
/// NaN or infinity in either array fails (`b` is the expected value).
#[track_caller]
pub fn assert_close<F: Scalar>(a: ArrayView2<'_, F>, b: ArrayView2<'_, F>, atol: f64, rtol: f64) {
    assert_eq!(a.dim(), b.dim(), "assert_close: shapes differ");
    for ((idx, &x), &y) in a.indexed_iter().zip(b.iter()) {
        let (x, y) = (x.to_f64_lossless(), y.to_f64_lossless());
        assert!(
            x.is_finite() && y.is_finite(),
            "assert_close: non-finite at {idx:?}: {x} vs {y}"
        );
        let tol = atol + rtol * y.abs();
        // `diff <= tol` is false for a NaN tolerance, so that fails too.
        assert!(
            (x - y).abs() <= tol,
            "assert_close: at {idx:?}: got {x:e}, expected {y:e}, |diff| = {:e} > {tol:e} \
             (atol {atol:e}, rtol {rtol:e})",
            (x - y).abs()
        );
    }
}

/// Scalar version of [`assert_close`].
#[track_caller]
pub fn assert_close_scalar(x: f64, y: f64, atol: f64, rtol: f64) {
    assert!(
        x.is_finite() && y.is_finite(),
        "assert_close_scalar: non-finite: {x} vs {y}"
    );
    let tol = atol + rtol * y.abs();
    assert!(
        (x - y).abs() <= tol,
        "got {x:e}, expected {y:e}, |diff| = {:e} > {tol:e}",
        (x - y).abs()
    );
}

/// A quick self-check of `assert_close` (so the helper itself can fail).
#[test]
fn assert_close_fails_on_nan_and_large_diff() {
    let a = ndarray::array![[1.0f64, 2.0]];
    assert_close(a.view(), a.view(), 0.0, 0.0);
    let nan = ndarray::array![[1.0f64, f64::NAN]];
    assert!(std::panic::catch_unwind(|| assert_close(nan.view(), a.view(), 1.0, 1.0)).is_err());
    assert!(std::panic::catch_unwind(|| assert_close(a.view(), nan.view(), 1.0, 1.0)).is_err());
    let far = ndarray::array![[1.0f64, 2.1]];
    assert!(std::panic::catch_unwind(|| assert_close(far.view(), a.view(), 0.05, 0.0)).is_err());
    assert_close(far.view(), a.view(), 0.0, 0.051);
}

/// Every number of a training run, as bits: per epoch (train loss, train accuracy, validation
/// loss, validation accuracy), then (best epoch, validation accuracy, test loss, test accuracy).
pub fn run_bits(r: &sparse_gcn::train::RunResult) -> Vec<[u64; 4]> {
    let mut out: Vec<[u64; 4]> = r
        .history
        .iter()
        .map(|e| [e.train_loss, e.train_acc, e.val_loss, e.val_acc].map(f64::to_bits))
        .collect();
    out.push([
        r.best_epoch as u64,
        r.val_acc.to_bits(),
        r.test_loss.to_bits(),
        r.test_acc.to_bits(),
    ]);
    out
}
