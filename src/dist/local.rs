//! A rank's part of a dataset ([`rank_data`]): its rows of X, its labels, its masks.

use std::ops::Range;

use ndarray::s;

use crate::data::{Dataset, Features, Mask, SparseFeatures, Split};
use crate::kernels::Csr;
use crate::{Error, Result};

/// What one rank trains on besides its rows of Â: its rows of the features, their labels, and
/// the split's nodes among them (renumbered from 0).
#[derive(Debug, Clone)]
pub struct RankData {
    /// The rank's rows of X (dense or sparse, as X is).
    pub features: Features<f32>,
    /// The rank's labels.
    pub labels: Vec<u32>,
    /// The split's nodes in the rank's range, as local indices.
    pub split: Split,
}

/// The rows `range` of `data`'s features, labels and split.
///
/// # Errors
/// [`Error::Distributed`] when `range` is not inside the node range.
pub fn rank_data(data: &Dataset, range: Range<usize>) -> Result<RankData> {
    let n = data.labels.len();
    if range.end > n || range.start > range.end {
        return Err(Error::Distributed(format!(
            "rows {}..{} of {n} nodes",
            range.start, range.end
        )));
    }
    let features = match &data.features {
        Features::Dense(x) => Features::Dense(x.slice(s![range.clone(), ..]).to_owned()),
        Features::Sparse(sf) => {
            let x = sf.x();
            let ip = x.indptr();
            let ip = ip.raw_storage();
            let (lo, hi) = (ip[range.start], ip[range.end]);
            let indptr = ip[range.start..=range.end]
                .iter()
                .map(|&p| p - lo)
                .collect();
            let m = Csr::new(
                (range.len(), x.cols()),
                indptr,
                x.indices()[lo..hi].to_vec(),
                x.data()[lo..hi].to_vec(),
            );
            Features::Sparse(SparseFeatures::new(m))
        }
    };
    let local = |m: &Mask| -> Result<Mask> {
        let idx: Vec<u32> = m
            .indices()
            .iter()
            .filter(|&&i| range.contains(&(i as usize)))
            .map(|&i| i - range.start as u32)
            .collect();
        Mask::try_from_indices(idx, range.len())
    };
    Ok(RankData {
        features,
        labels: data.labels[range.clone()].to_vec(),
        split: Split {
            name: data.split.name.clone(),
            train: local(&data.split.train)?,
            valid: local(&data.split.valid)?,
            test: local(&data.split.test)?,
        },
    })
}
