//! The streaming half of out-of-core propagation: a store's arrays read sequentially with plain
//! reads into reused buffers (offsets, ids and features, their checksums kept on the way), Â's
//! rows in blocks and the first pass over them (degrees, the pattern's checks), the feature
//! columns of one tile, and each block of Â built as `NormAdj` builds Â.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use rayon::prelude::*;

use super::{KeepRows, Limits, BLOCK_ROWS, FEATURE_BLOCK_BYTES};
use crate::data::store::{Dtype, Store};
use crate::graph::{pair_hash, Norm};
use crate::{Error, Result};

/// The longest stored row (offsets read in chunks, each checked not to decrease nor to pass
/// the entries stored).
pub(super) fn longest_row(store: &Store) -> Result<u64> {
    let n = store.header().n_nodes as usize;
    let nnz = store.header().arrays["indices"].len;
    let mut r = Reader::open(store, "indptr")?;
    let (mut bytes, mut ip) = (Vec::new(), Vec::new());
    let (mut longest, mut i0) = (0u64, 0usize);
    while i0 < n {
        let rows = BLOCK_ROWS.min(n - i0);
        r.read(i0 as u64 * 8, (rows + 1) * 8, &mut bytes)?;
        u64s_into(&bytes, &mut ip);
        if let Some(k) = (0..rows).find(|&k| ip[k] > ip[k + 1] || ip[k + 1] > nnz) {
            return Err(bad(
                store,
                "indptr",
                format!(
                    "offsets {} and {} of rows {} and {}: not increasing within {nnz} entries",
                    ip[k],
                    ip[k + 1],
                    i0 + k,
                    i0 + k + 1,
                ),
            ));
        }
        let m = ip.windows(2).map(|w| w[1] - w[0]).max();
        longest = longest.max(m.unwrap_or(0));
        i0 += rows;
    }
    Ok(longest)
}

/// A store's array read sequentially with plain reads, its CRC-32 kept along the way.
pub(super) struct Reader {
    file: File,
    path: PathBuf,
}

impl Reader {
    fn open(store: &Store, name: &'static str) -> Result<Reader> {
        let path = store.dir().join(&store.header().arrays[name].file);
        let file = File::open(&path).map_err(|e| Error::io(&path, e))?;
        Ok(Reader { file, path })
    }
    /// Reads `len` bytes at byte `offset` into `buf` (resized).
    fn read(&mut self, offset: u64, len: usize, buf: &mut Vec<u8>) -> Result<()> {
        buf.resize(len, 0);
        self.file
            .seek(SeekFrom::Start(offset))
            .and_then(|_| self.file.read_exact(buf))
            .map_err(|e| Error::io(&self.path, e))
    }
}

pub(super) fn bad(store: &Store, array: &str, msg: String) -> Error {
    Error::Store {
        path: store.dir().to_path_buf(),
        array: array.to_string(),
        msg,
    }
}

/// A feature value that is not finite, named by its row and column.
fn bad_value(store: &Store, row: usize, col: usize, x: f32) -> Error {
    bad(
        store,
        "features",
        format!("row {row}, column {col}: {x} is not a finite value"),
    )
}

/// Little-endian u64s of `bytes` into `out`.
pub(super) fn u64s_into(bytes: &[u8], out: &mut Vec<u64>) {
    out.clear();
    out.extend(
        bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default())),
    );
}

/// Little-endian u32s of `bytes` into `out`.
pub(super) fn u32s_into(bytes: &[u8], out: &mut Vec<u32>) {
    out.clear();
    out.par_extend(
        bytes
            .par_chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap_or_default())),
    );
}

/// The rows kept, increasing: the split's nodes or every node.
pub(super) fn kept_rows(store: &Store, keep: KeepRows) -> Result<Vec<u32>> {
    let n = store.header().n_nodes as usize;
    if keep == KeepRows::All {
        // Node ids fit in u32 (a store holds at most 2^32 − 1 nodes).
        return Ok((0..n as u32).collect());
    }
    let mut rows = Vec::new();
    for name in ["train", "valid", "test"] {
        store.verify_array(name)?;
        let ids = store.u32s(name)?;
        if let Some(&i) = ids.iter().find(|&&i| i as usize >= n) {
            return Err(bad(store, name, format!("node {i} of {n}")));
        }
        rows.extend_from_slice(ids);
    }
    rows.par_sort_unstable();
    rows.dedup();
    Ok(rows)
}

