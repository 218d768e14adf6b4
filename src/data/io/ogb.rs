//! The OGB node-property-prediction raw layout ([`load_ogb`]).
//!
//! ```text
//! DIR/raw/edge.csv.gz          one edge per line "src,dst" (0-based ids), no header
//! DIR/raw/node-feat.csv.gz     N lines of F comma-separated numbers
//! DIR/raw/node-label.csv.gz    N lines, one integer class id each
//! DIR/raw/num-node-list.csv.gz one line: N
//! DIR/raw/num-edge-list.csv.gz one line: the number of lines of edge.csv.gz
//! DIR/split/<name>/{train,valid,test}.csv.gz   one node id per line
//! ```
//!
//! Every file may also be stored uncompressed as `.csv`; the `.csv.gz` wins when both exist.
//! Files are read line by line (never whole into memory). Whitespace around fields is ignored, as
//! are empty lines at the end of a file; an empty line followed by data is an error.
//!
//! Duplicate-edge and self-loop policy: the edge list is handed to [`Graph::try_from_edges`],
//! which merges duplicate edges into one entry of weight 1 and keeps self-loops.

use std::io;
use std::path::{Path, PathBuf};

use super::{
    alloc_error, excerpt, parse_uint, read_features, read_labels, Line, LineReader, Syntax,
    MAX_TRUSTED_RESERVE, MAX_VALUES,
};
use ndarray::Array2;

use crate::data::{Dataset, Features, Mask, Skeleton, Split, UNLABELLED};
use crate::graph::{Direction, Graph};
use crate::{Error, Result};

/// Options for [`load_ogb`].
#[derive(Debug, Clone, Default)]
pub struct OgbOptions {
    /// The split folder under `split/` to use. `None` picks the only one, and is an error when
    /// there are several.
    pub split: Option<String>,
    /// Whether `edge.csv` is read as undirected (each edge both ways, OGB's
    /// `add_inverse_edge`, the default) or directed.
    pub direction: Direction,
    /// If `Some(t)`, features with at most a fraction `t` of non-zeros are stored sparse (see
    /// [`Features::into_sparse_if`]); `None` (the default) keeps them dense.
    pub sparse_features_below: Option<f64>,
}

