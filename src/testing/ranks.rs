//! [`ThreadRanks`]: the processes of a data-parallel run, as threads of one test.

use std::sync::Arc;

use crate::graph::Collective;

/// One of `size` threads standing for the processes of a data-parallel run: `sum_words` adds every
/// thread's words (each thread waits for the others, as an all-reduce does; a thread left
/// waiting 120 s, its peers gone, panics instead of hanging the test).
#[derive(Debug)]
pub struct ThreadRanks {
    rank: usize,
    size: usize,
    shared: Arc<Shared>,
}

/// What the thread ranks share: the sum, and a barrier (arrivals, generation).
#[derive(Debug, Default)]
struct Shared {
    acc: std::sync::Mutex<Vec<i64>>,
    gate: std::sync::Mutex<(usize, u64)>,
    turn: std::sync::Condvar,
}

impl ThreadRanks {
    /// The `size` ranks of one run, rank 0 first (give each to its own thread).
    pub fn new(size: usize) -> Vec<ThreadRanks> {
        let shared = Arc::new(Shared::default());
        (0..size)
            .map(|rank| ThreadRanks {
                rank,
                size,
                shared: shared.clone(),
            })
            .collect()
    }

    fn wait(&self) {
        let s = &*self.shared;
        let mut g = s.gate.lock().unwrap();
        let generation = g.1;
        g.0 += 1;
        if g.0 == self.size {
            *g = (0, generation + 1);
            s.turn.notify_all();
            return;
        }
        let (g, _) = s
            .turn
            .wait_timeout_while(g, std::time::Duration::from_secs(120), |g| {
                g.1 == generation
            })
            .unwrap();
        assert!(g.1 != generation, "rank {}: its peers are gone", self.rank);
    }
}

impl Collective for ThreadRanks {
    fn spans_processes(&self) -> bool {
        true
    }
    fn process(&self) -> (usize, usize) {
        (self.rank, self.size)
    }
    fn sum_words(&self, words: &mut [i64]) {
        // (Every thread has read the last sum before it is cleared.)
        self.wait();
        if self.rank == 0 {
            let mut a = self.shared.acc.lock().unwrap();
            a.clear();
            a.resize(words.len(), 0);
        }
        self.wait();
        for (a, w) in self.shared.acc.lock().unwrap().iter_mut().zip(words.iter()) {
            *a += *w;
        }
        self.wait();
        words.copy_from_slice(&self.shared.acc.lock().unwrap());
    }
}
