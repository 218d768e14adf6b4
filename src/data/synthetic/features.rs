//! The node features of the generator: sparse binary bag-of-words (each class owns a random
//! slice of the vocabulary; a word comes from it with probability `feature_signal`, else
//! uniformly) or dense class centroids (random directions of length `center_distance`) plus
//! Gaussian noise, drawn in parallel fixed-size row blocks of their own RNG streams.

use ndarray::Array2;
use rand::{Rng, RngExt};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::{rng_for, CitationLike, FeatureKind, ROW_BLOCK, STREAM_FEATURE_SETUP, STREAM_ROWS};
use crate::data::features::SparseFeatures;
use crate::data::Features;
use crate::kernels::Csr;
use crate::kernels::NewTrusted;
use crate::{Error, Result};

/// uniforms come from the halves of one 64-bit word.
#[inline]
fn gaussian_pair(rng: &mut ChaCha8Rng) -> (f64, f64) {
    const SCALE: f64 = 1.0 / (1u64 << 31) as f64;
    loop {
        let x = rng.next_u64();
        let a = (x >> 32) as f64 * SCALE - 1.0;
        let b = (x as u32) as f64 * SCALE - 1.0;
        let s = a * a + b * b;
        if s < 1.0 && s > 0.0 {
            let m = (-2.0 * s.ln() / s).sqrt();
            return (a * m, b * m);
        }
    }
}

/// How to draw feature rows: the per-dataset setup (a vocabulary permutation or the class
/// centroids, from `STREAM_FEATURE_SETUP`), then each 1,024-row block from its own stream, so
/// that any block can be drawn alone and gives the same rows as when all are drawn.
enum RowDraw {
    /// Sparse binary bag-of-words: class c's topic is `vocab[c·topic % f ..][..topic]`.
    Words {
        vocab: Vec<u32>,
        topic: usize,
        words: usize,
        signal: f64,
    },
    /// Dense: class centroid plus Gaussian noise of standard deviation `sd`.
    Dense { centroids: Vec<f64>, sd: f64 },
}

impl RowDraw {
    fn new(p: &CitationLike, seed: u64) -> RowDraw {
        let f = p.n_features;
        let mut rng = rng_for(seed, STREAM_FEATURE_SETUP);
        match p.features {
            FeatureKind::BagOfWords => {
                let mut vocab: Vec<u32> = (0..f as u32).collect();
                for i in (1..f).rev() {
                    vocab.swap(i, rng.random_range(0..=i));
                }
                RowDraw::Words {
                    vocab,
                    topic: (f / p.n_classes).max(1),
                    words: p.words_per_node,
                    signal: p.feature_signal,
                }
            }
            FeatureKind::Dense {
                center_distance,
                cluster_variance,
            } => {
                let mut centroids = vec![0.0f64; p.n_classes * f];
                for c in centroids.chunks_mut(f) {
                    let mut norm2 = 0.0;
                    for k in 0..f {
                        let (z, _) = gaussian_pair(&mut rng);
                        c[k] = z;
                        norm2 += z * z;
                    }
                    let scale = if norm2 > 0.0 {
                        center_distance / norm2.sqrt()
                    } else {
                        0.0
                    };
                    c.iter_mut().for_each(|v| *v *= scale);
                }
                RowDraw::Dense {
                    centroids,
                    sd: cluster_variance.sqrt(),
                }
            }
        }
    }

