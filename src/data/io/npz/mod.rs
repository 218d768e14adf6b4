//! NumPy `.npz` archives: the gnn-benchmark layout ([`load_npz_benchmark`]) and
//! `scipy.sparse.save_npz` matrices ([`load_scipy_npz`]), plus plain `.npy` arrays for labels and
//! dense features. This file holds the two loaders and the dataset assembly they share (the
//! adjacency's edges, the features, the labels, the split); the container is read by the
//! submodules: `zip` (the archive's central directory and entries), `npy` (an `.npy` header and
//! its elements, streamed) and `sparse` (CSR, CSC and COO matrices from those arrays).
//!
//! The archive and its `.npy` members are read by this small reader rather than
//! `ndarray_npy::NpzReader`, for two reasons: that reader cannot read the 0-d `|S3` array
//! `format` that `save_npz` writes (only numeric and bool element types are implemented), and it
//! allocates the element count an `.npy` header declares before reading any data, so a header
//! claiming 10^12 elements aborts the process. Here the zip central directory is parsed (zip64
//! included, as numpy writes it), an entry's declared size must be possible for its compressed
//! size, the header's shape × item size must equal the bytes the entry holds, arrays grow only as
//! data actually arrives, and the CRC-32 of every entry read is checked. Only the `stored` and
//! `deflate` methods exist in `.npz` files; nothing else is supported.

mod npy;
mod sparse;
mod zip;

use std::path::Path;

use ndarray::{Array2, ShapeBuilder};

use self::npy::ArrayReader;
use self::sparse::{read_csr, read_scipy, Dims, SparseMatrix};
use self::zip::Archive;
use super::{
    checked_class_count, file_stem, identity_features, random_split, read_labels, RandomSplit,
    Syntax, MAX_CLASSES, MAX_FEATURE_COLS,
};
use crate::data::{Dataset, Features, SparseFeatures};
use crate::graph::{Direction, Graph};
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
    // With the identity as features when the file has none: 16 bytes a node more.
    let identity = super::super::memory::bytes(n, 16);
    super::check_graph_fits(path, n, adj.indices.len(), 16, identity)?;
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
    finish(path, None, n, edges, features, labels, opts)
}

/// Loads a graph whose adjacency was saved by `scipy.sparse.save_npz` (a `csr`, `csc` or `coo`
/// matrix or array, n × n; the `format` entry, a 0-d byte string, is read), with optional
/// features and labels:
/// - `features`: a `save_npz` file (any of the three formats, n × F, stored sparse), or a `.npy`
///   file holding a dense 2-D float or integer array (n × F, stored dense unless
///   [`NpzOptions::sparse_features_below`] says otherwise). Without one, width 0 (as an edge
///   list without features).
/// - `labels`: a `.npy` file holding a 1-D integer array of n class ids, or any other name: a
///   text file of one class id per line (as for [`load_edge_list`](super::load_edge_list)).
///   Without one, every node is unlabelled and there are 0 classes (training says so).
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
    let labels_path = labels;
    check_n_classes(path, opts.n_classes)?;
    let adj = read_scipy(&Archive::open(path)?, Dims::Square(opts.max_nodes))?;
    let n = adj.rows;
    if n == 0 {
        return Err(bad(path, "empty graph: 'shape' is (0, 0)"));
    }
    super::check_graph_fits(path, n, adj.indices.len(), 16, 0)?;
    let edges = adjacency_edges(path, &adj, "data")?;
    drop(adj);
    let features = match features {
        None => super::no_features(n),
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
        None => vec![crate::data::UNLABELLED; n],
        Some(p) if is_npy(p) => {
            read_label_array(ArrayReader::from_npy_file(p)?, n, opts.n_classes)?
        }
        Some(p) => {
            let count_name = format!("the {n} nodes of the adjacency {}", path.display());
            read_labels(p, Syntax::Free, n, &count_name, opts.n_classes)?
        }
    };
    finish(path, labels_path, n, edges, features, labels, opts)
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
    labels_path: Option<&Path>,
    n: usize,
    edges: Vec<(u32, u32)>,
    features: Features<f32>,
    labels: Vec<u32>,
    opts: &NpzOptions,
) -> Result<Dataset> {
    let graph = Graph::try_from_edges(n, &edges, opts.direction)?;
    drop(edges);
    let n_classes = checked_class_count(labels_path.unwrap_or(path), &labels, opts.n_classes)?;
    let split = random_split(path, &labels, n_classes, &opts.split)?;
    Dataset::try_new(file_stem(path), graph, features, labels, n_classes, split)
}

fn dense_features(x: Array2<f32>, sparse_below: Option<f64>) -> Features<f32> {
    let f = Features::dense(x);
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
    let features = Features::sparse(SparseFeatures::new(x));
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
