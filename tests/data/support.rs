//! Helpers shared by `tests/suite/io_errors.rs` and `tests/suite/io_fuzz.rs` (included with `#[path]`):
//! scratch folders, the valid templates of every loader, and writers for `.npy`, stored zip
//! (`.npz`) and gzip files. `binary_fixtures()` generates every binary file of `bad/`.
#![allow(dead_code)]

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use flate2::write::GzEncoder;
use flate2::Compression;

/// `tests/data`.
pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

/// `tests/data/bad`.
pub fn bad_dir() -> PathBuf {
    data_dir().join("bad")
}

/// A scratch folder `<tmp>/sparse-gcn-<tag>-<pid>-<k>`, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let k = COUNTER.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("sparse-gcn-{tag}-{}-{k}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
    /// Writes `bytes` to `rel` (creating folders) and returns the path.
    pub fn put(&self, rel: &str, bytes: &[u8]) -> PathBuf {
        let p = self.0.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, bytes).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

pub fn gzip(content: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    enc.write_all(content).unwrap();
    enc.finish().unwrap()
}

// ---------------------------------------------------------------------------------------------
// Valid templates (6 nodes: edges 0-1, 1-2, 2-0, 3-4 (+ 4-5 in the edge list), 3 classes)
// ---------------------------------------------------------------------------------------------

/// The files of a valid OGB folder: (stem under the dataset folder, content).
pub const OGB_FILES: [(&str, &str); 8] = [
    ("raw/num-node-list", "6\n"),
    ("raw/num-edge-list", "5\n"),
    ("raw/edge", "0,1\n1,2\n2,0\n3,4\n1,0\n"),
    (
        "raw/node-feat",
        "1,0,0\n0, 1.5e-3 ,0\n0,0,1\n2.5,0,0\n0,-1,0\n0,0,0\n",
    ),
    ("raw/node-label", "0\n1\n2\n1\n0\n2\n"),
    ("split/public/train", "0\n1\n"),
    ("split/public/valid", "2\n3\n"),
    ("split/public/test", "4\n5\n"),
];

/// Writes a valid OGB folder `<dir>/tiny`, its files gzipped where `gz(i)` says, and returns
/// the folder.
pub fn write_ogb(dir: &TempDir, gz: impl Fn(usize) -> bool) -> PathBuf {
    for (i, (stem, content)) in OGB_FILES.iter().enumerate() {
        if gz(i) {
            dir.put(&format!("tiny/{stem}.csv.gz"), &gzip(content.as_bytes()));
        } else {
            dir.put(&format!("tiny/{stem}.csv"), content.as_bytes());
        }
    }
    dir.path().join("tiny")
}

/// Replaces the file `stem` of an OGB folder by `bytes`, named `.csv.gz` when `gz`.
pub fn replace_ogb_file(ogb: &Path, stem: &str, bytes: &[u8], gz: bool) -> PathBuf {
    for ext in [".csv", ".csv.gz"] {
        let _ = fs::remove_file(ogb.join(format!("{stem}{ext}")));
    }
    let p = ogb.join(format!("{stem}{}", if gz { ".csv.gz" } else { ".csv" }));
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(&p, bytes).unwrap();
    p
}

/// A valid edge list of 6 nodes, with comments, blank lines and mixed separators.
pub const EDGE_LIST: &str = "# tiny graph\n0 1\n1\t2\n\n2,0\n3, 4 % trailing comment\n4 5\n";
/// Features for [`EDGE_LIST`]: 6 rows of 3.
pub const EDGE_FEATS: &str = "1 0 0\n0 1.5e-3 0\n0,0,1\n2.5 0 0\n0 -1 0\n0 0 0\n";
/// Labels for [`EDGE_LIST`].
pub const EDGE_LABELS: &str = "0\n1\n2\n1\n0\n2\n";

// ---------------------------------------------------------------------------------------------
// .npy and stored zip writers
// ---------------------------------------------------------------------------------------------

