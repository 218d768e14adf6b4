//! Mini-batch training through `train_model` with `FitOptions::batches` (Cluster-GCN's
//! sampler): one batch of every node is full-batch training bit for bit, for every
//! architecture, on dense and sparse features; smaller batches learn, and replay bit for bit in
//! pools of 1 and 2 threads.

use sparse_gcn::data::synthetic::CitationLike;
use sparse_gcn::data::{Dataset, Features};
use sparse_gcn::graph::{Norm, NormAdj};
use sparse_gcn::nn::{Arch, ModelConfig, NormKind, Order};
use sparse_gcn::sample::{BatchConfig, ClusterSampler, Clusters, Fanouts, NodeSampler, SaintKind};
use sparse_gcn::train::{
    fit_model, Batches, FitOptions, Replicas, RunResult, StopRule, TrainConfig, TrainData,
};
use sparse_gcn::Par;

use super::common::run_bits as bits;
use sparse_gcn::testing::ThreadRanks;

fn data(n_nodes: usize) -> (Dataset, NormAdj<f32>) {
    let mut d = CitationLike {
        n_nodes,
        ..Default::default()
    }
    .generate(5)
    .unwrap();
    d.features.row_normalize();
    let adj = NormAdj::new(&d.graph, Norm::Symmetric);
    (d, adj)
}

fn run(
    d: &Dataset,
    adj: &NormAdj<f32>,
    x: &Features<f32>,
    cfg: &TrainConfig,
    sampler: Option<&dyn NodeSampler>,
) -> RunResult {
    let data = TrainData::new(adj, x, &d.labels, d.n_classes, &d.split);
    let opts = FitOptions {
        batches: sampler.map(|sampler| Batches {
            sampler,
            graph: (&d.graph).into(),
            norm: Norm::Symmetric,
        }),
        ..FitOptions::default()
    };
    fit_model(&data, cfg, 3, &opts).unwrap().0
}

#[test]
fn one_batch_of_every_node_is_full_batch_training_bit_for_bit() {
    let (d, adj) = data(300);
    let n = d.graph.n_nodes();
    let whole = ClusterSampler::from_parts(&vec![0; n], 1, 1).unwrap();
    for sparse in [false, true] {
        let x = Features::dense(d.features.to_dense());
        let x = if sparse { x.into_sparse_if(1.0) } else { x };
        let mut models = vec![ModelConfig::default()];
        models.extend(Arch::all().into_iter().map(|arch| ModelConfig {
            hidden_dim: 16,
            norm: NormKind::Batch,
            bias: true,
            ..ModelConfig::deep(arch, 3)
        }));
        for model in models {
            let cfg = TrainConfig {
                model,
                epochs: 5,
                stop: StopRule::Never,
                par: Par::Rayon,
                ..Default::default()
            };
            let full = run(&d, &adj, &x, &cfg, None);
            let batched = run(&d, &adj, &x, &cfg, Some(&whole));
            assert_eq!(
                bits(&batched),
                bits(&full),
                "{}, sparse {sparse}",
                cfg.model.arch
            );
        }
    }
}

#[test]
fn cluster_batches_learn_and_replay_in_pools_of_one_and_two_threads() {
    let (d, adj) = data(1200);
    let sampler = ClusterSampler::new(&d.graph, 24, 4, Clusters::Community).unwrap();
    assert_eq!(sampler.batches(), 6);
    let cfg = TrainConfig {
        epochs: 40,
        stop: StopRule::Never,
        par: Par::Rayon,
        ..Default::default()
    };
    let in_pool = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| run(&d, &adj, &d.features, &cfg, Some(&sampler)))
    };
    let one = in_pool(1);
    let two = in_pool(2);
    assert_eq!(bits(&one), bits(&two));
    let full = run(&d, &adj, &d.features, &cfg, None);
    // Six steps an epoch on subgraphs: it learns (chance is 1/7), and not by training on the
    // whole graph in disguise (other numbers than full batch).
    assert!(one.test_acc > 0.5, "test accuracy {}", one.test_acc);
    // Building the batches is timed apart (within the train step); full batch builds none.
    assert!(one
        .history
        .iter()
        .all(|e| e.sample_ms > 0.0 && e.sample_ms <= e.train_ms));
    assert!(full.history.iter().all(|e| e.sample_ms == 0.0));
    assert_ne!(bits(&one), bits(&full));
    println!(
        "cluster batches: test {:.3}, full batch {:.3}",
        one.test_acc, full.test_acc
    );
}

