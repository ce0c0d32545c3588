//! CINN `Conv` (spec 002): forward convolution and its two gradients (`backward_data`,
//! `backward_filter`) in Q(F) fixed point, NCHW or NHWC.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use super::Window;
use crate::attrs::{AttrKind, AttrSpec, Attrs, in_range, spec};
use crate::error::Result;
use crate::fail;
use crate::kernels::wide::wide_dot;
use crate::ops::common::{DataFormat, choice, count, io_usage, product};
use crate::ops::fixed_point::{ARITH_PRECISION, frac_bits, rescale};
use crate::ops::{Arity, Family, OpDef, Operator, Usage};
use crate::tensor::{TensorMut, TensorRef, TensorType};

/// Largest stride, padding and dilation of `Conv`.
const MAX_GEOMETRY: i64 = 4095;

/// The dimensions of a rank-4 operand.
///
/// # Errors
/// `ShapeMismatch` for another rank.
fn dims4(dims: &[u32], operand: &str) -> Result<[u32; 4]> {
    match dims {
        &[a, b, c, d] => Ok([a, b, c, d]),
        _ => Err(fail!(
            ShapeMismatch,
            "{operand} must have rank 4, got shape {dims:?}"
        )),
    }
}

/// Two-dimensional grouped convolution and its two gradients in Q(F) (spec 002 "Conv").
///
/// Notation: data tensors (x, y, grad_y, grad_x) are logically (N, C, H, W) and (N, OC, OH, OW),
/// stored in `data_format` ((N, H, W, C) for NHWC); weights and grad_w are always
/// (OC, ICg, KH, KW) with ICg = C / groups; OCg = OC / groups. Output channel oc belongs to group
/// g = ⌊oc / OCg⌋ and reads input channels g·ICg to (g + 1)·ICg − 1. Along the height, tap kh of
/// output row p reads input row h = p·SH − PT + kh·DH (the width likewise with SW, PL, DW); rows
/// outside [0, H) are zero padding.
///
/// - **Inputs**: by `conv_type`: "forward": lhs = x, rhs = weight; "backward_data": lhs = weight,
///   rhs = grad_y; "backward_filter": lhs = x, rhs = grad_y. All of rank 4, Q(F).
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `conv_type` | string | "forward" | "forward", "backward_data", "backward_filter" |
///   | `data_format` | string | "NCHW" | "NCHW", "NHWC" |
///   | `dilations` | pair (DH, DW) | (1, 1) | each in [1, 4095] |
///   | `frac_bits` | integer | 0 | [0, 30] |
///   | `groups` | integer | 1 | [1, 2^32 − 1]; must divide C and OC |
///   | `output_shape` | list of integers | empty | empty or 4 entries in [0, 2^32 − 1]; required (4 entries) for the backward types |
///   | `padding_algorithm` | string | "EXPLICIT" | "EXPLICIT", "SAME", "VALID" |
///   | `paddings` | pair (PH, PW) | (0, 0) | each in [0, 4095] |
///   | `strides` | pair (SH, SW) | (1, 1) | each in [1, 4095] |
///
/// - **Padding**: "EXPLICIT": PT = PB = PH and PL = PR = PW. "VALID": no padding. "SAME" (`paddings`
///   unused): OH = ⌈H / SH⌉, total = max((OH − 1)·SH + DH·(KH − 1) + 1 − H, 0), PT = ⌊total / 2⌋,
///   PB = total − PT (the smaller half before); the width likewise.
/// - **Output shape**: the extent is OH = ⌊(H + PT + PB − (DH·(KH − 1) + 1)) / SH⌋ + 1 (likewise
///   OW). forward: (N, OC, OH, OW) in `data_format`; `output_shape`, when given, must equal it.
///   backward_data: grad_x of shape `output_shape` (N, C, H, W in `data_format`), whose forward
///   extent must equal grad_y's (OH, OW), with N and OC agreeing. backward_filter: grad_w of shape
///   `output_shape` = (OC, ICg, KH, KW); grad_y's extent must equal the forward extent of x with
///   that kernel.
/// - **Semantics**:
///
///   ```text
///   forward:          y[n, oc, p, q]       = round(Σ_{ic, kh, kw} x[n, g·ICg + ic, h, w] · W[oc, ic, kh, kw] / 2^F)
///   backward_data:    grad_x[n, c, h, w]   = round(Σ gy[n, oc, p, q] · W[oc, c mod ICg, kh, kw] / 2^F)
///                       over oc in c's group and every (kh, p), (kw, q) with h = p·SH − PT + kh·DH,
///                       w = q·SW − PL + kw·DW
///   backward_filter:  grad_w[oc, ic, kh, kw] = round(Σ_{n, p, q} gy[n, oc, p, q] · x[n, g·ICg + ic, h, w] / 2^F)
///   ```
///
///   with zero outside the input. Strides and dilations above 1 may be combined.
/// - **Output precision**: 32.
/// - **Rounding and overflow**: each output element is an exact i128 sum rounded once, halves away
///   from zero; a result outside ±(2^31 − 1) is `IntegerOverflow`.
/// - **Errors**: `AttributeOutOfRange` (an unknown string, a value out of range, a pair without two
///   entries, an `output_shape` with other than 0 or 4 entries); `MissingAttribute` (`output_shape`
///   absent for a backward type); `ShapeMismatch` (an operand not of rank 4, `groups` not dividing
///   C or OC, ICg ≠ C / groups, an empty kernel, a dilated kernel longer than the padded input,
///   shapes inconsistent with `output_shape` or grad_y); `LimitExceeded` (an extent above
///   2^32 − 1); `IntegerOverflow`.
/// - **Working memory**, forward: one window, 4·T bytes.
pub const CONV: OpDef = OpDef {
    code: 195,
    name: "Conv",
    family: Family::Cinn,
    arity: Arity::Exactly(2),
    outputs: 1,
    attrs: CONV_ATTRS,
    build: Conv::build,
};

