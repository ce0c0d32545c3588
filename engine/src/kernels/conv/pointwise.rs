//! Pointwise conv2d (1 × 1 kernel, stride 1, no padding) with pixels in the vector lanes.
//!
//! In NCHW the pixels of a channel are contiguous, so a pointwise convolution is, per group, the
//! product of the weights (OC/groups × C/groups) and the input planes (C/groups × H·W). The
//! input channels are taken in pairs: for every block of eight pixels, the pair (`x[2t][p]`,
//! `x[2t + 1][p]`) of each pixel sits in one 32-bit lane, and one dot product ([`Simd::dot_add`])
//! with the weight pair (`w[oc][2t]`, `w[oc][2t + 1]`) repeated in every lane adds both channels'
//! terms for four pixels. A tile keeps four output channels × eight pixels in eight
//! accumulators, walks the channel pairs in straight runs, and stores its sums (plus the bias)
//! as vectors straight into the output planes: no reduction across lanes and no scatter.
//!
//! Exactness rests on the bounds of cvm-compat §3 for conv2d (see `gemm.rs`): data and weights
//! within 8 bits, so each lane of a dot product is at most 2 · 2^14 in magnitude, and the output
//! precision of at most 32 bits bounds every partial sum.
//!
//! Chosen for 1 × 1 kernels at stride 1 without padding over more than one input channel per
//! group (`ConvShape::uses_pointwise`); one channel per group goes to `depthwise.rs`.

use alloc::vec;
use alloc::vec::Vec;

use super::output::only_bias;
use crate::kernels::pack::{PackedRows, narrow16};
use crate::kernels::shape::ConvShape;
use crate::kernels::simd::{LANES, Simd};

/// Pixels per block (and per tile): two vectors of four lanes.
pub const PIXELS: usize = 2 * 4;

/// Output channels per tile.
const CHANNELS: usize = 4;

/// The channel pairs of one block of eight pixels: sixteen `i16`, pixel-major.
type Block = [i16; 2 * PIXELS];

/// Bytes of the plane of channel pairs [`pointwise`] builds for one group of one image.
pub fn plane_bytes(shape: &ConvShape) -> u64 {
    let blocks = (shape.height * shape.width).div_ceil(PIXELS) as u64;
    let pairs = shape.group_in().div_ceil(2) as u64;
    blocks
        .saturating_mul(pairs)
        .saturating_mul(core::mem::size_of::<Block>() as u64)
}

/// Writes `Σ_ic X[n, g·C/groups + ic, p] · W[oc, ic] (+ bias[oc])` into `out[n, oc, p]` for
/// every pixel p, with the weights packed in rows of C/groups values ([`PackedRows`], zero
/// padded). Returns false if adding a bias overflowed `i32`.
pub fn pointwise<S: Simd>(
    s: &ConvShape,
    data: &[i32],
    weights: &PackedRows,
    bias: Option<&[i32]>,
    out: &mut [i32],
) -> bool {
    let (group_in, group_out) = (s.group_in(), s.group_out());
    let pixels = s.height * s.width;
    let pairs = group_in.div_ceil(2);
    let blocks = pixels.div_ceil(PIXELS);
    let stride = weights.stride();
    if pairs == 0 || stride < 2 * pairs {
        // No input channels: every sum is empty.
        only_bias(out, bias, pixels);
        return true;
    }
    if pixels == 0 || group_out == 0 {
        return true;
    }
    let mut plane: Vec<Block> = vec![[0; 2 * PIXELS]; blocks * pairs];
    for n in 0..s.batch {
        for g in 0..s.groups {
            let first_in = (n * s.in_channels + g * group_in) * pixels;
            let Some(group_data) = data.get(first_in..first_in + group_in * pixels) else {
                return true; // callers pass the whole input; never reached
            };
            write_pairs::<S>(group_data, pixels, pairs, &mut plane);
            let first_out = (n * s.out_channels + g * group_out) * pixels;
            let Some(planes) = out.get_mut(first_out..first_out + group_out * pixels) else {
                return true; // callers pass the whole output; never reached
            };
            let rows = &weights.values()[g * group_out * stride..(g + 1) * group_out * stride];
            let (rows, _) = rows.as_chunks::<2>();
            let row = |oc: usize| &rows[oc * (stride / 2)..][..pairs];
            let bias_of = |oc: usize| {
                bias.and_then(|bias| bias.get(g * group_out + oc))
                    .copied()
                    .unwrap_or(0)
            };
            let mut oc = 0;
            while oc < group_out {
                let (count, channel_planes) =
                    (CHANNELS.min(group_out - oc), &mut planes[oc * pixels..]);
                let fits = if count == CHANNELS {
                    channels::<S, CHANNELS>(
                        &plane,
                        pairs,
                        core::array::from_fn(|r| row(oc + r)),
                        core::array::from_fn(|r| bias_of(oc + r)),
                        channel_planes,
                        pixels,
                    )
                } else {
                    (0..count).all(|r| {
                        channels::<S, 1>(
                            &plane,
                            pairs,
                            [row(oc + r)],
                            [bias_of(oc + r)],
                            &mut channel_planes[r * pixels..],
                            pixels,
                        )
                    })
                };
                if !fits {
                    return false;
                }
                oc += count;
            }
        }
    }
    true
}

