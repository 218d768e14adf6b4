//! Tests of the sums across nodes: partition independence, row blocks, exactness where f64
//! would round.
use std::cell::RefCell;

use ndarray::{Array1, Array2};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::kernels::Csr;

const GRID: usize = 64;
/// Rank bounds on the 64-row grid of 500 rows (a rank of 0 rows included).
const BOUNDS: [usize; 5] = [0, 128, 128, 320, 500];

fn random(n: usize, d: usize, seed: u64) -> Array2<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Array2::from_shape_fn((n, d), |_| rng.random::<f32>() * 2.0 - 1.0)
}

/// Runs `f(rows, sum_words)` once per rank of [`BOUNDS`] as a distributed run does: a
/// first pass gathers every rank's words, a second gives each rank their integer sum.
/// Returns every rank's output of the second pass.
fn distributed<T>(f: impl Fn(std::ops::Range<usize>, &dyn Fn(&mut [i64])) -> T) -> Vec<T> {
    let total: RefCell<Vec<i64>> = RefCell::new(Vec::new());
    for r in 0..BOUNDS.len() - 1 {
        f(BOUNDS[r]..BOUNDS[r + 1], &|w: &mut [i64]| {
            let mut t = total.borrow_mut();
            if t.is_empty() {
                t.resize(w.len(), 0);
            }
            t.iter_mut().zip(w.iter()).for_each(|(a, b)| *a += b);
        });
    }
    let total = total.into_inner();
    (0..BOUNDS.len() - 1)
        .map(|r| {
            f(BOUNDS[r]..BOUNDS[r + 1], &|w: &mut [i64]| {
                w.copy_from_slice(&total)
            })
        })
        .collect()
}

#[test]
fn weight_gradients_are_the_same_bits_for_any_partition_and_near_the_plain_product() {
    let (h, g) = (random(500, 7, 1), random(500, 5, 2));
    let mut s = ReduceScratch::<f32>::default();
    let mut whole = Array2::<f32>::from_elem((7, 5), 3.0);
    let prior = whole.clone();
    t_matmul(
        GRID,
        0.5,
        h.view(),
        g.view(),
        2.0,
        whole.view_mut(),
        Par::Rayon,
        &mut s,
        None,
    );
    for out in distributed(|rows, sum| {
        let mut out = prior.clone();
        let mut s = ReduceScratch::<f32>::default();
        let (hr, gr) = (h.slice(s![rows.clone(), ..]), g.slice(s![rows, ..]));
        t_matmul(
            GRID,
            0.5,
            hr,
            gr,
            2.0,
            out.view_mut(),
            Par::Seq,
            &mut s,
            Some(sum),
        );
        out
    }) {
        assert_eq!(out, whole);
    }
    let plain = h.t().dot(&g) * 0.5 + &prior * 2.0;
    assert!(
        (&whole - &plain).iter().all(|d| d.abs() < 1e-4),
        "{whole} vs {plain}"
    );
    // β = 0 overwrites NaN.
    let mut fresh = Array2::<f32>::from_elem((7, 5), f32::NAN);
    t_matmul(
        GRID,
        0.5,
        h.view(),
        g.view(),
        0.0,
        fresh.view_mut(),
        Par::Seq,
        &mut s,
        None,
    );
    assert_eq!(fresh + &prior * 2.0, whole);
}

/// More sums than one add task holds (64 × 40 > `ADD_TASK`): every block of sums takes
/// its own columns of the partials, under either `Par`.
#[test]
fn weight_gradients_wider_than_an_add_task_are_the_plain_product() {
    let (h, g) = (random(300, 64, 5), random(300, 40, 6));
    const _: () = assert!(64 * 40 > ADD_TASK);
    let plain = h.t().dot(&g);
    for par in [Par::Seq, Par::Rayon] {
        let mut out = Array2::<f32>::zeros((64, 40));
        let mut s = ReduceScratch::<f32>::default();
        t_matmul(
            GRID,
            1.0,
            h.view(),
            g.view(),
            0.0,
            out.view_mut(),
            par,
            &mut s,
            None,
        );
        let worst = (&out - &plain).iter().fold(0f32, |m, d| m.max(d.abs()));
        assert!(worst < 1e-4, "{par:?}: off by {worst}");
    }
}

