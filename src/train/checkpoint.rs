//! Checkpoints: a trained [`Gcn<f32>`] and its [`GcnConfig`] in one
//! [safetensors](https://huggingface.co/docs/safetensors) file.
//!
//! # Format
//! A standard safetensors file (little-endian, C order), so PyTorch users can open it:
//!
//! ```python
//! from safetensors.torch import load_file
//! from safetensors import safe_open
//! tensors = load_file("model.safetensors")          # {"layers.0.weight": tensor, ...}
//! with safe_open("model.safetensors", "pt") as f:
//!     config = f.metadata()                          # {"in_dim": "1433", ...}
//! ```
//!
//! | tensor | dtype | shape |
//! |---|---|---|
//! | `layers.{l}.weight` | F32 | `[in_dim_l, out_dim_l]` |
//! | `layers.{l}.bias` (only with `bias = true`) | F32 | `[out_dim_l]` |
//!
//! **Weight convention**: `layers.{l}.weight` is W in Z = Â·H·W, i.e. in × out. PyTorch's
//! `nn.Linear.weight` (and so PyG's `GCNConv.lin.weight`) stores out × in: use
//! `tensors["layers.0.weight"].T` there.
//!
//! The `__metadata__` map (string → string) holds:
//!
//! | key | value |
//! |---|---|
//! | `format` | `sparse-gcn` |
//! | `version` | `1` |
//! | `weight_layout` | `in_out` (see above) |
//! | `in_dim`, `hidden_dim`, `out_dim`, `n_layers` | decimal integers |
//! | `dropout`, `input_dropout` | decimal floats (shortest round-trip form) |
//! | `bias` | `true` or `false` |
//! | `order` | the configured order: `auto`, `aggregate-first` or `transform-first` |
//! | `orders` | the resolved order of each layer, comma-separated (`aggregate-first,transform-first`) |
//!
//! plus the caller's extra keys (e.g. `dataset`, `seed`, `row_normalize`, `norm`): anything
//! evaluation needs to rebuild the inputs the model was trained on. They must not reuse the
//! keys above ([`RESERVED_KEYS`]).
//!
//! # Atomicity
//! [`save`] writes the bytes to `PATH.tmp-<pid>-<n>` in the same directory, syncs it and
//! renames it over `PATH`; on any error the temporary file is removed and an existing `PATH`
//! is left untouched. A process killed half-way leaves at worst a stray temporary file, never
//! a truncated `PATH`.
//!
//! # Loading
//! [`load`] checks that the file is a safetensors file with our metadata, that every tensor
//! the configuration implies is present, F32, of exactly the implied shape, finite, and that
//! there is no other tensor. [`load_expecting`] also checks the shapes against a configuration
//! the caller expects (e.g. the input width of the dataset being evaluated).
//!
//! # Example
//! ```
//! use std::collections::BTreeMap;
//! use rand::SeedableRng;
//! use sparse_gcn::graph::{synthetic::CitationLike, Norm, NormAdj};
//! use sparse_gcn::nn::GcnConfig;
//! use sparse_gcn::train::checkpoint;
//! let d = CitationLike { n_nodes: 100, ..Default::default() }.generate(1).unwrap();
//! let adj = NormAdj::<f32>::new(&d.graph, Norm::Symmetric);
//! let cfg = GcnConfig { in_dim: d.features.n_cols(), out_dim: d.n_classes, ..Default::default() };
//! let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
//! let model = cfg.init(&adj, &d.features, &mut rng).unwrap();
//! let path = std::env::temp_dir().join(format!("doc-{}.safetensors", std::process::id()));
//! let extra = BTreeMap::from([("dataset".to_string(), "synthetic".to_string())]);
//! checkpoint::save(&path, &model, &cfg, &extra).unwrap();
//! let ck = checkpoint::load(&path).unwrap();
//! assert_eq!(ck.config, cfg);
//! assert_eq!(ck.model.layers, model.layers);
//! assert_eq!(ck.extra, extra);
//! std::fs::remove_file(&path).unwrap();
//! ```

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use ndarray::Array2;
use safetensors::tensor::{Dtype, SafeTensors, TensorView};

use crate::nn::{Gcn, GcnConfig, GcnConv, Order, Param};
use crate::{Error, Result};

/// The value of the `format` metadata key.
pub const FORMAT: &str = "sparse-gcn";

/// The value of the `version` metadata key written by this code (the only one it reads).
pub const VERSION: u32 = 1;

/// The value of the `weight_layout` metadata key: weights are stored in × out.
pub const WEIGHT_LAYOUT: &str = "in_out";

