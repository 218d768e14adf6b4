//! Loaders: graphs in, [`Dataset`]s out.
//!
//! | format | loader | picked by [`load`] for |
//! |---|---|---|
//! | OGB node-property-prediction raw layout | [`load_ogb`] | a folder holding `raw/` |
//! | the binary graph store ([`crate::data::store`], `sparse-gcn convert`) | [`store::load`](crate::data::store::load) | a folder holding `store.json` |
//! | gnn-benchmark `.npz` (`adj_*`, `attr_*` or `attr_matrix`, `labels`) | [`load_npz_benchmark`] | a `.npz` holding `adj_indptr` or `adj_data` |
//! | `scipy.sparse.save_npz` adjacency, optional features and labels | [`load_scipy_npz`] | a `.npz` holding `format`, `indptr` or `row` |
//! | plain edge list, optional feature and label files | [`load_edge_list`] | a `.txt`, `.csv`, `.tsv`, `.edges` or `.el` file (each optionally `.gz`) |
//!
//! Policies shared by every loader:
//! - **Errors name the file**, and the 1-based line (text) or the array and position (`.npz`)
//!   and the offending value. Nothing reachable from bad input panics.
//! - **Sizes are checked before anything is allocated**: a declared node count must fit in `u32`
//!   (and in [`EdgeListOptions::max_nodes`] for edge lists), N × F at most 2^40 values, a
//!   feature width at most 2^24 columns, a class count at most 2^20; array lengths in `.npz`
//!   files are checked against the bytes actually stored before they are read.
//! - **Text is streamed** line by line (gzip-decompressed when the name ends in `.gz`), never
//!   held whole in memory; lines are at most 64 MiB.
//! - **Graphs** go through [`Graph::try_from_edges`](crate::graph::Graph::try_from_edges):
//!   undirected by default (each edge both ways; [`Direction::Directed`] keeps the direction),
//!   duplicate edges merged into one entry of weight 1, self-loops kept. Edge weights are not kept.
//! - **Formats without a split** (`.npz`, edge lists) get a seeded random one, see
//!   [`RandomSplit`].
//! - Every loader ends with [`Dataset::validate`].
//!
//! This file holds [`load`], its options and the checks every loader shares; `text` the line
//! reader and the feature and label files, `split` the random split, and one file (or folder)
//! per format: `ogb`, `npz`, `edgelist`.

mod edgelist;
mod npz;
mod ogb;
mod split;
mod text;

use std::io;
use std::path::{Path, PathBuf};

pub use edgelist::{load_edge_list, EdgeListOptions};
pub use npz::{load_npz_benchmark, load_scipy_npz, NpzOptions};
pub use ogb::{load_ogb, load_ogb_skeleton, OgbFeatures, OgbOptions};
use split::random_split;
pub use split::{RandomSplit, SplitRule};
use text::{
    excerpt, first_line_width, parse_uint, read_feature_rows, read_features, read_labels, Line,
    LineReader, Syntax,
};

use super::{Dataset, Features, SparseFeatures};
use crate::graph::Direction;
use crate::kernels::Csr;
use crate::{Error, Result};

/// Largest number of values (features, or edges) a declared size may ask for: 2^40.
const MAX_VALUES: usize = 1 << 40;
/// Up-front reservation cap for lists whose declared length is not yet confirmed by a file.
const MAX_TRUSTED_RESERVE: usize = 1 << 26;
/// Most feature columns accepted (the transpose of sparse features allocates one word per
/// column, the first layer's weight `in_dim × hidden` values).
pub(crate) const MAX_FEATURE_COLS: usize = 1 << 24;
/// Most classes accepted when the class count is inferred from the labels (largest label + 1).
pub(crate) const MAX_CLASSES: usize = 1 << 20;

/// The feature density below which [`LoadOptions::default`] (and so the CLI) stores features
/// sparse: bag-of-words features (Cora's 1.3 %) go sparse, embeddings stay dense.
pub const SPARSE_FEATURES_BELOW: f64 = 0.1;

