//! Loaders: the OGB node-property-prediction raw layout ([`load_ogb`]).
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

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use flate2::read::MultiGzDecoder;
use ndarray::Array2;

use super::{Dataset, Direction, Features, Graph, Mask, Split};
use crate::{Error, Result};

/// Largest number of values (features, or edges) a declared size may ask for: 2^40.
const MAX_VALUES: usize = 1 << 40;
/// Longest accepted line, in bytes (a guard against binary or newline-free input).
const MAX_LINE_BYTES: usize = 64 << 20;
/// Up-front reservation cap for lists whose declared length is not yet confirmed by a file.
const MAX_TRUSTED_RESERVE: usize = 1 << 26;

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

/// Loads a dataset in the OGB node-property-prediction raw layout from the folder `dir` (see the
/// [module docs](self) for the layout). The dataset is named after the folder.
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
///   names), an absurd declared size (N over `u32`, N·F over 2^40 values, or an allocation that
///   fails), overlapping split parts;
/// - [`Error::EmptyMask`]: an empty split file;
/// - any other error of [`Dataset::validate`].
///
/// # Examples
/// ```no_run
/// use sparse_gcn::graph::io::{load_ogb, OgbOptions};
/// let opts = OgbOptions { sparse_features_below: Some(0.1), ..OgbOptions::default() };
/// let cora = load_ogb("datasets/cora", &opts)?;
/// println!("{}: {} nodes, {} edges", cora.name, cora.graph.n_nodes(), cora.graph.n_edges());
/// # Ok::<(), sparse_gcn::Error>(())
/// ```
pub fn load_ogb(dir: impl AsRef<Path>, opts: &OgbOptions) -> Result<Dataset> {
    let dir = dir.as_ref();
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
    // Labels first: the cheapest file that confirms N before anything of size N is allocated.
    let labels = read_labels(&find_file(&raw, "node-label")?, n_nodes)?;
    let n_classes = labels.iter().max().map_or(0, |&m| m as usize + 1);
    let x = read_features(&find_file(&raw, "node-feat")?, n_nodes)?;
    let mut features = Features::Dense(x);
    if let Some(t) = opts.sparse_features_below {
        features = features.into_sparse_if(t);
    }
    let edges = read_edges(&find_file(&raw, "edge")?, n_nodes, n_edges)?;
    let graph = Graph::try_from_edges(n_nodes, &edges, opts.direction)?;
    drop(edges);
    let split = read_split(&dir.join("split"), opts.split.as_deref(), n_nodes)?;

    let dataset = Dataset {
        name: dataset_name(dir),
        graph,
        features,
        labels,
        n_classes,
        split,
    };
    dataset.validate()?;
    Ok(dataset)
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

/// A file read line by line, decompressed when its name ends in `.gz`.
struct LineReader {
    path: PathBuf,
    inner: Box<dyn BufRead>,
    buf: Vec<u8>,
    /// 1-based number of the line in `buf` (0 before the first).
    line_no: usize,
    /// The first of a run of empty lines not yet followed by data.
    pending_empty: Option<usize>,
}

/// One trimmed, non-empty line with what an error message needs.
struct Line<'a> {
    path: &'a Path,
    no: usize,
    text: &'a str,
}

impl Line<'_> {
    /// An [`Error::Parse`] at this line.
    fn err(&self, msg: impl Into<String>) -> Error {
        Error::parse(self.path, self.no, msg)
    }
}

