//! 128-bit integer vector backends: one small trait ([`Simd`]) with a portable implementation
//! and two accelerated ones, wasm SIMD128 and x86-64 SSE2, that compute exactly the same values.
//!
//! Every operation is fully specified integer arithmetic with wrap-around on overflow (the same
//! in all three backends); the kernels only use them where precision bounds rule overflow out.
//! Relaxed SIMD is never used: its results may differ between hosts.
//!
//! The accelerated backends need `unsafe` only for unaligned loads and stores through pointers
//! derived from references to `[T; N]` arrays, which are always valid for the access.

/// Lanes of a vector of `i16` ([`Simd::I16x8`]).
pub const LANES: usize = 8;

/// Two vectors of `i16` ([`Simd::load16x2`]): packed rows are padded to a multiple of this, so
/// that the dot products step through them with no tail.
pub const ROW_ALIGN: usize = 2 * LANES;

/// Vectors of eight `i16` and four `i32` lanes and the operations the kernels need.
///
/// Lane order is memory order. Every method is pure and total.
pub trait Simd: Copy {
    /// Eight 16-bit lanes.
    type I16x8: Copy;
    /// Four 32-bit lanes.
    type I32x4: Copy;

    /// Loads eight `i16`.
    fn load16(values: &[i16; 8]) -> Self::I16x8;
    /// Loads sixteen `i16` as two vectors (lanes 0–7, 8–15).
    fn load16x2(values: &[i16; 16]) -> (Self::I16x8, Self::I16x8);
    /// Eight copies of `value`.
    fn splat16(value: i16) -> Self::I16x8;
    /// Stores eight `i16`.
    fn store16(target: &mut [i16; 8], value: Self::I16x8);
    /// Loads four `i32`.
    fn load32(values: &[i32; 4]) -> Self::I32x4;
    /// Stores four `i32`.
    fn store32(target: &mut [i32; 4], value: Self::I32x4);
    /// Stores lanes 2H and 2H + 1, for H < 2 (wasm `v128.store64_lane`, x86 `movq`).
    fn store_pair32<const H: usize>(target: &mut [i32; 2], value: Self::I32x4);
    /// Stores lane L, for L < 4 (wasm `v128.store32_lane`, x86 `pshufd` and `movd`).
    fn store_lane32<const L: usize>(target: &mut i32, value: Self::I32x4);
    /// Four copies of `value`.
    fn splat32(value: i32) -> Self::I32x4;
    /// Lane-wise wrapping addition.
    fn add32(a: Self::I32x4, b: Self::I32x4) -> Self::I32x4;
    /// Lane-wise signed maximum.
    fn max32(a: Self::I32x4, b: Self::I32x4) -> Self::I32x4;
    /// Lane-wise wrapping sum and its overflow flags: `(a + b, (s ^ a) & (s ^ b))` for the sum
    /// `s`; a flag lane is negative exactly when that lane's sum overflowed `i32` (its sign
    /// differs from both operands').
    fn add_overflow32(a: Self::I32x4, b: Self::I32x4) -> (Self::I32x4, Self::I32x4);
    /// Lane-wise bitwise or.
    fn or32(a: Self::I32x4, b: Self::I32x4) -> Self::I32x4;
    /// Lane-wise bitwise and.
    fn and16(a: Self::I16x8, b: Self::I16x8) -> Self::I16x8;
    /// `value` moved up one lane, its first lane taken from the last lane of `carry`:
    /// `[carry3, value0, value1, value2]` (wasm `i32x4.shuffle`, x86 two byte shifts and an or).
    fn shift_in32(carry: Self::I32x4, value: Self::I32x4) -> Self::I32x4;
    /// [`Self::shift_in32`] on each half of `value`, the first lane of the lower half taken from
    /// the last lane of `upper`, of the upper half from `lower`:
    /// `[upper3, value0, lower3, value2]` (wasm and x86 64-bit unpack and shifts, and an or).
    fn join_in32(upper: Self::I32x4, lower: Self::I32x4, value: Self::I32x4) -> Self::I32x4;
    /// The lanes of `a` then `b` narrowed to `i16` with saturation (wasm
    /// `i16x8.narrow_i32x4_s`, x86 `packssdw`).
    fn narrow32(a: Self::I32x4, b: Self::I32x4) -> Self::I16x8;
    /// `acc + [a0·b0 + a1·b1, a2·b2 + a3·b3, a4·b4 + a5·b5, a6·b6 + a7·b7]`, products in 32
    /// bits, sums wrapping (wasm `i32x4.dot_i16x8_s`, x86 `pmaddwd`).
    fn dot_add(acc: Self::I32x4, a: Self::I16x8, b: Self::I16x8) -> Self::I32x4;
    /// Interleaves the lanes of `a` and `b`: `[a0, b0, a1, b1, a2, b2, a3, b3]` and
    /// `[a4, b4, a5, b5, a6, b6, a7, b7]` (wasm `i8x16.shuffle`, x86 `punpcklwd`/`punpckhwd`).
    fn interleave16(a: Self::I16x8, b: Self::I16x8) -> (Self::I16x8, Self::I16x8);
    /// Interleaves the lanes of `a` and `b`: `[a0, b0, a1, b1]` and `[a2, b2, a3, b3]` (wasm
    /// `i32x4.shuffle`, x86 `punpckldq`/`punpckhdq`).
    fn interleave32(a: Self::I32x4, b: Self::I32x4) -> (Self::I32x4, Self::I32x4);
    /// `[pair[0], pair[1]]` repeated four times, loaded from memory (wasm `v128.load32_splat`).
    fn splat_pair(pair: &[i16; 2]) -> Self::I16x8;
    /// `[first, second]` repeated four times.
    fn pair16(first: i16, second: i16) -> Self::I16x8;
    /// Pair `K` of `pairs` (lanes 2K and 2K + 1) repeated four times, for K < 4 (wasm
    /// `i32x4.shuffle`, x86 `pshufd`).
    fn pair_lane<const K: usize>(pairs: Self::I16x8) -> Self::I16x8;
    /// Wrapping sum of the four lanes.
    fn sum32(value: Self::I32x4) -> i32;
    /// The wrapping sums of the lanes of four vectors: `[Σa, Σb, Σc, Σd]` (a transpose of
    /// interleaves and three additions instead of four separate reductions).
    fn sums4(a: Self::I32x4, b: Self::I32x4, c: Self::I32x4, d: Self::I32x4) -> Self::I32x4;
}

