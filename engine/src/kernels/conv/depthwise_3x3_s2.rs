//! Depthwise conv2d with a 3 × 3 kernel at stride 2, padding 1 and dilation 1 (the
//! convolutions of MobileNet that halve the image), straight from the input: per kernel row one
//! step narrows eight input columns to `i16` and takes two dot products for four outputs of a
//! row, and the two output rows that share an input row take their steps together.
//!
//! Exact under the bounds of spec 001 for conv2d: data and weights within 8 bits narrow to
//! `i16` exactly, each 32-bit lane of a dot product is `x·w + x'·w'`, and an output's sum of
//! nine such products fits 32 bits.
//!
//! Chosen for every such shape with one input channel per group
//! (`ConvShape::uses_depthwise_3x3_s2`), before the tap-plane kernel of `depthwise.rs`.

use alloc::vec;
use alloc::vec::Vec;

use super::output::{PRODUCT_BOUND, channel_bias, only_bias, store_quad};
use crate::kernels::elementwise::add_checked;
use crate::kernels::pack::PackedRows;
use crate::kernels::shape::ConvShape;
use crate::kernels::simd::Simd;

/// The input columns one step of [`depthwise_3x3_s2`] reads from a row: the columns of four
/// outputs.
const STEP_COLUMNS: usize = 8;

/// Geometry of [`depthwise_3x3_s2`] for one shape.
#[derive(Clone, Copy, Debug)]
struct Halving {
    /// W.
    width: usize,
    /// H.
    height: usize,
    /// Output rows.
    out_h: usize,
    /// Output row length.
    out_w: usize,
    /// Steps per output row, four outputs each: ⌈OW / 4⌉.
    steps: usize,
    /// Whether the last steps of a pair of rows are one ([`Taps::rows_paired`]): when a row's
    /// last step holds two outputs (OW mod 4 = 2).
    joined: bool,
}

impl Halving {
    fn new(s: &ConvShape) -> Self {
        Halving {
            width: s.width,
            height: s.height,
            out_h: s.out_h,
            out_w: s.out_w,
            steps: s.out_w.div_ceil(4),
            joined: s.out_w % 4 == 2,
        }
    }

    /// Values a row is read over: eight per step. The last step's may reach past the row's
    /// end, by at most 7.
    fn span(&self) -> usize {
        self.steps.saturating_mul(STEP_COLUMNS)
    }

    /// Values read from the start of a channel: every row's span.
    fn reach(&self) -> usize {
        (self.height.saturating_sub(1))
            .saturating_mul(self.width)
            .saturating_add(self.span())
    }

    /// Working memory in bytes: a row of zeros (the padding rows) and a copy of a channel with
    /// room for the reads past its end.
    fn scratch_bytes(&self) -> u64 {
        (self.span() as u64)
            .saturating_add(self.reach() as u64)
            .saturating_mul(4)
    }
}

/// Working memory of [`depthwise_3x3_s2`] in bytes for `s`, without the weights.
pub(super) fn scratch_bytes(s: &ConvShape) -> u64 {
    Halving::new(s).scratch_bytes()
}

