//! The FMA peak ([`fma_peak`]): what this CPU's widest vector fused multiply-add does, on one
//! thread and on every thread of the pool at once, the ceiling a GEMM is a fraction of.

use serde::Serialize;

use super::measure::time_reps;
use crate::kernels::raw::fma;
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
    /// One thread, GFLOP/s (best of five).
    pub gflops_one: f64,
    /// Every thread at once, GFLOP/s (best of five; the flops of all over the time of the
    /// slowest).
    pub gflops: f64,
}

/// Rounds of the loop in one timed run: about 15 ms at 100 GFLOP/s a thread.
const ROUNDS: usize = 4_000_000;

/// Measures the FMA peak: a loop of independent vector fused multiply-adds kept in registers
/// (nothing read from memory), in the widest instructions this CPU has, on one thread,
/// then on every thread of the current pool at once (`par`'s; one under [`Par::Seq`]), each
/// after one untimed run, best of five. Call it inside the rayon pool whose threads should
/// count.
pub fn fma_peak(par: Par) -> FmaPeak {
    let one = time_reps(1, 5, || {
        std::hint::black_box(fma::chain(ROUNDS, std::hint::black_box(0.5)));
    });
    let threads = match par {
        Par::Seq => 1,
        Par::Rayon => rayon::current_num_threads(),
    };
    let all = if threads == 1 {
        one.clone()
    } else {
        time_reps(1, 5, || {
            rayon::broadcast(|_| std::hint::black_box(fma::chain(ROUNDS, 0.5)));
        })
    };
    let rate = |threads: usize, s: f64| {
        fma::flops(ROUNDS) * threads as f64 / s.max(f64::MIN_POSITIVE) / 1e9
    };
    FmaPeak {
        isa: fma::isa().to_string(),
        lanes: fma::lanes(),
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
        assert_eq!((p.threads, p.lanes), (2, fma::lanes()));
        assert!(
            p.gflops_one > 0.0 && p.gflops > 0.0 && p.gflops.is_finite(),
            "{p:?}"
        );
        assert_eq!(fma_peak(Par::Seq).threads, 1);
    }
}
