//! `StopRule::Patience` restores the best epoch's model exactly: a run stopped by patience and
//! a second run of the same seed cut at `best_epoch + 1` epochs with `StopRule::Never` give the
//! same logits bit for bit (the same RNG streams drive both, and the stop rule never feeds back
//! into training). For the Kipf GCN (`ModelConfig::default`) and for deep models with BatchNorm
//! (`ModelConfig::deep`), whose running statistics must be restored along with the parameters.
//! Both go through `fit_model`, which replaced `fit_deep` when the three model implementations
//! became one stack.

use ndarray::Array2;

use sparse_gcn::data::synthetic::CitationLike;
use sparse_gcn::data::Dataset;
use sparse_gcn::graph::{Norm, NormAdj};
use sparse_gcn::nn::{Arch, Model, ModelConfig, Named, NormKind};
use sparse_gcn::train::{fit_model, FitOptions, RunResult, StopRule, TrainConfig, TrainData};
use sparse_gcn::Par;

fn data() -> (Dataset, NormAdj<f32>) {
    let mut d = CitationLike {
        n_nodes: 800,
        ..Default::default()
    }
    .generate(3)
    .unwrap();
    d.features.row_normalize();
    let adj = NormAdj::new(&d.graph, Norm::Symmetric);
    (d, adj)
}

fn bits<'a>(a: impl IntoIterator<Item = &'a f32>) -> Vec<u32> {
    a.into_iter().map(|v| v.to_bits()).collect()
}

/// Every parameter value and statistics vector ([`Model::snapshot_into`]).
fn snapshot(m: &mut Model<f32>) -> Vec<Vec<f32>> {
    let mut s = Vec::new();
    m.snapshot_into(&mut s);
    s
}

/// The running statistics (BatchNorm's mean and variance), by name.
fn stats(m: &mut Model<f32>) -> Vec<(String, Vec<f32>)> {
    let mut v = Vec::new();
    m.visit_named(&mut |name, t| {
        if let Named::Stat(s) = t {
            v.push((name.to_string(), s.to_vec()));
        }
    });
    v
}

fn logits(m: &mut Model<f32>, adj: &NormAdj<f32>, d: &Dataset) -> Array2<f32> {
    m.predict(adj, &d.features, Par::Rayon).unwrap()
}

/// Everything of a history record but the timings, as bits.
fn history_bits(r: &RunResult) -> Vec<[u64; 4]> {
    r.history
        .iter()
        .map(|e| [e.train_loss, e.train_acc, e.val_loss, e.val_acc].map(f64::to_bits))
        .collect()
}

/// Checks what a patience run must satisfy: it stopped early, `patience` epochs after the
/// epoch of the lowest validation loss.
fn check_patience_run(r: &RunResult, patience: usize, epochs: usize, what: &str) {
    println!("{what}: best epoch {} of {}", r.best_epoch, r.history.len());
    assert!(r.history.len() < epochs, "{what}: patience never fired");
    assert_eq!(r.history.len(), r.best_epoch + patience + 1, "{what}");
    assert!(r.best_epoch + 1 < r.history.len(), "{what}");
    let best = r
        .history
        .iter()
        .min_by(|a, b| a.val_loss.total_cmp(&b.val_loss))
        .unwrap();
    assert_eq!(best.epoch, r.best_epoch, "{what}");
}

