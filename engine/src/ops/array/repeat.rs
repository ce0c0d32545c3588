//! Repeating data along axes: `repeat` and `tile` (spec 001) and CINN `BroadcastTo` (spec 002).

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::attrs::{AttrKind, Attrs, in_range, spec};
use crate::error::Result;
use crate::fail;
use crate::ops::common::{gather, product, resolve_axis, row_major};
use crate::ops::{Arity, Family, OpDef, Operator};
use crate::tensor::{TensorMut, TensorRef, TensorType};

/// Repeat every element along an axis (spec 001 "repeat").
///
/// - **Inputs**: `X` of rank N ≥ 1.
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `axis` | integer | 0 | [−N, N) |
///   | `repeats` | integer | required | [1, 2^32 − 1] |
///
/// - **Output shape**: the shape of `X` with n_axis · repeats on `axis`.
/// - **Semantics**: `Y[…, d_axis, …] = X[…, ⌊d_axis / repeats⌋, …]`: each element (each slice
///   along `axis`) is repeated right after itself.
/// - **Output precision**: pX.
/// - **Rounding and overflow**: none possible.
/// - **Errors**, in order:
///   1. `repeats` absent: `MissingAttribute`; outside [1, 2^32 − 1]: `AttributeOutOfRange`.
///   2. `axis` outside [−N, N) (every axis, for a rank-0 input): `AttributeOutOfRange`.
///   3. n_axis · repeats above 2^32 − 1: `LimitExceeded`.
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
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
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

/// Tile the whole tensor (spec 001 "tile").
///
/// - **Inputs**: `X` of any rank N.
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `reps` | list of integers | required | at least one entry; each in [1, 4096] |
///
/// - **Output shape**: with M entries in `reps` and K = max(M, N), the shape of `X` and `reps` are
///   both aligned at their last entries and padded on the left with 1 to length K, giving SX and
///   SR; the output is (SX_0·SR_0, …, SX_{K−1}·SR_{K−1}). Examples: (2, 2) with `reps` (2) gives
///   (2, 4); (2) with `reps` (2, 2) gives (2, 4).
/// - **Semantics**: `Y[k_0, …, k_{K−1}] = X[k_{K−N} mod n_0, …, k_{K−1} mod n_{N−1}]`: the whole
///   tensor repeated after itself along every axis.
/// - **Output precision**: pX.
/// - **Rounding and overflow**: none possible.
/// - **Errors**, in order:
///   1. `reps` absent: `MissingAttribute`.
///   2. An entry outside [1, 4096]: `AttributeOutOfRange`.
///   3. `reps` empty: `AttributeOutOfRange`.
///   4. An output dimension above 2^32 − 1: `LimitExceeded`.
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
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
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

/// Broadcasts a tensor to a shape along mapped axes (spec 002 "BroadcastTo").
///
/// - **Inputs**: `var` of rank R.
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `out_shape` | list of integers | required | entries in [0, 2^32 − 1] |
///   | `broadcast_axes` | list of integers | required | R entries, strictly increasing, each in [0, len(`out_shape`)) |
///
/// - **Output shape**: `out_shape`. Input axis i maps to output axis `broadcast_axes[i]`, whose
///   length must equal the input's n_i unless n_i = 1.
/// - **Semantics**: `Y[d] = X[e]` with e_i = d_{broadcast_axes[i]}, or 0 where n_i = 1; output axes
///   no input axis maps to repeat the data.
/// - **Output precision**: the input's.
/// - **Errors**: `MissingAttribute`; `AttributeOutOfRange` (entries out of range, axes not strictly
///   increasing); `ShapeMismatch` (len(`broadcast_axes`) ≠ R, a dimension neither 1 nor equal to
///   its target).
pub const BROADCAST_TO: OpDef = OpDef {
    code: 192,
    name: "BroadcastTo",
    family: Family::Cinn,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[
        spec("broadcast_axes", AttrKind::Ints),
        spec("out_shape", AttrKind::Ints),
    ],
    build: BroadcastTo::build,
};

/// Broadcasts a tensor to a shape along mapped axes (spec 002 "BroadcastTo").
///
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
#[derive(Debug)]
pub struct BroadcastTo {
    out_shape: Vec<u32>,
    axes: Vec<usize>,
}

impl BroadcastTo {
    fn build(attrs: &Attrs<'_>, _n_inputs: usize) -> Result<Box<dyn Operator>> {
        let out_shape = attrs
            .ints("out_shape")?
            .iter()
            .map(|&dim| in_range("out_shape", dim, 0, i64::from(u32::MAX)))
            .collect::<Result<Vec<u32>>>()?;
        let rank = out_shape.len() as i64;
        let mut axes: Vec<usize> = Vec::new();
        for &axis in attrs.ints("broadcast_axes")? {
            let axis: usize = in_range("broadcast_axes", axis, 0, rank - 1)?;
            if axes.last().is_some_and(|&previous| previous >= axis) {
                return Err(fail!(
                    AttributeOutOfRange,
                    "attribute \"broadcast_axes\" must be strictly increasing"
                ));
            }
            axes.push(axis);
        }
        Ok(Box::new(BroadcastTo { out_shape, axes }))
    }

    /// Steps reading the input at output coordinates.
    fn steps(&self, dims: &[u32]) -> Result<Vec<i64>> {
        if dims.len() != self.axes.len() {
            return Err(fail!(
                ShapeMismatch,
                "broadcast_axes has {} entries but the input has rank {} (shape {dims:?})",
                self.axes.len(),
                dims.len()
            ));
        }
        let strides = row_major(dims);
        let mut steps = vec![0i64; self.out_shape.len()];
        for (input_axis, (&axis, &dim)) in self.axes.iter().zip(dims).enumerate() {
            let target = self.out_shape[axis];
            if dim != 1 && dim != target {
                return Err(fail!(
                    ShapeMismatch,
                    "input axis {input_axis} has length {dim}, which cannot broadcast to output axis {axis} of length {target}"
                ));
            }
            if dim != 1 {
                steps[axis] = strides[input_axis];
            }
        }
        Ok(steps)
    }
}

impl Operator for BroadcastTo {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        self.steps(inputs[0].dims())?;
        Ok(vec![TensorType::new(
            self.out_shape.clone(),
            inputs[0].precision,
        )])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let steps = self.steps(inputs[0].dims)?;
        gather(&self.out_shape, &steps, 0, inputs[0].data, outputs[0].data)
    }
}
