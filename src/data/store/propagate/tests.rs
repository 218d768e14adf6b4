//! Blocks of a few entries and rows against the in-memory path.
use super::*;
use crate::data::store::{write_store, FeatureDtype};
use crate::data::synthetic::Preset;
use crate::data::Features;

/// Blocks of a few entries or rows (rows longer than a block are blocks of their own) give
/// the in-memory bits, in one tile or several.
#[test]
fn small_blocks_and_long_rows_give_the_same_bits() {
    let dir = std::env::temp_dir().join(format!("sparse-gcn-prop-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut d = Preset::CoraLike.generate(2).unwrap();
    let x = d
        .features
        .to_dense()
        .slice(ndarray::s![.., ..24])
        .to_owned();
    d.features = Features::dense(x);
    let st = dir.join("s");
    write_store(&d, None, &st, FeatureDtype::F32).unwrap();
    let store = Store::open(&st).unwrap();
    let longest = (0..d.graph.n_nodes())
        .map(|i| d.graph.degree(i))
        .max()
        .unwrap();
    assert!(longest > 7, "some rows span several small blocks");
    for every_hop in [false, true] {
        let o = PropagateOptions {
            k: 2,
            every_hop,
            norm: Norm::Symmetric,
            row_normalize: Some(true),
            keep: KeepRows::All,
            memory_limit: 1 << 30,
        };
        let want = propagate_in_memory(&store.dataset(None).unwrap(), &o).unwrap();
        for (limits, memory_limit) in [
            (Limits { nnz: 7, rows: 5 }, 1 << 30),
            (Limits { nnz: 1, rows: 1 }, 1 << 30),
            (
                Limits { nnz: 64, rows: 3 },
                fixed_bytes(2708, 24, 2708, 3, 200, LIMITS) + 8 * 2708 * 5,
            ),
        ] {
            let o = PropagateOptions {
                memory_limit,
                ..o.clone()
            };
            let got = propagate_in(&store, &o, &|_| {}, limits).unwrap();
            assert_eq!(got.rows, want.rows);
            let bits = |p: &Propagated| p.x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert!(bits(&got) == bits(&want), "{limits:?}, {} tiles", got.tiles);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
