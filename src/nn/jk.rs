//! Jumping knowledge (Xu et al., ICML 2018, <https://arxiv.org/abs/1806.03536>) over a model's
//! layer outputs H_1 … H_L (each n × d), forward and backward in one file.
//!
//! Three aggregations ([`JkMode`]):
//! - **Concat** (`cat`): out = [H_1 | … | H_L], n × L·d. Backward: dH_l is the l-th column block
//!   of G.
//! - **Max** (`max`): out_ik = max_l H_l,ik, n × d. Backward: each G_ik goes to the arg-max
//!   layer (the first one on ties, so the result is deterministic); the others get 0.
//! - **Attention** (`att`): a per-node softmax over layers, n × d. This is the simpler
//!   alternative to Xu et al.'s LSTM-attention; it is close to DAGNN's adaptive adjustment
//!   (Liu et al., KDD 2020, <https://arxiv.org/abs/2007.09296>), with a softmax over layers in
//!   place of DAGNN's independent sigmoid gates. With a learned a ∈ Rᵈ:
//!
//!   s_il = ⟨h_il, a⟩,  α_i· = softmax_l(s_i·),  out_i = Σ_l α_il h_il.
//!
//!   Backward, with g_i = row i of G: c_il = ⟨g_i, h_il⟩, δ_il = α_il (c_il − Σ_m α_im c_im);
//!   dh_il = α_il g_i + δ_il a, and da = Σ_i Σ_l δ_il h_il.
//!
//! The derivations are in `docs/MATH.md`. Every loop runs on the calling thread in row order,
//! so results do not depend on the thread count.
//!
//! # Shapes
//! | | shape |
//! |---|---|
//! | H_l (l = 1 … L) | n × d |
//! | a (Attention) | d × 1 |
//! | out, G | n × L·d (Concat), n × d (Max, Attention) |
//! | cache | nothing (Concat), n × d `u16` (Max), α: n × L (Attention) |

use std::fmt;
use std::str::FromStr;

use ndarray::{s, Array1, Array2, ArrayView1, ArrayView2, ArrayViewMut2, Zip};
use rand::Rng;

use super::param::Param;
use super::workspace::ensure;
use crate::Scalar;

/// How [`JumpingKnowledge`] combines the layer outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JkMode {
    /// Concatenation along the feature axis, n × L·d (`"cat"`).
    Concat,
    /// Element-wise maximum over layers, n × d (`"max"`).
    Max,
    /// Per-node softmax attention over layers, n × d (`"att"`).
    Attention,
}

impl JkMode {
    /// Every mode, in declaration order.
    pub const ALL: [JkMode; 3] = [JkMode::Concat, JkMode::Max, JkMode::Attention];

    /// The short name used on the command line: `"cat"`, `"max"` or `"att"`.
    pub fn name(self) -> &'static str {
        match self {
            JkMode::Concat => "cat",
            JkMode::Max => "max",
            JkMode::Attention => "att",
        }
    }
}

impl fmt::Display for JkMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown [`JkMode`] name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown jumping-knowledge mode {0:?} (expected cat, max or att)")]
pub struct ParseJkModeError(pub String);

impl FromStr for JkMode {
    type Err = ParseJkModeError;

    /// Parses `"cat"` (or `"concat"`), `"max"`, `"att"` (or `"attention"`), ignoring case.
    ///
    /// # Errors
    /// [`ParseJkModeError`] naming the unknown mode.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "cat" | "concat" => Ok(JkMode::Concat),
            "max" => Ok(JkMode::Max),
            "att" | "attention" => Ok(JkMode::Attention),
            _ => Err(ParseJkModeError(s.to_owned())),
        }
    }
}

/// Jumping-knowledge aggregation of L layer outputs.
#[derive(Debug, Clone, PartialEq)]
pub struct JumpingKnowledge<F> {
    /// The aggregation.
    pub mode: JkMode,
    /// The attention vector a (d × 1); `Some` exactly when `mode` is [`JkMode::Attention`].
    pub att: Option<Param<F>>,
}

