//! Gathering elements by index: `take` and `cvm_lut` (spec 001); indices are clipped into range.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::attrs::{AttrKind, spec};
use crate::error::Result;
use crate::fail;
use crate::ops::common::{count, product, resolve_axis};
use crate::ops::{Arity, Family, OpDef, Operator, Usage, Work};
use crate::tensor::{TensorMut, TensorRef, TensorType};

/// Gather elements by index (spec 001 "take"); indices are clipped into range.
///
/// - **Inputs**: `X` (n_0, …, n_{N−1}); `indices` (m_0, …, m_{M−1}) of any precision.
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `axis` | integer | absent (take from the flattened `X`) | [−N, N) |
///
/// - **Output shape**: without `axis`, the shape of `indices`. With `axis` = a (a + N when
///   negative): (n_0, …, n_{a−1}, m_0, …, m_{M−1}, n_{a+1}, …, n_{N−1}).
/// - **Semantics**: without `axis`, `Y[d] = flatten(X)[clip(indices[d], 0, |X| − 1)]`. With
///   `axis` = a, where e runs over the coordinates of `indices`:
///
///   ```text
///   Y[d_0, …, d_{a−1}, e, d_{a+1}, …] = X[d_0, …, d_{a−1}, clip(indices[e], 0, n_a − 1), d_{a+1}, …]
///   ```
///
///   Negative indices take element 0, indices past the end the last one.
/// - **Output precision**: pX.
/// - **Rounding and overflow**: none possible.
/// - **Errors**, in order:
///   1. `axis` outside [−N, N): `AttributeOutOfRange`.
///   2. `indices` with at least one element and an empty `X` (without `axis`) or n_a = 0 (with
///      `axis`): `ShapeMismatch` (decision 30).
///   3. An output rank above 8: `LimitExceeded`.
pub const TAKE: OpDef = OpDef {
    code: 60,
    name: "take",
    family: Family::Transform,
    arity: Arity::Exactly(2),
    outputs: 1,
    attrs: &[spec("axis", AttrKind::Int)],
    build: |attrs, _| {
        Ok(Box::new(Take {
            axis: attrs.opt_int("axis"),
        }))
    },
};

/// Gathers elements by index (spec 001 "take"); indices are clipped into range.
///
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
#[derive(Debug)]
pub struct Take {
    axis: Option<i64>,
}

