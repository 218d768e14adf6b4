//! Adam (Kingma & Ba, 2015) with L2 weight decay added to the gradient (PyTorch's `Adam`
//! `weight_decay`, TF's `wd · l2_loss`).

use ndarray::{Array2, Zip};

use super::{decay_of, Optimizer};
use crate::nn::Param;
use crate::Scalar;

/// Adam: m ← β1·m + (1−β1)·g; v ← β2·v + (1−β2)·g²; θ ← θ − lr·m̂/(√v̂ + ε), with bias-corrected
/// m̂, v̂, and g = ∇L + λ_group·θ.
#[derive(Debug, Clone)]
pub struct Adam<F> {
    /// Learning rate (Kipf: 0.01).
    pub lr: f64,
    /// β1 (0.9).
    pub beta1: f64,
    /// β2 (0.999).
    pub beta2: f64,
    /// ε (1e-8).
    pub eps: f64,
    /// L2 weight decay per group (layer); missing groups get 0.
    pub weight_decay: Vec<f64>,
    t: i32,
    state: Vec<(Array2<F>, Array2<F>)>,
}

impl<F: Scalar> Adam<F> {
    /// Adam with the usual (0.9, 0.999, 1e-8).
    pub fn new(lr: f64, weight_decay: Vec<f64>) -> Self {
        Adam {
            lr,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay,
            t: 0,
            state: Vec::new(),
        }
    }
}

impl<F: Scalar> Optimizer<F> for Adam<F> {
    fn update(&mut self, index: usize, group: usize, p: &mut Param<F>) {
        if index == 0 {
            self.t += 1;
        }
        if self.state.len() <= index {
            self.state
                .push((Array2::zeros(p.value.dim()), Array2::zeros(p.value.dim())));
        }
        let f = F::from_f64_lossy;
        let (b1, b2) = (f(self.beta1), f(self.beta2));
        let c1 = f(1.0 - self.beta1.powi(self.t));
        let c2 = f(1.0 - self.beta2.powi(self.t));
        let (lr, eps, wd) = (
            f(self.lr),
            f(self.eps),
            f(decay_of(&self.weight_decay, group)),
        );
        let (m, v) = &mut self.state[index];
        let _span =
            crate::kernels::profile::span(crate::kernels::profile::Phase::Optimizer, || {
                crate::kernels::profile::Work::Stream {
                    bytes: 7 * p.value.len() * std::mem::size_of::<F>(),
                }
            });
        Zip::from(&mut p.value)
            .and(&p.grad)
            .and(m)
            .and(v)
            .for_each(|w, &g, m, v| {
                let g = g + wd * *w;
                *m = b1 * *m + (F::one() - b1) * g;
                *v = b2 * *v + (F::one() - b2) * g * g;
                let mh = *m / c1;
                let vh = *v / c2;
                *w -= lr * mh / (vh.sqrt() + eps);
            });
    }
}
