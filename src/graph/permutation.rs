//! [`Permutation`]: a relabelling of a graph's nodes, and its application to the graph
//! ([`permute_graph`]) and to per-node arrays ([`permute_rows`], [`unpermute_rows`],
//! [`permute_slice`], [`unpermute_slice`]). The orders themselves are computed in
//! [`crate::order`].
//!
//! # Convention
//! A [`Permutation`] maps new ids to old ids and back: after applying it, row `r` holds the
//! node whose old id is `new_to_old()[r]`, and old node `i` sits at row `old_to_new()[i]`.

pub(crate) use crate::kernels::rows::gather_rows;
use ndarray::{Array2, ArrayView2};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::Graph;
use crate::{Error, Result};

/// A permutation of `0..n` node ids, stored both ways (`new → old` and `old → new`).
///
/// # Examples
/// ```
/// use sparse_gcn::order::Permutation;
/// let p = Permutation::try_from_new_to_old(vec![2, 0, 1]).unwrap();
/// assert_eq!(p.old_to_new(), &[1, 2, 0]);
/// assert_eq!(p.inverse().inverse(), p);
/// assert!(Permutation::try_from_new_to_old(vec![0, 0, 1]).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permutation {
    new_to_old: Vec<u32>,
    old_to_new: Vec<u32>,
}

impl Permutation {
    /// The identity on `n` nodes.
    ///
    /// # Panics
    /// If `n` does not fit in `u32` (no [`Graph`] has that many nodes).
    pub fn identity(n: usize) -> Self {
        let v = ids(n);
        Permutation {
            old_to_new: v.clone(),
            new_to_old: v,
        }
    }

    /// A uniformly random permutation of `n` nodes (Fisher–Yates on a ChaCha8 stream of
    /// `seed`): the same for the same `(n, seed)` on every machine.
    ///
    /// # Panics
    /// If `n` does not fit in `u32`.
    pub fn random(n: usize, seed: u64) -> Self {
        let mut v = ids(n);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        for i in (1..n).rev() {
            v.swap(i, rng.random_range(0..=i));
        }
        Self::from_new_to_old_trusted(v)
    }

    /// The permutation placing old node `new_to_old[r]` at row `r`.
    ///
    /// # Errors
    /// [`Error::NodeOutOfRange`] for an entry ≥ n, [`Error::Mismatch`] for an id given twice
    /// or a length that does not fit in `u32`.
    pub fn try_from_new_to_old(new_to_old: Vec<u32>) -> Result<Self> {
        let old_to_new = invert_checked(&new_to_old)?;
        Ok(Permutation {
            new_to_old,
            old_to_new,
        })
    }

    /// The permutation moving old node `i` to row `old_to_new[i]`.
    ///
    /// # Errors
    /// As `Permutation::try_from_new_to_old`.
    pub fn try_from_old_to_new(old_to_new: Vec<u32>) -> Result<Self> {
        let new_to_old = invert_checked(&old_to_new)?;
        Ok(Permutation {
            new_to_old,
            old_to_new,
        })
    }

    /// From a `new → old` list this module built itself (a bijection by construction).
    /// The new-to-old map, consumed.
    pub(crate) fn into_new_to_old(self) -> Vec<u32> {
        self.new_to_old
    }

    pub(crate) fn from_new_to_old_trusted(new_to_old: Vec<u32>) -> Self {
        let mut old_to_new = vec![0u32; new_to_old.len()];
        for (r, &o) in new_to_old.iter().enumerate() {
            old_to_new[o as usize] = r as u32;
        }
        debug_assert!(invert_checked(&new_to_old).is_ok());
        Permutation {
            new_to_old,
            old_to_new,
        }
    }

    /// The inverse permutation (applying it undoes `self`).
    pub fn inverse(&self) -> Self {
        Permutation {
            new_to_old: self.old_to_new.clone(),
            old_to_new: self.new_to_old.clone(),
        }
    }

