//! Models deployed on the Cortex chain: the CVM `symbol` + `params` pair (cvm-compat §1–§2),
//! their conversion to the canonical model, the legacy gas of the deployed runtime (§5), and
//! the input/output byte contract of `CVMAPIInference` (§4).
//!
//! Conversion is lossless and deterministic: the same two files always give the same canonical
//! bytes (parameters keep their stored width; attributes are typed by the operator's schema and
//! sorted). Every load failure is a deterministic [`cvm_engine::Error`] whose message names the
//! node, entry or parameter; hosts report it as a hashed outcome like any model rejection.

mod attrs;
mod json;
pub mod params;
pub use json::{from_bytes as text_of_bytes, to_bytes as bytes_of_text};
pub mod symbol;

mod checks;
mod contract;
mod gas;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use attrs::{parse_attr, parse_bool};
use cvm_engine::attrs::AttrKind;
use cvm_engine::exec::InputTensor;
use cvm_engine::model::{
    Attr, AttrValue, InputDecl, Model, Node, OutputDecl, ParamData, ParamDecl, ValueRef,
};
use cvm_engine::outcome::OutputTensor;
use cvm_engine::tensor::TensorType;
use cvm_engine::tensor::precision_bound;
use cvm_engine::{Error, ValidatedModel, fail, ops};

use crate::error::{FileLimit, ReadError, quote, read_file};
use symbol::{NodeKind, SymbolNode};
pub use symbol::{Postprocess, Symbol, Version};

pub use checks::required_attrs;
use checks::{
    canonical_names, check_memory_plan, check_param, deployed_enum_problem,
    deployed_parameter_check, head_names, same_shape, starts_from_zero, undefined_kernel_behaviour,
    without_skipped_reshape_codes,
};
use contract::contract;
pub use contract::{Contract, check_output_contract, decode_input, encode_output};
pub use gas::{graph_gas, legacy_gas};

/// The return code the deployed runtime's C interface gives a rejection: a failed `VERIFY` is a
/// logic error, a failed `CHECK` or `LOG(FATAL)` a runtime error (cvm-compat §1, "Error
/// classes"); so are a parameter parsing error and a JSON syntax error, which the runtime raises
/// the same way (`include/cvm/errors.h`, `include/utils/json.h`; `docs/cvm.md`). `libcvm`
/// returns it; the CLI names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// `ERROR_LOGIC` (1).
    Logic = 1,
    /// `ERROR_RUNTIME` (2).
    Runtime = 2,
}

impl Class {
    /// The C interface's name of the class.
    pub fn name(self) -> &'static str {
        match self {
            Class::Logic => "ERROR_LOGIC",
            Class::Runtime => "ERROR_RUNTIME",
        }
    }
}

/// A CVM model or input the deployed runtime rejects: the engine's deterministic error (what a
/// host hashes) and the class of the deployed runtime's return code. Where the deployed runtime
/// has undefined behaviour and the engine rejects instead, the class is [`Class::Logic`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{error} (deployed runtime: {})", class.name())]
pub struct Rejection {
    /// The deterministic error.
    pub error: Error,
    /// The deployed runtime's return code.
    pub class: Class,
}

impl Rejection {
    /// `error` as the deployed runtime's runtime error (`CHECK`, `LOG(FATAL)`, parameter parsing).
    pub fn runtime(error: Error) -> Rejection {
        Rejection {
            error,
            class: Class::Runtime,
        }
    }
}

/// Most deployed checks are `VERIFY`s: an engine error is a logic error unless said otherwise.
impl From<Error> for Rejection {
    fn from(error: Error) -> Rejection {
        Rejection {
            error,
            class: Class::Logic,
        }
    }
}

/// The name of the model input in CVM graphs.
pub const DATA: &str = "data";

/// A CVM model converted to the canonical form, with what the byte contract needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CvmModel {
    /// The canonical model.
    pub model: Model,
    /// What the byte contract and legacy gas need.
    pub meta: CvmMeta,
}

