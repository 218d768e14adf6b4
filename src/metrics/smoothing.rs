//! Oversmoothing metrics of node representations H (n×d), one row h_i per node.
//!
//! None of them ever forms an n×n matrix: the graph metrics cost O(nnz·d), the global ones
//! O(n·d), the numerical rank O(s·d·min(s, d) + min(s, d)³) on a sample of s rows.
//!
//! | Metric | Definition | Smooth (collapsed) H gives |
//! |---|---|---|
//! | [`dirichlet_energy`] | tr(Hᵀ(I − Â)H)/n | 0 |
//! | [`mad_neighbors`] | MAD of Chen et al. over the edges | 0 |
//! | [`mad_global`] | 1 − mean cosine over all ordered pairs i ≠ j | 0 |
//! | [`mean_cosine`] | mean cos(h_i, h_j) over all ordered pairs i ≠ j | 1 |
//! | [`numerical_rank`] | #{σ_k > tol·σ_max} of a row sample | 1 |
//!
//! **Cosine convention.** u_i = h_i/‖h_i‖ for h_i ≠ 0 and u_i = 0 for a zero row, and
//! cos(h_i, h_j) = ⟨u_i, u_j⟩: a zero row has cosine 0 (distance 1) with every row, itself
//! included. This is scikit-learn's `cosine_distances`, which the MAD authors' code calls, and
//! it is the only convention under which [`mean_cosine`] stays exact in O(n·d).
//!
//! All sums are accumulated in f64. The parallel reductions split rows into fixed blocks of
//! [`BLOCK_ROWS`] and add the block results in order, so every result is bit-identical for any
//! number of rayon threads.

use std::ops::Range;

use ndarray::{Array2, ArrayView1, ArrayView2};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::Serialize;

use crate::graph::NormAdj;
use crate::kernels::{gemm, shape_panic};
use crate::{Par, Scalar};

/// Rows per block of the parallel reductions. Fixed, so the blocks, and the order in which
/// their partial sums are added, depend only on n.
pub const BLOCK_ROWS: usize = 1024;

/// The relative tolerance [`layer_metrics`] passes to [`numerical_rank`]: singular values
/// below 10⁻⁴·σ_max count as zero. That is above the f32 rounding noise of an f32 H
/// (≈ 10⁻⁷·√d·σ_max) and above the resolution of the f64 Gram matrix (≈ √(m·ε)·σ_max).
pub const RANK_REL_TOL: f64 = 1e-4;

/// D_ij ≤ `MAD_ZERO_ULPS`·ε_F² counts as a zero distance in [`mad_neighbors`].
const MAD_ZERO_ULPS: f64 = 256.0;

/// Sweeps after which the Jacobi eigenvalue iteration stops even if not converged (it
/// converges quadratically, typically in 8–12 sweeps).
const JACOBI_MAX_SWEEPS: usize = 60;

/// Oversmoothing metrics of one layer's representations (see [`layer_metrics`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LayerMetrics {
    /// [`dirichlet_energy`]: tr(Hᵀ(I − Â)H)/n.
    pub dirichlet: f64,
    /// [`mad_global`]: mean cosine distance over all ordered pairs i ≠ j.
    pub mad_global: f64,
    /// [`mad_neighbors`]: MAD over the graph's edges.
    pub mad_neighbors: f64,
    /// [`mean_cosine`]: mean cosine similarity over all ordered pairs i ≠ j.
    pub mean_cosine: f64,
    /// [`numerical_rank`] of a row sample at [`RANK_REL_TOL`], if a sample was asked for.
    pub rank: Option<usize>,
}

