//! The trigonometric functions and their inverses (`sin`, `cos`, `tan`, `asin`, `acos`,
//! `atan`), with the Payne–Hanek argument reduction that keeps large arguments exact.

use super::consts::{
    ATAN_EIGHTHS, ATAN_SERIES, COS_SERIES, PI, PI_2, PI_2_Q126, SIN_SERIES, TWO_OVER_PI,
};
use super::wide::{FRAC, ONE, div, div_shift, horner, mul, mul_shift, recip_int, signed, sqrt_q};
use super::{FixedError, FixedResult, check_frac, finish};

/// Extra fractional bits of tan's quotient before its final rounding.
const TAN_GUARD: u32 = 90;

/// Reduces ax/2^f (ax ≤ 2^31) to (q, r) with ax/2^f = q'·π/2 + r, q = q' mod 4 and
/// |r| ≤ π/4, r in Q120.
///
/// Payne–Hanek: t = ax·(2/π)/2^f is formed exactly from the integer ax and 192 bits of 2/π as
/// a 224-bit product; its integer part gives the quadrant and the next 128 bits the fraction.
/// The fraction is within 2^-127 of the true one (128 kept bits, constant error < 2^-160), so
/// r is within 2^-126 absolute however large the argument. No input comes closer to a
/// multiple of π/2 than 2^-35.6 (the continued-fraction minimum over all i32 x and f ≤ 30,
/// reached at f = 24), so r always keeps more than 90 correct significant bits, which keeps
/// tan's quotient accurate near its poles.
fn reduce(ax: u64, f: u32) -> (u32, i128) {
    let [c2, c1, c0] = TWO_OVER_PI;
    let x = u128::from(ax);
    // Products of a 32-bit and a 64-bit word are below 2^96.
    let p0 = x * u128::from(c0);
    let p1 = x * u128::from(c1);
    let p2 = x * u128::from(c2);
    let (lo, carry) = p0.overflowing_add(p1 << 64);
    let hi = p2 + (p1 >> 64) + u128::from(carry);
    // t = (hi·2^128 + lo) / 2^(192+f): fraction bits [64+f, 192+f), integer bits above.
    let s = 64 + f;
    let frac = (lo >> s) | (hi << (128 - s));
    let quadrant = ((hi >> s) as u32) & 3;
    // A fraction ≥ 1/2 belongs to the next quadrant: as a two's-complement i128 it already
    // reads as fraction − 1.
    let q = (quadrant + (frac >> 127) as u32) & 3;
    (q, mul_shift(frac as i128, PI_2_Q126, 128 + 126 - FRAC))
}

/// sin r for |r| ≤ π/4 (Q120), within 2^-116.
fn sin_kernel(r: i128) -> i128 {
    mul(horner(&SIN_SERIES, mul(r, r)), r)
}

/// cos r for |r| ≤ π/4 (Q120), within 2^-116.
fn cos_kernel(r: i128) -> i128 {
    horner(&COS_SERIES, mul(r, r))
}

/// sin x of a Q(f) value (radians), correctly rounded.
///
/// Algorithm: Payne–Hanek reduction to (q, r), then ±sin r or ±cos r by quadrant, each a
/// Taylor series in Q120. Absolute error before rounding ≤ 2^-114, for every argument up to
/// 2^31 radians.
///
/// # Errors
/// `Domain` for f > 30.
pub fn sin(x: i32, f: u32) -> FixedResult {
    check_frac(f)?;
    let (q, r) = reduce(u64::from(x.unsigned_abs()), f);
    let v = match q {
        0 => sin_kernel(r),
        1 => cos_kernel(r),
        2 => -sin_kernel(r),
        _ => -cos_kernel(r),
    };
    finish(if x < 0 { -v } else { v }, (FRAC - f) as i32)
}

