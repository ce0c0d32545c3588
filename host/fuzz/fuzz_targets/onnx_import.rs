//! Fuzz target: the whole ONNX import on arbitrary bytes (read, lower, calibrate on one
//! deterministic sample of every input, SmoothQuant on half of the inputs, quantize, validate,
//! run, compare with the float model) must give a model or an error, never panic, and its
//! `quantization.json` must read back as what was written. `scripts/fuzz.sh` seeds it with the
//! committed models, among them PyTorch's exports whose shape computations (Shape, Gather,
//! Concat, Unsqueeze, Reshape) the lowering folds, and the transformers of several integer
//! inputs (token ids, token types, an attention mask read by the attention and by mean
//! pooling), so that folding and the lowering of ids and masks are explored with the rest.
#![no_main]

use cvm_formats::npy::NpyF32Array;
use cvm_onnx::import::{Holds, Importer, Options, Quantization};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(model) = cvm_onnx::read(data) else {
        return;
    };
    let Ok(mut importer) = Importer::new(&model) else {
        return;
    };
    // Keep each execution short: the bound the importer enforces is for real models.
    if importer.work() > 1 << 22 {
        return;
    }
    // One sample per input, of what it holds: floats from −3 to 3, ids over the vocabulary,
    // a mask that keeps the first position and every other one after it.
    let samples: Vec<NpyF32Array> = importer
        .inputs()
        .iter()
        .map(|input| {
            let size: usize = input.shape.iter().product();
            let value = |i: usize| match input.holds {
                Holds::Float => (i % 7) as f32 - 3.0,
                Holds::Ids { vocabulary } => (i % vocabulary.max(1)) as f32,
                Holds::Mask => f32::from(u8::from(i % 2 == 0)),
            };
            NpyF32Array {
                shape: input.shape.iter().map(|&d| d as u32).collect(),
                data: (0..size).map(value).collect(),
            }
        })
        .collect();
    let Ok(mut calibration) = importer.calibrate_inputs(&samples, &mut |_, _| {}) else {
        return;
    };
    // SmoothQuant on half of the inputs (by the length's parity), calibrated again.
    if data.len() % 2 == 1 && importer.smooth(&calibration) > 0 {
        let Ok(again) = importer.calibrate_inputs(&samples, &mut |_, _| {}) else {
            return;
        };
        calibration = again;
    }
    if let Ok(imported) = importer.quantize(&calibration, Options::default()) {
        let sample: Vec<&[f32]> = samples.iter().map(|s| s.data.as_slice()).collect();
        let _ = imported.run_inputs(&sample);
        let _ = importer.compare_inputs(&imported, &samples, None, &mut |_, _| {});
        // What quantization.json says reads back as the same quantization.
        let text = imported.quantization.to_json();
        assert_eq!(
            Quantization::from_json(&text).as_ref(),
            Ok(&imported.quantization),
            "{text}"
        );
    }
});
