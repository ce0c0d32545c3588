//! `cvm import <model.onnx>` and `cvm run` on what it writes: the files, the report, float
//! inputs quantized at the edge, the same outcome natively and in wasm, and exit status 2 with
//! the node and the reason for everything the importer refuses.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cvm_formats::npy::{NpyArray, read_npy, read_npy_f32, write_npy, write_npy_f32};
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn onnx(path: &str) -> String {
    root()
        .join("fixtures/onnx")
        .join(path)
        .display()
        .to_string()
}

fn cvm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cvm"))
        .args(args)
        .output()
        .expect("cvm starts")
}

/// Runs and checks the exit status; returns stdout and stderr together.
fn expect_status(args: &[&str], status: i32) -> String {
    let output = cvm(args);
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.status.code(), Some(status), "cvm {args:?}:\n{all}");
    assert!(!all.contains("panicked"), "cvm {args:?} panicked:\n{all}");
    all
}

fn json(args: &[&str]) -> Value {
    let output = cvm(args);
    assert_eq!(
        output.status.code(),
        Some(0),
        "cvm {args:?}:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON object")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cvm-onnx-import-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One sample of a float32 batch, written as a (1, …) .npy file.
fn sample(batch: &str, index: usize, target: &Path) {
    let batch = read_npy_f32(&std::fs::read(onnx(batch)).unwrap()).unwrap();
    let size = batch.data.len() / batch.shape[0] as usize;
    let mut shape = batch.shape.clone();
    shape[0] = 1;
    let data = &batch.data[index * size..(index + 1) * size];
    std::fs::write(target, write_npy_f32(&shape, data)).unwrap();
}

#[test]
fn digits_imports_and_runs_on_float_inputs_natively_and_in_wasm() {
    let dir = scratch("digits");
    let out = dir.join("model");
    let out_s = out.display().to_string();
    let report = json(&[
        "import",
        &onnx("digits/model.onnx"),
        "--calibrate",
        &onnx("digits/calibration.npy"),
        "-o",
        &out_s,
        "--json",
    ]);
    assert_eq!(report["gas"], 1_880_137);
    assert_eq!(report["calibration"]["samples"], 200);
    assert_eq!(report["calibration"]["agreement"]["same_argmax"], 200);
    assert_eq!(report["layers"].as_array().unwrap().len(), 5);
    for file in ["symbol", "params", "model.cvm", "quantization.json"] {
        assert!(out.join(file).is_file(), "{file} written");
    }

    // Image 2, a "2", as float32: the directory's quantization.json quantizes it.
    let image = dir.join("image_2.npy");
    sample("digits/images.npy", 2, &image);
    let image_s = image.display().to_string();
    let mut hashes = Vec::new();
    for engine in ["native", "wasm"] {
        let run = json(&[
            "run", &out_s, "--input", &image_s, "--engine", engine, "--json",
        ]);
        assert_eq!(run["gas_used"], 1_880_137, "{run}");
        hashes.push(run["hash"].as_str().unwrap().to_string());
    }
    // The canonical binary with the quantization named, too.
    let canonical = out.join("model.cvm").display().to_string();
    let quantization = out.join("quantization.json").display().to_string();
    let run = json(&[
        "run",
        &canonical,
        "--quantization",
        &quantization,
        "--input",
        &image_s,
        "--json",
    ]);
    hashes.push(run["hash"].as_str().unwrap().to_string());
    assert_eq!(
        hashes,
        vec!["a2c67f82cac5a79c349d5c29d5c2d76b3b28d36854c2722f8e73eec64de173d3"; 3]
    );

    // Dequantized outputs: float32 logits whose argmax is the label.
    let logits = dir.join("logits.npy");
    let logits_s = logits.display().to_string();
    expect_status(
        &[
            "run",
            &out_s,
            "--input",
            &image_s,
            "--output",
            &logits_s,
            "--dequantize",
        ],
        0,
    );
    let logits = read_npy_f32(&std::fs::read(&logits).unwrap()).unwrap();
    assert_eq!(logits.shape, vec![1, 10]);
    let labels = read_npy(&std::fs::read(onnx("digits/labels.npy")).unwrap()).unwrap();
    let best = (0..10)
        .max_by(|&a, &b| logits.data[a].total_cmp(&logits.data[b]))
        .unwrap();
    assert_eq!(best as i32, labels.data[2]);

    // A float input needs the quantization; an int8 input runs without it.
    let message = expect_status(&["run", &canonical, "--input", &image_s], 2);
    assert!(
        message.contains("needs the model's quantization"),
        "{message}"
    );
    let message = expect_status(
        &["run", &canonical, "--dequantize", "--output", &logits_s],
        2,
    );
    assert!(message.contains("--dequantize needs"), "{message}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn resnet_imports_and_runs_the_same_natively_and_in_wasm() {
    let dir = scratch("resnet");
    let out = dir.join("model").display().to_string();
    let report = expect_status(
        &[
            "import",
            &onnx("resnet/model.onnx"),
            "--calibrate",
            &onnx("resnet/calibration.npy"),
            "--validate",
            &onnx("resnet/inputs.npy"),
            "-o",
            &out,
        ],
        0,
    );
    assert!(report.contains("folded into"), "{report}");
    assert!(report.contains("validation set (64 samples)"), "{report}");
    let input = dir.join("input.npy");
    sample("resnet/inputs.npy", 5, &input);
    let input = input.display().to_string();
    let native = json(&[
        "run", &out, "--input", &input, "--engine", "native", "--json",
    ]);
    let wasm = json(&["run", &out, "--input", &input, "--json"]);
    assert_eq!(native["hash"], wasm["hash"]);
    assert_eq!(native["outputs"], wasm["outputs"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// PyTorch's TorchScript export with a dynamic batch and onnxruntime's QOperator model import
/// with no option, say what they took the batch as, and run the same natively and in wasm.
#[test]
fn pytorch_and_onnxruntime_exports_import_and_run_the_same_natively_and_in_wasm() {
    let dir = scratch("torch");
    let input = dir.join("input.npy");
    sample("torch/validation.npy", 3, &input);
    let input = input.display().to_string();
    for model in ["cnn_legacy_dynamic", "cnn_qoperator_uint8"] {
        let out = dir.join(model).display().to_string();
        let report = expect_status(
            &[
                "import",
                &onnx(&format!("torch/{model}.onnx")),
                "--calibrate",
                &onnx("torch/calibration.npy"),
                "-o",
                &out,
            ],
            0,
        );
        assert!(
            report.contains("axis 0 (\"batch\") taken as a batch of 1"),
            "{report}"
        );
        let native = json(&[
            "run", &out, "--input", &input, "--engine", "native", "--json",
        ]);
        let wasm = json(&["run", &out, "--input", &input, "--json"]);
        assert_eq!(native["status"], "ok", "{model}");
        assert_eq!(native["hash"], wasm["hash"], "{model}");
    }
    // --input-shape: checked against the model, and malformed values are usage errors.
    let out = dir.join("shaped").display().to_string();
    let cnn = onnx("torch/cnn_legacy_dynamic.onnx");
    let calibration = onnx("torch/calibration.npy");
    let message = expect_status(
        &[
            "import",
            &cnn,
            "--calibrate",
            &calibration,
            "--input-shape",
            "data=1,1,9,8",
            "-o",
            &out,
        ],
        2,
    );
    assert!(
        message.contains("axis 2 is 9, but the file fixes it at 8"),
        "{message}"
    );
    let message = expect_status(
        &[
            "import",
            &cnn,
            "--calibrate",
            &calibration,
            "--input-shape",
            "data=1,x",
            "-o",
            &out,
        ],
        2,
    );
    assert!(message.contains("not a dimension"), "{message}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A vision transformer exported by both of PyTorch's exporters imports with no option to a
/// model of the engine's own operators: the directory holds `model.cvm` and
/// `quantization.json` only, `cvm run DIR` and `cvm estimate DIR` read it, and the outcome is
/// the same natively and in wasm.
#[test]
fn transformer_imports_to_model_cvm_and_runs_the_same_natively_and_in_wasm() {
    let dir = scratch("vit");
    let input = dir.join("input.npy");
    sample("torch/validation.npy", 5, &input);
    let input = input.display().to_string();
    for model in ["vit_dynamo", "vit_legacy", "vit_opset14"] {
        let out = dir.join(model);
        // What an earlier import of another model left goes: the directory holds one model.
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("symbol"), b"{}").unwrap();
        std::fs::write(out.join("params"), b"").unwrap();
        let out_text = out.display().to_string();
        let report = expect_status(
            &[
                "import",
                &onnx(&format!("vit/{model}.onnx")),
                "--calibrate",
                &onnx("torch/calibration.npy"),
                "-o",
                &out_text,
            ],
            0,
        );
        assert!(report.contains("written as model.cvm only"), "{report}");
        let mut files: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        assert_eq!(files, ["model.cvm", "quantization.json"], "{model}");
        let native = json(&[
            "run", &out_text, "--input", &input, "--engine", "native", "--json",
        ]);
        let wasm = json(&["run", &out_text, "--input", &input, "--json"]);
        assert_eq!(native["status"], "ok", "{model}");
        assert_eq!(native["hash"], wasm["hash"], "{model}");
        assert_eq!(native["outputs"], wasm["outputs"], "{model}");
        let estimate = json(&["estimate", &out_text, "--json"]);
        assert_eq!(estimate["total_gas"], native["gas_used"], "{model}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A character-level causal LM exported by both of PyTorch's exporters takes int64 token ids:
/// calibrated on an integer `.npy`, run on a window of ids, per-token logits out, the same
/// outcome natively and in wasm.
#[test]
fn causal_lm_takes_token_ids_and_runs_the_same_natively_and_in_wasm() {
    let dir = scratch("charlm");
    let ids = read_npy(&std::fs::read(onnx("charlm/validation_ids.npy")).unwrap()).unwrap();
    let context = ids.shape[1];
    let window = NpyArray {
        shape: vec![1, context],
        data: ids.data[..context as usize].to_vec(),
    };
    let input = dir.join("ids.npy");
    std::fs::write(&input, write_npy(&window)).unwrap();
    let input = input.display().to_string();
    let mut hashes = Vec::new();
    for model in ["charlm_dynamo", "charlm_legacy"] {
        let out = dir.join(model).display().to_string();
        expect_status(
            &[
                "import",
                &onnx(&format!("charlm/{model}.onnx")),
                "--calibrate",
                &onnx("charlm/calibration_ids.npy"),
                "-o",
                &out,
            ],
            0,
        );
        let native = json(&[
            "run", &out, "--input", &input, "--engine", "native", "--json",
        ]);
        let wasm = json(&["run", &out, "--input", &input, "--json"]);
        assert_eq!(native["status"], "ok", "{model}");
        assert_eq!(native["hash"], wasm["hash"], "{model}");
        assert_eq!(native["outputs"], wasm["outputs"], "{model}");
        hashes.push(native["hash"].clone());
    }
    // Both exports are the same integer model.
    assert_eq!(hashes[0], hashes[1]);
    // With SmoothQuant and a validation set of next characters, the report counts positions.
    let smoothed = dir.join("smoothed").display().to_string();
    let report = json(&[
        "import",
        &onnx("charlm/charlm_dynamo.onnx"),
        "--calibrate",
        &onnx("charlm/calibration_ids.npy"),
        "--validate",
        &onnx("charlm/validation_ids.npy"),
        "--labels",
        &onnx("charlm/validation_targets.npy"),
        "--smooth",
        "--json",
        "-o",
        &smoothed,
    ]);
    let notes = report["notes"].as_array().unwrap();
    assert!(
        notes
            .iter()
            .any(|n| n.as_str().unwrap().contains("SmoothQuant moved the scales")),
        "{notes:?}"
    );
    let validation = &report["validation"];
    let windows = ids.shape[0] as u64;
    assert_eq!(validation["samples"], windows);
    assert_eq!(validation["positions"], windows * u64::from(context));
    let same = validation["same_argmax"].as_u64().unwrap();
    assert!(
        same * 100 >= windows * u64::from(context) * 93,
        "{validation}"
    );
    assert!(
        validation["integer_correct"].as_u64().unwrap() > 0,
        "{validation}"
    );
    // An id outside the vocabulary, which the engine would clip to the table's last row, is
    // refused before the run, alone and in a batch, naming the file, the input and the value.
    let model = dir.join("charlm_dynamo").display().to_string();
    let quantization =
        std::fs::read_to_string(dir.join("charlm_dynamo/quantization.json")).unwrap();
    let vocabulary = std::fs::read_to_string(onnx("charlm/vocabulary.txt"))
        .unwrap()
        .lines()
        .count();
    assert!(
        quantization.contains(&format!("{{\"token_ids\": {vocabulary}}}")),
        "{quantization}"
    );
    let mut outside = window.clone();
    outside.data[3] = vocabulary as i32;
    let file = dir.join("outside.npy");
    std::fs::write(&file, write_npy(&outside)).unwrap();
    let file = file.display().to_string();
    let stderr = expect_status(&["run", &model, "--input", &file], 2);
    assert!(
        stderr.contains(&format!(
            "outside.npy (input \"ids\"): value {vocabulary} at index 3 is not a token id \
             (an integer from 0 to {})",
            vocabulary - 1
        )),
        "{stderr}"
    );
    let mut batch = ids.clone();
    let at = 2 * context as usize + 5;
    batch.data[at] = -1;
    let file = dir.join("batch.npy");
    std::fs::write(&file, write_npy(&batch)).unwrap();
    let file = file.display().to_string();
    let stderr = expect_status(&["run", &model, "--input", &file, "--batch"], 2);
    assert!(
        stderr.contains("batch.npy sample 2 (input \"ids\"): value -1 at index 5"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A sentence encoder of three integer inputs, calibrated with one `NAME=FILE` per input, runs
/// on named inputs with the same outcome natively and in wasm.
#[test]
fn sentence_encoder_takes_named_inputs_and_runs_the_same_natively_and_in_wasm() {
    let dir = scratch("encoder");
    let names = ["input_ids", "token_type_ids", "attention_mask"];
    let mut inputs = Vec::new();
    for name in names {
        let path = onnx(&format!("encoder/validation_{name}.npy"));
        let set = read_npy(&std::fs::read(path).unwrap()).unwrap();
        let context = set.shape[1];
        let first = NpyArray {
            shape: vec![1, context],
            data: set.data[..context as usize].to_vec(),
        };
        let file = dir.join(format!("{name}.npy"));
        std::fs::write(&file, write_npy(&first)).unwrap();
        inputs.push(format!("{name}={}", file.display()));
    }
    for model in ["encoder_dynamo", "encoder_legacy"] {
        let out = dir.join(model).display().to_string();
        let mut args = vec![
            "import".to_string(),
            onnx(&format!("encoder/{model}.onnx")),
            "-o".into(),
            out.clone(),
        ];
        for name in names {
            args.push("--calibrate".into());
            args.push(format!(
                "{name}={}",
                onnx(&format!("encoder/calibration_{name}.npy"))
            ));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        expect_status(&args, 0);
        let mut run = vec!["run", &out, "--json"];
        for input in &inputs {
            run.extend(["--input", input]);
        }
        let wasm = json(&run);
        run.extend(["--engine", "native"]);
        let native = json(&run);
        assert_eq!(native["status"], "ok", "{model}");
        assert_eq!(native["hash"], wasm["hash"], "{model}");
        assert_eq!(native["outputs"], wasm["outputs"], "{model}");
    }
    // A mask value other than 0 and 1 is refused naming the input.
    let set =
        read_npy(&std::fs::read(onnx("encoder/validation_attention_mask.npy")).unwrap()).unwrap();
    let context = set.shape[1] as usize;
    let mut mask = NpyArray {
        shape: vec![1, context as u32],
        data: set.data[..context].to_vec(),
    };
    mask.data[0] = 2;
    let file = dir.join("mask.npy");
    std::fs::write(&file, write_npy(&mask)).unwrap();
    let mut run = vec![
        "run".to_string(),
        dir.join("encoder_dynamo").display().to_string(),
    ];
    for input in &inputs[..2] {
        run.extend(["--input".into(), input.clone()]);
    }
    run.extend([
        "--input".into(),
        format!("attention_mask={}", file.display()),
    ]);
    let run: Vec<&str> = run.iter().map(String::as_str).collect();
    let stderr = expect_status(&run, 2);
    assert!(
        stderr.contains(
            "mask.npy (input \"attention_mask\"): value 2 at index 0 is not an attention mask \
             value (0 or 1)"
        ),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn refusals_exit_2_with_the_node_and_the_reason() {
    let dir = scratch("refusals");
    let out = dir.join("model").display().to_string();
    let calibration = onnx("digits/calibration.npy");
    let cases: [(&str, &str, &[&str]); 5] = [
        (
            "bad/unsupported.onnx",
            &calibration,
            &["node 1 \"sin_0\" (Sin)", "operator Sin is not supported"],
        ),
        (
            "bad/dynamic.onnx",
            &calibration,
            &["shape [200, 1, 28, 28]", "(N, 1, 4, 4)"],
        ),
        ("bad/truncated.onnx", &calibration, &["not an ONNX model"]),
        ("bad/garbage.onnx", &calibration, &["not an ONNX model"]),
        (
            "resnet/model.onnx",
            &calibration,
            &[
                "calibration.npy",
                "shape [200, 1, 28, 28]",
                "(N, 3, 16, 16)",
            ],
        ),
    ];
    for (model, calibrate, expected) in cases {
        let message = expect_status(
            &["import", &onnx(model), "--calibrate", calibrate, "-o", &out],
            2,
        );
        for part in expected {
            assert!(message.contains(part), "{model}: {message}");
        }
    }
    let message = expect_status(&["import", &onnx("digits/model.onnx"), "-o", &out], 2);
    assert!(message.contains("needs --calibrate"), "{message}");
    let labels = onnx("digits/labels.npy");
    let message = expect_status(
        &[
            "import",
            &onnx("digits/model.onnx"),
            "--calibrate",
            &labels,
            "-o",
            &out,
        ],
        2,
    );
    assert!(message.contains("not float32"), "{message}");
    assert!(!Path::new(&out).exists(), "nothing written on a refusal");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Mistakes in the arguments are told before the model is read or calibrated: `--labels`
/// without `--validate`, `-o` naming a file, an undefined schedule (the engine's
/// `UnsupportedVersion` outcome, as for any model); a missing model file is named once.
#[test]
fn argument_mistakes_are_told_before_calibration() {
    let dir = scratch("arguments");
    let model = onnx("digits/model.onnx");
    let calibrate = onnx("digits/calibration.npy");
    let out = dir.join("out");
    let out = out.to_str().unwrap();
    let labels = onnx("digits/labels.npy");
    let import = |extra: &[&str], status: i32| {
        let mut args = vec!["import", &model, "--calibrate", &calibrate];
        args.extend_from_slice(extra);
        expect_status(&args, status)
    };
    let said = import(&["-o", out, "--labels", &labels], 2);
    assert!(said.contains("--labels needs --validate"), "{said}");
    let file = dir.join("a-file");
    std::fs::write(&file, b"").unwrap();
    let said = import(&["-o", file.to_str().unwrap()], 2);
    assert!(said.contains("exists and is not a directory"), "{said}");
    let said = import(&["-o", out, "--schedule", "4000000"], 1);
    assert!(said.contains("UnsupportedVersion (101)"), "{said}");
    assert!(!Path::new(out).exists(), "nothing written");
    let missing = dir.join("missing.onnx");
    let missing = missing.to_str().unwrap();
    let said = expect_status(
        &["import", missing, "--calibrate", &calibrate, "-o", out],
        2,
    );
    assert_eq!(said.matches("missing.onnx").count(), 1, "{said}");
}

/// A float model x[1, 4] → Gemm → Relu → Gemm → y[1, 2] whose weights are external data, as
/// PyTorch's exporter writes them: one `model.onnx.data` beside the model, each tensor a range
/// of it. Returns the model with its tensors external, and the same model with them inline.
fn external_mlp(dir: &Path) -> (Vec<u8>, Vec<u8>) {
    use cvm_onnx::proto::attribute_proto::AttributeType;
    use cvm_onnx::proto::tensor_shape_proto::{Dimension, dimension};
    use cvm_onnx::proto::type_proto::{Tensor as TensorType, Value};
    use cvm_onnx::proto::{
        AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
        StringStringEntryProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
    };
    use prost::Message;

    let info = |name: &str, dims: &[i64]| ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(Value::TensorType(TensorType {
                elem_type: Some(1),
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&size| Dimension {
                            value: Some(dimension::Value::DimValue(size)),
                        })
                        .collect(),
                }),
            })),
        }),
    };
    let gemm = |name: &str, inputs: [&str; 3], output: &str| NodeProto {
        name: Some(name.into()),
        op_type: Some("Gemm".into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.into()],
        attribute: vec![AttributeProto {
            name: Some("transB".into()),
            r#type: Some(AttributeType::Int as i32),
            i: Some(1),
            ..Default::default()
        }],
        ..Default::default()
    };
    let weights: [(&str, Vec<i64>, Vec<f32>); 4] = [
        (
            "fc1.weight",
            vec![3, 4],
            (0..12i16).map(|i| f32::from(i - 6)).collect(),
        ),
        ("fc1.bias", vec![3], vec![0.5, -0.25, 1.0]),
        ("fc2.weight", vec![2, 3], (0..6i16).map(f32::from).collect()),
        ("fc2.bias", vec![2], vec![-1.0, 1.5]),
    ];
    let mut data = Vec::new();
    let mut inline = Vec::new();
    let mut external = Vec::new();
    for (name, dims, values) in weights {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let tensor = TensorProto {
            name: Some(name.into()),
            data_type: Some(1),
            dims,
            ..Default::default()
        };
        let entry = |key: &str, value: String| StringStringEntryProto {
            key: Some(key.into()),
            value: Some(value),
        };
        external.push(TensorProto {
            data_location: Some(1),
            external_data: vec![
                entry("location", "model.onnx.data".into()),
                entry("offset", data.len().to_string()),
                entry("length", bytes.len().to_string()),
            ],
            ..tensor.clone()
        });
        data.extend_from_slice(&bytes);
        inline.push(TensorProto {
            raw_data: Some(bytes),
            ..tensor
        });
    }
    std::fs::write(dir.join("model.onnx.data"), &data).unwrap();
    let model = |initializer: Vec<TensorProto>| {
        ModelProto {
            ir_version: Some(8),
            opset_import: vec![OperatorSetIdProto {
                domain: Some(String::new()),
                version: Some(13),
            }],
            producer_name: Some("onnx_import.rs".into()),
            producer_version: Some("1".into()),
            graph: Some(GraphProto {
                name: Some("mlp".into()),
                node: vec![
                    gemm("fc1", ["x", "fc1.weight", "fc1.bias"], "h"),
                    NodeProto {
                        op_type: Some("Relu".into()),
                        input: vec!["h".into()],
                        output: vec!["r".into()],
                        ..Default::default()
                    },
                    gemm("fc2", ["r", "fc2.weight", "fc2.bias"], "y"),
                ],
                initializer,
                input: vec![info("x", &[1, 4])],
                output: vec![info("y", &[1, 2])],
                ..Default::default()
            }),
        }
        .encode_to_vec()
    };
    (model(external), model(inline))
}

/// A model with external weights imports to the same files as with them inline; a location
/// that leaves the model's directory, or a range past the data file's end, is refused with
/// exit status 2 naming the tensor.
#[test]
fn external_data_imports_and_hostile_locations_exit_2() {
    let dir = scratch("external");
    let models = dir.join("models");
    std::fs::create_dir_all(&models).unwrap();
    let (external, inline) = external_mlp(&models);
    let calibration = dir.join("calibration.npy");
    let samples: Vec<f32> = (0..32i16).map(|i| f32::from((i * 5) % 9 - 4)).collect();
    std::fs::write(&calibration, write_npy_f32(&[8, 4], &samples)).unwrap();
    let calibration = calibration.display().to_string();
    let import = |model: &Path, out: &Path, status: i32| {
        expect_status(
            &[
                "import",
                model.to_str().unwrap(),
                "--calibrate",
                &calibration,
                "-o",
                out.to_str().unwrap(),
            ],
            status,
        )
    };
    let external_path = models.join("model.onnx");
    std::fs::write(&external_path, &external).unwrap();
    let inline_path = dir.join("inline.onnx");
    std::fs::write(&inline_path, &inline).unwrap();
    import(&external_path, &dir.join("from-external"), 0);
    import(&inline_path, &dir.join("from-inline"), 0);
    for file in ["symbol", "params", "model.cvm", "quantization.json"] {
        assert_eq!(
            std::fs::read(dir.join("from-external").join(file)).unwrap(),
            std::fs::read(dir.join("from-inline").join(file)).unwrap(),
            "{file}"
        );
    }

    // Hostile copies of the model: the same bytes with the data file's location or offset
    // changed (every replacement keeps the encoded lengths).
    let hostile = |from: &str, to: &str| {
        let (from, to) = (from.as_bytes(), to.as_bytes());
        assert_eq!(from.len(), to.len());
        let at = external
            .windows(from.len())
            .position(|window| window == from)
            .unwrap();
        let mut bytes = external.clone();
        bytes[at..at + to.len()].copy_from_slice(to);
        let path = models.join("hostile.onnx");
        std::fs::write(&path, bytes).unwrap();
        path
    };
    let out = dir.join("refused");
    let said = import(&hostile("model.onnx.data", "../onnx.data.xy"), &out, 2);
    assert!(said.contains("initializer \"fc1.weight\""), "{said}");
    assert!(said.contains("has the component \"..\""), "{said}");
    let said = import(
        &hostile("model.onnx.data", "/dev/zero\0\0\0\0\0\0"),
        &out,
        2,
    );
    assert!(said.contains("initializer \"fc1.weight\""), "{said}");
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(dir.join("calibration.npy"), models.join("escape.onnx.dat"))
            .unwrap();
        let said = import(&hostile("model.onnx.data", "escape.onnx.dat"), &out, 2);
        assert!(said.contains("initializer \"fc1.weight\""), "{said}");
        assert!(said.contains("outside the model's directory"), "{said}");
    }
    // fc2.bias is the last range, at offset 84: moved to 88, its 8 bytes run past the file's end.
    let said = import(&hostile("\x12\x0284", "\x12\x0288"), &out, 2);
    assert!(said.contains("initializer \"fc2.bias\""), "{said}");
    assert!(
        said.contains("runs past the end of \"model.onnx.data\""),
        "{said}"
    );
    let said = import(&hostile("model.onnx.data", "missing.onnx.da"), &out, 2);
    assert!(said.contains("initializer \"fc1.weight\""), "{said}");
    assert!(said.contains("cannot be read"), "{said}");
    assert!(!out.exists(), "nothing written on a refusal");
    let _ = std::fs::remove_dir_all(&dir);
}
