//! The layer harness: one layer's forward and backward outside the stack, on buffers allocated
//! from the layer's [`Spec`](crate::nn::layer::Spec), and the f64 gradient check of `docs/MATH.md` §12 (central differences,
//! h = 10⁻⁶, |a − n|/max(1, |a|, |n|) < 10⁻⁶ on every coordinate) for L = ⟨R, Y⟩, so ∂L/∂Y = R.
//!
//! The buffers a layer must write (its output, its input gradients, what it saves, its scratch)
//! start as NaN (bytes as 0xAA), so a value a layer reads before writing, or an input gradient
//! it adds into instead of overwriting, shows up.

use ndarray::{Array2, ArrayView2};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::graph::{Direction, Graph, Norm, NormAdj, Propagate, SumScratch};
use crate::id::DataId;
use crate::input::{Features, FeaturesRef, SparseFeatures};
use crate::nn::layer::{view, view_mut, Bufs, Bwd, Cx, Din, Fwd, GradIo, GradMode, InSlot};
use crate::nn::layer::{InputDesc, InputKey, Inputs, Layer, Req, Saved, Value};
use crate::nn::Mode;
use crate::testing::{max_rel_err, numerical_grad};
use crate::{Par, Scalar};

/// A layer input: dense, or sparse features (at most one per call, passed as X).
#[derive(Debug, Clone)]
pub enum In<F> {
    /// A dense n × d input.
    Dense(Array2<F>),
    /// Sparse features (the model's input X).
    Sparse(SparseFeatures<F>),
}

impl<F: Scalar> In<F> {
    /// The non-zeros of `x` as sparse features.
    pub fn sparse(x: &Array2<F>) -> Self {
        match (Features::dense(x.clone()).into_sparse_if(1.0)).get() {
            FeaturesRef::Sparse(s) => In::Sparse(s.clone()),
            FeaturesRef::Dense(_) => unreachable!("density ≤ 1"),
        }
    }

    fn width(&self) -> usize {
        match self {
            In::Dense(x) => x.ncols(),
            In::Sparse(s) => s.x().cols(),
        }
    }

    /// The dense matrix.
    ///
    /// # Panics
    /// If the input is sparse.
    pub fn dense(&self) -> &Array2<F> {
        match self {
            In::Dense(x) => x,
            In::Sparse(_) => panic!("harness: a dense input was expected"),
        }
    }
}

/// Owned buffers of the sizes of a [`Req`], filled with NaN (bytes with 0xAA).
#[derive(Debug, Clone)]
pub struct State<F> {
    f: Vec<F>,
    u8: Vec<u8>,
    f64: Vec<f64>,
}

impl<F: Scalar> State<F> {
    fn new(r: Req) -> Self {
        State {
            f: vec![F::nan(); r.f],
            u8: vec![0xAA; r.u8],
            f64: vec![f64::NAN; r.f64],
        }
    }
    fn bufs(&mut self) -> Bufs<'_, F> {
        Bufs {
            f: &mut self.f,
            u8: &mut self.u8,
            f64: &mut self.f64,
        }
    }
    fn saved(&self) -> Saved<'_, F> {
        Saved {
            f: &self.f,
            u8: &self.u8,
            f64: &self.f64,
        }
    }
}

/// The inputs of a call laid out as the stack lays them out: dense ones in a pool, the sparse
/// one as X (and X̃).
struct Packed<'a, F> {
    pool: Vec<Vec<F>>,
    slots: Vec<InSlot>,
    x: Option<&'a SparseFeatures<F>>,
    empty: [F; 0],
}

impl<'a, F: Scalar> Packed<'a, F> {
    fn new(ins: &'a [In<F>]) -> Self {
        assert!(
            ins.iter().filter(|i| matches!(i, In::Sparse(_))).count() <= 1,
            "harness: at most one sparse input"
        );
        let mut x = None;
        let mut pool = Vec::new();
        let mut slots = Vec::new();
        for i in ins {
            match i {
                In::Dense(a) => {
                    slots.push(InSlot::Buf {
                        slot: pool.len(),
                        width: a.ncols(),
                    });
                    pool.push(a.iter().copied().collect());
                }
                In::Sparse(s) => {
                    x = Some(s);
                    slots.push(InSlot::X);
                }
            }
        }
        Packed {
            pool,
            slots,
            x,
            empty: [],
        }
    }

