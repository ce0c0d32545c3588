//! A pass over an ONNX file's protobuf wire format before it is decoded: how much memory the
//! repeated fields of the decoded messages would take.
//!
//! prost decodes every element of a repeated field into its vector before the reader can count
//! them, and an element can take far more memory than its bytes in the file: an empty
//! `TensorProto` is 2 bytes on the wire and about 200 in memory, a packed `int64` of 1 byte is
//! 8. So a crafted file within [`FILE_LIMIT`](crate::limits::FILE_LIMIT) could take tens of
//! gigabytes before any bound of [`limits`](crate::limits) is checked. This pass walks the
//! messages the decoder keeps ([`crate::proto`]), adds up what their repeated fields would
//! allocate, and stops at [`MAX_DECODED_BYTES`]. Singular fields (names, `raw_data`) keep at
//! most one value each, so they take at most the file's own size, and fields outside
//! [`crate::proto`] are skipped by prost as they are here.
//!
//! The bytes of external data (`external.rs`) are in other files and never decoded by prost:
//! their `external_data` entries are counted here like any repeated field, and their bytes are
//! bounded by [`MAX_EXTERNAL_BYTES`](crate::limits::MAX_EXTERNAL_BYTES) and each tensor's shape
//! before they are read.
//!
//! Malformed wire data ends the pass without an error: prost then reports it, with its message.

use std::mem::size_of;

use crate::error::OnnxError;
use crate::proto::{
    AttributeProto, GraphProto, NodeProto, OperatorSetIdProto, SparseTensorProto,
    StringStringEntryProto, TensorProto, ValueInfoProto, tensor_shape_proto::Dimension,
};

/// Most bytes the repeated fields of a decoded model may take: 512 MiB, twice the largest file
/// (whose weights are in `raw_data`, a singular field, in any model written by onnx).
pub const MAX_DECODED_BYTES: u64 = 512 << 20;

/// prost's own recursion limit: deeper messages fail to decode.
const MAX_DEPTH: usize = 100;

/// The message types of [`crate::proto`] that hold repeated fields or messages that do.
#[derive(Clone, Copy)]
enum Message {
    Model,
    Graph,
    Node,
    Attribute,
    Tensor,
    SparseTensor,
    ValueInfo,
    Type,
    TypeTensor,
    Shape,
    /// A message without repeated fields (an opset import, an external data entry, a
    /// dimension, a segment): only its own size counts.
    Leaf,
}

/// How a scalar element of a repeated field is encoded.
#[derive(Clone, Copy)]
enum Encoding {
    Varint,
    Fixed32,
}

/// What a field of a message is, for the memory its decoding takes.
enum Field {
    /// A repeated message field: each element a struct of `bytes`, plus what it holds.
    Repeated(Message, usize),
    /// A singular message field: held in its parent, plus what it holds.
    Single(Message),
    /// A repeated string or bytes field: each element a vector.
    Strings,
    /// A repeated scalar field, packed or not: each element `width` bytes.
    Scalars(usize, Encoding),
    /// Anything else: at most one value, or skipped.
    Other,
}

fn field(message: Message, tag: u64) -> Field {
    use Encoding::{Fixed32, Varint};
    use Field::{Other, Repeated, Scalars, Single, Strings};
    use Message as M;
    match (message, tag) {
        (M::Model, 7) => Single(M::Graph),
        (M::Model, 8) => Repeated(M::Leaf, size_of::<OperatorSetIdProto>()),
        (M::Graph, 1) => Repeated(M::Node, size_of::<NodeProto>()),
        (M::Graph, 5) => Repeated(M::Tensor, size_of::<TensorProto>()),
        (M::Graph, 15) => Repeated(M::SparseTensor, size_of::<SparseTensorProto>()),
        (M::Graph, 11 | 12) => Repeated(M::ValueInfo, size_of::<ValueInfoProto>()),
        (M::Node, 1 | 2) | (M::Attribute, 9) => Strings,
        (M::Node, 5) => Repeated(M::Attribute, size_of::<AttributeProto>()),
        (M::Attribute, 5) | (M::SparseTensor, 1 | 2) => Single(M::Tensor),
        (M::Attribute, 6) => Single(M::Graph),
        (M::Attribute, 7) | (M::Tensor, 4) => Scalars(size_of::<f32>(), Fixed32),
        (M::Attribute, 8) | (M::Tensor, 1 | 7) | (M::SparseTensor, 3) => {
            Scalars(size_of::<i64>(), Varint)
        }
        (M::Tensor, 5) => Scalars(size_of::<i32>(), Varint),
        (M::Attribute, 10) => Repeated(M::Tensor, size_of::<TensorProto>()),
        (M::Attribute, 11) => Repeated(M::Graph, size_of::<GraphProto>()),
        (M::Tensor, 13) => Repeated(M::Leaf, size_of::<StringStringEntryProto>()),
        (M::ValueInfo, 2) => Single(M::Type),
        (M::Type, 1) => Single(M::TypeTensor),
        (M::TypeTensor, 2) => Single(M::Shape),
        (M::Shape, 1) => Repeated(M::Leaf, size_of::<Dimension>()),
        _ => Other,
    }
}

