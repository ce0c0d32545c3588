//! `cvm generate` on the hand-written causal decoder (`fixtures/models/transformer/decoder`):
//! the same ids, gas and chain natively and in wasm, and equal to the runtime API's; a failed
//! step is exit 1; prompts and models that cannot serve are usage errors (exit 2) saying why.
//! And on the character model of `fixtures/onnx/charlm`, imported from ONNX.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use std::path::{Path, PathBuf};
use std::process::Command;

use cvm_formats::npy::{NpyArray, write_npy};
use cvm_runtime::generate::generate;
use cvm_runtime::hash::hex;
use cvm_runtime::{Runtime, RuntimeConfig};
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn decoder() -> PathBuf {
    root().join("fixtures/models/transformer/decoder/model.json")
}

/// Writes an int32 .npy of `data` with `shape` into this test's temporary directory.
fn prompt(name: &str, shape: &[u32], data: &[i32]) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("generate-{name}.npy"));
    let array = NpyArray {
        shape: shape.to_vec(),
        data: data.to_vec(),
    };
    std::fs::write(&path, write_npy(&array)).unwrap();
    path
}

/// Runs `cvm generate` and returns its exit status, stdout and stderr.
fn cvm(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_cvm"))
        .arg("generate")
        .args(args)
        .env(
            "CVM_CACHE_DIR",
            std::env::temp_dir().join("cvm-generate-tests-cache"),
        )
        .output()
        .expect("cvm starts");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `cvm generate MODEL --ids IDS --tokens N --json` natively and in wasm: both must succeed
/// and print the same bytes, which are returned, with the object they hold.
fn generate_both(model: &Path, ids: &Path, tokens: usize) -> (Value, String) {
    let tokens = tokens.to_string();
    let run = |engine: &str| {
        let (status, stdout, stderr) = cvm(&[
            model.to_str().unwrap(),
            "--ids",
            ids.to_str().unwrap(),
            "--tokens",
            &tokens,
            "--engine",
            engine,
            "--json",
        ]);
        assert_eq!(status, 0, "{stderr}");
        stdout
    };
    let (native, wasm) = (run("native"), run("wasm"));
    assert_eq!(native, wasm);
    (serde_json::from_str(&wasm).unwrap(), wasm)
}

#[test]
fn native_wasm_and_the_runtime_api_generate_alike() {
    let ids = prompt("three", &[1, 3], &[12, 12, 43]);
    let model = decoder();
    let (wasm, _) = generate_both(&model, &ids, 18);
    assert_eq!(wasm["ids"].as_array().unwrap().len(), 21);
    assert_eq!(wasm["steps"].as_array().unwrap().len(), 18);

    let text = std::fs::read_to_string(&model).unwrap();
    let bytes = cvm_formats::text::parse_text_model(&text, model.parent().unwrap(), "decoder")
        .unwrap()
        .encode();
    let runtime = Runtime::new(&RuntimeConfig::compile_in_process()).unwrap();
    let loaded = runtime.load(&bytes, 1).unwrap();
    let api = generate(
        &loaded,
        &[12, 12, 43],
        18,
        cvm_engine::limits::MAX_GAS_PER_RUN,
    )
    .unwrap();
    assert_eq!(wasm["chain"], hex(&api.chain()));
    assert_eq!(wasm["gas_used"], api.gas_used());
    let ids: Vec<i64> = wasm["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_i64().unwrap())
        .collect();
    assert_eq!(
        ids,
        api.ids.iter().map(|&id| i64::from(id)).collect::<Vec<_>>()
    );
}

#[test]
fn a_failed_step_ends_the_generation_with_status_1() {
    let ids = prompt("short", &[2], &[1, 2]);
    let (status, stdout, _) = cvm(&[
        decoder().to_str().unwrap(),
        "--ids",
        ids.to_str().unwrap(),
        "--tokens",
        "3",
        "--gas-limit",
        "1000",
        "--engine",
        "native",
    ]);
    assert_eq!(status, 1);
    assert!(stdout.contains("step 1: error OutOfGas"), "{stdout}");
    assert!(stdout.contains("generated 0 tokens"), "{stdout}");
}

#[test]
fn prompts_and_models_that_cannot_serve_are_refused() {
    let decoder = decoder();
    let decoder = decoder.to_str().unwrap();
    let digits = root().join("fixtures/models/digits");
    let cases = [
        (
            decoder,
            prompt("matrix", &[2, 3], &[1; 6]),
            "token ids are (n) or (1, n)",
        ),
        (
            decoder,
            prompt("outside", &[2], &[1, 48]),
            "outside the vocabulary of 48",
        ),
        (
            decoder,
            prompt("negative", &[2], &[1, -3]),
            "-3 at position 1 is negative",
        ),
        (decoder, prompt("empty", &[0], &[]), "no token"),
        (
            digits.to_str().unwrap(),
            prompt("one", &[1], &[1]),
            "not a language model",
        ),
    ];
    for (model, ids, message) in cases {
        let (status, _, stderr) = cvm(&[
            model,
            "--ids",
            ids.to_str().unwrap(),
            "--tokens",
            "2",
            "--engine",
            "native",
        ]);
        assert_eq!(status, 2, "{message}: {stderr}");
        assert!(stderr.contains(message), "{message}: {stderr}");
    }
    let missing = root().join("no-such-prompt.npy");
    let (status, _, stderr) = cvm(&[decoder, "--ids", missing.to_str().unwrap(), "--tokens", "1"]);
    assert_eq!(status, 2);
    assert!(stderr.contains("no-such-prompt.npy"), "{stderr}");
}

/// The character model of `fixtures/onnx/charlm`, imported with no option, generates the same
/// text natively and in wasm from a held-out prompt of 10 characters.
#[test]
fn an_imported_language_model_generates_alike_natively_and_in_wasm() {
    let charlm = root().join("fixtures/onnx/charlm");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("generate-charlm");
    let output = Command::new(env!("CARGO_BIN_EXE_cvm"))
        .args([
            "import",
            charlm.join("charlm_dynamo.onnx").to_str().unwrap(),
        ])
        .args([
            "--calibrate",
            charlm.join("calibration_ids.npy").to_str().unwrap(),
        ])
        .args(["-o", dir.to_str().unwrap()])
        .output()
        .expect("cvm starts");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let held_out =
        cvm_formats::npy::read_npy(&std::fs::read(charlm.join("validation_ids.npy")).unwrap())
            .unwrap();
    let prompt = NpyArray {
        shape: vec![10],
        data: held_out.data[..10].to_vec(),
    };
    let prompt = blessed(&charlm.join("prompt.npy"), write_npy(&prompt));
    let (wasm, stdout) = generate_both(&dir, &prompt, 32);
    assert_eq!(wasm["ids"].as_array().unwrap().len(), 42);
    // The 32 steps are pinned: `scripts/cross-arch.sh` compares the aarch64 runs with this file.
    blessed(&charlm.join("generate-32.json"), stdout.into_bytes());
}

/// Checks that the committed file at `path` holds `bytes`, or with `CVM_BLESS=1` writes them.
/// Returns the path.
fn blessed(path: &Path, bytes: Vec<u8>) -> PathBuf {
    if std::env::var_os("CVM_BLESS").is_some() {
        std::fs::write(path, &bytes).unwrap();
    }
    let committed = std::fs::read(path).unwrap_or_default();
    assert!(
        committed == bytes,
        "{} differs from this run (CVM_BLESS=1 rewrites it after review)",
        path.display()
    );
    path.to_path_buf()
}
