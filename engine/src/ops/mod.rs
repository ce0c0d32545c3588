//! The operator table: every operator's frozen code, name, arity, attribute schema and builder,
//! registered in one place ([`OPS`]). Each family of operators lives in its own file.
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
use crate::fail;
use crate::kernels::{PackOrder, PackedRows};
use crate::tensor::{TensorMut, TensorRef, TensorType};

pub mod broadcast;
pub mod cinn_binary;
pub mod cinn_complex;
pub mod cinn_unary;
pub mod elemwise;
pub mod nn;
pub mod proposals;
pub mod reduce;
pub mod transform;
pub mod vision;

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

        fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
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
    reduce::SUM,
    reduce::MAX,
    // Broadcast family: 10..
    broadcast::BROADCAST_ADD,
    broadcast::BROADCAST_SUB,
    broadcast::BROADCAST_MUL,
    broadcast::BROADCAST_DIV,
    broadcast::BROADCAST_MAX,
    broadcast::BROADCAST_GREATER,
    // NN family: 20..
    nn::CONV2D,
    nn::DENSE,
    nn::RELU,
    nn::MAX_POOL2D,
    nn::UPSAMPLING,
    // Elementwise family: 30..
    elemwise::ABS,
    elemwise::CVM_PRECISION,
    elemwise::ELEMWISE_ADD,
    elemwise::ELEMWISE_SUB,
    elemwise::NEGATIVE,
    elemwise::CLIP,
    elemwise::CVM_CLIP,
    elemwise::CVM_LEFT_SHIFT,
    elemwise::CVM_RIGHT_SHIFT,
    // Transform family: 50..
    transform::REPEAT,
    transform::TILE,
    transform::FLATTEN,
    transform::CONCATENATE,
    transform::EXPAND_DIMS,
    transform::RESHAPE,
    transform::SQUEEZE,
    transform::TRANSPOSE,
    transform::STRIDED_SLICE,
    transform::SLICE_LIKE,
    transform::TAKE,
    transform::CVM_LUT,
    transform::WHERE,
    // Vision family: 70..
    vision::GET_VALID_COUNTS,
    vision::NON_MAX_SUPPRESSION,
    // CINN unary primitives: 100..
    cinn_unary::ABS,
    cinn_unary::ACOS,
    cinn_unary::ACOSH,
    cinn_unary::ASIN,
    cinn_unary::ASINH,
    cinn_unary::ATAN,
    cinn_unary::ATANH,
    cinn_unary::BITWISE_NOT,
    cinn_unary::CEIL,
    cinn_unary::COS,
    cinn_unary::COSH,
    cinn_unary::ERF,
    cinn_unary::EXP,
    cinn_unary::FLOOR,
    cinn_unary::IDENTITY,
    cinn_unary::IS_FINITE,
    cinn_unary::IS_INF,
    cinn_unary::IS_NAN,
    cinn_unary::LOG,
    cinn_unary::LOG10,
    cinn_unary::LOG2,
    cinn_unary::LOGICAL_NOT,
    cinn_unary::NEGATIVE,
    cinn_unary::ROUND,
    cinn_unary::RSQRT,
    cinn_unary::SIGN,
    cinn_unary::SIN,
    cinn_unary::SINH,
    cinn_unary::SQRT,
    cinn_unary::TAN,
    cinn_unary::TANH,
    cinn_unary::TRUNC,
    // CINN binary primitives: 150..
    cinn_binary::ADD,
    cinn_binary::BITWISE_AND,
    cinn_binary::BITWISE_OR,
    cinn_binary::BITWISE_XOR,
    cinn_binary::DIV,
    cinn_binary::DOT,
    cinn_binary::FLOOR_DIV,
    cinn_binary::FLOOR_MOD,
    cinn_binary::LEFT_SHIFT,
    cinn_binary::LOGICAL_AND,
    cinn_binary::LOGICAL_OR,
    cinn_binary::LOGICAL_XOR,
    cinn_binary::MAX,
    cinn_binary::MIN,
    cinn_binary::MOD,
    cinn_binary::MUL,
    cinn_binary::POWER,
    cinn_binary::RIGHT_SHIFT,
    cinn_binary::SUB,
    // CINN scalar primitive: 180
    cinn_binary::CONST_SCALAR,
    // CINN complex primitives: 190..
    cinn_complex::BN_GRAD_BIAS_SCALE,
    cinn_complex::BN_MEAN_VARIANCE,
    cinn_complex::BROADCAST_TO,
    cinn_complex::COMPARE,
    cinn_complex::CONCAT,
    cinn_complex::CONV,
    cinn_complex::REDUCE,
    cinn_complex::RESHAPE,
    cinn_complex::REVERSE,
    cinn_complex::SELECT,
    cinn_complex::SLICE,
    cinn_complex::TRANSPOSE,
    // Detection: 300..
    proposals::GENERATE_PROPOSALS_V2,
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

/// Elements of all of `types`, in checked arithmetic.
///
/// # Errors
/// `LimitExceeded` when the sum overflows `u64`.
pub fn elements(types: &[TensorType]) -> Result<u64> {
    types
        .iter()
        .try_fold(0u64, |total, ty| total.checked_add(ty.shape.elements()))
        .ok_or_else(|| fail!(LimitExceeded, "work count overflows 64 bits"))
}

/// The usage of an operator priced as one class that reads every element of `inputs` and
/// writes every element of `outputs`.
///
/// # Errors
/// `LimitExceeded` when a count overflows `u64`.
pub fn io_usage(inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
    Ok(Usage {
        class: "",
        work: Work::io(elements(inputs)?, elements(outputs)?),
    })
}

