//! Element-wise layers on dense activations, forward and backward in one file: [`Relu`],
//! inverted [`Dropout`], and [`ReluDropout`] (ReLU then dropout, keeping one byte per element
//! for both). All work in place and keep a byte code per element instead of a copy of the
//! activation or of the mask.
//!
//! - ReLU: y = max(x, 0); backward dx = 𝟙(x > 0) ⊙ dy (ReLU′(0) = 0; NaN counts as ≤ 0).
//! - Dropout (rate p, training only): y = x ⊙ m with m_i ∈ {0, 1/(1−p)} drawn from the layer's
//!   random stream ([`Cx::rng`]); backward dx = m ⊙ dy. The identity in evaluation.
//! - ReluDropout: y = max(x, 0) ⊙ m; backward dx = 𝟙(x > 0) ⊙ m ⊙ dy, computed as `+0` where
//!   ReLU is off and `dy·m` elsewhere (bit for bit ReLU's then dropout's backward).
//!
//! Masks are drawn by [`MaskRng::fill_dropout_mask`] in element order, so a mask depends on the
//! stream only, never on the thread count.

use ndarray::Zip;

use super::layer::{view, view_mut, Bwd, Cx, Fwd, GradIo, Layer, Req};
use crate::kernels::{
    bias_relu_dropout_fold, dropout_relu_backward_code, relu_inplace, MaskRng,
};
use crate::Scalar;

/// ReLU, in place, keeping the sign of each input as one byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Relu {
    /// Width.
    pub dim: usize,
}

impl<F: Scalar> Layer<F> for Relu {
    fn name(&self) -> &'static str {
        "relu"
    }
    fn out_dim(&self) -> usize {
        self.dim
    }
    fn in_place(&self) -> bool {
        true
    }
    fn grad_in_place(&self) -> bool {
        true
    }
    fn saved(&self, n: usize) -> Req {
        Req {
            u8: n * self.dim,
            ..Req::default()
        }
    }
    fn forward(&mut self, cx: &mut Cx<'_, F>, io: Fwd<'_, F>) {
        let Fwd {
            mut out, mut saved, ..
        } = io;
        if cx.train() {
            let code = saved.take_u8(out.len());
            let code = view_mut(code, out.dim());
            Zip::from(&out)
                .and(code)
                .for_each(|&v, c| *c = u8::from(v > F::zero()));
        }
        relu_inplace(out.view_mut());
    }
    fn backward(&mut self, cx: &mut Cx<'_, F>, io: Bwd<'_, F>) {
        let Bwd {
            mut saved, grad, ..
        } = io;
        let GradIo::InPlace(g) = grad else {
            unreachable!("ReLU's gradient is in place")
        };
        let dim = (cx.n(), self.dim);
        let code = view(saved.take_u8(dim.0 * dim.1), dim);
        Zip::from(view_mut(g, dim))
            .and(code)
            .for_each(|g, &c| *g = [F::zero(), *g][usize::from(c)]);
    }
    fn clone_box(&self) -> Box<dyn Layer<F>> {
        Box::new(*self)
    }
}

/// The inverted-dropout factor 1/(1 − p).
fn keep_factor<F: Scalar>(p: f64) -> F {
    F::from_f64_lossy(1.0 / (1.0 - p))
}

/// Inverted dropout at rate `p`, in place (training passes; the identity in evaluation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dropout {
    /// Width.
    pub dim: usize,
    /// The rate p ∈ [0, 1).
    pub p: f64,
}

