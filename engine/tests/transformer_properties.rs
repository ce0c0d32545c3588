//! Properties of the transformer operators whose reference is a formula per element:
//!
//! - `requantize` against a plain reference: the product in i128, rounded by the definition
//!   of docs/ops.md (halves away from zero, written as a floor of the magnitude) and clipped;
//! - `activation` against the real functions in f64 (GELU, its tanh form, SiLU), within the
//!   error bound its documentation states, which the test also reports as measured.
//!
//! Shapes are random, values biased to the edges of their precision (the largest products
//! included), scales spread from fine to coarse, and attributes out of range must be refused
//! with `AttributeOutOfRange`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a failing property reports by panicking
#![allow(clippy::float_arithmetic, clippy::cast_precision_loss)] // the f64 evaluations of the real functions

mod common;

use common::Rng;
use common::property::{Case, Expect, Suite, Want, at, bound, expect, flat, indices, tensor};

use cvm_engine::error::ErrorCode;
use cvm_engine::model::AttrValue;
use cvm_engine::ops::Family;

/// The transformer operators covered by this file.
const TRANSFORMER: Suite<ErrorCode> = Suite {
    what: "transformer operator",
    covers: |def| def.family == Family::Transformer,
    spoil: |_, _, _| None,
};

/// A value of precision `p`, biased toward 0, ±1 and ±(2^(p−1) − 1).
fn value(rng: &mut Rng, p: u8) -> i64 {
    let b = bound(p);
    match rng.below(10) {
        0 => rng.pick(&[0, 1, -1]).clamp(-b, b),
        1..=2 => rng.pick(&[b, -b, b - 1, -(b - 1)]),
        _ => rng.range(-b, b),
    }
}

fn gen_requantize(rng: &mut Rng) -> Case {
    let rank = rng.size(0, 4);
    let dims = rng.dimensions(rank, 9, 5);
    let any = rng.range(1, 32) as u8;
    let p = rng.pick(&[1, 8, 16, 24, 31, 32, any]);
    let count: usize = dims.iter().map(|&d| d as usize).product();
    let data = (0..count).map(|_| value(rng, p)).collect();
    let mut case = Case::default().input(tensor(&dims, p, data));
    let max = i64::from(i32::MAX);
    if !rng.chance(10) {
        let multiplier = match rng.below(10) {
            0 => rng.pick(&[max, -max, 1, -1, 0]),
            1 => rng.pick(&[max + 1, -max - 1, i64::MAX]),
            _ => rng.range(-max, max),
        };
        case = case.int("multiplier", multiplier);
    }
    if !rng.chance(10) {
        let shift = match rng.below(10) {
            0 => rng.pick(&[0, 1, 61, 62]),
            1 => rng.pick(&[-1, 63, 64]),
            _ => rng.range(0, 62),
        };
        case = case.int("shift", shift);
    }
    if !rng.chance(10) {
        let precision = match rng.below(10) {
            0 => rng.pick(&[1, 32]),
            1 => rng.pick(&[0, 33, -1]),
            _ => rng.range(1, 32),
        };
        case = case.int("precision", precision);
    }
    case
}

/// v / 2^s rounded to the nearest integer, halves away from zero.
fn round_away(v: i128, s: u32) -> i128 {
    if s == 0 {
        return v;
    }
    let magnitude = (v.abs() + (1i128 << (s - 1))) >> s;
    if v < 0 { -magnitude } else { magnitude }
}

fn ref_requantize(case: &Case) -> Result<Vec<Expect>, ErrorCode> {
    let multiplier = case.int_attr("multiplier").unwrap_or(1);
    let shift = case.int_attr("shift").unwrap_or(0);
    let precision = case.int_attr("precision").unwrap_or(8);
    let max = i64::from(i32::MAX);
    if !(-max..=max).contains(&multiplier)
        || !(0..=62).contains(&shift)
        || !(1..=32).contains(&precision)
    {
        return Err(ErrorCode::AttributeOutOfRange);
    }
    let x = &case.inputs[0];
    let b = i128::from(bound(precision as u8));
    Ok(vec![expect(
        x.shape.dims().to_vec(),
        precision as u8,
        |d| {
            let product = i128::from(at(x, d)) * i128::from(multiplier);
            round_away(product, shift as u32).clamp(-b, b) as i64
        },
    )])
}

