//! Training over a stack of bipartite blocks (`Model::train_blocks`, neighbour sampling): a
//! batch of every node with every neighbour is a whole-graph pass bit for bit; on smaller
//! blocks the gradients match finite differences of `Model::eval_blocks`; stacks the blocks
//! cannot run are refused with the reason.

use ndarray::Array2;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use sparse_gcn::data::synthetic::CitationLike;
use sparse_gcn::data::{Dataset, Features};
use sparse_gcn::graph::{Norm, NormAdj, Propagate};
use sparse_gcn::input::Mask;
use sparse_gcn::nn::{Arch, ModelConfig};
use sparse_gcn::sample::{Blocks, NeighborSampler};
use sparse_gcn::{Error, Model, Par, Scalar};

fn data(n_nodes: usize) -> Dataset {
    let mut d = CitationLike {
        n_nodes,
        ..Default::default()
    }
    .generate(5)
    .unwrap();
    d.features.row_normalize();
    d
}

fn config(d: &Dataset, layers: usize, dropout: f64) -> ModelConfig {
    ModelConfig {
        in_dim: d.features.n_cols(),
        out_dim: d.n_classes,
        hidden_dim: 8,
        n_layers: layers,
        dropout,
        input_dropout: dropout,
        bias: true,
        ..ModelConfig::default()
    }
}

/// The logits and every parameter's gradient of one pass with L = ⟨R, Z⟩.
fn pass<F: Scalar>(
    model: &mut Model<F>,
    blocks: Option<&[&dyn Propagate<F>]>,
    adj: &dyn Propagate<F>,
    x: &Features<F>,
    r: &Array2<F>,
    par: Par,
) -> (Array2<F>, Vec<Vec<F>>) {
    model.zero_grad();
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let mut z_out = None;
    let mut loss = |mut z: ndarray::ArrayViewMut2<'_, F>, _: sparse_gcn::graph::Sums<'_, F>| {
        z_out = Some(z.to_owned());
        z.assign(r);
        true
    };
    match blocks {
        Some(b) => model.train_blocks(b, x, &mut rng, par, &mut loss).unwrap(),
        None => model.train_pass(adj, x, &mut rng, par, &mut loss).unwrap(),
    }
    let mut grads = Vec::new();
    model.visit_params(&mut |_, p| grads.push(p.grad.iter().copied().collect()));
    (z_out.unwrap(), grads)
}

fn bits<F: Scalar>(a: &Array2<F>) -> Vec<u64> {
    a.iter().map(|v| v.to_f64_lossless().to_bits()).collect()
}

#[test]
fn every_node_with_every_neighbour_is_a_whole_graph_pass_bit_for_bit() {
    let d = data(300);
    let n = d.graph.n_nodes();
    let adj = NormAdj::<f32>::new(&d.graph, Norm::Symmetric);
    let x = Features::<f32>::dense(d.features.to_dense());
    let all = Mask::try_from_indices((0..n as u32).collect(), n).unwrap();
    for layers in [2, 3] {
        let sampler = NeighborSampler::new(&d.graph, &all, &vec![0; layers], n).unwrap();
        let mut b = Blocks::<f32>::default();
        sampler.blocks_into(&d.graph, 1, 0, 0, &mut b).unwrap();
        let refs: Vec<&dyn Propagate<f32>> = (0..layers)
            .map(|l| b.block(l) as &dyn Propagate<f32>)
            .collect();
        let cfg = config(&d, layers, 0.5);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut whole = cfg.build(&adj, &x, None, &mut rng).unwrap();
        let mut over_blocks = whole.clone();
        let r = Array2::from_shape_fn((n, d.n_classes), |(i, j)| ((i * 7 + j) % 5) as f32 - 2.0);
        for par in [Par::Seq, Par::Rayon] {
            let (z0, g0) = pass(&mut whole, None, &adj, &x, &r, par);
            let (z1, g1) = pass(&mut over_blocks, Some(&refs), &adj, &x, &r, par);
            assert_eq!(bits(&z1), bits(&z0), "{layers} layers: logits");
            assert_eq!(g1, g0, "{layers} layers: gradients");
        }
    }
}

