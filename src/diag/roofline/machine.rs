//! The machine the numbers come from and the memory they are measured in: [`Machine`] (the CPU
//! model, CPUs and threads, the transparent-huge-page mode, the load, the L3 size the cache
//! model assumes) read from Linux's `/proc` and `/sys` files, the process's `AnonHugePages`, and
//! [`BigBuffer`], the 2 MiB-aligned, zero-filled f32 buffer every big dense array of a run lives
//! in, advised for huge pages on request.

use ndarray::{ArrayView2, ArrayViewMut2};
use serde::Serialize;

use crate::kernels::raw::{advise_slice, HUGE_PAGE};
use crate::{Error, Result};

/// The machine the numbers come from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Machine {
    /// `model name` from `/proc/cpuinfo` (or `"unknown"`).
    pub cpu_model: String,
    /// Logical CPUs the process may use.
    pub logical_cpus: usize,
    /// Threads of the rayon pool the measurements ran in.
    pub threads: usize,
    /// Transparent huge page mode (`/sys/kernel/mm/transparent_hugepage/enabled`).
    pub thp_mode: String,
    /// `/proc/loadavg`'s 1, 5 and 15 minute load averages before the run.
    pub load_before: String,
    /// The same after the run.
    pub load_after: String,
    /// Size of the last-level (L3) cache of CPU 0, bytes
    /// (`/sys/devices/system/cpu/cpu0/cache/index3/size`), if the OS says.
    pub l3_bytes: Option<u64>,
}

impl Machine {
    /// Reads what the OS tells about this machine (Linux files; `"unknown"` elsewhere).
    pub fn detect() -> Self {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let thp_mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .ok()
            .and_then(|s| {
                let a = s.find('[')?;
                let b = s[a..].find(']')?;
                Some(s[a + 1..a + b].to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        Machine {
            cpu_model,
            logical_cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            threads: rayon::current_num_threads(),
            thp_mode,
            load_before: load_average(),
            load_after: String::new(),
            l3_bytes: std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cache/index3/size")
                .ok()
                .and_then(|s| parse_cache_size(s.trim())),
        }
    }
}

/// A sysfs cache size (`"32768K"`, `"1M"`, `"512"`) in bytes.
pub(super) fn parse_cache_size(s: &str) -> Option<u64> {
    let (num, mult) = match s.as_bytes().last()? {
        b'K' | b'k' => (&s[..s.len() - 1], 1u64 << 10),
        b'M' | b'm' => (&s[..s.len() - 1], 1 << 20),
        b'G' | b'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

/// The cache size [`run`](super::run)'s cache model assumes when the OS does not report an L3.
pub(crate) const DEFAULT_L3_BYTES: u64 = 32 << 20;

/// The first three fields of `/proc/loadavg` (or `"unknown"`).
pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// This process's anonymous memory backed by huge pages (`AnonHugePages` of
/// `/proc/self/smaps_rollup`), in KiB; `None` where the file is missing.
pub(crate) fn anon_huge_pages_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    let line = s.lines().find(|l| l.starts_with("AnonHugePages:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// A zero-filled f32 buffer aligned to 2 MiB (4 KiB when smaller), advised for huge pages
/// on request: a `Vec` one alignment longer than asked, of which the aligned part is used.
pub struct BigBuffer {
    v: Vec<f32>,
    /// The aligned part: `v[off..off + len]`.
    off: usize,
    len: usize,
    advised: bool,
}

impl BigBuffer {
    /// `len` zeros; with `huge_pages`, `madvise(MADV_HUGEPAGE)` before the first touch (on
    /// Linux with the `hugepages` feature; otherwise the request is ignored).
    ///
    /// # Errors
    /// [`Error::Mismatch`] when `len` f32 do not fit in the address space, or cannot be
    /// allocated.
    pub fn zeroed(len: usize, huge_pages: bool) -> Result<Self> {
        let too_big = || Error::Mismatch {
            what: "benchmark buffer length (f32 elements that fit in memory)".into(),
            expected: isize::MAX as usize / 4,
            got: len,
        };
        let align = if len.saturating_mul(4) >= HUGE_PAGE {
            HUGE_PAGE
        } else {
            4096
        };
        let total = len.checked_add(align / 4).ok_or_else(too_big)?;
        let mut v: Vec<f32> = Vec::new();
        v.try_reserve_exact(total).map_err(|_| too_big())?;
        let addr = v.as_ptr() as usize;
        // `addr` is a multiple of 4 (an f32's alignment), so the offset is whole elements,
        // and below `align / 4`: the aligned part fits in `total`.
        let off = (addr.next_multiple_of(align) - addr) / 4;
        // Advised before the zeros below first touch the pages.
        let advised = huge_pages && advise_slice(&mut v.spare_capacity_mut()[off..off + len]);
        v.resize(total, 0.0);
        Ok(BigBuffer {
            v,
            off,
            len,
            advised,
        })
    }
    /// Whether the huge-page advice was given and accepted (always false without the
    /// `hugepages` feature or off Linux).
    pub fn huge_pages_advised(&self) -> bool {
        self.advised
    }
    /// The elements.
    pub fn as_slice(&self) -> &[f32] {
        &self.v[self.off..self.off + self.len]
    }
    /// The elements, mutably.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [f32] {
        &mut self.v[self.off..self.off + self.len]
    }
    /// A `rows × cols` row-major view.
    ///
    /// # Errors
    /// [`Error::Mismatch`] if `rows·cols` is not the length.
    pub fn view(&self, rows: usize, cols: usize) -> Result<ArrayView2<'_, f32>> {
        let len = self.as_slice().len();
        ArrayView2::from_shape((rows, cols), self.as_slice())
            .map_err(|_| shape_err(len, rows, cols))
    }
    /// A `rows × cols` row-major mutable view.
    ///
    /// # Errors
    /// [`Error::Mismatch`] if `rows·cols` is not the length.
    pub fn view_mut(&mut self, rows: usize, cols: usize) -> Result<ArrayViewMut2<'_, f32>> {
        let len = self.as_slice().len();
        ArrayViewMut2::from_shape((rows, cols), self.as_mut_slice())
            .map_err(|_| shape_err(len, rows, cols))
    }
}

fn shape_err(len: usize, rows: usize, cols: usize) -> Error {
    Error::Mismatch {
        what: format!("benchmark buffer as a {rows}×{cols} matrix"),
        expected: rows.saturating_mul(cols),
        got: len,
    }
}
