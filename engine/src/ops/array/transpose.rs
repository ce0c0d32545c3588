//! Permuting axes: `transpose` (spec 001) and CINN `Transpose` (spec 002).

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::attrs::{AttrKind, in_range, spec};
use crate::error::Result;
use crate::fail;
use crate::ops::common::{distinct, gather, resolve_axis, row_major, walk};
use crate::ops::{Arity, Family, OpDef, Operator};
use crate::tensor::{TensorMut, TensorRef, TensorType};

/// Row of the operator table for [`Transpose`].
pub const TRANSPOSE: OpDef = OpDef {
    code: 57,
    name: "transpose",
    family: Family::Transform,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[spec("axes", AttrKind::Ints)],
    build: |attrs, _| {
        Ok(Box::new(Transpose {
            axes: attrs.opt_ints("axes").unwrap_or(&[]).to_vec(),
        }))
    },
};

/// Permutes axes (spec 001 "transpose"): output axis i is input axis real_axes_i.
///
/// - Input: `X` of rank N.
/// - Attribute: `axes` (list, default empty = reversed axes): a permutation of 0..N, entries in
///   [−N, N).
/// - Output: dims n_{real_axes_i}. Precision: same as X.
/// - Errors: `AttributeOutOfRange` (wrong length, out of range, not a permutation).
#[derive(Debug)]
pub struct Transpose {
    axes: Vec<i64>,
}

impl Transpose {
    fn permutation(&self, rank: usize) -> Result<Vec<usize>> {
        if self.axes.is_empty() {
            return Ok((0..rank).rev().collect());
        }
        if self.axes.len() != rank {
            return Err(fail!(
                AttributeOutOfRange,
                "attribute \"axes\" has {} entries for an input of rank {rank}",
                self.axes.len()
            ));
        }
        let mut seen = vec![false; rank];
        self.axes
            .iter()
            .map(|&axis| {
                let resolved = resolve_axis("axes", axis, rank)?;
                if core::mem::replace(&mut seen[resolved], true) {
                    return Err(fail!(
                        AttributeOutOfRange,
                        "attribute \"axes\" = {:?} is not a permutation",
                        self.axes
                    ));
                }
                Ok(resolved)
            })
            .collect()
    }
}

impl Operator for Transpose {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let dims = inputs[0].dims();
        let out = self
            .permutation(dims.len())?
            .into_iter()
            .map(|axis| dims[axis])
            .collect::<Vec<_>>();
        Ok(vec![TensorType::new(out, inputs[0].precision)])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let in_strides = crate::tensor::Shape::new(inputs[0].dims).strides();
        let permutation = self.permutation(inputs[0].dims.len())?;
        let strides: Vec<usize> = permutation.iter().map(|&axis| in_strides[axis]).collect();
        let mut out = outputs[0].data.iter_mut();
        walk(outputs[0].dims, [&strides], |[offset]| {
            if let Some(y) = out.next() {
                *y = inputs[0].data[offset];
            }
            Ok(())
        })
    }
}

/// Row of the operator table for [`CinnTranspose`].
pub const CINN_TRANSPOSE: OpDef = OpDef {
    code: 201,
    name: "Transpose",
    family: Family::Cinn,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[spec("axis", AttrKind::Ints)],
    build: |attrs, _| {
        let axis = attrs.ints("axis")?.to_vec();
        distinct("axis", &axis)?;
        Ok(Box::new(CinnTranspose { axis }))
    },
};

/// Permutes axes (spec 002 "Transpose"): output axis i is input axis `axis[i]`.
///
/// - Input: `input` of rank N.
/// - Attribute: `axis` (required): a permutation of 0..N (N entries, each in [0, N), distinct).
/// - Output: dims `n_{axis[i]}`; `Y[d] = X[e]` with `e_{axis[i]} = d_i`. Precision: the input's.
/// - Overflow: none.
/// - Errors: `MissingAttribute`, `AttributeOutOfRange` (wrong length, out of range, repeated).
#[derive(Debug)]
pub struct CinnTranspose {
    axis: Vec<i64>,
}

impl CinnTranspose {
    fn permutation(&self, rank: usize) -> Result<Vec<usize>> {
        if self.axis.len() != rank {
            return Err(fail!(
                AttributeOutOfRange,
                "attribute \"axis\" has {} entries for an input of rank {rank}",
                self.axis.len()
            ));
        }
        self.axis
            .iter()
            .map(|&axis| in_range("axis", axis, 0, rank as i64 - 1))
            .collect()
    }
}

impl Operator for CinnTranspose {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let dims = inputs[0].dims();
        let out: Vec<u32> = self
            .permutation(dims.len())?
            .into_iter()
            .map(|axis| dims[axis])
            .collect();
        Ok(vec![TensorType::new(out, inputs[0].precision)])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let dims = inputs[0].dims;
        let strides = row_major(dims);
        let permutation = self.permutation(dims.len())?;
        let out: Vec<u32> = permutation.iter().map(|&axis| dims[axis]).collect();
        let steps: Vec<i64> = permutation.iter().map(|&axis| strides[axis]).collect();
        gather(&out, &steps, 0, inputs[0].data, outputs[0].data)
    }
}
