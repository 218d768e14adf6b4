//! Â = D̃^-1/2 (A + I) D̃^-1/2 (or D̃^-1 (A + I)) as a CSR matrix. Never dense.

use super::Graph;
use crate::id::DataId;
use crate::kernels::transpose::{transpose_into, CsrArrays};
use crate::kernels::{Csr, CsrView, NewTrusted};
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
///
#[derive(Debug)]
pub struct NormAdj<F: Scalar> {
    /// The identity of Â's contents: fresh for each new Â and each rewrite.
    id: DataId,
    a: Csr<F>,
    a_t: Option<Csr<F>>,
    norm: Norm,
}

impl<F: Scalar> Clone for NormAdj<F> {
    fn clone(&self) -> Self {
        NormAdj {
            id: self.id,
            a: self.a.clone(),
            a_t: self.a_t.clone(),
            norm: self.norm,
        }
    }
}

/// What `NormAdj::assign_filtered` reuses from one call to the next besides Â's and Âᵀ's
/// storage: D̃^-1/2, the fill cursors of the transpose (whose storage also stands in for Â's
/// row pointer while Â is rebuilt), and Âᵀ's storage while Â is symmetric. Owned by whoever
/// rewrites an Â repeatedly (DropEdge's samples in the trainer), never by Â itself.
#[derive(Debug, Clone)]
pub struct AdjScratch<F> {
    inv_sqrt: Vec<F>,
    fill: Vec<usize>,
    a_t: Option<Csr<F>>,
}

impl<F> Default for AdjScratch<F> {
    fn default() -> Self {
        AdjScratch {
            inv_sqrt: Vec::new(),
            fill: Vec::new(),
            a_t: None,
        }
    }
}

