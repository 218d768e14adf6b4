//! The split of the generator: a seeded random node order, then Planetoid's first
//! `train_per_class` nodes of each class, `n_valid` and `n_test` (see [`SplitKind::Planetoid`]),
//! or random fractions ([`SplitKind::Random`]) or sizes ([`SplitKind::Sizes`]).

use rand::RngExt;

use super::{rng_for, CitationLike, SplitKind, STREAM_SPLIT};
use crate::data::{Mask, Split};
use crate::Result;

impl CitationLike {
    /// The split over a seeded random node order (see [`SplitKind`]).
    pub(super) fn draw_split(&self, labels: &[u32], seed: u64) -> Result<Split> {
        let n = labels.len();
        let mut rng = rng_for(seed, STREAM_SPLIT);
        let mut order: Vec<u32> = (0..n as u32).collect();
        for i in (1..n).rev() {
            order.swap(i, rng.random_range(0..=i));
        }
        let (name, train, valid, test) = match self.split {
            SplitKind::Planetoid => {
                let mut per = vec![0usize; self.n_classes];
                let (mut train, mut rest) = (Vec::new(), Vec::new());
                for &i in &order {
                    let l = labels[i as usize] as usize;
                    if per[l] < self.train_per_class {
                        per[l] += 1;
                        train.push(i);
                    } else {
                        rest.push(i);
                    }
                }
                let n_valid = self.n_valid.min(rest.len() / 2);
                let n_test = self.n_test.min(rest.len() - n_valid);
                let valid = rest[..n_valid].to_vec();
                let test = rest[n_valid..n_valid + n_test].to_vec();
                ("planetoid", train, valid, test)
            }
            SplitKind::Random { train, valid } => {
                let n_train = ((n as f64 * train).round() as usize).min(n);
                let n_valid = ((n as f64 * valid).round() as usize).min(n - n_train);
                let test = order.split_off(n_train + n_valid);
                let valid = order.split_off(n_train);
                ("random", order, valid, test)
            }
            SplitKind::Sizes { train, valid, test } => {
                let n_train = train.min(n);
                let n_valid = valid.min(n - n_train);
                let n_test = test.min(n - n_train - n_valid);
                let test = order[n_train + n_valid..n_train + n_valid + n_test].to_vec();
                let valid = order[n_train..n_train + n_valid].to_vec();
                order.truncate(n_train);
                ("random", order, valid, test)
            }
        };
        Ok(Split {
            name: name.into(),
            train: Mask::try_from_indices(train, n)?,
            valid: Mask::try_from_indices(valid, n)?,
            test: Mask::try_from_indices(test, n)?,
        })
    }
}
