//! [`Scalar`]: the floating-point types the engine runs in (f32 for training, f64 for the
//! gradient checks), with their GEMM entry point.

use std::fmt::{Debug, Display};
use std::iter::Sum;
use std::ops::{AddAssign, DivAssign, MulAssign, SubAssign};

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
    /// Raw GEMM: `C ← α·A·B + β·C` for an `m×k` A, `k×n` B and `m×n` C given by pointers and
    /// element strides (matrixmultiply's `sgemm` / `dgemm`). β = 0 never reads C.
    ///
    /// # Safety
    /// The pointers and strides must describe live, in-bounds matrices of the given shapes,
    /// and C must not alias A or B.
    #[allow(unsafe_code)]
    unsafe fn gemm_raw(
        m: usize,
        k: usize,
        n: usize,
        alpha: Self,
        a: *const Self,
        rsa: isize,
        csa: isize,
        b: *const Self,
        rsb: isize,
        csb: isize,
        beta: Self,
        c: *mut Self,
        rsc: isize,
        csc: isize,
    );
}

macro_rules! impl_scalar {
    ($t:ty, $gemm:path) => {
        impl Scalar for $t {
            #[inline]
            fn from_f64_lossy(x: f64) -> Self {
                x as $t
            }
            #[inline]
            fn to_f64_lossless(self) -> f64 {
                self as f64
            }
            #[allow(unsafe_code)]
            #[inline]
            unsafe fn gemm_raw(
                m: usize,
                k: usize,
                n: usize,
                alpha: Self,
                a: *const Self,
                rsa: isize,
                csa: isize,
                b: *const Self,
                rsb: isize,
                csb: isize,
                beta: Self,
                c: *mut Self,
                rsc: isize,
                csc: isize,
            ) {
                // SAFETY: forwarded verbatim; the caller upholds `gemm_raw`'s contract, which is
                // matrixmultiply's.
                unsafe { $gemm(m, k, n, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc) }
            }
        }
    };
}
impl_scalar!(f32, matrixmultiply::sgemm);
impl_scalar!(f64, matrixmultiply::dgemm);
