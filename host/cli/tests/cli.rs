//! The `cvm` command line as a contract: outputs, exit statuses (0 ok, 1 deterministic model or
//! input error, 2 usage or node-local error) and clear messages for bad input, never a panic.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cvm_engine::gas::Schedule;
use cvm_engine::model::{AttrValue, Model, ValueRef};
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn cnn_model() -> PathBuf {
    root().join("fixtures/models/cnn/model.json")
}

fn cnn_input() -> PathBuf {
    root().join("fixtures/models/cnn/input.npy")
}

fn cvm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cvm"))
        .args(args)
        .output()
        .expect("cvm starts")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs and checks the exit status; returns stdout and stderr together.
fn expect_status(args: &[&str], status: i32) -> String {
    let output = cvm(args);
    let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert_eq!(
        output.status.code(),
        Some(status),
        "cvm {args:?} printed:\n{all}"
    );
    assert!(!all.contains("panicked"), "cvm {args:?} panicked:\n{all}");
    all
}

fn run_json(args: &[&str], status: i32) -> Value {
    let output = cvm(args);
    assert_eq!(
        output.status.code(),
        Some(status),
        "{}{}",
        text(&output.stdout),
        text(&output.stderr)
    );
    let lines: Vec<&str> = std::str::from_utf8(&output.stdout)
        .expect("utf-8")
        .lines()
        .collect();
    assert_eq!(lines.len(), 1, "--json prints exactly one line: {lines:?}");
    serde_json::from_str(lines[0]).expect("one JSON object")
}

