//! Plain edge lists with optional feature and label files ([`load_edge_list`]).

use std::path::Path;

use super::{
    check_file, check_graph_fits, checked_class_count, excerpt, file_stem, no_features, parse_uint,
    push_checked, random_split, read_features, read_labels, LineReader, RandomSplit, Syntax,
    MAX_CLASSES,
};
use crate::data::{Dataset, Features, UNLABELLED};
use crate::graph::{Direction, Graph};
use crate::{Error, Result};

/// Options for [`load_edge_list`].
#[derive(Debug, Clone)]
pub struct EdgeListOptions {
    /// The number of nodes. `None` (the default): the largest node id + 1. Give it to keep
    /// trailing isolated nodes, or to have ids checked against it.
    pub n_nodes: Option<usize>,
    /// The number of classes. `None` (the default): the largest label + 1 (1 without labels).
    /// When given, a label ≥ it is an [`Error::LabelOutOfRange`].
    pub n_classes: Option<usize>,
    /// Undirected (the default: each edge both ways) or directed.
    pub direction: Direction,
    /// The split, drawn at random (an edge list carries none).
    pub split: RandomSplit,
    /// The largest node count accepted, declared or inferred (default 2^28): a guard against a
    /// stray huge id making the loader allocate an adjacency of billions of rows.
    pub max_nodes: usize,
    /// If `Some(t)`, features read from a file with at most a fraction `t` of non-zeros are
    /// stored sparse; `None` (the default) keeps them dense.
    pub sparse_features_below: Option<f64>,
}

impl Default for EdgeListOptions {
    fn default() -> Self {
        EdgeListOptions {
            n_nodes: None,
            n_classes: None,
            direction: Direction::Undirected,
            split: RandomSplit::default(),
            max_nodes: 1 << 28,
            sparse_features_below: None,
        }
    }
}

