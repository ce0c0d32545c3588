//! The `cvm` command-line tool's library: running a model natively or in wasm behind one
//! function ([`runner`]), matching `--input` arguments to declared inputs ([`inputs`]), JSON and
//! text output ([`render`]), the progress bar of long commands ([`progress`]), and `cvm audit`
//! over the fixtures ([`audit`]).
//!
//! Node-local failures ([`error::HostError`]) are kept apart from the engine's deterministic
//! outcomes: only outcomes are hashed.

pub mod audit;
pub mod error;
pub mod inputs;
pub mod progress;
pub mod render;
pub mod runner;

pub use error::HostError;
pub use runner::{EngineKind, ModelSource, execute, load_model, load_model_file};
