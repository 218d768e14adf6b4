//! [`Scalar`]: the floating-point types the engine runs in (f32 for training, f64 for the
//! gradient checks), which GEMM routine each uses ([`ScalarKind`]), and the exact accumulator
//! of sums of each ([`exact`]). A leaf: it imports nothing from the crate.

pub mod exact;

use std::fmt::{Debug, Display};
use std::iter::Sum;
use std::ops::{AddAssign, DivAssign, MulAssign, SubAssign};

/// Which floating-point type a [`Scalar`] is, so that kernels can pick the routine for it
/// (`sgemm` or `dgemm`) without a type-specific method on the trait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarKind {
    /// `f32`: matrixmultiply's `sgemm`.
    F32,
    /// `f64`: matrixmultiply's `dgemm`.
    F64,
}

/// f32 or f64.
pub trait Scalar:
    num_traits::Float
    + num_traits::FromPrimitive
    + ndarray::LinalgScalar
    + ndarray::ScalarOperand
    + sprs::MulAcc
    + Send
    + Sync
    + Debug
    + Display
    + Default
    + Sum
    + AddAssign
    + SubAssign
    + MulAssign
    + DivAssign
    + 'static
{
    /// Converts from f64 (rounding for f32).
    fn from_f64_lossy(x: f64) -> Self;
    /// Converts to f64.
    fn to_f64_lossless(self) -> f64;
    /// Which GEMM routine [`kernels::gemm`](crate::kernels::gemm()) calls for this type
    /// (matrixmultiply's `sgemm` or `dgemm`). It must name the type itself: `kernels::gemm`
    /// checks it and panics otherwise.
    const KIND: ScalarKind;
    /// The exact accumulator of sums of this type's values ([`exact`]): the 10-digit format
    /// for `f32`, the 68-digit one for `f64`.
    type Exact: exact::Accumulator;
    /// Adds this value exactly into `acc` (for `f32`, straight from its bits).
    fn add_to(self, acc: &mut Self::Exact);
}

macro_rules! impl_scalar {
    ($t:ty, $kind:ident, $exact:ty, $add:ident) => {
        impl Scalar for $t {
            const KIND: ScalarKind = ScalarKind::$kind;
            type Exact = $exact;
            #[inline]
            fn add_to(self, acc: &mut Self::Exact) {
                acc.$add(self);
            }
            #[inline]
            fn from_f64_lossy(x: f64) -> Self {
                x as $t
            }
            #[inline]
            fn to_f64_lossless(self) -> f64 {
                self as f64
            }
        }
    };
}
impl_scalar!(f32, F32, exact::ExactSum32, add_f32);
impl_scalar!(f64, F64, exact::ExactSum, add);
