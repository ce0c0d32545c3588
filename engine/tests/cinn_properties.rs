//! Property tests of every CINN primitive (spec 002) against a second, plain implementation.
//!
//! For each CINN row of the operator table (`ops::OPS` with `family == Family::Cinn`) a generator
//! draws random shapes, attributes and values: int32 within ±(2^31 − 1), biased toward 0, ±1,
//! ±2^F, halves of 2^F, ±(2^31 − 1) and each primitive's overflow and domain thresholds;
//! `frac_bits` F in 0..=30 (biased to 0, 8, 16, 30), now and then absent or out of range; shapes
//! of rank 0..=4 with empty and size-1 axes and numpy broadcasting. A reference written here
//! from spec 002 and the operators' documented fixed-point meaning (index-by-index loops over
//! every output element, arithmetic in i64/i128, nothing taken from the engine) gives the
//! verdict: a refusal with its error code, or the output shapes, precisions and values.
//!
//! The engine must agree exactly, except for the transcendental unary functions, whose
//! reference is the real function in f64 (erf: an f64 series) and whose check is the operator
//! contract |engine − exact| ≤ 1 ulp (2^−F); `engine/tests/fixed_accuracy.rs` proves the
//! correct rounding itself, here the operator wiring is tested: shapes, frac_bits, domains and
//! overflow. Power is exact for integral exponents (a big-integer or interval reference) and
//! within 2 ulp of f64 otherwise. Errors must match: `IntegerOverflow` exactly when a result
//! lies outside ±(2^31 − 1) (either answer allowed within the tolerance of that limit for the
//! f64-based references), `DomainError` and `DivisionByZero` exactly where the result is
//! undefined, and the same refusal code as the reference for bad attributes and shapes, raised
//! before `run` (value errors only in `run`, at the first failing element in row-major order).
//!
//! Every property has a fixed seed; a failure names the primitive, the case number, the
//! attributes, the inputs and the first differing element.
//! `cargo test -p cvm-engine --test cinn_properties -- --nocapture` prints, per primitive, the
//! cases computed, refused and failed at run time, and the largest error of the f64-based ones.
//! The harness (the build through the table, the comparison, the report) is
//! `common/property.rs`, shared with `properties.rs`; this file holds the generators and the
//! references.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic,
    clippy::cast_precision_loss
)] // a failing property reports by panicking; the transcendental references compute in f64

mod common;

use common::Rng;
use common::property::{
    Case, Expect, MAX, Suite, Want, at, bound, concat_at, concat_dims, exact, expect, flat,
    indices, near, numel, tensor,
};

use cvm_engine::error::ErrorCode;
use cvm_engine::model::AttrValue;
use cvm_engine::ops::{Family, OpDef};
use cvm_engine::tensor::Tensor;

/// The CINN primitives; a case with an unknown attribute (2%) must be refused with
/// `UnknownAttribute`.
const CINN: Suite<ErrorCode> = Suite {
    what: "CINN primitive",
    covers: |def| def.family == Family::Cinn,
    spoil: unknown_attribute,
};

fn unknown_attribute(rng: &mut Rng, case: &mut Case, _: &OpDef) -> Option<ErrorCode> {
    if rng.chance(2) {
        case.set("no_such_attribute", int(1));
        Some(ErrorCode::UnknownAttribute)
    } else {
        None
    }
}

// ---------------------------------------------------------------------------------------------
// Deterministic random numbers
// ---------------------------------------------------------------------------------------------

impl Rng {
    fn sign(&mut self) -> i64 {
        if self.chance(50) { 1 } else { -1 }
    }

    /// F in 0..=30, biased toward 0, 8, 16 and 30.
    fn frac(&mut self) -> u32 {
        match self.below(10) {
            0 | 1 => 0,
            2 => 8,
            3 => 16,
            4 => 30,
            _ => self.range(0, 30) as u32,
        }
    }

    /// Sets `frac_bits` on `case` (usually a valid F, sometimes absent, sometimes out of range)
    /// and returns the F values should be drawn for.
    fn frac_attr(&mut self, case: &mut Case) -> u32 {
        match self.below(100) {
            0..=6 => 0,
            7..=9 => {
                case.set("frac_bits", AttrValue::Int(self.pick(&[31, 32, -1, 64])));
                self.frac()
            }
            _ => {
                let f = self.frac();
                case.set("frac_bits", AttrValue::Int(i64::from(f)));
                f
            }
        }
    }

    /// A precision in 1..=32, biased toward 32 and the edges.
    fn precision(&mut self) -> u8 {
        match self.below(4) {
            0 => self.pick(&[1, 2, 8, 16, 31]),
            1 => self.range(1, 32) as u8,
            _ => 32,
        }
    }

    /// A value of Q(f) within ±(2^31 − 1): often 0, ±1, ±2^F (and neighbours), ±(2^31 − 1)
    /// (and neighbours), small integers and halves of 2^F, a value of `special`, a log-uniform
    /// magnitude, else uniform.
    fn value(&mut self, f: u32, special: &[i64]) -> i64 {
        let one = 1i64 << f;
        let v = match self.below(16) {
            0 => 0,
            1 => self.sign(),
            2 => self.sign() * one,
            3 => self.sign() * (one + self.range(-2, 2)),
            4 => self.sign() * MAX,
            5 => self.sign() * (MAX - self.range(1, 3)),
            6 | 7 => {
                let half = one / 2;
                let k = self.range(-4, 4);
                k * one + self.pick(&[0, half, -half, half + 1, half - 1, 1, -1])
            }
            8..=10 if !special.is_empty() => self.pick(special),
            11 | 12 => {
                let bits = self.range(0, 31);
                self.sign() * self.range(0, (1i64 << bits) - 1)
            }
            _ => self.range(-MAX, MAX),
        };
        v.clamp(-MAX, MAX)
    }

    /// `n` values of Q(f), in one of several styles per tensor: mixed, small, extreme, special.
    fn values(&mut self, n: usize, f: u32, special: &[i64]) -> Vec<i64> {
        let one = 1i64 << f;
        match self.below(12) {
            0 | 1 => (0..n)
                .map(|_| {
                    (self.range(-8, 8) * (one / 2).max(1) + self.range(-1, 1)).clamp(-MAX, MAX)
                })
                .collect(),
            2 => (0..n).map(|_| self.sign() * MAX).collect(),
            3 if !special.is_empty() => (0..n).map(|_| self.pick(special)).collect(),
            _ => (0..n).map(|_| self.value(f, special)).collect(),
        }
    }

    /// A precision-32 tensor of Q(f) values.
    fn tensor(&mut self, dims: &[u32], f: u32, special: &[i64]) -> Tensor {
        let data = self.values(numel(dims), f, special);
        tensor(dims, 32, data)
    }

    /// A tensor of precision `p` (values within ±(2^(p−1) − 1)).
    fn tensor_p(&mut self, dims: &[u32], p: u8) -> Tensor {
        let b = bound(p);
        let data = (0..numel(dims))
            .map(|_| match self.below(6) {
                0 => b,
                1 => -b,
                _ => self.value(0, &[]).clamp(-b, b),
            })
            .collect();
        tensor(dims, p, data)
    }

    /// A shape of rank 0..=max_rank (now and then 5..=6 with dimensions 1 or 2).
    fn shape(&mut self, max_rank: usize, max_dim: u32) -> Vec<u32> {
        if self.chance(4) {
            let rank = self.size(5, 6);
            self.dimensions(rank, 2, 2)
        } else {
            let rank = self.size(0, max_rank);
            self.dimensions(rank, max_dim, 4)
        }
    }

    /// Two shapes that usually broadcast (numpy rules), sometimes not.
    fn broadcast_pair(&mut self, max_dim: u32) -> (Vec<u32>, Vec<u32>) {
        let out = self.shape(4, max_dim);
        if self.chance(25) {
            return (out.clone(), out);
        }
        let derive = |rng: &mut Rng| -> Vec<u32> {
            let rank = rng.size(0, out.len());
            out[out.len() - rank..]
                .iter()
                .map(|&d| if rng.chance(30) { 1 } else { d })
                .collect()
        };
        let mut a = derive(self);
        let mut b = derive(self);
        if self.chance(8) {
            let victim = if self.chance(50) { &mut a } else { &mut b };
            if !victim.is_empty() {
                let axis = self.size(0, victim.len() - 1);
                victim[axis] = self.pick(&[2, 3, 5]);
            }
        }
        if self.chance(50) { (a, b) } else { (b, a) }
    }
}

// ---------------------------------------------------------------------------------------------
// Attribute values, folds and dimensions
// ---------------------------------------------------------------------------------------------

fn int(v: i64) -> AttrValue {
    AttrValue::Int(v)
}

fn ints(v: &[i64]) -> AttrValue {
    AttrValue::Ints(v.to_vec())
}

fn text(v: &str) -> AttrValue {
    AttrValue::Str(v.into())
}

/// Folds every value of `t` into [−limit, limit].
fn calm(t: &mut Tensor, limit: i64) {
    for v in &mut t.data {
        *v = fold(i64::from(*v), limit) as i32;
    }
}

/// `v` brought into [−limit, limit] (a remainder: values already inside stay as they are).
fn fold(v: i64, limit: i64) -> i64 {
    v % (limit.max(0) + 1)
}

/// `v` brought into [low, high] (values already inside stay as they are).
fn fold_into(v: i64, low: i64, high: i64) -> i64 {
    low + (v - low).rem_euclid(high - low + 1)
}

/// ⌊√n⌋ for n ≥ 0.
fn isqrt(n: i128) -> i64 {
    let mut s = (n as f64).sqrt() as i128;
    while s * s > n {
        s -= 1;
    }
    while (s + 1) * (s + 1) <= n {
        s += 1;
    }
    s as i64
}

fn dims_of(t: &Tensor) -> Vec<u32> {
    t.shape.dims().to_vec()
}

// ---------------------------------------------------------------------------------------------
// Reference arithmetic
// ---------------------------------------------------------------------------------------------

use Want::{Exact, Fail};

/// round(v / 2^f) with halves away from zero: sign(v)·⌊(2|v| + 2^f) / 2^(f+1)⌋.
fn round_half_away(v: i128, f: u32) -> i128 {
    let q = (2 * v.abs() + (1i128 << f)) / (1i128 << (f + 1));
    if v < 0 { -q } else { q }
}

/// ⌊a / b⌋ for b ≠ 0 (the divisor made positive, then Euclid's quotient, which floors).
fn floor_div(a: i64, b: i64) -> i64 {
    let (n, d) = if b < 0 { (-a, -b) } else { (a, b) };
    n.div_euclid(d)
}

/// The `frac_bits` attribute: 0 when absent; `AttributeOutOfRange` outside 0..=30.
fn frac_of(case: &Case) -> Result<u32, ErrorCode> {
    match case.int_attr("frac_bits") {
        None => Ok(0),
        Some(f) if (0..=30).contains(&f) => Ok(f as u32),
        Some(_) => Err(ErrorCode::AttributeOutOfRange),
    }
}

/// `UnknownAttribute` when the case carries `frac_bits` for a primitive without one.
fn no_frac(case: &Case) -> Result<(), ErrorCode> {
    if case.attr("frac_bits").is_some() {
        Err(ErrorCode::UnknownAttribute)
    } else {
        Ok(())
    }
}