/// Loads a dataset in the OGB node-property-prediction raw layout from the folder `dir`:
///
/// ```text
/// DIR/raw/edge.csv.gz          one edge per line "src,dst" (0-based ids), no header
/// DIR/raw/node-feat.csv.gz     N lines of F comma-separated numbers (optional)
/// DIR/raw/node-label.csv.gz    N lines, one class id each, -1 or NaN if none (optional)
/// DIR/raw/num-node-list.csv.gz one line: N
/// DIR/raw/num-edge-list.csv.gz one line: the number of lines of edge.csv.gz
/// DIR/split/<name>/{train,valid,test}.csv.gz   one node id per line
/// ```
///
/// A **structure-only** folder (no `node-feat`, no `node-label`, maybe no `split/`: the real
/// graphs `cit_hepph` and `cnr_2000`) loads with features of width 0, every node
/// [`UNLABELLED`] and, without `split/`, [`Split::none`]: enough for statistics, orderings and
/// benchmarks; training asks for features and labels ([`crate::train::check_data`]).
///
/// Every file may also be stored uncompressed as `.csv`; the `.csv.gz` wins when both exist.
/// Files are streamed line by line (never whole into memory). Whitespace around fields is
/// ignored, as are empty lines at the end of a file; an empty line followed by data is an error.
/// Other files (`edge-feat`, `mapping/`, …) are not read. The dataset is named after the folder.
///
/// `edge.csv` is read as undirected by default (each edge both ways, OGB's `add_inverse_edge`);
/// [`OgbOptions::direction`] keeps the direction. Duplicate edges merge, self-loops stay.
///
/// Node features are read into a dense N × F matrix (F from the first line), then stored sparse
/// if [`OgbOptions::sparse_features_below`] says so. `n_classes` is the largest label + 1.
///
/// # Errors
/// Every error names the file, and the 1-based line or the value where it applies:
/// - [`Error::Io`]: a missing file, a directory where a file is expected, a read or gzip error
///   (e.g. a truncated `.csv.gz`);
/// - [`Error::Parse`]: a non-numeric or empty field, an empty line before data, a wrong number
///   of fields (2 per edge, F per feature row, 1 per label or split line), a negative number,
///   a node id ≥ N (in edges or splits), an unlabeled node (`nan` label);
/// - [`Error::NonFiniteValue`]: a NaN or infinite feature (`what` is the file path; row and
///   column 0-based);
/// - [`Error::Mismatch`]: feature or label rows ≠ N, edge lines ≠ `num-edge-list`;
/// - [`Error::Dataset`]: a missing or ambiguous split folder (the message lists the available
///   names), an empty graph (N = 0), an absurd declared size (N over `u32`, edges or N·F over
///   2^40 values, over 2^24 feature columns, or an allocation that fails), overlapping split
///   parts;
/// - [`Error::LabelOutOfRange`]: a label ≥ 2^20 (the class count is the largest label + 1);
/// - [`Error::EmptyMask`]: an empty split file;
/// - any other error of [`Dataset::validate`].
///
/// # Examples
/// ```no_run
/// use sparse_gcn::data::io::{load_ogb, OgbOptions};
/// let opts = OgbOptions { sparse_features_below: Some(0.1), ..OgbOptions::default() };
/// let cora = load_ogb("datasets/cora", &opts)?;
/// println!("{}: {} nodes, {} edges", cora.name, cora.graph.n_nodes(), cora.graph.n_edges());
/// # Ok::<(), sparse_gcn::Error>(())
/// ```
pub fn load_ogb(dir: impl AsRef<Path>, opts: &OgbOptions) -> Result<Dataset> {
    let (skeleton, file) = load_ogb_skeleton(dir, opts)?;
    let n_nodes = skeleton.graph.n_nodes();
    let mut features = match file {
        Some(f) => Features::dense(read_features(
            &f.path,
            Syntax::Ogb,
            n_nodes,
            "num-node-list",
        )?),
        None => super::no_features(n_nodes),
    };
    if let Some(t) = opts.sparse_features_below {
        features = features.into_sparse_if(t);
    }
    let s = skeleton;
    Dataset::try_new(s.name, s.graph, features, s.labels, s.n_classes, s.split)
}

/// The folder's `raw/` and its declared node and edge counts.
fn header(dir: &Path) -> Result<(PathBuf, usize, usize)> {
    let meta = std::fs::metadata(dir).map_err(|e| Error::io(dir, e))?;
    if !meta.is_dir() {
        return Err(Error::Dataset {
            path: dir.to_path_buf(),
            msg: "not a directory (expected an OGB dataset folder with raw/ and split/)".into(),
        });
    }
    let raw = dir.join("raw");
    let n_nodes = read_node_count(&find_file(&raw, "num-node-list")?)?;
    let n_edges = read_count(&find_file(&raw, "num-edge-list")?)?;
    if n_nodes == 0 {
        return Err(Error::Dataset {
            path: find_file(&raw, "num-node-list")?,
            msg: "empty graph: 0 nodes".into(),
        });
    }
    Ok((raw, n_nodes, n_edges))
}

/// An OGB folder's features, not read yet ([`load_ogb_skeleton`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OgbFeatures {
    /// `raw/node-feat.csv.gz` (or `.csv`).
    pub path: PathBuf,
    /// Its node count (`num-node-list`).
    pub n_nodes: usize,
    /// Values on its first line: the feature width.
    pub width: usize,
}

