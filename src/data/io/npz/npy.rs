//! `.npy` arrays, in an archive or a file of their own: the header (its magic, version and
//! Python dict literal, parsed by a small parser of the subset numpy writes), the dtype (integers,
//! floats, bools, byte and UCS-4 strings, either byte order), and [`ArrayReader`], which checks
//! that shape × item size equals the bytes stored, then streams the elements, widened, growing
//! its output only as data arrives, and at the end checks that the stream is exhausted and its
//! CRC-32 matches.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use flate2::CrcReader;

use super::bad;
use crate::data::io::{alloc_error, check_file};
use crate::{Error, Result};

/// Largest accepted `.npy` header.
const MAX_NPY_HEADER: usize = 1 << 20;
/// Largest initial reservation for an array (it grows as data arrives).
const MAX_INITIAL_RESERVE: usize = 1 << 20;

/// The element kinds of `.npy` dtypes that are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int,
    UInt,
    Float,
    Bool,
    /// `S`: fixed-width bytes.
    Bytes,
    /// `U`: fixed-width UCS-4.
    Unicode,
}

/// A parsed dtype descriptor such as `<i4`, `>f8`, `|b1`, `|S3`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct DType {
    kind: Kind,
    /// Bytes per element.
    size: usize,
    big_endian: bool,
    descr: String,
}

impl DType {
    fn parse(descr: &str) -> Option<DType> {
        let b = descr.as_bytes();
        let (big_endian, rest) = match b.first()? {
            b'<' | b'|' | b'=' => (false, &b[1..]),
            b'>' => (true, &b[1..]),
            _ => (false, b),
        };
        let (&k, digits) = rest.split_first()?;
        let n: usize = std::str::from_utf8(digits).ok()?.parse().ok()?;
        let (kind, size) = match (k, n) {
            (b'i', 1 | 2 | 4 | 8) => (Kind::Int, n),
            (b'u', 1 | 2 | 4 | 8) => (Kind::UInt, n),
            (b'f', 4 | 8) => (Kind::Float, n),
            (b'b', 1) => (Kind::Bool, 1),
            (b'S' | b'a', 1..=65536) => (Kind::Bytes, n),
            (b'U', 1..=65536) => (Kind::Unicode, 4 * n),
            _ => return None,
        };
        Some(DType {
            kind,
            size,
            big_endian,
            descr: descr.to_string(),
        })
    }
}

/// A parsed `.npy` header.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Header {
    dtype: DType,
    pub(super) fortran: bool,
    pub(super) shape: Vec<usize>,
    /// Number of elements (1 for a 0-d array).
    len: usize,
}

/// A value of the Python literal subset `.npy` headers use.
#[derive(Debug)]
enum PyValue {
    Str(String),
    Bool(bool),
    Tuple(Vec<u64>),
}

/// A parser for the dict literal of a `.npy` header.
struct PyParser<'a> {
    s: &'a [u8],
    i: usize,
}

impl PyParser<'_> {
    fn ws(&mut self) {
        while self.s.get(self.i).is_some_and(|c| c.is_ascii_whitespace()) {
            self.i += 1;
        }
    }
    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, c: u8) -> std::result::Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!("expected '{}' at byte {}", c as char, self.i))
        }
    }
    fn string(&mut self) -> std::result::Result<String, String> {
        self.ws();
        let q = match self.s.get(self.i) {
            Some(&q @ (b'\'' | b'"')) => q,
            _ => return Err(format!("expected a string at byte {}", self.i)),
        };
        let start = self.i + 1;
        let len = self.s[start..]
            .iter()
            .position(|&c| c == q)
            .ok_or("unterminated string")?;
        self.i = start + len + 1;
        Ok(String::from_utf8_lossy(&self.s[start..start + len]).into_owned())
    }
    fn int(&mut self) -> std::result::Result<u64, String> {
        self.ws();
        let start = self.i;
        while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        let digits = std::str::from_utf8(&self.s[start..self.i]).unwrap_or_default();
        let v = digits
            .parse::<u64>()
            .map_err(|e| format!("bad integer at byte {start}: {e}"))?;
        if self.s.get(self.i) == Some(&b'L') {
            self.i += 1; // Python 2 long
        }
        Ok(v)
    }
    fn value(&mut self) -> std::result::Result<PyValue, String> {
        self.ws();
        let rest = &self.s[self.i.min(self.s.len())..];
        if rest.starts_with(b"True") {
            self.i += 4;
            return Ok(PyValue::Bool(true));
        }
        if rest.starts_with(b"False") {
            self.i += 5;
            return Ok(PyValue::Bool(false));
        }
        match rest.first() {
            Some(b'\'' | b'"') => self.string().map(PyValue::Str),
            Some(b'(') => {
                self.i += 1;
                let mut v = Vec::new();
                loop {
                    if self.eat(b')') {
                        break;
                    }
                    v.push(self.int()?);
                    if !self.eat(b',') {
                        self.expect(b')')?;
                        break;
                    }
                }
                Ok(PyValue::Tuple(v))
            }
            Some(b'[') => Err("structured dtypes are not supported".into()),
            _ => Err(format!("unexpected value at byte {}", self.i)),
        }
    }
    /// Parses `{'descr': …, 'fortran_order': …, 'shape': (…), }`.
    fn header(&mut self) -> std::result::Result<(String, bool, Vec<u64>), String> {
        self.expect(b'{')?;
        let (mut descr, mut fortran, mut shape) = (None, None, None);
        loop {
            if self.eat(b'}') {
                break;
            }
            let key = self.string()?;
            self.expect(b':')?;
            let v = self.value()?;
            match (key.as_str(), v) {
                ("descr", PyValue::Str(s)) => descr = Some(s),
                ("fortran_order", PyValue::Bool(b)) => fortran = Some(b),
                ("shape", PyValue::Tuple(t)) => shape = Some(t),
                ("descr" | "fortran_order" | "shape", v) => {
                    return Err(format!("bad value for '{key}': {v:?}"))
                }
                _ => {}
            }
            if !self.eat(b',') {
                self.expect(b'}')?;
                break;
            }
        }
        match (descr, fortran, shape) {
            (Some(d), Some(f), Some(s)) => Ok((d, f, s)),
            _ => Err("missing 'descr', 'fortran_order' or 'shape'".into()),
        }
    }
}

