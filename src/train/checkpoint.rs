//! Checkpoints: a trained [`Model<f32>`] of any architecture and its [`ModelConfig`] in one
//! [safetensors](https://huggingface.co/docs/safetensors) file.
//!
//! # Format (version 2)
//! A standard safetensors file (little-endian, C order), so PyTorch users can open it:
//!
//! ```python
//! from safetensors.torch import load_file
//! from safetensors import safe_open
//! tensors = load_file("model.safetensors")     # {"nodes.0.gcn_conv.weight": tensor, ...}
//! with safe_open("model.safetensors", "pt") as f:
//!     config = f.metadata()                     # {"model": "gcn", "in_dim": "1433", ...}
//! ```
//!
//! Every parameter and statistics vector of the model is one F32 tensor named
//! `nodes.{i}.{layer}.{name}`: `i` the node's index in the stack (forward order), `layer` its
//! layer (`gcn_conv`, `gcnii_conv`, `linear`, `batch_norm`, `jumping_knowledge`), `name` the
//! parameter (`weight`, `bias`, `gamma`, `beta`, `att`, `running_mean`, `running_var`).
//! Parameters are 2-D (a bias is 1 × out), statistics 1-D.
//!
//! **Weight convention**: a `weight` is W in Z = Â·H·W or Y = X·W, i.e. in × out. PyTorch's
//! `nn.Linear.weight` (and so PyG's `GCNConv.lin.weight`) stores out × in: use `.T` there.
//!
//! The `__metadata__` map (string → string) holds `format` (`sparse-gcn`), `version` (`2`),
//! `weight_layout` (`in_out`), every field of the [`ModelConfig`] (`model`, `in_dim`,
//! `hidden_dim`, `out_dim`, `n_layers`, `dropout`, `input_dropout`, `norm_layer`, `bias`, `order`,
//! `alpha`, `lambda`, `k`, `checkpoint`, `drop_edge`, `mask_streams`), and `orders` (the resolved
//! order of each graph convolution, comma-separated), plus the caller's extra keys (e.g.
//! `dataset`, `seed`, `row_normalize`, `norm`, `reorder`): anything evaluation needs to rebuild
//! the inputs the model was trained on. They must not reuse the keys above
//! ([`RESERVED_KEYS`]). `sparse-gcn train --save` also records the content hashes of the data
//! as loaded (`data_hash_graph`, `data_hash_features`, `data_hash_labels`, `data_hash_split`;
//! [`ContentHash::record`]) and every option its preparation depends on (the source, the
//! feature recipe and its seed, the split options): [`Checkpoint::check_data`] refuses other
//! data naming what differs. Keys are written sorted: identical models and metadata give
//! identical files byte for byte.
//!
//! # Atomicity
//! [`save`] writes the bytes to `PATH.tmp-<pid>-<n>` in the same directory, syncs it and
//! renames it over `PATH`; on any error the temporary file is removed and an existing `PATH`
//! is left untouched. A process killed half-way leaves at worst a stray temporary file, never
//! a truncated `PATH`.
//!
//! # Loading
//! [`load`] checks that the file is a safetensors file with our metadata and an architecture
//! the metadata describes validly; [`Checkpoint::build`] rebuilds the model on a dataset (its
//! input width, its classes) and fills it, checking that every tensor the architecture implies
//! is present, F32, of exactly the implied shape, finite, and that there is no other tensor.
//!
//! # Example
//! ```
//! use std::collections::BTreeMap;
//! use sparse_gcn::data::synthetic::CitationLike;
//! use sparse_gcn::graph::{Norm, NormAdj};
//! use sparse_gcn::nn::ModelConfig;
//! use sparse_gcn::train::{build_model, checkpoint};
//! let d = CitationLike { n_nodes: 100, ..Default::default() }.generate(1).unwrap();
//! let adj = NormAdj::<f32>::new(&d.graph, Norm::Symmetric);
//! let mut model = build_model(&adj, &d.features, d.n_classes, &ModelConfig::default(), 0).unwrap();
//! let path = std::env::temp_dir().join(format!("doc-{}.safetensors", std::process::id()));
//! let extra = BTreeMap::from([("dataset".to_string(), "synthetic".to_string())]);
//! checkpoint::save(&path, &mut model, &extra).unwrap();
//! let ck = checkpoint::load(&path).unwrap();
//! assert_eq!(&ck.config, model.config());
//! assert_eq!(ck.extra, extra);
//! let mut back = ck.build(&adj, &d.features).unwrap();
//! assert_eq!(back.predict(&adj, &d.features, sparse_gcn::Par::Seq).unwrap(),
//!            model.predict(&adj, &d.features, sparse_gcn::Par::Seq).unwrap());
//! std::fs::remove_file(&path).unwrap();
//! ```

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rand::SeedableRng;
use safetensors::tensor::{Dtype, SafeTensors};

