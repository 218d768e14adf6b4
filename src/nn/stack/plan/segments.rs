//! Activation checkpointing's segments: the node ranges recomputed before their backward
//! calls.

use std::ops::Range;

use crate::nn::layer::Spec;
use crate::nn::stack::Checkpointing;

/// The segments of `strategy` over the hidden `blocks`: k consecutive blocks a segment, but
/// for those whose recomputation would free nothing (where no node keeps its input or saves
/// values for backward: a GCN block of ReLU and dropout alone saves its 2-bit codes, and
/// recomputing it would keep the convolution's output instead).
pub(crate) fn segments(
    blocks: &[Range<usize>],
    strategy: Checkpointing,
    specs: &[Spec],
) -> Vec<Range<usize>> {
    match strategy {
        Checkpointing::None => Vec::new(),
        Checkpointing::Every(k) => blocks
            .chunks(k.max(1))
            .map(|c| c[0].start..c[c.len() - 1].end)
            .filter(|r| {
                specs[r.clone()]
                    .iter()
                    .any(|s| s.keeps_input || s.saved.f > 0)
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::layer::Req;

    #[test]
    fn blocks_grouped_by_k_and_useless_segments_dropped() {
        let keeps = Spec {
            keeps_input: true,
            ..Spec::new(4)
        };
        let saves = Spec {
            saved: Req::f(10),
            ..Spec::new(4)
        };
        let codes_only = Spec {
            saved: Req {
                u8: 5,
                ..Req::default()
            },
            ..Spec::new(4)
        };
        // Blocks 1..3, 3..5, 5..7; node 5 and 6 only save codes.
        let specs = [
            keeps, keeps, saves, codes_only, keeps, codes_only, codes_only,
        ];
        let blocks = [1..3, 3..5, 5..7];
        assert!(segments(&blocks, Checkpointing::None, &specs).is_empty());
        assert_eq!(
            segments(&blocks, Checkpointing::Every(1), &specs),
            vec![1..3, 3..5]
        );
        assert_eq!(
            segments(&blocks, Checkpointing::Every(2), &specs),
            vec![1..5]
        );
        assert_eq!(
            segments(&blocks, Checkpointing::Every(0), &specs),
            vec![1..3, 3..5],
            "k = 0 is taken as 1"
        );
    }
}
