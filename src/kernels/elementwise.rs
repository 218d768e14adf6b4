//! Element-wise kernels: bias, column sums, ReLU and its mask, dropout masks.

use ndarray::{ArrayView1, ArrayView2, ArrayViewMut1, ArrayViewMut2, Axis, Zip};
use rayon::prelude::*;

use super::profile::{span, Phase, Work};
use crate::{Par, Scalar};

/// out ← out + 1·bᵀ (adds `b` to every row).
///
/// # Panics
/// If `out.ncols() != b.len()`.
#[track_caller]
pub fn add_bias<F: Scalar>(out: ArrayViewMut2<'_, F>, b: ArrayView1<'_, F>, par: Par) {
    assert_eq!(
        out.ncols(),
        b.len(),
        "add_bias: out {:?}, b {}",
        out.dim(),
        b.len()
    );
    let _span = span(Phase::Elementwise, || Work::Stream {
        bytes: 2 * out.len() * std::mem::size_of::<F>(),
    });
    super::rows::for_each_row(out, par, |_, mut row| row += &b);
}

/// out ← Gᵀ·1 + β·out (column sums, in row order: deterministic).
///
/// # Panics
/// If `out.len() != g.ncols()`.
#[track_caller]
pub fn col_sum<F: Scalar>(g: ArrayView2<'_, F>, beta: F, mut out: ArrayViewMut1<'_, F>) {
    assert_eq!(
        out.len(),
        g.ncols(),
        "col_sum: g {:?}, out {}",
        g.dim(),
        out.len()
    );
    let _span = span(Phase::Reduce, || Work::Stream {
        bytes: g.len() * std::mem::size_of::<F>(),
    });
    if beta == F::zero() {
        out.fill(F::zero());
    } else {
        out.map_inplace(|o| *o *= beta);
    }
    for row in g.axis_iter(Axis(0)) {
        out += &row;
    }
}

/// z ← max(z, 0). NaN becomes 0, like every other non-positive value.
pub fn relu_inplace<F: Scalar>(z: ArrayViewMut2<'_, F>, par: Par) {
    let _span = span(Phase::Elementwise, || Work::Stream {
        bytes: 2 * z.len() * std::mem::size_of::<F>(),
    });
    // Branch-free: a select, not a data-dependent jump (the signs of activations are close to
    // random, so a branch mispredicts half the time). `NaN > 0` is false, so NaN maps to 0.
    super::rows::for_each_row(z, par, |_, mut row| {
        row.map_inplace(|v| *v = [F::zero(), *v][usize::from(*v > F::zero())]);
    });
}

/// dz ← dz ⊙ 𝟙(a > 0), with `a` the ReLU output (ReLU'(0) = 0).
///
/// # Panics
/// If the shapes differ.
#[track_caller]
pub fn relu_backward_inplace<F: Scalar>(mut dz: ArrayViewMut2<'_, F>, a: ArrayView2<'_, F>) {
    assert_eq!(
        dz.dim(),
        a.dim(),
        "relu_backward: dz {:?}, a {:?}",
        dz.dim(),
        a.dim()
    );
    let _span = span(Phase::Elementwise, || Work::Stream {
        bytes: 3 * dz.len() * std::mem::size_of::<F>(),
    });
    // Branch-free select, as in `relu_inplace` (NaN in `a` counts as not positive).
    Zip::from(&mut dz)
        .and(&a)
        .for_each(|g, &v| *g = [F::zero(), *g][usize::from(v > F::zero())]);
}

/// The epilogue of a hidden layer without dropout, one pass over `z`: z ← max(z + 1·bᵀ, 0)
/// (bias optional). Bit-identical to [`add_bias`] then [`relu_inplace`].
///
/// # Panics
/// If `b` does not match `z`'s width.
#[track_caller]
pub fn bias_relu<F: Scalar>(mut z: ArrayViewMut2<'_, F>, b: Option<ArrayView1<'_, F>>) {
    assert!(
        b.is_none_or(|b| b.len() == z.ncols()),
        "bias_relu: z {:?}, b {:?}",
        z.dim(),
        b.map(|b| b.len())
    );
    let _span = span(Phase::Elementwise, || Work::Stream {
        bytes: 2 * z.len() * std::mem::size_of::<F>(),
    });
    let relu = |v: F| [F::zero(), v][usize::from(v > F::zero())];
    match b {
        Some(b) => {
            for mut zr in z.axis_iter_mut(Axis(0)) {
                Zip::from(&mut zr)
                    .and(&b)
                    .for_each(|v, &bk| *v = relu(*v + bk));
            }
        }
        None => z.map_inplace(|v| *v = relu(*v)),
    }
}

