//! Exact sums ([`ExactSum`]): a Kulisch-style fixed-point accumulator wide enough for every
//! `f64`, so that a sum of any values in any order and any grouping rounds once, to the same
//! bits. A distributed run combines per-chunk partials with it, so that its reductions do not
//! depend on the number of ranks (reproducible-BLAS libraries do the same).
//!
//! Every finite `f64` is an integer multiple of 2⁻¹⁰⁷⁴ below 2¹⁰²⁴. The accumulator holds that
//! integer in [`DIGITS`] signed 64-bit digits of 32 bits each (bit 0 of digit 0 is 2⁻¹⁰⁷⁴), the
//! upper half of each digit taking carries, which are propagated every 2³⁰ additions and when
//! the sum is read. Merging two accumulators adds their digits, so partial sums formed anywhere
//! combine exactly. Reading rounds to nearest, ties to even, once. NaN, or +∞ and −∞ together,
//! give NaN; one infinite sign gives that infinity.

/// Digits of 32 bits: 2098 bits of magnitude, 64 of headroom for carries and counts.
pub const DIGITS: usize = 68;

/// Additions between carry propagations (each adds less than 2³² to a digit's upper half).
const NORMALIZE_EVERY: u32 = 1 << 30;

/// An exact sum of `f64` values (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExactSum {
    digits: [i64; DIGITS],
    pending: u32,
    pos_inf: bool,
    neg_inf: bool,
    nan: bool,
}

impl Default for ExactSum {
    fn default() -> Self {
        ExactSum {
            digits: [0; DIGITS],
            pending: 0,
            pos_inf: false,
            neg_inf: false,
            nan: false,
        }
    }
}

impl ExactSum {
    /// An empty sum (0).
    pub fn new() -> Self {
        ExactSum::default()
    }

    /// Adds `v` exactly.
    pub fn add(&mut self, v: f64) {
        if v.is_nan() {
            self.nan = true;
            return;
        }
        if v.is_infinite() {
            if v > 0.0 {
                self.pos_inf = true;
            } else {
                self.neg_inf = true;
            }
            return;
        }
        let bits = v.to_bits();
        let exp = ((bits >> 52) & 0x7ff) as usize;
        let frac = bits & ((1u64 << 52) - 1);
        let (m, pos) = if exp == 0 {
            (frac, 0)
        } else {
            (frac | (1 << 52), exp - 1)
        };
        if m == 0 {
            return;
        }
        // v = ±m · 2^(pos − 1074): m shifted to bit `pos` spans at most three digits.
        let (k, s) = (pos / 32, pos % 32);
        let x = u128::from(m) << s;
        let sign = if bits >> 63 == 1 { -1 } else { 1 };
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

    /// Adds every value of `vs`.
    pub fn add_all(&mut self, vs: impl IntoIterator<Item = f64>) {
        for v in vs {
            self.add(v);
        }
    }

    /// Adds another sum exactly (a partial formed elsewhere: a chunk, a rank).
    pub fn merge(&mut self, other: &ExactSum) {
        self.normalize();
        let mut o = other.clone();
        o.normalize();
        for (d, e) in self.digits.iter_mut().zip(o.digits) {
            *d += e;
        }
        self.pos_inf |= o.pos_inf;
        self.neg_inf |= o.neg_inf;
        self.nan |= o.nan;
        self.normalize();
    }

    /// Propagates carries: every digit but the last in 0..2³² (the last holds the sign).
    fn normalize(&mut self) {
        for i in 0..DIGITS - 1 {
            let carry = self.digits[i] >> 32;
            self.digits[i] -= carry << 32;
            self.digits[i + 1] += carry;
        }
        self.pending = 0;
    }

    /// The digits, for exchanging a partial sum (with [`ExactSum::from_digits`]).
    pub fn digits(&self) -> [i64; DIGITS] {
        let mut c = self.clone();
        c.normalize();
        c.digits
    }

    /// A sum from the [digits](ExactSum::digits) of another (a partial received from a rank).
    pub fn from_digits(digits: [i64; DIGITS]) -> Self {
        ExactSum {
            digits,
            ..ExactSum::default()
        }
    }

    /// The sum rounded to the nearest `f64`, ties to even.
    pub fn value(&self) -> f64 {
        if self.nan || (self.pos_inf && self.neg_inf) {
            return f64::NAN;
        }
        if self.pos_inf {
            return f64::INFINITY;
        }
        if self.neg_inf {
            return f64::NEG_INFINITY;
        }
        let mut c = self.clone();
        c.normalize();
        let negative = c.digits[DIGITS - 1] < 0;
        // The magnitude as 32-bit digits: negate every digit of a negative sum and propagate
        // the carries again, so every digit lies in 0..2³².
        let mut d = c.digits;
        if negative {
            for x in d.iter_mut() {
                *x = -*x;
            }
            for i in 0..DIGITS - 1 {
                let carry = d[i] >> 32;
                d[i] -= carry << 32;
                d[i + 1] += carry;
            }
        }
        let mag: [u32; DIGITS] = d.map(|x| x as u32);
        let Some(top_digit) = (0..DIGITS).rev().find(|&i| mag[i] != 0) else {
            return 0.0;
        };
        let t = top_digit * 32 + 31 - mag[top_digit].leading_zeros() as usize;
        let bit = |p: usize| (mag[p / 32] >> (p % 32)) & 1 == 1;
        let magnitude = if t < 53 {
            // Exactly representable: an integer below 2⁵³ times 2⁻¹⁰⁷⁴.
            let int = u64::from(mag[0]) | (u64::from(mag[1]) << 32);
            int as f64 * f64::from_bits(1)
        } else {
            // The 53 bits from t down, then round half to even on the rest.
            let mut m = 0u64;
            for p in (t - 52..=t).rev() {
                m = (m << 1) | u64::from(bit(p));
            }
            let half = bit(t - 53);
            let sticky = (0..t - 53).any(|p| mag[p / 32] != 0 && bit(p));
            let mut t = t;
            if half && (sticky || m & 1 == 1) {
                m += 1;
                if m == 1 << 53 {
                    m >>= 1;
                    t += 1;
                }
            }
            // Leading bit at 2^(t − 1074): the biased exponent is t − 1074 + 1023.
            let biased = t as i64 - 1074 + 1023;
            if biased >= 0x7ff {
                f64::INFINITY
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

/// The exact sum of `vs`, rounded once.
pub fn exact_sum(vs: impl IntoIterator<Item = f64>) -> f64 {
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
}
