//! [`write_store`]: a [`Dataset`] as a store folder (the layout in the [module docs](super)).

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::{ArrayInfo, Dtype, Header, StoredOrder, FORMAT, HEADER, VERSION};
use crate::data::{Dataset, FeaturesRef};
use crate::{Error, Result};

/// Elements converted and written at a time.
const CHUNK: usize = 1 << 16;

/// How a store holds feature values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FeatureDtype {
    /// IEEE single precision: the values as the dataset holds them.
    #[default]
    F32,
    /// IEEE half precision (rounded to nearest, ties to even): half the bytes, for features
    /// that tolerate 11 significant bits; reading widens them back to f32.
    F16,
}

impl std::str::FromStr for FeatureDtype {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "f32" => Ok(FeatureDtype::F32),
            "f16" => Ok(FeatureDtype::F16),
            _ => Err(format!("{s:?}: f32 or f16")),
        }
    }
}

/// What [`write_store`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSummary {
    /// The header it wrote.
    pub header: Header,
    /// Bytes of every array together.
    pub bytes: u64,
}

/// One array file being written: its checksum and length kept as its bytes go out.
struct ArrayFile {
    path: PathBuf,
    out: BufWriter<File>,
    crc: crc32fast::Hasher,
    len: u64,
}

impl ArrayFile {
    fn create(path: PathBuf) -> Result<Self> {
        let f = File::create(&path).map_err(|e| Error::io(&path, e))?;
        Ok(ArrayFile {
            path,
            out: BufWriter::with_capacity(1 << 20, f),
            crc: crc32fast::Hasher::new(),
            len: 0,
        })
    }
    fn put(&mut self, bytes: &[u8], elements: usize) -> Result<()> {
        self.crc.update(bytes);
        self.len += elements as u64;
        self.out
            .write_all(bytes)
            .map_err(|e| Error::io(&self.path, e))
    }
    fn finish(self) -> Result<(u64, u32)> {
        let f = self
            .out
            .into_inner()
            .map_err(|e| Error::io(&self.path, e.into_error()))?;
        f.sync_all().map_err(|e| Error::io(&self.path, e))?;
        Ok((self.len, self.crc.finalize()))
    }
}

/// The folder being written, removed on drop unless committed.
struct Partial {
    dir: PathBuf,
    arrays: BTreeMap<String, ArrayInfo>,
    bytes: u64,
    done: bool,
}

impl Partial {
    /// Writes array `name` of `dtype` from `fill`, which calls its argument with chunks of
    /// little-endian values.
    fn array<T: bytemuck::NoUninit>(
        &mut self,
        name: &str,
        dtype: Dtype,
        fill: impl FnOnce(&mut dyn FnMut(&[T]) -> Result<()>) -> Result<()>,
    ) -> Result<()> {
        let file = format!("{name}.{}", dtype.name());
        let mut a = ArrayFile::create(self.dir.join(&file))?;
        fill(&mut |chunk: &[T]| a.put(bytemuck::cast_slice(chunk), chunk.len()))?;
        let (len, crc32) = a.finish()?;
        self.bytes += len * dtype.width();
        self.arrays.insert(
            name.to_string(),
            ArrayInfo {
                file,
                dtype,
                len,
                crc32,
            },
        );
        Ok(())
    }

    /// Writes float values, as f32 or rounded to f16.
    fn floats(&mut self, name: &str, dtype: FeatureDtype, values: &[f32]) -> Result<()> {
        match dtype {
            FeatureDtype::F32 => self.array(name, Dtype::F32, |put| {
                values.chunks(CHUNK).try_for_each(put)
            }),
            FeatureDtype::F16 => self.array(name, Dtype::F16, |put| {
                let mut buf = Vec::with_capacity(CHUNK);
                for c in values.chunks(CHUNK) {
                    buf.clear();
                    buf.extend(c.iter().map(|&v| half::f16::from_f32(v).to_bits()));
                    put(&buf)?;
                }
                Ok(())
            }),
        }
    }

