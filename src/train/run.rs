//! The training pipeline the CLI, the examples and library users share: prepare a dataset the way
//! `sparse-gcn train` does (node order, feature row normalisation, Â), train every seed, and
//! record in a checkpoint what evaluation needs to prepare the data the same way again.
//!
//! ```
//! use sparse_gcn::data::synthetic::CitationLike;
//! use sparse_gcn::train::run::{Prepare, Prepared};
//! use sparse_gcn::train::TrainConfig;
//! let data = CitationLike { n_nodes: 500, ..Default::default() }.generate(1).unwrap();
//! let p = Prepared::new(data, &Prepare::default()).unwrap();
//! let runs = p.fit_seeds(&TrainConfig::default(), &[0, 1], 0, None, &|_, _| {}).unwrap();
//! assert_eq!(runs.len(), 2);
//! ```

use std::collections::BTreeMap;
use std::time::Instant;

use super::{fit_model, fit_seeds, DropEdgeSource, FitOptions, RunResult, TrainConfig, TrainData};
use crate::data::Dataset;
use crate::graph::{Direction, Graph, Norm, NormAdj, Permutation};
use crate::nn::Model;
use crate::order::{self, Reorder};
use crate::Result;

/// Whether to row-normalise the features (Kipf's preprocessing of bag-of-words).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RowNorm {
    /// When every feature is ≥ 0 (bag-of-words), as Kipf & Welling do; signed dense features
    /// (ogbn-arxiv-like embeddings) are left as they are.
    #[default]
    Auto,
    /// Always.
    On,
    /// Never.
    Off,
}

crate::error::names!(RowNorm, "row normalisation", [
    RowNorm::Auto => "auto",
    RowNorm::On => "on",
    RowNorm::Off => "off",
]);

impl RowNorm {
    /// Whether the features are row-normalised, `non_negative` telling whether every value
    /// is ≥ 0 (asked for `auto` only).
    pub fn applies(self, non_negative: impl FnOnce() -> bool) -> bool {
        match self {
            RowNorm::Auto => non_negative(),
            RowNorm::On => true,
            RowNorm::Off => false,
        }
    }
}

/// The node order `reorder` asks for on `graph` (`None` for the given order) and the order
/// it resolved to.
///
/// # Errors
/// As [`order::order`].
pub fn choose_order(graph: &Graph, reorder: Reorder) -> Result<(Option<Permutation>, Reorder)> {
    let (perm, applied) = match reorder {
        Reorder::Auto => order::auto_order(graph),
        r => (order::order(graph, r)?, r),
    };
    Ok(((!perm.is_identity()).then_some(perm), applied))
}

/// How [`Prepared::new`] prepares a dataset. The default is the CLI's: `--reorder auto`,
/// `--row-norm auto`, `--norm sym`, the raw graph freed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prepare {
    /// Relabel the nodes once for memory locality (see [`order::auto_order`]).
    pub reorder: Reorder,
    /// Row-normalise the features.
    pub row_norm: RowNorm,
    /// The normalisation of Â.
    pub norm: Norm,
    /// Keep the raw graph after building Â (DropEdge samples from it); otherwise it is freed.
    pub keep_graph: bool,
}

impl Default for Prepare {
    fn default() -> Self {
        Prepare {
            reorder: Reorder::Auto,
            row_norm: RowNorm::Auto,
            norm: Norm::Symmetric,
            keep_graph: false,
        }
    }
}

/// A dataset prepared for training: the node order applied, the features normalised, Â built.
#[derive(Debug)]
pub struct Prepared {
    /// The dataset in the applied node order (its graph emptied unless [`Prepare::keep_graph`]).
    pub data: Dataset,
    /// Â.
    pub adj: NormAdj<f32>,
    /// How it was prepared, with `reorder` resolved to the order applied.
    pub prepare: Prepare,
    /// The order asked for (`auto` before resolution).
    pub reorder_asked: Reorder,
    /// Whether the features were row-normalised.
    pub row_normalized: bool,
    /// Nodes and edges of the graph.
    pub n_nodes: usize,
    /// Edges (undirected edges counted once).
    pub n_edges: usize,
    /// Whether the graph is directed.
    pub directed: bool,
    /// Seconds spent choosing and applying the node order.
    pub reorder_s: f64,
    /// The node order applied (`None`: the given order): row `r` of [`Prepared::data`] is the
    /// input's node `perm.new_to_old()[r]`.
    pub perm: Option<crate::graph::Permutation>,
}

