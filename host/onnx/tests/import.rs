//! The importer on the committed ONNX fixtures (`fixtures/onnx/`, made by its `generate.py`):
//! accuracy and agreement of the integer models, determinism, refusals, and robustness.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly
#![allow(clippy::float_arithmetic)] // comparing float outputs

use std::path::PathBuf;

use cvm_formats::npy::{NpyF32Array, read_npy, read_npy_f32};
use cvm_onnx::import::{ImportError, Imported, Importer, Options, argmax};
use cvm_onnx::{OnnxError, read};
use sha3::{Digest, Sha3_256};

fn fixture(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/onnx")
        .join(path)
}

fn floats(path: &str) -> NpyF32Array {
    read_npy_f32(&std::fs::read(fixture(path)).unwrap()).unwrap()
}

fn ints(path: &str) -> Vec<i32> {
    read_npy(&std::fs::read(fixture(path)).unwrap())
        .unwrap()
        .data
}

fn importer(path: &str) -> Importer {
    let model = cvm_onnx::read_file(&fixture(path)).unwrap();
    Importer::new(&model).unwrap()
}

fn import(importer: &Importer, calibration: &NpyF32Array, options: Options) -> Imported {
    let calibration = importer.calibrate(calibration, &mut |_, _| {}).unwrap();
    importer.quantize(&calibration, options).unwrap()
}