impl LineReader {
    fn open(path: &Path) -> Result<Self> {
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
            line_no: 0,
            pending_empty: None,
        })
    }

    /// The next non-empty line, trimmed; `None` at the end of the file. Empty lines are skipped
    /// only at the end of the file: one followed by data is an [`Error::Parse`].
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
            if self.buf.iter().all(u8::is_ascii_whitespace) {
                self.pending_empty.get_or_insert(self.line_no);
                continue;
            }
            if let Some(no) = self.pending_empty {
                return Err(Error::parse(&self.path, no, "empty line"));
            }
            break;
        }
        // Checked above; an empty fallback would be reported as an empty field.
        let text = std::str::from_utf8(&self.buf)
            .unwrap_or_default()
            .trim_ascii();
        Ok(Some(Line {
            path: &self.path,
            no: self.line_no,
            text,
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

/// At most 40 characters of `s`, for error messages.
fn excerpt(s: &str) -> String {
    match s.char_indices().nth(40) {
        Some((i, _)) => format!("{:?}…", &s[..i]),
        None => format!("{s:?}"),
    }
}

/// Parses a non-negative integer field; `what` names it in messages ("node id", "label", …).
fn parse_uint(line: &Line<'_>, field: &str, what: &str) -> Result<u64> {
    let s = field.trim();
    if s.is_empty() {
        return Err(line.err(format!("empty {what}")));
    }
    s.parse::<u64>().map_err(|e| {
        if s.trim_start_matches(['-', '+']).eq_ignore_ascii_case("nan") {
            line.err(format!("{what} is {s} (unlabeled nodes are not supported)"))
        } else if s
            .strip_prefix('-')
            .is_some_and(|rest| rest.parse::<f64>().is_ok())
        {
            line.err(format!("negative {what} {}", excerpt(s)))
        } else {
            line.err(format!("invalid {what} {}: {e}", excerpt(s)))
        }
    })
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
    let mut r = LineReader::open(path)?;
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

/// An [`Error::Dataset`] for a failed allocation of `len` values for `path`.
fn alloc_error(path: &Path, what: &str, e: std::collections::TryReserveError) -> Error {
    Error::Dataset {
        path: path.to_path_buf(),
        msg: format!("cannot allocate {what}: {e}"),
    }
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
    let mut r = LineReader::open(path)?;
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
        edges.push((
            parse_node(&line, src, n_nodes)?,
            parse_node(&line, dst, n_nodes)?,
        ));
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

/// Reads `n_nodes` rows of F comma-separated numbers (F from the first row) into an N × F
/// matrix, checking that every value is finite.
fn read_features(path: &Path, n_nodes: usize) -> Result<Array2<f32>> {
    let mismatch = |got: usize| Error::Mismatch {
        what: format!("{}: feature rows vs num-node-list", path.display()),
        expected: n_nodes,
        got,
    };
    let mut r = LineReader::open(path)?;
    let mut data: Vec<f32> = Vec::new();
    let mut n_feat = 0usize;
    let mut rows = 0usize;
    while let Some(line) = r.next_line()? {
        if rows == n_nodes {
            return Err(mismatch(rows + 1 + r.count_rest()?));
        }
        if rows == 0 {
            n_feat = line.text.split(',').count();
            let total = n_nodes.checked_mul(n_feat).filter(|&t| t <= MAX_VALUES);
            let Some(total) = total else {
                return Err(Error::Dataset {
                    path: path.to_path_buf(),
                    msg: format!(
                        "{n_nodes} nodes × {n_feat} features is more than the limit of 2^40 values"
                    ),
                });
            };
            data.try_reserve_exact(total)
                .map_err(|e| alloc_error(path, &format!("{n_nodes} × {n_feat} features"), e))?;
        }
        let mut cols = 0usize;
        for field in line.text.split(',') {
            if cols == n_feat {
                let k = line.text.split(',').count();
                return Err(line.err(format!("expected {n_feat} values (as line 1), got {k}")));
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
            data.push(v);
            cols += 1;
        }
        if cols != n_feat {
            return Err(line.err(format!("expected {n_feat} values (as line 1), got {cols}")));
        }
        rows += 1;
    }
    if rows != n_nodes {
        return Err(mismatch(rows));
    }
    Array2::from_shape_vec((n_nodes, n_feat), data).map_err(|e| Error::Dataset {
        path: path.to_path_buf(),
        msg: format!("feature matrix {n_nodes} × {n_feat}: {e}"),
    })
}

/// Reads `n_nodes` lines of one non-negative integer label each.
fn read_labels(path: &Path, n_nodes: usize) -> Result<Vec<u32>> {
    let mut labels = Vec::new();
    labels
        .try_reserve_exact(n_nodes.min(MAX_TRUSTED_RESERVE))
        .map_err(|e| alloc_error(path, "the labels", e))?;
    let mut r = LineReader::open(path)?;
    while let Some(line) = r.next_line()? {
        if labels.len() == n_nodes {
            let got = n_nodes + 1 + r.count_rest()?;
            return Err(Error::Mismatch {
                what: format!("{}: label rows vs num-node-list", path.display()),
                expected: n_nodes,
                got,
            });
        }
        if line.text.contains(',') {
            return Err(line.err(format!("expected one label, got {}", excerpt(line.text))));
        }
        let v = parse_uint(&line, line.text, "label")?;
        let l = u32::try_from(v).map_err(|_| line.err(format!("label {v} does not fit in u32")))?;
        labels.push(l);
    }
    if labels.len() != n_nodes {
        return Err(Error::Mismatch {
            what: format!("{}: label rows vs num-node-list", path.display()),
            expected: n_nodes,
            got: labels.len(),
        });
    }
    Ok(labels)
}

/// Reads one node id per line, each < `n_nodes`.
fn read_node_list(path: &Path, n_nodes: usize) -> Result<Vec<u32>> {
    let mut ids = Vec::new();
    let mut r = LineReader::open(path)?;
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
    use super::*;
    use std::io::Write;

    /// A scratch file holding `content`, removed on drop.
    struct Tmp(PathBuf);
    impl Tmp {
        fn new(tag: &str, content: &[u8]) -> Tmp {
            use std::sync::atomic::{AtomicUsize, Ordering};
            static COUNTER: AtomicUsize = AtomicUsize::new(0);
            let k = COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = std::env::temp_dir().join(format!(
                "sparse-gcn-io-unit-{}-{k}-{tag}",
                std::process::id()
            ));
            let mut f = File::create(&path).unwrap();
            f.write_all(content).unwrap();
            Tmp(path)
        }
    }
    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn lines(content: &str) -> Result<Vec<(usize, String)>> {
        let t = Tmp::new("lines.csv", content.as_bytes());
        let mut r = LineReader::open(&t.0)?;
        let mut out = Vec::new();
        while let Some(l) = r.next_line()? {
            out.push((l.no, l.text.to_string()));
        }
        Ok(out)
    }

    #[test]
    fn line_reader_trims_and_numbers_lines() {
        let got = lines(" 1 , 2 \r\n3\n\n\n").unwrap();
        assert_eq!(got, vec![(1, "1 , 2".to_string()), (2, "3".to_string())]);
        assert_eq!(lines("").unwrap(), vec![]);
        assert_eq!(lines("7").unwrap(), vec![(1, "7".to_string())]);
    }

    #[test]
    fn line_reader_rejects_an_empty_line_before_data() {
        let err = lines("1\n\n \n2\n").unwrap_err();
        assert!(matches!(err, Error::Parse { line: 2, .. }), "{err}");
    }

    #[test]
    fn line_reader_rejects_invalid_utf8() {
        let t = Tmp::new("bin.csv", b"1\n\xff\xfe\n");
        let mut r = LineReader::open(&t.0).unwrap();
        assert!(r.next_line().unwrap().is_some());
        let err = r.next_line().err().unwrap();
        assert!(matches!(err, Error::Parse { line: 2, .. }), "{err}");
    }

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
    fn features_parse_floats_and_ints() {
        let t = Tmp::new("feat.csv", b"0,1,1.5e-3\n -2 , 0.25,7\n");
        let x = read_features(&t.0, 2).unwrap();
        assert_eq!(x, ndarray::array![[0.0, 1.0, 1.5e-3], [-2.0, 0.25, 7.0]]);
        let t = Tmp::new("feat-extra.csv", b"0,1\n0,1\n0,1\n");
        let err = read_features(&t.0, 2).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Mismatch {
                    expected: 2,
                    got: 3,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn absurd_sizes_fail_before_allocating() {
        let wide = vec!["0"; 300].join(",");
        let t = Tmp::new("feat-wide.csv", wide.as_bytes());
        let err = read_features(&t.0, 4_000_000_000).unwrap_err();
        assert!(matches!(err, Error::Dataset { .. }), "{err}");
        let t = Tmp::new("edges-many.csv", b"0,1\n");
        let err = read_edges(&t.0, 2, usize::MAX).unwrap_err();
        assert!(matches!(err, Error::Dataset { .. }), "{err}");
        let t = Tmp::new("n-huge.csv", b"4294967296\n");
        let err = read_node_count(&t.0).unwrap_err();
        assert!(matches!(err, Error::Dataset { .. }), "{err}");
    }

    #[test]
    fn nan_label_is_a_parse_error() {
        let t = Tmp::new("labels.csv", b"0\nnan\n");
        let err = read_labels(&t.0, 2).unwrap_err();
        assert!(matches!(err, Error::Parse { line: 2, .. }), "{err}");
        assert!(err.to_string().contains("nan"), "{err}");
    }
}
