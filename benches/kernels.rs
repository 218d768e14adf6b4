//! Kernel benches: `spmm` (Â·X: ours serial and under rayon, on uniform and power-law degree
//! graphs, in a random and a reordered node order, against sprs's reference kernel), `gemm`
//! (the dense products of a GCN layer: H·W, Hᵀ·G, G·Wᵀ) and `elementwise` (a hidden layer's
//! ReLU·dropout, its mask draw alone, and its backward).
//!
//! ```text
//! cargo bench --bench kernels                       # both groups (about 6–8 min)
//! cargo bench --bench kernels -- spmm               # one group
//! cargo bench --bench kernels -- elementwise        # the ReLU·dropout passes (about 1 min)
//! SPARSE_GCN_DATA=../shared/datasets cargo bench --bench kernels -- spmm_real   # real graphs
//! cargo bench --bench kernels -- 'spmm/powerlaw'    # a filter on the ids
//! ```
//!
//! Throughput is reported in multiply-adds (`Elements`): nnz(Â)·d for SpMM (self-loops
//! included), m·k·n for GEMM. GFLOP/s = 2 × that rate. `docs/BENCHMARKS.md` records results.

mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ndarray::Array2;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use sparse_gcn::graph::{Graph, Norm, NormAdj};
use sparse_gcn::kernels::{elementwise, gemm, spmm};
use sparse_gcn::Par;

use common::{Degrees, N_NODES, SEED, SPMM_WIDTHS};

const PARS: [(Par, &str); 2] = [(Par::Seq, "seq"), (Par::Rayon, "rayon")];

/// `spmm`: out ← Â·X for the uniform and the power-law graph (100k nodes, average degree 10),
/// d ∈ {16, 64, 128, 256}, in a random node order (an explicit random permutation) and in the
/// order of [`common::reordered`] (label-propagation communities), serial and under rayon. The
/// random order also runs sprs's CSR × dense kernel as a reference.
///
/// Ids: `<degrees>,n=100k,d=<d>,order=<random|community>,par=<seq|rayon>` and
/// `<degrees>,n=100k,d=<d>,order=random,sprs`.
fn bench_spmm(c: &mut Criterion) {
    let mut group = c.benchmark_group("spmm");
    // One call takes 2–700 ms: equal iteration counts per sample keep the run short.
    common::slow(&mut group);
    for kind in Degrees::ALL {
        let data = common::synthetic_graph(kind);
        let random = common::random_order(&data.graph);
        drop(data);
        let (reorder_name, reordered) = common::reordered(&random);
        let orders: [(String, Graph); 2] = [("random".into(), random), (reorder_name, reordered)];
        for (order, graph) in &orders {
            common::print_locality(&format!("spmm graph {},{order}", kind.name()), graph);
        }
        for (order, graph) in orders {
            let adj = NormAdj::<f32>::new(&graph, Norm::Symmetric);
            drop(graph);
            let (n, nnz) = (adj.n_nodes(), adj.nnz());
            let max_row = adj.a().outer_iterator().map(|r| r.nnz()).max().unwrap_or(0);
            eprintln!(
                "spmm graph {},{order}: n = {n}, nnz(Â) = {nnz} (self-loops included), max row \
                 {max_row}",
                kind.name()
            );
            for d in SPMM_WIDTHS {
                let x = common::dense(n, d, SEED + d as u64);
                let mut out = Array2::<f32>::zeros((n, d));
                group.throughput(Throughput::Elements((nnz * d) as u64));
                let tag = format!(
                    "{},n={},d={d},order={order}",
                    kind.name(),
                    common::short(N_NODES)
                );
                for (par, name) in PARS {
                    group.bench_function(
                        BenchmarkId::from_parameter(format!("{tag},par={name}")),
                        |b| {
                            b.iter(|| {
                                spmm(1.0, adj.a(), x.view(), 0.0, out.view_mut(), par);
                                black_box(&out);
                            })
                        },
                    );
                }
                if order != "random" {
                    continue;
                }
                // The reference: sprs's CSR × dense kernel (single-threaded) on the same Â and
                // X, into the same preallocated output. It accumulates, so the output is zeroed
                // first, as our β = 0 does.
                group.bench_function(BenchmarkId::from_parameter(format!("{tag},sprs")), |b| {
                    b.iter(|| {
                        out.fill(0.0);
                        sprs::prod::csr_mulacc_dense_rowmaj(adj.a(), x.view(), out.view_mut());
                        black_box(&out);
                    })
                });
            }
        }
    }
    group.finish();
}

