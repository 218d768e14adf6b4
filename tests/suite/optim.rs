//! The optimisers against hand-computed values (`docs/MATH.md` §7, §8), and which parameters
//! each of the 4 weight-decay groups reaches in the Kipf GCN and in every architecture of
//! `Arch::all()` (`docs/MATH.md` §13.5, the `nn::arch` module docs). Before the one-stack
//! redesign the Kipf GCN had one group per layer; now layer 0 is group 0, the last layer group 2
//! and the layers in between group 1, so Kipf's `[5e-4]` still decays the first layer only.
//!
//! The Adam checks do not replay the recursion: they use its closed form. With m₀ = v₀ = 0,
//! m_t = (1−β1) Σ_{s≤t} β1^{t−s} g_s and 1 − β1^t = (1−β1) Σ_{s<t} β1^s, so the
//! bias-corrected m̂_t = Σ_s β1^{t−s} g_s / Σ_{s<t} β1^s is a weighted mean of the gradients
//! (the same for v̂_t with β2 and g²). Step 1: m̂ = g, v̂ = g², the update is lr·g/(|g| + ε).

use ndarray::{arr2, Array2};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use sparse_gcn::data::Features;
use sparse_gcn::graph::{Direction, Graph, Norm, NormAdj};
use sparse_gcn::nn::{Arch, JkMode, Model, ModelConfig, Named, NormKind, Param};
use sparse_gcn::optim::{Adam, Optimizer, Sgd};
use sparse_gcn::train::TrainConfig;
use sparse_gcn::Scalar;

// ---------------------------------------------------------------------------------------------
// Adam
// ---------------------------------------------------------------------------------------------

const LR: f64 = 0.01;
const B1: f64 = 0.8;
const B2: f64 = 0.95;
const EPS: f64 = 1e-3;
/// Decay of group 0 (the weight), group 1 (the bias); group 5 is past the end (no decay).
const WD: [f64; 2] = [0.1, 0.02];

fn w0() -> Array2<f64> {
    arr2(&[[0.5, -1.0], [2.0, -0.25]])
}
fn b0() -> Array2<f64> {
    arr2(&[[0.25, -0.5]])
}
fn c0() -> Array2<f64> {
    arr2(&[[1.5, -2.0]])
}

/// The loss gradients of steps 1, 2, 3 for the weight (2 × 2), bias and extra (1 × 2).
fn grads(step: usize) -> [Array2<f64>; 3] {
    match step {
        1 => [
            arr2(&[[0.1, -0.2], [0.3, 0.0]]),
            arr2(&[[-0.4, 0.05]]),
            arr2(&[[0.2, 0.2]]),
        ],
        2 => [
            arr2(&[[-0.3, -0.1], [0.2, 0.6]]),
            arr2(&[[0.4, 0.0]]),
            arr2(&[[-0.1, 0.5]]),
        ],
        _ => [
            arr2(&[[0.05, 0.4], [-0.7, 0.1]]),
            arr2(&[[0.1, -0.3]]),
            arr2(&[[0.3, -0.2]]),
        ],
    }
}

/// Adam's expected values after steps 1, 2 and 3, by the closed form (f64, per element).
/// `g_s` includes the decay λ·θ_{s−1} of the value before step s.
fn adam_expected(
    theta0: &Array2<f64>,
    grad: impl Fn(usize) -> Array2<f64>,
    wd: f64,
) -> Vec<Array2<f64>> {
    let mut out = Vec::new();
    let mut theta = theta0.clone();
    let mut gs: Vec<Array2<f64>> = Vec::new();
    for t in 1..=3 {
        gs.push(&grad(t) + &(&theta * wd));
        let mut next = theta.clone();
        for (idx, w) in next.indexed_iter_mut() {
            let g: Vec<f64> = gs.iter().map(|g| g[idx]).collect();
            // m̂_t = Σ_s β1^{t−s} g_s / Σ_{s<t} β1^s, v̂_t likewise with β2 and g_s².
            let (mut num_m, mut num_v, mut den_m, mut den_v) = (0.0, 0.0, 0.0, 0.0);
            for s in 1..=t {
                num_m += B1.powi((t - s) as i32) * g[s - 1];
                num_v += B2.powi((t - s) as i32) * g[s - 1] * g[s - 1];
                den_m += B1.powi((s - 1) as i32);
                den_v += B2.powi((s - 1) as i32);
            }
            let (mh, vh) = (num_m / den_m, num_v / den_v);
            *w -= LR * mh / (vh.sqrt() + EPS);
        }
        theta = next;
        out.push(theta.clone());
    }
    out
}

