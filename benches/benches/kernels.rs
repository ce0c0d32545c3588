//! Per-kernel throughput. Every kernel is a single-node model (the data operand an input, the
//! weights parameters) timed four ways:
//!
//! - `kernels/<kernel>`: the operator alone, called through the operator table on pre-allocated
//!   outputs as the executor calls it;
//! - `kernels/<kernel>/native`: one run of the single-node model natively (input checks, output
//!   allocation, gas charging included);
//! - `kernels/<kernel>/wasm`: the same run in `engine.wasm`, the model loaded once in a session;
//! - `kernels/<kernel>/wasm_x17`: the model with seventeen copies of the node, in `engine.wasm`.
//!   Less `wasm`, over sixteen, it is the kernel alone in wasm (`benches/report.sh` prints it),
//!   as the calibration tool isolates a node.
//!
//! Throughput is the operator's work count from its gas usage: multiply-accumulates for conv2d,
//! dense and batch_matmul, window elements for max_pool2d, output elements for broadcast_add,
//! softmax, layer_norm, requantize and activation, input elements for sum. Run: `cargo bench -p cvm-benches --bench kernels`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a bench that cannot set up should stop loudly

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use cvm_benches::{BenchModel, GraphBuilder, attr, check, int8_values, loaded_session, pair, work};
use cvm_cli::runner::encode_inputs;
use cvm_engine::exec::InputTensor;
use cvm_engine::gas::Work;
use cvm_engine::model::AttrValue;
use cvm_engine::tensor::{Tensor, TensorMut};
use cvm_runtime::wasm::WasmEngine;

/// Copies of the node in the `wasm_x17` variant of every kernel. The single-node run drifts by
/// a few per cent between runs (it moves the input in and the output out); over sixteen
/// copies that moves the kernel's figure four times less than over four.
const COPIES: usize = 17;

/// A kernel's single-node model, and the same model with [`COPIES`] copies of the node (all
/// reading `x`, only the last one's output returned): the difference of their wasm runs, over
/// `COPIES - 1`, is the kernel alone in wasm, without moving the input in and the output out.
struct Kernel {
    one: BenchModel,
    copies: BenchModel,
}

/// A single-node model: input `x` of `shape` (int8, seed 1), `op` applied to it and to int8
/// parameters of `param_shapes`, output of `out_shape`; and its [`COPIES`]-node variant.
fn single_node(
    name: &'static str,
    op: &str,
    shape: &[u32],
    param_shapes: &[&[u32]],
    attrs: Vec<cvm_engine::model::Attr>,
    out_shape: &[u32],
) -> Kernel {
    let build = |copies: usize| {
        let mut graph = GraphBuilder::new();
        let x = graph.input("x", shape, 8);
        let params: Vec<_> = param_shapes
            .iter()
            .enumerate()
            .map(|(index, shape)| graph.int8_param(&format!("p{index}"), shape))
            .collect();
        let mut operands = vec![&x];
        operands.extend(params.iter());
        for copy in 1..copies {
            graph.node(
                &format!("{name}_{copy}"),
                op,
                &operands,
                attrs.clone(),
                out_shape.to_vec(),
            );
        }
        let y = graph.node(name, op, &operands, attrs.clone(), out_shape.to_vec());
        graph.output("y", &y);
        let n = shape.iter().map(|&d| d as usize).product();
        BenchModel {
            name,
            bytes: graph.finish().encode(),
            inputs: vec![InputTensor {
                shape: shape.to_vec(),
                data: int8_values(n, 1),
            }],
        }
    };
    Kernel {
        one: build(1),
        copies: build(COPIES),
    }
}

/// A square convolution without bias, zero padding `kernel / 2`.
fn conv(
    name: &'static str,
    in_shape: [u32; 4],
    out_channels: u32,
    kernel: u32,
    stride: u32,
    groups: u32,
) -> Kernel {
    let [n, c, h, w] = in_shape;
    let padding = kernel / 2;
    let out = |extent: u32| (extent + 2 * padding - kernel) / stride + 1;
    single_node(
        name,
        "conv2d",
        &in_shape,
        &[&[out_channels, c / groups, kernel, kernel]],
        vec![
            attr("groups", AttrValue::Int(i64::from(groups))),
            pair("padding", padding),
            pair("strides", stride),
            attr("use_bias", AttrValue::Bool(false)),
        ],
        &[n, out_channels, out(h), out(w)],
    )
}

/// Dense without bias: (M, K) by (N, K).
fn dense(name: &'static str, m: u32, k: u32, n: u32) -> Kernel {
    single_node(
        name,
        "dense",
        &[m, k],
        &[&[n, k]],
        vec![attr("use_bias", AttrValue::Bool(false))],
        &[m, n],
    )
}

