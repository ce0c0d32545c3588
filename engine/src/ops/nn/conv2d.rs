//! `conv2d` (spec 001) on the vector convolution kernels.

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;

use super::{
    MAX_ATTR, Window, bias_overflow, check_layout, check_mac_precision, mac_precision,
    vector_reduction,
};
use crate::attrs::{AttrKind, Attrs, in_range, pair_in_range, spec};
use crate::error::Result;
use crate::fail;
use crate::kernels::simd::Native;
use crate::kernels::{self, ConvShape};
use crate::kernels::{PackOrder, PackedRows};
use crate::ops::common::{count, expect_inputs, expect_rank, io_usage};
use crate::ops::{Arity, Family, OpDef, Operator, Usage};
use crate::tensor::{TensorMut, TensorRef, TensorType};

/// Two-dimensional grouped convolution of NCHW data with OIHW weights (spec 001 "conv2d").
///
/// - **Inputs**: `X` (N, C, H, W); `W` (OC, IC, KH, KW) with IC = C / groups; `B` (OC) when
///   `use_bias` is true. The number of inputs is fixed by `use_bias`: 3 when true (the default),
///   2 when false.
/// - **Attributes**:
///
///   | name | kind | default | allowed values |
///   | --- | --- | --- | --- |
///   | `channels` | integer | absent | [1, 2^32 − 1]; when present must equal OC |
///   | `dilation` | pair (DH, DW) | (1, 1) | each in [1, 4096] |
///   | `groups` | integer | 1 | [1, 2^32 − 1]; must be ≤ C and divide both C and OC |
///   | `kernel_layout` | string | absent (OIHW) | `"OIHW"` |
///   | `kernel_size` | pair | absent | each in [1, 2^32 − 1]; when present must equal (KH, KW) |
///   | `layout` | string | absent (NCHW) | `"NCHW"` |
///   | `out_dtype` | string | absent | `"same"` or `"int32"` |
///   | `out_layout` | string | absent | `""`, `"__undef__"` or `"NCHW"` |
///   | `padding` | pair (PH, PW) | (0, 0) | each in [0, 4096] |
///   | `strides` | pair (SH, SW) | (1, 1) | each in [1, 4096] |
///   | `use_bias` | boolean | true | decides the number of inputs |
///
/// - **Output shape**: (N, OC, OH, OW) with
///   OH = ⌊(H + 2·PH − DH·(KH − 1) − 1) / SH⌋ + 1 and
///   OW = ⌊(W + 2·PW − DW·(KW − 1) − 1) / SW⌋ + 1.
/// - **Semantics**: with OPG = OC / groups,
///
///   ```text
///   Y[n, oc, p, q] = B[oc] + Σ_{ic < IC} Σ_{ki < KH} Σ_{kj < KW}
///                    pad(n, (oc ÷ OPG)·IC + ic, p·SH − PH + ki·DH, q·SW − PW + kj·DW) · W[oc, ic, ki, kj]
///   ```
///
///   where `pad(n, c, h, w)` is `X[n, c, h, w]` for h in [0, H) and w in [0, W) and 0 elsewhere
///   (zero padding), and B[oc] is 0 without bias. Output channel oc reads the input channels of its
///   group, (oc ÷ OPG)·IC to (oc ÷ OPG)·IC + IC − 1.
/// - **Output precision**: `X` and `W` must have precision ≤ 8 (the bias may have any). The output
///   precision is pX + pW + bits(IC·KH·KW); with a bias, max(that, pB) + 1.
/// - **Rounding and overflow**: exact. The products run in 32-bit vector lanes (`engine/src/kernels/`):
///   with 8-bit operands and an output precision ≤ 32 every partial sum stays below 2^30 in any
///   summation order, so no lane wraps; the bias is then added with a checked addition.
/// - **Errors**, in order:
///   1. `layout`, `kernel_layout`, `out_layout` or `out_dtype` not one of the values above:
///      `AttributeOutOfRange`.
///   2. Number of inputs other than 3 with `use_bias` true, or 2 with `use_bias` false:
///      `ArityMismatch`.
///   3. `channels`, `kernel_size`, `strides`, `padding`, `dilation` or `groups` outside its range,
///      or a pair with other than two entries: `AttributeOutOfRange`.
///   4. `X` or `W` not of rank 4: `ShapeMismatch`.
///   5. `groups` > C or not dividing C; `groups` not dividing OC; IC ≠ C / groups; KH or KW = 0;
///      `channels` ≠ OC; `kernel_size` ≠ (KH, KW); a dilated kernel DH·(KH − 1) + 1 longer than the
///      padded height H + 2·PH (likewise for the width): `ShapeMismatch`. An output extent above
///      2^32 − 1: `LimitExceeded`.
///   6. `B` not of shape (OC): `ShapeMismatch`.
///   7. pX > 8 or pW > 8: `PrecisionConstraint`.
///   8. Output precision above 32: `PrecisionOverflow`.
pub const CONV2D: OpDef = OpDef {
    code: 20,
    name: "conv2d",
    family: Family::Nn,
    arity: Arity::Between(2, 3),
    outputs: 1,
    attrs: &[
        spec("channels", AttrKind::Int),
        spec("dilation", AttrKind::Ints),
        spec("groups", AttrKind::Int),
        spec("kernel_layout", AttrKind::Str),
        spec("kernel_size", AttrKind::Ints),
        spec("layout", AttrKind::Str),
        spec("out_dtype", AttrKind::Str),
        spec("out_layout", AttrKind::Str),
        spec("padding", AttrKind::Ints),
        spec("strides", AttrKind::Ints),
        spec("use_bias", AttrKind::Bool),
    ],
    build: Conv2d::build,
};

