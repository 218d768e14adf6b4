//! Layers, the model and the loss. Forward and backward of each layer sit in one file.

pub mod deep;
pub mod dropout;
pub mod gcn;
pub mod gcnii;
pub mod jk;
pub mod linear;
pub mod loss;
pub mod model;
pub mod norm;
pub mod param;

pub use deep::{DeepConfig, DeepGcn, NormKind, Variant};
pub use gcn::{GcnConv, Input, Order};
pub use jk::JkMode;
pub use model::{Gcn, GcnConfig};
pub use param::Param;

/// Training (dropout on) or evaluation (dropout off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Dropout on.
    Train,
    /// Dropout off.
    Eval,
}

use ndarray::{Array2, ArrayView2};
use rand::Rng;

use crate::graph::{Features, NormAdj};
use crate::{Par, Scalar};

/// What the trainer needs from a model: a training pass with its backward, inference, and its
/// parameters in a fixed order with their weight-decay groups.
pub trait Model<F: Scalar>: Send {
    /// What backward needs from a training pass (borrowing the features for `'a`).
    type Cache<'a>;

    /// Called once before training (e.g. to cache ÂX); the default does nothing.
    fn prepare(&mut self, _adj: &NormAdj<F>, _x: &Features<F>, _par: Par) {}

    /// A training pass (dropout on, masks from `rng`): the logits and the cache for backward.
    fn forward_train<'a, R: Rng + ?Sized>(
        &mut self,
        adj: &NormAdj<F>,
        x: &'a Features<F>,
        rng: &mut R,
        par: Par,
    ) -> (Array2<F>, Self::Cache<'a>);

    /// Backward from ∂L/∂logits: **adds** every parameter's gradient.
    fn backward(&mut self, adj: &NormAdj<F>, cache: Self::Cache<'_>, dlogits: Array2<F>, par: Par);

    /// Inference (dropout off): the logits.
    fn predict(&self, adj: &NormAdj<F>, x: &Features<F>, par: Par) -> Array2<F>;

    /// Calls `f(group, param)` on every parameter in a fixed order; `group` selects the weight
    /// decay.
    fn visit_params(&mut self, f: &mut dyn FnMut(usize, &mut Param<F>));

    /// Number of weight-decay groups.
    fn n_groups(&self) -> usize;

    /// Zeroes every gradient.
    fn zero_grad(&mut self) {
        self.visit_params(&mut |_, p| p.zero_grad());
    }

    /// Copies of every value [`Model::restore`] needs (parameters, running statistics).
    fn snapshot(&self) -> Vec<Array2<F>>;

    /// Restores values taken by [`Model::snapshot`].
    fn restore(&mut self, snap: &[Array2<F>]);

    /// Calls `f(l, H)` on each layer's representation of an evaluation pass (for
    /// oversmoothing metrics); the default visits nothing.
    fn visit_representations(
        &self,
        _adj: &NormAdj<F>,
        _x: &Features<F>,
        _par: Par,
        _f: &mut dyn FnMut(usize, ArrayView2<'_, F>),
    ) {
    }

    /// The resolved order of each GCN layer.
    fn orders(&self) -> Vec<Order> {
        Vec::new()
    }
}
