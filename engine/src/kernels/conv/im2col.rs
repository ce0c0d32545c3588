//! Grouped convolution as blocks of im2col patches times packed weights: for each block of
//! [`BLOCK`] output pixels, every pixel's window (C/groups · KH · KW values) is gathered into a
//! packed `i16` row and the block's dot products with the group's weight rows taken by
//! `gemm.rs`.
//!
//! Exact under the bounds of cvm-compat §3 for conv2d (see `gemm.rs`): data and weights within 8
//! bits narrow to `i16` exactly, and an output precision of at most 32 bits keeps every partial
//! sum within 32-bit lanes. The bias is added per output plane afterwards, with checks.
//!
//! Chosen for every shape no other kernel takes (`conv/mod.rs`): gathering from a zero-padded
//! channels-last copy of the input when that copy stays within twice the input, else from the
//! input itself with bounds checks.

use alloc::vec;
use alloc::vec::Vec;

use crate::kernels::gemm;
use crate::kernels::pack::{PackedRows, narrow16};
use crate::kernels::shape::ConvShape;
use crate::kernels::simd::Simd;

/// Output pixels per im2col block: the patch block (`BLOCK` × padded depth `i16`) stays in
/// the first-level cache next to four rows of weights.
pub const BLOCK: usize = 16;

/// Working memory of the im2col kernel in bytes, without the weights: a block of patches, and
/// the padded channels-last copy of one group of one image if `channels_last`.
pub(super) fn scratch_bytes(s: &ConvShape, channels_last: bool) -> u64 {
    let mut patches = PackedRows::bytes(BLOCK as u64, s.depth() as u64);
    if channels_last {
        let copy = s.padded_plane().saturating_mul(s.group_in() as u64);
        patches = patches.saturating_add(copy.saturating_mul(2));
    }
    patches
}

/// Grouped convolution through a zero-padded channels-last copy of each image's group: a window
/// row (KW taps of C/groups channels) is then one contiguous run when DW = 1, and KW runs of
/// C/groups values otherwise, copied without bounds checks. Weights are packed in the same
/// (row, column, channel) order (`PackOrder::ChannelsLast`).
pub(super) fn im2col_channels_last<S: Simd>(
    shape: &ConvShape,
    data: &[i32],
    weights: &PackedRows,
    out: &mut [i32],
) {
    let s = *shape;
    let stride = weights.stride();
    let (group_in, group_out) = (s.group_in(), s.group_out());
    let plane = s.height * s.width;
    let pixels = s.out_h * s.out_w;
    if pixels == 0 || group_out == 0 || group_in == 0 {
        return;
    }
    let padded_w = s.width + 2 * s.padding[1];
    let padded_h = s.height + 2 * s.padding[0];
    let mut copy: Vec<i16> = vec![0; padded_h * padded_w * group_in];
    let mut patches: Vec<i16> = vec![0; BLOCK * stride];
    let run = s.kernel_w * group_in;
    for n in 0..s.batch {
        for g in 0..s.groups {
            let group_data =
                &data[(n * s.in_channels + g * group_in) * plane..][..group_in * plane];
            fill_channels_last(&s, group_data, padded_w, &mut copy);
            let group_weights =
                &weights.values()[g * group_out * stride..(g + 1) * group_out * stride];
            let out_base = (n * s.out_channels + g * group_out) * pixels;
            multiply_blocks::<S>(
                &s,
                &mut patches,
                group_weights,
                &mut out[out_base..],
                |p, q, patch| {
                    gather_channels_last(&s, &copy, padded_w, p, q, &mut patch[..run * s.kernel_h]);
                },
            );
        }
    }
}

/// Channels written together by [`fill_channels_last`]: one 128-bit vector of `i16`.
const CHANNEL_RUN: usize = 8;