/// 2-D grouped convolution, NCHW data and OIHW weights (spec 001 "conv2d").
///
/// Its contract (inputs, shapes, precision, errors) is the doc comment of the row that
/// builds it.
#[derive(Debug)]
pub struct Conv2d {
    channels: Option<u32>,
    kernel_size: Option<[u32; 2]>,
    /// Strides, padding, dilation and groups.
    window: Window,
    use_bias: bool,
    /// The weights packed at load time, when they are a parameter.
    packed: Option<Arc<PackedRows>>,
}

impl Conv2d {
    fn build(attrs: &Attrs<'_>, n_inputs: usize) -> Result<Box<dyn Operator>> {
        check_layout(attrs, "layout", &["NCHW"])?;
        check_layout(attrs, "kernel_layout", &["OIHW"])?;
        check_layout(attrs, "out_layout", &["", "__undef__", "NCHW"])?;
        check_layout(attrs, "out_dtype", &["same", "int32"])?;
        let use_bias = attrs.bool_or("use_bias", true);
        expect_inputs(
            n_inputs,
            if use_bias { 3 } else { 2 },
            if use_bias {
                "with use_bias = true (the default)"
            } else {
                "with use_bias = false"
            },
        )?;
        let channels = match attrs.opt_int("channels") {
            Some(value) => Some(in_range("channels", value, 1, i64::from(u32::MAX))?),
            None => None,
        };
        let kernel_size = match attrs.opt_ints("kernel_size") {
            Some(values) => Some(pair_in_range(
                "kernel_size",
                values,
                1,
                i64::from(u32::MAX),
            )?),
            None => None,
        };
        Ok(Box::new(Conv2d {
            channels,
            kernel_size,
            window: Window::parse(attrs, ["strides", "padding", "dilation"], MAX_ATTR)?,
            use_bias,
            packed: None,
        }))
    }

