//! [`Param`]: a trainable matrix with its gradient; Glorot initialisation.

use ndarray::Array2;
use rand::{Rng, RngExt};

use crate::Scalar;

/// A trainable parameter (a bias is a 1 × out_dim matrix) and its gradient buffer.
#[derive(Debug, Clone, PartialEq)]
pub struct Param<F> {
    /// The value.
    pub value: Array2<F>,
    /// dL/dvalue, accumulated by `backward` (zero it with [`Param::zero_grad`]).
    pub grad: Array2<F>,
}

impl<F: Scalar> Param<F> {
    /// A parameter with the given value and a zero gradient.
    pub fn new(value: Array2<F>) -> Self {
        let grad = Array2::zeros(value.dim());
        Param { value, grad }
    }
    /// All zeros.
    pub fn zeros(rows: usize, cols: usize) -> Self {
        Param::new(Array2::zeros((rows, cols)))
    }
    /// Glorot (Xavier) uniform: U(−r, r) with r = √(6 / (rows + cols)), drawn row-major.
    pub fn glorot<R: Rng + ?Sized>(rows: usize, cols: usize, rng: &mut R) -> Self {
        let r = (6.0 / (rows + cols).max(1) as f64).sqrt();
        Param::new(Array2::from_shape_simple_fn((rows, cols), || {
            F::from_f64_lossy(rng.random_range(-r..r))
        }))
    }
    /// Sets the gradient to zero.
    pub fn zero_grad(&mut self) {
        self.grad.fill(F::zero());
    }
    /// Number of scalars.
    pub fn len(&self) -> usize {
        self.value.len()
    }
    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.value.is_empty()
    }
}
