//! Transformers PyTorch exports, each by the torch.export-based and the TorchScript exporter
//! with a dynamic batch, imported with no option to models of the engine's own operators:
//! - `fixtures/onnx/vit/`: a tiny vision transformer of scikit-learn's digits (patch embedding
//!   by Conv, class token by Concat, positional embedding, LayerNormalization, multi-head
//!   attention as MatMul, Transpose, Reshape and Softmax, Gelu; at opset 14 the layer
//!   normalization and GELU written out of smaller operators). Its float evaluation follows
//!   onnxruntime's logits; its integer model keeps the float accuracy within a point and the
//!   float argmax on at least 97 % of the validation images.
//! - `fixtures/onnx/charlm/`: a character-level causal language model (int64 token ids, an
//!   embedding Gather, a causal mask by masked_fill, logits per position). Its float
//!   evaluation follows onnxruntime's; its integer model's next-token top-1 is within 2 points
//!   of the float one and agrees with it on at least 93 % of the positions.
//! - `fixtures/onnx/encoder/`: a BERT-style sentence encoder of three integer inputs
//!   (`input_ids`, `token_type_ids`, `attention_mask`), its mask added to the attention scores
//!   as Hugging Face writes it and mean pooling over it. Its float evaluation follows
//!   onnxruntime's embeddings; its integer embeddings have a cosine similarity to them of
//!   median ≥ 0.99 and minimum ≥ 0.95 over the validation sequences.
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
fn check(file: &str, smooth: bool) {
    let model = cvm_onnx::read_file(&fixture("vit", &format!("{file}.onnx"))).unwrap();
    let mut importer = Importer::new(&model).unwrap();
    assert!(importer.engine_only(), "{file}");
    let set = floats("torch", "calibration.npy");
    let mut calibration = importer.calibrate(&set, &mut |_, _| {}).unwrap();
    if smooth {
        assert!(importer.smooth(&calibration) > 0, "{file}");
        calibration = importer.calibrate(&set, &mut |_, _| {}).unwrap();
    }
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
    check("vit_dynamo", false);
}

#[test]
fn vit_exported_by_torchscript_imports_within_a_point() {
    check("vit_legacy", false);
}

/// At opset 14 the exporter writes LayerNormalization and GELU out of smaller operators.
#[test]
fn vit_at_opset_14_imports_within_a_point() {
    check("vit_opset14", false);
}

/// Imports the character LM `file` and checks it on the held-out windows.
fn check_lm(file: &str, smooth: bool) {
    let model = cvm_onnx::read_file(&fixture("charlm", &format!("{file}.onnx"))).unwrap();
    let mut importer = Importer::new(&model).unwrap();
    assert!(importer.engine_only(), "{file}");
    let ids = |name: &str| {
        let array = read_npy(&std::fs::read(fixture("charlm", name)).unwrap()).unwrap();
        NpyF32Array {
            shape: array.shape.clone(),
            data: array.data.iter().map(|&id| id as f32).collect(),
        }
    };
    let set = ids("calibration_ids.npy");
    let mut calibration = importer.calibrate(&set, &mut |_, _| {}).unwrap();
    if smooth {
        assert!(importer.smooth(&calibration) > 0, "{file}");
        calibration = importer.calibrate(&set, &mut |_, _| {}).unwrap();
    }
    let imported = importer.quantize(&calibration, Options::default()).unwrap();
    let vocabulary = imported.vocabulary.unwrap();
    let validation = ids("validation_ids.npy");
    let targets = ints("charlm", "validation_targets.npy");
    let reference = ints("charlm", &format!("{file}_predictions.npy"));
    let logits = floats("charlm", &format!("{file}_logits.npy"));
    let context = validation.shape[1] as usize;
    let (mut float_right, mut int_right, mut same, mut float_same) = (0, 0, 0, 0);
    for (w, window) in validation.data.chunks(context).enumerate() {
        let float = importer.float_output(window);
        let int = imported.run(window).unwrap();
        for t in 0..context {
            let row = t * vocabulary..(t + 1) * vocabulary;
            let (f, i) = (&float[row.clone()], &int[row]);
            if w * context * vocabulary < logits.data.len() {
                let offset = w * context * vocabulary;
                for (a, &b) in f.iter().zip(&logits.data[offset + t * vocabulary..]) {
                    assert!(
                        (a - f64::from(b)).abs() < 1e-4,
                        "{file} window {w}: {a} vs {b}"
                    );
                }
            }
            let (fa, ia) = (argmax(f), argmax(i));
            let target = targets[w * context + t] as usize;
            float_right += usize::from(fa == target);
            int_right += usize::from(ia == target);
            same += usize::from(fa == ia);
            float_same += usize::from(fa == reference[w * context + t] as usize);
        }
    }
    let count = targets.len();
    eprintln!(
        "{file}: top-1 float {float_right}/{count}, integer {int_right}/{count}, same \
         {same}/{count}, float as onnxruntime {float_same}/{count}, {} operators, {} gas",
        imported.operators, imported.gas
    );
    assert_eq!(
        float_same, count,
        "{file}: the float evaluation is onnxruntime's"
    );
    assert!(
        int_right * 100 + 2 * count >= float_right * 100,
        "{file}: within 2 points"
    );
    assert!(same * 100 >= count * 93, "{file}: top-1 agreement");
    // The importer's own comparison, as `cvm import --validate --labels` reports it, counts
    // the same per position.
    let agreement = importer
        .compare(&imported, &validation, Some(&targets), &mut |_, _| {})
        .unwrap();
    assert_eq!(
        (
            agreement.samples,
            agreement.positions,
            agreement.same_argmax,
            agreement.float_correct,
            agreement.int_correct
        ),
        (
            count / context,
            count,
            same,
            Some(float_right),
            Some(int_right)
        ),
        "{file}"
    );
    // Labels are one per position, not one per window.
    let err = importer
        .compare(
            &imported,
            &validation,
            Some(&targets[..count / context]),
            &mut |_, _| {},
        )
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.ends_with(&format!(
            "labels are one per position: {context} per sample, the output being [1, \
             {context}, {vocabulary}]"
        )),
        "{err}"
    );
}

