//! Sparse matrices from `.npz` arrays: the `shape` checked against what the matrix must be
//! ([`Dims`]: a square adjacency of at most so many nodes, or features of so many rows), a CSR or
//! CSC matrix from its `indptr`, `indices` and `data`, a COO matrix from `row`, `col` and `data`,
//! the `scipy.sparse.save_npz` `format` told or inferred, and the result in canonical CSR
//! ([`SparseMatrix`]: rows sorted by column, duplicates summed).

use super::bad;
use super::zip::Archive;
use crate::data::io::MAX_FEATURE_COLS;
use crate::kernels::transpose::transpose;
use crate::{Error, Result};

/// A sparse matrix read from an archive, in canonical CSR (sorted, unique column indices).
pub(super) struct SparseMatrix {
    pub(super) rows: usize,
    pub(super) cols: usize,
    pub(super) indptr: Vec<usize>,
    pub(super) indices: Vec<u32>,
    pub(super) data: Vec<f32>,
}

/// The (indptr, indices, data) of a compressed sparse matrix.
type CsrParts = (Vec<usize>, Vec<u32>, Vec<f32>);

/// What the shape of a sparse matrix must be.
#[derive(Clone, Copy)]
pub(super) enum Dims {
    /// An adjacency: square, with at most this many rows.
    Square(usize),
    /// Features of this many nodes: that many rows, 1 to 2^24 columns.
    FeatureRows(usize),
}

/// Reads the shape array `key`: two non-negative integers, each fitting in `u32`, checked
/// against `dims`.
fn read_shape(ar: &Archive, key: &str, dims: Dims) -> Result<(usize, usize)> {
    let r = ar.array(key)?;
    let len = r.vector_len()?;
    if len != 2 {
        return Err(r.bad(format!("expected 2 dimensions, got {len}")));
    }
    let what = r.what.clone();
    let v = r.ints(|_, x| Ok(x))?;
    let (a, b) = (v[0], v[1]);
    let path = &ar.path;
    if a < 0 || b < 0 || a > u32::MAX as i64 || b > u32::MAX as i64 {
        return Err(bad(
            path,
            format!("{what} = ({a}, {b}): dimensions must lie in 0..2^32"),
        ));
    }
    let (a, b) = (a as usize, b as usize);
    match dims {
        Dims::Square(_) if a != b => Err(Error::Mismatch {
            what: format!("{}: {what}: adjacency columns vs rows", path.display()),
            expected: a,
            got: b,
        }),
        Dims::Square(max) if a > max => Err(bad(
            path,
            format!(
                "{what} = ({a}, {b}): more than the limit of {max} nodes (NpzOptions::max_nodes)"
            ),
        )),
        Dims::FeatureRows(n) if a != n => Err(Error::Mismatch {
            what: format!("{}: {what}: feature rows vs nodes", path.display()),
            expected: n,
            got: a,
        }),
        Dims::FeatureRows(_) if b == 0 || b > MAX_FEATURE_COLS => Err(bad(
            path,
            format!("{what} = ({a}, {b}): feature columns must lie in 1..=2^24"),
        )),
        _ => Ok((a, b)),
    }
}

/// Reads a compressed sparse matrix: `{p}indptr` (`major + 1` entries, from 0, monotone),
/// `{p}indices` (each `< minor`) and `{p}data`. Returns (indptr, indices, data), not yet
/// canonical.
fn read_compressed(
    ar: &Archive,
    p: &str,
    axis: usize,
    major: usize,
    minor: usize,
    minor_name: &str,
) -> Result<CsrParts> {
    let r = ar.array(&format!("{p}indptr"))?;
    let len = r.vector_len()?;
    let want = major.saturating_add(1);
    if len != want {
        return Err(r.mismatch(&format!("length vs '{p}shape'[{axis}] + 1"), want, len));
    }
    let what = r.what.clone();
    let mut prev = 0usize;
    let indptr = r.ints(|k, v| {
        let v = usize::try_from(v)
            .map_err(|_| bad(&ar.path, format!("{what}[{k}] = {v} is negative")))?;
        if k == 0 && v != 0 {
            return Err(bad(&ar.path, format!("{what}[0] = {v}, expected 0")));
        }
        if v < prev {
            return Err(bad(
                &ar.path,
                format!(
                    "{what} is not monotone: [{k}] = {v} after [{}] = {prev}",
                    k - 1
                ),
            ));
        }
        prev = v;
        Ok(v)
    })?;
    let nnz = indptr.last().copied().unwrap_or(0);
    let indices = read_index_array(ar, &format!("{p}indices"), nnz, minor, minor_name)?;
    let data = read_value_array(ar, &format!("{p}data"), nnz)?;
    Ok((indptr, indices, data))
}

/// Reads a 1-D integer array of `nnz` indices, each `< bound`.
fn read_index_array(
    ar: &Archive,
    key: &str,
    nnz: usize,
    bound: usize,
    bound_name: &str,
) -> Result<Vec<u32>> {
    let r = ar.array(key)?;
    let len = r.vector_len()?;
    if len != nnz {
        return Err(r.mismatch("length vs the number of stored entries", nnz, len));
    }
    let what = r.what.clone();
    r.ints(|k, v| {
        if v < 0 || v >= bound as i64 {
            return Err(bad(
                &ar.path,
                format!("{what}[{k}] = {v} out of range for {bound} {bound_name}"),
            ));
        }
        Ok(v as u32)
    })
}

/// Reads a 1-D numeric array of `nnz` values as `f32`.
fn read_value_array(ar: &Archive, key: &str, nnz: usize) -> Result<Vec<f32>> {
    let r = ar.array(key)?;
    let len = r.vector_len()?;
    if len != nnz {
        return Err(r.mismatch("length vs the number of stored entries", nnz, len));
    }
    r.floats(|_, v| Ok(v as f32))
}

