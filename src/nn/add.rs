//! [`Add`]: Y = A + B, the residual connection (He et al., 2016; ResGCN in Li et al., ICCV 2019
//! and in DropEdge's study), forward and backward in one file: dA = dB = dY.
//!
//! In place: the output is written over A (input 0); B (input 1) is the skip path.

use ndarray::Zip;

use super::layer::{Bwd, Cx, Fwd, GradIo, Layer};
use crate::Scalar;

/// Y = A + B for two n × d inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Add {
    /// Width.
    pub dim: usize,
}

impl<F: Scalar> Layer<F> for Add {
    fn name(&self) -> &'static str {
        "add"
    }
    fn out_dim(&self) -> usize {
        self.dim
    }
    fn arity(&self) -> usize {
        2
    }
    fn in_place(&self) -> bool {
        true
    }
    fn forward(&mut self, _cx: &mut Cx<'_, F>, io: Fwd<'_, F>) {
        let Fwd { ins, out, .. } = io;
        let b = ins.get(0).dense();
        assert_eq!(out.dim(), b.dim(), "Add: the inputs' shapes differ");
        Zip::from(out).and(b).for_each(|o, &s| *o = *o + s);
    }
    fn backward(&mut self, _cx: &mut Cx<'_, F>, io: Bwd<'_, F>) {
        let GradIo::Separate { dout, mut din } = io.grad else {
            unreachable!("Add's gradient is separate")
        };
        for i in 0..2 {
            if let Some(mut d) = din.get(i) {
                d.assign(&dout);
            }
        }
    }
    fn clone_box(&self) -> Box<dyn Layer<F>> {
        Box::new(*self)
    }
}
