//! NN operators of spec 001 ("NN Operators"): `conv2d`, `dense`, `relu`, `max_pool2d`,
//! `upsampling`.
//!
//! conv2d, dense and max_pool2d run the vector kernels of [`crate::kernels`]. Precision inference
//! (cvm-compat §3) bounds every multiply-accumulate sum below 2^30, so the kernels' 32-bit lanes
//! are exact; the bias is added with a checked addition.

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;

use super::{
    Arity, Family, OpDef, Operator, Usage, count, expect_inputs, expect_rank, io_usage,
    output_precision,
};
use crate::attrs::{AttrKind, Attrs, in_range, pair_in_range, spec};
use crate::error::Result;
use crate::fail;
use crate::kernels::gemm;
use crate::kernels::pool::{self, PoolShape};
use crate::kernels::simd::Native;
use crate::kernels::{self, ConvShape, PackOrder, PackedRows};
use crate::tensor::{TensorMut, TensorRef, TensorType, bit_width};

/// Upper bound (inclusive, as the deployed runtime's `VerifyAttrRange`) of attributes such as
/// padding, strides, dilation and scale.
const MAX_ATTR: i64 = 4096;

/// Largest precision dense and conv2d accept on data and weights (cvm-compat §3).
const MAX_MAC_INPUT_PRECISION: u8 = 8;