/// Properties of a CVM model beyond its canonical form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CvmMeta {
    /// Output post-processing of the byte contract.
    pub postprocess: Postprocess,
    /// The graph's `postprocess` string as written (`CVMAPIGetPreprocessMethod`).
    pub postprocess_name: String,
    /// Gas as the deployed runtime computes it from the graph (cvm-compat §5), or why it
    /// cannot: above the deployed limits (a model over them still loads there; only the gas
    /// calls fail).
    pub legacy_gas: Result<u64, Error>,
    /// Precision of `data`: ≤ 8 means one byte per input element.
    pub input_precision: u8,
    /// Shape of `data`.
    pub input_shape: Vec<u32>,
    /// The shape the deployed runtime gives the input: that of the entry whose id is the
    /// position of `data` among the variables (`GetInputShape` reads an input index as an entry
    /// id). It is `data`'s own shape when only variables come before `data`; otherwise
    /// `CVMAPIGetInputLength` reports this shape's size, and unless the two shapes are equal
    /// every inference fails there (`SetInput`'s `VERIFY`).
    pub deployed_input_shape: Vec<u32>,
    /// The graph version.
    pub version: Version,
    /// Declared shapes of the heads, in order.
    pub output_shapes: Vec<Vec<u32>>,
    /// The sizes the deployed runtime reports for the byte contract.
    pub contract: Contract,
}

/// Reads `symbol` and `params` from a directory.
///
/// # Errors
/// [`ReadError::Io`] when a file cannot be read.
pub fn read_dir(dir: &Path) -> Result<(Vec<u8>, Vec<u8>), ReadError> {
    Ok((
        read_file(&dir.join("symbol"), FileLimit::MODEL)?,
        read_file(&dir.join("params"), FileLimit::MODEL)?,
    ))
}

/// A CVM graph that passed every check the deployed runtime makes when it sets a graph up
/// (`CvmRuntime::Init`: reading the JSON, `PrepareGraphWithVersion`, each operator's attribute
/// parsing, and shape and precision inference over the declared shapes): what
/// `CVMAPIGetGasFromGraphFile` requires before it counts, and what [`import`] builds a model
/// from.
#[derive(Clone, Debug)]
pub struct CheckedGraph {
    /// The graph.
    pub symbol: Symbol,
    /// Each node's typed attributes (empty for variables), in node order.
    pub attrs: Vec<Vec<Attr>>,
    /// Each operator node's index in the canonical model (where a relu follows every `max`
    /// that starts from 0), which its errors carry.
    pub indices: Vec<u32>,
}

/// Reads and checks a graph as the deployed runtime sets one up ([`CheckedGraph`]).
///
/// # Errors
/// The first failed check, with the deployed runtime's class.
pub fn check_graph(symbol_bytes: &[u8]) -> Result<CheckedGraph, Rejection> {
    let graph = symbol::parse(symbol_bytes)?;
    let mut all_attrs = Vec::with_capacity(graph.nodes.len());
    let mut indices = Vec::with_capacity(graph.nodes.len());
    let mut next = 0u32;
    for (id, node) in graph.nodes.iter().enumerate() {
        indices.push(next);
        let NodeKind::Op(op) = node.kind else {
            all_attrs.push(Vec::new());
            continue;
        };
        let attrs = operator_attrs(&graph, id, op, next)?;
        next += 1 + u32::from(starts_from_zero(node, &attrs));
        all_attrs.push(attrs);
    }
    infer_declared(&graph, &all_attrs, &indices)?;
    Ok(CheckedGraph {
        symbol: graph,
        attrs: all_attrs,
        indices,
    })
}