/// Scalar lanes: the reference the accelerated backends are tested against, and the backend
/// of targets without one.
#[derive(Clone, Copy, Debug)]
pub struct Portable;

impl Simd for Portable {
    type I16x8 = [i16; 8];
    type I32x4 = [i32; 4];

    #[inline(always)]
    fn load16(values: &[i16; 8]) -> [i16; 8] {
        *values
    }

    #[inline(always)]
    fn load16x2(values: &[i16; 16]) -> ([i16; 8], [i16; 8]) {
        (
            core::array::from_fn(|lane| values[lane]),
            core::array::from_fn(|lane| values[lane + 8]),
        )
    }

    #[inline(always)]
    fn splat16(value: i16) -> [i16; 8] {
        [value; 8]
    }

    #[inline(always)]
    fn store16(target: &mut [i16; 8], value: [i16; 8]) {
        *target = value;
    }

    #[inline(always)]
    fn load32(values: &[i32; 4]) -> [i32; 4] {
        *values
    }

    #[inline(always)]
    fn store32(target: &mut [i32; 4], value: [i32; 4]) {
        *target = value;
    }

    #[inline(always)]
    fn store_pair32<const H: usize>(target: &mut [i32; 2], value: [i32; 4]) {
        *target = [value[(2 * H) % 4], value[(2 * H + 1) % 4]];
    }

    #[inline(always)]
    fn store_lane32<const L: usize>(target: &mut i32, value: [i32; 4]) {
        *target = value[L % 4];
    }

    #[inline(always)]
    fn splat32(value: i32) -> [i32; 4] {
        [value; 4]
    }

    #[inline(always)]
    fn add32(a: [i32; 4], b: [i32; 4]) -> [i32; 4] {
        core::array::from_fn(|lane| a[lane].wrapping_add(b[lane]))
    }

    #[inline(always)]
    fn max32(a: [i32; 4], b: [i32; 4]) -> [i32; 4] {
        core::array::from_fn(|lane| a[lane].max(b[lane]))
    }

