//! The activations of transformer MLPs on inputs wider than 8 bits: GELU (erf and tanh forms)
//! and SiLU, each `X · Φ(x)` for a gate Φ in [0, 1] computed in fixed point by the engine's
//! correctly rounded erf and tanh (`crate::fixed`), so that the output keeps the input's scale
//! and precision. On int8 inputs a `cvm_lut` table of the 255 values is exact and far cheaper;
//! this operator is for the values a table cannot index.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::attrs::{AttrKind, Attrs, in_range, spec};
use crate::error::Result;
use crate::fail;
use crate::fixed;
use crate::ops::common::{choice, count, io_usage};
use crate::ops::fixed_point::fixed_error;
use crate::ops::{Arity, Family, OpDef, Operator, Usage};
use crate::tensor::{TensorMut, TensorRef, TensorType};

/// GELU, its tanh approximation and SiLU of real inputs `x = X · m / 2^s`, at the input's
/// scale: `Y = round(X · Φ(x))`.
///
/// - **Inputs**: `X` of any shape and precision.
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `function` | string | "gelu" | "gelu", "gelu_tanh", "silu" |
///   | `multiplier` | integer | 1 | [1, 2^31 − 1] |
///   | `shift` | integer | 0 | [0, 62] |
///
/// - **Output shape**: the shape of `X`.
/// - **Semantics**: with m = `multiplier`, s = `shift`, v = X · m (exact in `i64`) and R(w, k)
///   = w / 2^k rounded to the nearest integer, halves away from zero, each element is
///   `Y = R(X · G, b)` for an integer gate G ≈ 2^b · Φ(x) in [0, 2^b]:
///
///   | function | Φ(x) | G, b |
///   | --- | --- | --- |
///   | "gelu" | (1 + erf(x/√2)) / 2 | a = clamp(R(v · K, s + 34), ±5·2^28) with K = 3260954456333195553 (2^62/√2); G = 2^28 + erf(a) in Q28; b = 29 |
///   | "silu" | 1 / (1 + e^−x) = (1 + tanh(x/2)) / 2 | a = clamp(R(v · 2^25, s), ±12·2^26); G = 2^26 + tanh(a) in Q26; b = 27 |
///   | "gelu_tanh" | (1 + tanh(√(2/π)(x + 0.044715 x³))) / 2 | x₃₂ = clamp(R(v · 2^32, s), ±8·2^32); u = C₁·x₃₂ + C₂·R(x₃₂³, 64) with C₁ = 3426888095, C₂ = 153233301 (Q32); a = clamp(R(u, 38), ±12·2^26); G = 2^26 + tanh(a) in Q26; b = 27 |
///
///   erf and tanh are `crate::fixed`'s, correctly rounded in their Q format. The clamps lose
///   nothing: erf is exactly ±1 in Q28 from |a| ≥ 4.5, tanh exactly ±1 in Q26 from 12, and
///   |x| ≥ 8 puts the tanh form's argument above 24.
/// - **Accuracy**: |Y − X · Φ(x)| ≤ 0.5 + |X| · ε before Y's own rounding is counted, with ε =
///   1.07 · 2^−29 for "gelu" (erf's rounding, 2^−29, and the argument's, 2^−29 times erf's
///   slope 2/√π, halved) and 1.07 · 2^−27 for the tanh forms (tanh's rounding and the
///   argument's in Q26, halved, and for "gelu_tanh" the cube's 2^−30). So for inputs of
///   precision ≤ 16 the result is within 0.5 + 2^−13 of the real function at the input's scale.
///   `engine/tests/transformer_properties.rs` measures it against f64 evaluations.
/// - **Output precision**: pX: |X · Φ| ≤ |X| since Φ lies in [0, 1].
/// - **Rounding and overflow**: one rounding of X · G (below 2^60 in `i64`); the gate's
///   arguments are exact in `i128` before their own rounding. Nothing can overflow.
/// - **Errors**, in order: `function` not a listed name, `multiplier` outside [1, 2^31 − 1],
///   `shift` outside [0, 62]: `AttributeOutOfRange`. Nothing fails while running.
/// - **Gas**: one evaluation per element, priced per function (the erf series costs more than
///   tanh).
pub const ACTIVATION: OpDef = OpDef {
    code: 404,
    name: "activation",
    family: Family::Transformer,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[
        spec("function", AttrKind::Str),
        spec("multiplier", AttrKind::Int),
        spec("shift", AttrKind::Int),
    ],
    build: Activation::build,
};

/// The gate Φ of an activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Function {
    /// (1 + erf(x/√2)) / 2.
    Gelu,
    /// (1 + tanh(√(2/π)(x + 0.044715 x³))) / 2.
    GeluTanh,
    /// (1 + tanh(x/2)) / 2.
    Silu,
}

impl Function {
    /// The gas class of the function.
    fn class(self) -> &'static str {
        match self {
            Function::Gelu => "gelu",
            Function::GeluTanh => "gelu_tanh",
            Function::Silu => "silu",
        }
    }
}

