//! Lowering: an [`OnnxModel`] becomes the float [`Graph`], with static shapes, and with what
//! ONNX spells in several nodes folded into one (batch normalization into the convolution
//! before it, `Pad` into the convolution or pooling after it, a bias `Add` into the `MatMul`
//! before it).
//!
//! This file holds the walk over the nodes and what every family shares (the named values,
//! constants and attributes of the node being lowered); each family of ONNX operators is a file
//! of its own, whose `lower_<family>` says which operators it reads. A new operator is an arm
//! there and a method beside it.
//!
//! Lowering refuses what it cannot carry exactly, naming the node: an operator outside the
//! supported set, an attribute value it has no integer form for (asymmetric padding, average
//! pooling that leaves padding out of its count, …), a tensor that should be constant but is
//! computed.

mod constant;
mod conv;
mod elementwise;
mod mask;
mod matmul;
mod norm;
mod quantized;
mod reduce;
mod shape;

use std::borrow::Cow;
use std::collections::HashMap;

use crate::model::{AttributeValue, Node, OnnxModel};
use crate::tensor::{Tensor, TensorData};

use super::fold::{self, BoolTensor};
use super::graph::{FTensor, Graph, Op, Value};
use super::read;
use super::{ImportError, InputShape};

/// The families of ONNX operators, each lowering the nodes it reads (`None` for the others).
type Family<'a> = fn(&mut Lowering<'a>, &'a Node) -> Option<Result<(), ImportError>>;

/// Most elements of any value the importer computes: the engine's tensor limit.
const MAX_ELEMENTS: usize = 1 << 26;

/// Most dimensions a CVM tensor may have (a graph's `attrs.shape` entries hold 1 to 6).
const MAX_RANK: usize = 6;

/// A name reduced to letters, digits and `_`, at most 48 bytes.
fn clean_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(48)
        .collect();
    if out.is_empty() {
        out.push('v');
    }
    out
}

/// Where a named value comes from while lowering.
enum Slot<'a> {
    Value(usize),
    /// A constant: an initializer, a `Constant` node's value, or a folded result.
    Const(Cow<'a, Tensor>),
    /// A boolean constant (folded comparisons, for `Where`).
    Bool(BoolTensor),
    /// A DequantizeLinear of a constant: the float values and their scales.
    Dequantized(FTensor, Vec<f64>),
    /// A QuantizeLinear of a value, awaiting its DequantizeLinear.
    Quantized {
        value: usize,
        scale: f64,
    },
    /// The scale a DynamicQuantizeLinear computes at run time, times a constant factor: the
    /// dynamically quantized value stands for itself, so the scale is 1 and the factor is
    /// what remains (the weights' scale, which the integer product is multiplied by).
    DynamicScale(Vec<f64>),
    /// The zero point a DynamicQuantizeLinear computes at run time.
    DynamicZero,
    /// A step of a layer normalization written out (opset 14 and RMSNorm's forms), awaiting
    /// the rest of its pattern.
    Norm(NormPart),
    /// A value with the causal mask applied (`Where` of the positions after each query's
    /// own by −∞): read only by a Softmax, which becomes a causal one.
    Causal(usize),
    /// An integer graph input (its value id): token ids, read by a Gather of a table, or an
    /// attention mask, read through the steps of [`Mask`].
    Integer(usize),
    /// An attention mask on its way to the scores or to mean pooling.
    Mask(mask::Mask),
    /// Scores with an additive attention mask added: read only by a Softmax, which takes the
    /// mask as its keep mask.
    Masked {
        /// The scores.
        scores: usize,
        /// The mask's value (0 and 1), broadcast to the scores.
        mask: usize,
    },
    /// The number of kept positions, a sum of an attention mask: read only as the divisor of
    /// mean pooling.
    Count(mask::Count),
}

