//! Helpers shared by the host's integration tests.

use cvm_cli::runner::{EngineKind, execute};
use cvm_engine::Report;
use cvm_engine::exec::InputTensor;
use cvm_runtime::wasm::WasmEngine;

/// Runs `model` natively and in `wasm` under `schedule`; the report, once both agree.
///
/// # Errors
/// Either run failing on the host side, or the two reports differing.
pub fn run_both(
    wasm: &WasmEngine,
    model: &[u8],
    inputs: &[InputTensor],
    gas_limit: u64,
    schedule: u32,
) -> Result<Report, String> {
    let native = execute(EngineKind::Native, None, model, inputs, gas_limit, schedule)
        .map_err(|e| e.to_string())?;
    let in_wasm = execute(
        EngineKind::Wasm,
        Some(wasm),
        model,
        inputs,
        gas_limit,
        schedule,
    )
    .map_err(|e| e.to_string())?;
    if native != in_wasm {
        return Err(format!(
            "schedule {schedule}: native and wasm reports differ:\nnative: {native:?}\nwasm:   {in_wasm:?}"
        ));
    }
    Ok(native)
}