/// 2^62/√2, rounded.
const FRAC_1_SQRT_2_Q62: i128 = 3_260_954_456_333_195_553;
/// √(2/π) in Q32, rounded.
const SQRT_2_OVER_PI_Q32: i128 = 3_426_888_095;
/// 0.044715 · √(2/π) in Q32, rounded.
const CUBIC_Q32: i128 = 153_233_301;
/// The Q format of erf's argument and result.
const ERF_BITS: u32 = 28;
/// The Q format of tanh's argument and result.
const TANH_BITS: u32 = 26;

/// w / 2^k rounded to the nearest integer, halves away from zero (k ≤ 126).
fn round_away(w: i128, k: u32) -> i128 {
    if k == 0 {
        return w;
    }
    let magnitude = (w.unsigned_abs() >> (k - 1)).div_ceil(2);
    // magnitude ≤ 2^126, so it fits i128 with its sign.
    let magnitude = magnitude as i128;
    if w < 0 { -magnitude } else { magnitude }
}

/// An activation: its gate and the input's real scale.
///
/// Its contract is the doc comment of the row that builds it.
#[derive(Clone, Copy, Debug)]
pub struct Activation {
    function: Function,
    multiplier: i32,
    shift: u32,
}

impl Activation {
    fn build(attrs: &Attrs<'_>, _inputs: usize) -> Result<Box<dyn Operator>> {
        let function = choice(
            attrs,
            "function",
            Some(Function::Gelu),
            &[
                ("gelu", Function::Gelu),
                ("gelu_tanh", Function::GeluTanh),
                ("silu", Function::Silu),
            ],
        )?;
        Ok(Box::new(Activation {
            function,
            multiplier: in_range(
                "multiplier",
                attrs.int_or("multiplier", 1),
                1,
                i64::from(i32::MAX),
            )?,
            shift: in_range("shift", attrs.int_or("shift", 0), 0, 62)?,
        }))
    }

    /// The gate G of `x` and its bits b: G / 2^b ≈ Φ(X · m / 2^s).
    fn gate(self, x: i32) -> Result<(i64, u32)> {
        // |v| < 2^62.
        let v = i128::from(x) * i128::from(self.multiplier);
        let s = self.shift;
        let (argument, bits, erf) = match self.function {
            Function::Gelu => {
                // |v · K| < 2^124; the clamp keeps |a| ≤ 5 · 2^28 < 2^31.
                let a = round_away(v * FRAC_1_SQRT_2_Q62, s + 62 - ERF_BITS);
                (a.clamp(-(5 << ERF_BITS), 5 << ERF_BITS), ERF_BITS, true)
            }
            Function::Silu => {
                // x/2 in Q26: |v · 2^25| < 2^87.
                let a = round_away(v << (TANH_BITS - 1), s);
                (
                    a.clamp(-(12 << TANH_BITS), 12 << TANH_BITS),
                    TANH_BITS,
                    false,
                )
            }
            Function::GeluTanh => {
                // x in Q32, |x| ≤ 8: |x₃₂| ≤ 2^35, x₃₂³ ≤ 2^105, each product of u below 2^69.
                let x32 = round_away(v << 32, s).clamp(-(8i128 << 32), 8 << 32);
                let cube = round_away(x32 * x32 * x32, 64);
                let u = SQRT_2_OVER_PI_Q32 * x32 + CUBIC_Q32 * cube;
                let a = round_away(u, 64 - TANH_BITS);
                (
                    a.clamp(-(12 << TANH_BITS), 12 << TANH_BITS),
                    TANH_BITS,
                    false,
                )
            }
        };
        // Within ±12 · 2^26 or ±5 · 2^28 after the clamps.
        let argument = i32::try_from(argument).map_err(|_| {
            fail!(
                IntegerOverflow,
                "activation argument {argument} outside i32"
            )
        })?;
        let value = if erf {
            fixed::erf(argument, bits)
        } else {
            fixed::tanh(argument, bits)
        }
        .map_err(|e| fixed_error(e, self.function.class(), 0))?;
        Ok(((1i64 << bits) + i64::from(value), bits + 1))
    }
}

impl Operator for Activation {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        Ok(vec![inputs[0].clone()])
    }

    fn usage(&self, inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        let mut usage = io_usage(inputs, outputs)?;
        usage.class = self.function.class();
        usage.work.evals = count(&[inputs[0].shape.elements()])?;
        Ok(usage)
    }

    fn writes_every_output(&self) -> bool {
        true
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        for (y, &x) in outputs[0].data.iter_mut().zip(inputs[0].data) {
            let (gate, bits) = self.gate(x)?;
            // |X · G| ≤ 2^31 · 2^29; the result's magnitude is at most |X|.
            let product = i128::from(x) * i128::from(gate);
            *y = round_away(product, bits) as i32;
        }
        Ok(())
    }
}
