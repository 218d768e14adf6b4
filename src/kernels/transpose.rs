//! `transpose`: the CSR transpose (a counting sort by column), the one every transpose in the
//! crate goes through: Âᵀ of a directed or row-normalised Â ([`NormAdj`]), Xᵀ of sparse
//! features with each entry's position in it ([`SparseFeatures`]), the pattern transpose of a
//! directed graph (`order::permute_graph`) and CSC input read as CSR (`io::npz`).
//!
//! The output is exactly what `a.transpose_view().to_csr()` gives for a CSR `a` with sorted
//! rows: row `j` of Aᵀ lists the rows `i` of A with an entry in column `j`, in ascending `i`
//! (ties, i.e. repeated entries of one row, in stored order), each with its value copied.
//! The tests check it against sprs's `transpose_view().to_csr()` and a dense transpose.
//!
//! `transpose_into` allocates nothing once its buffers are big enough (the kernels'
//! convention); [`transpose`], `transpose_with_pos` and `transpose_pattern` are
//! conveniences that return fresh buffers.
//!
//! [`NormAdj`]: crate::graph::NormAdj
//! [`SparseFeatures`]: crate::data::SparseFeatures

/// The storage of a CSR matrix with `u32` indices: `indptr` (rows + 1 row pointers from 0),
/// `indices` and `data` (empty for a pattern without values).
#[derive(Debug, Clone, PartialEq)]
pub struct CsrArrays<T> {
    /// Row pointers: row `i`'s entries are `indptr[i]..indptr[i + 1]`.
    pub indptr: Vec<usize>,
    /// Column indices, row after row.
    pub indices: Vec<u32>,
    /// Values, parallel to `indices` (empty for a pattern).
    pub data: Vec<T>,
}

impl<T> Default for CsrArrays<T> {
    /// Empty buffers (no allocation).
    fn default() -> Self {
        CsrArrays {
            indptr: Vec::new(),
            indices: Vec::new(),
            data: Vec::new(),
        }
    }
}

/// The transpose of the `m × n_cols` CSR matrix given by `indptr` (m + 1 non-decreasing row
/// pointers; they may start at an offset, as a sliced view's do), `indices` and `data`
/// (`None`: the pattern only), written into `out` by a counting sort over columns, with `fill`
/// as the cursors. `pos`, when given, receives for every entry `k` of the input (position in
/// `indices`) its position in `out.indices`.
///
/// `out` is `n_cols × m`: rows sorted by the input row index, values copied (see the
/// [module docs](self)); `out.data` is left empty for `data = None`. The buffers' capacity is
/// reused, so nothing is allocated when they are big enough (reserve ahead of the call to
/// keep room for later, bigger inputs).
///
/// # Panics
/// If `indices` (or `data`) does not hold exactly the `indptr[m] - indptr[0]` entries, or a
/// column index is not below `n_cols`.
///
/// # Complexity
/// O(m + n_cols + nnz) time; no allocation beyond growing the output buffers.
///
/// # Examples
/// ```
/// use sparse_gcn::kernels::transpose::{transpose_into, CsrArrays};
/// // A = [[1, 2, 0], [0, 0, 3]]
/// let (ip, idx, val) = ([0, 2, 3], [0u32, 1, 2], [1.0f32, 2.0, 3.0]);
/// let (mut t, mut fill, mut pos) = (CsrArrays::default(), Vec::new(), Vec::new());
/// transpose_into(3, &ip, &idx, Some(&val), &mut t, &mut fill, Some(&mut pos));
/// assert_eq!(t.indptr, [0, 1, 2, 3]);
/// assert_eq!(t.indices, [0, 0, 1]);
/// assert_eq!(t.data, [1.0, 2.0, 3.0]);
/// assert_eq!(pos, [0, 1, 2]);
/// ```
#[track_caller]
pub fn transpose_into<T: Copy>(
    n_cols: usize,
    indptr: &[usize],
    indices: &[u32],
    data: Option<&[T]>,
    out: &mut CsrArrays<T>,
    fill: &mut Vec<usize>,
    pos: Option<&mut Vec<usize>>,
) {
    let m = indptr.len().saturating_sub(1);
    let off = indptr.first().copied().unwrap_or(0);
    let nnz = indptr.last().copied().unwrap_or(0) - off;
    assert!(
        indices.len() == nnz && data.is_none_or(|d| d.len() == nnz),
        "transpose: {nnz} entries by the row pointers, {} indices, {:?} values",
        indices.len(),
        data.map(<[T]>::len)
    );
    let CsrArrays {
        indptr: t_indptr,
        indices: t_indices,
        data: t_data,
    } = out;
    t_indptr.clear();
    t_indptr.resize(n_cols + 1, 0);
    for &j in indices {
        t_indptr[j as usize + 1] += 1;
    }
    for j in 0..n_cols {
        t_indptr[j + 1] += t_indptr[j];
    }
    fill.clear();
    fill.extend_from_slice(&t_indptr[..n_cols]);
    t_indices.clear();
    t_indices.resize(nnz, 0);
    t_data.clear();
    // One scatter loop, monomorphised per case (no branch in the loop).
    let rows = (m, indptr, off, indices);
    match (data, pos) {
        (Some(d), Some(pos)) => {
            // Every slot is overwritten; starting from a copy of the values needs no
            // `Default` for `T`.
            t_data.extend_from_slice(d);
            pos.clear();
            pos.resize(nnz, 0);
            scatter(rows, fill, t_indices, |k, p| {
                t_data[p] = d[k];
                pos[k] = p;
            });
        }
        (Some(d), None) => {
            t_data.extend_from_slice(d);
            scatter(rows, fill, t_indices, |k, p| t_data[p] = d[k]);
        }
        (None, Some(pos)) => {
            pos.clear();
            pos.resize(nnz, 0);
            scatter(rows, fill, t_indices, |k, p| pos[k] = p);
        }
        (None, None) => scatter(rows, fill, t_indices, |_, _| {}),
    }
}

