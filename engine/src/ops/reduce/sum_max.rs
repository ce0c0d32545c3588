//! Reduce operators of spec 001 ("Reduce Operators"): `sum`, `max`.
//!
//! The reduced axes R follow spec 001: T is `axis` with negative entries taken from the end;
//! R = T, or U − T with `exclude`; an empty `axis` without `exclude` reduces every axis (the
//! spec's case 2). Sums run in i64; `max` is the true maximum (cvm-compat §6: the deployed
//! runtime starts the accumulator at 0 when reducing every axis; spec 001 does not).

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::attrs::{AttrKind, Attrs, spec};
use crate::error::Result;
use crate::fail;
use crate::ops::common::{Read, output_precision, resolve_axis, trailing_runs, walk};
use crate::ops::{Arity, Family, OpDef, Operator};
use crate::tensor::{TensorMut, TensorRef, TensorType, bit_width};

const REDUCE_ATTRS: &[crate::attrs::AttrSpec] = &[
    spec("axis", AttrKind::Ints),
    spec("exclude", AttrKind::Bool),
    spec("keepdims", AttrKind::Bool),
];

/// Sum over axes (spec 001 "sum").
///
/// - **Inputs**: `X` of any rank N.
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `axis` | list of integers | empty | entries in [−N, N), no axis named twice (a and a − N name the same axis) |
///   | `exclude` | boolean | false | |
///   | `keepdims` | boolean | false | |
///
/// - **Output shape**: as in [Reduce operators](#reduce-operators). Examples: (3, 3, 2) with
///   `axis` (1) gives (3, 2); with (1, 2) it gives (3); with an empty `axis` it gives (1,), and
///   with `keepdims` (1, 1, 1).
/// - **Semantics**: every output element is the sum of the input elements whose coordinates on the
///   axes outside R equal the output's coordinates on those axes; the coordinates on the axes of
///   R run over their whole range. An axis of length 0 in R gives sums of no terms, 0.
/// - **Output precision**: p + bits(K); (3, 3, 2) of precision 8 summed over axis 1 gives
///   8 + bits(3) = 10.
/// - **Rounding and overflow**: exact. Every partial sum has at most K terms, so in any order it
///   stays within the inferred precision (≤ 32): the i32 additions cannot overflow, and the
///   engine sums each contiguous run of the input in a vectorised loop.
/// - **Errors**, in order:
///   1. An `axis` entry outside [−N, N), or one naming an axis that an earlier entry named:
///      `AttributeOutOfRange`.
///   2. p + bits(K) > 32: `PrecisionOverflow`.
pub const SUM: OpDef = OpDef {
    code: 1,
    name: "sum",
    family: Family::Reduce,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: REDUCE_ATTRS,
    build: |attrs, _| Reduce::build(attrs, ReduceKind::Sum),
};

/// Maximum over axes (spec 001 "max").
///
/// - **Inputs**: `X` of any rank N.
/// - **Attributes**: as for [sum](#sum): `axis` (default empty), `exclude` (default false),
///   `keepdims` (default false).
/// - **Output shape**: as in [Reduce operators](#reduce-operators).
/// - **Semantics**: every output element is the maximum of the input elements it reduces (chosen
///   as for `sum`): the true maximum, so all-negative data gives a negative result.
/// - **Output precision**: p.
/// - **Rounding and overflow**: none possible.
/// - **Errors**, in order:
///   1. An `axis` entry outside [−N, N), or one naming an axis that an earlier entry named:
///      `AttributeOutOfRange`.
///   2. K = 0 (an axis of R has length 0) while the output has elements: `ShapeMismatch` (a
///      maximum of no element).
pub const MAX: OpDef = OpDef {
    code: 2,
    name: "max",
    family: Family::Reduce,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: REDUCE_ATTRS,
    build: |attrs, _| Reduce::build(attrs, ReduceKind::Max),
};

/// Which reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceKind {
    /// Σ of the reduced elements; precision p + bits(K), K the number of elements reduced into
    /// each output (the product of the reduced dimensions).
    Sum,
    /// Maximum of the reduced elements; precision p.
    Max,
}

/// A reduction over axes (spec 001 "sum", "max").
///
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
#[derive(Debug)]
pub struct Reduce {
    kind: ReduceKind,
    axis: Vec<i64>,
    keepdims: bool,
    exclude: bool,
}

/// Shapes of one reduction, derived from the input shape.
struct Plan {
    /// Output dimensions.
    out_dims: Vec<u32>,
    /// Per input axis: the stride of the output element it accumulates into (0 on reduced
    /// axes).
    out_strides: Vec<usize>,
    /// Number of input elements reduced into each output element.
    reduction: u64,
}

/// The input cut into runs ([`trailing_runs`] of its dims, read through the output offsets
/// of [`Plan`]): a run whose output is `Repeated` folds into one output element (reduced
/// trailing axes); a `Contiguous` one adds element by element onto as many consecutive output
/// elements (kept trailing axes). The axes before `split` are walked, one step per run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct InputRuns {
    split: usize,
    run: usize,
    kind: Read,
}

impl InputRuns {
    fn new(dims: &[u32], out_strides: &[usize]) -> InputRuns {
        let (split, run, [kind]) = trailing_runs(dims, [out_strides]);
        InputRuns { split, run, kind }
    }
}

