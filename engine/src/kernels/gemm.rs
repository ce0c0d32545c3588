//! Dot products of packed `i16` rows: the multiply-accumulate core of `dense` and `conv2d`.
//!
//! Both operands are rows of `i16` zero-padded to a multiple of sixteen lanes ([`PackedRows`]),
//! so the inner loop is pairs of whole vectors of [`Simd::dot_add`] (eight multiply-accumulates
//! each) with no tail. A 2 × 4 tile (two rows of `a` against four of `b`) keeps eight accumulators
//! in registers and loads each vector once per tile.
//!
//! Exactness: the callers guarantee |a|, |b| ≤ 127 (spec 001 bounds data and weights of dense
//! and conv2d to 8 bits) and an output precision p ≤ 32 for p = pA + pB + bits(K), so every
//! partial sum of every order is below K·127² < 2^(p−2) ≤ 2^30 in magnitude: the wrapping
//! 32-bit lanes never wrap and the result equals the exact sum in any summation order.

use alloc::vec;
use alloc::vec::Vec;

use super::simd::Simd;

/// Lanes per vector.
pub const LANES: usize = 8;

/// Rows are padded to a multiple of this: two vectors, the step of the inner loop.
pub const ROW_ALIGN: usize = 2 * LANES;

/// The padded row length for `depth` values.
pub const fn padded_depth(depth: usize) -> usize {
    depth.div_ceil(ROW_ALIGN) * ROW_ALIGN
}

/// Converts a value known to lie within 8-bit precision (|v| ≤ 127) to `i16`. Saturating, so
/// even a value outside the bound could never wrap.
#[inline(always)]
pub fn narrow16(value: i32) -> i16 {
    value.clamp(i32::from(i16::MIN), i32::from(i16::MAX)) as i16
}

/// The order of a packed row's values relative to its source row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PackOrder {
    /// As in the source.
    Source,
    /// A source row of `channels` × `taps` values (channel-major, as conv2d's OIHW weights)
    /// packed tap-major: value (c, t) goes to position t · channels + c.
    ChannelsLast {
        /// Channels per row.
        channels: usize,
        /// Taps per channel.
        taps: usize,
    },
}

/// Rows of `i16`, each zero-padded to [`padded_depth`] lanes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackedRows {
    values: Vec<i16>,
    rows: usize,
    stride: usize,
}

impl PackedRows {
    /// Packs `rows` rows of `depth` values (row-major in `source`, values within 8 bits).
    pub fn pack(source: &[i32], rows: usize, depth: usize) -> PackedRows {
        let stride = padded_depth(depth);
        let mut values = vec![0; rows * stride];
        if depth > 0 {
            for (packed, row) in values
                .chunks_exact_mut(stride)
                .zip(source.chunks_exact(depth))
            {
                for (slot, &value) in packed.iter_mut().zip(row) {
                    *slot = narrow16(value);
                }
            }
        }
        PackedRows {
            values,
            rows,
            stride,
        }
    }

    /// Packs `rows` rows of `depth` values in `order` (a `ChannelsLast` order must describe
    /// `depth` = channels · taps).
    pub fn pack_in(source: &[i32], rows: usize, depth: usize, order: PackOrder) -> PackedRows {
        let PackOrder::ChannelsLast { channels, taps } = order else {
            return PackedRows::pack(source, rows, depth);
        };
        let stride = padded_depth(depth);
        let mut values = vec![0; rows * stride];
        if depth > 0 && channels * taps == depth {
            for (packed, row) in values
                .chunks_exact_mut(stride)
                .zip(source.chunks_exact(depth))
            {
                for (c, channel) in row.chunks_exact(taps).enumerate() {
                    for (t, &value) in channel.iter().enumerate() {
                        packed[t * channels + c] = narrow16(value);
                    }
                }
            }
        }
        PackedRows {
            values,
            rows,
            stride,
        }
    }

