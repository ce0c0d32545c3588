//! Vectorised integer kernels behind the heaviest operators, written once over a small 128-bit
//! vector trait ([`simd::Simd`]) with three backends: wasm SIMD128 (the consensus build),
//! x86-64 SSE2 (the native build) and portable scalar lanes (other targets, and the reference
//! the tests compare the others with).
//!
//! Every kernel computes exactly the formula of its operator; `engine/tests/kernels.rs` checks
//! each one bit for bit against a plain implementation of the formula, on randomized shapes
//! with odd sizes and tails, under both the native and the portable backend. Each kernel states
//! the precision bound it relies on.

pub mod conv;
pub mod gemm;
pub mod pool;
pub mod simd;

/// Whether a padded working copy of `copy` elements may replace reading a plane of `height` ×
/// `width` elements in place: at most twice the plane plus a constant. Kernels that would need
/// more (padding far larger than the input) take a path without the copy, so a model's scratch
/// memory stays proportional to its tensors.
fn copy_fits(copy: u64, height: usize, width: usize) -> bool {
    copy <= 2 * (height * width) as u64 + 4096
}

/// Copies one input row into its phase rows, converted: padded column x = col + `pad` goes to
/// phase x % `stride` (at `phases[phase · phase_len ..]`) and position `row_offset` + x / `stride`.
/// Division-free per element: each phase is a strided walk of the row.
fn scatter_row<T: Copy>(
    line: &[i32],
    pad: usize,
    stride: usize,
    phase_len: usize,
    row_offset: usize,
    phases: &mut [T],
    convert: impl Fn(i32) -> T,
) {
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
