//! The checks behind the fuzz targets (`host/fuzz`) and the regression suite that replays their
//! saved inputs (`fixtures/fuzz/`): each takes arbitrary bytes and must return without panicking,
//! whatever the bytes are.

use std::path::Path;

use cvm_engine::exec::InputTensor;

use cvm_engine::Report;
use cvm_formats::{cvm, text};
use cvm_runtime::NodeError;
use cvm_runtime::wasm::WasmEngine;

use crate::graphgen::{ByteSource, generate};

/// The gas schedule version the differential check loads under: the engine's current one.
const SCHEDULE: u32 = cvm_engine::gas::Schedule::NEWEST.version;

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
    // The gas of the graph alone takes the same reader and checks.
    let _ = cvm::graph_gas(symbol);
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
    let gas_limit = 1 << 32;
    let native = match cvm_engine::load(&bytes, SCHEDULE) {
        Ok(model) => cvm_engine::run(&model, generated.inputs.clone(), gas_limit),
        Err(report) => *report,
    };
    let in_wasm =
        run_in_wasm(wasm, &bytes, &generated.inputs, gas_limit).map_err(|e| e.to_string());
    assert!(in_wasm.is_ok(), "execution failed in wasm: {in_wasm:?}");
    assert_eq!(Ok(native), in_wasm, "native and wasm reports differ");
}

/// Loads `bytes` under [`SCHEDULE`] in a fresh instance and runs them on `inputs`.
fn run_in_wasm(
    wasm: &WasmEngine,
    bytes: &[u8],
    inputs: &[InputTensor],
    gas_limit: u64,
) -> Result<Report, NodeError> {
    let mut session = wasm.session()?;
    if let Some(rejected) = session.load(bytes, SCHEDULE)? {
        return Ok(rejected);
    }
    let encoded = borsh::to_vec(inputs).map_err(|error| NodeError::Request(error.to_string()))?;
    session.run(&encoded, gas_limit)
}
