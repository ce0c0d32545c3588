//! `max_pool2d`: runs of element-wise maxima over a padded, phase-split copy of each plane.
//!
//! Padding is filled with `i32::MIN`, which never wins a maximum against an input element, and
//! every window holds at least one input element (validation guarantees it), so the result is
//! exactly the maximum over the window's input elements. No arithmetic, so no precision bound.
//! Chosen when windows are not clipped and the padded copy stays within twice the plane (plus
//! a constant, [`PoolShape::vectorised`]); other shapes take the operator's plain loop.

use alloc::vec;
use alloc::vec::Vec;

use super::padded::{copy_fits, scatter_row};

/// Phase rows hold a whole number of runs of this many outputs (the layout the operator's
/// planned scratch memory counts).
const LANES: usize = 4;

/// Geometry of one pooling (NCHW), validated by the operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolShape {
    /// N · C.
    pub planes: usize,
    /// H.
    pub height: usize,
    /// W.
    pub width: usize,
    /// Output height.
    pub out_h: usize,
    /// Output width.
    pub out_w: usize,
    /// (PSH, PSW), each ≥ 1.
    pub window: [usize; 2],
    /// (SH, SW), each ≥ 1.
    pub strides: [usize; 2],
    /// (PH, PW): leading padding (trailing padding is implied by the output extent).
    pub padding: [usize; 2],
    /// Clip every window to the input instead of reading a padded copy: the operator's choice
    /// when most window positions lie in padding (its price class `padded`).
    pub clip: bool,
}

impl PoolShape {
    /// Rows of the padded plane: every row a window touches.
    fn padded_h(&self) -> usize {
        (self.height + self.padding[0])
            .max(self.out_h.saturating_sub(1) * self.strides[0] + self.window[0])
    }

    /// Length of one phase row: every output vector plus the largest tap offset, plus one.
    fn phase_row_len(&self) -> usize {
        self.out_w.div_ceil(LANES) * LANES
            + (self.window[1] - 1) / self.strides[1]
            + (self.width + self.padding[1]).div_ceil(self.strides[1])
    }

    /// Elements of the padded, phase-split plane.
    fn plane_len(&self) -> u64 {
        (self.padded_h() as u64)
            .saturating_mul(self.strides[1] as u64)
            .saturating_mul(self.phase_row_len() as u64)
    }

    /// Whether the vector kernel applies: windows are not clipped and the padded copy stays
    /// within twice the plane (plus a constant). Other shapes take the plain loop, whose work
    /// is the window taps that read the input.
    pub fn vectorised(&self) -> bool {
        !self.clip && copy_fits(self.plane_len(), self.height, self.width)
    }

    /// Working memory of [`max_pool2d`] in bytes.
    pub fn scratch_bytes(&self) -> u64 {
        if self.vectorised() {
            let taps = (self.window[0] * self.window[1]) as u64;
            self.plane_len()
                .saturating_mul(4)
                .saturating_add(taps.saturating_mul(8))
        } else {
            0
        }
    }
}

/// Writes the maximum of every window into `out` (N, C, OH, OW).
pub fn max_pool2d(shape: &PoolShape, data: &[i32], out: &mut [i32]) {
    if shape.vectorised() {
        vectorised(shape, data, out);
    } else {
        plain(shape, data, out);
    }
}

/// The formula, window by window, clipping each window to the input.
fn plain(s: &PoolShape, data: &[i32], out: &mut [i32]) {
    let plane = s.height * s.width;
    let pixels = s.out_h * s.out_w;
    for index in 0..s.planes {
        let input = &data[index * plane..(index + 1) * plane];
        let output = &mut out[index * pixels..(index + 1) * pixels];
        for p in 0..s.out_h {
            let top = p * s.strides[0];
            let first_row = top.max(s.padding[0]) - s.padding[0];
            let rows = first_row
                ..((top + s.window[0]).min(s.height + s.padding[0]) - s.padding[0]).max(first_row);
            for q in 0..s.out_w {
                let left = q * s.strides[1];
                let first_col = left.max(s.padding[1]) - s.padding[1];
                let cols = first_col
                    ..((left + s.window[1]).min(s.width + s.padding[1]) - s.padding[1])
                        .max(first_col);
                let mut best = i32::MIN;
                for row in rows.clone() {
                    for &value in &input[row * s.width + cols.start..row * s.width + cols.end] {
                        best = best.max(value);
                    }
                }
                output[p * s.out_w + q] = best;
            }
        }
    }
}

/// Padded column x goes to phase x % SW at position x / SW, so one tap of every output of a row
/// is one contiguous run of the phases.
fn vectorised(s: &PoolShape, data: &[i32], out: &mut [i32]) {
    let [stride_h, stride_w] = s.strides;
    let [pad_h, pad_w] = s.padding;
    let row_len = s.phase_row_len();
    let phase_len = s.padded_h() * row_len;
    let plane = s.height * s.width;
    let pixels = s.out_h * s.out_w;
    let mut phases: Vec<i32> = vec![i32::MIN; phase_len * stride_w];
    // Each tap's position relative to an output row's first element.
    let mut taps = Vec::with_capacity(s.window[0] * s.window[1]);
    for ki in 0..s.window[0] {
        for kj in 0..s.window[1] {
            taps.push((kj % stride_w) * phase_len + ki * row_len + kj / stride_w);
        }
    }
    for index in 0..s.planes {
        let input = &data[index * plane..(index + 1) * plane];
        for (h, line) in input.chunks_exact(s.width.max(1)).enumerate() {
            let row_offset = (h + pad_h) * row_len;
            scatter_row(
                line,
                pad_w,
                stride_w,
                phase_len,
                row_offset,
                &mut phases,
                |v| v,
                |line, target| target.copy_from_slice(line),
            );
        }
        pool_plane(
            &phases,
            &taps,
            stride_h * row_len,
            s.out_w,
            &mut out[index * pixels..(index + 1) * pixels],
        );
    }
}

/// One plane's outputs from its phases: each output row starts at `row_step` × its index in
/// the phases, and is the element-wise maximum of one contiguous run of `out_w` phase elements
/// per tap (at the row's start plus the tap's offset). Runs of plain element-wise maxima, which
/// the compiler vectorises; a function of its own, so that its pointers stay in registers in
/// `engine.wasm`.
#[inline(never)]
fn pool_plane(phases: &[i32], taps: &[usize], row_step: usize, out_w: usize, output: &mut [i32]) {
    if out_w == 0 {
        return;
    }
    for (p, out_row) in output.chunks_exact_mut(out_w).enumerate() {
        out_row.fill(i32::MIN);
        for &offset in taps {
            let start = p * row_step + offset;
            let Some(run) = phases.get(start..start + out_w) else {
                continue; // callers size the phases for every tap of every row; never reached
            };
            for (best, &value) in out_row.iter_mut().zip(run) {
                *best = (*best).max(value);
            }
        }
    }
}