/// Dirichlet energy E(H) = tr(Hᵀ(I − Â)H)/n = (1/n)·Σ_i ⟨h_i, h_i − Σ_j Â_ij h_j⟩.
///
/// For a symmetric Â = D̃^-1/2 Ã D̃^-1/2 (an undirected graph, [`Norm::Symmetric`]) this is
///
///   E(H) = (1/2n)·Σ_ij Ã_ij ‖h_i/√d̃_i − h_j/√d̃_j‖² ≥ 0,
///
/// zero exactly when h_i = √d̃_i·c on every connected component (the null space of I − Â is
/// D̃^{1/2}·1, not 1), and at most 2‖H‖²_F/n. It never increases under H ↦ ÂH. For a
/// row-normalised or directed Â the same quadratic form is returned, but it need not be
/// non-negative. n = 0 gives 0.
///
/// Row by row, in f64, without forming ÂH.
///
/// # Shapes
/// `h: n×d` with n = `adj.n_nodes()`; any strides.
///
/// # Panics
/// If `h.nrows() != adj.n_nodes()`.
///
/// # Complexity
/// O((nnz + n)·d) time, no allocation beyond one f64 per block of [`BLOCK_ROWS`] rows.
///
/// [`Norm::Symmetric`]: crate::graph::Norm::Symmetric
///
/// # Examples
/// ```
/// use ndarray::array;
/// use sparse_gcn::graph::{Direction, Graph, Norm, NormAdj};
/// use sparse_gcn::metrics::smoothing::dirichlet_energy;
/// // one edge 0–1: d̃ = (2, 2), Â = [[½, ½], [½, ½]]
/// let g = Graph::try_from_edges(2, &[(0, 1)], Direction::Undirected).unwrap();
/// let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
/// let h = array![[1.0], [-1.0]];                       // ½·2·‖(1 − (−1))/√2‖²/2 = 1
/// assert!((dirichlet_energy(&adj, h.view()) - 1.0).abs() < 1e-15);
/// assert!(dirichlet_energy(&adj, array![[3.0], [3.0]].view()).abs() < 1e-14);
/// ```
#[track_caller]
pub fn dirichlet_energy<F: Scalar>(adj: &NormAdj<F>, h: ArrayView2<'_, F>) -> f64 {
    let n = check_rows("dirichlet_energy", adj, h);
    if n == 0 {
        return 0.0;
    }
    let a = adj.a();
    let ip = a.indptr();
    let ip = ip.raw_storage();
    let off = ip[0];
    let (idx, val) = (a.indices(), a.data());
    let total = block_sums(n, |rows| {
        let mut acc = 0.0f64;
        for i in rows {
            let hi = h.row(i);
            let mut prop = 0.0f64;
            for k in ip[i] - off..ip[i + 1] - off {
                prop += val[k].to_f64_lossless() * dot64(hi, h.row(idx[k] as usize));
            }
            acc += dot64(hi, hi) - prop;
        }
        acc
    });
    total / n as f64
}

