//! NumPy `.npz` archives: the gnn-benchmark layout ([`load_npz_benchmark`]) and
//! `scipy.sparse.save_npz` matrices ([`load_scipy_npz`]), plus plain `.npy` arrays for labels and
//! dense features.
//!
//! The archive and its `.npy` members are read by the small reader below rather than
//! `ndarray_npy::NpzReader`, for two reasons: that reader cannot read the 0-d `|S3` array
//! `format` that `save_npz` writes (only numeric and bool element types are implemented), and it
//! allocates the element count an `.npy` header declares before reading any data, so a header
//! claiming 10^12 elements aborts the process. Here the zip central directory is parsed (zip64
//! included, as numpy writes it), an entry's declared size must be possible for its compressed
//! size, the header's shape × item size must equal the bytes the entry holds, arrays grow only as
//! data actually arrives, and the CRC-32 of every entry read is checked. Only the `stored` and
//! `deflate` methods exist in `.npz` files; nothing else is supported.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use flate2::read::DeflateDecoder;
use flate2::CrcReader;
use ndarray::{Array2, ShapeBuilder};

use super::{
    check_file, class_count, file_stem, identity_features, random_split, read_labels, RandomSplit,
    Syntax, MAX_CLASSES, MAX_FEATURE_COLS,
};
use crate::data::{Dataset, Features, SparseFeatures};
use crate::graph::{Direction, Graph};
use crate::kernels::transpose::transpose;
use crate::kernels::Csr;
use crate::{Error, Result};

/// Options for [`load_npz_benchmark`] and [`load_scipy_npz`].
#[derive(Debug, Clone)]
pub struct NpzOptions {
    /// Undirected (the default: each stored entry (i, j) gives both i→j and j→i) or directed
    /// (row i of the adjacency lists the targets of i).
    pub direction: Direction,
    /// The split, drawn at random (these files carry none).
    pub split: RandomSplit,
    /// If `Some(t)`, *dense* features (`attr_matrix`, a 2-D `.npy`) with at most a fraction `t`
    /// of non-zeros are stored sparse. Sparse features always stay sparse.
    pub sparse_features_below: Option<f64>,
    /// The number of classes. `None` (the default): the largest label + 1. When given, a label
    /// ≥ it is an [`Error::LabelOutOfRange`].
    pub n_classes: Option<usize>,
    /// The largest node count accepted (default 2^28): a guard against a declared shape
    /// making the loader allocate an adjacency of billions of rows (a CSR `indptr` must hold
    /// that many entries anyway, but `coo` and `csc` files declare the row count only in
    /// `shape`).
    pub max_nodes: usize,
}

impl Default for NpzOptions {
    fn default() -> Self {
        NpzOptions {
            direction: Direction::Undirected,
            split: RandomSplit::default(),
            sparse_features_below: None,
            n_classes: None,
            max_nodes: 1 << 28,
        }
    }
}

/// Loads a graph in the gnn-benchmark `.npz` layout (Shchur et al. 2018, "Pitfalls of GNN
/// evaluation"; the files `cora.npz`, `amazon_electronics_computers.npz`, …):
///
/// ```text
/// adj_data, adj_indices, adj_indptr, adj_shape       the adjacency, CSR (n × n)
/// attr_data, attr_indices, attr_indptr, attr_shape   the features, CSR (n × F), or
/// attr_matrix                                        the features, dense 2-D (n × F)
/// labels                                             one integer class per node (n,)
/// ```
///
/// Other arrays (`idx_to_node`, `node_names`, `attr_names`, `class_names`, `metadata`, pickled
/// object arrays) are never read. Without features, each node gets its one-hot id (the n × n
/// identity, stored sparse). `labels` is required; multi-label files (`labels_data`, …) are not
/// supported.
///
/// The adjacency's stored values are not kept: every stored entry with a non-zero value is an
/// edge (explicit zeros are dropped), symmetrised unless [`NpzOptions::direction`] is
/// [`Direction::Directed`]; duplicates merge, self-loops stay. Unsorted or duplicate indices
/// are accepted in every CSR (duplicate feature entries are summed, as scipy's
/// `sum_duplicates`). Integer arrays may be any of `int8` … `uint64`; values may be any integer
/// or float type; both byte orders; C or Fortran order.
///
/// The file has no split: one is drawn as [`NpzOptions::split`] says (Planetoid's 20 per
/// class, 500, 1000 by default). The dataset is named after the file, without `.npz`.
///
/// # Errors
/// - [`Error::Io`]: a missing file, a directory, a read error, a corrupt deflate stream;
/// - [`Error::Dataset`] (the file, and the array and position in the message): not a zip
///   archive, a corrupt or truncated archive, a CRC mismatch, a missing array, a malformed
///   `.npy` header, a wrong dtype (e.g. float indices) or number of dimensions, a shape that
///   disagrees with the bytes stored, a dimension over `u32`, more nodes than
///   [`NpzOptions::max_nodes`], 0 or over 2^24 feature columns, `indptr` not starting at 0 or
///   not monotone, an index out of range, an empty graph;
/// - [`Error::Mismatch`]: array lengths that disagree (`indptr` vs `shape[0] + 1`, `indices`
///   and `data` vs `indptr[-1]`, feature rows or labels vs nodes, a non-square adjacency);
/// - [`Error::NonFiniteValue`]: a NaN or infinite feature or adjacency value;
/// - [`Error::LabelOutOfRange`]: a negative label, or one ≥ the declared class count (≥ 2^20
///   when inferred);
/// - [`Error::EmptyMask`]: a split part left empty; any other error of [`Dataset::validate`].
pub fn load_npz_benchmark(path: impl AsRef<Path>, opts: &NpzOptions) -> Result<Dataset> {
    let path = path.as_ref();
    check_n_classes(path, opts.n_classes)?;
    let ar = Archive::open(path)?;
    let adj = read_csr(&ar, "adj_", Dims::Square(opts.max_nodes))?;
    let n = adj.rows;
    if n == 0 {
        return Err(bad(path, "empty graph: 'adj_shape' is (0, 0)"));
    }
    let edges = adjacency_edges(path, &adj, "adj_data")?;
    drop(adj);
    let features = if ar.has("attr_data") || ar.has("attr_indptr") {
        let m = read_csr(&ar, "attr_", Dims::FeatureRows(n))?;
        sparse_features(path, m, "attr_data")?
    } else if ar.has("attr_matrix") {
        let x = read_dense(ar.array("attr_matrix")?, n)?;
        dense_features(x, opts.sparse_features_below)
    } else {
        identity_features(n)?
    };
    if !ar.has("labels") && ar.has("labels_data") {
        return Err(bad(
            path,
            "multi-label files ('labels_data', …) are not supported: one class per node is needed",
        ));
    }
    let labels = read_label_array(ar.array("labels")?, n, opts.n_classes)?;
    finish(path, n, edges, features, labels, opts)
}

