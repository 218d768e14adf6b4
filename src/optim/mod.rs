//! Optimisers with L2 weight decay per parameter group (a group is one layer's parameters;
//! Kipf & Welling decay the first layer only).

pub mod adam;
pub mod sgd;

pub use adam::Adam;
pub use sgd::Sgd;

use crate::nn::Param;
use crate::Scalar;

/// An optimiser over a model's parameters, visited in a fixed order. `Send`: a training step
/// may run on another worker while the next mini-batch is built.
pub trait Optimizer<F: Scalar>: Send {
    /// Applies one update to the parameter at position `index` of the visiting order, in
    /// weight-decay group `group` (the layer index), from its accumulated gradient.
    fn update(&mut self, index: usize, group: usize, p: &mut Param<F>);
    /// Called once after every parameter of a step was updated.
    fn finish_step(&mut self) {}
}

/// The L2 weight decay of `group` in `decay` (groups past the end get 0).
pub(crate) fn decay_of(decay: &[f64], group: usize) -> f64 {
    decay.get(group).copied().unwrap_or(0.0)
}
