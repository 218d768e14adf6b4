//! Out-of-core propagation: the rows of Â^k·X (k = 1…K) that training, validation and test
//! need, computed from a [`Store`] without holding Â, X or any n × d matrix in memory — what
//! SGC (Wu et al. 2019: Â^K X into a linear model) and SIGN (Frasca et al. 2020:
//! [X, ÂX, …, Â^K X] into an MLP) train on when the graph does not fit.
//!
//! # How
//! X's columns are cut into tiles of `w` columns, `w` the widest that keeps two n × w `f32`
//! buffers (the tile and its product) and the fixed costs within
//! [`PropagateOptions::memory_limit`]. For each tile, X's columns are read from the store row
//! block by row block, then each hop streams Â's rows from the store block by block
//! (≤ [`BLOCK_NNZ`] entries), builds that block of Â (the self-loop added where the row has
//! none, values D̃^-1/2 Ã D̃^-1/2 or D̃^-1 Ã from the degrees of a first pass) and multiplies it
//! with the same SpMM kernel the in-memory path uses; the kept rows of each hop are copied out.
//! Files are read with plain reads into reused buffers (not mapped), so the resident set stays
//! within the plan whatever the store's size; Â is read K times per tile.
//!
//! # Bits
//! Each output element is computed by the same kernel in the same order as by
//! `NormAdj::new(graph, norm)` and [`Propagate::a_times`]
//! K times in memory (the SpMM's result does not depend on the column tile or on the rows
//! computed together), with Â's values rounded the same way and the features row-normalised
//! the same way: [`propagate_in_memory`] is that path, and the two agree bit for bit for any
//! `memory_limit` (tests/suite/store_propagate.rs).
//!
//! # Trust
//! The first pass checks the adjacency's pattern (offsets, ids in range and strictly
//! increasing in each row, the self-loop count and, for an undirected store, symmetry by the
//! streaming hash test of [`Graph::try_from_csr`](crate::graph::Graph::try_from_csr)) and the
//! checksums of `indptr` and `indices`; the first tile checks that of the features. A damaged
//! or tampered store is an [`Error::Store`] naming the array before any result is returned.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use ndarray::{Array2, ArrayView2, ArrayViewMut2};
use rayon::prelude::*;

use super::{Dtype, Store};
use crate::data::Dataset;
use crate::graph::{pair_hash, Norm, NormAdj, Propagate};
use crate::input::FeaturesRef;
use crate::kernels::{spmm, Csr, NewTrusted};
use crate::par::Par;
use crate::{Error, Result};

/// Entries of Â streamed at a time (a row longer than that is one block of its own).
pub const BLOCK_NNZ: usize = 1 << 21;
/// Rows of Â streamed at a time, at most.
const BLOCK_ROWS: usize = 1 << 16;

/// How Â is cut into blocks: at most `rows` rows and `nnz` entries each (a longer row is a
/// block of its own).
#[derive(Debug, Clone, Copy)]
struct Limits {
    nnz: usize,
    rows: usize,
}

const LIMITS: Limits = Limits {
    nnz: BLOCK_NNZ,
    rows: BLOCK_ROWS,
};
/// Bytes of features read at a time, about.
const FEATURE_BLOCK_BYTES: usize = 1 << 23;
/// What the process holds besides the plan's buffers (its code, thread stacks, the allocator's
/// slack), counted in the plan so that the limit bounds the resident set (measured: about
/// 48 MiB on products-like).
const PROCESS_BYTES: u64 = 96 << 20;

/// Which rows a propagation keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeepRows {
    /// The training, validation and test nodes (what SGC and SIGN train and are evaluated on).
    Split,
    /// Every node.
    All,
}

/// What to compute.
#[derive(Debug, Clone, PartialEq)]
pub struct PropagateOptions {
    /// Hops K ≥ 1.
    pub k: usize,
    /// Keep every hop, [X, ÂX, …, Â^K X] (SIGN), rather than Â^K X alone (SGC).
    pub every_hop: bool,
    /// Â's normalisation.
    pub norm: Norm,
    /// Row-normalise X first (each row to unit L1 norm, as training's `--row-norm`); `None`:
    /// when every feature is ≥ 0 (training's `auto`).
    pub row_normalize: Option<bool>,
    /// The rows kept.
    pub keep: KeepRows,
    /// Bytes the propagation may hold (its buffers and its result).
    pub memory_limit: u64,
}