/// The numpy broadcast of two shapes.
fn broadcast(a: &[u32], b: &[u32]) -> Result<Vec<u32>, ErrorCode> {
    let rank = a.len().max(b.len());
    (0..rank)
        .map(|axis| {
            let da = if axis + a.len() >= rank {
                a[axis + a.len() - rank]
            } else {
                1
            };
            let db = if axis + b.len() >= rank {
                b[axis + b.len() - rank]
            } else {
                1
            };
            if da == db || db == 1 {
                Ok(da)
            } else if da == 1 {
                Ok(db)
            } else {
                Err(ErrorCode::ShapeMismatch)
            }
        })
        .collect()
}

/// The element of `t` read at output index `y` under broadcasting.
fn broadcast_at(t: &Tensor, y: &[usize]) -> i64 {
    let dims = t.shape.dims();
    let skip = y.len() - dims.len();
    let index: Vec<usize> = dims
        .iter()
        .enumerate()
        .map(|(axis, &d)| if d == 1 { 0 } else { y[skip + axis] })
        .collect();
    at(t, &index)
}

/// An axis in [−rank, rank).
fn resolve(axis: i64, rank: usize) -> Result<usize, ErrorCode> {
    let n = rank as i64;
    if (-n..n).contains(&axis) {
        Ok(if axis < 0 { axis + n } else { axis } as usize)
    } else {
        Err(ErrorCode::AttributeOutOfRange)
    }
}

/// The reference's verdict: the outputs (whose elements may be run-time failures), or the code
/// the engine must refuse the case with before running it.
type Verdict = common::property::Verdict<ErrorCode>;

// ---------------------------------------------------------------------------------------------
// Unary primitives
// ---------------------------------------------------------------------------------------------

/// The transcendental unary primitives (reference: the real function in f64, 1 ulp).
const TRANSCENDENTAL: [&str; 19] = [
    "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Cos", "Cosh", "Erf", "Exp", "Log", "Log10",
    "Log2", "Rsqrt", "Sin", "Sinh", "Sqrt", "Tan", "Tanh",
];

/// erf(a) in f64: 2/√π · e^(−a²) · Σ_n 2^n·a^(2n+1) / (1·3·…·(2n+1)), a series of positive terms
/// (no cancellation, relative error near 1e-15); ±1 beyond |a| ≥ 6 (erfc(6) < 3e-17).
fn erf(a: f64) -> f64 {
    if a.abs() >= 6.0 {
        return a.signum();
    }
    let two_a2 = 2.0 * a * a;
    let mut term = a;
    let mut sum = a;
    let mut n = 0.0;
    while term.abs() > 1e-18 * sum.abs() {
        n += 1.0;
        term *= two_a2 / (2.0 * n + 1.0);
        sum += term;
    }
    2.0 / std::f64::consts::PI.sqrt() * (-a * a).exp() * sum
}

/// The real-function reference of a transcendental primitive: f(x / 2^F) in ulp, or a domain
/// error (decided exactly, on integers).
fn transcendental(name: &str, x: i64, f: u32) -> Want {
    let one = 1i64 << f;
    let inside = match name {
        "Acos" | "Asin" => x.abs() <= one,
        "Acosh" => x >= one,
        "Atanh" => x.abs() < one,
        "Log" | "Log2" | "Log10" | "Rsqrt" => x > 0,
        "Sqrt" => x >= 0,
        _ => true,
    };
    if !inside {
        return Fail(ErrorCode::DomainError);
    }
    let scale = one as f64;
    let r = x as f64 / scale; // exact
    let y = match name {
        "Acos" => r.acos(),
        "Acosh" => r.acosh(),
        "Asin" => r.asin(),
        "Asinh" => r.asinh(),
        "Atan" => r.atan(),
        "Atanh" => r.atanh(),
        "Cos" => r.cos(),
        "Cosh" => r.cosh(),
        "Erf" => erf(r),
        "Exp" => r.exp(),
        "Log" => r.ln(),
        "Log10" => r.log10(),
        "Log2" => r.log2(),
        "Rsqrt" => 1.0 / r.sqrt(),
        "Sin" => r.sin(),
        "Sinh" => r.sinh(),
        "Sqrt" => r.sqrt(),
        "Tan" => r.tan(),
        "Tanh" => r.tanh(),
        _ => unreachable!("{name}"),
    };
    near(y * scale, 1.0)
}

/// Ceil, Floor, Trunc, Round (halves away from zero) of x / 2^F as a Q(F) integer, exact.
fn rounding(name: &str, x: i64, f: u32) -> Want {
    let one = 1i64 << f;
    let k = match name {
        "Floor" => x.div_euclid(one),
        "Ceil" => -(-x).div_euclid(one),
        "Trunc" => x / one,
        "Round" => x.signum() * ((2 * x.abs() + one) / (2 * one)),
        _ => unreachable!("{name}"),
    };
    exact(i128::from(k) * i128::from(one))
}

/// The exact unary primitives.
fn exact_unary(name: &str, x: i64, f: u32) -> Want {
    match name {
        "Abs" => exact(i128::from(x.abs())),
        "Negative" => exact(-i128::from(x)),
        "Identity" => Exact(x),
        "Sign" => exact(i128::from(x.signum()) << f),
        // Two's complement: ~x = −x − 1.
        "BitwiseNot" => exact(-i128::from(x) - 1),
        "LogicalNot" => Exact(i64::from(x == 0)),
        "IsNan" | "IsInf" => Exact(0),
        "IsFinite" => Exact(1),
        _ => unreachable!("{name}"),
    }
}

/// Inputs at the domain limits and overflow thresholds of unary primitive `name` in Q(f).
fn unary_specials(name: &str, f: u32) -> Vec<i64> {
    use std::f64::consts::PI;
    let scale = (1i64 << f) as f64;
    let limit = MAX as f64 / scale;
    let reals: Vec<f64> = match name {
        "Exp" => vec![limit.ln(), (0.5 / scale).ln()],
        "Sinh" => vec![limit.asinh(), -limit.asinh()],
        "Cosh" => vec![limit.acosh(), -limit.acosh()],
        "Log" => vec![(-limit).exp(), 1.0],
        "Log2" => vec![(-limit).exp2(), 1.0],
        "Log10" => vec![10f64.powf(-limit), 1.0],
        "Rsqrt" => vec![(scale / MAX as f64).powi(2), 1.0 / scale],
        "Tan" => [-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 1e3, 1e6, 3e8]
            .iter()
            .map(|k| (k + 0.5) * PI)
            .collect(),
        "Sin" | "Cos" => [-2.0, -1.0, -0.5, 0.5, 1.0, 2.0, 1e5, 6e8]
            .iter()
            .map(|k| k * PI)
            .collect(),
        "Asin" | "Acos" | "Atanh" => vec![1.0, -1.0],
        "Acosh" => vec![1.0],
        "Erf" => vec![4.5, -4.5, 6.0, -6.0, 0.5],
        "Sqrt" => vec![0.0],
        "Ceil" | "Floor" | "Trunc" | "Round" => vec![limit, -limit, 0.5, -0.5, 1.5, -1.5],
        _ => vec![],
    };
    let mut points = Vec::new();
    for r in reals {
        let centre = (r * scale).round().clamp(-(MAX as f64), MAX as f64) as i64;
        for d in -2..=2 {
            points.push((centre + d).clamp(-MAX, MAX));
        }
    }
    points
}

/// The inputs of unary primitive `name` in Q(f) whose result is defined and fits with room to
/// spare, when that is not every input: where "inside" cases draw their values.
fn unary_range(name: &str, f: u32) -> Option<(i64, i64)> {
    let one = 1i64 << f;
    let scale = one as f64;
    let limit = MAX as f64 / scale;
    // The largest input whose result stays 2 ulp inside the limit.
    let below = |real: f64| ((real * scale).floor() as i64 - 2).clamp(-MAX, MAX);
    let above = |real: f64| ((real * scale).ceil() as i64 + 2).clamp(1, MAX);
    Some(match name {
        "Acos" | "Asin" => (-one, one),
        "Atanh" => (1 - one, one - 1),
        "Acosh" => (one, MAX),
        "Sqrt" => (0, MAX),
        "Log" => (above((-limit).exp()), MAX),
        "Log2" => (above((-limit).exp2()), MAX),
        "Log10" => (above(10f64.powf(-limit)), MAX),
        "Rsqrt" => (above((scale / MAX as f64).powi(2)), MAX),
        "Exp" => (-MAX, below(limit.ln())),
        "Sinh" => (-below(limit.asinh()), below(limit.asinh())),
        "Cosh" => (-below(limit.acosh()), below(limit.acosh())),
        "Tan" if f >= 20 => (-below(limit.atan()), below(limit.atan())),
        "Ceil" | "Floor" | "Round" => (one - MAX, MAX - one),
        "BitwiseNot" => (-MAX, MAX - 1),
        _ => return None,
    })
}

fn gen_unary(rng: &mut Rng, name: &str) -> Case {
    let mut case = Case::default();
    let takes_f = !matches!(name, "BitwiseNot" | "LogicalNot");
    let f = if takes_f {
        rng.frac_attr(&mut case)
    } else {
        if rng.chance(3) {
            case.set("frac_bits", int(i64::from(rng.frac())));
        }
        0
    };
    // Most cases draw inside the domain and range, so that every element is checked; the rest
    // (small tensors) anywhere, for the domain and overflow errors.
    let inside = rng.chance(80);
    let dims = if inside {
        rng.shape(4, 4)
    } else {
        rng.shape(2, 2)
    };
    let special = unary_specials(name, f);
    let input = if name == "Identity" && rng.chance(50) {
        let p = rng.precision();
        rng.tensor_p(&dims, p)
    } else {
        let mut data = rng.values(numel(&dims), f, &special);
        if inside && let Some((low, high)) = unary_range(name, f) {
            for v in &mut data {
                *v = fold_into(*v, low, high);
            }
        }
        tensor(&dims, 32, data)
    };
    case.input(input)
}

fn ref_unary(name: &str, case: &Case) -> Verdict {
    let f = match name {
        "BitwiseNot" | "LogicalNot" => no_frac(case).map(|()| 0)?,
        _ => frac_of(case)?,
    };
    let x = &case.inputs[0];
    let precision = match name {
        "Identity" => x.precision,
        "LogicalNot" | "IsNan" | "IsInf" | "IsFinite" => 2,
        _ => 32,
    };
    let element = |v: i64| -> Want {
        if TRANSCENDENTAL.contains(&name) {
            transcendental(name, v, f)
        } else if matches!(name, "Ceil" | "Floor" | "Trunc" | "Round") {
            rounding(name, v, f)
        } else {
            exact_unary(name, v, f)
        }
    };
    Ok(vec![expect(dims_of(x), precision, |y| element(at(x, y)))])
}

macro_rules! unary_properties {
    ($($test:ident: $name:literal, $seed:literal, $failures:literal;)*) => {
        $(
            #[test]
            fn $test() {
                let stats = CINN.check($name, $seed, 15_000, |rng| gen_unary(rng, $name), |case| {
                    ref_unary($name, case)
                });
                stats.require(9_000, 400, $failures * 10);
            }
        )*
    };
}

