//! `conv2d` kernels: grouped convolution as blocks of im2col patches times packed weights
//! ([`super::gemm`]), a direct vector kernel for depthwise convolution, and the pointwise kernel
//! of [`super::pointwise`] for 1 × 1 convolutions.
//!
//! Each writes the sums `Σ x·w` into an NCHW output and adds the bias with checked arithmetic:
//! the pointwise kernel as it stores its sums, the im2col kernels per output plane afterwards,
//! and the depthwise kernel as it stores its sums (with plain additions when no sum plus the
//! bias can overflow) or afterwards. Exactness rests on the bounds of spec 001 for conv2d: data and weights
//! within 8 bits and an output precision of at most 32 bits (see [`super::gemm`]), so 32-bit
//! lanes hold every partial sum exactly.

use alloc::vec;
use alloc::vec::Vec;

use super::gemm::{self, LANES, PackOrder, PackedRows, narrow16};
use super::simd::Simd;
use super::{copy_fits, scatter_row};

/// Output pixels per im2col block: the patch block (`BLOCK` × padded depth `i16`) stays in
/// the first-level cache next to four rows of weights.
pub const BLOCK: usize = 16;

/// Geometry of one convolution (NCHW data, OIHW weights), validated by the operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConvShape {
    /// N.
    pub batch: usize,
    /// C.
    pub in_channels: usize,
    /// H.
    pub height: usize,
    /// W.
    pub width: usize,
    /// OC.
    pub out_channels: usize,
    /// Groups (divides C and OC).
    pub groups: usize,
    /// KH.
    pub kernel_h: usize,
    /// KW.
    pub kernel_w: usize,
    /// Output height.
    pub out_h: usize,
    /// Output width.
    pub out_w: usize,
    /// (SH, SW), each ≥ 1.
    pub strides: [usize; 2],
    /// (PH, PW).
    pub padding: [usize; 2],
    /// (DH, DW), each ≥ 1.
    pub dilation: [usize; 2],
}

impl ConvShape {
    /// Input channels per group.
    pub fn group_in(&self) -> usize {
        self.in_channels / self.groups
    }

    /// Output channels per group.
    pub fn group_out(&self) -> usize {
        self.out_channels / self.groups
    }

    /// Reduction length per output: C/groups · KH · KW.
    pub fn depth(&self) -> usize {
        self.group_in() * self.kernel_h * self.kernel_w
    }

    /// Whether the depthwise kernel applies: one input channel per group, and padding and
    /// strides small enough that its tap plane (in `i16`, with the values it is built from)
    /// stays within twice the channel's size (plus a constant). Other depthwise shapes use the
    /// im2col kernel.
    pub fn uses_depthwise(&self) -> bool {
        self.kernel() == Kernel::Depthwise
    }

    /// Whether the 3 × 3 stride-2 depthwise kernel applies ([`depthwise_3x3_s2`]): one input
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

