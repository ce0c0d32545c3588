//! A GPT-2-small-shaped causal language model (12 blocks of width 768, 12 heads, MLP 3,072,
//! vocabulary 50,257, context 128; random weights from a seed, `cvm_benches::gpt2`) imported
//! from ONNX with no option, one forward pass over 128 tokens in wasm and natively.
//! The first run writes the ONNX model (about 650 MB of external data) and the imported model
//! into `target/gpt2/` and imports it, which takes a few minutes; later runs reuse them.
//! `benches/gpt2_onnxruntime.py` times onnxruntime on the same ONNX file (`quantize_dynamic`
//! int8, one thread). Run: `cargo bench -p cvm-benches --bench gpt2`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a bench that cannot set up should stop loudly

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use cvm_benches::gpt2::{GPT2_SMALL, bench_model};
use cvm_benches::{check, loaded_session, workspace};
use cvm_cli::runner::encode_inputs;
use cvm_runtime::wasm::WasmEngine;

fn gpt2(c: &mut Criterion) {
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| workspace().join("target"), Into::into);
    let bench = bench_model(&GPT2_SMALL, &target.join("gpt2")).unwrap_or_else(|e| panic!("{e}"));
    let checked = check(&bench).unwrap_or_else(|e| panic!("{e}"));
    println!(
        "{}: {} nodes, {} gas, {} multiply-accumulates",
        bench.name,
        checked.model.nodes.len(),
        checked.gas,
        GPT2_SMALL.macs()
    );
    let encoded = encode_inputs(&bench.inputs);
    let wasm = WasmEngine::new().expect("engine.wasm compiles");
    let mut session = loaded_session(&wasm, &bench, &checked).unwrap_or_else(|e| panic!("{e}"));
    let mut group = c.benchmark_group(bench.name);
    group.sample_size(10);
    group.throughput(Throughput::Elements(GPT2_SMALL.macs()));
    group.bench_function("wasm", |b| {
        b.iter(|| session.run(&encoded, u64::MAX).expect("run"))
    });
    group.bench_function("native", |b| {
        b.iter(|| cvm_engine::run(&checked.model, bench.inputs.clone(), u64::MAX))
    });
    group.finish();
}

criterion_group!(benches, gpt2);
criterion_main!(benches);
