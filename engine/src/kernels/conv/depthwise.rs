//! Depthwise conv2d (one input channel per group, any channel multiplier) over the tap plane
//! of `tap_plane.rs`: per input channel the plane is written once, then per output channel the
//! sums of its tap entries are taken over all output positions in one run of vectors, eight
//! outputs per step, and stored straight into the output plane with the bias.
//!
//! Exact under the bounds of cvm-compat §3 for conv2d: data and weights within 8 bits narrow to
//! `i16` exactly, each 32-bit lane of a dot product is `x·w + x'·w'`, and an output's sum of
//! KH · KW such products fits 32 bits.
//!
//! Chosen for the depthwise shapes whose tap plane stays within twice the input channel (plus a
//! constant), except the 3 × 3 stride-2 ones of `depthwise_3x3_s2.rs`
//! (`ConvShape::depthwise_plane`).

use alloc::vec;
use alloc::vec::Vec;

use super::output::{PRODUCT_BOUND, channel_bias, only_bias, store_quad};
use super::tap_plane::{Columns, TapPlane, pairing_in, row_targets, write_tap_plane};
use crate::kernels::elementwise::add_checked;
use crate::kernels::pack::PackedRows;
use crate::kernels::shape::ConvShape;
use crate::kernels::simd::{LANES, Simd};

/// Depthwise convolution (one input channel per group, any channel multiplier): per input
/// channel, the [`TapPlane`] is written from the channel (narrowed to `i16`), then per output
/// channel the sums of its tap entries ([`EntryTaps`]: two taps of a kernel row at adjacent
/// units share one dot product per four outputs) are taken over all output positions in one
/// run of vectors ([`pass`]), and each step's eight sums stored straight into the output plane
/// with the bias. `weights` are the entries' weights ([`pack_depthwise`]), packed at load time
/// when the weights are parameters.
///
/// When a plane row is whole steps long, a step's eight positions are eight consecutive
/// outputs of one output row; those past the row's `out_w` outputs land on outputs of later
/// rows or planes (or past the end of `out`, dropped), which are written after them. When no
/// sum plus the bias can overflow (every sum is at most KH · KW · 2^14 in magnitude), the bias
/// is added as the sums are stored; otherwise each plane is stored without it and the bias
/// added with checks. Short rows, which rounding would lengthen by more than a quarter, are
/// stored into a flat run of rows and their real outputs copied out with the bias
/// ([`copy_rows`]).
///
/// [`EntryTaps`]: super::tap_plane::EntryTaps
/// [`pack_depthwise`]: super::tap_plane::pack_depthwise
pub(super) fn depthwise<S: Simd>(
    shape: &ConvShape,
    geometry: &TapPlane,
    data: &[i32],
    weights: &PackedRows,
    bias: Option<&[i32]>,
    out: &mut [i32],
) -> bool {
    let (s, geometry) = (*shape, *geometry);
    let TapPlane {
        columns,
        row,
        steps,
        ..
    } = geometry;
    let channel_len = s.height * s.width;
    let pixels = s.out_h * s.out_w;
    if pixels == 0 || channel_len == 0 {
        // No input values (W = 0 with enough padding): every sum is empty.
        only_bias(out, bias, pixels);
        return true;
    }
    let total = s.batch * s.out_channels * pixels;
    let total = total.min(out.len());
    let out = &mut out[..total];
    let multiplier = s.group_out();
    let mut plane: Vec<i16> = vec![0; geometry.plane_len()];
    let mut values: Vec<i16> = vec![0; geometry.values_len()];
    let pairing = pairing_in(&s, &geometry);
    let passes = pairing.len().div_ceil(ENTRIES_PER_PASS);
    // The sums of the passes before the last, when there are several.
    let mut sums: Vec<[i32; LANES]> = vec![[0; LANES]; if passes > 1 { steps } else { 0 }];
    // Rows of whole steps go straight into the output; other rows (short ones) into `flat`,
    // whose real outputs are then copied out.
    let direct = row.is_multiple_of(LANES);
    let mut flat: Vec<i32> = vec![0; if direct { 0 } else { steps * LANES }];
    // The index of each step's first position in its target: in the output plane,
    // o = p · row + q goes to p · out_w + q (a row is whole steps, so a step never leaves its
    // row); in `flat`, to o. Computed once per node, by counting: no division.
    let mut next = (0, 0);
    let starts: Vec<usize> = (0..steps)
        .map(|k| {
            if !direct {
                return k * LANES;
            }
            let (p, q) = next;
            next = if q + LANES < row {
                (p, q + LANES)
            } else {
                (p + 1, 0)
            };
            p * s.out_w + q
        })
        .collect();
    let rows = row_targets(&s, &geometry);
    let split = columns == Columns::Split;
    let bound = (s.kernel_h * s.kernel_w) as i64 * PRODUCT_BOUND;
    // Each entry's offset in the plane, and its weights in the channel's row of `weights`.
    let offsets: Vec<usize> = pairing
        .iter()
        .map(|taps| geometry.offset(taps.unit))
        .collect();
    let per_channel = pairing.len();
    let stride = per_channel * 2 * LANES;
    for n in 0..s.batch {
        for c in 0..s.in_channels {
            let from = (n * s.in_channels + c) * channel_len;
            let channel = data.get(from..from + channel_len).unwrap_or_default();
            write_tap_plane::<S>(&s, &geometry, &rows, channel, &mut plane, &mut values);
            for m in 0..multiplier {
                let oc = c * multiplier + m;
                let kernel = weights.values().get(oc * stride..(oc + 1) * stride);
                let (entry_weights, _) = kernel.unwrap_or_default().as_chunks::<{ 2 * LANES }>();
                let (addend, fits) = channel_bias(bias, oc, bound);
                let first = (n * s.out_channels + oc) * pixels;
                let mut sink = Sink {
                    sums: &mut sums,
                    starts: &starts,
                    out: if direct {
                        out.get_mut(first..).unwrap_or_default()
                    } else {
                        &mut flat
                    },
                    addend: if direct && fits { addend } else { 0 },
                };
                run_passes::<S>(split, &offsets, entry_weights, &plane, &mut sink);
                let plane_out = out.get_mut(first..first + pixels).unwrap_or_default();
                let stored = if !direct {
                    copy_rows::<S>(&flat, row, plane_out, s.out_w, addend)
                } else {
                    fits || add_checked::<S>(plane_out, addend)
                };
                if !stored {
                    return false;
                }
            }
        }
    }
    true
}