    fn geometry(&self, data: &[u32], weight: &[u32]) -> Result<ConvShape> {
        let [batch, in_channels, height, width] = [data[0], data[1], data[2], data[3]];
        let [out_channels, group_in_channels, kernel_h, kernel_w] =
            [weight[0], weight[1], weight[2], weight[3]];
        if self.window.groups > in_channels || in_channels % self.window.groups != 0 {
            return Err(fail!(
                ShapeMismatch,
                "groups = {} must lie in [1, C] and divide C = {in_channels}",
                self.window.groups
            ));
        }
        if out_channels % self.window.groups != 0 {
            return Err(fail!(
                ShapeMismatch,
                "groups = {} must divide the output channels OC = {out_channels}",
                self.window.groups
            ));
        }
        if group_in_channels != in_channels / self.window.groups {
            return Err(fail!(
                ShapeMismatch,
                "weight shape {:?} needs C / groups = {} input channels per group, has {group_in_channels}",
                weight,
                in_channels / self.window.groups
            ));
        }
        if kernel_h == 0 || kernel_w == 0 {
            return Err(fail!(
                ShapeMismatch,
                "kernel {kernel_h}x{kernel_w} is empty"
            ));
        }
        if let Some(channels) = self.channels
            && channels != out_channels
        {
            return Err(fail!(
                ShapeMismatch,
                "attribute channels = {channels} differs from the weight's {out_channels} output channels"
            ));
        }
        if let Some(kernel_size) = self.kernel_size
            && kernel_size != [kernel_h, kernel_w]
        {
            return Err(fail!(
                ShapeMismatch,
                "attribute kernel_size = {kernel_size:?} differs from the weight's {kernel_h}x{kernel_w}"
            ));
        }
        let out_h = conv_extent(
            height,
            self.window.padding[0],
            self.window.dilation[0],
            kernel_h,
            self.window.strides[0],
            "height",
        )?;
        let out_w = conv_extent(
            width,
            self.window.padding[1],
            self.window.dilation[1],
            kernel_w,
            self.window.strides[1],
            "width",
        )?;
        Ok(ConvShape {
            batch: batch as usize,
            in_channels: in_channels as usize,
            height: height as usize,
            width: width as usize,
            out_channels: out_channels as usize,
            groups: self.window.groups as usize,
            kernel_h: kernel_h as usize,
            kernel_w: kernel_w as usize,
            out_h: out_h as usize,
            out_w: out_w as usize,
            strides: self.window.strides.map(|v| v as usize),
            padding: self.window.padding.map(|v| v as usize),
            dilation: self.window.dilation.map(|v| v as usize),
        })
    }
}

