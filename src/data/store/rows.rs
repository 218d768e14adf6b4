//! A store's rows read on demand with plain reads: what the batches of a graph larger than
//! memory are cut from (Cluster-GCN's parts as ranges of rows of a store written in a
//! partition order, `sample::BatchSource::from_store`). Only the labels and the split are held
//! (a few bytes a node); the graph's rows and the features are read per batch, so the resident
//! set does not grow with the store, and the page cache is the kernel's to reclaim.

use std::fs::File;
use std::path::{Path, PathBuf};

use ndarray::Array2;

use super::{Dtype, Store};
use crate::data::Split;
use crate::graph::{induced_rows_into, Graph};
use crate::input::Features;
use crate::{Error, Result, Scalar};

/// A store opened for reading rows out of core: only the labels and the split held, each
/// batch's rows of the graph and the features read as it is built.
#[derive(Debug)]
pub struct StoreRows {
    store: Store,
    n: usize,
    d: usize,
    dtype: Dtype,
    nnz: u64,
    indptr: (File, PathBuf),
    indices: (File, PathBuf),
    features: (File, PathBuf),
    labels: Vec<u32>,
    split: Split,
    non_negative: bool,
}

/// The reading buffers of one batch (owned by the batch, reused from batch to batch).
#[derive(Debug, Default)]
pub struct RowsScratch {
    bytes: Vec<u8>,
    ip: Vec<u64>,
    /// The rows read, one after the other, and where each starts (`len + 1` offsets).
    entries: Vec<u32>,
    starts: Vec<usize>,
    row: Vec<f32>,
}

impl StoreRows {
    /// Opens the store in `dir` ([`Store::open`]) and checks it in one pass of plain reads:
    /// the labels and the split (checksums, ids, classes), the graph's pattern (offsets, ids,
    /// order, self-loops, symmetry) and the checksums of `indptr`, `indices` and the features,
    /// which must be dense. Whether every feature is ≥ 0 is learnt on the way
    /// ([`StoreRows::non_negative`]).
    ///
    /// # Errors
    /// [`Error::Store`] naming the array at fault (sparse features included); [`Error::Io`].
    pub fn open(dir: &Path) -> Result<Self> {
        let store = Store::open(dir)?;
        let h = store.header().clone();
        let n = h.n_nodes as usize;
        if h.sparse_features {
            return Err(store.bad(
                "features",
                "the features are stored sparse; reading rows out of core needs dense features \
                 (convert without sparse features, or train in memory)"
                    .into(),
            ));
        }
        // The labels and the split held, and the training, validation and test flags.
        crate::data::memory::check(crate::data::memory::bytes(n, 4 + 3 + 12), || {
            format!("the labels and split of the store {}", dir.display())
        })?;
        let labels = store.checked_labels()?;
        let split = store.split()?;
        let d = h.n_features as usize;
        crate::data::dataset::check_trainable(&h.name, d, &labels, h.n_classes as usize, &split)?;
        // The pass's own memory: a scale a node, a block of rows at a time.
        crate::data::memory::check(crate::data::memory::bytes(n, 4), || {
            format!("the checking pass over the store {}", dir.display())
        })?;
        let non_negative = super::propagate::check_pass(&store)?;
        let open = |name: &str| -> Result<(File, PathBuf)> {
            let path = dir.join(&h.arrays[name].file);
            let f = File::open(&path).map_err(|e| Error::io(&path, e))?;
            Ok((f, path))
        };
        Ok(StoreRows {
            n,
            d,
            dtype: h.arrays["features"].dtype,
            nnz: h.arrays["indices"].len,
            indptr: open("indptr")?,
            indices: open("indices")?,
            features: open("features")?,
            labels,
            split,
            non_negative,
            store,
        })
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }
    /// Nodes.
    pub fn n_nodes(&self) -> usize {
        self.n
    }
    /// Feature columns.
    pub fn n_features(&self) -> usize {
        self.d
    }
    /// Classes.
    pub fn n_classes(&self) -> usize {
        self.store.header().n_classes as usize
    }
    /// Whether the graph is directed.
    pub fn is_directed(&self) -> bool {
        self.store.header().directed
    }
    /// One class per node.
    pub fn labels(&self) -> &[u32] {
        &self.labels
    }
    /// The split.
    pub fn split(&self) -> &Split {
        &self.split
    }
    /// Whether every feature value is ≥ 0 (what `--row-norm auto` asks).
    pub fn non_negative(&self) -> bool {
        self.non_negative
    }