    /// Draws the rows of block `b` (labels `labels`, its nodes in order) and hands each to
    /// `emit` with its index in the block: a bag-of-words row as its sorted distinct word ids,
    /// a dense row as its `f` values (in `dense`, `f` wide).
    fn block(
        &self,
        seed: u64,
        b: usize,
        labels: &[u32],
        f: usize,
        mut emit: impl FnMut(usize, Row<'_>),
    ) {
        let mut rng = rng_for(seed, STREAM_ROWS | b as u64);
        match self {
            RowDraw::Words {
                vocab,
                topic,
                words,
                signal,
            } => {
                let mut row = Vec::with_capacity(*words);
                for (r, &l) in labels.iter().enumerate() {
                    row.clear();
                    let base = (l as usize * topic) % f;
                    for _ in 0..*words {
                        let w = if rng.random::<f64>() < *signal {
                            vocab[(base + rng.random_range(0..*topic)) % f]
                        } else {
                            rng.random_range(0..f as u32)
                        };
                        row.push(w);
                    }
                    row.sort_unstable();
                    row.dedup();
                    emit(r, Row::Words(&row));
                }
            }
            RowDraw::Dense { centroids, sd } => {
                let mut row = vec![0.0f32; f];
                for (r, &l) in labels.iter().enumerate() {
                    let centre = &centroids[l as usize * f..(l as usize + 1) * f];
                    let mut k = 0;
                    while k < f {
                        let (z0, z1) = gaussian_pair(&mut rng);
                        row[k] = (centre[k] + sd * z0) as f32;
                        if k + 1 < f {
                            row[k + 1] = (centre[k + 1] + sd * z1) as f32;
                        }
                        k += 2;
                    }
                    emit(r, Row::Dense(&row));
                }
            }
        }
    }
}

/// The dense feature rows of the generator drawn block by block, for a writer that streams
/// them out (the out-of-core generator): the rows of [`CitationLike::generate`], bit for bit.
pub(super) struct DenseRows {
    draw: RowDraw,
    f: usize,
}

impl DenseRows {
    /// `None` for bag-of-words features.
    pub(super) fn new(p: &CitationLike, seed: u64) -> Option<DenseRows> {
        match p.features {
            FeatureKind::Dense { .. } => Some(DenseRows {
                draw: RowDraw::new(p, seed),
                f: p.n_features,
            }),
            FeatureKind::BagOfWords => None,
        }
    }

