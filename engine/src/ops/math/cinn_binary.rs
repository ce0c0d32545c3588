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
/// - Inputs: `x`, `y` with broadcast-compatible shapes. For LeftShift and RightShift the shift
///   may instead be the attribute `shift` (then one input).
/// - Attributes: `frac_bits` F in 0..=30, default 0 (arithmetic primitives); `shift` in 0..=31
///   (shifts).
/// - Output: the broadcast shape; precision 32 (2 for the logical primitives).
/// - Errors: `ShapeMismatch`; `DivisionByZero` (Div, FloorDiv, Mod, FloorMod by 0);
///   `IntegerOverflow` (a result outside ±(2^31 − 1), a left shift that loses bits);
///   `DomainError` (Power of x ≤ 0 with a non-integral exponent; a shift tensor value outside
///   0..=31); `AttributeOutOfRange` (F outside 0..=30, `shift` outside 0..=31).
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
    ($($constant:ident = $code:literal, $name:literal, $kind:ident;)*) => {
        $(
            #[doc = concat!("Row of `", $name, "` (see [`CinnBinary`] and [`BinaryKind::", stringify!($kind), "`]).")]
            pub const $constant: OpDef =
                row($code, $name, Arity::Exactly(2), ARITH, |attrs, _| arithmetic(attrs, BinaryKind::$kind));
        )*
    };
}

macro_rules! integer_rows {
    ($($constant:ident = $code:literal, $name:literal, $kind:ident;)*) => {
        $(
            #[doc = concat!("Row of `", $name, "` (see [`CinnBinary`] and [`BinaryKind::", stringify!($kind), "`]).")]
            pub const $constant: OpDef = row($code, $name, Arity::Exactly(2), &[], |_, _| integer(BinaryKind::$kind));
        )*
    };
}

arithmetic_rows! {
    ADD = 150, "Add", Add;
    DIV = 154, "Div", Div;
    FLOOR_DIV = 156, "FloorDiv", FloorDiv;
    FLOOR_MOD = 157, "FloorMod", FloorMod;
    MAX = 162, "Max", Max;
    MIN = 163, "Min", Min;
    MOD = 164, "Mod", Mod;
    MUL = 165, "Mul", Mul;
    POWER = 166, "Power", Power;
    SUB = 168, "Sub", Sub;
}

integer_rows! {
    BITWISE_AND = 151, "BitwiseAnd", BitwiseAnd;
    BITWISE_OR = 152, "BitwiseOr", BitwiseOr;
    BITWISE_XOR = 153, "BitwiseXor", BitwiseXor;
    LOGICAL_AND = 159, "LogicalAnd", LogicalAnd;
    LOGICAL_OR = 160, "LogicalOr", LogicalOr;
    LOGICAL_XOR = 161, "LogicalXor", LogicalXor;
}

/// Row of `LeftShift`: x·2^s; the shift is the attribute `shift` or a second input.
pub const LEFT_SHIFT: OpDef = row(158, "LeftShift", Arity::Between(1, 2), SHIFT, |attrs, n| {
    shift(attrs, n, BinaryKind::LeftShift)
});
/// Row of `RightShift`: arithmetic x >> s; the shift is the attribute `shift` or a second input.
pub const RIGHT_SHIFT: OpDef = row(
    167,
    "RightShift",
    Arity::Between(1, 2),
    SHIFT,
    |attrs, n| shift(attrs, n, BinaryKind::RightShift),
);

/// Row of [`ConstScalar`].
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
/// - Inputs: none. Attributes: `value` (required; a Q(F) integer in ±(2^31 − 1); the text model
///   writes the real number and converts it once with `frac_bits`, rounding to nearest with
///   halves away from zero), `frac_bits` F in 0..=30, default 0. The name is the node's name.
/// - Output: shape [] (one element), precision the least p with |value| ≤ 2^(p−1) − 1.
/// - Errors: `MissingAttribute`, `AttributeOutOfRange`.
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
