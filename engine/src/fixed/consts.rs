//! The kernels' constants and series coefficients. Irrational constants are written out as
//! their correctly rounded binary expansions; series coefficients are exact rationals rounded
//! once, computed by `const fn`s at compile time so the source shows how each is defined.

use super::wide::FRAC;

/// ln 2 in Q120.
pub(super) const LN2: i128 = 0xb1_7217_f7d1_cf79_abc9_e3b3_9803_f2f7;
/// log2(e) = 1/ln 2 in Q120.
pub(super) const LOG2_E: i128 = 0x171_5476_52b8_2fe1_777d_0ffd_a0d2_3a7d;
/// log10(e) = 1/ln 10 in Q120.
pub(super) const LOG10_E: i128 = 0x6f_2dec_549b_9438_ca9a_add5_57d6_99ee;
/// π/2 in Q120.
pub(super) const PI_2: i128 = 0x192_1fb5_4442_d184_6989_8cc5_1701_b83a;
/// π in Q120.
pub(super) const PI: i128 = 0x324_3f6a_8885_a308_d313_198a_2e03_7073;
/// π/2 in Q126: six more bits for the trigonometric range reduction.
pub(super) const PI_2_Q126: i128 = 0x6487_ed51_10b4_611a_6263_3145_c06e_0e69;
/// 2/√π in Q120 (the factor of erf's series).
pub(super) const TWO_OVER_SQRT_PI: i128 = 0x120_dd75_0429_b6d1_1ae3_a914_fed7_fd87;
/// √2 in Q120: where the logarithm's mantissa is halved (any value near √2 works; this one
/// keeps the reduced mantissa in [1/√2, √2]).
pub(super) const SQRT2: u128 = 0x16a_09e6_67f3_bcc9_08b2_fb13_66ea_957d;

/// The first 192 bits of 2/π (⌊2/π · 2^192⌋) as three 64-bit words, most significant first.
///
/// Why 192: an argument below 2^32 times this constant leaves 160 correct bits below the
/// binary point of x·2/π, of which the reduction keeps 128; the truncation error of the
/// constant (below 2^-192) times x (below 2^32) stays below 2^-160.
pub(super) const TWO_OVER_PI: [u64; 3] = [
    0xa2f9_836e_4e44_1529,
    0xfc27_57d1_f534_ddc0,
    0xdb62_9599_3c43_9041,
];

/// atan(j/8) in Q120 for j = 0..=8: the table of the arctangent's argument reduction.
pub(super) const ATAN_EIGHTHS: [i128; 9] = [
    0,
    0x1f_d5ba_9aac_2f6d_c659_12f3_13e7_d112,
    0x3e_b6eb_f259_01ba_c55b_71e7_bd7d_e886,
    0x5b_d865_0793_7bc2_39c5_5190_916e_7f22,
    0x76_b19c_1586_ed3d_a2b7_f222_f65e_1d47,
    0x8f_005d_5ef7_f59f_9b5c_835e_1665_c437,
    0xa4_bc7d_1934_f709_2419_a87f_2a45_7dad,
    0xb8_053e_2bc2_319e_73cb_2da5_5210_a444,
    0xc9_0fda_a221_68c2_34c4_c662_8b80_dc1d,
];

/// round(2^120 / n!) for n = 0..34 (34! < 2^128, so n! is exact in a u128).
const INV_FACT: [i128; 34] = {
    let mut t = [0i128; 34];
    let mut fact: u128 = 1;
    let mut n = 0;
    while n < 34 {
        if n > 0 {
            fact *= n as u128;
        }
        t[n] = (((1u128 << FRAC) + fact / 2) / fact) as i128;
        n += 1;
    }
    t
};

/// e^r = Σ r^n/n!, n = 0..=25: for |r| ≤ ln2/2 + 2^-100 the first omitted term is below 2^-130.
pub(super) const EXP_SERIES: [i128; 26] = {
    let mut t = [0i128; 26];
    let mut n = 0;
    while n < 26 {
        t[n] = INV_FACT[n];
        n += 1;
    }
    t
};

/// sin r / r = Σ (−1)^k r^2k/(2k+1)!, k = 0..=15: for |r| ≤ π/4 the first omitted term
/// (r^33/33!) is below 2^-134.
pub(super) const SIN_SERIES: [i128; 16] = {
    let mut t = [0i128; 16];
    let mut k = 0;
    while k < 16 {
        let c = INV_FACT[2 * k + 1];
        t[k] = if k % 2 == 0 { c } else { -c };
        k += 1;
    }
    t
};

/// cos r = Σ (−1)^k r^2k/(2k)!, k = 0..=16: for |r| ≤ π/4 the first omitted term (r^34/34!)
/// is below 2^-137.
pub(super) const COS_SERIES: [i128; 17] = {
    let mut t = [0i128; 17];
    let mut k = 0;
    while k < 17 {
        let c = INV_FACT[2 * k];
        t[k] = if k % 2 == 0 { c } else { -c };
        k += 1;
    }
    t
};