#[test]
fn requantize_matches_the_plain_formula() {
    TRANSFORMER
        .check(
            "requantize",
            0x5EED_0193,
            6000,
            gen_requantize,
            ref_requantize,
        )
        .require(4400, 1400, 0);
}

// ---------------------------------------------------------------------------------------------
// activation
// ---------------------------------------------------------------------------------------------

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

/// The real gate Φ(x) of each function, and the bound ε of docs/ops.md (|Y − X·Φ| ≤ 0.5 + |X|·ε).
fn gate(function: &str, x: f64) -> (f64, f64) {
    match function {
        "gelu" => (
            (1.0 + erf(x / std::f64::consts::SQRT_2)) / 2.0,
            1.12 * 2f64.powi(-28),
        ),
        "silu" => (1.0 / (1.0 + (-x).exp()), 1.125 * 2f64.powi(-28)),
        _ => {
            let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
            ((1.0 + u.tanh()) / 2.0, 1.1 * 2f64.powi(-27))
        }
    }
}

const FUNCTIONS: [&str; 3] = ["gelu", "gelu_tanh", "silu"];

/// A scale m / 2^s for which the precision's largest value stands for about `reach`.
fn scale_for(p: u8, reach: f64) -> (i64, i64) {
    let target = reach / bound(p).max(1) as f64;
    let s = (30.0 - target.log2().floor()).clamp(0.0, 62.0) as i64;
    let m = (target * 2f64.powi(s as i32)).round() as i64;
    (m.clamp(1, i64::from(i32::MAX)), s)
}

/// The multiplier and shift of a real scale `(m, s)`, now and then an edge of their ranges or
/// a value outside them.
fn draw_scale(rng: &mut Rng, (m, s): (i64, i64)) -> (i64, i64) {
    let max = i64::from(i32::MAX);
    let multiplier = match rng.below(20) {
        0 => rng.pick(&[0, -1, max + 1]),
        1 => rng.pick(&[1, max]),
        _ => m,
    };
    let shift = match rng.below(20) {
        0 => rng.pick(&[-1, 63]),
        1 => rng.pick(&[0, 62]),
        _ => s,
    };
    (multiplier, shift)
}

fn gen_activation(rng: &mut Rng) -> Case {
    let rank = rng.size(0, 3);
    let dims = rng.dimensions(rank, 12, 3);
    let any = rng.range(2, 32) as u8;
    let p = rng.pick(&[8, 16, 24, 32, any]);
    let count: usize = dims.iter().map(|&d| d as usize).product();
    let data = (0..count).map(|_| value(rng, p)).collect();
    let mut case = Case::default().input(tensor(&dims, p, data));
    if !rng.chance(5) {
        let function = if rng.chance(2) {
            "relu"
        } else {
            rng.pick(&FUNCTIONS)
        };
        case = case.text("function", function);
    }
    let reach = rng.pick(&[0.5, 2.0, 6.0, 12.0, 40.0, 1e4]);
    let (multiplier, shift) = draw_scale(rng, scale_for(p, reach));
    if !(multiplier == 1 && rng.chance(20)) {
        case = case.int("multiplier", multiplier);
    }
    case.int("shift", shift)
}

fn ref_activation(case: &Case) -> Result<Vec<Expect>, ErrorCode> {
    let function = case.str_attr("function").unwrap_or("gelu");
    let multiplier = case.int_attr("multiplier").unwrap_or(1);
    let shift = case.int_attr("shift").unwrap_or(0);
    let (true, true, true) = (
        FUNCTIONS.contains(&function),
        (1..=i64::from(i32::MAX)).contains(&multiplier),
        (0..=62).contains(&shift),
    ) else {
        return Err(ErrorCode::AttributeOutOfRange);
    };
    let x = &case.inputs[0];
    let scale = multiplier as f64 * 2f64.powi(-(shift as i32));
    Ok(vec![expect(x.shape.dims().to_vec(), x.precision, |d| {
        let v = at(x, d) as f64;
        let (phi, epsilon) = gate(function, v * scale);
        let exact = v * phi;
        // f64's own error on |X · Φ| < 2^31 is below 2^-21.
        let tol = 0.5 + v.abs() * epsilon + 2f64.powi(-20);
        Want::Near { exact, tol }
    })])
}

