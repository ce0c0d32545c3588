//! Helpers shared by operators of several folders: checked work counts for `usage`
//! ([`count`], [`io_usage`]), arity, rank and precision checks, axis resolution
//! ([`resolve_axis`]), string choices of attributes, and the index walks over row-major tensors
//! ([`walk`], [`trailing_runs`], `Offsets`, `gather`).

use alloc::vec;
use alloc::vec::Vec;

use crate::attrs::Attrs;
use crate::error::Result;
use crate::fail;
use crate::ops::{Usage, Work};
use crate::tensor::TensorType;

/// Elements of all of `types`, in checked arithmetic.
///
/// # Errors
/// `LimitExceeded` when the sum overflows `u64`.
pub fn elements(types: &[TensorType]) -> Result<u64> {
    types
        .iter()
        .try_fold(0u64, |total, ty| total.checked_add(ty.shape.elements()))
        .ok_or_else(|| fail!(LimitExceeded, "work count overflows 64 bits"))
}

/// The usage of an operator priced as one class that reads every element of `inputs` and
/// writes every element of `outputs`.
///
/// # Errors
/// `LimitExceeded` when a count overflows `u64`.
pub fn io_usage(inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
    Ok(Usage {
        class: "",
        work: Work::io(elements(inputs)?, elements(outputs)?),
    })
}

/// Checked product of counts, for usage formulas.
///
/// # Errors
/// `LimitExceeded` when the product overflows `u64`.
pub fn count(factors: &[u64]) -> Result<u64> {
    factors
        .iter()
        .try_fold(1u64, |acc, &factor| acc.checked_mul(factor))
        .ok_or_else(|| fail!(LimitExceeded, "work count overflows 64 bits"))
}

/// Checks that exactly `expected` inputs were given (for builders whose arity depends on
/// attributes).
///
/// # Errors
/// `ArityMismatch` explaining why `expected` inputs are needed.
pub fn expect_inputs(n_inputs: usize, expected: usize, why: &str) -> Result<()> {
    if n_inputs == expected {
        Ok(())
    } else {
        Err(fail!(
            ArityMismatch,
            "takes {expected} inputs {why}, got {n_inputs}"
        ))
    }
}

/// Checks that `ty` has rank `rank`, naming the operand.
///
/// # Errors
/// `ShapeMismatch`.
pub fn expect_rank(ty: &TensorType, rank: usize, operand: &str) -> Result<()> {
    if ty.shape.rank() == rank {
        Ok(())
    } else {
        Err(fail!(
            ShapeMismatch,
            "{operand} must have rank {rank}, got shape {}",
            ty.shape
        ))
    }
}

/// Checks that an inferred precision fits 32 bits.
///
/// # Errors
/// `PrecisionOverflow` with the inferred figure.
pub fn output_precision(precision: u32) -> Result<u8> {
    if precision <= u32::from(crate::tensor::MAX_PRECISION) {
        Ok(precision.max(1) as u8)
    } else {
        Err(fail!(
            PrecisionOverflow,
            "inferred output precision {precision} exceeds 32 bits"
        ))
    }
}

/// Visits every index of `dims` in row-major order, passing the offsets of `K` operands whose
/// strides (in elements, per axis of `dims`; 0 for a broadcast axis) are `strides`.
///
/// The offsets are kept incrementally, like an odometer: one addition per step.
///
/// # Errors
/// Whatever `visit` returns; the walk stops at the first error.
pub fn walk<const K: usize>(
    dims: &[u32],
    strides: [&[usize]; K],
    mut visit: impl FnMut([usize; K]) -> Result<()>,
) -> Result<()> {
    if dims.contains(&0) {
        return Ok(());
    }
    let rank = dims.len();
    let mut index = alloc::vec![0u32; rank];
    let mut offsets = [0usize; K];
    loop {
        visit(offsets)?;
        let mut axis = rank;
        loop {
            if axis == 0 {
                return Ok(());
            }
            axis -= 1;
            index[axis] += 1;
            for (offset, stride) in offsets.iter_mut().zip(strides) {
                *offset += stride[axis];
            }
            if index[axis] < dims[axis] {
                break;
            }
            for (offset, stride) in offsets.iter_mut().zip(strides) {
                *offset -= stride[axis] * dims[axis] as usize;
            }
            index[axis] = 0;
        }
    }
}

/// How an operand is read along one run of [`trailing_runs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read {
    /// `run` consecutive elements.
    Contiguous,
    /// One element, repeated over the run.
    Repeated,
}

/// The longest trailing block of `dims` that `K` operands with per-axis `strides` (as for
/// [`walk`]; 0 along broadcast axes) each read contiguously or as one repeated element:
/// `(split, run, reads)`, with the axes from `split` on holding `run` consecutive positions.
/// Axes of length 1 never end the block; the walk over `dims[..split]` then takes one step per
/// run instead of one per element.
pub fn trailing_runs<const K: usize>(
    dims: &[u32],
    strides: [&[usize]; K],
) -> (usize, usize, [Read; K]) {
    let (mut split, mut run) = (dims.len(), 1usize);
    let mut reads: [Option<Read>; K] = [None; K];
    'axes: while split > 0 {
        let axis = split - 1;
        if dims[axis] != 1 {
            let mut extended = reads;
            for (read, stride) in extended.iter_mut().zip(strides) {
                let this = match stride[axis] {
                    0 => Read::Repeated,
                    s if s == run => Read::Contiguous,
                    _ => break 'axes,
                };
                match *read {
                    Some(earlier) if earlier != this => break 'axes,
                    _ => *read = Some(this),
                }
            }
            reads = extended;
            run = run.saturating_mul(dims[axis] as usize);
        }
        split = axis;
    }
    (
        split,
        run,
        reads.map(|read| read.unwrap_or(Read::Contiguous)),
    )
}

