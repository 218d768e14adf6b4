//! The kernel profile behind `roofline --epoch`. Its recording is process-wide, so this file
//! holds one test: nothing else runs kernels while it records.

use ndarray::Array2;
use sparse_gcn::kernels::profile::{span, Phase, Recording, Work};
use sparse_gcn::kernels::{gemm, spmm, Csr};
use sparse_gcn::Par;

#[test]
fn records_outermost_spans_with_their_work_and_nothing_when_off() {
    let a = Array2::<f32>::ones((4, 3));
    let b = Array2::<f32>::ones((3, 5));
    let mut out = Array2::<f32>::zeros((4, 5));
    gemm(1.0, a.view(), b.view(), 0.0, out.view_mut(), Par::Seq);

    let rec = Recording::start(16);
    gemm(1.0, a.view(), b.view(), 0.0, out.view_mut(), Par::Rayon);
    {
        // A span inside another is part of it: the inner GEMM records nothing.
        let _outer = span(Phase::WeightGrad, || Work::Gemm { m: 2, k: 3, n: 4 });
        gemm(1.0, a.view(), b.view(), 0.0, out.view_mut(), Par::Seq);
    }
    let csr = Csr::<f32>::new((2, 4), vec![0, 1, 3], vec![0, 1, 3], vec![1.0, 2.0, 3.0]);
    let mut y = Array2::<f32>::zeros((2, 3));
    spmm(1.0, csr.view(), a.view(), 0.0, y.view_mut(), Par::Seq);
    let first = rec.take();
    {
        let _s = span(Phase::Loss, || Work::Stream { bytes: 40 });
    }
    let second = rec.finish();
    gemm(1.0, a.view(), b.view(), 0.0, out.view_mut(), Par::Seq);

    let works: Vec<(Phase, Work)> = first.iter().map(|r| (r.phase, r.work)).collect();
    assert_eq!(
        works,
        vec![
            (Phase::Gemm, Work::Gemm { m: 4, k: 3, n: 5 }),
            (Phase::WeightGrad, Work::Gemm { m: 2, k: 3, n: 4 }),
            (
                Phase::Spmm,
                Work::Spmm {
                    rows: 2,
                    nnz: 3,
                    d: 3
                }
            ),
        ]
    );
    assert_eq!(second.len(), 1);
    assert_eq!(
        (second[0].phase, second[0].work),
        (Phase::Loss, Work::Stream { bytes: 40 })
    );
    assert!(first.iter().chain(&second).all(|r| r.seconds >= 0.0));
    // Off again: a new recording starts empty.
    assert!(Recording::start(1).finish().is_empty());
}