/// Every gate across its whole domain: X = k · 2^20 + j for every k and 65 offsets j (so 1,040
/// points on each piece of the erf form's cubics, of both signs) at the scale 2^−28, so that x
/// covers (−8, 8) and the error of X · Φ is the gate's own to 2^−31; the largest
/// (|Y − X · Φ| − 0.5) / |X| is printed beside ε.
#[test]
fn activation_gates_are_within_their_bound_across_the_domain() {
    let xs: Vec<i64> = (-2048i64..2048)
        .flat_map(|k| (0..65).map(move |j| (k << 20) + (j * 16381).min((1 << 20) - 1)))
        .filter(|&x| x.abs() < 1 << 31)
        .collect();
    let count = xs.len() as u32;
    let input = tensor(&[count], 32, xs.clone());
    for function in FUNCTIONS {
        let attrs = [
            common::attr("function", AttrValue::Str(function.into())),
            common::attr("multiplier", AttrValue::Int(1)),
            common::attr("shift", AttrValue::Int(28)),
        ];
        let y = common::run_op("activation", &attrs, &[&input])
            .remove(0)
            .data;
        let mut worst = 0f64;
        for (&x, &y) in xs.iter().zip(&y) {
            let v = x as f64;
            let (phi, epsilon) = gate(function, v / 2f64.powi(28));
            let excess = ((f64::from(y) - v * phi).abs() - 0.5).max(0.0);
            assert!(
                excess <= v.abs() * epsilon + 2f64.powi(-20),
                "{function}({x}): {y} against {}",
                v * phi
            );
            if x != 0 {
                worst = worst.max(excess / v.abs());
            }
        }
        let epsilon = gate(function, 0.0).1;
        println!(
            "{function}: {count} inputs, largest (|Y − X·Φ| − 0.5)/|X| {worst:.3e}, ε {epsilon:.3e}"
        );
    }
}

#[test]
fn activation_is_within_its_bound_of_the_real_functions() {
    TRANSFORMER
        .check(
            "activation",
            0x5EED_0194,
            3000,
            gen_activation,
            ref_activation,
        )
        .require(2400, 300, 0);
}

// ---------------------------------------------------------------------------------------------
// batch_matmul
// ---------------------------------------------------------------------------------------------

