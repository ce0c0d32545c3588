//! Reading and writing NumPy `.npy` files of integer tensors, and of float32 tensors for the
//! float edges of imported models ([`read_npy_f32`], [`write_npy_f32`]).
//!
//! The engine consumes int32 tensors, so [`read_npy`] accepts every integer and bool dtype that
//! NumPy writes (1-, 2-, 4- and 8-byte, either byte order, C or Fortran order) and converts the
//! values to `i32`, refusing any value that would not survive the conversion exactly.
//! [`write_npy`] always writes `<i4` in C order, laid out byte for byte as `numpy.save` does.
//!
//! The header is a Python dict literal; it is parsed by a small strict parser for exactly the
//! subset NumPy produces (strings, `True`/`False`, integers, tuples and lists), never evaluated.
//! Every length read from the file is checked against the bytes actually present before anything
//! is allocated from it, so a hostile file cannot make the reader panic or allocate without bound.

/// An integer tensor: its shape and its values in C (row-major) order.
///
/// An empty `shape` is a scalar and holds exactly one value; otherwise `data.len()` is the
/// product of `shape` (zero if any dimension is zero).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyArray {
    /// Length of each axis, outermost first. Empty for a scalar.
    pub shape: Vec<u32>,
    /// The values in C (row-major) order; the last axis varies fastest.
    pub data: Vec<i32>,
}

/// Why a byte buffer could not be read as an integer `.npy` array.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NpyError {
    /// The file does not start with the `.npy` magic string.
    #[error("not a .npy file: it does not start with the magic string \\x93NUMPY")]
    BadMagic,
    /// The format version is not 1.0, 2.0 or 3.0.
    #[error("unsupported .npy format version {major}.{minor} (supported: 1.0, 2.0, 3.0)")]
    UnsupportedVersion {
        /// Major version byte from the file.
        major: u8,
        /// Minor version byte from the file.
        minor: u8,
    },
    /// The file ends inside its fixed preamble or inside the header.
    #[error("file is truncated: the {part} needs {needed} bytes but only {available} are present")]
    Truncated {
        /// Which part of the file is cut short.
        part: &'static str,
        /// Bytes that part needs.
        needed: u64,
        /// Bytes actually present for it.
        available: u64,
    },
    /// The header contains a byte outside ASCII; NumPy's headers for plain dtypes never do.
    #[error("header is not ASCII: byte 0x{byte:02x} at header offset {offset}")]
    HeaderNotAscii {
        /// Offset of the byte within the header text.
        offset: usize,
        /// The offending byte.
        byte: u8,
    },
    /// The header is not a well-formed dict literal of the grammar NumPy writes.
    #[error("malformed header at offset {offset}: {reason}")]
    HeaderSyntax {
        /// Offset within the header text where parsing failed.
        offset: usize,
        /// What was expected or found there.
        reason: String,
    },
    /// One of the three required keys is absent.
    #[error("header is missing the key '{0}'")]
    MissingKey(&'static str),
    /// The header has a key other than `descr`, `fortran_order` and `shape`.
    #[error("header has an unknown key '{0}' (allowed: 'descr', 'fortran_order', 'shape')")]
    UnknownKey(String),
    /// A key appears more than once.
    #[error("header has the key '{0}' more than once")]
    DuplicateKey(String),
    /// A key's value has the wrong form (e.g. `shape` not a tuple, `fortran_order` not a bool).
    #[error("header value for '{key}' is invalid: {reason}")]
    InvalidValue {
        /// The key whose value is wrong.
        key: &'static str,
        /// What was expected and what was found.
        reason: String,
    },
    /// The dtype is a float, complex, string, object, datetime or other non-integer type.
    #[error("dtype '{0}' is not an integer type; inputs must be integer tensors")]
    NotIntegerDtype(String),
    /// [`read_npy_f32`] was given a dtype other than float32.
    #[error("dtype '{0}' is not float32 ('<f4' or '>f4'); save the array as numpy.float32")]
    NotFloat32(String),
    /// A float32 array stored in Fortran order, which [`read_npy_f32`] does not reorder.
    #[error("the array is stored in Fortran order; save it with numpy.ascontiguousarray first")]
    FortranFloat,
    /// A float32 value that is NaN or infinite.
    #[error("value at flat index {index} is {value}, not a finite number")]
    NotFinite {
        /// Position of the value in C (row-major) order.
        index: u64,
        /// The value as text (`NaN`, `inf` or `-inf`).
        value: String,
    },
    /// The dtype is structured or a sub-array (its descr is a list or tuple).
    #[error("structured dtype {0} is not supported; inputs must be plain integer tensors")]
    StructuredDtype(String),
    /// The dtype looks like an integer type but its size or byte-order mark is not one NumPy
    /// writes (e.g. `<i3`, `|i4`, `<b2`).
    #[error("dtype '{descr}' is not supported: {reason}")]
    UnsupportedDtype {
        /// The descr string from the header.
        descr: String,
        /// Why it is not accepted.
        reason: &'static str,
    },
    /// A shape dimension is larger than `u32::MAX`.
    #[error("shape dimension {dimension} on axis {axis} does not fit in u32")]
    DimensionTooLarge {
        /// Axis index, outermost first.
        axis: usize,
        /// The dimension as written in the header.
        dimension: String,
    },
    /// The element count or byte size of the shape overflows 64-bit arithmetic.
    #[error("shape {shape:?} describes more elements or bytes than fit in 64 bits")]
    SizeOverflow {
        /// The shape from the header.
        shape: Vec<u32>,
    },
    /// The data section holds fewer bytes than shape × item size.
    #[error(
        "data is too short: the shape needs {expected} bytes of data but the file holds {actual}"
    )]
    DataTooShort {
        /// Bytes required by shape and dtype.
        expected: u64,
        /// Bytes present after the header.
        actual: u64,
    },
    /// The data section holds more bytes than shape × item size.
    #[error(
        "data is too long: the shape needs {expected} bytes of data but the file holds {actual}"
    )]
    DataTooLong {
        /// Bytes required by shape and dtype.
        expected: u64,
        /// Bytes present after the header.
        actual: u64,
    },
    /// A stored value lies outside the `i32` range.
    #[error("value {value} at flat index {index} does not fit in int32")]
    ValueOutOfRange {
        /// Position of the value in C (row-major) order.
        index: u64,
        /// The value as stored in the file.
        value: i128,
    },
}

