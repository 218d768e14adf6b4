//! [`Dataset`]: a graph with features, labels and a split.

use super::{Features, Split};
use crate::graph::Graph;
use crate::{Error, Result};

/// A node-classification dataset.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// Name (the folder name for loaded datasets).
    pub name: String,
    /// The raw adjacency.
    pub graph: Graph,
    /// Node features (n_nodes rows).
    pub features: Features<f32>,
    /// One class id per node.
    pub labels: Vec<u32>,
    /// Number of classes (max label + 1 unless declared).
    pub n_classes: usize,
    /// The split used for training and evaluation.
    pub split: Split,
}

impl Dataset {
    /// Assembles a dataset and [validates](Dataset::validate) it.
    ///
    /// # Errors
    /// The first inconsistency [`Dataset::validate`] finds.
    pub fn try_new(
        name: String,
        graph: Graph,
        features: Features<f32>,
        labels: Vec<u32>,
        n_classes: usize,
        split: Split,
    ) -> Result<Self> {
        let dataset = Dataset {
            name,
            graph,
            features,
            labels,
            n_classes,
            split,
        };
        dataset.validate()?;
        Ok(dataset)
    }

    /// Checks that every part agrees with the graph: feature and label rows, finite features,
    /// labels in range, a non-empty, non-overlapping split.
    ///
    /// # Errors
    /// The first [`Error`] found.
    pub fn validate(&self) -> Result<()> {
        let n = self.graph.n_nodes();
        if self.features.n_rows() != n {
            return Err(Error::Mismatch {
                what: "feature rows vs nodes".into(),
                expected: n,
                got: self.features.n_rows(),
            });
        }
        if self.labels.len() != n {
            return Err(Error::Mismatch {
                what: "labels vs nodes".into(),
                expected: n,
                got: self.labels.len(),
            });
        }
        if let Some((node, &l)) = self
            .labels
            .iter()
            .enumerate()
            .find(|(_, &l)| l as usize >= self.n_classes)
        {
            return Err(Error::LabelOutOfRange {
                node,
                label: l as i64,
                n_classes: self.n_classes,
            });
        }
        self.features.check_finite("features")?;
        for m in [&self.split.train, &self.split.valid, &self.split.test] {
            if m.n_nodes() != n {
                return Err(Error::Mismatch {
                    what: "split mask size vs nodes".into(),
                    expected: n,
                    got: m.n_nodes(),
                });
            }
        }
        self.split.check()
    }
}