/// Leading axes that broadcast against each other (now and then ones that do not), and the
/// matrix sizes: odd sizes, tails of the 2 × 4 tiles and of the 16-lane vectors, empty axes.
fn gen_batch_matmul(rng: &mut Rng) -> Case {
    let rank = rng.size(0, 3);
    let lead = rng.dimensions(rank, 4, 5);
    let broadcast = |rng: &mut Rng, lead: &[u32]| -> Vec<u32> {
        let keep = rng.size(0, lead.len());
        lead[lead.len() - keep..]
            .iter()
            .map(|&d| if rng.chance(30) { 1 } else { d })
            .collect()
    };
    let mut a_lead = broadcast(rng, &lead);
    let b_lead = broadcast(rng, &lead);
    if rng.chance(4)
        && let Some(d) = a_lead.last_mut()
    {
        *d += 2; // no longer broadcasts unless the other side is 1 or absent
    }
    let size = |rng: &mut Rng| match rng.below(10) {
        0 => 0,
        1 => rng.pick(&[1, 2, 3, 4, 5]) as u32,
        2 => rng.range(15, 49) as u32,
        _ => rng.range(1, 12) as u32,
    };
    let (mut m, mut k, mut n) = (size(rng), size(rng), size(rng));
    if rng.chance(2) {
        // The longest reduction of 8-bit operands (precision 8 + 8 + 16 = 32, sums near
        // 2^30), or one past it (precision 33).
        (m, k, n) = (
            rng.range(1, 2) as u32,
            rng.pick(&[65535, 65536]),
            rng.range(0, 2) as u32,
        );
    }
    let transpose_b = rng.chance(50);
    let pa = rng.pick(&[8, 8, 8, 7, 4, 1, 9]);
    let pb = rng.pick(&[8, 8, 8, 5, 2, 1, 16]);
    let mut a_dims = a_lead.clone();
    a_dims.extend([m, k]);
    if rng.chance(5) {
        k += 1; // K disagrees
    }
    let mut b_dims = b_lead.clone();
    b_dims.extend(if transpose_b { [n, k] } else { [k, n] });
    if rng.chance(3) {
        b_dims.truncate(rng.size(0, 1)); // rank below 2
    }
    let values = |rng: &mut Rng, dims: &[u32], p: u8| -> Vec<i64> {
        let count: usize = dims.iter().map(|&d| d as usize).product();
        let full = rng.chance(20);
        (0..count)
            .map(|_| {
                if full {
                    rng.pick(&[bound(p), -bound(p)])
                } else {
                    value(rng, p)
                }
            })
            .collect()
    };
    let a = values(rng, &a_dims, pa);
    let b = values(rng, &b_dims, pb);
    let mut case = Case::default()
        .input(tensor(&a_dims, pa, a))
        .input(tensor(&b_dims, pb, b));
    if transpose_b || rng.chance(50) {
        case = case.flag("transpose_b", transpose_b);
    }
    case
}

fn ref_batch_matmul(case: &Case) -> Result<Vec<Expect>, ErrorCode> {
    let transpose_b = case.bool_attr("transpose_b").unwrap_or(false);
    let (a, b) = (&case.inputs[0], &case.inputs[1]);
    let (ad, bd) = (a.shape.dims(), b.shape.dims());
    if ad.len() < 2 || bd.len() < 2 {
        return Err(ErrorCode::ShapeMismatch);
    }
    let (a_lead, b_lead) = (&ad[..ad.len() - 2], &bd[..bd.len() - 2]);
    let [m, k] = [ad[ad.len() - 2], ad[ad.len() - 1]];
    let [b0, b1] = [bd[bd.len() - 2], bd[bd.len() - 1]];
    let (bk, n) = if transpose_b { (b1, b0) } else { (b0, b1) };
    if k != bk {
        return Err(ErrorCode::ShapeMismatch);
    }
    // numpy's broadcast of the leading axes.
    let rank = a_lead.len().max(b_lead.len());
    let padded = |lead: &[u32]| -> Vec<u32> {
        let mut dims = vec![1; rank - lead.len()];
        dims.extend_from_slice(lead);
        dims
    };
    let (pa_lead, pb_lead) = (padded(a_lead), padded(b_lead));
    let mut lead = Vec::new();
    for (&x, &y) in pa_lead.iter().zip(&pb_lead) {
        lead.push(match (x, y) {
            _ if x == y => x,
            (1, _) => y,
            (_, 1) => x,
            _ => return Err(ErrorCode::ShapeMismatch),
        });
    }
    if a.precision > 8 || b.precision > 8 {
        return Err(ErrorCode::PrecisionConstraint);
    }
    let bits = 64 - u64::from(k).leading_zeros();
    let precision = u32::from(a.precision) + u32::from(b.precision) + bits;
    if precision > 32 {
        return Err(ErrorCode::PrecisionOverflow);
    }
    let mut out = lead.clone();
    out.extend([m, n]);
    Ok(vec![expect(out, precision as u8, |d| {
        let (batch, [i, j]) = (&d[..rank], [d[rank], d[rank + 1]]);
        let pick = |dims: &[u32]| -> Vec<usize> {
            batch
                .iter()
                .zip(dims)
                .map(|(&x, &dim)| if dim == 1 { 0 } else { x })
                .collect()
        };
        let (mut ia, mut ib) = (pick(&pa_lead), pick(&pb_lead));
        ia.drain(..rank - a_lead.len());
        ib.drain(..rank - b_lead.len());
        let mut sum = 0i64;
        for kk in 0..k as usize {
            let mut x = ia.clone();
            x.extend([i, kk]);
            let mut y = ib.clone();
            y.extend(if transpose_b { [j, kk] } else { [kk, j] });
            sum += at(a, &x) * at(b, &y);
        }
        sum
    })])
}

