//! The crate's one error type.
//!
//! Policy (see `../shared/STYLE.md` §3.1): anything that depends on data or configuration from
//! outside returns [`Result`]; violated contracts between our own components (a shape mismatch
//! inside a kernel) panic with every dimension in the message.
//!
//! A leaf, like [`scalar`](crate::scalar) and [`id`](crate::id): every module may return these
//! errors, so this one imports nothing from the crate.

use std::path::PathBuf;

/// An operation an Â backend does not have (see [`graph::Caps`](crate::graph::Caps)); also
/// [`graph::Unsupported`](crate::graph::Unsupported), beside the trait whose methods return it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("this Â backend does not support {op}")]
pub struct Unsupported {
    /// The operation (`a_times_blocks`, `drop_edge_sample`, …).
    pub op: &'static str,
}

/// Every recoverable error of the crate. Messages name the offending file, line or value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An I/O error while reading or writing `path`.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A malformed line in a text file.
    #[error("{path}:{line}: {msg}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong, with the offending value.
        msg: String,
    },
    /// A node id outside `0..n_nodes`.
    #[error("node id {index} out of range for a graph of {n_nodes} nodes")]
    NodeOutOfRange {
        /// The offending id.
        index: i64,
        /// The number of nodes.
        n_nodes: usize,
    },
    /// Two inputs disagree on a count (feature rows vs nodes, …).
    #[error("{what}: expected {expected}, got {got}")]
    Mismatch {
        /// What was counted.
        what: String,
        /// The expected count.
        expected: usize,
        /// The count found.
        got: usize,
    },
    /// A value that must be finite is not.
    #[error("{what}: non-finite value {value} at row {}, column {} (counting from 1)", .row + 1, .col + 1)]
    NonFiniteValue {
        /// Which input.
        what: String,
        /// 0-based row (the message counts from 1, as editors do).
        row: usize,
        /// 0-based column (the message counts from 1).
        col: usize,
        /// The value.
        value: f64,
    },
    /// A class label outside `0..n_classes`.
    #[error("label {label} of node {node} out of range for {n_classes} classes")]
    LabelOutOfRange {
        /// The node.
        node: usize,
        /// The label.
        label: i64,
        /// The number of classes.
        n_classes: usize,
    },
    /// A mask or split that selects no node.
    #[error(
        "the {name} part of split {split} is empty (train/valid/test sizes {sizes:?}); training \
         needs nodes in every part"
    )]
    EmptyMask {
        /// The mask's name (`train`, `valid`, `test`).
        name: String,
        /// The split's name.
        split: String,
        /// The sizes of its train, valid and test parts.
        sizes: [usize; 3],
    },
    /// A dataset that cannot be trained on as it is: what is missing and how to give it.
    #[error("{dataset}: {msg}")]
    NotTrainable {
        /// The dataset's name.
        dataset: String,
        /// What is missing (labels, classes, features) and how to supply it.
        msg: String,
    },
    /// Something is missing from a dataset folder.
    #[error("{path}: {msg}")]
    Dataset {
        /// The folder or file.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },
    /// A binary graph store (`data::store`) that is truncated, mismatched or tampered with:
    /// the array named, and what is wrong with it.
    #[error("{path}: array `{array}`: {msg}")]
    Store {
        /// The store folder, or the array's file.
        path: PathBuf,
        /// The array (`indptr`, `indices`, `features`, …, or `store.json` for the header).
        array: String,
        /// What is wrong.
        msg: String,
    },
    /// An invalid hyper-parameter or option.
    #[error("invalid config: {0}")]
    Config(#[from] ConfigError),
    /// An operation of Â the backend does not have (a capability a model or a metric needs).
    #[error("{0}")]
    Unsupported(#[from] Unsupported),
    /// The training loss became NaN or infinite.
    #[error("loss became non-finite ({loss}) at epoch {} (counting from 1)", .epoch + 1)]
    NonFiniteLoss {
        /// The epoch's index (0 for the first; the message counts from 1, as every output
        /// does).
        epoch: usize,
        /// The loss value.
        loss: f64,
    },
    /// Building a thread pool failed.
    #[error("thread pool: {0}")]
    ThreadPool(String),
    /// A distributed run cannot start or go on (MPI's world, a message too large).
    #[error("distributed run: {0}")]
    Distributed(String),
    /// A graph partitioner (METIS) failed.
    #[error("partitioning: {0}")]
    Partition(String),
    /// An input or a run that would need more memory than is available: refused before the
    /// allocation (see `data::memory`).
    #[error(
        "{what}: needs about {}, more than the {} of memory available ({budget}); refused \
         before allocating",
        human_bytes(*needed_bytes),
        human_bytes(*available_bytes)
    )]
    TooLarge {
        /// What would be allocated, with the sizes it follows from.
        what: String,
        /// The estimate, in bytes.
        needed_bytes: u64,
        /// The memory available, in bytes.
        available_bytes: u64,
        /// Where the available figure comes from (`MemAvailable`, a cgroup limit, the
        /// `SPARSE_GCN_MAX_MEMORY` budget).
        budget: String,
    },
    /// An output that would not fit in the free space of its disk: refused before anything is
    /// written (`data::disk`).
    #[error(
        "{what}: needs about {} of disk, more than the {} free on {}; refused before writing",
        human_bytes(*needed_bytes),
        human_bytes(*available_bytes),
        path.display()
    )]
    DiskSpace {
        /// What would be written, with the sizes it follows from.
        what: String,
        /// The estimate, in bytes.
        needed_bytes: u64,
        /// The space available to this user, in bytes.
        available_bytes: u64,
        /// The folder written to.
        path: PathBuf,
    },
    /// An output path that exists and is not a regular file (a device, a FIFO, a folder, a
    /// socket): never replaced.
    #[error("{path}: exists and is {kind}, not a regular file; refusing to replace it")]
    NotRegularFile {
        /// The path.
        path: PathBuf,
        /// What it is (`a character device`, `a folder`, …).
        kind: &'static str,
    },
    /// Data that does not match what a checkpoint records about the data it was trained on.
    #[error("{checkpoint}: {msg}")]
    DataMismatch {
        /// The checkpoint.
        checkpoint: PathBuf,
        /// What differs, and how to give the right data.
        msg: String,
    },
    /// A model's output that is NaN or infinite (evaluation, prediction, embedding).
    #[error("{what} is non-finite ({value})")]
    NonFiniteOutput {
        /// Which output, of which model on which data.
        what: String,
        /// The first non-finite value.
        value: f64,
    },
    /// Training stopped between epochs because its caller asked
    /// ([`FitOptions::interrupt`](crate::train::FitOptions::interrupt)).
    #[error("training interrupted after epoch {epoch} (counting from 1)")]
    Interrupted {
        /// The last epoch run, counting from 1.
        epoch: usize,
    },
    /// An environment variable this crate reads holds an invalid value.
    #[error("environment variable {var}={value:?}: {msg}")]
    Environment {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What it must be.
        msg: String,
    },
}