    /// The tap plane of the depthwise kernel, if that kernel takes the shape: one input channel
    /// per group and a plane that fits ([`TapGeometry::fits`]).
    fn depthwise_geometry(&self) -> Option<TapGeometry> {
        if self.group_in() != 1 {
            return None;
        }
        let geometry = self.tap_geometry();
        geometry.fits(self).then_some(geometry)
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

    /// Whether the pointwise kernel applies ([`super::pointwise`]): a 1 × 1 kernel at stride 1
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

    /// Elements of one zero-padded input plane.
    fn padded_plane(&self) -> u64 {
        (self.height as u64 + 2 * self.padding[0] as u64)
            .saturating_mul(self.width as u64 + 2 * self.padding[1] as u64)
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

    /// Tap entries of a depthwise layout that splits every stride into column phases (the
    /// shapes [`Self::tap_entries`] leaves to it): two taps of a kernel row share one when they sit at
    /// adjacent positions of the phase-split plane, any other tap takes one alone. Computed
    /// without enumerating the taps: column kj lies in phase (kj · DW) mod SW at position
    /// ⌊kj · DW / SW⌋, so when DW divides SW the taps of each of the SW / DW phases used are
    /// adjacent (n of them make ⌈n / 2⌉ entries), and otherwise no two are.
    pub fn depthwise_entries(&self) -> u64 {
        let [_, stride_w] = self.strides;
        let dil_w = self.dilation[1];
        let (kernel_h, kernel_w) = (self.kernel_h as u64, self.kernel_w as u64);
        let per_row = if stride_w.is_multiple_of(dil_w) {
            // Column kj is in phase class kj mod m; class r holds ⌊(KW − 1 − r) / m⌋ + 1 taps.
            let m = (stride_w / dil_w) as u64;
            (0..m.min(kernel_w))
                .map(|r| ((kernel_w - 1 - r) / m + 1).div_ceil(2))
                .sum()
        } else {
            kernel_w
        };
        per_row.saturating_mul(kernel_h)
    }

    /// Tap entries of the depthwise kernel ([`EntryTaps`], [`depthwise_pairing`]), per kernel
    /// row:
    /// - SW = 1 ([`Columns::Split`]): one per even column offset a that a tap's column x reads
    ///   from, as ⌊x / 2⌋ (even outputs) or ⌊(x + 1) / 2⌋ (odd outputs) times two: ⌊KW / 2⌋ + 1
    ///   when DW = 1, KW when DW is even (both reads of a tap fall on one a), and
    ///   ⌈KW / 2⌉ + 2·⌊KW / 2⌋ when DW is odd and at least 3 (taps at odd columns read two);
    /// - SW = 2, DW = 1 ([`Columns::Direct`]): ⌈KW / 2⌉, two neighbouring taps sharing one;
    /// - otherwise as [`Self::depthwise_entries`].
    pub fn tap_entries(&self) -> u64 {
        let kernel_w = self.kernel_w as u64;
        let per_row = match (self.strides[1], self.dilation[1]) {
            (1, 1) => kernel_w / 2 + 1,
            (1, dil) if dil % 2 == 0 => kernel_w,
            (1, _) => kernel_w.div_ceil(2) + 2 * (kernel_w / 2),
            (2, 1) => kernel_w.div_ceil(2),
            _ => return self.depthwise_entries(),
        };
        per_row.saturating_mul(self.kernel_h as u64)
    }

    /// Bytes of the depthwise kernel's weights ([`pack_depthwise`]): per output channel and tap
    /// entry, sixteen `i16`.
    pub fn depthwise_weight_bytes(&self) -> u64 {
        (self.out_channels as u64)
            .saturating_mul(self.tap_entries())
            .saturating_mul(4 * LANES as u64)
    }

    /// Geometry of the depthwise kernel's tap plane, in `u64` with saturating arithmetic (a
    /// shape that is not depthwise may be too large for `usize`); [`Self::tap_plane`] is the
    /// same for shapes the kernel takes.
    ///
    /// A row is rounded up to whole steps of eight positions, so that every step lies in one
    /// output row, when that lengthens it by at most a quarter (shorter rows keep their length:
    /// rounding would multiply their steps).
    fn tap_geometry(&self) -> TapGeometry {
        let [stride_h, stride_w] = self.strides.map(|n| n as u64);
        let [pad_h, pad_w] = self.padding.map(|n| n as u64);
        let (height, width) = (self.height as u64, self.width as u64);
        let (out_h, out_w) = (self.out_h as u64, self.out_w as u64);
        let columns = match self.strides[1] {
            1 => Columns::Split,
            2 if self.dilation[1] == 1 => Columns::Direct,
            _ => Columns::Pairs,
        };
        // Rows end where the next row's left padding begins (shared zeros) when they hold the
        // columns themselves; a row is never shorter than the output row it holds.
        let row = match columns {
            Columns::Split => (width + pad_w).max(out_w),
            Columns::Direct => (width + pad_w).div_ceil(2).max(out_w),
            Columns::Pairs => (width + 2 * pad_w).div_ceil(stride_w),
        };
        let whole = row
            .checked_next_multiple_of(LANES as u64)
            .unwrap_or(u64::MAX);
        let row = if (whole - row).saturating_mul(4) <= row {
            whole
        } else {
            row
        };
        let rows = (height + 2 * pad_h).div_ceil(stride_h);
        let steps = out_h.saturating_mul(row).div_ceil(LANES as u64);
        let unit_rows = stride_h.saturating_mul(rows);
        let filled = match columns {
            Columns::Split => unit_rows.saturating_mul(row),
            Columns::Direct => unit_rows.saturating_mul(2 * row),
            Columns::Pairs => unit_rows.saturating_mul(stride_w).saturating_mul(row),
        };
        // The largest unit of any tap of output position 0. A unit is a sum of a term of the
        // tap's row and one of its column (`tap_unit`), each maximised on its own over the
        // last SH rows (SW columns) of the kernel, where every row (column) phase the kernel
        // reaches occurs at its furthest; at SW = 1 the odd outputs' reads reach one column
        // further.
        let [dil_h, dil_w] = self.dilation.map(|n| n as u64);
        let (kernel_h, kernel_w) = (self.kernel_h as u64, self.kernel_w as u64);
        let furthest = |kernel: u64, stride: u64, unit: &dyn Fn(u64) -> u64| {
            (kernel.saturating_sub(stride)..kernel)
                .map(unit)
                .max()
                .unwrap_or(0)
        };
        let reach = furthest(kernel_h, stride_h, &|ki| {
            self.tap_unit(columns, row, rows, ki * dil_h, 0)
        })
        .saturating_add(furthest(kernel_w, stride_w, &|kj| {
            self.tap_unit(columns, row, rows, 0, kj * dil_w)
        }))
        .saturating_add(u64::from(columns == Columns::Split));
        // Units the last step reads past the reach: eight columns, sixteen at SW = 2, or eight
        // pairs and the neighbour of the last.
        let read = reach.saturating_add(match columns {
            Columns::Split => steps.saturating_mul(LANES as u64),
            Columns::Direct => steps.saturating_mul(2 * LANES as u64),
            Columns::Pairs => steps.saturating_mul(LANES as u64).saturating_add(1),
        });
        TapGeometry {
            columns,
            row,
            rows,
            steps,
            units: filled.max(read).next_multiple_of(LANES as u64),
        }
    }

    /// Geometry of the depthwise kernel's tap plane ([`TapPlane`]), for a shape the kernel
    /// takes ([`Self::uses_depthwise`]: every figure then fits twice the input plane).
    pub fn tap_plane(&self) -> TapPlane {
        self.tap_geometry().plane()
    }

    /// The unit of the tap plane holding padded row y, padded column x of output position 0
    /// (see [`TapPlane`]), saturating.
    fn tap_unit(&self, columns: Columns, row: u64, rows: u64, y: u64, x: u64) -> u64 {
        let [stride_h, stride_w] = self.strides.map(|n| n as u64);
        let vertical = (y % stride_h)
            .saturating_mul(rows)
            .saturating_add(y / stride_h);
        match columns {
            Columns::Split => vertical.saturating_mul(row).saturating_add(x),
            Columns::Direct => vertical.saturating_mul(2 * row).saturating_add(x),
            Columns::Pairs => ((x % stride_w).saturating_mul(stride_h).saturating_mul(rows))
                .saturating_add(vertical)
                .saturating_mul(row)
                .saturating_add(x / stride_w),
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
            return Halving::new(self).scratch_bytes().saturating_add(weights);
        }
        if let Some(plane) = self.depthwise_plane() {
            // The tap plane and the plane of values it is built from (2 bytes per element);
            // per tap at most 1.5 tap entries, each a pairing (72 bytes) and its offset (8
            // bytes), and the places of its reads while pairing them (at most 64 bytes), 256
            // bytes in all; the weights of the entries unless they were packed at load time
            // ([`Self::depthwise_weight_bytes`]); per step its output index (8 bytes),
            // its sums when the entries take several passes (32 bytes), and its positions when
            // the rows are not whole steps (32 bytes); per input row its plane unit (8 bytes).
            let taps = (self.kernel_h * self.kernel_w) as u64;
            let per_step =
                8 + if self.tap_entries() > ENTRIES_PER_PASS as u64 {
                    32
                } else {
                    0
                } + if plane.row.is_multiple_of(LANES) {
                    0
                } else {
                    32
                };
            return ((plane.plane_len() + plane.values_len()) as u64)
                .saturating_mul(2)
                .saturating_add(taps.saturating_mul(256))
                .saturating_add(if weights_prepared {
                    0
                } else {
                    self.depthwise_weight_bytes()
                })
                .saturating_add((plane.steps as u64).saturating_mul(per_step))
                .saturating_add((self.height as u64).saturating_mul(8));
        }
        if self.uses_pointwise() {
            return super::pointwise::plane_bytes(self).saturating_add(weights);
        }
        let mut patches = PackedRows::bytes(BLOCK as u64, self.depth() as u64);
        if self.uses_channels_last() {
            let copy = self.padded_plane().saturating_mul(self.group_in() as u64);
            patches = patches.saturating_add(copy.saturating_mul(2));
        }
        patches.saturating_add(weights)
    }
}

/// Packs conv2d weights (OC rows of C/groups · KH · KW values) for [`conv2d`], in the order of
/// the kernel that runs the shape ([`ConvShape::pack_order`]).
pub fn pack_weights(shape: &ConvShape, weights: &[i32]) -> PackedRows {
    PackedRows::pack_in(
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
        return depthwise_3x3_s2::<S>(shape, data, weights, bias, out);
    }
    if let Some(geometry) = shape.depthwise_plane() {
        // The bias is added as the sums are stored.
        return depthwise::<S>(shape, &geometry, data, weights, bias, out);
    }
    if shape.uses_pointwise() {
        // The bias is added as the sums are stored.
        return super::pointwise::pointwise::<S>(shape, data, weights, bias, out);
    }
    if shape.uses_channels_last() {
        im2col_channels_last::<S>(shape, data, weights, out);
    } else {
        im2col::<S>(shape, data, weights, out);
    }
    let (Some(bias), pixels) = (bias, shape.out_h * shape.out_w) else {
        return true;
    };
    // Planes run through the channels in order, image after image.
    pixels == 0
        || out
            .chunks_exact_mut(pixels)
            .zip(bias.iter().take(shape.out_channels).cycle())
            .all(|(values, &b)| super::add_checked::<S>(values, b))
}

/// Writes, for outputs whose sums have no terms, `bias[oc]` (or 0) into every output of each
/// plane of `pixels` (planes in channel order, image after image).
pub fn only_bias(out: &mut [i32], bias: Option<&[i32]>, pixels: usize) {
    if pixels == 0 {
        return;
    }
    for (oc, plane) in out.chunks_exact_mut(pixels).enumerate() {
        let value = bias.map_or(0, |bias| {
            bias.get(oc % bias.len().max(1)).copied().unwrap_or(0)
        });
        plane.fill(value);
    }
}

/// Grouped convolution through a zero-padded channels-last copy of each image's group: a window
/// row (KW taps of C/groups channels) is then one contiguous run when DW = 1, and KW runs of
/// C/groups values otherwise, copied without bounds checks. Weights are packed in the same
/// (row, column, channel) order ([`PackOrder::ChannelsLast`]).
fn im2col_channels_last<S: Simd>(
    shape: &ConvShape,
    data: &[i32],
    weights: &PackedRows,
    out: &mut [i32],
) {
    let s = *shape;
    let stride = weights.stride();
    let (group_in, group_out) = (s.group_in(), s.group_out());
    let plane = s.height * s.width;
    let pixels = s.out_h * s.out_w;
    if pixels == 0 || group_out == 0 || group_in == 0 {
        return;
    }
    let padded_w = s.width + 2 * s.padding[1];
    let padded_h = s.height + 2 * s.padding[0];
    let mut copy: Vec<i16> = vec![0; padded_h * padded_w * group_in];
    let mut patches: Vec<i16> = vec![0; BLOCK * stride];
    let run = s.kernel_w * group_in;
    for n in 0..s.batch {
        for g in 0..s.groups {
            let group_data =
                &data[(n * s.in_channels + g * group_in) * plane..][..group_in * plane];
            fill_channels_last(&s, group_data, padded_w, &mut copy);
            let group_weights =
                &weights.values()[g * group_out * stride..(g + 1) * group_out * stride];
            let out_base = (n * s.out_channels + g * group_out) * pixels;
            multiply_blocks::<S>(
                &s,
                &mut patches,
                group_weights,
                &mut out[out_base..],
                |p, q, patch| {
                    gather_channels_last(&s, &copy, padded_w, p, q, &mut patch[..run * s.kernel_h]);
                },
            );
        }
    }
}

/// Channels written together by [`fill_channels_last`]: one 128-bit vector of `i16`.
const CHANNEL_RUN: usize = 8;

/// Writes the interior of the zero-padded channels-last copy of one group of one image
/// (`group_data`: C/groups planes of H × W) into `copy` (padded rows of `padded_w` pixels of
/// C/groups values); the zero border is never written. Eight channels at a time, so that each
/// step writes one pixel's run of eight values instead of a single value.
#[inline(never)]
fn fill_channels_last(s: &ConvShape, group_data: &[i32], padded_w: usize, copy: &mut [i16]) {
    let group_in = s.group_in();
    let (width, plane) = (s.width, s.height * s.width);
    if width == 0 || group_in == 0 {
        return;
    }
    let mut c = 0;
    while c < group_in {
        let run = CHANNEL_RUN.min(group_in - c);
        for h in 0..s.height {
            let first = ((h + s.padding[0]) * padded_w + s.padding[1]) * group_in + c;
            let Some(target) = copy.get_mut(first..first + (width - 1) * group_in + run) else {
                return; // callers size the copy for every row; never reached
            };
            let line = |k: usize| &group_data[(c + k) * plane + h * width..][..width];
            if run == CHANNEL_RUN {
                let lines: [&[i32]; CHANNEL_RUN] = core::array::from_fn(line);
                for (w, pixel) in target.chunks_mut(group_in).enumerate() {
                    if let Some(slots) = pixel.first_chunk_mut::<CHANNEL_RUN>() {
                        *slots = core::array::from_fn(|k| narrow16(lines[k][w]));
                    }
                }
            } else {
                for k in 0..run {
                    for (slot, &value) in target[k..].iter_mut().step_by(group_in).zip(line(k)) {
                        *slot = narrow16(value);
                    }
                }
            }
        }
        c += run;
    }
}

/// One group of one image: for each block of [`BLOCK`] output pixels, `gather` writes each
/// pixel's patch (a row of `patches`), then the block's dot products with the group's weight
/// rows are written to `out` (the group's output planes, OC/groups × OH·OW).
fn multiply_blocks<S: Simd>(
    s: &ConvShape,
    patches: &mut [i16],
    group_weights: &[i16],
    out: &mut [i32],
    mut gather: impl FnMut(usize, usize, &mut [i16]),
) {
    let pixels = s.out_h * s.out_w;
    let stride = patches.len() / BLOCK;
    for start in (0..pixels).step_by(BLOCK) {
        let len = BLOCK.min(pixels - start);
        for (i, patch) in patches.chunks_exact_mut(stride).take(len).enumerate() {
            gather((start + i) / s.out_w, (start + i) % s.out_w, patch);
        }
        gemm::dot_products::<S>(
            &patches[..len * stride],
            len,
            group_weights,
            s.group_out(),
            stride,
            gemm::Strided {
                data: out.get_mut(start..).unwrap_or_default(),
                row_step: 1,
                column_step: pixels,
            },
        );
    }
}

/// Copies the window of output pixel (p, q) from the padded channels-last copy into `patch`
/// (KH runs of KW · C/groups values).
#[inline(never)]
fn gather_channels_last(
    s: &ConvShape,
    copy: &[i16],
    padded_w: usize,
    p: usize,
    q: usize,
    patch: &mut [i16],
) {
    let group_in = s.group_in();
    let run = s.kernel_w * group_in;
    let (top, left) = (p * s.strides[0], q * s.strides[1]);
    for (ki, target) in patch.chunks_exact_mut(run).enumerate() {
        let first = ((top + ki * s.dilation[0]) * padded_w + left) * group_in;
        if s.dilation[1] == 1 {
            target.copy_from_slice(&copy[first..first + run]);
        } else {
            for (kj, taps) in target.chunks_exact_mut(group_in).enumerate() {
                let at = first + kj * s.dilation[1] * group_in;
                taps.copy_from_slice(&copy[at..at + group_in]);
            }
        }
    }
}

/// Grouped convolution: for each image, group and block of [`BLOCK`] output pixels, gathers
/// the patches into packed rows and takes their dot products with the group's weight rows.
fn im2col<S: Simd>(shape: &ConvShape, data: &[i32], weights: &PackedRows, out: &mut [i32]) {
    let s = *shape;
    let stride = weights.stride();
    let (group_in, group_out) = (s.group_in(), s.group_out());
    let plane = s.height * s.width;
    let pixels = s.out_h * s.out_w;
    if pixels == 0 || group_out == 0 {
        return;
    }
    let mut patches: Vec<i16> = vec![0; BLOCK * stride];
    for n in 0..s.batch {
        for g in 0..s.groups {
            let group_data = &data[(n * s.in_channels + g * group_in) * plane..];
            let group_weights =
                &weights.values()[g * group_out * stride..(g + 1) * group_out * stride];
            let out_base = (n * s.out_channels + g * group_out) * pixels;
            multiply_blocks::<S>(
                &s,
                &mut patches,
                group_weights,
                &mut out[out_base..],
                |p, q, patch| gather_patch(&s, group_data, p, q, patch),
            );
        }
    }
}

/// Writes the patch of output pixel (p, q): the window of every input channel of the group,
/// in weight order (channel, row, column), zero where the window covers padding. Lanes past
/// the patch keep their zeros. Not inlined, so that it compiles to a small, register-friendly
/// function also in wasm.
#[inline(never)]
fn gather_patch(s: &ConvShape, group_data: &[i32], p: usize, q: usize, patch: &mut [i16]) {
    let [stride_h, stride_w] = s.strides;
    let [pad_h, pad_w] = s.padding;
    let [dil_h, dil_w] = s.dilation;
    let plane = s.height * s.width;
    // Top-left corner of the window in padded coordinates.
    let (top, left) = (p * stride_h, q * stride_w);
    let inside = top >= pad_h
        && left >= pad_w
        && top - pad_h + (s.kernel_h - 1) * dil_h < s.height
        && left - pad_w + (s.kernel_w - 1) * dil_w < s.width;
    if inside {
        // The whole window lies in the image: each window row is a strided run of the input.
        let origin = (top - pad_h) * s.width + (left - pad_w);
        let mut rows = patch.chunks_exact_mut(s.kernel_w);
        for ic in 0..s.group_in() {
            let channel = &group_data[ic * plane + origin..];
            for ki in 0..s.kernel_h {
                let Some(target) = rows.next() else {
                    return; // the patch holds every window row; never reached
                };
                let line = &channel[ki * dil_h * s.width..];
                for (slot, &value) in target.iter_mut().zip(line.iter().step_by(dil_w)) {
                    *slot = narrow16(value);
                }
            }
        }
        return;
    }
    // The window's columns inside the image, the same for every window row: kj in [lo, hi).
    let inside_from = |edge: usize| {
        // The first kj with left + kj·dil_w ≥ edge (padded coordinates).
        edge.saturating_sub(left).div_ceil(dil_w).min(s.kernel_w)
    };
    let (lo, hi) = (inside_from(pad_w), inside_from(pad_w + s.width));
    let mut rows = patch.chunks_exact_mut(s.kernel_w);
    for ic in 0..s.group_in() {
        let channel = &group_data[ic * plane..(ic + 1) * plane];
        for ki in 0..s.kernel_h {
            let Some(target) = rows.next() else {
                return; // the patch holds every window row; never reached
            };
            // A padding row wraps to a huge index: zero.
            let row = (top + ki * dil_h).wrapping_sub(pad_h);
            if row >= s.height {
                target.fill(0);
                continue;
            }
            let line = &channel[row * s.width..];
            let (before, rest) = target.split_at_mut(lo);
            let (within, after) = rest.split_at_mut(hi - lo);
            before.fill(0);
            after.fill(0);
            let first = (left + lo * dil_w).saturating_sub(pad_w);
            for (slot, &value) in within
                .iter_mut()
                .zip(line.iter().skip(first).step_by(dil_w))
            {
                *slot = narrow16(value);
            }
        }
    }
}

/// The conv2d kernels ([`ConvShape::uses_depthwise`] and the others).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kernel {
    Depthwise,
    Depthwise3x3S2,
    Pointwise,
    ChannelsLast,
    CheckedGather,
}

/// [`TapPlane`] in `u64`, for any shape.
#[derive(Clone, Copy, Debug)]
struct TapGeometry {
    columns: Columns,
    row: u64,
    rows: u64,
    steps: u64,
    units: u64,
}

impl TapGeometry {
    /// Whether the plane (in `i16`, with the values it is built from) and its output positions
    /// stay within twice the channel's size (plus a constant).
    fn fits(&self, s: &ConvShape) -> bool {
        let elements = if self.columns == Columns::Pairs {
            self.units.saturating_mul(3).saturating_add(LANES as u64)
        } else {
            self.units
        };
        copy_fits(elements, s.height, s.width)
            && copy_fits(self.steps.saturating_mul(LANES as u64), s.height, s.width)
    }