#[test]
fn batch_matmul_matches_the_plain_sums() {
    TRANSFORMER
        .check(
            "batch_matmul",
            0x5EED_0190,
            3000,
            gen_batch_matmul,
            ref_batch_matmul,
        )
        .require(1500, 600, 0);
}

// ---------------------------------------------------------------------------------------------
// softmax
// ---------------------------------------------------------------------------------------------

/// R(v, k) of softmax's doc for v ≥ 0: ⌊(v + 2^(k−1)) / 2^k⌋, and v for k = 0.
fn round_half_up(v: i128, k: u32) -> i128 {
    assert!(v >= 0, "softmax rounds only non-negative values");
    if k == 0 {
        v
    } else {
        (v + (1i128 << (k - 1))) >> k
    }
}

/// e_j of softmax's doc (steps 3 and 4) for a difference `d` ≥ 0, recomputed plainly: the
/// table entries from f64 (2^30 · 2^(−t/64) is never within 10^−6 of a half).
fn ref_exponential(d: i128, multiplier: i128, shift: u32) -> i128 {
    let u = round_half_up(d * multiplier * 3_098_164_009, shift + 1);
    if u >= 32 << 30 {
        return 0;
    }
    let n = u >> 30;
    let f = u - (n << 30);
    let t = f >> 24;
    let r = f - (t << 24);
    let table = ((1u64 << 30) as f64 * 2f64.powf(-(t as f64) / 64.0)).round() as i128;
    let z = round_half_up(r * 2_977_044_472, 32);
    let one = 1i128 << 30;
    let w1 = one - round_half_up(z * 1_431_655_765, 32);
    let w2 = one - round_half_up(z * w1, 31);
    let w3 = one - round_half_up(z * w2, 30);
    let e = round_half_up(table * w3, 30);
    round_half_up(e, n as u32)
}

/// Whether a mask of dimensions `mask` broadcasts to `dims` (right-aligned, each 1 or equal).
fn mask_fits(mask: &[u32], dims: &[u32]) -> bool {
    mask.len() <= dims.len()
        && mask
            .iter()
            .rev()
            .zip(dims.iter().rev())
            .all(|(&m, &d)| m == 1 || m == d)
}

/// The mask value at index `y` of the output (dimensions `dims`).
fn mask_at(mask: &cvm_engine::Tensor, y: &[usize]) -> i64 {
    let offset = y.len() - mask.shape.rank();
    let index: Vec<usize> = mask
        .shape
        .dims()
        .iter()
        .enumerate()
        .map(|(axis, &dim)| if dim == 1 { 0 } else { y[axis + offset] })
        .collect();
    at(mask, &index)
}

