//! Operands packed for the vector kernels: rows of `i16`, each zero-padded to a multiple of
//! sixteen lanes ([`PackedRows`]), in the order of the kernel that reads them ([`PackOrder`]).
//! The dot products of `gemm.rs` read them whole vectors at a time, with no tail.
//!
//! Narrowing to `i16` is exact for the values packed: cvm-compat §3 bounds the data and weights of
//! dense and conv2d to 8 bits. [`narrow16`] saturates, so even a value outside that bound could
//! never wrap.

use alloc::vec;
use alloc::vec::Vec;

use super::shape::ConvShape;
use super::simd::{LANES, Native, ROW_ALIGN, Simd};

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

/// `target[i] = narrow16(source[i])` for the values both hold, eight at a time with the
/// saturating [`Simd::narrow32`] (the same values as [`narrow16`]).
#[inline(always)]
fn narrow_row<S: Simd>(target: &mut [i16], source: &[i32]) {
    let (octets, _) = source.as_chunks::<LANES>();
    let (slots, _) = target.as_chunks_mut::<LANES>();
    for (slot, octet) in slots.iter_mut().zip(octets) {
        if let [low, high] = octet.as_chunks::<4>().0 {
            S::store16(slot, S::narrow32(S::load32(low), S::load32(high)));
        }
    }
    let done = octets.len().min(slots.len()) * LANES;
    for (slot, &value) in target.iter_mut().zip(source).skip(done) {
        *slot = narrow16(value);
    }
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

/// Rows of `i16`, each zero-padded to [`padded_depth`] lanes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackedRows {
    values: Vec<i16>,
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
                narrow_row::<Native>(packed, row);
            }
        }
        PackedRows {
            values,
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
            rows,
            stride,
        }
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
        (self.values.len() as u64).saturating_mul(2)
    }
}
