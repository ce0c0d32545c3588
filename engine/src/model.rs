//! The canonical model format: what a model is on the wire, and its byte-exact encoding.
//!
//! A model file is `MAGIC` (8 bytes), the format version (`u32` little endian), then the borsh
//! encoding of [`Model`]. `docs/model-format.md` documents every byte. Decoding here is purely
//! structural; [`crate::validate`] turns a decoded model into one the executor accepts.
//!
//! Architecture Invariant: enum variant order below is the encoding's tag order and never
//! changes; changing any of these types is a [`FORMAT_VERSION`] bump.

use alloc::string::String;
use alloc::vec::Vec;
use borsh::{BorshDeserialize, BorshSerialize};

use crate::error::Result;
use crate::fail;

/// The first eight bytes of every canonical model file.
pub const MAGIC: [u8; 8] = *b"CVMMODEL";

/// The canonical format version this engine reads and writes.
pub const FORMAT_VERSION: u32 = 1;

/// A model graph: declared inputs, embedded parameters, nodes in topological order, outputs.
#[derive(Clone, Debug, PartialEq, Eq, BorshSerialize, BorshDeserialize)]
pub struct Model {
    /// Values supplied at run time, in the order the run call takes them.
    pub inputs: Vec<InputDecl>,
    /// Constant tensors embedded in the model (weights, biases, tables).
    pub params: Vec<ParamDecl>,
    /// Operator applications; each may only reference inputs, params and earlier nodes.
    pub nodes: Vec<Node>,
    /// Values returned by a run, in order.
    pub outputs: Vec<OutputDecl>,
}

/// A declared model input.
#[derive(Clone, Debug, PartialEq, Eq, BorshSerialize, BorshDeserialize)]
pub struct InputDecl {
    /// Name used by callers to supply the input.
    pub name: String,
    /// Exact shape the input must have.
    pub shape: Vec<u32>,
    /// Precision (1..=32) every input value must respect.
    pub precision: u8,
}

/// A parameter tensor embedded in the model.
#[derive(Clone, Debug, PartialEq, Eq, BorshSerialize, BorshDeserialize)]
pub struct ParamDecl {
    /// Name of the parameter.
    pub name: String,
    /// Shape of the parameter.
    pub shape: Vec<u32>,
    /// Precision (1..=32) every value respects.
    pub precision: u8,
    /// The values, row-major.
    pub data: ParamData,
}

/// Parameter values, stored as narrow as they fit.
#[derive(Clone, Debug, PartialEq, Eq, BorshSerialize)]
pub enum ParamData {
    /// One byte per value (tag 0).
    I8(Vec<i8>),
    /// Four bytes per value (tag 1).
    I32(Vec<i32>),
}

/// Bytes read at once when decoding parameter values.
const PARAM_READ_CHUNK: usize = 16 * 1024;

/// Reads `count` values of `WIDTH` bytes each, converting each with `convert`: in chunks, so
/// that a declared length the bytes cannot back fails when the bytes run out, never allocating
/// more than what was read plus one chunk.
fn read_values<R: borsh::io::Read, T, const WIDTH: usize>(
    reader: &mut R,
    count: u32,
    convert: impl Fn([u8; WIDTH]) -> T,
) -> borsh::io::Result<Vec<T>> {
    let mut values = Vec::new();
    let mut remaining = count as usize;
    let mut chunk = [0u8; PARAM_READ_CHUNK];
    while remaining > 0 {
        let take = remaining.min(PARAM_READ_CHUNK / WIDTH);
        let bytes = &mut chunk[..take * WIDTH];
        reader.read_exact(bytes)?;
        values.reserve(take);
        let (words, _) = bytes.as_chunks::<WIDTH>();
        values.extend(words.iter().map(|&word| convert(word)));
        remaining -= take;
    }
    Ok(values)
}

