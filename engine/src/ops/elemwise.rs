//! Elementwise operators of spec 001 ("Elemwise Operators"): `elemwise_add`, `cvm_clip`,
//! `cvm_right_shift`.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use cvm_gas::Param;

use super::{Arity, Family, OpDef, Operator, Usage, narrow, output_precision};
use crate::attrs::{AttrKind, Attrs, in_range, spec};
use crate::error::Result;
use crate::fail;
use crate::tensor::{MAX_PRECISION, TensorMut, TensorRef, TensorType, clip_to_precision};

/// Row of the operator table for [`ElemwiseAdd`].
pub const ELEMWISE_ADD: OpDef = OpDef {
    code: 32,
    name: "elemwise_add",
    family: Family::Elemwise,
    arity: Arity::Exactly(2),
    outputs: 1,
    attrs: &[],
    build: |_, _| Ok(Box::new(ElemwiseAdd)),
};

/// Elementwise sum of two tensors of the same shape (spec 001 "elemwise_add"): `Y = A + B`.
///
/// - Inputs: `A`, `B` of identical shape. Attributes: none. Output: that shape.
/// - Precision: max(pA, pB) + 1 (above 32 is `PrecisionOverflow`).
/// - Overflow: impossible within the inferred precision; narrowing is checked.
/// - Errors: `ShapeMismatch` if the shapes differ. Gas: `element_arith` × elements.
#[derive(Debug)]
pub struct ElemwiseAdd;

impl Operator for ElemwiseAdd {
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

    fn usage(&self, _inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        Ok(vec![(Param::ElementArith, outputs[0].shape.elements())])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        for ((y, &a), &b) in outputs[0]
            .data
            .iter_mut()
            .zip(inputs[0].data)
            .zip(inputs[1].data)
        {
            *y = narrow(i64::from(a) + i64::from(b))?;
        }
        Ok(())
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

/// Rejects `is_sign = false` (unsigned clipping is outside the specification).
fn check_signed(attrs: &Attrs<'_>) -> Result<()> {
    if attrs.bool_or("is_sign", true) {
        Ok(())
    } else {
        Err(fail!(
            AttributeOutOfRange,
            "attribute \"is_sign\" = false (unsigned clipping) is not supported"
        ))
    }
}

/// Row of the operator table for [`CvmClip`].
pub const CVM_CLIP: OpDef = OpDef {
    code: 36,
    name: "cvm_clip",
    family: Family::Elemwise,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[
        spec("is_sign", AttrKind::Bool),
        spec("precision", AttrKind::Int),
    ],
    build: |attrs, _| {
        check_signed(attrs)?;
        Ok(Box::new(CvmClip {
            precision: precision_attr(attrs)?,
        }))
    },
};

/// Clips to a CVM precision (spec 001 "cvm_clip"): `Y = clip(X, −α, α)`, α = 2^(precision−1) − 1.
///
/// - Input: `X` of any shape. Output: same shape.
/// - Attributes: `precision` in [1, 32] (required); `is_sign` must be true (default).
/// - Precision: the `precision` attribute.
/// - Errors: `MissingAttribute`, `AttributeOutOfRange`. Gas: `element_arith` × elements.
#[derive(Debug)]
pub struct CvmClip {
    precision: u8,
}

impl Operator for CvmClip {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        Ok(vec![TensorType {
            shape: inputs[0].shape.clone(),
            precision: self.precision,
        }])
    }

    fn usage(&self, _inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        Ok(vec![(Param::ElementArith, outputs[0].shape.elements())])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        for (y, &x) in outputs[0].data.iter_mut().zip(inputs[0].data) {
            *y = clip_to_precision(i64::from(x), self.precision);
        }
        Ok(())
    }
}

/// Row of the operator table for [`CvmRightShift`].
pub const CVM_RIGHT_SHIFT: OpDef = OpDef {
    code: 38,
    name: "cvm_right_shift",
    family: Family::Elemwise,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[
        spec("is_sign", AttrKind::Bool),
        spec("precision", AttrKind::Int),
        spec("shift_bit", AttrKind::Int),
    ],
    build: |attrs, _| {
        check_signed(attrs)?;
        Ok(Box::new(CvmRightShift {
            precision: precision_attr(attrs)?,
            shift_bit: in_range("shift_bit", attrs.int("shift_bit")?, 1, 32)?,
        }))
    },
};

/// Rounding right shift then clip (spec 001 "cvm_right_shift"):
/// `Y = clip(⌊(⌊X / 2^(shift_bit−1)⌋ + 1) / 2⌋, −α, α)`, α = 2^(precision−1) − 1.
///
/// - Input: `X` of any shape. Output: same shape.
/// - Attributes: `precision` in [1, 32], `shift_bit` in [1, 32] (both required); `is_sign` must
///   be true (default).
/// - Rounding: to nearest, halves toward +∞ (so −1.5 → −1, 2.5 → 3), for every shift_bit
///   including 31 and 32 (the deployed runtime skips rounding there; cvm-compat §6).
/// - Precision: the `precision` attribute.
/// - Errors: `MissingAttribute`, `AttributeOutOfRange`. Gas: `element_arith` × elements.
#[derive(Debug)]
pub struct CvmRightShift {
    precision: u8,
    shift_bit: u32,
}

/// The rounding shift of spec 001: ⌊(⌊x / 2^(s−1)⌋ + 1) / 2⌋ with arithmetic shifts, s in 1..=32.
pub fn rounding_shift(value: i64, shift_bit: u32) -> i64 {
    ((value >> (shift_bit - 1)) + 1) >> 1
}

impl Operator for CvmRightShift {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        Ok(vec![TensorType {
            shape: inputs[0].shape.clone(),
            precision: self.precision,
        }])
    }

    fn usage(&self, _inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        Ok(vec![(Param::ElementArith, outputs[0].shape.elements())])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        for (y, &x) in outputs[0].data.iter_mut().zip(inputs[0].data) {
            *y = clip_to_precision(rounding_shift(i64::from(x), self.shift_bit), self.precision);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
