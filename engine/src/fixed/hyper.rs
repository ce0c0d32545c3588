//! The hyperbolic functions and their inverses (`sinh`, `cosh`, `tanh`, `asinh`, `acosh`,
//! `atanh`), built on the exponential and logarithm kernels.

use super::explog::{exp_parts, ln_wide};
use super::wide::{
    FRAC, ONE, div, div_shift, mul, mul_wide, recip_int, shr_round, shr_signed, signed, sqrt_q,
};
use super::{FixedError, FixedResult, check_frac, finish};

/// Beyond this |x| (in units of 1), sinh and cosh overflow at every f: cosh 23 > 4.8·10^9.
const HYPERBOLIC_LIMIT: i64 = 23;

/// From this |x| on, tanh rounds to ±1 at every f ≤ 30: 1 − tanh 12 < 2e^-24 < 2^-32.
const TANH_SATURATION: i64 = 12;

/// e^a = m·2^k and e^-a = m'·2^-k for a = ax/2^f ≥ 0 (ax ≤ 23·2^f), returned as
/// (m, m'·2^-2k, k): both halves at the common scale 2^k.
fn exp_pair(ax: u64, f: u32) -> (i128, i128, i32) {
    let (m, k) = exp_parts(i128::from(ax) << (FRAC - f));
    // 1/m for m ∈ [0.70, 1.42]; k ≥ 0 because a ≥ 0.
    let inv = div(ONE, m);
    (m, shr_signed(inv, 2 * k.unsigned_abs()), k)
}

/// sinh x of a Q(f) value, correctly rounded.
///
/// Algorithm: (e^a − e^-a)/2 from one exp kernel call and a reciprocal, both at scale 2^k;
/// for small a the difference cancels but its absolute error stays below 2^-116, far below
/// 2^-f. Relative error before rounding ≤ 2^-112 for large results.
///
/// # Errors
/// `Overflow` when |sinh x|·2^f exceeds i32; `Domain` for f > 30.
pub fn sinh(x: i32, f: u32) -> FixedResult {
    check_frac(f)?;
    let ax = u64::from(x.unsigned_abs());
    if ax == 0 {
        return Ok(0);
    }
    if i64::from(x.unsigned_abs()) > HYPERBOLIC_LIMIT << f {
        return Err(FixedError::Overflow);
    }
    let (m, m_inv, k) = exp_pair(ax, f);
    let v = m - m_inv;
    finish(if x < 0 { -v } else { v }, FRAC as i32 + 1 - k - f as i32)
}

/// cosh x of a Q(f) value, correctly rounded.
///
/// Algorithm: (e^a + e^-a)/2 as for [`sinh`]. Relative error before rounding ≤ 2^-112.
///
/// # Errors
/// `Overflow` when cosh x·2^f exceeds i32; `Domain` for f > 30.
pub fn cosh(x: i32, f: u32) -> FixedResult {
    check_frac(f)?;
    let ax = u64::from(x.unsigned_abs());
    if i64::from(x.unsigned_abs()) > HYPERBOLIC_LIMIT << f {
        return Err(FixedError::Overflow);
    }
    let (m, m_inv, k) = exp_pair(ax, f);
    finish(m + m_inv, FRAC as i32 + 1 - k - f as i32)
}

/// tanh x of a Q(f) value, correctly rounded; exactly ±1 from |x| ≥ 12 on.
///
/// Algorithm: (1 − e^-2a)/(1 + e^-2a) with e^-2a from the exp kernel, sign restored after.
/// Absolute error before rounding ≤ 2^-115 (the numerator's cancellation near 0 is harmless
/// in absolute terms).
///
/// # Errors
/// `Domain` for f > 30.
pub fn tanh(x: i32, f: u32) -> FixedResult {
    check_frac(f)?;
    let ax = u64::from(x.unsigned_abs());
    let one = 1i32 << f;
    if i64::from(x.unsigned_abs()) >= TANH_SATURATION << f {
        return Ok(if x < 0 { -one } else { one });
    }
    let (m, k) = exp_parts(-(i128::from(ax) << (FRAC + 1 - f)));
    // e^-2a = m·2^k with k ≤ 0.
    let t = shr_signed(m, k.unsigned_abs());
    let v = div(ONE - t, ONE + t);
    finish(if x < 0 { -v } else { v }, (FRAC - f) as i32)
}

/// ln(ax/2^f · g) for a Q120 factor g ∈ [1, 2.5]: the product is formed exactly in 256 bits
/// and its top bits passed to the logarithm, so neither factor's range limits the other.
fn ln_scaled(ax: u64, f: u32, g: i128) -> i128 {
    let (hi, lo) = mul_wide(u128::from(ax), g.unsigned_abs());
    // ax·g < 2^31·2^122: dropping 32 bits leaves ≥ 90 significant bits and fits a u128.
    let p = shr_round(hi, lo, 32).unwrap_or(u128::MAX);
    ln_wide(p, 32 - FRAC as i32 - f as i32)
}