#[test]
fn weight_gradients_from_row_blocks_in_any_order_are_the_whole_products_bits() {
    let (h, g) = (random(500, 7, 1), random(500, 5, 2));
    let prior = Array2::<f32>::from_elem((7, 5), 3.0);
    let mut s = ReduceScratch::<f32>::default();
    let mut whole = prior.clone();
    let (hv, gv) = (h.view(), g.view());
    t_matmul(
        GRID,
        0.5,
        hv,
        gv,
        2.0,
        whole.view_mut(),
        Par::Rayon,
        &mut s,
        None,
    );
    // Blocks of 64 and 192 rows on the grid, last block first, and the whole in one.
    for starts in [
        vec![448, 384, 320, 256, 192, 128, 64, 0],
        vec![384, 0, 192],
        vec![0],
    ] {
        let mut ends: Vec<usize> = starts.clone();
        ends.sort_unstable();
        let end_of = |lo: usize| ends.iter().copied().find(|&e| e > lo).unwrap_or(500);
        let mut out = prior.clone();
        t_matmul_rows(
            GRID,
            0.5,
            2.0,
            out.view_mut(),
            Par::Seq,
            &mut s,
            None,
            &mut |sink| {
                for &lo in &starts {
                    let r = lo..end_of(lo);
                    sink(lo, hv.slice(s![r.clone(), ..]), gv.slice(s![r, ..]));
                }
            },
        );
        assert_eq!(out, whole, "blocks from {starts:?}");
    }
}

#[test]
#[should_panic(expected = "off the grid")]
fn a_row_block_off_the_grid_is_refused() {
    let (h, g) = (random(100, 2, 1), random(100, 2, 2));
    let mut out = Array2::<f32>::zeros((2, 2));
    let mut s = ReduceScratch::<f32>::default();
    t_matmul_rows(
        GRID,
        1.0,
        0.0,
        out.view_mut(),
        Par::Seq,
        &mut s,
        None,
        &mut |sink| {
            sink(0, h.slice(s![..32, ..]), g.slice(s![..32, ..]));
            sink(32, h.slice(s![32.., ..]), g.slice(s![32.., ..]));
        },
    );
}

#[test]
fn sparse_weight_gradients_and_bias_gradients_do_not_depend_on_the_partition() {
    let g = random(500, 3, 3);
    // Xᵀ of a sparse 500 × 6 X, column indices sorted per row.
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let x = Array2::from_shape_fn((500, 6), |_| {
        if rng.random::<f32>() < 0.2 {
            rng.random::<f32>()
        } else {
            0.0
        }
    });
    let x_t: Csr<f32> = Csr::csr_from_dense(x.t(), 0.0);
    let mut s = ReduceScratch::<f32>::default();
    let mut whole = Array2::<f32>::zeros((6, 3));
    t_matmul_sparse(
        GRID,
        x_t.view(),
        g.view(),
        0.0,
        whole.view_mut(),
        Par::Rayon,
        &mut s,
        None,
    );
    let plain = x.t().dot(&g);
    assert!((&whole - &plain).iter().all(|d| d.abs() < 1e-4));
    let mut sums = Array1::<f32>::from_elem(3, 1.0);
    col_sum(
        GRID,
        g.view(),
        1.0,
        sums.view_mut(),
        Par::Rayon,
        &mut s,
        None,
    );
    let plain = g.sum_axis(ndarray::Axis(0)) + 1.0;
    assert!((&sums - &plain).iter().all(|d| d.abs() < 1e-4));
    for out in distributed(|rows, sum| {
        let mut s = ReduceScratch::<f32>::default();
        // This rank's rows of X: the columns of Xᵀ in its range, renumbered from 0.
        let xr = x.slice(s![rows.clone(), ..]).t().to_owned();
        let xr: Csr<f32> = Csr::csr_from_dense(xr.view(), 0.0);
        let gr = g.slice(s![rows, ..]);
        let mut out = Array2::<f32>::zeros((6, 3));
        t_matmul_sparse(
            GRID,
            xr.view(),
            gr,
            0.0,
            out.view_mut(),
            Par::Seq,
            &mut s,
            Some(sum),
        );
        out
    }) {
        assert_eq!(out, whole);
    }
    for cs in distributed(|rows, sum| {
        let mut s = ReduceScratch::<f32>::default();
        let mut cs = Array1::<f32>::from_elem(3, 1.0);
        col_sum(
            GRID,
            g.slice(s![rows, ..]),
            1.0,
            cs.view_mut(),
            Par::Seq,
            &mut s,
            Some(sum),
        );
        cs
    }) {
        assert_eq!(cs, sums);
    }
}

