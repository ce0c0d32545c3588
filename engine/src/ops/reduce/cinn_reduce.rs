//! CINN `Reduce` (spec 002): kSum, kProd, kMax or kMin over a set of axes; kProd in Q(F) fixed
//! point, rounding after each multiplication (its documented order).

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::attrs::{AttrKind, Attrs, in_range, spec};
use crate::error::Result;
use crate::fail;
use crate::ops::common::{Offsets, choice, distinct, fetch, io_usage, row_major};
use crate::ops::fixed_point::{ARITH_PRECISION, frac_bits, narrow32, rescale};
use crate::ops::{Arity, Family, OpDef, Operator, Usage};
use crate::tensor::{TensorMut, TensorRef, TensorType};

/// Reduction over a set of axes (spec 002 "Reduce").
///
/// - **Inputs**: `input` of rank N.
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `dim` | list of integers | empty (every axis) | entries in [0, N), no entry twice |
///   | `frac_bits` | integer | 0 | [0, 30]; used by kProd only |
///   | `keep_dim` | boolean | false | |
///   | `kind` | string | required | "kSum", "kProd", "kMax", "kMin" |
///
/// - **Output shape**: the input shape without the reduced axes, or with them as 1 under
///   `keep_dim`. Reducing every axis without `keep_dim` gives (1,), never rank 0. Each output
///   element reduces the K elements that share its kept coordinates (K the product of the reduced
///   dimensions).
/// - **Semantics**: kSum: the exact sum (0 when K = 0). kProd: starting from 1 (2^F), the elements
///   are multiplied one at a time in row-major order of the reduced axes, each product rounded once
///   to Q(F), halves away from zero (2^F when K = 0). kMax, kMin: the largest or smallest element.
/// - **Output precision**: 32 for kSum and kProd; the input's for kMax and kMin.
/// - **Rounding and overflow**: kSum is exact; kProd rounds after each multiplication (1.5³ in Q(1)
///   gives 4.0, not the 3.5 of one rounding of 3.375). A kSum result or any intermediate kProd value
///   outside ±(2^31 − 1) is `IntegerOverflow`, even if a later factor would shrink it.
/// - **Errors**: `MissingAttribute` (`kind`); `AttributeOutOfRange` (another kind, F, a `dim`
///   entry outside [0, N) or repeated); `ShapeMismatch` (kMax or kMin over K = 0 elements while the
///   output has elements); `IntegerOverflow`.
pub const REDUCE: OpDef = OpDef {
    code: 196,
    name: "Reduce",
    family: Family::Cinn,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[
        spec("dim", AttrKind::Ints),
        spec("frac_bits", AttrKind::Int),
        spec("keep_dim", AttrKind::Bool),
        spec("kind", AttrKind::Str),
    ],
    build: Reduce::build,
};

/// The reduction of [`Reduce`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceKind {
    /// "kSum": Σ x.
    Sum,
    /// "kProd": Π x in Q(F).
    Prod,
    /// "kMax": the largest element.
    Max,
    /// "kMin": the smallest element.
    Min,
}

/// Reduction over a set of axes (spec 002 "Reduce").
///
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
#[derive(Debug)]
pub struct Reduce {
    kind: ReduceKind,
    dim: Vec<i64>,
    keep_dim: bool,
    frac: u32,
}

/// Shapes of one reduction.
struct ReducePlan {
    kept_dims: Vec<u32>,
    kept_steps: Vec<i64>,
    reduced_dims: Vec<u32>,
    reduced_steps: Vec<i64>,
    out_dims: Vec<u32>,
}

