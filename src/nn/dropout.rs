//! [`ReluDropout`]: ReLU, inverted dropout, or both in one pass, on dense activations, forward
//! and backward in one file. In place, keeping one byte per element (for both) instead of a copy
//! of the activation or of the mask.
//!
//! - ReLU ([`ReluDropout::relu`]): y = max(x, 0); backward dx = 𝟙(x > 0) ⊙ dy (ReLU′(0) = 0;
//!   NaN counts as ≤ 0).
//! - Dropout ([`ReluDropout::dropout`], rate p, training only): y = x ⊙ m with
//!   m_i ∈ {0, 1/(1−p)} drawn from the layer's random stream ([`Cx::rng`]); backward
//!   dx = m ⊙ dy. The identity in evaluation.
//! - Both ([`ReluDropout::new`]): y = max(x, 0) ⊙ m; backward dx = 𝟙(x > 0) ⊙ m ⊙ dy, computed as
//!   `+0` where ReLU is off and `dy·m` elsewhere (bit for bit ReLU's then dropout's backward).
//!
//! Each mask takes one `u64` of the layer's stream as its key, and element k's factor is a
//! function of the key and k alone ([`MASK_STREAM`](crate::kernels::elementwise::MASK_STREAM)),
//! so a mask depends on the stream only, never on the thread or process count.

use ndarray::Zip;

use super::attrs::{Attrs, FromAttrs};
use super::layer::{view, view_mut, Bwd, Cx, Fwd, GradMode, InputDesc, Layer, Req, Spec};
use crate::kernels::elementwise::{code_bytes, codes_from, fill_dropout_mask_at};
use crate::kernels::elementwise::{relu_dropout_at, zip_codes};
use crate::kernels::{dropout_relu_backward_code, relu_inplace};
use crate::ConfigError;
use crate::{Result, Scalar};

/// ReLU and/or inverted dropout at rate `p`, in place (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReluDropout {
    /// Width.
    pub dim: usize,
    /// Whether the layer applies ReLU (before the dropout).
    pub relu: bool,
    /// The dropout rate p ∈ [0, 1) (0: no dropout).
    pub p: f64,
}

impl ReluDropout {
    /// ReLU then dropout at rate `p`.
    pub fn new(dim: usize, p: f64) -> Self {
        ReluDropout { dim, relu: true, p }
    }
    /// ReLU alone.
    pub fn relu(dim: usize) -> Self {
        ReluDropout {
            dim,
            relu: true,
            p: 0.0,
        }
    }
    /// Dropout alone at rate `p`.
    pub fn dropout(dim: usize, p: f64) -> Self {
        ReluDropout {
            dim,
            relu: false,
            p,
        }
    }
}

/// The inverted-dropout factor 1/(1 − p).
fn keep_factor<F: Scalar>(p: f64) -> F {
    F::from_f64_lossy(1.0 / (1.0 - p))
}

impl<F: Scalar> FromAttrs<F> for ReluDropout {
    /// `dim`, `relu`, `p` (in [0, 1)); registered as `relu`, `dropout` and `relu_dropout`.
    fn from_attrs(a: &Attrs) -> Result<Self, ConfigError> {
        Ok(ReluDropout {
            dim: a.count("dim", 1, usize::MAX)?,
            relu: a.get("relu")?,
            p: a.rate("p")?,
        })
    }
}