/// Loads a graph whose adjacency was saved by `scipy.sparse.save_npz` (a `csr`, `csc` or `coo`
/// matrix or array, n × n; the `format` entry, a 0-d byte string, is read), with optional
/// features and labels:
/// - `features`: a `save_npz` file (any of the three formats, n × F, stored sparse), or a `.npy`
///   file holding a dense 2-D float or integer array (n × F, stored dense unless
///   [`NpzOptions::sparse_features_below`] says otherwise). Without one, the sparse n × n
///   identity.
/// - `labels`: a `.npy` file holding a 1-D integer array of n class ids, or any other name: a
///   text file of one class id per line (as for [`load_edge_list`](super::load_edge_list)).
///   Without one, every label is 0 and there is 1 class.
///
/// Without a `format` entry, an `indptr` of `shape[0] + 1` entries is read as CSR, one of
/// `shape[1] + 1` entries as CSC, and `row` / `col` arrays as COO. Adjacency values, the split
/// and the name are as in [`load_npz_benchmark`].
///
/// # Errors
/// As [`load_npz_benchmark`], plus [`Error::Dataset`] for an unsupported sparse `format`
/// (`bsr`, `dia`, …) and the text-label errors of [`load_edge_list`](super::load_edge_list).
pub fn load_scipy_npz(
    adjacency: impl AsRef<Path>,
    features: Option<&Path>,
    labels: Option<&Path>,
    opts: &NpzOptions,
) -> Result<Dataset> {
    let path = adjacency.as_ref();
    check_n_classes(path, opts.n_classes)?;
    let adj = read_scipy(&Archive::open(path)?, Dims::Square(opts.max_nodes))?;
    let n = adj.rows;
    if n == 0 {
        return Err(bad(path, "empty graph: 'shape' is (0, 0)"));
    }
    let edges = adjacency_edges(path, &adj, "data")?;
    drop(adj);
    let features = match features {
        None => identity_features(n)?,
        Some(p) if is_npy(p) => {
            let x = read_dense(ArrayReader::from_npy_file(p)?, n)?;
            dense_features(x, opts.sparse_features_below)
        }
        Some(p) => {
            let m = read_scipy(&Archive::open(p)?, Dims::FeatureRows(n))?;
            sparse_features(p, m, "data")?
        }
    };
    let labels = match labels {
        None => vec![0; n],
        Some(p) if is_npy(p) => {
            read_label_array(ArrayReader::from_npy_file(p)?, n, opts.n_classes)?
        }
        Some(p) => read_labels(p, Syntax::Free, n, "nodes", opts.n_classes)?,
    };
    finish(path, n, edges, features, labels, opts)
}

/// Which `.npz` layout a file holds (for [`load`](super::load)).
pub(super) enum Layout {
    /// gnn-benchmark: `adj_*` arrays.
    Benchmark,
    /// `scipy.sparse.save_npz`.
    Scipy,
}

/// Tells the layout of an `.npz` file from its array names.
pub(super) fn detect_layout(path: &Path) -> Result<Layout> {
    let ar = Archive::open(path)?;
    if ar.has("adj_indptr") || ar.has("adj_data") {
        Ok(Layout::Benchmark)
    } else if ar.has("format") || ar.has("indptr") || ar.has("row") {
        Ok(Layout::Scipy)
    } else {
        Err(bad(
            path,
            format!(
                "neither a gnn-benchmark .npz (adj_*) nor a scipy.sparse.save_npz file \
                 (format, indptr, …); arrays: {}",
                ar.names()
            ),
        ))
    }
}

// ---------------------------------------------------------------------------------------------
// Building the dataset
// ---------------------------------------------------------------------------------------------

fn check_n_classes(path: &Path, n_classes: Option<usize>) -> Result<()> {
    match n_classes {
        Some(c) if c == 0 || c > MAX_CLASSES => {
            Err(bad(path, format!("n_classes {c}: must lie in 1..=2^20")))
        }
        _ => Ok(()),
    }
}

fn is_npy(p: &Path) -> bool {
    p.extension().is_some_and(|e| e.eq_ignore_ascii_case("npy"))
}