/// `cvm run MODEL --input <the CNN input> --json EXTRA…`, expecting exit status `status`.
fn run_on_cnn_input(model: &Path, extra: &[&str], status: i32) -> Value {
    let input = cnn_input();
    let mut args = vec![
        "run",
        path_str(model),
        "--input",
        path_str(&input),
        "--json",
    ];
    args.extend_from_slice(extra);
    run_json(&args, status)
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cvm-cli-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join(name)
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

fn cnn_canonical() -> Vec<u8> {
    let text = std::fs::read_to_string(cnn_model()).expect("model");
    cvm_formats::text::parse_text_model(&text, &root(), "cnn")
        .expect("parses")
        .encode()
}

#[test]
fn run_prints_outputs_gas_and_hash_and_engines_agree() {
    let model = cnn_model();
    let input = cnn_input();
    let summary = expect_status(&["run", path_str(&model), "--input", path_str(&input)], 0);
    assert!(
        summary.contains("[-41, -1, -10, 6, 32, -3, -6, 0, -17, 7]"),
        "{summary}"
    );
    assert!(summary.contains("gas used:"), "{summary}");
    assert!(summary.contains("hash:"), "{summary}");

    let wasm = run_json(
        &[
            "run",
            path_str(&model),
            "--input",
            path_str(&input),
            "--json",
        ],
        0,
    );
    let native = run_json(
        &[
            "run",
            path_str(&model),
            "--input",
            &format!("data={}", path_str(&input)),
            "--json",
            "--engine",
            "native",
        ],
        0,
    );
    assert_eq!(wasm, native);
    assert_eq!(wasm["status"], "ok");
    assert_eq!(
        wasm["outputs"][0]["data"],
        serde_json::json!([-41, -1, -10, 6, 32, -3, -6, 0, -17, 7])
    );
    assert_eq!(wasm["hash"].as_str().map(str::len), Some(64));

    let keccak = run_json(
        &[
            "run",
            path_str(&model),
            "--input",
            path_str(&input),
            "--json",
            "--hash",
            "keccak256",
        ],
        0,
    );
    assert_ne!(keccak["hash"], wasm["hash"]);
    assert_eq!(keccak["gas_used"], wasm["gas_used"]);
}

#[test]
fn estimate_equals_gas_charged_and_one_less_is_out_of_gas() {
    let model = cnn_model();
    let input = cnn_input();
    let estimate = expect_status(&["estimate", path_str(&model), "--json"], 0);
    let estimate: Value = serde_json::from_str(estimate.trim()).expect("json");
    let total = estimate["total_gas"].as_u64().expect("total");
    let nodes = estimate["nodes"].as_array().expect("nodes");
    assert_eq!(nodes.len(), 8);
    assert_eq!(
        nodes
            .iter()
            .map(|n| n["gas"].as_u64().unwrap_or(0))
            .sum::<u64>()
            + estimate["run_gas"].as_u64().expect("run gas"),
        total
    );
    // The memory plan: parameters (5480 bytes), packed weights (4096: 2560 for the dense node,
    // 1536 for the 6 tap entries of each of the depthwise conv2d's 8 output channels), the input (256), the arena of every node output (4096, the most node outputs
    // alive at once), and the largest working memory of any node (2920, the depthwise conv2d's
    // tap plane, pairings and entry offsets, output indices, flat rows and row targets; more
    // than the 40 bytes of the output copied out).
    assert_eq!(estimate["peak_memory_bytes"].as_u64(), Some(16848));
    assert_eq!(estimate["arena_bytes"].as_u64(), Some(4096));
    let text = expect_status(&["estimate", path_str(&model)], 0);
    assert!(text.contains("peak memory: 16848 bytes\n"), "{text}");
    assert!(text.contains("arena:       4096 bytes"), "{text}");

    let ran = run_json(
        &[
            "run",
            path_str(&model),
            "--input",
            path_str(&input),
            "--json",
        ],
        0,
    );
    assert_eq!(ran["gas_used"].as_u64(), Some(total));

    let limit = (total - 1).to_string();
    let starved = run_json(
        &[
            "run",
            path_str(&model),
            "--input",
            path_str(&input),
            "--json",
            "--gas-limit",
            &limit,
        ],
        1,
    );
    assert_eq!(starved["status"], "error");
    assert_eq!(starved["error"]["code"], "OutOfGas");
    assert_eq!(starved["error"]["code_num"], 403);
    assert_eq!(starved["error"]["node"], "scores");
    assert!(starved["gas_used"].as_u64() < Some(total));
    let zero = run_json(
        &[
            "run",
            path_str(&model),
            "--input",
            path_str(&input),
            "--json",
            "--gas-limit",
            "0",
        ],
        1,
    );
    // The run's own gas is charged first, before any node.
    assert_eq!(zero["error"]["node"], Value::Null);
    assert_eq!(zero["gas_used"], 0);
}

#[test]
fn build_inspect_and_canonical_run() {
    let built = scratch("cnn.cvm");
    expect_status(
        &["build", path_str(&cnn_model()), "-o", path_str(&built)],
        0,
    );
    assert_eq!(std::fs::read(&built).expect("written"), cnn_canonical());
    let from_text = run_on_cnn_input(&cnn_model(), &[], 0);
    let from_binary = run_on_cnn_input(&built, &[], 0);
    assert_eq!(from_text, from_binary);

    let inspect = expect_status(&["inspect", path_str(&built)], 0);
    for needle in [
        "data  shape [1, 1, 8, 8]  precision 8",
        "conv1 = conv2d(data, conv1_weight, conv1_bias)",
        "scores = scores  shape [1, 10]  precision 8",
    ] {
        assert!(
            inspect.contains(needle),
            "missing {needle:?} in:\n{inspect}"
        );
    }

    let output = scratch("scores.npy");
    expect_status(
        &[
            "run",
            path_str(&built),
            "--input",
            path_str(&cnn_input()),
            "--output",
            path_str(&output),
        ],
        0,
    );
    let written =
        cvm_formats::npy::read_npy(&std::fs::read(&output).expect("npy")).expect("valid npy");
    assert_eq!(written.shape, [1, 10]);
    assert_eq!(written.data, [-41, -1, -10, 6, 32, -3, -6, 0, -17, 7]);
}

#[test]
fn version_names_the_schedules_and_the_engine_hash() {
    let version = expect_status(&["version"], 0);
    let schedules: Vec<String> = Schedule::ALL
        .iter()
        .map(|schedule| schedule.version.to_string())
        .collect();
    for needle in [
        "model format version   1".to_string(),
        format!(
            "gas schedule versions  {} (default {}, the newest)",
            schedules.join(", "),
            Schedule::NEWEST.version
        ),
        "engine ABI version     5".to_string(),
        format!(
            "engine.wasm sha3-256   {} ({} bytes, the pinned module)",
            cvm_runtime::wasm::engine_wasm_sha3(),
            cvm_runtime::wasm::ENGINE_WASM.len()
        ),
    ] {
        assert!(version.contains(&needle), "{needle:?} in {version}");
    }
}

/// `cvm estimate MODEL --json --schedule N` (exit 0).
fn estimate_under(model: &Path, schedule: &str) -> Value {
    run_json(
        &[
            "estimate",
            path_str(model),
            "--json",
            "--schedule",
            schedule,
        ],
        0,
    )
}

#[test]
fn schedule_1_gives_the_blessed_figures() {
    // The CNN fixture's gas and hash, blessed under schedule version 1, through every command.
    let case = cvm_fixtures::all_cases()
        .expect("fixture files load")
        .into_iter()
        .find(|case| case.name == "models/cnn/case")
        .expect("the CNN case");
    let expected = case.expected.expect("blessed");
    let (gas, hash) = (&expected["gas_used"], &expected["hash"]);
    let estimate = estimate_under(&cnn_model(), "1");
    assert_eq!(estimate["schedule_version"], 1);
    assert_eq!(&estimate["total_gas"], gas);
    for engine in ["wasm", "native"] {
        let ran = run_on_cnn_input(&cnn_model(), &["--schedule", "1", "--engine", engine], 0);
        assert_eq!(&ran["gas_used"], gas, "{engine}");
        assert_eq!(&ran["hash"], hash, "{engine}");
    }
    let inspect = expect_status(&["inspect", path_str(&cnn_model()), "--schedule", "1"], 0);
    assert!(
        inspect.contains(&format!("total gas {gas} (schedule v1)")),
        "{inspect}"
    );
}

#[test]
fn every_schedule_charges_its_estimate_on_both_engines() {
    let model = cnn_model();
    for schedule in Schedule::ALL {
        let version = schedule.version.to_string();
        let estimate = estimate_under(&model, &version);
        assert_eq!(estimate["schedule_version"], schedule.version);
        let total = estimate["total_gas"].as_u64().expect("total");
        let text = expect_status(&["estimate", path_str(&model), "--schedule", &version], 0);
        assert!(
            text.contains(&format!("total gas:   {total} (schedule v{version})")),
            "{text}"
        );
        let wasm = run_on_cnn_input(&model, &["--schedule", &version], 0);
        let native = run_on_cnn_input(&model, &["--schedule", &version, "--engine", "native"], 0);
        assert_eq!(wasm, native, "schedule {version}");
        assert_eq!(wasm["gas_used"].as_u64(), Some(total), "schedule {version}");
        // Outputs do not depend on the schedule; the gas, and so the hash, may.
        assert_eq!(
            wasm["outputs"][0]["data"],
            serde_json::json!([-41, -1, -10, 6, 32, -3, -6, 0, -17, 7])
        );
        let starved = run_on_cnn_input(
            &model,
            &[
                "--schedule",
                &version,
                "--gas-limit",
                &(total - 1).to_string(),
            ],
            1,
        );
        assert_eq!(starved["error"]["code"], "OutOfGas");
    }
    // Without --schedule: the newest schedule.
    let default = run_json(&["estimate", path_str(&model), "--json"], 0);
    assert_eq!(
        default,
        estimate_under(&model, &Schedule::NEWEST.version.to_string())
    );
}

#[test]
fn a_non_numeric_schedule_is_a_usage_error() {
    let model = cnn_model();
    let input = cnn_input();
    for args in [
        vec![
            "run",
            path_str(&model),
            "--input",
            path_str(&input),
            "--schedule",
            "x",
        ],
        vec!["estimate", path_str(&model), "--schedule", "x"],
        vec!["inspect", path_str(&model), "--schedule=-1"],
        vec!["audit", "--schedule", "two"],
        vec!["run", path_str(&model), "--schedule"],
    ] {
        let message = expect_status(&args, 2);
        assert!(message.contains("--schedule"), "{args:?}: {message}");
    }
}

#[test]
fn an_undefined_schedule_is_unsupported_version_on_both_engines() {
    let model = cnn_model();
    let wasm = run_on_cnn_input(&model, &["--schedule", "9"], 1);
    let native = run_on_cnn_input(&model, &["--schedule", "9", "--engine", "native"], 1);
    assert_eq!(wasm, native);
    assert_eq!(wasm["status"], "error");
    assert_eq!(wasm["error"]["code"], "UnsupportedVersion");
    assert_eq!(wasm["error"]["code_num"], 101);
    assert_eq!(wasm["error"]["node"], Value::Null);
    assert_eq!(wasm["gas_used"], 0);
    let message = wasm["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("gas schedule version 9 is not defined; this engine defines version"),
        "{message}"
    );

    let estimate = run_json(
        &["estimate", path_str(&model), "--json", "--schedule", "9"],
        1,
    );
    assert_eq!(estimate["error"]["code"], "UnsupportedVersion");
    assert_eq!(estimate["hash"], wasm["hash"]);
    for command in ["inspect", "estimate"] {
        let text = expect_status(&[command, path_str(&model), "--schedule", "9"], 1);
        assert!(
            text.contains("UnsupportedVersion (101)"),
            "{command}: {text}"
        );
    }
    let built = scratch("unbuilt.cvm");
    let text = expect_status(
        &[
            "build",
            path_str(&model),
            "-o",
            path_str(&built),
            "--schedule",
            "9",
        ],
        1,
    );
    assert!(text.contains("UnsupportedVersion"), "{text}");
    let text = expect_status(&["audit", "--schedule", "9", "--engine", "native"], 2);
    assert!(
        text.contains("gas schedule version 9 is not defined"),
        "{text}"
    );
}

#[test]
fn audit_runs_each_fixture_under_its_schedule_or_the_one_asked_for() {
    let dir = root().join("fixtures/ops/dense");
    let audit = |extra: &[&str]| {
        let mut args = vec!["audit", path_str(&dir), "--json", "--engine", "both"];
        args.extend_from_slice(extra);
        run_json(&args, 0)
    };
    let own = audit(&[]);
    let rows = own["fixtures"].as_array().expect("rows");
    assert!(rows.len() >= 5);
    for row in rows {
        assert_eq!(row["pass"], true, "{row}");
        assert_eq!(
            (&row["schedule"], &row["blessed_schedule"]),
            (&1.into(), &1.into())
        );
        assert_eq!(row["native"], row["golden"], "{row}");
    }
    assert_eq!(own["summary"]["schedule"], Value::Null);
    assert_eq!(
        audit(&["--schedule", "1"])["fixtures"]
            .as_array()
            .map(Vec::len),
        Some(rows.len())
    );
    for schedule in Schedule::ALL
        .iter()
        .filter(|schedule| schedule.version != 1)
    {
        let version = schedule.version.to_string();
        let other = audit(&["--schedule", &version]);
        assert_eq!(other["summary"]["schedule"], schedule.version);
        for row in other["fixtures"].as_array().expect("rows") {
            // No golden hash exists under another schedule: the engines must agree.
            assert_eq!(row["golden"], Value::Null, "{row}");
            assert_eq!(row["schedule"], schedule.version);
            assert_eq!(row["native"], row["wasm"], "{row}");
            assert_eq!(row["pass"], true, "{row}");
        }
    }
}

/// Writes `model` canonically and runs it in both engines; returns the error JSON.
fn rejected(model: &Model, name: &str) -> Value {
    let path = scratch(name);
    std::fs::write(&path, model.encode()).expect("write");
    let wasm = run_on_cnn_input(&path, &[], 1);
    let native = run_on_cnn_input(&path, &["--engine", "native"], 1);
    assert_eq!(wasm, native);
    wasm
}

fn cnn_decoded() -> Model {
    Model::decode(&cnn_canonical()).expect("decodes")
}

#[test]
fn canonical_model_rejections_are_deterministic_errors() {
    let mut model = cnn_decoded();
    model.nodes[2].op = 999;
    let error = rejected(&model, "unknown_op.cvm");
    assert_eq!(error["error"]["code"], "UnknownOp");
    assert_eq!(error["error"]["node"], "relu1");

    let mut model = cnn_decoded();
    model.nodes[2].inputs.push(ValueRef::Input(0));
    assert_eq!(
        rejected(&model, "arity.cvm")["error"]["code"],
        "ArityMismatch"
    );

    let mut model = cnn_decoded();
    model.nodes[1].inputs[0] = ValueRef::Node { node: 5, output: 0 };
    let error = rejected(&model, "forward.cvm");
    assert_eq!(error["error"]["code"], "InvalidReference");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("does not come before it")
    );

    let mut model = cnn_decoded();
    model.nodes[1].inputs[0] = ValueRef::Node { node: 1, output: 0 };
    assert_eq!(
        rejected(&model, "cycle.cvm")["error"]["code"],
        "InvalidReference"
    );

    let mut model = cnn_decoded();
    model.nodes[0].inputs[1] = ValueRef::Param(17);
    assert_eq!(
        rejected(&model, "dangling.cvm")["error"]["code"],
        "InvalidReference"
    );

    let mut model = cnn_decoded();
    let shift = model.nodes[1]
        .attrs
        .iter_mut()
        .find(|a| a.name == "shift_bit")
        .expect("shift_bit");
    shift.value = AttrValue::Int(40);
    let error = rejected(&model, "range.cvm");
    assert_eq!(error["error"]["code"], "AttributeOutOfRange");
    assert_eq!(error["error"]["node"], "conv1_requant");

    let mut model = cnn_decoded();
    model.params[2].shape = vec![10, 127];
    assert_eq!(
        rejected(&model, "param_len.cvm")["error"]["code"],
        "InvalidParam"
    );

    let mut model = cnn_decoded();
    model.inputs[0].precision = 0;
    assert_eq!(
        rejected(&model, "precision0.cvm")["error"]["code"],
        "InvalidPrecision"
    );

    let mut model = cnn_decoded();
    model.inputs[0].shape = vec![1 << 16, 1 << 16];
    assert_eq!(
        rejected(&model, "huge.cvm")["error"]["code"],
        "LimitExceeded"
    );

    let mut model = cnn_decoded();
    model.nodes[3].name = "relu1".into();
    assert_eq!(
        rejected(&model, "dup.cvm")["error"]["code"],
        "DuplicateName"
    );
}