#[test]
fn on_sampled_blocks_gradients_match_finite_differences() {
    let d = data(120);
    let n = d.graph.n_nodes();
    let adj = NormAdj::<f64>::new(&d.graph, Norm::Symmetric);
    let x_all = d.features.to_dense().mapv(f64::from);
    let train = Mask::try_from_indices((0..n as u32).step_by(9).collect(), n).unwrap();
    let sampler = NeighborSampler::new(&d.graph, &train, &[2, 3], 4).unwrap();
    let mut b = Blocks::<f64>::default();
    sampler.blocks_into(&d.graph, 4, 1, 2, &mut b).unwrap();
    let (n0, n1, n2) = (b.nodes(0).len(), b.nodes(1).len(), b.nodes(2).len());
    assert!(n0 > n1 && n1 > n2 && n2 == 4, "levels {n0} > {n1} > {n2}");
    let rows: Vec<usize> = b.nodes(0).iter().map(|&v| v as usize).collect();
    let x = Features::dense(x_all.select(ndarray::Axis(0), &rows));
    let refs: Vec<&dyn Propagate<f64>> =
        (0..2).map(|l| b.block(l) as &dyn Propagate<f64>).collect();
    for order in [
        sparse_gcn::nn::Order::AggregateFirst,
        sparse_gcn::nn::Order::TransformFirst,
    ] {
        let cfg = ModelConfig {
            order,
            ..config(&d, 2, 0.0)
        };
        let mut model = cfg
            .build(
                &adj,
                &Features::dense(x_all.clone()),
                None,
                &mut ChaCha8Rng::seed_from_u64(1),
            )
            .unwrap();
        let r = Array2::from_shape_fn((4, d.n_classes), |(i, j)| ((i * 3 + j) % 7) as f64 - 3.0);
        let (z, grads) = pass(&mut model, Some(&refs), &adj, &x, &r, Par::Seq);
        assert_eq!(z.dim(), (4, d.n_classes));
        // Evaluation over the same blocks gives the same logits.
        let mut z_eval = None;
        model
            .eval_blocks(&refs, &x, Par::Seq, &mut |z, _| z_eval = Some(z.to_owned()))
            .unwrap();
        assert_eq!(z_eval.as_ref(), Some(&z), "{order}: evaluation's logits");
        // Finite differences of ⟨R, Z⟩ in every parameter.
        let mut k = 0;
        let mut theta: Vec<f64> = Vec::new();
        model.visit_params(&mut |_, p| theta.extend(p.value.iter()));
        let analytic: Vec<f64> = grads.concat();
        assert_eq!(theta.len(), analytic.len());
        let mut worst = 0.0f64;
        for i in (0..theta.len()).step_by(7) {
            let mut at = |delta: f64| {
                let mut t = theta.clone();
                t[i] += delta;
                let mut off = 0;
                model.visit_params(&mut |_, p| {
                    for v in p.value.iter_mut() {
                        *v = t[off];
                        off += 1;
                    }
                });
                let mut l = 0.0;
                model
                    .eval_blocks(&refs, &x, Par::Seq, &mut |z, _| l = (&z * &r).sum())
                    .unwrap();
                l
            };
            let num = (at(1e-6) - at(-1e-6)) / 2e-6;
            at(0.0);
            let err = (num - analytic[i]).abs() / analytic[i].abs().max(1.0);
            worst = worst.max(err);
            k += 1;
        }
        assert!(k > 10 && worst < 1e-6, "{order}: rel err {worst:e}");
    }
}

