//! Element-wise loops of the operators: `out[i] = f(input[i])` ([`map`]) and additions that
//! report overflow ([`add_checked`], [`add_each_checked`]), in blocks of eight vectors.
//!
//! They compute in `i32` lanes with no precision bound of their own: [`map`] applies the
//! operator's own function, and the additions wrap and return whether any sum overflowed, for
//! the caller to turn into its error. Used by the element-wise operators, dense's bias and the
//! convolution kernels' bias.

use super::simd::Simd;

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

/// `values[i] += addend` for every `i`, as `add_all` does: false if a sum overflows `i32`.
#[inline(never)]
pub fn add_checked<S: Simd>(values: &mut [i32], addend: i32) -> bool {
    let splat = S::splat32(addend);
    add_all::<S>(values, |_, _| splat, |_| addend)
}

/// `values[i] += addends[i]` over the common length, as `add_all` does: false if a sum overflows
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
