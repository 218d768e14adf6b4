//! [`DataId`]: the identity of what a model computes from — an Â or a feature matrix.
//!
//! Every adjacency ([`Propagate::id`](crate::Propagate::id)) and every
//! [`Features`](crate::data::Features) carries one. A new value, or a value whose contents change, gets a
//! fresh id; a clone keeps its original's (the same contents). So two equal ids name the same
//! contents within a process, and what a model keeps between passes (the Â·X of a first
//! convolution, SGC's Â^K·X, the dropped copy of sparse features) is keyed on the ids it was
//! computed from, never on the caller remembering to release it.

use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};

/// The identity of an Â's or a feature matrix's contents (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DataId(NonZeroU64);

static NEXT: AtomicU64 = AtomicU64::new(1);

impl DataId {
    /// An id no other value of this process has had.
    pub fn fresh() -> Self {
        let v = NEXT.fetch_add(1, Ordering::Relaxed);
        // 2⁶⁴ ids are never handed out (one per nanosecond would take 584 years).
        DataId(NonZeroU64::new(v).unwrap_or(NonZeroU64::MIN))
    }

    /// The id as a number (for messages).
    pub fn get(self) -> u64 {
        self.0.get()
    }
}

impl std::fmt::Display for DataId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "#{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::DataId;

    #[test]
    fn ids_are_fresh() {
        let (a, b) = (DataId::fresh(), DataId::fresh());
        assert_ne!(a, b);
        assert_eq!(a, a.clone());
        assert!(a.get() > 0 && b.get() > 0);
    }
}