/// What [`JumpingKnowledge::backward`] needs besides the layer outputs.
#[derive(Debug, Clone)]
pub struct JkCache<F> {
    kind: CacheKind<F>,
}

#[derive(Debug, Clone)]
enum CacheKind<F> {
    Concat,
    /// Arg-max layer of each output entry, n × d.
    Max(Array2<u16>),
    /// Attention weights α, n × L.
    Attention(Array2<F>),
}

impl<F: Scalar> JumpingKnowledge<F> {
    /// A JK aggregation of layer outputs of width `dim`. Attention draws a (`dim` × 1) from
    /// `rng` with [`Param::glorot`] (U(−r, r), r = √(6 / (dim + 1))), so the initial weights
    /// are not uniform over layers; Concat and Max draw nothing and ignore `dim`.
    pub fn new<R: Rng + ?Sized>(mode: JkMode, dim: usize, rng: &mut R) -> Self {
        let att = (mode == JkMode::Attention).then(|| Param::glorot(dim, 1, rng));
        JumpingKnowledge { mode, att }
    }

    /// Output width for `n_layers` inputs of width `dim`: `n_layers · dim` for Concat, `dim`
    /// otherwise.
    pub fn out_dim(&self, dim: usize, n_layers: usize) -> usize {
        match self.mode {
            JkMode::Concat => dim * n_layers,
            JkMode::Max | JkMode::Attention => dim,
        }
    }

