//! Transform operators of spec 001 ("Transform Operators"): `repeat`, `tile`, `flatten`,
//! `concatenate`, `expand_dims`, `reshape`, `squeeze`, `transpose`, `strided_slice`,
//! `slice_like`, `take`, `cvm_lut`, `where`.
//!
//! These move data without arithmetic. Output precision is the input's, except `concatenate`
//! (the largest of its inputs), `cvm_lut` (the table's) and `where` (max of its two branches).

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use super::{Arity, Family, OpDef, Operator, Usage, Work, count, io_usage, resolve_axis, walk};
use crate::attrs::{AttrKind, Attrs, in_range, spec};
use crate::error::Result;
use crate::fail;
use crate::tensor::{TensorMut, TensorRef, TensorType};

/// Row of the operator table for [`Flatten`].
pub const FLATTEN: OpDef = OpDef {
    code: 52,
    name: "flatten",
    family: Family::Transform,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[],
    build: |_, _| Ok(Box::new(Flatten)),
};

/// Collapses every axis after the first (spec 001 "flatten").
///
/// - Input: `X` (n0, n1, …, n_{N−1}) with N ≥ 1. Attributes: none.
/// - Output: (n0, n1·…·n_{N−1}) (a rank-1 input gives (n0, 1)); the data is `X` in row-major
///   order, which is what the spec's `flatten_index` formula states. The spec writes `Y` with a
///   single index; the 2-D shape is the deployed runtime's and what `dense` consumes (docs/ops.md).
/// - Precision: same as X. Errors: `ShapeMismatch` for a rank-0 input.
#[derive(Debug)]
pub struct Flatten;

impl Operator for Flatten {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let dims = inputs[0].dims();
        let Some((&first, rest)) = dims.split_first() else {
            return Err(fail!(
                ShapeMismatch,
                "flatten needs an input of rank ≥ 1, got a scalar"
            ));
        };
        // Validation bounds the product of the dimensions (zeros counted as 1) by
        // MAX_TENSOR_ELEMENTS, so this product cannot overflow.
        let rest_elements = rest.iter().map(|&d| u64::from(d)).product::<u64>();
        let rest_elements = u32::try_from(rest_elements)
            .map_err(|_| fail!(LimitExceeded, "flattened width {rest_elements} exceeds u32"))?;
        Ok(vec![TensorType::new(
            [first, rest_elements],
            inputs[0].precision,
        )])
    }

    super::copy_of_input!();
}

/// Row of the operator table for [`Reshape`].
pub const RESHAPE: OpDef = OpDef {
    code: 55,
    name: "reshape",
    family: Family::Transform,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[spec("shape", AttrKind::Ints)],
    build: Reshape::build,
};

/// Gives the data a new shape with the same element count (spec 001 "reshape", attribute
/// spelled `shape` as in CVM files; cvm-compat §1).
///
/// - Input: `X` (n0, …, n_{N−1}).
/// - Attribute: `shape` (required), a list whose entries are, walking the input axes with a
///   cursor: a positive d (new dimension d, cursor +1); 0 (copy the input dimension at the
///   cursor); −1 (infer from the element count, at most once, cursor +1); −2 (copy every
///   remaining input dimension); −3 (merge the two input dimensions at the cursor); −4 followed
///   by d1, d2 (split the input dimension at the cursor into d1·d2, one of which may be −1).
/// - Output: the resulting shape; its element count must equal the input's. Data is unchanged
///   (row-major).
/// - Precision: same as X.
/// - Errors: `MissingAttribute`; `AttributeOutOfRange` for a malformed `shape` (two −1, a −4
///   without two entries or with a split that does not divide, a cursor past the input rank);
///   `ShapeMismatch` when the element counts differ or a −1 cannot be inferred (the other
///   dimensions multiply to 0 or do not divide the element count).
#[derive(Debug)]
pub struct Reshape {
    target: Vec<i64>,
}

impl Reshape {
    fn build(attrs: &Attrs<'_>, _n_inputs: usize) -> Result<Box<dyn Operator>> {
        Ok(Box::new(Reshape {
            target: attrs.ints("shape")?.to_vec(),
        }))
    }

