//! The conversion of a decoded `ModelProto` into an [`OnnxModel`], and the checks on the way:
//! opsets, static input shapes, tensors, attributes, and the graph's definitions and order.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use cvm_formats::quote;
use prost::Message;

use crate::error::OnnxError;
use crate::external::External;
use crate::limits::{
    FILE_LIMIT, MAX_ATTRIBUTE_LIST, MAX_ATTRIBUTES, MAX_GRAPH_VALUES, MAX_INITIALIZERS,
    MAX_NAME_BYTES, MAX_NODE_VALUES, MAX_NODES, MAX_OPSETS, MAX_RANK, MAX_STRING_BYTES,
    MAX_TENSOR_ELEMENTS,
};
use crate::model::{
    Attribute, AttributeValue, Dimension, GraphInput, GraphOutput, Node, OnnxModel, Opset,
    node_label,
};
use crate::proto::attribute_proto::AttributeType;
use crate::proto::tensor_shape_proto::dimension::Value as DimensionValue;
use crate::proto::type_proto::{Tensor as TensorType, Value as TypeValue};
use crate::proto::{AttributeProto, GraphProto, ModelProto, NodeProto, ValueInfoProto};
use crate::tensor::{ElementType, decode_tensor, element_count, initializer_label};

/// Reads an ONNX model held in memory. A tensor whose data is external (in a file beside the
/// model) is refused, there being no directory to read it from: use [`read_file`].
///
/// # Errors
/// [`OnnxError::Decode`] when the bytes are not a protobuf `ModelProto`; otherwise the
/// [`OnnxError`] of the first problem found, in file order: the model's IR version and opsets,
/// initializers, graph inputs (a missing shape, an unsupported element type),
/// nodes (an input not defined before, a value defined twice, an untyped attribute or a graph
/// attribute, a domain not imported), then graph outputs; or a bound of [`crate::limits`].
/// An external tensor is [`OnnxError::ExternalData`] with
/// [`ExternalDataError::InMemory`](crate::error::ExternalDataError::InMemory).
pub fn read(bytes: &[u8]) -> Result<OnnxModel, OnnxError> {
    read_with(bytes, &mut External::in_memory())
}

/// Reads an ONNX file of at most [`FILE_LIMIT`] bytes, and the external data of its tensors
/// from files in its directory.
///
/// A tensor with `data_location = EXTERNAL` is read from the file its `external_data` entries
/// name: `location` (required), a path relative to the directory holding the model file;
/// `offset` (default 0) and `length` (default: to the end of the file), decimal byte counts;
/// `checksum`, not checked. No other key is accepted. Its bytes are little-endian elements as
/// in `raw_data`, exactly as many as its shape and element type take. The location must be a
/// relative path of plain names (no `..`, `.`, empty component or root) that resolves,
/// symbolic links followed, to a regular file inside the model's directory; the range must lie
/// within that file. Initializers and tensor attributes (a `Constant`'s `value`) are read
/// alike, each checked against [`MAX_TENSOR_ELEMENTS`] from its shape before its bytes are
/// read, all of a model's together at most
/// [`MAX_EXTERNAL_BYTES`](crate::limits::MAX_EXTERNAL_BYTES).
///
/// # Errors
/// [`OnnxError::Read`] when the file cannot be read or is too large (the message names the
/// file); [`OnnxError::ExternalData`] naming the tensor and what is wrong with its external
/// data (an [`ExternalDataError`](crate::error::ExternalDataError)); otherwise as [`read`],
/// whose messages do not name the file.
pub fn read_file(path: &Path) -> Result<OnnxModel, OnnxError> {
    let bytes = cvm_formats::read_file(path, FILE_LIMIT)?;
    read_with(&bytes, &mut External::beside(path))
}

/// [`read`], with external data read through `external`.
fn read_with(bytes: &[u8], external: &mut External) -> Result<OnnxModel, OnnxError> {
    // prost stops at a nesting depth of 100, but an element of a repeated field can take far
    // more memory than its bytes: the lists are sized first (`prescan`). External data is not
    // decoded by prost: `External` bounds it, tensor by tensor, before reading.
    crate::prescan::check(bytes)?;
    let model = ModelProto::decode(bytes)?;
    convert_model(model, external)
}

