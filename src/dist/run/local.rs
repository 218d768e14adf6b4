//! A rank's part of a dataset: its rows of X, its labels, its masks ([`rank_data`], from a
//! whole dataset), and the whole preparation of a rank without the whole Â or X
//! ([`prepare_rank`]).

use std::ops::Range;
use std::path::Path;
use std::time::Instant;

use ndarray::s;

use crate::data::dataset::check_trainable;
use crate::data::features::sparse_enough;
use crate::data::io::LoadOptions;
use crate::data::io::OgbFeatures;
use crate::data::store::{check_options, load_skeleton, Store, StoreFeatures, StoreGraph};
use crate::data::synthetic::CitationLike;
use crate::data::{Dataset, Features, FeaturesRef, Mask, Skeleton, SparseFeatures, Split};
use crate::dist::backend::RowPartition;
use crate::graph::Collective;
use crate::graph::{adj_indptr, NormRows};
use crate::kernels::Csr;
use crate::order::{self, Reorder};
use crate::train::run::{choose_order, Prepare, Summary};
use crate::{Error, Result};

/// What one rank trains on besides its rows of Â: its rows of the features, their labels, and
/// the split's nodes among them (renumbered from 0).
#[derive(Debug, Clone)]
pub struct RankData {
    /// The rank's rows of X (dense or sparse, as X is).
    pub features: Features<f32>,
    /// The rank's labels.
    pub labels: Vec<u32>,
    /// The split's nodes in the rank's range, as local indices.
    pub split: Split,
}

/// The rows `range` of `data`'s features, labels and split.
///
/// # Errors
/// [`Error::Distributed`] when `range` is not inside the node range.
pub fn rank_data(data: &Dataset, range: Range<usize>) -> Result<RankData> {
    let n = data.labels.len();
    if range.end > n || range.start > range.end {
        return Err(Error::Distributed(format!(
            "rows {}..{} of {n} nodes",
            range.start, range.end
        )));
    }
    let features = match data.features.get() {
        FeaturesRef::Dense(x) => Features::dense(x.slice(s![range.clone(), ..]).to_owned()),
        FeaturesRef::Sparse(sf) => {
            let x = sf.x();
            let ip = x.indptr();
            let ip = ip.raw_storage();
            let (lo, hi) = (ip[range.start], ip[range.end]);
            let indptr = ip[range.start..=range.end]
                .iter()
                .map(|&p| p - lo)
                .collect();
            let m = Csr::new(
                (range.len(), x.cols()),
                indptr,
                x.indices()[lo..hi].to_vec(),
                x.data()[lo..hi].to_vec(),
            );
            Features::sparse(SparseFeatures::new(m))
        }
    };
    Ok(RankData {
        features,
        labels: data.labels[range.clone()].to_vec(),
        split: local_split(&data.split, &range)?,
    })
}

/// The split's nodes in `range`, as local indices.
fn local_split(split: &Split, range: &Range<usize>) -> Result<Split> {
    let local = |m: &Mask| -> Result<Mask> {
        let idx: Vec<u32> = m
            .indices()
            .iter()
            .filter(|&&i| range.contains(&(i as usize)))
            .map(|&i| i - range.start as u32)
            .collect();
        Mask::try_from_indices(idx, range.len())
    };
    Ok(Split {
        name: split.name.clone(),
        train: local(&split.train)?,
        valid: local(&split.valid)?,
        test: local(&split.test)?,
    })
}

