//! The float graph the importer works on: an [`OnnxModel`] lowered to a few operations whose
//! integer forms are known, with static shapes, and with what ONNX spells in several nodes
//! folded into one (batch normalization into the convolution before it, `Pad` into the
//! convolution or pooling after it, a bias `Add` into the `MatMul` before it).
//!
//! Lowering refuses what it cannot carry exactly, naming the node: an operator outside the
//! supported set, an attribute value it has no integer form for (asymmetric padding, average
//! pooling that leaves padding out of its count, …), a tensor that should be constant but is
//! computed.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::model::{AttributeValue, Dimension, Node, OnnxModel};
use crate::tensor::{Tensor, TensorData};

use super::fold::{self, BoolTensor, Folded, Operand};
use super::{ImportError, InputShape};

/// A float tensor: shape and row-major values.
#[derive(Clone, Debug, PartialEq)]
pub struct FTensor {
    /// Dimensions, outermost first.
    pub shape: Vec<usize>,
    /// Values in row-major order; `data.len()` is the product of `shape`.
    pub data: Vec<f64>,
}

/// A 2-D convolution, NCHW data and OIHW weights, zero padding on both sides.
#[derive(Clone, Debug, PartialEq)]
pub struct Conv {
    /// Weights (OC, IC / groups, KH, KW).
    pub weight: FTensor,
    /// The weights' own scales (one, or one per output channel), for a model quantized
    /// already (QDQ); `None` to choose them.
    pub weight_scales: Option<Vec<f64>>,
    /// Bias per output channel, if any.
    pub bias: Option<Vec<f64>>,
    /// (SH, SW).
    pub strides: [usize; 2],
    /// (PH, PW), the same before and after.
    pub pads: [usize; 2],
    /// (DH, DW).
    pub dilations: [usize; 2],
    /// Groups.
    pub groups: usize,
}

/// `Y = X·Wᵀ + B` on (M, K) data.
#[derive(Clone, Debug, PartialEq)]
pub struct Dense {
    /// Weights (N, K).
    pub weight: FTensor,
    /// The weights' own scales (one, or one per output unit), as for [`Conv`].
    pub weight_scales: Option<Vec<f64>>,
    /// Bias (N), if any.
    pub bias: Option<Vec<f64>>,
}

/// A pooling window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool {
    /// (KH, KW).
    pub kernel: [usize; 2],
    /// (SH, SW).
    pub strides: [usize; 2],
    /// (PH, PW), the same before and after.
    pub pads: [usize; 2],
    /// Output extents rounded up instead of down.
    pub ceil: bool,
}

/// The elementwise functions the importer computes through tables (`float::function`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Function {
    /// 1 / (1 + e^−x).
    Sigmoid,
    /// tanh x.
    Tanh,
    /// erf x.
    Erf,
    /// x for x ≥ 0, α·x below (LeakyRelu, and PRelu with one slope).
    LeakyRelu(f64),
    /// x for x > 0, α·(e^x − 1) below.
    Elu(f64),
    /// max(0, min(1, α·x + β)).
    HardSigmoid {
        /// α.
        alpha: f64,
        /// β.
        beta: f64,
    },
    /// x · max(0, min(1, x / 6 + 1 / 2)).
    HardSwish,
    /// x · Φ(x) (`tanh` false: with erf), or its tanh approximation.
    Gelu {
        /// The tanh approximation.
        tanh: bool,
    },
    /// ln(1 + e^x).
    Softplus,
}

impl Function {
    /// Whether its values lie in [−1, 1], so that one output scale (1/127) serves any input.
    pub fn bounded(self) -> bool {
        matches!(
            self,
            Function::Sigmoid | Function::Tanh | Function::Erf | Function::HardSigmoid { .. }
        )
    }
}

/// The QOperator layers onnxruntime writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum QLinear {
    Conv,
    MatMul,
    Gemm,
}

/// Per axis, the first index and the step of a [`Op::Slice`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slice {
    /// First index per axis.
    pub starts: Vec<usize>,
    /// Step per axis, at least 1.
    pub steps: Vec<usize>,
}

/// A reduction over some axes, which stay in the shape with length 1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reduce {
    /// The axes summed, ascending and distinct.
    pub axes: Vec<usize>,
    /// Divided by the number of elements summed.
    pub mean: bool,
}

/// What computes a value.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// The graph input.
    Input,
    /// A constant tensor.
    Const(FTensor),
    /// Convolution.
    Conv(Conv),
    /// Fully connected layer.
    Dense(Dense),
    /// max(x, 0).
    Relu,
    /// min(max(x, lo), hi).
    Clip {
        /// Lower bound.
        lo: f64,
        /// Upper bound.
        hi: f64,
    },
    /// Max pooling; padding is never sampled.
    MaxPool(Pool),
    /// Average pooling; padding counts as zeros in every window's divisor.
    AvgPool(Pool),
    /// Sum or mean over axes, keeping them as 1.
    Reduce(Reduce),
    /// Numpy-broadcast sum of the two inputs.
    Add,
    /// Numpy-broadcast product of the two inputs.
    Mul,
    /// Every axis after the first collapsed.
    Flatten,
    /// The same data with the value's shape.
    Reshape,
    /// Axes permuted: output axis i is input axis `perm[i]`.
    Transpose(Vec<usize>),
    /// Inputs joined along an axis.
    Concat(usize),
    /// An elementwise function, computed through a table of its int8 inputs.
    Table(Function),
    /// Numpy-broadcast difference of the two inputs.
    Sub,
    /// A box of the input: per axis its first index and step; the value's shape gives the
    /// counts.
    Slice(Slice),
    /// A QuantizeLinear–DequantizeLinear pair at this scale (symmetric int8):
    /// `clip(round_half_even(x / s), −128, 127) · s`. The value is an int8 tensor at scale s.
    Fake(f64),
    /// Zero padding of H (before, after) and W (before, after); exists only until a
    /// convolution or pooling absorbs it.
    Pad([usize; 4]),
}

/// One value of the graph.
#[derive(Clone, Debug, PartialEq)]
pub struct Value {
    /// What computes it.
    pub op: Op,
    /// The values it reads, by index; each is earlier in [`Graph::values`].
    pub inputs: Vec<usize>,
    /// Its static shape.
    pub shape: Vec<usize>,
    /// The ONNX node it comes from, as messages name it (the input's name for the input).
    pub origin: String,
    /// A name for the integer model's nodes: the ONNX value's name, reduced to `[A-Za-z0-9_]`.
    pub name: String,
}

/// The lowered graph.
#[derive(Clone, Debug, PartialEq)]
pub struct Graph {
    /// Values in evaluation order; value 0 is the input.
    pub values: Vec<Value>,
    /// The value the model outputs.
    pub output: usize,
    /// What lowering changed beyond a one-to-one translation, for the report.
    pub notes: Vec<String>,
}

impl Graph {
    /// For every value, the values that read it, in order (a value reading another twice is
    /// listed once), computed in one pass over the edges.
    pub fn consumers(&self) -> Vec<Vec<usize>> {
        let mut consumers = vec![Vec::new(); self.values.len()];
        for (v, value) in self.values.iter().enumerate() {
            for &input in &value.inputs {
                if let Some(list) = consumers.get_mut(input)
                    && list.last() != Some(&v)
                {
                    list.push(v);
                }
            }
        }
        consumers
    }
}

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
}

fn product(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
}

/// Lowers `model` to a [`Graph`]. `shapes` gives the dimensions of inputs that the file leaves
/// symbolic beyond the leading (batch) axis, which is taken as 1 when it is not fixed.
///
/// # Errors
/// [`ImportError`] naming the node (or input, output) and what cannot be imported.
pub fn lower(model: &OnnxModel, shapes: &[InputShape]) -> Result<Graph, ImportError> {
    let [input] = model.inputs.as_slice() else {
        return Err(ImportError::Graph(format!(
            "the model has {} inputs; a CVM model has exactly one",
            model.inputs.len()
        )));
    };
    if input.element_type != crate::ElementType::Float32 {
        return Err(ImportError::Graph(format!(
            "input {}: element type {:?}; the importer reads float32 models",
            cvm_formats::quote(&input.name),
            input.element_type
        )));
    }
    for given in shapes {
        if !model.inputs.iter().any(|i| i.name == given.name) {
            return Err(ImportError::Graph(format!(
                "--input-shape names {}, which is not an input of the model (its input is {})",
                cvm_formats::quote(&given.name),
                cvm_formats::quote(&input.name)
            )));
        }
    }
    let mut notes = Vec::new();
    let shape = input_shape(input, shapes, &mut notes)?;
    if shape.len() < 2 || shape.first() != Some(&1) {
        return Err(ImportError::Graph(format!(
            "input {}: shape {shape:?}; the importer needs a batch of 1 and at least one more \
             axis, such as (1, C, H, W) or (1, K)",
            cvm_formats::quote(&input.name)
        )));
    }
    if shape.contains(&0) {
        return Err(ImportError::Graph(format!(
            "input {}: shape {shape:?} holds no value; the importer needs every dimension \
             above 0",
            cvm_formats::quote(&input.name)
        )));
    }
    let [output] = model.outputs.as_slice() else {
        return Err(ImportError::Graph(format!(
            "the model has {} outputs; the importer takes models of one output",
            model.outputs.len()
        )));
    };
    let mut lowering = Lowering {
        model,
        slots: HashMap::new(),
        uses: HashMap::new(),
        bindings: HashMap::new(),
        values: vec![Value {
            op: Op::Input,
            inputs: Vec::new(),
            shape,
            origin: format!("input {}", cvm_formats::quote(&input.name)),
            name: "data".into(),
        }],
        notes,
        label: String::new(),
        fold_budget: fold::MAX_FOLDED_ELEMENTS,
        folded: 0,
        unscaled: std::collections::HashSet::new(),
    };
    for tensor in &model.initializers {
        lowering
            .slots
            .insert(tensor.name.as_str(), Slot::Const(Cow::Borrowed(tensor)));
    }
    for node in &model.nodes {
        for name in node.inputs.iter().filter(|name| !name.is_empty()) {
            *lowering.uses.entry(name.as_str()).or_default() += 1;
        }
    }
    *lowering.uses.entry(output.name.as_str()).or_default() += 1;
    lowering.bind_name(input.name.as_str(), 0);
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
        _ => {
            return Err(ImportError::Graph(format!(
                "output {} is a constant; the importer needs an output computed from the input",
                cvm_formats::quote(&output.name)
            )));
        }
    };
    if matches!(lowering.values[output_id].op, Op::Pad(_) | Op::Input) {
        return Err(ImportError::Graph(format!(
            "output {} is {}; there is nothing to import",
            cvm_formats::quote(&output.name),
            lowering.values[output_id].origin
        )));
    }
    Ok(Graph {
        values: lowering.values,
        output: output_id,
        notes: lowering.notes,
    })
}

