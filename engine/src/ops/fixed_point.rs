//! Q-format fixed point shared by the CINN primitives (spec 002) and `generate_proposals_v2`.
//!
//! Every primitive that multiplies takes `frac_bits` F (0..=30, default 0); a value x stands
//! for x / 2^F (Q(F)), inputs and output in the same F. Products are summed exactly (i128) and
//! the total is rescaled once: round_half_away_from_zero(sum / 2^F) (`rescale`). An
//! arithmetic result outside ±(2^31 − 1) is `IntegerOverflow`: arithmetic outputs have
//! precision 32 (`ARITH_PRECISION`), which admits exactly |y| ≤ 2^31 − 1.

use crate::attrs::{AttrKind, AttrSpec, Attrs, in_range, spec};
use crate::error::{Error, Result};
use crate::fail;
use crate::fixed::FixedError;

/// The `frac_bits` attribute: F in 0..=30, default 0.
pub const FRAC_BITS: AttrSpec = spec("frac_bits", AttrKind::Int);

/// Parses `frac_bits`.
///
/// # Errors
/// `AttributeOutOfRange` outside 0..=30.
pub fn frac_bits(attrs: &Attrs<'_>) -> Result<u32> {
    in_range("frac_bits", attrs.int_or("frac_bits", 0), 0, 30)
}

/// Turns a fixed-point failure into the engine's error.
pub fn fixed_error(error: FixedError, what: &str, x: i32) -> Error {
    match error {
        FixedError::Domain => fail!(
            DomainError,
            "{what}: input {x} lies outside the function's domain"
        ),
        FixedError::Overflow => fail!(
            IntegerOverflow,
            "{what}: the result for input {x} does not fit int32"
        ),
    }
}

/// Checks that a result lies within ±(2^31 − 1), the bound of precision 32.
///
/// # Errors
/// `IntegerOverflow`.
#[inline]
pub fn fit(value: i64) -> Result<i32> {
    match i32::try_from(value) {
        Ok(v) if v != i32::MIN => Ok(v),
        _ => Err(fail!(
            IntegerOverflow,
            "result {value} lies outside ±(2^31 − 1)"
        )),
    }
}

/// Precision of every arithmetic output: |y| ≤ 2^31 − 1.
pub(crate) const ARITH_PRECISION: u8 = 32;

/// Precision of boolean outputs (values 0 and 1).
pub(crate) const BOOL_PRECISION: u8 = 2;

/// Largest magnitude of an arithmetic result.
pub(crate) const MAX_RESULT: i128 = i32::MAX as i128;

/// `value` as a precision-32 result.
///
/// # Errors
/// `IntegerOverflow` outside ±(2^31 − 1).
pub(crate) fn narrow32(value: i128) -> Result<i32> {
    if (-MAX_RESULT..=MAX_RESULT).contains(&value) {
        Ok(value as i32)
    } else {
        Err(fail!(
            IntegerOverflow,
            "result {value} is outside ±(2^31 − 1)"
        ))
    }
}

/// round_half_away_from_zero(value / 2^frac) as a precision-32 result.
///
/// # Errors
/// `IntegerOverflow` when the rounded value is outside ±(2^31 − 1).
pub(crate) fn rescale(value: i128, frac: u32) -> Result<i32> {
    if frac == 0 {
        return narrow32(value);
    }
    let magnitude = value.unsigned_abs();
    // ⌊m / 2^F⌋ plus the bit just below the binary point: rounds halves up, without an addition
    // that could overflow.
    let rounded = (magnitude >> frac) + ((magnitude >> (frac - 1)) & 1);
    let rounded = i128::try_from(rounded)
        .map_err(|_| fail!(IntegerOverflow, "result of magnitude {rounded} overflows"))?;
    narrow32(if value < 0 { -rounded } else { rounded })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rescale_rounds_halves_away_from_zero() {
        assert_eq!(rescale(5, 1), Ok(3));
        assert_eq!(rescale(-5, 1), Ok(-3));
        assert_eq!(rescale(7, 2), Ok(2));
        assert_eq!(rescale(-6, 2), Ok(-2));
        assert_eq!(rescale(-5, 2), Ok(-1));
        assert_eq!(rescale(i128::from(i32::MAX), 0), Ok(i32::MAX));
        assert!(rescale(i128::from(i32::MIN), 0).is_err());
        assert!(rescale(i128::MIN, 1).is_err());
        let max = i128::from(i32::MAX);
        assert_eq!(rescale((max << 30) + (1 << 29) - 1, 30), Ok(i32::MAX));
        assert!(rescale((max << 30) + (1 << 29), 30).is_err());
        assert_eq!(rescale(-(max << 30) - (1 << 29) + 1, 30), Ok(-i32::MAX));
    }
}
