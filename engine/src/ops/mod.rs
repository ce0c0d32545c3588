//! The operator table: every operator's frozen code, name, arity, attribute schema and builder,
//! registered in one place ([`OPS`]). Operators live in folders by what they do:
//!
//! - [`array`](mod@array): data movement (reshapes, transpose, concatenation, slices, selection, gathers,
//!   repeats), each CVM operator next to its CINN counterpart;
//! - [`math`]: elementwise and broadcast arithmetic, the CINN unary, binary and comparison
//!   primitives;
//! - [`reduce`]: reductions over axes, batch-norm reductions;
//! - [`nn`]: convolutions, dense and `Dot`, relu, pooling, upsampling;
//! - [`detection`]: detection post-processing and region proposals;
//! - [`transformer`]: the engine's own operators for transformer models (batched products of
//!   activations, softmax, normalization, requantization), with no CVM or CINN counterpart.
//!
//! [`common`] holds the helpers operators of several folders share (axis resolution, work
//! counts, index walks); [`fixed_point`] the Q-format rules of the CINN primitives.
//!
//! An operator is built from a node's attributes into a value implementing [`Operator`], which
//! states its output types before running ([`Operator::infer`]), the work it will do
//! ([`Operator::usage`], priced by the gas schedule) and computes ([`Operator::run`]).
//!
//! Architecture Invariant: an operator's code never changes; `usage` depends only on types and
//! attributes; `run` is only called with inputs of the types `infer` accepted, and returns every
//! failure as a typed error (never panics).

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;

pub use cvm_gas::{Usage, Work};

use crate::attrs::{AttrSpec, Attrs};
use crate::error::Result;
use crate::kernels::{PackOrder, PackedRows};
use crate::tensor::{TensorMut, TensorRef, TensorType};
use common::io_usage;

pub mod array;
pub mod common;
pub mod detection;
pub mod fixed_point;
pub mod math;
pub mod nn;
pub mod reduce;
pub mod transformer;

/// A configured operator: its attributes parsed and checked.
pub trait Operator: core::fmt::Debug + Send + Sync {
    /// The output types for inputs of types `inputs`, or why the inputs are not acceptable.
    ///
    /// # Errors
    /// `ShapeMismatch`, `PrecisionOverflow`, `PrecisionConstraint`, `AttributeOutOfRange`, ...
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>>;

    /// The work of one application and the class that prices it, from types and attributes
    /// alone (`docs/gas.md` states each operator's counts). Only called after `infer` accepted
    /// the types.
    ///
    /// # Errors
    /// `LimitExceeded` if a count overflows `u64`.
    /// The default reads every element of the inputs and writes every element of the outputs,
    /// priced as the operator's one class.
    ///
    /// # Errors
    /// `LimitExceeded` if a count overflows `u64`.
    fn usage(&self, inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        io_usage(inputs, outputs)
    }

    /// An upper bound of the bytes `run` allocates at once beyond its outputs, from types alone
    /// (indices counted at 8 bytes, so the bound holds on 64-bit hosts as on wasm32). The memory
    /// plan adds it to the bytes alive at the node. Operators whose working memory does not grow
    /// with their tensors (only shape-sized bookkeeping) keep the default, 0. Only called after
    /// `infer` accepted the types.
    ///
    /// # Errors
    /// `LimitExceeded` if the count overflows `u64`.
    fn scratch_bytes(&self, _inputs: &[TensorType]) -> Result<u64> {
        Ok(0)
    }

    /// The input the operator would like packed into `i16` rows once, when the model is loaded,
    /// if that input is a parameter: the weights of the multiply-accumulate kernels. The rows
    /// are the input's first axis and the row length the product of the others, in `PackOrder`
    /// (`PackOrder::Depthwise` lays each row out as the depthwise kernel's tap entries).
    /// Only called after `infer` accepted the types.
    fn packed_input(&self, _inputs: &[TensorType]) -> Option<(usize, PackOrder)> {
        None
    }