/// Working memory of the depthwise kernel in bytes for `s` and its tap plane `plane`:
/// `weights_prepared` when the weights were packed at load time.
pub(super) fn scratch_bytes(s: &ConvShape, plane: &TapPlane, weights_prepared: bool) -> u64 {
    // The tap plane and the plane of values it is built from (2 bytes per element); per tap at
    // most 1.5 tap entries, each a pairing (72 bytes) and its offset (8 bytes), and the places
    // of its reads while pairing them (at most 64 bytes), 256 bytes in all; the weights of the
    // entries unless they were packed at load time ([`ConvShape::depthwise_weight_bytes`]); per
    // step its output index (8 bytes), its sums when the entries take several passes (32
    // bytes), and its positions when the rows are not whole steps (32 bytes); per input row its
    // plane unit (8 bytes).
    let taps = (s.kernel_h * s.kernel_w) as u64;
    let per_step =
        8 + if s.tap_entries() > ENTRIES_PER_PASS as u64 {
            32
        } else {
            0
        } + if plane.row.is_multiple_of(LANES) {
            0
        } else {
            32
        };
    ((plane.plane_len() + plane.values_len()) as u64)
        .saturating_mul(2)
        .saturating_add(taps.saturating_mul(256))
        .saturating_add(if weights_prepared {
            0
        } else {
            s.depthwise_weight_bytes()
        })
        .saturating_add((plane.steps as u64).saturating_mul(per_step))
        .saturating_add((s.height as u64).saturating_mul(8))
}

