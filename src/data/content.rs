//! What a dataset holds, as four 64-bit content hashes (graph, features, labels, split): what a
//! checkpoint records of the data it was trained on, so that evaluation can refuse other data
//! (`train::checkpoint::Checkpoint::check_content`).
//!
//! The hashes are of the contents, not of their storage: features stored dense or sparse hash
//! the same when their values are the same (each row's non-zero values with their columns), so
//! a dataset loaded by another loader or with another sparsity threshold is still recognised.
//! They are not cryptographic (a file crafted to collide would pass): they tell data apart, as
//! a checksum does. Hashing reads every value once (about 0.2 s a GB).

use std::collections::BTreeMap;

use super::{Dataset, Features, FeaturesRef};

/// The multiplier of the hash's mixing step (the golden ratio's 64-bit fraction).
const K: u64 = 0x9E37_79B9_7F4A_7C15;

/// A 64-bit hash of a sequence of words: each step `h ← rotl((h ⊕ w)·K, 29)` is a bijection of
/// `h` for every word, and of the word for every `h`, so two sequences of the same length that
/// differ in one word never hash the same.
#[derive(Debug, Clone, Copy)]
struct Hasher(u64);

impl Hasher {
    fn new(domain: u64) -> Self {
        let mut h = Hasher(0x243F_6A88_85A3_08D3);
        h.word(domain);
        h
    }
    #[inline]
    fn word(&mut self, w: u64) {
        self.0 = (self.0 ^ w).wrapping_mul(K).rotate_left(29);
    }
    fn words(&mut self, ws: impl IntoIterator<Item = u64>) {
        let mut n = 0u64;
        for w in ws {
            self.word(w);
            n += 1;
        }
        // The length ends the sequence, so that concatenations differ.
        self.word(n);
    }
    fn finish(mut self) -> u64 {
        self.word(0xFF);
        self.0 ^ (self.0 >> 31)
    }
}

/// The content hashes of a dataset (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContentHash {
    /// The graph: its node count, direction, and each node's sorted neighbours.
    pub graph: u64,
    /// The features: their shape and each row's non-zero values with their columns.
    pub features: u64,
    /// The labels (unlabelled nodes included) and the class count.
    pub labels: u64,
    /// The split: its train, valid and test nodes.
    pub split: u64,
}

/// The checkpoint metadata keys of the four hashes, in the order of [`ContentHash::parts`].
pub const KEYS: [&str; 4] = [
    "data_hash_graph",
    "data_hash_features",
    "data_hash_labels",
    "data_hash_split",
];

/// The hash of `x`'s values (dense and sparse storage alike).
pub(crate) fn features_hash(x: &Features<f32>) -> u64 {
    let mut h = Hasher::new(2);
    h.word(x.n_rows() as u64);
    h.word(x.n_cols() as u64);
    let row = |h: &mut Hasher, nz: &mut dyn Iterator<Item = (usize, f32)>| {
        let mut n = 0u64;
        for (c, v) in nz {
            // -0.0 and 0.0 are both absent.
            if v != 0.0 {
                h.word(((c as u64) << 32) | u64::from(v.to_bits()));
                n += 1;
            }
        }
        h.word(n);
    };
    match x.get() {
        FeaturesRef::Dense(a) => {
            for r in a.rows() {
                row(&mut h, &mut r.iter().copied().enumerate());
            }
        }
        FeaturesRef::Sparse(s) => {
            for r in s.x().outer_iterator() {
                row(&mut h, &mut r.iter().map(|(c, &v)| (c, v)));
            }
        }
    }
    h.finish()
}

