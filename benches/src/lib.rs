//! Shared inputs of the criterion benches: the fixture models and reproducible int8 data.

use std::path::{Path, PathBuf};

use cvm_engine::exec::InputTensor;
use cvm_host::HostError;

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Canonical bytes of the README CNN fixture.
///
/// # Errors
/// If the fixture cannot be read or converted.
pub fn cnn_model() -> Result<Vec<u8>, HostError> {
    Ok(cvm_host::load_model_file(&workspace().join("fixtures/models/cnn/model.json"))?.bytes)
}

/// The README CNN's input.
///
/// # Errors
/// If the fixture cannot be read.
pub fn cnn_input() -> Result<InputTensor, HostError> {
    cvm_host::inputs::read_input(&workspace().join("fixtures/models/cnn/input.npy"))
}

/// Canonical bytes of the realistic `generate_proposals_v2` fixture (N = 2, H = 54, W = 40,
/// A = 15, pre 2000, post 1000).
///
/// # Errors
/// If the fixture cannot be read or converted.
pub fn proposals_model() -> Result<Vec<u8>, HostError> {
    let path = workspace().join("fixtures/models/proposals/model.json");
    Ok(cvm_host::load_model_file(&path)?.bytes)
}

/// The realistic proposals case's five inputs, in declared order.
///
/// # Errors
/// If a fixture file cannot be read.
pub fn proposals_inputs() -> Result<Vec<InputTensor>, HostError> {
    ["scores", "bbox_deltas", "im_shape", "anchors", "variances"]
        .iter()
        .map(|name| {
            let path = workspace().join(format!("fixtures/models/proposals/{name}.npy"));
            cvm_host::inputs::read_input(&path)
        })
        .collect()
}

/// `n` reproducible values in −127..=127 (xorshift; the same on every machine).
pub fn int8_values(n: usize, seed: u64) -> Vec<i32> {
    let mut state = seed | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % 255) as i32 - 127
        })
        .collect()
}
