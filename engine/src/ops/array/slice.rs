//! Cutting a box out of a tensor: `strided_slice` and `slice_like` (spec 001) and CINN `Slice`
//! (spec 002).

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::attrs::{AttrKind, Attrs, in_range, spec};
use crate::error::Result;
use crate::fail;
use crate::ops::common::{distinct, gather, resolve_axis, row_major, walk};
use crate::ops::{Arity, Family, OpDef, Operator};
use crate::tensor::{TensorMut, TensorRef, TensorType};

/// Row of the operator table for [`StridedSlice`].
pub const STRIDED_SLICE: OpDef = OpDef {
    code: 58,
    name: "strided_slice",
    family: Family::Transform,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[
        spec("begin", AttrKind::Ints),
        spec("end", AttrKind::Ints),
        spec("stride", AttrKind::Ints),
    ],
    build: |attrs, _| {
        let stride = attrs.opt_ints("stride").unwrap_or(&[]).to_vec();
        if let Some(position) = stride.iter().position(|&s| s == 0 || s == i64::MIN) {
            return Err(fail!(
                AttributeOutOfRange,
                "attribute \"stride\" has {} at position {position}; entries must be non-zero and above −2^63",
                stride[position]
            ));
        }
        // The deployed runtime's defaults: begin (0), end (1).
        Ok(Box::new(StridedSlice {
            begin: attrs.opt_ints("begin").unwrap_or(&[0]).to_vec(),
            end: attrs.opt_ints("end").unwrap_or(&[1]).to_vec(),
            stride,
        }))
    },
};

/// Slices with begin, end and stride per axis (spec 001 "slice", registered as
/// `strided_slice`; attributes spelled `begin`, `end`, `stride` as in CVM files).
///
/// - Input: `X` of rank N.
/// - Attributes, as the deployed runtime parses them: `begin` (list of at most N entries,
///   default (0)), `end` (list, default (1): the first element of axis 0), `stride` (list,
///   default empty; entries non-zero). Entries of `end` and `stride` past N are ignored (a
///   `begin` longer than N makes the deployed kernel read past its shape: rejected). Missing
///   entries mean begin 0, end n_i, stride 1. Negative begin or end entries count from the end
///   (+ n_i). A stride of magnitude n_i or more selects one element, the same as ±n_i.
/// - Clamping: with a positive stride, begin and end are clamped to [0, n_i]; with a negative
///   stride, to [−1, n_i − 1]. Then begin < end (positive stride) or end < begin (negative) is
///   required. (Spec 001 clamps to n_i − 1 and −1 … n_i − 2, which would drop the last element of
///   every full slice and contradict its own default end = n_i; the deployed runtime clamps as
///   here. docs/ops.md.)
/// - Output: dims ⌈|end − begin| / |stride|⌉; `Y[d] = X[begin + stride·d]`. Precision: same as X.
/// - Errors: `AttributeOutOfRange` (`begin` longer than N, a stride of 0 or −2^63, an empty
///   range).
#[derive(Debug)]
pub struct StridedSlice {
    begin: Vec<i64>,
    end: Vec<i64>,
    stride: Vec<i64>,
}

/// One axis of a resolved slice: first index, step, count.
struct SliceAxis {
    start: i64,
    step: i64,
    count: u32,
}

impl StridedSlice {
    fn resolve(&self, dims: &[u32]) -> Result<Vec<SliceAxis>> {
        if self.begin.len() > dims.len() {
            return Err(fail!(
                AttributeOutOfRange,
                "attribute \"begin\" has {} entries for an input of rank {}: the deployed kernel reads past the shape (undefined behaviour)",
                self.begin.len(),
                dims.len()
            ));
        }
        dims.iter()
            .enumerate()
            .map(|(axis, &dim)| {
                let n = i64::from(dim);
                // |step| ≥ n selects one element, as ±n does; clamping keeps offsets small.
                let step = self.stride.get(axis).copied().unwrap_or(1).clamp(-n, n);
                let from_end = |value: i64| if value < 0 { value.saturating_add(n) } else { value };
                let (low, high) = if step < 0 { (-1, n - 1) } else { (0, n) };
                let begin = from_end(self.begin.get(axis).copied().unwrap_or(0)).clamp(low, high);
                let end = from_end(self.end.get(axis).copied().unwrap_or(n)).clamp(low, high);
                let span = if step > 0 { end - begin } else { begin - end };
                if span <= 0 {
                    return Err(fail!(
                        AttributeOutOfRange,
                        "axis {axis}: begin {begin} and end {end} (after clamping to the length {dim}) select nothing with stride {step}"
                    ));
                }
                let magnitude = step.unsigned_abs();
                let count = (span as u64).div_ceil(magnitude);
                Ok(SliceAxis { start: begin, step, count: count as u32 })
            })
            .collect()
    }
}