/// An `.npy` array being read: its header, then its elements, streamed.
pub(super) struct ArrayReader<'a> {
    pub(super) path: &'a Path,
    /// `array 'key'` inside an archive, `array` for a `.npy` file.
    pub(super) what: String,
    pub(super) header: Header,
    stream: BufReader<CrcReader<Box<dyn Read + 'a>>>,
    crc: Option<u32>,
}

/// One element, widened.
#[derive(Clone, Copy)]
enum Elem {
    I(i64),
    U(u64),
    F(f64),
}

impl<'a> ArrayReader<'a> {
    /// Reads the header of an `.npy` stream of `size` bytes whose CRC-32 must be `crc`.
    pub(super) fn new(
        path: &'a Path,
        what: String,
        stream: Box<dyn Read + 'a>,
        size: u64,
        crc: Option<u32>,
    ) -> Result<Self> {
        let mut stream = BufReader::with_capacity(1 << 16, CrcReader::new(stream));
        let bad_h = |msg: String| bad(path, format!("{what}: malformed .npy header: {msg}"));
        let io = |e| Error::io(path, e);
        let mut pre = [0u8; 8];
        if size < 10 {
            return Err(bad_h(format!("{size} bytes is too short")));
        }
        stream.read_exact(&mut pre).map_err(io)?;
        if &pre[..6] != b"\x93NUMPY" {
            return Err(bad_h("no \\x93NUMPY magic".into()));
        }
        let header_len = match pre[6] {
            1 => {
                let mut b = [0u8; 2];
                stream.read_exact(&mut b).map_err(io)?;
                usize::from(u16::from_le_bytes(b))
            }
            2 | 3 => {
                let mut b = [0u8; 4];
                stream.read_exact(&mut b).map_err(io)?;
                u32::from_le_bytes(b) as usize
            }
            v => return Err(bad_h(format!("unsupported format version {v}"))),
        };
        let prefix = if pre[6] == 1 { 10 } else { 12 } + header_len as u64;
        if header_len > MAX_NPY_HEADER || prefix > size {
            return Err(bad_h(format!(
                "header of {header_len} bytes in an entry of {size}"
            )));
        }
        let mut text = vec![0u8; header_len];
        stream.read_exact(&mut text).map_err(io)?;
        let (descr, fortran, shape) = PyParser { s: &text, i: 0 }.header().map_err(bad_h)?;
        let dtype = DType::parse(&descr).ok_or_else(|| {
            bad(
                path,
                format!("{what}: unsupported dtype {descr:?} (integers, floats, bools, byte strings are read)"),
            )
        })?;
        let shape: Vec<usize> = shape
            .into_iter()
            .map(|d| usize::try_from(d).unwrap_or(usize::MAX))
            .collect();
        let len = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        let bytes = len.and_then(|l| l.checked_mul(dtype.size));
        let data = size - prefix;
        let (Some(len), Some(bytes)) = (len, bytes) else {
            return Err(bad(path, format!("{what}: absurd shape {shape:?}")));
        };
        if bytes as u64 != data {
            return Err(bad(
                path,
                format!(
                    "{what}: shape {shape:?} of {} needs {bytes} bytes of data, the entry holds {data}",
                    dtype.descr
                ),
            ));
        }
        Ok(ArrayReader {
            path,
            what,
            header: Header {
                dtype,
                fortran,
                shape,
                len,
            },
            stream,
            crc,
        })
    }

