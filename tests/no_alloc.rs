//! The training epoch loop allocates nothing after its first epoch: a run of 2E epochs makes
//! exactly as many heap allocations as a run of E epochs (so the count cannot depend on the
//! number of epochs), for the Kipf `Gcn` in both orders, with dense and sparse features, and
//! for `DeepGcn` in every variant (`Variant::ALL`) without normalisation, with BatchNorm and
//! with PairNorm, on dense and sparse features, with 1 and 2 rayon threads (dropout on,
//! validation every epoch, early stopping with its best-weights snapshot). `DeepGcn` is
//! covered without activation checkpointing (`checkpoint = 0`): with `checkpoint > 0` its
//! training passes take fresh buffers (recomputing segments is what checkpointing is for).
//!
//! With DropEdge (`FitOptions::drop_edge`) the same holds for the `Gcn` in both orders and
//! every `DeepGcn` variant on dense features, and for sparse features when the first
//! convolution transforms first: the sampled Â′ is rewritten in one buffer
//! (`DropEdge::sample_into`) and the training passes run on the model's workspace. A first
//! convolution that aggregates sparse features first still trains through fresh buffers with
//! DropEdge (ÂX̃'s sparsity pattern changes with Â′), and is not covered.
//!
//! A counting global allocator counts `alloc`, `alloc_zeroed` and `realloc` calls per rayon
//! pool: each pool's workers count into their own counter (the training runs inside
//! `pool.install`), so tests running at the same time do not interfere.
//!
//! **Known exception, outside this crate:** matrixmultiply 0.3 allocates a packing buffer on
//! every GEMM call (`gemm_loop` → `make_packing_buffer` → `aligned_alloc::Alloc::new`, with the
//! alignment of its SIMD kernel: 16, 32 or 64 bytes) and offers no way to pass one in. Those
//! allocations are counted apart (every allocation with an alignment ≥ 16; nothing in this
//! crate asks for more than 8) and printed, not asserted; their size is bounded by
//! matrixmultiply's blocking (kc·(mc + nc) elements), not by the number of nodes.
// A global allocator is an `unsafe impl`; it only forwards to `System`.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use sparse_gcn::graph::dropedge::DropEdge;
use sparse_gcn::graph::synthetic::CitationLike;
use sparse_gcn::graph::{Dataset, Features, Norm, NormAdj};
use sparse_gcn::nn::{DeepConfig, GcnConfig, NormKind, Order, Variant};
use sparse_gcn::train::{
    fit, fit_deep, rng_stream, train_model, DropEdgeSource, FitOptions, StopRule, TrainConfig,
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
        Features::Dense(d.features.to_dense()).into_sparse_if(1.0)
    } else {
        Features::Dense(d.features.to_dense())
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
                model: GcnConfig {
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
            let r = fit(&adj, &x, &d.labels, d.n_classes, &d.split, &cfg, 7).unwrap();
            assert_eq!(r.history.len(), epochs);
        };
        let what = format!("Gcn {order:?}, sparse {sparse}, input dropout {input_dropout}");
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
    // No input dropout: the first layer reuses the ÂX cached by `prepare`.
    gcn_case(Order::AggregateFirst, true, 0.0);
    gcn_case(Order::AggregateFirst, false, 0.0);
}

/// Every `DeepGcn` variant, 1 and 2 threads; with `drop_edge`, DropEdge with that norm.
fn deep_case(norm: NormKind, sparse: bool, order: Order, drop_edge: Option<Norm>) {
    let (d, adj) = data();
    let x = features(&d, sparse);
    let opts = match drop_edge {
        Some(n) => drop_edge_opts(&d, n),
        None => FitOptions::default(),
    };
    let pools = [(1, pool(1)), (2, pool(2))];
    for variant in Variant::ALL {
        for (threads, pool) in &pools {
            let threads = *threads;
            let run = |epochs: usize| {
                let model = DeepConfig {
                    hidden_dim: 16,
                    n_layers: 3,
                    variant,
                    norm,
                    order,
                    bias: true,
                    ..Default::default()
                };
                let cfg = TrainConfig {
                    epochs,
                    stop: StopRule::Patience { patience: 1000 },
                    par: Par::Rayon,
                    ..Default::default()
                };
                let (r, _) = fit_deep(
                    &adj,
                    &x,
                    &d.labels,
                    d.n_classes,
                    &d.split,
                    &model,
                    &cfg,
                    7,
                    &opts,
                )
                .unwrap();
                assert_eq!(r.history.len(), epochs);
            };
            let what = format!(
                "DeepGcn {variant}, norm {norm}, sparse {sparse}, {order:?}, DropEdge {drop_edge:?}"
            );
            assert_epoch_independent_in(pool, &what, threads, &run);
        }
    }
}

#[test]
fn deep_dense_allocates_nothing_per_epoch() {
    deep_case(NormKind::None, false, Order::Auto, None);
}

#[test]
fn deep_batch_norm_allocates_nothing_per_epoch() {
    deep_case(NormKind::Batch, false, Order::Auto, None);
}

#[test]
fn deep_pair_norm_allocates_nothing_per_epoch() {
    use sparse_gcn::nn::norm::{PairNorm, PairNormMode};
    for mode in [PairNormMode::Pn, PairNormMode::PnSi, PairNormMode::PnScs] {
        deep_case(
            NormKind::Pair(PairNorm { scale: 1.0, mode }),
            false,
            Order::Auto,
            None,
        );
    }
}

#[test]
fn deep_sparse_aggregate_first_allocates_nothing_per_epoch() {
    deep_case(NormKind::None, true, Order::AggregateFirst, None);
}

#[test]
fn deep_sparse_transform_first_allocates_nothing_per_epoch() {
    deep_case(NormKind::Batch, true, Order::TransformFirst, None);
}

fn drop_edge_opts(d: &Dataset, norm: Norm) -> FitOptions<'_> {
    FitOptions {
        drop_edge: Some(DropEdgeSource {
            graph: &d.graph,
            drop: DropEdge { p: 0.3 },
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
                model: GcnConfig {
                    in_dim: x.n_cols(),
                    out_dim: d.n_classes,
                    order,
                    bias: true,
                    n_layers: 3,
                    ..Default::default()
                },
                epochs,
                stop: StopRule::Patience { patience: 1000 },
                par: Par::Rayon,
                ..Default::default()
            };
            let mut model = cfg.model.init(&adj, &x, &mut rng_stream(7, 0)).unwrap();
            let r = train_model(&mut model, &adj, &x, &d.labels, &d.split, &cfg, 7, &opts).unwrap();
            assert_eq!(r.history.len(), epochs);
        };
        let what = format!("Gcn {order:?}, sparse {sparse}, DropEdge {norm:?}");
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
    deep_case(NormKind::Batch, false, Order::Auto, Some(Norm::Symmetric));
}