/// Loads a graph from a plain edge list, with optional node features and labels.
///
/// **Edge list** (`edges`): one edge per line, two non-negative integer node ids (0-based)
/// separated by whitespace or by a comma (`0 1`, `0\t1`, `0,1`, `0, 1`); `#` and `%` start a
/// comment that runs to the end of the line; blank lines are skipped; a first line of two names
/// (each starting with a letter or `_`: `src,dst`, `source target`) is a header, skipped.
/// A name ending in `.gz` is
/// decompressed. Exactly two fields per line: weights or timestamps in a third column are an
/// error. Undirected by default (see [`EdgeListOptions::direction`]); duplicate edges are
/// merged and self-loops kept.
///
/// **Nodes**: `n_nodes` is [`EdgeListOptions::n_nodes`] if given, else the rows of the label
/// (or feature) file, else the largest id + 1.
///
/// **Features** (`features`): one row per node, in node order, each with the same number of
/// numbers (separated as the edges); comments and blank lines skipped. Stored dense (or sparse,
/// see [`EdgeListOptions::sparse_features_below`]). Without a file the features have width 0
/// (training asks for some: the CLI's `--features identity|degree|constant|random:D`).
///
/// **Labels** (`labels`): one class id per line, in node order (line k, counting only lines
/// with data, is node k − 1), or `-1` / `NaN` for an unlabelled node; comments and blank lines
/// skipped. Without a file every node is [`UNLABELLED`] and there are 0 classes (training says
/// that it needs labels).
///
/// A label or feature file fixes the node count when [`EdgeListOptions::n_nodes`] is not
/// given: an edge id beyond it is an [`Error::Parse`] naming the edge file, its line and the
/// id.
///
/// **Split**: drawn at random as [`EdgeListOptions::split`] says (Planetoid's 20 per class,
/// 500, 1000 by default). The dataset is named after the edge file, without extensions.
///
/// # Errors
/// - [`Error::Io`]: a missing file, a directory, a read or gzip error;
/// - [`Error::Parse`] (file and line): a non-numeric, negative or empty field, a line without
///   exactly two ids, an id ≥ `n_nodes` when given, an id ≥ [`EdgeListOptions::max_nodes`],
///   a feature row of another width than the first, a label line with more than one field,
///   text that is not UTF-8;
/// - [`Error::NonFiniteValue`]: a NaN or infinite feature (`what` is the file, row and column
///   0-based);
/// - [`Error::Mismatch`]: feature or label rows ≠ `n_nodes`;
/// - [`Error::LabelOutOfRange`]: a label ≥ the declared class count (or ≥ 2^20);
/// - [`Error::Dataset`]: an empty graph (no edge and no `n_nodes`), a declared `n_nodes` above
///   `max_nodes` or `u32`, a declared class count of 0 or above 2^20, N × F over 2^40 values;
/// - [`Error::EmptyMask`]: a split part left empty (a graph too small for the split rule);
/// - any other error of [`Dataset::validate`].
///
/// # Examples
/// ```no_run
/// use std::path::Path;
/// use sparse_gcn::data::io::{load_edge_list, EdgeListOptions};
/// let d = load_edge_list(Path::new("karate.txt"), None, Some(Path::new("karate.labels")),
///                        &EdgeListOptions::default())?;
/// assert!(d.features.is_sparse()); // the identity
/// # Ok::<(), sparse_gcn::Error>(())
/// ```
pub fn load_edge_list(
    edges: impl AsRef<Path>,
    features: Option<&Path>,
    labels: Option<&Path>,
    opts: &EdgeListOptions,
) -> Result<Dataset> {
    let path = edges.as_ref();
    let labels_path = labels;
    let max_nodes = opts.max_nodes.min(u32::MAX as usize);
    if let Some(n) = opts.n_nodes {
        if n > max_nodes {
            return Err(Error::Dataset {
                path: path.to_path_buf(),
                msg: format!(
                    "n_nodes {n} is more than the limit of {max_nodes} nodes \
                     (EdgeListOptions::max_nodes, and u32)"
                ),
            });
        }
    }
    if let Some(c) = opts.n_classes {
        if c == 0 || c > MAX_CLASSES {
            return Err(Error::Dataset {
                path: path.to_path_buf(),
                msg: format!("n_classes {c}: must lie in 1..=2^20"),
            });
        }
    }
    check_file(path)?;
    // The node count: given, else fixed by the label or feature file (one row per node), so
    // that a stray id in the edges is an error naming its line instead of a bigger graph.
    let counted = match (opts.n_nodes, labels, features) {
        (Some(_), _, _) | (None, None, None) => None,
        (None, Some(p), _) | (None, None, Some(p)) => {
            Some((LineReader::open(p, Syntax::Free)?.count_rest()?, p))
        }
    };
    let bound = match (opts.n_nodes, counted) {
        (Some(n), _) => Some((
            n,
            "EdgeListOptions::n_nodes (the CLI's --num-nodes)".to_string(),
        )),
        (None, Some((n, p))) => Some((
            n,
            format!(
                "{} has {n} rows, one per node; or give --num-nodes",
                p.display()
            ),
        )),
        (None, None) => None,
    };
    let (edge_list, max_id) = read_edge_list(path, bound.as_ref(), max_nodes)?;
    let n = match (bound.as_ref(), max_id) {
        (Some(&(n, _)), _) => n,
        (None, Some(m)) => m as usize + 1,
        (None, None) => 0,
    };
    if n == 0 {
        return Err(Error::Dataset {
            path: path.to_path_buf(),
            msg: "empty graph: no edges and no EdgeListOptions::n_nodes".into(),
        });
    }
    check_graph_fits(path, n, edge_list.len(), 8, 0)?;
    // Where the node count came from, for a row-count mismatch of the other file.
    let count_name = match (opts.n_nodes, labels, features) {
        (Some(_), _, _) => {
            "the node count given (EdgeListOptions::n_nodes, the CLI's --num-nodes)".to_string()
        }
        (None, Some(p), _) => format!("the {n} rows of the label file {} (--labels)", p.display()),
        (None, None, Some(p)) => {
            format!(
                "the {n} rows of the feature file {} (--features)",
                p.display()
            )
        }
        (None, None, None) => format!("the nodes of {} (largest id + 1)", path.display()),
    };
    let labels = match labels {
        Some(p) => read_labels(p, Syntax::Free, n, &count_name, opts.n_classes)?,
        None => vec![UNLABELLED; n],
    };
    let n_classes = checked_class_count(labels_path.unwrap_or(path), &labels, opts.n_classes)?;
    let features = match features {
        Some(p) => {
            let f = Features::dense(read_features(p, Syntax::Free, n, &count_name)?);
            match opts.sparse_features_below {
                Some(t) => f.into_sparse_if(t),
                None => f,
            }
        }
        None => no_features(n),
    };
    let graph = Graph::try_from_edges(n, &edge_list, opts.direction)?;
    drop(edge_list);
    let split = random_split(path, &labels, n_classes, &opts.split)?;
    Dataset::try_new(file_stem(path), graph, features, labels, n_classes, split)
}

