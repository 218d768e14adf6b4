//! [`PairNorm`] (Zhao & Akoglu, ICLR 2020, <https://arxiv.org/abs/1909.12223>), forward and
//! backward in one file. No parameters; scale s, μ = (1/n) Σ_i x_i, c_i = x_i − μ,
//! ε = [`PAIR_NORM_EPS`]:
//!
//! - PN: y_i = s·c_i / √(ε + (1/n) Σ_j ‖c_j‖²);
//! - PN-SI: y_i = s·c_i / √(ε + ‖c_i‖²);
//! - PN-SCS: y_i = s·x_i / √(ε + ‖x_i‖²) − μ (μ is the mean of the *input*, as in the paper's
//!   reference code).
//!
//! Backward, with G = dL/dY and ḡ the column mean of G:
//! - PN: dX = (s/r)·(G − 1ḡᵀ − a·C), a = ⟨G, C⟩/(n·r²), r = √(ε + (1/n)‖C‖²_F);
//! - PN-SI: h_i = (s/r_i)·(g_i − (g_i·c_i / r_i²)·c_i), dX = H − 1·h̄ᵀ (h̄ the column mean of H);
//! - PN-SCS: dx_i = (s/r_i)·(g_i − (g_i·x_i / r_i²)·x_i) − ḡ.
//!
//! Train and eval are the same (statistics of the current input). Statistics are accumulated in
//! f64 through [`Sums::sum_rows`](crate::graph::Sums::sum_rows); every element is
//! computed in f64 and rounded once. The derivations are in `docs/MATH.md`.
//!
//! # Shapes
//! X, Y, G, dX: n × d.

use ndarray::{ArrayView1, ArrayViewMut1};

use super::attrs::{Attrs, FromAttrs};
use super::layer::{view, view_mut, Bwd, Cx, Fwd, InputDesc, Layer, Req, Spec};
use crate::kernels::rows::{for_each_row, map_rows_into, parts_len};
use crate::ConfigError;
use crate::{Result, Scalar};

/// ε of [`PairNorm`], inside the square roots (PyG's default value; the paper's reference code
/// uses 1e-6).
pub const PAIR_NORM_EPS: f64 = 1e-5;

/// The PairNorm variant (names from the paper's reference code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PairNormMode {
    /// PN: centre, then divide by the root mean squared row norm.
    #[default]
    Pn,
    /// PN-SI (scale individually): centre, then divide each row by its norm.
    PnSi,
    /// PN-SCS (scale and centre simultaneously): divide each row by its norm, subtract the
    /// column mean of the input.
    PnScs,
}

crate::error::names!(PairNormMode, "PairNorm mode", [
    PairNormMode::Pn => "pn",
    PairNormMode::PnSi => "pn-si",
    PairNormMode::PnScs => "pn-scs",
]);

/// PairNorm: keeps the total pairwise squared distance of the node representations constant,
/// against over-smoothing. No learnable parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairNorm {
    /// The scale s (default 1).
    pub scale: f64,
    /// The variant (default [`PairNormMode::Pn`]).
    pub mode: PairNormMode,
    /// Width d.
    pub dim: usize,
}

impl PairNorm {
    /// PN with scale 1 on `dim` columns.
    pub fn new(dim: usize) -> Self {
        PairNorm {
            scale: 1.0,
            mode: PairNormMode::Pn,
            dim,
        }
    }
}

/// 1/√(ε + ‖row‖²), in f64.
fn inv_row_norm(sq: f64) -> f64 {
    1.0 / (PAIR_NORM_EPS + sq).sqrt()
}

/// ‖v‖² in f64.
fn sq_norm<'a, F: Scalar>(v: impl Iterator<Item = &'a F>) -> f64 {
    v.map(|x| x.to_f64_lossless().powi(2)).sum()
}