/// round(2^120 / (2j + 1)), with alternating signs when `alternate`.
const fn odd_reciprocals<const N: usize>(alternate: bool) -> [i128; N] {
    let mut t = [0i128; N];
    let mut j = 0;
    while j < N {
        let d = 2 * j as u128 + 1;
        let c = (((1u128 << FRAC) + d / 2) / d) as i128;
        t[j] = if alternate && j % 2 == 1 { -c } else { c };
        j += 1;
    }
    t
}

/// atanh(s)/s = Σ s^2j/(2j+1), j = 0..=23: for |s| ≤ 3 − 2√2 (the logarithm's reduced
/// argument) the first omitted term is below 2^-130.
pub(super) const ATANH_SERIES: [i128; 24] = odd_reciprocals(false);

/// atan(t)/t = Σ (−1)^j t^2j/(2j+1), j = 0..=14: for |t| ≤ 1/16 the first omitted term is
/// below 2^-128.
pub(super) const ATAN_SERIES: [i128; 15] = odd_reciprocals(true);

/// Fractional bits of erf's series coefficients and variable.
pub(super) const ERF_FRAC: u32 = 86;
/// Number of coefficients of erf's series.
pub(super) const ERF_TERMS: usize = 99;

/// (−1)^n · 32^n / (n!·(2n+1)) in Q86, n = 0..99: erf(a) = (2/√π)·a·Σ c_n·(a²/32)^n.
///
/// Why 32: the variable a²/32 stays below 1 on erf's whole non-saturated range |a| < 4.5,
/// and it is exact (a shift of the integer a²). The largest coefficient is 2^36.4 and every
/// Horner partial sum stays below 2^37, inside Q86's range of 2^41. The rationals are built in
/// a normalized 128-bit mantissa (relative error ≤ 2^-127 per step, ≤ 2^-119 after 200
/// steps), then rounded once to Q86.
pub(super) const ERF_SERIES: [i128; ERF_TERMS] = {
    let mut t = [0i128; ERF_TERMS];
    // 32^n / n! = m · 2^e with m ∈ [2^127, 2^128).
    let mut m: u128 = 1 << 127;
    let mut e: i32 = -127;
    let mut n = 0;
    while n < ERF_TERMS {
        if n > 0 {
            let (m2, e2) = div_normalized(m, e + 5, n as u128);
            m = m2;
            e = e2;
        }
        let (cm, ce) = div_normalized(m, e, 2 * n as u128 + 1);
        // c·2^86 = cm · 2^(ce + 86); the shift is between 5 and 70 for these n.
        let sh = (-(ce + ERF_FRAC as i32)) as u32;
        let c = ((cm >> sh) + ((cm >> (sh - 1)) & 1)) as i128;
        t[n] = if n % 2 == 0 { c } else { -c };
        n += 1;
    }
    t
};

/// (m·2^e) / d renormalized to a mantissa in [2^127, 2^128), truncated (d < 256).
const fn div_normalized(m: u128, e: i32, d: u128) -> (u128, i32) {
    let q = m / d;
    let r = m % d;
    let z = q.leading_zeros();
    // (r·2^z)/d < 2^z fills exactly the bits the shift freed.
    ((q << z) | ((r << z) / d), e - z as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_coefficients_are_the_rationals() {
        assert_eq!(EXP_SERIES[0], 1 << FRAC);
        assert_eq!(EXP_SERIES[2], 1 << (FRAC - 1));
        assert_eq!(SIN_SERIES[1], -(((1i128 << FRAC) + 3) / 6));
        assert_eq!(ATAN_SERIES[1], -(((1i128 << FRAC) + 1) / 3));
        assert_eq!(ERF_SERIES[0], 1 << ERF_FRAC);
        // 32/3 and 32²/(2·5) = 102.4
        assert_eq!(ERF_SERIES[1], -(((32i128 << ERF_FRAC) + 1) / 3));
        assert_eq!(ERF_SERIES[2], ((1024i128 << ERF_FRAC) + 5) / 10);
    }

    #[test]
    fn constants_agree_with_each_other() {
        // ln2 · log2(e) = 1, π = 2·(π/2), π/2 in both formats.
        let p = super::super::wide::mul(LN2, LOG2_E);
        assert!((p - (1 << FRAC)).abs() <= 2);
        assert!((PI - 2 * PI_2).abs() <= 1);
        assert!(((PI_2_Q126 >> 6) - PI_2).abs() <= 1);
        // The top word of 2/π agrees with π/2: (2/π)·(π/2) = 1.
        let prod = u128::from(TWO_OVER_PI[0]) * ((PI_2_Q126 >> 63) as u128);
        let one = 1u128 << 127;
        assert!(prod.abs_diff(one) < one >> 60);
    }
}