/// `bytes` in binary units for messages: `812 B`, `3.4 MiB`, `10.8 GiB`.
pub(crate) fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// One variant per rule a configuration must satisfy.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `lr` must be finite and > 0.
    #[error("learning rate must be finite and > 0, got {0}")]
    LearningRateNotPositive(f64),
    /// Dropout must lie in `[0, 1)`.
    #[error("dropout must lie in [0, 1), got {0}")]
    DropoutOutOfRange(f64),
    /// Weight decay must be finite and ≥ 0.
    #[error("weight decay must be finite and >= 0, got {0}")]
    WeightDecayNegative(f64),
    /// At least one layer.
    #[error("a model needs at least one layer")]
    NoLayers,
    /// A width of zero.
    #[error("{0} must be > 0")]
    ZeroDim(&'static str),
    /// Patience of zero epochs.
    #[error("patience must be > 0")]
    PatienceZero,
    /// Zero epochs or seeds.
    #[error("{0} must be > 0")]
    ZeroCount(&'static str),
    /// A weight-decay list longer than the model.
    #[error("{got} weight-decay values given for a model of {layers} layers")]
    WeightDecayLen {
        /// Values given.
        got: usize,
        /// Layers in the model.
        layers: usize,
    },
    /// A real-valued parameter outside its range.
    #[error("{name} = {value} is out of range: it must be {rule}")]
    OutOfRange {
        /// The parameter.
        name: &'static str,
        /// The value given.
        value: f64,
        /// The rule, e.g. "in [0, 1]".
        rule: &'static str,
    },
    /// A name that is not one of the known choices.
    #[error("unknown {what} '{got}' (expected one of: {expected})")]
    UnknownName {
        /// What was being named.
        what: &'static str,
        /// The name given.
        got: String,
        /// The known names.
        expected: String,
    },
    /// A combination this build or run cannot do.
    #[error("{what} is not supported")]
    Unsupported {
        /// What was asked for.
        what: &'static str,
    },
    /// A stack of nodes that cannot run (an input of a later node, a wrong number of inputs, a
    /// block out of range).
    #[error("invalid stack: {0}")]
    Stack(String),
    /// A layer setting ([`crate::nn::attrs::Attrs`]) that is missing or invalid.
    #[error("layer setting `{key}` = `{value}`: {msg}")]
    Attr {
        /// The setting.
        key: String,
        /// Its text (empty when missing).
        value: String,
        /// What is wrong.
        msg: String,
    },
}

/// `Result` with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An [`Error::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
    /// An [`Error::Parse`] for `path` at 1-based `line`.
    pub fn parse(path: impl Into<PathBuf>, line: usize, msg: impl Into<String>) -> Self {
        Error::Parse {
            path: path.into(),
            line,
            msg: msg.into(),
        }
    }
}

/// Parses `s` as one of `choices` (`(name, value)` pairs, in any case: `Batch` is `batch`): the
/// one way every `FromStr` of the crate reports an unknown name ([`ConfigError::UnknownName`],
/// listing the known names).
///
/// # Errors
/// [`ConfigError::UnknownName`] when `s` is none of the names.
pub(crate) fn parse_name<T: Copy>(
    what: &'static str,
    s: &str,
    choices: &[(&'static str, T)],
) -> Result<T, ConfigError> {
    choices
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(s))
        .map(|&(_, v)| v)
        .ok_or_else(|| ConfigError::UnknownName {
            what,
            got: s.to_string(),
            expected: choices
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// Gives a `Copy + PartialEq` enum its `name()`, `Display` and `FromStr` from one table of
/// `value => "name"` pairs (`aliases` parse but never print), so every name the CLI, the JSON
/// output and the checkpoints spell is written once and every unknown name is reported by
/// [`parse_name`].
macro_rules! names {
    ($t:ty, $what:literal, [$($v:expr => $n:literal),+ $(,)?]
        $(, aliases [$($av:expr => $an:literal),* $(,)?])?) => {
        impl $t {
            /// The name the CLI, the JSON output and checkpoints spell.
            pub fn name(self) -> &'static str {
                $(if self == $v {
                    return $n;
                })+
                unreachable!("every value has a name")
            }
        }
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
        impl std::str::FromStr for $t {
            type Err = $crate::ConfigError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $crate::error::parse_name($what, s, &[$(($n, $v)),+ $($(, ($an, $av))*)?])
            }
        }
    };
}
pub(crate) use names;
