//! The CVM graph JSON (`symbol`, cvm-compat §1): parsing and every structural check the
//! deployed loader performs, before conversion to the canonical model.

use std::collections::BTreeMap;

use cvm_engine::fail;
use cvm_engine::{Error, ops};

use super::Rejection;
use crate::error::{excerpt, quote};
use serde_json::{Map, Value};

mod checks;
pub use checks::{ALIASES, IN_PLACE_OPS, PARAMETERLESS_OPS, cvm_op, is_hidden_key, storage_size};
use checks::{check_shape, check_storage, parse_op_attrs, strip_suffix};

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
    /// Outputs as they are (an empty or any other `postprocess` string).
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
    /// The alias the graph named the operator by ([`ALIASES`]), if it did.
    pub alias: Option<&'static str>,
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
    /// The `postprocess` string as the deployed runtime keeps it (its first 32 bytes, up to a
    /// NUL; empty when absent), which `CVMAPIGetPreprocessMethod` reports.
    pub postprocess_name: String,
    /// Whether copying `postprocess` overruns the deployed runtime's 32-byte buffer (32 bytes or
    /// more without a NUL among the first 32): undefined behaviour when a model is built.
    pub postprocess_overflow: bool,
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
    /// The nodes whose names the deployed loader requires distinct (`LOG(FATAL)` on a repeat):
    /// those the JSON `arg_nodes` lists.
    pub name_checked: Vec<usize>,
    /// Why the heads cannot be a model's outputs (none, or an entry past the last), which the
    /// deployed runtime finds when it builds a model from the graph, not when it prices it.
    pub heads_problem: Option<Rejection>,
}

/// A structural problem the deployed loader finds with a `VERIFY` (class 1).
fn bad(message: String) -> Rejection {
    Error::new(
        cvm_engine::ErrorCode::MalformedModel,
        format!("symbol: {message}"),
    )
    .into()
}

/// A problem the deployed loader stops at with `CHECK` or `LOG(FATAL)` (class 2): a JSON syntax
/// or type error, an unknown key, an unsupported version.
fn fatal(message: String) -> Rejection {
    Rejection::runtime(Error::new(
        cvm_engine::ErrorCode::MalformedModel,
        format!("symbol: {message}"),
    ))
}

fn field<'a>(
    object: &'a Map<String, Value>,
    key: &str,
    what: &str,
) -> Result<&'a Value, Rejection> {
    object
        .get(key)
        .ok_or_else(|| bad(format!("{what}: {} is missing", quote(key))))
}

fn check_keys(object: &Map<String, Value>, allowed: &[&str], what: &str) -> Result<(), Rejection> {
    match object.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(key) => Err(fatal(format!(
            "{what}: unknown key {} (allowed: {})",
            quote(key),
            allowed.join(", ")
        ))),
        None => Ok(()),
    }
}

fn array<'a>(value: &'a Value, what: &str) -> Result<&'a Vec<Value>, Rejection> {
    value
        .as_array()
        .ok_or_else(|| fatal(format!("{what} must be a list")))
}

/// A `uint32_t` as the deployed reader reads it: a C++ stream takes a negative number of at
/// most 32 bits and wraps it (−1 is 4294967295); anything else outside 32 bits fails.
fn index(value: &Value, what: &str) -> Result<usize, Rejection> {
    let wrapped = match value.as_i64() {
        Some(v) if v < 0 => u32::try_from(v.unsigned_abs())
            .ok()
            .map(|m| 0u32.wrapping_sub(m)),
        _ => value.as_u64().and_then(|v| u32::try_from(v).ok()),
    };
    wrapped
        .map(|v| v as usize)
        .ok_or_else(|| fatal(format!("{what}: {value} is not a 32-bit unsigned integer")))
}

/// Entry `row + output` in the deployed runtime's 32-bit arithmetic, where an output index read
/// from a negative number wraps to an earlier entry.
fn entry_id(row: usize, output: usize) -> usize {
    (row as u32).wrapping_add(output as u32) as usize
}