/// The counting sort's placement pass: for the rows `i` of `(m, indptr, off, indices)` in
/// order and their entries `k` in stored order, the entry goes to `p = fill[j]` of its column
/// `j` (then `fill[j] += 1`): `t_indices[p] = i`, and `put(k, p)` moves the rest.
#[inline(always)]
fn scatter(
    (m, indptr, off, indices): (usize, &[usize], usize, &[u32]),
    fill: &mut [usize],
    t_indices: &mut [u32],
    mut put: impl FnMut(usize, usize),
) {
    for i in 0..m {
        for k in indptr[i] - off..indptr[i + 1] - off {
            let j = indices[k] as usize;
            let p = fill[j];
            t_indices[p] = i as u32;
            put(k, p);
            fill[j] += 1;
        }
    }
}

/// `transpose_into` into fresh buffers: the transpose of an `m × n_cols` CSR, with values
/// (`data = Some`) or as a pattern (`None`: `data` of the result empty).
///
/// # Panics
/// As `transpose_into`.
#[track_caller]
pub fn transpose<T: Copy>(
    n_cols: usize,
    indptr: &[usize],
    indices: &[u32],
    data: Option<&[T]>,
) -> CsrArrays<T> {
    let mut out = CsrArrays::default();
    transpose_into(
        n_cols,
        indptr,
        indices,
        data,
        &mut out,
        &mut Vec::new(),
        None,
    );
    out
}

/// [`transpose`] also returning, for every input entry `k`, its position in the result.
///
/// # Panics
/// As [`transpose_into`].
#[track_caller]
pub(crate) fn transpose_with_pos<T: Copy>(
    n_cols: usize,
    indptr: &[usize],
    indices: &[u32],
    data: Option<&[T]>,
) -> (CsrArrays<T>, Vec<usize>) {
    let (mut out, mut pos) = (CsrArrays::default(), Vec::new());
    transpose_into(
        n_cols,
        indptr,
        indices,
        data,
        &mut out,
        &mut Vec::new(),
        Some(&mut pos),
    );
    (out, pos)
}

#[cfg(test)]
/// The transpose of an `m × n_cols` CSR pattern (no values): row pointers and indices.
///
/// # Panics
/// As [`transpose_into`].
#[track_caller]
pub(crate) fn transpose_pattern(
    n_cols: usize,
    indptr: &[usize],
    indices: &[u32],
) -> (Vec<usize>, Vec<u32>) {
    let t = transpose::<()>(n_cols, indptr, indices, None);
    (t.indptr, t.indices)
}

#[cfg(test)]
mod tests {
    use ndarray::Array2;

    use super::*;
    use crate::kernels::Csr;

    fn to_dense(shape: (usize, usize), ip: &[usize], idx: &[u32], val: &[f64]) -> Array2<f64> {
        let mut d = Array2::zeros(shape);
        for i in 0..shape.0 {
            for k in ip[i] - ip[0]..ip[i + 1] - ip[0] {
                d[[i, idx[k] as usize]] += val[k];
            }
        }
        d
    }