#[test]
fn truncated_and_corrupted_models_never_panic() {
    let bytes = cnn_canonical();
    let path = scratch("truncated.cvm");
    // Every header offset, then a spread of offsets through the body.
    let offsets: Vec<usize> = (0..16).chain((16..bytes.len()).step_by(97)).collect();
    for &len in &offsets {
        std::fs::write(&path, &bytes[..len]).expect("write");
        let error = run_json(&["run", path_str(&path), "--json", "--engine", "native"], 1);
        assert_eq!(
            error["error"]["code"], "MalformedModel",
            "truncated at {len}"
        );
    }
    std::fs::write(&path, &bytes[..bytes.len() / 2]).expect("write");
    let error = run_json(&["run", path_str(&path), "--json"], 1);
    assert_eq!(error["error"]["code"], "MalformedModel");

    // Bit flips: each either still decodes to a model that runs or is rejected, identically on
    // both engines, and never panics.
    let input = cnn_input();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..6 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let mut corrupt = bytes.clone();
        let bit = (state % (corrupt.len() as u64 * 8)) as usize;
        corrupt[bit / 8] ^= 1 << (bit % 8);
        std::fs::write(&path, &corrupt).expect("write");
        let args = [
            "run",
            path_str(&path),
            "--input",
            path_str(&input),
            "--json",
        ];
        let wasm = cvm(&args);
        let native = cvm(&[&args[..], &["--engine", "native"]].concat());
        assert!(
            matches!(wasm.status.code(), Some(0..=2)),
            "bit {bit}: {}",
            text(&wasm.stderr)
        );
        assert_eq!(wasm.status.code(), native.status.code(), "bit {bit}");
        assert_eq!(wasm.stdout, native.stdout, "bit {bit}");
    }
}