    /// `self` followed by `next` (ids of `next` refer to the order `self` produces): applying
    /// the result equals applying `self`, then `next`.
    ///
    /// # Panics
    /// If the lengths differ.
    #[track_caller]
    pub fn then(&self, next: &Permutation) -> Permutation {
        assert_eq!(
            self.len(),
            next.len(),
            "Permutation::then: lengths {} and {} differ",
            self.len(),
            next.len()
        );
        let v = next
            .new_to_old
            .iter()
            .map(|&m| self.new_to_old[m as usize])
            .collect();
        Self::from_new_to_old_trusted(v)
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.new_to_old.len()
    }
    /// Whether it permutes no node.
    pub fn is_empty(&self) -> bool {
        self.new_to_old.is_empty()
    }
    /// `new_to_old()[r]`: the old id of the node at row `r`.
    pub fn new_to_old(&self) -> &[u32] {
        &self.new_to_old
    }
    /// `old_to_new()[i]`: the row of old node `i`.
    pub fn old_to_new(&self) -> &[u32] {
        &self.old_to_new
    }
    /// Whether this is the identity.
    pub fn is_identity(&self) -> bool {
        self.new_to_old
            .iter()
            .enumerate()
            .all(|(r, &o)| r == o as usize)
    }
}

/// `0..n` as `u32`.
pub(crate) fn ids(n: usize) -> Vec<u32> {
    assert!(
        u32::try_from(n).is_ok(),
        "a permutation of {n} nodes does not fit in u32"
    );
    (0..n as u32).collect()
}

/// The inverse of `v`, checking that it is a permutation of `0..v.len()`.
fn invert_checked(v: &[u32]) -> Result<Vec<u32>> {
    let n = v.len();
    if u32::try_from(n).is_err() {
        return Err(Error::Mismatch {
            what: "permutation length (must fit in u32)".into(),
            expected: u32::MAX as usize,
            got: n,
        });
    }
    // n ≤ u32::MAX, so every valid entry is < u32::MAX: the sentinel is free.
    let mut inv = vec![u32::MAX; n];
    for (k, &x) in v.iter().enumerate() {
        let slot = inv.get_mut(x as usize).ok_or(Error::NodeOutOfRange {
            index: i64::from(x),
            n_nodes: n,
        })?;
        if *slot != u32::MAX {
            return Err(Error::Mismatch {
                what: format!("permutation: id {x} given more than once (copies)"),
                expected: 1,
                got: 2,
            });
        }
        *slot = k as u32;
    }
    Ok(inv)
}

/// The graph relabelled by `perm`: node `new_to_old[r]` becomes node `r`. Each new row lists
/// its neighbours sorted by new id (as every [`Graph`] does), so a row's entries are in a
/// different relative order than before, and SpMM on the permuted Â sums each row in a
/// different order: results agree to rounding, not bit for bit.
///
/// Rows are built in parallel (blocks of rows, each row relabelled and sorted on its own), so
/// the result does not depend on the thread count.
///
/// # Panics
/// If `perm.len() != graph.n_nodes()`.
///
/// # Complexity
/// O(n + Σ deg·log deg) work, O(n + nnz) memory.
#[track_caller]
pub fn permute_graph(graph: &Graph, perm: &Permutation) -> Graph {
    use rayon::prelude::*;
    let n = graph.n_nodes();
    len_check("permute_graph", n, perm.len());
    let (q, p) = (perm.new_to_old(), perm.old_to_new());
    let mut new_ip = vec![0usize; n + 1];
    for r in 0..n {
        new_ip[r + 1] = new_ip[r] + graph.degree(q[r] as usize);
    }
    let mut new_idx = vec![0u32; graph.indices().len()];
    // Blocks of PERMUTE_BLOCK rows, each owning its stretch of `new_idx`.
    let mut blocks: Vec<(usize, &mut [u32])> = Vec::with_capacity(n.div_ceil(PERMUTE_BLOCK));
    let mut rest: &mut [u32] = &mut new_idx;
    for r0 in (0..n).step_by(PERMUTE_BLOCK) {
        let r1 = (r0 + PERMUTE_BLOCK).min(n);
        let (head, tail) = rest.split_at_mut(new_ip[r1] - new_ip[r0]);
        blocks.push((r0, head));
        rest = tail;
    }
    blocks.into_par_iter().for_each(|(r0, out)| {
        let r1 = (r0 + PERMUTE_BLOCK).min(n);
        let base = new_ip[r0];
        for r in r0..r1 {
            let row = &mut out[new_ip[r] - base..new_ip[r + 1] - base];
            for (o, &j) in row.iter_mut().zip(graph.neighbors(q[r] as usize)) {
                *o = p[j as usize];
            }
            row.sort_unstable();
        }
    });
    Graph {
        n_nodes: n,
        indptr: new_ip,
        indices: new_idx,
        directed: graph.is_directed(),
        stats: graph.stats(),
    }
}

