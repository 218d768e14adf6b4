//! A batch: the subgraph its nodes induce, its Â renormalised on it, its rows of X, labels
//! and training nodes, rewritten in place from one batch to the next.

use super::NodeSampler;
use crate::data::store::{RowsScratch, StoreRows};
use crate::graph::{tilde_row, AdjScratch, Graph, Norm, NormAdj};
use crate::input::{Features, Mask};
use crate::{Error, Result, Scalar};

/// What batches are cut from: the whole graph and its features (in memory, or a store's rows
/// read per batch), labels and training nodes, and the normalisation of each batch's Â.
#[derive(Debug)]
pub struct BatchSource<'a, F: Scalar> {
    whole: Whole<'a, F>,
    norm: Norm,
    labels: &'a [u32],
    in_train: Vec<bool>,
    n_train: usize,
}

/// Where the whole graph and its features are.
#[derive(Debug)]
enum Whole<'a, F: Scalar> {
    Memory {
        graph: &'a Graph,
        x: &'a Features<F>,
    },
    /// A store's rows, read per batch; the features row-normalised as read when `normalize`;
    /// `max_entries` the most stored entries of a batch's rows.
    Store {
        rows: &'a StoreRows,
        normalize: bool,
        max_entries: usize,
    },
}

impl<'a, F: Scalar> BatchSource<'a, F> {
    /// The source of batches of `graph` with features `x`, `labels` and training nodes
    /// `train`; each batch's Â normalised by `norm`.
    ///
    /// # Errors
    /// [`Error::Mismatch`] when the feature rows, labels or the mask's node count are not the
    /// graph's node count.
    pub fn new(
        graph: &'a Graph,
        norm: Norm,
        x: &'a Features<F>,
        labels: &'a [u32],
        train: &Mask,
    ) -> Result<Self> {
        let n = graph.n_nodes();
        for (what, got) in [
            ("batch source: feature rows vs nodes", x.n_rows()),
            ("batch source: labels vs nodes", labels.len()),
            (
                "batch source: training mask nodes vs nodes",
                train.n_nodes(),
            ),
        ] {
            if got != n {
                return Err(Error::Mismatch {
                    what: what.into(),
                    expected: n,
                    got,
                });
            }
        }
        Ok(BatchSource {
            whole: Whole::Memory { graph, x },
            norm,
            labels,
            in_train: train.to_bool(),
            n_train: train.len(),
        })
    }

    /// The source of the batches of `sampler` (Cluster-GCN's, the only sampler that draws its
    /// nodes without the graph) read from the store `rows`: the same batches, bit for bit, as
    /// [`BatchSource::new`] on the store's dataset in memory (its features row-normalised when
    /// `row_normalize`), reading only each batch's rows ([`StoreRows`]).
    ///
    /// # Errors
    /// [`crate::Error::Mismatch`] when the sampler's nodes are not the store's;
    /// [`crate::Error::Store`] or [`crate::Error::Io`] reading the parts' sizes.
    pub fn from_store(
        rows: &'a StoreRows,
        norm: Norm,
        row_normalize: bool,
        sampler: &super::ClusterSampler,
    ) -> Result<Self> {
        let n = rows.n_nodes();
        if sampler.n_nodes() != n {
            return Err(Error::Mismatch {
                what: "Cluster-GCN sampler: the store's nodes vs its parts' nodes".into(),
                expected: n,
                got: sampler.n_nodes(),
            });
        }
        let max_entries = max_batch_entries(rows, sampler)?;
        let train = &rows.split().train;
        Ok(BatchSource {
            whole: Whole::Store {
                rows,
                normalize: row_normalize,
                max_entries,
            },
            norm,
            labels: rows.labels(),
            in_train: train.to_bool(),
            n_train: train.len(),
        })
    }

    /// The whole graph's node count.
    pub fn n_nodes(&self) -> usize {
        match &self.whole {
            Whole::Memory { graph, .. } => graph.n_nodes(),
            Whole::Store { rows, .. } => rows.n_nodes(),
        }
    }

    /// The whole graph, when it is in memory.
    pub fn graph(&self) -> Option<&Graph> {
        match &self.whole {
            Whole::Memory { graph, .. } => Some(graph),
            Whole::Store { .. } => None,
        }
    }
}

