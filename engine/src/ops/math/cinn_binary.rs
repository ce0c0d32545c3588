//! CINN binary primitives of spec 002 ("Binary Primitive APIs") in Q-format fixed point, with
//! numpy broadcasting, plus the scalar primitive `ConstScalar` (`Dot`, a matrix product, is with
//! `dense` in [`crate::ops::nn::dense`]).
//!
//! Add and Sub are exact; Mul, Div and Power rescale by `frac_bits` with one rounding of the
//! exact result; Div truncates toward zero, FloorDiv floors, Mod takes the sign of the dividend,
//! FloorMod the sign of the divisor (spec 002's formula). Results must lie within ±(2^31 − 1).

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::attrs::{AttrKind, AttrSpec, Attrs, in_range, spec};
use crate::error::Result;
use crate::fail;
use crate::fixed::{self, round_shift};
use crate::ops::cinn_row as row;
use crate::ops::common::io_usage;
use crate::ops::fixed_point::{FRAC_BITS, fit, fixed_error, frac_bits};
use crate::ops::math::broadcast::{broadcast_apply, broadcast_shape};
use crate::ops::{Arity, Family, OpDef, Operator, Usage};
use crate::tensor::{MAX_PRECISION, TensorMut, TensorRef, TensorType, bit_width};

/// What a CINN binary primitive computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryKind {
    /// x + y.
    Add,
    /// x − y.
    Sub,
    /// x·y / 2^F, one rounding (halves away from zero).
    Mul,
    /// x·2^F / y truncated toward zero.
    Div,
    /// ⌊x / y⌋ as an integral value in Q(F).
    FloorDiv,
    /// x − y·⌊x / y⌋: the sign of the divisor.
    FloorMod,
    /// x − y·trunc(x / y): the sign of the dividend.
    Mod,
    /// max(x, y).
    Max,
    /// min(x, y).
    Min,
    /// x^y in Q(F) (`crate::fixed::power`).
    Power,
    /// x·2^s, s in 0..=31; bits lost are an overflow.
    LeftShift,
    /// x >> s (arithmetic), s in 0..=31.
    RightShift,
    /// x & y.
    BitwiseAnd,
    /// x | y.
    BitwiseOr,
    /// x ^ y.
    BitwiseXor,
    /// 1 when both are non-zero.
    LogicalAnd,
    /// 1 when either is non-zero.
    LogicalOr,
    /// 1 when exactly one is non-zero.
    LogicalXor,
}

impl BinaryKind {
    fn boolean(self) -> bool {
        matches!(
            self,
            BinaryKind::LogicalAnd | BinaryKind::LogicalOr | BinaryKind::LogicalXor
        )
    }
}

/// A numpy-broadcasting CINN binary primitive (spec 002 "Binary Primitive APIs").
///
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
#[derive(Debug)]
pub struct CinnBinary {
    kind: BinaryKind,
    frac_bits: u32,
    shift: Option<u32>,
}