fn gen_softmax(rng: &mut Rng) -> Case {
    let rank = if rng.chance(3) { 0 } else { rng.size(1, 4) };
    let mut dims = rng.dimensions(rank, 9, 4);
    if rank > 0 && rng.chance(30) {
        dims[rank - 1] = rng.range(16, 80) as u32;
    }
    let any = rng.range(1, 32) as u8;
    let p = rng.pick(&[8, 16, 24, 32, 32, any]);
    let count: usize = dims.iter().map(|&d| d as usize).product();
    let few: Vec<i64> = (0..3).map(|_| value(rng, p)).collect();
    let equal = rng.chance(15);
    let data = (0..count)
        .map(|_| if equal { rng.pick(&few) } else { value(rng, p) })
        .collect();
    let mut case = Case::default().input(tensor(&dims, p, data));
    if rng.chance(40) {
        let mut mask_dims: Vec<u32> = dims[rank - rng.size(0, rank)..].to_vec();
        for dim in &mut mask_dims {
            if rng.chance(40) {
                *dim = 1;
            } else if rng.chance(5) {
                *dim += 1;
            }
        }
        if rng.chance(3) {
            mask_dims.insert(0, 1);
        }
        let mask_precision = rng.pick(&[1, 2, 8]);
        let n: usize = mask_dims.iter().map(|&d| d as usize).product();
        let zeros = rng.pick(&[0, 20, 50, 90, 100]);
        let mask_data = (0..n)
            .map(|_| {
                if rng.chance(zeros) {
                    0
                } else {
                    value(rng, mask_precision).max(1)
                }
            })
            .map(|v: i64| v.min(bound(mask_precision)).max(0))
            .collect();
        case = case.input(tensor(&mask_dims, mask_precision, mask_data));
    }
    if rng.chance(3) {
        case = case
            .input(tensor(&[1], 1, vec![0]))
            .input(tensor(&[1], 1, vec![0]));
    }
    // A real scale for which the precision's range spans about `reach` (0 to 30 in attention).
    let reach = rng.pick(&[1.0, 8.0, 30.0, 30.0, 100.0, 1e6]);
    let (multiplier, shift) = draw_scale(rng, scale_for(p, reach));
    if !(multiplier == 1 && rng.chance(20)) {
        case = case.int("multiplier", multiplier);
    }
    if !(shift == 0 && rng.chance(20)) {
        case = case.int("shift", shift);
    }
    if !rng.chance(10) {
        let precision = match rng.below(10) {
            0 => rng.pick(&[1, 17, 0, -1]),
            1 => rng.pick(&[2, 16]),
            _ => rng.range(2, 16),
        };
        case = case.int("precision", precision);
    }
    if rng.chance(40) {
        case = case.flag("causal", true);
    } else if rng.chance(10) {
        case = case.flag("causal", false);
    }
    case
}

fn ref_softmax(case: &Case) -> Result<Vec<Expect>, ErrorCode> {
    let multiplier = case.int_attr("multiplier").unwrap_or(1);
    let shift = case.int_attr("shift").unwrap_or(0);
    let precision = case.int_attr("precision").unwrap_or(8);
    let causal = case.bool_attr("causal").unwrap_or(false);
    // The table's arity is checked before the attributes' ranges.
    if case.inputs.len() > 2 {
        return Err(ErrorCode::ArityMismatch);
    }
    if !(1..=i64::from(i32::MAX)).contains(&multiplier)
        || !(0..=62).contains(&shift)
        || !(2..=16).contains(&precision)
    {
        return Err(ErrorCode::AttributeOutOfRange);
    }
    let x = &case.inputs[0];
    let dims = x.shape.dims().to_vec();
    let rank = dims.len();
    if rank == 0 || (causal && rank < 2) {
        return Err(ErrorCode::ShapeMismatch);
    }
    let mask = case.inputs.get(1);
    if mask.is_some_and(|m| !mask_fits(m.shape.dims(), &dims)) {
        return Err(ErrorCode::ShapeMismatch);
    }
    let width = dims[rank - 1] as usize;
    let all = indices(&dims);
    let mut out = vec![0i64; all.len()];
    let half = 1i128 << (precision - 1);
    for (row, indexes) in all.chunks(width.max(1)).enumerate() {
        let _ = row;
        let kept: Vec<bool> = indexes
            .iter()
            .map(|y| {
                let by_mask = mask.is_none_or(|m| mask_at(m, y) != 0);
                let by_causal = !causal || {
                    let (i, j) = (y[rank - 2] as i64, y[rank - 1] as i64);
                    let (tq, tk) = (i64::from(dims[rank - 2]), i64::from(dims[rank - 1]));
                    j <= i + (tk - tq)
                };
                by_mask && by_causal
            })
            .collect();
        let Some(mu) = indexes
            .iter()
            .zip(&kept)
            .filter(|(_, k)| **k)
            .map(|(y, _)| i128::from(at(x, y)))
            .max()
        else {
            continue;
        };
        let e: Vec<i128> = indexes
            .iter()
            .zip(&kept)
            .map(|(y, &k)| {
                if k {
                    ref_exponential(
                        mu - i128::from(at(x, y)),
                        i128::from(multiplier),
                        shift as u32,
                    )
                } else {
                    0
                }
            })
            .collect();
        let sum: i128 = e.iter().sum();
        for (y, e) in indexes.iter().zip(e) {
            let q = (2 * half * e + sum) / (2 * sum);
            out[flat(y, &dims)] = q.min(half - 1) as i64;
        }
    }
    Ok(vec![expect(dims.clone(), precision as u8, |y| {
        out[flat(y, &dims)]
    })])
}