    #[inline(always)]
    fn add_overflow32(a: [i32; 4], b: [i32; 4]) -> ([i32; 4], [i32; 4]) {
        let sum = Self::add32(a, b);
        let flags = core::array::from_fn(|lane| (sum[lane] ^ a[lane]) & (sum[lane] ^ b[lane]));
        (sum, flags)
    }

    #[inline(always)]
    fn or32(a: [i32; 4], b: [i32; 4]) -> [i32; 4] {
        core::array::from_fn(|lane| a[lane] | b[lane])
    }

    #[inline(always)]
    fn and16(a: [i16; 8], b: [i16; 8]) -> [i16; 8] {
        core::array::from_fn(|lane| a[lane] & b[lane])
    }

    #[inline(always)]
    fn shift_in32(carry: [i32; 4], value: [i32; 4]) -> [i32; 4] {
        [carry[3], value[0], value[1], value[2]]
    }

    #[inline(always)]
    fn join_in32(upper: [i32; 4], lower: [i32; 4], value: [i32; 4]) -> [i32; 4] {
        [upper[3], value[0], lower[3], value[2]]
    }

    #[inline(always)]
    fn narrow32(a: [i32; 4], b: [i32; 4]) -> [i16; 8] {
        let saturate = |v: i32| v.clamp(i32::from(i16::MIN), i32::from(i16::MAX)) as i16;
        core::array::from_fn(|lane| saturate(if lane < 4 { a[lane] } else { b[lane - 4] }))
    }

    #[inline(always)]
    fn dot_add(acc: [i32; 4], a: [i16; 8], b: [i16; 8]) -> [i32; 4] {
        core::array::from_fn(|lane| {
            let even = i32::from(a[2 * lane]) * i32::from(b[2 * lane]);
            let odd = i32::from(a[2 * lane + 1]) * i32::from(b[2 * lane + 1]);
            acc[lane].wrapping_add(even.wrapping_add(odd))
        })
    }

    #[inline(always)]
    fn interleave16(a: [i16; 8], b: [i16; 8]) -> ([i16; 8], [i16; 8]) {
        let lane = |from: usize| {
            move |index: usize| {
                let source = if index.is_multiple_of(2) { a } else { b };
                source[from + index / 2]
            }
        };
        (core::array::from_fn(lane(0)), core::array::from_fn(lane(4)))
    }

    #[inline(always)]
    fn interleave32(a: [i32; 4], b: [i32; 4]) -> ([i32; 4], [i32; 4]) {
        ([a[0], b[0], a[1], b[1]], [a[2], b[2], a[3], b[3]])
    }

    #[inline(always)]
    fn splat_pair(pair: &[i16; 2]) -> [i16; 8] {
        Self::pair16(pair[0], pair[1])
    }

    #[inline(always)]
    fn pair_lane<const K: usize>(pairs: [i16; 8]) -> [i16; 8] {
        core::array::from_fn(|index| pairs[(2 * K + index % 2) % 8])
    }

    #[inline(always)]
    fn pair16(first: i16, second: i16) -> [i16; 8] {
        core::array::from_fn(|index| {
            if index.is_multiple_of(2) {
                first
            } else {
                second
            }
        })
    }

    #[inline(always)]
    fn sum32(value: [i32; 4]) -> i32 {
        value.iter().fold(0i32, |sum, &lane| sum.wrapping_add(lane))
    }

    #[inline(always)]
    fn sums4(a: [i32; 4], b: [i32; 4], c: [i32; 4], d: [i32; 4]) -> [i32; 4] {
        [a, b, c, d].map(Self::sum32)
    }
}

/// wasm SIMD128 (`core::arch::wasm32`, target feature `simd128`): only deterministic integer
/// instructions.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[derive(Clone, Copy, Debug)]
pub struct Wasm128;

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[allow(unsafe_code)]
impl Simd for Wasm128 {
    type I16x8 = core::arch::wasm32::v128;
    type I32x4 = core::arch::wasm32::v128;

    #[inline(always)]
    fn load16(values: &[i16; 8]) -> Self::I16x8 {
        // SAFETY: `values` is a valid, readable 16-byte array; `v128_load` has no alignment
        // requirement.
        unsafe { core::arch::wasm32::v128_load(values.as_ptr().cast()) }
    }