/// The most stored entries the rows of one of `sampler`'s batches hold in the store `rows`:
/// those of its `per_batch` largest parts (two offsets read a run of a part's rows).
///
/// # Errors
/// [`crate::Error::Store`] or [`crate::Error::Io`] reading the offsets; a sampler of more
/// nodes than the store's.
pub fn max_batch_entries(rows: &StoreRows, sampler: &super::ClusterSampler) -> Result<usize> {
    let mut io = RowsScratch::default();
    let mut sizes = Vec::with_capacity(sampler.parts());
    for k in 0..sampler.parts() {
        let mut e = 0u64;
        for (a, b) in crate::data::store::runs(sampler.part(k)) {
            e = e.saturating_add(rows.entries(a, b, &mut io)?);
        }
        sizes.push(e);
    }
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    let max = sizes[..sampler.per_batch().min(sizes.len())]
        .iter()
        .fold(0u64, |a, &b| a.saturating_add(b));
    Ok(usize::try_from(max).unwrap_or(usize::MAX))
}

/// One batch (see the [module docs](super)), refilled by [`Batch::fill`].
#[derive(Debug)]
pub struct Batch<F: Scalar> {
    nodes: Vec<u32>,
    pos: Vec<u32>,
    graph: Graph,
    adj: NormAdj<F>,
    spare: AdjScratch<F>,
    x: Features<F>,
    labels: Vec<u32>,
    train: Mask,
    /// GraphSAINT's loss weight of each row (empty for other samplers).
    weights: Vec<F>,
    /// GraphSAINT: each row's factor of the whole graph's Â.
    node_scale: Vec<F>,
    /// Reading buffers, for batches read from a store.
    io: RowsScratch,
}

impl<F: Scalar> Batch<F> {
    /// An empty batch, to be filled.
    pub fn new(norm: Norm) -> Self {
        Batch {
            nodes: Vec::new(),
            pos: Vec::new(),
            graph: Graph::empty(false),
            adj: NormAdj::empty(norm),
            spare: AdjScratch::default(),
            x: Features::dense(ndarray::Array2::zeros((0, 0))),
            labels: Vec::new(),
            train: Mask::default(),
            weights: Vec::new(),
            node_scale: Vec::new(),
            io: RowsScratch::default(),
        }
    }

    /// Makes room for batches of up to `max_nodes` nodes of `src` (their entries bounded by
    /// the `max_nodes` largest rows of Ã), so that filling them allocates nothing: what
    /// training calls once before its first batch.
    pub fn reserve(&mut self, src: &BatchSource<'_, F>, max_nodes: usize) {
        let n = src.n_nodes();
        let max_nodes = max_nodes.min(n);
        let (entries, dense_cols) = match &src.whole {
            Whole::Memory { graph: g, x } => {
                let mut degrees: Vec<usize> = (0..n).map(|i| g.degree(i)).collect();
                degrees.sort_unstable_by(|a, b| b.cmp(a));
                let e: usize = degrees[..max_nodes].iter().sum();
                (e, (!x.is_sparse()).then(|| x.n_cols()))
            }
            Whole::Store {
                rows, max_entries, ..
            } => (*max_entries, Some(rows.n_features())),
        };
        // Ã's rows: every stored entry and a self-loop.
        let tilde = entries + max_nodes;
        self.nodes.reserve(max_nodes);
        self.pos.resize(n, u32::MAX);
        self.graph.reserve_induced(max_nodes, entries);
        self.adj.reserve(max_nodes, tilde, &mut self.spare);
        self.labels.reserve(max_nodes);
        self.weights.reserve(max_nodes);
        self.node_scale.reserve(max_nodes);
        let mut train = std::mem::take(&mut self.train).into_indices();
        train.clear();
        train.reserve(max_nodes);
        self.train = Mask::try_from_indices(train, 0).unwrap_or_default();
        if let Some(d) = dense_cols {
            let v = Vec::with_capacity(max_nodes * d);
            if let Ok(x) = ndarray::Array2::from_shape_vec((0, d), v) {
                self.x = Features::dense(x);
            }
        }
    }