/// The rows of Â's blocks: `[r0, r1)` ranges of at most [`BLOCK_ROWS`] rows and
/// [`BLOCK_NNZ`] entries (or one row), with their offsets.
pub(super) struct Blocks<'s> {
    store: &'s Store,
    limits: Limits,
    indptr: Reader,
    indices: Reader,
    n: usize,
    nnz: u64,
    next: usize,
    bytes: Vec<u8>,
    /// Offsets of the current block's rows (`r1 − r0 + 1` of them, global).
    ip: Vec<u64>,
    /// Column ids of the current block's entries.
    idx: Vec<u32>,
}

impl<'s> Blocks<'s> {
    pub(super) fn new(store: &'s Store, limits: Limits) -> Result<Self> {
        let h = store.header();
        Ok(Blocks {
            store,
            limits,
            indptr: Reader::open(store, "indptr")?,
            indices: Reader::open(store, "indices")?,
            n: h.n_nodes as usize,
            nnz: h.arrays["indices"].len,
            next: 0,
            bytes: Vec::new(),
            ip: Vec::new(),
            idx: Vec::new(),
        })
    }

    /// The next block's first row (its offsets and ids in `ip` and `idx`), `None` at the end.
    /// `crc`: the CRC-32s of `indptr` and `indices` to update (the first pass).
    pub(super) fn next(
        &mut self,
        mut crc: Option<(&mut crc32fast::Hasher, &mut crc32fast::Hasher)>,
    ) -> Result<Option<usize>> {
        let r0 = self.next;
        if r0 >= self.n {
            return Ok(None);
        }
        let rows = self.limits.rows.min(self.n - r0);
        self.indptr
            .read(r0 as u64 * 8, (rows + 1) * 8, &mut self.bytes)?;
        let mut ip = std::mem::take(&mut self.ip);
        u64s_into(&self.bytes, &mut ip);
        // Offsets must not decrease nor pass the entries stored.
        if let Some(k) = (0..rows).find(|&k| ip[k] > ip[k + 1] || ip[k + 1] > self.nnz) {
            return Err(bad(
                self.store,
                "indptr",
                format!(
                    "offsets {} and {} of rows {} and {}: not increasing within {} entries",
                    ip[k],
                    ip[k + 1],
                    r0 + k,
                    r0 + k + 1,
                    self.nnz
                ),
            ));
        }
        if r0 == 0 && ip[0] != 0 {
            return Err(bad(self.store, "indptr", format!("first offset {}", ip[0])));
        }
        // Up to `limits.nnz` entries, at least one row.
        let limit = ip[0] + self.limits.nnz as u64;
        let take = ip[1..=rows].partition_point(|&o| o <= limit).max(1);
        ip.truncate(take + 1);
        if let Some((ip_crc, _)) = crc.as_mut() {
            ip_crc.update(&self.bytes[..take * 8]);
            if r0 + take == self.n {
                ip_crc.update(&self.bytes[take * 8..(take + 1) * 8]);
            }
        }
        let (a, b) = (ip[0], ip[take]);
        let len = usize::try_from(b - a)
            .map_err(|_| bad(self.store, "indptr", format!("row {r0}: {} entries", b - a)))?;
        self.indices.read(a * 4, len * 4, &mut self.bytes)?;
        if let Some((_, idx_crc)) = crc.as_mut() {
            idx_crc.update(&self.bytes);
        }
        u32s_into(&self.bytes, &mut self.idx);
        self.ip = ip;
        self.next = r0 + take;
        Ok(Some(r0))
    }

    /// Back to the first block.
    pub(super) fn rewind(&mut self) {
        self.next = 0;
    }

    /// Rows of the current block.
    pub(super) fn rows(&self) -> usize {
        self.ip.len() - 1
    }

    /// The stored row `r` (global) of the current block starting at `r0`.
    pub(super) fn row(&self, r0: usize, r: usize) -> &[u32] {
        let k = r - r0;
        let base = self.ip[0];
        &self.idx[(self.ip[k] - base) as usize..(self.ip[k + 1] - base) as usize]
    }
}

