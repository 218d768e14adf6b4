//! Â = D̃^-1/2 (A + I) D̃^-1/2 (or D̃^-1 (A + I)) as a CSR matrix. Never dense.

use super::Graph;
use crate::kernels::{Csr, CsrView};
use crate::Scalar;

/// Which normalisation of Ã = A + I.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Norm {
    /// Â = D̃^-1/2 Ã D̃^-1/2 (Kipf & Welling; PyG's `gcn_norm`). The default.
    #[default]
    Symmetric,
    /// Â = D̃^-1 Ã: each row averages its neighbours and itself (rows sum to 1).
    Row,
}

/// The normalised adjacency Â of a [`Graph`], with self-loops, stored in CSR (`u32` indices).
///
/// Ã = A + I where the identity is added only on nodes without a self-loop (PyG's
/// `add_remaining_self_loops`), so every diagonal entry of Ã is 1 and every degree
/// d̃_i = Σ_j Ã_ij ≥ 1: an isolated node keeps only its self-loop, Â_ii = 1, and no degree is
/// ever zero (the safe deg^-1/2). Degrees are row sums (in-degrees in PyG's convention for a
/// directed graph). Âᵀ is stored separately only when Â is not symmetric (a directed graph, or
/// [`Norm::Row`]); otherwise [`NormAdj::a_t`] returns Â itself.
#[derive(Debug, Clone)]
pub struct NormAdj<F> {
    a: Csr<F>,
    a_t: Option<Csr<F>>,
    norm: Norm,
}

impl<F: Scalar> NormAdj<F> {
    /// Normalises `graph`'s adjacency.
    ///
    /// # Complexity
    /// O(n + nnz) time; memory for Â (and Âᵀ when not symmetric) only.
    ///
    /// # Examples
    /// ```
    /// use sparse_gcn::graph::{Direction, Graph, Norm, NormAdj};
    /// // path 0 – 1 – 2: d̃ = (2, 3, 2)
    /// let g = Graph::try_from_edges(3, &[(0, 1), (1, 2)], Direction::Undirected).unwrap();
    /// let adj = NormAdj::<f64>::new(&g, Norm::Symmetric);
    /// let a = adj.a();
    /// assert!((a.get(0, 0).unwrap() - 0.5).abs() < 1e-15);             // 1/2
    /// assert!((a.get(0, 1).unwrap() - 1.0 / 6f64.sqrt()).abs() < 1e-15); // 1/√(2·3)
    /// assert!((a.get(1, 1).unwrap() - 1.0 / 3.0).abs() < 1e-15);       // 1/3
    /// ```
    pub fn new(graph: &Graph, norm: Norm) -> Self {
        let n = graph.n_nodes();
        let ip = graph.indptr();
        let idx = graph.indices();
        // Degrees of Ã: row length plus one where the self-loop is missing.
        let has_loop = |i: usize| graph.neighbors(i).binary_search(&(i as u32)).is_ok();
        let deg: Vec<usize> = (0..n)
            .map(|i| graph.degree(i) + usize::from(!has_loop(i)))
            .collect();
        let mut indptr = Vec::with_capacity(n + 1);
        indptr.push(0usize);
        let total: usize = deg.iter().sum();
        let mut indices: Vec<u32> = Vec::with_capacity(total);
        for i in 0..n {
            let row = &idx[ip[i]..ip[i + 1]];
            let pos = row.partition_point(|&j| (j as usize) < i);
            indices.extend_from_slice(&row[..pos]);
            if row.get(pos).map(|&j| j as usize) != Some(i) {
                indices.push(i as u32);
            }
            indices.extend_from_slice(&row[pos..]);
            indptr.push(indices.len());
        }
        let mut data: Vec<F> = Vec::with_capacity(total);
        match norm {
            Norm::Symmetric => {
                let inv_sqrt: Vec<F> = deg
                    .iter()
                    .map(|&d| F::from_f64_lossy(1.0 / (d as f64).sqrt()))
                    .collect();
                for i in 0..n {
                    for &j in &indices[indptr[i]..indptr[i + 1]] {
                        data.push(inv_sqrt[i] * inv_sqrt[j as usize]);
                    }
                }
            }
            Norm::Row => {
                for i in 0..n {
                    let w = F::from_f64_lossy(1.0 / deg[i] as f64);
                    data.extend(std::iter::repeat_n(w, indptr[i + 1] - indptr[i]));
                }
            }
        }
        let a = Csr::new_trusted_pub((n, n), indptr, indices, data);
        let symmetric = !graph.is_directed() && norm == Norm::Symmetric;
        let a_t = (!symmetric).then(|| a.transpose_view().to_csr());
        NormAdj { a, a_t, norm }
    }

    /// Â.
    pub fn a(&self) -> CsrView<'_, F> {
        self.a.view()
    }
    /// Âᵀ (Â itself when symmetric).
    pub fn a_t(&self) -> CsrView<'_, F> {
        self.a_t.as_ref().unwrap_or(&self.a).view()
    }
    /// Whether Â is symmetric (so only one matrix is stored).
    pub fn is_symmetric(&self) -> bool {
        self.a_t.is_none()
    }
    /// The normalisation used.
    pub fn norm(&self) -> Norm {
        self.norm
    }
    /// Number of nodes.
    pub fn n_nodes(&self) -> usize {
        self.a.rows()
    }
    /// Stored entries of Â (self-loops included).
    pub fn nnz(&self) -> usize {
        self.a.nnz()
    }
    /// Bytes held by Â (and Âᵀ): values, `u32` indices, `usize` row pointers.
    pub fn heap_bytes(&self) -> usize {
        let one = |m: &Csr<F>| {
            m.nnz() * (std::mem::size_of::<F>() + 4) + (m.rows() + 1) * std::mem::size_of::<usize>()
        };
        one(&self.a) + self.a_t.as_ref().map_or(0, one)
    }
}

/// Constructor for a CSR whose invariants hold by construction (sorted, unique, in-range
/// indices; monotone row pointer): checks them in debug builds only.
pub(crate) trait NewTrusted<F> {
    fn new_trusted_pub(
        shape: (usize, usize),
        indptr: Vec<usize>,
        indices: Vec<u32>,
        data: Vec<F>,
    ) -> Self;
}

impl<F: Scalar> NewTrusted<F> for Csr<F> {
    fn new_trusted_pub(
        shape: (usize, usize),
        indptr: Vec<usize>,
        indices: Vec<u32>,
        data: Vec<F>,
    ) -> Self {
        // `try_new` checks sortedness and bounds in O(nnz); that is cheap next to building the
        // arrays, so it runs in release too. A failure is a bug in this crate.
        match Csr::try_new(shape, indptr, indices, data) {
            Ok(m) => m,
            Err((_, _, _, e)) => panic!("internal CSR construction failed: {e}"),
        }
    }
}
