//! Reading a store whole into memory: the dataset ([`Store::dataset`]), its skeleton without
//! the features ([`Store::skeleton`]), and the loaders `--data DIR` calls.

use std::path::Path;

use ndarray::Array2;

use super::{Store, StoreFeatures, StoredOrder};
use crate::data::io::LoadOptions;
use crate::data::{Dataset, Features, Mask, Skeleton, SparseFeatures, Split};
use crate::graph::{BuildStats, Direction, Graph};
use crate::kernels::Csr;
use crate::{Error, Result};

impl Store {
    /// The whole dataset in memory, in the order it is stored in ([`Store::order`]), each
    /// array's checksum checked as it is read; dense
    /// features go sparse below `sparse_below` density as the loaders do.
    ///
    /// # Errors
    /// [`Error::TooLarge`] if it does not fit in the memory available; [`Error::Store`]
    /// naming the first array whose checksum differs or whose contents break the graph's or
    /// the features' pattern; then [`Dataset::validate`]'s errors.
    pub fn dataset(&self, sparse_below: Option<f64>) -> Result<Dataset> {
        let h = &self.header;
        let total: u64 = h
            .arrays
            .values()
            .map(|a| a.len.saturating_mul(a.dtype.width().max(4)))
            .fold(0, u64::saturating_add);
        crate::data::memory::check(total, || {
            format!("the dataset of the store {}", self.dir.display())
        })?;
        let s = self.skeleton_unchecked()?;
        let (n, d) = (h.n_nodes as usize, h.n_features as usize);
        let features = if h.sparse_features {
            let csr = Csr::try_new(
                (n, d),
                self.offsets("feature_indptr")?,
                self.u32_vec("feature_indices")?,
                self.floats("feature_values")?,
            )
            .map_err(|(_, _, _, e)| self.bad("feature_indices", e.to_string()))?;
            Features::sparse(SparseFeatures::new(csr))
        } else {
            let x = Array2::from_shape_vec((n, d), self.floats("features")?)
                .map_err(|e| self.bad("features", e.to_string()))?;
            let f = Features::dense(x);
            match sparse_below {
                Some(t) => f.into_sparse_if(t),
                None => f,
            }
        };
        Dataset::try_new(s.name, s.graph, features, s.labels, s.n_classes, s.split)
    }

    /// The dataset without its features ([`Skeleton`]), in the order it is stored in, each
    /// array's checksum and the graph's pattern checked as it is read (the labels' classes
    /// too): what each rank of a run under mpirun holds while it reads only its rows of the
    /// features ([`StoreFeatures`]).
    ///
    /// # Errors
    /// [`Error::TooLarge`] if it does not fit in the memory available; [`Error::Store`] naming
    /// the first array whose checksum differs or whose contents are not a graph's, labels or
    /// a split's.
    pub fn skeleton(&self) -> Result<Skeleton> {
        let h = &self.header;
        let total: u64 = [
            "indptr", "indices", "degree", "labels", "train", "valid", "test",
        ]
        .iter()
        .filter_map(|a| h.arrays.get(*a))
        .map(|a| a.len.saturating_mul(a.dtype.width().max(4)))
        .fold(0, u64::saturating_add);
        crate::data::memory::check(total, || {
            format!(
                "the graph, labels and split of the store {}",
                self.dir.display()
            )
        })?;
        let s = self.skeleton_unchecked()?;
        self.check_classes(&s.labels)?;
        Ok(s)
    }

    /// The labels, each a class below the header's count or unlabelled, their checksum
    /// checked.
    ///
    /// # Errors
    /// [`Error::Store`] naming `labels`.
    pub(crate) fn checked_labels(&self) -> Result<Vec<u32>> {
        let labels = self.u32_vec("labels")?;
        self.check_classes(&labels)?;
        Ok(labels)
    }

    /// A label that is not a class of the header's: an error naming the node.
    fn check_classes(&self, labels: &[u32]) -> Result<()> {
        let k = self.header.n_classes;
        match labels
            .iter()
            .enumerate()
            .find(|(_, &l)| l != crate::data::UNLABELLED && u64::from(l) >= k)
        {
            Some((i, &l)) => Err(self.bad("labels", format!("node {i}: class {l} of {k}"))),
            None => Ok(()),
        }
    }

    /// The split: the training, validation and test nodes, their checksums checked.
    ///
    /// # Errors
    /// [`Error::Store`] naming the array of an id beyond the nodes or repeated.
    pub(crate) fn split(&self) -> Result<Split> {
        let n = self.header.n_nodes as usize;
        let mask = |name: &str| -> Result<Mask> {
            Mask::try_from_indices(self.u32_vec(name)?, n)
                .map_err(|e| self.bad(name, e.to_string()))
        };
        Ok(Split {
            name: self.header.split.clone(),
            train: mask("train")?,
            valid: mask("valid")?,
            test: mask("test")?,
        })
    }