/// Writes the first `width` of every `row` positions of `sums`, plus `addend`, into the rows
/// of `out`, four values per vector, the last four of a row by one more vector that ends with
/// them. Returns false if a sum overflows `i32` (each lane's overflow flag is folded over the
/// rows, as in [`add_checked`]). The vectors of a row are written in straight runs: a
/// plain loop of copies would be compiled to a call of the wasm bulk copy per row.
#[inline(never)]
fn copy_rows<S: Simd>(
    sums: &[i32],
    row: usize,
    out: &mut [i32],
    width: usize,
    addend: i32,
) -> bool {
    let splat = S::splat32(addend);
    let mut overflow = S::splat32(0);
    let mut flags = 0;
    for (p, outputs) in out.chunks_exact_mut(width).enumerate() {
        let Some(source) = sums.get(p * row..p * row + width) else {
            return true; // the sums hold every output row; never reached
        };
        let (quads, tail) = source.as_chunks::<4>();
        let (targets, _) = outputs.as_chunks_mut::<4>();
        let len = quads.len().min(targets.len());
        let (quads, targets) = (&quads[..len], &mut targets[..len]);
        straight_runs!(16, len, |k| {
            let (sum, flag) = S::add_overflow32(S::load32(&quads[k]), splat);
            S::store32(&mut targets[k], sum);
            overflow = S::or32(overflow, flag);
        });
        if tail.is_empty() {
            continue;
        }
        match (source.last_chunk::<4>(), outputs.last_chunk_mut::<4>()) {
            (Some(quad), Some(target)) => {
                let (sum, flag) = S::add_overflow32(S::load32(quad), splat);
                S::store32(target, sum);
                overflow = S::or32(overflow, flag);
            }
            _ => {
                for (slot, &value) in outputs.iter_mut().zip(source) {
                    let sum = value.wrapping_add(addend);
                    flags |= (sum ^ value) & (sum ^ addend);
                    *slot = sum;
                }
            }
        }
    }
    let mut lanes = [0i32; 4];
    S::store32(&mut lanes, overflow);
    lanes.iter().fold(flags, |all, &lane| all | lane) >= 0
}

/// Where the passes over one output plane put their sums: `sums` (one entry per step) for the
/// passes before the last, and for the last `out` (the output plane and the planes after it,
/// or the flat run of short rows), each step's eight outputs from `starts[k]` on, plus `addend`
/// and the earlier passes' sums.
struct Sink<'a> {
    sums: &'a mut [[i32; LANES]],
    starts: &'a [usize],
    out: &'a mut [i32],
    addend: i32,
}

/// The passes over one output plane: the tap entries `ENTRIES_PER_PASS` at a time, the last
/// pass storing into the output; `split` when the plane's columns are [`Columns::Split`].
fn run_passes<S: Simd>(
    split: bool,
    offsets: &[usize],
    weights: &[[i16; 2 * LANES]],
    plane: &[i16],
    sink: &mut Sink<'_>,
) {
    if split {
        passes::<S, Split>(offsets, weights, plane, sink);
    } else {
        passes::<S, Paired>(offsets, weights, plane, sink);
    }
}

/// [`run_passes`] for the columns of `L`.
fn passes<S: Simd, L: Layout<S>>(
    offsets: &[usize],
    weights: &[[i16; 2 * LANES]],
    plane: &[i16],
    sink: &mut Sink<'_>,
) {
    // A kernel of one full pass (3 × 3 at strides 1 and 2) goes straight to it.
    if let Some(group) = Group::<ENTRIES_PER_PASS>::new(offsets, weights) {
        pass::<S, L, ENTRIES_PER_PASS, true, false>(group, plane, sink);
        return;
    }
    let entries = offsets.len().min(weights.len());
    let passes = entries.div_ceil(ENTRIES_PER_PASS);
    let groups = offsets
        .chunks(ENTRIES_PER_PASS)
        .zip(weights.chunks(ENTRIES_PER_PASS));
    for (pass_index, (offsets, weights)) in groups.enumerate() {
        let (add, out) = (pass_index > 0, pass_index + 1 == passes);
        // The passes before the last take full groups.
        if let (Some(group), false) = (Group::<ENTRIES_PER_PASS>::new(offsets, weights), out) {
            if add {
                pass::<S, L, ENTRIES_PER_PASS, false, true>(group, plane, sink);
            } else {
                pass::<S, L, ENTRIES_PER_PASS, false, false>(group, plane, sink);
            }
            continue;
        }
        // The entry count as a constant, so that the loop over entries unrolls.
        macro_rules! last {
            ($($count:literal)*) => {
                $(if let Some(group) = Group::<$count>::new(offsets, weights) {
                    if add {
                        pass::<S, L, $count, true, true>(group, plane, sink);
                    } else {
                        pass::<S, L, $count, true, false>(group, plane, sink);
                    }
                })*
            };
        }
        last!(1 2 3 4 5 6);
    }
}

