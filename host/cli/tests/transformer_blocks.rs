//! The two transformer fixtures of `fixtures/models/transformer/` (a two-block encoder and a
//! two-block causal decoder written from the engine's operators by `generate.py`) against the
//! float networks they quantize: run natively and in wasm (which must agree, `run_both`), their
//! dequantized outputs are within a stated distance of `float_output.npy`, and every token's
//! argmax is the float network's. The fixtures test checks their blessed hashes and gas.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers fail loudly
#![allow(clippy::float_arithmetic, clippy::cast_precision_loss)] // dequantized outputs

mod common;

use common::run_both;
use cvm_cli::audit;
use cvm_engine::outcome::Status;
use cvm_formats::npy::read_npy_f32;
use cvm_runtime::wasm::WasmEngine;

/// The scale the case's description states its output stands at ("… at scale S (…").
fn output_scale(description: &str) -> f64 {
    let (_, rest) = description
        .split_once("at scale ")
        .expect("the description states the output's scale");
    let number: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | '-'))
        .collect();
    number.parse().expect("a number")
}

/// Runs a fixture both ways; returns the largest distance to the float output, the float
/// output's largest magnitude, and how many rows agree on their argmax, of how many.
fn compare(name: &str) -> (f64, f64, usize, usize) {
    let cases = cvm_fixtures::all_cases().expect("fixtures load");
    let case = cases
        .iter()
        .find(|case| case.name == format!("models/transformer/{name}/case"))
        .unwrap_or_else(|| panic!("no fixture models/transformer/{name}/case"));
    let prepared = audit::prepare(case).expect("the case prepares");
    let (bytes, _) = prepared.model.as_ref().expect("the model loads");
    let wasm = WasmEngine::new().expect("engine.wasm compiles");
    let report = run_both(&wasm, bytes, &prepared.inputs, u64::MAX, prepared.schedule)
        .expect("native and wasm agree");
    assert_eq!(report.error_code(), None, "{name} runs");
    let Status::Ok { outputs } = &report.outcome.status else {
        panic!("{name} failed");
    };
    let output = &outputs[0];
    let dir = case.path.parent().expect("the case's directory");
    let float = read_npy_f32(&std::fs::read(dir.join("float_output.npy")).expect("float output"))
        .expect("float32 .npy");
    assert_eq!(output.shape, float.shape, "{name}: shapes");
    let scale = output_scale(&case.description);
    let quantized: Vec<f64> = output.data.iter().map(|&q| f64::from(q) * scale).collect();
    let error = quantized
        .iter()
        .zip(&float.data)
        .map(|(q, &f)| (q - f64::from(f)).abs())
        .fold(0.0, f64::max);
    let range = float
        .data
        .iter()
        .map(|f| f64::from(f.abs()))
        .fold(0.0, f64::max);
    let width = float.shape[1] as usize;
    let argmax =
        |row: &[f64]| (0..row.len()).fold(0, |best, i| if row[i] > row[best] { i } else { best });
    let float64: Vec<f64> = float.data.iter().map(|&f| f64::from(f)).collect();
    let rows = quantized.len() / width;
    let agree = quantized
        .chunks_exact(width)
        .zip(float64.chunks_exact(width))
        .filter(|(q, f)| argmax(q) == argmax(f))
        .count();
    println!("{name}: largest error {error:.4} of a range {range:.4}, argmax {agree}/{rows}");
    (error, range, agree, rows)
}

/// The encoder's 16 × 32 normalized outputs (range about ±3, 8 bits at 2^−5) are within 0.25 of
/// the float network's (measured 0.12: the int8 activations' rounding through two blocks).
#[test]
fn the_encoder_follows_its_float_network() {
    let (error, range, agree, rows) = compare("encoder");
    assert!(error <= 0.25, "largest error {error} (range {range})");
    assert_eq!(
        agree, rows,
        "every token's largest feature is the float network's"
    );
}

/// The decoder's 16 × 48 logits are within 0.25 of the float network's (measured 0.12), and
/// every token predicts the float network's next token.
#[test]
fn the_decoder_follows_its_float_network() {
    let (error, range, agree, rows) = compare("decoder");
    assert!(error <= 0.25, "largest error {error} (range {range})");
    assert_eq!(
        agree, rows,
        "every token's prediction is the float network's"
    );
}