    /// Resolves the special values of `shape` against the input dimensions.
    fn resolve(&self, input: &[u32]) -> Result<Vec<u32>> {
        let input_dim = |cursor: usize| -> Result<u64> {
            input.get(cursor).map(|&d| u64::from(d)).ok_or_else(|| {
                fail!(
                    AttributeOutOfRange,
                    "attribute \"shape\" = {:?} reads input axis {cursor}, but the input has rank {}",
                    self.target,
                    input.len()
                )
            })
        };
        let mut out: Vec<u64> = Vec::with_capacity(self.target.len());
        let mut inferred: Option<usize> = None;
        let mut cursor = 0usize;
        let mut entries = self.target.iter().copied();
        while let Some(entry) = entries.next() {
            match entry {
                1.. => {
                    out.push(entry as u64);
                    cursor += 1;
                }
                0 => {
                    out.push(input_dim(cursor)?);
                    cursor += 1;
                }
                -1 => {
                    if inferred.replace(out.len()).is_some() {
                        return Err(fail!(
                            AttributeOutOfRange,
                            "attribute \"shape\" has more than one -1"
                        ));
                    }
                    out.push(1);
                    cursor += 1;
                }
                -2 => {
                    while cursor < input.len() {
                        out.push(u64::from(input[cursor]));
                        cursor += 1;
                    }
                }
                -3 => {
                    let merged = input_dim(cursor)? * input_dim(cursor + 1)?;
                    out.push(merged);
                    cursor += 2;
                }
                -4 => {
                    let (Some(first), Some(second)) = (entries.next(), entries.next()) else {
                        return Err(fail!(
                            AttributeOutOfRange,
                            "attribute \"shape\": -4 must be followed by two entries"
                        ));
                    };
                    let source = input_dim(cursor)?;
                    cursor += 1;
                    let split = |known: i64| -> Result<u64> {
                        if known <= 0 || source % known as u64 != 0 {
                            Err(fail!(
                                AttributeOutOfRange,
                                "attribute \"shape\": -4 cannot split {source} into ({first}, {second})"
                            ))
                        } else {
                            Ok(source / known as u64)
                        }
                    };
                    let (first, second) = match (first, second) {
                        (-1, known) => (split(known)?, known as u64),
                        (known, -1) => (known as u64, split(known)?),
                        (a @ 1.., b @ 1..) if (a as u64).checked_mul(b as u64) == Some(source) => {
                            (a as u64, b as u64)
                        }
                        _ => {
                            return Err(fail!(
                                AttributeOutOfRange,
                                "attribute \"shape\": -4 cannot split {source} into ({first}, {second})"
                            ));
                        }
                    };
                    out.push(first);
                    out.push(second);
                }
                _ => {
                    return Err(fail!(
                        AttributeOutOfRange,
                        "attribute \"shape\" has entry {entry}; entries must be positive or one of 0, -1, -2, -3, -4"
                    ));
                }
            }
        }
        let in_elements: u64 = input.iter().map(|&d| u64::from(d)).product();
        if let Some(position) = inferred {
            let known = out
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != position)
                .try_fold(1u64, |acc, (_, &d)| acc.checked_mul(d))
                .unwrap_or(u64::MAX);
            if known == 0 || !in_elements.is_multiple_of(known) {
                return Err(fail!(
                    ShapeMismatch,
                    "cannot infer the -1 of \"shape\" = {:?}: {in_elements} elements do not divide into the other dimensions (product {known})",
                    self.target
                ));
            }
            out[position] = in_elements / known;
        }
        let out_elements = out.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
        if out_elements != Some(in_elements) {
            return Err(fail!(
                ShapeMismatch,
                "cannot reshape {input:?} ({in_elements} elements) to {out:?}"
            ));
        }
        out.into_iter()
            .map(|d| {
                u32::try_from(d).map_err(|_| fail!(LimitExceeded, "dimension {d} exceeds u32"))
            })
            .collect()
    }
}

