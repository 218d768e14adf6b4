//! Plain SGD with L2 weight decay: θ ← θ − lr·(∇L + λ_group·θ).

use ndarray::Zip;

use super::{decay_of, Optimizer};
use crate::nn::Param;
use crate::Scalar;

/// Stochastic (here full-batch) gradient descent.
#[derive(Debug, Clone)]
pub struct Sgd {
    /// Learning rate.
    pub lr: f64,
    /// L2 weight decay per group (layer); missing groups get 0.
    pub weight_decay: Vec<f64>,
}

impl<F: Scalar> Optimizer<F> for Sgd {
    fn update(&mut self, _index: usize, group: usize, p: &mut Param<F>) {
        let lr = F::from_f64_lossy(self.lr);
        let wd = F::from_f64_lossy(decay_of(&self.weight_decay, group));
        Zip::from(&mut p.value)
            .and(&p.grad)
            .for_each(|w, &g| *w -= lr * (g + wd * *w));
    }
}