/// What the first pass learns: Â's row scales (D̃^-1/2 or D̃^-1), and whether Â is symmetric.
pub(super) fn first_pass(store: &Store, norm: Norm, limits: Limits) -> Result<Vec<f32>> {
    first_pass_map(store, limits, |d| match norm {
        Norm::Symmetric => (1.0 / f64::from(d).sqrt()) as f32,
        Norm::Row => (1.0 / f64::from(d)) as f32,
    })
}

/// The first pass's checks of the store's graph (offsets, ids, order, self-loops, symmetry,
/// checksums), giving `of(d̃_i)` for every node i (d̃_i: its row's length in Ã = A + I).
pub(super) fn first_pass_map<T: Copy + Default>(
    store: &Store,
    limits: Limits,
    of: impl Fn(u32) -> T,
) -> Result<Vec<T>> {
    let h = store.header();
    let n = h.n_nodes as usize;
    let mut scale = vec![T::default(); n];
    crate::kernels::raw::advise_slice(&mut scale);
    let mut blocks = Blocks::new(store, limits)?;
    let (mut ip_crc, mut idx_crc) = (crc32fast::Hasher::new(), crc32fast::Hasher::new());
    let (mut fwd, mut back, mut loops) = (0u64, 0u64, 0u64);
    while let Some(r0) = blocks.next(Some((&mut ip_crc, &mut idx_crc)))? {
        let rows = blocks.rows();
        let b = &blocks;
        // Per row: d̃, a self-loop, the hash sums, or the first fault.
        let per_row: Vec<std::result::Result<(u32, bool, u64, u64), String>> = (r0..r0 + rows)
            .into_par_iter()
            .map(|i| {
                let row = b.row(r0, i);
                if let Some(&j) = row.iter().find(|&&j| j as usize >= n) {
                    return Err(format!("row {i}: node {j} of {n}"));
                }
                if let Some(w) = row.windows(2).find(|w| w[0] >= w[1]) {
                    return Err(format!(
                        "row {i}: ids {} then {}, not strictly increasing",
                        w[0], w[1]
                    ));
                }
                let u = i as u32;
                let has_loop = row.binary_search(&u).is_ok();
                let (mut f, mut g) = (0u64, 0u64);
                if !h.directed {
                    for &j in row {
                        f = f.wrapping_add(pair_hash(u, j));
                        g = g.wrapping_add(pair_hash(j, u));
                    }
                }
                let d = row.len() + usize::from(!has_loop);
                Ok((d as u32, has_loop, f, g))
            })
            .collect();
        for (k, r) in per_row.into_iter().enumerate() {
            let (d, has_loop, f, g) = r.map_err(|m| bad(store, "indices", m))?;
            scale[r0 + k] = of(d);
            loops += u64::from(has_loop);
            fwd = fwd.wrapping_add(f);
            back = back.wrapping_add(g);
        }
    }
    for (name, crc) in [("indptr", ip_crc), ("indices", idx_crc)] {
        let (got, want) = (crc.finalize(), h.arrays[name].crc32);
        if got != want {
            return Err(bad(
                store,
                name,
                format!("checksum {got:08x}, the header records {want:08x}"),
            ));
        }
    }
    if loops != h.self_loops {
        return Err(bad(
            store,
            "indices",
            format!("{loops} self-loops, the header records {}", h.self_loops),
        ));
    }
    if fwd != back {
        return Err(bad(
            store,
            "indices",
            "an undirected store's pattern holds an entry (i, j) without (j, i)".into(),
        ));
    }
    Ok(scale)
}

/// The features' values as `f32`, read in row blocks.
pub(super) struct FeatureRows {
    reader: Reader,
    dtype: Dtype,
    n: usize,
    d: usize,
    bytes: Vec<u8>,
}

