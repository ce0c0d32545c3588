//! The CVM graph JSON (`symbol`, cvm-compat §1): parsing and every structural check the
//! deployed loader performs, before conversion to the canonical model.

use std::collections::BTreeMap;

use cvm_engine::fail;
use cvm_engine::{Error, ops};
use serde_json::{Map, Value};

/// Graph format versions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// `cvm_1.0.0` (the default): `dltype`, `node_row_ptr` and `arg_nodes` must be present and
    /// agree with the graph.
    V1_0,
    /// `cvm_1.1.0`: `node_row_ptr` and `arg_nodes` are recomputed from the nodes.
    V1_1,
}

/// Output post-processing of the byte contract (cvm-compat §4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Postprocess {
    /// Outputs as they are.
    #[default]
    None,
    /// One int32 argmax over the last axis per row of each head.
    Argmax,
    /// Rows of all heads interleaved.
    Detection,
}

impl Version {
    /// The name the graph JSON gives it (and `CVMAPIGetVersion` reports).
    pub fn name(self) -> &'static str {
        match self {
            Version::V1_0 => "cvm_1.0.0",
            Version::V1_1 => "cvm_1.1.0",
        }
    }
}

impl Postprocess {
    /// The name the graph JSON gives it (and `CVMAPIGetPreprocessMethod` reports).
    pub fn name(self) -> &'static str {
        match self {
            Postprocess::None => "",
            Postprocess::Argmax => "argmax",
            Postprocess::Detection => "detection",
        }
    }
}

/// What a node is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// A variable (`op: "null"`): the input `data` or a parameter.
    Variable,
    /// An operator application; the name has its `_<digits>` suffix stripped.
    Op(&'static ops::OpDef),
}

/// One graph node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SymbolNode {
    /// Node name.
    pub name: String,
    /// Variable or operator.
    pub kind: NodeKind,
    /// Inputs as (node id, output index).
    pub inputs: Vec<(usize, usize)>,
    /// Operator attributes as written (string values), from `attrs.op_attrs`.
    pub op_attrs: BTreeMap<String, String>,
}

impl SymbolNode {
    /// Number of outputs (entries) of the node.
    pub fn outputs(&self) -> usize {
        match self.kind {
            NodeKind::Variable => 1,
            NodeKind::Op(op) => usize::from(op.outputs),
        }
    }
}

/// A checked graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    /// Format version.
    pub version: Version,
    /// Output post-processing.
    pub postprocess: Postprocess,
    /// Nodes in topological order.
    pub nodes: Vec<SymbolNode>,
    /// Model outputs as (node id, output index).
    pub heads: Vec<(usize, usize)>,
    /// Declared shape of every entry (outputs of all nodes, in node order).
    pub shapes: Vec<Vec<u32>>,
    /// Declared precision of every entry (−1 for inferred op outputs).
    pub precisions: Vec<i32>,
    /// Entry id of each node's first output; one more element holds the entry count.
    pub node_row_ptr: Vec<usize>,
    /// Memory-plan id of every entry (`attrs.storage_id`): entries with one id share a buffer.
    pub storage_ids: Vec<u64>,
}

fn bad(message: String) -> Error {
    Error::new(
        cvm_engine::ErrorCode::MalformedModel,
        format!("symbol: {message}"),
    )
}

fn field<'a>(object: &'a Map<String, Value>, key: &str, what: &str) -> Result<&'a Value, Error> {
    object
        .get(key)
        .ok_or_else(|| bad(format!("{what}: \"{key}\" is missing")))
}

fn check_keys(object: &Map<String, Value>, allowed: &[&str], what: &str) -> Result<(), Error> {
    match object.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(key) => Err(bad(format!(
            "{what}: unknown key \"{key}\" (allowed: {})",
            allowed.join(", ")
        ))),
        None => Ok(()),
    }
}

fn array<'a>(value: &'a Value, what: &str) -> Result<&'a Vec<Value>, Error> {
    value
        .as_array()
        .ok_or_else(|| bad(format!("{what} must be a list")))
}

fn index(value: &Value, what: &str) -> Result<usize, Error> {
    value
        .as_u64()
        .and_then(|v| usize::try_from(v).ok())
        .ok_or_else(|| bad(format!("{what}: {value} is not a non-negative integer")))
}

/// An entry reference `[node_id, output_index]` or `[node_id, output_index, version]`.
fn entry(value: &Value, what: &str) -> Result<(usize, usize), Error> {
    match array(value, what)?.as_slice() {
        [node, output] | [node, output, _] => Ok((index(node, what)?, index(output, what)?)),
        other => Err(bad(format!(
            "{what}: an entry has 2 or 3 numbers, not {}",
            other.len()
        ))),
    }
}

