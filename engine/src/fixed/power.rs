//! `power`: x^y of Q-format values. Integral exponents up to 64 are computed exactly as big
//! integers; every other exponent goes through exp(y·ln x) in Q120.

use super::explog::{exp_parts, ln_wide};
use super::wide::{FRAC, ONE, mul_wide, shr_round};
use super::{FixedError, FixedResult, check_frac, finish, narrow};

/// The largest integral exponent computed exactly. Beyond it the exact value of a non-integer
/// base has a denominator of at least 2^35 (so it is never a rounding tie) and the Q120 path's
/// relative error of 2^-80 decides the rounding.
const EXACT_MAX: u32 = 64;

/// 64-bit words of the exact power: 2048 bits hold every intermediate of an exact power up to
/// n = 64 (the loop stops once the result is known to overflow or to round to 0).
const WORDS: usize = 32;

/// Beyond |y·ln x| > 23 the result overflows (e^23 > 2^33) or rounds to 0 (e^-23·2^30 < 1/2).
const EXP_LIMIT: i128 = 23 * ONE;

/// x^y with x and y in Q(f).
///
/// Integral y ≥ 0 (y a multiple of 2^f), n = y/2^f: the exact real x^n, rounded once, for any
/// sign of x (0^0 = 1). For n ≤ 64 the integer |x|^n is built exactly in 2048 bits and the
/// division by 2^(f·(n−1)) rounded exactly (ties away from zero), with early exits once the
/// result is known to overflow (|x| ≥ 2^f, value above 2^33) or to round to 0 (|x| < 2^f,
/// value below 1/2). For n > 64: exp(n·ln|x|) in Q120 (relative error below 2^-80, never a tie).
///
/// Otherwise (y not integral, or negative) x must be positive: exp(y·ln x) with the product
/// y·ln x formed in 256 bits, relative error before rounding below 2^-80 (≤ 2^-49 ulp). Exact
/// ties (e.g. 2.25^4.5 = 38.443359375 at f = 8) round away from zero: a computed value within
/// 2^-45 ulp of a half-ulp point is taken as the tie it almost surely is. The result is thus
/// correctly rounded except, with probability about 2^-44 per input, a non-tie within 2^-45
/// ulp of a half-ulp point; always within 0.5 + 2^-45 ulp, inside the 2 ulp contract.
///
/// # Errors
/// `Domain` for x ≤ 0 with a non-integral or negative y, or f > 30; `Overflow` when the result
/// exceeds i32.
pub fn power(x: i32, y: i32, f: u32) -> FixedResult {
    check_frac(f)?;
    let low = (1i32 << f) - 1;
    if y >= 0 && y & low == 0 {
        return integral_power(x, (y >> f).unsigned_abs(), f);
    }
    let v = u128::try_from(x)
        .ok()
        .filter(|&v| v > 0)
        .ok_or(FixedError::Domain)?;
    let l = ln_wide(v, -(f as i32));
    exp_of_product(l, (y.unsigned_abs(), y < 0), f, f, Rounding::SnapTies)
}

/// x^n for an integer n ≥ 0.
fn integral_power(x: i32, n: u32, f: u32) -> FixedResult {
    let one = 1i32 << f;
    if n == 0 {
        return Ok(one);
    }
    if x == 0 {
        return Ok(0);
    }
    let ax = u64::from(x.unsigned_abs());
    let negative = x < 0 && n % 2 == 1;
    if n <= EXACT_MAX {
        let m = i128::from(exact_power(ax, n, f)?);
        return i32::try_from(if negative { -m } else { m }).map_err(|_| FixedError::Overflow);
    }
    if ax == 1 << f {
        return Ok(if negative { -one } else { one });
    }
    let l = ln_wide(u128::from(ax), -(f as i32));
    let sign = if negative {
        Rounding::Negative
    } else {
        Rounding::Positive
    };
    exp_of_product(l, (n, false), 0, f, sign)
}

