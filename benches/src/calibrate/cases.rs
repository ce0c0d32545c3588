//! The calibration cases: for every operator of the table, one or more configurations (kernel
//! sizes, axes, layouts, ...), each a builder of single-node models with valid attributes and
//! inputs of a requested size.
//!
//! A configuration's builder takes a target amount of work, the shape class's: output elements
//! for elementwise, data-movement and CINN primitives, input elements for reductions, output
//! elements for conv2d and CINN `Conv` (whose per-element work is the configuration's kernel),
//! weight elements for dense, elements visited for pooling, pairs of rows for
//! non_max_suppression and anchors for generate_proposals_v2. It picks shapes near the target
//! (the tables report the exact figures). Data comes from a xorshift generator seeded by the
//! case's name, so every run of the tool measures the same models on the same values, and values
//! lie where the operator computes (inside a function's domain, non-zero divisors, no overflow).
//!
//! [`configs`] lists the configurations in the order of the operator table and fails when an
//! operator of `OPS` has none, or a configuration names an operator the table does not have.

use std::path::Path;

use cvm_engine::exec::InputTensor;
use cvm_engine::model::{
    Attr, AttrValue, InputDecl, Model, Node, OutputDecl, ParamData, ParamDecl, ValueRef,
};
use cvm_engine::ops::{self, OPS};

/// A shape class: a name and the amount of work its cases aim at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Class {
    /// Name in the tables.
    pub name: &'static str,
    /// Target work (see the module documentation for what is counted per operator).
    pub target: u64,
}

/// About 16 elements: the per-node fixed cost dominates.
pub const TINY: Class = Class {
    name: "tiny",
    target: 16,
};
/// About 1 K elements.
pub const SMALL: Class = Class {
    name: "small",
    target: 1 << 10,
};
/// About 64 K elements.
pub const MEDIUM: Class = Class {
    name: "medium",
    target: 1 << 16,
};
/// About 1 M elements, where the operator's cost allows (the driver caps the fuel of a run).
pub const LARGE: Class = Class {
    name: "large",
    target: 1 << 20,
};

/// Every size class, smallest first.
pub const CLASSES: [Class; 4] = [TINY, SMALL, MEDIUM, LARGE];

/// One in Q16, the fixed-point format of the CINN cases.
const ONE: i64 = 1 << 16;

/// A single-node model and inputs for it.
#[derive(Clone, Debug)]
pub struct Built {
    /// The model: declared inputs, parameters, one node, its outputs.
    pub model: Model,
    /// One tensor per declared input.
    pub inputs: Vec<InputTensor>,
}

type Builder = Box<dyn Fn(&mut Rng, u64) -> Result<Built, String>>;

/// One configuration of an operator.
pub struct Config {
    /// Operator name, as in `OPS`.
    pub op: &'static str,
    /// Configuration name ("" when the operator has one).
    pub name: &'static str,
    /// A configuration whose size does not follow the classes (a scalar, a fixture) is built
    /// once, under this class name.
    pub fixed_class: Option<&'static str>,
    build: Builder,
}

impl Config {
    /// Builds the model and inputs at `target` (ignored by a fixed-class configuration).
    ///
    /// # Errors
    /// If the builder cannot produce the model (a fixture file missing).
    pub fn build(&self, target: u64) -> Result<Built, String> {
        let mut rng = Rng::seeded(&format!("{}/{}/{target}", self.op, self.name));
        (self.build)(&mut rng, target).map_err(|e| format!("{}: {e}", self.label()))
    }

    /// "op" or "op (config)".
    pub fn label(&self) -> String {
        label(self.op, self.name)
    }
}

/// "op" or "op (config)".
pub fn label(op: &str, config: &str) -> String {
    if config.is_empty() {
        op.to_string()
    } else {
        format!("{op} ({config})")
    }
}

/// A reproducible xorshift64* stream.
#[derive(Debug)]
pub struct Rng(u64);