impl Operator for Reshape {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        Ok(vec![TensorType::new(
            self.resolve(inputs[0].dims())?,
            inputs[0].precision,
        )])
    }

    super::copy_of_input!();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reshape(input: &[u32], target: &[i64]) -> Result<Vec<u32>> {
        Reshape {
            target: target.to_vec(),
        }
        .resolve(input)
    }

    #[test]
    fn mxnet_special_values() {
        // Examples of MXNet's reshape documentation.
        assert_eq!(reshape(&[2, 3, 4], &[4, 0, 2]), Ok(vec![4, 3, 2]));
        assert_eq!(reshape(&[2, 3, 4], &[2, 0, 0]), Ok(vec![2, 3, 4]));
        assert_eq!(reshape(&[2, 3, 4], &[6, 1, -1]), Ok(vec![6, 1, 4]));
        assert_eq!(reshape(&[2, 3, 4], &[3, -1, 8]), Ok(vec![3, 1, 8]));
        assert_eq!(reshape(&[2, 3, 4], &[-1]), Ok(vec![24]));
        assert_eq!(reshape(&[2, 3, 4], &[-2]), Ok(vec![2, 3, 4]));
        assert_eq!(reshape(&[2, 3, 4], &[2, -2]), Ok(vec![2, 3, 4]));
        assert_eq!(reshape(&[2, 3, 4], &[-2, 1, 1]), Ok(vec![2, 3, 4, 1, 1]));
        assert_eq!(reshape(&[2, 3, 4], &[-3, 4]), Ok(vec![6, 4]));
        assert_eq!(reshape(&[2, 3, 4, 5], &[-3, -3]), Ok(vec![6, 20]));
        assert_eq!(reshape(&[2, 3, 4], &[0, -3]), Ok(vec![2, 12]));
        assert_eq!(reshape(&[2, 3, 4], &[-3, -2]), Ok(vec![6, 4]));
        assert_eq!(reshape(&[2, 3, 4], &[-4, 1, 2, -2]), Ok(vec![1, 2, 3, 4]));
        assert_eq!(
            reshape(&[2, 3, 4], &[2, -4, -1, 3, -2]),
            Ok(vec![2, 1, 3, 4])
        );
    }

    #[test]
    fn malformed_targets_are_rejected() {
        assert!(reshape(&[2, 3], &[-1, -1]).is_err());
        assert!(reshape(&[2, 3], &[5]).is_err());
        assert!(reshape(&[2, 3], &[0, 0, 0]).is_err());
        assert!(reshape(&[2, 3], &[-4, 1]).is_err());
        assert!(reshape(&[6], &[-4, 4, -1]).is_err());
        assert!(reshape(&[2, 3], &[-5]).is_err());
        assert!(reshape(&[3, 0], &[-1, 0]).is_err());
        assert_eq!(reshape(&[0, 3], &[-1, 0]), Ok(vec![0, 3]));
    }

    fn ty(dims: &[u32]) -> TensorType {
        TensorType::new(dims.to_vec(), 8)
    }

    #[test]
    fn gathers_count_their_slices() {
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

/// Shape helpers shared by the transform operators.
fn product(dims: &[u32]) -> usize {
    dims.iter().map(|&d| d as usize).product()
}

/// Row of the operator table for [`Repeat`].
pub const REPEAT: OpDef = OpDef {
    code: 50,
    name: "repeat",
    family: Family::Transform,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[spec("axis", AttrKind::Int), spec("repeats", AttrKind::Int)],
    build: |attrs, _| {
        Ok(Box::new(Repeat {
            repeats: in_range("repeats", attrs.int("repeats")?, 1, i64::from(u32::MAX))?,
            axis: attrs.int_or("axis", 0),
        }))
    },
};

/// Repeats each element along an axis (spec 001 "repeat"):
/// `Y[…, d_axis, …] = X[…, ⌊d_axis / repeats⌋, …]`.
///
/// - Input: `X` of rank N ≥ 1.
/// - Attributes: `axis` in [−N, N), default 0 (the runtime's default; spec 001 gives none);
///   `repeats` ≥ 1 (required).
/// - Output: X's shape with n_axis · repeats on `axis`. Precision: same as X.
/// - Errors: `MissingAttribute`, `AttributeOutOfRange`, `LimitExceeded` (output too large).
#[derive(Debug)]
pub struct Repeat {
    repeats: u32,
    axis: i64,
}

impl Operator for Repeat {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let mut dims = inputs[0].dims().to_vec();
        let axis = resolve_axis("axis", self.axis, dims.len())?;
        dims[axis] = dims[axis].checked_mul(self.repeats).ok_or_else(|| {
            fail!(
                LimitExceeded,
                "repeated axis of {} × {} exceeds u32",
                dims[axis],
                self.repeats
            )
        })?;
        Ok(vec![TensorType::new(dims, inputs[0].precision)])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let dims = inputs[0].dims;
        let axis = resolve_axis("axis", self.axis, dims.len())?;
        let inner = product(&dims[axis + 1..]);
        let mut out = outputs[0].data.iter_mut();
        for block in inputs[0].data.chunks_exact(inner.max(1)) {
            for _ in 0..self.repeats {
                for (&x, y) in block.iter().zip(out.by_ref()) {
                    *y = x;
                }
            }
        }
        Ok(())
    }
}

