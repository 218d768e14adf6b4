//! Numerical fingerprints of fixed-seed training runs of every model configuration, pinned so
//! that a rewrite of the model code cannot change results unnoticed.
//!
//! Each [`Case`] is trained on a small synthetic citation-like graph (400 nodes, bag-of-words
//! features, row-normalised, stored dense or sparse) in rayon pools of 1 and of 2 threads; both
//! runs must give the recorded fingerprint. The fingerprint is FNV-1a 64 over the little-endian
//! bytes of the bits (`to_bits`) of, in this order: every epoch's train loss, train accuracy,
//! validation loss and validation accuracy (f64), the test accuracy (f64), then every logit of
//! the trained model's evaluation pass (`predict` on the full graph, f32) in row-major order.
//! Wall times are never hashed.
//!
//! Only [`data`] and [`run_case`] call the library's training API; the case table ([`Case`],
//! with its own small enums) and the expected values ([`EXPECTED`]) do not depend on it.
//!
//! On a mismatch every case of the failing test is printed as a `("name", 0x…),` line with its
//! ACTUAL fingerprint, so the table can be re-recorded deliberately. To print the table
//! without failing (for recording):
//!
//! ```text
//! FINGERPRINT_PRINT=1 cargo test --test suite fingerprints:: -- --nocapture
//! ```

use std::collections::BTreeMap;
use std::sync::OnceLock;

use sparse_gcn::data::synthetic::CitationLike;
use sparse_gcn::data::{Dataset, Features};
use sparse_gcn::graph::{Norm, NormAdj};
use sparse_gcn::nn::pair_norm::PairNormMode;
use sparse_gcn::nn::{self, Arch, ModelConfig, NormKind};
use sparse_gcn::train::{
    fit_model, DropEdgeSource, FitOptions, OptimizerKind, StopRule, TrainConfig, TrainData,
};
use sparse_gcn::Par;

// ---------------------------------------------------------------------------------------------
// The cases (independent of the library's API).
// ---------------------------------------------------------------------------------------------

/// Evaluation order of the GCN convolutions.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Order {
    Auto,
    AggregateFirst,
    TransformFirst,
}

/// Normalisation of the deep models' hidden layers.
#[derive(Debug, Clone, Copy, PartialEq)]
enum DeepNorm {
    None,
    Batch,
    /// PairNorm with its default scale.
    Pair,
}

/// Early stopping.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Stop {
    Never,
    Kipf(usize),
    Patience(usize),
}

/// The model.
#[derive(Debug, Clone, PartialEq)]
enum ModelKind {
    /// Kipf & Welling's GCN (hidden 16, dropout 0.5 unless stated).
    Kipf {
        layers: usize,
        bias: bool,
        input_dropout: f64,
        order: Order,
    },
    /// A deep GCN, hidden 16, dropout 0.5 on the input and between layers.
    Deep {
        /// `plain`, `residual`, `gcnii`, `jk-cat`, `jk-max`, `jk-att`.
        variant: &'static str,
        layers: usize,
        norm: DeepNorm,
        /// Activation checkpointing every this many hidden layers (0: off).
        checkpoint: usize,
        order: Order,
    },
}

/// Everything but the model.
#[derive(Debug, Clone, PartialEq)]
struct Opts {
    /// Features stored sparse (CSR) rather than dense.
    sparse: bool,
    epochs: usize,
    stop: Stop,
    /// Adam when false.
    sgd: bool,
    lr: f64,
    /// Row normalisation D⁻¹(A+I) instead of the symmetric one.
    row_adj: bool,
    /// DropEdge rate (0: off), symmetric renormalisation of each sampled graph.
    drop_edge: f64,
    seed: u64,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            sparse: false,
            epochs: 12,
            stop: Stop::Never,
            sgd: false,
            lr: 0.01,
            row_adj: false,
            drop_edge: 0.0,
            seed: 5,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Case {
    name: String,
    model: ModelKind,
    opts: Opts,
}

fn kipf_model(layers: usize, bias: bool, input_dropout: f64, order: Order) -> ModelKind {
    ModelKind::Kipf {
        layers,
        bias,
        input_dropout,
        order,
    }
}

fn deep_model(
    variant: &'static str,
    layers: usize,
    norm: DeepNorm,
    checkpoint: usize,
) -> ModelKind {
    ModelKind::Deep {
        variant,
        layers,
        norm,
        checkpoint,
        order: Order::Auto,
    }
}

fn case(name: &str, model: ModelKind, opts: Opts) -> Case {
    Case {
        name: name.to_string(),
        model,
        opts,
    }
}

fn storage(sparse: bool) -> &'static str {
    if sparse {
        "sparse"
    } else {
        "dense"
    }
}

