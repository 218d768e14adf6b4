//! The 2-bit codes the element-wise kernels keep per element instead of an activation and a
//! mask ([`CODES_PER_BYTE`] to a byte): their values, packing and the loops over them.

use ndarray::{ArrayView2, ArrayViewMut2};
use rayon::prelude::*;

use crate::Par;

/// The code [`bias_relu_dropout_fold`](super::bias_relu_dropout_fold) keeps per element: the ReLU
/// output was not positive.
pub const RELU_OFF: u8 = 0;
/// The code of a positive ReLU output that dropout kept (factor `keep`).
pub const DROP_KEPT: u8 = 1;
/// The code of a positive ReLU output that dropout dropped (factor 0).
pub const DROP_ZERO: u8 = 2;

/// Codes per byte: the element-wise kernels keep 2-bit codes ([`RELU_OFF`], [`DROP_KEPT`],
/// [`DROP_ZERO`]; ReLU alone or dropout alone use 0 and 1), element k of an array (row-major)
/// in bits 2·(k mod 4) and 2·(k mod 4) + 1 of byte k / 4. A quarter of a byte an element: for
/// products-like 3 × 256, 0.94 GB less than a byte each.
pub(crate) const CODES_PER_BYTE: usize = 4;

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
pub(super) fn pack4(w: u32) -> u8 {
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
/// [`CHUNK_ELEMS`](crate::kernels::rows::CHUNK_ELEMS)-element chunks in parallel under
/// [`Par::Rayon`].
///
/// # Panics
/// If `codes` is shorter than [`code_bytes`]`(a.len())`.
#[track_caller]
pub(crate) fn codes_from<A: Sync>(
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
    const CB: usize = crate::kernels::rows::CHUNK_ELEMS / CODES_PER_BYTE;
    let codes = &mut codes[..code_bytes(len)];
    match (a.as_slice(), par) {
        (Some(sa), Par::Rayon) => codes
            .par_chunks_mut(CB)
            .zip(sa.par_chunks(crate::kernels::rows::CHUNK_ELEMS))
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
/// [`CODES_PER_BYTE`]), in [`CHUNK_ELEMS`](crate::kernels::rows::CHUNK_ELEMS)-element chunks in
/// parallel under [`Par::Rayon`] (each element on its own: the result does not depend on the
/// chunks).
///
/// # Panics
/// If `codes` is shorter than [`code_bytes`]`(g.len())`.
#[track_caller]
pub(crate) fn zip_codes<A: Send>(
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
    const CB: usize = crate::kernels::rows::CHUNK_ELEMS / CODES_PER_BYTE;
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
        crate::kernels::raw::widest(
            #[inline(always)]
            || unpack(gs, cs),
        )
    };
    match (g.as_slice_mut(), par) {
        (Some(sg), Par::Rayon) => sg
            .par_chunks_mut(crate::kernels::rows::CHUNK_ELEMS)
            .zip(codes.par_chunks(CB))
            .for_each(|(cg, cc)| unpack(cg, cc)),
        (Some(sg), Par::Seq) => unpack(sg, codes),
        _ => g
            .iter_mut()
            .enumerate()
            .for_each(|(k, x)| f(x, code_at(codes, k))),
    }
}

#[cfg(test)]
mod tests {
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
}
