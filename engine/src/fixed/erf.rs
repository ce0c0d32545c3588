//! The error function `erf`: a Maclaurin series in a²/32 evaluated in Q86, saturating to ±1
//! where the rounding no longer sees the difference.

use super::consts::{ERF_FRAC, ERF_SERIES, ERF_TERMS, TWO_OVER_SQRT_PI};
use super::wide::{FRAC, horner_shift, mul, mul_shift};
use super::{FixedResult, check_frac, finish};

/// Series terms evaluated for |a| ≤ q/4, as (q, terms): the first omitted term is below 2^-95
/// (the alternating series' error is below its first omitted term once terms decrease, which
/// they do long before these counts).
///
/// Two tiers only, so that the work of one evaluation varies by less than 2× with its argument
/// (53 terms up to |a| = 2.5, 99 beyond): gas prices an evaluation without seeing the value, and
/// a finer choice (down to 14 terms near 0) let a model of small arguments run at a quarter of
/// the cost of one of arguments near 4.5, so no single price was fair to both.
const TERMS_BY_QUARTER: [(u64, usize); 2] = [(10, 53), (18, ERF_TERMS)];

/// erf x of a Q(f) value, correctly rounded; exactly ±1 from |x| ≥ 4.5 on.
///
/// Algorithm: erf a = (2/√π)·a·Σ (−1)^n 32^n/(n!(2n+1))·(a²/32)^n. The variable a²/32 < 1 is
/// exact (a shift of the integer x²), the coefficients are exact rationals rounded to Q86,
/// and a Horner pass of 53 or 99 terms (see `TERMS_BY_QUARTER`) keeps every partial sum below
/// 2^37. Fixed-point Horner errors are absolute and do not grow with |a²/32| < 1: the sum is
/// within 2^-79, erf within 2^-76 (under 2^-46 ulp at f = 30). Saturation: 1 − erf 4.5 <
/// 2^-32, so the result rounds to ±2^f at every f ≤ 30.
///
/// # Errors
/// `Domain` for f > 30.
pub fn erf(x: i32, f: u32) -> FixedResult {
    check_frac(f)?;
    let ax = u64::from(x.unsigned_abs());
    let one = 1i32 << f;
    if 2 * ax >= 9 << f {
        return Ok(if x < 0 { -one } else { one });
    }
    // a²/32 in Q86: x²·2^(86 − 2f − 5); x² ≤ 2^62 and a² < 20.25 keep it below 2^86.
    let y = i128::from(ax * ax) << (ERF_FRAC - 5 - 2 * f);
    let terms = TERMS_BY_QUARTER
        .iter()
        .find(|&&(q, _)| 4 * ax <= q << f)
        .map_or(ERF_TERMS, |&(_, n)| n);
    let coeffs = ERF_SERIES.get(..terms).unwrap_or(&ERF_SERIES);
    let sum = horner_shift(coeffs, y, ERF_FRAC);
    let a = i128::from(ax) << (FRAC - f);
    let v = mul_shift(mul(a, TWO_OVER_SQRT_PI), sum, ERF_FRAC);
    finish(if x < 0 { -v } else { v }, (FRAC - f) as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_values() {
        assert_eq!(erf(0, 16), Ok(0));
        assert_eq!(erf(1 << 16, 16), Ok(55_227)); // erf 1 · 2^16 = 55227.24
        assert_eq!(erf(-(2 << 20), 20), Ok(-1_043_671)); // erf 2 · 2^20 = 1043671.04
        assert_eq!(erf(9 << 19, 20), Ok(1 << 20));
        assert_eq!(erf(i32::MIN, 0), Ok(-1));
        assert_eq!(erf(i32::MAX, 30), Ok(1_068_719_144)); // erf(2 − 2^-30) · 2^30 = 1068719144.29
    }
}