    /// As a [`TapPlane`], for a shape whose plane fits ([`Self::fits`]: every figure then fits
    /// twice the input plane).
    fn plane(&self) -> TapPlane {
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        TapPlane {
            columns: self.columns,
            row: size(self.row),
            rows: size(self.rows),
            steps: size(self.steps),
            units: size(self.units),
        }
    }
}

/// How the depthwise kernel's [`TapPlane`] lays out the columns of a padded row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Columns {
    /// SW = 1: the columns themselves. Eight columns from column o + a (a even) are four lane
    /// pairs: for even outputs o + 2i the taps at columns a and a + 1, for odd outputs
    /// o + 2i + 1 the taps at columns a − 1 and a. One read serves both, with two weight
    /// pairs.
    Split,
    /// SW = 2, DW = 1: the columns themselves. The lane pair (x, x + 1) at column 2q + x is
    /// the taps at columns x and x + 1 of output q.
    Direct,
    /// Any other stride: columns split by phase (column x goes to phase x mod SW, position
    /// ⌊x / SW⌋), and unit u holds the pair (value u, value u + 1) of that plane, so that two
    /// taps at adjacent positions are one lane pair.
    Pairs,
}

/// Geometry of the depthwise kernel's tap plane: the zero-padded input channel laid out so that
/// the lanes of one dot product ([`Simd::dot_add`]) multiply two taps of four outputs, and so
/// that the whole output plane is one run of vectors.
///
/// Padded rows are split by row phase (padded row y goes to phase y mod SH, row ⌊y / SH⌋), so
/// that consecutive output rows read consecutive rows of every phase. An output row is `row`
/// positions long, usually whole steps of eight: the `out_w` outputs, then positions whose
/// sums are discarded. Output position o = p · `row` + q reads from unit o · SW (o for
/// [`Columns::Pairs`]) plus its tap's unit. Columns are laid out as [`Columns`] says; when a
/// plane row holds the columns themselves, the units between its values and the next row's
/// are zeros: the right padding of the one and the left padding of the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TapPlane {
    /// The layout of columns.
    pub columns: Columns,
    /// Output positions per row, rounded up to a multiple of eight when that lengthens it by at
    /// most a quarter; also positions per plane row (of
    /// pairs, or of output columns at stride 2).
    pub row: usize,
    /// Rows per row phase: ⌈(H + 2PH) / SH⌉.
    pub rows: usize,
    /// Steps of a pass over all output positions, eight positions each.
    pub steps: usize,
    /// Units of the plane (columns, or pairs), whole vectors: every padded row, and every unit
    /// the last step reads.
    pub units: usize,
}

impl TapPlane {
    /// `i16` elements of the plane.
    pub fn plane_len(&self) -> usize {
        match self.columns {
            Columns::Pairs => 2 * self.units,
            _ => self.units,
        }
    }

    /// `i16` elements of the plane of values the pairs are built from (none when the plane
    /// holds the columns themselves): one vector more than the units, for the neighbour of the
    /// last.
    pub fn values_len(&self) -> usize {
        match self.columns {
            Columns::Pairs => self.units + LANES,
            _ => 0,
        }
    }

    /// Units from one plane row to the next in a row phase, when the plane holds the columns
    /// themselves: an output row's positions, at stride 2 two units each.
    fn unit_row(&self) -> usize {
        match self.columns {
            Columns::Direct => 2 * self.row,
            _ => self.row,
        }
    }

    /// The `i16` offset of the lane pairs of a tap at `unit` for output position 0.
    fn offset(&self, unit: usize) -> usize {
        match self.columns {
            Columns::Pairs => 2 * unit,
            _ => unit,
        }
    }
}

/// Largest |x · w| of two values within 8 bits (the bounds of the module documentation).
const PRODUCT_BOUND: i64 = 1 << 14;

/// The bias of output channel `oc` (0 without one), and whether it can be added to sums of at
/// most `bound` in magnitude with plain additions (no sum plus it leaves `i32`).
fn channel_bias(bias: Option<&[i32]>, oc: usize, bound: i64) -> (i32, bool) {
    let addend = bias.and_then(|bias| bias.get(oc)).copied().unwrap_or(0);
    (
        addend,
        i64::from(addend).abs() + bound <= i64::from(i32::MAX),
    )
}

/// Depthwise convolution (one input channel per group, any channel multiplier): per input
/// channel, the [`TapPlane`] is written from the channel (narrowed to `i16`), then per output
/// channel the sums of its tap entries ([`EntryTaps`]: two taps of a kernel row at adjacent
/// units share one dot product per four outputs) are taken over all output positions in one
/// run of vectors ([`depthwise_pass`], [`split_pass`]), and each step's eight sums stored
/// straight into the output plane with the bias. `weights` are the entries' weights
/// ([`pack_depthwise`]), packed at load time when the weights are parameters.
///
/// When a plane row is whole steps long, a step's eight positions are eight consecutive
/// outputs of one output row; those past the row's `out_w` outputs land on outputs of later
/// rows or planes (or past the end of `out`, dropped), which are written after them. When no
/// sum plus the bias can overflow (every sum is at most KH · KW · 2^14 in magnitude), the bias
/// is added as the sums are stored; otherwise each plane is stored without it and the bias
/// added with checks. Short rows, which rounding would lengthen by more than a quarter, are
/// stored into a flat run of rows and their real outputs copied out with the bias
/// ([`copy_rows`]).
fn depthwise<S: Simd>(
    shape: &ConvShape,
    geometry: &TapPlane,
    data: &[i32],
    weights: &PackedRows,
    bias: Option<&[i32]>,
    out: &mut [i32],
) -> bool {
    let (s, geometry) = (*shape, *geometry);
    let TapPlane {
        columns,
        row,
        steps,
        ..
    } = geometry;
    let channel_len = s.height * s.width;
    let pixels = s.out_h * s.out_w;
    if pixels == 0 || channel_len == 0 {
        // No input values (W = 0 with enough padding): every sum is empty.
        only_bias(out, bias, pixels);
        return true;
    }
    let total = s.batch * s.out_channels * pixels;
    let total = total.min(out.len());
    let out = &mut out[..total];
    let multiplier = s.group_out();
    let mut plane: Vec<i16> = vec![0; geometry.plane_len()];
    let mut values: Vec<i16> = vec![0; geometry.values_len()];
    let pairing = pairing_in(&s, &geometry);
    let passes = pairing.len().div_ceil(ENTRIES_PER_PASS);
    // The sums of the passes before the last, when there are several.
    let mut sums: Vec<[i32; LANES]> = vec![[0; LANES]; if passes > 1 { steps } else { 0 }];
    // Rows of whole steps go straight into the output; other rows (short ones) into `flat`,
    // whose real outputs are then copied out.
    let direct = row.is_multiple_of(LANES);
    let mut flat: Vec<i32> = vec![0; if direct { 0 } else { steps * LANES }];
    // The index of each step's first position in its target: in the output plane,
    // o = p · row + q goes to p · out_w + q (a row is whole steps, so a step never leaves its
    // row); in `flat`, to o. Computed once per node, by counting: no division.
    let mut next = (0, 0);
    let starts: Vec<usize> = (0..steps)
        .map(|k| {
            if !direct {
                return k * LANES;
            }
            let (p, q) = next;
            next = if q + LANES < row {
                (p, q + LANES)
            } else {
                (p + 1, 0)
            };
            p * s.out_w + q
        })
        .collect();
    let rows = row_targets(&s, &geometry);
    let split = columns == Columns::Split;
    let bound = (s.kernel_h * s.kernel_w) as i64 * PRODUCT_BOUND;
    // Each entry's offset in the plane, and its weights in the channel's row of `weights`.
    let offsets: Vec<usize> = pairing
        .iter()
        .map(|taps| geometry.offset(taps.unit))
        .collect();
    let per_channel = pairing.len();
    let stride = per_channel * 2 * LANES;
    for n in 0..s.batch {
        for c in 0..s.in_channels {
            let from = (n * s.in_channels + c) * channel_len;
            let channel = data.get(from..from + channel_len).unwrap_or_default();
            write_tap_plane::<S>(&s, &geometry, &rows, channel, &mut plane, &mut values);
            for m in 0..multiplier {
                let oc = c * multiplier + m;
                let kernel = weights.values().get(oc * stride..(oc + 1) * stride);
                let (entry_weights, _) = kernel.unwrap_or_default().as_chunks::<{ 2 * LANES }>();
                let (addend, fits) = channel_bias(bias, oc, bound);
                let first = (n * s.out_channels + oc) * pixels;
                let mut sink = Sink {
                    sums: &mut sums,
                    starts: &starts,
                    out: if direct {
                        out.get_mut(first..).unwrap_or_default()
                    } else {
                        &mut flat
                    },
                    addend: if direct && fits { addend } else { 0 },
                };
                run_passes::<S>(split, &offsets, entry_weights, &plane, &mut sink);
                let plane_out = out.get_mut(first..first + pixels).unwrap_or_default();
                let stored = if !direct {
                    copy_rows::<S>(&flat, row, plane_out, s.out_w, addend)
                } else {
                    fits || super::add_checked::<S>(plane_out, addend)
                };
                if !stored {
                    return false;
                }
            }
        }
    }
    true
}