    /// Combines the layer outputs and returns what backward needs.
    ///
    /// # Shapes
    /// `hs: L × (n × d)` → `n × out_dim(d, L)`.
    ///
    /// # Panics
    /// If `hs` is empty, the H_l differ in shape, L > 65 535 with Max, or (Attention) a is
    /// missing or not d × 1.
    #[track_caller]
    pub fn forward(&self, hs: &[ArrayView2<'_, F>]) -> (Array2<F>, JkCache<F>) {
        let (out, kind) = self.run(hs, true);
        (out, JkCache { kind })
    }

    /// Combines the layer outputs without keeping anything for backward (evaluation).
    ///
    /// # Shapes
    /// `hs: L × (n × d)` → `n × out_dim(d, L)`.
    ///
    /// # Panics
    /// As [`JumpingKnowledge::forward`].
    #[track_caller]
    pub fn predict(&self, hs: &[ArrayView2<'_, F>]) -> Array2<F> {
        self.run(hs, false).0
    }

    /// Returns dL/dH_l for each layer l, given G = dL/d(out), and adds dL/da into the
    /// attention gradient (Attention). `hs` must be the layer outputs given to `forward`.
    ///
    /// # Shapes
    /// `hs: L × (n × d)`, `g: n × out_dim(d, L)` → `L × (n × d)`.
    ///
    /// # Panics
    /// If the shapes disagree with each other or with `cache`, or if `cache` comes from another
    /// mode.
    #[track_caller]
    pub fn backward(
        &mut self,
        hs: &[ArrayView2<'_, F>],
        cache: JkCache<F>,
        g: ArrayView2<'_, F>,
    ) -> Vec<Array2<F>> {
        let l_count = hs.len();
        let mut ws = JkWs::default();
        match (self.mode, cache.kind) {
            (JkMode::Concat, CacheKind::Concat) => {}
            (JkMode::Max, CacheKind::Max(idx)) => ws.idx = idx,
            (JkMode::Attention, CacheKind::Attention(alpha)) => ws.alpha = alpha,
            (mode, _) => panic!("JumpingKnowledge::backward: the cache is not from mode {mode}"),
        }
        let mut dhs: Vec<Array2<F>> = (0..l_count).map(|_| Array2::zeros((0, 0))).collect();
        self.backward_into(l_count, |l| hs[l], &mut ws, g, &mut dhs);
        dhs
    }

    /// [`JumpingKnowledge::backward`] from the pass held in `ws` (by
    /// `JumpingKnowledge::forward_into` with `keep`) on the outputs `hs(0) … hs(L−1)`,
    /// writing dL/dH_l into `dhs[l]` (reshaped to n × d when needed). Allocates nothing once
    /// `ws` and `dhs` have held a pass of these shapes. Bit for bit
    /// [`JumpingKnowledge::backward`].
    ///
    /// # Panics
    /// As [`JumpingKnowledge::backward`], and if `dhs` has not L entries.
    #[track_caller]
    pub(crate) fn backward_into<'h>(
        &mut self,
        l_count: usize,
        hs: impl Fn(usize) -> ArrayView2<'h, F>,
        ws: &mut JkWs<F>,
        g: ArrayView2<'_, F>,
        dhs: &mut [Array2<F>],
    ) where
        F: 'h,
    {
        let (n, d) = check_layers(l_count, &hs);
        let want = (n, self.out_dim(d, l_count));
        assert!(
            g.dim() == want,
            "JumpingKnowledge::backward ({}): G {}×{}, expected {}×{} ({l_count} layers of {n}×{d})",
            self.mode,
            g.nrows(),
            g.ncols(),
            want.0,
            want.1
        );
        assert_eq!(dhs.len(), l_count, "JumpingKnowledge::backward: dH count");
        for dh in dhs.iter_mut() {
            ensure(dh, (n, d));
        }
        match self.mode {
            JkMode::Concat => {
                for (l, dh) in dhs.iter_mut().enumerate() {
                    dh.assign(&g.slice(s![.., l * d..(l + 1) * d]));
                }
            }
            JkMode::Max => {
                let idx = &ws.idx;
                assert!(
                    idx.dim() == (n, d),
                    "JumpingKnowledge::backward (max): cache {}×{}, expected {n}×{d}",
                    idx.nrows(),
                    idx.ncols()
                );
                for (l, dh) in dhs.iter_mut().enumerate() {
                    let l = l as u16;
                    dh.fill(F::zero());
                    Zip::from(dh).and(idx).and(&g).for_each(|o, &k, &gv| {
                        if k == l {
                            *o = gv;
                        }
                    });
                }
            }
            JkMode::Attention => {
                let alpha = &ws.alpha;
                assert!(
                    alpha.dim() == (n, l_count),
                    "JumpingKnowledge::backward (att): cache α {}×{}, expected {n}×{l_count}",
                    alpha.nrows(),
                    alpha.ncols()
                );
                let att = attention_param(&mut self.att, d);
                attention_backward(
                    l_count,
                    &hs,
                    alpha.view(),
                    g,
                    att,
                    &mut ws.delta,
                    &mut ws.da,
                    dhs,
                );
            }
        }
    }

    /// Calls `f` on each parameter (the attention vector, if any).
    pub fn visit_params(&mut self, f: &mut dyn FnMut(&mut Param<F>)) {
        if let Some(a) = &mut self.att {
            f(a);
        }
    }

    #[track_caller]
    fn run(&self, hs: &[ArrayView2<'_, F>], keep: bool) -> (Array2<F>, CacheKind<F>) {
        let (n, d) = check_layers(hs.len(), &|l| hs[l]);
        let mut out = Array2::zeros((n, self.out_dim(d, hs.len())));
        let mut ws = JkWs::default();
        self.forward_into(hs.len(), |l| hs[l], out.view_mut(), &mut ws, keep);
        let kind = match self.mode {
            JkMode::Concat => CacheKind::Concat,
            JkMode::Max => CacheKind::Max(ws.idx),
            JkMode::Attention => CacheKind::Attention(if keep {
                ws.alpha
            } else {
                Array2::zeros((0, 0))
            }),
        };
        (out, kind)
    }

    /// Combines `hs(0) … hs(L−1)` into `out` (n × out_dim(d, L)), keeping what backward needs
    /// in `ws` when `keep`. Allocates nothing once `ws` has held a pass of these shapes. Bit
    /// for bit [`JumpingKnowledge::forward`] (`keep`) and [`JumpingKnowledge::predict`].
    ///
    /// # Panics
    /// As [`JumpingKnowledge::forward`], and if `out` has not the output's shape.
    #[track_caller]
    pub(crate) fn forward_into<'h>(
        &self,
        l_count: usize,
        hs: impl Fn(usize) -> ArrayView2<'h, F>,
        mut out: ArrayViewMut2<'_, F>,
        ws: &mut JkWs<F>,
        keep: bool,
    ) where
        F: 'h,
    {
        let (n, d) = check_layers(l_count, &hs);
        assert_eq!(
            out.dim(),
            (n, self.out_dim(d, l_count)),
            "JumpingKnowledge::forward: output shape"
        );
        match self.mode {
            JkMode::Concat => {
                for l in 0..l_count {
                    out.slice_mut(s![.., l * d..(l + 1) * d]).assign(&hs(l));
                }
            }
            JkMode::Max => {
                assert!(
                    l_count <= usize::from(u16::MAX),
                    "JumpingKnowledge (max): {l_count} layers, at most {} supported",
                    u16::MAX
                );
                out.assign(&hs(0));
                // Evaluation leaves the training pass's arg-max buffer as it is.
                let idx = &mut ws.idx;
                if keep {
                    ensure(idx, (n, d));
                    idx.fill(0);
                }
                for l in 1..l_count {
                    let h = hs(l);
                    // Strictly greater: ties stay with the earlier layer. A NaN wins once and
                    // then stays, so divergence shows in the output.
                    let wins = |o: &F, v: F| v > *o || (v.is_nan() && !o.is_nan());
                    if keep {
                        let l = l as u16;
                        Zip::from(&mut out)
                            .and(&mut *idx)
                            .and(&h)
                            .for_each(|o, k, &v| {
                                if wins(o, v) {
                                    *o = v;
                                    *k = l;
                                }
                            });
                    } else {
                        Zip::from(&mut out).and(&h).for_each(|o, &v| {
                            if wins(o, v) {
                                *o = v;
                            }
                        });
                    }
                }
            }
            JkMode::Attention => {
                let a = attention_vector(self.att.as_ref(), d);
                let alpha = &mut ws.alpha;
                ensure(alpha, (n, l_count));
                attention_weights(l_count, &hs, a, alpha);
                out.fill(F::zero());
                for l in 0..l_count {
                    Zip::from(out.rows_mut())
                        .and(alpha.column(l))
                        .and(hs(l).rows())
                        .for_each(|mut o, &w, hr| o.scaled_add(w, &hr));
                }
            }
        }
    }
}

/// What a pass of [`JumpingKnowledge`] keeps for backward, and backward's scratch, reused
/// from pass to pass.
#[derive(Debug, Clone)]
pub(crate) struct JkWs<F> {
    /// Max: the arg-max layer of each output entry, n × d.
    idx: Array2<u16>,
    /// Attention: α, n × L.
    alpha: Array2<F>,
    /// Attention backward: δ, n × L.
    delta: Array2<F>,
    /// Attention backward: da, d.
    da: Array1<F>,
}

impl<F: Scalar> Default for JkWs<F> {
    fn default() -> Self {
        JkWs {
            idx: Array2::zeros((0, 0)),
            alpha: Array2::zeros((0, 0)),
            delta: Array2::zeros((0, 0)),
            da: Array1::zeros(0),
        }
    }
}

/// Checks that there is at least one layer output and that every H_l has the shape of H_1;
/// returns it.
#[track_caller]
fn check_layers<'h, F: Scalar + 'h>(
    l_count: usize,
    hs: &impl Fn(usize) -> ArrayView2<'h, F>,
) -> (usize, usize) {
    if l_count == 0 {
        panic!("JumpingKnowledge: no layer outputs given");
    }
    let dim = hs(0).dim();
    for l in 0..l_count {
        let h = hs(l);
        assert!(
            h.dim() == dim,
            "JumpingKnowledge: layer output {l} is {}×{}, layer 0 is {}×{}",
            h.nrows(),
            h.ncols(),
            dim.0,
            dim.1
        );
    }
    dim
}

#[cold]
#[inline(never)]
#[track_caller]
fn attention_panic(got: Option<(usize, usize)>, d: usize) -> ! {
    match got {
        None => panic!("JumpingKnowledge (att): the attention vector is missing"),
        Some((r, c)) => panic!("JumpingKnowledge (att): attention vector {r}×{c}, expected {d}×1"),
    }
}

/// a as a vector, checked to be d × 1.
#[track_caller]
fn attention_vector<F: Scalar>(att: Option<&Param<F>>, d: usize) -> ArrayView1<'_, F> {
    match att {
        Some(p) if p.value.dim() == (d, 1) => p.value.column(0),
        Some(p) => attention_panic(Some(p.value.dim()), d),
        None => attention_panic(None, d),
    }
}

/// The attention parameter, checked to be d × 1.
#[track_caller]
fn attention_param<F: Scalar>(att: &mut Option<Param<F>>, d: usize) -> &mut Param<F> {
    match att {
        Some(p) => {
            if p.value.dim() != (d, 1) || p.grad.dim() != (d, 1) {
                attention_panic(Some(p.value.dim()), d);
            }
            p
        }
        None => attention_panic(None, d),
    }
}

/// α (n × L, written into `alpha`): α_i· = softmax_l(⟨h_il, a⟩), max-subtracted.
fn attention_weights<'h, F: Scalar + 'h>(
    l_count: usize,
    hs: &impl Fn(usize) -> ArrayView2<'h, F>,
    a: ArrayView1<'_, F>,
    alpha: &mut Array2<F>,
) {
    for l in 0..l_count {
        Zip::from(alpha.column_mut(l))
            .and(hs(l).rows())
            .for_each(|s, hr| *s = hr.dot(&a));
    }
    for mut row in alpha.rows_mut() {
        let m = row.iter().fold(F::neg_infinity(), |m, &v| m.max(v));
        // m is infinite only for infinite scores; shifting by 0 then lets the row turn NaN,
        // so divergence stays visible (a NaN score makes its whole row NaN as well).
        let m = if m.is_finite() { m } else { F::zero() };
        row.map_inplace(|v| *v = (*v - m).exp());
        let z: F = row.sum();
        row.map_inplace(|v| *v /= z);
    }
}

/// dH_l = α_·l ⊙ G + δ_·l aᵀ (into `dhs[l]`, n × d), da += Σ_l H_lᵀ δ_·l, with
/// δ_il = α_il (c_il − Σ_m α_im c_im) and c_il = ⟨g_i, h_il⟩ (δ and da in the scratch).
#[allow(clippy::too_many_arguments)]
fn attention_backward<'h, F: Scalar + 'h>(
    l_count: usize,
    hs: &impl Fn(usize) -> ArrayView2<'h, F>,
    alpha: ArrayView2<'_, F>,
    g: ArrayView2<'_, F>,
    att: &mut Param<F>,
    delta: &mut Array2<F>,
    da: &mut Array1<F>,
    dhs: &mut [Array2<F>],
) {
    let (n, d) = g.dim();
    // δ starts as c, then becomes α ⊙ (c − Σ_m α_·m c_·m) row by row.
    ensure(delta, (n, l_count));
    for l in 0..l_count {
        Zip::from(delta.column_mut(l))
            .and(hs(l).rows())
            .and(g.rows())
            .for_each(|c, hr, gr| *c = hr.dot(&gr));
    }
    Zip::from(delta.rows_mut())
        .and(alpha.rows())
        .for_each(|mut c, al| {
            let cbar = c.dot(&al);
            Zip::from(&mut c)
                .and(&al)
                .for_each(|c, &a| *c = a * (*c - cbar));
        });
    let Param { value, grad } = att;
    let a = value.column(0);
    if da.len() != d {
        *da = Array1::zeros(d);
    }
    da.fill(F::zero());
    for (l, dh) in dhs.iter_mut().enumerate() {
        dh.fill(F::zero());
        Zip::from(dh.rows_mut())
            .and(g.rows())
            .and(hs(l).rows())
            .and(alpha.column(l))
            .and(delta.column(l))
            .for_each(|mut o, gr, hr, &w, &dl| {
                o.scaled_add(w, &gr);
                o.scaled_add(dl, &a);
                da.scaled_add(dl, &hr);
            });
    }
    grad.column_mut(0).zip_mut_with(&*da, |gr, &v| *gr += v);
}

#[cfg(test)]
mod tests {
    use ndarray::Array2;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::testing::{max_rel_err, numerical_grad};

