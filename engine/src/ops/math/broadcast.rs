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

use crate::error::Result;
use crate::fail;
use crate::ops::common::{Read, narrow, output_precision, trailing_runs, walk};
use crate::ops::{Arity, Family, OpDef, Operator};
use crate::tensor::{TensorMut, TensorRef, TensorType};

/// A table row for the broadcast operator of `kind`.
const fn row(code: u16, name: &'static str, build: crate::ops::Builder) -> OpDef {
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

/// Numpy-broadcasting sum (spec 001 "broadcast_add"): `Y = A + B`.
///
/// - **Inputs**: `A`, `B` with broadcast-compatible shapes.
/// - **Attributes**: none.
/// - **Output shape**: the broadcast shape. The shapes are aligned at their last axes; an operand
///   with fewer axes counts as having leading dimensions of 1. At every aligned axis the two
///   dimensions must be equal or one of them must be 1; the output takes the common dimension, or
///   the other one where one is 1 (so a pair (1, 0) gives 0). The output rank is the larger rank.
/// - **Semantics**: `Y[d] = A[a(d)] + B[b(d)]`, where each operand is read at the output coordinate
///   along its own axes, and at index 0 along axes where its dimension is 1.
/// - **Output precision**: max(pA, pB) + 1.
/// - **Rounding and overflow**: exact; sums are computed in `i64` and narrowed with a check. With
///   equal operand shapes a vectorisable `i32` loop runs instead: the output precision bounds the
///   exact sum, so it never wraps.
/// - **Errors**: `ShapeMismatch` when a pair of aligned dimensions differs and neither is 1;
///   `PrecisionOverflow` when max(pA, pB) = 32.
pub const BROADCAST_ADD: OpDef = row(10, "broadcast_add", |_, _| {
    Ok(Box::new(Broadcast {
        kind: BroadcastKind::Add,
    }))
});
/// Numpy-broadcasting difference (spec 001 "broadcast_sub"): `Y = A − B`.
///
/// - **Inputs**: `A`, `B` with broadcast-compatible shapes.
/// - **Attributes**: none.
/// - **Output shape**: the broadcast shape, as for [broadcast_add](#broadcast_add).
/// - **Semantics**: `Y[d] = A[a(d)] − B[b(d)]`, operands read as for broadcast_add.
/// - **Output precision**: max(pA, pB) + 1.
/// - **Rounding and overflow**: exact; differences are computed in `i64` and narrowed with a
///   check (equal shapes: an `i32` loop, as for broadcast_add).
/// - **Errors**: `ShapeMismatch` for incompatible shapes; `PrecisionOverflow` when
///   max(pA, pB) = 32.
pub const BROADCAST_SUB: OpDef = row(11, "broadcast_sub", |_, _| {
    Ok(Box::new(Broadcast {
        kind: BroadcastKind::Sub,
    }))
});
/// Numpy-broadcasting product (spec 001 "broadcast_mul"): `Y = A · B`.
///
/// - **Inputs**: `A`, `B` with broadcast-compatible shapes.
/// - **Attributes**: none.
/// - **Output shape**: the broadcast shape, as for [broadcast_add](#broadcast_add).
/// - **Semantics**: `Y[d] = A[a(d)] · B[b(d)]`, operands read as for broadcast_add.
/// - **Output precision**: pA + pB.
/// - **Rounding and overflow**: exact; products are computed in `i64` and narrowed with a check
///   (equal shapes: an `i32` loop, as for broadcast_add).
/// - **Errors**: `ShapeMismatch` for incompatible shapes; `PrecisionOverflow` when pA + pB > 32.
pub const BROADCAST_MUL: OpDef = row(12, "broadcast_mul", |_, _| {
    Ok(Box::new(Broadcast {
        kind: BroadcastKind::Mul,
    }))
});
/// Numpy-broadcasting integer division (spec 001 "broadcast_div"): `Y = A / B`, truncated toward
/// zero, with 0 where B = 0.
///
/// - **Inputs**: `A`, `B` with broadcast-compatible shapes.
/// - **Attributes**: none.
/// - **Output shape**: the broadcast shape, as for [broadcast_add](#broadcast_add).
/// - **Semantics**: `Y[d] = trunc(A[a(d)] / B[b(d)])` when `B[b(d)]` ≠ 0, and `Y[d] = 0` when it
///   is 0 (decision 18). Examples: 7 / 2 = 3, −7 / 2 = −3, 7 / −2 = −3, 5 / −2 = −2, 5 / 0 = 0.
/// - **Output precision**: pA (|A / B| ≤ |A| for B ≠ 0).
/// - **Rounding and overflow**: truncation toward zero. No value is −2^31, so even
///   (2^31 − 1) / −1 fits; the result is still narrowed with a check. A zero divisor is not an
///   error: `broadcast_div` never raises `DivisionByZero`.
/// - **Errors**: `ShapeMismatch` for incompatible shapes.
pub const BROADCAST_DIV: OpDef = row(13, "broadcast_div", |_, _| {
    Ok(Box::new(Broadcast {
        kind: BroadcastKind::Div,
    }))
});
/// Numpy-broadcasting maximum (spec 001 "broadcast_max"): `Y = max(A, B)`.
///
/// - **Inputs**: `A`, `B` with broadcast-compatible shapes.
/// - **Attributes**: none.
/// - **Output shape**: the broadcast shape, as for [broadcast_add](#broadcast_add).
/// - **Semantics**: `Y[d] = max(A[a(d)], B[b(d)])`.
/// - **Output precision**: max(pA, pB).
/// - **Rounding and overflow**: none possible.
/// - **Errors**: `ShapeMismatch` for incompatible shapes.
pub const BROADCAST_MAX: OpDef = row(14, "broadcast_max", |_, _| {
    Ok(Box::new(Broadcast {
        kind: BroadcastKind::Max,
    }))
});
/// Numpy-broadcasting comparison: `Y = 1` where `A > B`, else 0. Spec 001 does not list it; the
/// deployed runtime registers it (cvm-compat §1), and it broadcasts like the other five.
///
/// - **Inputs**: `A`, `B` with broadcast-compatible shapes.
/// - **Attributes**: none.
/// - **Output shape**: the broadcast shape, as for [broadcast_add](#broadcast_add).
/// - **Semantics**: `Y[d] = 1` if `A[a(d)] > B[b(d)]`, else `Y[d] = 0`.
/// - **Output precision**: max(pA, 2) (decision 19; cvm-compat §3 gives pA).
/// - **Rounding and overflow**: none possible.
/// - **Errors**: `ShapeMismatch` for incompatible shapes.
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
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
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

/// A broadcast of two operands cut into runs: the output's trailing axes from `split` on hold
/// `run` consecutive elements along which each operand is either read contiguously or repeats
/// one value; the leading axes are walked, one step per run. Equal shapes are one run; a bias
/// row added to a matrix is one run per row, both operands contiguous; a column is one run per
/// row, the column's value repeated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Runs {
    split: usize,
    run: usize,
    reads: [Read; 2],
    strides: [Vec<usize>; 2],
}