/// round(|x|^n / 2^(f·(n−1))) exactly, for 1 ≤ n ≤ 64 and 0 < |x| ≤ 2^31.
fn exact_power(ax: u64, n: u32, f: u32) -> Result<u64, FixedError> {
    let grows = ax >= 1 << f;
    let mut p = Nat::one();
    for k in 1..=n {
        if !p.mul_small(ax) {
            return Err(FixedError::Overflow);
        }
        // p / 2^scale is the value after k factors, in units of 2^-f: non-decreasing in k
        // when |x/2^f| ≥ 1, decreasing otherwise.
        let scale = f * (k - 1);
        let bits = p.bits();
        if grows && bits > scale + 33 {
            return Err(FixedError::Overflow);
        }
        if !grows && bits < scale {
            return Ok(0);
        }
    }
    let scale = f * (n - 1);
    if p.bits() > scale + 63 {
        return Err(FixedError::Overflow);
    }
    let half = scale > 0 && p.bit(scale - 1);
    Ok(p.bits_from(scale) + u64::from(half))
}

/// How `exp_of_product` rounds its result.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rounding {
    /// Integral exponent, positive result: plain rounding (the exact value is never a tie).
    Positive,
    /// Integral exponent with a negative base and odd n: the result is negated.
    Negative,
    /// Non-integral exponent: a value within 2^-45 ulp of a half-ulp point is the exact tie it
    /// almost surely is (e.g. 2.25^1.5) and rounds away from zero.
    SnapTies,
}

/// A computed power this close to a half-ulp point (2^-45 ulp, above the path's 2^-49 ulp
/// error) is taken for an exact tie.
const TIE_SNAP_BITS: u32 = 45;

/// exp(l·m / 2^shift) rounded to Q(f). l is a Q120 logarithm and m = (|m|, m < 0) an integer
/// exponent (y, or n with shift 0); the product is exact in 256 bits before the shift, so a
/// huge exponent is recognized as such rather than wrapped.
fn exp_of_product(l: i128, m: (u32, bool), shift: u32, f: u32, rounding: Rounding) -> FixedResult {
    let (hi, lo) = mul_wide(l.unsigned_abs(), u128::from(m.0));
    let t = shr_round(hi, lo, shift)
        .and_then(|t| i128::try_from(t).ok())
        .filter(|&t| t <= EXP_LIMIT);
    let positive = (l > 0) != m.1;
    let Some(t) = t else {
        return if positive {
            Err(FixedError::Overflow)
        } else {
            Ok(0)
        };
    };
    let (e, k) = exp_parts(if positive { t } else { -t });
    let scale = FRAC as i32 - k - f as i32;
    match rounding {
        Rounding::Positive => finish(e, scale),
        Rounding::Negative => finish(-e, scale),
        Rounding::SnapTies => finish_snapping_ties(e, scale),
    }
}

/// round(v / 2^shift) for v ≥ 0, except that a value within 2^-45 ulp of a half-ulp point
/// rounds up (away from zero) as an exact tie would. Why: exp(y·ln x) cannot tell an exact
/// tie from a value 2^-49 ulp beside it, but exact ties do occur for non-integral y (whenever
/// x is a perfect power, e.g. x = 9/4 with y = 3/2) while a non-dyadic value that close to a
/// half-ulp point has probability 2^-44; rounding it away is still within 0.5 + 2^-45 ulp.
fn finish_snapping_ties(v: i128, shift: i32) -> FixedResult {
    if let Ok(s) = u32::try_from(shift)
        && (TIE_SNAP_BITS + 1..128).contains(&s)
    {
        let m = v.unsigned_abs();
        let frac = m & ((1u128 << s) - 1);
        if frac.abs_diff(1u128 << (s - 1)) <= 1u128 << (s - TIE_SNAP_BITS) {
            return narrow((m >> s) + 1, v < 0);
        }
    }
    finish(v, shift)
}