/// asinh x of a Q(f) value, correctly rounded.
///
/// Algorithm: for |a| ≤ 1, ln(|a| + √(a² + 1)) in Q120; above, ln(|a|·(1 + √(1 + 1/a²))) with
/// 1/a by exact integer division, so a² never has to be represented and large arguments keep
/// full precision (the log(2a) regime). Absolute error before rounding ≤ 2^-113.
///
/// # Errors
/// `Domain` for f > 30.
pub fn asinh(x: i32, f: u32) -> FixedResult {
    check_frac(f)?;
    let ax = u64::from(x.unsigned_abs());
    let v = if ax <= 1 << f {
        let a = i128::from(ax) << (FRAC - f);
        let w = signed(sqrt_q((ONE + mul(a, a)).unsigned_abs()), false);
        ln_wide((a + w).unsigned_abs(), -(FRAC as i32))
    } else {
        let u = recip_int(ax, f);
        let w = signed(sqrt_q((ONE + mul(u, u)).unsigned_abs()), false);
        ln_scaled(ax, f, ONE + w)
    };
    finish(if x < 0 { -v } else { v }, (FRAC - f) as i32)
}

/// acosh x of a Q(f) value, correctly rounded.
///
/// Algorithm: ln(a·(1 + √(1 − 1/a²))) with 1/a by exact integer division. Near a = 1 the
/// radicand 1 − 1/a² ≥ 2^-30 is known to 2^-119 absolute, so the root and the result stay
/// within 2^-105 absolute. Never overflows (acosh(2^31) < 23).
///
/// # Errors
/// `Domain` for x < 1 (x < 2^f) or f > 30.
pub fn acosh(x: i32, f: u32) -> FixedResult {
    check_frac(f)?;
    let ax = u64::try_from(x).map_err(|_| FixedError::Domain)?;
    if ax < 1 << f {
        return Err(FixedError::Domain);
    }
    let u = if ax == 1 << f { ONE } else { recip_int(ax, f) };
    let w = signed(sqrt_q((ONE - mul(u, u)).max(0).unsigned_abs()), false);
    finish(ln_scaled(ax, f, ONE + w), (FRAC - f) as i32)
}

/// atanh x of a Q(f) value, correctly rounded.
///
/// Algorithm: ½·ln(P/Q) with the integers P = 2^f + |x| and Q = 2^f − |x| (both exact, below
/// 2^31): the quotient is taken normalized near 2^120 and its logarithm is within 2^-116
/// absolute, also for tiny x where ln(P/Q) ≈ 2x.
///
/// # Errors
/// `Domain` for |x| ≥ 1 (|x| ≥ 2^f) or f > 30; `Overflow` when the result exceeds i32 (large f
/// very near ±1).
pub fn atanh(x: i32, f: u32) -> FixedResult {
    check_frac(f)?;
    let ax = u64::from(x.unsigned_abs());
    if ax >= 1 << f {
        return Err(FixedError::Domain);
    }
    let p = (1u64 << f) + ax;
    let q = (1u64 << f) - ax;
    // P/Q ∈ [2^(d−1), 2^(d+1)) for d = bits(P) − bits(Q) ∈ 0..=31, so P·2^s/Q ≈ 2^120.
    let d = q.leading_zeros() - p.leading_zeros();
    let s = FRAC - d;
    let ratio = div_shift(i128::from(p), i128::from(q), s).ok_or(FixedError::Overflow)?;
    let v = ln_wide(ratio.unsigned_abs(), -(s as i32));
    finish(if x < 0 { -v } else { v }, FRAC as i32 + 1 - f as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_values() {
        assert_eq!(sinh(0, 16), Ok(0));
        assert_eq!(cosh(0, 16), Ok(1 << 16));
        assert_eq!(cosh(21, 0), Ok(659_407_867));
        assert_eq!(cosh(22, 0), Ok(1_792_456_423));
        assert_eq!(cosh(23, 0), Err(FixedError::Overflow));
        assert_eq!(cosh(22 << 1, 1), Err(FixedError::Overflow));
        assert_eq!(sinh(-21, 0), Ok(-659_407_867));
        assert_eq!(tanh(1 << 20, 20), Ok(798_589)); // tanh 1 · 2^20 = 798589.35
        assert_eq!(tanh(-(12 << 4), 4), Ok(-16));
        assert_eq!(asinh(0, 30), Ok(0));
        assert_eq!(acosh(1 << 30, 30), Ok(0));
        assert_eq!(acosh((1 << 30) - 1, 30), Err(FixedError::Domain));
        assert_eq!(atanh(1 << 10, 10), Err(FixedError::Domain));
        assert_eq!(atanh(1 << 9, 10), Ok(562)); // atanh ½ · 2^10 = 562.49
        assert_eq!(asinh(i32::MAX, 0), Ok(22)); // ln(2^32) = 22.18
        assert_eq!(acosh(i32::MAX, 0), Ok(22));
    }
}
