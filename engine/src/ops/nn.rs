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

use cvm_gas::Param;

use super::{
    Arity, ElementSteps, Family, OpDef, Operator, Usage, count, expect_inputs, expect_rank,
    in_bounds_taps, output_precision, steps, steps_v3, steps_v5, steps_v6,
};
use crate::attrs::{AttrKind, Attrs, in_range, pair_in_range, spec};
use crate::error::Result;
use crate::fail;
use crate::kernels;
use crate::kernels::conv::{self, Columns, ConvShape};
use crate::kernels::gemm::{self, LANES, PackOrder, PackedRows, ROW_ALIGN};
use crate::kernels::pointwise;
use crate::kernels::pool::{self, PoolShape};
use crate::kernels::simd::Native;
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
/// - Gas (v1): `multiply_accumulate` × N·OC·OH·OW·IC·KH·KW + `element_arith` × N·OC·OH·OW.
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

/// The counts of a conv2d of geometry `shape` with `out_elements` outputs, after the kernel that
/// runs it (`kernels::conv`), for versions 2 to 4 ([`conv2d_steps_v2`]) and version 5:
/// - depthwise, version 5 (`step_v5`, the kernel of one flat run over a tap plane, as it was
///   then: `ConvShape::priced_as_depthwise_v5`, `ConvShape::tap_plane_v5`): 1800 + 250·N·OC +
///   12·N·OC·T + 36·N·C·H + 2·N·C·(H·W + U)·[pairs] + 5·N·OC·S·T + 3·N·OC·OH, with U the units
///   of the plane, [pairs] 1 when it holds pairs (SW of 3 or more, or 2 with DW > 1) and 0
///   otherwise, S its steps and T the tap entries (`ConvShape::tap_entries`); no
///   `mac_group_v5`;
/// - pointwise, version 5 (`kernels::pointwise`): 2800 + 30·P + 20·Q + 4·P·OC/groups, with
///   P = N·groups·⌈H·W/8⌉·⌈C/groups/2⌉ the blocks of channel pairs and Q =
///   N·groups·⌈H·W/8⌉·(⌊OC/groups/4⌋ + OC/groups mod 4) the tiles; no `mac_group_v5`;
/// - otherwise the im2col counts of versions 2 to 4, for the gather the kernel of version 5
///   chose (`ConvShape::priced_as_channels_last_v5`);
///
/// and, for version 6, on the shapes of the 3 × 3 stride-2 depthwise kernel
/// (`ConvShape::uses_depthwise_3x3_s2`, `step_v6`): 500 + 80·N·OC + 24·N·OC·OH +
/// 4·N·OC·OH·⌈OW/4⌉ + H·W (per output plane its weights, per output row its three input rows
/// and its last step, per step of four outputs its dot products, and a copy of the last
/// channel); every other shape counts `step_v5`.
fn conv2d_steps(shape: &ConvShape, out_elements: u64) -> Result<Vec<(Param, u64)>> {
    let as_u64 = |n: usize| n as u64;
    let mut counts = conv2d_steps_v2(
        shape,
        out_elements,
        shape.priced_as_depthwise_v2(),
        shape.priced_as_channels_last_v2(),
    )?;
    if shape.uses_depthwise_3x3_s2() {
        let planes = count(&[as_u64(shape.batch), as_u64(shape.out_channels)])?;
        let rows = count(&[planes, as_u64(shape.out_h)])?;
        counts.push(steps_v6(
            500,
            &[
                (80, planes),
                (24, rows),
                (4, count(&[rows, as_u64(shape.out_w.div_ceil(4))])?),
                (1, count(&[as_u64(shape.height), as_u64(shape.width)])?),
            ],
        )?);
    }
    if shape.priced_as_depthwise_v5() {
        let plane = shape.tap_plane_v5();
        let images = |n: usize| count(&[as_u64(shape.batch), as_u64(n)]);
        let input_values = count(&[
            images(shape.in_channels)?,
            as_u64(shape.height),
            as_u64(shape.width),
        ])?;
        let pairs = if plane.columns == Columns::Pairs {
            input_values
                .checked_add(count(&[images(shape.in_channels)?, as_u64(plane.units)])?)
                .ok_or_else(|| fail!(LimitExceeded, "work count overflows 64 bits"))?
        } else {
            0
        };
        counts.extend([
            steps_v5(
                1800,
                &[
                    (250, images(shape.out_channels)?),
                    (
                        12,
                        count(&[images(shape.out_channels)?, shape.tap_entries()])?,
                    ),
                    (
                        36,
                        count(&[images(shape.in_channels)?, as_u64(shape.height)])?,
                    ),
                    (2, pairs),
                    (
                        5,
                        count(&[
                            images(shape.out_channels)?,
                            as_u64(plane.steps),
                            shape.tap_entries(),
                        ])?,
                    ),
                    (
                        3,
                        count(&[images(shape.out_channels)?, as_u64(shape.out_h)])?,
                    ),
                ],
            )?,
            (Param::MacGroupV5, 0),
        ]);
    } else if shape.priced_as_pointwise_v5() {
        let (group_in, group_out) = (as_u64(shape.group_in()), as_u64(shape.group_out()));
        let block_rows = count(&[
            as_u64(shape.batch),
            as_u64(shape.groups),
            as_u64(shape.height * shape.width).div_ceil(pointwise::PIXELS as u64),
        ])?;
        let blocks = count(&[block_rows, group_in.div_ceil(2)])?;
        counts.extend([
            steps_v5(
                2800,
                &[
                    (30, blocks),
                    (20, count(&[block_rows, group_out / 4 + group_out % 4])?),
                    (4, count(&[blocks, group_out])?),
                ],
            )?,
            (Param::MacGroupV5, 0),
        ]);
    } else {
        // The im2col kernel: version 4's counts, with the gather the kernel now chooses.
        for (param, units) in conv2d_steps_v2(
            shape,
            out_elements,
            false,
            shape.priced_as_channels_last_v5(),
        )? {
            counts.push(match param {
                Param::MacGroup => (Param::MacGroupV5, units),
                _ => (Param::StepV5, units),
            });
        }
    }
    Ok(counts)
}

