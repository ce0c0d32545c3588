//! Accuracy suite of the fixed-point math core (`cvm_engine::fixed`): every function against
//! the exact real result, on every i16 input at f ∈ {8, 12, 16}, on more than 10^6
//! pseudo-random inputs (fixed xorshift seed, edge values first: 0, ±1, i32::MIN/MAX, ±2^f,
//! domain boundaries, overflow thresholds, points near multiples of π/2) at f ∈ {16, 24, 30},
//! and on 2·10^5 more at f ∈ {0, 4}, where arguments reach 2^31. `power` takes pairs: every
//! i16 x with two drawn exponents (integral and not), random pairs, and inputs whose exact
//! result is a rounding tie.
//!
//! The verdict is exact. A reference value in f64 (the platform's libm, or a short f64 series
//! for erf) comes with an error bound; when the f64 value is farther than that bound from a
//! rounding boundary, the correctly rounded result is known. Otherwise (and on a fixed sample
//! of every 1024th input, to check the bound itself) an independent 256-bit fixed-point
//! reference (`Big`: Machin's π, Taylor series with argument halving and squaring, Newton
//! logarithms, Kummer's erf series; none of the engine's tables or constants) decides.
//! Integral powers and the integer-valued functions are checked against exact integer
//! arithmetic.
//!
//! Each family test prints one table line per (function, f): inputs, the largest error in
//! ulp against the exact value, how many results were the correctly rounded one, and how many
//! verdicts needed the 256-bit reference. Per input it asserts the contract: ≤ 1 ulp for the
//! transcendental functions, ≤ 2 ulp for non-integral powers, exactness for integral powers,
//! roots and rounding, and `Domain`/`Overflow` exactly where the real result is undefined or
//! does not fit, tolerating either answer when the exact value lies within 1 ulp of the i32
//! limit (a value that close may round to the limit or past it). Per (function, f) it then
//! asserts the module's stronger documented claim: every result, overflow decisions included,
//! is the correctly rounded one.
//!
//! `cargo test -p cvm-engine --test fixed_accuracy -- --nocapture` shows the table.
#![allow(
    clippy::float_arithmetic,
    clippy::cast_precision_loss,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)] // the references compute in f64 and big integers; a failed check reports by panicking

use std::cmp::Ordering;
use std::sync::OnceLock;

use cvm_engine::fixed::{self, FixedError, FixedResult};

// ---------------------------------------------------------------------------------------------
// Deterministic pseudo-random inputs
// ---------------------------------------------------------------------------------------------

/// xorshift64 with a fixed seed per (function, f).
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform in 0..n (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform over all i32.
    fn any_i32(&mut self) -> i32 {
        self.next() as i32
    }

    /// Random sign and a magnitude spread evenly over the 31 binades.
    fn log_uniform(&mut self) -> i32 {
        let bits = self.below(32) as u32;
        let m = if bits == 0 {
            0
        } else {
            (self.next() >> (64 - bits)) as i64
        };
        let v = if self.next() & 1 == 1 { -m } else { m };
        v.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
    }

    /// Uniform real in [lo, hi], as a Q(f) value clamped to i32.
    fn real(&mut self, lo: f64, hi: f64, f: u32) -> i32 {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        to_q(lo + (hi - lo) * u, f)
    }
}

/// The Q(f) value nearest to v, clamped to i32.
fn to_q(v: f64, f: u32) -> i32 {
    (v * pow2(f))
        .round()
        .clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32
}

fn pow2(f: u32) -> f64 {
    (1u64 << f) as f64
}

/// f64 of x / 2^f (exact).
fn real_of(x: i32, f: u32) -> f64 {
    f64::from(x) / pow2(f)
}

const EXHAUSTIVE_F: [u32; 3] = [8, 12, 16];
const RANDOM_F: [u32; 3] = [16, 24, 30];
const RANDOM_COUNT: usize = 1_000_000;
/// Extra random runs at small f, where arguments reach 2^31 (huge trigonometric arguments,
/// exact integral powers, overflow everywhere).
const EXTRA_F: [u32; 2] = [0, 4];
const EXTRA_COUNT: usize = 200_000;
const SAMPLE_EVERY: usize = 1024;

/// Every i16 value, as unary inputs.
fn exhaustive_inputs() -> Vec<(i32, i32)> {
    (i32::from(i16::MIN)..=i32::from(i16::MAX))
        .map(|x| (x, 0))
        .collect()
}

/// Edge values of every family at f, then `count` draws: a third uniform i32, a third
/// log-uniform, a third from the family's own region (`special`).
fn random_inputs(
    seed: u64,
    f: u32,
    count: usize,
    extra_edges: &[i32],
    special: impl Fn(&mut XorShift, u32) -> i32,
) -> Vec<(i32, i32)> {
    let one = 1i64 << f;
    let mut edges: Vec<i64> = vec![
        0,
        1,
        -1,
        2,
        -2,
        i64::from(i32::MIN),
        i64::from(i32::MAX),
        i64::from(i32::MIN) + 1,
        i64::from(i32::MAX) - 1,
    ];
    for d in -2..=2 {
        edges.push(one + d);
        edges.push(-one + d);
    }
    let mut inputs: Vec<(i32, i32)> = edges
        .into_iter()
        .filter_map(|v| i32::try_from(v).ok())
        .chain(extra_edges.iter().copied())
        .map(|x| (x, 0))
        .collect();
    let mut rng = XorShift::new(seed ^ (u64::from(f) << 32));
    for i in 0..count {
        let x = match i % 3 {
            0 => rng.any_i32(),
            1 => rng.log_uniform(),
            _ => special(&mut rng, f),
        };
        inputs.push((x, 0));
    }
    inputs
}

