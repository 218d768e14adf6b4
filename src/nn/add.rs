//! [`Add`]: Y = A + B, the residual connection (He et al., 2016; ResGCN in Li et al., ICCV 2019
//! and in DropEdge's study), forward and backward in one file: dA = dB = dY.
//!
//! In place: the output is written over A (input 0); B (input 1) is the skip path.

use ndarray::Zip;

use rand::Rng;

use super::arch::{Architecture, Builder, Built, ModelConfig, Uses};
use super::attrs::{Attrs, FromAttrs, Registry};
use super::dropout::ReluDropout;
use super::gcn_conv::GcnConv;
use super::layer::{Bwd, Cx, Fwd, InputDesc, Layer, Spec};
use super::linear::Linear;
use super::stack::Src;
use crate::ConfigError;
use crate::{Result, Scalar};

/// Y = A + B for two n × d inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Add {
    /// Width.
    pub dim: usize,
}

impl<F: Scalar> FromAttrs<F> for Add {
    /// `dim`.
    fn from_attrs(a: &Attrs) -> Result<Self, ConfigError> {
        Ok(Add {
            dim: a.count("dim", 1, usize::MAX)?,
        })
    }
}

impl<F: Scalar> Layer<F> for Add {
    fn name(&self) -> &'static str {
        "add"
    }

    fn hops(&self) -> Option<usize> {
        // (Row-wise: on its level's rows over a stack of blocks.)
        Some(0)
    }
    fn arity(&self) -> usize {
        2
    }
    fn spec(&self, _inputs: &[InputDesc], _n: usize) -> Spec {
        Spec {
            in_place: true,
            ..Spec::new(self.dim).reading(self.dim)
        }
    }
    fn forward(&mut self, _cx: &mut Cx<'_, F>, io: Fwd<'_, F>) -> Result<()> {
        let (ins, out) = (io.ins, io.out);
        let b = ins.get(0).dense();
        assert_eq!(out.dim(), b.dim(), "Add: the inputs' shapes differ");
        Zip::from(out).and(b).for_each(|o, &s| *o += s);
        Ok(())
    }
    fn backward(&mut self, _cx: &mut Cx<'_, F>, io: Bwd<'_, F>) -> Result<()> {
        let (dout, mut din) = io.grad.separate();
        for i in 0..2 {
            if let Some(mut d) = din.get(i) {
                d.assign(&dout);
            }
        }
        Ok(())
    }
    fn attrs(&self) -> Option<Attrs> {
        Some(Attrs::new().with("dim", self.dim))
    }

    fn clone_box(&self) -> Box<dyn Layer<F>> {
        Box::new(*self)
    }
}

/// The residual GCN (ResGCN, as in DropEdge's study): [GCN → N → ReLU → + skip → drop] × (L−1)
/// → GCN; the skip is the identity when the widths match and a learned projection X·P of the
/// undropped features otherwise ([`Architecture`]; no settings of its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Residual;

impl Architecture for Residual {
    const NAMES: &'static [(&'static str, Self)] = &[("residual", Residual)];
    const SUMMARY: &'static str =
        "residual connections around every hidden GCN layer (ResGCN, DropEdge's study)";

    fn uses(&self) -> Uses {
        Uses {
            min_layers: 2,
            ..Uses::GCN
        }
    }

    fn register_layers<F: Scalar>(r: &mut Registry<F>) {
        r.add::<Add>("add");
    }

    fn n_hidden(&self, n_layers: usize) -> usize {
        n_layers.saturating_sub(1)
    }

    fn param_count(&self, cfg: &ModelConfig) -> u64 {
        // The GCN's, and the projection (counted even when the widths match).
        let (i, h) = (cfg.in_dim as u64, cfg.hidden_dim as u64);
        crate::nn::gcn_conv::Gcn
            .param_count(cfg)
            .saturating_add(if cfg.n_layers <= 1 {
                0
            } else {
                i.saturating_mul(h)
            })
    }

    fn build<F: Scalar, R: Rng + ?Sized>(
        &self,
        cfg: &ModelConfig,
        b: &mut Builder<'_, F>,
        rng: &mut R,
    ) -> Built {
        let h = cfg.hidden_dim;
        let dims = cfg.widths();
        let convs: Vec<GcnConv<F>> = (0..cfg.n_layers)
            .map(|l| b.conv(l, dims[l], dims[l + 1], rng))
            .collect();
        let proj = (cfg.in_dim != h || b.x().is_sparse())
            .then(|| Linear::<F>::new(cfg.in_dim, h, false, rng));
        let mut skip = match proj {
            Some(p) => Src::Node(b.push(p, vec![Src::X], 0, 0)),
            None => Src::X,
        };
        let mut taps = Vec::new();
        let mut prev = Src::Xd;
        let last = cfg.n_layers - 1;
        for (l, conv) in convs.into_iter().enumerate() {
            if l == last {
                taps.push(b.push(conv, vec![prev], 2, 0));
                break;
            }
            b.begin_block();
            let z = b.push(conv, vec![prev], if l == 0 { 0 } else { 1 }, 0);
            let z = b.norm(z, h);
            let a = b.push(ReluDropout::relu(h), vec![Src::Node(z)], 0, 0);
            let out = b.push(Add { dim: h }, vec![Src::Node(a), skip], 0, 0);
            taps.push(out);
            skip = Src::Node(out);
            let p = cfg.dropout;
            prev = b.elem(ReluDropout::dropout(h, p), skip, l as u64 + 2);
            b.end_block(l);
        }
        Built {
            input_site: 1,
            taps,
            no_input_dropout: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use ndarray::array;

    use super::*;
    use crate::testing::harness::{isolated, random, rng, small_adjs, Harness, In};

    #[test]
    fn gradients_match_finite_differences() {
        let [(_, adj), _] = &small_adjs();
        let n = adj.n_nodes();
        let mut r = rng(1);
        let ins = [
            In::Dense(random(n, 3, &mut r)),
            In::Dense(random(n, 3, &mut r)),
        ];
        let g = random(n, 3, &mut r);
        let h = Harness::new(adj);
        for need in [[true, true], [true, false], [false, true]] {
            let (_, din) = h.grad_check(&mut Add { dim: 3 }, &ins, &need, &g, "add");
            for (d, k) in din.iter().zip(need) {
                assert_eq!(d.as_ref(), k.then_some(&g));
            }
        }
    }

    #[test]
    fn golden() {
        let adj = isolated::<f64>(2);
        let ins = [
            In::Dense(array![[1.0, 2.0], [3.0, 4.0]]),
            In::Dense(array![[0.5, -2.0], [1.0, 0.0]]),
        ];
        let (y, _) = Harness::new(&adj).forward(&mut Add { dim: 2 }, &ins);
        assert_eq!(y, array![[1.5, 0.0], [4.0, 4.0]]);
    }
}
