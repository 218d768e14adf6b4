//! `LoadOptions::default()` is what the CLI loads with (issue 37): bag-of-words features stored
//! sparse, so the README's library snippet gives the CLI's numbers at the CLI's speed.

use sparse_gcn::data::synthetic::Preset;
use sparse_gcn::data::write::write_ogb;
use sparse_gcn::{fit, load, LoadOptions, Norm, NormAdj, TrainConfig, TrainData};

use super::cli_limits::{expect, run, s, scratch};

#[test]
fn default_load_options_store_bag_of_words_sparse() {
    let dir = scratch("lib-load");
    let d = Preset::CoraLike.generate(0).unwrap();
    assert!(d.features.is_sparse());
    write_ogb(&d, &dir, &|_, _, _| {}).unwrap();
    let back = load(&dir, &LoadOptions::default()).unwrap();
    assert!(
        back.features.is_sparse(),
        "bag-of-words features load sparse"
    );
    assert_eq!(back.features.to_dense(), d.features.to_dense());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_readme_snippet_on_cora_gives_the_clis_seed_0_number() {
    let Some(root) = std::env::var_os("SPARSE_GCN_DATA") else {
        println!("skipped: SPARSE_GCN_DATA is not set");
        return;
    };
    let cora = std::path::Path::new(&root).join("cora");
    // The README's library snippet, with the dataset.
    let mut data = load(&cora, &LoadOptions::default()).unwrap();
    assert!(data.features.is_sparse());
    data.features.row_normalize();
    let adj = NormAdj::<f32>::new(&data.graph, Norm::Symmetric);
    let lib = fit(&TrainData::of(&adj, &data), &TrainConfig::default(), 0).unwrap();
    let r = run(&["train", "--data", s(&cora), "--json"]);
    expect(&r, 0, &[]);
    let j: serde_json::Value = serde_json::from_str(r.text.lines().last().unwrap()).unwrap();
    let cli = j["test_accs"][0].as_f64().unwrap();
    assert_eq!(
        lib.test_acc.to_bits(),
        cli.to_bits(),
        "library {} vs CLI {cli}",
        lib.test_acc
    );
}
