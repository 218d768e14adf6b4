//! The packed GEMM's operands, for the GCN's tall and skinny products (`kernels::gemm`'s fast
//! path): `out ← A·B + β·out` for f32 `A` with contiguous rows (H or G, up to 10⁸ rows, read in
//! place) and `B` packed once per call into panels of 16, 32 or 48 columns (W or Wᵀ, at most a
//! few MiB, read from L2 by every row block). The micro-kernels that read them ([`Isa`]: 24
//! AVX-512 accumulators, 24 × 16, 12 × 32 or 8 × 48, or 12 AVX2 ones, 6 × 16; chosen at run
//! time, other CPUs take matrixmultiply) are `kernels::raw::gemm_packed`, the crate's only
//! `unsafe` code; this file is safe.
//!
//! # The same bits as matrixmultiply
//! Each element is computed exactly as matrixmultiply's `sgemm` computes it with its FMA
//! kernels, for α = 1 (the only α this path takes): over `k` in chunks of [`KC`] (its `KC`),
//! each chunk a chain of fused multiply-adds `acc ← a_ip·b_pj + acc` from `acc = 0` in the
//! order of `p`; the first chunk stored as `fma(1, acc, β·c)` (`fma(1, acc, 0)` for β = 0,
//! `c` never read), every later one as `fma(1, acc, c)`. Tested bit for bit against
//! matrixmultiply in `raw::tests`. Two differences that compare equal: matrixmultiply's edge
//! tiles (rows or columns past its last full 8 × 8 tile) add `c·β` to `fma(1, acc, 0)`, so
//! where a chunk's `acc` is −0 (an underflowed negative product) and `c·β` is −0 they store +0
//! and this path −0; and when both `acc` and `c·β` are NaN, which payload survives may differ.

use ndarray::ArrayView2;

use crate::Scalar;

/// Whether `F` is f32 (its type, not only its `Scalar::KIND`).
pub(crate) fn is_f32<F: Scalar>() -> bool {
    std::any::TypeId::of::<F>() == std::any::TypeId::of::<f32>()
}

/// The chunk of `k` each accumulator runs over before it is added into `out`: matrixmultiply's
/// sgemm `KC` (its default; a build that overrides `MATMUL_SGEMM_KC` would differ in the
/// last bits from this path).
pub(crate) const KC: usize = 256;

/// Sixteen f32 on one cache line: one AVX-512 vector of a packed panel.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub(crate) struct Lane(pub(crate) [f32; 16]);

/// `B` (k × n) packed for `raw::gemm_packed`: panels of `16·L` columns (zero past `n`), each `k`
/// rows of `L` lanes one after the other; `L` = 3 for 33–48 columns (one panel, a class count
/// such as 40), 1 for at most 16, 2 otherwise.
#[derive(Debug)]
pub(crate) struct PackedB {
    k: usize,
    n: usize,
    /// Lanes a panel row: `L`.
    l: usize,
    lanes: Vec<Lane>,
}

impl PackedB {
    /// `b` packed, when it is f32 and this CPU runs the packed kernels ([`available`]; `None`
    /// otherwise). One allocation of `k·⌈n/16L⌉·16L` floats, aligned to 64 bytes.
    pub(crate) fn new<F: Scalar>(b: ArrayView2<'_, F>) -> Option<PackedB> {
        if !available() || !is_f32::<F>() {
            return None;
        }
        // `F` is f32: the conversion is the identity.
        let f = |v: F| v.to_f64_lossless() as f32;
        let (k, n) = b.dim();
        let l = lanes_for(n);
        let w = 16 * l;
        let panels = n.div_ceil(w);
        let mut lanes = vec![Lane([0.0; 16]); panels * k * l];
        for (q, panel) in lanes.chunks_exact_mut((l * k).max(1)).enumerate() {
            let cols = (n - q * w).min(w);
            for (p, row) in panel.chunks_exact_mut(l).enumerate() {
                let src = b.row(p);
                match src.as_slice() {
                    // B's rows contiguous (G of a weight gradient, packed every call): copies.
                    Some(src) => {
                        let src = &src[q * w..q * w + cols];
                        for (lane, part) in row.iter_mut().zip(src.chunks(16)) {
                            for (d, &s) in lane.0.iter_mut().zip(part) {
                                *d = f(s);
                            }
                        }
                    }
                    None => {
                        for c in 0..cols {
                            row[c / 16].0[c % 16] = f(src[q * w + c]);
                        }
                    }
                }
            }
        }
        Some(PackedB { k, n, l, lanes })
    }

    /// `(k, n)`.
    pub(crate) fn dim(&self) -> (usize, usize) {
        (self.k, self.n)
    }

    /// The panels, one after the other.
    pub(crate) fn lanes(&self) -> &[Lane] {
        &self.lanes
    }

    /// Lanes a panel row: `L` (1, 2 or 3).
    pub(crate) fn lanes_per_row(&self) -> usize {
        self.l
    }
}

/// The strides of a view for `from_shape_ptr`: an axis of length 0 or 1 gets stride 0 (its
/// stride is never used, and ndarray lets it be anything, a negative value too); `None` when
/// a longer axis has a negative stride.
pub(crate) fn strides_of(dim: (usize, usize), strides: &[isize]) -> Option<(usize, usize)> {
    let s = |len: usize, st: isize| match len {
        0 | 1 => Some(0),
        _ => usize::try_from(st).ok(),
    };
    Some((s(dim.0, strides[0])?, s(dim.1, strides[1])?))
}

/// Lanes a panel row for `n` columns: 3 for 33–48 (one panel), 1 for at most 16, 2 otherwise.
pub(crate) fn lanes_for(n: usize) -> usize {
    match n {
        0..=16 => 1,
        33..=48 => 3,
        _ => 2,
    }
}

/// The B of `raw::gemm_packed`: packed, or read in place from its contiguous rows (a weight
/// gradient's G, a new B every call: packing it would cost as much as the product saves).
#[derive(Debug)]
pub(crate) enum BOperand<'a, F> {
    /// Packed once (W or Wᵀ, read by many row blocks).
    Packed(&'a PackedB),
    /// A k × n view with unit column stride and a non-negative row stride (f32, as `A`).
    Rows(ArrayView2<'a, F>),
}

impl<F> BOperand<'_, F> {
    /// `(k, n)`.
    pub(crate) fn dim(&self) -> (usize, usize) {
        match self {
            BOperand::Packed(b) => b.dim(),
            BOperand::Rows(b) => b.dim(),
        }
    }
}

/// The instructions of the packed kernels: AVX-512 F (24 accumulators of 16 floats, `B` packed
/// or in place), or AVX2 with FMA (12 of 8 floats, `B` packed only: the in-place path needs
/// AVX-512's masked loads). Both give the same bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    Avx2,
    Avx512,
}

impl Isa {
    /// Whether this CPU runs the kernels of `self`.
    pub(crate) fn runs(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            match self {
                Isa::Avx512 => has!("avx512f"),
                Isa::Avx2 => has!("avx2") && has!("fma"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = self;
            false
        }
    }

    /// The widest this CPU runs (`None`: neither, matrixmultiply runs every product).
    pub(crate) fn best() -> Option<Isa> {
        [Isa::Avx512, Isa::Avx2].into_iter().find(|i| i.runs())
    }
}

/// Whether this CPU runs the packed kernels.
pub(crate) fn available() -> bool {
    Isa::best().is_some()
}

impl<F> Clone for BOperand<'_, F> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<F> Copy for BOperand<'_, F> {}