/// Options for [`load`]: the union of the per-format options; each loader reads the fields
/// that apply to it. [`LoadOptions::default`] is what `sparse-gcn` loads with: undirected,
/// features stored sparse below [`SPARSE_FEATURES_BELOW`] density, Planetoid's random split
/// for formats without one.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Undirected (the default: each edge both ways) or directed, for every format.
    pub direction: Direction,
    /// The OGB split folder (see [`OgbOptions::split`]).
    pub split: Option<String>,
    /// The split drawn for `.npz` files and edge lists.
    pub random_split: RandomSplit,
    /// Store features sparse when at most this fraction of them is non-zero (dense inputs
    /// only; sparse `.npz` features stay sparse). `None` keeps dense features dense. Default:
    /// [`SPARSE_FEATURES_BELOW`], as the CLI (the kernels run sparse bag-of-words features
    /// about ten times faster, and the numbers are the CLI's).
    pub sparse_features_below: Option<f64>,
    /// Node cap for edge lists and `.npz` files (see [`EdgeListOptions::max_nodes`]).
    pub max_nodes: usize,
    /// A feature file for an edge list (see [`load_edge_list`]) or a scipy `.npz` adjacency
    /// (see [`load_scipy_npz`]); an error for the other formats, which carry their own.
    pub features: Option<PathBuf>,
    /// A label file, as [`LoadOptions::features`].
    pub labels: Option<PathBuf>,
    /// The node count of an edge list (see [`EdgeListOptions::n_nodes`]).
    pub n_nodes: Option<usize>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            direction: Direction::Undirected,
            split: None,
            random_split: RandomSplit::default(),
            sparse_features_below: Some(SPARSE_FEATURES_BELOW),
            max_nodes: EdgeListOptions::default().max_nodes,
            features: None,
            labels: None,
            n_nodes: None,
        }
    }
}

/// Loads a dataset of any supported format, detected from `path`:
/// - a folder holding `store.json` → [`store::load`](crate::data::store::load) (memory-mapped;
///   feature and label files, another split or `--directed` on an undirected store refused);
/// - a folder holding `raw/` → [`load_ogb`]; a structure-only folder (without
///   `raw/node-feat` or `raw/node-label`, see [`ogb_carries`]) takes [`LoadOptions::features`]
///   and [`LoadOptions::labels`] in their place;
/// - a `.npz` file holding `adj_indptr` or `adj_data` → [`load_npz_benchmark`];
/// - another `.npz` file holding `format`, `indptr` or `row` (a `scipy.sparse.save_npz`
///   adjacency) → [`load_scipy_npz`] with [`LoadOptions::features`] and
///   [`LoadOptions::labels`];
/// - a file named `*.txt`, `*.csv`, `*.tsv`, `*.edges` or `*.el` (each optionally followed by
///   `.gz`) → [`load_edge_list`] with [`LoadOptions::features`] and [`LoadOptions::labels`]
///   (`n_nodes` is [`LoadOptions::n_nodes`], else the label or feature rows, else the largest
///   id + 1; the class count the largest label + 1).
///
/// # Errors
/// [`Error::Io`] if `path` does not exist; [`Error::Dataset`] for a folder without `raw/`, an
/// unrecognised extension or `.npz` layout, or feature / label files given for a format that
/// carries its own; then every error of the chosen loader.
///
/// # Examples
/// ```no_run
/// use sparse_gcn::data::io::{load, LoadOptions};
/// let d = load("datasets/cora".as_ref(), &LoadOptions::default())?;
/// println!("{}: {} nodes", d.name, d.graph.n_nodes());
/// # Ok::<(), sparse_gcn::Error>(())
/// ```
pub fn load(path: &Path, opts: &LoadOptions) -> Result<Dataset> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    let own_files_only = |format: &str| -> Result<()> {
        if opts.features.is_some() || opts.labels.is_some() {
            return Err(Error::Dataset {
                path: path.to_path_buf(),
                msg: format!(
                    "{format} carries its own features and labels: extra feature or label files \
                     are only used with edge lists, scipy .npz adjacencies and structure-only OGB \
                     folders"
                ),
            });
        }
        Ok(())
    };
    if meta.is_dir() {
        if path.join(crate::data::store::HEADER).is_file() {
            return crate::data::store::load(path, opts);
        }
        if !path.join("raw").is_dir() {
            return Err(Error::Dataset {
                path: path.to_path_buf(),
                msg: "a folder without raw/ nor store.json: neither an OGB dataset nor a \
                      store (the two folder formats)"
                    .into(),
            });
        }
        let (own_features, own_labels) = ogb_carries(path);
        if (opts.features.is_some() && own_features) || (opts.labels.is_some() && own_labels) {
            own_files_only("an OGB folder with raw/node-feat or raw/node-label")?;
        }
        let o = OgbOptions {
            split: opts.split.clone(),
            direction: opts.direction,
            sparse_features_below: opts.sparse_features_below,
        };
        let d = load_ogb(path, &o)?;
        if opts.features.is_none() && opts.labels.is_none() {
            return Ok(d);
        }
        return with_files(path, d, opts);
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let base = name.strip_suffix(".gz").unwrap_or(&name);
    let ext = base.rsplit_once('.').map_or("", |(_, e)| e);
    match ext {
        "npz" if !name.ends_with(".gz") => {
            let no = NpzOptions {
                direction: opts.direction,
                split: opts.random_split,
                sparse_features_below: opts.sparse_features_below,
                n_classes: None,
                max_nodes: opts.max_nodes,
            };
            match npz::detect_layout(path)? {
                npz::Layout::Benchmark => {
                    own_files_only("a gnn-benchmark .npz")?;
                    load_npz_benchmark(path, &no)
                }
                npz::Layout::Scipy => {
                    load_scipy_npz(path, opts.features.as_deref(), opts.labels.as_deref(), &no)
                }
            }
        }
        "txt" | "csv" | "tsv" | "edges" | "el" => {
            let eo = EdgeListOptions {
                n_nodes: opts.n_nodes,
                n_classes: None,
                direction: opts.direction,
                split: opts.random_split,
                max_nodes: opts.max_nodes,
                sparse_features_below: opts.sparse_features_below,
            };
            load_edge_list(path, opts.features.as_deref(), opts.labels.as_deref(), &eo)
        }
        _ => Err(Error::Dataset {
            path: path.to_path_buf(),
            msg: "unrecognised format: expected an OGB folder (with raw/), a .npz file, or an \
                  edge list named *.txt, *.csv, *.tsv, *.edges or *.el (optionally .gz)"
                .into(),
        }),
    }
}

