//! Loaders: graphs in, [`Dataset`]s out.
//!
//! | format | loader | picked by [`load`] for |
//! |---|---|---|
//! | OGB node-property-prediction raw layout | [`load_ogb`] | a folder holding `raw/` |
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
//! - **Graphs** go through [`Graph::try_from_edges`](crate::graph::Graph::try_from_edges): undirected
//!   by default (each edge both ways; [`Direction::Directed`] keeps the direction), duplicate
//!   edges merged into one entry of weight 1, self-loops kept. Edge weights are not kept.
//! - **Formats without a split** (`.npz`, edge lists) get a seeded random one, see
//!   [`RandomSplit`].
//! - Every loader ends with [`Dataset::validate`].

mod edgelist;
mod npz;
mod ogb;

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use flate2::read::MultiGzDecoder;
use ndarray::Array2;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub use edgelist::{load_edge_list, EdgeListOptions};
pub use npz::{load_npz_benchmark, load_scipy_npz, NpzOptions};
pub use ogb::{load_ogb, load_ogb_skeleton, OgbFeatures, OgbOptions};

use super::{Dataset, Features, Mask, SparseFeatures, Split};
use crate::graph::Direction;
use crate::kernels::Csr;
use crate::{Error, Result};

/// Largest number of values (features, or edges) a declared size may ask for: 2^40.
const MAX_VALUES: usize = 1 << 40;
/// Longest accepted line, in bytes (a guard against binary or newline-free input).
const MAX_LINE_BYTES: usize = 64 << 20;
/// Up-front reservation cap for lists whose declared length is not yet confirmed by a file.
const MAX_TRUSTED_RESERVE: usize = 1 << 26;
/// Most feature columns accepted (the transpose of sparse features allocates one word per
/// column, the first layer's weight `in_dim × hidden` values).
pub const MAX_FEATURE_COLS: usize = 1 << 24;
/// Most classes accepted when the class count is inferred from the labels (largest label + 1).
pub const MAX_CLASSES: usize = 1 << 20;

/// How a seeded random split is drawn for the formats that carry none (`.npz`, edge lists).
///
/// The nodes are shuffled with a `ChaCha8Rng` seeded by [`RandomSplit::seed`] (a Fisher–Yates
/// shuffle), so a split depends only on the seed, the node count and the labels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RandomSplit {
    /// How many nodes go to each part.
    pub rule: SplitRule,
    /// The seed of the shuffle.
    pub seed: u64,
}

impl Default for RandomSplit {
    /// Planetoid: 20 training nodes per class, 500 validation and 1000 test nodes; seed 0.
    fn default() -> Self {
        RandomSplit {
            rule: SplitRule::PerClass {
                train_per_class: 20,
                n_valid: 500,
                n_test: 1000,
            },
            seed: 0,
        }
    }
}

