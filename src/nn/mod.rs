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
pub(crate) mod workspace;

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

use crate::kernels::MaskRng;
use ndarray::{Array2, ArrayView2, ArrayViewMut2};

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
    fn forward_train<'a, R: MaskRng + ?Sized>(
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

    /// One training pass as the trainer runs it: a forward pass as
    /// [`Model::forward_train`], then `loss(logits, dlogits)`, which writes ∂L/∂logits into
    /// `dlogits` (every entry) and returns whether to go on, then (if so) [`Model::backward`].
    ///
    /// A model may keep the pass's buffers in a workspace of its own and reuse them in the
    /// next pass (the [`Gcn`] and [`DeepGcn`] do: no allocation after the first pass), as long as `adj` and
    /// `x` are the same (or only `adj` changes and [`Model::train_pass_any_adj`] holds); call
    /// [`Model::release_workspace`] before passing other data. The default is
    /// [`Model::fresh_train_pass`].
    fn train_pass<R: MaskRng + ?Sized>(
        &mut self,
        adj: &NormAdj<F>,
        x: &Features<F>,
        rng: &mut R,
        par: Par,
        loss: &mut dyn FnMut(ArrayView2<'_, F>, ArrayViewMut2<'_, F>) -> bool,
    ) {
        self.fresh_train_pass(adj, x, rng, par, loss);
    }

    /// [`Model::train_pass`] on fresh buffers, for data that changes from pass to pass
    /// (DropEdge's graphs): [`Model::forward_train`], `loss`, then [`Model::backward`],
    /// allocating every time. Not meant to be overridden.
    fn fresh_train_pass<R: MaskRng + ?Sized>(
        &mut self,
        adj: &NormAdj<F>,
        x: &Features<F>,
        rng: &mut R,
        par: Par,
        loss: &mut dyn FnMut(ArrayView2<'_, F>, ArrayViewMut2<'_, F>) -> bool,
    ) {
        let (logits, cache) = self.forward_train(adj, x, rng, par);
        let mut dlogits = Array2::zeros(logits.dim());
        if loss(logits.view(), dlogits.view_mut()) {
            drop(logits);
            self.backward(adj, cache, dlogits, par);
        }
    }

    /// Whether [`Model::train_pass`] may be given a different `adj` (same nodes) at every call
    /// with the same `x`, as DropEdge does, and still give bit for bit what
    /// [`Model::fresh_train_pass`] gives: true when the workspace keeps nothing that depends
    /// on Â's sparsity pattern. The default, false, has the trainer take fresh buffers for
    /// DropEdge's passes.
    fn train_pass_any_adj(&self, _x: &Features<F>) -> bool {
        false
    }

    /// Inference as the trainer runs it: calls `f` on the logits of an evaluation pass (equal
    /// to [`Model::predict`]'s), possibly from reused buffers (see [`Model::train_pass`]).
    fn eval_pass(
        &mut self,
        adj: &NormAdj<F>,
        x: &Features<F>,
        par: Par,
        f: &mut dyn FnMut(ArrayView2<'_, F>),
    ) {
        f(self.predict(adj, x, par).view());
    }

    /// Frees the buffers kept by [`Model::train_pass`] and [`Model::eval_pass`] (the default
    /// keeps none).
    fn release_workspace(&mut self) {}

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

    /// [`Model::snapshot`] into `snap`, reusing its arrays where the shapes match (the default
    /// replaces it with a fresh snapshot).
    fn snapshot_into(&self, snap: &mut Vec<Array2<F>>) {
        *snap = self.snapshot();
    }

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