impl Rng {
    /// A stream seeded from `label` (FNV-1a).
    pub fn seeded(label: &str) -> Rng {
        let seed = label.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        Rng(seed | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A value in `low..=high`.
    pub fn range(&mut self, low: i64, high: i64) -> i64 {
        low + (self.next() % (high - low + 1) as u64) as i64
    }

    /// `n` values in `low..=high` (both within int32).
    pub fn values(&mut self, n: u64, low: i64, high: i64) -> Vec<i32> {
        (0..n).map(|_| self.range(low, high) as i32).collect()
    }

    /// `n` values in −127..=127.
    pub fn int8(&mut self, n: u64) -> Vec<i32> {
        self.values(n, -127, 127)
    }
}

/// Number of elements of `shape`.
pub fn elements(shape: &[u32]) -> u64 {
    shape.iter().map(|&d| u64::from(d)).product()
}

/// A matrix of about `n` elements: (n / 64, 64), or (1, n) below 64.
fn matrix(n: u64) -> [u32; 2] {
    let cols = n.clamp(1, 64);
    [(n / cols).max(1) as u32, cols as u32]
}

/// A plane of about `n` elements, as square as it comes.
fn plane(n: u64) -> [u32; 2] {
    let n = n.max(1);
    let height = n.isqrt().max(1);
    [height as u32, (n / height).max(1) as u32]
}

/// (1, c, h, w) of about `n` elements with c = min(channels, n).
fn nchw(n: u64, channels: u32) -> [u32; 4] {
    let c = u64::from(channels).min(n.max(1));
    let [h, w] = plane(n / c);
    [1, c as u32, h, w]
}

fn int(value: i64) -> AttrValue {
    AttrValue::Int(value)
}

fn ints(values: &[i64]) -> AttrValue {
    AttrValue::Ints(values.to_vec())
}

fn text(value: &str) -> AttrValue {
    AttrValue::Str(value.to_string())
}

fn flag(value: bool) -> AttrValue {
    AttrValue::Bool(value)
}

/// Builds a one-node model: inputs and parameters in the order they are added, every output of
/// the node as a model output.
#[derive(Debug, Default)]
struct Graph {
    model_inputs: Vec<InputDecl>,
    params: Vec<ParamDecl>,
    data: Vec<InputTensor>,
    operands: Vec<ValueRef>,
    attrs: Vec<Attr>,
}

impl Graph {
    fn new() -> Graph {
        Graph::default()
    }

    /// A declared input, fed with `data`, as the next operand.
    fn input(mut self, shape: &[u32], precision: u8, data: Vec<i32>) -> Graph {
        let index = self.model_inputs.len();
        self.model_inputs.push(InputDecl {
            name: format!("x{index}"),
            shape: shape.to_vec(),
            precision,
        });
        self.data.push(InputTensor {
            shape: shape.to_vec(),
            data,
        });
        self.operands.push(ValueRef::Input(index as u32));
        self
    }

    /// A parameter holding `data`, as the next operand.
    fn param(mut self, shape: &[u32], precision: u8, data: Vec<i32>) -> Graph {
        let index = self.params.len();
        self.params.push(ParamDecl {
            name: format!("p{index}"),
            shape: shape.to_vec(),
            precision,
            data: ParamData::narrowest(data),
        });
        self.operands.push(ValueRef::Param(index as u32));
        self
    }

    /// The latest operand once more (`Power(x, x)`).
    fn again(mut self) -> Graph {
        if let Some(&last) = self.operands.last() {
            self.operands.push(last);
        }
        self
    }

    fn attr(mut self, name: &str, value: AttrValue) -> Graph {
        self.attrs.push(Attr {
            name: name.to_string(),
            value,
        });
        self
    }

    fn attrs(mut self, attrs: &[(&str, AttrValue)]) -> Graph {
        for (name, value) in attrs {
            self = self.attr(name, value.clone());
        }
        self
    }

    fn node(mut self, op: &str) -> Result<Built, String> {
        let def = ops::by_name(op).ok_or_else(|| format!("no operator named {op}"))?;
        self.attrs.sort_by(|a, b| a.name.cmp(&b.name));
        let outputs = (0..def.outputs)
            .map(|output| OutputDecl {
                name: format!("y{output}"),
                value: ValueRef::Node { node: 0, output },
            })
            .collect();
        Ok(Built {
            model: Model {
                inputs: self.model_inputs,
                params: self.params,
                nodes: vec![Node {
                    name: String::from("node"),
                    op: def.code,
                    inputs: self.operands,
                    attrs: self.attrs,
                }],
                outputs,
            },
            inputs: self.data,
        })
    }
}

fn config(
    op: &'static str,
    name: &'static str,
    build: impl Fn(&mut Rng, u64) -> Result<Built, String> + 'static,
) -> Config {
    Config {
        op,
        name,
        fixed_class: None,
        build: Box::new(build),
    }
}

/// One input of about `n` elements (a matrix) with values in `low..=high`.
fn unary(
    op: &'static str,
    precision: u8,
    (low, high): (i64, i64),
    attrs: &'static [(&'static str, i64)],
) -> Config {
    config(op, "", move |rng, n| {
        let shape = matrix(n);
        let mut graph = Graph::new().input(&shape, precision, rng.values(n_of(&shape), low, high));
        for &(name, value) in attrs {
            graph = graph.attr(name, int(value));
        }
        graph.node(op)
    })
}

fn n_of(shape: &[u32]) -> u64 {
    elements(shape)
}

/// The broadcast shape of the second operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Second {
    /// The first operand's shape.
    Same,
    /// One row, broadcast over the rows (a bias).
    Row,
}

/// Two operands of about `n` output elements.
fn binary(
    op: &'static str,
    name: &'static str,
    second: Second,
    precision: u8,
    x_range: (i64, i64),
    y_range: (i64, i64),
    attrs: &'static [(&'static str, i64)],
) -> Config {
    config(op, name, move |rng, n| {
        let shape = matrix(n);
        let y_shape = match second {
            Second::Same => shape.to_vec(),
            Second::Row => vec![shape[1]],
        };
        let x = rng.values(n_of(&shape), x_range.0, x_range.1);
        let y = nonzero(rng.values(n_of(&y_shape), y_range.0, y_range.1));
        let mut graph = Graph::new()
            .input(&shape, precision, x)
            .input(&y_shape, precision, y);
        for &(name, value) in attrs {
            graph = graph.attr(name, int(value));
        }
        graph.node(op)
    })
}

/// Replaces zeros by one, for divisors.
fn nonzero(mut values: Vec<i32>) -> Vec<i32> {
    for value in &mut values {
        if *value == 0 {
            *value = 1;
        }
    }
    values
}

/// Values of magnitude in `low..=high` with a random sign.
fn signed_magnitudes(rng: &mut Rng, n: u64, low: i64, high: i64) -> Vec<i32> {
    (0..n)
        .map(|_| {
            let magnitude = rng.range(low, high);
            (if rng.range(0, 1) == 0 {
                magnitude
            } else {
                -magnitude
            }) as i32
        })
        .collect()
}

/// A convolution configuration (conv2d and CINN `Conv`).
#[derive(Clone, Copy, Debug)]
struct ConvShape {
    channels: u32,
    out_channels: u32,
    kernel: u32,
    stride: u32,
    dilation: u32,
    /// One group per channel (overrides `groups`).
    depthwise: bool,
    /// Groups of a convolution that is not depthwise.
    groups: u32,
}

/// Channels, kernel and plane sizes for about `n` output elements: channels halve while one
/// output pixel holds more than `n` elements; the padding keeps the plane ("same").
struct ConvPlan {
    channels: u32,
    out_channels: u32,
    groups: u32,
    pad: u32,
    height: u32,
    width: u32,
    out_height: u32,
    out_width: u32,
}

impl ConvShape {
    fn plan(self, n: u64) -> ConvPlan {
        let (mut channels, mut out_channels) = (self.channels, self.out_channels);
        while u64::from(out_channels) > n && out_channels > 1 {
            out_channels /= 2;
            if self.depthwise {
                channels = out_channels;
            } else if channels >= 8 {
                channels /= 2;
            }
        }
        let [out_height, out_width] = plane(n / u64::from(out_channels));
        let span = self.dilation * (self.kernel - 1);
        let pad = span / 2;
        // (OH − 1)·S + D·(K − 1) + 1 − 2P gives back OH rows.
        let extent = |out: u32| (out - 1) * self.stride + span + 1 - 2 * pad;
        ConvPlan {
            channels,
            out_channels,
            groups: if self.depthwise {
                channels
            } else {
                self.groups
            },
            pad,
            height: extent(out_height),
            width: extent(out_width),
            out_height,
            out_width,
        }
    }
}

