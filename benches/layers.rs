//! Layer benches: each GCN layer's forward (`layers_forward`) and backward (`layers_backward`)
//! in both orders (AggregateFirst `agg` = (ÂH)W, TransformFirst `tf` = Â(HW)), at the layer
//! shapes of the models the `epoch` bench trains, plus a GCNII layer.
//!
//! ```text
//! cargo bench --bench layers                        # both groups (about 4–6 min)
//! cargo bench --bench layers -- layers_forward      # one group
//! cargo bench --bench layers -- cora-like           # the small cases only
//! ```
//!
//! Layers (built once; all inputs seeded):
//! - `cora-like` (`Preset::CoraLike`, 2,708 nodes, sparse row-normalised bag-of-words):
//!   Kipf's `l1` 1433→16 on the sparse features (backward without dH, as a first layer) and
//!   `l2` 16→7 on a random dense H (backward with dH); seq and rayon.
//! - `arxiv-like` (`Preset::ArxivLike`, 169,343 nodes, nnz(Â) ≈ 2.5M): the OGB 3×256 model's
//!   `l1` 128→256 on the dense features (no dH), `l2` 256→256 and `l3` 256→40 on random dense H
//!   (with dH); rayon only (the `spmm` and `gemm` groups compare seq with rayon).
//! - `gcnii,arxiv-like,d=256`: one GCNII convolution (α = 0.1, λ = 0.5, l = 1), which has a
//!   single order; rayon.
//!
//! The forward pass includes allocating its output and cache (as training does) and, for
//! AggregateFirst on sparse features, the sparse Â·X product (recomputed every training step
//! when the input has dropout). The backward pass is timed alone: each iteration runs an
//! untimed forward to get a fresh cache, zeroes the gradient, then times `backward`.
//!
//! Throughput (`Elements`) = the multiply-adds of the products the pass runs in that order
//! (`common::LayerWork`: SpMM nnz(Â)·width, sparse × dense nnz·width, sparse × sparse
//! Σ nnz(x_j), GEMM m·k·n); bias, ReLU and dropout are not counted. GFLOP/s = 2 × the rate.

mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, Throughput,
};
use ndarray::{Array2, CowArray};
use sparse_gcn::graph::synthetic::Preset;
use sparse_gcn::graph::{Norm, NormAdj};
use sparse_gcn::nn::gcnii::GcniiConv;
use sparse_gcn::nn::model::input_of;
use sparse_gcn::nn::{GcnConv, Input, Order};
use sparse_gcn::train::rng_stream;
use sparse_gcn::Par;

use common::{InputWork, LayerWork, SEED};

/// One GCN layer case: a graph, an input and the layer's widths.
struct LayerCase<'a> {
    /// Id prefix: `<graph>,<layer>,<in>-><out>[,sparse]`.
    tag: String,
    adj: &'a NormAdj<f32>,
    input: Input<'a, f32>,
    out_dim: usize,
    need_dh: bool,
    pars: &'a [(Par, &'static str)],
}

const BOTH: [(Par, &str); 2] = [(Par::Seq, "seq"), (Par::Rayon, "rayon")];
const RAYON: [(Par, &str); 1] = [(Par::Rayon, "rayon")];
const ORDERS: [Order; 2] = [Order::AggregateFirst, Order::TransformFirst];

/// Dense input of a hidden layer (as `Input`).
fn dense_input(h: &Array2<f32>) -> Input<'_, f32> {
    Input::Dense(CowArray::from(h.view()))
}

