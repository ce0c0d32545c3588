//! Elementwise comparison with numpy broadcasting: CINN `Compare` (spec 002).

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::attrs::{AttrKind, spec};
use crate::error::Result;
use crate::ops::common::choice;
use crate::ops::fixed_point::BOOL_PRECISION;
use crate::ops::math::broadcast::{broadcast_apply, broadcast_shape};
use crate::ops::{Arity, Family, OpDef, Operator};
use crate::tensor::{TensorMut, TensorRef, TensorType};

/// Elementwise comparison with numpy broadcasting (spec 002 "Compare").
///
/// - **Inputs**: x, y with broadcast-compatible shapes, any precisions. Values compare as integers,
///   so two Q(F) operands with the same F compare as the real numbers they stand for.
/// - **Attributes**: `kind` (string, required): "kEq", "kNe", "kGe", "kGt", "kLe" or "kLt".
/// - **Output shape**: the broadcast shape. **Semantics**: 1 where x = y, x ≠ y, x ≥ y, x > y,
///   x ≤ y or x < y respectively, else 0.
/// - **Output precision**: 2.
/// - **Errors**: `MissingAttribute`; `AttributeOutOfRange` (another kind); `ShapeMismatch`.
pub const COMPARE: OpDef = OpDef {
    code: 193,
    name: "Compare",
    family: Family::Cinn,
    arity: Arity::Exactly(2),
    outputs: 1,
    attrs: &[spec("kind", AttrKind::Str)],
    build: |attrs, _| {
        Ok(Box::new(Compare {
            kind: choice(
                attrs,
                "kind",
                None,
                &[
                    ("kEq", CompareKind::Eq),
                    ("kNe", CompareKind::Ne),
                    ("kGe", CompareKind::Ge),
                    ("kGt", CompareKind::Gt),
                    ("kLe", CompareKind::Le),
                    ("kLt", CompareKind::Lt),
                ],
            )?,
        }))
    },
};

/// The comparison of [`Compare`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareKind {
    /// "kEq": x = y.
    Eq,
    /// "kNe": x ≠ y.
    Ne,
    /// "kGe": x ≥ y.
    Ge,
    /// "kGt": x > y.
    Gt,
    /// "kLe": x ≤ y.
    Le,
    /// "kLt": x < y.
    Lt,
}

/// Elementwise comparison with numpy broadcasting (spec 002 "Compare").
///
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
#[derive(Debug)]
pub struct Compare {
    kind: CompareKind,
}

impl Operator for Compare {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let shape = broadcast_shape(inputs[0].dims(), inputs[1].dims())?;
        Ok(vec![TensorType::new(shape, BOOL_PRECISION)])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let kind = self.kind;
        let out = &mut outputs[0];
        broadcast_apply(&inputs[0], &inputs[1], out.dims, out.data, |x, y| {
            Ok(i32::from(match kind {
                CompareKind::Eq => x == y,
                CompareKind::Ne => x != y,
                CompareKind::Ge => x >= y,
                CompareKind::Gt => x > y,
                CompareKind::Le => x <= y,
                CompareKind::Lt => x < y,
            }))
        })
    }
}