impl BorshDeserialize for ParamData {
    /// The derived encoding (tag byte, `u32` length, values little endian), decoded a chunk of
    /// bytes at a time rather than value by value: parameters are most of a model's bytes.
    fn deserialize_reader<R: borsh::io::Read>(reader: &mut R) -> borsh::io::Result<Self> {
        let tag = u8::deserialize_reader(reader)?;
        let count = u32::deserialize_reader(reader)?;
        match tag {
            0 => Ok(ParamData::I8(read_values(
                reader,
                count,
                |[byte]: [u8; 1]| i8::from_le_bytes([byte]),
            )?)),
            1 => Ok(ParamData::I32(read_values(
                reader,
                count,
                i32::from_le_bytes,
            )?)),
            _ => Err(borsh::io::Error::new(
                borsh::io::ErrorKind::InvalidData,
                alloc::format!("unexpected ParamData variant tag {tag}"),
            )),
        }
    }
}

impl ParamData {
    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            ParamData::I8(values) => values.len(),
            ParamData::I32(values) => values.len(),
        }
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The narrowest encoding of `values`: `I8` when every value fits a byte.
    pub fn narrowest(values: Vec<i32>) -> ParamData {
        if values.iter().all(|&v| i8::try_from(v).is_ok()) {
            ParamData::I8(values.into_iter().map(|v| v as i8).collect())
        } else {
            ParamData::I32(values)
        }
    }
}

/// One operator application.
#[derive(Clone, Debug, PartialEq, Eq, BorshSerialize, BorshDeserialize)]
pub struct Node {
    /// Unique name, used in error messages and to refer to the node in text models.
    pub name: String,
    /// Frozen operator code (see [`crate::ops::OPS`]).
    pub op: u16,
    /// Operand values.
    pub inputs: Vec<ValueRef>,
    /// Attributes, sorted by name, names unique.
    pub attrs: Vec<Attr>,
}

/// A named attribute.
#[derive(Clone, Debug, PartialEq, Eq, BorshSerialize, BorshDeserialize)]
pub struct Attr {
    /// Attribute name as in the specification (`units`, `padding`, ...).
    pub name: String,
    /// Its value.
    pub value: AttrValue,
}

/// A typed attribute value.
#[derive(Clone, Debug, PartialEq, Eq, BorshSerialize, BorshDeserialize)]
pub enum AttrValue {
    /// An integer (tag 0).
    Int(i64),
    /// A boolean (tag 1).
    Bool(bool),
    /// A list of integers (tag 2).
    Ints(Vec<i64>),
    /// A string (tag 3).
    Str(String),
}

/// A reference to a value of the graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, BorshSerialize, BorshDeserialize)]
pub enum ValueRef {
    /// The i-th declared input (tag 0).
    Input(u32),
    /// The i-th parameter (tag 1).
    Param(u32),
    /// Output `output` of node `node` (tag 2).
    Node {
        /// Node index.
        node: u32,
        /// Output index of that node.
        output: u8,
    },
}

/// A named model output.
#[derive(Clone, Debug, PartialEq, Eq, BorshSerialize, BorshDeserialize)]
pub struct OutputDecl {
    /// Name of the output.
    pub name: String,
    /// The value returned.
    pub value: ValueRef,
}

impl Model {
    /// Decodes a canonical model file.
    ///
    /// # Errors
    /// [`crate::ErrorCode::MalformedModel`] for a wrong magic, truncated or trailing bytes, or
    /// any encoding error; [`crate::ErrorCode::UnsupportedVersion`] for another format version.
    pub fn decode(bytes: &[u8]) -> Result<Model> {
        let Some(magic) = bytes.get(..MAGIC.len()) else {
            return Err(fail!(
                MalformedModel,
                "model is {} bytes, shorter than its 12-byte header",
                bytes.len()
            ));
        };
        if magic != MAGIC {
            return Err(fail!(
                MalformedModel,
                "model does not start with the magic \"CVMMODEL\""
            ));
        }
        let Some(version_bytes) = bytes.get(MAGIC.len()..MAGIC.len() + 4) else {
            return Err(fail!(
                MalformedModel,
                "model is truncated inside its header"
            ));
        };
        let mut version = [0u8; 4];
        version.copy_from_slice(version_bytes);
        let version = u32::from_le_bytes(version);
        if version != FORMAT_VERSION {
            return Err(fail!(
                UnsupportedVersion,
                "model format version {version} is not supported (this engine reads {FORMAT_VERSION})"
            ));
        }
        let header = MAGIC.len() + 4;
        decode_borsh::<Model>(&bytes[header..], header)
            .map_err(|err| fail!(MalformedModel, "model body cannot be decoded: {err}"))
    }