impl FeatureRows {
    pub(super) fn new(store: &Store) -> Result<Self> {
        let h = store.header();
        if h.sparse_features {
            return Err(bad(
                store,
                "features",
                "the features are stored sparse; out-of-core propagation reads dense features \
                 (train --model sgc propagates sparse ones in memory)"
                    .into(),
            ));
        }
        Ok(FeatureRows {
            reader: Reader::open(store, "features")?,
            dtype: h.arrays["features"].dtype,
            n: h.n_nodes as usize,
            d: h.n_features as usize,
            bytes: Vec::new(),
        })
    }
    pub(super) fn rows_per_block(&self) -> usize {
        (FEATURE_BLOCK_BYTES / (self.d.max(1) * self.dtype.width() as usize)).max(1)
    }
    /// Reads rows `r0..r0 + rows` (their bytes in `self.bytes`), the CRC updated.
    fn read(&mut self, r0: usize, rows: usize, crc: Option<&mut crc32fast::Hasher>) -> Result<()> {
        let w = self.dtype.width() as usize;
        self.reader
            .read((r0 * self.d * w) as u64, rows * self.d * w, &mut self.bytes)?;
        if let Some(c) = crc {
            c.update(&self.bytes);
        }
        Ok(())
    }
    /// The bytes of each row read.
    fn row_bytes(&self) -> std::slice::ChunksExact<'_, u8> {
        self.bytes
            .chunks_exact((self.d * self.dtype.width() as usize).max(1))
    }
    /// Row `row`'s (its bytes) values `c0..c1` as `f32`, into `out`.
    fn values(dtype: Dtype, row: &[u8], c0: usize, c1: usize, out: &mut [f32]) {
        match dtype {
            Dtype::F16 => {
                for (o, c) in out.iter_mut().zip(row[2 * c0..2 * c1].chunks_exact(2)) {
                    *o = half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32();
                }
            }
            _ => {
                for (o, c) in out.iter_mut().zip(row[4 * c0..4 * c1].chunks_exact(4)) {
                    *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                }
            }
        }
    }
    /// One pass over every row: the checksum checked, every value finite, and whether every
    /// value is ≥ 0.
    pub(super) fn scan(&mut self, store: &Store) -> Result<bool> {
        let (per, dtype, d) = (self.rows_per_block(), self.dtype, self.d);
        let mut crc = crc32fast::Hasher::new();
        let (mut r0, mut non_negative) = (0, true);
        while r0 < self.n {
            let rows = per.min(self.n - r0);
            self.read(r0, rows, Some(&mut crc))?;
            // Per row: (all ≥ 0, the first value that is not finite).
            let per_row: Vec<(bool, Option<(usize, f32)>)> = self
                .bytes
                .par_chunks((d * dtype.width() as usize).max(1))
                .map(|row| {
                    let mut v = vec![0f32; d];
                    Self::values(dtype, row, 0, d, &mut v);
                    let bad = v.iter().position(|x| !x.is_finite()).map(|c| (c, v[c]));
                    (v.iter().all(|&x| x >= 0.0), bad)
                })
                .collect();
            for (k, &(nn, bad)) in per_row.iter().enumerate() {
                if let Some((c, x)) = bad {
                    return Err(bad_value(store, r0 + k, c, x));
                }
                non_negative &= nn;
            }
            r0 += rows;
        }
        let (got, want) = (crc.finalize(), store.header().arrays["features"].crc32);
        if got != want {
            return Err(bad(
                store,
                "features",
                format!("checksum {got:08x}, the header records {want:08x}"),
            ));
        }
        Ok(non_negative)
    }

    /// Whether every value is ≥ 0 (stops at the first negative one).
    pub(super) fn non_negative(&mut self) -> Result<bool> {
        let (per, dtype, d) = (self.rows_per_block(), self.dtype, self.d);
        let mut r0 = 0;
        while r0 < self.n {
            let rows = per.min(self.n - r0);
            self.read(r0, rows, None)?;
            let ok = self
                .bytes
                .par_chunks((d * dtype.width() as usize).max(1))
                .all(|row| {
                    let mut v = vec![0f32; d];
                    Self::values(dtype, row, 0, d, &mut v);
                    v.iter().all(|&x| x >= 0.0)
                });
            if !ok {
                return Ok(false);
            }
            r0 += rows;
        }
        Ok(true)
    }
    /// Columns `c0..c1` of every row into `tile` (n × (c1 − c0) at least), each row
    /// row-normalised first if `normalize`; the CRC of the whole array checked if `crc`.
    pub(super) fn fill_tile(
        &mut self,
        store: &Store,
        c0: usize,
        c1: usize,
        normalize: bool,
        crc: Option<crc32fast::Hasher>,
        tile: &mut [f32],
    ) -> Result<()> {
        let tw = c1 - c0;
        let (per, dtype, d) = (self.rows_per_block(), self.dtype, self.d);
        let mut crc = crc;
        let mut r0 = 0;
        while r0 < self.n {
            let nr = per.min(self.n - r0);
            self.read(r0, nr, crc.as_mut())?;
            let rows: Vec<&[u8]> = self.row_bytes().collect();
            tile[r0 * tw..(r0 + nr) * tw]
                .par_chunks_mut(tw.max(1))
                .zip(rows.par_iter())
                .for_each_init(
                    || vec![0f32; d],
                    |full, (out, src)| {
                        if normalize {
                            Self::values(dtype, src, 0, d, full);
                            normalize_row(full);
                            out.copy_from_slice(&full[c0..c1]);
                        } else {
                            Self::values(dtype, src, c0, c1, out);
                        }
                    },
                );
            r0 += nr;
        }
        if let Some(c) = crc {
            let want = store.header().arrays["features"].crc32;
            let got = c.finalize();
            if got != want {
                return Err(bad(
                    store,
                    "features",
                    format!("checksum {got:08x}, the header records {want:08x}"),
                ));
            }
        }
        Ok(())
    }
}

