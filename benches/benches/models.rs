//! End-to-end inference of whole models, in wasm (model loaded once, as a validator keeps it)
//! and natively: the digits CNN (`fixtures/models/digits`), the LeNet-5, ResNet-20,
//! MobileNet-v1 0.5 and ResNet-18 networks built in `cvm_benches`, the README CNN and the
//! realistic `generate_proposals_v2` case. Then what metering costs: the native executor with and without gas charging, and
//! `engine.wasm` with and without wasmtime fuel. Throughput, where a model has any, is in
//! multiply-accumulates.
//! Run: `cargo bench -p cvm-benches --bench models`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a bench that cannot set up should stop loudly

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use cvm_benches::{BenchModel, Checked, check, loaded_session};
use cvm_cli::runner::encode_inputs;
use cvm_engine::exec::run_unmetered;
use cvm_runtime::wasm::{WasmEngine, WasmSession};

/// A session of `engine` with `bench` loaded, checked against the native report.
fn session(engine: &WasmEngine, bench: &BenchModel, checked: &Checked) -> WasmSession {
    loaded_session(engine, bench, checked).unwrap_or_else(|message| panic!("{message}"))
}

/// Loads and runs `bench` natively once (it must succeed), and prints its gas and work.
fn checked(bench: &BenchModel) -> Checked {
    let checked = check(bench).unwrap_or_else(|message| panic!("{message}"));
    println!(
        "{}: {} nodes, {} gas, {} multiply-accumulates ({} as the schedule counts them)",
        bench.name,
        checked.model.nodes.len(),
        checked.gas,
        checked.network_macs,
        checked.macs
    );
    checked
}

/// `<name>/wasm` and `<name>/native` for one model.
fn model_benches(c: &mut Criterion, bench: &BenchModel, sample_size: usize) {
    let checked = checked(bench);
    let encoded = encode_inputs(&bench.inputs);
    let wasm = WasmEngine::new().expect("engine.wasm compiles");
    let mut session = session(&wasm, bench, &checked);

    let mut group = c.benchmark_group(bench.name);
    group.sample_size(sample_size);
    if checked.network_macs > 0 {
        group.throughput(Throughput::Elements(checked.network_macs));
    }
    group.bench_function("wasm", |b| {
        b.iter(|| session.run(&encoded, u64::MAX).expect("run"))
    });
    group.bench_function("wasm_inputs", |b| {
        b.iter(|| session.run_inputs(&bench.inputs, u64::MAX).expect("run"))
    });
    group.bench_function("native", |b| {
        b.iter(|| cvm_engine::run(&checked.model, bench.inputs.clone(), u64::MAX))
    });
    if bench.name == "cnn" {
        group.bench_function("native_load_and_run", |b| {
            b.iter(|| {
                let validated = cvm_engine::load(&bench.bytes, 1).expect("valid model");
                cvm_engine::run(&validated, bench.inputs.clone(), u64::MAX)
            })
        });
    }
    group.finish();
}

fn cnn(c: &mut Criterion) {
    model_benches(c, &cvm_benches::cnn().expect("fixture"), 100);
}

fn proposals(c: &mut Criterion) {
    model_benches(c, &cvm_benches::proposals().expect("fixture"), 20);
}

fn digits(c: &mut Criterion) {
    model_benches(c, &cvm_benches::digits().expect("fixture"), 100);
}

fn resnet20(c: &mut Criterion) {
    model_benches(c, &cvm_benches::resnet20(), 10);
}

fn mobilenet_v1(c: &mut Criterion) {
    model_benches(c, &cvm_benches::mobilenet_v1(), 10);
}

fn lenet5(c: &mut Criterion) {
    model_benches(c, &cvm_benches::lenet5(), 100);
}

/// One relu over 1×64×56×56 (`relu_x1`) and twenty chained (`relu_x20`): the per-run cost that
/// grows with the tensors' size.
fn relu(c: &mut Criterion) {
    model_benches(c, &cvm_benches::relu_chain(1), 50);
    model_benches(c, &cvm_benches::relu_chain(20), 50);
}

fn resnet18(c: &mut Criterion) {
    model_benches(c, &cvm_benches::resnet18(), 10);
}

/// `metering/<name>/…`: the native executor charging gas per node, and not; `engine.wasm` with
/// wasmtime fuel off (compare with `<name>/wasm`, which consumes fuel as every node does).
fn metering_benches(group: &mut BenchmarkGroup<'_, WallTime>, bench: &BenchModel) {
    // `model_benches` printed the figures already.
    let checked = check(bench).unwrap_or_else(|message| panic!("{message}"));
    let unmetered = run_unmetered(&checked.model, bench.inputs.clone());
    assert_eq!(unmetered.outcome.status, checked.report.outcome.status);
    let name = bench.name;
    group.throughput(Throughput::Elements(checked.network_macs));
    group.bench_function(format!("{name}/native_metered"), |b| {
        b.iter(|| cvm_engine::run(&checked.model, bench.inputs.clone(), u64::MAX))
    });
    group.bench_function(format!("{name}/native_unmetered"), |b| {
        b.iter(|| run_unmetered(&checked.model, bench.inputs.clone()))
    });

    let fuel_off = WasmEngine::unmetered_for_benchmarks().expect("engine.wasm compiles");
    let mut session = session(&fuel_off, bench, &checked);
    let encoded = encode_inputs(&bench.inputs);
    group.bench_function(format!("{name}/wasm_fuel_off"), |b| {
        b.iter(|| session.run(&encoded, u64::MAX).expect("run"))
    });
}

fn metering(c: &mut Criterion) {
    let mut group = c.benchmark_group("metering");
    group.sample_size(20);
    metering_benches(&mut group, &cvm_benches::digits().expect("fixture"));
    group.sample_size(10);
    metering_benches(&mut group, &cvm_benches::resnet20());
    group.finish();
}

criterion_group!(
    benches,
    cnn,
    proposals,
    digits,
    lenet5,
    relu,
    resnet20,
    mobilenet_v1,
    resnet18,
    metering
);
criterion_main!(benches);