const VARIANTS: [&str; 6] = ["plain", "residual", "gcnii", "jk-cat", "jk-max", "jk-att"];

fn kipf_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for sparse in [false, true] {
        let s = storage(sparse);
        let o = Opts {
            sparse,
            ..Opts::default()
        };
        for (order, on) in [
            (Order::AggregateFirst, "agg"),
            (Order::TransformFirst, "trans"),
            (Order::Auto, "auto"),
        ] {
            v.push(case(
                &format!("kipf-{on}-{s}"),
                kipf_model(2, false, 0.5, order),
                o.clone(),
            ));
        }
        v.push(case(
            &format!("kipf-bias-3layers-{s}"),
            kipf_model(3, true, 0.5, Order::Auto),
            o.clone(),
        ));
        // No input dropout: the first layer aggregates the cached ÂX.
        v.push(case(
            &format!("kipf-no-input-dropout-agg-{s}"),
            kipf_model(2, false, 0.0, Order::AggregateFirst),
            o.clone(),
        ));
        v.push(case(
            &format!("kipf-no-input-dropout-auto-{s}"),
            kipf_model(2, false, 0.0, Order::Auto),
            o.clone(),
        ));
    }
    let k = kipf_model(2, false, 0.5, Order::Auto);
    v.push(case(
        "kipf-patience3-30epochs-dense",
        k.clone(),
        Opts {
            epochs: 30,
            stop: Stop::Patience(3),
            lr: 0.2,
            ..Opts::default()
        },
    ));
    v.push(case(
        "kipf-kipfstop3-dense",
        k.clone(),
        Opts {
            epochs: 30,
            stop: Stop::Kipf(3),
            lr: 0.2,
            ..Opts::default()
        },
    ));
    v.push(case(
        "kipf-sgd-dense",
        k.clone(),
        Opts {
            sgd: true,
            lr: 0.5,
            ..Opts::default()
        },
    ));
    v.push(case(
        "kipf-row-adj-sparse",
        k,
        Opts {
            row_adj: true,
            sparse: true,
            ..Opts::default()
        },
    ));
    v
}

fn deep_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for variant in VARIANTS {
        let norms: &[(DeepNorm, &str)] = if variant == "gcnii" {
            // GCNII has no hidden normalisation.
            &[(DeepNorm::None, "none")]
        } else {
            &[
                (DeepNorm::None, "none"),
                (DeepNorm::Batch, "batch"),
                (DeepNorm::Pair, "pair"),
            ]
        };
        for &(norm, nn) in norms {
            v.push(case(
                &format!("deep-{variant}-{nn}-dense"),
                deep_model(variant, 4, norm, 0),
                Opts::default(),
            ));
        }
        v.push(case(
            &format!("deep-{variant}-none-sparse"),
            deep_model(variant, 4, DeepNorm::None, 0),
            Opts {
                sparse: true,
                ..Opts::default()
            },
        ));
    }
    v.push(case(
        "deep-residual-batch-sparse",
        deep_model("residual", 4, DeepNorm::Batch, 0),
        Opts {
            sparse: true,
            ..Opts::default()
        },
    ));
    for (order, on) in [
        (Order::AggregateFirst, "agg"),
        (Order::TransformFirst, "trans"),
    ] {
        for sparse in [false, true] {
            v.push(case(
                &format!("deep-plain-{on}-{}", storage(sparse)),
                ModelKind::Deep {
                    variant: "plain",
                    layers: 4,
                    norm: DeepNorm::None,
                    checkpoint: 0,
                    order,
                },
                Opts {
                    sparse,
                    ..Opts::default()
                },
            ));
        }
    }
    v
}

fn dropedge_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for variant in VARIANTS {
        v.push(case(
            &format!("dropedge-{variant}-dense"),
            deep_model(variant, 4, DeepNorm::None, 0),
            Opts {
                drop_edge: 0.3,
                ..Opts::default()
            },
        ));
    }
    for variant in ["plain", "gcnii", "jk-cat"] {
        v.push(case(
            &format!("dropedge-{variant}-sparse"),
            deep_model(variant, 4, DeepNorm::None, 0),
            Opts {
                drop_edge: 0.3,
                sparse: true,
                ..Opts::default()
            },
        ));
    }
    v.push(case(
        "dropedge-residual-batch-dense",
        deep_model("residual", 4, DeepNorm::Batch, 0),
        Opts {
            drop_edge: 0.3,
            ..Opts::default()
        },
    ));
    v
}