/// An entry reference `[node_id, output_index]` or `[node_id, output_index, version]`, read
/// as the deployed reader reads it: item by item, each a `uint32_t` (a JSON error, class 2),
/// with a `VERIFY` (class 1) that the second item is there and no fourth.
fn entry(value: &Value, what: &str) -> Result<(usize, usize), Rejection> {
    let items = array(value, what)?;
    let count_error = || {
        bad(format!(
            "{what}: an entry has 2 or 3 numbers, not {}",
            items.len()
        ))
    };
    let node = index(items.first().ok_or_else(count_error)?, what)?;
    let output = index(items.get(1).ok_or_else(count_error)?, what)?;
    if let Some(version) = items.get(2) {
        index(version, what)?;
    }
    if items.len() > 3 {
        return Err(count_error());
    }
    Ok((node, output))
}

/// A graph attribute written as `[type_tag, list]`.
fn typed_list<'a>(
    attrs: &'a Map<String, Value>,
    key: &str,
    tag: &str,
) -> Result<Option<&'a Vec<Value>>, Rejection> {
    let Some(value) = attrs.get(key) else {
        return Ok(None);
    };
    // The deployed reader checks the tag's value and the element count with `VERIFY`, and the
    // JSON types (a string tag, a list) with `CHECK`.
    match array(value, &format!("attrs.{key}"))?.as_slice() {
        [Value::String(found), list] if found == tag => {
            array(list, &format!("attrs.{key}")).map(Some)
        }
        [Value::String(_)] | [Value::String(_), _] | [Value::String(_), _, ..] | [] => {
            Err(bad(format!("attrs.{key} must be [{}, [...]]", quote(tag))))
        }
        _ => Err(fatal(format!(
            "attrs.{key} must be [{}, [...]] (its tag must be a string)",
            quote(tag)
        ))),
    }
}