    /// A seeded `m × n` CSR with sorted rows, empty rows and (for n > 3) empty columns.
    fn random(m: usize, n: usize, seed: u64) -> Csr<f64> {
        let mut s = seed;
        let mut next = move || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 33) as usize
        };
        let (mut ip, mut idx, mut val) = (vec![0], vec![], vec![]);
        for _ in 0..m {
            if n > 0 && next() % 4 != 0 {
                let mut cols: Vec<u32> = (0..next() % (n + 1))
                    .map(|_| (next() % n) as u32)
                    .filter(|&c| n <= 3 || c % 4 != 1)
                    .collect();
                cols.sort_unstable();
                cols.dedup();
                for c in cols {
                    idx.push(c);
                    val.push(next() as f64 / 7.0 - 1e8);
                }
            }
            ip.push(idx.len());
        }
        Csr::new((m, n), ip, idx, val)
    }

    fn check(a: &Csr<f64>) {
        let (m, n) = a.shape();
        let ip = a.indptr();
        let ip = ip.raw_storage();
        let (t, pos) = transpose_with_pos(n, ip, a.indices(), Some(a.data()));
        // Against sprs, bit for bit.
        let want = a.transpose_view().to_csr();
        assert_eq!(t.indptr, want.indptr().raw_storage(), "{m}×{n}");
        assert_eq!(t.indices, want.indices(), "{m}×{n}");
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&t.data), bits(want.data()), "{m}×{n}");
        // Against a dense transpose.
        let dense = to_dense((m, n), ip, a.indices(), a.data());
        assert_eq!(to_dense((n, m), &t.indptr, &t.indices, &t.data), dense.t());
        // Every input entry lands at its recorded position; the pattern alone is the same.
        for (k, &p) in pos.iter().enumerate() {
            assert_eq!(t.data[p].to_bits(), a.data()[k].to_bits());
            assert_eq!(t.indices[p] as usize, ip.partition_point(|&q| q <= k) - 1);
        }
        let (tip, tidx) = transpose_pattern(n, ip, a.indices());
        assert_eq!((tip, tidx), (t.indptr.clone(), t.indices.clone()));
        // Reused buffers (dirty, too big) give the same result.
        let mut out = CsrArrays {
            indptr: vec![7; 3 * n + 5],
            indices: vec![9; 2 * a.nnz() + 3],
            data: vec![f64::NAN; a.nnz() + 1],
        };
        let (mut fill, mut pos2) = (vec![5; 4], vec![1; 3]);
        transpose_into(
            n,
            ip,
            a.indices(),
            Some(a.data()),
            &mut out,
            &mut fill,
            Some(&mut pos2),
        );
        assert_eq!(bits(&out.data), bits(&t.data));
        assert_eq!((out.indptr, out.indices, pos2), (t.indptr, t.indices, pos));
    }

    #[test]
    fn matches_sprs_and_dense() {
        for (m, n) in [
            (0, 0),
            (0, 3),
            (3, 0),
            (1, 1),
            (5, 2),
            (2, 5),
            (40, 40),
            (97, 31),
        ] {
            for seed in 0..4 {
                check(&random(m, n, seed));
            }
        }
        // All rows and columns empty.
        check(&Csr::new((3, 4), vec![0; 4], vec![], vec![]));
    }

    #[test]
    fn a_sliced_view_with_an_offset_row_pointer() {
        let a = random(30, 12, 3);
        let v = a.slice_outer(7..19);
        let ip = v.indptr();
        let (t, pos) = transpose_with_pos(12, ip.raw_storage(), v.indices(), Some(v.data()));
        let want = v.transpose_view().to_csr();
        assert_eq!(t.indptr, want.indptr().raw_storage());
        assert_eq!(t.indices, want.indices());
        assert_eq!(t.data, want.data());
        for (k, &p) in pos.iter().enumerate() {
            assert_eq!(t.data[p], v.data()[k]);
        }
    }

    #[test]
    fn an_empty_row_pointer_is_a_0_by_n_matrix() {
        let t = transpose::<f32>(2, &[], &[], Some(&[]));
        assert_eq!(
            (t.indptr, t.indices, t.data),
            (vec![0, 0, 0], vec![], vec![])
        );
    }

    #[test]
    #[should_panic(expected = "transpose: 2 entries")]
    fn checks_the_entry_count() {
        transpose(2, &[0, 2], &[0], Some(&[1.0f32, 2.0]));
    }

    #[test]
    #[should_panic]
    fn checks_the_column_indices() {
        transpose_pattern(2, &[0, 1], &[2]);
    }
}