    /// [`Store::skeleton`] without the memory check nor the labels' classes checked.
    fn skeleton_unchecked(&self) -> Result<Skeleton> {
        let h = &self.header;
        let n = h.n_nodes as usize;
        let stats = BuildStats {
            input_edges: h.input_edges as usize,
            duplicates_merged: h.duplicates_merged as usize,
            self_loops: h.self_loops as usize,
        };
        let graph = Graph::try_from_csr(
            n,
            self.offsets("indptr")?,
            self.u32_vec("indices")?,
            h.directed,
            stats,
        )
        .map_err(|e| self.bad("indptr, indices", e.to_string()))?;
        self.verify_array("degree")?;
        let degree = self.u32s("degree")?;
        if let Some(i) = (0..n).find(|&i| degree[i] as usize != graph.degree(i)) {
            return Err(self.bad(
                "degree",
                format!(
                    "node {i}: {}, but its row stores {} entries",
                    degree[i],
                    graph.degree(i)
                ),
            ));
        }
        let labels = self.u32_vec("labels")?;
        let split = self.split()?;
        Ok(Skeleton {
            name: h.name.clone(),
            graph,
            labels,
            n_classes: h.n_classes as usize,
            split,
        })
    }
}

/// Loads the store in `dir` for [`load`](crate::data::io::load), in the input's node order (a store
/// converted with `--reorder` is relabelled back): the options a store cannot honour are
/// refused (feature and label files, another split's name, `--directed` on an undirected
/// store); a directed store is read directed whatever [`LoadOptions::direction`] says.
///
/// # Errors
/// [`Error::Dataset`] for an option the store cannot honour; then [`Store::open`]'s and
/// [`Store::dataset`]'s.
pub fn load(dir: &Path, opts: &LoadOptions) -> Result<Dataset> {
    let (d, order) = load_ordered(dir, opts)?;
    match order {
        None => Ok(d),
        Some(o) => d.relabel(&o.perm.inverse()),
    }
}

/// Refuses the loading options a store cannot honour (see [`load`]): feature or label files,
/// a node count, a random split's options, another split, a directed reading of an
/// undirected store.
///
/// # Errors
/// [`Error::Dataset`] saying which; [`Store::open`]'s.
pub fn check_options(dir: &Path, opts: &LoadOptions) -> Result<()> {
    let refuse = |msg: String| Error::Dataset {
        path: dir.to_path_buf(),
        msg,
    };
    if opts.features.is_some() || opts.labels.is_some() {
        return Err(refuse(
            "a store carries its own features and labels: convert the data again with the \
             feature or label files"
                .into(),
        ));
    }
    if opts.n_nodes.is_some() {
        return Err(refuse("a store declares its node count".into()));
    }
    if opts.random_split != crate::data::io::RandomSplit::default() {
        return Err(refuse(
            "a store carries its own split: a random split's options do not apply".into(),
        ));
    }
    let store = Store::open(dir)?;
    let h = store.header();
    if let Some(s) = &opts.split {
        if *s != h.split {
            return Err(refuse(format!(
                "the store holds split {:?}, not {s:?} (a store holds the one split it was \
                 converted with)",
                h.split
            )));
        }
    }
    if opts.direction == Direction::Directed && !h.directed {
        return Err(refuse(
            "the store holds an undirected graph: convert the data again with --directed".into(),
        ));
    }
    Ok(())
}

/// [`load`] without the features: the graph, labels and split in the input's order, and the
/// store's features to read rows of ([`StoreFeatures`]) — what a rank under mpirun holds.
///
/// # Errors
/// As [`load`]; [`Error::Store`] for features stored sparse.
pub fn load_skeleton(dir: &Path, opts: &LoadOptions) -> Result<(Skeleton, StoreFeatures)> {
    check_options(dir, opts)?;
    let features = StoreFeatures::open(dir)?;
    let store = Store::open(dir)?;
    let s = store.skeleton()?;
    let s = match store.order()? {
        None => s,
        Some(o) => s.relabel(&o.perm.inverse())?,
    };
    Ok((s, features))
}

/// [`load`] in the order the store holds, with that order (`None`: the input's): for
/// training, which would relabel it into that order again.
///
/// # Errors
/// As [`load`].
pub fn load_ordered(dir: &Path, opts: &LoadOptions) -> Result<(Dataset, Option<StoredOrder>)> {
    check_options(dir, opts)?;
    // The options fit: map it, every page read in now, and read it.
    let store = Store::open_populated(dir)?;
    let order = store.order()?;
    Ok((store.dataset(opts.sparse_features_below)?, order))
}