    /// Stored entries of rows `a..b` (two offsets read).
    ///
    /// # Errors
    /// [`Error::Store`] for offsets out of order or past the entries; [`Error::Io`].
    pub fn entries(&self, a: usize, b: usize, io: &mut RowsScratch) -> Result<u64> {
        self.offsets(a, b, io)?;
        Ok(io.ip[b - a] - io.ip[0])
    }

    /// Offsets `a..=b` into `io.ip`, checked to increase within the entries stored.
    fn offsets(&self, a: usize, b: usize, io: &mut RowsScratch) -> Result<()> {
        if a > b || b > self.n {
            return Err(Error::Mismatch {
                what: format!("rows {a}..{b} of a store"),
                expected: self.n,
                got: b.max(a),
            });
        }
        read_at(&self.indptr, a as u64 * 8, (b - a + 1) * 8, &mut io.bytes)?;
        io.ip.clear();
        io.ip.extend(
            io.bytes
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default())),
        );
        let ip = &io.ip;
        if let Some(k) = (0..b - a).find(|&k| ip[k] > ip[k + 1] || ip[k + 1] > self.nnz) {
            return Err(self.store.bad(
                "indptr",
                format!(
                    "offsets {} and {} of rows {} and {}: not increasing within {} entries \
                     (the store changed since it was checked)",
                    ip[k],
                    ip[k + 1],
                    a + k,
                    a + k + 1,
                    self.nnz
                ),
            ));
        }
        Ok(())
    }

    /// Overwrites `out` with the subgraph `nodes` induce (ascending, distinct, below
    /// [`StoreRows::n_nodes`]): bit for bit [`Graph::induced_into`] of the stored graph. Each
    /// run of consecutive nodes is read with two reads; `pos` as there.
    ///
    /// # Errors
    /// [`Error::Store`] when a row read is out of order or out of range (the store changed
    /// since [`StoreRows::open`] checked it); [`Error::Io`].
    pub fn induced_into(
        &self,
        nodes: &[u32],
        pos: &mut [u32],
        out: &mut Graph,
        io: &mut RowsScratch,
    ) -> Result<()> {
        check_nodes(nodes, self.n)?;
        if pos.len() < self.n {
            return Err(Error::Mismatch {
                what: "induced subgraph: positions vs the store's nodes".into(),
                expected: self.n,
                got: pos.len(),
            });
        }
        io.entries.clear();
        io.starts.clear();
        io.starts.push(0);
        for (a, b) in runs(nodes) {
            self.offsets(a, b, io)?;
            let (lo, hi) = (io.ip[0], io.ip[b - a]);
            let len = usize::try_from(hi - lo).map_err(|_| {
                self.store
                    .bad("indptr", format!("rows {a}..{b}: {} entries", hi - lo))
            })?;
            read_at(&self.indices, lo * 4, len * 4, &mut io.bytes)?;
            let base = io.entries.len();
            io.entries.extend(
                io.bytes
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes(c.try_into().unwrap_or_default())),
            );
            for k in 0..b - a {
                let row = &io.entries
                    [base + (io.ip[k] - lo) as usize..base + (io.ip[k + 1] - lo) as usize];
                let bad_id = row.iter().find(|&&j| j as usize >= self.n);
                if bad_id.is_some() || row.windows(2).any(|w| w[0] >= w[1]) {
                    return Err(self.store.bad(
                        "indices",
                        format!(
                            "row {}: ids out of range or order (the store changed since it \
                             was checked)",
                            a + k
                        ),
                    ));
                }
                io.starts.push(base + (io.ip[k + 1] - lo) as usize);
            }
        }
        let (entries, starts) = (&io.entries, &io.starts);
        induced_rows_into(
            self.is_directed(),
            nodes,
            |k, _| &entries[starts[k]..starts[k + 1]],
            pos,
            out,
        );
        Ok(())
    }

    /// Overwrites `out` with the rows `nodes` (ascending, below [`StoreRows::n_nodes`]) of the
    /// features, dense, each row-normalised when `normalize`: bit for bit the same rows of the
    /// in-memory features ([`Store::dataset`], then
    /// [`Features::row_normalize`](crate::input::Features::row_normalize)), as `F`.
    ///
    /// # Errors
    /// [`Error::Io`].
    pub fn features_into<F: Scalar>(
        &self,
        nodes: &[u32],
        normalize: bool,
        out: &mut Features<F>,
        io: &mut RowsScratch,
    ) -> Result<()> {
        let (d, dtype) = (self.d, self.dtype);
        let w = dtype.width() as usize;
        check_nodes(nodes, self.n)?;
        out.assign_dense_with(nodes.len(), d, |v| {
            for (a, b) in runs(nodes) {
                read_at(
                    &self.features,
                    (a * d * w) as u64,
                    (b - a) * d * w,
                    &mut io.bytes,
                )?;
                for row in io.bytes.chunks_exact((d * w).max(1)).take(b - a) {
                    io.row.clear();
                    io.row.extend(row.chunks_exact(w).map(|c| decode(dtype, c)));
                    let start = v.len();
                    v.extend(io.row.iter().map(|&x| F::from_f64_lossy(f64::from(x))));
                    if normalize {
                        crate::input::features::normalize_row(&mut v[start..]);
                    }
                }
            }
            Ok(())
        })
    }
}