impl OgbFeatures {
    /// The rows `rows` (distinct node ids; row k of the result is node `rows[k]`), streaming
    /// the file once and keeping only those: what one rank of a distributed run holds of X.
    /// Every line is read and checked as [`load_ogb`] checks it.
    ///
    /// # Errors
    /// As [`load_ogb`] for the feature file; [`Error::Dataset`] for a row ≥ N.
    pub fn read_rows(&self, rows: &[u32]) -> Result<Array2<f32>> {
        super::read_feature_rows(
            &self.path,
            Syntax::Ogb,
            self.n_nodes,
            "num-node-list",
            Some(rows),
        )
    }
}

/// [`load_ogb`] without reading the features: the graph, labels and split (checked as
/// [`load_ogb`] checks them), and where the features are (`None` for a structure-only folder,
/// whose features have width 0). A rank of a distributed run then reads only its rows of them
/// ([`OgbFeatures::read_rows`]).
///
/// # Errors
/// As [`load_ogb`], for every file but the features (of which only the first line is read).
pub fn load_ogb_skeleton(
    dir: impl AsRef<Path>,
    opts: &OgbOptions,
) -> Result<(Skeleton, Option<OgbFeatures>)> {
    let dir = dir.as_ref();
    let (raw, n_nodes, n_edges) = header(dir)?;
    // A label file confirms the declared node count line by line before anything of that size
    // is allocated (its reservation is capped).
    let label_file = optional_file(&raw, "node-label")?;
    let file_labels = match &label_file {
        Some(path) => Some(read_labels(
            path,
            Syntax::Ogb,
            n_nodes,
            "num-node-list",
            None,
        )?),
        None => None,
    };
    let features = match optional_file(&raw, "node-feat")? {
        Some(path) => {
            let width = super::first_line_width(&path, Syntax::Ogb)?;
            let file = OgbFeatures {
                path,
                n_nodes,
                width,
            };
            if width == 0 {
                // An empty file: the row-count error `load_ogb` gives (it reads nothing).
                file.read_rows(&[])?;
            }
            Some(file)
        }
        None => None,
    };
    let edges = read_edges(&find_file(&raw, "edge")?, n_nodes, n_edges)?;
    // The node-sized arrays (the graph's row pointers, the labels, the split), before they are
    // allocated: the edges read are confirmed by the file, the node count may not be.
    super::check_graph_fits(&raw, n_nodes, edges.len(), 8, 0)?;
    let labels = file_labels.unwrap_or_else(|| vec![UNLABELLED; n_nodes]);
    let n_classes =
        super::checked_class_count(label_file.as_deref().unwrap_or(&raw), &labels, None)?;
    let graph = Graph::try_from_edges(n_nodes, &edges, opts.direction)?;
    drop(edges);
    let split_dir = dir.join("split");
    let split = if split_dir.exists() || n_classes > 0 {
        read_split(&split_dir, opts.split.as_deref(), n_nodes)?
    } else {
        Split::none(n_nodes)
    };
    let d = Dataset::try_new(
        dataset_name(dir),
        graph,
        super::no_features(n_nodes),
        labels,
        n_classes,
        split,
    )?;
    Ok((d.into_skeleton().0, features))
}

/// The folder's file name (resolving `.` and `..` when needed).
fn dataset_name(dir: &Path) -> String {
    let name = match dir.file_name() {
        Some(n) => Some(n.to_os_string()),
        None => std::fs::canonicalize(dir)
            .ok()
            .and_then(|p| p.file_name().map(|n| n.into())),
    };
    match name {
        Some(n) => n.to_string_lossy().into_owned(),
        None => dir.display().to_string(),
    }
}

