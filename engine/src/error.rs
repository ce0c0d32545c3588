//! The engine's errors: a frozen table of numeric codes, and the error value that carries one.
//!
//! Every failure the engine can report is deterministic: the same model bytes and inputs give
//! the same [`ErrorCode`] and node on every machine. The code (and node index) is part of the
//! hashed outcome; the message is for people and is never hashed.
//!
//! Architecture Invariant: a code's number never changes and is never reused. Codes are grouped
//! by the phase that raises them: 1xx decoding, 2xx validation, 3xx inputs, 4xx execution.

use alloc::string::String;
use core::fmt;

/// A frozen, numbered reason for a failed load or run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u16)]
pub enum ErrorCode {
    /// The model bytes cannot be decoded: wrong magic, truncated or trailing bytes, bad encoding.
    MalformedModel = 100,
    /// The model declares a format version other than 1, or a load names a gas schedule version
    /// this engine does not define (checked before decoding).
    UnsupportedVersion = 101,

    /// A node names an operator code that is not in the operator table.
    UnknownOp = 200,
    /// A node has the wrong number of inputs for its operator and attributes.
    ArityMismatch = 201,
    /// A required attribute is absent.
    MissingAttribute = 202,
    /// An attribute name is not one the operator takes.
    UnknownAttribute = 203,
    /// An attribute value has the wrong kind (integer, boolean, list, string).
    AttributeType = 204,
    /// An attribute value is outside its allowed range or set.
    AttributeOutOfRange = 205,
    /// A reference names a value that does not exist or does not come earlier in the graph
    /// (dangling references, cycles, forward references).
    InvalidReference = 206,
    /// A repeated input, parameter or node name; attributes not sorted and unique; a repeated
    /// output name.
    DuplicateName = 207,
    /// Operand shapes do not satisfy the operator's shape rule.
    ShapeMismatch = 208,
    /// Precision inference gives an output precision above 32.
    PrecisionOverflow = 209,
    /// An operand precision the operator does not accept (above 8 into `dense` or `conv2d`;
    /// pX + `shift_bit` above 32 into `cvm_left_shift`).
    PrecisionConstraint = 210,
    /// A declared precision is outside 1..=32.
    InvalidPrecision = 211,
    /// A parameter holds a value outside its declared precision, or the wrong number of values.
    InvalidParam = 212,
    /// A count, shape, name or gas figure beyond an engine limit (tensor elements, nodes, rank,
    /// names).
    LimitExceeded = 213,
    /// The planned peak of tensor data a run holds exceeds 1 GiB (also reported if the arena or an
    /// output copy cannot be allocated while running).
    MemoryLimit = 214,
    /// A name is empty or too long, or the model has no outputs.
    InvalidName = 215,

    /// The number of input tensors differs from the model's declared inputs.
    InputCount = 300,
    /// An input's shape (or value count) differs from its declaration.
    InputShape = 301,
    /// An input value lies outside the declared precision.
    InputPrecision = 302,
    /// The input bytes handed to the engine cannot be decoded.
    MalformedInput = 303,

    /// A result does not fit `int32` (for the CINN primitives: a result outside ±(2^31 − 1), the
    /// bound of precision 32).
    IntegerOverflow = 400,
    /// A zero divisor in CINN `Div`, `FloorDiv`, `Mod` or `FloorMod` (never raised by the CVM
    /// operators).
    DivisionByZero = 401,
    /// An input outside a CINN math function's domain (log of x ≤ 0, asin of x > 1, ...), a base
    /// x ≤ 0 with a non-integral or negative exponent in `Power`, a shift tensor value outside
    /// 0..=31 (never raised by the CVM operators).
    DomainError = 402,
    /// The remaining gas does not cover the next node.
    OutOfGas = 403,
    /// Reserved: no operator in the table raises it.
    BadParam = 404,
}

impl ErrorCode {
    /// Every code, in numeric order.
    pub const ALL: [ErrorCode; 27] = [
        ErrorCode::MalformedModel,
        ErrorCode::UnsupportedVersion,
        ErrorCode::UnknownOp,
        ErrorCode::ArityMismatch,
        ErrorCode::MissingAttribute,
        ErrorCode::UnknownAttribute,
        ErrorCode::AttributeType,
        ErrorCode::AttributeOutOfRange,
        ErrorCode::InvalidReference,
        ErrorCode::DuplicateName,
        ErrorCode::ShapeMismatch,
        ErrorCode::PrecisionOverflow,
        ErrorCode::PrecisionConstraint,
        ErrorCode::InvalidPrecision,
        ErrorCode::InvalidParam,
        ErrorCode::LimitExceeded,
        ErrorCode::MemoryLimit,
        ErrorCode::InvalidName,
        ErrorCode::InputCount,
        ErrorCode::InputShape,
        ErrorCode::InputPrecision,
        ErrorCode::MalformedInput,
        ErrorCode::IntegerOverflow,
        ErrorCode::DivisionByZero,
        ErrorCode::DomainError,
        ErrorCode::OutOfGas,
        ErrorCode::BadParam,
    ];

    /// The frozen number of the code.
    pub const fn number(self) -> u16 {
        self as u16
    }

    /// The code with number `number`, if any.
    pub fn from_number(number: u16) -> Option<ErrorCode> {
        Self::ALL
            .iter()
            .copied()
            .find(|code| code.number() == number)
    }