impl Runs {
    /// The runs of operands of shapes `a` and `b` broadcast to `out` (as `broadcast_shape`
    /// returned it).
    pub fn new(a: &[u32], b: &[u32], out: &[u32]) -> Runs {
        let strides = [broadcast_strides(a, out), broadcast_strides(b, out)];
        let (split, run, reads) = trailing_runs(out, [&strides[0], &strides[1]]);
        Runs {
            split,
            run,
            reads,
            strides,
        }
    }
}

/// One operand along a run: its `run` values, or one value repeated.
#[derive(Clone, Copy, Debug)]
pub enum Operand<'a> {
    /// The run's values.
    Slice(&'a [i32]),
    /// One value for the whole run.
    Scalar(i32),
}

/// Calls `per_run` for every run of `out` (shape `out_dims`) with the operands' values along it
/// ([`Runs`]).
///
/// # Errors
/// Whatever `per_run` returns; `ShapeMismatch` if an operand holds fewer elements than its
/// shape (only for operands `infer` did not accept).
pub fn broadcast_runs(
    a: &TensorRef<'_>,
    b: &TensorRef<'_>,
    out_dims: &[u32],
    out: &mut [i32],
    mut per_run: impl FnMut(&mut [i32], Operand<'_>, Operand<'_>) -> Result<()>,
) -> Result<()> {
    let runs = Runs::new(a.dims, b.dims, out_dims);
    if runs.run == 0 || out.is_empty() {
        return Ok(());
    }
    let mut chunks = out.chunks_exact_mut(runs.run);
    let [strides_a, strides_b] = [
        &runs.strides[0][..runs.split],
        &runs.strides[1][..runs.split],
    ];
    walk(
        &out_dims[..runs.split],
        [strides_a, strides_b],
        |[offset_a, offset_b]| {
            let Some(y) = chunks.next() else {
                return Ok(());
            };
            per_run(
                y,
                operand(a.data, offset_a, runs.run, runs.reads[0])?,
                operand(b.data, offset_b, runs.run, runs.reads[1])?,
            )
        },
    )
}

/// The values of an operand along the run of `run` elements that starts at `offset`.
///
/// # Errors
/// `ShapeMismatch` if the operand holds fewer elements (only for operands `infer` did not
/// accept).
fn operand(data: &[i32], offset: usize, run: usize, how: Read) -> Result<Operand<'_>> {
    let values = match how {
        Read::Contiguous => offset
            .checked_add(run)
            .and_then(|end| data.get(offset..end))
            .map(Operand::Slice),
        Read::Repeated => data.get(offset).map(|&value| Operand::Scalar(value)),
    };
    values.ok_or_else(|| {
        fail!(
            ShapeMismatch,
            "a broadcast operand is shorter than its shape"
        )
    })
}