/// `dir/stem.csv.gz` if it exists, else `dir/stem.csv`; an [`Error::Io`] if neither exists or
/// the chosen one is a directory.
fn find_file(dir: &Path, stem: &str) -> Result<PathBuf> {
    let gz = dir.join(format!("{stem}.csv.gz"));
    let csv = dir.join(format!("{stem}.csv"));
    let path = if gz.exists() {
        gz
    } else if csv.exists() {
        csv
    } else {
        let msg = format!("file not found (neither {stem}.csv.gz nor {stem}.csv exists)");
        return Err(Error::io(gz, io::Error::new(io::ErrorKind::NotFound, msg)));
    };
    if path.is_dir() {
        let e = io::Error::new(
            io::ErrorKind::InvalidInput,
            "is a directory, expected a file",
        );
        return Err(Error::io(path, e));
    }
    Ok(path)
}

/// As [`find_file`], `None` when neither file exists.
fn optional_file(dir: &Path, stem: &str) -> Result<Option<PathBuf>> {
    if dir.join(format!("{stem}.csv.gz")).exists() || dir.join(format!("{stem}.csv")).exists() {
        find_file(dir, stem).map(Some)
    } else {
        Ok(None)
    }
}

/// Parses a node id field and checks it against `n_nodes`.
fn parse_node(line: &Line<'_>, field: &str, n_nodes: usize) -> Result<u32> {
    let v = parse_uint(line, field, "node id")?;
    if v >= n_nodes as u64 {
        return Err(line.err(format!("node id {v} out of range for {n_nodes} nodes")));
    }
    // n_nodes ≤ u32::MAX is checked when it is read, so this cannot fail.
    u32::try_from(v).map_err(|_| line.err(format!("node id {v} does not fit in u32")))
}

/// Reads a file holding one count on one line.
fn read_count(path: &Path) -> Result<usize> {
    let mut r = LineReader::open(path, Syntax::Ogb)?;
    let count = match r.next_line()? {
        Some(line) => {
            if line.text.contains(',') {
                return Err(line.err(format!("expected one count, got {}", excerpt(line.text))));
            }
            let v = parse_uint(&line, line.text, "count")?;
            usize::try_from(v).map_err(|_| line.err(format!("count {v} does not fit in usize")))?
        }
        None => return Err(Error::parse(path, 1, "empty file, expected one count")),
    };
    if let Some(line) = r.next_line()? {
        return Err(line.err("expected a single line (one graph)"));
    }
    Ok(count)
}

/// Reads `num-node-list`: N, which must fit node ids in `u32`.
fn read_node_count(path: &Path) -> Result<usize> {
    let n = read_count(path)?;
    if n > u32::MAX as usize {
        return Err(Error::Dataset {
            path: path.to_path_buf(),
            msg: format!("{n} nodes: node ids must fit in u32"),
        });
    }
    Ok(n)
}

/// Reads the edge list: exactly 2 ids per line, each < `n_nodes`, `n_edges` lines.
fn read_edges(path: &Path, n_nodes: usize, n_edges: usize) -> Result<Vec<(u32, u32)>> {
    if n_edges > MAX_VALUES {
        return Err(Error::Dataset {
            path: path.to_path_buf(),
            msg: format!("num-edge-list declares {n_edges} edges, more than the limit 2^40"),
        });
    }
    let mut edges = Vec::new();
    edges
        .try_reserve_exact(n_edges.min(MAX_TRUSTED_RESERVE))
        .map_err(|e| alloc_error(path, "the edge list", e))?;
    let mut r = LineReader::open(path, Syntax::Ogb)?;
    while let Some(line) = r.next_line()? {
        let mut fields = line.text.split(',');
        let (src, dst) = match (fields.next(), fields.next(), fields.next()) {
            (Some(a), Some(b), None) => (a, b),
            _ => {
                let k = line.text.split(',').count();
                let msg = format!("expected 2 fields src,dst, got {k}: {}", excerpt(line.text));
                return Err(line.err(msg));
            }
        };
        let e = (
            parse_node(&line, src, n_nodes)?,
            parse_node(&line, dst, n_nodes)?,
        );
        super::push_checked(&mut edges, e, path, "the edge list")?;
    }
    if edges.len() != n_edges {
        return Err(Error::Mismatch {
            what: format!("{}: edge lines vs num-edge-list", path.display()),
            expected: n_edges,
            got: edges.len(),
        });
    }
    Ok(edges)
}

