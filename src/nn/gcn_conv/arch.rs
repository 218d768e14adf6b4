//! The plain GCN architecture (Kipf & Welling, ICLR 2017): [GCN → N → ReLU·drop] × (L−1) → GCN.

use rand::Rng;

use super::GcnConv;
use crate::nn::arch::{prev_node, Architecture, Builder, Built, ModelConfig};
use crate::nn::attrs::Registry;
use crate::nn::dropout::ReluDropout;
use crate::nn::stack::Src;
use crate::Scalar;

/// Kipf & Welling's GCN at any depth ([`Architecture`]; no settings of its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Gcn;

impl Architecture for Gcn {
    const NAMES: &'static [(&'static str, Self)] = &[("gcn", Gcn)];
    const ALIASES: &'static [(&'static str, Self)] = &[("plain", Gcn)];
    const SUMMARY: &'static str = "a plain GCN stack (Kipf & Welling, ICLR 2017)";

    fn register_layers<F: Scalar>(r: &mut Registry<F>) {
        r.add::<GcnConv<F>>("gcn_conv");
        r.add::<crate::nn::linear::Linear<F>>("linear");
        for name in ["relu", "dropout", "relu_dropout"] {
            r.add::<ReluDropout>(name);
        }
        r.add::<crate::nn::batch_norm::BatchNorm<F>>("batch_norm");
        r.add::<crate::nn::pair_norm::PairNorm>("pair_norm");
    }

    fn n_hidden(&self, n_layers: usize) -> usize {
        n_layers.saturating_sub(1)
    }

    fn param_count(&self, cfg: &ModelConfig) -> u64 {
        let [i, h, o, l] =
            [cfg.in_dim, cfg.hidden_dim, cfg.out_dim, cfg.n_layers].map(|v| v as u64);
        let (conv, _, norm) = cfg.param_parts();
        if l <= 1 {
            return conv(i, o);
        }
        let hidden = l
            .saturating_sub(2)
            .saturating_mul(conv(h, h).saturating_add(norm));
        conv(i, h)
            .saturating_add(norm)
            .saturating_add(hidden)
            .saturating_add(conv(h, o))
    }

    fn build<F: Scalar, R: Rng + ?Sized>(
        &self,
        cfg: &ModelConfig,
        b: &mut Builder<'_, F>,
        rng: &mut R,
    ) -> Built {
        let h = cfg.hidden_dim;
        // Weights drawn layer by layer.
        let dims = cfg.widths();
        let convs: Vec<GcnConv<F>> = (0..cfg.n_layers)
            .map(|l| b.conv(l, dims[l], dims[l + 1], rng))
            .collect();
        let mut taps = Vec::new();
        let mut prev = Src::Xd;
        let last = cfg.n_layers - 1;
        for (l, conv) in convs.into_iter().enumerate() {
            let group = if l == 0 {
                0
            } else if l == last {
                2
            } else {
                1
            };
            let z = b.push(conv, vec![prev], group, 0);
            if l == last {
                taps.push(z);
                break;
            }
            b.begin_block();
            let z = b.norm(z, h);
            // ReLU, then the dropout of the next convolution's input (site l + 2).
            let p = cfg.dropout;
            prev = b.elem(ReluDropout::new(h, p), Src::Node(z), l as u64 + 2);
            b.end_block(l);
            taps.push(prev_node(prev));
        }
        Built {
            input_site: 1,
            taps,
            no_input_dropout: false,
        }
    }
}
