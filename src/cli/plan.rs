//! `sparse-gcn plan`: what a run across 1, 2, …, 1024 ranks would hold, exchange and need,
//! from the graph, its partition and the model alone (`sparse_gcn::dist::run::plan`), and with
//! `--comm` how long its epoch would take; `sparse-gcn commbench`: the all-to-all timings
//! `--comm` reads.

use std::path::PathBuf;

use serde_json::json;
use sparse_gcn::diag::roofline::{sgemm, spmm_time_csr};
use sparse_gcn::dist::run::plan::{plan, CommSample, TimeModel};
use sparse_gcn::kernels::Csr;
use sparse_gcn::train::run::Prepared;
use sparse_gcn::{Error, NormAdj, Par, Result};

use super::train::TrainArgs;

/// `plan`'s arguments: the model and data as `train` takes them, and the rank counts.
#[derive(clap::Args)]
pub(crate) struct PlanArgs {
    /// Rank counts to plan for, e.g. 1,2,4,64,1024; each at most 65536 and at most the nodes.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,64,256,1024",
          value_parser = super::args::ranks)]
    ranks: Vec<usize>,
    /// `commbench --json` outputs (e.g. of 2 and 4 ranks) to fit MPI's α and β to; with them
    /// the plan models each rank count's epoch time (this machine's sgemm and in-cache SpMM
    /// rates, measured first, for the compute).
    #[arg(long, value_delimiter = ',')]
    comm: Vec<PathBuf>,
    #[command(flatten)]
    train: TrainArgs,
}

/// `commbench`'s arguments.
#[derive(clap::Args)]
pub(crate) struct CommbenchArgs {
    /// The largest message timed, in bytes from each rank to each other rank (sizes from 8
    /// bytes up, ×8 each step).
    #[arg(long, default_value_t = 1 << 24, value_parser = super::args::count)]
    max_bytes: usize,
    /// Print the timings as one JSON object (what `plan --comm` reads).
    #[arg(long)]
    json: bool,
}

/// The timings `commbench --json` writes.
#[derive(serde::Serialize, serde::Deserialize)]
struct CommFile {
    ranks: usize,
    samples: Vec<CommSample>,
}

/// `sparse-gcn commbench`, under `mpirun -np P` (P ≥ 2): times the all-to-all of a halo
/// product for message sizes from 8 bytes to `--max-bytes`, and fits α and β to them.
pub(crate) fn commbench(a: CommbenchArgs) -> Result<()> {
    let Some(job) = super::dist::start()? else {
        return Err(Error::Config(sparse_gcn::ConfigError::Unsupported {
            what: "commbench outside an MPI job (build with --features mpi and start it under \
                   mpirun -np P, P ≥ 2)",
        }));
    };
    let samples = super::dist::time_all_to_all(&job, a.max_bytes)?;
    let (alpha, beta) = TimeModel::fit_comm(&samples)?;
    super::say!("{:>12} {:>14}", "bytes/peer", "seconds");
    for s in &samples {
        super::say!("{:>12} {:>14.3e}", s.bytes_per_peer, s.seconds);
    }
    super::say!(
        "{} ranks: α = {:.3e} s a message, β = {:.3e} s a byte ({:.2} GB/s)",
        samples.first().map_or(0, |s| s.ranks),
        alpha,
        beta,
        1e-9 / beta.max(f64::MIN_POSITIVE)
    );
    if a.json {
        let f = CommFile {
            ranks: samples.first().map_or(0, |s| s.ranks),
            samples,
        };
        let mut j = serde_json::to_value(&f).unwrap_or_default();
        if let Some(o) = j.as_object_mut() {
            o.insert("alpha_s".into(), alpha.into());
            o.insert("beta_s_per_byte".into(), beta.into());
        }
        super::say!("{j}");
    }
    Ok(())
}

/// The samples of `commbench --json` files (the last JSON line of each).
fn read_comm(paths: &[PathBuf]) -> Result<Vec<CommSample>> {
    let mut all = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let line = text
            .lines()
            .rev()
            .find(|l| l.trim_start().starts_with('{'))
            .ok_or_else(|| Error::Dataset {
                path: path.clone(),
                msg: "no JSON line: expected the output of `sparse-gcn commbench --json`".into(),
            })?;
        let f: CommFile = serde_json::from_str(line).map_err(|e| Error::Dataset {
            path: path.clone(),
            msg: format!("not the output of `sparse-gcn commbench --json`: {e}"),
        })?;
        all.extend(f.samples);
    }
    Ok(all)
}

/// This machine's compute rates for the time model: sgemm at the model's hidden width on
/// 65,536 rows, and the SpMM at its in-cache floor on Â's first 65,536 rows (each row's k-th
/// non-zero moved to column k, as `roofline` measures the floor) at the widest exchanged
/// width. Flops per second.
fn compute_rates(adj: &NormAdj<f32>, hidden: usize, width: usize) -> Result<(f64, f64)> {
    let g = sgemm(65_536, hidden.max(1), hidden.max(1), 2, 5, Par::Rayon);
    let a = adj.a();
    let rows = a.rows().min(65_536);
    let ip = a.indptr();
    let ip = ip.raw_storage();
    let mut indptr = vec![0usize];
    let mut indices = Vec::new();
    let mut data = Vec::new();
    for i in 0..rows {
        let len = (ip[i + 1] - ip[i]).min(rows);
        indices.extend(0..len as u32);
        data.extend_from_slice(&a.data()[ip[i] - ip[0]..ip[i] - ip[0] + len]);
        indptr.push(indices.len());
    }
    let nnz = indices.len();
    let sample = Csr::new((rows, rows), indptr, indices, data);
    let w = width.max(1);
    let run = spmm_time_csr(sample.view(), w, w, 2, 5, 1, false, Par::Rayon)?;
    let spmm = 2.0 * nnz as f64 * w as f64 / run.timing.median_s.max(f64::MIN_POSITIVE);
    Ok((g.gflops * 1e9, spmm))
}

