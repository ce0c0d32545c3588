//! Differential testing: random valid graphs over every operator (`cvm_testgen::graphgen`) must give
//! identical reports natively and in wasm, and a successful run must charge exactly the static
//! estimate. The graphs take turns over every defined gas schedule, loaded explicitly under it
//! on both engines. The same generator backs the `differential` fuzz target (host/fuzz).
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use std::collections::BTreeMap;

use cvm_cli::runner::{EngineKind, execute};
use cvm_engine::ErrorCode;
use cvm_engine::gas::Schedule;
use cvm_engine::ops::OPS;
use cvm_runtime::wasm::WasmEngine;
use cvm_testgen::graphgen::{ByteSource, generate};

#[test]
fn random_graphs_agree_natively_and_in_wasm() {
    let wasm = WasmEngine::new().unwrap();
    let mut coverage: BTreeMap<&str, usize> = OPS.iter().map(|op| (op.name, 0)).collect();
    let (mut succeeded, mut failed) = (0usize, 0usize);
    let mut errors: BTreeMap<&str, usize> = BTreeMap::new();
    for seed in 0u64..600 {
        let seed_bytes = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes();
        let generated = generate(&mut ByteSource::new(&seed_bytes), 12);
        let bytes = generated.model.encode();
        let schedule = Schedule::ALL[seed as usize % Schedule::ALL.len()].version;
        for node in &generated.model.nodes {
            if let Some(op) = cvm_engine::ops::by_code(node.op) {
                *coverage.entry(op.name).or_default() += 1;
            }
        }
        let native = execute(
            EngineKind::Native,
            None,
            &bytes,
            &generated.inputs,
            u64::MAX,
            schedule,
        )
        .unwrap();
        let in_wasm = execute(
            EngineKind::Wasm,
            Some(&wasm),
            &bytes,
            &generated.inputs,
            u64::MAX,
            schedule,
        )
        .unwrap_or_else(|err| panic!("seed {seed}: wasm failed: {err}"));
        assert_eq!(native, in_wasm, "seed {seed}: reports differ");
        let has_cinn = generated.model.nodes.iter().any(|node| {
            cvm_engine::ops::by_code(node.op)
                .is_some_and(|op| op.family == cvm_engine::ops::Family::Cinn)
        });
        match native.error_code() {
            Some(code) if !has_cinn => {
                panic!("seed {seed}: a graph of CVM operators failed at run time with {code}")
            }
            Some(code) => assert!(
                matches!(
                    code,
                    ErrorCode::DomainError | ErrorCode::DivisionByZero | ErrorCode::IntegerOverflow
                ),
                "seed {seed}: a CINN graph failed with {code}, not a value-dependent error"
            ),
            None => {}
        }
        match native.error_code() {
            None => {
                let estimate = cvm_engine::load(&bytes, schedule).unwrap().estimate();
                assert_eq!(estimate.schedule_version, schedule, "seed {seed}");
                assert_eq!(
                    estimate.total_gas, native.outcome.gas_used,
                    "seed {seed}: estimate under schedule {schedule} differs from gas charged"
                );
                succeeded += 1;
            }
            Some(code) => {
                *errors.entry(code.name()).or_default() += 1;
                failed += 1;
            }
        }
    }
    eprintln!(
        "{succeeded} graphs ran, {failed} stopped with a deterministic error {errors:?}; nodes per operator: {coverage:?}"
    );
    // Graphs of CVM operators never fail at run time (precision inference rules it out); CINN
    // primitives may fail on values (domains, division by zero, overflow), checked above.
    let missing: Vec<&str> = coverage
        .iter()
        .filter(|&(_, &n)| n == 0)
        .map(|(name, _)| *name)
        .collect();
    assert!(
        missing.is_empty(),
        "the generator produced no valid node of {missing:?}"
    );
    assert!(
        succeeded > 150,
        "only {succeeded} of 600 graphs ran to completion"
    );
}