unary_properties! {
    unary_abs: "Abs", 0xC100, 0;
    unary_acos: "Acos", 0xC101, 50;
    unary_acosh: "Acosh", 0xC102, 50;
    unary_asin: "Asin", 0xC103, 50;
    unary_asinh: "Asinh", 0xC104, 0;
    unary_atan: "Atan", 0xC105, 0;
    unary_atanh: "Atanh", 0xC106, 50;
    unary_bitwise_not: "BitwiseNot", 0xC107, 20;
    unary_ceil: "Ceil", 0xC108, 20;
    unary_cos: "Cos", 0xC109, 0;
    unary_cosh: "Cosh", 0xC10A, 50;
    unary_erf: "Erf", 0xC10B, 0;
    unary_exp: "Exp", 0xC10C, 50;
    unary_floor: "Floor", 0xC10D, 20;
    unary_identity: "Identity", 0xC10E, 0;
    unary_is_finite: "IsFinite", 0xC10F, 0;
    unary_is_inf: "IsInf", 0xC110, 0;
    unary_is_nan: "IsNan", 0xC111, 0;
    unary_log: "Log", 0xC112, 50;
    unary_log10: "Log10", 0xC113, 50;
    unary_log2: "Log2", 0xC114, 50;
    unary_logical_not: "LogicalNot", 0xC115, 0;
    unary_negative: "Negative", 0xC116, 0;
    unary_round: "Round", 0xC117, 20;
    unary_rsqrt: "Rsqrt", 0xC118, 50;
    unary_sign: "Sign", 0xC119, 0;
    unary_sin: "Sin", 0xC11A, 0;
    unary_sinh: "Sinh", 0xC11B, 50;
    unary_sqrt: "Sqrt", 0xC11C, 50;
    unary_tan: "Tan", 0xC11D, 5;
    unary_tanh: "Tanh", 0xC11E, 0;
    unary_trunc: "Trunc", 0xC11F, 0;
}

// ---------------------------------------------------------------------------------------------
// Binary primitives
// ---------------------------------------------------------------------------------------------

/// A positive real m·2^e with a normalized 128-bit mantissa (bit 127 set), for bounding powers
/// from below (products rounded down) and above (rounded up).
#[derive(Clone, Copy, Debug)]
struct Bound {
    m: u128,
    e: i64,
}

/// The 256-bit product of two u128: (high, low).
fn mul_u128(a: u128, b: u128) -> (u128, u128) {
    let mask = u128::from(u64::MAX);
    let (a1, a0) = (a >> 64, a & mask);
    let (b1, b0) = (b >> 64, b & mask);
    let (p00, p01, p10, p11) = (a0 * b0, a0 * b1, a1 * b0, a1 * b1);
    let mid = (p00 >> 64) + (p01 & mask) + (p10 & mask);
    let low = (p00 & mask) | (mid << 64);
    let high = p11 + (p01 >> 64) + (p10 >> 64) + (mid >> 64);
    (high, low)
}

impl Bound {
    /// The exact value v·2^e of an integer v > 0.
    fn of(v: u64, e: i64) -> Bound {
        let shift = u128::from(v).leading_zeros();
        Bound {
            m: u128::from(v) << shift,
            e: e - i64::from(shift),
        }
    }

    /// The product, rounded down or up to 128 bits.
    fn mul(self, other: Bound, up: bool) -> Bound {
        let (high, low) = mul_u128(self.m, other.m);
        let (mut m, rest, e) = if high >> 127 == 1 {
            (high, low, self.e + other.e + 128)
        } else {
            ((high << 1) | (low >> 127), low << 1, self.e + other.e + 127)
        };
        if up && rest != 0 {
            m = m.wrapping_add(1);
            if m == 0 {
                return Bound {
                    m: 1 << 127,
                    e: e + 1,
                };
            }
        }
        Bound { m, e }
    }

    /// ⌊log2⌋ of the value.
    fn log2(self) -> i64 {
        self.e + 127
    }

    /// ⌊value·2^f + 1/2⌋, or None when it is at least 2^32 (far beyond int32).
    fn rounded(self, f: u32) -> Option<u128> {
        let s = self.e + i64::from(f);
        if s >= -95 {
            return None; // m ≥ 2^127, so value·2^f = m·2^s ≥ 2^32
        }
        let t = (-s) as u32;
        Some(match t {
            96..=127 => (self.m >> t) + ((self.m >> (t - 1)) & 1),
            128 => 1, // m / 2^128 is in [1/2, 1)
            _ => 0,
        })
    }
}

/// ⌊|x|^n / 2^(F·(n−1)) + 1/2⌋ for 1 ≤ n ≤ 64 and |x| < 2^31, exactly (a big natural number
/// in 64-bit words); None when it is at least 2^40 (far beyond int32).
fn exact_power(ax: u64, n: u32, f: u32) -> Option<u128> {
    let mut words: Vec<u64> = vec![1];
    for _ in 0..n {
        let mut carry = 0u128;
        for word in &mut words {
            let t = u128::from(*word) * u128::from(ax) + carry;
            *word = t as u64;
            carry = t >> 64;
        }
        if carry != 0 {
            words.push(carry as u64);
        }
    }
    let bit = |i: u32| (words.get((i / 64) as usize).copied().unwrap_or(0) >> (i % 64)) & 1;
    let top = words.last().copied().unwrap_or(0);
    let length = (words.len() as u32 - 1) * 64 + (64 - top.leading_zeros());
    let s = f * (n - 1);
    if length > s + 40 {
        return None;
    }
    let mut q = 0u128;
    for i in (s..length).rev() {
        q = (q << 1) | u128::from(bit(i));
    }
    let half = if s > 0 { u128::from(bit(s - 1)) } else { 0 };
    Some(q + half)
}

/// Bounds on ⌊|x|^n / 2^(F·(n−1)) + 1/2⌋ for large n, by left-to-right binary powering of
/// |x|/2^F rounded down and up; None for a bound far beyond int32.
fn interval_power(ax: u64, n: u64, f: u32) -> (Option<u128>, Option<u128>) {
    let v = Bound::of(ax, -i64::from(f));
    let unit = Bound::of(1, 0);
    let (mut lo, mut hi) = (unit, unit);
    let grows = ax > 1u64 << f;
    for bit in (0..64 - n.leading_zeros()).rev() {
        lo = lo.mul(lo, false);
        hi = hi.mul(hi, true);
        if (n >> bit) & 1 == 1 {
            lo = lo.mul(v, false);
            hi = hi.mul(v, true);
        }
        // Every partial power lies between 1 and the full one: past 2^40 it overflows, below
        // 2^−40 it rounds to 0.
        if grows && lo.log2() > 40 {
            return (None, None);
        }
        if !grows && hi.log2() < -41 {
            return (Some(0), Some(0));
        }
    }
    (lo.rounded(f), hi.rounded(f))
}

/// x^y in Q(F): exact for integral y ≥ 0 (y a multiple of 2^F), else the real power in f64
/// within 2 ulp; x ≤ 0 with a non-integral or negative exponent is a domain error.
fn power(x: i64, y: i64, f: u32) -> Want {
    let one = 1i64 << f;
    if y >= 0 && y % one == 0 {
        let n = y / one;
        if n == 0 {
            return Exact(one); // x^0 = 1, also 0^0
        }
        if x == 0 {
            return Exact(0);
        }
        let ax = x.unsigned_abs();
        let negative = x < 0 && n % 2 == 1;
        let (lo, hi) = if n <= 64 {
            let q = exact_power(ax, n as u32, f);
            (q, q)
        } else if ax == 1u64 << f {
            (Some(1u128 << f), Some(1u128 << f))
        } else {
            interval_power(ax, n as u64, f)
        };
        let signed = |q: Option<u128>| -> Want {
            match q {
                Some(q) => exact(if negative { -(q as i128) } else { q as i128 }),
                None => Fail(ErrorCode::IntegerOverflow),
            }
        };
        return match (lo, hi) {
            (a, b) if a == b => signed(a),
            (Some(a), Some(b)) if b == a + 1 => {
                // Undecided between two neighbours (never seen): accept either.
                let middle = (a as f64 + 0.5) * if negative { -1.0 } else { 1.0 };
                near(middle, 0.5)
            }
            (Some(a), None) if a >= MAX as u128 => Fail(ErrorCode::IntegerOverflow),
            other => panic!("power bounds too far apart: {other:?} for {x}^{y} at F = {f}"),
        };
    }
    if x <= 0 {
        return Fail(ErrorCode::DomainError);
    }
    let scale = one as f64;
    near((x as f64 / scale).powf(y as f64 / scale) * scale, 2.0)
}

/// One element of a broadcasting binary primitive.
fn binary(name: &str, x: i64, y: i64, f: u32) -> Want {
    let (a, b) = (i128::from(x), i128::from(y));
    let one = 1i128 << f;
    let by_zero = Fail(ErrorCode::DivisionByZero);
    match name {
        "Add" => exact(a + b),
        "Sub" => exact(a - b),
        "Mul" => exact(round_half_away(a * b, f)),
        "Div" if y == 0 => by_zero,
        // Rust's `/` truncates toward zero.
        "Div" => exact(a * one / b),
        "FloorDiv" if y == 0 => by_zero,
        "FloorDiv" => exact(i128::from(floor_div(x, y)) * one),
        "FloorMod" if y == 0 => by_zero,
        "FloorMod" => exact(a - b * i128::from(floor_div(x, y))),
        "Mod" if y == 0 => by_zero,
        "Mod" => exact(a - b * (a / b)),
        "Max" => Exact(x.max(y)),
        "Min" => Exact(x.min(y)),
        "Power" => power(x, y, f),
        "BitwiseAnd" => exact(i128::from(x as i32 & y as i32)),
        "BitwiseOr" => exact(i128::from(x as i32 | y as i32)),
        "BitwiseXor" => exact(i128::from(x as i32 ^ y as i32)),
        "LogicalAnd" => Exact(i64::from(x != 0 && y != 0)),
        "LogicalOr" => Exact(i64::from(x != 0 || y != 0)),
        "LogicalXor" => Exact(i64::from((x != 0) != (y != 0))),
        _ => unreachable!("{name}"),
    }
}

/// Whether binary primitive `name` takes `frac_bits`.
fn binary_takes_f(name: &str) -> bool {
    matches!(
        name,
        "Add" | "Sub" | "Mul" | "Div" | "FloorDiv" | "FloorMod" | "Mod" | "Max" | "Min" | "Power"
    )
}

/// Operand values at the overflow thresholds of binary primitive `name` in Q(f).
fn binary_specials(name: &str, f: u32) -> Vec<i64> {
    let one = 1i64 << f;
    let mut centres: Vec<i64> = match name {
        "Add" | "Sub" => vec![MAX / 2, MAX / 2 + 1, 1 << 30],
        // x·y / 2^F at the limit: x = y = √(2^31·2^F).
        "Mul" => vec![((MAX as f64) * one as f64).sqrt() as i64, MAX >> f.min(30)],
        "Div" => vec![MAX >> f, (MAX >> f) + 1, 2, 3],
        "FloorDiv" => vec![MAX >> f, (MAX >> f) + 1, 2, 3],
        "FloorMod" | "Mod" => vec![2, 3, 7],
        "Power" => vec![
            one + 1,
            one - 1,
            2 * one,
            one / 2,
            3 * one / 2,
            one + (one >> 8),
        ],
        _ => vec![1 << 30, 1 << 16],
    };
    let mut points = Vec::new();
    for centre in centres.drain(..) {
        for d in -1..=1 {
            points.push((centre + d).clamp(-MAX, MAX));
            points.push((-(centre + d)).clamp(-MAX, MAX));
        }
    }
    points
}