impl Prepared {
    /// Prepares `data` as `p` says.
    ///
    /// # Errors
    /// From reordering (a permutation that does not fit the data).
    pub fn new(mut data: Dataset, p: &Prepare) -> Result<Self> {
        let t = Instant::now();
        let (perm, applied) = if p.reorder == Reorder::Auto {
            // The relabelled graph auto's model builds is the one `apply` would build.
            let (perm, applied, graph) = order::auto_order_with_graph(&data.graph);
            if let Some(graph) = graph {
                data = order::apply_with_graph(&data, &perm, graph)?;
            }
            ((!perm.is_identity()).then_some(perm), applied)
        } else {
            let (perm, applied) = choose_order(&data.graph, p.reorder)?;
            if let Some(perm) = &perm {
                data = order::apply(&data, perm)?;
            }
            (perm, applied)
        };
        let reorder_s = t.elapsed().as_secs_f64();
        let row_normalized = p.row_norm.applies(|| data.features.is_non_negative());
        if row_normalized {
            data.features.row_normalize();
        }
        let adj = NormAdj::<f32>::new(&data.graph, p.norm);
        let (n_nodes, n_edges, directed) = (
            data.graph.n_nodes(),
            data.graph.n_edges(),
            data.graph.is_directed(),
        );
        if !p.keep_graph {
            // Training needs only Â: free the raw adjacency (half a GB on products-like).
            data.graph = Graph::try_from_edges(0, &[], Direction::Undirected)?;
        }
        Ok(Prepared {
            data,
            adj,
            prepare: Prepare {
                reorder: applied,
                ..*p
            },
            reorder_asked: p.reorder,
            perm,
            row_normalized,
            n_nodes,
            n_edges,
            directed,
            reorder_s,
        })
    }

    /// Trains one model per seed (in parallel), recording the layers' oversmoothing metrics every
    /// `metrics_every` epochs (0: none; `rank_sample` rows for the numerical rank). DropEdge (the
    /// model's `drop_edge` > 0) samples from the kept graph. `on_done` sees each run and its
    /// trained model.
    ///
    /// # Errors
    /// As [`fit_seeds`]; a DropEdge model without the graph kept is a configuration error.
    pub fn fit_seeds(
        &self,
        cfg: &TrainConfig,
        seeds: &[u64],
        metrics_every: usize,
        rank_sample: Option<usize>,
        on_done: &(dyn Fn(&RunResult, &mut Model<f32>) + Sync),
    ) -> Result<Vec<RunResult>> {
        let opts = self.options(cfg, metrics_every, rank_sample);
        fit_seeds(&self.train_data(), cfg, seeds, &opts, on_done)
    }

    /// Trains one model with `seed` (see [`Prepared::fit_seeds`]) and returns it with its run.
    ///
    /// # Errors
    /// As [`Prepared::fit_seeds`].
    pub fn fit(
        &self,
        cfg: &TrainConfig,
        seed: u64,
        metrics_every: usize,
        rank_sample: Option<usize>,
    ) -> Result<(RunResult, Model<f32>)> {
        let opts = self.options(cfg, metrics_every, rank_sample);
        fit_model(&self.train_data(), cfg, seed, &opts)
    }

    /// What training reads: Â, the features, the labels and the split.
    pub fn train_data(&self) -> TrainData<'_, f32> {
        TrainData::of(&self.adj, &self.data)
    }

    /// The training options of a run with `cfg`: DropEdge's source when the model drops edges.
    fn options(
        &self,
        cfg: &TrainConfig,
        metrics_every: usize,
        rank_sample: Option<usize>,
    ) -> FitOptions<'_> {
        let drop_edge =
            (cfg.model.drop_edge > 0.0 && self.prepare.keep_graph).then_some(DropEdgeSource {
                graph: &self.data.graph,
                norm: self.prepare.norm,
            });
        FitOptions {
            drop_edge,
            metrics_every,
            rank_sample,
        }
    }

    /// The checkpoint metadata evaluation needs to prepare the data the same way
    /// ([`Prepare::from_extra`]): `dataset`, `row_normalize`, `norm`, `directed`, `reorder`.
    pub fn extra(&self) -> BTreeMap<String, String> {
        self.summary().extra()
    }

    /// What was prepared, for reports.
    pub fn summary(&self) -> Summary {
        let d = &self.data;
        Summary {
            name: d.name.clone(),
            n_nodes: self.n_nodes,
            n_edges: self.n_edges,
            nnz: self.adj.nnz(),
            in_dim: d.features.n_cols(),
            sparse_features: d.features.is_sparse(),
            n_classes: d.n_classes,
            split_name: d.split.name.clone(),
            split_sizes: [d.split.train.len(), d.split.valid.len(), d.split.test.len()],
            row_normalized: self.row_normalized,
            prepare: self.prepare,
            reorder_asked: self.reorder_asked,
            reorder_s: self.reorder_s,
            directed: self.directed,
        }
    }
}

/// What a preparation made of a dataset, whole ([`Prepared::summary`]) or one rank's part of
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
    /// As [`Prepared::extra`].
    pub fn extra(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
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
        ])
    }
}

impl Prepare {
    /// The preparation a checkpoint's metadata records ([`Prepared::extra`]); keys that are
    /// missing take the defaults of checkpoints written before they existed (row
    /// normalisation on, symmetric Â, the given node order).
    ///
    /// # Errors
    /// [`crate::Error::Config`] for an unknown `reorder`.
    pub fn from_extra(extra: &BTreeMap<String, String>) -> Result<Self> {
        let row_norm = match extra.get("row_normalize").map(String::as_str) {
            Some("false") => RowNorm::Off,
            _ => RowNorm::On,
        };
        let norm = match extra.get("norm").map(String::as_str) {
            Some("row") => Norm::Row,
            _ => Norm::Symmetric,
        };
        let reorder = match extra.get("reorder") {
            Some(r) => r.parse::<Reorder>()?,
            None => Reorder::None,
        };
        Ok(Prepare {
            reorder,
            row_norm,
            norm,
            keep_graph: false,
        })
    }
}