    #[inline(always)]
    fn load16x2(values: &[i16; 16]) -> (Self::I16x8, Self::I16x8) {
        use core::arch::wasm32::v128_load;
        let first: *const core::arch::wasm32::v128 = values.as_ptr().cast();
        // SAFETY: `values` is a valid, readable 32-byte array: both 16-byte halves are in it;
        // `v128_load` has no alignment requirement.
        unsafe { (v128_load(first), v128_load(first.wrapping_add(1))) }
    }

    #[inline(always)]
    fn splat16(value: i16) -> Self::I16x8 {
        core::arch::wasm32::i16x8_splat(value)
    }

    #[inline(always)]
    fn store16(target: &mut [i16; 8], value: Self::I16x8) {
        // SAFETY: `target` is a valid, writable, exclusively borrowed 16-byte array;
        // `v128_store` has no alignment requirement.
        unsafe { core::arch::wasm32::v128_store(target.as_mut_ptr().cast(), value) }
    }

    #[inline(always)]
    fn load32(values: &[i32; 4]) -> Self::I32x4 {
        // SAFETY: as in `load16`: 16 readable bytes, no alignment requirement.
        unsafe { core::arch::wasm32::v128_load(values.as_ptr().cast()) }
    }

    #[inline(always)]
    fn store32(target: &mut [i32; 4], value: Self::I32x4) {
        // SAFETY: `target` is a valid, writable, exclusively borrowed 16-byte array;
        // `v128_store` has no alignment requirement.
        unsafe { core::arch::wasm32::v128_store(target.as_mut_ptr().cast(), value) }
    }

    #[inline(always)]
    fn store_pair32<const H: usize>(target: &mut [i32; 2], value: Self::I32x4) {
        use core::arch::wasm32::v128_store64_lane;
        let target = target.as_mut_ptr().cast();
        // SAFETY: `target` is a valid, writable, exclusively borrowed 8-byte array;
        // `v128.store64_lane` has no alignment requirement.
        unsafe {
            match H {
                0 => v128_store64_lane::<0>(value, target),
                _ => v128_store64_lane::<1>(value, target),
            }
        }
    }

    #[inline(always)]
    fn store_lane32<const L: usize>(target: &mut i32, value: Self::I32x4) {
        use core::arch::wasm32::v128_store32_lane;
        let target = core::ptr::from_mut(target).cast();
        // SAFETY: `target` is a valid, writable, exclusively borrowed `i32`;
        // `v128.store32_lane` has no alignment requirement.
        unsafe {
            match L {
                0 => v128_store32_lane::<0>(value, target),
                1 => v128_store32_lane::<1>(value, target),
                2 => v128_store32_lane::<2>(value, target),
                _ => v128_store32_lane::<3>(value, target),
            }
        }
    }

    #[inline(always)]
    fn splat32(value: i32) -> Self::I32x4 {
        core::arch::wasm32::i32x4_splat(value)
    }

    #[inline(always)]
    fn add32(a: Self::I32x4, b: Self::I32x4) -> Self::I32x4 {
        core::arch::wasm32::i32x4_add(a, b)
    }

    #[inline(always)]
    fn max32(a: Self::I32x4, b: Self::I32x4) -> Self::I32x4 {
        core::arch::wasm32::i32x4_max(a, b)
    }

    #[inline(always)]
    fn add_overflow32(a: Self::I32x4, b: Self::I32x4) -> (Self::I32x4, Self::I32x4) {
        use core::arch::wasm32::{i32x4_add, v128_and, v128_xor};
        let sum = i32x4_add(a, b);
        (sum, v128_and(v128_xor(sum, a), v128_xor(sum, b)))
    }

    #[inline(always)]
    fn or32(a: Self::I32x4, b: Self::I32x4) -> Self::I32x4 {
        core::arch::wasm32::v128_or(a, b)
    }

    #[inline(always)]
    fn and16(a: Self::I16x8, b: Self::I16x8) -> Self::I16x8 {
        core::arch::wasm32::v128_and(a, b)
    }

    #[inline(always)]
    fn shift_in32(carry: Self::I32x4, value: Self::I32x4) -> Self::I32x4 {
        core::arch::wasm32::i32x4_shuffle::<3, 4, 5, 6>(carry, value)
    }

