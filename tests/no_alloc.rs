//! The training epoch loop allocates nothing after its first epoch: a run of 2E epochs makes
//! exactly as many heap allocations as a run of E epochs (so the count cannot depend on the
//! number of epochs), for the Kipf GCN in both orders, with dense and sparse features, and for
//! every architecture (`Arch::all()`) without normalisation, with BatchNorm and with PairNorm
//! (PN, PN-SI, PN-SCS), on dense and sparse features, with 1 and 2 rayon threads (dropout on,
//! validation every epoch, early stopping with its best-weights snapshot). Every deep variant
//! (`Arch::deep()`) is covered with activation checkpointing too (`checkpoint = 2`): the stack
//! plans the buffers of its recomputed segments once, like every other buffer, and reuses them.
//!
//! With DropEdge (`ModelConfig::drop_edge` and `FitOptions::drop_edge`) the same holds for the
//! Kipf GCN in both orders and every architecture on dense features (every deep variant with
//! checkpointing too), and for sparse features when the first convolution transforms first: the
//! sampled Â′ is rewritten in one buffer (`DropEdge::sample_into`) and the training passes run
//! on the model's buffers. A first convolution that aggregates sparse features first still
//! allocates with DropEdge (the sparsity pattern of Â′X̃ changes with Â′, so `GcnConv` computes
//! it anew every pass): that case is asserted to allocate (`should_panic`), which also checks
//! that the counter sees allocations at all.
//!
//! PairNorm's PN-SI and PN-SCS modes are not expressible in `ModelConfig` (`NormKind::Pair(PairNormMode::Pn)` is
//! PN with scale 1): those cases train a stack assembled by hand from the built model's nodes
//! (`Model::from_nodes`) through `train_model`.
//!
//! A counting global allocator counts `alloc`, `alloc_zeroed` and `realloc` calls per rayon
//! pool: each pool's workers count into their own counter (the training runs inside
//! `pool.install`), so tests running at the same time do not interfere.
//!
//! **Known exception: GEMM packing buffers.** matrixmultiply 0.3 allocates a packing buffer on
//! every GEMM call (`gemm_loop` → `make_packing_buffer` → `aligned_alloc::Alloc::new`, with the
//! alignment of its SIMD kernel: 16, 32 or 64 bytes) and offers no way to pass one in; the
//! packed path of `kernels::gemm` likewise packs B (W or Wᵀ) once a call into a buffer aligned
//! to 64 bytes. Those allocations are counted apart (every allocation with an alignment ≥ 16;
//! nothing else in this crate asks for more than 8) and printed, not asserted; their size is
//! bounded by the weights' shapes (k·n rounded up to a panel) or matrixmultiply's blocking
//! (kc·(mc + nc) elements), not by the number of nodes.
// A global allocator is an `unsafe impl`; it only forwards to `System`.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use sparse_gcn::data::synthetic::CitationLike;
use sparse_gcn::data::{Dataset, Features};
use sparse_gcn::graph::{Norm, NormAdj};
use sparse_gcn::nn::pair_norm::PairNormMode;
use sparse_gcn::nn::{Arch, Model, ModelConfig, Node, NormKind, Order, PairNorm, Wiring};
use sparse_gcn::train::{
    build_model, fit, train_model, DropEdgeSource, FitOptions, StopRule, TrainConfig, TrainData,
};
use sparse_gcn::Par;

struct Counting;

const GROUPS: usize = 64;
/// Per pool: allocations by this crate's code, the standard library and rayon (alignment ≤ 8).
static ALLOCS: [AtomicUsize; GROUPS] = [const { AtomicUsize::new(0) }; GROUPS];
/// Per pool: allocations with an alignment ≥ 16, matrixmultiply's packing buffers.
static PACKING: [AtomicUsize; GROUPS] = [const { AtomicUsize::new(0) }; GROUPS];
/// The next pool's counter (0 counts nothing).
static NEXT_GROUP: AtomicUsize = AtomicUsize::new(1);