/// Resolves axis `axis` of a rank-`rank` tensor, allowing negative values from the end
/// (spec 001: `axis + N` for `axis < 0`).
///
/// # Errors
/// `AttributeOutOfRange` naming attribute `name` when `axis` is outside [−rank, rank).
pub fn resolve_axis(name: &str, axis: i64, rank: usize) -> Result<usize> {
    let rank = rank as i64;
    if (-rank..rank).contains(&axis) {
        Ok((if axis < 0 { axis + rank } else { axis }) as usize)
    } else {
        Err(fail!(
            AttributeOutOfRange,
            "attribute \"{name}\" = {axis} is outside [{}, {rank}) for an input of rank {rank}",
            -rank
        ))
    }
}

/// Converts an `i64` result into `i32`, reporting overflow instead of wrapping.
///
/// # Errors
/// `IntegerOverflow`.
#[inline]
pub fn narrow(value: i64) -> Result<i32> {
    i32::try_from(value).map_err(|_| fail!(IntegerOverflow, "result {value} does not fit in int32"))
}

/// A string attribute that takes one of the values of `table`; `default` when absent (`None`:
/// the attribute is required).
///
/// # Errors
/// `MissingAttribute`, or `AttributeOutOfRange` for a value outside the table.
pub(crate) fn choice<T: Copy>(
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

/// Checks that list attribute `name` has no repeated entry.
///
/// # Errors
/// `AttributeOutOfRange` naming the repeated value.
pub(crate) fn distinct(name: &str, values: &[i64]) -> Result<()> {
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

/// Product of dimensions (saturating; validated shapes stay far below the limit).
pub(crate) fn product(dims: &[u32]) -> usize {
    dims.iter()
        .fold(1usize, |acc, &dim| acc.saturating_mul(dim as usize))
}

/// Row-major strides in elements, as signed steps.
pub(crate) fn row_major(dims: &[u32]) -> Vec<i64> {
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
pub(crate) fn fetch(data: &[i32], offset: i64) -> Result<i32> {
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
pub(crate) struct Offsets<'a> {
    dims: &'a [u32],
    steps: &'a [i64],
    index: Vec<u32>,
    offset: i64,
    done: bool,
}

impl<'a> Offsets<'a> {
    pub(crate) fn new(dims: &'a [u32], steps: &'a [i64], start: i64) -> Offsets<'a> {
        Offsets {
            dims,
            steps,
            index: vec![0; dims.len()],
            offset: start,
            done: dims.contains(&0),
        }
    }

    /// Starts over from the first index at offset `start`.
    pub(crate) fn restart(&mut self, start: i64) {
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
pub(crate) fn gather(
    dims: &[u32],
    steps: &[i64],
    start: i64,
    src: &[i32],
    dst: &mut [i32],
) -> Result<()> {
    for (slot, offset) in dst.iter_mut().zip(Offsets::new(dims, steps, start)) {
        *slot = fetch(src, offset)?;
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
    pub(crate) fn parse(attrs: &Attrs<'_>) -> Result<DataFormat> {
        choice(
            attrs,
            "data_format",
            Some(DataFormat::Nchw),
            &[("NCHW", DataFormat::Nchw), ("NHWC", DataFormat::Nhwc)],
        )
    }

    /// (N, C, H, W) of dimensions stored in this layout.
    pub(crate) fn logical(self, [a, b, c, d]: [u32; 4]) -> [u32; 4] {
        match self {
            DataFormat::Nchw => [a, b, c, d],
            DataFormat::Nhwc => [a, d, b, c],
        }
    }

    /// Stored dimensions of logical (N, C, H, W).
    pub(crate) fn physical(self, [n, c, h, w]: [u32; 4]) -> [u32; 4] {
        match self {
            DataFormat::Nchw => [n, c, h, w],
            DataFormat::Nhwc => [n, h, w, c],
        }
    }

    /// Element strides of the logical axes (N, C, H, W) of a tensor of logical dims `dims`.
    pub(crate) fn strides(self, [_, c, h, w]: [usize; 4]) -> [usize; 4] {
        match self {
            DataFormat::Nchw => [c * h * w, h * w, w, 1],
            DataFormat::Nhwc => [h * w * c, 1, w * c, c],
        }
    }

    /// (outer, channels, inner) of a rank ≥ 2 shape split at its channel axis.
    pub(crate) fn split(self, dims: &[u32], operand: &str) -> Result<(usize, usize, usize)> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_walk_row_major_with_signed_steps() {
        let steps = [-3i64, 1];
        let offsets: Vec<i64> = Offsets::new(&[2, 3], &steps, 3).collect();
        assert_eq!(offsets, [3, 4, 5, 0, 1, 2]);
        assert_eq!(Offsets::new(&[], &[], 7).collect::<Vec<_>>(), [7]);
        assert_eq!(Offsets::new(&[2, 0], &[1, 1], 0).count(), 0);
    }
}
