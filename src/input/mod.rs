//! What a model reads, below the layers that read it: node [`Features`] (dense, or sparse with
//! their transpose) with their identity, and node [`Mask`]s. The loaders, the generator and the
//! splits that produce them are in [`data`](crate::data), which re-exports these types.

pub mod features;
pub mod mask;

pub use features::{Features, FeaturesRef, SparseFeatures};

pub use mask::Mask;
