//! CINN complex primitives of spec 002 ("Complex Primitive APIs") on int32 tensors:
//! `BnGradBiasScale`, `BnMeanVariance`, `BroadcastTo`, `Compare`, `Concat`, `Conv`, `Reduce`,
//! `Reshape`, `Reverse`, `Select`, `Slice`, `Transpose`.
//!
//! Fixed point: every primitive that multiplies takes `frac_bits` F (0..=30, default 0); a value
//! x stands for x / 2^F (Q(F)), inputs and output in the same F. Products are summed exactly
//! (i128) and the total is rescaled once: round_half_away_from_zero(sum / 2^F). Only `Reduce`
//! with kind kProd rounds after each multiplication (its documented order). An arithmetic result
//! outside ±(2^31 − 1) is `IntegerOverflow`: arithmetic outputs have precision 32, which admits
//! exactly |y| ≤ 2^31 − 1. `Compare` outputs 0/1 with precision 2; data-movement primitives keep
//! their inputs' precision. Inputs may have any precision 1..=32.
//!
//! Shape and attribute rules are checked by `infer` (validation); `run` only fails on values
//! (`IntegerOverflow`).

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use super::broadcast::{broadcast_apply, broadcast_shape};
use super::{Arity, Family, OpDef, Operator, Usage, count, io_usage, resolve_axis};
use crate::attrs::{AttrKind, AttrSpec, Attrs, in_range, pair_in_range, spec};
use crate::error::Result;
use crate::fail;
use crate::kernels::wide::wide_dot;
use crate::tensor::{TensorMut, TensorRef, TensorType};

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

/// Precision of every arithmetic output: |y| ≤ 2^31 − 1.
const ARITH_PRECISION: u8 = 32;

/// Precision of boolean outputs (values 0 and 1).
const BOOL_PRECISION: u8 = 2;

/// Largest `frac_bits`.
const MAX_FRAC_BITS: i64 = 30;

/// Largest stride, padding and dilation of `Conv`.
const MAX_GEOMETRY: i64 = 4095;

/// Largest magnitude of an arithmetic result.
const MAX_RESULT: i128 = i32::MAX as i128;

/// The `frac_bits` attribute: 0..=30, default 0.
fn frac_bits(attrs: &Attrs<'_>) -> Result<u32> {
    in_range("frac_bits", attrs.int_or("frac_bits", 0), 0, MAX_FRAC_BITS)
}

/// `value` as a precision-32 result.
///
/// # Errors
/// `IntegerOverflow` outside ±(2^31 − 1).
fn narrow32(value: i128) -> Result<i32> {
    if (-MAX_RESULT..=MAX_RESULT).contains(&value) {
        Ok(value as i32)
    } else {
        Err(fail!(
            IntegerOverflow,
            "result {value} is outside ±(2^31 − 1)"
        ))
    }
}

/// round_half_away_from_zero(value / 2^frac) as a precision-32 result.
///
/// # Errors
/// `IntegerOverflow` when the rounded value is outside ±(2^31 − 1).
fn rescale(value: i128, frac: u32) -> Result<i32> {
    if frac == 0 {
        return narrow32(value);
    }
    let magnitude = value.unsigned_abs();
    // ⌊m / 2^F⌋ plus the bit just below the binary point: rounds halves up, without an addition
    // that could overflow.
    let rounded = (magnitude >> frac) + ((magnitude >> (frac - 1)) & 1);
    let rounded = i128::try_from(rounded)
        .map_err(|_| fail!(IntegerOverflow, "result of magnitude {rounded} overflows"))?;
    narrow32(if value < 0 { -rounded } else { rounded })
}

/// A string attribute that takes one of the values of `table`; `default` when absent (`None`:
/// the attribute is required).
///
/// # Errors
/// `MissingAttribute`, or `AttributeOutOfRange` for a value outside the table.
fn choice<T: Copy>(
    attrs: &Attrs<'_>,
    name: &str,
    default: Option<T>,
    table: &[(&str, T)],
) -> Result<T> {
    match attrs.opt_str(name) {
        None => default.ok_or_else(|| fail!(MissingAttribute, "attribute \"{name}\" is required")),
        Some(value) => table
            .iter()
            .find(|(label, _)| *label == value)
            .map(|&(_, item)| item)
            .ok_or_else(|| {
                let labels: Vec<&str> = table.iter().map(|&(label, _)| label).collect();
                fail!(
                    AttributeOutOfRange,
                    "attribute \"{name}\" = \"{value}\" is not one of {labels:?}"
                )
            }),
    }
}

/// Product of dimensions (saturating; validated shapes stay far below the limit).
fn product(dims: &[u32]) -> usize {
    dims.iter()
        .fold(1usize, |acc, &dim| acc.saturating_mul(dim as usize))
}

/// Row-major strides in elements, as signed steps.
fn row_major(dims: &[u32]) -> Vec<i64> {
    let mut strides = vec![1i64; dims.len()];
    let mut stride = 1i64;
    for (slot, &dim) in strides.iter_mut().zip(dims).rev() {
        *slot = stride;
        stride = stride.saturating_mul(i64::from(dim));
    }
    strides
}

/// The element of `data` at `offset`.
///
/// # Errors
/// `ShapeMismatch` when `offset` lies outside `data` (only for inputs `infer` did not accept).
fn fetch(data: &[i32], offset: i64) -> Result<i32> {
    usize::try_from(offset)
        .ok()
        .and_then(|index| data.get(index))
        .copied()
        .ok_or_else(|| {
            fail!(
                ShapeMismatch,
                "element offset {offset} lies outside an input of {} elements",
                data.len()
            )
        })
}

/// Offsets `start + Σ index[axis]·steps[axis]` of every index of `dims`, in row-major order
/// (one element for rank 0, none when a dimension is 0). Steps may be negative or 0.
struct Offsets<'a> {
    dims: &'a [u32],
    steps: &'a [i64],
    index: Vec<u32>,
    offset: i64,
    done: bool,
}

impl<'a> Offsets<'a> {
    fn new(dims: &'a [u32], steps: &'a [i64], start: i64) -> Offsets<'a> {
        Offsets {
            dims,
            steps,
            index: vec![0; dims.len()],
            offset: start,
            done: dims.contains(&0),
        }
    }

    /// Starts over from the first index at offset `start`.
    fn restart(&mut self, start: i64) {
        self.index.fill(0);
        self.offset = start;
        self.done = self.dims.contains(&0);
    }
}

impl Iterator for Offsets<'_> {
    type Item = i64;

    fn next(&mut self) -> Option<i64> {
        if self.done {
            return None;
        }
        let current = self.offset;
        let mut wrapped = true;
        for ((index, &dim), &step) in self.index.iter_mut().zip(self.dims).zip(self.steps).rev() {
            *index += 1;
            self.offset += step;
            if *index < dim {
                wrapped = false;
                break;
            }
            self.offset -= step * i64::from(dim);
            *index = 0;
        }
        self.done = wrapped;
        Some(current)
    }
}

/// Fills `dst` in row-major order of `dims` with `src[start + Σ index·steps]`.
///
/// # Errors
/// `ShapeMismatch` for an offset outside `src` (inputs `infer` did not accept).
fn gather(dims: &[u32], steps: &[i64], start: i64, src: &[i32], dst: &mut [i32]) -> Result<()> {
    for (slot, offset) in dst.iter_mut().zip(Offsets::new(dims, steps, start)) {
        *slot = fetch(src, offset)?;
    }
    Ok(())
}

/// Checks that list attribute `name` has no repeated entry.
///
/// # Errors
/// `AttributeOutOfRange` naming the repeated value.
fn distinct(name: &str, values: &[i64]) -> Result<()> {
    for (position, value) in values.iter().enumerate() {
        if values[..position].contains(value) {
            return Err(fail!(
                AttributeOutOfRange,
                "attribute \"{name}\" lists {value} twice"
            ));
        }
    }
    Ok(())
}