#[test]
fn bad_inputs_give_clear_errors() {
    let model = cnn_model();
    let model = path_str(&model);

    // Wrong shape and out-of-precision values are deterministic (exit 1).
    let wrong_shape = scratch("wrong_shape.npy");
    std::fs::write(
        &wrong_shape,
        cvm_formats::npy::write_npy(&cvm_formats::npy::NpyArray {
            shape: vec![1, 64],
            data: vec![0; 64],
        }),
    )
    .expect("write");
    let error = run_json(
        &["run", model, "--input", path_str(&wrong_shape), "--json"],
        1,
    );
    assert_eq!(error["error"]["code"], "InputShape");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("input \"data\" must have shape [1, 1, 8, 8]")
    );

    let too_big = scratch("too_big.npy");
    let mut data = vec![0; 64];
    data[5] = 128;
    std::fs::write(
        &too_big,
        cvm_formats::npy::write_npy(&cvm_formats::npy::NpyArray {
            shape: vec![1, 1, 8, 8],
            data,
        }),
    )
    .expect("write");
    let error = run_json(&["run", model, "--input", path_str(&too_big), "--json"], 1);
    assert_eq!(error["error"]["code"], "InputPrecision");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("value 128 at flat index 5")
    );

    // Float tensors, missing inputs, unknown names and missing files are usage errors (exit 2).
    let float = scratch("float.npy");
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }";
    let padded = format!("{header:<117}\n");
    bytes.extend_from_slice(&(padded.len() as u16).to_le_bytes());
    bytes.extend_from_slice(padded.as_bytes());
    bytes.extend_from_slice(&[0, 0, 0x80, 0x3f]);
    std::fs::write(&float, bytes).expect("write");
    // A float32 input is for a model imported from ONNX, with its quantization.
    let message = expect_status(&["run", model, "--input", path_str(&float)], 2);
    assert!(
        message.contains("a float32 input needs the model's quantization"),
        "{message}"
    );

    let message = expect_status(&["run", model], 2);
    assert!(message.contains("no value for input \"data\""), "{message}");
    let message = expect_status(&["run", model, "--input", "label=x.npy"], 2);
    assert!(message.contains("no input \"label\""), "{message}");
    let message = expect_status(&["run", model, "--input", "/nonexistent/x.npy"], 2);
    assert!(message.contains("/nonexistent/x.npy"), "{message}");
    let message = expect_status(&["run", "/nonexistent/model.json"], 2);
    assert!(message.contains("/nonexistent/model.json"), "{message}");
    expect_status(&["run", model, "--gas-limit", "-5"], 2);
    expect_status(&["run", model, "--engine", "gpu"], 2);
    expect_status(&["frobnicate"], 2);
}

