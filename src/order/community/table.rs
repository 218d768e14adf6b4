//! The per-thread table of neighbour-community counts ([`LabelTable`], one per thread in
//! [`TABLE`]) that a sweep's best label and the community graph's rows are counted in.

thread_local! {
    /// Per-thread scratch of the sweep's best label and of the community graph's rows: an
    /// open-addressing table of (community, count), empty slots holding `u32::MAX`, allocated
    /// for the largest row seen (each row uses the first slots, as many as it needs:
    /// [`LabelTable::reserve`]), and the slots a call filled (emptied again before it returns).
    pub(super) static TABLE: std::cell::RefCell<LabelTable> =
        const { std::cell::RefCell::new(LabelTable { key: Vec::new(), count: Vec::new(), mask: 0, used: Vec::new(), buf: Vec::new() }) };
}

/// The neighbour-community counts of one node (or of one community's members).
pub(super) struct LabelTable {
    pub(super) key: Vec<u32>,
    pub(super) count: Vec<u64>,
    /// The slots in use for the current row are `0..=mask` (sized by [`LabelTable::reserve`]
    /// for that row, not the largest row seen, so that a small row's probes stay in L1).
    pub(super) mask: usize,
    /// The slots filled, in first-met order.
    pub(super) used: Vec<u32>,
    /// The communities of a row's entries, gathered first in a loop without branches (so
    /// that the random loads overlap), then counted.
    pub(super) buf: Vec<u32>,
}

impl LabelTable {
    /// Makes room for a row of `len` entries among `labels` community ids: at least twice
    /// min(`len`, `labels`) slots, a power of two.
    #[inline]
    pub(super) fn reserve(&mut self, len: usize, labels: usize) {
        let want = (2 * len.min(labels)).next_power_of_two().max(16);
        if self.key.len() < want {
            self.key = vec![u32::MAX; want];
            self.count = vec![0; want];
        }
        self.mask = want - 1;
    }

    /// Adds `w` to community `l`'s count (`l` is not `u32::MAX`: ids are below the node count).
    #[inline]
    pub(super) fn add(&mut self, l: u32, w: u64) {
        let mask = self.mask;
        // Fibonacci hashing of the id, then linear probing.
        let mut s = (u64::from(l).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & mask;
        loop {
            let k = self.key[s];
            if k == l {
                self.count[s] += w;
                return;
            }
            if k == u32::MAX {
                self.key[s] = l;
                self.count[s] = w;
                self.used.push(s as u32);
                return;
            }
            s = (s + 1) & mask;
        }
    }

    /// Each counted community and its count, in the order first added; empties the table.
    #[inline]
    pub(super) fn drain(&mut self, mut f: impl FnMut(u32, u64)) {
        for &u in &self.used {
            let u = u as usize;
            f(self.key[u], self.count[u]);
            self.key[u] = u32::MAX;
        }
        self.used.clear();
    }
}