/// Writes the interior of the zero-padded channels-last copy of one group of one image
/// (`group_data`: C/groups planes of H × W) into `copy` (padded rows of `padded_w` pixels of
/// C/groups values); the zero border is never written. Eight channels at a time, so that each
/// step writes one pixel's run of eight values instead of a single value.
#[inline(never)]
fn fill_channels_last(s: &ConvShape, group_data: &[i32], padded_w: usize, copy: &mut [i16]) {
    let group_in = s.group_in();
    let (width, plane) = (s.width, s.height * s.width);
    if width == 0 || group_in == 0 {
        return;
    }
    let mut c = 0;
    while c < group_in {
        let run = CHANNEL_RUN.min(group_in - c);
        for h in 0..s.height {
            let first = ((h + s.padding[0]) * padded_w + s.padding[1]) * group_in + c;
            let Some(target) = copy.get_mut(first..first + (width - 1) * group_in + run) else {
                return; // callers size the copy for every row; never reached
            };
            let line = |k: usize| &group_data[(c + k) * plane + h * width..][..width];
            if run == CHANNEL_RUN {
                let lines: [&[i32]; CHANNEL_RUN] = core::array::from_fn(line);
                for (w, pixel) in target.chunks_mut(group_in).enumerate() {
                    if let Some(slots) = pixel.first_chunk_mut::<CHANNEL_RUN>() {
                        *slots = core::array::from_fn(|k| narrow16(lines[k][w]));
                    }
                }
            } else {
                for k in 0..run {
                    for (slot, &value) in target[k..].iter_mut().step_by(group_in).zip(line(k)) {
                        *slot = narrow16(value);
                    }
                }
            }
        }
        c += run;
    }
}

/// One group of one image: for each block of [`BLOCK`] output pixels, `gather` writes each
/// pixel's patch (a row of `patches`), then the block's dot products with the group's weight
/// rows are written to `out` (the group's output planes, OC/groups × OH·OW).
fn multiply_blocks<S: Simd>(
    s: &ConvShape,
    patches: &mut [i16],
    group_weights: &[i16],
    out: &mut [i32],
    mut gather: impl FnMut(usize, usize, &mut [i16]),
) {
    let pixels = s.out_h * s.out_w;
    let stride = patches.len() / BLOCK;
    for start in (0..pixels).step_by(BLOCK) {
        let len = BLOCK.min(pixels - start);
        for (i, patch) in patches.chunks_exact_mut(stride).take(len).enumerate() {
            gather((start + i) / s.out_w, (start + i) % s.out_w, patch);
        }
        gemm::dot_products::<S>(
            &patches[..len * stride],
            len,
            group_weights,
            s.group_out(),
            stride,
            gemm::Strided {
                data: out.get_mut(start..).unwrap_or_default(),
                row_step: 1,
                column_step: pixels,
            },
        );
    }
}

/// Copies the window of output pixel (p, q) from the padded channels-last copy into `patch`
/// (KH runs of KW · C/groups values).
#[inline(never)]
fn gather_channels_last(
    s: &ConvShape,
    copy: &[i16],
    padded_w: usize,
    p: usize,
    q: usize,
    patch: &mut [i16],
) {
    let group_in = s.group_in();
    let run = s.kernel_w * group_in;
    let (top, left) = (p * s.strides[0], q * s.strides[1]);
    for (ki, target) in patch.chunks_exact_mut(run).enumerate() {
        let first = ((top + ki * s.dilation[0]) * padded_w + left) * group_in;
        if s.dilation[1] == 1 {
            target.copy_from_slice(&copy[first..first + run]);
        } else {
            for (kj, taps) in target.chunks_exact_mut(group_in).enumerate() {
                let at = first + kj * s.dilation[1] * group_in;
                taps.copy_from_slice(&copy[at..at + group_in]);
            }
        }
    }
}