impl<F: Scalar> Layer<F> for Dropout {
    fn name(&self) -> &'static str {
        "dropout"
    }
    fn out_dim(&self) -> usize {
        self.dim
    }
    fn in_place(&self) -> bool {
        true
    }
    fn grad_in_place(&self) -> bool {
        true
    }
    fn draws_mask(&self) -> bool {
        self.p > 0.0
    }
    fn saved(&self, n: usize) -> Req {
        Req {
            u8: n * self.dim,
            ..Req::default()
        }
    }
    fn scratch(&self, n: usize) -> Req {
        Req::f(n * self.dim)
    }
    fn forward(&mut self, cx: &mut Cx<'_, F>, io: Fwd<'_, F>) {
        if !cx.train() || self.p == 0.0 {
            return;
        }
        let Fwd {
            out,
            mut saved,
            mut scratch,
            ..
        } = io;
        let len = out.len();
        let mask = scratch.take_f(len);
        let rng = cx
            .rng
            .as_deref_mut()
            .unwrap_or_else(|| unreachable!("a training pass gives dropout its stream"));
        rng.fill_dropout_mask(self.p, mask, cx.par);
        let dim = out.dim();
        let code = view_mut(saved.take_u8(len), dim);
        Zip::from(out)
            .and(view(mask, dim))
            .and(code)
            .for_each(|o, &m, c| {
                *o *= m;
                *c = u8::from(m != F::zero());
            });
    }
    fn backward(&mut self, cx: &mut Cx<'_, F>, io: Bwd<'_, F>) {
        if self.p == 0.0 {
            return;
        }
        let Bwd {
            mut saved, grad, ..
        } = io;
        let GradIo::InPlace(g) = grad else {
            unreachable!("dropout's gradient is in place")
        };
        let dim = (cx.n(), self.dim);
        let code = view(saved.take_u8(dim.0 * dim.1), dim);
        let vals = [F::zero(), keep_factor::<F>(self.p)];
        Zip::from(view_mut(g, dim))
            .and(code)
            .for_each(|g, &c| *g *= vals[usize::from(c)]);
    }
    fn clone_box(&self) -> Box<dyn Layer<F>> {
        Box::new(*self)
    }
}

/// ReLU then inverted dropout at rate `p`, in place, with one byte per element for both (the
/// dropout is skipped in evaluation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReluDropout {
    /// Width.
    pub dim: usize,
    /// The rate p ∈ [0, 1).
    pub p: f64,
}

impl<F: Scalar> Layer<F> for ReluDropout {
    fn name(&self) -> &'static str {
        "relu_dropout"
    }
    fn out_dim(&self) -> usize {
        self.dim
    }
    fn in_place(&self) -> bool {
        true
    }
    fn grad_in_place(&self) -> bool {
        true
    }
    fn draws_mask(&self) -> bool {
        self.p > 0.0
    }
    fn saved(&self, n: usize) -> Req {
        Req {
            u8: n * self.dim,
            ..Req::default()
        }
    }
    fn scratch(&self, n: usize) -> Req {
        Req::f(n * self.dim)
    }
    fn forward(&mut self, cx: &mut Cx<'_, F>, io: Fwd<'_, F>) {
        let Fwd {
            mut out,
            mut saved,
            mut scratch,
            ..
        } = io;
        if !cx.train() {
            relu_inplace(out);
            return;
        }
        let len = out.len();
        let dim = out.dim();
        let code = view_mut(saved.take_u8(len), dim);
        if self.p == 0.0 {
            Zip::from(&out)
                .and(code)
                .for_each(|&v, c| *c = u8::from(v > F::zero()));
            relu_inplace(out.view_mut());
            return;
        }
        let mask = scratch.take_f(len);
        let rng = cx
            .rng
            .as_deref_mut()
            .unwrap_or_else(|| unreachable!("a training pass gives dropout its stream"));
        rng.fill_dropout_mask(self.p, mask, cx.par);
        bias_relu_dropout_fold(out, None, view(mask, dim), code);
    }
    fn backward(&mut self, cx: &mut Cx<'_, F>, io: Bwd<'_, F>) {
        let Bwd {
            mut saved, grad, ..
        } = io;
        let GradIo::InPlace(g) = grad else {
            unreachable!("ReLU·dropout's gradient is in place")
        };
        let dim = (cx.n(), self.dim);
        let code = view(saved.take_u8(dim.0 * dim.1), dim);
        let g = view_mut(g, dim);
        if self.p == 0.0 {
            Zip::from(g)
                .and(code)
                .for_each(|g, &c| *g = [F::zero(), *g][usize::from(c)]);
        } else {
            dropout_relu_backward_code(g, code, keep_factor(self.p));
        }
    }
    fn clone_box(&self) -> Box<dyn Layer<F>> {
        Box::new(*self)
    }
}