fn cast<F: Scalar>(a: &Array2<f64>) -> Array2<F> {
    a.mapv(F::from_f64_lossy)
}

#[track_caller]
fn assert_close<F: Scalar>(got: &Array2<F>, want: &Array2<f64>, tol: f64, what: &str) {
    assert_eq!(got.dim(), want.dim(), "{what}");
    for (g, w) in got.iter().zip(want) {
        let g = g.to_f64_lossless();
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "{what}: got {g}, expected {w} (diff {:e})",
            g - w
        );
    }
}

fn adam_run<F: Scalar>(tol: f64) {
    let mut opt = Adam::<F>::new(LR, WD.to_vec());
    opt.beta1 = B1;
    opt.beta2 = B2;
    opt.eps = EPS;
    let mut ps = [
        Param::new(cast::<F>(&w0())),
        Param::new(cast::<F>(&b0())),
        Param::new(cast::<F>(&c0())),
    ];
    let groups = [0usize, 1, 5];
    let want = [
        adam_expected(&w0(), |t| grads(t)[0].clone(), WD[0]),
        adam_expected(&b0(), |t| grads(t)[1].clone(), WD[1]),
        adam_expected(&c0(), |t| grads(t)[2].clone(), 0.0),
    ];
    for t in 1..=3 {
        let g = grads(t);
        for (k, p) in ps.iter_mut().enumerate() {
            p.grad = cast::<F>(&g[k]);
            opt.update(k, groups[k], p);
        }
        opt.finish_step();
        for k in 0..3 {
            let what = format!("{} Adam step {t}, param {k}", std::any::type_name::<F>());
            assert_close(&ps[k].value, &want[k][t - 1], tol, &what);
        }
    }
}

#[test]
fn adam_matches_the_closed_form_over_three_steps() {
    // f64: the closed form and the recursion agree to rounding; f32 to its rounding of
    // values of size ≤ 2.
    adam_run::<f64>(1e-13);
    adam_run::<f32>(1e-6);
}

/// The recursion of `docs/MATH.md` §8 written out in F arithmetic, each constant rounded to F
/// once and the bias corrections 1 − β^t formed in f64 and rounded once, per element.
fn adam_recursion_in_f<F: Scalar>(theta0: &Array2<f64>, wd: f64, steps: usize) -> Vec<Array2<F>> {
    let f = F::from_f64_lossy;
    let (lr, b1, b2, eps, wd) = (f(LR), f(B1), f(B2), f(EPS), f(wd));
    let mut w = cast::<F>(theta0);
    let mut m = Array2::<F>::zeros(w.dim());
    let mut v = Array2::<F>::zeros(w.dim());
    let mut out = Vec::new();
    for t in 1..=steps {
        let c1 = f(1.0 - B1.powi(t as i32));
        let c2 = f(1.0 - B2.powi(t as i32));
        let grad = cast::<F>(&grads(t)[0]);
        for (idx, wi) in w.indexed_iter_mut() {
            let g = grad[idx] + wd * *wi;
            m[idx] = b1 * m[idx] + (F::one() - b1) * g;
            v[idx] = b2 * v[idx] + (F::one() - b2) * g * g;
            let (mh, vh) = (m[idx] / c1, v[idx] / c2);
            *wi -= lr * mh / (vh.sqrt() + eps);
        }
        out.push(w.clone());
    }
    out
}