/// Which kind of thing defines a value, for messages.
#[derive(Clone, Copy)]
enum Definer {
    Input,
    Initializer,
    Node(usize),
}

/// Refuses `text` if longer than `limit` bytes; `what` says which string it is.
fn check_length(text: &str, limit: usize, what: impl FnOnce() -> String) -> Result<(), OnnxError> {
    if text.len() > limit {
        return Err(OnnxError::TooLong {
            what: what(),
            bytes: text.len(),
            limit,
        });
    }
    Ok(())
}

/// Refuses a name longer than [`MAX_NAME_BYTES`]; `what` names its owner (`the graph input`).
fn check_name(name: &str, what: impl FnOnce() -> String) -> Result<(), OnnxError> {
    check_length(name, MAX_NAME_BYTES, || {
        format!("{} {}", what(), quote(name))
    })
}

/// Refuses a count above `limit`.
fn check_count(
    count: usize,
    limit: usize,
    items: &'static str,
    what: impl FnOnce() -> String,
) -> Result<(), OnnxError> {
    if count > limit {
        return Err(OnnxError::TooMany {
            what: what(),
            items,
            count,
            limit,
        });
    }
    Ok(())
}

/// The default domain is `""`, also written `"ai.onnx"` (onnx.proto, OperatorSetIdProto).
fn normalize_domain(domain: String) -> String {
    if domain == "ai.onnx" {
        String::new()
    } else {
        domain
    }
}

fn convert_model(model: ModelProto, external: &mut External) -> Result<OnnxModel, OnnxError> {
    let ir_version = match model.ir_version {
        None => return Err(OnnxError::Model("the model declares no ir_version".into())),
        Some(version) => u64::try_from(version)
            .ok()
            .filter(|&version| version >= 1)
            .ok_or_else(|| {
                OnnxError::Model(format!(
                    "ir_version {version} is not an ONNX IR version (1 or more)"
                ))
            })?,
    };
    let producer_name = model.producer_name.unwrap_or_default();
    check_name(&producer_name, || "producer_name".into())?;
    let producer_version = model.producer_version.unwrap_or_default();
    check_name(&producer_version, || "producer_version".into())?;

    check_count(
        model.opset_import.len(),
        MAX_OPSETS,
        "opset imports",
        || "the model".into(),
    )?;
    let mut opset_version = None;
    let mut other_opsets: Vec<Opset> = Vec::new();
    let mut domains = HashSet::new();
    for opset in model.opset_import {
        let domain = normalize_domain(opset.domain.unwrap_or_default());
        check_name(&domain, || "opset import of domain".into())?;
        let shown = if domain.is_empty() {
            "the default domain".to_string()
        } else {
            format!("domain {}", quote(&domain))
        };
        let version = opset
            .version
            .and_then(|version| u64::try_from(version).ok())
            .filter(|&version| version >= 1)
            .ok_or_else(|| {
                OnnxError::Model(format!(
                    "opset import of {shown}: version {} is not an opset version (1 or more)",
                    opset.version.map_or("missing".into(), |v| v.to_string())
                ))
            })?;
        if !domains.insert(domain.clone()) {
            return Err(OnnxError::Model(format!(
                "{shown} is imported twice; the model must import each domain once"
            )));
        }
        if domain.is_empty() {
            opset_version = Some(version);
        } else {
            other_opsets.push(Opset { domain, version });
        }
    }
    let opset_version = opset_version.ok_or_else(|| {
        OnnxError::Model(
            "the model imports no opset of the default domain (\"\" or \"ai.onnx\")".into(),
        )
    })?;
    let graph = model
        .graph
        .ok_or_else(|| OnnxError::Model("the model has no graph".into()))?;
    let graph = convert_graph(graph, &domains, external)?;
    Ok(OnnxModel {
        ir_version,
        opset_version,
        other_opsets,
        producer_name,
        producer_version,
        graph_name: graph.name,
        inputs: graph.inputs,
        outputs: graph.outputs,
        initializers: graph.initializers,
        nodes: graph.nodes,
    })
}

