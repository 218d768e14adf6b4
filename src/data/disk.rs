//! The disk space a large output needs, checked before anything is written: the counterpart of
//! [`super::memory::check`] for files.

use std::path::Path;

use crate::{Error, Result};

/// The space available to this user on the disk holding `dir` (or its nearest existing
/// ancestor), in bytes; `None` where it cannot be read.
pub fn available(dir: &Path) -> Option<u64> {
    let mut p = Some(dir);
    while let Some(d) = p {
        if d.exists() {
            return fs4::available_space(d).ok();
        }
        p = d.parent().filter(|q| !q.as_os_str().is_empty());
    }
    fs4::available_space(".").ok()
}

/// Refuses to write about `needed` bytes under `dir` when its disk has less free space; `what`
/// says what would be written (with the sizes it follows from), for the error.
///
/// # Errors
/// [`Error::DiskSpace`].
pub fn check(dir: &Path, needed: u64, what: impl FnOnce() -> String) -> Result<()> {
    match available(dir) {
        Some(free) if needed > free => Err(Error::DiskSpace {
            what: what(),
            needed_bytes: needed,
            available_bytes: free,
            path: dir.to_path_buf(),
        }),
        _ => Ok(()),
    }
}
