//! Scale check: one forward pass (evaluation mode) and one training forward + backward of a
//! 2-layer GCN on a synthetic citation-like graph of a million nodes, with the time and the
//! process's peak resident memory after every phase.
//!
//! ```text
//! cargo run --release --example scale_forward -- [--nodes 1000000] [--avg-degree 10]
//!     [--features 500] [--words 20] [--hidden 16] [--classes 40] [--seed 42] [--seq] [--quick]
//! ```
//!
//! The model is `nn::Model` built from `nn::ModelConfig` (Kipf's GCN); its first pass (the
//! evaluation pass) also plans and allocates the buffers every later pass reuses.
//!
//! `--quick` uses 50 000 nodes (CI runs it in seconds). Peak RSS is `VmHWM` from
//! `/proc/self/status` ("unknown" where that file does not exist). The estimate printed at the
//! end counts the bytes that must be resident for the forward pass, from the sizes alone.

use std::process::exit;
use std::time::Instant;

use sparse_gcn::data::synthetic::CitationLike;
use sparse_gcn::data::{Dataset, FeaturesRef};
use sparse_gcn::graph::{Norm, NormAdj};
use sparse_gcn::nn::loss::softmax_cross_entropy_in_place_across;
use sparse_gcn::nn::{ModelConfig, Order};
use sparse_gcn::train::rng_stream;
use sparse_gcn::Par;

const USAGE: &str = "usage: scale_forward [--nodes N] [--avg-degree D] [--features F] \
[--words W] [--hidden H] [--classes C] [--seed S] [--seq] [--quick]
  --nodes N       nodes of the synthetic graph (default 1000000)
  --avg-degree D  target average degree (default 10)
  --features F    vocabulary size = input width (default 500)
  --words W       words drawn per node (default 20)
  --hidden H      hidden width (default 16)
  --classes C     classes = output width (default 40)
  --seed S        generator and weight seed (default 42)
  --seq           run the kernels on one thread (Par::Seq) instead of rayon
  --quick         50000 nodes (overrides --nodes)";

/// Command-line settings.
#[derive(Debug, Clone)]
struct Args {
    nodes: usize,
    avg_degree: f64,
    features: usize,
    words: usize,
    hidden: usize,
    classes: usize,
    seed: u64,
    par: Par,
}

fn usage_exit(msg: &str) -> ! {
    eprintln!("error: {msg}\n{USAGE}");
    exit(2)
}

fn num<T: std::str::FromStr>(name: &str, v: &str) -> T {
    v.parse()
        .unwrap_or_else(|_| usage_exit(&format!("{name}: cannot parse {v:?}")))
}

fn parse_args() -> Args {
    let mut a = Args {
        nodes: 1_000_000,
        avg_degree: 10.0,
        features: 500,
        words: 20,
        hidden: 16,
        classes: 40,
        seed: 42,
        par: Par::Rayon,
    };
    let mut quick = false;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| -> String {
            it.next()
                .unwrap_or_else(|| usage_exit(&format!("{name} needs a value")))
        };
        match flag.as_str() {
            "--nodes" => a.nodes = num("--nodes", &value("--nodes")),
            "--avg-degree" => a.avg_degree = num("--avg-degree", &value("--avg-degree")),
            "--features" => a.features = num("--features", &value("--features")),
            "--words" => a.words = num("--words", &value("--words")),
            "--hidden" => a.hidden = num("--hidden", &value("--hidden")),
            "--classes" => a.classes = num("--classes", &value("--classes")),
            "--seed" => a.seed = num("--seed", &value("--seed")),
            "--seq" => a.par = Par::Seq,
            "--quick" => quick = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                exit(0)
            }
            other => usage_exit(&format!("unknown argument {other:?}")),
        }
    }
    if quick {
        a.nodes = 50_000;
    }
    if a.nodes < 2 || a.features == 0 || a.words == 0 || a.hidden == 0 || a.classes < 2 {
        usage_exit("need nodes >= 2, classes >= 2 and features, words, hidden > 0");
    }
    if !(a.avg_degree.is_finite() && a.avg_degree >= 0.0) {
        usage_exit("--avg-degree must be a finite number >= 0");
    }
    // The split needs 20 training nodes per class plus validation and test nodes.
    if a.nodes < 20 * a.classes + 2 {
        usage_exit("need nodes >= 20 * classes + 2 for the training split");
    }
    a
}