impl Operator for Take {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let (data, indices) = (&inputs[0], &inputs[1]);
        let out = match self.axis {
            None => {
                if data.shape.elements() == 0 && indices.shape.elements() > 0 {
                    return Err(fail!(
                        ShapeMismatch,
                        "cannot take from an empty tensor {}",
                        data.shape
                    ));
                }
                indices.dims().to_vec()
            }
            Some(axis) => {
                let dims = data.dims();
                let axis = resolve_axis("axis", axis, dims.len())?;
                if dims[axis] == 0 && indices.shape.elements() > 0 {
                    return Err(fail!(
                        ShapeMismatch,
                        "cannot take from axis {axis} of length 0 in {}",
                        data.shape
                    ));
                }
                let mut out = dims[..axis].to_vec();
                out.extend_from_slice(indices.dims());
                out.extend_from_slice(&dims[axis + 1..]);
                out
            }
        };
        Ok(vec![TensorType::new(out, data.precision)])
    }

    fn usage(&self, inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        // Reads the indices and the gathered elements of `data`, not all of it.
        let written = outputs[0].shape.elements();
        let indices = inputs[1].shape.elements();
        let reads = indices
            .checked_add(written)
            .ok_or_else(|| fail!(LimitExceeded, "work count overflows 64 bits"))?;
        // Each index gathers one slice of `data` per position before the axis (one element when
        // `data` is read flat).
        let outer = match self.axis {
            None => 1,
            Some(axis) => {
                let dims = inputs[0].dims();
                let axis = resolve_axis("axis", axis, dims.len())?;
                count(
                    &dims[..axis]
                        .iter()
                        .map(|&d| u64::from(d))
                        .collect::<Vec<_>>(),
                )?
            }
        };
        let mut work = Work::io(reads, written);
        work.slices = count(&[outer, indices])?;
        Ok(Usage { class: "", work })
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let (data, indices) = (&inputs[0], &inputs[1]);
        let clip = |index: i32, len: usize| (index.max(0) as usize).min(len.saturating_sub(1));
        match self.axis {
            None => {
                for (y, &index) in outputs[0].data.iter_mut().zip(indices.data) {
                    *y = data.data[clip(index, data.data.len())];
                }
            }
            Some(axis) => {
                let axis = resolve_axis("axis", axis, data.dims.len())?;
                let outer = product(&data.dims[..axis]);
                let length = data.dims[axis] as usize;
                let inner = product(&data.dims[axis + 1..]);
                let mut out = outputs[0].data.iter_mut();
                for block in 0..outer {
                    for &index in indices.data {
                        let start = (block * length + clip(index, length)) * inner;
                        for (&x, y) in data.data[start..start + inner].iter().zip(out.by_ref()) {
                            *y = x;
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// Table lookup (spec 001 "cvm_lut", a `take` without axis).
///
/// - **Inputs**: `indices` (input 0) of any shape and precision; `table` (input 1) of any shape,
///   read flattened (decision 24).
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `in_dim` | integer | required | the number of elements of `table` |
///
/// - **Output shape**: the shape of `indices`.
/// - **Semantics**: `Y[d] = flatten(table)[clip(indices[d], 0, |table| − 1)]`.
/// - **Output precision**: the precision of `table` (cvm-compat §3).
/// - **Rounding and overflow**: none possible.
/// - **Errors**, in order:
///   1. `in_dim` absent: `MissingAttribute`.
///   2. `in_dim` other than the number of elements of `table`: `AttributeOutOfRange`.
///   3. An empty `table` with at least one index: `ShapeMismatch` (decision 30).
pub const CVM_LUT: OpDef = OpDef {
    code: 61,
    name: "cvm_lut",
    family: Family::Transform,
    arity: Arity::Exactly(2),
    outputs: 1,
    attrs: &[spec("in_dim", AttrKind::Int)],
    build: |attrs, _| {
        Ok(Box::new(CvmLut {
            in_dim: attrs.int("in_dim")?,
        }))
    },
};

/// Table lookup (spec 001 "cvm_lut": `take` without axis): `Y[d] = table[clip(indices[d], 0,
/// |table| − 1)]`.
///
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
#[derive(Debug)]
pub struct CvmLut {
    in_dim: i64,
}

impl Operator for CvmLut {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let (indices, table) = (&inputs[0], &inputs[1]);
        let size = table.shape.elements();
        if u64::try_from(self.in_dim).ok() != Some(size) {
            return Err(fail!(
                AttributeOutOfRange,
                "attribute \"in_dim\" = {} must equal the table's {size} elements",
                self.in_dim
            ));
        }
        if size == 0 && indices.shape.elements() > 0 {
            return Err(fail!(ShapeMismatch, "cannot look up in an empty table"));
        }
        Ok(vec![TensorType {
            shape: indices.shape.clone(),
            precision: table.precision,
        }])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let (indices, table) = (&inputs[0], &inputs[1]);
        let last = table.data.len().saturating_sub(1);
        for (y, &index) in outputs[0].data.iter_mut().zip(indices.data) {
            *y = table.data[(index.max(0) as usize).min(last)];
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(dims: &[u32]) -> TensorType {
        TensorType::new(dims.to_vec(), 8)
    }

    #[test]
    fn take_counts_its_slices() {
        // take along axis 1 of [3, 10, 7] with 4 indices: 3 × 4 rows of 7 elements.
        let inputs = [ty(&[3, 10, 7]), ty(&[2, 2])];
        let take = Take { axis: Some(1) };
        let out = take.infer(&inputs).unwrap();
        assert_eq!(out[0].dims(), &[3, 2, 2, 7]);
        let usage = take.usage(&inputs, &out).unwrap();
        assert_eq!(
            usage.work,
            Work {
                slices: 12,
                ..Work::io(4 + 84, 84)
            }
        );
        // Flat: one element per index.
        let flat = Take { axis: None };
        let out = flat.infer(&inputs).unwrap();
        assert_eq!(flat.usage(&inputs, &out).unwrap().work.slices, 4);
    }
}