/// Row of the operator table for [`Tile`].
pub const TILE: OpDef = OpDef {
    code: 51,
    name: "tile",
    family: Family::Transform,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[spec("reps", AttrKind::Ints)],
    build: |attrs, _| {
        let reps = attrs
            .ints("reps")?
            .iter()
            .map(|&r| in_range("reps", r, 1, 4096))
            .collect::<Result<Vec<u32>>>()?;
        if reps.is_empty() {
            return Err(fail!(
                AttributeOutOfRange,
                "attribute \"reps\" must not be empty"
            ));
        }
        Ok(Box::new(Tile { reps }))
    },
};

/// Tiles the whole tensor (spec 001 "tile"): with K = max(M, N), both shapes aligned from the
/// right and padded with 1, `Y[k] = X[k_{K−N+j} mod n_j]` and the output dimensions are
/// n_i · reps_i.
///
/// - Input: `X` of rank N. Attribute: `reps` (required, M ≥ 1 entries in [1, 4096)).
/// - Output: rank K, dims SX_i · SR_i. Precision: same as X.
/// - Errors: `MissingAttribute`, `AttributeOutOfRange`, `LimitExceeded`.
#[derive(Debug)]
pub struct Tile {
    reps: Vec<u32>,
}

impl Tile {
    /// Input dims and reps, both padded on the left to rank K.
    fn aligned(&self, dims: &[u32]) -> (Vec<u32>, Vec<u32>) {
        let rank = dims.len().max(self.reps.len());
        let pad = |values: &[u32]| {
            let mut padded = vec![1u32; rank - values.len()];
            padded.extend_from_slice(values);
            padded
        };
        (pad(dims), pad(&self.reps))
    }
}

impl Operator for Tile {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let (dims, reps) = self.aligned(inputs[0].dims());
        let out = dims
            .iter()
            .zip(&reps)
            .map(|(&d, &r)| {
                d.checked_mul(r)
                    .ok_or_else(|| fail!(LimitExceeded, "tiled dimension {d} × {r} exceeds u32"))
            })
            .collect::<Result<Vec<u32>>>()?;
        Ok(vec![TensorType::new(out, inputs[0].precision)])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let (dims, _) = self.aligned(inputs[0].dims);
        let out_dims = outputs[0].dims;
        let strides = crate::tensor::Shape::new(dims.clone()).strides();
        let mut index = vec![0u32; out_dims.len()];
        for y in outputs[0].data.iter_mut() {
            let offset: usize = index
                .iter()
                .zip(&dims)
                .zip(&strides)
                .map(|((&k, &n), &stride)| (k % n) as usize * stride)
                .sum();
            *y = inputs[0].data[offset];
            for axis in (0..index.len()).rev() {
                index[axis] += 1;
                if index[axis] < out_dims[axis] {
                    break;
                }
                index[axis] = 0;
            }
        }
        Ok(())
    }
}

/// Row of the operator table for [`Concatenate`].
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
/// - Inputs: M ≥ 1 tensors of equal rank N whose dimensions agree except on `axis`.
/// - Attribute: `axis` in [−N, N), default 1.
/// - Output: the common shape with Σ n^i_axis on `axis`; inputs follow each other in order.
/// - Precision: the maximum of the inputs'.
/// - Errors: `AttributeOutOfRange`, `ShapeMismatch` (ranks or other dimensions differ),
///   `LimitExceeded` (the joined axis exceeds 2^32 − 1).
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

/// Row of the operator table for [`ExpandDims`].
pub const EXPAND_DIMS: OpDef = OpDef {
    code: 54,
    name: "expand_dims",
    family: Family::Transform,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[
        spec("axis", AttrKind::Int),
        spec("num_newaxis", AttrKind::Int),
    ],
    build: |attrs, _| {
        Ok(Box::new(ExpandDims {
            axis: attrs.int("axis")?,
            num_newaxis: in_range("num_newaxis", attrs.int_or("num_newaxis", 1), 1, 4096)?,
        }))
    },
};