/// Depthwise 3 × 3 convolution at stride 2 with padding 1 ([`ConvShape::uses_depthwise_3x3_s2`]),
/// straight from the input: output (p, q) reads padded rows 2p to 2p + 2 and padded columns 2q to
/// 2q + 2, that is input columns 2q − 1, 2q and 2q + 1.
///
/// One step takes four outputs of a row. Per kernel row it narrows input columns 8j to 8j + 7 of
/// the row to eight `i16`, the pairs (2q, 2q + 1) of outputs q = 4j to 4j + 3, and takes two dot
/// products ([`Simd::dot_add`]): with the pair (w1, w2), the taps at columns 2q and 2q + 1 of
/// output q, in lane q − 4j; with the pair (0, w0), the tap at column 2q + 1 of output q + 1, in
/// the same lane, which [`Simd::shift_in32`] moves up one lane, the last lane of the step before
/// (zero at the row's start: the left padding) entering the first. Output rows are taken in
/// pairs, two pairs per iteration ([`halve_plane`]), with the loop over planes in a function of
/// its own per step count ([`halve_planes`]). The two rows of a pair take their steps in turn,
/// the input row they share narrowed once ([`Taps::rows_paired`]). The last step of a row keeps
/// only the row's columns (the right padding, and the next row's values, are zeroed); the upper
/// row's stores only the row's outputs, the lower row's four, those past the row landing on
/// outputs stored after them. When a row's last step holds two outputs (OW mod 4 = 2), the last
/// steps of a pair are one, each row's in a half of the octets ([`Taps::joined_step`]): a step
/// less per pair of rows. Rows of the padding, above and below, are a row of zeros.
///
/// Exact under the bounds of the module documentation: data and weights within 8 bits narrow to
/// `i16` exactly, each lane of a dot product is `x·w + x'·w'`, and the nine taps' sum of an
/// output fits 32 bits. When no sum plus the bias can overflow (every sum is at most
/// 9 · 2^14 in magnitude) the bias is added as the sums are stored; otherwise after, with checks.
/// `weights` are the source rows of nine taps ([`PackOrder::Source`]).
///
/// [`PackOrder::Source`]: crate::kernels::pack::PackOrder::Source
pub(super) fn depthwise_3x3_s2<S: Simd>(
    shape: &ConvShape,
    data: &[i32],
    weights: &PackedRows,
    bias: Option<&[i32]>,
    out: &mut [i32],
) -> bool {
    let s = *shape;
    let halving = Halving::new(&s);
    let channel_len = s.height * s.width;
    let pixels = s.out_h * s.out_w;
    if pixels == 0 || channel_len == 0 {
        // No input values (W = 0 or H = 0): every sum is empty.
        only_bias(out, bias, pixels);
        return true;
    }
    // The lanes of a row's last step that hold the row's columns: from 1 to 8, as
    // 8 · (steps − 1) < W (every step before the last lies within the row). With at most four,
    // the row's last outputs are in lanes 0 and 1, which read lanes 0 to 3 only: the mask keeps
    // the same columns of each half, for the last steps of two rows joined into one
    // ([`Taps::rows_paired`]).
    let kept = s
        .width
        .saturating_sub(halving.steps.saturating_sub(1).saturating_mul(STEP_COLUMNS));
    let mask: [i16; STEP_COLUMNS] = core::array::from_fn(|lane| {
        let column = if kept <= 4 { lane % 4 } else { lane };
        -i16::from(column < kept)
    });
    let planes = HalvedPlanes {
        shape: &s,
        halving,
        data,
        weights,
        bias,
        mask,
    };
    // The steps of a row as a constant for rows of up to 32 outputs, so that they are
    // straight-line code.
    macro_rules! planes {
        ($($steps:literal)*) => {
            match (halving.steps, halving.joined) {
                $(
                    ($steps, false) => halve_planes::<S, $steps, false>(&planes, out),
                    ($steps, true) => halve_planes::<S, $steps, true>(&planes, out),
                )*
                (_, false) => halve_planes::<S, 0, false>(&planes, out),
                (_, true) => halve_planes::<S, 0, true>(&planes, out),
            }
        };
    }
    planes!(1 2 3 4 5 6 7 8)
}

/// What [`halve_planes`] reads: the operands of [`depthwise_3x3_s2`], its geometry and the mask of
/// a row's last step.
struct HalvedPlanes<'a> {
    shape: &'a ConvShape,
    halving: Halving,
    data: &'a [i32],
    weights: &'a PackedRows,
    bias: Option<&'a [i32]>,
    mask: [i16; STEP_COLUMNS],
}

