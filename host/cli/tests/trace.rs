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

/// Runs `cvm` with `args`: exit status, stdout, stderr.
fn cvm(args: &[&str]) -> (i32, String, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_cvm"))
        .args(args)
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

fn digits_dir() -> String {
    format!(
        "{}/../../fixtures/models/digits",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// A scratch directory of this test, emptied first.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `cvm trace` of the digits CNN with `--values` on `engine`, written to `path`.
fn trace_digits(engine: &str, path: &std::path::Path) -> Trace {
    let dir = digits_dir();
    let input = format!("{dir}/input_2.npy");
    let (status, stdout, stderr) = cvm(&[
        "trace",
        &dir,
        "--input",
        &input,
        "--engine",
        engine,
        "--values",
        "--no-cache",
        "-o",
        path.to_str().unwrap(),
    ]);
    assert_eq!(status, 0, "{stderr}");
    assert!(
        stdout.contains("node   16 fc2 (dense) [1, 10] gas 1762167"),
        "{stdout}"
    );
    assert!(stdout.contains("9c8892999a4d0c1cf7f24f171ee1ed3323ff967e4291607f3c73410a2b310058"));
    Trace::from_file_bytes(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn cvm_diff_finds_equal_traces_equal_and_names_the_node_that_differs() {
    let dir = scratch("diff");
    let (a, b) = (dir.join("wasm.trace"), dir.join("native.trace"));
    let trace = trace_digits("wasm", &a);
    trace_digits("native", &b);
    let (status, stdout, _) = cvm(&["diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(status, 0);
    assert!(stdout.starts_with("equal: 17 nodes"), "{stdout}");

    // Node 5's second element changed, as a machine computing it differently would: its
    // record's hash, the values and the root all follow, and every later node differs too.
    let mut other = trace.clone();
    for position in 5..other.nodes.len() {
        let values = other.values[position].as_mut().unwrap();
        values[0].data[1] += 1;
        let tensor = &values[0];
        other.nodes[position].output_hashes[0] =
            cvm_runtime::trace::tensor_hash(&tensor.shape, tensor.precision, &tensor.data);
    }
    let leaves: Vec<[u8; 32]> = other
        .nodes
        .iter()
        .map(cvm_runtime::trace::leaf_hash)
        .collect();
    other.root = cvm_runtime::trace::merkle_root(&leaves);
    let changed = dir.join("changed.trace");
    std::fs::write(&changed, other.to_file_bytes()).unwrap();
    let (status, stdout, _) = cvm(&["diff", a.to_str().unwrap(), changed.to_str().unwrap()]);
    assert_eq!(status, 1);
    assert!(
        stdout.starts_with("differ at node 5 \"conv2_shift\" (cvm_right_shift)"),
        "{stdout}"
    );
    assert!(stdout.contains("attributes: "), "{stdout}");
    let was = trace.values[5].as_ref().unwrap()[0].data[1];
    assert!(
        stdout.contains(&format!("element 1: a {was}, b {}", was + 1)),
        "{stdout}"
    );
    let (status, stdout, _) = cvm(&[
        "diff",
        "--json",
        a.to_str().unwrap(),
        changed.to_str().unwrap(),
    ]);
    assert_eq!(status, 1);
    let value: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(value["node"], 5);
    assert_eq!(value["op"], "cvm_right_shift");

    // Damaged and foreign files are typed errors, exit status 2.
    let mut bytes = std::fs::read(&a).unwrap();
    let last = bytes.len() - 1;
    bytes[last / 2] ^= 0x55;
    let damaged = dir.join("damaged.trace");
    std::fs::write(&damaged, &bytes).unwrap();
    for (file, message) in [
        (damaged.to_str().unwrap().to_string(), "the trace"),
        (format!("{}/input_2.npy", digits_dir()), "not a trace file"),
        (dir.join("missing").to_str().unwrap().to_string(), "missing"),
    ] {
        let (status, _, stderr) = cvm(&["diff", a.to_str().unwrap(), &file]);
        assert_eq!(status, 2, "{file}");
        assert!(stderr.contains(message), "{file}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn cvm_run_node_reproduces_every_node_of_the_digits_trace() {
    let dir = scratch("run_node");
    let trace_file = dir.join("digits.trace");
    let trace = trace_digits("native", &trace_file);
    let model = digits_dir();
    let input = format!("{model}/input_2.npy");
    for (position, record) in trace.nodes.iter().enumerate() {
        let mut files = Vec::new();
        for (operand, reference) in record.inputs.iter().enumerate() {
            match *reference {
                cvm_engine::model::ValueRef::Input(_) => files.push(input.clone()),
                cvm_engine::model::ValueRef::Param(_) => {}
                cvm_engine::model::ValueRef::Node { node, output } => {
                    let tensor = &trace.values[node as usize].as_ref().unwrap()[output as usize];
                    let path = dir.join(format!("node{position}_operand{operand}.npy"));
                    let array = cvm_formats::npy::NpyArray {
                        shape: tensor.shape.clone(),
                        data: tensor.data.clone(),
                    };
                    std::fs::write(&path, cvm_formats::npy::write_npy(&array)).unwrap();
                    files.push(path.to_str().unwrap().to_string());
                }
            }
        }
        let index = record.index.to_string();
        let mut args = vec!["run-node", &model, "--node", &index, "--json", "--inputs"];
        args.extend(files.iter().map(String::as_str));
        let (status, stdout, stderr) = cvm(&args);
        assert_eq!(status, 0, "node {position}: {stderr}");
        let value: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        let hashes: Vec<String> = value["outputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|output| output["hash"].as_str().unwrap().to_string())
            .collect();
        let expected: Vec<String> = record
            .output_hashes
            .iter()
            .map(|hash| cvm_runtime::hash::hex(hash))
            .collect();
        assert_eq!(hashes, expected, "node {position} ({})", record.name);
    }

    // The same from the trace itself: every node's operands taken from its values (the image
    // from --input), its outputs checked against its record.
    let trace_path = trace_file.to_str().unwrap();
    for record in &trace.nodes {
        let index = record.index.to_string();
        let args = [
            "run-node", &model, "--node", &index, "--trace", trace_path, "--input", &input,
        ];
        let (status, stdout, stderr) = cvm(&args);
        assert_eq!(status, 0, "node {index}: {stderr}");
        assert!(stdout.contains("the outputs are the trace's"), "{stdout}");
    }
    // A trace whose node 4 claims other outputs (values and hash changed together): run alone
    // from node 3's values, node 4 gives its true outputs, not the trace's.
    let mut claimed = trace.clone();
    let values = claimed.values[4].as_mut().unwrap();
    values[0].data[0] += 1;
    let tensor = &values[0];
    claimed.nodes[4].output_hashes[0] =
        cvm_runtime::trace::tensor_hash(&tensor.shape, tensor.precision, &tensor.data);
    let leaves: Vec<[u8; 32]> = claimed
        .nodes
        .iter()
        .map(cvm_runtime::trace::leaf_hash)
        .collect();
    claimed.root = cvm_runtime::trace::merkle_root(&leaves);
    let claimed_path = dir.join("claimed.trace");
    std::fs::write(&claimed_path, claimed.to_file_bytes()).unwrap();
    let claimed_path = claimed_path.to_str().unwrap();
    let (status, stdout, _) = cvm(&["run-node", &model, "--node", "4", "--trace", claimed_path]);
    assert_eq!(status, 1);
    assert!(stdout.contains("NOT the trace's"), "{stdout}");

    // A node the model does not have, operands of the wrong count or shape: exit status 2.
    for (args, message) in [
        (
            vec!["--node", "17", "--inputs", &input],
            "node 17 does not exist",
        ),
        (vec!["--node", "1"], "the node takes 1 operand tensor(s)"),
        (
            vec!["--node", "1", "--inputs", &input],
            "must have shape [1, 32, 28, 28]",
        ),
    ] {
        let mut all = vec!["run-node", &model];
        all.extend(args);
        let (status, _, stderr) = cvm(&all);
        assert_eq!(status, 2, "{stderr}");
        assert!(stderr.contains(message), "{stderr}");
    }
}

#[test]
fn diff_tells_different_inputs_and_a_run_that_stopped_earlier() {
    let (bytes, input) = digits();
    let validated = cvm_engine::load(&bytes, 1).unwrap();
    let model = TraceModel::from_bytes(&bytes).unwrap();
    let trace = |input: &InputTensor, gas_limit: u64| {
        trace_native(
            &validated,
            &model,
            vec![input.clone()],
            gas_limit,
            TraceOptions::default(),
        )
        .unwrap()
        .1
    };
    let full = trace(&input, u64::MAX);
    let mut other_image = input.clone();
    other_image.data[300] = 0;
    other_image.data[301] = 100;
    assert_eq!(
        diff(&full, &trace(&other_image, u64::MAX)),
        TraceDiff::DifferentInputs {
            index: 0,
            inputs: vec![0]
        }
    );
    // Out of gas at node 5: the first five records agree.
    let limit = full.nodes[4].gas_used;
    let stopped = trace(&input, limit);
    assert_eq!(stopped.nodes.len(), 5);
    assert_eq!(diff(&full, &stopped), TraceDiff::Stopped { common: 5 });
    let mut foreign = full.clone();
    foreign.model_hash = [0; 32];
    assert_eq!(diff(&full, &foreign), TraceDiff::DifferentModels);
}

#[test]
fn a_node_that_fails_alone_is_a_deterministic_error_and_its_trace_stops_before_it() {
    let dir = scratch("failing_node");
    let model = dir.join("model.json");
    std::fs::write(
        &model,
        r#"{"format": "cvm-text/1",
            "inputs": [{"name": "x", "shape": [1], "precision": 32}],
            "nodes": [{"name": "y", "op": "BitwiseNot", "inputs": ["x"]}],
            "outputs": ["y"]}"#,
    )
    .unwrap();
    let input = dir.join("x.npy");
    let array = cvm_formats::npy::NpyArray {
        shape: vec![1],
        data: vec![i32::MAX],
    };
    std::fs::write(&input, cvm_formats::npy::write_npy(&array)).unwrap();
    let (model, input) = (model.to_str().unwrap(), input.to_str().unwrap());
    let (status, stdout, stderr) = cvm(&["run-node", model, "--node", "0", "--inputs", input]);
    assert_eq!(status, 1, "{stderr}");
    assert!(stdout.contains("IntegerOverflow"), "{stdout}");
    let (status, stdout, stderr) = cvm(&[
        "trace", model, "--input", input, "--engine", "native", "--json",
    ]);
    assert_eq!(status, 1, "{stderr}");
    let value: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(value["status"], "error");
    assert_eq!(value["nodes"].as_array().unwrap().len(), 0);
}