/// Where a rank's rows of X come from.
#[derive(Debug, Clone)]
pub enum RowSource {
    /// The whole X, in the input's node order (a loaded dataset): the rank keeps its rows.
    Whole(Features<f32>),
    /// An OGB folder's feature file, streamed once by each rank keeping only its rows; stored
    /// sparse when at most `sparse_below` of all its values (over the ranks) are non-zero, as
    /// the loader decides for the whole X.
    Ogb {
        /// The file.
        file: OgbFeatures,
        /// As [`OgbOptions::sparse_features_below`](crate::data::io::OgbOptions).
        sparse_below: Option<f64>,
    },
    /// A store's dense features (checked once by the rank's reading pass): the rank reads
    /// only its rows; stored sparse as for [`RowSource::Ogb`].
    Store {
        /// The features.
        features: StoreFeatures,
        /// As [`OgbOptions::sparse_features_below`](crate::data::io::OgbOptions).
        sparse_below: Option<f64>,
    },
    /// The generator that made the skeleton, with its seed: the rank draws only its rows
    /// ([`CitationLike::features_of`]).
    Synthetic {
        /// The generator's parameters.
        params: CitationLike,
        /// Its seed.
        seed: u64,
    },
}

impl RowSource {
    fn in_dim(&self) -> usize {
        match self {
            RowSource::Whole(x) => x.n_cols(),
            RowSource::Ogb { file, .. } => file.width,
            RowSource::Store { features, .. } => features.n_features(),
            RowSource::Synthetic { params, .. } => params.n_features,
        }
    }
}

/// One rank's part of a prepared dataset ([`prepare_rank`]).
#[derive(Debug, Clone)]
pub struct RankPrepared {
    /// What was prepared, for reports: the same as one process's [`Summary`].
    pub summary: Summary,
    /// The partition of the (reordered) nodes over the ranks.
    pub part: RowPartition,
    /// The rank's rows of Â (and Âᵀ).
    pub rows: NormRows<f32>,
    /// The rank's rows of X (normalised as one process's), labels and split.
    pub data: RankData,
    /// The rank's rows of the graph (row pointers from 0, global neighbour ids; out-neighbours
    /// for a directed graph), when [`Prepare::keep_graph`] asks for it (DropEdge samples from
    /// them).
    pub graph_rows: Option<(Vec<usize>, Vec<u32>)>,
}

/// Prepares rank `rank` of `ranks` as [`Prepared::new`](crate::train::run::Prepared::new)
/// prepares the whole dataset — the same node order, partition, rows of Â, normalised rows of
/// X, labels and split, bit for bit those of the whole preparation's rows — while holding at
/// most the graph's structure, labels and split whole: Â is built for the rank's rows only
/// ([`NormRows`]), X kept ([`RowSource::Whole`]) or drawn ([`RowSource::Synthetic`]) for them
/// only. `job` agrees across the ranks on what one process decides from the whole X: whether every
/// feature is ≥ 0 (`--row-norm auto`), and how sparse X is (an OGB source).
///
/// # Errors
/// [`Error::NotTrainable`] for data one process could not train on either; from reordering and
/// partitioning; [`Error::Distributed`] for a rank outside the job.
pub fn prepare_rank(
    skeleton: Skeleton,
    source: RowSource,
    p: &Prepare,
    ranks: usize,
    rank: usize,
    job: &dyn Collective,
) -> Result<RankPrepared> {
    check_rank(p, ranks, rank)?;
    check_trainable(
        &skeleton.name,
        source.in_dim(),
        &skeleton.labels,
        skeleton.n_classes,
        &skeleton.split,
    )?;
    let t = Instant::now();
    let (perm, applied) = choose_order(&skeleton.graph, p.reorder)?;
    let input_labels = skeleton.labels.clone();
    let s = match &perm {
        Some(perm) => order::apply_skeleton(&skeleton, perm)?,
        None => skeleton,
    };
    let reorder_s = t.elapsed().as_secs_f64();
    let part = RowPartition::of_graph(&adj_indptr(&s.graph), ranks)?;
    let range = part.range(rank);
    let rows = NormRows::<f32>::new(&s.graph, p.norm, range.clone());
    // The rank's nodes in the input's numbering.
    let ids: Vec<u32> = match &perm {
        Some(perm) => perm.new_to_old()[range.clone()].to_vec(),
        None => (range.start as u32..range.end as u32).collect(),
    };
    let features = match source {
        RowSource::Whole(x) => x.select_rows(&ids),
        RowSource::Synthetic { params, seed } => params.features_of(&input_labels, seed, &ids)?,
        RowSource::Ogb { file, sparse_below } => {
            let what = || file.path.display().to_string();
            read_rows(file.read_rows(&ids), what, sparse_below, job)?
        }
        RowSource::Store {
            features,
            sparse_below,
        } => read_rows(
            features.rows(&ids),
            || "the store".into(),
            sparse_below,
            job,
        )?,
    };
    drop(input_labels);
    let g = &s.graph;
    let graph_rows = p.keep_graph.then(|| {
        let ip = g.indptr();
        let (lo, hi) = (ip[range.start], ip[range.end]);
        (
            ip[range.start..=range.end]
                .iter()
                .map(|&q| q - lo)
                .collect(),
            g.indices()[lo..hi].to_vec(),
        )
    });
    let whole = Whole {
        name: s.name.clone(),
        n_nodes: g.n_nodes(),
        n_edges: g.n_edges(),
        directed: g.is_directed(),
        labels: &s.labels,
        n_classes: s.n_classes,
        split: &s.split,
    };
    let order = (applied, reorder_s);
    whole.finish(p, order, part, rows, features, graph_rows, job)
}