/// The graph, split and checks common to both loaders.
fn finish(
    path: &Path,
    n: usize,
    edges: Vec<(u32, u32)>,
    features: Features<f32>,
    labels: Vec<u32>,
    opts: &NpzOptions,
) -> Result<Dataset> {
    let graph = Graph::try_from_edges(n, &edges, opts.direction)?;
    drop(edges);
    let n_classes = class_count(&labels, opts.n_classes);
    let split = random_split(path, &labels, n_classes, &opts.split)?;
    Dataset::try_new(file_stem(path), graph, features, labels, n_classes, split)
}

fn dense_features(x: Array2<f32>, sparse_below: Option<f64>) -> Features<f32> {
    let f = Features::Dense(x);
    match sparse_below {
        Some(t) => f.into_sparse_if(t),
        None => f,
    }
}

/// An [`Error::Dataset`] for `path`.
fn bad(path: &Path, msg: impl Into<String>) -> Error {
    Error::Dataset {
        path: path.to_path_buf(),
        msg: msg.into(),
    }
}

/// A sparse matrix read from an archive, in canonical CSR (sorted, unique column indices).
struct SparseMatrix {
    rows: usize,
    cols: usize,
    indptr: Vec<usize>,
    indices: Vec<u32>,
    data: Vec<f32>,
}

/// The (indptr, indices, data) of a compressed sparse matrix.
type CsrParts = (Vec<usize>, Vec<u32>, Vec<f32>);

/// What the shape of a sparse matrix must be.
#[derive(Clone, Copy)]
enum Dims {
    /// An adjacency: square, with at most this many rows.
    Square(usize),
    /// Features of this many nodes: that many rows, 1 to 2^24 columns.
    FeatureRows(usize),
}

/// The edges of an adjacency: every stored entry (i, j) with a non-zero value.
fn adjacency_edges(path: &Path, m: &SparseMatrix, data_key: &str) -> Result<Vec<(u32, u32)>> {
    let mut edges = Vec::new();
    edges
        .try_reserve_exact(m.indices.len())
        .map_err(|e| super::alloc_error(path, "the edge list", e))?;
    for i in 0..m.rows {
        let r = m.indptr[i]..m.indptr[i + 1];
        for (&j, &v) in m.indices[r.clone()].iter().zip(&m.data[r]) {
            if !v.is_finite() {
                return Err(Error::NonFiniteValue {
                    what: format!("{}: '{data_key}'", path.display()),
                    row: i,
                    col: j as usize,
                    value: f64::from(v),
                });
            }
            if v != 0.0 {
                // rows ≤ u32::MAX: checked with the shape
                edges.push((u32::try_from(i).unwrap_or(u32::MAX), j));
            }
        }
    }
    Ok(edges)
}

/// Sparse features from a matrix, checking that every value is finite.
fn sparse_features(path: &Path, m: SparseMatrix, data_key: &str) -> Result<Features<f32>> {
    let x = Csr::try_new((m.rows, m.cols), m.indptr, m.indices, m.data)
        .map_err(|(_, _, _, e)| bad(path, format!("feature matrix: {e}")))?;
    let features = Features::Sparse(SparseFeatures::new(x));
    features.check_finite(&format!("{}: '{data_key}'", path.display()))?;
    Ok(features)
}

/// Reads a 1-D integer label array of `n` entries, each in `0..n_classes` (or `0..2^20`).
fn read_label_array(r: ArrayReader<'_>, n: usize, n_classes: Option<usize>) -> Result<Vec<u32>> {
    let len = r.vector_len()?;
    if len != n {
        return Err(r.mismatch("length vs nodes", n, len));
    }
    let limit = n_classes.unwrap_or(MAX_CLASSES);
    r.ints(|k, v| {
        if v < 0 || v >= limit as i64 {
            return Err(Error::LabelOutOfRange {
                node: k,
                label: v,
                n_classes: limit,
            });
        }
        Ok(v as u32)
    })
}

/// Reads a dense 2-D feature array of `n` rows.
fn read_dense(r: ArrayReader<'_>, n: usize) -> Result<Array2<f32>> {
    let (rows, cols) = match *r.header.shape.as_slice() {
        [a, b] => (a, b),
        _ => {
            let msg = format!("expected a 2-D array, got shape {:?}", r.header.shape);
            return Err(r.bad(msg));
        }
    };
    if rows != n {
        return Err(r.mismatch("rows vs nodes", n, rows));
    }
    if cols == 0 || cols > MAX_FEATURE_COLS {
        return Err(r.bad(format!("{cols} feature columns: must lie in 1..=2^24")));
    }
    let fortran = r.header.fortran;
    let path = r.path;
    let what = format!("{}: {}", r.path.display(), r.what);
    let data = r.floats(|k, v| {
        let x = v as f32;
        if !x.is_finite() {
            let (row, col) = if fortran {
                (k % rows, k / rows)
            } else {
                (k / cols, k % cols)
            };
            return Err(Error::NonFiniteValue {
                what: what.clone(),
                row,
                col,
                value: v,
            });
        }
        Ok(x)
    })?;
    let shape = (rows, cols).set_f(fortran);
    let x = Array2::from_shape_vec(shape, data).map_err(|e| bad(path, format!("{what}: {e}")))?;
    Ok(if fortran {
        x.as_standard_layout().into_owned()
    } else {
        x
    })
}

