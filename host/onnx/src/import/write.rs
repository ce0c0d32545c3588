//! Write: the integer model as a CVM graph under construction, and its two files: the `symbol`
//! JSON (cvm-compat §1) and the `params` binary (§2), laid out as the deployed runtime reads them;
//! or, for a model that uses the engine's own operators (which no CVM file can name), the
//! engine's canonical model directly.

use std::collections::{HashMap, HashSet};

use cvm_engine::Model;
use cvm_engine::attrs::AttrKind;
use cvm_engine::model::{
    Attr, AttrValue, InputDecl, Node, OutputDecl, ParamData, ParamDecl, ValueRef,
};
use cvm_formats::cvm::params::{self, Array, ArrayData};

/// One node: a variable (the input or a parameter) or an operator.
struct CvmNode {
    name: String,
    /// The operator, `None` for a variable.
    op: Option<&'static str>,
    inputs: Vec<usize>,
    /// Attributes as the CVM writes them: strings.
    attrs: Vec<(&'static str, String)>,
    shape: Vec<usize>,
    /// A variable's precision; −1 for an operator.
    precision: i32,
    /// A parameter's values.
    values: Option<Vec<i32>>,
}

/// A CVM graph in the order it is built, which is its topological order.
#[derive(Default)]
pub struct CvmGraph {
    nodes: Vec<CvmNode>,
    names: HashSet<String>,
    /// Per name asked for, the first suffix [`CvmGraph::unique`] has not yet found taken.
    next_suffix: HashMap<String, usize>,
}

/// bits(n): the number of significant bits of n.
pub fn bits(n: u64) -> u32 {
    64 - n.leading_zeros()
}

/// The smallest precision that holds every value: bits(max |v|) + 1.
pub fn precision_of(values: &[i32]) -> u32 {
    bits(
        values
            .iter()
            .map(|v| u64::from(v.unsigned_abs()))
            .max()
            .unwrap_or(0),
    ) + 1
}

/// `(a, b, …)`, the CVM's tuple syntax.
pub fn tuple(values: &[usize]) -> String {
    let parts: Vec<String> = values.iter().map(ToString::to_string).collect();
    format!("({})", parts.join(", "))
}

impl CvmGraph {
    /// `name`, or if it is taken `name_k` for the least k ≥ 1 not taken. Names are never given
    /// back, so the search for a name resumes where it last stopped: linear in the names made,
    /// not quadratic when many values share a name.
    fn unique(&mut self, name: &str) -> String {
        if self.names.insert(name.to_string()) {
            return name.to_string();
        }
        let k = self.next_suffix.entry(name.to_string()).or_insert(1);
        loop {
            let candidate = format!("{name}_{k}");
            *k += 1;
            if self.names.insert(candidate.clone()) {
                return candidate;
            }
        }
    }

    /// A model input named `name` (made unique), of `precision`.
    pub fn input_named(&mut self, name: &str, shape: &[usize], precision: u32) -> usize {
        let name = self.unique(name);
        self.nodes.push(CvmNode {
            name,
            op: None,
            inputs: Vec::new(),
            attrs: Vec::new(),
            shape: shape.to_vec(),
            precision: precision as i32,
            values: None,
        });
        self.nodes.len() - 1
    }

    /// A parameter of the smallest precision that holds `values`; returns it and its
    /// precision.
    pub fn param(&mut self, name: &str, shape: &[usize], values: Vec<i32>) -> (usize, u32) {
        let precision = precision_of(&values);
        let name = self.unique(name);
        self.nodes.push(CvmNode {
            name,
            op: None,
            inputs: Vec::new(),
            attrs: Vec::new(),
            shape: shape.to_vec(),
            precision: precision as i32,
            values: Some(values),
        });
        (self.nodes.len() - 1, precision)
    }

