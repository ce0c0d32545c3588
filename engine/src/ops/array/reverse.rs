//! Reversing the order of elements along axes: CINN `Reverse` (spec 002).

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::attrs::{AttrKind, spec};
use crate::error::Result;
use crate::ops::common::{gather, resolve_axis, row_major};
use crate::ops::{Arity, Family, OpDef, Operator};
use crate::tensor::{TensorMut, TensorRef, TensorType};

/// Reverses the order of elements along axes (spec 002 "Reverse").
///
/// - **Inputs**: `input` of rank N.
/// - **Attributes**: `axis` (list of integers, required): entries in [−N, N), a negative entry
///   counting from the end. The entries form a set: an axis listed twice (also as i and i − N) is
///   reversed once. An empty list copies the input.
/// - **Output shape**: the input's. **Semantics**: `Y[…, d_a, …] = X[…, n_a − 1 − d_a, …]` on every
///   listed axis a.
/// - **Output precision**: the input's.
/// - **Errors**: `MissingAttribute`; `AttributeOutOfRange`.
pub const REVERSE: OpDef = OpDef {
    code: 198,
    name: "Reverse",
    family: Family::Cinn,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[spec("axis", AttrKind::Ints)],
    build: |attrs, _| {
        Ok(Box::new(Reverse {
            axis: attrs.ints("axis")?.to_vec(),
        }))
    },
};

/// Reverses the order of elements along axes (spec 002 "Reverse").
///
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
#[derive(Debug)]
pub struct Reverse {
    axis: Vec<i64>,
}

impl Reverse {
    fn reversed(&self, rank: usize) -> Result<Vec<bool>> {
        let mut reversed = vec![false; rank];
        for &axis in &self.axis {
            reversed[resolve_axis("axis", axis, rank)?] = true;
        }
        Ok(reversed)
    }
}

impl Operator for Reverse {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        self.reversed(inputs[0].shape.rank())?;
        Ok(vec![inputs[0].clone()])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let dims = inputs[0].dims;
        if dims.contains(&0) {
            return Ok(());
        }
        let reversed = self.reversed(dims.len())?;
        let mut steps = row_major(dims);
        let mut start = 0i64;
        for ((step, &dim), &flip) in steps.iter_mut().zip(dims).zip(&reversed) {
            if flip {
                start += (i64::from(dim) - 1) * *step;
                *step = -*step;
            }
        }
        gather(dims, &steps, start, inputs[0].data, outputs[0].data)
    }
}