/// The tap entries of one pass ([`EntryTaps`]): each entry's `i16` offset in the [`TapPlane`]
/// for output position 0, and its weights as [`pack_depthwise`] lays them out: the pair of its
/// even outputs (all outputs unless the columns are [`Columns::Split`]) repeated over eight
/// lanes, then the pair of its odd outputs.
///
/// [`EntryTaps`]: super::tap_plane::EntryTaps
/// [`pack_depthwise`]: super::tap_plane::pack_depthwise
#[derive(Clone, Copy)]
struct Group<'a, const E: usize> {
    offsets: &'a [usize; E],
    weights: &'a [[i16; 2 * LANES]; E],
}

impl<'a, const E: usize> Group<'a, E> {
    /// The group of `offsets` and `weights`, if both hold `E` entries.
    fn new(offsets: &'a [usize], weights: &'a [[i16; 2 * LANES]]) -> Option<Self> {
        Some(Group {
            offsets: offsets.try_into().ok()?,
            weights: weights.try_into().ok()?,
        })
    }

    /// The entries' weight vectors for even (`half` 0) or odd (`half` 1) outputs.
    #[inline(always)]
    fn weights<S: Simd>(&self, half: usize) -> [S::I16x8; E] {
        core::array::from_fn(|e| {
            let (halves, _) = self.weights[e].as_chunks::<LANES>();
            S::load16(&halves[half])
        })
    }
}

/// Entries per [`pass`]: a 3 × 3 kernel (three rows of a pair and a single) in one
/// pass, its six weight vectors in registers.
const ENTRIES_PER_PASS: usize = 6;

/// Steps per run of [`store_runs`]' straight-line code: the sixteen of `straight_runs!(each 16)`.
const RUN: usize = 16;
const _: () = assert!(
    RUN == 16,
    "store_runs unrolls its runs with straight_runs!(each 16)"
);

/// How a pass reads its tap entries from the [`TapPlane`] and takes the sums of a step's eight
/// output positions: [`Paired`] for [`Columns::Direct`] and [`Columns::Pairs`], [`Split`] for
/// [`Columns::Split`]. One [`pass`] and one [`store_runs`] serve both.
trait Layout<S: Simd> {
    /// The lanes of one entry that one step reads.
    type Lanes: 'static;
    /// The weight vectors of the `E` entries of a pass.
    type Weights<const E: usize>;

    /// The plane from the `i16` at `offset` on, one step's lanes at a time.
    fn stream(plane: &[i16], offset: usize) -> &[Self::Lanes];

    /// The weight vectors of `group`'s entries.
    fn weights<const E: usize>(group: Group<'_, E>) -> Self::Weights<E>;

    /// The sums of step `k` of the entries' `streams`: of positions 8k to 8k + 3, then 8k + 4
    /// to 8k + 7.
    fn sums<const E: usize>(
        weights: &Self::Weights<E>,
        streams: &[&[Self::Lanes]; E],
        k: usize,
    ) -> (S::I32x4, S::I32x4);

    /// Stores the sums of step `k` of the entries' `streams`, plus `addend`, into the eight
    /// outputs of `target`.
    fn store<const E: usize>(
        weights: &Self::Weights<E>,
        streams: &[&[Self::Lanes]; E],
        k: usize,
        addend: S::I32x4,
        target: &mut [i32],
    );
}

/// [`Columns::Direct`] and [`Columns::Pairs`]: step k of an entry multiplies the sixteen lanes
/// (eight pairs) at its offset plus 16k: outputs 8k to 8k + 3, then 8k + 4 to 8k + 7.
struct Paired;

impl<S: Simd> Layout<S> for Paired {
    type Lanes = [i16; 2 * LANES];
    type Weights<const E: usize> = [S::I16x8; E];

