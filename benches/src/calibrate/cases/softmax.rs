//! Configurations of `softmax`: attention scores (int32 sums whose range stands for about 30)
//! in rows of 128, and causal blocks of 64 × 64 with a keep mask over the keys; at GPT-2-small
//! shape, the causal scores of 12 heads over 128 tokens.

use super::*;

/// Rows of `width` holding about `n` elements.
fn rows(n: u64, width: u32) -> [u32; 2] {
    [(n / u64::from(width)).max(1) as u32, width]
}

pub(super) fn softmax_configs() -> Vec<Config> {
    vec![
        config("softmax", "rows of 128 into int8", |rng, n| {
            let x = rows(n, 128);
            Graph::new()
                .input(&x, 32, rng.values(elements(&x), -(1 << 20), 1 << 20))
                .attr("multiplier", int(503_316_480))
                .attr("shift", int(45))
                .node("softmax")
        }),
        config("softmax", "causal 64 x 64, masked, int16", |rng, n| {
            let x = [(n / 4096).max(1) as u32, 64, 64];
            let keep: Vec<i32> = (0..64).map(|j| i32::from(j < 56)).collect();
            Graph::new()
                .input(&x, 32, rng.values(elements(&x), -(1 << 20), 1 << 20))
                .param(&[64], 2, keep)
                .attr("causal", flag(true))
                .attr("multiplier", int(503_316_480))
                .attr("shift", int(45))
                .attr("precision", int(16))
                .node("softmax")
        }),
        gpt2("softmax", "causal 12 x 128 x 128 into int8", |rng| {
            let x = [12, 128, 128];
            Graph::new()
                .input(&x, 32, rng.values(elements(&x), -(1 << 20), 1 << 20))
                .attr("causal", flag(true))
                .attr("multiplier", int(503_316_480))
                .attr("shift", int(45))
                .node("softmax")
        }),
    ]
}