/// A `VmHWM`/`VmRSS`-style line of `/proc/self/status`, in bytes.
fn proc_status_bytes(key: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(key))?;
    let kib: u64 = line[key.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

fn fmt_bytes(b: u64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    if b as f64 >= 1024.0 * MIB {
        format!("{:.2} GiB", b as f64 / (1024.0 * MIB))
    } else {
        format!("{:.1} MiB", b as f64 / MIB)
    }
}

fn fmt_opt(b: Option<u64>) -> String {
    b.map_or_else(|| "unknown".to_string(), fmt_bytes)
}

/// Prints one phase: wall time, current RSS and peak RSS so far.
fn report(phase: &str, t0: Instant) -> f64 {
    let s = t0.elapsed().as_secs_f64();
    println!(
        "{phase:<22} {:>9.3} s   rss {:>10}   peak rss {:>10}",
        s,
        fmt_opt(proc_status_bytes("VmRSS:")),
        fmt_opt(proc_status_bytes("VmHWM:"))
    );
    s
}

fn main() {
    let args = parse_args();
    let par_name = if args.par == Par::Seq { "seq" } else { "rayon" };
    println!(
        "scale_forward: nodes {} avg-degree {} features {} words {} hidden {} classes {} seed {} \
         par {par_name} ({} rayon threads)",
        args.nodes,
        args.avg_degree,
        args.features,
        args.words,
        args.hidden,
        args.classes,
        args.seed,
        rayon::current_num_threads(),
    );
    println!(
        "peak rss at start: {}",
        fmt_opt(proc_status_bytes("VmHWM:"))
    );

    // 1. Generate the graph and the sparse bag-of-words features.
    let t = Instant::now();
    let spec = CitationLike {
        n_nodes: args.nodes,
        n_classes: args.classes,
        avg_degree: args.avg_degree,
        n_features: args.features,
        words_per_node: args.words,
        ..CitationLike::default()
    };
    let data = spec.generate(args.seed).unwrap_or_else(|e| {
        eprintln!("error: generating the graph: {e}");
        exit(1)
    });
    let t_gen = report("generate", t);
    let Dataset {
        graph,
        mut features,
        labels,
        n_classes,
        split,
        ..
    } = data;
    let (n, graph_nnz) = (graph.n_nodes(), graph.nnz());

    let t = Instant::now();
    features.row_normalize();
    let t_norm_x = report("row-normalise X", t);

    // 2. Â, then free the raw adjacency.
    let t = Instant::now();
    let adj = NormAdj::<f32>::new(&graph, Norm::Symmetric);
    let t_adj = report("NormAdj", t);
    drop(graph);

    // 3. The model.
    let t = Instant::now();
    let cfg = ModelConfig {
        in_dim: features.n_cols(),
        hidden_dim: args.hidden,
        out_dim: n_classes,
        order: Order::Auto,
        ..ModelConfig::default()
    };
    let mut model = cfg
        .build(&adj, &features, None, &mut rng_stream(args.seed, 0))
        .unwrap_or_else(|e| {
            eprintln!("error: model config: {e}");
            exit(1)
        });
    let t_init = report("model build", t);

    // 4. One forward pass, evaluation mode (it plans and allocates the model's buffers).
    let t = Instant::now();
    let mut finite = false;
    model
        .eval_pass(&adj, &features, args.par, &mut |logits, _| {
            finite = logits.iter().all(|v| v.is_finite());
        })
        .unwrap();
    let t_eval = report("forward (eval)", t);

    // 5. One training forward (dropout on) + loss + backward.
    let mut rng = rng_stream(args.seed, 1);
    model.zero_grad();
    let t = Instant::now();
    let mut t_train_fwd = 0.0;
    let mut t_loss = Instant::now();
    let mut loss = f32::NAN;
    model
        .train_pass(&adj, &features, &mut rng, args.par, &mut |z, sums| {
            t_train_fwd = report("forward (train)", t);
            t_loss = Instant::now();
            loss = softmax_cross_entropy_in_place_across(z, &labels, &split.train, &sums);
            true
        })
        .unwrap();
    let t_bwd = report("loss + backward", t_loss);

    // Sizes and the analytic estimate.
    let (f, h, c) = (
        features.n_cols() as u64,
        args.hidden as u64,
        n_classes as u64,
    );
    let (n64, nnz) = (n as u64, adj.nnz() as u64);
    let x_nnz = features.nnz() as u64;
    let est_adj = nnz * (4 + 4) + (n64 + 1) * 8;
    let est_graph = graph_nnz as u64 * 4 + (n64 + 1) * 8;
    let (est_x, est_x_map) = match features.get() {
        // X and Xᵀ in CSR: values + u32 indices each, plus both row pointers; and the map from
        // each entry of X to its position in Xᵀ (one usize per entry) that `SparseFeatures`
        // keeps so dropout can rewrite Xᵀ's values without a new transpose.
        FeaturesRef::Sparse(_) => (2 * x_nnz * (4 + 4) + (n64 + 1) * 8 + (f + 1) * 8, x_nnz * 8),
        FeaturesRef::Dense(_) => (n64 * f * 4, 0),
    };
    // Dense activations at the peak of the eval forward (2 layers). Layer 1 (TransformFirst on
    // the sparse X) holds X·W and Â·(X·W), n×h each. Layer 2 runs while the ReLU output and
    // its copy (the next input) are alive (2·n×h), plus ÂH (n×h) and the logits (n×c) when
    // it aggregates first, or HW and the logits (2·n×c) when it transforms first.
    let orders = model.orders();
    let layer2 = match orders.last() {
        Some(Order::AggregateFirst) => 3 * n64 * h + n64 * c,
        _ => 2 * n64 * h + 2 * n64 * c,
    };
    let est_act_eval = (2 * n64 * h).max(layer2) * 4;
    // A training step adds the input-dropout copy of X (values, Xᵀ and the map), the hidden
    // dropout mask (n×h), and for the backward pass dlogits (n×c) plus two n×h buffers (G·Wᵀ
    // or Âᵀ·G, and dH). The model reuses buffers whose values are dead, so not all of these
    // are live at once: this is an upper bound.
    let est_act_train = est_act_eval + est_x + est_x_map + (3 * n64 * h + n64 * c) * 4;
    let est_labels = n64 * 4;
    let base = est_adj + est_x + est_x_map + est_labels;

    println!();
    println!("n = {n}, nnz(A) = {graph_nnz}, nnz(Â) = {nnz} (self-loops added), nnz(X) = {x_nnz}");
    println!("orders: {orders:?}, loss {loss:.4}, eval logits finite: {finite}");
    let heap = adj.heap_bytes() as u64;
    let sym = adj.is_symmetric();
    println!(
        "adj.heap_bytes() = {heap} ({}), symmetric: {sym}",
        fmt_bytes(heap)
    );
    println!(
        "times [s]: generate {t_gen:.3}, row-normalise {t_norm_x:.3}, NormAdj {t_adj:.3}, \
         init {t_init:.3}, forward(eval) {t_eval:.3}, forward(train) {t_train_fwd:.3}, \
         loss+backward {t_bwd:.3}"
    );
    println!("estimate of bytes that must be resident:");
    for (what, bytes) in [
        ("Â: nnz·(4+4) + (n+1)·8", est_adj),
        ("A (raw graph, freed after NormAdj)", est_graph),
        ("X + Xᵀ (CSR, u32 indices)", est_x),
        ("X → Xᵀ position map (nnz·8)", est_x_map),
        ("labels", est_labels),
        ("activations, eval forward", est_act_eval),
        ("activations + X copy, train (upper bound)", est_act_train),
        ("total for the eval forward", base + est_act_eval),
        ("total for a train step (upper bound)", base + est_act_train),
    ] {
        println!("  {what:<40} {:>12}", fmt_bytes(bytes));
    }
    println!("peak rss (VmHWM): {}", fmt_opt(proc_status_bytes("VmHWM:")));
}