/// Every output plane of [`depthwise_3x3_s2`] ([`halve_plane`]), with `STEPS` steps per row (0:
/// any number), the last steps of a pair of rows one if `JOINED` ([`Halving::joined`]). Not
/// inlined: its loops do not share conv2d's registers.
#[inline(never)]
fn halve_planes<S: Simd, const STEPS: usize, const JOINED: bool>(
    planes: &HalvedPlanes<'_>,
    out: &mut [i32],
) -> bool {
    let HalvedPlanes {
        shape: &s,
        halving,
        data,
        weights,
        bias,
        mask,
    } = *planes;
    let channel_len = s.height * s.width;
    let pixels = s.out_h * s.out_w;
    let zeros: Vec<i32> = vec![0; halving.span()];
    let mut copy: Vec<i32> = Vec::new();
    let reach = halving.reach();
    let bound = 9 * PRODUCT_BOUND;
    let stride = weights.stride();
    let multiplier = s.group_out();
    for n in 0..s.batch {
        for c in 0..s.in_channels {
            let from = (n * s.in_channels + c) * channel_len;
            let channel = match data.get(from..from + reach) {
                Some(values) => values,
                None => {
                    // The last rows of the last channel, whose reads reach past the data: a
                    // copy with zeros after it.
                    copy.clear();
                    copy.extend_from_slice(data.get(from..from + channel_len).unwrap_or_default());
                    copy.resize(reach, 0);
                    &copy
                }
            };
            for m in 0..multiplier {
                let oc = c * multiplier + m;
                let taps = weights
                    .values()
                    .get(oc * stride..)
                    .and_then(|row| row.first_chunk::<9>())
                    .copied()
                    .unwrap_or_default();
                let (addend, fits) = channel_bias(bias, oc, bound);
                let first = (n * s.out_channels + oc) * pixels;
                let rest = out.get_mut(first..).unwrap_or_default();
                let added = if fits { addend } else { 0 };
                let tap_weights = TapWeights::new::<S>(&taps, added, &mask);
                halve_plane::<S, STEPS, JOINED>(&halving, channel, &zeros, &tap_weights, rest);
                let plane = out.get_mut(first..first + pixels).unwrap_or_default();
                if !fits && !add_checked::<S>(plane, addend) {
                    return false;
                }
            }
        }
    }
    true
}