    /// A standalone `.npy` file.
    pub(super) fn from_npy_file(path: &'a Path) -> Result<Self> {
        check_file(path)?;
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
        ArrayReader::new(path, "array".into(), Box::new(file), size, None)
    }

    pub(super) fn bad(&self, msg: impl std::fmt::Display) -> Error {
        bad(self.path, format!("{}: {msg}", self.what))
    }

    pub(super) fn mismatch(&self, what: &str, expected: usize, got: usize) -> Error {
        Error::Mismatch {
            what: format!("{}: {} {what}", self.path.display(), self.what),
            expected,
            got,
        }
    }

    /// The length of a 1-D array (an error for other shapes).
    pub(super) fn vector_len(&self) -> Result<usize> {
        match *self.header.shape.as_slice() {
            [n] => Ok(n),
            _ => Err(self.bad(format!(
                "expected a 1-D array, got shape {:?}",
                self.header.shape
            ))),
        }
    }

    /// Reads every element through `f`; integer (and bool) dtypes only.
    pub(super) fn ints<T>(self, mut f: impl FnMut(usize, i64) -> Result<T>) -> Result<Vec<T>> {
        if !matches!(self.header.dtype.kind, Kind::Int | Kind::UInt | Kind::Bool) {
            let msg = format!(
                "dtype {}, expected an integer type",
                self.header.dtype.descr
            );
            return Err(self.bad(msg));
        }
        let (path, what) = (self.path, self.what.clone());
        self.elems(|k, e| match e {
            Elem::I(v) => f(k, v),
            Elem::U(v) => match i64::try_from(v) {
                Ok(v) => f(k, v),
                Err(_) => Err(bad(path, format!("{what}[{k}] = {v} is too large"))),
            },
            Elem::F(v) => f(k, v as i64),
        })
    }

    /// Reads every element through `f`, widened to `f64`; any numeric or bool dtype.
    pub(super) fn floats<T>(self, mut f: impl FnMut(usize, f64) -> Result<T>) -> Result<Vec<T>> {
        if matches!(self.header.dtype.kind, Kind::Bytes | Kind::Unicode) {
            let msg = format!("dtype {}, expected a number type", self.header.dtype.descr);
            return Err(self.bad(msg));
        }
        self.elems(|k, e| match e {
            Elem::I(v) => f(k, v as f64),
            Elem::U(v) => f(k, v as f64),
            Elem::F(v) => f(k, v),
        })
    }

    /// Reads a 0-d (or one-element) string array, NULs trimmed.
    pub(super) fn string(mut self) -> Result<String> {
        let dt = self.header.dtype.clone();
        if !matches!(dt.kind, Kind::Bytes | Kind::Unicode) || self.header.len != 1 {
            let msg = format!(
                "expected one string, got dtype {} and shape {:?}",
                dt.descr, self.header.shape
            );
            return Err(self.bad(msg));
        }
        let mut buf = vec![0u8; dt.size];
        self.stream
            .read_exact(&mut buf)
            .map_err(|e| Error::io(self.path, e))?;
        self.finish()?;
        let s = if dt.kind == Kind::Bytes {
            String::from_utf8_lossy(&buf).into_owned()
        } else {
            buf.chunks_exact(4)
                .map(|c| {
                    let b = [c[0], c[1], c[2], c[3]];
                    let u = if dt.big_endian {
                        u32::from_be_bytes(b)
                    } else {
                        u32::from_le_bytes(b)
                    };
                    char::from_u32(u).unwrap_or('\u{fffd}')
                })
                .collect()
        };
        Ok(s.trim_end_matches('\0').trim().to_string())
    }

