//! `train` under `mpirun` (feature `mpi`): the job, the partition, each rank's part of the
//! data, the seeds one after another on every rank, and the run's traffic and memory for the
//! report. Without the feature (or without a launcher) there is no job and `train` runs as one
//! process.

use sparse_gcn::dist::RankPrepared;
use sparse_gcn::nn::Model;
use sparse_gcn::train::run::{Prepare, Prepared, Summary};
use sparse_gcn::train::{EpochHook, RunResult, TrainConfig};
use sparse_gcn::Result;

/// What a distributed run adds to `train --json`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Report {
    ranks: usize,
    comm_bytes: u64,
    comm_bytes_model: Option<u64>,
    halo_rows_max: u64,
    peak_rss_bytes_max: u64,
    comm_s_max: f64,
}

impl Report {
    pub(crate) fn json(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert("ranks".into(), self.ranks.into());
        m.insert("comm_bytes".into(), self.comm_bytes.into());
        m.insert("comm_bytes_model".into(), self.comm_bytes_model.into());
        m.insert("halo_rows_max".into(), self.halo_rows_max.into());
        m.insert("peak_rss_bytes_max".into(), self.peak_rss_bytes_max.into());
        m.insert("comm_s_max".into(), self.comm_s_max.into());
        m
    }
}

/// Whether a launcher started this process (`mpirun`/`mpiexec` of Open MPI, MPICH or Hydra).
#[cfg(feature = "mpi")]
pub(crate) fn launched() -> bool {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK"]
        .iter()
        .any(|v| std::env::var_os(v).is_some())
}

/// The job's size a launcher announces (before MPI starts), when it runs this process.
#[cfg(feature = "mpi")]
pub(crate) fn launched_size() -> Option<usize> {
    if !launched() {
        return None;
    }
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MPI_LOCALNRANKS"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.trim().parse().ok())
}

#[cfg(feature = "mpi")]
pub(crate) use with_mpi::{
    agree, content_hash, fit_batches, fit_seeds, prepare, start, time_all_to_all, Job,
};

#[cfg(feature = "mpi")]
mod with_mpi {
    use sparse_gcn::dist::backend::mpi::{DistAdj, Mpi};
    use sparse_gcn::dist::run::model::HaloTotals;
    use sparse_gcn::dist::run::plan::CommSample;
    use sparse_gcn::dist::{prepare_rank, prepare_rank_store, RowSource};
    use sparse_gcn::nn::ModelConfig;
    use sparse_gcn::train::run::{param_count, Watch};
    use sparse_gcn::train::{data_parallel_bytes, fit_model, FitOptions, Replicas, TrainData};

    use sparse_gcn::data::content::ContentHash;
    use sparse_gcn::data::io::{load_ogb_skeleton, OgbOptions};
    use sparse_gcn::data::Features;

    use crate::cli::DataArgs;

    use super::*;

    /// The MPI job of this process.
    pub(crate) type Job = Mpi;

    /// The job, when a launcher started this process.
    pub(crate) fn start() -> Result<Option<Job>> {
        if !launched() {
            return Ok(None);
        }
        let job = Mpi::init()?;
        crate::cli::RANK.store(job.rank(), std::sync::atomic::Ordering::Relaxed);
        Ok(Some(job))
    }

    /// The all-to-all timings of `commbench`: every rank sends 8, 64, …, up to `max_bytes`
    /// bytes to every other rank; repetitions so that each size runs about 0.2 s (5 to 200).
    ///
    /// # Errors
    /// [`sparse_gcn::Error::Distributed`] in a 1-rank job, or from MPI's counts.
    pub(crate) fn time_all_to_all(job: &Job, max_bytes: usize) -> Result<Vec<CommSample>> {
        if job.size() < 2 {
            return Err(sparse_gcn::Error::Distributed(
                "commbench needs 2 or more ranks (mpirun -np P)".into(),
            ));
        }
        let mut out = Vec::new();
        let mut bytes = 8usize;
        // Up to the largest size whose exchange still counts in C ints.
        let fits = |b: usize| b * (job.size() - 1) <= i32::MAX as usize;
        while bytes <= max_bytes.max(8) && fits(bytes) {
            // A first estimate from one exchange sets the repetitions.
            let once = job.time_all_to_all(bytes, 1, 1)?;
            let reps = ((0.2 / once.max(1e-7)) as usize).clamp(5, 200);
            let seconds = job.time_all_to_all(bytes, 2, reps)?;
            out.push(CommSample {
                ranks: job.size(),
                bytes_per_peer: bytes as u64,
                seconds,
            });
            bytes *= 8;
        }
        Ok(out)
    }