/// Layout of a 4-D data tensor (and the channel axis of the BN primitives).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataFormat {
    /// (N, C, H, W); channel axis 1.
    Nchw,
    /// (N, H, W, C); channel axis last.
    Nhwc,
}

impl DataFormat {
    /// The `data_format` attribute: "NCHW" (default) or "NHWC".
    fn parse(attrs: &Attrs<'_>) -> Result<DataFormat> {
        choice(
            attrs,
            "data_format",
            Some(DataFormat::Nchw),
            &[("NCHW", DataFormat::Nchw), ("NHWC", DataFormat::Nhwc)],
        )
    }

    /// (N, C, H, W) of dimensions stored in this layout.
    fn logical(self, [a, b, c, d]: [u32; 4]) -> [u32; 4] {
        match self {
            DataFormat::Nchw => [a, b, c, d],
            DataFormat::Nhwc => [a, d, b, c],
        }
    }

    /// Stored dimensions of logical (N, C, H, W).
    fn physical(self, [n, c, h, w]: [u32; 4]) -> [u32; 4] {
        match self {
            DataFormat::Nchw => [n, c, h, w],
            DataFormat::Nhwc => [n, h, w, c],
        }
    }

    /// Element strides of the logical axes (N, C, H, W) of a tensor of logical dims `dims`.
    fn strides(self, [_, c, h, w]: [usize; 4]) -> [usize; 4] {
        match self {
            DataFormat::Nchw => [c * h * w, h * w, w, 1],
            DataFormat::Nhwc => [h * w * c, 1, w * c, c],
        }
    }

    /// (outer, channels, inner) of a rank ≥ 2 shape split at its channel axis.
    fn split(self, dims: &[u32], operand: &str) -> Result<(usize, usize, usize)> {
        if dims.len() < 2 {
            return Err(fail!(
                ShapeMismatch,
                "{operand} must have rank ≥ 2, got {dims:?}"
            ));
        }
        let axis = match self {
            DataFormat::Nchw => 1,
            DataFormat::Nhwc => dims.len() - 1,
        };
        Ok((
            product(&dims[..axis]),
            dims[axis] as usize,
            product(&dims[axis + 1..]),
        ))
    }
}

/// The dimensions of a rank-4 operand.
///
/// # Errors
/// `ShapeMismatch` for another rank.
fn dims4(dims: &[u32], operand: &str) -> Result<[u32; 4]> {
    match dims {
        &[a, b, c, d] => Ok([a, b, c, d]),
        _ => Err(fail!(
            ShapeMismatch,
            "{operand} must have rank 4, got shape {dims:?}"
        )),
    }
}

// ---------------------------------------------------------------------------------------------
// BnGradBiasScale, BnMeanVariance
// ---------------------------------------------------------------------------------------------

const BN_ATTRS: &[AttrSpec] = &[
    spec("data_format", AttrKind::Str),
    spec("frac_bits", AttrKind::Int),
];

/// The flat offsets of channel `channel`'s elements in a tensor split as (outer, channels,
/// inner) by [`DataFormat::split`], in memory order.
fn channel_offsets(
    outer: usize,
    channels: usize,
    inner: usize,
    channel: usize,
) -> impl Iterator<Item = usize> {
    (0..outer).flat_map(move |block| {
        let base = (block * channels + channel) * inner;
        base..base + inner
    })
}

/// Row of the operator table for [`BnGradBiasScale`].
pub const BN_GRAD_BIAS_SCALE: OpDef = OpDef {
    code: 190,
    name: "BnGradBiasScale",
    family: Family::Cinn,
    arity: Arity::Exactly(3),
    outputs: 2,
    attrs: BN_ATTRS,
    build: |attrs, _| {
        Ok(Box::new(BnGradBiasScale {
            format: DataFormat::parse(attrs)?,
            frac: frac_bits(attrs)?,
        }))
    },
};

/// Gradients of batch normalization's bias and scale (spec 002 "BnGradBiasScale").
///
/// - Inputs: `input` x and `grad` g of the same shape, rank ≥ 2, channel axis c (1 for NCHW,
///   the last for NHWC) of length C; `save_mean` m of shape (C,). All Q(F).
/// - Attributes: `data_format` "NCHW" (default) or "NHWC"; `frac_bits` F in 0..=30, default 0.
/// - Outputs: two tensors of shape (C,): `bias_grad[c] = Σ g` over the elements of channel c,
///   and `scale_grad[c] = round(Σ g·(x − m[c]) / 2^F)`.
/// - Precision: 32 for both.
/// - Rounding and overflow: both sums are exact (i128); the scale sum is rescaled once,
///   halves away from zero. A result outside ±(2^31 − 1) is `IntegerOverflow`.
/// - Errors: `ShapeMismatch` (rank < 2, input and grad shapes differ, save_mean not (C,)),
///   `AttributeOutOfRange`, `IntegerOverflow`.
#[derive(Debug)]
pub struct BnGradBiasScale {
    format: DataFormat,
    frac: u32,
}

impl Operator for BnGradBiasScale {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let (x, grad, mean) = (&inputs[0], &inputs[1], &inputs[2]);
        if x.shape != grad.shape {
            return Err(fail!(
                ShapeMismatch,
                "input {} and grad {} must have the same shape",
                x.shape,
                grad.shape
            ));
        }
        let (_, channels, _) = self.format.split(x.dims(), "input")?;
        if mean.dims() != [channels as u32] {
            return Err(fail!(
                ShapeMismatch,
                "save_mean must have shape [{channels}] (one per channel), got {}",
                mean.shape
            ));
        }
        let out = TensorType::new([channels as u32], ARITH_PRECISION);
        Ok(vec![out.clone(), out])
    }

    fn usage(&self, inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        // Exact i128 sums over every element, priced as one wide multiply-accumulate each.
        let mut usage = io_usage(inputs, outputs)?;
        usage.work.macs = inputs[0].shape.elements();
        Ok(usage)
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let (outer, channels, inner) = self.format.split(inputs[0].dims, "input")?;
        let (x, grad, mean) = (inputs[0].data, inputs[1].data, inputs[2].data);
        let [bias_out, scale_out] = outputs else {
            return Err(fail!(ShapeMismatch, "BnGradBiasScale has two outputs"));
        };
        for channel in 0..channels {
            let m = i64::from(fetch(mean, channel as i64)?);
            // |g| < 2^31 and |x − m| < 2^32: each product is below 2^63 and at most 2^26 of
            // them are summed, far inside i128.
            let (mut bias, mut scale) = (0i128, 0i128);
            for offset in channel_offsets(outer, channels, inner, channel) {
                let g = i128::from(fetch(grad, offset as i64)?);
                let centered = i128::from(i64::from(fetch(x, offset as i64)?) - m);
                bias += g;
                scale += g * centered;
            }
            bias_out.data[channel] = narrow32(bias)?;
            scale_out.data[channel] = rescale(scale, self.frac)?;
        }
        Ok(())
    }
}

/// Row of the operator table for [`BnMeanVariance`].
pub const BN_MEAN_VARIANCE: OpDef = OpDef {
    code: 191,
    name: "BnMeanVariance",
    family: Family::Cinn,
    arity: Arity::Exactly(1),
    outputs: 2,
    attrs: BN_ATTRS,
    build: |attrs, _| {
        Ok(Box::new(BnMeanVariance {
            format: DataFormat::parse(attrs)?,
            frac: frac_bits(attrs)?,
        }))
    },
};