impl Reduce {
    fn build(attrs: &Attrs<'_>, _n_inputs: usize) -> Result<Box<dyn Operator>> {
        let kind = choice(
            attrs,
            "kind",
            None,
            &[
                ("kSum", ReduceKind::Sum),
                ("kProd", ReduceKind::Prod),
                ("kMax", ReduceKind::Max),
                ("kMin", ReduceKind::Min),
            ],
        )?;
        let dim = attrs.opt_ints("dim").unwrap_or(&[]).to_vec();
        distinct("dim", &dim)?;
        Ok(Box::new(Reduce {
            kind,
            dim,
            keep_dim: attrs.bool_or("keep_dim", false),
            frac: frac_bits(attrs)?,
        }))
    }

    fn plan(&self, dims: &[u32]) -> Result<ReducePlan> {
        let rank = dims.len();
        let mut reduced = vec![self.dim.is_empty(); rank];
        for &axis in &self.dim {
            let axis: usize = in_range("dim", axis, 0, rank as i64 - 1)?;
            reduced[axis] = true;
        }
        let strides = row_major(dims);
        let mut plan = ReducePlan {
            kept_dims: Vec::new(),
            kept_steps: Vec::new(),
            reduced_dims: Vec::new(),
            reduced_steps: Vec::new(),
            out_dims: Vec::new(),
        };
        for ((&dim, &stride), &is_reduced) in dims.iter().zip(&strides).zip(&reduced) {
            if is_reduced {
                plan.reduced_dims.push(dim);
                plan.reduced_steps.push(stride);
                if self.keep_dim {
                    plan.out_dims.push(1);
                }
            } else {
                plan.kept_dims.push(dim);
                plan.kept_steps.push(stride);
                plan.out_dims.push(dim);
            }
        }
        if plan.kept_dims.is_empty() && !self.keep_dim {
            plan.out_dims = vec![1];
        }
        Ok(plan)
    }
}

impl Operator for Reduce {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let input = &inputs[0];
        let plan = self.plan(input.dims())?;
        let precision = match self.kind {
            ReduceKind::Sum | ReduceKind::Prod => ARITH_PRECISION,
            ReduceKind::Max | ReduceKind::Min => {
                if plan.reduced_dims.contains(&0) && !plan.kept_dims.contains(&0) {
                    return Err(fail!(
                        ShapeMismatch,
                        "{:?} over an axis of length 0 (input {}) has no element to return",
                        self.kind,
                        input.shape
                    ));
                }
                input.precision
            }
        };
        Ok(vec![TensorType::new(plan.out_dims, precision)])
    }

    fn usage(&self, inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        let mut usage = io_usage(inputs, outputs)?;
        if self.kind == ReduceKind::Prod {
            usage.class = "prod";
        }
        Ok(usage)
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let plan = self.plan(inputs[0].dims)?;
        let data = inputs[0].data;
        let mut reduced = Offsets::new(&plan.reduced_dims, &plan.reduced_steps, 0);
        let bases = Offsets::new(&plan.kept_dims, &plan.kept_steps, 0);
        for (slot, base) in outputs[0].data.iter_mut().zip(bases) {
            reduced.restart(base);
            *slot = match self.kind {
                ReduceKind::Sum => {
                    // At most 2^26 terms below 2^31: exact in i128.
                    let mut sum = 0i128;
                    for offset in reduced.by_ref() {
                        sum += i128::from(fetch(data, offset)?);
                    }
                    narrow32(sum)?
                }
                ReduceKind::Prod => {
                    let mut acc: i32 = 1 << self.frac;
                    for offset in reduced.by_ref() {
                        let factor = fetch(data, offset)?;
                        acc = rescale(i128::from(acc) * i128::from(factor), self.frac)?;
                    }
                    acc
                }
                ReduceKind::Max => {
                    let mut best = i32::MIN;
                    for offset in reduced.by_ref() {
                        best = best.max(fetch(data, offset)?);
                    }
                    best
                }
                ReduceKind::Min => {
                    let mut best = i32::MAX;
                    for offset in reduced.by_ref() {
                        best = best.min(fetch(data, offset)?);
                    }
                    best
                }
            };
        }
        Ok(())
    }
}