/// The graph part of an [`OnnxModel`].
struct Graph {
    name: String,
    inputs: Vec<GraphInput>,
    outputs: Vec<GraphOutput>,
    initializers: Vec<crate::Tensor>,
    nodes: Vec<Node>,
}

fn convert_graph(
    mut graph: GraphProto,
    domains: &HashSet<String>,
    external: &mut External,
) -> Result<Graph, OnnxError> {
    let the_graph = || "the graph".to_string();
    check_count(graph.node.len(), MAX_NODES, "nodes", the_graph)?;
    check_count(
        graph.initializer.len(),
        MAX_INITIALIZERS,
        "initializers",
        the_graph,
    )?;
    check_count(graph.input.len(), MAX_GRAPH_VALUES, "inputs", the_graph)?;
    check_count(graph.output.len(), MAX_GRAPH_VALUES, "outputs", the_graph)?;
    let name = graph.name.take().unwrap_or_default();
    check_name(&name, || "graph name".into())?;
    if let Some(sparse) = graph.sparse_initializer.first() {
        let name = sparse
            .values
            .as_ref()
            .and_then(|values| values.name.as_deref())
            .unwrap_or_default();
        return Err(OnnxError::Graph(format!(
            "sparse initializer {} is not supported; store it as a dense initializer",
            quote(name)
        )));
    }

    let mut defined: HashMap<String, Definer> = HashMap::new();
    let mut initializers = Vec::with_capacity(graph.initializer.len());
    for (index, tensor) in std::mem::take(&mut graph.initializer)
        .into_iter()
        .enumerate()
    {
        let tensor_name = tensor.name.clone().unwrap_or_default();
        if tensor_name.is_empty() {
            return Err(OnnxError::Graph(format!(
                "initializer {index} has no name; every initializer needs one"
            )));
        }
        check_name(&tensor_name, || "initializer".into())?;
        if defined
            .insert(tensor_name.clone(), Definer::Initializer)
            .is_some()
        {
            return Err(OnnxError::Graph(format!(
                "{} is defined twice",
                initializer_label(&tensor_name)
            )));
        }
        initializers.push(decode_tensor(
            tensor,
            &initializer_label(&tensor_name),
            external,
        )?);
    }

    let mut inputs = Vec::new();
    let mut input_names = HashSet::new();
    for (index, value) in std::mem::take(&mut graph.input).into_iter().enumerate() {
        let input_name = value.name.clone().unwrap_or_default();
        if input_name.is_empty() {
            return Err(OnnxError::Graph(format!("graph input {index} has no name")));
        }
        check_name(&input_name, || "graph input".into())?;
        if !input_names.insert(input_name.clone()) {
            return Err(OnnxError::Graph(format!(
                "graph input {} is listed twice",
                quote(&input_name)
            )));
        }
        // Before IR 4 initializers were also listed as inputs; such an input is a constant.
        if matches!(defined.get(&input_name), Some(Definer::Initializer)) {
            continue;
        }
        inputs.push(convert_input(value, input_name.clone())?);
        defined.insert(input_name, Definer::Input);
    }

    let mut nodes: Vec<Node> = Vec::with_capacity(graph.node.len());
    for index in 0..graph.node.len() {
        let proto = std::mem::take(&mut graph.node[index]);
        let node = convert_node(index, proto, domains, &defined, &graph.node, external)?;
        for output in &node.outputs {
            if output.is_empty() {
                continue;
            }
            if let Some(first) = defined.insert(output.clone(), Definer::Node(index)) {
                let first = match first {
                    Definer::Node(first) if first == index => "it".to_string(),
                    _ => describe(first, &nodes),
                };
                return Err(OnnxError::Graph(format!(
                    "{} defines {}, which {first} already defines",
                    node.label(index),
                    quote(output),
                )));
            }
        }
        nodes.push(node);
    }

    let mut outputs = Vec::with_capacity(graph.output.len());
    let mut output_names = HashSet::new();
    for (index, value) in std::mem::take(&mut graph.output).into_iter().enumerate() {
        let output_name = value.name.clone().unwrap_or_default();
        if output_name.is_empty() {
            return Err(OnnxError::Graph(format!(
                "graph output {index} has no name"
            )));
        }
        check_name(&output_name, || "graph output".into())?;
        if !output_names.insert(output_name.clone()) {
            return Err(OnnxError::Graph(format!(
                "graph output {} is listed twice",
                quote(&output_name)
            )));
        }
        if !defined.contains_key(&output_name) {
            return Err(OnnxError::Graph(format!(
                "graph output {} is not defined by any graph input, initializer or node",
                quote(&output_name)
            )));
        }
        outputs.push(convert_output(value, output_name)?);
    }
    Ok(Graph {
        name,
        inputs,
        outputs,
        initializers,
        nodes,
    })
}