fn checkpoint_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for variant in VARIANTS {
        v.push(case(
            &format!("checkpoint2-{variant}-6layers-dense"),
            deep_model(variant, 6, DeepNorm::None, 2),
            Opts::default(),
        ));
    }
    v.push(case(
        "checkpoint2-residual-batch-6layers-dense",
        deep_model("residual", 6, DeepNorm::Batch, 2),
        Opts::default(),
    ));
    v.push(case(
        "checkpoint2-jk-att-pair-6layers-sparse",
        deep_model("jk-att", 6, DeepNorm::Pair, 2),
        Opts {
            sparse: true,
            ..Opts::default()
        },
    ));
    v.push(case(
        "checkpoint2-plain-dropedge-6layers-dense",
        deep_model("plain", 6, DeepNorm::None, 2),
        Opts {
            drop_edge: 0.3,
            ..Opts::default()
        },
    ));
    v
}

// ---------------------------------------------------------------------------------------------
// The library calls (the part to rewrite for a new API).
// ---------------------------------------------------------------------------------------------

struct Data {
    d: Dataset,
    dense: Features<f32>,
    sparse: Features<f32>,
    adj_sym: NormAdj<f32>,
    adj_row: NormAdj<f32>,
}

fn data() -> &'static Data {
    static DATA: OnceLock<Data> = OnceLock::new();
    DATA.get_or_init(|| {
        let mut d = CitationLike {
            n_nodes: 400,
            ..Default::default()
        }
        .generate(3)
        .unwrap();
        d.features.row_normalize();
        let sparse = d.features.clone().into_sparse_if(1.0);
        let dense = Features::Dense(d.features.to_dense());
        assert!(sparse.is_sparse() && !dense.is_sparse());
        let adj_sym = NormAdj::new(&d.graph, Norm::Symmetric);
        let adj_row = NormAdj::new(&d.graph, Norm::Row);
        Data {
            d,
            dense,
            sparse,
            adj_sym,
            adj_row,
        }
    })
}

fn order(o: Order) -> nn::Order {
    match o {
        Order::Auto => nn::Order::Auto,
        Order::AggregateFirst => nn::Order::AggregateFirst,
        Order::TransformFirst => nn::Order::TransformFirst,
    }
}

/// (train loss, train accuracy, validation loss, validation accuracy) per epoch, the test
/// accuracy and the trained model's evaluation logits (row-major).
type Outcome = (Vec<[f64; 4]>, f64, Vec<f32>);

