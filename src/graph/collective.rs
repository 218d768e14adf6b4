//! [`Collective`]: every exchange between the processes of a run — the sums across ranks — apart
//! from the products with Â ([`Propagate`](super::Propagate)).
//!
//! One process is [`Local`]: nothing to exchange. A row-partitioned run (`dist::backend::mpi`) adds
//! integer words across its ranks; a planning trace records the exchanges it would make.
//! Everything a run sums across nodes goes through [`Sums`](super::Sums), which forms exact
//! partials over this process's rows and exchanges them here, so a sum is the same bits for any
//! rank count.

/// The exchanges of a run between its processes (see the [module docs](self)).
pub trait Collective: Sync {
    /// Whether the run spans several processes (then every sum is exchanged through
    /// [`Collective::sum_words`]; one process reads its sums straight from the accumulators,
    /// the same values).
    fn spans_processes(&self) -> bool {
        false
    }

    /// This process's index and the number of processes (a data-parallel run gives process
    /// `r` of `P` its share of every step's batches). One process: `(0, 1)`.
    fn process(&self) -> (usize, usize) {
        (0, 1)
    }

    /// Adds `words` element-wise across the processes, in place, as integers (the exchange of
    /// exact partial sums). One process: nothing to do.
    fn sum_words(&self, _words: &mut [i64]) {}

    /// For a count `local` of this process's elements of a node-ordered sequence (dropout mask
    /// elements, stored features): the elements of the processes before it and the total over
    /// every process. One process: `(0, local)`.
    fn global_span(&self, local: usize) -> (usize, usize) {
        (0, local)
    }

    /// Whether `yes` holds on every process.
    fn all(&self, yes: bool) -> bool {
        let mut w = [i64::from(!yes)];
        self.sum_words(&mut w);
        w[0] == 0
    }

    /// The sum of `v` over the processes, as one word (a count below 2⁶³ on each process, so
    /// that the sum fits: counts of nodes, edges and non-zeros).
    fn sum(&self, v: u64) -> u64 {
        let mut w = [i64::try_from(v).unwrap_or(i64::MAX)];
        self.sum_words(&mut w);
        u64::try_from(w[0]).unwrap_or(0)
    }
}

/// One process: every sum is its own, nothing is exchanged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Local;

impl Collective for Local {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two processes' worth of words: each call adds the other process's values.
    struct Twice;
    impl Collective for Twice {
        fn spans_processes(&self) -> bool {
            true
        }
        fn sum_words(&self, w: &mut [i64]) {
            w.iter_mut().for_each(|v| *v *= 2);
        }
    }

    #[test]
    fn all_and_sum_follow_sum_words() {
        assert!(Local.all(true) && !Local.all(false));
        assert_eq!(Local.sum(7), 7);
        assert_eq!(Local.sum(u64::MAX), i64::MAX as u64, "one word");
        assert_eq!(Local.global_span(5), (0, 5));
        assert_eq!(Local.process(), (0, 1));
        assert!(Twice.all(true) && !Twice.all(false));
        assert_eq!(Twice.sum(3), 6);
        assert_eq!(Twice.sum((1 << 40) + 5), (1 << 41) + 10);
    }
}
