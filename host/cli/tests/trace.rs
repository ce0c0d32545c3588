//! Traces of runs (`cvm_runtime::trace`): natively and in wasm they agree record for record, for
//! the random graphs of `cvm_testgen::graphgen` and for the digits CNN; a traced run's report is
//! the untraced run's; the values kept match the hashes and stop at the limit.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use std::path::PathBuf;

use cvm_engine::exec::InputTensor;
use cvm_engine::gas::Schedule;
use cvm_formats::cvm;
use cvm_formats::npy::read_npy;
use cvm_runtime::trace::{
    Trace, TraceDiff, TraceModel, TraceOptions, diff, trace_native, trace_wasm,
};
use cvm_runtime::wasm::WasmEngine;
use cvm_testgen::graphgen::{ByteSource, generate};

/// Traces `bytes` on `inputs` natively and in wasm under `schedule`; both traces and reports.
fn both(
    wasm: &WasmEngine,
    bytes: &[u8],
    inputs: &[InputTensor],
    schedule: u32,
    options: TraceOptions,
) -> Option<((cvm_engine::Report, Trace), (cvm_engine::Report, Trace))> {
    let validated = cvm_engine::load(bytes, schedule).ok()?;
    let model = TraceModel::from_bytes(bytes).unwrap();
    let native = trace_native(&validated, &model, inputs.to_vec(), u64::MAX, options).unwrap();
    let mut session = wasm.session().unwrap();
    assert!(session.load(bytes, schedule).unwrap().is_none());
    let in_wasm = trace_wasm(&mut session, schedule, &model, inputs, u64::MAX, options).unwrap();
    Some((native, in_wasm))
}

#[test]
fn random_graph_traces_agree_natively_and_in_wasm() {
    let wasm = WasmEngine::new().unwrap();
    let mut traced = 0;
    for seed in 0u64..600 {
        let seed_bytes = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes();
        let generated = generate(&mut ByteSource::new(&seed_bytes), 12);
        let bytes = generated.model.encode();
        let schedule = Schedule::ALL[seed as usize % Schedule::ALL.len()].version;
        let options = TraceOptions {
            values_limit: (seed % 2 == 0).then_some(1 << 20),
        };
        let Some(((native_report, native), (wasm_report, in_wasm))) =
            both(&wasm, &bytes, &generated.inputs, schedule, options)
        else {
            continue;
        };
        assert_eq!(native_report, wasm_report, "seed {seed}: reports differ");
        assert_eq!(native, in_wasm, "seed {seed}: traces differ");
        assert_eq!(diff(&native, &in_wasm), TraceDiff::Equal, "seed {seed}");
        let untraced = cvm_engine::run(
            &cvm_engine::load(&bytes, schedule).unwrap(),
            generated.inputs.clone(),
            u64::MAX,
        );
        assert_eq!(
            native_report, untraced,
            "seed {seed}: tracing changed the report"
        );
        // A successful run traces every node; a failed one the nodes before the failure.
        match native_report.outcome.status {
            cvm_engine::Status::Ok { .. } => {
                assert_eq!(native.nodes.len(), generated.model.nodes.len())
            }
            cvm_engine::Status::Error { node, .. } => {
                assert_eq!(native.nodes.len() as u32, node.unwrap_or(0))
            }
        }
        let read = Trace::from_file_bytes(&native.to_file_bytes()).unwrap();
        assert_eq!(
            read, native,
            "seed {seed}: the trace file does not round-trip"
        );
        traced += 1;
    }
    assert!(traced > 500, "only {traced} graphs loaded");
}

fn digits() -> (Vec<u8>, InputTensor) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models/digits");
    let (symbol, params) = cvm::read_dir(&dir).unwrap();
    let bytes = cvm::import(&symbol, &params).unwrap().model.encode();
    let image = read_npy(&std::fs::read(dir.join("input_2.npy")).unwrap()).unwrap();
    let input = InputTensor {
        shape: image.shape.clone(),
        data: image.data,
    };
    (bytes, input)
}

#[test]
fn the_digits_trace_agrees_natively_and_in_wasm_and_keeps_values_up_to_the_limit() {
    let wasm = WasmEngine::new().unwrap();
    let (bytes, input) = digits();
    let options = TraceOptions {
        values_limit: Some(1 << 24),
    };
    let ((native_report, native), (wasm_report, in_wasm)) =
        both(&wasm, &bytes, std::slice::from_ref(&input), 1, options).unwrap();
    assert_eq!(native_report, wasm_report);
    assert_eq!(native, in_wasm);
    assert_eq!(native.gas_used, 1_762_167);
    assert_eq!(
        cvm_runtime::hash::hex(&native.outcome_hash),
        "9c8892999a4d0c1cf7f24f171ee1ed3323ff967e4291607f3c73410a2b310058"
    );
    assert!(native.values.iter().all(Option::is_some));
    // The last node's gas so far is the run's.
    assert_eq!(native.nodes.last().unwrap().gas_used, native.gas_used);

    // A limit below the first node's outputs keeps no values at all.
    let first = native.values[0].as_ref().unwrap();
    let first_elements: usize = first.iter().map(|tensor| tensor.data.len()).sum();
    let small = TraceOptions {
        values_limit: Some(first_elements as u64 - 1),
    };
    let ((_, native_small), (_, wasm_small)) = both(&wasm, &bytes, &[input], 1, small).unwrap();
    assert_eq!(native_small, wasm_small);
    assert!(native_small.values.iter().all(Option::is_none));
    assert_eq!(native_small.root, native.root);
}
