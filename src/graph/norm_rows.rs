//! Rows of Â for one rank of a row-partitioned run ([`NormRows`]), from a [`Graph`] or from
//! any source of the graph's rows and degrees (a store read by rows).

use super::normalize::{tilde_len, tilde_row};
use super::{Graph, Norm};
use crate::kernels::{Csr, CsrView, NewTrusted};
use crate::Scalar;

/// The rows `range` of Â, and of Âᵀ when Â is not symmetric, built from the graph without
/// the whole Â: what one rank of a row-partitioned run holds. Columns keep their global ids;
/// every row, value and order is bit for bit that of the same rows of
/// [`NormAdj::new`](super::NormAdj::new) (and of its [`NormAdj::a_t`](super::NormAdj::a_t)).
#[derive(Debug, Clone)]
pub struct NormRows<F> {
    range: std::ops::Range<usize>,
    n_nodes: usize,
    nnz_total: usize,
    a: Csr<F>,
    a_t: Option<Csr<F>>,
}

impl<F: Scalar> NormRows<F> {
    /// Rows `range` of `graph`'s Â under `norm`.
    ///
    /// # Panics
    /// If `range` is not inside the node range.
    ///
    /// # Complexity
    /// O(n + nnz of the rows) time and memory for Â's rows; Âᵀ's rows (a directed graph, or
    /// [`Norm::Row`]) scan every row of the graph once: O(n + nnz(graph)) time.
    pub fn new(graph: &Graph, norm: Norm, range: std::ops::Range<usize>) -> Self {
        // (Node ids and d̃ fit in u32: `Graph` guarantees n ≤ u32::MAX.)
        let tilde: Vec<u32> = (0..graph.n_nodes())
            .map(|i| tilde_len(graph, i) as u32)
            .collect();
        Self::from_rows(
            &tilde,
            graph.is_directed(),
            |i| graph.neighbors(i),
            norm,
            range,
        )
    }

    /// Rows `range` of Â under `norm` for the graph of `tilde.len()` nodes whose node `i` has
    /// the sorted neighbours `row(i)` (ids below the node count; the pattern symmetric unless
    /// `directed`) and the degree `tilde[i]` in Ã = A + I (`row(i)`'s length, plus one when it
    /// holds no self-loop): the same rows, bit for bit, as [`NormRows::new`] of that graph.
    /// `row` is called for the rows of `range` only, unless Âᵀ's rows are built (a directed
    /// graph or [`Norm::Row`]: every row, once).
    ///
    /// # Panics
    /// If `range` is not inside the node range. A `row` or `tilde` that breaks the rules
    /// above gives wrong rows or panics on an index out of range (check them first).
    pub fn from_rows<'g>(
        tilde: &[u32],
        directed: bool,
        row: impl Fn(usize) -> &'g [u32],
        norm: Norm,
        range: std::ops::Range<usize>,
    ) -> Self {
        let n = tilde.len();
        assert!(
            range.start <= range.end && range.end <= n,
            "NormRows: rows {range:?} of {n}"
        );
        // The value of Â_ij from d̃, rounded as `assign_filtered` does.
        let nnz_total = tilde.iter().map(|&d| d as usize).sum();
        let scale: Vec<F> = tilde
            .iter()
            .map(|&d| match norm {
                Norm::Symmetric => F::from_f64_lossy(1.0 / f64::from(d).sqrt()),
                Norm::Row => F::from_f64_lossy(1.0 / f64::from(d)),
            })
            .collect();
        let value = |i: usize, j: usize| match norm {
            Norm::Symmetric => scale[i] * scale[j],
            Norm::Row => scale[i],
        };
        let local = |i: usize| i - range.start;
        let mut indptr = Vec::with_capacity(range.len() + 1);
        indptr.push(0usize);
        let mut indices = Vec::new();
        let mut data = Vec::new();
        for i in range.clone() {
            for j in tilde_row(row(i), i as u32) {
                indices.push(j);
                data.push(value(i, j as usize));
            }
            indptr.push(indices.len());
        }
        let a = Csr::new_trusted_pub((range.len(), n), indptr, indices, data);
        let symmetric = !directed && norm == Norm::Symmetric;
        let a_t = (!symmetric).then(|| {
            // Column i of Â for each owned i: the rows j holding it, in increasing j, as a
            // transpose lays them out.
            let in_range = |i: u32| range.contains(&(i as usize));
            let mut counts = vec![0usize; range.len() + 1];
            for j in 0..n {
                for i in tilde_row(row(j), j as u32).filter(|&i| in_range(i)) {
                    counts[local(i as usize) + 1] += 1;
                }
            }
            for r in 0..range.len() {
                counts[r + 1] += counts[r];
            }
            let nnz = counts[range.len()];
            let mut fill = counts.clone();
            let mut t_indices = vec![0u32; nnz];
            let mut t_data = vec![F::zero(); nnz];
            for j in 0..n {
                for i in tilde_row(row(j), j as u32).filter(|&i| in_range(i)) {
                    let at = &mut fill[local(i as usize)];
                    t_indices[*at] = j as u32;
                    t_data[*at] = value(j, i as usize);
                    *at += 1;
                }
            }
            Csr::new_trusted_pub((range.len(), n), counts, t_indices, t_data)
        });
        NormRows {
            range,
            n_nodes: n,
            nnz_total,
            a,
            a_t,
        }
    }

    /// The rows held.
    pub fn range(&self) -> std::ops::Range<usize> {
        self.range.clone()
    }
    /// Nodes of the graph (columns of the rows).
    pub fn n_nodes(&self) -> usize {
        self.n_nodes
    }
    /// Stored entries of the whole Â.
    pub(crate) fn nnz_total(&self) -> usize {
        self.nnz_total
    }
    /// Â's rows (`range.len()` × n, global column ids).
    pub fn a(&self) -> CsrView<'_, F> {
        self.a.view()
    }
    /// Âᵀ's rows (Â's own when Â is symmetric).
    pub fn a_t(&self) -> CsrView<'_, F> {
        self.a_t.as_ref().unwrap_or(&self.a).view()
    }
    /// Whether Â is symmetric (so Âᵀ's rows are Â's).
    pub fn is_symmetric(&self) -> bool {
        self.a_t.is_none()
    }
}