/// MAD over the graph's edges (Chen et al., AAAI 2020, <https://arxiv.org/abs/1909.03211>),
/// with the cosine distance D_ij = 1 − cos(h_i, h_j) and the paper's rule that only
/// non-zero values are averaged:
///
///   D̄_i = Σ_{j∈N(i)} D_ij / #{j ∈ N(i) : D_ij > 0},  MAD = Σ_i D̄_i / #{i : D̄_i > 0},
///
/// where N(i) is row i of Â's pattern without the diagonal (the graph's neighbours; the
/// out-neighbours for a directed graph), and 0/0 = 0 at both levels. So a node contributes
/// only if it has a neighbour at non-zero distance, and the result is 0 when no pair of
/// neighbours is at non-zero distance (or there are no edges).
///
/// The paper's formula (its Eq. for D̄^tgt and MAD^tgt) is followed exactly; the authors'
/// released code instead takes the second mean over all target nodes (`np.mean`), which
/// counts nodes with D̄_i = 0.
///
/// "Non-zero" means above rounding: D_ij is computed as ½‖u_i − u_j‖² (= 1 − ⟨u_i, u_j⟩ for
/// unit u, without 1 − cos's cancellation), which is exactly 0 for identical rows and at most
/// a few ε² for positively parallel rows (h_j = c·h_i, c > 0) whose exact distance is 0. So
/// D_ij ≤ 256·ε_F² (ε_F the machine epsilon of `F`; 3.6·10⁻¹² for f32, 1.3·10⁻²⁹ for f64)
/// counts as zero: rows closer than an angle of ≈ 16·ε_F are taken as coincident. With a
/// zero row D_ij = 1 (see the [module docs](self)). Values are clamped to [0, 2].
///
/// # Shapes
/// `h: n×d` with n = `adj.n_nodes()`; any strides.
///
/// # Panics
/// If `h.nrows() != adj.n_nodes()`.
///
/// # Complexity
/// O((nnz + n)·d) time, O(n) extra memory (the inverse row norms).
///
/// # Examples
/// ```
/// use ndarray::array;
/// use sparse_gcn::graph::{Direction, Graph, Norm, NormAdj};
/// use sparse_gcn::metrics::smoothing::mad_neighbors;
/// // path 0 – 1 – 2; rows 0 and 1 orthogonal (D = 1), rows 1 and 2 identical (D = 0)
/// let g = Graph::try_from_edges(3, &[(0, 1), (1, 2)], Direction::Undirected).unwrap();
/// let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
/// let h = array![[1.0, 0.0], [0.0, 2.0], [0.0, 2.0]];
/// // D̄ = (1, 1, 0): node 2 has no neighbour at non-zero distance
/// assert_eq!(mad_neighbors(&adj, h.view()), 1.0);
/// ```
#[track_caller]
pub fn mad_neighbors<F: Scalar>(adj: &NormAdj<F>, h: ArrayView2<'_, F>) -> f64 {
    let n = check_rows("mad_neighbors", adj, h);
    if n == 0 {
        return 0.0;
    }
    let inv = inv_norms(h);
    let eps = F::epsilon().to_f64_lossless();
    let zero = MAD_ZERO_ULPS * eps * eps;
    let a = adj.a();
    let ip = a.indptr();
    let ip = ip.raw_storage();
    let off = ip[0];
    let idx = a.indices();
    let parts: Vec<(f64, usize)> = blocks(n)
        .map(|rows| {
            let (mut sum, mut count) = (0.0f64, 0usize);
            for i in rows {
                let (mut s, mut c) = (0.0f64, 0usize);
                for &j in &idx[ip[i] - off..ip[i + 1] - off] {
                    let j = j as usize;
                    if j == i {
                        continue;
                    }
                    let d = cos_dist(h.row(i), inv[i], h.row(j), inv[j]);
                    if d > zero {
                        s += d;
                        c += 1;
                    }
                }
                if c > 0 {
                    sum += s / c as f64;
                    count += 1;
                }
            }
            (sum, count)
        })
        .collect();
    let (sum, count) = parts
        .iter()
        .fold((0.0, 0), |(s, c), &(bs, bc)| (s + bs, c + bc));
    if count == 0 {
        0.0
    } else {
        sum / count as f64
    }
}

/// Global MAD: the mean cosine distance over **all** ordered pairs i ≠ j,
///
///   MAD_global = 1/(n(n−1))·Σ_{i≠j} (1 − cos(h_i, h_j)) = 1 − mean_cosine(H),
///
/// computed exactly in O(n·d) from the sum of the unit rows. Unlike the paper's MAD (and
/// [`mad_neighbors`]), pairs at distance 0 are counted: the "non-zero only" rule needs every
/// pairwise distance and cannot be evaluated in O(n·d). Zero rows: cosine 0, distance 1
/// (see the [module docs](self)). In [0, 2]; n < 2 gives 0 (no pairs).
///
/// # Shapes
/// `h: n×d`; any strides.
///
/// # Complexity
/// O(n·d) time, O(d·n/[`BLOCK_ROWS`]) extra memory.
///
/// # Examples
/// ```
/// use ndarray::array;
/// use sparse_gcn::metrics::smoothing::mad_global;
/// assert_eq!(mad_global(array![[1.0, 0.0], [0.0, 3.0]].view()), 1.0);  // orthogonal
/// assert!(mad_global(array![[1.0, 2.0], [2.0, 4.0]].view()).abs() < 1e-15); // parallel
/// ```
pub fn mad_global<F: Scalar>(h: ArrayView2<'_, F>) -> f64 {
    if h.nrows() < 2 {
        return 0.0;
    }
    1.0 - mean_cosine(h)
}