/// The shape of the graph input: its fixed dimensions, `--input-shape`'s where given, and 1 for
/// a leading axis the file leaves open (the exporters' batch axis), which `notes` records.
fn input_shape(
    input: &crate::GraphInput,
    shapes: &[InputShape],
    notes: &mut Vec<String>,
) -> Result<Vec<usize>, ImportError> {
    let quoted = cvm_formats::quote(&input.name);
    if let Some(given) = shapes.iter().find(|s| s.name == input.name) {
        if given.dims.len() != input.shape.len() {
            return Err(ImportError::Graph(format!(
                "--input-shape {quoted}: {} dimensions given, but the input has {} ({})",
                given.dims.len(),
                input.shape.len(),
                dims_text(&input.shape)
            )));
        }
        for (axis, (dim, &size)) in input.shape.iter().zip(&given.dims).enumerate() {
            if let Dimension::Fixed(fixed) = dim
                && *fixed != size
            {
                return Err(ImportError::Graph(format!(
                    "--input-shape {quoted}: axis {axis} is {size}, but the file fixes it at \
                     {fixed}"
                )));
            }
        }
        return Ok(given.dims.iter().map(|&d| d as usize).collect());
    }
    let mut shape = Vec::with_capacity(input.shape.len());
    for (axis, dim) in input.shape.iter().enumerate() {
        shape.push(match dim {
            Dimension::Fixed(size) => *size as usize,
            open if axis == 0 => {
                notes.push(format!(
                    "input {quoted}: axis 0 ({open}) taken as a batch of 1"
                ));
                1
            }
            open => {
                return Err(ImportError::Graph(format!(
                    "input {quoted}, axis {axis}: the dimension {open} is not fixed (shape {}); \
                     give the input's shape with --input-shape {}={}",
                    dims_text(&input.shape),
                    input.name,
                    input
                        .shape
                        .iter()
                        .enumerate()
                        .map(|(a, d)| d.size().map_or_else(
                            || if a == 0 {
                                "1".to_string()
                            } else {
                                "D".to_string()
                            },
                            |s| s.to_string()
                        ))
                        .collect::<Vec<_>>()
                        .join(",")
                )));
            }
        });
    }
    Ok(shape)
}

