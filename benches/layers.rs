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
//! Each layer runs inside a one-layer `nn::Model` stack (`Model::from_nodes`), the only way a
//! layer is called, on buffers the stack plans on the first pass and reuses. The stack is told
//! that its input changes between passes (`drop_edge > 0` in its configuration; every pass still
//! runs on the model's own Â), so nothing computed from X is cached: a pass recomputes Â·H, and
//! for AggregateFirst on sparse features the values of the sparse product Â·X on its kept
//! pattern, as a training step with input dropout does. The forward pass is a training-mode
//! pass that stops after the logits (`Model::train_pass` with a loss that returns `false`). The
//! backward pass is timed alone: each iteration zeroes the gradients and runs a training pass,
//! timing from the moment the loss has written ∂L/∂Z (a fixed random G) to the end of backward.
//! Layers that compute dH (and GCNII) read their input from a pass-through node
//! (`HiddenInput`, defined here, with a 1 × 1 dummy parameter so the stack asks for ∂L/∂H), as
//! a hidden layer does; its calls do nothing.
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
use ndarray::Array2;
use rand_chacha::ChaCha8Rng;
use sparse_gcn::data::synthetic::Preset;
use sparse_gcn::data::Features;
use sparse_gcn::graph::{Norm, NormAdj};
use sparse_gcn::nn::gcnii::GcniiConv;
use sparse_gcn::nn::layer::{Bwd, Cx, Fwd, GradMode, InputDesc, Spec};
use sparse_gcn::nn::{
    GcnConv, Layer, MaskStreams, Model, ModelConfig, Node, Order, Param, Src, Wiring,
};
use sparse_gcn::train::rng_stream;
use sparse_gcn::Par;

use common::{InputWork, LayerWork, SEED};

/// One GCN layer case: a graph, an input and the layer's widths.
struct LayerCase<'a> {
    /// Id prefix: `<graph>,<layer>,<in>-><out>[,sparse]`.
    tag: String,
    adj: &'a NormAdj<f32>,
    input: &'a Features<f32>,
    out_dim: usize,
    need_dh: bool,
    pars: &'a [(Par, &'static str)],
}

const BOTH: [(Par, &str); 2] = [(Par::Seq, "seq"), (Par::Rayon, "rayon")];
const RAYON: [(Par, &str); 1] = [(Par::Rayon, "rayon")];
const ORDERS: [Order; 2] = [Order::AggregateFirst, Order::TransformFirst];

/// A pass-through node: the stack copies its input (the features, here a dense H) into its
/// output, and its backward leaves ∂L/∂out in place as ∂L/∂in. Its 1 × 1 dummy parameter (never
/// read) makes the stack compute the next layer's input gradient, as for a hidden layer.
#[derive(Debug, Clone)]
struct HiddenInput {
    dim: usize,
    dummy: Param<f32>,
}

impl HiddenInput {
    fn new(dim: usize) -> Self {
        HiddenInput {
            dim,
            dummy: Param::zeros(1, 1),
        }
    }
}

impl Layer<f32> for HiddenInput {
    fn name(&self) -> &'static str {
        "hidden_input"
    }
    fn spec(&self, _inputs: &[InputDesc], _n: usize) -> Spec {
        Spec {
            in_place: true,
            grad: GradMode::InPlace,
            ..Spec::new(self.dim).reading(self.dim)
        }
    }
    fn forward(&mut self, _cx: &mut Cx<'_, f32>, _io: Fwd<'_, f32>) -> sparse_gcn::Result<()> {
        Ok(())
    }
    fn backward(&mut self, _cx: &mut Cx<'_, f32>, _io: Bwd<'_, f32>) -> sparse_gcn::Result<()> {
        Ok(())
    }
    fn visit_params(&mut self, f: &mut dyn FnMut(&'static str, &mut Param<f32>)) {
        f("dummy", &mut self.dummy);
    }
    fn clone_box(&self) -> Box<dyn Layer<f32>> {
        Box::new(self.clone())
    }
}

