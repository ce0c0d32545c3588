//! Models deployed on the Cortex chain: the CVM `symbol` + `params` pair (cvm-compat §1–§2),
//! their conversion to the canonical model, the legacy gas of the deployed runtime (§5), and
//! the input/output byte contract of `CVMAPIInference` (§4).
//!
//! Conversion is lossless and deterministic: the same two files always give the same canonical
//! bytes (parameters keep their stored width; attributes are typed by the operator's schema and
//! sorted). Every load failure is a deterministic [`cvm_engine::Error`] whose message names the
//! node, entry or parameter; hosts report it as a hashed outcome like any model rejection.

pub mod params;
pub mod symbol;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use cvm_engine::attrs::AttrKind;
use cvm_engine::exec::InputTensor;
use cvm_engine::model::{
    Attr, AttrValue, InputDecl, Model, Node, OutputDecl, ParamData, ParamDecl, ValueRef,
};
use cvm_engine::outcome::OutputTensor;
use cvm_engine::tensor::precision_bound;
use cvm_engine::{Error, ValidatedModel, fail};

use crate::error::{HostError, read_file};
use symbol::NodeKind;
pub use symbol::{Postprocess, Symbol, Version};

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
    /// Gas as the deployed runtime computes it from the graph (cvm-compat §5).
    pub legacy_gas: u64,
    /// Precision of `data`: ≤ 8 means one byte per input element.
    pub input_precision: u8,
    /// Shape of `data`.
    pub input_shape: Vec<u32>,
    /// The graph version.
    pub version: Version,
}

/// Reads `symbol` and `params` from a directory.
///
/// # Errors
/// [`HostError::Io`] when a file cannot be read.
pub fn read_dir(dir: &Path) -> Result<(Vec<u8>, Vec<u8>), HostError> {
    Ok((
        read_file(&dir.join("symbol"))?,
        read_file(&dir.join("params"))?,
    ))
}

