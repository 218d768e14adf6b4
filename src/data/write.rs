//! Writers: a [`Dataset`] in the OGB node-property-prediction raw layout ([`write_ogb`]), the
//! inverse of [`super::io::load_ogb`], so other tools (OGB, PyG, pandas) read the very same graph;
//! and an `f32` matrix as a NumPy `.npy` ([`npy_f32`]), which the `.npz` loaders' reader reads
//! back.
//!
//! ```text
//! DIR/raw/edge.csv.gz          "src,dst" per line: each undirected edge once with src < dst
//!                              (a self-loop once as "i,i"), sorted; every arc of a directed graph
//! DIR/raw/node-feat.csv.gz     N lines of F comma-separated numbers
//! DIR/raw/node-label.csv.gz    N lines, one class id each
//! DIR/raw/num-node-list.csv.gz one line: N
//! DIR/raw/num-edge-list.csv.gz one line: the number of lines of edge.csv.gz
//! DIR/split/<split name>/{train,valid,test}.csv.gz   one node id per line, sorted
//! ```

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use ndarray::ArrayView2;

use crate::data::FeaturesRef;

use flate2::write::GzEncoder;
use flate2::Compression;

use super::{Dataset, Features, Mask};
use crate::{Error, Result};

/// The bytes of a `.npy` file (format version 1.0) holding `a`: dtype `<f4`, C order, shape
/// `(rows, cols)`, as `numpy.load` reads it.
pub fn npy_f32(a: ArrayView2<'_, f32>) -> Vec<u8> {
    let (rows, cols) = a.dim();
    let mut header =
        format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    // Magic (6) + version (2) + header length (2) + header + '\n', padded to 64 bytes.
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + 4 * rows * cols);
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in a.iter() {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// Text buffered before each write to the compressor.
const CHUNK: usize = 1 << 20;
/// Lines between two progress reports.
const REPORT_EVERY: u64 = 1 << 18;

/// Writes `dataset` to the folder `dir` in the OGB raw layout (see the [module docs](self)),
/// creating the folders as needed. `load_ogb(dir, &OgbOptions::default())` gives back the same
/// graph, labels, split and features: dense features bit-exactly (each `f32` is written in the
/// shortest form that parses back to the same value), binary sparse features as `0`/`1`
/// (loaded dense unless [`super::io::OgbOptions::sparse_features_below`] is set, and then equal
/// to the original CSR), other sparse features with their values. `n_classes` is not stored: the
/// loader takes the largest label + 1.
///
/// `progress(stage, done, total)` is called from this thread with `stage` one of `"edges"`,
/// `"features"`, `"labels"`, `"split"`, with `done` = lines written so far of `total`.
///
/// **Atomic files.** Every file is first written as `<name>.tmp-<pid>` in its final folder;
/// only when all of them are complete are they renamed to their final names. On error the
/// temporary files are removed and no final file has been replaced. Other files already in
/// `dir` stay: a second split folder under `split/` makes `load_ogb` ask which split to use.
///
/// **Compression.** gzip level 1 (`Compression::fast()`): about 3× faster than the default
/// level 6 for files about 10–20 % larger, since a products-sized dataset is gigabytes of text.
///
/// # Errors
/// [`Error::Io`] naming the file for any create, write, sync or rename failure;
/// [`Error::Dataset`] for a split name that is not a plain folder name.
///
/// # Examples
/// ```no_run
/// use sparse_gcn::data::{synthetic::Preset, write::write_ogb};
/// let d = Preset::ArxivLike.generate(1)?;
/// write_ogb(&d, "A".as_ref(), &|stage, done, total| eprintln!("{stage}: {done}/{total}"))?;
/// # Ok::<(), sparse_gcn::Error>(())
/// ```
pub fn write_ogb(dataset: &Dataset, dir: &Path, progress: &dyn Fn(&str, u64, u64)) -> Result<()> {
    let split_name = &dataset.split.name;
    let plain = !split_name.is_empty()
        && split_name != "."
        && split_name != ".."
        && !split_name.contains(['/', '\\']);
    if !plain {
        return Err(Error::Dataset {
            path: dir.join("split"),
            msg: format!("split name {split_name:?} is not a plain folder name"),
        });
    }
    let raw = dir.join("raw");
    let split_dir = dir.join("split").join(split_name);
    for d in [&raw, &split_dir] {
        fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
    }
    let mut staged = Staged::default();
    let g = &dataset.graph;
    let n = g.n_nodes();

    // Edges first: their count goes to num-edge-list.
    let total = g.n_edges() as u64;
    let mut lines = 0u64;
    let directed = g.is_directed();
    staged.write(&raw.join("edge.csv.gz"), |w| {
        progress("edges", 0, total);
        for i in 0..n {
            for &j in g.neighbors(i) {
                if directed || j as usize >= i {
                    push_uint(&mut w.buf, i as u64);
                    w.buf.push(b',');
                    push_uint(&mut w.buf, u64::from(j));
                    w.buf.push(b'\n');
                    lines += 1;
                    if lines.is_multiple_of(REPORT_EVERY) {
                        progress("edges", lines, total);
                    }
                    w.flush_if_full()?;
                }
            }
        }
        progress("edges", lines, total);
        Ok(())
    })?;
    staged.write(&raw.join("num-edge-list.csv.gz"), |w| {
        push_uint(&mut w.buf, lines);
        w.buf.push(b'\n');
        Ok(())
    })?;
    staged.write(&raw.join("num-node-list.csv.gz"), |w| {
        push_uint(&mut w.buf, n as u64);
        w.buf.push(b'\n');
        Ok(())
    })?;
    staged.write(&raw.join("node-feat.csv.gz"), |w| {
        write_features(w, &dataset.features, progress)
    })?;
    staged.write(&raw.join("node-label.csv.gz"), |w| {
        let total = dataset.labels.len() as u64;
        progress("labels", 0, total);
        for &l in &dataset.labels {
            push_uint(&mut w.buf, u64::from(l));
            w.buf.push(b'\n');
            w.flush_if_full()?;
        }
        progress("labels", total, total);
        Ok(())
    })?;
    let s = &dataset.split;
    let total = (s.train.len() + s.valid.len() + s.test.len()) as u64;
    let mut done = 0u64;
    progress("split", 0, total);
    for (part, mask) in [("train", &s.train), ("valid", &s.valid), ("test", &s.test)] {
        staged.write(&split_dir.join(format!("{part}.csv.gz")), |w| {
            write_mask(w, mask)
        })?;
        done += mask.len() as u64;
        progress("split", done, total);
    }
    staged.commit()
}

/// Feature rows: dense values with `{}` (shortest round-trip form), binary sparse rows as 0/1.
fn write_features(
    w: &mut Out,
    features: &Features<f32>,
    progress: &dyn Fn(&str, u64, u64),
) -> Result<()> {
    let total = features.n_rows() as u64;
    progress("features", 0, total);
    let report = |r: usize| {
        if (r as u64 + 1).is_multiple_of(REPORT_EVERY / 16) {
            progress("features", r as u64 + 1, total);
        }
    };
    match features.get() {
        FeaturesRef::Dense(x) => {
            for (r, row) in x.outer_iter().enumerate() {
                for (k, v) in row.iter().enumerate() {
                    if k > 0 {
                        w.buf.push(b',');
                    }
                    // Writing to a Vec cannot fail.
                    let _ = write!(w.buf, "{v}");
                }
                w.buf.push(b'\n');
                w.flush_if_full()?;
                report(r);
            }
        }
        FeaturesRef::Sparse(s) => {
            let x = s.x();
            let f = x.cols();
            let binary = x.data().iter().all(|&v| v == 1.0);
            // "0,0,…,0\n": column j's digit sits at byte 2j.
            let zeros: Vec<u8> = (0..f)
                .flat_map(|k| [b'0', if k + 1 < f { b',' } else { b'\n' }])
                .collect();
            for (r, row) in x.outer_iterator().enumerate() {
                if binary {
                    let start = w.buf.len();
                    w.buf.extend_from_slice(&zeros);
                    for (j, _) in row.iter() {
                        w.buf[start + 2 * j] = b'1';
                    }
                } else {
                    let mut next = row.iter().peekable();
                    for j in 0..f {
                        if j > 0 {
                            w.buf.push(b',');
                        }
                        match next.peek() {
                            Some(&(k, &v)) if k == j => {
                                let _ = write!(w.buf, "{v}");
                                next.next();
                            }
                            _ => w.buf.push(b'0'),
                        }
                    }
                    w.buf.push(b'\n');
                }
                w.flush_if_full()?;
                report(r);
            }
        }
    }
    progress("features", total, total);
    Ok(())
}

fn write_mask(w: &mut Out, mask: &Mask) -> Result<()> {
    for &i in mask.indices() {
        push_uint(&mut w.buf, u64::from(i));
        w.buf.push(b'\n');
        w.flush_if_full()?;
    }
    Ok(())
}

/// Appends the decimal digits of `v`.
#[inline]
fn push_uint(buf: &mut Vec<u8>, mut v: u64) {
    let mut tmp = [0u8; 20];
    let mut k = tmp.len();
    loop {
        k -= 1;
        tmp[k] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf.extend_from_slice(&tmp[k..]);
}

/// A gzip file being written: text goes to `buf`, which is compressed in chunks.
struct Out {
    path: PathBuf,
    enc: GzEncoder<BufWriter<File>>,
    buf: Vec<u8>,
}

impl Out {
    fn flush_if_full(&mut self) -> Result<()> {
        if self.buf.len() >= CHUNK {
            self.flush()?;
        }
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        self.enc
            .write_all(&self.buf)
            .map_err(|e| Error::io(&self.path, e))?;
        self.buf.clear();
        Ok(())
    }
    fn finish(mut self) -> Result<()> {
        self.flush()?;
        let path = self.path;
        let file = self
            .enc
            .finish()
            .map_err(|e| Error::io(&path, e))?
            .into_inner()
            .map_err(|e| Error::io(&path, e.into_error()))?;
        file.sync_all().map_err(|e| Error::io(&path, e))
    }
}

/// Temporary files waiting to be renamed to their final names; removed if dropped uncommitted.
#[derive(Default)]
struct Staged {
    files: Vec<(PathBuf, PathBuf)>,
}

impl Staged {
    /// Writes `path` (as a temporary file) with `body`, which fills [`Out::buf`].
    fn write(&mut self, path: &Path, body: impl FnOnce(&mut Out) -> Result<()>) -> Result<()> {
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(format!(".tmp-{}", std::process::id()));
        let tmp = path.with_file_name(name);
        let file = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        // Registered before writing, so a failure below removes it.
        self.files.push((tmp.clone(), path.to_path_buf()));
        let mut out = Out {
            path: tmp,
            enc: GzEncoder::new(BufWriter::with_capacity(CHUNK, file), Compression::fast()),
            buf: Vec::with_capacity(CHUNK + 4096),
        };
        body(&mut out)?;
        out.finish()
    }

    /// Renames every temporary file to its final name.
    fn commit(mut self) -> Result<()> {
        let files = std::mem::take(&mut self.files);
        for (k, (tmp, path)) in files.iter().enumerate() {
            if let Err(e) = fs::rename(tmp, path) {
                for (t, _) in &files[k..] {
                    let _ = fs::remove_file(t);
                }
                return Err(Error::io(path, e));
            }
        }
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        for (tmp, _) in &self.files {
            let _ = fs::remove_file(tmp);
        }
    }
}
