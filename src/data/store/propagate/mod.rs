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

mod stream;

use std::path::PathBuf;

use ndarray::{Array2, ArrayView2, ArrayViewMut2};
use rayon::prelude::*;

use self::stream::{
    bad, build_block, first_pass, first_pass_map, kept_rows, longest_row, Blocks, FeatureRows,
};
use super::Store;
use crate::data::Dataset;
use crate::graph::{Norm, NormAdj, Propagate};
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

/// The kept rows' values (`rows` × `cols`, row-major) as a matrix.
fn as_matrix(rows: usize, cols: usize, x: Vec<f32>) -> Result<Array2<f32>> {
    Array2::from_shape_vec((rows, cols), x).map_err(|e| Error::Mismatch {
        what: format!("propagated rows ({e})"),
        expected: rows * cols,
        got: rows * cols,
    })
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

/// One pass over a store's graph and features with plain reads, as propagation's first pass:
/// the offsets, ids, order, self-loops and symmetry of the pattern and the checksums of
/// `indptr`, `indices` and `features`; whether every feature is ≥ 0. What reading a store's
/// rows out of core checks before it trusts them ([`super::StoreRows::open`]).
///
/// # Errors
/// [`Error::Store`] naming the array at fault; [`Error::Io`].
pub(super) fn check_features(store: &Store) -> Result<bool> {
    FeatureRows::new(store)?.scan(store)
}

/// d̃ of every node of `store`'s graph (its row's length in Ã = A + I), after the checks of
/// propagation's first pass over the graph (offsets, ids, order, self-loops, symmetry and the
/// checksums of `indptr` and `indices`).
///
/// # Errors
/// [`Error::Store`] naming the array at fault; [`Error::Io`].
pub(super) fn tilde_degrees(store: &Store) -> Result<Vec<u32>> {
    first_pass_map(store, LIMITS, |d| d)
}

/// [`check_features`] after the graph's pass.
pub(super) fn check_pass(store: &Store) -> Result<bool> {
    first_pass(store, crate::graph::Norm::Symmetric, LIMITS)?;
    FeatureRows::new(store)?.scan(store)
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
    crate::kernels::raw::advise_slice(&mut a);
    crate::kernels::raw::advise_slice(&mut b);
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
            blocks.rewind();
            while let Some(r0) = blocks.next(None)? {
                let nr = blocks.rows();
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
    let x = as_matrix(rows.len(), cols, x)?;
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
    let x = as_matrix(rows.len(), cols, x)?;
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
mod tests;
