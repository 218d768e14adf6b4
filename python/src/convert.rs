//! NumPy arrays to the engine's ids, labels and masks, each checked and refused with a
//! `TypeError` (dtype, shape) or `ValueError` (values) naming the argument.

use numpy::{PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use sparse_gcn::data::{Mask, UNLABELLED};
use sparse_gcn::graph::{Direction, Graph};

/// Most classes (as the loaders infer them: the largest label + 1).
const MAX_CLASSES: i64 = 1 << 20;

fn value_err(arg: &str, why: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("{arg}: {why}"))
}

/// A 1-D integer array (int32, int64, uint32 or uint64) as u32 ids, each below `bound`
/// (`usize::MAX`: any that fits in u32… or indptr offsets, checked by the CSR).
pub(crate) fn ids(a: &Bound<'_, PyAny>, what: &str, bound: usize) -> PyResult<Vec<u32>> {
    let check = |k: usize, v: i128| -> PyResult<u32> {
        if v < 0 {
            return Err(value_err(what, format!("entry {k} is negative ({v})")));
        }
        if bound != usize::MAX && v >= bound as i128 {
            return Err(value_err(
                what,
                format!("entry {k} = {v} is out of range for {bound} nodes or columns"),
            ));
        }
        u32::try_from(v).map_err(|_| value_err(what, format!("entry {k} = {v} exceeds 2^32 - 1")))
    };
    macro_rules! try_dtype {
        ($t:ty) => {
            if let Ok(arr) = a.extract::<PyReadonlyArray1<'_, $t>>() {
                let arr = arr.as_array();
                return arr
                    .iter()
                    .enumerate()
                    .map(|(k, &v)| check(k, v as i128))
                    .collect();
            }
        };
    }
    try_dtype!(i64);
    try_dtype!(i32);
    try_dtype!(u32);
    try_dtype!(u64);
    Err(PyTypeError::new_err(format!(
        "{what}: a 1-D integer array (int32 or int64)"
    )))
}

/// Labels (1-D int64, −1 unlabelled) of `n` nodes, or None (every node unlabelled), with their
/// class count (the largest label + 1).
pub(crate) fn labels_of(a: &Bound<'_, PyAny>, n: usize) -> PyResult<(Vec<u32>, usize)> {
    if a.is_none() {
        return Ok((vec![UNLABELLED; n], 0));
    }
    let arr: PyReadonlyArray1<'_, i64> = a
        .extract()
        .map_err(|_| PyTypeError::new_err("labels: a 1-D integer array (−1: unlabelled)"))?;
    if arr.len() != n {
        return Err(value_err(
            "labels",
            format!("{} entries for {n} nodes", arr.len()),
        ));
    }
    let mut max = -1i64;
    let mut out = Vec::with_capacity(n);
    for (k, &l) in arr.as_array().iter().enumerate() {
        if !(-1..MAX_CLASSES).contains(&l) {
            return Err(value_err(
                "labels",
                format!(
                    "entry {k} = {l}: a class id from 0 to {} or −1 (unlabelled)",
                    MAX_CLASSES - 1
                ),
            ));
        }
        max = max.max(l);
        out.push(if l < 0 { UNLABELLED } else { l as u32 });
    }
    Ok((out, (max + 1) as usize))
}

/// A boolean mask of `n` nodes, or None (no node).
pub(crate) fn mask_of(a: &Bound<'_, PyAny>, what: &str, n: usize) -> PyResult<Mask> {
    if a.is_none() {
        return Ok(Mask::from_bool(&vec![false; n]));
    }
    let arr: PyReadonlyArray1<'_, bool> = a
        .extract()
        .map_err(|_| PyTypeError::new_err(format!("{what}: a 1-D boolean array")))?;
    if arr.len() != n {
        return Err(value_err(
            what,
            format!("{} entries for {n} nodes", arr.len()),
        ));
    }
    let v: Vec<bool> = arr.as_array().iter().copied().collect();
    Ok(Mask::from_bool(&v))
}