/// `spmm_real`: out ← Â·X on the real structure-only graphs of `$SPARSE_GCN_DATA`
/// (`cit_hepph`, a citation graph of 34,546 nodes, and `cnr_2000`, a web graph of 325,557
/// nodes), in their given node order, d ∈ {16, 64, 128, 256}, under rayon. Skipped (a note on
/// stderr) when the variable is unset.
///
/// Ids: `<graph>,d=<d>,par=rayon`.
fn bench_spmm_real(c: &mut Criterion) {
    let Some(root) = common::data_root() else {
        eprintln!("skipping spmm_real: {} is not set", common::ENV_DATA);
        return;
    };
    let mut group = c.benchmark_group("spmm_real");
    common::slow(&mut group);
    for name in ["cit_hepph", "cnr_2000"] {
        let Some(data) = common::load_dataset(&root.join(name)) else {
            continue;
        };
        let adj = NormAdj::<f32>::new(&data.graph, Norm::Symmetric);
        drop(data);
        let (n, nnz) = (adj.n_nodes(), adj.nnz());
        eprintln!("spmm_real {name}: n = {n}, nnz(Â) = {nnz}");
        for d in SPMM_WIDTHS {
            let x = common::dense(n, d, SEED + d as u64);
            let mut out = Array2::<f32>::zeros((n, d));
            group.throughput(Throughput::Elements((nnz * d) as u64));
            group.bench_function(
                BenchmarkId::from_parameter(format!("{name},d={d},par=rayon")),
                |b| {
                    b.iter(|| {
                        spmm(1.0, adj.a(), x.view(), 0.0, out.view_mut(), Par::Rayon);
                        black_box(&out);
                    })
                },
            );
        }
    }
    group.finish();
}

/// Which product of a GCN layer a GEMM case is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// Forward H·W: `out (n×h) ← H (n×f) · W (f×h)`.
    Hw,
    /// Weight gradient Hᵀ·G: `out (f×h) ← Hᵀ · G`, H stored n×f and passed as `.t()`.
    HtG,
    /// Input gradient G·Wᵀ: `out (n×f) ← G (n×h) · Wᵀ`, W stored f×h and passed as `.t()`.
    GWt,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Hw => "HW",
            Op::HtG => "HtG",
            Op::GWt => "GWt",
        }
    }
}

/// A GEMM case: `out (m×n) ← op(A)·op(B)` with inner dimension k.
struct GemmCase {
    /// The model and layer the shape comes from.
    model: &'static str,
    op: Op,
    m: usize,
    k: usize,
    n: usize,
}

impl GemmCase {
    /// The three products of a layer of width `f → h` on `nodes` nodes: H·W (n×f·f×h),
    /// Hᵀ·G (f×n·n×h) and, when `dh`, G·Wᵀ (n×h·h×f).
    fn layer(model: &'static str, nodes: usize, f: usize, h: usize, dh: bool) -> Vec<GemmCase> {
        let mut v = vec![
            GemmCase {
                model,
                op: Op::Hw,
                m: nodes,
                k: f,
                n: h,
            },
            GemmCase {
                model,
                op: Op::HtG,
                m: f,
                k: nodes,
                n: h,
            },
        ];
        if dh {
            v.push(GemmCase {
                model,
                op: Op::GWt,
                m: nodes,
                k: h,
                n: f,
            });
        }
        v
    }
}

/// Nodes of the arxiv-like preset (and of ogbn-arxiv).
const ARXIV_N: usize = 169_343;
/// Nodes of Cora.
const CORA_N: usize = 2708;