/// Evaluation in a workspace of its own (planned forward only, what mini-batch training sets:
/// layer-wise inference, each convolution's output over its input or Â·H a block at a time)
/// gives the logits and every layer representation of an evaluation in training's workspace,
/// bit for bit: every architecture, each normalisation layer, with checkpointing, each order
/// of the convolutions, on dense and sparse features, after a few training steps
/// (BatchNorm's running statistics set).
#[test]
fn evaluation_in_its_own_workspace_is_evaluation_bit_for_bit() {
    let (d, adj) = data(300);
    let orders = [
        Order::Auto,
        Order::AggregateFirst,
        Order::TransformFirst,
        Order::Lean,
    ];
    for sparse in [false, true] {
        let x = Features::dense(d.features.to_dense());
        let x = if sparse { x.into_sparse_if(1.0) } else { x };
        for (arch, order) in Arch::all().into_iter().flat_map(|a| orders.map(|o| (a, o))) {
            for (norm, checkpoint) in [
                (NormKind::None, 0),
                (NormKind::Batch, 1),
                (
                    NormKind::Pair(sparse_gcn::nn::pair_norm::PairNormMode::Pn),
                    0,
                ),
            ] {
                let cfg = ModelConfig {
                    hidden_dim: 16,
                    norm,
                    bias: true,
                    checkpoint,
                    input_dropout: 0.2,
                    order,
                    ..ModelConfig::deep(arch, 3)
                };
                let train = TrainConfig {
                    model: cfg.clone(),
                    epochs: 3,
                    stop: StopRule::Never,
                    ..Default::default()
                };
                let data = TrainData::new(&adj, &x, &d.labels, d.n_classes, &d.split);
                let (_, mut model) = fit_model(&data, &train, 1, &FitOptions::default()).unwrap();
                let mut lean = model.clone();
                let mut opts = lean.options();
                opts.separate_eval = true;
                lean.set_options(opts);
                let reps = |m: &mut sparse_gcn::nn::Model<f32>| {
                    let mut out = Vec::new();
                    m.visit_representations(&adj, &x, Par::Rayon, &mut |l, h| {
                        out.push((l, h.iter().map(|v| v.to_bits()).collect::<Vec<_>>()))
                    })
                    .unwrap();
                    let z = m.predict(&adj, &x, Par::Rayon).unwrap();
                    (out, z.iter().map(|v| v.to_bits()).collect::<Vec<_>>())
                };
                assert!(
                    reps(&mut model) == reps(&mut lean),
                    "{arch} {order:?} {norm:?} checkpoint {checkpoint} sparse {sparse}"
                );
            }
        }
    }
}