fn sha3(bytes: &[u8]) -> String {
    Sha3_256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The digits network calibrated on 200 images keeps its accuracy on all 1,797 within one
/// point, and agrees with the float network's argmax on at least 97 % of them.
#[test]
fn digits_keeps_its_accuracy() {
    let importer = importer("digits/model.onnx");
    let imported = import(
        &importer,
        &floats("digits/calibration.npy"),
        Options::default(),
    );
    let images = floats("digits/images.npy");
    let labels = ints("digits/labels.npy");
    let agreement = importer
        .compare(&imported, &images, Some(&labels), &mut |_, _| {})
        .unwrap();
    eprintln!("digits: {agreement:?}, gas {}", imported.gas);
    let (float, int) = (
        agreement.float_correct.unwrap(),
        agreement.int_correct.unwrap(),
    );
    // The importer's float evaluation is the network onnxruntime runs.
    let reference = ints("digits/float_predictions.npy");
    let size = images.data.len() / 1797;
    let same_as_onnxruntime = images
        .data
        .chunks(size)
        .zip(&reference)
        .filter(|(image, r)| argmax(&importer.float_output(image)) == **r as usize)
        .count();
    assert_eq!(same_as_onnxruntime, 1797);
    assert_eq!(float, 1151, "float accuracy on 1,797 images");
    assert!(
        int.abs_diff(float) * 100 <= 1797,
        "integer accuracy {int} vs float {float}: more than one point apart"
    );
    assert!(
        agreement.same_argmax * 100 >= 97 * 1797,
        "argmax agreement {}/1797",
        agreement.same_argmax
    );
}

/// The same file and calibration set give the same bytes, twice, and the bytes committed here
/// (computed once; every machine must reproduce them).
#[test]
fn import_is_deterministic() {
    let importer = importer("digits/model.onnx");
    let calibration = floats("digits/calibration.npy");
    let first = import(&importer, &calibration, Options::default());
    let second = import(&importer, &calibration, Options::default());
    assert_eq!(first.symbol, second.symbol);
    assert_eq!(first.params, second.params);
    assert_eq!(first.canonical, second.canonical);
    let digests = [
        sha3(&first.symbol),
        sha3(&first.params),
        sha3(&first.canonical),
        sha3(first.quantization.to_json().as_bytes()),
    ];
    assert_eq!(
        digests,
        [
            "edef9c0e1a112392c29dd140877b9ab60758798b4ef4cd22f843e05c0ff494b1",
            "d6e8633f12c823c96b6743d550478e64e45c9cc2980dcc682326f351b2e522d5",
            "1beea8f6dbded1811e2951db6060588c5d023a8e4809b6efd762da13bc330aa7",
            "be3b1aa65261890d3a9ba669f6d74706b32f532fcacafb9eaafa6ddf3b477f70",
        ],
        "symbol, params, canonical model, quantization.json"
    );
    assert_eq!(first.gas, 1_880_137);
}

/// A small ResNet (batch normalization folded, residual additions, global average pooling)
/// with random weights: the importer's float evaluation is onnxruntime's, and the integer
/// model follows it.
#[test]
fn resnet_imports_and_follows_the_float_model() {
    let importer = importer("resnet/model.onnx");
    let imported = import(
        &importer,
        &floats("resnet/calibration.npy"),
        Options::default(),
    );
    let inputs = floats("resnet/inputs.npy");
    let logits = floats("resnet/float_logits.npy");
    let size = inputs.data.len() / 64;
    let mut worst = 0.0f64;
    for (input, reference) in inputs.data.chunks(size).zip(logits.data.chunks(10)) {
        let ours = importer.float_output(input);
        for (a, &b) in ours.iter().zip(reference) {
            worst = worst.max((a - f64::from(b)).abs());
        }
    }
    let agreement = importer
        .compare(&imported, &inputs, None, &mut |_, _| {})
        .unwrap();
    eprintln!(
        "resnet: float vs onnxruntime {worst:e}; {agreement:?}; notes {:?}; gas {}",
        imported.notes, imported.gas
    );
    assert!(
        worst < 1e-5,
        "float evaluation differs from onnxruntime by {worst}"
    );
    assert!(agreement.max_error <= 0.1 * agreement.max_output);
}

/// Each one-operator model imports, and its dequantized integer outputs stay within a few
/// steps of the output scale of onnxruntime's float outputs.
#[test]
fn operator_models_follow_onnxruntime() {
    for name in [
        "sigmoid",
        "tanh",
        "avgpool",
        "concat",
        "transpose_reshape",
        "mul_const",
        "relu6",
        "pad_conv",
        "softmax",
        "matmul",
    ] {
        let importer = importer(&format!("ops/{name}.onnx"));
        let inputs = floats(&format!("ops/{name}_inputs.npy"));
        let expected = floats(&format!("ops/{name}_outputs.npy"));
        let imported = import(&importer, &inputs, Options::default());
        let count = inputs.shape[0] as usize;
        let size = inputs.data.len() / count;
        let out = expected.data.len() / count;
        let scale = imported.quantization.output_scale;
        let mut worst = 0.0f64;
        let mut range = 0.0f64;
        for (input, reference) in inputs.data.chunks(size).zip(expected.data.chunks(out)) {
            let int = imported.run(input).unwrap();
            let float: Vec<f64> = if name == "softmax" {
                // The softmax is dropped: compare the argmax only.
                assert_eq!(argmax(&int), argmax(reference), "{name}");
                continue;
            } else {
                reference.iter().map(|&v| f64::from(v)).collect()
            };
            for (&q, f) in int.iter().zip(&float) {
                worst = worst.max((f64::from(q) * scale - f).abs());
                range = range.max(f.abs());
            }
        }
        eprintln!(
            "{name}: worst {worst:.5} of range {range:.5}, {} steps",
            worst / scale
        );
        assert!(
            worst <= 0.05 * range,
            "{name}: integer outputs off by {worst} on a range of {range}"
        );
    }
}

/// Unsupported operators and malformed files are refused with the node or input and the
/// reason; an open batch axis is taken as 1, and said so.
#[test]
fn refusals_name_what_and_where() {
    let model = cvm_onnx::read_file(&fixture("bad/unsupported.onnx")).unwrap();
    let error = Importer::new(&model).err().unwrap();
    assert!(matches!(error, ImportError::UnsupportedOperator { .. }));
    let message = error.to_string();
    assert!(
        message.contains("\"sin_0\"") && message.contains("Sin"),
        "{message}"
    );
    let model = cvm_onnx::read_file(&fixture("bad/dynamic.onnx")).unwrap();
    let importer = Importer::new(&model).unwrap();
    assert_eq!(importer.input_shape(), [1, 1, 4, 4]);
    for (file, expected) in [
        ("bad/truncated.onnx", "not an ONNX model"),
        ("bad/garbage.onnx", "not an ONNX model"),
    ] {
        let error: OnnxError = cvm_onnx::read_file(&fixture(file)).err().unwrap();
        assert!(error.to_string().contains(expected), "{file}: {error}");
    }
}

/// Corrupted models are read, lowered, calibrated and quantized without a panic: every outcome
/// is a model or an error.
#[test]
fn corrupted_models_never_panic() {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut imported, mut refused) = (0, 0);
    for name in [
        "concat",
        "avgpool",
        "transpose_reshape",
        "mul_const",
        "pad_conv",
    ] {
        let bytes = std::fs::read(fixture(&format!("ops/{name}.onnx"))).unwrap();
        for _ in 0..400 {
            let mut mutated = bytes.clone();
            for _ in 0..1 + next() % 3 {
                let at = (next() % mutated.len() as u64) as usize;
                mutated[at] = next() as u8;
            }
            let outcome = read(&mutated)
                .map_err(|e| e.to_string())
                .and_then(|model| Importer::new(&model).map_err(|e| e.to_string()))
                .and_then(|importer| {
                    if importer.work() > 1 << 24 {
                        return Err("too large for this test".into());
                    }
                    let size: usize = importer.input_shape().iter().product();
                    let shape: Vec<u32> =
                        importer.input_shape().iter().map(|&d| d as u32).collect();
                    let sample = NpyF32Array {
                        shape,
                        data: (0..size).map(|i| (i % 7) as f32 - 3.0).collect(),
                    };
                    let calibration = importer
                        .calibrate(&sample, &mut |_, _| {})
                        .map_err(|e| e.to_string())?;
                    let model = importer
                        .quantize(&calibration, Options::default())
                        .map_err(|e| e.to_string())?;
                    model.run(&sample.data)
                });
            match outcome {
                Ok(_) => imported += 1,
                Err(_) => refused += 1,
            }
        }
    }
    eprintln!("{imported} imported, {refused} refused");
    assert!(imported > 0 && refused > 0);
}

/// The digits network quantized by onnxruntime's `quantize_static` (QDQ, int8, per tensor and
/// per channel) imports with its own scales and agrees with onnxruntime's int8 argmax.
#[test]
fn qdq_models_follow_onnxruntime() {
    let images = floats("digits/images.npy");
    let size = images.data.len() / 1797;
    for (model, predictions) in [
        ("digits/model_qdq.onnx", "digits/qdq_predictions.npy"),
        (
            "digits/model_qdq_per_channel.onnx",
            "digits/qdq_per_channel_predictions.npy",
        ),
    ] {
        let importer = importer(model);
        let imported = import(
            &importer,
            &floats("digits/calibration.npy"),
            Options::default(),
        );
        let reference = ints(predictions);
        let same = images
            .data
            .chunks(size)
            .zip(&reference)
            .filter(|(image, r)| argmax(&imported.run(image).unwrap()) == **r as usize)
            .count();
        eprintln!(
            "{model}: integer argmax equals onnxruntime's on {same}/1797; gas {}",
            imported.gas
        );
        assert!(same * 100 >= 98 * 1797, "{model}: {same}/1797");
    }
}