/// [`load`], with a store read in the node order it holds, and that order (`None` for the
/// input's, and for every other format): for training, which relabels the data into that
/// order anyway ([`crate::order::reorder_dataset`]).
///
/// # Errors
/// As [`load`].
pub fn load_ordered(
    path: &Path,
    opts: &LoadOptions,
) -> Result<(Dataset, Option<crate::data::store::StoredOrder>)> {
    if path.is_dir() && path.join(crate::data::store::HEADER).is_file() {
        return crate::data::store::load_ordered(path, opts);
    }
    Ok((load(path, opts)?, None))
}

/// Whether the OGB folder `dir` carries its own features and labels (`raw/node-feat`,
/// `raw/node-label`, each `.csv.gz` or `.csv`): a structure-only folder carries neither, and
/// takes [`LoadOptions::features`] and [`LoadOptions::labels`] files instead.
pub fn ogb_carries(dir: &Path) -> (bool, bool) {
    let has = |stem: &str| {
        let raw = dir.join("raw");
        raw.join(format!("{stem}.csv.gz")).exists() || raw.join(format!("{stem}.csv")).exists()
    };
    (has("node-feat"), has("node-label"))
}

/// A structure-only OGB folder's dataset `d` with the feature and label files of `opts` (one
/// row per node, as for an edge list), the folder's split kept.
fn with_files(dir: &Path, d: Dataset, opts: &LoadOptions) -> Result<Dataset> {
    let n = d.graph.n_nodes();
    let count_name = format!("the {n} nodes of {} (raw/num-node-list)", dir.display());
    let (labels, n_classes) = match &opts.labels {
        Some(p) => {
            let labels = read_labels(p, Syntax::Free, n, &count_name, None)?;
            let c = checked_class_count(p, &labels, None)?;
            (labels, c)
        }
        None => (d.labels, d.n_classes),
    };
    let features = match &opts.features {
        Some(p) => {
            let f = Features::dense(read_features(p, Syntax::Free, n, &count_name)?);
            match opts.sparse_features_below {
                Some(t) => f.into_sparse_if(t),
                None => f,
            }
        }
        None => d.features,
    };
    Dataset::try_new(d.name, d.graph, features, labels, n_classes, d.split)
}

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

/// An [`Error::Io`] unless `path` is an existing regular file (a directory is rejected here:
/// opening one succeeds on Linux and only the first read fails).
fn check_file(path: &Path) -> Result<()> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if meta.is_dir() {
        let e = io::Error::new(
            io::ErrorKind::InvalidInput,
            "is a directory, expected a file",
        );
        return Err(Error::io(path, e));
    }
    Ok(())
}

/// The file name without `.gz` and without its last extension (`cora.txt.gz` → `cora`).
fn file_stem(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    let base = name.strip_suffix(".gz").unwrap_or(&name);
    match base.rsplit_once('.') {
        Some((stem, _)) if !stem.is_empty() => stem.to_string(),
        _ => base.to_string(),
    }
}

/// An [`Error::Dataset`] for a failed allocation for `path`.
fn alloc_error(path: &Path, what: &str, e: std::collections::TryReserveError) -> Error {
    Error::Dataset {
        path: path.to_path_buf(),
        msg: format!("cannot allocate {what}: {e}"),
    }
}

