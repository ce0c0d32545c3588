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

/// The sizes `CVMAPIGetInputLength`, `CVMAPIGetOutputLength`, `CVMAPIGetInputTypeSize`,
/// `CVMAPIGetOutputTypeSize` (cvm-compat §4) and `CVMAPIGetStorageSize` (`docs/cvm.md`) report, computed at
/// load as the deployed runtime computes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Contract {
    /// Bytes of one input: elements of `data` × [`Contract::input_type_size`].
    pub input_length: u64,
    /// Bytes of one output, as [`encode_output`] writes them: with `argmax` one int32 per row of
    /// each head, otherwise every element of every head × [`Contract::output_type_size`].
    pub output_length: u64,
    /// 1 when the precision of `data` is ≤ 8, else 4.
    pub input_type_size: u64,
    /// 4 with `argmax` or `detection` post-processing or when some head's precision is > 8,
    /// else 1.
    pub output_type_size: u64,
    /// The deployed runtime's memory plan: for every storage id, the largest entry that uses it
    /// (4 bytes per element), summed.
    pub storage_size: u64,
}

/// The byte contract's sizes for a graph whose heads have the inferred `head_types`.
fn contract(
    graph: &Symbol,
    input_elements: u64,
    input_precision: u8,
    head_types: &[&cvm_engine::TensorType],
) -> Result<Contract, Rejection> {
    let input_type_size = if input_precision <= 8 { 1 } else { 4 };
    let wide = head_types.iter().any(|ty| ty.precision > 8);
    let output_type_size = match graph.postprocess {
        Postprocess::Argmax | Postprocess::Detection => 4,
        Postprocess::None if wide => 4,
        Postprocess::None => 1,
    };
    let output_length = head_types
        .iter()
        .map(|ty| {
            let elements = ty.shape.elements();
            match graph.postprocess {
                Postprocess::Argmax => {
                    let last = ty.dims().last().map_or(1, |&d| u64::from(d)).max(1);
                    elements / last * output_type_size
                }
                _ => elements * output_type_size,
            }
        })
        .sum();
    Ok(Contract {
        input_length: input_elements * input_type_size,
        output_length,
        input_type_size,
        output_type_size,
        storage_size: symbol::storage_size(&graph.storage_ids, &graph.shapes)?,
    })
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

/// `CVMAPIGetGasFromGraphFile`: the legacy gas of a graph JSON (cvm-compat §5), after the
/// checks of [`check_graph`].
///
/// # Errors
/// A failed check, or `LimitExceeded` past the deployed limits (class 1).
pub fn graph_gas(symbol_bytes: &[u8]) -> Result<u64, Rejection> {
    let checked = check_graph(symbol_bytes)?;
    legacy_gas(&checked.symbol).map_err(Rejection::from)
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

/// The deployed runtime computes in the graph's memory plan: every entry is a view of the
/// buffer of its storage id, the parameters are written there once at load (in the order of
/// the params file), `data` before every inference, and each operator's outputs when it runs.
/// A plan in which an entry is written while another entry of its storage id is still to be
/// read makes the deployed runtime compute with the overwritten value, which the engine (that
/// keeps every value) does not reproduce: such a plan is rejected (class 1). An operator may
/// write into the storage of an input it reads last (in place); a parameter that is read must
/// keep its storage to itself, since it is read again at every inference.
fn check_memory_plan(
    graph: &Symbol,
    data_node: usize,
    arrays: &[params::Array],
) -> Result<(), Rejection> {
    const AFTER_ALL: usize = usize::MAX;
    let rows = &graph.node_row_ptr;
    let entries = rows.last().copied().unwrap_or(0);
    let mut last_read = vec![None::<usize>; entries];
    for (id, node) in graph.nodes.iter().enumerate() {
        for &(n, k) in &node.inputs {
            let read = &mut last_read[rows[n] + k];
            *read = Some(read.map_or(id, |r: usize| r.max(id)));
        }
    }
    for &(n, k) in &graph.heads {
        last_read[rows[n] + k] = Some(AFTER_ALL);
    }
    // When each array is loaded last (a name given twice is loaded twice).
    let mut loaded: HashMap<&str, usize> = HashMap::new();
    for (order, array) in arrays.iter().enumerate() {
        loaded.insert(array.name.as_str(), order);
    }
    let describe = |entry: usize| {
        let node = rows.partition_point(|&row| row <= entry) - 1;
        format!("entry {entry} ({})", quote(&graph.nodes[node].name))
    };
    let conflict = |kept: usize, written: usize| -> Rejection {
        fail!(
            MalformedModel,
            "symbol: the memory plan writes {} into storage id {} while {} is still to be read there: the deployed runtime computes with the overwritten value",
            describe(written),
            graph.storage_ids[written],
            describe(kept)
        )
        .into()
    };
    let is_parameter =
        |node: usize| graph.nodes[node].kind == NodeKind::Variable && node != data_node;
    // The entries of each storage id: parameters with their load order, and the entries
    // written at an inference with their time (`data` at 0, node n's outputs at n + 1).
    // (time or load order, entry), for the parameters and for the rest of one storage id.
    type Timed = Vec<(usize, usize)>;
    let mut by_storage: BTreeMap<u64, (Timed, Timed)> = BTreeMap::new();
    for (id, node) in graph.nodes.iter().enumerate() {
        for output in 0..node.outputs() {
            let entry = rows[id] + output;
            let (parameters, written) = by_storage.entry(graph.storage_ids[entry]).or_default();
            if is_parameter(id) {
                let order = loaded.get(node.name.as_str()).copied().unwrap_or(0);
                parameters.push((order, entry));
            } else {
                written.push((if id == data_node { 0 } else { id + 1 }, entry));
            }
        }
    }
    for (parameters, written) in by_storage.values_mut() {
        // A parameter that is read keeps its storage: nothing written at an inference, and no
        // parameter loaded after it, may share it.
        parameters.sort_unstable();
        for (position, &(order, entry)) in parameters.iter().enumerate() {
            if last_read[entry].is_none() {
                continue;
            }
            if let Some(&(_, over)) = written.first() {
                return Err(conflict(entry, over));
            }
            if let Some(&(_, over)) = parameters[position + 1..]
                .iter()
                .find(|&&(later, _)| later > order)
            {
                return Err(conflict(entry, over));
            }
        }
        // An entry written at an inference is overwritten by the next one written there, if
        // that comes before its last read (an operator reading it last may write in place).
        written.sort_unstable();
        let read_time = |entry: usize| last_read[entry].map(|r| r.saturating_add(1));
        for pair in written.windows(2) {
            let [(kept_at, kept), (at, over)] = [pair[0], pair[1]];
            if read_time(kept).is_some_and(|read| kept_at <= at && at < read) {
                return Err(conflict(kept, over));
            }
            // Two outputs of one operator: whichever is read later is overwritten by the other.
            if kept_at == at && read_time(over).is_some_and(|read| at < read) {
                return Err(conflict(over, kept));
            }
        }
    }
    Ok(())
}

/// Whether `node` is a `max` that reduces the whole tensor through the deployed kernels' branch
/// that starts from 0 (no `axis`, or an empty one, and no `exclude`): both deployed backends
/// then give max(0, x…) where spec 001 gives the true maximum (cvm-compat §6).
fn starts_from_zero(node: &SymbolNode, attrs: &[Attr]) -> bool {
    let is_max = matches!(node.kind, NodeKind::Op(op) if op.name == "max");
    let attr = |name: &str| attr(attrs, name);
    let every_axis = match attr("axis") {
        None => true,
        Some(AttrValue::Ints(axes)) => axes.is_empty(),
        Some(_) => false,
    };
    let exclude = matches!(attr("exclude"), Some(AttrValue::Bool(true)));
    is_max && every_axis && !exclude
}

/// Operator node `id` where a deployed kernel has undefined behaviour on shapes its loader
/// accepts: a conv2d weight that disagrees with `channels` or `kernel_size` (the kernel overruns
/// memory), a `where` whose condition is not of x's shape (it copies bytes, not elements).
fn undefined_kernel_behaviour(
    graph: &Symbol,
    id: usize,
    op: &ops::OpDef,
    attrs: &[Attr],
    index: u32,
) -> Option<Error> {
    let node = &graph.nodes[id];
    let entry = |id: usize| graph.node_row_ptr[id];
    if op.name == "conv2d"
        && let Some(&(w, k)) = node.inputs.get(1)
    {
        let weight = &graph.shapes[entry(w) + k];
        let groups = int(attrs, "groups").unwrap_or(1);
        let per_group = node
            .inputs
            .first()
            .and_then(|&(n, k)| graph.shapes[entry(n) + k].get(1))
            .and_then(|&c| i64::from(c).checked_div(groups))
            .map(|c| vec![c]);
        let declared = [
            ints(attrs, "channels"),
            ints(attrs, "kernel_size"),
            per_group,
        ];
        let from_weight = [
            weight.first().map(|&c| vec![i64::from(c)]),
            weight
                .get(2..4)
                .map(|d| d.iter().map(|&v| i64::from(v)).collect()),
            weight.get(1).map(|&c| vec![i64::from(c)]),
        ];
        for ((name, declared), actual) in ["channels", "kernel_size", "input channels per group"]
            .iter()
            .zip(declared)
            .zip(from_weight)
        {
            if let (Some(declared), Some(actual)) = (declared, actual)
                && declared != actual
            {
                return Some(fail!(
                    ShapeMismatch,
                    "symbol: node {id} ({}): conv2d {name} {declared:?} disagrees with the weight {weight:?}: the deployed runtime never checks it and overruns memory (undefined behaviour)", quote(&node.name))
                .at_node(index, &node.name, op.name));
            }
        }
    }
    if op.name == "where"
        && let [cond, x, ..] = node.inputs.as_slice()
    {
        let shape_of = |(n, k): (usize, usize)| &graph.shapes[entry(n) + k];
        if shape_of(*cond) != shape_of(*x) {
            return Some(fail!(
                ShapeMismatch,
                "symbol: node {id} ({}): where with a condition of shape {:?} selecting rows of {:?}: the deployed runtime copies bytes instead of elements (undefined behaviour)", quote(&node.name),
                shape_of(*cond),
                shape_of(*x)
            )
            .at_node(index, &node.name, op.name));
        }
    }
    None
}

/// Names of the graph's nodes in the canonical model, which needs them unique, non-empty and at
/// most [`cvm_engine::limits::MAX_NAME_BYTES`] bytes where the deployed runtime asks nothing of
/// a name but that variables differ: a name that is empty, too long or (for an operator) already
/// taken by a variable or an earlier node becomes `#<node id>` (with more `#` in front while that
/// is taken too). Names are labels only: the input is always `data`, parameters are matched to
/// their arrays by their names in the graph before this renaming.
fn canonical_names(graph: &Symbol) -> Vec<String> {
    let usable = |name: &str| !name.is_empty() && name.len() <= cvm_engine::limits::MAX_NAME_BYTES;
    let mut taken: std::collections::HashSet<String> = graph
        .nodes
        .iter()
        .filter(|node| node.kind == NodeKind::Variable && usable(&node.name))
        .map(|node| node.name.clone())
        .collect();
    graph
        .nodes
        .iter()
        .enumerate()
        .map(|(id, node)| {
            let variable = node.kind == NodeKind::Variable;
            if usable(&node.name) && (variable || !taken.contains(&node.name)) {
                taken.insert(node.name.clone());
                return node.name.clone();
            }
            let mut name = format!("#{id}");
            while taken.contains(&name) {
                name.insert(0, '#');
            }
            taken.insert(name.clone());
            name
        })
        .collect()
}

/// The deployed checks of node `id` (operator `op`) that fail with `LOG(FATAL)` or a parameter
/// error (class 2) where the engine's own validation would find the same fault with a code of
/// class 1: a lower bound of the parameter declarations (dense `units` ≥ 1, expand_dims
/// `num_newaxis` ≥ 1) and the shapes `CVM_ASSIGN_INPUT_SHAPE` imposes (dense weight (units, K) and
/// bias (units), conv2d bias (channels)).
fn deployed_parameter_check(
    graph: &Symbol,
    id: usize,
    op: &ops::OpDef,
    attrs: &[Attr],
) -> Option<Error> {
    let node = &graph.nodes[id];
    let int = |key: &str| int(attrs, key);
    let shape = |input: usize| {
        node.inputs
            .get(input)
            .map(|&(n, k)| &graph.shapes[graph.node_row_ptr[n] + k])
    };
    let below_one = |key: &str| {
        int(key).filter(|&v| v < 1).map(|value| {
            fail!(
                AttributeOutOfRange,
                "symbol: node {id} ({}): {} attribute {} = {value} is below its lower bound 1",
                quote(&node.name),
                op.name,
                quote(key)
            )
        })
    };
    let assigned = |input: usize, what: &str, expected: Vec<i64>| {
        let declared = shape(input)?;
        let declared: Vec<i64> = declared.iter().map(|&d| i64::from(d)).collect();
        (declared != expected).then(|| {
            fail!(
                ShapeMismatch,
                "symbol: node {id} ({}): the {what} is declared {declared:?}, {} needs {expected:?}", quote(&node.name),
                op.name
            )
        })
    };
    let use_bias = !matches!(attr(attrs, "use_bias"), Some(AttrValue::Bool(false)));
    match op.name {
        "dense" => below_one("units").or_else(|| {
            let units = int("units")?;
            let data = shape(0).filter(|s| s.len() == 2)?;
            shape(1).filter(|s| s.len() == 2)?;
            assigned(1, "weight", vec![units, i64::from(data[1])])
                .or_else(|| use_bias.then(|| assigned(2, "bias", vec![units])).flatten())
        }),
        "expand_dims" => below_one("num_newaxis"),
        "conv2d" if use_bias => {
            // Only once the `VERIFY`s before it pass: 4-D data, two entries each of
            // kernel_size, padding (0..=4096), strides and dilation (1..=4096), and groups that
            // divide the input channels and `channels`.
            let channels = int("channels")?;
            let tuple = |key: &str, default: [i64; 2]| ints(attrs, key).unwrap_or(default.to_vec());
            let pairs_in = |key: &str, default, low| {
                let values = tuple(key, default);
                values.len() == 2 && values.iter().all(|d| (low..=4096).contains(d))
            };
            let groups = int("groups").unwrap_or(1);
            let data_channels = shape(0).filter(|s| s.len() == 4).map(|s| i64::from(s[1]))?;
            let verified = tuple("kernel_size", [0, 0]).len() == 2
                && pairs_in("padding", [0, 0], 0)
                && pairs_in("strides", [1, 1], 1)
                && pairs_in("dilation", [1, 1], 1)
                && groups > 0
                && data_channels % groups == 0
                && channels % groups == 0;
            verified
                .then(|| assigned(2, "bias", vec![channels]))
                .flatten()
        }
        _ => None,
    }
}

/// The data types a deployed parameter declared with `CVMUTIL_DECLARE_DTYPE_FIELD` reads.
const DEPLOYED_DTYPES: [&str; 11] = [
    "float16", "float32", "float64", "uint8", "uint16", "uint32", "uint64", "int8", "int16",
    "int32", "int64",
];

/// Why the deployed parser cannot read attribute `key` = `text` of `op` as the data type or
/// layout it declares (`include/cvm/top/`, `include/cvm/layout.h`), if it cannot. Values it
/// reads but the operator does not support are left to the operator's own checks (class 1).
fn deployed_enum_problem(op: &str, key: &str, text: &str) -> Option<String> {
    let value = text;
    match (op, key) {
        ("conv2d", "out_dtype") if value != "same" && !DEPLOYED_DTYPES.contains(&value) => {
            Some("not a data type".into())
        }
        ("sum" | "max", "dtype") if !DEPLOYED_DTYPES.contains(&value) => {
            Some("not a data type".into())
        }
        ("conv2d", "out_layout") if value != "__undef__" => layout_problem(value),
        _ => None,
    }
}

/// Why `layout` is not a layout as `Layout::parse` reads one: upper-case axes, each once, and
/// lower-case sub-axes of a present axis, each once and after a size; nothing else, and not
/// empty.
fn layout_problem(layout: &str) -> Option<String> {
    let (mut axes, mut subaxes) = ([false; 26], [false; 26]);
    let mut factor = 0u64;
    let mut any = false;
    for c in layout.bytes() {
        match c {
            b'A'..=b'Z' => {
                let axis = usize::from(c - b'A');
                if factor != 0 || axes[axis] {
                    return Some(format!(
                        "not a layout: axis {} misplaced or repeated",
                        char::from(c)
                    ));
                }
                axes[axis] = true;
            }
            b'a'..=b'z' => {
                let axis = usize::from(c - b'a');
                if factor == 0 || subaxes[axis] {
                    return Some(format!(
                        "not a layout: sub-axis {} without a size or repeated",
                        char::from(c)
                    ));
                }
                subaxes[axis] = true;
                factor = 0;
            }
            b'0'..=b'9' => {
                factor = factor
                    .saturating_mul(10)
                    .saturating_add(u64::from(c - b'0'))
            }
            _ => return Some(format!("not a layout: '{}'", c.escape_ascii())),
        }
        any |= c.is_ascii_alphabetic();
    }
    if !any {
        return Some("not a layout: no axis".into());
    }
    (0..26)
        .find(|&axis| subaxes[axis] && !axes[axis])
        .map(|axis| {
            format!(
                "not a layout: sub-axis of the missing axis {}",
                char::from(b'A' + axis as u8)
            )
        })
}

/// A reshape `shape` without the entries the deployed shape rule passes over: those below −4,
/// except the two that follow a −4 (the sizes it splits into, checked as such).
fn without_skipped_reshape_codes(target: &[i64]) -> Vec<i64> {
    let mut kept = Vec::with_capacity(target.len());
    let mut split_arguments = 0;
    for &value in target {
        if split_arguments > 0 {
            split_arguments -= 1;
            kept.push(value);
        } else if value == -4 {
            split_arguments = 2;
            kept.push(value);
        } else if value >= -4 {
            kept.push(value);
        }
    }
    kept
}

/// Names of the graph's outputs in the canonical model: the node's name, with `:<index>` for a
/// second output. The canonical model needs them unique and at most
/// [`cvm_engine::limits::MAX_NAME_BYTES`] bytes, where the deployed runtime takes any list of
/// heads, the same entry twice included: a name that is too long or already used becomes
/// `#head<index>` (with more `#` in front while that is used too).
fn head_names(graph: &Symbol, names: &[String]) -> Vec<String> {
    let mut used = std::collections::HashSet::new();
    graph
        .heads
        .iter()
        .enumerate()
        .map(|(index, &(node, output))| {
            let mut name = match output {
                0 => names[node].clone(),
                _ => format!("{}:{output}", names[node]),
            };
            if name.len() > cvm_engine::limits::MAX_NAME_BYTES || used.contains(&name) {
                name = format!("#head{index}");
                while used.contains(&name) {
                    name.insert(0, '#');
                }
            }
            used.insert(name.clone());
            name
        })
        .collect()
}

/// Attributes without a default in the deployed runtime's parameter declarations
/// (`include/cvm/top/nn.h`, `tensor.h`): a CVM graph must give them even where the engine's
/// operator has a default or derives the value from the shapes.
pub fn required_attrs(op: &str) -> &'static [&'static str] {
    match op {
        "dense" => &["units"],
        "conv2d" => &["channels", "kernel_size"],
        "max_pool2d" => &["pool_size"],
        "upsampling" => &["scale"],
        "cvm_lut" => &["in_dim"],
        "cvm_clip" => &["precision"],
        "cvm_left_shift" | "cvm_right_shift" => &["precision", "shift_bit"],
        "clip" => &["a_max", "a_min"],
        "repeat" => &["repeats"],
        "expand_dims" => &["axis"],
        "reshape" => &["shape"],
        _ => &[],
    }
}

fn same_shape(stored: &[i64], declared: &[u32]) -> bool {
    stored.len() == declared.len()
        && stored
            .iter()
            .zip(declared)
            .all(|(&a, &b)| a == i64::from(b))
}

/// A parameter array's shape equals the declared one and its values lie within the precision.
fn check_param(array: &params::Array, shape: &[u32], precision: u8) -> Result<(), Error> {
    let name = &array.name;
    if !same_shape(&array.shape, shape) {
        return Err(fail!(
            ShapeMismatch,
            "params: parameter {} has shape {:?}, the graph declares {shape:?}",
            quote(name),
            array.shape
        ));
    }
    let bound = precision_bound(precision);
    if let Some((index, value)) = array
        .data
        .values()
        .iter()
        .enumerate()
        .find(|&(_, &v)| i64::from(v).abs() > bound)
    {
        return Err(fail!(
            InvalidParam,
            "params: parameter {}: value {value} at index {index} exceeds precision {precision}",
            quote(name)
        ));
    }
    Ok(())
}

/// Gas as `CVMAPIGetGasFromGraphFile` computes it (cvm-compat §5), from declared shapes.
///
/// # Errors
/// `LimitExceeded` when a node's base exceeds 2^30 or the totals exceed 2^40, as the runtime
/// rejects them.
pub fn legacy_gas(graph: &Symbol) -> Result<u64, Error> {
    let size =
        |entry: usize| -> u64 { graph.shapes[entry].iter().map(|&d| u64::from(d)).product() };
    let (mut memory, mut ops) = (0u64, 0u64);
    for (id, node) in graph.nodes.iter().enumerate() {
        let first = graph.node_row_ptr[id];
        let NodeKind::Op(op) = node.kind else {
            memory += 5 * size(first);
            if memory > 1 << 40 {
                return Err(fail!(
                    LimitExceeded,
                    "legacy gas: memory exceeds 2^40 at variable {}",
                    quote(&node.name)
                ));
            }
            continue;
        };
        let input_entry = |k: usize| node.inputs.get(k).map(|&(n, o)| graph.node_row_ptr[n] + o);
        let use_bias = node
            .op_attrs
            .get("use_bias")
            .is_none_or(|v| parse_bool(v).unwrap_or(true));
        let base = match op.name {
            "dense" => {
                let k = input_entry(1)
                    .and_then(|e| graph.shapes[e].get(1).copied())
                    .unwrap_or(0);
                3 * u64::from(k) + u64::from(use_bias)
            }
            "conv2d" => {
                let weight = input_entry(1).map_or(0, size);
                let out_channels = input_entry(1)
                    .and_then(|e| graph.shapes[e].first().copied())
                    .unwrap_or(1)
                    .max(1);
                3 * (weight / u64::from(out_channels)) + u64::from(use_bias)
            }
            "max_pool2d" => {
                let pool = node.op_attrs.get("pool_size").and_then(|t| {
                    parse_attr(op.name, "pool_size", t, Some(AttrKind::Ints))
                        .ok()
                        .flatten()
                });
                match pool {
                    Some(AttrValue::Ints(values)) => {
                        values.iter().take(2).map(|&v| v.max(0) as u64).product()
                    }
                    _ => 1,
                }
            }
            "sum" => {
                let input = input_entry(0).map_or(0, size);
                input / size(first).max(1)
            }
            "non_max_suppression" => {
                20 * input_entry(0)
                    .and_then(|e| graph.shapes[e].first().copied())
                    .map_or(0, u64::from)
            }
            _ => 1,
        };
        if base > 1 << 30 {
            return Err(fail!(
                LimitExceeded,
                "legacy gas: node {} has base cost {base} > 2^30",
                quote(&node.name)
            ));
        }
        ops += base * size(first);
        if ops > 1 << 40 {
            return Err(fail!(
                LimitExceeded,
                "legacy gas: operations exceed 2^40 at node {}",
                quote(&node.name)
            ));
        }
        memory += 5 * (first..graph.node_row_ptr[id + 1]).map(size).sum::<u64>();
        if memory > 1 << 40 {
            return Err(fail!(
                LimitExceeded,
                "legacy gas: memory exceeds 2^40 at node {}",
                quote(&node.name)
            ));
        }
    }
    Ok(ops + memory)
}

/// Decodes the raw input bytes of `CVMAPIInference` (cvm-compat §4): one byte per element when
/// the input precision is ≤ 8, else four (little endian, or big endian as on chain); values
/// are clipped to the precision on entry.
///
/// # Errors
/// `MalformedInput` when the byte length is wrong: the deployed runtime's `VERIFY` fails, a
/// deterministic error of the run.
pub fn decode_input(model: &CvmMeta, bytes: &[u8], big_endian: bool) -> Result<InputTensor, Error> {
    if model.deployed_input_shape != model.input_shape {
        return Err(fail!(
            MalformedInput,
            "the deployed runtime shapes this model's input as entry {:?}, not as data {:?} (an input index read as an entry id), and fails every inference of it",
            model.deployed_input_shape,
            model.input_shape
        ));
    }
    let elements: usize = model.input_shape.iter().map(|&d| d as usize).product();
    let width = if model.input_precision <= 8 { 1 } else { 4 };
    if bytes.len() != elements * width {
        return Err(fail!(
            MalformedInput,
            "CVM input must be {} bytes ({elements} elements of {width} byte(s) for precision {}), got {}",
            elements * width,
            model.input_precision,
            bytes.len()
        ));
    }
    let bound = precision_bound(model.input_precision);
    let data = if width == 1 {
        bytes
            .iter()
            .map(|&b| i64::from(b as i8))
            .collect::<Vec<_>>()
    } else {
        bytes
            .chunks_exact(4)
            .map(|c| {
                let raw = [c[0], c[1], c[2], c[3]];
                i64::from(if big_endian {
                    i32::from_be_bytes(raw)
                } else {
                    i32::from_le_bytes(raw)
                })
            })
            .collect()
    };
    Ok(InputTensor {
        shape: model.input_shape.clone(),
        data: data
            .into_iter()
            .map(|v| v.clamp(-bound, bound) as i32)
            .collect(),
    })
}

/// Rows (elements over the last axis) and last-axis length of a head shape.
fn rows_and_width(shape: &[u32]) -> (u64, u64) {
    let width = shape.last().map_or(1, |&d| u64::from(d));
    let size: u64 = shape.iter().map(|&d| u64::from(d)).product();
    (size / width.max(1), width)
}

/// The conditions under which the deployed `CVMAPIInference` fails, or writes bytes its own
/// output length does not cover, after a successful load (cvm-compat §4, §6). They depend on
/// the head shapes alone, so they are checked before the run.
///
/// - `argmax`: the runtime fills `ceil(rows / width)` of a head's `rows` values; a head with
///   more than one row and a last axis longer than 1 leaves values unwritten (undefined).
/// - `detection`, or more than one head: a single head, or heads with unequal row counts,
///   cannot be interleaved (the runtime's `VERIFY` fails); under `detection` the output length
///   is `shape[-2]` of the first head times the sum of the last axes, and a first head whose
///   row count differs from that (more than two axes, or one) makes the runtime write past or
///   short of it (undefined).
///
/// # Errors
/// `ShapeMismatch`, with a message saying which of these it is.
pub fn check_output_contract(
    postprocess: Postprocess,
    output_shapes: &[Vec<u32>],
) -> Result<(), Error> {
    let heads: Vec<(u64, u64)> = output_shapes.iter().map(|s| rows_and_width(s)).collect();
    match postprocess {
        Postprocess::Argmax => {
            if let Some((k, &(rows, width))) = heads
                .iter()
                .enumerate()
                .find(|&(_, &(rows, width))| rows > 1 && width > 1)
            {
                return Err(fail!(
                    ShapeMismatch,
                    "CVM output: argmax over head {k} with {rows} rows of {width}: the deployed runtime writes only the first {} row(s), the rest is undefined behaviour",
                    rows.div_ceil(width)
                ));
            }
        }
        _ if postprocess == Postprocess::Detection || heads.len() > 1 => {
            if heads.len() == 1 {
                return Err(fail!(
                    ShapeMismatch,
                    "CVM output: detection post-processing needs more than one head to interleave (the deployed runtime rejects a single head)"
                ));
            }
            let rows: Vec<u64> = heads.iter().map(|&(rows, _)| rows).collect();
            if rows.windows(2).any(|pair| pair[0] != pair[1]) {
                return Err(fail!(
                    ShapeMismatch,
                    "CVM output: heads with row counts {rows:?} cannot be interleaved"
                ));
            }
            let first = &output_shapes[0];
            let declared = match first.len() {
                0 | 1 => 0,
                n => u64::from(first[n - 2]),
            };
            if postprocess == Postprocess::Detection && declared != rows[0] {
                return Err(fail!(
                    ShapeMismatch,
                    "CVM output: detection writes {} rows but the deployed output length counts shape[-2] = {declared} rows of the first head {first:?}: undefined behaviour",
                    rows[0]
                ));
            }
        }
        _ => {}
    }
    Ok(())
}

/// Encodes the model outputs as `CVMAPIInference` returns them (cvm-compat §4), for models
/// that pass [`check_output_contract`].
///
/// - `argmax`: per head, one int32 per row: the index of the largest value over the last axis,
///   comparing the values truncated to 8 bits (`int8_t(v)`) as both deployed backends do, the
///   first index on ties;
/// - `detection`, or more than one head: rows of all heads interleaved (row x of head 0, row x of
///   head 1, …); int32 for detection, else by precision;
/// - otherwise: every element, one byte each when every head's precision is ≤ 8, else int32.
///
/// # Errors
/// The error of [`check_output_contract`] for the outputs' shapes.
pub fn encode_output(
    postprocess: Postprocess,
    outputs: &[OutputTensor],
    big_endian: bool,
) -> Result<Vec<u8>, Error> {
    let shapes: Vec<Vec<u32>> = outputs.iter().map(|t| t.shape.clone()).collect();
    check_output_contract(postprocess, &shapes)?;
    let push32 = |out: &mut Vec<u8>, value: i32| {
        out.extend_from_slice(&if big_endian {
            value.to_be_bytes()
        } else {
            value.to_le_bytes()
        });
    };
    let narrow = outputs.iter().all(|t| t.precision <= 8);
    let last_dim = |t: &OutputTensor| t.shape.last().map_or(1, |&d| d as usize).max(1);
    let mut out = Vec::new();
    match postprocess {
        Postprocess::Argmax => {
            for tensor in outputs {
                for row in tensor.data.chunks_exact(last_dim(tensor)) {
                    let mut best = 0;
                    for (index, &value) in row.iter().enumerate() {
                        if value as i8 > row[best] as i8 {
                            best = index;
                        }
                    }
                    push32(&mut out, best as i32);
                }
            }
        }
        _ if postprocess == Postprocess::Detection || outputs.len() > 1 => {
            let rows = outputs[0].data.len() / last_dim(&outputs[0]);
            let wide = postprocess == Postprocess::Detection || !narrow;
            for row in 0..rows {
                for tensor in outputs {
                    let width = last_dim(tensor);
                    for &value in &tensor.data[row * width..(row + 1) * width] {
                        if wide {
                            push32(&mut out, value)
                        } else {
                            out.push(value as i8 as u8)
                        }
                    }
                }
            }
        }
        _ => {
            for tensor in outputs {
                for &value in &tensor.data {
                    if narrow {
                        out.push(value as i8 as u8)
                    } else {
                        push32(&mut out, value)
                    }
                }
            }
        }
    }
    Ok(out)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(shape: &[u32], precision: u8, data: &[i32]) -> OutputTensor {
        OutputTensor {
            shape: shape.to_vec(),
            precision,
            data: data.to_vec(),
        }
    }

    #[test]
    fn output_layouts() {
        let head = tensor(&[2, 3], 8, &[1, 9, 9, -1, -2, -3]);
        let row = tensor(&[1, 3], 8, &[1, 9, 9]);
        // argmax: first index wins ties.
        assert_eq!(
            encode_output(Postprocess::Argmax, std::slice::from_ref(&row), false),
            Ok(vec![1, 0, 0, 0])
        );
        assert_eq!(
            encode_output(Postprocess::Argmax, std::slice::from_ref(&row), true),
            Ok(vec![0, 0, 0, 1])
        );
        // argmax compares int8 truncations: 200 → −56 < 100, 300 → 44 > 9.
        let wide_row = tensor(&[1, 2], 16, &[200, 100]);
        assert_eq!(
            encode_output(Postprocess::Argmax, &[wide_row], false),
            Ok(vec![1, 0, 0, 0])
        );
        let wide_row = tensor(&[1, 3], 16, &[1, 300, 9]);
        assert_eq!(
            encode_output(Postprocess::Argmax, &[wide_row], false),
            Ok(vec![1, 0, 0, 0])
        );
        // A column (last axis 1) fills every row.
        let column = tensor(&[3, 1], 8, &[5, 6, 7]);
        assert_eq!(
            encode_output(Postprocess::Argmax, &[column], false).map(|b| b.len()),
            Ok(12)
        );
        // Several rows of more than one value: the deployed runtime leaves rows unwritten.
        let error = encode_output(Postprocess::Argmax, std::slice::from_ref(&head), false);
        assert!(
            error
                .as_ref()
                .is_err_and(|e| e.message.contains("undefined behaviour")),
            "{error:?}"
        );
        // Plain, narrow: one byte per element.
        assert_eq!(
            encode_output(Postprocess::None, std::slice::from_ref(&head), false),
            Ok(vec![1, 9, 9, 255, 254, 253])
        );
        // Two heads interleave rows.
        let second = tensor(&[2, 1], 8, &[7, 8]);
        assert_eq!(
            encode_output(Postprocess::None, &[head.clone(), second.clone()], false),
            Ok(vec![1, 9, 9, 7, 255, 254, 253, 8])
        );
        // Detection writes int32.
        let detection = encode_output(Postprocess::Detection, &[head.clone(), second], true);
        assert_eq!(detection.as_ref().map(Vec::len), Ok(32));
        assert_eq!(
            detection.map(|b| b[..8].to_vec()),
            Ok(vec![0, 0, 0, 1, 0, 0, 0, 9])
        );
        // Wide precision: int32 per element.
        let wide = tensor(&[1], 16, &[-2]);
        assert_eq!(
            encode_output(Postprocess::None, &[wide], false),
            Ok(vec![254, 255, 255, 255])
        );
        // Mismatched row counts cannot be interleaved; a single detection head neither.
        let odd = tensor(&[3, 1], 8, &[1, 2, 3]);
        assert!(
            encode_output(Postprocess::Detection, &[head.clone(), odd.clone()], false).is_err()
        );
        assert!(encode_output(Postprocess::None, &[head.clone(), odd], false).is_err());
        assert!(encode_output(Postprocess::Detection, std::slice::from_ref(&head), false).is_err());
        // Detection counts shape[-2] of the first head: a 3-axis head with 1 × 2 rows is not 2.
        let deep = tensor(&[2, 1, 3], 8, &[0; 6]);
        let rows = tensor(&[2, 1], 8, &[0; 2]);
        assert!(
            encode_output(Postprocess::Detection, &[deep.clone(), rows.clone()], false).is_err()
        );
        assert!(encode_output(Postprocess::None, &[deep, rows], false).is_ok());
    }
}
