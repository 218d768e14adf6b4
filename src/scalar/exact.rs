//! Exact sums: Kulisch-style fixed-point accumulators ([`Exact`]), so that a sum of any values in
//! any order and any grouping gives the same bits. The reductions across nodes form per-chunk
//! partials and combine them with these, so that they do not depend on the number of threads or
//! ranks (reproducible-BLAS libraries do the same).
//!
//! `Exact<N, LOW>` holds an integer multiple of 2^−LOW in `N` signed 64-bit digits of 32 bits
//! each (bit 0 of digit 0 is 2^−LOW), the upper half of each digit taking carries, which are
//! propagated every `NORMALIZE_EVERY` additions and when the sum is read or exchanged. Two
//! formats:
//! - [`ExactSum`] = `Exact<68, 1074>`: every finite `f64` (multiples of 2⁻¹⁰⁷⁴ below 2¹⁰²⁴:
//!   2098 bits of magnitude, 78 of headroom);
//! - [`ExactSum32`] = `Exact<10, 149>`: every finite `f32` (multiples of 2⁻¹⁴⁹ below 2¹²⁸: 277
//!   bits of magnitude, 43 of headroom), eight times smaller, for sums of `f32` partials.
//!
//! `ExactSum32::add_f32` first adds into an `f64` part of the sum, while every such addition
//! is exact (Knuth's TwoSum shows no rounding error), and moves that part into the digits the
//! first time one would round: the sum is always the digits plus that part, exactly, so every
//! read gives the same bits; sums of `f32` partials of similar magnitudes never touch the
//! digits.
//!
//! A value outside a format (finer than its grain, or at or above 2^(32·(N−1)−LOW)) is not
//! exact in it: its bits below the grain are dropped (toward zero) and a value too large counts
//! as an infinity of its sign; neither happens for the values of the format's type.
//!
//! Merging two accumulators adds their digits, so partial sums formed anywhere combine exactly;
//! [`Accumulator::to_words`] / [`Accumulator::from_words`] carry a partial between processes as
//! `i64` words that are combined by integer addition (an `MPI_SUM`), which is associative.
//! Reading rounds the exact sum to the nearest `f64`, ties to even, once. NaN, or +∞ and −∞
//! together, give NaN; one infinite sign gives that infinity.

/// Digits of [`ExactSum`].
pub(crate) const DIGITS: usize = 68;

/// Additions between carry propagations (each adds less than 2³² to a digit's upper half, so a
/// digit stays far inside `i64` between them).
pub(crate) const NORMALIZE_EVERY: u32 = 1 << 20;

/// An exact sum of every `f64` (see the [module docs](self)).
pub type ExactSum = Exact<DIGITS, 1074>;

/// An exact sum of every `f32` (see the [module docs](self)).
pub type ExactSum32 = Exact<10, 149>;

/// An exact sum of multiples of 2^−LOW in `N` digits (see the [module docs](self)). Two sums are
/// equal when they are the same number (and saw the same infinities and NaNs), however it is
/// split between the digits and the `f64` part.
#[derive(Debug, Clone)]
pub struct Exact<const N: usize, const LOW: usize> {
    digits: [i64; N],
    /// A part of the sum held as an `f64` (only [`ExactSum32::add_f32`] adds to it, and only
    /// while that is exact): the sum is `digits` plus `fast`, exactly.
    fast: f64,
    pending: u32,
    pos_inf: bool,
    neg_inf: bool,
    nan: bool,
}

impl<const N: usize, const LOW: usize> PartialEq for Exact<N, LOW> {
    fn eq(&self, other: &Self) -> bool {
        // Normalised digits with the f64 part folded in are one representation per number.
        (self.pos_inf, self.neg_inf, self.nan) == (other.pos_inf, other.neg_inf, other.nan)
            && self.digits() == other.digits()
    }
}

impl<const N: usize, const LOW: usize> Eq for Exact<N, LOW> {}

impl<const N: usize, const LOW: usize> Default for Exact<N, LOW> {
    fn default() -> Self {
        Exact {
            digits: [0; N],
            fast: 0.0,
            pending: 0,
            pos_inf: false,
            neg_inf: false,
            nan: false,
        }
    }
}

/// 2^e as an `f64`, for −1074 ≤ e ≤ 1023.
fn pow2(e: i64) -> f64 {
    if e >= -1022 {
        f64::from_bits(((e + 1023) as u64) << 52)
    } else {
        f64::from_bits(1u64 << (e + 1074))
    }
}