impl CinnBinary {
    fn apply(&self, x: i32, y: i32) -> Result<i32> {
        let (a, b) = (i64::from(x), i64::from(y));
        let f = self.frac_bits;
        let nonzero = |value: i64| -> Result<i64> {
            if value == 0 {
                Err(fail!(DivisionByZero, "division of {x} by zero"))
            } else {
                Ok(value)
            }
        };
        let shift = |amount: i64| -> Result<u32> {
            u32::try_from(amount)
                .ok()
                .filter(|&s| s <= 31)
                .ok_or_else(|| fail!(DomainError, "shift amount {amount} lies outside 0..=31"))
        };
        Ok(match self.kind {
            BinaryKind::Add => fit(a + b)?,
            BinaryKind::Sub => fit(a - b)?,
            BinaryKind::Mul => fit(i64::from(
                round_shift(i128::from(a * b), f).map_err(|e| fixed_error(e, "Mul", x))?,
            ))?,
            BinaryKind::Div => {
                // The exact quotient x·2^F / y, truncated toward zero (Rust's `/` on integers).
                let divisor = nonzero(b)?;
                let quotient = (i128::from(a) << f) / i128::from(divisor);
                fit(i64::try_from(quotient)
                    .map_err(|_| fail!(IntegerOverflow, "{x} / {y} overflows"))?)?
            }
            BinaryKind::FloorDiv => {
                let divisor = nonzero(b)?;
                // Truncate, then step down when the exact quotient is negative and inexact.
                let quotient =
                    a / divisor - i64::from(a % divisor != 0 && (a < 0) != (divisor < 0));
                fit(quotient
                    .checked_mul(1 << f)
                    .ok_or_else(|| fail!(IntegerOverflow, "⌊{x} / {y}⌋ overflows"))?)?
            }
            BinaryKind::FloorMod => {
                let divisor = nonzero(b)?;
                let remainder = a % divisor;
                fit(if remainder != 0 && (remainder < 0) != (divisor < 0) {
                    remainder + divisor
                } else {
                    remainder
                })?
            }
            BinaryKind::Mod => fit(a % nonzero(b)?)?,
            BinaryKind::Max => x.max(y),
            BinaryKind::Min => x.min(y),
            BinaryKind::Power => fit(i64::from(
                fixed::power(x, y, f).map_err(|e| fixed_error(e, "Power", x))?,
            ))?,
            BinaryKind::LeftShift => {
                let amount = self.shift.map_or_else(|| shift(b), Ok)?;
                let shifted = a << amount;
                if shifted >> amount != a {
                    return Err(fail!(IntegerOverflow, "{x} << {amount} loses bits"));
                }
                fit(shifted)?
            }
            BinaryKind::RightShift => fit(a >> self.shift.map_or_else(|| shift(b), Ok)?)?,
            BinaryKind::BitwiseAnd => fit(i64::from(x & y))?,
            BinaryKind::BitwiseOr => fit(i64::from(x | y))?,
            BinaryKind::BitwiseXor => fit(i64::from(x ^ y))?,
            BinaryKind::LogicalAnd => i32::from(x != 0 && y != 0),
            BinaryKind::LogicalOr => i32::from(x != 0 || y != 0),
            BinaryKind::LogicalXor => i32::from((x != 0) != (y != 0)),
        })
    }
}

impl Operator for CinnBinary {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let shape = match inputs {
            [x] => x.dims().to_vec(),
            [x, y, ..] => broadcast_shape(x.dims(), y.dims())?,
            [] => return Err(fail!(ArityMismatch, "takes an input")),
        };
        let precision = if self.kind.boolean() {
            2
        } else {
            MAX_PRECISION
        };
        Ok(vec![TensorType::new(shape, precision)])
    }

    fn usage(&self, inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        let mut usage = io_usage(inputs, outputs)?;
        if self.kind == BinaryKind::Power {
            usage.work.evals = outputs[0].shape.elements();
        }
        Ok(usage)
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let out = &mut outputs[0];
        match inputs {
            [x] => {
                for (y, &value) in out.data.iter_mut().zip(x.data) {
                    *y = self.apply(value, 0)?;
                }
                Ok(())
            }
            [x, y, ..] => broadcast_apply(x, y, out.dims, out.data, |a, b| self.apply(a, b)),
            [] => Ok(()),
        }
    }
}

const ARITH: &[AttrSpec] = &[FRAC_BITS];
const SHIFT: &[AttrSpec] = &[spec("shift", AttrKind::Int)];

fn arithmetic(attrs: &Attrs<'_>, kind: BinaryKind) -> Result<Box<dyn Operator>> {
    Ok(Box::new(CinnBinary {
        kind,
        frac_bits: frac_bits(attrs)?,
        shift: None,
    }))
}

fn integer(kind: BinaryKind) -> Result<Box<dyn Operator>> {
    Ok(Box::new(CinnBinary {
        kind,
        frac_bits: 0,
        shift: None,
    }))
}

fn shift(attrs: &Attrs<'_>, n_inputs: usize, kind: BinaryKind) -> Result<Box<dyn Operator>> {
    let shift = match attrs.opt_int("shift") {
        Some(amount) => Some(in_range("shift", amount, 0, 31)?),
        None => None,
    };
    let expected = if shift.is_some() { 1 } else { 2 };
    if n_inputs != expected {
        return Err(fail!(
            ArityMismatch,
            "takes {expected} input(s) {} the attribute \"shift\", got {n_inputs}",
            if shift.is_some() { "with" } else { "without" }
        ));
    }
    Ok(Box::new(CinnBinary {
        kind,
        frac_bits: 0,
        shift,
    }))
}

