//! Node-local failures of the `cvm` tool: problems of this machine or of the request, not of the
//! model's deterministic execution. They are never hashed and map to exit status 2.

use std::path::PathBuf;

pub use cvm_formats::{FileLimit, ReadError, read_file};

/// A failure that says nothing about the model's consensus outcome.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// A file could not be read or written, or a model or input file is unusable.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The wasm runtime failed (compilation, instantiation, a trap, fuel or memory exhaustion).
    #[error("wasm engine failure: {0}")]
    Wasm(String),
    /// An ONNX model or its samples could not be imported; the message names the file, the node
    /// and the reason.
    #[error("{0}")]
    Import(String),
    /// The command line is wrong.
    #[error("{0}")]
    Usage(String),
    /// Standard output could not be written: a closed pipe, a full disk.
    #[error("writing to standard output: {0}")]
    Output(std::io::Error),
}

impl From<cvm_runtime::NodeError> for HostError {
    fn from(error: cvm_runtime::NodeError) -> HostError {
        match error {
            cvm_runtime::NodeError::Wasm(message) => HostError::Wasm(message),
            cvm_runtime::NodeError::Request(message) => ReadError::Input(message).into(),
        }
    }
}

impl HostError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> HostError {
        ReadError::io(path, source).into()
    }

    /// An unusable input file or argument.
    pub fn input(message: impl Into<String>) -> HostError {
        ReadError::Input(message.into()).into()
    }
}