/// Applies `op` to every broadcast pair of `a` and `b`, writing `out` (of shape `out_dims`),
/// run by run ([`Runs`]).
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
    broadcast_runs(a, b, out_dims, out, |y, x, z| match (x, z) {
        (Operand::Slice(x), Operand::Slice(z)) => y
            .iter_mut()
            .zip(x)
            .zip(z)
            .try_for_each(|((y, &x), &z)| op(x, z).map(|v| *y = v)),
        (Operand::Slice(x), Operand::Scalar(z)) => y
            .iter_mut()
            .zip(x)
            .try_for_each(|(y, &x)| op(x, z).map(|v| *y = v)),
        (Operand::Scalar(x), Operand::Slice(z)) => y
            .iter_mut()
            .zip(z)
            .try_for_each(|(y, &z)| op(x, z).map(|v| *y = v)),
        (Operand::Scalar(x), Operand::Scalar(z)) => {
            y.fill(op(x, z)?);
            Ok(())
        }
    })
}

/// `y = op(x, z)` along one run, for an infallible `op`: loops the compiler vectorises.
#[inline(always)]
fn map_run(y: &mut [i32], x: Operand<'_>, z: Operand<'_>, op: impl Fn(i32, i32) -> i32) {
    match (x, z) {
        (Operand::Slice(x), Operand::Slice(z)) => zip_map(y, x, z, op),
        (Operand::Slice(x), Operand::Scalar(z)) => {
            for (y, &x) in y.iter_mut().zip(x) {
                *y = op(x, z);
            }
        }
        (Operand::Scalar(x), Operand::Slice(z)) => {
            for (y, &z) in y.iter_mut().zip(z) {
                *y = op(x, z);
            }
        }
        (Operand::Scalar(x), Operand::Scalar(z)) => y.fill(op(x, z)),
    }
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

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let out = &mut outputs[0];
        let (a, b) = (&inputs[0], &inputs[1]);
        // Precision inference bounds every exact result within the output precision ≤ 32
        // (Add, Sub: max(pA, pB) + 1; Mul: pA + pB), so the wrapping operations never wrap and
        // each run is a loop without early exit, which the compiler vectorises. Only Div
        // checks each result.
        match self.kind {
            BroadcastKind::Add => wrapping_runs(a, b, out, i32::wrapping_add),
            BroadcastKind::Sub => wrapping_runs(a, b, out, i32::wrapping_sub),
            BroadcastKind::Mul => wrapping_runs(a, b, out, i32::wrapping_mul),
            BroadcastKind::Max => wrapping_runs(a, b, out, i32::max),
            BroadcastKind::Greater => wrapping_runs(a, b, out, |x, z| i32::from(x > z)),
            BroadcastKind::Div => broadcast_apply(a, b, out.dims, out.data, |x, y| {
                // Truncating division; a zero divisor gives 0 (cvm-compat §6, kept on purpose).
                if y == 0 {
                    Ok(0)
                } else {
                    narrow(i64::from(x) / i64::from(y))
                }
            }),
        }
    }
}

/// Writes `op(a, b)` into `out` run by run, for an `op` that cannot fail.
fn wrapping_runs(
    a: &TensorRef<'_>,
    b: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
    op: impl Fn(i32, i32) -> i32 + Copy,
) -> Result<()> {
    broadcast_runs(a, b, out.dims, out.data, |y, x, z| {
        map_run(y, x, z, op);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_cover_the_longest_suffix_read_contiguously_or_repeated() {
        let runs = |a: &[u32], b: &[u32], out: &[u32]| {
            let r = Runs::new(a, b, out);
            (r.split, r.run, r.reads)
        };
        use Read::{Contiguous as C, Repeated as R};
        // Equal shapes: one run.
        assert_eq!(runs(&[4, 5, 6], &[4, 5, 6], &[4, 5, 6]), (0, 120, [C, C]));
        // A bias row: one run per row, both contiguous.
        assert_eq!(runs(&[8, 16], &[16], &[8, 16]), (1, 16, [C, C]));
        // A column: one run per row, the column's value repeated.
        assert_eq!(runs(&[8, 16], &[8, 1], &[8, 16]), (1, 16, [C, R]));
        // A per-channel value over NCHW planes: one run per plane.
        assert_eq!(
            runs(&[2, 3, 4, 5], &[3, 1, 1], &[2, 3, 4, 5]),
            (2, 20, [C, R])
        );
        // Axes of length 1 never cut a run.
        assert_eq!(runs(&[8, 1, 16], &[1, 1, 16], &[8, 1, 16]), (1, 16, [C, C]));
        // An outer product: runs along the last axis only.
        assert_eq!(runs(&[6, 1], &[1, 7], &[6, 7]), (1, 7, [R, C]));
        // A scalar against anything: one run.
        assert_eq!(runs(&[], &[3, 4], &[3, 4]), (0, 12, [R, C]));
    }

    #[test]
    fn shapes_broadcast_like_numpy() {
        assert_eq!(broadcast_shape(&[2, 3], &[2, 1]), Ok(vec![2, 3]));
        assert_eq!(broadcast_shape(&[4, 1, 3], &[5, 1]), Ok(vec![4, 5, 3]));
        assert_eq!(broadcast_shape(&[], &[3]), Ok(vec![3]));
        assert_eq!(broadcast_shape(&[1], &[0]), Ok(vec![0]));
        assert!(broadcast_shape(&[2, 3], &[3, 2]).is_err());
    }
}
