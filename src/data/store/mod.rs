//! The binary graph store: a dataset as a folder of little-endian arrays with a versioned JSON
//! header, written once by [`write_store`] (`sparse-gcn convert`) and opened memory-mapped by
//! [`Store::open`] in a time that does not grow with its size.
//!
//! A folder holds `store.json` ([`Header`]) and one file per array, named `NAME.DTYPE`:
//!
//! | array | dtype | length | what |
//! |---|---|---|---|
//! | `indptr` | u64 | n + 1 | the adjacency's CSR row offsets ([`Graph::indptr`](crate::graph::Graph::indptr)) |
//! | `indices` | u32 | nnz | its column ids, sorted and unique within each row |
//! | `degree` | u32 | n | each row's stored entries (a self-loop counted once) |
//! | `features` | f32 or f16 | n · d | dense features, row-major (when `sparse_features` is false) |
//! | `feature_indptr`, `feature_indices`, `feature_values` | u64, u32, f32 or f16 | n + 1, k, k | sparse features as CSR (when it is true) |
//! | `labels` | u32 | n | class ids, `u32::MAX` for an unlabelled node ([`UNLABELLED`](super::UNLABELLED)) |
//! | `train`, `valid`, `test` | u32 | any | the split's node ids (written ascending) |
//! | `order` | u32 | n | with `order` in the header: the input node of each stored row |
//!
//! The header records each array's file, dtype, length and CRC-32, and the graph's shape
//! (nodes, direction, what its build did), the feature width and layout, the class count and
//! the split's name. Opening checks the header and every file's size against it (a truncated or
//! mismatched store is an [`Error::Store`] naming the array, before anything is read);
//! [`Store::verify`] checks every checksum; [`Store::dataset`] checks the checksum of each
//! array it reads, and the graph's pattern, so that a tampered store is an error, never a wrong
//! result: the header carries a CRC-32 of its own fields, and an undirected graph's pattern is
//! checked symmetric. A stored order is the one the writing build computed: training with the
//! same `--reorder` keeps it ([`crate::order::reorder_dataset`]).
//!
//! Features stored sparse are read sparse whatever [`LoadOptions::sparse_features_below`](crate::data::io::LoadOptions::sparse_features_below)
//! says (the store keeps the layout the loader that read the source chose).

mod load;
pub mod propagate;
mod ranks;
mod rows;
mod write;

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

pub use load::{check_options, load, load_ordered, load_skeleton};
pub use propagate::{propagate, propagate_in_memory, KeepRows, PropagateOptions, Propagated};
pub use ranks::StoreGraph;
pub(crate) use rows::runs;
pub use rows::{RowsScratch, StoreFeatures, StoreRows};
pub(crate) use write::StoreWriter;
pub use write::{write_store, FeatureDtype, StoreSummary};

use crate::data::io::{MAX_CLASSES, MAX_FEATURE_COLS};
use crate::graph::Permutation;
use crate::{Error, Result};

/// The header's file name: a folder holding it is a store.
pub const HEADER: &str = "store.json";
/// The header's `format`.
pub const FORMAT: &str = "sparse-gcn-store";
/// The header's `version` this build writes and reads.
pub const VERSION: u32 = 1;
/// The largest header read (a header is a few kilobytes).
const MAX_HEADER_BYTES: u64 = 1 << 20;

/// An array's element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    /// Unsigned 64-bit integers.
    U64,
    /// Unsigned 32-bit integers.
    U32,
    /// IEEE single precision.
    F32,
    /// IEEE half precision.
    F16,
}

impl Dtype {
    /// Bytes per element.
    pub fn width(self) -> u64 {
        match self {
            Dtype::U64 => 8,
            Dtype::U32 | Dtype::F32 => 4,
            Dtype::F16 => 2,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Dtype::U64 => "u64",
            Dtype::U32 => "u32",
            Dtype::F32 => "f32",
            Dtype::F16 => "f16",
        }
    }
}

/// One array of a store, as its header describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArrayInfo {
    /// The file, in the store's folder: `NAME.DTYPE`.
    pub file: String,
    /// Element type.
    pub dtype: Dtype,
    /// Elements.
    pub len: u64,
    /// CRC-32 (IEEE) of the file's bytes.
    pub crc32: u32,
}