/// An edge list.
type Edges = Vec<(u32, u32)>;

/// A header's field: a name, starting with a letter or an underscore (never a node id).
fn is_name(field: &str) -> bool {
    field
        .trim()
        .starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
}

/// Reads the edges, each id < `n_nodes` when given, else < `max_nodes`; returns them with the
/// largest id (`None` without edges).
fn read_edge_list(
    path: &Path,
    n_nodes: Option<&(usize, String)>,
    max_nodes: usize,
) -> Result<(Edges, Option<u32>)> {
    let mut edges = Vec::new();
    let mut max_id: Option<u32> = None;
    let mut r = LineReader::open(path, Syntax::Free)?;
    let mut first = true;
    while let Some(line) = r.next_line()? {
        let mut fields = line.fields();
        let (a, b) = match (fields.next(), fields.next(), fields.next()) {
            // A first line of two names (`src,dst`, `source target`) is a header.
            (Some(a), Some(b), None) if std::mem::take(&mut first) && is_name(a) && is_name(b) => {
                continue
            }
            (Some(a), Some(b), None) => (a, b),
            _ => {
                let k = line.fields().count();
                let msg = format!(
                    "expected 2 node ids, got {k} field(s): {}",
                    excerpt(line.text)
                );
                return Err(line.err(msg));
            }
        };
        let mut id = |field: &str| -> Result<u32> {
            let v = parse_uint(&line, field, "node id")?;
            match n_nodes {
                Some((n, why)) if v >= *n as u64 => {
                    return Err(line.err(format!(
                        "node id {v} out of range for {n} nodes (ids 0 to {}: {why})",
                        n.saturating_sub(1)
                    )))
                }
                None if v >= max_nodes as u64 => {
                    return Err(line.err(format!(
                        "node id {v} exceeds the limit of {max_nodes} nodes \
                         (EdgeListOptions::max_nodes)"
                    )))
                }
                _ => {}
            }
            // v < n_nodes ≤ max_nodes ≤ u32::MAX
            let id = u32::try_from(v)
                .map_err(|_| line.err(format!("node id {v} does not fit in u32")))?;
            max_id = Some(max_id.map_or(id, |m| m.max(id)));
            Ok(id)
        };
        let (u, v) = (id(a)?, id(b)?);
        push_checked(&mut edges, (u, v), path, "the edge list")?;
    }
    Ok((edges, max_id))
}

#[cfg(test)]
mod tests {
    use super::super::tests::Tmp;
    use super::super::SplitRule;
    use super::*;

    fn opts() -> EdgeListOptions {
        EdgeListOptions {
            split: RandomSplit {
                rule: SplitRule::Fractions {
                    train: 0.4,
                    valid: 0.3,
                    test: 0.3,
                },
                seed: 3,
            },
            ..EdgeListOptions::default()
        }
    }

