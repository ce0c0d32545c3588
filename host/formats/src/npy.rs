//! Reading and writing NumPy `.npy` files of integer tensors.
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
    let header = parse_header(header_bytes, version_major <= 2)?;

    let element_count = header
        .shape
        .iter()
        .try_fold(1u64, |count, &dim| count.checked_mul(u64::from(dim)))
        .ok_or_else(|| NpyError::SizeOverflow {
            shape: header.shape.clone(),
        })?;
    let expected = element_count
        .checked_mul(header.dtype.size_u64())
        .ok_or_else(|| NpyError::SizeOverflow {
            shape: header.shape.clone(),
        })?;
    let actual = u64::try_from(data.len()).unwrap_or(u64::MAX);
    // Checked before any allocation, so the declared shape can never make us allocate more
    // than the file itself holds.
    if actual < expected {
        return Err(NpyError::DataTooShort { expected, actual });
    }
    if actual > expected {
        return Err(NpyError::DataTooLong { expected, actual });
    }

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
    writer.write_all(&npy_header(shape))?;
    let mut block = [0u8; 4 * 1024];
    for values in data.chunks(1024) {
        for (bytes, value) in block.as_chunks_mut::<4>().0.iter_mut().zip(values) {
            *bytes = value.to_le_bytes();
        }
        writer.write_all(&block[..4 * values.len()])?;
    }
    Ok(())
}

/// The preamble and padded header of an int32 C-order `.npy` file of `shape`.
fn npy_header(shape: &[u32]) -> Vec<u8> {
    let mut header = String::from("{'descr': '<i4', 'fortran_order': False, 'shape': (");
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

/// The validated contents of a header dict.
#[derive(Debug)]
struct Header {
    dtype: Dtype,
    fortran_order: bool,
    shape: Vec<u32>,
}

/// A Python literal as it may appear in a `.npy` header.
#[derive(Debug)]
enum Literal {
    Str(String),
    Bool(bool),
    /// An integer literal: its sign and decimal digits (without any `L` suffix).
    Int {
        negative: bool,
        digits: String,
    },
    Tuple(Vec<Literal>),
    /// A list; only ever a structured dtype's field list, which is rejected whatever it holds,
    /// so its items are checked for syntax and then dropped.
    List,
}

/// A literal plus the header text it was parsed from, for error messages.
struct SpannedLiteral {
    literal: Literal,
    text: String,
}

/// Recursive-descent parser over the header bytes (already known to be ASCII).
struct HeaderParser<'a> {
    text: &'a [u8],
    pos: usize,
    allow_long_suffix: bool,
}

