//! The fixture suite: every case under `fixtures/` through one `check(case)`.
//!
//! For each case, under the gas schedule the case names (`"schedule"`, 1 when absent): the model
//! runs natively and in wasm and the two reports must be identical; a successful run's gas must
//! equal the static estimate under that schedule, and a run with one gas less must stop with
//! `OutOfGas` identically on both engines; finally the outcome must match the case's `expected`
//! object. `CVM_BLESS=1 cargo test -p cvm-cli --test fixtures` rewrites the
//! expectations from the native run instead (review the diff).
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

mod common;

use common::run_both;
use cvm_cli::runner::validate_natively;
use cvm_cli::{audit, render};
use cvm_engine::{ErrorCode, Report};
use cvm_fixtures::Case;
use cvm_runtime::hash::HashAlgorithm;
use cvm_runtime::wasm::WasmEngine;
use serde_json::Value;

/// Fields of `expected` that differ from `actual` (every field of `expected` must be present
/// and equal; `actual` fields missing from `expected` are reported as unblessed).
fn differences(expected: &Value, actual: &Value, path: &str, found: &mut Vec<String>) {
    match (expected, actual) {
        (Value::Object(want), Value::Object(got)) => {
            for (key, value) in got {
                let field = format!("{path}.{key}");
                match want.get(key) {
                    Some(expected_value) => differences(expected_value, value, &field, found),
                    None => found.push(format!("{field}: not in the expectation (actual {value})")),
                }
            }
            for key in want.keys().filter(|key| !got.contains_key(*key)) {
                found.push(format!("{path}.{key}: expected but absent"));
            }
        }
        (Value::Array(want), Value::Array(got))
            if want.len() == got.len() && !want.iter().all(is_scalar) =>
        {
            for (index, (w, g)) in want.iter().zip(got).enumerate() {
                differences(w, g, &format!("{path}[{index}]"), found);
            }
        }
        _ if expected != actual => found.push(format!("{path}: expected {expected}, got {actual}")),
        _ => {}
    }
}

fn is_scalar(value: &Value) -> bool {
    !matches!(value, Value::Array(_) | Value::Object(_))
}

/// Checks one case; returns the actual outcome JSON for blessing.
fn check(case: &Case, wasm: &WasmEngine) -> Result<Value, String> {
    let prepared = audit::prepare(case)?;
    let model_bytes = match &prepared.model {
        Ok((bytes, _)) => bytes,
        Err(rejected) => return compare(case, rejected),
    };
    let (inputs, gas_limit, schedule) = (&prepared.inputs, prepared.gas_limit, prepared.schedule);
    let report = run_both(wasm, model_bytes, inputs, gas_limit, schedule)?;

    if report.error_code().is_none() {
        let estimate = validate_natively(model_bytes, schedule)
            .map_err(|r| format!("estimate rejected the model: {r:?}"))?;
        if estimate.schedule.version != schedule {
            return Err(format!(
                "validated under schedule {}, not the case's {schedule}",
                estimate.schedule.version
            ));
        }
        if estimate.total_gas != report.outcome.gas_used {
            return Err(format!(
                "static estimate {} differs from gas charged {}",
                estimate.total_gas, report.outcome.gas_used
            ));
        }
        if let Some(one_less) = estimate.total_gas.checked_sub(1) {
            let starved = run_both(wasm, model_bytes, inputs, one_less, schedule)?;
            if starved.error_code() != Some(ErrorCode::OutOfGas)
                || starved.outcome.gas_used > one_less
            {
                return Err(format!(
                    "with gas limit {one_less} (cost − 1) the run gave {:?}",
                    starved.outcome
                ));
            }
        }
    }

    compare(case, &report)
}

/// Compares a report with the case's expectation; returns the actual JSON for blessing.
fn compare(case: &Case, report: &Report) -> Result<Value, String> {
    let actual = render::report_json(report, HashAlgorithm::Sha3_256);
    // `cvm run --json` streams the same object.
    let mut streamed = Vec::new();
    render::write_report_json(&mut streamed, report, HashAlgorithm::Sha3_256, None)
        .map_err(|e| e.to_string())?;
    let reparsed: Value = serde_json::from_slice(&streamed).map_err(|e| e.to_string())?;
    if reparsed != actual || streamed.last() != Some(&b'\n') {
        return Err(format!(
            "the streamed JSON differs from the report's: {}",
            String::from_utf8_lossy(&streamed)
        ));
    }
    if !cvm_fixtures::blessing() {
        let Some(expected) = &case.expected else {
            return Err("no \"expected\" section; run with CVM_BLESS=1".into());
        };
        let mut found = Vec::new();
        differences(expected, &actual, "expected", &mut found);
        if !found.is_empty() {
            return Err(format!(
                "{}\n(CVM_BLESS=1 regenerates after review)",
                found.join("\n")
            ));
        }
    }
    Ok(actual)
}

#[test]
fn fixtures() {
    let cases = cvm_fixtures::all_cases().expect("fixture files load");
    assert!(
        cases.len() >= 10,
        "only {} fixture cases found",
        cases.len()
    );
    let wasm = WasmEngine::new().expect("engine.wasm compiles");
    let mut failures = Vec::new();
    for case in &cases {
        match check(case, &wasm) {
            Ok(actual) if cvm_fixtures::blessing() => {
                if case.expected.as_ref() != Some(&actual) {
                    cvm_fixtures::write_expected(case, &actual).expect("write expectation");
                    eprintln!("blessed {}", case.name);
                }
            }
            Ok(_) => {}
            Err(message) => failures.push(format!(
                "--- {} ({})\n{message}",
                case.name,
                case.path.display()
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} fixture cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    eprintln!("{} fixture cases passed", cases.len());
}

/// The README's example run is `models/digits/case.json` (image 2): the gas and hash it prints
/// are that case's pinned expectation.
#[test]
fn the_readme_prints_the_digits_case() {
    let case = cvm_fixtures::all_cases()
        .expect("fixture files load")
        .into_iter()
        .find(|case| case.name == "models/digits/case")
        .expect("the digits case");
    let expected = case.expected.expect("blessed");
    let readme = std::fs::read_to_string(cvm_fixtures::root().join("../README.md")).unwrap();
    let gas = expected["gas_used"].as_u64().unwrap();
    let hash = expected["hash"].as_str().unwrap();
    assert!(readme.contains(&format!("\ngas used: {gas}\n")), "{gas}");
    assert!(
        readme.contains(&format!("\nhash:     {hash} (sha3-256)\n")),
        "{hash}"
    );
}