/// What defines a value, as a message says it.
fn describe(definer: Definer, nodes: &[Node]) -> String {
    match definer {
        Definer::Input => "a graph input".into(),
        Definer::Initializer => "an initializer".into(),
        Definer::Node(index) => nodes
            .get(index)
            .map_or_else(|| format!("node {index}"), |node| node.label(index)),
    }
}

/// The tensor type of a graph input or output, or an error naming it (`what`).
fn tensor_type(value: ValueInfoProto, what: &str) -> Result<(ElementType, TensorType), OnnxError> {
    let Some(TypeValue::TensorType(tensor)) = value.r#type.and_then(|t| t.value) else {
        return Err(OnnxError::Graph(format!(
            "{what} is not a tensor: its type is missing, or a sequence, map, optional, sparse \
             tensor or opaque type, none of which is supported"
        )));
    };
    let data_type = tensor.elem_type.unwrap_or_default();
    let element_type =
        ElementType::from_code(data_type).ok_or_else(|| OnnxError::UnsupportedType {
            what: what.to_string(),
            data_type,
        })?;
    Ok((element_type, tensor))
}

fn convert_input(value: ValueInfoProto, name: String) -> Result<GraphInput, OnnxError> {
    let what = format!("input {}", quote(&name));
    let (element_type, tensor) = tensor_type(value, &what)?;
    let shape_error = |message: String| OnnxError::Shape {
        what: what.clone(),
        message,
    };
    let dims = tensor
        .shape
        .ok_or_else(|| {
            shape_error(
                "it declares no shape, not even its rank; every graph input needs one".into(),
            )
        })?
        .dim;
    if dims.len() > MAX_RANK {
        return Err(shape_error(format!(
            "rank {}, more than the {MAX_RANK} the engine supports",
            dims.len()
        )));
    }
    let mut shape = Vec::with_capacity(dims.len());
    let mut fixed = Vec::with_capacity(dims.len());
    for (axis, dim) in dims.into_iter().enumerate() {
        shape.push(match dim.value {
            Some(DimensionValue::DimValue(size)) => {
                let size = u32::try_from(size).map_err(|_| {
                    shape_error(format!(
                        "dimension {size} on axis {axis} is not a size (0 to {})",
                        u32::MAX
                    ))
                })?;
                fixed.push(size);
                Dimension::Fixed(size)
            }
            Some(DimensionValue::DimParam(param)) if !param.is_empty() => {
                check_name(&param, || format!("{what}, axis {axis}: dim_param"))?;
                Dimension::Symbolic(param)
            }
            Some(DimensionValue::DimParam(_)) | None => Dimension::Unknown,
        });
    }
    if element_count(&fixed).is_none() {
        let dims = if fixed.len() == shape.len() {
            format!("shape {fixed:?} has")
        } else {
            format!("its fixed dimensions {fixed:?} have")
        };
        return Err(shape_error(format!(
            "{dims} more than the {MAX_TENSOR_ELEMENTS} elements the engine allows in a tensor"
        )));
    }
    Ok(GraphInput {
        name,
        element_type,
        shape,
    })
}