    fn random(rows: usize, cols: usize, rng: &mut ChaCha8Rng) -> Array2<f64> {
        Array2::from_shape_simple_fn((rows, cols), || rng.random_range(-1.0..1.0))
    }

    /// L = Σ R ⊙ out as a function of (H_1, …, H_L, a) flattened.
    fn loss(
        jk: &JumpingKnowledge<f64>,
        theta: &[f64],
        (n, d, l_count): (usize, usize, usize),
        r: &Array2<f64>,
    ) -> f64 {
        let hs: Vec<Array2<f64>> = (0..l_count)
            .map(|l| {
                Array2::from_shape_vec((n, d), theta[l * n * d..(l + 1) * n * d].to_vec()).unwrap()
            })
            .collect();
        let mut jk = jk.clone();
        if let Some(a) = &mut jk.att {
            a.value = Array2::from_shape_vec((d, 1), theta[l_count * n * d..].to_vec()).unwrap();
        }
        let views: Vec<_> = hs.iter().map(|h| h.view()).collect();
        (&jk.predict(&views) * r).sum()
    }

    fn check_mode(mode: JkMode, n: usize, d: usize, l_count: usize, seed: u64) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut jk = JumpingKnowledge::<f64>::new(mode, d, &mut rng);
        let hs: Vec<Array2<f64>> = (0..l_count).map(|_| random(n, d, &mut rng)).collect();
        if mode == JkMode::Max && l_count > 1 {
            // No near-ties: finite differences would cross the kink.
            for i in 0..n {
                for k in 0..d {
                    let mut v: Vec<f64> = hs.iter().map(|h| h[[i, k]]).collect();
                    v.sort_by(|a, b| b.total_cmp(a));
                    assert!(v[0] - v[1] > 1e-4, "near-tie at ({i}, {k})");
                }
            }
        }
        let views: Vec<_> = hs.iter().map(|h| h.view()).collect();
        let (out, cache) = jk.forward(&views);
        let od = jk.out_dim(d, l_count);
        assert_eq!(out.dim(), (n, od));
        assert_eq!(out, jk.predict(&views), "forward and predict differ");
        let r = random(n, od, &mut rng);
        let dhs = jk.backward(&views, cache, r.view());
        assert_eq!(dhs.len(), l_count);
        let mut analytic: Vec<f64> = dhs.iter().flat_map(|dh| dh.iter().copied()).collect();
        let mut theta: Vec<f64> = hs.iter().flat_map(|h| h.iter().copied()).collect();
        if let Some(a) = &jk.att {
            analytic.extend(a.grad.iter());
            theta.extend(a.value.iter());
        }
        let numerical = numerical_grad(|t| loss(&jk, t, (n, d, l_count), &r), &theta, 1e-6);
        let (err, at) = max_rel_err(&analytic, &numerical);
        assert!(
            err < 1e-6,
            "{mode} n={n} d={d} L={l_count}: rel err {err} at {at}"
        );
    }

