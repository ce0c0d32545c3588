//! `requantize` against a plain reference: the product in i128, rounded by the definition of
//! docs/ops.md (halves away from zero, written as a floor of the magnitude) and clipped, on
//! random shapes, values biased to the edges of their precision (the largest products
//! included), every shift and precision, and attributes out of range, which must be refused
//! with `AttributeOutOfRange`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a failing property reports by panicking

mod common;

use common::Rng;
use common::property::{Case, Suite, at, bound, expect, tensor};

use cvm_engine::error::ErrorCode;
use cvm_engine::ops::Family;

/// The transformer operators covered by this file.
const REQUANTIZE: Suite<ErrorCode> = Suite {
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

fn generate(rng: &mut Rng) -> Case {
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

fn reference(case: &Case) -> Result<Vec<common::property::Expect>, ErrorCode> {
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
    REQUANTIZE
        .check("requantize", 0x5EED_0193, 6000, generate, reference)
        .require(4400, 1400, 0);
}