/// Prepares rank `rank` of `ranks` from the store in `dir` (with dense features), as
/// [`prepare_rank`] of its skeleton and features would, bit for bit: when the store holds
/// its nodes in the order the run applies (`p.reorder` naming the store's order as it was
/// asked or applied, or `none` for a store in the input's order), the rank reads only its
/// rows of the graph and of X ([`StoreGraph`]: each rank checks the whole graph once in plain
/// reads, holding a degree a node, then builds its rows of Â from the store's maps), beside
/// the labels and the split; otherwise it loads the skeleton whole and orders it
/// ([`load_skeleton`], [`prepare_rank`]).
///
/// # Errors
/// As [`prepare_rank`]; [`Error::Dataset`] for `opts` the store cannot honour;
/// [`Error::Store`] naming the array at fault; [`Error::TooLarge`] for rows that do not fit
/// in memory; [`Error::Distributed`] on the ranks whose peer failed to read its rows.
pub fn prepare_rank_store(
    dir: &Path,
    opts: &LoadOptions,
    p: &Prepare,
    ranks: usize,
    rank: usize,
    job: &dyn Collective,
) -> Result<RankPrepared> {
    // Which path every rank takes, agreed first: a store one rank cannot open stops them all.
    let opened = (|| {
        check_options(dir, opts)?;
        let store = Store::open(dir)?;
        let kept = kept_order(&store, p.reorder)?;
        Ok((store, kept))
    })();
    let (store, kept) = agreed(job, opened)?;
    let sparse_below = opts.sparse_features_below;
    let Some(applied) = kept else {
        let (skeleton, features) = load_skeleton(dir, opts)?;
        let source = RowSource::Store {
            features,
            sparse_below,
        };
        return prepare_rank(skeleton, source, p, ranks, rank, job);
    };
    check_rank(p, ranks, rank)?;
    let h = store.header();
    // What may fail on one rank and not the others is agreed on (in `read_rows`) before any
    // rank waits for the others.
    let local = (|| -> Result<_> {
        let features = StoreFeatures::open(dir)?;
        // The labels and the split, whole (at most 12 bytes a node for the split's ids).
        let n = h.n_nodes as usize;
        crate::data::memory::check(crate::data::memory::bytes(n, 4 + 12), || {
            format!("the labels and split of the store {}", dir.display())
        })?;
        let (labels, split) = (store.checked_labels()?, store.split()?);
        let n_classes = h.n_classes as usize;
        check_trainable(&h.name, features.n_features(), &labels, n_classes, &split)?;
        let graph = StoreGraph::open(dir)?;
        let part = RowPartition::of_graph(&graph.adj_indptr()?, ranks)?;
        let range = part.range(rank);
        let rows = graph.norm_rows::<f32>(p.norm, range.clone())?;
        let graph_rows = match p.keep_graph {
            true => Some(graph.rows(range.clone())?),
            false => None,
        };
        // The rank's nodes in the input's numbering (what the features are read by).
        let ids: Vec<u32> = match store.order()? {
            Some(o) => o.perm.new_to_old()[range].to_vec(),
            None => (range.start as u32..range.end as u32).collect(),
        };
        Ok((features, labels, split, graph, part, rows, graph_rows, ids))
    })();
    let read = match &local {
        Ok((features, .., ids)) => features.rows(ids),
        Err(e) => Err(Error::Distributed(format!("{e}"))),
    };
    let x = read_rows(read, || "the store".into(), sparse_below, job);
    let (_, labels, split, graph, part, rows, graph_rows, _) = local?;
    let whole = Whole {
        name: h.name.clone(),
        n_nodes: graph.n_nodes(),
        n_edges: graph.n_edges(),
        directed: graph.is_directed(),
        labels: &labels,
        n_classes: h.n_classes as usize,
        split: &split,
    };
    whole.finish(p, (applied, 0.0), part, rows, x?, graph_rows, job)
}

