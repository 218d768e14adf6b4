//! The floors of a kernel profile: every kernel call recorded by
//! [`kernels::profile`](crate::kernels::profile) during a run (a training epoch, for
//! `roofline --epoch`, which runs it: `train::profile`) priced at this machine's bounds,
//! measured here. The floor of each call is
//! - a GEMM's flops at the sgemm rate measured here for its shape (`kernels::gemm` on an
//!   (m × k)·(k × n) product of random values; a product whose inner dimension is its longest,
//!   a weight gradient Hᵀ·G over every node, is priced at the rate of the same flops with that
//!   dimension as the rows, which is how such a product splits across threads; the rows
//!   rounded up to a quarter of their octave, so that a mini-batch epoch's batches share
//!   rates);
//! - an SpMM's time at the in-cache floor of Â at its width (`in_cache_pattern`: the same
//!   row lengths and values with every gather hitting L1/L2), scaled by its non-zeros plus rows
//!   over Â's (also the weight gradient of sparse features, Xᵀ·G, a sparse product of the same
//!   kind);
//! - an element-wise pass's bytes (read plus written, counted by each kernel) at the triad
//!   rate measured here;
//!
//! and the run's floor is their sum. Per phase `price` gives the calls, the measured time
//! (median over the profiled runs of the phase's sum), the floor and their ratio; `other` is
//! the run's time outside every recorded call (the layers' own loops, the exact sums'
//! bookkeeping, allocation), whose floor is 0.

use std::collections::BTreeMap;

use serde::Serialize;

use super::measure::{in_cache_pattern, median, sgemm, spmm_time_csr, stream_triad};
use crate::kernels::profile::{Phase, Record, Work};
use crate::kernels::CsrView;
use crate::{Par, Result};

/// One profiled run: its wall-clock time and the kernel calls it recorded.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Profiled {
    /// Seconds of the whole run (recorded calls and the rest).
    pub seconds: f64,
    /// Its kernel calls, in order.
    pub records: Vec<Record>,
}

/// How [`price`] measures the rates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct FloorConfig {
    /// Elements of each triad array (f32).
    pub triad_len: usize,
    /// Advise huge pages on the triad and SpMM floor buffers.
    pub huge_pages: bool,
    /// Seed of the SpMM floor's operand.
    pub seed: u64,
    /// Threads of the measurements.
    pub par: Par,
}

/// One phase of a profiled epoch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseReport {
    /// Its name (`gemm`, `spmm`, `weight-grad`, `reduce`, `elementwise`, `loss`,
    /// `optimizer`, `other`).
    pub phase: String,
    /// Recorded calls per epoch.
    pub calls: usize,
    /// Measured time per epoch, ms (median over the profiled epochs).
    pub ms: f64,
    /// Its floor, ms.
    pub floor_ms: f64,
    /// `ms / floor_ms` (`None` for a floor of 0).
    pub ratio: Option<f64>,
}

/// One kernel call of the first profiled epoch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallReport {
    /// Its phase.
    pub phase: String,
    /// Its work: `gemm MxKxN`, `spmm ROWSxD (NNZ nnz)` or `stream BYTES B`.
    pub work: String,
    /// Its time, ms.
    pub ms: f64,
    /// Its floor, ms.
    pub floor_ms: f64,
}

/// A rate the floors were priced at.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GemmRate {
    /// Rows of the measured product.
    pub m: usize,
    /// Its inner dimension.
    pub k: usize,
    /// Its columns.
    pub n: usize,
    /// GFLOP/s measured (best of five).
    pub gflops: f64,
    /// That rate over the FMA peak on every thread ([`FmaPeak::gflops`](super::FmaPeak)),
    /// when it was measured.
    pub fma_fraction: Option<f64>,
}

/// The in-cache SpMM floor at one width.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpmmFloor {
    /// Width.
    pub d: usize,
    /// In-cache time of Â at this width, ms (best of five).
    pub ms: f64,
}

