//! The exponential and the logarithms (`exp`, `log`, `log2`, `log10`) and their Q120 kernels,
//! which the hyperbolic functions and `power` reuse.

use super::consts::{ATANH_SERIES, EXP_SERIES, LN2, LOG2_E, LOG10_E, SQRT2};
use super::wide::{FRAC, ONE, div, horner, mul};
use super::{FixedError, FixedResult, check_frac, finish};

/// e^a as (m, k) with e^a = m·2^k, m in Q120 within [0.70, 1.42], for |a| ≤ 64 (Q120).
///
/// a = k·ln2 + r with k = round(a/ln2) and |r| ≤ ln2/2 (+2^-100 when the rounding of k lands
/// on the other side of a half), then e^r from 26 Taylor terms. Errors: ln2 is within 2^-121,
/// so r is within |k|·2^-121 ≤ 2^-114; the series truncation is below 2^-130 and Horner adds
/// at most 26·2^-121: m is within 2^-113 relative of e^a / 2^k.
pub(super) fn exp_parts(a: i128) -> (i128, i32) {
    // |a·log2(e)| < 93·2^120, so the sum and the shift stay in range.
    let t = mul(a, LOG2_E);
    let k = ((t + (ONE >> 1)) >> FRAC) as i32;
    let r = a - i128::from(k) * LN2;
    (horner(&EXP_SERIES, r), k)
}

/// ln(v·2^e) split as (k, l) with ln(v·2^e) = k·ln2 + l, l = ln m in Q120 for a mantissa
/// m ∈ [1/√2, √2] (so |l| ≤ ln2/2). v must be positive.
///
/// ln m = 2·atanh(s) with s = (m − 1)/(m + 1), |s| ≤ 3 − 2√2 < 0.172, from 24 terms of the
/// odd series. Errors: the quotient is within 2^-119, the series within 2^-125: |l − ln m| is
/// below 2^-116, and l is exactly 0 when m = 1 (powers of two).
pub(super) fn ln_parts(v: u128, e: i32) -> (i32, i128) {
    if v == 0 {
        // Callers pass positive values; a defined answer keeps the kernel total.
        return (-200, 0);
    }
    let top = 127 - v.leading_zeros() as i32;
    // Mantissa in [1, 2) as Q120 (truncation costs at most 2^-120 relative).
    let mut m = if top >= FRAC as i32 {
        v >> (top - FRAC as i32)
    } else {
        v << (FRAC as i32 - top)
    };
    let mut k = top + e;
    if m > SQRT2 {
        m >>= 1;
        k += 1;
    }
    let m = m as i128;
    let s = div(m - ONE, m + ONE);
    let s2 = mul(s, s);
    (k, 2 * mul(horner(&ATANH_SERIES, s2), s))
}

/// ln(v·2^e) in Q120 (v > 0, |result| ≤ 88, so |k| ≤ 127).
pub(super) fn ln_wide(v: u128, e: i32) -> i128 {
    let (k, l) = ln_parts(v, e);
    i128::from(k) * LN2 + l
}

/// e^x: exponential of a Q(f) value, correctly rounded (see the module table).
///
/// Algorithm: |x| > 22 is decided without computing (e^22 > 2^31 overflows at every f;
/// e^-22·2^30 < 1/2 rounds to 0); otherwise the Q120 kernel `exp_parts` gives e^x = m·2^k,
/// rounded once at scale 2^(k+f). Relative error before rounding ≤ 2^-113: at most 2^-82 ulp
/// for any representable result.
///
/// # Errors
/// `Overflow` when the rounded result exceeds i32; `Domain` for f > 30.
pub fn exp(x: i32, f: u32) -> FixedResult {
    check_frac(f)?;
    let limit = 22i64 << f;
    if i64::from(x) > limit {
        return Err(FixedError::Overflow);
    }
    if i64::from(x) < -limit {
        return Ok(0);
    }
    let (m, k) = exp_parts(i128::from(x) << (FRAC - f));
    finish(m, FRAC as i32 - k - f as i32)
}

/// ln x: natural logarithm of a Q(f) value, correctly rounded.
///
/// Algorithm: x = m·2^n exactly from the integer's top bit, ln x = (n − f)·ln2 + ln m with the
/// `ln_parts` kernel (atanh series on the mantissa). Absolute error before rounding ≤ 2^-114.
///
/// # Errors
/// `Domain` for x ≤ 0 or f > 30; `Overflow` when |ln x|·2^f exceeds i32 (f ≥ 27 and tiny x).
pub fn log(x: i32, f: u32) -> FixedResult {
    check_frac(f)?;
    let v = positive(x)?;
    finish(ln_wide(v, -(f as i32)), (FRAC - f) as i32)
}

/// log2 x of a Q(f) value, correctly rounded; exact for powers of two.
///
/// Algorithm: as [`log`], with log2 x = (n − f) + ln m · log2(e): the integer part is exact.
/// Absolute error before rounding ≤ 2^-115.
///
/// # Errors
/// `Domain` for x ≤ 0 or f > 30; `Overflow` when the result exceeds i32.
pub fn log2(x: i32, f: u32) -> FixedResult {
    check_frac(f)?;
    let v = positive(x)?;
    let (k, l) = ln_parts(v, -(f as i32));
    finish(i128::from(k) * ONE + mul(l, LOG2_E), (FRAC - f) as i32)
}

/// log10 x of a Q(f) value, correctly rounded.
///
/// Algorithm: ln x from the [`log`] kernel times log10(e). Absolute error before rounding
/// ≤ 2^-114.
///
/// # Errors
/// `Domain` for x ≤ 0 or f > 30; `Overflow` when the result exceeds i32.
pub fn log10(x: i32, f: u32) -> FixedResult {
    check_frac(f)?;
    let v = positive(x)?;
    finish(mul(ln_wide(v, -(f as i32)), LOG10_E), (FRAC - f) as i32)
}

/// x as a positive u128, or `Domain`.
fn positive(x: i32) -> Result<u128, FixedError> {
    u128::try_from(x)
        .ok()
        .filter(|&v| v > 0)
        .ok_or(FixedError::Domain)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_invert_each_other() {
        // e^(ln 2) = 2 and ln(e^1) = 1 to ~2^-110.
        let (m, k) = exp_parts(LN2);
        let two = super::super::wide::shr_signed(m, 0) << k;
        assert!((two - 2 * ONE).abs() < 1 << 12, "{two:x}");
        let (m, k) = exp_parts(ONE);
        let l = ln_wide(m as u128, k - FRAC as i32);
        assert!((l - ONE).abs() < 1 << 12, "{l:x}");
    }

    #[test]
    fn simple_values() {
        assert_eq!(exp(0, 16), Ok(1 << 16));
        assert_eq!(exp(1, 0), Ok(3));
        assert_eq!(exp(22, 0), Err(FixedError::Overflow));
        assert_eq!(exp(21, 0), Ok(1_318_815_734));
        assert_eq!(log(1 << 20, 20), Ok(0));
        assert_eq!(log(0, 8), Err(FixedError::Domain));
        assert_eq!(log2(1 << 10, 0), Ok(10));
        assert_eq!(log2(1, 30), Err(FixedError::Overflow));
        assert_eq!(log2(1, 26), Ok(-26 << 26));
        assert_eq!(log10(1000, 0), Ok(3));
        assert_eq!(log(7, 31), Err(FixedError::Domain));
    }
}
