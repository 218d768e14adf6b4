//! Dropout masks: inverted-dropout factors drawn from a keyed, counter-based stream
//! ([`MASK_STREAM`]), so that any part of a mask can be drawn by any thread or process with the
//! same bits, and ReLU with dropout fused into one pass that keeps the codes
//! ([`relu_dropout_at`]).

use ndarray::ArrayViewMut2;
use rayon::prelude::*;

use super::codes::{code_bytes, pack4, CODES_PER_BYTE};
use crate::kernels::profile::{span, Phase, Work};
use crate::{Par, Scalar};

/// Fills `mask` with inverted-dropout factors: 0 with probability `p`, `1/(1-p)` otherwise,
/// drawing one `u64` from `rng` (the mask's key); the same as [`fill_dropout_mask`] under
/// [`Par::Seq`].
///
/// Element k is dropped when word k of the key's stream ([`MASK_STREAM`]) is below
/// ⌊p·2³²⌉, so p is honoured to within 2⁻³². Each word is computed from the key and k alone (a
/// counter-based stream), so any part of a mask can be drawn by any thread or process with the
/// same bits, and a mask costs one `u64` of `rng`'s stream whatever its length.
///
/// # Panics
/// If `p` is not in `[0, 1)`.
#[track_caller]
pub fn dropout_mask<F: Scalar, R: rand::Rng + ?Sized>(rng: &mut R, p: f64, mask: &mut [F]) {
    let len = mask.len();
    fill_dropout_mask_at(rng, p, mask, 0, len, Par::Seq);
}

/// [`dropout_mask`], drawn in `MASK_CHUNK`-element tasks in parallel under [`Par::Rayon`]
/// (the same bits for any `par`). Allocates nothing.
///
/// # Panics
/// If `p` is not in `[0, 1)`.
#[track_caller]
pub fn fill_dropout_mask<F: Scalar, R: rand::Rng + ?Sized>(
    rng: &mut R,
    p: f64,
    mask: &mut [F],
    par: Par,
) {
    let len = mask.len();
    fill_dropout_mask_at(rng, p, mask, 0, len, par);
}

/// The stream dropout masks take their words from: word e of the mask of key `key` is half
/// e mod 2 (the low half first) of output ⌊e/2⌋ of SplitMix64 seeded with `key` (Steele, Lea
/// and Flood 2014; the generator of `java.util.SplittableRandom`), that is of
/// mix(key + (⌊e/2⌋ + 1)·0x9E3779B97F4A7C15) with Stafford's "Mix13" finaliser. The key is one
/// `u64` of the layer's ChaCha8 stream, so masks are as reproducible as that stream.
pub const MASK_STREAM: &str = "SplitMix64";