/// The six bytes every `.npy` file starts with.
const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// NumPy aligns the start of the data to this many bytes so files can be memory-mapped.
const ARRAY_ALIGN: usize = 64;

/// NumPy leaves room in the header for the leading axis to grow to this many digits, so that
/// appending to a file can rewrite the header in place. Copied so our output matches `np.save`.
const GROWTH_AXIS_MAX_DIGITS: usize = 21;

/// Deepest nesting of tuples and lists the header parser accepts. NumPy's structured descrs
/// nest only a few levels; the limit keeps a hostile header from exhausting the stack.
const MAX_NESTING: usize = 32;

/// Longest piece of header text quoted in an error message.
const MAX_EXCERPT: usize = 80;

/// Parses a complete `.npy` file held in memory into an int32 array in C order.
///
/// Versions 1.0, 2.0 and 3.0 are accepted, with any bool or integer dtype NumPy writes
/// (`|b1`, `i1`/`u1`, and 2-, 4- and 8-byte signed and unsigned integers in either byte order)
/// and either memory order; Fortran-order data is reordered into C order.
///
/// # Errors
///
/// Returns an [`NpyError`] when the magic string or version is wrong, the file is truncated,
/// the header is not ASCII or not a dict literal with exactly the keys `descr`,
/// `fortran_order` and `shape`, the dtype is not an integer or bool type, a dimension does not
/// fit in `u32`, the data holds fewer or more bytes than the shape requires, or a value does
/// not fit in `i32`.
pub fn read_npy(bytes: &[u8]) -> Result<NpyArray, NpyError> {
    let (header, data) = header_and_data(bytes)?;
    if header.dtype.kind == Kind::Float {
        return Err(NpyError::NotIntegerDtype(header.descr));
    }
    let expected = checked_data_len(&header, data)?;
    let values = if header.fortran_order {
        decode_fortran_order(data, header.dtype, &header.shape, expected)?
    } else {
        decode_c_order(data, header.dtype)?
    };
    Ok(NpyArray {
        shape: header.shape,
        data: values,
    })
}

