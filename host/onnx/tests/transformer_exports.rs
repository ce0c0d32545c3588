//! Transformers PyTorch exports (`fixtures/onnx/vit/`, made by its `generate.py`): a tiny
//! vision transformer of scikit-learn's digits (patch embedding by Conv, class token by Concat,
//! positional embedding, LayerNormalization, multi-head attention as MatMul, Transpose,
//! Reshape and Softmax, Gelu), exported by the torch.export-based and the TorchScript exporter
//! with a dynamic batch. Each imports with no option to a model of the engine's own operators;
//! its float evaluation follows onnxruntime's logits, and its integer model keeps the float
//! accuracy within a point and the float argmax on at least 97 % of the validation images.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly
#![allow(clippy::float_arithmetic)] // comparing float outputs

use std::path::PathBuf;

use cvm_formats::npy::{NpyF32Array, read_npy, read_npy_f32};
use cvm_onnx::import::{Importer, Options, argmax};

fn fixture(dir: &str, name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/onnx")
        .join(dir)
        .join(name)
}

fn floats(dir: &str, name: &str) -> NpyF32Array {
    read_npy_f32(&std::fs::read(fixture(dir, name)).unwrap()).unwrap()
}

fn ints(dir: &str, name: &str) -> Vec<i32> {
    read_npy(&std::fs::read(fixture(dir, name)).unwrap())
        .unwrap()
        .data
}

/// Imports `file` and checks it on the validation set against onnxruntime's logits and the
/// labels.
fn check(file: &str) {
    let model = cvm_onnx::read_file(&fixture("vit", &format!("{file}.onnx"))).unwrap();
    let importer = Importer::new(&model).unwrap();
    assert!(importer.engine_only(), "{file}");
    let calibration = importer
        .calibrate(&floats("torch", "calibration.npy"), &mut |_, _| {})
        .unwrap();
    let imported = importer.quantize(&calibration, Options::default()).unwrap();
    assert!(imported.symbol.is_empty() && imported.params.is_empty());
    let validation = floats("torch", "validation.npy");
    let labels = ints("torch", "labels.npy");
    let logits = floats("vit", &format!("{file}_logits.npy"));
    let size = validation.data.len() / labels.len();
    let (mut float_right, mut int_right, mut same) = (0, 0, 0);
    for (i, (image, &label)) in validation.data.chunks(size).zip(&labels).enumerate() {
        let float = importer.float_output(image);
        for (f, &l) in float.iter().zip(&logits.data[i * 10..(i + 1) * 10]) {
            assert!(
                (f - f64::from(l)).abs() < 1e-4,
                "{file} image {i}: {f} vs {l}"
            );
        }
        let int = imported.run(image).unwrap();
        let (fa, ia) = (argmax(&float), argmax(&int));
        float_right += usize::from(fa == label as usize);
        int_right += usize::from(ia == label as usize);
        same += usize::from(fa == ia);
    }
    let count = labels.len();
    eprintln!(
        "{file}: float {float_right}/{count}, integer {int_right}/{count}, same argmax \
         {same}/{count}, {} operators, {} gas",
        imported.operators, imported.gas
    );
    assert!(
        int_right * 100 + count >= float_right * 100,
        "{file}: within a point"
    );
    assert!(same * 100 >= count * 97, "{file}: argmax agreement");
}

#[test]
fn vit_exported_by_torch_export_imports_within_a_point() {
    check("vit_dynamo");
}

#[test]
fn vit_exported_by_torchscript_imports_within_a_point() {
    check("vit_legacy");
}