/// The typed attributes of operator node `id`, with the checks the deployed parameter parsers
/// make: required attributes, declared bounds and the input shapes dense and conv2d impose (a
/// parameter error or `LOG(FATAL)`, class 2), values that parse, attributes each operator has.
fn operator_attrs(
    graph: &Symbol,
    id: usize,
    op: &ops::OpDef,
    index: u32,
) -> Result<Vec<Attr>, Rejection> {
    let node = &graph.nodes[id];
    let at = |error: Error| error.at_node(index, &node.name, op.name);
    if let Some(missing) = required_attrs(op.name)
        .iter()
        .find(|&&name| !node.op_attrs.contains_key(name))
    {
        return Err(Rejection::runtime(at(fail!(
            MissingAttribute,
            "symbol: node {id} ({}): {} requires attribute \"{missing}\" (it has no default in the deployed runtime)",
            quote(&node.name),
            op.name
        ))));
    }
    let mut attrs = Vec::with_capacity(node.op_attrs.len());
    for (key, text) in &node.op_attrs {
        // Parameters the deployed parser reads as a data type or a layout: a value it cannot
        // read is a parameter error or a `CHECK` (class 2). The reductions' `dtype` is read
        // and never used; the engine's reductions do not take it.
        if let Some(problem) = deployed_enum_problem(op.name, key, text) {
            return Err(Rejection::runtime(at(fail!(
                AttributeType,
                "symbol: node {id} ({}): attribute {} = {}: {problem}",
                quote(&node.name),
                quote(key),
                quote(text)
            ))));
        }
        if matches!(op.name, "sum" | "max") && key == "dtype" {
            continue;
        }
        let kind = op
            .attrs
            .iter()
            .find(|spec| spec.name == key)
            .map(|spec| spec.kind);
        // The deployed runtime's parameter parser rejects what it cannot parse, and an
        // attribute it does not declare, with a `ParamError` (class 2); an operator without
        // parameters rejects any attribute with a `VERIFY` (class 1).
        let parameterless = symbol::PARAMETERLESS_OPS.contains(&op.name);
        if kind.is_none() || parameterless {
            if symbol::is_hidden_key(key) && !parameterless {
                continue;
            }
            let error = at(fail!(
                UnknownAttribute,
                "symbol: node {id} ({}): {} has no attribute {}",
                quote(&node.name),
                op.name,
                quote(key)
            ));
            return Err(if parameterless {
                error.into()
            } else {
                Rejection::runtime(error)
            });
        }
        let value = parse_attr(op.name, key, text, kind).map_err(|message| {
            Rejection::runtime(fail!(
                AttributeType,
                "symbol: node {id} ({}): attribute {} = {}: {message}",
                quote(&node.name),
                quote(key),
                quote(text)
            ))
        })?;
        let value = match value {
            // The deployed shape rule passes over entries below −4 that are not the two
            // arguments of a −4: they add no dimension and read no input axis.
            Some(AttrValue::Ints(target)) if op.name == "reshape" && key == "shape" => {
                Some(AttrValue::Ints(without_skipped_reshape_codes(&target)))
            }
            other => other,
        };
        if let Some(value) = value {
            attrs.push(Attr {
                name: key.clone(),
                value,
            });
        }
    }
    if let Some(error) = deployed_parameter_check(graph, id, op, &attrs) {
        return Err(Rejection::runtime(at(error)));
    }
    Ok(attrs)
}

/// Shape and precision inference as the deployed runtime runs it when it sets a graph up: each
/// operator over the declared shapes of its inputs and the precisions inferred so far (the
/// variables' declared ones), its outputs required to have their declared shapes and a precision
/// in 1..=32. Every failure is a `VERIFY` there (class 1) except cvm_left_shift's
/// p + shift_bit above 32 (`LOG(FATAL)`, class 2). The engine's own resource limits are not
/// applied here: they are the engine's, checked when the model is loaded.
fn infer_declared(graph: &Symbol, attrs: &[Vec<Attr>], indices: &[u32]) -> Result<(), Rejection> {
    let rows = &graph.node_row_ptr;
    let mut precisions: Vec<u8> = graph
        .precisions
        .iter()
        .map(|&p| u8::try_from(p).unwrap_or(0))
        .collect();
    for (id, node) in graph.nodes.iter().enumerate() {
        let NodeKind::Op(op) = node.kind else {
            continue;
        };
        let at = |error: Error| error.at_node(indices[id], &node.name, op.name);
        if !op.arity.accepts(node.inputs.len()) {
            return Err(at(fail!(
                ArityMismatch,
                "symbol: node {id} ({}): {} takes {} inputs, got {}",
                quote(&node.name),
                op.name,
                op.arity,
                node.inputs.len()
            ))
            .into());
        }
        let mut inputs: Vec<TensorType> = node
            .inputs
            .iter()
            .map(|&(n, k)| {
                TensorType::new(graph.shapes[rows[n] + k].clone(), precisions[rows[n] + k])
            })
            .collect();
        let node_attrs = set_up_view(op.name, &attrs[id], &mut inputs);
        let checked = cvm_engine::attrs::Attrs::check(&node_attrs, op.attrs).map_err(at)?;
        let outputs = (op.build)(&checked, inputs.len())
            .and_then(|operator| operator.infer(&inputs))
            .map_err(|error| {
                let error = at(error);
                if op.name == "cvm_left_shift"
                    && error.code == cvm_engine::ErrorCode::PrecisionConstraint
                {
                    Rejection::runtime(error)
                } else {
                    Rejection::from(error)
                }
            })?;
        for (output, ty) in outputs.iter().enumerate() {
            let entry = rows[id] + output;
            let declared = &graph.shapes[entry];
            if declared != ty.dims() {
                return Err(at(fail!(
                    ShapeMismatch,
                    "symbol: node {id} ({}) output {output} is declared {declared:?}, but {} computes {}", quote(&node.name),
                    op.name,
                    ty.shape
                ))
                .into());
            }
            if !(1..=32).contains(&ty.precision) {
                return Err(at(fail!(
                    PrecisionOverflow,
                    "symbol: node {id} ({}) output {output} has precision {}, outside 1..=32",
                    quote(&node.name),
                    ty.precision
                ))
                .into());
            }
            precisions[entry] = ty.precision;
        }
    }
    Ok(())
}