    /// Whether `path` is a store with dense features (a store that cannot be opened is left
    /// to the loader, which names what is wrong).
    fn dense_store(path: &std::path::Path) -> bool {
        path.join(sparse_gcn::data::store::HEADER).is_file()
            && sparse_gcn::data::store::Store::open(path).is_ok_and(|s| !s.header().sparse_features)
    }

    /// This rank's part of the data, prepared without the whole Â: a synthetic preset draws
    /// only the rank's rows of X, an OGB folder's feature file is streamed keeping only them,
    /// a store's dense features are read by rows (the rank's only; its graph too, when the
    /// store holds the order the run applies: [`prepare_rank_store`]); any other dataset is
    /// read whole, then only the rank's rows of X are kept.
    pub(crate) fn prepare(job: &Job, data: &DataArgs, p: &Prepare) -> Result<RankPrepared> {
        let opts = data.load_options();
        let ogb = |path: &std::path::Path| {
            path.join("raw").is_dir() && opts.features.is_none() && opts.labels.is_none()
        };
        if let (Some(path), None) = (&data.data, &data.features) {
            if dense_store(path) {
                let (ranks, rank) = (job.size(), job.rank());
                return prepare_rank_store(path, &opts, p, ranks, rank, job);
            }
        }
        let (skeleton, source) = match (&data.data, &data.features) {
            (None, None) => (
                data.preset().generate_skeleton(data.seed())?,
                RowSource::Synthetic {
                    params: data.preset().params(),
                    seed: data.seed(),
                },
            ),
            (Some(path), None) if ogb(path) => {
                let o = OgbOptions {
                    split: opts.split.clone(),
                    direction: opts.direction,
                    sparse_features_below: opts.sparse_features_below,
                };
                let (skeleton, file) = load_ogb_skeleton(path, &o)?;
                let source = match file {
                    Some(file) => RowSource::Ogb {
                        file,
                        sparse_below: opts.sparse_features_below,
                    },
                    // Structure only: no features (training refuses it, naming the fix).
                    None => RowSource::Whole(Features::dense(ndarray::Array2::zeros((
                        skeleton.graph.n_nodes(),
                        0,
                    )))),
                };
                (skeleton, source)
            }
            _ => {
                let (skeleton, x) = data.load()?.into_skeleton();
                (skeleton, RowSource::Whole(x))
            }
        };
        prepare_rank(skeleton, source, p, job.size(), job.rank(), job)
    }

    /// What `train --save` records of the data (as one process records it): rank 0 loads the
    /// whole dataset once, hashes it and drops it before the ranks prepare their parts; the
    /// other ranks get `None`. The ranks agree first, so that a rank 0 that cannot load it
    /// leaves no other rank waiting.
    ///
    /// # Errors
    /// As loading the data; [`sparse_gcn::Error::Distributed`] on the other ranks then.
    pub(crate) fn content_hash(job: &Job, data: &DataArgs) -> Result<Option<ContentHash>> {
        let hash = if job.rank() == 0 {
            data.load().map(|d| Some(ContentHash::of(&d)))
        } else {
            Ok(None)
        };
        if !job.all(hash.is_ok()) {
            return Err(hash.err().unwrap_or_else(|| {
                sparse_gcn::Error::Distributed(
                    "rank 0 could not load the data to record its content hash".into(),
                )
            }));
        }
        hash
    }