impl<F: Scalar> Layer<F> for ReluDropout {
    fn name(&self) -> &'static str {
        match (self.relu, self.p > 0.0) {
            (true, false) => "relu",
            (false, _) => "dropout",
            (true, true) => "relu_dropout",
        }
    }

    fn hops(&self) -> Option<usize> {
        // (Row-wise: on its level's rows over a stack of blocks.)
        Some(0)
    }
    fn spec(&self, _inputs: &[InputDesc], n: usize) -> Spec {
        Spec {
            in_place: true,
            grad: GradMode::InPlace,
            draws_mask: self.p > 0.0,
            saved: Req {
                u8: code_bytes(n * self.dim),
                ..Req::default()
            },
            // Dropout alone keeps its mask in scratch; with ReLU it is drawn and applied in
            // one pass.
            scratch: Req::f(if self.p > 0.0 && !self.relu {
                n * self.dim
            } else {
                0
            }),
            ..Spec::new(self.dim).reading(self.dim)
        }
    }
    fn forward(&mut self, cx: &mut Cx<'_, F>, io: Fwd<'_, F>) -> Result<()> {
        let (out, mut saved, mut scratch) = (io.out, io.saved, io.scratch);
        let train = cx.train();
        if !train || self.p == 0.0 {
            if self.relu {
                if train {
                    let codes = saved.take_u8(code_bytes(out.len()));
                    codes_from(codes, out.view(), cx.par, |&v| u8::from(v > F::zero()));
                }
                relu_inplace(out, cx.par);
            }
            return Ok(());
        }
        let (len, dim) = (out.len(), out.dim());
        let rng = cx
            .rng
            .as_deref_mut()
            .unwrap_or_else(|| unreachable!("a training pass gives dropout its stream"));
        // Keyed by global position: this process's rows of the whole graph's mask.
        let (before, total) = cx.sums.global_span(len);
        let codes = saved.take_u8(code_bytes(len));
        if self.relu {
            // The mask drawn and applied in one pass, never stored.
            relu_dropout_at(rng, self.p, out, codes, before, total, cx.par);
        } else {
            let mask = scratch.take_f(len);
            fill_dropout_mask_at(rng, self.p, mask, before, total, cx.par);
            let mask = view(mask, dim);
            Zip::from(out).and(mask).for_each(|o, &m| *o *= m);
            codes_from(codes, mask, cx.par, |&m| u8::from(m != F::zero()));
        }
        Ok(())
    }
    fn backward(&mut self, cx: &mut Cx<'_, F>, io: Bwd<'_, F>) -> Result<()> {
        let (mut saved, grad) = (io.saved, io.grad);
        if !self.relu && self.p == 0.0 {
            return Ok(());
        }
        let dim = (cx.n(), self.dim);
        let codes = saved.take_u8(code_bytes(dim.0 * dim.1));
        let g = view_mut(grad.in_place(), dim);
        match (self.relu, self.p > 0.0) {
            (true, true) => dropout_relu_backward_code(g, codes, keep_factor(self.p), cx.par),
            (true, false) => zip_codes(g, codes, cx.par, |g, c| {
                *g = [F::zero(), *g][usize::from(c & 1)]
            }),
            (false, _) => {
                let vals = [F::zero(), keep_factor::<F>(self.p)];
                zip_codes(g, codes, cx.par, |g, c| *g *= vals[usize::from(c & 1)]);
            }
        }
        Ok(())
    }
    fn attrs(&self) -> Option<Attrs> {
        Some(
            Attrs::new()
                .with("dim", self.dim)
                .with("relu", self.relu)
                .with("p", self.p),
        )
    }

    fn clone_box(&self) -> Box<dyn Layer<F>> {
        Box::new(*self)
    }
}

#[cfg(test)]
mod tests {
    use ndarray::{array, Array2};
    use rand::RngExt;

    use super::*;
    use crate::graph::NormAdj;
    use crate::kernels::dropout_mask;
    use crate::nn::Mode;
    use crate::testing::harness::{isolated, random, rng, small_adjs, Harness, In};

    const D: usize = 5;

    /// Uniform(−1, 1) entries at least 1e-3 away from ReLU's kink (closer draws are redrawn).
    fn away_from_zero(rows: usize, cols: usize, seed: u64) -> Array2<f64> {
        let mut r = rng(seed);
        Array2::from_shape_simple_fn((rows, cols), || loop {
            let v: f64 = r.random_range(-1.0..1.0);
            if v.abs() >= 1e-3 {
                return v;
            }
        })
    }

