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
//! | saved | nothing (Concat), the arg-max layer as 2 bytes per element (Max), α: n × L (Attention) |

use ndarray::{s, ArrayView2, ArrayViewMut2, Zip};
use rand::Rng;

use super::arch::{prev_node, Architecture, Builder, Built, ModelConfig};
use super::attrs::{Attrs, FromAttrs, Registry};
use super::dropout::ReluDropout;
use super::gcn_conv::GcnConv;
use super::layer::{view, view_mut, Bwd, Cx, Fwd, InputDesc, Inputs, Layer, Req, Spec};
use super::linear::Linear;
use super::param::Param;
use super::stack::Src;
use crate::ConfigError;
use crate::{Result, Scalar};

/// How [`JumpingKnowledge`] combines the layer outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JkMode {
    /// Concatenation.
    Concat,
    /// Element-wise maximum.
    Max,
    /// Per-node softmax attention over layers.
    Attention,
}

impl JkMode {
    /// Every mode.
    pub const ALL: [JkMode; 3] = [JkMode::Concat, JkMode::Max, JkMode::Attention];
}

crate::error::names!(JkMode, "jumping-knowledge mode", [
    JkMode::Concat => "cat",
    JkMode::Max => "max",
    JkMode::Attention => "att",
], aliases [JkMode::Concat => "concat", JkMode::Attention => "attention"]);

/// Jumping knowledge over `n_layers` inputs of width `dim`; the attention vector `att` for
/// [`JkMode::Attention`].
#[derive(Debug, Clone, PartialEq)]
pub struct JumpingKnowledge<F> {
    /// The aggregation.
    pub mode: JkMode,
    /// a: d × 1 (Attention only), Glorot-initialised.
    pub att: Option<Param<F>>,
    /// Width d of each input.
    pub dim: usize,
    /// Number of inputs L.
    pub n_layers: usize,
}

impl<F: Scalar> JumpingKnowledge<F> {
    /// Output width: L·d for concatenation, d otherwise.
    pub fn out_dim(&self) -> usize {
        match self.mode {
            JkMode::Concat => self.dim * self.n_layers,
            JkMode::Max | JkMode::Attention => self.dim,
        }
    }

    /// A layer over `n_layers` inputs of width `dim` (Attention draws a from `rng`).
    pub fn new<R: Rng + ?Sized>(mode: JkMode, dim: usize, n_layers: usize, rng: &mut R) -> Self {
        let att = (mode == JkMode::Attention).then(|| Param::glorot(dim, 1, rng));
        JumpingKnowledge {
            mode,
            att,
            dim,
            n_layers,
        }
    }
}