/// A stack of `layer` (of arity `arity`) reading the features, through a [`HiddenInput`] of
/// width `in_dim` when `hidden`. Its configuration says that the input changes between passes
/// (`drop_edge > 0`), so no layer caches what it computes from X.
fn stack(layer: Box<dyn Layer<f32>>, arity: usize, in_dim: usize, hidden: bool) -> Model<f32> {
    let out_dim = layer.spec(&[], 1).out_dim;
    let cfg = ModelConfig {
        in_dim,
        out_dim,
        n_layers: 1,
        dropout: 0.0,
        input_dropout: 0.0,
        drop_edge: 0.5,
        ..ModelConfig::default()
    };
    let mut nodes = Vec::new();
    let src = if hidden {
        nodes.push(Node {
            layer: Box::new(HiddenInput::new(in_dim)),
            inputs: vec![Src::X],
            group: 0,
            site: 0,
        });
        Src::Node(0)
    } else {
        Src::X
    };
    nodes.push(Node {
        layer,
        inputs: vec![src; arity],
        group: 0,
        site: 0,
    });
    let wiring = Wiring {
        input_site: 1,
        streams: MaskStreams::Shared,
        ..Wiring::default()
    };
    let opts = cfg.stack_options();
    Model::from_nodes(nodes, wiring, opts).unwrap_or_else(|e| panic!("the bench's stack: {e}"))
}

/// A training-mode pass that stops after the logits.
fn forward(
    model: &mut Model<f32>,
    adj: &NormAdj<f32>,
    x: &Features<f32>,
    rng: &mut ChaCha8Rng,
    par: Par,
) {
    model
        .train_pass(adj, x, rng, par, &mut |z, _| {
            black_box(z);
            false
        })
        .unwrap();
}

/// The time of the backward calls of one training pass with ∂L/∂Z = `g`.
fn timed_backward(
    model: &mut Model<f32>,
    adj: &NormAdj<f32>,
    x: &Features<f32>,
    g: &Array2<f32>,
    rng: &mut ChaCha8Rng,
    par: Par,
) -> Duration {
    model.zero_grad();
    let mut t0 = None;
    model
        .train_pass(adj, x, rng, par, &mut |mut dz, _| {
            dz.assign(g);
            t0 = Some(Instant::now());
            true
        })
        .unwrap();
    let t = t0.map_or(Duration::ZERO, |t| t.elapsed());
    model.visit_params(&mut |_, p| {
        black_box(&p.grad);
    });
    t
}