fn adam_exact<F: Scalar>() {
    let mut opt = Adam::<F>::new(LR, WD.to_vec());
    opt.beta1 = B1;
    opt.beta2 = B2;
    opt.eps = EPS;
    let mut p = Param::new(cast::<F>(&w0()));
    let want = adam_recursion_in_f::<F>(&w0(), WD[0], 3);
    for t in 1..=3 {
        p.grad = cast::<F>(&grads(t)[0]);
        opt.update(0, 0, &mut p);
        opt.finish_step();
        let bits = |a: &Array2<F>| {
            a.iter()
                .map(|v| v.to_f64_lossless().to_bits())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            bits(&p.value),
            bits(&want[t - 1]),
            "{} step {t}",
            std::any::type_name::<F>()
        );
    }
}

#[test]
fn adam_values_are_exactly_the_written_out_recursion() {
    adam_exact::<f32>();
    adam_exact::<f64>();
}

#[test]
fn adam_step_one_and_two_by_hand() {
    // One scalar, written out. θ₀ = 0.5, λ = 0.1, ∇L = 0.1 then −0.3.
    // Step 1: g₁ = 0.1 + 0.1·0.5 = 0.15; m̂ = g₁, v̂ = g₁²;
    //   θ₁ = 0.5 − 0.01·0.15/(0.15 + 0.001) = 0.5 − 0.0015/0.151.
    let theta1: f64 = 0.5 - 0.0015 / 0.151;
    // Step 2: g₂ = −0.3 + 0.1·θ₁; m̂ = (β1 g₁ + g₂)/(1 + β1); v̂ = (β2 g₁² + g₂²)/(1 + β2).
    let g2 = -0.3 + 0.1 * theta1;
    let mh = (0.8 * 0.15 + g2) / 1.8;
    let vh = (0.95 * 0.15 * 0.15 + g2 * g2) / 1.95;
    let theta2 = theta1 - 0.01 * mh / (vh.sqrt() + 0.001);
    let mut opt = Adam::<f64>::new(0.01, vec![0.1]);
    opt.beta1 = 0.8;
    opt.beta2 = 0.95;
    opt.eps = 1e-3;
    let mut p = Param::new(arr2(&[[0.5]]));
    p.grad = arr2(&[[0.1]]);
    opt.update(0, 0, &mut p);
    assert!(
        (p.value[[0, 0]] - theta1).abs() < 1e-15,
        "{} vs {theta1}",
        p.value[[0, 0]]
    );
    // Without the bias correction (or with 1 + β^t) step 1 would move by far less than lr.
    assert!((0.5 - p.value[[0, 0]] - 0.0099337748344).abs() < 1e-12);
    p.grad = arr2(&[[-0.3]]);
    opt.update(0, 0, &mut p);
    assert!(
        (p.value[[0, 0]] - theta2).abs() < 1e-15,
        "{} vs {theta2}",
        p.value[[0, 0]]
    );
}

#[test]
fn adam_defaults_are_kingma_ba() {
    let opt = Adam::<f32>::new(0.01, vec![5e-4]);
    assert_eq!(
        (opt.lr, opt.beta1, opt.beta2, opt.eps),
        (0.01, 0.9, 0.999, 1e-8)
    );
    assert_eq!(opt.weight_decay, vec![5e-4]);
    // With the defaults, step 1 moves every coordinate by lr·g/(|g| + 1e-8) ≈ lr·sign(g).
    let mut opt = Adam::<f64>::new(0.01, vec![]);
    let mut p = Param::new(arr2(&[[1.0, -1.0, 0.0]]));
    p.grad = arr2(&[[2.0, -0.5, 0.0]]);
    opt.update(0, 0, &mut p);
    let want = [
        1.0 - 0.01 * 2.0 / (2.0 + 1e-8),
        -1.0 + 0.01 * 0.5 / (0.5 + 1e-8),
        0.0,
    ];
    for (g, w) in p.value.iter().zip(want) {
        assert!((g - w).abs() < 1e-15, "{g} vs {w}");
    }
}