/// How a store's rows are ordered: the order asked for and the one it resolved to, as
/// `--reorder` names them (`auto` resolves to `community` or `none`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrderInfo {
    /// The order asked for.
    pub asked: String,
    /// The order applied.
    pub applied: String,
}

/// A dataset's node order as a store holds it: [`OrderInfo`] and the permutation (row `r` is
/// the input's node `perm.new_to_old()[r]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredOrder {
    /// The order's names.
    pub info: OrderInfo,
    /// The relabelling.
    pub perm: Permutation,
}

/// A store's `store.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// [`FORMAT`].
    pub format: String,
    /// [`VERSION`].
    pub version: u32,
    /// The dataset's name.
    pub name: String,
    /// Nodes.
    pub n_nodes: u64,
    /// Whether the adjacency is directed (else each edge is stored both ways).
    pub directed: bool,
    /// Edge records in the input the graph was built from ([`BuildStats`](crate::graph::BuildStats)).
    pub input_edges: u64,
    /// Entries merged as duplicates by that build.
    pub duplicates_merged: u64,
    /// Self-loops in the graph.
    pub self_loops: u64,
    /// Feature columns.
    pub n_features: u64,
    /// Whether the features are stored sparse (`feature_*` arrays) or dense (`features`).
    pub sparse_features: bool,
    /// Classes.
    pub n_classes: u64,
    /// The split's name.
    pub split: String,
    /// The node order the data is stored in, when it is not the input's (`sparse-gcn convert
    /// --reorder`); the `order` array then maps each stored row to its input node.
    #[serde(default)]
    pub order: Option<OrderInfo>,
    /// Every array, by name.
    pub arrays: BTreeMap<String, ArrayInfo>,
    /// CRC-32 of the header itself: of its compact JSON with this field 0 ([`Header::crc`]).
    pub header_crc32: u32,
}

impl Header {
    /// What `header_crc32` records: [`header_crc`] of this header, so that an edited header (a
    /// flipped `directed`, another class count or order) is refused like an edited array.
    pub fn crc(&self) -> u32 {
        serde_json::to_value(self).map_or(0, |v| header_crc(&v))
    }
}

