//! Node reorderings: relabel a graph's nodes so that neighbours get nearby ids.
//!
//! # Why
//! SpMM (`kernels::spmm`) gathers the rows of X named by Â's column indices. In a random node
//! order almost every gather misses the caches and the TLB (`../shared/LIMITS.md` §3); if the
//! neighbours of the rows processed together have nearby ids, their X rows are reused from
//! the caches instead. A relabelling changes nothing mathematically: a GCN on P·Â·Pᵀ with P·X
//! computes P times the original outputs (up to the floating-point summation order inside each
//! row, see [`permute_graph`]).
//!
//! # Orders ([`Reorder`], computed by [`order`])
//! | name | order | cost |
//! |---|---|---|
//! | `none` | the identity | O(n) |
//! | `random` | a seeded uniformly random permutation (the worst case, for benchmarks) | O(n) |
//! | `degree` | by descending degree (ties by id): hubs first, packed together | O(n) |
//! | `bfs` | breadth-first from the highest-degree node of each component | O(n + nnz) |
//! | `rcm` | reverse Cuthill–McKee from a pseudo-peripheral node of each component | O(n + nnz·log) |
//! | `community` | nested label-propagation communities laid out contiguously (`community_order`) | O(levels·iterations·nnz) |
//! | `auto` | `community` if it makes the SpMM's gathers miss a modelled cache clearly less often than the given order, the given order otherwise (`auto_order`) | that of `community` plus two `cache_miss_model`s on one cache set in `AUTO_MODEL_SAMPLE` |
//! | `metis` | the parts of a METIS recursive bisection, contiguous, parts balancing Ã's non-zeros (`metis::metis_order`; feature `metis`) | METIS's, about O(nnz·log parts) |
//!
//! Every order reads the graph structure only (the functions take no labels or features) and
//! is deterministic: the same graph gives the same permutation on every machine and for any
//! thread count. A directed graph is ordered by its symmetrised pattern A + Aᵀ.
//!
//! # Applying and undoing
//! [`apply`] permutes a [`Dataset`] once: graph, features (dense or sparse), labels and split
//! masks. Per-node outputs computed on the reordered dataset (logits, embeddings) come back
//! in the caller's order with [`unpermute_rows`] and [`unpermute_slice`].
//!
//! # Layout
//! The simple orders are in `classic.rs`, the label-propagation communities in `community/`,
//! the cache model and the locality statistics in `cache.rs`; [`Permutation`] and its
//! application to a graph live in [`crate::graph::permutation`].

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use crate::data::{Dataset, Features, Skeleton};
use crate::graph::permutation::len_check;
use crate::graph::Graph;
use crate::{ConfigError, Error, Result, Scalar};

mod cache;
mod classic;
mod community;
#[cfg(feature = "metis")]
pub mod metis;
#[cfg(test)]
mod tests;

pub use crate::graph::permutation::{
    permute_graph, permute_rows, permute_slice, unpermute_rows, unpermute_slice, Permutation,
};
pub use cache::{cache_miss_model, locality, Locality, CACHE_MODEL_WAYS};
use classic::{bfs_order, by_degree, rcm_order};
pub use community::{community_order, label_propagation, CommunityConfig, DEFAULT_MAX_COMMUNITY};

/// Which node order to use (see the [module docs](self) for each).
///
/// Parsed from and displayed as `none`, `random` (seed 0) or `random:SEED`, `degree`, `rcm`,
/// `bfs`, `community`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reorder {
    /// Keep the given order.
    #[default]
    None,
    /// A uniformly random permutation with this seed.
    Random(u64),
    /// Descending degree.
    Degree,
    /// Reverse Cuthill–McKee.
    Rcm,
    /// Breadth-first search.
    Bfs,
    /// Label-propagation communities, contiguous (`CommunityConfig::default`).
    Community,
    /// [`Reorder::Community`] where it pays, [`Reorder::None`] elsewhere (`auto_order`).
    Auto,
    /// The parts of a METIS recursive bisection, contiguous (`metis::metis_order`; needs the
    /// `metis` feature, on by default).
    Metis,
}

impl Reorder {
    /// The accepted names, for help texts and error messages.
    pub const NAMES: &'static str =
        "none, random, random:SEED, degree, rcm, bfs, community, auto, metis";
}

impl fmt::Display for Reorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reorder::None => f.write_str("none"),
            Reorder::Random(0) => f.write_str("random"),
            Reorder::Random(s) => write!(f, "random:{s}"),
            Reorder::Degree => f.write_str("degree"),
            Reorder::Rcm => f.write_str("rcm"),
            Reorder::Bfs => f.write_str("bfs"),
            Reorder::Community => f.write_str("community"),
            Reorder::Auto => f.write_str("auto"),
            Reorder::Metis => f.write_str("metis"),
        }
    }
}