/// Inserts axes of length 1 (spec 001 "expand_dims").
///
/// - Input: `X` of rank N.
/// - Attributes: `axis` in [−N − 1, N + 1) (required; a negative axis counts from N + 1);
///   `num_newaxis` in [1, 4096], default 1 (the deployed runtime's bounds).
/// - Output: X's shape with `num_newaxis` ones inserted before position `axis`; data unchanged.
///   Precision: same as X.
/// - Errors: `MissingAttribute`, `AttributeOutOfRange`, `LimitExceeded` (rank above 8).
#[derive(Debug)]
pub struct ExpandDims {
    axis: i64,
    num_newaxis: usize,
}

impl Operator for ExpandDims {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let dims = inputs[0].dims();
        let position = resolve_axis("axis", self.axis, dims.len() + 1)?;
        let mut out = dims[..position].to_vec();
        out.extend(core::iter::repeat_n(1, self.num_newaxis));
        out.extend_from_slice(&dims[position..]);
        Ok(vec![TensorType::new(out, inputs[0].precision)])
    }

    super::copy_of_input!();
}

/// Row of the operator table for [`Squeeze`].
pub const SQUEEZE: OpDef = OpDef {
    code: 56,
    name: "squeeze",
    family: Family::Transform,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[spec("axis", AttrKind::Ints)],
    build: |attrs, _| {
        Ok(Box::new(Squeeze {
            axis: attrs.opt_ints("axis").unwrap_or(&[]).to_vec(),
        }))
    },
};

/// Removes axes of length 1 (spec 001 "squeeze").
///
/// - Input: `X` of rank N.
/// - Attribute: `axis` (list, default empty): axes in [−N, N), each of length 1; they form a
///   set (spec 001), so a repeated axis counts once. Empty removes every axis of length 1.
/// - Output: X's shape without those axes, or (1,) when none is left, as the deployed runtime
///   gives (spec 001's formula would give rank 0); data unchanged. Precision: same as X.
/// - Errors: `AttributeOutOfRange` (axis out of range), `ShapeMismatch` (an axis whose length
///   is not 1).
#[derive(Debug)]
pub struct Squeeze {
    axis: Vec<i64>,
}

impl Operator for Squeeze {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let dims = inputs[0].dims();
        let mut removed = vec![self.axis.is_empty(); dims.len()];
        if self.axis.is_empty() {
            for (flag, &dim) in removed.iter_mut().zip(dims) {
                *flag = dim == 1;
            }
        }
        for &axis in &self.axis {
            let resolved = resolve_axis("axis", axis, dims.len())?;
            removed[resolved] = true;
            if dims[resolved] != 1 {
                return Err(fail!(
                    ShapeMismatch,
                    "cannot squeeze axis {resolved} of {}: its length is {}, not 1",
                    inputs[0].shape,
                    dims[resolved]
                ));
            }
        }
        let mut out: Vec<u32> = dims
            .iter()
            .zip(&removed)
            .filter(|&(_, &r)| !r)
            .map(|(&d, _)| d)
            .collect();
        if out.is_empty() {
            out.push(1);
        }
        Ok(vec![TensorType::new(out, inputs[0].precision)])
    }

    super::copy_of_input!();
}

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

/// Row of the operator table for [`SliceLike`].
pub const SLICE_LIKE: OpDef = OpDef {
    code: 59,
    name: "slice_like",
    family: Family::Transform,
    arity: Arity::Exactly(2),
    outputs: 1,
    attrs: &[spec("axis", AttrKind::Ints)],
    build: |attrs, _| {
        Ok(Box::new(SliceLike {
            axis: attrs.opt_ints("axis").unwrap_or(&[]).to_vec(),
        }))
    },
};

/// Cuts `X` to the shape of `shape_like` on some axes (spec 001 "slice_like"): the leading
/// `m_j` entries of each sliced axis j are kept.
///
/// - Inputs: `X` (rank N), `shape_like` (rank M; only its shape is used).
/// - Attribute: `axis` (list, default empty). Empty: the sliced axes are 0..M, and M must equal
///   N. Otherwise the listed axes (in [−N, N)), each also below M.
/// - Output: X's shape with m_j on every sliced axis j (m_j ≤ n_j). Precision: same as X.
///   The listed axes form a set (spec 001): a repeated axis counts once.
/// - Errors: `AttributeOutOfRange` (axis out of range or past shape_like's rank),
///   `ShapeMismatch` (ranks differ without `axis`, m_j > n_j).
#[derive(Debug)]
pub struct SliceLike {
    axis: Vec<i64>,
}