/// How many values the file's header declares (the product of its shape), read from the
/// header alone: a caller can refuse a tensor before its values are decoded.
///
/// # Errors
/// As [`read_npy`] for the preamble and header; [`NpyError::SizeOverflow`] when the product
/// does not fit in `u64`.
pub fn element_count(bytes: &[u8]) -> Result<u64, NpyError> {
    let (header, _) = header_and_data(bytes)?;
    declared_elements(&header)
}

/// The product of the header's shape.
fn declared_elements(header: &Header) -> Result<u64, NpyError> {
    header
        .shape
        .iter()
        .try_fold(1u64, |count, &dim| count.checked_mul(u64::from(dim)))
        .ok_or_else(|| NpyError::SizeOverflow {
            shape: header.shape.clone(),
        })
}

/// A float32 tensor: its shape and its values in C (row-major) order, every one finite.
#[derive(Debug, Clone, PartialEq)]
pub struct NpyF32Array {
    /// Length of each axis, outermost first. Empty for a scalar.
    pub shape: Vec<u32>,
    /// The values in C order.
    pub data: Vec<f32>,
}

/// Parses a complete `.npy` file of float32 values (`<f4` or `>f4`, C order), as the float
/// inputs of an imported model and calibration sets are given.
///
/// # Errors
///
/// As [`read_npy`] for the file's structure; [`NpyError::NotFloat32`] for any other dtype,
/// [`NpyError::FortranFloat`] for Fortran order and [`NpyError::NotFinite`] for a NaN or an
/// infinity.
pub fn read_npy_f32(bytes: &[u8]) -> Result<NpyF32Array, NpyError> {
    let (header, data) = header_and_data(bytes).map_err(|error| match error {
        NpyError::NotIntegerDtype(descr) => NpyError::NotFloat32(descr),
        other => other,
    })?;
    if header.dtype.kind != Kind::Float {
        return Err(NpyError::NotFloat32(header.descr));
    }
    if header.fortran_order {
        return Err(NpyError::FortranFloat);
    }
    checked_data_len(&header, data)?;
    let big = header.dtype.order == ByteOrder::Big;
    let mut values = Vec::with_capacity(data.len() / 4);
    for (index, item) in data.as_chunks::<4>().0.iter().enumerate() {
        let value = if big {
            f32::from_be_bytes(*item)
        } else {
            f32::from_le_bytes(*item)
        };
        if !value.is_finite() {
            return Err(NpyError::NotFinite {
                index: u64::try_from(index).unwrap_or(u64::MAX),
                value: format!("{value}"),
            });
        }
        values.push(value);
    }
    Ok(NpyF32Array {
        shape: header.shape,
        data: values,
    })
}

/// Serialises a float32 tensor as a `.npy` file (`<f4`, C order), laid out as `numpy.save`
/// writes it. The caller keeps `data.len()` equal to the product of `shape`.
#[must_use]
pub fn write_npy_f32(shape: &[u32], data: &[f32]) -> Vec<u8> {
    let mut out = header_f32(shape);
    out.reserve(4 * data.len());
    for value in data {
        out.extend_from_slice(&value.to_le_bytes());
    }
    out
}

/// Serialises `array` as a `.npy` file: dtype `<i4`, C order, `fortran_order: False`.
///
/// The output is byte-for-byte what `numpy.save` writes for the same int32 array: format
/// version 1.0, the header padded with spaces and ended with `'\n'` so that the data starts at
/// a multiple of 64 bytes. Like NumPy, it falls back to version 2.0 only if the header would be
/// longer than version 1.0's 16-bit length field allows (tens of thousands of axes).
///
/// The caller must keep `array.data.len()` equal to the product of `array.shape` (one for a
/// scalar); otherwise the file is written as given and [`read_npy`] (and NumPy) will reject it.
/// A header longer than 4 GiB (hundreds of millions of axes) cannot be expressed in any
/// `.npy` version; its length field is saturated and the file will not read back.
#[must_use]
pub fn write_npy(array: &NpyArray) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing into a vector cannot fail.
    let _ = write_npy_to(&mut out, &array.shape, &array.data);
    out
}

/// [`write_npy`] into `writer`, the values written in blocks: the memory it takes is a block's,
/// whatever the array's size.
///
/// # Errors
/// The writer's.
pub fn write_npy_to<W: std::io::Write>(
    writer: &mut W,
    shape: &[u32],
    data: &[i32],
) -> std::io::Result<()> {
    writer.write_all(&header_i32(shape))?;
    write_i32_values(writer, data)
}

