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
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
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
    ($($(#[$doc:meta])* $constant:ident = $code:literal, $name:literal, $function:path;)*) => {
        $(
            $(#[$doc])*
            pub const $constant: OpDef =
                row($code, $name, WITH_F, |attrs, _| with_f(attrs, UnaryKind::Math($function, $name)));
        )*
    };
}

math_rows! {
    /// Computes acos(x) in [0, π] (spec 002 "Acos"), under the rules of
    /// [CINN unary primitives](#cinn-unary-primitives).
    ///
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Domain**: −1 ≤ x ≤ 1 (`DomainError` outside).
    /// - **`IntegerOverflow`**: F = 30 and acos x ≥ 2 (x below cos 2 ≈ −0.416).
    /// - **Output**: the shape of x, precision 32.
    ACOS = 101, "Acos", fixed::acos;
    /// Computes acosh(x) (spec 002 "Acosh"), under the rules of
    /// [CINN unary primitives](#cinn-unary-primitives).
    ///
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Domain**: x ≥ 1 (`DomainError` outside).
    /// - **`IntegerOverflow`**: never.
    /// - **Output**: the shape of x, precision 32.
    ACOSH = 102, "Acosh", fixed::acosh;
    /// Computes asin(x) (spec 002 "Asin"), under the rules of
    /// [CINN unary primitives](#cinn-unary-primitives).
    ///
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Domain**: −1 ≤ x ≤ 1 (`DomainError` outside).
    /// - **`IntegerOverflow`**: never.
    /// - **Output**: the shape of x, precision 32.
    ASIN = 103, "Asin", fixed::asin;
    /// Computes asinh(x) (spec 002 "Asinh"), under the rules of
    /// [CINN unary primitives](#cinn-unary-primitives).
    ///
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Domain**: all.
    /// - **`IntegerOverflow`**: never.
    /// - **Output**: the shape of x, precision 32.
    ASINH = 104, "Asinh", fixed::asinh;
    /// Computes atan(x) (spec 002 "Atan"), under the rules of
    /// [CINN unary primitives](#cinn-unary-primitives).
    ///
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Domain**: all.
    /// - **`IntegerOverflow`**: never.
    /// - **Output**: the shape of x, precision 32.
    ATAN = 105, "Atan", fixed::atan;
    /// Computes atanh(x) (spec 002 "Atanh"), under the rules of
    /// [CINN unary primitives](#cinn-unary-primitives).
    ///
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Domain**: −1 < x < 1 (`DomainError` outside).
    /// - **`IntegerOverflow`**: F ≥ 28 and x near ±1.
    /// - **Output**: the shape of x, precision 32.
    ATANH = 106, "Atanh", fixed::atanh;
    /// Computes ⌈x⌉ (spec 002 "Ceil"), under the rules of
    /// [CINN unary primitives](#cinn-unary-primitives).
    ///
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Domain**: all.
    /// - **`IntegerOverflow`**: x above the largest multiple of 2^F that fits.
    /// - **Output**: the shape of x, precision 32.
    CEIL = 108, "Ceil", fixed::ceil;
    /// Computes cos(x) (spec 002 "Cos"), under the rules of
    /// [CINN unary primitives](#cinn-unary-primitives).
    ///
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Domain**: all.
    /// - **`IntegerOverflow`**: never.
    /// - **Output**: the shape of x, precision 32.
    COS = 109, "Cos", fixed::cos;
    /// Computes cosh(x) (spec 002 "Cosh"), under the rules of
    /// [CINN unary primitives](#cinn-unary-primitives).
    ///
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Domain**: all.
    /// - **`IntegerOverflow`**: cosh x ≥ 2^(31−F) (rounded).
    /// - **Output**: the shape of x, precision 32.
    COSH = 110, "Cosh", fixed::cosh;
    /// Computes erf(x) (spec 002 "Erf"), under the rules of
    /// [CINN unary primitives](#cinn-unary-primitives).
    ///
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Domain**: all (±1 from \|x\| ≥ 4.5 on).
    /// - **`IntegerOverflow`**: never.
    /// - **Output**: the shape of x, precision 32.
    ERF = 111, "Erf", fixed::erf;
    /// Computes e^x (spec 002 "Exp"), under the rules of
    /// [CINN unary primitives](#cinn-unary-primitives).
    ///
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Domain**: all.
    /// - **`IntegerOverflow`**: e^x ≥ 2^(31−F) (rounded).
    /// - **Output**: the shape of x, precision 32.
    EXP = 112, "Exp", fixed::exp;
    /// Computes ⌊x⌋ (spec 002 "Floor"), under the rules of
    /// [CINN unary primitives](#cinn-unary-primitives).
    ///
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Domain**: all.
    /// - **`IntegerOverflow`**: never.
    /// - **Output**: the shape of x, precision 32.
    FLOOR = 113, "Floor", fixed::floor;
    /// Computes ln x (spec 002 "Log"), under the rules of
    /// [CINN unary primitives](#cinn-unary-primitives).
    ///
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Domain**: x > 0 (`DomainError` outside).
    /// - **`IntegerOverflow`**: F ≥ 27 and x near 0.
    /// - **Output**: the shape of x, precision 32.
    LOG = 118, "Log", fixed::log;
    /// Computes log10 x (spec 002 "Log10"), under the rules of
    /// [CINN unary primitives](#cinn-unary-primitives).
    ///
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Domain**: x > 0 (`DomainError` outside).
    /// - **`IntegerOverflow`**: F ≥ 28 and x near 0.
    /// - **Output**: the shape of x, precision 32.
    LOG10 = 119, "Log10", fixed::log10;
    /// Computes log2 x (spec 002 "Log2"), under the rules of
    /// [CINN unary primitives](#cinn-unary-primitives).
    ///
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Domain**: x > 0 (`DomainError` outside).
    /// - **`IntegerOverflow`**: F ≥ 27 and x near 0.
    /// - **Output**: the shape of x, precision 32.
    LOG2 = 120, "Log2", fixed::log2;
    /// Computes nearest integer, halves away from zero (spec 002 "Round"), under the rules of
    /// [CINN unary primitives](#cinn-unary-primitives).
    ///
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Domain**: all.
    /// - **`IntegerOverflow`**: the rounded value exceeds 2^31 − 1.
    /// - **Output**: the shape of x, precision 32.
    ROUND = 123, "Round", fixed::round;
    /// Computes 1/√x (spec 002 "Rsqrt"), under the rules of
    /// [CINN unary primitives](#cinn-unary-primitives).
    ///
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Domain**: x > 0 (`DomainError` outside).
    /// - **`IntegerOverflow`**: F ≥ 21 and x small.
    /// - **Output**: the shape of x, precision 32.
    RSQRT = 124, "Rsqrt", fixed::rsqrt;
    /// Computes sin(x) (spec 002 "Sin"), under the rules of
    /// [CINN unary primitives](#cinn-unary-primitives).
    ///
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Domain**: all.
    /// - **`IntegerOverflow`**: never.
    /// - **Output**: the shape of x, precision 32.
    SIN = 126, "Sin", fixed::sin;
    /// Computes sinh(x) (spec 002 "Sinh"), under the rules of
    /// [CINN unary primitives](#cinn-unary-primitives).
    ///
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Domain**: all.
    /// - **`IntegerOverflow`**: \|sinh x\| ≥ 2^(31−F) (rounded).
    /// - **Output**: the shape of x, precision 32.
    SINH = 127, "Sinh", fixed::sinh;
    /// Computes √x (spec 002 "Sqrt"), under the rules of
    /// [CINN unary primitives](#cinn-unary-primitives).
    ///
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Domain**: x ≥ 0 (`DomainError` outside).
    /// - **`IntegerOverflow`**: never.
    /// - **Output**: the shape of x, precision 32.
    SQRT = 128, "Sqrt", fixed::sqrt;
    /// Computes tan(x) (spec 002 "Tan"), under the rules of
    /// [CINN unary primitives](#cinn-unary-primitives).
    ///
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Domain**: all.
    /// - **`IntegerOverflow`**: x near an odd multiple of π/2.
    /// - **Output**: the shape of x, precision 32.
    TAN = 129, "Tan", fixed::tan;
    /// Computes tanh(x) (spec 002 "Tanh"), under the rules of
    /// [CINN unary primitives](#cinn-unary-primitives).
    ///
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Domain**: all.
    /// - **`IntegerOverflow`**: never.
    /// - **Output**: the shape of x, precision 32.
    TANH = 130, "Tanh", fixed::tanh;
    /// Computes x rounded toward zero (spec 002 "Trunc"), under the rules of
    /// [CINN unary primitives](#cinn-unary-primitives).
    ///
    /// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
    /// - **Domain**: all.
    /// - **`IntegerOverflow`**: never.
    /// - **Output**: the shape of x, precision 32.
    TRUNC = 131, "Trunc", fixed::trunc;
}

/// Computes \|x\| (spec 002 "Abs"), under the rules of
/// [CINN unary primitives](#cinn-unary-primitives).
///
/// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
/// - **Domain**: all.
/// - **`IntegerOverflow`**: never.
/// - **Output**: the shape of x, precision 32.
pub const ABS: OpDef = row(100, "Abs", WITH_F, |attrs, _| with_f(attrs, UnaryKind::Abs));
/// Computes ~x on the int32 bits (spec 002 "BitwiseNot"), under the rules of
/// [CINN unary primitives](#cinn-unary-primitives).
///
/// - **Attributes**: none.
/// - **Domain**: all.
/// - **`IntegerOverflow`**: x = 2^31 − 1.
/// - **Output**: the shape of x, precision 32.
pub const BITWISE_NOT: OpDef = row(107, "BitwiseNot", &[], |_, _| plain(UnaryKind::BitwiseNot));
/// Computes x (spec 002 "Identity"), under the rules of
/// [CINN unary primitives](#cinn-unary-primitives).
///
/// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
/// - **Domain**: all.
/// - **`IntegerOverflow`**: never.
/// - **Output**: the shape of x, precision pX.
pub const IDENTITY: OpDef = row(114, "Identity", WITH_F, |attrs, _| {
    with_f(attrs, UnaryKind::Identity)
});
/// Computes 1 (spec 002 "IsFinite"), under the rules of
/// [CINN unary primitives](#cinn-unary-primitives).
///
/// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
/// - **Domain**: all.
/// - **`IntegerOverflow`**: never.
/// - **Output**: the shape of x, precision 2.
pub const IS_FINITE: OpDef = row(115, "IsFinite", WITH_F, |attrs, _| {
    with_f(attrs, UnaryKind::IsFinite)
});
/// Computes 0 (spec 002 "IsInf"), under the rules of
/// [CINN unary primitives](#cinn-unary-primitives).
///
/// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
/// - **Domain**: all.
/// - **`IntegerOverflow`**: never.
/// - **Output**: the shape of x, precision 2.
pub const IS_INF: OpDef = row(116, "IsInf", WITH_F, |attrs, _| {
    with_f(attrs, UnaryKind::IsInf)
});
/// Computes 0 (spec 002 "IsNan"), under the rules of
/// [CINN unary primitives](#cinn-unary-primitives).
///
/// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
/// - **Domain**: all.
/// - **`IntegerOverflow`**: never.
/// - **Output**: the shape of x, precision 2.
pub const IS_NAN: OpDef = row(117, "IsNan", WITH_F, |attrs, _| {
    with_f(attrs, UnaryKind::IsNan)
});
/// Computes 1 where x = 0, else 0 (spec 002 "LogicalNot"), under the rules of
/// [CINN unary primitives](#cinn-unary-primitives).
///
/// - **Attributes**: none.
/// - **Domain**: all.
/// - **`IntegerOverflow`**: never.
/// - **Output**: the shape of x, precision 2.
pub const LOGICAL_NOT: OpDef = row(121, "LogicalNot", &[], |_, _| plain(UnaryKind::LogicalNot));
/// Computes −x (spec 002 "Negative"), under the rules of
/// [CINN unary primitives](#cinn-unary-primitives).
///
/// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
/// - **Domain**: all.
/// - **`IntegerOverflow`**: never.
/// - **Output**: the shape of x, precision 32.
pub const NEGATIVE: OpDef = row(122, "Negative", WITH_F, |attrs, _| {
    with_f(attrs, UnaryKind::Negative)
});
/// Computes −1, 0 or 1 (−2^F, 0, 2^F) (spec 002 "Sign"), under the rules of
/// [CINN unary primitives](#cinn-unary-primitives).
///
/// - **Attributes**: `frac_bits` F (integer, default 0, range 0..=30).
/// - **Domain**: all.
/// - **`IntegerOverflow`**: never.
/// - **Output**: the shape of x, precision 32.
pub const SIGN: OpDef = row(125, "Sign", WITH_F, |attrs, _| {
    with_f(attrs, UnaryKind::Sign)
});