    #[inline(always)]
    fn stream(plane: &[i16], offset: usize) -> &[[i16; 2 * LANES]] {
        plane.get(offset..).unwrap_or_default().as_chunks().0
    }

    #[inline(always)]
    fn weights<const E: usize>(group: Group<'_, E>) -> [S::I16x8; E] {
        group.weights::<S>(0)
    }

    #[inline(always)]
    fn sums<const E: usize>(
        weights: &[S::I16x8; E],
        streams: &[&[[i16; 2 * LANES]]; E],
        k: usize,
    ) -> (S::I32x4, S::I32x4) {
        let zero = S::splat32(0);
        let (mut lo, mut hi) = (zero, zero);
        for (run, weights) in streams.iter().zip(weights) {
            let (x_lo, x_hi) = S::load16x2(&run[k]);
            lo = S::dot_add(lo, x_lo, *weights);
            hi = S::dot_add(hi, x_hi, *weights);
        }
        (lo, hi)
    }

    /// Each half of the eight outputs in turn, from `addend`: the vectors of one half are
    /// loaded only once the other's sums are stored.
    #[inline(always)]
    fn store<const E: usize>(
        weights: &[S::I16x8; E],
        streams: &[&[[i16; 2 * LANES]]; E],
        k: usize,
        addend: S::I32x4,
        target: &mut [i32],
    ) {
        let (quads, _) = target.as_chunks_mut::<4>();
        for (half, quad) in quads.iter_mut().enumerate() {
            let mut sum = addend;
            for (run, weights) in streams.iter().zip(weights) {
                let (halves, _) = run[k].as_chunks::<LANES>();
                sum = S::dot_add(sum, S::load16(&halves[half]), *weights);
            }
            S::store32(quad, sum);
        }
    }
}

/// [`Columns::Split`]: step k of an entry reads the eight lanes (four pairs) at its offset plus
/// 8k once, and multiplies them by the even outputs' weights (outputs 8k, 8k + 2, 8k + 4,
/// 8k + 6) and by the odd outputs' weights (8k + 1, …, 8k + 7); the two sums are interleaved.
struct Split;

impl<S: Simd> Layout<S> for Split {
    type Lanes = [i16; LANES];
    type Weights<const E: usize> = ([S::I16x8; E], [S::I16x8; E]);

    #[inline(always)]
    fn stream(plane: &[i16], offset: usize) -> &[[i16; LANES]] {
        plane.get(offset..).unwrap_or_default().as_chunks().0
    }

    #[inline(always)]
    fn weights<const E: usize>(group: Group<'_, E>) -> ([S::I16x8; E], [S::I16x8; E]) {
        (group.weights::<S>(0), group.weights::<S>(1))
    }

    #[inline(always)]
    fn sums<const E: usize>(
        (even, odd): &([S::I16x8; E], [S::I16x8; E]),
        streams: &[&[[i16; LANES]]; E],
        k: usize,
    ) -> (S::I32x4, S::I32x4) {
        let zero = S::splat32(0);
        let (mut even_sums, mut odd_sums) = (zero, zero);
        for e in 0..E {
            let x = S::load16(&streams[e][k]);
            even_sums = S::dot_add(even_sums, x, even[e]);
            odd_sums = S::dot_add(odd_sums, x, odd[e]);
        }
        S::interleave32(even_sums, odd_sums)
    }

