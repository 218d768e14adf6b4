//! Checkpoints: a trained [`Model<f32>`] of any architecture and its [`ModelConfig`], or a
//! stack assembled by hand, in one [safetensors](https://huggingface.co/docs/safetensors) file.
//!
//! # Format (version 2: an architecture; version 3: a hand-built stack)
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
//! (`reserved_keys`). `sparse-gcn train --save` also records the content hashes of the data
//! as loaded (`data_hash_graph`, `data_hash_features`, `data_hash_labels`, `data_hash_split`;
//! [`ContentHash::record`]) and every option its preparation depends on (the source, the
//! feature recipe and its seed, the split options): [`Checkpoint::check_data`] refuses other
//! data naming what differs. Keys are written sorted: identical models and metadata give
//! identical files byte for byte.
//!
//! A stack assembled by hand ([`Model::from_nodes`], no configuration) is saved as version 3:
//! `model` = `stack`, and instead of the configuration's fields and `orders`, its nodes (each
//! layer's name and settings, [`Layer::attrs`](crate::nn::Layer::attrs)), wiring and options
//! under `stack.` (the table in the `stack` submodule's source). [`Checkpoint::build_with`]
//! builds it again from a [`Registry`] of layers (this crate's, plus a crate's own);
//! [`Checkpoint::build`] with this crate's. Saving a stack with a layer that does not describe
//! its settings is an error.
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
//! assert_eq!(ck.config(), model.config());
//! assert_eq!(ck.extra, extra);
//! let mut back = ck.build(&adj, &d.features).unwrap();
//! assert_eq!(back.predict(&adj, &d.features, sparse_gcn::Par::Seq).unwrap(),
//!            model.predict(&adj, &d.features, sparse_gcn::Par::Seq).unwrap());
//! std::fs::remove_file(&path).unwrap();
//! ```

mod fields;
mod file;
mod stack;

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
use crate::nn::attrs::Registry;
use crate::nn::{Model, ModelConfig, Order, StackDesc};
use crate::{Error, Result};

/// The value of the `format` metadata key.
pub(crate) const FORMAT: &str = "sparse-gcn";

/// The value of the `version` metadata key of an architecture's checkpoint.
pub(crate) const VERSION: u32 = 2;

/// The value of the `version` metadata key of a hand-built stack's checkpoint.
pub(crate) const STACK_VERSION: u32 = 3;

/// The value of the `weight_layout` metadata key: weights are stored in × out.
pub(crate) const WEIGHT_LAYOUT: &str = "in_out";

/// The metadata keys of the format itself (the configuration's are [`reserved_keys`]).
const FORMAT_KEYS: [&str; 4] = ["format", "version", "weight_layout", "orders"];

/// Metadata keys written by [`save`] (the format's, every field of a [`ModelConfig`], every
/// architecture's settings); the caller's extra keys must avoid them.
pub(crate) fn reserved_keys() -> Vec<&'static str> {
    let mut keys: Vec<&'static str> = FORMAT_KEYS.to_vec();
    keys.extend(fields::FIELDS.iter().map(|f| f.key));
    keys.extend(fields::setting_keys());
    keys
}

/// Whether `key` is one of [`reserved_keys`] or a stack's (under `stack.`).
pub(crate) fn is_reserved(key: &str) -> bool {
    key.starts_with(stack::PREFIX) || reserved_keys().contains(&key)
}

/// How [`save_with`] writes the file's bytes into the temporary file.
#[doc(hidden)]
pub(crate) type WriteHook<'a> = dyn FnMut(&mut dyn Write, &[u8]) -> io::Result<()> + 'a;

/// What a checkpoint holds: an architecture's configuration, or a hand-built stack.
#[derive(Debug, Clone, PartialEq)]
pub enum Saved {
    /// A model built from a [`ModelConfig`] (format version 2).
    Arch {
        /// The configuration it was saved with.
        config: ModelConfig,
        /// The resolved order of each graph convolution.
        orders: Vec<Order>,
    },
    /// A stack assembled by hand (format version 3; see [`Model::describe`]).
    Stack {
        /// Its nodes, wiring and options.
        desc: StackDesc,
        /// The features' width, when a layer declares it.
        in_dim: Option<usize>,
        /// The logits' width.
        out_dim: usize,
    },
}