#[test]
fn char_lm_exported_by_torch_export_imports_within_two_points() {
    check_lm("charlm_dynamo", false);
}

#[test]
fn char_lm_exported_by_torchscript_imports_within_two_points() {
    check_lm("charlm_legacy", false);
}

/// Imports the sentence encoder `file` and checks its embeddings of the validation sequences.
fn check_encoder(file: &str) {
    let model = cvm_onnx::read_file(&fixture("encoder", &format!("{file}.onnx"))).unwrap();
    let importer = Importer::new(&model).unwrap();
    assert!(importer.engine_only(), "{file}");
    let names: Vec<String> = importer.inputs().into_iter().map(|i| i.name).collect();
    assert_eq!(names, ["input_ids", "token_type_ids", "attention_mask"]);
    let set = |prefix: &str| -> Vec<NpyF32Array> {
        names
            .iter()
            .map(|name| {
                let path = fixture("encoder", &format!("{prefix}_{name}.npy"));
                let array = read_npy(&std::fs::read(path).unwrap()).unwrap();
                NpyF32Array {
                    shape: array.shape.clone(),
                    data: array.data.iter().map(|&v| v as f32).collect(),
                }
            })
            .collect()
    };
    let calibration = importer
        .calibrate_inputs(&set("calibration"), &mut |_, _| {})
        .unwrap();
    let imported = importer.quantize(&calibration, Options::default()).unwrap();
    let validation = set("validation");
    let reference = floats("encoder", &format!("{file}_embeddings.npy"));
    let count = reference.shape[0] as usize;
    let width = reference.data.len() / count;
    let scale = imported.quantization.output_scale;
    let mut cosines = Vec::with_capacity(count);
    for s in 0..count {
        let sample: Vec<&[f32]> = validation
            .iter()
            .map(|a| {
                let n = a.data.len() / count;
                &a.data[s * n..(s + 1) * n]
            })
            .collect();
        let float = importer.float_output_of(&sample);
        let expected = &reference.data[s * width..(s + 1) * width];
        for (f, &r) in float.iter().zip(expected) {
            assert!(
                (f - f64::from(r)).abs() < 1e-4,
                "{file} sequence {s}: {f} vs {r}"
            );
        }
        let int = imported.run_inputs(&sample).unwrap();
        let (mut dot, mut ff, mut ii) = (0.0, 0.0, 0.0);
        for (&f, &q) in expected.iter().zip(&int) {
            let (f, q) = (f64::from(f), f64::from(q) * scale);
            dot += f * q;
            ff += f * f;
            ii += q * q;
        }
        cosines.push(dot / (ff.sqrt() * ii.sqrt()));
    }
    cosines.sort_by(f64::total_cmp);
    let (median, min) = (cosines[count / 2], cosines[0]);
    eprintln!(
        "{file}: cosine median {median:.4}, min {min:.4} over {count} sequences, {} operators, \
         {} gas",
        imported.operators, imported.gas
    );
    assert!(median >= 0.99 && min >= 0.95, "{file}: {median} {min}");
    // The importer's comparison (to its own float evaluation, which is onnxruntime's within
    // 1e-4) reports the same similarities.
    let agreement = importer
        .compare_inputs(&imported, &validation, None, &mut |_, _| {})
        .unwrap();
    assert_eq!(agreement.positions, count);
    let even_median = (cosines[(count - 1) / 2] + cosines[count / 2]) / 2.0;
    assert!(
        (agreement.median_cosine - even_median).abs() < 1e-6
            && (agreement.min_cosine - min).abs() < 1e-6,
        "{file}: {agreement:?} against {even_median} {min}"
    );
}

#[test]
fn encoder_exported_by_torch_export_embeds_as_float() {
    check_encoder("encoder_dynamo");
}

#[test]
fn encoder_exported_by_torchscript_embeds_as_float() {
    check_encoder("encoder_legacy");
}

/// SmoothQuant moves the layer norms' outlier channels into the dense layers reading them; the
/// models keep their accuracy bounds.
#[test]
fn vit_with_smoothquant_imports_within_a_point() {
    check("vit_dynamo", true);
}

#[test]
fn char_lm_with_smoothquant_imports_within_two_points() {
    check_lm("charlm_dynamo", true);
}