    /// Hands over the packing asked for by [`Operator::packed_input`] (shared by every node
    /// using the same parameter). Called at most once, before [`Operator::scratch_bytes`].
    fn set_packed(&mut self, _packed: Arc<PackedRows>) {}

    /// Whether `run` writes every element of its outputs whenever it succeeds, so that the
    /// executor need not zero them first. Only an operator whose output is a whole copy of an
    /// input, or whose kernels are tested on outputs filled with other values, says so.
    fn writes_every_output(&self) -> bool {
        false
    }

    /// Computes the outputs (pre-sized, and zeroed unless [`Operator::writes_every_output`])
    /// from the inputs.
    ///
    /// # Errors
    /// Deterministic arithmetic failures: `IntegerOverflow`, `DivisionByZero`, ...
    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()>;
}

/// The [`Operator::run`] of an operator whose output is its input's data unchanged (the
/// reshapes): a copy of the whole input, so the executor need not zero the output first.
macro_rules! copy_of_input {
    () => {
        fn writes_every_output(&self) -> bool {
            true
        }

        fn run(
            &self,
            inputs: &[$crate::tensor::TensorRef<'_>],
            outputs: &mut [$crate::tensor::TensorMut<'_>],
        ) -> $crate::error::Result<()> {
            outputs[0].data.copy_from_slice(inputs[0].data);
            Ok(())
        }
    };
}
pub(crate) use copy_of_input;

/// How many inputs an operator takes (refined by the builder when it depends on attributes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arity {
    /// Exactly this many.
    Exactly(usize),
    /// Between the two bounds, inclusive.
    Between(usize, usize),
    /// At least this many.
    AtLeast(usize),
}

impl Arity {
    /// Whether `n` inputs are acceptable.
    pub fn accepts(self, n: usize) -> bool {
        match self {
            Arity::Exactly(k) => n == k,
            Arity::Between(low, high) => (low..=high).contains(&n),
            Arity::AtLeast(low) => n >= low,
        }
    }
}

impl core::fmt::Display for Arity {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Arity::Exactly(k) => write!(f, "{k}"),
            Arity::Between(low, high) => write!(f, "{low} to {high}"),
            Arity::AtLeast(low) => write!(f, "at least {low}"),
        }
    }
}

/// Builds an operator from checked attributes and the node's input count.
pub type Builder = fn(&Attrs<'_>, usize) -> Result<Box<dyn Operator>>;

/// The operator family, as the specification groups them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Reductions over axes.
    Reduce,
    /// Numpy-broadcasting binary operators.
    Broadcast,
    /// Neural-network layers.
    Nn,
    /// Elementwise operators.
    Elemwise,
    /// Shape and data-movement operators.
    Transform,
    /// Detection post-processing.
    Vision,
    /// CINN builder primitives (spec 002) in fixed point.
    Cinn,
    /// The engine's own operators for transformer models (no CVM or CINN counterpart).
    Transformer,
}

/// One row of the operator table.
#[derive(Debug)]
pub struct OpDef {
    /// Frozen numeric code stored in canonical models.
    pub code: u16,
    /// Name in text models and CVM symbol files.
    pub name: &'static str,
    /// Family the operator belongs to.
    pub family: Family,
    /// Accepted input counts.
    pub arity: Arity,
    /// Number of outputs.
    pub outputs: u8,
    /// Attributes the operator takes.
    pub attrs: &'static [AttrSpec],
    /// Parses attributes into a configured operator.
    pub build: Builder,
}

/// Two table rows are the same operator when their frozen codes are equal.
impl PartialEq for OpDef {
    fn eq(&self, other: &OpDef) -> bool {
        self.code == other.code
    }
}

impl Eq for OpDef {}