/// One output plane of [`depthwise_3x3_s2`], two pairs of output rows per iteration, the two
/// rows of a pair taken together ([`Taps::rows_paired`]), top to bottom so that a row's last step
/// may store past the row's end onto outputs written after it. A last row without a pair goes
/// alone ([`Taps::row_within`]). Rows of the padding (above the first input row, and below the
/// last when H is odd) are a row of zeros. The last rows of the last plane, whose last step would
/// store past the end of `out`, go through [`halve_row_at`].
///
/// `channel` holds the input channel and at least [`Halving::reach`] values; `zeros` at least
/// [`Halving::span`]; `out` the plane and every plane after it. `STEPS` is the number of steps of
/// a row when not 0, so that a row's steps are straight-line code with constant offsets; 0 takes
/// any number. `JOINED`: the last steps of a pair of rows are one ([`Halving::joined`]). Inlined into the loop over planes
/// ([`halve_planes`]): a call per plane costs more than the registers the two loops share.
#[inline(always)]
fn halve_plane<S: Simd, const STEPS: usize, const JOINED: bool>(
    halving: &Halving,
    channel: &[i32],
    zeros: &[i32],
    weights: &TapWeights,
    out: &mut [i32],
) {
    let Halving {
        width,
        height,
        out_h,
        out_w,
        steps,
        ..
    } = *halving;
    let steps = if STEPS > 0 { STEPS } else { steps };
    // The values a row is read over, and the outputs its steps store: constants with `STEPS`.
    // Index arithmetic wraps instead of being checked: every figure is within the sizes of the
    // validated shape, and every index is checked or clamped into its slice.
    let span = steps.wrapping_mul(STEP_COLUMNS);
    let stored = steps.wrapping_mul(4);
    let (Some(last_in), Some(last_out), Some(zeros)) = (
        channel.len().checked_sub(span),
        out.len().checked_sub(stored),
        zeros.get(..span),
    ) else {
        // Fewer values than a row's span; never reached (see `Halving::reach`).
        for p in 0..out_h {
            halve_row_at::<S, STEPS>(halving, channel, zeros, weights, p, out);
        }
        return;
    };
    // The rows before `end` store their last step within `out`: all of them but in the last
    // plane, whose last rows may not.
    let end = if out_h.wrapping_sub(1).wrapping_mul(out_w) <= last_out {
        out_h
    } else {
        (last_out / out_w.max(1)).wrapping_add(1).min(out_h)
    };
    // Outputs stored by a pair of rows: row p whole, and the steps of row p + 1. `last_pair` is
    // their last start in `out` (any pair before `end` fits).
    let pair_len = out_w.wrapping_add(stored);
    let last_pair = last_out.saturating_sub(out_w);
    let zeros: &[[i32; STEP_COLUMNS]] = zeros.as_chunks().0;
    // Input row r from `start` = r · W, or zeros for a row of the padding (r = H, or the row above
    // the first, which wraps to usize::MAX), chosen without a branch. The clamp never moves a
    // start (every input row lies within `channel` with its span): it spares the lookup an
    // `Option`.
    let row_in = |start: usize| -> &[[i32; STEP_COLUMNS]] {
        let start = start.min(last_in);
        channel[start..start + span].as_chunks().0
    };
    let row = |r: usize, start: usize| if r < height { row_in(start) } else { zeros };
    // Output row from `at`, clamped as the input rows are.
    #[inline(always)]
    fn quads(out: &mut [i32], at: usize, last: usize, stored: usize) -> &mut [[i32; 4]] {
        let at = at.min(last);
        out[at..at + stored].as_chunks_mut().0
    }
    let double_width = width.wrapping_mul(2);
    let mut p = 0;
    let mut r = usize::MAX; // input row 2p − 1, and its start
    let mut start = r.wrapping_mul(width);
    let mut at = 0; // output row p
    // Output rows p and p + 1, from input rows 2p − 1 to 2p + 3. Rows 2p to 2p + 2 lie within
    // the input (2p + 2 ≤ 2 · (OH − 1) ≤ H − 1): only the first and the last can be padding.
    // The first row of the next pair is the last of this one: `top` carries it.
    let mut top = zeros;
    macro_rules! pair {
        ($taps:expr) => {{
            let a = top;
            let b = row_in(start.wrapping_add(width));
            let c = row_in(start.wrapping_add(double_width));
            let d = row_in(start.wrapping_add(double_width).wrapping_add(width));
            let e = row(
                r.wrapping_add(4),
                start.wrapping_add(double_width.wrapping_mul(2)),
            );
            // Rows p and p + 1, clamped as the input rows are.
            let rows = {
                let at = at.min(last_pair);
                &mut out[at..at + pair_len]
            };
            $taps.rows_paired::<JOINED>([a, b, c, d, e], rows, out_w);
            top = e;
            p += 2;
            r = r.wrapping_add(4);
            start = start.wrapping_add(double_width.wrapping_mul(2));
            at = at.wrapping_add(out_w.wrapping_mul(2));
        }};
    }
    // Two pairs per iteration while they last, then one. The weights are loaded afresh for each
    // iteration: wasmtime checks fuel at the head of every loop with a call that clobbers every
    // vector register, so vectors carried around the loop would be stored and reloaded.
    while p + 3 < end {
        let taps = Taps::<S>::load(core::hint::black_box(weights));
        pair!(taps);
        pair!(taps);
    }
    if p + 1 < end {
        let taps = Taps::<S>::load(core::hint::black_box(weights));
        pair!(taps);
    }
    if p < end {
        let taps = Taps::<S>::load(core::hint::black_box(weights));
        let rows = [
            top,
            row_in(start.wrapping_add(width)),
            row(r.wrapping_add(2), start.wrapping_add(double_width)),
        ];
        taps.row_within(rows, quads(out, at, last_out, stored));
    }
    for p in end..out_h {
        halve_row_at::<S, STEPS>(halving, channel, zeros.as_flattened(), weights, p, out);
    }
}

