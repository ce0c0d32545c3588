//! Joining tensors along an axis: `concatenate` (spec 001) and CINN `Concat` (spec 002), one
//! operator with different default axes.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::attrs::{AttrKind, spec};
use crate::error::Result;
use crate::fail;
use crate::ops::common::{count, io_usage, product, resolve_axis};
use crate::ops::{Arity, Family, OpDef, Operator, Usage};
use crate::tensor::{TensorMut, TensorRef, TensorType};

/// Join tensors along an axis (spec 001 "concatenate").
///
/// - **Inputs**: M ≥ 1 tensors `I^0`, …, `I^{M−1}` of the same rank N whose dimensions agree
///   except on `axis` (at most 1 024 inputs, the engine's node limit).
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `axis` | integer | 1 | [−N, N) |
///
/// - **Output shape**: the common shape with n^0_axis + … + n^{M−1}_axis on `axis`.
/// - **Semantics**: along `axis` the inputs follow each other in input order:
///   `Y[…, n^0_axis + … + n^{i−1}_axis + d_axis, …] = I^i[…, d_axis, …]`.
/// - **Output precision**: the largest of the inputs' precisions.
/// - **Rounding and overflow**: none possible.
/// - **Errors**, in order:
///   1. `axis` outside [−N, N) for the rank N of input 0: `AttributeOutOfRange`.
///   2. An input (in order) of another rank, or with a dimension outside `axis` that differs from
///      input 0's: `ShapeMismatch`.
///   3. The concatenated dimension above 2^32 − 1: `LimitExceeded`.
pub const CONCATENATE: OpDef = OpDef {
    code: 53,
    name: "concatenate",
    family: Family::Transform,
    arity: Arity::AtLeast(1),
    outputs: 1,
    attrs: &[spec("axis", AttrKind::Int)],
    build: |attrs, _| {
        Ok(Box::new(Concatenate {
            axis: attrs.int_or("axis", 1),
        }))
    },
};

/// Joins tensors along an axis (spec 001 "concatenate").
///
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
#[derive(Debug)]
pub struct Concatenate {
    axis: i64,
}

impl Concatenate {
    /// Concatenation along `axis` (negative counts from the end).
    pub fn new(axis: i64) -> Concatenate {
        Concatenate { axis }
    }
}

impl Operator for Concatenate {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let first = inputs[0].dims();
        let axis = resolve_axis("axis", self.axis, first.len())?;
        let mut dims = first.to_vec();
        dims[axis] = 0;
        for (position, input) in inputs.iter().enumerate() {
            let other = input.dims();
            let agrees = other.len() == first.len()
                && other
                    .iter()
                    .zip(first)
                    .enumerate()
                    .all(|(i, (a, b))| i == axis || a == b);
            if !agrees {
                return Err(fail!(
                    ShapeMismatch,
                    "input {position} has shape {}, which does not match input 0's {} outside axis {axis}",
                    input.shape,
                    inputs[0].shape
                ));
            }
            dims[axis] = dims[axis]
                .checked_add(other[axis])
                .ok_or_else(|| fail!(LimitExceeded, "concatenated axis exceeds u32"))?;
        }
        let precision = inputs.iter().map(|t| t.precision).max().unwrap_or(1);
        Ok(vec![TensorType::new(dims, precision)])
    }

    fn usage(&self, inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        // Every input contributes one slice per position before the axis.
        let dims = inputs[0].dims();
        let axis = resolve_axis("axis", self.axis, dims.len())?;
        let outer = count(
            &dims[..axis]
                .iter()
                .map(|&d| u64::from(d))
                .collect::<Vec<_>>(),
        )?;
        let mut usage = io_usage(inputs, outputs)?;
        usage.work.slices = count(&[outer, inputs.len() as u64])?;
        Ok(usage)
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let axis = resolve_axis("axis", self.axis, inputs[0].dims.len())?;
        let outer = product(&inputs[0].dims[..axis]);
        let sizes: Vec<usize> = inputs
            .iter()
            .map(|input| product(&input.dims[axis..]))
            .collect();
        let mut out = outputs[0].data.iter_mut();
        for block in 0..outer {
            for (input, &size) in inputs.iter().zip(&sizes) {
                // The source goes first in the zip: when it ends, no output slot is consumed.
                for (&x, y) in input.data[block * size..(block + 1) * size]
                    .iter()
                    .zip(out.by_ref())
                {
                    *y = x;
                }
            }
        }
        Ok(())
    }
}

/// Joins tensors along an existing axis (spec 002 "Concat").
///
/// - **Inputs**: M ≥ 1 tensors of equal rank N ≥ 1 whose dimensions agree except on `axis`.
/// - **Attributes**: `axis` (integer, default 0, range [−N, N); a negative axis counts from the
///   end).
/// - **Output shape**: the common shape with Σ n^i_axis on `axis`. **Semantics**: the inputs follow
///   each other along `axis`, in order.
/// - **Output precision**: the largest of the inputs'.
/// - **Errors**: `AttributeOutOfRange` (`axis`, also for rank-0 inputs); `ShapeMismatch` (ranks or
///   other dimensions differ); `LimitExceeded` (the joined axis exceeds 2^32 − 1).
pub const CONCAT: OpDef = OpDef {
    code: 194,
    name: "Concat",
    family: Family::Cinn,
    arity: Arity::AtLeast(1),
    outputs: 1,
    attrs: &[spec("axis", AttrKind::Int)],
    build: |attrs, _| Ok(Box::new(Concatenate::new(attrs.int_or("axis", 0)))),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Work;

    fn ty(dims: &[u32]) -> TensorType {
        TensorType::new(dims.to_vec(), 8)
    }

    #[test]
    fn concatenation_counts_its_slices() {
        // Three inputs along axis 1 of [4, ·, 5]: one slice per input and leading index.
        let inputs = [ty(&[4, 2, 5]), ty(&[4, 1, 5]), ty(&[4, 3, 5])];
        let concat = Concatenate::new(-2);
        let out = concat.infer(&inputs).unwrap();
        let usage = concat.usage(&inputs, &out).unwrap();
        assert_eq!(
            usage.work,
            Work {
                slices: 12,
                ..Work::io(120, 120)
            }
        );
    }
}