/// `gemm`: the dense products of each GCN layer's forward and backward, at the shapes of
/// Kipf's 2×16 model on Cora (the first layer as if X were dense) and on arxiv-like, and of the
/// OGB 3×256 model on arxiv-like. First layers need no G·Wᵀ.
///
/// Ids: `<model>,<HW|HtG|GWt>,m=…,k=…,n=…,par=<seq|rayon>`.
fn bench_gemm(c: &mut Criterion) {
    let mut cases = Vec::new();
    // Kipf on Cora: 1433 → 16 (dense-equivalent input).
    cases.extend(GemmCase::layer("cora-2x16-l1", CORA_N, 1433, 16, false));
    // Kipf on arxiv-like: 128 → 16 → 40.
    cases.extend(GemmCase::layer("arxiv-2x16-l1", ARXIV_N, 128, 16, false));
    cases.extend(GemmCase::layer("arxiv-2x16-l2", ARXIV_N, 16, 40, true));
    // OGB GCN on arxiv-like: 128 → 256 → 256 → 40.
    cases.extend(GemmCase::layer("arxiv-3x256-l1", ARXIV_N, 128, 256, false));
    cases.extend(GemmCase::layer("arxiv-3x256-l2", ARXIV_N, 256, 256, true));
    cases.extend(GemmCase::layer("arxiv-3x256-l3", ARXIV_N, 256, 40, true));

    let mut group = c.benchmark_group("gemm");
    // Calls take 0.1–500 ms.
    common::slow(&mut group);
    for (i, g) in cases.iter().enumerate() {
        let seed = SEED + 1000 + 2 * i as u64;
        let a = match g.op {
            Op::HtG => common::dense(g.k, g.m, seed),
            _ => common::dense(g.m, g.k, seed),
        };
        let b = match g.op {
            Op::GWt => common::dense(g.n, g.k, seed + 1),
            _ => common::dense(g.k, g.n, seed + 1),
        };
        let mut out = Array2::<f32>::zeros((g.m, g.n));
        group.throughput(Throughput::Elements((g.m * g.k * g.n) as u64));
        let tag = format!(
            "{},{},m={},k={},n={}",
            g.model,
            g.op.name(),
            common::short(g.m),
            common::short(g.k),
            common::short(g.n)
        );
        for (par, name) in PARS {
            group.bench_function(
                BenchmarkId::from_parameter(format!("{tag},par={name}")),
                |bch| {
                    bch.iter(|| {
                        let av = if g.op == Op::HtG { a.t() } else { a.view() };
                        let bv = if g.op == Op::GWt { b.t() } else { b.view() };
                        gemm(1.0, av, bv, 0.0, out.view_mut(), par);
                        black_box(&out);
                    })
                },
            );
        }
    }
    group.finish();
}

/// `elementwise`: a hidden layer's element-wise passes at arxiv-like's 169,343 × 256 (f32,
/// dropout 0.5), under rayon: `relu_dropout` (ReLU and dropout in one pass with the mask drawn
/// from ChaCha8 as it goes, writing 2-bit codes), `mask` (the same mask drawn alone into an
/// n × 256 array of factors: how much of the pass the random draw is) and `backward` (the
/// gradient through the codes). Set against the triad rate of `sparse-gcn roofline`: the pass
/// moves 8.25 bytes an element, the backward 8.25.
///
/// Ids: `<relu_dropout|mask|backward>,n=169k,d=256`.
fn bench_elementwise(c: &mut Criterion) {
    let (n, d, p) = (ARXIV_N, 256, 0.5);
    let h0 = common::dense(n, d, SEED + 77);
    let mut h = h0.clone();
    let mut codes = vec![0u8; elementwise::code_bytes(n * d)];
    let mut mask = Array2::<f32>::zeros((n, d));
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let mut group = c.benchmark_group("elementwise");
    common::slow(&mut group);
    group.throughput(Throughput::Elements((n * d) as u64));
    let tag = format!("n={},d={d}", common::short(n));
    group.bench_function(
        BenchmarkId::from_parameter(format!("relu_dropout,{tag}")),
        |b| {
            b.iter(|| {
                // A fresh copy would be a second pass: ReLU of its own output is the same work.
                elementwise::relu_dropout_at(
                    &mut rng,
                    p,
                    h.view_mut(),
                    &mut codes,
                    0,
                    n * d,
                    Par::Rayon,
                );
                black_box(&h);
            })
        },
    );
    group.bench_function(BenchmarkId::from_parameter(format!("mask,{tag}")), |b| {
        b.iter(|| {
            let Some(m) = mask.as_slice_mut() else {
                unreachable!("a new array is contiguous")
            };
            elementwise::fill_dropout_mask(&mut rng, p, m, Par::Rayon);
            black_box(&mask);
        })
    });
    h.assign(&h0);
    group.bench_function(
        BenchmarkId::from_parameter(format!("backward,{tag}")),
        |b| {
            b.iter(|| {
                elementwise::dropout_relu_backward_code(h.view_mut(), &codes, 2.0, Par::Rayon);
                black_box(&h);
            })
        },
    );
    group.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = bench_spmm, bench_spmm_real, bench_gemm, bench_elementwise
}
criterion_main!(benches);
