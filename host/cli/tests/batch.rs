//! `cvm run --batch`: every sample of an (N, …) array through one loaded model. Per sample, the
//! hash line and the stacked outputs must equal those of a `cvm run` of that sample alone, the
//! same natively and in wasm; failing samples are recorded (exit 1) and the batch goes on;
//! shapes and labels that do not fit are usage errors (exit 2) naming what and where.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cvm_formats::npy::{NpyArray, read_npy, read_npy_f32, write_npy, write_npy_f32};
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn digits() -> PathBuf {
    root().join("fixtures/models/digits")
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn cvm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cvm"))
        .args(args)
        .env(
            "CVM_CACHE_DIR",
            std::env::temp_dir().join("cvm-batch-tests-cache"),
        )
        .output()
        .expect("cvm starts")
}

/// Runs and checks the exit status; returns stdout, and stderr.
fn expect_status(args: &[&str], status: i32) -> (String, String) {
    let output = cvm(args);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(
        output.status.code(),
        Some(status),
        "cvm {args:?}:\n{stdout}{stderr}"
    );
    assert!(
        !stderr.contains("panicked"),
        "cvm {args:?} panicked:\n{stderr}"
    );
    (stdout, stderr)
}

fn json(args: &[&str], status: i32) -> Value {
    let (stdout, _) = expect_status(args, status);
    serde_json::from_str(&stdout).expect("one JSON object")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cvm-batch-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn npy(path: &Path) -> NpyArray {
    read_npy(&std::fs::read(path).unwrap()).unwrap()
}

/// Rows `indices` of an integer array, as an (indices.len(), …) array.
fn rows(array: &NpyArray, indices: &[usize]) -> NpyArray {
    let size = array.data.len() / array.shape[0] as usize;
    let mut shape = array.shape.clone();
    shape[0] = indices.len() as u32;
    NpyArray {
        shape,
        data: indices
            .iter()
            .flat_map(|&i| array.data[i * size..(i + 1) * size].iter().copied())
            .collect(),
    }
}

/// One line of a hash file: index, status, gas, hash.
fn hash_lines(path: &Path) -> Vec<[String; 4]> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| {
            let fields: Vec<String> = line.split(' ').map(String::from).collect();
            fields.try_into().unwrap_or_else(|f| panic!("{f:?}"))
        })
        .collect()
}

/// Runs the batch natively and in wasm with `extra` arguments and `--hashes`; the two hash
/// files must be identical. Returns the wasm run's JSON summary and the hash lines.
fn batch_both(
    model: &str,
    inputs: &[&str],
    extra: &[&str],
    dir: &Path,
    status: i32,
) -> (Value, Vec<[String; 4]>) {
    let mut files = Vec::new();
    let mut summary = Value::Null;
    for engine in ["native", "wasm"] {
        let hashes = dir.join(format!("hashes_{engine}.txt"));
        let mut args = vec!["run", model, "--batch", "--engine", engine, "--json"];
        for input in inputs {
            args.extend(["--input", input]);
        }
        args.extend(["--hashes", s(&hashes)]);
        args.extend(extra);
        summary = json(&args, status);
        assert_eq!(summary["engine"], engine);
        files.push(std::fs::read(&hashes).unwrap());
    }
    assert_eq!(files[0], files[1], "native and wasm hash files differ");
    (summary, hash_lines(&dir.join("hashes_wasm.txt")))
}

/// `cvm run` of one sample: its JSON report.
fn single(model: &str, inputs: &[&str], extra: &[&str], engine: &str) -> Value {
    let mut args = vec!["run", model, "--engine", engine, "--json"];
    for input in inputs {
        args.extend(["--input", input]);
    }
    args.extend(extra);
    let output = cvm(&args);
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("cvm {args:?}: {}", String::from_utf8_lossy(&output.stderr)))
}

fn argmax(values: &[i32]) -> usize {
    let mut best = 0;
    for (index, &value) in values.iter().enumerate() {
        if value > values[best] {
            best = index;
        }
    }
    best
}

