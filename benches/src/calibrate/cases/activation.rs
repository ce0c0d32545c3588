//! Configurations of `activation`: int16 inputs whose largest value stands for 8, under each
//! gate (the erf series of GELU, the tanh of its tanh form and of SiLU); at GPT-2-small shape,
//! the GELU of an MLP of 3072 over 128 tokens.

use super::*;

/// int16 values of `shape` under `function`, the largest standing for 8.
fn activation(rng: &mut Rng, shape: [u32; 2], function: &str) -> Result<Built, String> {
    Graph::new()
        .input(&shape, 16, rng.values(elements(&shape), -32767, 32767))
        .attr("function", text(function))
        .attr("multiplier", int(1 << 30))
        .attr("shift", int(42))
        .node("activation")
}

pub(super) fn activation_configs() -> Vec<Config> {
    let mut configs: Vec<Config> = ["gelu", "gelu_tanh", "silu"]
        .into_iter()
        .map(|function| {
            config("activation", function, move |rng, n| {
                activation(rng, matrix(n), function)
            })
        })
        .collect();
    configs.push(gpt2("activation", "gelu, 128 x 3072", |rng| {
        activation(rng, [128, 3072], "gelu")
    }));
    configs
}