/// The sizes of a [`RandomSplit`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SplitRule {
    /// Planetoid style (Yang et al. 2016, Kipf & Welling 2017): in shuffled order, the first
    /// `train_per_class` nodes of each class train; of the remaining nodes, in the same order,
    /// the first `min(n_valid, rest / 2)` validate and the next `min(n_test, rest - valid)`
    /// test. A class with fewer nodes gives all of them to training. Needs more than
    /// `train_per_class × classes + 1` nodes, or a part is empty ([`Error::EmptyMask`]).
    PerClass {
        /// Training nodes per class.
        train_per_class: usize,
        /// Validation nodes (at most).
        n_valid: usize,
        /// Test nodes (at most).
        n_test: usize,
    },
    /// Fractions of all nodes, in shuffled order: `round(train·n)` train, `round(valid·n)`
    /// validate, `round(test·n)` test (clipped to the nodes left). Each fraction must lie in
    /// `[0, 1]` and their sum must not exceed 1 (an [`Error::Dataset`] otherwise); nodes left
    /// over are in no part.
    Fractions {
        /// Fraction of training nodes.
        train: f64,
        /// Fraction of validation nodes.
        valid: f64,
        /// Fraction of test nodes.
        test: f64,
    },
}

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
/// - a folder holding `raw/` → [`load_ogb`];
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
                     are only used with edge lists and scipy .npz adjacencies"
                ),
            });
        }
        Ok(())
    };
    if meta.is_dir() {
        if !path.join("raw").is_dir() {
            return Err(Error::Dataset {
                path: path.to_path_buf(),
                msg: "a folder without raw/: not an OGB dataset (the only folder format)".into(),
            });
        }
        own_files_only("an OGB folder")?;
        let o = OgbOptions {
            split: opts.split.clone(),
            direction: opts.direction,
            sparse_features_below: opts.sparse_features_below,
        };
        return load_ogb(path, &o);
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
/// Values on the first line of a feature file (0 for an empty file).
fn first_line_width(path: &Path, syntax: Syntax) -> Result<usize> {
    let mut r = LineReader::open(path, syntax)?;
    Ok(r.next_line()?.map_or(0, |line| line.fields().count()))
}

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

/// Draws a seeded random split of `labels.len()` nodes (see [`RandomSplit`]); `path` names the
/// dataset in errors.
///
/// Only labelled nodes are drawn ([`UNLABELLED`](crate::data::UNLABELLED) ones are in no part);
/// without any label the split is [`Split::none`]. A part left empty is an
/// [`Error::Dataset`] naming the sizes and the options that set them.
fn random_split(path: &Path, labels: &[u32], n_classes: usize, rs: &RandomSplit) -> Result<Split> {
    let n = labels.len();
    let mut rng = ChaCha8Rng::seed_from_u64(rs.seed);
    let mut order: Vec<u32> = (0..n).map(|i| i as u32).collect();
    for i in (1..n).rev() {
        order.swap(i, rng.random_range(0..=i));
    }
    // The same shuffle with or without unlabelled nodes (they are dropped after it).
    order.retain(|&i| labels[i as usize] != crate::data::UNLABELLED);
    if order.is_empty() {
        return Ok(Split::none(n));
    }
    let n_labelled = order.len();
    let (train, valid, test) = match rs.rule {
        SplitRule::PerClass {
            train_per_class,
            n_valid,
            n_test,
        } => {
            let mut per = vec![0usize; n_classes];
            let (mut train, mut rest) = (Vec::new(), Vec::new());
            for &i in &order {
                let l = labels.get(i as usize).map_or(0, |&l| l as usize);
                match per.get_mut(l) {
                    Some(c) if *c < train_per_class => {
                        *c += 1;
                        train.push(i);
                    }
                    _ => rest.push(i),
                }
            }
            let n_valid = n_valid.min(rest.len() / 2);
            let n_test = n_test.min(rest.len() - n_valid);
            let valid = rest[..n_valid].to_vec();
            let test = rest[n_valid..n_valid + n_test].to_vec();
            (train, valid, test)
        }
        SplitRule::Fractions { train, valid, test } => {
            let ok = |f: f64| (0.0..=1.0).contains(&f);
            if !(ok(train) && ok(valid) && ok(test) && train + valid + test <= 1.0 + 1e-9) {
                return Err(Error::Dataset {
                    path: path.to_path_buf(),
                    msg: format!(
                        "split fractions train {train}, valid {valid}, test {test}: each must \
                         lie in [0, 1] and their sum must not exceed 1"
                    ),
                });
            }
            let n = n_labelled;
            let count = |f: f64| ((f * n as f64).round() as usize).min(n);
            let n_train = count(train);
            let n_valid = count(valid).min(n - n_train);
            let n_test = count(test).min(n - n_train - n_valid);
            (
                order[..n_train].to_vec(),
                order[n_train..n_train + n_valid].to_vec(),
                order[n_train + n_valid..n_train + n_valid + n_test].to_vec(),
            )
        }
    };
    let sizes = [train.len(), valid.len(), test.len()];
    if let Some(k) = sizes.iter().position(|&s| s == 0) {
        let rule = match rs.rule {
            SplitRule::PerClass {
                train_per_class,
                n_valid,
                n_test,
            } => format!(
                "{train_per_class} training nodes per class × {n_classes} classes, then up to \
                 {n_valid} validation and {n_test} test nodes"
            ),
            SplitRule::Fractions { train, valid, test } => {
                format!("fractions {train}/{valid}/{test}")
            }
        };
        return Err(Error::Dataset {
            path: path.to_path_buf(),
            msg: format!(
                "a random split of {n_labelled} labelled nodes with {rule} leaves the {} part \
                 empty (train/valid/test {}/{}/{}); set smaller sizes with --train-per-class N \
                 or --split-sizes TRAIN,VALID,TEST (fractions of the labelled nodes) \
                 (RandomSplit::rule in the library)",
                ["train", "valid", "test"][k],
                sizes[0],
                sizes[1],
                sizes[2]
            ),
        });
    }
    Ok(Split {
        name: "random".into(),
        train: Mask::try_from_indices(train, n)?,
        valid: Mask::try_from_indices(valid, n)?,
        test: Mask::try_from_indices(test, n)?,
    })
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

// ---------------------------------------------------------------------------------------------
// Text files
// ---------------------------------------------------------------------------------------------

/// The syntax of a text file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Syntax {
    /// OGB's csv: fields separated by commas; no comments; empty lines only at the end.
    Ogb,
    /// Free text: fields separated by commas when the line has one, else by whitespace;
    /// `#` and `%` start a comment running to the end of the line; empty lines are skipped.
    Free,
}

/// A file read line by line, decompressed when its name ends in `.gz`.
struct LineReader {
    path: PathBuf,
    inner: Box<dyn BufRead>,
    buf: Vec<u8>,
    syntax: Syntax,
    /// 1-based number of the line in `buf` (0 before the first).
    line_no: usize,
    /// The first of a run of empty lines not yet followed by data ([`Syntax::Ogb`]).
    pending_empty: Option<usize>,
}

/// One trimmed, non-empty line with what an error message needs.
struct Line<'a> {
    path: &'a Path,
    no: usize,
    text: &'a str,
    syntax: Syntax,
}

