//! The numerical rank of node representations: [`numerical_rank`] counts the singular values
//! above a relative tolerance of a row sample, from the eigenvalues of its f64 Gram matrix (a
//! parallel GEMM), which the cyclic Jacobi method in the round-robin ordering of Brent & Luk
//! finds, walking memory only along rows and independently of the thread count.

use ndarray::{Array2, ArrayView2};
use rand::Rng;
use rayon::prelude::*;

use crate::graph::{Propagate, Unsupported};
use crate::kernels::gemm;
use crate::{Par, Scalar};

/// Sweeps after which the Jacobi eigenvalue iteration stops even if not converged (it
/// converges quadratically, typically in 8–12 sweeps).
const JACOBI_MAX_SWEEPS: usize = 60;

/// Numerical rank of H estimated on a row sample: #{k : σ_k > rel_tol·σ_max}, where σ are the
/// singular values of the s×d matrix X of s = min(`sample`, n) rows drawn without replacement
/// (all rows, with no draw from `rng`, when `sample ≥ n`).
///
/// σ_k = √λ_k for the eigenvalues λ of the f64 Gram matrix, XᵀX (d×d) or, when s < d, XXᵀ
/// (s×s), which has the same non-zero eigenvalues. The eigenvalues come from the cyclic Jacobi
/// method. Rounding in G and in the eigenvalues is of order m·ε·λ_max, so singular values
/// below about √(m·ε)·σ_max (m = min(s, d); 3·10⁻⁷ at m = 512) are not reliably resolved:
/// keep `rel_tol` ≥ 10⁻⁶. H = 0 (or s = 0, or d = 0) gives 0.
///
/// # Shapes
/// `h: n×d`; any strides.
///
/// # Complexity
/// O(s·d·m) for the Gram matrix (parallel GEMM) plus O(m³) per Jacobi sweep (about 10
/// sweeps), m = min(s, d); O(s·d + m²) extra memory. Meant for d up to ~512.
///
/// # Examples
/// ```
/// use sparse_gcn::Par;
/// use ndarray::array;
/// use rand::SeedableRng;
/// use sparse_gcn::metrics::smoothing::numerical_rank;
/// // row 3 = row 0 + row 2, row 1 = 2·row 0
/// let h = array![[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 0.0], [1.0, 3.0, 3.0]];
/// let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
/// assert_eq!(numerical_rank(h.view(), 100, 1e-6, &mut rng, Par::Rayon), 2);
/// ```
pub fn numerical_rank<F: Scalar, R: Rng + ?Sized>(
    h: ArrayView2<'_, F>,
    sample: usize,
    rel_tol: f64,
    rng: &mut R,
    par: Par,
) -> usize {
    let (n, d) = h.dim();
    let Some(rows) = sample_rows(n, d, sample, rng) else {
        return 0;
    };
    let x = Array2::from_shape_fn((rows.len(), d), |(a, k)| h[[rows[a], k]].to_f64_lossless());
    rank_of(x, rel_tol, par)
}

/// [`numerical_rank`] of a node-indexed H held in parts (this process's rows of every node's
/// H): the sample is drawn over every node (the same draw on every process) and its rows
/// gathered ([`Propagate::gather_rows`]), so the result is [`numerical_rank`]'s of the whole
/// H with the same `rng`, on every process.
///
/// # Errors
/// [`Unsupported`] when `adj` cannot gather rows ([`Caps::neighbours`](crate::graph::Caps)).
///
/// # Panics
/// If `h.nrows()` is not Â's row count.
pub(crate) fn numerical_rank_of<F: Scalar, P: Propagate<F> + ?Sized, R: Rng + ?Sized>(
    adj: &P,
    h: ArrayView2<'_, F>,
    sample: usize,
    rel_tol: f64,
    rng: &mut R,
    par: Par,
) -> Result<usize, Unsupported> {
    assert_eq!(h.nrows(), adj.shape().0, "numerical_rank_of: h's rows");
    let Some(rows) = sample_rows(adj.rows().total, h.ncols(), sample, rng) else {
        return Ok(0);
    };
    Ok(rank_of(adj.gather_rows(h, &rows)?, rel_tol, par))
}

/// The sorted rows of a sample of min(`sample`, n) of n (all, without a draw, when the sample
/// covers them); `None` when the rank is 0 without looking (no rows or no columns).
fn sample_rows<R: Rng + ?Sized>(
    n: usize,
    d: usize,
    sample: usize,
    rng: &mut R,
) -> Option<Vec<usize>> {
    let s = sample.min(n);
    if s == 0 || d == 0 {
        return None;
    }
    Some(if s == n {
        (0..n).collect()
    } else {
        let mut v = rand::seq::index::sample(rng, n, s).into_vec();
        v.sort_unstable(); // the Gram matrix then depends on the set only
        v
    })
}