/// The code [`bias_relu_dropout_fold`] keeps per element: the ReLU output was not positive.
pub const RELU_OFF: u8 = 0;
/// The code of a positive ReLU output that dropout kept (factor `keep`).
pub const DROP_KEPT: u8 = 1;
/// The code of a positive ReLU output that dropout dropped (factor 0).
pub const DROP_ZERO: u8 = 2;

/// Codes per byte: the element-wise kernels keep 2-bit codes ([`RELU_OFF`], [`DROP_KEPT`],
/// [`DROP_ZERO`]; ReLU alone or dropout alone use 0 and 1), element k of an array (row-major)
/// in bits 2·(k mod 4) and 2·(k mod 4) + 1 of byte k / 4. A quarter of a byte an element: for
/// products-like 3 × 256, 0.94 GB less than a byte each.
pub const CODES_PER_BYTE: usize = 4;

/// Bytes of the codes of `len` elements.
pub const fn code_bytes(len: usize) -> usize {
    len.div_ceil(CODES_PER_BYTE)
}

/// The code of element `k`.
///
/// # Panics
/// If `codes` has no byte for element `k`.
#[inline]
pub fn code_at(codes: &[u8], k: usize) -> u8 {
    (codes[k / CODES_PER_BYTE] >> (2 * (k % CODES_PER_BYTE))) & 3
}

/// Four codes, one a byte of `w` (little-endian, each < 4), packed into one byte.
#[inline(always)]
fn pack4(w: u32) -> u8 {
    let x = w & 0x0303_0303;
    (x | x >> 6 | x >> 12 | x >> 18) as u8
}

/// The four codes of a byte, one a byte of the result (little-endian): [`pack4`]'s inverse.
#[inline(always)]
fn unpack4(byte: u8) -> u32 {
    let w = u32::from(byte);
    (w | w << 6 | w << 12 | w << 18) & 0x0303_0303
}

/// Packs the codes `code(k)` of elements `k` in `0..len` into `out` (whole bytes written, the
/// unused bits of a last partial byte 0).
#[inline]
fn pack_codes(out: &mut [u8], len: usize, mut code: impl FnMut(usize) -> u8) {
    for (b, byte) in out[..code_bytes(len)].iter_mut().enumerate() {
        let first = b * CODES_PER_BYTE;
        let mut v = 0u8;
        for j in 0..(len - first).min(CODES_PER_BYTE) {
            v |= (code(first + j) & 3) << (2 * j);
        }
        *byte = v;
    }
}

/// `codes` ← f(a) for each element of `a` (row-major), packed ([`CODES_PER_BYTE`]), in
/// [`CHUNK_ELEMS`](super::rows::CHUNK_ELEMS)-element chunks in parallel under [`Par::Rayon`].
///
/// # Panics
/// If `codes` is shorter than [`code_bytes`]`(a.len())`.
#[track_caller]
pub fn codes_from<A: Sync>(
    codes: &mut [u8],
    a: ArrayView2<'_, A>,
    par: Par,
    f: impl Fn(&A) -> u8 + Sync,
) {
    let len = a.len();
    assert!(
        codes.len() >= code_bytes(len),
        "codes_from: {} code bytes for {len} elements",
        codes.len()
    );
    const CB: usize = super::rows::CHUNK_ELEMS / CODES_PER_BYTE;
    let codes = &mut codes[..code_bytes(len)];
    match (a.as_slice(), par) {
        (Some(sa), Par::Rayon) => codes
            .par_chunks_mut(CB)
            .zip(sa.par_chunks(super::rows::CHUNK_ELEMS))
            .for_each(|(cc, ca)| pack_codes(cc, ca.len(), |k| f(&ca[k]))),
        (Some(sa), Par::Seq) => pack_codes(codes, len, |k| f(&sa[k])),
        _ => {
            let mut it = a.iter();
            pack_codes(codes, len, |_| {
                f(it.next().unwrap_or_else(|| unreachable!("len elements")))
            });
        }
    }
}