/// The preamble and header of an int32 `.npy` file of `shape` (`<i4`, C order), as
/// [`write_npy`] begins it: a file written piece by piece (the rows of `cvm run --batch`) is
/// this, then the values in C order ([`write_i32_values`]), as many as the shape holds.
#[must_use]
pub fn header_i32(shape: &[u32]) -> Vec<u8> {
    npy_header("<i4", shape)
}

/// The preamble and header of a float32 `.npy` file of `shape` (`<f4`, C order), as
/// [`write_npy_f32`] begins it; the values follow ([`write_f32_values`]).
#[must_use]
pub fn header_f32(shape: &[u32]) -> Vec<u8> {
    npy_header("<f4", shape)
}

/// Writes `data` as little-endian int32 values in blocks (the data of a [`header_i32`] file).
///
/// # Errors
/// The writer's.
pub fn write_i32_values<W: std::io::Write>(writer: &mut W, data: &[i32]) -> std::io::Result<()> {
    let mut block = [0u8; 4 * 1024];
    for values in data.chunks(1024) {
        for (bytes, value) in block.as_chunks_mut::<4>().0.iter_mut().zip(values) {
            *bytes = value.to_le_bytes();
        }
        writer.write_all(&block[..4 * values.len()])?;
    }
    Ok(())
}

/// Writes `data` as little-endian float32 values in blocks (the data of a [`header_f32`] file).
///
/// # Errors
/// The writer's.
pub fn write_f32_values<W: std::io::Write>(writer: &mut W, data: &[f32]) -> std::io::Result<()> {
    let mut block = [0u8; 4 * 1024];
    for values in data.chunks(1024) {
        for (bytes, value) in block.as_chunks_mut::<4>().0.iter_mut().zip(values) {
            *bytes = value.to_le_bytes();
        }
        writer.write_all(&block[..4 * values.len()])?;
    }
    Ok(())
}