fn bench_layers(c: &mut Criterion) {
    // ---- the graphs and inputs, built once ----
    let cora = common::preset(Preset::CoraLike);
    let cora_adj = NormAdj::<f32>::new(&cora.graph, Norm::Symmetric);
    let cora_h16 = common::dense(cora_adj.n_nodes(), 16, SEED + 1);
    let arxiv = common::preset(Preset::ArxivLike);
    let arxiv_adj = NormAdj::<f32>::new(&arxiv.graph, Norm::Symmetric);
    let n_arxiv = arxiv_adj.n_nodes();
    let arxiv_h256 = common::dense(n_arxiv, common::WIDE_HIDDEN, SEED + 2);
    eprintln!(
        "layers: cora-like n = {}, nnz(Â) = {}, nnz(X) = {}; arxiv-like n = {n_arxiv}, nnz(Â) = \
         {}, X dense {}×{}",
        cora_adj.n_nodes(),
        cora_adj.nnz(),
        cora.features.nnz(),
        arxiv_adj.nnz(),
        n_arxiv,
        arxiv.features.n_cols()
    );

    let cases = [
        LayerCase {
            tag: format!("cora-like,l1,{}->16,sparse", cora.features.n_cols()),
            adj: &cora_adj,
            input: input_of(&cora.features),
            out_dim: 16,
            need_dh: false,
            pars: &BOTH,
        },
        LayerCase {
            tag: format!("cora-like,l2,16->{}", cora.n_classes),
            adj: &cora_adj,
            input: dense_input(&cora_h16),
            out_dim: cora.n_classes,
            need_dh: true,
            pars: &BOTH,
        },
        LayerCase {
            tag: format!("arxiv-like,l1,{}->256", arxiv.features.n_cols()),
            adj: &arxiv_adj,
            input: input_of(&arxiv.features),
            out_dim: common::WIDE_HIDDEN,
            need_dh: false,
            pars: &RAYON,
        },
        LayerCase {
            tag: "arxiv-like,l2,256->256".into(),
            adj: &arxiv_adj,
            input: dense_input(&arxiv_h256),
            out_dim: common::WIDE_HIDDEN,
            need_dh: true,
            pars: &RAYON,
        },
        LayerCase {
            tag: format!("arxiv-like,l3,256->{}", arxiv.n_classes),
            adj: &arxiv_adj,
            input: dense_input(&arxiv_h256),
            out_dim: arxiv.n_classes,
            need_dh: true,
            pars: &RAYON,
        },
    ];
    // Work counts (the sparse one computes Â·X once).
    let works: Vec<LayerWork> = cases
        .iter()
        .map(|k| LayerWork {
            n: k.adj.n_nodes(),
            nnz_adj: k.adj.nnz(),
            in_dim: k.input.ncols(),
            out_dim: k.out_dim,
            input: InputWork::of(k.adj, &k.input),
            need_dh: k.need_dh,
        })
        .collect();

    // ---- forward ----
    let mut group = c.benchmark_group("layers_forward");
    common::slow(&mut group);
    for (k, work) in cases.iter().zip(&works) {
        for order in ORDERS {
            let layer = new_layer(work, order);
            group.throughput(Throughput::Elements(work.forward_macs(order)));
            for &(par, par_name) in k.pars {
                let id = format!(
                    "gcn,{},order={},par={par_name}",
                    k.tag,
                    common::order_name(order)
                );
                group.bench_function(BenchmarkId::from_parameter(id), |b| {
                    b.iter(|| black_box(layer.forward(k.adj, k.input.clone(), None, par)))
                });
            }
        }
    }
    gcnii_forward(&mut group, &arxiv_adj, &arxiv_h256);
    group.finish();

    // ---- backward ----
    let mut group = c.benchmark_group("layers_backward");
    common::slow(&mut group);
    for (k, work) in cases.iter().zip(&works) {
        for order in ORDERS {
            let mut layer = new_layer(work, order);
            let g = common::dense(k.adj.n_nodes(), k.out_dim, SEED + 3);
            group.throughput(Throughput::Elements(work.backward_macs(order)));
            for &(par, par_name) in k.pars {
                let id = format!(
                    "gcn,{},order={},par={par_name}",
                    k.tag,
                    common::order_name(order)
                );
                group.bench_function(BenchmarkId::from_parameter(id), |b| {
                    b.iter_custom(|iters| {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            let (z, cache) = layer.forward(k.adj, k.input.clone(), None, par);
                            drop(z);
                            layer.weight.zero_grad();
                            let t = Instant::now();
                            let dh = layer.backward(k.adj, cache, None, g.view(), k.need_dh, par);
                            total += t.elapsed();
                            black_box(dh);
                        }
                        total
                    })
                });
            }
        }
    }
    gcnii_backward(&mut group, &arxiv_adj, &arxiv_h256);
    group.finish();
}

/// A Glorot-initialised layer for `work` with `order` (no bias, as Kipf's model).
fn new_layer(work: &LayerWork, order: Order) -> GcnConv<f32> {
    GcnConv::new(
        work.in_dim,
        work.out_dim,
        false,
        order,
        &mut rng_stream(SEED, 0),
    )
}

/// The GCNII layer of the bench: width 256, α = 0.1, λ = 0.5, layer 1.
fn gcnii_layer() -> GcniiConv<f32> {
    GcniiConv::new(common::WIDE_HIDDEN, 0.1, 0.5, 1, &mut rng_stream(SEED, 0))
}

fn gcnii_id() -> String {
    format!("gcnii,arxiv-like,d={},par=rayon", common::WIDE_HIDDEN)
}

/// GCNII forward: S = (1−α)·Â·H + α·H₀ (nnz(Â)·d) and S·W (n·d·d). H₀ = H here.
fn gcnii_forward(group: &mut BenchmarkGroup<'_, WallTime>, adj: &NormAdj<f32>, h: &Array2<f32>) {
    let layer = gcnii_layer();
    let (n, d) = h.dim();
    group.throughput(Throughput::Elements((adj.nnz() * d + n * d * d) as u64));
    group.bench_function(BenchmarkId::from_parameter(gcnii_id()), |b| {
        b.iter(|| black_box(layer.forward(adj, h.view(), h.view(), Par::Rayon)))
    });
}

/// GCNII backward: Sᵀ·G and G·Wᵀ (n·d·d each) and Âᵀ·dS (nnz(Â)·d).
fn gcnii_backward(group: &mut BenchmarkGroup<'_, WallTime>, adj: &NormAdj<f32>, h: &Array2<f32>) {
    let mut layer = gcnii_layer();
    let (n, d) = h.dim();
    let g = common::dense(n, d, SEED + 4);
    let mut dh0 = Array2::<f32>::zeros((n, d));
    group.throughput(Throughput::Elements((2 * n * d * d + adj.nnz() * d) as u64));
    group.bench_function(BenchmarkId::from_parameter(gcnii_id()), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (z, cache) = layer.forward(adj, h.view(), h.view(), Par::Rayon);
                drop(z);
                layer.weight.zero_grad();
                dh0.fill(0.0);
                let t = Instant::now();
                let dh = layer.backward(adj, cache, g.view(), &mut dh0, Par::Rayon);
                total += t.elapsed();
                black_box(dh);
            }
            total
        })
    });
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = bench_layers
}
criterion_main!(benches);
