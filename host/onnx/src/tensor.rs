//! Tensors: element types, and the decoding of a `TensorProto` (an initializer or a tensor
//! attribute) into typed values, from `raw_data`, the typed fields or external data
//! (`external.rs`), with every length checked against the shape before anything is allocated
//! from it.

use cvm_formats::quote;

use crate::error::{ExternalDataError, OnnxError};
use crate::external::{External, Layout};
use crate::limits::{MAX_RANK, MAX_TENSOR_ELEMENTS};
use crate::proto::TensorProto;
use crate::proto::tensor_proto::{DataLocation, DataType};

/// The element types the reader decodes. The codes are ONNX's `TensorProto.DataType` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElementType {
    /// IEEE 754 binary32 (`FLOAT`, 1).
    Float32,
    /// `UINT8` (2).
    Uint8,
    /// `INT8` (3).
    Int8,
    /// `INT32` (6).
    Int32,
    /// `INT64` (7).
    Int64,
    /// `BOOL` (9), one byte per element in `raw_data`; read in constant tensors only (an
    /// exporter's folded mask), never as a graph input or output.
    Bool,
}

impl ElementType {
    /// The type of ONNX `TensorProto.DataType` code `code`, if the reader decodes it.
    pub fn from_code(code: i32) -> Option<ElementType> {
        match DataType::try_from(code).ok()? {
            DataType::Float => Some(ElementType::Float32),
            DataType::Uint8 => Some(ElementType::Uint8),
            DataType::Int8 => Some(ElementType::Int8),
            DataType::Int32 => Some(ElementType::Int32),
            DataType::Int64 => Some(ElementType::Int64),
            _ => None,
        }
    }

    /// The type of a constant tensor of code `code`: those of [`ElementType::from_code`] and
    /// `BOOL`.
    pub fn of_tensor(code: i32) -> Option<ElementType> {
        match DataType::try_from(code).ok()? {
            DataType::Bool => Some(ElementType::Bool),
            _ => ElementType::from_code(code),
        }
    }

    /// Its ONNX `TensorProto.DataType` code.
    pub fn code(self) -> i32 {
        let data_type = match self {
            ElementType::Float32 => DataType::Float,
            ElementType::Uint8 => DataType::Uint8,
            ElementType::Int8 => DataType::Int8,
            ElementType::Int32 => DataType::Int32,
            ElementType::Int64 => DataType::Int64,
            ElementType::Bool => DataType::Bool,
        };
        data_type as i32
    }

    /// Bytes one element takes in `raw_data`.
    pub fn size(self) -> usize {
        match self {
            ElementType::Uint8 | ElementType::Int8 | ElementType::Bool => 1,
            ElementType::Float32 | ElementType::Int32 => 4,
            ElementType::Int64 => 8,
        }
    }
}

/// A named constant tensor: an initializer, or the value of a tensor attribute.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    /// Its name: an initializer's is not empty; a tensor attribute's may be.
    pub name: String,
    /// Its dimensions, outermost first (empty for a scalar); at most
    /// [`MAX_RANK`](crate::limits::MAX_RANK) of them.
    pub shape: Vec<u32>,
    /// Its elements in row-major order: exactly the product of `shape` of them, at most
    /// [`MAX_TENSOR_ELEMENTS`](crate::limits::MAX_TENSOR_ELEMENTS).
    pub data: TensorData,
}

impl Tensor {
    /// Its element type.
    pub fn element_type(&self) -> ElementType {
        self.data.element_type()
    }
}

/// A tensor's elements, typed. Floats are the file's bit patterns, carried and never computed
/// on.
#[derive(Clone, Debug, PartialEq)]
pub enum TensorData {
    /// float32 elements.
    Float32(Vec<f32>),
    /// uint8 elements.
    Uint8(Vec<u8>),
    /// int8 elements.
    Int8(Vec<i8>),
    /// int32 elements.
    Int32(Vec<i32>),
    /// int64 elements.
    Int64(Vec<i64>),
    /// Boolean elements.
    Bool(Vec<bool>),
}

impl TensorData {
    /// The type of its elements.
    pub fn element_type(&self) -> ElementType {
        match self {
            TensorData::Float32(_) => ElementType::Float32,
            TensorData::Uint8(_) => ElementType::Uint8,
            TensorData::Int8(_) => ElementType::Int8,
            TensorData::Int32(_) => ElementType::Int32,
            TensorData::Int64(_) => ElementType::Int64,
            TensorData::Bool(_) => ElementType::Bool,
        }
    }

