//! Tensors: shapes with checked element counts, the CVM precision rule, and integer helpers
//! shared by every operator family.
//!
//! Values are `i32`. A tensor of precision `p` (1..=32) holds values with |x| ≤ 2^(p−1) − 1
//! (spec 000, "DLTensor"); the executor relies on that bound, which inputs and parameters are
//! checked against and precision inference propagates.

use alloc::vec::Vec;
use borsh::{BorshDeserialize, BorshSerialize};

use crate::error::Result;
use crate::fail;
use crate::limits;

/// The largest precision a tensor may have.
pub const MAX_PRECISION: u8 = 32;

/// The largest magnitude a value of precision `precision` may have: 2^(p−1) − 1.
///
/// `precision` must be in 1..=32 (callers validate it first); 0 is treated as 1.
pub const fn precision_bound(precision: u8) -> i64 {
    let p = if precision == 0 { 1 } else { precision };
    (1i64 << (p - 1)) - 1
}

/// Number of significant bits of `n` (0 → 0, 1 → 1, 4 → 3): the `bits` of cvm-compat §3.
pub const fn bit_width(n: u64) -> u32 {
    u64::BITS - n.leading_zeros()
}

/// Checks that a declared precision lies in 1..=32.
///
/// # Errors
/// [`crate::ErrorCode::InvalidPrecision`] naming `what`.
pub fn check_precision(precision: u8, what: &dyn core::fmt::Display) -> Result<()> {
    if (1..=MAX_PRECISION).contains(&precision) {
        Ok(())
    } else {
        Err(fail!(
            InvalidPrecision,
            "{what}: precision {precision} is outside 1..=32"
        ))
    }
}

/// Clips `value` to ±(2^(p−1) − 1): the `cvm_clip` of spec 001 (its heading "cvm_cilp").
pub fn clip_to_precision(value: i64, precision: u8) -> i32 {
    let bound = precision_bound(precision);
    // `bound` ≤ i32::MAX, so the clipped value always fits.
    value.clamp(-bound, bound) as i32
}

/// A tensor shape: one `u32` per dimension, row-major.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, BorshSerialize, BorshDeserialize)]
pub struct Shape(pub Vec<u32>);

impl Shape {
    /// A shape from its dimensions.
    pub fn new(dims: impl Into<Vec<u32>>) -> Shape {
        Shape(dims.into())
    }

    /// The dimensions.
    pub fn dims(&self) -> &[u32] {
        &self.0
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// Number of elements, or `None` if the product overflows `u64`.
    pub fn checked_elements(&self) -> Option<u64> {
        self.0
            .iter()
            .try_fold(1u64, |n, &dim| n.checked_mul(u64::from(dim)))
    }

    /// Number of elements of a validated shape (at most [`limits::MAX_TENSOR_ELEMENTS`]).
    pub fn elements(&self) -> u64 {
        self.checked_elements().unwrap_or(u64::MAX)
    }

    /// Product of the dimensions with zero dimensions counted as 1, or `None` on overflow.
    ///
    /// Bounding this (not just the element count) keeps every partial product of dimensions
    /// small, also for zero-element tensors such as [0, 2^32 − 1, 2^32 − 1].
    pub fn checked_volume(&self) -> Option<u64> {
        self.0
            .iter()
            .try_fold(1u64, |n, &dim| n.checked_mul(u64::from(dim.max(1))))
    }

    /// Checks rank and size against the engine limits: at most [`limits::MAX_RANK`] axes, and
    /// at most [`limits::MAX_TENSOR_ELEMENTS`] for the product of the dimensions with zero
    /// dimensions counted as 1 (so no product of dimensions can overflow anywhere). Returns the
    /// element count.
    ///
    /// # Errors
    /// [`crate::ErrorCode::LimitExceeded`] naming `what`.
    pub fn check_limits(&self, what: &dyn core::fmt::Display) -> Result<u64> {
        if self.rank() > limits::MAX_RANK {
            return Err(fail!(
                LimitExceeded,
                "{what}: rank {} exceeds the limit of {}",
                self.rank(),
                limits::MAX_RANK
            ));
        }
        match self.checked_volume() {
            Some(volume) if volume <= limits::MAX_TENSOR_ELEMENTS => Ok(self.elements()),
            _ => Err(fail!(
                LimitExceeded,
                "{what}: shape {:?} exceeds the limit of {} elements on the product of its dimensions (a dimension of 0 counted as 1)",
                self.0,
                limits::MAX_TENSOR_ELEMENTS
            )),
        }
    }

    /// Row-major strides (in elements) of a validated shape.
    pub fn strides(&self) -> Vec<usize> {
        let mut strides = alloc::vec![1usize; self.rank()];
        for axis in (0..self.rank().saturating_sub(1)).rev() {
            strides[axis] = strides[axis + 1] * self.0[axis + 1] as usize;
        }
        strides
    }
}

impl core::fmt::Display for Shape {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("[")?;
        for (axis, dim) in self.0.iter().enumerate() {
            if axis > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{dim}")?;
        }
        f.write_str("]")
    }
}

