//! What the convolution kernels share about their output planes: the bias where a sum has no
//! terms ([`only_bias`]), whether a channel's bias may be added with plain additions
//! ([`channel_bias`]), and the store of four sums that may end past the output
//! ([`store_quad`]).

use crate::kernels::simd::Simd;

/// Writes, for outputs whose sums have no terms, `bias[oc]` (or 0) into every output of each
/// plane of `pixels` (planes in channel order, image after image).
pub fn only_bias(out: &mut [i32], bias: Option<&[i32]>, pixels: usize) {
    if pixels == 0 {
        return;
    }
    for (oc, plane) in out.chunks_exact_mut(pixels).enumerate() {
        let value = bias.map_or(0, |bias| {
            bias.get(oc % bias.len().max(1)).copied().unwrap_or(0)
        });
        plane.fill(value);
    }
}

/// Largest |x · w| of two values within 8 bits (the bounds of cvm-compat §3 for conv2d).
pub(super) const PRODUCT_BOUND: i64 = 1 << 14;

/// The bias of output channel `oc` (0 without one), and whether it can be added to sums of at
/// most `bound` in magnitude with plain additions (no sum plus it leaves `i32`).
pub(super) fn channel_bias(bias: Option<&[i32]>, oc: usize, bound: i64) -> (i32, bool) {
    let addend = bias.and_then(|bias| bias.get(oc)).copied().unwrap_or(0);
    (
        addend,
        i64::from(addend).abs() + bound <= i64::from(i32::MAX),
    )
}

/// Stores `value` at `at` in `out`, only the lanes within `out` when the end is near.
#[inline(always)]
pub(super) fn store_quad<S: Simd>(out: &mut [i32], at: usize, value: S::I32x4) {
    let target = out.get_mut(at..).unwrap_or_default();
    match target.first_chunk_mut::<4>() {
        Some(quad) => S::store32(quad, value),
        None => {
            let mut lanes = [0; 4];
            S::store32(&mut lanes, value);
            for (slot, lane) in target.iter_mut().zip(lanes) {
                *slot = lane;
            }
        }
    }
}
