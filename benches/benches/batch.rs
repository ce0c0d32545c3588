//! The 1,797 digits images through the runtime API (`cvm_runtime::Model::run`, one call per
//! image, one thread), the figure the Python package's `model.run_batch` is compared with
//! (`benches/python_batch.py` times that side; `docs/python.md` gives both).
//! Run: `cargo bench -p cvm-benches --bench batch`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench that cannot set up should stop loudly

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use cvm_runtime::{InputTensor, Runtime, RuntimeConfig};

fn batch(c: &mut Criterion) {
    let digits = cvm_benches::digits().expect("digits model");
    let images = cvm_benches::workspace().join("fixtures/models/digits/inputs.npy");
    let batch = cvm_cli::inputs::read_batch(&images, "data", &[1, 1, 28, 28], None)
        .expect("the digits images");
    let samples: Vec<InputTensor> = (0..batch.samples)
        .map(|index| batch.sample(index).expect("a sample"))
        .collect();
    let runtime = Runtime::new(&RuntimeConfig::compile_in_process()).expect("engine.wasm");
    let model = runtime.load(&digits.bytes, 1).expect("digits loads");
    let gas_limit = cvm_engine::limits::MAX_GAS_PER_RUN;
    let mut group = c.benchmark_group("runtime/digits_images");
    group.throughput(Throughput::Elements(samples.len() as u64));
    group.sample_size(10);
    group.bench_function("model_run_each", |b| {
        b.iter(|| {
            for sample in &samples {
                // What a caller holding one image builds for each run.
                let inputs = vec![InputTensor {
                    shape: sample.shape.clone(),
                    data: sample.data.clone(),
                }];
                model.run(&inputs, gas_limit).expect("run");
            }
        })
    });
    group.finish();
}

criterion_group!(benches, batch);
criterion_main!(benches);