/// Refuses a model whose decoding would allocate more than [`MAX_DECODED_BYTES`] for its
/// repeated fields, before it is decoded.
///
/// # Errors
/// [`OnnxError::Model`] naming the bound.
pub fn check(bytes: &[u8]) -> Result<(), OnnxError> {
    let mut total = 0u64;
    if walk(bytes, Message::Model, 0, &mut total).is_err() {
        return Err(OnnxError::Model(format!(
            "decoding the model would take more than {MAX_DECODED_BYTES} bytes for its lists \
             (nodes, tensors, attributes, dimensions and their values); the reader refuses it \
             before decoding"
        )));
    }
    Ok(())
}

/// Past the bound.
struct TooLarge;

/// Adds what decoding `bytes` as `message` allocates to `total`. Malformed data ends the walk
/// of its message quietly.
fn walk(bytes: &[u8], message: Message, depth: usize, total: &mut u64) -> Result<(), TooLarge> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    let add = |bytes: u64, total: &mut u64| {
        *total = total.saturating_add(bytes);
        if *total > MAX_DECODED_BYTES {
            Err(TooLarge)
        } else {
            Ok(())
        }
    };
    let mut at = 0;
    while at < bytes.len() {
        let Some(key) = varint(bytes, &mut at) else {
            return Ok(());
        };
        let field = field(message, key >> 3);
        match key & 7 {
            0 => {
                if varint(bytes, &mut at).is_none() {
                    return Ok(());
                }
                if let Field::Scalars(width, _) = field {
                    add(width as u64, total)?;
                }
            }
            1 => at += 8,
            5 => {
                at += 4;
                if let Field::Scalars(width, _) = field {
                    add(width as u64, total)?;
                }
            }
            2 => {
                let Some(payload) = varint(bytes, &mut at)
                    .and_then(|len| usize::try_from(len).ok())
                    .and_then(|len| bytes.get(at..at.checked_add(len)?))
                else {
                    return Ok(());
                };
                at += payload.len();
                match field {
                    Field::Repeated(child, size) => {
                        add(size as u64, total)?;
                        walk(payload, child, depth + 1, total)?;
                    }
                    Field::Single(child) => walk(payload, child, depth + 1, total)?,
                    Field::Strings => {
                        add((size_of::<Vec<u8>>() + payload.len()) as u64, total)?;
                    }
                    Field::Scalars(width, Encoding::Varint) => {
                        // One element ends at each byte without the continuation bit.
                        let count = payload.iter().filter(|&&byte| byte < 0x80).count();
                        add((count * width) as u64, total)?;
                    }
                    Field::Scalars(width, Encoding::Fixed32) => {
                        add((payload.len() / 4 * width) as u64, total)?;
                    }
                    Field::Other => {}
                }
            }
            // Groups (3, 4) and unknown wire types: prost fails on them.
            _ => return Ok(()),
        }
    }
    Ok(())
}

/// A base-128 varint at `*at` (at most ten bytes), advancing `*at`.
fn varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..70).step_by(7) {
        let byte = *bytes.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f).checked_shl(shift)?;
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::ModelProto;
    use prost::Message as _;

    fn graph_of(graph: GraphProto) -> Vec<u8> {
        ModelProto {
            graph: Some(graph),
            ..Default::default()
        }
        .encode_to_vec()
    }

    #[test]
    fn counts_what_decoding_allocates() {
        let mut total = 0;
        let nodes = 1000;
        let bytes = graph_of(GraphProto {
            node: vec![
                NodeProto {
                    input: vec!["x".into(), "y".into()],
                    ..Default::default()
                };
                nodes
            ],
            initializer: vec![TensorProto {
                int64_data: vec![1; 100],
                dims: vec![10, 10],
                ..Default::default()
            }],
            ..Default::default()
        });
        assert!(walk(&bytes, Message::Model, 0, &mut total).is_ok());
        let expected = nodes * (size_of::<NodeProto>() + 2 * (size_of::<Vec<u8>>() + 1))
            + size_of::<TensorProto>()
            + 102 * size_of::<i64>();
        assert_eq!(total, expected as u64);
        assert!(check(&bytes).is_ok());
    }

    #[test]
    fn refuses_empty_elements_past_the_bound_before_decoding() {
        // Two bytes on the wire per initializer (field 5, length 0), a whole TensorProto each in
        // memory: a model of one graph (field 7) holding them.
        let empty_initializers = |count: usize| {
            let graph = [0x2a, 0x00].repeat(count);
            let mut bytes = vec![0x3a];
            let mut len = graph.len();
            while len >= 0x80 {
                bytes.push((len & 0x7f) as u8 | 0x80);
                len >>= 7;
            }
            bytes.push(len as u8);
            bytes.extend_from_slice(&graph);
            bytes
        };
        let at_bound = MAX_DECODED_BYTES as usize / size_of::<TensorProto>();
        assert!(check(&empty_initializers(at_bound)).is_ok());
        let error = check(&empty_initializers(at_bound + 1))
            .unwrap_err()
            .to_string();
        assert!(error.contains("more than 536870912 bytes"), "{error}");
    }

    #[test]
    fn malformed_data_is_left_to_the_decoder() {
        for bytes in [&[0x3a, 0xff][..], &[0x3a, 0x05, 0x0a], &[0xff; 11], &[0x0b]] {
            assert!(check(bytes).is_ok());
        }
    }
}