/// Below this magnitude an `f64` sum of exact additions is kept as it is (the `f64` part of an
/// [`Exact`], or a sum of partials): far inside both formats' ranges (2¹³⁹ for
/// [`ExactSum32`]), so moving it into the digits is always exact.
const FAST_LIMIT: f64 = 1.2676506002282294e30; // 2¹⁰⁰

/// `a + b`, and whether that addition was exact and stays below [`FAST_LIMIT`] (Knuth's TwoSum:
/// its rounding error is 0). NaN and the infinities are never exact (the error is NaN).
#[inline(always)]
pub(crate) fn add_exactly(a: f64, b: f64) -> (f64, bool) {
    let s = a + b;
    let bb = s - a;
    let err = (a - (s - bb)) + (b - bb);
    (s, err == 0.0 && s.abs() < FAST_LIMIT)
}

impl ExactSum32 {
    /// Adds the `f32` `v` exactly (what [`Exact::add`] does with it, faster).
    ///
    /// While every addition into the sum's `f64` part is exact (checked with Knuth's TwoSum:
    /// its rounding error is 0) the value stays there, at the cost of a few flops; the first
    /// addition that would round moves that part into the digits and adds `v` to them from its
    /// bits (an `f32` needs two digits and no range checks in this format). Either way the sum
    /// is the same exact number, so every read gives the same bits.
    #[inline]
    pub(crate) fn add_f32(&mut self, v: f32) {
        // NaN and the infinities are never exact, and so take the digits' path.
        if let (s, true) = add_exactly(self.fast, f64::from(v)) {
            self.fast = s;
            return;
        }
        self.fold_fast();
        self.add_f32_digits(v);
    }

    /// [`ExactSum32::add_f32`] into the digits, from the bits of `v`.
    #[inline]
    fn add_f32_digits(&mut self, v: f32) {
        let bits = v.to_bits();
        let exp = (bits >> 23) & 0xff;
        if exp == 0xff {
            if bits & 0x7f_ffff != 0 {
                self.nan = true;
            } else {
                self.add_infinity(bits >> 31 == 0);
            }
            return;
        }
        let frac = bits & 0x7f_ffff;
        // v = ±m · 2^(pos − 149): bit 0 of digit 0 is 2⁻¹⁴⁹.
        let (m, pos) = if exp == 0 {
            (frac, 0)
        } else {
            (frac | 0x80_0000, exp as usize - 1)
        };
        if m == 0 {
            return;
        }
        let (k, s) = (pos / 32, pos % 32);
        let x = u64::from(m) << s;
        let (lo, hi) = ((x & 0xffff_ffff) as i64, (x >> 32) as i64);
        if bits >> 31 == 1 {
            self.digits[k] -= lo;
            self.digits[k + 1] -= hi;
        } else {
            self.digits[k] += lo;
            self.digits[k + 1] += hi;
        }
        self.pending += 1;
        if self.pending == NORMALIZE_EVERY {
            self.normalize();
        }
    }
}

impl<const N: usize, const LOW: usize> Exact<N, LOW> {
    /// An empty sum (0).
    pub fn new() -> Self {
        Exact::default()
    }

    /// Adds `v` exactly (for a value of the format, see the [module docs](self)).
    pub fn add(&mut self, v: f64) {
        if v.is_nan() {
            self.nan = true;
            return;
        }
        if v.is_infinite() {
            self.add_infinity(v > 0.0);
            return;
        }
        let bits = v.to_bits();
        let exp = ((bits >> 52) & 0x7ff) as usize;
        let frac = bits & ((1u64 << 52) - 1);
        let (mut m, mut pos) = if exp == 0 {
            (frac, 0)
        } else {
            (frac | (1 << 52), exp - 1)
        };
        if m == 0 {
            return;
        }
        let negative = bits >> 63 == 1;
        // v = ±m · 2^(pos − 1074); in this format's grain, ±m · 2^(pos − off) with
        // off = 1074 − LOW. Trailing zeros of m absorb what lies below the grain.
        let off = 1074 - LOW;
        if pos < off {
            let shift = off - pos;
            m = if shift >= 64 { 0 } else { m >> shift };
            pos = off;
            if m == 0 {
                return;
            }
        }
        let pos = pos - off;
        let top = pos + 63 - m.leading_zeros() as usize;
        if top >= 32 * (N - 1) {
            self.add_infinity(!negative);
            return;
        }
        // m shifted to bit `pos` spans at most three digits.
        let (k, s) = (pos / 32, pos % 32);
        let x = u128::from(m) << s;
        let sign = if negative { -1 } else { 1 };
        for (i, part) in [(x & 0xffff_ffff), ((x >> 32) & 0xffff_ffff), (x >> 64)]
            .into_iter()
            .enumerate()
        {
            if part != 0 {
                self.digits[k + i] += sign * part as i64;
            }
        }
        self.pending += 1;
        if self.pending == NORMALIZE_EVERY {
            self.normalize();
        }
    }

