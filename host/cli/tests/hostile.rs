//! The hostile-input battery: every fixture model truncated at every byte offset (evenly spaced
//! offsets for models over 16 KiB) and corrupted by random bit flips, on both engines; and the
//! largest tensor the limits admit, run inside wasm under the memory cap. Nothing may panic or
//! trap, and the two engines must agree. (Exit statuses and messages for hostile CLI input are
//! in cli.rs, CVM load checks in cvm.rs, limits at and past their values in engine/tests/limits.rs.)
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use cvm_cli::runner::{EngineKind, execute};
use cvm_engine::exec::InputTensor;
use cvm_engine::limits::MAX_TENSOR_ELEMENTS;
use cvm_engine::{ErrorCode, Status};
use cvm_runtime::wasm::WasmEngine;
use cvm_testgen::graphgen::ByteSource;

/// Offsets to truncate a model of `len` bytes at.
fn truncation_offsets(len: usize) -> Vec<usize> {
    if len <= 16 * 1024 {
        (0..len).collect()
    } else {
        (0..64).chain((64..len).step_by(len / 4096)).collect()
    }
}

#[test]
fn truncated_and_corrupted_fixture_models() {
    let wasm = WasmEngine::new().unwrap();
    let (mut truncations, mut flips) = (0usize, 0usize);
    for (case_index, case) in cvm_fixtures::all_cases().unwrap().iter().enumerate() {
        let prepared = cvm_cli::audit::prepare(case).unwrap();
        let Ok((bytes, _)) = &prepared.model else {
            continue;
        };
        for len in truncation_offsets(bytes.len()) {
            let report = execute(
                EngineKind::Native,
                None,
                &bytes[..len],
                &prepared.inputs,
                1 << 30,
                prepared.schedule,
            )
            .unwrap();
            assert!(
                matches!(
                    report.error_code(),
                    Some(ErrorCode::MalformedModel | ErrorCode::UnsupportedVersion)
                ),
                "{}: truncated at {len} gave {:?}",
                case.name,
                report.error_code()
            );
            truncations += 1;
        }
        // Bit flips; every fourth case also in wasm, which must agree with native.
        let mut source = ByteSource::new(case.name.as_bytes());
        for _ in 0..24 {
            let mut corrupt = bytes.clone();
            let bit = source.below(corrupt.len() as u64 * 8) as usize;
            corrupt[bit / 8] ^= 1 << (bit % 8);
            let native = execute(
                EngineKind::Native,
                None,
                &corrupt,
                &prepared.inputs,
                1 << 30,
                prepared.schedule,
            )
            .unwrap();
            if case_index % 4 == 0 {
                let in_wasm = execute(
                    EngineKind::Wasm,
                    Some(&wasm),
                    &corrupt,
                    &prepared.inputs,
                    1 << 30,
                    prepared.schedule,
                )
                .unwrap_or_else(|err| panic!("{}: bit {bit}: wasm failed: {err}", case.name));
                assert_eq!(native, in_wasm, "{}: bit {bit}", case.name);
            }
            flips += 1;
        }
    }
    eprintln!("{truncations} truncations and {flips} bit flips handled");
    assert!(truncations > 10_000);
}

#[test]
fn the_largest_tensor_runs_in_wasm_under_the_memory_cap() {
    let text = format!(
        r#"{{"format": "cvm-text/1",
            "inputs": [{{"name": "x", "shape": [{MAX_TENSOR_ELEMENTS}], "precision": 8}}],
            "nodes": [{{"name": "y", "op": "cvm_clip", "inputs": ["x"], "attrs": {{"precision": 4}}}}],
            "outputs": ["y"]}}"#
    );
    let model = cvm_formats::text::parse_text_model(&text, std::path::Path::new("."), "limit")
        .unwrap()
        .encode();
    let data: Vec<i32> = (0..MAX_TENSOR_ELEMENTS as i32)
        .map(|i| (i % 255) - 127)
        .collect();
    let inputs = [InputTensor {
        shape: vec![MAX_TENSOR_ELEMENTS as u32],
        data,
    }];
    let wasm = WasmEngine::new().unwrap();
    let report = execute(
        EngineKind::Wasm,
        Some(&wasm),
        &model,
        &inputs,
        u64::MAX,
        cvm_engine::gas::Schedule::NEWEST.version,
    )
    .unwrap();
    let Status::Ok { outputs } = &report.outcome.status else {
        panic!("{report:?}")
    };
    assert_eq!(outputs[0].data.len() as u64, MAX_TENSOR_ELEMENTS);
    assert_eq!(&outputs[0].data[..4], &[-7, -7, -7, -7]);
    assert_eq!(outputs[0].data[130], 3);
}