impl ContentHash {
    /// The hashes of `d` as it is.
    pub fn of(d: &Dataset) -> Self {
        let g = &d.graph;
        let mut gh = Hasher::new(1);
        gh.word(g.n_nodes() as u64);
        gh.word(u64::from(g.is_directed()));
        gh.words(g.indptr().iter().map(|&p| p as u64));
        gh.words(g.indices().iter().map(|&j| u64::from(j)));
        let mut lh = Hasher::new(3);
        lh.word(d.n_classes as u64);
        lh.words(d.labels.iter().map(|&l| u64::from(l)));
        let mut sh = Hasher::new(4);
        for m in [&d.split.train, &d.split.valid, &d.split.test] {
            sh.word(m.n_nodes() as u64);
            sh.words(m.indices().iter().map(|&i| u64::from(i)));
        }
        ContentHash {
            graph: gh.finish(),
            features: features_hash(&d.features),
            labels: lh.finish(),
            split: sh.finish(),
        }
    }

    /// The four hashes with their names (`graph`, `features`, `labels`, `split`).
    pub fn parts(&self) -> [(&'static str, u64); 4] {
        [
            ("graph", self.graph),
            ("features", self.features),
            ("labels", self.labels),
            ("split", self.split),
        ]
    }

    /// Records the hashes in checkpoint metadata ([`KEYS`], 16 hex digits each).
    pub fn record(&self, extra: &mut BTreeMap<String, String>) {
        for (key, (_, h)) in KEYS.iter().zip(self.parts()) {
            extra.insert((*key).to_string(), format!("{h:016x}"));
        }
    }

    /// The hashes recorded in `extra`: `None` when none is, `Err` naming the key when one is
    /// missing or not 16 hex digits.
    pub fn from_extra(extra: &BTreeMap<String, String>) -> Option<Result<Self, String>> {
        if !KEYS.iter().any(|k| extra.contains_key(*k)) {
            return None;
        }
        let mut v = [0u64; 4];
        for (slot, key) in v.iter_mut().zip(KEYS) {
            let parsed = extra
                .get(key)
                .filter(|s| s.len() == 16)
                .and_then(|s| u64::from_str_radix(s, 16).ok());
            match parsed {
                Some(h) => *slot = h,
                None => {
                    return Some(Err(format!(
                        "metadata `{key}` is missing or not 16 hex digits"
                    )))
                }
            }
        }
        Some(Ok(ContentHash {
            graph: v[0],
            features: v[1],
            labels: v[2],
            split: v[3],
        }))
    }

    /// The names of the parts in which `self` and `other` differ.
    pub fn differences(&self, other: &ContentHash) -> Vec<&'static str> {
        self.parts()
            .iter()
            .zip(other.parts())
            .filter(|((_, a), (_, b))| a != b)
            .map(|((name, _), _)| *name)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::synthetic::CitationLike;

    #[test]
    fn each_part_tells_its_own_change() {
        let d = CitationLike {
            n_nodes: 300,
            ..Default::default()
        }
        .generate(1)
        .unwrap();
        let h = ContentHash::of(&d);
        assert_eq!(h, ContentHash::of(&d.clone()));
        // Dense or sparse storage: the same values hash the same.
        let mut dense = d.clone();
        dense.features = Features::dense(d.features.to_dense());
        assert_eq!(ContentHash::of(&dense), h);
        let mut other = d.clone();
        other.labels[7] = (other.labels[7] + 1) % other.n_classes as u32;
        assert_eq!(ContentHash::of(&other).differences(&h), vec!["labels"]);
        let mut x = d.to_owned();
        let mut xd = d.features.to_dense();
        xd[[3, 4]] += 1.0;
        x.features = Features::dense(xd);
        assert_eq!(ContentHash::of(&x).differences(&h), vec!["features"]);
        let d2 = CitationLike {
            n_nodes: 300,
            ..Default::default()
        }
        .generate(2)
        .unwrap();
        assert!(ContentHash::of(&d2).differences(&h).contains(&"graph"));
        let mut extra = BTreeMap::new();
        h.record(&mut extra);
        assert_eq!(ContentHash::from_extra(&extra), Some(Ok(h)));
        extra.insert(KEYS[2].into(), "xyz".into());
        assert!(ContentHash::from_extra(&extra).unwrap().is_err());
        assert_eq!(ContentHash::from_extra(&BTreeMap::new()), None);
    }
}