impl<F: Scalar> NormAdj<F> {
    /// Normalises `graph`'s adjacency.
    ///
    /// Bit for bit `NormAdj::assign_filtered` keeping every edge, into an [`NormAdj::empty`],
    /// with the same capacity; built by the pool's threads, the same bits for any count.
    ///
    /// # Complexity
    /// O(n + nnz) work; memory for Â (and Âᵀ when not symmetric), plus O(n) scratch while it
    /// is built.
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
        use rayon::prelude::*;
        let n = graph.n_nodes();
        let indptr = adj_indptr(graph);
        let nnz = indptr[n];
        // The capacity `NormAdj::assign_filtered` gives (every self-loop added), so that a
        // later sample into this Â never grows it; zeroed pages, touched by the threads that
        // fill them.
        let cap = graph.nnz() + n;
        let mut indices = vec![0u32; cap];
        let mut data = vec![F::zero(); cap];
        indices.truncate(nnz);
        data.truncate(nnz);
        // D̃^-1/2 or D̃^-1, each rounded from f64 as `assign_filtered` rounds it.
        let scale: Vec<F> = indptr
            .par_windows(2)
            .map(|w| {
                let d = (w[1] - w[0]) as f64;
                match norm {
                    Norm::Symmetric => F::from_f64_lossy(1.0 / d.sqrt()),
                    Norm::Row => F::from_f64_lossy(1.0 / d),
                }
            })
            .collect();
        // Rows in runs of about `FILL_NNZ` entries, each run's slices filled by one task:
        // every value is computed alone, so the bits do not depend on the split.
        let mut runs = Vec::new();
        let (mut ind, mut dat) = (&mut indices[..], &mut data[..]);
        let mut start = 0;
        while start < n {
            let mut end = start + 1;
            while end < n && indptr[end] - indptr[start] < FILL_NNZ {
                end += 1;
            }
            let len = indptr[end] - indptr[start];
            let (a, rest_i) = std::mem::take(&mut ind).split_at_mut(len);
            let (b, rest_d) = std::mem::take(&mut dat).split_at_mut(len);
            runs.push((start..end, a, b));
            (ind, dat) = (rest_i, rest_d);
            start = end;
        }
        runs.into_par_iter().for_each(|(rows, ind, dat)| {
            let base = indptr[rows.start];
            for i in rows {
                // Node ids fit in u32: `Graph` guarantees n ≤ u32::MAX.
                let u = i as u32;
                let at = indptr[i] - base..indptr[i + 1] - base;
                let row = tilde_row(graph.neighbors(i), u);
                for ((slot, v), j) in ind[at.clone()].iter_mut().zip(&mut dat[at]).zip(row) {
                    *slot = j;
                    *v = match norm {
                        Norm::Symmetric => scale[i] * scale[j as usize],
                        Norm::Row => scale[i],
                    };
                }
            }
        });
        let mut adj = NormAdj {
            id: DataId::fresh(),
            a: Csr::new_trusted_pub((n, n), indptr, indices, data),
            a_t: None,
            norm,
        };
        let symmetric = !graph.is_directed() && norm == Norm::Symmetric;
        adj.store_transpose(symmetric, cap, Vec::new(), &mut AdjScratch::default());
        adj
    }

    /// An empty (0 × 0) Â, to be filled by `NormAdj::assign_filtered` (e.g. through
    /// [`crate::graph::dropedge::DropEdge::sample_into`]).
    pub fn empty(norm: Norm) -> Self {
        NormAdj {
            id: DataId::fresh(),
            a: Csr::new_trusted_pub((0, 0), vec![0], Vec::new(), Vec::new()),
            a_t: None,
            norm,
        }
    }

    /// Cluster-GCN's diagonal enhancement (Chiang et al., KDD 2019, eq. 10): Â + λ·diag(Â),
    /// each diagonal entry a becoming a + λ·a (rounded in `F`: a product, then a sum), the
    /// others unchanged, in Âᵀ too; a fresh id. λ = 0 changes no value (the id stays).
    ///
    /// # Complexity
    /// O(nnz): a scan of each row for its diagonal entry (every row has one: Ã's self-loop).
    pub fn enhance_diagonal(&mut self, lambda: F) {
        if lambda == F::zero() {
            return;
        }
        self.id = DataId::fresh();
        let enhance = |m: &mut Csr<F>| {
            for (i, mut row) in m.outer_iterator_mut().enumerate() {
                for (j, v) in row.iter_mut() {
                    if j == i {
                        *v = *v + lambda * *v;
                    }
                }
            }
        };
        enhance(&mut self.a);
        if let Some(t) = &mut self.a_t {
            enhance(t);
        }
    }

    /// The identity of Â's contents ([`DataId`]): fresh for every new Â and every rewrite
    /// (`NormAdj::assign_filtered`), kept by a clone.
    pub fn id(&self) -> DataId {
        self.id
    }

    /// Overwrites `self` with the normalisation of the subgraph of `graph` that keeps every
    /// stored entry (i, j) with `keep(i, j)` (called for every i ≠ j, row by row; self-loops
    /// are always kept): bit for bit `NormAdj::new(&subgraph, norm)` — the same Ã (the
    /// input's self-loops kept, the missing ones added), degrees (row lengths of Ã), D̃^-1/2 or
    /// D̃^-1 rounded from `f64` the same way, the same products, and Âᵀ stored when
    /// `NormAdj::new` stores it.
    ///
    /// # Complexity
    /// O(n + nnz(graph)) time. Rewrites Â's (and Âᵀ's) storage in place and keeps its
    /// capacity (Âᵀ's too when a symmetric Â does not need it): allocates nothing once the
    /// buffers have held n nodes and nnz(graph) + n entries, e.g. when `self` is
    /// `NormAdj::new(graph, ..)` or has already held a sample of `graph`, and `spare` has been
    /// used for an earlier call on `graph`.
    pub(crate) fn assign_filtered(
        &mut self,
        graph: &Graph,
        norm: Norm,
        mut keep: impl FnMut(u32, u32) -> bool,
        spare: &mut AdjScratch<F>,
    ) {
        self.id = DataId::fresh();
        let n = graph.n_nodes();
        // Â's storage, taken out of `self.a`; the fill cursors' buffer stands in for its row
        // pointer in the meantime (a 0 × 0 CSR needs one entry, kept from call to call).
        let mut stand_in = std::mem::take(&mut spare.fill);
        stand_in.clear();
        stand_in.push(0);
        let stand_in = Csr::new_trusted_pub((0, 0), stand_in, Vec::new(), Vec::new());
        let (mut indptr, mut indices, mut data) =
            std::mem::replace(&mut self.a, stand_in).into_raw_storage();
        indptr.clear();
        indptr.reserve(n + 1);
        // Room for the largest Ã′ of `graph` (nothing dropped, every self-loop added), so a
        // later sample never grows the buffers.
        let cap = graph.nnz() + n;
        indices.clear();
        indices.reserve(cap);
        indptr.push(0usize);
        // Ã′'s rows as `NormAdj::new` lays them out: the kept neighbours below i, the
        // self-loop (the input's, or the added one), the kept neighbours above i.
        for i in 0..n {
            // Node ids fit in u32: `Graph` guarantees n ≤ u32::MAX.
            let u = i as u32;
            indices.extend(tilde_row(graph.neighbors(i), u).filter(|&j| j == u || keep(u, j)));
            indptr.push(indices.len());
        }
        // The degree of Ã′'s row i is its length.
        data.clear();
        data.reserve(cap);
        match norm {
            Norm::Symmetric => {
                let inv_sqrt = &mut spare.inv_sqrt;
                inv_sqrt.clear();
                inv_sqrt.extend(indptr.windows(2).map(|w| {
                    let d = w[1] - w[0];
                    F::from_f64_lossy(1.0 / (d as f64).sqrt())
                }));
                for i in 0..n {
                    for &j in &indices[indptr[i]..indptr[i + 1]] {
                        data.push(inv_sqrt[i] * inv_sqrt[j as usize]);
                    }
                }
            }
            Norm::Row => {
                for i in 0..n {
                    let d = indptr[i + 1] - indptr[i];
                    let w = F::from_f64_lossy(1.0 / d as f64);
                    data.extend(std::iter::repeat_n(w, d));
                }
            }
        }
        let a = Csr::new_trusted_pub((n, n), indptr, indices, data);
        let (fill, _, _) = std::mem::replace(&mut self.a, a).into_raw_storage();
        let symmetric = !graph.is_directed() && norm == Norm::Symmetric;
        self.norm = norm;
        self.store_transpose(symmetric, cap, fill, spare);
    }

    /// Makes room in an empty Â (and in `spare`) for up to `n` nodes and `nnz` entries of Â
    /// and of Âᵀ, so that `NormAdj::assign_filtered` and `NormAdj::rewrite_values` on such
    /// subgraphs allocate nothing.
    pub(crate) fn reserve(&mut self, n: usize, nnz: usize, spare: &mut AdjScratch<F>) {
        let empty = |n: usize, nnz: usize| {
            let mut ip = Vec::with_capacity(n + 1);
            ip.push(0usize);
            Csr::new_trusted_pub((0, 0), ip, Vec::with_capacity(nnz), Vec::with_capacity(nnz))
        };
        if self.a.nnz() == 0 && self.a.rows() == 0 {
            self.a = empty(n, nnz);
        }
        if self.a_t.is_none() && spare.a_t.is_none() {
            spare.a_t = Some(empty(n, nnz));
        }
        spare.fill.reserve((n + 1).saturating_sub(spare.fill.len()));
        spare
            .inv_sqrt
            .reserve(n.saturating_sub(spare.inv_sqrt.len()));
    }

    /// Rewrites Â's values in storage order (row by row, each row's entries in order), entry
    /// (i, j) getting `value(i, j)`; the entries stay, Âᵀ is stored (the new values need not
    /// be symmetric) and Â gets a fresh id. What GraphSAINT's batches do to the structure
    /// `NormAdj::assign_filtered` lays out (`crate::sample`).
    ///
    /// # Complexity
    /// O(n + nnz) time; no allocation once Âᵀ's buffers have held as many entries.
    pub(crate) fn rewrite_values(
        &mut self,
        mut value: impl FnMut(usize, u32) -> F,
        spare: &mut AdjScratch<F>,
    ) {
        self.id = DataId::fresh();
        let cap = self.a.nnz();
        for (i, mut row) in self.a.outer_iterator_mut().enumerate() {
            for (j, v) in row.iter_mut() {
                // Column ids fit in u32 (the index type).
                *v = value(i, j as u32);
            }
        }
        let fill = std::mem::take(&mut spare.fill);
        self.store_transpose(false, cap, fill, spare);
    }

    /// Stores Âᵀ (in the storage of the last one, or the one kept aside) unless `symmetric`,
    /// when that storage is kept aside in `spare`; `fill` is the transpose's cursors' buffer
    /// (given back to `spare`).
    fn store_transpose(
        &mut self,
        symmetric: bool,
        cap: usize,
        mut fill: Vec<usize>,
        spare: &mut AdjScratch<F>,
    ) {
        let n = self.a.rows();
        // Âᵀ's storage: the stored transpose, or the one kept aside.
        let old_t = self.a_t.take().or_else(|| spare.a_t.take());
        if symmetric {
            spare.a_t = old_t;
        } else {
            let (indptr, mut indices, mut data) = match old_t {
                Some(t) => t.into_raw_storage(),
                None => (Vec::new(), Vec::new(), Vec::new()),
            };
            // Room for `cap` entries, so that a later, bigger sample never grows the buffers.
            let nnz = self.a.nnz();
            indices.clear();
            indices.reserve(cap.max(nnz));
            data.clear();
            data.reserve(cap.max(nnz));
            let mut t = CsrArrays {
                indptr,
                indices,
                data,
            };
            let ip = self.a.indptr();
            transpose_into(
                n,
                ip.raw_storage(),
                self.a.indices(),
                Some(self.a.data()),
                &mut t,
                &mut fill,
                None,
            );
            let CsrArrays {
                indptr: t_indptr,
                indices: t_indices,
                data: t_data,
            } = t;
            self.a_t = Some(Csr::new_trusted_pub((n, n), t_indptr, t_indices, t_data));
        }
        spare.fill = fill;
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

/// Row `u` of Ã′ = A + I (the input's self-loop kept, a missing one added) as [`NormAdj`] lays
/// it out, from the graph's sorted row `row`: the neighbours below u, the self-loop, the
/// neighbours above u.
pub(crate) fn tilde_row(row: &[u32], u: u32) -> impl Iterator<Item = u32> + '_ {
    let pos = row.partition_point(|&j| j < u);
    row[..pos]
        .iter()
        .copied()
        .chain(std::iter::once(u))
        .chain(row[pos..].iter().copied().filter(move |&j| j != u))
}

