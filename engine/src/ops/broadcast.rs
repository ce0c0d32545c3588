//! Broadcast operators of spec 001 ("Broadcast Operators"): `broadcast_add`, `broadcast_sub`,
//! `broadcast_mul`, `broadcast_div`, `broadcast_max`, and `broadcast_greater` (registered by
//! the deployed runtime; cvm-compat §1).
//!
//! Shapes broadcast as in numpy: aligned from the last axis, each pair of dimensions equal or
//! one of them 1; the output takes the larger rank. A pair (1, 0) gives 0, as numpy does (the
//! spec's `max(em, en)` would give 1 and index out of bounds; see docs/ops.md).

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use cvm_gas::Param;

use super::{Arity, ElementSteps, Family, OpDef, Operator, Usage, narrow, output_precision, walk};
use crate::error::Result;
use crate::fail;
use crate::tensor::{TensorMut, TensorRef, TensorType};

/// A table row for the broadcast operator of `kind`.
const fn row(code: u16, name: &'static str, build: super::Builder) -> OpDef {
    OpDef {
        code,
        name,
        family: Family::Broadcast,
        arity: Arity::Exactly(2),
        outputs: 1,
        attrs: &[],
        build,
    }
}

/// Row of the operator table for `broadcast_add`.
pub const BROADCAST_ADD: OpDef = row(10, "broadcast_add", |_, _| {
    Ok(Box::new(Broadcast {
        kind: BroadcastKind::Add,
    }))
});
/// Row of the operator table for `broadcast_sub`.
pub const BROADCAST_SUB: OpDef = row(11, "broadcast_sub", |_, _| {
    Ok(Box::new(Broadcast {
        kind: BroadcastKind::Sub,
    }))
});
/// Row of the operator table for `broadcast_mul`.
pub const BROADCAST_MUL: OpDef = row(12, "broadcast_mul", |_, _| {
    Ok(Box::new(Broadcast {
        kind: BroadcastKind::Mul,
    }))
});
/// Row of the operator table for `broadcast_div`.
pub const BROADCAST_DIV: OpDef = row(13, "broadcast_div", |_, _| {
    Ok(Box::new(Broadcast {
        kind: BroadcastKind::Div,
    }))
});
/// Row of the operator table for `broadcast_max`.
pub const BROADCAST_MAX: OpDef = row(14, "broadcast_max", |_, _| {
    Ok(Box::new(Broadcast {
        kind: BroadcastKind::Max,
    }))
});
/// Row of the operator table for `broadcast_greater`.
pub const BROADCAST_GREATER: OpDef = row(15, "broadcast_greater", |_, _| {
    Ok(Box::new(Broadcast {
        kind: BroadcastKind::Greater,
    }))
});

/// The arithmetic of a broadcast operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BroadcastKind {
    /// `broadcast_add`: A + B; precision max(pA, pB) + 1.
    Add,
    /// `broadcast_sub`: A − B; precision max(pA, pB) + 1.
    Sub,
    /// `broadcast_mul`: A · B; precision pA + pB.
    Mul,
    /// `broadcast_div`: A / B truncated toward zero, 0 where B = 0 (the runtime's definition,
    /// kept by cvm-compat §6); precision pA (|A / B| ≤ |A|).
    Div,
    /// `broadcast_max`: max(A, B); precision max(pA, pB).
    Max,
    /// `broadcast_greater`: 1 where A > B, else 0; precision max(pA, 2) (cvm-compat §3 gives pA;
    /// 2 is the least precision that holds 1, see docs/ops.md).
    Greater,
}