// ---------------------------------------------------------------------------------------------
// SGD
// ---------------------------------------------------------------------------------------------

fn sgd_run<F: Scalar>(tol: f64) {
    let name = std::any::type_name::<F>();
    // Without decay: θ ← θ − lr·∇L.
    let mut opt = Sgd {
        lr: 0.5,
        weight_decay: vec![],
    };
    let mut p = Param::new(cast::<F>(&w0()));
    p.grad = cast::<F>(&grads(1)[0]);
    Optimizer::<F>::update(&mut opt, 0, 0, &mut p);
    // 0.5 − 0.5·0.1, −1 + 0.5·0.2, 2 − 0.5·0.3, −0.25 − 0.
    assert_close(
        &p.value,
        &arr2(&[[0.45, -0.9], [1.85, -0.25]]),
        tol,
        &format!("{name} SGD"),
    );
    p.grad = cast::<F>(&grads(2)[0]);
    Optimizer::<F>::update(&mut opt, 1, 0, &mut p);
    // 0.45 + 0.15, −0.9 + 0.05, 1.85 − 0.1, −0.25 − 0.3.
    assert_close(
        &p.value,
        &arr2(&[[0.6, -0.85], [1.75, -0.55]]),
        tol,
        &format!("{name} SGD 2"),
    );

    // With decay per group: θ ← θ − lr·(∇L + λ_g θ); group 1 has λ = 0.2, group 3 none.
    let mut opt = Sgd {
        lr: 0.5,
        weight_decay: vec![0.0, 0.2],
    };
    let mut a = Param::new(cast::<F>(&b0()));
    a.grad = cast::<F>(&grads(1)[1]);
    Optimizer::<F>::update(&mut opt, 0, 1, &mut a);
    // 0.25 − 0.5·(−0.4 + 0.05) = 0.425; −0.5 − 0.5·(0.05 − 0.1) = −0.475.
    assert_close(
        &a.value,
        &arr2(&[[0.425, -0.475]]),
        tol,
        &format!("{name} SGD decay"),
    );
    let mut c = Param::new(cast::<F>(&c0()));
    c.grad = cast::<F>(&grads(1)[2]);
    Optimizer::<F>::update(&mut opt, 1, 3, &mut c);
    // Group 3 is past the end of the decay list: 1.5 − 0.1, −2 − 0.1.
    assert_close(
        &c.value,
        &arr2(&[[1.4, -2.1]]),
        tol,
        &format!("{name} SGD no decay"),
    );
    Optimizer::<F>::update(&mut opt, 0, 0, &mut c);
    assert_close(
        &c.value,
        &arr2(&[[1.3, -2.2]]),
        tol,
        &format!("{name} SGD group 0"),
    );
    // A zero gradient with decay still shrinks: θ(1 − lr·λ).
    let mut z = Param::new(cast::<F>(&arr2(&[[2.0, -4.0]])));
    Optimizer::<F>::update(&mut opt, 0, 1, &mut z);
    assert_close(
        &z.value,
        &arr2(&[[1.8, -3.6]]),
        tol,
        &format!("{name} SGD pure decay"),
    );
}

#[test]
fn sgd_matches_hand_values() {
    sgd_run::<f64>(1e-15);
    sgd_run::<f32>(1e-7);
}

// ---------------------------------------------------------------------------------------------
// Weight-decay groups
// ---------------------------------------------------------------------------------------------

fn graph() -> Graph {
    let e = [
        (0, 1),
        (1, 2),
        (2, 0),
        (2, 3),
        (3, 4),
        (4, 5),
        (5, 3),
        (6, 6),
    ];
    Graph::try_from_edges(7, &e, Direction::Undirected).unwrap()
}

fn features(n: usize, d: usize) -> Features<f64> {
    Features::dense(Array2::from_shape_fn((n, d), |(i, j)| {
        ((i * 7 + j * 3) % 5) as f64 - 2.0
    }))
}