thread_local! {
    /// The counter of this thread's pool (0: not counted).
    static GROUP: Cell<usize> = const { Cell::new(0) };
}

fn note(layout: Layout) {
    let g = GROUP.try_with(Cell::get).unwrap_or(0);
    if g != 0 {
        if layout.align() >= 16 {
            PACKING[g].fetch_add(1, Relaxed);
        } else {
            ALLOCS[g].fetch_add(1, Relaxed);
        }
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; counting
// touches only atomics and a `const`-initialised thread-local `Cell` (which never allocates).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout);
        // SAFETY: as `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(layout);
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A pool of `threads` workers whose allocations are counted in a counter of their own
/// (from the worker's start to its exit handler, so thread teardown is not counted).
fn pool(threads: usize) -> rayon::ThreadPool {
    let g = NEXT_GROUP.fetch_add(1, Relaxed);
    assert!(g < GROUPS, "too many pools");
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .start_handler(move |_| GROUP.with(|c| c.set(g)))
        .exit_handler(|_| GROUP.with(|c| c.set(0)))
        .build()
        .unwrap()
}

/// (allocations, matrixmultiply packing allocations) made by `f` run inside `pool`, on the
/// pool's workers.
fn count(pool: &rayon::ThreadPool, f: impl FnOnce() + Send) -> (usize, usize) {
    pool.install(|| {
        let g = GROUP.with(Cell::get);
        let (a, p) = (ALLOCS[g].load(Relaxed), PACKING[g].load(Relaxed));
        f();
        (ALLOCS[g].load(Relaxed) - a, PACKING[g].load(Relaxed) - p)
    })
}

fn data() -> (Dataset, NormAdj<f32>) {
    let mut d = CitationLike {
        n_nodes: 400,
        ..Default::default()
    }
    .generate(5)
    .unwrap();
    d.features.row_normalize();
    let adj = NormAdj::new(&d.graph, Norm::Symmetric);
    (d, adj)
}

/// Runs `run(E)` once to warm up (thread-locals, lazily built rayon and epoch state), then
/// `run(E)` and `run(2E)`, and asserts that both made the same number of allocations.
fn assert_epoch_independent(what: &str, threads: usize, run: &(dyn Fn(usize) + Sync)) {
    assert_epoch_independent_in(&pool(threads), what, threads, run);
}

/// [`assert_epoch_independent`] in an existing pool of `threads` workers (the counters are
/// read before and after each run, so one pool serves several cases in turn).
fn assert_epoch_independent_in(
    pool: &rayon::ThreadPool,
    what: &str,
    threads: usize,
    run: &(dyn Fn(usize) + Sync),
) {
    const E: usize = 3;
    count(pool, || run(E));
    let (short, short_mm) = count(pool, || run(E));
    let (long, long_mm) = count(pool, || run(2 * E));
    eprintln!(
        "{what}, {threads} thread(s): {short} allocations for {E} epochs, {long} for {}; \
         matrixmultiply packing buffers: {short_mm} and {long_mm} ({} per epoch)",
        2 * E,
        (long_mm - short_mm) / E
    );
    assert_eq!(
        long,
        short,
        "{what}, {threads} thread(s): {} allocations per epoch after the first",
        (long as f64 - short as f64) / E as f64
    );
}

/// The dataset's features, dense or as CSR.
fn features(d: &Dataset, sparse: bool) -> Features<f32> {
    let x = if sparse {
        Features::dense(d.features.to_dense()).into_sparse_if(1.0)
    } else {
        Features::dense(d.features.to_dense())
    };
    assert_eq!(x.is_sparse(), sparse);
    x
}

fn gcn_case(order: Order, sparse: bool, input_dropout: f64) {
    let (d, adj) = data();
    let x = features(&d, sparse);
    for threads in [1, 2] {
        let run = |epochs: usize| {
            let cfg = TrainConfig {
                model: ModelConfig {
                    order,
                    bias: true,
                    n_layers: 3,
                    input_dropout,
                    ..Default::default()
                },
                epochs,
                // Snapshots at every improvement, but no stop before `epochs`.
                stop: StopRule::Patience { patience: 1000 },
                par: Par::Rayon,
                ..Default::default()
            };
            let r = fit(
                &TrainData::new(&adj, &x, &d.labels, d.n_classes, &d.split),
                &cfg,
                7,
            )
            .unwrap();
            assert_eq!(r.history.len(), epochs);
        };
        let what = format!("Kipf GCN {order:?}, sparse {sparse}, input dropout {input_dropout}");
        assert_epoch_independent(&what, threads, &run);
    }
}

#[test]
fn gcn_aggregate_first_dense_allocates_nothing_per_epoch() {
    gcn_case(Order::AggregateFirst, false, 0.5);
}

#[test]
fn gcn_aggregate_first_sparse_allocates_nothing_per_epoch() {
    gcn_case(Order::AggregateFirst, true, 0.5);
}

#[test]
fn gcn_transform_first_dense_allocates_nothing_per_epoch() {
    gcn_case(Order::TransformFirst, false, 0.5);
}

#[test]
fn gcn_transform_first_sparse_allocates_nothing_per_epoch() {
    gcn_case(Order::TransformFirst, true, 0.5);
}

#[test]
fn gcn_cached_aggregate_allocates_nothing_per_epoch() {
    // No input dropout: the first layer reuses the ÂX it cached on the first pass.
    gcn_case(Order::AggregateFirst, true, 0.0);
    gcn_case(Order::AggregateFirst, false, 0.0);
}

/// `model` with every PairNorm layer replaced by PairNorm of `mode` (scale 1, width kept),
/// assembled by hand (no checkpointing, no layer representations).
fn with_pair_norm(model: &Model<f32>, mode: PairNormMode) -> Model<f32> {
    assert_eq!(
        model.config().expect("an architecture's model").checkpoint,
        0,
        "a hand-assembled stack has no checkpointed segments"
    );
    let nodes: Vec<Node<f32>> = model
        .nodes()
        .iter()
        .map(|n| {
            if n.layer.name() == "pair_norm" {
                let dim = n.layer.spec(&[], 1).out_dim;
                Node {
                    layer: Box::new(PairNorm {
                        scale: 1.0,
                        mode,
                        dim,
                    }),
                    ..n.clone()
                }
            } else {
                n.clone()
            }
        })
        .collect();
    let wiring = Wiring {
        taps: Vec::new(),
        ..model.wiring()
    };
    Model::from_nodes(nodes, wiring, model.options()).unwrap()
}

/// One deep case: the normalisation, the features, the order of the convolutions, DropEdge
/// (with that renormalisation), activation checkpointing, and PairNorm's mode when the stack
/// is assembled by hand.
#[derive(Debug, Clone, Copy)]
struct Deep {
    norm: NormKind,
    sparse: bool,
    order: Order,
    drop_edge: Option<Norm>,
    checkpoint: usize,
    pair_mode: Option<PairNormMode>,
}

impl Default for Deep {
    fn default() -> Self {
        Deep {
            norm: NormKind::None,
            sparse: false,
            order: Order::Auto,
            drop_edge: None,
            checkpoint: 0,
            pair_mode: None,
        }
    }
}

/// Every architecture of `archs`, 1 and 2 threads.
fn deep_case(c: Deep, archs: &[Arch]) {
    let (d, adj) = data();
    let x = features(&d, c.sparse);
    let opts = match c.drop_edge {
        Some(n) => drop_edge_opts(&d, n),
        None => FitOptions::default(),
    };
    let pools = [(1, pool(1)), (2, pool(2))];
    for &arch in archs {
        for (threads, pool) in &pools {
            let threads = *threads;
            let run = |epochs: usize| {
                let model_cfg = ModelConfig {
                    hidden_dim: 16,
                    norm: c.norm,
                    order: c.order,
                    bias: true,
                    checkpoint: c.checkpoint,
                    drop_edge: if c.drop_edge.is_some() { 0.3 } else { 0.0 },
                    ..ModelConfig::deep(arch, 3)
                };
                let cfg = TrainConfig {
                    model: model_cfg,
                    epochs,
                    stop: StopRule::Patience { patience: 1000 },
                    par: Par::Rayon,
                    ..Default::default()
                };
                let mut model = build_model(&adj, &x, d.n_classes, &cfg.model, 7).unwrap();
                if let Some(mode) = c.pair_mode {
                    model = with_pair_norm(&model, mode);
                }
                let r = train_model(
                    &mut model,
                    &TrainData::new(&adj, &x, &d.labels, d.n_classes, &d.split),
                    &cfg,
                    7,
                    &opts,
                )
                .unwrap();
                assert_eq!(r.history.len(), epochs);
            };
            let what = format!("{arch}, {c:?}");
            assert_epoch_independent_in(pool, &what, threads, &run);
        }
    }
}

#[test]
fn deep_dense_allocates_nothing_per_epoch() {
    deep_case(Deep::default(), &Arch::all());
}

#[test]
fn deep_batch_norm_allocates_nothing_per_epoch() {
    let c = Deep {
        norm: NormKind::Batch,
        ..Deep::default()
    };
    deep_case(c, &Arch::deep());
}

#[test]
fn deep_pair_norm_allocates_nothing_per_epoch() {
    let c = Deep {
        norm: NormKind::Pair(PairNormMode::Pn),
        ..Deep::default()
    };
    deep_case(c, &Arch::deep());
    for mode in [PairNormMode::PnSi, PairNormMode::PnScs] {
        let c = Deep {
            pair_mode: Some(mode),
            ..c
        };
        deep_case(
            c,
            &[
                Arch::GCN,
                Arch::RESIDUAL,
                Arch::Jk(sparse_gcn::nn::JkMode::Attention),
            ],
        );
    }
}

#[test]
fn deep_sparse_aggregate_first_allocates_nothing_per_epoch() {
    let c = Deep {
        sparse: true,
        order: Order::AggregateFirst,
        ..Deep::default()
    };
    deep_case(c, &Arch::all());
}

#[test]
fn deep_sparse_transform_first_allocates_nothing_per_epoch() {
    let c = Deep {
        norm: NormKind::Batch,
        sparse: true,
        order: Order::TransformFirst,
        ..Deep::default()
    };
    deep_case(c, &Arch::all());
}

#[test]
fn deep_checkpointed_allocates_nothing_per_epoch() {
    for norm in [
        NormKind::None,
        NormKind::Batch,
        NormKind::Pair(PairNormMode::Pn),
    ] {
        let c = Deep {
            norm,
            checkpoint: 2,
            ..Deep::default()
        };
        deep_case(c, &Arch::deep());
    }
}

#[test]
fn deep_checkpointed_sparse_allocates_nothing_per_epoch() {
    for (norm, order) in [
        (NormKind::None, Order::AggregateFirst),
        (NormKind::Batch, Order::TransformFirst),
    ] {
        let c = Deep {
            norm,
            sparse: true,
            order,
            checkpoint: 2,
            ..Deep::default()
        };
        deep_case(c, &Arch::deep());
    }
}

fn drop_edge_opts(d: &Dataset, norm: Norm) -> FitOptions<'_> {
    FitOptions {
        drop_edge: Some(DropEdgeSource {
            graph: &d.graph,
            norm,
        }),
        ..Default::default()
    }
}

fn gcn_drop_edge_case(order: Order, sparse: bool, norm: Norm) {
    let (d, adj) = data();
    let x = features(&d, sparse);
    let opts = drop_edge_opts(&d, norm);
    for threads in [1, 2] {
        let run = |epochs: usize| {
            let cfg = TrainConfig {
                model: ModelConfig {
                    order,
                    bias: true,
                    n_layers: 3,
                    drop_edge: 0.3,
                    ..Default::default()
                },
                epochs,
                stop: StopRule::Patience { patience: 1000 },
                par: Par::Rayon,
                ..Default::default()
            };
            let mut model = build_model(&adj, &x, d.n_classes, &cfg.model, 7).unwrap();
            let r = train_model(
                &mut model,
                &TrainData::new(&adj, &x, &d.labels, d.n_classes, &d.split),
                &cfg,
                7,
                &opts,
            )
            .unwrap();
            assert_eq!(r.history.len(), epochs);
        };
        let what = format!("Kipf GCN {order:?}, sparse {sparse}, DropEdge {norm:?}");
        assert_epoch_independent(&what, threads, &run);
    }
}

#[test]
fn gcn_drop_edge_dense_allocates_nothing_per_epoch() {
    for order in [Order::AggregateFirst, Order::TransformFirst] {
        gcn_drop_edge_case(order, false, Norm::Symmetric);
    }
    gcn_drop_edge_case(Order::AggregateFirst, false, Norm::Row);
}

#[test]
fn gcn_drop_edge_sparse_transform_first_allocates_nothing_per_epoch() {
    gcn_drop_edge_case(Order::TransformFirst, true, Norm::Symmetric);
}

#[test]
fn deep_drop_edge_dense_allocates_nothing_per_epoch() {
    let c = Deep {
        norm: NormKind::Batch,
        drop_edge: Some(Norm::Symmetric),
        ..Deep::default()
    };
    deep_case(c, &Arch::all());
    deep_case(Deep { checkpoint: 2, ..c }, &Arch::deep());
}

/// The documented exception (and a check that the counter sees allocations at all): with
/// DropEdge, a first convolution that aggregates sparse features first computes the pattern of
/// Â′X̃ anew every pass. If this starts passing, move the case to the covered ones above.
#[test]
#[should_panic(expected = "allocations per epoch after the first")]
fn gcn_drop_edge_sparse_aggregate_first_still_allocates() {
    gcn_drop_edge_case(Order::AggregateFirst, true, Norm::Symmetric);
}

/// A graph of `n` nodes with `f` dense features, 5 classes (seed `seed`).
fn graph(n: usize, f: usize, seed: u64) -> (Features<f32>, NormAdj<f32>) {
    let d = CitationLike {
        n_nodes: n,
        n_classes: 5,
        n_features: f,
        ..Default::default()
    }
    .generate(seed)
    .unwrap();
    let adj = NormAdj::new(&d.graph, Norm::Symmetric);
    (Features::dense(d.features.to_dense()), adj)
}

/// A model planned for N rows (`Model::reserve`) runs training and evaluation passes on other
/// graphs of at most N rows, each with other features, without planning again or allocating:
/// every architecture, with dropout, in the orders that keep nothing computed from the data
/// (aggregate-first keeps Â·X of each new graph's features, which is new memory by design).
#[test]
fn a_plan_for_n_rows_runs_passes_of_fewer_rows_without_allocating() {
    use ndarray::{ArrayView2, ArrayViewMut2};
    use rand::SeedableRng;
    use sparse_gcn::graph::Sums;
    let big = graph(600, 24, 1);
    let others = [graph(400, 24, 2), graph(250, 24, 3), graph(599, 24, 4)];
    let pool = pool(2);
    let norms = |arch: Arch| match arch {
        Arch::Gcn(_) | Arch::Residual(_) | Arch::Jk(_) => {
            vec![
                NormKind::None,
                NormKind::Batch,
                NormKind::Pair(PairNormMode::Pn),
            ]
        }
        _ => vec![NormKind::None],
    };
    for (arch, norm) in Arch::all()
        .into_iter()
        .flat_map(|a| norms(a).into_iter().map(move |n| (a, n)))
    {
        for order in [Order::TransformFirst, Order::Lean] {
            let cfg = ModelConfig {
                in_dim: 24,
                out_dim: 5,
                hidden_dim: 16,
                order,
                norm,
                ..ModelConfig::deep(arch, 3)
            };
            let mut m = cfg
                .build(
                    &big.1,
                    &big.0,
                    None,
                    &mut rand_chacha::ChaCha8Rng::seed_from_u64(3),
                )
                .unwrap();
            m.reserve(600, &big.0).expect("a plan");
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(4);
            let mut sink = 0.0f32;
            let mut run = |m: &mut Model<f32>, (x, adj): &(Features<f32>, NormAdj<f32>)| {
                let mut loss = |mut z: ArrayViewMut2<'_, f32>, _: Sums<'_, f32>| {
                    z.mapv_inplace(|v| v * 1e-3);
                    true
                };
                m.train_pass(adj, x, &mut rng, Par::Rayon, &mut loss)
                    .unwrap();
                let mut read = |z: ArrayView2<'_, f32>, _: Sums<'_, f32>| sink += z[[0, 0]];
                m.eval_pass(adj, x, Par::Rayon, &mut read).unwrap();
            };
            // Warm-up on the largest graph: the sums' working memory grows to its size once.
            count(&pool, || run(&mut m, &big));
            let (allocs, packing) = count(&pool, || {
                for g in &others {
                    run(&mut m, g);
                }
                run(&mut m, &big);
            });
            eprintln!("{arch} {norm} {order:?}: {allocs} allocations, {packing} packing buffers");
            assert_eq!(
                allocs, 0,
                "{arch} {norm} {order:?}: passes of other sizes allocated"
            );
            assert!(sink.is_finite());
        }
    }
}

/// Mini-batches (Cluster-GCN's and GraphSAINT's, with its normalisation) allocate nothing per
/// epoch either: the batch's buffers are reserved for the largest batch before the first one,
/// the training workspace is planned for it and evaluation's for the whole graph, and the
/// samplers draw into kept storage. Dense features; every architecture with BatchNorm.
#[test]
fn mini_batches_allocate_nothing_per_epoch() {
    use sparse_gcn::sample::{ClusterSampler, Clusters, NodeSampler, SaintKind, SaintSampler};
    use sparse_gcn::train::{fit_model, Batches};
    let (d, adj) = data();
    let x = features(&d, false);
    let cluster = ClusterSampler::new(&d.graph, 12, 3, Clusters::Community).unwrap();
    let saint = SaintSampler::new(
        &d.graph,
        SaintKind::RandomWalk { walk_length: 2 },
        40,
        Some(4),
        5.0,
        0,
    )
    .unwrap();
    let samplers: [(&str, &dyn NodeSampler); 2] = [("cluster", &cluster), ("saint-rw", &saint)];
    let mut models = vec![ModelConfig::default()];
    models.extend(Arch::all().into_iter().map(|arch| ModelConfig {
        hidden_dim: 16,
        norm: NormKind::Batch,
        ..ModelConfig::deep(arch, 3)
    }));
    for threads in [1, 2] {
        let pool = pool(threads);
        for (name, sampler) in samplers {
            for model in &models {
                let run = |epochs: usize| {
                    let cfg = TrainConfig {
                        model: model.clone(),
                        epochs,
                        stop: StopRule::Patience { patience: 1000 },
                        par: Par::Rayon,
                        ..Default::default()
                    };
                    let opts = FitOptions {
                        batches: Some(Batches {
                            sampler,
                            graph: (&d.graph).into(),
                            norm: Norm::Symmetric,
                        }),
                        ..FitOptions::default()
                    };
                    let data = TrainData::new(&adj, &x, &d.labels, d.n_classes, &d.split);
                    let (r, _) = fit_model(&data, &cfg, 7, &opts).unwrap();
                    assert_eq!(r.history.len(), epochs);
                };
                let what = format!("{name} batches, {}", model.arch);
                assert_epoch_independent_in(&pool, &what, threads, &run);
            }
        }
    }
}