/// Checked product of counts, for usage formulas.
///
/// # Errors
/// `LimitExceeded` when the product overflows `u64`.
pub fn count(factors: &[u64]) -> Result<u64> {
    factors
        .iter()
        .try_fold(1u64, |acc, &factor| acc.checked_mul(factor))
        .ok_or_else(|| fail!(LimitExceeded, "work count overflows 64 bits"))
}

/// Checks that exactly `expected` inputs were given (for builders whose arity depends on
/// attributes).
///
/// # Errors
/// `ArityMismatch` explaining why `expected` inputs are needed.
pub fn expect_inputs(n_inputs: usize, expected: usize, why: &str) -> Result<()> {
    if n_inputs == expected {
        Ok(())
    } else {
        Err(fail!(
            ArityMismatch,
            "takes {expected} inputs {why}, got {n_inputs}"
        ))
    }
}

/// Checks that `ty` has rank `rank`, naming the operand.
///
/// # Errors
/// `ShapeMismatch`.
pub fn expect_rank(ty: &TensorType, rank: usize, operand: &str) -> Result<()> {
    if ty.shape.rank() == rank {
        Ok(())
    } else {
        Err(fail!(
            ShapeMismatch,
            "{operand} must have rank {rank}, got shape {}",
            ty.shape
        ))
    }
}

/// Checks that an inferred precision fits 32 bits.
///
/// # Errors
/// `PrecisionOverflow` with the inferred figure.
pub fn output_precision(precision: u32) -> Result<u8> {
    if precision <= u32::from(crate::tensor::MAX_PRECISION) {
        Ok(precision.max(1) as u8)
    } else {
        Err(fail!(
            PrecisionOverflow,
            "inferred output precision {precision} exceeds 32 bits"
        ))
    }
}

/// Visits every index of `dims` in row-major order, passing the offsets of `K` operands whose
/// strides (in elements, per axis of `dims`; 0 for a broadcast axis) are `strides`.
///
/// The offsets are kept incrementally, like an odometer: one addition per step.
///
/// # Errors
/// Whatever `visit` returns; the walk stops at the first error.
pub fn walk<const K: usize>(
    dims: &[u32],
    strides: [&[usize]; K],
    mut visit: impl FnMut([usize; K]) -> Result<()>,
) -> Result<()> {
    if dims.contains(&0) {
        return Ok(());
    }
    let rank = dims.len();
    let mut index = alloc::vec![0u32; rank];
    let mut offsets = [0usize; K];
    loop {
        visit(offsets)?;
        let mut axis = rank;
        loop {
            if axis == 0 {
                return Ok(());
            }
            axis -= 1;
            index[axis] += 1;
            for (offset, stride) in offsets.iter_mut().zip(strides) {
                *offset += stride[axis];
            }
            if index[axis] < dims[axis] {
                break;
            }
            for (offset, stride) in offsets.iter_mut().zip(strides) {
                *offset -= stride[axis] * dims[axis] as usize;
            }
            index[axis] = 0;
        }
    }
}

/// How an operand is read along one run of [`trailing_runs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read {
    /// `run` consecutive elements.
    Contiguous,
    /// One element, repeated over the run.
    Repeated,
}

/// The longest trailing block of `dims` that `K` operands with per-axis `strides` (as for
/// [`walk`]; 0 along broadcast axes) each read contiguously or as one repeated element:
/// `(split, run, reads)`, with the axes from `split` on holding `run` consecutive positions.
/// Axes of length 1 never end the block; the walk over `dims[..split]` then takes one step per
/// run instead of one per element.
pub fn trailing_runs<const K: usize>(
    dims: &[u32],
    strides: [&[usize]; K],
) -> (usize, usize, [Read; K]) {
    let (mut split, mut run) = (dims.len(), 1usize);
    let mut reads: [Option<Read>; K] = [None; K];
    'axes: while split > 0 {
        let axis = split - 1;
        if dims[axis] != 1 {
            let mut extended = reads;
            for (read, stride) in extended.iter_mut().zip(strides) {
                let this = match stride[axis] {
                    0 => Read::Repeated,
                    s if s == run => Read::Contiguous,
                    _ => break 'axes,
                };
                match *read {
                    Some(earlier) if earlier != this => break 'axes,
                    _ => *read = Some(this),
                }
            }
            reads = extended;
            run = run.saturating_mul(dims[axis] as usize);
        }
        split = axis;
    }
    (
        split,
        run,
        reads.map(|read| read.unwrap_or(Read::Contiguous)),
    )
}

/// Resolves axis `axis` of a rank-`rank` tensor, allowing negative values from the end
/// (spec 001: `axis + N` for `axis < 0`).
///
/// # Errors
/// `AttributeOutOfRange` naming attribute `name` when `axis` is outside [−rank, rank).
pub fn resolve_axis(name: &str, axis: i64, rank: usize) -> Result<usize> {
    let rank = rank as i64;
    if (-rank..rank).contains(&axis) {
        Ok((if axis < 0 { axis + rank } else { axis }) as usize)
    } else {
        Err(fail!(
            AttributeOutOfRange,
            "attribute \"{name}\" = {axis} is outside [{}, {rank}) for an input of rank {rank}",
            -rank
        ))
    }
}

/// Converts an `i64` result into `i32`, reporting overflow instead of wrapping.
///
/// # Errors
/// `IntegerOverflow`.
#[inline]
pub fn narrow(value: i64) -> Result<i32> {
    i32::try_from(value).map_err(|_| fail!(IntegerOverflow, "result {value} does not fit in int32"))
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
        let cvm_operators = OPS.iter().filter(|op| op.code < 100).count();
        assert_eq!(
            cvm_operators, 37,
            "spec 001 defines 37 operators (with broadcast_greater)"
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