/// A store's dense features, checked once (one pass of plain reads: the checksum) and read
/// by rows: what a rank under mpirun keeps of them ([`super::load_skeleton`]), rows named in
/// the input's numbering when the store holds another order.
#[derive(Debug, Clone)]
pub struct StoreFeatures {
    file: std::sync::Arc<(File, PathBuf)>,
    n: usize,
    d: usize,
    dtype: Dtype,
    /// Stored row of each input node, when the store holds another order.
    row_of: Option<Vec<u32>>,
}

impl StoreFeatures {
    /// Opens the features of the store in `dir` and checks their checksum (a whole pass).
    ///
    /// # Errors
    /// [`Error::Store`] for sparse features, a checksum that differs or an order that is not
    /// a permutation; [`Error::Io`].
    pub fn open(dir: &Path) -> Result<Self> {
        let store = Store::open(dir)?;
        let h = store.header().clone();
        if h.sparse_features {
            return Err(store.bad(
                "features",
                "stored sparse: read by rows only when dense".into(),
            ));
        }
        super::propagate::check_features(&store)?;
        let row_of = store.order()?.map(|o| o.perm.old_to_new().to_vec());
        let path = dir.join(&h.arrays["features"].file);
        let f = File::open(&path).map_err(|e| Error::io(&path, e))?;
        Ok(StoreFeatures {
            n: h.n_nodes as usize,
            d: h.n_features as usize,
            dtype: h.arrays["features"].dtype,
            file: std::sync::Arc::new((f, path)),
            row_of,
        })
    }

    /// Feature columns.
    pub fn n_features(&self) -> usize {
        self.d
    }