    /// Writes `usize` offsets as u64.
    fn offsets(&mut self, name: &str, values: &[usize]) -> Result<()> {
        self.array(name, Dtype::U64, |put| {
            let mut buf = Vec::with_capacity(CHUNK);
            for c in values.chunks(CHUNK) {
                buf.clear();
                buf.extend(c.iter().map(|&v| v as u64));
                put(&buf)?;
            }
            Ok(())
        })
    }

    fn u32s(&mut self, name: &str, values: &[u32]) -> Result<()> {
        self.array(name, Dtype::U32, |put| {
            values.chunks(CHUNK).try_for_each(put)
        })
    }
}

/// A store being written array by array (several at once if need be), into a temporary
/// folder beside its destination that [`StoreWriter::commit`] renames into place; dropped
/// before, it leaves nothing behind. What [`write_store`] and the out-of-core generator
/// (`data::synthetic`) write with.
pub(crate) struct StoreWriter {
    partial: Partial,
    out: PathBuf,
}

/// One array of a [`StoreWriter`] being written, its values given in order.
pub(crate) struct ArrayOut {
    name: String,
    file: String,
    dtype: Dtype,
    a: ArrayFile,
}

impl ArrayOut {
    /// Appends values (their little-endian bytes: this CPU's, checked little-endian).
    pub(crate) fn put<T: bytemuck::NoUninit>(&mut self, values: &[T]) -> Result<()> {
        self.a.put(bytemuck::cast_slice(values), values.len())
    }
}