    /// Trains every seed across the job's ranks, one seed after another (every rank makes the
    /// same collective calls in the same order).
    pub(crate) fn fit_seeds(
        job: &Job,
        r: RankPrepared,
        cfg: &TrainConfig,
        seeds: &[u64],
        on_done: &(dyn Fn(&RunResult, &mut Model<f32>) + Sync),
    ) -> Result<(Vec<RunResult>, Report)> {
        let RankPrepared {
            summary,
            part,
            rows,
            data: local,
            graph_rows,
        } = r;
        let rank = job.rank();
        let halo_of = |m: sparse_gcn::kernels::CsrView<'_, f32>| {
            job.sum_u64(part.halo_of_rows(rank, m.indices()).len() as u64)
        };
        let fwd = halo_of(rows.a());
        let halo = HaloTotals {
            ranks: job.size() as u64,
            fwd,
            bwd: if rows.is_symmetric() {
                fwd
            } else {
                halo_of(rows.a_t())
            },
        };
        let mut adj = DistAdj::from_rows(&rows, part, rank)?;
        drop(rows);
        if let Some((ip, nb)) = graph_rows {
            adj = adj.with_graph_rows(ip, nb, summary.prepare.norm, summary.directed);
        }
        let data = TrainData::new(
            &adj,
            &local.features,
            &local.labels,
            summary.n_classes,
            &local.split,
        );
        let mut runs = Vec::with_capacity(seeds.len());
        adj.count(true);
        for &seed in seeds {
            let (r, mut model) = fit_model(&data, cfg, seed, &FitOptions::default())?;
            on_done(&r, &mut model);
            runs.push(r);
        }
        adj.count(false);
        let stats = adj.stats();
        let report = Report {
            ranks: job.size(),
            comm_bytes: job.sum_u64(adj.bytes()),
            comm_bytes_model: model_bytes(&summary, cfg, &halo, &runs),
            halo_rows_max: job.max_u64(stats.halo_rows as u64),
            peak_rss_bytes_max: job.max_u64(crate::cli::peak_rss_bytes()),
            comm_s_max: job.max_u64((adj.comm_seconds() * 1e9) as u64) as f64 * 1e-9,
        };
        Ok((runs, report))
    }

    /// `r`, agreed by every rank ([`sparse_gcn::train::agree`]).
    pub(crate) fn agree<T>(job: &Job, r: Result<T>) -> Result<T> {
        sparse_gcn::train::agree(Some(Replicas(job)), r)
    }

    /// Trains every seed on mini-batches across the job's ranks, each holding the whole data
    /// `p` and training its share of every step's batches (`--batches-per-step`), one seed
    /// after another.
    pub(crate) fn fit_batches(
        job: &Job,
        p: &Prepared,
        cfg: &TrainConfig,
        seeds: &[u64],
        on_epoch: Option<EpochHook<'_>>,
        on_done: &(dyn Fn(&RunResult, &mut Model<f32>) + Sync),
    ) -> Result<(Vec<RunResult>, Report)> {
        let counted = Counted {
            job,
            ranks: job.size(),
            bytes: 0.into(),
            ns: 0.into(),
        };
        let watch = Watch {
            on_epoch,
            replicas: Some(Replicas(&counted)),
            interrupt: None,
        };
        let mut runs = p.fit_seeds_watched(cfg, seeds, 0, None, watch, on_done)?;
        // Each rank built its share of the batches: the report counts every rank's.
        for r in &mut runs {
            if let Some(b) = r.batches.as_mut() {
                b.built = job.sum_u64(b.built);
                b.nodes_sum = job.sum_u64(b.nodes_sum);
                b.edges_sum = job.sum_u64(b.edges_sum);
                b.nodes_max = job.max_u64(b.nodes_max as u64) as usize;
                b.edges_max = job.max_u64(b.edges_max as u64) as usize;
            }
        }
        let s = p.summary();
        let model = ModelConfig {
            in_dim: s.in_dim,
            out_dim: s.n_classes,
            ..cfg.model.clone()
        };
        let params = param_count(&model);
        let steps: u64 = runs
            .iter()
            .map(|r| {
                let per_epoch = r.batches.map_or(0, |b| b.batches_per_epoch);
                r.history.len() as u64 * per_epoch.div_ceil(cfg.batches_per_step) as u64
            })
            .sum();
        use std::sync::atomic::Ordering::Relaxed;
        let report = Report {
            ranks: job.size(),
            comm_bytes: job.sum_u64(counted.bytes.load(Relaxed)),
            comm_bytes_model: Some(data_parallel_bytes(params, steps, job.size())),
            halo_rows_max: 0,
            peak_rss_bytes_max: job.max_u64(crate::cli::peak_rss_bytes()),
            comm_s_max: job.max_u64(counted.ns.load(Relaxed)) as f64 * 1e-9,
        };
        Ok((runs, report))
    }
}

/// A data-parallel run's exchanges (`train --batch … --batches-per-step B` under mpirun): the
/// job's sums, the payload bytes this rank hands MPI and the time they take counted — the
/// steps' sums, what `data_parallel_bytes` models; the ranks' agreements that all is well
/// ([`Collective::all`](sparse_gcn::graph::Collective::all), one word) are not counted.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
struct Counted<'j, C> {
    job: &'j C,
    ranks: usize,
    bytes: std::sync::atomic::AtomicU64,
    ns: std::sync::atomic::AtomicU64,
}

