//! Padded, phase-split working copies of an input plane, shared by depthwise conv2d and
//! max_pool2d: when such a copy may replace reading the plane in place ([`copy_fits`]), and the
//! copy of one row into its column phases ([`scatter_row`]).

/// Whether a padded working copy of `copy` elements may replace reading a plane of `height` ×
/// `width` elements in place: at most twice the plane plus a constant. Kernels that would need
/// more (padding far larger than the input) take a path without the copy, so a model's scratch
/// memory stays proportional to its tensors.
pub(crate) fn copy_fits(copy: u64, height: usize, width: usize) -> bool {
    copy <= 2 * (height * width) as u64 + 4096
}

/// Copies one input row into its phase rows, converted: padded column x = col + `pad` goes to
/// phase x % `stride` (at `phases[phase · phase_len ..]`) and position `row_offset` + x / `stride`.
/// Division-free per element: each phase is a strided walk of the row. At stride 1 the row is
/// one contiguous run, converted whole by `convert_run` (which the caller may vectorise); at
/// other strides each value is converted by `convert`, the same conversion.
#[allow(clippy::too_many_arguments)] // the row's geometry, and one conversion in two forms
pub(crate) fn scatter_row<T: Copy>(
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