fn conv2d(name: &'static str, shape: ConvShape) -> Config {
    config("conv2d", name, move |rng, n| {
        let plan = shape.plan(n);
        let x = [1, plan.channels, plan.height, plan.width];
        let w = [
            plan.out_channels,
            plan.channels / plan.groups,
            shape.kernel,
            shape.kernel,
        ];
        let (k, s, d, p) = (
            i64::from(shape.kernel),
            i64::from(shape.stride),
            i64::from(shape.dilation),
            i64::from(plan.pad),
        );
        Graph::new()
            .input(&x, 8, rng.int8(elements(&x)))
            .param(&w, 8, rng.int8(elements(&w)))
            .param(
                &[plan.out_channels],
                8,
                rng.int8(u64::from(plan.out_channels)),
            )
            .attr("channels", int(i64::from(plan.out_channels)))
            .attr("kernel_size", ints(&[k, k]))
            .attr("strides", ints(&[s, s]))
            .attr("dilation", ints(&[d, d]))
            .attr("padding", ints(&[p, p]))
            .attr("groups", int(i64::from(plan.groups)))
            .node("conv2d")
    })
}

/// conv2d with a 3×3 kernel and padding 64 around a small input, so that the zero-padded copy
/// of the input would exceed twice the input and the kernel takes its checked gather:
/// `channels` input channels (`depthwise`: as many output channels, one group each), output
/// channels growing with `n`, and an output plane of at least 127 × 127.
fn conv2d_padded(name: &'static str, channels: u32, depthwise: bool) -> Config {
    const PAD: u32 = 64;
    config("conv2d", name, move |rng, n| {
        let out_channels = if depthwise {
            channels
        } else {
            (n / 16_384).clamp(1, 16) as u32
        };
        let side = (n / u64::from(out_channels))
            .isqrt()
            .max(2 * u64::from(PAD) - 1) as u32;
        let extent = side + 2 - 2 * PAD;
        let groups = if depthwise { channels } else { 1 };
        let x = [1, channels, extent, extent];
        let w = [out_channels, channels / groups, 3, 3];
        Graph::new()
            .input(&x, 8, rng.int8(elements(&x)))
            .param(&w, 8, rng.int8(elements(&w)))
            .param(&[out_channels], 8, rng.int8(u64::from(out_channels)))
            .attr("channels", int(i64::from(out_channels)))
            .attr("kernel_size", ints(&[3, 3]))
            .attr("padding", ints(&[i64::from(PAD), i64::from(PAD)]))
            .attr("groups", int(i64::from(groups)))
            .node("conv2d")
    })
}

/// `op` (`concatenate` or CINN `Concat`) of two matrices of about `n` / 2 elements along
/// `axis`.
fn concat_pair(op: &'static str, name: &'static str, axis: i64) -> Config {
    config(op, name, move |rng, n| {
        let x = matrix(n / 2);
        Graph::new()
            .input(&x, 8, rng.int8(elements(&x)))
            .input(&x, 8, rng.int8(elements(&x)))
            .attr("axis", int(axis))
            .node(op)
    })
}

/// The operands of a CINN `Conv` of `conv_type` with data `x`, weight `w` and output `y`:
/// forward reads x (input) and w (parameter), backward_data w and grad_y, backward_filter x and
/// grad_y; the backward types name the shape they produce.
fn conv_operands(rng: &mut Rng, conv_type: &str, x: [u32; 4], w: [u32; 4], y: [u32; 4]) -> Graph {
    match conv_type {
        "backward_data" => Graph::new()
            .param(&w, 8, rng.int8(elements(&w)))
            .input(&y, 8, rng.int8(elements(&y)))
            .attr("output_shape", ints(&x.map(i64::from))),
        "backward_filter" => Graph::new()
            .input(&x, 8, rng.int8(elements(&x)))
            .input(&y, 8, rng.int8(elements(&y)))
            .attr("output_shape", ints(&w.map(i64::from))),
        _ => Graph::new()
            .input(&x, 8, rng.int8(elements(&x)))
            .param(&w, 8, rng.int8(elements(&w))),
    }
}

/// CINN `Conv` of one type with a 1×41 kernel over an input one column wide, padded by 20 on
/// each side: 40 of the 41 columns of every window row fall in the padding, the loops' worst
/// case. `n` counts the products the loops visit, in bounds or not.
fn cinn_conv_wide_padding(name: &'static str, conv_type: &'static str) -> Config {
    config("Conv", name, move |rng, n| {
        let rows = (n / (4 * 4 * 41)).clamp(1, 1 << 16) as u32;
        let x = [1, 4, rows, 1];
        let w = [4, 4, 1, 41];
        let y = [1, 4, rows, 1];
        conv_operands(rng, conv_type, x, w, y)
            .attr("conv_type", text(conv_type))
            .attr("strides", ints(&[1, 1]))
            .attr("dilations", ints(&[1, 1]))
            .attr("paddings", ints(&[0, 20]))
            .attr("groups", int(1))
            .attr("frac_bits", int(8))
            .node("Conv")
    })
}

/// CINN `Conv` of one type; `n` counts the elements of y (forward) or grad_y (backward).
fn cinn_conv(name: &'static str, conv_type: &'static str, shape: ConvShape) -> Config {
    config("Conv", name, move |rng, n| {
        let plan = shape.plan(n);
        let x = [1, plan.channels, plan.height, plan.width];
        let y = [1, plan.out_channels, plan.out_height, plan.out_width];
        let w = [
            plan.out_channels,
            plan.channels / plan.groups,
            shape.kernel,
            shape.kernel,
        ];
        let graph = conv_operands(rng, conv_type, x, w, y);
        let (s, d, p) = (
            i64::from(shape.stride),
            i64::from(shape.dilation),
            i64::from(plan.pad),
        );
        graph
            .attr("conv_type", text(conv_type))
            .attr("strides", ints(&[s, s]))
            .attr("dilations", ints(&[d, d]))
            .attr("paddings", ints(&[p, p]))
            .attr("groups", int(i64::from(plan.groups)))
            .attr("frac_bits", int(8))
            .node("Conv")
    })
}