/// Output row `p` of [`halve_plane`], its last step storing only the lanes within `out`
/// ([`Taps::row_at`]): for the last rows of the last plane.
#[inline(never)]
fn halve_row_at<S: Simd, const STEPS: usize>(
    halving: &Halving,
    channel: &[i32],
    zeros: &[i32],
    weights: &TapWeights,
    p: usize,
    out: &mut [i32],
) {
    let Halving {
        width,
        height,
        out_w,
        steps,
        ..
    } = *halving;
    let span = if STEPS > 0 { STEPS } else { steps }.wrapping_mul(STEP_COLUMNS);
    let row = |r: usize| -> Option<&[[i32; STEP_COLUMNS]]> {
        let values = if r < height {
            let from = r.wrapping_mul(width);
            channel.get(from..from.wrapping_add(span))
        } else {
            zeros.get(..span)
        };
        values.map(|values| values.as_chunks().0)
    };
    // Input rows 2p − 1 to 2p + 1 (wrapping: the padding row above the first is usize::MAX).
    let top = p.wrapping_mul(2).wrapping_sub(1);
    let rows = (row(top), row(top.wrapping_add(1)), row(top.wrapping_add(2)));
    if let (Some(a), Some(b), Some(c)) = rows {
        let taps = Taps::<S>::load(weights);
        taps.row_at([a, b, c], p.wrapping_mul(out_w), out);
    }
}

/// The vectors of [`Taps`] in memory, from which they are loaded for every pair of rows.
struct TapWeights {
    pairs: [[i16; STEP_COLUMNS]; 3],
    singles: [[i16; STEP_COLUMNS]; 3],
    addend: [i32; 4],
    mask: [i16; STEP_COLUMNS],
}

impl TapWeights {
    /// Per kernel row of `taps`, the pair (w1, w2) and the single (0, w0), each repeated four
    /// times; `addend` four times; and `mask`.
    #[inline(always)]
    fn new<S: Simd>(taps: &[i16; 9], addend: i32, mask: &[i16; STEP_COLUMNS]) -> Self {
        let mut weights = TapWeights {
            pairs: [[0; STEP_COLUMNS]; 3],
            singles: [[0; STEP_COLUMNS]; 3],
            addend: [addend; 4],
            mask: *mask,
        };
        for (ki, kernel_row) in taps.chunks_exact(3).enumerate().take(3) {
            if let [w0, w1, w2] = *kernel_row {
                S::store16(&mut weights.pairs[ki], S::pair16(w1, w2));
                S::store16(&mut weights.singles[ki], S::pair16(0, w0));
            }
        }
        weights
    }
}

/// What [`halve_plane`] hands each output row: per kernel row the weights of the pair
/// (2q, 2q + 1) of output q and of the tap at 2q + 1 of output q + 1, the bias, and the mask of
/// a row's last step.
#[derive(Clone, Copy)]
struct Taps<'a, S: Simd> {
    weights: [(S::I16x8, S::I16x8); 3],
    addend: S::I32x4,
    /// Loaded where it is used, once per row: kept in a register across the steps it would
    /// take one from them.
    mask: &'a [i16; STEP_COLUMNS],
}

impl<'a, S: Simd> Taps<'a, S> {
    #[inline(always)]
    fn load(weights: &'a TapWeights) -> Self {
        let weights_of = |ki: usize| {
            (
                S::load16(&weights.pairs[ki]),
                S::load16(&weights.singles[ki]),
            )
        };
        Taps {
            weights: [weights_of(0), weights_of(1), weights_of(2)],
            addend: S::load32(&weights.addend),
            mask: &weights.mask,
        }
    }

    /// One octet of a row narrowed to `i16`; `masked` keeps only the lanes of the mask (the
    /// row's last step).
    #[inline(always)]
    fn narrow(&self, octet: &[i32; STEP_COLUMNS], masked: bool) -> S::I16x8 {
        let (halves, _) = octet.as_chunks::<4>();
        let x = S::narrow32(S::load32(&halves[0]), S::load32(&halves[1]));
        if masked {
            S::and16(x, S::load16(self.mask))
        } else {
            x
        }
    }