/// cos x of a Q(f) value (radians), correctly rounded.
///
/// Algorithm: as [`sin`], a quadrant later. Absolute error before rounding ≤ 2^-114.
///
/// # Errors
/// `Domain` for f > 30.
pub fn cos(x: i32, f: u32) -> FixedResult {
    check_frac(f)?;
    let (q, r) = reduce(u64::from(x.unsigned_abs()), f);
    let v = match q {
        0 => cos_kernel(r),
        1 => -sin_kernel(r),
        2 => -cos_kernel(r),
        _ => sin_kernel(r),
    };
    finish(v, (FRAC - f) as i32)
}

/// tan x of a Q(f) value (radians), correctly rounded; `Overflow` near the poles.
///
/// Algorithm: Payne–Hanek reduction, then sin r / cos r (even quadrants) or −cos r / sin r
/// (odd), the quotient taken with 90 guard bits below the result's last place. Near a pole
/// the divisor is at least 2^-36 (see `reduce`) and known to ~2^-116 absolute, i.e. better
/// than 2^-80 relative, so the quotient's relative error stays below 2^-78: under 2^-47 ulp
/// even for results near 2^31 ulp.
///
/// # Errors
/// `Overflow` when |tan x|·2^f exceeds i32; `Domain` for f > 30.
pub fn tan(x: i32, f: u32) -> FixedResult {
    check_frac(f)?;
    let (q, r) = reduce(u64::from(x.unsigned_abs()), f);
    let (s, c) = (sin_kernel(r), cos_kernel(r));
    let (num, den) = if q % 2 == 0 { (s, c) } else { (-c, s) };
    // A quotient too large for i128 at this scale is ≥ 2^(37−f), far beyond i32.
    let t = div_shift(num, den, f + TAN_GUARD).ok_or(FixedError::Overflow)?;
    finish(if x < 0 { -t } else { t }, TAN_GUARD as i32)
}

/// atan z for 0 ≤ z ≤ 1 (+2^-100), Q120, within 2^-117.
///
/// z is moved to the nearest eighth c = j/8, atan z = atan c + atan t with
/// t = (z − c)/(1 + z·c), |t| ≤ 1/16, and 15 terms of atan's series.
fn atan_unit(z: i128) -> i128 {
    // j = round(8z) ∈ 0..=8.
    let j = ((z >> (FRAC - 4)) + 1) >> 1;
    let j = j.clamp(0, 8);
    let c = j << (FRAC - 3);
    // z·c = z·j/8, exact up to the final halving.
    let den = ONE + ((z * j + 4) >> 3);
    let t = div(z - c, den);
    let base = ATAN_EIGHTHS.get(j as usize).copied().unwrap_or(0);
    base + mul(horner(&ATAN_SERIES, mul(t, t)), t)
}

/// atan x of a Q(f) value, correctly rounded.
///
/// Algorithm: for |x| ≤ 1 the table-and-series kernel on x; above 1, π/2 − atan(1/x) with
/// 1/x formed by exact integer division. Absolute error before rounding ≤ 2^-115.
///
/// # Errors
/// `Domain` for f > 30.
pub fn atan(x: i32, f: u32) -> FixedResult {
    check_frac(f)?;
    let ax = u64::from(x.unsigned_abs());
    let v = if ax <= 1 << f {
        atan_unit(i128::from(ax) << (FRAC - f))
    } else {
        PI_2 - atan_unit(recip_int(ax, f))
    };
    finish(if x < 0 { -v } else { v }, (FRAC - f) as i32)
}

/// For |a| ≤ 1 (a = ax/2^f): a and √(1 − a²) in Q120, with 1 − a² exact in integers.
fn unit_and_cofactor(ax: u64, f: u32) -> (i128, i128) {
    // ax ≤ 2^f ≤ 2^30: ax² ≤ 2^60, and the Q120 form of 1 − a² is an exact shift.
    let n = (1u64 << (2 * f)) - ax * ax;
    let w = sqrt_q(u128::from(n) << (FRAC - 2 * f));
    (i128::from(ax) << (FRAC - f), signed(w, false))
}