    #[test]
    fn jk_backward_matches_finite_differences() {
        for mode in JkMode::ALL {
            for (n, d, l_count) in [(7, 3, 3), (5, 4, 2), (6, 3, 1), (4, 5, 4)] {
                check_mode(mode, n, d, l_count, 17 + l_count as u64);
            }
        }
    }

    #[test]
    fn jk_attention_scaled_up_matches_finite_differences() {
        // Larger a: peaked softmax weights still differentiate correctly.
        let (n, d, l_count) = (6, 4, 3);
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let mut jk = JumpingKnowledge::<f64>::new(JkMode::Attention, d, &mut rng);
        if let Some(a) = &mut jk.att {
            a.value.mapv_inplace(|v| 4.0 * v);
        }
        let hs: Vec<Array2<f64>> = (0..l_count).map(|_| random(n, d, &mut rng)).collect();
        let views: Vec<_> = hs.iter().map(|h| h.view()).collect();
        let (_, cache) = jk.forward(&views);
        let r = random(n, d, &mut rng);
        let dhs = jk.backward(&views, cache, r.view());
        let mut analytic: Vec<f64> = dhs.iter().flat_map(|dh| dh.iter().copied()).collect();
        let mut theta: Vec<f64> = hs.iter().flat_map(|h| h.iter().copied()).collect();
        let a = jk.att.as_ref().unwrap();
        analytic.extend(a.grad.iter());
        theta.extend(a.value.iter());
        let numerical = numerical_grad(|t| loss(&jk, t, (n, d, l_count), &r), &theta, 1e-6);
        let (err, at) = max_rel_err(&analytic, &numerical);
        assert!(err < 1e-6, "rel err {err} at {at}");
    }