/// The kept rows of the propagated features.
#[derive(Debug, Clone, PartialEq)]
pub struct Propagated {
    /// The kept rows' ids in the store, increasing.
    pub rows: Vec<u32>,
    /// rows × (hops · d): hop h (0 = X with every hop kept) in columns h·d … (h+1)·d.
    pub x: Array2<f32>,
    /// Whether X was row-normalised.
    pub row_normalized: bool,
    /// Columns of X per tile (d when X was propagated whole).
    pub tile_cols: usize,
    /// Column tiles.
    pub tiles: usize,
    /// Bytes planned: the two tiles, the result and the fixed buffers.
    pub planned_bytes: u64,
}

/// The memory a propagation needs for `n` nodes, `d` feature columns, `kept` rows of
/// `hops_out` blocks of `d` columns, and tiles of `w` columns, when no row of Â holds more than
/// [`BLOCK_NNZ`] entries: the two n × w tiles, the result, the per-node scales, the streaming
/// buffers and an allowance for the process itself.
pub fn plan_bytes(n: usize, d: usize, kept: usize, hops_out: usize, w: usize) -> u64 {
    let tiles = (n as u64).saturating_mul(w as u64).saturating_mul(8);
    tiles.saturating_add(fixed_bytes(n, d, kept, hops_out, 0, LIMITS))
}

/// [`plan_bytes`] without the tiles, for a longest row of `longest` entries.
fn fixed_bytes(
    n: usize,
    d: usize,
    kept: usize,
    hops_out: usize,
    longest: u64,
    limits: Limits,
) -> u64 {
    // Saturating: a damaged store's offsets can claim any row length (refused later, by the
    // plan or by the first pass).
    let result = (kept as u64)
        .saturating_mul((hops_out as u64).saturating_mul(d as u64).saturating_add(1))
        .saturating_mul(4);
    let scale = (n as u64).saturating_mul(4);
    // Â's block: its entries' bytes, ids, the built block's ids and values (16 bytes an entry,
    // a self-loop a row more), its offsets (read, as bytes, and built); one block of features.
    let entries = (limits.nnz as u64)
        .max(longest)
        .saturating_add(limits.rows as u64);
    let block = entries
        .saturating_mul(16)
        .saturating_add((limits.rows as u64 + 1) * 24);
    let features = 2 * FEATURE_BLOCK_BYTES as u64 + (d as u64).saturating_mul(8);
    [result, scale, block, features, PROCESS_BYTES]
        .into_iter()
        .fold(0u64, u64::saturating_add)
}

/// The longest stored row (offsets read in chunks, each checked not to decrease nor to pass
/// the entries stored).
fn longest_row(store: &Store) -> Result<u64> {
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
struct Reader {
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

fn bad(store: &Store, array: &str, msg: String) -> Error {
    Error::Store {
        path: store.dir().to_path_buf(),
        array: array.to_string(),
        msg,
    }
}

/// Little-endian u64s of `bytes` into `out`.
fn u64s_into(bytes: &[u8], out: &mut Vec<u64>) {
    out.clear();
    out.extend(
        bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default())),
    );
}

/// Little-endian u32s of `bytes` into `out`.
fn u32s_into(bytes: &[u8], out: &mut Vec<u32>) {
    out.clear();
    out.par_extend(
        bytes
            .par_chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap_or_default())),
    );
}

