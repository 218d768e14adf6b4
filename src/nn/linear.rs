//! `Linear`: a dense layer Y = X·W + 1·bᵀ (forward and backward).
//!
//! Node-wise: y_i = Wᵀx_i + b. No graph is involved: this is the read-out (or input projection)
//! of a model, e.g. the classifier after [`JumpingKnowledge`](super::jk::JumpingKnowledge).
//!
//! Backward, with G = dL/dY: dW = XᵀG, db = Gᵀ1, dX = G·Wᵀ. A sparse X (bag-of-words
//! features) uses the sparse kernels for X·W and Xᵀ·G, through [`Input`]; dX is then never
//! needed (it is the model's input). The derivation is in `docs/MATH.md`.
//!
//! # Shapes
//! | | shape |
//! |---|---|
//! | X | n × in_dim (dense or sparse) |
//! | W | in_dim × out_dim |
//! | b | 1 × out_dim |
//! | Y, G | n × out_dim |

use ndarray::{Array2, ArrayView2, ArrayViewMut2};
use rand::Rng;

use super::gcn::Input;
use super::param::Param;
use super::workspace::InRef;
use crate::kernels::{add_bias, col_sum, gemm};
use crate::{Par, Scalar};

/// A dense (fully connected) layer, Y = X·W + 1·bᵀ.
///
/// The caller keeps the input X for [`Linear::backward`]: no cache is returned.
#[derive(Debug, Clone, PartialEq)]
pub struct Linear<F> {
    /// W: in_dim × out_dim, Glorot-initialised.
    pub weight: Param<F>,
    /// b: 1 × out_dim, zero-initialised (`None` without bias).
    pub bias: Option<Param<F>>,
}

impl<F: Scalar> Linear<F> {
    /// A layer with Glorot weights drawn from `rng` (row-major, as [`GcnConv::new`] draws them)
    /// and a zero bias when `bias`.
    ///
    /// [`GcnConv::new`]: super::gcn::GcnConv::new
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

    /// Y = X·W + 1·bᵀ (sparse X through the sparse kernel).
    ///
    /// # Shapes
    /// `x: n × in_dim` → `n × out_dim`.
    ///
    /// # Panics
    /// If `x` has not `in_dim` columns.
    #[track_caller]
    pub fn forward(&self, x: &Input<'_, F>, par: Par) -> Array2<F> {
        assert!(
            x.ncols() == self.in_dim(),
            "Linear::forward: input {}×{}, expected {}×{} (weight {}×{})",
            x.nrows(),
            x.ncols(),
            x.nrows(),
            self.in_dim(),
            self.in_dim(),
            self.out_dim()
        );
        let mut y = Array2::zeros((x.nrows(), self.out_dim()));
        self.forward_into(x.as_in(), y.view_mut(), par);
        y
    }

    /// [`Linear::forward`] into `y` (n × out_dim): allocates nothing.
    ///
    /// # Panics
    /// If the shapes do not agree.
    #[track_caller]
    pub(crate) fn forward_into(&self, x: InRef<'_, F>, mut y: ArrayViewMut2<'_, F>, par: Par) {
        x.times(self.weight.value.view(), y.view_mut(), par);
        if let Some(b) = &self.bias {
            add_bias(y, b.value.row(0));
        }
    }

    /// Adds dL/dW = XᵀG and dL/db = Gᵀ1 into the parameters' gradients and returns
    /// dL/dX = G·Wᵀ when `need_dx`. `x` must be the input given to [`Linear::forward`].
    ///
    /// # Shapes
    /// `x: n × in_dim`, `g: n × out_dim` → `n × in_dim`.
    ///
    /// # Panics
    /// If `x` is not n × in_dim or `g` not n × out_dim, or if `need_dx` with a sparse `x`.
    #[track_caller]
    pub fn backward(
        &mut self,
        x: &Input<'_, F>,
        g: ArrayView2<'_, F>,
        need_dx: bool,
        par: Par,
    ) -> Option<Array2<F>> {
        let n = x.nrows();
        assert!(
            x.ncols() == self.in_dim() && g.dim() == (n, self.out_dim()),
            "Linear::backward: input {}×{}, G {}×{}, expected {n}×{} and {n}×{}",
            n,
            x.ncols(),
            g.nrows(),
            g.ncols(),
            self.in_dim(),
            self.out_dim()
        );
        assert!(
            !(need_dx && matches!(x, Input::Sparse(_))),
            "Linear::backward: no dX for a sparse input"
        );
        let mut dx = need_dx.then(|| Array2::zeros((n, self.in_dim())));
        self.backward_into(x.as_in(), g, dx.as_mut().map(|d| d.view_mut()), par);
        dx
    }

