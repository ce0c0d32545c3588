//! Configurations of `requantize`: an int32 residual stream scaled by a multiplier and a shift
//! into int8, and a scale-up into int16 that saturates often; at GPT-2-small shape, a residual
//! stream of 128 tokens of 768.

use super::*;

/// int32 values of `shape` scaled by about 2^−22 into int8.
fn int32_to_int8(rng: &mut Rng, shape: [u32; 2]) -> Result<Built, String> {
    Graph::new()
        .input(
            &shape,
            32,
            rng.values(elements(&shape), -(1 << 30), 1 << 30),
        )
        .attr("multiplier", int(1_518_500_250))
        .attr("shift", int(53))
        .attr("precision", int(8))
        .node("requantize")
}

pub(super) fn requantize_configs() -> Vec<Config> {
    vec![
        config("requantize", "int32 to int8", |rng, n| {
            int32_to_int8(rng, matrix(n))
        }),
        config("requantize", "int16 to int16, saturating", |rng, n| {
            let x = matrix(n);
            Graph::new()
                .input(&x, 16, rng.values(elements(&x), -32767, 32767))
                .attr("multiplier", int(-3))
                .attr("precision", int(16))
                .node("requantize")
        }),
        gpt2("requantize", "int32 to int8, 128 x 768", |rng| {
            int32_to_int8(rng, [128, 768])
        }),
    ]
}