/// The rows kept, increasing: the split's nodes or every node.
fn kept_rows(store: &Store, keep: KeepRows) -> Result<Vec<u32>> {
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
struct Blocks<'s> {
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
    fn new(store: &'s Store, limits: Limits) -> Result<Self> {
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
    fn next(
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

    /// The stored row `r` (global) of the current block starting at `r0`.
    fn row(&self, r0: usize, r: usize) -> &[u32] {
        let k = r - r0;
        let base = self.ip[0];
        &self.idx[(self.ip[k] - base) as usize..(self.ip[k + 1] - base) as usize]
    }
}

/// What the first pass learns: Â's row scales (D̃^-1/2 or D̃^-1), and whether Â is symmetric.
fn first_pass(store: &Store, norm: Norm, limits: Limits) -> Result<Vec<f32>> {
    let h = store.header();
    let n = h.n_nodes as usize;
    let mut scale = vec![0f32; n];
    crate::kernels::raw::huge::advise_slice(&mut scale);
    let mut blocks = Blocks::new(store, limits)?;
    let (mut ip_crc, mut idx_crc) = (crc32fast::Hasher::new(), crc32fast::Hasher::new());
    let (mut fwd, mut back, mut loops) = (0u64, 0u64, 0u64);
    while let Some(r0) = blocks.next(Some((&mut ip_crc, &mut idx_crc)))? {
        let rows = blocks.ip.len() - 1;
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
            scale[r0 + k] = match norm {
                Norm::Symmetric => (1.0 / f64::from(d).sqrt()) as f32,
                Norm::Row => (1.0 / f64::from(d)) as f32,
            };
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
struct FeatureRows {
    reader: Reader,
    dtype: Dtype,
    n: usize,
    d: usize,
    bytes: Vec<u8>,
}

impl FeatureRows {
    fn new(store: &Store) -> Result<Self> {
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
    fn rows_per_block(&self) -> usize {
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
    /// Whether every value is ≥ 0 (stops at the first negative one).
    fn non_negative(&mut self) -> Result<bool> {
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
    fn fill_tile(
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
/// does: x ← x / Σ|x| (an all-zero row stays zero).
fn normalize_row(row: &mut [f32]) {
    let s: f32 = row.iter().map(|v| v.abs()).sum();
    if s != 0.0 {
        row.iter_mut().for_each(|v| *v /= s);
    }
}

/// Rows `r0..` of Â (the current block of `blocks`) into `ip`, `idx`, `val`: each stored row
/// with its self-loop added where it has none (as `normalize::tilde_row` lays it out), valued s_i·s_j (symmetric) or s_i (row), built
/// in parallel in row groups.
fn build_block(
    blocks: &Blocks<'_>,
    r0: usize,
    scale: &[f32],
    norm: Norm,
    ip: &mut Vec<usize>,
    idx: &mut Vec<u32>,
    val: &mut Vec<f32>,
) {
    let nr = blocks.ip.len() - 1;
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

/// Copies the kept rows of `tile` (n × `w`, row-major) into columns `c0..c0 + w` of `out`
/// (rows × `cols`, row-major).
fn keep(tile: &[f32], w: usize, rows: &[u32], out: &mut [f32], cols: usize, c0: usize) {
    out.par_chunks_mut(cols.max(1))
        .zip(rows.par_iter())
        .for_each(|(o, &r)| {
            let r = r as usize;
            o[c0..c0 + w].copy_from_slice(&tile[r * w..(r + 1) * w]);
        });
}

/// The kept rows of Â^K X (or of X, ÂX, …, Â^K X) of `store`, out of core (see the [module
/// docs](self)). `progress` is told each step.
///
/// # Errors
/// [`Error::Store`] for sparse features; [`Error::TooLarge`] when even
/// one column per tile does not fit in `memory_limit` (naming the limit needed) or the plan
/// does not fit in the memory available; [`Error::Store`] naming the array for a damaged
/// store; [`Error::Io`].
pub fn propagate(
    store: &Store,
    opts: &PropagateOptions,
    progress: &(dyn Fn(String) + Sync),
) -> Result<Propagated> {
    propagate_in(store, opts, progress, LIMITS)
}

/// [`propagate`] with Â cut into blocks within `limits`.
fn propagate_in(
    store: &Store,
    opts: &PropagateOptions,
    progress: &(dyn Fn(String) + Sync),
    limits: Limits,
) -> Result<Propagated> {
    let h = store.header();
    let (n, d) = (h.n_nodes as usize, h.n_features as usize);
    if n == 0 {
        return Err(bad(
            store,
            "indptr",
            "a store of no node: nothing to propagate".into(),
        ));
    }
    let mut feats = FeatureRows::new(store)?;
    let hops_out = if opts.every_hop { opts.k + 1 } else { 1 };
    if hops_out.saturating_mul(d) > crate::data::io::MAX_FEATURE_COLS {
        return Err(Error::Dataset {
            path: store.dir().to_path_buf(),
            msg: format!(
                "{hops_out} hops of {d} columns: at most {} columns in all",
                crate::data::io::MAX_FEATURE_COLS
            ),
        });
    }
    // The kept rows (at most the split's listed ids), and the longest row of Â: both planned
    // before anything of their size is allocated.
    let kept = match opts.keep {
        KeepRows::All => n,
        KeepRows::Split => ["train", "valid", "test"]
            .iter()
            .map(|a| h.arrays[*a].len as usize)
            .fold(0usize, usize::saturating_add)
            .min(n),
    };
    let longest = longest_row(store)?;
    let fixed = fixed_bytes(n, d, kept, hops_out, longest, limits);
    let per_col = 8 * n as u64;
    let room = opts.memory_limit.saturating_sub(fixed);
    let fit = usize::try_from(room / per_col.max(1)).unwrap_or(usize::MAX);
    if fit == 0 && d > 0 {
        return Err(Error::TooLarge {
            what: format!(
                "out-of-core propagation of {n} nodes: {} result values, a row of {longest} \
                 entries and one feature column per tile",
                kept * hops_out * d
            ),
            needed_bytes: fixed.saturating_add(per_col),
            available_bytes: opts.memory_limit,
            budget: "--memory-limit".into(),
        });
    }
    let tiles = d.div_ceil(fit.clamp(1, d.max(1))).max(1);
    let w = d.div_ceil(tiles).max(1);
    let planned = fixed.saturating_add(per_col.saturating_mul(w as u64));
    crate::data::memory::check(planned, || {
        format!("out-of-core propagation of {n} nodes in {tiles} tiles of {w} columns")
    })?;
    let rows = kept_rows(store, opts.keep)?;
    let row_normalized = match opts.row_normalize {
        Some(b) => b,
        None => {
            progress("checking the features' signs".into());
            feats.non_negative()?
        }
    };
    progress("reading the adjacency (degrees, checks)".into());
    let scale = first_pass(store, opts.norm, limits)?;
    let cols = hops_out * d;
    let mut x = vec![0f32; rows.len() * cols];
    // Fresh (untouched) buffers advised for huge pages: each gather of a random row then
    // costs a cache miss but no TLB miss.
    let mut a = vec![0f32; n * w];
    let mut b = vec![0f32; n * w];
    crate::kernels::raw::huge::advise_slice(&mut a);
    crate::kernels::raw::huge::advise_slice(&mut b);
    let mut blocks = Blocks::new(store, limits)?;
    let (mut bip, mut bidx, mut bval) = (Vec::new(), Vec::new(), Vec::new());
    let mut feat_crc = Some(crc32fast::Hasher::new());
    for t in 0..tiles {
        let (c0, c1) = (t * w, ((t + 1) * w).min(d));
        let tw = c1 - c0;
        progress(format!("tile {}/{tiles}: columns {c0}..{c1} of X", t + 1));
        feats.fill_tile(
            store,
            c0,
            c1,
            row_normalized,
            feat_crc.take(),
            &mut a[..n * tw],
        )?;
        if opts.every_hop {
            keep(&a[..n * tw], tw, &rows, &mut x, cols, c0);
        }
        for hop in 1..=opts.k {
            progress(format!(
                "tile {}/{tiles}: hop {hop}/{} (streaming Â)",
                t + 1,
                opts.k
            ));
            blocks.next = 0;
            while let Some(r0) = blocks.next(None)? {
                let nr = blocks.ip.len() - 1;
                build_block(
                    &blocks, r0, &scale, opts.norm, &mut bip, &mut bidx, &mut bval,
                );
                let blk = Csr::new_trusted_pub(
                    (nr, n),
                    std::mem::take(&mut bip),
                    std::mem::take(&mut bidx),
                    std::mem::take(&mut bval),
                );
                let shape = |e: ndarray::ShapeError| Error::Mismatch {
                    what: format!("propagation tile ({e})"),
                    expected: n * tw,
                    got: a.len(),
                };
                let src = ArrayView2::from_shape((n, tw), &a[..n * tw]).map_err(shape)?;
                let dst = ArrayViewMut2::from_shape((nr, tw), &mut b[r0 * tw..(r0 + nr) * tw])
                    .map_err(shape)?;
                spmm(1.0, blk.view(), src, 0.0, dst, Par::Rayon);
                (bip, bidx, bval) = blk.into_raw_storage();
            }
            std::mem::swap(&mut a, &mut b);
            if opts.every_hop || hop == opts.k {
                let slot = if opts.every_hop { hop * d } else { 0 };
                keep(&a[..n * tw], tw, &rows, &mut x, cols, slot + c0);
            }
        }
    }
    let x = Array2::from_shape_vec((rows.len(), cols), x).map_err(|e| Error::Mismatch {
        what: format!("propagated rows ({e})"),
        expected: rows.len() * cols,
        got: rows.len() * cols,
    })?;
    Ok(Propagated {
        rows,
        x,
        row_normalized,
        tile_cols: w,
        tiles,
        planned_bytes: planned,
    })
}

/// [`propagate`] in memory, on a dataset read whole (its rows in the store's order): Â built
/// by `NormAdj::new` and applied K times by [`Propagate::a_times`], the path training's SGC
/// takes — the reference the out-of-core path is tested against.
///
/// # Errors
/// [`Error::Dataset`] for sparse features; [`Error::TooLarge`] when Â and two n × d buffers do
/// not fit in the memory available.
pub fn propagate_in_memory(d: &Dataset, opts: &PropagateOptions) -> Result<Propagated> {
    let FeaturesRef::Dense(x0) = d.features.get() else {
        return Err(Error::Dataset {
            path: PathBuf::from(&d.name),
            msg: "the features are sparse; propagation reads dense features".into(),
        });
    };
    let (n, dim) = x0.dim();
    let g = &d.graph;
    crate::data::memory::check(
        ((g.nnz() + n) as u64) * 16 + 3 * (n as u64) * (dim as u64) * 4,
        || format!("in-memory propagation of {n} nodes and {dim} columns"),
    )?;
    let rows: Vec<u32> = match opts.keep {
        KeepRows::All => (0..n as u32).collect(),
        KeepRows::Split => {
            let mut r: Vec<u32> = [&d.split.train, &d.split.valid, &d.split.test]
                .iter()
                .flat_map(|m| m.indices().iter().copied())
                .collect();
            r.sort_unstable();
            r.dedup();
            r
        }
    };
    let row_normalized = opts
        .row_normalize
        .unwrap_or_else(|| d.features.is_non_negative());
    // Both buffers in standard layout: `as_slice` always gives them.
    let mut a = if row_normalized {
        // Training's own row normalisation, the reference for the out-of-core one.
        let mut f = d.features.clone();
        f.row_normalize();
        f.to_dense().as_standard_layout().into_owned()
    } else {
        x0.as_standard_layout().into_owned()
    };
    let hops_out = if opts.every_hop { opts.k + 1 } else { 1 };
    let cols = hops_out * dim;
    let mut x = vec![0f32; rows.len() * cols];
    if opts.every_hop {
        keep(a.as_slice().unwrap_or(&[]), dim, &rows, &mut x, cols, 0);
    }
    let adj = NormAdj::<f32>::new(g, opts.norm);
    let mut b = Array2::<f32>::zeros((n, dim));
    for hop in 1..=opts.k {
        adj.a_times(1.0, a.view(), 0.0, b.view_mut(), Par::Rayon);
        std::mem::swap(&mut a, &mut b);
        if opts.every_hop || hop == opts.k {
            let slot = if opts.every_hop { hop * dim } else { 0 };
            keep(a.as_slice().unwrap_or(&[]), dim, &rows, &mut x, cols, slot);
        }
    }
    let x = Array2::from_shape_vec((rows.len(), cols), x).map_err(|e| Error::Mismatch {
        what: format!("propagated rows ({e})"),
        expected: rows.len() * cols,
        got: rows.len() * cols,
    })?;
    Ok(Propagated {
        rows,
        x,
        row_normalized,
        tile_cols: dim,
        tiles: 1,
        planned_bytes: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::store::{write_store, FeatureDtype};
    use crate::data::synthetic::Preset;
    use crate::data::Features;

    /// Blocks of a few entries or rows (rows longer than a block are blocks of their own) give
    /// the in-memory bits, in one tile or several.
    #[test]
    fn small_blocks_and_long_rows_give_the_same_bits() {
        let dir = std::env::temp_dir().join(format!("sparse-gcn-prop-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut d = Preset::CoraLike.generate(2).unwrap();
        let x = d
            .features
            .to_dense()
            .slice(ndarray::s![.., ..24])
            .to_owned();
        d.features = Features::dense(x);
        let st = dir.join("s");
        write_store(&d, None, &st, FeatureDtype::F32).unwrap();
        let store = Store::open(&st).unwrap();
        let longest = (0..d.graph.n_nodes())
            .map(|i| d.graph.degree(i))
            .max()
            .unwrap();
        assert!(longest > 7, "some rows span several small blocks");
        for every_hop in [false, true] {
            let o = PropagateOptions {
                k: 2,
                every_hop,
                norm: Norm::Symmetric,
                row_normalize: Some(true),
                keep: KeepRows::All,
                memory_limit: 1 << 30,
            };
            let want = propagate_in_memory(&store.dataset(None).unwrap(), &o).unwrap();
            for (limits, memory_limit) in [
                (Limits { nnz: 7, rows: 5 }, 1 << 30),
                (Limits { nnz: 1, rows: 1 }, 1 << 30),
                (
                    Limits { nnz: 64, rows: 3 },
                    fixed_bytes(2708, 24, 2708, 3, 200, LIMITS) + 8 * 2708 * 5,
                ),
            ] {
                let o = PropagateOptions {
                    memory_limit,
                    ..o.clone()
                };
                let got = propagate_in(&store, &o, &|_| {}, limits).unwrap();
                assert_eq!(got.rows, want.rows);
                let bits = |p: &Propagated| p.x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert!(bits(&got) == bits(&want), "{limits:?}, {} tiles", got.tiles);
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