/// (group, shape) of every parameter in visiting order.
fn groups_of(m: &mut Model<f64>) -> Vec<(usize, (usize, usize))> {
    let mut v = Vec::new();
    m.visit_params(&mut |g, p| v.push((g, p.value.dim())));
    v
}

/// Sets every parameter to a non-zero value (biases and β start at 0, which no decay moves),
/// zeroes the gradients, runs one optimiser step as the trainer does (visiting order, group),
/// and returns per parameter whether any of its values changed.
fn moved_by(m: &mut Model<f64>, opt: &mut dyn Optimizer<f64>) -> Vec<bool> {
    m.visit_params(&mut |_, p| {
        let mut k = 0.0;
        p.value.mapv_inplace(|_| {
            k += 1.0;
            0.3 + 0.1 * k
        });
    });
    m.zero_grad();
    let before: Vec<Array2<f64>> = {
        let mut v = Vec::new();
        m.visit_params(&mut |_, p| v.push(p.value.clone()));
        v
    };
    let mut index = 0;
    m.visit_params(&mut |group, p| {
        opt.update(index, group, p);
        index += 1;
    });
    opt.finish_step();
    let mut moved = Vec::new();
    let mut k = 0;
    m.visit_params(&mut |_, p| {
        moved.push(p.value != before[k]);
        k += 1;
    });
    moved
}

/// The value of the first weight of the Kipf GCN's first layer (node 0).
fn first_weight(m: &mut Model<f64>) -> Array2<f64> {
    let mut w = None;
    m.visit_named(&mut |name, t| {
        if let ("0.gcn_conv.weight", Named::Param(p)) = (name, t) {
            w = Some(p.value.clone());
        }
    });
    w.expect("node 0 is the first convolution")
}

#[test]
fn kipf_gcn_groups_are_first_hidden_last_and_default_decay_reaches_layer_one_only() {
    let adj = NormAdj::<f64>::new(&graph(), Norm::Symmetric);
    let x = features(7, 5);
    for n_layers in [2, 3, 4] {
        for bias in [false, true] {
            let what = format!("{n_layers} layers, bias {bias}");
            let cfg = ModelConfig {
                in_dim: 5,
                hidden_dim: 4,
                out_dim: 3,
                n_layers,
                bias,
                ..Default::default()
            };
            let mut m = cfg
                .build(&adj, &x, None, &mut ChaCha8Rng::seed_from_u64(1))
                .unwrap();
            // Mark every convolution's parameters with its layer index (the convolutions are the
            // nodes named `gcn_conv`, in forward order), then read the marks back with the
            // groups the model reports.
            let mut conv_of_node = std::collections::BTreeMap::new();
            m.visit_named(&mut |name, t| {
                let mut parts = name.split('.');
                let node: usize = parts.next().unwrap().parse().unwrap();
                assert_eq!(parts.next(), Some("gcn_conv"), "{what}: {name}");
                let n = conv_of_node.len();
                let l = *conv_of_node.entry(node).or_insert(n);
                if let Named::Param(p) = t {
                    let bias = parts.next() == Some("bias");
                    p.value.fill(l as f64 + if bias { 0.5 } else { 0.0 });
                }
            });
            assert_eq!(conv_of_node.len(), n_layers, "{what}");
            let mut seen = Vec::new();
            m.visit_params(&mut |g, p| seen.push((g, p.value[[0, 0]], p.value.dim())));
            let mut dims = vec![5];
            dims.extend(std::iter::repeat_n(4, n_layers - 1));
            dims.push(3);
            let group = |l: usize| {
                if l == 0 {
                    0
                } else if l == n_layers - 1 {
                    2
                } else {
                    1
                }
            };
            let mut want = Vec::new();
            for l in 0..n_layers {
                let (din, dout) = (dims[l], dims[l + 1]);
                want.push((group(l), l as f64, (din, dout)));
                if bias {
                    want.push((group(l), l as f64 + 0.5, (1, dout)));
                }
            }
            assert_eq!(seen, want, "{what}");
            assert!(
                seen.iter().all(|&(g, _, _)| g < ModelConfig::N_GROUPS),
                "{what}"
            );
            // The layer of every parameter, in visiting order.
            let layer_of: Vec<usize> = want.iter().map(|&(_, v, _)| v as usize).collect();

            // Kipf's TrainConfig (Adam, weight decay [5e-4]): with zero loss gradients only
            // layer 1's parameters move, by about lr (Adam's first step is lr·sign(g)).
            let tc = TrainConfig::default();
            assert_eq!(tc.weight_decay, vec![5e-4]);
            let mut m2 = m.clone();
            let moved = moved_by(&mut m2, tc.optimizer::<f64>().as_mut());
            let want_moved: Vec<bool> = layer_of.iter().map(|&l| l == 0).collect();
            assert_eq!(moved, want_moved, "{what}");
            let w = first_weight(&mut m2);
            // Values were 0.4, 0.5, … (all positive): each moved down by lr·λθ/(λθ + 1e-8).
            for (k, &v) in w.iter().enumerate() {
                let t0 = 0.3 + 0.1 * (k + 1) as f64;
                let want = t0 - 0.01 * (5e-4 * t0) / (5e-4 * t0 + 1e-8);
                assert!((v - want).abs() < 1e-14, "{what}: {v} vs {want}");
            }
            // SGD with a decay per group: each group moves exactly by its own λ; group 1 is
            // the layers between the first and the last (none with 2 layers).
            let mut m3 = m.clone();
            let mut sgd = Sgd {
                lr: 1.0,
                weight_decay: vec![0.0, 0.5],
            };
            let moved = moved_by(&mut m3, &mut sgd);
            let want_moved: Vec<bool> = layer_of
                .iter()
                .map(|&l| l > 0 && l + 1 < n_layers)
                .collect();
            assert_eq!(moved, want_moved, "{what}");
            // A decay for each of the first three groups reaches every layer.
            let moved = moved_by(&mut m.clone(), &mut Adam::new(0.01, vec![5e-4; 3]));
            assert!(moved.iter().all(|&b| b), "{what}");
        }
    }
}