/// X or H (192 × 2, three chunks of a 64-row grid): feature 0 at rows 0, 64 and 128 (one per
/// chunk), feature 1 at rows 1 and 2 (one chunk); and G (192 × 3), whose column 0 makes feature
/// 0's chunk partials 1e20, 1 and −1e20 (an f64 sum rounds to 0, the exact one is 1), whose
/// column 1 sums exactly in f64, and whose column 2 brings an infinity and a NaN.
fn rounding_case() -> (Array2<f32>, Array2<f32>) {
    let mut x = Array2::<f32>::zeros((192, 2));
    for r in [0, 64, 128] {
        x[[r, 0]] = 1.0;
    }
    x[[1, 1]] = 1.0;
    x[[2, 1]] = 1.0;
    let mut g = Array2::<f32>::zeros((192, 3));
    for (r, row) in [
        (0, [1e20, 3.0, f32::INFINITY]),
        (64, [1.0, 5.0, 1.0]),
        (128, [-1e20, 7.0, 2.0]),
        (1, [0.5, 0.25, f32::NAN]),
        (2, [0.25, 0.125, 1.0]),
    ] {
        g.row_mut(r).assign(&ndarray::arr1(&row));
    }
    (x, g)
}

#[test]
fn a_sparse_weight_gradient_in_one_process_is_exact_where_f64_would_round() {
    // X (192 × 2, three chunks of the grid): feature 0 at rows 0, 64 and 128 (one per
    // chunk), feature 1 at rows 1 and 2 (one chunk). Column 0 of G makes feature 0's chunk
    // partials 1e20, 1 and −1e20: their f64 sum rounds (0), the exact one is 1, so the f64
    // pass must hand the block to the exact accumulators. Column 1 sums exactly in f64;
    // column 2 brings an infinity and a NaN.
    let (x, g) = rounding_case();
    let x_t: Csr<f32> = Csr::csr_from_dense(x.t(), 0.0);
    let run = |par: Par, beta: f32, sum: Option<SumWords<'_>>| {
        let mut out = Array2::<f32>::from_elem((2, 3), 2.0);
        let mut s = ReduceScratch::<f32>::default();
        t_matmul_sparse(
            64,
            x_t.view(),
            g.view(),
            beta,
            out.view_mut(),
            par,
            &mut s,
            sum,
        );
        out
    };
    let bits = |a: &Array2<f32>| a.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    for beta in [0.0, 0.5] {
        let local = run(Par::Seq, beta, None);
        let b = 2.0 * beta;
        assert_eq!(local[[0, 0]], 1.0 + b);
        assert_eq!(local[[0, 1]], 15.0 + b);
        assert_eq!(local[[0, 2]], f32::INFINITY);
        assert_eq!(local[[1, 0]], 0.75 + b);
        assert_eq!(local[[1, 1]], 0.375 + b);
        assert!(local[[1, 2]].is_nan());
        // The same bits under rayon and through the accumulators of a run of ranks (one
        // rank here: its words summed with no one).
        assert_eq!(bits(&run(Par::Rayon, beta, None)), bits(&local));
        let alone = |_: &mut [i64]| {};
        assert_eq!(bits(&run(Par::Seq, beta, Some(&alone))), bits(&local));
    }
}

