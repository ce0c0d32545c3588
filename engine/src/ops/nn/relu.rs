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

    fn writes_every_output(&self) -> bool {
        // `kernels::map` stores every element of an output as long as its input (the same
        // shape); the test below runs it on an output filled with other values.
        true
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        kernels::map(outputs[0].data, inputs[0].data, |x| x.max(0));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relu_writes_every_output_element() {
        for len in [0usize, 1, 7, 8, 31, 32, 33, 100, 1000] {
            let input: Vec<i32> = (0..len as i32).map(|i| (i * 37) % 255 - 127).collect();
            let dims = [len as u32];
            let mut filled = vec![i32::MIN; len];
            let operands = [TensorRef {
                dims: &dims,
                precision: 8,
                data: &input,
            }];
            let mut results = [TensorMut {
                dims: &dims,
                precision: 8,
                data: &mut filled,
            }];
            assert!(Relu.run(&operands, &mut results).is_ok());
            let expected: Vec<i32> = input.iter().map(|&x| x.max(0)).collect();
            assert_eq!(filled, expected, "{len}");
        }
    }
}