/// `[batch, 3, 32, 32]`-style text of declared dimensions.
fn dims_text(dims: &[Dimension]) -> String {
    format!(
        "[{}]",
        dims.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    )
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
            None => Err(self.error(format!("input {k} is missing"))),
        }
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

    /// A pair attribute (two non-negative entries, each at most `max`), or `default`.
    fn pair(
        &self,
        node: &Node,
        name: &str,
        default: [usize; 2],
        min: usize,
    ) -> Result<[usize; 2], ImportError> {
        let Some(values) = self.ints(node, name)? else {
            return Ok(default);
        };
        match values.as_slice() {
            [a, b] => {
                let a = usize::try_from(*a).ok().filter(|&a| a >= min && a <= 4096);
                let b = usize::try_from(*b).ok().filter(|&b| b >= min && b <= 4096);
                match (a, b) {
                    (Some(a), Some(b)) => Ok([a, b]),
                    _ => Err(self.error(format!(
                        "attribute {name} = {values:?}: each entry must be in [{min}, 4096]"
                    ))),
                }
            }
            _ => Err(self.error(format!(
                "attribute {name} = {values:?}: a 2-D operator needs two entries"
            ))),
        }
    }

    /// Symmetric (PH, PW) from ONNX `pads` [top, left, bottom, right] and `auto_pad`.
    fn pads(
        &self,
        node: &Node,
        input: [usize; 2],
        kernel: [usize; 2],
        strides: [usize; 2],
        dilations: [usize; 2],
    ) -> Result<[usize; 4], ImportError> {
        let auto = self.string(node, "auto_pad")?.unwrap_or_default();
        match auto.as_str() {
            "" | "NOTSET" => {}
            "VALID" => return Ok([0; 4]),
            "SAME_UPPER" | "SAME_LOWER" => {
                let mut pads = [0usize; 4];
                for axis in 0..2 {
                    let out = input[axis].div_ceil(strides[axis]);
                    let extent = dilations[axis] * (kernel[axis] - 1) + 1;
                    let total = ((out - 1) * strides[axis] + extent).saturating_sub(input[axis]);
                    let (small, large) = (total / 2, total - total / 2);
                    let (before, after) = if auto == "SAME_UPPER" {
                        (small, large)
                    } else {
                        (large, small)
                    };
                    pads[axis] = before;
                    pads[axis + 2] = after;
                }
                return Ok(pads);
            }
            other => {
                return Err(self.error(format!(
                    "auto_pad {} is not an ONNX value",
                    cvm_formats::quote(other)
                )));
            }
        }
        let Some(values) = self.ints(node, "pads")? else {
            return Ok([0; 4]);
        };
        let pads: Option<Vec<usize>> = values
            .iter()
            .map(|&p| usize::try_from(p).ok().filter(|&p| p <= 4096))
            .collect();
        match pads.as_deref() {
            Some(&[t, l, b, r]) => Ok([t, l, b, r]),
            _ => Err(self.error(format!(
                "pads {values:?}: a 2-D operator needs four entries in [0, 4096]"
            ))),
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

    /// A node's own padding (top, left, bottom, right) plus a folded `Pad`'s, as (PH, PW);
    /// refused, with `why` after the message, unless each axis is padded alike on both sides.
    fn symmetric_pads(
        &self,
        own: [usize; 4],
        extra: [usize; 4],
        why: &str,
    ) -> Result<[usize; 2], ImportError> {
        let pads: [usize; 4] = std::array::from_fn(|i| own[i] + extra[i]);
        if pads[0] != pads[2] || pads[1] != pads[3] {
            return Err(self.error(format!(
                "padding (top, left, bottom, right) = {pads:?} is not symmetric{why}"
            )));
        }
        Ok([pads[0], pads[1]])
    }

    /// The data input of a convolution or pooling, with a `Pad` it reads folded away: the
    /// value to read and the padding to add (top, left, bottom, right).
    fn through_pad(&self, x: usize) -> ([usize; 4], usize) {
        match &self.values[x].op {
            Op::Pad(pads) if self.readers(x) == 1 => (*pads, self.values[x].inputs[0]),
            _ => ([0; 4], x),
        }
    }

    /// Whether value `id` is the output of a Relu or of a Clip whose lower bound is at least
    /// 0, so that no value of it is negative.
    fn non_negative(&self, id: usize) -> bool {
        match self.values[id].op {
            Op::Relu => true,
            Op::Clip { lo, .. } => lo >= 0.0,
            _ => false,
        }
    }

    /// Refuses a `Pad` value read by a node that cannot absorb it.
    fn no_pad(&self, ids: &[usize]) -> Result<(), ImportError> {
        for &id in ids {
            if matches!(self.values[id].op, Op::Pad(_)) {
                return Err(self.error(format!(
                    "it reads the output of {}; only Conv, MaxPool and AveragePool can absorb a \
                     Pad, and only as its single reader",
                    self.values[id].origin
                )));
            }
        }
        Ok(())
    }

    fn node(&mut self, node: &'a Node) -> Result<(), ImportError> {
        if node.domain == "com.microsoft" && node.op_type == "QGemm" {
            return self.qlinear(node, QLinear::Gemm);
        }
        if !node.domain.is_empty() {
            return Err(self.error(format!(
                "operator domain {} is not supported; the importer reads the default ONNX domain",
                cvm_formats::quote(&node.domain)
            )));
        }
        match node.op_type.as_str() {
            "Conv" => self.conv(node),
            "BatchNormalization" => self.batch_norm(node),
            "Gemm" => self.gemm(node),
            "MatMul" => self.matmul(node),
            "Add" => self.add(node),
            "Mul" => match self.dynamic_mul(node)? {
                Some(()) => Ok(()),
                None => self.binary(node, Op::Mul),
            },
            "Relu" => self.unary(node, Op::Relu),
            "Sigmoid" => self.unary(node, Op::Table(Function::Sigmoid)),
            "Tanh" => self.unary(node, Op::Table(Function::Tanh)),
            "Erf" => self.unary(node, Op::Table(Function::Erf)),
            "Softplus" => self.unary(node, Op::Table(Function::Softplus)),
            "HardSwish" => self.unary(node, Op::Table(Function::HardSwish)),
            "LeakyRelu" => {
                let alpha = self.float(node, "alpha", 0.01)?;
                self.unary(node, Op::Table(Function::LeakyRelu(alpha)))
            }
            "Elu" => {
                let alpha = self.float(node, "alpha", 1.0)?;
                self.unary(node, Op::Table(Function::Elu(alpha)))
            }
            "HardSigmoid" => {
                let alpha = self.float(node, "alpha", 0.2)?;
                let beta = self.float(node, "beta", 0.5)?;
                self.unary(node, Op::Table(Function::HardSigmoid { alpha, beta }))
            }
            "Gelu" => {
                let approximate = self.string(node, "approximate")?.unwrap_or_default();
                let tanh = match approximate.as_str() {
                    "" | "none" => false,
                    "tanh" => true,
                    other => {
                        return Err(self.error(format!(
                            "approximate {} is not an ONNX value (\"none\" or \"tanh\")",
                            cvm_formats::quote(other)
                        )));
                    }
                };
                self.unary(node, Op::Table(Function::Gelu { tanh }))
            }
            "PRelu" => self.prelu(node),
            "Sub" => self.binary(node, Op::Sub),
            "Div" => self.divide(node),
            "Sum" => self.sum(node),
            "Slice" => self.slice(node),
            "Split" => self.split(node),
            "Clip" => self.clip(node),
            "MaxPool" => self.pool(node, true),
            "AveragePool" => self.pool(node, false),
            "GlobalAveragePool" => self.global_average(node),
            "ReduceMean" => self.reduce(node, true),
            "ReduceSum" => self.reduce(node, false),
            "Flatten" => self.flatten(node),
            "Reshape" => self.reshape(node),
            "Squeeze" | "Unsqueeze" => self.squeeze(node),
            "Transpose" => self.transpose(node),
            "Concat" => self.concat(node),
            "Pad" => self.pad(node),
            "QuantizeLinear" => self.quantize_linear(node),
            "QLinearConv" => self.qlinear(node, QLinear::Conv),
            "QLinearMatMul" => self.qlinear(node, QLinear::MatMul),
            "DynamicQuantizeLinear" => self.dynamic_quantize(node),
            "MatMulInteger" => self.matmul_integer(node),
            "Cast" => self.cast(node),
            "DequantizeLinear" => self.dequantize_linear(node),
            "Softmax" | "LogSoftmax" => self.softmax(node),
            "Dropout" | "Identity" => {
                let x = self.value(node, 0)?;
                self.bind(node, x)
            }
            "Constant" => self.constant_node(node),
            other => Err(ImportError::UnsupportedOperator {
                node: self.label.clone(),
                op_type: other.to_string(),
            }),
        }
    }

    /// A `Constant` node: its `value` tensor, or (opset 12 on) the integer or float scalar or
    /// list of `value_int`, `value_ints`, `value_float`, `value_floats`.
    fn constant_node(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let [attribute] = node.attributes.as_slice() else {
            return Err(self.error("a Constant needs exactly one value attribute"));
        };
        let tensor = |shape: Vec<u32>, data: TensorData| Tensor {
            name: String::new(),
            shape,
            data,
        };
        let value = match (attribute.name.as_str(), &attribute.value) {
            ("value", AttributeValue::Tensor(t)) => Cow::Borrowed(t),
            ("value_int", AttributeValue::Int(v)) => {
                Cow::Owned(tensor(Vec::new(), TensorData::Int64(vec![*v])))
            }
            ("value_ints", AttributeValue::Ints(v)) => {
                Cow::Owned(tensor(vec![v.len() as u32], TensorData::Int64(v.clone())))
            }
            ("value_float", AttributeValue::Float(v)) => {
                Cow::Owned(tensor(Vec::new(), TensorData::Float32(vec![*v])))
            }
            ("value_floats", AttributeValue::Floats(v)) => {
                Cow::Owned(tensor(vec![v.len() as u32], TensorData::Float32(v.clone())))
            }
            (name, _) => {
                return Err(self.error(format!(
                    "a Constant given by {} is not supported: a tensor `value`, or \
                     value_int(s) or value_float(s)",
                    cvm_formats::quote(name)
                )));
            }
        };
        if let Some(name) = node.outputs.first() {
            self.slots.insert(name.as_str(), Slot::Const(value));
        }
        Ok(())
    }

    /// Folds `node` into constants when every input it reads is one (or, for `Shape`, a value
    /// whose shape is fixed); returns whether it did.
    fn fold(&mut self, node: &'a Node) -> Result<bool, ImportError> {
        if !node.domain.is_empty() || !fold::FOLDED_OPERATORS.contains(&node.op_type.as_str()) {
            return Ok(false);
        }
        // Every shape is fixed: the shape of a computed value is a constant.
        if node.op_type == "Shape"
            && let Some(Slot::Value(id)) =
                node.inputs.first().and_then(|n| self.slots.get(n.as_str()))
        {
            let id = *id;
            return self.fold_shape(node, id);
        }
        let mut operands = Vec::with_capacity(node.inputs.len());
        for name in &node.inputs {
            if name.is_empty() {
                operands.push(None);
                continue;
            }
            operands.push(Some(match self.slots.get(name.as_str()) {
                Some(Slot::Const(tensor)) => Operand::Tensor(tensor),
                Some(Slot::Bool(tensor)) => Operand::Bool(tensor),
                _ => return Ok(false),
            }));
        }
        let opset = self.model.opset_version;
        let mut budget = self.fold_budget;
        let results = fold::fold(node, &operands, opset, &mut budget)
            .map_err(|message| self.error(message))?;
        let Some(results) = results else {
            return Ok(false);
        };
        self.fold_budget = budget;
        self.folded += 1;
        for (name, result) in node.outputs.iter().zip(results) {
            if name.is_empty() {
                continue;
            }
            let slot = match result {
                Folded::Tensor(tensor) => Slot::Const(Cow::Owned(tensor)),
                Folded::Bool(tensor) => Slot::Bool(tensor),
            };
            self.slots.insert(name.as_str(), slot);
        }
        Ok(true)
    }

    /// `Shape` of a computed value: its fixed shape, from `start` to `end`, as int64.
    fn fold_shape(&mut self, node: &'a Node, id: usize) -> Result<bool, ImportError> {
        let dims: Vec<i64> = self.values[id].shape.iter().map(|&d| d as i64).collect();
        let rank = dims.len() as i64;
        let clamp = |v: i64| (if v < 0 { v + rank } else { v }).clamp(0, rank) as usize;
        let start = clamp(self.int(node, "start", 0)?);
        let end = clamp(self.int(node, "end", rank)?).max(start);
        let shape = Tensor {
            name: String::new(),
            shape: vec![(end - start) as u32],
            data: TensorData::Int64(dims[start..end].to_vec()),
        };
        self.folded += 1;
        if let Some(name) = node.outputs.first() {
            self.slots
                .insert(name.as_str(), Slot::Const(Cow::Owned(shape)));
        }
        Ok(true)
    }

    /// The float range a quantized tensor represents: `[(qmin − z)·s, (qmax − z)·s]` for the
    /// scalar scale at input `scale` and zero point at input `zero` (absent: uint8 zero).
    fn representable(
        &self,
        node: &Node,
        scale: usize,
        zero: usize,
    ) -> Result<(f64, f64), ImportError> {
        let scales = match self.float_constant(node, scale)? {
            Some(t) => t.data,
            None => return Err(self.error(format!("input {scale} (a scale) is missing"))),
        };
        let [s] = scales[..] else {
            return Err(self.error(format!(
                "input {scale}: a scale per channel for activations is not supported"
            )));
        };
        if s.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) || !s.is_finite() {
            return Err(self.error(format!("input {scale}: the scale {s} is not positive")));
        }
        let (zero_point, qmin, qmax) = match self.constant(node, zero)? {
            None => (0.0, 0.0, 255.0),
            Some(Tensor {
                data: TensorData::Uint8(z),
                ..
            }) if z.len() == 1 => (f64::from(z[0]), 0.0, 255.0),
            Some(Tensor {
                data: TensorData::Int8(z),
                ..
            }) if z.len() == 1 => (f64::from(z[0]), -128.0, 127.0),
            Some(_) => {
                return Err(self.error(format!(
                    "input {zero}: the zero point of an activation must be one int8 or uint8 value"
                )));
            }
        };
        Ok(((qmin - zero_point) * s, (qmax - zero_point) * s))
    }

    /// An int8 or uint8 constant at input `k`, if present; `what`
    /// names it in the refusal of another type.
    fn eight_bit(&self, node: &Node, k: usize, what: &str) -> Result<Option<FTensor>, ImportError> {
        let Some(tensor) = self.constant(node, k)? else {
            return Ok(None);
        };
        let data = match &tensor.data {
            TensorData::Int8(v) => v.iter().map(|&q| f64::from(q)).collect(),
            TensorData::Uint8(v) => v.iter().map(|&q| f64::from(q)).collect(),
            _ => return Err(self.error(format!("{what} is not int8 or uint8"))),
        };
        let shape = tensor.shape.iter().map(|&d| d as usize).collect();
        Ok(Some(FTensor { shape, data }))
    }

    /// Quantized weights at input `k` dequantized, `(q − z) · s`, with their scales (one, or
    /// one per entry of `axis`, the output channels), and the zero points for the check that
    /// they are all 0.
    fn quantized_weights(
        &self,
        node: &Node,
        k: usize,
        axis: usize,
    ) -> Result<(FTensor, Vec<f64>), ImportError> {
        let Some(FTensor {
            shape,
            data: values,
        }) = self.eight_bit(node, k, "the weights")?
        else {
            return Err(self.error(format!("input {k} (the weights) is missing")));
        };
        let scales = match self.float_constant(node, k + 1)? {
            Some(t) => t.data,
            None => {
                return Err(self.error(format!("input {} (the weight scale) is missing", k + 1)));
            }
        };
        let zeros = self
            .eight_bit(node, k + 2, "the weight zero point")?
            .map_or_else(|| vec![0.0], |zeros| zeros.data);
        let channels = shape.get(axis).copied().unwrap_or(0);
        let fits = |n: usize| n == 1 || n == channels;
        if !fits(scales.len()) || !fits(zeros.len()) {
            return Err(self.error(format!(
                "weights of shape {shape:?} with {} scales and {} zero points: one, or one per \
                 output channel",
                scales.len(),
                zeros.len()
            )));
        }
        if scales
            .iter()
            .any(|&s| s.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) || !s.is_finite())
        {
            return Err(self.error("a weight scale is not positive"));
        }
        let inner: usize = shape[axis + 1..].iter().product();
        let data = values
            .iter()
            .enumerate()
            .map(|(i, &q)| {
                let c = (i / inner.max(1)) % channels.max(1);
                let pick = |v: &[f64]| v[if v.len() == 1 { 0 } else { c }];
                (q - pick(&zeros)) * pick(&scales)
            })
            .collect();
        // Symmetric weights keep their own scales, exactly; others are quantized afresh.
        let fixed = if zeros.iter().all(|&z| z == 0.0) {
            scales
        } else {
            Vec::new()
        };
        Ok((FTensor { shape, data }, fixed))
    }

    /// The data input of a QOperator node: a value carried in float (an asymmetric
    /// QuantizeLinear's clip, or a symmetric one's source).
    fn quantized_value(&self, node: &Node, k: usize) -> Result<usize, ImportError> {
        let name = node.inputs.get(k).map(String::as_str).unwrap_or("");
        match self.slots.get(name) {
            Some(&Slot::Quantized { value, .. }) => Ok(value),
            _ => self.value(node, k),
        }
    }

    /// QLinearConv, QLinearMatMul and com.microsoft QGemm: the layer on the dequantized
    /// weights (their scales kept when symmetric), its int32 bias at the input scale times the
    /// weight scale, then a clip to the range the output's quantization represents (where
    /// onnxruntime's fused Relu lives). The activations are calibrated, not the file's.
    fn qlinear(&mut self, node: &'a Node, kind: QLinear) -> Result<(), ImportError> {
        let x = self.quantized_value(node, 0)?;
        self.no_pad(&[x])?;
        let input_scale = match self.float_constant(node, 1)? {
            Some(t) if t.data.len() == 1 => t.data[0],
            _ => return Err(self.error("input 1 (the input scale) is not one constant")),
        };
        let (weight, fixed) = self.quantized_weights(node, 3, 0)?;
        let (bias_input, output_scale) = match kind {
            QLinear::Conv => (Some(8), Some(6)),
            QLinear::MatMul => (None, Some(6)),
            QLinear::Gemm => (
                Some(6),
                node.inputs.get(7).filter(|n| !n.is_empty()).map(|_| 7),
            ),
        };
        let bias = match bias_input
            .map(|k| self.constant(node, k))
            .transpose()?
            .flatten()
        {
            None => None,
            Some(Tensor {
                data: TensorData::Int32(b),
                ..
            }) => Some(
                b.iter()
                    .enumerate()
                    .map(|(i, &q)| {
                        let w = if fixed.len() > 1 {
                            fixed[i.min(fixed.len() - 1)]
                        } else {
                            fixed.first().copied().unwrap_or(1.0)
                        };
                        f64::from(q) * input_scale * w
                    })
                    .collect::<Vec<f64>>(),
            ),
            Some(_) => return Err(self.error("the bias is not an int32 tensor")),
        };
        if bias.is_some() && fixed.is_empty() {
            return Err(self.error(
                "an int32 bias with asymmetric weights: its scale is not defined by the file",
            ));
        }
        let xs = self.values[x].shape.clone();
        let scales = (!fixed.is_empty()).then(|| fixed.clone());
        let (op, shape) = match kind {
            QLinear::Conv => {
                let [_, c, h, w] = <[usize; 4]>::try_from(xs.as_slice())
                    .map_err(|_| self.error(format!("data of shape {xs:?}: rank 4")))?;
                let Ok([oc, icg, kh, kw]) = <[usize; 4]>::try_from(weight.shape.as_slice()) else {
                    return Err(self.error("weights of rank 4 expected"));
                };
                let groups = usize::try_from(self.int(node, "group", 1)?)
                    .ok()
                    .filter(|&g| g >= 1 && c % g == 0 && oc % g == 0 && c / g == icg)
                    .ok_or_else(|| self.error("group does not fit the weights"))?;
                let strides = self.pair(node, "strides", [1, 1], 1)?;
                let dilations = self.pair(node, "dilations", [1, 1], 1)?;
                let own = self.pads(node, [h, w], [kh, kw], strides, dilations)?;
                let pads = self.symmetric_pads(own, [0; 4], "")?;
                let (Some(oh), Some(ow)) = (
                    window_out(h, pads[0], kh, strides[0], dilations[0], false),
                    window_out(w, pads[1], kw, strides[1], dilations[1], false),
                ) else {
                    return Err(self.error("the kernel is larger than the padded input"));
                };
                let conv = Conv {
                    weight,
                    weight_scales: scales,
                    bias,
                    strides,
                    pads,
                    dilations,
                    groups,
                };
                (Op::Conv(conv), vec![1, oc, oh, ow])
            }
            QLinear::MatMul | QLinear::Gemm => {
                let [m, k] = <[usize; 2]>::try_from(xs.as_slice())
                    .map_err(|_| self.error(format!("A of shape {xs:?}: rank 2")))?;
                let trans_b = matches!(kind, QLinear::Gemm) && self.int(node, "transB", 0)? != 0;
                if matches!(kind, QLinear::Gemm)
                    && (self.int(node, "transA", 0)? != 0 || self.float(node, "alpha", 1.0)? != 1.0)
                {
                    return Err(self.error("transA = 1 or alpha ≠ 1 is not supported"));
                }
                let weight = match <[usize; 2]>::try_from(weight.shape.as_slice()) {
                    Ok([_, cols]) if trans_b && cols == k => weight,
                    Ok([rows, cols]) if !trans_b && rows == k => {
                        // Per-column scales of a (K, N) matrix are per row once transposed;
                        // quantized_weights read them along axis 0, so only one scale fits.
                        if fixed.len() > 1 {
                            return Err(self.error(
                                "a scale per column of a (K, N) weight matrix is not supported",
                            ));
                        }
                        transpose2(&weight.data, rows, cols)
                    }
                    _ => return Err(self.error("the weights do not multiply the data")),
                };
                let n = weight.shape[0];
                let dense = Dense {
                    weight,
                    weight_scales: scales,
                    bias,
                };
                (Op::Dense(dense), vec![m, n])
            }
        };
        let Some(output_scale) = output_scale else {
            return self.define(node, op, vec![x], shape);
        };
        let name = node.outputs.first().map(String::as_str).unwrap_or("");
        let layer = self.push(op, vec![x], shape.clone(), &format!("{name}_layer"));
        let (lo, hi) = self.representable(node, output_scale, output_scale + 1)?;
        self.define(node, Op::Clip { lo, hi }, vec![layer], shape)
    }

    /// DynamicQuantizeLinear: the value stands for itself (its scale 1, its zero point 0), and
    /// is quantized at its calibrated range like any value.
    fn dynamic_quantize(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        if let Some(name) = node.outputs.get(1).filter(|n| !n.is_empty()) {
            self.slots
                .insert(name.as_str(), Slot::DynamicScale(vec![1.0]));
        }
        if let Some(name) = node.outputs.get(2).filter(|n| !n.is_empty()) {
            self.slots.insert(name.as_str(), Slot::DynamicZero);
        }
        self.notes.push(format!(
            "{}: the dynamic quantization replaced by the calibrated symmetric int8 of the value",
            self.label
        ));
        if let Some(name) = node.outputs.first() {
            self.bind_name(name.as_str(), x);
        }
        Ok(())
    }

    /// MatMulInteger of a dynamically quantized value by constant weights: a dense layer on
    /// `W − z`, whose scale the Mul by the dynamic scale after it supplies.
    fn matmul_integer(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        match node.inputs.get(2).and_then(|n| self.slots.get(n.as_str())) {
            None | Some(Slot::DynamicZero) => {}
            Some(_) => {
                return Err(self.error(
                    "input 2 (A's zero point) is not a DynamicQuantizeLinear's: the importer \
                     reads MatMulInteger after DynamicQuantizeLinear (quantize_dynamic)",
                ));
            }
        }
        let Some(FTensor {
            shape,
            data: values,
        }) = self.eight_bit(node, 1, "B")?
        else {
            return Err(self.error("input 1 (B) is missing"));
        };
        let Ok([rows, cols]) = <[usize; 2]>::try_from(shape.as_slice()) else {
            return Err(self.error("B is not a matrix"));
        };
        let zero = self
            .eight_bit(node, 3, "B's zero point")?
            .map_or_else(|| vec![0.0], |zeros| zeros.data);
        if zero.len() != 1 && zero.len() != cols {
            return Err(self.error("B's zero point: one, or one per column"));
        }
        let xs = self.values[x].shape.clone();
        let [m, k] = <[usize; 2]>::try_from(xs.as_slice())
            .map_err(|_| self.error(format!("A of shape {xs:?}: rank 2")))?;
        if rows != k {
            return Err(self.error("A and B do not multiply"));
        }
        let centered: Vec<f64> = values
            .iter()
            .enumerate()
            .map(|(i, &q)| q - zero[if zero.len() == 1 { 0 } else { i % cols }])
            .collect();
        let dense = Dense {
            weight: transpose2(&centered, rows, cols),
            weight_scales: None,
            bias: None,
        };
        self.define(node, Op::Dense(dense), vec![x], vec![m, cols])?;
        self.unscaled.insert(self.values.len() - 1);
        Ok(())
    }

    /// Cast of a computed value: to float32 it changes nothing the importer carries (a
    /// MatMulInteger's int32 product, a float value); to anything else it is refused.
    fn cast(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        if self.int(node, "to", 0)? != 1 {
            return Err(self.error(
                "a Cast of a computed tensor to a type other than float32 is not supported",
            ));
        }
        self.bind(node, x)
    }

    /// A Mul that involves a dynamic scale: of the scale by a constant (the weights' scale), or
    /// of a MatMulInteger's product by the scale, which scales that layer's weights. `None`
    /// when the Mul is an ordinary one.
    fn dynamic_mul(&mut self, node: &'a Node) -> Result<Option<()>, ImportError> {
        let slot = |k: usize| node.inputs.get(k).and_then(|n| self.slots.get(n.as_str()));
        let (scale_k, other_k) = match (slot(0), slot(1)) {
            (Some(Slot::DynamicScale(_)), _) => (0, 1),
            (_, Some(Slot::DynamicScale(_))) => (1, 0),
            _ => return Ok(None),
        };
        let Some(Slot::DynamicScale(factor)) = slot(scale_k) else {
            return Ok(None);
        };
        let factor = factor.clone();
        match slot(other_k) {
            Some(Slot::Const(_)) => {
                let c = self
                    .float_constant(node, other_k)?
                    .ok_or_else(|| self.error("a missing factor"))?;
                let product: Vec<f64> = if factor.len() == 1 {
                    c.data.iter().map(|&v| v * factor[0]).collect()
                } else if c.data.len() == 1 {
                    factor.iter().map(|&f| f * c.data[0]).collect()
                } else {
                    return Err(self.error("two factors of several values each"));
                };
                if let Some(name) = node.outputs.first() {
                    self.slots
                        .insert(name.as_str(), Slot::DynamicScale(product));
                }
                Ok(Some(()))
            }
            Some(&Slot::Value(id)) if self.unscaled.contains(&id) && self.readers(id) == 1 => {
                let Op::Dense(dense) = &mut self.values[id].op else {
                    return Err(self.error("the dynamic scale multiplies no MatMulInteger"));
                };
                let units = dense.weight.shape[0];
                let inner = dense.weight.shape[1];
                if factor.len() != 1 && factor.len() != units {
                    return Err(self.error(format!(
                        "a scale of {} values for {units} output columns",
                        factor.len()
                    )));
                }
                for (i, w) in dense.weight.data.iter_mut().enumerate() {
                    *w *= factor[if factor.len() == 1 { 0 } else { i / inner }];
                }
                self.unscaled.remove(&id);
                self.bind(node, id)?;
                Ok(Some(()))
            }
            _ => Err(self.error(
                "a dynamic scale multiplies something other than a constant or the \
                 MatMulInteger it belongs to",
            )),
        }
    }

    /// PRelu with one slope (a scalar, or equal entries): a LeakyRelu table.
    fn prelu(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let Some(slope) = self.float_constant(node, 1)? else {
            return Err(self.error("input 1 (the slope) is missing or not a constant"));
        };
        let Some(&first) = slope.data.first() else {
            return Err(self.error("the slope is empty"));
        };
        if slope.data.iter().any(|&s| s != first) {
            return Err(self.error(format!(
                "a slope per channel (shape {:?}) is not supported: the importer computes \
                 PRelu as one table of its int8 inputs, which takes one slope",
                slope.shape
            )));
        }
        self.unary(node, Op::Table(Function::LeakyRelu(first)))
    }

    /// Division by a constant: a product by its reciprocal (the float model's calibration
    /// then multiplies too; the integer model approximates either by one factor).
    fn divide(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let Some(divisor) = self.float_constant(node, 1).ok().flatten() else {
            return Err(self.error(
                "a division by a computed tensor is not supported; the importer divides by \
                 constants only",
            ));
        };
        if let Some(i) = divisor.data.iter().position(|&d| d == 0.0) {
            return Err(self.error(format!("the divisor is 0 at index {i}")));
        }
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let reciprocal = FTensor {
            shape: divisor.shape.clone(),
            data: divisor.data.iter().map(|&d| 1.0 / d).collect(),
        };
        let name = node.inputs.get(1).map(String::as_str).unwrap_or("");
        let shape = reciprocal.shape.clone();
        let c = self.push(
            Op::Const(reciprocal),
            Vec::new(),
            shape,
            &format!("{name}_reciprocal"),
        );
        let shape = broadcast(&self.values[x].shape, &self.values[c].shape).ok_or_else(|| {
            self.error(format!(
                "shapes {:?} and {:?} do not broadcast",
                self.values[x].shape, self.values[c].shape
            ))
        })?;
        self.define(node, Op::Mul, vec![x, c], shape)
    }

    /// `Sum` of n inputs: a chain of additions.
    fn sum(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let mut acc = self.value_or_const(node, 0)?;
        if node.inputs.len() == 1 {
            return self.bind(node, acc);
        }
        let name = node.outputs.first().map(String::as_str).unwrap_or("");
        for k in 1..node.inputs.len() {
            let b = self.value_or_const(node, k)?;
            self.no_pad(&[acc, b])?;
            let shape = broadcast(&self.values[acc].shape, &self.values[b].shape)
                .ok_or_else(|| self.error(format!("input {k} does not broadcast")))?;
            if k + 1 == node.inputs.len() {
                return self.define(node, Op::Add, vec![acc, b], shape);
            }
            acc = self.push(Op::Add, vec![acc, b], shape, &format!("{name}_{k}"));
        }
        Ok(())
    }

    /// `Slice` of a computed value by constant starts, ends, axes and positive steps.
    fn slice(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let list = |k: usize| -> Result<Option<Vec<i64>>, ImportError> {
            match self.constant(node, k)? {
                None => Ok(None),
                Some(Tensor {
                    data: TensorData::Int64(v),
                    ..
                }) => Ok(Some(v.clone())),
                Some(Tensor {
                    data: TensorData::Int32(v),
                    ..
                }) => Ok(Some(v.iter().map(|&i| i64::from(i)).collect())),
                Some(_) => Err(self.error(format!("input {k} is not an integer tensor"))),
            }
        };
        let (starts, ends, axes, steps) = if self.model.opset_version >= 10 {
            (list(1)?, list(2)?, list(3)?, list(4)?)
        } else {
            (
                self.ints(node, "starts")?,
                self.ints(node, "ends")?,
                self.ints(node, "axes")?,
                None,
            )
        };
        let (Some(starts), Some(ends)) = (starts, ends) else {
            return Err(self.error("starts or ends is missing"));
        };
        let xs = self.values[x].shape.clone();
        let ranges = fold::slice_ranges(&xs, &starts, &ends, axes.as_deref(), steps.as_deref())
            .map_err(|m| self.error(m))?;
        let mut slice = Slice {
            starts: Vec::new(),
            steps: Vec::new(),
        };
        let mut shape = Vec::new();
        for (axis, &(start, step, count)) in ranges.iter().enumerate() {
            if step < 0 {
                return Err(self.error(format!(
                    "a negative step on axis {axis}: the importer slices forward only"
                )));
            }
            slice.starts.push(start as usize);
            slice.steps.push(step as usize);
            shape.push(count);
        }
        if slice.starts.iter().all(|&s| s == 0) && shape == xs {
            return self.bind(node, x);
        }
        self.define(node, Op::Slice(slice), vec![x], shape)
    }

    /// `Split` into consecutive parts along an axis: one slice per output.
    fn split(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let xs = self.values[x].shape.clone();
        let rank = xs.len() as i64;
        let axis = self.int(node, "axis", 0)?;
        let axis = if axis < 0 { axis + rank } else { axis };
        if !(0..rank).contains(&axis) {
            return Err(self.error(format!("axis out of range for rank {rank}")));
        }
        let axis = axis as usize;
        let given = if self.model.opset_version >= 13 {
            match self.constant(node, 1)? {
                Some(Tensor {
                    data: TensorData::Int64(v),
                    ..
                }) => Some(v.clone()),
                Some(_) => return Err(self.error("split is not an int64 tensor")),
                None => None,
            }
        } else {
            self.ints(node, "split")?
        };
        let outputs = node.outputs.len();
        let length = xs[axis];
        let sizes: Vec<usize> = match given {
            Some(sizes) => sizes
                .iter()
                .map(|&s| usize::try_from(s).ok())
                .collect::<Option<_>>()
                .filter(|sizes: &Vec<usize>| {
                    sizes.len() == outputs && sizes.iter().sum::<usize>() == length
                })
                .ok_or_else(|| {
                    self.error(format!(
                        "split {sizes:?} does not cut an axis of {length} into {outputs} parts"
                    ))
                })?,
            None => {
                // Equal parts, the last smaller (opset 18's num_outputs rule).
                let parts = match self.int(node, "num_outputs", 0)? {
                    0 => outputs,
                    n => usize::try_from(n).unwrap_or(0),
                };
                if parts == 0 || parts != outputs {
                    return Err(self.error("num_outputs differs from the number of outputs"));
                }
                let each = length.div_ceil(parts);
                (0..parts)
                    .map(|k| each.min(length.saturating_sub(k * each)))
                    .collect()
            }
        };
        let mut start = 0;
        for (k, &size) in sizes.iter().enumerate() {
            let name = node.outputs[k].as_str();
            if size == 0 {
                return Err(self.error(format!("output {k} would be empty")));
            }
            if !name.is_empty() {
                let mut starts = vec![0; xs.len()];
                starts[axis] = start;
                let mut shape = xs.clone();
                shape[axis] = size;
                let slice = Slice {
                    starts,
                    steps: vec![1; xs.len()],
                };
                let id = self.push(Op::Slice(slice), vec![x], shape, name);
                self.bind_name(name, id);
            }
            start += size;
        }
        Ok(())
    }

    fn unary(&mut self, node: &'a Node, op: Op) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let shape = self.values[x].shape.clone();
        self.define(node, op, vec![x], shape)
    }

    fn conv(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        let Some(weight) = self.float_constant(node, 1)? else {
            return Err(self.error("input 1 (the weights) is missing"));
        };
        let bias = self.float_constant(node, 2)?;
        let (extra, x) = self.through_pad(x);
        let xs = self.values[x].shape.clone();
        let ws = weight.shape.clone();
        let [_, c, h, w] = <[usize; 4]>::try_from(xs.as_slice()).map_err(|_| {
            self.error(format!(
                "data of shape {xs:?}: a 2-D convolution needs rank 4"
            ))
        })?;
        let [oc, icg, kh, kw] = <[usize; 4]>::try_from(ws.as_slice()).map_err(|_| {
            self.error(format!(
                "weights of shape {ws:?}: a 2-D convolution needs rank 4"
            ))
        })?;
        let groups = usize::try_from(self.int(node, "group", 1)?)
            .ok()
            .filter(|&g| g >= 1 && c % g == 0 && oc % g == 0 && c / g == icg)
            .ok_or_else(|| {
                self.error(format!(
                    "group does not fit: data has {c} channels, weights {ws:?}"
                ))
            })?;
        if let Some(kernel) = self.ints(node, "kernel_shape")?
            && kernel != [kh as i64, kw as i64]
        {
            return Err(self.error(format!(
                "kernel_shape {kernel:?} differs from the weights' {ws:?}"
            )));
        }
        if kh == 0 || kw == 0 {
            return Err(self.error("weights with an empty kernel"));
        }
        let strides = self.pair(node, "strides", [1, 1], 1)?;
        let dilations = self.pair(node, "dilations", [1, 1], 1)?;
        let own = self.pads(node, [h, w], [kh, kw], strides, dilations)?;
        let total: [usize; 4] = std::array::from_fn(|i| own[i] + extra[i]);
        let (pads, crop) =
            even_padding(total, [h, w], [kh, kw], strides, dilations).ok_or_else(|| {
                self.error(format!(
                    "the kernel {kh}×{kw} (dilated) is larger than the padded input {h}×{w}"
                ))
            })?;
        if let Some(b) = &bias
            && b.data.len() != oc
        {
            return Err(self.error(format!("bias of shape {:?}, expected [{oc}]", b.shape)));
        }
        let oh = window_out(h, pads[0], kh, strides[0], dilations[0], false);
        let ow = window_out(w, pads[1], kw, strides[1], dilations[1], false);
        let (Some(oh), Some(ow)) = (oh, ow) else {
            return Err(self.error(format!(
                "the kernel {kh}×{kw} (dilated) is larger than the padded input {h}×{w}"
            )));
        };
        let conv = Conv {
            weight,
            weight_scales: self.scales_of(node, 1),
            bias: bias.map(|b| b.data),
            strides,
            pads,
            dilations,
            groups,
        };
        let Some(crop) = crop else {
            return self.define(node, Op::Conv(conv), vec![x], vec![1, oc, oh, ow]);
        };
        // Uneven padding: the convolution padded evenly by more, then the windows ONNX's
        // padding gives cut out of its output (exact: they see the same values).
        let name = node.outputs.first().map(String::as_str).unwrap_or("");
        let padded = self.push(
            Op::Conv(conv),
            vec![x],
            vec![1, oc, oh, ow],
            &format!("{name}_padded"),
        );
        self.notes.push(format!(
            "{}: padding (top, left, bottom, right) = {total:?} computed as {pads:?} on both \
             sides, then the output cut to its windows",
            self.label
        ));
        let slice = Slice {
            starts: vec![0, 0, crop.0[0], crop.0[1]],
            steps: vec![1; 4],
        };
        self.define(
            node,
            Op::Slice(slice),
            vec![padded],
            vec![1, oc, crop.1[0], crop.1[1]],
        )
    }

    fn batch_norm(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let mut params = Vec::new();
        for k in 1..5 {
            match self.float_constant(node, k)? {
                Some(t) => params.push(t.data),
                None => return Err(self.error(format!("input {k} is missing"))),
            }
        }
        let epsilon = self.float(node, "epsilon", 1e-5)?;
        if self.int(node, "training_mode", 0)? != 0 {
            return Err(self.error(
                "training_mode = 1 normalizes with the batch's own statistics; the importer \
                 folds the running mean and variance of inference (training_mode = 0)",
            ));
        }
        let shape = self.values[x].shape.clone();
        let channels = shape.get(1).copied().unwrap_or(0);
        if shape.len() != 4 || params.iter().any(|p| p.len() != channels) {
            return Err(self.error(format!(
                "data of shape {shape:?} with parameters of {:?} elements: the importer folds \
                 batch normalization of NCHW data with one parameter per channel",
                params.iter().map(Vec::len).collect::<Vec<_>>()
            )));
        }
        let (scale, shift, mean, var) = (&params[0], &params[1], &params[2], &params[3]);
        let mut a = Vec::with_capacity(channels);
        for c in 0..channels {
            let v = var[c] + epsilon;
            if v.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
                return Err(self.error(format!(
                    "channel {c}: variance + epsilon = {v} is not positive"
                )));
            }
            a.push(scale[c] / v.sqrt());
        }
        let b: Vec<f64> = (0..channels).map(|c| shift[c] - mean[c] * a[c]).collect();
        let sole_reader = self.readers(x) == 1;
        if let Op::Conv(conv) = &mut self.values[x].op
            && sole_reader
        {
            let per = conv.weight.data.len() / channels.max(1);
            for (c, row) in conv.weight.data.chunks_mut(per.max(1)).enumerate() {
                for w in row {
                    *w *= a[c];
                }
            }
            let old = conv.bias.take().unwrap_or_else(|| vec![0.0; channels]);
            conv.bias = Some((0..channels).map(|c| old[c] * a[c] + b[c]).collect());
            conv.weight_scales = None;
            let origin = self.values[x].origin.clone();
            self.notes
                .push(format!("{} folded into {origin}", self.label));
            return self.bind(node, x);
        }
        // A batch normalization of its own: a depthwise 1×1 convolution.
        let conv = Conv {
            weight: FTensor {
                shape: vec![channels, 1, 1, 1],
                data: a,
            },
            weight_scales: None,
            bias: Some(b),
            strides: [1, 1],
            pads: [0, 0],
            dilations: [1, 1],
            groups: channels,
        };
        self.notes
            .push(format!("{} became a depthwise 1×1 convolution", self.label));
        self.define(node, Op::Conv(conv), vec![x], shape)
    }

    fn gemm(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let Some(b) = self.float_constant(node, 1)? else {
            return Err(self.error("input 1 (B) is missing"));
        };
        let c = self.float_constant(node, 2)?;
        if self.int(node, "transA", 0)? != 0 {
            return Err(self.error("transA = 1 is not supported: the data must be (1, K)"));
        }
        let alpha = self.float(node, "alpha", 1.0)?;
        let beta = self.float(node, "beta", 1.0)?;
        let trans_b = self.int(node, "transB", 0)? != 0;
        let xs = self.values[x].shape.clone();
        let [m, k] = <[usize; 2]>::try_from(xs.as_slice())
            .map_err(|_| self.error(format!("A of shape {xs:?}: Gemm needs rank 2")))?;
        let mut weight = match <[usize; 2]>::try_from(b.shape.as_slice()) {
            Ok([rows, cols]) if trans_b && cols == k => FTensor {
                shape: vec![rows, cols],
                data: b.data,
            },
            Ok([rows, cols]) if !trans_b && rows == k => transpose2(&b.data, rows, cols),
            _ => {
                return Err(self.error(format!(
                    "B of shape {:?} does not match A of shape {xs:?} (transB = {})",
                    b.shape,
                    u8::from(trans_b)
                )));
            }
        };
        let n = weight.shape[0];
        for w in &mut weight.data {
            *w *= alpha;
        }
        let bias = match c {
            None => None,
            Some(c) if c.data.len() == n || c.data.len() == 1 => Some(
                (0..n)
                    .map(|i| beta * c.data[if c.data.len() == 1 { 0 } else { i }])
                    .collect(),
            ),
            Some(c) => {
                return Err(self.error(format!(
                    "C of shape {:?}: the importer takes a bias of N = {n} elements",
                    c.shape
                )));
            }
        };
        // The scales of B are per row of the (N, K) weights only with transB = 1.
        let weight_scales = self
            .scales_of(node, 1)
            .filter(|s| alpha == 1.0 && (s.len() == 1 || trans_b));
        let dense = Dense {
            weight,
            weight_scales,
            bias,
        };
        self.define(node, Op::Dense(dense), vec![x], vec![m, n])
    }

    fn matmul(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let Some(b) = self.float_constant(node, 1)? else {
            return Err(self.error("input 1 is missing"));
        };
        let xs = self.values[x].shape.clone();
        let ([m, k], Ok([rows, cols])) = (
            <[usize; 2]>::try_from(xs.as_slice()).map_err(|_| {
                self.error(format!("A of shape {xs:?}: the importer takes 2-D MatMul"))
            })?,
            <[usize; 2]>::try_from(b.shape.as_slice()),
        ) else {
            return Err(self.error(format!("B of shape {:?}: expected rank 2", b.shape)));
        };
        if rows != k {
            return Err(self.error(format!(
                "A of shape {xs:?} and B of shape {:?} do not multiply",
                b.shape
            )));
        }
        let weight = transpose2(&b.data, rows, cols);
        let weight_scales = self.scales_of(node, 1).filter(|s| s.len() == 1);
        let dense = Dense {
            weight,
            weight_scales,
            bias: None,
        };
        self.define(node, Op::Dense(dense), vec![x], vec![m, cols])
    }

    fn add(&mut self, node: &'a Node) -> Result<(), ImportError> {
        // A constant added to a bias-less-or-not Dense or Conv read by nothing else folds into
        // its bias.
        for (v, k) in [(0usize, 1usize), (1, 0)] {
            let name = node.inputs.get(v).map(String::as_str).unwrap_or("");
            let (Some(Slot::Value(id)), Some(Slot::Const(tensor))) = (
                self.slots.get(name),
                node.inputs.get(k).and_then(|n| self.slots.get(n.as_str())),
            ) else {
                continue;
            };
            let id = *id;
            let Ok(c) = float_tensor(tensor) else {
                continue;
            };
            if self.readers(id) != 1 {
                continue;
            }
            let shape = self.values[id].shape.clone();
            let channels = shape.get(1).copied().unwrap_or(0);
            let per_channel = match (&self.values[id].op, c.shape.as_slice()) {
                (Op::Dense(_), [n]) | (Op::Dense(_), [1, n]) => *n == channels,
                (Op::Conv(_), [n, 1, 1]) | (Op::Conv(_), [1, n, 1, 1]) => *n == channels,
                _ => false,
            };
            if !per_channel {
                continue;
            }
            let origin = self.values[id].origin.clone();
            if let Op::Dense(Dense { bias, .. }) | Op::Conv(Conv { bias, .. }) =
                &mut self.values[id].op
            {
                let old = bias.take().unwrap_or_else(|| vec![0.0; channels]);
                *bias = Some(old.iter().zip(&c.data).map(|(a, b)| a + b).collect());
            }
            self.notes
                .push(format!("{} folded into the bias of {origin}", self.label));
            return self.bind(node, id);
        }
        self.binary(node, Op::Add)
    }

    fn binary(&mut self, node: &'a Node, op: Op) -> Result<(), ImportError> {
        let a = self.value_or_const(node, 0)?;
        let b = self.value_or_const(node, 1)?;
        self.no_pad(&[a, b])?;
        if matches!(self.values[a].op, Op::Const(_)) && matches!(self.values[b].op, Op::Const(_)) {
            return Err(self.error("both inputs are constants; fold them before importing"));
        }
        let shape = broadcast(&self.values[a].shape, &self.values[b].shape).ok_or_else(|| {
            self.error(format!(
                "shapes {:?} and {:?} do not broadcast",
                self.values[a].shape, self.values[b].shape
            ))
        })?;
        self.define(node, op, vec![a, b], shape)
    }

    fn clip(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let bound = |k: usize, attribute: &str, default: f64| -> Result<f64, ImportError> {
            match self.float_constant(node, k)? {
                Some(t) if t.data.len() == 1 => Ok(t.data[0]),
                Some(t) => Err(self.error(format!(
                    "input {k} of shape {:?}: Clip bounds are scalars",
                    t.shape
                ))),
                None => self.float(node, attribute, default),
            }
        };
        let lo = bound(1, "min", f64::NEG_INFINITY)?;
        let hi = bound(2, "max", f64::INFINITY)?;
        if lo.partial_cmp(&hi) != Some(std::cmp::Ordering::Less) {
            return Err(self.error(format!("bounds [{lo}, {hi}] are empty or not numbers")));
        }
        let shape = self.values[x].shape.clone();
        let op = if lo == 0.0 && hi == f64::INFINITY {
            Op::Relu
        } else {
            Op::Clip { lo, hi }
        };
        self.define(node, op, vec![x], shape)
    }

    fn pool(&mut self, node: &'a Node, max: bool) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        let (extra, x) = self.through_pad(x);
        // A Pad's zeros are values MaxPool compares, where max_pool2d never samples its
        // padding: the two agree only when no value is below zero.
        if max && extra != [0; 4] && !self.non_negative(x) {
            return Err(self.error(
                "it reads a Pad of values that may be negative: the Pad's zeros take part in \
                 the maximum, which a CVM max pooling (padding never sampled) cannot express; \
                 the importer folds a Pad into MaxPool only after Relu (or a Clip at 0 or \
                 above)",
            ));
        }
        let xs = self.values[x].shape.clone();
        let [n, c, h, w] = <[usize; 4]>::try_from(xs.as_slice())
            .map_err(|_| self.error(format!("data of shape {xs:?}: 2-D pooling needs rank 4")))?;
        let Some(kernel) = self.ints(node, "kernel_shape")? else {
            return Err(self.error("attribute kernel_shape is missing"));
        };
        let kernel = match kernel.as_slice() {
            &[a, b] if (1..=4096).contains(&a) && (1..=4096).contains(&b) => {
                [a as usize, b as usize]
            }
            _ => {
                return Err(
                    self.error(format!("kernel_shape {kernel:?}: two entries in [1, 4096]"))
                );
            }
        };
        let strides = self.pair(node, "strides", [1, 1], 1)?;
        if self.pair(node, "dilations", [1, 1], 1)? != [1, 1] {
            return Err(self.error("dilated pooling is not supported"));
        }
        if self.int(node, "storage_order", 0)? != 0 {
            return Err(self.error("storage_order 1 is not supported"));
        }
        let ceil = self.int(node, "ceil_mode", 0)? != 0;
        let own = self.pads(node, [h, w], kernel, strides, [1, 1])?;
        if !max && own != [0; 4] && self.int(node, "count_include_pad", 0)? == 0 {
            return Err(self.error(
                "average pooling with padding left out of the count (count_include_pad = 0) \
                 divides border windows by other counts; the importer needs count_include_pad = \
                 1 or no padding",
            ));
        }
        if !max && ceil {
            return Err(self.error(
                "average pooling with ceil_mode = 1 divides border windows by other counts",
            ));
        }
        let pads = self.symmetric_pads(own, extra, "")?;
        if pads[0] >= kernel[0] || pads[1] >= kernel[1] {
            return Err(self.error("padding as large as the window"));
        }
        let pool = Pool {
            kernel,
            strides,
            pads,
            ceil,
        };
        let oh = window_out(h, pool.pads[0], kernel[0], strides[0], 1, ceil);
        let ow = window_out(w, pool.pads[1], kernel[1], strides[1], 1, ceil);
        let (Some(oh), Some(ow)) = (oh, ow) else {
            return Err(self.error(format!(
                "the window {}×{} is larger than the padded input {h}×{w}",
                kernel[0], kernel[1]
            )));
        };
        let op = if max {
            Op::MaxPool(pool)
        } else {
            Op::AvgPool(pool)
        };
        self.define(node, op, vec![x], vec![n, c, oh, ow])
    }

    fn global_average(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let xs = self.values[x].shape.clone();
        let [n, c, _, _] = <[usize; 4]>::try_from(xs.as_slice())
            .map_err(|_| self.error(format!("data of shape {xs:?}: expected rank 4")))?;
        let op = Op::Reduce(Reduce {
            axes: vec![2, 3],
            mean: true,
        });
        self.define(node, op, vec![x], vec![n, c, 1, 1])
    }

    /// `ReduceMean` and `ReduceSum`: axes as an attribute (ReduceSum before opset 13,
    /// ReduceMean before 18) or a constant input, `keepdims`, `noop_with_empty_axes`.
    fn reduce(&mut self, node: &'a Node, mean: bool) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let xs = self.values[x].shape.clone();
        let rank = xs.len();
        let input_opset = if mean { 18 } else { 13 };
        let axes = if self.model.opset_version >= input_opset {
            match self.constant(node, 1)? {
                Some(Tensor {
                    data: TensorData::Int64(v),
                    ..
                }) => Some(v.clone()),
                Some(_) => return Err(self.error("axes is not an int64 tensor")),
                None => None,
            }
        } else {
            self.ints(node, "axes")?
        };
        let axes = match axes {
            Some(axes) if !axes.is_empty() => axes,
            _ if self.int(node, "noop_with_empty_axes", 0)? != 0 => {
                return Err(self.error(
                    "noop_with_empty_axes = 1 with no axes passes its input through; remove it",
                ));
            }
            _ => (0..rank as i64).collect(),
        };
        let mut resolved = Vec::with_capacity(axes.len());
        for &axis in &axes {
            let a = if axis < 0 { axis + rank as i64 } else { axis };
            if !(0..rank as i64).contains(&a) || resolved.contains(&(a as usize)) {
                return Err(self.error(format!(
                    "axes {axes:?} are not distinct axes of data of rank {rank}"
                )));
            }
            resolved.push(a as usize);
        }
        resolved.sort_unstable();
        let keepdims = self.int(node, "keepdims", 1)? != 0;
        let kept: Vec<usize> = (0..rank)
            .map(|a| if resolved.contains(&a) { 1 } else { xs[a] })
            .collect();
        self.define(
            node,
            Op::Reduce(Reduce {
                axes: resolved.clone(),
                mean,
            }),
            vec![x],
            kept.clone(),
        )?;
        if keepdims {
            return Ok(());
        }
        // The reduced axes dropped: the same values under a reshape.
        let reduced = self.values.len() - 1;
        let shape: Vec<usize> = (0..rank)
            .filter(|a| !resolved.contains(a))
            .map(|a| xs[a])
            .collect();
        let shape = if shape.is_empty() { vec![1] } else { shape };
        let name = node.outputs.first().map(String::as_str).unwrap_or("");
        let id = self.push(
            Op::Reshape,
            vec![reduced],
            shape,
            &format!("{name}_squeezed"),
        );
        self.bind(node, id)
    }

    fn flatten(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let xs = self.values[x].shape.clone();
        let rank = xs.len() as i64;
        let axis = self.int(node, "axis", 1)?;
        let axis = if axis < 0 { axis + rank } else { axis };
        if !(0..=rank).contains(&axis) {
            return Err(self.error(format!("axis out of range for rank {rank}")));
        }
        let (outer, inner) = xs.split_at(axis as usize);
        let shape = vec![product(outer).unwrap_or(0), product(inner).unwrap_or(0)];
        let op = if axis == 1 { Op::Flatten } else { Op::Reshape };
        self.define(node, op, vec![x], shape)
    }

    fn reshape(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let Some(target) = self.constant(node, 1)? else {
            return Err(self.error("input 1 (the shape) is missing"));
        };
        let TensorData::Int64(target) = &target.data else {
            return Err(self.error("the shape is not an int64 tensor"));
        };
        // With allowzero a 0 is a dimension of 0 rather than a copy: the same reshape
        // whenever the target holds no 0, and an empty tensor (refused) otherwise.
        let allowzero = self.int(node, "allowzero", 0)? != 0;
        let xs = self.values[x].shape.clone();
        let shape = fold::reshape_target(&xs, target, allowzero).map_err(|m| self.error(m))?;
        self.define(node, Op::Reshape, vec![x], shape)
    }

    fn squeeze(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let xs = self.values[x].shape.clone();
        let axes = match self.constant(node, 1)? {
            Some(Tensor {
                data: TensorData::Int64(v),
                ..
            }) => Some(v.clone()),
            Some(_) => return Err(self.error("axes is not an int64 tensor")),
            None => self.ints(node, "axes")?,
        };
        let shape = if node.op_type == "Squeeze" {
            let rank = xs.len() as i64;
            let axes: Vec<i64> = axes
                .unwrap_or_else(|| (0..rank).filter(|&a| xs[a as usize] == 1).collect())
                .iter()
                .map(|&a| if a < 0 { a + rank } else { a })
                .collect();
            if axes
                .iter()
                .any(|&a| !(0..rank).contains(&a) || xs[a as usize] != 1)
            {
                return Err(self.error(format!("axes {axes:?} do not name axes of length 1")));
            }
            (0..xs.len())
                .filter(|&a| !axes.contains(&(a as i64)))
                .map(|a| xs[a])
                .collect()
        } else {
            let Some(axes) = axes else {
                return Err(self.error("axes are missing"));
            };
            if xs.len() + axes.len() > MAX_RANK {
                return Err(self.error(format!(
                    "its output would have {} dimensions; a CVM tensor has at most {MAX_RANK}",
                    xs.len() + axes.len()
                )));
            }
            let rank = (xs.len() + axes.len()) as i64;
            let axes: Vec<i64> = axes
                .iter()
                .map(|&a| if a < 0 { a + rank } else { a })
                .collect();
            if axes.iter().any(|&a| !(0..rank).contains(&a)) {
                return Err(self.error(format!("axes {axes:?} out of range")));
            }
            let mut rest = xs.iter();
            (0..rank)
                .map(|a| {
                    if axes.contains(&a) {
                        1
                    } else {
                        rest.next().copied().unwrap_or(1)
                    }
                })
                .collect()
        };
        self.define(node, Op::Reshape, vec![x], shape)
    }

    fn transpose(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let xs = self.values[x].shape.clone();
        let rank = xs.len();
        let perm: Vec<usize> = match self.ints(node, "perm")? {
            None => (0..rank).rev().collect(),
            Some(perm) => perm
                .iter()
                .map(|&p| usize::try_from(p).ok().filter(|&p| p < rank))
                .collect::<Option<Vec<_>>>()
                .filter(|p| p.len() == rank)
                .ok_or_else(|| self.error(format!("perm {perm:?} is not a permutation")))?,
        };
        let mut seen = vec![false; rank];
        for &p in &perm {
            if std::mem::replace(&mut seen[p], true) {
                return Err(self.error(format!("perm {perm:?} is not a permutation")));
            }
        }
        let shape = perm.iter().map(|&p| xs[p]).collect();
        self.define(node, Op::Transpose(perm), vec![x], shape)
    }

    fn concat(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let mut inputs = Vec::new();
        for k in 0..node.inputs.len() {
            inputs.push(self.value_or_const(node, k)?);
        }
        self.no_pad(&inputs)?;
        let Some(&first) = inputs.first() else {
            return Err(self.error("no inputs"));
        };
        let mut shape = self.values[first].shape.clone();
        let rank = shape.len() as i64;
        let axis = self.int(node, "axis", 1)?;
        let axis = if axis < 0 { axis + rank } else { axis };
        if !(0..rank).contains(&axis) {
            return Err(self.error(format!("axis out of range for rank {rank}")));
        }
        let axis = axis as usize;
        for &id in &inputs[1..] {
            let s = &self.values[id].shape;
            if s.len() != shape.len() || (0..s.len()).any(|a| a != axis && s[a] != shape[a]) {
                return Err(self.error(format!(
                    "inputs of shapes {:?} and {s:?} do not join on axis {axis}",
                    self.values[first].shape
                )));
            }
            shape[axis] += s[axis];
        }
        self.define(node, Op::Concat(axis), inputs, shape)
    }

    fn pad(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let mode = self
            .string(node, "mode")?
            .unwrap_or_else(|| "constant".into());
        if mode != "constant" {
            return Err(self.error(format!(
                "mode {} is not supported: only zero padding",
                cvm_formats::quote(&mode)
            )));
        }
        let pads = match self.constant(node, 1)? {
            Some(Tensor {
                data: TensorData::Int64(v),
                ..
            }) => v.clone(),
            Some(_) => return Err(self.error("pads is not an int64 tensor")),
            None => self
                .ints(node, "pads")?
                .ok_or_else(|| self.error("pads are missing"))?,
        };
        if let Some(value) = self.float_constant(node, 2)?
            && value.data.iter().any(|&v| v != 0.0)
        {
            return Err(self.error("a non-zero padding value is not supported"));
        }
        // Before opset 11 the value is an attribute.
        if self.float(node, "value", 0.0)? != 0.0 {
            return Err(self.error("a non-zero padding value is not supported"));
        }
        if node.inputs.get(3).is_some_and(|n| !n.is_empty()) {
            return Err(self.error("the axes input is not supported"));
        }
        let xs = self.values[x].shape.clone();
        let ok = xs.len() == 4
            && pads.len() == 8
            && [0, 1, 4, 5].iter().all(|&i| pads[i] == 0)
            && pads.iter().all(|&p| (0..=4096).contains(&p));
        if !ok {
            return Err(self.error(format!(
                "pads {pads:?}: the importer pads H and W of NCHW data, by 0 to 4096"
            )));
        }
        let p = [
            pads[2] as usize,
            pads[3] as usize,
            pads[6] as usize,
            pads[7] as usize,
        ];
        let shape = vec![xs[0], xs[1], xs[2] + p[0] + p[2], xs[3] + p[1] + p[3]];
        self.define(node, Op::Pad(p), vec![x], shape)
    }

    /// A zero point input: absent, or int8 zeros (symmetric quantization).
    fn symmetric(&self, node: &Node) -> Result<(), ImportError> {
        match self.constant(node, 2)? {
            None => Err(self.error(
                "no zero point: ONNX then quantizes to uint8, which the importer does not \
                 support; quantize activations and weights as signed int8 (QInt8)",
            )),
            Some(Tensor {
                data: TensorData::Int8(z),
                ..
            }) if z.iter().all(|&z| z == 0) => Ok(()),
            Some(Tensor {
                data: TensorData::Int32(z),
                ..
            }) if z.iter().all(|&z| z == 0) => Ok(()),
            Some(_) => Err(self.error(
                "the zero point is not int8 (or int32) zeros: only symmetric signed \
                 quantization is supported (ActivationSymmetric and WeightSymmetric)",
            )),
        }
    }

    /// A scale input: positive and finite float32 values.
    fn scales(&self, node: &Node) -> Result<Vec<f64>, ImportError> {
        if self.int(node, "block_size", 0)? != 0 {
            return Err(self.error(
                "blocked quantization (block_size) is not supported: the importer takes one \
                 scale, or one per entry of axis 0",
            ));
        }
        let Some(scales) = self.float_constant(node, 1)? else {
            return Err(self.error("input 1 (the scale) is missing"));
        };
        if scales.data.is_empty()
            || scales
                .data
                .iter()
                .any(|&s| s.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater))
        {
            return Err(self.error("the scale is empty or not positive"));
        }
        Ok(scales.data)
    }

    fn quantize_linear(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        let scales = self.scales(node)?;
        if self.symmetric(node).is_err() {
            // Unsigned or asymmetric activations (onnxruntime's QOperator format, uint8 QDQ):
            // the value carried in float, clipped to what the quantized tensor represents,
            // and quantized to symmetric int8 at its calibrated range like any value.
            let (lo, hi) = self.representable(node, 1, 2)?;
            let shape = self.values[x].shape.clone();
            self.notes.push(format!(
                "{}: its asymmetric quantization replaced by the calibrated symmetric int8 of \
                 the value, clipped to [{lo}, {hi}]",
                self.label
            ));
            return self.define(node, Op::Clip { lo, hi }, vec![x], shape);
        }
        let [scale] = scales[..] else {
            return Err(self.error(
                "a scale per channel for activations is not supported: one scale per tensor",
            ));
        };
        if let Some(name) = node.outputs.first() {
            self.slots
                .insert(name.as_str(), Slot::Quantized { value: x, scale });
        }
        Ok(())
    }

    fn dequantize_linear(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let name = node.inputs.first().map(String::as_str).unwrap_or("");
        if let Some(&Slot::Value(value)) = self.slots.get(name) {
            // A tensor carried in float (see quantize_linear): it stands for itself.
            self.representable(node, 1, 2)?;
            return self.bind(node, value);
        }
        let scales = self.scales(node)?;
        self.symmetric(node)?;
        match self.slots.get(name) {
            Some(&Slot::Quantized { value, scale }) => {
                if scales != [scale] {
                    return Err(self.error(format!(
                        "its scale {scales:?} differs from its QuantizeLinear's {scale}"
                    )));
                }
                let shape = self.values[value].shape.clone();
                self.define(node, Op::Fake(scale), vec![value], shape)
            }
            Some(Slot::Const(tensor)) => {
                let tensor: &Tensor = tensor;
                let values: Vec<f64> = match &tensor.data {
                    TensorData::Int8(v) => v.iter().map(|&q| f64::from(q)).collect(),
                    TensorData::Int32(v) => v.iter().map(|&q| f64::from(q)).collect(),
                    _ => {
                        return Err(self.error(
                            "only int8 and int32 constants are dequantized by the importer",
                        ));
                    }
                };
                let shape: Vec<usize> = tensor.shape.iter().map(|&d| d as usize).collect();
                let axis = self.int(node, "axis", 1)?;
                let per = if scales.len() == 1 {
                    values.len().max(1)
                } else if (axis == 0 || (axis == -(shape.len() as i64)))
                    && shape.first() == Some(&scales.len())
                {
                    values.len() / scales.len()
                } else {
                    return Err(self.error(format!(
                        "scales of {} entries on axis {axis} of shape {shape:?}: the importer \
                         takes one scale, or one per entry of axis 0",
                        scales.len()
                    )));
                };
                let data = values
                    .iter()
                    .enumerate()
                    .map(|(i, &q)| q * scales[(i / per.max(1)).min(scales.len() - 1)])
                    .collect();
                if let Some(out) = node.outputs.first() {
                    self.slots.insert(
                        out.as_str(),
                        Slot::Dequantized(FTensor { shape, data }, scales),
                    );
                }
                Ok(())
            }
            _ => Err(self.error(
                "input 0 is neither a constant nor a QuantizeLinear output; the importer reads \
                 QDQ models (QuantizeLinear–DequantizeLinear pairs)",
            )),
        }
    }

    fn softmax(&mut self, node: &'a Node) -> Result<(), ImportError> {
        let x = self.value(node, 0)?;
        self.no_pad(&[x])?;
        // Dropping it keeps the argmax over the last axis only when it normalizes that axis
        // (from opset 13 the default; before, the default 1 flattens the axes from it on).
        let rank = self.values[x].shape.len() as i64;
        let default = if self.model.opset_version >= 13 {
            -1
        } else {
            1
        };
        let axis = self.int(node, "axis", default)?;
        if (if axis < 0 { axis + rank } else { axis }) != rank - 1 {
            return Err(self.error(format!(
                "axis {axis} of data of rank {rank}: the importer drops a Softmax over the \
                 last axis only (whose argmax it keeps)"
            )));
        }
        let output = node.outputs.first().map(String::as_str).unwrap_or("");
        let is_output = self.model.outputs.iter().any(|o| o.name == output);
        if !is_output || self.uses(output) != 1 {
            return Err(self.error(
                "Softmax is supported only as the model's last step (it is dropped: the \
                 integer model outputs its input, whose argmax is the same)",
            ));
        }
        self.notes.push(format!(
            "{} dropped: the model outputs its input, with the same argmax",
            self.label
        ));
        self.bind(node, x)
    }
}