/// Evaluation over the batches of one part (the whole graph) scores what evaluation on the
/// whole graph does: the same accuracies, the losses to rounding; over 24 parts it differs
/// (edges between parts are cut) but still measures a model that learnt.
#[test]
fn evaluation_over_batches_of_the_whole_graph_is_full_evaluation() {
    let (d, adj) = data(600);
    let n = d.graph.n_nodes();
    let whole = ClusterSampler::from_parts(&vec![0; n], 1, 1).unwrap();
    let parts = ClusterSampler::new(&d.graph, 24, 4, Clusters::Community).unwrap();
    let cfg = TrainConfig {
        epochs: 20,
        stop: StopRule::Never,
        ..Default::default()
    };
    let go = |sampler: &dyn NodeSampler, eval_batches: bool| {
        let data = TrainData::new(&adj, &d.features, &d.labels, d.n_classes, &d.split);
        let opts = FitOptions {
            batches: Some(Batches {
                sampler,
                graph: (&d.graph).into(),
                norm: Norm::Symmetric,
            }),
            eval_batches,
            ..FitOptions::default()
        };
        fit_model(&data, &cfg, 3, &opts).unwrap().0
    };
    let (full, batched) = (go(&whole, false), go(&whole, true));
    assert_eq!(full.test_acc, batched.test_acc);
    assert_eq!(full.val_acc, batched.val_acc);
    assert!((full.test_loss - batched.test_loss).abs() <= 1e-6 * full.test_loss);
    for (a, b) in full.history.iter().zip(&batched.history) {
        assert_eq!(a.val_acc, b.val_acc);
        assert!((a.val_loss - b.val_loss).abs() <= 1e-6 * a.val_loss);
        assert_eq!(a.train_loss.to_bits(), b.train_loss.to_bits());
    }
    let cut = go(&parts, true);
    assert!(cut.test_acc > 0.5, "{}", cut.test_acc);
    assert_ne!(
        cut.test_loss.to_bits(),
        go(&parts, false).test_loss.to_bits()
    );
    // Without batches, or with batches that do not partition the nodes, it is refused.
    let data = TrainData::new(&adj, &d.features, &d.labels, d.n_classes, &d.split);
    let refused = fit_model(
        &data,
        &cfg,
        3,
        &FitOptions {
            eval_batches: true,
            ..FitOptions::default()
        },
    );
    assert!(matches!(refused, Err(sparse_gcn::Error::Config(_))));
}

/// Without the whole Â (`Prepare::whole_adj` off), Cluster-GCN evaluated over its batches
/// trains and scores as with it (nothing reads the whole Â), and everything that would read it
/// is refused: full batch, evaluation on the whole graph, the layers' metrics.
#[test]
fn without_the_whole_adjacency_only_batches_evaluated_over_batches_train() {
    use sparse_gcn::sample::{BatchConfig, Clusters};
    use sparse_gcn::train::run::{Prepare, Prepared};
    let d = CitationLike {
        n_nodes: 500,
        ..Default::default()
    }
    .generate(2)
    .unwrap();
    let prepare = |whole_adj| {
        Prepared::new(
            d.clone(),
            &Prepare {
                keep_graph: true,
                whole_adj,
                ..Prepare::default()
            },
        )
        .unwrap()
    };
    let (whole, lean) = (prepare(true), prepare(false));
    assert_eq!(whole.summary().nnz, lean.summary().nnz);
    assert!(lean.adj.nnz() < whole.adj.nnz());
    let cfg = TrainConfig {
        epochs: 6,
        stop: StopRule::Never,
        batch: BatchConfig::Cluster {
            parts: 10,
            per_batch: 2,
            clusters: Clusters::Community,
            diag_lambda: 0.0,
        },
        eval_batches: true,
        ..Default::default()
    };
    let a = whole.fit(&cfg, 1, 0, None).unwrap().0;
    let b = lean.fit(&cfg, 1, 0, None).unwrap().0;
    assert_eq!(bits(&a), bits(&b));
    for bad in [
        TrainConfig {
            eval_batches: false,
            ..cfg.clone()
        },
        TrainConfig {
            batch: BatchConfig::Full,
            eval_batches: false,
            ..cfg.clone()
        },
    ] {
        assert!(matches!(
            lean.fit(&bad, 1, 0, None),
            Err(sparse_gcn::Error::Config(_))
        ));
    }
    // A diagonal enhancement of the batches needs the same on the whole Â that evaluates
    // them; over the batches alone, none is built.
    let enhanced = TrainConfig {
        batch: BatchConfig::Cluster {
            parts: 10,
            per_batch: 2,
            clusters: Clusters::Community,
            diag_lambda: 1.0,
        },
        ..cfg.clone()
    };
    assert!(matches!(
        whole.fit(&enhanced, 1, 0, None),
        Err(sparse_gcn::Error::Config(_))
    ));
    let c = lean.fit(&enhanced, 1, 0, None).unwrap().0;
    assert_ne!(bits(&a), bits(&c));
    assert!(matches!(
        lean.fit(&cfg, 1, 1, None),
        Err(sparse_gcn::Error::Config(_))
    ));
    // And it needs the graph kept.
    assert!(Prepared::new(
        d.clone(),
        &Prepare {
            whole_adj: false,
            ..Prepare::default()
        }
    )
    .is_err());
}