    #[inline(always)]
    fn join_in32(upper: Self::I32x4, lower: Self::I32x4, value: Self::I32x4) -> Self::I32x4 {
        use core::arch::wasm32::{i64x2_shl, i64x2_shuffle, u64x2_shr, v128_or};
        // [upper3, 0, lower3, 0] | [0, value0, 0, value2]: shifts of 64-bit lanes.
        let carries = u64x2_shr(i64x2_shuffle::<1, 3>(upper, lower), 32);
        v128_or(carries, i64x2_shl(value, 32))
    }

    #[inline(always)]
    fn narrow32(a: Self::I32x4, b: Self::I32x4) -> Self::I16x8 {
        core::arch::wasm32::i16x8_narrow_i32x4(a, b)
    }

    #[inline(always)]
    fn dot_add(acc: Self::I32x4, a: Self::I16x8, b: Self::I16x8) -> Self::I32x4 {
        use core::arch::wasm32::{i32x4_add, i32x4_dot_i16x8};
        i32x4_add(acc, i32x4_dot_i16x8(a, b))
    }

    #[inline(always)]
    fn interleave16(a: Self::I16x8, b: Self::I16x8) -> (Self::I16x8, Self::I16x8) {
        use core::arch::wasm32::i16x8_shuffle;
        (
            i16x8_shuffle::<0, 8, 1, 9, 2, 10, 3, 11>(a, b),
            i16x8_shuffle::<4, 12, 5, 13, 6, 14, 7, 15>(a, b),
        )
    }

    #[inline(always)]
    fn interleave32(a: Self::I32x4, b: Self::I32x4) -> (Self::I32x4, Self::I32x4) {
        use core::arch::wasm32::i32x4_shuffle;
        (
            i32x4_shuffle::<0, 4, 1, 5>(a, b),
            i32x4_shuffle::<2, 6, 3, 7>(a, b),
        )
    }

    #[inline(always)]
    fn splat_pair(pair: &[i16; 2]) -> Self::I16x8 {
        // SAFETY: `pair` is a valid, readable 4-byte array; `v128_load32_splat` has no
        // alignment requirement.
        unsafe { core::arch::wasm32::v128_load32_splat(pair.as_ptr().cast()) }
    }

    #[inline(always)]
    fn pair16(first: i16, second: i16) -> Self::I16x8 {
        // The two 16-bit halves of one 32-bit lane, low half first (wasm is little-endian).
        let lane = u32::from(first as u16) | (u32::from(second as u16) << 16);
        core::arch::wasm32::u32x4_splat(lane)
    }

    #[inline(always)]
    fn pair_lane<const K: usize>(pairs: Self::I16x8) -> Self::I16x8 {
        use core::arch::wasm32::i32x4_shuffle;
        match K {
            0 => i32x4_shuffle::<0, 0, 0, 0>(pairs, pairs),
            1 => i32x4_shuffle::<1, 1, 1, 1>(pairs, pairs),
            2 => i32x4_shuffle::<2, 2, 2, 2>(pairs, pairs),
            _ => i32x4_shuffle::<3, 3, 3, 3>(pairs, pairs),
        }
    }

    #[inline(always)]
    fn sum32(value: Self::I32x4) -> i32 {
        use core::arch::wasm32::{i32x4_add, i32x4_extract_lane, i32x4_shuffle};
        let pairs = i32x4_add(value, i32x4_shuffle::<2, 3, 0, 1>(value, value));
        let total = i32x4_add(pairs, i32x4_shuffle::<1, 0, 3, 2>(pairs, pairs));
        i32x4_extract_lane::<0>(total)
    }

    #[inline(always)]
    fn sums4(a: Self::I32x4, b: Self::I32x4, c: Self::I32x4, d: Self::I32x4) -> Self::I32x4 {
        use core::arch::wasm32::{i32x4_add, i32x4_shuffle};
        // [a0 + a2, b0 + b2, a1 + a3, b1 + b3], and the same of c and d.
        let ab = i32x4_add(
            i32x4_shuffle::<0, 4, 1, 5>(a, b),
            i32x4_shuffle::<2, 6, 3, 7>(a, b),
        );
        let cd = i32x4_add(
            i32x4_shuffle::<0, 4, 1, 5>(c, d),
            i32x4_shuffle::<2, 6, 3, 7>(c, d),
        );
        i32x4_add(
            i32x4_shuffle::<0, 1, 4, 5>(ab, cd),
            i32x4_shuffle::<2, 3, 6, 7>(ab, cd),
        )
    }
}