    #[test]
    fn loads_edges_features_and_labels() {
        let e = Tmp::new("g.txt", b"# a path\n0 1\n1,2\n\n2\t3 % tab\n3 0\n0 1\n");
        let f = Tmp::new("g.feat", b"1 0\n0 1\n1,1\n0 0\n");
        let l = Tmp::new("g.lab", b"0\n1\n# c\n1\n0\n");
        let d = load_edge_list(&e.0, Some(&f.0), Some(&l.0), &opts()).unwrap();
        assert_eq!(d.graph.n_nodes(), 4);
        assert_eq!(d.graph.n_edges(), 4, "the duplicate 0 1 is merged");
        assert_eq!(d.graph.neighbors(0), &[1, 3]);
        assert_eq!(
            d.features.to_dense(),
            ndarray::array![[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0f32]]
        );
        assert_eq!(d.labels, vec![0, 1, 1, 0]);
        assert_eq!(d.n_classes, 2);
        assert!(d.name.starts_with("sparse-gcn-io-unit-"));
        let sizes = (d.split.train.len(), d.split.valid.len(), d.split.test.len());
        assert_eq!(sizes, (2, 1, 1));
    }

    #[test]
    fn a_first_line_of_names_is_a_header_and_later_names_are_errors() {
        for head in [&b"src,dst\n"[..], b"# c\nsource target\n", b"_from _to\n"] {
            let text = [head, b"0,1\n1,2\n"].concat();
            let e = Tmp::new("g.csv", &text);
            let d = load_edge_list(&e.0, None, None, &opts()).unwrap();
            assert_eq!(d.graph.n_edges(), 2, "{head:?}");
        }
        // A name after the first line, or beside a number, is still a typed error.
        for (text, line) in [(&b"0,1\nsrc,dst\n"[..], 2), (b"src,1\n", 1), (b"-1,2\n", 1)] {
            let e = Tmp::new("g.csv", text);
            let err = load_edge_list(&e.0, None, None, &opts()).unwrap_err();
            assert!(
                matches!(err, Error::Parse { line: l, .. } if l == line),
                "{err}"
            );
        }
    }

    #[test]
    fn defaults_without_features_and_labels() {
        let e = Tmp::new("g.el", b"0 1\n1 2\n");
        let o = EdgeListOptions {
            n_nodes: Some(6),
            direction: Direction::Directed,
            ..opts()
        };
        let d = load_edge_list(&e.0, None, None, &o).unwrap();
        assert_eq!(d.graph.n_nodes(), 6);
        assert!(d.graph.is_directed());
        assert_eq!((d.features.n_rows(), d.features.n_cols()), (6, 0));
        assert_eq!(d.labels, vec![UNLABELLED; 6]);
        assert_eq!(d.n_classes, 0);
        assert_eq!(d.split.name, "none");
        assert!(d.check_trainable().is_err());
    }

    #[test]
    fn ids_are_checked_against_n_nodes_and_max_nodes() {
        let e = Tmp::new("g.txt", b"0 1\n1 7\n");
        let o = EdgeListOptions {
            n_nodes: Some(5),
            ..opts()
        };
        let err = load_edge_list(&e.0, None, None, &o).unwrap_err();
        assert!(matches!(err, Error::Parse { line: 2, .. }), "{err}");
        let o = EdgeListOptions {
            max_nodes: 7,
            ..opts()
        };
        let err = load_edge_list(&e.0, None, None, &o).unwrap_err();
        assert!(matches!(err, Error::Parse { line: 2, ref msg, .. } if msg.contains("max_nodes")));
        let o = EdgeListOptions {
            n_nodes: Some(1 << 40),
            ..opts()
        };
        let err = load_edge_list(&e.0, None, None, &o).unwrap_err();
        assert!(matches!(err, Error::Dataset { .. }), "{err}");
    }
}