/// Neighbours (±8) of the Q(f) points nearest to each real threshold in `reals`.
fn around(reals: &[f64], f: u32) -> Vec<i32> {
    let mut out = Vec::new();
    for &r in reals {
        if r.is_finite() && r.abs() * pow2(f) < 2.2e9 {
            let c = i64::from(to_q(r, f));
            out.extend((c - 8..=c + 8).filter_map(|v| i32::try_from(v).ok()));
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// 256-bit fixed-point reference
// ---------------------------------------------------------------------------------------------

const WORDS: usize = 6;
/// Fraction bits of `Big`: 4 words of fraction, 2 of integer part.
const BIG_FRAC: u32 = 256;

/// A real as sign and magnitude: magnitude · 2^-256 in 6 little-endian 64-bit words. Products
/// truncate; every reference function keeps more than 190 correct bits, far more than the
/// 2^-100 ulp a verdict needs.
#[derive(Clone, Copy, Debug)]
struct Big {
    neg: bool,
    mag: [u64; WORDS],
}

fn mag_cmp(a: &[u64; WORDS], b: &[u64; WORDS]) -> Ordering {
    a.iter().rev().cmp(b.iter().rev())
}

fn mag_add(a: &[u64; WORDS], b: &[u64; WORDS]) -> [u64; WORDS] {
    let mut out = [0u64; WORDS];
    let mut carry = false;
    for (o, (&x, &y)) in out.iter_mut().zip(a.iter().zip(b)) {
        let (s1, c1) = x.overflowing_add(y);
        let (s2, c2) = s1.overflowing_add(u64::from(carry));
        *o = s2;
        carry = c1 || c2;
    }
    assert!(!carry, "Big overflow in addition");
    out
}

/// a − b for a ≥ b.
fn mag_sub(a: &[u64; WORDS], b: &[u64; WORDS]) -> [u64; WORDS] {
    let mut out = [0u64; WORDS];
    let mut borrow = false;
    for (o, (&x, &y)) in out.iter_mut().zip(a.iter().zip(b)) {
        let (d1, b1) = x.overflowing_sub(y);
        let (d2, b2) = d1.overflowing_sub(u64::from(borrow));
        *o = d2;
        borrow = b1 || b2;
    }
    assert!(!borrow, "Big subtraction underflow");
    out
}

impl Big {
    const ZERO: Big = Big {
        neg: false,
        mag: [0; WORDS],
    };

    fn int(v: i128) -> Big {
        let m = v.unsigned_abs();
        let mut mag = [0u64; WORDS];
        mag[4] = m as u64;
        mag[5] = (m >> 64) as u64;
        Big { neg: v < 0, mag }
    }

    /// x / 2^f exactly.
    fn ratio(x: i64, f: u32) -> Big {
        Big::int(i128::from(x)).shr(f)
    }

    fn is_zero(&self) -> bool {
        self.mag.iter().all(|&w| w == 0)
    }

    fn negate(self) -> Big {
        Big {
            neg: !self.neg && !self.is_zero(),
            mag: self.mag,
        }
    }

    fn abs(self) -> Big {
        Big {
            neg: false,
            mag: self.mag,
        }
    }

    fn is_negative(&self) -> bool {
        self.neg && !self.is_zero()
    }

    fn add(self, o: Big) -> Big {
        if self.neg == o.neg {
            return Big {
                neg: self.neg,
                mag: mag_add(&self.mag, &o.mag),
            };
        }
        match mag_cmp(&self.mag, &o.mag) {
            Ordering::Less => Big {
                neg: o.neg,
                mag: mag_sub(&o.mag, &self.mag),
            },
            _ => {
                let mag = mag_sub(&self.mag, &o.mag);
                let neg = self.neg && mag.iter().any(|&w| w != 0);
                Big { neg, mag }
            }
        }
    }

    fn sub(self, o: Big) -> Big {
        self.add(o.negate())
    }

    fn shl(self, n: u32) -> Big {
        let mut mag = [0u64; WORDS];
        let (ws, bs) = ((n / 64) as usize, n % 64);
        for i in (0..WORDS).rev() {
            if i < ws {
                continue;
            }
            let lo = self.mag[i - ws];
            let below = if i > ws && bs > 0 {
                self.mag[i - ws - 1] >> (64 - bs)
            } else {
                0
            };
            mag[i] = if bs > 0 { (lo << bs) | below } else { lo };
        }
        assert_eq!(
            Big { neg: false, mag }.shr(n).mag,
            self.mag,
            "Big overflow in shift"
        );
        Big { neg: self.neg, mag }
    }

    fn shr(self, n: u32) -> Big {
        let mut mag = [0u64; WORDS];
        let (ws, bs) = ((n / 64) as usize, n % 64);
        for (i, m) in mag.iter_mut().enumerate() {
            let Some(&lo) = self.mag.get(i + ws) else {
                break;
            };
            let above = self.mag.get(i + ws + 1).copied().unwrap_or(0);
            *m = if bs > 0 {
                (lo >> bs) | (above << (64 - bs))
            } else {
                lo
            };
        }
        Big {
            neg: self.neg && mag.iter().any(|&w| w != 0),
            mag,
        }
    }

    fn mul(self, o: Big) -> Big {
        let mut r = [0u64; 2 * WORDS];
        for i in 0..WORDS {
            let mut carry = 0u128;
            for j in 0..WORDS {
                let t =
                    u128::from(self.mag[i]) * u128::from(o.mag[j]) + u128::from(r[i + j]) + carry;
                r[i + j] = t as u64;
                carry = t >> 64;
            }
            r[i + WORDS] = carry as u64;
        }
        assert!(r[10] == 0 && r[11] == 0, "Big overflow in product");
        let mut mag = [0u64; WORDS];
        mag.copy_from_slice(&r[4..10]);
        let neg = (self.neg != o.neg) && mag.iter().any(|&w| w != 0);
        Big { neg, mag }
    }

    fn mul_u(self, m: u64) -> Big {
        let mut mag = [0u64; WORDS];
        let mut carry = 0u128;
        for (o, &w) in mag.iter_mut().zip(&self.mag) {
            let t = u128::from(w) * u128::from(m) + carry;
            *o = t as u64;
            carry = t >> 64;
        }
        assert_eq!(carry, 0, "Big overflow in mul_u");
        Big { neg: self.neg, mag }
    }

    fn div_u(self, d: u64) -> Big {
        let mut mag = [0u64; WORDS];
        let mut rem = 0u128;
        for i in (0..WORDS).rev() {
            let cur = (rem << 64) | u128::from(self.mag[i]);
            mag[i] = (cur / u128::from(d)) as u64;
            rem = cur % u128::from(d);
        }
        Big {
            neg: self.neg && mag.iter().any(|&w| w != 0),
            mag,
        }
    }

    fn to_f64(self) -> f64 {
        let mut v = 0.0;
        for (i, &w) in self.mag.iter().enumerate() {
            v += w as f64 * 2f64.powi(64 * i as i32 - BIG_FRAC as i32);
        }
        if self.neg { -v } else { v }
    }

    fn from_f64(v: f64) -> Big {
        if v == 0.0 || !v.is_normal() {
            return Big::ZERO;
        }
        let bits = v.abs().to_bits();
        let e = ((bits >> 52) & 0x7ff) as i32 - 1075;
        let m = (bits & ((1 << 52) - 1)) | (1 << 52);
        let b = Big::int(i128::from(m));
        let b = if e >= 0 {
            b.shl(e as u32)
        } else {
            b.shr((-e) as u32)
        };
        if v < 0.0 { b.negate() } else { b }
    }

    fn recip(self) -> Big {
        let mut y = Big::from_f64(1.0 / self.to_f64());
        for _ in 0..4 {
            y = y.mul(Big::int(2).sub(self.mul(y)));
        }
        y
    }

    fn div(self, o: Big) -> Big {
        self.mul(o.recip())
    }

    fn sqrt(self) -> Big {
        if self.is_zero() {
            return Big::ZERO;
        }
        let mut y = Big::from_f64(self.to_f64().sqrt());
        for _ in 0..4 {
            y = y.add(self.div(y)).shr(1);
        }
        y
    }

    /// The value · 2^f rounded to an integer, halves away from zero, with the distance of
    /// its fraction from 1/2 and the value · 2^f as f64.
    fn rounding(self, f: u32) -> (i128, f64, f64) {
        let s = self.abs().shl(f);
        let int = i128::from(s.mag[4]) | (i128::from(s.mag[5]) << 64);
        let frac = Big {
            neg: false,
            mag: [s.mag[0], s.mag[1], s.mag[2], s.mag[3], 0, 0],
        };
        let half = Big {
            neg: false,
            mag: [0, 0, 0, 1 << 63, 0, 0],
        };
        let tie_distance = frac.sub(half).abs().to_f64();
        // Within 2^-150 of a half: an exact tie (only powers produce them), away from zero.
        let up = frac.mag[3] >> 63 == 1 || tie_distance < 2f64.powi(-150);
        let m = int + i128::from(up);
        let r = s.to_f64();
        if self.is_negative() {
            (-m, tie_distance, -r)
        } else {
            (m, tie_distance, r)
        }
    }
}

// Constants of the reference, from their textbook series.

/// π = 16·atan(1/5) − 4·atan(1/239) (Machin).
fn big_pi() -> Big {
    static PI: OnceLock<Big> = OnceLock::new();
    *PI.get_or_init(|| {
        let atan_inv = |n: u64| {
            let mut power = Big::int(1).div_u(n);
            let mut sum = power;
            let mut k = 1u64;
            while !power.is_zero() {
                power = power.div_u(n * n);
                k += 2;
                let term = power.div_u(k);
                sum = if k % 4 == 3 {
                    sum.sub(term)
                } else {
                    sum.add(term)
                };
            }
            sum
        };
        atan_inv(5).mul_u(16).sub(atan_inv(239).mul_u(4))
    })
}

/// ln 2 = Σ 1/(k·2^k).
fn big_ln2() -> Big {
    static LN2: OnceLock<Big> = OnceLock::new();
    *LN2.get_or_init(|| {
        let mut sum = Big::ZERO;
        let mut power = Big::int(1);
        for k in 1..400u64 {
            power = power.shr(1);
            sum = sum.add(power.div_u(k));
        }
        sum
    })
}

fn big_ln10() -> Big {
    static LN10: OnceLock<Big> = OnceLock::new();
    *LN10.get_or_init(|| big_ln(Big::int(10)))
}

/// e^a: Taylor series of a/2^16, squared 16 times. None when e^a would not fit.
fn big_exp(a: Big) -> Option<Big> {
    let v = a.to_f64();
    if v > 80.0 {
        return None;
    }
    if v < -80.0 {
        return Some(Big::ZERO);
    }
    if a.is_negative() {
        return big_exp(a.negate()).map(Big::recip);
    }
    let s = a.shr(16);
    let mut term = Big::int(1);
    let mut sum = term;
    let mut n = 1u64;
    while !term.is_zero() {
        term = term.mul(s).div_u(n);
        sum = sum.add(term);
        n += 1;
    }
    for _ in 0..16 {
        sum = sum.mul(sum);
    }
    Some(sum)
}

/// ln v (v > 0) by Newton's iteration y ← y + 2(v − e^y)/(v + e^y) from the f64 logarithm.
fn big_ln(v: Big) -> Big {
    let mut y = Big::from_f64(v.to_f64().ln());
    for _ in 0..3 {
        let e = big_exp(y).expect("ln argument in range");
        y = y.add(v.sub(e).div(v.add(e)).shl(1));
    }
    y
}

/// (sin, cos) of a by reduction with the reference π and Taylor series.
fn big_sin_cos(a: Big) -> (Big, Big) {
    let half_pi = big_pi().shr(1);
    let k = (a.to_f64() / std::f64::consts::FRAC_PI_2).round() as i64;
    let r = a.sub(half_pi.mul_u(k.unsigned_abs()).negate_if(k < 0));
    let r2 = r.mul(r);
    let (mut s, mut c) = (r, Big::int(1));
    let (mut ts, mut tc) = (r, Big::int(1));
    let mut n = 1u64;
    while !(ts.is_zero() && tc.is_zero()) {
        ts = ts.mul(r2).div_u((2 * n) * (2 * n + 1)).negate();
        tc = tc.mul(r2).div_u((2 * n - 1) * (2 * n)).negate();
        s = s.add(ts);
        c = c.add(tc);
        n += 1;
    }
    match k.rem_euclid(4) {
        0 => (s, c),
        1 => (c, s.negate()),
        2 => (s.negate(), c.negate()),
        _ => (c.negate(), s),
    }
}

impl Big {
    fn negate_if(self, neg: bool) -> Big {
        if neg { self.negate() } else { self }
    }
}

/// atan z: reciprocal above 1, three argument halvings z/(1 + √(1 + z²)), Taylor series.
fn big_atan(z: Big) -> Big {
    let neg = z.is_negative();
    let mut z = z.abs();
    let one = Big::int(1);
    let flip = mag_cmp(&z.mag, &one.mag) == Ordering::Greater;
    if flip {
        z = z.recip();
    }
    for _ in 0..3 {
        z = z.div(one.add(one.add(z.mul(z)).sqrt()));
    }
    let z2 = z.mul(z);
    let mut power = z;
    let mut sum = z;
    let mut k = 1u64;
    while !power.is_zero() {
        power = power.mul(z2).negate();
        k += 2;
        sum = sum.add(power.div_u(k));
    }
    let mut v = sum.shl(3);
    if flip {
        v = big_pi().shr(1).sub(v);
    }
    v.negate_if(neg)
}

/// erf a = (2/√π)·e^(−a²)·Σ 2^n a^(2n+1)/(1·3···(2n+1)) (all terms positive).
fn big_erf(a: Big) -> Option<Big> {
    if a.to_f64().abs() > 6.0 {
        return None;
    }
    let a2 = a.mul(a);
    let mut term = a;
    let mut sum = a;
    let mut n = 1u64;
    while !term.is_zero() {
        term = term.mul(a2).shl(1).div_u(2 * n + 1);
        sum = sum.add(term);
        n += 1;
    }
    let factor = big_exp(a2.negate())?.div(big_pi().sqrt()).shl(1);
    Some(sum.mul(factor))
}

// ---------------------------------------------------------------------------------------------
// The check of one function
// ---------------------------------------------------------------------------------------------

/// The f64 reference of a real result.
enum Truth {
    /// The real result is undefined.
    Domain,
    /// The real result, as f64.
    Value(f64),
}

/// One function under test with its references.
#[derive(Clone, Copy)]
struct Func {
    name: &'static str,
    engine: fn(i32, i32, u32) -> FixedResult,
    reference: fn(i32, i32, u32) -> Truth,
    /// The exact real result (None where the reference does not reach; never when needed).
    exact: fn(i32, i32, u32) -> Option<Big>,
    /// Error bound of `reference`: relative, plus absolute (in real units).
    rel: f64,
    abs: f64,
    /// The largest error allowed, in ulp.
    allowed: f64,
}

#[derive(Default, Clone, Copy)]
struct Stats {
    inputs: u64,
    max_err: f64,
    correct: u64,
    overflow: u64,
    domain: u64,
    resolved_exactly: u64,
}

impl Stats {
    fn merge(self, o: Stats) -> Stats {
        Stats {
            inputs: self.inputs + o.inputs,
            max_err: self.max_err.max(o.max_err),
            correct: self.correct + o.correct,
            overflow: self.overflow + o.overflow,
            domain: self.domain + o.domain,
            resolved_exactly: self.resolved_exactly + o.resolved_exactly,
        }
    }
}

const I32_MIN: i128 = i32::MIN as i128;
const I32_MAX: i128 = i32::MAX as i128;

/// Whether the exact value r (in ulp) lies within 1 ulp of where rounding leaves i32.
fn near_limit(r: f64) -> bool {
    r > I32_MAX as f64 - 0.5 && r < I32_MAX as f64 + 1.5
        || r < I32_MIN as f64 + 0.5 && r > I32_MIN as f64 - 1.5
}

/// Checks one input: the engine against the exact verdict.
fn check(func: &Func, x: i32, y: i32, f: u32, sample: bool, stats: &mut Stats) {
    stats.inputs += 1;
    let got = (func.engine)(x, y, f);
    let what = || format!("{}(x = {x}, y = {y}, f = {f}) = {got:?}", func.name);
    let v = match (func.reference)(x, y, f) {
        Truth::Domain => {
            assert_eq!(got, Err(FixedError::Domain), "{}: undefined", what());
            stats.domain += 1;
            stats.correct += 1;
            return;
        }
        Truth::Value(v) => v,
    };
    assert_ne!(
        got,
        Err(FixedError::Domain),
        "{}: defined, value {v}",
        what()
    );
    let r64 = v * pow2(f);
    let bound = (v.abs() * func.rel + func.abs) * pow2(f);
    // (rounded value, exact value in ulp), None for far beyond i32.
    let verdict: Option<(i128, f64)> = if !r64.is_finite() || r64.abs() > 1e12 {
        None
    } else {
        let tie_distance = (r64 - r64.floor() - 0.5).abs();
        let marginal = tie_distance <= bound;
        if marginal || sample {
            match (func.exact)(x, y, f) {
                Some(big) => {
                    let (rounded, _, r) = big.rounding(f);
                    assert!(
                        (r - r64).abs() <= bound.max(1e-300) || r.abs() > 1e12,
                        "{}: f64 reference {r64} outside its bound {bound} of {r}",
                        what()
                    );
                    stats.resolved_exactly += u64::from(marginal);
                    Some((rounded, r))
                }
                None => {
                    assert!(
                        !marginal,
                        "{}: marginal case without exact reference",
                        what()
                    );
                    Some((round_away(r64), r64))
                }
            }
        } else {
            Some((round_away(r64), r64))
        }
    };
    let fits = |e: i128| (I32_MIN..=I32_MAX).contains(&e);
    match (got, verdict) {
        (Err(FixedError::Overflow), None) => {
            stats.overflow += 1;
            stats.correct += 1;
        }
        (Err(FixedError::Overflow), Some((e, r))) => {
            assert!(
                !fits(e) || near_limit(r),
                "{}: fits, exact value {r} ulp",
                what()
            );
            stats.overflow += 1;
            stats.correct += u64::from(!fits(e));
        }
        (Ok(g), verdict) => {
            let Some((e, r)) = verdict else {
                panic!("{}: exact value far beyond i32", what());
            };
            assert!(
                fits(e) || near_limit(r),
                "{}: overflow expected, exact {r} ulp",
                what()
            );
            let err = (f64::from(g) - r).abs();
            assert!(
                err <= func.allowed,
                "{}: error {err} ulp (exact value {r} ulp)",
                what()
            );
            stats.max_err = stats.max_err.max(err);
            stats.correct += u64::from(i128::from(g) == e);
        }
        (Err(FixedError::Domain), _) => unreachable!(),
    }
}

/// Nearest integer, halves away from zero.
fn round_away(r: f64) -> i128 {
    r.round() as i128
}

/// The lines of one family's table, printed as one block when the test ends (also when an
/// assertion fails), so tests running in parallel do not interleave their lines.
struct Table(Vec<String>);

impl Table {
    fn new(family: &str) -> Table {
        Table(vec![
            family.to_string(),
            "| function    |  f | inputs     |     count | max ulp | correctly rounded   | Overflow |  Domain | exact |"
                .to_string(),
        ])
    }

    fn row(&mut self, name: &str, f: u32, kind: &str, s: &Stats) {
        let all = if s.correct == s.inputs {
            "all"
        } else {
            "NOT all"
        };
        self.0.push(format!(
            "| {name:<11} | {f:>2} | {kind:<10} | {:>9} | {:>7.3} | {:>9} {all:<9} | {:>8} | {:>7} | {:>5} |",
            s.inputs, s.max_err, s.correct, s.overflow, s.domain, s.resolved_exactly
        ));
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        eprintln!("{}\n", self.0.join("\n"));
    }
}

/// Runs `func` over `inputs` at f on two threads, adds its table line and asserts that every
/// result was the correctly rounded one (the module's documented claim; the contract's 1 ulp
/// bound is asserted per input by `check`).
fn run(table: &mut Table, func: &Func, f: u32, inputs: &[(i32, i32)], kind: &str) -> Stats {
    let half = inputs.len() / 2;
    let (a, b) = inputs.split_at(half);
    let stats = std::thread::scope(|scope| {
        let work = |part: &[(i32, i32)], offset: usize| {
            let mut stats = Stats::default();
            for (i, &(x, y)) in part.iter().enumerate() {
                check(
                    func,
                    x,
                    y,
                    f,
                    (i + offset).is_multiple_of(SAMPLE_EVERY),
                    &mut stats,
                );
            }
            stats
        };
        let first = scope.spawn(move || work(a, 0));
        let second = work(b, half);
        first.join().expect("worker").merge(second)
    });
    table.row(func.name, f, kind, &stats);
    assert_eq!(
        stats.correct, stats.inputs,
        "{} f = {f}: not every result correctly rounded",
        func.name
    );
    stats
}

/// Exhaustive and random runs of `func`; `special` draws from its interesting region and
/// `edges` lists extra edge inputs per f.
fn run_all(
    table: &mut Table,
    func: &Func,
    seed: u64,
    edges: impl Fn(u32) -> Vec<i32>,
    special: impl Fn(&mut XorShift, u32) -> i32 + Copy,
) {
    let exhaustive = exhaustive_inputs();
    for f in EXHAUSTIVE_F {
        run(table, func, f, &exhaustive, "exhaustive");
    }
    for f in RANDOM_F {
        let inputs = random_inputs(seed, f, RANDOM_COUNT, &edges(f), special);
        assert!(inputs.len() > RANDOM_COUNT);
        run(table, func, f, &inputs, "random");
    }
    for f in EXTRA_F {
        let inputs = random_inputs(seed, f, EXTRA_COUNT, &edges(f), special);
        run(table, func, f, &inputs, "random");
    }
}

/// Unary wrappers: (x, _, f).
macro_rules! unary {
    ($f:path) => {
        |x: i32, _: i32, f: u32| $f(x, f)
    };
}

/// Bounds of libm results: a few ulp relative, plus a tiny absolute floor.
const LIBM_REL: f64 = 1.0 / (1u64 << 46) as f64;
const LIBM_ABS: f64 = 1.0 / (1u64 << 60) as f64;
/// Bounds of formula-based f64 references (composed libm calls, or an f64 series).
const COMPOSED_REL: f64 = 1.0 / (1u64 << 42) as f64;
const COMPOSED_ABS: f64 = 1.0 / (1u64 << 50) as f64;

fn value(v: f64) -> Truth {
    Truth::Value(v)
}

fn big_arg(x: i32, f: u32) -> Big {
    Big::ratio(i64::from(x), f)
}

// ---------------------------------------------------------------------------------------------
// The families
// ---------------------------------------------------------------------------------------------

#[test]
fn exponential() {
    let mut table = Table::new("exp");
    let func = Func {
        name: "exp",
        engine: unary!(fixed::exp),
        reference: |x, _, f| value(real_of(x, f).exp()),
        exact: |x, _, f| big_exp(big_arg(x, f)),
        rel: LIBM_REL,
        abs: LIBM_ABS,
        allowed: 1.0,
    };
    run_all(
        &mut table,
        &func,
        1,
        |f| around(&[(2f64.powi(31) / pow2(f)).ln(), (0.5 / pow2(f)).ln()], f),
        |rng, f| rng.real(-24.0, 24.0, f),
    );
}

#[test]
fn logarithms() {
    let mut table = Table::new("log, log2, log10");
    let positive = |x: i32| x > 0;
    let funcs = [
        Func {
            name: "log",
            engine: unary!(fixed::log),
            reference: |x, _, f| {
                if x > 0 {
                    value(real_of(x, f).ln())
                } else {
                    Truth::Domain
                }
            },
            exact: |x, _, f| Some(big_ln(big_arg(x, f))),
            rel: LIBM_REL,
            abs: LIBM_ABS,
            allowed: 1.0,
        },
        Func {
            name: "log2",
            engine: unary!(fixed::log2),
            reference: |x, _, f| {
                if x > 0 {
                    value(real_of(x, f).log2())
                } else {
                    Truth::Domain
                }
            },
            exact: |x, _, f| Some(big_ln(big_arg(x, f)).div(big_ln2())),
            rel: LIBM_REL,
            abs: LIBM_ABS,
            allowed: 1.0,
        },
        Func {
            name: "log10",
            engine: unary!(fixed::log10),
            reference: |x, _, f| {
                if x > 0 {
                    value(real_of(x, f).log10())
                } else {
                    Truth::Domain
                }
            },
            exact: |x, _, f| Some(big_ln(big_arg(x, f)).div(big_ln10())),
            rel: LIBM_REL,
            abs: LIBM_ABS,
            allowed: 1.0,
        },
    ];
    for func in &funcs {
        run_all(
            &mut table,
            func,
            2,
            // Where the result reaches −2^31 ulp at large f.
            |f| around(&[(-(2f64.powi(31)) / pow2(f)).exp(), 1.0], f),
            move |rng, f| {
                let x = rng.log_uniform().unsigned_abs().min(i32::MAX as u32) as i32;
                if rng.below(2) == 0 && positive(x) {
                    x
                } else {
                    rng.real(0.5, 2.0, f)
                }
            },
        );
    }
}

/// ⌊√n⌋ for a u128, by f64 estimate and integer correction.
fn floor_sqrt(n: u128) -> u128 {
    let mut s = (n as f64).sqrt() as u128;
    while s * s > n {
        s -= 1;
    }
    while (s + 1) * (s + 1) <= n {
        s += 1;
    }
    s
}

/// The exact rounding of √(num/den) (ties away), with the exact value as f64.
fn rounded_root(num: u128, den: u128) -> (i128, f64) {
    let s = floor_sqrt(num / den);
    let up = (2 * s + 1) * (2 * s + 1) * den <= 4 * num;
    (
        (s + u128::from(up)) as i128,
        (num as f64 / den as f64).sqrt(),
    )
}

#[test]
fn square_roots() {
    let mut table = Table::new("sqrt, rsqrt (exact integer reference)");
    type Root = fn(i32, u32) -> FixedResult;
    type Exact = fn(i32, u32) -> Option<(i128, f64)>;
    let cases: [(&str, Root, Exact); 2] = [
        ("sqrt", fixed::sqrt, |x, f| {
            (x >= 0).then(|| rounded_root((x as u128) << f, 1))
        }),
        ("rsqrt", fixed::rsqrt, |x, f| {
            (x > 0).then(|| rounded_root(1u128 << (3 * f), x as u128))
        }),
    ];
    for (name, engine, exact) in cases {
        let mut check_all = |f: u32, inputs: &[(i32, i32)], kind: &str| {
            let mut s = Stats::default();
            for &(x, _) in inputs {
                s.inputs += 1;
                let got = engine(x, f);
                match exact(x, f) {
                    None => {
                        assert_eq!(got, Err(FixedError::Domain), "{name}({x}, {f})");
                        s.domain += 1;
                        s.correct += 1;
                    }
                    Some((e, _)) if e > I32_MAX => {
                        assert_eq!(got, Err(FixedError::Overflow), "{name}({x}, {f})");
                        s.overflow += 1;
                        s.correct += 1;
                    }
                    Some((e, r)) => {
                        assert_eq!(got, Ok(e as i32), "{name}({x}, {f}): exact {r}");
                        s.max_err = s.max_err.max((e as f64 - r).abs());
                        s.correct += 1;
                    }
                }
            }
            table.row(name, f, kind, &s);
        };
        for f in EXHAUSTIVE_F {
            check_all(f, &exhaustive_inputs(), "exhaustive");
        }
        for f in RANDOM_F {
            let inputs = random_inputs(3, f, RANDOM_COUNT, &[], |rng, _| rng.log_uniform());
            check_all(f, &inputs, "random");
        }
        for f in EXTRA_F {
            let inputs = random_inputs(3, f, EXTRA_COUNT, &[], |rng, _| rng.log_uniform());
            check_all(f, &inputs, "random");
        }
    }
}

/// Inputs near multiples of π/2 (and anywhere), for the trigonometric family.
fn near_half_pi(rng: &mut XorShift, f: u32) -> i32 {
    let max_k = (2f64.powi(31) / pow2(f) / std::f64::consts::FRAC_PI_2).floor() as u64;
    let k = rng.below(max_k.max(1) + 1) as f64;
    let c = k * std::f64::consts::FRAC_PI_2 * pow2(f);
    let d = rng.below(64) as f64 - 32.0;
    let v = (c + d)
        .round()
        .clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32;
    if rng.below(2) == 0 {
        v
    } else {
        v.saturating_neg()
    }
}

#[test]
fn trigonometric() {
    let mut table = Table::new("sin, cos, tan");
    let funcs = [
        Func {
            name: "sin",
            engine: unary!(fixed::sin),
            reference: |x, _, f| value(real_of(x, f).sin()),
            exact: |x, _, f| Some(big_sin_cos(big_arg(x, f)).0),
            rel: LIBM_REL,
            abs: LIBM_ABS,
            allowed: 1.0,
        },
        Func {
            name: "cos",
            engine: unary!(fixed::cos),
            reference: |x, _, f| value(real_of(x, f).cos()),
            exact: |x, _, f| Some(big_sin_cos(big_arg(x, f)).1),
            rel: LIBM_REL,
            abs: LIBM_ABS,
            allowed: 1.0,
        },
        Func {
            name: "tan",
            engine: unary!(fixed::tan),
            reference: |x, _, f| value(real_of(x, f).tan()),
            exact: |x, _, f| {
                let (s, c) = big_sin_cos(big_arg(x, f));
                (s.to_f64().abs() < 1e13 * c.to_f64().abs()).then(|| s.div(c))
            },
            rel: LIBM_REL,
            abs: LIBM_ABS,
            allowed: 1.0,
        },
    ];
    for func in &funcs {
        run_all(&mut table, func, 4, |_| Vec::new(), near_half_pi);
    }
}

#[test]
fn inverse_trigonometric() {
    let mut table = Table::new("asin, acos, atan");
    let funcs = [
        Func {
            name: "asin",
            engine: unary!(fixed::asin),
            reference: |x, _, f| {
                if i64::from(x).abs() <= 1i64 << f {
                    value(real_of(x, f).asin())
                } else {
                    Truth::Domain
                }
            },
            exact: |x, _, f| {
                let a = big_arg(x, f);
                let w = Big::int(1).sub(a.mul(a));
                Some(if w.is_zero() {
                    big_pi().shr(1).negate_if(a.is_negative())
                } else {
                    big_atan(a.div(w.sqrt()))
                })
            },
            rel: LIBM_REL,
            abs: LIBM_ABS,
            allowed: 1.0,
        },
        Func {
            name: "acos",
            engine: unary!(fixed::acos),
            reference: |x, _, f| {
                if i64::from(x).abs() <= 1i64 << f {
                    value(real_of(x, f).acos())
                } else {
                    Truth::Domain
                }
            },
            exact: |x, _, f| {
                let a = big_arg(x, f);
                let w = Big::int(1).sub(a.mul(a));
                let asin = if w.is_zero() {
                    big_pi().shr(1).negate_if(a.is_negative())
                } else {
                    big_atan(a.div(w.sqrt()))
                };
                Some(big_pi().shr(1).sub(asin))
            },
            rel: LIBM_REL,
            abs: LIBM_ABS,
            allowed: 1.0,
        },
        Func {
            name: "atan",
            engine: unary!(fixed::atan),
            reference: |x, _, f| value(real_of(x, f).atan()),
            exact: |x, _, f| Some(big_atan(big_arg(x, f))),
            rel: LIBM_REL,
            abs: LIBM_ABS,
            allowed: 1.0,
        },
    ];
    for func in &funcs {
        run_all(
            &mut table,
            func,
            5,
            // acos reaches 2 (the limit at f = 30) at cos 2.
            |f| around(&[2f64.cos(), 1.0, -1.0, std::f64::consts::FRAC_1_SQRT_2], f),
            |rng, f| match rng.below(3) {
                0 => rng.real(-1.0, 1.0, f),
                1 => rng.real(0.999, 1.0, f),
                _ => rng.real(-1.0, -0.999, f),
            },
        );
    }
}

#[test]
fn hyperbolic() {
    let mut table = Table::new("sinh, cosh, tanh");
    let funcs = [
        Func {
            name: "sinh",
            engine: unary!(fixed::sinh),
            reference: |x, _, f| value(real_of(x, f).sinh()),
            exact: |x, _, f| {
                let a = big_arg(x, f);
                Some(big_exp(a)?.sub(big_exp(a.negate())?).shr(1))
            },
            rel: LIBM_REL,
            abs: LIBM_ABS,
            allowed: 1.0,
        },
        Func {
            name: "cosh",
            engine: unary!(fixed::cosh),
            reference: |x, _, f| value(real_of(x, f).cosh()),
            exact: |x, _, f| {
                let a = big_arg(x, f);
                Some(big_exp(a)?.add(big_exp(a.negate())?).shr(1))
            },
            rel: LIBM_REL,
            abs: LIBM_ABS,
            allowed: 1.0,
        },
        Func {
            name: "tanh",
            engine: unary!(fixed::tanh),
            reference: |x, _, f| value(real_of(x, f).tanh()),
            exact: |x, _, f| {
                let a = big_arg(x, f);
                let e = big_exp(a.shl(1).abs().negate())?;
                let one = Big::int(1);
                Some(one.sub(e).div(one.add(e)).negate_if(a.is_negative()))
            },
            rel: LIBM_REL,
            abs: LIBM_ABS,
            allowed: 1.0,
        },
    ];
    for func in &funcs {
        run_all(
            &mut table,
            func,
            6,
            |f| {
                let limit = 2f64.powi(31) / pow2(f);
                around(
                    &[limit.asinh(), -limit.asinh(), limit.acosh(), 12.0, -12.0],
                    f,
                )
            },
            |rng, f| rng.real(-25.0, 25.0, f),
        );
    }
}

#[test]
fn inverse_hyperbolic() {
    let mut table = Table::new("asinh, acosh, atanh");
    let funcs = [
        Func {
            name: "asinh",
            engine: unary!(fixed::asinh),
            reference: |x, _, f| value(real_of(x, f).asinh()),
            exact: |x, _, f| {
                let a = big_arg(x, f);
                let abs = a.abs();
                let v = big_ln(abs.add(abs.mul(abs).add(Big::int(1)).sqrt()));
                Some(if x == 0 {
                    Big::ZERO
                } else {
                    v.negate_if(a.is_negative())
                })
            },
            rel: COMPOSED_REL,
            abs: COMPOSED_ABS,
            allowed: 1.0,
        },
        Func {
            name: "acosh",
            engine: unary!(fixed::acosh),
            reference: |x, _, f| {
                if i64::from(x) >= 1i64 << f {
                    value(real_of(x, f).acosh())
                } else {
                    Truth::Domain
                }
            },
            exact: |x, _, f| {
                let a = big_arg(x, f);
                Some(big_ln(a.add(a.mul(a).sub(Big::int(1)).sqrt())))
            },
            rel: COMPOSED_REL,
            abs: COMPOSED_ABS,
            allowed: 1.0,
        },
        Func {
            name: "atanh",
            engine: unary!(fixed::atanh),
            reference: |x, _, f| {
                if i64::from(x).abs() < 1i64 << f {
                    value(real_of(x, f).atanh())
                } else {
                    Truth::Domain
                }
            },
            exact: |x, _, f| {
                let a = big_arg(x, f);
                let one = Big::int(1);
                Some(if x == 0 {
                    Big::ZERO
                } else {
                    big_ln(one.add(a).div(one.sub(a))).shr(1)
                })
            },
            rel: COMPOSED_REL,
            abs: COMPOSED_ABS,
            allowed: 1.0,
        },
    ];
    for func in &funcs {
        run_all(
            &mut table,
            func,
            7,
            // atanh reaches 2^31 ulp near ±1 at large f.
            |f| {
                let t = (2f64.powi(31) / pow2(f)).tanh();
                around(&[t, -t, 1.0, -1.0], f)
            },
            |rng, f| match rng.below(3) {
                0 => rng.real(-1.0, 1.0, f),
                1 => rng.real(0.99, 1.01, f),
                _ => rng.real(-1.01, -0.99, f),
            },
        );
    }
}

/// erf in f64: (2/√π)·e^(−a²)·Σ 2^n a^(2n+1)/(2n+1)!! (positive terms, so no cancellation).
fn erf_f64(a: f64) -> f64 {
    if a.abs() >= 6.0 {
        return a.signum();
    }
    let a2 = a * a;
    let mut term = a.abs();
    let mut sum = term;
    let mut n = 1.0;
    while term > sum * 1e-18 {
        term *= 2.0 * a2 / (2.0 * n + 1.0);
        sum += term;
        n += 1.0;
    }
    let v = std::f64::consts::FRAC_2_SQRT_PI * (-a2).exp() * sum;
    if a < 0.0 { -v } else { v }
}

#[test]
fn error_function() {
    let mut table = Table::new("erf");
    let func = Func {
        name: "erf",
        engine: unary!(fixed::erf),
        reference: |x, _, f| value(erf_f64(real_of(x, f))),
        exact: |x, _, f| big_erf(big_arg(x, f)),
        rel: COMPOSED_REL,
        abs: COMPOSED_ABS,
        allowed: 1.0,
    };
    run_all(
        &mut table,
        &func,
        8,
        |f| around(&[4.5, -4.5], f),
        |rng, f| rng.real(-5.0, 5.0, f),
    );
}

/// round(|x|^n / 2^(f(n−1))) exactly (n ≥ 1), with the exact value as f64 (a plain vector of
/// 32-bit limbs).
fn exact_integral_power(x: i32, n: u32, f: u32) -> (i128, f64) {
    let mut limbs: Vec<u64> = vec![1];
    for _ in 0..n {
        let mut carry = 0u64;
        for l in &mut limbs {
            let t = *l * u64::from(x.unsigned_abs()) + carry;
            *l = t & 0xFFFF_FFFF;
            carry = t >> 32;
        }
        while carry > 0 {
            limbs.push(carry & 0xFFFF_FFFF);
            carry >>= 32;
        }
    }
    // Divide by 2^shift: the quotient's low bits and the remainder against half.
    let shift = (f * (n - 1)) as usize;
    let bit = |i: usize| limbs.get(i / 32).is_some_and(|&l| (l >> (i % 32)) & 1 == 1);
    let total = limbs.len() * 32;
    let mut q: u128 = 0;
    let mut big = false;
    for i in (shift..total).rev() {
        if q >> 100 != 0 {
            big = true;
        }
        q = (q << 1) | u128::from(bit(i));
    }
    let half_up = shift > 0 && bit(shift - 1);
    let m = if big {
        u128::MAX >> 1
    } else {
        q + u128::from(half_up)
    };
    let mut r = 0.0;
    for (i, &l) in limbs.iter().enumerate() {
        r += l as f64 * 2f64.powi(32 * i as i32 - shift as i32);
    }
    let negative = x < 0 && n % 2 == 1;
    let m = m as i128;
    if negative { (-m, -r) } else { (m, r) }
}

fn power_truth(x: i32, y: i32, f: u32) -> Truth {
    let (a, b) = (real_of(x, f), real_of(y, f));
    let integral = y >= 0 && y % (1 << f) == 0;
    if integral || x > 0 {
        value(a.powf(b))
    } else {
        Truth::Domain
    }
}

#[test]
fn power() {
    let mut table = Table::new("power (integral y: exact integer reference)");
    let func = Func {
        name: "power",
        engine: fixed::power,
        reference: power_truth,
        exact: |x, y, f| {
            // exp(y·ln|x|) in 256 bits; integral exponents are also checked against exact
            // integers by `integral_powers_are_exact`.
            let integral = y >= 0 && y % (1 << f) == 0;
            let n = (y >> f) as u32;
            if integral && n == 0 {
                return Some(Big::int(1));
            }
            if x == 0 {
                return Some(Big::ZERO);
            }
            let a = big_arg(x, f);
            let b = big_arg(y, f);
            let l = big_ln(a.abs()).mul(b);
            let v = big_exp(l)?;
            let negative = x < 0 && integral && n % 2 == 1;
            Some(v.negate_if(negative))
        },
        rel: LIBM_REL,
        abs: LIBM_ABS,
        allowed: 2.0,
    };
    let pair = |rng: &mut XorShift, f: u32, x: i32| -> (i32, i32) {
        let max_n = (i64::from(i32::MAX) >> f).max(1) as u64;
        let y = match rng.below(5) {
            0 => (rng.below(13.min(max_n + 1)) << f) as i32,
            1 => (rng.below(81.min(max_n + 1)) << f) as i32,
            2 => rng.real(-8.0, 8.0, f),
            3 => rng.log_uniform(),
            _ => rng.any_i32(),
        };
        (x, y)
    };
    // Exact ties of non-integral powers, (u²/2^2t)^(p/2) = u^p/2^(f+1) for odd u: e.g.
    // 2.25^4.5 · 2^8 = 9841.5. None exist at f = 0 or 30.
    let ties = |f: u32| -> Vec<(i32, i32)> {
        match f {
            4 => vec![(4, 40), (36, 40), (100, 40)],
            8 => vec![
                (64, 1152),
                (576, 1152),
                (1600, 1152),
                (4, 384),
                (36, 384),
                (196, 384),
            ],
            12 => vec![(1024, 26_624), (9216, 26_624)],
            16 => vec![(1 << 14, 557_056), (147_456, 557_056)],
            24 => vec![(147_456, 41_943_040), (409_600, 41_943_040)],
            _ => Vec::new(),
        }
    };
    for f in EXHAUSTIVE_F {
        let mut rng = XorShift::new(90 + u64::from(f));
        let mut inputs: Vec<(i32, i32)> = (i32::from(i16::MIN)..=i32::from(i16::MAX))
            .flat_map(|x| [pair(&mut rng, f, x), pair(&mut rng, f, x)])
            .collect();
        inputs.extend(ties(f));
        run(&mut table, &func, f, &inputs, "exhaustive");
        integral_powers_are_exact(f, &inputs);
    }
    let random_runs = RANDOM_F.map(|f| (f, RANDOM_COUNT)).into_iter();
    for (f, count) in random_runs.chain(EXTRA_F.map(|f| (f, EXTRA_COUNT))) {
        let mut rng = XorShift::new(91 + u64::from(f));
        let mut inputs: Vec<(i32, i32)> = vec![
            (0, 0),
            (0, 1 << f),
            (i32::MIN, 0),
            (i32::MIN, 1 << f),
            (i32::MAX, 1 << f),
            (1 << f, i32::MAX),
            (1, -1),
            (i32::MAX, i32::MAX),
            (i32::MAX, i32::MIN),
            (1, i32::MAX),
        ];
        inputs.extend(ties(f));
        for _ in 0..count {
            let x = match rng.below(3) {
                0 => rng.any_i32(),
                1 => rng.log_uniform(),
                _ => rng.real(-4.0, 4.0, f),
            };
            inputs.push(pair(&mut rng, f, x));
        }
        run(&mut table, &func, f, &inputs, "random");
        integral_powers_are_exact(f, &inputs);
    }
}

/// Every integral power with n ≤ 300 against the exact integer result.
fn integral_powers_are_exact(f: u32, inputs: &[(i32, i32)]) {
    for &(x, y) in inputs {
        if y < 0 || y % (1 << f) != 0 {
            continue;
        }
        let n = (y >> f) as u32;
        if n == 0 || n > 300 {
            continue;
        }
        if x.unsigned_abs() > 1 << (f + 1) && n > 40 {
            // |x| > 2 and n > 40: beyond 2^40 ulp, no need for the exact integer.
            assert_eq!(
                fixed::power(x, y, f),
                Err(FixedError::Overflow),
                "power({x}, {y}, {f})"
            );
            continue;
        }
        let (e, r) = exact_integral_power(x, n, f);
        let got = fixed::power(x, y, f);
        if (I32_MIN..=I32_MAX).contains(&e) {
            assert_eq!(got, Ok(e as i32), "power({x}, {y}, {f}): exact {r}");
        } else {
            assert_eq!(
                got,
                Err(FixedError::Overflow),
                "power({x}, {y}, {f}): exact {r}"
            );
        }
    }
}

#[test]
fn rounding_to_integers() {
    let mut table = Table::new(
        "floor, ceil, trunc, round (exact integer reference; max ulp is the distance to it)",
    );
    type Rounding = fn(i32, u32) -> FixedResult;
    type Reference = fn(i64, i64) -> i64;
    let cases: [(&str, Rounding, Reference); 4] = [
        ("floor", fixed::floor, |x, u| x.div_euclid(u) * u),
        ("ceil", fixed::ceil, |x, u| -((-x).div_euclid(u) * u)),
        ("trunc", fixed::trunc, |x, u| x / u * u),
        ("round", fixed::round, |x, u| {
            let m = (x.abs() + u / 2).div_euclid(u) * u;
            if x < 0 { -m } else { m }
        }),
    ];
    for (name, engine, reference) in cases {
        let mut check_all = |f: u32, inputs: &[(i32, i32)], kind: &str| {
            let mut s = Stats::default();
            for &(x, _) in inputs {
                s.inputs += 1;
                let e = reference(i64::from(x), 1i64 << f);
                let got = engine(x, f);
                match i32::try_from(e) {
                    Ok(e) => assert_eq!(got, Ok(e), "{name}({x}, {f})"),
                    Err(_) => {
                        assert_eq!(got, Err(FixedError::Overflow), "{name}({x}, {f})");
                        s.overflow += 1;
                    }
                }
                s.correct += 1;
            }
            table.row(name, f, kind, &s);
        };
        for f in EXHAUSTIVE_F {
            check_all(f, &exhaustive_inputs(), "exhaustive");
        }
        for f in RANDOM_F {
            // Just above the largest multiple of 2^f, where ceil and round overflow.
            let top = i32::MAX - (1 << f) + 2;
            let edges = [top, top - 1, top - 2];
            let inputs = random_inputs(9, f, RANDOM_COUNT, &edges, |rng, _| rng.any_i32());
            check_all(f, &inputs, "random");
        }
        for f in [0, 1, 30] {
            check_all(f, &exhaustive_inputs(), "exhaustive");
        }
    }
}

#[test]
fn round_shift_is_exact() {
    let mut table = Table::new(
        "round_shift (exact: remainder compared with half the divisor; f column unused)",
    );
    let mut rng = XorShift::new(10);
    let mut s = Stats::default();
    let mut values: Vec<(i128, u32)> = vec![
        (i128::MIN, 128),
        (i128::MIN, 127),
        (i128::MIN, 96),
        (i128::MIN, 95),
        (i128::MAX, 128),
        (i128::MAX, 0),
        (0, 0),
        (-1, 1),
        (1, 1),
        (-3, 1),
        (i128::from(i32::MAX) * 2 + 1, 1),
        (i128::from(i32::MIN) * 2 - 1, 1),
    ];
    for _ in 0..RANDOM_COUNT {
        let hi = rng.next() as i64;
        let v = ((i128::from(hi) << 64) | i128::from(rng.next())) >> rng.below(127);
        values.push((v, rng.below(140) as u32));
    }
    for (v, shift) in values {
        s.inputs += 1;
        let m = v.unsigned_abs();
        let expected = if shift >= 129 {
            0
        } else {
            // q = ⌊m / 2^shift⌋, up when the remainder is at least half of 2^shift.
            let (q, rem, half) = if shift == 128 {
                (0, m, 1u128 << 127)
            } else {
                (
                    m >> shift,
                    m & ((1u128 << shift) - 1),
                    if shift == 0 { 1 } else { 1u128 << (shift - 1) },
                )
            };
            q + u128::from(shift > 0 && rem >= half)
        };
        let signed = i128::try_from(expected)
            .ok()
            .map(|e| if v < 0 { -e } else { e })
            .and_then(|e| i32::try_from(e).ok());
        let got = fixed::round_shift(v, shift);
        match signed {
            Some(e) => assert_eq!(got, Ok(e), "round_shift({v}, {shift})"),
            None => {
                assert_eq!(got, Err(FixedError::Overflow), "round_shift({v}, {shift})");
                s.overflow += 1;
            }
        }
        s.correct += 1;
    }
    table.row("round_shift", 0, "random", &s);
}