/// x86-64 SSE2 (part of the x86-64 baseline, so always available): the native counterpart of
/// the wasm SIMD128 backend, instruction for instruction where SSE2 has one. Its intrinsics are
/// `unsafe` to call only because they require SSE2, which every x86-64 processor has.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug)]
pub struct Sse2;

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
impl Simd for Sse2 {
    type I16x8 = core::arch::x86_64::__m128i;
    type I32x4 = core::arch::x86_64::__m128i;

    #[inline(always)]
    fn load16(values: &[i16; 8]) -> Self::I16x8 {
        // SAFETY: `values` is a valid, readable 16-byte array; `loadu` has no alignment
        // requirement.
        unsafe { core::arch::x86_64::_mm_loadu_si128(values.as_ptr().cast()) }
    }

    #[inline(always)]
    fn load16x2(values: &[i16; 16]) -> (Self::I16x8, Self::I16x8) {
        use core::arch::x86_64::{__m128i, _mm_loadu_si128};
        let first: *const __m128i = values.as_ptr().cast();
        // SAFETY: `values` is a valid, readable 32-byte array: both 16-byte halves are in it;
        // `loadu` has no alignment requirement.
        unsafe {
            (
                _mm_loadu_si128(first),
                _mm_loadu_si128(first.wrapping_add(1)),
            )
        }
    }

    #[inline(always)]
    fn splat16(value: i16) -> Self::I16x8 {
        // SAFETY: SSE2 is part of the x86-64 baseline: every x86-64 processor has it.
        unsafe { core::arch::x86_64::_mm_set1_epi16(value) }
    }

    #[inline(always)]
    fn store16(target: &mut [i16; 8], value: Self::I16x8) {
        // SAFETY: `target` is a valid, writable, exclusively borrowed 16-byte array; `storeu`
        // has no alignment requirement.
        unsafe { core::arch::x86_64::_mm_storeu_si128(target.as_mut_ptr().cast(), value) }
    }

    #[inline(always)]
    fn load32(values: &[i32; 4]) -> Self::I32x4 {
        // SAFETY: as in `load16`: 16 readable bytes, no alignment requirement.
        unsafe { core::arch::x86_64::_mm_loadu_si128(values.as_ptr().cast()) }
    }

    #[inline(always)]
    fn store32(target: &mut [i32; 4], value: Self::I32x4) {
        // SAFETY: `target` is a valid, writable, exclusively borrowed 16-byte array; `storeu`
        // has no alignment requirement.
        unsafe { core::arch::x86_64::_mm_storeu_si128(target.as_mut_ptr().cast(), value) }
    }

    #[inline(always)]
    fn store_pair32<const H: usize>(target: &mut [i32; 2], value: Self::I32x4) {
        use core::arch::x86_64::{_mm_storel_epi64, _mm_unpackhi_epi64};
        let target = target.as_mut_ptr().cast();
        // SAFETY: `target` is a valid, writable, exclusively borrowed 8-byte array; `movq`
        // stores 8 bytes with no alignment requirement. SSE2 is part of the x86-64 baseline.
        unsafe {
            match H {
                0 => _mm_storel_epi64(target, value),
                _ => _mm_storel_epi64(target, _mm_unpackhi_epi64(value, value)),
            }
        }
    }

    #[inline(always)]
    fn store_lane32<const L: usize>(target: &mut i32, value: Self::I32x4) {
        use core::arch::x86_64::{_mm_cvtsi128_si32, _mm_shuffle_epi32};
        // SAFETY: SSE2 is part of the x86-64 baseline: every x86-64 processor has it.
        *target = unsafe {
            _mm_cvtsi128_si32(match L {
                0 => value,
                1 => _mm_shuffle_epi32::<0x55>(value),
                2 => _mm_shuffle_epi32::<0xAA>(value),
                _ => _mm_shuffle_epi32::<0xFF>(value),
            })
        };
    }