    /// The code's name, as printed by the CLI (`"OutOfGas"`).
    pub const fn name(self) -> &'static str {
        match self {
            ErrorCode::MalformedModel => "MalformedModel",
            ErrorCode::UnsupportedVersion => "UnsupportedVersion",
            ErrorCode::UnknownOp => "UnknownOp",
            ErrorCode::ArityMismatch => "ArityMismatch",
            ErrorCode::MissingAttribute => "MissingAttribute",
            ErrorCode::UnknownAttribute => "UnknownAttribute",
            ErrorCode::AttributeType => "AttributeType",
            ErrorCode::AttributeOutOfRange => "AttributeOutOfRange",
            ErrorCode::InvalidReference => "InvalidReference",
            ErrorCode::DuplicateName => "DuplicateName",
            ErrorCode::ShapeMismatch => "ShapeMismatch",
            ErrorCode::PrecisionOverflow => "PrecisionOverflow",
            ErrorCode::PrecisionConstraint => "PrecisionConstraint",
            ErrorCode::InvalidPrecision => "InvalidPrecision",
            ErrorCode::InvalidParam => "InvalidParam",
            ErrorCode::LimitExceeded => "LimitExceeded",
            ErrorCode::MemoryLimit => "MemoryLimit",
            ErrorCode::InvalidName => "InvalidName",
            ErrorCode::InputCount => "InputCount",
            ErrorCode::InputShape => "InputShape",
            ErrorCode::InputPrecision => "InputPrecision",
            ErrorCode::MalformedInput => "MalformedInput",
            ErrorCode::IntegerOverflow => "IntegerOverflow",
            ErrorCode::DivisionByZero => "DivisionByZero",
            ErrorCode::DomainError => "DomainError",
            ErrorCode::OutOfGas => "OutOfGas",
            ErrorCode::BadParam => "BadParam",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A deterministic failure: a frozen code, the node it happened at (if any), and a message.
///
/// `node` is the node's index in the model's node list; only `code` and `node` are hashed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct Error {
    /// Why it failed.
    pub code: ErrorCode,
    /// The index of the node that failed, when the failure belongs to one node.
    pub node: Option<u32>,
    /// The name of that node, for people. Never hashed.
    pub node_name: Option<String>,
    /// What is wrong and where, for people. Never hashed.
    pub message: String,
}

impl Error {
    /// A failure not tied to one node.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Error {
        Error {
            code,
            node: None,
            node_name: None,
            message: message.into(),
        }
    }

    /// The same failure, attributed to node number `node` called `name`, its message prefixed
    /// with the node's name and operator. The message names the node by its name only (names
    /// are unique): its number is the node's index in the canonical model, which differs from
    /// the numbering of the file a model was read from (a CVM symbol counts its inputs and
    /// parameters as nodes), so a number here would give one node two numbers.
    #[must_use]
    pub fn at_node(mut self, node: u32, name: &str, op: &str) -> Error {
        if self.node.is_none() {
            self.node = Some(node);
            self.node_name = Some(String::from(name));
            self.message = alloc::format!("node \"{name}\" ({op}): {}", self.message);
        }
        self
    }
}

/// Shorthand for building an [`Error`] with a formatted message:
/// `fail!(ShapeMismatch, "expected {} got {}", a, b)`.
#[macro_export]
macro_rules! fail {
    ($code:ident, $($arg:tt)+) => {
        $crate::error::Error::new($crate::error::ErrorCode::$code, $crate::__format!($($arg)+))
    };
}

/// Result type of the engine.
pub type Result<T, E = Error> = core::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_frozen() {
        let expected: &[(ErrorCode, u16)] = &[
            (ErrorCode::MalformedModel, 100),
            (ErrorCode::UnsupportedVersion, 101),
            (ErrorCode::UnknownOp, 200),
            (ErrorCode::ArityMismatch, 201),
            (ErrorCode::MissingAttribute, 202),
            (ErrorCode::UnknownAttribute, 203),
            (ErrorCode::AttributeType, 204),
            (ErrorCode::AttributeOutOfRange, 205),
            (ErrorCode::InvalidReference, 206),
            (ErrorCode::DuplicateName, 207),
            (ErrorCode::ShapeMismatch, 208),
            (ErrorCode::PrecisionOverflow, 209),
            (ErrorCode::PrecisionConstraint, 210),
            (ErrorCode::InvalidPrecision, 211),
            (ErrorCode::InvalidParam, 212),
            (ErrorCode::LimitExceeded, 213),
            (ErrorCode::MemoryLimit, 214),
            (ErrorCode::InvalidName, 215),
            (ErrorCode::InputCount, 300),
            (ErrorCode::InputShape, 301),
            (ErrorCode::InputPrecision, 302),
            (ErrorCode::MalformedInput, 303),
            (ErrorCode::IntegerOverflow, 400),
            (ErrorCode::DivisionByZero, 401),
            (ErrorCode::DomainError, 402),
            (ErrorCode::OutOfGas, 403),
            (ErrorCode::BadParam, 404),
        ];
        for &(code, number) in expected {
            assert_eq!(code.number(), number, "{code}");
            assert_eq!(ErrorCode::from_number(number), Some(code));
        }
        assert_eq!(ErrorCode::from_number(0), None);
        assert_eq!(ErrorCode::from_number(999), None);
    }
}