/// Mean pairwise cosine similarity over all ordered pairs i ≠ j, exactly:
///
///   (‖Σ_i u_i‖² − Σ_i ‖u_i‖²) / (n(n−1)),  u_i = h_i/‖h_i‖ (u_i = 0 for a zero row).
///
/// Zero rows have cosine 0 with every row. Clamped to [−1, 1]; n < 2 gives 0 (no pairs).
///
/// # Shapes
/// `h: n×d`; any strides.
///
/// # Complexity
/// O(n·d) time, O(d·n/[`BLOCK_ROWS`]) extra memory.
///
/// # Examples
/// ```
/// use ndarray::array;
/// use sparse_gcn::metrics::smoothing::mean_cosine;
/// // cos = (1, 0, 0) for pairs (0,1), (0,2), (1,2): mean over 6 ordered pairs = 1/3
/// let h = array![[1.0, 0.0], [2.0, 0.0], [0.0, 1.0]];
/// assert!((mean_cosine(h.view()) - 1.0 / 3.0).abs() < 1e-15);
/// ```
pub fn mean_cosine<F: Scalar>(h: ArrayView2<'_, F>) -> f64 {
    let (n, d) = h.dim();
    if n < 2 {
        return 0.0;
    }
    let parts: Vec<(Vec<f64>, f64)> = blocks(n)
        .map(|rows| {
            let mut s = vec![0.0f64; d];
            let mut q = 0.0f64;
            for i in rows {
                let hi = h.row(i);
                let nrm2 = dot64(hi, hi);
                if nrm2 > 0.0 {
                    let r = 1.0 / nrm2.sqrt();
                    let mut uu = 0.0;
                    for (sk, &x) in s.iter_mut().zip(hi.iter()) {
                        let u = x.to_f64_lossless() * r;
                        *sk += u;
                        uu += u * u;
                    }
                    q += uu;
                }
            }
            (s, q)
        })
        .collect();
    let mut s = vec![0.0f64; d];
    let mut q = 0.0f64;
    for (bs, bq) in &parts {
        for (a, b) in s.iter_mut().zip(bs) {
            *a += b;
        }
        q += bq;
    }
    let ss: f64 = s.iter().map(|x| x * x).sum();
    ((ss - q) / (n as f64 * (n - 1) as f64)).clamp(-1.0, 1.0)
}

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
/// use ndarray::array;
/// use rand::SeedableRng;
/// use sparse_gcn::metrics::smoothing::numerical_rank;
/// // row 3 = row 0 + row 2, row 1 = 2·row 0
/// let h = array![[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 0.0], [1.0, 3.0, 3.0]];
/// let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
/// assert_eq!(numerical_rank(h.view(), 100, 1e-6, &mut rng), 2);
/// ```
pub fn numerical_rank<F: Scalar, R: Rng + ?Sized>(
    h: ArrayView2<'_, F>,
    sample: usize,
    rel_tol: f64,
    rng: &mut R,
) -> usize {
    let (n, d) = h.dim();
    let s = sample.min(n);
    if s == 0 || d == 0 {
        return 0;
    }
    let rows: Vec<usize> = if s == n {
        (0..n).collect()
    } else {
        let mut v = rand::seq::index::sample(rng, n, s).into_vec();
        v.sort_unstable(); // the Gram matrix then depends on the set only
        v
    };
    let x = Array2::from_shape_fn((s, d), |(a, k)| h[[rows[a], k]].to_f64_lossless());
    let m = s.min(d);
    let mut g = Array2::<f64>::zeros((m, m));
    if s < d {
        gemm(1.0, x.view(), x.t(), 0.0, g.view_mut(), Par::Rayon);
    } else {
        gemm(1.0, x.t(), x.view(), 0.0, g.view_mut(), Par::Rayon);
    }
    let lambda = jacobi_eigenvalues(g.into_raw_vec_and_offset().0, m);
    let sigma: Vec<f64> = lambda.iter().map(|&l| l.max(0.0).sqrt()).collect();
    let smax = sigma.iter().copied().fold(0.0f64, f64::max);
    if smax <= 0.0 {
        return 0; // `fold(f64::max)` ignores NaN, so smax is never NaN
    }
    let cut = rel_tol * smax;
    sigma.iter().filter(|&&x| x > cut).count()
}

