//! The gas schedule chosen per load, natively and in wasm: an undefined version is the same
//! `UnsupportedVersion` report with gas 0 on both engines; under every defined version both
//! engines give the same report, the estimate names the version asked for, and a run charges
//! exactly that schedule's static estimate. No figure of a schedule is written here. Also: the
//! host refuses an engine module of another ABI version.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

mod common;

use common::run_both;
use cvm_cli::audit;
use cvm_cli::runner::encode_inputs;
use cvm_engine::gas::Schedule;
use cvm_engine::{ErrorCode, Report, Status};
use cvm_runtime::wasm::{ABI_VERSION, WasmEngine};

fn cnn() -> (Vec<u8>, Vec<cvm_engine::InputTensor>) {
    let case = cvm_fixtures::all_cases()
        .unwrap()
        .into_iter()
        .find(|case| case.name == "models/cnn/case")
        .expect("the CNN case");
    let prepared = audit::prepare(&case).unwrap();
    let (bytes, _) = prepared.model.unwrap();
    (bytes, prepared.inputs)
}

/// Versions no schedule has: 0, one past the newest, and the largest.
fn undefined_versions() -> [u32; 3] {
    let newest = Schedule::ALL.iter().map(|s| s.version).max().unwrap();
    [0, newest + 1, u32::MAX]
}

/// The report of both engines, which must agree (so must their outcome hashes, a function of
/// the report).
fn both(
    wasm: &WasmEngine,
    model: &[u8],
    inputs: &[cvm_engine::InputTensor],
    gas_limit: u64,
    schedule: u32,
) -> Report {
    run_both(wasm, model, inputs, gas_limit, schedule).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn undefined_versions_are_unsupported_version_on_both_engines() {
    let wasm = WasmEngine::new().unwrap();
    let (model, inputs) = cnn();
    for version in undefined_versions() {
        for bytes in [model.clone(), b"not a model".to_vec()] {
            let report = both(&wasm, &bytes, &inputs, u64::MAX, version);
            assert_eq!(
                report.outcome.status,
                Status::Error {
                    code: ErrorCode::UnsupportedVersion.number(),
                    node: None
                }
            );
            assert_eq!(report.outcome.gas_used, 0);
            let message = &report.failure.as_ref().unwrap().message;
            assert!(
                message.starts_with(&format!(
                    "gas schedule version {version} is not defined; this engine defines version"
                )),
                "{message}"
            );
        }
    }
}

#[test]
fn a_rejected_version_leaves_no_model_loaded() {
    let wasm = WasmEngine::new().unwrap();
    let (model, inputs) = cnn();
    let mut session = wasm.session().unwrap();
    assert!(session.load(&model, 1).unwrap().is_none());
    assert!(
        session
            .run(&encode_inputs(&inputs), u64::MAX)
            .unwrap()
            .error_code()
            .is_none()
    );
    let rejected = session.load(&model, 0).unwrap().expect("rejected");
    assert_eq!(rejected.error_code(), Some(ErrorCode::UnsupportedVersion));
    let error = session.run(&encode_inputs(&inputs), u64::MAX).unwrap_err();
    assert!(error.to_string().contains("no model loaded"), "{error}");
}

#[test]
fn every_schedule_charges_its_static_estimate_on_both_engines() {
    let wasm = WasmEngine::new().unwrap();
    let mut ran = vec![0usize; Schedule::ALL.len()];
    for case in cvm_fixtures::all_cases().unwrap() {
        let prepared = audit::prepare(&case).unwrap();
        let Ok((bytes, _)) = &prepared.model else {
            continue;
        };
        for (index, schedule) in Schedule::ALL.iter().enumerate() {
            let version = schedule.version;
            let report = both(&wasm, bytes, &prepared.inputs, prepared.gas_limit, version);
            let Ok(model) = cvm_engine::load(bytes, version) else {
                assert!(report.error_code().is_some(), "{}: {report:?}", case.name);
                continue;
            };
            let estimate = model.estimate();
            assert_eq!(estimate.schedule_version, version, "{}", case.name);
            if report.error_code().is_none() {
                assert_eq!(
                    report.outcome.gas_used, estimate.total_gas,
                    "{}: schedule {version}",
                    case.name
                );
                ran[index] += 1;
            }
            // The session API: a model loaded under `version` charges the same.
            let mut session = wasm.session().unwrap();
            assert!(session.load(bytes, version).unwrap().is_none());
            let in_session = session
                .run(&encode_inputs(&prepared.inputs), prepared.gas_limit)
                .unwrap();
            assert_eq!(in_session, report, "{}: schedule {version}", case.name);
        }
    }
    eprintln!("successful runs per schedule: {ran:?}");
    assert!(ran.iter().all(|&count| count > 100), "{ran:?}");
}

#[test]
fn the_fixtures_run_under_the_schedule_they_name() {
    // A case without a "schedule" field was blessed under version 1, whatever the current
    // schedule is.
    for case in cvm_fixtures::all_cases().unwrap() {
        let text = std::fs::read_to_string(&case.path).unwrap();
        let file: serde_json::Value = serde_json::from_str(&text).unwrap();
        if file.get("schedule").is_none() {
            assert_eq!(case.schedule, 1, "{}", case.name);
        }
        assert_eq!(audit::prepare(&case).unwrap().schedule, case.schedule);
    }
}

/// `n` as unsigned LEB128.
fn leb128(mut n: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    loop {
        let low = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            bytes.push(low);
            return bytes;
        }
        bytes.push(low | 0x80);
    }
}