    fn inputs(&self, n: usize) -> Inputs<'_, F> {
        let x = match self.x {
            Some(s) => Value::Sparse(s.x(), s.x_t()),
            None => Value::Dense(ArrayView2::from_shape((0, 0), &self.empty[..]).unwrap()),
        };
        Inputs {
            pool: &self.pool,
            slots: &self.slots,
            n,
            x,
            xd: x,
        }
    }
}

/// How a layer is called: the context flags of [`Cx`] and of [`InputDesc`].
#[derive(Clone)]
pub struct Harness<'a, F: Scalar> {
    /// Â (and the sums across its rows).
    pub adj: &'a dyn Propagate<F>,
    /// The mode of forward (and of backward: the stack only backpropagates training passes, a
    /// gradient check in evaluation mode passes `Eval` to both).
    pub mode: Mode,
    /// Parallelism of the kernels.
    pub par: Par,
    /// The dropout stream: every forward call draws from a clone, so draws the same mask.
    pub rng: Option<ChaCha8Rng>,
    /// [`Cx::recompute`].
    pub recompute: bool,
    /// [`Cx::fixed_input`].
    pub fixed_input: bool,
    /// [`InputDesc::fixed_in_training`] of every input.
    pub fixed_in_training: bool,
    /// The id of the features the inputs stand for ([`InputKey::x`]): a fresh one for each
    /// harness, kept by its copies.
    pub x_id: DataId,
    /// Whether a [`GradMode::OverInput`] layer is granted ∂L/∂in over its input (the
    /// stack's [`GradIo::OverInput`]) when that gradient is needed.
    pub over_input: bool,
}

impl<'a, F: Scalar> Harness<'a, F> {
    /// Training mode, [`Par::Seq`], no stream, nothing fixed, features of a fresh id.
    pub fn new(adj: &'a dyn Propagate<F>) -> Self {
        Harness {
            adj,
            mode: Mode::Train,
            par: Par::Seq,
            rng: None,
            recompute: false,
            fixed_input: false,
            fixed_in_training: false,
            x_id: DataId::fresh(),
            over_input: true,
        }
    }

    /// The same with [`GradMode::OverInput`] refused (∂L/∂in in ∂L/∂out's buffer).
    pub fn refuse_over_input(self) -> Self {
        Harness {
            over_input: false,
            ..self
        }
    }

    /// The same in `mode`.
    pub fn mode(self, mode: Mode) -> Self {
        Harness { mode, ..self }
    }

    /// The same with the inputs the model's fixed input in every pass.
    pub fn fixed(self) -> Self {
        Harness {
            fixed_input: true,
            fixed_in_training: true,
            ..self
        }
    }

