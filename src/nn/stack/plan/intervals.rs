//! Interval bookkeeping of one buffer pool: instances (a value, a saved state, a gradient, a
//! call's scratch) live from the event that writes them to the last that reads them; each gets a
//! buffer no other live instance holds, the fewest and smallest buffers first (best fit), and a
//! handoff chain (an in-place layer taking over its input's buffer, an in-place backward handing
//! its buffer to its input's gradient) shares one buffer.

/// Interval bookkeeping of one pool.
#[derive(Debug, Default)]
pub(crate) struct Intervals {
    /// Per instance: start, end, size.
    pub(crate) inst: Vec<(usize, usize, usize)>,
    /// Per instance: the instance whose buffer it takes over at its start.
    pub(crate) handoff: Vec<Option<usize>>,
}

impl Intervals {
    pub(crate) fn add(&mut self, start: usize, end: usize, size: usize) -> usize {
        self.inst.push((start, end, size));
        self.handoff.push(None);
        self.inst.len() - 1
    }
    pub(crate) fn extend(&mut self, i: usize, t: usize) {
        self.inst[i].1 = self.inst[i].1.max(t);
    }
    /// Assigns a buffer to every instance; returns each instance's buffer and each buffer's
    /// size. A handoff chain is one group (one buffer, the largest member's size); groups go
    /// largest first (then by start) to the smallest buffer at least their size whose intervals
    /// they do not meet (else the largest such buffer, grown; else a new one). Intervals are
    /// closed: an instance read for the last time at event t and one written at t never share.
    pub(crate) fn assign(&self) -> (Vec<usize>, Vec<usize>) {
        let n = self.inst.len();
        let root = |mut i: usize| {
            while let Some(j) = self.handoff[i] {
                i = j;
            }
            i
        };
        let mut members: Vec<Vec<usize>> = vec![Vec::new(); n];
        for i in 0..n {
            members[root(i)].push(i);
        }
        let size = |g: usize| {
            members[g]
                .iter()
                .map(|&i| self.inst[i].2)
                .max()
                .unwrap_or(0)
        };
        let start = |g: usize| {
            members[g]
                .iter()
                .map(|&i| self.inst[i].0)
                .min()
                .unwrap_or(0)
        };
        let mut groups: Vec<usize> = (0..n).filter(|&g| !members[g].is_empty()).collect();
        groups.sort_by_key(|&g| (std::cmp::Reverse(size(g)), start(g), g));
        let meets = |a: (usize, usize, usize), b: (usize, usize, usize)| a.0 <= b.1 && b.0 <= a.1;
        let mut slot_of = vec![usize::MAX; n];
        let mut cap: Vec<usize> = Vec::new();
        let mut held: Vec<Vec<usize>> = Vec::new();
        for g in groups {
            let sz = size(g);
            let free = (0..cap.len()).filter(|&s| {
                members[g]
                    .iter()
                    .all(|&i| held[s].iter().all(|&j| !meets(self.inst[i], self.inst[j])))
            });
            let fit = free
                .clone()
                .filter(|&s| cap[s] >= sz)
                .min_by_key(|&s| (cap[s], s));
            let slot = match fit.or_else(|| free.max_by_key(|&s| (cap[s], std::cmp::Reverse(s)))) {
                Some(s) => s,
                None => {
                    cap.push(0);
                    held.push(Vec::new());
                    cap.len() - 1
                }
            };
            cap[slot] = cap[slot].max(sz);
            for &i in &members[g] {
                slot_of[i] = slot;
                held[slot].push(i);
            }
        }
        (slot_of, cap)
    }
}

#[cfg(test)]
mod tests {
    use super::Intervals;

    #[test]
    fn disjoint_intervals_share_a_buffer_and_meeting_ones_do_not() {
        let mut v = Intervals::default();
        let a = v.add(0, 2, 10);
        let b = v.add(3, 5, 10); // after a: shares its buffer
        let c = v.add(2, 4, 4); // meets both (closed intervals): a buffer of its own
        let (slot, cap) = v.assign();
        assert_eq!(slot[a], slot[b]);
        assert_ne!(slot[c], slot[a]);
        assert_eq!(cap.len(), 2);
        assert_eq!(cap[slot[a]], 10);
        assert_eq!(cap[slot[c]], 4);
    }

    #[test]
    fn a_handoff_chain_is_one_buffer_of_its_largest_member() {
        let mut v = Intervals::default();
        let a = v.add(0, 1, 5);
        let b = v.add(1, 3, 8);
        v.handoff[b] = Some(a);
        let c = v.add(2, 2, 3);
        v.extend(a, 1);
        let (slot, cap) = v.assign();
        assert_eq!(slot[a], slot[b], "one buffer for the chain");
        assert_eq!(cap[slot[a]], 8);
        assert_ne!(slot[c], slot[b], "c meets b");
    }

    #[test]
    fn best_fit_takes_the_smallest_free_buffer_large_enough() {
        let mut v = Intervals::default();
        let big = v.add(0, 0, 100);
        let small = v.add(0, 0, 10);
        let late = v.add(1, 1, 9);
        let (slot, cap) = v.assign();
        assert_eq!(slot[late], slot[small], "9 fits in 10 before 100");
        assert_eq!(cap.len(), 2);
        assert_ne!(slot[big], slot[small]);
        // Larger groups are placed first: the smaller, later one fits in their buffer.
        let mut v = Intervals::default();
        let a = v.add(0, 0, 4);
        let b = v.add(1, 1, 6);
        let (slot, cap) = v.assign();
        assert_eq!((slot[a], cap), (slot[b], vec![6]));
    }
}