    fn add_infinity(&mut self, positive: bool) {
        if positive {
            self.pos_inf = true;
        } else {
            self.neg_inf = true;
        }
    }

    #[cfg(test)]
    /// Adds every value of `vs`.
    pub(crate) fn add_all(&mut self, vs: impl IntoIterator<Item = f64>) {
        for v in vs {
            self.add(v);
        }
    }

    /// Adds another sum exactly (a partial formed elsewhere: a chunk, a rank).
    pub(crate) fn merge(&mut self, other: &Self) {
        self.fold_fast();
        self.normalize();
        let mut o = other.clone();
        o.fold_fast();
        o.normalize();
        for (d, e) in self.digits.iter_mut().zip(o.digits) {
            *d += e;
        }
        self.pos_inf |= o.pos_inf;
        self.neg_inf |= o.neg_inf;
        self.nan |= o.nan;
        self.normalize();
    }

    /// Moves the `f64` part of the sum into the digits (exact: it is a sum of values of the
    /// format, below [`FAST_LIMIT`]).
    fn fold_fast(&mut self) {
        if self.fast != 0.0 {
            let f = std::mem::replace(&mut self.fast, 0.0);
            self.add(f);
        }
    }

    /// Propagates carries: every digit but the last in 0..2³² (the last holds the sign).
    fn normalize(&mut self) {
        for i in 0..N - 1 {
            let carry = self.digits[i] >> 32;
            self.digits[i] -= carry << 32;
            self.digits[i + 1] += carry;
        }
        self.pending = 0;
    }

    /// The digits, for exchanging a partial sum (with `Exact::from_digits`).
    pub fn digits(&self) -> [i64; N] {
        let mut c = self.clone();
        c.fold_fast();
        c.normalize();
        c.digits
    }

    #[cfg(test)]
    /// A sum from the [digits](Exact::digits) of another (a partial received from a rank).
    pub(crate) fn from_digits(digits: [i64; N]) -> Self {
        Exact {
            digits,
            ..Exact::default()
        }
    }

    /// The sum rounded to the nearest `f64`, ties to even.
    pub fn value(&self) -> f64 {
        let mut c = self.clone();
        c.take_value()
    }

