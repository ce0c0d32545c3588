//! The engine inside wasmtime, in process: a model loaded once serves many runs; corrupted
//! models are handled identically by both engines without a trap; fuel stays far below the
//! backstop granted per unit of gas.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use cvm_engine::exec::InputTensor;
use cvm_engine::{ErrorCode, Model};
use cvm_host::runner::{EngineKind, encode_inputs, execute};
use cvm_host::wasm::{FUEL_BASE, FUEL_PER_GAS, WasmEngine};

fn cnn() -> Vec<u8> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/models/cnn");
    let text = std::fs::read_to_string(root.join("model.json")).expect("model");
    cvm_host::text::parse_text_model(&text, &root, "cnn")
        .expect("parses")
        .encode()
}

fn image(seed: i32) -> InputTensor {
    InputTensor {
        shape: vec![1, 1, 8, 8],
        data: (0..64).map(|i| (i * 37 + seed * 11) % 255 - 127).collect(),
    }
}

#[test]
fn a_loaded_model_serves_many_runs() {
    let model = cnn();
    let wasm = WasmEngine::new().expect("engine");
    let mut session = wasm.session().expect("session");
    assert!(
        session.load(&model).expect("load").is_none(),
        "the CNN loads"
    );
    for seed in 0..5 {
        let inputs = [image(seed)];
        let in_session = session.run(&encode_inputs(&inputs), u64::MAX).expect("run");
        let native = execute(EngineKind::Native, None, &model, &inputs, u64::MAX).expect("native");
        assert_eq!(in_session, native, "seed {seed}");
        assert!(in_session.error_code().is_none());
    }
    // A failing run does not disturb the loaded model.
    let wrong = [InputTensor {
        shape: vec![1, 64],
        data: vec![0; 64],
    }];
    let report = session.run(&encode_inputs(&wrong), u64::MAX).expect("run");
    assert_eq!(report.error_code(), Some(ErrorCode::InputShape));
    let again = session
        .run(&encode_inputs(&[image(0)]), u64::MAX)
        .expect("run");
    assert!(again.error_code().is_none());
}

#[test]
fn fuel_per_gas_stays_far_below_the_backstop() {
    let model = cnn();
    let wasm = WasmEngine::new().expect("engine");
    let mut session = wasm.session().expect("session");
    assert!(session.load(&model).expect("load").is_none());
    let inputs = encode_inputs(&[image(1)]);
    let report = session.run(&inputs, u64::MAX).expect("run");
    let granted = u64::MAX; // fuel_for saturates for an unlimited gas limit
    let left = session.fuel_left().expect("fuel");
    let burned = granted - left;
    let gas = report.outcome.gas_used;
    let per_gas = burned / gas.max(1);
    eprintln!(
        "fuel burned {burned} for {gas} gas: {per_gas} per gas (backstop grants {FUEL_PER_GAS} per gas + {FUEL_BASE})"
    );
    assert!(
        per_gas * 10 < FUEL_PER_GAS,
        "fuel per gas {per_gas} is within 10x of the backstop {FUEL_PER_GAS}"
    );
}

#[test]
fn corrupted_models_are_handled_identically() {
    let bytes = cnn();
    let wasm = WasmEngine::new().expect("engine");
    let inputs = [image(2)];
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut rejected = 0;
    for round in 0..300 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let mut corrupt = bytes.clone();
        if round % 3 == 0 {
            corrupt.truncate((state % bytes.len() as u64) as usize);
        } else {
            let bit = (state % (bytes.len() as u64 * 8)) as usize;
            corrupt[bit / 8] ^= 1 << (bit % 8);
        }
        let native = execute(EngineKind::Native, None, &corrupt, &inputs, 1 << 40)
            .expect("native never fails");
        let in_wasm = execute(EngineKind::Wasm, Some(&wasm), &corrupt, &inputs, 1 << 40)
            .unwrap_or_else(|err| panic!("round {round}: wasm failed: {err}"));
        assert_eq!(native, in_wasm, "round {round}");
        if native.error_code().is_some() {
            rejected += 1;
        }
        if Model::decode(&corrupt).is_err() {
            assert!(
                matches!(
                    native.error_code(),
                    Some(ErrorCode::MalformedModel | ErrorCode::UnsupportedVersion)
                ),
                "round {round}: undecodable bytes gave {:?}",
                native.error_code()
            );
        }
    }
    assert!(
        rejected > 100,
        "only {rejected} of 300 corruptions were rejected"
    );
}
