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
    /// A file is larger than its kind of file may be.
    #[error(
        "{}: larger than {} bytes, the most a {} may have (docs/limits.md)",
        path.display(),
        limit.bytes,
        limit.what
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit it exceeds.
        limit: FileLimit,
    },
}

/// Most characters of user-supplied text (a name, a key, a value) a message quotes.
pub const QUOTED_CHARS: usize = 64;

/// `text` as a message quotes it: in double quotes, with control characters and quotes
/// escaped, cut to its first [`QUOTED_CHARS`] characters (then `… (N bytes)`) when longer, so a
/// hostile name of a megabyte makes a message of a line.
pub fn quote(text: &str) -> String {
    let escaped: String = text.chars().flat_map(char::escape_debug).collect();
    let mut out = String::from("\"");
    out.push_str(cut(&escaped));
    out.push('"');
    if escaped.len() > cut(&escaped).len() {
        out.push_str(&format!("… ({} bytes)", text.len()));
    }
    out
}

/// A value as a message shows it (a JSON value, already escaped): as it is, cut to its first
/// [`QUOTED_CHARS`] characters (then `… (N bytes)`) when longer.
pub fn excerpt(text: &str) -> String {
    let shown = cut(text);
    if shown.len() < text.len() {
        format!("{shown}… ({} bytes)", text.len())
    } else {
        text.to_string()
    }
}

/// The first [`QUOTED_CHARS`] characters of `text`.
fn cut(text: &str) -> &str {
    text.char_indices()
        .nth(QUOTED_CHARS)
        .map_or(text, |(end, _)| &text[..end])
}

/// The most bytes a kind of file may have; checked before the file is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileLimit {
    /// Most bytes.
    pub bytes: u64,
    /// The kind of file, for messages.
    pub what: &'static str,
}

impl FileLimit {
    /// A model file (canonical binary or text model) or a CVM model's `symbol` or `params`:
    /// 1 GiB, the most memory a model's tensors may plan for.
    pub const MODEL: FileLimit = FileLimit {
        bytes: 1 << 30,
        what: "model file",
    };
    /// A tensor file (an `.npy` input or parameter, a raw CVM input): 2^29 bytes, the largest
    /// tensor the engine admits (2^26 elements) at 8 bytes an element, plus 64 KiB of header.
    pub const TENSOR: FileLimit = FileLimit {
        bytes: (1 << 29) + (1 << 16),
        what: "tensor file",
    };
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

/// Reads a whole file of at most `limit` bytes, naming it on failure. A regular file's size is
/// checked before anything is read; a stream (a pipe, a device) is read up to one byte past the
/// limit, its buffer never growing beyond that, so memory stays bounded whatever it holds.
///
/// # Errors
/// [`ReadError::Io`], or [`ReadError::TooLarge`] past the limit.
pub fn read_file(path: &std::path::Path, limit: FileLimit) -> Result<Vec<u8>, ReadError> {
    use std::io::Read;
    /// Bytes read at a time from a stream.
    const CHUNK: usize = 1 << 20;
    let io = |source| ReadError::io(path, source);
    let too_large = || ReadError::TooLarge {
        path: path.to_path_buf(),
        limit,
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let metadata = file.metadata().map_err(io)?;
    if metadata.is_file() && metadata.len() > limit.bytes {
        return Err(too_large());
    }
    // One byte past the limit tells a file at the limit from a longer one.
    let cap = usize::try_from(limit.bytes.saturating_add(1)).unwrap_or(usize::MAX);
    let expected = if metadata.is_file() {
        usize::try_from(metadata.len()).map_or(cap, |len| len.saturating_add(1))
    } else {
        CHUNK
    };
    let mut bytes: Vec<u8> = Vec::with_capacity(expected.min(cap));
    loop {
        if bytes.len() >= cap {
            return Err(too_large());
        }
        if bytes.len() == bytes.capacity() {
            let grow = bytes.capacity().max(CHUNK).min(cap - bytes.len());
            bytes.reserve_exact(grow);
        }
        let start = bytes.len();
        let end = bytes.capacity().min(start.saturating_add(CHUNK));
        bytes.resize(end, 0);
        match file.read(&mut bytes[start..]) {
            Ok(0) => {
                bytes.truncate(start);
                return Ok(bytes);
            }
            Ok(n) => bytes.truncate(start + n),
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {
                bytes.truncate(start);
            }
            Err(error) => return Err(io(error)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_are_bounded_and_escaped() {
        assert_eq!(quote("conv1"), "\"conv1\"");
        assert_eq!(quote("a\"b\n"), "\"a\\\"b\\n\"");
        let long = "x".repeat(1 << 20);
        let quoted = quote(&long);
        assert_eq!(
            quoted,
            format!("\"{}\"… (1048576 bytes)", "x".repeat(QUOTED_CHARS))
        );
        // Characters, not bytes: a multi-byte character is never cut.
        assert!(quote(&"é".repeat(100)).starts_with(&format!("\"{}\"…", "é".repeat(64))));
        assert_eq!(excerpt("1.5"), "1.5");
        assert_eq!(
            excerpt(&"7".repeat(100)),
            format!("{}… (100 bytes)", "7".repeat(64))
        );
    }

    #[test]
    fn files_are_read_up_to_their_limit() {
        let dir = std::env::temp_dir().join(format!("cvm-read-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let limit = FileLimit {
            bytes: 10,
            what: "test file",
        };
        let at = dir.join("at");
        std::fs::write(&at, [7u8; 10]).unwrap();
        assert_eq!(read_file(&at, limit).unwrap(), vec![7u8; 10]);
        let past = dir.join("past");
        std::fs::write(&past, [7u8; 11]).unwrap();
        let error = read_file(&past, limit).unwrap_err().to_string();
        assert!(
            error.ends_with(
                "past: larger than 10 bytes, the most a test file may have (docs/limits.md)"
            ),
            "{error}"
        );
        // A stream without end stops one byte past the limit.
        if std::path::Path::new("/dev/zero").exists() {
            let error = read_file(std::path::Path::new("/dev/zero"), limit).unwrap_err();
            assert!(matches!(error, ReadError::TooLarge { .. }), "{error}");
        }
        assert!(matches!(
            read_file(&dir.join("missing"), limit),
            Err(ReadError::Io { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
