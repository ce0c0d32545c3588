//! The activations of transformer MLPs on inputs wider than 8 bits: GELU (erf and tanh forms)
//! and SiLU, each `X · Φ(x)` for a gate Φ in [0, 1] computed in fixed point (cubic pieces of
//! the erf form's gate, and a sigmoid from `softmax`'s exponential for the others), so that the
//! output keeps the input's scale and precision. On int8 inputs a `cvm_lut` table of the 255
//! values is exact and cheaper still; this operator is for the values a table cannot index.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::attrs::{AttrKind, Attrs, in_range, spec};
use crate::error::Result;
use crate::ops::common::{choice, count, io_usage};
use crate::ops::transformer::exponential::{LOG2_E_Q31, exponential};
use crate::ops::transformer::gelu_table::GELU_PIECES;
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
/// - **Semantics**: m = `multiplier`, s = `shift`, v = |X| · m (exact, below 2^62); R(w, k) =
///   ⌊(w + 2^(k−1)) / 2^k⌋ for k ≥ 1 and R(w, 0) = w (nearest, halves up); R'(w, D) = ⌊(2w +
///   D) / 2D⌋ (w / D to the nearest, halves up); e(d, m', s') is `softmax`'s exponential (its
///   steps 3 and 4 for a difference d under a multiplier m' and shift s'), within 4 of 2^30 ·
///   e^(−d · m' / 2^s'). Each element gets a gate H ≈ 2^30 · Φ(|x|) in [0, 2^30], G = H for
///   X ≥ 0 and G = 2^30 − H for X < 0 (Φ(−x) = 1 − Φ(x) for the three gates), and
///   `Y = sign(X) · R(|X| · G, 30)` (halves away from zero):
///
///   | function | Φ(x) | H |
///   | --- | --- | --- |
///   | "gelu" | (1 + erf(x/√2)) / 2 | a = R(v · 2^28, s) (\|x\| in Q28); H = 2^30 if a ≥ 8 · 2^28; else, with i = ⌊a / 2^24⌋, t = a − i · 2^24 and (c₀, c₁, c₂, c₃) the i-th of the 128 cubic pieces: h₃ = c₃, h_k = c_k + R(h_(k+1) · t, 24) for k = 2, 1, 0, and H = min(R(h₀, 4), 2^30) |
///   | "silu" | 1 / (1 + e^−x) | E = e(\|X\|, m, s); H = R'(2^60, 2^30 + E) |
///   | "gelu_tanh" | (1 + tanh(u)) / 2 = 1 / (1 + e^(−2u)), u = √(2/π)(x + 0.044715 x³) | a as for "gelu", and H = 2^30 if a ≥ 8 · 2^28; else q = R(a², 32) and c = R(q · a, 28) (x² and x³ in Q24); w = C₁ · a + C₂ · c with C₁ = 856722024 and C₂ = 612933205 (√(2/π) in Q30 and 0.044715 · √(2/π) in Q34: u in Q58); b = R(w, 31) (u in Q27); E = e(b, 1, 26); H = R'(2^60, 2^30 + E) |
///
///   The cubic pieces are `engine/src/ops/transformer/gelu_table.rs`, written by
///   `scripts/gelu-table.py`: piece i interpolates 2^34 · Φ(i/16 + τ/16) for τ = t / 2^24 in
///   [0, 1) at the four Chebyshev nodes of [0, 1], its coefficients rounded to integers (piece
///   0 is (8589934589, 428361092, −367, −278432); from x = 6.5 on every piece is (2^34, 0, 0,
///   0)).
/// - **Accuracy**: |G / 2^30 − Φ(x)| ≤ ε with ε = 1.12 · 2^−28 for "gelu" (the cubics'
///   interpolation error (1/32)^4 / 192 · max |Φ⁗| = 2.74e-9, their coefficients' and Horner
///   steps' roundings 3.5 · 2^−34, R(h₀, 4)'s 2^−31, and a's rounding 2^−29 times Φ's slope,
///   at most 0.399), 1.125 · 2^−28 for "silu" (E's 4 and the quotient's 0.5, in units of
///   2^−30: the quotient's slope in E is at most 1) and 1.1 · 2^−27 for "gelu_tanh" (the same
///   4.5 · 2^−30, and u's roundings times σ(2u)'s slope in u, at most 1/2: b's 2^−28, a's
///   2^−29 times u's slope, q's, c's, C₁'s and C₂'s below 2^−29 together where σ(2u)'s slope
///   does not vanish). Hence |Y − X · Φ(x)| ≤ 0.5 + |X| · ε: for inputs of precision ≤ 16
///   within 0.5 + 2^−12 of the real function at the input's scale.
///   `engine/tests/transformer_properties.rs` measures it against f64 evaluations, over random
///   cases and across the whole domain.
/// - **Output precision**: pX: |X| · G ≤ |X| · 2^30 since G lies in [0, 2^30].
/// - **Rounding and overflow**: the gate's steps round as stated, Y once; every value is exact
///   in 64 bits (v < 2^62; a < 2^31 where it is used; |h · t| < 2^59; q · a < 2^61; w < 2^63;
///   b < 2^32; 2^61 + D; |X| · G ≤ 2^61). Nothing can overflow.
/// - **Errors**, in order: `function` not a listed name, `multiplier` outside [1, 2^31 − 1],
///   `shift` outside [0, 62]: `AttributeOutOfRange`. Nothing fails while running.
/// - **Gas**: one evaluation per element, priced per function.
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
    /// 1 / (1 + e^−x).
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

