//! Accuracy of `softmax` against the real softmax in f64: rows of random widths 16..=1024 with
//! attention-like score scales (real scores spread over 0 to 30), random keep masks and causal
//! blocks, at output precisions 8 and 16 (and others). Every kept element must lie within the
//! bound of docs/ops.md, |Y − 2^(p−1) · P| ≤ 0.5 + 2^(p+1) · (K + 1) / 2^30 (against the real
//! value clipped as Y is), and every row's sum within K/2 + 1 + that term of 2^(p−1).
//!
//! `CVM_ACCURACY_ROWS` sets the number of rows (default 20,000); the measurement of the
//! documentation used `CVM_ACCURACY_ROWS=1000000 cargo test --release -p cvm-engine --test
//! softmax_accuracy -- --nocapture`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a failing check reports by panicking
#![allow(clippy::float_arithmetic, clippy::cast_precision_loss)] // the f64 evaluation of the real softmax

mod common;

use common::{Rng, attr, run_op};
use cvm_engine::model::AttrValue;
use cvm_engine::tensor::Tensor;

fn uniform(rng: &mut Rng) -> f64 {
    (rng.next() >> 11) as f64 / (1u64 << 53) as f64
}

#[test]
fn softmax_is_within_its_bound_of_the_real_softmax() {
    let target: usize = std::env::var("CVM_ACCURACY_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let mut rng = Rng(0x5EED_0401);
    let (mut rows, mut elements, mut worst, mut worst_bound, mut worst_ratio) =
        (0usize, 0usize, 0f64, 0f64, 0f64);
    let mut worst_sum = 0f64;
    while rows < target {
        let width = rng.range(16, 1024) as usize;
        let causal = rng.chance(30);
        let queries = if causal { rng.range(1, 8) as usize } else { 1 };
        let p = rng.pick(&[8, 8, 16, 16, 2, 12]);
        // The real scale m / 2^s; the scores' integer range is about 2^bits.
        let bits = rng.range(8, 30) as i32;
        let spread = 30.0 * uniform(&mut rng);
        let scale = spread.max(1e-3) / 2f64.powi(bits);
        let shift = (30.0 - scale.log2().floor()).clamp(0.0, 62.0) as i32;
        let m = (scale * 2f64.powi(shift))
            .round()
            .clamp(1.0, f64::from(i32::MAX)) as i64;
        let real_scale = m as f64 / 2f64.powi(shift);
        let limit = (1i64 << bits).min(i64::from(i32::MAX));
        let n = queries * width;
        let x: Vec<i32> = (0..n)
            .map(|_| {
                // Mostly uniform scores, some peaked rows.
                let u = uniform(&mut rng);
                let v = if rng.chance(20) { u * u * u } else { u };
                (v * limit as f64) as i32
            })
            .collect();
        let mask_zeros = if rng.chance(30) {
            rng.range(1, 95) as u64
        } else {
            0
        };
        let mask: Option<Vec<i32>> = (mask_zeros > 0).then(|| {
            (0..width)
                .map(|_| i32::from(!rng.chance(mask_zeros)))
                .collect()
        });
        let dims: Vec<u32> = if causal {
            vec![queries as u32, width as u32]
        } else {
            vec![width as u32]
        };
        let xt = Tensor {
            shape: cvm_engine::tensor::Shape::new(dims),
            precision: 32,
            data: x.clone(),
        };
        let mt = mask.as_ref().map(|data| Tensor {
            shape: cvm_engine::tensor::Shape::new(vec![width as u32]),
            precision: 2,
            data: data.clone(),
        });
        let attrs = [
            attr("causal", AttrValue::Bool(causal)),
            attr("multiplier", AttrValue::Int(m)),
            attr("precision", AttrValue::Int(p)),
            attr("shift", AttrValue::Int(i64::from(shift))),
        ];
        let inputs: Vec<&Tensor> = core::iter::once(&xt).chain(mt.as_ref()).collect();
        let y = run_op("softmax", &attrs, &inputs).remove(0).data;
        let half = 2f64.powi(p as i32 - 1);
        for i in 0..queries {
            let kept: Vec<bool> = (0..width)
                .map(|j| {
                    mask.as_ref().is_none_or(|mk| mk[j] != 0)
                        && (!causal || j + queries <= i + width)
                })
                .collect();
            let row = &x[i * width..(i + 1) * width];
            let yr = &y[i * width..(i + 1) * width];
            let k = kept.iter().filter(|&&k| k).count();
            rows += 1;
            if k == 0 {
                assert!(yr.iter().all(|&v| v == 0), "a fully masked row is not 0");
                continue;
            }
            let mu = row
                .iter()
                .zip(&kept)
                .filter(|(_, k)| **k)
                .map(|(&v, _)| v)
                .max()
                .unwrap();
            let weights: Vec<f64> = row
                .iter()
                .zip(&kept)
                .map(|(&v, &k)| {
                    if k {
                        (-(f64::from(mu) - f64::from(v)) * real_scale).exp()
                    } else {
                        0.0
                    }
                })
                .collect();
            let total: f64 = weights.iter().sum();
            let bound = 0.5 + 2f64.powi(p as i32 + 1) * (k as f64 + 1.0) / 2f64.powi(30);
            let mut sum = 0f64;
            for ((&w, &got), &keep) in weights.iter().zip(yr).zip(&kept) {
                if !keep {
                    assert_eq!(got, 0, "a masked element is not 0");
                    continue;
                }
                let exact = (half * w / total).min(half - 1.0);
                let error = (f64::from(got) - exact).abs();
                elements += 1;
                sum += f64::from(got);
                if error > worst {
                    worst = error;
                    worst_bound = bound;
                }
                worst_ratio = worst_ratio.max(error / bound);
                assert!(
                    error <= bound + 1e-9,
                    "softmax off by {error} (bound {bound}): width {width}, kept {k}, p {p}, m {m}, s {shift}"
                );
            }
            let sum_error = (sum - half).abs();
            worst_sum = worst_sum.max(sum_error / (k as f64 / 2.0 + 1.0));
            assert!(
                sum_error <= k as f64 / 2.0 + 1.0 + bound - 0.5,
                "row sum {sum} vs {half} (kept {k})"
            );
        }
    }
    println!(
        "softmax accuracy: {rows} rows, {elements} kept elements; largest error {worst:.6} (bound there {worst_bound:.6}); largest error/bound {worst_ratio:.4}; largest |ΣY − 2^(p−1)| / (K/2 + 1) {worst_sum:.4}"
    );
}
