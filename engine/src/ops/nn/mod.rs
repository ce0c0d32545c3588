//! Neural-network layers: `conv2d`, `dense`, `relu`, `max_pool2d`, `upsampling` (spec 001), CINN
//! `Conv` and `Dot` (spec 002), and the checks the multiply-accumulate layers share.
//!
//! conv2d, dense and max_pool2d run the vector kernels of [`crate::kernels`]. Precision inference
//! (cvm-compat §3) bounds every multiply-accumulate sum below 2^30, so the kernels' 32-bit lanes
//! are exact; the bias is added with a checked addition.

pub mod cinn_conv;
pub mod conv2d;
pub mod dense;
pub mod pool;
pub mod relu;
pub mod upsampling;

use crate::attrs::{Attrs, in_range, pair_in_range};
use crate::error::Result;
use crate::fail;
use crate::kernels;
use crate::kernels::simd::Native;
use crate::ops::common::output_precision;
use crate::tensor::{TensorType, bit_width};

/// Upper bound (inclusive, as the deployed runtime's `VerifyAttrRange`) of attributes such as
/// padding, strides, dilation and scale.
const MAX_ATTR: i64 = 4096;

/// Largest precision dense and conv2d accept on data and weights (cvm-compat §3).
const MAX_MAC_INPUT_PRECISION: u8 = 8;

/// Checks a string attribute against the values this engine supports.
fn check_layout(attrs: &Attrs<'_>, name: &str, allowed: &[&str]) -> Result<()> {
    match attrs.opt_str(name) {
        Some(value) if !allowed.contains(&value) => Err(fail!(
            AttributeOutOfRange,
            "attribute \"{name}\" = \"{value}\" is not supported (expected one of {allowed:?})"
        )),
        _ => Ok(()),
    }
}

/// Checks the ≤ 8-bit precision rule of dense and conv2d operands.
pub(crate) fn check_mac_precision(ty: &TensorType, operand: &str) -> Result<()> {
    if ty.precision > MAX_MAC_INPUT_PRECISION {
        Err(fail!(
            PrecisionConstraint,
            "{operand} has precision {}, but at most {MAX_MAC_INPUT_PRECISION} is allowed",
            ty.precision
        ))
    } else {
        Ok(())
    }
}

/// The multiply-accumulates the schedule counts per output of an 8-bit reduction of length
/// `k`: k rounded up to the vector width, 16.
pub(crate) fn vector_reduction(k: u64) -> u64 {
    k.div_ceil(16).saturating_mul(16)
}

/// Output precision of a multiply-accumulate layer (cvm-compat §3, dense and conv2d rows).
pub(crate) fn mac_precision(
    data: &TensorType,
    weight: &TensorType,
    reduction: u64,
    bias: Option<&TensorType>,
) -> Result<u8> {
    let product = u32::from(data.precision) + u32::from(weight.precision) + bit_width(reduction);
    output_precision(match bias {
        Some(bias) => product.max(u32::from(bias.precision)) + 1,
        None => product,
    })
}

/// The error of a bias addition that overflows: precision inference makes the sums fit (output
/// precision max(pXW, pB) + 1 ≤ 32), so it would be an engine bug, reported as one.
fn bias_overflow() -> crate::Error {
    fail!(IntegerOverflow, "bias addition overflows i32 (engine bug)")
}

/// Adds the bias row to every row of an (M, N) dense output, checked ([`bias_overflow`]).
fn add_bias_rows(out: &mut [i32], bias: &[i32], units: usize) -> Result<()> {
    if units == 0 {
        return Ok(());
    }
    let bias = &bias[..units];
    if out
        .chunks_exact_mut(units)
        .all(|row| kernels::add_each_checked::<Native>(row, bias))
    {
        Ok(())
    } else {
        Err(bias_overflow())
    }
}

/// The window attributes of `conv2d` and CINN `Conv`.
#[derive(Clone, Copy, Debug)]
struct Window {
    strides: [u32; 2],
    padding: [u32; 2],
    dilation: [u32; 2],
    groups: u32,
}

impl Window {
    /// Parses the window of a convolution row, in this order: strides (pair of entries in
    /// 1..=`max`, default (1, 1)), padding (0..=`max`, default (0, 0)), dilation (1..=`max`,
    /// default (1, 1)), then `groups` (≥ 1, default 1). `names` are the row's spellings of the
    /// first three.
    ///
    /// # Errors
    /// `AttributeOutOfRange` naming the attribute.
    fn parse(attrs: &Attrs<'_>, names: [&str; 3], max: i64) -> Result<Window> {
        let [strides, padding, dilation] = names;
        Ok(Window {
            strides: pair_in_range(strides, attrs.opt_ints(strides).unwrap_or(&[1, 1]), 1, max)?,
            padding: pair_in_range(padding, attrs.opt_ints(padding).unwrap_or(&[0, 0]), 0, max)?,
            dilation: pair_in_range(
                dilation,
                attrs.opt_ints(dilation).unwrap_or(&[1, 1]),
                1,
                max,
            )?,
            groups: in_range("groups", attrs.int_or("groups", 1), 1, i64::from(u32::MAX))?,
        })
    }
}