/// The attention scores, then their softmax over layers, row by row, into `alpha` (n × L).
fn attention_weights<F: Scalar>(
    ins: &Inputs<'_, F>,
    a: ndarray::ArrayView1<'_, F>,
    alpha: &mut ArrayViewMut2<'_, F>,
) {
    for l in 0..ins.len() {
        Zip::from(alpha.column_mut(l))
            .and(ins.get(l).dense().rows())
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

impl<F: Scalar> FromAttrs<F> for JumpingKnowledge<F> {
    /// `mode` (`cat`, `max`, `att`), `dim`, `n_layers` (its inputs, at most
    /// [`MAX_LAYERS`](super::arch::MAX_LAYERS)); a zero attention vector.
    fn from_attrs(a: &Attrs) -> Result<Self, ConfigError> {
        let mode: JkMode = a.get("mode")?;
        let dim = if mode == JkMode::Attention {
            a.shape(["dim"])?[0]
        } else {
            a.count("dim", 1, usize::MAX)?
        };
        Ok(JumpingKnowledge {
            mode,
            att: (mode == JkMode::Attention).then(|| Param::zeros(dim, 1)),
            dim,
            n_layers: a.count("n_layers", 1, super::arch::MAX_LAYERS)?,
        })
    }
}

impl<F: Scalar> Layer<F> for JumpingKnowledge<F> {
    fn name(&self) -> &'static str {
        "jumping_knowledge"
    }

    fn hops(&self) -> Option<usize> {
        // (Row-wise: on its level's rows over a stack of blocks.)
        Some(0)
    }

    fn arity(&self) -> usize {
        self.n_layers
    }

    fn spec(&self, _inputs: &[InputDesc], n: usize) -> Spec {
        Spec {
            saved: {
                match self.mode {
                    JkMode::Concat => Req::default(),
                    JkMode::Max => Req {
                        u8: 2 * n * self.dim,
                        ..Req::default()
                    },
                    JkMode::Attention => Req::f(n * self.n_layers),
                }
            },
            scratch: {
                match self.mode {
                    JkMode::Attention => Req::f(n * self.n_layers),
                    _ => Req::default(),
                }
            },
            keeps_input: self.mode == JkMode::Attention,
            ..Spec::new(self.out_dim()).reading(self.dim)
        }
    }

    fn forward(&mut self, cx: &mut Cx<'_, F>, io: Fwd<'_, F>) -> Result<()> {
        let (ins, mut out, mut saved) = (io.ins, io.out, io.saved);
        let (n, d, l_count) = (cx.n(), self.dim, self.n_layers);
        assert!(
            ins.len() == l_count
                && (0..l_count).all(|l| ins.get(l).nrows() == n && ins.get(l).ncols() == d)
                && out.dim() == (n, self.out_dim()),
            "JumpingKnowledge::forward ({}): {} inputs, expected {l_count} of {n}×{d}",
            self.mode,
            ins.len()
        );
        match self.mode {
            JkMode::Concat => {
                for l in 0..l_count {
                    out.slice_mut(s![.., l * d..(l + 1) * d])
                        .assign(&ins.get(l).dense());
                }
            }
            JkMode::Max => {
                assert!(
                    l_count <= usize::from(u16::MAX),
                    "JumpingKnowledge (max): {l_count} layers, at most {} supported",
                    u16::MAX
                );
                out.assign(&ins.get(0).dense());
                let keep = cx.train();
                let idx = saved.take_u8(2 * n * d);
                if keep {
                    idx.fill(0);
                }
                let mut idx = view_mut(idx, (n, 2 * d));
                for l in 1..l_count {
                    let h = ins.get(l).dense();
                    // Strictly greater: ties stay with the earlier layer. A NaN wins once and
                    // then stays, so divergence shows in the output.
                    let wins = |o: &F, v: F| v > *o || (v.is_nan() && !o.is_nan());
                    if keep {
                        let lb = (l as u16).to_le_bytes();
                        for ((mut orow, mut irow), hrow) in
                            out.rows_mut().into_iter().zip(idx.rows_mut()).zip(h.rows())
                        {
                            for k in 0..d {
                                if wins(&orow[k], hrow[k]) {
                                    orow[k] = hrow[k];
                                    irow[2 * k] = lb[0];
                                    irow[2 * k + 1] = lb[1];
                                }
                            }
                        }
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
                let a = match &self.att {
                    Some(p) if p.value.dim() == (d, 1) => p.value.column(0),
                    _ => panic!("JumpingKnowledge (att): the attention vector must be {d}×1"),
                };
                let mut alpha = view_mut(saved.take_f(n * l_count), (n, l_count));
                attention_weights(&ins, a, &mut alpha);
                out.fill(F::zero());
                for l in 0..l_count {
                    Zip::from(out.rows_mut())
                        .and(alpha.column(l))
                        .and(ins.get(l).dense().rows())
                        .for_each(|mut o, &w, hr| o.scaled_add(w, &hr));
                }
            }
        }
        Ok(())
    }

    fn backward(&mut self, cx: &mut Cx<'_, F>, io: Bwd<'_, F>) -> Result<()> {
        let (ins, mut saved, mut scratch, grad) = (io.ins, io.saved, io.scratch, io.grad);
        let (g, mut din) = grad.separate();
        let (n, d, l_count) = (cx.n(), self.dim, self.n_layers);
        match self.mode {
            JkMode::Concat => {
                for l in 0..l_count {
                    if let Some(mut dh) = din.get(l) {
                        dh.assign(&g.slice(s![.., l * d..(l + 1) * d]));
                    }
                }
            }
            JkMode::Max => {
                let idx = view(saved.take_u8(2 * n * d), (n, 2 * d));
                for l in 0..l_count {
                    let Some(mut dh) = din.get(l) else { continue };
                    let l = l as u16;
                    dh.fill(F::zero());
                    for ((mut orow, irow), grow) in
                        dh.rows_mut().into_iter().zip(idx.rows()).zip(g.rows())
                    {
                        for k in 0..d {
                            if u16::from_le_bytes([irow[2 * k], irow[2 * k + 1]]) == l {
                                orow[k] = grow[k];
                            }
                        }
                    }
                }
            }
            JkMode::Attention => {
                let alpha = view(saved.take_f(n * l_count), (n, l_count));
                let mut delta = view_mut(scratch.take_f(n * l_count), (n, l_count));
                let hs = |l: usize| -> ArrayView2<'_, F> { ins.get(l).dense() };
                // δ starts as c, then becomes α ⊙ (c − Σ_m α_·m c_·m) row by row.
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
                let Some(Param { value, grad }) = self.att.as_mut() else {
                    panic!("JumpingKnowledge (att): the attention vector is missing")
                };
                let a = value.column(0);
                // Every input of JK is a hidden layer's output, so every one needs its
                // gradient.
                for l in 0..l_count {
                    let Some(mut dh) = din.get(l) else {
                        panic!("JumpingKnowledge (att): input {l} needs its gradient")
                    };
                    dh.fill(F::zero());
                    Zip::from(dh.rows_mut())
                        .and(g.rows())
                        .and(alpha.column(l))
                        .and(delta.column(l))
                        .for_each(|mut o, gr, &w, &dl| {
                            o.scaled_add(w, &gr);
                            o.scaled_add(dl, &a);
                        });
                }
                // da = Σ_l H_lᵀ·δ_·l: a sum over nodes per layer, through `Propagate`.
                for l in 0..l_count {
                    cx.sums.t_matmul(
                        F::one(),
                        hs(l),
                        delta.slice(s![.., l..l + 1]),
                        F::one(),
                        grad.view_mut(),
                        cx.par,
                    );
                }
            }
        }
        Ok(())
    }

    fn visit_params(&mut self, f: &mut dyn FnMut(&'static str, &mut Param<F>)) {
        if let Some(a) = &mut self.att {
            f("att", a);
        }
    }

    fn attrs(&self) -> Option<Attrs> {
        Some(
            Attrs::new()
                .with("mode", self.mode)
                .with("dim", self.dim)
                .with("n_layers", self.n_layers),
        )
    }

    fn clone_box(&self) -> Box<dyn Layer<F>> {
        Box::new(self.clone())
    }
}

/// Jumping-knowledge networks ([`Architecture`]: its settings are the mode, named `jk-cat`,
/// `jk-max`, `jk-att`): [GCN → N → ReLU (→ drop)] × L → JK → drop → Linear.
impl Architecture for JkMode {
    const NAMES: &'static [(&'static str, Self)] = &[
        ("jk-cat", JkMode::Concat),
        ("jk-max", JkMode::Max),
        ("jk-att", JkMode::Attention),
    ];
    const SUMMARY: &'static str =
        "jumping knowledge over every layer's output, then a Linear head (Xu et al., ICML 2018)";

    fn register_layers<F: Scalar>(r: &mut Registry<F>) {
        r.add::<JumpingKnowledge<F>>("jumping_knowledge");
    }

    fn n_hidden(&self, n_layers: usize) -> usize {
        n_layers
    }

    fn param_count(&self, cfg: &ModelConfig) -> u64 {
        let [i, h, o, l] =
            [cfg.in_dim, cfg.hidden_dim, cfg.out_dim, cfg.n_layers].map(|v| v as u64);
        let (conv, lin, norm) = cfg.param_parts();
        let width = if *self == JkMode::Concat {
            h.saturating_mul(l)
        } else {
            h
        };
        let hidden = l
            .saturating_sub(1)
            .saturating_mul(conv(h, h).saturating_add(norm));
        conv(i, h)
            .saturating_add(norm)
            .saturating_add(hidden)
            .saturating_add(h)
            .saturating_add(lin(width, o))
    }

    fn build<F: Scalar, R: Rng + ?Sized>(
        &self,
        cfg: &ModelConfig,
        b: &mut Builder<'_, F>,
        rng: &mut R,
    ) -> Built {
        let h = cfg.hidden_dim;
        let convs: Vec<GcnConv<F>> = (0..cfg.n_layers)
            .map(|l| b.conv(l, if l == 0 { cfg.in_dim } else { h }, h, rng))
            .collect();
        let mut jk = JumpingKnowledge::<F>::new(*self, h, cfg.n_layers, rng);
        let width = jk.out_dim();
        let head = Linear::<F>::new(width, cfg.out_dim, true, rng);
        let mut prev = Src::Xd;
        let mut outs = Vec::new();
        let last = cfg.n_layers - 1;
        for (l, conv) in convs.into_iter().enumerate() {
            b.begin_block();
            let z = b.push(conv, vec![prev], if l == 0 { 0 } else { 1 }, 0);
            let z = b.norm(z, h);
            let a = b.push(ReluDropout::relu(h), vec![Src::Node(z)], 0, 0);
            outs.push(Src::Node(a));
            if l < last {
                let p = cfg.dropout;
                prev = b.elem(ReluDropout::dropout(h, p), Src::Node(a), l as u64 + 2);
            }
            b.end_block(l);
        }
        let taps: Vec<usize> = outs.iter().map(|&s| prev_node(s)).collect();
        jk.n_layers = outs.len();
        let j = b.push(jk, outs, 2, 0);
        let nh = cfg.n_layers as u64;
        let dropout = ReluDropout::dropout(width, cfg.dropout);
        let d = b.push(dropout, vec![Src::Node(j)], 0, nh + 1);
        b.push(head, vec![Src::Node(d)], 2, 0);
        Built {
            input_site: 1,
            taps,
            no_input_dropout: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use ndarray::{array, Array2};

    use super::*;
    use crate::testing::harness::{bits, citation, isolated, params, random, rng};
    use crate::testing::harness::{same_for_any_thread_count, small_adjs, Harness, In};

    /// `l_count` random n × d inputs; for Max, redrawn until the two largest values of every
    /// element are more than 1e-3 apart (a finite difference then never crosses a kink).
    fn inputs(mode: JkMode, n: usize, d: usize, l_count: usize, seed: u64) -> Vec<In<f64>> {
        let mut r = rng(seed);
        let mut hs: Vec<Array2<f64>> = (0..l_count).map(|_| random(n, d, &mut r)).collect();
        if mode == JkMode::Max && l_count > 1 {
            for i in 0..n {
                for k in 0..d {
                    loop {
                        let mut v: Vec<f64> = hs.iter().map(|h| h[[i, k]]).collect();
                        v.sort_by(|a, b| b.total_cmp(a));
                        if v[0] - v[1] > 1e-3 {
                            break;
                        }
                        for h in &mut hs {
                            h[[i, k]] = random(1, 1, &mut r)[[0, 0]];
                        }
                    }
                }
            }
        }
        hs.into_iter().map(In::Dense).collect()
    }

    #[test]
    fn gradients_match_finite_differences() {
        let [(_, adj), _] = &small_adjs();
        let n = adj.n_nodes();
        for mode in JkMode::ALL {
            for (d, l_count, scale) in [
                (3, 3, 1.0),
                (4, 2, 1.0),
                (3, 1, 1.0),
                (4, 4, 1.0),
                (4, 3, 4.0),
            ] {
                if scale != 1.0 && mode != JkMode::Attention {
                    continue;
                }
                let mut jk = JumpingKnowledge::<f64>::new(mode, d, l_count, &mut rng(17));
                if let Some(a) = &mut jk.att {
                    // Scaled up: peaked softmax weights.
                    a.value.mapv_inplace(|v| scale * v);
                }
                let ins = inputs(mode, n, d, l_count, 18 + l_count as u64);
                let g = random(n, jk.out_dim(), &mut rng(19));
                let what = format!("JK {mode}, d {d}, L {l_count}, scale {scale}");
                let need = vec![true; l_count];
                Harness::new(adj).grad_check(&mut jk, &ins, &need, &g, &what);
            }
        }
    }

    #[test]
    fn golden_max_ties_go_to_the_first_layer() {
        let adj = isolated::<f64>(2);
        let mut jk = JumpingKnowledge::<f64>::new(JkMode::Max, 2, 3, &mut rng(0));
        let ins = [
            In::Dense(array![[1.0, 0.0], [3.0, -1.0]]),
            In::Dense(array![[1.0, 2.0], [3.0, -2.0]]),
            In::Dense(array![[0.0, 2.0], [3.0, -1.0]]),
        ];
        let g = array![[10.0, 20.0], [30.0, 40.0]];
        let (out, din) = Harness::new(&adj).run(&mut jk, &ins, &g, &[true; 3]);
        assert_eq!(out, array![[1.0, 2.0], [3.0, -1.0]]);
        assert_eq!(din[0].as_ref().unwrap(), array![[10.0, 0.0], [30.0, 40.0]]);
        assert_eq!(din[1].as_ref().unwrap(), array![[0.0, 20.0], [0.0, 0.0]]);
        assert_eq!(din[2].as_ref().unwrap(), array![[0.0, 0.0], [0.0, 0.0]]);
    }

    #[test]
    fn golden_concat_layout_and_zero_attention_mean() {
        let adj = isolated::<f64>(3);
        let mut r = rng(3);
        let hs = [random(3, 2, &mut r), random(3, 2, &mut r)];
        let ins: Vec<In<f64>> = hs.iter().cloned().map(In::Dense).collect();
        let mut cat = JumpingKnowledge::<f64>::new(JkMode::Concat, 2, 2, &mut r);
        let (out, _) = Harness::new(&adj).forward(&mut cat, &ins);
        assert_eq!(out.slice(s![.., 0..2]), hs[0]);
        assert_eq!(out.slice(s![.., 2..4]), hs[1]);
        // a = 0: equal weights, the mean.
        let mut att = JumpingKnowledge::<f64>::new(JkMode::Attention, 2, 2, &mut r);
        att.att = Some(Param::zeros(2, 1));
        let (out, _) = Harness::new(&adj).forward(&mut att, &ins);
        let mean = (&hs[0] + &hs[1]) / 2.0;
        assert!((&out - &mean).iter().all(|v| v.abs() < 1e-15));
    }

    #[test]
    fn attention_is_stable_for_large_scores() {
        // Scores of ±2e4 overflow exp without the max subtraction.
        let adj = isolated::<f32>(3);
        let mut jk = JumpingKnowledge::<f32> {
            mode: JkMode::Attention,
            att: Some(Param::new(Array2::from_elem((2, 1), 1e4f32))),
            dim: 2,
            n_layers: 2,
        };
        let ins = [
            In::Dense(Array2::from_elem((3, 2), 1.0f32)),
            In::Dense(Array2::from_elem((3, 2), -1.0f32)),
        ];
        let g = Array2::from_elem((3, 2), 1.0f32);
        let (out, din) = Harness::new(&adj).run(&mut jk, &ins, &g, &[true; 2]);
        assert!(out.iter().all(|&v| v == 1.0), "{out:?}");
        assert!(din
            .iter()
            .flatten()
            .all(|d| d.iter().all(|v| v.is_finite())));
    }

    #[test]
    fn bitwise_identical_for_any_thread_count() {
        let (adj, _) = citation();
        let n = adj.n_nodes();
        let mut r = rng(23);
        let ins: Vec<In<f32>> = (0..3)
            .map(|_| In::Dense(random(n, 16, &mut r).mapv(|v| v as f32)))
            .collect();
        for mode in JkMode::ALL {
            let base = JumpingKnowledge::<f32>::new(mode, 16, 3, &mut r);
            let g = random(n, base.out_dim(), &mut r).mapv(|v| v as f32);
            same_for_any_thread_count(
                |par| {
                    let mut jk = base.clone();
                    let h = Harness {
                        par,
                        ..Harness::new(&adj)
                    };
                    let (y, din) = h.run(&mut jk, &ins, &g, &[true; 3]);
                    let mut out = vec![bits(&y)];
                    out.extend(din.iter().flatten().map(bits));
                    out.extend(params(&mut jk, true).iter().map(|(_, p)| bits(p)));
                    out
                },
                &format!("JK {mode}"),
            );
        }
    }
}
