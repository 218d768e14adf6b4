//! Writing a checkpoint (or any output of the CLI) to disk: the safetensors bytes with sorted
//! metadata keys (so identical models give identical files), and the atomic write that replaces
//! a regular file only, and only by a complete new one.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::WriteHook;
use crate::{Error, Result};

/// `s` as a JSON string (quoted, escaped as serde_json escapes).
fn push_json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if u32::from(c) < 0x20 => {
                let _ = std::fmt::Write::write_fmt(out, format_args!("\\u{:04x}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The safetensors bytes of `tensors` (F32, in the order given) with the metadata `meta`,
/// written here rather than by `safetensors::serialize`, whose metadata map is a `HashMap`:
/// the keys are written sorted, so that identical runs give identical files byte for byte.
/// The layout is the format's: an 8-byte little-endian header length, the JSON header
/// (`__metadata__` first, then each tensor's dtype, shape and data offsets) padded with spaces
/// to a multiple of 8 bytes, then the tensors' bytes.
pub(super) fn serialize(
    meta: &BTreeMap<String, String>,
    tensors: &[(String, Vec<usize>, Vec<u8>)],
) -> Vec<u8> {
    let mut h = String::from("{\"__metadata__\":{");
    for (i, (k, v)) in meta.iter().enumerate() {
        if i > 0 {
            h.push(',');
        }
        push_json_str(&mut h, k);
        h.push(':');
        push_json_str(&mut h, v);
    }
    h.push('}');
    let mut offset = 0usize;
    for (name, shape, data) in tensors {
        h.push(',');
        push_json_str(&mut h, name);
        let dims: Vec<String> = shape.iter().map(ToString::to_string).collect();
        let end = offset + data.len();
        h.push_str(&format!(
            ":{{\"dtype\":\"F32\",\"shape\":[{}],\"data_offsets\":[{offset},{end}]}}",
            dims.join(",")
        ));
        offset = end;
    }
    h.push('}');
    while !h.len().is_multiple_of(8) {
        h.push(' ');
    }
    let mut out = Vec::with_capacity(8 + h.len() + offset);
    out.extend_from_slice(&(h.len() as u64).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    for (_, _, data) in tensors {
        out.extend_from_slice(data);
    }
    out
}

/// Removes the temporary file on drop unless disarmed (also on a panic in the write hook).
struct TempGuard {
    path: PathBuf,
    armed: bool,
}

impl Drop for TempGuard {
    fn drop(&mut self) {
        if self.armed {
            // Best effort: the error that got us here matters more than this one.
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// `PATH.tmp-<pid>-<n>`, next to `path`.
fn temp_path(path: &Path) -> Result<PathBuf> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let Some(name) = path.file_name() else {
        return Err(Error::io(
            path,
            io::Error::new(io::ErrorKind::InvalidInput, "not a file path"),
        ));
    };
    let mut tmp = name.to_os_string();
    tmp.push(format!(
        ".tmp-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    Ok(path.with_file_name(tmp))
}

/// What `meta` describes when it is not a regular file (`a folder`, `a character device`, …),
/// for the errors of the writers, which replace regular files only.
pub fn not_regular_kind(meta: &fs::Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() {
        return None;
    }
    if t.is_dir() {
        return Some("a folder");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_char_device() {
            return Some("a character device");
        }
        if t.is_block_device() {
            return Some("a block device");
        }
        if t.is_fifo() {
            return Some("a FIFO");
        }
        if t.is_socket() {
            return Some("a socket");
        }
    }
    Some("not a regular file")
}

/// The file a write to `path` replaces: `path` itself (also when nothing is there yet), or the
/// file a symbolic link at `path` points to (the link is kept, as editors keep it).
///
/// # Errors
/// [`Error::NotRegularFile`] when the path (or the link's target) exists and is not a regular
/// file; [`Error::Io`] for a dangling link or an unreadable path.
fn write_target(path: &Path) -> Result<PathBuf> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(path.to_path_buf()),
        Err(e) => Err(Error::io(path, e)),
        Ok(m) if m.file_type().is_symlink() => {
            let target = fs::canonicalize(path).map_err(|e| {
                Error::io(
                    path,
                    io::Error::new(e.kind(), format!("a symbolic link to nothing ({e})")),
                )
            })?;
            let meta = fs::metadata(&target).map_err(|e| Error::io(&target, e))?;
            match not_regular_kind(&meta) {
                Some(kind) => Err(Error::NotRegularFile { path: target, kind }),
                None => Ok(target),
            }
        }
        Ok(m) => match not_regular_kind(&m) {
            Some(kind) => Err(Error::NotRegularFile {
                path: path.to_path_buf(),
                kind,
            }),
            None => Ok(path.to_path_buf()),
        },
    }
}

/// Writes `bytes` to `path` atomically (a temporary file next to it, synced, then renamed): an
/// existing file is replaced only by the complete new one, and a failed write leaves it as it
/// was. Used for checkpoints and for the CLI's outputs (predictions, embeddings, histories).
///
/// Only a regular file is ever replaced: a path that exists and is a folder, a device, a FIFO
/// or a socket is refused (checked before writing and again right before the rename). A
/// symbolic link to a regular file is followed: the file it points to is replaced and the link
/// kept.
///
/// # Errors
/// [`Error::NotRegularFile`]; [`Error::Io`] naming the file.
pub fn write_file_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic(path, bytes, &mut |w, b| w.write_all(b))
}

pub(super) fn write_atomic(path: &Path, bytes: &[u8], write: &mut WriteHook<'_>) -> Result<()> {
    let target = write_target(path)?;
    let tmp = temp_path(&target)?;
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| Error::io(&tmp, e))?;
    let mut guard = TempGuard {
        path: tmp.clone(),
        armed: true,
    };
    write(&mut file, bytes).map_err(|e| Error::io(&tmp, e))?;
    file.flush().map_err(|e| Error::io(&tmp, e))?;
    file.sync_all().map_err(|e| Error::io(&tmp, e))?;
    drop(file);
    // Again right before the rename: what is at the path may have changed while writing.
    if let Ok(m) = fs::symlink_metadata(&target) {
        if let Some(kind) = not_regular_kind(&m) {
            return Err(Error::NotRegularFile { path: target, kind });
        }
    }
    fs::rename(&tmp, &target).map_err(|e| Error::io(&target, e))?;
    guard.armed = false;
    sync_parent(&target);
    Ok(())
}

/// Makes the rename durable (best effort: not every platform can sync a directory).
fn sync_parent(path: &Path) {
    #[cfg(unix)]
    {
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        if let Ok(dir) = fs::File::open(parent) {
            let _ = dir.sync_all();
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}
