//! `conv2d` kernels: grouped convolution as blocks of im2col patches times packed weights
//! ([`super::gemm`]), and a direct vector kernel for depthwise convolution.
//!
//! Both produce the raw sums `Σ x·w` (no bias) into an NCHW output; `conv2d` adds the bias with
//! checked arithmetic afterwards. Exactness rests on the bounds of spec 001 for conv2d: data and
//! weights within 8 bits and an output precision of at most 32 bits (see [`super::gemm`]), so
//! 32-bit lanes hold every partial sum exactly.

use alloc::vec;
use alloc::vec::Vec;

use super::gemm::{self, LANES, PackOrder, PackedRows, narrow16};
use super::simd::Simd;
use super::{copy_fits, scatter_row};

/// Output pixels per im2col block: the patch block (`BLOCK` × padded depth `i16`) stays in
/// the first-level cache next to four rows of weights.
pub const BLOCK: usize = 16;

/// Geometry of one convolution (NCHW data, OIHW weights), validated by the operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvShape {
    /// N.
    pub batch: usize,
    /// C.
    pub in_channels: usize,
    /// H.
    pub height: usize,
    /// W.
    pub width: usize,
    /// OC.
    pub out_channels: usize,
    /// Groups (divides C and OC).
    pub groups: usize,
    /// KH.
    pub kernel_h: usize,
    /// KW.
    pub kernel_w: usize,
    /// Output height.
    pub out_h: usize,
    /// Output width.
    pub out_w: usize,
    /// (SH, SW), each ≥ 1.
    pub strides: [usize; 2],
    /// (PH, PW).
    pub padding: [usize; 2],
    /// (DH, DW), each ≥ 1.
    pub dilation: [usize; 2],
}

impl ConvShape {
    /// Input channels per group.
    pub fn group_in(&self) -> usize {
        self.in_channels / self.groups
    }

    /// Output channels per group.
    pub fn group_out(&self) -> usize {
        self.out_channels / self.groups
    }

    /// Reduction length per output: C/groups · KH · KW.
    pub fn depth(&self) -> usize {
        self.group_in() * self.kernel_h * self.kernel_w
    }

    /// Whether the depthwise kernel applies: one input channel per group, and padding small
    /// enough that a padded copy of one channel stays within twice the channel's size (plus a
    /// constant). Other depthwise shapes use the im2col kernel.
    pub fn uses_depthwise(&self) -> bool {
        self.group_in() == 1 && copy_fits(self.depthwise_plane_len(), self.height, self.width)
    }

    /// Whether the im2col kernel gathers from a padded channels-last copy of the input (each
    /// window row one contiguous run): when the padding keeps that copy within twice the input
    /// (plus a constant). Otherwise it gathers from the input with bounds checks.
    pub fn uses_channels_last(&self) -> bool {
        !self.uses_depthwise() && copy_fits(self.padded_plane(), self.height, self.width)
    }

    /// Elements of one zero-padded input plane.
    fn padded_plane(&self) -> u64 {
        ((self.height + 2 * self.padding[0]) as u64)
            .saturating_mul((self.width + 2 * self.padding[1]) as u64)
    }

    /// The order the im2col kernel needs its weight rows in.
    pub fn pack_order(&self) -> PackOrder {
        if self.uses_channels_last() {
            PackOrder::ChannelsLast {
                channels: self.group_in(),
                taps: self.kernel_h * self.kernel_w,
            }
        } else {
            PackOrder::Source
        }
    }

    /// Length of one phase row of the depthwise kernel: every output vector (rounded up to
    /// whole vectors) plus the largest tap offset.
    fn phase_row_len(&self) -> usize {
        let max_offset = (self.kernel_w - 1) * self.dilation[1] / self.strides[1];
        // One more than the reads need: every padded column x < W + 2PW lands at x / SW,
        // which is at most out_w + max_offset.
        self.out_w.div_ceil(LANES) * LANES + max_offset + 1
    }

    /// Elements of one phase of the depthwise kernel's plane: the padded rows, each one phase
    /// row long.
    fn phase_len(&self) -> usize {
        (self.height + 2 * self.padding[0]) * self.phase_row_len()
    }

