//! A row-partitioned run is the run of one process, bit for bit, for every model of the stack:
//! every epoch's losses and accuracies, the test accuracy and loss, every trained weight, and
//! the per-layer smoothing metrics.
//!
//! A test without the harness (the ranks of an MPI job must make the same collective calls in
//! the same order, one case after another): run it under a launcher, as CI does,
//!
//! ```text
//! cargo build --release --features mpi --tests
//! mpirun --oversubscribe --bind-to none -np 4 target/release/deps/distributed-…
//! ```
//!
//! or as `cargo test --features mpi --test distributed` (a 1-rank job). Every rank trains each
//! case on the whole graph in its own process too, and compares.

use sparse_gcn::data::synthetic::CitationLike;
use sparse_gcn::data::{Dataset, Features};
use sparse_gcn::dist::backend::mpi::{DistAdj, Mpi};
use sparse_gcn::dist::{rank_data, RowPartition};
use sparse_gcn::graph::{Direction, Graph, Norm, NormAdj, NormRows};
use sparse_gcn::nn::pair_norm::PairNormMode;
use sparse_gcn::nn::{Arch, JkMode, Model, ModelConfig, NormKind, Order};
use sparse_gcn::train::{
    fit_model, DropEdgeSource, FitOptions, RunResult, StopRule, TrainConfig, TrainData,
};

/// Everything a run computes, as bits.
fn fingerprint(r: &RunResult, model: &mut Model<f32>) -> Vec<u64> {
    let mut v: Vec<u64> = r
        .history
        .iter()
        .flat_map(|e| [e.train_loss, e.train_acc, e.val_loss, e.val_acc].map(f64::to_bits))
        .collect();
    v.extend([
        r.test_acc.to_bits(),
        r.test_loss.to_bits(),
        r.best_epoch as u64,
    ]);
    // The per-layer smoothing metrics, recorded every other epoch.
    for rec in &r.layer_metrics {
        let m = &rec.metrics;
        v.extend([
            rec.epoch as u64,
            rec.layer as u64,
            m.rank.unwrap_or(usize::MAX) as u64,
        ]);
        v.extend([m.dirichlet, m.mad_global, m.mad_neighbors, m.mean_cosine].map(f64::to_bits));
    }
    model.visit_params(&mut |_, p| {
        v.extend(p.value.iter().map(|w| u64::from(w.to_bits())));
    });
    v
}

struct Case {
    name: &'static str,
    model: ModelConfig,
    norm: Norm,
    sparse: bool,
    stop: StopRule,
    /// On a directed version of the graph (some arcs one way only).
    directed: bool,
}

fn cases() -> Vec<Case> {
    let deep = |arch: Arch, norm: NormKind| ModelConfig {
        arch,
        n_layers: 4,
        hidden_dim: 12,
        norm,
        ..ModelConfig::default()
    };
    let mut v = vec![
        Case {
            name: "kipf, sparse features, transform first",
            model: ModelConfig {
                order: Order::TransformFirst,
                ..ModelConfig::default()
            },
            norm: Norm::Symmetric,
            sparse: true,
            stop: StopRule::Never,
            directed: false,
        },
        Case {
            name: "kipf, sparse features, aggregate first",
            model: ModelConfig {
                order: Order::AggregateFirst,
                ..ModelConfig::default()
            },
            norm: Norm::Symmetric,
            sparse: true,
            stop: StopRule::Kipf { window: 2 },
            directed: false,
        },
        Case {
            name: "kipf, row-normalised Â (not symmetric), dense",
            model: ModelConfig::default(),
            norm: Norm::Row,
            sparse: false,
            stop: StopRule::Patience { patience: 2 },
            directed: false,
        },
        Case {
            name: "residual, BatchNorm, checkpointed",
            model: ModelConfig {
                checkpoint: 2,
                ..deep(Arch::RESIDUAL, NormKind::Batch)
            },
            norm: Norm::Symmetric,
            sparse: false,
            stop: StopRule::Never,
            directed: false,
        },
        Case {
            name: "plain, DropEdge, sparse aggregate first",
            model: ModelConfig {
                drop_edge: 0.3,
                order: Order::AggregateFirst,
                ..deep(Arch::GCN, NormKind::None)
            },
            norm: Norm::Symmetric,
            sparse: true,
            stop: StopRule::Never,
            directed: false,
        },
        Case {
            name: "residual, DropEdge, row-normalised Â",
            model: ModelConfig {
                drop_edge: 0.5,
                ..deep(Arch::RESIDUAL, NormKind::None)
            },
            norm: Norm::Row,
            sparse: false,
            stop: StopRule::Never,
            directed: false,
        },
        Case {
            name: "plain, PairNorm",
            model: deep(Arch::GCN, NormKind::Pair(PairNormMode::Pn)),
            norm: Norm::Symmetric,
            sparse: true,
            stop: StopRule::Never,
            directed: false,
        },
    ];
    for arch in [
        Arch::GCNII,
        Arch::Jk(JkMode::Concat),
        Arch::Jk(JkMode::Max),
        Arch::Jk(JkMode::Attention),
        Arch::SGC,
        Arch::APPNP,
    ] {
        v.push(Case {
            name: arch.name(),
            model: {
                // K = 3 for SGC and APPNP (the others have no K).
                let mut m = deep(arch, NormKind::None);
                m.arch.set("k", 3.0).unwrap();
                m
            },
            norm: Norm::Row,
            sparse: false,
            stop: StopRule::Never,
            directed: false,
        });
    }
    for (name, drop_edge, norm, sparse) in [
        (
            "plain, directed, DropEdge, sparse",
            0.3,
            Norm::Symmetric,
            true,
        ),
        (
            "residual, directed, DropEdge, row-normalised Â",
            0.5,
            Norm::Row,
            false,
        ),
    ] {
        let arch = if sparse { Arch::GCN } else { Arch::RESIDUAL };
        v.push(Case {
            name,
            model: ModelConfig {
                drop_edge,
                ..deep(arch, NormKind::None)
            },
            norm,
            sparse,
            stop: StopRule::Never,
            directed: true,
        });
    }
    v
}

