//! [`Linear`]: a dense layer Y = X·W + 1·bᵀ, forward and backward in one file.
//!
//! Node-wise: y_i = Wᵀx_i + b. No graph is involved: this is the read-out or the input
//! projection of a model (GCNII's stem and head, JK's head, the residual projection, APPNP's
//! MLP, SGC's classifier). Backward, with G = dL/dY: dW = XᵀG, db = Gᵀ1, dX = G·Wᵀ (the sums over
//! nodes go through [`Propagate`](crate::graph::Propagate)). A sparse X (bag-of-words features)
//! uses the sparse kernels for X·W and Xᵀ·G; dX is then never needed (it is the model's input).
//! The derivation is in `docs/MATH.md`.
//!
//! # Shapes
//! | | shape |
//! |---|---|
//! | X | n × in_dim (dense or sparse) |
//! | W | in_dim × out_dim |
//! | b | 1 × out_dim |
//! | Y, G | n × out_dim |

use rand::Rng;

use super::layer::{Bwd, Cx, Fwd, GradIo, Layer};
use super::param::Param;
use crate::kernels::{add_bias, gemm};
use crate::Scalar;

/// A dense (fully connected) layer, Y = X·W + 1·bᵀ.
#[derive(Debug, Clone, PartialEq)]
pub struct Linear<F> {
    /// W: in_dim × out_dim, Glorot-initialised.
    pub weight: Param<F>,
    /// b: 1 × out_dim, zero-initialised (`None` without bias).
    pub bias: Option<Param<F>>,
}

impl<F: Scalar> Linear<F> {
    /// A layer with Glorot weights drawn from `rng` (row-major) and a zero bias when `bias`.
    pub fn new<R: Rng + ?Sized>(in_dim: usize, out_dim: usize, bias: bool, rng: &mut R) -> Self {
        let weight = Param::glorot(in_dim, out_dim, rng);
        let bias = bias.then(|| Param::zeros(1, out_dim));
        Linear { weight, bias }
    }

    /// Input width.
    pub fn in_dim(&self) -> usize {
        self.weight.value.nrows()
    }
}

impl<F: Scalar> Layer<F> for Linear<F> {
    fn name(&self) -> &'static str {
        "linear"
    }

    fn out_dim(&self) -> usize {
        self.weight.value.ncols()
    }

    fn keeps_input(&self) -> bool {
        true
    }

    fn forward(&mut self, cx: &mut Cx<'_, F>, io: Fwd<'_, F>) {
        let Fwd { ins, mut out, .. } = io;
        let x = ins.get(0);
        assert!(
            x.ncols() == self.in_dim() && out.dim() == (x.nrows(), self.out_dim()),
            "Linear::forward: input {}×{}, output {:?}, weight {:?}",
            x.nrows(),
            x.ncols(),
            out.dim(),
            self.weight.value.dim()
        );
        x.times(self.weight.value.view(), out.view_mut(), cx.par);
        if let Some(b) = &self.bias {
            add_bias(out, b.value.row(0));
        }
    }

    fn backward(&mut self, cx: &mut Cx<'_, F>, io: Bwd<'_, F>) {
        let Bwd { ins, grad, .. } = io;
        let GradIo::Separate { dout: g, mut din } = grad else {
            unreachable!("Linear's gradient is separate")
        };
        if let Some(b) = &mut self.bias {
            cx.adj.col_sum(g, F::one(), b.grad.row_mut(0));
        }
        ins.get(0)
            .t_times_acc(cx.adj, g, self.weight.grad.view_mut(), cx.par);
        if let Some(dx) = din.get(0) {
            gemm(F::one(), g, self.weight.value.t(), F::zero(), dx, cx.par);
        }
    }

    fn visit_params(&mut self, f: &mut dyn FnMut(&'static str, &mut Param<F>)) {
        f("weight", &mut self.weight);
        if let Some(b) = &mut self.bias {
            f("bias", b);
        }
    }

    fn clone_box(&self) -> Box<dyn Layer<F>> {
        Box::new(self.clone())
    }
}
