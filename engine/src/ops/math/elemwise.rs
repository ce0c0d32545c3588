//! Elementwise operators of spec 001 ("Elemwise Operators"): `abs`, `cvm_precision`,
//! `elemwise_add`, `elemwise_sub`, `negative`, `clip`, `cvm_clip`, `cvm_left_shift`,
//! `cvm_right_shift`.
//!
//! Values of a tensor of precision p ≤ 32 never reach −2^31, so negation and absolute value
//! cannot overflow; sums and shifts are computed in i64 and narrowed checked.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::attrs::{AttrKind, Attrs, in_range, spec};
use crate::error::Result;
use crate::fail;
use crate::kernels::map;
use crate::ops::common::{narrow, output_precision};
use crate::ops::{Arity, Family, OpDef, Operator};
use crate::tensor::{
    MAX_PRECISION, TensorMut, TensorRef, TensorType, bit_width, clip_to_precision,
};

/// What a one-input elementwise operator computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryKind {
    /// `abs`: |x|; precision p.
    Abs,
    /// `negative`: −x; precision p.
    Negative,
    /// `cvm_precision`: the number of bits of |x| (⌈log2(|x| + 1)⌉), 1 for x = 0; precision 6.
    CvmPrecision,
    /// `clip`: x limited to [a_min, a_max]; precision nprec(max(|a_min|, |a_max|)).
    Clip {
        /// Lower bound.
        min: i32,
        /// Upper bound.
        max: i32,
    },
    /// `cvm_clip`: x limited to ±(2^(precision−1) − 1); precision `precision`.
    CvmClip {
        /// Target precision.
        precision: u8,
    },
    /// `cvm_left_shift`: clip(x · 2^shift_bit) to `precision`; requires p + shift_bit ≤ 32.
    CvmLeftShift {
        /// Target precision.
        precision: u8,
        /// Shift in 1..=32.
        shift_bit: u32,
    },
    /// `cvm_right_shift`: clip(⌊(⌊x / 2^(shift_bit−1)⌋ + 1) / 2⌋) to `precision`.
    CvmRightShift {
        /// Target precision.
        precision: u8,
        /// Shift in 1..=32.
        shift_bit: u32,
    },
}

/// A one-input elementwise operator (spec 001 "abs", "cvm_precision", "negative", "clip",
/// "cvm_cilp" (its spelling of `cvm_clip`), "cvm_left_shift", "cvm_right_shift").
///
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
#[derive(Debug)]
pub struct Unary {
    kind: UnaryKind,
}

/// nprec(n) = bits(n + 1) + 1 of cvm-compat §3: the precision that holds ±n.
fn nprec(n: u64) -> u32 {
    bit_width(n + 1) + 1
}

/// The rounding shift of spec 001: ⌊(⌊x / 2^(s−1)⌋ + 1) / 2⌋ with arithmetic shifts, s in 1..=32.
pub fn rounding_shift(value: i64, shift_bit: u32) -> i64 {
    ((value >> (shift_bit - 1)) + 1) >> 1
}

/// [`rounding_shift`] in 32-bit arithmetic, for the vectorised loops: with y = ⌊x / 2^(s−1)⌋,
/// ⌊(y + 1) / 2⌋ = ⌊y / 2⌋ + (y mod 2), which never overflows. s in 1..=32.
#[inline(always)]
fn rounding_shift32(value: i32, shift_bit: u32) -> i32 {
    let halved = value >> (shift_bit - 1);
    (halved >> 1) + (halved & 1)
}

/// The test-only fault of the `fault-injection` feature: the elements of `y` in whole blocks of
/// [`crate::kernels::elementwise::MAP_BLOCK`] (the vector path of `map`) take the shift truncated,
/// ⌊x / 2^s⌋, instead of rounded; the tail keeps the rounding. Never in `engine.wasm`.
#[cfg(feature = "fault-injection")]
fn truncate_whole_blocks(y: &mut [i32], x: &[i32], shift_bit: u32, bound: i32) {
    let block = crate::kernels::elementwise::MAP_BLOCK;
    let whole = y.len().min(x.len()) / block * block;
    for (y, &x) in y[..whole].iter_mut().zip(&x[..whole]) {
        *y = clip32((x >> (shift_bit - 1)) >> 1, bound);
    }
}

/// [`clip_to_precision`] of an `i32`, in 32-bit arithmetic: the bound ±(2^(p−1) − 1) fits.
#[inline(always)]
fn clip32(value: i32, bound: i32) -> i32 {
    value.clamp(-bound, bound)
}