/// The attributes of CINN `Conv`, parsed by its builder.
const CONV_ATTRS: &[AttrSpec] = &[
    spec("conv_type", AttrKind::Str),
    spec("data_format", AttrKind::Str),
    spec("dilations", AttrKind::Ints),
    spec("frac_bits", AttrKind::Int),
    spec("groups", AttrKind::Int),
    spec("output_shape", AttrKind::Ints),
    spec("padding_algorithm", AttrKind::Str),
    spec("paddings", AttrKind::Ints),
    spec("strides", AttrKind::Ints),
];

/// Which convolution [`Conv`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvType {
    /// "forward": lhs = input, rhs = weight.
    Forward,
    /// "backward_data": lhs = weight, rhs = grad_y; the gradient with respect to the input.
    BackwardData,
    /// "backward_filter": lhs = input, rhs = grad_y; the gradient with respect to the weight.
    BackwardFilter,
}

/// How [`Conv`] pads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PaddingAlgorithm {
    /// "EXPLICIT": `paddings` before and after.
    Explicit,
    /// "SAME": output extent ⌈size / stride⌉, padding split with the smaller half before.
    Same,
    /// "VALID": no padding.
    Valid,
}

/// 2-D grouped convolution and its two gradients in Q(F) (spec 002 "Conv").
///
/// Notation: data tensors (input x, output y, grad_y, grad_x) are (N, C, H, W) / (N, OC, OH, OW)
/// stored in `data_format` ((N, H, W, C) / (N, OH, OW, OC) for NHWC); weights and grad_w are
/// always (OC, C/groups, KH, KW) (OIHW). ICg = C/groups, OCg = OC/groups; output channel oc
/// belongs to group g = ⌊oc / OCg⌋ and reads input channels g·ICg .. (g+1)·ICg. Along H (and W
/// likewise) the tap kh of output row p reads input row h = p·SH − PT + kh·DH; rows outside
/// [0, H) are zero padding.
///
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
#[derive(Debug)]
pub struct Conv {
    conv_type: ConvType,
    format: DataFormat,
    /// Strides, paddings, dilations and groups.
    window: Window,
    algorithm: PaddingAlgorithm,
    output_shape: Option<[u32; 4]>,
    frac: u32,
}

/// Geometry of one convolution in logical (NCHW, OIHW) terms.
#[derive(Debug)]
struct ConvGeometry {
    batch: usize,
    channels: usize,
    size: [usize; 2],
    out_channels: usize,
    group_channels: usize,
    kernel: [usize; 2],
    out: [usize; 2],
    pad_before: [i64; 2],
}

