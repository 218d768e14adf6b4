//! Guide tables (Chen and Asau, 1974) over non-decreasing keys: where `partition_point` would
//! take a binary search of the whole sequence, each a cache miss deep, the search starts in a
//! bucket holding a few keys. The answers are `partition_point`'s, whatever the keys (one
//! that a guide built for other keys would get wrong is checked and searched in full).

/// A guide over `len` non-decreasing keys in `[0, total]`: `first[b]` is the number of keys
/// at most bucket b's start, `total · b / K` (`first[K]` = `len`).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Guide {
    first: Vec<usize>,
    total: f64,
    /// K, the buckets.
    k: usize,
}

impl Guide {
    /// The guide of `keys` (non-decreasing, each `key(i)` for i in `0..len`) over
    /// `[0, total]` in `buckets` buckets (at least one).
    pub(crate) fn new(len: usize, key: impl Fn(usize) -> f64, total: f64, buckets: usize) -> Self {
        let k = buckets.max(1);
        let mut g = Guide {
            first: Vec::with_capacity(k + 1),
            total,
            k,
        };
        let mut i = 0;
        for b in 0..k {
            let start = g.start(b);
            while i < len && key(i) <= start {
                i += 1;
            }
            g.first.push(i);
        }
        g.first.push(len);
        g
    }

    fn start(&self, b: usize) -> f64 {
        self.total * (b as f64 / self.k as f64)
    }

    /// The number of keys at most `r` (`keys.partition_point(|&x| x <= r)`), for
    /// `keys[i] = key(i)`.
    pub(crate) fn partition_point(&self, len: usize, key: impl Fn(usize) -> f64, r: f64) -> usize {
        let k = self.k;
        // The number of keys at most `r` among those below `lo` and up to `hi`, by bisection.
        let search = |mut lo: usize, mut hi: usize| {
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if key(mid) <= r {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            lo
        };
        if self.first.len() != k + 1 || self.first[k] != len || !(r >= 0.0 && r < self.total) {
            return search(0, len);
        }
        let mut b = ((r / self.total * k as f64) as usize).min(k - 1);
        while b > 0 && r < self.start(b) {
            b -= 1;
        }
        while b + 1 < k && r >= self.start(b + 1) {
            b += 1;
        }
        let lo = search(self.first[b], self.first[b + 1]);
        // The answer when these are the keys the guide was built for; checked.
        let ok = (lo == 0 || key(lo - 1) <= r) && (lo == len || key(lo) > r);
        if ok {
            lo
        } else {
            search(0, len)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Guide;

    #[test]
    fn guided_answers_are_partition_points() {
        let keys: Vec<f64> = [0.0, 0.5, 0.5, 0.5, 1.25, 3.0, 3.0, 7.5, 9.0, 9.0, 10.0].to_vec();
        let total = 10.0;
        for buckets in [1, 2, 3, 7, 11, 40] {
            let g = Guide::new(keys.len(), |i| keys[i], total, buckets);
            for step in 0..=400 {
                let r = step as f64 * 0.025;
                let got = g.partition_point(keys.len(), |i| keys[i], r);
                assert_eq!(got, keys.partition_point(|&x| x <= r), "{buckets}: {r}");
            }
            // Keys the guide was not built for: still their partition points.
            let other: Vec<f64> = keys.iter().map(|x| 10.0 - x).rev().collect();
            for step in 0..400 {
                let r = step as f64 * 0.025;
                let got = g.partition_point(other.len(), |i| other[i], r);
                assert_eq!(got, other.partition_point(|&x| x <= r), "{buckets}: {r}");
            }
        }
        // Integer keys (row pointers), the row of each entry.
        let ip = [0usize, 0, 3, 3, 4, 9, 9];
        let g = Guide::new(ip.len(), |i| ip[i] as f64, 9.0, 6);
        for e in 0..9 {
            let want = ip.partition_point(|&p| p <= e);
            assert_eq!(
                g.partition_point(ip.len(), |i| ip[i] as f64, e as f64),
                want
            );
        }
    }
}