impl Operator for Unary {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let input = &inputs[0];
        let precision = match self.kind {
            UnaryKind::Abs | UnaryKind::Negative => input.precision,
            UnaryKind::CvmPrecision => 6,
            UnaryKind::Clip { min, max } => {
                let bound = i64::from(min)
                    .unsigned_abs()
                    .max(i64::from(max).unsigned_abs());
                output_precision(nprec(bound))?
            }
            UnaryKind::CvmClip { precision } | UnaryKind::CvmRightShift { precision, .. } => {
                precision
            }
            UnaryKind::CvmLeftShift {
                precision,
                shift_bit,
            } => {
                if u32::from(input.precision) + shift_bit > u32::from(MAX_PRECISION) {
                    return Err(fail!(
                        PrecisionConstraint,
                        "input precision {} + shift_bit {shift_bit} exceeds 32",
                        input.precision
                    ));
                }
                precision
            }
        };
        Ok(vec![TensorType {
            shape: input.shape.clone(),
            precision,
        }])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let (y, x) = (&mut *outputs[0].data, inputs[0].data);
        let mut pairs = y.iter_mut().zip(x);
        match self.kind {
            // |x| and −x of values within a precision ≤ 32 fit i32; narrowing is still checked.
            UnaryKind::Abs => {
                pairs.try_for_each(|(y, &x)| narrow(i64::from(x).abs()).map(|v| *y = v))?
            }
            UnaryKind::Negative => {
                pairs.try_for_each(|(y, &x)| narrow(-i64::from(x)).map(|v| *y = v))?
            }
            UnaryKind::CvmPrecision => pairs.for_each(|(y, &x)| {
                *y = if x == 0 {
                    1
                } else {
                    bit_width(u64::from(x.unsigned_abs())) as i32
                };
            }),
            UnaryKind::Clip { min, max } => map(y, x, |x| x.clamp(min, max)),
            // The clipping and shifting loops stay in 32 bits, so that they vectorise.
            UnaryKind::CvmClip { precision } => {
                let bound = clip_to_precision(i64::MAX, precision);
                map(y, x, |x| clip32(x, bound));
            }
            UnaryKind::CvmLeftShift {
                precision,
                shift_bit,
            } => {
                // p + shift_bit ≤ 32 (checked at validation) keeps |x| · 2^shift_bit below
                // 2^31, so the 32-bit shift is exact.
                let bound = clip_to_precision(i64::MAX, precision);
                map(y, x, |x| clip32(x << shift_bit, bound));
            }
            UnaryKind::CvmRightShift {
                precision,
                shift_bit,
            } => {
                let bound = clip_to_precision(i64::MAX, precision);
                map(y, x, |x| clip32(rounding_shift32(x, shift_bit), bound));
                #[cfg(feature = "fault-injection")]
                truncate_whole_blocks(y, x, shift_bit, bound);
            }
        }
        Ok(())
    }
}

/// A one-input elementwise table row.
const fn unary_row(
    code: u16,
    name: &'static str,
    attrs: &'static [crate::attrs::AttrSpec],
    build: crate::ops::Builder,
) -> OpDef {
    OpDef {
        code,
        name,
        family: Family::Elemwise,
        arity: Arity::Exactly(1),
        outputs: 1,
        attrs,
        build,
    }
}

/// Parses the `precision` attribute shared by `cvm_clip` and the shifts: an int in [1, 32].
fn precision_attr(attrs: &Attrs<'_>) -> Result<u8> {
    in_range(
        "precision",
        attrs.int("precision")?,
        1,
        i64::from(MAX_PRECISION),
    )
}

/// Parses `shift_bit`: an int in [1, 32].
fn shift_attr(attrs: &Attrs<'_>) -> Result<u32> {
    in_range("shift_bit", attrs.int("shift_bit")?, 1, 32)
}

fn unary(kind: UnaryKind) -> Result<Box<dyn Operator>> {
    Ok(Box::new(Unary { kind }))
}

/// Absolute value (spec 001 "abs"): `Y = |X|`.
///
/// - **Inputs**: `X` of any shape.
/// - **Attributes**: none.
/// - **Output shape**: the shape of `X`.
/// - **Semantics**: `Y[d] = |X[d]|`.
/// - **Output precision**: pX.
/// - **Rounding and overflow**: none possible (|x| ≤ 2^31 − 1); the result is narrowed with a
///   check.
/// - **Errors**: none beyond the common ones.
pub const ABS: OpDef = unary_row(30, "abs", &[], |_, _| unary(UnaryKind::Abs));