/// The order a run asking for `reorder` keeps a store in without reordering it, as one
/// process keeps it ([`order::reorder_dataset`]): the store's own, when `reorder` names it as
/// it was asked or applied, or the input's, when `reorder` is none and the store holds the
/// input's order. `None` when the run would order the nodes anew.
///
/// # Errors
/// [`Error::Store`] for a stored order's name this build does not know (as one process
/// refuses it).
fn kept_order(store: &Store, reorder: Reorder) -> Result<Option<Reorder>> {
    let Some(o) = &store.header().order else {
        return Ok((reorder == Reorder::None).then_some(Reorder::None));
    };
    let parse = |name: &str| -> Result<Reorder> {
        name.parse().map_err(|e| Error::Store {
            path: store.dir().to_path_buf(),
            array: crate::data::store::HEADER.into(),
            msg: format!("order {name:?}: {e}"),
        })
    };
    let (asked, applied) = (parse(&o.asked)?, parse(&o.applied)?);
    Ok((reorder == asked || reorder == applied).then_some(applied))
}

/// `r` when every rank of `job` has its own `r` ok; otherwise this rank's error, or an error
/// saying another rank failed (so that no rank goes on to wait for one that stopped).
fn agreed<T>(job: &dyn Collective, r: Result<T>) -> Result<T> {
    if job.all(r.is_ok()) {
        return r;
    }
    r.and_then(|_| {
        Err(Error::Distributed(
            "another rank could not open the store".into(),
        ))
    })
}

/// A rank inside the job, and a preparation ranks can share.
fn check_rank(p: &Prepare, ranks: usize, rank: usize) -> Result<()> {
    if rank >= ranks {
        return Err(Error::Distributed(format!(
            "rank {rank} of a {ranks}-rank job"
        )));
    }
    if p.diag_lambda != 0.0 {
        return Err(Error::Config(crate::ConfigError::Unsupported {
            what: "the diagonal enhancement (Prepare::diag_lambda) across ranks",
        }));
    }
    Ok(())
}

/// What every rank holds whole, in the order the run applies: the rank's part is cut from it.
struct Whole<'a> {
    name: String,
    n_nodes: usize,
    n_edges: usize,
    directed: bool,
    labels: &'a [u32],
    n_classes: usize,
    split: &'a Split,
}

