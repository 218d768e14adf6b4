//! The generator out of core: [`CitationLike::write_store`] writes the dataset
//! [`CitationLike::generate`] would build — the same graph, features, labels and split, bit for
//! bit — straight into a store, holding only the node tables and one bucket of edges at a time,
//! so that a papers100M-sized graph (111 M nodes, 1.6 G edges) is written with a few GiB.
//!
//! # How
//! The edge rounds are the in-memory generator's ([`CitationLike::edge_sets`]), drawn into
//! [`DiskKeys`]: each round's candidates go, in chunks, to bucket files by the high bits of
//! their packed key (so buckets are ranges of the smaller node id, in key order); each bucket
//! is then sorted, deduplicated and merged with its sorted keys from the earlier rounds. The
//! counts are the in-memory set's, so the round sizes and the trim are the same. The CSR is then
//! assembled bucket by bucket: each key (u, v), u < v, is stored in row u as it is, and a
//! transposed copy (v, u) goes to v's bucket, sorted there; row r is its transposed entries
//! (ids below r) then its own (ids above r). Features are drawn in blocks and written as they
//! come. Scratch files live in the store's temporary folder and go with it.

use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::edges::{merge_unique, radix_sort, retain_unmarked, EdgeSampler, KeySet};
use super::features::DenseRows;
use super::nodes::Nodes;
use super::{CitationLike, EDGE_BLOCK, ROW_BLOCK};
use crate::data::store::{Dtype, FeatureDtype, Header, StoreSummary, StoreWriter};
use crate::data::store::{FORMAT, VERSION};
use crate::{Error, Result};

/// Keys a bucket holds, about (8 bytes each); a bucket is sorted in memory.
const BUCKET_KEYS: usize = 1 << 24;
/// Candidate blocks drawn at a time.
const CHUNK_BLOCKS: usize = 256;
/// Rows of features drawn and written at a time.
const FEATURE_ROWS: usize = 64 * ROW_BLOCK;

fn read_keys(path: &Path) -> Result<Vec<u64>> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|f| BufReader::new(f).read_to_end(&mut bytes))
        .map_err(|e| Error::io(path, e))?;
    Ok(bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
        .collect())
}

fn write_keys(path: &Path, keys: &[u64], append: bool) -> Result<()> {
    let f = OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    let mut w = BufWriter::with_capacity(1 << 20, f);
    for c in keys.chunks(1 << 16) {
        let bytes: Vec<u8> = c.iter().flat_map(|k| k.to_le_bytes()).collect();
        w.write_all(&bytes).map_err(|e| Error::io(path, e))?;
    }
    w.flush().map_err(|e| Error::io(path, e))
}

fn remove(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(path, e)),
        _ => Ok(()),
    }
}

/// A set of unique packed keys in sorted bucket files ([`KeySet`] out of core).
pub(super) struct DiskKeys {
    dir: PathBuf,
    tag: &'static str,
    /// A key's bucket is `key >> shift`.
    shift: u32,
    /// Bits of a node id in a key.
    bits: u32,
    /// Unique keys of each bucket.
    counts: Vec<usize>,
}

impl DiskKeys {
    /// An empty set of `1 << log_buckets` buckets in `dir`, its files named after `tag`.
    fn new(dir: &Path, tag: &'static str, bits: u32, log_buckets: u32) -> DiskKeys {
        DiskKeys {
            dir: dir.to_path_buf(),
            tag,
            shift: 2 * bits - log_buckets,
            bits,
            counts: vec![0; 1 << log_buckets],
        }
    }
    fn path(&self, b: usize, kind: &str) -> PathBuf {
        self.dir.join(format!("{}-{b}.{kind}", self.tag))
    }
    /// Appends `keys` to the `kind` files of their buckets.
    fn scatter(&self, keys: &[u64], shift: u32, kind: &str) -> Result<()> {
        let mut per = vec![Vec::new(); self.counts.len()];
        for &k in keys {
            // One bucket of 64-bit keys (2^31 < n ≤ 2^32 − 1 nodes) shifts everything out.
            per[k.checked_shr(shift).unwrap_or(0) as usize].push(k);
        }
        per.par_iter()
            .enumerate()
            .filter(|(_, v)| !v.is_empty())
            .try_for_each(|(b, v)| write_keys(&self.path(b, kind), v, true))
    }
    /// The sorted keys of bucket `b`.
    fn bucket(&self, b: usize) -> Result<Vec<u64>> {
        if self.counts[b] == 0 {
            return Ok(Vec::new());
        }
        read_keys(&self.path(b, "keys"))
    }
    /// Replaces bucket `b`'s keys.
    fn set_bucket(&self, b: usize, keys: &[u64]) -> Result<()> {
        let (tmp, path) = (self.path(b, "tmp"), self.path(b, "keys"));
        write_keys(&tmp, keys, false)?;
        fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))
    }
    /// Removes every file of the set.
    fn clear(&mut self) -> Result<()> {
        for b in 0..self.counts.len() {
            for kind in ["keys", "fresh", "tmp"] {
                remove(&self.path(b, kind))?;
            }
        }
        self.counts.iter_mut().for_each(|c| *c = 0);
        Ok(())
    }
}

