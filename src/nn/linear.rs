//! `Linear`: a dense layer Y = X·W + 1·bᵀ (forward and backward).