/// Number of bits of the absolute value (spec 001 "cvm_precision").
///
/// - **Inputs**: `X` of any shape.
/// - **Attributes**: none.
/// - **Output shape**: the shape of `X`.
/// - **Semantics**: `Y[d] = bits(|X[d]|)` = ⌈log2(|X[d]| + 1)⌉ for X[d] ≠ 0, and 1 for X[d] = 0.
///   Results lie in [1, 31]: 2^31 − 1 and 2^30 both take 31 bits.
/// - **Output precision**: 6 (cvm-compat §3), which holds 31.
/// - **Rounding and overflow**: none possible.
/// - **Errors**: none beyond the common ones.
pub const CVM_PRECISION: OpDef = unary_row(31, "cvm_precision", &[], |_, _| {
    unary(UnaryKind::CvmPrecision)
});

/// Negation (spec 001 "negative"): `Y = −X`.
///
/// - **Inputs**: `X` of any shape.
/// - **Attributes**: none.
/// - **Output shape**: the shape of `X`.
/// - **Semantics**: `Y[d] = −X[d]`.
/// - **Output precision**: pX.
/// - **Rounding and overflow**: none possible (−(−(2^31 − 1)) fits); the result is narrowed with a
///   check.
/// - **Errors**: none beyond the common ones.
pub const NEGATIVE: OpDef = unary_row(34, "negative", &[], |_, _| unary(UnaryKind::Negative));

/// Clip to a range (spec 001 "clip"): `Y = min(max(X, a_min), a_max)`.
///
/// - **Inputs**: `X` of any shape.
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `a_max` | integer | required | [−(2^31 − 1), 2^31 − 1]; ≥ `a_min` |
///   | `a_min` | integer | required | [−(2^31 − 1), 2^31 − 1]; < `a_max` |
///
/// - **Output shape**: the shape of `X`.
/// - **Semantics**: `Y[d] = a_max` for X[d] ≥ a_max, `a_min` for X[d] ≤ a_min, X[d] in between.
///   a_min = a_max is rejected, as by the deployed runtime (decision 28).
/// - **Output precision**: nprec(max(|a_min|, |a_max|)) = bits(max(|a_min|, |a_max|) + 1) + 1
///   (cvm-compat §3), whatever the precision of `X`; [−10, 20] gives bits(21) + 1 = 6.
/// - **Rounding and overflow**: none possible.
/// - **Errors**, in order:
///   1. `a_min` absent: `MissingAttribute`; outside [−(2^31 − 1), 2^31 − 1]:
///      `AttributeOutOfRange`.
///   2. `a_max` absent: `MissingAttribute`; outside that range: `AttributeOutOfRange`.
///   3. a_min > a_max: `AttributeOutOfRange`.
///   4. max(|a_min|, |a_max|) = 2^31 − 1, whose nprec is 33: `PrecisionOverflow`.
pub const CLIP: OpDef = unary_row(
    35,
    "clip",
    &[spec("a_max", AttrKind::Int), spec("a_min", AttrKind::Int)],
    |attrs, _| {
        let bound = i64::from(i32::MAX);
        let min: i32 = in_range("a_min", attrs.int("a_min")?, -bound, bound)?;
        let max: i32 = in_range("a_max", attrs.int("a_max")?, -bound, bound)?;
        if min >= max {
            return Err(fail!(
                AttributeOutOfRange,
                "attribute \"a_min\" = {min} is not below \"a_max\" = {max}"
            ));
        }
        unary(UnaryKind::Clip { min, max })
    },
);

/// Clip to a CVM precision (spec 001 "cvm_cilp", the heading's spelling of `cvm_clip`): `Y = clip(X, −α, α)` with
/// α = 2^(precision − 1) − 1.
///
/// - **Inputs**: `X` of any shape.
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `is_sign` | boolean | true | accepted and ignored (decision 8) |
///   | `precision` | integer | required | [1, 32] |
///
/// - **Output shape**: the shape of `X`.
/// - **Semantics**: `Y[d] = min(max(X[d], −α), α)`.
/// - **Output precision**: the `precision` attribute.
/// - **Rounding and overflow**: none possible.
/// - **Errors**, in order: `precision` absent:
///   `MissingAttribute`; `precision` outside [1, 32]: `AttributeOutOfRange`.
pub const CVM_CLIP: OpDef = unary_row(
    36,
    "cvm_clip",
    &[
        spec("is_sign", AttrKind::Bool),
        spec("precision", AttrKind::Int),
    ],
    |attrs, _| {
        unary(UnaryKind::CvmClip {
            precision: precision_attr(attrs)?,
        })
    },
);