    /// The four sums of one step from the narrowed octets of the three rows it reads; `carry`
    /// holds the step before's taps for the next output (zeros at the row's start: the left
    /// padding) and takes this step's.
    #[inline(always)]
    fn sums(&self, octets: [S::I16x8; 3], carry: &mut S::I32x4) -> S::I32x4 {
        let (mut near, mut far) = (self.addend, S::splat32(0));
        for (x, &(pair, single)) in octets.into_iter().zip(&self.weights) {
            near = S::dot_add(near, x, pair);
            far = S::dot_add(far, x, single);
        }
        let sums = S::add32(near, S::shift_in32(*carry, far));
        *carry = far;
        sums
    }

    /// [`Self::sums`] of one octet of each of the three rows a step reads.
    #[inline(always)]
    fn step(
        &self,
        octets: [&[i32; STEP_COLUMNS]; 3],
        carry: &mut S::I32x4,
        masked: bool,
    ) -> S::I32x4 {
        self.sums(octets.map(|octet| self.narrow(octet, masked)), carry)
    }

    /// The step of [`Self::rows_paired`] that takes the last two outputs of two rows: the first
    /// half of each octet from the upper row's reads, the second from the lower row's, masked;
    /// each half's taps for its next output shifted in with the carry of its own row
    /// ([`Simd::join_in32`]).
    #[inline(always)]
    fn joined_step(
        &self,
        upper: [&[i32; STEP_COLUMNS]; 3],
        lower: [&[i32; STEP_COLUMNS]; 3],
        carries: (S::I32x4, S::I32x4),
    ) -> S::I32x4 {
        let (mut near, mut far) = (self.addend, S::splat32(0));
        for ((up, low), &(pair, single)) in upper.iter().zip(lower).zip(&self.weights) {
            let (up, _) = up.as_chunks::<4>();
            let (low, _) = low.as_chunks::<4>();
            let x = S::and16(
                S::narrow32(S::load32(&up[0]), S::load32(&low[0])),
                S::load16(self.mask),
            );
            near = S::dot_add(near, x, pair);
            far = S::dot_add(far, x, single);
        }
        S::add32(near, S::join_in32(carries.0, carries.1, far))
    }

    /// Two output rows taken together: the steps but the last of both rows, a step of the upper
    /// row then the same step of the lower ([`Self::sums`]), the input row they share narrowed
    /// once; then the last steps, likewise, or if `JOINED` as one step for both rows' last two
    /// outputs ([`Self::joined_step`]). The upper row's last step stores only the row's outputs
    /// (the lower row's first are stored already); the lower row's stores four, those past the
    /// row landing on outputs stored after them. `inputs` are the five padded rows the pair reads
    /// (the upper row reads the first three, the lower the last three), each one octet per step;
    /// `rows` holds the upper output row (`out_w` outputs) and the lower row's steps.
    #[inline(always)]
    fn rows_paired<const JOINED: bool>(
        &self,
        inputs: [&[[i32; STEP_COLUMNS]]; 5],
        rows: &mut [i32],
        out_w: usize,
    ) {
        let [a, b, c, d, e] = inputs;
        let len = [b, c, d, e].iter().fold(a.len(), |len, r| len.min(r.len()));
        let Some(whole) = len.checked_sub(1) else {
            return;
        };
        let Some((up, low)) = rows.split_at_mut_checked(out_w) else {
            return; // `rows` holds the upper row; never reached
        };
        // The upper row's quads (`whole` of them, or `len` when a step ends the row), then what
        // follows them: two outputs when joined. The lower row's quads: `len`.
        let (up_quads, up_rest) = up.as_chunks_mut::<4>();
        let (Some((up_steps, up_last)), Some((low_steps, [low_last, ..]))) = (
            up_quads.split_at_mut_checked(whole),
            low.as_chunks_mut::<4>()
                .0
                .get_mut(..len)
                .map(|quads| quads.split_at_mut(whole)),
        ) else {
            return; // rows of more than 4 · whole outputs; never reached
        };
        let (mut up_carry, mut low_carry) = (S::splat32(0), S::splat32(0));
        straight_runs!(16, whole, |j| {
            let shared = self.narrow(&c[j], false);
            let upper = [self.narrow(&a[j], false), self.narrow(&b[j], false), shared];
            S::store32(&mut up_steps[j], self.sums(upper, &mut up_carry));
            let lower = [shared, self.narrow(&d[j], false), self.narrow(&e[j], false)];
            S::store32(&mut low_steps[j], self.sums(lower, &mut low_carry));
        });
        if JOINED {
            let sums = self.joined_step(
                [&a[whole], &b[whole], &c[whole]],
                [&c[whole], &d[whole], &e[whole]],
                (up_carry, low_carry),
            );
            if let (Some(up_pair), Some(low_pair)) = (
                up_rest.first_chunk_mut::<2>(),
                low_last.first_chunk_mut::<2>(),
            ) {
                S::store_pair32::<0>(up_pair, sums);
                S::store_pair32::<1>(low_pair, sums);
            }
            return;
        }
        let shared = self.narrow(&c[whole], true);
        let upper = [
            self.narrow(&a[whole], true),
            self.narrow(&b[whole], true),
            shared,
        ];
        let upper = self.sums(upper, &mut up_carry);
        // The upper row's last step: whole, or only the row's outputs when the row ends within it
        // (the lower row's first outputs are stored already).
        if let Some(quad) = up_last.first_mut() {
            S::store32(quad, upper);
        } else if let Some((pair, third)) = up_rest.split_first_chunk_mut::<2>() {
            S::store_pair32::<0>(pair, upper);
            if let Some(third) = third.first_mut() {
                S::store_lane32::<2>(third, upper);
            }
        } else if let Some(first) = up_rest.first_mut() {
            S::store_lane32::<0>(first, upper);
        }
        let lower = [
            shared,
            self.narrow(&d[whole], true),
            self.narrow(&e[whole], true),
        ];
        S::store32(low_last, self.sums(lower, &mut low_carry));
    }

