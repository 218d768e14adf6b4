//! Jumping knowledge (Xu et al., ICML 2018) over a model's layer outputs (forward and backward).