/// Every operator the engine runs. Codes are frozen (a test pins them); add rows, never renumber.
pub static OPS: &[OpDef] = &[
    // Reduce family: 1..
    reduce::sum_max::SUM,
    reduce::sum_max::MAX,
    // Broadcast family: 10..
    math::broadcast::BROADCAST_ADD,
    math::broadcast::BROADCAST_SUB,
    math::broadcast::BROADCAST_MUL,
    math::broadcast::BROADCAST_DIV,
    math::broadcast::BROADCAST_MAX,
    math::broadcast::BROADCAST_GREATER,
    // NN family: 20..
    nn::conv2d::CONV2D,
    nn::dense::DENSE,
    nn::relu::RELU,
    nn::pool::MAX_POOL2D,
    nn::upsampling::UPSAMPLING,
    // Elementwise family: 30..
    math::elemwise::ABS,
    math::elemwise::CVM_PRECISION,
    math::elemwise::ELEMWISE_ADD,
    math::elemwise::ELEMWISE_SUB,
    math::elemwise::NEGATIVE,
    math::elemwise::CLIP,
    math::elemwise::CVM_CLIP,
    math::elemwise::CVM_LEFT_SHIFT,
    math::elemwise::CVM_RIGHT_SHIFT,
    // Transform family: 50..
    array::repeat::REPEAT,
    array::repeat::TILE,
    array::reshape::FLATTEN,
    array::concat::CONCATENATE,
    array::reshape::EXPAND_DIMS,
    array::reshape::RESHAPE,
    array::reshape::SQUEEZE,
    array::transpose::TRANSPOSE,
    array::slice::STRIDED_SLICE,
    array::slice::SLICE_LIKE,
    array::gather::TAKE,
    array::gather::CVM_LUT,
    array::select::WHERE,
    // Vision family: 70..
    detection::nms::GET_VALID_COUNTS,
    detection::nms::NON_MAX_SUPPRESSION,
    // CINN unary primitives: 100..
    math::cinn_unary::ABS,
    math::cinn_unary::ACOS,
    math::cinn_unary::ACOSH,
    math::cinn_unary::ASIN,
    math::cinn_unary::ASINH,
    math::cinn_unary::ATAN,
    math::cinn_unary::ATANH,
    math::cinn_unary::BITWISE_NOT,
    math::cinn_unary::CEIL,
    math::cinn_unary::COS,
    math::cinn_unary::COSH,
    math::cinn_unary::ERF,
    math::cinn_unary::EXP,
    math::cinn_unary::FLOOR,
    math::cinn_unary::IDENTITY,
    math::cinn_unary::IS_FINITE,
    math::cinn_unary::IS_INF,
    math::cinn_unary::IS_NAN,
    math::cinn_unary::LOG,
    math::cinn_unary::LOG10,
    math::cinn_unary::LOG2,
    math::cinn_unary::LOGICAL_NOT,
    math::cinn_unary::NEGATIVE,
    math::cinn_unary::ROUND,
    math::cinn_unary::RSQRT,
    math::cinn_unary::SIGN,
    math::cinn_unary::SIN,
    math::cinn_unary::SINH,
    math::cinn_unary::SQRT,
    math::cinn_unary::TAN,
    math::cinn_unary::TANH,
    math::cinn_unary::TRUNC,
    // CINN binary primitives: 150..
    math::cinn_binary::ADD,
    math::cinn_binary::BITWISE_AND,
    math::cinn_binary::BITWISE_OR,
    math::cinn_binary::BITWISE_XOR,
    math::cinn_binary::DIV,
    nn::dense::DOT,
    math::cinn_binary::FLOOR_DIV,
    math::cinn_binary::FLOOR_MOD,
    math::cinn_binary::LEFT_SHIFT,
    math::cinn_binary::LOGICAL_AND,
    math::cinn_binary::LOGICAL_OR,
    math::cinn_binary::LOGICAL_XOR,
    math::cinn_binary::MAX,
    math::cinn_binary::MIN,
    math::cinn_binary::MOD,
    math::cinn_binary::MUL,
    math::cinn_binary::POWER,
    math::cinn_binary::RIGHT_SHIFT,
    math::cinn_binary::SUB,
    // CINN scalar primitive: 180
    math::cinn_binary::CONST_SCALAR,
    // CINN complex primitives: 190..
    reduce::batch_norm::BN_GRAD_BIAS_SCALE,
    reduce::batch_norm::BN_MEAN_VARIANCE,
    array::repeat::BROADCAST_TO,
    math::compare::COMPARE,
    array::concat::CONCAT,
    nn::cinn_conv::CONV,
    reduce::cinn_reduce::REDUCE,
    array::reshape::CINN_RESHAPE,
    array::reverse::REVERSE,
    array::select::SELECT,
    array::slice::SLICE,
    array::transpose::CINN_TRANSPOSE,
    // Detection: 300..
    detection::proposals::GENERATE_PROPOSALS_V2,
    // Transformer family, the engine's own: 400..
    transformer::batch_matmul::BATCH_MATMUL,
    transformer::softmax::SOFTMAX,
    transformer::layer_norm::LAYER_NORM,
    transformer::requantize::REQUANTIZE,
    transformer::activation::ACTIVATION,
];

