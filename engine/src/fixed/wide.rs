//! The kernels' working arithmetic: signed Q120 fixed point in `i128` (value · 2^120), with
//! full 256-bit products, a Newton reciprocal for division and an exact-floor integer square
//! root. Every helper is total: an impossible result saturates or returns `None`, never panics.
//!
//! Why Q120: every public function is rounded once to at most 30 fractional bits, so kernels
//! that keep ~110 correct bits leave their error far below any rounding boundary. The range of
//! Q120 in `i128` is ±128, enough for every kernel value (logarithms stay below 23, exponential
//! kernels below 2, erf's scaled series uses its own Q86 format); larger magnitudes are carried
//! as a separate power of two.

/// Fractional bits of the working format.
pub(super) const FRAC: u32 = 120;
/// 1.0 in Q120.
pub(super) const ONE: i128 = 1 << FRAC;

const LOW64: u128 = (1 << 64) - 1;

/// The exact 256-bit product a·b as (high, low) 128-bit halves.
#[inline]
pub(super) const fn mul_wide(a: u128, b: u128) -> (u128, u128) {
    let (a1, a0) = (a >> 64, a & LOW64);
    let (b1, b0) = (b >> 64, b & LOW64);
    // Four 64×64 partial products, each < 2^128; only their middle sum can carry.
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let p11 = a1 * b1;
    let (mid, c1) = p01.overflowing_add(p10);
    let (mid, c2) = mid.overflowing_add(p00 >> 64);
    let carry = ((c1 as u128) + (c2 as u128)) << 64;
    let lo = (mid << 64) | (p00 & LOW64);
    // The true product is < 2^256, so the high half cannot overflow.
    let hi = p11 + (mid >> 64) + carry;
    (hi, lo)
}

/// round((hi·2^128 + lo) / 2^s), halves rounded up, or `None` when it does not fit a u128.
#[inline]
pub(super) const fn shr_round(hi: u128, lo: u128, s: u32) -> Option<u128> {
    let (q, half) = if s == 0 {
        if hi != 0 {
            return None;
        }
        (lo, 0)
    } else if s < 128 {
        if hi >> s != 0 {
            return None;
        }
        ((lo >> s) | (hi << (128 - s)), (lo >> (s - 1)) & 1)
    } else if s == 128 {
        (hi, lo >> 127)
    } else if s < 256 {
        (hi >> (s - 128), (hi >> (s - 129)) & 1)
    } else if s == 256 {
        (0, hi >> 127)
    } else {
        (0, 0)
    };
    q.checked_add(half)
}

/// A magnitude with a sign as `i128`, saturating (callers keep magnitudes far below 2^127).
#[inline]
pub(super) const fn signed(m: u128, neg: bool) -> i128 {
    if neg {
        if m >= 1 << 127 {
            i128::MIN
        } else {
            -(m as i128)
        }
    } else if m > i128::MAX as u128 {
        i128::MAX
    } else {
        m as i128
    }
}

/// round(a·b / 2^s), halves away from zero (symmetric in sign), saturating.
#[inline]
pub(super) const fn mul_shift(a: i128, b: i128, s: u32) -> i128 {
    let (hi, lo) = mul_wide(a.unsigned_abs(), b.unsigned_abs());
    let m = match shr_round(hi, lo, s) {
        Some(m) => m,
        None => u128::MAX,
    };
    signed(m, (a < 0) != (b < 0))
}

/// Q120 product, error ≤ 2^-121.
#[inline]
pub(super) const fn mul(a: i128, b: i128) -> i128 {
    mul_shift(a, b, FRAC)
}

/// round(v / 2^s) of a signed value, halves away from zero; 0 once s ≥ 128.
#[inline]
pub(super) const fn shr_signed(v: i128, s: u32) -> i128 {
    let m = v.unsigned_abs();
    let q = if s == 0 {
        m
    } else if s < 128 {
        (m >> s) + ((m >> (s - 1)) & 1)
    } else if s == 128 {
        m >> 127
    } else {
        0
    };
    signed(q, v < 0)
}