impl FromStr for Reorder {
    type Err = ConfigError;

    /// Parses one of [`Reorder::NAMES`].
    ///
    /// # Errors
    /// [`ConfigError::UnknownName`] for anything else.
    fn from_str(s: &str) -> std::result::Result<Self, ConfigError> {
        if let Some(seed) = s.strip_prefix("random:").and_then(|v| v.parse().ok()) {
            return Ok(Reorder::Random(seed));
        }
        crate::error::parse_name(
            "node order",
            s,
            &[
                ("none", Reorder::None),
                ("random", Reorder::Random(0)),
                ("random:SEED", Reorder::Random(0)),
                ("degree", Reorder::Degree),
                ("rcm", Reorder::Rcm),
                ("bfs", Reorder::Bfs),
                ("community", Reorder::Community),
                ("auto", Reorder::Auto),
                ("metis", Reorder::Metis),
            ],
        )
    }
}

/// The permutation `how` gives for `graph` (structure only: no labels, no features).
///
/// # Errors
/// From [`Reorder::Metis`] only: METIS's failures, or a build without the `metis` feature
/// ([`ConfigError::Unsupported`]).
///
/// # Complexity
/// See the table in the [module docs](self).
///
/// # Examples
/// ```
/// use sparse_gcn::graph::{Direction, Graph};
/// use sparse_gcn::order::{{order, Reorder}};
/// // a star around node 3
/// let g = Graph::try_from_edges(4, &[(3, 0), (3, 1), (3, 2)], Direction::Undirected).unwrap();
/// assert_eq!(order(&g, Reorder::Degree)?.new_to_old(), &[3, 0, 1, 2]);
/// assert!(order(&g, Reorder::None)?.is_identity());
/// # Ok::<(), sparse_gcn::Error>(())
/// ```
pub fn order(graph: &Graph, how: Reorder) -> Result<Permutation> {
    let n = graph.n_nodes();
    Ok(match how {
        Reorder::None => Permutation::identity(n),
        Reorder::Random(seed) => Permutation::random(n, seed),
        Reorder::Degree => Permutation::from_new_to_old_trusted(by_degree(&Adj::new(graph), true)),
        Reorder::Bfs => bfs_order(graph),
        Reorder::Rcm => rcm_order(graph),
        Reorder::Community => community_order(graph, &CommunityConfig::default()),
        Reorder::Auto => auto_order(graph).0,
        #[cfg(feature = "metis")]
        Reorder::Metis => metis::metis_order(graph)?,
        #[cfg(not(feature = "metis"))]
        Reorder::Metis => {
            return Err(ConfigError::Unsupported {
                what: "--reorder metis in a build without the `metis` feature",
            }
            .into())
        }
    })
}

/// Rows of X in the cache [`auto_order`] models: 32 MiB (a server L3) of rows of 128 f32.
pub(crate) const AUTO_CACHE_ROWS: usize = (32 << 20) / (128 * 4);

/// The relative drop in modelled misses for which [`auto_order`] takes the community order.
pub(crate) const AUTO_MIN_GAIN: f64 = 0.1;

/// [`auto_order`] models one cache set in this many (an unbiased sample of the gathers,
/// exact for the sets it keeps): the two models cost an eighth of the whole ones.
pub(crate) const AUTO_MODEL_SAMPLE: usize = 8;

/// [`Reorder::Auto`]: the community order if it pays, else the identity; also says which.
///
/// A graph of at most [`AUTO_CACHE_ROWS`] nodes keeps its order: X's rows fit in the cache
/// whatever the order (at d ≤ 128). A larger one gets [`community_order`] when that cuts the
/// [`cache_miss_model`] of the SpMM's gathers (a cache of [`AUTO_CACHE_ROWS`] rows, one set in
/// [`AUTO_MODEL_SAMPLE`] modelled) by at least
/// [`AUTO_MIN_GAIN`] of the given order's; a graph without communities, or one already in a
/// good order (as a crawl or a previous reordering may leave it), keeps its order.
///
/// # Complexity
/// O(1) for small graphs; otherwise that of [`community_order`] plus two sampled cache
/// models, O(nnz + n + (nnz + n)·[`CACHE_MODEL_WAYS`] / [`AUTO_MODEL_SAMPLE`]).
pub(crate) fn auto_order(graph: &Graph) -> (Permutation, Reorder) {
    let (p, r, _) = auto_order_with_graph(graph);
    (p, r)
}