/// A numpy-broadcasting binary operator (spec 001 "Broadcast Operators"): `broadcast_add`,
/// `broadcast_sub`, `broadcast_mul`, `broadcast_div`, `broadcast_max`, `broadcast_greater`.
///
/// - Inputs: `A`, `B` with broadcast-compatible shapes. Attributes: none.
/// - Output: the broadcast shape; `Y[d] = A[a(d)] OP B[b(d)]` where a broadcast axis reads
///   index 0.
/// - Precision: per [`BroadcastKind`]; above 32 is `PrecisionOverflow`.
/// - Overflow: impossible within the inferred precisions (values never reach −2^31, so even
///   A / −1 fits); every result is still narrowed checked from i64.
/// - Errors: `ShapeMismatch` for incompatible shapes, `PrecisionOverflow`.
/// - Gas (v1): `element_arith` × output elements.
#[derive(Debug)]
pub struct Broadcast {
    kind: BroadcastKind,
}

/// The numpy broadcast of two shapes.
///
/// # Errors
/// `ShapeMismatch` naming both shapes and the first incompatible axis.
pub fn broadcast_shape(a: &[u32], b: &[u32]) -> Result<Vec<u32>> {
    let rank = a.len().max(b.len());
    let mut out = vec![0u32; rank];
    for (axis, slot) in out.iter_mut().enumerate() {
        // Dimension of each operand aligned at the right; missing leading axes are 1.
        let dim_a = (axis + a.len()).checked_sub(rank).map_or(1, |i| a[i]);
        let dim_b = (axis + b.len()).checked_sub(rank).map_or(1, |i| b[i]);
        *slot = if dim_a == dim_b || dim_b == 1 {
            dim_a
        } else if dim_a == 1 {
            dim_b
        } else {
            return Err(fail!(
                ShapeMismatch,
                "shapes {a:?} and {b:?} do not broadcast: output axis {axis} has {dim_a} vs {dim_b}"
            ));
        };
    }
    Ok(out)
}

/// Version 2 steps per output element of the broadcasting index walk ([`broadcast_apply`]
/// with operands of different shapes), beyond the operation itself.
pub const BROADCAST_WALK_STEPS: u64 = 16;

/// Strides (in elements) that read operand `dims` at output coordinates of `out_dims`:
/// 0 along broadcast axes.
fn broadcast_strides(dims: &[u32], out_dims: &[u32]) -> Vec<usize> {
    let offset = out_dims.len() - dims.len();
    let mut strides = vec![0usize; out_dims.len()];
    let mut stride = 1usize;
    for axis in (0..dims.len()).rev() {
        if dims[axis] != 1 {
            strides[axis + offset] = stride;
        }
        stride *= dims[axis] as usize;
    }
    strides
}

/// Applies `op` to every broadcast pair of `a` and `b`, writing `out` (of shape `out_dims`).
///
/// # Errors
/// Whatever `op` returns.
pub fn broadcast_apply(
    a: &TensorRef<'_>,
    b: &TensorRef<'_>,
    out_dims: &[u32],
    out: &mut [i32],
    op: impl Fn(i32, i32) -> Result<i32>,
) -> Result<()> {
    if a.dims == out_dims && b.dims == out_dims {
        for ((y, &x), &z) in out.iter_mut().zip(a.data).zip(b.data) {
            *y = op(x, z)?;
        }
        return Ok(());
    }
    let stride_a = broadcast_strides(a.dims, out_dims);
    let stride_b = broadcast_strides(b.dims, out_dims);
    let mut slots = out.iter_mut();
    walk(out_dims, [&stride_a, &stride_b], |[offset_a, offset_b]| {
        if let Some(y) = slots.next() {
            *y = op(a.data[offset_a], b.data[offset_b])?;
        }
        Ok(())
    })
}

/// `y[i] = op(x[i], z[i])`: an infallible loop the compiler can vectorise.
#[inline(always)]
fn zip_map(y: &mut [i32], x: &[i32], z: &[i32], op: impl Fn(i32, i32) -> i32) {
    for ((y, &x), &z) in y.iter_mut().zip(x).zip(z) {
        *y = op(x, z);
    }
}