/// Metadata keys written by [`save`]; the caller's extra keys must avoid them.
pub const RESERVED_KEYS: &[&str] = &[
    "format",
    "version",
    "weight_layout",
    "in_dim",
    "hidden_dim",
    "out_dim",
    "n_layers",
    "dropout",
    "input_dropout",
    "bias",
    "order",
    "orders",
];

/// How [`save_with`] writes the file's bytes into the temporary file.
#[doc(hidden)]
pub type WriteHook<'a> = dyn FnMut(&mut dyn Write, &[u8]) -> io::Result<()> + 'a;

/// A loaded checkpoint.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    /// The model, with the layers' resolved orders and the config's dropout rates.
    pub model: Gcn<f32>,
    /// The configuration it was saved with.
    pub config: GcnConfig,
    /// The caller's extra metadata (every key not in [`RESERVED_KEYS`]).
    pub extra: BTreeMap<String, String>,
}

impl Checkpoint {
    /// The resolved order of each layer.
    pub fn orders(&self) -> Vec<Order> {
        self.model.orders()
    }
}

/// The name of layer `l`'s weight tensor.
pub fn weight_name(l: usize) -> String {
    format!("layers.{l}.weight")
}

/// The name of layer `l`'s bias tensor.
pub fn bias_name(l: usize) -> String {
    format!("layers.{l}.bias")
}

/// The metadata spelling of an order.
pub fn order_name(order: Order) -> &'static str {
    match order {
        Order::Auto => "auto",
        Order::AggregateFirst => "aggregate-first",
        Order::TransformFirst => "transform-first",
    }
}

/// Parses [`order_name`]'s spelling.
pub fn parse_order(s: &str) -> Option<Order> {
    match s {
        "auto" => Some(Order::Auto),
        "aggregate-first" => Some(Order::AggregateFirst),
        "transform-first" => Some(Order::TransformFirst),
        _ => None,
    }
}

/// Saves `model` and `config` (plus `extra` metadata) to `path`, atomically.
///
/// # Errors
/// [`Error::Config`] for an invalid `config`; [`Error::Mismatch`] or [`Error::Dataset`] when
/// `model` does not match `config` or an extra key is reserved; [`Error::NonFiniteValue`] for a
/// NaN or infinite parameter; [`Error::Io`] when writing or renaming fails. In every case an
/// existing file at `path` is left untouched.
pub fn save(
    path: &Path,
    model: &Gcn<f32>,
    config: &GcnConfig,
    extra: &BTreeMap<String, String>,
) -> Result<()> {
    save_with(path, model, config, extra, &mut |w, bytes| {
        w.write_all(bytes)
    })
}

/// [`save`] with the write of the file's bytes into the temporary file done by `write`
/// (`save` passes `|w, bytes| w.write_all(bytes)`). Lets tests interrupt a save half-way.
///
/// # Errors
/// As [`save`]; an error from `write` is an [`Error::Io`] on the temporary file.
#[doc(hidden)]
pub fn save_with(
    path: &Path,
    model: &Gcn<f32>,
    config: &GcnConfig,
    extra: &BTreeMap<String, String>,
    write: &mut WriteHook<'_>,
) -> Result<()> {
    let bytes = to_bytes(path, model, config, extra)?;
    write_atomic(path, &bytes, write)
}

/// Loads the checkpoint at `path`, checking every tensor against the configuration in its
/// metadata.
///
/// # Errors
/// [`Error::Io`] if the file cannot be read; [`Error::Dataset`] if it is not a safetensors
/// file, lacks or has an unparseable metadata key, lacks a tensor, has an unexpected tensor or
/// one of another dtype or rank; [`Error::Mismatch`] for a tensor of the wrong size;
/// [`Error::NonFiniteValue`] for a NaN or infinite value.
pub fn load(path: &Path) -> Result<Checkpoint> {
    load_impl(path, None)
}