impl Conv {
    fn build(attrs: &Attrs<'_>, _n_inputs: usize) -> Result<Box<dyn Operator>> {
        let conv_type = choice(
            attrs,
            "conv_type",
            Some(ConvType::Forward),
            &[
                ("forward", ConvType::Forward),
                ("backward_data", ConvType::BackwardData),
                ("backward_filter", ConvType::BackwardFilter),
            ],
        )?;
        let algorithm = choice(
            attrs,
            "padding_algorithm",
            Some(PaddingAlgorithm::Explicit),
            &[
                ("EXPLICIT", PaddingAlgorithm::Explicit),
                ("SAME", PaddingAlgorithm::Same),
                ("VALID", PaddingAlgorithm::Valid),
            ],
        )?;
        let output_shape = match attrs.opt_ints("output_shape") {
            None | Some([]) => None,
            Some(&[a, b, c, d]) => {
                let dim = |value| in_range("output_shape", value, 0, i64::from(u32::MAX));
                Some([dim(a)?, dim(b)?, dim(c)?, dim(d)?])
            }
            Some(other) => {
                return Err(fail!(
                    AttributeOutOfRange,
                    "attribute \"output_shape\" must have 4 entries, not {}",
                    other.len()
                ));
            }
        };
        if conv_type != ConvType::Forward && output_shape.is_none() {
            return Err(if attrs.opt_ints("output_shape").is_none() {
                fail!(
                    MissingAttribute,
                    "attribute \"output_shape\" is required for conv_type {conv_type:?}"
                )
            } else {
                fail!(
                    AttributeOutOfRange,
                    "attribute \"output_shape\" must have 4 entries for conv_type {conv_type:?}"
                )
            });
        }
        Ok(Box::new(Conv {
            conv_type,
            format: DataFormat::parse(attrs)?,
            window: Window::parse(attrs, ["strides", "paddings", "dilations"], MAX_GEOMETRY)?,
            algorithm,
            output_shape,
            frac: frac_bits(attrs)?,
        }))
    }

    /// Output extent and padding before, along spatial axis `axis` (0: height, 1: width).
    fn spatial(&self, size: u32, kernel: u32, axis: usize) -> Result<(u32, i64)> {
        let name = if axis == 0 { "height" } else { "width" };
        let stride = i64::from(self.window.strides[axis]);
        let dilation = i64::from(self.window.dilation[axis]);
        let size = i64::from(size);
        let span = dilation * (i64::from(kernel) - 1) + 1;
        let (before, after) = match self.algorithm {
            PaddingAlgorithm::Explicit => {
                let pad = i64::from(self.window.padding[axis]);
                (pad, pad)
            }
            PaddingAlgorithm::Valid => (0, 0),
            PaddingAlgorithm::Same => {
                let out = (size + stride - 1) / stride;
                let total = ((out - 1) * stride + span - size).max(0);
                (total / 2, total - total / 2)
            }
        };
        let padded = size + before + after;
        if padded < span {
            return Err(fail!(
                ShapeMismatch,
                "the dilated kernel spans {span} along {name}, more than the padded input's {padded}"
            ));
        }
        let out = (padded - span) / stride + 1;
        let out = u32::try_from(out)
            .map_err(|_| fail!(LimitExceeded, "output {name} {out} exceeds 2^32 − 1"))?;
        Ok((out, before))
    }