impl KeySet for DiskKeys {
    fn count(&self) -> usize {
        self.counts.iter().sum()
    }

    fn add_round(
        &mut self,
        sampler: &EdgeSampler<'_>,
        seed: u64,
        cross: bool,
        round: u64,
        attempts: usize,
    ) -> Result<()> {
        let blocks = attempts.div_ceil(EDGE_BLOCK);
        let mut b0 = 0;
        while b0 < blocks {
            let b1 = (b0 + CHUNK_BLOCKS).min(blocks);
            let keys = sampler.candidates(seed, cross, round, attempts, b0..b1);
            self.scatter(&keys, self.shift, "fresh")?;
            b0 = b1;
        }
        let bits = 2 * self.bits;
        let counts: Vec<usize> = (0..self.counts.len())
            .into_par_iter()
            .map(|b| -> Result<usize> {
                let fresh_path = self.path(b, "fresh");
                if !fresh_path.exists() {
                    return Ok(self.counts[b]);
                }
                let mut fresh = read_keys(&fresh_path)?;
                radix_sort(&mut fresh, bits);
                fresh.dedup();
                let mut keys = self.bucket(b)?;
                merge_unique(&mut keys, fresh);
                self.set_bucket(b, &keys)?;
                remove(&fresh_path)?;
                Ok(keys.len())
            })
            .collect::<Result<_>>()?;
        self.counts = counts;
        Ok(())
    }

    fn remove_marked(&mut self, drop: &[u64]) -> Result<()> {
        let mut starts = Vec::with_capacity(self.counts.len());
        let mut at = 0;
        for &c in &self.counts {
            starts.push(at);
            at += c;
        }
        let counts: Vec<usize> = (0..self.counts.len())
            .into_par_iter()
            .map(|b| -> Result<usize> {
                let mut keys = self.bucket(b)?;
                retain_unmarked(&mut keys, drop, starts[b]);
                if keys.len() != self.counts[b] {
                    self.set_bucket(b, &keys)?;
                }
                Ok(keys.len())
            })
            .collect::<Result<_>>()?;
        self.counts = counts;
        Ok(())
    }
}

/// Bytes a store of this shape takes on disk, and the most the writing needs at once (the
/// bucket files beside the store's arrays).
fn disk_bytes(p: &CitationLike, dtype: FeatureDtype, n_split: usize) -> (u64, u64) {
    let (n, e, d) = (
        p.n_nodes as u64,
        p.target_edges() as u64,
        p.n_features as u64,
    );
    let width = match dtype {
        FeatureDtype::F32 => 4,
        FeatureDtype::F16 => 2,
    };
    let graph = 8 * (n + 1) + 8 * e + 4 * n;
    let store = graph + n * d * width + 4 * n + 4 * n_split as u64;
    // The edges twice (sorted, and transposed) beside the CSR being written; the features
    // come after the buckets are gone.
    let peak = (16 * e + graph).max(store);
    (store, peak)
}

