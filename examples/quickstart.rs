//! Train Kipf & Welling's 2-layer GCN on the built-in synthetic citation-like graph (or on an
//! OGB-layout folder) and print the test accuracy.
//!
//! ```text
//! cargo run --release --example quickstart -- [--data DIR] [--seeds N] [--quick]
//! ```

use sparse_gcn::data::io::{load_ogb, OgbOptions};
use sparse_gcn::data::synthetic::CitationLike;
use sparse_gcn::train::run::{Prepare, Prepared};
use sparse_gcn::train::{mean_std, TrainConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut data_dir = None;
    let mut seeds = 5u64;
    let mut quick = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--data" => data_dir = args.next(),
            "--seeds" => seeds = args.next().and_then(|s| s.parse().ok()).unwrap_or(5),
            "--quick" => quick = true,
            _ => {
                eprintln!("usage: quickstart [--data DIR] [--seeds N] [--quick]");
                std::process::exit(2);
            }
        }
    }
    let data = match &data_dir {
        Some(dir) => load_ogb(
            dir,
            &OgbOptions {
                sparse_features_below: Some(0.1),
                ..Default::default()
            },
        )?,
        None => CitationLike::default().generate(0)?,
    };
    // The CLI's pipeline (`sparse-gcn train`): node order, feature normalisation, Â.
    let p = Prepared::new(data, &Prepare::default())?;
    let cfg = TrainConfig {
        epochs: if quick { 50 } else { 200 },
        ..Default::default()
    };
    let seeds: Vec<u64> = (0..if quick { 2 } else { seeds }).collect();
    let runs = p.fit_seeds(&cfg, &seeds, 0, None, &|_, _| {})?;
    let accs: Vec<f64> = runs.iter().map(|r| r.test_acc).collect();
    let (m, s) = mean_std(&accs);
    println!(
        "{}: {} nodes, nnz(Â) {}; test accuracy {:.2} ± {:.2} % over {} seeds",
        p.data.name,
        p.n_nodes,
        p.adj.nnz(),
        100.0 * m,
        100.0 * s,
        seeds.len()
    );
    Ok(())
}