/// Writes the first `width` of every `row` positions of `sums`, plus `addend`, into the rows
/// of `out`, four values per vector, the last four of a row by one more vector that ends with
/// them. Returns false if a sum overflows `i32` (each lane's overflow flag is folded over the
/// rows, as in [`super::add_checked`]). The vectors of a row are written in straight runs: a
/// plain loop of copies would be compiled to a call of the wasm bulk copy per row.
#[inline(never)]
fn copy_rows<S: Simd>(
    sums: &[i32],
    row: usize,
    out: &mut [i32],
    width: usize,
    addend: i32,
) -> bool {
    let splat = S::splat32(addend);
    let mut overflow = S::splat32(0);
    let mut flags = 0;
    for (p, outputs) in out.chunks_exact_mut(width).enumerate() {
        let Some(source) = sums.get(p * row..p * row + width) else {
            return true; // the sums hold every output row; never reached
        };
        let (quads, tail) = source.as_chunks::<4>();
        let (targets, _) = outputs.as_chunks_mut::<4>();
        let len = quads.len().min(targets.len());
        let (quads, targets) = (&quads[..len], &mut targets[..len]);
        straight_runs!(16, len, |k| {
            let (sum, flag) = S::add_overflow32(S::load32(&quads[k]), splat);
            S::store32(&mut targets[k], sum);
            overflow = S::or32(overflow, flag);
        });
        if tail.is_empty() {
            continue;
        }
        match (source.last_chunk::<4>(), outputs.last_chunk_mut::<4>()) {
            (Some(quad), Some(target)) => {
                let (sum, flag) = S::add_overflow32(S::load32(quad), splat);
                S::store32(target, sum);
                overflow = S::or32(overflow, flag);
            }
            _ => {
                for (slot, &value) in outputs.iter_mut().zip(source) {
                    let sum = value.wrapping_add(addend);
                    flags |= (sum ^ value) & (sum ^ addend);
                    *slot = sum;
                }
            }
        }
    }
    let mut lanes = [0i32; 4];
    S::store32(&mut lanes, overflow);
    lanes.iter().fold(flags, |all, &lane| all | lane) >= 0
}

/// Where the passes over one output plane put their sums: `sums` (one entry per step) for the
/// passes before the last, and for the last `out` (the output plane and the planes after it,
/// or the flat run of short rows), each step's eight outputs from `starts[k]` on, plus `addend`
/// and the earlier passes' sums.
struct Sink<'a> {
    sums: &'a mut [[i32; LANES]],
    starts: &'a [usize],
    out: &'a mut [i32],
    addend: i32,
}

/// The passes over one output plane: the tap entries `ENTRIES_PER_PASS` at a time, the last
/// pass storing into the output.
fn run_passes<S: Simd>(
    split: bool,
    offsets: &[usize],
    weights: &[[i16; 2 * LANES]],
    plane: &[i16],
    sink: &mut Sink<'_>,
) {
    // A kernel of one full pass (3 × 3 at strides 1 and 2) goes straight to it.
    if let Some(group) = Group::<ENTRIES_PER_PASS>::new(offsets, weights) {
        if split {
            split_pass::<S, ENTRIES_PER_PASS, true, false>(group, plane, sink);
        } else {
            depthwise_pass::<S, ENTRIES_PER_PASS, true, false>(group, plane, sink);
        }
        return;
    }
    let entries = offsets.len().min(weights.len());
    let passes = entries.div_ceil(ENTRIES_PER_PASS);
    let groups = offsets
        .chunks(ENTRIES_PER_PASS)
        .zip(weights.chunks(ENTRIES_PER_PASS));
    for (pass, (offsets, weights)) in groups.enumerate() {
        let (add, out) = (pass > 0, pass + 1 == passes);
        // The passes before the last take full groups.
        if let (Some(group), false) = (Group::<ENTRIES_PER_PASS>::new(offsets, weights), out) {
            match (split, add) {
                (true, false) => {
                    split_pass::<S, ENTRIES_PER_PASS, false, false>(group, plane, sink)
                }
                (true, true) => split_pass::<S, ENTRIES_PER_PASS, false, true>(group, plane, sink),
                (false, false) => {
                    depthwise_pass::<S, ENTRIES_PER_PASS, false, false>(group, plane, sink)
                }
                (false, true) => {
                    depthwise_pass::<S, ENTRIES_PER_PASS, false, true>(group, plane, sink)
                }
            }
            continue;
        }
        // The entry count as a constant, so that the loop over entries unrolls.
        macro_rules! last {
            ($($count:literal)*) => {
                $(if let Some(group) = Group::<$count>::new(offsets, weights) {
                    match (split, add) {
                        (true, false) => split_pass::<S, $count, true, false>(group, plane, sink),
                        (true, true) => split_pass::<S, $count, true, true>(group, plane, sink),
                        (false, false) => {
                            depthwise_pass::<S, $count, true, false>(group, plane, sink)
                        }
                        (false, true) => {
                            depthwise_pass::<S, $count, true, true>(group, plane, sink)
                        }
                    }
                })*
            };
        }
        last!(1 2 3 4 5 6);
    }
}

/// The plane unit each input row starts at, when the plane holds the columns themselves (none
/// for a plane of pairs, built from its own phase-split rows): padded row y = row + PH goes to
/// row phase y mod SH, row ⌊y / SH⌋ of that phase, after its PW units of left padding.
/// Computed once per node: no division per channel.
fn row_targets(s: &ConvShape, geometry: &TapPlane) -> Vec<usize> {
    if geometry.columns == Columns::Pairs {
        return Vec::new();
    }
    let unit_row = geometry.unit_row();
    row_phases(s)
        .map(|(phase, phase_row)| (phase * geometry.rows + phase_row) * unit_row + s.padding[1])
        .collect()
}

/// The row phase, and the row within it, of each input row in order: padded row y = row + PH
/// goes to row phase y mod SH, row ⌊y / SH⌋. Counted, not divided.
fn row_phases(s: &ConvShape) -> impl Iterator<Item = (usize, usize)> {
    let [stride_h, _] = s.strides;
    let pad_h = s.padding[0];
    let first = (pad_h % stride_h, pad_h / stride_h);
    core::iter::successors(Some(first), move |&(phase, row)| {
        Some(if phase + 1 < stride_h {
            (phase + 1, row)
        } else {
            (0, row + 1)
        })
    })
    .take(s.height)
}

/// Writes one input channel (H rows of W values) into the [`TapPlane`] `plane`, narrowed to
/// `i16`: directly (rows where `rows` says), or into the phase-split `values` and then their
/// pairs. Padding units are never written: they keep their zeros. Not inlined, so that its
/// loops keep their pointers in registers also after Cranelift compiles the wasm.
#[inline(never)]
fn write_tap_plane<S: Simd>(
    s: &ConvShape,
    geometry: &TapPlane,
    rows: &[usize],
    channel: &[i32],
    plane: &mut [i16],
    values: &mut [i16],
) {
    let TapPlane {
        columns,
        row,
        rows: phase_rows,
        ..
    } = *geometry;
    let [stride_h, stride_w] = s.strides;
    let pad_w = s.padding[1];
    if columns == Columns::Pairs {
        for (line, (phase, phase_row)) in channel.chunks_exact(s.width).zip(row_phases(s)) {
            scatter_row(
                line,
                pad_w,
                stride_w,
                stride_h * phase_rows * row,
                (phase * phase_rows + phase_row) * row,
                values,
                narrow16,
                narrow_line::<S>,
            );
        }
        neighbour_pairs::<S>(values, plane);
        return;
    }
    // The count of whole vectors of a row as a constant for rows of up to 64 values, so that
    // a row is one straight run.
    macro_rules! vectors {
        ($($count:literal)*) => {
            match s.width / LANES {
                $($count => narrow_rows::<S, $count>(channel, plane, rows, s.width),)*
                _ => narrow_rows::<S, 0>(channel, plane, rows, s.width),
            }
        };
    }
    vectors!(1 2 3 4 5 6 7 8);
}

/// Narrows each row of `width` values of `channel` into `plane` from the unit `targets` gives
/// it, with `V` whole vectors per row (0: any number, or a row shorter than one vector:
/// [`narrow_line`]). One plain loop over the channel's rows with no branch but its own: every
/// bound it needs is checked once before it, so that a row is one basic block (wasmtime meters
/// fuel per block, at a cost of its own). Not inlined, so that each count gets its own
/// registers.
#[inline(never)]
fn narrow_rows<S: Simd, const V: usize>(
    channel: &[i32],
    plane: &mut [i16],
    targets: &[usize],
    width: usize,
) {
    let Some(last) = plane.len().checked_sub(width) else {
        return; // every row fits the plane; never reached
    };
    if width == 0 {
        return;
    }
    if V == 0 || width / LANES != V {
        for (line, &start) in channel.chunks_exact(width).zip(targets) {
            if let Some(target) = plane.get_mut(start..start.saturating_add(width)) {
                narrow_line::<S>(line, target);
            }
        }
        return;
    }
    for (line, &start) in channel.chunks_exact(width).zip(targets) {
        // Every row fits its plane row, so the clamp never moves it; it spares a branch per row.
        let start = start.min(last);
        let Some(target) = plane.get_mut(start..start + width) else {
            return;
        };
        let (octets, _) = line.as_chunks::<LANES>();
        let (octet_targets, _) = target.as_chunks_mut::<LANES>();
        if let (Some((octets, _)), Some((octet_targets, _))) = (
            octets.split_first_chunk::<V>(),
            octet_targets.split_first_chunk_mut::<V>(),
        ) {
            for (values, octet) in octets.iter().zip(octet_targets) {
                narrow_octet::<S>(values, octet);
            }
        }
        // The last values by one more vector that ends with them (all eight rewritten with the
        // same values when the width is a multiple of eight: no branch on it).
        if let (Some(values), Some(octet)) = (line.last_chunk(), target.last_chunk_mut()) {
            narrow_octet::<S>(values, octet);
        }
    }
}

/// Narrows eight values into `octet` with the saturating [`Simd::narrow32`].
#[inline(always)]
fn narrow_octet<S: Simd>(values: &[i32; LANES], octet: &mut [i16; LANES]) {
    let (halves, _) = values.as_chunks::<4>();
    S::store16(
        octet,
        S::narrow32(S::load32(&halves[0]), S::load32(&halves[1])),
    );
}

/// `target[i] = narrow16(line[i])` over the common length, eight values per step with the
/// saturating narrowing of [`Simd::narrow32`] (no constant vectors) in straight runs, the last
/// values by one more vector that ends with them (rewriting some values with the same ones)
/// instead of one at a time, when there are at least eight.
#[inline(always)]
fn narrow_line<S: Simd>(line: &[i32], target: &mut [i16]) {
    let n = line.len().min(target.len());
    let (line, target) = (&line[..n], &mut target[..n]);
    let narrow = narrow_octet::<S>;
    let (octets, tail) = line.as_chunks::<LANES>();
    let (targets, _) = target.as_chunks_mut::<LANES>();
    let len = octets.len().min(targets.len());
    let (octets, targets) = (&octets[..len], &mut targets[..len]);
    straight_runs!(16, len, |k| {
        narrow(&octets[k], &mut targets[k]);
    });
    if tail.is_empty() {
        return;
    }
    let last_values = line.last_chunk::<LANES>();
    match (last_values, target.last_chunk_mut::<LANES>()) {
        (Some(values), Some(octet)) => narrow(values, octet),
        _ => {
            for (slot, &value) in target.iter_mut().zip(line) {
                *slot = narrow16(value);
            }
        }
    }
}

/// The taps of one tap entry of the depthwise kernel: its unit relative to output position 0 in
/// the [`TapPlane`], and the kernel index (ki · KW + kj) of the tap each lane of a pair
/// multiplies, for even outputs (`even`, the only ones unless the columns are
/// [`Columns::Split`]) and odd outputs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EntryTaps {
    /// Unit of the entry's first lane for output position 0.
    pub unit: usize,
    /// Taps of the two lanes of a pair for even outputs (or all outputs); `None` takes weight
    /// 0.
    pub even: [Option<usize>; 2],
    /// Taps of the two lanes of a pair for odd outputs at SW = 1.
    pub odd: [Option<usize>; 2],
}