use crate::data::content::ContentHash;
use crate::data::Features;
use crate::graph::Propagate;
use crate::nn::{Arch, MaskStreams, Model, ModelConfig, NormKind, Order};
use crate::{Error, Result};

/// The value of the `format` metadata key.
pub const FORMAT: &str = "sparse-gcn";

/// The value of the `version` metadata key written by this code (the only one it reads).
pub const VERSION: u32 = 2;

/// The value of the `weight_layout` metadata key: weights are stored in × out.
pub const WEIGHT_LAYOUT: &str = "in_out";

/// Metadata keys written by [`save`]; the caller's extra keys must avoid them.
pub const RESERVED_KEYS: &[&str] = &[
    "format",
    "version",
    "weight_layout",
    "model",
    "in_dim",
    "hidden_dim",
    "out_dim",
    "n_layers",
    "dropout",
    "input_dropout",
    "norm_layer",
    "bias",
    "order",
    "alpha",
    "lambda",
    "k",
    "checkpoint",
    "drop_edge",
    "mask_streams",
    "orders",
];

/// How [`save_with`] writes the file's bytes into the temporary file.
#[doc(hidden)]
pub type WriteHook<'a> = dyn FnMut(&mut dyn Write, &[u8]) -> io::Result<()> + 'a;

/// A loaded checkpoint: the configuration, the resolved orders, the tensors and the caller's
/// metadata. [`Checkpoint::build`] makes the model.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    /// The configuration it was saved with.
    pub config: ModelConfig,
    /// The resolved order of each graph convolution.
    pub orders: Vec<Order>,
    /// The caller's extra metadata (every key not in [`RESERVED_KEYS`]).
    pub extra: BTreeMap<String, String>,
    /// Every tensor: name → (shape, values).
    tensors: BTreeMap<String, (Vec<usize>, Vec<f32>)>,
    path: PathBuf,
}

fn dataset_err(path: &Path, msg: impl Into<String>) -> Error {
    Error::Dataset {
        path: path.to_path_buf(),
        msg: msg.into(),
    }
}

fn mismatch(path: &Path, what: impl std::fmt::Display, expected: usize, got: usize) -> Error {
    Error::Mismatch {
        what: format!("{}: {what}", path.display()),
        expected,
        got,
    }
}

/// The metadata spelling of a mask-stream scheme.
fn streams_name(s: MaskStreams) -> &'static str {
    match s {
        MaskStreams::Shared => "shared",
        MaskStreams::PerLayer => "per-layer",
    }
}

/// Saves `model` (plus `extra` metadata) to `path`, atomically.
///
/// # Errors
/// [`Error::Dataset`] when an extra key is reserved; [`Error::NonFiniteValue`] for a NaN or
/// infinite parameter; [`Error::Io`] when writing or renaming fails. In every case an existing
/// file at `path` is left untouched.
pub fn save(path: &Path, model: &mut Model<f32>, extra: &BTreeMap<String, String>) -> Result<()> {
    save_with(path, model, extra, &mut |w, bytes| w.write_all(bytes))
}

