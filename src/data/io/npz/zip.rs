//! The zip container of an `.npz` file: the end-of-central-directory record (and its zip64
//! form, as numpy writes it), the central directory's entries, and [`Archive::array`], which
//! checks an entry (not encrypted; `stored` with matching sizes, or `deflate` with a declared
//! size possible for its compressed size; inside the file) and opens its data as an `.npy`
//! stream, CRC-32 checked, for [`ArrayReader`].

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use flate2::read::DeflateDecoder;

use super::bad;
use super::npy::ArrayReader;
use crate::data::io::check_file;
use crate::{Error, Result};

/// Deflate expands at most ~1032:1; a declared size beyond this ratio is a lie.
const MAX_DEFLATE_RATIO: u64 = 1100;

/// A little-endian cursor over bytes; `None` past the end.
struct Bytes<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Bytes<'a> {
    fn new(b: &'a [u8]) -> Self {
        Bytes { b, pos: 0 }
    }
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.b.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2)?.try_into().ok().map(u16::from_le_bytes)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)?.try_into().ok().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8)?.try_into().ok().map(u64::from_le_bytes)
    }
    fn remaining(&self) -> usize {
        self.b.len().saturating_sub(self.pos)
    }
}

/// One member of the archive, from the central directory.
struct Entry {
    name: String,
    flags: u16,
    method: u16,
    crc: u32,
    comp_size: u64,
    size: u64,
    offset: u64,
}

/// A zip archive: its central directory and the open file.
pub(super) struct Archive {
    pub(super) path: PathBuf,
    file: File,
    len: u64,
    entries: Vec<Entry>,
}

impl Archive {
    pub(super) fn open(path: &Path) -> Result<Archive> {
        check_file(path)?;
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        let mut ar = Archive {
            path: path.to_path_buf(),
            file,
            len,
            entries: Vec::new(),
        };
        ar.entries = ar.read_directory()?;
        Ok(ar)
    }

    fn bad(&self, msg: impl Into<String>) -> Error {
        bad(&self.path, msg)
    }

    /// `n` bytes at `offset` (the caller has checked that they lie inside the file).
    fn read_at(&self, offset: u64, n: usize) -> Result<Vec<u8>> {
        let mut f = &self.file;
        let mut buf = vec![0u8; n];
        f.seek(SeekFrom::Start(offset))
            .and_then(|_| f.read_exact(&mut buf))
            .map_err(|e| Error::io(&self.path, e))?;
        Ok(buf)
    }

    fn read_directory(&self) -> Result<Vec<Entry>> {
        let not_zip = || self.bad("not a zip archive (no end-of-central-directory record)");
        if self.len < 22 {
            return Err(not_zip());
        }
        let tail_len = self.len.min(22 + 65535);
        let tail_start = self.len - tail_len;
        let tail = self.read_at(tail_start, tail_len as usize)?;
        let pos = (0..=tail.len() - 22)
            .rev()
            .find(|&p| tail[p..p + 4] == [0x50, 0x4b, 0x05, 0x06])
            .ok_or_else(not_zip)?;
        let eocd = tail_start + pos as u64;
        let corrupt = |what: &str| self.bad(format!("corrupt zip archive: {what}"));
        let (disk, cd_disk, n_total, cd_size, cd_offset) =
            parse_end_record(&tail[pos + 4..]).ok_or_else(|| corrupt("truncated end record"))?;
        if (disk != 0 && disk != 0xFFFF) || (cd_disk != 0 && cd_disk != 0xFFFF) {
            return Err(self.bad("multi-disk zip archives are not supported"));
        }
        let (mut n_entries, mut cd_size, mut cd_offset) =
            (u64::from(n_total), u64::from(cd_size), u64::from(cd_offset));
        if n_total == 0xFFFF || cd_size == 0xFFFF_FFFF || cd_offset == 0xFFFF_FFFF {
            // zip64: a locator right before the end record points at the zip64 end record
            let loc_at = eocd
                .checked_sub(20)
                .ok_or_else(|| corrupt("no zip64 locator"))?;
            let loc = self.read_at(loc_at, 20)?;
            let mut c = Bytes::new(&loc);
            let rec_at = match (c.u32(), c.u32(), c.u64()) {
                (Some(0x0706_4b50), Some(_), Some(at))
                    if at.checked_add(56).is_some_and(|e| e <= loc_at) =>
                {
                    at
                }
                _ => return Err(corrupt("bad zip64 locator")),
            };
            let rec = self.read_at(rec_at, 56)?;
            (n_entries, cd_size, cd_offset) =
                parse_zip64_end_record(&rec).ok_or_else(|| corrupt("bad zip64 end record"))?;
        }
        if cd_offset.checked_add(cd_size).is_none_or(|e| e > eocd) {
            return Err(corrupt("central directory out of bounds"));
        }
        if n_entries > cd_size / 46 {
            return Err(corrupt(
                "more entries declared than the central directory holds",
            ));
        }
        let cd = self.read_at(cd_offset, cd_size as usize)?;
        let mut c = Bytes::new(&cd);
        let mut entries = Vec::with_capacity(n_entries as usize);
        for _ in 0..n_entries {
            let e = parse_central_entry(&mut c).ok_or_else(|| corrupt("bad central directory"))?;
            entries.push(e);
        }
        Ok(entries)
    }

    fn entry(&self, key: &str) -> Option<&Entry> {
        self.entries
            .iter()
            .find(|e| e.name == key || e.name.strip_suffix(".npy").is_some_and(|stem| stem == key))
    }