/// The version 2 to 4 counts of a conv2d of geometry `shape` with `out_elements` outputs, after
/// the kernels of their time, which `depthwise` and `channels_last` name
/// (`ConvShape::priced_as_depthwise_v2`, `ConvShape::priced_as_channels_last_v2`):
/// - depthwise, version 2: per channel the phase-split padded plane is built (one step per
///   element, plus a fixed cost per channel), then every tap is one vector multiply-add per
///   output: 600 + 440·N·C + plane + 3·E·KH·KW steps;
/// - depthwise, version 3 (`step_v3`, the kernel of neighbour pairs): per input channel the
///   phase-split plane and its plane of neighbour pairs are built (3 steps per plane element,
///   24 per channel), then for every output row each tap entry (`ConvShape::depthwise_entries`:
///   adjacent taps of a kernel row share one) finds its runs (16 steps) and takes one pair of
///   dot products per vector of eight outputs (4 steps): 1800 + 24·N·C + 3·N·C·L + 16·R·T +
///   4·R·⌈OW/8⌉·T, with L the plane's elements, R = N·OC·OH the output rows and T the entries;
/// - otherwise ⌈ICg·KH·KW / 16⌉ `mac_group`s per output, plus per output the im2col gather and
///   the bias: 1500 + 29·E steps, and either 4 steps per element of the zero-padded
///   channels-last copy of the input or, when that copy would not fit, 12 steps per element
///   of the checked gather of each output pixel's patch (N·OH·OW·C·KH·KW).
fn conv2d_steps_v2(
    shape: &ConvShape,
    out_elements: u64,
    depthwise: bool,
    channels_last: bool,
) -> Result<Vec<(Param, u64)>> {
    let as_u64 = |n: usize| n as u64;
    let taps = count(&[as_u64(shape.kernel_h), as_u64(shape.kernel_w)])?;
    if depthwise {
        let channels = count(&[as_u64(shape.batch), as_u64(shape.in_channels)])?;
        let plane = count(&[channels, shape.depthwise_plane_len()])?;
        let entries = shape.depthwise_entries();
        let rows = count(&[
            as_u64(shape.batch),
            as_u64(shape.out_channels),
            as_u64(shape.out_h),
        ])?;
        let vectors = count(&[rows, as_u64(shape.out_w.div_ceil(LANES))])?;
        return Ok(vec![
            steps(
                600,
                &[
                    (440, channels),
                    (1, plane),
                    (3, count(&[out_elements, taps])?),
                ],
            )?,
            steps_v3(
                1800,
                &[
                    (24, channels),
                    (3, plane),
                    (16, count(&[rows, entries])?),
                    (4, count(&[vectors, entries])?),
                ],
            )?,
        ]);
    }
    let depth = as_u64(shape.depth());
    let groups = count(&[out_elements, depth.div_ceil(ROW_ALIGN as u64)])?;
    let gather = if channels_last {
        let padded = count(&[
            as_u64(shape.batch),
            as_u64(shape.in_channels),
            as_u64(shape.height + 2 * shape.padding[0]),
            as_u64(shape.width + 2 * shape.padding[1]),
        ])?;
        (4, padded)
    } else {
        // Every output pixel gathers its patch once for all output channels: C·KH·KW
        // elements, each with its bounds check.
        let patches = count(&[
            as_u64(shape.batch),
            as_u64(shape.out_h),
            as_u64(shape.out_w),
            as_u64(shape.in_channels),
            taps,
        ])?;
        (12, patches)
    };
    Ok(vec![
        (Param::MacGroup, groups),
        steps(1500, &[(29, out_elements), gather])?,
    ])
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
        let weight = inputs[1].dims();
        let out_elements = outputs[0].shape.elements();
        let macs = count(&[
            out_elements,
            u64::from(weight[1]),
            u64::from(weight[2]),
            u64::from(weight[3]),
        ])?;
        let mut usage = vec![
            (Param::MultiplyAccumulate, macs),
            (Param::ElementArith, out_elements),
        ];
        usage.extend(conv2d_steps(
            &self.geometry(inputs[0].dims(), inputs[1].dims())?,
            out_elements,
        )?);
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
        // Every kernel of `conv::conv2d` stores every output position (or, for sums with no
        // terms, the bias alone): engine/tests/kernels.rs runs them on outputs filled with
        // i32::MIN.
        true
    }

    fn run(&self, inputs: &[TensorRef<'_>], outputs: &mut [TensorMut<'_>]) -> Result<()> {
        let shape = self.geometry(inputs[0].dims, inputs[1].dims)?;
        let out = &mut *outputs[0].data;
        let fits = conv::conv2d::<Native>(
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
/// - Gas (v1): `multiply_accumulate` × M·N·K + `element_arith` × M·N.
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
        let out_elements = outputs[0].shape.elements();
        let depth = u64::from(inputs[0].dims()[1]);
        let macs = count(&[out_elements, depth])?;
        // Version 2: ⌈K/16⌉ `mac_group`s per output, and one more step per group for the
        // weight rows streamed from memory, which no pixel block reuses as conv2d's do.
        let groups = count(&[out_elements, depth.div_ceil(ROW_ALIGN as u64)])?;
        Ok(vec![
            (Param::MultiplyAccumulate, macs),
            (Param::ElementArith, out_elements),
            (Param::MacGroup, groups),
            steps(400, &[(22, out_elements), (1, groups)])?,
        ])
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
/// - Errors: none beyond arity. Gas: `element_arith` × elements.
#[derive(Debug)]
pub struct Relu;

impl Operator for Relu {
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        Ok(vec![inputs[0].clone()])
    }

    fn usage(&self, _inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        let elements = outputs[0].shape.elements();
        // Version 2: a vectorised max per element, within `output_element`.
        Ok(vec![
            (Param::ElementArith, elements),
            ElementSteps::new(64, 0).usage(elements)?,
        ])
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
/// - Gas (v1): `window_compare` × N·C·OH·OW·PSH·PSW.
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
        let out_elements = outputs[0].shape.elements();
        let [pool_h, pool_w] = self.pool_size.map(u64::from);
        let window = count(&[out_elements, pool_h, pool_w])?;
        let out_dims = outputs[0].dims();
        let shape = self.shape(inputs[0].dims(), [out_dims[2], out_dims[3]]);
        // Version 2, after `kernels::pool`: the vector kernel copies each plane padded with
        // i32::MIN (5 steps per element of the padded input; version 3 counts 1, the copy
        // being vectorised for strides 1 and 2 since, and 120 per plane for setting up its
        // rows), then takes the maximum over the
        // window's rows of vectors (4 steps per output and window row or column); the plain
        // loop, for padding far larger than the input, clips each window to the input and
        // scans the rows left (27 steps per output, 15 per row, 1 per element).
        if shape.vectorised() {
            let padded = count(&[
                shape.planes as u64,
                (shape.height + 2 * shape.padding[0]) as u64,
                (shape.width + 2 * shape.padding[1]) as u64,
            ])?;
            let rows = count(&[out_elements, pool_h + pool_w])?;
            return Ok(vec![
                (Param::WindowCompare, window),
                steps(540, &[(5, padded), (4, rows)])?,
                steps_v3(540, &[(120, shape.planes as u64), (1, padded), (4, rows)])?,
            ]);
        }
        let planes = shape.planes as u64;
        let axis = |a: usize, out: usize, size: usize| {
            in_bounds_taps(
                out,
                shape.window[a],
                shape.strides[a] as u32,
                1,
                shape.padding[a] as i64,
                size,
            )
        };
        let rows_h = axis(0, shape.out_h, shape.height);
        let cols_w = axis(1, shape.out_w, shape.width);
        let rows = count(&[planes, rows_h, shape.out_w as u64])?;
        let values = count(&[planes, rows_h, cols_w])?;
        Ok(vec![
            (Param::WindowCompare, window),
            steps(540, &[(27, out_elements), (15, rows), (1, values)])?,
        ])
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
    fn shape(&self, dims: &[u32], [out_h, out_w]: [u32; 2]) -> PoolShape {
        PoolShape {
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
///   (output too large). Gas: `element_copy` × output elements.
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

    fn usage(&self, _inputs: &[TensorType], outputs: &[TensorType]) -> Result<Usage> {
        let elements = outputs[0].shape.elements();
        // Version 2: a division-free gather per output element.
        Ok(vec![
            (Param::ElementCopy, elements),
            ElementSteps::new(160, 5).usage(elements)?,
        ])
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
