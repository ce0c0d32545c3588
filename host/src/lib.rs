//! The host side of the CVM engine: runs `engine.wasm` in a locked-down wasmtime ([`wasm`]) or
//! natively ([`runner`]), hashes outcomes ([`hash`]), reads text models ([`text`]) and `.npy`
//! tensors ([`npy`]), and backs the `cvm` command-line tool (`src/main.rs`).
//!
//! Node-local failures ([`error::HostError`]) are kept apart from the engine's deterministic
//! outcomes: only outcomes are hashed.

pub mod audit;
pub mod cvm;
pub mod error;
pub mod graphgen;
pub mod hash;
pub mod inputs;
pub mod npy;
pub mod render;
pub mod robustness;
pub mod runner;
pub mod text;
pub mod wasm;

pub use error::HostError;
pub use hash::{HashAlgorithm, outcome_hash};
pub use runner::{EngineKind, ModelSource, execute, load_model, load_model_file};
