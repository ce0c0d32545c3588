//! The reader's bounds. Each is checked before the work it bounds, in checked arithmetic, so
//! a hostile file is refused with a message instead of exhausting memory or time. The tensor
//! bounds are the engine's own; the counts leave room for QDQ models, whose Quantize and
//! Dequantize nodes outnumber the engine nodes they become about three to one.

use cvm_formats::FileLimit;

/// Most bytes of an ONNX file [`read_file`](crate::read_file) reads: 256 MiB. Protobuf itself
/// stops at 2 GiB; larger models keep their weights in external data, bounded by
/// [`MAX_EXTERNAL_BYTES`].
pub const FILE_LIMIT: FileLimit = FileLimit {
    bytes: 256 << 20,
    what: "model file (ONNX)",
};

/// Most bytes of external data (tensors stored in files beside the model, `data_location =
/// EXTERNAL`) [`read_file`](crate::read_file) reads for one model: 2 GiB, the float32 weights
/// of a network of 512 million parameters, far more than an integer model the engine runs can
/// hold. Checked before each tensor is read, as is its element count from its shape
/// ([`MAX_TENSOR_ELEMENTS`]), so no read is sized from a file's length.
pub const MAX_EXTERNAL_BYTES: u64 = 2 << 30;

/// Most elements of one tensor (an input, an initializer, a tensor attribute): the engine's.
pub const MAX_TENSOR_ELEMENTS: u64 = cvm_engine::limits::MAX_TENSOR_ELEMENTS;

/// Most dimensions of a tensor: the engine's.
pub const MAX_RANK: usize = cvm_engine::limits::MAX_RANK;

/// Most nodes in the graph.
pub const MAX_NODES: usize = 1 << 18;

/// Most initializers in the graph.
pub const MAX_INITIALIZERS: usize = 1 << 18;

/// Most graph inputs, and most graph outputs (each), initializers listed as inputs included.
pub const MAX_GRAPH_VALUES: usize = 1 << 16;

/// Most opset imports.
pub const MAX_OPSETS: usize = 256;

/// Most inputs, and most outputs (each), of one node: the engine's node input limit.
pub const MAX_NODE_VALUES: usize = cvm_engine::limits::MAX_NODE_INPUTS;

/// Most attributes of one node.
pub const MAX_ATTRIBUTES: usize = 256;

/// Most entries of one list attribute (`ints`, `floats`, `strings`).
pub const MAX_ATTRIBUTE_LIST: usize = 1 << 16;

/// Longest name (value, node, op_type, domain, attribute, tensor, producer, graph), in bytes.
pub const MAX_NAME_BYTES: usize = 4096;

/// Longest string attribute value, in bytes.
pub const MAX_STRING_BYTES: usize = 1 << 16;