impl HeaderParser<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    fn error(&self, reason: impl Into<String>) -> NpyError {
        NpyError::HeaderSyntax {
            offset: self.pos,
            reason: reason.into(),
        }
    }

    /// Describes the next character for "expected X, found Y" messages.
    fn found(&self) -> String {
        match self.peek() {
            Some(byte) => format!("found {:?}", char::from(byte)),
            None => "found the end of the header".to_owned(),
        }
    }

    fn skip_whitespace(&mut self) {
        // Python's whitespace between tokens: space, tab, newline, carriage return, form feed.
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r' | b'\x0c')) {
            self.pos += 1;
        }
    }

    fn expect_byte(&mut self, byte: u8) -> Result<(), NpyError> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(format!("expected {:?}, {}", char::from(byte), self.found())))
        }
    }

    /// Parses the whole header: one dict literal, optionally surrounded by whitespace.
    fn parse_dict(&mut self) -> Result<Vec<(String, SpannedLiteral)>, NpyError> {
        self.skip_whitespace();
        self.expect_byte(b'{')?;
        let mut entries = Vec::new();
        loop {
            self.skip_whitespace();
            if self.peek() == Some(b'}') {
                self.pos += 1;
                break;
            }
            if self.peek() != Some(b'\'') && self.peek() != Some(b'"') {
                return Err(self.error(format!("expected a quoted key or '}}', {}", self.found())));
            }
            let key = self.parse_string()?;
            self.skip_whitespace();
            self.expect_byte(b':')?;
            let value = self.parse_spanned(0)?;
            entries.push((key, value));
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                _ => return Err(self.error(format!("expected ',' or '}}', {}", self.found()))),
            }
        }
        self.skip_whitespace();
        if self.pos < self.text.len() {
            return Err(self.error(format!("unexpected text after the dict, {}", self.found())));
        }
        Ok(entries)
    }

    /// Parses one literal and records the text it spans.
    fn parse_spanned(&mut self, depth: usize) -> Result<SpannedLiteral, NpyError> {
        self.skip_whitespace();
        let start = self.pos;
        let literal = self.parse_literal(depth)?;
        let text = excerpt(self.text.get(start..self.pos).unwrap_or_default());
        Ok(SpannedLiteral { literal, text })
    }

    fn parse_literal(&mut self, depth: usize) -> Result<Literal, NpyError> {
        self.skip_whitespace();
        match self.peek() {
            Some(b'\'' | b'"') => Ok(Literal::Str(self.parse_string()?)),
            Some(b'(') => self.parse_parenthesized(depth),
            Some(b'[') => {
                self.pos += 1;
                self.parse_sequence(b']', depth)?;
                Ok(Literal::List)
            }
            Some(b'-') => {
                self.pos += 1;
                self.skip_whitespace();
                let digits = self.parse_digits()?;
                Ok(Literal::Int {
                    negative: true,
                    digits,
                })
            }
            Some(b'0'..=b'9') => Ok(Literal::Int {
                negative: false,
                digits: self.parse_digits()?,
            }),
            Some(byte) if byte.is_ascii_alphabetic() || byte == b'_' => {
                let name = self.parse_name();
                match name.as_str() {
                    "True" => Ok(Literal::Bool(true)),
                    "False" => Ok(Literal::Bool(false)),
                    _ => Err(NpyError::HeaderSyntax {
                        offset: self.pos.saturating_sub(name.len()),
                        reason: format!("unexpected name '{}'", excerpt(name.as_bytes())),
                    }),
                }
            }
            _ => Err(self.error(format!("expected a value, {}", self.found()))),
        }
    }

    /// `(` has been seen. Like Python, `(x)` is just `x`; a tuple needs a comma or no items.
    fn parse_parenthesized(&mut self, depth: usize) -> Result<Literal, NpyError> {
        self.pos += 1;
        let (mut items, saw_comma) = self.parse_sequence(b')', depth)?;
        if items.len() == 1
            && !saw_comma
            && let Some(inner) = items.pop()
        {
            return Ok(inner);
        }
        Ok(Literal::Tuple(items))
    }

    /// Parses comma-separated literals up to `close` (the opening bracket is consumed).
    /// Returns the items and whether any comma was present.
    fn parse_sequence(
        &mut self,
        close: u8,
        depth: usize,
    ) -> Result<(Vec<Literal>, bool), NpyError> {
        if depth >= MAX_NESTING {
            return Err(self.error(format!("tuples and lists nest deeper than {MAX_NESTING}")));
        }
        let mut items = Vec::new();
        let mut saw_comma = false;
        loop {
            self.skip_whitespace();
            if self.peek() == Some(close) {
                self.pos += 1;
                return Ok((items, saw_comma));
            }
            items.push(self.parse_literal(depth + 1)?);
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    saw_comma = true;
                }
                Some(byte) if byte == close => {
                    self.pos += 1;
                    return Ok((items, saw_comma));
                }
                _ => {
                    return Err(self.error(format!(
                        "expected ',' or {:?}, {}",
                        char::from(close),
                        self.found()
                    )));
                }
            }
        }
    }

    /// Parses a single- or double-quoted string without escape sequences (NumPy's dtype
    /// strings and keys never need them).
    fn parse_string(&mut self) -> Result<String, NpyError> {
        let quote = self.peek().unwrap_or(b'\'');
        self.pos += 1;
        let start = self.pos;
        loop {
            match self.peek() {
                Some(byte) if byte == quote => break,
                Some(b'\\') => {
                    return Err(self.error("escape sequences in strings are not supported"));
                }
                Some(b'\n' | b'\r') | None => {
                    return Err(NpyError::HeaderSyntax {
                        offset: start.saturating_sub(1),
                        reason: "unterminated string".to_owned(),
                    });
                }
                Some(_) => self.pos += 1,
            }
        }
        let content = self.text.get(start..self.pos).unwrap_or_default();
        self.pos += 1;
        // The header was checked to be ASCII, so this conversion is exact.
        Ok(String::from_utf8_lossy(content).into_owned())
    }

    /// Parses a decimal integer literal, with the Python 2 `L` suffix where allowed.
    fn parse_digits(&mut self) -> Result<String, NpyError> {
        let start = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        let digits = self.text.get(start..self.pos).unwrap_or_default();
        if digits.is_empty() {
            return Err(self.error(format!("expected digits, {}", self.found())));
        }
        if digits.len() > 1 && digits.first() == Some(&b'0') {
            return Err(NpyError::HeaderSyntax {
                offset: start,
                reason: "integer literals may not have leading zeros".to_owned(),
            });
        }
        if self.allow_long_suffix && matches!(self.peek(), Some(b'L' | b'l')) {
            self.pos += 1;
        }
        // Reject `0x10`, `1_000`, `5j` and the like rather than misreading them.
        if matches!(self.peek(), Some(byte) if byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'.')
        {
            return Err(self.error(format!("malformed integer literal, {}", self.found())));
        }
        Ok(String::from_utf8_lossy(digits).into_owned())
    }

    fn parse_name(&mut self) -> String {
        let start = self.pos;
        while matches!(self.peek(), Some(byte) if byte.is_ascii_alphanumeric() || byte == b'_') {
            self.pos += 1;
        }
        String::from_utf8_lossy(self.text.get(start..self.pos).unwrap_or_default()).into_owned()
    }
}