/// Max pooling of 1×64×32×32, stride 2.
fn max_pool(name: &'static str, pool: u32, padding: u32) -> Kernel {
    let out = (32 + 2 * padding - pool) / 2 + 1;
    single_node(
        name,
        "max_pool2d",
        &[1, 64, 32, 32],
        &[],
        vec![
            pair("padding", padding),
            pair("pool_size", pool),
            pair("strides", 2),
        ],
        &[1, 64, out, out],
    )
}

/// Times `kernel` four ways (see the file comment); throughput in counts of `param`.
fn bench_kernel(c: &mut Criterion, wasm: &WasmEngine, kernel: &Kernel, param: fn(&Work) -> u64) {
    let bench = &kernel.one;
    let checked = check(bench).unwrap_or_else(|message| panic!("{message}"));
    let count = work(&checked.model, param);
    let mut session =
        loaded_session(wasm, bench, &checked).unwrap_or_else(|message| panic!("{message}"));
    let encoded = encode_inputs(&bench.inputs);
    let copies = &kernel.copies;
    let copies_checked = check(copies).unwrap_or_else(|message| panic!("{message}"));
    let mut copies_session =
        loaded_session(wasm, copies, &copies_checked).unwrap_or_else(|message| panic!("{message}"));

    // The operator alone: operands as the executor hands them over, outputs pre-allocated.
    let model = &checked.model;
    let node = &model.nodes[0];
    let input = Tensor {
        shape: cvm_engine::Shape::new(bench.inputs[0].shape.clone()),
        precision: model.inputs[0].ty.precision,
        data: bench.inputs[0].data.clone(),
    };
    let operands: Vec<_> = node
        .inputs
        .iter()
        .map(|&id| {
            if id == 0 {
                input.view()
            } else {
                model.params[id - model.inputs.len()].1.view()
            }
        })
        .collect();
    let mut outputs: Vec<Tensor> = node
        .output_types
        .iter()
        .map(|ty| Tensor::zeroed(ty).expect("alloc"))
        .collect();

    let name = bench.name;
    let mut group = c.benchmark_group("kernels");
    group.throughput(Throughput::Elements(count));
    group.bench_function(name, |b| {
        b.iter(|| {
            let mut results: Vec<TensorMut<'_>> =
                outputs.iter_mut().map(Tensor::view_mut).collect();
            node.operator.run(&operands, &mut results).expect("run");
        })
    });
    group.bench_function(format!("{name}/native"), |b| {
        b.iter(|| cvm_engine::run(model, bench.inputs.clone(), u64::MAX))
    });
    group.bench_function(format!("{name}/wasm"), |b| {
        b.iter(|| session.run(&encoded, u64::MAX).expect("run"))
    });
    // Throughput of the whole model: COPIES times the work.
    group.throughput(Throughput::Elements(count * COPIES as u64));
    group.bench_function(format!("{name}/wasm_x{COPIES}"), |b| {
        b.iter(|| copies_session.run(&encoded, u64::MAX).expect("run"))
    });
    group.finish();
}

fn conv2d(c: &mut Criterion) {
    let wasm = WasmEngine::new().expect("engine.wasm compiles");
    let shapes = [
        // 3x3 convolutions of a ResNet-20's three stages and of a digits CNN.
        conv("conv2d_3x3_16to16_32x32", [1, 16, 32, 32], 16, 3, 1, 1),
        conv("conv2d_3x3_32to64_14x14", [1, 32, 14, 14], 64, 3, 1, 1),
        conv("conv2d_3x3_64to64_8x8", [1, 64, 8, 8], 64, 3, 1, 1),
        // A MobileNet pointwise convolution.
        conv("conv2d_1x1_64to128_16x16", [1, 64, 16, 16], 128, 1, 1, 1),
        // MobileNet depthwise convolutions (groups = channels).
        conv(
            "conv2d_depthwise_3x3_64_28x28",
            [1, 64, 28, 28],
            64,
            3,
            1,
            64,
        ),
        conv(
            "conv2d_depthwise_3x3_64_28x28_stride2",
            [1, 64, 28, 28],
            64,
            3,
            2,
            64,
        ),
    ];
    for bench in &shapes {
        bench_kernel(c, &wasm, bench, |work| work.macs);
    }
}