/// A wasm section: id, size, contents.
fn section(id: u8, contents: &[u8]) -> Vec<u8> {
    [&[id][..], &leb128(contents.len()), contents].concat()
}

/// A stand-in engine module of ABI `version` with a one-page memory and the exports `names`
/// (each from the ABI, with its signature), every function returning `version`.
fn stand_in_module(version: u8, names: &[&str]) -> Vec<u8> {
    assert!(version < 64 && names.len() < 16);
    // `cvm_peak_memory_bytes` and `cvm_trace_bytes` return an i64 (0x7e), every other export
    // an i32 (0x7f).
    let result = |name: &str| {
        if name == "cvm_peak_memory_bytes" || name == "cvm_trace_bytes" {
            0x7e
        } else {
            0x7f
        }
    };
    let signature = |name: &str| -> Vec<u8> {
        let params: &[u8] = match name {
            "cvm_alloc" => &[0x7f],
            "cvm_free" => &[0x7f, 0x7f],
            "cvm_load" if version < 3 => &[0x7f, 0x7f],
            "cvm_load" => &[0x7f, 0x7f, 0x7f],
            "cvm_run" | "cvm_run_trace" => &[0x7f, 0x7f, 0x7e],
            _ => &[],
        };
        [
            &[0x60, params.len() as u8][..],
            params,
            &[0x01, result(name)],
        ]
        .concat()
    };
    let count = names.len() as u8;
    let types: Vec<u8> = names.iter().flat_map(|name| signature(name)).collect();
    let functions: Vec<u8> = (0..count).collect();
    let mut exports = vec![count + 1, 6];
    exports.extend_from_slice(b"memory");
    exports.extend_from_slice(&[0x02, 0x00]);
    for (index, name) in names.iter().enumerate() {
        exports.push(name.len() as u8);
        exports.extend_from_slice(name.as_bytes());
        exports.extend_from_slice(&[0x00, index as u8]);
    }
    // i32.const or i64.const `version`.
    let body = |name: &str| {
        [
            0x04,
            0x00,
            if result(name) == 0x7e { 0x42 } else { 0x41 },
            version,
            0x0b,
        ]
    };
    let code: Vec<u8> = names.iter().flat_map(|name| body(name)).collect();
    [
        &b"\0asm\x01\0\0\0"[..],
        &section(1, &[&[count][..], &types].concat()),
        &section(3, &[&[count][..], &functions].concat()),
        &section(5, &[0x01, 0x00, 0x01]),
        &section(7, &exports),
        &section(10, &[&[count][..], &code].concat()),
    ]
    .concat()
}

/// The exports of ABI version 5 (`cvm_load` takes the schedule version from 3 on,
/// `cvm_peak_memory_bytes` is new in 4, the traced run's four exports in 5).
const EXPORTS: [&str; 12] = [
    "cvm_abi_version",
    "cvm_alloc",
    "cvm_free",
    "cvm_load",
    "cvm_run",
    "cvm_reply_ptr",
    "cvm_reply_len",
    "cvm_peak_memory_bytes",
    "cvm_run_trace",
    "cvm_trace_ptr",
    "cvm_trace_len",
    "cvm_trace_bytes",
];

#[test]
fn the_host_refuses_other_abi_versions_and_needs_the_schedule_argument() {
    assert_eq!(ABI_VERSION, 5);
    // Engines of ABI versions 2 to 4 are refused for their version.
    for (version, exports) in [(2, 7), (3, 7), (4, 8)] {
        let old =
            WasmEngine::from_module_bytes(&stand_in_module(version, &EXPORTS[..exports])).unwrap();
        let error = old.session().err().expect("refused").to_string();
        assert!(
            error.contains(&format!(
                "engine.wasm speaks ABI version {version}, this host speaks 5"
            )),
            "{error}"
        );
    }
    // Version 5 with `cvm_load` taking the version, the plan's and the trace's exports:
    // accepted.
    let stand_in = WasmEngine::from_module_bytes(&stand_in_module(5, &EXPORTS)).unwrap();
    assert!(stand_in.session().is_ok());
    assert!(WasmEngine::new().unwrap().session().is_ok());
    // Version 5 without `cvm_peak_memory_bytes`, or without `cvm_run_trace`: refused, naming
    // the export.
    let partial = WasmEngine::from_module_bytes(&stand_in_module(5, &EXPORTS[..7])).unwrap();
    let error = partial.session().err().expect("refused").to_string();
    assert!(error.contains("cvm_peak_memory_bytes"), "{error}");
    let untraced = WasmEngine::from_module_bytes(&stand_in_module(5, &EXPORTS[..8])).unwrap();
    let error = untraced.session().err().expect("refused").to_string();
    assert!(error.contains("cvm_run_trace"), "{error}");
}
