//! `conv2d`: which kernel runs a shape, the order its weights are packed in and the working
//! memory it needs, and the dispatch to it. One file per kernel, tried in this order:
//!
//! - `depthwise_3x3_s2.rs`: depthwise 3 × 3 at stride 2 with padding 1, straight from the input;
//! - `depthwise.rs`: other depthwise shapes (one input channel per group), over a tap plane of
//!   the input channel (`tap_plane.rs`) when it stays within twice the channel;
//! - `pointwise.rs`: 1 × 1 kernels at stride 1 without padding, pixels in the vector lanes;
//! - `im2col.rs`: every other shape, as blocks of patches times packed weights (`gemm.rs`).
//!
//! Each writes the sums `Σ x·w` into an NCHW output and adds the bias with checked arithmetic:
//! the pointwise and depthwise kernels as they store their sums (with plain additions when no
//! sum plus the bias can overflow) or afterwards, the im2col kernel per output plane afterwards.
//! Exactness rests on the bounds of cvm-compat §3 for conv2d: data and weights within 8 bits and an
//! output precision of at most 32 bits, so 32-bit lanes hold every partial sum exactly.

mod depthwise;
mod depthwise_3x3_s2;
pub mod im2col;
mod output;
mod pointwise;
pub mod tap_plane;

pub use im2col::BLOCK;
pub use tap_plane::{Columns, EntryTaps, TapPlane, depthwise_pairing};

use crate::kernels::elementwise::add_checked;
use crate::kernels::pack::{PackOrder, PackedRows};
use crate::kernels::padded::copy_fits;
use crate::kernels::shape::ConvShape;
use crate::kernels::simd::Simd;

/// The conv2d kernels ([`ConvShape::uses_depthwise`] and the others).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kernel {
    Depthwise,
    Depthwise3x3S2,
    Pointwise,
    ChannelsLast,
    CheckedGather,
}

impl ConvShape {
    /// Whether the depthwise kernel applies: one input channel per group, and padding and
    /// strides small enough that its tap plane (in `i16`, with the values it is built from)
    /// stays within twice the channel's size (plus a constant). Other depthwise shapes use the
    /// im2col kernel.
    pub fn uses_depthwise(&self) -> bool {
        self.kernel() == Kernel::Depthwise
    }

    /// Whether the 3 × 3 stride-2 depthwise kernel applies (`depthwise_3x3_s2.rs`): one input
    /// channel per group, a 3 × 3 kernel at strides (2, 2), padding (1, 1) and dilation (1, 1),
    /// the depthwise convolutions of MobileNet that halve the image.
    pub fn uses_depthwise_3x3_s2(&self) -> bool {
        self.kernel() == Kernel::Depthwise3x3S2
    }

    /// Whether the shape is a 3 × 3 stride-2 depthwise convolution with padding 1
    /// ([`Self::uses_depthwise_3x3_s2`]).
    fn is_depthwise_3x3_s2(&self) -> bool {
        self.group_in() == 1
            && (self.kernel_h, self.kernel_w) == (3, 3)
            && self.strides == [2, 2]
            && self.padding == [1, 1]
            && self.dilation == [1, 1]
    }

    /// The depthwise kernel's tap plane if the kernel applies ([`Self::uses_depthwise`]): the
    /// kernel's first test, computed once.
    pub fn depthwise_plane(&self) -> Option<TapPlane> {
        if self.is_depthwise_3x3_s2() {
            return None;
        }
        self.depthwise_geometry().map(|geometry| geometry.plane())
    }

    /// The kernel that runs this shape.
    fn kernel(&self) -> Kernel {
        let pointwise = self.kernel_h == 1
            && self.kernel_w == 1
            && self.strides == [1, 1]
            && self.padding == [0, 0];
        if self.is_depthwise_3x3_s2() {
            Kernel::Depthwise3x3S2
        } else if self.depthwise_geometry().is_some() {
            Kernel::Depthwise
        } else if pointwise {
            Kernel::Pointwise
        } else if copy_fits(self.padded_plane(), self.height, self.width) {
            Kernel::ChannelsLast
        } else {
            Kernel::CheckedGather
        }
    }

    /// Whether the pointwise kernel applies (`pointwise.rs`): a 1 × 1 kernel at stride 1
    /// without padding, over more than one input channel per group.
    pub fn uses_pointwise(&self) -> bool {
        self.kernel() == Kernel::Pointwise
    }

    /// Whether the im2col kernel gathers from a padded channels-last copy of the input (each
    /// window row one contiguous run): when the padding keeps that copy within twice the input
    /// (plus a constant). Otherwise it gathers from the input with bounds checks.
    pub fn uses_channels_last(&self) -> bool {
        self.kernel() == Kernel::ChannelsLast
    }