/// A kernel profile priced ([`price`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Floors {
    /// The floor of the first profiled run, seconds.
    pub floor_s: f64,
    /// Per phase, then `other`.
    pub phases: Vec<PhaseReport>,
    /// The calls furthest above their floors (time less floor) in the first profiled run, at
    /// most eight, furthest first.
    pub top_calls: Vec<CallReport>,
    /// Triad rate the element-wise floors use, GB/s (best of five).
    pub triad_gbs: f64,
    /// sgemm rates of the GEMM floors.
    pub gemm_rates: Vec<GemmRate>,
    /// In-cache SpMM floors.
    pub spmm_floors: Vec<SpmmFloor>,
    /// The GEMMs' floating-point operations in the first profiled run (2·m·k·n each).
    pub gemm_flops: f64,
    /// Their floors at the sgemm rates, seconds (a part of `floor_s`).
    pub gemm_floor_s: f64,
    /// The GEMMs' rate over every profiled run (their flops over their time), flop/s.
    pub gemm_rate: f64,
}

/// The rates measured for a profile: triad bytes/s, sgemm flops/s per priced shape, and the
/// in-cache SpMM time of Â per width with Â's non-zeros plus rows.
struct Rates {
    triad_gbs: f64,
    gemm: BTreeMap<(usize, usize, usize), f64>,
    spmm: BTreeMap<usize, f64>,
    spmm_unit: f64,
}

impl Rates {
    /// Measures the rates the calls of `records` need, `a` being Â.
    fn measure(records: &[Record], a: CsrView<'_, f32>, cfg: &FloorConfig) -> Result<Rates> {
        let par = cfg.par;
        let triad = stream_triad(cfg.triad_len, 1, 5, cfg.huge_pages, par)?;
        let mut gemm = BTreeMap::new();
        let mut spmm = BTreeMap::new();
        for r in records {
            match r.work {
                Work::Gemm { m, k, n } => {
                    gemm.entry(priced_shape(m, k, n)).or_insert(0.0);
                }
                Work::Spmm { d, .. } => {
                    spmm.entry(d).or_insert(0.0);
                }
                Work::Stream { .. } => {}
            }
        }
        for (&(m, k, n), rate) in gemm.iter_mut() {
            *rate = {
                let g = sgemm(m, k, n, 1, 5, par);
                2.0 * (m * k) as f64 * n as f64 / g.timing.best_s.max(f64::MIN_POSITIVE)
            };
        }
        let a_cache = in_cache_pattern(a);
        let spmm_unit = (a_cache.nnz() + a_cache.rows()).max(1) as f64;
        for (&d, t) in spmm.iter_mut() {
            *t = spmm_time_csr(a_cache.view(), d, d, 1, 5, cfg.seed, cfg.huge_pages, par)?
                .timing
                .best_s;
        }
        Ok(Rates {
            triad_gbs: triad.gbs_best,
            gemm,
            spmm,
            spmm_unit,
        })
    }

    /// The floor of one call, seconds.
    fn floor_of(&self, w: &Work) -> f64 {
        match *w {
            Work::Gemm { m, k, n } => {
                2.0 * (m * k) as f64 * n as f64 / self.gemm[&priced_shape(m, k, n)]
            }
            Work::Spmm { rows, nnz, d } => self.spmm[&d] * (nnz + rows) as f64 / self.spmm_unit,
            Work::Stream { bytes } => bytes as f64 / (self.triad_gbs * 1e9),
        }
    }
}