/// out ← (s/r)·(g − (g·z / r²)·z) − shift: the Jacobianᵀ of z ↦ s·z/√(ε + ‖z‖²) applied to g
/// (1/r given as `inv_r`), minus an optional shift.
fn row_backward<F: Scalar>(
    mut out: ArrayViewMut1<'_, F>,
    g: ArrayView1<'_, F>,
    z: ArrayView1<'_, F>,
    s: f64,
    inv_r: f64,
    shift: Option<&[f64]>,
) {
    let dot: f64 = g
        .iter()
        .zip(z.iter())
        .map(|(a, b)| a.to_f64_lossless() * b.to_f64_lossless())
        .sum();
    let a = dot * inv_r * inv_r;
    let f = s * inv_r;
    for k in 0..out.len() {
        let t = f * (g[k].to_f64_lossless() - a * z[k].to_f64_lossless());
        let sh = shift.map_or(0.0, |v| v[k]);
        out[k] = F::from_f64_lossy(t - sh);
    }
}

impl<F: Scalar> FromAttrs<F> for PairNorm {
    /// `dim`, `scale` (> 0), `mode` (`pn`, `pn-si`, `pn-scs`).
    fn from_attrs(a: &Attrs) -> Result<Self, ConfigError> {
        let scale = a.finite("scale")?;
        if scale <= 0.0 {
            return Err(a.invalid("scale", "must be > 0"));
        }
        Ok(PairNorm {
            dim: a.count("dim", 1, usize::MAX)?,
            scale,
            mode: a.get("mode")?,
        })
    }
}

