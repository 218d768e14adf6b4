//! Explicit parallelism, [`Par`], and the data-determined splitting rules of the kernels.
//!
//! Every parallel kernel splits its work at points that depend only on the data (the row
//! pointer of a sparse matrix, the number of rows of a dense one), never on the number of
//! threads. Each output element is then computed by exactly one task in the same order as the
//! serial code, so results are bit-identical for any thread count, `Par::Seq` included.

/// Whether a kernel may use rayon. The thread count is that of the enclosing rayon pool
/// (`rayon::ThreadPool::install`, or the global pool sized by `--threads`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Par {
    /// Run on the calling thread.
    Seq,
    /// Split work into rayon tasks (the default).
    #[default]
    Rayon,
}

impl Par {
    /// Run `a` and `b`, in parallel under [`Par::Rayon`], one after the other otherwise.
    #[inline]
    pub fn join<A, B, RA, RB>(self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        match self {
            Par::Seq => (a(), b()),
            Par::Rayon => rayon::join(a, b),
        }
    }
}

/// Builds a rayon pool with `threads` threads (0: rayon's default, one per CPU).
///
/// # Errors
/// [`crate::Error::ThreadPool`] if the pool cannot be built.
pub fn thread_pool(threads: usize) -> crate::Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| crate::Error::ThreadPool(e.to_string()))
}