/// A sampler of no batches (a crate's own) is a typed error, not a panic.
#[test]
fn a_sampler_of_no_batches_is_a_typed_error() {
    struct NoBatches;
    impl NodeSampler for NoBatches {
        fn batches(&self) -> usize {
            0
        }
        fn max_nodes(&self) -> usize {
            0
        }
        fn nodes_into(
            &self,
            _: &sparse_gcn::graph::Graph,
            _: u64,
            _: usize,
            index: usize,
            _: &mut Vec<u32>,
        ) {
            panic!("batch {index} of none");
        }
        fn check_graph(&self, _: &sparse_gcn::graph::Graph) -> sparse_gcn::Result<()> {
            Ok(())
        }
    }
    let (d, adj) = data(600);
    let data = TrainData::new(&adj, &d.features, &d.labels, d.n_classes, &d.split);
    let opts = FitOptions {
        batches: Some(Batches {
            sampler: &NoBatches,
            graph: (&d.graph).into(),
            norm: Norm::Symmetric,
        }),
        ..FitOptions::default()
    };
    let r = fit_model(&data, &TrainConfig::default(), 0, &opts);
    assert!(
        matches!(r, Err(sparse_gcn::Error::Config(_))),
        "{:?}",
        r.map(|_| ())
    );
}

