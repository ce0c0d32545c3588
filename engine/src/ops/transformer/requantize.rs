//! Requantization in one pass: `requantize` multiplies by an integer, rounds a shift away and
//! saturates to a precision, so that a wide value (a product's int32 sum, the residual stream)
//! moves to another scale without a multiplication node, a shift node and the precision those
//! two would need in between.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::attrs::{AttrKind, Attrs, in_range, spec};
use crate::error::Result;
use crate::kernels::elementwise;
use crate::ops::{Arity, Family, OpDef, Operator};
use crate::tensor::{MAX_PRECISION, TensorMut, TensorRef, TensorType, precision_bound};

/// Requantization: `Y = clip(round(X · m / 2^s), ±(2^(p−1) − 1))`.
///
/// - **Inputs**: `X` of any shape and precision.
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `multiplier` | integer | 1 | [−(2^31 − 1), 2^31 − 1] |
///   | `shift` | integer | 0 | [0, 62] |
///   | `precision` | integer | 8 | [1, 32] |
///
/// - **Output shape**: the shape of `X`.
/// - **Semantics**, with m = `multiplier`, s = `shift`, p = `precision` and α = 2^(p−1) − 1:
///   `Y[d] = clip(R(X[d] · m, s), −α, α)`, where R(v, s) is v / 2^s rounded to the nearest
///   integer, halves away from zero (−2.5 → −3, 2.5 → 3), and R(v, 0) = v. The product is
///   exact (|X · m| < 2^62 in `i64`), the rounding is the only one, and the clip is the
///   operator's saturation.
/// - **Output precision**: the `precision` attribute.
/// - **Rounding and overflow**: rounding as above; nothing can overflow: the product and the
///   half added before the shift stay below 2^63, and the clip makes the result fit.
/// - **Errors**, in order: `multiplier` outside its range, `shift` outside [0, 62], `precision`
///   outside [1, 32]: `AttributeOutOfRange`. Nothing fails while running.
pub const REQUANTIZE: OpDef = OpDef {
    code: 403,
    name: "requantize",
    family: Family::Transformer,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[
        spec("multiplier", AttrKind::Int),
        spec("shift", AttrKind::Int),
        spec("precision", AttrKind::Int),
    ],
    build: Requantize::build,
};

/// Requantization: `Y = clip(round(X · m / 2^s), ±(2^(p−1) − 1))`.
///
/// Its contract is the doc comment of the row that builds it.
#[derive(Clone, Copy, Debug)]
pub struct Requantize {
    multiplier: i32,
    shift: u32,
    precision: u8,
}

impl Requantize {
    fn build(attrs: &Attrs<'_>, _inputs: usize) -> Result<Box<dyn Operator>> {
        let bound = i64::from(i32::MAX);
        Ok(Box::new(Requantize {
            multiplier: in_range("multiplier", attrs.int_or("multiplier", 1), -bound, bound)?,
            shift: in_range("shift", attrs.int_or("shift", 0), 0, 62)?,
            precision: in_range(
                "precision",
                attrs.int_or("precision", 8),
                1,
                i64::from(MAX_PRECISION),
            )?,
        }))
    }

    /// One element: the product, its rounding and the clip. For s > 0, halves away from zero
    /// is ⌊(v + h − [v < 0]) / 2^s⌋ with h = 2^(s−1) (for v < 0 it is −⌊(−v + h) / 2^s⌋, and
    /// 2^s − h = h): an arithmetic shift with no branch, `half` = h and `down` = −1 (both 0
    /// for s = 0). Nothing can wrap (|v| < 2^62, h ≤ 2^61), so the operations are written
    /// unchecked, which lets the loop vectorise.
    #[inline(always)]
    fn apply(self, x: i32, half: i64, down: i64, bound: i64) -> i32 {
        let product = i64::from(x).wrapping_mul(i64::from(self.multiplier));
        let rounded = product
            .wrapping_add(half)
            .wrapping_add((product >> 63) & down)
            >> self.shift;
        rounded.clamp(-bound, bound) as i32
    }
}

impl Operator for Requantize {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        Ok(vec![TensorType {
            shape: inputs[0].shape.clone(),
            precision: self.precision,
        }])
    }

    fn writes_every_output(&self) -> bool {
        true
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let this = *self;
        let (half, down) = if this.shift == 0 {
            (0, 0)
        } else {
            (1i64 << (this.shift - 1), -1)
        };
        let bound = precision_bound(this.precision);
        elementwise::map(outputs[0].data, inputs[0].data, |x| {
            this.apply(x, half, down, bound)
        });
        Ok(())
    }
}