/// Even padding for a window with padding `pads` (top, left, bottom, right): the padding per
/// axis (the same on both sides), and, when `pads` is uneven, the first output row and column
/// and the output extents to cut out of the evenly padded output so that it holds exactly the
/// windows of `pads`. Each axis is padded by the least p ≥ both of its sides with p − before a
/// multiple of the stride. `None` when the window does not fit.
#[allow(clippy::type_complexity)]
pub fn even_padding(
    pads: [usize; 4],
    input: [usize; 2],
    kernel: [usize; 2],
    strides: [usize; 2],
    dilations: [usize; 2],
) -> Option<([usize; 2], Option<([usize; 2], [usize; 2])>)> {
    if pads[0] == pads[2] && pads[1] == pads[3] {
        return Some(([pads[0], pads[1]], None));
    }
    let mut even = [0; 2];
    let mut first = [0; 2];
    let mut extent = [0; 2];
    for axis in 0..2 {
        let (before, after) = (pads[axis], pads[axis + 2]);
        let stride = strides[axis];
        let mut p = before.max(after);
        p += (stride - (p - before) % stride) % stride;
        even[axis] = p;
        first[axis] = (p - before) / stride;
        // The windows of the uneven padding: over before + input + after.
        let span = input[axis].checked_add(before)?.checked_add(after)?;
        let window = dilations[axis].checked_mul(kernel[axis].checked_sub(1)?)? + 1;
        extent[axis] = span.checked_sub(window)? / stride + 1;
    }
    Some((even, Some((first, extent))))
}

