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

/// Collapse every axis after the first (spec 001 "flatten").
///
/// - **Inputs**: `X` (n0, n1, …, n_{N−1}) with N ≥ 1.
/// - **Attributes**: none.
/// - **Output shape**: (n0, n1·…·n_{N−1}); a rank-1 input (n0) gives (n0, 1).
/// - **Semantics**: the data of `X` unchanged, in row-major order (the order of spec 001's
///   `flatten_index`).
/// - **Output precision**: pX.
/// - **Rounding and overflow**: none possible.
/// - **Errors**: a rank-0 input: `ShapeMismatch`; n1·…·n_{N−1} above 2^32 − 1 (possible only when
///   n0 = 0): `LimitExceeded`.
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
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
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

/// Give the data a new shape with the same number of elements (spec 001 "reshape", with the
/// attribute and special values of CVM files, cvm-compat §1).
///
/// - **Inputs**: `X` (n0, …, n_{N−1}).
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `shape` | list of integers | required | entries > 0, or one of 0, −1, −2, −3, −4 (below) |
///
/// - **Output shape**: `shape` is read left to right while a cursor c walks the input axes,
///   starting at 0:
///
///   | entry | appends | cursor |
///   | --- | --- | --- |
///   | d > 0 | d | c + 1 |
///   | 0 | n_c (copy the input dimension) | c + 1 |
///   | −1 | a dimension inferred at the end (at most one −1 in `shape`) | c + 1 |
///   | −2 | n_c, …, n_{N−1} (every remaining input dimension; nothing if none remain) | N |
///   | −3 | n_c · n_{c+1} (merge two input dimensions) | c + 2 |
///   | −4, a, b | a, b with a·b = n_c (split one input dimension); one of a, b may be −1 and is then n_c divided by the other, which must be positive and divide n_c | c + 1 |
///
///   The inferred −1 becomes the input's element count divided by the product of the other output
///   dimensions, which must be non-zero and divide it. The resulting element count must equal the
///   input's. Examples: (2, 3, 4) with `shape` (−3, −1) gives (6, 4); with (−4, 1, 2, −2) it gives
///   (1, 2, 3, 4); (2, 3, 4) with (2, −4, −1, 3, −2) gives (2, 1, 3, 4).
/// - **Semantics**: the data of `X` unchanged, in row-major order.
/// - **Output precision**: pX.
/// - **Rounding and overflow**: none possible.
/// - **Errors**: `shape` absent: `MissingAttribute`. `AttributeOutOfRange` for: more than one −1;
///   an entry below −4; an entry (0, −3, −4) that reads an input axis at or past N; −4 not followed
///   by two entries, or a split a, b that does not give n_c. `ShapeMismatch` when the −1 cannot be
///   inferred (the other dimensions' product is 0 or does not divide the element count) or the
///   element counts differ. A dimension above 2^32 − 1: `LimitExceeded`.
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

/// Gives the data a new shape with the same number of elements (spec 002 "Reshape").
///
/// - **Inputs**: `input` of any shape.
/// - **Attributes**: `shape` (list of integers, required): entries in [1, 2^32 − 1], or −1 at most
///   once, which stands for the element count divided by the product of the other entries. A
///   dimension of 0 can only come from −1.
/// - **Output shape**: `shape` with −1 resolved. **Semantics**: the data in row-major order,
///   unchanged.
/// - **Output precision**: the input's.
/// - **Errors**: `MissingAttribute`; `AttributeOutOfRange` (an entry 0 or below −1, two −1);
///   `ShapeMismatch` (element counts differ, or do not divide evenly for −1); `LimitExceeded` (a
///   resolved dimension above 2^32 − 1).
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

/// Insert axes of length 1 (spec 001 "expand_dims").
///
/// - **Inputs**: `X` of any rank N.
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `axis` | integer | required | [−N − 1, N]; a negative axis a stands for a + N + 1 |
///   | `num_newaxis` | integer | 1 | [1, 4096] |
///
/// - **Output shape**: with position q = `axis` (or `axis` + N + 1 when negative),
///   (n_0, …, n_{q−1}, 1, …, 1, n_q, …, n_{N−1}) with `num_newaxis` ones. Examples on (2, 3):
///   `axis` 1 gives (2, 1, 3); `axis` −1 gives (2, 3, 1); `axis` 0 with `num_newaxis` 2 gives
///   (1, 1, 2, 3).
/// - **Semantics**: the data of `X` unchanged, in row-major order.
/// - **Output precision**: pX.
/// - **Rounding and overflow**: none possible.
/// - **Errors**, in order:
///   1. `axis` absent: `MissingAttribute`.
///   2. `num_newaxis` outside [1, 4096]: `AttributeOutOfRange`.
///   3. `axis` outside [−N − 1, N]: `AttributeOutOfRange`.
///   4. An output rank above 8: `LimitExceeded`.
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
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
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

/// Remove axes of length 1 (spec 001 "squeeze").
///
/// - **Inputs**: `X` of any rank N.
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `axis` | list of integers | empty | entries in [−N, N), each naming an axis of length 1; a repeated axis counts once |
///
/// - **Output shape**: the shape of `X` without the listed axes; with an empty `axis`, without
///   every axis of length 1. Removing every axis gives shape (1,) (decision 21). Examples on
///   (1, 2, 1, 3): empty `axis` gives (2, 3); (2) gives (1, 2, 3); (0, 0, −4) gives (2, 1, 3).
/// - **Semantics**: the data of `X` unchanged, in row-major order.
/// - **Output precision**: pX.
/// - **Rounding and overflow**: none possible.
/// - **Errors**, for each `axis` entry in order: outside [−N, N): `AttributeOutOfRange`; naming an
///   axis whose length is not 1: `ShapeMismatch`.
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
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
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
