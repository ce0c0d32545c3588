//! Vectorised integer kernels behind the heaviest operators, written once over a small 128-bit
//! vector trait ([`simd::Simd`]) with three backends: wasm SIMD128 (the consensus build),
//! x86-64 SSE2 (the native build) and portable scalar lanes (other targets, and the reference
//! the tests compare the others with).
//!
//! Every kernel computes exactly the formula of its operator; `engine/tests/kernels.rs` checks
//! each one bit for bit against a plain implementation of the formula, on randomized shapes
//! with odd sizes and tails, under both the native and the portable backend. Each kernel states
//! the precision bound it relies on.

/// Runs `$step` for `$k` = 0, 1, …, `$len` − 1 in straight runs of `$run` steps (64 or 16),
/// each step guarded by a comparison with the length, with a loop only over runs.
///
/// Why: under wasmtime's fuel metering every loop iteration ends in a fuel check whose
/// out-of-fuel call clobbers all vector registers, which would force the vectors a loop keeps
/// (accumulators, weights) through the stack on every iteration; within a straight run they
/// stay in registers. Vectors loaded before the loop are still carried around it, through the
/// stack: a kernel that needs them in registers loads them afresh within each run.
///
/// `straight_runs!(each 16, |i| step)` runs `$step` for `$i` = 0, 1, …, 15, with no comparison:
/// one run over sixteen steps known to exist (whose indices into arrays of sixteen then need no
/// bounds check).
macro_rules! straight_runs {
    (64, $len:expr, |$k:ident| $step:block) => {
        straight_runs!(@runs $len, $k, $step, 64,
            0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
            32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59
            60 61 62 63)
    };
    (16, $len:expr, |$k:ident| $step:block) => {
        straight_runs!(@runs $len, $k, $step, 16, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    };
    (each 16, |$i:ident| $step:block) => {
        straight_runs!(@each $i, $step, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    };
    (@each $i:ident, $step:block, $($n:literal)*) => {
        $({
            let $i: usize = $n;
            $step
        })*
    };
    (@runs $len:expr, $k:ident, $step:block, $run:literal, $($i:literal)*) => {{
        let len: usize = $len;
        let mut start = 0usize;
        'runs: loop {
            $(
                let $k = start + $i;
                if $k >= len {
                    break 'runs;
                }
                $step
            )*
            start += $run;
        }
    }};
}

pub mod conv;
pub mod gemm;
pub mod pointwise;
pub mod pool;
pub mod simd;
pub mod wide;

use simd::Simd;

/// Elements per iteration of [`map`]: eight 128-bit vectors.
pub const MAP_BLOCK: usize = 32;

/// `out[i] = f(input[i])` over the common length, in blocks of [`MAP_BLOCK`] elements whose
/// inner loop the compiler unrolls and vectorises completely, then the tail.
///
/// Why blocks: under wasmtime's fuel metering every loop iteration ends in a fuel check, a call
/// that clobbers all vector registers, so vector constants used in the loop (a clipping bound,
/// zero) are reloaded from the stack every iteration. With eight vectors per iteration that
/// cost is shared eight ways instead of borne by every vector.
#[inline(never)]
pub fn map(out: &mut [i32], input: &[i32], f: impl Fn(i32) -> i32) {
    let n = out.len().min(input.len());
    let (out_blocks, out_tail) = out[..n].as_chunks_mut::<MAP_BLOCK>();
    let (in_blocks, in_tail) = input[..n].as_chunks::<MAP_BLOCK>();
    for (y, x) in out_blocks.iter_mut().zip(in_blocks) {
        for (y, &x) in y.iter_mut().zip(x) {
            *y = f(x);
        }
    }
    for (y, &x) in out_tail.iter_mut().zip(in_tail) {
        *y = f(x);
    }
}

/// `values[i] += addend(i)` over `values`, eight vectors at a time as [`map`]: `block(b, q)` is
/// the vector of addends for quad `q` of block `b`, `addend(i)` the addend of value `i` (for the
/// tail). Returns false if any sum overflows `i32` (the values are then unspecified): each
/// lane's overflow flag, (s ^ a) & (s ^ b) for the sum s of a and b (negative exactly when the
/// sum's sign differs from both operands'), is folded over the whole slice, so that the loop has
/// no branch per element.
#[inline(always)]
fn add_all<S: Simd>(
    values: &mut [i32],
    block: impl Fn(usize, usize) -> S::I32x4,
    addend: impl Fn(usize) -> i32,
) -> bool {
    let (blocks, tail) = values.as_chunks_mut::<MAP_BLOCK>();
    let done = blocks.len() * MAP_BLOCK;
    let mut overflow = S::splat32(0);
    for (b, values) in blocks.iter_mut().enumerate() {
        let (quads, _) = values.as_chunks_mut::<4>();
        for (q, quad) in quads.iter_mut().enumerate() {
            let (sum, flag) = S::add_overflow32(S::load32(quad), block(b, q));
            S::store32(quad, sum);
            overflow = S::or32(overflow, flag);
        }
    }
    let mut lanes = [0i32; 4];
    S::store32(&mut lanes, overflow);
    let mut flags = lanes.iter().fold(0, |all, &lane| all | lane);
    for (i, value) in tail.iter_mut().enumerate() {
        let other = addend(done + i);
        let sum = value.wrapping_add(other);
        flags |= (sum ^ *value) & (sum ^ other);
        *value = sum;
    }
    flags >= 0
}

/// `values[i] += addend` for every `i`, as [`add_all`]: false if a sum overflows `i32`.
#[inline(never)]
pub fn add_checked<S: Simd>(values: &mut [i32], addend: i32) -> bool {
    let splat = S::splat32(addend);
    add_all::<S>(values, |_, _| splat, |_| addend)
}

/// `values[i] += addends[i]` over the common length, as [`add_all`]: false if a sum overflows
/// `i32`.
#[inline(never)]
pub fn add_each_checked<S: Simd>(values: &mut [i32], addends: &[i32]) -> bool {
    let n = values.len().min(addends.len());
    let (addend_blocks, _) = addends[..n].as_chunks::<MAP_BLOCK>();
    add_all::<S>(
        &mut values[..n],
        |b, q| S::load32(&addend_blocks[b].as_chunks::<4>().0[q]),
        |i| addends[i],
    )
}

/// Whether a padded working copy of `copy` elements may replace reading a plane of `height` ×
/// `width` elements in place: at most twice the plane plus a constant. Kernels that would need
/// more (padding far larger than the input) take a path without the copy, so a model's scratch
/// memory stays proportional to its tensors.
fn copy_fits(copy: u64, height: usize, width: usize) -> bool {
    copy <= 2 * (height * width) as u64 + 4096
}

/// Copies one input row into its phase rows, converted: padded column x = col + `pad` goes to
/// phase x % `stride` (at `phases[phase · phase_len ..]`) and position `row_offset` + x / `stride`.
/// Division-free per element: each phase is a strided walk of the row. At stride 1 the row is
/// one contiguous run, converted whole by `convert_run` (which the caller may vectorise); at
/// other strides each value is converted by `convert`, the same conversion.
#[allow(clippy::too_many_arguments)] // the row's geometry, and one conversion in two forms
fn scatter_row<T: Copy>(
    line: &[i32],
    pad: usize,
    stride: usize,
    phase_len: usize,
    row_offset: usize,
    phases: &mut [T],
    convert: impl Fn(i32) -> T,
    convert_run: impl Fn(&[i32], &mut [T]),
) {
    if stride == 1 {
        // One phase: a contiguous run.
        let start = row_offset + pad;
        if let Some(target) = phases.get_mut(start..start + line.len()) {
            convert_run(line, target);
        }
        return;
    }
    if stride == 2 {
        // Two phases: column pairs split into both at once, a loop the compiler vectorises.
        // Column 0 lands in phase PAD mod 2 at position PAD / 2, column 1 in the other phase
        // at (PAD + 1) / 2; column 2i + j follows its column j at position + i.
        let (even, odd) = phases.split_at_mut(phase_len.min(phases.len()));
        let (first, second) = if pad.is_multiple_of(2) {
            (even, odd)
        } else {
            (odd, even)
        };
        let (pairs, last) = line.as_chunks::<2>();
        let first_start = row_offset + pad / 2;
        let second_start = row_offset + pad.div_ceil(2);
        let (Some(first), Some(second)) = (
            first.get_mut(first_start..first_start + pairs.len() + last.len()),
            second.get_mut(second_start..second_start + pairs.len()),
        ) else {
            return; // callers size the phases for every row; never reached
        };
        let (first_pairs, first_last) = first.split_at_mut(pairs.len());
        for ((a, b), [x, y]) in first_pairs.iter_mut().zip(second.iter_mut()).zip(pairs) {
            *a = convert(*x);
            *b = convert(*y);
        }
        if let (Some(slot), Some(&value)) = (first_last.first_mut(), last.first()) {
            *slot = convert(value);
        }
        return;
    }
    for phase in 0..stride {
        // The first column whose padded position falls in this phase.
        let first = (phase + stride - pad % stride) % stride;
        if first >= line.len() {
            continue;
        }
        let start = phase * phase_len + row_offset + (first + pad) / stride;
        for (slot, &value) in phases[start..]
            .iter_mut()
            .zip(line[first..].iter().step_by(stride))
        {
            *slot = convert(value);
        }
    }
}
