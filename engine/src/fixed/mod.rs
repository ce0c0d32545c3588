//! Deterministic fixed-point elementary functions: exp, logarithms, roots, trigonometric,
//! hyperbolic and inverse functions, erf, power and rounding of Q-format `i32` values, in
//! integer arithmetic only.
//!
//! # Format and contract
//! A value x: i32 with `frac_bits` f ∈ 0..=30 stands for the real x / 2^f; inputs and outputs
//! use the same f. Each function returns the exact real result rounded to the nearest multiple
//! of 2^-f, halves away from zero, as an i32. A result outside i32 is
//! [`FixedError::Overflow`]; an input outside the function's domain, or f > 30, is
//! [`FixedError::Domain`]. Nothing panics, for any input: every loop has a fixed bound and all
//! arithmetic is range-checked or provably bounded. Results depend on the inputs only, never on
//! the platform (no floating point, no `usize` in any value).
//!
//! # How accuracy is reached
//! The transcendental kernels compute in Q120 (`i128` with 120 fractional bits and 256-bit
//! products, see `wide`) and round exactly once at the end. Most keep about 110 correct bits;
//! the least precise are erf (a Q86 series, 2^-76 absolute), tan near its poles (2^-78
//! relative) and non-integral power (2^-80 relative): at most 2^-46 ulp before the final
//! rounding, at every f ≤ 30 and every representable result. A result is therefore the
//! correctly rounded one unless the exact value lies within that distance of a rounding
//! boundary (a half-ulp point); the error bound is 0.5 + 2^-45 ulp in every case (power's tie
//! recognition widens it from 2^-46), inside the 1 ulp contract.
//!
//! | function | algorithm | rounding |
//! | --- | --- | --- |
//! | `floor` `ceil` `trunc` `round` `round_shift` | integer masks and shifts | exact |
//! | `sqrt` | ⌊√(x·2^f)⌋ by integer Newton, then an exact half-way test | correctly rounded (proved) |
//! | `rsqrt` | ⌊√⌊2^3f/x⌋⌋, then an exact half-way test (2s+1)²·x ≤ 4·2^3f | correctly rounded (proved) |
//! | `exp` | x = k·ln2 + r, 26-term Taylor series of e^r, scaled by 2^k | correctly rounded* |
//! | `log` `log2` `log10` | x = m·2^n, ln m = 2·atanh((m−1)/(m+1)) series | correctly rounded* |
//! | `sin` `cos` `tan` | Payne–Hanek reduction with 192 bits of 2/π, Taylor sin/cos on \|r\| ≤ π/4, tan = sin/cos | correctly rounded* |
//! | `atan` | 1/x above 1, atan(j/8) table + atan((z−c)/(1+zc)) series | correctly rounded* |
//! | `asin` `acos` | atan of x/√(1−x²) or its reciprocal, 1−x² exact in integers | correctly rounded* |
//! | `sinh` `cosh` `tanh` | from the exp kernel: (e^a ∓ e^-a)/2, (1−e^-2a)/(1+e^-2a) | correctly rounded* |
//! | `asinh` `acosh` | ln(\|a\| + √(a²±1)), as ln a + ln(1 + √(1 ± 1/a²)) for \|a\| > 1 | correctly rounded* |
//! | `atanh` | ½·ln((2^f + x)/(2^f − x)) from integers | correctly rounded* |
//! | `erf` | Maclaurin series in a²/32 (Q86, up to 99 terms), ±1 for \|a\| ≥ 4.5 | correctly rounded* |
//! | `power` | integral y ≥ 0 with n ≤ 64: exact big-integer x^n; else exp(y·ln x) in Q120, exact ties recognized | exact (n ≤ 64) / correctly rounded* |
//!
//! \* Within 0.5 + 2^-45 ulp; equal to the correctly rounded result unless the exact value
//! lies within 2^-45 ulp of a half-ulp point. The accuracy suite (`tests/fixed_accuracy.rs`)
//! checks every i16 input at f = 8, 12, 16 and millions of random ones at f = 0, 4, 16, 24, 30
//! against exact references and asserts that every result is the correctly rounded one.
//!
//! Overflow is decided on the computed value, so it agrees with the exact value except within
//! the same 2^-46 ulp of the threshold.

mod consts;
mod erf;
mod exact;
mod explog;
mod hyper;
mod power;
mod trig;
mod wide;

pub use erf::erf;
pub use exact::{ceil, floor, round, rsqrt, sqrt, trunc};
pub use explog::{exp, log, log2, log10};
pub use hyper::{acosh, asinh, atanh, cosh, sinh, tanh};
pub use power::power;
pub use trig::{acos, asin, atan, cos, sin, tan};
/// ⌊√n⌋ of a `u64`, exactly: the integer root the operators' own square roots start from
/// (`layer_norm`'s reciprocal square root).
pub(crate) use wide::isqrt_u64;