// ---------------------------------------------------------------------------------------------
// Sparse matrices
// ---------------------------------------------------------------------------------------------

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
fn read_csr(ar: &Archive, p: &str, dims: Dims) -> Result<SparseMatrix> {
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
fn read_scipy(ar: &Archive, dims: Dims) -> Result<SparseMatrix> {
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

// ---------------------------------------------------------------------------------------------
// The zip archive
// ---------------------------------------------------------------------------------------------

/// Deflate expands at most ~1032:1; a declared size beyond this ratio is a lie.
const MAX_DEFLATE_RATIO: u64 = 1100;
/// Largest accepted `.npy` header.
const MAX_NPY_HEADER: usize = 1 << 20;
/// Largest initial reservation for an array (it grows as data arrives).
const MAX_INITIAL_RESERVE: usize = 1 << 20;

/// A little-endian cursor over bytes; `None` past the end.
struct Bytes<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Bytes<'a> {
    fn new(b: &'a [u8]) -> Self {
        Bytes { b, pos: 0 }
    }
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.b.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2)?.try_into().ok().map(u16::from_le_bytes)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)?.try_into().ok().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8)?.try_into().ok().map(u64::from_le_bytes)
    }
    fn remaining(&self) -> usize {
        self.b.len().saturating_sub(self.pos)
    }
}

/// One member of the archive, from the central directory.
struct Entry {
    name: String,
    flags: u16,
    method: u16,
    crc: u32,
    comp_size: u64,
    size: u64,
    offset: u64,
}

/// A zip archive: its central directory and the open file.
struct Archive {
    path: PathBuf,
    file: File,
    len: u64,
    entries: Vec<Entry>,
}

impl Archive {
    fn open(path: &Path) -> Result<Archive> {
        check_file(path)?;
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        let mut ar = Archive {
            path: path.to_path_buf(),
            file,
            len,
            entries: Vec::new(),
        };
        ar.entries = ar.read_directory()?;
        Ok(ar)
    }

    fn bad(&self, msg: impl Into<String>) -> Error {
        bad(&self.path, msg)
    }

    /// `n` bytes at `offset` (the caller has checked that they lie inside the file).
    fn read_at(&self, offset: u64, n: usize) -> Result<Vec<u8>> {
        let mut f = &self.file;
        let mut buf = vec![0u8; n];
        f.seek(SeekFrom::Start(offset))
            .and_then(|_| f.read_exact(&mut buf))
            .map_err(|e| Error::io(&self.path, e))?;
        Ok(buf)
    }

    fn read_directory(&self) -> Result<Vec<Entry>> {
        let not_zip = || self.bad("not a zip archive (no end-of-central-directory record)");
        if self.len < 22 {
            return Err(not_zip());
        }
        let tail_len = self.len.min(22 + 65535);
        let tail_start = self.len - tail_len;
        let tail = self.read_at(tail_start, tail_len as usize)?;
        let pos = (0..=tail.len() - 22)
            .rev()
            .find(|&p| tail[p..p + 4] == [0x50, 0x4b, 0x05, 0x06])
            .ok_or_else(not_zip)?;
        let eocd = tail_start + pos as u64;
        let corrupt = |what: &str| self.bad(format!("corrupt zip archive: {what}"));
        let (disk, cd_disk, n_total, cd_size, cd_offset) =
            parse_end_record(&tail[pos + 4..]).ok_or_else(|| corrupt("truncated end record"))?;
        if (disk != 0 && disk != 0xFFFF) || (cd_disk != 0 && cd_disk != 0xFFFF) {
            return Err(self.bad("multi-disk zip archives are not supported"));
        }
        let (mut n_entries, mut cd_size, mut cd_offset) =
            (u64::from(n_total), u64::from(cd_size), u64::from(cd_offset));
        if n_total == 0xFFFF || cd_size == 0xFFFF_FFFF || cd_offset == 0xFFFF_FFFF {
            // zip64: a locator right before the end record points at the zip64 end record
            let loc_at = eocd
                .checked_sub(20)
                .ok_or_else(|| corrupt("no zip64 locator"))?;
            let loc = self.read_at(loc_at, 20)?;
            let mut c = Bytes::new(&loc);
            let rec_at = match (c.u32(), c.u32(), c.u64()) {
                (Some(0x0706_4b50), Some(_), Some(at))
                    if at.checked_add(56).is_some_and(|e| e <= loc_at) =>
                {
                    at
                }
                _ => return Err(corrupt("bad zip64 locator")),
            };
            let rec = self.read_at(rec_at, 56)?;
            (n_entries, cd_size, cd_offset) =
                parse_zip64_end_record(&rec).ok_or_else(|| corrupt("bad zip64 end record"))?;
        }
        if cd_offset.checked_add(cd_size).is_none_or(|e| e > eocd) {
            return Err(corrupt("central directory out of bounds"));
        }
        if n_entries > cd_size / 46 {
            return Err(corrupt(
                "more entries declared than the central directory holds",
            ));
        }
        let cd = self.read_at(cd_offset, cd_size as usize)?;
        let mut c = Bytes::new(&cd);
        let mut entries = Vec::with_capacity(n_entries as usize);
        for _ in 0..n_entries {
            let e = parse_central_entry(&mut c).ok_or_else(|| corrupt("bad central directory"))?;
            entries.push(e);
        }
        Ok(entries)
    }

    fn entry(&self, key: &str) -> Option<&Entry> {
        self.entries
            .iter()
            .find(|e| e.name == key || e.name.strip_suffix(".npy").is_some_and(|stem| stem == key))
    }