    /// An operator node.
    pub fn op(
        &mut self,
        name: &str,
        op: &'static str,
        inputs: &[usize],
        attrs: Vec<(&'static str, String)>,
        shape: &[usize],
    ) -> usize {
        let name = self.unique(name);
        self.nodes.push(CvmNode {
            name,
            op: Some(op),
            inputs: inputs.to_vec(),
            attrs,
            shape: shape.to_vec(),
            precision: -1,
            values: None,
        });
        self.nodes.len() - 1
    }

    /// The name node `id` was given.
    pub fn name(&self, id: usize) -> &str {
        &self.nodes[id].name
    }

    /// How many operator nodes the graph has.
    pub fn operators(&self) -> usize {
        self.nodes.iter().filter(|n| n.op.is_some()).count()
    }

    /// The `symbol` JSON with `head` as the only output, one node per line.
    pub fn symbol(&self, head: usize) -> Vec<u8> {
        let json = |s: &str| serde_json::Value::String(s.to_string()).to_string();
        let mut out = String::from("{\n  \"nodes\": [\n");
        let lines: Vec<String> = self
            .nodes
            .iter()
            .map(|node| match node.op {
                None => format!(
                    "    {{\"op\": \"null\", \"name\": {}, \"inputs\": []}}",
                    json(&node.name)
                ),
                Some(op) => {
                    let inputs: Vec<String> =
                        node.inputs.iter().map(|i| format!("[{i}, 0, 0]")).collect();
                    format!(
                        "    {{\"op\": \"cvm_op\", \"name\": {}, \"attrs\": {{\"flatten_data\": \"0\", \"func_name\": \"{op}\", \"num_inputs\": \"{}\", \"num_outputs\": \"1\"}}, \"inputs\": [{}]}}",
                        json(&node.name),
                        node.inputs.len(),
                        inputs.join(", ")
                    )
                }
            })
            .collect();
        out.push_str(&lines.join(",\n"));
        out.push_str("\n  ],\n");
        let arg_nodes: Vec<String> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].op.is_none())
            .map(|i| i.to_string())
            .collect();
        out.push_str(&format!("  \"arg_nodes\": [{}],\n", arg_nodes.join(", ")));
        let rows: Vec<String> = (0..=self.nodes.len()).map(|i| i.to_string()).collect();
        out.push_str(&format!("  \"node_row_ptr\": [{}],\n", rows.join(", ")));
        out.push_str(&format!("  \"heads\": [[{head}, 0, 0]],\n"));
        out.push_str("  \"attrs\": {\n");
        let count = self.nodes.len();
        out.push_str(&format!(
            "    \"dltype\": [\"list_str\", [{}]],\n",
            vec!["\"int32\""; count].join(", ")
        ));
        let op_attrs: Vec<String> = self
            .nodes
            .iter()
            .map(|node| {
                let fields: Vec<String> = node
                    .attrs
                    .iter()
                    .map(|(k, v)| format!("{}: {}", json(k), json(v)))
                    .collect();
                format!("      {}", json(&format!("{{{}}}", fields.join(", "))))
            })
            .collect();
        out.push_str(&format!(
            "    \"op_attrs\": [\"list_str\", [\n{}\n    ]],\n",
            op_attrs.join(",\n")
        ));
        let precisions: Vec<String> = self.nodes.iter().map(|n| n.precision.to_string()).collect();
        out.push_str(&format!(
            "    \"precision\": [\"list_int\", [{}]],\n",
            precisions.join(", ")
        ));
        let shapes: Vec<String> = self
            .nodes
            .iter()
            .map(|n| {
                let dims: Vec<String> = n.shape.iter().map(ToString::to_string).collect();
                format!("[{}]", dims.join(", "))
            })
            .collect();
        out.push_str(&format!(
            "    \"shape\": [\"list_shape\", [{}]],\n",
            shapes.join(", ")
        ));
        let storage: Vec<String> = (0..count).map(|i| i.to_string()).collect();
        out.push_str(&format!(
            "    \"storage_id\": [\"list_int\", [{}]]\n",
            storage.join(", ")
        ));
        out.push_str("  },\n  \"version\": \"cvm_1.1.0\"\n}\n");
        out.into_bytes()
    }

    /// The `params` binary: every parameter in graph order, int8 when its precision is at most
    /// 8, else int32.
    pub fn params(&self) -> Vec<u8> {
        let arrays: Vec<Array> = self
            .nodes
            .iter()
            .filter_map(|node| {
                let values = node.values.as_ref()?;
                let data = if node.precision <= 8 {
                    ArrayData::I8(values.iter().map(|&v| v as i8).collect())
                } else {
                    ArrayData::I32(values.clone())
                };
                Some(Array {
                    name: node.name.clone(),
                    shape: node.shape.iter().map(|&d| d as i64).collect(),
                    data,
                })
            })
            .collect();
        params::write(&arrays)
    }

