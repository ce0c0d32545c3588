//! Dot products of packed `i16` rows: the multiply-accumulate core of `dense` and `conv2d`.
//!
//! Both operands are rows of `i16` zero-padded to a multiple of sixteen lanes (as `pack.rs`
//! packs them), so the tiles step through whole vectors of [`Simd::dot_add`] (eight
//! multiply-accumulates each) with no tail. A 2 × 4 tile (two rows of `a` against four of `b`)
//! keeps eight accumulators in registers and loads each vector once per tile.
//!
//! Exactness: the callers guarantee |a|, |b| ≤ 127 (cvm-compat §3 bounds data and weights of dense
//! and conv2d to 8 bits) and an output precision p ≤ 32 for p = pA + pB + bits(K), so every
//! partial sum of every order is below K·127² < 2^(p−2) ≤ 2^30 in magnitude: the wrapping
//! 32-bit lanes never wrap and the result equals the exact sum in any summation order.
//!
//! Used by every `dense`, and by conv2d's im2col kernel (`conv/im2col.rs`).

use super::simd::{LANES, ROW_ALIGN, Simd};

// The tiles are separate functions (never inlined into their callers): a small function
// keeps its accumulators and pointers in registers, also after Cranelift compiles the wasm.
//
// Their steps are unrolled in straight runs of 64 vectors (`straight_runs!`). A step
// loads one vector (eight lanes) of each row: in the 2×4 tile, eight accumulators and six
// loaded vectors, within the sixteen vector registers of x86-64.

/// A row's first `blocks` blocks as vectors of eight lanes.
#[inline(always)]
fn vectors(row: &[Block], blocks: usize) -> &[[i16; LANES]] {
    row[..blocks].as_flattened().as_chunks::<LANES>().0
}

/// Blocks common to every row.
#[inline(always)]
fn common_blocks(rows: &[&[Block]]) -> usize {
    rows.iter().map(|row| row.len()).min().unwrap_or(0)
}

/// Two rows of `a` against four of `b` (all of the same length): the sums of each row of `a`.
#[inline(never)]
fn tile_2x4<S: Simd>(a: [&[Block]; 2], b: [&[Block]; 4]) -> [[i32; 4]; 2] {
    let zero = S::splat32(0);
    let (mut c00, mut c01, mut c02, mut c03) = (zero, zero, zero, zero);
    let (mut c10, mut c11, mut c12, mut c13) = (zero, zero, zero, zero);
    let blocks = common_blocks(&[a[0], a[1], b[0], b[1], b[2], b[3]]);
    let [x0s, x1s] = a.map(|row| vectors(row, blocks));
    let [w0s, w1s, w2s, w3s] = b.map(|row| vectors(row, blocks));
    straight_runs!(64, x0s.len(), |k| {
        let (x0, x1) = (S::load16(&x0s[k]), S::load16(&x1s[k]));
        let w = S::load16(&w0s[k]);
        c00 = S::dot_add(c00, x0, w);
        c10 = S::dot_add(c10, x1, w);
        let w = S::load16(&w1s[k]);
        c01 = S::dot_add(c01, x0, w);
        c11 = S::dot_add(c11, x1, w);
        let w = S::load16(&w2s[k]);
        c02 = S::dot_add(c02, x0, w);
        c12 = S::dot_add(c12, x1, w);
        let w = S::load16(&w3s[k]);
        c03 = S::dot_add(c03, x0, w);
        c13 = S::dot_add(c13, x1, w);
    });
    let mut sums = [[0; 4]; 2];
    S::store32(&mut sums[0], S::sums4(c00, c01, c02, c03));
    S::store32(&mut sums[1], S::sums4(c10, c11, c12, c13));
    sums
}

/// One row of `a` against four of `b`.
#[inline(never)]
fn tile_1x4<S: Simd>(a: &[Block], b: [&[Block]; 4]) -> [i32; 4] {
    let zero = S::splat32(0);
    let (mut c0, mut c1, mut c2, mut c3) = (zero, zero, zero, zero);
    let blocks = common_blocks(&[a, b[0], b[1], b[2], b[3]]);
    let xs = vectors(a, blocks);
    let [w0s, w1s, w2s, w3s] = b.map(|row| vectors(row, blocks));
    straight_runs!(64, xs.len(), |k| {
        let x = S::load16(&xs[k]);
        c0 = S::dot_add(c0, x, S::load16(&w0s[k]));
        c1 = S::dot_add(c1, x, S::load16(&w1s[k]));
        c2 = S::dot_add(c2, x, S::load16(&w2s[k]));
        c3 = S::dot_add(c3, x, S::load16(&w3s[k]));
    });
    let mut sums = [0; 4];
    S::store32(&mut sums, S::sums4(c0, c1, c2, c3));
    sums
}

/// Two rows of `a` against one of `b`.
#[inline(never)]
fn tile_2x1<S: Simd>(a: [&[Block]; 2], b: &[Block]) -> [i32; 2] {
    let zero = S::splat32(0);
    let (mut c0, mut c1) = (zero, zero);
    let blocks = common_blocks(&[a[0], a[1], b]);
    let [x0s, x1s] = a.map(|row| vectors(row, blocks));
    let ws = vectors(b, blocks);
    straight_runs!(64, ws.len(), |k| {
        let w = S::load16(&ws[k]);
        c0 = S::dot_add(c0, S::load16(&x0s[k]), w);
        c1 = S::dot_add(c1, S::load16(&x1s[k]), w);
    });
    [c0, c1].map(S::sum32)
}

