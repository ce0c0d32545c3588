//! The models PyTorch exports (`fixtures/onnx/torch/`, made by its `generate.py`): a CNN, an
//! MLP and a ResNet-style network, each as the default exporter writes it (weights as
//! external data), as the TorchScript exporter writes it with a dynamic batch, and at opsets
//! 13, 17, 18 and 20, and as onnxruntime quantizes them (QOperator, dynamic). Each imports with
//! no option; its float evaluation gives onnxruntime's argmax on every validation image and
//! its logits; its integer model agrees with that argmax on at least 97 % of the 600 images.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly
#![allow(clippy::float_arithmetic)] // comparing float outputs

use std::path::PathBuf;

use cvm_formats::npy::{NpyF32Array, read_npy, read_npy_f32};
use cvm_onnx::import::{Importer, Options, argmax};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/onnx/torch")
        .join(name)
}

/// A float array, its samples reshaped to `sample` (the mlp reads the images flattened).
fn floats(name: &str, sample: &[u32]) -> NpyF32Array {
    let mut array = read_npy_f32(&std::fs::read(fixture(name)).unwrap()).unwrap();
    array.shape = [&[array.shape[0]][..], sample].concat();
    array
}

fn ints(name: &str) -> Vec<i32> {
    read_npy(&std::fs::read(fixture(name)).unwrap())
        .unwrap()
        .data
}

/// Imports `file` and returns (the float model's argmax agreement with onnxruntime, the
/// integer model's), over the validation set, checking the float logits of the first 16
/// images when they are committed.
fn agreement(file: &str) -> (usize, usize) {
    let sample: &[u32] = if file.starts_with("mlp") {
        &[64]
    } else {
        &[1, 8, 8]
    };
    let model = cvm_onnx::read_file(&fixture(&format!("{file}.onnx"))).unwrap();
    let importer = Importer::new(&model).unwrap();
    let calibration = importer
        .calibrate(&floats("calibration.npy", sample), &mut |_, _| {})
        .unwrap();
    let imported = importer.quantize(&calibration, Options::default()).unwrap();
    let validation = floats("validation.npy", sample);
    let reference = ints(&format!("{file}_predictions.npy"));
    let logits = fixture(&format!("{file}_logits.npy"));
    let logits = logits
        .exists()
        .then(|| read_npy_f32(&std::fs::read(logits).unwrap()).unwrap());
    let size = validation.data.len() / reference.len();
    let (mut float_same, mut int_same) = (0, 0);
    for (i, (image, &expected)) in validation.data.chunks(size).zip(&reference).enumerate() {
        let float = importer.float_output(image);
        if let Some(logits) = &logits
            && i < 16
        {
            for (f, &l) in float.iter().zip(&logits.data[i * 10..(i + 1) * 10]) {
                assert!(
                    (f - f64::from(l)).abs() < 1e-4,
                    "{file} image {i}: {f} vs {l}"
                );
            }
        }
        float_same += usize::from(argmax(&float) == expected as usize);
        let int = imported.run(image).unwrap();
        int_same += usize::from(argmax(&int) == expected as usize);
    }
    eprintln!("{file}: float {float_same}/600, integer {int_same}/600");
    (float_same, int_same)
}

fn check(files: &[&str]) {
    for file in files {
        let (float, int) = agreement(file);
        assert_eq!(float, 600, "{file}: the float evaluation is onnxruntime's");
        assert!(int * 100 >= 97 * 600, "{file}: {int}/600");
    }
}

/// onnxruntime's int8 models: their weights imported, their activations calibrated; the
/// integer model agrees with onnxruntime's own int8 argmax on at least 97 % of the images.
#[test]
fn the_quantized_models_of_onnxruntime() {
    for file in ["cnn_qoperator", "cnn_qoperator_uint8", "mlp_dynamic_quant"] {
        let (_, int) = agreement(file);
        assert!(int * 100 >= 97 * 600, "{file}: {int}/600");
    }
}

#[test]
fn the_cnn_of_every_exporter_and_opset() {
    check(&[
        "cnn_dynamo",
        "cnn_legacy_dynamic",
        "cnn_opset13",
        "cnn_opset17",
        "cnn_opset18",
        "cnn_opset20",
    ]);
}

#[test]
fn the_mlp_of_every_exporter_and_opset() {
    check(&[
        "mlp_dynamo",
        "mlp_legacy_dynamic",
        "mlp_opset13",
        "mlp_opset17",
        "mlp_opset18",
        "mlp_opset20",
    ]);
}

#[test]
fn the_resnet_of_every_exporter_and_opset() {
    check(&[
        "resnet_dynamo",
        "resnet_legacy_dynamic",
        "resnet_opset13",
        "resnet_opset17",
        "resnet_opset18",
        "resnet_opset20",
    ]);
}