impl Operator for Conv2d {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let (data, weight) = (&inputs[0], &inputs[1]);
        expect_rank(data, 4, "data")?;
        expect_rank(weight, 4, "weight")?;
        let geometry = self.geometry(data.dims(), weight.dims())?;
        let bias = if self.use_bias {
            let bias = &inputs[2];
            if bias.dims() != [geometry.out_channels as u32] {
                return Err(fail!(
                    ShapeMismatch,
                    "bias must have shape [{}] (one per output channel), got {}",
                    geometry.out_channels,
                    bias.shape
                ));
            }
            Some(bias)
        } else {
            None
        };
        check_mac_precision(data, "data")?;
        check_mac_precision(weight, "weight")?;
        let reduction = count(&[
            geometry.group_in() as u64,
            geometry.kernel_h as u64,
            geometry.kernel_w as u64,
        ])?;
        let precision = mac_precision(data, weight, reduction, bias)?;
        Ok(vec![TensorType::new(
            [
                geometry.batch as u32,
                geometry.out_channels as u32,
                geometry.out_h as u32,
                geometry.out_w as u32,
            ],
            precision,
        )])
    }

    fn usage(&self, inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        let (data, weight) = (inputs[0].dims(), inputs[1].dims());
        let out_elements = outputs[0].shape.elements();
        let reduction = count(&[weight[1], weight[2], weight[3]].map(u64::from))?;
        let class = if self.window.groups > 1 && self.window.groups == data[1] {
            // Strides of 3 or more, a dilated stride of 2, or more padding than a "same"
            // convolution's: windows spread over the input or into the padding.
            let irregular = (0..2).any(|axis| {
                let extent = u64::from(self.window.dilation[axis])
                    * u64::from(weight[2 + axis]).saturating_sub(1)
                    + 1;
                self.window.strides[axis] >= 3
                    || (self.window.strides[axis] == 2 && self.window.dilation[axis] > 1)
                    || 2 * u64::from(self.window.padding[axis]) >= extent
            });
            if irregular {
                "depthwise irregular"
            } else {
                "depthwise"
            }
        } else if mostly_padding(data, self.window.padding) {
            "padded"
        } else if self.window.groups > 1 {
            "grouped"
        } else if weight[2] == 1 && weight[3] == 1 {
            "pointwise"
        } else {
            "dense"
        };
        let per_output = if class.starts_with("depthwise") {
            reduction
        } else {
            vector_reduction(reduction)
        };
        let mut usage = io_usage(inputs, outputs)?;
        usage.class = class;
        usage.work.macs = count(&[out_elements, per_output])?;
        // Every output window (image, group, output position) covers `reduction` input
        // elements, whichever output channels of its group it serves.
        let [out_h, out_w] = [outputs[0].dims()[2], outputs[0].dims()[3]].map(u64::from);
        usage.work.taps = count(&[
            u64::from(data[0]),
            u64::from(self.window.groups),
            out_h,
            out_w,
            reduction,
        ])?;
        usage.work.slices = if class.starts_with("depthwise") {
            // Each of the N·C output planes is computed from its own input plane.
            count(&[u64::from(data[0]), u64::from(data[1])])?
        } else {
            // At each kernel position a window reads a run of its group's ICg channels.
            count(&[
                u64::from(data[0]),
                u64::from(self.window.groups),
                out_h,
                out_w,
                u64::from(weight[2]),
                u64::from(weight[3]),
            ])?
        };
        Ok(usage)
    }

    fn packed_input(&self, inputs: &[TensorType]) -> Option<(usize, PackOrder)> {
        let shape = self.geometry(inputs[0].dims(), inputs[1].dims()).ok()?;
        Some((1, shape.pack_order()))
    }

    fn set_packed(&mut self, packed: Arc<PackedRows>) {
        self.packed = Some(packed);
    }

    fn scratch_bytes(&self, inputs: &[TensorType]) -> Result<u64> {
        let shape = self.geometry(inputs[0].dims(), inputs[1].dims())?;
        Ok(shape.scratch_bytes(self.packed.is_some()))
    }

    fn writes_every_output(&self) -> bool {
        // Every kernel of `kernels::conv2d` stores every output position (or, for sums with no
        // terms, the bias alone): engine/tests/kernels.rs runs them on outputs filled with
        // i32::MIN.
        true
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let shape = self.geometry(inputs[0].dims, inputs[1].dims)?;
        let out = &mut *outputs[0].data;
        let fits = kernels::conv2d::<Native>(
            &shape,
            inputs[0].data,
            inputs[1].data,
            self.packed.as_deref(),
            self.use_bias.then(|| inputs[2].data),
            out,
        );
        if fits { Ok(()) } else { Err(bias_overflow()) }
    }
}

/// Whether the zero-padded input plane of `data` (NCHW) exceeds twice the input plane by more
/// than 4096 elements: (H + 2·PH)·(W + 2·PW) > 2·H·W + 4096, so that most window taps read
/// padding and every tap is bounds-checked.
fn mostly_padding(data: &[u32], padding: [u32; 2]) -> bool {
    let [h, w, ph, pw] = [data[2], data[3], padding[0], padding[1]].map(u64::from);
    (h + 2 * ph) * (w + 2 * pw) > 2 * h * w + 4096
}

/// Output extent ⌊(size + 2·pad − dilation·(kernel − 1) − 1) / stride⌋ + 1 (spec 001 Y_HMAX).
fn conv_extent(
    size: u32,
    pad: u32,
    dilation: u32,
    kernel: u32,
    stride: u32,
    axis: &str,
) -> Result<u32> {
    let padded = i64::from(size) + 2 * i64::from(pad);
    let span = i64::from(dilation) * (i64::from(kernel) - 1) + 1;
    if padded < span {
        return Err(fail!(
            ShapeMismatch,
            "dilated kernel spans {span} along {axis}, more than the padded input's {padded}"
        ));
    }
    let extent = (padded - span) / i64::from(stride) + 1;
    u32::try_from(extent).map_err(|_| fail!(LimitExceeded, "output {axis} {extent} is too large"))
}
