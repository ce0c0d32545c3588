//! The functions computed exactly in integers: rounding to an integer (`floor`, `ceil`,
//! `trunc`, `round`) and the square roots (`sqrt`, `rsqrt`), correctly rounded by an exact
//! half-way test rather than by high precision.

use super::wide::{isqrt_u64, isqrt_u128};
use super::{FixedError, FixedResult, check_frac};

/// The largest integer ≤ x/2^f, in Q(f). Exact; never overflows (i32::MIN is a multiple of
/// every 2^f with f ≤ 30).
///
/// # Errors
/// `Domain` for f > 30.
pub fn floor(x: i32, f: u32) -> FixedResult {
    check_frac(f)?;
    Ok(x & !low_mask(f))
}

/// The smallest integer ≥ x/2^f, in Q(f). Exact.
///
/// # Errors
/// `Overflow` when it exceeds i32 (x above the largest multiple of 2^f); `Domain` for f > 30.
pub fn ceil(x: i32, f: u32) -> FixedResult {
    check_frac(f)?;
    let up = i64::from(x & !low_mask(f)) + if x & low_mask(f) != 0 { 1i64 << f } else { 0 };
    i32::try_from(up).map_err(|_| FixedError::Overflow)
}

/// x/2^f rounded toward zero, in Q(f). Exact; never overflows.
///
/// # Errors
/// `Domain` for f > 30.
pub fn trunc(x: i32, f: u32) -> FixedResult {
    check_frac(f)?;
    // i64 division truncates toward zero; |x| ≤ 2^31 keeps the product in range.
    let v = i64::from(x) / (1i64 << f) * (1i64 << f);
    i32::try_from(v).map_err(|_| FixedError::Overflow)
}

/// x/2^f rounded to the nearest integer, halves away from zero, in Q(f). Exact.
///
/// # Errors
/// `Overflow` when the result exceeds i32 (e.g. near i32::MAX); `Domain` for f > 30.
pub fn round(x: i32, f: u32) -> FixedResult {
    check_frac(f)?;
    if f == 0 {
        return Ok(x);
    }
    let m = i64::from(x).abs();
    let r = ((m + (1i64 << (f - 1))) >> f) << f;
    let v = if x < 0 { -r } else { r };
    i32::try_from(v).map_err(|_| FixedError::Overflow)
}

/// The bits of a Q(f) value below its binary point.
fn low_mask(f: u32) -> i32 {
    // f ≤ 30 here, so the shift is in range.
    (1i32 << f) - 1
}

/// √x of a Q(f) value, correctly rounded (proved, not just with high probability).
///
/// Algorithm: the result is √(x·2^f) in units of 2^-f. s = ⌊√N⌋ for the integer N = x·2^f
/// < 2^61 by integer Newton; the exact root is at least s + 1/2 iff N ≥ s² + s + 1/4, i.e.
/// N > s² + s (N is an integer, so there is never a tie). Never overflows (√(2^61) < 2^31).
///
/// # Errors
/// `Domain` for x < 0 or f > 30.
pub fn sqrt(x: i32, f: u32) -> FixedResult {
    check_frac(f)?;
    let n = u64::try_from(x).map_err(|_| FixedError::Domain)? << f;
    let s = isqrt_u64(n);
    let r = if n > s * s + s { s + 1 } else { s };
    i32::try_from(r).map_err(|_| FixedError::Overflow)
}

/// 1/√x of a Q(f) value, correctly rounded (proved).
///
/// Algorithm: the result is √(2^3f / x) in units of 2^-f. s = ⌊√⌊2^3f/x⌋⌋ = ⌊√(2^3f/x)⌋
/// (flooring inside an integer square root does not change it); the exact root is at least
/// s + 1/2 iff (2s + 1)²·x ≤ 4·2^3f, all below 2^123 in u128. An exact tie (x = 2^(3f+2), only
/// possible for small f) rounds up, away from zero.
///
/// # Errors
/// `Domain` for x ≤ 0 or f > 30; `Overflow` when the result exceeds i32 (small x at large f).
pub fn rsqrt(x: i32, f: u32) -> FixedResult {
    check_frac(f)?;
    let x = u128::try_from(x)
        .ok()
        .filter(|&v| v > 0)
        .ok_or(FixedError::Domain)?;
    let n = 1u128 << (3 * f);
    let s = isqrt_u128(n / x);
    let t = 2 * s + 1;
    let r = if t * t * x <= 4 * n { s + 1 } else { s };
    i32::try_from(r).map_err(|_| FixedError::Overflow)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_to_integers() {
        // 2.5, −2.5, 2.25 and −2.75 in Q2.
        assert_eq!(
            [floor(10, 2), ceil(10, 2), trunc(10, 2), round(10, 2)],
            [Ok(8), Ok(12), Ok(8), Ok(12)]
        );
        assert_eq!(
            [floor(-10, 2), ceil(-10, 2), trunc(-10, 2), round(-10, 2)],
            [Ok(-12), Ok(-8), Ok(-8), Ok(-12)]
        );
        assert_eq!(round(9, 2), Ok(8));
        assert_eq!(round(-11, 2), Ok(-12));
        assert_eq!(ceil(i32::MAX, 4), Err(FixedError::Overflow));
        assert_eq!(round(i32::MAX, 30), Err(FixedError::Overflow));
        assert_eq!(floor(i32::MIN, 30), Ok(i32::MIN));
        assert_eq!(trunc(i32::MIN, 30), Ok(i32::MIN));
        assert_eq!(round(i32::MIN, 30), Ok(i32::MIN));
    }

    #[test]
    fn roots() {
        assert_eq!(sqrt(4 << 16, 16), Ok(2 << 16));
        assert_eq!(sqrt(2, 0), Ok(1));
        assert_eq!(sqrt(3, 0), Ok(2));
        assert_eq!(sqrt(i32::MAX, 30), Ok(1_518_500_250));
        assert_eq!(sqrt(-1, 4), Err(FixedError::Domain));
        assert_eq!(rsqrt(4, 0), Ok(1)); // 0.5 rounds away from zero
        assert_eq!(rsqrt(1 << 16, 16), Ok(1 << 16));
        assert_eq!(rsqrt(1, 30), Err(FixedError::Overflow));
        assert_eq!(rsqrt(0, 3), Err(FixedError::Domain));
    }
}