/// √(2/π) in Q30, rounded.
const SQRT_2_OVER_PI_Q30: u64 = 856_722_024;
/// 0.044715 · √(2/π) in Q34, rounded.
const CUBIC_Q34: u64 = 612_933_205;
/// One in the gate's Q30.
const ONE: u64 = 1 << 30;
/// The Q format of the argument a = |x|.
const ARGUMENT_BITS: u32 = 28;
/// The arguments from which every gate is 1: |x| ≥ 8.
const SATURATED: u64 = 8 << ARGUMENT_BITS;
/// The bits of the position inside a piece of the erf form's cubics (pieces of 1/16).
const PIECE_BITS: u32 = ARGUMENT_BITS - 4;

// Every operand below is bounded as the row's documentation states, so the arithmetic is
// written wrapping: under the release profile's overflow checks a checked 64-bit product costs
// a 128-bit one in wasm.

/// R(w, k) of the semantics (w + 2^(k−1) < 2^64).
#[inline(always)]
fn round_up(w: u64, k: u32) -> u64 {
    if k == 0 {
        w
    } else {
        w.wrapping_add(1 << (k - 1)) >> k
    }
}

/// c + R(h · t, 24): one step of Horner's rule inside a piece (|h · t| < 2^59).
#[inline(always)]
fn horner_step(c: i64, h: i64, t: i64) -> i64 {
    c.wrapping_add(h.wrapping_mul(t).wrapping_add(1 << (PIECE_BITS - 1)) >> PIECE_BITS)
}

/// R'(2^60, 2^30 + e): the sigmoid 2^30 / (1 + e / 2^30) of an exponential e ≤ 2^30.
#[inline(always)]
fn sigmoid(e: u64) -> u64 {
    let d = ONE + e;
    ((1 << 61) + d) / (2 * d)
}

/// An activation: its gate and the input's real scale.
///
/// Its contract is the doc comment of the row that builds it.
#[derive(Clone, Copy, Debug)]
pub struct Activation {
    function: Function,
    multiplier: u64,
    /// m · L of `softmax`'s exponential (below 2^63), for "silu".
    exponent_multiplier: u64,
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
        let multiplier: u64 = in_range(
            "multiplier",
            attrs.int_or("multiplier", 1),
            1,
            i64::from(i32::MAX),
        )?;
        Ok(Box::new(Activation {
            function,
            multiplier,
            // m < 2^31 and L < 2^32.
            exponent_multiplier: multiplier * LOG2_E_Q31,
            shift: in_range("shift", attrs.int_or("shift", 0), 0, 62)?,
        }))
    }

    /// a = R(v · 2^28, s) for v = |X| · m < 2^62, or `None` when a ≥ 8 · 2^28.
    #[inline(always)]
    fn argument(self, v: u64) -> Option<u64> {
        let a = if self.shift >= ARGUMENT_BITS {
            round_up(v, self.shift - ARGUMENT_BITS)
        } else {
            // v · 2^k with k = 28 − s in 1..=28: at least 2^31 once v ≥ 2^(31 − k).
            let k = ARGUMENT_BITS - self.shift;
            if v >> (31 - k) != 0 {
                return None;
            }
            v << k
        };
        (a < SATURATED).then_some(a)
    }

    /// The gate H ≈ 2^30 · Φ(|x|) of a magnitude |X| ≤ 2^31, in [0, 2^30].
    #[inline(always)]
    fn gate(self, magnitude: u64) -> u64 {
        if self.function == Function::Silu {
            return sigmoid(exponential(magnitude, self.exponent_multiplier, self.shift));
        }
        let Some(a) = self.argument(magnitude.wrapping_mul(self.multiplier)) else {
            return ONE;
        };
        if self.function == Function::Gelu {
            // a < 2^31: the piece's index is below 128 and t below 2^24.
            let [c0, c1, c2, c3] = GELU_PIECES[(a >> PIECE_BITS) as usize];
            let t = (a & ((1 << PIECE_BITS) - 1)) as i64;
            let h = horner_step(c0, horner_step(c1, horner_step(c2, c3, t), t), t);
            // Every piece stays above 2^33 − 2^4, so h is positive.
            return ((h.wrapping_add(8) >> 4) as u64).min(ONE);
        }
        let q = round_up(a.wrapping_mul(a), 32);
        let c = round_up(q.wrapping_mul(a), 28);
        let w = SQRT_2_OVER_PI_Q30
            .wrapping_mul(a)
            .wrapping_add(CUBIC_Q34.wrapping_mul(c));
        sigmoid(exponential(round_up(w, 31), LOG2_E_Q31, 26))
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
            let magnitude = u64::from(x.unsigned_abs());
            let h = self.gate(magnitude);
            let g = if x < 0 { ONE - h } else { h };
            // |X| · G ≤ 2^61, and the result's magnitude is at most |X|: it fits i32 with X's
            // sign.
            let rounded = (magnitude.wrapping_mul(g).wrapping_add(1 << 29) >> 30) as i64;
            *y = (if x < 0 { -rounded } else { rounded }) as i32;
        }
        Ok(())
    }
}