    /// The rows of the input's nodes `ids` (any order), as `f32`: the same values as the
    /// store's dataset in memory.
    ///
    /// # Errors
    /// [`Error::Mismatch`] for an id beyond the nodes; [`Error::TooLarge`] when the rows do
    /// not fit in memory; [`Error::Io`].
    pub fn rows(&self, ids: &[u32]) -> Result<Array2<f32>> {
        if let Some(&bad) = ids.iter().find(|&&v| v as usize >= self.n) {
            return Err(Error::Mismatch {
                what: format!("a node ({bad}) vs the store's nodes"),
                expected: self.n,
                got: bad as usize + 1,
            });
        }
        crate::data::memory::check(crate::data::memory::bytes(ids.len(), 8 * self.d), || {
            format!("{} rows of {} features", ids.len(), self.d)
        })?;
        // Stored rows ascending, each with where it goes.
        let mut at: Vec<(u32, usize)> = ids
            .iter()
            .enumerate()
            .map(|(k, &v)| (self.row_of.as_ref().map_or(v, |r| r[v as usize]), k))
            .collect();
        at.sort_unstable();
        let (d, w) = (self.d, self.dtype.width() as usize);
        let mut out = Array2::<f32>::zeros((ids.len(), d));
        let mut bytes = Vec::new();
        let mut k = 0;
        while k < at.len() {
            // A run of consecutive stored rows, read at once.
            let a = at[k].0 as usize;
            let mut b = k + 1;
            while b < at.len() && at[b].0 as usize == a + (b - k) {
                b += 1;
            }
            read_at(&self.file, (a * d * w) as u64, (b - k) * d * w, &mut bytes)?;
            for (row, &(_, dst)) in bytes.chunks_exact((d * w).max(1)).zip(&at[k..b]) {
                for (o, c) in out.row_mut(dst).iter_mut().zip(row.chunks_exact(w)) {
                    *o = decode(self.dtype, c);
                }
            }
            k = b;
        }
        Ok(out)
    }
}

/// One stored value as `f32` (`f16` widened exactly).
fn decode(dtype: Dtype, c: &[u8]) -> f32 {
    match dtype {
        Dtype::F16 => half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32(),
        _ => f32::from_le_bytes([c[0], c[1], c[2], c[3]]),
    }
}

/// `nodes` ascending, distinct and below `n`, or an error naming the first that is not.
fn check_nodes(nodes: &[u32], n: usize) -> Result<()> {
    if let Some(&v) = nodes.iter().find(|&&v| v as usize >= n) {
        return Err(Error::Mismatch {
            what: format!("a node ({v}) vs the store's nodes"),
            expected: n,
            got: v as usize + 1,
        });
    }
    if let Some(w) = nodes.windows(2).find(|w| w[0] >= w[1]) {
        return Err(Error::Partition(format!(
            "nodes {} then {}: a batch's nodes must be distinct and ascending",
            w[0], w[1]
        )));
    }
    Ok(())
}

/// The runs of consecutive ids of `nodes` (ascending): `[a, b)` ranges (one for a Cluster-GCN
/// part that is a range of rows).
pub(crate) fn runs(nodes: &[u32]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut k = 0;
    std::iter::from_fn(move || {
        let a = *nodes.get(k)? as usize;
        let mut b = a + 1;
        k += 1;
        while k < nodes.len() && nodes[k] as usize == b {
            b += 1;
            k += 1;
        }
        Some((a, b))
    })
}

/// Reads `len` bytes at byte `offset` of the file into `buf` (resized), with a positioned
/// read: the file's cursor is not shared state.
fn read_at(file: &(File, PathBuf), offset: u64, len: usize, buf: &mut Vec<u8>) -> Result<()> {
    buf.resize(len, 0);
    let (f, path) = file;
    #[cfg(unix)]
    let r = std::os::unix::fs::FileExt::read_exact_at(f, buf, offset);
    #[cfg(windows)]
    let r = {
        let mut done = 0;
        let mut r = Ok(());
        while done < buf.len() {
            match std::os::windows::fs::FileExt::seek_read(
                f,
                &mut buf[done..],
                offset + done as u64,
            ) {
                Ok(0) => {
                    r = Err(std::io::ErrorKind::UnexpectedEof.into());
                    break;
                }
                Ok(k) => done += k,
                Err(e) => {
                    r = Err(e);
                    break;
                }
            }
        }
        r
    };
    r.map_err(|e| Error::io(path, e))
}