    /// [`Linear::backward`] with dL/dX written into `dx` when given: allocates nothing.
    ///
    /// # Panics
    /// If the shapes do not agree.
    #[track_caller]
    pub(crate) fn backward_into(
        &mut self,
        x: InRef<'_, F>,
        g: ArrayView2<'_, F>,
        dx: Option<ArrayViewMut2<'_, F>>,
        par: Par,
    ) {
        if let Some(b) = &mut self.bias {
            col_sum(g, F::one(), b.grad.row_mut(0));
        }
        x.t_times_acc(g, self.weight.grad.view_mut(), par);
        if let Some(dx) = dx {
            gemm(F::one(), g, self.weight.value.t(), F::zero(), dx, par);
        }
    }

    /// Calls `f` on each parameter (weight, then bias).
    pub fn visit_params(&mut self, f: &mut dyn FnMut(&mut Param<F>)) {
        f(&mut self.weight);
        if let Some(b) = &mut self.bias {
            f(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use ndarray::{Array2, CowArray};
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::graph::Features;
    use crate::nn::model::input_of;
    use crate::testing::{max_rel_err, numerical_grad};

    fn random(rows: usize, cols: usize, rng: &mut ChaCha8Rng) -> Array2<f64> {
        Array2::from_shape_simple_fn((rows, cols), || rng.random_range(-1.0..1.0))
    }

    /// L = Σ R ⊙ Y as a function of (W, b, X) flattened.
    fn loss(bias: bool, theta: &[f64], dims: (usize, usize, usize), r: &Array2<f64>) -> f64 {
        let (n, a, c) = dims;
        let w = Array2::from_shape_vec((a, c), theta[..a * c].to_vec()).unwrap();
        let mut off = a * c;
        let b = bias.then(|| {
            off += c;
            Array2::from_shape_vec((1, c), theta[a * c..a * c + c].to_vec()).unwrap()
        });
        let x = Array2::from_shape_vec((n, a), theta[off..].to_vec()).unwrap();
        let layer = Linear {
            weight: Param::new(w),
            bias: b.map(Param::new),
        };
        let y = layer.forward(&Input::Dense(CowArray::from(x)), Par::Seq);
        (&y * r).sum()
    }

    fn check_dense(bias: bool, a: usize, c: usize) {
        let n = 7;
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let mut layer = Linear::<f64>::new(a, c, bias, &mut rng);
        if let Some(b) = &mut layer.bias {
            b.value = random(1, c, &mut rng);
        }
        let x = random(n, a, &mut rng);
        let r = random(n, c, &mut rng);
        let input = Input::Dense(CowArray::from(x.view()));
        let y = layer.forward(&input, Par::Seq);
        assert_eq!(y.dim(), (n, c));
        let dx = layer.backward(&input, r.view(), true, Par::Seq).unwrap();
        let mut analytic: Vec<f64> = layer.weight.grad.iter().copied().collect();
        let mut theta: Vec<f64> = layer.weight.value.iter().copied().collect();
        if let Some(b) = &layer.bias {
            analytic.extend(b.grad.iter());
            theta.extend(b.value.iter());
        }
        analytic.extend(dx.iter());
        theta.extend(x.iter());
        let numerical = numerical_grad(|t| loss(bias, t, (n, a, c), &r), &theta, 1e-6);
        let (err, at) = max_rel_err(&analytic, &numerical);
        assert!(err < 1e-6, "bias={bias} {a}->{c}: rel err {err} at {at}");
    }

    #[test]
    fn linear_backward_matches_finite_differences() {
        for bias in [false, true] {
            for (a, c) in [(3, 5), (5, 3), (4, 1)] {
                check_dense(bias, a, c);
            }
        }
    }

    #[test]
    fn linear_sparse_input_weight_grad_matches_finite_differences() {
        let (n, a, c) = (9, 6, 4);
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut x = random(n, a, &mut rng);
        x.mapv_inplace(|v| if v.abs() < 0.6 { 0.0 } else { v });
        x.row_mut(3).fill(0.0); // an empty row
        let dense = Features::Dense(x.clone());
        let sparse = Features::Dense(x.clone()).into_sparse_if(1.0);
        assert!(sparse.is_sparse());
        let r = random(n, c, &mut rng);
        let base = Linear::<f64>::new(a, c, true, &mut rng);

        // Sparse X: dW by finite differences of the sparse forward.
        let mut l = base.clone();
        let xs = input_of(&sparse);
        let ys = l.forward(&xs, Par::Seq);
        assert!(l.backward(&xs, r.view(), false, Par::Seq).is_none());
        let theta: Vec<f64> = base.weight.value.iter().copied().collect();
        let numerical = numerical_grad(
            |t| {
                let layer = Linear {
                    weight: Param::new(Array2::from_shape_vec((a, c), t.to_vec()).unwrap()),
                    bias: base.bias.clone(),
                };
                (&layer.forward(&xs, Par::Seq) * &r).sum()
            },
            &theta,
            1e-6,
        );
        let analytic: Vec<f64> = l.weight.grad.iter().copied().collect();
        let (err, at) = max_rel_err(&analytic, &numerical);
        assert!(err < 1e-6, "sparse dW: rel err {err} at {at}");

        // Same output and gradients as the dense copy of X.
        let mut ld = base.clone();
        let xd = input_of(&dense);
        let yd = ld.forward(&xd, Par::Seq);
        ld.backward(&xd, r.view(), false, Par::Seq);
        assert!((&ys - &yd).iter().all(|d| d.abs() < 1e-12));
        assert!((&l.weight.grad - &ld.weight.grad)
            .iter()
            .all(|d| d.abs() < 1e-12));
        let (bs, bd) = (l.bias.unwrap().grad, ld.bias.unwrap().grad);
        assert!((&bs - &bd).iter().all(|d| d.abs() < 1e-12));
    }

    #[test]
    fn linear_gradients_accumulate_and_par_matches_seq() {
        let mut rng = ChaCha8Rng::seed_from_u64(8);
        let x = random(300, 17, &mut rng);
        let g = random(300, 5, &mut rng);
        let base = Linear::<f64>::new(17, 5, true, &mut rng);
        let input = Input::Dense(CowArray::from(x.view()));
        let mut seq = base.clone();
        let mut par = base.clone();
        let y_seq = seq.forward(&input, Par::Seq);
        let y_par = par.forward(&input, Par::Rayon);
        assert_eq!(y_seq, y_par);
        let dx_seq = seq.backward(&input, g.view(), true, Par::Seq).unwrap();
        let dx_par = par.backward(&input, g.view(), true, Par::Rayon).unwrap();
        assert_eq!(dx_seq, dx_par);
        assert_eq!(seq.weight.grad, par.weight.grad);
        // A second backward adds the same gradient again.
        let once = seq.clone();
        seq.backward(&input, g.view(), false, Par::Seq);
        let twice = &once.weight.grad * 2.0;
        assert!((&seq.weight.grad - &twice).iter().all(|d| d.abs() < 1e-12));
        let mut names = Vec::new();
        seq.visit_params(&mut |p| names.push(p.value.dim()));
        assert_eq!(names, vec![(17, 5), (1, 5)]);
    }

    #[test]
    #[should_panic(expected = "no dX for a sparse input")]
    fn linear_sparse_input_dx_panics() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let x = Features::Dense(Array2::<f64>::eye(4)).into_sparse_if(1.0);
        let mut l = Linear::<f64>::new(4, 2, false, &mut rng);
        let input = input_of(&x);
        let _ = l.forward(&input, Par::Seq);
        let g = Array2::<f64>::zeros((4, 2));
        l.backward(&input, g.view(), true, Par::Seq);
    }

    #[test]
    #[should_panic(expected = "Linear::forward: input 4×3, expected 4×5")]
    fn linear_forward_wrong_width_panics() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let l = Linear::<f64>::new(5, 2, false, &mut rng);
        let x = Array2::<f64>::zeros((4, 3));
        let _ = l.forward(&Input::Dense(CowArray::from(x.view())), Par::Seq);
    }
}
