//! Diagnostics: [`roofline`], this machine's memory and compute bounds beside the kernels they
//! limit.

pub mod roofline;
