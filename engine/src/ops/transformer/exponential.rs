//! The exponential of `softmax` (steps 3 and 4 of its semantics in docs/ops.md), shared with
//! the sigmoid gates of `activation`: e ≈ 2^30 · e^(−d · m / 2^s) for an integer d ≥ 0 and a
//! real scale m / 2^s, from a 64-entry table of 2^(−t/64) and a cubic, within 4 of the real
//! value (the bound is proved in `softmax`'s documentation).

/// log2(e) · 2^31, rounded: the exponent's conversion to base 2.
pub(super) const LOG2_E_Q31: u64 = 3_098_164_009;
/// ln(2) · 2^32, rounded: the fraction's conversion back to base e for the cubic.
const LN_2_Q32: u64 = 2_977_044_472;
/// 2^32 / 3, rounded.
const THIRD_Q32: u64 = 1_431_655_765;
/// The Q format of the exponent and of the exponential.
const BITS: u32 = 30;
/// One in Q30.
const ONE: u64 = 1 << BITS;
/// The exponents from which every exponential rounds to 0 (n ≥ 32).
const SATURATED: u64 = 32 << BITS;
/// Bits of the fraction the table indexes (64 entries).
const TABLE_BITS: u32 = 6;
/// 2^30 · 2^(−t/64) for t = 0..=63, rounded to the nearest integer.
const TABLE: [u64; 64] = [
    1073741824, 1062175491, 1050733751, 1039415261, 1028218693, 1017142735, 1006186087, 995347464,
    984625594, 974019220, 963527098, 953147997, 942880699, 932724001, 922676710, 912737649,
    902905651, 893179563, 883558244, 874040567, 864625413, 855311680, 846098274, 836984114,
    827968132, 819049271, 810226483, 801498734, 792865000, 784324269, 775875538, 767517817,
    759250125, 751071493, 742980960, 734977579, 727060411, 719228525, 711481005, 703816941,
    696235434, 688735596, 681316545, 673977412, 666717336, 659535466, 652430958, 645402981,
    638450708, 631573326, 624770026, 618040012, 611382493, 604796689, 598281827, 591837143,
    585461881, 579155293, 572916640, 566745190, 560640218, 554601009, 548626854, 542717053,
];

/// e = R(E, n) of `softmax`'s step 4 for a difference `d` (< 2^32), with `c` = m · L (< 2^63) and `shift`
/// = s: the exponent u = R(d · c, s + 1), then the table entry of its fraction's top 6 bits
/// times the cubic of the rest.
///
/// The exponent's product, below 2^95, is taken in two 64-bit halves: with c = c₁ · 2^32 + c₀,
/// d · c = a · 2^32 + b for a = d · c₁ + ⌊d · c₀ / 2^32⌋ (< 2^64) and b = d · c₀ mod 2^32. For
/// k = s + 1 ≥ 33, R(a · 2^32 + b, k) = ⌊(a + 2^(k−33)) / 2^(k−32)⌋ (b < 2^32 never carries
/// into a multiple of 2^k); for k ≤ 32 it is a · 2^(32−k) + R(b, k), and a ≥ 2^(k+3) already
/// means u ≥ 2^35, saturated. Everything after the exponent is below 2^62 in `u64`.
#[inline(always)]
pub(super) fn exponential(d: u64, c: u64, shift: u32) -> u64 {
    // The bounds above hold for every operand, so the arithmetic is written wrapping: under the
    // release profile's overflow checks a checked 64-bit product costs a 128-bit one in wasm.
    let k = shift + 1;
    let low = d.wrapping_mul(c & 0xFFFF_FFFF);
    let high = d.wrapping_mul(c >> 32).wrapping_add(low >> 32);
    let exponent = if k >= 33 {
        high.wrapping_add(1 << (k - 33)) >> (k - 32)
    } else if high >> (k + 3) != 0 {
        return 0;
    } else {
        (high << (32 - k)).wrapping_add(((low & 0xFFFF_FFFF).wrapping_add(1 << (k - 1))) >> k)
    };
    if exponent >= SATURATED {
        return 0;
    }
    let n = (exponent >> BITS) as u32;
    let fraction = exponent & (ONE - 1);
    let rest_bits = BITS - TABLE_BITS;
    let entry = TABLE[(fraction >> rest_bits) as usize & (TABLE.len() - 1)];
    let rest = fraction & ((1 << rest_bits) - 1);
    // z < ln 2 · 2^24 < 2^24, each product below 2^55, each w in [0, 2^30].
    let z = rest.wrapping_mul(LN_2_Q32).wrapping_add(1 << 31) >> 32;
    let w1 = ONE.wrapping_sub(z.wrapping_mul(THIRD_Q32).wrapping_add(1 << 31) >> 32);
    let w2 = ONE.wrapping_sub(z.wrapping_mul(w1).wrapping_add(1 << 30) >> 31);
    let w3 = ONE.wrapping_sub(z.wrapping_mul(w2).wrapping_add(1 << 29) >> 30);
    let e = entry.wrapping_mul(w3).wrapping_add(1 << 29) >> BITS;
    // R(E, n): the half is 2^(n−1), or 0 for n = 0; n ≤ 31.
    e.wrapping_add((1 << n) >> 1) >> n
}