/// Trains `cfg` with the batches of `batch` on `size` thread ranks (`None`: one process
/// without replicas); every rank's result.
fn run_ranks(
    d: &Dataset,
    adj: &NormAdj<f32>,
    cfg: &TrainConfig,
    size: Option<usize>,
) -> Vec<RunResult> {
    let x = &d.features;
    let sampler = cfg.batch.sampler(&d.graph, &d.split.train, 3).unwrap();
    let data = TrainData::new(adj, x, &d.labels, d.n_classes, &d.split);
    let opts = FitOptions {
        batches: sampler.as_deref().map(|sampler| Batches {
            sampler,
            graph: (&d.graph).into(),
            norm: Norm::Symmetric,
        }),
        eval_batches: cfg.eval_batches,
        ..FitOptions::default()
    };
    let Some(size) = size else {
        return vec![fit_model(&data, cfg, 3, &opts).unwrap().0];
    };
    let all = ThreadRanks::new(size);
    std::thread::scope(|s| {
        let handles: Vec<_> = all
            .into_iter()
            .map(|ranks| {
                let (data, opts) = (&data, &opts);
                s.spawn(move || {
                    let opts = FitOptions {
                        replicas: Some(Replicas(&ranks)),
                        ..*opts
                    };
                    fit_model(data, cfg, 3, &opts).unwrap().0
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn several_batches_a_step_are_the_same_bits_on_any_number_of_ranks_dividing_them() {
    let (d, adj) = data(400);
    let fanouts = Fanouts::new(&[3, 4]).unwrap();
    for (batch, eval_batches) in [
        (
            BatchConfig::Cluster {
                parts: 10,
                per_batch: 1,
                clusters: Clusters::Community,
                diag_lambda: 0.0,
            },
            true,
        ),
        (
            BatchConfig::Saint {
                kind: SaintKind::RandomWalk { walk_length: 2 },
                batch_size: 40,
                batches: Some(7),
                coverage: 20.0,
            },
            false,
        ),
        (
            BatchConfig::Neighbor {
                fanouts,
                batch_size: 16,
            },
            false,
        ),
    ] {
        let cfg = TrainConfig {
            model: ModelConfig {
                hidden_dim: 16,
                ..ModelConfig::default()
            },
            epochs: 3,
            stop: StopRule::Never,
            batch,
            eval_batches,
            batches_per_step: 4,
            ..TrainConfig::default()
        };
        let one = run_ranks(&d, &adj, &cfg, None);
        let b = one[0].batches.unwrap();
        assert!(
            b.batches_per_epoch > 6 && !b.batches_per_epoch.is_multiple_of(4),
            "{b:?}"
        );
        for (per_step, sizes) in [(4, &[1, 2, 4][..]), (6, &[3, 6][..])] {
            let cfg = TrainConfig {
                batches_per_step: per_step,
                ..cfg.clone()
            };
            let one = run_ranks(&d, &adj, &cfg, None);
            for &size in sizes {
                let ranks = run_ranks(&d, &adj, &cfg, Some(size));
                for r in &ranks {
                    assert_eq!(
                        bits(r),
                        bits(&one[0]),
                        "{batch:?}, {per_step} on {size} ranks"
                    );
                }
                // Every batch trained once, by one rank.
                let built: u64 = ranks.iter().map(|r| r.batches.unwrap().built).sum();
                assert_eq!(built, 3 * b.batches_per_epoch as u64, "{batch:?} on {size}");
            }
        }
        // A step a batch is another run (a step of four batches averages their gradients).
        let single = run_ranks(
            &d,
            &adj,
            &TrainConfig {
                batches_per_step: 1,
                ..cfg.clone()
            },
            None,
        );
        assert_ne!(bits(&single[0]), bits(&one[0]), "{batch:?}");
        // (Three epochs of a tiny model: it learned something, twice chance at least.)
        let chance = 1.0 / d.n_classes as f64;
        assert!(
            one[0].test_acc >= 2.0 * chance,
            "{batch:?}: {}",
            one[0].test_acc
        );
    }
}

#[test]
fn ranks_that_do_not_divide_the_step_and_statistics_across_batches_are_refused() {
    let (d, adj) = data(200);
    let sampler = ClusterSampler::from_parts(&vec![0; 200], 1, 1).unwrap();
    let data = TrainData::new(&adj, &d.features, &d.labels, d.n_classes, &d.split);
    // Rank 0 of two whose peer does as it does (each refusal is agreed by both).
    struct Mirror;
    impl sparse_gcn::graph::Collective for Mirror {
        fn spans_processes(&self) -> bool {
            true
        }
        fn process(&self) -> (usize, usize) {
            (0, 2)
        }
        fn sum_words(&self, w: &mut [i64]) {
            w.iter_mut().for_each(|v| *v *= 2);
        }
    }
    let ranks = Mirror;
    let batches = Some(Batches {
        sampler: &sampler,
        graph: (&d.graph).into(),
        norm: Norm::Symmetric,
    });
    let cfg = |per_step: usize, norm: NormKind| TrainConfig {
        model: ModelConfig {
            norm,
            ..ModelConfig::default()
        },
        epochs: 1,
        batches_per_step: per_step,
        ..TrainConfig::default()
    };
    fn with<'a>(replicas: Option<Replicas<'a>>, batches: Option<Batches<'a>>) -> FitOptions<'a> {
        FitOptions {
            batches,
            replicas,
            ..FitOptions::default()
        }
    }
    for (c, opts, what) in [
        (
            cfg(3, NormKind::None),
            with(Some(Replicas(&ranks)), batches),
            "batches_per_step",
        ),
        (
            cfg(0, NormKind::None),
            with(None, batches),
            "batches_per_step",
        ),
        (
            cfg(2, NormKind::Batch),
            with(None, batches),
            "running statistics",
        ),
        (cfg(2, NormKind::None), with(None, None), "batches_per_step"),
        (
            cfg(1, NormKind::None),
            with(Some(Replicas(&ranks)), None),
            "batches_per_step",
        ),
    ] {
        let Err(e) = fit_model(&data, &c, 0, &opts).map(|_| ()) else {
            panic!("{what}: accepted");
        };
        let e = e.to_string();
        assert!(e.contains(what), "{e}");
    }
    // One rank of one, a step a batch: training as without replicas.
    let one = ThreadRanks::new(1).swap_remove(0);
    let c = cfg(1, NormKind::None);
    let plain = fit_model(&data, &c, 0, &with(None, batches)).unwrap().0;
    let across = fit_model(&data, &c, 0, &with(Some(Replicas(&one)), batches))
        .unwrap()
        .0;
    assert_eq!(bits(&plain), bits(&across));
}
