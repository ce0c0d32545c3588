//! Why an ONNX file could not be read: every [`OnnxError`] names what is wrong and where (the
//! node by index, name and op_type; the tensor, input or output by name; the axis), quoting
//! names from the file with [`quote`] so that a hostile name makes a message of a line.

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
    /// A tensor whose data lives in another file.
    #[error(
        "{tensor}: its data is external (data_location = EXTERNAL), which is not supported; \
         save the model with its tensors inside the file"
    )]
    ExternalData {
        /// The tensor, named.
        tensor: String,
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
