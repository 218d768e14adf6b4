//! [`Dataset`]: a graph with features, labels and a split.

use super::{Features, Split};
use crate::graph::Graph;
use crate::{Error, Result};

/// The label of a node without a class (read from OGB's `-1` or `NaN`).
pub const UNLABELLED: u32 = u32::MAX;

/// A node-classification dataset.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// Name (the folder name for loaded datasets).
    pub name: String,
    /// The raw adjacency.
    pub graph: Graph,
    /// Node features (n_nodes rows).
    pub features: Features<f32>,
    /// One class id per node, or [`UNLABELLED`] (OGB's -1 or NaN: a node outside every split
    /// part whose class is unknown).
    pub labels: Vec<u32>,
    /// Number of classes (max label + 1 unless declared).
    pub n_classes: usize,
    /// The split used for training and evaluation.
    pub split: Split,
}

impl Dataset {
    /// The bytes its graph, features and labels hold (what a copy of it allocates).
    pub fn size_bytes(&self) -> u64 {
        use crate::data::memory::bytes;
        let g = &self.graph;
        let x = &self.features;
        let features = if x.is_sparse() {
            bytes(x.nnz(), 8).saturating_add(bytes(x.n_rows() + 1, 8))
        } else {
            bytes(x.n_rows(), 4 * x.n_cols())
        };
        bytes(g.n_nodes() + 1, 8)
            .saturating_add(bytes(g.nnz(), 4))
            .saturating_add(features)
            .saturating_add(bytes(self.labels.len(), 4))
    }

    /// The dataset relabelled by `perm` (node `perm.new_to_old()[r]` becomes node `r`): its
    /// graph, features, labels and split, the features permuted in place.
    ///
    /// # Errors
    /// [`Error::Mismatch`] if `perm.len()` is not the node count; then [`Dataset::validate`]'s.
    pub fn relabel(self, perm: &crate::graph::Permutation) -> Result<Dataset> {
        let n = self.graph.n_nodes();
        if self.features.n_rows() != n {
            return Err(Error::Mismatch {
                what: "feature rows vs dataset nodes".into(),
                expected: n,
                got: self.features.n_rows(),
            });
        }
        // The graph, labels and split as a skeleton's; the features in place.
        let (s, mut features) = self.into_skeleton();
        let s = s.relabel(perm)?;
        features.permute_rows(perm.new_to_old());
        let d = s.with_features(features);
        d.validate()?;
        Ok(d)
    }

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
    /// labels in range (or [`UNLABELLED`]), a non-overlapping split; when any node is labelled,
    /// a split without an empty part whose nodes are all labelled.
    /// A structure-only dataset (no features, no labels, an empty split) is valid; training
    /// checks what it needs ([`crate::train::check_data`]).
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
            .find(|(_, &l)| l != UNLABELLED && l as usize >= self.n_classes)
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
        if self.labels.iter().any(|&l| l != UNLABELLED) {
            // A labelled dataset: a split with every part non-empty, and every split node
            // with its class. (A structure-only dataset may carry a split for a task whose
            // labels are not there, or none; training says what is missing.)
            self.split.check()?;
            check_split_labelled(&self.split, &self.labels)
        } else {
            self.split.check_disjoint()
        }
    }
}

impl Dataset {
    /// Checks what training and evaluation need beyond [`Dataset::validate`]: labels of at
    /// least two classes, node features, a train, validation and test part that are not
    /// empty, and a class for every split node. Each error says what is missing and how to
    /// give it. [`crate::train::check_data`] applies the same rules to any training data.
    ///
    /// # Errors
    /// [`Error::NotTrainable`], [`Error::EmptyMask`], or [`Error::Dataset`] naming a split node
    /// without a label.
    pub fn check_trainable(&self) -> Result<()> {
        check_trainable(
            &self.name,
            self.features.n_cols(),
            &self.labels,
            self.n_classes,
            &self.split,
        )
    }
}