impl Whole<'_> {
    /// The rank's preparation from its rows of Â and X (`(applied, seconds)`: the order and
    /// the time ordering took): X row-normalised as one process normalises the whole X (`job`
    /// agreeing whether every feature is ≥ 0), the summary, labels and split of its rows.
    #[allow(clippy::too_many_arguments)]
    fn finish(
        self,
        p: &Prepare,
        (applied, reorder_s): (Reorder, f64),
        part: RowPartition,
        rows: NormRows<f32>,
        mut features: Features<f32>,
        graph_rows: Option<(Vec<usize>, Vec<u32>)>,
        job: &dyn Collective,
    ) -> Result<RankPrepared> {
        let range = rows.range();
        let row_normalized = p.row_norm.applies(|| job.all(features.is_non_negative()));
        if row_normalized {
            features.row_normalize();
        }
        let split = self.split;
        let summary = Summary {
            name: self.name,
            n_nodes: self.n_nodes,
            n_edges: self.n_edges,
            nnz: rows.nnz_total(),
            in_dim: features.n_cols(),
            sparse_features: features.is_sparse(),
            n_classes: self.n_classes,
            split_name: split.name.clone(),
            split_sizes: [split.train.len(), split.valid.len(), split.test.len()],
            row_normalized,
            prepare: Prepare {
                reorder: applied,
                ..*p
            },
            reorder_asked: p.reorder,
            reorder_s,
            directed: self.directed,
        };
        let data = RankData {
            features,
            labels: self.labels[range.clone()].to_vec(),
            split: local_split(split, &range)?,
        };
        Ok(RankPrepared {
            summary,
            part,
            rows,
            data,
            graph_rows,
        })
    }
}

