//! The checks behind the fuzz targets (`host/fuzz`) and the regression suite that replays their
//! saved inputs (`fixtures/fuzz/`): each takes arbitrary bytes and must return without panicking,
//! whatever the bytes are.

use std::path::Path;

use cvm_engine::exec::InputTensor;

use crate::cvm;
use crate::graphgen::{ByteSource, generate};
use crate::runner::{EngineKind, execute};
use crate::text;
use crate::wasm::WasmEngine;

/// Most input elements the fuzz checks allocate for one run (declared shapes may be far larger).
const MAX_FUZZ_INPUT_ELEMENTS: u64 = 1 << 16;

/// Inputs for every declared input of `model`, values drawn from `seed` and clipped into range,
/// or `None` when they would be too large to be worth allocating.
fn inputs_for(model: &cvm_engine::ValidatedModel, seed: &[u8]) -> Option<Vec<InputTensor>> {
    let total: u64 = model
        .inputs
        .iter()
        .map(|input| input.ty.shape.elements())
        .sum();
    if total > MAX_FUZZ_INPUT_ELEMENTS {
        return None;
    }
    let mut source = ByteSource::new(seed);
    Some(
        model
            .inputs
            .iter()
            .map(|input| {
                let bound = cvm_engine::tensor::precision_bound(input.ty.precision);
                let data = (0..input.ty.shape.elements())
                    .map(|_| source.range(-bound, bound) as i32)
                    .collect();
                InputTensor {
                    shape: input.ty.shape.0.clone(),
                    data,
                }
            })
            .collect(),
    )
}

/// Canonical model bytes: decode, validate and, when valid, run with a small gas limit. The
/// first two bytes set the gas limit (× 16), the rest is the model.
pub fn canonical(data: &[u8]) {
    let Some((limit, bytes)) = data.split_first_chunk::<2>() else {
        return;
    };
    let gas_limit = u64::from(u16::from_le_bytes(*limit)) * 16;
    if let Ok(model) = cvm_engine::load(bytes, 1)
        && let Some(inputs) = inputs_for(&model, bytes)
    {
        let report = cvm_engine::run(&model, inputs, gas_limit);
        assert!(
            report.outcome.gas_used <= gas_limit,
            "gas used exceeds the limit"
        );
    }
}

/// Text models: parse, convert, validate.
pub fn text_model(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
        return;
    };
    // Parameter files resolve against a directory that does not exist: nothing is read.
    if let Ok(model) = text::from_json(&value, Path::new("/nonexistent/cvm-fuzz")) {
        let _ = cvm_engine::load(&model.encode(), 1);
    }
}

/// CVM models: the first four bytes give the symbol's length; the symbol, then the params.
pub fn cvm_import(data: &[u8]) {
    let Some((length, rest)) = data.split_first_chunk::<4>() else {
        return;
    };
    let split = (u32::from_le_bytes(*length) as usize).min(rest.len());
    let (symbol, params) = rest.split_at(split);
    if let Ok(model) = cvm::import(symbol, params) {
        let bytes = model.model.encode();
        assert!(
            cvm_engine::load(&bytes, 1).is_ok(),
            "an imported model must validate"
        );
    }
}

/// The differential check: a random valid graph must give identical reports natively and in
/// wasm.
///
/// # Panics
/// When the engines disagree (the finding), or the wasm runtime fails.
pub fn differential(data: &[u8], wasm: &WasmEngine) {
    let generated = generate(&mut ByteSource::new(data), 8);
    let bytes = generated.model.encode();
    let native = execute(
        EngineKind::Native,
        None,
        &bytes,
        &generated.inputs,
        1 << 32,
        cvm_engine::gas::Schedule::NEWEST.version,
    );
    let in_wasm = execute(
        EngineKind::Wasm,
        Some(wasm),
        &bytes,
        &generated.inputs,
        1 << 32,
        cvm_engine::gas::Schedule::NEWEST.version,
    );
    let (native, in_wasm) = (
        native.map_err(|e| e.to_string()),
        in_wasm.map_err(|e| e.to_string()),
    );
    assert!(
        native.is_ok() && in_wasm.is_ok(),
        "execution failed: native {native:?}, wasm {in_wasm:?}"
    );
    assert_eq!(native, in_wasm, "native and wasm reports differ");
}
