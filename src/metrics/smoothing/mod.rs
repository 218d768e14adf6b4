//! Oversmoothing metrics of node representations H (n×d), one row h_i per node.
//!
//! None of them ever forms an n×n matrix: the graph metrics cost O(nnz·d), the global ones
//! O(n·d), the numerical rank O(s·d·min(s, d) + min(s, d)³) on a sample of s rows.
//!
//! | Metric | Definition | Smooth (collapsed) H gives |
//! |---|---|---|
//! | `dirichlet_energy` | tr(Hᵀ(I − Â)H)/n | 0 |
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
//! All sums are accumulated in f64, row by row within the fixed chunks of the reduction grid
//! ([`grid_rows`]), the chunks' partials combined exactly and
//! rounded once ([`Sums::sum_rows`](crate::graph::Sums::sum_rows)): every result is bit-identical for any number of
//! rayon threads and, in a row-partitioned run, of ranks. The graph metrics take Â as a
//! [`Propagate`], which also gives them the neighbours' rows ([`Propagate::with_neighbours`])
//! and the rank's sample ([`Propagate::gather_rows`]); [`mad_global`], [`mean_cosine`] and
//! [`numerical_rank`] of a matrix alone have `_of` twins that sum across the ranks.
//!
//! This file holds the graph and global metrics and [`layer_metrics`] / `per_layer`, which
//! gather them per layer; [`numerical_rank`] and its Jacobi eigenvalue solver are in `rank`, the
//! tests (brute-force O(n²) oracles against every metric) in `tests`.

mod rank;
#[cfg(test)]
mod tests;

use ndarray::{ArrayView1, ArrayView2};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::Serialize;

pub use self::rank::numerical_rank;
pub(crate) use self::rank::numerical_rank_of;
use crate::graph::{Propagate, SumScratch, Unsupported};
use crate::kernels::rows::{grid_rows, parts_len};
use crate::kernels::shape_panic;
use crate::{Par, Scalar};

/// The relative tolerance [`layer_metrics`] passes to [`numerical_rank`]: singular values
/// below 10⁻⁴·σ_max count as zero. That is above the f32 rounding noise of an f32 H
/// (≈ 10⁻⁷·√d·σ_max) and above the resolution of the f64 Gram matrix (≈ √(m·ε)·σ_max).
pub const RANK_REL_TOL: f64 = 1e-4;

/// D_ij ≤ `MAD_ZERO_ULPS`·ε_F² counts as a zero distance in [`mad_neighbors`].
const MAD_ZERO_ULPS: f64 = 256.0;

