//! Cutting a box out of a tensor: `strided_slice` and `slice_like` (spec 001) and CINN `Slice`
//! (spec 002).

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::attrs::{AttrKind, AttrSpec, Attrs, in_range, spec};
use crate::error::Result;
use crate::fail;
use crate::ops::common::{distinct, gather, resolve_axis, row_major, walk};
use crate::ops::{Arity, Family, OpDef, Operator};
use crate::tensor::{TensorMut, TensorRef, TensorType};

/// Slice with a begin, end and step per axis (spec 001 "slice", registered as `strided_slice`).
///
/// - **Inputs**: `X` of any rank N.
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `begin` | list of integers | (0) | at most N entries |
///   | `end` | list of integers | (1) | entries past N ignored |
///   | `stride` | list of integers | empty | entries past N ignored; none 0 or −2^63 |
///
/// - **Per axis i** of length n: the step s is `stride`[i], or 1 past the end of the list; the
///   begin b is `begin`[i], or 0; the end e is `end`[i], or n. A negative b or e counts from the
///   end (+ n). Both are then clamped: to [0, n] when s > 0, to [−1, n − 1] when s < 0
///   (decision 23). The range must select something: b < e when s > 0, e < b when s < 0.
/// - **Output shape**: ⌈|e − b| / |s|⌉ on every axis.
/// - **Semantics**: `Y[d_0, …, d_{N−1}] = X[b_0 + s_0·d_0, …, b_{N−1} + s_{N−1}·d_{N−1}]`; the end
///   is excluded. Example: on (4) with `begin` (3), `end` (−5), `stride` (−1), e = −5 + 4 = −1
///   stays −1 and the slice is X[3], X[2], X[1], X[0].
/// - **Output precision**: pX.
/// - **Rounding and overflow**: none possible.
/// - **Errors**, in order:
///   1. A 0 or −2^63 in `stride`: `AttributeOutOfRange`.
///   2. `begin` with more than N entries: `AttributeOutOfRange` (the deployed kernel reads past
///      the shape).
///   4. An axis (in order) whose clamped range selects nothing, which includes every axis of
///      length 0: `AttributeOutOfRange`.
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
        Ok(Box::new(Slice {
            bounds: Bounds::Strided {
                begin: attrs.opt_ints("begin").unwrap_or(&[0]).to_vec(),
                end: attrs.opt_ints("end").unwrap_or(&[1]).to_vec(),
                stride,
            },
        }))
    },
};

/// Extracts a box (spec 002 "Slice").
///
/// - **Inputs**: `input` of rank N.
/// - **Attributes**: `axes`, `starts`, `ends` (lists of integers, all required, of equal length):
///   distinct axes in [0, N); on axis a = axes[i], 0 ≤ starts[i] < ends[i] ≤ n_a. Axes not listed
///   are kept whole.
/// - **Output shape**: the input shape with ends[i] − starts[i] on every listed axis.
///   **Semantics**: `Y[d] = X[d + starts]`.
/// - **Output precision**: the input's.
/// - **Errors**: `MissingAttribute`; `AttributeOutOfRange` (lengths differ, an axis out of range or
///   repeated, a negative start, an end not above its start or beyond the dimension).
pub const SLICE: OpDef = OpDef {
    code: 200,
    name: "Slice",
    family: Family::Cinn,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: RANGE_ATTRS,
    build: Slice::ranges,
};

/// The attributes of CINN `Slice`, parsed by [`Slice::ranges`].
const RANGE_ATTRS: &[AttrSpec] = &[
    spec("axes", AttrKind::Ints),
    spec("ends", AttrKind::Ints),
    spec("starts", AttrKind::Ints),
];

/// `strided_slice` and CINN `Slice`: the box of the input their bounds select (the rows' doc
/// comments state each one's contract).
#[derive(Debug)]
pub struct Slice {
    bounds: Bounds,
}

/// The bounds of a [`Slice`], as its row spells them.
#[derive(Debug)]
pub enum Bounds {
    /// `strided_slice`: begin, end and stride per leading axis, clamped as the deployed runtime
    /// does.
    Strided {
        /// First index per axis (negative counts from the end).
        begin: Vec<i64>,
        /// End per axis, exclusive (negative counts from the end).
        end: Vec<i64>,
        /// Step per axis, non-zero.
        stride: Vec<i64>,
    },
    /// CINN `Slice`: (axis, start, end) with 0 ≤ start < end, exact.
    Ranges(Vec<(i64, u32, u32)>),
}

/// One axis of a resolved slice: first index, step, count.
struct SliceAxis {
    start: i64,
    step: i64,
    count: u32,
}

impl Slice {
    /// Builds CINN `Slice` from `axes`, `starts` and `ends`.
    fn ranges(attrs: &Attrs<'_>, _n_inputs: usize) -> Result<Box<dyn Operator>> {
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
        Ok(Box::new(Slice {
            bounds: Bounds::Ranges(ranges),
        }))
    }