    /// [`Exact::value`], normalising `self` in place instead of a copy (the sum is unchanged).
    pub(crate) fn take_value(&mut self) -> f64 {
        if self.nan || (self.pos_inf && self.neg_inf) {
            return f64::NAN;
        }
        if self.pos_inf {
            return f64::INFINITY;
        }
        if self.neg_inf {
            return f64::NEG_INFINITY;
        }
        if self.digits.iter().all(|&d| d == 0) {
            // The whole sum is the `f64` part, which is exact: it is its own rounding (+0 for
            // an empty sum or one that cancels, as below).
            return self.fast + 0.0;
        }
        self.fold_fast();
        self.normalize();
        let negative = self.digits[N - 1] < 0;
        // The magnitude as 32-bit digits: negate every digit of a negative sum and propagate
        // the carries again, so every digit lies in 0..2³².
        let mut d = self.digits;
        if negative {
            for x in d.iter_mut() {
                *x = -*x;
            }
            for i in 0..N - 1 {
                let carry = d[i] >> 32;
                d[i] -= carry << 32;
                d[i + 1] += carry;
            }
        }
        let mag: [u32; N] = d.map(|x| x as u32);
        let Some(k) = (0..N).rev().find(|&i| mag[i] != 0) else {
            return 0.0;
        };
        let low = LOW as i64;
        // The top three digits as one window; bit t (the leading one) sits at `pos` in it.
        let base = k.saturating_sub(2);
        let mut window = 0u128;
        for i in (base..=k).rev() {
            window = (window << 32) | u128::from(mag[i]);
        }
        let pos = 32 * (k - base) + 31 - mag[k].leading_zeros() as usize;
        let t = 32 * base + pos;
        let magnitude = if t < 53 {
            // Exactly representable: an integer below 2⁵³ times 2^−LOW (then base = 0).
            (window as u64) as f64 * pow2(-low)
        } else {
            // The 53 bits from t down, then round half to even on the rest: the window's bits
            // below them and every digit below the window.
            let cut = pos - 52;
            let mut m = ((window >> cut) as u64) & ((1 << 53) - 1);
            let rest = window & ((1u128 << cut) - 1);
            let half = cut > 0 && (rest >> (cut - 1)) & 1 == 1;
            let sticky = (cut > 1 && rest & ((1u128 << (cut - 1)) - 1) != 0)
                || mag[..base].iter().any(|&x| x != 0);
            let mut t = t;
            if half && (sticky || m & 1 == 1) {
                m += 1;
                if m == 1 << 53 {
                    m >>= 1;
                    t += 1;
                }
            }
            // Leading bit at 2^(t − LOW): the biased exponent is t − LOW + 1023.
            let biased = t as i64 - low + 1023;
            if biased >= 0x7ff {
                f64::INFINITY
            } else if biased <= 0 {
                // Only for LOW > 1074 (not a format above): keep it finite and deterministic.
                (m as f64) * pow2(t as i64 - 52 - low)
            } else {
                f64::from_bits(((biased as u64) << 52) | (m & ((1 << 52) - 1)))
            }
        };
        if negative {
            -magnitude
        } else {
            magnitude
        }
    }
}

/// An exact sum that can be exchanged as `i64` words: what the reductions across nodes need of
/// [`Exact`], for whichever format the scalar type uses
/// ([`Scalar::Exact`](crate::Scalar::Exact)).
pub trait Accumulator: Default + Clone + Send + Sync + std::fmt::Debug {
    /// Words of [`Accumulator::to_words`].
    const WORDS: usize;
    /// Adds `v` exactly.
    fn add(&mut self, v: f64);
    /// Adds another partial exactly.
    fn merge(&mut self, other: &Self);
    /// The sum, rounded once to the nearest `f64`.
    fn value(&self) -> f64;
    /// [`Accumulator::value`], normalising `self` in place (the sum is unchanged).
    fn take_value(&mut self) -> f64;
    /// The partial as [`Accumulator::WORDS`] words: the normalised digits, then the counts of
    /// +∞, −∞ and NaN seen. Words of several partials added as integers (in any order) are the
    /// words of their exact sum.
    fn to_words(&self, out: &mut [i64]);
    /// The partial whose words (or the integer sum of several partials' words) are `words`.
    fn from_words(words: &[i64]) -> Self;
}

impl<const N: usize, const LOW: usize> Accumulator for Exact<N, LOW> {
    const WORDS: usize = N + 3;

    fn add(&mut self, v: f64) {
        Exact::add(self, v);
    }

    fn merge(&mut self, other: &Self) {
        Exact::merge(self, other);
    }

    fn value(&self) -> f64 {
        Exact::value(self)
    }

    fn take_value(&mut self) -> f64 {
        Exact::take_value(self)
    }

    #[track_caller]
    fn to_words(&self, out: &mut [i64]) {
        assert_eq!(out.len(), N + 3, "Accumulator::to_words: words");
        out[..N].copy_from_slice(&self.digits());
        out[N] = i64::from(self.pos_inf);
        out[N + 1] = i64::from(self.neg_inf);
        out[N + 2] = i64::from(self.nan);
    }

    #[track_caller]
    fn from_words(words: &[i64]) -> Self {
        assert_eq!(words.len(), N + 3, "Accumulator::from_words: words");
        let mut digits = [0; N];
        digits.copy_from_slice(&words[..N]);
        Exact {
            digits,
            fast: 0.0,
            pending: 0,
            pos_inf: words[N] != 0,
            neg_inf: words[N + 1] != 0,
            nan: words[N + 2] != 0,
        }
    }
}