impl CitationLike {
    /// Writes the dataset [`CitationLike::generate`] gives for `seed` (named `name`) as a store
    /// in `out` (a new or empty folder), out of core: the same arrays, bit for bit, as
    /// `write_store(&self.generate(seed)?, None, out, dtype)` (tests/suite/synthetic_disk.rs),
    /// with memory for the node tables and a few buckets of ~128 MiB rather than the graph.
    /// `progress` is told each step.
    ///
    /// # Errors
    /// [`CitationLike::check`]'s; [`Error::Dataset`] for bag-of-words features (dense only) or
    /// an `out` that is taken; [`Error::TooLarge`] when the node tables do not fit in memory;
    /// [`Error::DiskSpace`] when the store and its scratch files do not fit on the disk;
    /// [`Error::Mismatch`] if the edge target cannot be reached; [`Error::Io`].
    ///
    /// # Complexity
    /// O(n + E·rounds + n·d) time; memory about 36 bytes per node plus a few buckets; disk
    /// about 16 bytes per edge of scratch beside the store.
    pub fn write_store(
        &self,
        seed: u64,
        name: &str,
        out: &Path,
        dtype: FeatureDtype,
        progress: &(dyn Fn(String) + Sync),
    ) -> Result<StoreSummary> {
        self.write_store_in(seed, name, out, dtype, progress, BUCKET_KEYS)
    }

    /// [`CitationLike::write_store`] with buckets of about `bucket_keys` keys.
    fn write_store_in(
        &self,
        seed: u64,
        name: &str,
        out: &Path,
        dtype: FeatureDtype,
        progress: &(dyn Fn(String) + Sync),
        bucket_keys: usize,
    ) -> Result<StoreSummary> {
        self.check()?;
        let Some(rows) = DenseRows::new(self, seed) else {
            return Err(Error::Dataset {
                path: out.to_path_buf(),
                msg: "the out-of-core generator writes dense features; bag-of-words presets \
                      are generated in memory"
                    .into(),
            });
        };
        let (n, f) = (self.n_nodes, self.n_features);
        let target = self.target_edges();
        // θ, the permutation, topics, two alias tables, labels; per thread a bucket being
        // sorted and merged (fresh keys, their sort's scratch, the old keys, the merge: the
        // first bucket about twice the mean, the smaller id being skewed low); a chunk of
        // candidates scattered; the trim's bitset; a block of features.
        let threads = rayon::current_num_threads().max(1) as u64;
        let mem = 36 * n as u64
            + threads * 2 * (bucket_keys.min(target.max(1)) as u64 * 8 * 5)
            + 2 * (CHUNK_BLOCKS * EDGE_BLOCK * 8) as u64
            + (target as u64).div_ceil(8)
            + (FEATURE_ROWS * f * 6) as u64;
        crate::data::memory::check(mem, || {
            format!("generating {n} nodes and {target} edges out of core")
        })?;
        let n_split = match self.split {
            super::SplitKind::Random { .. } => n,
            super::SplitKind::Sizes { train, valid, test } => {
                train.saturating_add(valid).saturating_add(test).min(n)
            }
            super::SplitKind::Planetoid => {
                self.train_per_class * self.n_classes + self.n_valid + self.n_test
            }
        };
        let (store_bytes, peak) = disk_bytes(self, dtype, n_split);
        let parent = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        crate::data::disk::check(&parent, peak, || {
            format!(
                "a store of {n} nodes, {target} edges and {f} features ({store_bytes} bytes) \
                 with its scratch files"
            )
        })?;
        let mut w = StoreWriter::begin(out)?;
        let scratch = w.dir().join("scratch");
        fs::create_dir(&scratch).map_err(|e| Error::io(&scratch, e))?;
        progress("nodes: classes, topics, degree propensities".into());
        let nodes = Nodes::new(self, seed);
        let labels = nodes.labels();
        let bits = (usize::BITS - n.saturating_sub(1).leading_zeros()).max(1);
        let log_buckets = (target.div_ceil(bucket_keys.max(1)).max(1))
            .next_power_of_two()
            .trailing_zeros()
            .min(bits);
        let nnz = {
            let sampler = EdgeSampler::new(&nodes, self, seed, bits);
            let mut new_set = |cross: bool| -> Result<DiskKeys> {
                let tag = if cross { "inter" } else { "intra" };
                progress(format!("edges: {tag}-class rounds"));
                let mut k = DiskKeys::new(&scratch, tag, bits, log_buckets);
                k.clear()?;
                Ok(k)
            };
            let (intra, inter) = self.edge_sets(&sampler, seed, &mut new_set)?;
            drop(sampler);
            progress("edges: the CSR".into());
            write_graph(&mut w, intra, inter, n)?
        };
        drop(nodes);
        if nnz != 2 * target as u64 {
            return Err(Error::Mismatch {
                what: "CitationLike: stored adjacency entries (twice the edges)".into(),
                expected: 2 * target,
                got: nnz as usize,
            });
        }
        progress(format!("features: {n} × {f}"));
        let fdtype = match dtype {
            FeatureDtype::F32 => Dtype::F32,
            FeatureDtype::F16 => Dtype::F16,
        };
        let mut fa = w.open("features", fdtype)?;
        let mut buf = vec![0f32; FEATURE_ROWS * f];
        let mut half = Vec::new();
        let mut r0 = 0;
        while r0 < n {
            let r1 = (r0 + FEATURE_ROWS).min(n);
            let out = &mut buf[..(r1 - r0) * f];
            rows.fill(seed, r0, &labels[r0..r1], out);
            match dtype {
                FeatureDtype::F32 => fa.put(out)?,
                FeatureDtype::F16 => {
                    half.clear();
                    half.par_extend(out.par_iter().map(|&v| half::f16::from_f32(v).to_bits()));
                    fa.put(&half)?;
                }
            }
            r0 = r1;
        }
        w.close(fa)?;
        progress("labels and split".into());
        let split = self.draw_split(&labels, seed)?;
        for (array, values) in [
            ("labels", &labels[..]),
            ("train", split.train.indices()),
            ("valid", split.valid.indices()),
            ("test", split.test.indices()),
        ] {
            let mut a = w.open(array, Dtype::U32)?;
            a.put(values)?;
            w.close(a)?;
        }
        fs::remove_dir(&scratch).map_err(|e| Error::io(&scratch, e))?;
        w.commit(Header {
            format: FORMAT.into(),
            version: VERSION,
            name: name.to_string(),
            n_nodes: n as u64,
            directed: false,
            input_edges: target as u64,
            duplicates_merged: 0,
            self_loops: 0,
            n_features: f as u64,
            sparse_features: false,
            n_classes: self.n_classes as u64,
            split: split.name,
            order: None,
            arrays: Default::default(),
            header_crc32: 0,
        })
    }
}