    /// Validated geometry from logical input dims `x` (N, C, H, W) and weight dims `w`
    /// (OC, ICg, KH, KW).
    fn geometry_of(&self, x: [u32; 4], w: [u32; 4]) -> Result<ConvGeometry> {
        let [batch, channels, height, width] = x;
        let [out_channels, group_channels, kernel_h, kernel_w] = w;
        let groups = self.window.groups;
        if groups > channels || channels % groups != 0 {
            return Err(fail!(
                ShapeMismatch,
                "groups = {groups} must lie in [1, C] and divide the input channels C = {channels}"
            ));
        }
        if out_channels % groups != 0 {
            return Err(fail!(
                ShapeMismatch,
                "groups = {groups} must divide the output channels OC = {out_channels}"
            ));
        }
        if group_channels != channels / groups {
            return Err(fail!(
                ShapeMismatch,
                "the weight has {group_channels} input channels per group; C / groups = {}",
                channels / groups
            ));
        }
        if kernel_h == 0 || kernel_w == 0 {
            return Err(fail!(
                ShapeMismatch,
                "the kernel {kernel_h}x{kernel_w} is empty"
            ));
        }
        let (out_h, pad_top) = self.spatial(height, kernel_h, 0)?;
        let (out_w, pad_left) = self.spatial(width, kernel_w, 1)?;
        Ok(ConvGeometry {
            batch: batch as usize,
            channels: channels as usize,
            size: [height as usize, width as usize],
            out_channels: out_channels as usize,
            group_channels: group_channels as usize,
            kernel: [kernel_h as usize, kernel_w as usize],
            out: [out_h as usize, out_w as usize],
            pad_before: [pad_top, pad_left],
        })
    }

    /// The geometry and the output's stored dimensions for operands `lhs`, `rhs`.
    fn plan(&self, lhs: &[u32], rhs: &[u32]) -> Result<(ConvGeometry, [u32; 4])> {
        let format = self.format;
        match self.conv_type {
            ConvType::Forward => {
                let x = format.logical(dims4(lhs, "input (lhs)")?);
                let w = dims4(rhs, "weight (rhs)")?;
                let g = self.geometry_of(x, w)?;
                let out = format.physical([x[0], w[0], g.out[0] as u32, g.out[1] as u32]);
                if let Some(expected) = self.output_shape
                    && expected != out
                {
                    return Err(fail!(
                        ShapeMismatch,
                        "attribute output_shape = {expected:?} differs from the forward output {out:?}"
                    ));
                }
                Ok((g, out))
            }
            ConvType::BackwardData => {
                let w = dims4(lhs, "weight (lhs)")?;
                let grad_y = format.logical(dims4(rhs, "grad_y (rhs)")?);
                let out = self.output_shape.unwrap_or_default();
                let x = format.logical(out);
                let g = self.geometry_of(x, w)?;
                self.check_grad_y(&g, grad_y)?;
                Ok((g, out))
            }
            ConvType::BackwardFilter => {
                let x = format.logical(dims4(lhs, "input (lhs)")?);
                let grad_y = format.logical(dims4(rhs, "grad_y (rhs)")?);
                let out = self.output_shape.unwrap_or_default();
                let g = self.geometry_of(x, out)?;
                self.check_grad_y(&g, grad_y)?;
                Ok((g, out))
            }
        }
    }

    /// Checks that grad_y (logical dims) is the forward output of the geometry.
    fn check_grad_y(&self, g: &ConvGeometry, grad_y: [u32; 4]) -> Result<()> {
        let expected = [g.batch, g.out_channels, g.out[0], g.out[1]].map(|d| d as u32);
        if grad_y == expected {
            Ok(())
        } else {
            Err(fail!(
                ShapeMismatch,
                "grad_y has logical shape (N, OC, OH, OW) = {grad_y:?}, but the forward convolution of these shapes (output_shape {:?}) gives {expected:?}",
                self.output_shape.unwrap_or_default()
            ))
        }
    }