/// Horner evaluation Σ c_i·x^i in Q120 (coefficients lowest degree first).
///
/// Each step adds at most 2^-121 of rounding; with |x| < 1 the errors do not grow, so a
/// polynomial of n terms is evaluated within n·2^-121 of its exact value.
#[inline]
pub(super) fn horner(coeffs: &[i128], x: i128) -> i128 {
    horner_shift(coeffs, x, FRAC)
}

/// Horner evaluation in Q`s` (coefficients and x in the same Q format).
#[inline]
pub(super) fn horner_shift(coeffs: &[i128], x: i128, s: u32) -> i128 {
    let mut acc = 0i128;
    for &c in coeffs.iter().rev() {
        acc = mul_shift(acc, x, s).saturating_add(c);
    }
    acc
}

/// ≈ 2^254 / d for a normalized d ∈ [2^127, 2^128), with relative error below 2^-121.
///
/// A 63-bit quotient of hardware-width integers starts one Newton step y·(2 − d·y), which
/// squares the relative error (2^-61 → 2^-122). The start is below the true value, so the
/// step's residual 2^254 − d·y is positive and below 2^193.
#[inline]
fn recip_norm(d: u128) -> u128 {
    let dh = (d >> 64) as u64;
    // (dh + 1)·2^64 > d, so y0 < 2^254/d; y0 ≤ 2^126/2^63 = 2^63 before the shift.
    let y0 = ((1u128 << 126) / (u128::from(dh) + 1)) << 64;
    let (hi, lo) = mul_wide(d, y0);
    let (elo, borrow) = 0u128.overflowing_sub(lo);
    let ehi = (1u128 << 126)
        .saturating_sub(hi)
        .saturating_sub(u128::from(borrow));
    // e < 2^193: keep its top bits (e / 2^66 < 2^127) for the correction y0·e / 2^254.
    let es = (ehi << 62) | (elo >> 66);
    let (corr, _) = mul_wide(y0, es);
    y0.saturating_add(corr >> 60)
}

/// round(a·2^s / b) within 2^-120 relative (plus one unit), or `None` when b = 0 or the
/// quotient does not fit an `i128`.
pub(super) fn div_shift(a: i128, b: i128, s: u32) -> Option<i128> {
    if b == 0 {
        return None;
    }
    let d = b.unsigned_abs();
    let z = d.leading_zeros();
    // 1/|b| = 2^z / (d·2^z) = y·2^(z − 254).
    let y = recip_norm(d << z);
    let shift = 254u32.checked_sub(s.checked_add(z)?)?;
    let (hi, lo) = mul_wide(a.unsigned_abs(), y);
    let m = shr_round(hi, lo, shift)?;
    if m > i128::MAX as u128 {
        return None;
    }
    Some(signed(m, (a < 0) != (b < 0)))
}

/// Q120 quotient a/b (see [`div_shift`]); 0 for an impossible quotient, which callers rule out.
#[inline]
pub(super) fn div(a: i128, b: i128) -> i128 {
    div_shift(a, b, FRAC).unwrap_or(0)
}

/// ⌊√n⌋ exactly, by Newton's iteration from above (at most 7 steps from a power of two ≥ √n).
pub(crate) fn isqrt_u64(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let bits = 64 - n.leading_zeros();
    let mut x: u64 = 1 << bits.div_ceil(2);
    for _ in 0..64 {
        let y = (x + n / x) >> 1;
        if y >= x {
            break;
        }
        x = y;
    }
    x
}

/// ⌊√n⌋ exactly for a u128: a 32-bit start from the high word, then Newton from above.
pub(super) fn isqrt_u128(n: u128) -> u128 {
    let Ok(top) = u64::try_from(n >> 64) else {
        return 0;
    };
    if top == 0 {
        return u128::from(isqrt_u64(n as u64));
    }
    // √n < √(top + 1)·2^32 ≤ (⌊√top⌋ + 1)·2^32: the start is above the root.
    let mut x = (u128::from(isqrt_u64(top)) + 1) << 32;
    for _ in 0..64 {
        let y = (x + n / x) >> 1;
        if y >= x {
            break;
        }
        x = y;
    }
    x
}

