//! Row partitions of a CSR pattern and their halos ([`RowPartition`], [`RankStats`]).
//!
//! Rank `r` of `P` owns the contiguous rows `bounds[r]..bounds[r + 1]`. Every bound is a multiple
//! of the chunk size (or the row count), so the grid of possible cuts is the same for every `P`:
//! a chunk is never split between ranks, and sums formed per chunk (the reductions of a
//! distributed run) do not depend on `P`. Among the grid's cuts, bound `k` is the one whose
//! prefix of non-zeros is nearest to `k/P` of all non-zeros (the earlier cut on a tie), so ranks
//! get about equal SpMM work; with more ranks than chunks some ranks own no rows.

use std::ops::Range;

use rayon::prelude::*;

use crate::error::ConfigError;
use crate::kernels::rows::grid_rows;
use crate::Result;

/// Contiguous row ranges, one per rank, on a fixed chunk grid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowPartition {
    /// `P + 1` non-decreasing bounds from 0 to the row count.
    bounds: Vec<usize>,
    /// The chunk size of the grid.
    chunk: usize,
}

/// What one rank holds and exchanges under a [`RowPartition`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct RankStats {
    /// Rows the rank owns.
    pub owned_rows: usize,
    /// Stored entries of those rows (the rank's share of the SpMM).
    pub nnz: usize,
    /// Distinct rows outside its range that its rows read: the rows it receives before each
    /// SpMM (and, for a symmetric pattern, sends the same count of before each transposed one).
    pub halo_rows: usize,
    /// Ranks that own at least one of its halo rows.
    pub neighbours: usize,
}

impl RowPartition {
    /// The partition of a pattern with row pointers `indptr` (`n + 1` entries) into `ranks`
    /// ranges on the grid of `chunk` rows, balanced by non-zeros.
    ///
    /// # Errors
    /// [`ConfigError::ZeroCount`] for 0 ranks or a chunk of 0 rows.
    pub fn balanced(indptr: &[usize], ranks: usize, chunk: usize) -> Result<Self> {
        if ranks == 0 {
            return Err(ConfigError::ZeroCount("ranks").into());
        }
        if chunk == 0 {
            return Err(ConfigError::ZeroCount("chunk rows").into());
        }
        let n = indptr.len().saturating_sub(1);
        let total = indptr.last().copied().unwrap_or(0) - indptr.first().copied().unwrap_or(0);
        // The grid: 0, chunk, 2·chunk, …, n.
        let cuts: Vec<usize> = (0..n.div_ceil(chunk))
            .map(|c| c * chunk)
            .chain([n])
            .collect();
        let prefix = |cut: usize| indptr[cut] - indptr[0];
        let mut bounds = Vec::with_capacity(ranks + 1);
        bounds.push(0);
        let mut at = 0usize; // index into `cuts` of the last bound
        for k in 1..ranks {
            // k/P of the non-zeros, exactly: the first cut whose prefix reaches it, or the cut
            // before when that one is nearer.
            let target = total as u128 * k as u128;
            let scaled = |cut: usize| prefix(cut) as u128 * ranks as u128;
            let mut i = at;
            while i + 1 < cuts.len() && scaled(cuts[i]) < target {
                i += 1;
            }
            if i > at
                && target - scaled(cuts[i - 1]).min(target)
                    <= scaled(cuts[i]).saturating_sub(target)
            {
                i -= 1;
            }
            at = i;
            bounds.push(cuts[i]);
        }
        bounds.push(n);
        Ok(RowPartition { bounds, chunk })
    }

    /// One rank owning every row.
    pub fn single(n_rows: usize) -> Self {
        RowPartition {
            bounds: vec![0, n_rows],
            chunk: grid_rows(n_rows),
        }
    }

    /// The partition of a graph's Â (row pointers `indptr`) into `ranks` ranges on its
    /// reduction grid ([`grid_rows`] of its node count), balanced by non-zeros: the partition
    /// of a distributed run.
    ///
    /// # Errors
    /// As [`RowPartition::balanced`].
    pub fn of_graph(indptr: &[usize], ranks: usize) -> Result<Self> {
        let n = indptr.len().saturating_sub(1);
        RowPartition::balanced(indptr, ranks, grid_rows(n))
    }

    /// Number of ranks.
    pub fn ranks(&self) -> usize {
        self.bounds.len() - 1
    }

    /// Rows of the pattern.
    pub fn n_rows(&self) -> usize {
        self.bounds[self.bounds.len() - 1]
    }

    /// The chunk size of the grid.
    pub fn chunk(&self) -> usize {
        self.chunk
    }

    /// The rows rank `r` owns.
    ///
    /// # Panics
    /// If `r >= ranks()`.
    pub fn range(&self, r: usize) -> Range<usize> {
        self.bounds[r]..self.bounds[r + 1]
    }

    /// The bounds, `ranks() + 1` of them.
    pub fn bounds(&self) -> &[usize] {
        &self.bounds
    }

    /// The rank owning `row` (the last of several when empty ranks share a bound).
    ///
    /// # Panics
    /// If `row >= n_rows()`.
    pub fn owner(&self, row: usize) -> usize {
        assert!(row < self.n_rows(), "owner: row {row} of {}", self.n_rows());
        self.bounds.partition_point(|&b| b <= row) - 1
    }

    /// The halo of rank `r`: the sorted distinct columns of its rows outside its range.
    pub fn halo(&self, indptr: &[usize], indices: &[u32], r: usize) -> Vec<u32> {
        let range = self.range(r);
        self.halo_of_rows(r, &indices[indptr[range.start]..indptr[range.end]])
    }