/// A [`Dataset`] without its features: what every rank of a distributed run holds while it
/// prepares (the graph, the labels, the split), before it keeps only its rows of each.
#[derive(Debug, Clone)]
pub struct Skeleton {
    /// As [`Dataset::name`].
    pub name: String,
    /// As [`Dataset::graph`].
    pub graph: Graph,
    /// As [`Dataset::labels`].
    pub labels: Vec<u32>,
    /// As [`Dataset::n_classes`].
    pub n_classes: usize,
    /// As [`Dataset::split`].
    pub split: Split,
}

impl Skeleton {
    /// The skeleton relabelled: node `perm.new_to_old()[r]` becomes node `r` (as
    /// [`Dataset::relabel`]).
    ///
    /// # Errors
    /// [`Error::TooLarge`] when the relabelled graph does not fit beside the old one;
    /// [`Error::Mismatch`] for a permutation of another length.
    pub fn relabel(mut self, perm: &crate::graph::Permutation) -> Result<Skeleton> {
        use crate::graph::permutation::{permute_graph, permute_slice};
        let n = self.graph.n_nodes();
        let graph_bytes = crate::data::memory::bytes(n + 1, 8)
            .saturating_add(crate::data::memory::bytes(self.graph.nnz(), 4));
        crate::data::memory::check(graph_bytes, || {
            format!("relabelling the graph of {} ({n} nodes)", self.name)
        })?;
        if perm.len() != n {
            return Err(Error::Mismatch {
                what: "permutation length vs dataset nodes".into(),
                expected: n,
                got: perm.len(),
            });
        }
        self.graph = permute_graph(&self.graph, perm);
        self.labels = permute_slice(perm, &self.labels);
        self.split = self.split.permuted(perm);
        Ok(self)
    }

    /// The dataset with `features` (one row per node, not checked).
    pub(crate) fn with_features(self, features: Features<f32>) -> Dataset {
        Dataset {
            name: self.name,
            graph: self.graph,
            features,
            labels: self.labels,
            n_classes: self.n_classes,
            split: self.split,
        }
    }
}

impl Dataset {
    /// The dataset without its features, and the features.
    pub fn into_skeleton(self) -> (Skeleton, Features<f32>) {
        (
            Skeleton {
                name: self.name,
                graph: self.graph,
                labels: self.labels,
                n_classes: self.n_classes,
                split: self.split,
            },
            self.features,
        )
    }
}

/// The rules of [`Dataset::check_trainable`], on the parts of a dataset named `dataset`.
pub(crate) fn check_trainable(
    dataset: &str,
    n_features: usize,
    labels: &[u32],
    n_classes: usize,
    split: &Split,
) -> Result<()> {
    let not = |msg: String| {
        Err(Error::NotTrainable {
            dataset: dataset.to_string(),
            msg,
        })
    };
    if labels.iter().all(|&l| l == UNLABELLED) {
        return not(
            "the dataset has no labels: training needs a class per node (for an edge list or a \
             scipy .npz, give a label file with --labels FILE; an OGB folder needs \
             raw/node-label.csv.gz)"
                .into(),
        );
    }
    if n_classes < 2 {
        return not(format!(
            "the labels have {n_classes} class: a classifier needs at least 2 (check the label \
             file)"
        ));
    }
    if n_features == 0 {
        return not(
            "the dataset has no node features: give some with --features identity, degree, \
             constant or random:D (or a feature file for an edge list)"
                .into(),
        );
    }
    split.check()?;
    check_split_labelled(split, labels)
}

/// Every split node has a label: an [`Error::Dataset`] naming the first that has none.
pub(crate) fn check_split_labelled(split: &Split, labels: &[u32]) -> Result<()> {
    for (part, m) in [
        ("train", &split.train),
        ("valid", &split.valid),
        ("test", &split.test),
    ] {
        if let Some(&i) = m
            .indices()
            .iter()
            .find(|&&i| labels.get(i as usize) == Some(&UNLABELLED))
        {
            return Err(Error::Dataset {
                path: split.name.clone().into(),
                msg: format!(
                    "node {i} is in the {part} part of the split but has no label (-1 or NaN)"
                ),
            });
        }
    }
    Ok(())
}