impl<F: Scalar> Layer<F> for PairNorm {
    fn name(&self) -> &'static str {
        "pair_norm"
    }

    fn hops(&self) -> Option<usize> {
        // (Row-wise: on its level's rows over a stack of blocks.)
        Some(0)
    }

    fn spec(&self, _inputs: &[InputDesc], n: usize) -> Spec {
        Spec {
            saved: {
                // Z = C (PN, PN-SI) or X (PN-SCS), and 1/r (one per row; PN uses the first).
                Req {
                    f: n * self.dim,
                    u8: 0,
                    f64: n.max(1),
                }
            },
            scratch: {
                let d = self.dim;
                Req {
                    f64: parts_len(n, d + 1) + 2 * (d + 1),
                    ..Req::default()
                }
            },
            ..Spec::new(self.dim).reading(self.dim)
        }
    }

    fn forward(&mut self, cx: &mut Cx<'_, F>, io: Fwd<'_, F>) -> Result<()> {
        let (ins, y, mut saved, mut scratch) = (io.ins, io.out, io.saved, io.scratch);
        let x = ins.get(0).dense();
        let (n, d) = x.dim();
        assert!(
            d == self.dim && y.dim() == (n, d),
            "PairNorm::forward: input {n}×{d}, output {:?}, width {}",
            y.dim(),
            self.dim
        );
        let (s, par) = (self.scale, cx.par);
        let mut z = view_mut(saved.take_f(n * d), (n, d));
        let inv_r = saved.take_f64(n.max(1));
        let parts = scratch.take_f64(parts_len(n, d + 1));
        let mu = scratch.take_f64(d);
        let tot = scratch.take_f64(1);
        cx.sums.col_means(x, parts, mu, par);
        let mu: &[f64] = mu;
        match self.mode {
            PairNormMode::Pn | PairNormMode::PnSi => {
                for_each_row(z.view_mut(), par, |i, mut row| {
                    for (k, (o, &v)) in row.iter_mut().zip(x.row(i)).enumerate() {
                        *o = F::from_f64_lossy(v.to_f64_lossless() - mu[k]);
                    }
                });
                let c = z.view();
                let sq = |i: usize| {
                    c.row(i)
                        .iter()
                        .map(|v| v.to_f64_lossless().powi(2))
                        .sum::<f64>()
                };
                if self.mode == PairNormMode::Pn {
                    cx.sums.sum_rows(parts, tot, &|i, acc| acc[0] += sq(i), par);
                    inv_r[0] = inv_row_norm(tot[0] / cx.sums.n_nodes().max(1) as f64);
                } else {
                    map_rows_into(d, &mut inv_r[..n], par, |i| inv_row_norm(sq(i)));
                }
                let inv_r: &[f64] = inv_r;
                let per_row = self.mode == PairNormMode::PnSi;
                for_each_row(y, par, |i, mut row| {
                    let f = s * if per_row { inv_r[i] } else { inv_r[0] };
                    for (o, &v) in row.iter_mut().zip(c.row(i)) {
                        *o = F::from_f64_lossy(f * v.to_f64_lossless());
                    }
                });
            }
            PairNormMode::PnScs => {
                map_rows_into(d, &mut inv_r[..n], par, |i| {
                    inv_row_norm(sq_norm(x.row(i).iter()))
                });
                let inv_r: &[f64] = inv_r;
                for_each_row(y, par, |i, mut row| {
                    let f = s * inv_r[i];
                    for (k, (o, &v)) in row.iter_mut().zip(x.row(i)).enumerate() {
                        *o = F::from_f64_lossy(f * v.to_f64_lossless() - mu[k]);
                    }
                });
                z.assign(&x);
            }
        }
        Ok(())
    }

    fn backward(&mut self, cx: &mut Cx<'_, F>, io: Bwd<'_, F>) -> Result<()> {
        let (mut saved, mut scratch, grad) = (io.saved, io.scratch, io.grad);
        let (g, mut din) = grad.separate();
        let (n, d) = g.dim();
        let (s, par) = (self.scale, cx.par);
        let z = view(saved.take_f(n * d), (n, d));
        let inv_r = saved.take_f64(n.max(1));
        let parts = scratch.take_f64(parts_len(n, d + 1));
        let sums = scratch.take_f64(d + 1);
        let bar = scratch.take_f64(d + 1);
        let Some(mut dx) = din.get(0) else {
            return Ok(());
        };
        let nf = cx.sums.n_nodes().max(1) as f64;
        match self.mode {
            PairNormMode::Pn => {
                // Column sums of G and ⟨G, C⟩ in one pass.
                cx.sums.sum_rows(
                    parts,
                    sums,
                    &|i, acc| {
                        let (sg, gc) = acc.split_at_mut(d);
                        for ((a, &gv), &cv) in sg.iter_mut().zip(g.row(i)).zip(z.row(i)) {
                            let gv = gv.to_f64_lossless();
                            *a += gv;
                            gc[0] += gv * cv.to_f64_lossless();
                        }
                    },
                    par,
                );
                for (b, v) in bar.iter_mut().zip(&sums[..d]) {
                    *b = v / nf;
                }
                let gbar: &[f64] = &bar[..d];
                let ir = inv_r[0];
                let a = sums[d] * ir * ir / nf;
                let f = s * ir;
                for_each_row(dx, par, |i, mut row| {
                    let (gr, cr) = (g.row(i), z.row(i));
                    for k in 0..d {
                        let t = gr[k].to_f64_lossless() - gbar[k] - a * cr[k].to_f64_lossless();
                        row[k] = F::from_f64_lossy(f * t);
                    }
                });
            }
            PairNormMode::PnSi => {
                for_each_row(dx.view_mut(), par, |i, mut row| {
                    row_backward(row.view_mut(), g.row(i), z.row(i), s, inv_r[i], None);
                });
                let hbar = &mut bar[..d];
                cx.sums.col_means(dx.view(), parts, hbar, par);
                let hbar: &[f64] = hbar;
                for_each_row(dx, par, |_, mut row| {
                    for (v, m) in row.iter_mut().zip(hbar) {
                        *v = F::from_f64_lossy(v.to_f64_lossless() - m);
                    }
                });
            }
            PairNormMode::PnScs => {
                let gbar = &mut bar[..d];
                cx.sums.col_means(g, parts, gbar, par);
                let gbar: &[f64] = gbar;
                for_each_row(dx, par, |i, row| {
                    row_backward(row, g.row(i), z.row(i), s, inv_r[i], Some(gbar));
                });
            }
        }
        Ok(())
    }

    fn attrs(&self) -> Option<Attrs> {
        Some(
            Attrs::new()
                .with("dim", self.dim)
                .with("scale", self.scale)
                .with("mode", self.mode),
        )
    }

    fn clone_box(&self) -> Box<dyn Layer<F>> {
        Box::new(*self)
    }
}