/// Trains `case` in a rayon pool of `threads` threads.
fn run_case(case: &Case, threads: usize) -> Outcome {
    let data = data();
    let d = &data.d;
    let o = &case.opts;
    let x = if o.sparse { &data.sparse } else { &data.dense };
    let adj = if o.row_adj {
        &data.adj_row
    } else {
        &data.adj_sym
    };
    let train = TrainConfig {
        lr: o.lr,
        epochs: o.epochs,
        stop: match o.stop {
            Stop::Never => StopRule::Never,
            Stop::Kipf(window) => StopRule::Kipf { window },
            Stop::Patience(patience) => StopRule::Patience { patience },
        },
        optimizer: if o.sgd {
            OptimizerKind::Sgd
        } else {
            OptimizerKind::Adam
        },
        par: Par::Rayon,
        ..TrainConfig::default()
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    pool.install(|| {
        let model = match case.model {
            ModelKind::Kipf {
                layers,
                bias,
                input_dropout,
                order: ord,
            } => {
                assert_eq!(o.drop_edge, 0.0, "{}: no DropEdge for Kipf", case.name);
                ModelConfig {
                    n_layers: layers,
                    bias,
                    input_dropout,
                    order: order(ord),
                    ..ModelConfig::default()
                }
            }
            ModelKind::Deep {
                variant,
                layers,
                norm,
                checkpoint,
                order: ord,
            } => ModelConfig {
                hidden_dim: 16,
                norm: match norm {
                    DeepNorm::None => NormKind::None,
                    DeepNorm::Batch => NormKind::Batch,
                    DeepNorm::Pair => NormKind::Pair(PairNormMode::Pn),
                },
                checkpoint,
                order: order(ord),
                drop_edge: o.drop_edge,
                ..ModelConfig::deep(variant.parse::<Arch>().unwrap(), layers)
            },
        };
        let cfg = TrainConfig { model, ..train };
        let opts = FitOptions {
            drop_edge: (o.drop_edge > 0.0).then_some(DropEdgeSource {
                graph: &d.graph,
                norm: Norm::Symmetric,
            }),
            ..FitOptions::default()
        };
        let (run, mut model) = fit_model(
            &TrainData::new(adj, x, &d.labels, d.n_classes, &d.split),
            &cfg,
            o.seed,
            &opts,
        )
        .unwrap();
        let logits = model.predict(adj, x, Par::Rayon);
        let epochs = run
            .history
            .iter()
            .map(|e| [e.train_loss, e.train_acc, e.val_loss, e.val_acc])
            .collect();
        (epochs, run.test_acc, logits.iter().copied().collect())
    })
}

// ---------------------------------------------------------------------------------------------
// Fingerprints and the check.
// ---------------------------------------------------------------------------------------------

struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 ^= u64::from(x);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

fn fingerprint((epochs, test_acc, logits): &Outcome) -> u64 {
    let mut h = Fnv::new();
    for e in epochs {
        for v in e {
            h.bytes(&v.to_bits().to_le_bytes());
        }
    }
    h.bytes(&test_acc.to_bits().to_le_bytes());
    for v in logits {
        h.bytes(&v.to_bits().to_le_bytes());
    }
    h.0
}

/// Runs every case with 1 and 2 threads and compares with [`EXPECTED`].
fn check(group: &str, cases: Vec<Case>) {
    let expected: BTreeMap<&str, u64> = EXPECTED.iter().copied().collect();
    let mut names = std::collections::BTreeSet::new();
    let mut table = String::new();
    let mut bad = Vec::new();
    for c in &cases {
        assert!(names.insert(c.name.clone()), "duplicate case {}", c.name);
        let one = run_case(c, 1);
        let two = run_case(c, 2);
        if c.opts.stop != Stop::Never {
            assert!(
                one.0.len() < c.opts.epochs,
                "{}: the stop rule never fired",
                c.name
            );
        }
        let (f1, f2) = (fingerprint(&one), fingerprint(&two));
        table.push_str(&format!("    (\"{}\", 0x{f1:016x}),\n", c.name));
        if f1 != f2 {
            bad.push(format!(
                "{} (1 thread 0x{f1:016x}, 2 threads 0x{f2:016x})",
                c.name
            ));
        } else {
            match expected.get(c.name.as_str()) {
                Some(&e) if e == f1 => {}
                Some(&e) => bad.push(format!("{} (expected 0x{e:016x}, got 0x{f1:016x})", c.name)),
                None => bad.push(format!("{} (not recorded)", c.name)),
            }
        }
    }
    let print = std::env::var("FINGERPRINT_PRINT").is_ok_and(|v| v == "1");
    if print || !bad.is_empty() {
        println!("// {group}: actual fingerprints (1 thread)\n{table}");
    }
    if print {
        return;
    }
    assert!(
        bad.is_empty(),
        "{group}: {} of {} fingerprints differ:\n  {}",
        bad.len(),
        cases.len(),
        bad.join("\n  ")
    );
}

#[test]
fn kipf() {
    check("kipf", kipf_cases());
}

#[test]
fn deep() {
    check("deep", deep_cases());
}

#[test]
fn dropedge() {
    check("dropedge", dropedge_cases());
}

#[test]
fn checkpoint() {
    check("checkpoint", checkpoint_cases());
}

/// The recorded fingerprints (of the code before the model redesign).
const EXPECTED: &[(&str, u64)] = &[
    ("checkpoint2-plain-6layers-dense", 0x8079ec608c8b5932),
    ("checkpoint2-residual-6layers-dense", 0xd9a483b4c629cdcf),
    ("checkpoint2-gcnii-6layers-dense", 0x30fb9bfbaf057848),
    ("checkpoint2-jk-cat-6layers-dense", 0x4634c8daad7c4b75),
    ("checkpoint2-jk-max-6layers-dense", 0xe68141e1b5a47a29),
    ("checkpoint2-jk-att-6layers-dense", 0x03fc1c3883fe202e),
    (
        "checkpoint2-residual-batch-6layers-dense",
        0xc89e343717d4be6f,
    ),
    ("checkpoint2-jk-att-pair-6layers-sparse", 0x6f46f8fc14a324ef),
    (
        "checkpoint2-plain-dropedge-6layers-dense",
        0x6062d0547f013dbb,
    ),
    ("deep-plain-none-dense", 0x226596fd09046b4d),
    ("deep-plain-batch-dense", 0x63edb3d0c1d46f51),
    ("deep-plain-pair-dense", 0x03b2552f149567e9),
    ("deep-plain-none-sparse", 0x6f39bfab856a41b4),
    ("deep-residual-none-dense", 0xf6c783e2388f36c7),
    ("deep-residual-batch-dense", 0xd012c930e0735a72),
    ("deep-residual-pair-dense", 0x14bb6b8b2c894367),
    ("deep-residual-none-sparse", 0x1645111bf3c088e2),
    ("deep-gcnii-none-dense", 0x5cbe52b8b604598c),
    ("deep-gcnii-none-sparse", 0x40900a117ea0b992),
    ("deep-jk-cat-none-dense", 0x886a0a1f247bf7b4),
    ("deep-jk-cat-batch-dense", 0x49f702d736ffef4b),
    ("deep-jk-cat-pair-dense", 0x0bb44305a2289405),
    ("deep-jk-cat-none-sparse", 0x57742256d964a882),
    ("deep-jk-max-none-dense", 0xedc3e6316e6fbf1a),
    ("deep-jk-max-batch-dense", 0x5cb659ca2e7aafe2),
    ("deep-jk-max-pair-dense", 0x505a18c473066dc0),
    ("deep-jk-max-none-sparse", 0x3c53e1388f3a5043),
    ("deep-jk-att-none-dense", 0x03c197ecad117079),
    ("deep-jk-att-batch-dense", 0x77f093034e7c6718),
    ("deep-jk-att-pair-dense", 0x04daed3df9545497),
    ("deep-jk-att-none-sparse", 0xda0d8f354db26726),
    ("deep-residual-batch-sparse", 0x005b8030107c77c7),
    ("deep-plain-agg-dense", 0xda52050040dbfef2),
    ("deep-plain-agg-sparse", 0x794bcffcbf6bd946),
    ("deep-plain-trans-dense", 0x226596fd09046b4d),
    ("deep-plain-trans-sparse", 0x6f39bfab856a41b4),
    ("dropedge-plain-dense", 0x30097d68b1ac371e),
    ("dropedge-residual-dense", 0xac47501837af2552),
    ("dropedge-gcnii-dense", 0xba42a78ccd189dea),
    ("dropedge-jk-cat-dense", 0x17ebbc59b61c05d8),
    ("dropedge-jk-max-dense", 0x4a38bc49a7f69243),
    ("dropedge-jk-att-dense", 0xd007d1404ef0f633),
    ("dropedge-plain-sparse", 0xe54977c50dfb962b),
    ("dropedge-gcnii-sparse", 0xae8f85a0eb3306b5),
    ("dropedge-jk-cat-sparse", 0x024976ec7cf7dcda),
    ("dropedge-residual-batch-dense", 0x789fdd4de977bf2e),
    ("kipf-agg-dense", 0x67ec7b64fd412d9c),
    ("kipf-trans-dense", 0x534073c910fe067c),
    ("kipf-auto-dense", 0x534073c910fe067c),
    ("kipf-bias-3layers-dense", 0xbd8e488e9a715843),
    ("kipf-no-input-dropout-agg-dense", 0x0ad14ce2014bd65e),
    ("kipf-no-input-dropout-auto-dense", 0x27b184b5d425d3ea),
    ("kipf-agg-sparse", 0xb43420a8e9911a04),
    ("kipf-trans-sparse", 0x3d11104bbaf1e113),
    ("kipf-auto-sparse", 0x3d11104bbaf1e113),
    ("kipf-bias-3layers-sparse", 0x4b36165db4c2c085),
    ("kipf-no-input-dropout-agg-sparse", 0x3492acdd81f847f7),
    ("kipf-no-input-dropout-auto-sparse", 0x7a7c55426ae20df4),
    ("kipf-patience3-30epochs-dense", 0xceb0a74b1a42e8b9),
    ("kipf-kipfstop3-dense", 0x823d51fd8f2284a9),
    ("kipf-sgd-dense", 0x95c7d0113349eef7),
    ("kipf-row-adj-sparse", 0xc33ee7744e8af42c),
];
