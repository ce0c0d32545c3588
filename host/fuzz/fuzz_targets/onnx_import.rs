//! Fuzz target: the whole ONNX import on arbitrary bytes (read, lower, calibrate on one
//! deterministic sample, quantize, validate, run) must give a model or an error, never panic.
//! `scripts/fuzz.sh` seeds it with the committed models, among them PyTorch's exports whose
//! shape computations (Shape, Gather, Concat, Unsqueeze, Reshape) the lowering folds, so that
//! folding is explored with the rest.
#![no_main]

use cvm_formats::npy::NpyF32Array;
use cvm_onnx::import::{Importer, Options};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(model) = cvm_onnx::read(data) else {
        return;
    };
    let Ok(importer) = Importer::new(&model) else {
        return;
    };
    // Keep each execution short: the bound the importer enforces is for real models.
    if importer.work() > 1 << 22 {
        return;
    }
    let size: usize = importer.input_shape().iter().product();
    let sample = NpyF32Array {
        shape: importer.input_shape().iter().map(|&d| d as u32).collect(),
        data: (0..size).map(|i| (i % 7) as f32 - 3.0).collect(),
    };
    let Ok(calibration) = importer.calibrate(&sample, &mut |_, _| {}) else {
        return;
    };
    if let Ok(imported) = importer.quantize(&calibration, Options::default()) {
        let _ = imported.run(&sample.data);
    }
});