    /// The engine's canonical model of the graph with `head` as the only output (the input
    /// `data` of precision 8; parameters int8 where their precision is at most 8, else int32;
    /// each attribute typed by the operator's schema). For models that use the engine's own
    /// operators, which the `symbol` file cannot name.
    ///
    /// # Errors
    /// An operator the engine does not have, or an attribute its schema does not read as
    /// written (an importer bug, reported rather than written).
    pub fn model(&self, head: usize) -> Result<Model, String> {
        let mut inputs = Vec::new();
        let mut params = Vec::new();
        let mut nodes = Vec::new();
        let mut refs = Vec::with_capacity(self.nodes.len());
        for node in &self.nodes {
            let shape: Vec<u32> = node.shape.iter().map(|&d| d as u32).collect();
            let reference = match (node.op, &node.values) {
                (None, None) => {
                    inputs.push(InputDecl {
                        name: node.name.clone(),
                        shape,
                        precision: node.precision as u8,
                    });
                    ValueRef::Input(inputs.len() as u32 - 1)
                }
                (None, Some(values)) => {
                    let data = if node.precision <= 8 {
                        ParamData::I8(values.iter().map(|&v| v as i8).collect())
                    } else {
                        ParamData::I32(values.clone())
                    };
                    params.push(ParamDecl {
                        name: node.name.clone(),
                        shape,
                        precision: node.precision as u8,
                        data,
                    });
                    ValueRef::Param(params.len() as u32 - 1)
                }
                (Some(op), _) => {
                    let def = cvm_engine::ops::by_name(op)
                        .ok_or_else(|| format!("the engine has no operator {op}"))?;
                    let mut attrs = Vec::with_capacity(node.attrs.len());
                    for (key, text) in &node.attrs {
                        let kind = def
                            .attrs
                            .iter()
                            .find(|spec| spec.name == *key)
                            .map(|spec| spec.kind)
                            .ok_or_else(|| format!("{op} has no attribute {key}"))?;
                        let value = attr_value(kind, text)
                            .ok_or_else(|| format!("{op}: attribute {key} = {text:?}"))?;
                        attrs.push(Attr {
                            name: (*key).to_string(),
                            value,
                        });
                    }
                    attrs.sort_by(|a, b| a.name.cmp(&b.name));
                    let inputs = node
                        .inputs
                        .iter()
                        .map(|&i| refs.get(i).copied().ok_or("a forward reference"))
                        .collect::<Result<Vec<ValueRef>, _>>()?;
                    nodes.push(Node {
                        name: node.name.clone(),
                        op: def.code,
                        inputs,
                        attrs,
                    });
                    ValueRef::Node {
                        node: nodes.len() as u32 - 1,
                        output: 0,
                    }
                }
            };
            refs.push(reference);
        }
        let value = refs.get(head).copied().ok_or("no output")?;
        Ok(Model {
            inputs,
            params,
            nodes,
            outputs: vec![OutputDecl {
                name: self.nodes[head].name.clone(),
                value,
            }],
        })
    }
}

/// An attribute written as the CVM writes it (`True`, `12`, `(1, 2)`, text) read as `kind`.
fn attr_value(kind: AttrKind, text: &str) -> Option<AttrValue> {
    match kind {
        AttrKind::Bool => match text {
            "True" => Some(AttrValue::Bool(true)),
            "False" => Some(AttrValue::Bool(false)),
            _ => None,
        },
        AttrKind::Int | AttrKind::Fixed => text.parse().ok().map(AttrValue::Int),
        AttrKind::Ints => {
            let inner = text.strip_prefix('(')?.strip_suffix(')')?;
            inner
                .split(',')
                .map(str::trim)
                .filter(|part| !part.is_empty())
                .map(|part| part.parse().ok())
                .collect::<Option<Vec<i64>>>()
                .map(AttrValue::Ints)
        }
        AttrKind::Str => Some(AttrValue::Str(text.to_string())),
    }
}
