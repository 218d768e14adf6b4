//! `sparse-gcn plan`: what a run across 1, 2, …, 1024 ranks would hold, exchange and need,
//! from the graph, its partition and the model alone (`sparse_gcn::dist::plan`).

use serde_json::json;
use sparse_gcn::dist::plan::plan;
use sparse_gcn::train::run::Prepared;
use sparse_gcn::Result;

use super::train::TrainArgs;

/// `plan`'s arguments: the model and data as `train` takes them, and the rank counts.
#[derive(clap::Args)]
pub(crate) struct PlanArgs {
    /// Rank counts to plan for, e.g. 1,2,4,64,1024.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,64,256,1024",
          value_parser = super::args::count)]
    ranks: Vec<usize>,
    #[command(flatten)]
    train: TrainArgs,
}

impl PlanArgs {
    /// The usage checks of `train`'s flags.
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        self.train.check()
    }
}

fn gib(b: u64) -> f64 {
    b as f64 / (1u64 << 30) as f64
}

pub(crate) fn run(a: PlanArgs) -> Result<()> {
    let cfg = a.train.config();
    let data = a.train.data().load()?;
    data.check_trainable()?;
    let p = Prepared::new(data, &a.train.prepare(&cfg))?;
    let d = &p.data;
    let plans = plan(&p.adj, &d.features, d.n_classes, &cfg, &a.ranks)?;
    println!(
        "plan for {} ({} layers × {}) on {}: {} nodes, nnz(Â) {}",
        cfg.model.arch,
        cfg.model.n_layers,
        cfg.model.hidden_dim,
        d.name,
        p.n_nodes,
        p.adj.nnz()
    );
    println!(
        "{:>6} {:>10} {:>10} {:>10} {:>6} {:>12} {:>12} {:>10} {:>10}",
        "ranks",
        "owned max",
        "halo max",
        "halo mean",
        "nbrs",
        "MB/epoch",
        "reduce MB",
        "msgs",
        "mem GiB"
    );
    for r in &plans {
        println!(
            "{:>6} {:>10} {:>10} {:>10.0} {:>6} {:>12.1} {:>12.1} {:>10} {:>10.3}{}",
            r.ranks,
            r.owned_rows_max,
            r.halo_rows_max,
            r.halo_rows_mean,
            r.neighbours_max,
            r.bytes_per_epoch as f64 / 1e6,
            r.allreduce_bytes_per_epoch as f64 / 1e6,
            r.messages_per_epoch,
            gib(r.memory_bytes_max),
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
            "plans": plans,
        });
        println!("{j}");
    }
    Ok(())
}