    fn has(&self, key: &str) -> bool {
        self.entry(key).is_some()
    }

    /// The array names, for messages.
    fn names(&self) -> String {
        let v: Vec<&str> = self
            .entries
            .iter()
            .map(|e| e.name.strip_suffix(".npy").unwrap_or(&e.name))
            .collect();
        if v.is_empty() {
            "none".into()
        } else {
            v.join(", ")
        }
    }

    /// Opens the array `key` and reads its `.npy` header.
    fn array(&self, key: &str) -> Result<ArrayReader<'_>> {
        let Some(e) = self.entry(key) else {
            return Err(self.bad(format!("missing array '{key}'; arrays: {}", self.names())));
        };
        let what = format!("array '{key}'");
        if e.flags & 1 != 0 {
            return Err(self.bad(format!("{what}: encrypted zip entries are not supported")));
        }
        match e.method {
            0 if e.comp_size != e.size => {
                return Err(self.bad(format!(
                    "{what}: stored entry of {} bytes declares {} bytes",
                    e.comp_size, e.size
                )))
            }
            0 => {}
            8 if e.size
                > e.comp_size
                    .saturating_mul(MAX_DEFLATE_RATIO)
                    .saturating_add(1024) =>
            {
                return Err(self.bad(format!(
                    "{what}: declares {} bytes from {} compressed bytes, impossible for deflate",
                    e.size, e.comp_size
                )))
            }
            8 => {}
            m => {
                return Err(self.bad(format!(
                    "{what}: unsupported zip compression method {m} (stored and deflate are read)"
                )))
            }
        }
        let oob = || self.bad(format!("{what}: entry data runs past the end of the file"));
        if e.offset.checked_add(30).is_none_or(|end| end > self.len) {
            return Err(oob());
        }
        let local = self.read_at(e.offset, 30)?;
        let (name_len, extra_len) = parse_local_header(&local)
            .ok_or_else(|| self.bad(format!("{what}: bad local file header")))?;
        let start = e.offset + 30 + name_len + extra_len;
        if start
            .checked_add(e.comp_size)
            .is_none_or(|end| end > self.len)
        {
            return Err(oob());
        }
        let mut f = &self.file;
        f.seek(SeekFrom::Start(start))
            .map_err(|err| Error::io(&self.path, err))?;
        let raw = f.take(e.comp_size);
        let stream: Box<dyn Read + '_> = if e.method == 8 {
            Box::new(DeflateDecoder::new(raw))
        } else {
            Box::new(raw)
        };
        ArrayReader::new(&self.path, what, stream, e.size, Some(e.crc))
    }
}

/// The end-of-central-directory record after its signature: (disk, directory disk, entries,
/// directory size, directory offset).
fn parse_end_record(b: &[u8]) -> Option<(u16, u16, u16, u32, u32)> {
    let mut c = Bytes::new(b);
    let disk = c.u16()?;
    let cd_disk = c.u16()?;
    c.take(2)?; // entries on this disk
    Some((disk, cd_disk, c.u16()?, c.u32()?, c.u32()?))
}

/// The zip64 end record: (entries, directory size, directory offset).
fn parse_zip64_end_record(b: &[u8]) -> Option<(u64, u64, u64)> {
    let mut c = Bytes::new(b);
    if c.u32()? != 0x0606_4b50 {
        return None;
    }
    c.take(4 + 8 + 8 + 8)?; // record size, versions, disk numbers, entries on this disk
    Some((c.u64()?, c.u64()?, c.u64()?))
}

/// A local file header: (name length, extra field length).
fn parse_local_header(b: &[u8]) -> Option<(u64, u64)> {
    let mut c = Bytes::new(b);
    if c.u32()? != 0x0403_4b50 {
        return None;
    }
    c.take(22)?;
    Some((u64::from(c.u16()?), u64::from(c.u16()?)))
}

/// Parses one central directory header (zip64 sizes and offset included).
fn parse_central_entry(c: &mut Bytes<'_>) -> Option<Entry> {
    if c.u32()? != 0x0201_4b50 {
        return None;
    }
    c.take(4)?; // versions
    let flags = c.u16()?;
    let method = c.u16()?;
    c.take(4)?; // time, date
    let crc = c.u32()?;
    let comp32 = c.u32()?;
    let size32 = c.u32()?;
    let name_len = usize::from(c.u16()?);
    let extra_len = usize::from(c.u16()?);
    let comment_len = usize::from(c.u16()?);
    c.take(8)?; // disk, attributes
    let offset32 = c.u32()?;
    let name = String::from_utf8_lossy(c.take(name_len)?).into_owned();
    let extra = c.take(extra_len)?;
    c.take(comment_len)?;
    let (mut size, mut comp_size, mut offset) =
        (u64::from(size32), u64::from(comp32), u64::from(offset32));
    let mut x = Bytes::new(extra);
    while x.remaining() >= 4 {
        let id = x.u16()?;
        let len = usize::from(x.u16()?);
        let body = x.take(len)?;
        if id == 1 {
            let mut z = Bytes::new(body);
            if size32 == u32::MAX {
                size = z.u64()?;
            }
            if comp32 == u32::MAX {
                comp_size = z.u64()?;
            }
            if offset32 == u32::MAX {
                offset = z.u64()?;
            }
        }
    }
    Some(Entry {
        name,
        flags,
        method,
        crc,
        comp_size,
        size,
        offset,
    })
}

// ---------------------------------------------------------------------------------------------
// .npy arrays
// ---------------------------------------------------------------------------------------------

