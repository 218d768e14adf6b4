//! The graph-level half of [`dist`](super): a row-partitioned Â and its exchanges, below the
//! layers and the training loop (it imports `graph` and below, never `nn` or `train`).
//!
//! - [`partition`]: contiguous row ranges of a fixed node order, balanced by non-zeros, cut on
//!   the reduction grid ([`grid_rows`](crate::kernels::rows::grid_rows)), which does not
//!   depend on the rank count; each rank's halo and its neighbour ranks.
//! - `own_share` and `tile_width`: the column tiles of a halo exchange.
//! - `mpi` (feature `mpi`): the job ([`Collective`](crate::graph::Collective) across
//!   processes) and `DistAdj`, the row-partitioned [`Propagate`](crate::graph::Propagate) —
//!   halo exchange before every product, exact sums across ranks — that every layer runs on
//!   unchanged.

#[cfg(feature = "mpi")]
pub mod mpi;
pub mod partition;

pub use partition::{RankStats, RowPartition};

/// The share of a rank's extended rows that are its own, in 1/1024: `1024·owned / (owned +
/// halo)` (1024 without a halo). A job tiles with the smallest share over its ranks, so that
/// every rank cuts the same column tiles.
pub(crate) fn own_share(owned: usize, halo: usize) -> u64 {
    if halo == 0 {
        return 1024;
    }
    (1024 * owned as u64) / (owned + halo) as u64
}

/// Columns per tile of a product's halo exchange at width `d` for the smallest own share
/// ([`own_share`]) over the ranks: as many as keep every rank's extended rows ((owned + halo)
/// × tile) within the size of its own rows of H (owned × d), at least 8 (the SpMM's narrowest
/// fast block), a multiple of 8 below d, and d when everything fits.
pub(crate) fn tile_width(share: u64, d: usize) -> usize {
    if d == 0 {
        return 0;
    }
    let fit = (d as u64 * share / 1024) as usize;
    if fit >= d {
        d
    } else {
        (fit / 8 * 8).max(8).min(d)
    }
}

#[cfg(test)]
mod tests {
    use super::{own_share, tile_width};

    #[test]
    fn tiles_keep_the_extended_rows_near_the_owned_ones() {
        let t = |owned, halo, d| tile_width(own_share(owned, halo), d);
        assert_eq!(t(100, 0, 256), 256);
        assert_eq!(t(100, 100, 256), 128);
        // products-like at P = 4: 614 k owned, 1.82 M halo rows.
        assert_eq!(t(614_021, 1_821_522, 256), 64);
        assert_eq!(t(10, 1000, 16), 8);
        assert_eq!(t(5, 5, 4), 4);
        assert_eq!(t(0, 0, 0), 0);
        assert_eq!(t(0, 7, 40), 8);
    }
}