/// The tap entries of the depthwise kernel for `s`, in order of unit within each kernel row.
/// At SW = 1 every tap at column x lands in the entry of column ⌊x / 2⌋ · 2 (lane x mod 2) for
/// even outputs and of ⌊(x + 1) / 2⌋ · 2 (lane (x + 1) mod 2) for odd ones; otherwise two taps
/// of a kernel row at adjacent units share an entry, and any other tap takes one alone. As many
/// entries as [`ConvShape::tap_entries`].
pub fn depthwise_pairing(s: &ConvShape) -> Vec<EntryTaps> {
    pairing_in(s, &s.tap_plane())
}

/// [`depthwise_pairing`] for the shape's tap plane `geometry`.
fn pairing_in(s: &ConvShape, geometry: &TapPlane) -> Vec<EntryTaps> {
    let TapPlane {
        columns, row, rows, ..
    } = *geometry;
    let [dil_h, dil_w] = s.dilation;
    let unit = |y: usize, x: usize| {
        let unit = s.tap_unit(columns, row as u64, rows as u64, y as u64, x as u64);
        usize::try_from(unit).unwrap_or(usize::MAX)
    };
    // At most as many entries as `tap_entries` (as many at strides 1 and 2).
    let mut pairing: Vec<EntryTaps> =
        Vec::with_capacity(usize::try_from(s.tap_entries()).unwrap_or(0));
    if columns == Columns::Split {
        for ki in 0..s.kernel_h {
            let base = unit(ki * dil_h, 0);
            let first = pairing.len();
            // Entries of this row by column: each tap's even read, then its odd read.
            let mut lanes: Vec<(usize, bool, usize, usize)> = (0..s.kernel_w)
                .flat_map(|kj| {
                    let (x, tap) = (kj * dil_w, ki * s.kernel_w + kj);
                    [
                        (x - x % 2, false, x % 2, tap),
                        (x + 1 - (x + 1) % 2, true, (x + 1) % 2, tap),
                    ]
                })
                .collect();
            lanes.sort_unstable();
            for (column, odd, lane, tap) in lanes {
                let unit = base + column;
                if pairing.len() == first || pairing.last().is_some_and(|e| e.unit != unit) {
                    pairing.push(EntryTaps {
                        unit,
                        ..EntryTaps::default()
                    });
                }
                if let Some(entry) = pairing.last_mut() {
                    let lanes = if odd { &mut entry.odd } else { &mut entry.even };
                    lanes[lane] = Some(tap);
                }
            }
        }
        return pairing;
    }
    // Computed once per node: no division in the loops.
    let mut order: Vec<(usize, usize, usize)> = (0..s.kernel_h * s.kernel_w)
        .map(|tap| {
            let (ki, kj) = (tap / s.kernel_w, tap % s.kernel_w);
            (ki, unit(ki * dil_h, kj * dil_w), tap)
        })
        .collect();
    order.sort_unstable();
    let mut rest = order.as_slice();
    while let Some((&(ki, unit, tap), after)) = rest.split_first() {
        let (second, next_rest) = match after.split_first() {
            Some((&(next_ki, next, next_tap), later)) if next_ki == ki && next == unit + 1 => {
                (Some(next_tap), later)
            }
            _ => (None, after),
        };
        pairing.push(EntryTaps {
            unit,
            even: [Some(tap), second],
            odd: [None, None],
        });
        rest = next_rest;
    }
    pairing
}

/// Packs the weights of the depthwise kernel for `shape` (a shape it takes): per output
/// channel, per tap entry of [`depthwise_pairing`] in order, the weights of its even outputs'
/// lane pair (`[w_first, w_second]` repeated four times, 0 for a lane without a tap), then of its
/// odd outputs' pair (only the [`Columns::Split`] columns have odd outputs of their own; 0
/// otherwise). Weights are within 8 bits (the module documentation), so narrowing them is exact.
pub fn pack_depthwise(shape: &ConvShape, weights: &[i32]) -> PackedRows {
    let geometry = shape.tap_plane();
    let pairing = pairing_in(shape, &geometry);
    let split = geometry.columns == Columns::Split;
    let taps = shape.kernel_h * shape.kernel_w;
    let stride = pairing.len() * 2 * LANES;
    let mut values = vec![0; shape.out_channels * stride];
    if stride > 0 && taps > 0 {
        for (row, kernel) in values
            .chunks_exact_mut(stride)
            .zip(weights.chunks_exact(taps))
        {
            let weight = |tap: Option<usize>| {
                tap.and_then(|tap| kernel.get(tap))
                    .map_or(0, |&w| narrow16(w))
            };
            let (entries, _) = row.as_chunks_mut::<{ 2 * LANES }>();
            for (entry, taps) in entries.iter_mut().zip(&pairing) {
                let pairs = if split {
                    [taps.even, taps.odd]
                } else {
                    [taps.even, [None, None]]
                };
                let (halves, _) = entry.as_chunks_mut::<LANES>();
                for (half, [first, second]) in halves.iter_mut().zip(pairs) {
                    let pair = [weight(first), weight(second)];
                    for (slot, &w) in half.iter_mut().zip(pair.iter().cycle()) {
                        *slot = w;
                    }
                }
            }
        }
    }
    PackedRows::from_rows(values, shape.out_channels, stride)
}

/// Writes `(values[i], values[i + 1])` at `pairs[2i..2i + 2]` for every i of `pairs`' length.
fn neighbour_pairs<S: Simd>(values: &[i16], pairs: &mut [i16]) {
    let (at, _) = values.as_chunks::<LANES>();
    let (next, _) = values.get(1..).unwrap_or_default().as_chunks::<LANES>();
    let (targets, _) = pairs.as_chunks_mut::<{ 2 * LANES }>();
    for ((at, next), target) in at.iter().zip(next).zip(targets) {
        let (lo, hi) = S::interleave16(S::load16(at), S::load16(next));
        let (halves, _) = target.as_chunks_mut::<LANES>();
        if let [first, second] = halves {
            S::store16(first, lo);
            S::store16(second, hi);
        }
    }
}

/// The tap entries of one pass ([`EntryTaps`]): each entry's `i16` offset in the [`TapPlane`]
/// for output position 0, and its weights as [`pack_depthwise`] lays them out: the pair of its
/// even outputs (all outputs unless the columns are [`Columns::Split`]) repeated over eight
/// lanes, then the pair of its odd outputs.
#[derive(Clone, Copy)]
struct Group<'a, const E: usize> {
    offsets: &'a [usize; E],
    weights: &'a [[i16; 2 * LANES]; E],
}

impl<'a, const E: usize> Group<'a, E> {
    /// The group of `offsets` and `weights`, if both hold `E` entries.
    fn new(offsets: &'a [usize], weights: &'a [[i16; 2 * LANES]]) -> Option<Self> {
        Some(Group {
            offsets: offsets.try_into().ok()?,
            weights: weights.try_into().ok()?,
        })
    }

    /// The entries' weight vectors for even (`half` 0) or odd (`half` 1) outputs.
    #[inline(always)]
    fn weights<S: Simd>(&self, half: usize) -> [S::I16x8; E] {
        core::array::from_fn(|e| {
            let (halves, _) = self.weights[e].as_chunks::<LANES>();
            S::load16(&halves[half])
        })
    }
}

/// Entries per [`depthwise_pass`]: a 3 × 3 kernel (three rows of a pair and a single) in one
/// pass, its six weight vectors in registers.
const ENTRIES_PER_PASS: usize = 6;

/// Steps per run of [`store_runs`]' straight-line code: the sixteen of `straight_runs!(each 16)`.
const RUN: usize = 16;
const _: () = assert!(
    RUN == 16,
    "store_runs unrolls its runs with straight_runs!(each 16)"
);

/// One pass over the output positions, eight per step ([`Columns::Direct`] and
/// [`Columns::Pairs`]): the sums of `E` tap entries, put into `sink` ([`Target::put`]), in straight
/// runs of sixteen steps. Step k of an entry multiplies the sixteen lanes (eight pairs) at its
/// offset plus 16k: outputs 8k to 8k + 3, then 8k + 4 to 8k + 7. Exact under the bounds of
/// [`super::gemm`]: each lane of a dot product is `x·w + x'·w'` with |x|, |w| ≤ 128, and a sum
/// of KH · KW such products fits 32 bits. When the pass is the only one, the steps that lie
/// within the output go through [`store_runs`] and only the others through [`Target::put`].
#[inline(never)]
fn depthwise_pass<S: Simd, const E: usize, const OUT: bool, const ADD: bool>(
    group: Group<'_, E>,
    plane: &[i16],
    sink: &mut Sink<'_>,
) {
    // The plane holds every unit the last step reads (`TapPlane::units`), so no stream is ever
    // cut short.
    let streams = group.offsets.map(|offset| lanes_from(plane, offset));
    let len = streams
        .iter()
        .map(|run| run.len())
        .fold(sink.starts.len(), usize::min);
    let streams = streams.map(|run| &run[..len]);
    let mut target = Target::<S, OUT, ADD>::new(sink, len);
    let first = if OUT && !ADD {
        let whole = target.whole();
        store_runs::<S, E>(
            streams,
            group,
            &target.starts[..whole],
            target.addend,
            target.out,
        )
    } else {
        0
    };
    if first >= target.len {
        return;
    }
    let weights = group.weights::<S>(0);
    let zero = S::splat32(0);
    straight_runs!(16, target.len - first, |j| {
        let k = first + j;
        let (mut lo, mut hi) = (zero, zero);
        for (run, weights) in streams.iter().zip(&weights) {
            let (x_lo, x_hi) = S::load16x2(&run[k]);
            lo = S::dot_add(lo, x_lo, *weights);
            hi = S::dot_add(hi, x_hi, *weights);
        }
        target.put(k, lo, hi);
    });
}

/// The last pass's steps over `starts` (steps whose eight positions all lie within `out`) in
/// runs of sixteen, each step's sums plus `addend` stored at its start with no branch. Returns
/// the steps it stored. Not inlined, and the weights are loaded afresh for each run: wasmtime
/// checks fuel at the head of every loop with a call that clobbers every vector register, so
/// vectors carried around the loop would live on the stack.
#[inline(never)]
fn store_runs<S: Simd, const E: usize>(
    streams: [&[[i16; 2 * LANES]]; E],
    group: Group<'_, E>,
    starts: &[usize],
    addend: S::I32x4,
    out: &mut [i32],
) -> usize {
    let Some(last) = out.len().checked_sub(LANES) else {
        return 0;
    };
    let fresh = || core::hint::black_box(group).weights::<S>(0);
    let step = |weights: &[S::I16x8; E],
                runs: &[&[[i16; 2 * LANES]]; E],
                run_starts: &[usize],
                i: usize,
                out: &mut [i32]| {
        // Every step lies within `out`: the clamp never moves it, and spares a branch.
        let at = run_starts[i].min(last);
        if let Some(target) = out.get_mut(at..at + LANES) {
            let (quads, _) = target.as_chunks_mut::<4>();
            for (half, quad) in quads.iter_mut().enumerate() {
                let mut sum = addend;
                for (run, weights) in runs.iter().zip(weights) {
                    let (halves, _) = run[i].as_chunks::<LANES>();
                    sum = S::dot_add(sum, S::load16(&halves[half]), *weights);
                }
                S::store32(quad, sum);
            }
        }
    };
    in_runs(streams, starts, out, fresh, step)
}