fn bench_layers(c: &mut Criterion) {
    // ---- the graphs and inputs, built once ----
    let cora = common::preset(Preset::CoraLike);
    let cora_adj = NormAdj::<f32>::new(&cora.graph, Norm::Symmetric);
    let cora_h16 = Features::dense(common::dense(cora_adj.n_nodes(), 16, SEED + 1));
    let arxiv = common::preset(Preset::ArxivLike);
    let arxiv_adj = NormAdj::<f32>::new(&arxiv.graph, Norm::Symmetric);
    let n_arxiv = arxiv_adj.n_nodes();
    let arxiv_h256 = Features::dense(common::dense(n_arxiv, common::WIDE_HIDDEN, SEED + 2));
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
            input: &cora.features,
            out_dim: 16,
            need_dh: false,
            pars: &BOTH,
        },
        LayerCase {
            tag: format!("cora-like,l2,16->{}", cora.n_classes),
            adj: &cora_adj,
            input: &cora_h16,
            out_dim: cora.n_classes,
            need_dh: true,
            pars: &BOTH,
        },
        LayerCase {
            tag: format!("arxiv-like,l1,{}->256", arxiv.features.n_cols()),
            adj: &arxiv_adj,
            input: &arxiv.features,
            out_dim: common::WIDE_HIDDEN,
            need_dh: false,
            pars: &RAYON,
        },
        LayerCase {
            tag: "arxiv-like,l2,256->256".into(),
            adj: &arxiv_adj,
            input: &arxiv_h256,
            out_dim: common::WIDE_HIDDEN,
            need_dh: true,
            pars: &RAYON,
        },
        LayerCase {
            tag: format!("arxiv-like,l3,256->{}", arxiv.n_classes),
            adj: &arxiv_adj,
            input: &arxiv_h256,
            out_dim: arxiv.n_classes,
            need_dh: true,
            pars: &RAYON,
        },
    ];
    // Work counts (the sparse one computes the pattern of Â·X once).
    let works: Vec<LayerWork> = cases
        .iter()
        .map(|k| LayerWork {
            n: k.adj.n_nodes(),
            nnz_adj: k.adj.nnz(),
            in_dim: k.input.n_cols(),
            out_dim: k.out_dim,
            input: InputWork::of(k.adj, k.input),
            need_dh: k.need_dh,
        })
        .collect();
    let mut rng = rng_stream(SEED, 1);

    // ---- forward ----
    let mut group = c.benchmark_group("layers_forward");
    common::slow(&mut group);
    for (k, work) in cases.iter().zip(&works) {
        for order in ORDERS {
            let mut model = stack(Box::new(new_layer(work, order)), 1, work.in_dim, false);
            group.throughput(Throughput::Elements(work.forward_macs(order)));
            for &(par, par_name) in k.pars {
                let id = format!(
                    "gcn,{},order={},par={par_name}",
                    k.tag,
                    common::order_name(order)
                );
                group.bench_function(BenchmarkId::from_parameter(id), |b| {
                    b.iter(|| forward(&mut model, k.adj, k.input, &mut rng, par))
                });
            }
        }
    }
    gcnii_forward(&mut group, &arxiv_adj, &arxiv_h256, &mut rng);
    group.finish();

    // ---- backward ----
    let mut group = c.benchmark_group("layers_backward");
    common::slow(&mut group);
    for (k, work) in cases.iter().zip(&works) {
        for order in ORDERS {
            let mut model = stack(Box::new(new_layer(work, order)), 1, work.in_dim, k.need_dh);
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
                        (0..iters)
                            .map(|_| timed_backward(&mut model, k.adj, k.input, &g, &mut rng, par))
                            .sum()
                    })
                });
            }
        }
    }
    gcnii_backward(&mut group, &arxiv_adj, &arxiv_h256, &mut rng);
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
fn gcnii_forward(
    group: &mut BenchmarkGroup<'_, WallTime>,
    adj: &NormAdj<f32>,
    h: &Features<f32>,
    rng: &mut ChaCha8Rng,
) {
    let d = common::WIDE_HIDDEN;
    let mut model = stack(Box::new(gcnii_layer()), 2, d, false);
    let n = h.n_rows();
    group.throughput(Throughput::Elements((adj.nnz() * d + n * d * d) as u64));
    group.bench_function(BenchmarkId::from_parameter(gcnii_id()), |b| {
        b.iter(|| forward(&mut model, adj, h, rng, Par::Rayon))
    });
}

/// GCNII backward: Sᵀ·G and G·Wᵀ (n·d·d each) and Âᵀ·dS (nnz(Â)·d), with the gradients of H
/// and H₀ (the same node here, so the stack adds them).
fn gcnii_backward(
    group: &mut BenchmarkGroup<'_, WallTime>,
    adj: &NormAdj<f32>,
    h: &Features<f32>,
    rng: &mut ChaCha8Rng,
) {
    let d = common::WIDE_HIDDEN;
    let mut model = stack(Box::new(gcnii_layer()), 2, d, true);
    let n = h.n_rows();
    let g = common::dense(n, d, SEED + 4);
    group.throughput(Throughput::Elements((2 * n * d * d + adj.nnz() * d) as u64));
    group.bench_function(BenchmarkId::from_parameter(gcnii_id()), |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| timed_backward(&mut model, adj, h, &g, rng, Par::Rayon))
                .sum()
        })
    });
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = bench_layers
}
criterion_main!(benches);
