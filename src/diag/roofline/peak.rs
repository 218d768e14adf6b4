//! The FMA peak ([`fma_peak`]): what this CPU's widest vector fused multiply-add does, on one
//! thread and on every thread of the pool at once, the ceiling a GEMM is a fraction of.

use serde::Serialize;

use super::measure::time_reps;
use crate::kernels::raw::fma_chains;
use crate::Par;

/// What [`fma_peak`] measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FmaPeak {
    /// The instructions: `avx512`, `avx2` (with FMA) or `portable` (a separate multiply and
    /// add, not a fused one).
    pub isa: String,
    /// Floats a vector.
    pub lanes: usize,
    /// Threads that ran the loop at once for [`FmaPeak::gflops`].
    pub threads: usize,
    /// One thread, GFLOP/s (best of 5 runs).
    pub gflops_one: f64,
    /// Every thread at once, GFLOP/s (best of 25 runs; the flops of all over the time of the
    /// slowest).
    pub gflops: f64,
}

/// Independent chains: enough to cover an FMA's latency (4 cycles) on two issue ports with
/// room to spare, few enough to stay in registers (AVX2 has 16).
const CHAINS: usize = 12;

/// The multiplier and addend of a round: a chain stays within [-2, 2] for any number of rounds
/// (a contraction towards c / (1 − b) = 1 from any start in [-1, 1]).
const B: f32 = 0.999_9;
const C: f32 = 1e-4;

/// Chain `k`'s start from `x`: each chain its own value, so that no compiler can merge them.
fn start(x: f32, k: usize) -> f32 {
    x + k as f32 * 1e-3
}

/// The instructions [`chain`] runs on this CPU: `"avx512"`, `"avx2"` (with FMA) or
/// `"portable"` (the baseline build: no fused multiply-add), with the floats of a vector.
fn isa() -> (&'static str, usize) {
    match fma_chains(0, [0.0], B, C) {
        Some((_, 16)) => ("avx512", 16),
        Some((_, w)) => ("avx2", w),
        None => ("portable", 8),
    }
}

/// `rounds` rounds of [`CHAINS`] independent multiply-adds `a ← a·b + c` on vectors of the
/// widest width, chain k from `x + k/1000` ([`fma_chains`], or a portable multiply and add):
/// the sum of the accumulators, which depends on every round (finite for `x` in [-1, 1]).
fn chain(rounds: usize, x: f32) -> f32 {
    let (b, c) = (std::hint::black_box(B), std::hint::black_box(C));
    let starts: [f32; CHAINS] = std::array::from_fn(|k| start(x, k));
    fma_chains(rounds, starts, b, c).map_or_else(|| chain_portable(rounds, x), |(s, _)| s)
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

/// The floating-point operations of [`chain`]`(rounds, _)` on vectors of `lanes` floats.
fn flops(rounds: usize, lanes: usize) -> f64 {
    rounds as f64 * (CHAINS * lanes * 2) as f64
}

/// Rounds of the loop in one timed run: 1.5 GFLOP in AVX-512, about 13 ms at 117 GFLOP/s a
/// thread.
const ROUNDS: usize = 4_000_000;

/// Measures the FMA peak: a loop of independent vector fused multiply-adds kept in registers
/// (nothing read from memory), in the widest instructions this CPU has, on one thread,
/// then on every thread of the current pool at once (`par`'s; one under [`Par::Seq`]), each
/// after one untimed run: the best of 5 runs on one thread, of 25 on all. Call it inside the rayon pool whose threads should
/// count.
pub fn fma_peak(par: Par) -> FmaPeak {
    let one = time_reps(1, 5, || {
        std::hint::black_box(chain(ROUNDS, std::hint::black_box(0.5)));
    });
    let threads = match par {
        Par::Seq => 1,
        Par::Rayon => rayon::current_num_threads(),
    };
    // The best of 25 runs of about 13 ms each: on a shared host the second core can be away for a
    // few tenths of a second (seen: five runs in a row at one core's rate).
    let all = if threads == 1 {
        one.clone()
    } else {
        time_reps(1, 25, || {
            rayon::broadcast(|_| std::hint::black_box(chain(ROUNDS, 0.5)));
        })
    };
    let (isa, lanes) = isa();
    let rate = |threads: usize, s: f64| {
        flops(ROUNDS, lanes) * threads as f64 / s.max(f64::MIN_POSITIVE) / 1e9
    };
    FmaPeak {
        isa: isa.to_string(),
        lanes,
        threads,
        gflops_one: rate(1, one.best_s),
        gflops: rate(threads, all.best_s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_is_measured_on_the_pools_threads() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let p = pool.install(|| fma_peak(Par::Rayon));
        assert_eq!((p.threads, p.lanes), (2, isa().1));
        assert!(
            p.gflops_one > 0.0 && p.gflops > 0.0 && p.gflops.is_finite(),
            "{p:?}"
        );
        assert_eq!(fma_peak(Par::Seq).threads, 1);
    }

    /// Every build computes the same contraction: after r rounds from x_k, each lane of chain
    /// k holds 1 + (x_k − 1)·bʳ (up to rounding), and the result sums them over the chains
    /// and lanes.
    #[test]
    fn the_chain_contracts_towards_one_in_every_build() {
        let lanes = isa().1;
        for (rounds, x) in [(0, 0.5f32), (1, -1.0), (1000, 0.25), (100_000, 1.0)] {
            let lane =
                |k: usize| 1.0 + (f64::from(start(x, k)) - 1.0) * f64::from(B).powi(rounds as i32);
            let one: f64 = (0..CHAINS).map(lane).sum();
            let n = (CHAINS * lanes) as f64;
            let want = one * lanes as f64;
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
        assert_eq!(flops(10, lanes), 10.0 * (CHAINS * lanes * 2) as f64);
        assert!(["avx512", "avx2", "portable"].contains(&isa().0));
    }
}
