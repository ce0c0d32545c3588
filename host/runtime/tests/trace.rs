//! The trace of the runtime API: `Model::trace` (engine.wasm) and `NativeModel::trace` give one
//! trace and the verdict of an untraced run, and a `Model` keeps serving runs after a trace.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use std::path::{Path, PathBuf};

use cvm_formats::cvm;
use cvm_runtime::native::NativeModel;
use cvm_runtime::trace::{TraceDiff, TraceModel, TraceOptions, diff};
use cvm_runtime::{InputTensor, Runtime, RuntimeConfig};

fn digits() -> (Vec<u8>, InputTensor) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models/digits");
    let (symbol, params) = cvm::read_dir(&dir).unwrap();
    let imported = cvm::import(&symbol, &params).unwrap();
    let raw = std::fs::read(dir.join("input_2.npy")).unwrap();
    let image = cvm_formats::npy::read_npy(&raw).unwrap();
    let input = InputTensor {
        shape: image.shape,
        data: image.data,
    };
    (imported.model.encode(), input)
}

#[test]
fn model_trace_and_native_trace_agree_and_keep_the_untraced_verdict() {
    let runtime = Runtime::new(&RuntimeConfig::with_cache_dir(
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("module-cache"),
    ))
    .unwrap();
    let (bytes, input) = digits();
    let model = runtime.load(&bytes, 1).unwrap();
    let untraced = model.run(std::slice::from_ref(&input), u64::MAX).unwrap();
    let options = TraceOptions {
        values_limit: Some(1 << 20),
    };
    let (verdict, trace) = model
        .trace(std::slice::from_ref(&input), u64::MAX, options)
        .unwrap();
    assert_eq!(verdict, untraced);
    assert_eq!(trace.nodes.len(), 17);
    assert_eq!(trace.outcome_hash, verdict.hash());
    assert_eq!(trace.gas_used, verdict.outcome().gas_used);

    let native = NativeModel::load(&bytes, 1).unwrap();
    let traced = TraceModel::from_bytes(&bytes).unwrap();
    let (native_verdict, native_trace) = native
        .trace(&traced, vec![input.clone()], u64::MAX, options)
        .unwrap();
    assert_eq!(native_verdict, untraced);
    assert_eq!(native_trace, trace);
    assert_eq!(diff(&native_trace, &trace), TraceDiff::Equal);

    // The instance that traced serves ordinary runs as before.
    assert_eq!(model.run(&[input], u64::MAX).unwrap(), untraced);
}