impl StoreWriter {
    /// Starts a store in `out`, which must not exist or be an empty folder.
    ///
    /// # Errors
    /// [`Error::Dataset`] if `out` is taken; [`Error::Io`] creating the temporary folder.
    pub(crate) fn begin(out: &Path) -> Result<Self> {
        if out.exists() {
            let empty = fs::read_dir(out).is_ok_and(|mut r| r.next().is_none());
            if !out.is_dir() || !empty {
                return Err(Error::Dataset {
                    path: out.to_path_buf(),
                    msg: "exists and is not an empty folder: a store is written to a new \
                          folder (or an empty one), never over other files"
                        .into(),
                });
            }
        }
        let name = out
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "store".into());
        let parent = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let dir = parent.join(format!(".{name}.partial-{}", std::process::id()));
        fs::create_dir(&dir).map_err(|e| Error::io(&dir, e))?;
        Ok(StoreWriter {
            partial: Partial {
                dir,
                arrays: BTreeMap::new(),
                bytes: 0,
                done: false,
            },
            out: out.to_path_buf(),
        })
    }

    /// The temporary folder (for scratch files that go with the store's).
    pub(crate) fn dir(&self) -> &Path {
        &self.partial.dir
    }

    /// Opens array `name` of `dtype` for writing.
    ///
    /// # Errors
    /// [`Error::Io`].
    pub(crate) fn open(&self, name: &str, dtype: Dtype) -> Result<ArrayOut> {
        let file = format!("{name}.{}", dtype.name());
        Ok(ArrayOut {
            name: name.to_string(),
            a: ArrayFile::create(self.partial.dir.join(&file))?,
            file,
            dtype,
        })
    }

    /// Finishes an array opened by [`StoreWriter::open`] (synced, its checksum recorded).
    ///
    /// # Errors
    /// [`Error::Io`].
    pub(crate) fn close(&mut self, a: ArrayOut) -> Result<()> {
        let (len, crc32) = a.a.finish()?;
        self.partial.bytes += len * a.dtype.width();
        self.partial.arrays.insert(
            a.name,
            ArrayInfo {
                file: a.file,
                dtype: a.dtype,
                len,
                crc32,
            },
        );
        Ok(())
    }

    /// Writes `header` (its arrays and checksum filled in) and renames the folder into place.
    ///
    /// # Errors
    /// [`Error::Io`], [`Error::Store`] if the header cannot be serialised.
    pub(crate) fn commit(mut self, header: Header) -> Result<StoreSummary> {
        let p = &mut self.partial;
        let header = Header {
            arrays: std::mem::take(&mut p.arrays),
            header_crc32: 0,
            ..header
        };
        let header = Header {
            header_crc32: header.crc(),
            ..header
        };
        let hp = p.dir.join(HEADER);
        let text = serde_json::to_string_pretty(&header).map_err(|e| Error::Store {
            path: hp.clone(),
            array: HEADER.into(),
            msg: e.to_string(),
        })?;
        let mut f = File::create(&hp).map_err(|e| Error::io(&hp, e))?;
        f.write_all(text.as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(|e| Error::io(&hp, e))?;
        fs::rename(&p.dir, &self.out).map_err(|e| Error::io(&self.out, e))?;
        p.done = true;
        Ok(StoreSummary {
            header,
            bytes: p.bytes,
        })
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        if !self.done {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// Writes `dataset` as a store in the folder `out`, which must not exist or be an empty
/// folder; `order`, when given, says that `dataset` is relabelled by it (its rows are stored
/// as they are, with the permutation, and read back by
/// [`load`](super::load) in the input's order). The arrays go to a temporary folder beside it (`.NAME.partial-PID`), each synced,
/// then the header; the folder is renamed to `out` only when complete, so that a failure leaves
/// no store and nothing else replaced. Sparse features stay sparse, dense ones dense (values in
/// `dtype`); `Store::open(out)?.dataset(..)` gives back the same dataset, bit for bit with
/// [`FeatureDtype::F32`].
///
/// # Errors
/// [`Error::Dataset`] if `out` exists and is not an empty folder; [`Error::Io`] naming
/// the file for any create, write, sync or rename failure.
///
/// # Examples
/// ```no_run
/// use sparse_gcn::data::store::{write_store, FeatureDtype, Store};
/// use sparse_gcn::data::synthetic::Preset;
/// let d = Preset::CoraLike.generate(0)?;
/// write_store(&d, None, "cora-store".as_ref(), FeatureDtype::F32)?;
/// let back = Store::open("cora-store".as_ref())?.dataset(None)?;
/// assert_eq!(back.graph, d.graph);
/// # Ok::<(), sparse_gcn::Error>(())
/// ```
pub fn write_store(
    dataset: &Dataset,
    order: Option<&StoredOrder>,
    out: &Path,
    dtype: FeatureDtype,
) -> Result<StoreSummary> {
    let mut w = StoreWriter::begin(out)?;
    let p = &mut w.partial;
    let g = &dataset.graph;
    let n = g.n_nodes();
    p.offsets("indptr", g.indptr())?;
    p.u32s("indices", g.indices())?;
    let degree: Vec<u32> = (0..n).map(|i| g.degree(i) as u32).collect();
    p.u32s("degree", &degree)?;
    drop(degree);
    let sparse = match dataset.features.get() {
        FeaturesRef::Dense(x) => {
            let values = x.as_standard_layout();
            let values = values.as_slice().unwrap_or(&[]);
            p.floats("features", dtype, values)?;
            false
        }
        FeaturesRef::Sparse(s) => {
            let x = s.x();
            p.offsets("feature_indptr", &x.indptr().to_proper())?;
            p.u32s("feature_indices", x.indices())?;
            p.floats("feature_values", dtype, x.data())?;
            true
        }
    };
    if let Some(o) = order {
        if o.perm.len() != n {
            return Err(Error::Mismatch {
                what: "node order length vs dataset nodes".into(),
                expected: n,
                got: o.perm.len(),
            });
        }
        p.u32s("order", o.perm.new_to_old())?;
    }
    p.u32s("labels", &dataset.labels)?;
    let split = &dataset.split;
    p.u32s("train", split.train.indices())?;
    p.u32s("valid", split.valid.indices())?;
    p.u32s("test", split.test.indices())?;
    let stats = g.stats();
    w.commit(Header {
        format: FORMAT.into(),
        version: VERSION,
        name: dataset.name.clone(),
        n_nodes: n as u64,
        directed: g.is_directed(),
        input_edges: stats.input_edges as u64,
        duplicates_merged: stats.duplicates_merged as u64,
        self_loops: stats.self_loops as u64,
        n_features: dataset.features.n_cols() as u64,
        sparse_features: sparse,
        n_classes: dataset.n_classes as u64,
        split: split.name.clone(),
        order: order.map(|o| o.info.clone()),
        arrays: BTreeMap::new(),
        header_crc32: 0,
    })
}
