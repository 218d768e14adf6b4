//! The node features of the generator: sparse binary bag-of-words (each class owns a random
//! slice of the vocabulary; a word comes from it with probability `feature_signal`, else
//! uniformly) or dense class centroids (random directions of length `center_distance`) plus
//! Gaussian noise, drawn in parallel fixed-size row blocks of their own RNG streams.

use ndarray::Array2;
use rand::{Rng, RngExt};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::{rng_for, CitationLike, ROW_BLOCK, STREAM_FEATURE_SETUP, STREAM_ROWS};
use crate::data::features::SparseFeatures;
use crate::data::Features;
use crate::graph::normalize::NewTrusted;
use crate::kernels::Csr;
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

impl CitationLike {
    /// Sparse binary bag-of-words: each class owns a random slice of the vocabulary.
    pub(super) fn bag_of_words(&self, labels: &[u32], seed: u64) -> Features<f32> {
        let n = labels.len();
        let f = self.n_features;
        let mut rng = rng_for(seed, STREAM_FEATURE_SETUP);
        let mut vocab: Vec<u32> = (0..f as u32).collect();
        for i in (1..f).rev() {
            vocab.swap(i, rng.random_range(0..=i));
        }
        let topic = (f / self.n_classes).max(1);
        let words = self.words_per_node;
        let signal = self.feature_signal;
        let blocks: Vec<(Vec<usize>, Vec<u32>)> = labels
            .par_chunks(ROW_BLOCK)
            .enumerate()
            .map(|(b, rows)| {
                let mut rng = rng_for(seed, STREAM_ROWS | b as u64);
                let mut lens = Vec::with_capacity(rows.len());
                let mut indices = Vec::with_capacity(rows.len() * words);
                let mut row = Vec::with_capacity(words);
                for &l in rows {
                    row.clear();
                    let base = (l as usize * topic) % f;
                    for _ in 0..words {
                        let w = if rng.random::<f64>() < signal {
                            vocab[(base + rng.random_range(0..topic)) % f]
                        } else {
                            rng.random_range(0..f as u32)
                        };
                        row.push(w);
                    }
                    row.sort_unstable();
                    row.dedup();
                    indices.extend_from_slice(&row);
                    lens.push(row.len());
                }
                (lens, indices)
            })
            .collect();
        let nnz = blocks.iter().map(|(_, ix)| ix.len()).sum();
        let mut indptr = Vec::with_capacity(n + 1);
        indptr.push(0usize);
        let mut indices: Vec<u32> = Vec::with_capacity(nnz);
        for (lens, ix) in blocks {
            for l in lens {
                indptr.push(indptr[indptr.len() - 1] + l);
            }
            indices.extend_from_slice(&ix);
        }
        let data = vec![1.0f32; indices.len()];
        let x = Csr::new_trusted_pub((n, f), indptr, indices, data);
        Features::Sparse(SparseFeatures::new(x))
    }

    /// Dense features: class centroid (a random direction of length `dist`) plus Gaussian
    /// noise of variance `var`.
    pub(super) fn dense(
        &self,
        labels: &[u32],
        dist: f64,
        var: f64,
        seed: u64,
    ) -> Result<Features<f32>> {
        let n = labels.len();
        let f = self.n_features;
        let mut rng = rng_for(seed, STREAM_FEATURE_SETUP);
        let mut centroids = vec![0.0f64; self.n_classes * f];
        for c in centroids.chunks_mut(f) {
            let mut norm2 = 0.0;
            for k in 0..f {
                let (z, _) = gaussian_pair(&mut rng);
                c[k] = z;
                norm2 += z * z;
            }
            let scale = if norm2 > 0.0 {
                dist / norm2.sqrt()
            } else {
                0.0
            };
            c.iter_mut().for_each(|v| *v *= scale);
        }
        let sd = var.sqrt();
        let mut data = vec![0.0f32; n * f];
        data.par_chunks_mut(ROW_BLOCK * f)
            .enumerate()
            .for_each(|(b, block)| {
                let mut rng = rng_for(seed, STREAM_ROWS | b as u64);
                let first = b * ROW_BLOCK;
                for (r, row) in block.chunks_mut(f).enumerate() {
                    let l = labels[first + r] as usize;
                    let centre = &centroids[l * f..(l + 1) * f];
                    let mut k = 0;
                    while k < f {
                        let (z0, z1) = gaussian_pair(&mut rng);
                        row[k] = (centre[k] + sd * z0) as f32;
                        if k + 1 < f {
                            row[k + 1] = (centre[k + 1] + sd * z1) as f32;
                        }
                        k += 2;
                    }
                }
            });
        let x = Array2::from_shape_vec((n, f), data).map_err(|e| Error::Mismatch {
            what: format!("CitationLike: dense feature matrix ({e})"),
            expected: n * f,
            got: n * f,
        })?;
        Ok(Features::Dense(x))
    }
}