/// The fields of a [`Line`].
enum Fields<'a> {
    Comma(std::str::Split<'a, char>),
    Space(std::str::SplitAsciiWhitespace<'a>),
}

impl<'a> Iterator for Fields<'a> {
    type Item = &'a str;
    fn next(&mut self) -> Option<&'a str> {
        match self {
            Fields::Comma(s) => s.next(),
            Fields::Space(s) => s.next(),
        }
    }
}

impl<'a> Line<'a> {
    /// An [`Error::Parse`] at this line.
    fn err(&self, msg: impl Into<String>) -> Error {
        Error::parse(self.path, self.no, msg)
    }
    /// The fields, split as the [`Syntax`] says.
    fn fields(&self) -> Fields<'a> {
        if self.syntax == Syntax::Ogb || self.text.contains(',') {
            Fields::Comma(self.text.split(','))
        } else {
            Fields::Space(self.text.split_ascii_whitespace())
        }
    }
}

impl LineReader {
    fn open(path: &Path, syntax: Syntax) -> Result<Self> {
        check_file(path)?;
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let inner: Box<dyn BufRead> = if path.extension().is_some_and(|e| e == "gz") {
            Box::new(BufReader::with_capacity(1 << 16, MultiGzDecoder::new(file)))
        } else {
            Box::new(BufReader::with_capacity(1 << 16, file))
        };
        Ok(LineReader {
            path: path.to_path_buf(),
            inner,
            buf: Vec::new(),
            syntax,
            line_no: 0,
            pending_empty: None,
        })
    }