/// The element kinds of `.npy` dtypes that are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int,
    UInt,
    Float,
    Bool,
    /// `S`: fixed-width bytes.
    Bytes,
    /// `U`: fixed-width UCS-4.
    Unicode,
}

/// A parsed dtype descriptor such as `<i4`, `>f8`, `|b1`, `|S3`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct DType {
    kind: Kind,
    /// Bytes per element.
    size: usize,
    big_endian: bool,
    descr: String,
}

impl DType {
    fn parse(descr: &str) -> Option<DType> {
        let b = descr.as_bytes();
        let (big_endian, rest) = match b.first()? {
            b'<' | b'|' | b'=' => (false, &b[1..]),
            b'>' => (true, &b[1..]),
            _ => (false, b),
        };
        let (&k, digits) = rest.split_first()?;
        let n: usize = std::str::from_utf8(digits).ok()?.parse().ok()?;
        let (kind, size) = match (k, n) {
            (b'i', 1 | 2 | 4 | 8) => (Kind::Int, n),
            (b'u', 1 | 2 | 4 | 8) => (Kind::UInt, n),
            (b'f', 4 | 8) => (Kind::Float, n),
            (b'b', 1) => (Kind::Bool, 1),
            (b'S' | b'a', 1..=65536) => (Kind::Bytes, n),
            (b'U', 1..=65536) => (Kind::Unicode, 4 * n),
            _ => return None,
        };
        Some(DType {
            kind,
            size,
            big_endian,
            descr: descr.to_string(),
        })
    }
}

/// A parsed `.npy` header.
#[derive(Debug, Clone, PartialEq)]
struct Header {
    dtype: DType,
    fortran: bool,
    shape: Vec<usize>,
    /// Number of elements (1 for a 0-d array).
    len: usize,
}

/// A value of the Python literal subset `.npy` headers use.
#[derive(Debug)]
enum PyValue {
    Str(String),
    Bool(bool),
    Tuple(Vec<u64>),
}

/// A parser for the dict literal of a `.npy` header.
struct PyParser<'a> {
    s: &'a [u8],
    i: usize,
}

impl PyParser<'_> {
    fn ws(&mut self) {
        while self.s.get(self.i).is_some_and(|c| c.is_ascii_whitespace()) {
            self.i += 1;
        }
    }
    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, c: u8) -> std::result::Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!("expected '{}' at byte {}", c as char, self.i))
        }
    }
    fn string(&mut self) -> std::result::Result<String, String> {
        self.ws();
        let q = match self.s.get(self.i) {
            Some(&q @ (b'\'' | b'"')) => q,
            _ => return Err(format!("expected a string at byte {}", self.i)),
        };
        let start = self.i + 1;
        let len = self.s[start..]
            .iter()
            .position(|&c| c == q)
            .ok_or("unterminated string")?;
        self.i = start + len + 1;
        Ok(String::from_utf8_lossy(&self.s[start..start + len]).into_owned())
    }
    fn int(&mut self) -> std::result::Result<u64, String> {
        self.ws();
        let start = self.i;
        while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        let digits = std::str::from_utf8(&self.s[start..self.i]).unwrap_or_default();
        let v = digits
            .parse::<u64>()
            .map_err(|e| format!("bad integer at byte {start}: {e}"))?;
        if self.s.get(self.i) == Some(&b'L') {
            self.i += 1; // Python 2 long
        }
        Ok(v)
    }
    fn value(&mut self) -> std::result::Result<PyValue, String> {
        self.ws();
        let rest = &self.s[self.i.min(self.s.len())..];
        if rest.starts_with(b"True") {
            self.i += 4;
            return Ok(PyValue::Bool(true));
        }
        if rest.starts_with(b"False") {
            self.i += 5;
            return Ok(PyValue::Bool(false));
        }
        match rest.first() {
            Some(b'\'' | b'"') => self.string().map(PyValue::Str),
            Some(b'(') => {
                self.i += 1;
                let mut v = Vec::new();
                loop {
                    if self.eat(b')') {
                        break;
                    }
                    v.push(self.int()?);
                    if !self.eat(b',') {
                        self.expect(b')')?;
                        break;
                    }
                }
                Ok(PyValue::Tuple(v))
            }
            Some(b'[') => Err("structured dtypes are not supported".into()),
            _ => Err(format!("unexpected value at byte {}", self.i)),
        }
    }
    /// Parses `{'descr': …, 'fortran_order': …, 'shape': (…), }`.
    fn header(&mut self) -> std::result::Result<(String, bool, Vec<u64>), String> {
        self.expect(b'{')?;
        let (mut descr, mut fortran, mut shape) = (None, None, None);
        loop {
            if self.eat(b'}') {
                break;
            }
            let key = self.string()?;
            self.expect(b':')?;
            let v = self.value()?;
            match (key.as_str(), v) {
                ("descr", PyValue::Str(s)) => descr = Some(s),
                ("fortran_order", PyValue::Bool(b)) => fortran = Some(b),
                ("shape", PyValue::Tuple(t)) => shape = Some(t),
                ("descr" | "fortran_order" | "shape", v) => {
                    return Err(format!("bad value for '{key}': {v:?}"))
                }
                _ => {}
            }
            if !self.eat(b',') {
                self.expect(b'}')?;
                break;
            }
        }
        match (descr, fortran, shape) {
            (Some(d), Some(f), Some(s)) => Ok((d, f, s)),
            _ => Err("missing 'descr', 'fortran_order' or 'shape'".into()),
        }
    }
}