    /// The rows of the nodes `first..first + labels.len()` (`first` a multiple of the block
    /// size; `labels` theirs), row-major into `out`, blocks drawn in parallel.
    pub(super) fn fill(&self, seed: u64, first: usize, labels: &[u32], out: &mut [f32]) {
        let f = self.f;
        out.par_chunks_mut(ROW_BLOCK * f)
            .zip(labels.par_chunks(ROW_BLOCK))
            .enumerate()
            .for_each(|(k, (out, block))| {
                self.draw
                    .block(seed, first / ROW_BLOCK + k, block, f, |r, row| {
                        if let Row::Dense(v) = row {
                            out[r * f..(r + 1) * f].copy_from_slice(v);
                        }
                    });
            });
    }
}

/// One drawn feature row.
#[derive(Clone, Copy)]
enum Row<'a> {
    Words(&'a [u32]),
    Dense(&'a [f32]),
}

/// Rows drawn for some nodes, in the order asked: word ids and row lengths, or dense values.
#[derive(Default)]
struct Drawn {
    lens: Vec<usize>,
    words: Vec<u32>,
    dense: Vec<f32>,
}

impl Drawn {
    fn push(&mut self, row: Row<'_>) {
        match row {
            Row::Words(w) => {
                self.lens.push(w.len());
                self.words.extend_from_slice(w);
            }
            Row::Dense(v) => self.dense.extend_from_slice(v),
        }
    }

    fn append(&mut self, other: Drawn) {
        self.lens.extend(other.lens);
        self.words.extend(other.words);
        self.dense.extend(other.dense);
    }
}

impl CitationLike {
    /// The features of the nodes `rows` (ids of the generated graph, any order, repeats
    /// allowed): row k is node `rows[k]`'s row of [`CitationLike::generate`]'s features, bit
    /// for bit. `labels` are the generated labels (all nodes). Only the 1,024-row blocks
    /// holding the nodes asked for are drawn, so a rank draws its rows of X without X.
    ///
    /// # Errors
    /// [`Error::Mismatch`] for a node id outside the labels.
    ///
    /// # Complexity
    /// O(blocks touched × 1,024 × in_dim) time; memory for the rows asked plus one block per
    /// thread.
    pub fn features_of(&self, labels: &[u32], seed: u64, rows: &[u32]) -> Result<Features<f32>> {
        let n = labels.len();
        if let Some(&bad) = rows.iter().find(|&&r| r as usize >= n) {
            return Err(Error::Mismatch {
                what: "CitationLike::features_of: a node id beyond the graph".into(),
                expected: n,
                got: bad as usize,
            });
        }
        let draw = RowDraw::new(self, seed);
        let f = self.n_features;
        // The rows asked for, by block: (node, position in the output).
        let mut asked: Vec<(u32, usize)> = rows.iter().copied().zip(0..).collect();
        asked.sort_unstable();
        let mut groups: Vec<&[(u32, usize)]> = Vec::new();
        let mut rest = &asked[..];
        while let Some(&(first, _)) = rest.first() {
            let b = first as usize / ROW_BLOCK;
            let len = rest.partition_point(|&(r, _)| (r as usize) / ROW_BLOCK == b);
            groups.push(&rest[..len]);
            rest = &rest[len..];
        }
        // Each block drawn once; its rows kept in the sorted order of `asked`.
        let drawn: Vec<Drawn> = groups
            .par_iter()
            .map(|group| {
                let b = group[0].0 as usize / ROW_BLOCK;
                let first = b * ROW_BLOCK;
                let block_labels = &labels[first..(first + ROW_BLOCK).min(n)];
                let mut out = Drawn::default();
                let mut next = 0;
                draw.block(seed, b, block_labels, f, |r, row| {
                    while next < group.len() && group[next].0 as usize == first + r {
                        out.push(row);
                        next += 1;
                    }
                });
                out
            })
            .collect();
        let mut sorted = Drawn::default();
        for d in drawn {
            sorted.append(d);
        }
        // Back to the order asked: output row asked[k].1 is sorted row k.
        let m = rows.len();
        let mut at = vec![0usize; m];
        for (k, &(_, pos)) in asked.iter().enumerate() {
            at[pos] = k;
        }
        Ok(match draw {
            RowDraw::Words { .. } => {
                let mut start = Vec::with_capacity(m + 1);
                start.push(0usize);
                for &l in &sorted.lens {
                    start.push(start[start.len() - 1] + l);
                }
                let mut indptr = Vec::with_capacity(m + 1);
                indptr.push(0usize);
                let mut indices = Vec::with_capacity(sorted.words.len());
                for &k in &at {
                    indices.extend_from_slice(&sorted.words[start[k]..start[k + 1]]);
                    indptr.push(indices.len());
                }
                let data = vec![1.0f32; indices.len()];
                let x = Csr::new_trusted_pub((m, f), indptr, indices, data);
                Features::sparse(SparseFeatures::new(x))
            }
            RowDraw::Dense { .. } => {
                let mut data = Vec::with_capacity(m * f);
                for &k in &at {
                    data.extend_from_slice(&sorted.dense[k * f..(k + 1) * f]);
                }
                Features::dense(dense_matrix(m, f, data)?)
            }
        })
    }

    /// The features of every node (`labels`: the generated labels), blocks in parallel.
    pub(super) fn features(&self, labels: &[u32], seed: u64) -> Result<Features<f32>> {
        let n = labels.len();
        let f = self.n_features;
        let draw = RowDraw::new(self, seed);
        match draw {
            RowDraw::Words { .. } => {
                let blocks: Vec<Drawn> = labels
                    .par_chunks(ROW_BLOCK)
                    .enumerate()
                    .map(|(b, block)| {
                        let mut out = Drawn::default();
                        draw.block(seed, b, block, f, |_, row| out.push(row));
                        out
                    })
                    .collect();
                let nnz = blocks.iter().map(|d| d.words.len()).sum();
                let mut indptr = Vec::with_capacity(n + 1);
                indptr.push(0usize);
                let mut indices: Vec<u32> = Vec::with_capacity(nnz);
                for d in blocks {
                    for l in d.lens {
                        indptr.push(indptr[indptr.len() - 1] + l);
                    }
                    indices.extend_from_slice(&d.words);
                }
                let data = vec![1.0f32; indices.len()];
                let x = Csr::new_trusted_pub((n, f), indptr, indices, data);
                Ok(Features::sparse(SparseFeatures::new(x)))
            }
            RowDraw::Dense { .. } => {
                let mut data = vec![0.0f32; n * f];
                data.par_chunks_mut(ROW_BLOCK * f)
                    .zip(labels.par_chunks(ROW_BLOCK))
                    .enumerate()
                    .for_each(|(b, (out, block))| {
                        draw.block(seed, b, block, f, |r, row| {
                            if let Row::Dense(v) = row {
                                out[r * f..(r + 1) * f].copy_from_slice(v);
                            }
                        });
                    });
                Ok(Features::dense(dense_matrix(n, f, data)?))
            }
        }
    }
}

/// `data` as an `n × f` matrix.
fn dense_matrix(n: usize, f: usize, data: Vec<f32>) -> Result<Array2<f32>> {
    Array2::from_shape_vec((n, f), data).map_err(|e| Error::Mismatch {
        what: format!("CitationLike: dense feature matrix ({e})"),
        expected: n * f,
        got: n * f,
    })
}