/// The steps of [`store_runs`] and [`split_runs`] over `starts` and as many steps of every
/// stream, in runs of sixteen (`straight_runs!(each 16)`, the streams and starts of a run as
/// arrays of sixteen: constant offsets, no bounds checks), the weights loaded afresh by `fresh`
/// for each run and for the tail; `step` takes the weights, the run's streams and starts, a
/// step's index in the run and `out`. Returns the steps taken.
#[inline(always)]
fn in_runs<T, W, const E: usize>(
    streams: [&[T]; E],
    starts: &[usize],
    out: &mut [i32],
    fresh: impl Fn() -> W,
    step: impl Fn(&W, &[&[T]; E], &[usize], usize, &mut [i32]),
) -> usize {
    let len = streams
        .iter()
        .map(|run| run.len())
        .fold(starts.len(), usize::min);
    let starts = &starts[..len];
    let (start_runs, _) = starts.as_chunks::<RUN>();
    let stream_runs = streams.map(|run| run[..len].as_chunks::<RUN>().0);
    for (r, run_starts) in start_runs.iter().enumerate() {
        let runs = stream_runs.map(|runs| &runs[r][..]);
        let weights = fresh();
        straight_runs!(each 16, |i| {
            step(&weights, &runs, run_starts, i, out);
        });
    }
    let first = start_runs.len() * RUN;
    let tail_starts = &starts[first..];
    let runs = streams.map(|run| &run[first..len]);
    let weights = fresh();
    straight_runs!(16, tail_starts.len(), |i| {
        step(&weights, &runs, tail_starts, i, out);
    });
    len
}

/// One pass over the output positions of a [`Columns::Split`] plane, eight per step, as
/// [`depthwise_pass`]: step k of an entry reads the eight lanes (four pairs) at its offset plus
/// 8k once, and multiplies them by the even outputs' weights (outputs 8k, 8k + 2, 8k + 4,
/// 8k + 6) and by the odd outputs' weights (8k + 1, …, 8k + 7); the two sums are interleaved.
/// When the pass is the only one, the steps that lie within the output go through
/// [`split_runs`] and only the others through [`Target::put`].
#[inline(never)]
fn split_pass<S: Simd, const E: usize, const OUT: bool, const ADD: bool>(
    group: Group<'_, E>,
    plane: &[i16],
    sink: &mut Sink<'_>,
) {
    let streams = group.offsets.map(|offset| {
        let lanes = plane.get(offset..).unwrap_or_default();
        lanes.as_chunks::<LANES>().0
    });
    let len = streams
        .iter()
        .map(|run| run.len())
        .fold(sink.starts.len(), usize::min);
    let streams = streams.map(|run| &run[..len]);
    let mut target = Target::<S, OUT, ADD>::new(sink, len);
    let first = if OUT && !ADD {
        let whole = target.whole();
        split_runs::<S, E>(
            streams,
            group,
            &target.starts[..whole],
            target.addend,
            target.out,
        )
    } else {
        0
    };
    if first >= target.len {
        return;
    }
    let (even, odd) = (group.weights::<S>(0), group.weights::<S>(1));
    let zero = S::splat32(0);
    straight_runs!(16, target.len - first, |j| {
        let k = first + j;
        let (mut even_sums, mut odd_sums) = (zero, zero);
        for e in 0..E {
            let x = S::load16(&streams[e][k]);
            even_sums = S::dot_add(even_sums, x, even[e]);
            odd_sums = S::dot_add(odd_sums, x, odd[e]);
        }
        let (lo, hi) = S::interleave32(even_sums, odd_sums);
        target.put(k, lo, hi);
    });
}

/// [`store_runs`] for a [`Columns::Split`] plane: the last pass's steps over `starts` (steps
/// whose eight positions all lie within `out`) in runs of sixteen, each step's even and odd sums
/// interleaved and stored plus `addend` at its start with no branch. Returns the steps it
/// stored. Not inlined, and the weights are loaded afresh for each run (see [`store_runs`]).
#[inline(never)]
fn split_runs<S: Simd, const E: usize>(
    streams: [&[[i16; LANES]]; E],
    group: Group<'_, E>,
    starts: &[usize],
    addend: S::I32x4,
    out: &mut [i32],
) -> usize {
    let Some(last) = out.len().checked_sub(LANES) else {
        return 0;
    };
    let fresh = || {
        let group = core::hint::black_box(group);
        (group.weights::<S>(0), group.weights::<S>(1))
    };
    let step = |(even, odd): &([S::I16x8; E], [S::I16x8; E]),
                runs: &[&[[i16; LANES]]; E],
                run_starts: &[usize],
                i: usize,
                out: &mut [i32]| {
        // Every step lies within `out`: the clamp never moves it, and spares a branch.
        let at = run_starts[i].min(last);
        if let Some(target) = out.get_mut(at..at + LANES) {
            let zero = S::splat32(0);
            let (mut even_sums, mut odd_sums) = (zero, zero);
            for e in 0..E {
                let x = S::load16(&runs[e][i]);
                even_sums = S::dot_add(even_sums, x, even[e]);
                odd_sums = S::dot_add(odd_sums, x, odd[e]);
            }
            let (lo, hi) = S::interleave32(even_sums, odd_sums);
            let (quads, _) = target.as_chunks_mut::<4>();
            if let [first, second] = quads {
                S::store32(first, S::add32(lo, addend));
                S::store32(second, S::add32(hi, addend));
            }
        }
    };
    in_runs(streams, starts, out, fresh, step)
}

/// A pass's view of its [`Sink`], over its `len` steps: without `OUT` the sums are stored
/// (or, with `ADD`, added) per step; with `OUT` each step's eight outputs are stored into the
/// output plane, plus the addend (and, with `ADD`, the sums of the earlier passes).
struct Target<'a, S: Simd, const OUT: bool, const ADD: bool> {
    sums: &'a mut [[i32; LANES]],
    starts: &'a [usize],
    out: &'a mut [i32],
    addend: S::I32x4,
    len: usize,
}

impl<'a, S: Simd, const OUT: bool, const ADD: bool> Target<'a, S, OUT, ADD> {
    /// Over at most `len` steps: fewer if the sums the pass reads or writes are shorter.
    #[inline(always)]
    fn new(sink: &'a mut Sink<'_>, len: usize) -> Self {
        let len = len.min(sink.starts.len());
        let len = if OUT && !ADD {
            len
        } else {
            len.min(sink.sums.len())
        };
        Target {
            sums: &mut sink.sums[..if OUT && !ADD { 0 } else { len }],
            starts: &sink.starts[..len],
            out: &mut *sink.out,
            addend: S::splat32(sink.addend),
            len,
        }
    }

    /// The leading steps whose eight positions all lie within `out` (all of them without `OUT`).
    fn whole(&self) -> usize {
        // Starts increase with the step; only the last plane's last steps can reach past `out`.
        let within = |start: &usize| start.saturating_add(LANES) <= self.out.len();
        if !OUT || self.starts.last().is_none_or(within) {
            self.len
        } else {
            self.starts.partition_point(within)
        }
    }

    /// Puts the sums `lo` and `hi` of the eight positions of step `k`.
    #[inline(always)]
    fn put(&mut self, k: usize, lo: S::I32x4, hi: S::I32x4) {
        let (mut lo, mut hi) = (lo, hi);
        if ADD {
            let (halves, _) = self.sums[k].as_chunks::<4>();
            lo = S::add32(lo, S::load32(&halves[0]));
            hi = S::add32(hi, S::load32(&halves[1]));
        }
        if !OUT {
            store8::<S>(&mut self.sums[k], lo, hi);
            return;
        }
        // No sum plus the addend overflows (checked by the caller), so the plain addition is
        // exact.
        let (lo, hi) = (S::add32(lo, self.addend), S::add32(hi, self.addend));
        let start = self.starts[k];
        match self
            .out
            .get_mut(start..)
            .and_then(|rest| rest.first_chunk_mut::<LANES>())
        {
            Some(target) => store8::<S>(target, lo, hi),
            None => {
                // The last row of the last plane: positions past the end of `out` are past
                // that row's outputs, and dropped.
                store_quad::<S>(self.out, start, lo);
                store_quad::<S>(self.out, start.wrapping_add(4), hi);
            }
        }
    }
}

/// `plane` from `offset` on, as runs of sixteen lanes.
#[inline(always)]
fn lanes_from(plane: &[i16], offset: usize) -> &[[i16; 2 * LANES]] {
    plane.get(offset..).unwrap_or_default().as_chunks().0
}

/// Stores `lo` and `hi` into the two halves of `target`.
#[inline(always)]
fn store8<S: Simd>(target: &mut [i32; LANES], lo: S::I32x4, hi: S::I32x4) {
    let (halves, _) = target.as_chunks_mut::<4>();
    if let [first, second] = halves {
        S::store32(first, lo);
        S::store32(second, hi);
    }
}

/// The input columns one step of [`depthwise_3x3_s2`] reads from a row: the columns of four
/// outputs.
const STEP_COLUMNS: usize = 8;

/// Geometry of [`depthwise_3x3_s2`] for one shape.
#[derive(Clone, Copy, Debug)]
struct Halving {
    /// W.
    width: usize,
    /// H.
    height: usize,
    /// Output rows.
    out_h: usize,
    /// Output row length.
    out_w: usize,
    /// Steps per output row, four outputs each: ⌈OW / 4⌉.
    steps: usize,
    /// Whether the last steps of a pair of rows are one ([`Taps::rows_paired`]): when a row's
    /// last step holds two outputs (OW mod 4 = 2).
    joined: bool,
}

impl Halving {
    fn new(s: &ConvShape) -> Self {
        Halving {
            width: s.width,
            height: s.height,
            out_h: s.out_h,
            out_w: s.out_w,
            steps: s.out_w.div_ceil(4),
            joined: s.out_w % 4 == 2,
        }
    }

    /// Values a row is read over: eight per step. The last step's may reach past the row's
    /// end, by at most 7.
    fn span(&self) -> usize {
        self.steps.saturating_mul(STEP_COLUMNS)
    }

    /// Values read from the start of a channel: every row's span.
    fn reach(&self) -> usize {
        (self.height.saturating_sub(1))
            .saturating_mul(self.width)
            .saturating_add(self.span())
    }

    /// Working memory in bytes: a row of zeros (the padding rows) and a copy of a channel with
    /// room for the reads past its end.
    fn scratch_bytes(&self) -> u64 {
        (self.span() as u64)
            .saturating_add(self.reach() as u64)
            .saturating_mul(4)
    }
}