fn convert_output(value: ValueInfoProto, name: String) -> Result<GraphOutput, OnnxError> {
    let what = format!("output {}", quote(&name));
    let (element_type, tensor) = tensor_type(value, &what)?;
    let shape = match tensor.shape {
        None => None,
        Some(shape) => {
            if shape.dim.len() > MAX_RANK {
                return Err(OnnxError::Shape {
                    what,
                    message: format!(
                        "rank {}, more than the {MAX_RANK} the engine supports",
                        shape.dim.len()
                    ),
                });
            }
            let mut dims = Vec::with_capacity(shape.dim.len());
            for (axis, dim) in shape.dim.into_iter().enumerate() {
                dims.push(match dim.value {
                    Some(DimensionValue::DimValue(size)) => {
                        Some(u32::try_from(size).map_err(|_| OnnxError::Shape {
                            what: what.clone(),
                            message: format!(
                                "dimension {size} on axis {axis} is not a size (0 to {})",
                                u32::MAX
                            ),
                        })?)
                    }
                    Some(DimensionValue::DimParam(_)) | None => None,
                });
            }
            Some(dims)
        }
    };
    Ok(GraphOutput {
        name,
        element_type,
        shape,
    })
}

fn convert_node(
    index: usize,
    proto: NodeProto,
    domains: &HashSet<String>,
    defined: &HashMap<String, Definer>,
    protos: &[NodeProto],
    external: &mut External,
) -> Result<Node, OnnxError> {
    let name = proto.name.unwrap_or_default();
    let op_type = proto.op_type.unwrap_or_default();
    let label = node_label(index, &name, &op_type);
    check_name(&name, || format!("node {index}: name"))?;
    check_name(&op_type, || format!("node {index}: op_type"))?;
    if op_type.is_empty() {
        return Err(OnnxError::Graph(format!("{label} has no op_type")));
    }
    let domain = normalize_domain(proto.domain.unwrap_or_default());
    check_name(&domain, || format!("{label}: domain"))?;
    if !domains.contains(&domain) {
        return Err(OnnxError::Graph(format!(
            "{label} uses the domain {}, which the model does not import",
            quote(&domain)
        )));
    }
    check_count(proto.input.len(), MAX_NODE_VALUES, "inputs", || {
        label.clone()
    })?;
    check_count(proto.output.len(), MAX_NODE_VALUES, "outputs", || {
        label.clone()
    })?;
    check_count(proto.attribute.len(), MAX_ATTRIBUTES, "attributes", || {
        label.clone()
    })?;
    for (position, input) in proto.input.iter().enumerate() {
        check_name(input, || format!("{label}: input {position}"))?;
        if input.is_empty() || defined.contains_key(input) {
            continue;
        }
        let later = if proto.output.contains(input) {
            ": the node defines it itself".to_string()
        } else {
            protos
                .iter()
                .enumerate()
                .skip(index + 1)
                .find(|(_, later)| later.output.contains(input))
                .map_or_else(String::new, |(later_index, later)| {
                    format!(
                        ": {} defines it later, the nodes are not in topological order",
                        node_label(
                            later_index,
                            later.name.as_deref().unwrap_or_default(),
                            later.op_type.as_deref().unwrap_or_default()
                        )
                    )
                })
        };
        return Err(OnnxError::Graph(format!(
            "{label} reads {} (input {position}), which no graph input, initializer or earlier \
             node defines{later}",
            quote(input)
        )));
    }
    for (position, output) in proto.output.iter().enumerate() {
        check_name(output, || format!("{label}: output {position}"))?;
    }
    let mut attributes: Vec<Attribute> = Vec::with_capacity(proto.attribute.len());
    for attribute in proto.attribute {
        let attribute = convert_attribute(attribute, &label, external)?;
        if attributes.iter().any(|seen| seen.name == attribute.name) {
            return Err(OnnxError::Attribute {
                node: label,
                attribute: quote(&attribute.name),
                message: "it is given twice".into(),
            });
        }
        attributes.push(attribute);
    }
    Ok(Node {
        name,
        op_type,
        domain,
        inputs: proto.input,
        outputs: proto.output,
        attributes,
    })
}

