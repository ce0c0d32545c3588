//! Fuzz target: `cvm_onnx::read` on arbitrary bytes must return Ok or Err, never panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = cvm_onnx::read(data);
});