    /// Tap entries of the depthwise kernel ([`TapEntry`]): two taps of a kernel row share one
    /// when they sit at adjacent positions of the phase-split plane, any other tap takes one
    /// alone. Computed without enumerating the taps: column kj lies in phase (kj · DW) mod SW
    /// at position ⌊kj · DW / SW⌋, so when DW divides SW the taps of each of the SW / DW phases
    /// used are adjacent (n of them make ⌈n / 2⌉ entries), and otherwise no two are.
    pub fn depthwise_entries(&self) -> u64 {
        let [_, stride_w] = self.strides;
        let dil_w = self.dilation[1];
        let (kernel_h, kernel_w) = (self.kernel_h as u64, self.kernel_w as u64);
        let per_row = if stride_w.is_multiple_of(dil_w) {
            // Column kj is in phase class kj mod m; class r holds ⌊(KW − 1 − r) / m⌋ + 1 taps.
            let m = (stride_w / dil_w) as u64;
            (0..m.min(kernel_w))
                .map(|r| ((kernel_w - 1 - r) / m + 1).div_ceil(2))
                .sum()
        } else {
            kernel_w
        };
        per_row.saturating_mul(kernel_h)
    }

    /// `i16` elements of the depthwise kernel's padded, phase-split channel plane.
    pub fn depthwise_plane_len(&self) -> u64 {
        let padded_h = (self.height + 2 * self.padding[0]) as u64;
        padded_h
            .saturating_mul(self.strides[1] as u64)
            .saturating_mul(self.phase_row_len() as u64)
    }

    /// Working memory of [`conv2d`] in bytes; `weights_prepared` when the weights were packed
    /// at load time.
    pub fn scratch_bytes(&self, weights_prepared: bool) -> u64 {
        if self.uses_depthwise() {
            // The phase-split plane in whole vectors and one vector more (16 bytes each), its
            // plane of neighbour pairs (32 bytes per vector), per tap its position and index
            // (16 bytes) and an entry (at most 32 bytes), and one output vector.
            let taps = (self.kernel_h * self.kernel_w) as u64;
            let vectors = self.depthwise_plane_len().div_ceil(LANES as u64);
            return vectors
                .saturating_add(1)
                .saturating_mul(16)
                .saturating_add(vectors.saturating_mul(32))
                .saturating_add(taps.saturating_mul(48))
                .saturating_add(32);
        }
        let mut patches = PackedRows::bytes(BLOCK as u64, self.depth() as u64);
        if self.uses_channels_last() {
            let copy = self.padded_plane().saturating_mul(self.group_in() as u64);
            patches = patches.saturating_add(copy.saturating_mul(2));
        }
        let weights = if weights_prepared {
            0
        } else {
            PackedRows::bytes(self.out_channels as u64, self.depth() as u64)
        };
        patches.saturating_add(weights)
    }
}

/// Packs conv2d weights (OC rows of C/groups · KH · KW values) for [`conv2d`].
pub fn pack_weights(shape: &ConvShape, weights: &[i32]) -> PackedRows {
    PackedRows::pack_in(
        weights,
        shape.out_channels,
        shape.depth(),
        shape.pack_order(),
    )
}

/// Writes `Σ_ic Σ_ki Σ_kj pad(X)[n, g·C/groups + ic, p·SH − PH + ki·DH, q·SW − PW + kj·DW] ·
/// W[oc, ic, ki, kj]` into `out[n, oc, p, q]` for every output position.
///
/// `prepared` is the packing of `weights` by [`pack_weights`], if the weights are constant.
pub fn conv2d<S: Simd>(
    shape: &ConvShape,
    data: &[i32],
    weights: &[i32],
    prepared: Option<&PackedRows>,
    out: &mut [i32],
) {
    if shape.uses_depthwise() {
        depthwise::<S>(shape, data, weights, out);
    } else {
        let packed;
        let weights = match prepared {
            Some(weights) => weights,
            None => {
                packed = pack_weights(shape, weights);
                &packed
            }
        };
        if shape.uses_channels_last() {
            im2col_channels_last::<S>(shape, data, weights, out);
        } else {
            im2col::<S>(shape, data, weights, out);
        }
    }
}