fn convert_attribute(
    proto: AttributeProto,
    label: &str,
    external: &mut External,
) -> Result<Attribute, OnnxError> {
    let name = proto.name.unwrap_or_default();
    check_name(&name, || format!("{label}: attribute"))?;
    let error = |message: String| OnnxError::Attribute {
        node: label.to_string(),
        attribute: quote(&name),
        message,
    };
    if name.is_empty() {
        return Err(error("an attribute has no name".into()));
    }
    if proto
        .ref_attr_name
        .as_deref()
        .is_some_and(|r| !r.is_empty())
    {
        return Err(error(
            "it refers to an attribute of a parent function (ref_attr_name), which only a \
             function body may do"
                .into(),
        ));
    }
    if proto.g.is_some() || !proto.graphs.is_empty() {
        return Err(error(
            "it holds a graph; graph attributes (control flow: If, Loop, Scan) are not supported"
                .into(),
        ));
    }
    let code = proto.r#type.unwrap_or_default();
    let list_length = |length: usize| {
        if length > MAX_ATTRIBUTE_LIST {
            Err(error(format!(
                "{length} values, more than the {MAX_ATTRIBUTE_LIST} this reader accepts"
            )))
        } else {
            Ok(())
        }
    };
    let string = |bytes: Vec<u8>| -> Result<String, OnnxError> {
        check_length_bytes(&bytes, &error)?;
        String::from_utf8(bytes).map_err(|err| {
            error(format!(
                "its string is not UTF-8 (byte {})",
                err.utf8_error().valid_up_to()
            ))
        })
    };
    let value = match AttributeType::try_from(code) {
        Ok(AttributeType::Float) => AttributeValue::Float(proto.f.unwrap_or_default()),
        Ok(AttributeType::Int) => AttributeValue::Int(proto.i.unwrap_or_default()),
        Ok(AttributeType::String) => AttributeValue::String(string(proto.s.unwrap_or_default())?),
        Ok(AttributeType::Tensor) => {
            let tensor = proto
                .t
                .ok_or_else(|| error("its type is TENSOR but it holds no tensor".into()))?;
            let what = format!("{label}, attribute {}", quote(&name));
            let tensor_name = tensor.name.as_deref().unwrap_or_default();
            check_name(tensor_name, || format!("{what}: tensor"))?;
            AttributeValue::Tensor(decode_tensor(tensor, &what, external)?)
        }
        Ok(AttributeType::Floats) => {
            list_length(proto.floats.len())?;
            AttributeValue::Floats(proto.floats)
        }
        Ok(AttributeType::Ints) => {
            list_length(proto.ints.len())?;
            AttributeValue::Ints(proto.ints)
        }
        Ok(AttributeType::Strings) => {
            list_length(proto.strings.len())?;
            AttributeValue::Strings(
                proto
                    .strings
                    .into_iter()
                    .map(string)
                    .collect::<Result<_, _>>()?,
            )
        }
        Ok(AttributeType::Undefined) => {
            return Err(error(
                "it has no type; IR version 2 and later require one".into(),
            ));
        }
        Ok(AttributeType::Graph | AttributeType::Graphs) => {
            return Err(error(
                "its type is a graph; graph attributes (control flow: If, Loop, Scan) are not \
                 supported"
                    .into(),
            ));
        }
        Ok(other) => {
            return Err(error(format!(
                "its type {} is not supported (FLOAT, INT, STRING, TENSOR, FLOATS, INTS and \
                 STRINGS are)",
                other.as_str_name()
            )));
        }
        Err(_) => return Err(error(format!("its type {code} is not an attribute type"))),
    };
    Ok(Attribute { name, value })
}

/// Refuses a string attribute value longer than [`MAX_STRING_BYTES`].
fn check_length_bytes(bytes: &[u8], error: &impl Fn(String) -> OnnxError) -> Result<(), OnnxError> {
    if bytes.len() > MAX_STRING_BYTES {
        return Err(error(format!(
            "a string of {} bytes, longer than the {MAX_STRING_BYTES} this reader accepts",
            bytes.len()
        )));
    }
    Ok(())
}