#[test]
fn softmax_matches_the_plain_formula() {
    TRANSFORMER
        .check("softmax", 0x5EED_0191, 4000, gen_softmax, ref_softmax)
        .require(2000, 800, 0);
}

// ---------------------------------------------------------------------------------------------
// layer_norm
// ---------------------------------------------------------------------------------------------

/// ⌊√n⌋ by bisection: independent of the engine's Newton iteration.
fn floor_sqrt(n: u128) -> u128 {
    let (mut low, mut high) = (0u128, 1u128 << 64);
    while high - low > 1 {
        let mid = (low + high) / 2;
        if mid.checked_mul(mid).is_some_and(|square| square <= n) {
            low = mid;
        } else {
            high = mid;
        }
    }
    low
}

/// Rows of `n` values of precision `p`: some constant, some with one outlier, the rest drawn
/// from the edges of the precision.
fn layer_norm_rows(rng: &mut Rng, rows: usize, n: usize, p: u8) -> Vec<i64> {
    let mut data = Vec::with_capacity(rows * n);
    for _ in 0..rows {
        match rng.below(8) {
            0 => {
                let v = value(rng, p);
                data.extend(std::iter::repeat_n(v, n));
            }
            1 => {
                let v = value(rng, p);
                let b = bound(p);
                let at = rng.size(0, n.max(1) - 1);
                data.extend((0..n).map(|j| if j == at { (v + 1).clamp(-b, b) } else { v }));
            }
            _ => data.extend((0..n).map(|_| value(rng, p))),
        }
    }
    data
}

fn gen_layer_norm(rng: &mut Rng) -> Case {
    let rank = rng.size(1, 3);
    let mut dims = rng.dimensions(rank - 1, 4, 5);
    let n = match rng.below(10) {
        0 => rng.pick(&[0, 1, 2]),
        1 => rng.size(40, 70) as u32,
        _ => rng.size(3, 17) as u32,
    };
    dims.push(n);
    let any = rng.range(2, 32) as u8;
    let p = rng.pick(&[8, 16, 24, 31, 32, any]);
    let rows: usize = dims[..dims.len() - 1].iter().map(|&d| d as usize).product();
    let x_data = layer_norm_rows(rng, rows, n as usize, p);
    let x_dims = if rng.chance(3) { Vec::new() } else { dims };
    let x_data = if x_dims.is_empty() {
        vec![value(rng, p)]
    } else {
        x_data
    };
    let pg = if rng.chance(4) {
        rng.pick(&[17, 32])
    } else {
        rng.pick(&[1, 2, 8, 12, 16])
    };
    let pb = rng.pick(&[1, 8, 16, 32]);
    let length = |rng: &mut Rng| {
        if rng.chance(4) { n + 1 } else { n }
    };
    let (gn, bn) = (length(rng), length(rng));
    let gamma_dims = if rng.chance(2) { vec![1, gn] } else { vec![gn] };
    let gamma_data = (0..gn).map(|_| value(rng, pg)).collect();
    let beta_data = (0..bn).map(|_| value(rng, pb)).collect();
    let mut case = Case::default()
        .input(tensor(&x_dims, p, x_data))
        .input(tensor(&gamma_dims, pg, gamma_data))
        .input(tensor(&[bn], pb, beta_data));
    if !rng.chance(10) {
        let epsilon = match rng.below(10) {
            0 => rng.pick(&[0, 1, i64::from(i32::MAX)]),
            1 => rng.pick(&[-1, i64::from(i32::MAX) + 1]),
            2..=4 => 0,
            _ => {
                let bits = rng.range(0, 31);
                rng.range(0, 1 << bits)
            }
        };
        case = case.int("epsilon", epsilon);
    }
    if rng.chance(50) {
        case = case.flag("rms", rng.chance(70));
    }
    if !rng.chance(10) {
        let shift = match rng.below(10) {
            0 => rng.pick(&[0, 62]),
            1 => rng.pick(&[-1, 63]),
            _ => rng.range(0, 16),
        };
        case = case.int("shift", shift);
    }
    if !rng.chance(10) {
        let precision = match rng.below(10) {
            0 => rng.pick(&[1, 32]),
            1 => rng.pick(&[0, 33]),
            _ => rng.range(2, 24),
        };
        case = case.int("precision", precision);
    }
    case
}