#[test]
fn text_model_errors_name_node_and_field() {
    let path = scratch("bad_text.json");
    let mut value: Value =
        serde_json::from_str(&std::fs::read_to_string(cnn_model()).expect("read")).expect("json");
    value["nodes"][2]["op"] = "rellu".into();
    std::fs::write(&path, value.to_string()).expect("write");
    let message = expect_status(
        &["run", path_str(&path), "--input", path_str(&cnn_input())],
        2,
    );
    assert!(
        message.contains("node \"relu1\", field \"op\": unknown operator \"rellu\""),
        "{message}"
    );

    std::fs::write(&path, "{\"format\": \"cvm-text/1\", \"inputs\": [").expect("write");
    let message = expect_status(&["estimate", path_str(&path)], 2);
    assert!(message.contains("not valid JSON"), "{message}");
}

#[test]
fn build_refuses_invalid_models_unless_asked() {
    let path = scratch("invalid.json");
    let mut value: Value =
        serde_json::from_str(&std::fs::read_to_string(cnn_model()).expect("read")).expect("json");
    value["nodes"][0]["attrs"]["groups"] = 3.into();
    std::fs::write(&path, value.to_string()).expect("write");
    let out = scratch("invalid.cvm");
    let message = expect_status(&["build", path_str(&path), "-o", path_str(&out)], 1);
    assert!(message.contains("ShapeMismatch"), "{message}");
    expect_status(
        &[
            "build",
            path_str(&path),
            "-o",
            path_str(&out),
            "--allow-invalid",
        ],
        0,
    );
    let error = run_on_cnn_input(&out, &[], 1);
    assert_eq!(error["error"]["code"], "ShapeMismatch");
    assert_eq!(error["error"]["node"], "conv1");
    assert_eq!(error["gas_used"], 0);
}