impl<C: sparse_gcn::graph::Collective> sparse_gcn::graph::Collective for Counted<'_, C> {
    fn spans_processes(&self) -> bool {
        self.job.spans_processes()
    }
    fn process(&self) -> (usize, usize) {
        self.job.process()
    }
    fn sum_words(&self, words: &mut [i64]) {
        use std::sync::atomic::Ordering::Relaxed;
        let t = std::time::Instant::now();
        self.job.sum_words(words);
        if self.ranks > 1 {
            self.bytes.fetch_add(8 * words.len() as u64, Relaxed);
        }
        self.ns.fetch_add(t.elapsed().as_nanos() as u64, Relaxed);
    }
    fn all(&self, yes: bool) -> bool {
        self.job.all(yes)
    }
}

/// What [`sparse_gcn::dist::run::model`] predicts for the runs, where it models the model: Kipf's
/// GCN without normalisation layers, checkpointing or DropEdge, and no aggregate-first first
/// layer on sparse features.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
fn model_bytes(
    s: &Summary,
    cfg: &TrainConfig,
    halo: &sparse_gcn::dist::run::model::HaloTotals,
    runs: &[RunResult],
) -> Option<u64> {
    use sparse_gcn::dist::run::model::{gcn_run_bytes, GcnShape};
    use sparse_gcn::nn::{Arch, NormKind, Order};
    let m = &cfg.model;
    if m.arch != Arch::GCN || m.norm != NormKind::None || m.checkpoint > 0 || m.drop_edge > 0.0 {
        return None;
    }
    let mut dims = vec![s.in_dim];
    dims.extend(std::iter::repeat_n(m.hidden_dim, m.n_layers - 1));
    dims.push(s.n_classes);
    let mut total = 0;
    for r in runs {
        if s.sparse_features && r.orders.first() == Some(&Order::AggregateFirst) {
            return None;
        }
        let shape = GcnShape {
            dims: dims.clone(),
            orders: r.orders.clone(),
            bias: m.bias,
            dropout: m.dropout > 0.0,
            input_dropout: m.input_dropout > 0.0,
        };
        // (An earlier epoch's weights restored are evaluated again.)
        let final_eval = r.best_epoch + 1 != r.history.len();
        let epochs = r.history.len() as u64;
        total += gcn_run_bytes(halo, &shape, s.sparse_features, epochs, final_eval);
    }
    Some(total)
}

#[cfg(not(feature = "mpi"))]
pub(crate) use without_mpi::{
    agree, content_hash, fit_batches, fit_seeds, prepare, start, time_all_to_all, Job,
};

#[cfg(not(feature = "mpi"))]
mod without_mpi {
    use super::*;

    /// No job: this build trains in one process.
    pub(crate) enum Job {}

    /// Never a job without the `mpi` feature.
    pub(crate) fn start() -> Result<Option<Job>> {
        Ok(None)
    }

    /// Unreachable: there is no job to time.
    pub(crate) fn time_all_to_all(
        job: &Job,
        _: usize,
    ) -> Result<Vec<sparse_gcn::dist::run::plan::CommSample>> {
        match *job {}
    }

    /// Unreachable: there is no job to load for.
    pub(crate) fn content_hash(
        job: &Job,
        _: &crate::cli::DataArgs,
    ) -> Result<Option<sparse_gcn::data::content::ContentHash>> {
        match *job {}
    }

    /// Unreachable: there is no job to prepare for.
    pub(crate) fn prepare(
        job: &Job,
        _: &crate::cli::DataArgs,
        _: &Prepare,
    ) -> Result<RankPrepared> {
        match *job {}
    }

    /// Unreachable: there is no job to agree with.
    pub(crate) fn agree<T>(job: &Job, _: Result<T>) -> Result<T> {
        match *job {}
    }

    /// Unreachable: there is no job to train on.
    pub(crate) fn fit_batches(
        job: &Job,
        _: &Prepared,
        _: &TrainConfig,
        _: &[u64],
        _: Option<EpochHook<'_>>,
        _: &(dyn Fn(&RunResult, &mut Model<f32>) + Sync),
    ) -> Result<(Vec<RunResult>, Report)> {
        match *job {}
    }

    /// Unreachable: there is no job to train on.
    pub(crate) fn fit_seeds(
        job: &Job,
        _: RankPrepared,
        _: &TrainConfig,
        _: &[u64],
        _: &(dyn Fn(&RunResult, &mut Model<f32>) + Sync),
    ) -> Result<(Vec<RunResult>, Report)> {
        match *job {}
    }
}
