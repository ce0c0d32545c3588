//! The CVM `params` binary (cvm-compat §2): a list of named int8 or int32 arrays.
//!
//! Little endian throughout. Every read is bounds-checked and every count is checked against
//! the bytes that remain before anything is allocated, so a crafted file cannot make the reader
//! allocate more than the file's own size.

use cvm_engine::fail;

use super::{Class, Rejection};
use crate::error::quote;

/// Magic of the array list.
pub const LIST_MAGIC: u64 = 0xF7E5_8D4F_0504_9CB7;
/// Magic of one array.
pub const ARRAY_MAGIC: u64 = 0xDD5E_40F0_96B4_A13F;

/// Values of one array, as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArrayData {
    /// 8-bit signed values.
    I8(Vec<i8>),
    /// 32-bit signed values.
    I32(Vec<i32>),
}

impl ArrayData {
    /// The values widened to i32.
    pub fn values(&self) -> Vec<i32> {
        match self {
            ArrayData::I8(values) => values.iter().map(|&v| i32::from(v)).collect(),
            ArrayData::I32(values) => values.clone(),
        }
    }
}

/// One named array of the params file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Array {
    /// Parameter name.
    pub name: String,
    /// Shape as stored.
    pub shape: Vec<i64>,
    /// Values.
    pub data: ArrayData,
}

struct Reader<'a> {
    bytes: &'a [u8],
    offset: usize,
    /// The class of a short read: the list's header is read under `VERIFY`, an array's under
    /// `CHECK`.
    class: Class,
}

impl Reader<'_> {
    fn take(&mut self, n: usize, what: &str) -> Result<&[u8], Rejection> {
        let end = self
            .offset
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| Rejection {
                error: fail!(
                    MalformedModel,
                    "params: truncated reading {what} at byte {} (needs {n} bytes, {} remain)",
                    self.offset,
                    self.bytes.len() - self.offset
                ),
                class: self.class,
            })?;
        let slice = &self.bytes[self.offset..end];
        self.offset = end;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], Rejection> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    fn u64(&mut self, what: &str) -> Result<u64, Rejection> {
        self.array::<8>(what).map(u64::from_le_bytes)
    }

    fn i64(&mut self, what: &str) -> Result<i64, Rejection> {
        self.array::<8>(what).map(i64::from_le_bytes)
    }

    fn i32(&mut self, what: &str) -> Result<i32, Rejection> {
        self.array::<4>(what).map(i32::from_le_bytes)
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.offset
    }

    /// A count of items of at least `item_bytes` bytes each, checked against what remains.
    fn count(&mut self, what: &str, item_bytes: usize) -> Result<usize, Rejection> {
        let count = self.u64(what)?;
        let fits = usize::try_from(count).ok().filter(|&n| {
            n.checked_mul(item_bytes)
                .is_some_and(|total| total <= self.remaining())
        });
        fits.ok_or_else(|| {
            fail!(
                MalformedModel,
                "params: {what} = {count} is more than the {} remaining bytes can hold",
                self.remaining()
            )
            .into()
        })
    }
}