    #[inline(always)]
    fn store<const E: usize>(
        weights: &([S::I16x8; E], [S::I16x8; E]),
        streams: &[&[[i16; LANES]]; E],
        k: usize,
        addend: S::I32x4,
        target: &mut [i32],
    ) {
        let (lo, hi) = <Self as Layout<S>>::sums(weights, streams, k);
        let (quads, _) = target.as_chunks_mut::<4>();
        if let [first, second] = quads {
            S::store32(first, S::add32(lo, addend));
            S::store32(second, S::add32(hi, addend));
        }
    }
}

/// One pass over the output positions, eight per step: the sums of `E` tap entries laid out as
/// `L` says, put into `sink` ([`Target::put`]) in straight runs of sixteen steps. Exact under
/// the bounds of cvm-compat §3 for conv2d: each lane of a dot product is `x·w + x'·w'` with |x|,
/// |w| ≤ 128, and a sum of KH · KW such products fits 32 bits. When the pass is the only one,
/// the steps that lie within the output go through [`store_runs`] and only the others through
/// [`Target::put`].
#[inline(never)]
fn pass<S: Simd, L: Layout<S>, const E: usize, const OUT: bool, const ADD: bool>(
    group: Group<'_, E>,
    plane: &[i16],
    sink: &mut Sink<'_>,
) {
    // The plane holds every unit the last step reads (`TapPlane::units`), so no stream is ever
    // cut short.
    let streams = group.offsets.map(|offset| L::stream(plane, offset));
    let len = streams
        .iter()
        .map(|run| run.len())
        .fold(sink.starts.len(), usize::min);
    let streams = streams.map(|run| &run[..len]);
    let mut target = Target::<S, OUT, ADD>::new(sink, len);
    let first = if OUT && !ADD {
        let whole = target.whole();
        store_runs::<S, L, E>(
            streams,
            group,
            &target.starts[..whole],
            target.addend,
            target.out,
        )
    } else {
        0
    };
    if first >= target.len {
        return;
    }
    let weights = L::weights(group);
    straight_runs!(16, target.len - first, |j| {
        let k = first + j;
        let (lo, hi) = L::sums(&weights, &streams, k);
        target.put(k, lo, hi);
    });
}

/// The last pass's steps over `starts` (steps whose eight positions all lie within `out`) in
/// runs of sixteen, each step's sums plus `addend` stored at its start with no branch
/// ([`Layout::store`]). Returns the steps it stored. Not inlined, and the weights are loaded
/// afresh for each run: wasmtime checks fuel at the head of every loop with a call that clobbers
/// every vector register, so vectors carried around the loop would live on the stack.
#[inline(never)]
fn store_runs<S: Simd, L: Layout<S>, const E: usize>(
    streams: [&[L::Lanes]; E],
    group: Group<'_, E>,
    starts: &[usize],
    addend: S::I32x4,
    out: &mut [i32],
) -> usize {
    let Some(last) = out.len().checked_sub(LANES) else {
        return 0;
    };
    let fresh = || L::weights(core::hint::black_box(group));
    let step = |weights: &L::Weights<E>,
                runs: &[&[L::Lanes]; E],
                run_starts: &[usize],
                i: usize,
                out: &mut [i32]| {
        // Every step lies within `out`: the clamp never moves it, and spares a branch.
        let at = run_starts[i].min(last);
        if let Some(target) = out.get_mut(at..at + LANES) {
            L::store(weights, runs, i, addend, target);
        }
    };
    in_runs(streams, starts, out, fresh, step)
}

/// The steps of [`store_runs`] over `starts` and as many steps of every
/// stream, in runs of sixteen (`straight_runs!(each 16)`, the streams and starts of a run as
/// arrays of sixteen: constant offsets, no bounds checks), the weights loaded afresh by `fresh`
/// for each run and for the tail; `step` takes the weights, the run's streams and starts, a
/// step's index in the run and `out`. Returns the steps taken.
#[inline(always)]
fn in_runs<T, W, const E: usize>(
    streams: [&[T]; E],
    starts: &[usize],
    out: &mut [i32],
    fresh: impl Fn() -> W,
    step: impl Fn(&W, &[&[T]; E], &[usize], usize, &mut [i32]),
) -> usize {
    let len = streams
        .iter()
        .map(|run| run.len())
        .fold(starts.len(), usize::min);
    let starts = &starts[..len];
    let (start_runs, _) = starts.as_chunks::<RUN>();
    let stream_runs = streams.map(|run| run[..len].as_chunks::<RUN>().0);
    for (r, run_starts) in start_runs.iter().enumerate() {
        let runs = stream_runs.map(|runs| &runs[r][..]);
        let weights = fresh();
        straight_runs!(each 16, |i| {
            step(&weights, &runs, run_starts, i, out);
        });
    }
    let first = start_runs.len() * RUN;
    let tail_starts = &starts[first..];
    let runs = streams.map(|run| &run[first..len]);
    let weights = fresh();
    straight_runs!(16, tail_starts.len(), |i| {
        step(&weights, &runs, tail_starts, i, out);
    });
    len
}

/// A pass's view of its [`Sink`], over its `len` steps: without `OUT` the sums are stored
/// (or, with `ADD`, added) per step; with `OUT` each step's eight outputs are stored into the
/// output plane, plus the addend (and, with `ADD`, the sums of the earlier passes).
struct Target<'a, S: Simd, const OUT: bool, const ADD: bool> {
    sums: &'a mut [[i32; LANES]],
    starts: &'a [usize],
    out: &'a mut [i32],
    addend: S::I32x4,
    len: usize,
}