    #[inline(always)]
    fn splat32(value: i32) -> Self::I32x4 {
        // SAFETY: SSE2 is part of the x86-64 baseline: every x86-64 processor has it.
        unsafe { core::arch::x86_64::_mm_set1_epi32(value) }
    }

    #[inline(always)]
    fn add32(a: Self::I32x4, b: Self::I32x4) -> Self::I32x4 {
        // SAFETY: SSE2 is part of the x86-64 baseline: every x86-64 processor has it.
        unsafe { core::arch::x86_64::_mm_add_epi32(a, b) }
    }

    #[inline(always)]
    fn max32(a: Self::I32x4, b: Self::I32x4) -> Self::I32x4 {
        // SAFETY: SSE2 is part of the x86-64 baseline: every x86-64 processor has it.
        unsafe {
            use core::arch::x86_64::{
                _mm_and_si128, _mm_andnot_si128, _mm_cmpgt_epi32, _mm_or_si128,
            };
            // SSE2 has no `pmaxsd`: select with the comparison mask.
            let a_greater = _mm_cmpgt_epi32(a, b);
            _mm_or_si128(_mm_and_si128(a_greater, a), _mm_andnot_si128(a_greater, b))
        }
    }

    #[inline(always)]
    fn add_overflow32(a: Self::I32x4, b: Self::I32x4) -> (Self::I32x4, Self::I32x4) {
        // SAFETY: SSE2 is part of the x86-64 baseline: every x86-64 processor has it.
        unsafe {
            use core::arch::x86_64::{_mm_add_epi32, _mm_and_si128, _mm_xor_si128};
            let sum = _mm_add_epi32(a, b);
            (
                sum,
                _mm_and_si128(_mm_xor_si128(sum, a), _mm_xor_si128(sum, b)),
            )
        }
    }

    #[inline(always)]
    fn or32(a: Self::I32x4, b: Self::I32x4) -> Self::I32x4 {
        // SAFETY: SSE2 is part of the x86-64 baseline: every x86-64 processor has it.
        unsafe { core::arch::x86_64::_mm_or_si128(a, b) }
    }

    #[inline(always)]
    fn and16(a: Self::I16x8, b: Self::I16x8) -> Self::I16x8 {
        // SAFETY: SSE2 is part of the x86-64 baseline: every x86-64 processor has it.
        unsafe { core::arch::x86_64::_mm_and_si128(a, b) }
    }

    #[inline(always)]
    fn shift_in32(carry: Self::I32x4, value: Self::I32x4) -> Self::I32x4 {
        // SAFETY: SSE2 is part of the x86-64 baseline: every x86-64 processor has it.
        unsafe {
            use core::arch::x86_64::{_mm_or_si128, _mm_slli_si128, _mm_srli_si128};
            _mm_or_si128(_mm_srli_si128::<12>(carry), _mm_slli_si128::<4>(value))
        }
    }

    #[inline(always)]
    fn join_in32(upper: Self::I32x4, lower: Self::I32x4, value: Self::I32x4) -> Self::I32x4 {
        // SAFETY: SSE2 is part of the x86-64 baseline: every x86-64 processor has it.
        unsafe {
            use core::arch::x86_64::{
                _mm_or_si128, _mm_slli_epi64, _mm_srli_epi64, _mm_unpackhi_epi64,
            };
            // [upper3, 0, lower3, 0] | [0, value0, 0, value2]: shifts of 64-bit lanes.
            let carries = _mm_srli_epi64::<32>(_mm_unpackhi_epi64(upper, lower));
            _mm_or_si128(carries, _mm_slli_epi64::<32>(value))
        }
    }

    #[inline(always)]
    fn narrow32(a: Self::I32x4, b: Self::I32x4) -> Self::I16x8 {
        // SAFETY: SSE2 is part of the x86-64 baseline: every x86-64 processor has it.
        unsafe { core::arch::x86_64::_mm_packs_epi32(a, b) }
    }

    #[inline(always)]
    fn dot_add(acc: Self::I32x4, a: Self::I16x8, b: Self::I16x8) -> Self::I32x4 {
        // SAFETY: SSE2 is part of the x86-64 baseline: every x86-64 processor has it.
        unsafe {
            use core::arch::x86_64::{_mm_add_epi32, _mm_madd_epi16};
            _mm_add_epi32(acc, _mm_madd_epi16(a, b))
        }
    }