/// Converts a CVM model to the canonical form, performing every load check of cvm-compat
/// §1–§2 and checking the declared shapes against the engine's shape inference.
///
/// # Errors
/// A deterministic error naming the node, entry or parameter.
pub fn import(symbol_bytes: &[u8], params_bytes: &[u8]) -> Result<CvmModel, Rejection> {
    let CheckedGraph {
        symbol: graph,
        attrs: node_attrs,
        indices,
    } = check_graph(symbol_bytes)?;

    // Names: a repeat among the nodes `arg_nodes` lists stopped `symbol::parse`; under
    // cvm_1.1.0 a variable it does not list escapes that check, and of two variables of one name
    // only the first is ever set: a second parameter is never loaded (a `VERIFY` of the
    // params), a second `data` never written (undefined behaviour).
    let data_nodes: Vec<usize> = (0..graph.nodes.len())
        .filter(|&id| graph.nodes[id].kind == NodeKind::Variable && graph.nodes[id].name == DATA)
        .collect();
    let data_node = match data_nodes.as_slice() {
        [one] => *one,
        [] => {
            return Err(Rejection::runtime(fail!(
                MalformedModel,
                "symbol: no variable is named \"{DATA}\" (the model input)"
            )));
        }
        _ => {
            return Err(fail!(
                MalformedModel,
                "symbol: {} variables are named \"{DATA}\": the deployed runtime writes the input into the first and reads the others unwritten (undefined behaviour)",
                data_nodes.len()
            )
            .into());
        }
    };
    let mut seen = std::collections::HashSet::new();
    for node in graph.nodes.iter().filter(|n| n.kind == NodeKind::Variable) {
        if !seen.insert(node.name.as_str()) {
            return Err(fail!(
                MalformedModel,
                "symbol: two variables are named {}: the deployed runtime loads only the first from the params", quote(&node.name))
            .into());
        }
    }
    // A `max` over the whole tensor starts from 0 in both deployed backends, so it gives
    // max(0, x…): the canonical model follows it with a relu, which its readers read instead.
    let floored: Vec<bool> = (0..graph.nodes.len())
        .map(|id| starts_from_zero(&graph.nodes[id], &node_attrs[id]))
        .collect();
    let mut value_of: Vec<Option<ValueRef>> = vec![None; graph.nodes.len()];
    let mut param_nodes = Vec::new();
    let mut op_index = 0u32;
    for (id, node) in graph.nodes.iter().enumerate() {
        value_of[id] = Some(match node.kind {
            NodeKind::Variable if id == data_node => ValueRef::Input(0),
            NodeKind::Variable => {
                param_nodes.push(id);
                ValueRef::Param(param_nodes.len() as u32 - 1)
            }
            NodeKind::Op(_) => {
                op_index += if floored[id] { 2 } else { 1 };
                ValueRef::Node {
                    node: op_index - 1,
                    output: 0,
                }
            }
        });
    }
    let reference = |(node, output): (usize, usize)| -> ValueRef {
        match value_of[node] {
            Some(ValueRef::Node { node, .. }) => ValueRef::Node {
                node,
                output: output as u8,
            },
            Some(other) => other,
            None => ValueRef::Input(0),
        }
    };
    let entry = |id: usize| graph.node_row_ptr[id];

    let names = canonical_names(&graph);

    // Undefined behaviour of the deployed kernels, which the engine rejects.
    for (id, node) in graph.nodes.iter().enumerate() {
        if let NodeKind::Op(op) = node.kind
            && let Some(error) =
                undefined_kernel_behaviour(&graph, id, op, &node_attrs[id], indices[id])
        {
            return Err(error.into());
        }
    }
    let mut taken: std::collections::HashSet<String> = names.iter().cloned().collect();
    let mut floor_names = Vec::new();
    for id in (0..graph.nodes.len()).filter(|&id| floored[id]) {
        let mut name = format!("#{id}.floor");
        while taken.contains(&name) {
            name.insert(0, '#');
        }
        taken.insert(name.clone());
        floor_names.push(name);
    }
    let mut floor_names = floor_names.into_iter();
    let mut nodes: Vec<Node> = Vec::new();
    for (id, node) in graph.nodes.iter().enumerate() {
        let NodeKind::Op(op) = node.kind else {
            continue;
        };
        nodes.push(Node {
            name: names[id].clone(),
            op: op.code,
            inputs: node.inputs.iter().map(|&e| reference(e)).collect(),
            attrs: node_attrs[id].clone(),
        });
        if floored[id] {
            let relu = ops::by_name("relu").map_or(0, |relu| relu.code);
            nodes.push(Node {
                name: floor_names.next().unwrap_or_default(),
                op: relu,
                inputs: vec![ValueRef::Node {
                    node: nodes.len() as u32 - 1,
                    output: 0,
                }],
                attrs: Vec::new(),
            });
        }
    }
    // An operator named by an alias passes the graph checks, but the deployed runtime finds no
    // kernel under that name when it sets the graph up, before it reads the parameters.
    if let Some((id, node, alias)) = graph
        .nodes
        .iter()
        .enumerate()
        .find_map(|(id, n)| n.alias.map(|alias| (id, n, alias)))
    {
        let target = match node.kind {
            NodeKind::Op(op) => op.name,
            NodeKind::Variable => "",
        };
        return Err(fail!(
            UnknownOp,
            "symbol: node {id} ({}): {} names {target} in the graph checks and the legacy gas, but the deployed runtime has no kernel under that name (\"function undefined\")", quote(&node.name), quote(alias))
        .into());
    }

    // What the deployed runtime checks when it builds a model from the set-up graph: the size
    // of its memory plan and the heads.
    if graph.postprocess_overflow {
        return Err(fail!(
            MalformedModel,
            "symbol: a postprocess of 32 bytes or more: the deployed runtime copies it into a 32-byte buffer and overruns it (undefined behaviour)"
        )
        .into());
    }
    symbol::storage_size(&graph.storage_ids, &graph.shapes)?;
    if let Some(problem) = graph.heads_problem.clone() {
        return Err(problem);
    }

    // The parameters, read after every check of the graph as the deployed runtime loads them.
    let arrays = params::parse(params_bytes)?;
    // Parameters: every variable but data has an array, with the declared shape and precision.
    // As the deployed loader sets them one by one: an array named `data` is checked for its
    // shape and then replaced by the input; a name given twice is checked twice, the last wins.
    let mut by_name: HashMap<&str, &params::Array> = HashMap::new();
    for array in &arrays {
        if array.name == DATA {
            let shape = &graph.shapes[entry(data_node)];
            if !same_shape(&array.shape, shape) {
                return Err(fail!(
                    ShapeMismatch,
                    "params: array \"{DATA}\" has shape {:?}, the graph declares {shape:?}",
                    array.shape
                )
                .into());
            }
            continue;
        }
        let Some(&id) = param_nodes
            .iter()
            .find(|&&id| graph.nodes[id].name == array.name)
        else {
            return Err(Rejection::runtime(fail!(
                MalformedModel,
                "params: {} is not a variable of the graph",
                quote(&array.name)
            )));
        };
        check_param(
            array,
            &graph.shapes[entry(id)],
            graph.precisions[entry(id)] as u8,
        )?;
        by_name.insert(array.name.as_str(), array);
    }
    let mut param_decls = Vec::with_capacity(param_nodes.len());
    for &id in &param_nodes {
        let name = &graph.nodes[id].name;
        let array = by_name.get(name.as_str()).ok_or_else(|| {
            fail!(
                MalformedModel,
                "params: parameter {} of the graph is missing",
                quote(name)
            )
        })?;
        let shape = &graph.shapes[entry(id)];
        let precision = graph.precisions[entry(id)] as u8;
        let data = match &array.data {
            params::ArrayData::I8(values) => ParamData::I8(values.clone()),
            params::ArrayData::I32(values) => ParamData::I32(values.clone()),
        };
        param_decls.push(ParamDecl {
            name: names[id].clone(),
            shape: shape.clone(),
            precision,
            data,
        });
    }

    check_memory_plan(&graph, data_node, &arrays)?;

    let outputs = head_names(&graph, &names)
        .into_iter()
        .zip(&graph.heads)
        .map(|(name, &head)| OutputDecl {
            name,
            value: reference(head),
        })
        .collect();
    let input_precision = graph.precisions[entry(data_node)] as u8;
    let input_shape = graph.shapes[entry(data_node)].clone();
    let model = Model {
        inputs: vec![InputDecl {
            name: DATA.to_string(),
            shape: input_shape.clone(),
            precision: input_precision,
        }],
        params: param_decls,
        nodes,
        outputs,
    };

    // The graph's checks passed (`check_graph`); the engine's own limits remain.
    let validated = ValidatedModel::from_bytes(&model.encode(), &cvm_engine::gas::Schedule::V1)?;
    let head_types = validated
        .outputs
        .iter()
        .filter_map(|&(_, value)| validated.value_types.get(value))
        .collect::<Vec<_>>();
    let variables_before_data = graph.nodes[..data_node]
        .iter()
        .filter(|node| node.kind == NodeKind::Variable)
        .count();
    let deployed_input_shape = graph.shapes[variables_before_data].clone();
    let input_elements = deployed_input_shape.iter().map(|&d| u64::from(d)).product();
    let contract = contract(&graph, input_elements, input_precision, &head_types)?;
    Ok(CvmModel {
        meta: CvmMeta {
            contract,
            legacy_gas: legacy_gas(&graph),
            postprocess: graph.postprocess,
            postprocess_name: graph.postprocess_name.clone(),
            version: graph.version,
            input_precision,
            input_shape,
            deployed_input_shape,
            output_shapes: graph
                .heads
                .iter()
                .map(|&(node, output)| graph.shapes[entry(node) + output].clone())
                .collect(),
        },
        model,
    })
}