    fn cx<'c>(
        &self,
        rng: Option<&'c mut ChaCha8Rng>,
        need_din: bool,
        inputs: &'c [InputDesc],
        sums: &'c SumScratch<F>,
    ) -> Cx<'c, F>
    where
        'a: 'c,
    {
        Cx {
            adj: self.adj,
            sums: sums.sums(self.adj.collective(), self.adj.rows()),
            inputs,
            par: self.par,
            mode: self.mode,
            rng,
            recompute: self.recompute,
            input: InputKey {
                adj: self.adj.id(),
                x: self.x_id,
            },
            fixed_input: self.fixed_input,
            need_din,
        }
    }

    /// What the layer is told of its inputs (every one may need a gradient).
    fn descs(&self, ins: &[In<F>]) -> Vec<InputDesc> {
        let (n, n_src) = self.adj.shape();
        ins.iter()
            .map(|i| InputDesc {
                sparse: matches!(i, In::Sparse(_)),
                fixed_in_training: self.fixed_in_training,
                grad: true,
                forward_only: false,
                src_rows: if n_src > n { n_src } else { 0 },
            })
            .collect()
    }

    /// Runs the layer's forward pass on buffers of its [`Spec`](super::layer::Spec) and returns
    /// the output and what it saved. An in-place layer gets input 0 in its output buffer and the
    /// others as its inputs.
    pub fn forward(&self, layer: &mut dyn Layer<F>, ins: &[In<F>]) -> (Array2<F>, State<F>) {
        // (Inputs have Â's source rows, the output its destination rows: a bipartite block's
        // differ.)
        let (n, n_src) = self.adj.shape();
        assert_eq!(ins.len(), layer.arity(), "harness: number of inputs");
        let descs = self.descs(ins);
        let spec = layer.spec(&descs, n);
        let w = spec.out_dim;
        let skip = usize::from(spec.in_place);
        let mut out = if spec.in_place {
            let x = ins[0].dense();
            assert_eq!(
                x.dim(),
                (n, w),
                "harness: an in-place input has the output's shape"
            );
            x.iter().copied().collect()
        } else {
            vec![F::nan(); n * w]
        };
        let mut saved = State::new(spec.saved);
        let mut scratch = State::new(spec.scratch);
        let packed = Packed::new(&ins[skip..]);
        let mut rng = self.rng.clone();
        let sums = SumScratch::default();
        let mut cx = self.cx(rng.as_mut(), false, &descs, &sums);
        layer
            .forward(
                &mut cx,
                Fwd {
                    ins: packed.inputs(n_src),
                    out: view_mut(&mut out, (n, w)),
                    over_input: None,
                    saved: saved.bufs(),
                    scratch: scratch.bufs(),
                },
            )
            .unwrap();
        (Array2::from_shape_vec((n, w), out).unwrap(), saved)
    }

    /// Runs backward from `dout` after the forward call that left `saved`; returns ∂L/∂in_k for
    /// each k with `need[k]` (parameter gradients are added into the layer's). A layer that does
    /// not keep its inputs gets none.
    pub fn backward(
        &self,
        layer: &mut dyn Layer<F>,
        ins: &[In<F>],
        saved: &State<F>,
        dout: &Array2<F>,
        need: &[bool],
    ) -> Vec<Option<Array2<F>>> {
        let (n, n_src) = self.adj.shape();
        let descs = self.descs(ins);
        let spec = layer.spec(&descs, n);
        let w = spec.out_dim;
        assert_eq!(dout.dim(), (n, w), "harness: ∂L/∂out shape");
        assert_eq!(need.len(), ins.len(), "harness: one flag per input");
        // Over the input: ∂L/∂out in a buffer of its own size, the input in its own, which
        // holds ∂L/∂in after the call (as the stack lays them out when it grants it).
        let can_over = matches!(spec.grad, GradMode::OverInput { .. }) && spec.keeps_input;
        let over = self.over_input && can_over && need[0];
        let mut scratch = State::new(spec.scratch_of(over));
        let kept = if spec.keeps_input { ins } else { &[] };
        // (Over the input, the layer reads its input from the gradient's buffer only.)
        let packed = Packed::new(if over { &[] } else { kept });
        let dout_s = dout.as_standard_layout();
        let dout_s = dout_s.as_slice().unwrap();
        let in_place = spec.grad_in_place();
        // In place: one buffer holding ∂L/∂out, then ∂L/∂in. Separate: one buffer per input.
        let in_w = ins.first().map_or(0, In::width);
        let mut buf = Vec::new();
        let mut pool: Vec<Vec<F>> = Vec::new();
        let slots: Vec<Option<(usize, usize)>> = ins
            .iter()
            .enumerate()
            .map(|(k, i)| need[k].then_some((k, i.width())))
            .collect();
        let mut over_in = Vec::new();
        let grad = if over {
            assert!(spec.keeps_input, "harness: over the input it keeps");
            buf = dout_s.to_vec();
            over_in = ins[0].dense().iter().copied().collect();
            GradIo::OverInput {
                dout: &mut buf,
                input: &mut over_in,
            }
        } else if in_place {
            assert_eq!(ins.len(), 1, "harness: in-place gradients are single-input");
            buf = vec![F::nan(); (n * w).max(n_src * in_w)];
            buf[..n * w].copy_from_slice(dout_s);
            GradIo::InPlace(&mut buf)
        } else {
            pool = ins
                .iter()
                .map(|i| vec![F::nan(); n_src * i.width()])
                .collect();
            GradIo::Separate {
                dout: ArrayView2::from_shape((n, w), dout_s).unwrap(),
                din: Din {
                    pool: &mut pool,
                    slots: &slots,
                    n: n_src,
                },
            }
        };
        let sums = SumScratch::default();
        layer
            .backward(
                &mut self.cx(None, in_place && need[0], &descs, &sums),
                Bwd {
                    ins: packed.inputs(n_src),
                    saved: saved.saved(),
                    scratch: scratch.bufs(),
                    grad,
                },
            )
            .unwrap();
        if over {
            return vec![Some(view(&over_in, (n_src, in_w)).to_owned())];
        }
        if in_place {
            return vec![need[0].then(|| view(&buf, (n_src, in_w)).to_owned())];
        }
        pool.into_iter()
            .zip(ins.iter().zip(need))
            .map(|(g, (i, &k))| k.then(|| Array2::from_shape_vec((n_src, i.width()), g).unwrap()))
            .collect()
    }

    /// Forward, then backward from `dout`: the output and the input gradients `need` asks for.
    pub fn run(
        &self,
        layer: &mut dyn Layer<F>,
        ins: &[In<F>],
        dout: &Array2<F>,
        need: &[bool],
    ) -> (Array2<F>, Vec<Option<Array2<F>>>) {
        let (out, saved) = self.forward(layer, ins);
        let din = self.backward(layer, ins, &saved, dout, need);
        (out, din)
    }
}

