//! `sparse-gcn info`: a dataset's statistics.

use sparse_gcn::data::stats::DatasetStats;
use sparse_gcn::Result;

use super::DataArgs;

#[derive(clap::Args)]
pub(crate) struct InfoArgs {
    #[command(flatten)]
    data: DataArgs,
    /// Check every array of a store (`--data DIR` written by `convert`) against its CRC-32
    /// first, and say so (reading a store always checks the arrays it reads; this checks them
    /// all, whatever a command would read).
    #[arg(long)]
    verify: bool,
    /// Print one JSON object as the last line of stdout.
    #[arg(long)]
    json: bool,
}

impl InfoArgs {
    /// The data options that do not apply to the source: usage errors.
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        self.data.check_applicable()?;
        let store = self
            .data
            .data
            .as_ref()
            .is_some_and(|p| p.join(sparse_gcn::data::store::HEADER).is_file());
        if self.verify && !store {
            return Err(
                "--verify: checks the arrays of a store (--data DIR written by `sparse-gcn \
                 convert`); the data given is not one"
                    .into(),
            );
        }
        Ok(())
    }
}

pub(crate) fn run(a: InfoArgs) -> Result<()> {
    if let (true, Some(dir)) = (a.verify, &a.data.data) {
        let t = std::time::Instant::now();
        let store = sparse_gcn::data::store::Store::open(dir)?;
        store.verify()?;
        println!(
            "store {}: all {} arrays match their checksums ({:.2} s)",
            dir.display(),
            store.header().arrays.len(),
            t.elapsed().as_secs_f64()
        );
    }
    let d = a.data.load()?;
    let s = DatasetStats::try_compute(&d)?;
    let kind = if s.directed { "directed" } else { "undirected" };
    println!("dataset            {}", s.name);
    println!("nodes              {}", s.n_nodes);
    println!("edges              {} ({kind})", s.n_edges);
    println!("input edge records {}", s.input_edges);
    println!("self-loops         {} (kept with weight 1)", s.self_loops);
    println!("duplicates merged  {}", s.duplicates_merged);
    println!("isolated nodes     {}", s.isolated_nodes);
    println!(
        "degree             min {} / median {} / p99 {} / max {} (mean {:.2})",
        s.degree_min, s.degree_median, s.degree_p99, s.degree_max, s.degree_mean
    );
    match s.edge_homophily {
        Some(h) => println!("edge homophily     {h:.4}"),
        None => println!("edge homophily     none (no edge between two labelled nodes)"),
    }
    let over = if s.clustering_nodes == s.n_nodes {
        "every node".to_string()
    } else {
        format!("{} evenly strided nodes", s.clustering_nodes)
    };
    println!(
        "clustering         {:.4} (mean local coefficient, {over})",
        s.clustering
    );
    if s.labelled_nodes == 0 {
        println!("classes            none (no labels: structure only)");
    } else {
        let unlabelled = s.n_nodes - s.labelled_nodes;
        println!(
            "classes            {} {:?}{}",
            s.n_classes,
            s.class_counts,
            if unlabelled > 0 {
                format!(" ({unlabelled} nodes unlabelled)")
            } else {
                String::new()
            }
        );
    }
    if s.in_dim == 0 {
        println!(
            "features           none (train with --features identity|degree|constant|random:D)"
        );
    } else {
        let storage = if s.features_sparse { "sparse" } else { "dense" };
        println!(
            "features           {} columns, {} stored ({storage})",
            s.in_dim, s.feature_nnz
        );
    }
    println!(
        "split {:<12} train {} / valid {} / test {}",
        s.split, s.n_train, s.n_valid, s.n_test
    );
    if a.json {
        println!("{}", serde_json::to_string(&s).unwrap_or_default());
    }
    Ok(())
}