macro_rules! arithmetic_rows {
    ($($(#[$doc:meta])* $constant:ident = $code:literal, $name:literal, $kind:ident;)*) => {
        $(
            $(#[$doc])*
            pub const $constant: OpDef =
                row($code, $name, Arity::Exactly(2), ARITH, |attrs, _| arithmetic(attrs, BinaryKind::$kind));
        )*
    };
}

macro_rules! integer_rows {
    ($($(#[$doc:meta])* $constant:ident = $code:literal, $name:literal, $kind:ident;)*) => {
        $(
            $(#[$doc])*
            pub const $constant: OpDef = row($code, $name, Arity::Exactly(2), &[], |_, _| integer(BinaryKind::$kind));
        )*
    };
}

arithmetic_rows! {
    /// Computes x + y (spec 002 "Add"), under the rules of
    /// [CINN binary primitives](#cinn-binary-primitives).
    ///
    /// - **Inputs**: x, y.
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Result**: x + y, x − y (exact).
    /// - **Output**: broadcast shape, precision 32.
    /// - **Errors**: `ShapeMismatch`, `IntegerOverflow`.
    ADD = 150, "Add", Add;
    /// Computes x·2^F / y, truncated toward zero (spec 002 "Div"), under the rules of
    /// [CINN binary primitives](#cinn-binary-primitives).
    ///
    /// - **Inputs**: x, y.
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Result**: x·2^F / y, truncated toward zero (for F = 0, C's integer division).
    /// - **Output**: broadcast shape, precision 32.
    /// - **Errors**: `ShapeMismatch`, `DivisionByZero`, `IntegerOverflow`.
    DIV = 154, "Div", Div;
    /// Computes ⌊x / y⌋ (spec 002 "FloorDiv"), under the rules of
    /// [CINN binary primitives](#cinn-binary-primitives).
    ///
    /// - **Inputs**: x, y.
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Result**: ⌊x / y⌋·2^F: the largest integer m ≤ x / y, in Q(F).
    /// - **Output**: broadcast shape, precision 32.
    /// - **Errors**: `ShapeMismatch`, `DivisionByZero`, `IntegerOverflow`.
    FLOOR_DIV = 156, "FloorDiv", FloorDiv;
    /// Computes x − y·⌊x / y⌋ (sign of y) (spec 002 "FloorMod"), under the rules of
    /// [CINN binary primitives](#cinn-binary-primitives).
    ///
    /// - **Inputs**: x, y.
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Result**: x − y·⌊x / y⌋: zero or the sign of the divisor (spec 002's formula).
    /// - **Output**: broadcast shape, precision 32.
    /// - **Errors**: `ShapeMismatch`, `DivisionByZero`.
    FLOOR_MOD = 157, "FloorMod", FloorMod;
    /// Computes max(x, y) (spec 002 "Max"), under the rules of
    /// [CINN binary primitives](#cinn-binary-primitives).
    ///
    /// - **Inputs**: x, y.
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Result**: max(x, y), min(x, y).
    /// - **Output**: broadcast shape, precision 32.
    /// - **Errors**: `ShapeMismatch`.
    MAX = 162, "Max", Max;
    /// Computes min(x, y) (spec 002 "Min"), under the rules of
    /// [CINN binary primitives](#cinn-binary-primitives).
    ///
    /// - **Inputs**: x, y.
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Result**: max(x, y), min(x, y).
    /// - **Output**: broadcast shape, precision 32.
    /// - **Errors**: `ShapeMismatch`.
    MIN = 163, "Min", Min;
    /// Computes x − y·trunc(x / y) (sign of x) (spec 002 "Mod"), under the rules of
    /// [CINN binary primitives](#cinn-binary-primitives).
    ///
    /// - **Inputs**: x, y.
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Result**: x − y·trunc(x / y): zero or the sign of the dividend (C's `%`).
    /// - **Output**: broadcast shape, precision 32.
    /// - **Errors**: `ShapeMismatch`, `DivisionByZero`.
    MOD = 164, "Mod", Mod;
    /// Computes x·y, one rounding (spec 002 "Mul"), under the rules of
    /// [CINN binary primitives](#cinn-binary-primitives).
    ///
    /// - **Inputs**: x, y.
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Result**: x·y / 2^F, rounded once, halves away from zero.
    /// - **Output**: broadcast shape, precision 32.
    /// - **Errors**: `ShapeMismatch`, `IntegerOverflow`.
    MUL = 165, "Mul", Mul;
    /// Computes x^y (spec 002 "Power"), under the rules of
    /// [CINN binary primitives](#cinn-binary-primitives).
    ///
    /// - **Inputs**: x, y.
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Result**: x^y: for integral y ≥ 0 with y/2^F ≤ 64 the exact power, rounded once; otherwise exp(y·ln x) in Q120, rounded once; 0^0 = 1.
    /// - **Output**: broadcast shape, precision 32.
    /// - **Errors**: `ShapeMismatch`, `DomainError`, `IntegerOverflow`.
    POWER = 166, "Power", Power;
    /// Computes x − y (spec 002 "Sub"), under the rules of
    /// [CINN binary primitives](#cinn-binary-primitives).
    ///
    /// - **Inputs**: x, y.
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Result**: x + y, x − y (exact).
    /// - **Output**: broadcast shape, precision 32.
    /// - **Errors**: `ShapeMismatch`, `IntegerOverflow`.
    SUB = 168, "Sub", Sub;
}

integer_rows! {
    /// Computes x & y (spec 002 "BitwiseAnd"), under the rules of
    /// [CINN binary primitives](#cinn-binary-primitives).
    ///
    /// - **Inputs**: x, y.
    /// - **Attributes**: none.
    /// - **Result**: x & y, x \| y, x ^ y on the int32 bits.
    /// - **Output**: broadcast shape, precision 32.
    /// - **Errors**: `ShapeMismatch`, `IntegerOverflow`.
    BITWISE_AND = 151, "BitwiseAnd", BitwiseAnd;
    /// Computes x \| y (spec 002 "BitwiseOr"), under the rules of
    /// [CINN binary primitives](#cinn-binary-primitives).
    ///
    /// - **Inputs**: x, y.
    /// - **Attributes**: none.
    /// - **Result**: x & y, x \| y, x ^ y on the int32 bits.
    /// - **Output**: broadcast shape, precision 32.
    /// - **Errors**: `ShapeMismatch`.
    BITWISE_OR = 152, "BitwiseOr", BitwiseOr;
    /// Computes x ^ y (spec 002 "BitwiseXor"), under the rules of
    /// [CINN binary primitives](#cinn-binary-primitives).
    ///
    /// - **Inputs**: x, y.
    /// - **Attributes**: none.
    /// - **Result**: x & y, x \| y, x ^ y on the int32 bits.
    /// - **Output**: broadcast shape, precision 32.
    /// - **Errors**: `ShapeMismatch`, `IntegerOverflow`.
    BITWISE_XOR = 153, "BitwiseXor", BitwiseXor;
    /// Computes 1 when x ≠ 0 and y ≠ 0 (spec 002 "LogicalAnd"), under the rules of
    /// [CINN binary primitives](#cinn-binary-primitives).
    ///
    /// - **Inputs**: x, y.
    /// - **Attributes**: none.
    /// - **Result**: 1 when both, either, exactly one of x, y are non-zero; else 0.
    /// - **Output**: broadcast shape, precision 2.
    /// - **Errors**: `ShapeMismatch`.
    LOGICAL_AND = 159, "LogicalAnd", LogicalAnd;
    /// Computes 1 when x ≠ 0 or y ≠ 0 (spec 002 "LogicalOr"), under the rules of
    /// [CINN binary primitives](#cinn-binary-primitives).
    ///
    /// - **Inputs**: x, y.
    /// - **Attributes**: none.
    /// - **Result**: 1 when both, either, exactly one of x, y are non-zero; else 0.
    /// - **Output**: broadcast shape, precision 2.
    /// - **Errors**: `ShapeMismatch`.
    LOGICAL_OR = 160, "LogicalOr", LogicalOr;
    /// Computes 1 when exactly one is ≠ 0 (spec 002 "LogicalXor"), under the rules of
    /// [CINN binary primitives](#cinn-binary-primitives).
    ///
    /// - **Inputs**: x, y.
    /// - **Attributes**: none.
    /// - **Result**: 1 when both, either, exactly one of x, y are non-zero; else 0.
    /// - **Output**: broadcast shape, precision 2.
    /// - **Errors**: `ShapeMismatch`.
    LOGICAL_XOR = 161, "LogicalXor", LogicalXor;
}

/// Computes x·2^s (spec 002 "LeftShift"), under the rules of
/// [CINN binary primitives](#cinn-binary-primitives).
///
/// - **Inputs**: x, or x and s.
/// - **Attributes**: `shift` (integer, 0..=31, optional).
/// - **Result**: x·2^s on the int32 value; bits shifted out are an overflow.
/// - **Output**: broadcast shape, precision 32.
/// - **Errors**: `ArityMismatch`, `ShapeMismatch`, `DomainError`, `IntegerOverflow`.
pub const LEFT_SHIFT: OpDef = row(158, "LeftShift", Arity::Between(1, 2), SHIFT, |attrs, n| {
    shift(attrs, n, BinaryKind::LeftShift)
});
/// Computes x >> s, arithmetic (spec 002 "RightShift"), under the rules of
/// [CINN binary primitives](#cinn-binary-primitives).
///
/// - **Inputs**: x, or x and s.
/// - **Attributes**: `shift` (integer, 0..=31, optional).
/// - **Result**: x >> s, arithmetic: ⌊x / 2^s⌋.
/// - **Output**: broadcast shape, precision 32.
/// - **Errors**: `ArityMismatch`, `ShapeMismatch`, `DomainError`.
pub const RIGHT_SHIFT: OpDef = row(
    167,
    "RightShift",
    Arity::Between(1, 2),
    SHIFT,
    |attrs, n| shift(attrs, n, BinaryKind::RightShift),
);

/// A constant scalar (spec 002 "ConstScalar(value, name)").
///
/// - **Inputs**: none. The constant's name is the node's name.
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `frac_bits` | integer | 0 | [0, 30] |
///   | `value` | fixed-point number | required | a Q(F) integer in [−(2^31 − 1), 2^31 − 1] |
///
/// - **Text models** write `value` as a real number (`0.75`, `-2.5`, `1e-3`) and the importer
///   converts it once with the node's `frac_bits`: the Q(F) integer nearest to value·2^F, halves
///   away from zero (`fixed_from_decimal` in `host/formats/src/text.rs`); a value outside int32 in Q(F) is a
///   text-model error. The JSON parser reads the number as a binary double and the conversion starts
///   from the shortest decimal that identifies that double, so decimals of at most 15 significant
///   digits convert exactly, while longer ones may round differently (2.49999999999999999 reads as
///   2.5 and gives 3 in Q(0)). Canonical models store the Q(F) integer; an integer attribute is
///   accepted where a fixed-point one is expected.
/// - **Output shape**: [] (one element). **Output precision**: the least p with
///   |value| ≤ 2^(p−1) − 1 (0.75 in Q(4) = 12 has precision 5).
/// - **Errors**: `MissingAttribute` (no `value`); `AttributeOutOfRange` (F outside 0..=30, a stored
///   value outside ±(2^31 − 1)); `AttributeType` (a boolean or string `value`).
pub const CONST_SCALAR: OpDef = OpDef {
    code: 180,
    name: "ConstScalar",
    family: Family::Cinn,
    arity: Arity::Exactly(0),
    outputs: 1,
    attrs: &[FRAC_BITS, spec("value", AttrKind::Fixed)],
    build: |attrs, _| {
        frac_bits(attrs)?;
        let bound = i64::from(i32::MAX);
        Ok(Box::new(ConstScalar {
            value: in_range("value", attrs.int("value")?, -bound, bound)?,
        }))
    },
};

/// A constant scalar (spec 002 "ConstScalar(value, name)").
///
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
#[derive(Debug)]
pub struct ConstScalar {
    value: i32,
}

impl Operator for ConstScalar {
    fn infer(&self, _inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let precision = bit_width(u64::from(self.value.unsigned_abs())) + 1;
        Ok(vec![TensorType::new(Vec::new(), precision as u8)])
    }

    fn run(&self, _inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        outputs[0].data.fill(self.value);
        Ok(())
    }
}