/// An exponent for Power in Q(f): integral (small, up to 64, beyond 64, negative), halves, or
/// any value.
fn power_exponent(rng: &mut Rng, f: u32) -> i64 {
    let one = 1i64 << f;
    let most = MAX / one;
    let v = match rng.below(10) {
        0..=3 => rng.range(0, 6) * one,
        4 => rng.range(7, 64).min(most) * one,
        5 => {
            let bits = rng.range(6, 31);
            rng.range(65, (1i64 << bits).max(66)).min(most) * one
        }
        6 => -rng.range(1, 4) * one,
        7 => rng.range(-3, 3) * one + one / 2,
        _ => rng.value(f, &[]),
    };
    v.clamp(-MAX, MAX)
}

/// Power: bases and exponents drawn together, so that results are often neither 0 nor an
/// overflow: small integral exponents, exact rounding ties (F in 1..=4), long integral products
/// of bases near ±1, non-integral and negative exponents of positive bases, and anything at all.
fn gen_power(rng: &mut Rng) -> Case {
    let mut case = Case::default();
    let mode = rng.below(5);
    let f = if mode == 4 {
        let f = rng.range(1, 4) as u32;
        case.set("frac_bits", int(i64::from(f)));
        f
    } else {
        rng.frac_attr(&mut case)
    };
    let one = 1i64 << f;
    let most = MAX / one;
    let (a, b) = rng.broadcast_pair(2);
    let special = binary_specials("Power", f);
    let (x, y): (Vec<i64>, Vec<i64>) = match mode {
        0 => (
            rng.values(numel(&a), f, &special),
            (0..numel(&b)).map(|_| power_exponent(rng, f)).collect(),
        ),
        1 => (
            (0..numel(&a))
                .map(|_| fold(rng.value(f, &special), (2 * one).min(MAX)))
                .collect(),
            (0..numel(&b))
                .map(|_| match rng.below(3) {
                    0 => (rng.range(-2, 3) * one + one / 2).clamp(-MAX, MAX),
                    _ => rng.range(0, 6).min(most) * one,
                })
                .collect(),
        ),
        2 => {
            // (1 + δ)^n with |δ| up to about 4/n: the exact path beyond n = 64.
            let bits = rng.range(6, 31);
            let n_max = rng.range(65, (1i64 << bits).max(65)).min(most).max(1);
            let delta = (4 * one / n_max).max(1);
            (
                (0..numel(&a))
                    .map(|_| (rng.sign() * (one + rng.range(-delta, delta))).clamp(-MAX, MAX))
                    .collect(),
                (0..numel(&b))
                    .map(|_| match rng.below(5) {
                        0 => rng.range(-4 * one, 4 * one).clamp(-MAX, MAX),
                        _ => rng.range((n_max / 2).max(1), n_max) * one,
                    })
                    .collect(),
            )
        }
        3 => (
            (0..numel(&a))
                .map(|_| rng.value(f, &special).abs())
                .collect(),
            (0..numel(&b))
                .map(|_| fold(rng.value(f, &[]), (4 * one).min(MAX)))
                .collect(),
        ),
        _ => (
            (0..numel(&a)).map(|_| rng.range(-64, 64)).collect(),
            (0..numel(&b)).map(|_| rng.range(0, 6) * one).collect(),
        ),
    };
    case.input(tensor(&a, 32, x)).input(tensor(&b, 32, y))
}

fn gen_binary(rng: &mut Rng, name: &str) -> Case {
    let mut case = Case::default();
    let f = if binary_takes_f(name) {
        rng.frac_attr(&mut case)
    } else {
        if rng.chance(3) {
            case.set("frac_bits", int(i64::from(rng.frac())));
        }
        0
    };
    let (a, b) = rng.broadcast_pair(if name == "Power" { 2 } else { 4 });
    let special = binary_specials(name, f);
    let mut x = if rng.chance(8) {
        let p = rng.precision();
        rng.tensor_p(&a, p)
    } else {
        rng.tensor(&a, f, &special)
    };
    let mut y = if rng.chance(8) {
        let p = rng.precision();
        rng.tensor_p(&b, p)
    } else {
        rng.tensor(&b, f, &special)
    };
    if rng.chance(60) {
        // Calm: operands small enough that every result is defined and fits.
        let (x_limit, y_limit) = match name {
            "Add" | "Sub" => (MAX / 2, MAX / 2),
            "Mul" => {
                let limit = isqrt(i128::from(MAX) << f);
                (limit, limit)
            }
            "Div" | "FloorDiv" => (MAX >> f, MAX),
            _ => (MAX, MAX),
        };
        calm(&mut x, x_limit);
        calm(&mut y, y_limit);
        if matches!(name, "Div" | "FloorDiv" | "FloorMod" | "Mod") {
            for v in &mut y.data {
                if *v == 0 {
                    *v = 1;
                }
            }
        }
    }
    case.input(x).input(y)
}

fn ref_binary(name: &str, case: &Case) -> Verdict {
    let f = if binary_takes_f(name) {
        frac_of(case)?
    } else {
        no_frac(case)?;
        0
    };
    let (x, y) = (&case.inputs[0], &case.inputs[1]);
    let out = broadcast(x.shape.dims(), y.shape.dims())?;
    let precision = if name.starts_with("Logical") { 2 } else { 32 };
    Ok(vec![expect(out, precision, |d| {
        binary(name, broadcast_at(x, d), broadcast_at(y, d), f)
    })])
}

macro_rules! binary_properties {
    ($($test:ident: $name:literal, $seed:literal, $cases:literal, $failures:literal;)*) => {
        $(
            #[test]
            fn $test() {
                let stats = CINN.check($name, $seed, $cases, |rng| gen_binary(rng, $name), |case| {
                    ref_binary($name, case)
                });
                stats.require($cases / 3, 200, $failures);
            }
        )*
    };
}

binary_properties! {
    binary_add: "Add", 0xB150, 15_000, 500;
    binary_bitwise_and: "BitwiseAnd", 0xB151, 15_000, 50;
    binary_bitwise_or: "BitwiseOr", 0xB152, 15_000, 0;
    binary_bitwise_xor: "BitwiseXor", 0xB153, 15_000, 50;
    binary_div: "Div", 0xB154, 15_000, 500;
    binary_floor_div: "FloorDiv", 0xB156, 15_000, 500;
    binary_floor_mod: "FloorMod", 0xB157, 15_000, 500;
    binary_logical_and: "LogicalAnd", 0xB159, 15_000, 0;
    binary_logical_or: "LogicalOr", 0xB15A, 15_000, 0;
    binary_logical_xor: "LogicalXor", 0xB15B, 15_000, 0;
    binary_max: "Max", 0xB15C, 15_000, 0;
    binary_min: "Min", 0xB15D, 15_000, 0;
    binary_mod: "Mod", 0xB15E, 15_000, 500;
    binary_mul: "Mul", 0xB15F, 15_000, 500;
    binary_sub: "Sub", 0xB161, 15_000, 500;
}

/// LeftShift and RightShift: the amount is the attribute `shift` (one input) or a second,
/// broadcast input whose values must lie in 0..=31.
fn gen_shift(rng: &mut Rng) -> Case {
    let mut case = Case::default();
    if rng.chance(3) {
        case.set("frac_bits", int(0));
    }
    let powers: Vec<i64> = (0..31)
        .flat_map(|k| [1i64 << k, (1i64 << k) - 1, (1i64 << k) + 1])
        .flat_map(|v| [v, -v])
        .collect();
    // Calm cases keep |x| ≤ (2^31 − 1) >> s for the largest amount s, so no bit is lost.
    let calm_case = rng.chance(60);
    let most = rng.range(0, 31);
    if rng.chance(45) {
        let shift = if rng.chance(6) {
            rng.pick(&[32, -1, 40, i64::MIN])
        } else {
            most
        };
        case.set("shift", int(shift));
        let dims = rng.shape(4, 4);
        let mut x = rng.tensor(&dims, 0, &powers);
        if calm_case {
            calm(&mut x, MAX >> most);
        }
        case = case.input(x);
        if rng.chance(4) {
            case = case.input(rng.tensor(&dims, 0, &[]));
        }
    } else {
        let (a, b) = rng.broadcast_pair(4);
        let mut x = rng.tensor(&a, 0, &powers);
        if calm_case {
            calm(&mut x, MAX >> most);
        }
        case = case.input(x);
        if !rng.chance(4) {
            let amounts = (0..numel(&b))
                .map(|_| match rng.below(if calm_case { 1000 } else { 12 }) {
                    0 => rng.pick(&[-1, 32, 33, MAX, -MAX]),
                    _ => rng.range(0, most),
                })
                .collect();
            case = case.input(tensor(&b, 32, amounts));
        }
    }
    case
}

fn ref_shift(left: bool, case: &Case) -> Verdict {
    no_frac(case)?;
    let attribute = match case.int_attr("shift") {
        Some(s) if (0..=31).contains(&s) => Some(s),
        Some(_) => return Err(ErrorCode::AttributeOutOfRange),
        None => None,
    };
    let expected_inputs = if attribute.is_some() { 1 } else { 2 };
    if case.inputs.len() != expected_inputs {
        return Err(ErrorCode::ArityMismatch);
    }
    let x = &case.inputs[0];
    let element = |v: i64, s: i64| -> Want {
        if !(0..=31).contains(&s) {
            Fail(ErrorCode::DomainError)
        } else if left {
            exact(i128::from(v) * (1i128 << s))
        } else {
            Exact(v.div_euclid(1i64 << s)) // arithmetic shift: ⌊v / 2^s⌋
        }
    };
    Ok(vec![match attribute {
        Some(s) => expect(dims_of(x), 32, |d| element(at(x, d), s)),
        None => {
            let y = &case.inputs[1];
            let out = broadcast(x.shape.dims(), y.shape.dims())?;
            expect(out, 32, |d| element(broadcast_at(x, d), broadcast_at(y, d)))
        }
    }])
}

#[test]
fn binary_power() {
    let stats = CINN.check("Power", 0xB160, 40_000, gen_power, |case| {
        ref_binary("Power", case)
    });
    stats.require(20_000, 1_000, 3_000);
}

#[test]
fn binary_left_shift() {
    let stats = CINN.check("LeftShift", 0xB158, 20_000, gen_shift, |case| {
        ref_shift(true, case)
    });
    stats.require(7_000, 500, 1_000);
}

#[test]
fn binary_right_shift() {
    let stats = CINN.check("RightShift", 0xB162, 20_000, gen_shift, |case| {
        ref_shift(false, case)
    });
    stats.require(7_000, 500, 500);
}

// ---------------------------------------------------------------------------------------------
// Dot and ConstScalar
// ---------------------------------------------------------------------------------------------

