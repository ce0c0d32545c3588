//! Why an ONNX file could not be read: every [`OnnxError`] names what is wrong and where (the
//! node by index, name and op_type; the tensor, input or output by name; the axis), quoting
//! names from the file with [`quote`] so that a hostile name makes a message of a line.

use std::path::PathBuf;

use cvm_formats::{ReadError, quote};

use crate::tensor::type_name;

/// An ONNX file that cannot be read into an [`OnnxModel`](crate::OnnxModel).
///
/// These are problems of a file on this machine, never hashed; the messages are for people.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    /// The file could not be read, or is larger than [`FILE_LIMIT`](crate::limits::FILE_LIMIT).
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The bytes are not a protobuf `ModelProto`. prost names the message and field it was
    /// decoding (it reports no byte offset).
    #[error("not an ONNX model: {0}")]
    Decode(#[from] prost::DecodeError),
    /// Something about the model as a whole: no graph, its IR version, its opset imports.
    #[error("{0}")]
    Model(String),
    /// More items of a kind than the reader accepts (see [`limits`](crate::limits)).
    #[error("{what}: {count} {items}, more than the {limit} this reader accepts")]
    TooMany {
        /// Where the items are (`the graph`, a node, an attribute).
        what: String,
        /// What is counted (`nodes`, `inputs`, `values`).
        items: &'static str,
        /// How many there are.
        count: usize,
        /// The most accepted.
        limit: usize,
    },
    /// A name or string longer than the reader accepts.
    #[error("{what}: {bytes} bytes, longer than the {limit} this reader accepts")]
    TooLong {
        /// The name or string, and where it is.
        what: String,
        /// Its length in bytes.
        bytes: usize,
        /// The most accepted.
        limit: usize,
    },
    /// A shape the reader cannot carry: missing, negative, beyond the rank or element limits.
    #[error("{what}: {message}")]
    Shape {
        /// The input, output or tensor, named.
        what: String,
        /// What is wrong with its shape.
        message: String,
    },
    /// An element type other than float32, uint8, int8, int32 and int64.
    #[error(
        "{what}: element type {} is not supported (float32, uint8, int8, int32 and int64 are)",
        type_name(*data_type)
    )]
    UnsupportedType {
        /// The input, output or tensor, named.
        what: String,
        /// The `TensorProto.DataType` code found.
        data_type: i32,
    },
    /// A tensor whose data is stored in another file (`data_location = EXTERNAL`) and cannot
    /// be read from it.
    #[error("{tensor}: {problem}")]
    ExternalData {
        /// The tensor, named.
        tensor: String,
        /// What is wrong with its external data.
        problem: ExternalDataError,
    },
    /// A tensor whose data does not match its type and shape.
    #[error("{tensor}: {message}")]
    TensorData {
        /// The tensor, named.
        tensor: String,
        /// What is wrong: a length, a field, a value out of range.
        message: String,
    },
    /// A node attribute the reader cannot type.
    #[error("{node}, attribute {attribute}: {message}")]
    Attribute {
        /// The node: index, name and op_type.
        node: String,
        /// The attribute's name, quoted.
        attribute: String,
        /// What is wrong with it.
        message: String,
    },
    /// A problem with the graph's structure: a node, value or output not where it should be.
    #[error("{0}")]
    Graph(String),
}