/// f(g, code) for each element of `g` (row-major) and its code in `codes` (packed,
/// [`CODES_PER_BYTE`]), in [`CHUNK_ELEMS`](super::rows::CHUNK_ELEMS)-element chunks in parallel
/// under [`Par::Rayon`] (each element on its own: the result does not depend on the chunks).
///
/// # Panics
/// If `codes` is shorter than [`code_bytes`]`(g.len())`.
#[track_caller]
pub fn zip_codes<A: Send>(
    mut g: ArrayViewMut2<'_, A>,
    codes: &[u8],
    par: Par,
    f: impl Fn(&mut A, u8) + Sync,
) {
    let len = g.len();
    assert!(
        codes.len() >= code_bytes(len),
        "zip_codes: {} code bytes for {len} elements",
        codes.len()
    );
    const CB: usize = super::rows::CHUNK_ELEMS / CODES_PER_BYTE;
    // Codes unpacked a block at a time into one byte each, then the element loop as over
    // byte codes (the form the compiler vectorises).
    const BLOCK: usize = 1024;
    let unpack = |gs: &mut [A], cs: &[u8]| {
        let mut buf = [0u8; BLOCK];
        for (gb, cb) in gs.chunks_mut(BLOCK).zip(cs.chunks(BLOCK / CODES_PER_BYTE)) {
            for (b4, &byte) in buf.chunks_exact_mut(CODES_PER_BYTE).zip(cb) {
                b4.copy_from_slice(&unpack4(byte).to_le_bytes());
            }
            gb.iter_mut().zip(&buf).for_each(|(x, &c)| f(x, c));
        }
    };
    // Compiled for the widest vectors the CPU has (the same bits on any).
    let unpack = |gs: &mut [A], cs: &[u8]| {
        super::raw::widest(
            #[inline(always)]
            || unpack(gs, cs),
        )
    };
    match (g.as_slice_mut(), par) {
        (Some(sg), Par::Rayon) => sg
            .par_chunks_mut(super::rows::CHUNK_ELEMS)
            .zip(codes.par_chunks(CB))
            .for_each(|(cg, cc)| unpack(cg, cc)),
        (Some(sg), Par::Seq) => unpack(sg, codes),
        _ => g
            .iter_mut()
            .enumerate()
            .for_each(|(k, x)| f(x, code_at(codes, k))),
    }
}

/// The epilogue of a hidden layer with dropout, in place, keeping a 2-bit code per element
/// ([`CODES_PER_BYTE`]) instead of the activation and the mask: h ← ReLU(h + 1·bᵀ) ⊙ mask, and
/// the code of each element (row-major) [`RELU_OFF`] where ReLU(h + b) ≤ 0, else [`DROP_KEPT`]
/// or [`DROP_ZERO`] as the mask keeps or drops the element. `mask` holds inverted-dropout
/// factors (0 or `keep`, as [`dropout_mask`] draws them). The new `h` is bit for bit
/// [`add_bias`], [`relu_inplace`] and the product with the mask run one after the other, and
/// [`dropout_relu_backward_code`] with the codes gives bit for bit `𝟙(a > 0) ⊙ (dh ⊙ mask)` for
/// the ReLU output `a`.
///
/// # Panics
/// If `b` or `mask` do not match `h`'s shape, or `codes` is shorter than
/// [`code_bytes`]`(h.len())`.
#[track_caller]
pub fn bias_relu_dropout_fold<F: Scalar>(
    mut h: ArrayViewMut2<'_, F>,
    b: Option<ArrayView1<'_, F>>,
    mask: ArrayView2<'_, F>,
    codes: &mut [u8],
) {
    let _span = span(Phase::Elementwise, || Work::Stream {
        bytes: h.len() * (3 * std::mem::size_of::<F>()) + code_bytes(h.len()),
    });
    let dim = h.dim();
    assert!(
        b.is_none_or(|b| b.len() == dim.1)
            && mask.dim() == dim
            && codes.len() >= code_bytes(h.len()),
        "bias_relu_dropout_fold: h {dim:?}, b {:?}, mask {:?}, {} code bytes",
        b.map(|b| b.len()),
        mask.dim(),
        codes.len()
    );
    let relu = |v: F| [F::zero(), v][usize::from(v > F::zero())];
    let codes = &mut codes[..code_bytes(h.len())];
    codes.fill(0);
    for (i, (mut hr, mr)) in h
        .axis_iter_mut(Axis(0))
        .zip(mask.axis_iter(Axis(0)))
        .enumerate()
    {
        Zip::indexed(&mut hr).and(&mr).for_each(|j, v, &m| {
            let t = relu(match b {
                Some(b) => *v + b[j],
                None => *v,
            });
            *v = t * m;
            // Branch-free: 0 when t ≤ 0, else 1 (kept) or 2 (dropped).
            let on = u8::from(t > F::zero());
            let k = i * dim.1 + j;
            codes[k / CODES_PER_BYTE] |=
                (on * (1 + u8::from(m == F::zero()))) << (2 * (k % CODES_PER_BYTE));
        });
    }
}