/// Why a fixed-point function has no i32 result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FixedError {
    /// The input is outside the function's domain (or `frac_bits` > 30).
    Domain,
    /// The exact result, rounded, does not fit an i32.
    Overflow,
}

/// A Q-format result: the rounded value, or why there is none.
pub type FixedResult = Result<i32, FixedError>;

/// The largest supported number of fractional bits.
const MAX_FRAC_BITS: u32 = 30;

/// `Domain` unless f ≤ 30.
fn check_frac(f: u32) -> Result<(), FixedError> {
    if f > MAX_FRAC_BITS {
        Err(FixedError::Domain)
    } else {
        Ok(())
    }
}

/// One rounding of a wide value: round(value / 2^shift) to nearest, ties away from zero, as an
/// i32, or `Overflow`. The shared rescaling step of the operators (Mul/Div/Dot) and of every
/// function here.
///
/// Exact for every input: the magnitude is shifted as an unsigned 128-bit integer, so
/// `i128::MIN` and shifts of 128 or more are handled (a shift of exactly 128 rounds ±2^127 to
/// ±1, larger shifts give 0).
///
/// # Errors
/// `Overflow` when the rounded value does not fit an i32.
pub fn round_shift(value: i128, shift: u32) -> FixedResult {
    let m = value.unsigned_abs();
    let q = match shift {
        0 => m,
        // m >> shift ≤ 2^127, so adding the half bit cannot overflow.
        1..=127 => (m >> shift) + ((m >> (shift - 1)) & 1),
        128 => m >> 127,
        _ => 0,
    };
    narrow(q, value < 0)
}

/// A magnitude with a sign as an i32, or `Overflow`.
fn narrow(m: u128, neg: bool) -> FixedResult {
    let v = if neg {
        0i128.checked_sub_unsigned(m)
    } else {
        i128::try_from(m).ok()
    };
    v.and_then(|v| i32::try_from(v).ok())
        .ok_or(FixedError::Overflow)
}

/// round(v / 2^shift) for a possibly negative shift (a negative shift multiplies exactly).
fn finish(v: i128, shift: i32) -> FixedResult {
    match u32::try_from(shift) {
        Ok(s) => round_shift(v, s),
        Err(_) => {
            let up = shift.unsigned_abs();
            if up >= 64 && v != 0 {
                return Err(FixedError::Overflow);
            }
            let scaled = v
                .checked_mul(1i128 << up.min(63))
                .ok_or(FixedError::Overflow)?;
            round_shift(scaled, 0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_shift_rounds_half_away_from_zero() {
        assert_eq!(round_shift(5, 1), Ok(3));
        assert_eq!(round_shift(-5, 1), Ok(-3));
        assert_eq!(round_shift(-3, 1), Ok(-2));
        assert_eq!(round_shift(7, 2), Ok(2));
        assert_eq!(round_shift(i128::from(i32::MAX), 0), Ok(i32::MAX));
        assert_eq!(round_shift(i128::from(i32::MIN), 0), Ok(i32::MIN));
        assert_eq!(
            round_shift(i128::from(i32::MAX) + 1, 0),
            Err(FixedError::Overflow)
        );
        assert_eq!(round_shift(i128::MIN, 128), Ok(-1));
        assert_eq!(round_shift(i128::MAX, 128), Ok(0));
        assert_eq!(round_shift(i128::MIN, 127), Ok(-1));
        assert_eq!(round_shift(i128::MIN, 200), Ok(0));
        assert_eq!(round_shift(-(1i128 << 126), 127), Ok(-1));
        assert_eq!(round_shift(i128::MIN, 96), Ok(i32::MIN));
        assert_eq!(round_shift(i128::MIN, 95), Err(FixedError::Overflow));
        assert_eq!(round_shift(-(1i128 << 100), 69), Ok(i32::MIN));
    }

    #[test]
    fn finish_handles_negative_shifts() {
        assert_eq!(finish(3, -2), Ok(12));
        assert_eq!(finish(1, -40), Err(FixedError::Overflow));
        assert_eq!(finish(0, -90), Ok(0));
    }

    #[test]
    fn frac_bits_above_30_are_a_domain_error() {
        type Unary = fn(i32, u32) -> FixedResult;
        let all: [Unary; 23] = [
            exp, log, log2, log10, sqrt, rsqrt, sin, cos, tan, asin, acos, atan, sinh, cosh, tanh,
            asinh, acosh, atanh, erf, floor, ceil, trunc, round,
        ];
        for func in all {
            assert_eq!(func(1, 31), Err(FixedError::Domain));
            assert_eq!(func(1, u32::MAX), Err(FixedError::Domain));
        }
        assert_eq!(power(1, 1, 31), Err(FixedError::Domain));
    }
}