#[cfg(test)]
/// The exact sum of `vs`, rounded once.
pub(crate) fn exact_sum(vs: impl IntoIterator<Item = f64>) -> f64 {
    let mut s = ExactSum::new();
    s.add_all(vs);
    s.value()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Values k·2^e with small integers k and exponents in [-30, 30]: their exact sum is an
    /// i128 multiple of 2⁻³⁰, rounded by `as f64` (to nearest, ties to even) as a reference.
    #[test]
    fn matches_an_integer_reference_and_ignores_order_and_grouping() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for case in 0..200 {
            let n = rng.random_range(1..400);
            let vals: Vec<(i64, i32)> = (0..n)
                .map(|_| {
                    (
                        rng.random_range(-(1i64 << 53)..(1i64 << 53)),
                        rng.random_range(-30..=30),
                    )
                })
                .collect();
            let exact: i128 = vals.iter().map(|&(k, e)| i128::from(k) << (e + 30)).sum();
            let reference = exact as f64 * 2f64.powi(-30);
            let xs: Vec<f64> = vals.iter().map(|&(k, e)| k as f64 * 2f64.powi(e)).collect();
            assert!(xs
                .iter()
                .zip(&vals)
                .all(|(x, &(k, e))| (*x / 2f64.powi(e)) as i64 == k));
            let got = exact_sum(xs.iter().copied());
            assert_eq!(got.to_bits(), reference.to_bits(), "case {case}");
            // Reversed, and as two merged partials split anywhere.
            assert_eq!(exact_sum(xs.iter().rev().copied()).to_bits(), got.to_bits());
            let cut = rng.random_range(0..=xs.len());
            let (mut a, mut b) = (ExactSum::new(), ExactSum::new());
            a.add_all(xs[..cut].iter().copied());
            b.add_all(xs[cut..].iter().copied());
            b.merge(&a);
            assert_eq!(b.value().to_bits(), got.to_bits());
        }
    }

    #[test]
    fn cancellation_extremes_and_specials() {
        assert_eq!(exact_sum([1e300, 1.0, -1e300]), 1.0);
        assert_eq!(exact_sum([f64::MAX, f64::MAX, -f64::MAX]), f64::MAX);
        assert_eq!(exact_sum([f64::MAX, f64::MAX]), f64::INFINITY);
        assert_eq!(exact_sum([-f64::MAX, -f64::MAX]), f64::NEG_INFINITY);
        let tiny = f64::from_bits(1);
        assert_eq!(exact_sum([tiny, tiny, tiny]).to_bits(), 3);
        assert_eq!(exact_sum([1.0, tiny, -1.0]).to_bits(), 1);
        // 1 + 2⁻⁵³ is a tie: to even (1); with one more tiny bit it rounds up.
        let half_ulp = 2f64.powi(-53);
        assert_eq!(exact_sum([1.0, half_ulp]), 1.0);
        assert_eq!(exact_sum([1.0, half_ulp, tiny]), 1.0 + 2f64.powi(-52));
        assert_eq!(
            exact_sum([1.0 + 2f64.powi(-52), half_ulp]),
            1.0 + 2.0 * 2f64.powi(-52)
        );
        assert_eq!(exact_sum([]), 0.0);
        assert_eq!(exact_sum([-3.5, 1.25]), -2.25);
        assert!(exact_sum([1.0, f64::NAN]).is_nan());
        assert!(exact_sum([f64::INFINITY, f64::NEG_INFINITY]).is_nan());
        assert_eq!(exact_sum([f64::INFINITY, -1e308]), f64::INFINITY);
        // A float sum of 0.1 ten times is not 1; the exact sum of those ten values rounds to
        // the nearest double of 10 × 0.1's exact value.
        let e = exact_sum([0.1; 10]);
        assert_eq!(e, 1.0);
        assert_ne!((0..10).fold(0.0, |s, _| s + 0.1), e);
    }

    #[test]
    fn digits_round_trip_between_partials() {
        let mut a = ExactSum::new();
        a.add_all([1.5, -2.0e-300, 7.0e200]);
        let mut b = ExactSum::from_digits(a.digits());
        b.add(-7.0e200);
        assert_eq!(b.value(), exact_sum([1.5, -2.0e-300]));
    }

    #[test]
    fn the_f32_format_agrees_with_the_f64_one_on_f32_values() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for case in 0..200 {
            let n = rng.random_range(1..300);
            let xs: Vec<f64> = (0..n)
                .map(|_| {
                    let bits: u32 = rng.random();
                    let v = f32::from_bits(bits);
                    if v.is_finite() {
                        f64::from(v)
                    } else {
                        f64::from(rng.random::<f32>() - 0.5)
                    }
                })
                .collect();
            let mut s = ExactSum32::new();
            s.add_all(xs.iter().copied());
            assert_eq!(
                s.value().to_bits(),
                exact_sum(xs.iter().copied()).to_bits(),
                "case {case}"
            );
        }
        // The extremes of f32: the smallest subnormal, and the largest finite value twice.
        let tiny = f64::from(f32::from_bits(1));
        let mut s = ExactSum32::new();
        s.add_all([tiny, tiny, 1.0, -1.0]);
        assert_eq!(s.value(), 2.0 * tiny);
        let big = f64::from(f32::MAX);
        let mut s = ExactSum32::new();
        s.add_all([big, big, -big]);
        assert_eq!(s.value(), big);
        // Outside the format: below its grain dropped, beyond its range an infinity.
        let mut s = ExactSum32::new();
        s.add_all([1.0, 1e-300]);
        assert_eq!(s.value(), 1.0);
        s.add(-1e300);
        assert_eq!(s.value(), f64::NEG_INFINITY);
    }

    #[test]
    fn carries_are_propagated_every_normalize_every_additions() {
        // Each addition puts 2³² − 1 into digit 1's lower half (v = (2³² − 1)·2^(32 − 1074)), so
        // without carries a digit would grow past 2⁵¹ here.
        let v = (u32::MAX as f64) * pow2(32 - 1074);
        let mut s = ExactSum::new();
        for _ in 0..NORMALIZE_EVERY {
            s.add(v);
        }
        assert_eq!(s.pending, 0);
        assert!(s.digits[..DIGITS - 1]
            .iter()
            .all(|&d| (0..1 << 32).contains(&d)));
        assert_eq!(s.value(), v * f64::from(NORMALIZE_EVERY));
        s.add(v);
        assert_eq!(s.pending, 1);
    }

    #[test]
    fn words_of_partials_add_as_integers() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let xs: Vec<f64> = (0..500)
            .map(|_| (rng.random::<f64>() - 0.5) * 2f64.powi(rng.random_range(-60..60)))
            .collect();
        let mut words = vec![0i64; ExactSum::WORDS];
        let mut w = vec![0i64; ExactSum::WORDS];
        for part in xs.chunks(77) {
            let mut s = ExactSum::new();
            s.add_all(part.iter().copied());
            s.to_words(&mut w);
            words.iter_mut().zip(&w).for_each(|(a, b)| *a += b);
        }
        let total = <ExactSum as Accumulator>::from_words(&words);
        assert_eq!(
            total.value().to_bits(),
            exact_sum(xs.iter().copied()).to_bits()
        );
        // The special values travel too.
        let mut s = ExactSum32::new();
        s.add(f64::INFINITY);
        let mut w = vec![0i64; ExactSum32::WORDS];
        s.to_words(&mut w);
        let mut t = ExactSum32::new();
        t.add(f64::NEG_INFINITY);
        let mut w2 = vec![0i64; ExactSum32::WORDS];
        t.to_words(&mut w2);
        assert_eq!(
            <ExactSum32 as Accumulator>::from_words(&w).value(),
            f64::INFINITY
        );
        w.iter_mut().zip(&w2).for_each(|(a, b)| *a += b);
        assert!(<ExactSum32 as Accumulator>::from_words(&w).value().is_nan());
        let mut n = ExactSum32::new();
        n.add(f64::NAN);
        n.to_words(&mut w);
        assert!(<ExactSum32 as Accumulator>::from_words(&w).value().is_nan());
    }

    /// The point of the f64 part: while its additions are exact the digits stay untouched
    /// (so reading is one copy), and the first addition that would round spills it.
    #[test]
    fn f32_sums_that_f64_holds_exactly_never_touch_the_digits() {
        let mut s = ExactSum32::new();
        for v in [1.5f32, 2.25, -0.125, 3.0e-3, -1.0e5, 7.0] {
            s.add_f32(v);
        }
        assert!(s.digits.iter().all(|&d| d == 0) && s.pending == 0);
        let want = 1.5 + 2.25 - 0.125 + f64::from(3.0e-3f32) - 1.0e5 + 7.0;
        assert_eq!(s.fast, want);
        assert_eq!(s.value(), want);
        // 2⁶⁰ on top of a sum with bits below 2⁻²⁰ needs more than 53: the sum moves into
        // the digits; the f64 part then restarts from the next value.
        s.add_f32(2f32.powi(60));
        assert!(s.digits.iter().any(|&d| d != 0));
        assert_eq!(s.fast, 0.0);
        s.add_f32(2f32.powi(-30));
        assert_eq!(s.fast, 2f64.powi(-30));
        assert_eq!(
            s.value().to_bits(),
            exact_sum([want, 2f64.powi(60), 2f64.powi(-30)]).to_bits()
        );
    }

    #[test]
    fn sums_are_equal_by_value_however_they_are_held() {
        // One sum in the f64 part, the same through the digits, and a different one.
        let (mut a, mut b, mut c) = (ExactSum32::new(), ExactSum32::new(), ExactSum32::new());
        a.add_f32(1.5);
        a.add_f32(0.25);
        b.add(1.75);
        c.add_f32(1.5);
        assert!(a.fast != 0.0 && b.fast == 0.0);
        assert_eq!(a, b);
        assert_ne!(a, c);
        c.add_f32(f32::INFINITY);
        c.add_f32(0.25);
        assert_ne!(a, c);
    }

    #[test]
    fn the_f64_part_of_an_f32_sum_spills_into_the_digits_without_losing_a_bit() {
        // 1e20 + 1 rounds in f64: the second addition must move the sum into the digits.
        let mut s = ExactSum32::new();
        for v in [1e20f32, 1.0, -1e20] {
            s.add_f32(v);
        }
        assert_eq!(s.value(), 1.0);
        // Values of mixed magnitudes, some additions exact in f64 and some not, read at any
        // point, merged, and through words: always the exact sum's bits.
        let mut rng = ChaCha8Rng::seed_from_u64(12);
        for case in 0..100 {
            let xs: Vec<f32> = (0..rng.random_range(1..200))
                .map(|_| (rng.random::<f32>() - 0.5) * 2f32.powi(rng.random_range(-40..40)))
                .collect();
            let reference = exact_sum(xs.iter().map(|&v| f64::from(v)));
            let cut = rng.random_range(0..=xs.len());
            let (mut a, mut b) = (ExactSum32::new(), ExactSum32::new());
            for (k, &v) in xs[..cut].iter().enumerate() {
                a.add_f32(v);
                let partial = exact_sum(xs[..=k].iter().map(|&v| f64::from(v)));
                assert_eq!(a.value().to_bits(), partial.to_bits(), "case {case}, {k}");
            }
            xs[cut..].iter().for_each(|&v| b.add_f32(v));
            let mut w = vec![0i64; ExactSum32::WORDS];
            b.to_words(&mut w);
            let from_words = <ExactSum32 as Accumulator>::from_words(&w);
            a.merge(&from_words);
            assert_eq!(a.value().to_bits(), reference.to_bits(), "case {case}");
        }
        // An empty sum and one that cancels read +0, as the digits do.
        let mut z = ExactSum32::new();
        assert_eq!(z.take_value().to_bits(), 0.0f64.to_bits());
        z.add_f32(-0.0);
        z.add_f32(-2.5);
        z.add_f32(2.5);
        assert_eq!(z.take_value().to_bits(), 0.0f64.to_bits());
    }

    #[test]
    fn add_f32_is_add_on_every_kind_of_f32() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let mut vals: Vec<f32> = (0..5000).map(|_| f32::from_bits(rng.random())).collect();
        vals.retain(|v| !v.is_nan());
        vals.extend([
            0.0,
            -0.0,
            f32::MIN_POSITIVE,
            -f32::MAX,
            f32::from_bits(1),
            f32::MAX,
        ]);
        let (mut a, mut b) = (ExactSum32::new(), ExactSum32::new());
        for &v in vals.iter().filter(|v| v.is_finite()) {
            a.add(f64::from(v));
            b.add_f32(v);
        }
        assert_eq!(a.digits(), b.digits());
        assert_eq!(a.value().to_bits(), b.value().to_bits());
        for v in [f32::INFINITY, f32::NEG_INFINITY, f32::NAN] {
            let (mut a, mut b) = (ExactSum32::new(), ExactSum32::new());
            a.add(f64::from(v));
            b.add_f32(1.5);
            b.add_f32(v);
            b.add_f32(-1.5);
            let mut w = vec![0i64; ExactSum32::WORDS];
            let mut w2 = vec![0i64; ExactSum32::WORDS];
            a.to_words(&mut w);
            b.to_words(&mut w2);
            assert_eq!(w, w2);
            assert_eq!(a.value().to_bits(), b.value().to_bits());
        }
    }
}