/// A loaded checkpoint: the model it describes, the tensors and the caller's metadata.
/// [`Checkpoint::build`] makes the model.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    /// The model it describes.
    pub saved: Saved,
    /// The caller's extra metadata (every key not `is_reserved`).
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
    let mut meta: BTreeMap<String, String> = extra.clone();
    for (k, v) in [
        ("format", FORMAT.to_string()),
        ("weight_layout", WEIGHT_LAYOUT.to_string()),
    ] {
        meta.insert(k.to_string(), v);
    }
    if let Some(config) = model.config() {
        let orders: Vec<&str> = model.orders().into_iter().map(Order::name).collect();
        meta.insert("version".into(), VERSION.to_string());
        meta.insert("orders".into(), orders.join(","));
        fields::write(config, &mut meta);
    } else {
        let desc = model
            .describe()
            .map_err(|e| dataset_err(path, format!("not saved: {e}")))?;
        meta.insert("version".into(), STACK_VERSION.to_string());
        meta.insert("model".into(), "stack".into());
        stack::write(&desc, model.in_dim(), model.out_dim(), &mut meta);
    }
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
    let saved = parse_meta(path, meta)?;

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
        saved,
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
    /// (`Checkpoint::check_shapes`).
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

    /// The configuration, for an architecture's checkpoint.
    pub fn config(&self) -> Option<&ModelConfig> {
        match &self.saved {
            Saved::Arch { config, .. } => Some(config),
            Saved::Stack { .. } => None,
        }
    }

    /// The model in a few words, for messages: the architecture's name, or `stack of N nodes`.
    pub fn model_name(&self) -> String {
        match &self.saved {
            Saved::Arch { config, .. } => config.arch.to_string(),
            Saved::Stack { desc, .. } => format!("stack of {} nodes", desc.nodes.len()),
        }
    }

    /// The features' width the model reads (unknown for a stack whose layers do not declare
    /// it) and its logits' width.
    pub fn dims(&self) -> (Option<usize>, usize) {
        match &self.saved {
            Saved::Arch { config, .. } => (Some(config.in_dim), config.out_dim),
            Saved::Stack {
                in_dim, out_dim, ..
            } => (*in_dim, *out_dim),
        }
    }

    /// Checks that data of `in_dim` feature columns and `n_classes` classes fits the model:
    /// [`Error::Mismatch`] naming the checkpoint otherwise (a model evaluated on data with
    /// another class count would report a meaningless accuracy, or index past its logits).
    ///
    /// # Errors
    /// [`Error::Mismatch`].
    pub(crate) fn check_shapes(&self, in_dim: usize, n_classes: usize) -> Result<()> {
        let (want_in, want_out) = self.dims();
        if let Some(want) = want_in.filter(|&w| w != in_dim) {
            return Err(mismatch(
                &self.path,
                "input width (feature columns) of the model vs the data",
                want,
                in_dim,
            ));
        }
        if n_classes != want_out {
            return Err(mismatch(
                &self.path,
                "classes of the model (its output width) vs classes of the data",
                want_out,
                n_classes,
            ));
        }
        Ok(())
    }

    /// The model on `adj` and `x` (the data it is to be evaluated on): the saved architecture
    /// and orders, or the saved stack of this crate's layers ([`Registry::builtin`]), every
    /// parameter and statistic from the file.
    ///
    /// # Errors
    /// As [`Checkpoint::build_with`].
    pub fn build(&self, adj: &dyn Propagate<f32>, x: &Features<f32>) -> Result<Model<f32>> {
        self.build_with(adj, x, &Registry::builtin())
    }

    /// [`Checkpoint::build`] with a stack's layers made by `registry` (a crate's own layers
    /// registered with [`Registry::with`]); an architecture's checkpoint does not use it.
    ///
    /// # Errors
    /// [`Error::Mismatch`] when the data's input width differs from the model's, or a tensor
    /// has another shape than the model implies; [`Error::Dataset`] for a missing or
    /// unexpected tensor, a layer the registry lacks or invalid settings;
    /// [`Error::TooLarge`] when the model would not fit in memory.
    pub fn build_with(
        &self,
        adj: &dyn Propagate<f32>,
        x: &Features<f32>,
        registry: &Registry<f32>,
    ) -> Result<Model<f32>> {
        let mut model = match &self.saved {
            Saved::Arch { config, orders } => self.arch_model(config, orders, adj, x)?,
            Saved::Stack { desc, .. } => self.stack_model(desc, registry, adj, x)?,
        };
        self.fill(&mut model)?;
        Ok(model)
    }

    /// An architecture's model, its parameters not yet filled.
    fn arch_model(
        &self,
        config: &ModelConfig,
        orders: &[Order],
        adj: &dyn Propagate<f32>,
        x: &Features<f32>,
    ) -> Result<Model<f32>> {
        let path = &self.path;
        if x.n_cols() != config.in_dim {
            return Err(mismatch(
                path,
                "input width (feature columns) of the data vs the model",
                config.in_dim,
                x.n_cols(),
            ));
        }
        // The shapes the metadata implies against the values the file holds, before the model
        // is allocated: a file of a few bytes cannot describe a model of gigabytes.
        let stored: u64 = self.tensors.values().map(|(_, v)| v.len() as u64).sum();
        let implied = super::run::param_count(config);
        if implied > stored.saturating_mul(2).saturating_add(1024) {
            return Err(dataset_err(
                path,
                format!(
                    "the metadata describes a {} model of about {implied} parameters (in_dim {}, \
                     hidden_dim {}, out_dim {}, n_layers {}), but the file holds {stored} values",
                    config.arch, config.in_dim, config.hidden_dim, config.out_dim, config.n_layers
                ),
            ));
        }
        super::run::check_params_fit(config, 1)?;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
        let model = config.build(adj, x, Some(orders), &mut rng).map_err(|e| {
            dataset_err(
                path,
                format!("the metadata describes an invalid model: {e}"),
            )
        })?;
        if model.orders().len() != orders.len() {
            let what = "metadata `orders` vs graph convolutions";
            return Err(mismatch(path, what, model.orders().len(), orders.len()));
        }
        Ok(model)
    }

    /// A stack's model, its parameters not yet filled: each node's layer made by `registry`
    /// from its settings, whose sizes may add up to about the values the file holds for it;
    /// the widths checked on `x`, the workspace on `adj`'s rows against the memory available.
    fn stack_model(
        &self,
        desc: &StackDesc,
        registry: &Registry<f32>,
        adj: &dyn Propagate<f32>,
        x: &Features<f32>,
    ) -> Result<Model<f32>> {
        let path = &self.path;
        let mut desc = desc.clone();
        for (i, node) in desc.nodes.iter_mut().enumerate() {
            let prefix = format!("nodes.{i}.");
            let stored: u64 = self
                .tensors
                .iter()
                .filter(|(k, _)| k.starts_with(&prefix))
                .map(|(_, (_, v))| v.len() as u64)
                .sum();
            node.attrs = std::mem::take(&mut node.attrs).limit(stored.saturating_mul(2) + 1024);
        }
        let mut model = Model::from_desc(&desc, registry)
            .map_err(|e| dataset_err(path, format!("metadata: {e}")))?;
        let n = adj.shape().0;
        let bytes = model.workspace_bytes(n, x).map_err(|e| match e {
            Error::Mismatch {
                what,
                expected,
                got,
            } => mismatch(path, what, expected, got),
            e => e,
        })?;
        crate::data::memory::check(bytes as u64, || {
            format!(
                "evaluating a stack of {} nodes on {n} nodes × {} features: its planned \
                 workspace",
                desc.nodes.len(),
                x.n_cols()
            )
        })?;
        Ok(model)
    }

    /// Fills every parameter and statistic of `model` from the file, checking that every
    /// tensor the model has is present with its shape and that there is no other.
    fn fill(&self, model: &mut Model<f32>) -> Result<()> {
        let path = &self.path;
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
                    self.model_name()
                ),
            ));
        }
        Ok(())
    }
}

