//! Layers, the one model stack, the architectures and the loss.
//!
//! - [`layer`]: the [`Layer`] trait every layer implements (forward and backward side by side, on
//!   buffers the caller owns) and the types a layer call sees.
//! - One file per layer: [`gcn_conv`], [`gcnii`], [`linear`], [`batch_norm`], [`pair_norm`],
//!   [`dropout`] (ReLU, dropout, ReLU·dropout), [`add`], [`jk`], [`sgc`], [`appnp`].
//! - [`attrs`]: a layer's settings as text and the registry that builds a layer from them (what
//!   a checkpoint of a hand-built stack records and reads).
//! - [`stack`]: [`Model`], the only forward/backward loop, with activation checkpointing as a
//!   strategy of it and the buffers it plans once and reuses.
//! - [`arch`]: [`ModelConfig`] and [`Arch`]; [`ModelConfig::build`] is the one place an
//!   architecture becomes a stack.
//! - [`loss`]: masked softmax cross-entropy.
//!
//! See `docs/ARCHITECTURE.md` for the picture and `docs/ADDING_A_LAYER.md` for a worked example.

pub mod add;
pub mod appnp;
pub mod arch;
pub mod attrs;
pub mod batch_norm;
pub mod dropout;
pub mod gcn_conv;
pub mod gcnii;
pub mod jk;
pub mod layer;
pub mod linear;
pub mod loss;
pub mod pair_norm;
pub mod param;
pub mod sgc;
pub mod stack;

pub use arch::{Arch, ModelConfig, NormKind};
pub use batch_norm::BatchNorm;
pub use gcn_conv::{GcnConv, Order};
pub use jk::JkMode;
pub use layer::{GradMode, InputDesc, Layer, Spec, Value};
pub use linear::Linear;
pub use pair_norm::PairNorm;
pub use param::Param;
pub use stack::{
    Checkpointing, MaskStreams, Model, Named, Node, NodeDesc, Src, StackDesc, StackOptions, Wiring,
};

/// Training (dropout on, batch statistics) or evaluation (dropout off, running statistics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Dropout on.
    Train,
    /// Dropout off.
    Eval,
}