    /// Training mode with a fixed dropout stream (each call draws the same mask).
    fn harness(adj: &NormAdj<f64>) -> Harness<'_, f64> {
        Harness {
            rng: Some(rng(99)),
            ..Harness::new(adj)
        }
    }

    #[test]
    fn gradients_match_finite_differences() {
        let [(_, adj), _] = &small_adjs();
        let n = adj.n_nodes();
        let x = [In::Dense(away_from_zero(n, D, 1))];
        let g = random(n, D, &mut rng(2));
        let h = harness(adj);
        let mut layers: Vec<Box<dyn Layer<f64>>> = vec![Box::new(ReluDropout::relu(D))];
        for p in [0.0, 0.5] {
            layers.push(Box::new(ReluDropout::dropout(D, p)));
            layers.push(Box::new(ReluDropout::new(D, p)));
        }
        for l in &mut layers {
            let what = format!("{l:?}");
            let (y, _) = h.grad_check(l.as_mut(), &x, &[true], &g, &what);
            // Every layer but the identity (dropout at p = 0) zeroes some entries.
            let zeros = y.iter().filter(|&&v| v == 0.0).count();
            if what == format!("{:?}", ReluDropout::dropout(D, 0.0)) {
                assert_eq!(&y, x[0].dense(), "{what}");
            } else {
                assert!(zeros > 0 && zeros < y.len(), "{what}: {zeros} zeros");
            }
        }
    }

    #[test]
    fn the_mask_is_the_kernels_and_relu_dropout_is_relu_then_dropout() {
        let [(_, adj), _] = &small_adjs();
        let n = adj.n_nodes();
        let x = away_from_zero(n, D, 3);
        let g = random(n, D, &mut rng(4));
        let h = harness(adj);
        let p = 0.4;
        let mut mask = vec![0.0; n * D];
        dropout_mask(&mut rng(99), p, &mut mask);
        let mask = Array2::from_shape_vec((n, D), mask).unwrap();
        let (y, dx) = h.run(
            &mut ReluDropout::dropout(D, p),
            &[In::Dense(x.clone())],
            &g,
            &[true],
        );
        assert_eq!(y, &x * &mask);
        assert_eq!(dx[0].as_ref().unwrap(), &(&g * &mask));
        // ReLU then dropout, bit for bit.
        let (yr, dr) = h.run(
            &mut ReluDropout::relu(D),
            &[In::Dense(x.clone())],
            &g,
            &[true],
        );
        let (yrd, drd) = h.run(
            &mut ReluDropout::dropout(D, p),
            &[In::Dense(yr)],
            &dr[0].clone().unwrap(),
            &[true],
        );
        let (y2, d2) = h.run(&mut ReluDropout::new(D, p), &[In::Dense(x)], &g, &[true]);
        assert_eq!(y2, yrd);
        let bits = |a: &Array2<f64>| a.mapv(f64::to_bits);
        assert_eq!(
            bits(d2[0].as_ref().unwrap()),
            bits(drd[0].as_ref().unwrap())
        );
    }

    #[test]
    fn evaluation_is_the_identity_and_relu() {
        let [(_, adj), _] = &small_adjs();
        let n = adj.n_nodes();
        let x = away_from_zero(n, D, 5);
        let relu = x.mapv(|v| v.max(0.0));
        let h = harness(adj).mode(Mode::Eval);
        let fwd = |l: &mut dyn Layer<f64>| h.forward(l, &[In::Dense(x.clone())]).0;
        assert_eq!(
            fwd(&mut ReluDropout::dropout(D, 0.5)).mapv(f64::to_bits),
            x.mapv(f64::to_bits)
        );
        assert_eq!(fwd(&mut ReluDropout::new(D, 0.5)), relu);
        assert_eq!(fwd(&mut ReluDropout::relu(D)), relu);
        // Evaluation draws nothing: no stream is needed.
        let h = Harness::new(adj).mode(Mode::Eval);
        assert_eq!(
            h.forward(&mut ReluDropout::dropout(D, 0.5), &[In::Dense(x.clone())])
                .0,
            x
        );
    }

    #[test]
    fn golden_relu() {
        // ReLU′(0) = 0.
        let adj = isolated::<f64>(2);
        let x = [In::Dense(array![[-1.0, 2.0], [0.0, 3.0]])];
        let g = array![[5.0, 6.0], [7.0, 8.0]];
        let (y, dx) = Harness::new(&adj).run(&mut ReluDropout::relu(2), &x, &g, &[true]);
        assert_eq!(y, array![[0.0, 2.0], [0.0, 3.0]]);
        assert_eq!(dx[0].as_ref().unwrap(), array![[0.0, 6.0], [0.0, 8.0]]);
        // Dropout at p = 3/4 keeps an element as 4·x.
        let x = [In::Dense(array![[1.0, 1.0], [1.0, 1.0]])];
        let h = Harness {
            rng: Some(rng(1)),
            ..Harness::new(&adj)
        };
        let (y, _) = h.forward(&mut ReluDropout::dropout(2, 0.75), &x);
        assert!(y.iter().all(|&v| v == 0.0 || v == 4.0), "{y}");
    }
}