/// The expected (group, shape) list of every architecture with in 6, hidden 4, out 3, 3 layers
/// (SGC and APPNP have none), GCN bias on, dense features, in the stack's node order, from the
/// `nn::arch` module docs: 0 stem (first conv, residual projection, GCNII's, SGC's and APPNP's
/// input Linear), 1 hidden convs, 2 head (last conv or head Linear, JK attention), 3 norm γ, β.
fn expected_groups(arch: Arch, norm: NormKind) -> Vec<(usize, (usize, usize))> {
    let (i, h, o) = (6, 4, 3);
    let mut v = Vec::new();
    let bn = norm == NormKind::Batch;
    let norm_params = [(3, (1, h)), (3, (1, h))];
    match arch {
        Arch::Gcn(_) => {
            v.extend([(0, (i, h)), (0, (1, h))]); // first conv
            if bn {
                v.extend(norm_params);
            }
            v.extend([(1, (h, h)), (1, (1, h))]); // hidden conv
            if bn {
                v.extend(norm_params);
            }
            v.extend([(2, (h, o)), (2, (1, o))]); // last conv = head
        }
        Arch::Residual(_) => {
            v.push((0, (i, h))); // projection X·P (no bias)
            v.extend([(0, (i, h)), (0, (1, h))]); // first conv
            if bn {
                v.extend(norm_params);
            }
            v.extend([(1, (h, h)), (1, (1, h))]); // hidden conv
            if bn {
                v.extend(norm_params);
            }
            v.extend([(2, (h, o)), (2, (1, o))]); // last conv = head
        }
        Arch::Gcnii(_) => {
            v.extend([(0, (i, h)), (0, (1, h))]); // input Linear
            v.extend([(1, (h, h)); 3]); // GCNII convs (no bias)
            v.extend([(2, (h, o)), (2, (1, o))]); // head Linear
        }
        Arch::Jk(mode) => {
            v.extend([(0, (i, h)), (0, (1, h))]); // first conv
            if bn {
                v.extend(norm_params);
            }
            for _ in 0..2 {
                v.extend([(1, (h, h)), (1, (1, h))]); // hidden convs
                if bn {
                    v.extend(norm_params);
                }
            }
            let width = match mode {
                JkMode::Concat => 3 * h,
                _ => h,
            };
            if mode == JkMode::Attention {
                v.push((2, (h, 1))); // attention vector
            }
            v.extend([(2, (width, o)), (2, (1, o))]); // head Linear
        }
        Arch::Sgc(_) => {
            v.extend([(0, (i, o)), (0, (1, o))]); // the Linear after Â^K X
        }
        Arch::Appnp(_) => {
            v.extend([(0, (i, h)), (0, (1, h))]); // first Linear
            v.extend([(2, (h, o)), (2, (1, o))]); // second Linear (before propagation)
        }
    }
    v
}