    /// Encodes the model in the canonical format.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(64);
        bytes.extend_from_slice(&MAGIC);
        bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        // Writing into a Vec cannot fail.
        let _ = borsh::to_writer(&mut bytes, self);
        bytes
    }
}

/// Decodes `bytes` as one borsh value filling them exactly, as `borsh::from_slice` does; on
/// failure the message also says where: the byte (counted from `base`, the offset of `bytes` in
/// what the user supplied) at which the value that could not be read starts, or how many bytes
/// follow the value.
///
/// # Errors
/// The message, for a `MalformedModel` or `MalformedInput` failure.
pub(crate) fn decode_borsh<T: BorshDeserialize>(
    bytes: &[u8],
    base: usize,
) -> core::result::Result<T, String> {
    // The slice reader is the fast path; a failure is decoded again to find where it stopped.
    let error = match borsh::from_slice::<T>(bytes) {
        Ok(value) => return Ok(value),
        Err(error) => error,
    };
    let mut reader = Tracked {
        bytes,
        position: 0,
        start: 0,
    };
    let end = base + bytes.len();
    match T::deserialize_reader(&mut reader) {
        Err(_) => Err(alloc::format!(
            "{error}, in the value at byte {} (of {end})",
            base + reader.start
        )),
        Ok(_) => Err(alloc::format!(
            "{} bytes follow the end of the value at byte {} (of {end})",
            bytes.len() - reader.position,
            base + reader.position
        )),
    }
}

/// A reader over bytes that remembers where the latest read started.
struct Tracked<'a> {
    bytes: &'a [u8],
    /// Bytes read so far.
    position: usize,
    /// Where the latest read started.
    start: usize,
}

