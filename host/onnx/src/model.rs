//! The typed graph [`read`](crate::read) returns: what an importer needs of an ONNX model,
//! checked, with no protobuf in sight.

use crate::tensor::{ElementType, Tensor};

/// An ONNX model read and checked: its opsets, static graph inputs, outputs, initializers and
/// nodes in topological order.
///
/// Architecture Invariant: every node input that is not empty names a graph input, an
/// initializer or an output of an earlier node; no value is defined twice; every graph
/// output names a defined value; every node's domain is imported.
#[derive(Clone, Debug, PartialEq)]
pub struct OnnxModel {
    /// The IR version the file declares (`ModelProto.ir_version`), at least 1.
    pub ir_version: u64,
    /// The opset version of the default domain (`""`, also written `"ai.onnx"`).
    pub opset_version: u64,
    /// The other imported domains, in file order; they may be unused.
    pub other_opsets: Vec<Opset>,
    /// The tool that wrote the file (`producer_name`), possibly empty.
    pub producer_name: String,
    /// Its version (`producer_version`), possibly empty.
    pub producer_version: String,
    /// The graph's name, possibly empty.
    pub graph_name: String,
    /// The graph inputs that are not initializers, in file order, each with a static shape.
    pub inputs: Vec<GraphInput>,
    /// The graph outputs, in file order.
    pub outputs: Vec<GraphOutput>,
    /// The initializers (the graph's constant tensors), in file order.
    pub initializers: Vec<Tensor>,
    /// The nodes, in file (topological) order.
    pub nodes: Vec<Node>,
}

/// An imported operator set other than the default domain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opset {
    /// Its domain, e.g. `com.microsoft`.
    pub domain: String,
    /// Its version.
    pub version: u64,
}

/// A graph input the caller feeds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraphInput {
    /// Its name, not empty.
    pub name: String,
    /// Its element type.
    pub element_type: ElementType,
    /// Its dimensions, outermost first; at most [`MAX_RANK`](crate::limits::MAX_RANK) of them,
    /// the fixed ones with at most [`MAX_TENSOR_ELEMENTS`](crate::limits::MAX_TENSOR_ELEMENTS)
    /// elements in all.
    pub shape: Vec<Dimension>,
}

impl GraphInput {
    /// Its shape when every dimension is fixed.
    pub fn static_shape(&self) -> Option<Vec<u32>> {
        self.shape.iter().map(Dimension::size).collect()
    }
}

/// One dimension of a graph input, as the file declares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dimension {
    /// A fixed size (`dim_value`).
    Fixed(u32),
    /// A named size left to the caller (`dim_param`), such as `"batch"`.
    Symbolic(String),
    /// A dimension with neither a value nor a name.
    Unknown,
}

impl Dimension {
    /// The size of a fixed dimension.
    pub fn size(&self) -> Option<u32> {
        match self {
            Dimension::Fixed(size) => Some(*size),
            Dimension::Symbolic(_) | Dimension::Unknown => None,
        }
    }
}

impl std::fmt::Display for Dimension {
    /// `8`, `"batch"`, or `?`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dimension::Fixed(size) => write!(f, "{size}"),
            Dimension::Symbolic(name) => write!(f, "{}", cvm_formats::quote(name)),
            Dimension::Unknown => write!(f, "?"),
        }
    }
}

/// A graph output: a value the model computes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraphOutput {
    /// Its name, not empty, defined in the graph.
    pub name: String,
    /// Its element type.
    pub element_type: ElementType,
    /// Its dimensions as the file declares them, `None` for a symbolic or missing one; `None`
    /// as a whole when the file declares no shape. Not checked against the graph: the
    /// importer infers shapes itself.
    pub shape: Option<Vec<Option<u32>>>,
}

/// One node: an operator applied to named values.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Its name, possibly empty; see [`Node::label`] for messages.
    pub name: String,
    /// The operator, e.g. `Conv`; not empty.
    pub op_type: String,
    /// The operator's domain, `""` for the default one (a file's `"ai.onnx"` is read as `""`).
    pub domain: String,
    /// The values it reads, in operator order; an empty name is an omitted optional input.
    pub inputs: Vec<String>,
    /// The values it defines, in operator order; an empty name is an omitted optional output.
    pub outputs: Vec<String>,
    /// Its attributes, in file order, with distinct names.
    pub attributes: Vec<Attribute>,
}

impl Node {
    /// The node as messages name it: `node 12 "conv1" (Conv)`, or `node 12 (Conv)` when it has
    /// no name; `index` is its position in [`OnnxModel::nodes`]. Names are quoted and cut.
    pub fn label(&self, index: usize) -> String {
        node_label(index, &self.name, &self.op_type)
    }

    /// The value of the attribute called `name`, if the node has one.
    pub fn attribute(&self, name: &str) -> Option<&AttributeValue> {
        self.attributes
            .iter()
            .find(|attribute| attribute.name == name)
            .map(|attribute| &attribute.value)
    }
}

/// [`Node::label`] of a node not yet converted.
pub(crate) fn node_label(index: usize, name: &str, op_type: &str) -> String {
    let op_type = crate::error::bare(op_type);
    if name.is_empty() {
        format!("node {index} ({op_type})")
    } else {
        format!("node {index} {} ({op_type})", cvm_formats::quote(name))
    }
}

/// A named attribute of a node.
#[derive(Clone, Debug, PartialEq)]
pub struct Attribute {
    /// Its name, not empty.
    pub name: String,
    /// Its value.
    pub value: AttributeValue,
}

/// An attribute's value. Floats are carried exactly as the file holds them (their bit
/// patterns), never computed on.
#[derive(Clone, Debug, PartialEq)]
pub enum AttributeValue {
    /// `FLOAT`.
    Float(f32),
    /// `INT`.
    Int(i64),
    /// `STRING`, valid UTF-8.
    String(String),
    /// `TENSOR`, decoded like an initializer (the `value` of a `Constant` node, for instance).
    Tensor(Tensor),
    /// `FLOATS`.
    Floats(Vec<f32>),
    /// `INTS`.
    Ints(Vec<i64>),
    /// `STRINGS`, each valid UTF-8.
    Strings(Vec<String>),
}