/// All smoothing metrics of one layer's H. `rank_sample = Some((s, seed))` also estimates
/// [`numerical_rank`] on s rows drawn with `ChaCha8Rng::seed_from_u64(seed)` at
/// [`RANK_REL_TOL`] (reproducible for a given seed); `None` skips it.
///
/// # Shapes
/// `h: n×d` with n = `adj.n_nodes()`.
///
/// # Panics
/// If `h.nrows() != adj.n_nodes()`.
///
/// # Complexity
/// O((nnz + n)·d), plus the rank's O(s·d·m + m³), m = min(s, d).
///
/// # Examples
/// ```
/// use ndarray::Array2;
/// use sparse_gcn::graph::{Direction, Graph, Norm, NormAdj};
/// use sparse_gcn::metrics::smoothing::layer_metrics;
/// let g = Graph::try_from_edges(3, &[(0, 1), (1, 2)], Direction::Undirected).unwrap();
/// let adj = NormAdj::<f32>::new(&g, Norm::Symmetric);
/// let h = Array2::<f32>::ones((3, 4)); // fully collapsed
/// let m = layer_metrics(&adj, h.view(), Some((3, 0)));
/// assert!(m.mad_global.abs() < 1e-7 && m.mad_neighbors == 0.0);
/// assert!((m.mean_cosine - 1.0).abs() < 1e-7);
/// assert_eq!(m.rank, Some(1));
/// ```
#[track_caller]
pub fn layer_metrics<F: Scalar>(
    adj: &NormAdj<F>,
    h: ArrayView2<'_, F>,
    rank_sample: Option<(usize, u64)>,
) -> LayerMetrics {
    check_rows("layer_metrics", adj, h);
    let mean_cos = mean_cosine(h);
    LayerMetrics {
        dirichlet: dirichlet_energy(adj, h),
        mad_global: if h.nrows() < 2 { 0.0 } else { 1.0 - mean_cos },
        mad_neighbors: mad_neighbors(adj, h),
        mean_cosine: mean_cos,
        rank: rank_sample.map(|(s, seed)| {
            numerical_rank(h, s, RANK_REL_TOL, &mut ChaCha8Rng::seed_from_u64(seed))
        }),
    }
}