/// Attribute `name` among an operator's typed attributes.
fn attr<'a>(attrs: &'a [Attr], name: &str) -> Option<&'a AttrValue> {
    attrs.iter().find(|a| a.name == name).map(|a| &a.value)
}

/// An integer or tuple attribute as a list (an integer as a list of one).
fn ints(attrs: &[Attr], name: &str) -> Option<Vec<i64>> {
    match attr(attrs, name)? {
        AttrValue::Ints(values) => Some(values.clone()),
        AttrValue::Int(value) => Some(vec![*value]),
        _ => None,
    }
}

/// An integer attribute.
fn int(attrs: &[Attr], name: &str) -> Option<i64> {
    match attr(attrs, name)? {
        AttrValue::Int(value) => Some(*value),
        _ => None,
    }
}

/// What the deployed set-up's shape rules see of an operator, where they see less than its
/// kernel: conv2d computes its output from `channels` and `kernel_size` and never looks at the
/// weight (a weight that disagrees is undefined behaviour of the kernel, rejected when a model
/// is built), and strided_slice reads only as many `begin` entries as the input has axes (more
/// make its kernel read past the shape, rejected likewise). The attributes to infer with; the
/// conv2d weight in `inputs` becomes the one the attributes describe.
fn set_up_view(op: &str, attrs: &[Attr], inputs: &mut [TensorType]) -> Vec<Attr> {
    let ints = |name: &str| ints(attrs, name);
    match op {
        "conv2d" => {
            let groups = ints("groups").and_then(|g| g.first().copied()).unwrap_or(1);
            let described = (|| {
                let channels = u32::try_from(*ints("channels")?.first()?).ok()?;
                let kernel = ints("kernel_size")?;
                let [kh, kw] = [*kernel.first()?, *kernel.get(1)?];
                let data_channels = i64::from(*inputs.first()?.dims().get(1)?);
                let per_group = u32::try_from(data_channels.checked_div(groups)?).ok()?;
                Some(vec![
                    channels,
                    per_group,
                    u32::try_from(kh).ok()?,
                    u32::try_from(kw).ok()?,
                ])
            })();
            if let (Some(shape), Some(weight)) = (described, inputs.get_mut(1)) {
                *weight = TensorType::new(shape, weight.precision);
            }
            attrs.to_vec()
        }
        "strided_slice" => {
            let rank = inputs.first().map_or(0, |data| data.dims().len());
            attrs
                .iter()
                .map(|attr| match &attr.value {
                    AttrValue::Ints(begin) if attr.name == "begin" && begin.len() > rank => Attr {
                        name: attr.name.clone(),
                        value: AttrValue::Ints(begin[..rank].to_vec()),
                    },
                    _ => attr.clone(),
                })
                .collect()
        }
        _ => attrs.to_vec(),
    }
}

/// Attribute strings of a node, for tools that write symbols.
pub fn op_attrs_json(attrs: &BTreeMap<String, String>) -> String {
    serde_json::Value::Object(
        attrs
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect(),
    )
    .to_string()
}