    /// The order the kernel that runs this shape needs its weights in.
    pub fn pack_order(&self) -> PackOrder {
        if self.is_depthwise_3x3_s2() {
            PackOrder::Source
        } else if self.uses_depthwise() {
            PackOrder::Depthwise(*self)
        } else if self.uses_channels_last() {
            PackOrder::ChannelsLast {
                channels: self.group_in(),
                taps: self.kernel_h * self.kernel_w,
            }
        } else {
            PackOrder::Source
        }
    }

    /// Working memory of [`conv2d`] in bytes; `weights_prepared` when the weights were packed
    /// at load time.
    pub fn scratch_bytes(&self, weights_prepared: bool) -> u64 {
        let weights = if weights_prepared {
            0
        } else {
            PackedRows::bytes(self.out_channels as u64, self.depth() as u64)
        };
        if self.uses_depthwise_3x3_s2() {
            return depthwise_3x3_s2::scratch_bytes(self).saturating_add(weights);
        }
        if let Some(plane) = self.depthwise_plane() {
            return depthwise::scratch_bytes(self, &plane, weights_prepared);
        }
        if self.uses_pointwise() {
            return pointwise::plane_bytes(self).saturating_add(weights);
        }
        im2col::scratch_bytes(self, self.uses_channels_last()).saturating_add(weights)
    }
}

/// Packs conv2d weights (OC rows of C/groups · KH · KW values) for [`conv2d`], in the order of
/// the kernel that runs the shape ([`ConvShape::pack_order`]).
pub fn pack_weights(shape: &ConvShape, weights: &[i32]) -> PackedRows {
    pack_in(
        weights,
        shape.out_channels,
        shape.depth(),
        shape.pack_order(),
    )
}

/// Writes `Σ_ic Σ_ki Σ_kj pad(X)[n, g·C/groups + ic, p·SH − PH + ki·DH, q·SW − PW + kj·DW] ·
/// W[oc, ic, ki, kj]` (plus `bias[oc]`, if given) into `out[n, oc, p, q]` for every output
/// position. Returns false if adding a bias overflowed `i32` (the outputs are then unspecified);
/// the sums themselves are exact under the bounds of the module documentation.
///
/// `prepared` is the packing of `weights` by [`pack_weights`], if the weights are constant.
pub fn conv2d<S: Simd>(
    shape: &ConvShape,
    data: &[i32],
    weights: &[i32],
    prepared: Option<&PackedRows>,
    bias: Option<&[i32]>,
    out: &mut [i32],
) -> bool {
    let packed;
    let weights = match prepared {
        Some(weights) => weights,
        None => {
            packed = pack_weights(shape, weights);
            &packed
        }
    };
    if shape.uses_depthwise_3x3_s2() {
        // The bias is added as the sums are stored.
        return depthwise_3x3_s2::depthwise_3x3_s2::<S>(shape, data, weights, bias, out);
    }
    if let Some(geometry) = shape.depthwise_plane() {
        // The bias is added as the sums are stored.
        return depthwise::depthwise::<S>(shape, &geometry, data, weights, bias, out);
    }
    if shape.uses_pointwise() {
        // The bias is added as the sums are stored.
        return pointwise::pointwise::<S>(shape, data, weights, bias, out);
    }
    if shape.uses_channels_last() {
        im2col::im2col_channels_last::<S>(shape, data, weights, out);
    } else {
        im2col::im2col::<S>(shape, data, weights, out);
    }
    let (Some(bias), pixels) = (bias, shape.out_h * shape.out_w) else {
        return true;
    };
    // Planes run through the channels in order, image after image.
    pixels == 0
        || out
            .chunks_exact_mut(pixels)
            .zip(bias.iter().take(shape.out_channels).cycle())
            .all(|(values, &b)| add_checked::<S>(values, b))
}

/// Packs `rows` rows of `depth` values (row-major in `source`, values within 8 bits) in
/// `order`: the weights of dense ([`PackOrder::Source`]) and of every conv2d kernel (a
/// `ChannelsLast` order must describe `depth` = channels · taps).
pub fn pack_in(source: &[i32], rows: usize, depth: usize, order: PackOrder) -> PackedRows {
    match order {
        PackOrder::Source => PackedRows::pack(source, rows, depth),
        PackOrder::ChannelsLast { channels, taps } => {
            PackedRows::pack_channels_last(source, rows, depth, channels, taps)
        }
        PackOrder::Depthwise(shape) => tap_plane::pack_depthwise(&shape, source),
    }
}

/// Bytes a packing of `rows` × `depth` values in `order` occupies ([`pack_in`]).
pub fn packed_bytes(rows: u64, depth: u64, order: PackOrder) -> u64 {
    match order {
        PackOrder::Depthwise(shape) => shape.depthwise_weight_bytes(),
        _ => PackedRows::bytes(rows, depth),
    }
}