impl Operator for StridedSlice {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let axes = self.resolve(inputs[0].dims())?;
        Ok(vec![TensorType::new(
            axes.iter().map(|a| a.count).collect::<Vec<_>>(),
            inputs[0].precision,
        )])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let dims = inputs[0].dims;
        let axes = self.resolve(dims)?;
        let in_strides = crate::tensor::Shape::new(dims).strides();
        // Offset of the first element, then per output axis the (possibly negative) step.
        let base: i64 = axes
            .iter()
            .zip(&in_strides)
            .map(|(a, &s)| a.start * s as i64)
            .sum();
        let steps: Vec<i64> = axes
            .iter()
            .zip(&in_strides)
            .map(|(a, &s)| a.step * s as i64)
            .collect();
        let out_dims = outputs[0].dims;
        let mut index = vec![0u32; out_dims.len()];
        let mut offset = base;
        for y in outputs[0].data.iter_mut() {
            *y = inputs[0].data[offset as usize];
            for axis in (0..index.len()).rev() {
                index[axis] += 1;
                offset += steps[axis];
                if index[axis] < out_dims[axis] {
                    break;
                }
                offset -= steps[axis] * i64::from(out_dims[axis]);
                index[axis] = 0;
            }
        }
        Ok(())
    }
}

/// Row of the operator table for [`SliceLike`].
pub const SLICE_LIKE: OpDef = OpDef {
    code: 59,
    name: "slice_like",
    family: Family::Transform,
    arity: Arity::Exactly(2),
    outputs: 1,
    attrs: &[spec("axis", AttrKind::Ints)],
    build: |attrs, _| {
        Ok(Box::new(SliceLike {
            axis: attrs.opt_ints("axis").unwrap_or(&[]).to_vec(),
        }))
    },
};

/// Cuts `X` to the shape of `shape_like` on some axes (spec 001 "slice_like"): the leading
/// `m_j` entries of each sliced axis j are kept.
///
/// - Inputs: `X` (rank N), `shape_like` (rank M; only its shape is used).
/// - Attribute: `axis` (list, default empty). Empty: the sliced axes are 0..M, and M must equal
///   N. Otherwise the listed axes (in [−N, N)), each also below M.
/// - Output: X's shape with m_j on every sliced axis j (m_j ≤ n_j). Precision: same as X.
///   The listed axes form a set (spec 001): a repeated axis counts once.
/// - Errors: `AttributeOutOfRange` (axis out of range or past shape_like's rank),
///   `ShapeMismatch` (ranks differ without `axis`, m_j > n_j).
#[derive(Debug)]
pub struct SliceLike {
    axis: Vec<i64>,
}

impl Operator for SliceLike {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let (dims, like) = (inputs[0].dims(), inputs[1].dims());
        let sliced: Vec<usize> = if self.axis.is_empty() {
            if like.len() != dims.len() {
                return Err(fail!(
                    ShapeMismatch,
                    "without \"axis\", shape_like {} must have the rank of the data {}",
                    inputs[1].shape,
                    inputs[0].shape
                ));
            }
            (0..dims.len()).collect()
        } else {
            self.axis
                .iter()
                .map(|&axis| {
                    let resolved = resolve_axis("axis", axis, dims.len())?;
                    if resolved >= like.len() {
                        return Err(fail!(
                            AttributeOutOfRange,
                            "axis {resolved} does not exist in shape_like {}",
                            inputs[1].shape
                        ));
                    }
                    Ok(resolved)
                })
                .collect::<Result<_>>()?
        };
        let mut out = dims.to_vec();
        for axis in sliced {
            if like[axis] > dims[axis] {
                return Err(fail!(
                    ShapeMismatch,
                    "shape_like {} is longer than the data {} on axis {axis}",
                    inputs[1].shape,
                    inputs[0].shape
                ));
            }
            out[axis] = like[axis];
        }
        Ok(vec![TensorType::new(out, inputs[0].precision)])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let strides = crate::tensor::Shape::new(inputs[0].dims).strides();
        let mut out = outputs[0].data.iter_mut();
        walk(outputs[0].dims, [&strides], |[offset]| {
            if let Some(y) = out.next() {
                *y = inputs[0].data[offset];
            }
            Ok(())
        })
    }
}

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