    /// The next non-empty line, trimmed (comments removed in [`Syntax::Free`]); `None` at the
    /// end of the file. In [`Syntax::Ogb`], empty lines are skipped only at the end of the file:
    /// one followed by data is an [`Error::Parse`].
    fn next_line(&mut self) -> Result<Option<Line<'_>>> {
        loop {
            self.buf.clear();
            let limit = MAX_LINE_BYTES as u64 + 1;
            let n = (&mut self.inner)
                .take(limit)
                .read_until(b'\n', &mut self.buf)
                .map_err(|e| Error::io(&self.path, e))?;
            if n == 0 {
                return Ok(None);
            }
            self.line_no += 1;
            if self.buf.len() > MAX_LINE_BYTES {
                let msg = format!("line longer than {MAX_LINE_BYTES} bytes");
                return Err(Error::parse(&self.path, self.line_no, msg));
            }
            if let Err(e) = std::str::from_utf8(&self.buf) {
                return Err(Error::parse(
                    &self.path,
                    self.line_no,
                    format!("not UTF-8: {e}"),
                ));
            }
            if self.syntax == Syntax::Free {
                if let Some(k) = self.buf.iter().position(|&b| b == b'#' || b == b'%') {
                    self.buf.truncate(k);
                }
            }
            if self.buf.iter().all(u8::is_ascii_whitespace) {
                if self.syntax == Syntax::Ogb {
                    self.pending_empty.get_or_insert(self.line_no);
                }
                continue;
            }
            if let Some(no) = self.pending_empty {
                return Err(Error::parse(&self.path, no, "empty line"));
            }
            break;
        }
        // Checked above (cutting at an ASCII byte keeps UTF-8 valid); an empty fallback would
        // be reported as an empty field.
        let text = std::str::from_utf8(&self.buf)
            .unwrap_or_default()
            .trim_ascii();
        Ok(Some(Line {
            path: &self.path,
            no: self.line_no,
            text,
            syntax: self.syntax,
        }))
    }

    /// Counts the remaining non-empty lines (for the `got` of a row-count mismatch).
    fn count_rest(&mut self) -> Result<usize> {
        let mut k = 0;
        while self.next_line()?.is_some() {
            k += 1;
        }
        Ok(k)
    }
}

/// At most 40 characters of `s`, quoted, for error messages.
fn excerpt(s: &str) -> String {
    match s.char_indices().nth(40) {
        Some((i, _)) => format!("{:?}…", &s[..i]),
        None => format!("{s:?}"),
    }
}

/// Parses a label: `Some(class)`, or `None` for `-1` / `NaN` (unlabelled).
fn parse_label(line: &Line<'_>, field: &str) -> Result<Option<u64>> {
    let s = field.trim();
    if s.eq_ignore_ascii_case("nan") || s == "-1" {
        return Ok(None);
    }
    if let Ok(v) = s.parse::<u64>() {
        return Ok(Some(v));
    }
    match s.parse::<f64>() {
        Ok(v) if v.is_nan() => Ok(None),
        Ok(-1.0) => Ok(None),
        Ok(v) if v >= 0.0 && v.fract() == 0.0 && v < 9.0e15 => Ok(Some(v as u64)),
        _ => parse_uint(line, s, "label").map(Some).map_err(|e| match e {
            Error::Parse { path, line, msg } => Error::Parse {
                path,
                line,
                msg: format!("{msg} (a label is a class id >= 0, or -1 or NaN for none)"),
            },
            e => e,
        }),
    }
}

/// Parses a non-negative integer field; `what` names it in messages ("node id", "label", …).
fn parse_uint(line: &Line<'_>, field: &str, what: &str) -> Result<u64> {
    let s = field.trim();
    if s.is_empty() {
        return Err(line.err(format!("empty {what}")));
    }
    s.parse::<u64>().map_err(|e| {
        if s.strip_prefix('-')
            .is_some_and(|rest| rest.parse::<f64>().is_ok())
        {
            line.err(format!("negative {what} {}", excerpt(s)))
        } else {
            line.err(format!("invalid {what} {}: {e}", excerpt(s)))
        }
    })
}

