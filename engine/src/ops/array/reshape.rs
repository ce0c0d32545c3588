//! New shapes for unchanged data: `flatten`, `reshape`, `expand_dims`, `squeeze` (spec 001) and
//! CINN `Reshape` (spec 002). Each copies its input whole.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::attrs::{AttrKind, in_range, spec};
use crate::error::Result;
use crate::fail;
use crate::ops::common::resolve_axis;
use crate::ops::{Arity, Family, OpDef, Operator};
use crate::tensor::TensorType;

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

    crate::ops::copy_of_input!();
}

/// Gives the data a new shape with the same element count (spec 001 "reshape", attribute
/// spelled `shape` as in CVM files; cvm-compat §1): [`Reshape`] by [`Rule::Cvm`].
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
pub const RESHAPE: OpDef = OpDef {
    code: 55,
    name: "reshape",
    family: Family::Transform,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[spec("shape", AttrKind::Ints)],
    build: |attrs, _| {
        Ok(Box::new(Reshape {
            target: attrs.ints("shape")?.to_vec(),
            rule: Rule::Cvm,
        }))
    },
};

/// Gives the data a new shape with the same element count (spec 002 "Reshape"):
/// [`Reshape`] by [`Rule::Cinn`].
///
/// - Input: `input` of any shape.
/// - Attribute: `shape` (required): entries ≥ 1 (at most 2^32 − 1), or −1 at most once, which
///   takes the element count divided by the product of the other entries. A dimension of 0 can
///   only come from −1.
/// - Output: `shape` with −1 resolved; data unchanged (row-major). Precision: the input's.
/// - Overflow: none.
/// - Errors: `MissingAttribute`; `AttributeOutOfRange` (an entry 0 or below −1, two −1);
///   `ShapeMismatch` (element counts differ, −1 does not divide evenly).
pub const CINN_RESHAPE: OpDef = OpDef {
    code: 197,
    name: "Reshape",
    family: Family::Cinn,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[spec("shape", AttrKind::Ints)],
    build: |attrs, _| {
        let shape = attrs.ints("shape")?.to_vec();
        let mut inferred = false;
        for &entry in &shape {
            if entry == -1 {
                if inferred {
                    return Err(fail!(
                        AttributeOutOfRange,
                        "attribute \"shape\" has more than one -1"
                    ));
                }
                inferred = true;
            } else {
                in_range::<u32>("shape", entry, 1, i64::from(u32::MAX))?;
            }
        }
        Ok(Box::new(Reshape {
            target: shape,
            rule: Rule::Cinn,
        }))
    },
};

/// How a [`Reshape`] row reads its target shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// `reshape`: MXNet's special values 0, −1, −2, −3, −4 walk the input axes.
    Cvm,
    /// CINN `Reshape`: entries ≥ 1 and at most one −1, checked when built.
    Cinn,
}

/// `reshape` and CINN `Reshape`: the data under a new shape with the same element count (the
/// rows' doc comments state each one's contract).
#[derive(Debug)]
pub struct Reshape {
    target: Vec<i64>,
    rule: Rule,
}

impl Reshape {
    /// The output dimensions for an input of dimensions `input`, checked in this order: the
    /// target's entries against the input, the inferred −1, the element counts, the u32 bound.
    fn resolve(&self, input: &[u32]) -> Result<Vec<u32>> {
        let (mut out, inferred) = match self.rule {
            Rule::Cvm => self.special_values(input)?,
            Rule::Cinn => self.plain_entries(input)?,
        };
        let in_elements: u64 = input.iter().map(|&d| u64::from(d)).product();
        if let Some(position) = inferred {
            let known = out
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != position)
                .try_fold(1u64, |acc, (_, &d)| acc.checked_mul(d))
                .unwrap_or(u64::MAX);
            if known == 0 || !in_elements.is_multiple_of(known) {
                return Err(match self.rule {
                    Rule::Cvm => fail!(
                        ShapeMismatch,
                        "cannot infer the -1 of \"shape\" = {:?}: {in_elements} elements do not divide into the other dimensions (product {known})",
                        self.target
                    ),
                    Rule::Cinn => fail!(
                        ShapeMismatch,
                        "cannot infer the -1 of {:?}: {in_elements} elements do not divide by {known}",
                        self.target
                    ),
                });
            }
            out[position] = in_elements / known;
        }
        let out_elements = out.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
        if out_elements != Some(in_elements) {
            return Err(match (self.rule, out_elements) {
                (Rule::Cinn, Some(known)) => fail!(
                    ShapeMismatch,
                    "cannot reshape {input:?} ({in_elements} elements) to {:?} ({known} elements)",
                    self.target
                ),
                _ => fail!(
                    ShapeMismatch,
                    "cannot reshape {input:?} ({in_elements} elements) to {out:?}"
                ),
            });
        }
        out.into_iter()
            .map(|d| {
                u32::try_from(d).map_err(|_| match self.rule {
                    Rule::Cvm => fail!(LimitExceeded, "dimension {d} exceeds u32"),
                    Rule::Cinn => fail!(LimitExceeded, "dimension {d} exceeds 2^32 − 1"),
                })
            })
            .collect()
    }

    /// `reshape`'s target with its special values resolved against the input dimensions, and
    /// the position of its −1.
    fn special_values(&self, input: &[u32]) -> Result<(Vec<u64>, Option<usize>)> {
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
        Ok((out, inferred))
    }

    /// CINN `Reshape`'s target (entries checked when built) with a placeholder 1 for its −1,
    /// and the position of the −1.
    fn plain_entries(&self, input: &[u32]) -> Result<(Vec<u64>, Option<usize>)> {
        let elements = input
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(u64::from(d)));
        let known = self
            .target
            .iter()
            .filter(|&&entry| entry != -1)
            .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64));
        if elements.is_none() || known.is_none() {
            return Err(fail!(
                ShapeMismatch,
                "cannot reshape {input:?} to {:?}: the element counts overflow",
                self.target
            ));
        }
        let out = self
            .target
            .iter()
            .map(|&entry| if entry == -1 { 1 } else { entry as u64 })
            .collect();
        Ok((out, self.target.iter().position(|&entry| entry == -1)))
    }
}

impl Operator for Reshape {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        Ok(vec![TensorType::new(
            self.resolve(inputs[0].dims())?,
            inputs[0].precision,
        )])
    }

    crate::ops::copy_of_input!();
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

    crate::ops::copy_of_input!();
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

    crate::ops::copy_of_input!();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reshape(input: &[u32], target: &[i64]) -> Result<Vec<u32>> {
        Reshape {
            target: target.to_vec(),
            rule: Rule::Cvm,
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
}
