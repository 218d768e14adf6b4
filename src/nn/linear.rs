//! [`Linear`]: a dense layer Y = X·W + 1·bᵀ, forward and backward in one file.
//!
//! Node-wise: y_i = Wᵀx_i + b. No graph is involved: this is the read-out or the input
//! projection of a model (GCNII's stem and head, JK's head, the residual projection, APPNP's
//! MLP, SGC's classifier). Backward, with G = dL/dY: dW = XᵀG, db = Gᵀ1, dX = G·Wᵀ (the sums over
//! nodes go through [`Sums`](crate::graph::Sums)). A sparse X (bag-of-words features)
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

use super::attrs::{Attrs, FromAttrs};
use super::layer::{Bwd, Cx, Fwd, InputDesc, Layer, Spec};
use super::param::Param;
use crate::kernels::{add_bias, gemm};
use crate::{ConfigError, Result, Scalar};

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

    /// Output width.
    pub fn out_dim(&self) -> usize {
        self.weight.value.ncols()
    }
}

impl<F: Scalar> FromAttrs<F> for Linear<F> {
    /// `in_dim`, `out_dim`, `bias`; zero parameters.
    fn from_attrs(a: &Attrs) -> Result<Self, ConfigError> {
        let [i, o] = a.shape(["in_dim", "out_dim"])?;
        let bias: bool = a.get("bias")?;
        Ok(Linear {
            weight: Param::zeros(i, o),
            bias: bias.then(|| Param::zeros(1, o)),
        })
    }
}

impl<F: Scalar> Layer<F> for Linear<F> {
    fn name(&self) -> &'static str {
        "linear"
    }

    fn hops(&self) -> Option<usize> {
        // (Row-wise: on its level's rows over a stack of blocks.)
        Some(0)
    }

    fn spec(&self, _inputs: &[InputDesc], _n: usize) -> Spec {
        Spec {
            keeps_input: true,
            ..Spec::new(self.out_dim()).reading(self.in_dim())
        }
    }

    fn forward(&mut self, cx: &mut Cx<'_, F>, io: Fwd<'_, F>) -> Result<()> {
        let (ins, mut out) = (io.ins, io.out);
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
            add_bias(out, b.value.row(0), cx.par);
        }
        Ok(())
    }

    fn backward(&mut self, cx: &mut Cx<'_, F>, io: Bwd<'_, F>) -> Result<()> {
        let (ins, grad) = (io.ins, io.grad);
        let (g, mut din) = grad.separate();
        if let Some(b) = &mut self.bias {
            cx.sums.col_sum(g, F::one(), b.grad.row_mut(0), cx.par);
        }
        ins.get(0)
            .t_times_acc(&cx.sums, g, self.weight.grad.view_mut(), cx.par);
        if let Some(dx) = din.get(0) {
            gemm(F::one(), g, self.weight.value.t(), F::zero(), dx, cx.par);
        }
        Ok(())
    }

    fn visit_params(&mut self, f: &mut dyn FnMut(&'static str, &mut Param<F>)) {
        f("weight", &mut self.weight);
        if let Some(b) = &mut self.bias {
            f("bias", b);
        }
    }

    fn attrs(&self) -> Option<Attrs> {
        Some(
            Attrs::new()
                .with("in_dim", self.in_dim())
                .with("out_dim", self.out_dim())
                .with("bias", self.bias.is_some()),
        )
    }

    fn clone_box(&self) -> Box<dyn Layer<F>> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use ndarray::{array, Array2};

    use super::*;
    use crate::testing::harness::{isolated, params, random, rng, small_adjs, Harness, In};

    fn layer(a: usize, c: usize, bias: bool, seed: u64) -> Linear<f64> {
        let mut r = rng(seed);
        let mut l = Linear::new(a, c, bias, &mut r);
        if let Some(b) = &mut l.bias {
            b.value = random(1, c, &mut r);
        }
        l
    }

    #[test]
    fn dense_input_gradients_match_finite_differences() {
        let [(_, adj), _] = &small_adjs();
        let n = adj.n_nodes();
        for bias in [false, true] {
            for (a, c) in [(3, 5), (5, 3)] {
                let mut r = rng(1);
                let x = random(n, a, &mut r);
                let g = random(n, c, &mut r);
                let mut l = layer(a, c, bias, 2);
                let what = format!("bias {bias}, {a}→{c}");
                Harness::new(adj).grad_check(&mut l, &[In::Dense(x)], &[true], &g, &what);
            }
        }
    }

    #[test]
    fn sparse_input_weight_gradients_match_finite_differences_and_dense() {
        let [(_, adj), _] = &small_adjs();
        let n = adj.n_nodes();
        let mut r = rng(3);
        let mut x = random(n, 6, &mut r);
        x.mapv_inplace(|v| if v.abs() < 0.6 { 0.0 } else { v });
        x.row_mut(2).fill(0.0);
        let g = random(n, 4, &mut r);
        let h = Harness::new(adj);
        let mut res = Vec::new();
        for input in [In::sparse(&x), In::Dense(x.clone())] {
            let mut l = layer(6, 4, true, 5);
            let (y, _) = h.grad_check(&mut l, &[input], &[false], &g, "sparse");
            res.push((y, params(&mut l, true)));
        }
        let close = |a: &Array2<f64>, b: &Array2<f64>| (a - b).iter().all(|v| v.abs() < 1e-12);
        assert!(close(&res[0].0, &res[1].0));
        for ((_, a), (_, b)) in res[0].1.iter().zip(&res[1].1) {
            assert!(close(a, b));
        }
    }

    #[test]
    fn golden() {
        // y = [1, 2]·[[1, −1], [3, 0.5]] + [0.5, 0] = [7.5, 0]; for G = [1, 2]: dW = xᵀG,
        // db = G, dx = G·Wᵀ = [1 − 2, 3 + 1] = [−1, 4]. (One node: a graph of one isolated node.)
        let adj = isolated::<f64>(1);
        let mut l = Linear {
            weight: Param::new(array![[1.0, -1.0], [3.0, 0.5]]),
            bias: Some(Param::new(array![[0.5, 0.0]])),
        };
        let x = In::Dense(array![[1.0, 2.0]]);
        let (y, din) = Harness::new(&adj).run(&mut l, &[x], &array![[1.0, 2.0]], &[true]);
        assert_eq!(y, array![[7.5, 0.0]]);
        assert_eq!(l.weight.grad, array![[1.0, 2.0], [2.0, 4.0]]);
        assert_eq!(l.bias.as_ref().unwrap().grad, array![[1.0, 2.0]]);
        assert_eq!(din[0].as_ref().unwrap(), array![[-1.0, 4.0]]);
    }
}