/// Left shift, then clip to a CVM precision (spec 001 "cvm_left_shift").
///
/// - **Inputs**: `X` of any shape, with pX + `shift_bit` ≤ 32.
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `is_sign` | boolean | true | accepted and ignored (decision 8) |
///   | `precision` | integer | required | [1, 32] |
///   | `shift_bit` | integer | required | [1, 32] |
///
/// - **Output shape**: the shape of `X`.
/// - **Semantics**, with s = `shift_bit` and α = 2^(precision − 1) − 1:
///   `Y = clip(X · 2^s, −α, α)`.
/// - **Output precision**: the `precision` attribute.
/// - **Rounding and overflow**: none; with pX + s ≤ 32, |X · 2^s| ≤ 2^31 − 2^s fits `int32` before
///   clipping (decision 31).
/// - **Errors**, in order: `precision` absent:
///   `MissingAttribute`; `precision` outside [1, 32]: `AttributeOutOfRange`; `shift_bit` absent:
///   `MissingAttribute`; `shift_bit` outside [1, 32]: `AttributeOutOfRange`; pX + `shift_bit` > 32:
///   `PrecisionConstraint`.
pub const CVM_LEFT_SHIFT: OpDef = unary_row(
    37,
    "cvm_left_shift",
    &[
        spec("is_sign", AttrKind::Bool),
        spec("precision", AttrKind::Int),
        spec("shift_bit", AttrKind::Int),
    ],
    |attrs, _| {
        unary(UnaryKind::CvmLeftShift {
            precision: precision_attr(attrs)?,
            shift_bit: shift_attr(attrs)?,
        })
    },
);

/// Rounding right shift, then clip to a CVM precision (spec 001 "cvm_right_shift").
///
/// - **Inputs**: `X` of any shape.
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `is_sign` | boolean | true | accepted and ignored (decision 8) |
///   | `precision` | integer | required | [1, 32] |
///   | `shift_bit` | integer | required | [1, 32] |
///
/// - **Output shape**: the shape of `X`.
/// - **Semantics**, with s = `shift_bit` and α = 2^(precision − 1) − 1:
///
///   ```text
///   T = ⌊(⌊X / 2^(s−1)⌋ + 1) / 2⌋        computed in i64 as ((X >> (s − 1)) + 1) >> 1
///   Y = clip(T, −α, α)
///   ```
///
///   T equals ⌊X / 2^s + 1/2⌋: X / 2^s rounded to the nearest integer, halves toward +∞
///   (−1.5 → −1, −0.5 → 0, 0.5 → 1, 2.5 → 3, −2.5 → −2). This holds for every s in [1, 32],
///   including 31 and 32 (with s = 32 every `int32` gives 0), and the result is always clipped.
/// - **Output precision**: the `precision` attribute.
/// - **Rounding and overflow**: rounding as above; the shift is exact in `i64` and clipping makes
///   the result fit.
/// - **Errors**, in order: `precision` absent:
///   `MissingAttribute`; `precision` outside [1, 32]: `AttributeOutOfRange`; `shift_bit` absent:
///   `MissingAttribute`; `shift_bit` outside [1, 32]: `AttributeOutOfRange`.
pub const CVM_RIGHT_SHIFT: OpDef = unary_row(
    38,
    "cvm_right_shift",
    &[
        spec("is_sign", AttrKind::Bool),
        spec("precision", AttrKind::Int),
        spec("shift_bit", AttrKind::Int),
    ],
    |attrs, _| {
        unary(UnaryKind::CvmRightShift {
            precision: precision_attr(attrs)?,
            shift_bit: shift_attr(attrs)?,
        })
    },
);

/// Elementwise sum or difference of two tensors of the same shape (spec 001 "elemwise_add",
/// "elemwise_sub"): `Y = A ± B`.
///
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
#[derive(Debug)]
pub struct ElemwiseBinary {
    subtract: bool,
}

