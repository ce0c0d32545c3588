//! The float graph every pass after reading works on: a few operations whose integer forms are
//! known, with static shapes. [`lower`](super::lower) builds it from an ONNX graph,
//! [`float`](super::float) evaluates it, [`calibrate`](super::calibrate) records its ranges and
//! [`quantize`](super::quantize) turns it into integer operators.

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

/// Layer normalization over the last axis: `(x − μ) / √(σ² + ε) · γ + β` (RMSNorm: without the
/// mean, `x / √(mean(x²) + ε) · γ + β`).
#[derive(Clone, Debug, PartialEq)]
pub struct LayerNorm {
    /// γ, one per element of the last axis.
    pub gamma: Vec<f64>,
    /// β, one per element of the last axis.
    pub beta: Vec<f64>,
    /// ε.
    pub epsilon: f64,
    /// RMSNorm: the mean is not subtracted.
    pub rms: bool,
}

/// What computes a value.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Graph input k ([`Graph::inputs`]).
    Input(usize),
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
    /// The product of two activations over their last two axes, the leading axes broadcast:
    /// `alpha · A·B`, or `alpha · A·Bᵀ` with `transpose_b`.
    MatMul {
        /// B holds the rows of Bᵀ.
        transpose_b: bool,
        /// A constant factor folded in (a scaling of attention scores).
        alpha: f64,
    },
    /// Softmax over the last axis; with `causal`, element j of row i (on the last two axes,
    /// Tq × Tk) is left out where j > i + Tk − Tq, as `softmax`'s attribute says; with
    /// `masked`, the second input is a keep mask (an attention mask of 0 and 1, broadcast to
    /// the scores): an element is left out where the mask is 0.
    Softmax {
        /// Each query sees the keys up to its own position only.
        causal: bool,
        /// A keep mask is the second input.
        masked: bool,
    },
    /// The first input divided by the second, a count of kept positions (the sum of an
    /// attention mask, broadcast): mean pooling over a mask. A count of 0 gives 0 (the sum
    /// divided is 0 there).
    DivCount,
    /// Rows of a constant table picked by the integer ids of the value read (an embedding):
    /// the output is the ids' shape followed by a row's.
    Embedding(FTensor),
    /// Layer normalization over the last axis.
    LayerNorm(LayerNorm),
}

impl Op {
    /// Whether its integer form needs the engine's own operators (`batch_matmul`, `softmax`,
    /// `layer_norm`), so that the model cannot be written as a CVM `symbol` + `params` pair.
    pub fn engine_only(&self) -> bool {
        matches!(
            self,
            Op::MatMul { .. } | Op::Softmax { .. } | Op::LayerNorm(_) | Op::Embedding(_)
        )
    }
}

/// What a graph input holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// Float values, quantized to int8.
    Float,
    /// Integer token ids, read only by embeddings: they pass through unquantized, and must
    /// lie below `vocabulary`, the rows of the smallest table that reads them.
    Ids {
        /// Rows of the smallest table reading them.
        vocabulary: usize,
        /// Rows of the largest, for the input's precision.
        rows: usize,
    },
    /// An attention mask of 0 and 1 (keep), read only as a mask: by a softmax over scores
    /// and by mean pooling.
    Mask,
}

/// A graph input: the value `id` = its index in [`Graph::inputs`].
#[derive(Clone, Debug, PartialEq)]
pub struct Input {
    /// Its ONNX name.
    pub name: String,
    /// What it holds.
    pub kind: InputKind,
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
    /// Values in evaluation order; values 0 to `inputs.len()` − 1 are the inputs, in the
    /// ONNX graph's order.
    pub values: Vec<Value>,
    /// The inputs.
    pub inputs: Vec<Input>,
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