/// A natural number in little-endian 64-bit words, with the number of words in use.
struct Nat {
    words: [u64; WORDS],
    len: usize,
}

impl Nat {
    /// 1.
    fn one() -> Self {
        let mut words = [0; WORDS];
        words[0] = 1;
        Nat { words, len: 1 }
    }

    /// self ·= m; false when the product needs more than `WORDS` words.
    fn mul_small(&mut self, m: u64) -> bool {
        let mut carry = 0u64;
        for word in self.words.iter_mut().take(self.len) {
            let t = u128::from(*word) * u128::from(m) + u128::from(carry);
            *word = t as u64;
            carry = (t >> 64) as u64;
        }
        if carry != 0 {
            match self.words.get_mut(self.len) {
                Some(word) => *word = carry,
                None => return false,
            }
            self.len += 1;
        }
        true
    }

    /// Number of significant bits.
    fn bits(&self) -> u32 {
        let top = self.len.saturating_sub(1);
        let word = self.words.get(top).copied().unwrap_or(0);
        top as u32 * 64 + (64 - word.leading_zeros())
    }

    /// Bit i.
    fn bit(&self, i: u32) -> bool {
        let word = self.words.get((i / 64) as usize).copied().unwrap_or(0);
        (word >> (i % 64)) & 1 == 1
    }

    /// The 64 bits starting at bit i.
    fn bits_from(&self, i: u32) -> u64 {
        let at = (i / 64) as usize;
        let off = i % 64;
        let lo = self.words.get(at).copied().unwrap_or(0);
        let hi = self.words.get(at + 1).copied().unwrap_or(0);
        if off == 0 {
            lo
        } else {
            (lo >> off) | (hi << (64 - off))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integral_powers_are_exact() {
        assert_eq!(power(0, 0, 16), Ok(1 << 16));
        assert_eq!(power(0, 3 << 16, 16), Ok(0));
        assert_eq!(power(-3 << 8, 3 << 8, 8), Ok(-27 << 8));
        assert_eq!(power(3, 2 << 1, 1), Ok(5)); // 1.5² = 2.25 = 4.5 halves → 5 (away)
        assert_eq!(power(-3, 2 << 1, 1), Ok(5));
        assert_eq!(power(-3, 3 << 1, 1), Ok(-7)); // −3.375 = −6.75 halves
        assert_eq!(power(2, 31, 0), Err(FixedError::Overflow));
        assert_eq!(power(2, 30, 0), Ok(1 << 30));
        assert_eq!(power(-2, 31, 0), Ok(i32::MIN));
        assert_eq!(power(1 << 15, 2 << 16, 16), Ok(1 << 14));
        // n > 64 goes through exp(n·ln x): 1.0625^100 · 16 = 6870.90
        assert_eq!(power(17, 100 << 4, 4), Ok(6871));
        assert_eq!(power(-17, 101 << 4, 4), Ok(-7300));
    }

    #[test]
    fn non_integral_powers() {
        assert_eq!(power(4 << 16, 1 << 15, 16), Ok(2 << 16));
        assert_eq!(power(-4 << 16, 1 << 15, 16), Err(FixedError::Domain));
        assert_eq!(power(0, -(1 << 16), 16), Err(FixedError::Domain));
        assert_eq!(power(2 << 16, -(1 << 16), 16), Ok(1 << 15));
        assert_eq!(power(i32::MAX, i32::MAX, 0), Err(FixedError::Overflow));
        // Exact ties: 2.25^4.5 · 2^8 = 9841.5, 0.25^4.5 · 2^8 = 0.5, 0.140625^1.5 · 2^8 = 13.5.
        assert_eq!(power(576, 1152, 8), Ok(9842));
        assert_eq!(power(64, 1152, 8), Ok(1));
        assert_eq!(power(36, 384, 8), Ok(14));
    }
}