/// Folds `values` with the associative and commutative `op` (whose identity is `identity`) in
/// eight independent lanes, which the compiler turns into vector instructions, then folds the
/// lanes and the tail. The order differs from a left fold; the result does not.
#[inline(always)]
fn fold_lanes(values: &[i32], identity: i32, op: impl Fn(i32, i32) -> i32) -> i32 {
    let mut lanes = [identity; 8];
    let chunks = values.chunks_exact(8);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (lane, &x) in lanes.iter_mut().zip(chunk) {
            *lane = op(*lane, x);
        }
    }
    lanes
        .iter()
        .chain(tail)
        .fold(identity, |acc, &x| op(acc, x))
}

impl Reduce {
    fn build(attrs: &Attrs<'_>, kind: ReduceKind) -> Result<Box<dyn Operator>> {
        Ok(Box::new(Reduce {
            kind,
            axis: attrs.opt_ints("axis").unwrap_or(&[]).to_vec(),
            keepdims: attrs.bool_or("keepdims", false),
            exclude: attrs.bool_or("exclude", false),
        }))
    }

    fn plan(&self, dims: &[u32]) -> Result<Plan> {
        let rank = dims.len();
        let mut listed = vec![false; rank];
        for &axis in &self.axis {
            let resolved = resolve_axis("axis", axis, rank)?;
            if core::mem::replace(&mut listed[resolved], true) {
                return Err(fail!(
                    AttributeOutOfRange,
                    "attribute \"axis\" lists axis {resolved} twice"
                ));
            }
        }
        let reduced: Vec<bool> = if self.axis.is_empty() && !self.exclude {
            vec![true; rank]
        } else {
            listed.iter().map(|&t| t != self.exclude).collect()
        };
        let mut out_dims = Vec::with_capacity(rank);
        for (axis, &dim) in dims.iter().enumerate() {
            if !reduced[axis] {
                out_dims.push(dim);
            } else if self.keepdims {
                out_dims.push(1);
            }
        }
        let all_reduced = reduced.iter().all(|&r| r);
        if all_reduced && !self.keepdims {
            out_dims = vec![1];
        }
        // Output strides of the kept axes, mapped back onto input axes.
        let mut out_strides = vec![0usize; rank];
        let mut stride = 1usize;
        for axis in (0..rank).rev() {
            if !reduced[axis] {
                out_strides[axis] = stride;
                stride *= dims[axis] as usize;
            }
        }
        let reduction = dims
            .iter()
            .zip(&reduced)
            .filter(|&(_, &r)| r)
            .map(|(&d, _)| u64::from(d))
            .product();
        Ok(Plan {
            out_dims,
            out_strides,
            reduction,
        })
    }
}

impl Operator for Reduce {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let input = &inputs[0];
        let plan = self.plan(input.dims())?;
        let out_elements: u64 = plan.out_dims.iter().map(|&d| u64::from(d)).product();
        let precision = match self.kind {
            ReduceKind::Sum => {
                output_precision(u32::from(input.precision) + bit_width(plan.reduction))?
            }
            ReduceKind::Max => {
                if plan.reduction == 0 && out_elements > 0 {
                    return Err(fail!(
                        ShapeMismatch,
                        "max over an axis of size 0 (input {}) has no element to return",
                        input.shape
                    ));
                }
                input.precision
            }
        };
        Ok(vec![TensorType::new(plan.out_dims, precision)])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let input = &inputs[0];
        let plan = self.plan(input.dims)?;
        let runs = InputRuns::new(input.dims, &plan.out_strides);
        let out = &mut *outputs[0].data;
        if self.kind == ReduceKind::Max {
            out.fill(i32::MIN);
        }
        if runs.run == 0 {
            return Ok(());
        }
        // Sum: every partial sum, in any order, holds at most K terms of magnitude
        // ≤ 2^(p−1) − 1, so it is bounded like the total by the inferred precision (≤ 32): the
        // wrapping additions never wrap, and the loops over a run carry no check, which lets
        // the compiler vectorise them.
        let (kind, run) = (self.kind, runs.run);
        let mut chunks = input.data.chunks_exact(run);
        let missing = || fail!(ShapeMismatch, "reduction output shorter than its shape");
        walk(
            &input.dims[..runs.split],
            [&plan.out_strides[..runs.split]],
            |[offset]| {
                let Some(values) = chunks.next() else {
                    return Ok(());
                };
                match runs.kind {
                    Read::Repeated => {
                        let slot = out.get_mut(offset).ok_or_else(missing)?;
                        *slot = match kind {
                            ReduceKind::Sum => {
                                slot.wrapping_add(fold_lanes(values, 0, i32::wrapping_add))
                            }
                            ReduceKind::Max => (*slot).max(fold_lanes(values, i32::MIN, i32::max)),
                        };
                    }
                    Read::Contiguous => {
                        let slots = offset
                            .checked_add(run)
                            .and_then(|end| out.get_mut(offset..end))
                            .ok_or_else(missing)?;
                        match kind {
                            ReduceKind::Sum => {
                                for (slot, &x) in slots.iter_mut().zip(values) {
                                    *slot = slot.wrapping_add(x);
                                }
                            }
                            ReduceKind::Max => {
                                for (slot, &x) in slots.iter_mut().zip(values) {
                                    *slot = (*slot).max(x);
                                }
                            }
                        }
                    }
                }
                Ok(())
            },
        )
    }
}