    /// Bytes a packing of `rows` × `depth` values occupies.
    pub const fn bytes(rows: u64, depth: u64) -> u64 {
        rows.saturating_mul(padded_depth(depth as usize) as u64)
            .saturating_mul(2)
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Padded row length.
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// The packed values, row-major.
    pub fn values(&self) -> &[i16] {
        &self.values
    }

    /// Bytes held.
    pub fn held_bytes(&self) -> u64 {
        (self.values.len() as u64).saturating_mul(2)
    }
}

/// `acc + x·w` over two vectors.
#[inline(always)]
fn dot2<S: Simd>(acc: S::I32x4, x: (S::I16x8, S::I16x8), w: (S::I16x8, S::I16x8)) -> S::I32x4 {
    S::dot_add(S::dot_add(acc, x.0, w.0), x.1, w.1)
}

// The tiles are separate functions (never inlined into their callers): a small function
// keeps its accumulators and pointers in registers, also after Cranelift compiles the wasm.

/// Two rows of `a` against four of `b` (all of the same length): eight sums, row-major.
#[inline(never)]
fn tile_2x4<S: Simd>(a: [&[Block]; 2], b: [&[Block]; 4]) -> [i32; 8] {
    let zero = S::splat32(0);
    let (mut c00, mut c01, mut c02, mut c03) = (zero, zero, zero, zero);
    let (mut c10, mut c11, mut c12, mut c13) = (zero, zero, zero, zero);
    for ((((x0, x1), w0), w1), (w2, w3)) in a[0]
        .iter()
        .zip(a[1])
        .zip(b[0])
        .zip(b[1])
        .zip(b[2].iter().zip(b[3]))
    {
        let (x0, x1) = (S::load16x2(x0), S::load16x2(x1));
        let w = S::load16x2(w0);
        c00 = dot2::<S>(c00, x0, w);
        c10 = dot2::<S>(c10, x1, w);
        let w = S::load16x2(w1);
        c01 = dot2::<S>(c01, x0, w);
        c11 = dot2::<S>(c11, x1, w);
        let w = S::load16x2(w2);
        c02 = dot2::<S>(c02, x0, w);
        c12 = dot2::<S>(c12, x1, w);
        let w = S::load16x2(w3);
        c03 = dot2::<S>(c03, x0, w);
        c13 = dot2::<S>(c13, x1, w);
    }
    [c00, c01, c02, c03, c10, c11, c12, c13].map(S::sum32)
}

/// One row of `a` against four of `b`.
#[inline(never)]
fn tile_1x4<S: Simd>(a: &[Block], b: [&[Block]; 4]) -> [i32; 4] {
    let zero = S::splat32(0);
    let (mut c0, mut c1, mut c2, mut c3) = (zero, zero, zero, zero);
    for (((x, w0), w1), (w2, w3)) in a.iter().zip(b[0]).zip(b[1]).zip(b[2].iter().zip(b[3])) {
        let x = S::load16x2(x);
        c0 = dot2::<S>(c0, x, S::load16x2(w0));
        c1 = dot2::<S>(c1, x, S::load16x2(w1));
        c2 = dot2::<S>(c2, x, S::load16x2(w2));
        c3 = dot2::<S>(c3, x, S::load16x2(w3));
    }
    [c0, c1, c2, c3].map(S::sum32)
}

/// Two rows of `a` against one of `b`.
#[inline(never)]
fn tile_2x1<S: Simd>(a: [&[Block]; 2], b: &[Block]) -> [i32; 2] {
    let zero = S::splat32(0);
    let (mut c0, mut c1) = (zero, zero);
    for ((x0, x1), w) in a[0].iter().zip(a[1]).zip(b) {
        let w = S::load16x2(w);
        c0 = dot2::<S>(c0, S::load16x2(x0), w);
        c1 = dot2::<S>(c1, S::load16x2(x1), w);
    }
    [c0, c1].map(S::sum32)
}

/// One row of `a` against one of `b`.
#[inline(never)]
fn tile_1x1<S: Simd>(a: &[Block], b: &[Block]) -> i32 {
    let mut c = S::splat32(0);
    for (x, w) in a.iter().zip(b) {
        c = dot2::<S>(c, S::load16x2(x), S::load16x2(w));
    }
    S::sum32(c)
}

/// Sixteen lanes: the step of the inner loops.
type Block = [i16; ROW_ALIGN];

/// Row `index` of rows of `blocks` blocks.
#[inline(always)]
fn nth_row(values: &[Block], index: usize, blocks: usize) -> &[Block] {
    &values[index * blocks..(index + 1) * blocks]
}

/// Calls `store(i, j, Σ_k a[i][k]·b[j][k])` for every row `i` of `a` (`m` rows) and `j` of `b`
/// (`n` rows), both of `stride` lanes (a multiple of [`ROW_ALIGN`]). Each pair is stored once.
///
/// The sums are exact under the bounds in the module documentation.
#[inline]
pub fn dot_products<S: Simd>(
    a: &[i16],
    m: usize,
    b: &[i16],
    n: usize,
    stride: usize,
    mut store: impl FnMut(usize, usize, i32),
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
        let mut i = 0;
        while i + 2 <= m {
            let sums = tile_2x4::<S>([nth_row(a, i, blocks), nth_row(a, i + 1, blocks)], quad);
            for (k, &sum) in sums.iter().enumerate() {
                store(i + k / 4, j + k % 4, sum);
            }
            i += 2;
        }
        if i < m {
            let sums = tile_1x4::<S>(nth_row(a, i, blocks), quad);
            for (k, &sum) in sums.iter().enumerate() {
                store(i, j + k, sum);
            }
        }
        j += 4;
    }
    while j < n {
        let mut i = 0;
        while i + 2 <= m {
            let [first, second] = tile_2x1::<S>(
                [nth_row(a, i, blocks), nth_row(a, i + 1, blocks)],
                nth_row(b, j, blocks),
            );
            store(i, j, first);
            store(i + 1, j, second);
            i += 2;
        }
        if i < m {
            store(
                i,
                j,
                tile_1x1::<S>(nth_row(a, i, blocks), nth_row(b, j, blocks)),
            );
        }
        j += 1;
    }
}
