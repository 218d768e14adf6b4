//! Node features for graphs that have none (PyG's `OneHotDegree` and `Constant` habits): the
//! one-hot node id, the one-hot degree, a constant, or seeded random values.

use std::fmt;
use std::str::FromStr;

use ndarray::Array2;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::io::identity_features;
use super::{Features, SparseFeatures};
use crate::graph::Graph;
use crate::kernels::Csr;
use crate::{ConfigError, Result};

/// Widest one-hot degree: degrees of [`MAX_DEGREE`] and more share the last column.
pub(crate) const MAX_DEGREE: usize = 63;

/// Features built from the graph alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeFeatures {
    /// The one-hot node id: the n × n identity, sparse (transductive only).
    Identity,
    /// The one-hot degree (self-loops excluded), `min(degree, 63)`: 64 columns, sparse.
    Degree,
    /// One column of ones (PyG's `Constant`).
    Constant,
    /// `dim` columns uniform in [-1, 1), seeded by the data seed.
    Random {
        /// Width.
        dim: usize,
    },
}

impl NodeFeatures {
    /// The features of `graph`'s nodes (`seed` draws the random ones).
    ///
    /// # Errors
    /// [`crate::Error::TooLarge`] when they would not fit in the memory available
    /// ([`super::memory`]); [`crate::Error::Dataset`] if the identity does not fit (more than
    /// `u32::MAX` nodes).
    pub fn build(self, graph: &Graph, seed: u64) -> Result<Features<f32>> {
        let n = graph.n_nodes();
        let bytes = match self {
            NodeFeatures::Random { dim } => super::memory::bytes(n, 4).saturating_mul(dim as u64),
            // Row pointers, a column index and a value a node (and the transpose's).
            NodeFeatures::Identity | NodeFeatures::Degree => super::memory::bytes(n, 32),
            NodeFeatures::Constant => super::memory::bytes(n, 4),
        };
        super::memory::check(bytes, || {
            format!("--features {self} on {n} nodes (features built from the graph)")
        })?;
        Ok(match self {
            NodeFeatures::Identity => identity_features(n)?,
            NodeFeatures::Degree => {
                let indices: Vec<u32> = (0..n)
                    .map(|i| graph.degree_excluding_self(i).min(MAX_DEGREE) as u32)
                    .collect();
                let x = Csr::new(
                    (n, MAX_DEGREE + 1),
                    (0..=n).collect(),
                    indices,
                    vec![1.0; n],
                );
                Features::sparse(SparseFeatures::new(x))
            }
            NodeFeatures::Constant => Features::dense(Array2::ones((n, 1))),
            NodeFeatures::Random { dim } => {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                Features::dense(Array2::from_shape_simple_fn((n, dim), || {
                    rng.random_range(-1.0f32..1.0)
                }))
            }
        })
    }
}

impl fmt::Display for NodeFeatures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeFeatures::Identity => f.write_str("identity"),
            NodeFeatures::Degree => f.write_str("degree"),
            NodeFeatures::Constant => f.write_str("constant"),
            NodeFeatures::Random { dim } => write!(f, "random:{dim}"),
        }
    }
}

impl FromStr for NodeFeatures {
    type Err = ConfigError;

    /// `identity`, `degree`, `constant` or `random:D` (1 ≤ D ≤ 2^24).
    ///
    /// # Errors
    /// [`ConfigError::UnknownName`] naming the choices.
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        if let Some(d) = s.strip_prefix("random:") {
            return match d.parse::<usize>() {
                Ok(dim) if (1..=super::io::MAX_FEATURE_COLS).contains(&dim) => {
                    Ok(NodeFeatures::Random { dim })
                }
                _ => Err(ConfigError::OutOfRange {
                    name: "random:D",
                    value: d.parse::<f64>().unwrap_or(f64::NAN),
                    rule: "a width D from 1 to 2^24 (16777216, the most feature columns)",
                }),
            };
        }
        crate::error::parse_name(
            "node features",
            s,
            &[
                ("identity", NodeFeatures::Identity),
                ("degree", NodeFeatures::Degree),
                ("constant", NodeFeatures::Constant),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Direction;

    #[test]
    fn each_kind_on_a_path_with_a_self_loop() {
        // 0 - 1 - 2, and 2 - 2.
        let g = Graph::try_from_edges(3, &[(0, 1), (1, 2), (2, 2)], Direction::Undirected).unwrap();
        let dense = |k: NodeFeatures| k.build(&g, 7).unwrap().to_dense();
        let id = dense(NodeFeatures::Identity);
        assert_eq!(id, Array2::<f32>::eye(3));
        let deg = dense(NodeFeatures::Degree);
        assert_eq!(deg.dim(), (3, MAX_DEGREE + 1));
        for (i, d) in [1usize, 2, 1].into_iter().enumerate() {
            assert_eq!(deg[[i, d]], 1.0);
            assert_eq!(deg.row(i).sum(), 1.0);
        }
        assert_eq!(dense(NodeFeatures::Constant), Array2::<f32>::ones((3, 1)));
        let r = dense(NodeFeatures::Random { dim: 4 });
        assert_eq!(r.dim(), (3, 4));
        assert!(r.iter().all(|v| (-1.0..1.0).contains(v)));
        assert_eq!(r, dense(NodeFeatures::Random { dim: 4 }), "seeded");
        assert_ne!(
            r,
            NodeFeatures::Random { dim: 4 }
                .build(&g, 8)
                .unwrap()
                .to_dense()
        );
    }

    #[test]
    fn names_round_trip() {
        for k in [
            NodeFeatures::Identity,
            NodeFeatures::Degree,
            NodeFeatures::Constant,
            NodeFeatures::Random { dim: 32 },
        ] {
            assert_eq!(k.to_string().parse::<NodeFeatures>(), Ok(k));
        }
        assert!("random:0".parse::<NodeFeatures>().is_err());
        assert!("random:100000000".parse::<NodeFeatures>().is_err());
        assert!("random:16777216".parse::<NodeFeatures>().is_ok());
        assert!("random:x".parse::<NodeFeatures>().is_err());
        assert!("degrees".parse::<NodeFeatures>().is_err());
    }
}