    /// Streams the elements through `f`, then checks the end of the stream and the CRC.
    fn elems<T>(mut self, mut f: impl FnMut(usize, Elem) -> Result<T>) -> Result<Vec<T>> {
        let dt = self.header.dtype.clone();
        if dt.size > 8 {
            return Err(self.bad(format!("dtype {} is not a number type", dt.descr)));
        }
        let n = self.header.len;
        let mut out = Vec::new();
        out.try_reserve(n.min(MAX_INITIAL_RESERVE))
            .map_err(|e| alloc_error(self.path, &self.what, e))?;
        let mut buf = [0u8; 8];
        let io = |e| Error::io(self.path, e);
        for k in 0..n {
            let b = &mut buf[..dt.size];
            self.stream.read_exact(b).map_err(io)?;
            let mut u = 0u64;
            if dt.big_endian {
                for &x in b.iter() {
                    u = (u << 8) | u64::from(x);
                }
            } else {
                for &x in b.iter().rev() {
                    u = (u << 8) | u64::from(x);
                }
            }
            let e = match dt.kind {
                Kind::Int => {
                    let shift = 64 - 8 * dt.size as u32;
                    Elem::I(((u << shift) as i64) >> shift)
                }
                Kind::UInt | Kind::Bool => Elem::U(u),
                Kind::Float if dt.size == 4 => Elem::F(f64::from(f32::from_bits(u as u32))),
                _ => Elem::F(f64::from_bits(u)),
            };
            out.push(f(k, e)?);
        }
        self.finish()?;
        Ok(out)
    }

    /// Checks that the stream is exhausted and, in an archive, that the CRC-32 matches.
    fn finish(mut self) -> Result<()> {
        let mut one = [0u8; 1];
        let extra = self
            .stream
            .read(&mut one)
            .map_err(|e| Error::io(self.path, e))?;
        if extra != 0 {
            return Err(self.bad("more data than its shape"));
        }
        if let Some(want) = self.crc {
            let got = self.stream.get_ref().crc().sum();
            if got != want {
                return Err(self.bad(format!(
                    "CRC-32 mismatch (stored {want:08x}, computed {got:08x}): corrupt archive"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writer_s_files_read_back() {
        // data::write::npy_f32 (the CLI's predict and embed) through this reader: same header
        // checks, shape and values, and a 64-byte aligned header as numpy writes it.
        let a = ndarray::array![[1.0f32, 2.0, 3.0], [4.0, -0.5, f32::MIN_POSITIVE]];
        let b = crate::data::write::npy_f32(a.view());
        let hlen = usize::from(u16::from_le_bytes([b[8], b[9]]));
        assert_eq!((10 + hlen) % 64, 0);
        assert_eq!(b[10 + hlen - 1], b'\n');
        let path = Path::new("written.npy");
        let r = ArrayReader::new(path, "x".into(), Box::new(&b[..]), b.len() as u64, None).unwrap();
        assert_eq!(r.header.shape, vec![2, 3]);
        assert!(!r.header.fortran);
        let v = r.floats(|_, x| Ok(x as f32)).unwrap();
        assert_eq!(v, a.iter().copied().collect::<Vec<_>>());
        let empty = crate::data::write::npy_f32(ndarray::Array2::<f32>::zeros((0, 4)).view());
        let r = ArrayReader::new(
            path,
            "x".into(),
            Box::new(&empty[..]),
            empty.len() as u64,
            None,
        );
        assert_eq!(r.unwrap().header.shape, vec![0, 4]);
    }

    #[test]
    fn dtypes_parse() {
        let d = DType::parse("<i4").unwrap();
        assert_eq!((d.kind, d.size, d.big_endian), (Kind::Int, 4, false));
        let d = DType::parse(">f8").unwrap();
        assert_eq!((d.kind, d.size, d.big_endian), (Kind::Float, 8, true));
        assert_eq!(DType::parse("|S3").unwrap().size, 3);
        assert_eq!(DType::parse("<U3").unwrap().size, 12);
        assert_eq!(DType::parse("|b1").unwrap().kind, Kind::Bool);
        for bad in ["", "<", "<i3", "<f2", "|O", "<c16", "<i4x", "é4", "<U0"] {
            assert!(DType::parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn headers_parse() {
        let h = b"{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }     \n";
        let got = PyParser { s: h, i: 0 }.header().unwrap();
        assert_eq!(got, ("<i4".to_string(), false, vec![4]));
        let h = b"{\"shape\": (2L, 3), \"descr\": \">f8\", \"fortran_order\": True}";
        let got = PyParser { s: h, i: 0 }.header().unwrap();
        assert_eq!(got, (">f8".to_string(), true, vec![2, 3]));
        let h = b"{'descr': '|S3', 'fortran_order': False, 'shape': (), }";
        assert_eq!(
            PyParser { s: h, i: 0 }.header().unwrap().2,
            Vec::<u64>::new()
        );
        for bad in [
            &b"{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,)}"[..],
            b"{'descr': '<i4', 'shape': (1,)}",
            b"{'descr': '<i4', 'fortran_order': 0, 'shape': (1,)}",
            b"{'descr': '<i4', 'fortran_order': False, 'shape': (99999999999999999999999,)}",
            b"{'descr': '<i4', 'fortran_order': False, 'shape': (1,",
            b"",
            b"{'descr",
        ] {
            assert!(PyParser { s: bad, i: 0 }.header().is_err(), "{bad:?}");
        }
    }
}