/// docs/ops.md "layer_norm", step by step, in plain i128 / u128.
fn ref_layer_norm(case: &Case) -> Result<Vec<Expect>, ErrorCode> {
    let epsilon = case.int_attr("epsilon").unwrap_or(0);
    let rms = case.bool_attr("rms").unwrap_or(false);
    let shift = case.int_attr("shift").unwrap_or(0);
    let precision = case.int_attr("precision").unwrap_or(8);
    if !(0..=i64::from(i32::MAX)).contains(&epsilon)
        || !(0..=62).contains(&shift)
        || !(1..=32).contains(&precision)
    {
        return Err(ErrorCode::AttributeOutOfRange);
    }
    let [x, gamma, beta] = &case.inputs[..] else {
        panic!("three inputs");
    };
    let (&[gn], &[bn]) = (gamma.shape.dims(), beta.shape.dims()) else {
        return Err(ErrorCode::ShapeMismatch);
    };
    if gn != bn {
        return Err(ErrorCode::ShapeMismatch);
    }
    if gamma.precision > 16 {
        return Err(ErrorCode::PrecisionConstraint);
    }
    if x.shape.dims().last() != Some(&gn) {
        return Err(ErrorCode::ShapeMismatch);
    }
    let n = gn as usize;
    let alpha = i128::from(bound(precision as u8));
    let mut out = Vec::with_capacity(x.data.len());
    for row in x.data.chunks(n.max(1)).filter(|_| n > 0) {
        let big_n = n as i128;
        let s: i128 = if rms {
            0
        } else {
            row.iter().map(|&v| i128::from(v)).sum()
        };
        let q: i128 = row.iter().map(|&v| i128::from(v) * i128::from(v)).sum();
        let w =
            ((big_n * q - s * s) as u128) * (1 << 16) + (big_n * big_n) as u128 * epsilon as u128;
        for (j, &xj) in row.iter().enumerate() {
            let d = big_n * i128::from(xj) - s;
            let g = i128::from(gamma.data[j]);
            let b = i128::from(beta.data[j]);
            let term = if w == 0 {
                0
            } else {
                let bits = 128 - w.leading_zeros() as i32;
                let e = bits + (bits & 1) - 64;
                let m = if e >= 0 { w >> e } else { w << -e };
                assert!((1u128 << 62..1u128 << 64).contains(&m));
                let root = floor_sqrt((1u128 << 124) / m);
                let r = if (2 * root + 1) * (2 * root + 1) * m <= 1u128 << 126 {
                    root + 1
                } else {
                    root
                } as i128;
                let total = (54 + e / 2 + shift as i32) as u32;
                let v = g * d * r;
                if total >= 120 {
                    0
                } else {
                    round_away(v, total)
                }
            };
            out.push((term + b).clamp(-alpha, alpha) as i64);
        }
    }
    let mut values = out.into_iter();
    Ok(vec![expect(
        x.shape.dims().to_vec(),
        precision as u8,
        |_| values.next().unwrap(),
    )])
}

#[test]
fn layer_norm_matches_the_plain_formula() {
    TRANSFORMER
        .check(
            "layer_norm",
            0x5EED_0192,
            4000,
            gen_layer_norm,
            ref_layer_norm,
        )
        .require(1500, 1200, 0);
}