/// Parses one feature value (with a fast path for the single digits of bag-of-words files).
fn parse_feature(line: &Line<'_>, field: &str, col: usize) -> Result<f32> {
    if let &[d @ b'0'..=b'9'] = field.as_bytes() {
        return Ok(f32::from(d - b'0'));
    }
    let s = field.trim();
    if s.is_empty() {
        return Err(line.err(format!("empty value in column {}", col + 1)));
    }
    s.parse::<f32>().map_err(|e| {
        line.err(format!(
            "invalid number {} in column {}: {e}",
            excerpt(s),
            col + 1
        ))
    })
}

/// Reads `n_nodes` rows of F numbers (F from the first row) into an N × F matrix, checking that
/// every value is finite. `count_name` names where N came from, in a row-count mismatch.
fn read_features(
    path: &Path,
    syntax: Syntax,
    n_nodes: usize,
    count_name: &str,
) -> Result<Array2<f32>> {
    read_feature_rows(path, syntax, n_nodes, count_name, None)
}

/// [`read_features`] keeping only the rows `keep` (distinct node ids, in the order wanted:
/// row k of the result is node `keep[k]`); every line is still read and checked, so a file
/// gives the same error whichever rows are kept. `None` keeps every row.
fn read_feature_rows(
    path: &Path,
    syntax: Syntax,
    n_nodes: usize,
    count_name: &str,
    keep: Option<&[u32]>,
) -> Result<Array2<f32>> {
    let mismatch = |got: usize| Error::Mismatch {
        what: format!("{}: feature rows vs {count_name}", path.display()),
        expected: n_nodes,
        got,
    };
    // Where each kept node's row goes (`NONE`: not kept).
    const NONE: u32 = u32::MAX;
    let slot: Option<Vec<u32>> = keep.map(|rows| {
        let mut slot = vec![NONE; n_nodes];
        for (k, &r) in rows.iter().enumerate() {
            if let Some(s) = slot.get_mut(r as usize) {
                *s = k as u32;
            }
        }
        slot
    });
    let out_rows = keep.map_or(n_nodes, <[u32]>::len);
    if let Some(&bad) = keep.and_then(|rows| rows.iter().find(|&&r| r as usize >= n_nodes)) {
        return Err(Error::Dataset {
            path: path.to_path_buf(),
            msg: format!("row {bad} asked of {n_nodes} nodes"),
        });
    }
    let mut r = LineReader::open(path, syntax)?;
    let mut data: Vec<f32> = Vec::new();
    let mut row_buf: Vec<f32> = Vec::new();
    let mut n_feat = 0usize;
    let mut rows = 0usize;
    while let Some(line) = r.next_line()? {
        if rows == n_nodes {
            return Err(mismatch(rows + 1 + r.count_rest()?));
        }
        if rows == 0 {
            n_feat = line.fields().count();
            if n_feat > MAX_FEATURE_COLS {
                return Err(Error::Dataset {
                    path: path.to_path_buf(),
                    msg: format!(
                        "line 1 has {n_feat} values, more than the limit of 2^24 feature columns"
                    ),
                });
            }
            let total = n_nodes.checked_mul(n_feat).filter(|&t| t <= MAX_VALUES);
            let Some(_) = total else {
                return Err(Error::Dataset {
                    path: path.to_path_buf(),
                    msg: format!(
                        "{n_nodes} nodes × {n_feat} features is more than the limit of 2^40 values"
                    ),
                });
            };
            let total = out_rows * n_feat;
            crate::data::memory::check(crate::data::memory::bytes(total, 4), || {
                format!(
                    "{}: {out_rows} feature rows × {n_feat} columns (f32)",
                    path.display()
                )
            })?;
            data.try_reserve_exact(total)
                .map_err(|e| alloc_error(path, &format!("{out_rows} × {n_feat} features"), e))?;
            if slot.is_some() {
                data.resize(total, 0.0);
            }
        }
        row_buf.clear();
        for field in line.fields() {
            let cols = row_buf.len();
            if cols == n_feat {
                let k = line.fields().count();
                return Err(line.err(format!(
                    "expected {n_feat} values (as the first row), got {k}"
                )));
            }
            let v = parse_feature(&line, field, cols)?;
            if !v.is_finite() {
                return Err(Error::NonFiniteValue {
                    what: path.display().to_string(),
                    row: rows,
                    col: cols,
                    value: f64::from(v),
                });
            }
            row_buf.push(v);
        }
        if row_buf.len() != n_feat {
            return Err(line.err(format!(
                "expected {n_feat} values (as the first row), got {}",
                row_buf.len()
            )));
        }
        match &slot {
            None => data.extend_from_slice(&row_buf),
            Some(slot) => {
                if let Some(k) = Some(slot[rows] as usize).filter(|&k| k != NONE as usize) {
                    data[k * n_feat..(k + 1) * n_feat].copy_from_slice(&row_buf);
                }
            }
        }
        rows += 1;
    }
    if rows != n_nodes {
        return Err(mismatch(rows));
    }
    Array2::from_shape_vec((out_rows, n_feat), data).map_err(|e| Error::Dataset {
        path: path.to_path_buf(),
        msg: format!("feature matrix {out_rows} × {n_feat}: {e}"),
    })
}