fn gen_dot(rng: &mut Rng) -> Case {
    let mut case = Case::default();
    let f = rng.frac_attr(&mut case);
    let k = rng.range(0, 6) as u32;
    let operand = |rng: &mut Rng, first: bool| -> Vec<u32> {
        let low = i64::from(rng.chance(90));
        let other = rng.range(low, 4) as u32;
        match rng.below(20) {
            0 => vec![],
            1 => vec![2, k, 2],
            2..=9 => vec![k],
            _ if first => vec![other, k],
            _ => vec![k, other],
        }
    };
    let mut a = operand(rng, true);
    let b = operand(rng, false);
    if rng.chance(6) && !a.is_empty() {
        let last = a.len() - 1;
        a[last] += 1;
    }
    let mut x = rng.tensor(&a, f, &[]);
    let mut y = rng.tensor(&b, f, &[]);
    if rng.chance(60) {
        // Calm: every sum of K products fits after rescaling.
        let limit = isqrt((i128::from(MAX) << f) / i128::from(k.max(1)));
        calm(&mut x, limit);
        calm(&mut y, limit);
    }
    case.input(x).input(y)
}

fn ref_dot(case: &Case) -> Verdict {
    let f = frac_of(case)?;
    let (x, y) = (&case.inputs[0], &case.inputs[1]);
    // x: (K) or (M, K); y: (K) or (K, N).
    let (k, out_m) = match *x.shape.dims() {
        [k] => (k, None),
        [m, k] => (k, Some(m)),
        _ => return Err(ErrorCode::ShapeMismatch),
    };
    let (k2, out_n) = match *y.shape.dims() {
        [k] => (k, None),
        [k, n] => (k, Some(n)),
        _ => return Err(ErrorCode::ShapeMismatch),
    };
    if k != k2 {
        return Err(ErrorCode::ShapeMismatch);
    }
    let out: Vec<u32> = out_m.into_iter().chain(out_n).collect();
    let x_at = |i: usize, j: usize| {
        if out_m.is_some() {
            at(x, &[i, j])
        } else {
            at(x, &[j])
        }
    };
    let y_at = |i: usize, j: usize| {
        if out_n.is_some() {
            at(y, &[i, j])
        } else {
            at(y, &[i])
        }
    };
    Ok(vec![expect(out, 32, |d| {
        let (row, column) = match (out_m, out_n) {
            (Some(_), Some(_)) => (d[0], d[1]),
            (Some(_), None) => (d[0], 0),
            (None, Some(_)) => (0, d[0]),
            (None, None) => (0, 0),
        };
        let sum: i128 = (0..k as usize)
            .map(|i| i128::from(x_at(row, i)) * i128::from(y_at(i, column)))
            .sum();
        exact(round_half_away(sum, f))
    })])
}

#[test]
fn dot() {
    let stats = CINN.check("Dot", 0xD155, 30_000, gen_dot, ref_dot);
    stats.require(12_000, 1_000, 1_000);
}

fn gen_const_scalar(rng: &mut Rng) -> Case {
    let mut case = Case::default();
    rng.frac_attr(&mut case);
    if !rng.chance(4) {
        let value = match rng.below(10) {
            0 => rng.sign() * (MAX + 1),
            1 => rng.pick(&[i64::MIN, i64::MAX, 1 << 40]),
            _ => rng.value(0, &[]),
        };
        case.set("value", int(value));
    }
    case
}

fn ref_const_scalar(case: &Case) -> Verdict {
    frac_of(case)?;
    let value = case.int_attr("value").ok_or(ErrorCode::MissingAttribute)?;
    if value.unsigned_abs() > MAX as u64 {
        return Err(ErrorCode::AttributeOutOfRange);
    }
    // The least precision p with |value| ≤ 2^(p−1) − 1.
    let precision = (1..=32u8).find(|&p| value.abs() <= bound(p)).unwrap();
    Ok(vec![expect(vec![], precision, |_| Exact(value))])
}

#[test]
fn const_scalar() {
    let stats = CINN.check(
        "ConstScalar",
        0xC180,
        5_000,
        gen_const_scalar,
        ref_const_scalar,
    );
    stats.require(3_000, 500, 0);
}

// ---------------------------------------------------------------------------------------------
// Complex primitives
// ---------------------------------------------------------------------------------------------

/// Whether `data_format` is NHWC (absent: NCHW), or the refusal of another string.
fn bn_format(case: &Case) -> Result<bool, ErrorCode> {
    match case.str_attr("data_format") {
        None | Some("NCHW") => Ok(false),
        Some("NHWC") => Ok(true),
        Some(_) => Err(ErrorCode::AttributeOutOfRange),
    }
}

fn gen_data_format(rng: &mut Rng, case: &mut Case) {
    match rng.below(20) {
        0..=5 => {}
        6..=11 => case.set("data_format", text("NCHW")),
        12..=18 => case.set("data_format", text("NHWC")),
        _ => case.set("data_format", text(rng.pick(&["nchw", "NCW", ""]))),
    }
}

fn bn_shape(rng: &mut Rng) -> Vec<u32> {
    let rank = if rng.chance(6) {
        rng.size(0, 1)
    } else {
        rng.size(2, 4)
    };
    rng.dimensions(rank, 4, 5)
}

fn gen_bn_mean_variance(rng: &mut Rng) -> Case {
    let mut case = Case::default();
    gen_data_format(rng, &mut case);
    let f = rng.frac_attr(&mut case);
    let dims = bn_shape(rng);
    let mut x = rng.tensor(&dims, f, &[]);
    if rng.chance(60) {
        // Calm: the per-channel sums of x and x² / 2^F fit.
        let count = i128::from(per_channel(&dims));
        calm(
            &mut x,
            isqrt((i128::from(MAX) << f) / count).min((i128::from(MAX) / count) as i64),
        );
    }
    case.input(x)
}

/// The most elements one BN channel can have (the element count over the smallest channel
/// count the layouts allow, at least 1).
fn per_channel(dims: &[u32]) -> u64 {
    let channels = dims
        .get(1)
        .copied()
        .unwrap_or(1)
        .min(dims.last().copied().unwrap_or(1));
    (numel(dims) as u64 / u64::from(channels.max(1))).max(1)
}

/// For a BN input, the channel of every element index, and C; ShapeMismatch below rank 2.
fn bn_channels(dims: &[u32], nhwc: bool) -> Result<(usize, usize), ErrorCode> {
    if dims.len() < 2 {
        return Err(ErrorCode::ShapeMismatch);
    }
    let axis = if nhwc { dims.len() - 1 } else { 1 };
    Ok((axis, dims[axis] as usize))
}

fn ref_bn_mean_variance(case: &Case) -> Verdict {
    let nhwc = bn_format(case)?;
    let f = frac_of(case)?;
    let x = &case.inputs[0];
    let (axis, channels) = bn_channels(x.shape.dims(), nhwc)?;
    let mut sums = vec![0i128; channels];
    let mut squares = vec![0i128; channels];
    for index in indices(x.shape.dims()) {
        let v = i128::from(at(x, &index));
        sums[index[axis]] += v;
        squares[index[axis]] += v * v;
    }
    let c = channels as u32;
    Ok(vec![
        expect(vec![c], 32, |d| exact(sums[d[0]])),
        expect(vec![c], 32, |d| exact(round_half_away(squares[d[0]], f))),
    ])
}

#[test]
fn bn_mean_variance() {
    let stats = CINN.check(
        "BnMeanVariance",
        0xB191,
        25_000,
        gen_bn_mean_variance,
        ref_bn_mean_variance,
    );
    stats.require(9_000, 1_000, 2_000);
}

fn gen_bn_grad_bias_scale(rng: &mut Rng) -> Case {
    let mut case = Case::default();
    gen_data_format(rng, &mut case);
    let f = rng.frac_attr(&mut case);
    let dims = bn_shape(rng);
    let x = rng.tensor(&dims, f, &[]);
    let mut grad_dims = dims.clone();
    if rng.chance(5) && !grad_dims.is_empty() {
        grad_dims[0] += 1;
    }
    let grad = rng.tensor(&grad_dims, f, &[]);
    let nhwc = case.str_attr("data_format") == Some("NHWC");
    let channels = match dims.len() {
        0 | 1 => 1,
        rank => dims[if nhwc { rank - 1 } else { 1 }],
    };
    let mean_dims = if rng.chance(5) {
        vec![channels + 1]
    } else if rng.chance(3) {
        vec![1, channels]
    } else {
        vec![channels]
    };
    let mut mean = rng.tensor(&mean_dims, f, &[]);
    let (mut x, mut grad) = (x, grad);
    if rng.chance(60) {
        // Calm: Σ g and Σ g·(x − m) / 2^F fit.
        let count = i128::from(per_channel(&dims));
        let limit =
            isqrt((i128::from(MAX) << f) / (4 * count)).min((i128::from(MAX) / count) as i64);
        for t in [&mut x, &mut grad, &mut mean] {
            calm(t, limit);
        }
    }
    case.input(x).input(grad).input(mean)
}

fn ref_bn_grad_bias_scale(case: &Case) -> Verdict {
    let nhwc = bn_format(case)?;
    let f = frac_of(case)?;
    let (x, grad, mean) = (&case.inputs[0], &case.inputs[1], &case.inputs[2]);
    if x.shape != grad.shape {
        return Err(ErrorCode::ShapeMismatch);
    }
    let (axis, channels) = bn_channels(x.shape.dims(), nhwc)?;
    if mean.shape.dims() != [channels as u32] {
        return Err(ErrorCode::ShapeMismatch);
    }
    let mut bias = vec![0i128; channels];
    let mut scale = vec![0i128; channels];
    for index in indices(x.shape.dims()) {
        let c = index[axis];
        let g = i128::from(at(grad, &index));
        bias[c] += g;
        scale[c] += g * (i128::from(at(x, &index)) - i128::from(at(mean, &[c])));
    }
    let c = channels as u32;
    Ok(vec![
        expect(vec![c], 32, |d| exact(bias[d[0]])),
        expect(vec![c], 32, |d| exact(round_half_away(scale[d[0]], f))),
    ])
}

#[test]
fn bn_grad_bias_scale() {
    let stats = CINN.check(
        "BnGradBiasScale",
        0xB190,
        25_000,
        gen_bn_grad_bias_scale,
        ref_bn_grad_bias_scale,
    );
    stats.require(9_000, 1_000, 2_000);
}

fn gen_broadcast_to(rng: &mut Rng) -> Case {
    let mut case = Case::default();
    let in_rank = rng.size(0, 3);
    let out_rank = rng.size(in_rank, 4);
    let mut axes: Vec<usize> = (0..out_rank).collect();
    rng.shuffle(&mut axes);
    let mut axes: Vec<usize> = axes[..in_rank].to_vec();
    axes.sort_unstable();
    let out: Vec<u32> = rng.dimensions(out_rank, 4, 4);
    let input: Vec<u32> = axes
        .iter()
        .map(|&a| if rng.chance(30) { 1 } else { out[a] })
        .collect();
    let mut out_attr: Vec<i64> = out.iter().map(|&d| i64::from(d)).collect();
    let mut axes_attr: Vec<i64> = axes.iter().map(|&a| a as i64).collect();
    let mut input_dims = input;
    match rng.below(30) {
        0 if !axes_attr.is_empty() => axes_attr.reverse(),
        1 if !axes_attr.is_empty() => axes_attr.push(out_rank as i64),
        2 if !axes_attr.is_empty() => {
            axes_attr.pop();
        }
        3 if !input_dims.is_empty() => input_dims[0] += 2,
        4 if !out_attr.is_empty() => out_attr[0] = -1,
        5 if axes_attr.len() > 1 => axes_attr[1] = axes_attr[0],
        6 => axes_attr.insert(0, -1),
        _ => {}
    }
    if !rng.chance(3) {
        case.set("out_shape", ints(&out_attr));
    }
    if !rng.chance(3) {
        case.set("broadcast_axes", ints(&axes_attr));
    }
    let p = rng.precision();
    let x = rng.tensor_p(&input_dims, p);
    case.input(x)
}