    /// An output row stored whole into `quads`, four outputs per step, from the three padded
    /// rows it reads, each one octet per step: as many steps as the shortest of the four.
    #[inline(always)]
    fn row_within(&self, inputs: [&[[i32; STEP_COLUMNS]]; 3], quads: &mut [[i32; 4]]) {
        let [a, b, c] = inputs;
        let len = quads.len().min(a.len()).min(b.len()).min(c.len());
        let Some(whole) = len.checked_sub(1) else {
            return;
        };
        let sums = self.leading_steps(inputs, whole, quads);
        S::store32(&mut quads[whole], sums);
    }

    /// The output row from `at` in `out`, as [`Self::row_within`] but the last step stores only
    /// its lanes within `out`: those past the row land on the next row or plane, stored later;
    /// only past the end of `out` are they dropped.
    #[inline(always)]
    fn row_at(&self, inputs: [&[[i32; STEP_COLUMNS]]; 3], at: usize, out: &mut [i32]) {
        let [a, b, c] = inputs;
        let len = a.len().min(b.len()).min(c.len());
        let Some(whole) = len.checked_sub(1) else {
            return;
        };
        let quads = out
            .get_mut(at..)
            .unwrap_or_default()
            .as_chunks_mut::<4>()
            .0
            .get_mut(..whole);
        let Some(quads) = quads else {
            return; // an output row holds at least `whole` quads; never reached
        };
        let sums = self.leading_steps(inputs, whole, quads);
        store_quad::<S>(out, at.wrapping_add(whole.wrapping_mul(4)), sums);
    }

    /// The `whole` steps of an output row before its last, stored into `quads`, from the three
    /// padded rows it reads; returns the sums of the last step (which reads step `whole`), for
    /// the caller to store. Shared by [`Self::row_within`] and [`Self::row_at`].
    #[inline(always)]
    fn leading_steps(
        &self,
        [a, b, c]: [&[[i32; STEP_COLUMNS]]; 3],
        whole: usize,
        quads: &mut [[i32; 4]],
    ) -> S::I32x4 {
        let mut carry = S::splat32(0);
        straight_runs!(16, whole, |j| {
            S::store32(
                &mut quads[j],
                self.step([&a[j], &b[j], &c[j]], &mut carry, false),
            );
        });
        self.step([&a[whole], &b[whole], &c[whole]], &mut carry, true)
    }
}