/// An `.npy` array being read: its header, then its elements, streamed.
struct ArrayReader<'a> {
    path: &'a Path,
    /// `array 'key'` inside an archive, `array` for a `.npy` file.
    what: String,
    header: Header,
    stream: BufReader<CrcReader<Box<dyn Read + 'a>>>,
    crc: Option<u32>,
}

/// One element, widened.
#[derive(Clone, Copy)]
enum Elem {
    I(i64),
    U(u64),
    F(f64),
}

impl<'a> ArrayReader<'a> {
    /// Reads the header of an `.npy` stream of `size` bytes whose CRC-32 must be `crc`.
    fn new(
        path: &'a Path,
        what: String,
        stream: Box<dyn Read + 'a>,
        size: u64,
        crc: Option<u32>,
    ) -> Result<Self> {
        let mut stream = BufReader::with_capacity(1 << 16, CrcReader::new(stream));
        let bad_h = |msg: String| bad(path, format!("{what}: malformed .npy header: {msg}"));
        let io = |e| Error::io(path, e);
        let mut pre = [0u8; 8];
        if size < 10 {
            return Err(bad_h(format!("{size} bytes is too short")));
        }
        stream.read_exact(&mut pre).map_err(io)?;
        if &pre[..6] != b"\x93NUMPY" {
            return Err(bad_h("no \\x93NUMPY magic".into()));
        }
        let header_len = match pre[6] {
            1 => {
                let mut b = [0u8; 2];
                stream.read_exact(&mut b).map_err(io)?;
                usize::from(u16::from_le_bytes(b))
            }
            2 | 3 => {
                let mut b = [0u8; 4];
                stream.read_exact(&mut b).map_err(io)?;
                u32::from_le_bytes(b) as usize
            }
            v => return Err(bad_h(format!("unsupported format version {v}"))),
        };
        let prefix = if pre[6] == 1 { 10 } else { 12 } + header_len as u64;
        if header_len > MAX_NPY_HEADER || prefix > size {
            return Err(bad_h(format!(
                "header of {header_len} bytes in an entry of {size}"
            )));
        }
        let mut text = vec![0u8; header_len];
        stream.read_exact(&mut text).map_err(io)?;
        let (descr, fortran, shape) = PyParser { s: &text, i: 0 }.header().map_err(bad_h)?;
        let dtype = DType::parse(&descr).ok_or_else(|| {
            bad(
                path,
                format!("{what}: unsupported dtype {descr:?} (integers, floats, bools, byte strings are read)"),
            )
        })?;
        let shape: Vec<usize> = shape
            .into_iter()
            .map(|d| usize::try_from(d).unwrap_or(usize::MAX))
            .collect();
        let len = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        let bytes = len.and_then(|l| l.checked_mul(dtype.size));
        let data = size - prefix;
        let (Some(len), Some(bytes)) = (len, bytes) else {
            return Err(bad(path, format!("{what}: absurd shape {shape:?}")));
        };
        if bytes as u64 != data {
            return Err(bad(
                path,
                format!(
                    "{what}: shape {shape:?} of {} needs {bytes} bytes of data, the entry holds {data}",
                    dtype.descr
                ),
            ));
        }
        Ok(ArrayReader {
            path,
            what,
            header: Header {
                dtype,
                fortran,
                shape,
                len,
            },
            stream,
            crc,
        })
    }

    /// A standalone `.npy` file.
    fn from_npy_file(path: &'a Path) -> Result<Self> {
        check_file(path)?;
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
        ArrayReader::new(path, "array".into(), Box::new(file), size, None)
    }

    fn bad(&self, msg: impl std::fmt::Display) -> Error {
        bad(self.path, format!("{}: {msg}", self.what))
    }

    fn mismatch(&self, what: &str, expected: usize, got: usize) -> Error {
        Error::Mismatch {
            what: format!("{}: {} {what}", self.path.display(), self.what),
            expected,
            got,
        }
    }

    /// The length of a 1-D array (an error for other shapes).
    fn vector_len(&self) -> Result<usize> {
        match *self.header.shape.as_slice() {
            [n] => Ok(n),
            _ => Err(self.bad(format!(
                "expected a 1-D array, got shape {:?}",
                self.header.shape
            ))),
        }
    }

    /// Reads every element through `f`; integer (and bool) dtypes only.
    fn ints<T>(self, mut f: impl FnMut(usize, i64) -> Result<T>) -> Result<Vec<T>> {
        if !matches!(self.header.dtype.kind, Kind::Int | Kind::UInt | Kind::Bool) {
            let msg = format!(
                "dtype {}, expected an integer type",
                self.header.dtype.descr
            );
            return Err(self.bad(msg));
        }
        let (path, what) = (self.path, self.what.clone());
        self.elems(|k, e| match e {
            Elem::I(v) => f(k, v),
            Elem::U(v) => match i64::try_from(v) {
                Ok(v) => f(k, v),
                Err(_) => Err(bad(path, format!("{what}[{k}] = {v} is too large"))),
            },
            Elem::F(v) => f(k, v as i64),
        })
    }

    /// Reads every element through `f`, widened to `f64`; any numeric or bool dtype.
    fn floats<T>(self, mut f: impl FnMut(usize, f64) -> Result<T>) -> Result<Vec<T>> {
        if matches!(self.header.dtype.kind, Kind::Bytes | Kind::Unicode) {
            let msg = format!("dtype {}, expected a number type", self.header.dtype.descr);
            return Err(self.bad(msg));
        }
        self.elems(|k, e| match e {
            Elem::I(v) => f(k, v as f64),
            Elem::U(v) => f(k, v as f64),
            Elem::F(v) => f(k, v),
        })
    }

