//! Configurations of `batch_matmul`: four matrices of 16 rows against square int8 matrices read
//! as (N, K) (Q·Kᵀ) and as (K, N) (P·V, packed by columns), and one matrix of 2 rows
//! broadcast against four; `n` counts the elements of B. At GPT-2-small shapes: the attention
//! products of 12 heads of 64 over 128 tokens, and a 768 × 768 projection.

use super::*;

/// A of (`a_batch`, `rows`, K) against B of (4, K, K) (as (N, K) with `transpose_b`).
fn product(name: &'static str, a_batch: u32, rows: u32, transpose_b: bool) -> Config {
    config("batch_matmul", name, move |rng, n| {
        let k = (n / 4).isqrt().max(1) as u32;
        let a = [a_batch, rows, k];
        let b = [4, k, k];
        Graph::new()
            .input(&a, 8, rng.int8(elements(&a)))
            .input(&b, 8, rng.int8(elements(&b)))
            .attr("transpose_b", flag(transpose_b))
            .node("batch_matmul")
    })
}

/// int8 A and B of the given shapes.
fn heads(rng: &mut Rng, a: [u32; 3], b: [u32; 3], transpose_b: bool) -> Result<Built, String> {
    Graph::new()
        .input(&a, 8, rng.int8(elements(&a)))
        .input(&b, 8, rng.int8(elements(&b)))
        .attr("transpose_b", flag(transpose_b))
        .node("batch_matmul")
}

pub(super) fn batch_matmul_configs() -> Vec<Config> {
    vec![
        product("16 rows, B as (N, K)", 4, 16, true),
        product("16 rows, B as (K, N)", 4, 16, false),
        product("2 rows broadcast, B as (N, K)", 1, 2, true),
        gpt2(
            "batch_matmul",
            "scores Q·Kᵀ, 12 x 128 x 64 x 128",
            |rng| heads(rng, [12, 128, 64], [12, 128, 64], true),
        ),
        gpt2("batch_matmul", "context P·V, 12 x 128 x 128 x 64", |rng| {
            heads(rng, [12, 128, 128], [12, 128, 64], false)
        }),
        gpt2("batch_matmul", "projection, 128 x 768 x 768", |rng| {
            heads(rng, [1, 128, 768], [1, 768, 768], false)
        }),
    ]
}