#[cfg(test)]
mod tests {
    use ndarray::{array, Array2, Axis};

    use super::*;
    use crate::nn::Mode;
    use crate::testing::harness::{bits, citation, isolated, random, rng};
    use crate::testing::harness::{same_for_any_thread_count, small_adjs, Harness, In};

    const MODES: [PairNormMode; 3] = [PairNormMode::Pn, PairNormMode::PnSi, PairNormMode::PnScs];

    fn pn(mode: PairNormMode, scale: f64, dim: usize) -> PairNorm {
        PairNorm { scale, mode, dim }
    }

    #[test]
    fn gradients_match_finite_differences() {
        let [(_, adj), _] = &small_adjs();
        let n = adj.n_nodes();
        for mode in MODES {
            let mut r = rng(21);
            let x = random(n, 4, &mut r) + 0.3;
            let g = random(n, 4, &mut r);
            let h = Harness::new(adj);
            let what = format!("PairNorm {mode:?}");
            let (y, _) = h.grad_check(
                &mut pn(mode, 1.7, 4),
                &[In::Dense(x.clone())],
                &[true],
                &g,
                &what,
            );
            // Train and eval are the same.
            let (ye, _) = h
                .mode(Mode::Eval)
                .forward(&mut pn(mode, 1.7, 4), &[In::Dense(x)]);
            assert_eq!(y, ye, "{what}");
        }
    }

    #[test]
    fn pn_centres_and_fixes_the_mean_row_norm_pn_si_the_row_norms() {
        let adj = isolated::<f64>(40);
        let mut r = rng(4);
        let x = random(40, 6, &mut r) * 5.0 + 2.0;
        for s in [1.0, 2.5] {
            let (y, _) = Harness::new(&adj)
                .forward(&mut pn(PairNormMode::Pn, s, 6), &[In::Dense(x.clone())]);
            let mean = y.mean_axis(Axis(0)).unwrap();
            assert!(mean.iter().all(|m| m.abs() < 1e-12), "column means {mean}");
            let msq = y.rows().into_iter().map(|r| r.dot(&r)).sum::<f64>() / 40.0;
            assert!(
                (msq - s * s).abs() < 1e-6 * s * s,
                "mean squared row norm {msq}"
            );
        }
        let (y, _) =
            Harness::new(&adj).forward(&mut pn(PairNormMode::PnSi, 2.0, 6), &[In::Dense(x)]);
        for r in y.rows() {
            assert!((r.dot(&r).sqrt() - 2.0).abs() < 1e-5);
        }
    }

    #[test]
    fn golden() {
        // Rows (3, 0), (−1, 0), (0, 4), ε = 1e-5 inside the roots:
        // μ = (2/3, 4/3); PN-SCS: y_i = x_i/√(ε + ‖x_i‖²) − μ.
        let adj = isolated::<f64>(3);
        let x = array![[3.0, 0.0], [-1.0, 0.0], [0.0, 4.0]];
        let (y, _) =
            Harness::new(&adj).forward(&mut pn(PairNormMode::PnScs, 1.0, 2), &[In::Dense(x)]);
        let f = |sq: f64| 1.0 / (1e-5 + sq).sqrt();
        let want = array![
            [3.0 * f(9.0) - 2.0 / 3.0, -4.0 / 3.0],
            [-f(1.0) - 2.0 / 3.0, -4.0 / 3.0],
            [-2.0 / 3.0, 4.0 * f(16.0) - 4.0 / 3.0]
        ];
        assert!((&y - &want).iter().all(|v| v.abs() < 1e-15), "{y}");
        // PN on two rows ±(1, 0): centred already, mean squared norm 1: y = x/√(1 + ε).
        let adj = isolated::<f64>(2);
        let x = array![[1.0, 0.0], [-1.0, 0.0]];
        let (y, _) =
            Harness::new(&adj).forward(&mut pn(PairNormMode::Pn, 1.0, 2), &[In::Dense(x.clone())]);
        assert!((&y - &(x * f(1.0))).iter().all(|v| v.abs() < 1e-15), "{y}");
    }

