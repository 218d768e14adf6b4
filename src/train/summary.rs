//! [`Summary`]: what a preparation made of a dataset, for reports and checkpoints.

use std::collections::BTreeMap;

use super::run::Prepare;
use crate::graph::Norm;
use crate::order::Reorder;

/// What a preparation made of a dataset, whole ([`Prepared::summary`](super::run::Prepared::summary)) or one rank's part of
/// it (`dist::local::RankPrepared`): the figures a report prints and a checkpoint records.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The dataset's name.
    pub name: String,
    /// Nodes.
    pub n_nodes: usize,
    /// Edges (undirected edges counted once).
    pub n_edges: usize,
    /// Stored entries of the whole Â.
    pub nnz: usize,
    /// Feature columns.
    pub in_dim: usize,
    /// Whether the features are stored sparse.
    pub sparse_features: bool,
    /// Classes.
    pub n_classes: usize,
    /// The split's name.
    pub split_name: String,
    /// Training, validation and test nodes of the whole split.
    pub split_sizes: [usize; 3],
    /// Whether the features were row-normalised.
    pub row_normalized: bool,
    /// How it was prepared, `reorder` resolved.
    pub prepare: Prepare,
    /// The order asked for (`auto` before resolution).
    pub reorder_asked: Reorder,
    /// Seconds spent choosing and applying the node order.
    pub reorder_s: f64,
    /// Whether the graph is directed.
    pub directed: bool,
}

impl Summary {
    /// As [`Prepared::extra`](super::run::Prepared::extra).
    pub fn extra(&self) -> BTreeMap<String, String> {
        let mut extra = BTreeMap::from([
            ("dataset".to_string(), self.name.clone()),
            ("row_normalize".to_string(), self.row_normalized.to_string()),
            (
                "norm".to_string(),
                match self.prepare.norm {
                    Norm::Symmetric => "sym",
                    Norm::Row => "row",
                }
                .to_string(),
            ),
            ("directed".to_string(), self.directed.to_string()),
            // What was applied (`auto` resolved).
            ("reorder".to_string(), self.prepare.reorder.to_string()),
        ]);
        // (Recorded only when set: the metadata of checkpoints without it is unchanged.)
        if self.prepare.diag_lambda != 0.0 {
            extra.insert(
                "diag_lambda".to_string(),
                self.prepare.diag_lambda.to_string(),
            );
        }
        extra
    }
}