/// Rows per parallel block of [`permute_graph`].
const PERMUTE_BLOCK: usize = 4096;

/// Rows of `a` in the new order: row `r` of the result is row `new_to_old[r]` of `a`.
///
/// # Panics
/// If `a.nrows() != perm.len()`.
#[track_caller]
pub fn permute_rows<F: Clone + Send + Sync>(perm: &Permutation, a: ArrayView2<'_, F>) -> Array2<F> {
    len_check("permute_rows", a.nrows(), perm.len());
    gather_rows(a, perm.new_to_old())
}

/// Rows of `a` (in the order `perm` produced) back in the original order: row `i` of the
/// result is row `old_to_new[i]` of `a`. Undoes [`permute_rows`].
///
/// # Panics
/// If `a.nrows() != perm.len()`.
///
/// # Examples
/// ```
/// use ndarray::array;
/// use sparse_gcn::order::{permute_rows, unpermute_rows, Permutation};
/// let p = Permutation::random(3, 1);
/// let x = array![[1, 2], [3, 4], [5, 6]];
/// assert_eq!(unpermute_rows(&p, permute_rows(&p, x.view()).view()), x);
/// ```
#[track_caller]
pub fn unpermute_rows<F: Clone + Send + Sync>(
    perm: &Permutation,
    a: ArrayView2<'_, F>,
) -> Array2<F> {
    len_check("unpermute_rows", a.nrows(), perm.len());
    gather_rows(a, perm.old_to_new())
}

/// `a` in the new order: element `r` is `a[new_to_old[r]]`.
///
/// # Panics
/// If `a.len() != perm.len()`.
#[track_caller]
pub fn permute_slice<T: Clone>(perm: &Permutation, a: &[T]) -> Vec<T> {
    len_check("permute_slice", a.len(), perm.len());
    perm.new_to_old()
        .iter()
        .map(|&o| a[o as usize].clone())
        .collect()
}

/// `a` (in the order `perm` produced) back in the original order: element `i` is
/// `a[old_to_new[i]]`. Undoes [`permute_slice`].
///
/// # Panics
/// If `a.len() != perm.len()`.
#[track_caller]
pub fn unpermute_slice<T: Clone>(perm: &Permutation, a: &[T]) -> Vec<T> {
    len_check("unpermute_slice", a.len(), perm.len());
    perm.old_to_new()
        .iter()
        .map(|&r| a[r as usize].clone())
        .collect()
}

#[cold]
#[inline(never)]
#[track_caller]
pub(crate) fn len_mismatch(what: &str, rows: usize, perm: usize) -> ! {
    panic!("{what}: {rows} rows but a permutation of {perm} nodes");
}

#[inline]
#[track_caller]
pub(crate) fn len_check(what: &str, rows: usize, perm: usize) {
    if rows != perm {
        len_mismatch(what, rows, perm);
    }
}
