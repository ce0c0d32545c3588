//! Operands packed for the vector kernels: rows of `i16`, each zero-padded to a multiple of
//! sixteen lanes ([`PackedRows`]), in the order of the kernel that reads them ([`PackOrder`]).
//! The dot products of `gemm.rs` read them whole vectors at a time, with no tail.
//!
//! Narrowing to `i16` is exact for the values packed: cvm-compat §3 bounds the data and weights of
//! dense and conv2d to 8 bits. [`narrow16`] saturates, so even a value outside that bound could
//! never wrap.

use alloc::vec;
use alloc::vec::Vec;

use super::dot8::{narrow_i8, narrow_u7, padded_bytes};
use super::shape::ConvShape;
use super::simd::ROW_ALIGN;

/// The padded row length for `depth` values.
pub const fn padded_depth(depth: usize) -> usize {
    depth.div_ceil(ROW_ALIGN) * ROW_ALIGN
}

/// Converts a value known to lie within 8-bit precision (|v| ≤ 127) to `i16`. Saturating, so
/// even a value outside the bound could never wrap.
#[inline(always)]
pub fn narrow16(value: i32) -> i16 {
    value.clamp(i32::from(i16::MIN), i32::from(i16::MAX)) as i16
}

/// The order of a packed row's values relative to its source row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PackOrder {
    /// As in the source.
    Source,
    /// A source row of `channels` × `taps` values (channel-major, as conv2d's OIHW weights)
    /// packed tap-major: value (c, t) goes to position t · channels + c.
    ChannelsLast {
        /// Channels per row.
        channels: usize,
        /// Taps per channel.
        taps: usize,
    },
    /// The weights of the depthwise kernel's tap entries for a depthwise shape
    /// (`conv::tap_plane::pack_depthwise`): a row per output channel, of sixteen values per
    /// entry.
    Depthwise(ConvShape),
}

/// Rows of `i16`, each zero-padded to [`padded_depth`] lanes; or, packed by
/// [`PackedRows::pack_bytes`] for `dot8.rs`, rows of `i8` zero-padded to [`padded_bytes`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackedRows {
    values: Vec<i16>,
    bytes: Vec<i8>,
    rows: usize,
    stride: usize,
}

impl PackedRows {
    /// Packs `rows` rows of `depth` values (row-major in `source`, values within 8 bits).
    pub fn pack(source: &[i32], rows: usize, depth: usize) -> PackedRows {
        let stride = padded_depth(depth);
        let mut values = vec![0; rows * stride];
        if depth > 0 {
            for (packed, row) in values
                .chunks_exact_mut(stride)
                .zip(source.chunks_exact(depth))
            {
                for (slot, &value) in packed.iter_mut().zip(row) {
                    *slot = narrow16(value);
                }
            }
        }
        PackedRows {
            values,
            bytes: Vec::new(),
            rows,
            stride,
        }
    }

    /// Packs `rows` rows of `depth` = `channels` · `taps` values in the order
    /// [`PackOrder::ChannelsLast`] describes (rows of zeros if `depth` is not that product).
    pub fn pack_channels_last(
        source: &[i32],
        rows: usize,
        depth: usize,
        channels: usize,
        taps: usize,
    ) -> PackedRows {
        let stride = padded_depth(depth);
        let mut values = vec![0; rows * stride];
        if depth > 0 && channels * taps == depth {
            for (packed, row) in values
                .chunks_exact_mut(stride)
                .zip(source.chunks_exact(depth))
            {
                for (c, channel) in row.chunks_exact(taps).enumerate() {
                    for (t, &value) in channel.iter().enumerate() {
                        packed[t * channels + c] = narrow16(value);
                    }
                }
            }
        }
        PackedRows {
            values,
            bytes: Vec::new(),
            rows,
            stride,
        }
    }

    /// Packs `rows` rows of `depth` weights (row-major in `source`, within 8 bits) as `i8`
    /// rows of [`padded_bytes`]`(depth)`, in `order` (`Source`, or `ChannelsLast` describing
    /// `depth`; rows of zeros otherwise): the weights of `dot8.rs`.
    pub fn pack_bytes(source: &[i32], rows: usize, depth: usize, order: PackOrder) -> PackedRows {
        let stride = padded_bytes(depth);
        let mut bytes = vec![0; rows * stride];
        let (channels, taps) = match order {
            PackOrder::ChannelsLast { channels, taps } => (channels, taps),
            _ => (depth, 1),
        };
        if depth > 0 && channels * taps == depth && !matches!(order, PackOrder::Depthwise(_)) {
            for (packed, row) in bytes
                .chunks_exact_mut(stride)
                .zip(source.chunks_exact(depth))
            {
                for (c, channel) in row.chunks_exact(taps).enumerate() {
                    for (t, &value) in channel.iter().enumerate() {
                        packed[t * channels + c] = narrow_i8(value);
                    }
                }
            }
        }
        PackedRows {
            values: Vec::new(),
            bytes,
            rows,
            stride,
        }
    }

    /// Packs `rows` rows of `depth` activations proven within [0, 127] (row-major in
    /// `source`) as `i8` rows of [`padded_bytes`]`(depth)`, clamped to [0, 127]
    /// (`dot8::narrow_u7`): the data operand of `dot8.rs`.
    pub fn pack_u7(source: &[i32], rows: usize, depth: usize) -> PackedRows {
        let stride = padded_bytes(depth);
        let mut bytes = vec![0; rows * stride];
        if depth > 0 {
            for (packed, row) in bytes
                .chunks_exact_mut(stride)
                .zip(source.chunks_exact(depth))
            {
                for (slot, &value) in packed.iter_mut().zip(row) {
                    *slot = narrow_u7(value);
                }
            }
        }
        PackedRows {
            values: Vec::new(),
            bytes,
            rows,
            stride,
        }
    }

    /// Whether the rows are of `i8` ([`PackedRows::pack_bytes`]).,
    pub fn is_bytes(&self) -> bool {
        self.values.is_empty() && !self.bytes.is_empty()
    }

    /// The packed `i8` values, row-major (empty unless packed by [`PackedRows::pack_bytes`]).,
    pub fn byte_values(&self) -> &[i8] {
        &self.bytes
    }

    /// Bytes a packing of `rows` × `depth` values occupies.
    pub const fn bytes(rows: u64, depth: u64) -> u64 {
        rows.saturating_mul(padded_depth(depth as usize) as u64)
            .saturating_mul(2)
    }

    /// Rows of `stride` values each (a multiple of [`ROW_ALIGN`]), row-major in `values`: a
    /// kernel's own packing.
    pub(crate) fn from_rows(values: Vec<i16>, rows: usize, stride: usize) -> PackedRows {
        PackedRows {
            values,
            bytes: Vec::new(),
            rows,
            stride,
        }
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Padded row length.
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// The packed values, row-major.
    pub fn values(&self) -> &[i16] {
        &self.values
    }

    /// Bytes held.
    pub fn held_bytes(&self) -> u64 {
        (self.values.len() as u64)
            .saturating_mul(2)
            .saturating_add(self.bytes.len() as u64)
    }
}