    #[test]
    fn jk_attention_zero_vector_gives_mean() {
        let (n, d) = (5, 3);
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let mut jk = JumpingKnowledge::<f64>::new(JkMode::Attention, d, &mut rng);
        jk.att = Some(Param::zeros(d, 1));
        let hs: Vec<Array2<f64>> = (0..4).map(|_| random(n, d, &mut rng)).collect();
        let views: Vec<_> = hs.iter().map(|h| h.view()).collect();
        let out = jk.predict(&views);
        let mean = hs
            .iter()
            .fold(Array2::<f64>::zeros((n, d)), |acc, h| acc + h)
            / 4.0;
        assert!((&out - &mean).iter().all(|v| v.abs() < 1e-14));
    }

    #[test]
    fn jk_attention_is_stable_for_large_scores() {
        // Scores of ±1e4 overflow exp without the max subtraction.
        let mut jk = JumpingKnowledge::<f32> {
            mode: JkMode::Attention,
            att: Some(Param::new(Array2::from_elem((2, 1), 1e4f32))),
        };
        let h1 = Array2::from_elem((3, 2), 1.0f32);
        let h2 = Array2::from_elem((3, 2), -1.0f32);
        let views = [h1.view(), h2.view()];
        let (out, cache) = jk.forward(&views);
        assert!(out.iter().all(|&v| v == 1.0), "{out:?}");
        let g = Array2::from_elem((3, 2), 1.0f32);
        let dhs = jk.backward(&views, cache, g.view());
        assert!(dhs.iter().all(|dh| dh.iter().all(|v| v.is_finite())));
    }

