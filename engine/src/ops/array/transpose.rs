//! Permuting axes: `transpose` (spec 001) and CINN `Transpose` (spec 002), one operator
//! ([`Transpose`]) whose two rows differ in how the permutation is spelled.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::attrs::{AttrKind, in_range, spec};
use crate::error::Result;
use crate::fail;
use crate::ops::common::{distinct, resolve_axis, walk};
use crate::ops::{Arity, Family, OpDef, Operator};
use crate::tensor::{TensorMut, TensorRef, TensorType};

/// Permute the axes (spec 001 "transpose").
///
/// - **Inputs**: `X` of any rank N.
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `axes` | list of integers | empty (reverse the axes) | empty, or N entries in [−N, N) forming a permutation of 0..N − 1 |
///
/// - **Output shape**: (n_{r_0}, …, n_{r_{N−1}}), where r is `axes` with negative entries taken
///   + N, or (N − 1, …, 0) when `axes` is empty.
/// - **Semantics**: `Y[d_0, …, d_{N−1}] = X[s_0, …, s_{N−1}]` with s_{r_i} = d_i: output axis i
///   is input axis r_i. With `axes` (2, 0, 1), `Y[k, i, j] = X[i, j, k]`.
/// - **Output precision**: pX.
/// - **Rounding and overflow**: none possible.
/// - **Errors**, in order: `axes` not empty and not of length N: `AttributeOutOfRange`; an entry
///   (in order) outside [−N, N) or naming an axis already named: `AttributeOutOfRange`.
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
            rule: Rule::Cvm,
        }))
    },
};

/// Permutes axes (spec 002 "Transpose"): output axis i is input axis `axis[i]`.
///
/// - **Inputs**: `input` of rank N.
/// - **Attributes**: `axis` (list of integers, required): a permutation of 0..N (N distinct entries
///   in [0, N)).
/// - **Output shape**: (n_{axis[0]}, …, n_{axis[N−1]}). **Semantics**: `Y[d] = X[e]` with
///   e_{axis[i]} = d_i.
/// - **Output precision**: the input's.
/// - **Errors**: `MissingAttribute`; `AttributeOutOfRange` (wrong length, an entry out of range or
///   repeated).
pub const CINN_TRANSPOSE: OpDef = OpDef {
    code: 201,
    name: "Transpose",
    family: Family::Cinn,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[spec("axis", AttrKind::Ints)],
    build: |attrs, _| {
        let axes = attrs.ints("axis")?.to_vec();
        distinct("axis", &axes)?;
        Ok(Box::new(Transpose {
            axes,
            rule: Rule::Cinn,
        }))
    },
};

/// How a [`Transpose`] row spells its permutation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// `transpose`: attribute `axes`, entries in [−N, N), empty for the reversed axes.
    Cvm,
    /// CINN `Transpose`: attribute `axis`, entries in [0, N), repeats rejected when built.
    Cinn,
}

/// `transpose` and CINN `Transpose`: output axis i is input axis `axes[i]` (the rows' doc
/// comments state each one's contract).
#[derive(Debug)]
pub struct Transpose {
    axes: Vec<i64>,
    rule: Rule,
}

impl Transpose {
    /// The input axis of every output axis, checked in this order: one entry per input axis,
    /// each in range, none twice.
    fn permutation(&self, rank: usize) -> Result<Vec<usize>> {
        let name = match self.rule {
            Rule::Cvm if self.axes.is_empty() => return Ok((0..rank).rev().collect()),
            Rule::Cvm => "axes",
            Rule::Cinn => "axis",
        };
        if self.axes.len() != rank {
            return Err(fail!(
                AttributeOutOfRange,
                "attribute \"{name}\" has {} entries for an input of rank {rank}",
                self.axes.len()
            ));
        }
        let mut seen = vec![false; rank];
        self.axes
            .iter()
            .map(|&axis| {
                let resolved = match self.rule {
                    Rule::Cvm => resolve_axis(name, axis, rank)?,
                    Rule::Cinn => in_range(name, axis, 0, rank as i64 - 1)?,
                };
                if core::mem::replace(&mut seen[resolved], true) {
                    return Err(fail!(
                        AttributeOutOfRange,
                        "attribute \"{name}\" = {:?} is not a permutation",
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