/// Pushes `x` onto `v`, which grows with what a file holds (a compressed file may hold far
/// more than its size says): each time it would double its capacity past 2^20 entries, the
/// growth is checked against the memory available first ([`crate::data::memory::check`]), so
/// that a gzip bomb is an [`Error::TooLarge`] naming the file instead of an abort.
fn push_checked<T>(v: &mut Vec<T>, x: T, path: &Path, what: &str) -> Result<()> {
    if v.len() == v.capacity() && v.len() >= 1 << 20 {
        let more = v.len();
        let bytes = crate::data::memory::bytes(more, std::mem::size_of::<T>());
        crate::data::memory::check(bytes, || {
            format!(
                "{}: {what} past {} entries (the file holds more than memory does)",
                path.display(),
                v.len()
            )
        })?;
        v.try_reserve(more)
            .map_err(|e| alloc_error(path, what, e))?;
    }
    v.push(x);
    Ok(())
}

/// The features of a dataset without any: n rows of width 0 (training asks for `--features`).
pub(crate) fn no_features(n: usize) -> Features<f32> {
    Features::sparse(SparseFeatures::new(Csr::new(
        (n, 0),
        vec![0; n + 1],
        vec![],
        vec![],
    )))
}

/// The n × n identity as sparse features (one-hot node ids; never dense).
pub(crate) fn identity_features(n: usize) -> Result<Features<f32>> {
    let indptr: Vec<usize> = (0..=n).collect();
    let indices: Vec<u32> = (0..n)
        .map(|i| u32::try_from(i).unwrap_or(u32::MAX))
        .collect();
    let data = vec![1.0f32; n];
    let x = Csr::try_new((n, n), indptr, indices, data).map_err(|(_, _, _, e)| Error::Dataset {
        path: PathBuf::from("identity features"),
        msg: format!("{n} nodes: {e}"),
    })?;
    Ok(Features::sparse(SparseFeatures::new(x)))
}

/// The class count: `declared`, or the largest label + 1 (0 without labelled nodes).
fn class_count(labels: &[u32], declared: Option<usize>) -> usize {
    declared.unwrap_or_else(|| {
        labels
            .iter()
            .filter(|&&l| l != crate::data::UNLABELLED)
            .max()
            .map_or(0, |&m| m as usize + 1)
    })
}

/// [`class_count`], refusing an inferred count above the number of labelled nodes (some
/// classes would have no node at all; one typo'd label such as `1000000` would make a model
/// of a million classes, with n × 10⁶ logits): an [`Error::Dataset`] on `path` (the label
/// file) naming the node and the label.
fn checked_class_count(path: &Path, labels: &[u32], declared: Option<usize>) -> Result<usize> {
    let c = class_count(labels, declared);
    if declared.is_some() {
        return Ok(c);
    }
    let labelled = labels
        .iter()
        .filter(|&&l| l != crate::data::UNLABELLED)
        .count();
    if c <= labelled {
        return Ok(c);
    }
    let (node, label) = labels
        .iter()
        .enumerate()
        .filter(|(_, &l)| l != crate::data::UNLABELLED)
        .max_by_key(|(i, &l)| (l, std::cmp::Reverse(*i)))
        .map_or((0, 0), |(i, &l)| (i, l));
    Err(Error::Dataset {
        path: path.to_path_buf(),
        msg: format!(
            "label {label} of node {node} (line {} of a one-label-per-line file) implies {c} \
             classes (class ids run from 0 to the largest label), more than the {labelled} \
             labelled nodes: a typo? Number the classes 0 to C−1",
            node + 1
        ),
    })
}

/// Refuses a graph of `n` nodes and `edges` edges from `path` (plus `more` bytes the caller is
/// about to allocate with it) that would not fit in the memory available: per node the CSR row
/// pointers and their fill copy, the labels, the random split's order and the row pointers of
/// the (empty) features, 32 bytes; per edge `edge_bytes` (the column indices of both
/// directions, and the edge list itself when it is not read yet).
fn check_graph_fits(
    path: &Path,
    n: usize,
    edges: usize,
    edge_bytes: usize,
    more: u64,
) -> Result<()> {
    let needed = crate::data::memory::bytes(n, 32)
        .saturating_add(crate::data::memory::bytes(edges, edge_bytes))
        .saturating_add(more);
    crate::data::memory::check(needed, || {
        format!("{}: a graph of {n} nodes and {edges} edges", path.display())
    })
}

#[cfg(test)]
mod tests;