/// Why a tensor's external data cannot be read (`data_location = EXTERNAL`; the rules are in
/// [`read_file`](crate::read_file)). Locations from the file are quoted with [`quote`]; paths
/// on this machine are shown as they resolve.
#[derive(Debug, thiserror::Error)]
pub enum ExternalDataError {
    /// The model was read from memory ([`read`](crate::read)), with no directory to find its
    /// data in.
    #[error(
        "its data is external (data_location = EXTERNAL), in a file beside the model; read the \
         model from its file (cvm_onnx::read_file), which reads external data from the model's \
         directory"
    )]
    InMemory,
    /// `external_data` entries on a tensor whose `data_location` is not `EXTERNAL`.
    #[error("it has external_data entries, but its data_location is DEFAULT (0), not EXTERNAL (1)")]
    NotMarkedExternal,
    /// An external tensor that also holds data in the model file.
    #[error("its data is external (data_location = EXTERNAL), yet it also holds data in {field}")]
    AlsoInline {
        /// The field holding data: `raw_data`, `float_data`, `int32_data` or `int64_data`.
        field: &'static str,
    },
    /// An `external_data` key other than `location`, `offset`, `length` and `checksum`.
    #[error(
        "its external_data has the key {key}, which is not one of location, offset, length and \
         checksum"
    )]
    UnknownKey {
        /// The key, quoted.
        key: String,
    },
    /// An `external_data` key given twice.
    #[error("its external_data gives {key} twice")]
    RepeatedKey {
        /// The key.
        key: &'static str,
    },
    /// An `offset` or `length` that is not a byte count.
    #[error(
        "its external_data {key} {value} is not a byte count (decimal digits, at most {})",
        u64::MAX
    )]
    BadNumber {
        /// `offset` or `length`.
        key: &'static str,
        /// The value, quoted.
        value: String,
    },
    /// No `location` entry.
    #[error("its external_data has no location, the file that holds its data")]
    MissingLocation,
    /// `offset` + `length` past 2^64 − 1.
    #[error("its external data offset {offset} + length {length} overflows 64 bits")]
    Overflow {
        /// The offset given.
        offset: u64,
        /// The length given.
        length: u64,
    },
    /// A length other than what the tensor's shape and element type take.
    #[error(
        "its external data length {length}{} disagrees with its shape {shape:?}: {elements} \
         {element_type} elements take {expected} bytes",
        if *to_end { " (from its offset to the end of the file)" } else { "" }
    )]
    LengthMismatch {
        /// The length given, or from the offset to the file's end when none is.
        length: u64,
        /// Whether `length` is what remains of the file, no length being given.
        to_end: bool,
        /// The tensor's shape.
        shape: Vec<u32>,
        /// Its element count.
        elements: usize,
        /// Its element type, as messages name it (`float32`).
        element_type: &'static str,
        /// The bytes its shape takes.
        expected: u64,
    },
    /// Reading the tensor would take the model's external data past
    /// [`MAX_EXTERNAL_BYTES`](crate::limits::MAX_EXTERNAL_BYTES).
    #[error(
        "its {bytes} bytes of external data would bring the model's to more than {limit} bytes \
         (read so far: {read}), the most this reader reads for one model"
    )]
    TooMuch {
        /// The tensor's bytes.
        bytes: u64,
        /// The external bytes of the model read before it.
        read: u64,
        /// The limit.
        limit: u64,
    },
    /// An empty location.
    #[error("its external data location is empty")]
    EmptyLocation,
    /// An absolute location.
    #[error(
        "its external data location {location} is an absolute path; a location is relative to \
         the model's directory"
    )]
    AbsoluteLocation {
        /// The location, quoted.
        location: String,
    },
    /// A location with a component that is not a plain name.
    #[error(
        "its external data location {location} has the component {component}; each component \
         must be a plain name (not \"..\", \".\" or empty), so that it stays inside the \
         model's directory"
    )]
    LocationComponent {
        /// The location, quoted.
        location: String,
        /// The component, quoted.
        component: String,
    },
    /// A location that resolves, through symbolic links, outside the model's directory.
    #[error(
        "its external data location {location} resolves to {}, outside the model's directory {}",
        target.display(),
        directory.display()
    )]
    Outside {
        /// The location, quoted.
        location: String,
        /// Where it resolves, symbolic links followed.
        target: PathBuf,
        /// The model's directory, symbolic links followed.
        directory: PathBuf,
    },
    /// A location that is a directory, a device, a FIFO or a socket.
    #[error("its external data location {location} is {kind}, not a regular file")]
    NotAFile {
        /// The location, quoted.
        location: String,
        /// What it is: `a directory`, or `a device, FIFO or socket`.
        kind: &'static str,
    },
    /// The model's directory could not be resolved.
    #[error("the model's directory {} cannot be resolved: {source}", directory.display())]
    Directory {
        /// The directory.
        directory: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The data file could not be found, opened or read.
    #[error("its external data file {location} cannot be read ({}): {source}", path.display())]
    Io {
        /// The location, quoted.
        location: String,
        /// The path it was read at.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// An offset past the file's end.
    #[error(
        "its external data offset {offset} is past the end of {location}, which holds {file_bytes} \
         bytes"
    )]
    OffsetPastEnd {
        /// The location, quoted.
        location: String,
        /// The offset given.
        offset: u64,
        /// The file's size.
        file_bytes: u64,
    },
    /// A range that runs past the file's end.
    #[error(
        "its external data, {length} bytes from offset {offset}, runs past the end of {location}, \
         which holds {file_bytes} bytes"
    )]
    LengthPastEnd {
        /// The location, quoted.
        location: String,
        /// The offset given.
        offset: u64,
        /// The length given.
        length: u64,
        /// The file's size.
        file_bytes: u64,
    },
}

/// `text` escaped and cut like [`quote`] does, without the quotes: for op types and domains
/// shown in parentheses.
pub(crate) fn bare(text: &str) -> String {
    let quoted = quote(text);
    // `quote` always starts with `"` and has a closing `"` before any `… (N bytes)` suffix.
    match quoted.rfind('"') {
        Some(end) if end > 0 => format!("{}{}", &quoted[1..end], &quoted[end + 1..]),
        _ => quoted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_text_is_escaped_and_cut() {
        assert_eq!(bare("Conv"), "Conv");
        assert_eq!(bare("a\"b\n"), "a\\\"b\\n");
        assert_eq!(bare(""), "");
        let long = "x".repeat(1000);
        assert_eq!(bare(&long), format!("{}… (1000 bytes)", "x".repeat(64)));
    }
}