    #[test]
    fn degenerate_inputs_are_finite() {
        let [(_, adj), _] = &small_adjs();
        let n = adj.n_nodes();
        let mut r = rng(6);
        let g = random(n, 4, &mut r);
        // Identical rows: C = 0, so PN and PN-SI give 0 (ε keeps r > 0); a zero row for PN-SCS.
        let same = Array2::from_shape_fn((n, 4), |(_, k)| k as f64 - 1.0);
        let mut zero_row = random(n, 4, &mut r);
        zero_row.row_mut(2).fill(0.0);
        for mode in MODES {
            for x in [&same, &zero_row] {
                let (y, din) = Harness::new(adj).run(
                    &mut pn(mode, 1.0, 4),
                    &[In::Dense(x.clone())],
                    &g,
                    &[true],
                );
                assert!(y.iter().all(|v| v.is_finite()), "{mode:?}");
                assert!(
                    din[0].as_ref().unwrap().iter().all(|v| v.is_finite()),
                    "{mode:?}"
                );
                if mode != PairNormMode::PnScs && *x == same {
                    assert!(y.iter().all(|&v| v == 0.0), "{mode:?}");
                }
            }
        }
    }

    #[test]
    fn f32_agrees_with_f64() {
        let (adj64, adj32) = (isolated::<f64>(30), isolated::<f32>(30));
        let mut r = rng(13);
        let x = random(30, 5, &mut r) * 2.0 + 1.0;
        let g = random(30, 5, &mut r);
        let close = |a: &Array2<f32>, b: &Array2<f64>| {
            a.iter()
                .zip(b)
                .all(|(&p, &q)| (p as f64 - q).abs() <= 1e-5 * q.abs().max(1.0))
        };
        for mode in MODES {
            let x32 = [In::Dense(x.mapv(|v| v as f32))];
            let g32 = g.mapv(|v| v as f32);
            let (y32, d32) = Harness::new(&adj32).run(&mut pn(mode, 1.3, 5), &x32, &g32, &[true]);
            let (y64, d64) = Harness::new(&adj64).run(
                &mut pn(mode, 1.3, 5),
                &[In::Dense(x.clone())],
                &g,
                &[true],
            );
            assert!(close(&y32, &y64), "{mode:?}: output");
            assert!(
                close(d32[0].as_ref().unwrap(), d64[0].as_ref().unwrap()),
                "{mode:?}: dX"
            );
        }
    }

    #[test]
    fn bitwise_identical_for_any_thread_count() {
        // d = 64: 256-row chunks, so the sums over the 300 nodes have two partial sums.
        let (adj, _) = citation();
        let n = adj.n_nodes();
        let mut r = rng(19);
        let x = random(n, 64, &mut r).mapv(|v| v as f32);
        let g = random(n, 64, &mut r).mapv(|v| v as f32);
        for mode in MODES {
            same_for_any_thread_count(
                |par| {
                    let h = Harness {
                        par,
                        ..Harness::new(&adj)
                    };
                    let (y, din) =
                        h.run(&mut pn(mode, 1.0, 64), &[In::Dense(x.clone())], &g, &[true]);
                    (bits(&y), bits(din[0].as_ref().unwrap()))
                },
                &format!("PairNorm {mode:?}"),
            );
        }
    }
}
