//! What a run produces: the consensus [`Outcome`] (hashed by hosts) and the [`Report`] that
//! wraps it with human-readable context (never hashed).
//!
//! Architecture Invariant: the outcome holds no strings, no sizes of `usize`, no timings: only
//! the status, the error code and node index, the gas used, and the output tensors. Its borsh
//! bytes are the same on every platform; [`OUTCOME_VERSION`] changes with its layout.

use alloc::string::String;
use alloc::vec::Vec;
use borsh::{BorshDeserialize, BorshSerialize};

use crate::error::{Error, ErrorCode};
use crate::tensor::{Tensor, TensorType};

/// Layout version of [`Outcome`], its first byte.
pub const OUTCOME_VERSION: u8 = 1;

/// The consensus result of loading and running a model on inputs.
#[derive(Clone, Debug, PartialEq, Eq, BorshSerialize, BorshDeserialize)]
pub struct Outcome {
    /// Always [`OUTCOME_VERSION`].
    pub version: u8,
    /// Success with outputs, or the failure.
    pub status: Status,
    /// Gas charged: the sum of the gas of every node charged (on `OutOfGas`, of the nodes
    /// before the one that could not be paid; 0 when loading or input checks fail).
    pub gas_used: u64,
}

/// Whether the run succeeded.
#[derive(Clone, Debug, PartialEq, Eq, BorshSerialize, BorshDeserialize)]
pub enum Status {
    /// The run finished (tag 0): the model outputs, in declared order.
    Ok {
        /// Output tensors.
        outputs: Vec<OutputTensor>,
    },
    /// The load or run failed (tag 1).
    Error {
        /// The frozen [`ErrorCode`] number.
        code: u16,
        /// Index of the node that failed, when one did.
        node: Option<u32>,
    },
}

/// One output tensor of a successful run. Its borsh encoding is the derived one (shape, precision,
/// then the values as a `u32` count and little-endian `i32`s), written and read by hand so that
/// the values move a block at a time instead of one `write` or `read` each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputTensor {
    /// Shape.
    pub shape: Vec<u32>,
    /// Inferred precision.
    pub precision: u8,
    /// Row-major values.
    pub data: Vec<i32>,
}

/// Values per block of [`OutputTensor`]'s encoding and decoding: 16 KiB of bytes, so that a
/// large output moves in a few bulk copies.
const BLOCK: usize = 4096;

/// Writes `values` as little-endian `i32`s, a block at a time.
fn write_values<W: borsh::io::Write>(writer: &mut W, values: &[i32]) -> borsh::io::Result<()> {
    let mut block = [0u8; 4 * BLOCK];
    for values in values.chunks(BLOCK) {
        for (bytes, value) in block.as_chunks_mut::<4>().0.iter_mut().zip(values) {
            *bytes = value.to_le_bytes();
        }
        writer.write_all(&block[..4 * values.len()])?;
    }
    Ok(())
}

/// `len` as a borsh length prefix.
fn prefix(len: usize) -> borsh::io::Result<[u8; 4]> {
    u32::try_from(len).map(u32::to_le_bytes).map_err(|_| {
        borsh::io::Error::new(
            borsh::io::ErrorKind::InvalidData,
            "a length exceeds u32::MAX",
        )
    })
}

impl BorshSerialize for OutputTensor {
    fn serialize<W: borsh::io::Write>(&self, writer: &mut W) -> borsh::io::Result<()> {
        self.shape.serialize(writer)?;
        self.precision.serialize(writer)?;
        writer.write_all(&prefix(self.data.len())?)?;
        write_values(writer, &self.data)
    }
}

/// One output of a successful run where the executor holds it: name, type and values.
pub(crate) type OutputView<'a> = (&'a str, &'a TensorType, &'a [i32]);