/// dense with `rows` rows of X and K = `depth_ratio`·N; `n` counts the weight's elements.
fn dense(name: &'static str, rows: u32, depth_ratio: u64) -> Config {
    config("dense", name, move |rng, n| {
        let units = (n / depth_ratio).isqrt().max(1);
        let depth = units * depth_ratio;
        let x = [rows, depth as u32];
        let w = [units as u32, depth as u32];
        Graph::new()
            .input(&x, 8, rng.int8(elements(&x)))
            .param(&w, 8, rng.int8(elements(&w)))
            .param(&[units as u32], 8, rng.int8(units))
            .attr("units", int(units as i64))
            .node("dense")
    })
}

/// max_pool2d with a k×k window, stride s and padding p; `n` counts the elements visited.
fn max_pool(name: &'static str, kernel: u32, stride: u32, pad: u32) -> Config {
    config("max_pool2d", name, move |rng, n| {
        let window = u64::from(kernel * kernel);
        let outputs = (n / window).max(1);
        let channels = 16.min(outputs) as u32;
        let [oh, ow] = plane(outputs / u64::from(channels));
        // Padding at least the window needs enough outputs for a non-empty input.
        let min_out = if 2 * pad >= kernel {
            (2 * pad - kernel) / stride + 2
        } else {
            1
        };
        let (oh, ow) = (oh.max(min_out), ow.max(min_out));
        let extent = |out: u32| (out - 1) * stride + kernel - 2 * pad;
        let x = [1, channels, extent(oh), extent(ow)];
        let (k, s, p) = (i64::from(kernel), i64::from(stride), i64::from(pad));
        Graph::new()
            .input(&x, 8, rng.int8(elements(&x)))
            .attr("pool_size", ints(&[k, k]))
            .attr("strides", ints(&[s, s]))
            .attr("padding", ints(&[p, p]))
            .node("max_pool2d")
    })
}

/// A reduction input: (rows, 64) reduced over `axes` ("last"), every axis ("all"), the first
/// axis of (64, n / 64) ("first"), or the plane of (1, 16, h, w) ("spatial").
fn reduce_input(layout: &str, n: u64) -> Vec<u32> {
    match layout {
        "first" => vec![n.clamp(1, 64) as u32, (n / 64).max(1) as u32],
        "spatial" => nchw(n, 16).to_vec(),
        _ => matrix(n).to_vec(),
    }
}

fn reduce_axes(layout: &str) -> Vec<i64> {
    match layout {
        "last" => vec![1],
        "first" => vec![0],
        "spatial" => vec![2, 3],
        _ => Vec::new(),
    }
}

/// CVM `sum` or `max` over the axes of `layout`.
fn cvm_reduce(op: &'static str, layout: &'static str, name: &'static str) -> Config {
    config(op, name, move |rng, n| {
        let x = reduce_input(layout, n);
        Graph::new()
            .input(&x, 8, rng.int8(elements(&x)))
            .attr("axis", ints(&reduce_axes(layout)))
            .node(op)
    })
}

/// CINN `Reduce` of `kind` over the axes of `layout`.
fn cinn_reduce(name: &'static str, kind: &'static str, layout: &'static str) -> Config {
    config("Reduce", name, move |rng, n| {
        let x = reduce_input(layout, n);
        let count = elements(&x);
        let (precision, data, frac_bits) = if kind == "kProd" {
            // Factors within 2^-12 of 1 keep long products inside int32.
            (32, rng.values(count, ONE - 16, ONE + 16), 16)
        } else {
            (8, rng.int8(count), 0)
        };
        Graph::new()
            .input(&x, precision, data)
            .attr("kind", text(kind))
            .attr("dim", ints(&reduce_axes(layout)))
            .attr("frac_bits", int(frac_bits))
            .node("Reduce")
    })
}