/// Depthwise 3 × 3 convolution at stride 2 with padding 1 ([`ConvShape::uses_depthwise_3x3_s2`]),
/// straight from the input: output (p, q) reads padded rows 2p to 2p + 2 and padded columns 2q to
/// 2q + 2, that is input columns 2q − 1, 2q and 2q + 1.
///
/// One step takes four outputs of a row. Per kernel row it narrows input columns 8j to 8j + 7 of
/// the row to eight `i16`, the pairs (2q, 2q + 1) of outputs q = 4j to 4j + 3, and takes two dot
/// products ([`Simd::dot_add`]): with the pair (w1, w2), the taps at columns 2q and 2q + 1 of
/// output q, in lane q − 4j; with the pair (0, w0), the tap at column 2q + 1 of output q + 1, in
/// the same lane, which [`Simd::shift_in32`] moves up one lane, the last lane of the step before
/// (zero at the row's start: the left padding) entering the first. Output rows are taken in
/// pairs, two pairs per iteration ([`halve_plane`]), with the loop over planes in a function of
/// its own per step count ([`halve_planes`]). The two rows of a pair take their steps in turn,
/// the input row they share narrowed once ([`Taps::rows_paired`]). The last step of a row keeps
/// only the row's columns (the right padding, and the next row's values, are zeroed); the upper
/// row's stores only the row's outputs, the lower row's four, those past the row landing on
/// outputs stored after them. When a row's last step holds two outputs (OW mod 4 = 2), the last
/// steps of a pair are one, each row's in a half of the octets ([`Taps::joined_step`]): a step
/// less per pair of rows. Rows of the padding, above and below, are a row of zeros.
///
/// Exact under the bounds of the module documentation: data and weights within 8 bits narrow to
/// `i16` exactly, each lane of a dot product is `x·w + x'·w'`, and the nine taps' sum of an
/// output fits 32 bits. When no sum plus the bias can overflow (every sum is at most
/// 9 · 2^14 in magnitude) the bias is added as the sums are stored; otherwise after, with checks.
/// `weights` are the source rows of nine taps ([`PackOrder::Source`]).
fn depthwise_3x3_s2<S: Simd>(
    shape: &ConvShape,
    data: &[i32],
    weights: &PackedRows,
    bias: Option<&[i32]>,
    out: &mut [i32],
) -> bool {
    let s = *shape;
    let halving = Halving::new(&s);
    let channel_len = s.height * s.width;
    let pixels = s.out_h * s.out_w;
    if pixels == 0 || channel_len == 0 {
        // No input values (W = 0 or H = 0): every sum is empty.
        only_bias(out, bias, pixels);
        return true;
    }
    // The lanes of a row's last step that hold the row's columns: from 1 to 8, as
    // 8 · (steps − 1) < W (every step before the last lies within the row). With at most four,
    // the row's last outputs are in lanes 0 and 1, which read lanes 0 to 3 only: the mask keeps
    // the same columns of each half, for the last steps of two rows joined into one
    // ([`Taps::rows_paired`]).
    let kept = s
        .width
        .saturating_sub(halving.steps.saturating_sub(1).saturating_mul(STEP_COLUMNS));
    let mask: [i16; STEP_COLUMNS] = core::array::from_fn(|lane| {
        let column = if kept <= 4 { lane % 4 } else { lane };
        -i16::from(column < kept)
    });
    let planes = HalvedPlanes {
        shape: &s,
        halving,
        data,
        weights,
        bias,
        mask,
    };
    // The steps of a row as a constant for rows of up to 32 outputs, so that they are
    // straight-line code.
    macro_rules! planes {
        ($($steps:literal)*) => {
            match (halving.steps, halving.joined) {
                $(
                    ($steps, false) => halve_planes::<S, $steps, false>(&planes, out),
                    ($steps, true) => halve_planes::<S, $steps, true>(&planes, out),
                )*
                (_, false) => halve_planes::<S, 0, false>(&planes, out),
                (_, true) => halve_planes::<S, 0, true>(&planes, out),
            }
        };
    }
    planes!(1 2 3 4 5 6 7 8)
}

/// What [`halve_planes`] reads: the operands of [`depthwise_3x3_s2`], its geometry and the mask of
/// a row's last step.
struct HalvedPlanes<'a> {
    shape: &'a ConvShape,
    halving: Halving,
    data: &'a [i32],
    weights: &'a PackedRows,
    bias: Option<&'a [i32]>,
    mask: [i16; STEP_COLUMNS],
}

/// Every output plane of [`depthwise_3x3_s2`] ([`halve_plane`]), with `STEPS` steps per row (0:
/// any number), the last steps of a pair of rows one if `JOINED` ([`Halving::joined`]). Not
/// inlined: its loops do not share conv2d's registers.
#[inline(never)]
fn halve_planes<S: Simd, const STEPS: usize, const JOINED: bool>(
    planes: &HalvedPlanes<'_>,
    out: &mut [i32],
) -> bool {
    let HalvedPlanes {
        shape: &s,
        halving,
        data,
        weights,
        bias,
        mask,
    } = *planes;
    let channel_len = s.height * s.width;
    let pixels = s.out_h * s.out_w;
    let zeros: Vec<i32> = vec![0; halving.span()];
    let mut copy: Vec<i32> = Vec::new();
    let reach = halving.reach();
    let bound = 9 * PRODUCT_BOUND;
    let stride = weights.stride();
    let multiplier = s.group_out();
    for n in 0..s.batch {
        for c in 0..s.in_channels {
            let from = (n * s.in_channels + c) * channel_len;
            let channel = match data.get(from..from + reach) {
                Some(values) => values,
                None => {
                    // The last rows of the last channel, whose reads reach past the data: a
                    // copy with zeros after it.
                    copy.clear();
                    copy.extend_from_slice(data.get(from..from + channel_len).unwrap_or_default());
                    copy.resize(reach, 0);
                    &copy
                }
            };
            for m in 0..multiplier {
                let oc = c * multiplier + m;
                let taps = weights
                    .values()
                    .get(oc * stride..)
                    .and_then(|row| row.first_chunk::<9>())
                    .copied()
                    .unwrap_or_default();
                let (addend, fits) = channel_bias(bias, oc, bound);
                let first = (n * s.out_channels + oc) * pixels;
                let rest = out.get_mut(first..).unwrap_or_default();
                let added = if fits { addend } else { 0 };
                let tap_weights = TapWeights::new::<S>(&taps, added, &mask);
                halve_plane::<S, STEPS, JOINED>(&halving, channel, &zeros, &tap_weights, rest);
                let plane = out.get_mut(first..first + pixels).unwrap_or_default();
                if !fits && !super::add_checked::<S>(plane, addend) {
                    return false;
                }
            }
        }
    }
    true
}

/// One output plane of [`depthwise_3x3_s2`], two pairs of output rows per iteration, the two
/// rows of a pair taken together ([`Taps::rows_paired`]), top to bottom so that a row's last step
/// may store past the row's end onto outputs written after it. A last row without a pair goes
/// alone ([`Taps::row_within`]). Rows of the padding (above the first input row, and below the
/// last when H is odd) are a row of zeros. The last rows of the last plane, whose last step would
/// store past the end of `out`, go through [`halve_row_at`].
///
/// `channel` holds the input channel and at least [`Halving::reach`] values; `zeros` at least
/// [`Halving::span`]; `out` the plane and every plane after it. `STEPS` is the number of steps of
/// a row when not 0, so that a row's steps are straight-line code with constant offsets; 0 takes
/// any number. `JOINED`: the last steps of a pair of rows are one ([`Halving::joined`]). Inlined into the loop over planes
/// ([`halve_planes`]): a call per plane costs more than the registers the two loops share.
#[inline(always)]
fn halve_plane<S: Simd, const STEPS: usize, const JOINED: bool>(
    halving: &Halving,
    channel: &[i32],
    zeros: &[i32],
    weights: &TapWeights,
    out: &mut [i32],
) {
    let Halving {
        width,
        height,
        out_h,
        out_w,
        steps,
        ..
    } = *halving;
    let steps = if STEPS > 0 { STEPS } else { steps };
    // The values a row is read over, and the outputs its steps store: constants with `STEPS`.
    // Index arithmetic wraps instead of being checked: every figure is within the sizes of the
    // validated shape, and every index is checked or clamped into its slice.
    let span = steps.wrapping_mul(STEP_COLUMNS);
    let stored = steps.wrapping_mul(4);
    let (Some(last_in), Some(last_out), Some(zeros)) = (
        channel.len().checked_sub(span),
        out.len().checked_sub(stored),
        zeros.get(..span),
    ) else {
        // Fewer values than a row's span; never reached (see `Halving::reach`).
        for p in 0..out_h {
            halve_row_at::<S, STEPS>(halving, channel, zeros, weights, p, out);
        }
        return;
    };
    // The rows before `end` store their last step within `out`: all of them but in the last
    // plane, whose last rows may not.
    let end = if out_h.wrapping_sub(1).wrapping_mul(out_w) <= last_out {
        out_h
    } else {
        (last_out / out_w.max(1)).wrapping_add(1).min(out_h)
    };
    // Outputs stored by a pair of rows: row p whole, and the steps of row p + 1. `last_pair` is
    // their last start in `out` (any pair before `end` fits).
    let pair_len = out_w.wrapping_add(stored);
    let last_pair = last_out.saturating_sub(out_w);
    let zeros: &[[i32; STEP_COLUMNS]] = zeros.as_chunks().0;
    // Input row r from `start` = r · W, or zeros for a row of the padding (r = H, or the row above
    // the first, which wraps to usize::MAX), chosen without a branch. The clamp never moves a
    // start (every input row lies within `channel` with its span): it spares the lookup an
    // `Option`.
    let row_in = |start: usize| -> &[[i32; STEP_COLUMNS]] {
        let start = start.min(last_in);
        channel[start..start + span].as_chunks().0
    };
    let row = |r: usize, start: usize| if r < height { row_in(start) } else { zeros };
    // Output row from `at`, clamped as the input rows are.
    #[inline(always)]
    fn quads(out: &mut [i32], at: usize, last: usize, stored: usize) -> &mut [[i32; 4]] {
        let at = at.min(last);
        out[at..at + stored].as_chunks_mut().0
    }
    let double_width = width.wrapping_mul(2);
    let mut p = 0;
    let mut r = usize::MAX; // input row 2p − 1, and its start
    let mut start = r.wrapping_mul(width);
    let mut at = 0; // output row p
    // Output rows p and p + 1, from input rows 2p − 1 to 2p + 3. Rows 2p to 2p + 2 lie within
    // the input (2p + 2 ≤ 2 · (OH − 1) ≤ H − 1): only the first and the last can be padding.
    // The first row of the next pair is the last of this one: `top` carries it.
    let mut top = zeros;
    macro_rules! pair {
        ($taps:expr) => {{
            let a = top;
            let b = row_in(start.wrapping_add(width));
            let c = row_in(start.wrapping_add(double_width));
            let d = row_in(start.wrapping_add(double_width).wrapping_add(width));
            let e = row(
                r.wrapping_add(4),
                start.wrapping_add(double_width.wrapping_mul(2)),
            );
            // Rows p and p + 1, clamped as the input rows are.
            let rows = {
                let at = at.min(last_pair);
                &mut out[at..at + pair_len]
            };
            $taps.rows_paired::<JOINED>([a, b, c, d, e], rows, out_w);
            top = e;
            p += 2;
            r = r.wrapping_add(4);
            start = start.wrapping_add(double_width.wrapping_mul(2));
            at = at.wrapping_add(out_w.wrapping_mul(2));
        }};
    }
    // Two pairs per iteration while they last, then one. The weights are loaded afresh for each
    // iteration: wasmtime checks fuel at the head of every loop with a call that clobbers every
    // vector register, so vectors carried around the loop would be stored and reloaded.
    while p + 3 < end {
        let taps = Taps::<S>::load(core::hint::black_box(weights));
        pair!(taps);
        pair!(taps);
    }
    if p + 1 < end {
        let taps = Taps::<S>::load(core::hint::black_box(weights));
        pair!(taps);
    }
    if p < end {
        let taps = Taps::<S>::load(core::hint::black_box(weights));
        let rows = [
            top,
            row_in(start.wrapping_add(width)),
            row(r.wrapping_add(2), start.wrapping_add(double_width)),
        ];
        taps.row_within(rows, quads(out, at, last_out, stored));
    }
    for p in end..out_h {
        halve_row_at::<S, STEPS>(halving, channel, zeros.as_flattened(), weights, p, out);
    }
}

/// Output row `p` of [`halve_plane`], its last step storing only the lanes within `out`
/// ([`Taps::row_at`]): for the last rows of the last plane.
#[inline(never)]
fn halve_row_at<S: Simd, const STEPS: usize>(
    halving: &Halving,
    channel: &[i32],
    zeros: &[i32],
    weights: &TapWeights,
    p: usize,
    out: &mut [i32],
) {
    let Halving {
        width,
        height,
        out_w,
        steps,
        ..
    } = *halving;
    let span = if STEPS > 0 { STEPS } else { steps }.wrapping_mul(STEP_COLUMNS);
    let row = |r: usize| -> Option<&[[i32; STEP_COLUMNS]]> {
        let values = if r < height {
            let from = r.wrapping_mul(width);
            channel.get(from..from.wrapping_add(span))
        } else {
            zeros.get(..span)
        };
        values.map(|values| values.as_chunks().0)
    };
    // Input rows 2p − 1 to 2p + 1 (wrapping: the padding row above the first is usize::MAX).
    let top = p.wrapping_mul(2).wrapping_sub(1);
    let rows = (row(top), row(top.wrapping_add(1)), row(top.wrapping_add(2)));
    if let (Some(a), Some(b), Some(c)) = rows {
        let taps = Taps::<S>::load(weights);
        taps.row_at([a, b, c], p.wrapping_mul(out_w), out);
    }
}