/// The steps of `(d) / √(mean(d²) + ε)` as exporters write a layer normalization out, d being
/// `x − mean(x)` (or x itself for RMSNorm), each naming the value d.
#[derive(Clone, Copy, Debug, PartialEq)]
enum NormPart {
    /// `Pow(d, 2)`.
    Square(usize),
    /// `ReduceMean(d², last axis)`, then `+ ε` when `Some`.
    MeanSquare(usize, Option<f64>),
    /// `Sqrt(mean(d²) + ε)`.
    Root(usize, f64),
    /// `Reciprocal(Sqrt(mean(d²) + ε))`.
    InverseRoot(usize, f64),
}

struct Lowering<'a> {
    model: &'a OnnxModel,
    slots: HashMap<&'a str, Slot<'a>>,
    /// How many node inputs and graph outputs name each value.
    uses: HashMap<&'a str, usize>,
    /// Per value id: the names bound to it so far (its own, then one per `Identity` or
    /// `Dropout` that forwards it) and the sum of their `uses` ([`Lowering::readers`]).
    bindings: HashMap<usize, (usize, usize)>,
    values: Vec<Value>,
    notes: Vec<String>,
    /// Node index and label of the node being lowered.
    label: String,
    /// The dense layers of a MatMulInteger whose dynamic scale is still to be multiplied in.
    unscaled: std::collections::HashSet<usize>,
    /// What remains of [`fold::MAX_FOLDED_ELEMENTS`].
    fold_budget: u64,
    /// How many nodes were folded into constants.
    folded: usize,
    /// The output imported.
    output_name: &'a str,
    /// Per input, what reads it: for an integer input, as token ids or as a mask.
    input_uses: Vec<Option<mask::IntegerUse>>,
}

fn product(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
}

/// Lowers `model` to a [`Graph`]. `shapes` gives the dimensions of inputs that the file leaves
/// symbolic beyond the leading (batch) axis, which is taken as 1 when it is not fixed.
///
/// # Errors
/// [`ImportError`] naming the node (or input, output) and what cannot be imported.
pub fn lower(
    model: &OnnxModel,
    shapes: &[InputShape],
    output: Option<&str>,
) -> Result<Graph, ImportError> {
    let read::Signature {
        inputs,
        output,
        notes,
    } = read::signature(model, shapes, output)?;
    // One input keeps the CVM name `data`; several are named after the ONNX inputs.
    let single = inputs.len() == 1;
    let values = inputs
        .iter()
        .enumerate()
        .map(|(k, i)| Value {
            op: Op::Input(k),
            inputs: Vec::new(),
            shape: i.shape.clone(),
            origin: format!("input {}", cvm_formats::quote(&i.input.name)),
            name: if single {
                "data".into()
            } else {
                clean_name(&i.input.name)
            },
        })
        .collect();
    let mut lowering = Lowering {
        model,
        slots: HashMap::new(),
        uses: HashMap::new(),
        bindings: HashMap::new(),
        values,
        notes,
        label: String::new(),
        fold_budget: fold::MAX_FOLDED_ELEMENTS,
        folded: 0,
        unscaled: std::collections::HashSet::new(),
        output_name: output.name.as_str(),
        input_uses: vec![None; inputs.len()],
    };
    for tensor in &model.initializers {
        lowering
            .slots
            .insert(tensor.name.as_str(), constant_slot(Cow::Borrowed(tensor)));
    }
    for node in &model.nodes {
        for name in node.inputs.iter().filter(|name| !name.is_empty()) {
            *lowering.uses.entry(name.as_str()).or_default() += 1;
        }
    }
    *lowering.uses.entry(output.name.as_str()).or_default() += 1;
    for (k, input) in inputs.iter().enumerate() {
        if input.integer {
            lowering
                .slots
                .insert(input.input.name.as_str(), Slot::Integer(k));
        } else {
            lowering.bind_name(input.input.name.as_str(), k);
        }
    }
    for (index, node) in model.nodes.iter().enumerate() {
        lowering.label = node.label(index);
        if !lowering.fold(node)? {
            lowering.node(node)?;
        }
    }
    if lowering.folded > 0 {
        lowering.notes.push(format!(
            "{} nodes computed on constants only (shapes, indices) folded into constants",
            lowering.folded
        ));
    }
    let output_id = match lowering.slots.get(output.name.as_str()) {
        Some(Slot::Value(id)) => *id,
        Some(Slot::Integer(_)) => {
            return Err(ImportError::Graph(format!(
                "output {} is an integer input passed through; there is nothing to import",
                cvm_formats::quote(&output.name)
            )));
        }
        Some(Slot::Const(_) | Slot::Bool(_) | Slot::Dequantized(..)) | None => {
            return Err(ImportError::Graph(format!(
                "output {} is a constant; the importer needs an output computed from the input",
                cvm_formats::quote(&output.name)
            )));
        }
        Some(_) => {
            return Err(ImportError::Graph(format!(
                "output {} is an intermediate step (a mask, a count, a quantized or masked \
                 tensor) that the importer reads only inside its pattern",
                cvm_formats::quote(&output.name)
            )));
        }
    };
    if matches!(lowering.values[output_id].op, Op::Pad(_) | Op::Input(_)) {
        return Err(ImportError::Graph(format!(
            "output {} is {}; there is nothing to import",
            cvm_formats::quote(&output.name),
            lowering.values[output_id].origin
        )));
    }
    let inputs = lowering.input_kinds(&inputs)?;
    Ok(Graph {
        values: lowering.values,
        inputs,
        output: output_id,
        notes: lowering.notes,
    })
}