/// [`auto_order`], also returning `permute_graph(graph, &perm)` when it takes the community
/// order: the model of the community order runs on that graph (rows in order, no relabelling
/// or sorting per row), and [`apply_owned`] reuses it instead of permuting again.
pub(crate) fn auto_order_with_graph(graph: &Graph) -> (Permutation, Reorder, Option<Graph>) {
    let n = graph.n_nodes();
    if n <= AUTO_CACHE_ROWS {
        return (Permutation::identity(n), Reorder::None, None);
    }
    let p = community_order(graph, &CommunityConfig::default());
    let model =
        |g: &Graph| cache::cache_miss_model_sampled(g, None, AUTO_CACHE_ROWS, AUTO_MODEL_SAMPLE);
    let (given, (h, community)) = rayon::join(
        || model(graph),
        || {
            let h = permute_graph(graph, &p);
            let m = model(&h);
            (h, m)
        },
    );
    if community <= (1.0 - AUTO_MIN_GAIN) * given {
        (p, Reorder::Community, Some(h))
    } else {
        (Permutation::identity(n), Reorder::None, None)
    }
}

/// The symmetric neighbour structure the orders walk: the graph's own CSR when undirected
/// (its pattern is symmetric by construction), A + Aᵀ (possibly with repeated entries) when
/// directed. Self-loops are skipped by the users. The community graphs of
/// [`community_order`] carry a weight per entry (the number of edges it stands for).
struct Adj<'a> {
    ip: Cow<'a, [usize]>,
    idx: Cow<'a, [u32]>,
    /// One weight per entry of `idx`; `None`: every entry weighs 1. (A weight counts edges of
    /// the graph below; one above `u32::MAX` is stored as `u32::MAX`, which takes a graph of
    /// more than 4·10⁹ non-zeros.)
    wt: Option<Vec<u32>>,
}

impl<'a> Adj<'a> {
    fn new(graph: &'a Graph) -> Self {
        if !graph.is_directed() {
            return Adj {
                ip: Cow::Borrowed(graph.indptr()),
                idx: Cow::Borrowed(graph.indices()),
                wt: None,
            };
        }
        let n = graph.n_nodes();
        let (ip0, idx0) = (graph.indptr(), graph.indices());
        let mut ip = vec![0usize; n + 1];
        for i in 0..n {
            ip[i + 1] += ip0[i + 1] - ip0[i];
            for &j in &idx0[ip0[i]..ip0[i + 1]] {
                ip[j as usize + 1] += 1;
            }
        }
        for i in 0..n {
            ip[i + 1] += ip[i];
        }
        let mut fill = ip.clone();
        let mut idx = vec![0u32; ip[n]];
        for i in 0..n {
            for &j in &idx0[ip0[i]..ip0[i + 1]] {
                idx[fill[i]] = j;
                fill[i] += 1;
                idx[fill[j as usize]] = i as u32;
                fill[j as usize] += 1;
            }
        }
        Adj {
            ip: Cow::Owned(ip),
            idx: Cow::Owned(idx),
            wt: None,
        }
    }
    fn n(&self) -> usize {
        self.ip.len() - 1
    }
    #[inline]
    fn row(&self, i: usize) -> &[u32] {
        &self.idx[self.ip[i]..self.ip[i + 1]]
    }
    /// The weights of row `i`'s entries (`None`: all 1).
    #[inline]
    fn row_weights(&self, i: usize) -> Option<&[u32]> {
        self.wt.as_deref().map(|w| &w[self.ip[i]..self.ip[i + 1]])
    }
    /// The number of entries of row `i`.
    #[inline]
    fn degree(&self, i: usize) -> usize {
        self.ip[i + 1] - self.ip[i]
    }
    /// The sum of row `i`'s weights (its [`Adj::degree`] when unweighted).
    #[inline]
    fn weighted_degree(&self, i: usize) -> u64 {
        self.row_weights(i).map_or(self.degree(i) as u64, |w| {
            w.iter().map(|&x| u64::from(x)).sum()
        })
    }
}

/// Features with their rows permuted: row `r` is old row `new_to_old[r]` (sparse rows keep
/// their column order; Xᵀ is recomputed).
///
/// # Panics
/// If `perm.len() != features.n_rows()`.
///
/// # Complexity
/// O(n + nnz) (dense: O(n·in_dim)).
#[track_caller]
pub(crate) fn permute_features<F: Scalar>(
    features: &Features<F>,
    perm: &Permutation,
) -> Features<F> {
    len_check("permute_features", features.n_rows(), perm.len());
    features.select_rows(perm.new_to_old())
}

/// A dataset already relabelled by a node order (a store converted with `--reorder`): the
/// order asked for, the order it resolved to, and the permutation (row `r` is the input's node
/// `perm.new_to_old()[r]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ordered {
    /// The order asked for (`auto` stays `auto`).
    pub asked: Reorder,
    /// The order it resolved to.
    pub applied: Reorder,
    /// The relabelling.
    pub perm: Permutation,
}

