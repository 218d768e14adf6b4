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
        let dense = Features::dense(d.features.to_dense());
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
        let logits = model.predict(adj, x, Par::Rayon).unwrap();
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

/// The recorded fingerprints (re-recorded when dropout masks moved to SplitMix64 keyed from the
/// layer's stream and the loss gradient computed each exp once).
const EXPECTED: &[(&str, u64)] = &[
    ("checkpoint2-plain-6layers-dense", 0x7e988fb05025ad4a),
    ("checkpoint2-residual-6layers-dense", 0x47f005b044c6487c),
    ("checkpoint2-gcnii-6layers-dense", 0x0679ecca8e7c3c21),
    ("checkpoint2-jk-cat-6layers-dense", 0xd8d546ee8f9968e6),
    ("checkpoint2-jk-max-6layers-dense", 0xcc150f0d29266c4c),
    ("checkpoint2-jk-att-6layers-dense", 0x7694f3327e5a4726),
    (
        "checkpoint2-residual-batch-6layers-dense",
        0x8e91f755971bd35b,
    ),
    ("checkpoint2-jk-att-pair-6layers-sparse", 0x3af4f88c4e83001c),
    (
        "checkpoint2-plain-dropedge-6layers-dense",
        0xee623531f02c55a6,
    ),
    ("deep-plain-none-dense", 0x712a35c900636b21),
    ("deep-plain-batch-dense", 0xafbc65898ee2d0b4),
    ("deep-plain-pair-dense", 0xd11fa526ffd1fe09),
    ("deep-plain-none-sparse", 0xd2f459f8418c6824),
    ("deep-residual-none-dense", 0x714672ed82cb750f),
    ("deep-residual-batch-dense", 0x30646ddfda58527f),
    ("deep-residual-pair-dense", 0x032cccf1fc4fecbf),
    ("deep-residual-none-sparse", 0x607028d495e8e6a4),
    ("deep-gcnii-none-dense", 0x331cd30ee4564e1f),
    ("deep-gcnii-none-sparse", 0xab146d84ad89ba5b),
    ("deep-jk-cat-none-dense", 0x37cb9734ac30b0e7),
    ("deep-jk-cat-batch-dense", 0xbd71a45df45765ee),
    ("deep-jk-cat-pair-dense", 0x2563fc6e3d52d9ab),
    ("deep-jk-cat-none-sparse", 0x5ea7fc0b5cfed510),
    ("deep-jk-max-none-dense", 0x89d35517c5366212),
    ("deep-jk-max-batch-dense", 0xbc621838a36516bc),
    ("deep-jk-max-pair-dense", 0x6d5692f2ecdaf349),
    ("deep-jk-max-none-sparse", 0xd8f6bb33ed497fe5),
    ("deep-jk-att-none-dense", 0x18436591347a9f19),
    ("deep-jk-att-batch-dense", 0xc6573499b3697dae),
    ("deep-jk-att-pair-dense", 0x053845550a8ea995),
    ("deep-jk-att-none-sparse", 0xb640aa803cd18bbb),
    ("deep-residual-batch-sparse", 0xfa0830b41f106d9e),
    ("deep-plain-agg-dense", 0x45c5bb251a3ae47c),
    ("deep-plain-agg-sparse", 0xd5e0be1478348154),
    ("deep-plain-trans-dense", 0x712a35c900636b21),
    ("deep-plain-trans-sparse", 0xd2f459f8418c6824),
    ("dropedge-plain-dense", 0xfc8919aaba9b9259),
    ("dropedge-residual-dense", 0xbb5295ba46fbe0b9),
    ("dropedge-gcnii-dense", 0x010b030492c6f34b),
    ("dropedge-jk-cat-dense", 0xec487064e9d4309f),
    ("dropedge-jk-max-dense", 0xbb583fcd2dfaa693),
    ("dropedge-jk-att-dense", 0x930d9a6d29688f3b),
    ("dropedge-plain-sparse", 0x80e90a707fe8dcdd),
    ("dropedge-gcnii-sparse", 0xf40f4c7b9016737c),
    ("dropedge-jk-cat-sparse", 0x0717790e077138bd),
    ("dropedge-residual-batch-dense", 0x91bef2da48574d76),
    ("kipf-agg-dense", 0x3c8ec7ffb122ac08),
    ("kipf-trans-dense", 0xbffc3058128a15bb),
    ("kipf-auto-dense", 0xbffc3058128a15bb),
    ("kipf-bias-3layers-dense", 0xbf9ebfef29edc7aa),
    ("kipf-no-input-dropout-agg-dense", 0xf83718aeecdae093),
    ("kipf-no-input-dropout-auto-dense", 0xcd1085fcd0ae0c1b),
    ("kipf-agg-sparse", 0x5224ec564892642f),
    ("kipf-trans-sparse", 0xaf24184fde2554fd),
    ("kipf-auto-sparse", 0xaf24184fde2554fd),
    ("kipf-bias-3layers-sparse", 0xce064cfbcdf171f8),
    ("kipf-no-input-dropout-agg-sparse", 0xb6693905512b2073),
    ("kipf-no-input-dropout-auto-sparse", 0x791e5dc3a578df9f),
    ("kipf-patience3-30epochs-dense", 0x11ee25594ae7dc0d),
    ("kipf-kipfstop3-dense", 0x3a3c0ac545291181),
    ("kipf-sgd-dense", 0xc87b2b392dcc772c),
    ("kipf-row-adj-sparse", 0x4afd8acbf269463e),
];