/// d̃_i: the length of Ã′'s row `i`.
pub(super) fn tilde_len(graph: &Graph, i: usize) -> usize {
    let row = graph.neighbors(i);
    // Node ids fit in u32: `Graph` guarantees n ≤ u32::MAX.
    row.len() + usize::from(row.binary_search(&(i as u32)).is_err())
}

/// The row pointers of Â (`n + 1` of them): those of `NormAdj::new(graph, _).a()`, without
/// building it (what a row partition balances, [`crate::dist::RowPartition::of_graph`]).
pub fn adj_indptr(graph: &Graph) -> Vec<usize> {
    use rayon::prelude::*;
    let n = graph.n_nodes();
    // The row lengths in parallel, then their running sum.
    let mut ip = vec![0usize; n + 1];
    ip[1..]
        .par_iter_mut()
        .enumerate()
        .for_each(|(i, d)| *d = tilde_len(graph, i));
    for i in 0..n {
        ip[i + 1] += ip[i];
    }
    ip
}

/// Entries of Â that one task of [`NormAdj::new`] fills at a time.
const FILL_NNZ: usize = 1 << 16;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{Direction, NormRows};
    use rand::{RngExt, SeedableRng};

    /// A random graph of `n` nodes with some self-loops and isolated nodes.
    fn graph(n: usize, seed: u64, direction: Direction) -> Graph {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let edges: Vec<(u32, u32)> = (0..3 * n)
            .map(|_| {
                (
                    rng.random_range(0..n as u32 - 3),
                    rng.random_range(0..n as u32 - 3),
                )
            })
            .collect();
        Graph::try_from_edges(n, &edges, direction).unwrap()
    }

    /// Rows `range` of `m`, row pointers from 0.
    fn rows(
        m: CsrView<'_, f32>,
        range: std::ops::Range<usize>,
    ) -> (Vec<usize>, Vec<u32>, Vec<u32>) {
        let ip = m.indptr();
        let ip = ip.raw_storage();
        let (lo, hi) = (ip[range.start], ip[range.end]);
        (
            ip[range.clone()]
                .iter()
                .chain([&hi])
                .map(|&p| p - lo)
                .collect(),
            m.indices()[lo..hi].to_vec(),
            m.data()[lo..hi].iter().map(|v| v.to_bits()).collect(),
        )
    }

    #[test]
    fn rows_are_bit_for_bit_the_rows_of_the_whole_adjacency() {
        for (seed, direction) in [(1, Direction::Undirected), (2, Direction::Directed)] {
            let g = graph(60, seed, direction);
            for norm in [Norm::Symmetric, Norm::Row] {
                let whole = NormAdj::<f32>::new(&g, norm);
                assert_eq!(adj_indptr(&g), whole.a().indptr().raw_storage());
                for range in [0..60, 0..17, 17..41, 41..60, 30..30, 57..60] {
                    let part = NormRows::<f32>::new(&g, norm, range.clone());
                    assert_eq!(part.is_symmetric(), whole.is_symmetric(), "{norm:?}");
                    assert_eq!(part.nnz_total(), whole.nnz());
                    assert_eq!((part.n_nodes(), part.range()), (60, range.clone()));
                    assert_eq!(
                        rows(part.a(), 0..range.len()),
                        rows(whole.a(), range.clone())
                    );
                    assert_eq!(
                        rows(part.a_t(), 0..range.len()),
                        rows(whole.a_t(), range.clone()),
                        "{direction:?} {norm:?} {range:?}"
                    );
                }
            }
        }
    }

    /// `NormAdj::new`'s parallel build is `assign_filtered` keeping everything, bit for bit and
    /// with the same capacity, at any thread count (runs of rows several, one row longer than
    /// a run).
    #[test]
    fn the_parallel_build_is_the_filtered_build_of_everything() {
        // 98,304 nodes, one of them a hub whose row is longer than a run.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let mut edges: Vec<(u32, u32)> = (0..120_000)
            .map(|_| (rng.random_range(0..40_000), rng.random_range(0..40_000)))
            .collect();
        let n = 3 * FILL_NNZ as u32 / 2;
        edges.extend((1..n).map(|j| (7, j)));
        let big = Graph::try_from_edges(n as usize, &edges, Direction::Undirected).unwrap();
        assert!(big.degree(7) > FILL_NNZ, "a row longer than a run");
        let graphs = [
            big,
            graph(500, 4, Direction::Directed),
            graph(5, 5, Direction::Undirected),
            Graph::try_from_edges(0, &[], Direction::Undirected).unwrap(),
        ];
        for g in graphs {
            for norm in [Norm::Symmetric, Norm::Row] {
                let mut want = NormAdj::<f32>::empty(norm);
                want.assign_filtered(&g, norm, |_, _| true, &mut AdjScratch::default());
                let all = |m: CsrView<'_, f32>| rows(m, 0..m.rows());
                for threads in [1, 3] {
                    let pool = rayon::ThreadPoolBuilder::new()
                        .num_threads(threads)
                        .build()
                        .unwrap();
                    let got = pool.install(|| NormAdj::<f32>::new(&g, norm));
                    assert_eq!(got.is_symmetric(), want.is_symmetric());
                    assert_eq!(all(got.a()), all(want.a()), "{norm:?} {threads}");
                    assert_eq!(all(got.a_t()), all(want.a_t()), "{norm:?} {threads}");
                    // Room for a later sample of the graph, as `assign_filtered` leaves.
                    let (_, indices, data) = got.a.into_raw_storage();
                    let cap = g.nnz() + g.n_nodes();
                    assert!(indices.capacity() >= cap && data.capacity() >= cap);
                }
            }
        }
    }

    /// Cluster-GCN's diagonal enhancement: the diagonal entries a + λ·a, nothing else
    /// changed, in Â and its stored transpose alike; with row normalisation, the paper's
    /// (1 + λ)/(d̃_i) on the diagonal and 1/d̃_i off it.
    #[test]
    fn the_diagonal_enhancement_scales_the_diagonal_alone() {
        for (norm, direction) in [
            (Norm::Row, Direction::Undirected),
            (Norm::Symmetric, Direction::Undirected),
            (Norm::Symmetric, Direction::Directed),
        ] {
            let g = graph(40, 7, direction);
            let base = NormAdj::<f32>::new(&g, norm);
            let mut e = base.clone();
            e.enhance_diagonal(0.0);
            assert_eq!(e.id(), base.id(), "λ = 0 changes nothing");
            e.enhance_diagonal(0.75);
            assert_ne!(e.id(), base.id());
            let (a, b) = (base.a(), e.a());
            assert_eq!(a.indptr(), b.indptr());
            assert_eq!(a.indices(), b.indices());
            for i in 0..40 {
                for (j, &v) in a.outer_view(i).unwrap().iter() {
                    let w = *b.get(i, j).unwrap();
                    let want = if i == j { v + 0.75 * v } else { v };
                    assert_eq!(w.to_bits(), want.to_bits(), "{norm:?} ({i}, {j})");
                    if norm == Norm::Row && i == j {
                        let d = a.outer_view(i).unwrap().nnz() as f32;
                        assert!((w - 1.75 / d).abs() <= 1e-6, "{w} vs 1.75/{d}");
                    }
                }
            }
            // Âᵀ is the transpose of the enhanced Â.
            let t = e.a_t();
            for i in 0..40 {
                for (j, &v) in b.outer_view(i).unwrap().iter() {
                    assert_eq!(t.get(j, i).unwrap().to_bits(), v.to_bits());
                }
            }
        }
    }
}