/// The parameters' values (or gradients), in [`Layer::visit_params`] order, with their names.
pub fn params<F: Scalar>(layer: &mut dyn Layer<F>, grad: bool) -> Vec<(&'static str, Array2<F>)> {
    let mut v = Vec::new();
    layer.visit_params(&mut |name, p| {
        let a = if grad { &p.grad } else { &p.value };
        v.push((name, a.clone()));
    });
    v
}

/// Sets every parameter gradient to zero.
pub fn zero_grads<F: Scalar>(layer: &mut dyn Layer<F>) {
    layer.visit_params(&mut |_, p| p.zero_grad());
}

/// Overwrites the parameters' values, in [`Layer::visit_params`] order, from `t`; returns how
/// many values were read.
fn set_params(layer: &mut dyn Layer<f64>, t: &[f64]) -> usize {
    let mut off = 0;
    layer.visit_params(&mut |_, p| {
        for v in p.value.iter_mut() {
            *v = t[off];
            off += 1;
        }
    });
    off
}

impl Harness<'_, f64> {
    /// The gradient check of L = ⟨R, Y⟩ on every coordinate of every parameter and of every
    /// input k with `need[k]` (dense); also that a second backward call adds the same
    /// parameter gradients again and writes the same input gradients. Returns the output and
    /// the input gradients of the first call. `what` names the case in failure messages.
    #[track_caller]
    pub fn grad_check(
        &self,
        layer: &mut dyn Layer<f64>,
        ins: &[In<f64>],
        need: &[bool],
        r: &Array2<f64>,
        what: &str,
    ) -> (Array2<f64>, Vec<Option<Array2<f64>>>) {
        zero_grads(layer);
        let (out, din) = self.run(layer, ins, r, need);
        let grads = params(layer, true);
        assert!(out.iter().all(|v| v.is_finite()), "{what}: output {out}");
        for d in din.iter().flatten() {
            assert!(
                d.iter().all(|v| v.is_finite()),
                "{what}: input gradient {d}"
            );
        }
        // Again: parameter gradients add up, input gradients are overwritten.
        let (out2, din2) = self.run(layer, ins, r, need);
        assert_eq!(out, out2, "{what}: a second forward call differs");
        assert_eq!(din, din2, "{what}: a second backward call differs");
        // (Up to rounding: a kernel may add its terms into the gradient one by one.)
        for ((name, g1), (_, g2)) in grads.iter().zip(params(layer, true)) {
            let ok = g1
                .iter()
                .zip(&g2)
                .all(|(a, b)| (2.0 * a - b).abs() <= 1e-12 * b.abs().max(1.0));
            assert!(
                ok,
                "{what}: {name}'s gradient does not accumulate: {g1} then {g2}"
            );
        }

        let mut labels = Vec::new();
        let mut theta = Vec::new();
        let mut analytic = Vec::new();
        for ((name, v), (_, g)) in params(layer, false).iter().zip(&grads) {
            labels.extend((0..v.len()).map(|i| format!("{name}[{i}]")));
            theta.extend(v.iter());
            analytic.extend(g.iter());
        }
        let n_params = theta.len();
        for (k, (i, d)) in ins.iter().zip(&din).enumerate() {
            if let Some(d) = d {
                let x = i.dense();
                labels.extend(
                    (0..x.len())
                        .map(|e| format!("input {k} [{}, {}]", e / x.ncols(), e % x.ncols())),
                );
                theta.extend(x.iter());
                analytic.extend(d.iter());
            }
        }
        let original = theta.clone();
        let loss = |t: &[f64]| {
            set_params(layer, t);
            let mut off = n_params;
            let perturbed: Vec<In<f64>> = ins
                .iter()
                .zip(need)
                .map(|(i, &k)| match i {
                    In::Dense(x) if k => {
                        let v = t[off..off + x.len()].to_vec();
                        off += x.len();
                        In::Dense(Array2::from_shape_vec(x.dim(), v).unwrap())
                    }
                    i => i.clone(),
                })
                .collect();
            (self.forward(layer, &perturbed).0 * r).sum()
        };
        let numerical = numerical_grad(loss, &theta, 1e-6);
        set_params(layer, &original);
        let (err, at) = max_rel_err(&analytic, &numerical);
        assert!(
            err < 1e-6,
            "{what}: rel err {err:e} at {} (analytic {}, numerical {})",
            labels[at],
            analytic[at],
            numerical[at]
        );
        (out, din)
    }
}

