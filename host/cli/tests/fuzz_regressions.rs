//! Replays the inputs the fuzzers found worth keeping (`fixtures/fuzz/<target>/*`) and a seed
//! corpus built from every fixture model through the fuzz targets' checks
//! (`cvm_testgen::robustness`): none may panic.
//!
//! `CVM_WRITE_FUZZ_CORPUS=<dir> cargo test -p cvm-cli --test fuzz_regressions` also writes the
//! seeds to `<dir>/<target>/` as the starting corpus of `cargo fuzz run <target>`.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use std::path::PathBuf;

use cvm_fixtures::ModelSource;
use cvm_runtime::wasm::WasmEngine;
use cvm_testgen::robustness;

fn fuzz_dir() -> PathBuf {
    cvm_fixtures::root().join("fuzz")
}

/// Seeds per target, from the fixtures.
fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut seeds = Vec::new();
    for case in cvm_fixtures::all_cases().unwrap() {
        if let Ok(prepared) = cvm_cli::audit::prepare(&case)
            && let Ok((bytes, _)) = prepared.model
        {
            let mut canonical = 4096u16.to_le_bytes().to_vec();
            canonical.extend_from_slice(&bytes);
            seeds.push(("canonical", canonical));
        }
        match &case.model {
            ModelSource::Inline(value) => {
                seeds.push(("text_model", value.to_string().into_bytes()))
            }
            ModelSource::File(path) if path.is_dir() => {
                let (symbol, params) = cvm_formats::cvm::read_dir(path).unwrap();
                let mut data = (symbol.len() as u32).to_le_bytes().to_vec();
                data.extend_from_slice(&symbol);
                data.extend_from_slice(&params);
                seeds.push(("cvm_import", data));
            }
            ModelSource::File(_) => {}
        }
    }
    for seed in 0u64..32 {
        seeds.push((
            "differential",
            seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)
                .to_le_bytes()
                .to_vec(),
        ));
    }
    seeds
}

/// The fuzz targets (`host/fuzz/fuzz_targets/`), each with its saved inputs in `fixtures/fuzz/`.
const TARGETS: [&str; 4] = ["canonical", "text_model", "cvm_import", "differential"];

fn check(target: &str, data: &[u8], wasm: &WasmEngine) {
    match target {
        "canonical" => robustness::canonical(data),
        "text_model" => robustness::text_model(data),
        "cvm_import" => robustness::cvm_import(data),
        "differential" => robustness::differential(data, wasm),
        other => panic!("unknown fuzz target {other}"),
    }
}

#[test]
fn saved_inputs_and_seeds_do_not_panic() {
    let wasm = WasmEngine::new().unwrap();
    let seeds = seeds();
    if let Some(dir) = std::env::var_os("CVM_WRITE_FUZZ_CORPUS") {
        for (index, (target, data)) in seeds.iter().enumerate() {
            let target_dir = PathBuf::from(&dir).join(target);
            std::fs::create_dir_all(&target_dir).unwrap();
            std::fs::write(target_dir.join(format!("seed-{index:04}")), data).unwrap();
        }
    }
    for (target, data) in &seeds {
        check(target, data, &wasm);
    }
    let mut replayed = 0;
    for target in TARGETS {
        assert!(
            seeds.iter().any(|(t, _)| *t == target),
            "no seed for the fuzz target {target}"
        );
        // Every target keeps its saved inputs: a missing or empty directory is a defect, not a
        // reason to replay nothing.
        let dir = fuzz_dir().join(target);
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e} (the saved inputs of {target})", dir.display()));
        let mut saved = 0;
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_file() && path.extension().is_none_or(|e| e != "md") {
                check(target, &std::fs::read(&path).unwrap(), &wasm);
                saved += 1;
            }
        }
        assert!(saved > 0, "{} holds no saved input", dir.display());
        replayed += saved;
    }
    eprintln!(
        "{} seeds and {replayed} saved fuzz inputs replayed",
        seeds.len()
    );
}
