//! [`Add`]: Y = A + B, the residual connection (He et al., 2016; ResGCN in Li et al., ICCV 2019
//! and in DropEdge's study), forward and backward in one file: dA = dB = dY.
//!
//! In place: the output is written over A (input 0); B (input 1) is the skip path.

use ndarray::Zip;

use super::layer::{Bwd, Cx, Fwd, InputDesc, Layer, Spec};
use crate::{Result, Scalar};

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
    fn arity(&self) -> usize {
        2
    }
    fn spec(&self, _inputs: &[InputDesc], _n: usize) -> Spec {
        Spec {
            in_place: true,
            ..Spec::new(self.dim)
        }
    }
    fn forward(&mut self, _cx: &mut Cx<'_, F>, io: Fwd<'_, F>) -> Result<()> {
        let (ins, out) = (io.ins, io.out);
        let b = ins.get(0).dense();
        assert_eq!(out.dim(), b.dim(), "Add: the inputs' shapes differ");
        Zip::from(out).and(b).for_each(|o, &s| *o += s);
        Ok(())
    }
    fn backward(&mut self, _cx: &mut Cx<'_, F>, io: Bwd<'_, F>) -> Result<()> {
        let (dout, mut din) = io.grad.separate();
        for i in 0..2 {
            if let Some(mut d) = din.get(i) {
                d.assign(&dout);
            }
        }
        Ok(())
    }
    fn clone_box(&self) -> Box<dyn Layer<F>> {
        Box::new(*self)
    }
}

#[cfg(test)]
mod tests {
    use ndarray::array;

    use super::*;
    use crate::testing::harness::{isolated, random, rng, small_adjs, Harness, In};

    #[test]
    fn gradients_match_finite_differences() {
        let [(_, adj), _] = &small_adjs();
        let n = adj.n_nodes();
        let mut r = rng(1);
        let ins = [
            In::Dense(random(n, 3, &mut r)),
            In::Dense(random(n, 3, &mut r)),
        ];
        let g = random(n, 3, &mut r);
        let h = Harness::new(adj);
        for need in [[true, true], [true, false], [false, true]] {
            let (_, din) = h.grad_check(&mut Add { dim: 3 }, &ins, &need, &g, "add");
            for (d, k) in din.iter().zip(need) {
                assert_eq!(d.as_ref(), k.then_some(&g));
            }
        }
    }

    #[test]
    fn golden() {
        let adj = isolated::<f64>(2);
        let ins = [
            In::Dense(array![[1.0, 2.0], [3.0, 4.0]]),
            In::Dense(array![[0.5, -2.0], [1.0, 0.0]]),
        ];
        let (y, _) = Harness::new(&adj).forward(&mut Add { dim: 2 }, &ins);
        assert_eq!(y, array![[1.5, 0.0], [4.0, 4.0]]);
    }
}