/// The preamble and padded header of a C-order `.npy` file of dtype `descr` and `shape`.
fn npy_header(descr: &str, shape: &[u32]) -> Vec<u8> {
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (");
    for (axis, dim) in shape.iter().enumerate() {
        if axis > 0 {
            header.push_str(", ");
        }
        header.push_str(&dim.to_string());
    }
    if shape.len() == 1 {
        // A one-element Python tuple needs its trailing comma.
        header.push(',');
    }
    header.push_str("), }");
    if let Some(first_dim) = shape.first() {
        let digits = first_dim.to_string().len();
        header.push_str(&" ".repeat(GROWTH_AXIS_MAX_DIGITS.saturating_sub(digits)));
    }

    // Version 1.0 has a 2-byte length field, version 2.0 a 4-byte one; the preamble is the
    // magic, two version bytes and the length field.
    let header_len_v1 = padded_header_len(header.len(), 10);
    let (version_major, preamble_len, padded_len) = match u16::try_from(header_len_v1) {
        Ok(_) => (1u8, 10usize, header_len_v1),
        Err(_) => (2u8, 12, padded_header_len(header.len(), 12)),
    };
    let mut out = Vec::with_capacity(preamble_len.saturating_add(padded_len));
    out.extend_from_slice(MAGIC);
    out.push(version_major);
    out.push(0);
    if version_major == 1 {
        out.extend_from_slice(&u16::try_from(padded_len).unwrap_or(u16::MAX).to_le_bytes());
    } else {
        out.extend_from_slice(&u32::try_from(padded_len).unwrap_or(u32::MAX).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    let padding = padded_len.saturating_sub(header.len()).saturating_sub(1);
    out.resize(out.len().saturating_add(padding), b' ');
    out.push(b'\n');
    out
}

/// Length of the header text after NumPy's padding: the text, at least one space, and a
/// final newline, so that `preamble_len` plus the result is a multiple of [`ARRAY_ALIGN`].
fn padded_header_len(text_len: usize, preamble_len: usize) -> usize {
    // Mirrors numpy's `_wrap_header`: padlen = ALIGN - ((preamble + text + 1) % ALIGN), which is
    // in 1..=ALIGN, so an already aligned header still gets a full block of spaces.
    let with_newline = text_len.saturating_add(1);
    let misalignment = preamble_len.saturating_add(with_newline) % ARRAY_ALIGN;
    with_newline.saturating_add(ARRAY_ALIGN - misalignment)
}

/// The parsed header of a file and its data: magic, version, lengths and an ASCII header
/// checked.
fn header_and_data(bytes: &[u8]) -> Result<(Header, &[u8]), NpyError> {
    let (header_bytes, data, version_major) = split_file(bytes)?;
    if let Some((offset, &byte)) = header_bytes
        .iter()
        .enumerate()
        .find(|(_, byte)| !byte.is_ascii())
    {
        return Err(NpyError::HeaderNotAscii { offset, byte });
    }
    // Python 2 wrote `5L` for long integers; NumPy still accepts that in version 1.0 and 2.0
    // headers (never in 3.0, which postdates Python 2), and so do we.
    Ok((parse_header(header_bytes, version_major <= 2)?, data))
}

/// The bytes of data the header's shape and dtype call for, which `data` must hold exactly.
/// Checked before any allocation, so the declared shape can never make a reader allocate more
/// than the file itself holds.
fn checked_data_len(header: &Header, data: &[u8]) -> Result<u64, NpyError> {
    let expected = declared_elements(header)?
        .checked_mul(header.dtype.size_u64())
        .ok_or_else(|| NpyError::SizeOverflow {
            shape: header.shape.clone(),
        })?;
    let actual = u64::try_from(data.len()).unwrap_or(u64::MAX);
    if actual < expected {
        return Err(NpyError::DataTooShort { expected, actual });
    }
    if actual > expected {
        return Err(NpyError::DataTooLong { expected, actual });
    }
    Ok(expected)
}

/// Splits a file into header text and data, checking magic, version and lengths.
/// Returns the header bytes, the data bytes and the major version.
fn split_file(bytes: &[u8]) -> Result<(&[u8], &[u8], u8), NpyError> {
    let available = |start: usize| u64::try_from(bytes.len().saturating_sub(start)).unwrap_or(0);
    if bytes.get(..MAGIC.len()) != Some(MAGIC.as_slice()) {
        // A short file that agrees with the magic so far is a truncated .npy file.
        if bytes.len() < MAGIC.len() && MAGIC.starts_with(bytes) {
            return Err(NpyError::Truncated {
                part: "magic string",
                needed: 6,
                available: available(0),
            });
        }
        return Err(NpyError::BadMagic);
    }
    let Some(&[major, minor]) = bytes.get(6..8) else {
        return Err(NpyError::Truncated {
            part: "format version",
            needed: 2,
            available: available(6),
        });
    };
    // Version 1.0 stores the header length as a little-endian u16, 2.0 and 3.0 as a u32.
    let length_field_len = match (major, minor) {
        (1, 0) => 2,
        (2 | 3, 0) => 4,
        _ => return Err(NpyError::UnsupportedVersion { major, minor }),
    };
    let header_start = 8 + length_field_len;
    let truncated_length_field = NpyError::Truncated {
        part: "header length field",
        needed: length_field_len as u64,
        available: available(8),
    };
    let header_len = match bytes.get(8..header_start) {
        Some(&[low, high]) => usize::from(u16::from_le_bytes([low, high])),
        Some(&[b0, b1, b2, b3]) => {
            let declared = u32::from_le_bytes([b0, b1, b2, b3]);
            // On a platform where it does not fit in usize it cannot fit in memory either.
            usize::try_from(declared).unwrap_or(usize::MAX)
        }
        _ => return Err(truncated_length_field),
    };
    let header_end = header_start.saturating_add(header_len);
    let header = bytes
        .get(header_start..header_end)
        .ok_or(NpyError::Truncated {
            part: "header",
            needed: header_len as u64,
            available: available(header_start),
        })?;
    let data = bytes.get(header_end..).unwrap_or_default();
    Ok((header, data, major))
}

/// Byte order of multi-byte items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ByteOrder {
    Little,
    Big,
}

/// How an item's bytes are interpreted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    Signed,
    Unsigned,
    /// IEEE 754 binary32 (`f4`), read only by [`read_npy_f32`].
    Float,
}

/// An accepted element type: kind, size in bytes (1, 2, 4 or 8) and byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Dtype {
    kind: Kind,
    size: u8,
    order: ByteOrder,
}

impl Dtype {
    fn size_u64(self) -> u64 {
        u64::from(self.size)
    }

