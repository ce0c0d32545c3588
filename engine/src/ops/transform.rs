//! Transform operators of spec 001 ("Transform Operators"): `flatten`, `reshape`.
//!
//! These move data without arithmetic; output precision equals input precision.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use cvm_gas::Param;

use super::{Arity, Family, OpDef, Operator, Usage};
use crate::attrs::{AttrKind, Attrs, spec};
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
/// - Gas: `element_copy` × elements.
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

    fn usage(&self, _inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        Ok(vec![(Param::ElementCopy, outputs[0].shape.elements())])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        outputs[0].data.copy_from_slice(inputs[0].data);
        Ok(())
    }
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
/// - Gas: `element_copy` × elements.
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

    fn usage(&self, _inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        Ok(vec![(Param::ElementCopy, outputs[0].shape.elements())])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        outputs[0].data.copy_from_slice(inputs[0].data);
        Ok(())
    }
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
}