/// Writes the channel pairs of one group of one image (`group_data`: C/groups planes of
/// `pixels`) into `plane`: block b, pair t at `plane[b · pairs + t]`, lanes 2i and 2i + 1 the
/// values of channels 2t and 2t + 1 at pixel 8b + i, narrowed to `i16`. A missing last channel
/// (odd C/groups) and the pixels past the last are zeros.
#[inline(never)]
fn write_pairs<S: Simd>(group_data: &[i32], pixels: usize, pairs: usize, plane: &mut [Block]) {
    let channels = group_data.len() / pixels.max(1);
    let zeros = [0i32; PIXELS];
    for t in 0..pairs {
        let channel = |c: usize| group_data.get(c * pixels..(c + 1) * pixels);
        let (first, second) = (channel(2 * t).unwrap_or_default(), channel(2 * t + 1));
        let second = if 2 * t + 1 < channels {
            second.unwrap_or_default()
        } else {
            &[]
        };
        let (firsts, _) = first.as_chunks::<PIXELS>();
        let (seconds, _) = second.as_chunks::<PIXELS>();
        let targets = plane.iter_mut().skip(t).step_by(pairs);
        for (b, target) in targets.enumerate() {
            if b < firsts.len() {
                let a = &firsts[b];
                let c = seconds.get(b).unwrap_or(&zeros);
                let narrow = |v: &[i32; PIXELS]| {
                    let (halves, _) = v.as_chunks::<4>();
                    S::narrow32(S::load32(&halves[0]), S::load32(&halves[1]))
                };
                let (lo, hi) = S::interleave16(narrow(a), narrow(c));
                let (halves, _) = target.as_chunks_mut::<LANES>();
                S::store16(&mut halves[0], lo);
                S::store16(&mut halves[1], hi);
            } else {
                // The last, partial block: lane 2i from the first channel, 2i + 1 from the
                // second, at pixel 8b + i.
                let start = b * PIXELS;
                *target = core::array::from_fn(|lane| {
                    let source = if lane % 2 == 0 { first } else { second };
                    source.get(start + lane / 2).map_or(0, |&v| narrow16(v))
                });
            }
        }
    }
}

/// `R` output channels (weight pair rows `rows`, each `pairs` long, and their biases) over every
/// block of `plane` (the channel pairs of eight pixels each, `pairs` per block): sums stored into
/// the channels' planes (`planes`, `pixels` apart), one [`tile`] per block. Returns false if a
/// bias addition overflowed. Not inlined, and one call for all blocks: a call per tile would
/// pass its operands through memory in wasm.
#[inline(never)]
fn channels<S: Simd, const R: usize>(
    plane: &[Block],
    pairs: usize,
    rows: [&[[i16; 2]]; R],
    biases: [i32; R],
    planes: &mut [i32],
    pixels: usize,
) -> bool {
    let mut fits = true;
    for (b, block) in plane.chunks_exact(pairs.max(1)).enumerate() {
        fits &= tile::<S, R>(block, rows, biases, planes, pixels, b * PIXELS);
    }
    fits
}