/// [`save`] with the write of the file's bytes into the temporary file done by `write`
/// (`save` passes `|w, bytes| w.write_all(bytes)`). Lets tests interrupt a save half-way.
///
/// # Errors
/// As [`save`]; an error from `write` is an [`Error::Io`] on the temporary file.
#[doc(hidden)]
pub fn save_with(
    path: &Path,
    model: &mut Model<f32>,
    extra: &BTreeMap<String, String>,
    write: &mut WriteHook<'_>,
) -> Result<()> {
    let bytes = to_bytes(path, model, extra)?;
    write_atomic(path, &bytes, write)
}

/// Serialises `model` and its configuration.
fn to_bytes(
    path: &Path,
    model: &mut Model<f32>,
    extra: &BTreeMap<String, String>,
) -> Result<Vec<u8>> {
    if let Some(key) = extra.keys().find(|k| RESERVED_KEYS.contains(&k.as_str())) {
        return Err(dataset_err(
            path,
            format!("extra metadata key `{key}` is reserved by the checkpoint format"),
        ));
    }
    let mut tensors: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
    let mut bad: Option<Error> = None;
    let mut put = |name: &str, shape: Vec<usize>, vals: &mut dyn Iterator<Item = f32>| {
        let mut bytes = Vec::new();
        for (k, v) in vals.enumerate() {
            if !v.is_finite() && bad.is_none() {
                let cols = shape.last().copied().unwrap_or(1).max(1);
                bad = Some(Error::NonFiniteValue {
                    what: format!("{}: nodes.{name} (not saved)", path.display()),
                    row: k / cols,
                    col: k % cols,
                    value: f64::from(v),
                });
            }
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        tensors.push((format!("nodes.{name}"), shape, bytes));
    };
    model.visit_named(&mut |name, t| put(name, t.shape(), &mut t.values().copied()));
    if let Some(e) = bad {
        return Err(e);
    }
    let cfg = model.config().clone();
    let orders: Vec<&str> = model.orders().into_iter().map(Order::name).collect();
    let mut meta: BTreeMap<String, String> = extra.clone();
    for (k, v) in [
        ("format", FORMAT.to_string()),
        ("version", VERSION.to_string()),
        ("weight_layout", WEIGHT_LAYOUT.to_string()),
        ("model", cfg.arch.name().to_string()),
        ("in_dim", cfg.in_dim.to_string()),
        ("hidden_dim", cfg.hidden_dim.to_string()),
        ("out_dim", cfg.out_dim.to_string()),
        ("n_layers", cfg.n_layers.to_string()),
        ("dropout", cfg.dropout.to_string()),
        ("input_dropout", cfg.input_dropout.to_string()),
        ("norm_layer", cfg.norm.name().to_string()),
        ("bias", cfg.bias.to_string()),
        ("order", cfg.order.name().to_string()),
        ("alpha", cfg.alpha.to_string()),
        ("lambda", cfg.lambda.to_string()),
        ("k", cfg.k.to_string()),
        ("checkpoint", cfg.checkpoint.to_string()),
        ("drop_edge", cfg.drop_edge.to_string()),
        ("mask_streams", streams_name(cfg.mask_streams).to_string()),
        ("orders", orders.join(",")),
    ] {
        meta.insert(k.to_string(), v);
    }
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(serialize(&meta, &tensors))
}

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
fn serialize(
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

fn write_atomic(path: &Path, bytes: &[u8], write: &mut WriteHook<'_>) -> Result<()> {
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

/// Loads the checkpoint at `path`: its configuration (checked), orders, tensors (F32, finite)
/// and extra metadata.
///
/// # Errors
/// [`Error::Io`] if the file cannot be read; [`Error::Dataset`] if it is not a safetensors
/// file, lacks or has an unparseable metadata key, or has a tensor of another dtype;
/// [`Error::NonFiniteValue`] for a NaN or infinite value.
pub fn load(path: &Path) -> Result<Checkpoint> {
    let bytes = fs::read(path).map_err(|e| Error::io(path, e))?;
    let st = SafeTensors::deserialize(&bytes)
        .map_err(|e| dataset_err(path, format!("not a valid safetensors file: {e}")))?;
    let (_, header) = SafeTensors::read_metadata(&bytes)
        .map_err(|e| dataset_err(path, format!("not a valid safetensors file: {e}")))?;
    let Some(meta) = header.metadata().as_ref() else {
        return Err(dataset_err(
            path,
            "no __metadata__: not a sparse-gcn checkpoint",
        ));
    };
    let (config, orders) = parse_meta(path, meta)?;
    let extra: BTreeMap<String, String> = meta
        .iter()
        .filter(|(k, _)| !RESERVED_KEYS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut tensors = BTreeMap::new();
    for (name, view) in st.tensors() {
        if view.dtype() != Dtype::F32 {
            return Err(dataset_err(
                path,
                format!("tensor `{name}` is {:?}, expected F32", view.dtype()),
            ));
        }
        let shape = view.shape().to_vec();
        let cols = shape.last().copied().unwrap_or(1).max(1);
        let mut vals = Vec::with_capacity(view.data().len() / 4);
        for (k, c) in view.data().chunks_exact(4).enumerate() {
            let v = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            if !v.is_finite() {
                return Err(Error::NonFiniteValue {
                    what: format!("{}: {name}", path.display()),
                    row: k / cols,
                    col: k % cols,
                    value: f64::from(v),
                });
            }
            vals.push(v);
        }
        tensors.insert(name, (shape, vals));
    }
    Ok(Checkpoint {
        config,
        orders,
        extra,
        tensors,
        path: path.to_path_buf(),
    })
}

impl Checkpoint {
    /// The file it was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Checks that `d` (as loaded, before [`Prepared::new`](super::run::Prepared::new)) is the
    /// data the model was trained on, when the checkpoint records its content hashes
    /// ([`ContentHash`], which `sparse-gcn train --save` records): [`Error::DataMismatch`]
    /// naming the parts that differ (graph, features, labels, split) and the data the
    /// metadata says the model was trained on. Then, recorded or not, the shapes
    /// ([`Checkpoint::check_shapes`]).
    ///
    /// # Errors
    /// [`Error::DataMismatch`]; [`Error::Dataset`] for a malformed recorded hash;
    /// [`Error::Mismatch`].
    pub fn check_data(&self, d: &crate::data::Dataset) -> Result<()> {
        match ContentHash::from_extra(&self.extra) {
            None => {}
            Some(Err(msg)) => return Err(dataset_err(&self.path, msg)),
            Some(Ok(recorded)) => {
                let diff = ContentHash::of(d).differences(&recorded);
                if !diff.is_empty() {
                    let source: Vec<String> = [
                        "data",
                        "preset",
                        "data_seed",
                        "features_built",
                        "features_file",
                        "labels_file",
                        "split",
                        "num_nodes",
                        "train_per_class",
                        "split_sizes",
                    ]
                    .iter()
                    .filter_map(|k| self.extra.get(*k).map(|v| format!("{k} {v}")))
                    .collect();
                    return Err(Error::DataMismatch {
                        checkpoint: self.path.clone(),
                        msg: format!(
                            "the data given ({}) is not the data the model was trained on: its \
                             {} differ{} (content hashes); the checkpoint records {}",
                            d.name,
                            diff.join(", "),
                            if diff.len() == 1 { "s" } else { "" },
                            if source.is_empty() {
                                "no source".to_string()
                            } else {
                                source.join(", ")
                            }
                        ),
                    });
                }
            }
        }
        self.check_shapes(d.features.n_cols(), d.n_classes)
    }

    /// Checks that data of `in_dim` feature columns and `n_classes` classes fits the model:
    /// [`Error::Mismatch`] naming the checkpoint otherwise (a model evaluated on data with
    /// another class count would report a meaningless accuracy, or index past its logits).
    ///
    /// # Errors
    /// [`Error::Mismatch`].
    pub fn check_shapes(&self, in_dim: usize, n_classes: usize) -> Result<()> {
        if in_dim != self.config.in_dim {
            return Err(mismatch(
                &self.path,
                "input width (feature columns) of the model vs the data",
                self.config.in_dim,
                in_dim,
            ));
        }
        if n_classes != self.config.out_dim {
            return Err(mismatch(
                &self.path,
                "classes of the model (its output width) vs classes of the data",
                self.config.out_dim,
                n_classes,
            ));
        }
        Ok(())
    }

    /// The model on `adj` and `x` (the data it is to be evaluated on): the saved architecture
    /// and orders, every parameter and statistic from the file.
    ///
    /// # Errors
    /// [`Error::Mismatch`] when the data's input width differs from the model's, or a tensor has
    /// another shape than the architecture implies; [`Error::Dataset`] for a missing or
    /// unexpected tensor.
    pub fn build(&self, adj: &dyn Propagate<f32>, x: &Features<f32>) -> Result<Model<f32>> {
        let path = &self.path;
        if x.n_cols() != self.config.in_dim {
            return Err(mismatch(
                path,
                "input width (feature columns) of the data vs the model",
                self.config.in_dim,
                x.n_cols(),
            ));
        }
        // The shapes the metadata implies against the values the file holds, before the model
        // is allocated: a file of a few bytes cannot describe a model of gigabytes.
        let stored: u64 = self.tensors.values().map(|(_, v)| v.len() as u64).sum();
        let implied = super::run::param_count(&self.config);
        if implied > stored.saturating_mul(2).saturating_add(1024) {
            return Err(dataset_err(
                path,
                format!(
                    "the metadata describes a {} model of about {implied} parameters (in_dim {}, \
                     hidden_dim {}, out_dim {}, n_layers {}), but the file holds {stored} values",
                    self.config.arch,
                    self.config.in_dim,
                    self.config.hidden_dim,
                    self.config.out_dim,
                    self.config.n_layers
                ),
            ));
        }
        super::run::check_params_fit(&self.config, 1)?;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
        let mut model = self
            .config
            .build(adj, x, Some(&self.orders), &mut rng)
            .map_err(|e| {
                dataset_err(
                    path,
                    format!("the metadata describes an invalid model: {e}"),
                )
            })?;
        if model.orders().len() != self.orders.len() {
            let what = "metadata `orders` vs graph convolutions";
            return Err(mismatch(
                path,
                what,
                model.orders().len(),
                self.orders.len(),
            ));
        }
        let mut used = 0usize;
        let mut err: Option<Error> = None;
        let mut fill = |name: &str, shape: &[usize], dst: &mut dyn Iterator<Item = &mut f32>| {
            if err.is_some() {
                return;
            }
            let key = format!("nodes.{name}");
            match self.tensors.get(&key) {
                None => err = Some(dataset_err(path, format!("tensor `{key}` is missing"))),
                Some((s, _)) if s.as_slice() != shape => {
                    let (e, g) = (shape.iter().product(), s.iter().product());
                    err = Some(mismatch(path, format!("{key} {shape:?} vs {s:?}"), e, g));
                }
                Some((_, v)) => {
                    dst.zip(v).for_each(|(d, &s)| *d = s);
                    used += 1;
                }
            }
        };
        model.visit_named(&mut |name, mut t| {
            let shape = t.shape();
            fill(name, &shape, &mut t.values_mut());
        });
        if let Some(e) = err {
            return Err(e);
        }
        if used != self.tensors.len() {
            let mut names = Vec::new();
            model.visit_named(&mut |n, _| names.push(format!("nodes.{n}")));
            let extra = self
                .tensors
                .keys()
                .find(|k| !names.contains(k))
                .cloned()
                .unwrap_or_default();
            return Err(dataset_err(
                path,
                format!(
                    "unexpected tensor `{extra}` for a {} model",
                    self.config.arch
                ),
            ));
        }
        Ok(model)
    }
}

fn meta_get<'m>(path: &Path, meta: &'m HashMap<String, String>, key: &str) -> Result<&'m str> {
    meta.get(key)
        .map(String::as_str)
        .ok_or_else(|| dataset_err(path, format!("metadata key `{key}` is missing")))
}

fn meta_parse<T: std::str::FromStr>(
    path: &Path,
    meta: &HashMap<String, String>,
    key: &str,
    what: &str,
) -> Result<T> {
    let v = meta_get(path, meta, key)?;
    v.parse()
        .map_err(|_| dataset_err(path, format!("metadata `{key}` = `{v}` is not {what}")))
}

/// The config and the per-convolution orders described by the metadata.
fn parse_meta(path: &Path, meta: &HashMap<String, String>) -> Result<(ModelConfig, Vec<Order>)> {
    let format = meta_get(path, meta, "format")?;
    if format != FORMAT {
        return Err(dataset_err(
            path,
            format!("metadata `format` = `{format}`, expected `{FORMAT}`"),
        ));
    }
    let version: u32 = meta_parse(path, meta, "version", "an integer")?;
    if version != VERSION {
        return Err(dataset_err(
            path,
            format!("metadata `version` = `{version}`: only version {VERSION} is supported"),
        ));
    }
    let layout = meta_get(path, meta, "weight_layout")?;
    if layout != WEIGHT_LAYOUT {
        return Err(dataset_err(
            path,
            format!("metadata `weight_layout` = `{layout}`, expected `{WEIGHT_LAYOUT}`"),
        ));
    }
    let uint = "a non-negative integer";
    let float = "a number";
    let named = |key: &str| -> Result<String> { Ok(meta_get(path, meta, key)?.to_string()) };
    let bad =
        |key: &str, e: crate::ConfigError| dataset_err(path, format!("metadata `{key}`: {e}"));
    let streams = match meta_get(path, meta, "mask_streams")? {
        "shared" => MaskStreams::Shared,
        "per-layer" => MaskStreams::PerLayer,
        s => {
            return Err(dataset_err(
                path,
                format!("metadata `mask_streams` = `{s}` is not shared or per-layer"),
            ))
        }
    };
    let config = ModelConfig {
        arch: named("model")?
            .parse::<Arch>()
            .map_err(|e| bad("model", e))?,
        in_dim: meta_parse(path, meta, "in_dim", uint)?,
        hidden_dim: meta_parse(path, meta, "hidden_dim", uint)?,
        out_dim: meta_parse(path, meta, "out_dim", uint)?,
        n_layers: meta_parse(path, meta, "n_layers", uint)?,
        dropout: meta_parse(path, meta, "dropout", float)?,
        input_dropout: meta_parse(path, meta, "input_dropout", float)?,
        norm: named("norm_layer")?
            .parse::<NormKind>()
            .map_err(|e| bad("norm_layer", e))?,
        bias: meta_parse(path, meta, "bias", "true or false")?,
        order: named("order")?
            .parse::<Order>()
            .map_err(|e| bad("order", e))?,
        alpha: meta_parse(path, meta, "alpha", float)?,
        lambda: meta_parse(path, meta, "lambda", float)?,
        k: meta_parse(path, meta, "k", uint)?,
        checkpoint: meta_parse(path, meta, "checkpoint", uint)?,
        drop_edge: meta_parse(path, meta, "drop_edge", float)?,
        mask_streams: streams,
    };
    config
        .check()
        .and_then(|()| super::run::check_limits(&config))
        .map_err(|e| {
            dataset_err(
                path,
                format!("the metadata describes an invalid model: {e}"),
            )
        })?;
    let orders_str = meta_get(path, meta, "orders")?;
    let orders = orders_str
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| match s.parse::<Order>() {
            Ok(o) if o != Order::Auto => Ok(o),
            _ => Err(dataset_err(
                path,
                format!(
                    "metadata `orders` = `{orders_str}`: `{s}` is not aggregate-first or \
                     transform-first"
                ),
            )),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((config, orders))
}