    fn size_usize(self) -> usize {
        usize::from(self.size)
    }

    /// Decodes one item. `item` is exactly `self.size` bytes long (it comes from
    /// `chunks_exact` or a checked slice of that length).
    fn decode(self, item: &[u8]) -> i128 {
        let raw = match self.order {
            ByteOrder::Little => item
                .iter()
                .rev()
                .fold(0u64, |acc, &byte| (acc << 8) | u64::from(byte)),
            ByteOrder::Big => item
                .iter()
                .fold(0u64, |acc, &byte| (acc << 8) | u64::from(byte)),
        };
        match self.kind {
            // NumPy treats any non-zero byte as True.
            Kind::Bool => i128::from(raw != 0),
            Kind::Unsigned => i128::from(raw),
            // Never decoded as an integer: `read_npy` refuses float dtypes first.
            Kind::Float => 0,
            Kind::Signed => {
                // Move the item's sign bit to bit 63, then shift back arithmetically to
                // sign-extend it.
                let unused_bits = 64 - 8 * u32::from(self.size);
                i128::from((raw << unused_bits).cast_signed() >> unused_bits)
            }
        }
    }
}

/// Converts one decoded value to `i32`, naming its C-order position if it does not fit.
fn to_i32(value: i128, index: usize) -> Result<i32, NpyError> {
    i32::try_from(value).map_err(|_| NpyError::ValueOutOfRange {
        index: u64::try_from(index).unwrap_or(u64::MAX),
        value,
    })
}

/// Decodes data stored in C order; `data.len()` is already known to be count × item size.
fn decode_c_order(data: &[u8], dtype: Dtype) -> Result<Vec<i32>, NpyError> {
    data.chunks_exact(dtype.size_usize())
        .enumerate()
        .map(|(index, item)| to_i32(dtype.decode(item), index))
        .collect()
}

/// Decodes data stored in Fortran (column-major) order into C order.
///
/// Walks the C-order multi-index like an odometer (last axis fastest) while tracking the
/// matching Fortran-order element position, so each output value is read directly from its
/// place in the file and out-of-range errors report the C-order flat index.
/// `data.len()` is already known to equal `expected_bytes`.
fn decode_fortran_order(
    data: &[u8],
    dtype: Dtype,
    shape: &[u32],
    expected_bytes: u64,
) -> Result<Vec<i32>, NpyError> {
    let item_size = dtype.size_usize();
    let count = data.len() / item_size;
    if count == 0 {
        return Ok(Vec::new());
    }
    let dims: Vec<usize> = shape.iter().map(|&dim| dim as usize).collect();
    // In Fortran order axis 0 is contiguous: stride[0] = 1, stride[a] = stride[a-1] * dim[a-1].
    // Every partial product is at most `count`, which fits because the data is in memory.
    let overflow = || NpyError::SizeOverflow {
        shape: shape.to_vec(),
    };
    let mut strides = Vec::with_capacity(dims.len());
    let mut stride = 1usize;
    for &dim in &dims {
        strides.push(stride);
        stride = stride.checked_mul(dim).ok_or_else(overflow)?;
    }

    let mut values = Vec::with_capacity(count);
    let mut multi_index = vec![0usize; dims.len()];
    let mut position = 0usize;
    for index in 0..count {
        let start = position.checked_mul(item_size).ok_or_else(overflow)?;
        let end = start.checked_add(item_size).ok_or_else(overflow)?;
        // Cannot miss: the odometer keeps `position` below `count`. Report it as short data
        // rather than panicking should that reasoning ever be wrong.
        let item = data.get(start..end).ok_or(NpyError::DataTooShort {
            expected: expected_bytes,
            actual: u64::try_from(data.len()).unwrap_or(u64::MAX),
        })?;
        values.push(to_i32(dtype.decode(item), index)?);

        // Advance the multi-index: bump the last axis, carrying into earlier axes on wrap.
        for ((digit, &dim), &axis_stride) in multi_index.iter_mut().zip(&dims).zip(&strides).rev() {
            *digit += 1;
            position = position.saturating_add(axis_stride);
            if *digit < dim {
                break;
            }
            *digit = 0;
            position = position.saturating_sub(axis_stride.saturating_mul(dim));
        }
    }
    Ok(values)
}

mod header;
use header::{Header, parse_header};

#[cfg(test)]
mod tests;