    #[test]
    fn jk_max_ties_go_to_first_layer() {
        let mut jk =
            JumpingKnowledge::<f64>::new(JkMode::Max, 2, &mut ChaCha8Rng::seed_from_u64(0));
        assert!(jk.att.is_none());
        let h1 = Array2::from_shape_vec((2, 2), vec![1.0, 0.0, 3.0, -1.0]).unwrap();
        let h2 = Array2::from_shape_vec((2, 2), vec![1.0, 2.0, 3.0, -2.0]).unwrap();
        let h3 = Array2::from_shape_vec((2, 2), vec![0.0, 2.0, 3.0, -1.0]).unwrap();
        let views = [h1.view(), h2.view(), h3.view()];
        let (out, cache) = jk.forward(&views);
        assert_eq!(
            out,
            Array2::from_shape_vec((2, 2), vec![1.0, 2.0, 3.0, -1.0]).unwrap()
        );
        let g = Array2::from_shape_vec((2, 2), vec![10.0, 20.0, 30.0, 40.0]).unwrap();
        let dhs = jk.backward(&views, cache, g.view());
        let e = |v: Vec<f64>| Array2::from_shape_vec((2, 2), v).unwrap();
        assert_eq!(dhs[0], e(vec![10.0, 0.0, 30.0, 40.0]));
        assert_eq!(dhs[1], e(vec![0.0, 20.0, 0.0, 0.0]));
        assert_eq!(dhs[2], e(vec![0.0, 0.0, 0.0, 0.0]));
    }

