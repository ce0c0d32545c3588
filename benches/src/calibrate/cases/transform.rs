//! Configurations of the data-movement and selection operators: reshaping, slicing,
//! `take`, `cvm_lut`, `tile`, `repeat`, concatenation, transposition and `where`.

use super::*;

pub(super) fn transform_configs() -> Vec<Config> {
    vec![
        config("repeat", "axis 1, 2 times", |rng, n| {
            let x = matrix(n / 2);
            Graph::new()
                .input(&x, 8, rng.int8(elements(&x)))
                .attr("axis", int(1))
                .attr("repeats", int(2))
                .node("repeat")
        }),
        config("tile", "2x2", |rng, n| {
            let x = matrix(n / 4);
            Graph::new()
                .input(&x, 8, rng.int8(elements(&x)))
                .attr("reps", ints(&[2, 2]))
                .node("tile")
        }),
        config("flatten", "", |rng, n| {
            let x = nchw(n, 16);
            Graph::new()
                .input(&x, 8, rng.int8(elements(&x)))
                .node("flatten")
        }),
        concat_pair("concatenate", "2 inputs, axis 1", 1),
        config(
            "concatenate",
            "16 inputs of one column, axis 1",
            |rng, n| {
                let x = [(n / 16).max(1) as u32, 1];
                let mut graph = Graph::new();
                for _ in 0..16 {
                    graph = graph.input(&x, 8, rng.int8(elements(&x)));
                }
                graph.attr("axis", int(1)).node("concatenate")
            },
        ),
        int8_unary("expand_dims", "", vec![("axis", int(1))]),
        int8_unary("reshape", "", vec![("shape", ints(&[-1]))]),
        config("squeeze", "", |rng, n| {
            let [rows, cols] = matrix(n);
            let x = [rows, 1, cols];
            Graph::new()
                .input(&x, 8, rng.int8(elements(&x)))
                .attr("axis", ints(&[1]))
                .node("squeeze")
        }),
        int8_unary("transpose", "2-D", vec![("axes", ints(&[1, 0]))]),
        config("transpose", "NCHW to NHWC", |rng, n| {
            let x = nchw(n, 16);
            Graph::new()
                .input(&x, 8, rng.int8(elements(&x)))
                .attr("axes", ints(&[0, 2, 3, 1]))
                .node("transpose")
        }),
        config("strided_slice", "stride 2", |rng, n| {
            let [rows, cols] = matrix(n);
            let x = [rows, 2 * cols];
            Graph::new()
                .input(&x, 8, rng.int8(elements(&x)))
                .attr("begin", ints(&[0, 0]))
                .attr("end", ints(&[i64::from(rows), i64::from(2 * cols)]))
                .attr("stride", ints(&[1, 2]))
                .node("strided_slice")
        }),
        config("slice_like", "half the columns", |rng, n| {
            let [rows, cols] = matrix(n);
            let x = [rows, 2 * cols];
            Graph::new()
                .input(&x, 8, rng.int8(elements(&x)))
                .param(&[rows, cols], 8, vec![0; (rows * cols) as usize])
                .attr("axis", ints(&[1]))
                .node("slice_like")
        }),
        config("take", "rows of a table", |rng, n| {
            let width = n.clamp(1, 64) as u32;
            let rows = (n / u64::from(width)).max(1);
            Graph::new()
                .param(&[1024, width], 8, rng.int8(1024 * u64::from(width)))
                .input(&[rows as u32], 16, rng.values(rows, 0, 1023))
                .attr("axis", int(0))
                .node("take")
        }),
        config("take", "flat", |rng, n| {
            let shape = matrix(n);
            Graph::new()
                .param(&[64, 64], 8, rng.int8(4096))
                .input(&shape, 16, rng.values(n_of(&shape), 0, 4095))
                .node("take")
        }),
        config("cvm_lut", "256 entries", |rng, n| {
            let shape = matrix(n);
            Graph::new()
                .input(&shape, 10, rng.values(n_of(&shape), 0, 255))
                .param(&[256], 8, rng.int8(256))
                .attr("in_dim", int(256))
                .node("cvm_lut")
        }),
        config("where", "", |rng, n| {
            let shape = matrix(n);
            let count = n_of(&shape);
            Graph::new()
                .input(&shape, 8, rng.values(count, -1, 1))
                .input(&shape, 8, rng.int8(count))
                .input(&shape, 8, rng.int8(count))
                .node("where")
        }),
    ]
}