/// The static type of a value: its shape and precision. Known for every value after validation.
#[derive(Clone, Debug, PartialEq, Eq, BorshSerialize, BorshDeserialize)]
pub struct TensorType {
    /// Shape of the value.
    pub shape: Shape,
    /// Precision in 1..=32: every element satisfies |x| ≤ 2^(p−1) − 1.
    pub precision: u8,
}

impl TensorType {
    /// A type from a shape and a precision.
    pub fn new(shape: impl Into<Vec<u32>>, precision: u8) -> TensorType {
        TensorType {
            shape: Shape::new(shape),
            precision,
        }
    }

    /// The dimensions.
    pub fn dims(&self) -> &[u32] {
        self.shape.dims()
    }
}

/// An owned tensor: shape, precision and row-major `i32` data.
#[derive(Clone, Debug, PartialEq, Eq, BorshSerialize, BorshDeserialize)]
pub struct Tensor {
    /// Shape of the tensor.
    pub shape: Shape,
    /// Precision of the tensor.
    pub precision: u8,
    /// Row-major values; `data.len()` equals the shape's element count.
    pub data: Vec<i32>,
}

/// A borrowed view of a tensor handed to an operator kernel.
#[derive(Clone, Copy, Debug)]
pub struct TensorRef<'a> {
    /// Dimensions.
    pub dims: &'a [u32],
    /// Precision.
    pub precision: u8,
    /// Row-major values.
    pub data: &'a [i32],
}

/// A mutable view of an output tensor handed to an operator kernel, already sized and zeroed.
#[derive(Debug)]
pub struct TensorMut<'a> {
    /// Dimensions.
    pub dims: &'a [u32],
    /// Precision the output was inferred to have.
    pub precision: u8,
    /// Row-major values to fill.
    pub data: &'a mut [i32],
}

impl Tensor {
    /// A borrowed view.
    pub fn view(&self) -> TensorRef<'_> {
        TensorRef {
            dims: self.shape.dims(),
            precision: self.precision,
            data: &self.data,
        }
    }

    /// A mutable view, as kernels write outputs.
    pub fn view_mut(&mut self) -> TensorMut<'_> {
        TensorMut {
            dims: self.shape.dims(),
            precision: self.precision,
            data: &mut self.data,
        }
    }

    /// A zero-filled tensor of type `ty`, allocated fallibly.
    ///
    /// # Errors
    /// [`crate::ErrorCode::MemoryLimit`] if the allocation fails.
    pub fn zeroed(ty: &TensorType) -> Result<Tensor> {
        let n_elements = ty.shape.elements() as usize;
        let mut data = Vec::new();
        data.try_reserve_exact(n_elements)
            .map_err(|_| fail!(MemoryLimit, "cannot allocate {n_elements} elements"))?;
        data.resize(n_elements, 0);
        Ok(Tensor {
            shape: ty.shape.clone(),
            precision: ty.precision,
            data,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precision_bounds() {
        assert_eq!(precision_bound(1), 0);
        assert_eq!(precision_bound(8), 127);
        assert_eq!(precision_bound(32), i64::from(i32::MAX));
    }

    #[test]
    fn bit_widths_match_the_compat_table() {
        assert_eq!(bit_width(0), 0);
        assert_eq!(bit_width(1), 1);
        assert_eq!(bit_width(4), 3);
        assert_eq!(bit_width(1152), 11);
    }

    #[test]
    fn clipping() {
        assert_eq!(clip_to_precision(-128, 8), -127);
        assert_eq!(clip_to_precision(127, 8), 127);
        assert_eq!(clip_to_precision(i64::MAX, 32), i32::MAX);
        assert_eq!(clip_to_precision(i64::MIN, 32), -i32::MAX);
    }

    #[test]
    fn strides_are_row_major() {
        assert_eq!(Shape::new([2, 3, 4]).strides(), [12, 4, 1]);
        assert_eq!(Shape::new([]).strides(), Vec::<usize>::new());
    }

    #[test]
    fn element_counts_are_checked() {
        assert_eq!(
            Shape::new([u32::MAX, u32::MAX, u32::MAX]).checked_elements(),
            None
        );
        assert!(Shape::new([1 << 16, 1 << 16]).check_limits(&"x").is_err());
        assert_eq!(Shape::new([2, 3]).check_limits(&"x"), Ok(6));
        // Zero-element shapes are bounded too: their other dimensions may not multiply past the
        // limit.
        assert_eq!(Shape::new([0, 5]).check_limits(&"x"), Ok(0));
        assert!(
            Shape::new([0, u32::MAX, u32::MAX, u32::MAX])
                .check_limits(&"x")
                .is_err()
        );
        assert!(Shape::new([0, 1 << 20, 1 << 7]).check_limits(&"x").is_err());
    }
}
