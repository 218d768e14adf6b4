//! Train / validation / test splits (of [`Mask`]s).

pub use crate::input::Mask;
use crate::{Error, Result};

/// A named train / validation / test split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// Name (the folder under `split/`).
    pub name: String,
    /// Training nodes.
    pub train: Mask,
    /// Validation nodes.
    pub valid: Mask,
    /// Test nodes.
    pub test: Mask,
}

impl Split {
    /// The split in the node order of `perm` (node `perm.new_to_old()[r]` becomes node `r`).
    ///
    /// # Panics
    /// If a node of a part is not below `perm.len()`.
    pub fn permuted(&self, perm: &crate::graph::Permutation) -> Split {
        let p = perm.old_to_new();
        let part = |m: &Mask| {
            let mut b = vec![false; m.n_nodes()];
            for &i in m.indices() {
                b[p[i as usize] as usize] = true;
            }
            Mask::from_bool(&b)
        };
        Split {
            name: self.name.clone(),
            train: part(&self.train),
            valid: part(&self.valid),
            test: part(&self.test),
        }
    }

    /// Checks that no part is empty and the parts do not overlap (what training needs).
    ///
    /// # Errors
    /// [`Error::EmptyMask`] or [`Error::Dataset`] naming the overlap.
    pub fn check(&self) -> Result<()> {
        for (name, m) in [
            ("train", &self.train),
            ("valid", &self.valid),
            ("test", &self.test),
        ] {
            if m.is_empty() {
                return Err(Error::EmptyMask {
                    name: name.into(),
                    split: self.name.clone(),
                    sizes: [self.train.len(), self.valid.len(), self.test.len()],
                });
            }
        }
        self.check_disjoint()
    }

    /// The split of a dataset without one (a structure-only graph): every part empty.
    pub fn none(n_nodes: usize) -> Split {
        let empty = Mask::from_bool(&vec![false; n_nodes]);
        Split {
            name: "none".into(),
            train: empty.clone(),
            valid: empty.clone(),
            test: empty,
        }
    }

    /// Checks that the parts do not overlap (empty parts allowed).
    ///
    /// # Errors
    /// [`Error::Dataset`] naming the overlap.
    pub(crate) fn check_disjoint(&self) -> Result<()> {
        let n = self.train.n_nodes();
        let mut seen = vec![0u8; n];
        for (k, m) in [&self.train, &self.valid, &self.test]
            .into_iter()
            .enumerate()
        {
            for &i in m.indices() {
                if seen[i as usize] != 0 {
                    return Err(Error::Dataset {
                        path: self.name.clone().into(),
                        msg: format!(
                            "node {i} is in split part {} and part {}",
                            ["train", "valid", "test"][seen[i as usize] as usize - 1],
                            ["train", "valid", "test"][k]
                        ),
                    });
                }
                seen[i as usize] = k as u8 + 1;
            }
        }
        Ok(())
    }
}
