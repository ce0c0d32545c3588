//! `relu` (spec 001): max(x, 0).

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::error::Result;
use crate::kernels;
use crate::ops::{Arity, Family, OpDef, Operator};
use crate::tensor::{TensorMut, TensorRef, TensorType};

/// Rectified linear unit (spec 001 "relu"): `Y = max(0, X)`.
///
/// - **Inputs**: `X` of any shape.
/// - **Attributes**: none.
/// - **Output shape**: the shape of `X`.
/// - **Semantics**: `Y[d] = max(0, X[d])` for every element.
/// - **Output precision**: pX.
/// - **Rounding and overflow**: none possible.
/// - **Errors**: none beyond the common ones.
pub const RELU: OpDef = OpDef {
    code: 22,
    name: "relu",
    family: Family::Nn,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[],
    build: |_, _| Ok(Box::new(Relu)),
};

/// Rectified linear unit (spec 001 "relu"): `Y = max(0, X)`.
///
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
#[derive(Debug)]
pub struct Relu;

impl Operator for Relu {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        Ok(vec![inputs[0].clone()])
    }

    fn nonnegative_outputs(&self, _nonnegative: &[bool]) -> bool {
        true
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        kernels::map(outputs[0].data, inputs[0].data, |x| x.max(0));
        Ok(())
    }
}