/// [`layer_metrics`] of every layer, in order. Layers run in parallel under rayon; each
/// layer's rank sample uses the same seed, and the results equal those of calling
/// [`layer_metrics`] one layer at a time, bit for bit.
///
/// # Panics
/// If some `hs[l].nrows() != adj.n_nodes()`.
///
/// # Complexity
/// The sum of the layers' [`layer_metrics`] costs.
#[track_caller]
pub fn per_layer<F: Scalar>(
    adj: &NormAdj<F>,
    hs: &[ArrayView2<'_, F>],
    rank_sample: Option<(usize, u64)>,
) -> Vec<LayerMetrics> {
    for h in hs {
        check_rows("per_layer", adj, *h);
    }
    hs.par_iter()
        .map(|h| layer_metrics(adj, *h, rank_sample))
        .collect()
}

/// Checks `h.nrows() == adj.n_nodes()` and returns n.
#[track_caller]
fn check_rows<F: Scalar>(what: &str, adj: &NormAdj<F>, h: ArrayView2<'_, F>) -> usize {
    let n = adj.n_nodes();
    if h.nrows() != n {
        shape_panic(what, &[("adj", (n, n)), ("h", h.dim())]);
    }
    n
}

/// The fixed row blocks of 0..n, as a rayon iterator.
fn blocks(n: usize) -> impl IndexedParallelIterator<Item = Range<usize>> {
    (0..n.div_ceil(BLOCK_ROWS))
        .into_par_iter()
        .map(move |b| b * BLOCK_ROWS..((b + 1) * BLOCK_ROWS).min(n))
}

/// Σ over the blocks of 0..n of `f(block)`, added in block order (thread-count independent).
fn block_sums(n: usize, f: impl Fn(Range<usize>) -> f64 + Sync + Send) -> f64 {
    let parts: Vec<f64> = blocks(n).map(f).collect();
    parts.iter().sum()
}

/// ⟨a, b⟩ in f64.
#[inline]
fn dot64<F: Scalar>(a: ArrayView1<'_, F>, b: ArrayView1<'_, F>) -> f64 {
    let mut acc = 0.0f64;
    for (&x, &y) in a.iter().zip(b.iter()) {
        acc += x.to_f64_lossless() * y.to_f64_lossless();
    }
    acc
}

/// 1/‖h_i‖ per row, 0 for a zero row.
fn inv_norms<F: Scalar>(h: ArrayView2<'_, F>) -> Vec<f64> {
    (0..h.nrows())
        .into_par_iter()
        .map(|i| {
            let r = h.row(i);
            let n2 = dot64(r, r);
            if n2 > 0.0 {
                1.0 / n2.sqrt()
            } else {
                0.0
            }
        })
        .collect()
}

/// Cosine distance 1 − ⟨u_i, u_j⟩ as ½‖u_i − u_j‖², given the inverse norms (0 for a zero
/// row, whose distance to anything is 1). Clamped to [0, 2].
#[inline]
fn cos_dist<F: Scalar>(hi: ArrayView1<'_, F>, ri: f64, hj: ArrayView1<'_, F>, rj: f64) -> f64 {
    if ri == 0.0 || rj == 0.0 {
        return 1.0;
    }
    let mut acc = 0.0f64;
    for (&x, &y) in hi.iter().zip(hj.iter()) {
        let t = x.to_f64_lossless() * ri - y.to_f64_lossless() * rj;
        acc += t * t;
    }
    (0.5 * acc).min(2.0)
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
fn jacobi_eigenvalues(mut a: Vec<f64>, m: usize) -> Vec<f64> {
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
            a.par_chunks_mut(m).with_min_len(64).for_each(|row| {
                for &(p, q, c, s) in &rot {
                    let (xp, xq) = (row[p], row[q]);
                    row[p] = c * xp - s * xq;
                    row[q] = s * xp + c * xq;
                }
            });
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{Direction, Graph, Norm};
    use crate::kernels::spmm;
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
        let mut e = jacobi_eigenvalues(a.iter().copied().collect(), m);
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
            let e = dirichlet_energy(&adj, h.view());
            assert!(close(e, dirichlet_oracle(&adj, &h), 1e-12));
            assert!(close(e, dirichlet_pairwise_oracle(&g, &h), 1e-12));
            assert!(e >= 0.0);
            // row-normalised Â: still the trace formula
            let adj_r = NormAdj::<f64>::new(&g, Norm::Row);
            assert!(close(
                dirichlet_energy(&adj_r, h.view()),
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
        assert!(dirichlet_energy(&adj, h.view()).abs() < 1e-13);
        // whereas the constant signal is not in the null space (unless regular)
        let ones = Array2::<f64>::ones((12, 3));
        assert!(dirichlet_energy(&adj, ones.view()) > 1e-3);
    }

    #[test]
    fn dirichlet_never_increases_under_propagation() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let g = random_graph(40, 80, &mut rng);
        let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
        let mut h = random_h(40, 4, &mut rng);
        let mut prev = dirichlet_energy(&adj, h.view());
        for _ in 0..30 {
            let mut next = Array2::<f64>::zeros(h.dim());
            spmm(1.0, adj.a(), h.view(), 0.0, next.view_mut(), Par::Seq);
            h = next;
            let e = dirichlet_energy(&adj, h.view());
            assert!(e <= prev + 1e-14, "{e} > {prev}");
            prev = e;
        }
    }

    #[test]
    #[should_panic(expected = "dirichlet_energy")]
    fn dirichlet_panics_on_row_mismatch() {
        let g = Graph::try_from_edges(3, &[(0, 1)], Direction::Undirected).unwrap();
        let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
        dirichlet_energy(&adj, Array2::<f64>::zeros((4, 2)).view());
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
            assert!(close(mean_cosine(h.view()), mean_cosine_oracle(&h), 1e-12));
            assert!(close(mad_global(h.view()), mad_global_oracle(&h), 1e-12));
            assert!(close(
                mad_neighbors(&adj, h.view()),
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
            mad_neighbors(&adj, h.view()),
            mad_neighbors_oracle(&adj, &h),
            1e-12
        ));
        assert!(close(
            dirichlet_energy(&adj, h.view()),
            dirichlet_oracle(&adj, &h),
            1e-12
        ));
    }

    #[test]
    fn identical_rows_are_fully_smooth() {
        let g = Graph::try_from_edges(5, &[(0, 1), (1, 2), (2, 3), (3, 4)], Direction::Undirected)
            .unwrap();
        let adj = NormAdj::<f32>::new(&g, Norm::Symmetric);
        let h = Array2::from_shape_fn((5, 3), |(_, k)| [0.3f32, -1.7, 0.01][k]);
        assert_eq!(mad_neighbors(&adj, h.view()), 0.0); // exact: identical unit rows
        assert!(mad_global(h.view()).abs() < 1e-14);
        assert!((mean_cosine(h.view()) - 1.0).abs() < 1e-14);
    }

    #[test]
    fn parallel_rows_are_at_zero_distance() {
        // h_1 = 3·h_0 and h_2 = 0.1·h_0 in f64: exact distance 0, rounding far below 256·ε²
        let g = Graph::try_from_edges(3, &[(0, 1), (1, 2)], Direction::Undirected).unwrap();
        let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
        let r = [0.3, -1.1, 2.7, 1e-3];
        let h = Array2::from_shape_fn((3, 4), |(i, k)| [1.0, 3.0, 0.1][i] * r[k]);
        assert_eq!(mad_neighbors(&adj, h.view()), 0.0);
    }

    #[test]
    fn zero_rows_have_cosine_zero() {
        // a zero row: cosine 0, distance 1, with every row (itself included)
        let h = array![[1.0f64, 0.0], [0.0, 0.0]];
        assert_eq!(mean_cosine(h.view()), 0.0);
        assert_eq!(mad_global(h.view()), 1.0);
        let g = Graph::try_from_edges(2, &[(0, 1)], Direction::Undirected).unwrap();
        let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
        assert_eq!(mad_neighbors(&adj, h.view()), 1.0);
        let z = Array2::<f64>::zeros((2, 2));
        assert_eq!(mean_cosine(z.view()), 0.0);
        assert_eq!(mad_neighbors(&adj, z.view()), 1.0);
        assert_eq!(dirichlet_energy(&adj, z.view()), 0.0);
    }

    #[test]
    fn mad_neighbors_counts_only_nonzero_distances() {
        // star centre 0 with leaves 1, 2, 3; leaf 1 equals the centre, leaves 2, 3 orthogonal
        let g = Graph::try_from_edges(5, &[(0, 1), (0, 2), (0, 3)], Direction::Undirected).unwrap();
        let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
        let h = array![[1.0, 0.0], [2.0, 0.0], [0.0, 1.0], [0.0, 5.0], [1.0, 1.0]];
        // D̄_0 = (1 + 1)/2 (the zero to leaf 1 not counted), D̄_1 = 0 (not counted),
        // D̄_2 = D̄_3 = 1, node 4 isolated (not counted): MAD = 3/3
        assert_eq!(mad_neighbors(&adj, h.view()), 1.0);
        assert!(close(mad_neighbors_oracle(&adj, &h), 1.0, 1e-12));
    }

    #[test]
    fn small_and_empty_inputs() {
        let one = array![[1.0f64, 2.0]];
        assert_eq!(mean_cosine(one.view()), 0.0);
        assert_eq!(mad_global(one.view()), 0.0);
        let empty = Array2::<f64>::zeros((0, 3));
        assert_eq!(mean_cosine(empty.view()), 0.0);
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        assert_eq!(numerical_rank(empty.view(), 10, 1e-6, &mut rng), 0);
        let g = Graph::try_from_edges(0, &[], Direction::Undirected).unwrap();
        let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
        assert_eq!(dirichlet_energy(&adj, empty.view()), 0.0);
        assert_eq!(mad_neighbors(&adj, empty.view()), 0.0);
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
            layer_metrics(&a32, h32.view(), None),
            layer_metrics(&a64, h64.view(), None),
        );
        assert!(close(m32.dirichlet, m64.dirichlet, 1e-6));
        assert!(close(m32.mad_neighbors, m64.mad_neighbors, 1e-12));
        assert!(close(m32.mean_cosine, m64.mean_cosine, 1e-12));
    }

    #[test]
    fn large_inputs_span_several_blocks() {
        // n > BLOCK_ROWS exercises the block reduction against the brute force
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let n = 2 * BLOCK_ROWS + 37;
        let g = random_graph(n, 3 * n, &mut rng);
        let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
        let h = random_h(n, 3, &mut rng).mapv(|x| x + 0.5);
        assert!(close(mean_cosine(h.view()), mean_cosine_oracle(&h), 1e-10));
        assert!(close(
            dirichlet_energy(&adj, h.view()),
            dirichlet_pairwise_oracle(&g, &h),
            1e-10
        ));
        assert!(close(
            mad_neighbors(&adj, h.view()),
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
        assert_eq!(numerical_rank(h.view(), 1000, RANK_REL_TOL, &mut rng), 100);
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
                let got = numerical_rank(h.view(), s, 1e-6, &mut rng);
                assert_eq!(got, want, "n={n} d={d} r={r} s={s}");
            }
            // in f32, at the layer tolerance
            let h32 = h.mapv(|x| x as f32);
            assert_eq!(numerical_rank(h32.view(), n, RANK_REL_TOL, &mut rng), r);
        }
        // full rank and zero
        let h = random_h(100, 12, &mut rng);
        assert_eq!(numerical_rank(h.view(), 100, 1e-6, &mut rng), 12);
        assert_eq!(
            numerical_rank(Array2::<f64>::zeros((5, 4)).view(), 5, 1e-6, &mut rng),
            0
        );
    }

    #[test]
    fn numerical_rank_counts_singular_values_above_tolerance() {
        // diagonal singular values 1, 1e-3, 1e-5: rank depends on rel_tol
        let h = array![[1.0f64, 0.0, 0.0], [0.0, 1e-3, 0.0], [0.0, 0.0, 1e-5]];
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        assert_eq!(numerical_rank(h.view(), 3, 1e-6, &mut rng), 3);
        assert_eq!(numerical_rank(h.view(), 3, 1e-4, &mut rng), 2);
        assert_eq!(numerical_rank(h.view(), 3, 1e-2, &mut rng), 1);
    }

    #[test]
    fn numerical_rank_sample_is_reproducible() {
        // 64 rows, each a distinct unit vector e_(i mod 16): a sample of 8 rows has rank
        // #distinct directions drawn, which depends on the sample
        let h = Array2::from_shape_fn((64, 16), |(i, k)| f64::from(u8::from(i % 16 == k)));
        let ranks: Vec<usize> = (0..20)
            .map(|seed| numerical_rank(h.view(), 8, 1e-6, &mut ChaCha8Rng::seed_from_u64(seed)))
            .collect();
        let again: Vec<usize> = (0..20)
            .map(|seed| numerical_rank(h.view(), 8, 1e-6, &mut ChaCha8Rng::seed_from_u64(seed)))
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
            .map(|h| layer_metrics(&adj, *h, Some((200, 3))))
            .collect();
        for threads in [1, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let par = pool.install(|| per_layer(&adj, &views, Some((200, 3))));
            assert_eq!(par, serial, "threads = {threads}");
        }
        for (m, h) in serial.iter().zip(&hs) {
            let h64 = h.mapv(f64::from);
            assert!(close(m.mad_global, 1.0 - m.mean_cosine, 0.0));
            assert!(close(m.mean_cosine, mean_cosine(h64.view()), 1e-12));
            assert_eq!(m.rank, Some(h.ncols()));
        }
        assert!(serial.iter().all(|m| m.dirichlet > 0.0));
        let json = serde_json::to_string(&serial[0]).unwrap();
        assert!(json.contains("\"mad_neighbors\""));
    }
}
