//! Layers, the model and the loss. Forward and backward of each layer sit in one file.

pub mod dropout;
pub mod gcn;
pub mod jk;
pub mod linear;
pub mod loss;
pub mod model;
pub mod norm;
pub mod param;

pub use gcn::{GcnConv, Input, Order};
pub use model::{Gcn, GcnConfig};
pub use param::Param;

/// Training (dropout on) or evaluation (dropout off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Dropout on.
    Train,
    /// Dropout off.
    Eval,
}