/// One tile: the `R` output channels of [`channels`] × the eight pixels of `block` (its channel
/// pairs) from pixel `first`. Returns false if a bias addition overflowed.
#[inline(always)]
fn tile<S: Simd, const R: usize>(
    block: &[Block],
    rows: [&[[i16; 2]]; R],
    biases: [i32; R],
    planes: &mut [i32],
    pixels: usize,
    first: usize,
) -> bool {
    let zero = S::splat32(0);
    let mut sums = [[zero; 2]; R];
    let len = rows
        .iter()
        .map(|row| row.len())
        .fold(block.len(), usize::min);
    let (block, rows) = (&block[..len], rows.map(|row| &row[..len]));
    // Four channel pairs at a time: one load of each row's four weight pairs, each pair then
    // repeated over the lanes by a shuffle ([`Simd::pair_lane`]; a load-and-splat per pair is a
    // scalar load and two shuffles in wasmtime's code), then the pairs past the last four.
    //
    // The pairs run in straight runs of sixteen with an exit test before each pair. The tests
    // keep the compiler from loading the data of four pairs at once: that would hold eight data
    // vectors next to the eight sums and four weight vectors, more than the sixteen vector
    // registers, and Cranelift (which compiles the wasm as ordered) would keep the sums on the
    // stack.
    let (groups, _) = block.as_chunks::<4>();
    let quads = rows.map(|row| row.as_flattened().as_chunks::<{ 2 * 4 }>().0);
    let whole = quads.iter().map(|q| q.len()).fold(groups.len(), usize::min);
    let (groups, quads) = (&groups[..whole], quads.map(|q| &q[..whole]));
    let grouped = 4 * whole;
    let mut weights = [S::splat16(0); R];
    let mut start = 0;
    'runs: loop {
        macro_rules! pair {
            ($i:literal) => {{
                let t = start + $i;
                if t >= grouped {
                    break 'runs;
                }
                if $i % 4 == 0 {
                    weights = core::array::from_fn(|r| S::load16(&quads[r][t / 4]));
                }
                let (lo, hi) = S::load16x2(&groups[t / 4][$i % 4]);
                for r in 0..R {
                    let weights = S::pair_lane::<{ $i % 4 }>(weights[r]);
                    sums[r][0] = S::dot_add(sums[r][0], lo, weights);
                    sums[r][1] = S::dot_add(sums[r][1], hi, weights);
                }
            }};
        }
        pair!(0);
        pair!(1);
        pair!(2);
        pair!(3);
        pair!(4);
        pair!(5);
        pair!(6);
        pair!(7);
        pair!(8);
        pair!(9);
        pair!(10);
        pair!(11);
        pair!(12);
        pair!(13);
        pair!(14);
        pair!(15);
        start += 16;
    }
    let done = 4 * whole;
    straight_runs!(16, len - done, |j| {
        let t = done + j;
        let (lo, hi) = S::load16x2(&block[t]);
        for r in 0..R {
            let weights = S::splat_pair(&rows[r][t]);
            sums[r][0] = S::dot_add(sums[r][0], lo, weights);
            sums[r][1] = S::dot_add(sums[r][1], hi, weights);
        }
    });
    let count = PIXELS.min(pixels.saturating_sub(first));
    let mut overflow = zero;
    for r in 0..R {
        let bias = S::splat32(biases[r]);
        let (lo, lo_flags) = S::add_overflow32(sums[r][0], bias);
        let (hi, hi_flags) = S::add_overflow32(sums[r][1], bias);
        overflow = S::or32(overflow, S::or32(lo_flags, hi_flags));
        let at = r * pixels + first;
        if let Some(target) = planes
            .get_mut(at..)
            .and_then(|s| s.first_chunk_mut::<PIXELS>())
            && count == PIXELS
        {
            let (halves, _) = target.as_chunks_mut::<4>();
            S::store32(&mut halves[0], lo);
            S::store32(&mut halves[1], hi);
        } else if let Some(target) = planes.get_mut(at..at + count) {
            // The last, partial block of a plane.
            let mut values = [[0i32; 4]; 2];
            S::store32(&mut values[0], lo);
            S::store32(&mut values[1], hi);
            target.copy_from_slice(&values.as_flattened()[..count]);
        }
    }
    let mut lanes = [0i32; 4];
    S::store32(&mut lanes, overflow);
    lanes.iter().fold(0, |all, &lane| all | lane) >= 0
}