fn ref_broadcast_to(case: &Case) -> Verdict {
    let out_attr = case
        .ints_attr("out_shape")
        .ok_or(ErrorCode::MissingAttribute)?;
    if out_attr
        .iter()
        .any(|&d| !(0..=i64::from(u32::MAX)).contains(&d))
    {
        return Err(ErrorCode::AttributeOutOfRange);
    }
    let axes = case
        .ints_attr("broadcast_axes")
        .ok_or(ErrorCode::MissingAttribute)?;
    let out: Vec<u32> = out_attr.iter().map(|&d| d as u32).collect();
    for (i, &a) in axes.iter().enumerate() {
        if !(0..out.len() as i64).contains(&a) || (i > 0 && axes[i - 1] >= a) {
            return Err(ErrorCode::AttributeOutOfRange);
        }
    }
    let x = &case.inputs[0];
    let dims = x.shape.dims();
    if dims.len() != axes.len() {
        return Err(ErrorCode::ShapeMismatch);
    }
    for (&d, &a) in dims.iter().zip(&axes) {
        if d != 1 && d != out[a as usize] {
            return Err(ErrorCode::ShapeMismatch);
        }
    }
    Ok(vec![expect(out, x.precision, |y| {
        let e: Vec<usize> = dims
            .iter()
            .zip(&axes)
            .map(|(&d, &a)| if d == 1 { 0 } else { y[a as usize] })
            .collect();
        Exact(at(x, &e))
    })])
}

#[test]
fn broadcast_to() {
    let stats = CINN.check(
        "BroadcastTo",
        0xB192,
        20_000,
        gen_broadcast_to,
        ref_broadcast_to,
    );
    stats.require(10_000, 2_000, 0);
}

const COMPARE_KINDS: [&str; 6] = ["kEq", "kNe", "kGe", "kGt", "kLe", "kLt"];

fn gen_compare(rng: &mut Rng) -> Case {
    let mut case = Case::default();
    match rng.below(40) {
        0 => {}
        1 => case.set("kind", text(rng.pick(&["eq", "kEQ", "kMax", ""]))),
        _ => case.set("kind", text(rng.pick(&COMPARE_KINDS))),
    }
    let (a, b) = rng.broadcast_pair(4);
    let (pa, pb) = (rng.precision(), rng.precision());
    let mut x = rng.tensor_p(&a, pa);
    let y = rng.tensor_p(&b, pb);
    // Equal elements now and then, so that kEq, kGe and kLe see equality.
    if a == b && rng.chance(50) {
        for (v, w) in x.data.iter_mut().zip(&y.data) {
            if rng.chance(50) && i64::from(*w).abs() <= bound(pa) {
                *v = *w;
            }
        }
    }
    case.input(x).input(y)
}

fn ref_compare(case: &Case) -> Verdict {
    let kind = case.str_attr("kind").ok_or(ErrorCode::MissingAttribute)?;
    if !COMPARE_KINDS.contains(&kind) {
        return Err(ErrorCode::AttributeOutOfRange);
    }
    let (x, y) = (&case.inputs[0], &case.inputs[1]);
    let out = broadcast(x.shape.dims(), y.shape.dims())?;
    Ok(vec![expect(out, 2, |d| {
        let (a, b) = (broadcast_at(x, d), broadcast_at(y, d));
        Exact(i64::from(match kind {
            "kEq" => a == b,
            "kNe" => a != b,
            "kGe" => a >= b,
            "kGt" => a > b,
            "kLe" => a <= b,
            _ => a < b,
        }))
    })])
}

#[test]
fn compare_kinds() {
    let stats = CINN.check("Compare", 0xC193, 20_000, gen_compare, ref_compare);
    stats.require(15_000, 1_000, 0);
}

fn gen_concat(rng: &mut Rng) -> Case {
    let mut case = Case::default();
    let rank = if rng.chance(4) { 0 } else { rng.size(1, 4) };
    let base = rng.dimensions(rank, 4, 4);
    let axis = if rank == 0 { 0 } else { rng.size(0, rank - 1) };
    match rng.below(10) {
        0 => {}
        1 => case.set(
            "axis",
            int(rank as i64 * rng.pick(&[1, -1]) - i64::from(rng.chance(50))),
        ),
        2 | 3 => case.set("axis", int(axis as i64 - rank as i64)),
        _ => case.set("axis", int(axis as i64)),
    }
    let axis = match case.int_attr("axis") {
        Some(a) if (-(rank as i64)..0).contains(&a) => (a + rank as i64) as usize,
        Some(a) if (0..rank as i64).contains(&a) => a as usize,
        _ => 0,
    };
    let count = rng.size(1, 4);
    for _ in 0..count {
        let mut dims = base.clone();
        if rank > 0 {
            dims[axis] = rng.range(0, 3) as u32;
        }
        if rng.chance(4) {
            if rank > 0 && rng.chance(50) {
                let other = rng.size(0, rank - 1);
                if other != axis {
                    dims[other] += 1;
                }
            } else {
                dims.push(1);
            }
        }
        let p = rng.precision();
        case = case.input(rng.tensor_p(&dims, p));
    }
    case
}

fn ref_concat(case: &Case) -> Verdict {
    let rank = case.inputs[0].shape.rank();
    let axis = resolve(case.int_attr("axis").unwrap_or(0), rank)?;
    let out = concat_dims(&case.inputs, axis).ok_or(ErrorCode::ShapeMismatch)?;
    let precision = case.inputs.iter().map(|t| t.precision).max().unwrap();
    Ok(vec![expect(out, precision, |y| {
        concat_at(&case.inputs, axis, y)
    })])
}

#[test]
fn concat() {
    let stats = CINN.check("Concat", 0xC194, 20_000, gen_concat, ref_concat);
    stats.require(12_000, 2_000, 0);
}

/// Output extent and padding before along one spatial axis of a forward convolution, as the
/// engine defines the padding algorithms that spec 002's Conv only names (docs/ops.md, CINN
/// decision 15: EXPLICIT: p and p; VALID: 0 and 0; SAME: ⌈size/stride⌉ outputs with the total
/// padding split, the smaller half before).
fn conv_extent(
    size: i64,
    kernel: i64,
    stride: i64,
    dilation: i64,
    pad: i64,
    algorithm: &str,
) -> Result<(i64, i64), ErrorCode> {
    let span = dilation * (kernel - 1) + 1;
    let (before, after) = match algorithm {
        "VALID" => (0, 0),
        "SAME" => {
            let out = (size + stride - 1) / stride;
            let total = ((out - 1) * stride + span - size).max(0);
            (total / 2, total - total / 2)
        }
        _ => (pad, pad),
    };
    let padded = size + before + after;
    if padded < span {
        return Err(ErrorCode::ShapeMismatch);
    }
    Ok(((padded - span) / stride + 1, before))
}

fn gen_conv(rng: &mut Rng) -> Case {
    let mut case = Case::default();
    if rng.chance(30) {
        case.set("conv_type", text("forward"));
    } else if rng.chance(2) {
        case.set("conv_type", text("Forward"));
    }
    gen_data_format(rng, &mut case);
    let nhwc = case.str_attr("data_format") == Some("NHWC");
    let algorithm = rng.pick(&["", "", "EXPLICIT", "SAME", "VALID"]);
    if !algorithm.is_empty() {
        case.set("padding_algorithm", text(algorithm));
    } else if rng.chance(2) {
        case.set("padding_algorithm", text("same"));
    }
    let mut geometry = |rng: &mut Rng, name: &str, low: i64, high: i64| {
        if rng.chance(25) {
            return; // default
        }
        let mut values = vec![rng.range(low, high), rng.range(low, high)];
        if rng.chance(3) {
            values[rng.size(0, 1)] = rng.pick(&[low - 1, 4096]);
        } else if rng.chance(2) {
            values.push(1);
        }
        case.set(name, ints(&values));
    };
    geometry(rng, "strides", 1, 3);
    geometry(rng, "paddings", 0, 2);
    geometry(rng, "dilations", 1, 2);
    let groups = rng.range(1, 3);
    if groups > 1 || rng.chance(30) {
        case.set("groups", int(if rng.chance(3) { 0 } else { groups }));
    }
    let f = rng.frac_attr(&mut case);
    let group_channels = rng.range(1, 3);
    let mut channels = groups * group_channels;
    let out_channels = groups * rng.range(1, 3);
    if rng.chance(5) {
        channels += 1;
    }
    let batch = rng.range(0, 2);
    let low = i64::from(!rng.chance(5));
    let (height, width) = (rng.range(low, 7), rng.range(low, 7));
    let low = i64::from(rng.chance(97));
    let (kh, kw) = (rng.range(low, 3), rng.range(1, 3));
    let x_logical = [batch, channels, height, width];
    let x_dims: Vec<u32> = if nhwc {
        [batch, height, width, channels]
    } else {
        x_logical
    }
    .iter()
    .map(|&d| d as u32)
    .collect();
    let mut w_dims: Vec<u32> = [out_channels, group_channels, kh, kw]
        .iter()
        .map(|&d| d as u32)
        .collect();
    if rng.chance(3) {
        w_dims.pop();
    }
    if rng.chance(15) {
        // output_shape: often the right one (computed by the reference), else wrong or short.
        let mut probe = Case::default();
        probe.attrs.clone_from(&case.attrs);
        probe.inputs = vec![
            tensor(&x_dims, 32, vec![0; numel(&x_dims)]),
            tensor(&w_dims, 32, vec![0; numel(&w_dims)]),
        ];
        let shape: Vec<i64> = match ref_conv_shape(&probe) {
            Ok((out, _)) => out.iter().map(|&d| i64::from(d)).collect(),
            Err(_) => vec![1, 1, 1, 1],
        };
        let shape = match rng.below(4) {
            0 => shape.iter().map(|&d| d + 1).collect(),
            1 => shape[..3].to_vec(),
            _ => shape,
        };
        case.set("output_shape", ints(&shape));
    } else if rng.chance(5) {
        case.set("output_shape", ints(&[]));
    }
    let mut x = rng.tensor(&x_dims, f, &[]);
    let mut w = rng.tensor(&w_dims, f, &[]);
    if rng.chance(60) {
        // Calm: every sum of ICg·KH·KW products fits after rescaling.
        let taps = i128::from(group_channels * kh.max(1) * kw);
        let limit = isqrt((i128::from(MAX) << f) / taps);
        calm(&mut x, limit);
        calm(&mut w, limit);
    }
    case.input(x).input(w)
}

/// The geometry of a forward convolution: output dims (stored layout) and the parameters.
struct ConvPlan {
    nhwc: bool,
    strides: [i64; 2],
    dilations: [i64; 2],
    pad_before: [i64; 2],
    groups: i64,
    frac: u32,
    /// Logical (N, C, H, W) of the input and (OC, ICg, KH, KW) of the weight.
    x: [i64; 4],
    w: [i64; 4],
    /// Logical (N, OC, OH, OW) of the output.
    y: [i64; 4],
}