    /// The halo of rank `r` from its rows' column ids alone (`cols`: every stored column of
    /// its rows, global ids), as a rank that holds only its rows computes it.
    pub fn halo_of_rows(&self, r: usize, cols: &[u32]) -> Vec<u32> {
        let range = self.range(r);
        let mut cols: Vec<u32> = cols
            .iter()
            .copied()
            .filter(|&j| !range.contains(&(j as usize)))
            .collect();
        cols.sort_unstable();
        cols.dedup();
        cols
    }

    /// Every rank's [`RankStats`], ranks in parallel.
    pub fn stats(&self, indptr: &[usize], indices: &[u32]) -> Vec<RankStats> {
        (0..self.ranks())
            .into_par_iter()
            .map(|r| {
                let range = self.range(r);
                let halo = self.halo(indptr, indices, r);
                let mut owners: Vec<usize> = halo.iter().map(|&j| self.owner(j as usize)).collect();
                owners.dedup(); // halo is sorted, so owners are too
                RankStats {
                    owned_rows: range.len(),
                    nnz: indptr[range.end] - indptr[range.start],
                    halo_rows: halo.len(),
                    neighbours: owners.len(),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pattern of a path 0 - 1 - … - (n−1) with self-loops (Â of a path).
    fn path(n: usize) -> (Vec<usize>, Vec<u32>) {
        let mut indptr = vec![0];
        let mut indices = Vec::new();
        for i in 0..n {
            for j in [i.wrapping_sub(1), i, i + 1] {
                if j < n {
                    indices.push(j as u32);
                }
            }
            indptr.push(indices.len());
        }
        (indptr, indices)
    }

    #[test]
    fn bounds_lie_on_the_chunk_grid_and_balance_the_nonzeros() {
        let (ip, ix) = path(100);
        for ranks in 1..=12 {
            let p = RowPartition::balanced(&ip, ranks, 8).unwrap();
            assert_eq!(p.ranks(), ranks);
            assert_eq!(p.bounds()[0], 0);
            assert_eq!(p.n_rows(), 100);
            for w in p.bounds().windows(2) {
                assert!(w[0] <= w[1]);
                assert!(w[0] % 8 == 0 || w[0] == 100, "{:?}", p.bounds());
            }
            let stats = p.stats(&ip, &ix);
            assert_eq!(stats.iter().map(|s| s.nnz).sum::<usize>(), ip[100]);
            assert_eq!(stats.iter().map(|s| s.owned_rows).sum::<usize>(), 100);
            // Each rank's non-zeros are within one chunk's worth (8 rows × 3) of the share.
            let share = ip[100] as f64 / ranks as f64;
            for r in 0..ranks {
                let nnz = (ip[p.range(r).end] - ip[p.range(r).start]) as f64;
                assert!(
                    (nnz - share).abs() <= 24.0,
                    "ranks {ranks}, rank {r}: {nnz} vs {share}"
                );
            }
        }
    }

    #[test]
    fn halos_and_neighbours_of_a_path() {
        let (ip, ix) = path(32);
        let p = RowPartition::balanced(&ip, 4, 8).unwrap();
        assert_eq!(p.bounds(), &[0, 8, 16, 24, 32]);
        assert_eq!(p.halo(&ip, &ix, 0), vec![8]);
        assert_eq!(p.halo(&ip, &ix, 1), vec![7, 16]);
        assert_eq!(p.halo(&ip, &ix, 3), vec![23]);
        let s = p.stats(&ip, &ix);
        assert_eq!(
            s[1],
            RankStats {
                owned_rows: 8,
                nnz: 24,
                halo_rows: 2,
                neighbours: 2
            }
        );
        assert_eq!(
            s[0],
            RankStats {
                owned_rows: 8,
                nnz: 23,
                halo_rows: 1,
                neighbours: 1
            }
        );
        assert_eq!(s.iter().map(|s| s.nnz).sum::<usize>(), ip[32]);
        assert_eq!(
            (p.owner(0), p.owner(7), p.owner(8), p.owner(31)),
            (0, 0, 1, 3)
        );
        // One rank: no halo.
        let one = RowPartition::balanced(&ip, 1, 8).unwrap();
        assert_eq!(
            one,
            RowPartition {
                bounds: vec![0, 32],
                chunk: 8
            }
        );
        assert_eq!(one.stats(&ip, &ix)[0].halo_rows, 0);
    }

    #[test]
    fn more_ranks_than_chunks_leave_some_ranks_empty() {
        let (ip, ix) = path(10);
        let p = RowPartition::balanced(&ip, 8, 4).unwrap();
        assert_eq!(p.ranks(), 8);
        let s = p.stats(&ip, &ix);
        assert_eq!(s.iter().map(|s| s.owned_rows).sum::<usize>(), 10);
        assert!(s.iter().filter(|s| s.owned_rows == 0).count() >= 5);
        for row in 0..10 {
            assert!(p.range(p.owner(row)).contains(&row));
        }
        assert!(RowPartition::balanced(&ip, 0, 4).is_err());
        assert!(RowPartition::balanced(&ip, 2, 0).is_err());
    }

    #[test]
    fn a_hub_row_is_not_split() {
        // Row 0 holds most non-zeros: two ranks cut after its chunk, not inside it.
        let mut ip = vec![0, 90];
        for _ in 1..16 {
            let last = *ip.last().unwrap();
            ip.push(last + 1);
        }
        let ix: Vec<u32> = (0..90)
            .map(|j| (j % 16) as u32)
            .chain((1..16).map(|i| i as u32))
            .collect();
        let p = RowPartition::balanced(&ip, 2, 4).unwrap();
        assert_eq!(p.bounds(), &[0, 4, 16]);
        assert_eq!(p.stats(&ip, &ix)[0].nnz, 93);
    }
}