/// Oversmoothing metrics of one layer's representations (see [`layer_metrics`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LayerMetrics {
    /// `dirichlet_energy`: tr(Hᵀ(I − Â)H)/n.
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
/// O((nnz + n)·d) time; one f64 per chunk of the reduction grid (and, in a partitioned run, the
/// halo rows of `h`) extra memory.
///
/// [`Norm::Symmetric`]: crate::graph::Norm::Symmetric
///
/// # Examples
/// ```
/// use sparse_gcn::Par;
/// use ndarray::array;
/// use sparse_gcn::graph::{Direction, Graph, Norm, NormAdj};
/// use sparse_gcn::metrics::smoothing::dirichlet_energy;
/// // one edge 0–1: d̃ = (2, 2), Â = [[½, ½], [½, ½]]
/// let g = Graph::try_from_edges(2, &[(0, 1)], Direction::Undirected).unwrap();
/// let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
/// let h = array![[1.0], [-1.0]];                       // ½·2·‖(1 − (−1))/√2‖²/2 = 1
/// assert!((dirichlet_energy(&adj, h.view(), Par::Rayon).unwrap() - 1.0).abs() < 1e-15);
/// assert!(dirichlet_energy(&adj, array![[3.0], [3.0]].view(), Par::Rayon).unwrap().abs() < 1e-14);
/// ```
#[track_caller]
pub fn dirichlet_energy<F: Scalar, P: Propagate<F> + ?Sized>(
    adj: &P,
    h: ArrayView2<'_, F>,
    par: Par,
) -> Result<f64, Unsupported> {
    let n = check_rows("dirichlet_energy", adj, h);
    let scratch = SumScratch::<F>::default();
    let sums = scratch.sums(adj.collective(), adj.rows());
    if sums.n_nodes() == 0 {
        return Ok(0.0);
    }
    let mut total = [0.0f64];
    let mut parts = vec![0.0f64; parts_len(n, 1)];
    adj.with_neighbours(h, &mut |a, ext, _| {
        let ip = a.indptr();
        let ip = ip.raw_storage();
        let off = ip[0];
        let (idx, val) = (a.indices(), a.data());
        let row = |i: usize, acc: &mut [f64]| {
            let hi = h.row(i);
            let mut prop = 0.0f64;
            for k in ip[i] - off..ip[i + 1] - off {
                prop += val[k].to_f64_lossless() * dot64(hi, ext.row(idx[k] as usize));
            }
            acc[0] += dot64(hi, hi) - prop;
        };
        sums.sum_rows(&mut parts, &mut total, &row, par);
    })?;
    Ok(total[0] / sums.n_nodes() as f64)
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
/// use sparse_gcn::Par;
/// use ndarray::array;
/// use sparse_gcn::graph::{Direction, Graph, Norm, NormAdj};
/// use sparse_gcn::metrics::smoothing::mad_neighbors;
/// // path 0 – 1 – 2; rows 0 and 1 orthogonal (D = 1), rows 1 and 2 identical (D = 0)
/// let g = Graph::try_from_edges(3, &[(0, 1), (1, 2)], Direction::Undirected).unwrap();
/// let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
/// let h = array![[1.0, 0.0], [0.0, 2.0], [0.0, 2.0]];
/// // D̄ = (1, 1, 0): node 2 has no neighbour at non-zero distance
/// assert_eq!(mad_neighbors(&adj, h.view(), Par::Rayon).unwrap(), 1.0);
/// ```
#[track_caller]
pub fn mad_neighbors<F: Scalar, P: Propagate<F> + ?Sized>(
    adj: &P,
    h: ArrayView2<'_, F>,
    par: Par,
) -> Result<f64, Unsupported> {
    let n = check_rows("mad_neighbors", adj, h);
    let scratch = SumScratch::<F>::default();
    let sums = scratch.sums(adj.collective(), adj.rows());
    if sums.n_nodes() == 0 {
        return Ok(0.0);
    }
    let eps = F::epsilon().to_f64_lossless();
    let zero = MAD_ZERO_ULPS * eps * eps;
    // Σ_i D̄_i over the nodes with a neighbour at non-zero distance, and their count.
    let mut total = [0.0f64; 2];
    let mut parts = vec![0.0f64; parts_len(n, 2)];
    adj.with_neighbours(h, &mut |a, ext, own| {
        let inv = inv_norms(ext, par);
        let ip = a.indptr();
        let ip = ip.raw_storage();
        let off = ip[0];
        let idx = a.indices();
        let row = |i: usize, acc: &mut [f64]| {
            let e = own + i;
            let (mut s, mut c) = (0.0f64, 0usize);
            for &j in &idx[ip[i] - off..ip[i + 1] - off] {
                let j = j as usize;
                if j == e {
                    continue;
                }
                let d = cos_dist(ext.row(e), inv[e], ext.row(j), inv[j]);
                if d > zero {
                    s += d;
                    c += 1;
                }
            }
            if c > 0 {
                acc[0] += s / c as f64;
                acc[1] += 1.0;
            }
        };
        sums.sum_rows(&mut parts, &mut total, &row, par);
    })?;
    Ok(if total[1] == 0.0 {
        0.0
    } else {
        total[0] / total[1]
    })
}

/// Global MAD: the mean cosine distance over **all** ordered pairs i ≠ j,
///
///   MAD_global = 1/(n(n−1))·Σ_{i≠j} (1 − cos(h_i, h_j)) = 1 − mean_cosine(H, Par::Rayon),
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
/// O(n·d) time, O(d·n/[`grid_rows`]\(n)) extra memory.
///
/// # Examples
/// ```
/// use sparse_gcn::Par;
/// use ndarray::array;
/// use sparse_gcn::metrics::smoothing::mad_global;
/// assert_eq!(mad_global(array![[1.0, 0.0], [0.0, 3.0]].view(), Par::Rayon), 1.0);  // orthogonal
/// assert!(mad_global(array![[1.0, 2.0], [2.0, 4.0]].view(), Par::Rayon).abs() < 1e-15); // parallel
/// ```
pub fn mad_global<F: Scalar>(h: ArrayView2<'_, F>, par: Par) -> f64 {
    if h.nrows() < 2 {
        return 0.0;
    }
    1.0 - mean_cosine(h, par)
}

#[cfg(test)]
/// [`mad_global`] of a node-indexed H held in parts (this process's rows of every node's H),
/// over every node: `1 − mean_cosine_of`.
pub(crate) fn mad_global_of<F: Scalar, P: Propagate<F> + ?Sized>(
    adj: &P,
    h: ArrayView2<'_, F>,
    par: Par,
) -> f64 {
    if adj.rows().total < 2 {
        return 0.0;
    }
    1.0 - mean_cosine_of(adj, h, par)
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
/// O(n·d) time, O(d·n/[`grid_rows`]\(n)) extra memory.
///
/// # Examples
/// ```
/// use sparse_gcn::Par;
/// use ndarray::array;
/// use sparse_gcn::metrics::smoothing::mean_cosine;
/// // cos = (1, 0, 0) for pairs (0,1), (0,2), (1,2): mean over 6 ordered pairs = 1/3
/// let h = array![[1.0, 0.0], [2.0, 0.0], [0.0, 1.0]];
/// assert!((mean_cosine(h.view(), Par::Rayon) - 1.0 / 3.0).abs() < 1e-15);
/// ```
pub fn mean_cosine<F: Scalar>(h: ArrayView2<'_, F>, par: Par) -> f64 {
    let n = h.nrows();
    cosine_from_sums(n, h, &mut |parts, total, row| {
        let chunks =
            crate::kernels::rows::chunk_sums(n, grid_rows(n), parts, total.len(), row, par);
        let mut scratch = crate::graph::reduce::ReduceScratch::<F>::default();
        crate::graph::reduce::combine_f64(parts, chunks, total, &mut scratch, None);
    })
}

/// [`mean_cosine`] of a node-indexed H held in parts (this process's rows), over every node.
pub(crate) fn mean_cosine_of<F: Scalar, P: Propagate<F> + ?Sized>(
    adj: &P,
    h: ArrayView2<'_, F>,
    par: Par,
) -> f64 {
    check_rows("mean_cosine_of", adj, h);
    let scratch = SumScratch::<F>::default();
    let sums = scratch.sums(adj.collective(), adj.rows());
    cosine_from_sums(sums.n_nodes(), h, &mut |parts, total, row| {
        sums.sum_rows(parts, total, row, par);
    })
}

/// The mean cosine of n nodes from Σ_i u_i and Σ_i ‖u_i‖² over `h`'s rows, summed by `sum`
/// (parts, total, the row's terms).
#[allow(clippy::type_complexity)]
fn cosine_from_sums<F: Scalar>(
    n: usize,
    h: ArrayView2<'_, F>,
    sum: &mut dyn FnMut(&mut [f64], &mut [f64], &(dyn Fn(usize, &mut [f64]) + Sync)),
) -> f64 {
    if n < 2 {
        return 0.0;
    }
    let d = h.ncols();
    let mut total = vec![0.0f64; d + 1];
    let mut parts = vec![0.0f64; parts_len(h.nrows(), d + 1)];
    let row = |i: usize, acc: &mut [f64]| {
        let hi = h.row(i);
        let nrm2 = dot64(hi, hi);
        if nrm2 > 0.0 {
            let r = 1.0 / nrm2.sqrt();
            let mut uu = 0.0;
            for (sk, &x) in acc[..d].iter_mut().zip(hi.iter()) {
                let u = x.to_f64_lossless() * r;
                *sk += u;
                uu += u * u;
            }
            acc[d] += uu;
        }
    };
    sum(&mut parts, &mut total, &row);
    let ss: f64 = total[..d].iter().map(|x| x * x).sum();
    ((ss - total[d]) / (n as f64 * (n - 1) as f64)).clamp(-1.0, 1.0)
}

/// All smoothing metrics of one layer's H. `rank_sample = Some((s, seed))` also estimates
/// [`numerical_rank`] on s rows drawn with `ChaCha8Rng::seed_from_u64(seed)` at
/// [`RANK_REL_TOL`] (reproducible for a given seed); `None` skips it.
///
/// # Shapes
/// `h: n×d` with n Â's rows.
///
/// # Errors
/// [`Unsupported`] when `adj` cannot read neighbours' rows
/// ([`Caps::neighbours`](crate::graph::Caps)).
///
/// # Panics
/// If `h.nrows()` is not Â's row count.
///
/// # Complexity
/// O((nnz + n)·d), plus the rank's O(s·d·m + m³), m = min(s, d).
///
/// # Examples
/// ```
/// use sparse_gcn::Par;
/// use ndarray::Array2;
/// use sparse_gcn::graph::{Direction, Graph, Norm, NormAdj};
/// use sparse_gcn::metrics::smoothing::layer_metrics;
/// let g = Graph::try_from_edges(3, &[(0, 1), (1, 2)], Direction::Undirected).unwrap();
/// let adj = NormAdj::<f32>::new(&g, Norm::Symmetric);
/// let h = Array2::<f32>::ones((3, 4)); // fully collapsed
/// let m = layer_metrics(&adj, h.view(), Some((3, 0)), Par::Rayon).unwrap();
/// assert!(m.mad_global.abs() < 1e-7 && m.mad_neighbors == 0.0);
/// assert!((m.mean_cosine - 1.0).abs() < 1e-7);
/// assert_eq!(m.rank, Some(1));
/// ```
#[track_caller]
pub fn layer_metrics<F: Scalar, P: Propagate<F> + ?Sized>(
    adj: &P,
    h: ArrayView2<'_, F>,
    rank_sample: Option<(usize, u64)>,
    par: Par,
) -> Result<LayerMetrics, Unsupported> {
    check_rows("layer_metrics", adj, h);
    let mean_cos = mean_cosine_of(adj, h, par);
    let rank = match rank_sample {
        Some((s, seed)) => Some(numerical_rank_of(
            adj,
            h,
            s,
            RANK_REL_TOL,
            &mut ChaCha8Rng::seed_from_u64(seed),
            par,
        )?),
        None => None,
    };
    Ok(LayerMetrics {
        dirichlet: dirichlet_energy(adj, h, par)?,
        mad_global: if adj.rows().total < 2 {
            0.0
        } else {
            1.0 - mean_cos
        },
        mad_neighbors: mad_neighbors(adj, h, par)?,
        mean_cosine: mean_cos,
        rank,
    })
}

#[cfg(test)]
/// [`layer_metrics`] of every layer, in order. Layers run in parallel under rayon (one after
/// another when Â spans processes: their exchanges must come in the same order on every rank);
/// each layer's rank sample uses the same seed, and the results equal those of calling
/// [`layer_metrics`] one layer at a time, bit for bit.
///
/// # Errors
/// As [`layer_metrics`].
///
/// # Panics
/// If some `hs[l].nrows()` is not Â's row count.
///
/// # Complexity
/// The sum of the layers' [`layer_metrics`] costs.
#[track_caller]
pub(crate) fn per_layer<F: Scalar, P: Propagate<F> + ?Sized>(
    adj: &P,
    hs: &[ArrayView2<'_, F>],
    rank_sample: Option<(usize, u64)>,
    par: Par,
) -> Result<Vec<LayerMetrics>, Unsupported> {
    for h in hs {
        check_rows("per_layer", adj, *h);
    }
    let one = |h: &ArrayView2<'_, F>| layer_metrics(adj, *h, rank_sample, par);
    match par {
        Par::Rayon if !adj.collective().spans_processes() => hs.par_iter().map(one).collect(),
        _ => hs.iter().map(one).collect(),
    }
}

/// Checks `h.nrows() == adj.n_rows()` and returns it.
#[track_caller]
fn check_rows<F: Scalar, P: Propagate<F> + ?Sized>(
    what: &str,
    adj: &P,
    h: ArrayView2<'_, F>,
) -> usize {
    let n = adj.shape().0;
    if h.nrows() != n {
        shape_panic(what, &[("adj", adj.shape()), ("h", h.dim())]);
    }
    n
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
fn inv_norms<F: Scalar>(h: ArrayView2<'_, F>, par: Par) -> Vec<f64> {
    let inv = |i: usize| {
        let r = h.row(i);
        let n2 = dot64(r, r);
        if n2 > 0.0 {
            1.0 / n2.sqrt()
        } else {
            0.0
        }
    };
    match par {
        Par::Seq => (0..h.nrows()).map(inv).collect(),
        Par::Rayon => (0..h.nrows()).into_par_iter().map(inv).collect(),
    }
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
