//! Normalisation layers over nodes: BatchNorm and PairNorm (forward and backward).
