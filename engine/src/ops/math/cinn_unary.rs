//! CINN unary primitives of spec 002 ("Unary Primitive APIs") in Q-format fixed point:
//! transcendental functions, rounding, and the exact unary operators.
//!
//! A value x of a tensor with attribute `frac_bits` F stands for x / 2^F; input and output use
//! the same F. Transcendental results are the exact real function rounded to the nearest
//! multiple of 2^−F, within one unit in the last place (`crate::fixed`, whose accuracy suite
//! measures every function). Results must lie within ±(2^31 − 1), the bound of precision 32.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::attrs::{AttrSpec, Attrs};
use crate::error::Result;
use crate::fixed::{self, FixedResult};
use crate::ops::common::io_usage;
use crate::ops::fixed_point::{FRAC_BITS, fit, fixed_error, frac_bits};
use crate::ops::{Arity, OpDef, Operator, Usage};
use crate::tensor::{MAX_PRECISION, TensorMut, TensorRef, TensorType};

/// What a CINN unary primitive computes.
#[derive(Clone, Copy, Debug)]
pub enum UnaryKind {
    /// A function of `crate::fixed` (transcendental or rounding).
    Math(fn(i32, u32) -> FixedResult, &'static str),
    /// |x|.
    Abs,
    /// −x.
    Negative,
    /// x.
    Identity,
    /// −1, 0 or 1 in Q(F): −2^F, 0, 2^F.
    Sign,
    /// ~x on the int32 bits (no F).
    BitwiseNot,
    /// 1 where x = 0, else 0.
    LogicalNot,
    /// Integers are never NaN: 0.
    IsNan,
    /// Integers are never infinite: 0.
    IsInf,
    /// Integers are always finite: 1.
    IsFinite,
}

/// A CINN unary primitive (spec 002 "Unary Primitive APIs").
///
/// - Input: `x` of any shape. Output: the same shape.
/// - Attribute: `frac_bits` F in 0..=30, default 0 (every primitive but the bitwise and logical
///   ones, which act on integers as they are).
/// - Semantics: transcendental functions (Acos, Acosh, Asin, Asinh, Atan, Atanh, Cos, Cosh,
///   Erf, Exp, Log, Log10, Log2, Rsqrt, Sin, Sinh, Sqrt, Tan, Tanh): f(x / 2^F) rounded to the
///   nearest multiple of 2^−F, ties away from zero, never more than 1 ulp from the exact value.
///   Rounding (Ceil, Floor, Trunc, Round with halves away from zero): the integral value in
///   Q(F), exact. Abs, Negative, Identity, Sign (−1/0/1 in Q(F)), BitwiseNot (~x), LogicalNot
///   (0/1), IsNan and IsInf (always 0), IsFinite (always 1): exact.
/// - Output precision: 32; 2 for LogicalNot, IsNan, IsInf, IsFinite; the input's for Identity.
/// - Errors: `DomainError` (log of x ≤ 0, sqrt of x < 0, rsqrt of x ≤ 0, asin/acos outside
///   [−1, 1], atanh at or beyond ±1, acosh below 1), `IntegerOverflow` (a result outside
///   ±(2^31 − 1)), `AttributeOutOfRange` (F outside 0..=30).
#[derive(Debug)]
pub struct CinnUnary {
    kind: UnaryKind,
    frac_bits: u32,
}

impl CinnUnary {
    fn boolean(&self) -> bool {
        matches!(
            self.kind,
            UnaryKind::LogicalNot | UnaryKind::IsNan | UnaryKind::IsInf | UnaryKind::IsFinite
        )
    }
}

impl Operator for CinnUnary {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let precision = match self.kind {
            UnaryKind::Identity => inputs[0].precision,
            _ if self.boolean() => 2,
            _ => MAX_PRECISION,
        };
        Ok(vec![TensorType {
            shape: inputs[0].shape.clone(),
            precision,
        }])
    }

    fn usage(&self, inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        let mut usage = io_usage(inputs, outputs)?;
        if let UnaryKind::Math(..) = self.kind {
            usage.work.evals = outputs[0].shape.elements();
        }
        Ok(usage)
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let f = self.frac_bits;
        let one = 1i64 << f;
        for (y, &x) in outputs[0].data.iter_mut().zip(inputs[0].data) {
            let value = i64::from(x);
            *y = match self.kind {
                UnaryKind::Math(function, name) => {
                    let result = function(x, f).map_err(|e| fixed_error(e, name, x))?;
                    fit(i64::from(result))?
                }
                UnaryKind::Abs => fit(value.abs())?,
                UnaryKind::Negative => fit(-value)?,
                UnaryKind::Identity => x,
                UnaryKind::Sign => fit(value.signum() * one)?,
                UnaryKind::BitwiseNot => fit(i64::from(!x))?,
                UnaryKind::LogicalNot => i32::from(x == 0),
                UnaryKind::IsNan | UnaryKind::IsInf => 0,
                UnaryKind::IsFinite => 1,
            };
        }
        Ok(())
    }
}

