//! The test-only fault of `cvm-engine`'s `fault-injection` feature (the rounding of
//! `cvm_right_shift` on its block path truncates) is located by `cvm diff` at exactly the
//! perturbed node, for every fixture that runs that path. The native engine carries the fault,
//! `engine.wasm` (built without features) does not: the traces of the two are compared.
//!
//! `cargo test -p cvm-cli --features fault-injection --test fault`
#![cfg(feature = "fault-injection")]
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use std::path::PathBuf;

use cvm_cli::audit::prepare;
use cvm_engine::exec::InputTensor;
use cvm_engine::kernels::elementwise::MAP_BLOCK;
use cvm_engine::model::{AttrValue, ValueRef};
use cvm_runtime::trace::{NodeRecord, Trace, TraceModel, TraceOptions, trace_native, trace_wasm};
use cvm_runtime::wasm::WasmEngine;

/// The values operand `reference` had in the clean run: a model input, or a node's output the
/// clean trace keeps. `None` for a parameter (never `cvm_right_shift`'s operand in a fixture).
fn operand_values<'a>(
    reference: ValueRef,
    inputs: &'a [InputTensor],
    clean: &'a Trace,
) -> Option<&'a [i32]> {
    match reference {
        ValueRef::Input(index) => inputs.get(index as usize).map(|input| &input.data[..]),
        ValueRef::Node { node, output } => clean
            .values_of(node as usize)
            .and_then(|outputs| outputs.get(output as usize))
            .map(|tensor| &tensor.data[..]),
        ValueRef::Param(_) => None,
    }
}

fn int_attr(record: &NodeRecord, name: &str) -> i64 {
    record
        .attrs
        .iter()
        .find(|attr| attr.name == name)
        .and_then(|attr| match attr.value {
            AttrValue::Int(value) => Some(value),
            _ => None,
        })
        .unwrap()
}

/// Whether the fault changes `record`'s output: some element in a whole block whose truncated
/// shift, clipped, differs from what the clean run computed.
fn perturbed(record: &NodeRecord, inputs: &[InputTensor], clean: &Trace) -> bool {
    if record.op_name != "cvm_right_shift" {
        return false;
    }
    let position = record.index as usize;
    let input = operand_values(record.inputs[0], inputs, clean).unwrap();
    let output = &clean.values_of(position).unwrap()[0].data;
    let shift_bit = int_attr(record, "shift_bit") as u32;
    let bound = ((1i64 << (int_attr(record, "precision") - 1)) - 1) as i32;
    let whole = input.len() / MAP_BLOCK * MAP_BLOCK;
    input[..whole]
        .iter()
        .zip(&output[..whole])
        .any(|(&x, &y)| ((x >> (shift_bit - 1)) >> 1).clamp(-bound, bound) != y)
}

#[test]
fn cvm_diff_locates_the_perturbed_node_in_every_fixture_that_runs_it() {
    let wasm = WasmEngine::new().unwrap();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fault");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let options = TraceOptions {
        values_limit: Some(1 << 26),
    };
    let (mut located, mut unreached) = (Vec::new(), Vec::new());
    for case in cvm_fixtures::all_cases().unwrap() {
        let prepared = prepare(&case).unwrap();
        let Ok((bytes, Some(model))) = &prepared.model else {
            continue;
        };
        let shifts = cvm_engine::ops::by_name("cvm_right_shift").unwrap().code;
        if !model.nodes.iter().any(|node| node.op == shifts) {
            continue;
        }
        let Ok(validated) = cvm_engine::load(bytes, prepared.schedule) else {
            continue;
        };
        let traced = TraceModel::from_bytes(bytes).unwrap();
        let (_, faulty) = trace_native(
            &validated,
            &traced,
            prepared.inputs.clone(),
            prepared.gas_limit,
            options,
        )
        .unwrap();
        let mut session = wasm.session().unwrap();
        assert!(session.load(bytes, prepared.schedule).unwrap().is_none());
        let (_, clean) = trace_wasm(
            &mut session,
            prepared.schedule,
            &traced,
            &prepared.inputs,
            prepared.gas_limit,
            options,
        )
        .unwrap();
        assert!(
            clean.values.iter().all(Option::is_some),
            "{}: values were dropped",
            case.name
        );
        let expected = clean
            .nodes
            .iter()
            .find(|record| perturbed(record, &prepared.inputs, &clean));
        let file = |name: &str, trace: &Trace| {
            let path = dir.join(format!("{}.{name}.trace", case.name.replace('/', "_")));
            std::fs::write(&path, trace.to_file_bytes()).unwrap();
            path.to_str().unwrap().to_string()
        };
        let (a, b) = (file("native", &faulty), file("wasm", &clean));
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_cvm"))
            .args(["diff", "--json", &a, &b])
            .output()
            .unwrap();
        let value: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        match expected {
            Some(record) => {
                assert_eq!(output.status.code(), Some(1), "{}: {value}", case.name);
                assert_eq!(value["node"], record.index, "{}: {value}", case.name);
                assert_eq!(value["op"], "cvm_right_shift", "{}", case.name);
                assert!(value["elements"].as_array().is_some_and(|e| !e.is_empty()));
                located.push(case.name.clone());
            }
            None => {
                assert_eq!(output.status.code(), Some(0), "{}: {value}", case.name);
                unreached.push(case.name.clone());
            }
        }
    }
    println!(
        "located in {} fixtures: {located:?}\nnot reaching the path: {unreached:?}",
        located.len()
    );
    assert!(located.len() >= 3, "{located:?}");
    assert!(located.iter().any(|name| name.contains("digits")));
}
