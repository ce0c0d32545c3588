//! Why a model or tensor file could not be read: problems of this machine or of the request,
//! not of the model's deterministic execution. They are never hashed.

use std::path::PathBuf;

/// A file that cannot be read or turned into a model or tensor.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A text model cannot be turned into a canonical model.
    #[error("{path}: {message}")]
    TextModel {
        /// The model file (or `<inline>`).
        path: String,
        /// What is wrong, naming the node and field.
        message: String,
    },
    /// An input file or its bytes are unusable.
    #[error("{0}")]
    Input(String),
}

impl ReadError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> ReadError {
        ReadError::Io {
            path: path.into(),
            source,
        }
    }
}

/// Reads a whole file, naming it on failure.
///
/// # Errors
/// [`ReadError::Io`].
pub fn read_file(path: &std::path::Path) -> Result<Vec<u8>, ReadError> {
    std::fs::read(path).map_err(|source| ReadError::io(path, source))
}
