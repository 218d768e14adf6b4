//! The memory a run may use, and the one check every size derived from input goes through
//! before it is allocated.
//!
//! The loaders (declared node counts, feature widths), the feature builders, the preparation
//! of Â, training (the parameters, the optimiser's moments, the planned workspace of every
//! seed trained at once) and evaluation estimate what they are about to allocate and call
//! [`check`], which refuses with [`Error::TooLarge`] (naming the cause, the estimate and the
//! memory available) when the estimate exceeds:
//! - the budget in the environment variable `SPARSE_GCN_MAX_MEMORY` (bytes, or with a suffix
//!   `K`, `M`, `G`, `T`: powers of 1024), less what the process already holds (its resident
//!   set), when it is set;
//! - otherwise `MemAvailable` of `/proc/meminfo`, or what is left under the cgroup's
//!   `memory.max` when that is lower (Linux);
//! - and nothing elsewhere: where neither can be read, no check is made.
//!
//! The estimates count the large buffers (values, indices, per-node arrays) and leave out
//! small ones, so a run refused by them would not have fit.

use crate::{Error, Result};

/// The environment variable holding a memory budget in bytes (see the [module docs](self)).
pub(crate) const BUDGET_VAR: &str = "SPARSE_GCN_MAX_MEMORY";

/// The memory available now, and where the figure comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Available {
    /// Bytes.
    pub bytes: u64,
    /// Where it comes from: `MemAvailable`, the cgroup's `memory.max`, or the budget.
    pub source: String,
}

/// Parses a size: digits, optionally followed by `K`, `M`, `G` or `T` (with or without `iB`
/// or `B`; powers of 1024): `64MiB`, `12G`, `4096`.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(digits);
    let n: u64 = num.parse().ok()?;
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => return None,
    };
    n.checked_mul(1u64 << shift)
}

/// A `Key:   123 kB` line of a `/proc` file, in bytes.
fn proc_kb(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let kb = l.strip_prefix(key)?.strip_prefix(':')?.trim();
        let kb = kb.strip_suffix("kB").unwrap_or(kb).trim();
        kb.parse::<u64>().ok().map(|k| k.saturating_mul(1024))
    })
}

/// The resident set of this process, in bytes (0 where it cannot be read).
fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| proc_kb(&s, "VmRSS"))
        .unwrap_or(0)
}

/// What the cgroup (v2) of this process may still allocate: `memory.max − memory.current`.
fn cgroup_left() -> Option<u64> {
    let read = |f: &str| std::fs::read_to_string(format!("/sys/fs/cgroup/{f}")).ok();
    let max: u64 = read("memory.max")?.trim().parse().ok()?;
    let current: u64 = read("memory.current")?.trim().parse().ok()?;
    Some(max.saturating_sub(current))
}

/// The machine's memory: `MemTotal` of `/proc/meminfo`, or the cgroup's `memory.max` when
/// that is lower; `None` where neither can be read.
pub fn total() -> Option<u64> {
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| proc_kb(&s, "MemTotal"));
    let cg = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    match (mem, cg) {
        (Some(m), Some(c)) => Some(m.min(c)),
        (m, c) => m.or(c),
    }
}

/// The memory available now (see the [module docs](self)); `None` where it is unknown.
///
/// # Errors
/// [`Error::Environment`] when `SPARSE_GCN_MAX_MEMORY` is set but not a size.
pub fn available() -> Result<Option<Available>> {
    if let Some(v) = std::env::var_os(BUDGET_VAR) {
        let text = v.to_string_lossy().into_owned();
        let Some(budget) = parse_size(&text) else {
            return Err(Error::Environment {
                var: BUDGET_VAR,
                value: text,
                msg: "expected a size in bytes, optionally with a suffix K, M, G or T".into(),
            });
        };
        return Ok(Some(Available {
            bytes: budget.saturating_sub(resident_bytes()),
            source: format!("{BUDGET_VAR}={text}, less the process's resident set"),
        }));
    }
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| proc_kb(&s, "MemAvailable"));
    Ok(match (mem, cgroup_left()) {
        (Some(m), Some(c)) if c < m => Some(Available {
            bytes: c,
            source: "what the cgroup's memory.max leaves".into(),
        }),
        (Some(m), _) => Some(Available {
            bytes: m,
            source: "MemAvailable in /proc/meminfo".into(),
        }),
        (None, Some(c)) => Some(Available {
            bytes: c,
            source: "what the cgroup's memory.max leaves".into(),
        }),
        (None, None) => None,
    })
}

/// Refuses an allocation of about `needed` bytes when it exceeds the memory [`available`];
/// `what` says what would be allocated (with the sizes it follows from), for the error.
///
/// # Errors
/// [`Error::TooLarge`]; [`Error::Environment`] for an invalid budget.
pub fn check(needed: u64, what: impl FnOnce() -> String) -> Result<()> {
    match available()? {
        Some(a) if needed > a.bytes => Err(Error::TooLarge {
            what: what(),
            needed_bytes: needed,
            available_bytes: a.bytes,
            budget: a.source,
        }),
        _ => Ok(()),
    }
}

/// `count × size` bytes, saturating (an estimate past `u64` is refused by any budget).
pub fn bytes(count: usize, size: usize) -> u64 {
    (count as u64).saturating_mul(size as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("123"), Some(123));
        assert_eq!(parse_size("2K"), Some(2048));
        assert_eq!(parse_size("3 MiB"), Some(3 << 20));
        assert_eq!(parse_size("1g"), Some(1 << 30));
        assert_eq!(parse_size("5TB"), Some(5 << 40));
        assert_eq!(parse_size("1.5G"), None);
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size("99999999999T"), None, "overflow");
    }

    #[test]
    fn proc_lines() {
        let t = "MemTotal:       24000000 kB\nMemAvailable:   1000 kB\n";
        assert_eq!(proc_kb(t, "MemAvailable"), Some(1_024_000));
        assert_eq!(proc_kb(t, "MemFree"), None);
    }

    #[test]
    fn an_estimate_past_any_memory_is_refused() {
        // Unless the budget variable is set to something enormous by whoever runs the tests.
        if std::env::var_os(BUDGET_VAR).is_some() {
            return;
        }
        if let Ok(Some(_)) = available() {
            let e = check(u64::MAX, || "a test".into()).unwrap_err();
            assert!(e.to_string().contains("a test: needs about"), "{e}");
            assert!(check(1, || unreachable!()).is_ok());
        }
    }
}
