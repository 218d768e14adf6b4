//! Diagnostics: [`roofline`], this machine's memory and compute bounds beside the kernels they
//! limit, and the floors of a kernel profile at those bounds. It measures kernels on graphs and
//! node orders; it builds and trains no model (`roofline --epoch`'s epoch is run by
//! `train::profile`, which prices it here).

pub mod roofline;