/// The adjacency a graph description gives, read in place: a CSR pattern (`indptr`,
/// `indices`) or the two rows of an edge index (`rows`, `cols`), both arrays int32 or both
/// int64 and contiguous (`sparse_gcn._adjacency` makes them so). Every id and offset is checked
/// first, naming the argument; the graph is then built from the arrays without an edge list.
pub(crate) fn graph_of(g: &Bound<'_, PyDict>, n: usize, dir: Direction) -> PyResult<Graph> {
    let item = |key: &str| -> PyResult<Option<Bound<'_, PyAny>>> { g.get_item(key) };
    let (first, second, csr) = match (item("indptr")?, item("indices")?) {
        (Some(p), Some(i)) => (p, i, true),
        _ => match (item("rows")?, item("cols")?) {
            (Some(r), Some(c)) => (r, c, false),
            _ => {
                return Err(PyTypeError::new_err(
                    "graph description without 'indptr' and 'indices' or 'rows' and 'cols'",
                ))
            }
        },
    };
    macro_rules! try_dtype {
        ($t:ty) => {
            if let (Ok(a), Ok(b)) = (
                first.extract::<PyReadonlyArray1<'_, $t>>(),
                second.extract::<PyReadonlyArray1<'_, $t>>(),
            ) {
                let (a, b) = (a.as_slice()?, b.as_slice()?);
                return if csr {
                    graph_from_csr(a, b, n, dir)
                } else {
                    graph_from_pairs(a, b, n, dir)
                };
            }
        };
    }
    try_dtype!(i64);
    try_dtype!(i32);
    Err(PyTypeError::new_err(
        "adjacency: index arrays of one dtype, int32 or int64",
    ))
}

/// Checks that every id of `a` lies in `0..n`, naming the first that does not.
fn check_ids<T: Copy + Into<i64>>(a: &[T], n: usize, what: &str) -> PyResult<()> {
    match a.iter().position(|&v| !(0..n as i64).contains(&v.into())) {
        None => Ok(()),
        Some(k) => Err(value_err(
            what,
            format!("entry {k} = {} is out of range for {n} nodes", a[k].into()),
        )),
    }
}

fn graph_from_pairs<T: Copy + Into<i64>>(
    rows: &[T],
    cols: &[T],
    n: usize,
    dir: Direction,
) -> PyResult<Graph> {
    if rows.len() != cols.len() {
        return Err(value_err(
            "adjacency",
            format!(
                "{} row indices but {} column indices",
                rows.len(),
                cols.len()
            ),
        ));
    }
    check_ids(rows, n, "adjacency (row indices)")?;
    check_ids(cols, n, "adjacency (column indices)")?;
    let edges = || {
        rows.iter()
            .zip(cols)
            .map(|(&u, &v)| (u.into() as u32, v.into() as u32))
    };
    Graph::try_from_edge_iter(n, edges, dir).map_err(|e| value_err("adjacency", e))
}

fn graph_from_csr<T: Copy + Into<i64>>(
    indptr: &[T],
    indices: &[T],
    n: usize,
    dir: Direction,
) -> PyResult<Graph> {
    let what = "adjacency (indptr)";
    if indptr.len() != n + 1 {
        return Err(value_err(
            what,
            format!("{} offsets for {n} rows (n + 1 expected)", indptr.len()),
        ));
    }
    let mut last = 0i64;
    for (k, &p) in indptr.iter().enumerate() {
        let p: i64 = p.into();
        if (k == 0 && p != 0) || p < last || p > indices.len() as i64 {
            return Err(value_err(
                what,
                format!(
                    "offset {k} = {p}: offsets run from 0, never decrease and end at the {} \
                     stored entries",
                    indices.len()
                ),
            ));
        }
        last = p;
    }
    if last != indices.len() as i64 {
        return Err(value_err(
            what,
            format!(
                "the last offset is {last}, but {} entries are stored",
                indices.len()
            ),
        ));
    }
    check_ids(indices, n, "adjacency (column indices)")?;
    let at = |k: usize| indptr[k].into() as usize;
    let edges = || {
        (0..n).flat_map(move |i| {
            indices[at(i)..at(i + 1)]
                .iter()
                .map(move |&j| (i as u32, j.into() as u32))
        })
    };
    Graph::try_from_edge_iter(n, edges, dir).map_err(|e| value_err("adjacency", e))
}