/// Reads `n_nodes` lines of one label each: a non-negative integer (`3`, or `3.0` as OGB's
/// float label files write it), or `-1` / `NaN` for an unlabelled node
/// ([`UNLABELLED`](crate::data::UNLABELLED)). With `n_classes` declared, a label ≥ it is an
/// [`Error::LabelOutOfRange`]; otherwise a label ≥ [`MAX_CLASSES`] is. Several fields on a
/// line (multi-label data) are an [`Error::Parse`] saying so.
fn read_labels(
    path: &Path,
    syntax: Syntax,
    n_nodes: usize,
    count_name: &str,
    n_classes: Option<usize>,
) -> Result<Vec<u32>> {
    let mismatch = |got: usize| Error::Mismatch {
        what: format!("{}: label rows vs {count_name}", path.display()),
        expected: n_nodes,
        got,
    };
    let limit = n_classes.unwrap_or(MAX_CLASSES);
    let mut labels = Vec::new();
    labels
        .try_reserve_exact(n_nodes.min(MAX_TRUSTED_RESERVE))
        .map_err(|e| alloc_error(path, "the labels", e))?;
    let mut r = LineReader::open(path, syntax)?;
    while let Some(line) = r.next_line()? {
        if labels.len() == n_nodes {
            return Err(mismatch(n_nodes + 1 + r.count_rest()?));
        }
        let mut fields = line.fields();
        let field = match (fields.next(), fields.next()) {
            (Some(x), None) => x,
            _ => {
                return Err(line.err(format!(
                    "expected one label per line, got {}: multi-label data (several classes \
                     per node) is not supported",
                    excerpt(line.text)
                )))
            }
        };
        let Some(v) = parse_label(&line, field)? else {
            push_checked(&mut labels, crate::data::UNLABELLED, path, "the labels")?;
            continue;
        };
        if v >= limit as u64 {
            return Err(Error::LabelOutOfRange {
                node: labels.len(),
                label: i64::try_from(v).unwrap_or(i64::MAX),
                n_classes: limit,
            });
        }
        // limit ≤ MAX_CLASSES or a declared count checked against u32 by the caller
        let l = u32::try_from(v).map_err(|_| line.err(format!("label {v} does not fit in u32")))?;
        push_checked(&mut labels, l, path, "the labels")?;
    }
    if labels.len() != n_nodes {
        return Err(mismatch(labels.len()));
    }
    Ok(labels)
}

#[cfg(test)]
mod tests;