    /// Reads a 0-d (or one-element) string array, NULs trimmed.
    fn string(mut self) -> Result<String> {
        let dt = self.header.dtype.clone();
        if !matches!(dt.kind, Kind::Bytes | Kind::Unicode) || self.header.len != 1 {
            let msg = format!(
                "expected one string, got dtype {} and shape {:?}",
                dt.descr, self.header.shape
            );
            return Err(self.bad(msg));
        }
        let mut buf = vec![0u8; dt.size];
        self.stream
            .read_exact(&mut buf)
            .map_err(|e| Error::io(self.path, e))?;
        self.finish()?;
        let s = if dt.kind == Kind::Bytes {
            String::from_utf8_lossy(&buf).into_owned()
        } else {
            buf.chunks_exact(4)
                .map(|c| {
                    let b = [c[0], c[1], c[2], c[3]];
                    let u = if dt.big_endian {
                        u32::from_be_bytes(b)
                    } else {
                        u32::from_le_bytes(b)
                    };
                    char::from_u32(u).unwrap_or('\u{fffd}')
                })
                .collect()
        };
        Ok(s.trim_end_matches('\0').trim().to_string())
    }

    /// Streams the elements through `f`, then checks the end of the stream and the CRC.
    fn elems<T>(mut self, mut f: impl FnMut(usize, Elem) -> Result<T>) -> Result<Vec<T>> {
        let dt = self.header.dtype.clone();
        if dt.size > 8 {
            return Err(self.bad(format!("dtype {} is not a number type", dt.descr)));
        }
        let n = self.header.len;
        let mut out = Vec::new();
        out.try_reserve(n.min(MAX_INITIAL_RESERVE))
            .map_err(|e| super::alloc_error(self.path, &self.what, e))?;
        let mut buf = [0u8; 8];
        let io = |e| Error::io(self.path, e);
        for k in 0..n {
            let b = &mut buf[..dt.size];
            self.stream.read_exact(b).map_err(io)?;
            let mut u = 0u64;
            if dt.big_endian {
                for &x in b.iter() {
                    u = (u << 8) | u64::from(x);
                }
            } else {
                for &x in b.iter().rev() {
                    u = (u << 8) | u64::from(x);
                }
            }
            let e = match dt.kind {
                Kind::Int => {
                    let shift = 64 - 8 * dt.size as u32;
                    Elem::I(((u << shift) as i64) >> shift)
                }
                Kind::UInt | Kind::Bool => Elem::U(u),
                Kind::Float if dt.size == 4 => Elem::F(f64::from(f32::from_bits(u as u32))),
                _ => Elem::F(f64::from_bits(u)),
            };
            out.push(f(k, e)?);
        }
        self.finish()?;
        Ok(out)
    }

    /// Checks that the stream is exhausted and, in an archive, that the CRC-32 matches.
    fn finish(mut self) -> Result<()> {
        let mut one = [0u8; 1];
        let extra = self
            .stream
            .read(&mut one)
            .map_err(|e| Error::io(self.path, e))?;
        if extra != 0 {
            return Err(self.bad("more data than its shape"));
        }
        if let Some(want) = self.crc {
            let got = self.stream.get_ref().crc().sum();
            if got != want {
                return Err(self.bad(format!(
                    "CRC-32 mismatch (stored {want:08x}, computed {got:08x}): corrupt archive"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtypes_parse() {
        let d = DType::parse("<i4").unwrap();
        assert_eq!((d.kind, d.size, d.big_endian), (Kind::Int, 4, false));
        let d = DType::parse(">f8").unwrap();
        assert_eq!((d.kind, d.size, d.big_endian), (Kind::Float, 8, true));
        assert_eq!(DType::parse("|S3").unwrap().size, 3);
        assert_eq!(DType::parse("<U3").unwrap().size, 12);
        assert_eq!(DType::parse("|b1").unwrap().kind, Kind::Bool);
        for bad in ["", "<", "<i3", "<f2", "|O", "<c16", "<i4x", "é4", "<U0"] {
            assert!(DType::parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn headers_parse() {
        let h = b"{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }     \n";
        let got = PyParser { s: h, i: 0 }.header().unwrap();
        assert_eq!(got, ("<i4".to_string(), false, vec![4]));
        let h = b"{\"shape\": (2L, 3), \"descr\": \">f8\", \"fortran_order\": True}";
        let got = PyParser { s: h, i: 0 }.header().unwrap();
        assert_eq!(got, (">f8".to_string(), true, vec![2, 3]));
        let h = b"{'descr': '|S3', 'fortran_order': False, 'shape': (), }";
        assert_eq!(
            PyParser { s: h, i: 0 }.header().unwrap().2,
            Vec::<u64>::new()
        );
        for bad in [
            &b"{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,)}"[..],
            b"{'descr': '<i4', 'shape': (1,)}",
            b"{'descr': '<i4', 'fortran_order': 0, 'shape': (1,)}",
            b"{'descr': '<i4', 'fortran_order': False, 'shape': (99999999999999999999999,)}",
            b"{'descr': '<i4', 'fortran_order': False, 'shape': (1,",
            b"",
            b"{'descr",
        ] {
            assert!(PyParser { s: bad, i: 0 }.header().is_err(), "{bad:?}");
        }
    }

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