/// A graph attribute written as `[type_tag, list]`.
fn typed_list<'a>(
    attrs: &'a Map<String, Value>,
    key: &str,
    tag: &str,
) -> Result<Option<&'a Vec<Value>>, Error> {
    let Some(value) = attrs.get(key) else {
        return Ok(None);
    };
    match array(value, &format!("attrs.{key}"))?.as_slice() {
        [Value::String(found), list] if found == tag => {
            array(list, &format!("attrs.{key}")).map(Some)
        }
        _ => Err(bad(format!("attrs.{key} must be [\"{tag}\", [...]]"))),
    }
}

/// Parses and checks a graph JSON.
///
/// # Errors
/// `MalformedModel` for structural problems, `UnknownOp` for an operator name the engine does
/// not have, `LimitExceeded` for shapes past the CVM limits, `InvalidPrecision` for precisions
/// outside −1 or 1..=32, `InvalidReference` for a graph out of topological order; every message
/// names the node, entry or key.
pub fn parse(text: &[u8]) -> Result<Symbol, Error> {
    let value: Value =
        serde_json::from_slice(text).map_err(|err| bad(format!("not valid JSON: {err}")))?;
    let top = value
        .as_object()
        .ok_or_else(|| bad("the graph must be a JSON object".into()))?;
    check_keys(
        top,
        &[
            "nodes",
            "arg_nodes",
            "node_row_ptr",
            "heads",
            "attrs",
            "version",
            "postprocess",
        ],
        "the graph",
    )?;
    let version = match top.get("version") {
        None => Version::V1_0,
        Some(Value::String(v)) if v == "cvm_1.0.0" => Version::V1_0,
        Some(Value::String(v)) if v == "cvm_1.1.0" => Version::V1_1,
        Some(other) => {
            return Err(bad(format!(
                "version {other} is not supported (cvm_1.0.0 or cvm_1.1.0)"
            )));
        }
    };
    let postprocess = match top.get("postprocess") {
        None => Postprocess::None,
        Some(Value::String(p)) if p.is_empty() => Postprocess::None,
        Some(Value::String(p)) if p == "argmax" => Postprocess::Argmax,
        Some(Value::String(p)) if p == "detection" => Postprocess::Detection,
        Some(other) => {
            return Err(bad(format!(
                "postprocess {other} is not one of \"\", \"argmax\", \"detection\""
            )));
        }
    };

    let node_values = array(field(top, "nodes", "the graph")?, "nodes")?;
    let mut nodes = Vec::with_capacity(node_values.len());
    for (id, node_value) in node_values.iter().enumerate() {
        let what = format!("node {id}");
        let object = node_value
            .as_object()
            .ok_or_else(|| bad(format!("{what} must be an object")))?;
        check_keys(object, &["op", "name", "inputs", "attrs"], &what)?;
        let name = field(object, "name", &what)?
            .as_str()
            .ok_or_else(|| bad(format!("{what}: \"name\" must be a string")))?
            .to_string();
        let what = format!("node {id} (\"{name}\")");
        let inputs = match object.get("inputs") {
            None => Vec::new(),
            Some(list) => array(list, &format!("{what} inputs"))?
                .iter()
                .map(|e| entry(e, &format!("{what} inputs")))
                .collect::<Result<Vec<_>, _>>()?,
        };
        let node_attrs = match object.get("attrs") {
            None => Map::new(),
            Some(Value::Object(map)) => map.clone(),
            Some(_) => return Err(bad(format!("{what}: \"attrs\" must be an object"))),
        };
        let kind = match field(object, "op", &what)?.as_str() {
            Some("null") => {
                if !inputs.is_empty() {
                    return Err(bad(format!("{what}: a variable has no inputs")));
                }
                NodeKind::Variable
            }
            Some("cvm_op") => {
                check_keys(
                    &node_attrs,
                    &["func_name", "num_inputs", "num_outputs", "flatten_data"],
                    &format!("{what} attrs"),
                )?;
                let func = node_attrs
                    .get("func_name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        bad(format!("{what}: attrs.func_name (the operator) is missing"))
                    })?;
                let op_name = strip_suffix(func);
                let op = ops::by_name(op_name).ok_or_else(|| {
                    fail!(
                        UnknownOp,
                        "symbol: {what}: operator \"{func}\" is not known"
                    )
                    .at_node(id as u32, &name, op_name)
                })?;
                NodeKind::Op(op)
            }
            _ => {
                return Err(bad(format!(
                    "{what}: \"op\" must be \"null\" or \"cvm_op\""
                )));
            }
        };
        nodes.push(SymbolNode {
            name,
            kind,
            inputs,
            op_attrs: BTreeMap::new(),
        });
    }

    // Entries, topological order.
    let mut node_row_ptr = Vec::with_capacity(nodes.len() + 1);
    let mut entries = 0usize;
    for node in &nodes {
        node_row_ptr.push(entries);
        entries += node.outputs();
    }
    node_row_ptr.push(entries);
    for (id, node) in nodes.iter().enumerate() {
        for &(input, output) in &node.inputs {
            if input >= id {
                return Err(fail!(
                    InvalidReference,
                    "symbol: node {id} (\"{}\") reads node {input}, which does not come before it: the graph is not in topological order",
                    node.name
                ));
            }
            if output >= nodes[input].outputs() {
                return Err(bad(format!(
                    "node {id} (\"{}\") reads output {output} of node {input}, which has {}",
                    node.name,
                    nodes[input].outputs()
                )));
            }
        }
    }
    let heads = array(field(top, "heads", "the graph")?, "heads")?
        .iter()
        .map(|e| entry(e, "heads"))
        .collect::<Result<Vec<_>, _>>()?;
    for &(node, output) in &heads {
        if node >= nodes.len() || output >= nodes[node].outputs() {
            return Err(bad(format!(
                "heads: entry ({node}, {output}) does not exist"
            )));
        }
    }
    if heads.is_empty() {
        return Err(bad("heads: the graph has no outputs".into()));
    }

    // Graph attributes.
    let attrs = field(top, "attrs", "the graph")?
        .as_object()
        .ok_or_else(|| bad("\"attrs\" must be an object".into()))?;
    check_keys(
        attrs,
        &[
            "shape",
            "precision",
            "op_attrs",
            "storage_id",
            "dltype",
            "device_index",
        ],
        "attrs",
    )?;
    let per_entry = |key: &str, tag: &str, required: bool| -> Result<Option<&Vec<Value>>, Error> {
        match typed_list(attrs, key, tag)? {
            Some(list) if list.len() == entries => Ok(Some(list)),
            Some(list) => Err(bad(format!(
                "attrs.{key} has {} values for {entries} entries",
                list.len()
            ))),
            None if required => Err(bad(format!("attrs.{key} is missing"))),
            None => Ok(None),
        }
    };
    let shapes = per_entry("shape", "list_shape", true)?
        .unwrap_or(&Vec::new())
        .iter()
        .enumerate()
        .map(|(entry_id, shape)| check_shape(shape, entry_id))
        .collect::<Result<Vec<_>, _>>()?;
    let precisions = per_entry("precision", "list_int", true)?
        .unwrap_or(&Vec::new())
        .iter()
        .enumerate()
        .map(|(entry_id, p)| {
            p.as_i64()
                .filter(|&p| p == -1 || (1..=32).contains(&p))
                .map(|p| p as i32)
                .ok_or_else(|| {
                    fail!(
                        InvalidPrecision,
                        "symbol: attrs.precision[{entry_id}] = {p} is not −1 or 1..=32"
                    )
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let storage_ids = per_entry("storage_id", "list_int", true)?
        .unwrap_or(&Vec::new())
        .iter()
        .map(|storage| {
            storage
                .as_i64()
                .and_then(|id| u64::try_from(id).ok())
                .ok_or_else(|| {
                    bad(format!(
                        "attrs.storage_id holds {storage}, not a non-negative integer"
                    ))
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(list) = typed_list(attrs, "device_index", "list_int")?
        && !list.is_empty()
        && list.len() != entries
    {
        return Err(bad(format!(
            "attrs.device_index has {} values for {entries} entries",
            list.len()
        )));
    }
    let dltype = per_entry("dltype", "list_str", version == Version::V1_0)?;
    if let Some(types) = dltype
        && let Some((entry_id, other)) = types
            .iter()
            .enumerate()
            .find(|(_, t)| t.as_str() != Some("int32"))
    {
        return Err(bad(format!(
            "attrs.dltype[{entry_id}] = {other}: only \"int32\" is supported"
        )));
    }
    let op_attrs = typed_list(attrs, "op_attrs", "list_str")?
        .ok_or_else(|| bad("attrs.op_attrs is missing".into()))?;
    if op_attrs.len() != nodes.len() {
        return Err(bad(format!(
            "attrs.op_attrs has {} values for {} nodes",
            op_attrs.len(),
            nodes.len()
        )));
    }
    for (id, (node, text)) in nodes.iter_mut().zip(op_attrs).enumerate() {
        node.op_attrs = parse_op_attrs(text).map_err(|m| {
            bad(format!(
                "node {id} (\"{}\"): attrs.op_attrs: {m}",
                node.name
            ))
        })?;
    }

    // Variables: declared precisions; version 1.0.0 cross-checks.
    for (id, node) in nodes.iter().enumerate() {
        if node.kind == NodeKind::Variable && precisions[node_row_ptr[id]] == -1 {
            return Err(fail!(
                InvalidPrecision,
                "symbol: variable \"{}\" must declare a precision in 1..=32, not −1",
                node.name
            ));
        }
    }
    let variables: Vec<usize> = (0..nodes.len())
        .filter(|&id| nodes[id].kind == NodeKind::Variable)
        .collect();
    if version == Version::V1_0 {
        let declared_rows = array(
            field(top, "node_row_ptr", "the graph (cvm_1.0.0)")?,
            "node_row_ptr",
        )?
        .iter()
        .map(|v| index(v, "node_row_ptr"))
        .collect::<Result<Vec<_>, _>>()?;
        if declared_rows != node_row_ptr {
            return Err(bad(format!(
                "node_row_ptr {declared_rows:?} does not match the nodes' outputs {node_row_ptr:?}"
            )));
        }
        let declared_args = array(
            field(top, "arg_nodes", "the graph (cvm_1.0.0)")?,
            "arg_nodes",
        )?
        .iter()
        .map(|v| index(v, "arg_nodes"))
        .collect::<Result<Vec<_>, _>>()?;
        if declared_args != variables {
            return Err(bad(format!(
                "arg_nodes {declared_args:?} does not list the variables {variables:?}"
            )));
        }
    }
    Ok(Symbol {
        version,
        postprocess,
        nodes,
        heads,
        shapes,
        precisions,
        node_row_ptr,
        storage_ids,
    })
}

/// `dense_3` → `dense`: a trailing `_<digits>` is a numbering suffix (cvm-compat §1).
fn strip_suffix(name: &str) -> &str {
    match name.rsplit_once('_') {
        Some((base, digits))
            if !base.is_empty()
                && !digits.is_empty()
                && digits.bytes().all(|b| b.is_ascii_digit()) =>
        {
            base
        }
        _ => name,
    }
}

/// Checks one declared shape: 1..=6 dims, each in 1..=2^24, running product ≤ 2^30.
fn check_shape(value: &Value, entry_id: usize) -> Result<Vec<u32>, Error> {
    let dims = array(value, &format!("attrs.shape[{entry_id}]"))?;
    if dims.is_empty() || dims.len() > 6 {
        return Err(fail!(
            LimitExceeded,
            "symbol: attrs.shape[{entry_id}] has {} dimensions, not 1..=6",
            dims.len()
        ));
    }
    let mut size = 1u64;
    dims.iter()
        .map(|dim| {
            let d = dim
                .as_u64()
                .filter(|&d| (1..=1 << 24).contains(&d))
                .ok_or_else(|| {
                    fail!(
                        LimitExceeded,
                        "symbol: attrs.shape[{entry_id}] has dimension {dim}, not in 1..=2^24"
                    )
                })?;
            size *= d;
            if size > 1 << 30 {
                return Err(fail!(
                    LimitExceeded,
                    "symbol: attrs.shape[{entry_id}] has more than 2^30 elements"
                ));
            }
            Ok(d as u32)
        })
        .collect()
}

/// Parses one `op_attrs` string: a JSON object whose values are all strings. Keys that start
/// and end with `__` are dropped.
fn parse_op_attrs(value: &Value) -> Result<BTreeMap<String, String>, String> {
    let text = value.as_str().ok_or("must be a string")?;
    if text.trim().is_empty() {
        return Ok(BTreeMap::new());
    }
    let parsed: Value =
        serde_json::from_str(text).map_err(|err| format!("not a JSON object: {err}"))?;
    let object = parsed.as_object().ok_or("not a JSON object")?;
    let mut out = BTreeMap::new();
    for (key, value) in object {
        if key.len() >= 4 && key.starts_with("__") && key.ends_with("__") {
            continue;
        }
        let text = value
            .as_str()
            .ok_or_else(|| format!("the value of \"{key}\" is {value}, not a string"))?;
        out.insert(key.clone(), text.to_string());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_are_stripped() {
        assert_eq!(strip_suffix("dense_3"), "dense");
        assert_eq!(strip_suffix("cvm_right_shift"), "cvm_right_shift");
        assert_eq!(strip_suffix("cvm_right_shift_12"), "cvm_right_shift");
        assert_eq!(strip_suffix("relu"), "relu");
        assert_eq!(strip_suffix("_5"), "_5");
    }
}