/// The CSR of the undirected graph whose edges are `intra` ∪ `inter` (disjoint sets of packed
/// keys u < v): `indptr`, `indices` and `degree` into `w`, bucket by bucket. Returns the
/// entries stored.
fn write_graph(w: &mut StoreWriter, intra: DiskKeys, inter: DiskKeys, n: usize) -> Result<u64> {
    let (bits, shift) = (intra.bits, intra.shift);
    let nb = intra.counts.len();
    let mask = (1u64 << bits) - 1;
    // The edges both ways: each bucket's keys as they are ("direct"), and (v, u) to v's bucket.
    let mut direct = DiskKeys::new(&intra.dir, "direct", bits, nb.trailing_zeros());
    for b in 0..nb {
        let mut keys = intra.bucket(b)?;
        merge_unique(&mut keys, inter.bucket(b)?);
        let t: Vec<u64> = keys
            .iter()
            .map(|&k| ((k & mask) << bits) | (k >> bits))
            .collect();
        direct.scatter(&t, shift, "fresh")?;
        direct.set_bucket(b, &keys)?;
        direct.counts[b] = keys.len();
        for s in [&intra, &inter] {
            remove(&s.path(b, "keys"))?;
        }
    }
    let (mut ip, mut ix, mut dg) = (
        w.open("indptr", Dtype::U64)?,
        w.open("indices", Dtype::U32)?,
        w.open("degree", Dtype::U32)?,
    );
    ip.put(&[0u64])?;
    let rows_per = 1usize << (shift - bits);
    let mut at = 0u64;
    for b in 0..nb {
        let up = direct.bucket(b)?;
        let tp = direct.path(b, "fresh");
        let mut low = if tp.exists() {
            read_keys(&tp)?
        } else {
            Vec::new()
        };
        radix_sort(&mut low, 2 * bits);
        let (r0, r1) = ((b * rows_per).min(n), ((b + 1) * rows_per).min(n));
        let mut offsets = Vec::with_capacity(r1 - r0);
        let mut degree = Vec::with_capacity(r1 - r0);
        let mut cols = Vec::with_capacity(up.len() + low.len());
        let (mut i, mut j) = (0, 0);
        for r in r0..r1 {
            let r = r as u64;
            let start = cols.len();
            while j < low.len() && low[j] >> bits == r {
                cols.push((low[j] & mask) as u32);
                j += 1;
            }
            while i < up.len() && up[i] >> bits == r {
                cols.push((up[i] & mask) as u32);
                i += 1;
            }
            degree.push((cols.len() - start) as u32);
            offsets.push(at + cols.len() as u64);
        }
        if i != up.len() || j != low.len() {
            return Err(Error::Mismatch {
                what: format!("CitationLike: bucket {b}'s keys assembled into rows"),
                expected: up.len() + low.len(),
                got: i + j,
            });
        }
        at += cols.len() as u64;
        ip.put(&offsets)?;
        ix.put(&cols)?;
        dg.put(&degree)?;
        remove(&direct.path(b, "keys"))?;
        remove(&tp)?;
    }
    w.close(ip)?;
    w.close(ix)?;
    w.close(dg)?;
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::store::write_store;
    use crate::data::synthetic::{FeatureKind, Preset, SplitKind};

    fn scratch(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("sparse-gcn-gendisk-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    /// Every file of two stores, byte for byte.
    fn same_files(a: &Path, b: &Path) {
        let mut names: Vec<_> = fs::read_dir(a)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        let mut other: Vec<_> = fs::read_dir(b)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        other.sort();
        assert_eq!(names, other);
        for f in names {
            assert!(
                fs::read(a.join(&f)).unwrap() == fs::read(b.join(&f)).unwrap(),
                "{f:?}"
            );
        }
    }

    #[test]
    fn the_out_of_core_store_is_the_in_memory_one() {
        let dir = scratch("same");
        let small = CitationLike {
            n_nodes: 3000,
            n_classes: 5,
            n_edges: Some(20_000),
            n_features: 12,
            features: FeatureKind::Dense {
                center_distance: 2.0,
                cluster_variance: 1.0,
            },
            split: SplitKind::Random {
                train: 0.5,
                valid: 0.2,
            },
            ..Default::default()
        };
        let mut arxiv = Preset::ArxivLike.params();
        arxiv.n_nodes = 20_000;
        arxiv.n_edges = Some(120_000);
        // A graph close to its most edges (many rounds, a trim), one class (no inter-class
        // edges), and the Planetoid split.
        let dense = CitationLike {
            n_nodes: 200,
            n_edges: Some(15_000),
            n_classes: 1,
            split: SplitKind::Planetoid,
            train_per_class: 20,
            n_valid: 50,
            n_test: 80,
            ..small.clone()
        };
        // OGB's kind of split: given sizes, most nodes in no set.
        let sized = CitationLike {
            split: SplitKind::Sizes {
                train: 40,
                valid: 30,
                test: 20,
            },
            ..small.clone()
        };
        // Nodes numbered topic by topic.
        let topics = CitationLike {
            ids: super::super::NodeIds::Topics,
            ..arxiv.clone()
        };
        for (k, p) in [small, arxiv, dense, sized, topics].into_iter().enumerate() {
            for (bucket_keys, dtype) in [(usize::MAX, FeatureDtype::F32), (512, FeatureDtype::F16)]
            {
                let (a, b) = (
                    dir.join(format!("mem{k}{bucket_keys}")),
                    dir.join(format!("disk{k}{bucket_keys}")),
                );
                let mut d = p.generate(7).unwrap();
                d.name = "x".into();
                write_store(&d, None, &a, dtype).unwrap();
                p.write_store_in(7, "x", &b, dtype, &|_| {}, bucket_keys)
                    .unwrap();
                same_files(&a, &b);
            }
        }
        // Bag-of-words features are refused, naming the output; nothing is left behind.
        let out = dir.join("words");
        let e = Preset::CoraLike
            .params()
            .write_store(0, "x", &out, FeatureDtype::F32, &|_| {});
        assert!(matches!(e, Err(Error::Dataset { .. })), "{e:?}");
        assert!(!out.exists());
        let _ = fs::remove_dir_all(&dir);
    }
}
