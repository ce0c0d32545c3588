//! Start-up costs of the wasm engine: Cranelift compilation of `engine.wasm`, loading it from the
//! on-disk module cache, and the whole path from a warm cache to the first inference of the
//! digits CNN (`fixtures/models/digits`), which is what a validator pays on restart.
//! Run: `cargo bench -p cvm-benches --bench startup`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench that cannot set up should stop loudly

use std::path::PathBuf;

use criterion::{Criterion, criterion_group, criterion_main};
use cvm_benches::workspace;
use cvm_cli::runner::{ModelSource, encode_inputs, load_model};
use cvm_runtime::wasm::{ModuleOrigin, WasmEngine};

/// A module cache directory of this process, removed when dropped.
struct CacheDir(PathBuf);

impl CacheDir {
    fn new() -> CacheDir {
        let dir = std::env::temp_dir().join(format!("cvm-startup-bench-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        CacheDir(dir)
    }
}

impl Drop for CacheDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn startup(c: &mut Criterion) {
    let digits = workspace().join("fixtures/models/digits");
    let model = load_model(&ModelSource::from_path(&digits))
        .expect("digits model")
        .bytes;
    let input = cvm_cli::inputs::read_input(&digits.join("input_2.npy")).expect("digits input");
    let encoded = encode_inputs(&[input]);

    let cache = CacheDir::new();
    let warm = WasmEngine::with_cache(&cache.0).expect("engine.wasm compiles");
    assert_eq!(warm.origin(), ModuleOrigin::Compiled);
    assert!(
        warm.cache_problems().is_empty(),
        "{:?}",
        warm.cache_problems()
    );
    drop(warm);

    let mut group = c.benchmark_group("startup");
    group.sample_size(10);
    group.bench_function("compile", |b| {
        b.iter(|| WasmEngine::new().expect("engine.wasm compiles"))
    });
    group.finish();

    let mut group = c.benchmark_group("startup");
    group.bench_function("cached_module_load", |b| {
        b.iter(|| {
            let engine = WasmEngine::with_cache(&cache.0).expect("engine");
            assert_eq!(engine.origin(), ModuleOrigin::Cached);
            engine
        })
    });
    group.bench_function("cached_to_first_inference", |b| {
        b.iter(|| {
            let engine = WasmEngine::with_cache(&cache.0).expect("engine");
            assert_eq!(engine.origin(), ModuleOrigin::Cached);
            let mut session = engine.session().expect("instance");
            assert!(session.load(&model, 1).expect("load").is_none());
            session.run(&encoded, u64::MAX).expect("run")
        })
    });
    group.finish();
}

criterion_group!(benches, startup);
criterion_main!(benches);
