//! Throughput of independent inferences of the digits CNN through the runtime API
//! (`cvm_runtime::Model::run`), from 1 and from 2 threads sharing one loaded model: each
//! iteration is a batch of 16 runs split evenly over the threads, so the two figures are runs
//! per second and their ratio is the scaling a validator gets from a second core.
//! Run: `cargo bench -p cvm-benches --bench runtime`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench that cannot set up should stop loudly

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use cvm_runtime::{Runtime, RuntimeConfig};

/// Runs per iteration, split over the threads.
const BATCH: usize = 16;
/// The gas schedule the model is loaded under: the one `docs/gas.md` calibrates.
const SCHEDULE: u32 = 6;

fn runtime(c: &mut Criterion) {
    let digits = cvm_benches::digits().expect("digits model");
    let runtime = Runtime::new(&RuntimeConfig::compile_in_process()).expect("engine.wasm");
    let model = runtime.load(&digits.bytes, SCHEDULE).expect("digits loads");
    let reference = model
        .run(&digits.inputs, 1 << 40)
        .expect("digits runs")
        .hash();

    let mut group = c.benchmark_group("runtime/digits");
    group.throughput(Throughput::Elements(BATCH as u64));
    for threads in [1, 2] {
        // Warm the pool: one loaded instance per thread, as a long-running node has.
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| model.run(&digits.inputs, 1 << 40).expect("run"));
            }
        });
        group.bench_function(format!("{threads}_threads"), |b| {
            b.iter(|| {
                std::thread::scope(|scope| {
                    for _ in 0..threads {
                        scope.spawn(|| {
                            for _ in 0..BATCH / threads {
                                let verdict = model.run(&digits.inputs, 1 << 40).expect("run");
                                assert_eq!(verdict.hash(), reference);
                            }
                        });
                    }
                });
            })
        });
    }
    group.finish();
}

criterion_group!(benches, runtime);
criterion_main!(benches);