#[test]
fn digits_samples_equal_single_runs_natively_and_in_wasm() {
    let dir = scratch("digits");
    let all = npy(&digits().join("inputs.npy"));
    let labels = npy(&digits().join("labels.npy"));
    let indices: Vec<usize> = (0..24).map(|i| i * 37).collect();
    let batch = dir.join("batch.npy");
    std::fs::write(&batch, write_npy(&rows(&all, &indices))).unwrap();
    let label_file = dir.join("labels.npy");
    std::fs::write(&label_file, write_npy(&rows(&labels, &indices))).unwrap();
    let outputs = dir.join("logits.npy");

    let model = s(&digits()).to_string();
    let (summary, lines) = batch_both(
        &model,
        &[s(&batch)],
        &["--output", s(&outputs), "--labels", s(&label_file)],
        &dir,
        0,
    );
    assert_eq!(summary["samples"], 24);
    assert_eq!(summary["ok"], 24);
    assert_eq!(summary["failed"], 0);
    assert_eq!(summary["gas"]["total"], 24 * 1_762_167);
    assert_eq!(summary["gas"]["min"], 1_762_167);
    assert_eq!(summary["gas"]["max"], 1_762_167);
    let logits = npy(&outputs);
    assert_eq!(logits.shape, vec![24, 10]);
    let predictions = npy(&digits().join("int_predictions.npy"));
    let correct = indices
        .iter()
        .enumerate()
        .filter(|&(row, &index)| {
            let predicted = argmax(&logits.data[row * 10..(row + 1) * 10]);
            assert_eq!(predicted as i32, predictions.data[index], "image {index}");
            predicted as i32 == labels.data[index]
        })
        .count();
    assert_eq!(summary["accuracy"]["correct"], correct);
    assert_eq!(summary["accuracy"]["samples"], 24);

    // A few samples alone, on both engines: the same hash line and output row.
    for row in [0, 7, 23] {
        let sample = dir.join(format!("sample_{row}.npy"));
        std::fs::write(&sample, write_npy(&rows(&all, &[indices[row]]))).unwrap();
        for engine in ["native", "wasm"] {
            let alone = single(&model, &[s(&sample)], &[], engine);
            assert_eq!(lines[row][0], row.to_string());
            assert_eq!(lines[row][1], "ok");
            assert_eq!(lines[row][2], alone["gas_used"].to_string());
            assert_eq!(lines[row][3], alone["hash"].as_str().unwrap());
            let data: Vec<i32> = alone["outputs"][0]["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap() as i32)
                .collect();
            assert_eq!(
                data,
                logits.data[row * 10..(row + 1) * 10],
                "{engine} {row}"
            );
        }
    }

    // The text summary names the accuracy; nothing is drawn on a stderr that is no terminal.
    let (stdout, stderr) = expect_status(
        &[
            "run",
            &model,
            "--input",
            s(&batch),
            "--batch",
            "--labels",
            s(&label_file),
        ],
        0,
    );
    assert!(
        stdout.starts_with("samples:  24 (24 ok, 0 failed)\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("gas:      42292008 in all, 1762167 per sample\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("accuracy: {correct}/24 (")),
        "{stdout}"
    );
    assert!(stdout.contains(" ms per sample ("), "{stdout}");
    assert!(stderr.is_empty(), "{stderr}");
}

#[test]
fn all_digits_natively_give_the_reference_accuracy() {
    let dir = scratch("all");
    let outputs = dir.join("logits.npy");
    let hashes = dir.join("hashes.txt");
    let (stdout, _) = expect_status(
        &[
            "run",
            s(&digits()),
            "--input",
            s(&digits().join("inputs.npy")),
            "--batch",
            "--engine",
            "native",
            "--labels",
            s(&digits().join("labels.npy")),
            "--output",
            s(&outputs),
            "--hashes",
            s(&hashes),
        ],
        0,
    );
    assert!(
        stdout.contains("samples:  1797 (1797 ok, 0 failed)\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("accuracy: 1151/1797 (64.05 %)\n"),
        "{stdout}"
    );
    let logits = npy(&outputs);
    assert_eq!(logits.shape, vec![1797, 10]);
    let predictions = npy(&digits().join("int_predictions.npy"));
    for (index, row) in logits.data.chunks(10).enumerate() {
        assert_eq!(argmax(row) as i32, predictions.data[index], "image {index}");
    }
    let lines = hash_lines(&hashes);
    assert_eq!(lines.len(), 1797);
    // Image 2 is the README's: its hash is the one `cvm run` prints there.
    assert_eq!(
        lines[2][3],
        "9c8892999a4d0c1cf7f24f171ee1ed3323ff967e4291607f3c73410a2b310058"
    );
}

#[test]
fn imported_model_quantizes_float_batches_as_single_runs_do() {
    let dir = scratch("onnx");
    let imported = dir.join("model");
    let onnx = root().join("fixtures/onnx/digits");
    expect_status(
        &[
            "import",
            s(&onnx.join("model.onnx")),
            "--calibrate",
            s(&onnx.join("calibration.npy")),
            "-o",
            s(&imported),
        ],
        0,
    );
    let images = read_npy_f32(&std::fs::read(onnx.join("images.npy")).unwrap()).unwrap();
    assert_eq!(images.shape, vec![1797, 1, 28, 28]);
    let size = 28 * 28;
    let samples = 20;
    let batch = dir.join("images.npy");
    std::fs::write(
        &batch,
        write_npy_f32(
            &[samples, 1, 28, 28],
            &images.data[..samples as usize * size],
        ),
    )
    .unwrap();
    let labels = npy(&onnx.join("labels.npy"));
    let label_file = dir.join("labels.npy");
    std::fs::write(
        &label_file,
        write_npy(&rows(&labels, &(0..20).collect::<Vec<_>>())),
    )
    .unwrap();
    let outputs = dir.join("logits.npy");
    let model = s(&imported).to_string();
    let (summary, lines) = batch_both(
        &model,
        &[s(&batch)],
        &[
            "--output",
            s(&outputs),
            "--dequantize",
            "--labels",
            s(&label_file),
        ],
        &dir,
        0,
    );
    assert_eq!(summary["ok"], 20);
    assert_eq!(summary["gas"]["min"], 1_880_137);
    let logits = read_npy_f32(&std::fs::read(&outputs).unwrap()).unwrap();
    assert_eq!(logits.shape, vec![20, 10]);
    let correct = (0..20)
        .filter(|&row| {
            let values = &logits.data[row * 10..(row + 1) * 10];
            let best = (0..10).fold(0, |best, i| if values[i] > values[best] { i } else { best });
            best as i32 == labels.data[row]
        })
        .count();
    assert_eq!(summary["accuracy"]["correct"], correct);

    for row in [2usize, 19] {
        let sample = dir.join(format!("image_{row}.npy"));
        std::fs::write(
            &sample,
            write_npy_f32(&[1, 1, 28, 28], &images.data[row * size..(row + 1) * size]),
        )
        .unwrap();
        let single_logits = dir.join(format!("logits_{row}.npy"));
        for engine in ["native", "wasm"] {
            let alone = single(
                &model,
                &[s(&sample)],
                &["--output", s(&single_logits), "--dequantize"],
                engine,
            );
            assert_eq!(
                lines[row][3],
                alone["hash"].as_str().unwrap(),
                "{engine} {row}"
            );
            let one = read_npy_f32(&std::fs::read(&single_logits).unwrap()).unwrap();
            assert_eq!(
                one.data,
                logits.data[row * 10..(row + 1) * 10],
                "{engine} {row}"
            );
        }
    }
    // The hash of image 2 is the one `onnx_import.rs` pins for a single run.
    assert_eq!(
        lines[2][3],
        "a2c67f82cac5a79c349d5c29d5c2d76b3b28d36854c2722f8e73eec64de173d3"
    );
}

#[test]
fn failing_samples_are_recorded_and_the_batch_goes_on() {
    let dir = scratch("failing");
    let all = npy(&digits().join("inputs.npy"));
    let mut batch = rows(&all, &[0, 1, 2, 3, 4, 5]);
    // Sample 3 holds a value beyond the input's precision (8 bits): an input error of its own.
    batch.data[3 * 784 + 100] = 300;
    let file = dir.join("batch.npy");
    std::fs::write(&file, write_npy(&batch)).unwrap();
    let outputs = dir.join("logits.npy");
    let model = s(&digits()).to_string();
    let (summary, lines) = batch_both(&model, &[s(&file)], &["--output", s(&outputs)], &dir, 1);
    assert_eq!(summary["ok"], 5);
    assert_eq!(summary["failed"], 1);
    assert_eq!(lines.len(), 6);
    assert_eq!(
        lines[3][1],
        summary["failures"]
            .as_object()
            .unwrap()
            .keys()
            .next()
            .unwrap()
            .as_str()
    );
    assert_eq!(lines.iter().filter(|l| l[1] == "ok").count(), 5);
    let logits = npy(&outputs);
    assert_eq!(logits.shape, vec![6, 10]);
    assert_eq!(
        logits.data[30..40],
        [0; 10],
        "a failed sample's row is zeros"
    );
    let sample = dir.join("sample_3.npy");
    std::fs::write(&sample, write_npy(&rows(&batch, &[3]))).unwrap();
    let alone = single(&model, &[s(&sample)], &[], "wasm");
    assert_eq!(alone["status"], "error");
    assert_eq!(lines[3][1], alone["error"]["code"].as_str().unwrap());
    assert_eq!(lines[3][2], alone["gas_used"].to_string());
    assert_eq!(lines[3][3], alone["hash"].as_str().unwrap());

    // Both kinds at once, counted by code.
    let (stdout, _) = expect_status(
        &[
            "run",
            &model,
            "--input",
            s(&file),
            "--batch",
            "--gas-limit",
            "5000",
        ],
        1,
    );
    assert!(
        stdout.starts_with("samples:  6 (0 ok, 6 failed: 1 InputPrecision, 5 OutOfGas)\n"),
        "{stdout}"
    );

    // A gas limit no sample fits: every sample out of gas, every one recorded.
    let clean = dir.join("clean.npy");
    std::fs::write(&clean, write_npy(&rows(&all, &[0, 1, 2, 3, 4, 5]))).unwrap();
    let hashes = dir.join("out_of_gas.txt");
    let (stdout, _) = expect_status(
        &[
            "run",
            &model,
            "--input",
            s(&clean),
            "--batch",
            "--gas-limit",
            "5000",
            "--hashes",
            s(&hashes),
        ],
        1,
    );
    assert!(
        stdout.starts_with("samples:  6 (0 ok, 6 failed: 6 OutOfGas)\n"),
        "{stdout}"
    );
    let lines = hash_lines(&hashes);
    assert_eq!(lines.len(), 6);
    let sample = dir.join("sample_0.npy");
    std::fs::write(&sample, write_npy(&rows(&all, &[0]))).unwrap();
    let alone = single(&model, &[s(&sample)], &["--gas-limit", "5000"], "native");
    for (index, line) in lines.iter().enumerate() {
        assert_eq!(line[0], index.to_string());
        assert_eq!(line[1], "OutOfGas");
    }
    assert_eq!(lines[0][3], alone["hash"].as_str().unwrap());
}

#[test]
fn several_inputs_and_outputs_by_name() {
    let dir = scratch("two");
    let model = dir.join("two.json");
    std::fs::write(
        &model,
        r#"{"format": "cvm-text/1",
            "inputs": [{"name": "a", "shape": [1, 4], "precision": 8},
                       {"name": "b", "shape": [1, 4], "precision": 8}],
            "nodes": [{"name": "sum", "op": "elemwise_add", "inputs": ["a", "b"]},
                      {"name": "r", "op": "relu", "inputs": ["a"]}],
            "outputs": ["sum", "r"]}"#,
    )
    .unwrap();
    let a = NpyArray {
        shape: vec![3, 4],
        data: vec![1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12],
    };
    let b = NpyArray {
        shape: vec![3, 4],
        data: vec![10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120],
    };
    let (a_file, b_file) = (dir.join("a.npy"), dir.join("b.npy"));
    std::fs::write(&a_file, write_npy(&a)).unwrap();
    std::fs::write(&b_file, write_npy(&b)).unwrap();
    let out = dir.join("out.npy");
    let a_arg = format!("a={}", s(&a_file));
    let b_arg = format!("b={}", s(&b_file));
    let model = s(&model).to_string();
    let (summary, lines) = batch_both(&model, &[&b_arg, &a_arg], &["--output", s(&out)], &dir, 0);
    assert_eq!(summary["ok"], 3);
    let sums = npy(&dir.join("out_0.npy"));
    let relus = npy(&dir.join("out_1.npy"));
    assert_eq!(sums.shape, vec![3, 4]);
    assert_eq!(
        sums.data,
        vec![11, 18, 33, 36, 55, 54, 77, 72, 99, 90, 121, 108]
    );
    assert_eq!(relus.data, vec![1, 0, 3, 0, 5, 0, 7, 0, 9, 0, 11, 0]);
    let (one_a, one_b) = (dir.join("a1.npy"), dir.join("b1.npy"));
    std::fs::write(&one_a, write_npy(&rows(&a, &[1]))).unwrap();
    std::fs::write(&one_b, write_npy(&rows(&b, &[1]))).unwrap();
    let alone = single(
        &model,
        &[&format!("a={}", s(&one_a)), &format!("b={}", s(&one_b))],
        &[],
        "wasm",
    );
    assert_eq!(lines[1][3], alone["hash"].as_str().unwrap());

    // Batches of different lengths, and labels for a model of two outputs, are refused.
    let short = dir.join("short.npy");
    std::fs::write(&short, write_npy(&rows(&b, &[0, 1]))).unwrap();
    let short_arg = format!("b={}", s(&short));
    let (_, said) = expect_status(
        &[
            "run", &model, "--batch", "--input", &a_arg, "--input", &short_arg,
        ],
        2,
    );
    assert!(
        said.contains("holds 2 samples of input \"b\"") && said.contains("holds 3 of \"a\""),
        "{said}"
    );
    let (_, said) = expect_status(
        &[
            "run",
            &model,
            "--batch",
            "--input",
            &a_arg,
            "--input",
            &b_arg,
            "--labels",
            s(&a_file),
        ],
        2,
    );
    assert!(
        said.contains("--labels compares the argmax of a model's one output; this model has 2"),
        "{said}"
    );
}

#[test]
fn shapes_and_labels_that_do_not_fit_are_usage_errors() {
    let dir = scratch("refusals");
    let model = s(&digits()).to_string();
    let all = npy(&digits().join("inputs.npy"));
    let four = rows(&all, &[0, 1, 2, 3]);
    let batch = dir.join("batch.npy");
    std::fs::write(&batch, write_npy(&four)).unwrap();

    // (N, 28, 28) for an input of (1, 1, 28, 28): both shapes named.
    let flat = dir.join("flat.npy");
    std::fs::write(
        &flat,
        write_npy(&NpyArray {
            shape: vec![4, 28, 28],
            data: four.data.clone(),
        }),
    )
    .unwrap();
    let (_, said) = expect_status(&["run", &model, "--batch", "--input", s(&flat)], 2);
    assert!(
        said.contains("shape [4, 28, 28]; the batch of input \"data\" [1, 1, 28, 28] is an array of shape (N, 1, 28, 28)"),
        "{said}"
    );
    // No sample at all.
    let empty = dir.join("empty.npy");
    std::fs::write(
        &empty,
        write_npy(&NpyArray {
            shape: vec![0, 1, 28, 28],
            data: vec![],
        }),
    )
    .unwrap();
    let (_, said) = expect_status(&["run", &model, "--batch", "--input", s(&empty)], 2);
    assert!(said.contains("holds no sample"), "{said}");
    // Three labels for four samples.
    let labels = dir.join("labels.npy");
    std::fs::write(
        &labels,
        write_npy(&NpyArray {
            shape: vec![3],
            data: vec![0, 1, 2],
        }),
    )
    .unwrap();
    let (_, said) = expect_status(
        &[
            "run",
            &model,
            "--batch",
            "--input",
            s(&batch),
            "--labels",
            s(&labels),
        ],
        2,
    );
    assert!(
        said.contains("labels.npy: 3 labels (shape [3]) for 4 samples"),
        "{said}"
    );
    // Float labels.
    let float_labels = dir.join("float_labels.npy");
    std::fs::write(&float_labels, write_npy_f32(&[4], &[0.0, 1.0, 2.0, 3.0])).unwrap();
    let (_, said) = expect_status(
        &[
            "run",
            &model,
            "--batch",
            "--input",
            s(&batch),
            "--labels",
            s(&float_labels),
        ],
        2,
    );
    assert!(said.contains("float_labels.npy"), "{said}");
    // A float batch without a quantization, the CVM byte formats, batch-only flags alone.
    let float_batch = dir.join("float.npy");
    std::fs::write(&float_batch, write_npy_f32(&[1, 1, 28, 28], &[0.5; 784])).unwrap();
    let (_, said) = expect_status(&["run", &model, "--batch", "--input", s(&float_batch)], 2);
    assert!(said.contains("needs the model's quantization"), "{said}");
    let (_, said) = expect_status(
        &[
            "run",
            &model,
            "--batch",
            "--input",
            s(&batch),
            "--input-format",
            "cvm",
        ],
        2,
    );
    assert!(said.contains("--batch reads .npy inputs"), "{said}");
    let (_, said) = expect_status(
        &["run", &model, "--input", s(&batch), "--labels", s(&labels)],
        2,
    );
    assert!(said.contains("--batch"), "{said}");
    // An undefined schedule is the model's rejection, as for one run: printed, exit 1.
    let (stdout, _) = expect_status(
        &[
            "run",
            &model,
            "--batch",
            "--input",
            s(&batch),
            "--schedule",
            "4000000",
        ],
        1,
    );
    assert!(stdout.contains("UnsupportedVersion"), "{stdout}");
}