impl borsh::io::Read for Tracked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> borsh::io::Result<usize> {
        self.start = self.position;
        let rest = self.bytes.get(self.position..).unwrap_or_default();
        let n = buf.len().min(rest.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.position += n;
        Ok(n)
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> borsh::io::Result<()> {
        self.start = self.position;
        let end = self.position.saturating_add(buf.len());
        let Some(taken) = self.bytes.get(self.position..end) else {
            return Err(borsh::io::Error::new(
                borsh::io::ErrorKind::UnexpectedEof,
                "the bytes end inside a value",
            ));
        };
        buf.copy_from_slice(taken);
        self.position = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;
    use alloc::string::ToString;
    use alloc::vec;

    #[test]
    fn param_data_decodes_its_derived_encoding() {
        // Lengths around the read chunk (16 KiB: 16384 i8 or 4096 i32 values).
        for count in [
            0usize, 1, 7, 4095, 4096, 4097, 16_383, 16_384, 16_385, 40_000,
        ] {
            let narrow: Vec<i8> = (0..count).map(|i| (i * 37 % 256) as u8 as i8).collect();
            let wide: Vec<i32> = (0..count)
                .map(|i| (i as i32).wrapping_mul(-1_640_531_535))
                .collect();
            for data in [ParamData::I8(narrow), ParamData::I32(wide)] {
                let bytes = borsh::to_vec(&data).unwrap();
                assert_eq!(borsh::from_slice::<ParamData>(&bytes).unwrap(), data);
                // Every truncation fails instead of returning short data.
                for cut in [bytes.len().saturating_sub(1), bytes.len() / 2, 5, 1] {
                    if cut < bytes.len() {
                        assert!(borsh::from_slice::<ParamData>(&bytes[..cut]).is_err());
                    }
                }
            }
        }
        // A length far beyond the bytes fails without allocating it; an unknown tag fails.
        assert!(borsh::from_slice::<ParamData>(&[1, 0xff, 0xff, 0xff, 0xff, 1, 2]).is_err());
        assert!(borsh::from_slice::<ParamData>(&[2, 0, 0, 0, 0]).is_err());
    }

    fn sample() -> Model {
        Model {
            inputs: vec![InputDecl {
                name: "x".to_string(),
                shape: vec![1, 2],
                precision: 8,
            }],
            params: vec![ParamDecl {
                name: "w".to_string(),
                shape: vec![2],
                precision: 8,
                data: ParamData::I8(vec![1, -1]),
            }],
            nodes: vec![Node {
                name: "y".to_string(),
                op: 7,
                inputs: vec![ValueRef::Input(0), ValueRef::Param(0)],
                attrs: vec![Attr {
                    name: "a".to_string(),
                    value: AttrValue::Int(-2),
                }],
            }],
            outputs: vec![OutputDecl {
                name: "y".to_string(),
                value: ValueRef::Node { node: 0, output: 0 },
            }],
        }
    }

    #[test]
    fn decoding_failures_say_where() {
        let bytes = sample().encode();
        let message = |bytes: &[u8]| match Model::decode(bytes) {
            Err(error) => error.message,
            Ok(_) => panic!("decoded"),
        };
        // Cut off the last byte (the output's index): the message names the byte where the
        // value that cannot be read starts, counted in the whole model.
        let cut = bytes.len() - 1;
        let truncated = message(&bytes[..cut]);
        assert!(
            truncated.contains(&alloc::format!("in the value at byte {cut} (of {cut})")),
            "{truncated}"
        );
        // Bytes after the model.
        let mut longer = bytes.clone();
        longer.extend_from_slice(&[0, 0]);
        let trailing = message(&longer);
        assert!(
            trailing.contains(&alloc::format!(
                "2 bytes follow the end of the value at byte {} (of {})",
                bytes.len(),
                bytes.len() + 2
            )),
            "{trailing}"
        );
    }

    #[test]
    fn round_trip() {
        let model = sample();
        assert_eq!(Model::decode(&model.encode()), Ok(model));
    }

    #[test]
    fn header_and_tags_are_frozen() {
        let bytes = sample().encode();
        assert_eq!(&bytes[..8], b"CVMMODEL");
        assert_eq!(&bytes[8..12], &[1, 0, 0, 0]);
        let tag = |value: &dyn Fn() -> Vec<u8>| value()[0];
        assert_eq!(
            tag(&|| borsh::to_vec(&ParamData::I8(vec![])).unwrap_or_default()),
            0
        );
        assert_eq!(
            tag(&|| borsh::to_vec(&ParamData::I32(vec![])).unwrap_or_default()),
            1
        );
        assert_eq!(
            tag(&|| borsh::to_vec(&AttrValue::Int(0)).unwrap_or_default()),
            0
        );
        assert_eq!(
            tag(&|| borsh::to_vec(&AttrValue::Bool(true)).unwrap_or_default()),
            1
        );
        assert_eq!(
            tag(&|| borsh::to_vec(&AttrValue::Ints(vec![])).unwrap_or_default()),
            2
        );
        assert_eq!(
            tag(&|| borsh::to_vec(&AttrValue::Str(String::new())).unwrap_or_default()),
            3
        );
        assert_eq!(
            tag(&|| borsh::to_vec(&ValueRef::Input(0)).unwrap_or_default()),
            0
        );
        assert_eq!(
            tag(&|| borsh::to_vec(&ValueRef::Param(0)).unwrap_or_default()),
            1
        );
        assert_eq!(
            tag(&|| borsh::to_vec(&ValueRef::Node { node: 0, output: 0 }).unwrap_or_default()),
            2
        );
    }

    #[test]
    fn every_truncation_is_a_malformed_model() {
        let bytes = sample().encode();
        for len in 0..bytes.len() {
            let err = Model::decode(&bytes[..len]).err().map(|e| e.code);
            assert_eq!(err, Some(ErrorCode::MalformedModel), "truncated at {len}");
        }
    }

    #[test]
    fn trailing_bytes_and_bad_headers_are_rejected() {
        let mut bytes = sample().encode();
        bytes.push(0);
        assert_eq!(
            Model::decode(&bytes).map_err(|e| e.code),
            Err(ErrorCode::MalformedModel)
        );
        let mut bytes = sample().encode();
        bytes[0] = b'X';
        assert_eq!(
            Model::decode(&bytes).map_err(|e| e.code),
            Err(ErrorCode::MalformedModel)
        );
        let mut bytes = sample().encode();
        bytes[8] = 2;
        assert_eq!(
            Model::decode(&bytes).map_err(|e| e.code),
            Err(ErrorCode::UnsupportedVersion)
        );
    }
}
