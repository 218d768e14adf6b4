//! NumPy arrays to the engine's ids, labels and masks, each checked and refused with a
//! `TypeError` (dtype, shape) or `ValueError` (values) naming the argument.

use numpy::{PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use sparse_gcn::data::{Mask, UNLABELLED};

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
