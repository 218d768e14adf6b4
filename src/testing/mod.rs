//! Helpers for gradient checks and numeric comparisons (feature `testing`), used by this crate's
//! tests and by crates that add layers: [`harness::Harness`] runs one layer outside the stack on
//! buffers of its [`Spec`](crate::nn::layer::Spec) and checks its gradients against central
//! differences in f64 (`docs/MATH.md` §12); small graphs to run it on ([`harness::small_adjs`]).
//! `examples/custom_layer` is a crate outside this one that checks its own layer with it.
//!
//! Everything here panics on failure: it is for tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod harness;
pub mod ranks;

pub use harness::{small_adjs, Harness, In};
pub use ranks::ThreadRanks;

/// |a − n| / max(1, |a|, |n|): the relative error of the gradient checks (`docs/MATH.md`).
pub fn rel_err(a: f64, n: f64) -> f64 {
    (a - n).abs() / 1f64.max(a.abs()).max(n.abs())
}

/// Central differences of `loss` with respect to each coordinate of `theta`, step `h`:
/// (L(θ + h·e_k) − L(θ − h·e_k)) / 2h. `loss` receives the perturbed vector.
pub fn numerical_grad(mut loss: impl FnMut(&[f64]) -> f64, theta: &[f64], h: f64) -> Vec<f64> {
    let mut t = theta.to_vec();
    (0..t.len())
        .map(|k| {
            let orig = t[k];
            t[k] = orig + h;
            let lp = loss(&t);
            t[k] = orig - h;
            let lm = loss(&t);
            t[k] = orig;
            (lp - lm) / (2.0 * h)
        })
        .collect()
}

/// The largest [`rel_err`] between an analytic and a numerical gradient, with its index.
///
/// # Panics
/// If the lengths differ.
pub fn max_rel_err(analytic: &[f64], numerical: &[f64]) -> (f64, usize) {
    assert_eq!(analytic.len(), numerical.len(), "gradient lengths differ");
    analytic
        .iter()
        .zip(numerical)
        .map(|(&a, &n)| rel_err(a, n))
        .enumerate()
        .fold(
            (0.0, 0),
            |(m, i), (k, e)| if e > m || e.is_nan() { (e, k) } else { (m, i) },
        )
}