/// Grouped convolution through a zero-padded channels-last copy of each image's group: a window
/// row (KW taps of C/groups channels) is then one contiguous run when DW = 1, and KW runs of
/// C/groups values otherwise, copied without bounds checks. Weights are packed in the same
/// (row, column, channel) order ([`PackOrder::ChannelsLast`]).
fn im2col_channels_last<S: Simd>(
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
    // A pointwise convolution whose rows need no padding reads its patches in place: pixel
    // rows of the copy are packed rows already.
    let in_place = s.kernel_h == 1
        && s.kernel_w == 1
        && s.strides == [1, 1]
        && s.padding == [0, 0]
        && stride == group_in;
    let mut patches: Vec<i16> = if in_place {
        Vec::new()
    } else {
        vec![0; BLOCK * stride]
    };
    let run = s.kernel_w * group_in;
    for n in 0..s.batch {
        for g in 0..s.groups {
            let group_data =
                &data[(n * s.in_channels + g * group_in) * plane..][..group_in * plane];
            fill_channels_last(&s, group_data, padded_w, &mut copy);
            let group_weights =
                &weights.values()[g * group_out * stride..(g + 1) * group_out * stride];
            let out_base = (n * s.out_channels + g * group_out) * pixels;
            if in_place {
                multiply_rows::<S>(&s, &copy, stride, group_weights, &mut out[out_base..]);
            } else {
                multiply_blocks::<S>(
                    &s,
                    &mut patches,
                    group_weights,
                    &mut out[out_base..],
                    |p, q, patch| {
                        gather_channels_last(
                            &s,
                            &copy,
                            padded_w,
                            p,
                            q,
                            &mut patch[..run * s.kernel_h],
                        );
                    },
                );
            }
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

/// The dot products of a block of output pixels starting at pixel `start` (`len` packed
/// patch rows of `stride` lanes in `patches`) with the group's weight rows, written to `out`
/// (the group's output planes, OC/groups × OH·OW).
fn multiply_block<S: Simd>(
    s: &ConvShape,
    patches: &[i16],
    len: usize,
    stride: usize,
    group_weights: &[i16],
    out: &mut [i32],
    start: usize,
) {
    gemm::dot_products::<S>(
        patches,
        len,
        group_weights,
        s.group_out(),
        stride,
        gemm::Strided {
            data: out.get_mut(start..).unwrap_or_default(),
            row_step: 1,
            column_step: s.out_h * s.out_w,
        },
    );
}

/// One group of one image whose patches are the rows of `rows` (one packed row of `stride`
/// lanes per output pixel), a block of [`BLOCK`] pixels at a time.
fn multiply_rows<S: Simd>(
    s: &ConvShape,
    rows: &[i16],
    stride: usize,
    group_weights: &[i16],
    out: &mut [i32],
) {
    let pixels = s.out_h * s.out_w;
    for start in (0..pixels).step_by(BLOCK) {
        let len = BLOCK.min(pixels - start);
        let Some(block) = rows.get(start * stride..(start + len) * stride) else {
            return; // the copy holds a row per pixel; never reached
        };
        multiply_block::<S>(s, block, len, stride, group_weights, out, start);
    }
}

/// One group of one image: for each block of [`BLOCK`] output pixels, `gather` writes each
/// pixel's patch (a row of `patches`), then the block is multiplied ([`multiply_block`]).
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
        multiply_block::<S>(
            s,
            &patches[..len * stride],
            len,
            stride,
            group_weights,
            out,
            start,
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
fn im2col<S: Simd>(shape: &ConvShape, data: &[i32], weights: &PackedRows, out: &mut [i32]) {
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
    let mut r = 0;
    for ic in 0..s.group_in() {
        let channel = &group_data[ic * plane..(ic + 1) * plane];
        for ki in 0..s.kernel_h {
            let row = (top + ki * dil_h).wrapping_sub(pad_h);
            for kj in 0..s.kernel_w {
                let col = (left + kj * dil_w).wrapping_sub(pad_w);
                // Padding rows and columns wrap to huge indices: zero.
                patch[r] = if row < s.height && col < s.width {
                    narrow16(channel[row * s.width + col])
                } else {
                    0
                };
                r += 1;
            }
        }
    }
}

/// Depthwise convolution (one input channel per group, any channel multiplier): per input
/// channel, a zero-padded `i16` copy split into SW column phases, so that every tap of eight
/// consecutive outputs is one contiguous vector; then a plane of neighbour pairs of that copy
/// (`(v[i], v[i + 1])` at position i), so that two taps at adjacent positions (neighbouring
/// columns of a kernel row) are one vector of pairs, multiplied by their two weights with one
/// dot product per four outputs ([`TapEntry`]). Eight outputs accumulate in two registers.
fn depthwise<S: Simd>(shape: &ConvShape, data: &[i32], weights: &[i32], out: &mut [i32]) {
    let s = *shape;
    let stride_w = s.strides[1];
    let [pad_h, pad_w] = s.padding;
    let row_len = s.phase_row_len();
    let phase_len = s.phase_len();
    let plane = s.height * s.width;
    let pixels = s.out_h * s.out_w;
    let multiplier = s.group_out();
    let taps = s.kernel_h * s.kernel_w;
    // The phases rounded up to whole vectors, and one vector more: the pair plane reads one
    // lane past each vector.
    let vectors = (phase_len * stride_w).div_ceil(LANES);
    let mut phases: Vec<i16> = vec![0; (vectors + 1) * LANES];
    let mut pair_plane: Vec<i16> = vec![0; vectors * 2 * LANES];
    let pairing = depthwise_pairing(&s);
    let mut entries: Vec<TapEntry<S::I16x8>> = Vec::with_capacity(pairing.len());
    for n in 0..s.batch {
        for c in 0..s.in_channels {
            // Padded column x (x = col + PW) goes to phase x % SW, position x / SW.
            let channel =
                &data[(n * s.in_channels + c) * plane..(n * s.in_channels + c + 1) * plane];
            for (h, line) in channel.chunks_exact(s.width.max(1)).enumerate() {
                let row_offset = (h + pad_h) * row_len;
                scatter_row(
                    line,
                    pad_w,
                    stride_w,
                    phase_len,
                    row_offset,
                    &mut phases,
                    narrow16,
                    narrow_run::<S>,
                );
            }
            neighbour_pairs::<S>(&phases, &mut pair_plane);
            for m in 0..multiplier {
                let oc = c * multiplier + m;
                let kernel = &weights[oc * taps..(oc + 1) * taps];
                let weight = |tap: usize| kernel.get(tap).map_or(0, |&w| narrow16(w));
                entries.clear();
                entries.extend(pairing.iter().map(|&(offset, first, second)| TapEntry {
                    offset,
                    // A tap alone takes weight 0 for its neighbour.
                    weights: S::pair16(weight(first), second.map_or(0, weight)),
                }));
                let out_plane = &mut out[(n * s.out_channels + oc) * pixels..][..pixels];
                depthwise_plane::<S>(&s, row_len, &entries, &pair_plane, out_plane);
            }
        }
    }
}

/// The tap entries of the depthwise kernel for `s`, in order of position: (position of the
/// first tap relative to an output vector's first element in the phase-split plane, its index
/// in the kernel (ki · KW + kj), the index of the tap at the next position if any). Two taps
/// at adjacent positions share an entry; positions are distinct, and two are adjacent only
/// within one kernel row (a phase row is longer than any row's reach). As many entries as
/// [`ConvShape::depthwise_entries`].
pub fn depthwise_pairing(s: &ConvShape) -> Vec<(usize, usize, Option<usize>)> {
    let row_len = s.phase_row_len();
    let phase_len = s.phase_len();
    let [dil_h, dil_w] = s.dilation;
    let stride_w = s.strides[1];
    // Computed once per node: no division in the loops.
    let mut order: Vec<(usize, usize)> = (0..s.kernel_h * s.kernel_w)
        .map(|tap| {
            let (ki, kj) = (tap / s.kernel_w, tap % s.kernel_w);
            let x = kj * dil_w;
            let offset = (x % stride_w) * phase_len + ki * dil_h * row_len + x / stride_w;
            (offset, tap)
        })
        .collect();
    order.sort_unstable();
    let mut pairing = Vec::with_capacity(order.len());
    let mut rest = order.as_slice();
    while let Some((&(offset, tap), after)) = rest.split_first() {
        match after.split_first() {
            Some((&(next, next_tap), later)) if next == offset + 1 => {
                pairing.push((offset, tap, Some(next_tap)));
                rest = later;
            }
            _ => {
                pairing.push((offset, tap, None));
                rest = after;
            }
        }
    }
    pairing
}

/// `target[i] = narrow16(values[i])` over the common length, eight values per step with the
/// saturating narrowing of [`Simd::narrow32`] (no constant vectors, nothing to reload per step).
fn narrow_run<S: Simd>(values: &[i32], target: &mut [i16]) {
    let n = values.len().min(target.len());
    let (octets, value_tail) = values[..n].as_chunks::<LANES>();
    let (targets, target_tail) = target[..n].as_chunks_mut::<LANES>();
    for (source, octet) in octets.iter().zip(targets.iter_mut()) {
        let (halves, _) = source.as_chunks::<4>();
        S::store16(
            octet,
            S::narrow32(S::load32(&halves[0]), S::load32(&halves[1])),
        );
    }
    for (slot, &value) in target_tail.iter_mut().zip(value_tail) {
        *slot = narrow16(value);
    }
}

/// Writes `(values[i], values[i + 1])` at `pairs[2i..2i + 2]` for every i of `pairs`' length.
fn neighbour_pairs<S: Simd>(values: &[i16], pairs: &mut [i16]) {
    let (at, _) = values.as_chunks::<LANES>();
    let (next, _) = values.get(1..).unwrap_or_default().as_chunks::<LANES>();
    let (targets, _) = pairs.as_chunks_mut::<{ 2 * LANES }>();
    for ((at, next), target) in at.iter().zip(next).zip(targets) {
        let (lo, hi) = S::interleave16(S::load16(at), S::load16(next));
        let (halves, _) = target.as_chunks_mut::<LANES>();
        if let [first, second] = halves {
            S::store16(first, lo);
            S::store16(second, hi);
        }
    }
}

/// One or two taps of a depthwise kernel: the position of the first relative to an output
/// vector's first element in the phase-split plane (the second is at the next position), and
/// their weights interleaved (`[w_first, w_second]` in every pair of lanes; `w_second` = 0
/// for a single tap).
#[derive(Clone, Copy)]
struct TapEntry<V> {
    offset: usize,
    weights: V,
}

/// Entries per pass of [`depthwise_rows`]: a 3 × 3 kernel (three rows of a pair and a single)
/// in one pass, its six weight vectors in registers.
const ENTRIES_PER_PASS: usize = 6;

/// Writes one output plane of a depthwise channel: its tap entries in passes of up to
/// [`ENTRIES_PER_PASS`], the first pass storing its sums and later ones adding to them.
#[inline(never)]
fn depthwise_plane<S: Simd>(
    s: &ConvShape,
    row_len: usize,
    entries: &[TapEntry<S::I16x8>],
    pair_plane: &[i16],
    out_plane: &mut [i32],
) {
    for (pass, group) in entries.chunks(ENTRIES_PER_PASS).enumerate() {
        let add = pass > 0;
        // The entry count as a constant, so that the loop over entries unrolls.
        macro_rules! fixed {
            ($($count:literal)*) => {
                $(if let Ok(group) = <&[_; $count]>::try_from(group) {
                    depthwise_rows::<S, $count>(s, row_len, group, pair_plane, out_plane, add);
                })*
            };
        }
        fixed!(1 2 3 4 5 6);
    }
}

/// One pass of [`depthwise_plane`] over the output rows, eight outputs at a time: the sums of
/// `E` tap entries, stored (or added to the outputs when `add`). Exact under the bounds of
/// [`super::gemm`]: each lane of a dot product is `x·w + x'·w'` with |x|, |w| ≤ 127.
#[inline(always)]
fn depthwise_rows<S: Simd, const E: usize>(
    s: &ConvShape,
    row_len: usize,
    entries: &[TapEntry<S::I16x8>; E],
    pair_plane: &[i16],
    out_plane: &mut [i32],
    add: bool,
) {
    let vectors = s.out_w.div_ceil(LANES);
    let zero = S::splat32(0);
    // The pairs an entry reads for the output vectors of one row: consecutive output vectors
    // read consecutive, disjoint runs of eight pairs (sixteen lanes), `span` lanes in all,
    // from the entry's start in the pair plane plus the row's. A phase row holds every one of
    // them (`ConvShape::phase_row_len`), so no run is ever missing or cut short.
    let span = 2 * LANES * vectors;
    let starts = entries.map(|entry| 2 * entry.offset);
    let weights = entries.map(|entry| entry.weights);
    let row_step = 2 * s.strides[0] * row_len;
    let mut row_start = 0;
    for out_row in out_plane.chunks_exact_mut(s.out_w.max(1)) {
        let runs = starts.map(|start| {
            let first = row_start + start;
            let lanes = pair_plane.get(first..first + span).unwrap_or_default();
            lanes.as_chunks::<{ 2 * LANES }>().0
        });
        row_start += row_step;
        let len = runs.iter().map(|run| run.len()).min().unwrap_or(0);
        let taps: [_; E] = core::array::from_fn(|e| (&runs[e][..len], weights[e]));
        for (vector, outputs) in (0..len).zip(out_row.chunks_mut(LANES)) {
            let (mut lo, mut hi) = (zero, zero);
            for (run, weights) in &taps {
                let (x_lo, x_hi) = S::load16x2(&run[vector]);
                lo = S::dot_add(lo, x_lo, *weights);
                hi = S::dot_add(hi, x_hi, *weights);
            }
            let mut sums = [[0i32; 4]; 2];
            if add {
                let mut previous = [0i32; LANES];
                previous[..outputs.len()].copy_from_slice(outputs);
                let (halves, _) = previous.as_chunks::<4>();
                lo = S::add32(lo, S::load32(&halves[0]));
                hi = S::add32(hi, S::load32(&halves[1]));
            }
            if let ([first, second], []) = outputs.as_chunks_mut::<4>() {
                S::store32(first, lo);
                S::store32(second, hi);
            } else {
                // The last, partial vector of a row.
                S::store32(&mut sums[0], lo);
                S::store32(&mut sums[1], hi);
                outputs.copy_from_slice(&sums.as_flattened()[..outputs.len()]);
            }
        }
    }
}
