//! The seeded random split of the formats that carry none (`.npz`, edge lists):
//! [`RandomSplit`] and its sizes ([`SplitRule`]).

use std::path::Path;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::data::{Mask, Split};
use crate::{Error, Result};

/// How a seeded random split is drawn for the formats that carry none (`.npz`, edge lists).
///
/// The nodes are shuffled with a `ChaCha8Rng` seeded by [`RandomSplit::seed`] (a Fisher–Yates
/// shuffle), so a split depends only on the seed, the node count and the labels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RandomSplit {
    /// How many nodes go to each part.
    pub rule: SplitRule,
    /// The seed of the shuffle.
    pub seed: u64,
}

impl Default for RandomSplit {
    /// Planetoid: 20 training nodes per class, 500 validation and 1000 test nodes; seed 0.
    fn default() -> Self {
        RandomSplit {
            rule: SplitRule::PerClass {
                train_per_class: 20,
                n_valid: 500,
                n_test: 1000,
            },
            seed: 0,
        }
    }
}

/// The sizes of a [`RandomSplit`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SplitRule {
    /// Planetoid style (Yang et al. 2016, Kipf & Welling 2017): in shuffled order, the first
    /// `train_per_class` nodes of each class train; of the remaining nodes, in the same order,
    /// the first `min(n_valid, rest / 2)` validate and the next `min(n_test, rest - valid)`
    /// test. A class with fewer nodes gives all of them to training. Needs more than
    /// `train_per_class × classes + 1` nodes, or a part is empty ([`Error::EmptyMask`]).
    PerClass {
        /// Training nodes per class.
        train_per_class: usize,
        /// Validation nodes (at most).
        n_valid: usize,
        /// Test nodes (at most).
        n_test: usize,
    },
    /// Fractions of all nodes, in shuffled order: `round(train·n)` train, `round(valid·n)`
    /// validate, `round(test·n)` test (clipped to the nodes left). Each fraction must lie in
    /// `[0, 1]` and their sum must not exceed 1 (an [`Error::Dataset`] otherwise); nodes left
    /// over are in no part.
    Fractions {
        /// Fraction of training nodes.
        train: f64,
        /// Fraction of validation nodes.
        valid: f64,
        /// Fraction of test nodes.
        test: f64,
    },
}

/// Draws a seeded random split of `labels.len()` nodes (see [`RandomSplit`]); `path` names the
/// dataset in errors.
///
/// Only labelled nodes are drawn ([`UNLABELLED`](crate::data::UNLABELLED) ones are in no part);
/// without any label the split is [`Split::none`]. A part left empty is an
/// [`Error::Dataset`] naming the sizes and the options that set them.
pub(super) fn random_split(
    path: &Path,
    labels: &[u32],
    n_classes: usize,
    rs: &RandomSplit,
) -> Result<Split> {
    let n = labels.len();
    let mut rng = ChaCha8Rng::seed_from_u64(rs.seed);
    let mut order: Vec<u32> = (0..n).map(|i| i as u32).collect();
    for i in (1..n).rev() {
        order.swap(i, rng.random_range(0..=i));
    }
    // The same shuffle with or without unlabelled nodes (they are dropped after it).
    order.retain(|&i| labels[i as usize] != crate::data::UNLABELLED);
    if order.is_empty() {
        return Ok(Split::none(n));
    }
    let n_labelled = order.len();
    let (train, valid, test) = match rs.rule {
        SplitRule::PerClass {
            train_per_class,
            n_valid,
            n_test,
        } => {
            let mut per = vec![0usize; n_classes];
            let (mut train, mut rest) = (Vec::new(), Vec::new());
            for &i in &order {
                let l = labels.get(i as usize).map_or(0, |&l| l as usize);
                match per.get_mut(l) {
                    Some(c) if *c < train_per_class => {
                        *c += 1;
                        train.push(i);
                    }
                    _ => rest.push(i),
                }
            }
            let n_valid = n_valid.min(rest.len() / 2);
            let n_test = n_test.min(rest.len() - n_valid);
            let valid = rest[..n_valid].to_vec();
            let test = rest[n_valid..n_valid + n_test].to_vec();
            (train, valid, test)
        }
        SplitRule::Fractions { train, valid, test } => {
            let ok = |f: f64| (0.0..=1.0).contains(&f);
            if !(ok(train) && ok(valid) && ok(test) && train + valid + test <= 1.0 + 1e-9) {
                return Err(Error::Dataset {
                    path: path.to_path_buf(),
                    msg: format!(
                        "split fractions train {train}, valid {valid}, test {test}: each must \
                         lie in [0, 1] and their sum must not exceed 1"
                    ),
                });
            }
            let n = n_labelled;
            let count = |f: f64| ((f * n as f64).round() as usize).min(n);
            let n_train = count(train);
            let n_valid = count(valid).min(n - n_train);
            let n_test = count(test).min(n - n_train - n_valid);
            (
                order[..n_train].to_vec(),
                order[n_train..n_train + n_valid].to_vec(),
                order[n_train + n_valid..n_train + n_valid + n_test].to_vec(),
            )
        }
    };
    let sizes = [train.len(), valid.len(), test.len()];
    if let Some(k) = sizes.iter().position(|&s| s == 0) {
        let rule = match rs.rule {
            SplitRule::PerClass {
                train_per_class,
                n_valid,
                n_test,
            } => format!(
                "{train_per_class} training nodes per class × {n_classes} classes, then up to \
                 {n_valid} validation and {n_test} test nodes"
            ),
            SplitRule::Fractions { train, valid, test } => {
                format!("fractions {train}/{valid}/{test}")
            }
        };
        return Err(Error::Dataset {
            path: path.to_path_buf(),
            msg: format!(
                "a random split of {n_labelled} labelled nodes with {rule} leaves the {} part \
                 empty (train/valid/test {}/{}/{}); set smaller sizes with --train-per-class N \
                 or --split-sizes TRAIN,VALID,TEST (fractions of the labelled nodes) \
                 (RandomSplit::rule in the library)",
                ["train", "valid", "test"][k],
                sizes[0],
                sizes[1],
                sizes[2]
            ),
        });
    }
    Ok(Split {
        name: "random".into(),
        train: Mask::try_from_indices(train, n)?,
        valid: Mask::try_from_indices(valid, n)?,
        test: Mask::try_from_indices(test, n)?,
    })
}
