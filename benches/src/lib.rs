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