    pub(super) fn has(&self, key: &str) -> bool {
        self.entry(key).is_some()
    }

    /// The array names, for messages.
    pub(super) fn names(&self) -> String {
        let v: Vec<&str> = self
            .entries
            .iter()
            .map(|e| e.name.strip_suffix(".npy").unwrap_or(&e.name))
            .collect();
        if v.is_empty() {
            "none".into()
        } else {
            v.join(", ")
        }
    }

    /// Opens the array `key` and reads its `.npy` header.
    pub(super) fn array(&self, key: &str) -> Result<ArrayReader<'_>> {
        let Some(e) = self.entry(key) else {
            return Err(self.bad(format!("missing array '{key}'; arrays: {}", self.names())));
        };
        let what = format!("array '{key}'");
        if e.flags & 1 != 0 {
            return Err(self.bad(format!("{what}: encrypted zip entries are not supported")));
        }
        match e.method {
            0 if e.comp_size != e.size => {
                return Err(self.bad(format!(
                    "{what}: stored entry of {} bytes declares {} bytes",
                    e.comp_size, e.size
                )))
            }
            0 => {}
            8 if e.size
                > e.comp_size
                    .saturating_mul(MAX_DEFLATE_RATIO)
                    .saturating_add(1024) =>
            {
                return Err(self.bad(format!(
                    "{what}: declares {} bytes from {} compressed bytes, impossible for deflate",
                    e.size, e.comp_size
                )))
            }
            8 => {}
            m => {
                return Err(self.bad(format!(
                    "{what}: unsupported zip compression method {m} (stored and deflate are read)"
                )))
            }
        }
        let oob = || self.bad(format!("{what}: entry data runs past the end of the file"));
        if e.offset.checked_add(30).is_none_or(|end| end > self.len) {
            return Err(oob());
        }
        let local = self.read_at(e.offset, 30)?;
        let (name_len, extra_len) = parse_local_header(&local)
            .ok_or_else(|| self.bad(format!("{what}: bad local file header")))?;
        let start = e.offset + 30 + name_len + extra_len;
        if start
            .checked_add(e.comp_size)
            .is_none_or(|end| end > self.len)
        {
            return Err(oob());
        }
        let mut f = &self.file;
        f.seek(SeekFrom::Start(start))
            .map_err(|err| Error::io(&self.path, err))?;
        let raw = f.take(e.comp_size);
        let stream: Box<dyn Read + '_> = if e.method == 8 {
            Box::new(DeflateDecoder::new(raw))
        } else {
            Box::new(raw)
        };
        ArrayReader::new(&self.path, what, stream, e.size, Some(e.crc))
    }
}

/// The end-of-central-directory record after its signature: (disk, directory disk, entries,
/// directory size, directory offset).
fn parse_end_record(b: &[u8]) -> Option<(u16, u16, u16, u32, u32)> {
    let mut c = Bytes::new(b);
    let disk = c.u16()?;
    let cd_disk = c.u16()?;
    c.take(2)?; // entries on this disk
    Some((disk, cd_disk, c.u16()?, c.u32()?, c.u32()?))
}

/// The zip64 end record: (entries, directory size, directory offset).
fn parse_zip64_end_record(b: &[u8]) -> Option<(u64, u64, u64)> {
    let mut c = Bytes::new(b);
    if c.u32()? != 0x0606_4b50 {
        return None;
    }
    c.take(4 + 8 + 8 + 8)?; // record size, versions, disk numbers, entries on this disk
    Some((c.u64()?, c.u64()?, c.u64()?))
}

/// A local file header: (name length, extra field length).
fn parse_local_header(b: &[u8]) -> Option<(u64, u64)> {
    let mut c = Bytes::new(b);
    if c.u32()? != 0x0403_4b50 {
        return None;
    }
    c.take(22)?;
    Some((u64::from(c.u16()?), u64::from(c.u16()?)))
}

/// Parses one central directory header (zip64 sizes and offset included).
fn parse_central_entry(c: &mut Bytes<'_>) -> Option<Entry> {
    if c.u32()? != 0x0201_4b50 {
        return None;
    }
    c.take(4)?; // versions
    let flags = c.u16()?;
    let method = c.u16()?;
    c.take(4)?; // time, date
    let crc = c.u32()?;
    let comp32 = c.u32()?;
    let size32 = c.u32()?;
    let name_len = usize::from(c.u16()?);
    let extra_len = usize::from(c.u16()?);
    let comment_len = usize::from(c.u16()?);
    c.take(8)?; // disk, attributes
    let offset32 = c.u32()?;
    let name = String::from_utf8_lossy(c.take(name_len)?).into_owned();
    let extra = c.take(extra_len)?;
    c.take(comment_len)?;
    let (mut size, mut comp_size, mut offset) =
        (u64::from(size32), u64::from(comp32), u64::from(offset32));
    let mut x = Bytes::new(extra);
    while x.remaining() >= 4 {
        let id = x.u16()?;
        let len = usize::from(x.u16()?);
        let body = x.take(len)?;
        if id == 1 {
            let mut z = Bytes::new(body);
            if size32 == u32::MAX {
                size = z.u64()?;
            }
            if comp32 == u32::MAX {
                comp_size = z.u64()?;
            }
            if offset32 == u32::MAX {
                offset = z.u64()?;
            }
        }
    }
    Some(Entry {
        name,
        flags,
        method,
        crc,
        comp_size,
        size,
        offset,
    })
}