/// Per-channel sums of x and x² for batch normalization (spec 002 "BnMeanVariance").
///
/// - Input: `input` x of rank ≥ 2 in Q(F), channel axis c (1 for NCHW, the last for NHWC) of
///   length C.
/// - Attributes: `data_format` "NCHW" (default) or "NHWC"; `frac_bits` F in 0..=30, default 0.
/// - Outputs: two tensors of shape (C,): `sum[c] = Σ x` and `sum_sq[c] = round(Σ x² / 2^F)`
///   over the elements of channel c.
/// - Precision: 32 for both.
/// - Rounding and overflow: both sums are exact (i128); Σ x² is rescaled once, halves away from
///   zero. A result outside ±(2^31 − 1) is `IntegerOverflow`.
/// - Errors: `ShapeMismatch` (rank < 2), `AttributeOutOfRange`, `IntegerOverflow`.
#[derive(Debug)]
pub struct BnMeanVariance {
    format: DataFormat,
    frac: u32,
}

impl Operator for BnMeanVariance {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let (_, channels, _) = self.format.split(inputs[0].dims(), "input")?;
        let out = TensorType::new([channels as u32], ARITH_PRECISION);
        Ok(vec![out.clone(), out])
    }

    fn usage(&self, inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        // Exact i128 sums over every element, priced as one wide multiply-accumulate each.
        let mut usage = io_usage(inputs, outputs)?;
        usage.work.macs = inputs[0].shape.elements();
        Ok(usage)
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let (outer, channels, inner) = self.format.split(inputs[0].dims, "input")?;
        let x = inputs[0].data;
        let [sum_out, square_out] = outputs else {
            return Err(fail!(ShapeMismatch, "BnMeanVariance has two outputs"));
        };
        for channel in 0..channels {
            // x² < 2^62, at most 2^26 terms: exact in i128.
            let (mut sum, mut squares) = (0i128, 0i128);
            for offset in channel_offsets(outer, channels, inner, channel) {
                let value = i128::from(fetch(x, offset as i64)?);
                sum += value;
                squares += value * value;
            }
            sum_out.data[channel] = narrow32(sum)?;
            square_out.data[channel] = rescale(squares, self.frac)?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// BroadcastTo
// ---------------------------------------------------------------------------------------------

/// Row of the operator table for [`BroadcastTo`].
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
/// - Input: `var` of rank R.
/// - Attributes: `out_shape` (required; entries in 0..=2^32 − 1); `broadcast_axes` (required;
///   R entries, strictly increasing, each in [0, len(out_shape))): input axis i maps to output
///   axis `broadcast_axes[i]`, whose length must equal the input's n_i unless n_i = 1.
/// - Output: `out_shape`; `Y[d] = X[e]` with `e_i = d_{broadcast_axes[i]}`, or 0 where n_i = 1.
///   Output axes no input axis maps to repeat the data.
/// - Precision: same as the input.
/// - Errors: `MissingAttribute`, `AttributeOutOfRange` (entries out of range, axes not strictly
///   increasing), `ShapeMismatch` (len(broadcast_axes) ≠ R, a dimension neither 1 nor equal).
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

// ---------------------------------------------------------------------------------------------
// Compare
// ---------------------------------------------------------------------------------------------

/// Row of the operator table for [`Compare`].
pub const COMPARE: OpDef = OpDef {
    code: 193,
    name: "Compare",
    family: Family::Cinn,
    arity: Arity::Exactly(2),
    outputs: 1,
    attrs: &[spec("kind", AttrKind::Str)],
    build: |attrs, _| {
        Ok(Box::new(Compare {
            kind: choice(
                attrs,
                "kind",
                None,
                &[
                    ("kEq", CompareKind::Eq),
                    ("kNe", CompareKind::Ne),
                    ("kGe", CompareKind::Ge),
                    ("kGt", CompareKind::Gt),
                    ("kLe", CompareKind::Le),
                    ("kLt", CompareKind::Lt),
                ],
            )?,
        }))
    },
};

/// The comparison of [`Compare`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareKind {
    /// "kEq": x = y.
    Eq,
    /// "kNe": x ≠ y.
    Ne,
    /// "kGe": x ≥ y.
    Ge,
    /// "kGt": x > y.
    Gt,
    /// "kLe": x ≤ y.
    Le,
    /// "kLt": x < y.
    Lt,
}

/// Elementwise comparison with numpy broadcasting (spec 002 "Compare").
///
/// - Inputs: `x`, `y` with broadcast-compatible shapes (any precisions; values compare as
///   integers, so equal `frac_bits` on both sides compare the real numbers).
/// - Attribute: `kind` (required): "kEq", "kNe", "kGe", "kGt", "kLe" or "kLt".
/// - Output: the broadcast shape; 1 where the comparison holds, else 0. Precision 2.
/// - Overflow: none.
/// - Errors: `MissingAttribute`, `AttributeOutOfRange` (unknown kind), `ShapeMismatch`.
#[derive(Debug)]
pub struct Compare {
    kind: CompareKind,
}

impl Operator for Compare {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let shape = broadcast_shape(inputs[0].dims(), inputs[1].dims())?;
        Ok(vec![TensorType::new(shape, BOOL_PRECISION)])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let kind = self.kind;
        let out = &mut outputs[0];
        broadcast_apply(&inputs[0], &inputs[1], out.dims, out.data, |x, y| {
            Ok(i32::from(match kind {
                CompareKind::Eq => x == y,
                CompareKind::Ne => x != y,
                CompareKind::Ge => x >= y,
                CompareKind::Gt => x > y,
                CompareKind::Le => x <= y,
                CompareKind::Lt => x < y,
            }))
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Concat
// ---------------------------------------------------------------------------------------------

/// Row of the operator table for `Concat` (spec 002 "Concat"): the CVM `concatenate` operator
/// ([`crate::ops::transform::Concatenate`]: M ≥ 1 inputs of equal rank agreeing outside `axis`,
/// precision the largest of the inputs') with the spec's
/// default `axis` = 0 instead of 1.
pub const CONCAT: OpDef = OpDef {
    code: 194,
    name: "Concat",
    family: Family::Cinn,
    arity: Arity::AtLeast(1),
    outputs: 1,
    attrs: &[spec("axis", AttrKind::Int)],
    build: |attrs, _| {
        Ok(Box::new(crate::ops::transform::Concatenate::new(
            attrs.int_or("axis", 0),
        )))
    },
};

// ---------------------------------------------------------------------------------------------
// Conv
// ---------------------------------------------------------------------------------------------

/// Row of the operator table for [`Conv`].
pub const CONV: OpDef = OpDef {
    code: 195,
    name: "Conv",
    family: Family::Cinn,
    arity: Arity::Exactly(2),
    outputs: 1,
    attrs: &[
        spec("conv_type", AttrKind::Str),
        spec("data_format", AttrKind::Str),
        spec("dilations", AttrKind::Ints),
        spec("frac_bits", AttrKind::Int),
        spec("groups", AttrKind::Int),
        spec("output_shape", AttrKind::Ints),
        spec("padding_algorithm", AttrKind::Str),
        spec("paddings", AttrKind::Ints),
        spec("strides", AttrKind::Ints),
    ],
    build: Conv::build,
};

/// Which convolution [`Conv`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvType {
    /// "forward": lhs = input, rhs = weight.
    Forward,
    /// "backward_data": lhs = weight, rhs = grad_y; the gradient with respect to the input.
    BackwardData,
    /// "backward_filter": lhs = input, rhs = grad_y; the gradient with respect to the weight.
    BackwardFilter,
}

/// How [`Conv`] pads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PaddingAlgorithm {
    /// "EXPLICIT": `paddings` before and after.
    Explicit,
    /// "SAME": output extent ⌈size / stride⌉, padding split with the smaller half before.
    Same,
    /// "VALID": no padding.
    Valid,
}

/// 2-D grouped convolution and its two gradients in Q(F) (spec 002 "Conv").
///
/// Notation: data tensors (input x, output y, grad_y, grad_x) are (N, C, H, W) / (N, OC, OH, OW)
/// stored in `data_format` ((N, H, W, C) / (N, OH, OW, OC) for NHWC); weights and grad_w are
/// always (OC, C/groups, KH, KW) (OIHW). ICg = C/groups, OCg = OC/groups; output channel oc
/// belongs to group g = ⌊oc / OCg⌋ and reads input channels g·ICg .. (g+1)·ICg. Along H (and W
/// likewise) the tap kh of output row p reads input row h = p·SH − PT + kh·DH; rows outside
/// [0, H) are zero padding.
///
/// - Inputs: forward: lhs = x, rhs = weight. backward_data: lhs = weight, rhs = grad_y.
///   backward_filter: lhs = x, rhs = grad_y. All rank 4, Q(F).
/// - Attributes: `conv_type` "forward" (default), "backward_data", "backward_filter";
///   `data_format` "NCHW" (default) or "NHWC"; `strides` (SH, SW) in 1..=4095, default (1, 1);
///   `paddings` (PH, PW) in 0..=4095, default (0, 0); `dilations` (DH, DW) in 1..=4095, default
///   (1, 1) (strides and dilations above 1 may be combined); `groups` ≥ 1, default 1, dividing C
///   and OC; `padding_algorithm` "EXPLICIT" (default: PT = PB = PH), "VALID" (PT = PB = 0) or
///   "SAME" (OH = ⌈H/SH⌉, total = max((OH − 1)·SH + (KH − 1)·DH + 1 − H, 0), PT = ⌊total/2⌋,
///   PB = total − PT); `output_shape` (4 entries, default empty; required for the backward
///   types, optional for forward, where it must equal the inferred shape); `frac_bits` F in
///   0..=30, default 0.
/// - Extent: OH = ⌊(H + PT + PB − (DH·(KH − 1) + 1)) / SH⌋ + 1 (likewise OW).
/// - forward output (N, OC, OH, OW) in `data_format`:
///   `y[n,oc,p,q] = round(Σ_{ic,kh,kw} x[n, g·ICg+ic, h, w]·W[oc,ic,kh,kw] / 2^F)`.
/// - backward_data output: grad_x of shape `output_shape` (N, C, H, W in `data_format`), which
///   must be consistent: its forward extent equals grad_y's (OH, OW), and N, OC agree.
///   `grad_x[n,c,h,w] = round(Σ gy[n,oc,p,q]·W[oc, c mod ICg, kh, kw] / 2^F)` over oc in c's
///   group and every (kh, p), (kw, q) with h = p·SH − PT + kh·DH, w = q·SW − PL + kw·DW.
/// - backward_filter output: grad_w of shape `output_shape` = (OC, ICg, KH, KW):
///   `grad_w[oc,ic,kh,kw] = round(Σ_{n,p,q} gy[n,oc,p,q]·x[n, g·ICg+ic, h, w] / 2^F)` (zero
///   outside the input); grad_y's extent must equal the forward extent of x with that kernel.
/// - Precision: 32.
/// - Rounding and overflow: each output element is an exact i128 sum rescaled once by F,
///   halves away from zero; a result outside ±(2^31 − 1) is `IntegerOverflow`.
/// - Errors: `MissingAttribute` (`output_shape` for a backward type), `AttributeOutOfRange`
///   (unknown strings, ranges, an `output_shape` without 4 entries), `ShapeMismatch` (ranks,
///   channel and group counts, an empty kernel, a dilated kernel longer than the padded input,
///   shapes inconsistent with `output_shape` or grad_y), `LimitExceeded`, `IntegerOverflow`.
#[derive(Debug)]
pub struct Conv {
    conv_type: ConvType,
    format: DataFormat,
    strides: [u32; 2],
    paddings: [u32; 2],
    dilations: [u32; 2],
    groups: u32,
    algorithm: PaddingAlgorithm,
    output_shape: Option<[u32; 4]>,
    frac: u32,
}

/// Geometry of one convolution in logical (NCHW, OIHW) terms.
#[derive(Debug)]
struct ConvGeometry {
    batch: usize,
    channels: usize,
    size: [usize; 2],
    out_channels: usize,
    group_channels: usize,
    kernel: [usize; 2],
    out: [usize; 2],
    pad_before: [i64; 2],
}

impl Conv {
    fn build(attrs: &Attrs<'_>, _n_inputs: usize) -> Result<Box<dyn Operator>> {
        let conv_type = choice(
            attrs,
            "conv_type",
            Some(ConvType::Forward),
            &[
                ("forward", ConvType::Forward),
                ("backward_data", ConvType::BackwardData),
                ("backward_filter", ConvType::BackwardFilter),
            ],
        )?;
        let algorithm = choice(
            attrs,
            "padding_algorithm",
            Some(PaddingAlgorithm::Explicit),
            &[
                ("EXPLICIT", PaddingAlgorithm::Explicit),
                ("SAME", PaddingAlgorithm::Same),
                ("VALID", PaddingAlgorithm::Valid),
            ],
        )?;
        let output_shape = match attrs.opt_ints("output_shape") {
            None | Some([]) => None,
            Some(&[a, b, c, d]) => {
                let dim = |value| in_range("output_shape", value, 0, i64::from(u32::MAX));
                Some([dim(a)?, dim(b)?, dim(c)?, dim(d)?])
            }
            Some(other) => {
                return Err(fail!(
                    AttributeOutOfRange,
                    "attribute \"output_shape\" must have 4 entries, not {}",
                    other.len()
                ));
            }
        };
        if conv_type != ConvType::Forward && output_shape.is_none() {
            return Err(if attrs.opt_ints("output_shape").is_none() {
                fail!(
                    MissingAttribute,
                    "attribute \"output_shape\" is required for conv_type {conv_type:?}"
                )
            } else {
                fail!(
                    AttributeOutOfRange,
                    "attribute \"output_shape\" must have 4 entries for conv_type {conv_type:?}"
                )
            });
        }
        Ok(Box::new(Conv {
            conv_type,
            format: DataFormat::parse(attrs)?,
            strides: pair_in_range(
                "strides",
                attrs.opt_ints("strides").unwrap_or(&[1, 1]),
                1,
                MAX_GEOMETRY,
            )?,
            paddings: pair_in_range(
                "paddings",
                attrs.opt_ints("paddings").unwrap_or(&[0, 0]),
                0,
                MAX_GEOMETRY,
            )?,
            dilations: pair_in_range(
                "dilations",
                attrs.opt_ints("dilations").unwrap_or(&[1, 1]),
                1,
                MAX_GEOMETRY,
            )?,
            groups: in_range("groups", attrs.int_or("groups", 1), 1, i64::from(u32::MAX))?,
            algorithm,
            output_shape,
            frac: frac_bits(attrs)?,
        }))
    }

    /// Output extent and padding before, along spatial axis `axis` (0: height, 1: width).
    fn spatial(&self, size: u32, kernel: u32, axis: usize) -> Result<(u32, i64)> {
        let name = if axis == 0 { "height" } else { "width" };
        let stride = i64::from(self.strides[axis]);
        let dilation = i64::from(self.dilations[axis]);
        let size = i64::from(size);
        let span = dilation * (i64::from(kernel) - 1) + 1;
        let (before, after) = match self.algorithm {
            PaddingAlgorithm::Explicit => {
                let pad = i64::from(self.paddings[axis]);
                (pad, pad)
            }
            PaddingAlgorithm::Valid => (0, 0),
            PaddingAlgorithm::Same => {
                let out = (size + stride - 1) / stride;
                let total = ((out - 1) * stride + span - size).max(0);
                (total / 2, total - total / 2)
            }
        };
        let padded = size + before + after;
        if padded < span {
            return Err(fail!(
                ShapeMismatch,
                "the dilated kernel spans {span} along {name}, more than the padded input's {padded}"
            ));
        }
        let out = (padded - span) / stride + 1;
        let out = u32::try_from(out)
            .map_err(|_| fail!(LimitExceeded, "output {name} {out} exceeds 2^32 − 1"))?;
        Ok((out, before))
    }

    /// Validated geometry from logical input dims `x` (N, C, H, W) and weight dims `w`
    /// (OC, ICg, KH, KW).
    fn geometry_of(&self, x: [u32; 4], w: [u32; 4]) -> Result<ConvGeometry> {
        let [batch, channels, height, width] = x;
        let [out_channels, group_channels, kernel_h, kernel_w] = w;
        let groups = self.groups;
        if groups > channels || channels % groups != 0 {
            return Err(fail!(
                ShapeMismatch,
                "groups = {groups} must lie in [1, C] and divide the input channels C = {channels}"
            ));
        }
        if out_channels % groups != 0 {
            return Err(fail!(
                ShapeMismatch,
                "groups = {groups} must divide the output channels OC = {out_channels}"
            ));
        }
        if group_channels != channels / groups {
            return Err(fail!(
                ShapeMismatch,
                "the weight has {group_channels} input channels per group; C / groups = {}",
                channels / groups
            ));
        }
        if kernel_h == 0 || kernel_w == 0 {
            return Err(fail!(
                ShapeMismatch,
                "the kernel {kernel_h}x{kernel_w} is empty"
            ));
        }
        let (out_h, pad_top) = self.spatial(height, kernel_h, 0)?;
        let (out_w, pad_left) = self.spatial(width, kernel_w, 1)?;
        Ok(ConvGeometry {
            batch: batch as usize,
            channels: channels as usize,
            size: [height as usize, width as usize],
            out_channels: out_channels as usize,
            group_channels: group_channels as usize,
            kernel: [kernel_h as usize, kernel_w as usize],
            out: [out_h as usize, out_w as usize],
            pad_before: [pad_top, pad_left],
        })
    }

    /// The geometry and the output's stored dimensions for operands `lhs`, `rhs`.
    fn plan(&self, lhs: &[u32], rhs: &[u32]) -> Result<(ConvGeometry, [u32; 4])> {
        let format = self.format;
        match self.conv_type {
            ConvType::Forward => {
                let x = format.logical(dims4(lhs, "input (lhs)")?);
                let w = dims4(rhs, "weight (rhs)")?;
                let g = self.geometry_of(x, w)?;
                let out = format.physical([x[0], w[0], g.out[0] as u32, g.out[1] as u32]);
                if let Some(expected) = self.output_shape
                    && expected != out
                {
                    return Err(fail!(
                        ShapeMismatch,
                        "attribute output_shape = {expected:?} differs from the forward output {out:?}"
                    ));
                }
                Ok((g, out))
            }
            ConvType::BackwardData => {
                let w = dims4(lhs, "weight (lhs)")?;
                let grad_y = format.logical(dims4(rhs, "grad_y (rhs)")?);
                let out = self.output_shape.unwrap_or_default();
                let x = format.logical(out);
                let g = self.geometry_of(x, w)?;
                self.check_grad_y(&g, grad_y)?;
                Ok((g, out))
            }
            ConvType::BackwardFilter => {
                let x = format.logical(dims4(lhs, "input (lhs)")?);
                let grad_y = format.logical(dims4(rhs, "grad_y (rhs)")?);
                let out = self.output_shape.unwrap_or_default();
                let g = self.geometry_of(x, out)?;
                self.check_grad_y(&g, grad_y)?;
                Ok((g, out))
            }
        }
    }

    /// Checks that grad_y (logical dims) is the forward output of the geometry.
    fn check_grad_y(&self, g: &ConvGeometry, grad_y: [u32; 4]) -> Result<()> {
        let expected = [g.batch, g.out_channels, g.out[0], g.out[1]].map(|d| d as u32);
        if grad_y == expected {
            Ok(())
        } else {
            Err(fail!(
                ShapeMismatch,
                "grad_y has logical shape (N, OC, OH, OW) = {grad_y:?}, but the forward convolution of these shapes (output_shape {:?}) gives {expected:?}",
                self.output_shape.unwrap_or_default()
            ))
        }
    }

    fn forward(&self, g: &ConvGeometry, x: &[i32], w: &[i32], y: &mut [i32]) -> Result<()> {
        let xs = self
            .format
            .strides([g.batch, g.channels, g.size[0], g.size[1]]);
        let ys = self
            .format
            .strides([g.batch, g.out_channels, g.out[0], g.out[1]]);
        let [kh_n, kw_n] = g.kernel;
        let taps = g.group_channels * kh_n * kw_n;
        let [stride_h, stride_w] = self.strides.map(i64::from);
        let [dil_h, dil_w] = self.dilations.map(i64::from);
        let [height, width] = g.size.map(|s| s as i64);
        let groups = self.groups as usize;
        let out_per_group = g.out_channels / groups;
        // The window of one output position, in the weights' (ic, kh, kw) order, zero where it
        // covers padding: each output is then one exact dot product with a weight row.
        let mut patch = vec![0i32; taps];
        for n in 0..g.batch {
            for group in 0..groups {
                for p in 0..g.out[0] {
                    let row0 = p as i64 * stride_h - g.pad_before[0];
                    for q in 0..g.out[1] {
                        let col0 = q as i64 * stride_w - g.pad_before[1];
                        let mut slots = patch.iter_mut();
                        for ic in 0..g.group_channels {
                            let c = group * g.group_channels + ic;
                            for kh in 0..kh_n {
                                let h = row0 + kh as i64 * dil_h;
                                for kw in 0..kw_n {
                                    let col = col0 + kw as i64 * dil_w;
                                    let value = if h < 0 || h >= height || col < 0 || col >= width {
                                        0
                                    } else {
                                        x[n * xs[0]
                                            + c * xs[1]
                                            + h as usize * xs[2]
                                            + col as usize * xs[3]]
                                    };
                                    if let Some(slot) = slots.next() {
                                        *slot = value;
                                    }
                                }
                            }
                        }
                        for oc in group * out_per_group..(group + 1) * out_per_group {
                            // Exact: at most ICg·KH·KW ≤ 2^26 products below 2^62
                            // (kernels::wide).
                            let acc = wide_dot(&patch, &w[oc * taps..(oc + 1) * taps]);
                            y[n * ys[0] + oc * ys[1] + p * ys[2] + q * ys[3]] =
                                rescale(acc, self.frac)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn backward_data(
        &self,
        g: &ConvGeometry,
        w: &[i32],
        grad_y: &[i32],
        grad_x: &mut [i32],
    ) -> Result<()> {
        let xs = self
            .format
            .strides([g.batch, g.channels, g.size[0], g.size[1]]);
        let ys = self
            .format
            .strides([g.batch, g.out_channels, g.out[0], g.out[1]]);
        let [kh_n, kw_n] = g.kernel;
        let ws = [g.group_channels * kh_n * kw_n, kh_n * kw_n, kw_n];
        let taps_h = Taps::new(self.strides[0], self.dilations[0], kh_n, g.out[0]);
        let taps_w = Taps::new(self.strides[1], self.dilations[1], kw_n, g.out[1]);
        let groups = self.groups as usize;
        let out_per_group = g.out_channels / groups;
        for n in 0..g.batch {
            for group in 0..groups {
                for ic in 0..g.group_channels {
                    let c = group * g.group_channels + ic;
                    for h in 0..g.size[0] {
                        let Some(rows) = taps_h.range(h as i64 + g.pad_before[0]) else {
                            continue; // no tap reaches this row: grad_x stays 0
                        };
                        for col in 0..g.size[1] {
                            let Some(cols) = taps_w.range(col as i64 + g.pad_before[1]) else {
                                continue;
                            };
                            // At most OCg·KH·KW ≤ 2^26 products below 2^62: exact in i128.
                            let mut acc = 0i128;
                            for oc in group * out_per_group..(group + 1) * out_per_group {
                                let mut kh = rows.first;
                                while kh <= rows.last {
                                    let p = rows.position(kh);
                                    let mut kw = cols.first;
                                    while kw <= cols.last {
                                        let q = cols.position(kw);
                                        let gv =
                                            grad_y[n * ys[0] + oc * ys[1] + p * ys[2] + q * ys[3]];
                                        let wv = w[oc * ws[0]
                                            + ic * ws[1]
                                            + kh as usize * ws[2]
                                            + kw as usize];
                                        acc += i128::from(i64::from(gv) * i64::from(wv));
                                        kw += cols.step;
                                    }
                                    kh += rows.step;
                                }
                            }
                            grad_x[n * xs[0] + c * xs[1] + h * xs[2] + col * xs[3]] =
                                rescale(acc, self.frac)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn backward_filter(
        &self,
        g: &ConvGeometry,
        x: &[i32],
        grad_y: &[i32],
        grad_w: &mut [i32],
    ) -> Result<()> {
        let xs = self
            .format
            .strides([g.batch, g.channels, g.size[0], g.size[1]]);
        let ys = self
            .format
            .strides([g.batch, g.out_channels, g.out[0], g.out[1]]);
        let [kh_n, kw_n] = g.kernel;
        let ws = [g.group_channels * kh_n * kw_n, kh_n * kw_n, kw_n];
        let [stride_h, stride_w] = self.strides.map(i64::from);
        let [dil_h, dil_w] = self.dilations.map(i64::from);
        let [height, width] = g.size.map(|s| s as i64);
        let groups = self.groups as usize;
        let out_per_group = g.out_channels / groups;
        for group in 0..groups {
            for oc in group * out_per_group..(group + 1) * out_per_group {
                for ic in 0..g.group_channels {
                    let c = group * g.group_channels + ic;
                    for kh in 0..kh_n {
                        for kw in 0..kw_n {
                            // At most N·OH·OW ≤ 2^26 products below 2^62: exact in i128.
                            let mut acc = 0i128;
                            for n in 0..g.batch {
                                for p in 0..g.out[0] {
                                    let h =
                                        p as i64 * stride_h - g.pad_before[0] + kh as i64 * dil_h;
                                    if h < 0 || h >= height {
                                        continue;
                                    }
                                    for q in 0..g.out[1] {
                                        let col = q as i64 * stride_w - g.pad_before[1]
                                            + kw as i64 * dil_w;
                                        if col < 0 || col >= width {
                                            continue;
                                        }
                                        let gv =
                                            grad_y[n * ys[0] + oc * ys[1] + p * ys[2] + q * ys[3]];
                                        let xv = x[n * xs[0]
                                            + c * xs[1]
                                            + h as usize * xs[2]
                                            + col as usize * xs[3]];
                                        acc += i128::from(i64::from(gv) * i64::from(xv));
                                    }
                                }
                            }
                            grad_w[oc * ws[0] + ic * ws[1] + kh * ws[2] + kw] =
                                rescale(acc, self.frac)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// The kernel taps that reach one input position in backward_data, along one spatial axis.
///
/// Position t (input index + padding before) receives tap k from output index
/// p = (t − k·D) / S whenever that is an integer in [0, OUT). The valid k form an arithmetic
/// progression with step S / gcd(S, D); `first_by_residue[t mod S]` is its smallest member in
/// 0..step (or −1 when no k solves k·D ≡ t (mod S)).
struct Taps {
    stride: i64,
    dilation: i64,
    kernel: i64,
    out: i64,
    step: i64,
    first_by_residue: Vec<i64>,
}

/// Valid taps of one position: k = first, first + step, …, ≤ last.
struct TapRange {
    first: i64,
    last: i64,
    step: i64,
    t: i64,
    stride: i64,
    dilation: i64,
}

impl TapRange {
    /// The output index tap `k` comes from.
    fn position(&self, k: i64) -> usize {
        ((self.t - k * self.dilation) / self.stride) as usize
    }
}

impl Taps {
    fn new(stride: u32, dilation: u32, kernel: usize, out: usize) -> Taps {
        let (stride, dilation) = (i64::from(stride), i64::from(dilation));
        let (mut a, mut b) = (stride, dilation);
        while b != 0 {
            (a, b) = (b, a % b);
        }
        let step = stride / a.max(1);
        let mut first_by_residue = vec![-1i64; stride as usize];
        for k in 0..step {
            if let Some(slot) = first_by_residue.get_mut(((k * dilation) % stride) as usize) {
                *slot = k;
            }
        }
        Taps {
            stride,
            dilation,
            kernel: kernel as i64,
            out: out as i64,
            step,
            first_by_residue,
        }
    }

    /// The taps reaching position `t` ≥ 0, if any.
    fn range(&self, t: i64) -> Option<TapRange> {
        if self.out == 0 {
            return None;
        }
        let k0 = *self
            .first_by_residue
            .get(usize::try_from(t % self.stride).ok()?)?;
        if k0 < 0 {
            return None;
        }
        // p ≤ OUT − 1  ⇔  k ≥ (t − (OUT − 1)·S) / D;  p ≥ 0  ⇔  k ≤ t / D.
        let low = ceil_div(t - (self.out - 1) * self.stride, self.dilation).max(0);
        let last = (t / self.dilation).min(self.kernel - 1);
        let first = if low > k0 {
            k0 + ceil_div(low - k0, self.step) * self.step
        } else {
            k0
        };
        (first <= last).then_some(TapRange {
            first,
            last,
            step: self.step,
            t,
            stride: self.stride,
            dilation: self.dilation,
        })
    }
}

/// ⌈a / b⌉ for b > 0.
fn ceil_div(a: i64, b: i64) -> i64 {
    -(-a).div_euclid(b)
}

impl Operator for Conv {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let (_, out) = self.plan(inputs[0].dims(), inputs[1].dims())?;
        Ok(vec![TensorType::new(out, ARITH_PRECISION)])
    }

    fn usage(&self, inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        // Every type: (elements of y or grad_y) × ICg·KH·KW, read off the weight's shape.
        let (products, weight, class) = match self.conv_type {
            ConvType::Forward => (outputs[0].shape.elements(), inputs[1].dims(), "forward"),
            ConvType::BackwardData => (
                inputs[1].shape.elements(),
                inputs[0].dims(),
                "backward_data",
            ),
            ConvType::BackwardFilter => (
                inputs[1].shape.elements(),
                outputs[0].dims(),
                "backward_filter",
            ),
        };
        let mut factors = vec![products];
        factors.extend(weight.iter().skip(1).map(|&d| u64::from(d)));
        let mut usage = io_usage(inputs, outputs)?;
        usage.class = class;
        usage.work.macs = count(&factors)?;
        if self.conv_type == ConvType::Forward {
            // Every output window (image, group, output position) covers ICg·KH·KW input
            // elements, whichever output channels of its group it serves (as conv2d counts).
            let (g, _) = self.plan(inputs[0].dims(), inputs[1].dims())?;
            usage.work.taps = count(&[
                g.batch as u64,
                u64::from(self.groups),
                g.out[0] as u64,
                g.out[1] as u64,
                g.group_channels as u64,
                g.kernel[0] as u64,
                g.kernel[1] as u64,
            ])?;
        }
        Ok(usage)
    }

    /// The forward type's window of one output position (ICg·KH·KW values).
    fn scratch_bytes(&self, inputs: &[TensorType]) -> Result<u64> {
        if self.conv_type != ConvType::Forward {
            return Ok(0);
        }
        let (g, _) = self.plan(inputs[0].dims(), inputs[1].dims())?;
        let [kh, kw] = g.kernel.map(|k| k as u64);
        count(&[g.group_channels as u64, kh, kw, 4])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let (g, out) = self.plan(inputs[0].dims, inputs[1].dims)?;
        let (lhs, rhs) = (inputs[0].data, inputs[1].data);
        let expected = [
            product(inputs[0].dims),
            product(inputs[1].dims),
            product(&out),
        ];
        if [lhs.len(), rhs.len(), outputs[0].data.len()] != expected {
            return Err(fail!(
                ShapeMismatch,
                "Conv operands do not hold the elements of their shapes"
            ));
        }
        let result = &mut *outputs[0].data;
        match self.conv_type {
            ConvType::Forward => self.forward(&g, lhs, rhs, result),
            ConvType::BackwardData => self.backward_data(&g, lhs, rhs, result),
            ConvType::BackwardFilter => self.backward_filter(&g, lhs, rhs, result),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Reduce
// ---------------------------------------------------------------------------------------------

/// Row of the operator table for [`Reduce`].
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
/// - Input: `input` of rank N.
/// - Attributes: `kind` (required): "kSum", "kProd", "kMax" or "kMin"; `dim` (default empty =
///   every axis; entries in [0, N), no duplicates); `keep_dim` (default false); `frac_bits` F in
///   0..=30, default 0 (used by kProd only).
/// - Output: the input shape without the reduced axes, or with them as 1 under `keep_dim`. When
///   every axis is reduced without `keep_dim` the output is (1,), never rank 0. Each output
///   element reduces the K elements that share its kept coordinates (K the product of the
///   reduced dimensions).
/// - kSum: the exact sum (i128), 0 when K = 0. kProd: starting from 1 (= 2^F), the elements are
///   multiplied one at a time in row-major order of the reduced axes, each product rescaled by F
///   with one rounding (halves away from zero); 2^F when K = 0. kMax / kMin: the extreme element.
/// - Precision: 32 for kSum and kProd; the input's for kMax and kMin (they select an element).
/// - Overflow: kSum outside ±(2^31 − 1), or any intermediate kProd value outside it (even if a
///   later factor would shrink it), is `IntegerOverflow`.
/// - Errors: `MissingAttribute`, `AttributeOutOfRange` (unknown kind, `dim` entries outside
///   [0, N) or repeated), `ShapeMismatch` (kMax / kMin over K = 0 elements with output elements
///   to fill), `IntegerOverflow`.
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

// ---------------------------------------------------------------------------------------------
// Reshape
// ---------------------------------------------------------------------------------------------

/// Row of the operator table for [`Reshape`].
pub const RESHAPE: OpDef = OpDef {
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
        Ok(Box::new(Reshape { shape }))
    },
};

/// Gives the data a new shape with the same element count (spec 002 "Reshape").
///
/// - Input: `input` of any shape.
/// - Attribute: `shape` (required): entries ≥ 1 (at most 2^32 − 1), or −1 at most once, which
///   takes the element count divided by the product of the other entries. A dimension of 0 can
///   only come from −1.
/// - Output: `shape` with −1 resolved; data unchanged (row-major). Precision: the input's.
/// - Overflow: none.
/// - Errors: `MissingAttribute`; `AttributeOutOfRange` (an entry 0 or below −1, two −1);
///   `ShapeMismatch` (element counts differ, −1 does not divide evenly).
#[derive(Debug)]
pub struct Reshape {
    shape: Vec<i64>,
}

impl Reshape {
    fn resolve(&self, input: &[u32]) -> Result<Vec<u32>> {
        let elements = input
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(u64::from(d)));
        let known = self
            .shape
            .iter()
            .filter(|&&entry| entry != -1)
            .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64));
        let (Some(elements), Some(known)) = (elements, known) else {
            return Err(fail!(
                ShapeMismatch,
                "cannot reshape {input:?} to {:?}: the element counts overflow",
                self.shape
            ));
        };
        let missing = if self.shape.contains(&-1) {
            if !elements.is_multiple_of(known) {
                return Err(fail!(
                    ShapeMismatch,
                    "cannot infer the -1 of {:?}: {elements} elements do not divide by {known}",
                    self.shape
                ));
            }
            elements / known
        } else if known == elements {
            1
        } else {
            return Err(fail!(
                ShapeMismatch,
                "cannot reshape {input:?} ({elements} elements) to {:?} ({known} elements)",
                self.shape
            ));
        };
        self.shape
            .iter()
            .map(|&entry| {
                let dim = if entry == -1 { missing } else { entry as u64 };
                u32::try_from(dim)
                    .map_err(|_| fail!(LimitExceeded, "dimension {dim} exceeds 2^32 − 1"))
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

// ---------------------------------------------------------------------------------------------
// Reverse
// ---------------------------------------------------------------------------------------------

/// Row of the operator table for [`Reverse`].
pub const REVERSE: OpDef = OpDef {
    code: 198,
    name: "Reverse",
    family: Family::Cinn,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[spec("axis", AttrKind::Ints)],
    build: |attrs, _| {
        Ok(Box::new(Reverse {
            axis: attrs.ints("axis")?.to_vec(),
        }))
    },
};

/// Reverses the order of elements along axes (spec 002 "Reverse").
///
/// - Input: `input` of rank N.
/// - Attribute: `axis` (required list; entries in [−N, N), negative counting from the end). The
///   entries form a set: an axis listed twice (also as i and i − N) is reversed once. An empty
///   list copies the input.
/// - Output: same shape; `Y[…, d_a, …] = X[…, n_a − 1 − d_a, …]` on every listed axis a.
///   Precision: the input's.
/// - Overflow: none.
/// - Errors: `MissingAttribute`, `AttributeOutOfRange`.
#[derive(Debug)]
pub struct Reverse {
    axis: Vec<i64>,
}

impl Reverse {
    fn reversed(&self, rank: usize) -> Result<Vec<bool>> {
        let mut reversed = vec![false; rank];
        for &axis in &self.axis {
            reversed[resolve_axis("axis", axis, rank)?] = true;
        }
        Ok(reversed)
    }
}

impl Operator for Reverse {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        self.reversed(inputs[0].shape.rank())?;
        Ok(vec![inputs[0].clone()])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let dims = inputs[0].dims;
        if dims.contains(&0) {
            return Ok(());
        }
        let reversed = self.reversed(dims.len())?;
        let mut steps = row_major(dims);
        let mut start = 0i64;
        for ((step, &dim), &flip) in steps.iter_mut().zip(dims).zip(&reversed) {
            if flip {
                start += (i64::from(dim) - 1) * *step;
                *step = -*step;
            }
        }
        gather(dims, &steps, start, inputs[0].data, outputs[0].data)
    }
}

// ---------------------------------------------------------------------------------------------
// Select
// ---------------------------------------------------------------------------------------------

/// Row of the operator table for [`Select`].
pub const SELECT: OpDef = OpDef {
    code: 199,
    name: "Select",
    family: Family::Cinn,
    arity: Arity::Exactly(3),
    outputs: 1,
    attrs: &[],
    build: |_, _| Ok(Box::new(Select)),
};

/// Elementwise choice between two tensors (spec 002 "Select").
///
/// - Inputs: `condition`, `true_value`, `false_value`, all of the same shape (the condition of
///   any precision).
/// - Attributes: none.
/// - Output: that shape; `Y[d] = true_value[d]` where `condition[d] ≠ 0`, else
///   `false_value[d]`. Precision: the larger of the two values'.
/// - Overflow: none.
/// - Errors: `ShapeMismatch`.
#[derive(Debug)]
pub struct Select;

impl Operator for Select {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let (condition, on_true, on_false) = (&inputs[0], &inputs[1], &inputs[2]);
        if condition.shape != on_true.shape || on_true.shape != on_false.shape {
            return Err(fail!(
                ShapeMismatch,
                "condition {}, true_value {} and false_value {} must have the same shape",
                condition.shape,
                on_true.shape,
                on_false.shape
            ));
        }
        Ok(vec![TensorType {
            shape: on_true.shape.clone(),
            precision: on_true.precision.max(on_false.precision),
        }])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let (condition, on_true, on_false) = (inputs[0].data, inputs[1].data, inputs[2].data);
        super::transform::select_elements(outputs[0].data, condition, on_true, on_false);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Slice
// ---------------------------------------------------------------------------------------------

/// Row of the operator table for [`Slice`].
pub const SLICE: OpDef = OpDef {
    code: 200,
    name: "Slice",
    family: Family::Cinn,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[
        spec("axes", AttrKind::Ints),
        spec("ends", AttrKind::Ints),
        spec("starts", AttrKind::Ints),
    ],
    build: Slice::build,
};

/// Extracts a box (spec 002 "Slice").
///
/// - Input: `input` of rank N.
/// - Attributes: `axes`, `starts`, `ends` (all required, of equal length): distinct axes in
///   [0, N); on axis `a = axes[i]`, `0 ≤ starts[i] < ends[i] ≤ n_a` (no negative or clamped indices,
///   as spec 002 states). Axes not listed are kept whole.
/// - Output: the input shape with ends − starts on every listed axis;
///   `Y[d] = X[d + starts]`. Precision: the input's.
/// - Overflow: none.
/// - Errors: `MissingAttribute`, `AttributeOutOfRange` (lengths differ, axis out of range or
///   repeated, start < 0, end ≤ start, end > n_a).
#[derive(Debug)]
pub struct Slice {
    /// (axis, start, end) with 0 ≤ start < end.
    ranges: Vec<(i64, u32, u32)>,
}

impl Slice {
    fn build(attrs: &Attrs<'_>, _n_inputs: usize) -> Result<Box<dyn Operator>> {
        let (axes, starts, ends) = (
            attrs.ints("axes")?,
            attrs.ints("starts")?,
            attrs.ints("ends")?,
        );
        if axes.len() != starts.len() || axes.len() != ends.len() {
            return Err(fail!(
                AttributeOutOfRange,
                "attributes \"axes\", \"starts\", \"ends\" must have equal lengths, not {}, {}, {}",
                axes.len(),
                starts.len(),
                ends.len()
            ));
        }
        distinct("axes", axes)?;
        let mut ranges = Vec::with_capacity(axes.len());
        for ((&axis, &start), &end) in axes.iter().zip(starts).zip(ends) {
            in_range::<u32>("axes", axis, 0, i64::from(u32::MAX))?;
            let start: u32 = in_range("starts", start, 0, i64::from(u32::MAX) - 1)?;
            let end: u32 = in_range("ends", end, i64::from(start) + 1, i64::from(u32::MAX))?;
            ranges.push((axis, start, end));
        }
        Ok(Box::new(Slice { ranges }))
    }

    /// Output dims and the offset of the first element.
    fn resolve(&self, dims: &[u32]) -> Result<(Vec<u32>, i64)> {
        let strides = row_major(dims);
        let mut out = dims.to_vec();
        let mut start_offset = 0i64;
        for &(axis, start, end) in &self.ranges {
            let axis: usize = in_range("axes", axis, 0, dims.len() as i64 - 1)?;
            if end > dims[axis] {
                return Err(fail!(
                    AttributeOutOfRange,
                    "axis {axis}: end {end} exceeds the length {}",
                    dims[axis]
                ));
            }
            out[axis] = end - start;
            start_offset += i64::from(start) * strides[axis];
        }
        Ok((out, start_offset))
    }
}

impl Operator for Slice {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let (out, _) = self.resolve(inputs[0].dims())?;
        Ok(vec![TensorType::new(out, inputs[0].precision)])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let dims = inputs[0].dims;
        let (out, start) = self.resolve(dims)?;
        let steps = row_major(dims);
        gather(&out, &steps, start, inputs[0].data, outputs[0].data)
    }
}

// ---------------------------------------------------------------------------------------------
// Transpose
// ---------------------------------------------------------------------------------------------

/// Row of the operator table for [`Transpose`].
pub const TRANSPOSE: OpDef = OpDef {
    code: 201,
    name: "Transpose",
    family: Family::Cinn,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[spec("axis", AttrKind::Ints)],
    build: |attrs, _| {
        let axis = attrs.ints("axis")?.to_vec();
        distinct("axis", &axis)?;
        Ok(Box::new(Transpose { axis }))
    },
};

/// Permutes axes (spec 002 "Transpose"): output axis i is input axis `axis[i]`.
///
/// - Input: `input` of rank N.
/// - Attribute: `axis` (required): a permutation of 0..N (N entries, each in [0, N), distinct).
/// - Output: dims `n_{axis[i]}`; `Y[d] = X[e]` with `e_{axis[i]} = d_i`. Precision: the input's.
/// - Overflow: none.
/// - Errors: `MissingAttribute`, `AttributeOutOfRange` (wrong length, out of range, repeated).
#[derive(Debug)]
pub struct Transpose {
    axis: Vec<i64>,
}

impl Transpose {
    fn permutation(&self, rank: usize) -> Result<Vec<usize>> {
        if self.axis.len() != rank {
            return Err(fail!(
                AttributeOutOfRange,
                "attribute \"axis\" has {} entries for an input of rank {rank}",
                self.axis.len()
            ));
        }
        self.axis
            .iter()
            .map(|&axis| in_range("axis", axis, 0, rank as i64 - 1))
            .collect()
    }
}

impl Operator for Transpose {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let dims = inputs[0].dims();
        let out: Vec<u32> = self
            .permutation(dims.len())?
            .into_iter()
            .map(|axis| dims[axis])
            .collect();
        Ok(vec![TensorType::new(out, inputs[0].precision)])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let dims = inputs[0].dims;
        let strides = row_major(dims);
        let permutation = self.permutation(dims.len())?;
        let out: Vec<u32> = permutation.iter().map(|&axis| dims[axis]).collect();
        let steps: Vec<i64> = permutation.iter().map(|&axis| strides[axis]).collect();
        gather(&out, &steps, 0, inputs[0].data, outputs[0].data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rescale_rounds_halves_away_from_zero() {
        assert_eq!(rescale(5, 1), Ok(3));
        assert_eq!(rescale(-5, 1), Ok(-3));
        assert_eq!(rescale(7, 2), Ok(2));
        assert_eq!(rescale(-6, 2), Ok(-2));
        assert_eq!(rescale(-5, 2), Ok(-1));
        assert_eq!(rescale(i128::from(i32::MAX), 0), Ok(i32::MAX));
        assert!(rescale(i128::from(i32::MIN), 0).is_err());
        assert!(rescale(i128::MIN, 1).is_err());
        let max = i128::from(i32::MAX);
        assert_eq!(rescale((max << 30) + (1 << 29) - 1, 30), Ok(i32::MAX));
        assert!(rescale((max << 30) + (1 << 29), 30).is_err());
        assert_eq!(rescale(-(max << 30) - (1 << 29) + 1, 30), Ok(-i32::MAX));
    }

    #[test]
    fn offsets_walk_row_major_with_signed_steps() {
        let steps = [-3i64, 1];
        let offsets: Vec<i64> = Offsets::new(&[2, 3], &steps, 3).collect();
        assert_eq!(offsets, [3, 4, 5, 0, 1, 2]);
        assert_eq!(Offsets::new(&[], &[], 7).collect::<Vec<_>>(), [7]);
        assert_eq!(Offsets::new(&[2, 0], &[1, 1], 0).count(), 0);
    }

    #[test]
    fn taps_match_a_brute_force_search() {
        for stride in 1..=5u32 {
            for dilation in 1..=4u32 {
                for kernel in 1..=4usize {
                    for out in 0..=4usize {
                        let taps = Taps::new(stride, dilation, kernel, out);
                        for t in 0..30i64 {
                            let expected: Vec<(i64, usize)> = (0..kernel as i64)
                                .filter_map(|k| {
                                    let rest = t - k * i64::from(dilation);
                                    (rest >= 0
                                        && rest % i64::from(stride) == 0
                                        && rest / i64::from(stride) < out as i64)
                                        .then(|| (k, (rest / i64::from(stride)) as usize))
                                })
                                .collect();
                            let mut got = Vec::new();
                            if let Some(range) = taps.range(t) {
                                let mut k = range.first;
                                while k <= range.last {
                                    got.push((k, range.position(k)));
                                    k += range.step;
                                }
                            }
                            assert_eq!(
                                got, expected,
                                "s {stride} d {dilation} k {kernel} out {out} t {t}"
                            );
                        }
                    }
                }
            }
        }
    }
}