/// Converts a CVM model to the canonical form, performing every load check of cvm-compat
/// §1–§2 and checking the declared shapes against the engine's shape inference.
///
/// # Errors
/// A deterministic error naming the node, entry or parameter.
pub fn import(symbol_bytes: &[u8], params_bytes: &[u8]) -> Result<CvmModel, Error> {
    let graph = symbol::parse(symbol_bytes)?;
    let arrays = params::parse(params_bytes)?;

    // Where every entry goes in the canonical model.
    let data_nodes: Vec<usize> = (0..graph.nodes.len())
        .filter(|&id| graph.nodes[id].kind == NodeKind::Variable && graph.nodes[id].name == DATA)
        .collect();
    let data_node = match data_nodes.as_slice() {
        [one] => *one,
        [] => {
            return Err(fail!(
                MalformedModel,
                "symbol: no variable is named \"{DATA}\" (the model input)"
            ));
        }
        _ => {
            return Err(fail!(
                MalformedModel,
                "symbol: {} variables are named \"{DATA}\"",
                data_nodes.len()
            ));
        }
    };
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
                op_index += 1;
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

    // Parameters: every variable but data, present once, with the declared shape and precision.
    let mut by_name: HashMap<&str, &params::Array> = HashMap::new();
    for array in &arrays {
        if by_name.insert(array.name.as_str(), array).is_some() {
            return Err(fail!(
                MalformedModel,
                "params: parameter \"{}\" appears twice",
                array.name
            ));
        }
        let is_param = param_nodes
            .iter()
            .any(|&id| graph.nodes[id].name == array.name);
        if !is_param {
            return Err(fail!(
                MalformedModel,
                "params: \"{}\" is not a parameter variable of the graph{}",
                array.name,
                if array.name == DATA {
                    " (it is the model input)"
                } else {
                    ""
                }
            ));
        }
    }
    let mut param_decls = Vec::with_capacity(param_nodes.len());
    for &id in &param_nodes {
        let name = &graph.nodes[id].name;
        let array = by_name.get(name.as_str()).ok_or_else(|| {
            fail!(
                MalformedModel,
                "params: parameter \"{name}\" of the graph is missing"
            )
        })?;
        let shape = &graph.shapes[entry(id)];
        if array.shape.len() != shape.len()
            || array
                .shape
                .iter()
                .zip(shape)
                .any(|(&a, &b)| a != i64::from(b))
        {
            return Err(fail!(
                ShapeMismatch,
                "params: parameter \"{name}\" has shape {:?}, the graph declares {shape:?}",
                array.shape
            ));
        }
        let precision = graph.precisions[entry(id)] as u8;
        let bound = precision_bound(precision);
        let values = array.data.values();
        if let Some((index, value)) = values
            .iter()
            .enumerate()
            .find(|&(_, &v)| i64::from(v).abs() > bound)
        {
            return Err(fail!(
                InvalidParam,
                "params: parameter \"{name}\": value {value} at index {index} exceeds precision {precision}"
            ));
        }
        let data = match &array.data {
            params::ArrayData::I8(values) => ParamData::I8(values.clone()),
            params::ArrayData::I32(values) => ParamData::I32(values.clone()),
        };
        param_decls.push(ParamDecl {
            name: name.clone(),
            shape: shape.clone(),
            precision,
            data,
        });
    }

    // Operator nodes with typed attributes.
    let mut nodes = Vec::new();
    for (id, node) in graph.nodes.iter().enumerate() {
        let NodeKind::Op(op) = node.kind else {
            continue;
        };
        let mut attrs = Vec::with_capacity(node.op_attrs.len());
        for (key, text) in &node.op_attrs {
            let kind = op
                .attrs
                .iter()
                .find(|spec| spec.name == key)
                .map(|spec| spec.kind);
            let value = parse_attr(text, kind).map_err(|message| {
                fail!(
                    AttributeType,
                    "symbol: node {id} (\"{}\"): attribute \"{key}\" = \"{text}\": {message}",
                    node.name
                )
            })?;
            if let Some(value) = value {
                attrs.push(Attr {
                    name: key.clone(),
                    value,
                });
            }
        }
        nodes.push(Node {
            name: node.name.clone(),
            op: op.code,
            inputs: node.inputs.iter().map(|&e| reference(e)).collect(),
            attrs,
        });
    }
    let outputs = graph
        .heads
        .iter()
        .map(|&(node, output)| OutputDecl {
            name: if output == 0 {
                graph.nodes[node].name.clone()
            } else {
                format!("{}:{output}", graph.nodes[node].name)
            },
            value: reference((node, output)),
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

    // The declared shape of every operator output must be the inferred one: the deployed
    // runtime allocates by the declared shapes (cvm-compat §6: a conv2d weight that disagrees
    // with its attributes overruns memory there).
    let validated = ValidatedModel::from_bytes(&model.encode(), &cvm_engine::gas::Schedule::V1)?;
    let op_ids =
        (0..graph.nodes.len()).filter(|&id| matches!(graph.nodes[id].kind, NodeKind::Op(_)));
    for (node, id) in validated.nodes.iter().zip(op_ids) {
        for (output, ty) in node.output_types.iter().enumerate() {
            let declared = &graph.shapes[entry(id) + output];
            if declared != ty.dims() {
                return Err(fail!(
                    ShapeMismatch,
                    "symbol: node {id} (\"{}\") output {output} is declared {declared:?}, but {} computes {}",
                    node.name,
                    node.op.name,
                    ty.shape
                ));
            }
        }
    }
    Ok(CvmModel {
        meta: CvmMeta {
            legacy_gas: legacy_gas(&graph)?,
            postprocess: graph.postprocess,
            version: graph.version,
            input_precision,
            input_shape,
        },
        model,
    })
}

/// Types one attribute string (cvm-compat §1): decimal integers; booleans `true/false/1/0` in
/// any case; tuples `(1, 2)`, `[1,2]` or a bare `3`; `None` for an absent optional value.
/// Attributes the operator does not take are kept as strings for validation to reject.
fn parse_attr(text: &str, kind: Option<AttrKind>) -> Result<Option<AttrValue>, String> {
    let trimmed = text.trim();
    let integer = |s: &str| -> Result<i64, String> {
        let s = s.trim();
        let s = s.strip_suffix('L').unwrap_or(s);
        s.parse::<i64>()
            .map_err(|_| format!("\"{s}\" is not an integer"))
    };
    match kind {
        None | Some(AttrKind::Str) => Ok(Some(AttrValue::Str(text.to_string()))),
        Some(_) if trimmed == "None" => Ok(None),
        Some(AttrKind::Int | AttrKind::Fixed) => integer(trimmed).map(|v| Some(AttrValue::Int(v))),
        Some(AttrKind::Bool) => match trimmed.to_ascii_lowercase().as_str() {
            "true" | "1" => Ok(Some(AttrValue::Bool(true))),
            "false" | "0" => Ok(Some(AttrValue::Bool(false))),
            _ => Err("not a boolean (true, false, 1, 0)".into()),
        },
        Some(AttrKind::Ints) => {
            let inner = trimmed
                .strip_prefix('(')
                .and_then(|s| s.strip_suffix(')'))
                .or_else(|| trimmed.strip_prefix('[').and_then(|s| s.strip_suffix(']')))
                .unwrap_or(trimmed);
            let values = inner
                .split(',')
                .filter(|part| !part.trim().is_empty())
                .map(integer)
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Some(AttrValue::Ints(values)))
        }
    }
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
            continue;
        };
        let input_entry = |k: usize| node.inputs.get(k).map(|&(n, o)| graph.node_row_ptr[n] + o);
        let use_bias = node
            .op_attrs
            .get("use_bias")
            .is_none_or(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "1"));
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
                let pool = node
                    .op_attrs
                    .get("pool_size")
                    .and_then(|t| parse_attr(t, Some(AttrKind::Ints)).ok().flatten());
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
                "legacy gas: node \"{}\" has base cost {base} > 2^30",
                node.name
            ));
        }
        ops += base * size(first);
        if ops > 1 << 40 {
            return Err(fail!(
                LimitExceeded,
                "legacy gas: operations exceed 2^40 at node \"{}\"",
                node.name
            ));
        }
        memory += 5 * (first..graph.node_row_ptr[id + 1]).map(size).sum::<u64>();
        if memory > 1 << 40 {
            return Err(fail!(
                LimitExceeded,
                "legacy gas: memory exceeds 2^40 at node \"{}\"",
                node.name
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
/// [`HostError::Input`] when the byte length is wrong.
pub fn decode_input(
    model: &CvmMeta,
    bytes: &[u8],
    big_endian: bool,
) -> Result<InputTensor, HostError> {
    let elements: usize = model.input_shape.iter().map(|&d| d as usize).product();
    let width = if model.input_precision <= 8 { 1 } else { 4 };
    if bytes.len() != elements * width {
        return Err(HostError::Input(format!(
            "CVM input must be {} bytes ({elements} elements of {width} byte(s) for precision {}), got {}",
            elements * width,
            model.input_precision,
            bytes.len()
        )));
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

/// Encodes the model outputs as `CVMAPIInference` returns them (cvm-compat §4).
///
/// - `argmax`: per head, one int32 per row: the index of the largest value over the last axis
///   (first index on ties), over every row and the full values (the deployed runtime fills only
///   the first rows and compares 8-bit truncations; cvm-compat §6).
/// - `detection`, or more than one head: rows of all heads interleaved (row x of head 0, row x of
///   head 1, …); int32 for detection, else by precision.
/// - otherwise: every element, one byte each when every head's precision is ≤ 8, else int32.
///
/// # Errors
/// A message when heads cannot be interleaved (different row counts) or a head has an empty last
/// axis under argmax.
pub fn encode_output(
    postprocess: Postprocess,
    outputs: &[OutputTensor],
    big_endian: bool,
) -> Result<Vec<u8>, String> {
    let push32 = |out: &mut Vec<u8>, value: i32| {
        out.extend_from_slice(&if big_endian {
            value.to_be_bytes()
        } else {
            value.to_le_bytes()
        });
    };
    let narrow = outputs.iter().all(|t| t.precision <= 8);
    let last_dim = |t: &OutputTensor| t.shape.last().map_or(1, |&d| d as usize);
    let mut out = Vec::new();
    match postprocess {
        Postprocess::Argmax => {
            for tensor in outputs {
                let width = last_dim(tensor);
                if width == 0 {
                    return Err("argmax over an empty last axis".into());
                }
                for row in tensor.data.chunks_exact(width) {
                    let mut best = 0;
                    for (index, &value) in row.iter().enumerate() {
                        if value > row[best] {
                            best = index;
                        }
                    }
                    push32(&mut out, best as i32);
                }
            }
        }
        _ if postprocess == Postprocess::Detection || outputs.len() > 1 => {
            let rows: Vec<usize> = outputs
                .iter()
                .map(|t| t.data.len() / last_dim(t).max(1))
                .collect();
            if rows.windows(2).any(|pair| pair[0] != pair[1]) {
                return Err(format!(
                    "heads with row counts {rows:?} cannot be interleaved"
                ));
            }
            let wide = postprocess == Postprocess::Detection || !narrow;
            for row in 0..rows.first().copied().unwrap_or(0) {
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

    #[test]
    fn attribute_strings() {
        let ints = Some(AttrKind::Ints);
        assert_eq!(
            parse_attr("(1, 2)", ints),
            Ok(Some(AttrValue::Ints(vec![1, 2])))
        );
        assert_eq!(
            parse_attr("[1,2]", ints),
            Ok(Some(AttrValue::Ints(vec![1, 2])))
        );
        assert_eq!(parse_attr("3", ints), Ok(Some(AttrValue::Ints(vec![3]))));
        assert_eq!(parse_attr("()", ints), Ok(Some(AttrValue::Ints(vec![]))));
        assert_eq!(
            parse_attr("(2L, -1L)", ints),
            Ok(Some(AttrValue::Ints(vec![2, -1])))
        );
        assert_eq!(parse_attr("None", Some(AttrKind::Int)), Ok(None));
        assert_eq!(
            parse_attr("-7", Some(AttrKind::Int)),
            Ok(Some(AttrValue::Int(-7)))
        );
        for (text, value) in [
            ("True", true),
            ("false", false),
            ("1", true),
            ("0", false),
            ("TRUE", true),
        ] {
            assert_eq!(
                parse_attr(text, Some(AttrKind::Bool)),
                Ok(Some(AttrValue::Bool(value)))
            );
        }
        assert!(parse_attr("yes", Some(AttrKind::Bool)).is_err());
        assert!(parse_attr("1.5", Some(AttrKind::Int)).is_err());
        assert!(parse_attr("(1, x)", ints).is_err());
        assert_eq!(
            parse_attr("NCHW", Some(AttrKind::Str)),
            Ok(Some(AttrValue::Str("NCHW".into())))
        );
        assert_eq!(parse_attr("5", None), Ok(Some(AttrValue::Str("5".into()))));
    }

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
        // argmax: first index wins ties; −1 > −2 > −3 gives 0 for the second row.
        assert_eq!(
            encode_output(Postprocess::Argmax, std::slice::from_ref(&head), false),
            Ok(vec![1, 0, 0, 0, 0, 0, 0, 0])
        );
        assert_eq!(
            encode_output(Postprocess::Argmax, std::slice::from_ref(&head), true),
            Ok(vec![0, 0, 0, 1, 0, 0, 0, 0])
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
        // Mismatched row counts cannot be interleaved.
        let odd = tensor(&[3, 1], 8, &[1, 2, 3]);
        assert!(encode_output(Postprocess::Detection, &[head, odd], false).is_err());
    }
}