/// `data` relabelled as `reorder` asks, with the permutation (`None`: the input order) and the
/// order it resolved to: what training prepares. Data already relabelled (`given`) is kept as
/// it is when `reorder` is the order it was relabelled by (asked or applied); otherwise it is
/// first put back in the input order. Either way the result is the same data as from the
/// input, bit for bit.
///
/// # Errors
/// As [`order`]; [`Error::Mismatch`] if a permutation does not fit the data.
pub fn reorder_dataset(
    mut data: Dataset,
    reorder: Reorder,
    given: Option<Ordered>,
) -> Result<(Dataset, Option<Permutation>, Reorder)> {
    if let Some(o) = given {
        if reorder == o.asked || reorder == o.applied {
            check_len(data.graph.n_nodes(), &o.perm)?;
            return Ok((data, Some(o.perm), o.applied));
        }
        data = apply_owned(data, &o.perm.inverse(), None)?;
    }
    let (perm, applied) = if reorder == Reorder::Auto {
        // The relabelled graph auto's model builds is the one `apply` would build.
        let (perm, applied, graph) = auto_order_with_graph(&data.graph);
        if let Some(graph) = graph {
            data = apply_owned(data, &perm, Some(graph))?;
        }
        ((!perm.is_identity()).then_some(perm), applied)
    } else {
        let perm = order(&data.graph, reorder)?;
        let perm = (!perm.is_identity()).then_some(perm);
        if let Some(perm) = &perm {
            data = apply_owned(data, perm, None)?;
        }
        (perm, reorder)
    };
    Ok((data, perm, applied))
}

/// [`apply`] consuming the dataset, with the relabelled graph when the caller has it (it must
/// be `permute_graph(&dataset.graph, perm)`, as [`auto_order_with_graph`] returns it): the old
/// graph is freed before the features are relabelled in place, so at most one graph besides
/// the features is held (products-like: 1.5 GB less at the peak than [`apply`]).
///
/// # Errors
/// [`Error::Mismatch`] if `perm.len()` or `graph`'s size is not the dataset's.
pub(crate) fn apply_owned(
    mut dataset: Dataset,
    perm: &Permutation,
    graph: Option<Graph>,
) -> Result<Dataset> {
    check_len(dataset.graph.n_nodes(), perm)?;
    let graph = match graph {
        Some(g) => {
            if g.n_nodes() != dataset.graph.n_nodes() || g.n_edges() != dataset.graph.n_edges() {
                return Err(Error::Mismatch {
                    what: "relabelled graph nodes vs dataset nodes".into(),
                    expected: dataset.graph.n_nodes(),
                    got: g.n_nodes(),
                });
            }
            g
        }
        None => return dataset.relabel(perm),
    };
    dataset.graph = graph;
    len_check("permute_features", dataset.features.n_rows(), perm.len());
    dataset.features.permute_rows(perm.new_to_old());
    dataset.labels = permute_slice(perm, &dataset.labels);
    dataset.split = dataset.split.permuted(perm);
    dataset.validate()?;
    Ok(dataset)
}

/// The dataset relabelled by `perm`: graph, features, labels and split masks (name and class
/// count unchanged). Train on the result, then bring per-node outputs back with
/// [`unpermute_rows`]; accuracies over a mask are the same in either order.
///
/// # Errors
/// [`Error::Mismatch`] if `perm.len()` is not the dataset's node count.
///
/// # Complexity
/// O(n + nnz + feature entries).
pub fn apply(dataset: &Dataset, perm: &Permutation) -> Result<Dataset> {
    check_len(dataset.graph.n_nodes(), perm)?;
    let s = &dataset.split;
    Dataset::try_new(
        dataset.name.clone(),
        permute_graph(&dataset.graph, perm),
        permute_features(&dataset.features, perm),
        permute_slice(perm, &dataset.labels),
        dataset.n_classes,
        s.permuted(perm),
    )
}

/// [`apply`] to a dataset without its features: the graph, labels and split relabelled.
///
/// # Errors
/// [`Error::Mismatch`] if `perm.len()` is not the node count.
pub(crate) fn apply_skeleton(skeleton: &Skeleton, perm: &Permutation) -> Result<Skeleton> {
    check_len(skeleton.graph.n_nodes(), perm)?;
    Ok(Skeleton {
        name: skeleton.name.clone(),
        graph: permute_graph(&skeleton.graph, perm),
        labels: permute_slice(perm, &skeleton.labels),
        n_classes: skeleton.n_classes,
        split: skeleton.split.permuted(perm),
    })
}

fn check_len(n: usize, perm: &Permutation) -> Result<()> {
    if perm.len() != n {
        return Err(Error::Mismatch {
            what: "permutation length vs nodes".into(),
            expected: n,
            got: perm.len(),
        });
    }
    Ok(())
}