/// An `.npy` (version 1.0) file: `descr`, `shape`, raw little-endian `data`.
pub fn npy(descr: &str, shape: &[u64], fortran: bool, data: &[u8]) -> Vec<u8> {
    let dims = match shape {
        [] => "()".to_string(),
        [a] => format!("({a},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let order = if fortran { "True" } else { "False" };
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {dims}, }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(data);
    out
}

pub fn npy_i64(v: &[i64]) -> Vec<u8> {
    let d: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    npy("<i8", &[v.len() as u64], false, &d)
}

pub fn npy_i32(v: &[i32]) -> Vec<u8> {
    let d: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    npy("<i4", &[v.len() as u64], false, &d)
}

pub fn npy_f32(v: &[f32]) -> Vec<u8> {
    let d: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    npy("<f4", &[v.len() as u64], false, &d)
}

/// A 0-d byte string, as `np.array(b'csr')` (`|S3`).
pub fn npy_str(s: &str) -> Vec<u8> {
    npy(&format!("|S{}", s.len()), &[], false, s.as_bytes())
}

/// One member of a zip written by [`zip`].
pub struct ZipMember {
    pub name: String,
    pub data: Vec<u8>,
    /// The method written in the headers (the data is always stored as given).
    pub method: u16,
    /// Overrides the uncompressed size written in the central directory.
    pub size: Option<u32>,
    /// Overrides the CRC-32 written in the headers.
    pub crc: Option<u32>,
}

impl ZipMember {
    pub fn stored(name: &str, data: Vec<u8>) -> ZipMember {
        ZipMember {
            name: name.to_string(),
            data,
            method: 0,
            size: None,
            crc: None,
        }
    }
}

/// A deterministic zip archive of `members` (no compression, fixed dates).
pub fn zip(members: &[ZipMember]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for m in members {
        let mut crc = flate2::Crc::new();
        crc.update(&m.data);
        let crc = m.crc.unwrap_or(crc.sum());
        let comp = m.data.len() as u32;
        let size = m.size.unwrap_or(comp);
        let offset = out.len() as u32;
        let name = m.name.as_bytes();
        let common = |b: &mut Vec<u8>| {
            b.extend_from_slice(&20u16.to_le_bytes()); // version needed
            b.extend_from_slice(&0u16.to_le_bytes()); // flags
            b.extend_from_slice(&m.method.to_le_bytes());
            b.extend_from_slice(&0u16.to_le_bytes()); // time
            b.extend_from_slice(&33u16.to_le_bytes()); // date 1980-01-01
            b.extend_from_slice(&crc.to_le_bytes());
            b.extend_from_slice(&comp.to_le_bytes());
            b.extend_from_slice(&size.to_le_bytes());
            b.extend_from_slice(&(name.len() as u16).to_le_bytes());
            b.extend_from_slice(&0u16.to_le_bytes()); // extra length
        };
        out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        common(&mut out);
        out.extend_from_slice(name);
        out.extend_from_slice(&m.data);
        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        central.extend_from_slice(&20u16.to_le_bytes()); // version made by
        common(&mut central);
        central.extend_from_slice(&0u16.to_le_bytes()); // comment length
        central.extend_from_slice(&0u16.to_le_bytes()); // disk
        central.extend_from_slice(&0u16.to_le_bytes()); // internal attributes
        central.extend_from_slice(&0u32.to_le_bytes()); // external attributes
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name);
    }
    let cd_offset = out.len() as u32;
    let n = members.len() as u16;
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&cd_offset.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

/// A stored `.npz` of `arrays` (names without `.npy`).
pub fn npz(arrays: &[(String, Vec<u8>)]) -> Vec<u8> {
    let m: Vec<ZipMember> = arrays
        .iter()
        .map(|(k, v)| ZipMember::stored(&format!("{k}.npy"), v.clone()))
        .collect();
    zip(&m)
}

/// The arrays of a valid gnn-benchmark file: the 6-node graph, CSR features, labels.
pub fn benchmark_arrays() -> Vec<(String, Vec<u8>)> {
    let a = [
        ("adj_data", npy_f32(&[1.0; 8])),
        ("adj_indices", npy_i32(&[1, 2, 0, 2, 0, 1, 4, 3])),
        ("adj_indptr", npy_i32(&[0, 2, 4, 6, 7, 8, 8])),
        ("adj_shape", npy_i64(&[6, 6])),
        ("attr_data", npy_f32(&[1.0, 1.5, 1.0, 2.5, -1.0])),
        ("attr_indices", npy_i32(&[0, 1, 2, 0, 1])),
        ("attr_indptr", npy_i32(&[0, 1, 2, 3, 4, 5, 5])),
        ("attr_shape", npy_i64(&[6, 3])),
        ("labels", npy_i64(&[0, 1, 2, 1, 0, 2])),
    ];
    a.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// The arrays of a valid `scipy.sparse.save_npz` CSR adjacency of the 6-node graph.
pub fn scipy_adj_arrays() -> Vec<(String, Vec<u8>)> {
    let a = [
        ("indices", npy_i32(&[1, 2, 0, 2, 0, 1, 4, 3])),
        ("indptr", npy_i32(&[0, 2, 4, 6, 7, 8, 8])),
        ("format", npy_str("csr")),
        ("shape", npy_i64(&[6, 6])),
        ("data", npy_f32(&[1.0; 8])),
    ];
    a.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// The arrays of a valid `save_npz` CSR feature matrix (6 × 3) for the 6-node graph.
pub fn scipy_feat_arrays() -> Vec<(String, Vec<u8>)> {
    let a = [
        ("indices", npy_i32(&[0, 1, 2, 0, 1])),
        ("indptr", npy_i32(&[0, 1, 2, 3, 4, 5, 5])),
        ("format", npy_str("csr")),
        ("shape", npy_i64(&[6, 3])),
        ("data", npy_f32(&[1.0, 1.5, 1.0, 2.5, -1.0])),
    ];
    a.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// `arrays` with `key` replaced by (or, if absent, added as) `value`.
pub fn with(arrays: &[(String, Vec<u8>)], key: &str, value: Vec<u8>) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<_> = arrays.iter().filter(|(k, _)| k != key).cloned().collect();
    out.push((key.to_string(), value));
    out
}

/// `arrays` without `key`.
pub fn without(arrays: &[(String, Vec<u8>)], key: &str) -> Vec<(String, Vec<u8>)> {
    arrays.iter().filter(|(k, _)| k != key).cloned().collect()
}

/// Every binary fixture of `bad/`, generated: (file name, bytes). The `.npz` files are stored
/// zips, so the bytes are reproducible; the `.gz` files depend on the deflate implementation.
pub fn binary_fixtures() -> Vec<(&'static str, Vec<u8>)> {
    let b = benchmark_arrays();
    let s = scipy_adj_arrays();
    let f = scipy_feat_arrays();
    let stored = |name: &str, data: Vec<u8>| ZipMember::stored(name, data);
    let members = |arrays: &[(String, Vec<u8>)]| -> Vec<ZipMember> {
        arrays
            .iter()
            .map(|(k, v)| stored(&format!("{k}.npy"), v.clone()))
            .collect()
    };
    let valid = npz(&b);
    // a deflate member declaring 4 GB from ~200 bytes
    let mut absurd_zip = members(&b);
    for m in absurd_zip.iter_mut().filter(|m| m.name == "adj_indptr.npy") {
        m.method = 8;
        m.size = Some(4_000_000_000);
    }
    let mut bad_crc = members(&b);
    for m in bad_crc.iter_mut().filter(|m| m.name == "adj_indices.npy") {
        m.crc = Some(0xdead_beef);
    }
    let mut bad_magic = npy_i32(&[0, 2, 4, 6, 7, 8, 8]);
    bad_magic[1..6].copy_from_slice(b"NUMPZ");
    let edges_gz = gzip(OGB_FILES[2].1.as_bytes());
    let el_gz = gzip(EDGE_LIST.as_bytes());
    vec![
        (
            "ogb_edges_truncated.csv.gz",
            edges_gz[..edges_gz.len() - 12].to_vec(),
        ),
        ("el_truncated.txt.gz", el_gz[..el_gz.len() - 10].to_vec()),
        ("el_not_utf8.txt", b"0 1\n\xff\xfe 2\n".to_vec()),
        ("npz_truncated.npz", valid[..valid.len() / 2].to_vec()),
        ("npz_missing_key.npz", npz(&without(&b, "adj_indptr"))),
        (
            "npz_wrong_dtype.npz",
            npz(&with(
                &b,
                "adj_indices",
                npy_f32(&[1., 2., 0., 2., 0., 1., 4., 3.]),
            )),
        ),
        (
            "npz_indptr_not_monotone.npz",
            npz(&with(&b, "adj_indptr", npy_i32(&[0, 2, 4, 3, 7, 8, 8]))),
        ),
        (
            "npz_indptr_not_from_zero.npz",
            npz(&with(&b, "adj_indptr", npy_i32(&[1, 2, 4, 6, 7, 8, 8]))),
        ),
        (
            "npz_indices_out_of_range.npz",
            npz(&with(&b, "adj_indices", npy_i32(&[1, 2, 0, 2, 0, 1, 9, 3]))),
        ),
        (
            "npz_negative_index.npz",
            npz(&with(
                &b,
                "adj_indices",
                npy_i32(&[1, 2, 0, 2, -1, 1, 4, 3]),
            )),
        ),
        (
            "npz_indptr_length_mismatch.npz",
            npz(&with(&b, "adj_indptr", npy_i32(&[0, 2, 4, 6, 8]))),
        ),
        (
            "npz_data_length_mismatch.npz",
            npz(&with(&b, "adj_data", npy_f32(&[1.0; 7]))),
        ),
        (
            "npz_non_square.npz",
            npz(&with(&b, "adj_shape", npy_i64(&[6, 7]))),
        ),
        (
            "npz_absurd_shape.npz",
            npz(&with(
                &b,
                "adj_shape",
                npy_i64(&[1_000_000_000_000, 1_000_000_000_000]),
            )),
        ),
        (
            "npz_absurd_npy_header.npz",
            npz(&with(
                &b,
                "adj_indptr",
                npy("<i4", &[1_000_000_000_000], false, &[0; 28]),
            )),
        ),
        ("npz_absurd_zip_size.npz", zip(&absurd_zip)),
        ("npz_bad_crc.npz", zip(&bad_crc)),
        (
            "npz_bad_npy_magic.npz",
            npz(&with(&b, "adj_indptr", bad_magic)),
        ),
        (
            "npz_attr_nan.npz",
            npz(&with(
                &b,
                "attr_data",
                npy_f32(&[1.0, 1.5, f32::NAN, 2.5, -1.0]),
            )),
        ),
        (
            "npz_adj_inf.npz",
            npz(&with(
                &b,
                "adj_data",
                npy_f32(&[1.0, 1.0, 1.0, f32::INFINITY, 1.0, 1.0, 1.0, 1.0]),
            )),
        ),
        (
            "npz_attr_rows_mismatch.npz",
            npz(&with(&b, "attr_shape", npy_i64(&[5, 3]))),
        ),
        (
            "npz_labels_negative.npz",
            npz(&with(&b, "labels", npy_i64(&[0, 1, 2, -1, 0, 2]))),
        ),
        ("npz_labels_missing.npz", npz(&without(&b, "labels"))),
        (
            "npz_labels_wrong_length.npz",
            npz(&with(&b, "labels", npy_i64(&[0, 1, 2, 1, 0]))),
        ),
        (
            "npz_empty_graph.npz",
            npz(&with(
                &with(
                    &with(
                        &with(&b, "adj_shape", npy_i64(&[0, 0])),
                        "adj_indptr",
                        npy_i32(&[0]),
                    ),
                    "adj_indices",
                    npy_i32(&[]),
                ),
                "adj_data",
                npy_f32(&[]),
            )),
        ),
    ]
    .into_iter()
    .chain(scipy_fixtures(&s, &f))
    .collect()
}

/// The scipy `.npz` and `.npy` fixtures of [`binary_fixtures`].
fn scipy_fixtures(
    s: &[(String, Vec<u8>)],
    f: &[(String, Vec<u8>)],
) -> Vec<(&'static str, Vec<u8>)> {
    vec![
        (
            "scipy_bad_format.npz",
            npz(&with(s, "format", npy_str("dia"))),
        ),
        (
            "scipy_format_wrong_dtype.npz",
            npz(&with(s, "format", npy_i64(&[1]))),
        ),
        (
            "scipy_coo_row_out_of_range.npz",
            npz(&[
                ("row".to_string(), npy_i32(&[0, 1, 6])),
                ("col".to_string(), npy_i32(&[1, 2, 0])),
                ("data".to_string(), npy_f32(&[1.0; 3])),
                ("format".to_string(), npy_str("coo")),
                ("shape".to_string(), npy_i64(&[6, 6])),
            ]),
        ),
        (
            "scipy_feat_rows_mismatch.npz",
            npz(&with(f, "shape", npy_i64(&[5, 3]))),
        ),
        (
            "scipy_feat_too_wide.npz",
            npz(&with(f, "shape", npy_i64(&[6, 1_000_000_000]))),
        ),
        (
            "scipy_labels_2d.npy",
            npy("<i8", &[6, 1], false, &[0u8; 48]),
        ),
    ]
}
