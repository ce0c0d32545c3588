//! The real network: the handwritten-digit CNN of `fixtures/models/digits`, read from its CVM
//! files, over all 1,797 committed images. The engine must reproduce, image by image, the
//! predictions that `generate.py` computed with its own integer implementation, and its accuracy
//! must lie within one percentage point of the float network's.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use std::path::PathBuf;

use cvm_cli::runner::{EngineKind, execute};
use cvm_engine::exec::InputTensor;
use cvm_engine::{Status, ValidatedModel};
use cvm_formats::cvm;
use cvm_formats::npy::{NpyArray, read_npy};
use cvm_runtime::wasm::WasmEngine;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models/digits")
}

fn npy(name: &str) -> NpyArray {
    read_npy(&std::fs::read(dir().join(name)).unwrap()).unwrap()
}

fn model_bytes() -> (Vec<u8>, cvm::CvmMeta) {
    let (symbol, params) = cvm::read_dir(&dir()).unwrap();
    let model = cvm::import(&symbol, &params).unwrap();
    (model.model.encode(), model.meta)
}

/// The i-th image of `inputs.npy`.
fn image(inputs: &NpyArray, index: usize) -> InputTensor {
    let size = 28 * 28;
    InputTensor {
        shape: vec![1, 1, 28, 28],
        data: inputs.data[index * size..(index + 1) * size].to_vec(),
    }
}

fn argmax(logits: &[i32]) -> i32 {
    let mut best = 0;
    for (index, &value) in logits.iter().enumerate() {
        if value > logits[best] {
            best = index;
        }
    }
    best as i32
}

#[test]
fn integer_accuracy_matches_the_reference_and_the_float_model() {
    let (bytes, meta) = model_bytes();
    assert_eq!(meta.postprocess, cvm::Postprocess::Argmax);
    let model = cvm_engine::load(&bytes, 1).unwrap();
    let inputs = npy("inputs.npy");
    let labels = npy("labels.npy").data;
    let reference = npy("int_predictions.npy").data;
    let float = npy("float_predictions.npy").data;
    assert_eq!(inputs.shape, [1797, 1, 28, 28]);
    assert_eq!(labels.len(), 1797);

    let predict = |model: &ValidatedModel, range: std::ops::Range<usize>| -> Vec<i32> {
        range
            .map(|index| {
                let report = cvm_engine::run(model, vec![image(&inputs, index)], u64::MAX);
                let Status::Ok { outputs } = report.outcome.status else {
                    panic!("image {index}: {report:?}")
                };
                argmax(&outputs[0].data)
            })
            .collect()
    };
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 4);
    let chunk = labels.len().div_ceil(threads);
    let predictions: Vec<i32> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let range = t * chunk..((t + 1) * chunk).min(labels.len());
                let model = &model;
                let predict = &predict;
                scope.spawn(move || predict(model, range))
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().unwrap())
            .collect()
    });

    let disagreements: Vec<usize> = (0..labels.len())
        .filter(|&i| predictions[i] != reference[i])
        .collect();
    assert!(
        disagreements.is_empty(),
        "engine and generate.py disagree on images {disagreements:?}"
    );
    let correct = |predicted: &[i32]| {
        predicted
            .iter()
            .zip(&labels)
            .filter(|(p, l)| p == l)
            .count()
    };
    let (integer_correct, float_correct) = (correct(&predictions), correct(&float));
    let agree = predictions
        .iter()
        .zip(&float)
        .filter(|(a, b)| a == b)
        .count();
    eprintln!("integer {integer_correct}/1797, float {float_correct}/1797, agreement {agree}/1797");
    // Within one percentage point: |Δ| / 1797 ≤ 1 / 100.
    assert!(
        integer_correct.abs_diff(float_correct) * 100 <= labels.len(),
        "integer {integer_correct} vs float {float_correct}"
    );
}

#[test]
fn wasm_and_native_agree_on_a_sample_and_the_cli_writes_argmax_bytes() {
    let (bytes, meta) = model_bytes();
    let inputs = npy("inputs.npy");
    let wasm = WasmEngine::new().unwrap();
    for index in (0..1797).step_by(149) {
        let input = [image(&inputs, index)];
        let native = execute(
            EngineKind::Native,
            None,
            &bytes,
            &input,
            u64::MAX,
            cvm_engine::gas::Schedule::NEWEST.version,
        )
        .unwrap();
        let in_wasm = execute(
            EngineKind::Wasm,
            Some(&wasm),
            &bytes,
            &input,
            u64::MAX,
            cvm_engine::gas::Schedule::NEWEST.version,
        )
        .unwrap();
        assert_eq!(native, in_wasm, "image {index}");
        let Status::Ok { outputs } = &native.outcome.status else {
            panic!("image {index}")
        };
        // The deployed argmax compares the logits truncated to 8 bits (cvm-compat §4).
        let truncated: Vec<i32> = outputs[0]
            .data
            .iter()
            .map(|&v| i32::from(v as i8))
            .collect();
        let cvm_bytes = cvm::encode_output(meta.postprocess, outputs, false).unwrap();
        assert_eq!(cvm_bytes, argmax(&truncated).to_le_bytes(), "image {index}");
    }
}