/// Grouped convolution: for each image, group and block of [`BLOCK`] output pixels, gathers
/// the patches into packed rows and takes their dot products with the group's weight rows.
pub(super) fn im2col<S: Simd>(
    shape: &ConvShape,
    data: &[i32],
    weights: &PackedRows,
    out: &mut [i32],
) {
    let s = *shape;
    let stride = weights.stride();
    let (group_in, group_out) = (s.group_in(), s.group_out());
    let plane = s.height * s.width;
    let pixels = s.out_h * s.out_w;
    if pixels == 0 || group_out == 0 {
        return;
    }
    let mut patches: Vec<i16> = vec![0; BLOCK * stride];
    for n in 0..s.batch {
        for g in 0..s.groups {
            let group_data = &data[(n * s.in_channels + g * group_in) * plane..];
            let group_weights =
                &weights.values()[g * group_out * stride..(g + 1) * group_out * stride];
            let out_base = (n * s.out_channels + g * group_out) * pixels;
            multiply_blocks::<S>(
                &s,
                &mut patches,
                group_weights,
                &mut out[out_base..],
                |p, q, patch| gather_patch(&s, group_data, p, q, patch),
            );
        }
    }
}

/// Writes the patch of output pixel (p, q): the window of every input channel of the group,
/// in weight order (channel, row, column), zero where the window covers padding. Lanes past
/// the patch keep their zeros. Not inlined, so that it compiles to a small, register-friendly
/// function also in wasm.
#[inline(never)]
fn gather_patch(s: &ConvShape, group_data: &[i32], p: usize, q: usize, patch: &mut [i16]) {
    let [stride_h, stride_w] = s.strides;
    let [pad_h, pad_w] = s.padding;
    let [dil_h, dil_w] = s.dilation;
    let plane = s.height * s.width;
    // Top-left corner of the window in padded coordinates.
    let (top, left) = (p * stride_h, q * stride_w);
    let inside = top >= pad_h
        && left >= pad_w
        && top - pad_h + (s.kernel_h - 1) * dil_h < s.height
        && left - pad_w + (s.kernel_w - 1) * dil_w < s.width;
    if inside {
        // The whole window lies in the image: each window row is a strided run of the input.
        let origin = (top - pad_h) * s.width + (left - pad_w);
        let mut rows = patch.chunks_exact_mut(s.kernel_w);
        for ic in 0..s.group_in() {
            let channel = &group_data[ic * plane + origin..];
            for ki in 0..s.kernel_h {
                let Some(target) = rows.next() else {
                    return; // the patch holds every window row; never reached
                };
                let line = &channel[ki * dil_h * s.width..];
                for (slot, &value) in target.iter_mut().zip(line.iter().step_by(dil_w)) {
                    *slot = narrow16(value);
                }
            }
        }
        return;
    }
    // The window's columns inside the image, the same for every window row: kj in [lo, hi).
    let inside_from = |edge: usize| {
        // The first kj with left + kj·dil_w ≥ edge (padded coordinates).
        edge.saturating_sub(left).div_ceil(dil_w).min(s.kernel_w)
    };
    let (lo, hi) = (inside_from(pad_w), inside_from(pad_w + s.width));
    let mut rows = patch.chunks_exact_mut(s.kernel_w);
    for ic in 0..s.group_in() {
        let channel = &group_data[ic * plane..(ic + 1) * plane];
        for ki in 0..s.kernel_h {
            let Some(target) = rows.next() else {
                return; // the patch holds every window row; never reached
            };
            // A padding row wraps to a huge index: zero.
            let row = (top + ki * dil_h).wrapping_sub(pad_h);
            if row >= s.height {
                target.fill(0);
                continue;
            }
            let line = &channel[row * s.width..];
            let (before, rest) = target.split_at_mut(lo);
            let (within, after) = rest.split_at_mut(hi - lo);
            before.fill(0);
            after.fill(0);
            let first = (left + lo * dil_w).saturating_sub(pad_w);
            for (slot, &value) in within
                .iter_mut()
                .zip(line.iter().skip(first).step_by(dil_w))
            {
                *slot = narrow16(value);
            }
        }
    }
}