/// One row of `a` against one of `b`.
#[inline(never)]
fn tile_1x1<S: Simd>(a: &[Block], b: &[Block]) -> i32 {
    let mut c = S::splat32(0);
    let blocks = common_blocks(&[a, b]);
    let (xs, ws) = (vectors(a, blocks), vectors(b, blocks));
    straight_runs!(64, xs.len(), |k| {
        c = S::dot_add(c, S::load16(&xs[k]), S::load16(&ws[k]));
    });
    S::sum32(c)
}

/// Sixteen lanes: the unit rows are padded to.
type Block = [i16; ROW_ALIGN];

/// Row `index` of rows of `blocks` blocks.
#[inline(always)]
fn nth_row(values: &[Block], index: usize, blocks: usize) -> &[Block] {
    &values[index * blocks..(index + 1) * blocks]
}

/// Where [`dot_products`] writes: the sum of row `i` of `a` and row `j` of `b` goes to
/// `data[i · row_step + j · column_step]`.
pub struct Strided<'a> {
    /// The output values.
    pub data: &'a mut [i32],
    /// Distance between the outputs of consecutive rows of `a`.
    pub row_step: usize,
    /// Distance between the outputs of consecutive rows of `b`.
    pub column_step: usize,
}

impl Strided<'_> {
    /// Writes `sums[r][c]` for row `i + r` of `a` and row `j + c` of `b`; outputs outside
    /// `data` are skipped (callers size it for every pair). With a step of 1 on either side
    /// (every caller) a tile is written as runs, one bounds check per run.
    #[inline(always)]
    fn store<const R: usize, const C: usize>(&mut self, i: usize, j: usize, sums: [[i32; C]; R]) {
        let base = i * self.row_step + j * self.column_step;
        if self.row_step == 1 {
            // Each row of `b` is a run of R outputs.
            let mut start = base;
            for c in 0..C {
                if let Some(slots) = self.data.get_mut(start..start + R) {
                    for (slot, row) in slots.iter_mut().zip(&sums) {
                        *slot = row[c];
                    }
                }
                start += self.column_step;
            }
        } else if self.column_step == 1 {
            // Each row of `a` is a run of C outputs.
            let mut start = base;
            for row in &sums {
                if let Some(slots) = self.data.get_mut(start..start + C) {
                    slots.copy_from_slice(row);
                }
                start += self.row_step;
            }
        } else {
            for (r, row) in sums.iter().enumerate() {
                for (c, &sum) in row.iter().enumerate() {
                    let at = base + r * self.row_step + c * self.column_step;
                    if let Some(slot) = self.data.get_mut(at) {
                        *slot = sum;
                    }
                }
            }
        }
    }
}

/// The rows of `a` (`m` rows of `blocks` blocks) against the four rows `quad` of `b`, whose
/// first is row `j`: every sum written to `out`. Not inlined, so that the walk over `a` keeps
/// its pointers in registers.
#[inline(never)]
fn quad_column<S: Simd>(
    a: &[Block],
    m: usize,
    blocks: usize,
    quad: [&[Block]; 4],
    j: usize,
    out: &mut Strided<'_>,
) {
    if blocks == 0 {
        // Empty rows: every sum is zero.
        for i in 0..m {
            out.store(i, j, [[0; 4]]);
        }
        return;
    }
    let Some(a) = a.get(..m * blocks) else {
        return; // callers pass full matrices; never reached
    };
    let mut pairs = a.chunks_exact(2 * blocks);
    let mut i = 0;
    for pair in pairs.by_ref() {
        let (first, second) = pair.split_at(blocks);
        out.store(i, j, tile_2x4::<S>([first, second], quad));
        i += 2;
    }
    let last = pairs.remainder();
    if !last.is_empty() {
        out.store(i, j, [tile_1x4::<S>(last, quad)]);
    }
}

/// Writes `Σ_k a[i][k]·b[j][k]` to `out` for every row `i` of `a` (`m` rows) and `j` of `b`
/// (`n` rows), both of `stride` lanes (a multiple of [`ROW_ALIGN`]). Each pair is written once.
///
/// The sums are exact under the bounds in the module documentation.
#[inline]
pub fn dot_products<S: Simd>(
    a: &[i16],
    m: usize,
    b: &[i16],
    n: usize,
    stride: usize,
    mut out: Strided<'_>,
) {
    let blocks = stride / ROW_ALIGN;
    let (a, _) = a.as_chunks::<ROW_ALIGN>();
    let (b, _) = b.as_chunks::<ROW_ALIGN>();
    if a.len() < m * blocks || b.len() < n * blocks {
        return; // callers pass full matrices; never reached
    }
    let mut j = 0;
    while j + 4 <= n {
        let quad = [
            nth_row(b, j, blocks),
            nth_row(b, j + 1, blocks),
            nth_row(b, j + 2, blocks),
            nth_row(b, j + 3, blocks),
        ];
        quad_column::<S>(a, m, blocks, quad, j, &mut out);
        j += 4;
    }
    while j < n {
        let mut i = 0;
        while i + 2 <= m {
            let sums = tile_2x1::<S>(
                [nth_row(a, i, blocks), nth_row(a, i + 1, blocks)],
                nth_row(b, j, blocks),
            );
            out.store(i, j, sums.map(|sum| [sum]));
            i += 2;
        }
        if i < m {
            let sum = tile_1x1::<S>(nth_row(a, i, blocks), nth_row(b, j, blocks));
            out.store(i, j, [[sum]]);
        }
        j += 1;
    }
}