/// The backward of [`bias_relu_dropout_fold`]: dz ← dz·keep where the code (packed,
/// [`CODES_PER_BYTE`]) is [`DROP_KEPT`], dz·0 where it is [`DROP_ZERO`] and +0 where it is
/// [`RELU_OFF`] — exactly what `[a > 0] ? dz·m : +0` computes from the mask m (0 or `keep`) and
/// the ReLU output a.
///
/// # Panics
/// If `codes` is shorter than [`code_bytes`]`(dz.len())`.
#[track_caller]
pub fn dropout_relu_backward_code<F: Scalar>(
    dz: ArrayViewMut2<'_, F>,
    codes: &[u8],
    keep: F,
    par: Par,
) {
    let _span = span(Phase::Elementwise, || Work::Stream {
        bytes: dz.len() * (2 * std::mem::size_of::<F>()) + code_bytes(dz.len()),
    });
    zip_codes(dz, codes, par, |g, c| {
        // +0 where ReLU is off, g·keep where kept, g·0 where dropped (and for the unused
        // code 3): selects, not a table, so that the loop vectorises.
        let m = if c == DROP_KEPT { keep } else { F::zero() };
        let v = *g * m;
        *g = if c == RELU_OFF { F::zero() } else { v };
    });
}

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

/// [`dropout_mask`], drawn in [`MASK_CHUNK`]-element tasks in parallel under [`Par::Rayon`]
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
pub const MASK_CHUNK: usize = 1 << 15;
const _: () =
    assert!(MASK_CHUNK.is_multiple_of(MASK_WORDS) && MASK_WORDS.is_multiple_of(CODES_PER_BYTE));
const _: () = assert!(MASK_WORDS.is_multiple_of(2));
const _: () = assert!(super::rows::CHUNK_ELEMS.is_multiple_of(CODES_PER_BYTE));

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
    assert!(
        (0.0..1.0).contains(&p),
        "dropout_mask: p = {p} not in [0, 1)"
    );
    assert!(
        before + mask.len() <= total,
        "fill_dropout_mask_at: elements {before}..{} of {total}",
        before + mask.len()
    );
    let _span = span(Phase::Elementwise, || Work::Stream {
        bytes: std::mem::size_of_val(mask),
    });
    let keep = Keep::<F>::new(p);
    let key = rng.next_u64();
    // Task c holds elements before + c·MASK_CHUNK.., whichever thread draws it.
    let task = |(c, chunk): (usize, &mut [F])| {
        super::raw::widest(
            #[inline(always)]
            || {
                let mut buf = [0u32; MASK_WORDS + 2];
                let e = before + c * MASK_CHUNK;
                for (b, mb) in chunk.chunks_mut(MASK_WORDS).enumerate() {
                    let words = mask_words(key, e + b * MASK_WORDS, mb.len(), &mut buf);
                    for (m, &w) in mb.iter_mut().zip(words) {
                        *m = keep.factor(w);
                    }
                }
            },
        )
    };
    match par {
        Par::Seq => mask.chunks_mut(MASK_CHUNK).enumerate().for_each(task),
        Par::Rayon => mask.par_chunks_mut(MASK_CHUNK).enumerate().for_each(task),
    }
}