/// Reads one node id per line, each < `n_nodes`.
fn read_node_list(path: &Path, n_nodes: usize) -> Result<Vec<u32>> {
    let mut ids = Vec::new();
    let mut r = LineReader::open(path, Syntax::Ogb)?;
    while let Some(line) = r.next_line()? {
        if line.text.contains(',') {
            return Err(line.err(format!("expected one node id, got {}", excerpt(line.text))));
        }
        ids.push(parse_node(&line, line.text, n_nodes)?);
    }
    Ok(ids)
}

/// The sorted names of the sub-folders of `split_dir`.
fn split_names(split_dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    let entries = std::fs::read_dir(split_dir).map_err(|e| Error::io(split_dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(split_dir, e))?;
        if entry.path().is_dir() {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    Ok(names)
}

/// Chooses the split folder (see [`OgbOptions::split`]) and reads its three parts.
fn read_split(split_dir: &Path, wanted: Option<&str>, n_nodes: usize) -> Result<Split> {
    if !split_dir.is_dir() {
        return Err(Error::Dataset {
            path: split_dir.to_path_buf(),
            msg: "no split folder (expected split/<name>/{train,valid,test}.csv.gz)".into(),
        });
    }
    let names = split_names(split_dir)?;
    let available = if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    };
    let name = match wanted {
        Some(w) if names.iter().any(|n| n == w) => w.to_string(),
        Some(w) => {
            return Err(Error::Dataset {
                path: split_dir.to_path_buf(),
                msg: format!("split {w:?} not found; available: {available}"),
            })
        }
        None if names.len() == 1 => names[0].clone(),
        None => {
            return Err(Error::Dataset {
                path: split_dir.to_path_buf(),
                msg: format!(
                    "{} split folders, choose one (available: {available})",
                    if names.is_empty() { "no" } else { "several" }
                ),
            })
        }
    };
    let dir = split_dir.join(&name);
    let part = |stem: &str| -> Result<Mask> {
        let ids = read_node_list(&find_file(&dir, stem)?, n_nodes)?;
        Mask::try_from_indices(ids, n_nodes)
    };
    let (train, valid, test) = (part("train")?, part("valid")?, part("test")?);
    Ok(Split {
        name,
        train,
        valid,
        test,
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::Tmp;
    use super::*;

    #[test]
    fn counts_and_ids_parse_strictly() {
        let t = Tmp::new("count.csv", b" 42 \n");
        assert_eq!(read_count(&t.0).unwrap(), 42);
        for bad in ["-1\n", "4.5\n", "1,2\n", "1\n2\n", "", "abc\n"] {
            let t = Tmp::new("bad-count.csv", bad.as_bytes());
            let err = read_count(&t.0).unwrap_err();
            assert!(matches!(err, Error::Parse { .. }), "{bad:?}: {err}");
        }
        let t = Tmp::new("ids.csv", b"0\n 4\n");
        assert_eq!(read_node_list(&t.0, 5).unwrap(), vec![0, 4]);
        let t = Tmp::new("ids-big.csv", b"0\n99999999999999999999999\n");
        let err = read_node_list(&t.0, 5).unwrap_err();
        assert!(matches!(err, Error::Parse { line: 2, .. }), "{err}");
    }

    #[test]
    fn absurd_sizes_fail_before_allocating() {
        let t = Tmp::new("edges-many.csv", b"0,1\n");
        let err = read_edges(&t.0, 2, usize::MAX).unwrap_err();
        assert!(matches!(err, Error::Dataset { .. }), "{err}");
        let t = Tmp::new("n-huge.csv", b"4294967296\n");
        let err = read_node_count(&t.0).unwrap_err();
        assert!(matches!(err, Error::Dataset { .. }), "{err}");
    }
}
