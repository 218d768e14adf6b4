//! What an epoch's time is modelled from ([`TimeModel`]): MPI's per-message latency and
//! per-byte time fitted to measured all-to-alls ([`CommSample`]), and this machine's compute
//! rates; and the modelled epoch ([`EpochTime`]).

use serde::Serialize;

use crate::Result;

/// A modelled epoch ([`TimeModel`]), in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EpochTime {
    /// GEMMs at the measured sgemm rate plus SpMMs at the measured in-cache SpMM rate, on
    /// the largest rank.
    pub compute_s: f64,
    /// Every exchange of the epoch at the fitted α/β, each at its slowest rank.
    pub comm_s: f64,
    /// Their sum (no overlap of compute and communication: the engine overlaps none).
    pub epoch_s: f64,
}

/// What an epoch's time is modelled from: per-message latency and per-byte time of MPI,
/// fitted to measured all-to-alls ([`TimeModel::fit_comm`]), and the compute rates of this
/// machine (the roofline's sgemm and in-cache SpMM).
///
/// An all-to-all costs each rank `α·messages + β·bytes` (it sends one message to each
/// neighbour rank, carrying its halo rows for it); the slowest rank sets the time. An
/// all-reduce of b bytes a rank costs `2·⌈log₂ P⌉·α + 2·b·β` (reduce-scatter and all-gather),
/// an all-gather of one count `⌈log₂ P⌉·α + 8·P·β`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TimeModel {
    /// Seconds per message.
    pub alpha_s: f64,
    /// Seconds per byte.
    pub beta_s_per_byte: f64,
    /// GEMM flops per second.
    pub gemm_flop_s: f64,
    /// SpMM flops per second at the in-cache floor.
    pub spmm_flop_s: f64,
}

/// One measured all-to-all: each of `ranks` ranks sent `bytes_per_peer` bytes to every other
/// rank in `seconds` (the slowest rank's time, a median over repetitions).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct CommSample {
    /// Ranks of the job.
    pub ranks: usize,
    /// Bytes each rank sent to each other rank.
    pub bytes_per_peer: u64,
    /// Seconds.
    pub seconds: f64,
}

impl TimeModel {
    /// α and β fitted to `samples` (a rank's messages `P − 1`, its bytes `(P − 1)·bytes per
    /// peer`) by least squares on the relative error, so small and large messages weigh
    /// alike; a coefficient the fit makes negative is dropped (0) and the other refitted.
    ///
    /// # Errors
    /// [`Error::Config`](crate::Error::Config) when fewer than two samples have more than one
    /// rank, a positive time and distinct sizes.
    pub fn fit_comm(samples: &[CommSample]) -> Result<(f64, f64)> {
        let pts: Vec<(f64, f64)> = samples
            .iter()
            .filter(|s| s.ranks > 1 && s.seconds > 0.0 && s.seconds.is_finite())
            .map(|s| {
                let m = (s.ranks - 1) as f64;
                (m / s.seconds, m * s.bytes_per_peer as f64 / s.seconds)
            })
            .collect();
        let ratio = |p: &(f64, f64)| p.1 / p.0; // bytes per message
        if pts.len() < 2 || pts.iter().all(|p| ratio(p) == ratio(&pts[0])) {
            return Err(crate::error::ConfigError::Unsupported {
                what: "fitting α and β to fewer than two all-to-all timings of different sizes \
                       with more than one rank (sparse-gcn commbench under mpirun gives them)",
            }
            .into());
        }
        // Minimise Σ (α·u + β·v − 1)²: the normal equations.
        let (mut uu, mut uv, mut vv, mut u1, mut v1) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for &(u, v) in &pts {
            uu += u * u;
            uv += u * v;
            vv += v * v;
            u1 += u;
            v1 += v;
        }
        let det = uu * vv - uv * uv;
        if det > 0.0 {
            let (a, b) = ((u1 * vv - v1 * uv) / det, (v1 * uu - u1 * uv) / det);
            if a >= 0.0 && b >= 0.0 {
                return Ok((a, b));
            }
        }
        // One coefficient alone: whichever fits better.
        let residual = |a: f64, b: f64| -> f64 {
            pts.iter()
                .map(|&(u, v)| (a * u + b * v - 1.0).powi(2))
                .sum()
        };
        let (alpha_only, beta_only) = (u1 / uu, v1 / vv);
        Ok(if residual(0.0, beta_only) <= residual(alpha_only, 0.0) {
            (0.0, beta_only)
        } else {
            (alpha_only, 0.0)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_comm_fit_recovers_alpha_and_beta() {
        let (alpha, beta) = (2e-6, 3e-10);
        let samples: Vec<CommSample> = [2usize, 4]
            .iter()
            .flat_map(|&ranks| {
                [8u64, 4096, 1 << 20].map(|bytes_per_peer| CommSample {
                    ranks,
                    bytes_per_peer,
                    seconds: (ranks - 1) as f64 * (alpha + beta * bytes_per_peer as f64),
                })
            })
            .collect();
        let (a, b) = TimeModel::fit_comm(&samples).unwrap();
        assert!(
            (a / alpha - 1.0).abs() < 1e-9 && (b / beta - 1.0).abs() < 1e-9,
            "{a} {b}"
        );
        // Pure bandwidth: α is 0, not negative.
        let bw: Vec<CommSample> = samples
            .iter()
            .map(|s| CommSample {
                seconds: (s.ranks - 1) as f64 * beta * s.bytes_per_peer as f64,
                ..*s
            })
            .collect();
        let (a, b) = TimeModel::fit_comm(&bw).unwrap();
        assert!(a >= 0.0 && (b / beta - 1.0).abs() < 1e-6, "{a} {b}");
        // Too little to fit: one size, or only 1-rank samples.
        assert!(TimeModel::fit_comm(&samples[..1]).is_err());
        let one: Vec<CommSample> = samples
            .iter()
            .map(|s| CommSample { ranks: 1, ..*s })
            .collect();
        assert!(TimeModel::fit_comm(&one).is_err());
        assert!(TimeModel::fit_comm(&[]).is_err());
    }
}