    /// Makes this batch `index` of `epoch` for `seed` of `sampler` on `src`: its nodes, the
    /// subgraph they induce ([`Graph::induced_into`]), its Â normalised on the batch (bit for
    /// bit `NormAdj::new` of that subgraph, with a fresh id), its rows of X, labels, and its
    /// training nodes (in the batch's numbering).
    ///
    /// # Errors
    /// [`Error::Mismatch`] when the sampler gives a node beyond the graph; [`Error::Partition`]
    /// when its nodes are not distinct and ascending.
    pub fn fill(
        &mut self,
        src: &BatchSource<'_, F>,
        sampler: &dyn NodeSampler,
        seed: u64,
        epoch: usize,
        index: usize,
    ) -> Result<()> {
        let n = src.n_nodes();
        match &src.whole {
            Whole::Memory { graph, .. } => {
                sampler.check_graph(graph)?;
                sampler.nodes_into(graph, seed, epoch, index, &mut self.nodes);
            }
            Whole::Store { .. } => {
                let Some(c) = sampler.cluster() else {
                    return Err(Error::Config(crate::ConfigError::Unsupported {
                        what: "batches read from a store with a sampler other than \
                               Cluster-GCN's (the others draw from the graph in memory)",
                    }));
                };
                if c.n_nodes() != n {
                    return Err(Error::Mismatch {
                        what: "Cluster-GCN sampler: the store's nodes vs its parts' nodes".into(),
                        expected: n,
                        got: c.n_nodes(),
                    });
                }
                c.batch_nodes(seed, epoch, index, &mut self.nodes);
            }
        }
        if let Some(&bad) = self.nodes.iter().find(|&&v| v as usize >= n) {
            return Err(Error::Mismatch {
                what: format!("a sampled node ({bad}) vs the graph's nodes"),
                expected: n,
                got: bad as usize + 1,
            });
        }
        // The sampler's contract: distinct ids, ascending (a crate's own sampler may break it).
        if let Some(w) = self.nodes.windows(2).find(|w| w[0] >= w[1]) {
            return Err(Error::Partition(format!(
                "the sampler gave nodes out of order or repeated ({} then {}) in batch {index} \
                 of epoch {epoch}: a batch's nodes must be distinct and ascending",
                w[0], w[1]
            )));
        }
        self.pos.resize(n, u32::MAX);
        match &src.whole {
            Whole::Memory { graph, .. } => {
                graph.induced_into(&self.nodes, &mut self.pos, &mut self.graph);
            }
            Whole::Store { rows, .. } => {
                rows.induced_into(&self.nodes, &mut self.pos, &mut self.graph, &mut self.io)?;
            }
        }
        self.adj
            .assign_filtered(&self.graph, src.norm, |_, _| true, &mut self.spare);
        self.adj
            .enhance_diagonal(F::from_f64_lossy(sampler.diag_lambda()));
        match &src.whole {
            Whole::Memory { x, .. } => x.select_rows_into(&self.nodes, &mut self.x),
            Whole::Store {
                rows, normalize, ..
            } => rows.features_into(&self.nodes, *normalize, &mut self.x, &mut self.io)?,
        }
        self.labels.clear();
        self.labels
            .extend(self.nodes.iter().map(|&v| src.labels[v as usize]));
        // The mask rebuilt in the last batch's storage (ascending already: no reordering).
        let mut train = std::mem::take(&mut self.train).into_indices();
        train.clear();
        train.extend(
            (0..self.nodes.len() as u32).filter(|&k| src.in_train[self.nodes[k as usize] as usize]),
        );
        self.train = Mask::try_from_indices(train, self.nodes.len())?;
        self.weights.clear();
        if let (Some(counts), Some(g)) = (sampler.saint(), src.graph()) {
            self.saint(g, src, counts);
        }
        Ok(())
    }