fn ref_conv_shape(case: &Case) -> Result<(Vec<u32>, ConvPlan), ErrorCode> {
    let aor = ErrorCode::AttributeOutOfRange;
    match case.str_attr("conv_type") {
        None | Some("forward") => {}
        Some(kind @ ("backward_data" | "backward_filter")) => {
            unreachable!("{kind}: Conv's gradients are checked in cinn_complex.rs")
        }
        Some(_) => return Err(aor),
    }
    let algorithm = match case.str_attr("padding_algorithm") {
        None => "EXPLICIT",
        Some(a @ ("EXPLICIT" | "SAME" | "VALID")) => a,
        Some(_) => return Err(aor),
    };
    let output_shape = match case.ints_attr("output_shape") {
        None => None,
        Some(v) if v.is_empty() => None,
        Some(v) if v.len() == 4 => {
            if v.iter().any(|&d| !(0..=i64::from(u32::MAX)).contains(&d)) {
                return Err(aor);
            }
            Some(v)
        }
        Some(_) => return Err(aor),
    };
    let nhwc = bn_format(case)?;
    let strides = case
        .pair("strides", [1, 1], 1, 4095)
        .ok_or(ErrorCode::AttributeOutOfRange)?;
    let paddings = case
        .pair("paddings", [0, 0], 0, 4095)
        .ok_or(ErrorCode::AttributeOutOfRange)?;
    let dilations = case
        .pair("dilations", [1, 1], 1, 4095)
        .ok_or(ErrorCode::AttributeOutOfRange)?;
    let groups = case.int_attr("groups").unwrap_or(1);
    if !(1..=i64::from(u32::MAX)).contains(&groups) {
        return Err(aor);
    }
    let frac = frac_of(case)?;
    let (xd, wd) = (case.inputs[0].shape.dims(), case.inputs[1].shape.dims());
    if xd.len() != 4 || wd.len() != 4 {
        return Err(ErrorCode::ShapeMismatch);
    }
    let xd: Vec<i64> = xd.iter().map(|&d| i64::from(d)).collect();
    let x = if nhwc {
        [xd[0], xd[3], xd[1], xd[2]]
    } else {
        [xd[0], xd[1], xd[2], xd[3]]
    };
    let w = [wd[0], wd[1], wd[2], wd[3]].map(i64::from);
    let [batch, channels, height, width] = x;
    let [out_channels, group_channels, kh, kw] = w;
    if groups > channels
        || channels % groups != 0
        || out_channels % groups != 0
        || group_channels != channels / groups
        || kh == 0
        || kw == 0
    {
        return Err(ErrorCode::ShapeMismatch);
    }
    let (oh, pt) = conv_extent(height, kh, strides[0], dilations[0], paddings[0], algorithm)?;
    let (ow, pl) = conv_extent(width, kw, strides[1], dilations[1], paddings[1], algorithm)?;
    let y = [batch, out_channels, oh, ow];
    let stored = if nhwc {
        [batch, oh, ow, out_channels]
    } else {
        y
    };
    if let Some(expected) = output_shape
        && expected != stored
    {
        return Err(ErrorCode::ShapeMismatch);
    }
    let out = stored.iter().map(|&d| d as u32).collect();
    Ok((
        out,
        ConvPlan {
            nhwc,
            strides,
            dilations,
            pad_before: [pt, pl],
            groups,
            frac,
            x,
            w,
            y,
        },
    ))
}

fn ref_conv(case: &Case) -> Verdict {
    let (out, plan) = ref_conv_shape(case)?;
    let (input, weight) = (&case.inputs[0], &case.inputs[1]);
    let logical = |index: [i64; 4]| -> Vec<usize> {
        let [n, c, h, w] = index.map(|v| v as usize);
        if plan.nhwc {
            vec![n, h, w, c]
        } else {
            vec![n, c, h, w]
        }
    };
    let out_per_group = plan.y[1] / plan.groups;
    let [_, _, height, width] = plan.x;
    let [_, group_channels, kh_n, kw_n] = plan.w;
    Ok(vec![expect(out, 32, |d| {
        let (n, oc, p, q) = if plan.nhwc {
            (d[0], d[3], d[1], d[2])
        } else {
            (d[0], d[1], d[2], d[3])
        };
        let [n, oc, p, q] = [n, oc, p, q].map(|v| v as i64);
        let group = oc / out_per_group;
        let mut sum = 0i128;
        for ic in 0..group_channels {
            for kh in 0..kh_n {
                for kw in 0..kw_n {
                    let h = p * plan.strides[0] - plan.pad_before[0] + kh * plan.dilations[0];
                    let w = q * plan.strides[1] - plan.pad_before[1] + kw * plan.dilations[1];
                    if (0..height).contains(&h) && (0..width).contains(&w) {
                        let xv = at(input, &logical([n, group * group_channels + ic, h, w]));
                        let wv = at(weight, &[oc, ic, kh, kw].map(|v| v as usize));
                        sum += i128::from(xv) * i128::from(wv);
                    }
                }
            }
        }
        exact(round_half_away(sum, plan.frac))
    })])
}

#[test]
fn conv_forward() {
    let stats = CINN.check("Conv", 0xC195, 20_000, gen_conv, ref_conv);
    stats.require(7_000, 3_000, 1_000);
}

const REDUCE_KINDS: [&str; 4] = ["kSum", "kProd", "kMax", "kMin"];

fn gen_reduce(rng: &mut Rng) -> Case {
    let mut case = Case::default();
    match rng.below(40) {
        0 => {}
        1 => case.set("kind", text(rng.pick(&["kMa", "sum", "kMean"]))),
        _ => case.set("kind", text(rng.pick(&REDUCE_KINDS))),
    }
    let f = rng.frac_attr(&mut case);
    let dims = rng.shape(4, 4);
    let rank = dims.len() as i64;
    if !rng.chance(25) {
        let mut axes: Vec<i64> = (0..rank).collect();
        rng.shuffle(&mut axes);
        let count = rng.size(0, axes.len());
        axes.truncate(count);
        match rng.below(15) {
            0 => axes.push(rank),
            1 => axes.push(-1),
            2 if !axes.is_empty() => axes.push(axes[0]),
            _ => {}
        }
        case.set("dim", ints(&axes));
    }
    match rng.below(3) {
        0 => {}
        choice => case.set("keep_dim", AttrValue::Bool(choice == 1)),
    }
    let kind = case.str_attr("kind").unwrap_or("");
    let x = if matches!(kind, "kMax" | "kMin") && rng.chance(40) {
        let p = rng.precision();
        rng.tensor_p(&dims, p)
    } else if kind == "kProd" && rng.chance(50) {
        // Factors near 1, so that long products neither overflow nor vanish at once.
        let one = 1i64 << f;
        let data = (0..numel(&dims))
            .map(|_| {
                (rng.sign() * (one + rng.range(-(one / 2), one / 2)) + rng.range(-1, 1))
                    .clamp(-MAX, MAX)
            })
            .collect();
        tensor(&dims, 32, data)
    } else {
        let mut x = rng.tensor(&dims, f, &[]);
        if rng.chance(50) {
            calm(&mut x, MAX / numel(&dims).max(1) as i64);
        }
        x
    };
    case.input(x)
}

fn ref_reduce(case: &Case) -> Verdict {
    let kind = case.str_attr("kind").ok_or(ErrorCode::MissingAttribute)?;
    if !REDUCE_KINDS.contains(&kind) {
        return Err(ErrorCode::AttributeOutOfRange);
    }
    let listed = case.ints_attr("dim").unwrap_or_default();
    for (i, a) in listed.iter().enumerate() {
        if listed[..i].contains(a) {
            return Err(ErrorCode::AttributeOutOfRange);
        }
    }
    let keep = case.bool_attr("keep_dim").unwrap_or(false);
    let f = frac_of(case)?;
    let x = &case.inputs[0];
    let dims = x.shape.dims();
    let rank = dims.len();
    if listed.iter().any(|&a| !(0..rank as i64).contains(&a)) {
        return Err(ErrorCode::AttributeOutOfRange);
    }
    let reduced: Vec<bool> = (0..rank)
        .map(|axis| listed.is_empty() || listed.contains(&(axis as i64)))
        .collect();
    let kept_dims: Vec<u32> = (0..rank)
        .filter(|&a| !reduced[a])
        .map(|a| dims[a])
        .collect();
    let reduced_dims: Vec<u32> = (0..rank).filter(|&a| reduced[a]).map(|a| dims[a]).collect();
    let mut out: Vec<u32> = (0..rank)
        .filter(|&a| keep || !reduced[a])
        .map(|a| if reduced[a] { 1 } else { dims[a] })
        .collect();
    if kept_dims.is_empty() && !keep {
        out = vec![1];
    }
    let extreme = matches!(kind, "kMax" | "kMin");
    if extreme && numel(&reduced_dims) == 0 && numel(&kept_dims) > 0 {
        return Err(ErrorCode::ShapeMismatch);
    }
    let precision = if extreme { x.precision } else { 32 };
    let one = 1i128 << f;
    let kept = indices(&kept_dims);
    let group = indices(&reduced_dims);
    let data = kept
        .iter()
        .map(|k| {
            // The elements sharing the kept coordinates k, in row-major order of the reduced axes.
            let values = group.iter().map(|r| {
                let (mut ki, mut ri) = (k.iter(), r.iter());
                let index: Vec<usize> = reduced
                    .iter()
                    .map(|&is_reduced| {
                        let next = if is_reduced { ri.next() } else { ki.next() };
                        *next.unwrap()
                    })
                    .collect();
                i128::from(at(x, &index))
            });
            match kind {
                "kSum" => exact(values.sum()),
                "kProd" => {
                    let mut acc = one;
                    for v in values {
                        acc = round_half_away(acc * v, f);
                        if acc.abs() > i128::from(MAX) {
                            return Fail(ErrorCode::IntegerOverflow);
                        }
                    }
                    Exact(acc as i64)
                }
                "kMax" => Exact(values.max().unwrap() as i64),
                _ => Exact(values.min().unwrap() as i64),
            }
        })
        .collect();
    Ok(vec![Expect {
        dims: out,
        precision,
        data,
    }])
}

#[test]
fn reduce() {
    let stats = CINN.check("Reduce", 0xC196, 30_000, gen_reduce, ref_reduce);
    stats.require(15_000, 3_000, 1_000);
}

fn gen_reshape(rng: &mut Rng) -> Case {
    let mut case = Case::default();
    let dims = rng.shape(4, 4);
    let n = numel(&dims) as i64;
    // A random factorization of n (n = 0 only through −1).
    let mut shape: Vec<i64> = Vec::new();
    let mut rest = n.max(1);
    while rest > 1 && shape.len() < 5 {
        let divisors: Vec<i64> = (2..=rest).filter(|d| rest % d == 0).collect();
        let d = rng.pick(&divisors);
        shape.push(d);
        rest /= d;
    }
    if rest > 1 {
        shape.push(rest);
    }
    for _ in 0..rng.below(3) {
        let position = rng.size(0, shape.len());
        shape.insert(position, 1);
    }
    rng.shuffle(&mut shape);
    if (n == 0 || rng.chance(40)) && !shape.is_empty() {
        let position = rng.size(0, shape.len() - 1);
        shape[position] = -1;
    } else if n == 0 {
        shape.push(-1);
    }
    match rng.below(20) {
        0 => shape.push(2),
        1 => shape.push(0),
        2 => shape.push(-1),
        3 => shape.push(-2),
        4 if !shape.is_empty() => shape[0] = shape[0].abs() * 3,
        _ => {}
    }
    if !rng.chance(3) {
        case.set("shape", ints(&shape));
    }
    let p = rng.precision();
    let x = rng.tensor_p(&dims, p);
    case.input(x)
}