/// The CRC-32 of a header given as JSON: of its canonical compact text (object keys sorted,
/// whatever order the JSON library keeps them in) with `header_crc32` set to 0.
pub fn header_crc(header: &serde_json::Value) -> u32 {
    fn canonical(v: &serde_json::Value, out: &mut String) {
        match v {
            serde_json::Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for (k, key) in keys.into_iter().enumerate() {
                    if k > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::Value::String(key.clone()).to_string());
                    out.push(':');
                    if key == "header_crc32" {
                        out.push('0');
                    } else {
                        canonical(&m[key], out);
                    }
                }
                out.push('}');
            }
            serde_json::Value::Array(a) => {
                out.push('[');
                for (k, x) in a.iter().enumerate() {
                    if k > 0 {
                        out.push(',');
                    }
                    canonical(x, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut text = String::new();
    canonical(header, &mut text);
    crc32fast::hash(text.as_bytes())
}

/// An array a header must hold: its name, dtype (`None`: f32 or f16) and length (`None`: any).
type Expected = (&'static str, Option<Dtype>, Option<u64>);

/// The arrays a header must hold, given its shape.
fn expected(h: &Header) -> Result<Vec<Expected>> {
    let n = h.n_nodes;
    let mut v = vec![
        ("indptr", Some(Dtype::U64), Some(n + 1)),
        ("indices", Some(Dtype::U32), None),
        ("degree", Some(Dtype::U32), Some(n)),
        ("labels", Some(Dtype::U32), Some(n)),
        ("train", Some(Dtype::U32), None),
        ("valid", Some(Dtype::U32), None),
        ("test", Some(Dtype::U32), None),
    ];
    if h.order.is_some() {
        v.push(("order", Some(Dtype::U32), Some(n)));
    }
    if h.sparse_features {
        v.push(("feature_indptr", Some(Dtype::U64), Some(n + 1)));
        v.push(("feature_indices", Some(Dtype::U32), None));
        v.push(("feature_values", None, None));
    } else {
        let len = n.checked_mul(h.n_features).ok_or_else(|| Error::Store {
            path: PathBuf::from(&h.name),
            array: "features".into(),
            msg: format!("{n} × {} values overflow", h.n_features),
        })?;
        v.push(("features", None, Some(len)));
    }
    Ok(v)
}

/// A store opened memory-mapped: its header, checked against the files, and one read-only map
/// per array.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    header: Header,
    maps: BTreeMap<String, Option<memmap2::Mmap>>,
}

impl Store {
    /// Opens the store in `dir`: reads and checks its header, checks each array's file size
    /// against it, and maps the files (nothing else is read).
    ///
    /// # Errors
    /// [`Error::Io`] if a file cannot be opened; [`Error::Store`] naming the array for a header
    /// that is not a store's, of another version or of an inconsistent shape, a missing or
    /// extra array, a wrong dtype or length, or a file whose size is not its length's.
    pub fn open(dir: &Path) -> Result<Store> {
        Self::open_with(dir, false)
    }

    /// [`Store::open`], reading every page of every array into memory now (the kernel's
    /// read-ahead, without a page fault per page later), for a caller about to read the whole
    /// store ([`Store::dataset`]).
    ///
    /// # Errors
    /// As [`Store::open`].
    pub fn open_populated(dir: &Path) -> Result<Store> {
        Self::open_with(dir, true)
    }

    fn open_with(dir: &Path, populate: bool) -> Result<Store> {
        let bad = |array: &str, msg: String| Error::Store {
            path: dir.to_path_buf(),
            array: array.to_string(),
            msg,
        };
        if cfg!(target_endian = "big") {
            return Err(bad(
                HEADER,
                "stores are little-endian; this CPU is not".into(),
            ));
        }
        let hp = dir.join(HEADER);
        let meta = std::fs::metadata(&hp).map_err(|e| Error::io(&hp, e))?;
        if !meta.is_file() {
            return Err(bad(HEADER, "not a regular file".into()));
        }
        let size = meta.len();
        if size > MAX_HEADER_BYTES {
            return Err(bad(HEADER, format!("{size} bytes: not a store header")));
        }
        let text = std::fs::read_to_string(&hp).map_err(|e| Error::io(&hp, e))?;
        let header: Header = serde_json::from_str(&text)
            .map_err(|e| bad(HEADER, format!("not a store header: {e}")))?;
        if header.format != FORMAT {
            return Err(bad(
                HEADER,
                format!("format {:?}, expected {FORMAT:?}", header.format),
            ));
        }
        if header.version != VERSION {
            return Err(bad(
                HEADER,
                format!(
                    "version {}; this build reads version {VERSION} (convert the data again)",
                    header.version
                ),
            ));
        }
        if header.crc() != header.header_crc32 {
            return Err(bad(
                HEADER,
                format!(
                    "checksum {:08x}, the header records {:08x}: it was edited or damaged after \
                     it was written",
                    header.crc(),
                    header.header_crc32
                ),
            ));
        }
        let limits = [
            ("n_features", header.n_features, MAX_FEATURE_COLS as u64),
            ("n_classes", header.n_classes, MAX_CLASSES as u64),
        ];
        for (what, v, max) in limits {
            if v > max {
                return Err(bad(HEADER, format!("{what} = {v}: at most {max}")));
            }
        }
        if header.n_nodes > u32::MAX as u64 {
            return Err(bad(
                HEADER,
                format!("{} nodes: at most 2^32 − 1", header.n_nodes),
            ));
        }
        let want = expected(&header)?;
        if let Some(extra) = header
            .arrays
            .keys()
            .find(|k| !want.iter().any(|(name, _, _)| name == k))
        {
            return Err(bad(extra, "not an array of this store's layout".into()));
        }
        let mut maps = BTreeMap::new();
        for (name, dtype, len) in want {
            let info = header
                .arrays
                .get(name)
                .ok_or_else(|| bad(name, "missing from the header".into()))?;
            match dtype {
                Some(d) if d != info.dtype => {
                    return Err(bad(
                        name,
                        format!("dtype {}, expected {}", info.dtype.name(), d.name()),
                    ))
                }
                None if !matches!(info.dtype, Dtype::F32 | Dtype::F16) => {
                    return Err(bad(
                        name,
                        format!("dtype {}, expected f32 or f16", info.dtype.name()),
                    ))
                }
                _ => {}
            }
            if let Some(l) = len {
                if info.len != l {
                    return Err(bad(
                        name,
                        format!("{} elements in the header, {l} expected", info.len),
                    ));
                }
            }
            let file = format!("{name}.{}", info.dtype.name());
            if info.file != file {
                return Err(bad(
                    name,
                    format!("file {:?}, expected {file:?}", info.file),
                ));
            }
            let path = dir.join(&file);
            let meta = std::fs::metadata(&path).map_err(|e| Error::io(&path, e))?;
            if !meta.is_file() {
                return Err(bad(name, format!("{file} is not a regular file")));
            }
            let f = File::open(&path).map_err(|e| Error::io(&path, e))?;
            let bytes = f.metadata().map_err(|e| Error::io(&path, e))?.len();
            let need = info.len.checked_mul(info.dtype.width());
            if need != Some(bytes) {
                return Err(bad(
                    name,
                    format!(
                        "{file} holds {bytes} bytes; {} elements of {} need {}{}",
                        info.len,
                        info.dtype.name(),
                        need.map_or("more than 2^64".into(), |b| b.to_string()),
                        if need.is_some_and(|b| bytes < b) {
                            " (truncated)"
                        } else {
                            ""
                        }
                    ),
                ));
            }
            let map = if bytes == 0 {
                None
            } else {
                Some(
                    crate::kernels::raw::map_readonly(&f, populate)
                        .map_err(|e| Error::io(&path, e))?,
                )
            };
            maps.insert(name.to_string(), map);
        }
        let store = Store {
            dir: dir.to_path_buf(),
            header,
            maps,
        };
        store.check_shape()?;
        Ok(store)
    }

    /// The lengths that depend on other arrays' contents: `indices` against `indptr`'s last
    /// offset, the sparse features' three arrays against each other.
    fn check_shape(&self) -> Result<()> {
        let last =
            |name: &str| -> Result<u64> { Ok(self.u64s(name)?.last().copied().unwrap_or(0)) };
        for (ptr, idx) in [("indptr", "indices"), ("feature_indptr", "feature_indices")] {
            if !self.maps.contains_key(ptr) {
                continue;
            }
            let (end, len) = (last(ptr)?, self.header.arrays[idx].len);
            if end != len {
                return Err(self.bad(
                    ptr,
                    format!("the last offset is {end}, but `{idx}` holds {len} entries"),
                ));
            }
        }
        if self.header.sparse_features {
            let (k, v) = (
                self.header.arrays["feature_indices"].len,
                self.header.arrays["feature_values"].len,
            );
            if k != v {
                return Err(self.bad("feature_values", format!("{v} values for {k} column ids")));
            }
        }
        Ok(())
    }

    fn bad(&self, array: &str, msg: String) -> Error {
        Error::Store {
            path: self.dir.clone(),
            array: array.to_string(),
            msg,
        }
    }

    /// The header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The bytes of array `name` (empty for an array of no element or of another layout).
    pub fn bytes(&self, name: &str) -> &[u8] {
        self.maps
            .get(name)
            .and_then(|m| m.as_deref())
            .unwrap_or(&[])
    }

    fn cast<T: bytemuck::AnyBitPattern>(&self, name: &str) -> Result<&[T]> {
        let bytes = self.bytes(name);
        if bytes.is_empty() {
            // An array of no element has no map (an empty slice's address is not aligned).
            return Ok(&[]);
        }
        bytemuck::try_cast_slice(bytes)
            .map_err(|e| self.bad(name, format!("cannot be read as an array: {e}")))
    }

    /// Array `name` as u64 values.
    ///
    /// # Errors
    /// [`Error::Store`] if its map is not aligned for them (never, for a page-aligned map).
    pub fn u64s(&self, name: &str) -> Result<&[u64]> {
        self.cast(name)
    }

    /// Array `name` as u32 values (see [`Store::u64s`]).
    pub fn u32s(&self, name: &str) -> Result<&[u32]> {
        self.cast(name)
    }

    /// Checks array `name`'s CRC-32 against the header's.
    ///
    /// # Errors
    /// [`Error::Store`] naming the array when they differ.
    pub fn verify_array(&self, name: &str) -> Result<()> {
        let Some(info) = self.header.arrays.get(name) else {
            return Err(self.bad(name, "not in this store".into()));
        };
        let crc = crc32_par(self.bytes(name));
        if crc != info.crc32 {
            return Err(self.bad(
                name,
                format!(
                    "checksum {crc:08x}, the header records {:08x}: the file was modified or \
                     damaged after it was written",
                    info.crc32
                ),
            ));
        }
        Ok(())
    }

    /// Checks every array's CRC-32 ([`Store::verify_array`]).
    ///
    /// # Errors
    /// The first array whose checksum differs.
    pub fn verify(&self) -> Result<()> {
        self.header
            .arrays
            .keys()
            .try_for_each(|name| self.verify_array(name))
    }

    /// The values of float array `name` (f32, or f16 widened) in a new vector, its checksum
    /// checked.
    fn floats(&self, name: &str) -> Result<Vec<f32>> {
        self.verify_array(name)?;
        Ok(match self.header.arrays[name].dtype {
            Dtype::F16 => self
                .cast::<u16>(name)?
                .iter()
                .map(|&b| half::f16::from_bits(b).to_f32())
                .collect(),
            _ => copy_par(self.cast::<f32>(name)?),
        })
    }

    /// A u32 array in a new vector, its checksum checked.
    fn u32_vec(&self, name: &str) -> Result<Vec<u32>> {
        self.verify_array(name)?;
        Ok(copy_par(self.u32s(name)?))
    }

    /// An offsets array as `usize`, its checksum checked.
    fn offsets(&self, name: &str) -> Result<Vec<usize>> {
        self.verify_array(name)?;
        let v = self.u64s(name)?;
        if let Some(&big) = v.iter().find(|&&o| usize::try_from(o).is_err()) {
            return Err(self.bad(name, format!("offset {big} does not fit in memory")));
        }
        Ok(v.par_iter().map(|&o| o as usize).collect())
    }

    /// The node order the rows are stored in ([`Header::order`]), its checksum checked; `None`
    /// for the input's order.
    ///
    /// # Errors
    /// [`Error::Store`] naming `order` for a checksum that differs or values that are not a
    /// permutation.
    pub fn order(&self) -> Result<Option<StoredOrder>> {
        let Some(info) = self.header.order.clone() else {
            return Ok(None);
        };
        let perm = Permutation::try_from_new_to_old(self.u32_vec("order")?)
            .map_err(|e| self.bad("order", e.to_string()))?;
        Ok(Some(StoredOrder { info, perm }))
    }
}

/// Bytes a parallel step takes at a time: checksums and copies.
const PAR_CHUNK: usize = 1 << 22;

/// The CRC-32 of `bytes`, its chunks hashed in parallel and combined in order: the same value
/// as `crc32fast::hash` for any thread count.
fn crc32_par(bytes: &[u8]) -> u32 {
    let parts: Vec<crc32fast::Hasher> = bytes
        .par_chunks(PAR_CHUNK)
        .map(|c| {
            let mut h = crc32fast::Hasher::new();
            h.update(c);
            h
        })
        .collect();
    let mut all = crc32fast::Hasher::new();
    for p in &parts {
        all.combine(p);
    }
    all.finalize()
}

/// A copy of `src` made by the pool's threads.
fn copy_par<T: Copy + Default + Send + Sync>(src: &[T]) -> Vec<T> {
    let mut v = vec![T::default(); src.len()];
    let chunk = (PAR_CHUNK / std::mem::size_of::<T>().max(1)).max(1);
    v.par_chunks_mut(chunk)
        .zip(src.par_chunks(chunk))
        .for_each(|(d, s)| d.copy_from_slice(s));
    v
}