impl Operator for SliceLike {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let (dims, like) = (inputs[0].dims(), inputs[1].dims());
        let sliced: Vec<usize> = if self.axis.is_empty() {
            if like.len() != dims.len() {
                return Err(fail!(
                    ShapeMismatch,
                    "without \"axis\", shape_like {} must have the rank of the data {}",
                    inputs[1].shape,
                    inputs[0].shape
                ));
            }
            (0..dims.len()).collect()
        } else {
            self.axis
                .iter()
                .map(|&axis| {
                    let resolved = resolve_axis("axis", axis, dims.len())?;
                    if resolved >= like.len() {
                        return Err(fail!(
                            AttributeOutOfRange,
                            "axis {resolved} does not exist in shape_like {}",
                            inputs[1].shape
                        ));
                    }
                    Ok(resolved)
                })
                .collect::<Result<_>>()?
        };
        let mut out = dims.to_vec();
        for axis in sliced {
            if like[axis] > dims[axis] {
                return Err(fail!(
                    ShapeMismatch,
                    "shape_like {} is longer than the data {} on axis {axis}",
                    inputs[1].shape,
                    inputs[0].shape
                ));
            }
            out[axis] = like[axis];
        }
        Ok(vec![TensorType::new(out, inputs[0].precision)])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let strides = crate::tensor::Shape::new(inputs[0].dims).strides();
        let mut out = outputs[0].data.iter_mut();
        walk(outputs[0].dims, [&strides], |[offset]| {
            if let Some(y) = out.next() {
                *y = inputs[0].data[offset];
            }
            Ok(())
        })
    }
}

/// Row of the operator table for [`Take`].
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
/// - Inputs: `X` (rank N), `indices` (rank M, any precision).
/// - Attribute: `axis` (optional, in [−N, N)).
/// - Without `axis`: Y has the indices' shape, `Y[d] = flatten(X)[clip(indices[d], 0, |X| − 1)]`.
/// - With `axis` = a: Y has shape n_0…n_{a−1}, m_0…m_{M−1}, n_{a+1}…n_{N−1} and
///   `Y[…] = X[d_0…d_{a−1}, clip(indices[…], 0, n_a − 1), …]`.
/// - Precision: same as X.
/// - Errors: `AttributeOutOfRange`, `ShapeMismatch` (taking from an empty axis or tensor),
///   `LimitExceeded` (rank above 8).
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

/// Row of the operator table for [`StridedSlice`].
pub const STRIDED_SLICE: OpDef = OpDef {
    code: 58,
    name: "strided_slice",
    family: Family::Transform,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[
        spec("begin", AttrKind::Ints),
        spec("end", AttrKind::Ints),
        spec("stride", AttrKind::Ints),
    ],
    build: |attrs, _| {
        let stride = attrs.opt_ints("stride").unwrap_or(&[]).to_vec();
        if let Some(position) = stride.iter().position(|&s| s == 0 || s == i64::MIN) {
            return Err(fail!(
                AttributeOutOfRange,
                "attribute \"stride\" has {} at position {position}; entries must be non-zero and above −2^63",
                stride[position]
            ));
        }
        // The deployed runtime's defaults: begin (0), end (1).
        Ok(Box::new(StridedSlice {
            begin: attrs.opt_ints("begin").unwrap_or(&[0]).to_vec(),
            end: attrs.opt_ints("end").unwrap_or(&[1]).to_vec(),
            stride,
        }))
    },
};