impl<'a> Lowering<'a> {
    fn error(&self, message: impl Into<String>) -> ImportError {
        ImportError::Node {
            node: self.label.clone(),
            message: message.into(),
        }
    }

    fn uses(&self, name: &str) -> usize {
        self.uses.get(name).copied().unwrap_or(0)
    }

    /// The shape of a computed value (an integer input, a mask at its broadcast shape
    /// included), for `Shape`; `None` for a constant or a name not bound.
    fn computed_shape(&self, name: &str) -> Option<Vec<usize>> {
        match self.slots.get(name)? {
            Slot::Value(id) | Slot::Integer(id) | Slot::Causal(id) => {
                Some(self.values[*id].shape.clone())
            }
            Slot::Mask(mask) => Some(mask.shape.clone()),
            Slot::Count(count) => Some(count.shape.clone()),
            Slot::Masked { scores, .. } => Some(self.values[*scores].shape.clone()),
            _ => None,
        }
    }

    /// The slot input `k` names.
    fn slot(&self, node: &Node, k: usize) -> Option<&Slot<'a>> {
        node.inputs.get(k).and_then(|n| self.slots.get(n.as_str()))
    }

    /// The scalar constant at input `k` (float or integer), if it is one.
    fn scalar(&self, node: &Node, k: usize) -> Option<f64> {
        match self.slot(node, k) {
            Some(Slot::Const(tensor)) => match &tensor.data {
                TensorData::Float32(v) if v.len() == 1 => Some(f64::from(v[0])),
                TensorData::Int64(v) if v.len() == 1 => Some(v[0] as f64),
                TensorData::Int32(v) if v.len() == 1 => Some(f64::from(v[0])),
                _ => None,
            },
            _ => None,
        }
    }

    /// Binds `name` to value `id`.
    fn bind_name(&mut self, name: &'a str, id: usize) {
        self.slots.insert(name, Slot::Value(id));
        let uses = self.uses(name);
        let (names, sum) = self.bindings.entry(id).or_default();
        *names += 1;
        *sum += uses;
    }

    /// How many nodes (and graph outputs) read value `id` under any of its names, not counting
    /// the `Identity` and `Dropout` nodes that forwarded it under another name (each bound name
    /// after the first is one). An alias not yet bound counts as a reader of the name it reads,
    /// so the count never falls short. A fold that rewrites a value in place needs exactly one.
    fn readers(&self, id: usize) -> usize {
        self.bindings
            .get(&id)
            .map_or(0, |&(names, sum)| sum.saturating_sub(names - 1))
    }

    /// The value an input names; a constant there is an error.
    fn value(&self, node: &Node, k: usize) -> Result<usize, ImportError> {
        let name = node.inputs.get(k).map(String::as_str).unwrap_or("");
        match self.slots.get(name) {
            Some(Slot::Value(id)) => Ok(*id),
            Some(Slot::DynamicScale(_) | Slot::DynamicZero) => Err(self.dynamic_read(k, name)),
            Some(Slot::Const(_) | Slot::Dequantized(..) | Slot::Bool(_)) => {
                Err(self.error(format!(
                    "input {k} ({}) is a constant; the importer needs a computed tensor there",
                    cvm_formats::quote(name)
                )))
            }
            Some(Slot::Quantized { .. }) => Err(self.quantized_read(k, name)),
            Some(Slot::Causal(_)) => Err(self.causal_read(k, name)),
            Some(Slot::Norm(_)) => Err(self.norm_read(k, name)),
            Some(
                slot @ (Slot::Integer(_) | Slot::Mask(_) | Slot::Masked { .. } | Slot::Count(_)),
            ) => Err(self.mask_read(k, name, slot)),
            None => Err(self.error(format!("input {k} is missing"))),
        }
    }

    fn norm_read(&self, k: usize, name: &str) -> ImportError {
        self.error(format!(
            "input {k} ({}) is a step of a layer normalization written out (Pow, ReduceMean, \
             Add, Sqrt, Div or Reciprocal and Mul); the importer reads it only in that \
             pattern: (x − mean(x)) / √(mean((x − mean(x))²) + ε) over the last axis, or \
             x / √(mean(x²) + ε) (RMSNorm)",
            cvm_formats::quote(name)
        ))
    }

    fn causal_read(&self, k: usize, name: &str) -> ImportError {
        self.error(format!(
            "input {k} ({}) is the scores with the causal mask applied; the importer reads \
             them only in a Softmax over the last axis",
            cvm_formats::quote(name)
        ))
    }

    fn quantized_read(&self, k: usize, name: &str) -> ImportError {
        self.error(format!(
            "input {k} ({}) is a QuantizeLinear output; the importer reads QDQ models, where \
             every QuantizeLinear feeds a DequantizeLinear",
            cvm_formats::quote(name)
        ))
    }

    /// The value an input names, or a new constant value for a float constant.
    fn value_or_const(&mut self, node: &Node, k: usize) -> Result<usize, ImportError> {
        let name = node.inputs.get(k).map(String::as_str).unwrap_or("");
        match self.slots.get(name) {
            Some(Slot::Value(id)) => Ok(*id),
            Some(Slot::Const(tensor)) => {
                let tensor = float_tensor(tensor).map_err(|m| self.error(m))?;
                let shape = tensor.shape.clone();
                Ok(self.push(Op::Const(tensor), Vec::new(), shape, name))
            }
            Some(Slot::Bool(_)) => Err(self.boolean_read(k, name)),
            Some(Slot::DynamicScale(_) | Slot::DynamicZero) => Err(self.dynamic_read(k, name)),
            Some(Slot::Causal(_)) => Err(self.causal_read(k, name)),
            Some(Slot::Norm(_)) => Err(self.norm_read(k, name)),
            Some(
                slot @ (Slot::Integer(_) | Slot::Mask(_) | Slot::Masked { .. } | Slot::Count(_)),
            ) => Err(self.mask_read(k, name, slot)),
            Some(Slot::Dequantized(tensor, _)) => {
                let tensor = tensor.clone();
                let shape = tensor.shape.clone();
                Ok(self.push(Op::Const(tensor), Vec::new(), shape, name))
            }
            Some(Slot::Quantized { .. }) => Err(self.quantized_read(k, name)),
            None => Err(self.error(format!("input {k} is missing"))),
        }
    }

    fn dynamic_read(&self, k: usize, name: &str) -> ImportError {
        self.error(format!(
            "input {k} ({}) is a DynamicQuantizeLinear's scale or zero point; the importer \
             reads them only in quantize_dynamic's pattern (MatMulInteger, then Mul by the \
             scale)",
            cvm_formats::quote(name)
        ))
    }

    fn boolean_read(&self, k: usize, name: &str) -> ImportError {
        self.error(format!(
            "input {k} ({}) is a boolean constant; the importer takes booleans only where it \
             folds a node on constants (Where, Not, And, Or, Cast)",
            cvm_formats::quote(name)
        ))
    }

    /// A constant input, if the input is present.
    fn constant(&self, node: &Node, k: usize) -> Result<Option<&Tensor>, ImportError> {
        let name = node.inputs.get(k).map(String::as_str).unwrap_or("");
        if name.is_empty() {
            return Ok(None);
        }
        match self.slots.get(name) {
            Some(Slot::Const(tensor)) => Ok(Some(tensor)),
            Some(Slot::Bool(_)) => Err(self.boolean_read(k, name)),
            Some(Slot::DynamicScale(_) | Slot::DynamicZero) => Err(self.dynamic_read(k, name)),
            Some(Slot::Dequantized(..)) => Err(self.error(format!(
                "input {k} ({}) is a dequantized tensor; the importer needs an integer constant \
                 there",
                cvm_formats::quote(name)
            ))),
            Some(Slot::Quantized { .. }) => Err(self.quantized_read(k, name)),
            Some(Slot::Causal(_)) => Err(self.causal_read(k, name)),
            Some(Slot::Norm(_)) => Err(self.norm_read(k, name)),
            Some(
                slot @ (Slot::Integer(_) | Slot::Mask(_) | Slot::Masked { .. } | Slot::Count(_)),
            ) => Err(self.mask_read(k, name, slot)),
            Some(Slot::Value(_)) => Err(self.error(format!(
                "input {k} ({}) is computed; the importer needs a constant (an initializer) there",
                cvm_formats::quote(name)
            ))),
            None => Err(self.error(format!("input {k} is missing"))),
        }
    }

    fn float_constant(&self, node: &Node, k: usize) -> Result<Option<FTensor>, ImportError> {
        let name = node.inputs.get(k).map(String::as_str).unwrap_or("");
        if let Some(Slot::Dequantized(tensor, _)) = self.slots.get(name) {
            return Ok(Some(tensor.clone()));
        }
        match self.constant(node, k)? {
            Some(tensor) => float_tensor(tensor).map(Some).map_err(|m| self.error(m)),
            None => Ok(None),
        }
    }

    /// The scales of a dequantized constant input (a QDQ model's weights).
    fn scales_of(&self, node: &Node, k: usize) -> Option<Vec<f64>> {
        let name = node.inputs.get(k).map(String::as_str).unwrap_or("");
        match self.slots.get(name) {
            Some(Slot::Dequantized(_, scales)) => Some(scales.clone()),
            _ => None,
        }
    }

    fn int(&self, node: &Node, name: &str, default: i64) -> Result<i64, ImportError> {
        match node.attribute(name) {
            None => Ok(default),
            Some(AttributeValue::Int(v)) => Ok(*v),
            Some(_) => Err(self.error(format!("attribute {name} is not an integer"))),
        }
    }

    fn float(&self, node: &Node, name: &str, default: f64) -> Result<f64, ImportError> {
        match node.attribute(name) {
            None => Ok(default),
            Some(AttributeValue::Float(v)) => Ok(f64::from(*v)),
            Some(_) => Err(self.error(format!("attribute {name} is not a float"))),
        }
    }

    fn ints(&self, node: &Node, name: &str) -> Result<Option<Vec<i64>>, ImportError> {
        match node.attribute(name) {
            None => Ok(None),
            Some(AttributeValue::Ints(v)) => Ok(Some(v.clone())),
            Some(_) => Err(self.error(format!("attribute {name} is not a list of integers"))),
        }
    }

    fn string(&self, node: &Node, name: &str) -> Result<Option<String>, ImportError> {
        match node.attribute(name) {
            None => Ok(None),
            Some(AttributeValue::String(v)) => Ok(Some(v.clone())),
            Some(_) => Err(self.error(format!("attribute {name} is not a string"))),
        }
    }

    fn push(&mut self, op: Op, inputs: Vec<usize>, shape: Vec<usize>, name: &str) -> usize {
        self.values.push(Value {
            op,
            inputs,
            shape,
            origin: self.label.clone(),
            name: clean_name(name),
        });
        self.values.len() - 1
    }

    /// Pushes the node's value and binds its first output to it.
    fn define(
        &mut self,
        node: &'a Node,
        op: Op,
        inputs: Vec<usize>,
        shape: Vec<usize>,
    ) -> Result<(), ImportError> {
        match product(&shape) {
            Some(n) if n <= MAX_ELEMENTS => {}
            _ => {
                return Err(self.error(format!(
                    "its output of shape {shape:?} has more than 2^26 elements, the engine's limit"
                )));
            }
        }
        if shape.contains(&0) {
            return Err(self.error(format!("its output of shape {shape:?} is empty")));
        }
        if shape.len() > MAX_RANK {
            return Err(self.error(format!(
                "its output has {} dimensions; a CVM tensor has at most {MAX_RANK}",
                shape.len()
            )));
        }
        let name = node.outputs.first().map(String::as_str).unwrap_or("");
        let id = self.push(op, inputs, shape, name);
        self.bind(node, id)
    }

    /// Binds the node's first output to an existing value; other outputs must be unused.
    fn bind(&mut self, node: &'a Node, id: usize) -> Result<(), ImportError> {
        for (k, name) in node.outputs.iter().enumerate().skip(1) {
            if !name.is_empty() && self.uses(name) > 0 {
                return Err(self.error(format!(
                    "output {k} ({}) is used; the importer supports only the first output",
                    cvm_formats::quote(name)
                )));
            }
        }
        if let Some(name) = node.outputs.first() {
            self.bind_name(name.as_str(), id);
        }
        Ok(())
    }

    /// Lowers one node through the family that reads its operator.
    fn node(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let qgemm = node.domain == "com.microsoft" && node.op_type == "QGemm";
        if !node.domain.is_empty() && !qgemm {
            return Err(self.error(format!(
                "operator domain {} is not supported; the importer reads the default ONNX domain",
                cvm_formats::quote(&node.domain)
            )));
        }
        let families: [Family<'a>; 9] = [
            Lowering::lower_mask,
            Lowering::lower_conv,
            Lowering::lower_matmul,
            Lowering::lower_norm,
            Lowering::lower_elementwise,
            Lowering::lower_reduce,
            Lowering::lower_shape,
            Lowering::lower_quantized,
            Lowering::lower_constant,
        ];
        for family in families {
            if let Some(result) = family(self, node) {
                return result;
            }
        }
        Err(ImportError::UnsupportedOperator {
            node: self.label.clone(),
            op_type: node.op_type.clone(),
        })
    }
}

/// The slot of a constant tensor: a boolean one (an exporter's folded mask) as the booleans
/// folding reads, any other as itself.
fn constant_slot(tensor: Cow<'_, Tensor>) -> Slot<'_> {
    match &tensor.data {
        TensorData::Bool(values) => Slot::Bool(BoolTensor {
            shape: tensor.shape.clone(),
            values: values.clone(),
        }),
        _ => Slot::Const(tensor),
    }
}

/// A float32 tensor's values widened to f64 (exact).
fn float_tensor(tensor: &Tensor) -> Result<FTensor, String> {
    let TensorData::Float32(values) = &tensor.data else {
        return Err(format!(
            "tensor {} is {:?}, the importer needs float32 there",
            cvm_formats::quote(&tensor.name),
            tensor.element_type()
        ));
    };
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        return Err(format!(
            "tensor {} holds {} at index {i}",
            cvm_formats::quote(&tensor.name),
            values[i]
        ));
    }
    Ok(FTensor {
        shape: tensor.shape.iter().map(|&d| d as usize).collect(),
        data: values.iter().map(|&v| f64::from(v)).collect(),
    })
}
