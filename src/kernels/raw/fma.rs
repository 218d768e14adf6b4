//! The FMA peak's loop ([`chain`]): independent chains of fused multiply-adds in the widest
//! vector instructions this CPU has (AVX-512, else AVX2 with FMA, else the baseline build's
//! separate multiply and add), so that `roofline` can price a GEMM against what the cores can
//! do rather than against a library's rate.

/// Independent accumulators: enough to cover an FMA's latency (4 cycles) on two issue ports
/// with room to spare, few enough to stay in registers (AVX2 has 16).
const CHAINS: usize = 12;

/// The instructions [`chain`] runs on this CPU: `"avx512"`, `"avx2"` (with FMA) or
/// `"portable"` (the baseline build: no fused multiply-add).
pub(crate) fn isa() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx512f") {
            return "avx512";
        }
        if has!("avx2") && has!("fma") {
            return "avx2";
        }
    }
    "portable"
}

/// Floats a vector of [`isa`] holds.
pub(crate) fn lanes() -> usize {
    match isa() {
        "avx512" => 16,
        _ => 8,
    }
}

/// Runs `rounds` rounds of [`CHAINS`] independent multiply-adds `a ← a·b + c` on vectors of
/// [`lanes`] floats, chain k from `x + k/1000`; returns the sum of the accumulators (finite
/// for `x` in [-1, 1]), which depends on every round, so that no round can be left out. Its floating-point
/// operations: `rounds · CHAINS · lanes() · 2` ([`flops`]).
pub(crate) fn chain(rounds: usize, x: f32) -> f32 {
    #[cfg(target_arch = "x86_64")]
    match isa() {
        // SAFETY: `isa` checked at run time that the CPU has AVX-512 F, the only requirement
        // of `chain_avx512`'s `#[target_feature]`.
        "avx512" => return unsafe { chain_avx512(rounds, x) },
        // SAFETY: `isa` checked that the CPU has AVX2 and FMA, `chain_avx2`'s requirements.
        "avx2" => return unsafe { chain_avx2(rounds, x) },
        _ => {}
    }
    chain_portable(rounds, x)
}

/// The floating-point operations of [`chain`]`(rounds, _)`.
pub(crate) fn flops(rounds: usize) -> f64 {
    rounds as f64 * (CHAINS * lanes() * 2) as f64
}

/// Chain `k`'s start from `x`: each chain its own value, so that no compiler can merge them.
fn start(x: f32, k: usize) -> f32 {
    x + k as f32 * 1e-3
}

/// The multiplier and addend of a round: `a` stays within [-2, 2] for any number of rounds
/// (a contraction towards c / (1 − b) = 1 from any start in [-1, 1]).
const B: f32 = 0.999_9;
const C: f32 = 1e-4;

/// [`chain`] in AVX-512.
///
/// # Safety
/// The CPU must support AVX-512 F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn chain_avx512(rounds: usize, x: f32) -> f32 {
    use std::arch::x86_64::{_mm512_add_ps, _mm512_fmadd_ps, _mm512_reduce_add_ps, _mm512_set1_ps};
    let b = _mm512_set1_ps(std::hint::black_box(B));
    let c = _mm512_set1_ps(std::hint::black_box(C));
    let mut acc: [_; CHAINS] = std::array::from_fn(|k| _mm512_set1_ps(start(x, k)));
    for _ in 0..rounds {
        for a in &mut acc {
            *a = _mm512_fmadd_ps(*a, b, c);
        }
    }
    let mut s = acc[0];
    for a in &acc[1..] {
        s = _mm512_add_ps(s, *a);
    }
    _mm512_reduce_add_ps(s)
}

/// [`chain`] in AVX2 with FMA.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn chain_avx2(rounds: usize, x: f32) -> f32 {
    use std::arch::x86_64::{_mm256_add_ps, _mm256_fmadd_ps, _mm256_set1_ps, _mm256_storeu_ps};
    let b = _mm256_set1_ps(std::hint::black_box(B));
    let c = _mm256_set1_ps(std::hint::black_box(C));
    let mut acc: [_; CHAINS] = std::array::from_fn(|k| _mm256_set1_ps(start(x, k)));
    for _ in 0..rounds {
        for a in &mut acc {
            *a = _mm256_fmadd_ps(*a, b, c);
        }
    }
    let mut s = acc[0];
    for a in &acc[1..] {
        s = _mm256_add_ps(s, *a);
    }
    let mut out = [0f32; 8];
    // SAFETY: `out` holds 8 writable floats, what an unaligned 256-bit store writes.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), s) };
    out.iter().sum()
}

/// [`chain`] in the baseline build: a separate multiply and add (Rust never fuses them), on
/// arrays of 8 floats the compiler vectorises as it can.
fn chain_portable(rounds: usize, x: f32) -> f32 {
    let (b, c) = (std::hint::black_box(B), std::hint::black_box(C));
    let mut acc: [[f32; 8]; CHAINS] = std::array::from_fn(|k| [start(x, k); 8]);
    for _ in 0..rounds {
        for v in &mut acc {
            for a in v.iter_mut() {
                *a = *a * b + c;
            }
        }
    }
    acc.iter().flatten().sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every build computes the same contraction: after r rounds from x_k, each lane of chain
    /// k holds 1 + (x_k − 1)·bʳ (up to rounding), and the result sums them over the chains
    /// and lanes.
    #[test]
    fn the_chain_contracts_towards_one_in_every_build() {
        for (rounds, x) in [(0, 0.5f32), (1, -1.0), (1000, 0.25), (100_000, 1.0)] {
            let lane =
                |k: usize| 1.0 + (f64::from(start(x, k)) - 1.0) * f64::from(B).powi(rounds as i32);
            let one: f64 = (0..CHAINS).map(lane).sum();
            let n = (CHAINS * lanes()) as f64;
            let want = one * lanes() as f64;
            let got = f64::from(chain(rounds, x));
            assert!(
                (got - want).abs() <= 1e-3 * n,
                "{rounds} {x}: {got} vs {want}"
            );
            let p = f64::from(chain_portable(rounds, x));
            assert!(
                (p - 8.0 * one).abs() <= 1e-3 * n,
                "{rounds} {x}: {p} vs {}",
                8.0 * one
            );
        }
        assert_eq!(flops(10), 10.0 * (CHAINS * lanes() * 2) as f64);
        assert!(["avx512", "avx2", "portable"].contains(&isa()));
    }
}