/// The output extent of a window over an axis of `n` elements, or `None` when the window does
/// not fit in the padded axis.
pub fn window_out(
    n: usize,
    pad: usize,
    kernel: usize,
    stride: usize,
    dilation: usize,
    ceil: bool,
) -> Option<usize> {
    let extent = dilation
        .checked_mul(kernel.checked_sub(1)?)?
        .checked_add(1)?;
    let room = n.checked_add(2 * pad)?.checked_sub(extent)?;
    let mut out = if ceil {
        room.div_ceil(stride)
    } else {
        room / stride
    } + 1;
    // As ONNX and the engine: the last window must start inside the input or its padding
    // before it.
    if ceil && (out - 1) * stride >= n + pad {
        out -= 1;
    }
    Some(out)
}

/// (rows, cols) row-major data transposed into a (cols, rows) tensor.
fn transpose2(data: &[f64], rows: usize, cols: usize) -> FTensor {
    let mut out = vec![0.0; data.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = data[r * cols + c];
        }
    }
    FTensor {
        shape: vec![cols, rows],
        data: out,
    }
}

/// The numpy broadcast of two shapes.
pub fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let dim = |s: &[usize], i: usize| {
        if i + s.len() >= rank {
            s[i + s.len() - rank]
        } else {
            1
        }
    };
    (0..rank)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
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