    fn forward(&self, g: &ConvGeometry, x: &[i32], w: &[i32], y: &mut [i32]) -> Result<()> {
        let xs = self
            .format
            .strides([g.batch, g.channels, g.size[0], g.size[1]]);
        let ys = self
            .format
            .strides([g.batch, g.out_channels, g.out[0], g.out[1]]);
        let [kh_n, kw_n] = g.kernel;
        let taps = g.group_channels * kh_n * kw_n;
        let [stride_h, stride_w] = self.window.strides.map(i64::from);
        let [dil_h, dil_w] = self.window.dilation.map(i64::from);
        let [height, width] = g.size.map(|s| s as i64);
        let groups = self.window.groups as usize;
        let out_per_group = g.out_channels / groups;
        // The window of one output position, in the weights' (ic, kh, kw) order, zero where it
        // covers padding: each output is then one exact dot product with a weight row.
        let mut patch = vec![0i32; taps];
        for n in 0..g.batch {
            for group in 0..groups {
                for p in 0..g.out[0] {
                    let row0 = p as i64 * stride_h - g.pad_before[0];
                    for q in 0..g.out[1] {
                        let col0 = q as i64 * stride_w - g.pad_before[1];
                        let mut slots = patch.iter_mut();
                        for ic in 0..g.group_channels {
                            let c = group * g.group_channels + ic;
                            for kh in 0..kh_n {
                                let h = row0 + kh as i64 * dil_h;
                                for kw in 0..kw_n {
                                    let col = col0 + kw as i64 * dil_w;
                                    let value = if h < 0 || h >= height || col < 0 || col >= width {
                                        0
                                    } else {
                                        x[n * xs[0]
                                            + c * xs[1]
                                            + h as usize * xs[2]
                                            + col as usize * xs[3]]
                                    };
                                    if let Some(slot) = slots.next() {
                                        *slot = value;
                                    }
                                }
                            }
                        }
                        for oc in group * out_per_group..(group + 1) * out_per_group {
                            // Exact: at most ICg·KH·KW ≤ 2^26 products below 2^62
                            // (kernels::wide).
                            let acc = wide_dot(&patch, &w[oc * taps..(oc + 1) * taps]);
                            y[n * ys[0] + oc * ys[1] + p * ys[2] + q * ys[3]] =
                                rescale(acc, self.frac)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn backward_data(
        &self,
        g: &ConvGeometry,
        w: &[i32],
        grad_y: &[i32],
        grad_x: &mut [i32],
    ) -> Result<()> {
        let xs = self
            .format
            .strides([g.batch, g.channels, g.size[0], g.size[1]]);
        let ys = self
            .format
            .strides([g.batch, g.out_channels, g.out[0], g.out[1]]);
        let [kh_n, kw_n] = g.kernel;
        let ws = [g.group_channels * kh_n * kw_n, kh_n * kw_n, kw_n];
        let taps_h = Taps::new(
            self.window.strides[0],
            self.window.dilation[0],
            kh_n,
            g.out[0],
        );
        let taps_w = Taps::new(
            self.window.strides[1],
            self.window.dilation[1],
            kw_n,
            g.out[1],
        );
        let groups = self.window.groups as usize;
        let out_per_group = g.out_channels / groups;
        for n in 0..g.batch {
            for group in 0..groups {
                for ic in 0..g.group_channels {
                    let c = group * g.group_channels + ic;
                    for h in 0..g.size[0] {
                        let Some(rows) = taps_h.range(h as i64 + g.pad_before[0]) else {
                            continue; // no tap reaches this row: grad_x stays 0
                        };
                        for col in 0..g.size[1] {
                            let Some(cols) = taps_w.range(col as i64 + g.pad_before[1]) else {
                                continue;
                            };
                            // At most OCg·KH·KW ≤ 2^26 products below 2^62: exact in i128.
                            let mut acc = 0i128;
                            for oc in group * out_per_group..(group + 1) * out_per_group {
                                let mut kh = rows.first;
                                while kh <= rows.last {
                                    let p = rows.position(kh);
                                    let mut kw = cols.first;
                                    while kw <= cols.last {
                                        let q = cols.position(kw);
                                        let gv =
                                            grad_y[n * ys[0] + oc * ys[1] + p * ys[2] + q * ys[3]];
                                        let wv = w[oc * ws[0]
                                            + ic * ws[1]
                                            + kh as usize * ws[2]
                                            + kw as usize];
                                        acc += i128::from(i64::from(gv) * i64::from(wv));
                                        kw += cols.step;
                                    }
                                    kh += rows.step;
                                }
                            }
                            grad_x[n * xs[0] + c * xs[1] + h * xs[2] + col * xs[3]] =
                                rescale(acc, self.frac)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn backward_filter(
        &self,
        g: &ConvGeometry,
        x: &[i32],
        grad_y: &[i32],
        grad_w: &mut [i32],
    ) -> Result<()> {
        let xs = self
            .format
            .strides([g.batch, g.channels, g.size[0], g.size[1]]);
        let ys = self
            .format
            .strides([g.batch, g.out_channels, g.out[0], g.out[1]]);
        let [kh_n, kw_n] = g.kernel;
        let ws = [g.group_channels * kh_n * kw_n, kh_n * kw_n, kw_n];
        let [stride_h, stride_w] = self.window.strides.map(i64::from);
        let [dil_h, dil_w] = self.window.dilation.map(i64::from);
        let [height, width] = g.size.map(|s| s as i64);
        let groups = self.window.groups as usize;
        let out_per_group = g.out_channels / groups;
        for group in 0..groups {
            for oc in group * out_per_group..(group + 1) * out_per_group {
                for ic in 0..g.group_channels {
                    let c = group * g.group_channels + ic;
                    for kh in 0..kh_n {
                        for kw in 0..kw_n {
                            // At most N·OH·OW ≤ 2^26 products below 2^62: exact in i128.
                            let mut acc = 0i128;
                            for n in 0..g.batch {
                                for p in 0..g.out[0] {
                                    let h =
                                        p as i64 * stride_h - g.pad_before[0] + kh as i64 * dil_h;
                                    if h < 0 || h >= height {
                                        continue;
                                    }
                                    for q in 0..g.out[1] {
                                        let col = q as i64 * stride_w - g.pad_before[1]
                                            + kw as i64 * dil_w;
                                        if col < 0 || col >= width {
                                            continue;
                                        }
                                        let gv =
                                            grad_y[n * ys[0] + oc * ys[1] + p * ys[2] + q * ys[3]];
                                        let xv = x[n * xs[0]
                                            + c * xs[1]
                                            + h as usize * xs[2]
                                            + col as usize * xs[3]];
                                        acc += i128::from(i64::from(gv) * i64::from(xv));
                                    }
                                }
                            }
                            grad_w[oc * ws[0] + ic * ws[1] + kh * ws[2] + kw] =
                                rescale(acc, self.frac)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// The kernel taps that reach one input position in backward_data, along one spatial axis.
///
/// Position t (input index + padding before) receives tap k from output index
/// p = (t − k·D) / S whenever that is an integer in [0, OUT). The valid k form an arithmetic
/// progression with step S / gcd(S, D); `first_by_residue[t mod S]` is its smallest member in
/// 0..step (or −1 when no k solves k·D ≡ t (mod S)).
struct Taps {
    stride: i64,
    dilation: i64,
    kernel: i64,
    out: i64,
    step: i64,
    first_by_residue: Vec<i64>,
}

/// Valid taps of one position: k = first, first + step, …, ≤ last.
struct TapRange {
    first: i64,
    last: i64,
    step: i64,
    t: i64,
    stride: i64,
    dilation: i64,
}

impl TapRange {
    /// The output index tap `k` comes from.
    fn position(&self, k: i64) -> usize {
        ((self.t - k * self.dilation) / self.stride) as usize
    }
}

impl Taps {
    fn new(stride: u32, dilation: u32, kernel: usize, out: usize) -> Taps {
        let (stride, dilation) = (i64::from(stride), i64::from(dilation));
        let (mut a, mut b) = (stride, dilation);
        while b != 0 {
            (a, b) = (b, a % b);
        }
        let step = stride / a.max(1);
        let mut first_by_residue = vec![-1i64; stride as usize];
        for k in 0..step {
            if let Some(slot) = first_by_residue.get_mut(((k * dilation) % stride) as usize) {
                *slot = k;
            }
        }
        Taps {
            stride,
            dilation,
            kernel: kernel as i64,
            out: out as i64,
            step,
            first_by_residue,
        }
    }

    /// The taps reaching position `t` ≥ 0, if any.
    fn range(&self, t: i64) -> Option<TapRange> {
        if self.out == 0 {
            return None;
        }
        let k0 = *self
            .first_by_residue
            .get(usize::try_from(t % self.stride).ok()?)?;
        if k0 < 0 {
            return None;
        }
        // p ≤ OUT − 1  ⇔  k ≥ (t − (OUT − 1)·S) / D;  p ≥ 0  ⇔  k ≤ t / D.
        let low = ceil_div(t - (self.out - 1) * self.stride, self.dilation).max(0);
        let last = (t / self.dilation).min(self.kernel - 1);
        let first = if low > k0 {
            k0 + ceil_div(low - k0, self.step) * self.step
        } else {
            k0
        };
        (first <= last).then_some(TapRange {
            first,
            last,
            step: self.step,
            t,
            stride: self.stride,
            dilation: self.dilation,
        })
    }
}

/// ⌈a / b⌉ for b > 0.
fn ceil_div(a: i64, b: i64) -> i64 {
    -(-a).div_euclid(b)
}

impl Operator for Conv {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let (_, out) = self.plan(inputs[0].dims(), inputs[1].dims())?;
        Ok(vec![TensorType::new(out, ARITH_PRECISION)])
    }

    fn usage(&self, inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        // Every type: (elements of y or grad_y) × ICg·KH·KW, read off the weight's shape.
        let (products, weight, class) = match self.conv_type {
            ConvType::Forward => (outputs[0].shape.elements(), inputs[1].dims(), "forward"),
            ConvType::BackwardData => (
                inputs[1].shape.elements(),
                inputs[0].dims(),
                "backward_data",
            ),
            ConvType::BackwardFilter => (
                inputs[1].shape.elements(),
                outputs[0].dims(),
                "backward_filter",
            ),
        };
        let mut factors = vec![products];
        factors.extend(weight.iter().skip(1).map(|&d| u64::from(d)));
        let mut usage = io_usage(inputs, outputs)?;
        usage.class = class;
        usage.work.macs = count(&factors)?;
        if self.conv_type == ConvType::Forward {
            // Every output window (image, group, output position) covers ICg·KH·KW input
            // elements, whichever output channels of its group it serves (as conv2d counts).
            let (g, _) = self.plan(inputs[0].dims(), inputs[1].dims())?;
            usage.work.taps = count(&[
                g.batch as u64,
                u64::from(self.window.groups),
                g.out[0] as u64,
                g.out[1] as u64,
                g.group_channels as u64,
                g.kernel[0] as u64,
                g.kernel[1] as u64,
            ])?;
        }
        Ok(usage)
    }

    /// The forward type's window of one output position (ICg·KH·KW values).
    fn scratch_bytes(&self, inputs: &[TensorType]) -> Result<u64> {
        if self.conv_type != ConvType::Forward {
            return Ok(0);
        }
        let (g, _) = self.plan(inputs[0].dims(), inputs[1].dims())?;
        let [kh, kw] = g.kernel.map(|k| k as u64);
        count(&[g.group_channels as u64, kh, kw, 4])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let (g, out) = self.plan(inputs[0].dims, inputs[1].dims)?;
        let (lhs, rhs) = (inputs[0].data, inputs[1].data);
        let expected = [
            product(inputs[0].dims),
            product(inputs[1].dims),
            product(&out),
        ];
        if [lhs.len(), rhs.len(), outputs[0].data.len()] != expected {
            return Err(fail!(
                ShapeMismatch,
                "Conv operands do not hold the elements of their shapes"
            ));
        }
        let result = &mut *outputs[0].data;
        match self.conv_type {
            ConvType::Forward => self.forward(&g, lhs, rhs, result),
            ConvType::BackwardData => self.backward_data(&g, lhs, rhs, result),
            ConvType::BackwardFilter => self.backward_filter(&g, lhs, rhs, result),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taps_match_a_brute_force_search() {
        for stride in 1..=5u32 {
            for dilation in 1..=4u32 {
                for kernel in 1..=4usize {
                    for out in 0..=4usize {
                        let taps = Taps::new(stride, dilation, kernel, out);
                        for t in 0..30i64 {
                            let expected: Vec<(i64, usize)> = (0..kernel as i64)
                                .filter_map(|k| {
                                    let rest = t - k * i64::from(dilation);
                                    (rest >= 0
                                        && rest % i64::from(stride) == 0
                                        && rest / i64::from(stride) < out as i64)
                                        .then(|| (k, (rest / i64::from(stride)) as usize))
                                })
                                .collect();
                            let mut got = Vec::new();
                            if let Some(range) = taps.range(t) {
                                let mut k = range.first;
                                while k <= range.last {
                                    got.push((k, range.position(k)));
                                    k += range.step;
                                }
                            }
                            assert_eq!(
                                got, expected,
                                "s {stride} d {dilation} k {kernel} out {out} t {t}"
                            );
                        }
                    }
                }
            }
        }
    }
}