    /// GraphSAINT's normalisation (`docs/MATH.md` §22): Â's entry (v, u) becomes the whole
    /// graph's Â_vu · C_v / C_vu, and training row v's loss weight N_s / (C_v · |train|)
    /// (counts of 0 taken as 1).
    fn saint(&mut self, g: &Graph, src: &BatchSource<'_, F>, counts: &super::SaintCounts) {
        let ptr = &counts.ptr;
        let count = |c: u32| f64::from(c.max(1));
        // Each node's factor of the whole graph's Â (D̃^-1/2 or D̃^-1, rounded as `NormAdj`
        // rounds it), once a node rather than once an entry.
        let norm = src.norm;
        self.node_scale.clear();
        self.node_scale.extend(self.nodes.iter().map(|&v| {
            let d = (ptr[v as usize + 1] - ptr[v as usize]) as f64;
            match norm {
                Norm::Symmetric => F::from_f64_lossy(1.0 / d.sqrt()),
                Norm::Row => F::from_f64_lossy(1.0 / d),
            }
        }));
        let (nodes, scale) = (&self.nodes, &self.node_scale);
        // The whole graph's entry of each of the batch's entries: the batch's row k is the
        // whole row of its node filtered (same order), so one merge a row finds them, in the
        // order `rewrite_values` visits the entries.
        let mut row = usize::MAX;
        let mut full = None;
        self.adj.rewrite_values(
            |i, j| {
                let v = nodes[i];
                if i != row {
                    row = i;
                    full = Some((ptr[v as usize]..).zip(tilde_row(g.neighbors(v as usize), v)));
                }
                let u = nodes[j as usize];
                let c_vu = full
                    .as_mut()
                    .and_then(|f| f.find(|&(_, w)| w == u))
                    .map_or(0, |(e, _)| counts.entry[e]);
                let base = match norm {
                    Norm::Symmetric => scale[i] * scale[j as usize],
                    Norm::Row => scale[i],
                };
                base * F::from_f64_lossy(count(counts.node[v as usize]) / count(c_vu))
            },
            &mut self.spare,
        );
        let scale = counts.subgraphs as f64 / src.n_train.max(1) as f64;
        self.weights.resize(self.nodes.len(), F::zero());
        for &k in self.train.indices() {
            let v = self.nodes[k as usize];
            self.weights[k as usize] = F::from_f64_lossy(scale / count(counts.node[v as usize]));
        }
    }

    /// The batch's nodes (ids in the whole graph), ascending: node k of the batch is
    /// `nodes()[k]`.
    pub fn nodes(&self) -> &[u32] {
        &self.nodes
    }
    /// The subgraph the nodes induce.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }
    /// Its Â, normalised on the batch.
    pub fn adj(&self) -> &NormAdj<F> {
        &self.adj
    }
    /// Its rows of X.
    pub fn x(&self) -> &Features<F> {
        &self.x
    }
    /// Its labels.
    pub fn labels(&self) -> &[u32] {
        &self.labels
    }
    /// Its training nodes, in the batch's numbering.
    pub fn train(&self) -> &Mask {
        &self.train
    }
    /// The loss weight of each row (GraphSAINT's loss normalisation; `None` for samplers
    /// without it, whose loss is the mean over the batch's training nodes).
    pub fn loss_weights(&self) -> Option<&[F]> {
        // (A non-empty batch of GraphSAINT's has a weight per row; an empty one trains nothing.)
        (!self.weights.is_empty()).then_some(&self.weights[..])
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ClusterSampler, Clusters};
    use super::*;
    use crate::data::synthetic::Preset;