/// The borsh encoding of [`Report::success`] for `outputs` and `gas_used`, written from the
/// values where they lie: byte for byte `borsh::to_vec(&Report::success(..))`, without first
/// copying the values into tensors. The length is computed first and reserved once.
///
/// # Errors
/// A message when a length exceeds borsh's `u32` prefixes or the bytes cannot be allocated.
pub(crate) fn success_bytes(
    outputs: &[OutputView<'_>],
    gas_used: u64,
) -> core::result::Result<Vec<u8>, String> {
    // version, status tag, outputs count; gas; names count; the absent failure.
    let mut len: usize = 1 + 1 + 4 + 8 + 4 + 1;
    for (name, ty, values) in outputs {
        // shape (count and dimensions), precision, values (count and words); the name.
        let tensor = 4 + 4 * ty.shape.0.len() + 1 + 4 + 4 * values.len();
        len = len.saturating_add(tensor).saturating_add(4 + name.len());
    }
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(len)
        .map_err(|_| alloc::format!("cannot allocate the reply of {len} bytes"))?;
    let write = |bytes: &mut Vec<u8>| -> borsh::io::Result<()> {
        OUTCOME_VERSION.serialize(bytes)?;
        0u8.serialize(bytes)?; // Status::Ok
        bytes.extend_from_slice(&prefix(outputs.len())?);
        for (_, ty, values) in outputs {
            ty.shape.0.serialize(bytes)?;
            ty.precision.serialize(bytes)?;
            bytes.extend_from_slice(&prefix(values.len())?);
            write_values(bytes, values)?;
        }
        gas_used.serialize(bytes)?;
        bytes.extend_from_slice(&prefix(outputs.len())?);
        for (name, _, _) in outputs {
            name.serialize(bytes)?;
        }
        None::<FailureDetail>.serialize(bytes)
    };
    write(&mut bytes).map_err(|err| alloc::format!("encoding the reply: {err}"))?;
    Ok(bytes)
}

impl BorshDeserialize for OutputTensor {
    fn deserialize_reader<R: borsh::io::Read>(reader: &mut R) -> borsh::io::Result<Self> {
        let shape = Vec::<u32>::deserialize_reader(reader)?;
        let precision = u8::deserialize_reader(reader)?;
        let count = u32::deserialize_reader(reader)? as usize;
        // The count is not trusted: at most `RESERVE` values are reserved from it, the rest
        // grows as blocks arrive. Reserving up front spares a large output the copies of
        // growing one block at a time.
        const RESERVE: usize = 1 << 20;
        let mut data = Vec::new();
        data.try_reserve_exact(count.min(RESERVE)).map_err(|_| {
            borsh::io::Error::new(borsh::io::ErrorKind::OutOfMemory, "output values")
        })?;
        let mut block = [0u8; 4 * BLOCK];
        let mut left = count;
        while left > 0 {
            let values = left.min(BLOCK);
            let bytes = &mut block[..4 * values];
            reader.read_exact(bytes)?;
            data.extend(
                bytes
                    .as_chunks::<4>()
                    .0
                    .iter()
                    .map(|&word| i32::from_le_bytes(word)),
            );
            left -= values;
        }
        Ok(OutputTensor {
            shape,
            precision,
            data,
        })
    }
}

impl From<Tensor> for OutputTensor {
    fn from(tensor: Tensor) -> OutputTensor {
        OutputTensor {
            shape: tensor.shape.0,
            precision: tensor.precision,
            data: tensor.data,
        }
    }
}

/// An outcome with the context people need: output names and the failure's message.
#[derive(Clone, Debug, PartialEq, Eq, BorshSerialize, BorshDeserialize)]
pub struct Report {
    /// The hashed part.
    pub outcome: Outcome,
    /// Names of the outputs (empty on failure).
    pub output_names: Vec<String>,
    /// The failure, if any: message and the failing node's name.
    pub failure: Option<FailureDetail>,
}

/// Human-readable detail of a failure. Never hashed.
#[derive(Clone, Debug, PartialEq, Eq, BorshSerialize, BorshDeserialize)]
pub struct FailureDetail {
    /// Name of the error code (`"OutOfGas"`).
    pub code_name: String,
    /// Name of the failing node, when one failed.
    pub node_name: Option<String>,
    /// What went wrong, naming the node, attribute, input or parameter.
    pub message: String,
}

impl Report {
    /// A successful run.
    pub fn success(outputs: Vec<(String, Tensor)>, gas_used: u64) -> Report {
        let (output_names, tensors): (Vec<String>, Vec<OutputTensor>) = outputs
            .into_iter()
            .map(|(name, tensor)| (name, tensor.into()))
            .unzip();
        Report {
            outcome: Outcome {
                version: OUTCOME_VERSION,
                status: Status::Ok { outputs: tensors },
                gas_used,
            },
            output_names,
            failure: None,
        }
    }

    /// A failed load or run.
    pub fn failure(error: Error, gas_used: u64) -> Report {
        Report {
            outcome: Outcome {
                version: OUTCOME_VERSION,
                status: Status::Error {
                    code: error.code.number(),
                    node: error.node,
                },
                gas_used,
            },
            output_names: Vec::new(),
            failure: Some(FailureDetail {
                code_name: String::from(error.code.name()),
                node_name: error.node_name,
                message: error.message,
            }),
        }
    }

    /// The error code of a failed outcome.
    pub fn error_code(&self) -> Option<ErrorCode> {
        match self.outcome.status {
            Status::Error { code, .. } => ErrorCode::from_number(code),
            Status::Ok { .. } => None,
        }
    }

    /// The canonical bytes that hosts hash.
    pub fn outcome_bytes(&self) -> Vec<u8> {
        borsh::to_vec(&self.outcome).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn output_tensors_encode_as_the_derived_layout() {
        // The derived encoding of the same fields, for comparison: a tuple encodes as a struct.
        let mut state: u32 = 0x2545_F491;
        for len in [
            0usize,
            1,
            3,
            255,
            256,
            257,
            1000,
            4095,
            4096,
            4097,
            3 * 4096 + 17,
        ] {
            let data: Vec<i32> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 17;
                    state ^= state << 5;
                    state as i32
                })
                .collect();
            let tensor = OutputTensor {
                shape: vec![1, len as u32],
                precision: 32,
                data,
            };
            let expected =
                borsh::to_vec(&(&tensor.shape, tensor.precision, &tensor.data)).unwrap_or_default();
            assert_eq!(
                borsh::to_vec(&tensor).unwrap_or_default(),
                expected,
                "{len}"
            );
            let back: OutputTensor = borsh::from_slice(&expected).unwrap_or_else(|_| panic!());
            assert_eq!(back, tensor);
            // Every truncation fails to decode, as the derived decoder's would.
            for cut in [0, expected.len() / 2, expected.len().saturating_sub(1)] {
                if cut < expected.len() {
                    assert!(borsh::from_slice::<OutputTensor>(&expected[..cut]).is_err());
                }
            }
        }
    }

    #[test]
    fn outcome_layout_is_frozen() {
        let ok = Outcome {
            version: OUTCOME_VERSION,
            status: Status::Ok {
                outputs: vec![OutputTensor {
                    shape: vec![2],
                    precision: 8,
                    data: vec![-1, 2],
                }],
            },
            gas_used: 0x0102,
        };
        let bytes = borsh::to_vec(&ok).unwrap_or_default();
        #[rustfmt::skip]
        let expected: &[u8] = &[
            1,                      // version
            0,                      // status Ok
            1, 0, 0, 0,             // one output
            1, 0, 0, 0, 2, 0, 0, 0, // shape [2]
            8,                      // precision
            2, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, // data [-1, 2]
            2, 1, 0, 0, 0, 0, 0, 0, // gas_used
        ];
        assert_eq!(bytes, expected);

        let err = Outcome {
            version: OUTCOME_VERSION,
            status: Status::Error {
                code: 403,
                node: Some(3),
            },
            gas_used: 7,
        };
        let bytes = borsh::to_vec(&err).unwrap_or_default();
        assert_eq!(
            bytes,
            [1, 1, 0x93, 0x01, 1, 3, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0]
        );
    }
}