/// Parses a params file, with the class of the deployed runtime's return code for each
/// rejection (`param_dict.cc` reads the list under `VERIFY`, `ndarray.h` each array under
/// `CHECK`; the data type's width and lanes are `CHECK`ed when the array is allocated, its code
/// and width `VERIFY`ed when it is set).
///
/// # Errors
/// `MalformedModel` naming the byte offset, array or parameter that is wrong: bad magic,
/// truncation, a count of arrays different from the count of names,
/// an unsupported device or data type, a data size that does not match the shape, an array
/// with no data. Bytes after the last array are ignored, as deployed.
pub fn parse(bytes: &[u8]) -> Result<Vec<Array>, Rejection> {
    let mut reader = Reader {
        bytes,
        offset: 0,
        class: Class::Logic,
    };
    let magic = reader.u64("the list magic")?;
    if magic != LIST_MAGIC {
        return Err(fail!(
            MalformedModel,
            "params: list magic is {magic:#018x}, expected {LIST_MAGIC:#018x}"
        )
        .into());
    }
    reader.u64("the reserved word")?;
    let n_names = reader.count("the number of names", 8)?;
    let mut names = Vec::with_capacity(n_names);
    for index in 0..n_names {
        let len = reader.count(&format!("the length of name {index}"), 1)?;
        let raw = reader.take(len, &format!("name {index}"))?;
        // Names are bytes there; they become text one to one, as the graph's strings do.
        names.push(super::json::from_bytes(raw));
    }
    let n_arrays = reader.u64("the number of arrays")?;
    if n_arrays != n_names as u64 {
        return Err(fail!(
            MalformedModel,
            "params: {n_arrays} arrays for {n_names} names"
        )
        .into());
    }
    reader.class = Class::Runtime;
    let mut arrays = Vec::with_capacity(n_names);
    let count = names.len();
    for (index, name) in names.into_iter().enumerate() {
        let what = |field: &str| format!("{field} of parameter {}", quote(&name));
        let runtime = |message: String| {
            Rejection::runtime(fail!(
                MalformedModel,
                "params: parameter {}: {message}",
                quote(&name)
            ))
        };
        let logic = |message: String| -> Rejection {
            fail!(
                MalformedModel,
                "params: parameter {}: {message}",
                quote(&name)
            )
            .into()
        };
        let magic = reader.u64(&what("the array magic"))?;
        if magic != ARRAY_MAGIC {
            return Err(runtime(format!(
                "array magic is {magic:#018x}, expected {ARRAY_MAGIC:#018x}"
            )));
        }
        reader.u64(&what("the reserved word"))?;
        let device_type = reader.i32(&what("the device type"))?;
        let _device_id = reader.i32(&what("the device id"))?;
        let ndim = reader.i32(&what("ndim"))?;
        let [type_code, bits] = reader.array::<2>(&what("the data type"))?;
        let lanes = u16::from_le_bytes(reader.array::<2>(&what("the lane count"))?);
        // A negative ndim sizes a vector past its maximum (`std::length_error`, class 1). Any
        // other count of dimensions is read (more than 6 can match no graph shape: the shape
        // `VERIFY` when the array is set).
        let ndim = usize::try_from(ndim).map_err(|_| logic(format!("ndim {ndim} is negative")))?;
        if ndim.saturating_mul(8) > reader.remaining() {
            return Err(runtime(format!(
                "{ndim} dimensions are more than the {} remaining bytes hold",
                reader.remaining()
            )));
        }
        let mut shape = Vec::with_capacity(ndim);
        for _ in 0..ndim {
            shape.push(reader.i64(&what("a dimension"))?);
        }
        // The array is allocated: its data type must be one a tensor can have (uint1 is
        // allowed as a flag for booleans), then its device must hold it: only the CPU (1)
        // does; the FORMAL device (3) is refused by a `VERIFY` when the array is set; any other
        // is a `LOG(FATAL)` or `CHECK`.
        let dtype = format!("data type (code {type_code}, {bits} bits, {lanes} lanes)");
        let uint1 = type_code == 1 && bits == 1;
        if lanes == 0 || (bits % 8 != 0 && !uint1) || !bits.is_power_of_two() {
            return Err(runtime(format!("{dtype} cannot be allocated")));
        }
        match device_type {
            1 => {}
            3 => return Err(logic(format!("device type {device_type} is not 1 (CPU)"))),
            // Looked up in a table of 32 device APIs (and 128 on, the remote one): others are
            // read out of bounds there.
            ..=-1 | 32..=127 => {
                return Err(logic(format!(
                    "device type {device_type}: the deployed runtime reads past its table of devices (undefined behaviour)"
                )));
            }
            _ => return Err(runtime(format!("device type {device_type} is not 1 (CPU)"))),
        }
        // The data size is compared with the element count times the element width, both
        // computed in 64 bits as deployed (a product that wraps is compared wrapped).
        let elements = shape.iter().fold(1i64, |n, &d| n.wrapping_mul(d));
        let byte_size = reader.i64(&what("the data size"))?;
        let element_bytes = (i64::from(bits) + 7) / 8;
        if byte_size != elements.wrapping_mul(element_bytes) {
            return Err(runtime(format!(
                "data size {byte_size} does not match shape {shape:?} of {bits}-bit values"
            )));
        }
        let byte_size = usize::try_from(byte_size).unwrap_or(usize::MAX);
        // The deployed reader checks that it read some bytes, not all of them: an array with no
        // data fails its `CHECK`, a short last array is left partly uninitialised (undefined).
        if byte_size == 0 {
            return Err(runtime("holds no data".into()));
        }
        // A short array before the last leaves the next array's header unreadable (`CHECK`).
        if reader.remaining() > 0 && reader.remaining() < byte_size && index + 1 == count {
            return Err(logic(format!(
                "truncated data ({byte_size} bytes, {} remain): the deployed runtime leaves the rest uninitialised (undefined behaviour)",
                reader.remaining()
            )));
        }
        let raw = reader.take(byte_size, &what("the data"))?;
        if type_code != 0 || !(bits == 8 || bits == 32) || lanes != 1 {
            return Err(logic(format!("{dtype} is not int8 or int32")));
        }
        let data = if bits == 8 {
            // 8-bit arrays are sign-extended (cvm-compat §2).
            ArrayData::I8(raw.iter().map(|&b| b as i8).collect())
        } else {
            ArrayData::I32(
                raw.chunks_exact(4)
                    .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            )
        };
        arrays.push(Array { name, shape, data });
    }
    Ok(arrays)
}

/// Writes a params file (the inverse of [`parse`]), for tests and tools.
pub fn write(arrays: &[Array]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&LIST_MAGIC.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(&(arrays.len() as u64).to_le_bytes());
    for array in arrays {
        let name = super::json::to_bytes(&array.name);
        out.extend_from_slice(&(name.len() as u64).to_le_bytes());
        out.extend_from_slice(&name);
    }
    out.extend_from_slice(&(arrays.len() as u64).to_le_bytes());
    for array in arrays {
        out.extend_from_slice(&ARRAY_MAGIC.to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes());
        out.extend_from_slice(&1i32.to_le_bytes());
        out.extend_from_slice(&0i32.to_le_bytes());
        out.extend_from_slice(&(array.shape.len() as i32).to_le_bytes());
        let bits: u8 = match array.data {
            ArrayData::I8(_) => 8,
            ArrayData::I32(_) => 32,
        };
        out.extend_from_slice(&[0, bits]);
        out.extend_from_slice(&1u16.to_le_bytes());
        for &dim in &array.shape {
            out.extend_from_slice(&dim.to_le_bytes());
        }
        match &array.data {
            ArrayData::I8(values) => {
                out.extend_from_slice(&(values.len() as i64).to_le_bytes());
                out.extend(values.iter().map(|&v| v as u8));
            }
            ArrayData::I32(values) => {
                out.extend_from_slice(&(4 * values.len() as i64).to_le_bytes());
                for value in values {
                    out.extend_from_slice(&value.to_le_bytes());
                }
            }
        }
    }
    out
}