/// √(v / 2^120) in Q120 (that is √(v·2^120)), within one unit.
///
/// v is normalized by an even shift to m ∈ [2^126, 2^128); s = ⌊√m⌋ is exact and one Newton
/// step s + (m − s²)/(2s) at 2^64 scale gives √(m·2^128) within one unit (the step's error is
/// (m − s²)²/(8s³) ≤ 1/2 there), which the final shift only shrinks.
pub(super) fn sqrt_q(v: u128) -> u128 {
    if v == 0 {
        return 0;
    }
    let z = v.leading_zeros() & !1;
    let m = v << z;
    let s = isqrt_u128(m);
    if s == 0 {
        return 0;
    }
    // m − s² ≤ 2s < 2^65, so (m − s²)·2^63 < 2^128.
    let r = m - s * s;
    let big = (s << 64).saturating_add((r << 63) / s);
    // √(v·2^120) = √(m·2^128) / 2^(4 + z/2).
    let sh = 4 + z / 2;
    (big >> sh) + ((big >> (sh - 1)) & 1)
}

/// round(2^(120 + f) / n) for an integer n > 2^f (so the result is below 2^120): the reciprocal
/// of the Q(f) value n / 2^f in Q120, from exact integer division in two parts.
pub(super) fn recip_int(n: u64, f: u32) -> i128 {
    if n == 0 || f > 30 {
        return ONE;
    }
    let n = u128::from(n);
    let q = (1u128 << FRAC) / n;
    let r = (1u128 << FRAC) % n;
    // q < 2^(120−f) because n > 2^f; r·2^f < 2^61.
    let v = (q << f) + ((r << f) + n / 2) / n;
    signed(v, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_products_match_u128_when_small() {
        let (hi, lo) = mul_wide(u128::MAX, u128::MAX);
        assert_eq!((hi, lo), (u128::MAX - 1, 1));
        assert_eq!(mul_wide(3 << 100, 5 << 100), (15 << 72, 0));
        assert_eq!(mul(ONE, ONE), ONE);
        assert_eq!(mul(-ONE / 2, ONE / 4), -ONE / 8);
    }

    #[test]
    fn division_is_accurate() {
        for (a, b) in [
            (1i128, 3i128),
            (-7, 9),
            (ONE, ONE + 1),
            (99, -1),
            (5, 1 << 100),
        ] {
            let q = div_shift(a << 100, b, 20).unwrap_or(0);
            // q·b ≈ a·2^120 within a few units of b.
            let back = mul_shift(q, b, 0);
            let diff = (back - (a << FRAC)).unsigned_abs();
            assert!(diff <= 4 * b.unsigned_abs(), "{a}/{b}: {diff}");
        }
        assert_eq!(div_shift(1, 0, 0), None);
        assert_eq!(div_shift(i128::MAX, 1, 10), None);
    }

    #[test]
    fn integer_roots_are_exact_floors() {
        for n in [
            0u64,
            1,
            2,
            3,
            4,
            15,
            16,
            17,
            u64::MAX,
            (1 << 62) - 1,
            1 << 62,
        ] {
            let s = isqrt_u64(n);
            assert!(u128::from(s) * u128::from(s) <= u128::from(n));
            assert!(u128::from(s + 1) * u128::from(s + 1) > u128::from(n));
        }
        for n in [
            u128::MAX,
            1 << 127,
            (1 << 90) + 12345,
            1 << 64,
            (1 << 64) - 1,
        ] {
            let s = isqrt_u128(n);
            assert!(s * s <= n && (s + 1).checked_mul(s + 1).is_none_or(|t| t > n));
        }
        assert_eq!(sqrt_q(4 << FRAC), 2 << FRAC);
        assert_eq!(sqrt_q(1 << FRAC), 1 << FRAC);
        assert_eq!(sqrt_q(1 << (FRAC - 2)), 1 << (FRAC - 1));
    }
}