/// Row-normalises one row as [`Features::row_normalize`](crate::input::Features::row_normalize)
/// does (the same function).
pub(super) fn normalize_row(row: &mut [f32]) {
    crate::input::features::normalize_row(row);
}

/// Rows `r0..` of Â (the current block of `blocks`) into `ip`, `idx`, `val`: each stored row
/// with its self-loop added where it has none (as `normalize::tilde_row` lays it out), valued s_i·s_j (symmetric) or s_i (row), built
/// in parallel in row groups.
pub(super) fn build_block(
    blocks: &Blocks<'_>,
    r0: usize,
    scale: &[f32],
    norm: Norm,
    ip: &mut Vec<usize>,
    idx: &mut Vec<u32>,
    val: &mut Vec<f32>,
) {
    let nr = blocks.rows();
    ip.clear();
    ip.push(0);
    for i in r0..r0 + nr {
        let row = blocks.row(r0, i);
        let len = row.len() + usize::from(row.binary_search(&(i as u32)).is_err());
        ip.push(ip[i - r0] + len);
    }
    let total = ip[nr];
    idx.resize(total, 0);
    val.resize(total, 0.0);
    // Row groups of about equal entries, their slices split off in order.
    let groups = (rayon::current_num_threads() * 4).clamp(1, nr.max(1));
    let mut cuts = Vec::with_capacity(groups + 1);
    cuts.push(0);
    for g in 1..groups {
        let at = ip.partition_point(|&o| o < total * g / groups).min(nr);
        cuts.push(at.max(*cuts.last().unwrap_or(&0)));
    }
    cuts.push(nr);
    let mut parts = Vec::with_capacity(groups);
    let (mut rest_i, mut rest_v) = (&mut idx[..], &mut val[..]);
    for w in cuts.windows(2) {
        let len = ip[w[1]] - ip[w[0]];
        let (hi, ti) = std::mem::take(&mut rest_i).split_at_mut(len);
        let (hv, tv) = std::mem::take(&mut rest_v).split_at_mut(len);
        parts.push((w[0], w[1], hi, hv));
        (rest_i, rest_v) = (ti, tv);
    }
    parts.into_par_iter().for_each(|(a, b, pi, pv)| {
        let mut k = 0;
        for i in r0 + a..r0 + b {
            // The row of Ã as `tilde_row` lays it out: the ids below i, i, the ids above i.
            let (row, u) = (blocks.row(r0, i), i as u32);
            let pos = row.partition_point(|&j| j < u);
            let above = if row.get(pos) == Some(&u) {
                &row[pos + 1..]
            } else {
                &row[pos..]
            };
            let len = pos + 1 + above.len();
            let ids = &mut pi[k..k + len];
            ids[..pos].copy_from_slice(&row[..pos]);
            ids[pos] = u;
            ids[pos + 1..].copy_from_slice(above);
            let si = scale[i];
            let vals = &mut pv[k..k + len];
            match norm {
                Norm::Symmetric => {
                    for (v, &j) in vals.iter_mut().zip(ids.iter()) {
                        *v = si * scale[j as usize];
                    }
                }
                Norm::Row => vals.fill(si),
            }
            k += len;
        }
    });
}
