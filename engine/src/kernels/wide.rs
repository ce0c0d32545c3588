//! Exact dot products of `i32` values: the multiply-accumulate core of CINN `Dot` and `Conv`.
//!
//! Every product x·y is exact in `i64` (|x·y| ≤ 2^62), but a sum of them may not be. Each
//! product p is therefore split into its high half h = p >> 32 (arithmetic, |h| ≤ 2^30) and its
//! low half l = p & (2^32 − 1) (0 ≤ l < 2^32), and the halves are summed apart in `i64`: over at
//! most 2^26 terms (the longest reduction validation lets through) |Σh| < 2^56 and Σl < 2^58,
//! so neither sum can overflow, and Σp = Σh·2^32 + Σl exactly, in `i128`. The halves need only
//! 64-bit arithmetic, which wasm has, where an `i128` accumulator is emulated in software.
//!
//! In wasm the products are taken two lanes at a time (`i64x2.extmul_low_i32x4_s` and
//! `_high_`), sixteen values per loop iteration; elsewhere one at a time. Used by every CINN
//! `Dot` and `Conv`.

/// Values per loop iteration of the vector path: four vectors of four `i32`.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
const BLOCK: usize = 16;

/// `Σ x[i]·y[i]` over the common length, exactly, for at most 2^26 terms (module documentation).
pub fn wide_dot(x: &[i32], y: &[i32]) -> i128 {
    let n = x.len().min(y.len());
    let (hi, lo) = halves(&x[..n], &y[..n]);
    (i128::from(hi) << 32) + i128::from(lo)
}

/// The sums of the high and low halves of the products (`x` and `y` of equal length).
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[inline(never)]
fn halves(x: &[i32], y: &[i32]) -> (i64, i64) {
    use super::simd::{Simd, Wasm128};
    use core::arch::wasm32::{
        i64x2_add, i64x2_extmul_high_i32x4, i64x2_extmul_low_i32x4, i64x2_extract_lane, i64x2_shr,
        i64x2_splat, v128_and,
    };
    let (x_blocks, x_tail) = x.as_chunks::<BLOCK>();
    let (y_blocks, y_tail) = y.as_chunks::<BLOCK>();
    let mask = i64x2_splat(0xFFFF_FFFF);
    let (mut hi, mut lo) = (i64x2_splat(0), i64x2_splat(0));
    for (a, b) in x_blocks.iter().zip(y_blocks) {
        let (a, _) = a.as_chunks::<4>();
        let (b, _) = b.as_chunks::<4>();
        for (a, b) in a.iter().zip(b) {
            let (va, vb) = (Wasm128::load32(a), Wasm128::load32(b));
            for p in [
                i64x2_extmul_low_i32x4(va, vb),
                i64x2_extmul_high_i32x4(va, vb),
            ] {
                hi = i64x2_add(hi, i64x2_shr(p, 32));
                lo = i64x2_add(lo, v128_and(p, mask));
            }
        }
    }
    let mut sums = (
        i64x2_extract_lane::<0>(hi).wrapping_add(i64x2_extract_lane::<1>(hi)),
        i64x2_extract_lane::<0>(lo).wrapping_add(i64x2_extract_lane::<1>(lo)),
    );
    for (&a, &b) in x_tail.iter().zip(y_tail) {
        add_product(&mut sums, a, b);
    }
    sums
}

/// The sums of the high and low halves of the products (`x` and `y` of equal length).
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
#[inline(never)]
fn halves(x: &[i32], y: &[i32]) -> (i64, i64) {
    let mut sums = (0, 0);
    for (&a, &b) in x.iter().zip(y) {
        add_product(&mut sums, a, b);
    }
    sums
}

/// Adds the halves of a·b to `sums` (the bounds of the module documentation rule out
/// overflow, so the additions wrap only in name).
#[inline(always)]
fn add_product(sums: &mut (i64, i64), a: i32, b: i32) {
    let p = i64::from(a) * i64::from(b);
    sums.0 = sums.0.wrapping_add(p >> 32);
    sums.1 = sums.1.wrapping_add(p & 0xFFFF_FFFF);
}