/// Row of the operator table for [`Conv2d`].
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
/// - Inputs: `X` (N, C, H, W), `W` (OC, C/groups, KH, KW), and `B` (OC) when `use_bias`.
/// - Attributes: `padding` (PH, PW) in [0, 4096], default (0, 0); `strides` (SH, SW) in
///   [1, 4096], default (1, 1); `dilation` (DH, DW) in [1, 4096], default (1, 1); `groups` in
///   [1, C] dividing C and OC, default 1; `use_bias` default true; `channels` and `kernel_size`
///   optional, and when given they must equal OC and (KH, KW); `layout` "NCHW",
///   `kernel_layout` "OIHW", `out_layout` "" / "__undef__" / "NCHW", `out_dtype` "same" / "int32".
/// - Output: (N, OC, ⌊(H + 2PH − DH(KH − 1) − 1) / SH⌋ + 1, ⌊(W + 2PW − DW(KW − 1) − 1) / SW⌋ + 1);
///   `Y[n,oc,p,q] = Σ_ic Σ_ki Σ_kj pad(X)[n, g·IC + ic, p·SH − PH + ki·DH, q·SW − PW + kj·DW] ·
///   W[oc, ic, ki, kj] (+ B[oc])` with g = oc / (OC / groups) and zero padding.
/// - Precision: data and weights ≤ 8 bits; output pX + pW + bits(IC·KH·KW), with bias
///   max(that, pB) + 1; above 32 is `PrecisionOverflow`.
/// - Overflow: sums run in 32-bit lanes, bounded by the output precision so they never wrap;
///   the bias addition is checked.
/// - Errors: `ArityMismatch`, `ShapeMismatch` (ranks, channel and group counts, a dilated kernel
///   larger than the padded input), `AttributeOutOfRange`, `PrecisionConstraint`,
///   `PrecisionOverflow`.
#[derive(Debug)]
pub struct Conv2d {
    channels: Option<u32>,
    kernel_size: Option<[u32; 2]>,
    strides: [u32; 2],
    padding: [u32; 2],
    dilation: [u32; 2],
    groups: u32,
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
            strides: pair_in_range(
                "strides",
                attrs.opt_ints("strides").unwrap_or(&[1, 1]),
                1,
                MAX_ATTR,
            )?,
            padding: pair_in_range(
                "padding",
                attrs.opt_ints("padding").unwrap_or(&[0, 0]),
                0,
                MAX_ATTR,
            )?,
            dilation: pair_in_range(
                "dilation",
                attrs.opt_ints("dilation").unwrap_or(&[1, 1]),
                1,
                MAX_ATTR,
            )?,
            groups: in_range("groups", attrs.int_or("groups", 1), 1, i64::from(u32::MAX))?,
            use_bias,
            packed: None,
        }))
    }

    fn geometry(&self, data: &[u32], weight: &[u32]) -> Result<ConvShape> {
        let [batch, in_channels, height, width] = [data[0], data[1], data[2], data[3]];
        let [out_channels, group_in_channels, kernel_h, kernel_w] =
            [weight[0], weight[1], weight[2], weight[3]];
        if self.groups > in_channels || in_channels % self.groups != 0 {
            return Err(fail!(
                ShapeMismatch,
                "groups = {} must lie in [1, C] and divide C = {in_channels}",
                self.groups
            ));
        }
        if out_channels % self.groups != 0 {
            return Err(fail!(
                ShapeMismatch,
                "groups = {} must divide the output channels OC = {out_channels}",
                self.groups
            ));
        }
        if group_in_channels != in_channels / self.groups {
            return Err(fail!(
                ShapeMismatch,
                "weight shape {:?} needs C / groups = {} input channels per group, has {group_in_channels}",
                weight,
                in_channels / self.groups
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
            self.padding[0],
            self.dilation[0],
            kernel_h,
            self.strides[0],
            "height",
        )?;
        let out_w = conv_extent(
            width,
            self.padding[1],
            self.dilation[1],
            kernel_w,
            self.strides[1],
            "width",
        )?;
        Ok(ConvShape {
            batch: batch as usize,
            in_channels: in_channels as usize,
            height: height as usize,
            width: width as usize,
            out_channels: out_channels as usize,
            groups: self.groups as usize,
            kernel_h: kernel_h as usize,
            kernel_w: kernel_w as usize,
            out_h: out_h as usize,
            out_w: out_w as usize,
            strides: self.strides.map(|v| v as usize),
            padding: self.padding.map(|v| v as usize),
            dilation: self.dilation.map(|v| v as usize),
        })
    }
}

/// Along one axis, the (output position, window position) pairs whose input position
/// `p·stride − pad + k·dilation` lies in `0..size`: the taps of a window that read the input
/// rather than its padding. One step per output position.
fn inside_taps(out: u32, window: u32, stride: u32, pad: u32, dilation: u32, size: u32) -> u64 {
    let [window, stride, pad, dilation, size] =
        [window, stride, pad, dilation, size].map(u64::from);
    // The first window position k with start + k·dilation ≥ edge (padded coordinates).
    let first = |start: u64, edge: u64| {
        edge.saturating_sub(start)
            .div_ceil(dilation.max(1))
            .min(window)
    };
    (0..u64::from(out))
        .map(|p| {
            let start = p * stride;
            first(start, pad + size) - first(start, pad)
        })
        .sum()
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

/// Checks a string attribute against the values this engine supports.
fn check_layout(attrs: &Attrs<'_>, name: &str, allowed: &[&str]) -> Result<()> {
    match attrs.opt_str(name) {
        Some(value) if !allowed.contains(&value) => Err(fail!(
            AttributeOutOfRange,
            "attribute \"{name}\" = \"{value}\" is not supported (expected one of {allowed:?})"
        )),
        _ => Ok(()),
    }
}

/// Checks the ≤ 8-bit precision rule of dense and conv2d operands.
fn check_mac_precision(ty: &TensorType, operand: &str) -> Result<()> {
    if ty.precision > MAX_MAC_INPUT_PRECISION {
        Err(fail!(
            PrecisionConstraint,
            "{operand} has precision {}, but at most {MAX_MAC_INPUT_PRECISION} is allowed",
            ty.precision
        ))
    } else {
        Ok(())
    }
}

/// The multiply-accumulates the schedule counts per output of an 8-bit reduction of length
/// `k`: k rounded up to the vector width, 16.
fn vector_reduction(k: u64) -> u64 {
    k.div_ceil(16).saturating_mul(16)
}

/// Output precision of a multiply-accumulate layer (cvm-compat §3, dense and conv2d rows).
fn mac_precision(
    data: &TensorType,
    weight: &TensorType,
    reduction: u64,
    bias: Option<&TensorType>,
) -> Result<u8> {
    let product = u32::from(data.precision) + u32::from(weight.precision) + bit_width(reduction);
    output_precision(match bias {
        Some(bias) => product.max(u32::from(bias.precision)) + 1,
        None => product,
    })
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
        let class = if self.groups > 1 && self.groups == data[1] {
            // Strides of 3 or more, a dilated stride of 2, or more padding than a "same"
            // convolution's: windows spread over the input or into the padding.
            let irregular = (0..2).any(|axis| {
                let extent = u64::from(self.dilation[axis])
                    * u64::from(weight[2 + axis]).saturating_sub(1)
                    + 1;
                self.strides[axis] >= 3
                    || (self.strides[axis] == 2 && self.dilation[axis] > 1)
                    || 2 * u64::from(self.padding[axis]) >= extent
            });
            if irregular {
                "depthwise irregular"
            } else {
                "depthwise"
            }
        } else if mostly_padding(data, self.padding) {
            "padded"
        } else if self.groups > 1 {
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
            u64::from(self.groups),
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
                u64::from(self.groups),
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

/// The error of a bias addition that overflows: precision inference makes the sums fit (output
/// precision max(pXW, pB) + 1 ≤ 32), so it would be an engine bug, reported as one.
fn bias_overflow() -> crate::Error {
    fail!(IntegerOverflow, "bias addition overflows i32 (engine bug)")
}

/// Adds the bias row to every row of an (M, N) dense output, checked ([`bias_overflow`]).
fn add_bias_rows(out: &mut [i32], bias: &[i32], units: usize) -> Result<()> {
    if units == 0 {
        return Ok(());
    }
    let bias = &bias[..units];
    if out
        .chunks_exact_mut(units)
        .all(|row| kernels::add_each_checked::<Native>(row, bias))
    {
        Ok(())
    } else {
        Err(bias_overflow())
    }
}

/// Row of the operator table for [`Dense`].
pub const DENSE: OpDef = OpDef {
    code: 21,
    name: "dense",
    family: Family::Nn,
    arity: Arity::Between(2, 3),
    outputs: 1,
    attrs: &[
        spec("units", AttrKind::Int),
        spec("use_bias", AttrKind::Bool),
    ],
    build: Dense::build,
};

/// Fully connected layer (spec 001 "dense"): `Y = X·Wᵀ (+ B)`.
///
/// - Inputs: `X` (M, K), `W` (N, K), and `B` (N) when `use_bias`.
/// - Attributes: `use_bias` default true; `units` optional, ≥ 1, and when given equal to N.
/// - Output: (M, N), `Y[m, n] = Σ_k X[m, k]·W[n, k] (+ B[n])`.
/// - Precision: X and W ≤ 8 bits; output pX + pW + bits(K), with bias max(that, pB) + 1.
/// - Overflow: sums run in 32-bit lanes, bounded by the output precision so they never wrap;
///   the bias addition is checked.
/// - Errors: `ArityMismatch`, `ShapeMismatch`, `AttributeOutOfRange`, `PrecisionConstraint`,
///   `PrecisionOverflow`.
#[derive(Debug)]
pub struct Dense {
    units: Option<u32>,
    use_bias: bool,
    /// The weights packed at load time, when they are a parameter.
    packed: Option<Arc<PackedRows>>,
}

impl Dense {
    fn build(attrs: &Attrs<'_>, n_inputs: usize) -> Result<Box<dyn Operator>> {
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
        let units = match attrs.opt_int("units") {
            Some(value) => Some(in_range("units", value, 1, i64::from(u32::MAX))?),
            None => None,
        };
        Ok(Box::new(Dense {
            units,
            use_bias,
            packed: None,
        }))
    }
}

impl Operator for Dense {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let (data, weight) = (&inputs[0], &inputs[1]);
        expect_rank(data, 2, "data")?;
        expect_rank(weight, 2, "weight")?;
        let [rows, depth] = [data.dims()[0], data.dims()[1]];
        let [units, weight_depth] = [weight.dims()[0], weight.dims()[1]];
        if depth != weight_depth {
            return Err(fail!(
                ShapeMismatch,
                "data {} and weight {} disagree on the reduction length K",
                data.shape,
                weight.shape
            ));
        }
        if let Some(expected) = self.units
            && expected != units
        {
            return Err(fail!(
                ShapeMismatch,
                "attribute units = {expected} differs from the weight's {units} rows"
            ));
        }
        let bias = if self.use_bias {
            let bias = &inputs[2];
            if bias.dims() != [units] {
                return Err(fail!(
                    ShapeMismatch,
                    "bias must have shape [{units}], got {}",
                    bias.shape
                ));
            }
            Some(bias)
        } else {
            None
        };
        check_mac_precision(data, "data")?;
        check_mac_precision(weight, "weight")?;
        let precision = mac_precision(data, weight, u64::from(depth), bias)?;
        Ok(vec![TensorType::new([rows, units], precision)])
    }

    fn usage(&self, inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        let depth = u64::from(inputs[0].dims()[1]);
        let mut usage = io_usage(inputs, outputs)?;
        if inputs[0].dims()[0] > 1 {
            // Several rows share every weight they read.
            usage.class = "batched";
        }
        usage.work.macs = count(&[outputs[0].shape.elements(), vector_reduction(depth)])?;
        Ok(usage)
    }

    fn packed_input(&self, _inputs: &[TensorType]) -> Option<(usize, PackOrder)> {
        Some((1, PackOrder::Source))
    }

    fn set_packed(&mut self, packed: Arc<PackedRows>) {
        self.packed = Some(packed);
    }

    fn scratch_bytes(&self, inputs: &[TensorType]) -> Result<u64> {
        let [rows, depth] = [inputs[0].dims()[0], inputs[0].dims()[1]].map(u64::from);
        let weights = if self.packed.is_some() {
            0
        } else {
            PackedRows::bytes(u64::from(inputs[1].dims()[0]), depth)
        };
        Ok(PackedRows::bytes(rows, depth).saturating_add(weights))
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let [rows, depth] = [inputs[0].dims[0], inputs[0].dims[1]].map(|d| d as usize);
        let units = inputs[1].dims[0] as usize;
        let data = PackedRows::pack(inputs[0].data, rows, depth);
        let packed;
        let weights = match &self.packed {
            Some(weights) => weights,
            None => {
                packed = PackedRows::pack(inputs[1].data, units, depth);
                &packed
            }
        };
        let out = &mut *outputs[0].data;
        gemm::dot_products::<Native>(
            data.values(),
            rows,
            weights.values(),
            units,
            data.stride(),
            gemm::Strided {
                data: out,
                row_step: units,
                column_step: 1,
            },
        );
        if self.use_bias {
            add_bias_rows(out, inputs[2].data, units)?;
        }
        Ok(())
    }
}

/// Row of the operator table for [`Relu`].
pub const RELU: OpDef = OpDef {
    code: 22,
    name: "relu",
    family: Family::Nn,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[],
    build: |_, _| Ok(Box::new(Relu)),
};

/// Rectified linear unit (spec 001 "relu"): `Y = max(0, X)`.
///
/// - Input: `X` of any shape. Output: same shape and precision.
/// - Errors: none beyond arity.
#[derive(Debug)]
pub struct Relu;

impl Operator for Relu {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        Ok(vec![inputs[0].clone()])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        kernels::map(outputs[0].data, inputs[0].data, |x| x.max(0));
        Ok(())
    }
}

/// Row of the operator table for [`MaxPool2d`].
pub const MAX_POOL2D: OpDef = OpDef {
    code: 23,
    name: "max_pool2d",
    family: Family::Nn,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[
        spec("ceil_mode", AttrKind::Bool),
        spec("layout", AttrKind::Str),
        spec("padding", AttrKind::Ints),
        spec("pool_size", AttrKind::Ints),
        spec("strides", AttrKind::Ints),
    ],
    build: MaxPool2d::build,
};

/// 2-D max pooling over NCHW planes (spec 001 "max_pool2d").
///
/// - Input: `X` (N, C, H, W).
/// - Attributes: `pool_size` (PSH, PSW) required, with PH < PSH ≤ H + 2PH and likewise for W;
///   `strides` (SH, SW) in [1, 4096], default (1, 1); `padding` one value or (PH, PW) in
///   [0, 4096], default (0, 0); `ceil_mode` default false; `layout` "NCHW".
/// - Output: (N, C, f((H + 2PH − PSH) / SH) + 1, f((W + 2PW − PSW) / SW) + 1) with f = ceil when
///   `ceil_mode`, else floor; each element is the maximum of the input elements inside its
///   window. Padding is never sampled: a window that would hold only padding (possible only with
///   `ceil_mode`) is rejected at validation, so every window has at least one input element.
/// - Precision: same as X.
/// - Errors: `MissingAttribute` (`pool_size`), `ShapeMismatch` (rank, an input height or width
///   of 0), `AttributeOutOfRange`.
#[derive(Debug)]
pub struct MaxPool2d {
    pool_size: [u32; 2],
    strides: [u32; 2],
    padding: [u32; 2],
    ceil_mode: bool,
}

impl MaxPool2d {
    fn build(attrs: &Attrs<'_>, _n_inputs: usize) -> Result<Box<dyn Operator>> {
        check_layout(attrs, "layout", &["NCHW"])?;
        let padding = match attrs.opt_ints("padding").unwrap_or(&[0, 0]) {
            [both] => {
                let pad = in_range("padding", *both, 0, MAX_ATTR)?;
                [pad, pad]
            }
            pair => pair_in_range("padding", pair, 0, MAX_ATTR)?,
        };
        let pool_size = pair_in_range(
            "pool_size",
            attrs.ints("pool_size")?,
            1,
            i64::from(u32::MAX),
        )?;
        for axis in 0..2 {
            if pool_size[axis] <= padding[axis] {
                return Err(fail!(
                    AttributeOutOfRange,
                    "pool_size {pool_size:?} must exceed padding {padding:?} on each axis"
                ));
            }
        }
        Ok(Box::new(MaxPool2d {
            pool_size,
            strides: pair_in_range(
                "strides",
                attrs.opt_ints("strides").unwrap_or(&[1, 1]),
                1,
                MAX_ATTR,
            )?,
            padding,
            ceil_mode: attrs.bool_or("ceil_mode", false),
        }))
    }

    /// Output extent along one axis, or why the window does not fit.
    fn extent(&self, size: u32, axis: usize) -> Result<u32> {
        let name = if axis == 0 { "height" } else { "width" };
        if size == 0 {
            return Err(fail!(
                ShapeMismatch,
                "the input {name} is 0, so every pooling window would lie in padding"
            ));
        }
        let padded = i64::from(size) + 2 * i64::from(self.padding[axis]);
        let pool = i64::from(self.pool_size[axis]);
        let stride = i64::from(self.strides[axis]);
        if pool > padded {
            return Err(fail!(
                AttributeOutOfRange,
                "pool_size {} exceeds the padded input {name} {padded}",
                pool
            ));
        }
        let span = padded - pool;
        let steps = if self.ceil_mode {
            (span + stride - 1) / stride
        } else {
            span / stride
        };
        let extent = steps + 1;
        // The last window starts at steps·stride − pad; it must still cover an input element.
        let last_start = steps * stride - i64::from(self.padding[axis]);
        if last_start >= i64::from(size) {
            return Err(fail!(
                AttributeOutOfRange,
                "with ceil_mode the last pooling window along {name} starts at {last_start}, past the input's {size} elements"
            ));
        }
        u32::try_from(extent)
            .map_err(|_| fail!(LimitExceeded, "output {name} {extent} is too large"))
    }
}

impl Operator for MaxPool2d {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let data = &inputs[0];
        expect_rank(data, 4, "data")?;
        let dims = data.dims();
        let out_h = self.extent(dims[2], 0)?;
        let out_w = self.extent(dims[3], 1)?;
        Ok(vec![TensorType::new(
            [dims[0], dims[1], out_h, out_w],
            data.precision,
        )])
    }

    fn usage(&self, inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        let (data, out) = (inputs[0].dims(), outputs[0].dims());
        let taps = self.inside_taps(data, [out[2], out[3]]);
        let [rows, columns] = taps;
        let mut usage = io_usage(inputs, outputs)?;
        if self.mostly_padding(taps, [out[2], out[3]]) {
            usage.class = "padded";
        }
        usage.work.taps = count(&[u64::from(data[0]), u64::from(data[1]), rows, columns])?;
        Ok(usage)
    }

    fn scratch_bytes(&self, inputs: &[TensorType]) -> Result<u64> {
        let out_h = self.extent(inputs[0].dims()[2], 0)?;
        let out_w = self.extent(inputs[0].dims()[3], 1)?;
        Ok(self.shape(inputs[0].dims(), [out_h, out_w]).scratch_bytes())
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let shape = self.shape(inputs[0].dims, [outputs[0].dims[2], outputs[0].dims[3]]);
        pool::max_pool2d::<Native>(&shape, inputs[0].data, outputs[0].data);
        Ok(())
    }
}

impl MaxPool2d {
    /// Along each axis, the (output position, window position) pairs that read the input, not
    /// its padding: a plane's window taps are their product.
    fn inside_taps(&self, dims: &[u32], out: [u32; 2]) -> [u64; 2] {
        [0, 1].map(|axis| {
            inside_taps(
                out[axis],
                self.pool_size[axis],
                self.strides[axis],
                self.padding[axis],
                1,
                dims[2 + axis],
            )
        })
    }

    /// Whether fewer than half of the window positions (OH·PSH·OW·PSW per plane) read the
    /// input, given the plane's [`MaxPool2d::inside_taps`]: the price class `padded`, whose
    /// windows are clipped to the input one by one.
    fn mostly_padding(&self, taps: [u64; 2], out: [u32; 2]) -> bool {
        let [rows, columns] = taps.map(u128::from);
        let positions = [0, 1].map(|axis| u128::from(out[axis]) * u128::from(self.pool_size[axis]));
        2 * rows * columns < positions[0] * positions[1]
    }

    fn shape(&self, dims: &[u32], [out_h, out_w]: [u32; 2]) -> PoolShape {
        PoolShape {
            clip: self.mostly_padding(self.inside_taps(dims, [out_h, out_w]), [out_h, out_w]),
            planes: dims[0] as usize * dims[1] as usize,
            height: dims[2] as usize,
            width: dims[3] as usize,
            out_h: out_h as usize,
            out_w: out_w as usize,
            window: self.pool_size.map(|v| v as usize),
            strides: self.strides.map(|v| v as usize),
            padding: self.padding.map(|v| v as usize),
        }
    }
}

/// Row of the operator table for [`Upsampling`].
pub const UPSAMPLING: OpDef = OpDef {
    code: 24,
    name: "upsampling",
    family: Family::Nn,
    arity: Arity::Exactly(1),
    outputs: 1,
    attrs: &[
        spec("layout", AttrKind::Str),
        spec("method", AttrKind::Str),
        spec("scale", AttrKind::Int),
    ],
    build: |attrs, _| {
        check_layout(attrs, "layout", &["NCHW"])?;
        check_layout(attrs, "method", &["NEAREST_NEIGHBOR"])?;
        Ok(Box::new(Upsampling {
            scale: in_range("scale", attrs.int("scale")?, 1, MAX_ATTR)?,
        }))
    },
};

/// Nearest-neighbour upsampling of NCHW planes (spec 001 "upsampling"):
/// `Y[n, c, h, w] = X[n, c, ⌊h / scale⌋, ⌊w / scale⌋]`.
///
/// - Input: `X` (N, C, H, W).
/// - Attributes: `scale` in [1, 4096] (required); `layout` "NCHW"; `method` "NEAREST_NEIGHBOR".
/// - Output: (N, C, H·scale, W·scale). Precision: same as X.
/// - Errors: `ShapeMismatch` (rank), `MissingAttribute`, `AttributeOutOfRange`, `LimitExceeded`
///   (output too large).
#[derive(Debug)]
pub struct Upsampling {
    scale: u32,
}

impl Operator for Upsampling {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let data = &inputs[0];
        expect_rank(data, 4, "data")?;
        let dims = data.dims();
        let scaled = |dim: u32| {
            dim.checked_mul(self.scale).ok_or_else(|| {
                fail!(
                    LimitExceeded,
                    "dimension {dim} × scale {} exceeds u32",
                    self.scale
                )
            })
        };
        Ok(vec![TensorType::new(
            [dims[0], dims[1], scaled(dims[2])?, scaled(dims[3])?],
            data.precision,
        )])
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let dims = inputs[0].dims;
        let (height, width) = (dims[2] as usize, dims[3] as usize);
        let scale = self.scale as usize;
        let (out_h, out_w) = (height * scale, width * scale);
        let data = inputs[0].data;
        let out = &mut *outputs[0].data;
        if out_w == 0 {
            return Ok(());
        }
        for (plane_index, out_plane) in out.chunks_exact_mut((out_h * out_w).max(1)).enumerate() {
            let plane = &data[plane_index * height * width..][..height * width];
            for (h, out_row) in out_plane.chunks_exact_mut(out_w).enumerate() {
                let row = &plane[(h / scale) * width..][..width];
                for (w, y) in out_row.iter_mut().enumerate() {
                    *y = row[w / scale];
                }
            }
        }
        Ok(())
    }
}