/// asin x of a Q(f) value, correctly rounded.
///
/// Algorithm: with w = √(1 − x²) (exact radicand, Q120 root): atan(|x|/w) for |x| ≤ 1/√2,
/// π/2 − atan(w/|x|) above, so the atan argument never exceeds 1 and the endpoint ±1 needs no
/// division by 0. Absolute error before rounding ≤ 2^-114.
///
/// # Errors
/// `Domain` for |x| > 1 (|x| > 2^f) or f > 30.
pub fn asin(x: i32, f: u32) -> FixedResult {
    check_frac(f)?;
    let ax = unit_arg(x, f)?;
    let (a, w) = unit_and_cofactor(ax, f);
    let v = if below_half_root(ax, f) {
        atan_unit(div(a, w))
    } else {
        PI_2 - atan_unit(div(w, a))
    };
    finish(if x < 0 { -v } else { v }, (FRAC - f) as i32)
}

/// acos x of a Q(f) value, correctly rounded.
///
/// Algorithm: as [`asin`]: π/2 ∓ atan(|x|/w) for |x| ≤ 1/√2, atan(w/x) near 1 and
/// π − atan(w/|x|) near −1, so no result is a difference of nearly equal values. Absolute error
/// before rounding ≤ 2^-114.
///
/// # Errors
/// `Domain` for |x| > 1 or f > 30; `Overflow` when the result exceeds i32 (f = 30 and
/// acos x ≥ 2, i.e. x ≤ cos 2).
pub fn acos(x: i32, f: u32) -> FixedResult {
    check_frac(f)?;
    let ax = unit_arg(x, f)?;
    let (a, w) = unit_and_cofactor(ax, f);
    let v = if below_half_root(ax, f) {
        let t = atan_unit(div(a, w));
        if x < 0 { PI_2 + t } else { PI_2 - t }
    } else {
        let t = atan_unit(div(w, a));
        if x < 0 { PI - t } else { t }
    };
    finish(v, (FRAC - f) as i32)
}

/// |x| when |x/2^f| ≤ 1, else `Domain`.
fn unit_arg(x: i32, f: u32) -> Result<u64, FixedError> {
    let ax = u64::from(x.unsigned_abs());
    if ax > 1 << f {
        Err(FixedError::Domain)
    } else {
        Ok(ax)
    }
}

/// Whether (ax/2^f)² ≤ 1/2, exactly.
fn below_half_root(ax: u64, f: u32) -> bool {
    2 * ax * ax <= 1 << (2 * f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduction_of_multiples_of_half_pi() {
        // 355 = 113π + 3.0e-5 = 226·(π/2) + 3.0e-5: quadrant 2, remainder below 2^-14.
        let (q, r) = reduce(355, 0);
        assert_eq!(q, 2);
        assert!(r > 0 && r < ONE >> 14, "{r}");
        let (q, r) = reduce(0, 12);
        assert_eq!((q, r), (0, 0));
    }

    #[test]
    fn simple_values() {
        assert_eq!(sin(0, 16), Ok(0));
        assert_eq!(cos(0, 16), Ok(1 << 16));
        assert_eq!(sin(1, 0), Ok(1));
        assert_eq!(cos(3, 0), Ok(-1));
        assert_eq!(tan(0, 30), Ok(0));
        assert_eq!(atan(1 << 20, 20), Ok(823_550)); // π/4 · 2^20 = 823549.66
        assert_eq!(asin(1 << 16, 16), Ok(102_944)); // π/2 · 2^16 = 102943.7
        assert_eq!(acos(-(1 << 16), 16), Ok(205_887)); // π · 2^16 = 205887.4
        assert_eq!(acos(-(1 << 30), 30), Err(FixedError::Overflow));
        assert_eq!(asin((1 << 16) + 1, 16), Err(FixedError::Domain));
    }
}