/// A one-output row of the CINN family (the unary and binary primitives).
pub(crate) const fn cinn_row(
    code: u16,
    name: &'static str,
    arity: Arity,
    attrs: &'static [AttrSpec],
    build: Builder,
) -> OpDef {
    OpDef {
        code,
        name,
        family: Family::Cinn,
        arity,
        outputs: 1,
        attrs,
        build,
    }
}

/// The operator with code `code`.
pub fn by_code(code: u16) -> Option<&'static OpDef> {
    OPS.iter().find(|op| op.code == code)
}

/// The operator named `name`.
pub fn by_name(name: &str) -> Option<&'static OpDef> {
    OPS.iter().find(|op| op.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every operator has a price in every schedule (the shape classes of `conv2d`, `max_pool2d`,
    /// `dense`, CINN `Conv`, `Dot` and `Reduce` included), and every row of a schedule prices an operator of the table.
    #[test]
    fn every_schedule_prices_every_operator_and_nothing_else() {
        let classes = |name: &str| -> &[&str] {
            match name {
                "conv2d" => &[
                    "dense",
                    "pointwise",
                    "depthwise",
                    "depthwise irregular",
                    "grouped",
                    "padded",
                ],
                "Conv" => &["forward", "backward_data", "backward_filter"],
                "max_pool2d" => &["", "padded"],
                "dense" => &["", "batched"],
                "Dot" => &["", "matrix"],
                "Reduce" => &["", "prod"],
                "activation" => &["gelu", "gelu_tanh", "silu"],
                "batch_matmul" => &["", "columns"],
                _ => &[""],
            }
        };
        for schedule in cvm_gas::Schedule::ALL {
            for op in OPS {
                for class in classes(op.name) {
                    assert!(
                        schedule.row(op.name, class).is_some(),
                        "schedule {} has no price for {} ({class})",
                        schedule.version,
                        op.name
                    );
                }
            }
            for row in schedule.table {
                assert!(
                    by_name(row.op).is_some_and(|op| classes(op.name).contains(&row.class)),
                    "{} ({}) prices no operator",
                    row.op,
                    row.class
                );
            }
        }
    }

    #[test]
    fn codes_and_names_are_frozen_and_unique() {
        let expected: &[(u16, &str)] = &[
            (1, "sum"),
            (2, "max"),
            (10, "broadcast_add"),
            (11, "broadcast_sub"),
            (12, "broadcast_mul"),
            (13, "broadcast_div"),
            (14, "broadcast_max"),
            (15, "broadcast_greater"),
            (20, "conv2d"),
            (21, "dense"),
            (22, "relu"),
            (23, "max_pool2d"),
            (24, "upsampling"),
            (30, "abs"),
            (31, "cvm_precision"),
            (32, "elemwise_add"),
            (33, "elemwise_sub"),
            (34, "negative"),
            (35, "clip"),
            (36, "cvm_clip"),
            (37, "cvm_left_shift"),
            (38, "cvm_right_shift"),
            (50, "repeat"),
            (51, "tile"),
            (52, "flatten"),
            (53, "concatenate"),
            (54, "expand_dims"),
            (55, "reshape"),
            (56, "squeeze"),
            (57, "transpose"),
            (58, "strided_slice"),
            (59, "slice_like"),
            (60, "take"),
            (61, "cvm_lut"),
            (62, "where"),
            (70, "get_valid_counts"),
            (71, "non_max_suppression"),
        ];
        for &(code, name) in expected {
            let op = by_code(code);
            assert_eq!(op.map(|op| op.name), Some(name), "code {code}");
            assert_eq!(by_name(name).map(|op| op.code), Some(code));
        }
        let cinn: &[(u16, &str)] = &[
            (100, "Abs"),
            (101, "Acos"),
            (102, "Acosh"),
            (103, "Asin"),
            (104, "Asinh"),
            (105, "Atan"),
            (106, "Atanh"),
            (107, "BitwiseNot"),
            (108, "Ceil"),
            (109, "Cos"),
            (110, "Cosh"),
            (111, "Erf"),
            (112, "Exp"),
            (113, "Floor"),
            (114, "Identity"),
            (115, "IsFinite"),
            (116, "IsInf"),
            (117, "IsNan"),
            (118, "Log"),
            (119, "Log10"),
            (120, "Log2"),
            (121, "LogicalNot"),
            (122, "Negative"),
            (123, "Round"),
            (124, "Rsqrt"),
            (125, "Sign"),
            (126, "Sin"),
            (127, "Sinh"),
            (128, "Sqrt"),
            (129, "Tan"),
            (130, "Tanh"),
            (131, "Trunc"),
            (150, "Add"),
            (151, "BitwiseAnd"),
            (152, "BitwiseOr"),
            (153, "BitwiseXor"),
            (154, "Div"),
            (155, "Dot"),
            (156, "FloorDiv"),
            (157, "FloorMod"),
            (158, "LeftShift"),
            (159, "LogicalAnd"),
            (160, "LogicalOr"),
            (161, "LogicalXor"),
            (162, "Max"),
            (163, "Min"),
            (164, "Mod"),
            (165, "Mul"),
            (166, "Power"),
            (167, "RightShift"),
            (168, "Sub"),
            (180, "ConstScalar"),
            (190, "BnGradBiasScale"),
            (191, "BnMeanVariance"),
            (192, "BroadcastTo"),
            (193, "Compare"),
            (194, "Concat"),
            (195, "Conv"),
            (196, "Reduce"),
            (197, "Reshape"),
            (198, "Reverse"),
            (199, "Select"),
            (200, "Slice"),
            (201, "Transpose"),
            (300, "generate_proposals_v2"),
        ];
        for &(code, name) in cinn {
            assert_eq!(by_code(code).map(|op| op.name), Some(name), "code {code}");
        }
        let transformer: &[(u16, &str)] = &[
            (400, "batch_matmul"),
            (401, "softmax"),
            (402, "layer_norm"),
            (403, "requantize"),
            (404, "activation"),
        ];
        for &(code, name) in transformer {
            assert_eq!(by_code(code).map(|op| op.name), Some(name), "code {code}");
            assert_eq!(by_code(code).map(|op| op.family), Some(Family::Transformer));
        }
        let cvm_operators = OPS.iter().filter(|op| op.code < 100).count();
        assert_eq!(
            cvm_operators, 37,
            "the CVM has 37 operators (spec 001's 36 and broadcast_greater, cvm-compat §1)"
        );
        assert_eq!(cvm_operators, expected.len());
        for (i, a) in OPS.iter().enumerate() {
            for b in &OPS[i + 1..] {
                assert_ne!(a.code, b.code, "{} and {} share a code", a.name, b.name);
                assert_ne!(a.name, b.name);
            }
        }
    }
}
