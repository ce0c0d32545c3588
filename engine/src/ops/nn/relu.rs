//! `relu` (spec 001): max(x, 0).

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::error::Result;
use crate::kernels;
use crate::ops::{Arity, Family, OpDef, Operator};
use crate::tensor::{TensorMut, TensorRef, TensorType};

/// Row of the operator table for [`Relu`].
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
/// - Input: `X` of any shape. Output: same shape and precision.
/// - Errors: none beyond arity.
#[derive(Debug)]
pub struct Relu;

impl Operator for Relu {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        Ok(vec![inputs[0].clone()])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        kernels::map(outputs[0].data, inputs[0].data, |x| x.max(0));
        Ok(())
    }
}