impl<'a, S: Simd, const OUT: bool, const ADD: bool> Target<'a, S, OUT, ADD> {
    /// Over at most `len` steps: fewer if the sums the pass reads or writes are shorter.
    #[inline(always)]
    fn new(sink: &'a mut Sink<'_>, len: usize) -> Self {
        let len = len.min(sink.starts.len());
        let len = if OUT && !ADD {
            len
        } else {
            len.min(sink.sums.len())
        };
        Target {
            sums: &mut sink.sums[..if OUT && !ADD { 0 } else { len }],
            starts: &sink.starts[..len],
            out: &mut *sink.out,
            addend: S::splat32(sink.addend),
            len,
        }
    }

    /// The leading steps whose eight positions all lie within `out` (all of them without `OUT`).
    fn whole(&self) -> usize {
        // Starts increase with the step; only the last plane's last steps can reach past `out`.
        let within = |start: &usize| start.saturating_add(LANES) <= self.out.len();
        if !OUT || self.starts.last().is_none_or(within) {
            self.len
        } else {
            self.starts.partition_point(within)
        }
    }

    /// Puts the sums `lo` and `hi` of the eight positions of step `k`.
    #[inline(always)]
    fn put(&mut self, k: usize, lo: S::I32x4, hi: S::I32x4) {
        let (mut lo, mut hi) = (lo, hi);
        if ADD {
            let (halves, _) = self.sums[k].as_chunks::<4>();
            lo = S::add32(lo, S::load32(&halves[0]));
            hi = S::add32(hi, S::load32(&halves[1]));
        }
        if !OUT {
            store8::<S>(&mut self.sums[k], lo, hi);
            return;
        }
        // No sum plus the addend overflows (checked by the caller), so the plain addition is
        // exact.
        let (lo, hi) = (S::add32(lo, self.addend), S::add32(hi, self.addend));
        let start = self.starts[k];
        match self
            .out
            .get_mut(start..)
            .and_then(|rest| rest.first_chunk_mut::<LANES>())
        {
            Some(target) => store8::<S>(target, lo, hi),
            None => {
                // The last row of the last plane: positions past the end of `out` are past
                // that row's outputs, and dropped.
                store_quad::<S>(self.out, start, lo);
                store_quad::<S>(self.out, start.wrapping_add(4), hi);
            }
        }
    }
}

/// Stores `lo` and `hi` into the two halves of `target`.
#[inline(always)]
fn store8<S: Simd>(target: &mut [i32; LANES], lo: S::I32x4, hi: S::I32x4) {
    let (halves, _) = target.as_chunks_mut::<4>();
    if let [first, second] = halves {
        S::store32(first, lo);
        S::store32(second, hi);
    }
}