impl PlanArgs {
    /// The usage checks of `train`'s flags.
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        self.train.check()?;
        self.train.check_plan_flags()
    }
}

fn gib(b: u64) -> f64 {
    b as f64 / (1u64 << 30) as f64
}

pub(crate) fn run(a: PlanArgs) -> Result<()> {
    let pool = sparse_gcn::par::thread_pool(a.train.threads())?;
    pool.install(|| run_in_pool(&a))
}

fn run_in_pool(a: &PlanArgs) -> Result<()> {
    let cfg = a.train.config();
    // The timing files first: a missing one fails before the data is read.
    let samples = read_comm(&a.comm)?;
    let data = a.train.data().load()?;
    data.check_trainable()?;
    let p = Prepared::new(data, &a.train.prepare(&cfg))?;
    let d = &p.data;
    // The model is built on the whole data: its parameters must fit.
    let model = sparse_gcn::ModelConfig {
        in_dim: d.features.n_cols(),
        out_dim: d.n_classes,
        ..cfg.model.clone()
    };
    sparse_gcn::train::run::check_params_fit(&model, 1)?;
    if let Some(&r) = a.ranks.iter().find(|&&r| r > p.n_nodes) {
        return Err(Error::Config(sparse_gcn::ConfigError::OutOfRange {
            name: "--ranks",
            value: r as f64,
            rule: "at most the number of nodes (a rank owns at least one row)",
        }));
    }
    let time = if a.comm.is_empty() {
        None
    } else {
        let (alpha_s, beta_s_per_byte) = TimeModel::fit_comm(&samples)?;
        // The widest dense product: sparse X is never multiplied densely.
        let input = if d.features.is_sparse() {
            0
        } else {
            d.features.n_cols()
        };
        let widest = cfg.model.hidden_dim.max(d.n_classes).max(input).min(4096);
        let (gemm_flop_s, spmm_flop_s) = compute_rates(&p.adj, cfg.model.hidden_dim, widest)?;
        Some(TimeModel {
            alpha_s,
            beta_s_per_byte,
            gemm_flop_s,
            spmm_flop_s,
        })
    };
    let plans = plan(
        &p.adj,
        &d.features,
        d.n_classes,
        &cfg,
        &a.ranks,
        time.as_ref(),
    )?;
    println!(
        "plan for {} ({} layers × {}) on {}: {} nodes, nnz(Â) {}",
        cfg.model.arch,
        cfg.model.n_layers,
        cfg.model.hidden_dim,
        d.name,
        p.n_nodes,
        p.adj.nnz()
    );
    if let Some(t) = &time {
        println!(
            "time model: α = {:.3e} s a message, β = {:.3e} s a byte (fitted to {} all-to-alls), \
             sgemm {:.1} GFLOP/s, in-cache SpMM {:.1} GFLOP/s",
            t.alpha_s,
            t.beta_s_per_byte,
            samples.len(),
            t.gemm_flop_s / 1e9,
            t.spmm_flop_s / 1e9
        );
    }
    println!(
        "{:>6} {:>10} {:>10} {:>10} {:>6} {:>12} {:>12} {:>10} {:>10} {:>10}",
        "ranks",
        "owned max",
        "halo max",
        "halo mean",
        "nbrs",
        "MB/epoch",
        "reduce MB",
        "msgs",
        "mem GiB",
        "epoch s"
    );
    for r in &plans {
        let epoch = r
            .time
            .map_or_else(|| "-".to_string(), |t| format!("{:.3}", t.epoch_s));
        println!(
            "{:>6} {:>10} {:>10} {:>10.0} {:>6} {:>12.1} {:>12.1} {:>10} {:>10.3} {:>10}{}",
            r.ranks,
            r.owned_rows_max,
            r.halo_rows_max,
            r.halo_rows_mean,
            r.neighbours_max,
            r.bytes_per_epoch as f64 / 1e6,
            r.allreduce_bytes_per_epoch as f64 / 1e6,
            r.messages_per_epoch,
            gib(r.memory_bytes_max),
            epoch,
            if r.halo_exceeds_owned {
                "  halo ≥ owned"
            } else {
                ""
            }
        );
    }
    if a.train.json() {
        let j = json!({
            "dataset": d.name,
            "model": cfg.model.arch.name(),
            "layers": cfg.model.n_layers,
            "hidden": cfg.model.hidden_dim,
            "n_nodes": p.n_nodes,
            "nnz": p.adj.nnz(),
            "time_model": time,
            "plans": plans,
        });
        println!("{j}");
    }
    Ok(())
}