/// `cvm` with standard output connected to `stdout`; gives the exit status and standard error.
fn with_stdout(args: &[&str], stdout: std::process::Stdio) -> (Option<i32>, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_cvm"))
        .args(args)
        .stdout(stdout)
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("cvm starts");
    (output.status.code(), text(&output.stderr))
}

#[test]
fn a_closed_or_full_standard_output_is_a_node_local_failure() {
    let model = cnn_model();
    let input = cnn_input();
    let commands: [&[&str]; 4] = [
        &["estimate", path_str(&model)],
        &["estimate", path_str(&model), "--json"],
        &[
            "run",
            path_str(&model),
            "--input",
            path_str(&input),
            "--json",
        ],
        &["version"],
    ];
    for args in commands {
        // A pipe whose reader is gone: the write fails with a broken pipe.
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let (status, stderr) = with_stdout(args, writer.into());
        assert_eq!(status, Some(2), "cvm {args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "cvm {args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "cvm {args:?}: {stderr}");
        assert!(
            stderr.starts_with("cvm: error: writing to standard output:"),
            "cvm {args:?}: {stderr}"
        );
        // A full disk.
        if let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") {
            let (status, stderr) = with_stdout(args, full.into());
            assert_eq!(status, Some(2), "cvm {args:?} > /dev/full: {stderr}");
            assert!(
                stderr.starts_with("cvm: error: writing to standard output:")
                    && stderr.lines().count() == 1,
                "cvm {args:?} > /dev/full: {stderr}"
            );
        }
    }
}

/// A sparse file of `len` bytes (no disk space is used).
fn sparse(name: &str, len: u64) -> PathBuf {
    let path = scratch(name);
    std::fs::File::create(&path)
        .and_then(|file| file.set_len(len))
        .expect("sparse file");
    path
}

#[test]
fn files_past_their_limit_are_refused_before_they_are_read() {
    use cvm_formats::FileLimit;
    let model_message = format!(
        "larger than {} bytes, the most a model file may have",
        FileLimit::MODEL.bytes
    );
    let tensor_message = format!(
        "larger than {} bytes, the most a tensor file may have",
        FileLimit::TENSOR.bytes
    );
    let big_model = sparse("big-model.cvm", FileLimit::MODEL.bytes + 1);
    let message = expect_status(&["estimate", path_str(&big_model)], 2);
    assert!(message.contains(&model_message), "{message}");
    // A CVM model's params.
    let symbol = root().join("fixtures/models/cvm_dense/symbol");
    let message = expect_status(
        &[
            "estimate",
            "--cvm-symbol",
            path_str(&symbol),
            "--cvm-params",
            path_str(&big_model),
        ],
        2,
    );
    assert!(message.contains(&model_message), "{message}");
    std::fs::remove_file(&big_model).expect("remove");
    // An input, and a text model's parameter file.
    let big_tensor = sparse("big-tensor.npy", FileLimit::TENSOR.bytes + 1);
    let model = cnn_model();
    let message = expect_status(
        &[
            "run",
            path_str(&model),
            "--engine",
            "native",
            "--input",
            path_str(&big_tensor),
        ],
        2,
    );
    assert!(message.contains(&tensor_message), "{message}");
    let mut text: Value =
        serde_json::from_str(&std::fs::read_to_string(&model).expect("read")).expect("json");
    text["params"][0]
        .as_object_mut()
        .expect("param")
        .remove("data");
    text["params"][0]["file"] = path_str(&big_tensor).into();
    let text_model = scratch("big-param.json");
    std::fs::write(&text_model, text.to_string()).expect("write");
    let message = expect_status(&["estimate", path_str(&text_model)], 2);
    assert!(message.contains(&tensor_message), "{message}");
    std::fs::remove_file(&big_tensor).expect("remove");
}

/// `cvm run --engine native ARGS` (ARGS as shell text, which may pipe the output on) in an
/// address space of `kib` KiB.
#[cfg(target_os = "linux")]
fn native_run_in_address_space(kib: u64, args: &str) -> Output {
    let command = format!(
        "ulimit -v {kib} && exec '{}' run --engine native {args}",
        env!("CARGO_BIN_EXE_cvm")
    );
    Command::new("sh")
        .args(["-c", &command])
        .output()
        .expect("sh starts")
}