/// Parses and checks a graph JSON.
///
/// # Errors
/// `MalformedModel` for structural problems, `UnknownOp` for an operator name the engine does
/// not have, `LimitExceeded` for shapes past the CVM limits, `InvalidPrecision` for precisions
/// outside −1 or 1..=32, `InvalidReference` for a graph out of topological order; every message
/// names the node, entry or key.
pub fn parse(text: &[u8]) -> Result<Symbol, Rejection> {
    let value: Value =
        super::json::parse(text).map_err(|err| fatal(format!("not valid JSON {err}")))?;
    let top = value
        .as_object()
        .ok_or_else(|| fatal("the graph must be a JSON object".into()))?;
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
            return Err(fatal(format!(
                "version {} is not supported (cvm_1.0.0 or cvm_1.1.0)",
                excerpt(&other.to_string())
            )));
        }
    };
    // Any string loads. The deployed constructor copies its first 32 bytes as a C string into
    // a 32-byte buffer, and keeps what it copied up to the first NUL: "argmax" and "detection"
    // change the output bytes, every other value (the empty one included) leaves them plain.
    // Without a NUL among them, 32 bytes or more overrun the buffer (undefined behaviour),
    // which matters only when a model is built.
    let written = match top.get("postprocess") {
        None => Vec::new(),
        Some(Value::String(p)) => super::json::to_bytes(p),
        Some(other) => {
            return Err(fatal(format!(
                "postprocess {} is not a string",
                excerpt(&other.to_string())
            )));
        }
    };
    let copied = &written[..written.len().min(32)];
    let effective = copied
        .iter()
        .position(|&b| b == 0)
        .map_or(copied, |nul| &copied[..nul]);
    let postprocess_overflow = effective.len() == 32;
    let postprocess = match effective {
        b"argmax" => Postprocess::Argmax,
        b"detection" => Postprocess::Detection,
        _ => Postprocess::None,
    };
    let postprocess_name = super::json::from_bytes(effective);

    let node_values = array(field(top, "nodes", "the graph")?, "nodes")?;
    let mut nodes = Vec::with_capacity(node_values.len());
    for (id, node_value) in node_values.iter().enumerate() {
        let what = format!("node {id}");
        let object = node_value
            .as_object()
            .ok_or_else(|| fatal(format!("{what} must be an object")))?;
        check_keys(
            object,
            &["op", "name", "inputs", "attrs", "precision"],
            &what,
        )?;
        if let Some(precision) = object.get("precision")
            && precision
                .as_i64()
                .and_then(|p| i32::try_from(p).ok())
                .is_none()
        {
            return Err(fatal(format!(
                "{what}: \"precision\" is {precision}, not an integer"
            )));
        }
        let name = field(object, "name", &what)?
            .as_str()
            .ok_or_else(|| fatal(format!("{what}: \"name\" must be a string")))?
            .to_string();
        let what = format!("node {id} ({})", quote(&name));
        let inputs = array(field(object, "inputs", &what)?, &format!("{what} inputs"))?
            .iter()
            .map(|e| entry(e, &format!("{what} inputs")))
            .collect::<Result<Vec<_>, _>>()?;
        // The deployed loader reads a node's `attrs` (variables included) as string values with
        // `func_name` required.
        let func = match object.get("attrs") {
            None => None,
            Some(Value::Object(map)) => {
                check_keys(
                    map,
                    &[
                        "func_name",
                        "num_inputs",
                        "num_outputs",
                        "op_attrs",
                        "flatten_data",
                    ],
                    &format!("{what} attrs"),
                )?;
                if let Some((key, _)) = map.iter().find(|(_, v)| !v.is_string()) {
                    return Err(fatal(format!(
                        "{what}: attrs.{} must be a string",
                        excerpt(key)
                    )));
                }
                Some(
                    map.get("func_name")
                        .and_then(Value::as_str)
                        .ok_or_else(|| {
                            bad(format!("{what}: attrs.func_name (the operator) is missing"))
                        })?,
                )
            }
            Some(_) => return Err(fatal(format!("{what}: \"attrs\" must be an object"))),
        };
        let mut alias = None;
        let kind = match field(object, "op", &what)?.as_str() {
            // A variable's inputs are only checked for topological order, as deployed.
            Some("null") => NodeKind::Variable,
            Some("cvm_op") => {
                // Without `attrs` the deployed loader looks up the operator "" (a `CHECK`).
                let func = func.ok_or_else(|| {
                    fatal(format!(
                        "{what}: no attrs, so no operator (the deployed loader looks up \"\")"
                    ))
                })?;
                let op_name = strip_suffix(func);
                // The deployed runtime registers the operators of spec 001 only (codes below
                // 100); the engine's other operators are not CVM operators.
                let found = ALIASES.iter().find(|(name, _)| *name == op_name);
                alias = found.map(|(name, _)| *name);
                let op = cvm_op(found.map_or(op_name, |(_, target)| target))
                    .ok_or_else(|| {
                        // Named, not numbered: the node's index in the canonical model
                        // depends on attributes not read yet.
                        Error {
                            node_name: Some(name.clone()),
                            ..fail!(
                                UnknownOp,
                                "symbol: {what}: operator {} is not known",
                                quote(func)
                            )
                        }
                    })
                    .map_err(Rejection::runtime)?;
                NodeKind::Op(op)
            }
            Some(_) => {
                return Err(bad(format!(
                    "{what}: \"op\" must be \"null\" or \"cvm_op\""
                )));
            }
            None => return Err(fatal(format!("{what}: \"op\" must be a string"))),
        };
        nodes.push(SymbolNode {
            name,
            kind,
            inputs,
            op_attrs: BTreeMap::new(),
            alias,
        });
    }

    // The inputs as written, for the in-place check, which the deployed loader makes on them
    // with the row pointers of the JSON before it checks either.
    let written_inputs: Vec<Vec<(usize, usize)>> =
        nodes.iter().map(|node| node.inputs.clone()).collect();

    // Entries, topological order.
    let mut node_row_ptr = Vec::with_capacity(nodes.len() + 1);
    let mut entries = 0usize;
    for node in &nodes {
        node_row_ptr.push(entries);
        entries += node.outputs();
    }
    node_row_ptr.push(entries);
    // The deployed loader reads input (n, k) from entry node_row_ptr[n] + k, which must come
    // before the node's first entry; an index past node n's outputs names a later node's entry.
    let owner = |entry: usize| -> (usize, usize) {
        let node = node_row_ptr.partition_point(|&first| first <= entry) - 1;
        (node, entry - node_row_ptr[node])
    };
    for id in 0..nodes.len() {
        let first = node_row_ptr[id];
        let resolved = nodes[id]
            .inputs
            .iter()
            .map(|&(input, output)| {
                match node_row_ptr.get(input).map(|&row| entry_id(row, output)) {
                    Some(entry) if entry < first => Ok(owner(entry)),
                    None => Err(bad(format!(
                        "node {id} ({}) reads node {input} of {}: the deployed runtime reads past its row pointers (undefined behaviour)", quote(&nodes[id].name),
                        nodes.len()
                    ))),
                    _ => Err(fail!(
                        InvalidReference,
                        "symbol: node {id} ({}) reads entry ({input}, {output}), which does not come before it: the graph is not in topological order", quote(&nodes[id].name))
                    .into()),
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        nodes[id].inputs = resolved;
    }
    // The heads are read here, and checked only when a model is built from the graph (the
    // gas of a graph never looks at them).
    let mut heads = Vec::new();
    let mut heads_problem = None;
    for (node, output) in array(field(top, "heads", "the graph")?, "heads")?
        .iter()
        .map(|e| entry(e, "heads"))
        .collect::<Result<Vec<_>, _>>()?
    {
        match node_row_ptr.get(node).map(|&row| entry_id(row, output)) {
            Some(entry) if entry < entries => heads.push(owner(entry)),
            _ => {
                heads_problem.get_or_insert_with(|| bad(format!(
                    "heads: entry ({node}, {output}) does not exist (the deployed runtime reads past its entries: undefined behaviour)"
                )));
            }
        }
    }
    if heads.is_empty() && heads_problem.is_none() {
        heads_problem = Some(bad("heads: the graph has no outputs".into()));
    }

    // Graph attributes.
    let attrs = field(top, "attrs", "the graph")?
        .as_object()
        .ok_or_else(|| fatal("\"attrs\" must be an object".into()))?;
    check_keys(
        attrs,
        &[
            "shape",
            "precision",
            "op_attrs",
            "storage_id",
            "dltype",
            "device_index",
            "dtype",
        ],
        "attrs",
    )?;
    // `dtype` is read and ignored: a list of integers, or a number under the "list_str" tag. The
    // deployed reader checks the element count with `VERIFY`; the JSON types and an unknown tag
    // stop it at a `CHECK` or `LOG(FATAL)`.
    if let Some(value) = attrs.get("dtype") {
        let form = "attrs.dtype must be [\"list_int\", [...]] or [\"list_str\", <count>]";
        let known = |tag: &str| tag == "list_int" || tag == "list_str";
        match array(value, "attrs.dtype")?.as_slice() {
            [Value::String(tag), Value::Array(list)] if tag == "list_int" => {
                if !list
                    .iter()
                    .all(|v| v.as_i64().is_some_and(|v| i32::try_from(v).is_ok()))
                {
                    return Err(fatal(format!("{form}: a value is not an integer")));
                }
            }
            [Value::String(tag), number] if tag == "list_str" => {
                // A `size_t`: a negative count wraps, as a C++ stream reads it.
                if number.as_u64().is_none() && number.as_i64().is_none() {
                    return Err(fatal(format!("{form}: the count is not a number")));
                }
            }
            [Value::String(tag), ..] if !known(tag) => {
                return Err(fatal(format!("{form}: unknown tag {}", quote(tag))));
            }
            [Value::String(_)] | [] | [Value::String(_), _, _, ..] => {
                return Err(bad(form.into()));
            }
            _ => return Err(fatal(form.into())),
        }
    }
    let per_entry =
        |key: &str, tag: &str, required: bool| -> Result<Option<&Vec<Value>>, Rejection> {
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
        .map(|(entry_id, p)| match p.as_i64().map(i32::try_from) {
            Some(Ok(p)) if p == -1 || (1..=32).contains(&p) => Ok(p),
            Some(Ok(_)) => Err(fail!(
                InvalidPrecision,
                "symbol: attrs.precision[{entry_id}] = {p} is not −1 or 1..=32"
            )
            .into()),
            // The reader reads a token that is no integer of 64 bits as null.
            _ if p.is_null() => Err(fatal(format!(
                "attrs.precision[{entry_id}] is not an integer (the deployed reader takes \
                 digits only, within 64 bits)"
            ))),
            _ => Err(fatal(format!(
                "attrs.precision[{entry_id}] = {p} is not a 32-bit integer"
            ))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let storage_ids = per_entry("storage_id", "list_int", true)?
        .unwrap_or(&Vec::new())
        .iter()
        .map(|storage| match storage.as_i64().map(i32::try_from) {
            Some(Ok(id)) if id >= 0 => Ok(u64::from(id.unsigned_abs())),
            Some(Ok(_)) => Err(bad(format!(
                "attrs.storage_id holds {storage}, not a non-negative integer"
            ))),
            _ => Err(fatal(format!(
                "attrs.storage_id holds {storage}, not a 32-bit integer"
            ))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let written_rows = match top.get("node_row_ptr") {
        Some(rows) => array(rows, "node_row_ptr")?
            .iter()
            .map(|v| index(v, "node_row_ptr"))
            .collect::<Result<Vec<_>, _>>()?,
        None => Vec::new(),
    };
    check_storage(&nodes, &written_inputs, &written_rows, &storage_ids)?;
    if let Some(list) = typed_list(attrs, "device_index", "list_int")?
        && !list.is_empty()
    {
        return Err(bad(format!(
            "attrs.device_index must be empty (it has {} values)",
            list.len()
        )));
    }
    // `dltype` is checked under cvm_1.0.0 only: one "int32" per entry.
    if version == Version::V1_0 {
        if let Some((entry_id, other)) = per_entry("dltype", "list_str", true)?
            .into_iter()
            .flatten()
            .enumerate()
            .find(|(_, t)| t.as_str() != Some("int32"))
        {
            let error = format!(
                "attrs.dltype[{entry_id}] = {}: only \"int32\" is supported",
                excerpt(&other.to_string())
            );
            return Err(if other.is_string() {
                bad(error)
            } else {
                fatal(error)
            });
        }
    } else if let Some(types) = typed_list(attrs, "dltype", "list_str")?
        && types.iter().any(|t| !t.is_string())
    {
        return Err(fatal("attrs.dltype must list strings".into()));
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
    // Every entry is read as a string; the deployed loader parses only operators' entries.
    for (id, (node, text)) in nodes.iter_mut().zip(op_attrs).enumerate() {
        let error = |m: &str| {
            fatal(format!(
                "node {id} ({}): attrs.op_attrs: {m}",
                quote(&node.name)
            ))
        };
        let text = text.as_str().ok_or_else(|| error("must be a string"))?;
        if node.kind != NodeKind::Variable {
            node.op_attrs = parse_op_attrs(text).map_err(|m| error(&m))?;
        }
    }

    // Variables: declared precisions; version 1.0.0 cross-checks.
    for (id, node) in nodes.iter().enumerate() {
        if node.kind == NodeKind::Variable && precisions[node_row_ptr[id]] == -1 {
            return Err(fail!(
                InvalidPrecision,
                "symbol: variable {} must declare a precision in 1..=32, not −1",
                quote(&node.name)
            )
            .into());
        }
    }
    let variables: Vec<usize> = (0..nodes.len())
        .filter(|&id| nodes[id].kind == NodeKind::Variable)
        .collect();
    // The deployed loader first requires distinct names among the nodes the JSON `arg_nodes`
    // lists, whatever they are (`LOG(FATAL)`); an id past the nodes is read out of bounds.
    // Under cvm_1.0.0 the list must then be the variables; under cvm_1.1.0 it is replaced, and
    // variables it does not list escape the check.
    let name_checked = match top.get("arg_nodes") {
        None => Vec::new(),
        Some(listed) => array(listed, "arg_nodes")?
            .iter()
            .map(|v| index(v, "arg_nodes"))
            .collect::<Result<Vec<_>, _>>()?,
    };
    if let Some(id) = name_checked.iter().find(|&&id| id >= nodes.len()) {
        return Err(bad(format!(
            "arg_nodes lists node {id} of {}: the deployed runtime reads past its nodes (undefined behaviour)",
            nodes.len()
        )));
    }
    let mut seen = std::collections::HashSet::new();
    for &id in &name_checked {
        if !seen.insert(nodes[id].name.as_str()) {
            let what = match nodes[id].kind {
                NodeKind::Variable => "variables",
                NodeKind::Op(_) => "nodes of arg_nodes",
            };
            return Err(fatal(format!(
                "two {what} are named {}",
                quote(&nodes[id].name)
            )));
        }
    }
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
        postprocess_name,
        postprocess_overflow,
        nodes,
        heads,
        shapes,
        precisions,
        node_row_ptr,
        storage_ids,
        name_checked,
        heads_problem,
    })
}