    #[inline(always)]
    fn interleave16(a: Self::I16x8, b: Self::I16x8) -> (Self::I16x8, Self::I16x8) {
        // SAFETY: SSE2 is part of the x86-64 baseline: every x86-64 processor has it.
        unsafe {
            use core::arch::x86_64::{_mm_unpackhi_epi16, _mm_unpacklo_epi16};
            (_mm_unpacklo_epi16(a, b), _mm_unpackhi_epi16(a, b))
        }
    }

    #[inline(always)]
    fn interleave32(a: Self::I32x4, b: Self::I32x4) -> (Self::I32x4, Self::I32x4) {
        // SAFETY: SSE2 is part of the x86-64 baseline: every x86-64 processor has it.
        unsafe {
            use core::arch::x86_64::{_mm_unpackhi_epi32, _mm_unpacklo_epi32};
            (_mm_unpacklo_epi32(a, b), _mm_unpackhi_epi32(a, b))
        }
    }

    #[inline(always)]
    fn splat_pair(pair: &[i16; 2]) -> Self::I16x8 {
        Self::pair16(pair[0], pair[1])
    }

    #[inline(always)]
    fn pair16(first: i16, second: i16) -> Self::I16x8 {
        // The two 16-bit halves of one 32-bit lane, low half first (x86 is little-endian).
        let lane = u32::from(first as u16) | (u32::from(second as u16) << 16);
        // SAFETY: SSE2 is part of the x86-64 baseline: every x86-64 processor has it.
        unsafe { core::arch::x86_64::_mm_set1_epi32(lane as i32) }
    }

    #[inline(always)]
    fn pair_lane<const K: usize>(pairs: Self::I16x8) -> Self::I16x8 {
        use core::arch::x86_64::_mm_shuffle_epi32;
        // SAFETY: SSE2 is part of the x86-64 baseline: every x86-64 processor has it.
        unsafe {
            match K {
                0 => _mm_shuffle_epi32::<0x00>(pairs),
                1 => _mm_shuffle_epi32::<0x55>(pairs),
                2 => _mm_shuffle_epi32::<0xAA>(pairs),
                _ => _mm_shuffle_epi32::<0xFF>(pairs),
            }
        }
    }

    #[inline(always)]
    fn sum32(value: Self::I32x4) -> i32 {
        // SAFETY: SSE2 is part of the x86-64 baseline: every x86-64 processor has it.
        unsafe {
            use core::arch::x86_64::{_mm_add_epi32, _mm_cvtsi128_si32, _mm_shuffle_epi32};
            let pairs = _mm_add_epi32(value, _mm_shuffle_epi32::<0b01_00_11_10>(value));
            let total = _mm_add_epi32(pairs, _mm_shuffle_epi32::<0b10_11_00_01>(pairs));
            _mm_cvtsi128_si32(total)
        }
    }

    #[inline(always)]
    fn sums4(a: Self::I32x4, b: Self::I32x4, c: Self::I32x4, d: Self::I32x4) -> Self::I32x4 {
        // SAFETY: SSE2 is part of the x86-64 baseline: every x86-64 processor has it.
        unsafe {
            use core::arch::x86_64::{
                _mm_add_epi32, _mm_unpackhi_epi32, _mm_unpackhi_epi64, _mm_unpacklo_epi32,
                _mm_unpacklo_epi64,
            };
            // [a0 + a2, b0 + b2, a1 + a3, b1 + b3], and the same of c and d.
            let ab = _mm_add_epi32(_mm_unpacklo_epi32(a, b), _mm_unpackhi_epi32(a, b));
            let cd = _mm_add_epi32(_mm_unpacklo_epi32(c, d), _mm_unpackhi_epi32(c, d));
            _mm_add_epi32(_mm_unpacklo_epi64(ab, cd), _mm_unpackhi_epi64(ab, cd))
        }
    }
}

/// The backend the engine runs with on this target.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub type Native = Wasm128;

/// The backend the engine runs with on this target.
#[cfg(target_arch = "x86_64")]
pub type Native = Sse2;

/// The backend the engine runs with on this target.
#[cfg(not(any(
    all(target_arch = "wasm32", target_feature = "simd128"),
    target_arch = "x86_64"
)))]
pub type Native = Portable;