#[test]
fn patience_restores_the_best_kipf_gcn_bitwise() {
    let (d, adj) = data();
    let (patience, epochs) = (5, 400);
    let cfg = TrainConfig {
        epochs,
        lr: 0.05,
        stop: StopRule::Patience { patience },
        ..Default::default()
    };
    let fit = |cfg: &TrainConfig| {
        fit_model(&TrainData::of(&adj, &d), cfg, 1, &FitOptions::default()).unwrap()
    };
    let (r, mut model) = fit(&cfg);
    check_patience_run(&r, patience, epochs, "gcn");
    let z = logits(&mut model, &adj, &d);

    // The same seed, cut after the best epoch.
    let cut = TrainConfig {
        epochs: r.best_epoch + 1,
        stop: StopRule::Never,
        ..cfg.clone()
    };
    let (r2, mut model2) = fit(&cut);
    assert_eq!(r2.history.len(), r.best_epoch + 1);
    assert_eq!(r2.best_epoch, r.best_epoch);
    assert_eq!(
        history_bits(&r2)[..],
        history_bits(&r)[..=r.best_epoch],
        "the two runs train alike up to the best epoch"
    );
    let z2 = logits(&mut model2, &adj, &d);
    assert_eq!(
        bits(&z),
        bits(&z2),
        "restored logits differ from the cut run's"
    );
    assert_eq!(snapshot(&mut model), snapshot(&mut model2));
    assert_eq!(r.test_acc.to_bits(), r2.test_acc.to_bits());
    assert_eq!(r.test_loss.to_bits(), r2.test_loss.to_bits());
    assert_eq!(r.val_acc.to_bits(), r2.val_acc.to_bits());

    // The restore is not a no-op: the last epoch's weights give other logits.
    let full = TrainConfig {
        epochs: r.history.len(),
        stop: StopRule::Never,
        ..cfg.clone()
    };
    let (_, mut model3) = fit(&full);
    assert_ne!(bits(&z), bits(&logits(&mut model3, &adj, &d)));
}

#[test]
fn patience_restores_the_best_deep_gcn_with_batch_norm_bitwise() {
    let (d, adj) = data();
    let (patience, epochs) = (5, 300);
    for (arch, checkpoint) in [(Arch::GCN, 0), (Arch::RESIDUAL, 2)] {
        let what = format!("deep {arch} checkpoint {checkpoint}");
        let mc = ModelConfig {
            hidden_dim: 16,
            norm: NormKind::Batch,
            bias: true,
            checkpoint,
            ..ModelConfig::deep(arch, 4)
        };
        let cfg = TrainConfig {
            model: mc.clone(),
            epochs,
            lr: 0.02,
            stop: StopRule::Patience { patience },
            ..Default::default()
        };
        let fit = |cfg: &TrainConfig| {
            fit_model(&TrainData::of(&adj, &d), cfg, 7, &FitOptions::default()).unwrap()
        };
        let (r, mut model) = fit(&cfg);
        check_patience_run(&r, patience, epochs, &what);
        let z = logits(&mut model, &adj, &d);
        let snap = snapshot(&mut model);
        let st = stats(&mut model);
        assert_eq!(
            st.len(),
            2 * (mc.n_layers - 1),
            "{what}: BatchNorm statistics"
        );

        let cut = TrainConfig {
            epochs: r.best_epoch + 1,
            stop: StopRule::Never,
            ..cfg.clone()
        };
        let (r2, mut model2) = fit(&cut);
        assert_eq!(
            history_bits(&r2)[..],
            history_bits(&r)[..=r.best_epoch],
            "{what}"
        );
        let z2 = logits(&mut model2, &adj, &d);
        assert_eq!(bits(&z), bits(&z2), "{what}: restored logits differ");
        // Parameters and running statistics (all of the snapshot), bit for bit.
        let snap2 = snapshot(&mut model2);
        assert_eq!(snap.len(), snap2.len());
        for (k, (a, b)) in snap.iter().zip(&snap2).enumerate() {
            assert_eq!(bits(a), bits(b), "{what}: snapshot entry {k}");
        }
        assert_eq!(r.test_acc.to_bits(), r2.test_acc.to_bits(), "{what}");

        // The running statistics move after the best epoch, so restoring them mattered: the
        // uncut run's last statistics differ from the best epoch's.
        let full = TrainConfig {
            epochs: r.history.len(),
            stop: StopRule::Never,
            ..cfg.clone()
        };
        let (_, mut model3) = fit(&full);
        let st3 = stats(&mut model3);
        assert_eq!(st.len(), st3.len());
        for ((name, a), (name3, b)) in st.iter().zip(&st3) {
            assert_eq!(name, name3);
            assert_ne!(bits(a), bits(b), "{what}: running statistic {name}");
        }
        assert_ne!(bits(&z), bits(&logits(&mut model3, &adj, &d)));
    }
}