#[test]
fn every_architecture_has_the_groups_of_the_module_docs() {
    let adj = NormAdj::<f64>::new(&graph(), Norm::Symmetric);
    let x = features(7, 6);
    for arch in Arch::all() {
        for norm in [NormKind::None, NormKind::Batch] {
            let cfg = ModelConfig {
                in_dim: 6,
                hidden_dim: 4,
                out_dim: 3,
                norm,
                bias: true,
                ..ModelConfig::deep(arch, 3)
            };
            let mut m = cfg
                .build(&adj, &x, None, &mut ChaCha8Rng::seed_from_u64(2))
                .unwrap();
            let want = expected_groups(arch, norm);
            assert_eq!(groups_of(&mut m), want, "{arch} {norm}");
            assert!(want.iter().all(|&(g, _)| g < ModelConfig::N_GROUPS));
            // The groups the nodes report are those their parameters are visited with.
            for node in m.nodes() {
                assert!(node.group < ModelConfig::N_GROUPS, "{arch} {norm}");
            }
            // One step with zero loss gradients and decay on group g only: exactly group g moves.
            for g in 0..ModelConfig::N_GROUPS {
                let mut wd = vec![0.0; ModelConfig::N_GROUPS];
                wd[g] = 0.25;
                let moved = moved_by(
                    &mut m.clone(),
                    &mut Sgd {
                        lr: 1.0,
                        weight_decay: wd.clone(),
                    },
                );
                let expect: Vec<bool> = want.iter().map(|&(gr, _)| gr == g).collect();
                assert_eq!(moved, expect, "{arch} {norm} SGD group {g}");
                let moved = moved_by(&mut m.clone(), &mut Adam::new(0.01, wd));
                assert_eq!(moved, expect, "{arch} {norm} Adam group {g}");
            }
            // Kipf's [5e-4] decays group 0 only; GCNII's [5e-4, 0.01, 5e-4] all but the norms.
            let moved = moved_by(
                &mut m.clone(),
                TrainConfig::default().optimizer::<f64>().as_mut(),
            );
            let expect: Vec<bool> = want.iter().map(|&(gr, _)| gr == 0).collect();
            assert_eq!(moved, expect, "{arch} {norm} Kipf decay");
            let moved = moved_by(&mut m.clone(), &mut Adam::new(0.01, vec![5e-4, 0.01, 5e-4]));
            let expect: Vec<bool> = want.iter().map(|&(gr, _)| gr != 3).collect();
            assert_eq!(moved, expect, "{arch} {norm} GCNII decay");
        }
    }
}

#[test]
fn weight_decay_lists_longer_than_the_groups_are_rejected() {
    for n in 0..=ModelConfig::N_GROUPS + 1 {
        let cfg = TrainConfig {
            weight_decay: vec![1e-4; n],
            ..TrainConfig::default()
        };
        assert_eq!(cfg.check_optim().is_ok(), n <= ModelConfig::N_GROUPS, "{n}");
    }
}
