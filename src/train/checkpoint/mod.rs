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
//! ([`reserved_keys`]). `sparse-gcn train --save` also records the content hashes of the data
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

mod fields;
mod file;

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

pub use file::{not_regular_kind, write_file_atomic};

use rand::SeedableRng;
use safetensors::tensor::{Dtype, SafeTensors};

use crate::data::content::ContentHash;
use crate::data::Features;
use crate::graph::Propagate;
use crate::nn::{Model, ModelConfig, Order};
use crate::{Error, Result};

/// The value of the `format` metadata key.
pub const FORMAT: &str = "sparse-gcn";

/// The value of the `version` metadata key written by this code (the only one it reads).
pub const VERSION: u32 = 2;

/// The value of the `weight_layout` metadata key: weights are stored in × out.
pub const WEIGHT_LAYOUT: &str = "in_out";

/// The metadata keys of the format itself (the configuration's are [`reserved_keys`]).
const FORMAT_KEYS: [&str; 4] = ["format", "version", "weight_layout", "orders"];

/// Metadata keys written by [`save`] (the format's, every field of a [`ModelConfig`], every
/// architecture's settings); the caller's extra keys must avoid them.
pub fn reserved_keys() -> Vec<&'static str> {
    let mut keys: Vec<&'static str> = FORMAT_KEYS.to_vec();
    keys.extend(fields::FIELDS.iter().map(|f| f.key));
    keys.extend(fields::setting_keys());
    keys
}

/// Whether `key` is one of [`reserved_keys`].
pub fn is_reserved(key: &str) -> bool {
    reserved_keys().contains(&key)
}

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
    /// The caller's extra metadata (every key not in [`reserved_keys`]).
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
    file::write_atomic(path, &bytes, write)
}

/// Serialises `model` and its configuration.
fn to_bytes(
    path: &Path,
    model: &mut Model<f32>,
    extra: &BTreeMap<String, String>,
) -> Result<Vec<u8>> {
    if let Some(key) = extra.keys().find(|k| is_reserved(k)) {
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
    let orders: Vec<&str> = model.orders().into_iter().map(Order::name).collect();
    let mut meta: BTreeMap<String, String> = extra.clone();
    for (k, v) in [
        ("format", FORMAT.to_string()),
        ("version", VERSION.to_string()),
        ("weight_layout", WEIGHT_LAYOUT.to_string()),
        ("orders", orders.join(",")),
    ] {
        meta.insert(k.to_string(), v);
    }
    fields::write(model.config(), &mut meta);
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(file::serialize(&meta, &tensors))
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
        .filter(|(k, _)| !is_reserved(k))
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

/// The config and the per-convolution orders described by the metadata.
fn parse_meta(path: &Path, meta: &HashMap<String, String>) -> Result<(ModelConfig, Vec<Order>)> {
    for (key, want) in [
        ("format", FORMAT.to_string()),
        ("version", VERSION.to_string()),
        ("weight_layout", WEIGHT_LAYOUT.to_string()),
    ] {
        let got = meta_get(path, meta, key)?;
        if got != want {
            return Err(dataset_err(
                path,
                format!("metadata `{key}` = `{got}`, expected `{want}` (the only one read)"),
            ));
        }
    }
    let config = fields::read(meta).map_err(|e| dataset_err(path, e))?;
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
                    "metadata `orders` = `{orders_str}`: `{s}` is not aggregate-first, \
                     transform-first or lean"
                ),
            )),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((config, orders))
}