fn dense_kernels(c: &mut Criterion) {
    let wasm = WasmEngine::new().expect("engine.wasm compiles");
    // The first dense layer of the digits CNN, one image; a square layer on a batch of 8.
    for bench in [
        dense("dense_1152to256", 1, 1152, 256),
        dense("dense_512to512_m8", 8, 512, 512),
    ] {
        bench_kernel(c, &wasm, &bench, |work| work.macs);
    }
}

/// The operators of a GPT-2-small block (T = 128 tokens, d = 768, 12 heads of 64, MLP 3072),
/// and `batch_matmul` beside `dense` at the same (M, K, N), both reading B as (N, K).
fn transformer_kernels(c: &mut Criterion) {
    let wasm = WasmEngine::new().expect("engine.wasm compiles");
    let transpose_b = || vec![attr("transpose_b", AttrValue::Bool(true))];
    let products = [
        dense("dense_128x768to768", 128, 768, 768),
        single_node(
            "batch_matmul_128x768x768",
            "batch_matmul",
            &[128, 768],
            &[&[768, 768]],
            transpose_b(),
            &[128, 768],
        ),
        // Q·Kᵀ of 12 heads: (12, 128, 64) × (12, 128, 64)ᵀ.
        single_node(
            "batch_matmul_scores_12x128x64",
            "batch_matmul",
            &[12, 128, 64],
            &[&[12, 128, 64]],
            transpose_b(),
            &[12, 128, 128],
        ),
        // P·V of 12 heads: (12, 128, 128) × (12, 128, 64).
        single_node(
            "batch_matmul_context_12x128x128",
            "batch_matmul",
            &[12, 128, 128],
            &[&[12, 128, 64]],
            vec![],
            &[12, 128, 64],
        ),
    ];
    for bench in &products {
        bench_kernel(c, &wasm, bench, |work| work.macs);
    }
    let int = |name: &str, value: i64| attr(name, AttrValue::Int(value));
    let per_element = [
        // Causal softmax over the scores of 12 heads.
        single_node(
            "softmax_causal_12x128x128",
            "softmax",
            &[12, 128, 128],
            &[],
            vec![
                attr("causal", AttrValue::Bool(true)),
                int("multiplier", 1 << 30),
                int("shift", 34),
            ],
            &[12, 128, 128],
        ),
        single_node(
            "layer_norm_128x768",
            "layer_norm",
            &[128, 768],
            &[&[768], &[768]],
            vec![int("epsilon", 1 << 16), int("shift", 4)],
            &[128, 768],
        ),
        single_node(
            "requantize_128x768",
            "requantize",
            &[128, 768],
            &[],
            vec![int("multiplier", 1_518_500_250), int("shift", 31)],
            &[128, 768],
        ),
        single_node(
            "activation_gelu_128x3072",
            "activation",
            &[128, 3072],
            &[],
            vec![int("multiplier", 1 << 30), int("shift", 35)],
            &[128, 3072],
        ),
    ];
    for bench in &per_element {
        bench_kernel(c, &wasm, bench, |work| work.writes);
    }
}

fn other_kernels(c: &mut Criterion) {
    let wasm = WasmEngine::new().expect("engine.wasm compiles");
    bench_kernel(
        c,
        &wasm,
        &max_pool("max_pool2d_2x2_64_32x32", 2, 0),
        |work| work.taps,
    );
    bench_kernel(
        c,
        &wasm,
        &max_pool("max_pool2d_3x3_pad1_64_32x32", 3, 1),
        |work| work.taps,
    );
    let shape = [1, 64, 32, 32];
    bench_kernel(
        c,
        &wasm,
        &single_node(
            "broadcast_add_64x32x32",
            "broadcast_add",
            &shape,
            &[&shape],
            vec![],
            &shape,
        ),
        |work| work.writes,
    );
    bench_kernel(
        c,
        &wasm,
        &single_node(
            "broadcast_add_channel_bias_64x32x32",
            "broadcast_add",
            &shape,
            &[&[64, 1, 1]],
            vec![],
            &shape,
        ),
        |work| work.writes,
    );
    bench_kernel(
        c,
        &wasm,
        &single_node(
            "sum_axis1_64x32x32",
            "sum",
            &shape,
            &[],
            vec![attr("axis", AttrValue::Ints(vec![1]))],
            &[1, 32, 32],
        ),
        |work| work.writes,
    );
    bench_kernel(
        c,
        &wasm,
        &single_node(
            "sum_axes23_64x32x32",
            "sum",
            &shape,
            &[],
            vec![attr("axis", AttrValue::Ints(vec![2, 3]))],
            &[1, 64],
        ),
        |work| work.writes,
    );
}

criterion_group!(
    benches,
    conv2d,
    dense_kernels,
    transformer_kernels,
    other_kernels
);
criterion_main!(benches);