/// [`load`], also checking the tensors against the shapes `expected` implies (its `in_dim`,
/// `hidden_dim`, `out_dim`, `n_layers` and `bias`), e.g. a config whose `in_dim` and
/// `out_dim` come from the dataset being evaluated. Its other fields are ignored; the returned
/// config is the file's.
///
/// # Errors
/// As [`load`]; a tensor that does not fit `expected` gives [`Error::Mismatch`] (or
/// [`Error::Dataset`] for a missing or extra tensor).
pub fn load_expecting(path: &Path, expected: &GcnConfig) -> Result<Checkpoint> {
    load_impl(path, Some(expected))
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

/// Checks `model` against `config` and serialises both.
fn to_bytes(
    path: &Path,
    model: &Gcn<f32>,
    config: &GcnConfig,
    extra: &BTreeMap<String, String>,
) -> Result<Vec<u8>> {
    config.check()?;
    if let Some(key) = extra.keys().find(|k| RESERVED_KEYS.contains(&k.as_str())) {
        return Err(dataset_err(
            path,
            format!("extra metadata key `{key}` is reserved by the checkpoint format"),
        ));
    }
    if model.layers.len() != config.n_layers {
        return Err(mismatch(
            path,
            "model layers vs config n_layers",
            config.n_layers,
            model.layers.len(),
        ));
    }
    let dims = config.dims();
    let mut tensors: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
    for (l, layer) in model.layers.iter().enumerate() {
        let w = &layer.weight.value;
        let name = weight_name(l);
        if w.nrows() != dims[l] {
            return Err(mismatch(path, format!("{name} rows"), dims[l], w.nrows()));
        }
        if w.ncols() != dims[l + 1] {
            return Err(mismatch(
                path,
                format!("{name} cols"),
                dims[l + 1],
                w.ncols(),
            ));
        }
        if layer.order == Order::Auto {
            return Err(dataset_err(
                path,
                format!("layer {l} has an unresolved order (auto)"),
            ));
        }
        tensors.push((
            name.clone(),
            vec![w.nrows(), w.ncols()],
            le_bytes(path, &name, w)?,
        ));
        match (&layer.bias, config.bias) {
            (Some(b), true) => {
                let name = bias_name(l);
                if b.value.dim() != (1, dims[l + 1]) {
                    return Err(mismatch(
                        path,
                        format!("{name} length"),
                        dims[l + 1],
                        b.len(),
                    ));
                }
                tensors.push((
                    name.clone(),
                    vec![dims[l + 1]],
                    le_bytes(path, &name, &b.value)?,
                ));
            }
            (None, false) => {}
            (b, _) => {
                return Err(dataset_err(
                    path,
                    format!(
                        "layer {l} {} a bias but the config says bias = {}",
                        if b.is_some() { "has" } else { "has no" },
                        config.bias
                    ),
                ));
            }
        }
    }
    let mut meta: HashMap<String, String> =
        extra.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let orders: Vec<&str> = model.orders().into_iter().map(order_name).collect();
    for (k, v) in [
        ("format", FORMAT.to_string()),
        ("version", VERSION.to_string()),
        ("weight_layout", WEIGHT_LAYOUT.to_string()),
        ("in_dim", config.in_dim.to_string()),
        ("hidden_dim", config.hidden_dim.to_string()),
        ("out_dim", config.out_dim.to_string()),
        ("n_layers", config.n_layers.to_string()),
        ("dropout", config.dropout.to_string()),
        ("input_dropout", config.input_dropout.to_string()),
        ("bias", config.bias.to_string()),
        ("order", order_name(config.order).to_string()),
        ("orders", orders.join(",")),
    ] {
        meta.insert(k.to_string(), v);
    }
    let views = tensors
        .iter()
        .map(|(name, shape, data)| {
            TensorView::new(Dtype::F32, shape.clone(), data)
                .map(|v| (name.as_str(), v))
                .map_err(|e| dataset_err(path, format!("cannot serialise `{name}`: {e}")))
        })
        .collect::<Result<Vec<_>>>()?;
    safetensors::tensor::serialize(views, Some(meta))
        .map_err(|e| dataset_err(path, format!("cannot serialise the checkpoint: {e}")))
}

/// The values of `a`, row-major, as little-endian f32 bytes; refuses non-finite values.
fn le_bytes(path: &Path, name: &str, a: &Array2<f32>) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(a.len() * 4);
    for ((row, col), &v) in a.indexed_iter() {
        if !v.is_finite() {
            return Err(Error::NonFiniteValue {
                what: format!("{}: {name} (not saved)", path.display()),
                row,
                col,
                value: f64::from(v),
            });
        }
        out.extend_from_slice(&v.to_le_bytes());
    }
    Ok(out)
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

fn write_atomic(path: &Path, bytes: &[u8], write: &mut WriteHook<'_>) -> Result<()> {
    let tmp = temp_path(path)?;
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
    fs::rename(&tmp, path).map_err(|e| Error::io(path, e))?;
    guard.armed = false;
    sync_parent(path);
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

fn load_impl(path: &Path, expected: Option<&GcnConfig>) -> Result<Checkpoint> {
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
    if let Some(exp) = expected {
        read_layers(path, &st, exp, &orders)?;
    }
    let layers = read_layers(path, &st, &config, &orders)?;
    let model = Gcn::from_layers(layers, config.dropout, config.input_dropout);
    Ok(Checkpoint {
        model,
        config,
        extra,
    })
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

/// The config and the per-layer orders described by the metadata.
fn parse_meta(path: &Path, meta: &HashMap<String, String>) -> Result<(GcnConfig, Vec<Order>)> {
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
    let order_str = meta_get(path, meta, "order")?;
    let order = parse_order(order_str).ok_or_else(|| {
        dataset_err(
            path,
            format!(
                "metadata `order` = `{order_str}` is not auto, aggregate-first or transform-first"
            ),
        )
    })?;
    let config = GcnConfig {
        in_dim: meta_parse(path, meta, "in_dim", uint)?,
        hidden_dim: meta_parse(path, meta, "hidden_dim", uint)?,
        out_dim: meta_parse(path, meta, "out_dim", uint)?,
        n_layers: meta_parse(path, meta, "n_layers", uint)?,
        dropout: meta_parse(path, meta, "dropout", float)?,
        input_dropout: meta_parse(path, meta, "input_dropout", float)?,
        bias: meta_parse(path, meta, "bias", "true or false")?,
        order,
    };
    config.check().map_err(|e| {
        dataset_err(
            path,
            format!("the metadata describes an invalid model: {e}"),
        )
    })?;
    let orders_str = meta_get(path, meta, "orders")?;
    let orders = orders_str
        .split(',')
        .map(|s| match parse_order(s) {
            Some(o) if o != Order::Auto => Ok(o),
            _ => Err(dataset_err(
                path,
                format!(
                    "metadata `orders` = `{orders_str}`: `{s}` is not aggregate-first or \
                     transform-first"
                ),
            )),
        })
        .collect::<Result<Vec<_>>>()?;
    if orders.len() != config.n_layers {
        return Err(mismatch(
            path,
            "metadata `orders` entries vs n_layers",
            config.n_layers,
            orders.len(),
        ));
    }
    Ok((config, orders))
}

/// The layers, every tensor checked against the shapes `config` implies.
fn read_layers(
    path: &Path,
    st: &SafeTensors<'_>,
    config: &GcnConfig,
    orders: &[Order],
) -> Result<Vec<GcnConv<f32>>> {
    let dims = config.dims();
    let mut wanted = HashSet::new();
    let mut layers = Vec::with_capacity(config.n_layers);
    for l in 0..config.n_layers {
        let name = weight_name(l);
        let weight = read_tensor(path, st, &name, &[dims[l], dims[l + 1]])?;
        wanted.insert(name);
        let bias = if config.bias {
            let name = bias_name(l);
            let b = read_tensor(path, st, &name, &[dims[l + 1]])?;
            wanted.insert(name);
            Some(Param::new(b))
        } else {
            None
        };
        let order = orders.get(l).copied().ok_or_else(|| {
            mismatch(
                path,
                "metadata `orders` entries",
                config.n_layers,
                orders.len(),
            )
        })?;
        layers.push(GcnConv {
            weight: Param::new(weight),
            bias,
            order,
        });
    }
    let mut extra: Vec<&str> = st
        .names()
        .into_iter()
        .filter(|n| !wanted.contains(*n))
        .collect();
    extra.sort_unstable();
    if let Some(name) = extra.first() {
        return Err(dataset_err(
            path,
            format!(
                "unexpected tensor `{name}` for a model with n_layers = {}, bias = {}",
                config.n_layers, config.bias
            ),
        ));
    }
    Ok(layers)
}

/// Tensor `name` as a matrix (a 1-D `shape` gives one row), checked against `shape`.
fn read_tensor(
    path: &Path,
    st: &SafeTensors<'_>,
    name: &str,
    shape: &[usize],
) -> Result<Array2<f32>> {
    let t = st
        .tensor(name)
        .map_err(|_| dataset_err(path, format!("tensor `{name}` is missing")))?;
    if t.dtype() != Dtype::F32 {
        return Err(dataset_err(
            path,
            format!("tensor `{name}` has dtype {}, expected F32", t.dtype()),
        ));
    }
    let got = t.shape();
    if got.len() != shape.len() {
        return Err(dataset_err(
            path,
            format!("tensor `{name}` has shape {got:?}, expected {shape:?}"),
        ));
    }
    let axes: &[&str] = if shape.len() == 2 {
        &["rows", "cols"]
    } else {
        &["length"]
    };
    for ((&e, &g), axis) in shape.iter().zip(got).zip(axes) {
        if e != g {
            return Err(mismatch(path, format!("{name} {axis}"), e, g));
        }
    }
    let (rows, cols) = match *shape {
        [r, c] => (r, c),
        [c] => (1, c),
        _ => (1, shape.iter().product()),
    };
    let values: Vec<f32> = t
        .data()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        return Err(Error::NonFiniteValue {
            what: format!("{}: {name}", path.display()),
            row: i / cols.max(1),
            col: i % cols.max(1),
            value: f64::from(values[i]),
        });
    }
    Array2::from_shape_vec((rows, cols), values).map_err(|e| {
        dataset_err(
            path,
            format!("tensor `{name}`: data does not fit {shape:?}: {e}"),
        )
    })
}
