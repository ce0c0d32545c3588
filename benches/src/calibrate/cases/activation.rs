//! Configurations of `activation`: int16 inputs whose largest value stands for 8, under each
//! gate (the erf series of GELU, the tanh of its tanh form and of SiLU).

use super::*;

pub(super) fn activation_configs() -> Vec<Config> {
    ["gelu", "gelu_tanh", "silu"]
        .into_iter()
        .map(|function| {
            config("activation", function, move |rng, n| {
                let x = matrix(n);
                Graph::new()
                    .input(&x, 16, rng.values(elements(&x), -32767, 32767))
                    .attr("function", text(function))
                    .attr("multiplier", int(1 << 30))
                    .attr("shift", int(42))
                    .node("activation")
            })
        })
        .collect()
}