#[test]
fn dense_weight_and_bias_gradients_are_exact_where_f64_would_round() {
    // The chunk partials of the sparse test above, from a dense H: column 0 of feature 0
    // gets 1e20, 1 and −1e20 (an f64 sum rounds to 0; the exact one is 1), so that sum
    // spills into its accumulator; column 2 meets 0·∞ and NaN.
    let (h, g) = rounding_case();
    let bits = |a: &Array2<f32>| a.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    let weights = |g: &Array2<f32>, par, beta, sum: Option<SumWords<'_>>, s: &mut _| {
        let mut out = Array2::<f32>::from_elem((2, 3), 2.0);
        t_matmul(
            64,
            1.0,
            h.view(),
            g.view(),
            beta,
            out.view_mut(),
            par,
            s,
            sum,
        );
        out
    };
    let alone = |_: &mut [i64]| {};
    let mut used = ReduceScratch::<f32>::default();
    for beta in [0.0, 0.5] {
        let b = 2.0 * beta;
        let local = weights(&g, Par::Seq, beta, None, &mut used);
        assert_eq!(local[[0, 0]], 1.0 + b);
        assert_eq!(local[[0, 1]], 15.0 + b);
        assert_eq!(local[[1, 0]], 0.75 + b);
        assert_eq!(local[[1, 1]], 0.375 + b);
        assert!(local[[0, 2]].is_nan() && local[[1, 2]].is_nan());
        for (par, sum) in [(Par::Rayon, None), (Par::Seq, Some(&alone as SumWords<'_>))] {
            let fresh = &mut ReduceScratch::<f32>::default();
            assert_eq!(bits(&weights(&g, par, beta, sum, fresh)), bits(&local));
        }
    }
    // A scratch whose accumulators hold an earlier call's spilled sums gives a fresh
    // scratch's bits when nothing spills, and when another sum spills.
    let mut calm = g.clone();
    calm.column_mut(2).fill(0.5);
    calm[[0, 0]] = 3.0;
    calm[[128, 0]] = -2.0;
    let mut other = calm.clone();
    other[[0, 1]] = 1e20;
    other[[128, 1]] = -1e20;
    for g2 in [&calm, &other] {
        let fresh = &mut ReduceScratch::<f32>::default();
        let want = weights(g2, Par::Seq, 0.0, None, fresh);
        assert_eq!(
            bits(&weights(g2, Par::Seq, 0.0, None, &mut used)),
            bits(&want)
        );
        assert_eq!(
            bits(&weights(&g, Par::Seq, 0.0, None, &mut used)),
            bits(&weights(&g, Par::Seq, 0.0, None, fresh))
        );
    }
    assert_eq!(weights(&calm, Par::Seq, 0.0, None, &mut used)[[0, 0]], 2.0);
    assert_eq!(weights(&other, Par::Seq, 0.0, None, &mut used)[[0, 1]], 5.0);
    // Column sums: chunk partials 1e20 (f32: 1e20 + 0.75 is 1e20), 1 and −1e20.
    let sums = |par, sum: Option<SumWords<'_>>, s: &mut _| {
        let mut out = ndarray::Array1::<f32>::from_elem(3, 2.0);
        col_sum(64, g.view(), 0.5, out.view_mut(), par, s, sum);
        out
    };
    let cs = sums(Par::Seq, None, &mut used);
    assert_eq!((cs[0], cs[1]), (1.0 + 1.0, 15.375 + 1.0));
    assert!(cs[2].is_nan());
    let fresh = &mut ReduceScratch::<f32>::default();
    let cb = |a: &ndarray::Array1<f32>| a.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(cb(&sums(Par::Rayon, Some(&alone), fresh)), cb(&cs));
}

#[test]
fn f64_chunk_partials_combine_exactly_across_ranks() {
    // Partials whose float sum depends on the order: 1e16, 1, -1e16, 1 per chunk group.
    let parts = [1e16, 1.0, 1.0, 2.0, -1e16, 3.0, 1.0, -4.0];
    let mut total = [0.0; 2];
    let mut s = ReduceScratch::<f32>::default();
    combine_f64(&parts, 4, &mut total, &mut s, None);
    assert_eq!(total, [2.0, 2.0]);
    // Split into two ranks' partials (chunks 0–1 and 2–3), exchanged as words.
    let words = RefCell::new(Vec::new());
    let w0 = RefCell::new(Vec::new());
    combine_f64(
        &parts[..4],
        2,
        &mut [0.0; 2],
        &mut s,
        Some(&|w: &mut [i64]| *w0.borrow_mut() = w.to_vec()),
    );
    combine_f64(
        &parts[4..],
        2,
        &mut [0.0; 2],
        &mut s,
        Some(&|w: &mut [i64]| {
            *words.borrow_mut() = w
                .iter()
                .zip(w0.borrow().iter())
                .map(|(a, b)| a + b)
                .collect()
        }),
    );
    let mut t2 = [0.0; 2];
    combine_f64(
        &parts[4..],
        2,
        &mut t2,
        &mut s,
        Some(&|w: &mut [i64]| w.copy_from_slice(&words.borrow())),
    );
    assert_eq!(t2, total);
    let mut c = [3u64, 4];
    counts(
        &mut c,
        &mut s,
        Some(&|w: &mut [i64]| w.iter_mut().for_each(|x| *x *= 2)),
    );
    assert_eq!(c, [6, 8]);
}
