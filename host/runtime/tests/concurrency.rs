//! The runtime API shared by threads: one `Runtime`, three loaded models, 4 threads × 200 runs
//! over them at once; every outcome hash equals the single-threaded one. Also the API's
//! contract: the types are `Send + Sync`, a rejection is a verdict, the schedule is the caller's.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use cvm_formats::cvm;
use cvm_runtime::{ErrorCode, InputTensor, LoadError, Model, Runtime, RuntimeConfig};

const SCHEDULE: u32 = 1;
const GAS_LIMIT: u64 = 1 << 32;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models")
}

/// One runtime for the tests of this file, as a node has one per process.
fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        Runtime::new(&RuntimeConfig::with_cache_dir(
            PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("module-cache"),
        ))
        .unwrap()
    })
}

/// A CVM model's canonical bytes and the tensor of one of its raw `.cvm` inputs.
fn cvm_case(model: &str, input: &str) -> (Vec<u8>, InputTensor) {
    let (symbol, params) = cvm::read_dir(&fixtures().join(model)).unwrap();
    let imported = cvm::import(&symbol, &params).unwrap();
    let raw = std::fs::read(fixtures().join(model).join(input)).unwrap();
    let tensor = cvm::decode_input(&imported.meta, &raw, false).unwrap();
    (imported.model.encode(), tensor)
}

/// The fixture CNN (a text model) and its input.
fn cnn_case() -> (Vec<u8>, InputTensor) {
    let dir = fixtures().join("cnn");
    let text = std::fs::read_to_string(dir.join("model.json")).unwrap();
    let model = cvm_formats::text::parse_text_model(&text, &dir, "cnn").unwrap();
    let array = cvm_formats::text::read_npy_file(&dir.join("input.npy")).unwrap();
    let tensor = InputTensor {
        shape: array.shape,
        data: array.data,
    };
    (model.encode(), tensor)
}

#[test]
fn runtime_and_models_are_send_and_sync() {
    fn shared<T: Send + Sync>() {}
    shared::<Runtime>();
    shared::<Model>();
}

#[test]
fn four_threads_agree_with_one() {
    let runtime = runtime();
    let cases = [
        cvm_case("digits", "input_2.cvm"),
        cvm_case("digits", "input_0.cvm"),
        cvm_case("cvm_dense", "input.cvm"),
        cnn_case(),
    ];
    let digits = Arc::new(runtime.load(&cases[0].0, SCHEDULE).unwrap());
    let dense = Arc::new(runtime.load(&cases[2].0, SCHEDULE).unwrap());
    let cnn = Arc::new(runtime.load(&cases[3].0, SCHEDULE).unwrap());
    let runs: Vec<(Arc<Model>, InputTensor)> = vec![
        (Arc::clone(&digits), cases[0].1.clone()),
        (Arc::clone(&digits), cases[1].1.clone()),
        (Arc::clone(&dense), cases[2].1.clone()),
        (Arc::clone(&cnn), cases[3].1.clone()),
    ];
    // One thread first: the reference hashes (every run succeeds).
    let reference: Vec<[u8; 32]> = runs
        .iter()
        .map(|(model, input)| {
            let verdict = model.run(std::slice::from_ref(input), GAS_LIMIT).unwrap();
            assert!(verdict.outputs().is_some(), "{}", verdict.message());
            verdict.hash()
        })
        .collect();
    assert_ne!(reference[0], reference[1]);

    let runs = Arc::new(runs);
    let threads: Vec<_> = (0..4)
        .map(|thread| {
            let runs = Arc::clone(&runs);
            std::thread::spawn(move || {
                (0..200)
                    .map(|run| {
                        let index = (run + thread) % runs.len();
                        let (model, input) = &runs[index];
                        let verdict = model.run(std::slice::from_ref(input), GAS_LIMIT).unwrap();
                        (index, verdict.hash())
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut compared = 0;
    for thread in threads {
        for (index, hash) in thread.join().unwrap() {
            assert_eq!(hash, reference[index], "run of case {index}");
            compared += 1;
        }
    }
    assert_eq!(compared, 800);
}

#[test]
fn rejections_and_failures_are_verdicts() {
    let runtime = runtime();
    let (bytes, input) = cvm_case("digits", "input_2.cvm");
    // The schedule version is the caller's, and an undefined one is a deterministic rejection.
    match runtime.load(&bytes, 999) {
        Err(LoadError::Rejected(verdict)) => {
            assert_eq!(verdict.error_code(), Some(ErrorCode::UnsupportedVersion));
            assert_eq!(verdict.outcome().gas_used, 0);
        }
        other => panic!("{other:?}"),
    }
    match runtime.load(&bytes[..bytes.len() / 2], SCHEDULE) {
        Err(LoadError::Rejected(verdict)) => {
            assert_eq!(verdict.error_code(), Some(ErrorCode::MalformedModel))
        }
        other => panic!("{other:?}"),
    }
    let model = runtime.load(&bytes, SCHEDULE).unwrap();
    assert_eq!(model.schedule_version(), SCHEDULE);
    let starved = model.run(std::slice::from_ref(&input), 1000).unwrap();
    assert_eq!(starved.error_code(), Some(ErrorCode::OutOfGas));
    assert!(starved.outcome().gas_used <= 1000);
    let wrong = model.run(&[], GAS_LIMIT).unwrap();
    assert_eq!(wrong.error_code(), Some(ErrorCode::InputCount));
    // A failure leaves the model usable, with the same outcome as before.
    let ok = model.run(std::slice::from_ref(&input), GAS_LIMIT).unwrap();
    let again = model.run(std::slice::from_ref(&input), GAS_LIMIT).unwrap();
    assert_eq!(ok, again);
    assert_eq!(
        cvm_runtime::hash::hex(&ok.hash()),
        "9c8892999a4d0c1cf7f24f171ee1ed3323ff967e4291607f3c73410a2b310058"
    );
}
