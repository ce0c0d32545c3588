//! Choosing between two tensors by a condition: `where` (spec 001) and CINN `Select` (spec 002),
//! one operator ([`Select`]) whose two rows differ in the condition shapes they accept, the
//! output precision and the wording of their shape errors.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::error::Result;
use crate::fail;
use crate::ops::{Arity, Family, OpDef, Operator};
use crate::tensor::{TensorMut, TensorRef, TensorType};

/// Select between two tensors by a condition (spec 001 "where").
///
/// - **Inputs**: `cond`; `A` (n_0, …, n_{N−1}); `B` of the shape of `A`. `cond` has the shape of
///   `A`, or is 1-D of length n_0.
/// - **Attributes**: none.
/// - **Output shape**: the shape of `A`.
/// - **Semantics**: with `cond` of the shape of `A`, `Y[d] = A[d]` where `cond[d]` ≠ 0, else
///   `B[d]`. With a 1-D `cond`, `cond[d_0]` chooses for the whole row d_0:
///   `Y[d_0, …] = A[d_0, …]` where `cond[d_0]` ≠ 0, else `B[d_0, …]` (decision 25).
/// - **Output precision**: max(pcond, pA, pB) (decision 25).
/// - **Rounding and overflow**: none possible.
/// - **Errors**, in order: `A` and `B` of different shapes: `ShapeMismatch`; `cond` neither of the
///   shape of `A` nor 1-D of length n_0: `ShapeMismatch`.
pub const WHERE: OpDef = OpDef {
    code: 62,
    name: "where",
    family: Family::Transform,
    arity: Arity::Exactly(3),
    outputs: 1,
    attrs: &[],
    build: |_, _| Ok(Box::new(Select { rule: Rule::Where })),
};

/// Elementwise choice between two tensors (spec 002 "Select").
///
/// - **Inputs**: `condition`, `true_value`, `false_value`, all of the same shape; the condition may
///   have any precision.
/// - **Attributes**: none.
/// - **Output shape**: that shape. **Semantics**: `Y[d] = true_value[d]` where `condition[d]` ≠ 0,
///   else `false_value[d]`.
/// - **Output precision**: max(pT, pF) of the two values.
/// - **Errors**: `ShapeMismatch` (any two shapes differ: no broadcasting).
pub const SELECT: OpDef = OpDef {
    code: 199,
    name: "Select",
    family: Family::Cinn,
    arity: Arity::Exactly(3),
    outputs: 1,
    attrs: &[],
    build: |_, _| Ok(Box::new(Select { rule: Rule::Select })),
};

/// The row a [`Select`] was built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// `where`: the condition may also be 1-D with one entry per row; the output precision is
    /// the largest of the three inputs'.
    Where,
    /// CINN `Select`: the condition has the values' shape; the output precision is the larger
    /// of the two values'.
    Select,
}

/// `where` and CINN `Select`: `Y[d] = on_true[d]` where the condition is non-zero, else
/// `on_false[d]` (the rows' doc comments state each one's contract).
#[derive(Debug)]
pub struct Select {
    rule: Rule,
}

/// How a condition of an accepted shape covers the values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cover {
    /// One condition element per value element (the same shape).
    Elementwise,
    /// One condition element per row of the values (1-D of length n_0).
    PerRow,
}

/// Which shape rule a selection breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mismatch {
    /// The two values' shapes differ.
    Values,
    /// The condition neither has the values' shape nor one entry per row.
    Condition,
}

/// The shape check of `where` and `Select`, in this order: both values of one shape, then the
/// condition of that shape or 1-D with one entry per row.
fn cover(
    condition: &TensorType,
    on_true: &TensorType,
    on_false: &TensorType,
) -> core::result::Result<Cover, Mismatch> {
    if on_true.shape != on_false.shape {
        return Err(Mismatch::Values);
    }
    if condition.shape == on_true.shape {
        return Ok(Cover::Elementwise);
    }
    match condition.dims() {
        [length] if on_true.dims().first() == Some(length) => Ok(Cover::PerRow),
        _ => Err(Mismatch::Condition),
    }
}

impl Operator for Select {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let (condition, on_true, on_false) = (&inputs[0], &inputs[1], &inputs[2]);
        let cover = cover(condition, on_true, on_false);
        let precision = match self.rule {
            Rule::Where => {
                match cover {
                    Ok(_) => {}
                    Err(Mismatch::Values) => {
                        return Err(fail!(
                            ShapeMismatch,
                            "x {} and y {} must have the same shape",
                            on_true.shape,
                            on_false.shape
                        ));
                    }
                    Err(Mismatch::Condition) => {
                        return Err(fail!(
                            ShapeMismatch,
                            "condition {} must have the shape of x {} or be 1-D of length {}",
                            condition.shape,
                            on_true.shape,
                            on_true.dims().first().copied().unwrap_or(1)
                        ));
                    }
                }
                condition.precision.max(on_true.precision)
            }
            Rule::Select => {
                if cover != Ok(Cover::Elementwise) {
                    return Err(fail!(
                        ShapeMismatch,
                        "condition {}, true_value {} and false_value {} must have the same shape",
                        condition.shape,
                        on_true.shape,
                        on_false.shape
                    ));
                }
                on_true.precision
            }
        };
        Ok(vec![TensorType {
            shape: on_true.shape.clone(),
            precision: precision.max(on_false.precision),
        }])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let (condition, on_true, on_false) = (inputs[0].data, inputs[1].data, inputs[2].data);
        let out = &mut *outputs[0].data;
        if condition.len() == out.len() {
            for (((y, &c), &a), &b) in out.iter_mut().zip(condition).zip(on_true).zip(on_false) {
                *y = if c != 0 { a } else { b };
            }
        } else {
            // One condition element per row (`where` only).
            let row = (out.len() / condition.len().max(1)).max(1);
            for (((rows, &c), xs), zs) in out
                .chunks_exact_mut(row)
                .zip(condition)
                .zip(on_true.chunks_exact(row))
                .zip(on_false.chunks_exact(row))
            {
                rows.copy_from_slice(if c != 0 { xs } else { zs });
            }
        }
        Ok(())
    }
}