/// A stream without end (`/dev/zero`) as an input is read only up to its limit, in bounded
/// memory: the run is given an address space of 1.5 GiB, three times the tensor file limit.
#[cfg(target_os = "linux")]
#[test]
fn an_endless_input_stream_is_refused_in_bounded_memory() {
    if !Path::new("/dev/zero").exists() {
        return;
    }
    let model = cnn_model();
    let output = native_run_in_address_space(
        1_572_864,
        &format!("'{}' --input /dev/zero", path_str(&model)),
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("/dev/zero: larger than") && !stderr.contains("panicked"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn text_model_messages_quote_a_bounded_prefix_of_hostile_strings() {
    let huge = "N".repeat(1 << 20);
    let model: Value =
        serde_json::from_str(&std::fs::read_to_string(cnn_model()).expect("read")).expect("json");
    type Edit<'a> = Box<dyn Fn(&mut Value) + 'a>;
    let mutations: Vec<Edit> = vec![
        Box::new(|v| v["nodes"][0]["op"] = huge.clone().into()),
        Box::new(|v| v[huge.as_str()] = 1.into()),
        Box::new(|v| v["format"] = huge.clone().into()),
        Box::new(|v| v["nodes"][0]["inputs"][1] = huge.clone().into()),
        Box::new(|v| v["inputs"][0]["shape"] = serde_json::json!([huge.clone()])),
        Box::new(|v| v["outputs"] = serde_json::json!([huge.clone()])),
    ];
    let path = scratch("hostile-strings.json");
    for (index, mutate) in mutations.iter().enumerate() {
        let mut mutated = model.clone();
        mutate(&mut mutated);
        std::fs::write(&path, mutated.to_string()).expect("write");
        let message = expect_status(&["estimate", path_str(&path)], 2);
        assert!(
            message.len() < 1024 && message.contains("… (10485"),
            "mutation {index}: {} bytes: {}",
            message.len(),
            message.chars().take(300).collect::<String>()
        );
    }
}

#[test]
fn a_text_model_with_a_byte_order_mark_is_a_text_model() {
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend(std::fs::read(cnn_model()).expect("read"));
    let path = scratch("bom.json");
    std::fs::write(&path, bytes).expect("write");
    let plain = expect_status(&["estimate", path_str(&cnn_model())], 0);
    let with_mark = expect_status(&["estimate", path_str(&path)], 0);
    assert_eq!(plain, with_mark);
}

/// An output of 2^24 elements (a 4 × 4 tensor tiled 1024 × 1024) printed as JSON in an address
/// space of 512 MiB: the JSON is streamed, so memory stays that of the tensors, 128 MiB (before,
/// one JSON value per element took over a gigabyte; at the limit of 2^26 elements, 5 GB).
#[cfg(target_os = "linux")]
#[test]
fn a_large_output_is_printed_as_json_in_bounded_memory() {
    let model = scratch("tile-2-24.json");
    std::fs::write(
        &model,
        serde_json::json!({
            "format": "cvm-text/1",
            "inputs": [{"name": "x", "shape": [4, 4], "precision": 8}],
            "nodes": [{"name": "y", "op": "tile", "inputs": ["x"], "attrs": {"reps": [1024, 1024]}}],
            "outputs": ["y"],
        })
        .to_string(),
    )
    .expect("write");
    let input = scratch("tile-input.npy");
    let array = cvm_formats::npy::NpyArray {
        shape: vec![4, 4],
        data: (0..16).collect(),
    };
    std::fs::write(&input, cvm_formats::npy::write_npy(&array)).expect("write");
    let output = native_run_in_address_space(
        524_288,
        &format!(
            "'{}' --input '{}' --json | wc -c",
            path_str(&model),
            path_str(&input)
        ),
    );
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    // 2^24 values of one or two digits, commas, and the envelope.
    let bytes: u64 = text(&output.stdout).trim().parse().expect("a byte count");
    assert!(bytes > 2 * (1 << 24), "{bytes} bytes");
    // Written as `.npy`, streamed too: in 320 MiB, the run's 128 MiB of tensors and the report's
    // copy of the output, but no encoded copy of the file.
    let npy = scratch("tile-output.npy");
    let output = native_run_in_address_space(
        327_680,
        &format!(
            "'{}' --input '{}' --output '{}'",
            path_str(&model),
            path_str(&input),
            path_str(&npy)
        ),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let written = std::fs::read(&npy).expect("the output file");
    let array = cvm_formats::npy::read_npy(&written).expect("an .npy file");
    assert_eq!(array.shape, [4096, 4096]);
    assert_eq!(&array.data[..6], &[0, 1, 2, 3, 0, 1]);
    let _ = std::fs::remove_file(&npy);
}

/// Time is bounded by gas: a valid `non_max_suppression` over 65,536 boxes costs about
/// 7.7 · 10^10 gas, far past the 2^33 one run may cost (about 6 s of wasm time), and is refused
/// when it loads, before any work, on both engines; without `--gas-limit` the limit is that
/// same maximum.
#[test]
fn a_model_dearer_than_one_run_may_cost_is_refused_before_it_runs() {
    use cvm_formats::npy::{NpyArray, write_npy};
    let model = scratch("nms-65536.json");
    std::fs::write(
        &model,
        r#"{"format": "cvm-text/1",
            "inputs": [{"name": "x", "shape": [1, 65536, 6], "precision": 16},
                       {"name": "v", "shape": [1], "precision": 8}],
            "nodes": [{"name": "y", "op": "non_max_suppression", "inputs": ["x", "v"]}],
            "outputs": ["y"]}"#,
    )
    .expect("write model");
    let boxes = scratch("nms-65536-x.npy");
    let valid = scratch("nms-65536-v.npy");
    let array = |shape: Vec<u32>, len: usize| {
        write_npy(&NpyArray {
            shape,
            data: vec![1; len],
        })
    };
    std::fs::write(&boxes, array(vec![1, 65536, 6], 65536 * 6)).expect("write x");
    std::fs::write(&valid, array(vec![1], 1)).expect("write v");
    let x = format!("x={}", path_str(&boxes));
    let v = format!("v={}", path_str(&valid));
    for engine in ["native", "wasm"] {
        let report = run_json(
            &[
                "run",
                path_str(&model),
                "--input",
                &x,
                "--input",
                &v,
                "--engine",
                engine,
                "--json",
            ],
            1,
        );
        assert_eq!(report["status"], "error", "{report}");
        assert_eq!(report["error"]["code"], "LimitExceeded", "{report}");
        assert_eq!(report["gas_used"], 0, "{report}");
        let message = report["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("more than the 8589934592 (2^33) one run may cost"),
            "{message}"
        );
    }
    let help = expect_status(&["run", "--help"], 0);
    assert!(help.contains("[default: 8589934592]"), "{help}");
}

/// An integer `.npy` input read from a pipe (`--input /dev/stdin`) runs as the same file does:
/// the file is read once, so nothing depends on opening it twice.
#[cfg(target_os = "linux")]
#[test]
fn an_integer_input_from_a_pipe_runs_as_the_file_does() {
    use std::io::Write;
    use std::process::Stdio;

    let model = cnn_model();
    let from_file = run_on_cnn_input(&model, &["--engine", "native"], 0);
    let mut child = Command::new(env!("CARGO_BIN_EXE_cvm"))
        .args([
            "run",
            path_str(&model),
            "--input",
            "/dev/stdin",
            "--json",
            "--engine",
            "native",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cvm starts");
    let bytes = std::fs::read(cnn_input()).expect("input");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&bytes)
        .expect("written");
    let output = child.wait_with_output().expect("cvm ends");
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let from_pipe: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    assert_eq!(from_pipe, from_file);
}

/// `--output` arguments that would write somewhere other than asked, or nothing, are usage
/// errors before any work: a directory (with or without a trailing separator, where several
/// outputs would land beside it), `--output-format cvm` without `--output`, and `--dequantize`
/// with `--output-format cvm`.
#[test]
fn output_arguments_that_would_write_elsewhere_or_nothing_are_usage_errors() {
    let model = cnn_model();
    let input = cnn_input();
    let dir = scratch("output-dir");
    std::fs::create_dir_all(&dir).unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["run", path_str(&model), "--input", path_str(&input)];
        args.extend_from_slice(extra);
        expect_status(&args, 2)
    };
    let with_separator = format!("{}/", path_str(&dir));
    for output in [path_str(&dir), with_separator.as_str()] {
        let said = run(&["--output", output]);
        assert!(said.contains("is a directory"), "{said}");
    }
    assert!(
        std::fs::read_dir(dir.parent().unwrap())
            .unwrap()
            .all(|entry| !entry
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with("_0.npy")),
        "nothing written beside the directory"
    );
    let said = run(&["--output-format", "cvm"]);
    assert!(said.contains("give --output FILE"), "{said}");
    let file = scratch("out.bin");
    let said = run(&[
        "--output-format",
        "cvm",
        "--output",
        path_str(&file),
        "--dequantize",
    ]);
    assert!(
        said.contains("does not apply to --output-format cvm"),
        "{said}"
    );
}

/// A file named `.json` is a text model whatever it holds: one that is not a JSON object, or
/// empty, is a malformed text model (exit status 2), not canonical bytes the engine rejects.
#[test]
fn a_json_file_that_is_no_object_is_a_malformed_text_model() {
    for (name, bytes) in [("list.json", &b"[1, 2]"[..]), ("empty.json", b"")] {
        let path = scratch(name);
        std::fs::write(&path, bytes).unwrap();
        let said = expect_status(&["run", path_str(&path)], 2);
        assert!(
            said.contains(name) && !said.contains("MalformedModel"),
            "{said}"
        );
    }
}