/// The numerical rank of the sample `x` (s × d, f64).
fn rank_of(x: Array2<f64>, rel_tol: f64, par: Par) -> usize {
    let (s, d) = x.dim();
    let m = s.min(d);
    let mut g = Array2::<f64>::zeros((m, m));
    if s < d {
        gemm(1.0, x.view(), x.t(), 0.0, g.view_mut(), par);
    } else {
        gemm(1.0, x.t(), x.view(), 0.0, g.view_mut(), par);
    }
    let lambda = jacobi_eigenvalues(g.into_raw_vec_and_offset().0, m, par);
    let sigma: Vec<f64> = lambda.iter().map(|&l| l.max(0.0).sqrt()).collect();
    let smax = sigma.iter().copied().fold(0.0f64, f64::max);
    if smax <= 0.0 {
        return 0; // `fold(f64::max)` ignores NaN, so smax is never NaN
    }
    let cut = rel_tol * smax;
    sigma.iter().filter(|&&x| x > cut).count()
}

/// Eigenvalues (unsorted) of the symmetric m×m matrix `a` (row-major, both triangles), by
/// the cyclic Jacobi method in the round-robin ("parallel") ordering of Brent & Luk (1985):
/// each sweep visits every pair (p, q) once, in m − 1 rounds (m rounded up to even) of m/2
/// disjoint pairs. A round computes the m/2 rotations from the current matrix (Golub & Van
/// Loan, Alg. 8.5.1), applies them to the rows (A ← JᵀA, pairs of contiguous rows) and then
/// to the columns (A ← AJ, row by row, in parallel over rows), and sets the rotated a_pq to 0.
/// Memory is only ever walked along rows, and the result does not depend on thread count.
///
/// A rotation is skipped when |a_pq| ≤ ε·‖A‖_F; iteration stops when a sweep rotates nothing,
/// when the off-diagonal norm is ≤ ε·‖A‖_F, or after [`JACOBI_MAX_SWEEPS`] sweeps. What is
/// left off the diagonal then has Frobenius norm ≤ m·ε·‖A‖_F, which bounds the eigenvalue error.
pub(super) fn jacobi_eigenvalues(mut a: Vec<f64>, m: usize, par: Par) -> Vec<f64> {
    debug_assert_eq!(a.len(), m * m);
    let diag = |a: &[f64]| (0..m).map(|i| a[i * m + i]).collect::<Vec<f64>>();
    let frob = a.iter().map(|x| x * x).sum::<f64>().sqrt();
    if frob == 0.0 || !frob.is_finite() || m < 2 {
        return diag(&a);
    }
    let tol = f64::EPSILON * frob;
    let players = m + m % 2;
    // (p, q, c, s) of the rotations of one round
    let mut rot: Vec<(usize, usize, f64, f64)> = Vec::with_capacity(players / 2);
    for _ in 0..JACOBI_MAX_SWEEPS {
        let mut off2 = 0.0f64;
        for p in 0..m {
            for q in p + 1..m {
                off2 += 2.0 * a[p * m + q] * a[p * m + q];
            }
        }
        if off2.sqrt() <= tol || off2.is_nan() {
            break;
        }
        let mut rotated = false;
        for round in 0..players - 1 {
            rot.clear();
            for i in 0..players / 2 {
                // circle method: player `players − 1` fixed, the others turn
                let (x, y) = if i == 0 {
                    (round, players - 1)
                } else {
                    let k = players - 1;
                    ((round + i) % k, (round + k - i) % k)
                };
                let (p, q) = (x.min(y), x.max(y));
                if q >= m {
                    continue; // the dummy player of an odd m
                }
                let apq = a[p * m + q];
                if apq.abs() <= tol {
                    continue;
                }
                let (app, aqq) = (a[p * m + p], a[q * m + q]);
                let tau = (aqq - app) / (2.0 * apq);
                let t = if tau >= 0.0 {
                    1.0 / (tau + tau.hypot(1.0))
                } else {
                    -1.0 / (-tau + tau.hypot(1.0))
                };
                let c = 1.0 / t.hypot(1.0);
                rot.push((p, q, c, t * c));
            }
            if rot.is_empty() {
                continue;
            }
            rotated = true;
            // A ← JᵀA: rows p, q ← (c·row_p − s·row_q, s·row_p + c·row_q)
            for &(p, q, c, s) in &rot {
                let (head, tail) = a.split_at_mut(q * m);
                let rp = &mut head[p * m..(p + 1) * m];
                let rq = &mut tail[..m];
                for (x, y) in rp.iter_mut().zip(rq.iter_mut()) {
                    let (xp, xq) = (*x, *y);
                    *x = c * xp - s * xq;
                    *y = s * xp + c * xq;
                }
            }
            // A ← AJ: in every row, entries p, q ← (c·a_p − s·a_q, s·a_p + c·a_q)
            let rotate = |row: &mut [f64]| {
                for &(p, q, c, s) in &rot {
                    let (xp, xq) = (row[p], row[q]);
                    row[p] = c * xp - s * xq;
                    row[q] = s * xp + c * xq;
                }
            };
            match par {
                Par::Seq => a.chunks_mut(m).for_each(rotate),
                Par::Rayon => a.par_chunks_mut(m).with_min_len(64).for_each(rotate),
            }
            for &(p, q, _, _) in &rot {
                a[p * m + q] = 0.0;
                a[q * m + p] = 0.0;
            }
        }
        if !rotated {
            break;
        }
    }
    diag(&a)
}
