//! Configurations of `layer_norm`: residual streams normalised into int8, as rows of 64 int16
//! values, rows of 1024 int32 values (the wide sums of squares), and RMSNorm over rows of 768;
//! at GPT-2-small shape, a residual stream of 128 tokens of 768.

use super::*;

/// Rows of `width` (fewer when `n` is smaller) holding about `n` elements.
fn rows(n: u64, width: u64) -> [u32; 2] {
    let cols = n.clamp(1, width);
    [(n / cols).max(1) as u32, cols as u32]
}

fn layer_norm(rng: &mut Rng, shape: [u32; 2], precision: u8, rms: bool) -> Result<Built, String> {
    let bound = (1i64 << (precision - 1)) - 1;
    let n = shape[1];
    Graph::new()
        .input(
            &shape,
            precision,
            rng.values(elements(&shape), -bound, bound),
        )
        .param(&[n], 16, rng.values(u64::from(n), -32767, 32767))
        .param(&[n], 16, rng.values(u64::from(n), -32767, 32767))
        .attr("epsilon", int(2749))
        .attr("rms", flag(rms))
        .attr("shift", int(10))
        .attr("precision", int(8))
        .node("layer_norm")
}

pub(super) fn layer_norm_configs() -> Vec<Config> {
    vec![
        config("layer_norm", "int16 rows of 64", |rng, n| {
            layer_norm(rng, rows(n, 64), 16, false)
        }),
        config("layer_norm", "int32 rows of 1024", |rng, n| {
            layer_norm(rng, rows(n, 1024), 32, false)
        }),
        config("layer_norm", "rms, int16 rows of 768", |rng, n| {
            layer_norm(rng, rows(n, 768), 16, true)
        }),
        gpt2("layer_norm", "int32 rows, 128 x 768", |rng| {
            layer_norm(rng, [128, 768], 32, false)
        }),
    ]
}