/// Output `j` (from 0) of SplitMix64 seeded with `key` ([`MASK_STREAM`]).
#[inline(always)]
fn splitmix64(key: u64, j: u64) -> u64 {
    let mut z = key.wrapping_add(j.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Words `e0 .. e0 + n` of the mask stream of `key` (`n ≤ MASK_WORDS`), written into `buf`.
#[inline(always)]
fn mask_words(key: u64, e0: usize, n: usize, buf: &mut [u32; MASK_WORDS + 2]) -> &[u32] {
    let off = e0 % 2;
    let j0 = (e0 / 2) as u64;
    let pairs = (off + n).div_ceil(2);
    for (i, w) in buf[..2 * pairs].chunks_exact_mut(2).enumerate() {
        let z = splitmix64(key, j0 + i as u64);
        w[0] = z as u32;
        w[1] = (z >> 32) as u32;
    }
    &buf[off..off + n]
}

/// Which words keep their element, and the two factors `[0, keep]` of dropout at rate `p < 1`:
/// a word w keeps its element when `w ≥ threshold` with threshold = ⌊p·2³²⌉ (at most 2³²,
/// when nothing is kept). The factors are picked by index, branch-free: a dropped element is a
/// coin flip, so a branch would mispredict.
#[derive(Clone, Copy)]
struct Keep<F> {
    /// min(threshold, 2³² − 1).
    min_word: u32,
    /// threshold ≤ 2³² − 1 (else no word keeps its element).
    any: bool,
    vals: [F; 2],
}

impl<F: Scalar> Keep<F> {
    fn new(p: f64) -> Self {
        let threshold = (p * 4_294_967_296.0).round() as u64;
        Keep {
            min_word: u32::try_from(threshold).unwrap_or(u32::MAX),
            any: threshold <= u64::from(u32::MAX),
            vals: [F::zero(), F::from_f64_lossy(1.0 / (1.0 - p))],
        }
    }
    /// The factor of the element of word `w`.
    #[inline(always)]
    fn factor(self, w: u32) -> F {
        self.vals[usize::from(self.any & (w >= self.min_word))]
    }
}

/// Random words a mask task computes at a time (even, a multiple of [`CODES_PER_BYTE`]).
const MASK_WORDS: usize = 256;

/// Mask elements per parallel task of [`fill_dropout_mask`] and [`relu_dropout_at`] (a
/// multiple of [`CODES_PER_BYTE`], so a task never splits a byte of codes).
pub(crate) const MASK_CHUNK: usize = 1 << 15;
const _: () =
    assert!(MASK_CHUNK.is_multiple_of(MASK_WORDS) && MASK_WORDS.is_multiple_of(CODES_PER_BYTE));
const _: () = assert!(MASK_WORDS.is_multiple_of(2));
const _: () = assert!(crate::kernels::rows::CHUNK_ELEMS.is_multiple_of(CODES_PER_BYTE));

/// Elements `before .. before + mask.len()` of the dropout mask of a sequence of `total`
/// elements drawn from `rng` by [`fill_dropout_mask`]: what one process of a row-partitioned
/// run draws for its rows, so that every element gets the mask it gets in one process (every
/// process draws the same key: their streams are alike). `(0, mask.len())` is the whole draw.
/// One `u64` of `rng` is drawn, whatever `before` and `total`.
///
/// # Panics
/// If `p` is not in `[0, 1)` or `before + mask.len() > total`.
#[track_caller]
pub fn fill_dropout_mask_at<F: Scalar, R: rand::Rng + ?Sized>(
    rng: &mut R,
    p: f64,
    mask: &mut [F],
    before: usize,
    total: usize,
    par: Par,
) {
    check_part("fill_dropout_mask_at", p, before, mask.len(), total);
    let _span = span(Phase::Elementwise, || Work::Stream {
        bytes: std::mem::size_of_val(mask),
    });
    draw_factors(rng.next_u64(), Keep::<F>::new(p), mask, None, before, par);
}

/// out ← x ⊙ M in one pass, M the mask [`fill_dropout_mask_at`] draws from `rng` for elements
/// `before .. before + out.len()` of `total` (one `u64` of `rng`): bit for bit that mask
/// written and then multiplied into `x`, without writing and reading the mask's factors (8
/// bytes an element less to move).
///
/// # Panics
/// If `p` is not in `[0, 1)`, `x` and `out` differ in length or `before + out.len() > total`.
#[track_caller]
pub fn dropout_into_at<F: Scalar, R: rand::Rng + ?Sized>(
    rng: &mut R,
    p: f64,
    x: &[F],
    out: &mut [F],
    before: usize,
    total: usize,
    par: Par,
) {
    assert_eq!(x.len(), out.len(), "dropout_into_at: x vs out");
    check_part("dropout_into_at", p, before, out.len(), total);
    let _span = span(Phase::Elementwise, || Work::Stream {
        bytes: 2 * std::mem::size_of_val(out),
    });
    draw_factors(rng.next_u64(), Keep::<F>::new(p), out, Some(x), before, par);
}

/// The checks of a dropout kernel `what` drawing elements `before .. before + len` of a mask of
/// `total` at rate `p`.
#[track_caller]
fn check_part(what: &str, p: f64, before: usize, len: usize, total: usize) {
    assert!((0.0..1.0).contains(&p), "{what}: p = {p} not in [0, 1)");
    assert!(
        before + len <= total,
        "{what}: elements {before}..{} of {total}",
        before + len
    );
}

/// The factors of mask `key` for elements `before ..` into `out`, each times the element of
/// `x` at its place when given: task c holds elements `before + c·MASK_CHUNK ..`, whichever
/// thread draws it.
fn draw_factors<F: Scalar>(
    key: u64,
    keep: Keep<F>,
    out: &mut [F],
    x: Option<&[F]>,
    before: usize,
    par: Par,
) {
    let task = |(c, chunk): (usize, &mut [F])| {
        let x = x.map(|x| &x[c * MASK_CHUNK..c * MASK_CHUNK + chunk.len()]);
        crate::kernels::raw::widest(
            #[inline(always)]
            || {
                let mut buf = [0u32; MASK_WORDS + 2];
                let e = before + c * MASK_CHUNK;
                for (b, mb) in chunk.chunks_mut(MASK_WORDS).enumerate() {
                    let words = mask_words(key, e + b * MASK_WORDS, mb.len(), &mut buf);
                    match x {
                        None => {
                            for (m, &w) in mb.iter_mut().zip(words) {
                                *m = keep.factor(w);
                            }
                        }
                        Some(x) => {
                            let xb = &x[b * MASK_WORDS..b * MASK_WORDS + mb.len()];
                            for ((m, &w), &v) in mb.iter_mut().zip(words).zip(xb) {
                                *m = v * keep.factor(w);
                            }
                        }
                    }
                }
            },
        )
    };
    match par {
        Par::Seq => out.chunks_mut(MASK_CHUNK).enumerate().for_each(task),
        Par::Rayon => out.par_chunks_mut(MASK_CHUNK).enumerate().for_each(task),
    }
}

/// [`fill_dropout_mask_at`] and [`bias_relu_dropout_fold`](super::bias_relu_dropout_fold) (no bias)
/// in one pass, without the mask: h ← ReLU(h) ⊙ mask and the packed codes as there, element k of
/// `h` (row-major) taking element `before + k` of the mask of `total` elements drawn from `rng`
/// (one `u64` of it). Bit for bit the two kernels run one after the other, for any `par`; the
/// mask's n × d factors are never written (4 bytes an element less to write and read).
///
/// # Panics
/// If `p` is not in `[0, 1)`, `codes` is shorter than [`code_bytes`]`(h.len())` or
/// `before + h.len() > total`.
#[track_caller]
pub fn relu_dropout_at<F: Scalar, R: rand::Rng + ?Sized>(
    rng: &mut R,
    p: f64,
    mut h: ArrayViewMut2<'_, F>,
    codes: &mut [u8],
    before: usize,
    total: usize,
    par: Par,
) {
    assert!(
        (0.0..1.0).contains(&p),
        "relu_dropout_at: p = {p} not in [0, 1)"
    );
    assert!(
        codes.len() >= code_bytes(h.len()) && before + h.len() <= total,
        "relu_dropout_at: h {:?}, {} code bytes, elements {before}..{} of {total}",
        h.dim(),
        codes.len(),
        before + h.len()
    );
    let _span = span(Phase::Elementwise, || Work::Stream {
        bytes: h.len() * (2 * std::mem::size_of::<F>()) + code_bytes(h.len()),
    });
    let keep = Keep::<F>::new(p);
    let key = rng.next_u64();
    const CB: usize = MASK_WORDS / CODES_PER_BYTE;
    let len = h.len();
    let codes = &mut codes[..code_bytes(len)];
    match h.as_slice_mut() {
        Some(hs) => {
            // Task c holds elements before + c·MASK_CHUNK.., whichever thread draws it.
            let task = |(c, (hc, cc)): (usize, (&mut [F], &mut [u8]))| {
                crate::kernels::raw::widest(
                    #[inline(always)]
                    || {
                        let mut buf = [0u32; MASK_WORDS + 2];
                        let e = before + c * MASK_CHUNK;
                        for (b, (hb, cb)) in
                            hc.chunks_mut(MASK_WORDS).zip(cc.chunks_mut(CB)).enumerate()
                        {
                            let words = mask_words(key, e + b * MASK_WORDS, hb.len(), &mut buf);
                            fold_block(words, keep, hb, cb);
                        }
                    },
                )
            };
            const CC: usize = MASK_CHUNK / CODES_PER_BYTE;
            match par {
                Par::Seq => hs
                    .chunks_mut(MASK_CHUNK)
                    .zip(codes.chunks_mut(CC))
                    .enumerate()
                    .for_each(task),
                Par::Rayon => hs
                    .par_chunks_mut(MASK_CHUNK)
                    .zip(codes.par_chunks_mut(CC))
                    .enumerate()
                    .for_each(task),
            }
        }
        None => {
            // Row-major element order, a block at a time through a contiguous copy.
            let d = h.ncols();
            let mut buf = [0u32; MASK_WORDS + 2];
            let mut tmp = [F::zero(); MASK_WORDS];
            for (b, cb) in codes.chunks_mut(CB).enumerate() {
                let k0 = b * MASK_WORDS;
                let n = (len - k0).min(MASK_WORDS);
                let at = |k: usize| ((k0 + k) / d, (k0 + k) % d);
                for (k, t) in tmp[..n].iter_mut().enumerate() {
                    *t = h[at(k)];
                }
                let words = mask_words(key, before + k0, n, &mut buf);
                fold_block(words, keep, &mut tmp[..n], cb);
                for (k, &t) in tmp[..n].iter().enumerate() {
                    h[at(k)] = t;
                }
            }
        }
    }
}

/// One block of [`relu_dropout_at`] (at most [`MASK_WORDS`] elements, its codes starting a
/// byte): v ← ReLU(v)·m with m picked by each element's word, and the packed codes.
#[inline(always)]
fn fold_block<F: Scalar>(words: &[u32], keep: Keep<F>, h: &mut [F], codes: &mut [u8]) {
    // One code a byte first (the element loop the compiler vectorises), then packed.
    let mut one = [0u8; MASK_WORDS];
    for ((v, &w), c) in h.iter_mut().zip(words).zip(&mut one) {
        let m = keep.factor(w);
        let t = [F::zero(), *v][usize::from(*v > F::zero())];
        *v = t * m;
        *c = u8::from(t > F::zero()) * (1 + u8::from(m == F::zero()));
    }
    one[h.len()..].fill(0);
    for (c, o) in codes.iter_mut().zip(one.chunks_exact(CODES_PER_BYTE)) {
        *c = pack4(u32::from_le_bytes([o[0], o[1], o[2], o[3]]));
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::dropout_mask;

    /// The fused ReLU·dropout gives the bits, the codes and the stream position of the mask
    /// drawn first and folded after, for any part of a longer mask, layout and `par`.
    #[test]
    fn relu_dropout_at_is_the_mask_then_the_fold() {
        use ndarray::{s, Array2};

        use super::{fill_dropout_mask_at, relu_dropout_at};
        use crate::kernels::elementwise::{bias_relu_dropout_fold, code_at, code_bytes};
        use crate::kernels::elementwise::{DROP_KEPT, DROP_ZERO, RELU_OFF};
        use crate::Par;
        let (n, d) = (301, 257); // more than two MASK_CHUNKs, odd sizes
        let h0 = Array2::from_shape_fn((n, d), |(i, c)| ((i * 7 + c * 13) % 29) as f32 - 14.5);
        for (before, total) in [(0, n * d), (5, n * d + 5), (1000, n * d + 2001)] {
            for p in [0.0, 0.1, 0.5] {
                let mut r1 = ChaCha8Rng::seed_from_u64(9);
                let mut mask = vec![0.0f32; n * d];
                fill_dropout_mask_at(&mut r1, p, &mut mask, before, total, Par::Seq);
                let mut h1 = h0.clone();
                let mut c1 = vec![0xAAu8; code_bytes(n * d)];
                let m = ndarray::ArrayView2::from_shape((n, d), &mask[..]).unwrap();
                bias_relu_dropout_fold(h1.view_mut(), None, m, &mut c1);
                // The codes by their definition, element by element (row-major).
                for (k, (&v, &mk)) in h0.iter().zip(&mask).enumerate() {
                    let want = match (v > 0.0, mk == 0.0) {
                        (false, _) => RELU_OFF,
                        (true, false) => DROP_KEPT,
                        (true, true) => DROP_ZERO,
                    };
                    assert_eq!(code_at(&c1, k), want, "element {k}");
                }
                assert_eq!(c1.last().map(|b| b >> (2 * ((n * d) % 4))), Some(0));
                for par in [Par::Seq, Par::Rayon] {
                    let mut r2 = ChaCha8Rng::seed_from_u64(9);
                    let mut h2 = h0.clone();
                    let mut c2 = vec![7u8; code_bytes(n * d)];
                    relu_dropout_at(&mut r2, p, h2.view_mut(), &mut c2, before, total, par);
                    let bits = |a: &Array2<f32>| a.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&h1), bits(&h2), "{before} {p} {par:?}");
                    assert_eq!(c1, c2);
                    assert_eq!(r1.get_word_pos(), r2.get_word_pos());
                }
                // A strided h (every other column of a wider array) takes the same elements.
                let mut wide = Array2::<f32>::zeros((n, 2 * d));
                wide.slice_mut(s![.., ..;2]).assign(&h0);
                let mut c3 = vec![0xFFu8; code_bytes(n * d)];
                let mut r3 = ChaCha8Rng::seed_from_u64(9);
                relu_dropout_at(
                    &mut r3,
                    p,
                    wide.slice_mut(s![.., ..;2]),
                    &mut c3,
                    before,
                    total,
                    Par::Rayon,
                );
                assert!(wide
                    .slice(s![.., ..;2])
                    .iter()
                    .zip(h1.iter())
                    .all(|(a, b)| a.to_bits() == b.to_bits()));
                assert_eq!(c1, c3);
                assert_eq!(r1.get_word_pos(), r3.get_word_pos());
            }
        }
    }

    /// The mask by its definition ([`super::MASK_STREAM`]), element by element: one key from
    /// the stream, then SplitMix64 from that key, one output per pair of elements, low half
    /// first, written out without the kernels' blocks and chunks.
    fn reference_mask(rng: &mut ChaCha8Rng, p: f64, mask: &mut [f32]) {
        use rand::Rng;
        let keep = (1.0 / (1.0 - p)) as f32;
        let threshold = (p * 4_294_967_296.0).round() as u64;
        let key = rng.next_u64();
        let mut state = key;
        let mut next = || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let mut word = 0u64;
        for (e, m) in mask.iter_mut().enumerate() {
            if e % 2 == 0 {
                word = next();
            }
            let w = (word >> (32 * (e % 2))) as u32;
            *m = if u64::from(w) >= threshold { keep } else { 0.0 };
        }
    }

    /// SplitMix64's published outputs for seed 1234567 (as in its reference implementations).
    #[test]
    fn splitmix64_matches_its_reference_outputs() {
        assert_eq!(super::splitmix64(1_234_567, 0), 6_457_827_717_110_365_317);
        assert_eq!(super::splitmix64(1_234_567, 1), 3_203_168_211_198_807_973);
        assert_eq!(super::splitmix64(1_234_567, 2), 9_817_491_932_198_370_423);
    }

    /// The kernels' blocked, chunked, parallel draws give the mask of the definition for any
    /// length, `par` and stream position, and draw exactly one `u64` of the stream.
    #[test]
    fn masks_are_the_definition_for_any_par_and_draw_one_u64() {
        use super::{fill_dropout_mask, MASK_CHUNK};
        use crate::Par;
        use rand::Rng;
        for par in [Par::Seq, Par::Rayon] {
            for skip in [0usize, 1, 3] {
                for len in [
                    0,
                    1,
                    7,
                    255,
                    257,
                    MASK_CHUNK,
                    MASK_CHUNK + 1,
                    3 * MASK_CHUNK + 7,
                ] {
                    let mut a = ChaCha8Rng::seed_from_u64(9);
                    for _ in 0..skip {
                        a.next_u32();
                    }
                    let (mut b, mut c) = (a.clone(), a.clone());
                    let (mut ma, mut mb) = (vec![f32::NAN; len], vec![f32::NAN; len]);
                    let mut mc = vec![f32::NAN; len];
                    reference_mask(&mut a, 0.3, &mut ma);
                    dropout_mask(&mut b, 0.3, &mut mb);
                    fill_dropout_mask(&mut c, 0.3, &mut mc, par);
                    assert_eq!(ma, mb, "{par:?}, skip {skip}, len {len}");
                    assert_eq!(ma, mc, "{par:?}, skip {skip}, len {len}");
                    let next = a.next_u64();
                    assert_eq!((b.next_u64(), c.next_u64()), (next, next));
                }
            }
        }
    }

    #[test]
    fn dropout_mask_rate_values_and_replay() {
        for p in [0.0, 0.1, 0.5, 0.8] {
            for len in [0usize, 1, 2, 7, 100_001] {
                let mut a = vec![f32::NAN; len];
                let mut b = vec![f32::NAN; len];
                dropout_mask(&mut ChaCha8Rng::seed_from_u64(3), p, &mut a);
                dropout_mask(&mut ChaCha8Rng::seed_from_u64(3), p, &mut b);
                assert_eq!(a, b, "same RNG state, same mask");
                let keep = (1.0 / (1.0 - p)) as f32;
                assert!(a.iter().all(|&m| m == 0.0 || m == keep));
                if len > 10_000 {
                    let dropped = a.iter().filter(|&&m| m == 0.0).count() as f64 / len as f64;
                    // 5 binomial standard deviations.
                    let sd = (p * (1.0 - p) / len as f64).sqrt();
                    assert!((dropped - p).abs() <= 5.0 * sd + 1e-12, "p {p}: {dropped}");
                }
            }
        }
    }

    /// Successive masks of one stream, and neighbouring elements of one mask, are independent
    /// as far as their counts can tell: each pair agrees in p² + (1−p)² of the elements, to
    /// within 5 standard deviations.
    #[test]
    fn successive_masks_and_neighbours_are_independent() {
        let (p, len) = (0.5, 200_000);
        let mut r = ChaCha8Rng::seed_from_u64(21);
        let (mut a, mut b) = (vec![0f32; len], vec![0f32; len]);
        dropout_mask(&mut r, p, &mut a);
        dropout_mask(&mut r, p, &mut b);
        let agree = |x: &[f32], y: &[f32]| {
            x.iter().zip(y).filter(|(u, v)| u == v).count() as f64 / x.len() as f64
        };
        let want = p * p + (1.0 - p) * (1.0 - p);
        let sd = (want * (1.0 - want) / len as f64).sqrt();
        for (what, got) in [
            ("successive masks", agree(&a, &b)),
            ("neighbours", agree(&a[..len - 1], &a[1..])),
            ("pairs' halves", {
                let (ev, od): (Vec<f32>, Vec<f32>) =
                    a.chunks_exact(2).map(|c| (c[0], c[1])).unzip();
                agree(&ev, &od)
            }),
        ] {
            assert!(
                (got - want).abs() <= 5.0 * sd,
                "{what}: agree {got}, want {want}"
            );
        }
    }

    /// At a rate so close to 1 that ⌊p·2³²⌉ = 2³², no word keeps its element; just below
    /// 2³², only the largest words do.
    #[test]
    fn rates_at_the_top_of_the_word_range() {
        let all = 1.0 - 2f64.powi(-34);
        let mut m = vec![f64::NAN; 10_000];
        dropout_mask(&mut ChaCha8Rng::seed_from_u64(1), all, &mut m);
        assert!(m.iter().all(|&v| v == 0.0));
        let k = super::Keep::<f64>::new(1.0 - 2.25 * 2f64.powi(-32));
        assert_eq!((k.min_word, k.any), (u32::MAX - 1, true));
        assert_eq!(k.factor(u32::MAX - 2), 0.0);
        assert!(k.factor(u32::MAX - 1) > 1e9 && k.factor(u32::MAX) > 1e9);
        let none = super::Keep::<f64>::new(0.0);
        assert_eq!(none.factor(0), 1.0);
    }

    #[test]
    fn a_slice_of_the_mask_is_the_slice_of_the_whole_draw() {
        use super::{fill_dropout_mask, fill_dropout_mask_at};
        use crate::Par;
        use rand::Rng;
        let mut whole = vec![0.0f32; 1001];
        let mut r = ChaCha8Rng::seed_from_u64(7);
        fill_dropout_mask(&mut r, 0.5, &mut whole, Par::Seq);
        let after = r.next_u64();
        for (a, b) in [(0, 1001), (0, 300), (301, 1001), (333, 334), (1001, 1001)] {
            let mut part = vec![0.0f32; b - a];
            let mut r = ChaCha8Rng::seed_from_u64(7);
            fill_dropout_mask_at(&mut r, 0.5, &mut part, a, 1001, Par::Rayon);
            assert_eq!(part, whole[a..b], "{a}..{b}");
            assert_eq!(r.next_u64(), after);
        }
    }

    #[test]
    fn dropout_into_is_the_mask_times_x_for_any_par_and_part() {
        use super::{dropout_into_at, fill_dropout_mask_at, MASK_CHUNK};
        use crate::Par;
        use rand::Rng;
        let total = 2 * MASK_CHUNK + 777;
        let x: Vec<f32> = (0..total).map(|i| (i as f32 * 0.37).sin() + 2.0).collect();
        for p in [0.0, 0.1, 0.5, 0.9] {
            for (a, b) in [
                (0, total),
                (3, MASK_CHUNK + 5),
                (MASK_CHUNK - 1, total),
                (9, 9),
            ] {
                let mut want = vec![0.0f32; b - a];
                let mut r = ChaCha8Rng::seed_from_u64(11);
                fill_dropout_mask_at(&mut r, p, &mut want, a, total, Par::Seq);
                let after = r.next_u64();
                for (w, &v) in want.iter_mut().zip(&x[a..b]) {
                    *w *= v;
                }
                for par in [Par::Seq, Par::Rayon] {
                    let mut got = vec![f32::NAN; b - a];
                    let mut r = ChaCha8Rng::seed_from_u64(11);
                    dropout_into_at(&mut r, p, &x[a..b], &mut got, a, total, par);
                    let same = got
                        .iter()
                        .zip(&want)
                        .all(|(g, w)| g.to_bits() == w.to_bits());
                    assert!(same, "p {p}, {a}..{b}, {par:?}");
                    assert_eq!(r.next_u64(), after);
                }
            }
        }
    }
}