/// A one-input CINN row.
const fn row(
    code: u16,
    name: &'static str,
    attrs: &'static [AttrSpec],
    build: crate::ops::Builder,
) -> OpDef {
    crate::ops::cinn_row(code, name, Arity::Exactly(1), attrs, build)
}

const WITH_F: &[AttrSpec] = &[FRAC_BITS];

fn with_f(attrs: &Attrs<'_>, kind: UnaryKind) -> Result<Box<dyn Operator>> {
    Ok(Box::new(CinnUnary {
        kind,
        frac_bits: frac_bits(attrs)?,
    }))
}

fn plain(kind: UnaryKind) -> Result<Box<dyn Operator>> {
    Ok(Box::new(CinnUnary { kind, frac_bits: 0 }))
}

macro_rules! math_rows {
    ($($constant:ident = $code:literal, $name:literal, $function:path;)*) => {
        $(
            #[doc = concat!("Row of `", $name, "`: a transcendental or rounding function in Q(F) (see [`CinnUnary`]).")]
            pub const $constant: OpDef =
                row($code, $name, WITH_F, |attrs, _| with_f(attrs, UnaryKind::Math($function, $name)));
        )*
    };
}

math_rows! {
    ACOS = 101, "Acos", fixed::acos;
    ACOSH = 102, "Acosh", fixed::acosh;
    ASIN = 103, "Asin", fixed::asin;
    ASINH = 104, "Asinh", fixed::asinh;
    ATAN = 105, "Atan", fixed::atan;
    ATANH = 106, "Atanh", fixed::atanh;
    CEIL = 108, "Ceil", fixed::ceil;
    COS = 109, "Cos", fixed::cos;
    COSH = 110, "Cosh", fixed::cosh;
    ERF = 111, "Erf", fixed::erf;
    EXP = 112, "Exp", fixed::exp;
    FLOOR = 113, "Floor", fixed::floor;
    LOG = 118, "Log", fixed::log;
    LOG10 = 119, "Log10", fixed::log10;
    LOG2 = 120, "Log2", fixed::log2;
    ROUND = 123, "Round", fixed::round;
    RSQRT = 124, "Rsqrt", fixed::rsqrt;
    SIN = 126, "Sin", fixed::sin;
    SINH = 127, "Sinh", fixed::sinh;
    SQRT = 128, "Sqrt", fixed::sqrt;
    TAN = 129, "Tan", fixed::tan;
    TANH = 130, "Tanh", fixed::tanh;
    TRUNC = 131, "Trunc", fixed::trunc;
}

/// Row of `Abs`: |x|.
pub const ABS: OpDef = row(100, "Abs", WITH_F, |attrs, _| with_f(attrs, UnaryKind::Abs));
/// Row of `BitwiseNot`: ~x on int32 bits.
pub const BITWISE_NOT: OpDef = row(107, "BitwiseNot", &[], |_, _| plain(UnaryKind::BitwiseNot));
/// Row of `Identity`: x.
pub const IDENTITY: OpDef = row(114, "Identity", WITH_F, |attrs, _| {
    with_f(attrs, UnaryKind::Identity)
});
/// Row of `IsFinite`: always 1.
pub const IS_FINITE: OpDef = row(115, "IsFinite", WITH_F, |attrs, _| {
    with_f(attrs, UnaryKind::IsFinite)
});
/// Row of `IsInf`: always 0.
pub const IS_INF: OpDef = row(116, "IsInf", WITH_F, |attrs, _| {
    with_f(attrs, UnaryKind::IsInf)
});
/// Row of `IsNan`: always 0.
pub const IS_NAN: OpDef = row(117, "IsNan", WITH_F, |attrs, _| {
    with_f(attrs, UnaryKind::IsNan)
});
/// Row of `LogicalNot`: 1 where x = 0.
pub const LOGICAL_NOT: OpDef = row(121, "LogicalNot", &[], |_, _| plain(UnaryKind::LogicalNot));
/// Row of `Negative`: −x.
pub const NEGATIVE: OpDef = row(122, "Negative", WITH_F, |attrs, _| {
    with_f(attrs, UnaryKind::Negative)
});
/// Row of `Sign`: −1, 0, 1 in Q(F).
pub const SIGN: OpDef = row(125, "Sign", WITH_F, |attrs, _| {
    with_f(attrs, UnaryKind::Sign)
});
