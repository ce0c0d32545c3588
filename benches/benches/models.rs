//! End-to-end inference of the fixture CNN and of the realistic `generate_proposals_v2` case: in
//! wasm (model loaded once, as a validator keeps it) and natively.
//! Run: `cargo bench -p cvm-benches --bench models`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench that cannot set up should stop loudly

use criterion::{Criterion, criterion_group, criterion_main};
use cvm_benches::{cnn_input, cnn_model, proposals_inputs, proposals_model};
use cvm_host::runner::encode_inputs;
use cvm_host::wasm::WasmEngine;

fn cnn(c: &mut Criterion) {
    let model = cnn_model().expect("fixture model");
    let inputs = vec![cnn_input().expect("fixture input")];
    let encoded = encode_inputs(&inputs);

    let wasm = WasmEngine::new().expect("engine.wasm compiles");
    let mut session = wasm.session().expect("instance");
    assert!(session.load(&model).expect("load").is_none());
    c.bench_function("cnn/wasm", |b| {
        b.iter(|| session.run(&encoded, u64::MAX).expect("run"))
    });

    let validated = cvm_engine::load(&model).expect("valid model");
    c.bench_function("cnn/native", |b| {
        b.iter(|| cvm_engine::run(&validated, inputs.clone(), u64::MAX))
    });

    c.bench_function("cnn/native_load_and_run", |b| {
        b.iter(|| {
            let validated = cvm_engine::load(&model).expect("valid model");
            cvm_engine::run(&validated, inputs.clone(), u64::MAX)
        })
    });
}

fn proposals(c: &mut Criterion) {
    let model = proposals_model().expect("fixture model");
    let inputs = proposals_inputs().expect("fixture inputs");
    let encoded = encode_inputs(&inputs);

    let wasm = WasmEngine::new().expect("engine.wasm compiles");
    let mut session = wasm.session().expect("instance");
    assert!(session.load(&model).expect("load").is_none());
    let mut group = c.benchmark_group("proposals");
    group.sample_size(20);
    group.bench_function("wasm", |b| {
        b.iter(|| session.run(&encoded, u64::MAX).expect("run"))
    });

    let validated = cvm_engine::load(&model).expect("valid model");
    group.bench_function("native", |b| {
        b.iter(|| cvm_engine::run(&validated, inputs.clone(), u64::MAX))
    });
    group.finish();
}

criterion_group!(benches, cnn, proposals);
criterion_main!(benches);