/// Uniform(−1, 1) entries.
pub fn random(rows: usize, cols: usize, rng: &mut ChaCha8Rng) -> Array2<f64> {
    Array2::from_shape_simple_fn((rows, cols), || rng.random_range(-1.0..1.0))
}

/// A seeded stream.
pub fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// 8 nodes: a path 0–1–2–3, a triangle 3–4–5, a cycle through 6, a self-loop on node 2 and an
/// isolated node 7.
pub fn small_graph(dir: Direction) -> Graph {
    let e = [
        (0, 1),
        (1, 2),
        (2, 2),
        (2, 3),
        (3, 4),
        (4, 5),
        (5, 3),
        (1, 6),
        (6, 0),
    ];
    Graph::try_from_edges(8, &e, dir).unwrap()
}

/// The small graph undirected and symmetric-normalised, and directed and row-normalised (there
/// Âᵀ ≠ Â, so backward's Âᵀ is exercised).
pub fn small_adjs() -> [(&'static str, NormAdj<f64>); 2] {
    let sym = NormAdj::new(&small_graph(Direction::Undirected), Norm::Symmetric);
    let row = NormAdj::new(&small_graph(Direction::Directed), Norm::Row);
    assert!(sym.is_symmetric() && !row.is_symmetric());
    assert_ne!(row.a().to_dense(), row.a().to_dense().t());
    [("undirected, symmetric", sym), ("directed, row", row)]
}

/// Â = I of `n` isolated nodes (for layers that use Â only for n and the sums over nodes).
pub fn isolated<F: Scalar>(n: usize) -> NormAdj<F> {
    NormAdj::new(
        &Graph::try_from_edges(n, &[], Direction::Undirected).unwrap(),
        Norm::Symmetric,
    )
}

/// Â of the 300-node synthetic citation graph, and its (sparse) features.
pub fn citation() -> (NormAdj<f32>, Features<f32>) {
    let data = crate::data::synthetic::CitationLike {
        n_nodes: 300,
        ..Default::default()
    }
    .generate(5)
    .unwrap();
    (NormAdj::new(&data.graph, Norm::Symmetric), data.features)
}

/// The bits of every element (for bit-for-bit comparisons).
pub fn bits<F: Scalar>(a: &Array2<F>) -> Vec<u64> {
    a.iter().map(|v| v.to_f64_lossless().to_bits()).collect()
}

/// Asserts that `f` gives the same result under [`Par::Seq`] and under [`Par::Rayon`] in pools of
/// 1, 2 and 3 threads.
#[track_caller]
pub fn same_for_any_thread_count<T: PartialEq + Send>(f: impl Fn(Par) -> T + Sync, what: &str) {
    let seq = f(Par::Seq);
    for k in [1, 2, 3] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(k)
            .build()
            .unwrap();
        let got = pool.install(|| f(Par::Rayon));
        assert!(got == seq, "{what}: {k} threads differ from Par::Seq");
    }
}
