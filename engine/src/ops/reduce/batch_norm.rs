//! Per-channel reductions of batch normalization (spec 002): `BnGradBiasScale` and
//! `BnMeanVariance`, exact i128 sums rescaled once.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::attrs::{AttrKind, AttrSpec, spec};
use crate::error::Result;
use crate::fail;
use crate::ops::common::{DataFormat, fetch, io_usage};
use crate::ops::fixed_point::{ARITH_PRECISION, frac_bits, narrow32, rescale};
use crate::ops::{Arity, Family, OpDef, Operator, Usage};
use crate::tensor::{TensorMut, TensorRef, TensorType};

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

/// Gradients of batch normalization's bias and scale (spec 002 "BnGradBiasScale").
///
/// - **Inputs**: `input` x and `grad` g of the same shape, rank ≥ 2, with a channel axis of length
///   C (axis 1 for NCHW, the last axis for NHWC); `save_mean` m of shape (C). All Q(F).
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `data_format` | string | "NCHW" | "NCHW", "NHWC" |
///   | `frac_bits` | integer | 0 | [0, 30] |
///
/// - **Outputs**: two tensors of shape (C): `bias_grad[c] = Σ g` and
///   `scale_grad[c] = round(Σ g·(x − m[c]) / 2^F)`, the sums running over the elements of channel
///   c.
/// - **Output precision**: 32 for both.
/// - **Rounding and overflow**: both sums are exact (i128); the scale sum is rounded once, halves
///   away from zero. A result outside ±(2^31 − 1) is `IntegerOverflow`.
/// - **Errors**: `AttributeOutOfRange` (F, `data_format`); `ShapeMismatch` (rank below 2, input
///   and grad shapes differ, save_mean not (C)); `IntegerOverflow`.
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
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
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

/// Per-channel sums of x and x² for batch normalization (spec 002 "BnMeanVariance": "the sum of
/// input and input^2").
///
/// - **Inputs**: `input` x of rank ≥ 2 in Q(F), channel axis as for
///   [BnGradBiasScale](#bngradbiasscale).
/// - **Attributes**: `data_format` ("NCHW" default, or "NHWC") and `frac_bits` F, as for
///   BnGradBiasScale.
/// - **Outputs**: two tensors of shape (C): `sum[c] = Σ x` and `sum_sq[c] = round(Σ x² / 2^F)`
///   over the elements of channel c (sums, not means; the caller divides by the count).
/// - **Output precision**: 32 for both.
/// - **Rounding and overflow**: exact sums (i128); Σ x² is rounded once, halves away from zero. A
///   result outside ±(2^31 − 1) is `IntegerOverflow`.
/// - **Errors**: `AttributeOutOfRange`; `ShapeMismatch` (rank below 2); `IntegerOverflow`.
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
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
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