#[test]
fn stacks_the_blocks_cannot_run_are_refused_with_the_reason() {
    let d = data(120);
    let n = d.graph.n_nodes();
    let adj = NormAdj::<f64>::new(&d.graph, Norm::Symmetric);
    let x_all = Features::dense(d.features.to_dense().mapv(f64::from));
    let train = Mask::try_from_indices((0..n as u32).step_by(5).collect(), n).unwrap();
    let sampler = NeighborSampler::new(&d.graph, &train, &[2, 2], 8).unwrap();
    let mut b = Blocks::<f64>::default();
    sampler.blocks_into(&d.graph, 4, 0, 0, &mut b).unwrap();
    let rows: Vec<usize> = b.nodes(0).iter().map(|&v| v as usize).collect();
    let x = Features::dense(
        d.features
            .to_dense()
            .mapv(f64::from)
            .select(ndarray::Axis(0), &rows),
    );
    let refs: Vec<&dyn Propagate<f64>> =
        (0..2).map(|l| b.block(l) as &dyn Propagate<f64>).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut refused = |cfg: ModelConfig, want: &str| {
        let mut model = cfg.build(&adj, &x_all, None, &mut rng).unwrap();
        let err = model
            .train_blocks(&refs, &x, &mut rng.clone(), Par::Seq, &mut |_, _| true)
            .unwrap_err();
        assert!(
            matches!(err, Error::Config(_)) && err.to_string().contains(want),
            "{}: {err}",
            cfg.arch
        );
    };
    refused(
        config(&d, 3, 0.0),
        "needs a block beyond the 2 the batch has",
    );
    refused(
        config(&d, 1, 0.0),
        "propagates 1 times, the batch has 2 blocks",
    );
    refused(
        ModelConfig::deep(Arch::named("residual").unwrap(), 2).with_dims(&d),
        "two levels",
    );
    refused(
        ModelConfig::deep(Arch::named("sgc").unwrap(), 2).with_dims(&d),
        "propagates 2 times in one layer",
    );
    refused(
        ModelConfig::deep(Arch::named("appnp").unwrap(), 2).with_dims(&d),
        "does not run over bipartite blocks",
    );
    // Features of other rows than the first block's sources.
    let mut model = config(&d, 2, 0.0)
        .build(&adj, &x_all, None, &mut rng)
        .unwrap();
    let err = model
        .train_blocks(&refs, &x_all, &mut rng, Par::Seq, &mut |_, _| true)
        .unwrap_err();
    assert!(matches!(err, Error::Mismatch { .. }), "{err}");
}

trait WithDims {
    fn with_dims(self, d: &Dataset) -> Self;
}

impl WithDims for ModelConfig {
    fn with_dims(self, d: &Dataset) -> Self {
        ModelConfig {
            in_dim: d.features.n_cols(),
            out_dim: d.n_classes,
            hidden_dim: 8,
            ..self
        }
    }
}

#[test]
fn a_first_block_over_the_whole_graph_reads_the_features_in_place_to_the_same_logits() {
    let d = data(150);
    let n = d.graph.n_nodes();
    let adj = NormAdj::<f64>::new(&d.graph, Norm::Symmetric);
    let x_all = d.features.to_dense().mapv(f64::from);
    let whole_x = Features::dense(x_all.clone());
    let train = Mask::try_from_indices((0..n as u32).step_by(7).collect(), n).unwrap();
    let sampler = NeighborSampler::new(&d.graph, &train, &[3, 4], 5).unwrap();
    let cfg = config(&d, 2, 0.0);
    let mut model = cfg
        .build(&adj, &whole_x, None, &mut ChaCha8Rng::seed_from_u64(2))
        .unwrap();
    let (mut gathered, mut over) = (Blocks::<f64>::default(), Blocks::<f64>::default());
    for index in 0..sampler.batches() {
        sampler
            .blocks_into(&d.graph, 6, 1, index, &mut gathered)
            .unwrap();
        sampler
            .blocks_into_over(&d.graph, 6, 1, index, &mut over, true)
            .unwrap();
        assert_eq!(over.nodes(0), gathered.nodes(0));
        let (b0, w0) = (gathered.block(0), over.block(0));
        assert_eq!(Propagate::<f64>::shape(w0), (b0.a().rows(), n));
        assert_eq!(b0.a().nnz(), w0.a().nnz());
        let rows: Vec<usize> = gathered.nodes(0).iter().map(|&v| v as usize).collect();
        let x = Features::dense(x_all.select(ndarray::Axis(0), &rows));
        let logits = |b: &Blocks<f64>, x: &Features<f64>, m: &mut Model<f64>| {
            let refs: Vec<&dyn Propagate<f64>> =
                (0..2).map(|l| b.block(l) as &dyn Propagate<f64>).collect();
            let mut z = None;
            m.eval_blocks(&refs, x, Par::Seq, &mut |l, _| z = Some(l.to_owned()))
                .unwrap();
            z.unwrap()
        };
        let (z0, z1) = (
            logits(&gathered, &x, &mut model),
            logits(&over, &whole_x, &mut model),
        );
        assert_eq!(z0.dim(), z1.dim());
        // (The same entries and values; each row's sum in node-id order instead of level order.)
        let err = z0
            .iter()
            .zip(&z1)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(err < 1e-12, "batch {index}: {err:e}");
    }
}