/// The vectors of [`Taps`] in memory, from which they are loaded for every pair of rows.
struct TapWeights {
    pairs: [[i16; STEP_COLUMNS]; 3],
    singles: [[i16; STEP_COLUMNS]; 3],
    addend: [i32; 4],
    mask: [i16; STEP_COLUMNS],
}

impl TapWeights {
    /// Per kernel row of `taps`, the pair (w1, w2) and the single (0, w0), each repeated four
    /// times; `addend` four times; and `mask`.
    #[inline(always)]
    fn new<S: Simd>(taps: &[i16; 9], addend: i32, mask: &[i16; STEP_COLUMNS]) -> Self {
        let mut weights = TapWeights {
            pairs: [[0; STEP_COLUMNS]; 3],
            singles: [[0; STEP_COLUMNS]; 3],
            addend: [addend; 4],
            mask: *mask,
        };
        for (ki, kernel_row) in taps.chunks_exact(3).enumerate().take(3) {
            if let [w0, w1, w2] = *kernel_row {
                S::store16(&mut weights.pairs[ki], S::pair16(w1, w2));
                S::store16(&mut weights.singles[ki], S::pair16(0, w0));
            }
        }
        weights
    }
}

/// What [`halve_plane`] hands each output row: per kernel row the weights of the pair
/// (2q, 2q + 1) of output q and of the tap at 2q + 1 of output q + 1, the bias, and the mask of
/// a row's last step.
#[derive(Clone, Copy)]
struct Taps<'a, S: Simd> {
    weights: [(S::I16x8, S::I16x8); 3],
    addend: S::I32x4,
    /// Loaded where it is used, once per row: kept in a register across the steps it would
    /// take one from them.
    mask: &'a [i16; STEP_COLUMNS],
}

impl<'a, S: Simd> Taps<'a, S> {
    #[inline(always)]
    fn load(weights: &'a TapWeights) -> Self {
        let weights_of = |ki: usize| {
            (
                S::load16(&weights.pairs[ki]),
                S::load16(&weights.singles[ki]),
            )
        };
        Taps {
            weights: [weights_of(0), weights_of(1), weights_of(2)],
            addend: S::load32(&weights.addend),
            mask: &weights.mask,
        }
    }

    /// One octet of a row narrowed to `i16`; `masked` keeps only the lanes of the mask (the
    /// row's last step).
    #[inline(always)]
    fn narrow(&self, octet: &[i32; STEP_COLUMNS], masked: bool) -> S::I16x8 {
        let (halves, _) = octet.as_chunks::<4>();
        let x = S::narrow32(S::load32(&halves[0]), S::load32(&halves[1]));
        if masked {
            S::and16(x, S::load16(self.mask))
        } else {
            x
        }
    }

    /// The four sums of one step from the narrowed octets of the three rows it reads; `carry`
    /// holds the step before's taps for the next output (zeros at the row's start: the left
    /// padding) and takes this step's.
    #[inline(always)]
    fn sums(&self, octets: [S::I16x8; 3], carry: &mut S::I32x4) -> S::I32x4 {
        let (mut near, mut far) = (self.addend, S::splat32(0));
        for (x, &(pair, single)) in octets.into_iter().zip(&self.weights) {
            near = S::dot_add(near, x, pair);
            far = S::dot_add(far, x, single);
        }
        let sums = S::add32(near, S::shift_in32(*carry, far));
        *carry = far;
        sums
    }

    /// [`Self::sums`] of one octet of each of the three rows a step reads.
    #[inline(always)]
    fn step(
        &self,
        octets: [&[i32; STEP_COLUMNS]; 3],
        carry: &mut S::I32x4,
        masked: bool,
    ) -> S::I32x4 {
        self.sums(octets.map(|octet| self.narrow(octet, masked)), carry)
    }

    /// The step of [`Self::rows_paired`] that takes the last two outputs of two rows: the first
    /// half of each octet from the upper row's reads, the second from the lower row's, masked;
    /// each half's taps for its next output shifted in with the carry of its own row
    /// ([`Simd::join_in32`]).
    #[inline(always)]
    fn joined_step(
        &self,
        upper: [&[i32; STEP_COLUMNS]; 3],
        lower: [&[i32; STEP_COLUMNS]; 3],
        carries: (S::I32x4, S::I32x4),
    ) -> S::I32x4 {
        let (mut near, mut far) = (self.addend, S::splat32(0));
        for ((up, low), &(pair, single)) in upper.iter().zip(lower).zip(&self.weights) {
            let (up, _) = up.as_chunks::<4>();
            let (low, _) = low.as_chunks::<4>();
            let x = S::and16(
                S::narrow32(S::load32(&up[0]), S::load32(&low[0])),
                S::load16(self.mask),
            );
            near = S::dot_add(near, x, pair);
            far = S::dot_add(far, x, single);
        }
        S::add32(near, S::join_in32(carries.0, carries.1, far))
    }

    /// Two output rows taken together: the steps but the last of both rows, a step of the upper
    /// row then the same step of the lower ([`Self::sums`]), the input row they share narrowed
    /// once; then the last steps, likewise, or if `JOINED` as one step for both rows' last two
    /// outputs ([`Self::joined_step`]). The upper row's last step stores only the row's outputs
    /// (the lower row's first are stored already); the lower row's stores four, those past the
    /// row landing on outputs stored after them. `inputs` are the five padded rows the pair reads
    /// (the upper row reads the first three, the lower the last three), each one octet per step;
    /// `rows` holds the upper output row (`out_w` outputs) and the lower row's steps.
    #[inline(always)]
    fn rows_paired<const JOINED: bool>(
        &self,
        inputs: [&[[i32; STEP_COLUMNS]]; 5],
        rows: &mut [i32],
        out_w: usize,
    ) {
        let [a, b, c, d, e] = inputs;
        let len = [b, c, d, e].iter().fold(a.len(), |len, r| len.min(r.len()));
        let Some(whole) = len.checked_sub(1) else {
            return;
        };
        let Some((up, low)) = rows.split_at_mut_checked(out_w) else {
            return; // `rows` holds the upper row; never reached
        };
        // The upper row's quads (`whole` of them, or `len` when a step ends the row), then what
        // follows them: two outputs when joined. The lower row's quads: `len`.
        let (up_quads, up_rest) = up.as_chunks_mut::<4>();
        let (Some((up_steps, up_last)), Some((low_steps, [low_last, ..]))) = (
            up_quads.split_at_mut_checked(whole),
            low.as_chunks_mut::<4>()
                .0
                .get_mut(..len)
                .map(|quads| quads.split_at_mut(whole)),
        ) else {
            return; // rows of more than 4 · whole outputs; never reached
        };
        let (mut up_carry, mut low_carry) = (S::splat32(0), S::splat32(0));
        straight_runs!(16, whole, |j| {
            let shared = self.narrow(&c[j], false);
            let upper = [self.narrow(&a[j], false), self.narrow(&b[j], false), shared];
            S::store32(&mut up_steps[j], self.sums(upper, &mut up_carry));
            let lower = [shared, self.narrow(&d[j], false), self.narrow(&e[j], false)];
            S::store32(&mut low_steps[j], self.sums(lower, &mut low_carry));
        });
        if JOINED {
            let sums = self.joined_step(
                [&a[whole], &b[whole], &c[whole]],
                [&c[whole], &d[whole], &e[whole]],
                (up_carry, low_carry),
            );
            if let (Some(up_pair), Some(low_pair)) = (
                up_rest.first_chunk_mut::<2>(),
                low_last.first_chunk_mut::<2>(),
            ) {
                S::store_pair32::<0>(up_pair, sums);
                S::store_pair32::<1>(low_pair, sums);
            }
            return;
        }
        let shared = self.narrow(&c[whole], true);
        let upper = [
            self.narrow(&a[whole], true),
            self.narrow(&b[whole], true),
            shared,
        ];
        let upper = self.sums(upper, &mut up_carry);
        // The upper row's last step: whole, or only the row's outputs when the row ends within it
        // (the lower row's first outputs are stored already).
        if let Some(quad) = up_last.first_mut() {
            S::store32(quad, upper);
        } else if let Some((pair, third)) = up_rest.split_first_chunk_mut::<2>() {
            S::store_pair32::<0>(pair, upper);
            if let Some(third) = third.first_mut() {
                S::store_lane32::<2>(third, upper);
            }
        } else if let Some(first) = up_rest.first_mut() {
            S::store_lane32::<0>(first, upper);
        }
        let lower = [
            shared,
            self.narrow(&d[whole], true),
            self.narrow(&e[whole], true),
        ];
        S::store32(low_last, self.sums(lower, &mut low_carry));
    }

    /// An output row stored whole into `quads`, four outputs per step, from the three padded
    /// rows it reads, each one octet per step: as many steps as the shortest of the four.
    #[inline(always)]
    fn row_within(&self, inputs: [&[[i32; STEP_COLUMNS]]; 3], quads: &mut [[i32; 4]]) {
        let [a, b, c] = inputs;
        let len = quads.len().min(a.len()).min(b.len()).min(c.len());
        let Some(whole) = len.checked_sub(1) else {
            return;
        };
        let mut carry = S::splat32(0);
        straight_runs!(16, whole, |j| {
            S::store32(
                &mut quads[j],
                self.step([&a[j], &b[j], &c[j]], &mut carry, false),
            );
        });
        let sums = self.step([&a[whole], &b[whole], &c[whole]], &mut carry, true);
        S::store32(&mut quads[whole], sums);
    }

    /// The output row from `at` in `out`, as [`Self::row_within`] but the last step stores only
    /// its lanes within `out`: those past the row land on the next row or plane, stored later;
    /// only past the end of `out` are they dropped.
    #[inline(always)]
    fn row_at(&self, inputs: [&[[i32; STEP_COLUMNS]]; 3], at: usize, out: &mut [i32]) {
        let [a, b, c] = inputs;
        let len = a.len().min(b.len()).min(c.len());
        let Some(whole) = len.checked_sub(1) else {
            return;
        };
        let quads = out
            .get_mut(at..)
            .unwrap_or_default()
            .as_chunks_mut::<4>()
            .0
            .get_mut(..whole);
        let Some(quads) = quads else {
            return; // an output row holds at least `whole` quads; never reached
        };
        let mut carry = S::splat32(0);
        straight_runs!(16, whole, |j| {
            S::store32(
                &mut quads[j],
                self.step([&a[j], &b[j], &c[j]], &mut carry, false),
            );
        });
        let sums = self.step([&a[whole], &b[whole], &c[whole]], &mut carry, true);
        store_quad::<S>(out, at.wrapping_add(whole.wrapping_mul(4)), sums);
    }
}

/// Stores `value` at `at` in `out`, only the lanes within `out` when the end is near.
#[inline(always)]
fn store_quad<S: Simd>(out: &mut [i32], at: usize, value: S::I32x4) {
    let target = out.get_mut(at..).unwrap_or_default();
    match target.first_chunk_mut::<4>() {
        Some(quad) => S::store32(quad, value),
        None => {
            let mut lanes = [0; 4];
            S::store32(&mut lanes, value);
            for (slot, lane) in target.iter_mut().zip(lanes) {
                *slot = lane;
            }
        }
    }
}
