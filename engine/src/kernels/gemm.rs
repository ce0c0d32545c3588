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

/// One packed row as blocks of two vectors.
#[inline(always)]
fn row(values: &[[i16; ROW_ALIGN]], index: usize, blocks: usize) -> &[[i16; ROW_ALIGN]] {
    &values[index * blocks..(index + 1) * blocks]
}

/// `acc + x·w` over two vectors.
#[inline(always)]
fn dot2<S: Simd>(acc: S::I32x4, x: (S::I16x8, S::I16x8), w: (S::I16x8, S::I16x8)) -> S::I32x4 {
    S::dot_add(S::dot_add(acc, x.0, w.0), x.1, w.1)
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
    let zero = S::splat32(0);
    let mut j = 0;
    while j + 4 <= n {
        let b0 = row(b, j, blocks);
        let b1 = row(b, j + 1, blocks);
        let b2 = row(b, j + 2, blocks);
        let b3 = row(b, j + 3, blocks);
        let mut i = 0;
        while i + 2 <= m {
            let a0 = row(a, i, blocks);
            let a1 = row(a, i + 1, blocks);
            let (mut c00, mut c01, mut c02, mut c03) = (zero, zero, zero, zero);
            let (mut c10, mut c11, mut c12, mut c13) = (zero, zero, zero, zero);
            for v in 0..blocks {
                let x0 = S::load16x2(&a0[v]);
                let x1 = S::load16x2(&a1[v]);
                let w = S::load16x2(&b0[v]);
                c00 = dot2::<S>(c00, x0, w);
                c10 = dot2::<S>(c10, x1, w);
                let w = S::load16x2(&b1[v]);
                c01 = dot2::<S>(c01, x0, w);
                c11 = dot2::<S>(c11, x1, w);
                let w = S::load16x2(&b2[v]);
                c02 = dot2::<S>(c02, x0, w);
                c12 = dot2::<S>(c12, x1, w);
                let w = S::load16x2(&b3[v]);
                c03 = dot2::<S>(c03, x0, w);
                c13 = dot2::<S>(c13, x1, w);
            }
            store(i, j, S::sum32(c00));
            store(i, j + 1, S::sum32(c01));
            store(i, j + 2, S::sum32(c02));
            store(i, j + 3, S::sum32(c03));
            store(i + 1, j, S::sum32(c10));
            store(i + 1, j + 1, S::sum32(c11));
            store(i + 1, j + 2, S::sum32(c12));
            store(i + 1, j + 3, S::sum32(c13));
            i += 2;
        }
        if i < m {
            let a0 = row(a, i, blocks);
            let (mut c0, mut c1, mut c2, mut c3) = (zero, zero, zero, zero);
            for v in 0..blocks {
                let x0 = S::load16x2(&a0[v]);
                c0 = dot2::<S>(c0, x0, S::load16x2(&b0[v]));
                c1 = dot2::<S>(c1, x0, S::load16x2(&b1[v]));
                c2 = dot2::<S>(c2, x0, S::load16x2(&b2[v]));
                c3 = dot2::<S>(c3, x0, S::load16x2(&b3[v]));
            }
            store(i, j, S::sum32(c0));
            store(i, j + 1, S::sum32(c1));
            store(i, j + 2, S::sum32(c2));
            store(i, j + 3, S::sum32(c3));
        }
        j += 4;
    }
    while j < n {
        let b0 = row(b, j, blocks);
        let mut i = 0;
        while i + 2 <= m {
            let a0 = row(a, i, blocks);
            let a1 = row(a, i + 1, blocks);
            let (mut c0, mut c1) = (zero, zero);
            for v in 0..blocks {
                let w = S::load16x2(&b0[v]);
                c0 = dot2::<S>(c0, S::load16x2(&a0[v]), w);
                c1 = dot2::<S>(c1, S::load16x2(&a1[v]), w);
            }
            store(i, j, S::sum32(c0));
            store(i + 1, j, S::sum32(c1));
            i += 2;
        }
        if i < m {
            let a0 = row(a, i, blocks);
            let mut c0 = zero;
            for v in 0..blocks {
                c0 = dot2::<S>(c0, S::load16x2(&a0[v]), S::load16x2(&b0[v]));
            }
            store(i, j, S::sum32(c0));
        }
        j += 1;
    }
}
