//! Text files: a line reader (gzip-decompressed when the name ends in `.gz`, lines at most
//! [`MAX_LINE_BYTES`]), the parsing of its fields with errors naming the file, line and value,
//! and the feature and label files shared by the edge-list and OGB loaders.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use flate2::read::MultiGzDecoder;
use ndarray::Array2;

use super::{
    alloc_error, check_file, push_checked, MAX_CLASSES, MAX_FEATURE_COLS, MAX_TRUSTED_RESERVE,
    MAX_VALUES,
};
use crate::{Error, Result};

/// Longest accepted line, in bytes (a guard against binary or newline-free input).
pub(super) const MAX_LINE_BYTES: usize = 64 << 20;

/// The syntax of a text file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Syntax {
    /// OGB's csv: fields separated by commas; no comments; empty lines only at the end.
    Ogb,
    /// Free text: fields separated by commas when the line has one, else by whitespace;
    /// `#` and `%` start a comment running to the end of the line; empty lines are skipped.
    Free,
}

/// A file read line by line, decompressed when its name ends in `.gz`.
pub(super) struct LineReader {
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
pub(super) struct Line<'a> {
    path: &'a Path,
    pub(super) no: usize,
    pub(super) text: &'a str,
    syntax: Syntax,
}

/// The fields of a [`Line`].
pub(super) enum Fields<'a> {
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
    pub(super) fn err(&self, msg: impl Into<String>) -> Error {
        Error::parse(self.path, self.no, msg)
    }
    /// The fields, split as the [`Syntax`] says.
    pub(super) fn fields(&self) -> Fields<'a> {
        if self.syntax == Syntax::Ogb || self.text.contains(',') {
            Fields::Comma(self.text.split(','))
        } else {
            Fields::Space(self.text.split_ascii_whitespace())
        }
    }
}

impl LineReader {
    pub(super) fn open(path: &Path, syntax: Syntax) -> Result<Self> {
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
    pub(super) fn next_line(&mut self) -> Result<Option<Line<'_>>> {
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
    pub(super) fn count_rest(&mut self) -> Result<usize> {
        let mut k = 0;
        while self.next_line()?.is_some() {
            k += 1;
        }
        Ok(k)
    }
}

/// At most 40 characters of `s`, quoted, for error messages.
pub(super) fn excerpt(s: &str) -> String {
    match s.char_indices().nth(40) {
        Some((i, _)) => format!("{:?}…", &s[..i]),
        None => format!("{s:?}"),
    }
}

/// Parses a label: `Some(class)`, or `None` for `-1` / `NaN` (unlabelled).
pub(super) fn parse_label(line: &Line<'_>, field: &str) -> Result<Option<u64>> {
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
pub(super) fn parse_uint(line: &Line<'_>, field: &str, what: &str) -> Result<u64> {
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
pub(super) fn parse_feature(line: &Line<'_>, field: &str, col: usize) -> Result<f32> {
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
pub(super) fn read_features(
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
pub(super) fn read_feature_rows(
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
pub(super) fn read_labels(
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

/// Values on the first line of a feature file (0 for an empty file).
pub(super) fn first_line_width(path: &Path, syntax: Syntax) -> Result<usize> {
    let mut r = LineReader::open(path, syntax)?;
    Ok(r.next_line()?.map_or(0, |line| line.fields().count()))
}