    #[test]
    fn jk_concat_layout_and_out_dim() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let jk = JumpingKnowledge::<f64>::new(JkMode::Concat, 2, &mut rng);
        let h1 = random(3, 2, &mut rng);
        let h2 = random(3, 2, &mut rng);
        let out = jk.predict(&[h1.view(), h2.view()]);
        assert_eq!(jk.out_dim(2, 2), 4);
        assert_eq!(out.slice(s![.., 0..2]), h1);
        assert_eq!(out.slice(s![.., 2..4]), h2);
        for mode in [JkMode::Max, JkMode::Attention] {
            let jk = JumpingKnowledge::<f64>::new(mode, 2, &mut rng);
            assert_eq!(jk.out_dim(2, 5), 2);
        }
    }

    #[test]
    fn jk_mode_parses_and_displays() {
        for mode in JkMode::ALL {
            assert_eq!(mode.to_string().parse::<JkMode>(), Ok(mode));
        }
        assert_eq!("Concat".parse::<JkMode>(), Ok(JkMode::Concat));
        assert_eq!("attention".parse::<JkMode>(), Ok(JkMode::Attention));
        let err = "lstm".parse::<JkMode>().unwrap_err();
        assert!(err.to_string().contains("\"lstm\""), "{err}");
    }

    #[test]
    fn jk_visit_params_only_for_attention() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for (mode, count) in [
            (JkMode::Concat, 0),
            (JkMode::Max, 0),
            (JkMode::Attention, 1),
        ] {
            let mut jk = JumpingKnowledge::<f64>::new(mode, 4, &mut rng);
            let mut shapes = Vec::new();
            jk.visit_params(&mut |p| shapes.push(p.value.dim()));
            assert_eq!(shapes.len(), count);
            if count == 1 {
                assert_eq!(shapes[0], (4, 1));
            }
        }
    }

    #[test]
    #[should_panic(expected = "layer output 1 is 3×2, layer 0 is 3×3")]
    fn jk_mismatched_layers_panic() {
        let jk = JumpingKnowledge::<f64>::new(JkMode::Max, 3, &mut ChaCha8Rng::seed_from_u64(0));
        let h1 = Array2::<f64>::zeros((3, 3));
        let h2 = Array2::<f64>::zeros((3, 2));
        let _ = jk.predict(&[h1.view(), h2.view()]);
    }

    #[test]
    #[should_panic(expected = "attention vector 4×1, expected 3×1")]
    fn jk_attention_wrong_dim_panics() {
        let jk =
            JumpingKnowledge::<f64>::new(JkMode::Attention, 4, &mut ChaCha8Rng::seed_from_u64(0));
        let h = Array2::<f64>::zeros((2, 3));
        let _ = jk.predict(&[h.view()]);
    }

    #[test]
    #[should_panic(expected = "the cache is not from mode max")]
    fn jk_cache_from_other_mode_panics() {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let cat = JumpingKnowledge::<f64>::new(JkMode::Concat, 2, &mut rng);
        let mut max = JumpingKnowledge::<f64>::new(JkMode::Max, 2, &mut rng);
        let h = Array2::<f64>::zeros((2, 2));
        let (_, cache) = cat.forward(&[h.view()]);
        let g = Array2::<f64>::zeros((2, 2));
        let _ = max.backward(&[h.view()], cache, g.view());
    }
}