impl Operator for Broadcast {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let (a, b) = (&inputs[0], &inputs[1]);
        let shape = broadcast_shape(a.dims(), b.dims())?;
        let (pa, pb) = (u32::from(a.precision), u32::from(b.precision));
        let precision = match self.kind {
            BroadcastKind::Add | BroadcastKind::Sub => pa.max(pb) + 1,
            BroadcastKind::Mul => pa + pb,
            BroadcastKind::Div => pa,
            BroadcastKind::Max => pa.max(pb),
            BroadcastKind::Greater => pa.max(2),
        };
        Ok(vec![TensorType::new(shape, output_precision(precision)?)])
    }

    fn usage(&self, inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        let elements = outputs[0].shape.elements();
        let same_shapes = inputs.iter().all(|input| input.shape == outputs[0].shape);
        let steps = match (self.kind, same_shapes) {
            // The vectorised loop of equal shapes.
            (BroadcastKind::Div, true) => ElementSteps::new(200, 6),
            (_, true) => ElementSteps::new(128, 0),
            // The index walk of broadcasting.
            (BroadcastKind::Div, false) => ElementSteps::new(200, 18),
            (_, false) => ElementSteps::new(128, BROADCAST_WALK_STEPS),
        };
        Ok(vec![
            (Param::ElementArith, elements),
            steps.usage(elements)?,
        ])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let out = &mut outputs[0];
        let (a, b) = (&inputs[0], &inputs[1]);
        if a.dims == out.dims && b.dims == out.dims {
            // Same shapes: a loop without early exit, which the compiler vectorises. Precision
            // inference bounds the exact result within the output precision ≤ 32 (Add, Sub:
            // max(pA, pB) + 1; Mul: pA + pB), so the wrapping operations never wrap.
            let (y, x, z) = (&mut *out.data, a.data, b.data);
            match self.kind {
                BroadcastKind::Add => zip_map(y, x, z, i32::wrapping_add),
                BroadcastKind::Sub => zip_map(y, x, z, i32::wrapping_sub),
                BroadcastKind::Mul => zip_map(y, x, z, i32::wrapping_mul),
                BroadcastKind::Max => zip_map(y, x, z, i32::max),
                BroadcastKind::Greater => zip_map(y, x, z, |x, z| i32::from(x > z)),
                BroadcastKind::Div => return self.run_broadcast(a, b, out),
            }
            return Ok(());
        }
        self.run_broadcast(a, b, out)
    }
}

impl Broadcast {
    /// The general path: any broadcast, every result checked.
    fn run_broadcast(
        &self,
        a: &TensorRef<'_>,
        b: &TensorRef<'_>,
        out: &mut TensorMut<'_>,
    ) -> Result<()> {
        match self.kind {
            BroadcastKind::Add => broadcast_apply(a, b, out.dims, out.data, |x, y| {
                narrow(i64::from(x) + i64::from(y))
            }),
            BroadcastKind::Sub => broadcast_apply(a, b, out.dims, out.data, |x, y| {
                narrow(i64::from(x) - i64::from(y))
            }),
            BroadcastKind::Mul => broadcast_apply(a, b, out.dims, out.data, |x, y| {
                narrow(i64::from(x) * i64::from(y))
            }),
            BroadcastKind::Div => broadcast_apply(a, b, out.dims, out.data, |x, y| {
                // Truncating division; a zero divisor gives 0 (cvm-compat §6, kept on purpose).
                if y == 0 {
                    Ok(0)
                } else {
                    narrow(i64::from(x) / i64::from(y))
                }
            }),
            BroadcastKind::Max => broadcast_apply(a, b, out.dims, out.data, |x, y| Ok(x.max(y))),
            BroadcastKind::Greater => {
                broadcast_apply(a, b, out.dims, out.data, |x, y| Ok(i32::from(x > y)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_broadcast_like_numpy() {
        assert_eq!(broadcast_shape(&[2, 3], &[2, 1]), Ok(vec![2, 3]));
        assert_eq!(broadcast_shape(&[4, 1, 3], &[5, 1]), Ok(vec![4, 5, 3]));
        assert_eq!(broadcast_shape(&[], &[3]), Ok(vec![3]));
        assert_eq!(broadcast_shape(&[1], &[0]), Ok(vec![0]));
        assert!(broadcast_shape(&[2, 3], &[3, 2]).is_err());
    }
}
