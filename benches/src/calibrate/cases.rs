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

mod activation;
mod batch_matmul;
mod cinn;
mod cvm;
mod layer_norm;
mod requantize;
mod softmax;
mod transform;

use activation::activation_configs;
use batch_matmul::batch_matmul_configs;
use cinn::cinn_configs;
use cvm::cvm_configs;
use layer_norm::layer_norm_configs;
use requantize::requantize_configs;
use softmax::softmax_configs;
use transform::transform_configs;

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

/// The class of the configurations built once at the shapes of a GPT-2-small block (T = 128,
/// d = 768, 12 heads of 64, MLP 3072).
pub const GPT2: &str = "gpt-2";

/// A configuration built once at a GPT-2-small shape, under the class [`GPT2`].
fn gpt2(
    op: &'static str,
    name: &'static str,
    build: impl Fn(&mut Rng) -> Result<Built, String> + 'static,
) -> Config {
    Config {
        op,
        name,
        fixed_class: Some(GPT2),
        build: Box::new(move |rng, _| build(rng)),
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

/// Every configuration, in the order of the operator table.
///
/// # Errors
/// When an operator of `OPS` has no configuration, or a configuration names an operator that
/// `OPS` does not have: the calibration must cover the whole table.
pub fn configs() -> Result<Vec<Config>, String> {
    let mut all = cvm_configs();
    all.extend(cinn_configs());
    all.extend(requantize_configs());
    all.extend(activation_configs());
    all.extend(batch_matmul_configs());
    all.extend(softmax_configs());
    all.extend(layer_norm_configs());
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
