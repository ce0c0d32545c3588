//! Choosing between two tensors by a condition: `where` (spec 001) and CINN `Select` (spec 002).

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::error::Result;
use crate::fail;
use crate::ops::{Arity, Family, OpDef, Operator};
use crate::tensor::{TensorMut, TensorRef, TensorType};

/// Row of the operator table for [`Where`].
pub const WHERE: OpDef = OpDef {
    code: 62,
    name: "where",
    family: Family::Transform,
    arity: Arity::Exactly(3),
    outputs: 1,
    attrs: &[],
    build: |_, _| Ok(Box::new(Where)),
};

/// Selects between two tensors by a condition (spec 001 "where").
///
/// - Inputs: `cond`, `A`, `B`; A and B of the same shape; `cond` of that shape, or 1-D with
///   length n_0 (then `cond[d_0]` selects whole rows: cvm-compat §6 notes the deployed runtime
///   copies bytes instead).
/// - Output: `Y[d] = A[d]` where the condition is non-zero, else `B[d]`.
/// - Precision: max(pcond, pA, pB): the deployed runtime gives the condition's precision, which
///   is unsound when the condition is narrower than A or B; this rule equals it wherever it is
///   sound (cvm-compat §3).
/// - Errors: `ShapeMismatch`.
#[derive(Debug)]
pub struct Where;

impl Operator for Where {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let (cond, a, b) = (&inputs[0], &inputs[1], &inputs[2]);
        if a.shape != b.shape {
            return Err(fail!(
                ShapeMismatch,
                "x {} and y {} must have the same shape",
                a.shape,
                b.shape
            ));
        }
        let per_row = cond.dims().len() == 1 && a.dims().first() == cond.dims().first();
        if cond.shape != a.shape && !per_row {
            return Err(fail!(
                ShapeMismatch,
                "condition {} must have the shape of x {} or be 1-D of length {}",
                cond.shape,
                a.shape,
                a.dims().first().copied().unwrap_or(1)
            ));
        }
        Ok(vec![TensorType {
            shape: a.shape.clone(),
            precision: cond.precision.max(a.precision).max(b.precision),
        }])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let (cond, a, b) = (&inputs[0], &inputs[1], &inputs[2]);
        let out = &mut *outputs[0].data;
        if cond.data.len() == out.len() {
            select_elements(out, cond.data, a.data, b.data);
        } else {
            let row = out.len() / cond.data.len().max(1);
            for (((rows, &c), xs), zs) in out
                .chunks_exact_mut(row.max(1))
                .zip(cond.data)
                .zip(a.data.chunks_exact(row.max(1)))
                .zip(b.data.chunks_exact(row.max(1)))
            {
                rows.copy_from_slice(if c != 0 { xs } else { zs });
            }
        }
        Ok(())
    }
}

/// `out[i] = on_true[i]` where `condition[i] ≠ 0`, else `on_false[i]` (slices of one length):
/// `where` with a same-shape condition and CINN `Select`.
pub(crate) fn select_elements(
    out: &mut [i32],
    condition: &[i32],
    on_true: &[i32],
    on_false: &[i32],
) {
    for (((y, &c), &a), &b) in out.iter_mut().zip(condition).zip(on_true).zip(on_false) {
        *y = if c != 0 { a } else { b };
    }
}

/// Row of the operator table for [`Select`].
pub const SELECT: OpDef = OpDef {
    code: 199,
    name: "Select",
    family: Family::Cinn,
    arity: Arity::Exactly(3),
    outputs: 1,
    attrs: &[],
    build: |_, _| Ok(Box::new(Select)),
};

/// Elementwise choice between two tensors (spec 002 "Select").
///
/// - Inputs: `condition`, `true_value`, `false_value`, all of the same shape (the condition of
///   any precision).
/// - Attributes: none.
/// - Output: that shape; `Y[d] = true_value[d]` where `condition[d] ≠ 0`, else
///   `false_value[d]`. Precision: the larger of the two values'.
/// - Overflow: none.
/// - Errors: `ShapeMismatch`.
#[derive(Debug)]
pub struct Select;

impl Operator for Select {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let (condition, on_true, on_false) = (&inputs[0], &inputs[1], &inputs[2]);
        if condition.shape != on_true.shape || on_true.shape != on_false.shape {
            return Err(fail!(
                ShapeMismatch,
                "condition {}, true_value {} and false_value {} must have the same shape",
                condition.shape,
                on_true.shape,
                on_false.shape
            ));
        }
        Ok(vec![TensorType {
            shape: on_true.shape.clone(),
            precision: on_true.precision.max(on_false.precision),
        }])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let (condition, on_true, on_false) = (inputs[0].data, inputs[1].data, inputs[2].data);
        select_elements(outputs[0].data, condition, on_true, on_false);
        Ok(())
    }
}