fn main() {
    let job = Mpi::init().expect("MPI");
    let mut d: Dataset = CitationLike {
        n_nodes: 700,
        ..Default::default()
    }
    .generate(5)
    .expect("synthetic data");
    d.features.row_normalize();
    let dense = Features::dense(d.features.to_dense());
    let sparse = d.features.clone().into_sparse_if(1.0);
    // A directed graph: every stored entry (i, j) of the undirected one as an arc, but a third
    // of them one way only.
    let arcs: Vec<(u32, u32)> = (0..d.graph.n_nodes())
        .flat_map(|i| d.graph.neighbors(i).iter().map(move |&j| (i as u32, j)))
        .filter(|&(i, j)| (i + 2 * j) % 3 != 0)
        .collect();
    let directed = Graph::try_from_edges(d.graph.n_nodes(), &arcs, Direction::Directed)
        .expect("the directed graph");
    let mut failed = Vec::new();
    for (i, case) in cases().into_iter().enumerate() {
        d.features = if case.sparse {
            sparse.clone()
        } else {
            dense.clone()
        };
        let graph = if case.directed { &directed } else { &d.graph };
        let adj = NormAdj::<f32>::new(graph, case.norm);
        let cfg = TrainConfig {
            epochs: 6,
            stop: case.stop,
            model: case.model.clone(),
            ..TrainConfig::default()
        };
        let metrics = FitOptions {
            metrics_every: 2,
            rank_sample: Some(64),
            ..FitOptions::default()
        };
        let opts = FitOptions {
            drop_edge: Some(DropEdgeSource {
                graph,
                norm: case.norm,
            }),
            ..metrics
        };
        let (r, mut m) = fit_model(&TrainData::of(&adj, &d), &cfg, 1, &opts).expect("one process");
        assert!(
            r.layer_metrics.len() >= 3 && r.layer_metrics.iter().all(|l| l.metrics.rank.is_some()),
            "{}: the metrics were recorded",
            case.name
        );
        let whole = fingerprint(&r, &mut m);
        let part = RowPartition::of_graph(adj.a().indptr().raw_storage(), job.size())
            .expect("a partition");
        // Every other case builds the rank's rows of Â from the graph alone, as `train` does.
        let dist = if i % 2 == 0 {
            DistAdj::new(&adj, part, job.rank())
        } else {
            let rows = NormRows::new(graph, case.norm, part.range(job.rank()));
            DistAdj::from_rows(&rows, part, job.rank())
        }
        .expect("the rank's Â")
        .with_graph(graph, case.norm);
        let local = rank_data(&d, dist.range()).expect("the rank's data");
        let data = TrainData::new(
            &dist,
            &local.features,
            &local.labels,
            d.n_classes,
            &local.split,
        );
        let (rd, mut md) = fit_model(&data, &cfg, 1, &metrics).expect("distributed");
        let got = fingerprint(&rd, &mut md);
        if got != whole {
            failed.push(case.name);
        }
        if job.rank() == 0 {
            println!(
                "{}: {} at {} ranks (test acc {:.3}, {} epochs)",
                case.name,
                if got == whole { "identical" } else { "DIFFERS" },
                job.size(),
                rd.test_acc,
                rd.history.len()
            );
        }
    }
    assert!(failed.is_empty(), "rank {}: differ: {failed:?}", job.rank());
}