    #[test]
    fn a_batch_is_its_induced_subgraph_normalised_on_its_own() {
        let d = Preset::CoraLike.generate(3).unwrap();
        let s = ClusterSampler::new(&d.graph, 40, 5, Clusters::Community).unwrap();
        let src = BatchSource::new(
            &d.graph,
            Norm::Symmetric,
            &d.features,
            &d.labels,
            &d.split.train,
        )
        .unwrap();
        let mut b = Batch::<f32>::new(Norm::Symmetric);
        let mut pos = vec![u32::MAX; d.graph.n_nodes()];
        for index in [0, 3, 7] {
            let id_before = b.adj().id();
            b.fill(&src, &s, 11, 2, index).unwrap();
            assert_ne!(b.adj().id(), id_before);
            let mut g = Graph::empty(false);
            d.graph.induced_into(b.nodes(), &mut pos, &mut g);
            let fresh = NormAdj::<f32>::new(&g, Norm::Symmetric);
            assert_eq!(
                b.adj().a().indptr().raw_storage(),
                fresh.a().indptr().raw_storage()
            );
            assert_eq!(b.adj().a().indices(), fresh.a().indices());
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(b.adj().a().data()), bits(fresh.a().data()));
            assert_eq!(
                b.x().to_dense(),
                d.features.select_rows(b.nodes()).to_dense()
            );
            for (k, &v) in b.nodes().iter().enumerate() {
                assert_eq!(b.labels()[k], d.labels[v as usize]);
                let in_train = d.split.train.indices().binary_search(&v).is_ok();
                assert_eq!(
                    b.train().indices().binary_search(&(k as u32)).is_ok(),
                    in_train
                );
            }
        }
    }

    /// With Cluster-GCN's diagonal enhancement, a batch's Â is its subgraph's normalised on
    /// it, then enhanced: the same nodes and rows, the diagonal a + λ·a.
    #[test]
    fn a_batch_takes_its_sampler_s_diagonal_enhancement() {
        let d = Preset::CoraLike.generate(3).unwrap();
        let plain = ClusterSampler::new(&d.graph, 40, 5, Clusters::Community).unwrap();
        let enhanced = plain.clone().with_diag_lambda(1.5).unwrap();
        assert!(plain.clone().with_diag_lambda(-0.5).is_err());
        assert!(plain.clone().with_diag_lambda(f64::NAN).is_err());
        for norm in [Norm::Row, Norm::Symmetric] {
            let src =
                BatchSource::new(&d.graph, norm, &d.features, &d.labels, &d.split.train).unwrap();
            let (mut a, mut b) = (Batch::<f32>::new(norm), Batch::<f32>::new(norm));
            a.fill(&src, &plain, 11, 2, 3).unwrap();
            b.fill(&src, &enhanced, 11, 2, 3).unwrap();
            assert_eq!(a.nodes(), b.nodes());
            let mut want = a.adj().clone();
            want.enhance_diagonal(1.5);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(b.adj().a().data()), bits(want.a().data()));
            assert_ne!(bits(b.adj().a().data()), bits(a.adj().a().data()));
        }
    }

    /// A sampler that breaks the contract (a crate's own).
    struct Bad(Vec<u32>);

    impl NodeSampler for Bad {
        fn batches(&self) -> usize {
            1
        }
        fn max_nodes(&self) -> usize {
            self.0.len()
        }
        fn nodes_into(&self, _: &Graph, _: u64, _: usize, _: usize, nodes: &mut Vec<u32>) {
            nodes.clone_from(&self.0);
        }
        fn check_graph(&self, _: &Graph) -> Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_sampler_giving_bad_nodes_is_a_typed_error() {
        let d = Preset::CoraLike.generate(3).unwrap();
        let src = BatchSource::new(
            &d.graph,
            Norm::Symmetric,
            &d.features,
            &d.labels,
            &d.split.train,
        )
        .unwrap();
        let mut b = Batch::<f32>::new(Norm::Symmetric);
        for (nodes, repeated) in [
            (vec![3, 3], true),
            (vec![5, 2], true),
            (vec![1, 99_999], false),
        ] {
            let e = b.fill(&src, &Bad(nodes), 0, 0, 0).unwrap_err();
            if repeated {
                assert!(matches!(e, Error::Partition(_)), "{e}");
            } else {
                assert!(matches!(e, Error::Mismatch { .. }), "{e}");
            }
        }
        b.fill(&src, &Bad(vec![2, 5, 9]), 0, 0, 0).unwrap();
        assert_eq!(b.nodes(), &[2, 5, 9]);
    }

    #[test]
    fn sizes_that_do_not_match_the_graph_are_typed_errors() {
        let d = Preset::CoraLike.generate(3).unwrap();
        let short = &d.labels[1..];
        assert!(matches!(
            BatchSource::new(
                &d.graph,
                Norm::Symmetric,
                &d.features,
                short,
                &d.split.train
            ),
            Err(Error::Mismatch { .. })
        ));
    }

    /// Batches read from a store (Cluster-GCN's parts as ranges of rows) are the batches of the
    /// store's dataset in memory, bit for bit: nodes, subgraph, Â, features (f32 and f16
    /// stored, row-normalised or not), labels and training nodes; a sampler of another graph
    /// and a sampler other than Cluster-GCN's are errors.
    #[test]
    fn batches_read_from_a_store_are_the_in_memory_ones() {
        use crate::data::store::{write_store, FeatureDtype, Store, StoreRows};
        use crate::data::synthetic::{CitationLike, FeatureKind};
        let dir = std::env::temp_dir().join(format!("sparse-gcn-rows-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let p = CitationLike {
            n_nodes: 3000,
            n_edges: Some(15_000),
            n_features: 20,
            features: FeatureKind::Dense {
                center_distance: 2.0,
                cluster_variance: 1.0,
            },
            ids: crate::data::synthetic::NodeIds::Topics,
            ..CitationLike::default()
        };
        let mut d = p.generate(5).unwrap();
        // Non-negative features, so that row normalisation applies.
        d.features = Features::dense(d.features.to_dense().mapv(f32::abs));
        for (k, dtype) in [FeatureDtype::F32, FeatureDtype::F16]
            .into_iter()
            .enumerate()
        {
            let st = dir.join(format!("s{k}"));
            write_store(&d, None, &st, dtype).unwrap();
            let mem = Store::open(&st).unwrap().dataset(None).unwrap();
            let rows = StoreRows::open(&st).unwrap();
            assert!(rows.non_negative());
            for (normalize, norm, lambda) in [(false, Norm::Symmetric, 0.0), (true, Norm::Row, 0.5)]
            {
                let s = ClusterSampler::ranges(3000, 30, 4)
                    .unwrap()
                    .with_diag_lambda(lambda)
                    .unwrap();
                let mut x = mem.features.clone();
                if normalize {
                    x.row_normalize();
                }
                let a =
                    BatchSource::new(&mem.graph, norm, &x, &mem.labels, &mem.split.train).unwrap();
                let b = BatchSource::from_store(&rows, norm, normalize, &s).unwrap();
                let (mut ba, mut bb) = (Batch::<f32>::new(norm), Batch::<f32>::new(norm));
                ba.reserve(&a, s.max_nodes());
                bb.reserve(&b, s.max_nodes());
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                for (epoch, index) in [(0, 0), (0, 7), (3, 2), (3, 7)] {
                    ba.fill(&a, &s, 9, epoch, index).unwrap();
                    bb.fill(&b, &s, 9, epoch, index).unwrap();
                    assert_eq!(ba.nodes(), bb.nodes());
                    assert!(ba.nodes().len() >= 200);
                    assert_eq!(ba.graph().n_edges(), bb.graph().n_edges());
                    let (ga, gb) = (ba.adj().a(), bb.adj().a());
                    assert_eq!(ga.indptr().raw_storage(), gb.indptr().raw_storage());
                    assert_eq!(ga.indices(), gb.indices());
                    assert_eq!(
                        bits(ga.data()),
                        bits(gb.data()),
                        "{dtype:?} {epoch} {index}"
                    );
                    let (xa, xb) = (ba.x().to_dense(), bb.x().to_dense());
                    assert_eq!(
                        bits(xa.as_slice().unwrap()),
                        bits(xb.as_slice().unwrap()),
                        "{dtype:?} {normalize}"
                    );
                    assert_eq!(ba.labels(), bb.labels());
                    assert_eq!(ba.train().indices(), bb.train().indices());
                }
            }
            // Another graph's sampler; a sampler that needs the graph.
            let other = ClusterSampler::ranges(2999, 30, 4).unwrap();
            assert!(matches!(
                BatchSource::<f32>::from_store(&rows, Norm::Symmetric, false, &other),
                Err(Error::Mismatch { .. })
            ));
            let s = ClusterSampler::ranges(3000, 30, 4).unwrap();
            let b = BatchSource::<f32>::from_store(&rows, Norm::Symmetric, false, &s).unwrap();
            let saint = crate::sample::SaintSampler::new(
                &mem.graph,
                crate::sample::SaintKind::Node,
                200,
                Some(2),
                5.0,
                0,
            )
            .unwrap();
            let mut bb = Batch::<f32>::new(Norm::Symmetric);
            assert!(matches!(
                bb.fill(&b, &saint, 1, 0, 0),
                Err(Error::Config(crate::ConfigError::Unsupported { .. }))
            ));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