    /// The box on every input axis.
    fn resolve(&self, dims: &[u32]) -> Result<Vec<SliceAxis>> {
        match &self.bounds {
            Bounds::Strided { begin, end, stride } => strided_axes(begin, end, stride, dims),
            Bounds::Ranges(ranges) => range_axes(ranges, dims),
        }
    }
}

impl Operator for Slice {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let axes = self.resolve(inputs[0].dims())?;
        Ok(vec![sliced_type(&axes, &inputs[0])])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let axes = self.resolve(inputs[0].dims)?;
        copy_box(&axes, &inputs[0], &mut outputs[0])
    }
}

/// `strided_slice`'s box: `begin` no longer than the rank, then per axis the clamped range,
/// which must not be empty.
fn strided_axes(
    begins: &[i64],
    ends: &[i64],
    strides: &[i64],
    dims: &[u32],
) -> Result<Vec<SliceAxis>> {
    if begins.len() > dims.len() {
        return Err(fail!(
            AttributeOutOfRange,
            "attribute \"begin\" has {} entries for an input of rank {}: the deployed kernel reads past the shape (undefined behaviour)",
            begins.len(),
            dims.len()
        ));
    }
    dims.iter()
        .enumerate()
        .map(|(axis, &dim)| {
            let n = i64::from(dim);
            // |step| ≥ n selects one element, as ±n does; clamping keeps offsets small.
            let step = strides.get(axis).copied().unwrap_or(1).clamp(-n, n);
            let from_end = |value: i64| if value < 0 { value.saturating_add(n) } else { value };
            let (low, high) = if step < 0 { (-1, n - 1) } else { (0, n) };
            let begin = from_end(begins.get(axis).copied().unwrap_or(0)).clamp(low, high);
            let end = from_end(ends.get(axis).copied().unwrap_or(n)).clamp(low, high);
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

/// CINN `Slice`'s box: the listed ranges, each axis in range and each end within its axis; the
/// other axes whole.
fn range_axes(ranges: &[(i64, u32, u32)], dims: &[u32]) -> Result<Vec<SliceAxis>> {
    let mut axes: Vec<SliceAxis> = dims
        .iter()
        .map(|&count| SliceAxis {
            start: 0,
            step: 1,
            count,
        })
        .collect();
    for &(axis, start, end) in ranges {
        let axis: usize = in_range("axes", axis, 0, dims.len() as i64 - 1)?;
        if end > dims[axis] {
            return Err(fail!(
                AttributeOutOfRange,
                "axis {axis}: end {end} exceeds the length {}",
                dims[axis]
            ));
        }
        axes[axis] = SliceAxis {
            start: i64::from(start),
            step: 1,
            count: end - start,
        };
    }
    Ok(axes)
}

/// The type of the box `axes` selects from `input`: one dimension per axis, the input's
/// precision (`strided_slice` and `Slice`).
fn sliced_type(axes: &[SliceAxis], input: &TensorType) -> TensorType {
    TensorType::new(
        axes.iter().map(|axis| axis.count).collect::<Vec<_>>(),
        input.precision,
    )
}

/// Copies the box `axes` selects from `input` into `output`, in row-major order
/// (`strided_slice` and `Slice`).
///
/// # Errors
/// `ShapeMismatch` for a box outside the input (only for inputs `infer` did not accept).
fn copy_box(axes: &[SliceAxis], input: &TensorRef<'_>, output: &mut TensorMut<'_>) -> Result<()> {
    let strides = row_major(input.dims);
    // Offset of the first element, then per output axis the (possibly negative) step.
    let start: i64 = axes
        .iter()
        .zip(&strides)
        .map(|(axis, &stride)| axis.start * stride)
        .sum();
    let steps: Vec<i64> = axes
        .iter()
        .zip(&strides)
        .map(|(axis, &stride)| axis.step * stride)
        .collect();
    let counts: Vec<u32> = axes.iter().map(|axis| axis.count).collect();
    gather(&counts, &steps, start, input.data, output.data)
}

/// Cut `X` to the shape of a second operand on some axes (spec 001 "slice_like").
///
/// - **Inputs**: `X` (n_0, …, n_{N−1}); `shape_like` (m_0, …, m_{M−1}), of which only the shape is
///   read.
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `axis` | list of integers | empty | entries in [−N, N), each resolved axis below M; a repeated axis counts once |
///
/// - **Sliced axes**: with an empty `axis`, every axis, and M must equal N; otherwise the listed
///   axes (negative entries + N). Every sliced axis j needs m_j ≤ n_j. Axes of `shape_like` that
///   are not sliced are ignored.
/// - **Output shape**: the shape of `X` with m_j on every sliced axis j.
/// - **Semantics**: `Y[d] = X[d]`: the leading m_j entries of every sliced axis.
/// - **Output precision**: pX.
/// - **Rounding and overflow**: none possible.
/// - **Errors**, in order:
///   1. Empty `axis` and M ≠ N: `ShapeMismatch`. Otherwise, for each entry in order: outside
///      [−N, N), or resolving to an axis ≥ M: `AttributeOutOfRange`.
///   2. m_j > n_j on a sliced axis: `ShapeMismatch`.
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
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
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
