//! Fuzz target: random valid graphs steered by the input must agree natively and in wasm
//! (`cvm_testgen::robustness::differential`).
#![no_main]

use std::sync::OnceLock;

use cvm_runtime::wasm::WasmEngine;

static WASM: OnceLock<WasmEngine> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let wasm = WASM.get_or_init(|| match WasmEngine::new() {
        Ok(engine) => engine,
        Err(error) => panic!("engine.wasm does not compile: {error}"),
    });
    cvm_testgen::robustness::differential(data, wasm);
});