fn ref_reshape(case: &Case) -> Verdict {
    let shape = case.ints_attr("shape").ok_or(ErrorCode::MissingAttribute)?;
    let mut inferred = false;
    for &entry in &shape {
        if entry == -1 {
            if inferred {
                return Err(ErrorCode::AttributeOutOfRange);
            }
            inferred = true;
        } else if !(1..=i64::from(u32::MAX)).contains(&entry) {
            return Err(ErrorCode::AttributeOutOfRange);
        }
    }
    let x = &case.inputs[0];
    let elements = numel(x.shape.dims()) as i64;
    let known: i64 = shape.iter().filter(|&&e| e != -1).product();
    let missing = if inferred {
        if elements % known != 0 {
            return Err(ErrorCode::ShapeMismatch);
        }
        elements / known
    } else if known == elements {
        1
    } else {
        return Err(ErrorCode::ShapeMismatch);
    };
    let out: Vec<u32> = shape
        .iter()
        .map(|&e| if e == -1 { missing } else { e } as u32)
        .collect();
    Ok(vec![expect(out.clone(), x.precision, |y| {
        Exact(i64::from(x.data[flat(y, &out)]))
    })])
}

#[test]
fn reshape() {
    let stats = CINN.check("Reshape", 0xC197, 20_000, gen_reshape, ref_reshape);
    stats.require(10_000, 2_000, 0);
}

fn gen_reverse(rng: &mut Rng) -> Case {
    let mut case = Case::default();
    let dims = rng.shape(4, 4);
    let rank = dims.len() as i64;
    if !rng.chance(4) {
        let count = rng.size(0, dims.len() + 1);
        let axes: Vec<i64> = (0..count)
            .map(|_| {
                if rng.chance(6) {
                    rng.pick(&[rank, -rank - 1, 100])
                } else if rank == 0 {
                    0
                } else {
                    rng.range(-rank, rank - 1)
                }
            })
            .collect();
        case.set("axis", ints(&axes));
    }
    let p = rng.precision();
    let x = rng.tensor_p(&dims, p);
    case.input(x)
}

fn ref_reverse(case: &Case) -> Verdict {
    let axes = case.ints_attr("axis").ok_or(ErrorCode::MissingAttribute)?;
    let x = &case.inputs[0];
    let dims = dims_of(x);
    let mut flip = vec![false; dims.len()];
    for &a in &axes {
        flip[resolve(a, dims.len())?] = true;
    }
    Ok(vec![expect(dims.clone(), x.precision, |y| {
        let e: Vec<usize> = y
            .iter()
            .zip(&dims)
            .zip(&flip)
            .map(|((&i, &n), &f)| if f { n as usize - 1 - i } else { i })
            .collect();
        Exact(at(x, &e))
    })])
}

#[test]
fn reverse() {
    let stats = CINN.check("Reverse", 0xC198, 20_000, gen_reverse, ref_reverse);
    stats.require(12_000, 2_000, 0);
}

fn gen_select(rng: &mut Rng) -> Case {
    let dims = rng.shape(4, 4);
    let mut shapes = [dims.clone(), dims.clone(), dims];
    if rng.chance(8) {
        let victim = rng.size(0, 2);
        shapes[victim].push(2);
    }
    let p = rng.precision();
    let condition = rng.tensor_p(&shapes[0], p);
    let condition = Tensor {
        data: condition
            .data
            .iter()
            .map(|&v| if rng.chance(50) { 0 } else { v })
            .collect(),
        ..condition
    };
    let (pa, pb) = (rng.precision(), rng.precision());
    let on_true = rng.tensor_p(&shapes[1], pa);
    let on_false = rng.tensor_p(&shapes[2], pb);
    Case::default()
        .input(condition)
        .input(on_true)
        .input(on_false)
}

fn ref_select(case: &Case) -> Verdict {
    let (c, a, b) = (&case.inputs[0], &case.inputs[1], &case.inputs[2]);
    if c.shape != a.shape || a.shape != b.shape {
        return Err(ErrorCode::ShapeMismatch);
    }
    Ok(vec![expect(
        dims_of(a),
        a.precision.max(b.precision),
        |y| Exact(if at(c, y) != 0 { at(a, y) } else { at(b, y) }),
    )])
}

#[test]
fn select() {
    let stats = CINN.check("Select", 0xC199, 20_000, gen_select, ref_select);
    stats.require(15_000, 1_000, 0);
}

fn gen_slice(rng: &mut Rng) -> Case {
    let mut case = Case::default();
    let dims = rng.shape(4, 5);
    let rank = dims.len();
    let mut axes: Vec<usize> = (0..rank).collect();
    rng.shuffle(&mut axes);
    axes.truncate(rng.size(0, rank));
    let mut axes_attr: Vec<i64> = Vec::new();
    let (mut starts, mut ends) = (Vec::new(), Vec::new());
    for &a in &axes {
        let n = i64::from(dims[a]);
        if n == 0 {
            continue; // no valid range on an empty axis
        }
        let start = rng.range(0, n - 1);
        axes_attr.push(a as i64);
        starts.push(start);
        ends.push(rng.range(start + 1, n));
    }
    match rng.below(24) {
        0 if !starts.is_empty() => starts[0] = -1,
        1 if !starts.is_empty() => ends[0] = starts[0],
        2 if !starts.is_empty() => ends[0] += 1,
        3 => {
            axes_attr.push(rank as i64);
            starts.push(0);
            ends.push(1);
        }
        4 if !axes_attr.is_empty() => axes_attr[0] = -1,
        5 if !axes_attr.is_empty() => {
            axes_attr.push(axes_attr[0]);
            starts.push(starts[0]);
            ends.push(ends[0]);
        }
        6 => ends.push(1),
        _ => {}
    }
    for (name, values) in [("axes", &axes_attr), ("starts", &starts), ("ends", &ends)] {
        if !rng.chance(2) {
            case.set(name, ints(values));
        }
    }
    let p = rng.precision();
    let x = rng.tensor_p(&dims, p);
    case.input(x)
}

fn ref_slice(case: &Case) -> Verdict {
    let axes = case.ints_attr("axes").ok_or(ErrorCode::MissingAttribute)?;
    let starts = case
        .ints_attr("starts")
        .ok_or(ErrorCode::MissingAttribute)?;
    let ends = case.ints_attr("ends").ok_or(ErrorCode::MissingAttribute)?;
    let aor = Err(ErrorCode::AttributeOutOfRange);
    if axes.len() != starts.len() || axes.len() != ends.len() {
        return aor;
    }
    for (i, a) in axes.iter().enumerate() {
        if axes[..i].contains(a) || *a < 0 || starts[i] < 0 || ends[i] <= starts[i] {
            return aor;
        }
    }
    let x = &case.inputs[0];
    let dims = dims_of(x);
    let mut out = dims.clone();
    let mut offset = vec![0usize; dims.len()];
    for ((&a, &start), &end) in axes.iter().zip(&starts).zip(&ends) {
        if a >= dims.len() as i64 || end > i64::from(dims[a as usize]) {
            return aor;
        }
        out[a as usize] = (end - start) as u32;
        offset[a as usize] = start as usize;
    }
    Ok(vec![expect(out, x.precision, |y| {
        let e: Vec<usize> = y.iter().zip(&offset).map(|(&i, &o)| i + o).collect();
        Exact(at(x, &e))
    })])
}

#[test]
fn slice() {
    let stats = CINN.check("Slice", 0xC200, 20_000, gen_slice, ref_slice);
    stats.require(12_000, 2_000, 0);
}

fn gen_transpose(rng: &mut Rng) -> Case {
    let mut case = Case::default();
    let dims = rng.shape(4, 4);
    let rank = dims.len();
    let mut perm: Vec<i64> = (0..rank as i64).collect();
    rng.shuffle(&mut perm);
    match rng.below(20) {
        0 => perm.push(rank as i64),
        1 if !perm.is_empty() => {
            perm.pop();
        }
        2 if rank > 1 => perm[0] = perm[1],
        3 if !perm.is_empty() => perm[0] = rng.pick(&[-1, rank as i64]),
        _ => {}
    }
    if !rng.chance(3) {
        case.set("axis", ints(&perm));
    }
    let p = rng.precision();
    let x = rng.tensor_p(&dims, p);
    case.input(x)
}

fn ref_transpose(case: &Case) -> Verdict {
    let perm = case.ints_attr("axis").ok_or(ErrorCode::MissingAttribute)?;
    let x = &case.inputs[0];
    let dims = dims_of(x);
    let rank = dims.len();
    for (i, a) in perm.iter().enumerate() {
        if perm[..i].contains(a) {
            return Err(ErrorCode::AttributeOutOfRange);
        }
    }
    if perm.len() != rank || perm.iter().any(|&a| !(0..rank as i64).contains(&a)) {
        return Err(ErrorCode::AttributeOutOfRange);
    }
    let out: Vec<u32> = perm.iter().map(|&a| dims[a as usize]).collect();
    Ok(vec![expect(out, x.precision, |y| {
        let mut e = vec![0; rank];
        for (i, &a) in perm.iter().enumerate() {
            e[a as usize] = y[i];
        }
        Exact(at(x, &e))
    })])
}

#[test]
fn transpose() {
    let stats = CINN.check("Transpose", 0xC201, 20_000, gen_transpose, ref_transpose);
    stats.require(12_000, 2_000, 0);
}

// ---------------------------------------------------------------------------------------------
// Coverage of the table
// ---------------------------------------------------------------------------------------------

/// Every CINN primitive of the table has a property above; a new primitive must get one.
#[test]
fn every_cinn_primitive_has_a_property() {
    CINN.assert_covers(&[
        // Unary.
        "Abs",
        "Acos",
        "Acosh",
        "Asin",
        "Asinh",
        "Atan",
        "Atanh",
        "BitwiseNot",
        "Ceil",
        "Cos",
        "Cosh",
        "Erf",
        "Exp",
        "Floor",
        "Identity",
        "IsFinite",
        "IsInf",
        "IsNan",
        "Log",
        "Log10",
        "Log2",
        "LogicalNot",
        "Negative",
        "Round",
        "Rsqrt",
        "Sign",
        "Sin",
        "Sinh",
        "Sqrt",
        "Tan",
        "Tanh",
        "Trunc",
        // Binary, Dot and the scalar.
        "Add",
        "BitwiseAnd",
        "BitwiseOr",
        "BitwiseXor",
        "Div",
        "Dot",
        "FloorDiv",
        "FloorMod",
        "LeftShift",
        "LogicalAnd",
        "LogicalOr",
        "LogicalXor",
        "Max",
        "Min",
        "Mod",
        "Mul",
        "Power",
        "RightShift",
        "Sub",
        "ConstScalar",
        // Complex.
        "BnGradBiasScale",
        "BnMeanVariance",
        "BroadcastTo",
        "Compare",
        "Concat",
        "Conv",
        "Reduce",
        "Reshape",
        "Reverse",
        "Select",
        "Slice",
        "Transpose",
    ]);
}