/// Slices with begin, end and stride per axis (spec 001 "slice", registered as
/// `strided_slice`; attributes spelled `begin`, `end`, `stride` as in CVM files).
///
/// - Input: `X` of rank N.
/// - Attributes, as the deployed runtime parses them: `begin` (list of at most N entries,
///   default (0)), `end` (list, default (1): the first element of axis 0), `stride` (list,
///   default empty; entries non-zero). Entries of `end` and `stride` past N are ignored (a
///   `begin` longer than N makes the deployed kernel read past its shape: rejected). Missing
///   entries mean begin 0, end n_i, stride 1. Negative begin or end entries count from the end
///   (+ n_i). A stride of magnitude n_i or more selects one element, the same as ±n_i.
/// - Clamping: with a positive stride, begin and end are clamped to [0, n_i]; with a negative
///   stride, to [−1, n_i − 1]. Then begin < end (positive stride) or end < begin (negative) is
///   required. (Spec 001 clamps to n_i − 1 and −1 … n_i − 2, which would drop the last element of
///   every full slice and contradict its own default end = n_i; the deployed runtime clamps as
///   here. docs/ops.md.)
/// - Output: dims ⌈|end − begin| / |stride|⌉; `Y[d] = X[begin + stride·d]`. Precision: same as X.
/// - Errors: `AttributeOutOfRange` (`begin` longer than N, a stride of 0 or −2^63, an empty
///   range).
#[derive(Debug)]
pub struct StridedSlice {
    begin: Vec<i64>,
    end: Vec<i64>,
    stride: Vec<i64>,
}

/// One axis of a resolved slice: first index, step, count.
struct SliceAxis {
    start: i64,
    step: i64,
    count: u32,
}

impl StridedSlice {
    fn resolve(&self, dims: &[u32]) -> Result<Vec<SliceAxis>> {
        if self.begin.len() > dims.len() {
            return Err(fail!(
                AttributeOutOfRange,
                "attribute \"begin\" has {} entries for an input of rank {}: the deployed kernel reads past the shape (undefined behaviour)",
                self.begin.len(),
                dims.len()
            ));
        }
        dims.iter()
            .enumerate()
            .map(|(axis, &dim)| {
                let n = i64::from(dim);
                // |step| ≥ n selects one element, as ±n does; clamping keeps offsets small.
                let step = self.stride.get(axis).copied().unwrap_or(1).clamp(-n, n);
                let from_end = |value: i64| if value < 0 { value.saturating_add(n) } else { value };
                let (low, high) = if step < 0 { (-1, n - 1) } else { (0, n) };
                let begin = from_end(self.begin.get(axis).copied().unwrap_or(0)).clamp(low, high);
                let end = from_end(self.end.get(axis).copied().unwrap_or(n)).clamp(low, high);
                let span = if step > 0 { end - begin } else { begin - end };
                if span <= 0 {
                    return Err(fail!(
                        AttributeOutOfRange,
                        "axis {axis}: begin {begin} and end {end} (after clamping to the length {dim}) select nothing with stride {step}"
                    ));
                }
                let magnitude = step.unsigned_abs();
                let count = (span as u64).div_ceil(magnitude);
                Ok(SliceAxis { start: begin, step, count: count as u32 })
            })
            .collect()
    }
}

impl Operator for StridedSlice {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let axes = self.resolve(inputs[0].dims())?;
        Ok(vec![TensorType::new(
            axes.iter().map(|a| a.count).collect::<Vec<_>>(),
            inputs[0].precision,
        )])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let dims = inputs[0].dims;
        let axes = self.resolve(dims)?;
        let in_strides = crate::tensor::Shape::new(dims).strides();
        // Offset of the first element, then per output axis the (possibly negative) step.
        let base: i64 = axes
            .iter()
            .zip(&in_strides)
            .map(|(a, &s)| a.start * s as i64)
            .sum();
        let steps: Vec<i64> = axes
            .iter()
            .zip(&in_strides)
            .map(|(a, &s)| a.step * s as i64)
            .collect();
        let out_dims = outputs[0].dims;
        let mut index = vec![0u32; out_dims.len()];
        let mut offset = base;
        for y in outputs[0].data.iter_mut() {
            *y = inputs[0].data[offset as usize];
            for axis in (0..index.len()).rev() {
                index[axis] += 1;
                offset += steps[axis];
                if index[axis] < out_dims[axis] {
                    break;
                }
                offset -= steps[axis] * i64::from(out_dims[axis]);
                index[axis] = 0;
            }
        }
        Ok(())
    }
}

/// Row of the operator table for [`CvmLut`].
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
/// - Inputs: `indices` (input 0, any shape and precision) and `table` (input 1), in the order of
///   CVM symbol files and the runtime (spec 001 lists them the other way round; docs/ops.md).
/// - Attribute: `in_dim` (required): must equal the table's element count.
/// - Output: the indices' shape. Precision: the table's (cvm-compat §3).
/// - Errors: `MissingAttribute`, `AttributeOutOfRange` (`in_dim` ≠ table size), `ShapeMismatch`
///   (empty table with indices to look up).
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