/// Quotes header text in an error message, shortened so a huge header cannot bloat it.
fn excerpt(text: &[u8]) -> String {
    match text.get(..MAX_EXCERPT) {
        Some(prefix) if text.len() > MAX_EXCERPT => {
            format!("{}...", String::from_utf8_lossy(prefix))
        }
        _ => String::from_utf8_lossy(text).into_owned(),
    }
}

/// Parses and validates the header dict.
fn parse_header(text: &[u8], allow_long_suffix: bool) -> Result<Header, NpyError> {
    let mut parser = HeaderParser {
        text,
        pos: 0,
        allow_long_suffix,
    };
    let entries = parser.parse_dict()?;

    let mut descr = None;
    let mut fortran_order = None;
    let mut shape = None;
    for (key, value) in entries {
        let slot = match key.as_str() {
            "descr" => &mut descr,
            "fortran_order" => &mut fortran_order,
            "shape" => &mut shape,
            _ => return Err(NpyError::UnknownKey(excerpt(key.as_bytes()))),
        };
        if slot.is_some() {
            return Err(NpyError::DuplicateKey(key));
        }
        *slot = Some(value);
    }
    let descr = descr.ok_or(NpyError::MissingKey("descr"))?;
    let fortran_order = fortran_order.ok_or(NpyError::MissingKey("fortran_order"))?;
    let shape = shape.ok_or(NpyError::MissingKey("shape"))?;

    let dtype = match descr.literal {
        Literal::Str(descr) => parse_descr(&descr)?,
        // A list is a structured dtype; a tuple is a sub-array dtype.
        Literal::List | Literal::Tuple(_) => return Err(NpyError::StructuredDtype(descr.text)),
        _ => {
            return Err(NpyError::InvalidValue {
                key: "descr",
                reason: format!("expected a dtype string, found {}", descr.text),
            });
        }
    };
    let Literal::Bool(fortran_order) = fortran_order.literal else {
        return Err(NpyError::InvalidValue {
            key: "fortran_order",
            reason: format!("expected True or False, found {}", fortran_order.text),
        });
    };
    let shape = parse_shape(shape)?;
    Ok(Header {
        dtype,
        fortran_order,
        shape,
    })
}