/// Prices the profiled runs `runs` (at least one; the first one's calls are priced) of a model
/// on Â (`a`): measures the rates their calls need on this machine, then each phase's time and
/// floor (see the [module docs](self)).
///
/// # Errors
/// The measurements' allocation errors.
///
/// # Panics
/// If `runs` is empty.
pub(crate) fn price(runs: &[Profiled], a: CsrView<'_, f32>, cfg: &FloorConfig) -> Result<Floors> {
    assert!(!runs.is_empty(), "price: no profiled run");
    let first = &runs[0].records;
    let rates = Rates::measure(first, a, cfg)?;
    let mut phases = Vec::new();
    let mut recorded = vec![0.0; runs.len()];
    let mut floor_s = 0.0;
    for phase in Phase::ALL {
        let calls = first.iter().filter(|r| r.phase == phase).count();
        if calls == 0 {
            continue;
        }
        let times: Vec<f64> = runs
            .iter()
            .map(|run| {
                run.records
                    .iter()
                    .filter(|r| r.phase == phase)
                    .map(|r| r.seconds)
                    .sum()
            })
            .collect();
        for (acc, t) in recorded.iter_mut().zip(&times) {
            *acc += t;
        }
        let floor: f64 = first
            .iter()
            .filter(|r| r.phase == phase)
            .map(|r| rates.floor_of(&r.work))
            .sum();
        floor_s += floor;
        phases.push(phase_report(phase.name(), calls, median(times), floor));
    }
    let other = median(
        runs.iter()
            .zip(&recorded)
            .map(|(run, r)| (run.seconds - r).max(0.0))
            .collect(),
    );
    phases.push(phase_report("other", 0, other, 0.0));
    fn gemms(run: &Profiled) -> Vec<(f64, &Work)> {
        run.records
            .iter()
            .filter(|r| matches!(r.work, Work::Gemm { .. }))
            .map(|r| (r.seconds, &r.work))
            .collect()
    }
    let flops = |w: &Work| match *w {
        Work::Gemm { m, k, n } => 2.0 * (m * k) as f64 * n as f64,
        _ => 0.0,
    };
    let gemm_flops = gemms(&runs[0]).iter().map(|&(_, w)| flops(w)).sum();
    let gemm_floor_s = gemms(&runs[0])
        .iter()
        .map(|&(_, w)| rates.floor_of(w))
        .sum();
    // (Each run its own epoch: with mini-batches, their shapes differ from run to run.)
    let (all_flops, all_s) = runs
        .iter()
        .flat_map(gemms)
        .fold((0.0, 0.0), |(f, s), (t, w)| (f + flops(w), s + t));
    let gemm_rate = all_flops / f64::max(all_s, f64::MIN_POSITIVE);
    let mut top_calls: Vec<CallReport> = first
        .iter()
        .map(|r| CallReport {
            phase: r.phase.name().to_string(),
            work: match r.work {
                Work::Gemm { m, k, n } => format!("gemm {m}x{k}x{n}"),
                Work::Spmm { rows, nnz, d } => format!("spmm {rows}x{d} ({nnz} nnz)"),
                Work::Stream { bytes } => format!("stream {bytes} B"),
            },
            ms: r.seconds * 1e3,
            floor_ms: rates.floor_of(&r.work) * 1e3,
        })
        .collect();
    top_calls.sort_by(|a, b| (b.ms - b.floor_ms).total_cmp(&(a.ms - a.floor_ms)));
    top_calls.truncate(8);
    Ok(Floors {
        floor_s,
        phases,
        top_calls,
        triad_gbs: rates.triad_gbs,
        gemm_rates: rates
            .gemm
            .iter()
            .map(|(&(m, k, n), &r)| GemmRate {
                m,
                k,
                n,
                gflops: r / 1e9,
                fma_fraction: None,
            })
            .collect(),
        spmm_floors: rates
            .spmm
            .iter()
            .map(|(&d, &t)| SpmmFloor { d, ms: t * 1e3 })
            .collect(),
        gemm_flops,
        gemm_floor_s,
        gemm_rate,
    })
}

/// The shape whose measured sgemm rate prices an (m × k)·(k × n) product: itself, or with the
/// inner dimension as the rows when it is the longer one (a weight gradient over every node);
/// its rows rounded up to a quarter of their octave (2ᵉ + j·2ᵉ⁻², j = 1…4), so that the
/// batches of a mini-batch epoch, each of a few more or fewer rows, share a few measured rates.
fn priced_shape(m: usize, k: usize, n: usize) -> (usize, usize, usize) {
    let (rows, inner) = if k > m { (k, m) } else { (m, k) };
    (round_rows(rows), inner, n)
}

/// `m` rounded up to a quarter of its octave (at least 1; exact below 8).
fn round_rows(m: usize) -> usize {
    if m < 8 {
        return m.max(1);
    }
    let step = 1usize << (usize::BITS - 1 - m.leading_zeros() - 2);
    m.div_ceil(step).saturating_mul(step)
}

fn phase_report(name: &str, calls: usize, s: f64, floor: f64) -> PhaseReport {
    PhaseReport {
        phase: name.to_string(),
        calls,
        ms: s * 1e3,
        floor_ms: floor * 1e3,
        ratio: (floor > 0.0).then(|| s / floor),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_up_to_a_quarter_of_their_octave() {
        let cases = [
            (0, 1),
            (7, 7),
            (8, 8),
            (9, 10),
            (16, 16),
            (17, 20),
            (3324, 3584),
            (3584, 3584),
            (3585, 4096),
            (169_343, 196_608),
        ];
        for (m, r) in cases {
            assert_eq!(round_rows(m), r, "{m}");
        }
        // The weight gradient's inner dimension as its rows.
        assert_eq!(priced_shape(128, 3324, 256), (3584, 128, 256));
        assert_eq!(priced_shape(3324, 128, 256), (3584, 128, 256));
    }
}