/// A rank's rows of X read from a file (`read`: its result), the ranks agreeing first that
/// every one could read its rows (a rank failing must not leave the others waiting in the
/// collectives after), then stored sparse when at most `sparse_below` of all the values (over
/// the ranks) are non-zero, as the loader decides for the whole X.
fn read_rows(
    read: Result<ndarray::Array2<f32>>,
    what: impl Fn() -> String,
    sparse_below: Option<f64>,
    job: &dyn Collective,
) -> Result<Features<f32>> {
    if !job.all(read.is_ok()) {
        return Err(read.err().unwrap_or_else(|| {
            Error::Distributed(format!(
                "another rank could not read its rows of {}",
                what()
            ))
        }));
    }
    let x = Features::dense(read?);
    let (n, d) = (job.sum(x.n_rows() as u64) as usize, x.n_cols());
    Ok(match sparse_below {
        Some(t) => {
            let nnz = job.sum(x.count_nonzeros() as u64) as usize;
            if sparse_enough(nnz, n * d, t) {
                x.into_sparse()
            } else {
                x
            }
        }
        None => x,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::synthetic::FeatureKind;
    use crate::graph::{Norm, NormAdj};
    use crate::order::Reorder;
    use crate::train::run::{Prepared, RowNorm};

    fn bits(x: &Features<f32>) -> (Vec<u32>, Vec<usize>, Vec<u32>) {
        match x.get() {
            FeaturesRef::Dense(x) => (x.iter().map(|v| v.to_bits()).collect(), vec![], vec![]),
            FeaturesRef::Sparse(s) => {
                let m = s.x();
                (
                    m.data().iter().map(|v| v.to_bits()).collect(),
                    m.indptr().raw_storage().to_vec(),
                    m.indices().to_vec(),
                )
            }
        }
    }

    /// Every rank's preparation is bit for bit its part of the whole one, synthetic rows drawn
    /// alone or kept from a whole X, reordered or not, dense or bag-of-words.
    #[test]
    fn a_ranks_preparation_is_its_part_of_the_whole_one() {
        let dense = FeatureKind::Dense {
            center_distance: 1.0,
            cluster_variance: 1.0,
        };
        for (features, reorder, norm, row_norm) in [
            (
                FeatureKind::BagOfWords,
                Reorder::None,
                Norm::Symmetric,
                RowNorm::Auto,
            ),
            (
                FeatureKind::BagOfWords,
                Reorder::Rcm,
                Norm::Row,
                RowNorm::Auto,
            ),
            (dense, Reorder::Random(3), Norm::Symmetric, RowNorm::On),
            (dense, Reorder::Auto, Norm::Symmetric, RowNorm::Auto),
        ] {
            let params = CitationLike {
                n_nodes: 2600,
                features,
                ..Default::default()
            };
            let p = Prepare {
                reorder,
                norm,
                row_norm,
                keep_graph: true,
                whole_adj: true,
                diag_lambda: 0.0,
            };
            let whole = Prepared::new(params.generate(5).unwrap(), &p).unwrap();
            let adj = NormAdj::<f32>::new(&whole.data.graph, norm);
            for ranks in [1, 2, 3] {
                for rank in 0..ranks {
                    for synthetic in [true, false] {
                        let skeleton = params.generate_skeleton(5).unwrap();
                        let source = if synthetic {
                            RowSource::Synthetic {
                                params: params.clone(),
                                seed: 5,
                            }
                        } else {
                            RowSource::Whole(params.generate(5).unwrap().features)
                        };
                        let r =
                            prepare_rank(skeleton, source, &p, ranks, rank, &crate::graph::Local)
                                .unwrap();
                        let part =
                            RowPartition::of_graph(adj.a().indptr().raw_storage(), ranks).unwrap();
                        assert_eq!(r.part, part);
                        let range = part.range(rank);
                        let expect = rank_data(&whole.data, range.clone()).unwrap();
                        let what = format!("{features:?} {reorder} {ranks}/{rank} {synthetic}");
                        assert_eq!(bits(&r.data.features), bits(&expect.features), "{what}");
                        assert_eq!(r.data.labels, expect.labels, "{what}");
                        assert_eq!(r.data.split.train.indices(), expect.split.train.indices());
                        assert_eq!(r.data.split.test.indices(), expect.split.test.indices());
                        assert_eq!(r.rows.range(), range);
                        let ip = adj.a().indptr().raw_storage().to_vec();
                        let (lo, hi) = (ip[range.start], ip[range.end]);
                        assert_eq!(r.rows.a().indices(), &adj.a().indices()[lo..hi]);
                        assert_eq!(r.rows.a().data(), &adj.a().data()[lo..hi]);
                        let mut s = whole.summary();
                        s.reorder_s = r.summary.reorder_s;
                        assert_eq!(r.summary, s, "{what}");
                        let (gip, gnb) = r.graph_rows.unwrap();
                        let g = &whole.data.graph;
                        let glo = g.indptr()[range.start];
                        assert_eq!(gnb, &g.indices()[glo..g.indptr()[range.end]]);
                        assert_eq!(gip.len(), range.len() + 1);
                    }
                }
            }
        }
        assert!(prepare_rank(
            CitationLike::default().generate_skeleton(1).unwrap(),
            RowSource::Synthetic {
                params: CitationLike::default(),
                seed: 1
            },
            &Prepare::default(),
            2,
            2,
            &crate::graph::Local
        )
        .is_err());
    }

    /// A rank of a store holding the order the run applies reads only its rows, and prepares
    /// them bit for bit as from the whole skeleton (which a run ordering the store anew
    /// still loads): in the input's order or in a stored one, undirected or directed, Â
    /// symmetric or not, with its rows of the graph; a damaged graph is an error naming the
    /// array.
    #[test]
    fn a_rank_of_a_store_in_the_runs_order_reads_its_rows_as_the_whole_skeleton_gives_them() {
        use crate::data::store::{write_store, FeatureDtype, OrderInfo, StoredOrder};
        use crate::graph::Direction;
        let dir = std::env::temp_dir().join(format!("sparse-gcn-rank-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let params = CitationLike {
            n_nodes: 1500,
            features: FeatureKind::Dense {
                center_distance: 1.0,
                cluster_variance: 1.0,
            },
            ..Default::default()
        };
        let local = &crate::graph::Local;
        for (k, (direction, stored, reorder, norm)) in [
            (Direction::Undirected, None, Reorder::None, Norm::Symmetric),
            (
                Direction::Undirected,
                Some(Reorder::Rcm),
                Reorder::Rcm,
                Norm::Row,
            ),
            (Direction::Directed, None, Reorder::None, Norm::Symmetric),
            (
                Direction::Undirected,
                Some(Reorder::Rcm),
                Reorder::Degree,
                Norm::Symmetric,
            ),
            (Direction::Undirected, None, Reorder::Auto, Norm::Symmetric),
        ]
        .into_iter()
        .enumerate()
        {
            let mut d = params.generate(7).unwrap();
            // The first store with self-loops on every seventh node, the directed one with
            // every other arc dropped.
            let g = &d.graph;
            let n = g.n_nodes() as u32;
            let arcs: Vec<(u32, u32)> = (0..n)
                .flat_map(|i| g.neighbors(i as usize).iter().map(move |&j| (i, j)))
                .filter(|&(i, j)| direction == Direction::Undirected || (i + j) % 2 == 0)
                .chain((0..n).filter(|i| k == 0 && i % 7 == 0).map(|i| (i, i)))
                .collect();
            let before = g.n_edges();
            d.graph = crate::graph::Graph::try_from_edges(n as usize, &arcs, direction).unwrap();
            assert_eq!(d.graph.n_edges() > before, k == 0);
            let st = dir.join(format!("s{k}"));
            let (d, order) = match stored {
                None => (d, None),
                Some(r) => {
                    let (d, perm, applied) = order::reorder_dataset(d, r, None).unwrap();
                    let info = OrderInfo {
                        asked: r.to_string(),
                        applied: applied.to_string(),
                    };
                    (d, perm.map(|perm| StoredOrder { info, perm }))
                }
            };
            write_store(&d, order.as_ref(), &st, FeatureDtype::F32).unwrap();
            let opts = LoadOptions {
                direction,
                ..LoadOptions::default()
            };
            let p = Prepare {
                reorder,
                norm,
                keep_graph: true,
                ..Prepare::default()
            };
            let kept = kept_order(&Store::open(&st).unwrap(), reorder).unwrap();
            assert_eq!(kept.is_some(), k < 3, "{k}");
            for ranks in [1, 3] {
                for rank in 0..ranks {
                    let r = prepare_rank_store(&st, &opts, &p, ranks, rank, local).unwrap();
                    let (skeleton, features) = load_skeleton(&st, &opts).unwrap();
                    let source = RowSource::Store {
                        features,
                        sparse_below: opts.sparse_features_below,
                    };
                    let w = prepare_rank(skeleton, source, &p, ranks, rank, local).unwrap();
                    let what = format!("store {k}, rank {rank} of {ranks}");
                    assert_eq!(r.part, w.part, "{what}");
                    let csr = |m: crate::kernels::CsrView<'_, f32>| {
                        let bits: Vec<u32> = m.data().iter().map(|v| v.to_bits()).collect();
                        (
                            m.indptr().raw_storage().to_vec(),
                            m.indices().to_vec(),
                            bits,
                        )
                    };
                    assert_eq!(csr(r.rows.a()), csr(w.rows.a()), "{what}");
                    assert_eq!(csr(r.rows.a_t()), csr(w.rows.a_t()), "{what}");
                    assert_eq!(r.rows.is_symmetric(), w.rows.is_symmetric());
                    assert_eq!(r.rows.nnz_total(), w.rows.nnz_total());
                    assert_eq!(bits(&r.data.features), bits(&w.data.features), "{what}");
                    assert_eq!(r.data.labels, w.data.labels, "{what}");
                    for (a, b) in [
                        (&r.data.split.train, &w.data.split.train),
                        (&r.data.split.valid, &w.data.split.valid),
                        (&r.data.split.test, &w.data.split.test),
                    ] {
                        assert_eq!(a.indices(), b.indices(), "{what}");
                    }
                    let mut s = w.summary.clone();
                    s.reorder_s = r.summary.reorder_s;
                    assert_eq!(r.summary, s, "{what}");
                    assert_eq!(r.graph_rows, w.graph_rows, "{what}");
                }
            }
            // A neighbour id beyond the nodes: an error naming the array.
            if k == 0 {
                let path = st.join("indices.u32");
                let mut b = std::fs::read(&path).unwrap();
                b[..4].copy_from_slice(&u32::MAX.to_le_bytes());
                std::fs::write(&path, &b).unwrap();
                let e = prepare_rank_store(&st, &opts, &p, 2, 1, local).unwrap_err();
                assert!(e.to_string().contains("indices"), "{e}");
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
