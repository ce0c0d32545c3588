//! The accuracy of `layer_norm` against an f64 evaluation of the real function
//! γ · (x − μ) / √(σ² + ε) / 2^k + β (RMSNorm: x / √(mean(x²) + ε)), within the bound of
//! docs/ops.md: |Y − real| ≤ 0.5 + |γ · z / 2^k| · 2^−30 before the clip.
//!
//! Rows have random widths 16..=1024 and values of precision 8..=32: uniform, constant, one
//! outlier, a small spread on a large offset, and huge spreads (values at ±(2^(p−1) − 1) beside
//! small ones); γ of precision 1..=16, β, ε and k random, `rms` on and off. The output has
//! precision 32 and elements whose real value lies at the clip are left out. The number of rows
//! is `CVM_ACCURACY_ROWS` (default 20 000); the test prints rows, elements and the largest
//! error with the bound at that element.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a failing test reports by panicking
#![allow(clippy::float_arithmetic, clippy::cast_precision_loss)] // the f64 evaluation of the real function

mod common;

use common::{Rng, attr, run_op};
use cvm_engine::model::AttrValue;
use cvm_engine::tensor::{Shape, Tensor};

/// ρ of the documented bound: the relative error of the row's reciprocal square root.
const RHO: f64 = 1.0 / (1u64 << 30) as f64;

fn bound(p: u32) -> i64 {
    (1i64 << (p - 1)) - 1
}

fn tensor(dims: Vec<u32>, precision: u8, data: Vec<i32>) -> Tensor {
    Tensor {
        shape: Shape::new(dims),
        precision,
        data,
    }
}

/// One row of `n` values of precision `p`, of a random kind.
fn row(rng: &mut Rng, n: usize, p: u32) -> Vec<i32> {
    let b = bound(p);
    let values: Vec<i64> = match rng.below(10) {
        0 => vec![rng.range(-b, b); n],
        1 => {
            let v = rng.range(-b, b - 1);
            let at = rng.size(0, n - 1);
            (0..n).map(|j| if j == at { v + 1 } else { v }).collect()
        }
        2 | 3 => {
            let offset = rng.range(-b / 2, b / 2);
            let noise = 1i64 << rng.range(0, i64::from(p.min(10) - 2));
            (0..n)
                .map(|_| (offset + rng.range(-noise, noise)).clamp(-b, b))
                .collect()
        }
        4 | 5 => (0..n)
            .map(|_| match rng.below(4) {
                0 => b,
                1 => -b,
                _ => rng.range(-8, 8).clamp(-b, b),
            })
            .collect(),
        _ => (0..n).map(|_| rng.range(-b, b)).collect(),
    };
    values.into_iter().map(|v| v as i32).collect()
}

#[test]
fn layer_norm_is_within_its_bound_of_the_real_function() {
    let rows: usize = std::env::var("CVM_ACCURACY_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let mut rng = Rng(0x5EED_0402);
    let (mut done, mut elements) = (0usize, 0usize);
    // The largest error, the bound at that element, and the largest (error − 0.5)/|γ·z/2^k|.
    let (mut worst, mut worst_bound, mut worst_relative) = (0f64, 0f64, 0f64);
    while done < rows {
        let n = rng.size(16, 1024);
        let batch = rng.size(1, 4).min(rows - done);
        let p = rng.range(8, 32) as u32;
        let pg = rng.range(1, 16) as u32;
        let epsilon = match rng.below(3) {
            0 => 0,
            _ => {
                let bits = rng.range(0, 31);
                rng.range(0, (1 << bits) - 1)
            }
        };
        let rms = rng.chance(40);
        let shift = if rng.chance(70) {
            rng.range(0, 6)
        } else {
            rng.range(0, 40)
        };
        let gamma: Vec<i32> = (0..n)
            .map(|_| {
                if rng.chance(10) {
                    bound(pg) as i32
                } else {
                    rng.range(-bound(pg), bound(pg)) as i32
                }
            })
            .collect();
        let beta: Vec<i32> = (0..n)
            .map(|_| rng.range(-(1 << 20), 1 << 20) as i32)
            .collect();
        let x: Vec<i32> = (0..batch).flat_map(|_| row(&mut rng, n, p)).collect();

        let attrs = [
            attr("epsilon", AttrValue::Int(epsilon)),
            attr("precision", AttrValue::Int(32)),
            attr("rms", AttrValue::Bool(rms)),
            attr("shift", AttrValue::Int(shift)),
        ];
        let inputs = [
            tensor(vec![batch as u32, n as u32], p as u8, x),
            tensor(vec![n as u32], pg as u8, gamma),
            tensor(vec![n as u32], 32, beta),
        ];
        let output = run_op("layer_norm", &attrs, &inputs.iter().collect::<Vec<_>>()).remove(0);

        let epsilon_real = epsilon as f64 / 65536.0;
        let scale = 2f64.powi(-(shift as i32));
        for (x_row, y_row) in inputs[0].data.chunks(n).zip(output.data.chunks(n)) {
            let sum: i64 = if rms {
                0
            } else {
                x_row.iter().map(|&v| i64::from(v)).sum()
            };
            // x − μ from the exact N·x − S (below 2^51), then the real formula in f64.
            let deviations: Vec<f64> = x_row
                .iter()
                .map(|&v| (n as i64 * i64::from(v) - sum) as f64 / n as f64)
                .collect();
            let variance = deviations.iter().map(|d| d * d).sum::<f64>() / n as f64;
            let denominator = (variance + epsilon_real).sqrt();
            for (j, (&y, deviation)) in y_row.iter().zip(&deviations).enumerate() {
                let z = if denominator == 0.0 {
                    0.0
                } else {
                    deviation / denominator
                };
                let term = f64::from(inputs[1].data[j]) * z * scale;
                let real = term + f64::from(inputs[2].data[j]);
                if real.abs() > (i32::MAX - 2) as f64 {
                    continue;
                }
                let error = (f64::from(y) - real).abs();
                let allowed = 0.5 + term.abs() * RHO;
                // f64's own error: a few ulps of |term| < 2^29.
                assert!(
                    error <= allowed + term.abs() * 1e-12 + 1e-9,
                    "row of {n} at precision {p}, rms {rms}, epsilon {epsilon}, shift {shift}: \
                     element {j} is {y}, the real value {real} (error {error}, bound {allowed})"
                );
                if error > worst {
                    (worst, worst_bound) = (error, allowed);
                }
                if term.abs() > 1.0 {
                    worst_relative = worst_relative.max((error - 0.5) / term.abs());
                }
                elements += 1;
            }
        }
        done += batch;
    }
    println!(
        "layer_norm accuracy: {done} rows, {elements} elements; largest error {worst:.9} \
         (bound there {worst_bound:.9}); largest (error − 0.5)/|γz/2^k| {:.3e} \
         (ρ = 2^−30 = {RHO:.3e})",
        worst_relative
    );
}
