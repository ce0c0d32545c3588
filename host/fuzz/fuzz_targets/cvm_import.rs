//! Fuzz target: `cvm_testgen::robustness::cvm_import` on arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cvm_testgen::robustness::cvm_import(data));