fn meta_get<'m>(path: &Path, meta: &'m HashMap<String, String>, key: &str) -> Result<&'m str> {
    meta.get(key)
        .map(String::as_str)
        .ok_or_else(|| dataset_err(path, format!("metadata key `{key}` is missing")))
}

/// What the metadata describes: an architecture's configuration and the orders of its
/// convolutions (version 2), or a stack (version 3).
fn parse_meta(path: &Path, meta: &HashMap<String, String>) -> Result<Saved> {
    for (key, want) in [
        ("format", FORMAT.to_string()),
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
    let version = meta_get(path, meta, "version")?;
    if version == STACK_VERSION.to_string() {
        let model = meta_get(path, meta, "model")?;
        if model != "stack" {
            return Err(dataset_err(
                path,
                format!("metadata `model` = `{model}` in a version {STACK_VERSION} file, expected `stack`"),
            ));
        }
        let read = stack::read(meta).map_err(|e| dataset_err(path, e))?;
        return Ok(Saved::Stack {
            desc: read.desc,
            in_dim: read.in_dim,
            out_dim: read.out_dim,
        });
    }
    if version != VERSION.to_string() {
        return Err(dataset_err(
            path,
            format!(
                "metadata `version` = `{version}`, expected `{VERSION}` (an architecture) or \
                 `{STACK_VERSION}` (a stack)"
            ),
        ));
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
    Ok(Saved::Arch { config, orders })
}