/// One operand of about `n` elements (`matrix`), precision 8, and attributes.
fn int8_unary(
    op: &'static str,
    name: &'static str,
    attrs: Vec<(&'static str, AttrValue)>,
) -> Config {
    config(op, name, move |rng, n| {
        let shape = matrix(n);
        Graph::new()
            .input(&shape, 8, rng.int8(n_of(&shape)))
            .attrs(&attrs)
            .node(op)
    })
}

/// Rows of non_max_suppression: (id, score, x1, y1, x2, y2), boxes of 10 to 100 pixels in a
/// 1000×1000 image, four classes.
fn detection_rows(rng: &mut Rng, rows: u64) -> Vec<i32> {
    let mut data = Vec::with_capacity(rows as usize * 6);
    for _ in 0..rows {
        let (x1, y1) = (rng.range(0, 900), rng.range(0, 900));
        let (w, h) = (rng.range(10, 100), rng.range(10, 100));
        data.extend(
            [rng.range(0, 3), rng.range(0, 1000), x1, y1, x1 + w, y1 + h].map(|v| v as i32),
        );
    }
    data
}

/// generate_proposals_v2 on one image of about `n` anchors (4 per position on a 16-pixel
/// grid), scores and deltas random, Q16, keeping at most `pre_nms_top_n` candidates.
fn synthetic_proposals(rng: &mut Rng, n: u64, pre_nms_top_n: u64) -> Result<Built, String> {
    const ANCHORS: u32 = 4;
    const STRIDE: i64 = 16;
    let [h, w] = plane((n / u64::from(ANCHORS)).max(1));
    let anchors = u64::from(h * w * ANCHORS);
    let pre = anchors.min(pre_nms_top_n);
    let post = (pre / 2).clamp(1, 1000);
    let scores = rng.values(anchors, 0, ONE - 1);
    let deltas: Vec<i32> = (0..anchors)
        .flat_map(|_| {
            [
                rng.range(-ONE / 4, ONE / 4),
                rng.range(-ONE / 4, ONE / 4),
                rng.range(-ONE / 2, ONE / 2),
                rng.range(-ONE / 2, ONE / 2),
            ]
        })
        .map(|v| v as i32)
        .collect();
    let mut boxes = Vec::with_capacity(anchors as usize * 4);
    for row in 0..i64::from(h) {
        for col in 0..i64::from(w) {
            let (cx, cy) = (col * STRIDE + STRIDE / 2, row * STRIDE + STRIDE / 2);
            for size in [16, 32, 64, 128] {
                let half = size / 2;
                boxes
                    .extend([cx - half, cy - half, cx + half, cy + half].map(|v| (v * ONE) as i32));
            }
        }
    }
    let image = [i64::from(h) * STRIDE * ONE, i64::from(w) * STRIDE * ONE].map(|v| v as i32);
    Graph::new()
        .input(&[1, h, w, ANCHORS], 32, scores)
        .input(&[1, h, w, 4 * ANCHORS], 32, deltas)
        .input(&[1, 2], 32, image.to_vec())
        .input(&[h, w, ANCHORS, 4], 32, boxes)
        .input(
            &[h, w, ANCHORS, 4],
            32,
            vec![ONE as i32; anchors as usize * 4],
        )
        .attr("frac_bits", int(16))
        .attr("pre_nms_top_n", int(pre as i64))
        .attr("post_nms_top_n", int(post as i64))
        .attr("nms_thresh", int(ONE / 2))
        .attr("min_size", int(0))
        .attr("eta", int(ONE))
        .attr("pixel_offset", flag(false))
        .node("generate_proposals_v2")
}

/// The realistic proposals case of `fixtures/models/proposals` (N = 2, H = 54, W = 40, A = 15,
/// pre 2000, post 1000), read from its files.
fn fixture_proposals() -> Result<Built, String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/models/proposals");
    let loaded = cvm_cli::load_model_file(&dir.join("model.json")).map_err(|e| e.to_string())?;
    let model = loaded
        .model
        .ok_or_else(|| format!("{} does not decode", dir.display()))?;
    let inputs = ["scores", "bbox_deltas", "im_shape", "anchors", "variances"]
        .iter()
        .map(|name| {
            cvm_cli::inputs::read_input(&dir.join(format!("{name}.npy"))).map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Built { model, inputs })
}

/// The CINN unary primitives: ranges in Q16 inside each function's domain, where it computes
/// rather than saturates, and whether it
/// takes `frac_bits`.
const CINN_UNARY: &[(&str, i64, i64, bool)] = &[
    ("Abs", -1000 * ONE, 1000 * ONE, true),
    ("Acos", -ONE, ONE, true),
    ("Acosh", ONE, 1000 * ONE, true),
    ("Asin", -ONE, ONE, true),
    ("Asinh", -1000 * ONE, 1000 * ONE, true),
    ("Atan", -100 * ONE, 100 * ONE, true),
    ("Atanh", -ONE + 1, ONE - 1, true),
    ("BitwiseNot", -1000 * ONE, 1000 * ONE, false),
    ("Ceil", -1000 * ONE, 1000 * ONE, true),
    ("Cos", -10 * ONE, 10 * ONE, true),
    ("Cosh", -10 * ONE, 10 * ONE, true),
    ("Erf", -9 * ONE / 2, 9 * ONE / 2, true),
    ("Exp", -10 * ONE, 10 * ONE, true),
    ("Floor", -1000 * ONE, 1000 * ONE, true),
    ("Identity", -1000 * ONE, 1000 * ONE, true),
    ("IsFinite", -1000 * ONE, 1000 * ONE, true),
    ("IsInf", -1000 * ONE, 1000 * ONE, true),
    ("IsNan", -1000 * ONE, 1000 * ONE, true),
    ("Log", 1, 1000 * ONE, true),
    ("Log10", 1, 1000 * ONE, true),
    ("Log2", 1, 1000 * ONE, true),
    ("LogicalNot", -1000 * ONE, 1000 * ONE, false),
    ("Negative", -1000 * ONE, 1000 * ONE, true),
    ("Round", -1000 * ONE, 1000 * ONE, true),
    ("Rsqrt", 1, 1000 * ONE, true),
    ("Sign", -1000 * ONE, 1000 * ONE, true),
    ("Sin", -10 * ONE, 10 * ONE, true),
    ("Sinh", -10 * ONE, 10 * ONE, true),
    ("Sqrt", 0, 1000 * ONE, true),
    // Away from the poles at odd multiples of π/2, where the result leaves int32.
    ("Tan", -3 * ONE / 2, 3 * ONE / 2, true),
    ("Tanh", -10 * ONE, 10 * ONE, true),
    ("Trunc", -1000 * ONE, 1000 * ONE, true),
];

const Q16: &[(&str, i64)] = &[("frac_bits", 16)];
const WIDE: (i64, i64) = (-1000 * ONE, 1000 * ONE);

/// The CINN binary primitives (without `Dot`): operand ranges in Q16 where results fit int32
/// and divisors are not zero, and attributes.
fn cinn_binary() -> Vec<Config> {
    let hundred = (-100 * ONE, 100 * ONE);
    let divisor = (ONE, 100 * ONE);
    let mut configs = vec![
        binary("Add", "", Second::Same, 32, WIDE, WIDE, Q16),
        binary("Add", "row", Second::Row, 32, WIDE, WIDE, Q16),
        binary("BitwiseAnd", "", Second::Same, 32, WIDE, WIDE, &[]),
        binary("BitwiseOr", "", Second::Same, 32, WIDE, WIDE, &[]),
        binary("BitwiseXor", "", Second::Same, 32, WIDE, WIDE, &[]),
    ];
    for op in ["Div", "FloorDiv", "FloorMod"] {
        configs.push(signed_divisor(op, hundred, divisor));
    }
    configs.extend([
        config("LeftShift", "", |rng, n| {
            let shape = matrix(n);
            Graph::new()
                .input(&shape, 32, rng.values(n_of(&shape), WIDE.0, WIDE.1))
                .attr("shift", int(3))
                .node("LeftShift")
        }),
        binary("LogicalAnd", "", Second::Same, 32, WIDE, WIDE, &[]),
        binary("LogicalOr", "", Second::Same, 32, WIDE, WIDE, &[]),
        binary("LogicalXor", "", Second::Same, 32, WIDE, WIDE, &[]),
        binary("Max", "", Second::Same, 32, WIDE, WIDE, Q16),
        binary("Min", "", Second::Same, 32, WIDE, WIDE, Q16),
        signed_divisor("Mod", hundred, divisor),
        binary("Mul", "", Second::Same, 32, hundred, hundred, Q16),
        // x^x over (0, 4]: the general path exp(y·ln x) that Power's weight pays for.
        config("Power", "x^x", |rng, n| {
            let shape = matrix(n);
            Graph::new()
                .input(&shape, 32, rng.values(n_of(&shape), 1, 4 * ONE))
                .again()
                .attr("frac_bits", int(16))
                .node("Power")
        }),
        config("RightShift", "", |rng, n| {
            let shape = matrix(n);
            Graph::new()
                .input(&shape, 32, rng.values(n_of(&shape), WIDE.0, WIDE.1))
                .attr("shift", int(3))
                .node("RightShift")
        }),
        binary("Sub", "", Second::Same, 32, WIDE, WIDE, Q16),
    ]);
    configs
}

/// A division-like primitive: dividends in `x`, divisors of magnitude in `y`, either sign.
fn signed_divisor(op: &'static str, x: (i64, i64), y: (i64, i64)) -> Config {
    config(op, "", move |rng, n| {
        let shape = matrix(n);
        let count = n_of(&shape);
        let dividends = rng.values(count, x.0, x.1);
        let divisors = signed_magnitudes(rng, count, y.0, y.1);
        Graph::new()
            .input(&shape, 32, dividends)
            .input(&shape, 32, divisors)
            .attr("frac_bits", int(16))
            .node(op)
    })
}

fn cvm_configs() -> Vec<Config> {
    let mut configs = vec![
        cvm_reduce("sum", "last", "last axis"),
        cvm_reduce("sum", "first", "first axis"),
        cvm_reduce("sum", "all", "all axes"),
        cvm_reduce("sum", "spatial", "spatial"),
        cvm_reduce("max", "last", "last axis"),
        cvm_reduce("max", "all", "all axes"),
        cvm_reduce("max", "spatial", "spatial"),
    ];
    for op in [
        "broadcast_add",
        "broadcast_sub",
        "broadcast_mul",
        "broadcast_div",
        "broadcast_max",
        "broadcast_greater",
    ] {
        configs.push(binary(
            op,
            "same shape",
            Second::Same,
            8,
            (-127, 127),
            (-127, 127),
            &[],
        ));
        configs.push(binary(
            op,
            "row",
            Second::Row,
            8,
            (-127, 127),
            (-127, 127),
            &[],
        ));
    }
    let conv = |channels, out_channels, kernel, stride, dilation, depthwise| ConvShape {
        channels,
        out_channels,
        kernel,
        stride,
        dilation,
        depthwise,
        groups: 1,
    };
    configs.extend([
        conv2d("3x3 16->16", conv(16, 16, 3, 1, 1, false)),
        conv2d("3x3 64->64", conv(64, 64, 3, 1, 1, false)),
        conv2d("1x1 64->64", conv(64, 64, 1, 1, 1, false)),
        conv2d("depthwise 3x3 32", conv(32, 32, 3, 1, 1, true)),
        conv2d("depthwise 3x3 stride 2 32", conv(32, 32, 3, 2, 1, true)),
        conv2d("depthwise 5x5 32", conv(32, 32, 5, 1, 1, true)),
        conv2d("depthwise 3x3 stride 3 32", conv(32, 32, 3, 3, 1, true)),
        conv2d("3x3 16->1", conv(16, 1, 3, 1, 1, false)),
        conv2d("5x5 stride 2 3->16", conv(3, 16, 5, 2, 1, false)),
        conv2d("3x3 dilation 2 16->16", conv(16, 16, 3, 1, 2, false)),
        conv2d(
            "3x3 16->16 in 4 groups",
            ConvShape {
                groups: 4,
                ..conv(16, 16, 3, 1, 1, false)
            },
        ),
        conv2d_padded("3x3 pad 64 4->OC, checked gather", 4, false),
        conv2d_padded("depthwise 3x3 pad 64 16, checked gather", 16, true),
        dense("1 row", 1, 1),
        dense("2 rows", 2, 1),
        dense("16 rows", 16, 1),
        dense("1 row, K = 4N", 1, 4),
        int8_unary("relu", "", Vec::new()),
        max_pool("2x2 stride 2", 2, 2, 0),
        max_pool("3x3 stride 2 pad 1", 3, 2, 1),
        max_pool("3x3 stride 1 pad 1", 3, 1, 1),
        max_pool("5x5 stride 1 pad 2", 5, 1, 2),
        max_pool("41x41 stride 1 pad 40", 41, 1, 40),
        config(
            "max_pool2d",
            "41x41 stride 1 pad 40 over 24x24",
            |rng, n| {
                // 64 × 64 outputs per channel, each window over up to 24 × 24 input values.
                let channels = (n / (64 * 64 * 576)).clamp(1, 16) as u32;
                let x = [1, channels, 24, 24];
                Graph::new()
                    .input(&x, 8, rng.int8(elements(&x)))
                    .attr("pool_size", ints(&[41, 41]))
                    .attr("strides", ints(&[1, 1]))
                    .attr("padding", ints(&[40, 40]))
                    .node("max_pool2d")
            },
        ),
        config("upsampling", "scale 2", |rng, n| {
            let x = nchw(n / 4, 16);
            Graph::new()
                .input(&x, 8, rng.int8(elements(&x)))
                .attr("scale", int(2))
                .node("upsampling")
        }),
        int8_unary("abs", "", Vec::new()),
        int8_unary("cvm_precision", "", Vec::new()),
        binary(
            "elemwise_add",
            "",
            Second::Same,
            8,
            (-127, 127),
            (-127, 127),
            &[],
        ),
        binary(
            "elemwise_sub",
            "",
            Second::Same,
            8,
            (-127, 127),
            (-127, 127),
            &[],
        ),
        int8_unary("negative", "", Vec::new()),
        int8_unary("clip", "", vec![("a_min", int(-50)), ("a_max", int(50))]),
        int8_unary("cvm_clip", "", vec![("precision", int(6))]),
        int8_unary(
            "cvm_left_shift",
            "",
            vec![("precision", int(16)), ("shift_bit", int(4))],
        ),
        config("cvm_right_shift", "", |rng, n| {
            let shape = matrix(n);
            Graph::new()
                .input(&shape, 16, rng.values(n_of(&shape), -32767, 32767))
                .attr("precision", int(8))
                .attr("shift_bit", int(8))
                .node("cvm_right_shift")
        }),
    ]);
    configs.extend(transform_configs());
    configs.extend([
        config("get_valid_counts", "", |rng, n| {
            let rows = (n / 6).max(1);
            let mut data = detection_rows(rng, rows);
            for row in data.chunks_mut(6) {
                row[1] -= 500;
            }
            Graph::new()
                .input(&[1, rows as u32, 6], 16, data)
                .attr("score_threshold", int(0))
                .node("get_valid_counts")
        }),
        // n counts pairs of rows: N = √n rows.
        config("non_max_suppression", "", |rng, n| {
            let rows = n.isqrt().max(2);
            Graph::new()
                .input(&[1, rows as u32, 6], 16, detection_rows(rng, rows))
                .param(&[1], 16, vec![rows as i32])
                .attr("iou_threshold", int(50))
                .node("non_max_suppression")
        }),
    ]);
    configs
}

fn transform_configs() -> Vec<Config> {
    vec![
        config("repeat", "axis 1, 2 times", |rng, n| {
            let x = matrix(n / 2);
            Graph::new()
                .input(&x, 8, rng.int8(elements(&x)))
                .attr("axis", int(1))
                .attr("repeats", int(2))
                .node("repeat")
        }),
        config("tile", "2x2", |rng, n| {
            let x = matrix(n / 4);
            Graph::new()
                .input(&x, 8, rng.int8(elements(&x)))
                .attr("reps", ints(&[2, 2]))
                .node("tile")
        }),
        config("flatten", "", |rng, n| {
            let x = nchw(n, 16);
            Graph::new()
                .input(&x, 8, rng.int8(elements(&x)))
                .node("flatten")
        }),
        concat_pair("concatenate", "2 inputs, axis 1", 1),
        config(
            "concatenate",
            "16 inputs of one column, axis 1",
            |rng, n| {
                let x = [(n / 16).max(1) as u32, 1];
                let mut graph = Graph::new();
                for _ in 0..16 {
                    graph = graph.input(&x, 8, rng.int8(elements(&x)));
                }
                graph.attr("axis", int(1)).node("concatenate")
            },
        ),
        int8_unary("expand_dims", "", vec![("axis", int(1))]),
        int8_unary("reshape", "", vec![("shape", ints(&[-1]))]),
        config("squeeze", "", |rng, n| {
            let [rows, cols] = matrix(n);
            let x = [rows, 1, cols];
            Graph::new()
                .input(&x, 8, rng.int8(elements(&x)))
                .attr("axis", ints(&[1]))
                .node("squeeze")
        }),
        int8_unary("transpose", "2-D", vec![("axes", ints(&[1, 0]))]),
        config("transpose", "NCHW to NHWC", |rng, n| {
            let x = nchw(n, 16);
            Graph::new()
                .input(&x, 8, rng.int8(elements(&x)))
                .attr("axes", ints(&[0, 2, 3, 1]))
                .node("transpose")
        }),
        config("strided_slice", "stride 2", |rng, n| {
            let [rows, cols] = matrix(n);
            let x = [rows, 2 * cols];
            Graph::new()
                .input(&x, 8, rng.int8(elements(&x)))
                .attr("begin", ints(&[0, 0]))
                .attr("end", ints(&[i64::from(rows), i64::from(2 * cols)]))
                .attr("stride", ints(&[1, 2]))
                .node("strided_slice")
        }),
        config("slice_like", "half the columns", |rng, n| {
            let [rows, cols] = matrix(n);
            let x = [rows, 2 * cols];
            Graph::new()
                .input(&x, 8, rng.int8(elements(&x)))
                .param(&[rows, cols], 8, vec![0; (rows * cols) as usize])
                .attr("axis", ints(&[1]))
                .node("slice_like")
        }),
        config("take", "rows of a table", |rng, n| {
            let width = n.clamp(1, 64) as u32;
            let rows = (n / u64::from(width)).max(1);
            Graph::new()
                .param(&[1024, width], 8, rng.int8(1024 * u64::from(width)))
                .input(&[rows as u32], 16, rng.values(rows, 0, 1023))
                .attr("axis", int(0))
                .node("take")
        }),
        config("take", "flat", |rng, n| {
            let shape = matrix(n);
            Graph::new()
                .param(&[64, 64], 8, rng.int8(4096))
                .input(&shape, 16, rng.values(n_of(&shape), 0, 4095))
                .node("take")
        }),
        config("cvm_lut", "256 entries", |rng, n| {
            let shape = matrix(n);
            Graph::new()
                .input(&shape, 10, rng.values(n_of(&shape), 0, 255))
                .param(&[256], 8, rng.int8(256))
                .attr("in_dim", int(256))
                .node("cvm_lut")
        }),
        config("where", "", |rng, n| {
            let shape = matrix(n);
            let count = n_of(&shape);
            Graph::new()
                .input(&shape, 8, rng.values(count, -1, 1))
                .input(&shape, 8, rng.int8(count))
                .input(&shape, 8, rng.int8(count))
                .node("where")
        }),
    ]
}

fn cinn_configs() -> Vec<Config> {
    let mut configs: Vec<Config> = CINN_UNARY
        .iter()
        .map(|&(op, low, high, fixed)| unary(op, 32, (low, high), if fixed { Q16 } else { &[] }))
        .collect();
    configs.extend(cinn_binary());
    let conv = |channels, out_channels, kernel, depthwise| ConvShape {
        channels,
        out_channels,
        kernel,
        stride: 1,
        dilation: 1,
        depthwise,
        groups: 1,
    };
    configs.extend([
        config("Dot", "(M, 64)·(64, 64)", |rng, n| {
            let rows = (n / 64).max(1) as u32;
            Graph::new()
                .input(&[rows, 64], 8, rng.int8(u64::from(rows) * 64))
                .param(&[64, 64], 8, rng.int8(4096))
                .node("Dot")
        }),
        config("Dot", "vectors", |rng, n| {
            Graph::new()
                .input(&[n as u32], 8, rng.int8(n))
                .param(&[n as u32], 8, rng.int8(n))
                .node("Dot")
        }),
        Config {
            op: "ConstScalar",
            name: "",
            fixed_class: Some(TINY.name),
            build: Box::new(|_, _| {
                Graph::new()
                    .attr("value", int(3 * ONE / 2))
                    .attr("frac_bits", int(16))
                    .node("ConstScalar")
            }),
        },
        config("BnGradBiasScale", "NCHW, 16 channels", |rng, n| {
            let x = nchw(n, 16);
            let count = elements(&x);
            Graph::new()
                .input(&x, 8, rng.int8(count))
                .input(&x, 8, rng.int8(count))
                .param(&[x[1]], 8, rng.int8(u64::from(x[1])))
                .attr("frac_bits", int(8))
                .node("BnGradBiasScale")
        }),
        config("BnMeanVariance", "NCHW, 16 channels", |rng, n| {
            let x = nchw(n, 16);
            Graph::new()
                .input(&x, 8, rng.int8(elements(&x)))
                .attr("frac_bits", int(8))
                .node("BnMeanVariance")
        }),
        config("BroadcastTo", "row to matrix", |rng, n| {
            let [rows, cols] = matrix(n);
            Graph::new()
                .input(&[cols], 8, rng.int8(u64::from(cols)))
                .attr("out_shape", ints(&[i64::from(rows), i64::from(cols)]))
                .attr("broadcast_axes", ints(&[1]))
                .node("BroadcastTo")
        }),
        config("Compare", "kLt", |rng, n| {
            let shape = matrix(n);
            let count = n_of(&shape);
            Graph::new()
                .input(&shape, 8, rng.int8(count))
                .input(&shape, 8, rng.int8(count))
                .attr("kind", text("kLt"))
                .node("Compare")
        }),
        config("Compare", "kLt, a row broadcast", |rng, n| {
            let shape = matrix(n);
            let row = [shape[1]];
            Graph::new()
                .input(&shape, 8, rng.int8(n_of(&shape)))
                .input(&row, 8, rng.int8(n_of(&row)))
                .attr("kind", text("kLt"))
                .node("Compare")
        }),
        concat_pair("Concat", "2 inputs, axis 0", 0),
        cinn_conv("forward 3x3 16->16", "forward", conv(16, 16, 3, false)),
        cinn_conv_wide_padding("forward 1x41 over one padded column", "forward"),
        cinn_conv_wide_padding(
            "backward_filter 1x41 over one padded column",
            "backward_filter",
        ),
        cinn_conv("forward 1x1 64->64", "forward", conv(64, 64, 1, false)),
        cinn_conv("forward depthwise 3x3 32", "forward", conv(32, 32, 3, true)),
        cinn_conv(
            "backward_data 3x3 16->16",
            "backward_data",
            conv(16, 16, 3, false),
        ),
        cinn_conv(
            "backward_filter 3x3 16->16",
            "backward_filter",
            conv(16, 16, 3, false),
        ),
        cinn_reduce("kSum last axis", "kSum", "last"),
        cinn_reduce("kSum all axes", "kSum", "all"),
        cinn_reduce("kProd last axis", "kProd", "last"),
        cinn_reduce("kMax first axis", "kMax", "first"),
        cinn_reduce("kMin all axes", "kMin", "all"),
        int8_unary("Reshape", "", vec![("shape", ints(&[-1]))]),
        int8_unary("Reverse", "axis 1", vec![("axis", ints(&[1]))]),
        config("Select", "", |rng, n| {
            let shape = matrix(n);
            let count = n_of(&shape);
            Graph::new()
                .input(&shape, 8, rng.values(count, -1, 1))
                .input(&shape, 8, rng.int8(count))
                .input(&shape, 8, rng.int8(count))
                .node("Select")
        }),
        config("Slice", "half the columns", |rng, n| {
            let [rows, cols] = matrix(n);
            let x = [rows, 2 * cols];
            Graph::new()
                .input(&x, 8, rng.int8(elements(&x)))
                .attr("axes", ints(&[1]))
                .attr("starts", ints(&[0]))
                .attr("ends", ints(&[i64::from(cols)]))
                .node("Slice")
        }),
        int8_unary("Transpose", "2-D", vec![("axis", ints(&[1, 0]))]),
        config("generate_proposals_v2", "synthetic, 1 image", |rng, n| {
            synthetic_proposals(rng, n, 2000)
        }),
        config(
            "generate_proposals_v2",
            "synthetic, 1 image, pre_nms_top_n 8",
            |rng, n| synthetic_proposals(rng, n, 8),
        ),
        Config {
            op: "generate_proposals_v2",
            name: "fixtures/models/proposals",
            fixed_class: Some("realistic"),
            build: Box::new(|_, _| fixture_proposals()),
        },
    ]);
    configs
}

/// Every configuration, in the order of the operator table.
///
/// # Errors
/// When an operator of `OPS` has no configuration, or a configuration names an operator that
/// `OPS` does not have: the calibration must cover the whole table.
pub fn configs() -> Result<Vec<Config>, String> {
    let mut all = cvm_configs();
    all.extend(cinn_configs());
    if let Some(unknown) = all.iter().find(|c| ops::by_name(c.op).is_none()) {
        return Err(format!(
            "calibration configuration {} names no operator of OPS",
            unknown.label()
        ));
    }
    let missing: Vec<&str> = OPS
        .iter()
        .filter(|op| !all.iter().any(|c| c.op == op.name))
        .map(|op| op.name)
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "no calibration configuration for {} operator(s) of OPS: {}",
            missing.len(),
            missing.join(", ")
        ));
    }
    let position = |name: &str| OPS.iter().position(|op| op.name == name);
    all.sort_by_key(|c| position(c.op));
    Ok(all)
}
