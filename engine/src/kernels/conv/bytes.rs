//! Convolution on `i8` rows (`dot8.rs`) when the data is proven within [0, 127]: im2col
//! through a zero-padded channels-last copy of each image's group, as
//! `im2col::im2col_channels_last`, with bytes instead of `i16` (patches of [`padded_bytes`],
//! weights packed by `PackedRows::pack_bytes` in the same channels-last order).
//!
//! Exact under the bounds of cvm-compat §3 for conv2d (see `gemm.rs`), given the data's
//! non-negativity (validation's fact; values are clamped to [0, 127] as they are copied, so a
//! value outside the proof could never reach a relaxed instruction). The bias is added per
//! output plane afterwards, with checks.
//!
//! Chosen ([`ConvShape::uses_bytes`]), when the data is proven non-negative, for the shapes of
//! the channels-last im2col kernel and of the pointwise kernel (a 1 × 1 window without padding
//! is a channels-last copy gathered pixel by pixel), if its working memory is within the
//! kernel's own (so the memory the plan counts, which decides `MemoryLimit`, still bounds it).

use alloc::vec;
use alloc::vec::Vec;

use super::im2col::{BLOCK, fill_channels_last, gather_channels_last};
use crate::kernels::dot8::{self, narrow_u7, padded_bytes};
use crate::kernels::gemm;
use crate::kernels::pack::PackedRows;
use crate::kernels::shape::ConvShape;

/// Patches held at once: [`BLOCK`], or fewer for smaller outputs.
fn block_rows(s: &ConvShape) -> usize {
    BLOCK.min(s.out_h * s.out_w).max(1)
}

/// Working memory in bytes, without the weights: a block of patches and the padded
/// channels-last copy of one group of one image.
pub(super) fn scratch_bytes(s: &ConvShape) -> u64 {
    let patches = (block_rows(s) as u64).saturating_mul(padded_bytes(s.depth()) as u64);
    patches.saturating_add(s.padded_plane().saturating_mul(s.group_in() as u64))
}

/// Writes `Σ x·w` into every output of `out` (NCHW), the weights packed as bytes in
/// channels-last order (`PackedRows::pack_bytes`).
pub(super) fn im2col_bytes(s: &ConvShape, data: &[i32], weights: &PackedRows, out: &mut [i32]) {
    let stride = weights.stride();
    let (group_in, group_out) = (s.group_in(), s.group_out());
    let plane = s.height * s.width;
    let pixels = s.out_h * s.out_w;
    if pixels == 0 || group_out == 0 || group_in == 0 {
        return;
    }
    let padded_w = s.width + 2 * s.padding[1];
    let padded_h = s.height + 2 * s.padding[0];
    let mut copy: Vec<i8> = vec![0; padded_h * padded_w * group_in];
    let rows = block_rows(s);
    let mut patches: Vec<i8> = vec![0; rows * stride];
    let run = s.kernel_w * group_in;
    for n in 0..s.batch {
        for g in 0..s.groups {
            let group_data =
                &data[(n * s.in_channels + g * group_in) * plane..][..group_in * plane];
            fill_channels_last(s, group_data, padded_w, &mut copy, narrow_u7);
            let group_weights =
                &weights.byte_values()[g * group_out * stride..][..group_out * stride];
            let out = &mut out[(n * s.out_channels + g * group_out) * pixels..];
            for start in (0..pixels).step_by(rows) {
                let len = rows.min(pixels - start);
                for (i, patch) in patches.chunks_exact_mut(stride).take(len).enumerate() {
                    let (p, q) = ((start + i) / s.out_w, (start + i) % s.out_w);
                    gather_channels_last(s, &copy, padded_w, p, q, &mut patch[..run * s.kernel_h]);
                }
                dot8::dot_products(
                    &patches[..len * stride],
                    len,
                    group_weights,
                    group_out,
                    stride,
                    gemm::Strided {
                        data: out.get_mut(start..).unwrap_or_default(),
                        row_step: 1,
                        column_step: pixels,
                    },
                );
            }
        }
    }
}