/// `f(a_k, b_k)` for every element of two arrays of one shape (of two element types: the row
/// loop [`for_each_row2`](super::rows::for_each_row2) takes one), in
/// [`CHUNK_ELEMS`](super::rows::CHUNK_ELEMS)-element chunks in parallel under [`Par::Rayon`]
/// when both are contiguous (element by element otherwise). Every element is computed on its
/// own, so the result does not depend on the chunks.
///
/// # Panics
/// If the shapes differ.
#[track_caller]
pub fn zip_elems<A: Send + Sync, B: Sync>(
    mut a: ArrayViewMut2<'_, A>,
    b: ArrayView2<'_, B>,
    par: Par,
    f: impl Fn(&mut A, &B) + Sync,
) {
    assert_eq!(a.dim(), b.dim(), "zip_elems: shapes differ");
    match (a.as_slice_mut(), b.as_slice(), par) {
        (Some(sa), Some(sb), Par::Rayon) => sa
            .par_chunks_mut(super::rows::CHUNK_ELEMS)
            .zip(sb.par_chunks(super::rows::CHUNK_ELEMS))
            .for_each(|(ca, cb)| ca.iter_mut().zip(cb).for_each(|(x, y)| f(x, y))),
        (Some(sa), Some(sb), Par::Seq) => sa.iter_mut().zip(sb).for_each(|(x, y)| f(x, y)),
        _ => Zip::from(&mut a).and(&b).for_each(f),
    }
}

/// [`fill_dropout_mask_at`] and [`bias_relu_dropout_fold`] (no bias) in one pass, without the
/// mask: h ← ReLU(h) ⊙ mask and the packed codes as there, element k of `h` (row-major) taking
/// element `before + k` of the mask of `total` elements drawn from `rng` (one `u64` of it).
/// Bit for bit the two kernels run one after the other, for any `par`; the mask's n × d
/// factors are never written (4 bytes an element less to write and read).
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
                super::raw::widest(
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

    /// `pack4` and `unpack4` are inverse: every byte, and every four codes < 4.
    #[test]
    fn pack4_and_unpack4_are_inverse() {
        use super::{code_at, pack4, unpack4};
        for b in 0..=255u8 {
            let w = unpack4(b);
            assert_eq!(pack4(w), b);
            for j in 0..4 {
                assert_eq!(w.to_le_bytes()[j], code_at(&[b], j), "byte {b} code {j}");
            }
        }
    }

    /// The fused ReLU·dropout gives the bits, the codes and the stream position of the mask
    /// drawn first and folded after, for any part of a longer mask, layout and `par`.
    #[test]
    fn relu_dropout_at_is_the_mask_then_the_fold() {
        use ndarray::{s, Array2};

        use super::{bias_relu_dropout_fold, code_at, code_bytes, fill_dropout_mask_at};
        use super::{relu_dropout_at, DROP_KEPT, DROP_ZERO, RELU_OFF};
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

    /// `col_sum`: out ← Gᵀ·1 + β·out in row order; β = 0 overwrites (NaN in `out` does not
    /// leak), any other β scales what `out` held.
    #[test]
    fn col_sum_scales_or_overwrites_out() {
        use super::col_sum;
        use ndarray::{arr1, arr2};
        let g = arr2(&[[1.0f64, -2.0, 0.5], [3.0, 4.0, -0.25]]);
        let mut out = arr1(&[f64::NAN, f64::INFINITY, 7.0]);
        col_sum(g.view(), 0.0, out.view_mut());
        assert_eq!(out, arr1(&[4.0, 2.0, 0.25]));
        let mut out = arr1(&[2.0, -4.0, 8.0]);
        col_sum(g.view(), 0.5, out.view_mut());
        assert_eq!(out, arr1(&[5.0, 0.0, 4.25]));
        let mut out = arr1(&[2.0, -4.0, 8.0]);
        col_sum(g.view(), 1.0, out.view_mut());
        assert_eq!(out, arr1(&[6.0, -2.0, 8.25]));
        let mut out = arr1(&[2.0, -4.0, 8.0]);
        col_sum(g.view(), -3.0, out.view_mut());
        assert_eq!(out, arr1(&[-2.0, 14.0, -23.75]));
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
}