/// Elementwise sum of two tensors of the same shape (spec 001 "elemwise_add"): `Y = A + B`.
///
/// - **Inputs**: `A`, `B` of identical shapes (no broadcasting).
/// - **Attributes**: none.
/// - **Output shape**: the common shape.
/// - **Semantics**: `Y[d] = A[d] + B[d]`.
/// - **Output precision**: max(pA, pB) + 1.
/// - **Rounding and overflow**: exact; sums are computed in `i64` and narrowed with a check.
/// - **Errors**: `ShapeMismatch` when the shapes differ; `PrecisionOverflow` when
///   max(pA, pB) = 32.
pub const ELEMWISE_ADD: OpDef = OpDef {
    code: 32,
    name: "elemwise_add",
    family: Family::Elemwise,
    arity: Arity::Exactly(2),
    outputs: 1,
    attrs: &[],
    build: |_, _| Ok(Box::new(ElemwiseBinary { subtract: false })),
};

/// Elementwise difference of two tensors of the same shape (spec 001 "elemwise_sub"):
/// `Y = A − B`.
///
/// - **Inputs**: `A`, `B` of identical shapes (no broadcasting).
/// - **Attributes**: none.
/// - **Output shape**: the common shape.
/// - **Semantics**: `Y[d] = A[d] − B[d]`.
/// - **Output precision**: max(pA, pB) + 1.
/// - **Rounding and overflow**: exact; differences are computed in `i64` and narrowed with a
///   check.
/// - **Errors**: `ShapeMismatch` when the shapes differ; `PrecisionOverflow` when
///   max(pA, pB) = 32.
pub const ELEMWISE_SUB: OpDef = OpDef {
    code: 33,
    name: "elemwise_sub",
    family: Family::Elemwise,
    arity: Arity::Exactly(2),
    outputs: 1,
    attrs: &[],
    build: |_, _| Ok(Box::new(ElemwiseBinary { subtract: true })),
};

impl Operator for ElemwiseBinary {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let (a, b) = (&inputs[0], &inputs[1]);
        if a.shape != b.shape {
            return Err(fail!(
                ShapeMismatch,
                "operands must have the same shape, got {} and {}",
                a.shape,
                b.shape
            ));
        }
        let precision = u32::from(a.precision.max(b.precision)) + 1;
        Ok(vec![TensorType {
            shape: a.shape.clone(),
            precision: output_precision(precision)?,
        }])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let sign = if self.subtract { -1 } else { 1 };
        for ((y, &a), &b) in outputs[0]
            .data
            .iter_mut()
            .zip(inputs[0].data)
            .zip(inputs[1].data)
        {
            *y = narrow(i64::from(a) + sign * i64::from(b))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_32_bit_loops_equal_the_64_bit_formulas() {
        let mut values = vec![i32::MIN, i32::MIN + 1, i32::MAX, i32::MAX - 1, -1, 0, 1];
        let mut state: u32 = 0x1234_5678;
        for _ in 0..2000 {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            values.push(state as i32);
            values.push((state as i32) >> (state % 31));
        }
        for shift_bit in 1..=32 {
            for &x in &values {
                assert_eq!(
                    i64::from(rounding_shift32(x, shift_bit)),
                    rounding_shift(i64::from(x), shift_bit),
                    "{x} >> {shift_bit}"
                );
            }
        }
        for precision in 1..=32u8 {
            let bound = clip_to_precision(i64::MAX, precision);
            for &x in &values {
                assert_eq!(clip32(x, bound), clip_to_precision(i64::from(x), precision));
            }
        }
    }

    #[test]
    fn rounding_shift_rounds_half_up() {
        // x / 2 for shift 1: 3/2 = 1.5 → 2, -3/2 = -1.5 → -1, -5/2 = -2.5 → -2.
        assert_eq!(rounding_shift(3, 1), 2);
        assert_eq!(rounding_shift(-3, 1), -1);
        assert_eq!(rounding_shift(-5, 1), -2);
        assert_eq!(rounding_shift(-6, 2), -1); // -1.5 → -1
        assert_eq!(rounding_shift(-7, 2), -2); // -1.75 → -2
        assert_eq!(rounding_shift(10, 2), 3); // 2.5 → 3
        assert_eq!(rounding_shift(i64::from(i32::MAX), 32), 0); // 0.4999… → 0
        assert_eq!(rounding_shift(i64::from(i32::MIN), 32), 0); // -0.5 → 0
        assert_eq!(rounding_shift(i64::from(i32::MIN), 31), -1); // -1 → -1
    }

    #[test]
    fn nprec_matches_the_compat_table() {
        assert_eq!(nprec(0), 2);
        assert_eq!(nprec(1), 3);
        assert_eq!(nprec(127), 9);
        assert_eq!(nprec(126), 8);
    }
}