/// Reads the CSR matrix `{p}data, {p}indices, {p}indptr, {p}shape`.
pub(super) fn read_csr(ar: &Archive, p: &str, dims: Dims) -> Result<SparseMatrix> {
    let (rows, cols) = read_shape(ar, &format!("{p}shape"), dims)?;
    let (mut indptr, mut indices, mut data) = read_compressed(ar, p, 0, rows, cols, "columns")?;
    canonicalize(&mut indptr, &mut indices, &mut data);
    Ok(SparseMatrix {
        rows,
        cols,
        indptr,
        indices,
        data,
    })
}

/// Reads a `scipy.sparse.save_npz` matrix (`csr`, `csc` or `coo`).
pub(super) fn read_scipy(ar: &Archive, dims: Dims) -> Result<SparseMatrix> {
    let (rows, cols) = read_shape(ar, "shape", dims)?;
    let format = if ar.has("format") {
        ar.array("format")?.string()?
    } else if ar.has("indptr") {
        // no `format`: tell CSR from CSC by the length of indptr
        let len = ar.array("indptr")?.vector_len()?;
        if len == cols.saturating_add(1) && len != rows.saturating_add(1) {
            "csc".to_string()
        } else {
            "csr".to_string()
        }
    } else if ar.has("row") && ar.has("col") {
        "coo".to_string()
    } else {
        return Err(bad(
            &ar.path,
            format!(
                "missing array 'format' (and neither 'indptr' nor 'row'/'col'); arrays: {}",
                ar.names()
            ),
        ));
    };
    let (mut indptr, mut indices, mut data) = match format.as_str() {
        "csr" => read_compressed(ar, "", 0, rows, cols, "columns")?,
        "csc" => {
            let (ip, idx, val) = read_compressed(ar, "", 1, cols, rows, "rows")?;
            // The CSC arrays are the CSR of the transpose; transposing that gives the CSR.
            let t = transpose(rows, &ip, &idx, Some(&val));
            (t.indptr, t.indices, t.data)
        }
        "coo" => read_coo(ar, rows, cols)?,
        other => {
            return Err(bad(
                &ar.path,
                format!(
                    "unsupported sparse format {other:?} (csr, csc and coo are read; save with \
                     .tocsr())"
                ),
            ))
        }
    };
    canonicalize(&mut indptr, &mut indices, &mut data);
    Ok(SparseMatrix {
        rows,
        cols,
        indptr,
        indices,
        data,
    })
}

/// Reads a COO matrix (`row`, `col`, `data`) into CSR.
fn read_coo(ar: &Archive, rows: usize, cols: usize) -> Result<CsrParts> {
    let nnz = ar.array("row")?.vector_len()?;
    let row = read_index_array(ar, "row", nnz, rows, "rows")?;
    let col = read_index_array(ar, "col", nnz, cols, "columns")?;
    let val = read_value_array(ar, "data", nnz)?;
    let mut indptr = vec![0usize; rows + 1];
    for &i in &row {
        indptr[i as usize + 1] += 1;
    }
    for i in 0..rows {
        indptr[i + 1] += indptr[i];
    }
    let mut next = indptr.clone();
    let mut indices = vec![0u32; nnz];
    let mut data = vec![0f32; nnz];
    for ((&i, &j), &v) in row.iter().zip(&col).zip(&val) {
        let pos = &mut next[i as usize];
        indices[*pos] = j;
        data[*pos] = v;
        *pos += 1;
    }
    Ok((indptr, indices, data))
}

/// Sorts each row by column and merges duplicate entries (summing their values), in place.
/// `indptr` must start at 0, be monotone and end at `indices.len() == data.len()`.
fn canonicalize(indptr: &mut [usize], indices: &mut Vec<u32>, data: &mut Vec<f32>) {
    let n = indptr.len().saturating_sub(1);
    let mut pairs: Vec<(u32, f32)> = Vec::new();
    let mut write = 0usize;
    let mut start = indptr.first().copied().unwrap_or(0);
    for i in 0..n {
        let end = indptr[i + 1];
        let row_begin = write;
        let sorted = indices[start..end].windows(2).all(|w| w[0] < w[1]);
        if sorted {
            indices.copy_within(start..end, write);
            data.copy_within(start..end, write);
            write += end - start;
        } else {
            pairs.clear();
            pairs.extend(
                indices[start..end]
                    .iter()
                    .copied()
                    .zip(data[start..end].iter().copied()),
            );
            pairs.sort_by_key(|p| p.0);
            for &(j, v) in &pairs {
                if write > row_begin && indices[write - 1] == j {
                    data[write - 1] += v;
                } else {
                    indices[write] = j;
                    data[write] = v;
                    write += 1;
                }
            }
        }
        indptr[i] = row_begin;
        start = end;
    }
    if let Some(last) = indptr.last_mut() {
        *last = write;
    }
    indices.truncate(write);
    data.truncate(write);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonicalize_sorts_and_merges_rows() {
        let mut ip = vec![0, 3, 3, 5];
        let mut idx = vec![2, 0, 2, 1, 0];
        let mut val = vec![1.0, 2.0, 3.0, 4.0, 5.0];
        canonicalize(&mut ip, &mut idx, &mut val);
        assert_eq!(ip, vec![0, 2, 2, 4]);
        assert_eq!(idx, vec![0, 2, 0, 1]);
        assert_eq!(val, vec![2.0, 4.0, 5.0, 4.0]);
    }
}
