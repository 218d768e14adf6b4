//! Kernel benches: `spmm` (Â·X, ours serial and under rayon, against sprs's reference kernel on
//! the same matrix) and `gemm` (the dense products of a GCN layer).
//!
//! ```text
//! cargo bench --bench kernels                  # everything (a few minutes)
//! cargo bench --bench kernels -- --quick spmm  # one group, criterion's quick mode
//! ```
//!
//! Throughput is reported in multiply-adds (`Elements`): nnz·d for SpMM, m·k·n for GEMM.
//! GFLOP/s = 2 × that rate. `docs/BENCHMARKS.md` records results.

mod common;

use std::hint::black_box;

use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use ndarray::Array2;
use sparse_gcn::graph::{Norm, NormAdj};
use sparse_gcn::kernels::{gemm, spmm};
use sparse_gcn::Par;

use common::{Degrees, N_NODES, SEED, SPMM_WIDTHS};

/// The SpMM widths: the shared [`SPMM_WIDTHS`] plus 256, the widest compile-time width of
/// `spmm`'s fast path.
fn spmm_widths() -> impl Iterator<Item = usize> {
    SPMM_WIDTHS.into_iter().chain([256])
}

/// `spmm`: out ← Â·X for the uniform and the power-law graph, d ∈ [`spmm_widths`]
/// (16, 64, 128, 256).
fn bench_spmm(c: &mut Criterion) {
    let mut group = c.benchmark_group("spmm");
    // One call takes 10–300 ms: equal iteration counts per sample keep the run short.
    group.sampling_mode(SamplingMode::Flat);
    for kind in Degrees::ALL {
        let data = common::synthetic_graph(kind);
        let adj = NormAdj::<f32>::new(&data.graph, Norm::Symmetric);
        drop(data);
        let (n, nnz) = (adj.n_nodes(), adj.nnz());
        let max_row = adj.a().outer_iterator().map(|r| r.nnz()).max().unwrap_or(0);
        eprintln!(
            "spmm graph {}: n = {n}, nnz(Â) = {nnz} (self-loops included), max row {max_row}",
            kind.name()
        );
        for d in spmm_widths() {
            let x = common::dense(n, d, SEED + d as u64);
            let mut out = Array2::<f32>::zeros((n, d));
            group.throughput(Throughput::Elements((nnz * d) as u64));
            let tag = format!("{},n={},d={d}", kind.name(), common::short(N_NODES));
            for (par, name) in [(Par::Seq, "seq"), (Par::Rayon, "rayon")] {
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
            // The reference: sprs's CSR × dense kernel (single-threaded) on the same Â and X,
            // into the same preallocated output. It accumulates, so the output is zeroed
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
    group.finish();
}

/// A GEMM case: `out (m×n) ← op(A)·op(B)`.
struct GemmCase {
    /// Id prefix.
    name: &'static str,
    m: usize,
    k: usize,
    n: usize,
    /// A is stored k×m and passed as `.t()` (Hᵀ·G).
    a_t: bool,
    /// B is stored n×k and passed as `.t()` (G·Wᵀ).
    b_t: bool,
}

/// `gemm`: the dense products of a GCN layer's forward and backward passes.
fn bench_gemm(c: &mut Criterion) {
    let n = N_NODES;
    let cases = [
        // Forward H·W: Cora's dense input layer, and a hidden layer on the 100k graph.
        GemmCase {
            name: "HW",
            m: 2708,
            k: 1433,
            n: 16,
            a_t: false,
            b_t: false,
        },
        GemmCase {
            name: "HW",
            m: n,
            k: 128,
            n: 16,
            a_t: false,
            b_t: false,
        },
        GemmCase {
            name: "HW",
            m: n,
            k: 16,
            n: 40,
            a_t: false,
            b_t: false,
        },
        // Weight gradient Hᵀ·G: a tall-skinny reduction over the nodes.
        GemmCase {
            name: "HtG",
            m: 1433,
            k: 2708,
            n: 16,
            a_t: true,
            b_t: false,
        },
        GemmCase {
            name: "HtG",
            m: 128,
            k: n,
            n: 16,
            a_t: true,
            b_t: false,
        },
        // Input gradient G·Wᵀ.
        GemmCase {
            name: "GWt",
            m: n,
            k: 16,
            n: 128,
            a_t: false,
            b_t: true,
        },
    ];
    let mut group = c.benchmark_group("gemm");
    for (i, g) in cases.iter().enumerate() {
        let seed = SEED + 1000 + i as u64;
        let a = if g.a_t {
            common::dense(g.k, g.m, seed)
        } else {
            common::dense(g.m, g.k, seed)
        };
        let b = if g.b_t {
            common::dense(g.n, g.k, seed + 1)
        } else {
            common::dense(g.k, g.n, seed + 1)
        };
        let mut out = Array2::<f32>::zeros((g.m, g.n));
        group.throughput(Throughput::Elements((g.m * g.k * g.n) as u64));
        let tag = format!(
            "{},m={},k={},n={}",
            g.name,
            common::short(g.m),
            common::short(g.k),
            common::short(g.n)
        );
        for (par, name) in [(Par::Seq, "seq"), (Par::Rayon, "rayon")] {
            group.bench_function(
                BenchmarkId::from_parameter(format!("{tag},par={name}")),
                |bch| {
                    bch.iter(|| {
                        let av = if g.a_t { a.t() } else { a.view() };
                        let bv = if g.b_t { b.t() } else { b.view() };
                        gemm(1.0, av, bv, 0.0, out.view_mut(), par);
                        black_box(&out);
                    })
                },
            );
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = bench_spmm, bench_gemm
}
criterion_main!(benches);