/// Validates the `shape` value: a tuple of non-negative integers, each fitting in `u32`.
fn parse_shape(shape: SpannedLiteral) -> Result<Vec<u32>, NpyError> {
    let not_a_tuple = |text: &str| NpyError::InvalidValue {
        key: "shape",
        reason: format!("expected a tuple of non-negative integers, found {text}"),
    };
    let Literal::Tuple(items) = shape.literal else {
        return Err(not_a_tuple(&shape.text));
    };
    let mut dims = Vec::with_capacity(items.len());
    for (axis, item) in items.into_iter().enumerate() {
        let Literal::Int { negative, digits } = item else {
            return Err(not_a_tuple(&shape.text));
        };
        let value = digits.bytes().try_fold(0u64, |acc, digit| {
            acc.checked_mul(10)?
                .checked_add(u64::from(digit.wrapping_sub(b'0')))
        });
        let is_zero = value == Some(0);
        if negative && !is_zero {
            return Err(NpyError::InvalidValue {
                key: "shape",
                reason: format!(
                    "dimension -{} on axis {axis} is negative",
                    excerpt(digits.as_bytes())
                ),
            });
        }
        let dim = value
            .and_then(|value| u32::try_from(value).ok())
            .ok_or_else(|| NpyError::DimensionTooLarge {
                axis,
                dimension: excerpt(digits.as_bytes()),
            })?;
        dims.push(dim);
    }
    Ok(dims)
}

/// Interprets a NumPy descr string such as `<i4`, `>u8` or `|b1`.
fn parse_descr(descr: &str) -> Result<Dtype, NpyError> {
    let bytes = descr.as_bytes();
    let unsupported = |reason| NpyError::UnsupportedDtype {
        descr: excerpt(bytes),
        reason,
    };
    let (order_mark, kind_char, size_text) = match bytes {
        [order @ (b'<' | b'>' | b'|' | b'='), kind, size @ ..] => (*order, *kind, size),
        [b'b' | b'i' | b'u', ..] => {
            return Err(unsupported(
                "the byte-order character (<, >, = or |) is missing",
            ));
        }
        _ => return Err(NpyError::NotIntegerDtype(excerpt(bytes))),
    };
    let kind = match kind_char {
        b'b' => Kind::Bool,
        b'i' => Kind::Signed,
        b'u' => Kind::Unsigned,
        _ => return Err(NpyError::NotIntegerDtype(excerpt(bytes))),
    };
    let size = match size_text {
        b"1" => 1u8,
        b"2" => 2,
        b"4" => 4,
        b"8" => 8,
        _ => return Err(unsupported("integer items must be 1, 2, 4 or 8 bytes")),
    };
    if kind == Kind::Bool && size != 1 {
        return Err(unsupported("bool items must be 1 byte"));
    }
    let order = match order_mark {
        b'>' => ByteOrder::Big,
        // `|` means "byte order not applicable", which NumPy uses only for 1-byte items.
        b'|' if size != 1 => {
            return Err(unsupported(
                "'|' (no byte order) is only valid for 1-byte items",
            ));
        }
        // `=` is native order; the engine's hosts are little-endian, as is every file we write.
        _ => ByteOrder::Little,
    };
    Ok(Dtype { kind, size, order })
}

#[cfg(test)]
mod tests;