    /// How many elements it holds.
    pub fn len(&self) -> usize {
        match self {
            TensorData::Float32(values) => values.len(),
            TensorData::Uint8(values) => values.len(),
            TensorData::Int8(values) => values.len(),
            TensorData::Int32(values) => values.len(),
            TensorData::Int64(values) => values.len(),
            TensorData::Bool(values) => values.len(),
        }
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The name ONNX gives type code `code`, with the code: `FLOAT16 (10)`, or `unknown (99)`.
pub(crate) fn type_name(code: i32) -> String {
    match DataType::try_from(code) {
        Ok(data_type) => format!("{} ({code})", data_type.as_str_name()),
        Err(_) => format!("unknown ({code})"),
    }
}

/// Checks a tensor's dimensions as the file gives them: at most [`MAX_RANK`], each in
/// `0..=u32::MAX`, their product at most [`MAX_TENSOR_ELEMENTS`]. Returns the shape and the
/// element count. `what` names the tensor in messages.
pub(crate) fn checked_shape(dims: &[i64], what: &str) -> Result<(Vec<u32>, usize), OnnxError> {
    let shape_error = |message: String| OnnxError::Shape {
        what: what.to_string(),
        message,
    };
    if dims.len() > MAX_RANK {
        return Err(shape_error(format!(
            "rank {}, more than the {MAX_RANK} the engine supports",
            dims.len()
        )));
    }
    let mut shape = Vec::with_capacity(dims.len());
    for (axis, &dim) in dims.iter().enumerate() {
        let dim = u32::try_from(dim).map_err(|_| {
            shape_error(format!(
                "dimension {dim} on axis {axis} is not a size (0 to {})",
                u32::MAX
            ))
        })?;
        shape.push(dim);
    }
    let n_elements = element_count(&shape).ok_or_else(|| {
        shape_error(format!(
            "shape {shape:?} has more than the {MAX_TENSOR_ELEMENTS} elements the engine allows in a tensor"
        ))
    })?;
    Ok((shape, n_elements))
}

/// The product of `shape` if it is at most [`MAX_TENSOR_ELEMENTS`], in checked arithmetic.
pub(crate) fn element_count(shape: &[u32]) -> Option<usize> {
    let count = shape
        .iter()
        .try_fold(1u64, |count, &dim| count.checked_mul(u64::from(dim)))?;
    if count > MAX_TENSOR_ELEMENTS {
        return None;
    }
    usize::try_from(count).ok()
}

/// Decodes a tensor, reading its data from `external` when it is stored there. `what` names
/// it in messages (`initializer "W"`, `node 3 (Constant), attribute "value"`).
///
/// # Errors
/// [`OnnxError::ExternalData`] for data in another file that cannot be read from it (or at
/// all, for a model read from memory); [`OnnxError::UnsupportedType`]; [`OnnxError::Shape`]
/// past the rank or element limits; [`OnnxError::TensorData`] when the data is segmented, sits
/// in a field its type does not use, has the wrong length, or holds an int8/uint8 value out of
/// range.
pub(crate) fn decode_tensor(
    proto: TensorProto,
    what: &str,
    external: &mut External,
) -> Result<Tensor, OnnxError> {
    let data_error = |message: String| OnnxError::TensorData {
        tensor: what.to_string(),
        message,
    };
    let external_error = |problem: ExternalDataError| OnnxError::ExternalData {
        tensor: what.to_string(),
        problem,
    };
    let is_external = match proto.data_location.map(DataLocation::try_from) {
        None | Some(Ok(DataLocation::Default)) if proto.external_data.is_empty() => false,
        None | Some(Ok(DataLocation::Default)) => {
            return Err(external_error(ExternalDataError::NotMarkedExternal));
        }
        Some(Ok(DataLocation::External)) => {
            external.available().map_err(external_error)?;
            true
        }
        Some(Err(_)) => {
            return Err(data_error(format!(
                "data_location {} is not DEFAULT (0) or EXTERNAL (1)",
                proto.data_location.unwrap_or_default()
            )));
        }
    };
    if proto.segment.is_some() {
        return Err(data_error(
            "it is a segment of a larger tensor, which is not supported".to_string(),
        ));
    }
    let data_type = proto.data_type.unwrap_or_default();
    let element_type =
        ElementType::of_tensor(data_type).ok_or_else(|| OnnxError::UnsupportedType {
            what: what.to_string(),
            data_type,
        })?;
    let (shape, n_elements) = checked_shape(&proto.dims, what)?;
    let expected_field = match element_type {
        ElementType::Float32 => "float_data",
        ElementType::Uint8 | ElementType::Int8 | ElementType::Int32 | ElementType::Bool => {
            "int32_data"
        }
        ElementType::Int64 => "int64_data",
    };
    let fields = [
        ("float_data", proto.float_data.len()),
        ("int32_data", proto.int32_data.len()),
        ("int64_data", proto.int64_data.len()),
    ];
    let raw_present = proto.raw_data.is_some();
    if is_external {
        // The file's bytes are the tensor's only data (onnx.proto, `external_data`).
        let inline = if raw_present {
            Some("raw_data")
        } else {
            fields
                .iter()
                .find(|(_, len)| *len > 0)
                .map(|(field, _)| *field)
        };
        if let Some(field) = inline {
            return Err(external_error(ExternalDataError::AlsoInline { field }));
        }
        let layout = Layout {
            shape: &shape,
            elements: n_elements,
            element_size: element_type.size(),
            element_type: type_label(element_type),
        };
        let raw = external
            .read(&proto.external_data, &layout)
            .map_err(external_error)?;
        return Ok(Tensor {
            name: proto.name.unwrap_or_default(),
            data: decode_raw(&raw, element_type, n_elements, &shape).map_err(data_error)?,
            shape,
        });
    }
    for (field, len) in fields {
        if len == 0 {
            continue;
        }
        if raw_present {
            return Err(data_error(format!(
                "it holds its data both in raw_data and in {field}"
            )));
        }
        if field != expected_field {
            return Err(data_error(format!(
                "its {} data is in {field}; {} data goes in {expected_field} or raw_data",
                type_label(element_type),
                type_label(element_type)
            )));
        }
    }
    let data = match proto.raw_data {
        Some(raw) => decode_raw(&raw, element_type, n_elements, &shape).map_err(data_error)?,
        None => {
            let len = match element_type {
                ElementType::Float32 => proto.float_data.len(),
                ElementType::Uint8 | ElementType::Int8 | ElementType::Int32 | ElementType::Bool => {
                    proto.int32_data.len()
                }
                ElementType::Int64 => proto.int64_data.len(),
            };
            if len != n_elements {
                return Err(data_error(format!(
                    "{expected_field} holds {len} values, but its shape {shape:?} has {n_elements} elements"
                )));
            }
            match element_type {
                ElementType::Float32 => TensorData::Float32(proto.float_data),
                ElementType::Int32 => TensorData::Int32(proto.int32_data),
                ElementType::Int64 => TensorData::Int64(proto.int64_data),
                ElementType::Int8 => TensorData::Int8(
                    narrow(&proto.int32_data, "int8 range -128 to 127").map_err(data_error)?,
                ),
                ElementType::Uint8 => TensorData::Uint8(
                    narrow(&proto.int32_data, "uint8 range 0 to 255").map_err(data_error)?,
                ),
                ElementType::Bool => TensorData::Bool(
                    bools(
                        &proto
                            .int32_data
                            .iter()
                            .map(|&v| i64::from(v))
                            .collect::<Vec<_>>(),
                    )
                    .map_err(data_error)?,
                ),
            }
        }
    };
    Ok(Tensor {
        name: proto.name.unwrap_or_default(),
        shape,
        data,
    })
}

/// The lower-case name of a type, for messages.
fn type_label(element_type: ElementType) -> &'static str {
    match element_type {
        ElementType::Float32 => "float32",
        ElementType::Uint8 => "uint8",
        ElementType::Int8 => "int8",
        ElementType::Int32 => "int32",
        ElementType::Int64 => "int64",
        ElementType::Bool => "bool",
    }
}

/// Decodes `raw_data`, or the bytes of external data: fixed-width little-endian elements
/// (onnx.proto, `raw_data`), exactly `n_elements` of them.
fn decode_raw(
    raw: &[u8],
    element_type: ElementType,
    n_elements: usize,
    shape: &[u32],
) -> Result<TensorData, String> {
    let size = element_type.size();
    // n_elements ≤ 2^26 and size ≤ 8, so this cannot overflow; checked all the same.
    let expected = n_elements.checked_mul(size);
    if expected != Some(raw.len()) {
        return Err(format!(
            "raw_data holds {} bytes, but its shape {shape:?} of {n_elements} {} elements needs {}",
            raw.len(),
            type_label(element_type),
            expected.map_or_else(|| "more".to_string(), |bytes| bytes.to_string())
        ));
    }
    Ok(match element_type {
        ElementType::Bool => TensorData::Bool(bools(
            &raw.iter().map(|&byte| i64::from(byte)).collect::<Vec<_>>(),
        )?),
        ElementType::Uint8 => TensorData::Uint8(raw.to_vec()),
        ElementType::Int8 => TensorData::Int8(raw.iter().map(|&byte| byte as i8).collect()),
        ElementType::Float32 => TensorData::Float32(
            raw.chunks_exact(4)
                .map(|chunk| f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]))
                .collect(),
        ),
        ElementType::Int32 => TensorData::Int32(
            raw.chunks_exact(4)
                .map(|chunk| i32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]))
                .collect(),
        ),
        ElementType::Int64 => TensorData::Int64(
            raw.chunks_exact(8)
                .map(|chunk| {
                    i64::from_le_bytes([
                        chunk[0], chunk[1], chunk[2], chunk[3], chunk[4], chunk[5], chunk[6],
                        chunk[7],
                    ])
                })
                .collect(),
        ),
    })
}

/// Boolean elements stored as integers, each 0 or 1.
fn bools(values: &[i64]) -> Result<Vec<bool>, String> {
    values
        .iter()
        .enumerate()
        .map(|(index, &value)| match value {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(format!("boolean element {index} is {value}, not 0 or 1")),
        })
        .collect()
}

/// Converts the `int32_data` of an int8 or uint8 tensor (one element per entry), refusing a
/// value out of the type's range.
fn narrow<T: TryFrom<i32>>(values: &[i32], range: &str) -> Result<Vec<T>, String> {
    values
        .iter()
        .enumerate()
        .map(|(index, &value)| {
            T::try_from(value)
                .map_err(|_| format!("int32_data[{index}] = {value} is out of the {range}"))
        })
        .collect()
}

/// `name` quoted as messages show an initializer.
pub(crate) fn initializer_label(name: &str) -> String {
    format!("initializer {}", quote(name))
}
