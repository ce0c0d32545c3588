//! What a trace costs (`cvm_runtime::trace`): one run of a model untraced and traced, natively
//! and in `engine.wasm`, for the digits CNN, ResNet-20 and the twenty chained `relu`s (the
//! worst case: no work but moving tensors, every node's output hashed).
//! Run: `cargo bench -p cvm-benches --bench trace`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a bench that cannot set up should stop loudly

use criterion::{Criterion, criterion_group, criterion_main};
use cvm_benches::{BenchModel, check, loaded_session};
use cvm_runtime::hash::{HashAlgorithm, outcome_hash};
use cvm_runtime::trace::{TraceModel, TraceOptions, trace_native, trace_wasm};
use cvm_runtime::wasm::WasmEngine;

/// `trace/<model>/{native,native_traced,wasm,wasm_traced}`.
fn trace_benches(c: &mut Criterion, bench: &BenchModel, sample_size: usize) {
    let checked = check(bench).unwrap_or_else(|message| panic!("{message}"));
    let wasm = WasmEngine::new().expect("engine.wasm compiles");
    let mut session =
        loaded_session(&wasm, bench, &checked).unwrap_or_else(|message| panic!("{message}"));
    let traced = TraceModel::from_bytes(&bench.bytes).expect("the model decodes");
    println!(
        "{}: {} nodes, {} bytes of node outputs and their headers in a trace",
        bench.name,
        checked.model.nodes.len(),
        cvm_engine::trace::trace_bytes(&checked.model).unwrap_or(0)
    );
    let hashes_only = TraceOptions::default();
    // The traced runs give the untraced report.
    let (report, _) = trace_native(
        &checked.model,
        &traced,
        bench.inputs.clone(),
        u64::MAX,
        hashes_only,
    )
    .unwrap();
    assert_eq!(report, checked.report);
    let (report, _) = trace_wasm(
        &mut session,
        1,
        &traced,
        &bench.inputs,
        u64::MAX,
        hashes_only,
    )
    .unwrap();
    assert_eq!(report, checked.report);

    let mut group = c.benchmark_group(format!("trace/{}", bench.name));
    group.sample_size(sample_size);
    group.bench_function("native", |b| {
        b.iter(|| {
            let report = cvm_engine::run(&checked.model, bench.inputs.clone(), u64::MAX);
            outcome_hash(&report, HashAlgorithm::Sha3_256)
        })
    });
    group.bench_function("native_traced", |b| {
        b.iter(|| {
            trace_native(
                &checked.model,
                &traced,
                bench.inputs.clone(),
                u64::MAX,
                hashes_only,
            )
            .unwrap()
        })
    });
    group.bench_function("wasm", |b| {
        b.iter(|| {
            let report = session.run_inputs(&bench.inputs, u64::MAX).expect("run");
            outcome_hash(&report, HashAlgorithm::Sha3_256)
        })
    });
    group.bench_function("wasm_traced", |b| {
        b.iter(|| {
            trace_wasm(
                &mut session,
                1,
                &traced,
                &bench.inputs,
                u64::MAX,
                hashes_only,
            )
            .expect("run")
        })
    });
    group.finish();
}

fn digits(c: &mut Criterion) {
    trace_benches(c, &cvm_benches::digits().expect("fixture"), 50);
}

fn resnet20(c: &mut Criterion) {
    trace_benches(c, &cvm_benches::resnet20(), 20);
}

fn relu_chain(c: &mut Criterion) {
    trace_benches(c, &cvm_benches::relu_chain(20), 20);
}

criterion_group!(benches, digits, resnet20, relu_chain);
criterion_main!(benches);
