//! Node-local failures of the `cvm` tool: problems of this machine or of the request, not of the
//! model's deterministic execution. They are never hashed and map to exit status 2.

use std::path::PathBuf;

/// A failure that says nothing about the model's consensus outcome.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The wasm runtime failed (compilation, instantiation, a trap, fuel or memory exhaustion).
    #[error("wasm engine failure: {0}")]
    Wasm(String),
    /// A text model cannot be turned into a canonical model.
    #[error("{path}: {message}")]
    TextModel {
        /// The model file (or `<inline>`).
        path: String,
        /// What is wrong, naming the node and field.
        message: String,
    },
    /// An input file or argument is unusable.
    #[error("{0}")]
    Input(String),
    /// The command line is wrong.
    #[error("{0}")]
    Usage(String),
}

impl From<cvm_formats::ReadError> for HostError {
    fn from(error: cvm_formats::ReadError) -> HostError {
        match error {
            cvm_formats::ReadError::Io { path, source } => HostError::Io { path, source },
            cvm_formats::ReadError::TextModel { path, message } => {
                HostError::TextModel { path, message }
            }
            cvm_formats::ReadError::Input(message) => HostError::Input(message),
        }
    }
}

impl From<cvm_runtime::NodeError> for HostError {
    fn from(error: cvm_runtime::NodeError) -> HostError {
        match error {
            cvm_runtime::NodeError::Wasm(message) => HostError::Wasm(message),
            cvm_runtime::NodeError::Request(message) => HostError::Input(message),
        }
    }
}

impl HostError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> HostError {
        HostError::Io {
            path: path.into(),
            source,
        }
    }
}

/// Reads a whole file, naming it on failure.
///
/// # Errors
/// [`HostError::Io`].
pub fn read_file(path: &std::path::Path) -> Result<Vec<u8>, HostError> {
    std::fs::read(path).map_err(|source| HostError::io(path, source))
}
