//! [`SgcPropagate`]: Y = Â^K·X, the feature propagation of SGC (Wu et al., ICML 2019, "Simplifying
//! Graph Convolutional Networks", <https://arxiv.org/abs/1902.07153>), forward and backward in one
//! file.
//!
//! SGC is logits = Â^K X W + b: this layer followed by a [`Linear`](super::Linear). The layer has
//! no parameters and draws no mask, so on the model's fixed input ([`Spec::constant`](super::layer::Spec::constant)) the stack
//! computes Â^K X once and keeps it: training then costs one dense product per epoch.
//!
//! Backward (for completeness: the stack never asks for it when the input is the features):
//! dX = (Âᵀ)^K · dY.
//!
//! # Shapes
//! X, Y: n × d (X dense or sparse; Y dense).

use super::layer::{view, view_mut, Bwd, Cx, Fwd, InputDesc, Layer, Req, Spec, Value};
use crate::graph::Caps;
use crate::{Result, Scalar};

/// Y = Â^K·X (K ≥ 1) on inputs of width `dim`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SgcPropagate {
    /// Propagation steps K (SGC: 2).
    pub k: usize,
    /// Width d.
    pub dim: usize,
}

impl<F: Scalar> Layer<F> for SgcPropagate {
    fn name(&self) -> &'static str {
        "sgc_propagate"
    }
    fn spec(&self, inputs: &[InputDesc], n: usize) -> Spec {
        Spec {
            scratch: Req::f(n * self.dim),
            constant: true,
            needs: Caps {
                sparse_product: inputs.first().is_some_and(|i| i.sparse),
                ..Caps::default()
            },
            ..Spec::new(self.dim)
        }
    }

    fn forward(&mut self, cx: &mut Cx<'_, F>, io: Fwd<'_, F>) -> Result<()> {
        let (ins, mut out, mut scratch) = (io.ins, io.out, io.scratch);
        let (n, d, par) = (cx.n(), self.dim, cx.par);
        let tmp = scratch.take_f(n * d);
        // Steps alternate between `out` and the scratch, so that the last one writes `out`.
        let mut in_out = self.k % 2 == 1;
        match ins.get(0) {
            Value::Dense(x) => {
                let first = if in_out {
                    out.view_mut()
                } else {
                    view_mut(tmp, (n, d))
                };
                cx.adj.a_times(F::one(), x, F::zero(), first, par);
            }
            Value::Sparse(x, _) => {
                // Â·X once as a sparse product, then dense.
                let mut s = cx.adj.a_times_sparse_pattern(x)?;
                let mut acc = vec![F::zero(); d];
                cx.adj.a_times_sparse(x, &mut s, &mut acc)?;
                let mut first = if in_out {
                    out.view_mut()
                } else {
                    view_mut(tmp, (n, d))
                };
                first.fill(F::zero());
                for (i, row) in s.x().outer_iterator().enumerate() {
                    for (j, &v) in row.iter() {
                        first[[i, j]] = v;
                    }
                }
            }
        }
        for _ in 1..self.k {
            if in_out {
                cx.adj
                    .a_times(F::one(), out.view(), F::zero(), view_mut(tmp, (n, d)), par);
            } else {
                cx.adj
                    .a_times(F::one(), view(tmp, (n, d)), F::zero(), out.view_mut(), par);
            }
            in_out = !in_out;
        }
        Ok(())
    }
    fn backward(&mut self, cx: &mut Cx<'_, F>, io: Bwd<'_, F>) -> Result<()> {
        let (mut scratch, grad) = (io.scratch, io.grad);
        let (dout, mut din) = grad.separate();
        let Some(mut dx) = din.get(0) else {
            return Ok(());
        };
        let (n, d, par) = (cx.n(), self.dim, cx.par);
        let tmp = scratch.take_f(n * d);
        let mut in_dx = self.k % 2 == 1;
        let first = if in_dx {
            dx.view_mut()
        } else {
            view_mut(tmp, (n, d))
        };
        cx.adj.at_times(F::one(), dout, F::zero(), first, par);
        for _ in 1..self.k {
            if in_dx {
                cx.adj
                    .at_times(F::one(), dx.view(), F::zero(), view_mut(tmp, (n, d)), par);
            } else {
                cx.adj
                    .at_times(F::one(), view(tmp, (n, d)), F::zero(), dx.view_mut(), par);
            }
            in_dx = !in_dx;
        }
        Ok(())
    }
    fn clone_box(&self) -> Box<dyn Layer<F>> {
        Box::new(*self)
    }
}

#[cfg(test)]
mod tests {
    use ndarray::Array2;

    use super::*;
    use crate::testing::harness::{random, rng, small_adjs, Harness, In};

    fn close(a: &Array2<f64>, b: &Array2<f64>) -> bool {
        a.dim() == b.dim() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12)
    }

    #[test]
    fn forward_and_backward_are_dense_matrix_powers() {
        // Y = Â^K X and dX = (Âᵀ)^K G, with Â dense; a sparse X gives the same Y.
        for (name, adj) in &small_adjs() {
            let n = adj.n_nodes();
            let a = adj.a().to_dense();
            let mut r = rng(1);
            let mut x = random(n, 3, &mut r);
            x.mapv_inplace(|v| if v.abs() < 0.4 { 0.0 } else { v });
            let g = random(n, 3, &mut r);
            for k in 1..=3 {
                let mut l = SgcPropagate { k, dim: 3 };
                let (mut want_y, mut want_dx) = (x.clone(), g.clone());
                for _ in 0..k {
                    want_y = a.dot(&want_y);
                    want_dx = a.t().dot(&want_dx);
                }
                let h = Harness::new(adj);
                let what = format!("{name}, K = {k}");
                let (y, dx) = h.grad_check(&mut l, &[In::Dense(x.clone())], &[true], &g, &what);
                assert!(close(&y, &want_y), "{what}: {y} vs {want_y}");
                assert!(close(dx[0].as_ref().unwrap(), &want_dx), "{what}: dX");
                let (ys, _) = h.forward(&mut l, &[In::sparse(&x)]);
                assert!(close(&ys, &want_y), "{what}: sparse X");
            }
        }
    }
}
